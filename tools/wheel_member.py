"""The member of tools/wheel-check, run by the new venv's Python (``python -I``, from a
directory outside the checkout): produces messages to a new topic of the stack, reads them
back through the public API of the zkconsumer installed from the wheel, and checks that it
is that one, not the checkout's.

Usage: ``python -I wheel_member.py ZOOKEEPER BOOTSTRAP VENV``; exits 0 when every message
was read, 1 otherwise, saying why in one line.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

from kafka import KafkaProducer

import zkconsumer

#: Messages produced, and read back.
COUNT = 100
#: How long the member waits for a next message before it gives up.
IDLE_MS = 20000


def produce(bootstrap: str, topic: str) -> set[bytes]:
    """COUNT messages to ``topic`` (made by the broker at the first send)."""
    sent = {f"wheel-check {i}".encode() for i in range(COUNT)}
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        for value in sorted(sent):
            producer.send(topic, value)
        producer.flush(timeout=60)
    finally:
        producer.close()
    return sent


def consume(zookeeper: str, topic: str, sent: set[bytes]) -> set[bytes]:
    """What one group member reads of ``topic`` from the start, until it has ``sent``."""
    config = zkconsumer.ConsumerConfig({
        "zookeeper.connect": zookeeper, "group.id": topic,
        "auto.offset.reset": "smallest", "consumer.timeout.ms": IDLE_MS})
    got: set[bytes] = set()
    with zkconsumer.create_consumer_connector(config) as connector:
        stream = connector.create_message_streams({topic: 1})[topic][0]
        try:
            for m in stream:
                got.add(m.message)
                if got >= sent:
                    break
        except zkconsumer.ConsumerTimeoutException:
            pass  # reported below as what is missing
    return got


def main(argv: list[str]) -> int:
    zookeeper, bootstrap, venv = argv
    where = Path(zkconsumer.__file__).resolve().parent
    if not where.is_relative_to(Path(venv).resolve()):
        print(f"wheel-check: zkconsumer was imported from {where}, not from the wheel's venv "
              f"{venv}", file=sys.stderr)
        return 1
    topic = f"wheel-check-{uuid.uuid4().hex[:8]}"
    sent = produce(bootstrap, topic)
    got = consume(zookeeper, topic, sent)
    if got != sent:
        print(f"wheel-check: the member read {len(got & sent)} of the {len(sent)} messages "
              f"produced to {topic} (none for {IDLE_MS / 1000:g} s)", file=sys.stderr)
        return 1
    print(f"wheel-check: a member of zkconsumer {zkconsumer.__version__} from {where} read "
          f"the {len(sent)} messages produced to {topic}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
