"""Throughput: raw kafka-python / confluent-kafka against zkconsumer streams on each backend.

Every client reads the same messages (default 200,000 of 100 bytes over 4 partitions) from
the beginning and reports messages per second from its first message to its last. The raw
clients poll in one thread. zkconsumer runs, on each backend:

- ``zkconsumer_<backend>``: 4 streams (one per partition) drained by 4 threads, as a legacy
  application does. This is the configuration the goals (and docs/benchmarks.md) are about.
- ``zkconsumer_<backend>_1stream``: one stream over the 4 partitions, drained by one thread
  (no GIL contention between draining threads), reported beside it.
- ``zkconsumer_<backend>_poll_only``: a diagnostic, not a way to consume: the fetch backend
  alone (the client zkconsumer's fetcher thread polls, and the grouping of each poll into
  per-partition chunks), polled in one thread, its chunks dropped. Its rate against the raw
  client's is the cost of zkconsumer's fetch path; the rest of the gap is handing the chunks
  to the application's threads and making the messages there.

And, as the anchor the others are read against, the original: Kafka 1.1.1's own
``kafka.javaapi.consumer.ZookeeperConsumerConnector`` (tools/jvm/src/Member.java with
``--output count``), 4 streams drained by 4 threads, a fresh group per round reading from the
start (``auto.offset.reset=smallest``, ``queued.max.message.chunks=10`` as zkconsumer's), timed
from its first message to its last as the others are (the JVM's start-up, its connection to
ZooKeeper and its first rebalance are not counted; its JIT warming up is). It fetches with
Fetch v3, so the Kafka 3.9 broker down-converts every batch to the v1 message format for it
(no zero-copy send). Member.java is compiled once per run, before the first round; each round
starts a JVM. ``ratio_to_jvm`` is zkconsumer's 4-stream rate over the JVM's in the same round.
``--no-jvm`` leaves the row out (no Java, or no ``tools/jvm/resolve``).

A round runs every client once, one after the other, raw client first, each after a full
garbage collection; ``--rounds`` rounds (default 3) run in one process. A ratio is
zkconsumer's rate over the raw client's in the same round; the JSON gives the per-round rates
and ratios and their medians, and ``goal_met`` uses the median ratios of the 4-stream runs.
The machine is shared and the rates are noisy, which is why the ratio compares neighbouring runs.

Every client's run has a deadline (``DEADLINE_S``, 600 s): one that has not read every message
by then (a broker that stopped answering) ends the benchmark with a RuntimeError that says how
many it had read, instead of waiting for ever.
"""

from __future__ import annotations

import argparse
import functools
import gc
import importlib.util
import os
import statistics
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient

from tools import bench_peers
from tools.bench_common import Made, progress, stack, write_result
from tools.legacy_jvm import LOG4J, java_argv
from zkconsumer import ConsumerConfig, create_consumer_connector
from zkconsumer._types import TopicPartition
from zkconsumer.consumer.fetcher import ConfluentBackend, FetchBackend, KafkaPythonBackend
from zkconsumer.stack.testing import create_topic, wait_until
from zkconsumer.zk import paths as zp

#: How long one client's run may take to read every message (all four kinds of client).
DEADLINE_S = 600.0
#: The JVM legacy consumer measured: the last release that has it.
JVM_RELEASE = "1.1.1"
#: How long a JVM member may take to start, register and rebalance, besides DEADLINE_S.
JVM_START_S = 60.0


def jvm_flags() -> list[str]:
    """The JVM's options: its own defaults (full JIT, its default collector), a 1 GB heap and
    the members' log4j settings; not the tests' quick-start flags (C1 only, a small heap)."""
    return ["-Xmx1g", f"-Dlog4j.configuration=file:{LOG4J}"]


def java_version() -> str:
    done = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=60)
    return (done.stderr or done.stdout).splitlines()[0].strip()


#: The goals' message count: its results go to throughput.json, other counts' (a longer,
#: steadier run, say) to throughput_<count>.json beside it.
GOAL_MESSAGES = 200_000
#: The JVM's row in the results.
JVM_ROW = "jvm_legacy_1_1_1"
#: The issue-42 peers measured here besides the JVM (whose row is JVM_ROW).
PEER_ROWS = ("kafka_node_3_0_1", "go_consumergroup")
#: The default configuration's row: the confluent backend, named explicitly (the default
#: install's backend, issue 38), so that the row measures it whatever the library's default.
DEFAULT_ROW = "zkconsumer_confluent"


def _produce(bootstrap: str, topic: str, n: int, size: int) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, batch_size=262144,
                             acks=1, enable_idempotence=False)
    payload = b"x" * size
    for i in range(n):
        producer.send(topic, value=payload, partition=i % 4)
        if i and i % 50_000 == 0:
            progress(f"produced {i}")
    producer.flush()
    producer.close()


def _late(client: str, got: int, n: int, timeout_s: float, why: str = "") -> RuntimeError:
    return RuntimeError(f"{client}: only {got} of {n} messages read when the {timeout_s:g} s "
                        f"deadline passed{f' (last error: {why})' if why else ''}")


def raw_kafka_python(bootstrap: str, topic: str, n: int,
                     timeout_s: float = DEADLINE_S) -> float:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      max_partition_fetch_bytes=1048576)
    got = 0
    start = None
    try:
        c.assign([TopicPartition(topic, p) for p in range(4)])
        c.seek_to_beginning()
        deadline = time.monotonic() + timeout_s
        while got < n:
            if time.monotonic() > deadline:  # once a poll (1 s at most), not per message
                raise _late("raw kafka-python", got, n, timeout_s)
            for records in c.poll(timeout_ms=1000).values():
                if start is None:
                    start = time.perf_counter()
                for r in records:
                    got += 1
                    _ = r.value
        elapsed = time.perf_counter() - (start or time.perf_counter())
    finally:
        c.close()
    return n / elapsed


def raw_confluent(bootstrap: str, topic: str, n: int, timeout_s: float = DEADLINE_S) -> float:
    from confluent_kafka import Consumer, TopicPartition

    # Tuned as zkconsumer's confluent backend is (a larger prefetch queue, a short back-off
    # when it is full): with librdkafka's defaults the raw client stalls about a second per
    # refill on this broker, which would flatter zkconsumer.
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex}",
                  "enable.auto.commit": False, "enable.auto.offset.store": False,
                  "queued.max.messages.kbytes": 16384, "fetch.queue.backoff.ms": 10,
                  "receive.message.max.bytes": 100_000_000})
    got = 0
    start = None
    error = None
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(4)])
        deadline = time.monotonic() + timeout_s
        while got < n:
            if time.monotonic() > deadline:  # once a consume (1 s at most), not per message
                raise _late("raw confluent-kafka", got, n, timeout_s,
                            "" if error is None else str(error))
            msgs = c.consume(num_messages=10_000, timeout=1.0)
            for m in msgs:
                if m.error():
                    error = m.error()
                    continue
                if start is None:
                    start = time.perf_counter()
                got += 1
                _ = m.value()
        elapsed = time.perf_counter() - (start or time.perf_counter())
    finally:
        c.close()
    return n / elapsed


def zkconsumer_streams(zk: str, topic: str, n: int, backend: str, streams: int = 4,
                       made: Made | None = None) -> float:
    group = f"bench-{uuid.uuid4().hex[:8]}"
    if made is not None:
        made.groups.add(group)
    config = ConsumerConfig({
        "zookeeper.connect": zk, "group.id": group,
        "auto.offset.reset": "smallest", "auto.commit.enable": "false",
        "fetch.backend": backend, "queued.max.message.chunks": "10",
    })
    got = [0]
    first: list[float] = []
    lock = threading.Lock()
    done = threading.Event()
    with create_consumer_connector(config) as c:
        made_streams = c.create_message_streams({topic: streams})[topic]

        def drain(s: Any) -> None:
            local = 0
            for m in s:
                _ = m.message
                local += 1
                if local == 1:
                    with lock:
                        first.append(time.perf_counter())
                if local % 1000 == 0:
                    with lock:
                        got[0] += 1000
                        if got[0] >= n:
                            done.set()
            with lock:
                got[0] += local % 1000

        threads = [threading.Thread(target=drain, args=(s,), daemon=True)
                   for s in made_streams]
        for t in threads:
            t.start()
        finished = done.wait(DEADLINE_S)
        end = time.perf_counter()
    if not finished:
        raise _late(f"zkconsumer ({backend})", got[0], n, DEADLINE_S)
    return n / (end - min(first))


def jvm_argv(zk: str, topic: str, n: int) -> list[str]:
    """``java ... Member member ...`` without its ``--group``, for :func:`jvm_streams`; compiles
    Member.java (once: the compiled class is kept for the run, and for later runs of the same
    source)."""
    return java_argv(JVM_RELEASE, "member", "--zookeeper", zk, "--topics", topic,
                     "--streams", "4", "--commit", "none", "--output", "count",
                     "--target", str(n), "--prop", "auto.offset.reset=smallest",
                     "--prop", "queued.max.message.chunks=10", flags=jvm_flags())


def jvm_streams(argv: list[str], n: int, made: Made | None = None,
                timeout_s: float = DEADLINE_S) -> float:
    """Kafka's own legacy consumer (``argv`` from :func:`jvm_argv`) in a fresh group: its
    rate from its first message handed out to its ``n``-th, as the JVM timed them."""
    group = f"bench-jvm-{uuid.uuid4().hex[:8]}"
    if made is not None:
        made.groups.add(group)
    returncode, count, stderr = bench_peers.counted_run(
        [*argv, "--group", group], timeout_s + JVM_START_S, grace_s=60)
    if count is None:
        raise RuntimeError(f"JVM {JVM_RELEASE} member exited with {returncode} and no "
                           f"count:\n{stderr[-3000:]}")
    got, first, last = count
    if got < n or last < 0:
        tail = stderr.strip().splitlines()[-1:] or [""]
        raise _late(f"JVM {JVM_RELEASE}", got, n, timeout_s + JVM_START_S, tail[0])
    return n / ((last - first) / 1e9)


def zkconsumer_poll_only(zk: str, bootstrap: str, topic: str, n: int, backend: str) -> float:
    config = ConsumerConfig({"zookeeper.connect": zk, "group.id": "bench-poll-only",
                             "fetch.backend": backend})
    fetch: FetchBackend = (
        ConfluentBackend(config, [bootstrap], f"bench-{uuid.uuid4().hex[:8]}")
        if backend == "confluent" else KafkaPythonBackend(config, [bootstrap])
    )
    got = 0
    start = None
    try:
        fetch.add({TopicPartition(topic, p): 0 for p in range(4)})
        deadline = time.monotonic() + DEADLINE_S
        while got < n:
            if time.monotonic() > deadline:
                raise _late(f"poll only ({backend})", got, n, DEADLINE_S)
            for _, records in fetch.poll(1000).batches:
                if start is None:
                    start = time.perf_counter()
                got += len(records)
        elapsed = time.perf_counter() - (start or time.perf_counter())
    finally:
        fetch.close()
    return n / elapsed


def bench_throughput(args: argparse.Namespace) -> None:
    n = args.messages
    made = Made()
    with stack(made) as (zk, bootstrap):
        topic = f"bench-tp-{uuid.uuid4().hex[:8]}"
        made.topics.add(topic)
        create_topic(bootstrap, topic, 4)
        progress(f"producing {n} messages of {args.size} bytes to {topic}")
        _produce(bootstrap, topic, n, args.size)
        client = KazooClient(hosts=zk)
        client.start()
        wait_until(lambda: client.exists(zp.topic_path(topic)), 30, "topic registered")
        client.stop()
        client.close()
        clients: list[tuple[str, Callable[[], float]]] = [
            ("raw_kafka_python", lambda: raw_kafka_python(bootstrap, topic, n)),
            ("zkconsumer_kafka_python",
             lambda: zkconsumer_streams(zk, topic, n, "kafka-python", made=made)),
            ("zkconsumer_kafka_python_1stream",
             lambda: zkconsumer_streams(zk, topic, n, "kafka-python", streams=1,
                                       made=made)),
            ("zkconsumer_kafka_python_poll_only",
             lambda: zkconsumer_poll_only(zk, bootstrap, topic, n, "kafka-python")),
            ("raw_confluent", lambda: raw_confluent(bootstrap, topic, n)),
            ("zkconsumer_confluent",
             lambda: zkconsumer_streams(zk, topic, n, "confluent", made=made)),
            ("zkconsumer_confluent_1stream",
             lambda: zkconsumer_streams(zk, topic, n, "confluent", streams=1, made=made)),
            ("zkconsumer_confluent_poll_only",
             lambda: zkconsumer_poll_only(zk, bootstrap, topic, n, "confluent")),
        ]
        if args.jvm:
            argv = jvm_argv(zk, topic, n)  # compiled here, before the first round
            clients.append((JVM_ROW, lambda: jvm_streams(argv, n, made=made)))
        peers_not_run: dict[str, str] = {}
        for name in PEER_ROWS if args.peers else ():
            got = bench_peers.throughput_argv(name, zk, topic, n)  # built before round 1
            if isinstance(got, str):
                peers_not_run[name] = got
                continue
            clients.append((name, functools.partial(bench_peers.throughput_run, got, n, made,
                                                    DEADLINE_S)))
        runs: dict[str, list[int]] = {name: [] for name, _ in clients}
        load_per_round: list[list[float]] = []
        for round_no in range(1, args.rounds + 1):
            load_per_round.append([round(x, 2) for x in os.getloadavg()])
            for name, fn in clients:
                progress(f"round {round_no}/{args.rounds}: running {name}")
                # Each run starts on a collected heap: none pays for the garbage of the run
                # before it (a raw confluent run leaves enough for a full collection).
                gc.collect()
                if name in peers_not_run:
                    continue
                try:
                    runs[name].append(round(fn()))
                except RuntimeError as e:
                    if name not in PEER_ROWS:
                        raise
                    peers_not_run[name] = str(e)  # said in the JSON; the others go on
                    continue
                progress(f"{name}: {runs[name][-1]} msgs/s")
        for name in peers_not_run:
            runs.pop(name, None)
    ratios: dict[str, list[float]] = {}
    for backend in ("kafka_python", "confluent"):
        raw = runs[f"raw_{backend}"]
        for suffix in ("", "_1stream", "_poll_only"):
            zkc = runs[f"zkconsumer_{backend}{suffix}"]
            ratios[f"{backend}{suffix}"] = [round(z / r, 3) for z, r in zip(zkc, raw, strict=True)]
    if args.jvm:
        for backend in ("kafka_python", "confluent"):
            ratios[f"{backend}_to_jvm"] = [
                round(z / j, 3)
                for z, j in zip(runs[f"zkconsumer_{backend}"], runs[JVM_ROW], strict=True)]
    for name in [JVM_ROW, *PEER_ROWS]:
        if name in runs:
            ratios[f"default_to_{name}"] = [
                round(z / p, 3) for z, p in zip(runs[DEFAULT_ROW], runs[name], strict=True)]
    ratios["default_to_raw_confluent"] = list(ratios["confluent"])
    median_ratio = {k: round(statistics.median(v), 3) for k, v in ratios.items()}
    goals = {"kafka_python": 0.9, "confluent": 0.8}
    default = _default_configuration(args, runs, median_ratio, ratios, peers_not_run)
    jvm: dict[str, Any] = {}
    if args.jvm:
        jvm = {
            "jvm": {
                "row": JVM_ROW,
                "consumer": f"kafka_2.12:{JVM_RELEASE} "
                            "kafka.javaapi.consumer.ZookeeperConsumerConnector "
                            "(tools/jvm/src/Member.java --output count)",
                "java": java_version(), "flags": jvm_flags()[:-1],
                "properties": {"auto.offset.reset": "smallest", "auto.commit.enable": "false",
                               "queued.max.message.chunks": "10"},
                "fetch": "Fetch v3: the Kafka 3.9 broker down-converts each batch to the v1 "
                         "message format for it",
                "timing": "from its first message handed out to its last, by the JVM "
                          "(System.nanoTime); start-up, registration and first rebalance "
                          "not counted, JIT warm-up counted (a new JVM each round)",
            },
            "ratio_to_jvm": {k: median_ratio[f"{k}_to_jvm"] for k in goals},
            "ratio_to_jvm_per_round": {k: ratios[f"{k}_to_jvm"] for k in goals},
        }
    write_result("throughput" if n == GOAL_MESSAGES else f"throughput_{n}", {
        "messages": n, "message_bytes": args.size, "partitions": 4, "rounds": args.rounds,
        # Whether zkconsumer._speedups (C) made the confluent backend's columns and messages.
        "speedups": importlib.util.find_spec("zkconsumer._speedups") is not None,
        "configurations": {
            "raw_*": "the client alone: assign + poll in one thread",
            "zkconsumer_*": "4 streams drained by 4 threads (the goals' configuration)",
            "zkconsumer_*_1stream": "1 stream over the 4 partitions, drained by 1 thread",
            "zkconsumer_*_poll_only": "diagnostic: the fetch backend alone, polled in one "
                                      "thread, chunks dropped (no streams, no messages made)",
            **({JVM_ROW: "the original: Kafka 1.1.1's ZookeeperConsumerConnector, 4 streams "
                         "drained by 4 threads"} if args.jvm else {}),
        },
        "msgs_per_s": {name: int(statistics.median(v)) for name, v in runs.items()},
        "msgs_per_s_per_round": runs,
        # The machine's load average (1, 5, 15 min) as each round started; the header's
        # load_average has the run's start and end.
        "load_average_per_round": load_per_round,
        "ratio": {k: median_ratio[k] for k in goals},
        "ratio_per_round": {k: ratios[k] for k in goals},
        "ratio_1stream": {k: median_ratio[f"{k}_1stream"] for k in goals},
        "ratio_1stream_per_round": {k: ratios[f"{k}_1stream"] for k in goals},
        "ratio_poll_only": {k: median_ratio[f"{k}_poll_only"] for k in goals},
        "ratio_poll_only_per_round": {k: ratios[f"{k}_poll_only"] for k in goals},
        "goals": {k: f">= {v}" for k, v in goals.items()},
        "goal_met": {k: median_ratio[k] >= v for k, v in goals.items()},
        **jvm,
        "default_configuration": default,
        "peers": {name: {**bench_peers.PEERS[name].about,
                         **({"not_run": peers_not_run[name]} if name in peers_not_run else
                            {"msgs_per_s": runs[name] and int(statistics.median(runs[name])),
                             "default_ratio_to_it": median_ratio.get(f"default_to_{name}")})}
                  for name in (PEER_ROWS if args.peers else ())},
    })


def _default_configuration(args: argparse.Namespace, runs: dict[str, list[int]],
                           median: dict[str, float], per_round: dict[str, list[float]],
                           peers_not_run: dict[str, str]) -> dict[str, Any]:
    """Issue 38's goals for the default install: its backend (confluent) >= 1.0x the JVM
    1.1.1 consumer and >= 0.95x raw confluent-kafka on the same messages in the same run."""
    goals = {"raw_confluent": 0.95, **({JVM_ROW: 1.0} if args.jvm else {})}
    met = {k: median[f"default_to_{k}"] >= v for k, v in goals.items()}
    why = {k: (f"the default configuration reads at {median[f'default_to_{k}']}x {k} "
               f"(median of {args.rounds} rounds: {per_round[f'default_to_{k}']}); "
               + ("the gap to the raw client is handing each poll's messages to the "
                  "application's 4 stream threads through queues, in Python: the poll-only "
                  f"diagnostic reads at {median.get('confluent_poll_only')}x raw"
                  if k == "raw_confluent" else "the JVM reads faster on this run"))
           for k, ok in met.items() if not ok}
    return {
        "row": DEFAULT_ROW,
        "configuration": "fetch.backend=confluent (the default install's backend, named "
                         "explicitly), 4 streams drained by 4 threads, other keys at their "
                         "defaults but auto.offset.reset=smallest, auto.commit.enable=false "
                         "and queued.max.message.chunks=10 (as the JVM row's)",
        "msgs_per_s": int(statistics.median(runs[DEFAULT_ROW])),
        "ratio": {k: median[f"default_to_{k}"] for k in goals},
        "ratio_to_peers": {k: median[f"default_to_{k}"] for k in PEER_ROWS
                           if f"default_to_{k}" in median},
        "goals": {k: f">= {v}x" for k, v in goals.items()},
        "goal_met": all(met.values()),
        "goal_met_per_goal": met,
        **({"goal_why_not": why} if why else {}),
    }


def _message_count(text: str) -> int:
    # The drain threads add to the shared count a thousand at a time (a lock per message
    # would slow the loop being measured), and each of the 4 streams gets a quarter.
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if n <= 0 or n % 4000:
        raise argparse.ArgumentTypeError(f"{n}: must be a positive multiple of 4000")
    return n


def register(sub: Any) -> None:
    p = sub.add_parser("throughput", help="messages/s: raw clients vs zkconsumer streams")
    p.add_argument("--messages", type=_message_count, default=GOAL_MESSAGES,
                   help=f"a multiple of 4000 (default {GOAL_MESSAGES}, the goals' count; "
                        "others write throughput_<count>.json)")
    p.add_argument("--size", type=int, default=100)
    p.add_argument("--rounds", type=int, default=3,
                   help="rounds of all clients in one process; ratios are per round")
    p.add_argument("--no-jvm", dest="jvm", action="store_false",
                   help=f"leave out the JVM {JVM_RELEASE} legacy consumer's row")
    p.add_argument("--no-peers", dest="peers", action="store_false",
                   help=f"leave out the peer rows ({', '.join(PEER_ROWS)})")
    p.set_defaults(func=bench_throughput)
