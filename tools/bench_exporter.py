"""``tools/bench exporter``: the lag exporter over many groups (results:
bench-results/exporter.json).

Seeds ``--groups`` groups with committed offsets for every partition of one of ``--topics``
topics of ``--partitions`` partitions each (1,000 x 100 by default: 100,000 offset znodes),
in both stores: ZooKeeper and Kafka (the same offsets, as dual commit leaves them: every
group's lag and status then read both), every partition ``--messages`` behind, so that each
has a time lag. Then polls them all and scrapes ``/metrics`` over HTTP. The goals: one
scrape under 0.1 s, a poll under 10 s (every group's offsets read from ZooKeeper, pipelined,
and from Kafka, batched; the log ends; the time lags, the messages' timestamps read once
per partition and offset). The first poll reads every znode and is reported apart.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
import urllib.request
from typing import Any

from kazoo.client import KazooClient

from tools.bench_common import Made, progress, stack, write_result
from zkconsumer.broker.clients import kafka_admin
from zkconsumer.ops.exporter import PIPELINE, ExporterServer, LagMonitor
from zkconsumer.stack.testing import create_topic, produce, wait_until
from zkconsumer.zk import paths as zp
from zkconsumer.zk.session import connect

#: The goal of one scrape, in seconds.
SCRAPE_GOAL_S = 0.1
#: The goal of a poll (after the first, which reads every znode), in seconds.
POLL_GOAL_S = 10.0


def _seed(zk: KazooClient, groups: list[str], topics: list[str], partitions: int) -> float:
    """Offset 0 for every partition of each group's topic; seconds taken."""
    t0 = time.perf_counter()
    for i, g in enumerate(groups):
        zk.ensure_path(zp.offsets_topic_dir(g, topics[i % len(topics)]))
    paths = [zp.offset_path(g, topics[i % len(topics)], p)
             for i, g in enumerate(groups) for p in range(partitions)]
    for start in range(0, len(paths), PIPELINE):
        batch = [zk.create_async(path, zp.encode_offset(0))
                 for path in paths[start:start + PIPELINE]]
        for result in batch:
            result.get()
        if start and start % (PIPELINE * 10) == 0:
            progress(f"{start} of {len(paths)} offsets written")
    return time.perf_counter() - t0


def _seed_kafka(bootstrap: str, groups: list[str], topics: list[str], partitions: int
                ) -> float:
    """The same offsets (0) committed in Kafka for every group; seconds taken."""
    from kafka import TopicPartition as KTP
    from kafka.structs import OffsetAndMetadata

    t0 = time.perf_counter()
    admin = kafka_admin(bootstrap_servers=bootstrap.split(","), request_timeout_ms=60_000)
    try:
        for i, g in enumerate(groups):
            topic = topics[i % len(topics)]
            offsets = {KTP(topic, p): OffsetAndMetadata(0, "", -1) for p in range(partitions)}
            wait_until(functools.partial(_committed, admin, g, offsets), 60,
                       f"offsets of {g} committed in Kafka")
            if i and i % 100 == 0:
                progress(f"{i} of {len(groups)} groups committed in Kafka")
    finally:
        admin.close()
    return time.perf_counter() - t0


def _committed(admin: Any, group: str, offsets: dict[Any, Any]) -> bool:
    from kafka.errors import KafkaError, NoError

    try:
        result = admin.alter_group_offsets(group, offsets)
    except KafkaError:  # the offsets topic of a new cluster still being made
        return False
    return all(e is NoError for e in result.values())


def _poll(monitor: LagMonitor, zk: KazooClient, what: str) -> tuple[float, int]:
    """One poll: seconds, and requests sent to ZooKeeper."""
    cache = monitor.cache
    before = 0 if cache is None else cache.reads
    t0 = time.perf_counter()
    seen = monitor.poll(zk, None)
    took = time.perf_counter() - t0
    cache = monitor.cache
    reads = (0 if cache is None else cache.reads) - before
    progress(f"poll, {what}: {took:.2f} s, {reads} ZooKeeper reads, {len(seen)} groups")
    return took, reads


def _commit_some(zk: KazooClient, groups: list[str], topics: list[str], partitions: int,
                 n: int) -> list[str]:
    """Commit a new offset for ``n`` partitions spread over the groups; their paths."""
    paths = [zp.offset_path(g, topics[i % len(topics)], p)
             for i, g in enumerate(groups) for p in range(partitions)]
    chosen = paths[::max(1, len(paths) // n)][:n]
    for start in range(0, len(chosen), PIPELINE):
        for result in [zk.set_async(p, b"1") for p in chosen[start:start + PIPELINE]]:
            result.get()
    return chosen


def _scrape(url: str) -> tuple[float, int]:
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as answer:
        size = len(answer.read())
    return time.perf_counter() - t0, size


def bench_exporter(args: argparse.Namespace) -> None:
    made = Made()
    stamp = int(time.time())
    topics = [f"bench-exp-{stamp}-{t}" for t in range(args.topics)]
    groups = [f"bench-exp-{stamp}-g{i}" for i in range(args.groups)]
    with stack(made) as (zk_addr, bootstrap):
        made.topics.update(topics)
        made.groups.update(groups)
        zk = connect(zk_addr, 30.0)
        try:
            for t in topics:
                create_topic(bootstrap, t, args.partitions)
            wait_until(lambda: all(zk.exists(zp.topic_path(t)) for t in topics), 60,
                       "topics registered")
            for t in topics:
                produce(bootstrap, t, [(p, None, b"x") for p in range(args.partitions)
                                       for _ in range(args.messages)])
            progress(f"seeding {args.groups} groups x {args.partitions} partitions")
            seed_s = _seed(zk, groups, topics, args.partitions)
            progress("the same offsets in Kafka")
            seed_kafka_s = _seed_kafka(bootstrap, groups, topics, args.partitions)
            monitor = LagMonitor()
            polls = {"first": _poll(monitor, zk, "first (every znode read)")}
            polls["unchanged"] = _poll(monitor, zk, "nothing changed")
            changed = _commit_some(zk, groups, topics, args.partitions, args.changed)
            cache = monitor.cache
            assert cache is not None
            wait_until(lambda: all(cache.changed("get", p) for p in changed), 60,
                       "the watches of the offsets committed")
            polls["changed"] = _poll(monitor, zk, f"{len(changed)} offsets committed")
            server = ExporterServer(monitor, 0)
            try:
                url = f"http://127.0.0.1:{server.port}/metrics"
                scrapes = [_scrape(url) for _ in range(args.scrapes)]
            finally:
                server.close()
        finally:
            zk.stop()
            zk.close()
    ours = [g for g in monitor.groups if g.group in set(groups)]
    times = sorted(s for s, _ in scrapes)
    later = max(v[0] for k, v in polls.items() if k != "first")
    write_result("exporter", {
        "groups": args.groups, "partitions_per_group": args.partitions,
        "topics": args.topics, "offsets": args.groups * args.partitions,
        "groups_seen": len(monitor.groups), "bench_groups_seen": len(ours),
        "bench_partitions_seen": sum(len(g.partitions) for g in ours),
        "seed_s": round(seed_s, 2), "seed_kafka_s": round(seed_kafka_s, 2),
        "stores": sorted({g.store for g in ours}),
        "bench_partitions_with_time_lag": sum(
            1 for g in ours for p in g.partitions if p.time_lag is not None),
        "kafka_offsets_read": sum(1 for g in ours for p in g.partitions
                                  if p.kafka_offset is not None),
        # A poll reads again only what ZooKeeper's watches said changed.
        "poll_s": {k: round(v[0], 3) for k, v in polls.items()},
        "poll_zookeeper_reads": {k: v[1] for k, v in polls.items()},
        "offsets_committed_before_changed_poll": args.changed,
        "scrape_s": {"all": [round(s, 4) for s in times], "median": round(
            statistics.median(times), 4), "max": round(times[-1], 4)},
        "scrape_bytes": scrapes[0][1],
        "samples_per_scrape": _samples(monitor),
        "goal": f"one scrape < {SCRAPE_GOAL_S:g} s, a poll after the first < "
                f"{POLL_GOAL_S:g} s",
        "goal_met": times[-1] < SCRAPE_GOAL_S and later < POLL_GOAL_S,
    })


def _samples(monitor: LagMonitor) -> int:
    return sum(1 for line in monitor.render().split(b"\n") if line and not line.startswith(b"#"))


def register(sub: Any) -> None:
    p = sub.add_parser("exporter", help="the lag exporter over many groups: poll and scrape")
    p.add_argument("--groups", type=int, default=1000)
    p.add_argument("--partitions", type=int, default=100)
    p.add_argument("--topics", type=int, default=10,
                   help="topics shared by the groups (group i reads topic i mod N)")
    p.add_argument("--messages", type=int, default=2,
                   help="messages per partition (each group's offsets 0: that many behind)")
    p.add_argument("--changed", type=int, default=1000,
                   help="offsets committed before the last poll (1%% of 100,000)")
    p.add_argument("--scrapes", type=int, default=5)
    p.set_defaults(func=bench_exporter)
