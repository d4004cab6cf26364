"""Helpers for tests: the stack's description, a bridge run in a thread, corrupt records,
certificates, the run's summary. The helpers the tools share (waiting for conditions,
topics, producing, a group's owners) are in :mod:`zkconsumer.stack.testing`, re-exported
here for the tests."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer

from zkconsumer.stack.local import LocalStack
from zkconsumer.stack.testing import (
    NullFetcher,
    add_partitions,
    create_topic,
    delete_records,
    delete_topic,
    drop_connection,
    expected_owners,
    group_owners,
    offset_znodes,
    owners_settled,
    produce,
    produce_bulk,
    reaped,
    started_zk,
    wait_until,
)

__all__ = [
    "SUMMARY_KEY", "NullFetcher", "StackInfo", "add_partitions", "create_topic",
    "delete_records", "delete_topic", "drop_connection", "expected_owners", "group_owners",
    "offset_znodes", "owners_settled", "produce", "produce_bulk", "produce_with_bad_crc",
    "reaped", "record_summary", "running_bridge", "self_signed_cert", "started_zk",
    "wait_until",
]


@dataclass
class StackInfo:
    zookeeper: str
    bootstrap: str
    local: LocalStack | None  # None for an external stack


@contextmanager
def running_bridge(bridge: Any, name: str = "bridge") -> Iterator[list[BaseException]]:
    """``bridge.run()`` in a thread; yields what it raised (a list, empty while it runs).
    Stopped and joined on exit, where the thread must have ended."""
    failed: list[BaseException] = []

    def run() -> None:
        try:
            bridge.run()
        except BaseException as e:  # noqa: BLE001 - for the caller's assertions
            failed.append(e)

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    try:
        yield failed
    finally:
        bridge.stop()
        thread.join(15)
    assert not thread.is_alive()


def produce_with_bad_crc(stack: StackInfo, topic: str, bad: int) -> None:
    """Partition 0: ok-0, then one batch of ``bad`` records whose CRC does not match (offsets
    1 to ``bad``), then eight good messages. Partition 1: ten good messages.

    A real broker checks CRCs on produce and refuses a corrupt batch, so the batch is sent
    whole and then corrupted where a failing disk would: one byte of its last record's value
    is flipped in the broker's log segment, which the broker serves as it is (it does not
    check CRCs on fetch). Needs the local stack (its data directory)."""
    if stack.local is None:
        pytest.skip("corrupting a log segment needs the local stack's data directory")
    producer = KafkaProducer(bootstrap_servers=stack.bootstrap, linger_ms=0, acks=1,
                             enable_idempotence=False)
    try:
        producer.send(topic, b"ok-0", partition=0).get(10)
        # One batch: a producer that waits long enough to put them all in it.
        batcher = KafkaProducer(bootstrap_servers=stack.bootstrap, linger_ms=60_000, acks=1,
                                enable_idempotence=False)
        try:
            sent = [batcher.send(topic, b"corrupt", partition=0) for _ in range(bad)]
            batcher.flush(10)
            assert [f.get(10).offset for f in sent] == list(range(1, bad + 1))
        finally:
            batcher.close()
        _flip_last_byte_of_batch(stack.local.dir / "broker" / "data" / f"{topic}-0", 1)
        for i in range(bad + 1, bad + 9):
            producer.send(topic, f"ok-{i}".encode(), partition=0).get(10)
        for i in range(10):
            producer.send(topic, f"p1-{i}".encode(), partition=1).get(10)
    finally:
        producer.close()


def _flip_last_byte_of_batch(partition_dir: Path, base_offset: int) -> None:
    """Flip the last byte of the last record's value (inside the CRC's range) of the batch
    at ``base_offset`` in the partition's first log segment: the record ends with its value,
    then its header count (one byte, 0). A batch starts with its base offset (8 bytes) and
    its length (4 bytes, counting what follows)."""
    segment = partition_dir / f"{0:020d}.log"
    with open(segment, "r+b") as f:
        data = f.read()
        pos = 0
        while pos + 12 <= len(data):
            base = int.from_bytes(data[pos:pos + 8], "big")
            end = pos + 12 + int.from_bytes(data[pos + 8:pos + 12], "big")
            if base == base_offset:
                f.seek(end - 2)
                f.write(bytes([data[end - 2] ^ 0xFF]))
                return
            pos = end
    raise AssertionError(f"no batch at offset {base_offset} in {segment}")


def self_signed_cert(directory: Path) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 (also a CA file that verifies it) and its
    key, made by ``openssl`` in ``directory``."""
    crt, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(crt)],
        check=True, capture_output=True,
    )
    return str(crt), str(key)


#: ``user_properties`` key of the lines a test adds to the run's summary (record_summary).
SUMMARY_KEY = "zkc-summary"


def record_summary(node: pytest.Item, line: str) -> None:
    """Show ``line`` in the run's closing summary (tests/conftest.py prints them): a fault
    run's counts, the soak's figures. Kept on the test's report, so it reaches the terminal
    from pytest-xdist's worker processes too, where output printed by a test is not shown."""
    node.user_properties.append((SUMMARY_KEY, line))
