"""Bad input: each is a clear error or a logged skip, never a dead consumer or a hung thread."""

from __future__ import annotations

import logging
import threading

import pytest
from kazoo.client import KazooClient

from tests.support import group_owners, produce, produce_with_bad_crc
from tools.fault_harness import TP, Workload, wait_until
from zkconsumer import (
    ConsumerConfig,
    MessageDecodeError,
    ZookeeperConsumerConnector,
)
from zkconsumer.consumer.assignors.core import assign
from zkconsumer.zk import paths as zp


def _errors(caplog: pytest.LogCaptureFixture, *needles: str,
            level: int = logging.WARNING) -> list[str]:
    """zkconsumer's log messages at ``level`` or above containing every needle."""
    return [r.getMessage() for r in caplog.records if r.levelno >= level
            and r.name.startswith("zkconsumer") and all(n in r.getMessage() for n in needles)]


def _threads_alive(c: ZookeeperConsumerConnector) -> bool:
    return c._watcher.thread.is_alive() and c._watcher.bg_error is None and getattr(
        c._fetcher, "error", None) is None


def test_garbage_in_another_members_ids_znode(stack, zk, names, topic_factory, fault_run,
                                              report, caplog) -> None:
    caplog.set_level(logging.INFO, logger="zkconsumer")
    topic = topic_factory(names.topic, 4)
    run = fault_run(stack, topic, 4)
    run.workload.produce(800)
    run.workload.start(rate_per_s=300)
    a, b = run.add_member(), run.add_member()
    garbage = zp.id_path(names.group, f"{names.group}_garbage")
    # An ephemeral znode of this test's session: it stays while the members run.
    zk.create(garbage, b"\x00{not json", ephemeral=True)
    wait_until(lambda: len(_errors(caplog, garbage, level=logging.ERROR)) >= 2, 20,
               "each member's error about the unreadable registration")
    expected = {tp.partition: th for tp, th in assign("range", {topic: sorted(
        [f"{a.consumer_id}-0", f"{b.consumer_id}-0"])}, {topic: [0, 1, 2, 3]}).items()}
    wait_until(lambda: group_owners(zk, names.group, topic) == expected, 20,
               "the two real members owning everything")
    mark = run.collector.count()
    wait_until(lambda: run.collector.count() > mark + 200, 30, "the group consuming on")
    run.workload.stop()
    run.wait_consumed(60)
    zk.delete(garbage)
    assert all(_threads_alive(m.connector) for m in (a, b))
    report(run.verify(), f"logged: {_errors(caplog, garbage, level=logging.ERROR)[0]}")


JUNK_OWNER = b"\xff\xfe#?"


def test_owner_znode_holding_a_non_thread_id(stack, zk, names, topic_factory, fault_run,
                                            report, caplog) -> None:
    caplog.set_level(logging.INFO, logger="zkconsumer")
    topic = topic_factory(names.topic, 4)
    run = fault_run(stack, topic, 4, ignore_owner=lambda data: data == JUNK_OWNER)
    run.workload.produce(400)
    junk = zp.owner_path(names.group, topic, 3)
    # Held by another session (a broken tool, say) that does not go away by itself.
    holder = KazooClient(hosts=stack.zookeeper, timeout=10.0)
    holder.start(timeout=15)
    try:
        holder.create(junk, JUNK_OWNER, ephemeral=True, makepath=True)
        joined = threading.Thread(target=run.add_member, daemon=True)
        joined.start()
        wait_until(lambda: run.members and run.members[0].connector.stats.failures >= 1, 30,
                   "a failed claim")
        c = run.members[0].connector
        logged = _errors(caplog, junk, level=logging.INFO)
        assert logged, "nothing logged names the znode"
        shown = repr(JUNK_OWNER.decode(errors="replace"))
        assert any(shown in m for m in logged), (shown, logged)
        # The member neither took the znode over nor died, and answers what it owns while its
        # first rebalance is still waiting for the znode (a monitoring thread must not hang).
        assert zk.get(junk)[0] == JUNK_OWNER
        answer: list[dict[TP, str]] = []
        asking = threading.Thread(target=lambda: answer.append(c.owned_partitions()),
                                  daemon=True)
        asking.start()
        asking.join(2.0)
        assert answer, "owned_partitions() blocked while the rebalance waited"
        assert TP(topic, 3) not in answer[0]
        # Still in its first rebalance (the watcher thread starts once that is done).
        assert joined.is_alive() and c._watcher.bg_error is None
    finally:
        holder.stop()
        holder.close()
    joined.join(60)
    assert not joined.is_alive()
    wait_until(lambda: len(group_owners(zk, names.group, topic)) == 4, 30, "all 4 owned")
    run.wait_consumed(60)
    report(run.verify(), f"logged: {logged[0]}")


def test_non_numeric_offset_znode(stack, zk, names, topic_factory, fault_run, report,
                                  caplog) -> None:
    caplog.set_level(logging.INFO, logger="zkconsumer")
    topic = topic_factory(names.topic, 2)
    run = fault_run(stack, topic, 2)
    run.workload.produce(200)  # 100 per partition
    bad = zp.offset_path(names.group, topic, 0)
    zk.create(bad, b"12abc", makepath=True)
    zk.create(zp.offset_path(names.group, topic, 1), b"50", makepath=True)
    m = run.add_member()
    # Partition 0: the garbled offset counts as none (auto.offset.reset=smallest), loudly.
    expected = [(topic, 0, o) for o in range(100)] + [(topic, 1, o) for o in range(50, 100)]
    run.wait_consumed(60, expected)
    logged = _errors(caplog, bad, level=logging.ERROR)
    assert logged and "12abc" in logged[0], logged
    r = report(run.verify(expected=expected), f"logged: {logged[0]}")
    assert r.delivered == 150 and r.duplicates == 0
    run.stop_member(m)
    assert zp.decode_offset(zk.get(bad)[0]) == 100  # the first commit replaced it


@pytest.mark.parametrize("backend", ["confluent", "kafka-python"])
def test_topic_deleted_while_consumed(stack, zk, names, topic_factory, fault_run, report,
                                      caplog, backend) -> None:
    caplog.set_level(logging.INFO, logger="zkconsumer")
    doomed = topic_factory(names("doomed"), 2)
    other = topic_factory(names.topic, 2)
    run = fault_run(stack, other, 2, topics=[doomed])
    doomed_load = Workload(stack.bootstrap, doomed, 2, prefix="d")
    try:
        doomed_load.produce(200)
        run.workload.produce(200)
        m = run.add_member(topic_counts={doomed: 1, other: 1}, fetch_backend=backend)
        run.wait_consumed(60, set(doomed_load.expected()) | set(run.workload.expected()))
        # Its producer gone first: a producer still asking for the topic's metadata would make
        # it again at once (auto.create.topics.enable).
        doomed_load.close()
        from kafka import KafkaAdminClient

        # From now on the doomed topic's offsets may go back once (the log is gone).
        run.sampler.forget_committed([doomed])
        admin = KafkaAdminClient(bootstrap_servers=stack.bootstrap)
        try:
            admin.delete_topics([doomed])
        finally:
            admin.close()
        # The other topic flows on.
        run.workload.produce(400)
        run.wait_consumed(60)
        assert _threads_alive(m.connector)
        # What the consumer said about the vanished topic: the topic leaves ZooKeeper and
        # the member releases it; or a client's metadata request made it again at once
        # (auto.create.topics.enable), empty, so the consumed offset is out of range.
        wait_until(lambda: _errors(caplog, doomed, "out of range")
                   or not zk.exists(zp.topic_path(doomed)), 30,
                   "a warning about the deleted topic, or the topic gone from ZooKeeper")
        if zk.exists(zp.topic_path(doomed)):
            logged = _errors(caplog, doomed)
            assert any("out of range" in e for e in logged), logged
            again = Workload(stack.bootstrap, doomed, 2, prefix="again")
            try:
                again.produce(100)
                wanted = set(again.expected().values())
                wait_until(lambda: wanted <= run.collector.values(), 30,
                           "the recreated topic consumed")
            finally:
                again.close()
            note = f"the topic came back (auto-created); logged: {logged[0]}"
        else:
            wait_until(lambda: not group_owners(zk, names.group, doomed), 30, "released")
            note = "the topic left ZooKeeper and was released"
        r = report(run.verify(topics=[other]), note)
        assert r.duplicates == 0
        assert _threads_alive(m.connector)
    finally:
        doomed_load.close()


@pytest.mark.parametrize(("backend", "bad"), [("kafka-python", 1), ("confluent", 1),
                                              ("kafka-python", 3), ("confluent", 3)])
def test_record_with_a_bad_crc(stack, names, topic_factory, fault_run, report, backend,
                               bad) -> None:
    topic = topic_factory(names.topic, 2)
    run = fault_run(stack, topic, 2)
    produce_with_bad_crc(stack, topic, bad)
    good = [(topic, 0, 0), *[(topic, 0, o) for o in range(bad + 1, bad + 9)]]
    # A member process: a fetcher thread that never stops must not outlive the test.
    m = run.add_process(num_consumer_fetchers=1, fetch_backend=backend)
    try:
        # The other partition is not held back (alone, it takes a second).
        run.wait_consumed(10, [(topic, 1, o) for o in range(10)])
        # The corrupt records are logged skips, naming the partition and each offset; the
        # records after them are consumed, and none of them is handed out.
        run.wait_consumed(10, good)
        said = [line for line in m.stderr().splitlines()
                if "corrupt data" in line and f"{topic}:0" in line]
        for offset in range(1, bad + 1):
            assert any(f"at offset {offset} " in line for line in said), m.stderr()[-3000:]
        assert not {(topic, 0, o) for o in range(1, bad + 1)} & run.collector.seen()
        assert m.alive
    finally:
        m.kill()  # a stuck fetcher thread would make a clean shutdown wait for it
    report(run.verify(expected=[*good, *[(topic, 1, o) for o in range(10)]]))


def test_decoder_that_raises(stack, zk, names, topic_factory) -> None:
    topic = topic_factory(names.topic, 1)
    produce(stack.bootstrap, topic, [(0, None, b"poison" if i == 5 else b"%d" % i)
                                     for i in range(10)])

    def decode(value: bytes) -> int:
        return int(value)  # ValueError on b"poison"

    c = ZookeeperConsumerConnector(ConsumerConfig({
        "zookeeper.connect": stack.zookeeper, "group.id": names.group,
        "auto.offset.reset": "smallest", "auto.commit.enable": False,
        "consumer.timeout.ms": 5000}))
    try:
        it = iter(c.create_message_streams({topic: 1}, value_decoder=decode)[topic][0])
        assert [next(it).message for _ in range(5)] == [0, 1, 2, 3, 4]
        with pytest.raises(MessageDecodeError) as info:
            next(it)
        err = info.value
        assert (err.topic, err.partition, err.offset) == (topic, 0, 5)
        assert isinstance(err.__cause__, ValueError)
        assert f"{topic}:0 offset 5" in str(err)
        # Not committed past the bad message: a restart would see it again.
        c.commit_offsets()
        assert zk.get(zp.offset_path(names.group, topic, 0))[0] == b"5"
        # The stream goes on after it (the bad message is skipped, not retried for ever).
        assert [next(it).message for _ in range(4)] == [6, 7, 8, 9]
        c.commit_offsets()
        assert zk.get(zp.offset_path(names.group, topic, 0))[0] == b"10"
        assert _threads_alive(c)
    finally:
        c.shutdown()
