"""The main job on the local stack, start to finish (run by tools/demo).

1. start the stack (real ZooKeeper 3.8, Apache Kafka 3.9 in ZooKeeper mode) in .stack/demo;
2. show the broker and topic as the broker registered them in ZooKeeper;
3. produce sample orders to a 6-partition topic, in three parts;
4. run a consumer group of two connectors (two streams each) through the legacy API; a
   third member joins once the first part is consumed and leaves once the second is (the
   second part is produced while it is in the group, so it has messages to consume):
   ownership moves, nothing is lost;
5. print the owners and committed offsets as ZooKeeper holds them, check that every order was
   consumed, that the third member consumed some, and that the committed offsets are the log
   ends; then stop the stack.
"""

from __future__ import annotations

import argparse
import json
import logging
import threading
import time
from collections import Counter
from pathlib import Path

from kazoo.client import KazooClient

from zkconsumer import (
    ConsumerConfig,
    ConsumerTimeoutException,
    create_consumer_connector,
)
from zkconsumer.stack.local import DEFAULT_BROKER, LocalStack, describe, sigterm_interrupts
from zkconsumer.stack.testing import create_topic, group_owners, produce, wait_until
from zkconsumer.zk import paths as zp

ROOT = Path(__file__).resolve().parent.parent

PARTITIONS = 6


def say(msg: str) -> None:
    print(f"==> {msg}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=20000)
    ap.add_argument("--keep", action="store_true", help="leave the stack running")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="show the client libraries' log lines too")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s")
    if not args.verbose:
        # kafka-python's "Task ... ran for 0.142s (>0.100s threshold). It is blocking the
        # event loop" and kazoo's reconnects are not the demo's story.
        for name in ("kafka", "kazoo"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
    # Tied unless kept: a demo killed with SIGKILL leaves no java or broker behind.
    stack = LocalStack(ROOT / ".stack" / "demo", tied=not args.keep, broker=DEFAULT_BROKER)
    with sigterm_interrupts():  # a demo stopped by SIGTERM stops its stack too
        say(f"starting the local stack ({describe(DEFAULT_BROKER)})")
        addresses = stack.up()
        print(json.dumps(addresses))
        try:
            return run(stack, args.messages)
        finally:
            if not args.keep:
                say("stopping the stack")
                stack.down()


def run(stack: LocalStack, n_messages: int) -> int:
    zk = KazooClient(hosts=stack.zookeeper)
    zk.start()
    topic = f"orders-{int(time.time())}"
    group = f"demo-{int(time.time())}"
    create_topic(stack.bootstrap, topic, PARTITIONS)
    wait_until(lambda: zk.exists(zp.topic_path(topic)), 30, "the topic registered in ZooKeeper")
    for bid in zk.get_children(zp.BROKER_IDS):
        say(f"/brokers/ids/{bid} = {zk.get(zp.broker_path(int(bid)))[0].decode()}")
    say(f"/brokers/topics/{topic} = {zk.get(zp.topic_path(topic))[0].decode()}")

    def produce_orders(lo: int, hi: int) -> None:
        say(f"producing orders {lo} to {hi - 1} to {topic}")
        produce(stack.bootstrap, topic, (
            (i % PARTITIONS, f"customer-{i % 97}".encode(), json.dumps({"order": i}).encode())
            for i in range(lo, hi)))

    first, second = n_messages // 3, 2 * n_messages // 3
    produce_orders(0, first)
    seen: Counter[tuple[int, int]] = Counter()
    by_member: Counter[str] = Counter()
    lock = threading.Lock()

    def config() -> ConsumerConfig:
        return ConsumerConfig({
            "zookeeper.connect": stack.zookeeper, "group.id": group,
            "auto.offset.reset": "smallest", "consumer.timeout.ms": "500",
            "auto.commit.interval.ms": "1000", "zookeeper.session.timeout.ms": "4000",
        })

    def drain(stream: object, stop: threading.Event, member: str) -> None:
        while not stop.is_set():
            try:
                for m in stream:  # type: ignore[attr-defined]
                    with lock:
                        seen[(m.partition, m.offset)] += 1
                        by_member[member] += 1
                    if stop.is_set():
                        break
                return  # shutdown ended the stream
            except ConsumerTimeoutException:
                continue

    stop = threading.Event()
    members = []
    threads = []
    say("two members join the group, two streams each (create_message_streams({topic: 2}))")
    for _ in range(2):
        c = create_consumer_connector(config())
        streams = c.create_message_streams({topic: 2})
        members.append(c)
        for s in streams[topic]:
            t = threading.Thread(target=drain, args=(s, stop, c.consumer_id), daemon=True)
            t.start()
            threads.append(t)
    show_owners(zk, group, topic)

    wait_until(lambda: len(seen) >= first, 120, "the first part consumed")
    say(f"consumed {len(seen)} so far; a third member joins")
    third = create_consumer_connector(config())
    third_stream = third.create_message_streams({topic: 1})[topic][0]
    t3 = threading.Thread(target=drain, args=(third_stream, stop, third.consumer_id),
                          daemon=True)
    t3.start()
    wait_until(lambda: any(o.startswith(third.consumer_id + "-")
                           for o in group_owners(zk, group, topic).values()), 60,
               "the rebalance to give the third member its partitions")
    show_owners(zk, group, topic)

    produce_orders(first, second)
    wait_until(lambda: len(seen) >= second, 120, "the second part consumed")
    say(f"consumed {len(seen)} so far; the third member leaves cleanly")
    third.shutdown()
    wait_until(lambda: len(set(group_owners(zk, group, topic).values())) == 4
               and len(group_owners(zk, group, topic)) == PARTITIONS, 60,
               "the partitions to go back to the first two members")
    show_owners(zk, group, topic)

    produce_orders(second, n_messages)
    while len(seen) < n_messages:
        last = len(seen)
        say(f"progress: {last}/{n_messages}")

        def more(target: int = min(n_messages, last + 2000)) -> bool:
            return len(seen) >= target

        wait_until(more, 60, "more messages")
    for c in members:
        c.commit_offsets()
    dupes = sum(v - 1 for v in seen.values())
    say(f"consumed {len(seen)} distinct messages of {n_messages}, {dupes} duplicates")
    for member, n in sorted(by_member.items()):
        say(f"{member} consumed {n}")
    committed_ok = True
    for p in range(PARTITIONS):
        off = zk.get(zp.offset_path(group, topic, p))[0].decode()
        log_end = n_messages // PARTITIONS + (1 if p < n_messages % PARTITIONS else 0)
        committed_ok &= int(off) == log_end
        say(f"/consumers/{group}/offsets/{topic}/{p} = {off} (log end {log_end})")
    stop.set()
    for c in members:
        c.shutdown()
    zk.stop()
    zk.close()
    checks = {
        "every message consumed": len(seen) == n_messages,
        "the third member consumed some": by_member[third.consumer_id] > 0,
        "committed offsets at the log ends": committed_ok,
    }
    for what, passed in checks.items():
        say(f"{'ok' if passed else 'FAILED'}: {what}")
    ok = all(checks.values())
    say("demo finished" if ok else "demo FAILED")
    return 0 if ok else 1


def show_owners(zk: KazooClient, group: str, topic: str) -> None:
    for p, owner in sorted(group_owners(zk, group, topic).items()):
        print(f"    {topic}/{p} -> {owner}")


if __name__ == "__main__":
    raise SystemExit(main())
