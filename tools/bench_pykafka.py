"""pykafka's BalancedConsumer as a peer row of ``tools/bench storm`` and ``tools/bench
rebalance`` (issue 30): the same group sizes, topic and measure as zkconsumer's rows.

pykafka 2.8.0, pure Python (``use_rdkafka=False``), speaking the Kafka protocol itself
(``broker_version`` below: metadata, offset commits and fetches all work against Kafka 3.9).
It balances over the same ZooKeeper tree, with differences that the measure follows:

* its owner znodes are ``/consumers/<group>/owners/<topic>/<broker id>-<partition>`` (not
  ``.../<partition>``), their value the bare consumer id (no ``-<thread>`` suffix), and its
  ``ids`` znodes hold the bare topic name (not the JSON subscription): zkconsumer and the JVM
  consumer cannot share a group with it;
* its range assignment sorts the partitions as the strings ``"<topic>-<leader>-<partition>"``
  (so 10 comes before 2) and gives each consumer one contiguous slice;
* one rebalance commits the held offsets to Kafka, deletes the owner znodes it no longer
  decides, creates the new ones, and a znode still held by another member fails the whole
  attempt (``PartitionOwnedError``): retried after ``i * rebalance_backoff_ms`` (0, 2, 4, 6 s),
  given up after ``rebalance_max_retries`` (5) until the next watch event; a member whose
  first rebalance gives up stops itself (``start()`` stops the consumer on any error).

Members are made as zkconsumer's are, each in its own process (tools/bench_member.py
``kind=pykafka``): one ZooKeeper session each (a started ``KazooClient`` handed in, so that
``stop()`` deletes its owner and id znodes, as zkconsumer's shutdown does) and one
``KafkaClient`` each; the storm's with their internal fetching consumer never started
(zkconsumer's storm runs without fetchers), the rebalance's fetching. This process only
watches ZooKeeper for the assignment.
"""

from __future__ import annotations

import functools
import logging
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient

from tools.bench_procs import MemberProcess, Spawned, close_all
from zkconsumer.stack.testing import create_topic, wait_until
from zkconsumer.zk import paths as zp

#: What the rows measure, and the protocol version pykafka is told the brokers speak (it
#: picks its request versions from it; "0.9.0", "0.10.0" and "1.0.0" all work on Kafka 3.9).
PYKAFKA_VERSION = "2.8.0"
BROKER_VERSION = "1.0.0"
NO_STICKY = ("pykafka 2.8.0 has no sticky strategy: its BalancedConsumer balances over "
             "ZooKeeper with range or roundrobin only (pykafka.membershipprotocol)")
#: The strategies a pykafka row can be run with (pykafka.membershipprotocol's names).
STRATEGIES = ("range", "roundrobin")
EXTRA = ("pykafka 2.8.0 is missing: install the bench extra and pykafka without its pinned "
         "kazoo 2.5.0 (pip install -e '.[bench]' && pip install --no-deps pykafka==2.8.0; "
         "tools/bench does both)")


def require() -> Any:
    """pykafka, or a one-line error naming the bench extra."""
    try:
        import pykafka
    except ImportError:
        raise SystemExit(f"tools/bench: {EXTRA}") from None
    if pykafka.__version__ != PYKAFKA_VERSION:
        raise SystemExit(f"tools/bench: pykafka {pykafka.__version__} found; the rows are of "
                         f"{PYKAFKA_VERSION} ({EXTRA})")
    return pykafka


def _progress(msg: str) -> None:
    print(f"[bench] pykafka: {msg}", file=sys.stderr, flush=True)  # as tools/bench's


class _Log(logging.Handler):
    """pykafka's own log, counted rather than printed: its failed rebalance attempts (it
    keeps no counter of them), rebalances, and every warning or error by message."""

    RETRY = "Unable to acquire partition %s. Retrying"
    GAVE_UP = "Failed to acquire partition %s after %d retries."
    STOPPED = "Stopping consumer in response to error"

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.counts: Counter[str] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        msg = str(record.msg)
        if msg.startswith("Rebalancing consumer"):
            msg = "rebalance"
        elif record.levelno < logging.WARNING and msg not in (self.RETRY,):
            return
        self.counts[msg] += 1

    def snapshot(self) -> Counter[str]:
        with self.lock:  # type: ignore[union-attr]
            return Counter(self.counts)


_LOG: _Log | None = None


def _log() -> _Log:
    global _LOG
    if _LOG is None:
        _LOG = _Log()
        root = logging.getLogger("pykafka")
        root.setLevel(logging.WARNING)
        root.propagate = False  # counted in the row; the bench's progress stays readable
        root.addHandler(_LOG)
        logging.getLogger("pykafka.balancedconsumer").setLevel(logging.INFO)
    return _LOG


def log_counts() -> Counter[str]:
    """This process's pykafka log, counted (see :class:`_Log`)."""
    return _log().snapshot()


def _log_delta(before: Counter[str], now: Counter[str]) -> dict[str, Any]:
    d = {k: now[k] - before.get(k, 0) for k in now if now[k] - before.get(k, 0)}
    return {
        # Attempts that found a partition still owned and started again after the backoff:
        # what zkconsumer counts as failed attempts.
        "failed_attempts": d.pop(_Log.RETRY, 0),
        "gave_up": d.pop(_Log.GAVE_UP, 0),  # rebalances that exhausted their retries
        "stopped_on_error": d.pop(_Log.STOPPED, 0),
        "rebalances": d.pop("rebalance", 0),
        "other_warnings": dict(sorted(d.items(), key=lambda kv: -kv[1])[:5]),
    }


@dataclass
class _Member:
    kafka: Any
    zk: KazooClient
    consumer: Any

    @property
    def id(self) -> str:
        return str(self.consumer._consumer_id.decode())

    def close(self, graceful: bool) -> None:
        """``graceful``: ``stop()`` (leaves the group: its znodes deleted, which the others
        rebalance on), then the session closed; else the session closed alone, the consumer
        first marked stopped so that its watches do nothing (a round's end)."""
        c = self.consumer
        try:
            if graceful:
                c.stop()
            else:
                c._running = False
                if c._consumer is not None:
                    c._consumer.stop()
        except Exception:  # noqa: BLE001 - best effort: the session's end releases all
            pass
        self.zk.stop()
        self.zk.close()
        _disconnect(self.kafka)


def _disconnect(kafka: Any) -> None:
    """A KafkaClient's broker connections closed (it has no close of its own)."""
    for broker in list(kafka.brokers.values()):
        for conn in (broker._connection, broker._offsets_channel_connection):
            if conn is not None:
                try:
                    conn.disconnect()
                except Exception:  # noqa: BLE001 - best effort
                    pass


@functools.cache
def _consumer_class(fetch: bool) -> Any:
    """BalancedConsumer; without ``fetch``, a subclass whose internal consumer never starts
    (no offset fetch, no fetch threads), as zkconsumer's storm has no fetchers."""
    from pykafka.balancedconsumer import BalancedConsumer

    if fetch:
        return BalancedConsumer

    class NoFetch(BalancedConsumer):  # type: ignore[misc, valid-type]
        def _get_internal_consumer(self, partitions: Any = None, start: bool = True) -> Any:
            return super()._get_internal_consumer(partitions=partitions, start=False)

    return NoFetch


@dataclass
class _Group:
    zk: KazooClient  # the observer's session
    zk_addr: str
    bootstrap: str
    group: str
    topic: str
    partitions: int
    fetch: bool
    strategy: str = "range"  # pykafka's own range or roundrobin (see expected())
    client: Any = None  # the observer's KafkaClient
    observer: Any = None  # its topic: the partitions as pykafka sees them
    members: list[_Member] = field(default_factory=list)

    def __post_init__(self) -> None:
        pykafka = require()
        self.client = pykafka.KafkaClient(hosts=self.bootstrap, broker_version=BROKER_VERSION)
        self.observer = self.client.topics[self.topic.encode()]
        # Where pykafka writes its owners: it formats the topic's name, which it holds as
        # bytes, into the path (BalancedConsumer._topic_path), so that on Python 3 they are
        # under "owners/b'<topic>'".
        self.owners_dir = f"{zp.group_dir(self.group)}/owners/{self.observer.name!s}"

    def new_member(self, start: bool = True) -> _Member:
        pykafka = require()
        kafka = pykafka.KafkaClient(hosts=self.bootstrap, broker_version=BROKER_VERSION)
        zk = KazooClient(hosts=self.zk_addr, timeout=6.0)
        zk.start()
        consumer = _consumer_class(self.fetch)(
            kafka.topics[self.topic.encode()], kafka.cluster, consumer_group=self.group.encode(),
            membership_protocol=_protocol(self.strategy).protocol,
            zookeeper=zk, auto_start=False, use_rdkafka=False, auto_commit_enable=False,
            zookeeper_connection_timeout_ms=6000, rebalance_backoff_ms=2000,
            consumer_timeout_ms=100)
        m = _Member(kafka, zk, consumer)
        self.members.append(m)
        if start:
            consumer.start()
        return m

    def owners(self) -> dict[int, str]:
        """Partition -> owner, from pykafka's owner znodes (``<broker>-<partition>``)."""
        try:
            slugs = self.zk.get_children(self.owners_dir)
        except Exception:  # noqa: BLE001 - not made yet
            return {}
        futures = [(s, self.zk.get_async(f"{self.owners_dir}/{s}")) for s in slugs]
        out = {}
        for slug, f in futures:
            try:
                out[int(slug.rpartition("-")[2])] = f.get(timeout=5)[0].decode()
            except Exception:  # noqa: BLE001 - released meanwhile
                pass
        return out

    def expected(self, ids: list[str]) -> dict[int, str]:
        """pykafka's own assignment (its range or roundrobin) for these members."""
        decide = _protocol(self.strategy).decide
        parts = self.observer.partitions
        participants = sorted(i.encode() for i in ids)
        out = {}
        for cid in participants:
            for p in decide(participants, parts, cid):
                out[p.id] = cid.decode()
        return out

    def ids(self) -> list[str]:
        return list(self.zk.get_children(zp.ids_dir(self.group)))

    def converged(self, n_members: int) -> bool:
        """As zkconsumer's: ``n_members`` registered, and every partition owned as pykafka's
        assignment computes it for them (its members run in processes of their own: this
        process sees ZooKeeper only)."""
        ids = self.ids()
        return len(ids) == n_members and self.owners() == self.expected(ids)


@dataclass
class _Protocol:
    protocol: Any  # for BalancedConsumer(membership_protocol=...)
    decide: Any  # its decide_partitions(participants, partitions, consumer_id)


def _protocol(strategy: str) -> _Protocol:
    from pykafka import membershipprotocol as mp

    if strategy == "roundrobin":
        return _Protocol(mp.RoundRobinProtocol, mp.decide_partitions_roundrobin)
    return _Protocol(mp.RangeProtocol, mp.decide_partitions_range)


def group_of_one(zk_addr: str, bootstrap: str, group: str, topic: str, fetch: bool,
                 strategy: str) -> _Group:
    """What a member process (tools/bench_member.py) makes its one member with."""
    _log()
    return _Group(None, zk_addr, bootstrap, group, topic, 0, fetch,  # type: ignore[arg-type]
                  strategy)


def _fresh(made: Any, zk: KazooClient, zk_addr: str, bootstrap: str, partitions: int,
           fetch: bool, stem: str, strategy: str = "range") -> _Group:
    name = f"bench-pykafka-{stem}-{time.time_ns()}"
    made.topics.add(name)
    made.groups.add(name)
    create_topic(bootstrap, name, partitions)
    wait_until(lambda: zk.exists(zp.topic_path(name)), 30, "topic registered")
    return _Group(zk, zk_addr, bootstrap, name, name, partitions, fetch, strategy)


def _why_not(g: _Group, n_members: int) -> str:
    """What is missing, for the row's failure."""
    ids = g.ids()
    owners = g.owners()
    live = set(ids)
    return (f"{len(ids)} of {n_members} members registered, "
            f"{sum(1 for o in owners.values() if o in live)} of {g.partitions} "
            f"partitions owned by a live member, "
            f"{'' if owners == g.expected(ids) else 'not '}as pykafka's {g.strategy} assigns "
            "them")


def _storm_round(g: _Group, n: int, timeout: float) -> dict[str, Any]:
    """As zkconsumer's: ``n`` member processes, each with its sessions and Kafka clients
    open, then all told to ``start()`` at once; the time until the group has converged (seen
    in ZooKeeper, polled every 10 ms)."""
    props = {"strategy": g.strategy, "bootstrap": g.bootstrap}
    procs = [MemberProcess(g.zk_addr, g.group, g.topic, props, g.fetch, kind="pykafka")
             for _ in range(n)]
    row: dict[str, Any]
    try:
        for p in procs:
            p.id = p.send("prepare")["id"]
        log0 = _summed(procs)
        t0 = time.time()
        for p in procs:
            p.post("join")
        for p in procs:
            p.receive("join")
        if _settles(g, n, timeout):
            row = {"converged": True, "seconds": round(time.time() - t0, 3)}
        else:
            row = {"converged": False, "seconds": None,
                   "why": f"not converged {timeout:g} s after the start: {_why_not(g, n)}"}
        row.update(_log_delta(log0, _summed(procs)))
    finally:
        close_all(procs)
    return row


def storm_row(made: Any, zk: KazooClient, zk_addr: str, bootstrap: str, sizes: list[int],
              rounds: int, partitions: int, fetch: bool = False,
              timeout: float = 120.0) -> dict[str, Any]:
    """pykafka's storms: for each size, ``rounds`` fresh groups on fresh topics."""
    pykafka = require()
    out = []
    for n in sizes:
        rows = []
        for r in range(rounds):
            g = _fresh(made, zk, zk_addr, bootstrap, partitions, fetch, "storm")
            try:
                rows.append(_storm_round(g, n, timeout))
            finally:
                _disconnect(g.client)
            _progress(f"storm of {n}, round {r + 1}: {rows[-1]}")
        secs = [x["seconds"] for x in rows if x["converged"]]
        out.append({
            "members": n, "partitions": partitions, "rounds": rows,
            "converged_rounds": len(secs),
            "seconds_median": statistics.median(secs) if secs else None,
            "seconds_max": max(secs) if len(secs) == len(rows) else None,
            "failed_attempts": sum(x["failed_attempts"] for x in rows),
        })
    return {**_about(pykafka, fetch), "storms": out}


ASSIGNMENTS = {
    "range": "pykafka's range: partitions sorted as the strings "
             "'<topic>-<leader>-<partition>', one slice per consumer",
    "roundrobin": "pykafka's roundrobin: partitions sorted as the strings "
                  "'<topic>-<leader>-<partition>', dealt to the sorted consumer ids in turn",
}


def _about(pykafka: Any, fetch: bool, strategy: str = "range") -> dict[str, Any]:
    return {
        "client": f"pykafka {pykafka.__version__} BalancedConsumer (pure Python, "
                  f"use_rdkafka=False, broker_version={BROKER_VERSION!r})",
        "fetchers": "real (its internal SimpleConsumer started)" if fetch
        else "none (its internal SimpleConsumer never started)",
        "assignment": ASSIGNMENTS[strategy],
        "failed_attempts": "rebalance attempts that met a partition still owned "
                           "(PartitionOwnedError) and started again after the backoff, "
                           "counted from pykafka's log: it keeps no counter",
    }


def _start_processes(live: list[MemberProcess], spawn: Any, members: int, budget: float,
                     partitions: int) -> str | None:
    """Start ``members`` member processes one after the other (each join returns after its
    first rebalance); why not, if they are not all started within ``budget`` seconds."""
    t0 = time.monotonic()
    for k in range(members):
        if time.monotonic() - t0 > budget:
            return (f"only {k} of {members} members started within {budget:g} s: each "
                    "start, and every member's rebalance at each start, reads every owner "
                    "znode one at a time (BalancedConsumer._get_held_partitions), "
                    f"{partitions} sequential reads per rebalance")
        m = spawn()
        m.join()
        live.append(m)
    return None


def _settles(g: _Group, n_members: int, timeout: float) -> bool:
    try:
        wait_until(functools.partial(g.converged, n_members), timeout, "pykafka's assignment",
                   every=0.01)
    except Exception:  # noqa: BLE001 - the row says why
        return False
    return True


def _summed(members: list[MemberProcess]) -> Counter[str]:
    """The members' pykafka log counts, added up."""
    total = Counter[str]()
    for m in members:
        total.update(Counter(m.send("stats")))
    return total


def rebalance_row(made: Any, zk: KazooClient, zk_addr: str, bootstrap: str, members: int,
                  partitions: int, changes: int, fetch: bool = True,
                  timeout: float = 60.0, strategy: str = "range") -> dict[str, Any]:
    """pykafka's join and leave latency, measured as zkconsumer's, each member in its own
    process (tools/bench_member.py, ``kind=pykafka``): from the membership change (in the
    member's process: the joiner's clients made, or the leaver's ``stop()`` begun) to the
    group owning every partition as its assignment says for the new membership (polled
    every 10 ms from here: pykafka keeps no record of when a rebalance ended); and the
    partitions moved by each."""
    pykafka = require()
    g = _fresh(made, zk, zk_addr, bootstrap, partitions, fetch, "rb", strategy)
    props = {"strategy": strategy, "bootstrap": bootstrap}
    spawned = Spawned(lambda: MemberProcess(zk_addr, g.group, g.topic, props, fetch,
                                            kind="pykafka"))
    spawn = spawned.new

    latencies: dict[str, list[float]] = {"join": [], "leave": []}
    moves: list[dict[str, Any]] = []
    counts: dict[str, Any] = {}
    live: list[MemberProcess] = []
    left = Counter[str]()  # the log counts of members that left
    try:
        _progress(f"starting {members} member processes on {partitions} partitions")
        spare = spawn()
        failure = _start_processes(live, spawn, members, 3 * timeout, partitions)
        if failure is None and not _settles(g, members, timeout):
            failure = (f"the first assignment not settled within {timeout:g} s: "
                       f"{_why_not(g, members)}")
        log0 = _summed(live)
        extra: MemberProcess | None = None
        for i in range(changes if failure is None else 0):
            before = g.owners()
            if extra is None:
                kind, extra = "join", spare
                t0 = extra.join()
                live.append(extra)
                leaver = None
            else:
                kind = "leave"
                left.update(Counter(extra.send("stats")))
                t0 = float(extra.send("leave")["at"])
                live.remove(extra)
                leaver, extra = extra, None
                spare = spawn()  # the next joiner, started ahead
            who = (leaver or extra).id  # type: ignore[union-attr]
            if not _settles(g, members + (kind == "join"), timeout):
                failure = (f"change {i + 1} ({kind}) not settled within {timeout:g} s: "
                           f"{_why_not(g, members + (kind == 'join'))}")
                break
            dt = time.time() - t0
            if leaver is not None:
                leaver.close()
            latencies[kind].append(dt)
            after = g.owners()
            mine = before if kind == "leave" else after
            moves.append({"change": kind, "moved": sum(1 for p in before
                                                       if after.get(p) != before[p]),
                          "minimum": sum(1 for o in mine.values() if o == who)})
            _progress(f"change {i + 1}/{changes} ({kind}): {dt * 1000:.0f} ms, "
                      f"{moves[-1]['moved']} partitions moved")
        counts = _log_delta(log0, _summed(live) + left)
    finally:
        spawned.close()
        _disconnect(g.client)

    def pct(xs: list[float]) -> dict[str, Any]:
        if not xs:
            return {"p50": None, "p99": None, "samples": 0}
        s = sorted(xs)
        return {"p50": round(statistics.median(s) * 1000, 1),
                "p99": round(s[min(len(s) - 1, int(round(0.99 * (len(s) - 1))))] * 1000, 1),
                "max": round(s[-1] * 1000, 1), "samples": len(s)}

    both = latencies["join"] + latencies["leave"]
    joins = [m for m in moves if m["change"] == "join"]
    leaves = [m for m in moves if m["change"] == "leave"]
    return {
        **_about(pykafka, fetch, strategy),
        "members": members, "partitions": partitions, "changes": changes,
        "latency_ms": {**pct(both), "all": [round(x * 1000, 1) for x in both]},
        "join_latency_ms": pct(latencies["join"]),
        "leave_latency_ms": pct(latencies["leave"]),
        "moves": moves,
        "join_moved_max": max((m["moved"] for m in joins), default=None),
        "leave_moved_max": max((m["moved"] for m in leaves), default=None),
        "leave_others_moved_max": max((m["moved"] - m["minimum"] for m in leaves),
                                      default=None),
        **counts,
        "member_processes": "one per member (tools/bench_member.py kind=pykafka)",
        "join": "timed from making the member (its Kafka client, ZooKeeper session and "
                "start()), in its process started ahead, to the new assignment seen in "
                "ZooKeeper (polled every 10 ms)",
        "leave": "timed from the start of the leaver's stop() (it deletes its owner and id "
                 "znodes) to the new assignment seen in ZooKeeper (polled every 10 ms)",
        "failure": failure,
    }
