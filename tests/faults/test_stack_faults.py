"""ZooKeeper, broker and bridge faults, on a private stack (they stop stack components)."""

from __future__ import annotations

import logging
import shutil
import threading
import time
from typing import Any

import pytest

from tests.support import owners_settled
from tools.fault_harness import (
    FAULT_PROPS,
    TP,
    FaultRun,
    InProcessMember,
    Workload,
    log_ends,
    make_topic,
    now_ns,
    wait_until,
)
from zkconsumer import ConsumerConfig, ConsumerRebalanceListener, ZookeeperConsumerConnector
from zkconsumer.zk import paths as zp

SESSION_S = int(FAULT_PROPS["zookeeper.session.timeout.ms"]) / 1000  # type: ignore[call-overload]


def _consuming(run: FaultRun, members: list[InProcessMember], n: int = 50,
               timeout: float = 60, what: str = "every member consuming") -> None:
    marks = {m.name: run.collector.delivered_by(m.name) for m in members}
    wait_until(lambda: all(run.collector.delivered_by(m.name) >= marks[m.name] + n
                           for m in members), timeout, what)


def _registered(zk, run: FaultRun, m: InProcessMember) -> bool:
    """Connected, and the ids znode belongs to the member's current session."""
    if not m.connector._zk.connected:
        return False
    stat = zk.exists(zp.id_path(run.group, m.consumer_id))
    return stat is not None and stat.ephemeralOwner == m.session[0]


def test_zookeeper_down_longer_than_the_session_timeout(
        private_stack, pzk, names, fault_run, report) -> None:
    local = private_stack.local
    topic = make_topic(private_stack.bootstrap, pzk, names.topic, 6)
    run = fault_run(private_stack, topic, 6)
    run.workload.produce(1200)
    run.workload.start(rate_per_s=400)
    members = [run.add_member() for _ in range(3)]
    _consuming(run, members)
    before = {m.name: m.session[0] for m in members}
    local.stop("zookeeper")
    down = time.monotonic()
    wait_until(lambda: not any(m.connector._zk.connected for m in members), 15,
               "the members disconnected")
    # The outage itself: twice the session timeout.
    time.sleep(max(0.0, 2 * SESSION_S - (time.monotonic() - down)))
    local.start("zookeeper")
    for m in members:
        wait_until(lambda m=m: _registered(pzk, run, m), 60, f"{m.name} registered again")
    wait_until(lambda: owners_settled(pzk, run.group, topic), 30, "the group settled")
    _consuming(run, members, what="every member consuming after the outage")
    run.workload.stop()
    run.wait_consumed(60)
    expired = sum(m.session[0] != before[m.name] for m in members)
    report(run.verify(), f"{expired} of 3 sessions expired during the outage")


@pytest.mark.parametrize("backend", ["confluent", "kafka-python"])
def test_broker_restarted_with_its_disk_lost(
        private_stack, pzk, names, fault_run, report, caplog, backend) -> None:
    caplog.set_level(logging.INFO, logger="zkconsumer")
    local = private_stack.local
    topic = make_topic(private_stack.bootstrap, pzk, names.topic, 4)
    run = fault_run(private_stack, topic, 4)
    run.workload.produce(2000)
    members = [run.add_member(fetch_backend=backend) for _ in range(2)]
    run.wait_consumed(60)
    wait_until(lambda: run.sampler.committed_now() == {TP(topic, p): 500 for p in range(4)},
               30, "offset 500 committed on every partition")
    run.workload.close()
    # The broker comes back with an empty disk (a replaced machine): the controller makes
    # its partitions again, empty, and the committed offsets (500) point past their log
    # ends: they may go back once.
    run.sampler.forget_committed()
    # Cleared before the restart: a fast fetcher (librdkafka) meets the reset while start()
    # is still waiting for the broker's registration.
    caplog.clear()
    local.stop("broker")
    shutil.rmtree(local.dir / "broker" / "data")
    local.start("broker")
    restart = now_ns()
    after = Workload(private_stack.bootstrap, topic, 4, prefix="after")
    try:
        # 100 per partition, below the committed 500: only a reset reaches them.
        after.produce(400)
        wanted = set(after.expected().values())
        wait_until(lambda: wanted <= run.collector.values(), 60,
                   "the messages produced after the restart consumed")
        after.produce(2000)  # and it goes on consuming
        wanted = set(after.expected().values())
        wait_until(lambda: wanted <= run.collector.values(), 60, "2000 more consumed")
        resets = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING
                  and "out of range" in r.getMessage() and topic in r.getMessage()]
        assert resets, "no WARNING about the offset reset"
        assert all("reset to the smallest offset 0" in m for m in resets), resets
        assert {int(m.split(f"{topic}:")[1].split(" ")[0].rstrip(";")) for m in resets} == {
            0, 1, 2, 3}, resets
        r = report(run.verify(since_ns=restart, expected=after.expected()),
                   f"{len(resets)} offset reset warning(s)")
        assert r.duplicates == 0
        for m in members:
            run.stop_member(m)
        run.sampler.wait_rounds(2)
        assert run.sampler.committed_now() == {
            TP(topic, p): off for p, off in log_ends(private_stack.bootstrap, topic, 4).items()}
    finally:
        after.close()


def _two_members_then_bridge_down(private_stack, pzk, names, fault_run, caplog):
    """Two members consuming a 4-partition topic under load; then the bridge stops and the
    brokers vanish from ZooKeeper (the broker itself stays up)."""
    caplog.set_level(logging.INFO, logger="zkconsumer")
    local = private_stack.local
    topic = make_topic(private_stack.bootstrap, pzk, names.topic, 4)
    run = fault_run(private_stack, topic, 4)
    run.workload.produce(800)
    run.workload.start(rate_per_s=300)
    members = [run.add_member() for _ in range(2)]
    _consuming(run, members)
    local.stop("bridge")
    wait_until(lambda: not pzk.get_children(zp.BROKER_IDS), 15, "the brokers gone from ZooKeeper")
    return local, topic, run, members


@pytest.mark.broker("kraft")
def test_bridge_down_and_back(private_stack, pzk, names, fault_run, report, caplog) -> None:
    local, topic, run, members = _two_members_then_bridge_down(
        private_stack, pzk, names, fault_run, caplog)
    # No broker registered, but the broker is up: the group goes on as it was.
    _consuming(run, members, what="every member consuming while no broker is registered")
    local.start("bridge")
    wait_until(lambda: pzk.get_children(zp.BROKER_IDS), 15, "the broker registered again")
    members.append(run.add_member())
    wait_until(lambda: owners_settled(pzk, run.group, topic), 30, "the group settled")
    _consuming(run, members, what="every member consuming after the bridge came back")
    run.workload.stop()
    run.wait_consumed(60)
    r = report(run.verify())
    assert r.duplicates == 0


@pytest.mark.broker("kraft")
def test_member_joins_while_the_bridge_is_down(
        private_stack, pzk, names, fault_run, report, caplog) -> None:
    local, topic, run, members = _two_members_then_bridge_down(
        private_stack, pzk, names, fault_run, caplog)
    caplog.clear()
    # A member joins: every member rebalances and finds no broker registered.
    joiner = run.add_member()
    assert joiner.connector.owned_partitions() == {}
    wait_until(lambda: sum("no broker is registered" in r.getMessage()
                           for r in caplog.records if r.levelno == logging.WARNING) >= 3, 15,
               "each member's WARNING about the missing broker")
    # The broker itself is up: the members that owned partitions keep consuming them.
    _consuming(run, members, timeout=10,
               what="the old members consuming after a rebalance that found no broker")
    local.start("bridge")
    wait_until(lambda: owners_settled(pzk, run.group, topic), 30, "the group settled")
    _consuming(run, [*members, joiner], what="every member consuming after the bridge is back")
    run.workload.stop()
    run.wait_consumed(60)
    report(run.verify())


def test_shutdown_while_zookeeper_is_down_during_a_rebalance(private_stack, pzk, names) -> None:
    """kazoo queues a call made while disconnected until the connection is back: a rebalance
    that reaches ZooKeeper during an outage waits, holding the rebalance lock. shutdown() must
    not wait for it (nor for the outage to end)."""
    local = private_stack.local
    topic = make_topic(private_stack.bootstrap, pzk, names.topic, 2)
    entered, proceed = threading.Event(), threading.Event()

    class Blocking(ConsumerRebalanceListener):
        def __init__(self) -> None:
            self.calls = 0

        def before_releasing_partitions(self, partition_ownership: Any) -> None:
            self.calls += 1
            if self.calls >= 2:  # the first rebalance runs in create_message_streams
                entered.set()
                proceed.wait(60)

    c = ZookeeperConsumerConnector(ConsumerConfig({
        "zookeeper.connect": private_stack.zookeeper, "group.id": names.group,
        "zookeeper.session.timeout.ms": 10000, "auto.offset.reset": "smallest"}))
    finished = threading.Event()
    try:
        c.set_consumer_rebalance_listener(Blocking())
        c.create_message_streams({topic: 1})
        c.rebalance_now()
        wait_until(entered.is_set, 30, "the second rebalance under way")
        local.stop("zookeeper")
        wait_until(lambda: not c._zk.connected, 15, "the member disconnected")
        assert c.paused
        proceed.set()  # the rebalance goes on into ZooKeeper calls that wait for the connection
        closer = threading.Thread(target=lambda: (c.shutdown(), finished.set()), daemon=True)
        closer.start()
        wait_until(finished.is_set, 20, "shutdown() returning while ZooKeeper is down")
        wait_until(lambda: not c._watcher.thread.is_alive(), 15, "the watcher thread ending")
        # The metrics no longer show the partitions (nor their lag) it shut down with.
        snap = c.metrics.snapshot()
        assert (snap["OwnedPartitionsCount"], snap["ConsumerLag"]) == ({}, {})
    finally:
        proceed.set()
        if not finished.is_set():
            local.start("zookeeper")  # let a hung shutdown finish before the next test
            c.shutdown()


def test_a_spark_query_rides_out_a_zookeeper_outage(private_stack, pzk, names) -> None:
    """The Spark source's driver, planning while ZooKeeper is down: no batch (ownership is
    unknown), no error, and no call waits for the outage to end (kazoo holds a request made
    while disconnected until it reconnects: with ZooKeeper started again only after the
    calls return, a blocked call would hang here). Once back, batches go on and the commit
    missed in the outage is made."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from tests.support import offset_znodes, produce
    from zkconsumer.spark import ZkConsumerStreamReader, parse_options

    local = private_stack.local
    topic = make_topic(private_stack.bootstrap, pzk, names.topic, 1)
    produce(private_stack.bootstrap, topic, [(0, None, b"m%d" % i) for i in range(5)])
    reader = ZkConsumerStreamReader(parse_options({
        "zookeeper.connect": private_stack.zookeeper, "group.id": names.group,
        "topics": topic, "startingOffsets": "earliest", "rebalance.backoff.ms": "200",
        "zookeeper.session.timeout.ms": "10000"}))
    try:
        placed = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
        end = reader.latestOffset(placed, ReadAllAvailable())
        assert end == {topic: {"0": 5}}
        member = reader._join()
        local.stop("zookeeper")
        wait_until(lambda: not member.zk_connected(), 20, "the driver to see ZooKeeper gone")
        produce(private_stack.bootstrap, topic, [(0, None, b"late")])
        assert reader.latestOffset(end, ReadAllAvailable()) == end
        reader.commit(end)
        # A commit sent in the outage all the same (the connection went after the check)
        # is awaited at most a session timeout, not for the length of the outage.
        connected = member.zk_connected
        member.zk_connected = lambda: True  # type: ignore[method-assign]
        reader.commit({topic: {"0": 5}})
        member.zk_connected = connected  # type: ignore[method-assign]
        local.start("zookeeper")
        wait_until(member.zk_connected, 30, "the driver to reconnect")
        later: list[Any] = []

        def planned() -> bool:
            later.append(reader.latestOffset(end, ReadAllAvailable()))
            return later[-1] != end

        wait_until(planned, 60, "a batch after the outage")
        assert later[-1] == {topic: {"0": 6}}
        # (pzk's own session may have expired in the outage: it makes a new one.)
        wait_until(lambda: pzk.connected, 30, "the test's client back")
        assert offset_znodes(pzk, names.group, topic, 1) == {0: 5}
    finally:
        reader.stop()
