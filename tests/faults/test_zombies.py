"""Zombie members: one whose ZooKeeper session expired while it could not tell (a process
pause, a network cut between it and ZooKeeper), and ZooKeeper restarted under everyone.

Each run counts *zombie duplicates* (messages a member handed out after another member had
claimed the partition, which that one handed out too: see
``OwnershipLog.zombie_duplicates``); the goal is none, and nothing lost. Before the delivery
fence, the paused member of the first test handed out over a hundred of them on resume.
"""

from __future__ import annotations

import signal
import time

import pytest

from tests.support import group_owners, owners_settled
from tools.fault_harness import (
    FAULT_PROPS,
    FaultRun,
    ProcessMember,
    make_topic,
    now_ns,
    wait_until,
)
from tools.tcp_proxy import TcpProxy

SESSION_S = int(FAULT_PROPS["zookeeper.session.timeout.ms"]) / 1000  # type: ignore[call-overload]


def _consuming(run: FaultRun, members: list[ProcessMember], n: int = 50,
               what: str = "every member consuming") -> None:
    marks = {m.name: run.collector.delivered_by(m.name) for m in members}
    wait_until(lambda: all(run.collector.delivered_by(m.name) >= marks[m.name] + n
                           for m in members), 60, what)


def _all_owned_by(zk, run: FaultRun, m: ProcessMember) -> bool:
    owners = group_owners(zk, run.group, run.topic)
    return len(owners) == run.partitions and all(
        o.startswith(f"{m.consumer_id}-") for o in owners.values())


def _back(zk, run: FaultRun, m: ProcessMember, old_session: int) -> bool:
    return (m.session is not None and m.session[0] != old_session
            and owners_settled(zk, run.group, run.topic))


def _two_members(run: FaultRun, zookeeper: str | None = None) -> tuple[ProcessMember,
                                                                        ProcessMember]:
    run.workload.produce(800)
    run.workload.start(rate_per_s=300)
    victim = run.add_process("victim", streams=2, zookeeper=zookeeper)
    other = run.add_process("other", streams=2)
    _consuming(run, [victim, other])
    return victim, other


def _zombie_run(zk, run: FaultRun, victim: ProcessMember, other: ProcessMember,
                start: object, end: object, frozen: bool) -> None:
    """``start()`` the fault, hold it until ``other`` owns everything and consumed on, then
    ``end()`` it and let the group settle and consume everything. ``frozen``: the fault
    stops the victim (which then cannot report its connection's drop itself)."""
    assert victim.session is not None
    old = victim.session[0]
    if frozen:
        # From here on the victim cannot know what it owns: its belief ends (else the pause
        # itself counts as two owners), and anything it hands out before claiming again is
        # counted (verify(while_down=True)).
        run.ownership.down(victim.name, now_ns())
    start()  # type: ignore[operator]
    try:
        wait_until(lambda: _all_owned_by(zk, run, other), 30 + 3 * SESSION_S,
                   "the other member owning every partition")
        _consuming(run, [other], 200, "the other member consuming the victim's partitions")
    finally:
        end()  # type: ignore[operator]
    wait_until(lambda: _back(zk, run, victim, old), 60, "the victim back, group settled")
    _consuming(run, [victim, other], 50, "both members consuming again")
    run.workload.stop()
    run.wait_consumed(60)


def test_a_member_paused_past_its_session_timeout(
        stack, zk, names, topic_factory, fault_run, report) -> None:
    """SIGSTOP for as long as it takes the other member to take over and consume on, then
    SIGCONT: the resumed member hands out nothing of the partitions it lost."""
    topic = topic_factory(names.topic, 8)
    run = fault_run(stack, topic, 8)
    victim, other = _two_members(run)
    assert victim.proc is not None
    proc = victim.proc
    _zombie_run(zk, run, victim, other, lambda: proc.send_signal(signal.SIGSTOP),
                lambda: proc.send_signal(signal.SIGCONT), frozen=True)
    r = report(run.verify(while_down=True))
    assert r.zombie_duplicates == 0 and not r.missing


def test_a_member_cut_off_from_zookeeper_past_its_session_timeout(
        stack, zk, names, topic_factory, fault_run, report) -> None:
    """The member's own path to ZooKeeper (a loopback proxy) drops everything until the
    other member took over and consumed on; its path to the broker stays up."""
    topic = topic_factory(names.topic, 8)
    run = fault_run(stack, topic, 8)
    host, port = stack.zookeeper.split(",")[0].rsplit(":", 1)
    with TcpProxy(host, int(port)) as proxy:
        victim, other = _two_members(run, zookeeper=proxy.address)
        # It may hand out messages until its lease runs out (its session lives then), but
        # none once its client reported the drop (while_down) or another member claimed.
        _zombie_run(zk, run, victim, other, proxy.cut, proxy.restore, frozen=False)
        r = report(run.verify(while_down=True))
    assert r.zombie_duplicates == 0 and not r.missing


@pytest.mark.parametrize("delivery", ["pause", "continue"])
def test_zookeeper_restarted_under_everyone(
        private_stack, pzk, names, fault_run, report, delivery: str) -> None:
    """ZooKeeper stops for about a session timeout and starts again: the sessions survive,
    nothing is lost, nobody hands out what another does. With ``pause`` (the default) no
    message is handed out from half a session timeout without an answer until ZooKeeper
    answers again; with ``continue`` the members keep handing out meanwhile."""
    local = private_stack.local
    topic = make_topic(private_stack.bootstrap, pzk, names.topic, 6)
    run = fault_run(private_stack, topic, 6)
    run.workload.produce(600)
    run.workload.start(rate_per_s=300)
    members = [run.add_member(streams=2, zookeeper_outage_delivery=delivery)
               for _ in range(2)]
    marks = {m.name: run.collector.delivered_by(m.name) for m in members}
    wait_until(lambda: all(run.collector.delivered_by(m.name) > marks[m.name] + 50
                           for m in members), 60, "every member consuming")
    local.stop("zookeeper")
    down_ns = time.monotonic_ns()
    wait_until(lambda: all(m.connector.paused for m in members) or delivery == "continue",
               15, "every member paused")
    time.sleep(max(0.0, SESSION_S - (time.monotonic_ns() - down_ns) / 1e9))
    during = run.collector.count()
    time.sleep(0.5)
    handed_out_while_down = run.collector.count() - during
    local.start("zookeeper")
    wait_until(lambda: all(m.connector._zk.connected and not m.connector.paused
                           for m in members), 60, "every member connected and delivering")
    wait_until(lambda: owners_settled(pzk, run.group, topic), 30, "the group settled")
    run.workload.stop()
    run.wait_consumed(60)
    r = report(run.verify(while_down=delivery == "pause"),
               f"{handed_out_while_down} handed out in 0.5 s while ZooKeeper was down")
    assert r.zombie_duplicates == 0 and not r.missing
    if delivery == "pause":
        assert handed_out_while_down == 0
    else:
        assert handed_out_while_down > 0
