"""Benchmarks; results go to bench-results/<name>.json (and are quoted in docs/benchmarks.md).

    tools/bench rebalance [--members 10 --partitions 100 --changes 20]
    tools/bench storm [--sizes 20,50 --rounds 3 --partitions 100 --changes 6 --gap-window 3]
    tools/bench throughput [--messages 200000 --rounds 3 --no-jvm]
    tools/bench stack [--rounds 3]
    tools/bench exporter [--groups 1000 --partitions 100 --topics 10]

rebalance (range and roundrobin: pykafka has no sticky) and storm add pykafka 2.8.0's
BalancedConsumer as a peer row (tools/bench_pykafka.py; ``--no-pykafka`` leaves it out), and
the JVM 1.1.1 consumer, kafka-node 3.0.1 and Go's consumergroup (tools/bench_peers.py;
``--peers none`` leaves them out). storm runs zkconsumer's members without and with fetchers
and measures one idle member's CPU per backend and the JVM's (``--idle-s 0`` skips it).
Each benchmark starts its own local stack (or uses ZKCONSUMER_ZOOKEEPER/ZKCONSUMER_BOOTSTRAP).
Goals are checked and reported in the JSON (``goal_met``), never asserted in tests.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient

from tools import (
    bench_exporter,
    bench_peers,
    bench_pykafka,  # pykafka itself is imported only when a row runs
    bench_spark,
    bench_stack,
    bench_throughput,
)
from tools.bench_common import (
    Made,
    load_at_start,
    load_average,
    measured_commit,
    progress,
    stack,
    write_result,
)
from tools.bench_procs import MemberProcess, Spawned, close_all
from zkconsumer import (
    ConsumerConfig,
    ConsumerRebalanceListener,
    ConsumerTimeoutException,
    ZookeeperConsumerConnector,
)
from zkconsumer.stack.testing import NullFetcher, create_topic, expected_owners, wait_until
from zkconsumer.zk import paths as zp


def _owners_async(zk: KazooClient, group: str, topic: str, partitions: int) -> dict[int, str]:
    futures = [(p, zk.get_async(zp.owner_path(group, topic, p))) for p in range(partitions)]
    out = {}
    for p, f in futures:
        try:
            out[p] = f.get(timeout=5)[0].decode()
        except Exception:  # noqa: BLE001 - not owned right now
            pass
    return out


#: The pykafka row's changes at most: each of its changes takes seconds (its failed attempts
#: back off), and its p50 is what the comparison needs.
PYKAFKA_CHANGES = 20


def _rebalanced(zk: KazooClient, group: str, topic: str, partitions: int, strategy: str,
                members: list[MemberProcess], before: dict[str, int]
                ) -> dict[str, dict[str, Any]] | None:
    """Every member's stats once each has rebalanced since ``before`` (id -> rebalances)
    and the owner znodes are what the assignor computes for exactly these members; else
    None."""
    stats = {m.id: m.send("stats") for m in members}
    if any(s["rebalances"] <= before.get(i, 0) for i, s in stats.items()):
        return None
    if sorted(zk.get_children(zp.ids_dir(group))) != sorted(stats):
        return None
    expected = expected_owners(zk, group, topic, strategy)
    if _owners_async(zk, group, topic, partitions) != expected:
        return None
    return stats


def _changes(zk: KazooClient, group: str, topic: str, args: argparse.Namespace,
             members: list[MemberProcess], spare: MemberProcess,
             new_member: Callable[[], MemberProcess]
             ) -> tuple[list[float], list[int], list[float], dict[str, int], list[float]]:
    """Alternate joins (the spare process joins) and leaves (the one that joined leaves);
    each timed from the change (in the member's process) to the end of the last rebalance
    it caused, once the owner znodes show the new assignment. The first ``args.warmup``
    changes are timed apart (returned last): right after the group's start its members
    are still starting their fetchers, and run each code path for the first time."""
    warmup: list[float] = []
    latencies: list[float] = []
    zk_ops: list[int] = []
    per_member: list[float] = []
    totals = {"claim_waits": 0, "failures": 0}
    extra: MemberProcess | None = None
    for i in range(args.warmup + args.changes):
        before = {m.id: m.send("stats")["rebalances"] for m in members}
        if extra is None:
            kind, extra = "join", spare
            t0 = extra.join()
            live = [*members, extra]
        else:
            kind = "leave"
            for key in totals:  # its counters go with it
                totals[key] += extra.send("stats")[key]
            t0 = float(extra.send("leave")["at"])
            extra.close()
            extra = None
            live = list(members)
        found: list[dict[str, dict[str, Any]]] = []

        def settled(live: list[MemberProcess] = live, before: dict[str, int] = before,
                    found: list[dict[str, dict[str, Any]]] = found) -> bool:
            stats = _rebalanced(zk, group, topic, args.partitions, args.strategy, live, before)
            if stats is not None:
                found.append(stats)
            return stats is not None

        wait_until(settled, 60, f"assignment after change {i}", every=0.25)
        if kind == "leave":
            # The next joiner, started ahead, once the group has settled: an interpreter
            # starting during the change would take the CPU the rebalance is timed on.
            spare = new_member()
        stats = found[-1]
        rebalanced = {i: s for i, s in stats.items() if s["rebalances"] > before.get(i, 0)}
        dt = max(s["done_at"] for s in rebalanced.values()) - t0
        ops = sum(s["zk_ops"] for s in rebalanced.values())
        if i < args.warmup:
            warmup.append(dt)
            progress(f"warm-up change {i + 1}/{args.warmup} ({kind}): {dt * 1000:.0f} ms")
            continue
        latencies.append(dt)
        zk_ops.append(ops)
        per_member.append(ops / max(1, len(rebalanced)))
        progress(f"change {i + 1 - args.warmup}/{args.changes} ({kind}): {dt * 1000:.0f} ms, "
                 f"{ops} ZooKeeper ops over the members that rebalanced")
    for m in [*members, *([extra] if extra is not None else [])]:
        for key in totals:
            totals[key] += m.send("stats")[key]
    return latencies, zk_ops, per_member, totals, warmup


def _peer_rows(args: argparse.Namespace) -> list[str]:
    """The issue-42 peers asked for (``--peers``: names, ``all`` or ``none``)."""
    if args.peers == "none":
        return []
    if args.peers == "all":
        return bench_peers.peer_names()
    names: list[str] = str(args.peers).split(",")
    unknown = [n for n in names if n not in bench_peers.PEERS]
    if unknown:
        raise SystemExit(f"tools/bench: unknown peer {', '.join(unknown)} (known: "
                         f"{', '.join(bench_peers.peer_names())}, all, none)")
    return names


def bench_rebalance(args: argparse.Namespace) -> None:
    pykafka_row = args.strategy in bench_pykafka.STRATEGIES and not args.no_pykafka
    if pykafka_row:
        bench_pykafka.require()  # before the run, not after zkconsumer's row
    made = Made()
    with stack(made) as (zk_addr, bootstrap):
        topic = f"bench-rb-{int(time.time())}"
        group = f"bench-rb-{int(time.time())}"
        made.topics.add(topic)
        made.groups.add(group)
        create_topic(bootstrap, topic, args.partitions)
        zk = KazooClient(hosts=zk_addr)
        zk.start()
        wait_until(lambda: zk.exists(zp.topic_path(topic)), 30, "topic registered")
        props = {"auto.commit.enable": "false", "zookeeper.session.timeout.ms": "6000",
                 "partition.assignment.strategy": args.strategy}

        spawned = Spawned(lambda: MemberProcess(zk_addr, group, topic, props,
                                                fetch=not args.no_fetch))
        new_member = spawned.new
        members: list[MemberProcess] = []
        spare = new_member()  # started ahead: its interpreter's start is not the join's
        try:
            progress(f"starting {args.members} member processes on {args.partitions} "
                     "partitions")
            for _ in range(args.members):
                m = new_member()
                m.join()
                members.append(m)
            wait_until(lambda: _rebalanced(zk, group, topic, args.partitions, args.strategy,
                                           members, {}) is not None,
                       60, "initial assignment", every=0.05)
            latencies, zk_ops, per_member, totals, warmup = _changes(
                zk, group, topic, args, members, spare, new_member)
        finally:
            spawned.close()
        peers: dict[str, Any] = {}
        if pykafka_row:
            peers["pykafka_balanced"] = bench_pykafka.rebalance_row(
                made, zk, zk_addr, bootstrap, args.members, args.partitions,
                min(args.changes, PYKAFKA_CHANGES), fetch=not args.no_fetch,
                strategy=args.strategy)
        elif not args.no_pykafka:
            peers["pykafka_balanced"] = {"not_run": bench_pykafka.NO_STICKY}
        for name in _peer_rows(args):
            if args.strategy != "range":
                peers[name] = {"not_run": f"{name}'s row runs with range, its only strategy "
                                          "measured here (tools/bench rebalance --strategy "
                                          "range)"}
                continue
            peers[name] = bench_peers.rebalance_row(
                name, made, zk, zk_addr, bootstrap, args.members, args.partitions,
                min(args.changes, bench_peers.PEER_CHANGES))
        zk.stop()
        zk.close()
    conflicts = {"claim_waits": totals["claim_waits"], "failed_attempts": totals["failures"]}
    lat = sorted(latencies)
    p50 = statistics.median(lat)
    rank = min(len(lat) - 1, int(round(0.99 * (len(lat) - 1))))  # nearest rank, from 0
    p99 = lat[rank]
    slower = len(lat) - 1 - rank  # samples slower than p99: 0 below 51 samples
    name = "rebalance" if args.strategy == "range" else f"rebalance_{args.strategy}"
    if (args.members, args.partitions) != (10, 100):
        name += f"_{args.members}x{args.partitions}"
    goal_ms = 150 if args.strategy == "sticky" else 300
    write_result(name, {
        "strategy": args.strategy,
        "members": args.members, "partitions": args.partitions, "changes": args.changes,
        "fetchers": "none" if args.no_fetch else "real",
        # Until 2026-11-28 every member ran in this one process, sharing its interpreter
        # lock; production members are processes of their own, and so are these now.
        "member_processes": "one per member (tools/bench_member.py)",
        "latency_ms": {"p50": round(p50 * 1000, 1), "p99": round(p99 * 1000, 1),
                       "max": round(lat[-1] * 1000, 1),
                       "all": [round(x * 1000, 1) for x in latencies]},
        "zk_ops_per_rebalance": {"median_over_group": statistics.median(zk_ops),
                                 "max_over_group": max(zk_ops),
                                 "per_member_median": round(statistics.median(per_member), 1)},
        # Claims that found the partition still owned and waited for its release (the
        # original's "conflict in ... data"), and failed attempts, over the whole run.
        "conflicts": conflicts,
        "samples": len(lat),  # p99: the nearest rank (of 100, the second slowest)
        "warmup_ms": {"changes": args.warmup, "all": [round(x * 1000, 1) for x in warmup],
                      "note": "timed apart, not in latency_ms: the first changes after the "
                              "group's start, while its members start their fetchers"},
        "join": "timed from the joiner's constructor (in its process, started ahead) to the "
                "end of the last rebalance the join caused, the owner znodes then checked",
        "leave": "timed from the start of the leaver's shutdown() to the end of the last "
                 "rebalance it caused, its closing of fetch clients not waited for",
        # The first goal was p99 < 1 s; issue 30 set these, per strategy.
        "goal": f"p99 < {goal_ms} ms", "goal_met": p99 * 1000 < goal_ms,
        **({} if p99 * 1000 < goal_ms else {"goal_why_not": (
            f"every member wakes and rebalances at each change, all at once: with "
            f"{args.members + 1} member processes, ZooKeeper and the broker on "
            f"{os.cpu_count()} cores that burst of work sets the time"
            + ("" if args.strategy == "sticky" else
               f", and {args.strategy} moves many partitions at each change, whose new "
               "owners wait for their release")
            + f"; p50 {p50 * 1000:.0f} ms {'meets' if p50 * 1000 < goal_ms else 'misses'} the "
            f"goal, p99 is the slowest of {len(lat)} samples"
            + (f" but {slower}" if slower else ""))}),
        **({"peers": peers} if peers else {}),
    })


# ---- storm: many members starting at once; partitions moved per join and leave ----------

#: Why sticky moves more than the issue's bound (docs/rebalance.md proves the leave half; the
#: JSON carries it wherever the goal is not met).
STICKY_WHY = (
    "sticky is a pure function of the membership, with no memory of the last assignment (no "
    "coordinator keeps one): a leave moving only the leaver's partitions, for every set of "
    "members, forces a fixed order of the threads per partition (plain rendezvous hashing), "
    "and by Ramsey's theorem no such orders are balanced for every set (docs/rebalance.md); "
    "the quotas that balance it move a few partitions more (a leave 0 to 11 besides the "
    "leaver's, a join 9 to 20, over 1,000 random groups of 10 x 100)")


@dataclass
class _Group:
    """A group the storm benchmark runs, on one topic: the storms' members are processes
    (:func:`_storm_round`), the movement's are in this process (what moves, not how fast)."""

    zk: KazooClient
    zk_addr: str
    group: str
    topic: str
    partitions: int
    strategy: str
    fetch: bool
    members: list[ZookeeperConsumerConnector] = field(default_factory=list)

    def new_member(self) -> ZookeeperConsumerConnector:
        props = {"zookeeper.connect": self.zk_addr, "group.id": self.group,
                 "auto.commit.enable": "false", "zookeeper.session.timeout.ms": "6000",
                 "rebalance.backoff.ms": "2000", "partition.assignment.strategy": self.strategy}
        factory: Callable[[Any], Any] | None = None if self.fetch else NullFetcher
        return ZookeeperConsumerConnector(ConsumerConfig(props), fetcher_factory=factory)

    def converged(self) -> bool:
        """Every partition owned by a live member, as the assignor computes it for the
        membership in ZooKeeper, and every member's own view agreeing (stable)."""
        ids = self.zk.get_children(zp.ids_dir(self.group))
        if sorted(ids) != sorted(m.consumer_id for m in self.members):
            return False
        owners = _owners_async(self.zk, self.group, self.topic, self.partitions)
        if owners != expected_owners(self.zk, self.group, self.topic, self.strategy):
            return False
        return all({tp.partition: th for tp, th in m.owned_partitions().items()}
                   == {p: th for p, th in owners.items()
                       if th.startswith(m.consumer_id + "-")} for m in self.members)

    def shutdown(self) -> None:
        for m in self.members:
            m.shutdown()
        self.members.clear()


#: The storms with fetchers fetch with the default install's backend (issue 38), named
#: explicitly so that the row measures it whatever the library's default.
STORM_BACKEND = "confluent"


def _storm_round(g: _Group, n: int) -> dict[str, Any]:
    """``n`` member processes started ahead, then all told to join at once; the time from
    then until the group has converged: every partition owned as the assignor computes it
    for the live members, every member's own view agreeing, and no member rebalancing since
    (the end read from the members' clocks, as the rebalance benchmark's)."""
    props = {"auto.commit.enable": "false", "zookeeper.session.timeout.ms": "6000",
             "rebalance.backoff.ms": "2000", "partition.assignment.strategy": g.strategy}
    if g.fetch:
        props["fetch.backend"] = STORM_BACKEND
    procs = [MemberProcess(g.zk_addr, g.group, g.topic, props, fetch=g.fetch)
             for _ in range(n)]
    try:
        for p in procs:
            p.send("stats")  # started: its interpreter's start is not the storm's
        t0 = time.time()
        for p in procs:
            p.post("join")
        for p in procs:
            p.id = p.receive("join")["id"]
        found: list[dict[str, dict[str, Any]]] = []

        def converged() -> bool:
            stats = _storm_converged(g, procs)
            if stats is not None:
                found.append(stats)
            return stats is not None

        wait_until(converged, 120, f"{n} members converged", every=0.1)
        stats = found[-1]
        dt = max(s["done_at"] for s in stats.values()) - t0
        return {"seconds": round(dt, 3),
                "failed_attempts": sum(s["failures"] for s in stats.values()),
                "restarts": sum(s["restarts"] for s in stats.values()),
                "claim_waits": sum(s["claim_waits"] for s in stats.values())}
    finally:
        close_all(procs)


def _storm_converged(g: _Group, procs: list[MemberProcess]
                     ) -> dict[str, dict[str, Any]] | None:
    """The members' stats if the group has converged (see :func:`_storm_round`), read
    twice around the check: a member that rebalanced meanwhile has not settled."""
    before = {p.id: p.send("stats") for p in procs}
    if sorted(g.zk.get_children(zp.ids_dir(g.group))) != sorted(before):
        return None
    owners = _owners_async(g.zk, g.group, g.topic, g.partitions)
    if owners != expected_owners(g.zk, g.group, g.topic, g.strategy):
        return None
    for p in procs:
        mine = {int(k): th for k, th in p.send("owned").items()}
        if mine != {q: th for q, th in owners.items() if th.startswith(p.id + "-")}:
            return None
    after = {p.id: p.send("stats") for p in procs}
    if any(after[i]["rebalances"] != before[i]["rebalances"] for i in after):
        return None
    return after


def _moves(g: _Group, changes: int) -> list[dict[str, Any]]:
    """Alternate joins and leaves (the leaver: a member chosen at random); per change, the
    partitions whose owner changed, against the minimum (a join: the newcomer's share; a
    leave: the leaver's partitions)."""
    rng = random.Random(20261128)
    out = []
    for i in range(changes):
        before = _owners_async(g.zk, g.group, g.topic, g.partitions)
        if i % 2 == 0:
            m = g.new_member()
            g.members.append(m)
            m.create_message_streams({g.topic: 1})
            kind, who = "join", m.consumer_id
        else:
            m = g.members.pop(rng.randrange(len(g.members)))
            m.shutdown()
            kind, who = "leave", m.consumer_id
        wait_until(g.converged, 60, f"converged after change {i}", every=0.01)
        after = _owners_async(g.zk, g.group, g.topic, g.partitions)
        mine = before if kind == "leave" else after
        minimum = sum(1 for th in mine.values() if th.startswith(who + "-"))
        moved = sum(1 for p in before if after.get(p) != before[p])
        out.append({"change": kind, "moved": moved, "minimum": minimum})
        progress(f"{g.strategy} {kind}: {moved} partitions moved (minimum {minimum})")
    return out


def _storm_why_not(n: int, secs: list[float], failed: int, fetch: bool) -> str:
    return (f"{failed} failed attempts and " if failed else "") + (
        f"the slowest of {len(secs)} rounds took {max(secs):.2f} s: {n} member processes "
        f"{'starting their fetchers, ' if fetch else ''}all rebalancing at once, with "
        f"ZooKeeper and the broker, on {os.cpu_count()} cores shared with other work "
        f"(load average {load_average()[0]})")


def _fresh_group(made: Made, zk: KazooClient, zk_addr: str, bootstrap: str, args: Any,
                 strategy: str, stem: str, fetch: bool = False) -> _Group:
    name = f"bench-{stem}-{strategy}-{time.time_ns()}"
    made.topics.add(name)
    made.groups.add(name)
    create_topic(bootstrap, name, args.partitions)
    wait_until(lambda: zk.exists(zp.topic_path(name)), 30, "topic registered")
    return _Group(zk, zk_addr, name, name, args.partitions, strategy, fetch)


class _Deliveries:
    """Per partition, when each message was handed out (drained by one thread per stream),
    and how often each (partition, offset) was."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.times: dict[int, list[float]] = {}
        self.seen: dict[tuple[int, int], int] = {}
        self.threads: list[threading.Thread] = []

    def drain(self, stream: Any) -> None:
        def run() -> None:
            while True:
                try:
                    for m in stream:
                        now = time.monotonic()
                        with self.lock:
                            self.times.setdefault(m.partition, []).append(now)
                            key = (m.partition, m.offset)
                            self.seen[key] = self.seen.get(key, 0) + 1
                    return
                except ConsumerTimeoutException:
                    continue

        t = threading.Thread(target=run, daemon=True)
        t.start()
        self.threads.append(t)

    def duplicates(self) -> int:
        with self.lock:
            return sum(n - 1 for n in self.seen.values())

    def longest_gap(self, partitions: Iterable[int], t0: float, t1: float) -> float:
        """The longest time without a delivery, within [t0, t1], of any of ``partitions``."""
        worst = 0.0
        with self.lock:
            for p in partitions:
                last = t0
                for t in self.times.get(p, []):
                    if t <= t0:
                        continue
                    if t > t1:
                        break
                    worst = max(worst, t - last)
                    last = t
                worst = max(worst, t1 - last)
        return worst


def _producing(bootstrap: str, topic: str, partitions: int, rate: int,
               stop: threading.Event) -> threading.Thread:
    """A thread sending ``rate`` messages a second, round robin over the partitions."""
    from kafka import KafkaProducer

    def run() -> None:
        producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, acks=1,
                                 enable_idempotence=False)
        try:
            i = 0
            start = time.monotonic()
            while not stop.is_set():
                producer.send(topic, b"x" * 100, partition=i % partitions)
                i += 1
                ahead = start + i / rate - time.monotonic()
                if ahead > 0:
                    stop.wait(ahead)
        finally:
            producer.close()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def _gap_run(made: Made, zk: KazooClient, zk_addr: str, bootstrap: str, args: Any,
             full: bool) -> dict[str, Any]:
    """2 members (2 streams each, real fetchers, sticky: most partitions stay) on
    ``args.gap_partitions`` partitions under a steady produce load; a third joins, then
    leaves. The longest delivery gap of the partitions that stay
    with their thread, in a quiet window and around each change, and duplicates per change.
    ``full``: the members have a rebalance listener, which keeps the full (stop-the-world)
    rebalance, for comparison."""
    partitions = args.gap_partitions
    name = f"bench-gap-{'full' if full else 'incr'}-{time.time_ns()}"
    made.topics.add(name)
    made.groups.add(name)
    create_topic(bootstrap, name, partitions)
    wait_until(lambda: zk.exists(zp.topic_path(name)), 30, "topic registered")
    props = {"zookeeper.connect": zk_addr, "group.id": name, "auto.commit.enable": "true",
             "auto.offset.reset": "smallest", "zookeeper.session.timeout.ms": "6000",
             "rebalance.backoff.ms": "2000", "consumer.timeout.ms": "100",
             "partition.assignment.strategy": "sticky"}
    deliveries = _Deliveries()
    members: list[ZookeeperConsumerConnector] = []

    def join() -> ZookeeperConsumerConnector:
        m = ZookeeperConsumerConnector(ConsumerConfig(props))
        if full:
            m.set_consumer_rebalance_listener(ConsumerRebalanceListener())
        for stream in m.create_message_streams({name: 2})[name]:
            deliveries.drain(stream)
        members.append(m)
        return m

    def converged() -> bool:
        owners = _owners_async(zk, name, name, partitions)
        return (len(zk.get_children(zp.ids_dir(name))) == len(members)
                and owners == expected_owners(zk, name, name, "sticky"))

    stop = threading.Event()
    producer = _producing(bootstrap, name, partitions, args.gap_rate, stop)
    try:
        join()
        join()
        wait_until(converged, 60, "2 members converged")
        time.sleep(args.gap_window)  # let delivery settle into its steady pace
        quiet: list[float] = []
        changes = []
        for kind in ("join", "leave") * args.gap_rounds:
            if kind == "join":  # a quiet window first, each round: the machine's noise
                t0 = time.monotonic()
                time.sleep(args.gap_window)
                quiet.append(deliveries.longest_gap(range(partitions), t0, time.monotonic()))
            before = _owners_async(zk, name, name, partitions)
            dup0 = deliveries.duplicates()
            t0 = time.monotonic()
            if kind == "join":
                join()
            else:
                members.pop().shutdown()
            wait_until(converged, 60, f"converged after the {kind}", every=0.01)
            settled_s = time.monotonic() - t0
            time.sleep(args.gap_window)  # the moved partitions' new owners catch up
            after = _owners_async(zk, name, name, partitions)
            staying = [p for p in range(partitions) if before.get(p) == after.get(p)]
            gap = deliveries.longest_gap(staying, t0, time.monotonic())
            changes.append({"change": kind, "converged_ms": round(settled_s * 1000, 1),
                            "partitions_staying": len(staying),
                            "longest_gap_staying_ms": round(gap * 1000, 1),
                            "duplicates": deliveries.duplicates() - dup0})
            progress(f"{'full' if full else 'incremental'} {kind}: {changes[-1]}")
    finally:
        stop.set()
        producer.join(30)
        for m in members:
            m.shutdown()
    gaps = [c["longest_gap_staying_ms"] for c in changes]
    return {"rebalance": "full (a listener is set)" if full else "incremental",
            "longest_gap_quiet_ms": [round(q * 1000, 1) for q in quiet],
            "longest_gap_quiet_ms_median": round(statistics.median(quiet) * 1000, 1),
            "longest_gap_staying_ms_median": round(statistics.median(gaps), 1),
            "longest_gap_staying_ms_max": max(gaps),
            "duplicates": sum(c["duplicates"] for c in changes), "changes": changes}


def bench_storm(args: argparse.Namespace) -> None:
    if not args.no_pykafka:
        bench_pykafka.require()  # before the run, not after zkconsumer's rows
    made = Made()
    sizes = [int(x) for x in args.sizes.split(",")]
    goals_s = {20: 1.0, 50: 3.0}
    storms: list[dict[str, Any]] = []
    storms_fetching: list[dict[str, Any]] = []
    movement: dict[str, Any] = {}
    idle: dict[str, Any] = {}
    with stack(made) as (zk_addr, bootstrap):
        zk = KazooClient(hosts=zk_addr)
        zk.start()
        try:
            for fetch in (False, True):
                for n in sizes:
                    rounds = []
                    for r in range(args.rounds):
                        g = _fresh_group(made, zk, zk_addr, bootstrap, args, "range", "storm",
                                         fetch=fetch)
                        rounds.append(_storm_round(g, n))  # its member processes end with it
                        progress(f"storm of {n}{' with fetchers' if fetch else ''}, round "
                                 f"{r + 1}: {rounds[-1]}")
                    secs = [x["seconds"] for x in rounds]
                    failed = sum(x["failed_attempts"] for x in rounds)
                    goal = goals_s.get(n)
                    met = None if goal is None else max(secs) < goal and failed == 0
                    (storms_fetching if fetch else storms).append({
                        "members": n, "partitions": args.partitions,
                        "fetchers": "real" if fetch else "none", "rounds": rounds,
                        "seconds_median": statistics.median(secs), "seconds_max": max(secs),
                        "failed_attempts": failed,
                        "goal": None if goal is None else f"< {goal:g} s, 0 failed attempts",
                        "goal_met": met,
                        **({"goal_why_not": _storm_why_not(n, secs, failed, fetch)}
                           if met is False else {}),
                    })
            for strategy in ("range", "roundrobin", "sticky") if args.changes > 0 else ():
                g = _fresh_group(made, zk, zk_addr, bootstrap, args, strategy, "moves")
                try:
                    g.members = [g.new_member() for _ in range(args.move_members)]
                    for m in g.members:
                        m.create_message_streams({g.topic: 1})
                    wait_until(g.converged, 60, f"{strategy} group converged")
                    changes = _moves(g, args.changes)
                finally:
                    g.shutdown()
                joins = [c for c in changes if c["change"] == "join"]
                leaves = [c for c in changes if c["change"] == "leave"]
                movement[strategy] = {
                    "changes": changes,
                    "join_moved_max": max(c["moved"] for c in joins),
                    "leave_moved_max": max(c["moved"] for c in leaves),
                    "leave_others_moved_max": max(c["moved"] - c["minimum"] for c in leaves),
                }
            if args.gap_window > 0:
                gaps = [_gap_run(made, zk, zk_addr, bootstrap, args, full)
                        for full in (False, True)]
            if args.idle_s > 0:
                idle = bench_peers.idle_cpu(made, zk, zk_addr, bootstrap, args.idle_s)
            peers: dict[str, Any] = {}
            if not args.no_pykafka:
                peers["pykafka_balanced"] = bench_pykafka.storm_row(
                    made, zk, zk_addr, bootstrap, sizes, args.rounds, args.partitions,
                    fetch=False)
            for name in _peer_rows(args):
                peers[name] = bench_peers.storm_row(name, made, zk, zk_addr, bootstrap, sizes,
                                                    args.rounds, args.partitions)
        finally:
            zk.stop()
            zk.close()
    join_bound = -(-args.partitions // (args.move_members + 1)) + 1
    movement_result: dict[str, Any] = {}
    if movement:  # --changes 0 skips it
        sticky = movement["sticky"]
        sticky_met = (sticky["join_moved_max"] <= join_bound
                      and sticky["leave_others_moved_max"] == 0)
        movement_result = {"movement": {
            "members": args.move_members, "partitions": args.partitions, **movement,
            "sticky_goal": f"a join moves at most ceil(P/(N+1))+1 = {join_bound}; a leave "
                           "only the leaver's partitions",
            "sticky_goal_met": sticky_met,
            **({} if sticky_met else {"sticky_goal_why": STICKY_WHY}),
        }}
    gap_result: dict[str, Any] = {}
    if args.gap_window > 0:
        incr = gaps[0]
        gap_result = {"delivery_gaps": {
            "members": "2, then 3, then 2 (2 streams each, real fetchers, auto-commit, "
                       "sticky)",
            "partitions": args.gap_partitions, "produce_rate_per_s": args.gap_rate,
            "window_s": args.gap_window, "runs": gaps,
            # A partition's gap depends on the produce pace: the quiet window's is the noise.
            "goal": "the staying partitions' longest gap during a join or a leave (median) no "
                    "larger than in a quiet window (median, + 100 ms of noise); duplicates "
                    "only from moved partitions' uncommitted windows (0 here: every change is "
                    "clean and commits first)",
            "goal_met": incr["longest_gap_staying_ms_median"]
            <= incr["longest_gap_quiet_ms_median"] + 100 and incr["duplicates"] == 0,
        }}
    write_result("storm", {
        "fetchers": "storms: none (ZooKeeper coordination alone); storms_with_fetchers: "
                    f"real, each member fetching (fetch.backend={STORM_BACKEND}, the default "
                    "install's) in its own process",
        "storms": storms,
        "storms_with_fetchers": storms_fetching,
        **({"idle_cpu_per_member": idle} if idle else {}),
        **movement_result,
        **gap_result,
        **({"peers": peers} if peers else {}),
    })


def main() -> None:
    parser = argparse.ArgumentParser(prog="tools/bench")
    sub = parser.add_subparsers(dest="name", required=True)
    p = sub.add_parser("rebalance", help="rebalance latency and ZooKeeper operations")
    p.add_argument("--members", type=int, default=10)
    p.add_argument("--partitions", type=int, default=100)
    p.add_argument("--changes", type=int, default=100,
                   help="joins and leaves timed (a p99 needs 100 samples or more; pykafka's "
                        f"row makes {PYKAFKA_CHANGES} at most, each taking seconds)")
    p.add_argument("--warmup", type=int, default=2,
                   help="changes made first and timed apart (warmup_ms), not in the latency")
    p.add_argument("--no-fetch", action="store_true",
                   help="members without fetchers: ZooKeeper coordination alone")
    p.add_argument("--strategy", default="range", choices=("range", "roundrobin", "sticky"),
                   help="partition.assignment.strategy (results: rebalance_<strategy>.json "
                        "but for range, and _<members>x<partitions> but at 10 x 100)")
    p.add_argument("--no-pykafka", action="store_true",
                   help="skip the pykafka peer row (tools/bench_pykafka.py; range and "
                        "roundrobin: pykafka has no sticky)")
    p.add_argument("--peers", default="all",
                   help="issue-42 peer rows (range only): comma-separated names "
                        f"({', '.join(bench_peers.peer_names())}), all or none")
    p.set_defaults(func=bench_rebalance)
    p = sub.add_parser("storm", help="many members starting at once; partitions moved per "
                                     "join and leave, per strategy")
    p.add_argument("--sizes", default="20,50", help="group sizes started at once")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--partitions", type=int, default=100)
    p.add_argument("--move-members", type=int, default=10)
    p.add_argument("--changes", type=int, default=6,
                   help="joins and leaves, alternating, per strategy (0: skip the movement)")
    p.add_argument("--idle-s", type=float, default=20.0,
                   help="seconds of the idle-CPU measure per backend and the JVM (0: skip)")
    p.add_argument("--peers", default="all",
                   help="issue-42 peer rows: comma-separated names "
                        f"({', '.join(bench_peers.peer_names())}), all or none")
    p.add_argument("--gap-window", type=float, default=3.0,
                   help="seconds of each delivery-gap window (0: skip the delivery gaps)")
    p.add_argument("--gap-rate", type=int, default=1200, help="messages a second, produced "
                   "while the delivery gaps are measured")
    p.add_argument("--gap-partitions", type=int, default=48)
    p.add_argument("--gap-rounds", type=int, default=3, help="joins and leaves per mode")
    p.add_argument("--no-pykafka", action="store_true",
                   help="skip the pykafka peer rows (tools/bench_pykafka.py)")
    p.set_defaults(func=bench_storm)
    bench_throughput.register(sub)
    bench_stack.register(sub)
    bench_exporter.register(sub)
    bench_spark.register(sub)
    args = parser.parse_args()
    measured_commit()
    load_at_start()
    args.func(args)


if __name__ == "__main__":
    main()
