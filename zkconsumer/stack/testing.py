"""Helpers over a running stack for the tests and the tools (as ``kazoo.testing`` is kazoo's):
waiting for a condition, topics made, records produced, a group's owners read back and
compared with what its assignor computes.

Development code: no production module imports it (``tools/check_layers.py``).
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from kafka import TopicPartition as KTP
from kafka.admin import NewPartitions, NewTopic
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from zkconsumer.broker.clients import confluent_producer, kafka_admin, kafka_producer
from zkconsumer.consumer.assignors.core import assign
from zkconsumer.zk import paths as zp
from zkconsumer.zk.read import consumers_for_topic


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


def wait_until(
    cond: Callable[[], Any], timeout: float = 30.0, what: str = "condition", every: float = 0.05
) -> Any:
    """Poll ``cond`` until it returns something truthy; AssertionError after ``timeout``
    (a test fails, a tool stops with the reason)."""
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
    admin = kafka_admin(bootstrap_servers=bootstrap, client_id="zkc-tests")
    try:
        admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        admin.close()


def delete_topic(bootstrap: str, name: str) -> None:
    admin = kafka_admin(bootstrap_servers=bootstrap, client_id="zkc-tests")
    try:
        admin.delete_topics([name])
    finally:
        admin.close()


def delete_records(bootstrap: str, topic: str, before: dict[int, int]) -> None:
    """DeleteRecords: partition -> the offset that becomes its log start."""
    admin = kafka_admin(bootstrap_servers=bootstrap, client_id="zkc-tests")
    try:
        admin.delete_records({KTP(topic, p): o for p, o in before.items()})
    finally:
        admin.close()


def add_partitions(bootstrap: str, name: str, total: int) -> None:
    """CreatePartitions: ``name`` grows to ``total`` partitions."""
    admin = kafka_admin(bootstrap_servers=bootstrap, client_id="zkc-tests")
    try:
        admin.create_partitions({name: NewPartitions(total)})
    finally:
        admin.close()


def produce(
    bootstrap: str, topic: str, values: Iterable[tuple[int, bytes | None, bytes]]
) -> int:
    """Send (partition, key, value) records; return how many."""
    producer = kafka_producer(bootstrap_servers=bootstrap, linger_ms=5, acks=1,
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


def produce_bulk(bootstrap: str, topic: str, partition: int, payload: bytes, count: int) -> None:
    """``count`` copies of ``payload`` to one partition, fast (librdkafka batches them)."""
    producer = confluent_producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                                   "batch.size": 1_000_000,
                                   "queue.buffering.max.kbytes": 262144})
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
    out: dict[int, int] = {}
    for p in range(partitions):
        path = zp.offset_path(group, topic, p)
        if zk.exists(path):
            out[p] = zp.decode_offset(zk.get(path)[0])
    return out


def group_owners(zk: Any, group: str, topic: str) -> dict[int, str]:
    """Partition -> owning thread id, read back from ZooKeeper."""
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
