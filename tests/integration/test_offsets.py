"""Offset stores against the real stack: ZooKeeper multi commits, Kafka round trips, dual."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaAdminClient
from kafka import TopicPartition as KTP
from kazoo.client import KazooClient

from tests.support import StackInfo
from zkconsumer._config import ConsumerConfig
from zkconsumer._errors import OffsetCommitError
from zkconsumer._types import TopicPartition
from zkconsumer.consumer.offsets import (
    DualOffsetStore,
    KafkaOffsetStore,
    ZkOffsetStore,
    make_offset_store,
)
from zkconsumer.zk import paths as zp


def _config(stack: StackInfo, group: str, **props: object) -> ConsumerConfig:
    return ConsumerConfig({
        "zookeeper.connect": stack.zookeeper,
        "group.id": group,
        **{k.replace("_", "."): v for k, v in props.items()},
    })


@pytest.fixture
def kafka_store(stack: StackInfo, names: Any) -> Iterator[KafkaOffsetStore]:
    store = KafkaOffsetStore(_config(stack, names.group), names.group, lambda: [stack.bootstrap])
    yield store
    store.close()


def _kafka_offsets(stack: StackInfo, group: str, topic: str, n: int) -> dict[int, int]:
    """What the broker holds, read with a separate client."""
    admin = KafkaAdminClient(bootstrap_servers=stack.bootstrap)
    try:
        got = admin.list_group_offsets({group: [KTP(topic, p) for p in range(n)]})[group]
    finally:
        admin.close()
    return {k.partition: v.offset for k, v in got.items() if v.offset >= 0}


def test_zookeeper_commit_writes_only_changed_partitions_in_one_multi(
    zk: KazooClient, names: Any
) -> None:
    g, t = names.group, names.topic
    tps = [TopicPartition(t, p) for p in range(3)]
    store = ZkOffsetStore(zk, g)
    assert store.read(tps) == dict.fromkeys(tps)
    assert store.commit({tps[0]: 5, tps[1]: 7, tps[2]: -1}) == 2  # -1: nothing to commit
    assert zk.exists(zp.offset_path(g, t, 2)) is None

    def versions() -> list[int]:
        return [zk.get(zp.offset_path(g, t, p))[1].version for p in range(2)]

    before = versions()
    assert store.commit({tps[0]: 5, tps[1]: 7}) == 0  # nothing changed: nothing written
    assert versions() == before
    assert store.commit({tps[0]: 5, tps[1]: 8, tps[2]: 1}) == 2
    assert versions() == [before[0], before[1] + 1]
    assert [zk.get(zp.offset_path(g, t, p))[0] for p in range(3)] == [b"5", b"8", b"1"]
    # A fresh store reads what is there, and a read counts as the checkpoint.
    other = ZkOffsetStore(zk, g)
    assert other.read(tps) == {tps[0]: 5, tps[1]: 8, tps[2]: 1}
    assert other.commit({tps[0]: 5, tps[1]: 8, tps[2]: 1}) == 0
    # Someone else changed p0 meanwhile; our next commit writes what we consumed.
    zk.set(zp.offset_path(g, t, 0), b"100")
    assert store.commit({tps[0]: 6}) == 1
    assert zk.get(zp.offset_path(g, t, 0))[0] == b"6"


def test_kafka_commit_and_read_round_trip(
    stack: StackInfo, names: Any, topic_factory: Any, kafka_store: KafkaOffsetStore
) -> None:
    topic = topic_factory(names.topic, 3)
    tps = [TopicPartition(topic, p) for p in range(3)]
    assert kafka_store.read(tps) == dict.fromkeys(tps)
    assert kafka_store.commit({tps[0]: 5, tps[1]: 9, tps[2]: -1}) == 2
    assert kafka_store.read(tps) == {tps[0]: 5, tps[1]: 9, tps[2]: None}
    assert _kafka_offsets(stack, names.group, topic, 3) == {0: 5, 1: 9}
    # Kafka gets every partition each time (one OffsetCommit for the group).
    assert kafka_store.commit({tps[0]: 5, tps[1]: 10}) == 2
    fresh = KafkaOffsetStore(_config(stack, names.group), names.group, lambda: [stack.bootstrap])
    try:
        assert fresh.read(tps) == {tps[0]: 5, tps[1]: 10, tps[2]: None}
        assert fresh.read([]) == {}
        assert fresh.commit({}) == 0
    finally:
        fresh.close()


def test_kafka_store_without_brokers_raises(stack: StackInfo, names: Any) -> None:
    from kafka.errors import KafkaError

    store = KafkaOffsetStore(_config(stack, names.group), names.group, lambda: [])
    with pytest.raises(KafkaError, match="no broker"):
        store.read([TopicPartition("t", 0)])
    store.close()


def test_kafka_store_gives_up_on_unreachable_brokers_within_its_socket_timeout(
    stack: StackInfo, names: Any
) -> None:
    """Not kafka-python's 30 s wait for a first broker: with the commit retries, brokers
    registered but unreachable held a rebalance (and shutdown) for minutes."""
    from kafka.errors import KafkaError

    from zkconsumer.stack.local import free_port

    config = _config(stack, names.group, offsets_channel_socket_timeout_ms=1000)
    store = KafkaOffsetStore(config, names.group, lambda: [f"127.0.0.1:{free_port()}"])
    raised: list[BaseException] = []

    def commit() -> None:
        try:
            store.commit({TopicPartition("t", 0): 1})
        except KafkaError as e:
            raised.append(e)

    worker = threading.Thread(target=commit, daemon=True)
    worker.start()
    worker.join(15)  # well under 30 s, well over 1 s
    assert not worker.is_alive() and len(raised) == 1, "still waiting for a first broker"
    store.close()


def test_dual_reads_the_larger_and_commits_to_both(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
    kafka_store: KafkaOffsetStore,
) -> None:
    topic = topic_factory(names.topic, 4)
    tps = [TopicPartition(topic, p) for p in range(4)]
    zk_store = ZkOffsetStore(zk, names.group)
    zk_store.commit({tps[0]: 10, tps[1]: 3})
    kafka_store.commit({tps[0]: 4, tps[1]: 8, tps[2]: 7})
    dual = DualOffsetStore(ZkOffsetStore(zk, names.group), kafka_store)
    assert dual.read(tps) == {tps[0]: 10, tps[1]: 8, tps[2]: 7, tps[3]: None}
    assert dual.commit({tps[0]: 11, tps[3]: 2}) == 2
    assert _kafka_offsets(stack, names.group, topic, 4) == {0: 11, 1: 8, 2: 7, 3: 2}
    assert zk.get(zp.offset_path(names.group, topic, 0))[0] == b"11"
    assert zk.get(zp.offset_path(names.group, topic, 3))[0] == b"2"
    assert dual.read(tps) == {tps[0]: 11, tps[1]: 8, tps[2]: 7, tps[3]: 2}


@pytest.mark.parametrize(
    ("props", "kind"),
    [
        ({}, ZkOffsetStore),
        ({"dual_commit_enabled": True}, ZkOffsetStore),  # dual applies to kafka storage only
        ({"offsets_storage": "kafka"}, DualOffsetStore),  # dual commit defaults to on
        ({"offsets_storage": "Kafka", "dual_commit_enabled": False}, KafkaOffsetStore),
    ],
)
def test_make_offset_store_follows_the_configuration(
    stack: StackInfo, zk: KazooClient, names: Any, props: dict[str, object], kind: type
) -> None:
    store = make_offset_store(_config(stack, names.group, **props), zk, lambda: [stack.bootstrap])
    try:
        assert type(store) is kind
    finally:
        store.close()


def test_a_kafka_commit_answered_not_coordinator_asks_for_the_coordinator_again(
    stack: StackInfo, names: Any, topic_factory: Any, kafka_store: KafkaOffsetStore
) -> None:
    """The coordinator moved: the answer says NOT_COORDINATOR per partition (no exception),
    and kafka-python keeps the coordinator it found for good. The store drops that client,
    so the next try (a retry, the next auto-commit) finds the coordinator again."""
    from kafka.errors import NotCoordinatorError

    topic = topic_factory(names.topic, 1)
    tp = TopicPartition(topic, 0)
    assert kafka_store.commit({tp: 3}) == 1
    stale = kafka_store._admin
    stale.alter_group_offsets = lambda group, offsets: {  # type: ignore[union-attr]
        k: NotCoordinatorError for k in offsets}
    with pytest.raises(OffsetCommitError, match="NotCoordinatorError"):
        kafka_store.commit({tp: 5})
    assert kafka_store.commit({tp: 5}) == 1
    assert kafka_store._admin is not stale
    assert kafka_store.read([tp]) == {tp: 5}


def test_a_kafka_commit_refused_for_good_says_so(
    stack: StackInfo, names: Any, topic_factory: Any, kafka_store: KafkaOffsetStore
) -> None:
    """Once modern members are in the group, Kafka refuses a commit without generation and
    member id (ILLEGAL_GENERATION): not retriable, and the message says why."""
    from kafka.errors import IllegalGenerationError, NotCoordinatorError

    topic = topic_factory(names.topic, 2)
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    assert kafka_store.commit({tps[0]: 1}) == 1
    kafka_store._admin.alter_group_offsets = lambda group, offsets: {  # type: ignore[union-attr]
        k: IllegalGenerationError for k in offsets}
    with pytest.raises(OffsetCommitError, match="broker-coordinated protocol") as exc:
        kafka_store.commit({tps[0]: 2})
    assert exc.value.retriable is False
    kafka_store.commit({tps[0]: 2})  # a new client
    kafka_store._admin.alter_group_offsets = lambda group, offsets: {  # type: ignore[union-attr]
        tps_k: (IllegalGenerationError if tps_k.partition == 0 else NotCoordinatorError)
        for tps_k in offsets}
    with pytest.raises(OffsetCommitError) as exc:
        kafka_store.commit({tps[0]: 3, tps[1]: 3})
    assert exc.value.retriable is True  # one of them may pass next time


def test_a_deleted_offset_znode_is_not_remembered(zk: KazooClient, names: Any) -> None:
    """Read back missing (deleted by hand, or by a tool), an offset committed earlier is
    forgotten: the next commit of that same value is written, not skipped as unchanged."""
    g, t = names.group, names.topic
    tp = TopicPartition(t, 0)
    store = ZkOffsetStore(zk, g)
    assert store.commit({tp: 500}) == 1
    zk.delete(zp.offset_path(g, t, 0))
    assert store.read([tp]) == {tp: None}
    assert store.commit({tp: 500}) == 1
    assert zk.get(zp.offset_path(g, t, 0))[0] == b"500"
    zk.set(zp.offset_path(g, t, 0), b"garbage")
    assert store.read([tp]) == {tp: None}
    assert store.commit({tp: 500}) == 1
    assert zk.get(zp.offset_path(g, t, 0))[0] == b"500"


def test_a_big_commit_is_split_into_transactions_that_fit(
    zk: KazooClient, names: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import zkconsumer.consumer.offsets as offsets_module

    monkeypatch.setattr(offsets_module, "MAX_COMMIT_OPS", 4)
    g, t = names.group, names.topic
    store = ZkOffsetStore(zk, g)
    sent: list[int] = []
    real = zk.transaction

    def counting() -> Any:
        tx = real()
        commit_async = tx.commit_async

        def counted() -> Any:
            sent.append(len(tx.operations))
            return commit_async()

        tx.commit_async = counted  # type: ignore[method-assign]
        return tx

    monkeypatch.setattr(zk, "transaction", counting)
    offsets = {TopicPartition(t, p): 10 + p for p in range(10)}
    assert store.commit(offsets) == 10
    # 3 transactions, each sent twice: the first commit makes the znodes in between.
    assert sent == [4, 4, 4, 4, 2, 2]
    assert {p: int(zk.get(zp.offset_path(g, t, p))[0]) for p in range(10)} == {
        p: 10 + p for p in range(10)}
    sent.clear()
    assert store.commit({tp: off + 1 for tp, off in offsets.items()}) == 10
    assert sent == [4, 4, 2]


def test_a_failed_commit_names_its_cause(zk: KazooClient, names: Any) -> None:
    """The transaction's first answers are RolledBack: the error raised is the real one."""
    from kazoo.exceptions import NoAuthError
    from kazoo.security import ACL, Id, Permissions

    g, t = names.group, names.topic
    store = ZkOffsetStore(zk, g)
    assert store.commit({TopicPartition(t, 0): 1}) == 1
    zk.create(zp.offset_path(g, t, 1), b"0", acl=[ACL(Permissions.READ, Id("world", "anyone"))])
    with pytest.raises(NoAuthError):
        store.commit({TopicPartition(t, 0): 2, TopicPartition(t, 1): 3})


def test_a_read_does_not_remember_an_answer_older_than_a_commit_made_meanwhile(
    zk: KazooClient, names: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read answered with the value from before another thread's commit must not leave that
    older value cached: committing it again (rewinding) would be skipped as unchanged."""
    g, t = names.group, names.topic
    tp = TopicPartition(t, 0)
    store = ZkOffsetStore(zk, g)
    assert store.commit({tp: 5}) == 1
    real = zk.get_async

    def get_then_commit(path: str) -> Any:
        sent = real(path)  # ZooKeeper answers in order: this get sees 5
        monkeypatch.setattr(zk, "get_async", real)
        assert store.commit({tp: 7}) == 1  # as another thread would, while the read waits
        return sent

    monkeypatch.setattr(zk, "get_async", get_then_commit)
    assert store.read([tp]) == {tp: 5}
    assert store.commit({tp: 5}) == 1
    assert zk.get(zp.offset_path(g, t, 0))[0] == b"5"


def test_a_commit_that_fails_after_it_was_sent_forgets_the_cached_offset(
    zk: KazooClient, names: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connection went after the transaction was sent: ZooKeeper may hold the new value.
    The cached older one must go, or a later commit of it (a rewind) is skipped."""
    from kazoo.exceptions import ConnectionLoss

    g, t = names.group, names.topic
    tp = TopicPartition(t, 0)
    store = ZkOffsetStore(zk, g)
    assert store.commit({tp: 5}) == 1
    real = zk.transaction

    def applied_then_lost() -> Any:
        tx = real()
        commit_async = tx.commit_async

        class Lost:
            def get(self, timeout: float | None = None) -> Any:
                commit_async().get()  # ZooKeeper applied it; the answer never came
                raise ConnectionLoss()

        tx.commit_async = Lost  # type: ignore[method-assign]
        return tx

    monkeypatch.setattr(zk, "transaction", applied_then_lost)
    with pytest.raises(ConnectionLoss):
        store.commit({tp: 7})
    monkeypatch.setattr(zk, "transaction", real)
    assert zk.get(zp.offset_path(g, t, 0))[0] == b"7"
    assert store.commit({tp: 5}) == 1
    assert zk.get(zp.offset_path(g, t, 0))[0] == b"5"


def test_a_kafka_refusal_says_offset_or_offsets() -> None:
    one = OffsetCommitError("g", {("t", 0): "UnknownTopicOrPartitionError"})
    assert str(one) == "Kafka refused 1 offset of group 'g': t:0=UnknownTopicOrPartitionError"
    two = OffsetCommitError("g", {("t", 1): "B", ("t", 0): "A"})
    assert str(two) == "Kafka refused 2 offsets of group 'g': t:0=A, t:1=B"


@pytest.mark.parametrize("call", ["read", "first commit"])
def test_a_batch_while_disconnected_fails_instead_of_blocking_in_kazoo(call: str) -> None:
    """kazoo wakes its connection thread with a byte per request on a socket it reads only
    while connected: hundreds of reads or creates made while the connection is down filled
    it, and the sender blocked until ZooKeeper came back (for ever, holding the session
    guard). Sent a window at a time, the first window's answers time out instead."""
    from kazoo.handlers.threading import KazooTimeoutError
    from kazoo.protocol.states import KeeperState

    from tests.support import wait_until
    from zkconsumer.stack.local import free_port

    zk = KazooClient(hosts=f"127.0.0.1:{free_port()}",
                     connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 0.5})
    zk.start_async()
    wait_until(lambda: zk.client_state == KeeperState.CONNECTING, 10, "connecting")
    store = ZkOffsetStore(zk, "g", timeout_s=0.5)
    tps = [TopicPartition("t", p) for p in range(3000)]
    failed: list[BaseException] = []

    def run() -> None:
        try:
            if call == "read":
                store.read(tps)
            else:
                store._ensure_nodes(dict.fromkeys(tps, 1))
        except BaseException as e:  # noqa: BLE001 - checked below
            failed.append(e)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(15)
    stopper = threading.Thread(target=zk.stop, daemon=True)  # blocks too on a full socket
    stopper.start()
    stopper.join(15)
    assert not worker.is_alive(), "blocked in kazoo until the connection is back"
    assert len(failed) == 1 and isinstance(failed[0], KazooTimeoutError), failed
    assert not stopper.is_alive()
    zk.close()


def test_dual_commit_writes_zookeeper_for_what_kafka_took_when_it_refuses_some() -> None:
    """Kafka refusing one partition (for good, say) kept every offset of the commit out of
    ZooKeeper: the group's ZooKeeper offsets froze, and a member still on ZooKeeper storage
    that took a partition over replayed. The original wrote ZooKeeper per partition Kafka
    accepted."""

    refused, taken = TopicPartition("t", 0), TopicPartition("t", 1)

    class Kafka:
        def commit(self, offsets: Any) -> int:
            raise OffsetCommitError("g", {refused: "TopicAuthorizationFailedError"}, False)

    class ZooKeeper:
        def __init__(self) -> None:
            self.commits: list[dict[TopicPartition, int]] = []

        def commit(self, offsets: Any) -> int:
            self.commits.append(dict(offsets))
            return len(offsets)

    zk_store = ZooKeeper()
    dual = DualOffsetStore(zk_store, Kafka())  # type: ignore[arg-type]
    with pytest.raises(OffsetCommitError):
        dual.commit({refused: 5, taken: 7})
    assert zk_store.commits == [{taken: 7}]
