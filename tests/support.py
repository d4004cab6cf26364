"""Helpers for tests: waiting for conditions, topics, producing."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from zkconsumer._stack import LocalStack


@dataclass
class StackInfo:
    zookeeper: str
    bootstrap: str
    local: LocalStack | None  # None for an external stack


def wait_until(
    cond: Callable[[], Any], timeout: float = 30.0, what: str = "condition", every: float = 0.05
) -> Any:
    """Poll ``cond`` until it returns something truthy; fail the test after ``timeout``."""
    deadline = time.monotonic() + timeout
    last_exc: BaseException | None = None
    while True:
        try:
            value = cond()
            if value:
                return value
        except Exception as e:  # noqa: BLE001 - reported if the wait times out
            last_exc = e
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout}s waiting for {what}"
                + (f" (last error: {last_exc!r})" if last_exc else "")
            )
        time.sleep(every)


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="zkc-tests")
    try:
        admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        admin.close()


def produce(
    bootstrap: str, topic: str, values: Iterable[tuple[int, bytes | None, bytes]]
) -> int:
    """Send (partition, key, value) records; return how many."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, acks=1)
    n = 0
    try:
        for partition, key, value in values:
            producer.send(topic, key=key, value=value, partition=partition)
            n += 1
        producer.flush(timeout=60)
    finally:
        producer.close()
    return n
