"""Container faults on the docker-compose stack, while a group of member processes consumes:
the broker's container paused past its ZooKeeper session timeout, ZooKeeper's container
stopped and started, the broker's network cut and restored. Each run: nothing lost, no zombie
duplicates, no message handed out while a member's ZooKeeper connection was down (the fault
suite's checks, tools/fault_harness.py). Duplicates from uncommitted windows after a
rebalance are allowed, as everywhere in the fault suite.

Only tools/compose-check runs these (they need the compose stack and the Docker engine; see
conftest.py). ``ZKCONSUMER_COMPOSE_UNFENCED=1`` runs the members with fencing off
(tests/compose/unfenced_member.py): then these tests must fail.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from kazoo.client import KazooClient

from tests.compose.conftest import Compose
from tests.conftest import Names
from tests.support import StackInfo, owners_settled, wait_until
from tools.fault_harness import FaultRun, ProcessMember, RunReport
from zkconsumer.zk import paths as zp

#: The members with fencing off, to see these tests fail.
UNFENCED = os.environ.get("ZKCONSUMER_COMPOSE_UNFENCED") == "1"
#: Kafka 3.9's zookeeper.session.timeout.ms (server.properties keeps the default, 18 s): a
#: broker paused or cut off longer loses its registration in /brokers/ids.
BROKER_SESSION_S = 18.0
BROKER_ID = 0
PARTITIONS = 6


def _member(run: FaultRun, name: str) -> ProcessMember:
    m = ProcessMember(name, run.zookeeper, run.group, run.topic, 2, run.props(),
                      run.collector, run.ownership, run.log_dir)
    if UNFENCED:
        m.argv[1:3] = ["-m", "tests.compose.unfenced_member"]
    run.processes.append(m)
    m.start()
    m.wait_ready()
    return m


def _consuming(run: FaultRun, members: list[ProcessMember], n: int, what: str) -> None:
    marks = {m.name: run.collector.delivered_by(m.name) for m in members}
    wait_until(lambda: all(run.collector.delivered_by(m.name) >= marks[m.name] + n
                           for m in members), 120, what)


def _group(run: FaultRun) -> list[ProcessMember]:
    run.workload.produce(600)
    run.workload.start(rate_per_s=200)
    members = [_member(run, f"m{i}") for i in range(2)]
    _consuming(run, members, 50, "every member consuming")
    return members


def _registered(zk: KazooClient) -> bool:
    return zk.exists(zp.broker_path(BROKER_ID)) is not None


def _finish(zk: KazooClient, run: FaultRun, members: list[ProcessMember],
            compose: Compose, report: Callable[..., RunReport]) -> None:
    """After the fault: the stack healthy, the group settled and consuming, everything
    produced consumed; then the fault suite's checks."""
    compose.wait_healthy("zookeeper")
    compose.wait_healthy("kafka")
    wait_until(lambda: _registered(zk), 120, "the broker registered in ZooKeeper")
    wait_until(lambda: owners_settled(zk, run.group, run.topic), 120, "the group settled")
    _consuming(run, members, 50, "every member consuming again")
    run.workload.stop()
    run.wait_consumed(120)
    r = report(run.verify(while_down=True))
    assert r.zombie_duplicates == 0 and not r.missing


def test_the_broker_paused_past_its_session_timeout(
        compose: Compose, stack: StackInfo, zk: KazooClient, names: Names,
        topic_factory: Callable[[str, int], str], fault_run: Callable[..., FaultRun],
        report: Callable[..., RunReport]) -> None:
    """``docker pause`` (the cgroup freezer) until ZooKeeper dropped the broker's session,
    then ``unpause``: the broker registers again, the group rebalances and reads on."""
    topic = topic_factory(names.topic, PARTITIONS)
    run = fault_run(stack, topic, PARTITIONS)
    members = _group(run)
    kafka = compose.container("kafka")
    kafka.pause()
    try:
        wait_until(lambda: not _registered(zk), BROKER_SESSION_S + 30,
                   "the paused broker's session expired")
    finally:
        kafka.unpause()
    _finish(zk, run, members, compose, report)


def test_zookeeper_restarted(
        compose: Compose, stack: StackInfo, zk: KazooClient, names: Names,
        topic_factory: Callable[[str, int], str], fault_run: Callable[..., FaultRun],
        report: Callable[..., RunReport]) -> None:
    """ZooKeeper's container stopped (SIGTERM) while the load goes on, then started again:
    its data survive in the container; no member hands out anything while its connection is
    down, none loses anything."""
    topic = topic_factory(names.topic, PARTITIONS)
    run = fault_run(stack, topic, PARTITIONS)
    members = _group(run)
    zookeeper = compose.container("zookeeper")
    acked = len(run.workload.expected())
    zookeeper.stop(timeout=10)
    try:
        # The broker takes messages on while ZooKeeper is down: a member that hands out
        # through the outage has some to hand out.
        wait_until(lambda: len(run.workload.expected()) >= acked + 100, 30,
                   "100 messages produced while ZooKeeper is down")
    finally:
        zookeeper.start()
    _finish(zk, run, members, compose, report)


def test_the_broker_cut_off_past_its_session_timeout(
        compose: Compose, stack: StackInfo, zk: KazooClient, names: Names,
        topic_factory: Callable[[str, int], str], fault_run: Callable[..., FaultRun],
        report: Callable[..., RunReport]) -> None:
    """The broker's container disconnected from the compose network (from ZooKeeper and from
    the host's members) until ZooKeeper dropped its session, then connected again under its
    service name."""
    topic = topic_factory(names.topic, PARTITIONS)
    run = fault_run(stack, topic, PARTITIONS)
    members = _group(run)
    kafka = compose.container("kafka")
    network = compose.network()
    network.disconnect(kafka)
    try:
        wait_until(lambda: not _registered(zk), BROKER_SESSION_S + 30,
                   "the cut-off broker's session expired")
    finally:
        network.connect(kafka, aliases=["kafka"])
    _finish(zk, run, members, compose, report)

