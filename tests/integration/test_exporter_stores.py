"""The exporter and ``groups lag`` over every offset store: groups whose members commit to
Kafka (``offsets.storage=kafka``), to both (``dual.commit.enabled``), and groups migrated to
Kafka by ``zkconsumer migrate``, against the real Kafka 3.9 and ZooKeeper."""

from __future__ import annotations

import json
from typing import Any

from kazoo.client import KazooClient

from tests.support import StackInfo, produce, wait_until
from zkconsumer import ConsumerConfig, ZookeeperConsumerConnector, cli
from zkconsumer._types import TopicPartition
from zkconsumer.broker.clients import modern_admin
from zkconsumer.ops.exporter import GroupLag, LagMonitor, offset_store
from zkconsumer.ops.kafka_store import write_kafka_offsets
from zkconsumer.zk import paths as zp

Taken = list[tuple[int, int]]  # (partition, offset)


def legacy_take(stack: StackInfo, group: str, topic: str, k: int, **props: str) -> Taken:
    """Consume exactly ``k`` messages with a real legacy connector, commit, shut down."""
    config = {"zookeeper.connect": stack.zookeeper, "group.id": group,
              "auto.commit.enable": "false", "auto.offset.reset": "smallest",
              "consumer.timeout.ms": "20000", "zookeeper.session.timeout.ms": "4000"}
    config.update({k.replace("_", "."): v for k, v in props.items()})
    connector = ZookeeperConsumerConnector(ConsumerConfig(config))
    try:
        it = iter(connector.create_message_streams({topic: 1})[topic][0])
        taken = [(m.partition, m.offset) for m in (next(it) for _ in range(k))]
        connector.commit_offsets()
    finally:
        connector.shutdown()
    return taken


def modern_take(stack: StackInfo, group: str, topic: str, k: int) -> Taken:
    """Join the group as a modern (broker-coordinated) consumer, take ``k``, commit, leave."""
    from kafka import KafkaConsumer
    from kafka.coordinator.assignors.range import RangePartitionAssignor

    consumer = KafkaConsumer(
        bootstrap_servers=stack.bootstrap, group_id=group, enable_auto_commit=False,
        auto_offset_reset="none", partition_assignment_strategy=[RangePartitionAssignor],
        session_timeout_ms=6000, heartbeat_interval_ms=500, max_poll_interval_ms=6000)
    taken: Taken = []
    try:
        wait_until(lambda: bool(consumer.partitions_for_topic(topic)), 30, "the metadata")
        consumer.subscribe([topic])

        def more() -> bool:
            batch = consumer.poll(timeout_ms=200, max_records=k - len(taken))
            taken.extend((tp.partition, r.offset) for tp, rs in batch.items() for r in rs)
            return len(taken) >= k

        wait_until(more, 90, f"{k} messages through the modern group", every=0)
        consumer.commit()
    finally:
        consumer.close()
    return taken


def next_offsets(topic: str, *phases: Taken) -> dict[TopicPartition, int]:
    """The next offset of both partitions after ``phases`` (0 where none was taken: the
    members commit the position of every partition they own)."""
    out = {TopicPartition(topic, p): 0 for p in (0, 1)}
    for phase in phases:
        for p, o in phase:
            tp = TopicPartition(topic, p)
            out[tp] = max(out.get(tp, 0), o + 1)
    return out


def produce_each(stack: StackInfo, topic: str, n: int) -> None:
    produce(stack.bootstrap, topic, [(p, None, b"m") for _ in range(n) for p in (0, 1)])


def only(groups: list[GroupLag], name: str) -> GroupLag:
    found = [g for g in groups if g.group == name]
    assert len(found) == 1, [g.group for g in groups]  # shown once, never twice
    return found[0]


def offsets_of(group: GroupLag, store: str) -> dict[TopicPartition, int]:
    return {TopicPartition(p.topic, p.partition): o for p in group.partitions
            if (o := p.zookeeper_offset if store == "zookeeper" else p.kafka_offset)
            is not None}


def test_which_store_the_offsets_say() -> None:
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    assert offset_store({a: 3}, {}) == "zookeeper"
    assert offset_store({}, {a: 3}) == "kafka"
    assert offset_store({a: 3, b: 1}, {a: 3, b: 1}) == "dual"
    assert offset_store({a: 3, b: 1}, {a: 7, b: 1}) == "kafka"  # ZooKeeper's left behind
    assert offset_store({a: 7, b: 1}, {a: 3, b: 1}) == "zookeeper"  # Kafka's left behind
    assert offset_store({a: 7, b: 1}, {a: 3, b: 2}) == "dual"  # each behind somewhere


def test_a_group_committing_to_kafka_has_its_lag_from_kafka(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any, capsys: Any,
) -> None:
    topic, g = topic_factory(names.topic, 2), names.group
    produce_each(stack, topic, 10)
    taken = legacy_take(stack, g, topic, 6, offsets_storage="kafka",
                        dual_commit_enabled="false")
    assert zk.exists(zp.offsets_dir(g)) is None or not zk.get_children(zp.offsets_dir(g))
    monitor = LagMonitor()
    group = only(monitor.poll(zk), g)
    assert group.total_lag == 20 - 6  # ZooKeeper alone would say: no offset, lag 0
    assert group.store == "kafka"
    assert offsets_of(group, "kafka") == next_offsets(topic, taken)
    assert offsets_of(group, "zookeeper") == {}
    assert {p.status for p in group.partitions} == {"OK"}
    text = monitor.render().decode()
    assert f'zkconsumer_group_offset_store{{group="{g}",store="kafka"}} 1' in text
    p0 = f'group="{g}",topic="{topic}",partition="0"'
    lag0 = 10 - next_offsets(topic, taken)[TopicPartition(topic, 0)]
    assert f'zkconsumer_group_partition_lag{{{p0},store="kafka"}} {lag0}' in text
    assert f'zkconsumer_group_partition_offset{{{p0},store="zookeeper"}}' not in text
    assert f'zkconsumer_group_lag{{group="{g}"}} 14' in text
    # groups lag says the same.
    code = cli.main(["groups", "lag", "--zookeeper", stack.zookeeper, "--json", "--group", g])
    [doc] = json.loads(capsys.readouterr().out)
    assert code == 0 and (doc["total_lag"], doc["offset_store"]) == (14, "kafka")
    assert cli.main(["groups", "lag", "--zookeeper", stack.zookeeper, "--group", g]) == 0
    header, *rows = capsys.readouterr().out.splitlines()
    assert header.split() == ["GROUP", "TOPIC", "PARTITION", "OFFSET", "ZK-OFFSET",
                              "KAFKA-OFFSET", "LOG-END-OFFSET", "LAG", "TIME-LAG", "OWNER",
                              "STATUS"]
    kafka0 = next_offsets(topic, taken)[TopicPartition(topic, 0)]
    assert rows[0].split()[3:8] == [str(kafka0), "-", str(kafka0), "10", str(10 - kafka0)]
    cli.main(["groups", "lag", "--zookeeper", stack.zookeeper])  # 1 if another is UNKNOWN
    [line] = [r for r in capsys.readouterr().out.splitlines() if r.startswith(g)]
    assert line.split()[4] == "14" and line.split()[-2:] == ["kafka", "OK"]


def test_a_dual_commit_group_shows_both_stores_and_the_larger_lag(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
) -> None:
    topic, g = topic_factory(names.topic, 2), names.group
    produce_each(stack, topic, 10)
    taken = legacy_take(stack, g, topic, 8, offsets_storage="kafka",
                        dual_commit_enabled="true")
    committed = next_offsets(topic, taken)
    monitor = LagMonitor()
    group = only(monitor.poll(zk), g)
    assert group.store == "dual"
    assert offsets_of(group, "zookeeper") == offsets_of(group, "kafka") == committed
    assert group.total_lag == 20 - 8
    text = monitor.render().decode()
    for store in ("zookeeper", "kafka"):
        assert (f'zkconsumer_group_partition_offset{{group="{g}",topic="{topic}",'
                f'partition="0",store="{store}"}}') in text
    # Each store behind on one partition (commits that reached one store only): each
    # partition's larger lag counts.
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    zk.set(zp.offset_path(g, topic, 0), b"3")
    zk.set(zp.offset_path(g, topic, 1), b"7")
    admin = modern_admin(stack.bootstrap)
    try:
        write_kafka_offsets(admin, g, {tp0: 5, tp1: 4})
    finally:
        admin.close()
    group = wait_until(lambda: (found := only(monitor.poll(zk), g)).total_lag == 7 + 6
                       and found, 20, "each partition's larger lag")
    assert group.store == "dual"
    by_tp = {TopicPartition(p.topic, p.partition): p for p in group.partitions}
    assert (by_tp[tp0].store, by_tp[tp0].offset, by_tp[tp0].kafka_offset) == ("zookeeper", 3, 5)
    assert (by_tp[tp1].store, by_tp[tp1].offset, by_tp[tp1].zookeeper_offset) == ("kafka", 4, 7)


def test_a_migrated_group_is_shown_once_with_kafkas_offsets(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any, capsys: Any,
) -> None:
    topic, g = topic_factory(names.topic, 2), names.group
    produce_each(stack, topic, 10)
    a = legacy_take(stack, g, topic, 5)
    code = cli.main(["migrate", "copy", "--group", g, "--bootstrap-server", stack.bootstrap,
                     "--zookeeper", stack.zookeeper, "--check-interval", "0.2",
                     "--from", "zookeeper", "--to", "kafka"])
    capsys.readouterr()
    assert code == 0
    monitor = LagMonitor()
    group = only(monitor.poll(zk), g)
    assert group.store == "dual"  # copied: both the same
    assert group.total_lag == 20 - 5
    # The modern group takes over and commits to Kafka; ZooKeeper's are history.
    b = modern_take(stack, g, topic, 9)
    for _ in range(2):  # a store changes when two polls say so
        group = only(monitor.poll(zk), g)
    assert group.store == "kafka"
    assert group.total_lag == 20 - 5 - 9  # ZooKeeper's would say 15
    assert offsets_of(group, "kafka") == next_offsets(topic, a, b)
    assert offsets_of(group, "zookeeper") == next_offsets(topic, a)
    assert group.status not in ("ERR", "UNKNOWN"), group.status
    text = monitor.render().decode()
    assert text.count(f'zkconsumer_group_status_code{{group="{g}"}}') == 1


def test_the_members_ids_znodes_say_where_they_commit(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
) -> None:
    topic, g = topic_factory(names.topic, 2), names.group
    produce_each(stack, topic, 10)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    for p in (0, 1):  # the same in both stores: the offsets alone would say dual
        zk.create(zp.offset_path(g, topic, p), b"3", makepath=True)
    admin = modern_admin(stack.bootstrap)
    try:
        write_kafka_offsets(admin, g, {tp0: 3, tp1: 3})
    finally:
        admin.close()
    monitor = LagMonitor()
    assert only(monitor.poll(zk), g).store == "dual"
    config = ConsumerConfig({"zookeeper.connect": stack.zookeeper, "group.id": g,
                             "consumer.id": "k", "auto.commit.enable": "false",
                             "offsets.storage": "kafka", "dual.commit.enabled": "false"})
    connector = ZookeeperConsumerConnector(config)
    try:
        connector.create_message_streams({topic: 1})
        [cid] = zk.get_children(zp.ids_dir(g))
        data, _ = zk.get(zp.id_path(g, cid))
        assert zp.ConsumerRegistration.decode(data).offsets_storage == "kafka"
        group = wait_until(lambda: (x := only(monitor.poll(zk), g)).members == 1 and x, 20,
                           "the member registered")
        assert group.store == "kafka"  # as its ids znode says, at once
        assert {p.store for p in group.partitions} == {"kafka"}
    finally:
        connector.shutdown()
