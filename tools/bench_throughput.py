"""Throughput: raw kafka-python / confluent-kafka against zkconsumer streams on each backend.

All four read the same messages (default 200,000 of 100 bytes over 4 partitions) from the
beginning, in one run, one after the other; each reports messages per second from its first
message to its last. zkconsumer runs 4 streams (one per partition) drained by 4 threads, as
a legacy application would; the raw clients poll in one thread.
"""

from __future__ import annotations

import argparse
import threading
import time
import uuid
from typing import Any

from tools.bench import progress, stack, write_result


def _produce(bootstrap: str, topic: str, n: int, size: int) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, batch_size=262144,
                             acks=1)
    payload = b"x" * size
    for i in range(n):
        producer.send(topic, value=payload, partition=i % 4)
        if i and i % 50_000 == 0:
            progress(f"produced {i}")
    producer.flush()
    producer.close()


def raw_kafka_python(bootstrap: str, topic: str, n: int) -> float:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      max_partition_fetch_bytes=1048576)
    c.assign([TopicPartition(topic, p) for p in range(4)])
    c.seek_to_beginning()
    got = 0
    start = None
    while got < n:
        for records in c.poll(timeout_ms=1000).values():
            if start is None:
                start = time.perf_counter()
            for r in records:
                got += 1
                _ = r.value
    elapsed = time.perf_counter() - (start or time.perf_counter())
    c.close()
    return n / elapsed


def raw_confluent(bootstrap: str, topic: str, n: int) -> float:
    from confluent_kafka import Consumer, TopicPartition

    # Tuned as zkconsumer's confluent backend is (a larger prefetch queue, a short back-off
    # when it is full): with librdkafka's defaults the raw client stalls about a second per
    # refill on this broker, which would flatter zkconsumer.
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex}",
                  "enable.auto.commit": False, "enable.auto.offset.store": False,
                  "queued.max.messages.kbytes": 16384, "fetch.queue.backoff.ms": 10,
                  "receive.message.max.bytes": 100_000_000})
    c.assign([TopicPartition(topic, p, 0) for p in range(4)])
    got = 0
    start = None
    while got < n:
        msgs = c.consume(num_messages=10_000, timeout=1.0)
        for m in msgs:
            if m.error():
                continue
            if start is None:
                start = time.perf_counter()
            got += 1
            _ = m.value()
    elapsed = time.perf_counter() - (start or time.perf_counter())
    c.close()
    return n / elapsed


def zkconsumer_streams(zk: str, topic: str, n: int, backend: str) -> float:
    from zkconsumer import ConsumerConfig, create_consumer_connector

    config = ConsumerConfig({
        "zookeeper.connect": zk, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
        "auto.offset.reset": "smallest", "auto.commit.enable": "false",
        "fetch.backend": backend, "queued.max.message.chunks": "10",
    })
    got = [0]
    first: list[float] = []
    lock = threading.Lock()
    done = threading.Event()
    with create_consumer_connector(config) as c:
        streams = c.create_message_streams({topic: 4})[topic]

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

        threads = [threading.Thread(target=drain, args=(s,), daemon=True) for s in streams]
        for t in threads:
            t.start()
        done.wait(600)
        end = time.perf_counter()
    return n / (end - min(first))


def bench_throughput(args: argparse.Namespace) -> None:
    n = args.messages
    with stack() as (zk, bootstrap):
        from tests.support import create_topic

        topic = f"bench-tp-{uuid.uuid4().hex[:8]}"
        create_topic(bootstrap, topic, 4)
        progress(f"producing {n} messages of {args.size} bytes to {topic}")
        _produce(bootstrap, topic, n, args.size)
        from kazoo.client import KazooClient

        from tests.support import wait_until
        from zkconsumer import _zkpaths as zp

        client = KazooClient(hosts=zk)
        client.start()
        wait_until(lambda: client.exists(zp.topic_path(topic)), 30, "topic registered")
        client.stop()
        client.close()
        results = {}
        for name, fn in [
            ("raw_kafka_python", lambda: raw_kafka_python(bootstrap, topic, n)),
            ("zkconsumer_kafka_python", lambda: zkconsumer_streams(zk, topic, n,
                                                                   "kafka-python")),
            ("raw_confluent", lambda: raw_confluent(bootstrap, topic, n)),
            ("zkconsumer_confluent", lambda: zkconsumer_streams(zk, topic, n, "confluent")),
        ]:
            progress(f"running {name}")
            results[name] = round(fn())
            progress(f"{name}: {results[name]} msgs/s")
    r_kp = results["zkconsumer_kafka_python"] / results["raw_kafka_python"]
    r_cf = results["zkconsumer_confluent"] / results["raw_confluent"]
    write_result("throughput", {
        "messages": n, "message_bytes": args.size, "partitions": 4,
        "msgs_per_s": results,
        "ratio": {"kafka_python": round(r_kp, 3), "confluent": round(r_cf, 3)},
        "goals": {"kafka_python": ">= 0.9", "confluent": ">= 0.8"},
        "goal_met": {"kafka_python": r_kp >= 0.9, "confluent": r_cf >= 0.8},
    })


def register(sub: Any) -> None:
    p = sub.add_parser("throughput", help="messages/s: raw clients vs zkconsumer streams")
    p.add_argument("--messages", type=int, default=200_000)
    p.add_argument("--size", type=int, default=100)
    p.set_defaults(func=bench_throughput)
