"""Migration to the modern group protocol: status, copy, and both documented paths end to end.

Everything runs against the real stack: real ZooKeeper, a real Kafka broker, real connectors
and real kafka-python group members consuming real messages; a log start above zero comes
from DeleteRecords, as an operator's retention or `kafka-delete-records` moves it.
"""

from __future__ import annotations

import functools
import json
import re
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from kazoo.client import KazooClient

from tests.support import (
    NullFetcher,
    StackInfo,
    create_topic,
    delete_records,
    produce,
    started_zk,
    wait_until,
)
from zkconsumer import ConsumerConfig, ZookeeperConsumerConnector, cli
from zkconsumer._errors import GroupActiveError
from zkconsumer._types import TopicPartition as TP
from zkconsumer.broker.clients import modern_admin
from zkconsumer.migration.copy import copy_offsets, plan_copy, wait_until_idle
from zkconsumer.migration.status import classify, migration_status
from zkconsumer.migration.stores import read_zk_offsets
from zkconsumer.ops.kafka_store import read_kafka_offsets
from zkconsumer.zk import paths as zp

Taken = list[tuple[int, int, bytes]]  # (partition, offset, value)


# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------


def set_zk(zk: KazooClient, group: str, topic: str, offsets: dict[int, int]) -> None:
    for p, off in offsets.items():
        path = zp.offset_path(group, topic, p)
        if zk.exists(path):
            zk.set(path, zp.encode_offset(off))
        else:
            zk.create(path, zp.encode_offset(off), makepath=True)


def set_kafka(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Commit through kafka-python's admin client directly (not through _migrate)."""
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTP
    from kafka.errors import (
        CoordinatorLoadInProgressError,
        CoordinatorNotAvailableError,
        NoError,
        NotCoordinatorError,
    )
    from kafka.structs import OffsetAndMetadata

    not_yet = (CoordinatorNotAvailableError, CoordinatorLoadInProgressError, NotCoordinatorError)

    def commit() -> Any:
        # None while the offsets topic of a new cluster is still being made or loaded.
        try:
            result = admin.alter_group_offsets(
                group, {KTP(topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()}
            )
        except not_yet:
            return None
        return None if any(e in not_yet for e in result.values()) else result

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        result = wait_until(commit, 60, f"offsets of {group} committed in Kafka")
    finally:
        admin.close()
    assert all(e is NoError for e in result.values()), result


def kafka_offsets(bootstrap: str, group: str) -> dict[TP, int]:
    admin = modern_admin(bootstrap)
    try:
        return read_kafka_offsets(admin, group)
    finally:
        admin.close()


def legacy(stack: StackInfo, group: str, **props: str) -> ZookeeperConsumerConnector:
    """A real connector (real fetchers) that commits only when told to."""
    base = {
        "zookeeper.connect": stack.zookeeper,
        "group.id": group,
        "auto.commit.enable": "false",
        "auto.offset.reset": "smallest",
        "consumer.timeout.ms": "20000",  # a missing message fails the test, never hangs it
        "zookeeper.session.timeout.ms": "4000",
    }
    base.update({k.replace("_", "."): v for k, v in props.items()})
    return ZookeeperConsumerConnector(ConsumerConfig(base))


def legacy_take(stack: StackInfo, group: str, topic: str, k: int, **props: str) -> Taken:
    """Consume exactly ``k`` messages with a legacy connector, commit them, shut down."""
    connector = legacy(stack, group, **props)
    try:
        stream = connector.create_message_streams({topic: 1})[topic][0]
        it = iter(stream)
        taken = [(m.partition, m.offset, m.message) for m in (next(it) for _ in range(k))]
        connector.commit_offsets()
    finally:
        connector.shutdown()
    return taken


def modern_consumer(stack: StackInfo, group: str, topic: str) -> Any:
    from kafka import KafkaConsumer
    from kafka.coordinator.assignors.range import RangePartitionAssignor

    consumer = KafkaConsumer(
        bootstrap_servers=stack.bootstrap,
        group_id=group,
        client_id="modern",
        enable_auto_commit=False,
        auto_offset_reset="none",  # no committed offset = an error, never a silent reset
        partition_assignment_strategy=[RangePartitionAssignor],
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        max_poll_interval_ms=6000,
    )
    # The topic's metadata first: kafka-python 3.0's group leader assigns from what metadata
    # it has when the group forms, and one without the topic's ("No partition metadata")
    # assigned nothing until its next metadata refresh (a run timed out at 90 s).
    wait_until(lambda: bool(consumer.partitions_for_topic(topic)), 30, f"{topic}'s metadata")
    consumer.subscribe([topic])
    return consumer


def modern_take(stack: StackInfo, group: str, topic: str, k: int) -> Taken:
    """Join the modern group, consume exactly ``k`` messages, commit them, leave."""
    consumer = modern_consumer(stack, group, topic)
    taken: Taken = []
    try:
        def more() -> bool:
            batch = consumer.poll(timeout_ms=200, max_records=k - len(taken))
            taken.extend((tp.partition, r.offset, r.value) for tp, rs in batch.items()
                         for r in rs)
            return len(taken) >= k

        wait_until(more, timeout=90, what=f"{k} messages through the modern group", every=0)
        consumer.commit()  # the positions: the next offset after each returned message
    finally:
        consumer.close()
    return taken


def next_offsets(topic: str, *phases: Taken) -> dict[TP, int]:
    """The next offset per partition after consuming ``phases`` from offset 0."""
    out: dict[int, int] = {}
    for phase in phases:
        for p, o, _ in phase:
            out[p] = max(out.get(p, 0), o + 1)
    return {TP(topic, p): o for p, o in out.items()}


def firsts(taken: Taken) -> dict[int, int]:
    out: dict[int, int] = {}
    for p, o, _ in taken:
        out.setdefault(p, o)
    return out


def positive(d: dict[TP, int]) -> dict[TP, int]:
    """Offsets with 0 dropped: an offset of 0 and no offset both mean "from the start" here."""
    return {tp: o for tp, o in d.items() if o > 0}


def assert_resumes_exactly(before: dict[TP, int], phase: Taken) -> None:
    """Each partition's first message in ``phase`` is the next one after ``before``."""
    assert phase, "the phase consumed nothing"
    next_of = {tp.partition: o for tp, o in before.items()}
    for p, first in firsts(phase).items():
        assert first == next_of.get(p, 0), (p, first, before)


@pytest.fixture
def topic2(topic_factory: Any, names: Any) -> str:
    return str(topic_factory(names.topic, 2))


@pytest.fixture
def bridged(kraft_stack: StackInfo, names: Any) -> Iterator[tuple[StackInfo, KazooClient, str]]:
    """The KRaft stack, a client of its ZooKeeper and a 2-partition topic there, for what only
    a cluster the bridge registers shows: a ZooKeeper-mode broker acts on a hand-written
    /brokers/topics znode (it creates the topic), a KRaft cluster never reads it."""
    with started_zk(kraft_stack.zookeeper) as zk:
        create_topic(kraft_stack.bootstrap, names.topic, 2)
        wait_until(lambda: zk.exists(zp.topic_path(names.topic)), 30, "the topic registered")
        yield kraft_stack, zk, names.topic


def produce_each(stack: StackInfo, topic: str, per_partition: int, start: int = 0) -> None:
    produce(stack.bootstrap, topic, [
        (p, None, f"{p}-{i}".encode()) for i in range(start, start + per_partition)
        for p in (0, 1)
    ])


def fill(stack: StackInfo, topic: str, partitions: int, n: int) -> None:
    """``n`` messages in each of the first ``partitions`` partitions: offsets up to ``n``
    are then in the log (the copy refuses offsets past the log end)."""
    produce(stack.bootstrap, topic, [(p, None, b"x") for p in range(partitions)
                                     for _ in range(n)])


def run_cli(capsys: Any, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# --------------------------------------------------------------------------------------
# pure parts
# --------------------------------------------------------------------------------------


def test_classify_each_class_and_precedence() -> None:
    assert classify(5, 5, 0, 10) == "equal"
    assert classify(7, 4, 0, 10) == "zk_ahead"
    assert classify(3, 6, 0, 10) == "kafka_ahead"
    assert classify(None, 4, 0, 10) == "missing_in_zk"
    assert classify(4, None, 0, 10) == "missing_in_kafka"
    assert classify(4, -1, 0, 10) == "missing_in_kafka"  # Kafka's -1 is "no offset"
    assert classify(None, None, 0, 10) == "no_offset"
    # Out of range wins over everything else, for the offset the switch would use (the
    # newer: the copy never overwrites it): the copy would move a dead position.
    assert classify(2, 3, 5, 10) == "below_log_start"
    assert classify(None, 2, 5, 10) == "below_log_start"
    assert classify(12, 12, 0, 10) == "above_log_end"
    assert classify(12, 4, 0, 10) == "above_log_end"
    # A stale offset below the log start does not matter when the other is newer and valid
    # (ZooKeeper left behind once dual commit is off): it blocked the documented path.
    assert classify(2, 6, 5, 10) == "kafka_ahead"
    assert classify(6, 2, 5, 10) == "zk_ahead"
    assert classify(10, 10, 0, 10) == "equal"  # the log end itself is a valid position


def test_plan_copy_keeps_values_and_newer_offsets() -> None:
    t = "t"
    src = {TP(t, 0): 5, TP(t, 1): 7, TP(t, 2): 3}
    dst = {TP(t, 0): 5, TP(t, 1): 4, TP(t, 2): 6}
    plan = plan_copy(src, dst, [*src, TP(t, 3)], force=False)
    assert [(a.partition, a.source_offset, a.dest_offset, a.action) for a in plan] == [
        (0, 5, 5, "skip_equal"), (1, 7, 4, "copy"), (2, 3, 6, "skip_newer"),
        (3, None, None, "skip_missing"),
    ]
    forced = plan_copy(src, dst, src, force=True)
    assert [a.action for a in forced] == ["skip_equal", "copy", "overwrite"]


def test_wait_until_idle_needs_consecutive_empty_checks() -> None:
    looks = iter([["owner t:0"], [], ["owner t:0"], [], [], []])
    slept: list[float] = []
    probes = wait_until_idle(lambda: next(looks), checks=3, interval_s=0.5, timeout_s=60,
                             sleep=slept.append)
    assert probes == 6  # one empty look between two live ones does not count
    assert slept == [0.5] * 5


def test_wait_until_idle_says_what_it_waits_for_once_and_on_each_change() -> None:
    looks = iter([["owner t:0", "owner t:1"], ["owner t:1", "owner t:0"], ["owner t:1"],
                  ["owner t:1"], [], []])
    told: list[tuple[list[str], float]] = []
    probes = wait_until_idle(lambda: next(looks), checks=2, interval_s=0.5, timeout_s=60,
                             sleep=lambda _: None, on_wait=lambda *a: told.append(a))
    assert probes == 6
    assert [live for live, _ in told] == [["owner t:0", "owner t:1"], ["owner t:1"]]
    assert all(0 < left <= 60 for _, left in told)


def test_wait_until_idle_gives_up_naming_what_is_live() -> None:
    with pytest.raises(GroupActiveError, match=r"owner t:3 = g_c-0"):
        wait_until_idle(lambda: ["owner t:3 = g_c-0"], checks=3, interval_s=0.01,
                        timeout_s=0.05)


# --------------------------------------------------------------------------------------
# migrate status
# --------------------------------------------------------------------------------------


def test_status_classes_each_produced_on_purpose(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any
) -> None:

    topic = topic_factory(names.topic, 8)
    group = names.group
    produce(stack.bootstrap, topic, [(p, None, b"x") for p in range(7) for _ in range(10)])
    zk_side = {0: 5, 1: 7, 2: 3, 4: 4, 5: 2, 6: 12}
    kafka_side = {0: 5, 1: 4, 2: 6, 3: 4, 5: 3, 6: 12}
    set_zk(zk, group, topic, zk_side)
    set_kafka(stack.bootstrap, group, topic, kafka_side)

    delete_records(stack.bootstrap, topic, {5: 5})
    status = migration_status(zk, group, stack.bootstrap)
    rows = {p.partition: p for p in status.partitions}
    assert {p: r.state for p, r in rows.items()} == {
        0: "equal", 1: "zk_ahead", 2: "kafka_ahead", 3: "missing_in_zk",
        4: "missing_in_kafka", 5: "below_log_start", 6: "above_log_end", 7: "no_offset",
    }
    assert [(r.zookeeper_offset, r.kafka_offset) for r in rows.values()] == [
        (5, 5), (7, 4), (3, 6), (None, 4), (4, None), (2, 3), (12, 12), (None, None)
    ]
    assert [r.log_end for r in rows.values()] == [10] * 7 + [0]
    assert [r.log_start for r in rows.values()] == [0] * 5 + [5, 0, 0]
    assert [(r.zookeeper_lag, r.kafka_lag) for r in rows.values()] == [
        (5, 5), (3, 6), (7, 4), (None, 6), (6, None), (8, 7), (0, 0), (None, None)
    ]
    assert not status.safe
    assert status.reason.startswith("ZooKeeper is ahead of Kafka on 1 partition (")
    assert len(status.blockers) == 4  # zk_ahead, missing_in_kafka, below start, above end
    assert status.zookeeper_members == [] and status.zookeeper_owners == {}
    assert status.modern_members == [] and status.modern_state == "Empty"


def test_status_is_safe_only_after_several_empty_looks(
    stack: StackInfo, zk: KazooClient, names: Any, topic2: str, capsys: Any
) -> None:
    """status looked once: a legacy member restarting by its supervisor (a second with no
    ids znode) looked gone, and a script waiting for SAFE started the modern consumers
    while it came back. As the copy does, it takes several empty looks in a row."""
    group, topic = names.group, topic2
    produce_each(stack, topic, 5)
    set_zk(zk, group, topic, {0: 3, 1: 4})
    set_kafka(stack.bootstrap, group, topic, {0: 3, 1: 4})
    looks: list[float] = []

    def back_on_the_second_look(seconds: float) -> None:
        looks.append(seconds)
        if len(looks) == 1:  # the member is back between the first and the second look
            zk.create(zp.id_path(group, f"{group}_restarted"), b"{}", ephemeral=True,
                      makepath=True)

    status = migration_status(zk, group, stack.bootstrap, checks=3, check_interval_s=0.25,
                              sleep=back_on_the_second_look)
    assert looks == [0.25]
    assert not status.safe
    assert status.reason == (f"a consumer was seen on look 2 of 3: legacy consumer "
                             f"{group}_restarted; run status again once the group has stopped")
    zk.delete(zp.id_path(group, f"{group}_restarted"))
    code, out, _ = run_cli(capsys, "migrate", "status", "--group", group, "--bootstrap-server",
                           stack.bootstrap, "--zookeeper", stack.zookeeper, "--checks", "2",
                           "--check-interval", "0.1")
    assert code == 0, out
    assert out.rstrip().endswith("(no consumer seen on 2 looks, 0.1 s apart)"), out


def test_status_sees_live_consumers_of_both_protocols(
    stack: StackInfo, zk: KazooClient, names: Any, topic2: str, capsys: Any
) -> None:
    group, topic = names.group, topic2
    produce_each(stack, topic, 5)
    set_zk(zk, group, topic, {0: 3, 1: 4})
    set_kafka(stack.bootstrap, group, topic, {0: 3, 1: 4})
    args = ("migrate", "status", "--group", group, "--bootstrap-server", stack.bootstrap,
            "--zookeeper", stack.zookeeper)

    code, out, _ = run_cli(capsys, *args)
    assert code == 0, out
    assert "SAFE to switch: no consumer of either protocol is alive" in out

    config = ConsumerConfig({"zookeeper.connect": stack.zookeeper, "group.id": group,
                             "consumer.id": "old", "auto.commit.enable": "false"})
    connector = ZookeeperConsumerConnector(config, fetcher_factory=NullFetcher)
    modern = None
    try:
        connector.create_message_streams({topic: 1})
        code, out, _ = run_cli(capsys, *args, "--json")
        assert code == 1
        data = json.loads(out)
        assert data["safe"] is False
        assert data["zookeeper"]["members"] == [f"{group}_old"]
        assert data["zookeeper"]["owners"] == {f"{topic}:0": f"{group}_old-0",
                                               f"{topic}:1": f"{group}_old-0"}
        assert data["reason"].startswith("2 owner znodes are live (legacy consumers own ")

        # A modern member joining as well: the mixed group is called out.
        modern = modern_consumer(stack, group, topic)
        wait_until(lambda: modern.poll(timeout_ms=100) is not None and modern.assignment(),
                   timeout=90, what="the modern member's assignment", every=0)
        code, out, _ = run_cli(capsys, *args, "--json")
        data = json.loads(out)
        assert code == 1
        members = data["kafka"]["members"]
        # Member ids are "<client id>-<uuid>".
        assert len(members) == 1 and members[0]["member_id"].startswith("modern-")
        assert data["kafka"]["state"] == "Stable"
        assert any(b.startswith("1 modern member is live at the same time")
                   for b in data["blockers"])
    finally:
        if modern is not None:
            modern.close()
        connector.shutdown()


# --------------------------------------------------------------------------------------
# migrate copy
# --------------------------------------------------------------------------------------


def test_copy_refuses_while_owners_exist(
    stack: StackInfo, zk: KazooClient, names: Any, topic2: str, capsys: Any
) -> None:
    group, topic = names.group, topic2
    fill(stack, topic, 2, 6)
    set_zk(zk, group, topic, {0: 6, 1: 2})
    config = ConsumerConfig({"zookeeper.connect": stack.zookeeper, "group.id": group,
                             "consumer.id": "alive", "auto.commit.enable": "false"})
    connector = ZookeeperConsumerConnector(config, fetcher_factory=NullFetcher)
    try:
        connector.create_message_streams({topic: 1})
        with pytest.raises(GroupActiveError, match=f"owner {topic}:0 = {group}_alive-0"):
            copy_offsets(zk, group, stack.bootstrap, "zookeeper", "kafka", checks=3,
                         check_interval_s=0.1, wait_timeout_s=0.5)
        code, out, err = run_cli(
            capsys, "migrate", "copy", "--group", group, "--from", "zookeeper", "--to",
            "kafka", "--bootstrap-server", stack.bootstrap, "--zookeeper", stack.zookeeper,
            "--wait-timeout", "0.5", "--check-interval", "0.1",
        )
        assert code == 2 and out == ""
        waited, failed = err.splitlines()
        assert waited.startswith("zkconsumer migrate copy: waiting up to 0.") and waited.endswith(
            f" s for the group's consumers to stop: owner {topic}:0 = {group}_alive-0; "
            f"owner {topic}:1 = {group}_alive-0; legacy consumer {group}_alive"), waited
        assert "still has live consumers" in failed
        # The dry run shows the plan and who is alive, and waits for nothing.
        result = copy_offsets(zk, group, stack.bootstrap, "zookeeper", "kafka", dry_run=True)
        assert [a.action for a in result.actions] == ["copy", "copy"]
        assert result.written == 0
        assert f"legacy consumer {group}_alive" in result.live_consumers
    finally:
        connector.shutdown()
    assert kafka_offsets(stack.bootstrap, group) == {}  # nothing was written

    # Once the consumer is gone the same copy goes through.
    result = copy_offsets(zk, group, stack.bootstrap, "zookeeper", "kafka", checks=3,
                          check_interval_s=0.1, wait_timeout_s=10)
    assert result.idle_checks == 3 and result.written == 2
    assert kafka_offsets(stack.bootstrap, group) == {TP(topic, 0): 6, TP(topic, 1): 2}


def test_copy_respects_newer_offsets_and_round_trips(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any, capsys: Any
) -> None:
    group = names.group
    topic = topic_factory(names.topic, 3)
    fill(stack, topic, 3, 12)
    set_zk(zk, group, topic, {0: 5, 1: 7, 2: 3})
    set_kafka(stack.bootstrap, group, topic, {0: 5, 1: 4, 2: 6})
    base = ("migrate", "copy", "--group", group, "--bootstrap-server", stack.bootstrap,
            "--zookeeper", stack.zookeeper, "--check-interval", "0.1", "--json")

    code, out, _ = run_cli(capsys, *base, "--from", "zookeeper", "--to", "kafka", "--dry-run")
    assert code == 0
    plan = json.loads(out)
    assert [(p["partition"], p["action"]) for p in plan["partitions"]] == [
        (0, "skip_equal"), (1, "copy"), (2, "skip_newer")]
    assert plan["written"] == 0 and plan["dry_run"] is True
    assert kafka_offsets(stack.bootstrap, group) == {TP(topic, 0): 5, TP(topic, 1): 4,
                                                     TP(topic, 2): 6}

    code, out, _ = run_cli(capsys, *base, "--from", "zookeeper", "--to", "kafka")
    assert code == 0 and json.loads(out)["written"] == 1
    # Copied as is (no plus or minus one); the newer Kafka offset of partition 2 stays.
    assert kafka_offsets(stack.bootstrap, group) == {TP(topic, 0): 5, TP(topic, 1): 7,
                                                     TP(topic, 2): 6}

    code, out, _ = run_cli(capsys, *base, "--from", "zookeeper", "--to", "kafka", "--force")
    assert code == 0 and [p["action"] for p in json.loads(out)["partitions"]] == [
        "skip_equal", "skip_equal", "overwrite"]
    assert kafka_offsets(stack.bootstrap, group) == {TP(topic, 0): 5, TP(topic, 1): 7,
                                                     TP(topic, 2): 3}

    # Round trip: the modern side moves on, the rollback copies it back unchanged.
    set_kafka(stack.bootstrap, group, topic, {0: 9, 2: 8})
    set_zk(zk, group, topic, {1: 11})  # newer in ZooKeeper: kept
    code, out, _ = run_cli(capsys, *base, "--from", "kafka", "--to", "zookeeper")
    assert code == 0
    assert [p["action"] for p in json.loads(out)["partitions"]] == [
        "copy", "skip_newer", "copy"]
    assert read_zk_offsets(zk, group) == {TP(topic, 0): 9, TP(topic, 1): 11, TP(topic, 2): 8}
    code, out, _ = run_cli(capsys, *base, "--from", "zookeeper", "--to", "kafka")
    assert kafka_offsets(stack.bootstrap, group) == read_zk_offsets(zk, group)


def test_copy_to_zookeeper_over_a_minus_one_offset_znode(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any
) -> None:
    """A ``-1`` offset znode (no offset) is what the plan reads as none: the rollback copy
    writes over it (it failed with "changed since the plan (-1)" on every run)."""
    group = names.group
    topic = topic_factory(names.topic, 2)
    fill(stack, topic, 2, 9)
    set_zk(zk, group, topic, {0: -1, 1: 3})
    set_kafka(stack.bootstrap, group, topic, {0: 9, 1: 4})
    result = copy_offsets(zk, group, stack.bootstrap, "kafka", "zookeeper", checks=1,
                          check_interval_s=0.1)
    assert result.written == 2
    assert read_zk_offsets(zk, group) == {TP(topic, 0): 9, TP(topic, 1): 4}


def test_copy_bad_input_is_one_line(
    stack: StackInfo, zk: KazooClient, capsys: Any, names: Any
) -> None:
    def copy(*argv: str) -> tuple[int, str, str]:
        return run_cli(capsys, "migrate", "copy", "--group", names.group, *argv,
                       "--bootstrap-server", stack.bootstrap, "--zookeeper", stack.zookeeper,
                       "--check-interval", "0.01")

    code, out, err = copy("--from", "kafka", "--to", "kafka")
    assert (code, out) == (2, "") and err.strip() == (
        "zkconsumer migrate copy: --from and --to are both kafka")
    code, out, err = copy("--from", "zookeeper", "--to", "kafka")
    assert (code, out) == (2, "")
    assert err.strip() == (f"zkconsumer migrate copy: group {names.group!r} not found: no "
                           f"/consumers/{names.group} in ZooKeeper and no committed offsets "
                           "or members in Kafka")
    # A mistyped chroot is named as such, for status and copy alike (each named too).
    for argv in (["status"], ["copy", "--from", "zookeeper", "--to", "kafka"]):
        code, out, err = run_cli(
            capsys, "migrate", *argv, "--group", names.group, "--bootstrap-server",
            stack.bootstrap, "--zookeeper", f"{stack.zookeeper}/no-such-chroot")
        assert (code, out) == (2, "")
        assert err.strip() == (f"zkconsumer migrate {argv[0]}: the chroot /no-such-chroot of "
                               "the connect string does not exist; check --zookeeper")
    # A group that exists, with nothing in the source store.
    zk.ensure_path(zp.ids_dir(names.group))
    code, out, err = copy("--from", "zookeeper", "--to", "kafka")
    assert (code, out) == (2, "")
    assert err.strip() == (f"zkconsumer migrate copy: group {names.group!r} has no committed "
                           "offsets in ZooKeeper")


# --------------------------------------------------------------------------------------
# end to end: real connectors and a real modern group, no loss, no replay
# --------------------------------------------------------------------------------------


def test_dual_commit_path_and_rollback_end_to_end(
    stack: StackInfo, zk: KazooClient, names: Any, topic2: str
) -> None:
    group, topic = names.group, topic2
    produce_each(stack, topic, 10)
    tp0, tp1 = TP(topic, 0), TP(topic, 1)

    def status() -> Any:
        return migration_status(zk, group, stack.bootstrap)

    # 1. the legacy group as it was: ZooKeeper storage
    a = legacy_take(stack, group, topic, 6)
    assert positive(read_zk_offsets(zk, group)) == next_offsets(topic, a)
    assert kafka_offsets(stack.bootstrap, group) == {}
    before = status()
    assert not before.safe and "Kafka has no offset" in before.reason

    # 2. offsets.storage=kafka with dual commit: reads take the max, commits go to both
    b = legacy_take(stack, group, topic, 6, offsets_storage="kafka",
                    dual_commit_enabled="true")
    assert_resumes_exactly(next_offsets(topic, a), b)
    assert positive(read_zk_offsets(zk, group)) == next_offsets(topic, a, b)
    assert positive(kafka_offsets(stack.bootstrap, group)) == next_offsets(topic, a, b)
    s = status()
    assert s.safe, s.reason
    assert {p.state for p in s.partitions if p.kafka_offset} == {"equal"}

    # 3. dual commit off: Kafka only; ZooKeeper falls behind and that is fine
    c = legacy_take(stack, group, topic, 4, offsets_storage="kafka",
                    dual_commit_enabled="false")
    assert_resumes_exactly(next_offsets(topic, a, b), c)
    assert positive(read_zk_offsets(zk, group)) == next_offsets(topic, a, b)
    assert positive(kafka_offsets(stack.bootstrap, group)) == next_offsets(topic, a, b, c)
    s = status()
    assert s.safe, s.reason

    # 4. the modern group takes over at exactly the next message
    d = modern_take(stack, group, topic, 4)
    assert_resumes_exactly(next_offsets(topic, a, b, c), d)
    everything = Counter((p, o) for p, o, _ in a + b + c + d)
    assert everything == Counter({(p, o): 1 for p in (0, 1) for o in range(10)})
    assert kafka_offsets(stack.bootstrap, group) == {tp0: 10, tp1: 10}

    # 5. rollback the same way: dual commit reads Kafka's newer offsets ...
    produce_each(stack, topic, 3, start=10)
    e = legacy_take(stack, group, topic, 3, offsets_storage="kafka",
                    dual_commit_enabled="true")
    assert_resumes_exactly({tp0: 10, tp1: 10}, e)
    after_e = {tp0: 10, tp1: 10} | next_offsets(topic, a, b, c, d, e)
    assert read_zk_offsets(zk, group) == kafka_offsets(stack.bootstrap, group) == after_e
    # ... then ZooKeeper storage alone carries on from there
    f = legacy_take(stack, group, topic, 3)
    assert_resumes_exactly(after_e, f)
    everything = Counter((p, o) for p, o, _ in a + b + c + d + e + f)
    assert everything == Counter({(p, o): 1 for p in (0, 1) for o in range(13)})
    assert read_zk_offsets(zk, group) == {tp0: 13, tp1: 13}


def test_copy_path_end_to_end(
    stack: StackInfo, zk: KazooClient, names: Any, topic2: str, capsys: Any
) -> None:
    group, topic = names.group, topic2
    produce_each(stack, topic, 6)
    copy = ("migrate", "copy", "--group", group, "--bootstrap-server", stack.bootstrap,
            "--zookeeper", stack.zookeeper, "--check-interval", "0.2")

    a = legacy_take(stack, group, topic, 5)
    code, out, _ = run_cli(capsys, *copy, "--from", "zookeeper", "--to", "kafka")
    assert code == 0 and "wrote" in out
    assert positive(kafka_offsets(stack.bootstrap, group)) == next_offsets(topic, a)

    b = modern_take(stack, group, topic, 4)
    assert_resumes_exactly(next_offsets(topic, a), b)

    code, out, _ = run_cli(capsys, *copy, "--from", "kafka", "--to", "zookeeper")
    assert code == 0
    assert read_zk_offsets(zk, group) == kafka_offsets(stack.bootstrap, group)

    c = legacy_take(stack, group, topic, 3)
    assert_resumes_exactly(next_offsets(topic, a, b), c)
    everything = Counter((p, o) for p, o, _ in a + b + c)
    assert everything == Counter({(p, o): 1 for p in (0, 1) for o in range(6)})


def legacy_owner(
    stack: StackInfo, zk: KazooClient, group: str, topic: str
) -> ZookeeperConsumerConnector:
    """Offsets 1 and 1 in ZooKeeper and a live legacy member "leaving" owning the topic's
    partitions (shut it down to let a copy go on)."""
    fill(stack, topic, 2, 1)
    set_zk(zk, group, topic, {0: 1, 1: 1})
    config = ConsumerConfig({"zookeeper.connect": stack.zookeeper, "group.id": group,
                             "consumer.id": "leaving", "auto.commit.enable": "false"})
    connector = ZookeeperConsumerConnector(config, fetcher_factory=NullFetcher)
    connector.create_message_streams({topic: 1})
    return connector


def test_copy_waits_for_a_consumer_to_leave(
    stack: StackInfo, zk: KazooClient, names: Any, topic2: str
) -> None:
    group, topic = names.group, topic2
    connector = legacy_owner(stack, zk, group, topic)
    admin = CountingAdmin(modern_admin(stack.bootstrap))  # counts the copy's looks
    results: list[Any] = []
    worker = threading.Thread(target=lambda: results.append(copy_offsets(
        zk, group, stack.bootstrap, "zookeeper", "kafka", checks=3, check_interval_s=0.2,
        wait_timeout_s=60, admin=admin)))
    worker.start()
    try:
        wait_until(lambda: admin.looks >= 2, timeout=30, what="two looks by the copy")
        # The copy is waiting: nothing reaches Kafka while the owner is there.
        assert kafka_offsets(stack.bootstrap, group) == {}
    finally:
        connector.shutdown()
        worker.join(timeout=60)
        admin.close()
    assert results and results[0].written == 2
    assert results[0].idle_checks >= 5  # two looks saw the owner, then three empty ones
    assert kafka_offsets(stack.bootstrap, group) == {TP(topic, 0): 1, TP(topic, 1): 1}


class CountingAdmin:
    """Delegates to an admin client, counting DescribeGroups calls (one per look)."""

    def __init__(self, admin: Any) -> None:
        self._admin = admin
        self.looks = 0

    def describe_groups(self, *args: Any, **kwargs: Any) -> Any:
        self.looks += 1
        return self._admin.describe_groups(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._admin, name)


def test_copy_into_an_acl_protected_group_names_the_refused_znode(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any, capsys: Any,
    monkeypatch: Any,
) -> None:
    from kazoo.security import ACL, Id, make_digest_acl_credential

    group = names.group
    topic = topic_factory(names.topic, 1)
    user, password = "zkc", "mig-pw"
    owner = KazooClient(hosts=stack.zookeeper, auth_data=[("digest", f"{user}:{password}")],
                        default_acl=[ACL(31, Id("digest", make_digest_acl_credential(
                            user, password))), ACL(1, Id("world", "anyone"))])
    owner.start(timeout=15)
    try:
        zk.ensure_path("/consumers")  # open, as the cluster's other groups need it
        owner.create(zp.offset_path(group, topic, 0), zp.encode_offset(3), makepath=True)
        fill(stack, topic, 1, 9)
        set_kafka(stack.bootstrap, group, topic, {0: 9})
        base = ("migrate", "copy", "--group", group, "--bootstrap-server", stack.bootstrap,
                "--zookeeper", stack.zookeeper, "--check-interval", "0.1", "--from", "kafka",
                "--to", "zookeeper")
        monkeypatch.delenv("ZKCONSUMER_ZOOKEEPER_AUTH", raising=False)
        code, out, err = run_cli(capsys, *base)
        assert (code, out) == (2, ""), err
        assert "migrate copy: ZooKeeper refused to" in err and group in err
        assert "ZKCONSUMER_ZOOKEEPER_AUTH" in err
        assert err.count("\n") == 1, err  # one line, no traceback
        assert read_zk_offsets(zk, group) == {TP(topic, 0): 3}  # nothing written
        monkeypatch.setenv("ZKCONSUMER_ZOOKEEPER_AUTH", f"digest:{user}:{password}")
        code, out, err = run_cli(capsys, *base)
        assert code == 0, err
        assert read_zk_offsets(zk, group) == {TP(topic, 0): 9}
    finally:
        owner.delete(zp.group_dir(group), recursive=True)
        owner.stop()
        owner.close()


def test_status_reaches_the_brokers_with_the_command_config(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any, capsys: Any,
    tmp_path: Any,
) -> None:
    topic = topic_factory(names.topic, 1)
    set_zk(zk, names.group, topic, {0: 0})
    argv = ["migrate", "status", "--zookeeper", stack.zookeeper, "--bootstrap-server",
            stack.bootstrap, "--group", names.group, "--json"]
    code, out, err = run_cli(capsys, *argv)
    assert code in (0, 1) and json.loads(out)["group"] == names.group, err
    sasl = tmp_path / "sasl.properties"
    sasl.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                    "sasl.plain.username=alice\nsasl.plain.password=wonder-land\n")
    # The test broker has no SASL: with the settings, the admin client cannot get in.
    code, out, err = run_cli(capsys, *argv, "--command-config", str(sasl))
    assert code == 2 and out == ""
    assert "cannot connect to the brokers" in err and "wonder-land" not in err


# --------------------------------------------------------------------------------------
# deleted topics, an unknown log range, failed transactions, ACLs, big groups
# --------------------------------------------------------------------------------------


def delete_topic(stack: StackInfo, zk: KazooClient, topic: str) -> None:
    """Delete ``topic`` on the broker and wait until it is gone from both registries."""
    from zkconsumer.migration.stores import _broker_topics

    admin = modern_admin(stack.bootstrap)
    try:
        admin.delete_topics([topic])
        wait_until(lambda: _broker_topics(admin, [topic]) == {topic: None}, timeout=30,
                   what=f"{topic} gone from the broker")
    finally:
        admin.close()
    # The bridge drops the topics it mirrored, as a ZooKeeper-mode broker did on deletion.
    wait_until(lambda: zk.exists(zp.topic_path(topic)) is None, timeout=30,
               what=f"{topic} gone from /brokers/topics")


def status_cli(capsys: Any, stack: StackInfo, group: str, *more: str) -> tuple[int, str, str]:
    return run_cli(capsys, "migrate", "status", "--group", group, "--bootstrap-server",
                   stack.bootstrap, "--zookeeper", stack.zookeeper, *more)


def copy_cli(
    capsys: Any, stack: StackInfo, group: str, source: str, dest: str, *more: str
) -> tuple[int, str, str]:
    return run_cli(capsys, "migrate", "copy", "--group", group, "--from", source, "--to",
                   dest, "--bootstrap-server", stack.bootstrap, "--zookeeper",
                   stack.zookeeper, "--check-interval", "0.1", *more)


def test_deleted_topic_offsets_are_a_warning_and_never_copied(
    stack: StackInfo, zk: KazooClient, names: Any, topic2: str, topic_factory: Any,
    capsys: Any,
) -> None:
    """Legacy groups keep offset znodes of topics deleted long ago: they used to block the
    switch for good (missing_in_kafka) and make every copy fail half-written."""
    group, live = names.group, topic2
    gone = topic_factory(names("gone"), 1)
    produce_each(stack, live, 4)
    set_zk(zk, group, live, {0: 3, 1: 2})
    set_zk(zk, group, gone, {0: 7})
    delete_topic(stack, zk, gone)

    code, out, _ = status_cli(capsys, stack, group, "--json")
    data = json.loads(out)
    assert code == 1
    assert {(p["topic"], p["class"]) for p in data["partitions"]} == {
        (live, "missing_in_kafka"), (gone, "topic_missing")}
    assert data["reason"].startswith("Kafka has no offset for 2 partitions (")
    assert not any(gone in b for b in data["blockers"]), data["blockers"]
    assert any(w.startswith(f"stale offsets for 1 partition of 1 topic that exists neither "
                            f"in ZooKeeper nor on the brokers ({gone}): a deleted topic, "
                            "nothing to consume; `migrate copy` skips them")
               for w in data["warnings"]), data["warnings"]

    code, out, err = copy_cli(capsys, stack, group, "zookeeper", "kafka")
    assert code == 0, err
    assert "wrote 2 offsets to kafka" in out
    assert f"skipped the stale offsets of 1 topic the brokers do not have (a deleted " \
           f"topic, nothing to consume): {gone}" in out
    assert kafka_offsets(stack.bootstrap, group) == {TP(live, 0): 3, TP(live, 1): 2}

    code, out, _ = status_cli(capsys, stack, group)
    assert code == 0, out
    assert "SAFE to switch" in out and "warning: stale offsets" in out


def test_offsets_of_partitions_a_topic_no_longer_has_only_warn_and_are_never_copied(
    stack: StackInfo, zk: KazooClient, names: Any, topic2: str, capsys: Any,
) -> None:
    """A topic recreated with fewer partitions: the offsets of the partitions gone were
    "log range unknown ... run again once the brokers answer", which never came true."""
    group, topic = names.group, topic2
    produce_each(stack, topic, 4)
    set_zk(zk, group, topic, {0: 3, 1: 2, 5: 9})  # partition 5: from the old topic
    code, out, _ = status_cli(capsys, stack, group, "--json")
    data = json.loads(out)
    assert code == 1
    assert {(p["partition"], p["class"]) for p in data["partitions"]} == {
        (0, "missing_in_kafka"), (1, "missing_in_kafka"), (5, "partition_missing")}
    assert not any("log range unknown" in b for b in data["blockers"]), data["blockers"]
    assert any(w.startswith(f"stale offsets for 1 partition its topic no longer has "
                            f"({topic}:5): a topic recreated with fewer partitions")
               for w in data["warnings"]), data["warnings"]

    code, out, err = copy_cli(capsys, stack, group, "zookeeper", "kafka")
    assert code == 0, err
    assert f"skipped the stale offsets of 1 partition the brokers do not have (a topic " \
           f"recreated with fewer partitions, nothing to consume): {topic}:5" in out
    assert kafka_offsets(stack.bootstrap, group) == {TP(topic, 0): 3, TP(topic, 1): 2}
    code, out, _ = status_cli(capsys, stack, group)
    assert code == 0 and "SAFE to switch" in out, out


@contextmanager
def _listed_in_zookeeper_only(stack: StackInfo, zk: KazooClient,
                              names: Any) -> Iterator[tuple[str, str]]:
    """``(ghost, short)``: a topic registered in /brokers/topics only, never on the broker,
    and one ZooKeeper lists with 2 partitions while the broker has 1 (2 messages in it);
    their znodes deleted at the end. Needs a stack the bridge registers (``bridged``)."""
    ghost, short = names("ghost"), names("short")
    for topic in (ghost, short):
        zk.create(zp.topic_path(topic), zp.TopicAssignment({0: [1], 1: [1]}).encode(),
                  makepath=True)
    try:
        create_topic(stack.bootstrap, short, 1)
        fill(stack, short, 1, 2)
        yield ghost, short
    finally:
        zk.delete(zp.topic_path(ghost))
        zk.delete(zp.topic_path(short))


def test_status_asks_the_brokers_about_what_only_zookeeper_lists(
    bridged: tuple[StackInfo, KazooClient, str], names: Any, capsys: Any,
) -> None:
    """A topic in /brokers/topics that the brokers do not have (deleted on a KRaft cluster
    before the bridge removed it, or registered by hand as the ZooKeeper-era admin tools
    did): status waited out its whole log end lookup (15 s) for it, then called every
    partition of every topic "log range unknown", a blocker. It asks the brokers first now,
    as the copy does; the same for a partition the brokers lack."""
    stack, zk, topic2 = bridged
    group, live = names.group, topic2
    with _listed_in_zookeeper_only(stack, zk, names) as (ghost, short):
        fill(stack, live, 2, 3)
        set_zk(zk, group, live, {0: 3, 1: 2})
        set_kafka(stack.bootstrap, group, live, {0: 3, 1: 2})
        set_zk(zk, group, short, {0: 2, 1: 5})
        set_kafka(stack.bootstrap, group, short, {0: 2})
        set_zk(zk, group, ghost, {0: 7})  # Kafka refuses offsets of a topic it lacks
        status = migration_status(zk, group, stack.bootstrap)
        code, out, err = status_cli(capsys, stack, group, "--json")
    assert {(p.topic, p.partition): (p.state, p.log_start, p.log_end)
            for p in status.partitions} == {
        (live, 0): ("equal", 0, 3), (live, 1): ("equal", 0, 3),
        (short, 0): ("equal", 0, 2), (short, 1): ("partition_missing", None, None),
        (ghost, 0): ("topic_missing", None, None), (ghost, 1): ("topic_missing", None, None),
    }
    assert status.safe, status.blockers
    assert status.blockers == []
    assert status.warnings == [
        f"stale offsets for 3 partitions the brokers do not have but /brokers/topics still "
        f"lists ({ghost}:0, {ghost}:1, {short}:1): deleted on the brokers only (ZooKeeper not "
        "told yet) or registered by hand, nothing to consume; `migrate copy` skips them"]
    data = json.loads(out)
    assert code == 0, err
    assert {(p["topic"], p["partition"], p["class"]) for p in data["partitions"]} == {
        (live, 0, "equal"), (live, 1, "equal"), (short, 0, "equal"),
        (short, 1, "partition_missing"), (ghost, 0, "topic_missing"),
        (ghost, 1, "topic_missing")}
    assert data["warnings"] == status.warnings


def test_copy_skips_what_only_zookeeper_lists_as_status_says(
    bridged: tuple[StackInfo, KazooClient, str], names: Any, capsys: Any,
) -> None:
    """A topic in /brokers/topics that the brokers do not have, and a partition their topic
    lacks: status called their offsets stale (topic_missing, partition_missing), but the
    copy planned to write them, Kafka refused them and the copy failed after writing the
    rest, so no copy of such a group ever came out clean. The copy asks the brokers as
    status does, and skips them (the dry run says so too)."""
    stack, zk, topic2 = bridged
    group, live = names.group, topic2
    with _listed_in_zookeeper_only(stack, zk, names) as (ghost, short):
        fill(stack, live, 2, 3)
        set_zk(zk, group, live, {0: 3, 1: 2})
        set_zk(zk, group, short, {0: 2, 1: 5})
        set_zk(zk, group, ghost, {0: 7, 1: 4})
        dry = copy_cli(capsys, stack, group, "zookeeper", "kafka", "--dry-run", "--json")
        code, out, err = copy_cli(capsys, stack, group, "zookeeper", "kafka")
        status = migration_status(zk, group, stack.bootstrap)
        in_kafka = kafka_offsets(stack.bootstrap, group)
        # The other way, back to ZooKeeper. (Kafka refuses a commit for a partition it does
        # not have, so only ZooKeeper holds stale offsets here.)
        back = copy_offsets(zk, group, stack.bootstrap, "kafka", "zookeeper", checks=1,
                            check_interval_s=0.1)
        in_zk = read_zk_offsets(zk, group)
    expected = {
        (live, 0): "copy", (live, 1): "copy", (short, 0): "copy",
        (short, 1): "skip_partition_missing",
        (ghost, 0): "skip_topic_missing", (ghost, 1): "skip_topic_missing",
    }
    assert dry[0] == 0, dry[2]
    plan = json.loads(dry[1])
    assert {(a["topic"], a["partition"]): a["action"] for a in plan["partitions"]} == expected
    assert plan["log_range_error"] is None and plan["written"] == 0

    assert code == 0, err
    assert err == ""
    for (topic, partition), action in expected.items():
        assert re.search(rf"^{topic}\s+{partition}\s.*\s{action}$", out, re.M), out
    assert "wrote 3 offsets to kafka" in out
    assert f"skipped the stale offsets of 1 topic the brokers do not have (a deleted topic, " \
           f"nothing to consume): {ghost}\n" in out
    assert f"skipped the stale offsets of 1 partition the brokers do not have (a topic " \
           f"recreated with fewer partitions, nothing to consume): {short}:1\n" in out
    assert in_kafka == {TP(live, 0): 3, TP(live, 1): 2, TP(short, 0): 2}
    # And status agrees: nothing left to copy, the stale ones only warned about.
    assert status.safe, status.blockers
    assert status.warnings == [
        f"stale offsets for 3 partitions the brokers do not have but /brokers/topics still "
        f"lists ({ghost}:0, {ghost}:1, {short}:1): deleted on the brokers only (ZooKeeper not "
        "told yet) or registered by hand, nothing to consume; `migrate copy` skips them"]

    assert {(a.topic, a.partition): a.action for a in back.actions} == {
        (live, 0): "skip_equal", (live, 1): "skip_equal", (short, 0): "skip_equal"}
    assert back.written == 0 and back.log_range_error is None
    assert in_zk == {TP(live, 0): 3, TP(live, 1): 2, TP(short, 0): 2, TP(short, 1): 5,
                     TP(ghost, 0): 7, TP(ghost, 1): 4}


def test_copy_takes_the_brokers_word_for_partitions_zookeeper_does_not_list_yet(
    bridged: tuple[StackInfo, KazooClient, str], names: Any,
) -> None:
    """/brokers/topics behind the brokers (the bridge lagging or down during a rollback):
    the copy took ZooKeeper's word that a partition did not exist, skipped its offset as
    stale ("recreated with fewer partitions") and exited 0, and the legacy members fell back
    to auto.offset.reset on it once ZooKeeper caught up. The brokers are asked about every
    partition to copy, as status asks them."""
    stack, zk, _ = bridged
    group, lagging = names.group, names("lagging")
    zk.create(zp.topic_path(lagging), zp.TopicAssignment({0: [1]}).encode(), makepath=True)
    try:
        create_topic(stack.bootstrap, lagging, 2)
        fill(stack, lagging, 2, 3)
        set_kafka(stack.bootstrap, group, lagging, {0: 2, 1: 3})
        back = copy_offsets(zk, group, stack.bootstrap, "kafka", "zookeeper", checks=1,
                            check_interval_s=0.1)
        in_zk = read_zk_offsets(zk, group)
    finally:
        zk.delete(zp.topic_path(lagging))
    assert {(a.topic, a.partition): a.action for a in back.actions} == {
        (lagging, 0): "copy", (lagging, 1): "copy"}
    assert back.written == 2 and back.log_range_error is None
    assert in_zk == {TP(lagging, 0): 2, TP(lagging, 1): 3}


def test_kafka_refusal_names_what_was_refused_and_what_was_written(
    stack: StackInfo, names: Any, topic2: str
) -> None:
    """A topic gone from the broker between the copy's plan and its write (the copy skips
    the ones the brokers already lack): the broker refuses its offsets and commits the
    rest; the error says both."""
    from zkconsumer._errors import MigrationError
    from zkconsumer.ops.kafka_store import write_kafka_offsets

    group, live = names.group, topic2
    ghost = names("ghost")  # never on the broker
    fill(stack, live, 2, 3)
    admin = modern_admin(stack.bootstrap)
    try:
        with pytest.raises(MigrationError) as caught:
            write_kafka_offsets(admin, group,
                                {TP(live, 0): 3, TP(live, 1): 2, TP(ghost, 0): 7})
    finally:
        admin.close()
    message = str(caught.value)
    assert message.startswith(
        f"Kafka refused 1 of 3 offsets for group {group!r} ({ghost}:0 "
        "UnknownTopicOrPartitionError), which was not written; the other 2 were written "
        f"({live}:0, {live}:1)"), message
    assert kafka_offsets(stack.bootstrap, group) == {TP(live, 0): 3, TP(live, 1): 2}


def test_kafka_commit_refused_because_a_modern_member_joined_is_group_active(
    stack: StackInfo, names: Any, topic2: str
) -> None:
    from zkconsumer.ops.kafka_store import write_kafka_offsets

    group, topic = names.group, topic2
    modern = modern_consumer(stack, group, topic)
    admin = modern_admin(stack.bootstrap)
    try:
        set_kafka(stack.bootstrap, group, topic, {0: 0, 1: 0})
        wait_until(lambda: modern.poll(timeout_ms=100) is not None and modern.assignment(),
                   timeout=90, what="the modern member's assignment", every=0)
        with pytest.raises(GroupActiveError, match=(
                f"a modern consumer joined group {group!r} during the copy .*; nothing was "
                "written; stop it and run again")):
            write_kafka_offsets(admin, group, {TP(topic, 0): 4, TP(topic, 1): 5})
    finally:
        admin.close()
        modern.close()
    assert kafka_offsets(stack.bootstrap, group) == {TP(topic, 0): 0, TP(topic, 1): 0}


def test_status_is_not_safe_when_the_log_range_cannot_be_read(
    stack: StackInfo, zk: KazooClient, names: Any, topic2: str
) -> None:
    group, topic = names.group, topic2
    produce_each(stack, topic, 3)
    set_zk(zk, group, topic, {0: 2, 1: 3})
    set_kafka(stack.bootstrap, group, topic, {0: 2, 1: 3})
    admin = modern_admin(stack.bootstrap)
    try:
        assert migration_status(zk, group, stack.bootstrap, admin=admin).safe
        # The log ends come through the bootstrap address: nothing listens there.
        status = migration_status(zk, group, "127.0.0.1:1", admin=admin, timeout_ms=2000,
                                  kafka={"bootstrap_timeout_ms": 1000})
    finally:
        admin.close()
    assert {p.state for p in status.partitions} == {"equal"}
    assert [(p.log_start, p.log_end) for p in status.partitions] == [(None, None)] * 2
    assert not status.safe
    assert status.reason.startswith(
        f"log range unknown for 2 partitions ({topic}:0, {topic}:1) (cannot read the log "
        "range from the brokers: "), status.reason
    assert status.reason.endswith("cannot verify the offsets are in range; run again once the "
                                  "brokers answer")


def hook_commits(monkeypatch: Any, zk: KazooClient, before: Any) -> list[int]:
    """Run ``before(n)`` just before the copy's n-th transaction commits (n from 1); return
    the list of commit numbers seen."""
    real = functools.partial(KazooClient.transaction, zk)  # not an earlier hook
    seen: list[int] = []

    def transaction() -> Any:
        tx = real()
        commit = tx.commit

        def hooked() -> Any:
            seen.append(len(seen) + 1)
            before(seen[-1])
            return commit()

        tx.commit = hooked
        return tx

    monkeypatch.setattr(zk, "transaction", transaction)
    return seen


def test_failed_zookeeper_transaction_names_its_cause(
    stack: StackInfo, zk: KazooClient, names: Any, topic2: str, monkeypatch: Any
) -> None:
    """kazoo reports the ops before the failing one as RolledBackError: the message showed
    that instead of the cause."""
    from zkconsumer._errors import MigrationError

    group, topic = names.group, topic2
    fill(stack, topic, 2, 9)
    set_kafka(stack.bootstrap, group, topic, {0: 9, 1: 4})

    def copy() -> Any:
        return copy_offsets(zk, group, stack.bootstrap, "kafka", "zookeeper", checks=1,
                            check_interval_s=0.1)

    # An offset set by someone else between the plan and the commit: BadVersion.
    set_zk(zk, group, topic, {0: 5})
    hook_commits(monkeypatch, zk, lambda n: set_zk(zk, group, topic, {0: 6}))
    with pytest.raises(MigrationError, match=(
            f"^the offset of {topic}:0 changed since the plan \\(BadVersionError\\); nothing "
            "was written; run again$")):
        copy()
    # An offset created by someone else meanwhile: NodeExists.
    hook_commits(monkeypatch, zk, lambda n: set_zk(zk, group, topic, {1: 1}))
    with pytest.raises(MigrationError, match=(
            f"^the offset of {topic}:1 changed since the plan \\(NodeExistsError\\); ")):
        copy()
    zk.delete(zp.offset_path(group, topic, 1))
    # A consumer registering meanwhile, with and without an ids znode before.
    for ids_before in (False, True):
        if ids_before:
            zk.ensure_path(zp.ids_dir(group))
        hook_commits(monkeypatch, zk, lambda n: zk.create(zp.id_path(group, f"{group}_c"),
                                                          b"{}", makepath=True))
        with pytest.raises(GroupActiveError, match=(
                f"^a consumer registered in group {group!r} during the copy; nothing was "
                "written; stop it and run again$")):
            copy()
        zk.delete(zp.ids_dir(group), recursive=True)
    assert read_zk_offsets(zk, group) == {TP(topic, 0): 6}  # nothing of the copies


def test_rollback_copy_keeps_the_acl_of_a_protected_group(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any, capsys: Any,
    monkeypatch: Any,
) -> None:
    """Without ZKCONSUMER_ZOOKEEPER_ACL kazoo creates world-open znodes: the copy recreated
    /consumers/G/ids and created offset znodes that way, stripping the group's protection."""
    from kazoo.security import ACL, Id, make_digest_acl_credential

    group = names.group
    topic = topic_factory(names.topic, 2)
    other = topic_factory(names("other"), 1)  # no offsets dir in ZooKeeper yet
    digest = Id("digest", make_digest_acl_credential("zkc", "acl-pw"))
    # "tool" may do all but ADMIN: ZooKeeper shows it the digest ids redacted ("zkc:x").
    tool = Id("digest", make_digest_acl_credential("tool", "tool-pw"))
    protected = [ACL(31, digest), ACL(15, tool), ACL(1, Id("world", "anyone"))]
    owner = KazooClient(hosts=stack.zookeeper, auth_data=[("digest", "zkc:acl-pw")],
                        default_acl=protected)
    owner.start(timeout=15)
    copy = ("migrate", "copy", "--group", group, "--from", "kafka", "--to", "zookeeper",
            "--bootstrap-server", stack.bootstrap, "--zookeeper", stack.zookeeper,
            "--check-interval", "0.1")
    try:
        zk.ensure_path("/consumers")
        owner.create(zp.offset_path(group, topic, 0), zp.encode_offset(3), makepath=True)
        owner.ensure_path(zp.ids_dir(group))
        fill(stack, topic, 2, 12)
        fill(stack, other, 1, 2)
        set_kafka(stack.bootstrap, group, topic, {0: 9, 1: 4})
        set_kafka(stack.bootstrap, group, other, {0: 2})
        monkeypatch.delenv("ZKCONSUMER_ZOOKEEPER_ACL", raising=False)

        monkeypatch.setenv("ZKCONSUMER_ZOOKEEPER_AUTH", "digest:zkc:acl-pw")
        code, out, err = run_cli(capsys, *copy)
        assert code == 0, err
        assert read_zk_offsets(zk, group) == {TP(topic, 0): 9, TP(topic, 1): 4,
                                              TP(other, 0): 2}
        for path in (zp.ids_dir(group), zp.offset_path(group, topic, 1),
                     zp.offsets_topic_dir(group, other), zp.offset_path(group, other, 0)):
            assert sorted(owner.get_acls(path)[0]) == sorted(protected), path

        # Without ADMIN the ACL cannot be copied faithfully: refused, nothing written.
        set_kafka(stack.bootstrap, group, topic, {0: 12})
        monkeypatch.setenv("ZKCONSUMER_ZOOKEEPER_AUTH", "digest:tool:tool-pw")
        code, out, err = run_cli(capsys, *copy)
        assert (code, out) == (2, ""), out
        assert err.count("\n") == 1 and "needs the ADMIN permission" in err, err
        assert "ZKCONSUMER_ZOOKEEPER_ACL" in err and "nothing was written" in err, err
        assert read_zk_offsets(zk, group)[TP(topic, 0)] == 9
        assert sorted(owner.get_acls(zp.ids_dir(group))[0]) == sorted(protected)
    finally:
        owner.delete(zp.group_dir(group), recursive=True)
        owner.stop()
        owner.close()


def test_copy_to_zookeeper_splits_big_writes_and_says_what_was_written(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any, monkeypatch: Any
) -> None:
    """One transaction for any number of partitions broke ZooKeeper's ~1 MB request limit
    (ConnectionLoss on every attempt for ~10,000 partitions)."""
    import zkconsumer.migration.copy as migrate

    group = names.group
    topic = topic_factory(names.topic, 5)
    monkeypatch.setattr(migrate, "MAX_TRANSACTION_OPS", 4)  # the ids guard + 2 offsets
    fill(stack, topic, 5, 25)
    set_kafka(stack.bootstrap, group, topic, {p: 10 + p for p in range(5)})

    def copy() -> Any:
        return copy_offsets(zk, group, stack.bootstrap, "kafka", "zookeeper", checks=1,
                            check_interval_s=0.1)

    seen = hook_commits(monkeypatch, zk, lambda n: None)
    assert copy().written == 5
    assert seen == [1, 2, 3]
    assert read_zk_offsets(zk, group) == {TP(topic, p): 10 + p for p in range(5)}

    # A consumer registering before the second transaction: the first one's two offsets are
    # written, and the message says so.
    set_kafka(stack.bootstrap, group, topic, {p: 20 + p for p in range(5)})
    hook_commits(monkeypatch, zk, lambda n: n == 2 and zk.create(
        zp.id_path(group, f"{group}_c"), b"{}", makepath=True))
    with pytest.raises(GroupActiveError, match=(
            f"^a consumer registered in group {group!r} during the copy; 2 of 5 offsets "
            "were written before .*; the rest were not; stop it and run again$")):
        copy()
    assert read_zk_offsets(zk, group) == {TP(topic, p): (20 if p < 2 else 10) + p
                                          for p in range(5)}


def test_copy_success_line_counts_checks_right(
    stack: StackInfo, zk: KazooClient, names: Any, topic2: str, capsys: Any,
    monkeypatch: Any,
) -> None:
    """The line said "no consumer seen on N check(s)" with N counting the checks that did
    see one."""
    import re

    import zkconsumer.migration.copy as migrate

    group, topic = names.group, topic2
    connector = legacy_owner(stack, zk, group, topic)
    real = migrate._live_consumers
    busy: list[int] = []

    def counted(*args: Any) -> list[str]:
        live = real(*args)
        busy.append(len(live))
        return live

    monkeypatch.setattr(migrate, "_live_consumers", counted)
    results: list[tuple[int, str, str]] = []
    worker = threading.Thread(target=lambda: results.append(run_cli(
        capsys, "migrate", "copy", "--group", group, "--from", "zookeeper", "--to", "kafka",
        "--bootstrap-server", stack.bootstrap, "--zookeeper", stack.zookeeper,
        "--check-interval", "0.2", "--checks", "2", "--wait-timeout", "60")))
    worker.start()
    try:
        wait_until(lambda: len(busy) >= 2, timeout=30, what="two looks by the copy")
    finally:
        connector.shutdown()
        worker.join(timeout=60)
    assert results, "the copy did not finish"
    code, out, err = results[0]
    assert code == 0, err
    found = re.search(r"no consumer seen on the last 2 of (\d+) checks", out)
    assert found, out
    # The last look is the one after the write (not a check of the wait).
    assert int(found[1]) == len(busy) - 1 >= 4 and busy[-3:] == [0, 0, 0] and busy[0] > 0
    # While it waited, it said what for (again only if that changed: a shutdown half done).
    waits = [line for line in err.splitlines() if "waiting up to" in line]
    assert 1 <= len(waits) <= 3, err
    assert f"for the group's consumers to stop: owner {topic}:" in waits[0], err


def test_migrate_help_points_to_the_docs(capsys: Any) -> None:
    """It once pointed to docs/migration.md when that page did not exist; it does now, and
    the help and the module's docstring point there."""
    from pathlib import Path

    import zkconsumer.migration.status as migrate

    with pytest.raises(SystemExit) as done:
        cli.main(["migrate", "--help"])
    assert done.value.code == 0
    page = (Path(__file__).resolve().parents[2] / "docs" / "migration.md").read_text()
    assert page.startswith("# Migrating to the modern group protocol\n")
    for text in (capsys.readouterr().out, migrate.__doc__ or ""):
        text = " ".join(text.split())
        assert "README" not in text
        assert 'docs/migration.md, "Migrating to the modern group protocol"' in text


def test_a_topic_the_brokers_will_not_describe_is_not_taken_for_deleted() -> None:
    """Brokers leave topics the caller may not describe out of an all-topics answer: taken
    for deleted, their offsets were skipped by the copy and only warned about by status."""
    from zkconsumer._errors import MigrationError
    from zkconsumer.migration.stores import _broker_topics

    class Admin:
        def describe_topics(self, topics: list[str]) -> list[dict[str, Any]]:
            answers = {"gone": 3, "hidden": 29, "secret": 29, "here": 0}
            # 29: TOPIC_AUTHORIZATION_FAILED
            return [{"name": t, "error_code": answers[t],
                     "partitions": [{"partition_index": 1}, {"partition_index": 0}]}
                    for t in topics]

    assert _broker_topics(Admin(), ["gone", "here"]) == {"gone": None, "here": [0, 1]}
    with pytest.raises(MigrationError, match=r"cannot tell whether topic hidden \(error 29\) "
                                             r"exists: it is not in /brokers/topics and the "
                                             r"brokers did not describe it .*; nothing was "
                                             r"decided for its offsets$"):
        _broker_topics(Admin(), ["gone", "hidden"])
    with pytest.raises(MigrationError, match=r"cannot tell whether topics hidden \(error 29\), "
                                             r"secret \(error 29\) exist: they are not in "):
        _broker_topics(Admin(), ["hidden", "secret"])


# --------------------------------------------------------------------------------------
# a user's walk through the docs: typos, offsets past the log end, the dry run, --json
# --------------------------------------------------------------------------------------


def test_a_group_or_topic_that_exists_nowhere_is_bad_input_not_unsafe(
    stack: StackInfo, zk: KazooClient, names: Any, topic2: str, topic_factory: Any,
    capsys: Any,
) -> None:
    """``migrate status --group <typo>`` printed an empty table and "NOT safe to switch ...
    (wrong group name?)" with exit status 1, the status of "not safe yet": a script waiting
    for safety waited for ever. ``--topic <typo>`` blamed the group name."""
    group, topic = names.group, topic2
    typo = names("typo")
    fill(stack, topic, 2, 3)
    set_zk(zk, group, topic, {0: 3, 1: 2})
    not_found = (f"zkconsumer migrate {{}}: group {typo!r} not found: no /consumers/{typo} "
                 "in ZooKeeper and no committed offsets or members in Kafka")
    for more in ((), ("--json",)):
        code, out, err = status_cli(capsys, stack, typo, *more)
        assert (code, out, err.strip()) == (2, "", not_found.format("status"))
    code, out, err = run_cli(
        capsys, "migrate", "copy", "--group", typo, "--from", "zookeeper", "--to", "kafka",
        "--bootstrap-server", stack.bootstrap, "--zookeeper", stack.zookeeper, "--dry-run")
    assert (code, out, err.strip()) == (2, "", not_found.format("copy"))

    # A topic the group has no offset for that exists nowhere: also refused, by its name.
    nosuch = names("nosuch")
    for more in ((), ("--topic", topic)):
        code, out, err = status_cli(capsys, stack, group, "--topic", nosuch, *more)
        assert (code, out) == (2, "")
        assert err.strip() == (
            f"zkconsumer migrate status: topic {nosuch!r} not found: group {group!r} has no "
            "offset for it, and it exists neither in /brokers/topics nor on the brokers")
    code, out, err = run_cli(
        capsys, "migrate", "copy", "--group", group, "--topic", topic, "--topic", nosuch,
        "--from", "zookeeper", "--to", "kafka", "--bootstrap-server", stack.bootstrap,
        "--zookeeper", stack.zookeeper, "--check-interval", "0.01")
    assert (code, out) == (2, "") and f"topic {nosuch!r} not found" in err
    assert kafka_offsets(stack.bootstrap, group) == {}  # refused before anything
    code, out, err = status_cli(capsys, stack, group, "--topic", "bad/name")
    assert (code, out) == (2, "") and "bad topic name" in err

    # An existing topic the group has nothing for is a real question: its partitions show.
    other = topic_factory(names("other"), 1)
    code, out, _ = status_cli(capsys, stack, group, "--topic", other, "--json")
    data = json.loads(out)
    assert code == 0, data
    assert [(p["topic"], p["class"]) for p in data["partitions"]] == [(other, "no_offset")]

    # Not safe yet stays exit status 1.
    code, out, _ = status_cli(capsys, stack, group, "--topic", topic)
    assert code == 1 and "NOT safe to switch: Kafka has no offset" in out

    # A group that lives in Kafka only (after the switch) is a real one, not a typo.
    modern_only = names("modern")
    set_kafka(stack.bootstrap, modern_only, topic, {0: 3, 1: 2})
    code, out, err = status_cli(capsys, stack, modern_only)
    assert code == 0 and "SAFE to switch" in out, (out, err)
    assert "missing_in_zk" in out
    code, out, err = run_cli(
        capsys, "migrate", "copy", "--group", modern_only, "--from", "kafka", "--to",
        "zookeeper", "--bootstrap-server", stack.bootstrap, "--zookeeper", stack.zookeeper,
        "--dry-run")
    assert code == 0 and "dry run: would write 2 offsets to zookeeper" in out, err


def test_copy_refuses_offsets_outside_the_log_as_status_does(
    stack: StackInfo, zk: KazooClient, names: Any, topic2: str, capsys: Any
) -> None:
    """``migrate copy`` copied an offset past the log end, which ``migrate status`` calls a
    blocker (``above_log_end``), without a word."""
    from zkconsumer._errors import MigrationError
    from zkconsumer.migration.stores import broker_log_range

    group, topic = names.group, topic2
    fill(stack, topic, 2, 4)  # log ends 4 and 4
    set_zk(zk, group, topic, {0: 3, 1: 9})
    code, out, _ = status_cli(capsys, stack, group, "--json")
    assert code == 1
    assert [p["class"] for p in json.loads(out)["partitions"]] == [
        "missing_in_kafka", "above_log_end"]

    # Refused: one line naming the partition and its log end; nothing written.
    code, out, err = copy_cli(capsys, stack, group, "zookeeper", "kafka")
    assert (code, out) == (2, ""), out
    assert err.count("\n") == 1, err
    assert err.startswith(
        f"zkconsumer migrate copy: 1 offset in zookeeper is outside its partition's log "
        f"({topic}:1 9 > log end 4): a member fetching there resets the offset by "
        "auto.offset.reset; "), err
    assert "--force" in err and err.rstrip().endswith("nothing was written")
    assert kafka_offsets(stack.bootstrap, group) == {}

    # The dry run shows it in the plan, and says the real copy refuses it.
    code, out, err = run_cli(
        capsys, "migrate", "copy", "--group", group, "--from", "zookeeper", "--to", "kafka",
        "--bootstrap-server", stack.bootstrap, "--zookeeper", stack.zookeeper, "--dry-run",
        "--json")
    assert code == 1, err  # the real copy would refuse: a script can tell
    plan = json.loads(out)
    assert [(p["partition"], p["action"], p["log_end"], p["out_of_range"])
            for p in plan["partitions"]] == [(0, "copy", 4, None),
                                             (1, "out_of_range", 4, "above_log_end")]
    assert plan["log_range_error"] is None
    code, out, _ = run_cli(
        capsys, "migrate", "copy", "--group", group, "--from", "zookeeper", "--to", "kafka",
        "--bootstrap-server", stack.bootstrap, "--zookeeper", stack.zookeeper, "--dry-run")
    assert code == 1
    assert "dry run: would write 1 offset to kafka" in out
    assert f"a real copy refuses 1 offset outside its partition's log ({topic}:1 9 > " \
           "log end 4) and writes nothing" in out

    # --force copies it as it is, with a warning; status still calls it a blocker.
    code, out, err = copy_cli(capsys, stack, group, "zookeeper", "kafka", "--force")
    assert code == 0, err
    assert "wrote 2 offsets to kafka" in out
    assert err == (f"zkconsumer migrate copy: warning: copied 1 offset from zookeeper outside "
                   f"its partition's log as it is (--force): {topic}:1 9 > log end 4; a member "
                   "fetching there resets the offset by auto.offset.reset\n")
    assert kafka_offsets(stack.bootstrap, group) == {TP(topic, 0): 3, TP(topic, 1): 9}
    code, out, _ = status_cli(capsys, stack, group)
    assert code == 1 and (f"NOT safe to switch: an offset past the log end on 1 partition "
                          f"({topic}:1): a member fetching there resets the offset by "
                          "auto.offset.reset; reset it explicitly first\n") in out, out

    # The rollback direction is checked the same way.
    set_kafka(stack.bootstrap, group, topic, {0: 20})
    code, out, err = copy_cli(capsys, stack, group, "kafka", "zookeeper")
    assert (code, out) == (2, "") and f"in kafka is outside its partition's log ({topic}" \
                                      ":0 20 > log end 4)" in err, err
    assert read_zk_offsets(zk, group) == {TP(topic, 0): 3, TP(topic, 1): 9}

    # Below the log start (injected: the test broker cannot delete records).
    admin = modern_admin(stack.bootstrap)

    def log_range(tps: Any) -> Any:
        starts, ends, error = broker_log_range(admin, stack.bootstrap, tps)
        starts[TP(topic, 0)] = 4
        return starts, ends, error

    try:
        set_zk(zk, group, topic, {0: 2, 1: 4})
        set_kafka(stack.bootstrap, group, topic, {0: 1, 1: 1})
        with pytest.raises(MigrationError, match=(
                f"^1 offset in zookeeper is outside its partition's log \\({topic}:0 "
                "2 < log start 4\\): ")):
            copy_offsets(zk, group, stack.bootstrap, "zookeeper", "kafka", checks=1,
                         admin=admin, log_range=log_range)
        assert kafka_offsets(stack.bootstrap, group) == {TP(topic, 0): 1, TP(topic, 1): 1}
    finally:
        admin.close()


def test_copy_refuses_when_the_log_range_cannot_be_read_unless_forced(
    stack: StackInfo, zk: KazooClient, names: Any, topic2: str
) -> None:
    """Where ``migrate status`` says "log range unknown" (a blocker), the copy does not
    write unchecked offsets either, unless forced."""
    from zkconsumer._errors import MigrationError

    group, topic = names.group, topic2
    fill(stack, topic, 2, 3)
    set_zk(zk, group, topic, {0: 3, 1: 2})
    admin = modern_admin(stack.bootstrap)
    try:
        def copy(**kw: Any) -> Any:  # the log ends come through this address: nobody there
            return copy_offsets(zk, group, "127.0.0.1:1", "zookeeper", "kafka", checks=1,
                                admin=admin, timeout_ms=2000,
                                kafka={"bootstrap_timeout_ms": 1000}, **kw)

        with pytest.raises(MigrationError, match=(
                "^cannot check that the offsets to copy are in their partitions' log range "
                "\\(cannot read the log range from the brokers: .*\\): run again once the "
                "brokers answer, or pass --force to copy without the check; nothing was "
                "written$")):
            copy()
        assert kafka_offsets(stack.bootstrap, group) == {}
        plan = copy(dry_run=True)
        assert plan.log_range_error is not None and plan.written == 0
        forced = copy(force=True)
        assert forced.written == 2 and forced.log_range_error is not None
    finally:
        admin.close()
    assert kafka_offsets(stack.bootstrap, group) == {TP(topic, 0): 3, TP(topic, 1): 2}


def test_copy_force_goes_on_when_the_brokers_cannot_describe_the_topics(
    stack: StackInfo, zk: KazooClient, names: Any, topic2: str, capsys: Any,
    monkeypatch: Any,
) -> None:
    """--force copies without the log range check; a DescribeTopics that failed outright
    (rather than answering with an error code) ended the copy with exit status 2."""
    import zkconsumer.migration.copy as migrate

    group, topic = names.group, topic2
    fill(stack, topic, 2, 3)
    set_zk(zk, group, topic, {0: 3, 1: 2})
    real = migrate.modern_admin

    class Blind:
        def __init__(self, admin: Any) -> None:
            self._admin = admin

        def describe_topics(self, topics: list[str]) -> Any:
            raise OSError("no answer")

        def __getattr__(self, name: str) -> Any:
            return getattr(self._admin, name)

    monkeypatch.setattr(migrate, "modern_admin", lambda *a, **kw: Blind(real(*a, **kw)))
    unknown = "cannot describe the topics on the brokers: OSError('no answer')"
    # Without --force: refused as any unknown log range is, nothing written.
    code, out, err = copy_cli(capsys, stack, group, "zookeeper", "kafka")
    assert (code, out) == (2, "")
    assert err == ("zkconsumer migrate copy: cannot check that the offsets to copy are in their "
                   f"partitions' log range ({unknown}): run again once the brokers answer, or "
                   "pass --force to copy without the check; nothing was written\n")
    assert kafka_offsets(stack.bootstrap, group) == {}
    code, out, err = copy_cli(capsys, stack, group, "zookeeper", "kafka", "--dry-run")
    assert code == 1 and "a real copy refuses to go on without the log range" in out, err
    # --force: copied, with the warning (and the command's name, as every message has it).
    code, out, err = copy_cli(capsys, stack, group, "zookeeper", "kafka", "--force")
    assert code == 0, err
    assert "wrote 2 offsets to kafka" in out
    assert err == ("zkconsumer migrate copy: warning: the log range of the offsets to copy was "
                   f"not checked: {unknown}\n")
    assert kafka_offsets(stack.bootstrap, group) == {TP(topic, 0): 3, TP(topic, 1): 2}


def test_the_migrate_errors_are_the_tools_errors_too() -> None:
    """Two parallel families: a caller catching the tools' UnknownGroupError (say) missed
    migrate's. And Kafka's per-partition answer to a commit refused because a member joined
    keeps the partitions it took, which ``offsets reset|import`` name."""
    from kafka.errors import NoError, UnknownMemberIdError

    from zkconsumer import _errors
    from zkconsumer.ops.kafka_store import write_kafka_offsets

    for name in ("GroupActiveError", "UnknownGroupError", "UnknownTopicError"):
        ours, tools = getattr(_errors, "Migration" + name), getattr(_errors, name)
        assert issubclass(ours, tools) and issubclass(ours, _errors.MigrationError), name
    with pytest.raises(_errors.GroupActiveError):
        raise _errors.MigrationGroupActiveError("live")

    class Admin:
        def alter_group_offsets(self, group: str, offsets: dict[Any, Any]) -> dict[Any, Any]:
            return {k: NoError if k.partition else UnknownMemberIdError for k in offsets}

    with pytest.raises(GroupActiveError) as caught:
        write_kafka_offsets(Admin(), "g", {TP("t", 0): 1, TP("t", 1): 2, TP("t", 2): 3})
    assert caught.value.written == [TP("t", 1), TP("t", 2)]
    assert str(caught.value) == (
        "a modern consumer joined group 'g' during the copy (Kafka answered "
        "UnknownMemberIdError for 1 offset); the other 2 were written (t:1, t:2); stop it and "
        "run again")


def test_dry_run_says_when_nobody_is_alive(
    stack: StackInfo, zk: KazooClient, names: Any, topic2: str, capsys: Any
) -> None:
    """docs/migration.md says the dry run shows who is alive; with nobody alive it listed nothing,
    which reads the same as a dry run that did not look."""
    group, topic = names.group, topic2
    fill(stack, topic, 2, 2)
    set_zk(zk, group, topic, {0: 2, 1: 1})
    code, out, err = run_cli(
        capsys, "migrate", "copy", "--group", group, "--from", "zookeeper", "--to", "kafka",
        "--bootstrap-server", stack.bootstrap, "--zookeeper", stack.zookeeper, "--dry-run")
    assert code == 0, err
    assert out.rstrip().endswith(
        "live consumers now: none (no owner znode, no registered legacy consumer, no modern "
        "member in Kafka)"), out


def test_migrate_json_is_one_object_as_the_docs_say(
    stack: StackInfo, zk: KazooClient, names: Any, topic2: str, capsys: Any
) -> None:
    """The docs said every read command's --json is "a list of objects"; status and copy
    print one object (a verdict or a result besides the rows). docs/operations.md now says so
    and docs/migration.md names every field; this keeps the shape and the docs together."""
    import re
    from pathlib import Path

    group, topic = names.group, topic2
    fill(stack, topic, 2, 2)
    set_zk(zk, group, topic, {0: 2, 1: 1})
    code, out, _ = status_cli(capsys, stack, group, "--json")
    status = json.loads(out)
    code, out, _ = run_cli(
        capsys, "migrate", "copy", "--group", group, "--from", "zookeeper", "--to", "kafka",
        "--bootstrap-server", stack.bootstrap, "--zookeeper", stack.zookeeper, "--dry-run",
        "--json")
    copy = json.loads(out)
    assert isinstance(status, dict) and isinstance(copy, dict)
    assert list(status) == ["group", "safe", "reason", "blockers", "warnings", "zookeeper",
                            "kafka", "partitions"]
    assert list(status["zookeeper"]) == ["members", "owners"]
    assert list(status["kafka"]) == ["state", "members"]
    assert list(copy) == ["group", "from", "to", "dry_run", "force", "written",
                          "live_consumers", "idle_checks", "log_range_error", "partitions"]
    assert list(copy["partitions"][0]) == ["topic", "partition", "source_offset",
                                           "dest_offset", "action", "log_start", "log_end",
                                           "out_of_range"]

    docs = Path(__file__).resolve().parents[2] / "docs"
    operations = (docs / "operations.md").read_text()
    tools = " ".join(operations.split("\n## Operator tools\n")[1].split("\n## ")[0].split())
    assert "`migrate status` and `migrate copy`" in tools and "print one object" in tools
    section = (docs / "migration.md").read_text()
    assert section.startswith("# Migrating to the modern group protocol\n")
    status_doc, copy_doc = (" ".join(part.split()) for part in
                            section.split("\n## Path 2, stop and copy\n"))
    documented = set(re.findall(r"`([a-z_]+)`", status_doc))
    assert "--json` prints one object" in status_doc
    assert set(status) | set(status["zookeeper"]) | set(status["kafka"]) <= documented
    assert "class" in documented
    documented = set(re.findall(r"`([a-z_]+)`", copy_doc))
    assert "`--json` prints one object" in copy_doc
    assert set(copy) | set(copy["partitions"][0]) <= documented


def test_a_consumer_committing_while_the_copy_writes_fails_the_copy(
    stack: StackInfo, zk: KazooClient, names: Any, topic2: str, capsys: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The idle checks end before the offsets are read, and the write comes after the log
    range lookup (up to 15 s): a legacy consumer starting in between committed to ZooKeeper,
    Kafka got the older offset, and the copy still said no consumer was seen (exit 0): the
    switch replayed. The source is read again and the group looked at once more after the
    write."""
    import zkconsumer.migration.copy as migrate_module

    group, topic = names.group, topic2
    produce_each(stack, topic, 5)
    set_zk(zk, group, topic, {0: 2, 1: 3})
    real = migrate_module.write_kafka_offsets

    def write_while_a_consumer_commits(admin: Any, g: str, offsets: Any) -> None:
        set_zk(zk, group, topic, {0: 4})  # a legacy member started, consumed and committed
        real(admin, g, offsets)

    monkeypatch.setattr(migrate_module, "write_kafka_offsets", write_while_a_consumer_commits)
    code, out, err = copy_cli(capsys, stack, group, "zookeeper", "kafka", "--checks", "1",
                              "--check-interval", "0.1")
    assert code == 2, out
    assert err.strip() == (
        f"zkconsumer migrate copy: a consumer ran while the copy wrote (zookeeper offsets "
        f"moved during the copy on {topic}:0): the 2 offsets written to kafka may be stale; "
        "stop every consumer of the group and run the copy again"), err


def test_ctrl_c_while_the_copy_writes_says_what_state_the_group_is_in(
    stack: StackInfo, zk: KazooClient, names: Any, topic2: str, capsys: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ctrl-C during the write exited 130 with nothing said, some offsets perhaps written."""
    import zkconsumer.migration.copy as migrate_module

    group, topic = names.group, topic2
    produce_each(stack, topic, 5)
    set_zk(zk, group, topic, {0: 2, 1: 3})

    def interrupted(admin: Any, g: str, offsets: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(migrate_module, "write_kafka_offsets", interrupted)
    code, out, err = copy_cli(capsys, stack, group, "zookeeper", "kafka", "--checks", "1",
                              "--check-interval", "0.1")
    assert code == 130
    assert err == ("zkconsumer migrate copy: interrupted while writing 2 offsets to kafka: "
                   "some may be written; run the same copy again (it writes what differs), "
                   "then `migrate status`\n"), err
