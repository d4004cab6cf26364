"""Helpers for tests: waiting for conditions, topics, producing."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from zkconsumer.stack.local import LocalStack


@dataclass
class StackInfo:
    zookeeper: str
    bootstrap: str
    local: LocalStack | None  # None for an external stack


@contextmanager
def started_zk(hosts: str, **kwargs: Any) -> Iterator[KazooClient]:
    """A started kazoo client for the ``with`` block (kazoo keyword arguments pass through)."""
    client = KazooClient(hosts=hosts, timeout=10.0, **kwargs)
    client.start(timeout=15)
    try:
        yield client
    finally:
        client.stop()
        client.close()


@contextmanager
def reaped(proc: subprocess.Popen[Any]) -> Iterator[subprocess.Popen[Any]]:
    """``proc`` for the ``with`` block; killed and waited for at its end if still running
    (a failed assertion must not leave it behind)."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@contextmanager
def running_bridge(bridge: Any, name: str = "bridge") -> Iterator[list[BaseException]]:
    """``bridge.run()`` in a thread; yields what it raised (a list, empty while it runs).
    Stopped and joined on exit, where the thread must have ended."""
    import threading

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


def delete_topic(bootstrap: str, name: str) -> None:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="zkc-tests")
    try:
        admin.delete_topics([name])
    finally:
        admin.close()


def delete_records(bootstrap: str, topic: str, before: dict[int, int]) -> None:
    """DeleteRecords: partition -> the offset that becomes its log start."""
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTP

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="zkc-tests")
    try:
        admin.delete_records({KTP(topic, p): o for p, o in before.items()})
    finally:
        admin.close()


def add_partitions(bootstrap: str, name: str, total: int) -> None:
    """CreatePartitions: ``name`` grows to ``total`` partitions."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewPartitions

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="zkc-tests")
    try:
        admin.create_partitions({name: NewPartitions(total)})
    finally:
        admin.close()


def produce(
    bootstrap: str, topic: str, values: Iterable[tuple[int, bytes | None, bytes]]
) -> int:
    """Send (partition, key, value) records; return how many."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, acks=1,
                             enable_idempotence=False)
    sent = []
    try:
        for partition, key, value in values:
            sent.append(producer.send(topic, key=key, value=value, partition=partition))
        producer.flush(timeout=60)
    finally:
        producer.close()
    failed = [f.exception for f in sent if not f.succeeded()]
    if failed:
        raise RuntimeError(f"{len(failed)} of {len(sent)} sends to {topic} failed, e.g. "
                           f"{failed[0]!r}")
    return len(sent)


def drop_connection(client: KazooClient) -> None:
    """Break ``client``'s connection as a network blip would: kazoo reads end-of-stream,
    reports SUSPENDED, fires and forgets every watch, and reconnects with the same session."""
    sock = client._connection._socket
    assert sock is not None, "the client is not connected"
    sock.shutdown(socket.SHUT_RDWR)


class NullFetcher:
    """A fetch side that fetches nothing: for tests of membership and ownership only."""

    def __init__(self, *args: Any) -> None:
        self.started: list[list[Any]] = []
        self.stops = 0

    def start_connections(self, infos: Iterable[Any]) -> None:
        self.started.append(list(infos))

    def stop_connections(self) -> None:
        self.stops += 1

    def shutdown(self) -> None:
        pass


def offset_znodes(zk: Any, group: str, topic: str, partitions: int) -> dict[int, int]:
    """Partition -> committed offset, read back from ZooKeeper (partitions with one only)."""
    from zkconsumer.zk import paths as zp

    out: dict[int, int] = {}
    for p in range(partitions):
        path = zp.offset_path(group, topic, p)
        if zk.exists(path):
            out[p] = zp.decode_offset(zk.get(path)[0])
    return out


def group_owners(zk: Any, group: str, topic: str) -> dict[int, str]:
    """Partition -> owning thread id, read back from ZooKeeper."""
    from kazoo.exceptions import NoNodeError

    from zkconsumer.zk import paths as zp

    out: dict[int, str] = {}
    try:
        children = zk.get_children(zp.owners_topic_dir(group, topic))
    except NoNodeError:
        return out
    for p in children:
        try:
            data, _ = zk.get(zp.owner_path(group, topic, int(p)))
        except NoNodeError:
            continue
        out[int(p)] = data.decode()
    return out


def expected_owners(zk: Any, group: str, topic: str, strategy: str = "range") -> dict[int, str]:
    """What the assignor computes for the group's current membership, for one topic."""
    from zkconsumer.consumer.assignors.core import assign
    from zkconsumer.zk import paths as zp
    from zkconsumer.zk.read import consumers_for_topic

    members = {}
    for cid in zk.get_children(zp.ids_dir(group)):
        data, _ = zk.get(zp.id_path(group, cid))
        members[cid] = zp.ConsumerRegistration.decode(data)
    topics = zk.get_children(zp.BROKER_TOPICS)
    cft = consumers_for_topic(members, topics, True)
    parts = {
        t: sorted(zp.TopicAssignment.decode(zk.get(zp.topic_path(t))[0]).partitions)
        for t in cft
        if t in topics
    }
    result = assign(strategy, {t: cft[t] for t in parts}, parts)
    return {tp.partition: th for tp, th in result.items() if tp.topic == topic}


def owners_settled(zk: Any, group: str, topic: str, strategy: str = "range") -> bool:
    exp = expected_owners(zk, group, topic, strategy)
    return bool(exp) and group_owners(zk, group, topic) == exp


def produce_bulk(bootstrap: str, topic: str, partition: int, payload: bytes, count: int) -> None:
    """``count`` copies of ``payload`` to one partition, fast (librdkafka batches them)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                         "batch.size": 1_000_000, "queue.buffering.max.kbytes": 262144})
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value=payload, partition=partition)
                break
            except BufferError:
                producer.poll(0.1)  # the local queue is full: let deliveries drain
    remaining = producer.flush(60)
    if remaining:
        raise AssertionError(f"{remaining} messages not delivered to {topic}")


def produce_with_bad_crc(stack: StackInfo, topic: str, bad: int) -> None:
    """Partition 0: ok-0, then one batch of ``bad`` records whose CRC does not match (offsets
    1 to ``bad``), then eight good messages. Partition 1: ten good messages.

    A real broker checks CRCs on produce and refuses a corrupt batch, so the batch is sent
    whole and then corrupted where a failing disk would: one byte of its last record's value
    is flipped in the broker's log segment, which the broker serves as it is (it does not
    check CRCs on fetch). Needs the local stack (its data directory)."""
    from kafka import KafkaProducer

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
