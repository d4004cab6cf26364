"""Forced ZooKeeper session expiry (a second client on the same session id and password,
started and closed) of one member and of every member at once."""

from __future__ import annotations

import threading

from tests.support import drop_connection, group_owners, owners_settled
from tools.fault_harness import FaultRun, InProcessMember, wait_until
from zkconsumer.zk import paths as zp


def _start(run: FaultRun, members: int) -> list[InProcessMember]:
    run.workload.produce(1500)
    run.workload.start(rate_per_s=600)
    # 1 ms per message: a member works through a backlog for a while instead of at once.
    out = [run.add_member(delays=(0.001,)) for _ in range(members)]
    wait_until(lambda: all(run.collector.delivered_by(m.name) > 50 for m in out), 60,
               "every member consuming")
    return out


def _backlog(run: FaultRun, members: list[InProcessMember]) -> None:
    """Give every member a backlog, so that the moment of an expiry finds messages queued."""
    marks = {m.name: run.collector.delivered_by(m.name) for m in members}
    run.workload.produce(3000)
    wait_until(lambda: all(run.collector.delivered_by(m.name) > marks[m.name] + 100
                           for m in members), 30, "every member consuming the backlog")


def _back(zk, run: FaultRun, m: InProcessMember, old_session: int) -> bool:
    """``m`` has a new session, its ids znode belongs to it, and the group is settled."""
    stat = zk.exists(zp.id_path(run.group, m.consumer_id))
    return (m.session[0] != old_session and stat is not None
            and stat.ephemeralOwner == m.session[0])




def test_one_member_expired(stack, zk, names, topic_factory, fault_run, report) -> None:
    topic = topic_factory(names.topic, 6)
    run = fault_run(stack, topic, 6)
    members = _start(run, 3)
    victim = members[1]
    _backlog(run, members)
    before = run.collector.delivered_by(victim.name)
    old = victim.expire(stack.zookeeper)
    wait_until(lambda: _back(zk, run, victim, old), 30, "the victim re-registered")
    wait_until(lambda: owners_settled(zk, run.group, topic), 30, "the group settled")
    wait_until(lambda: run.collector.delivered_by(victim.name) > before + 50, 30,
               "the victim consuming again")
    run.workload.stop()
    run.wait_consumed(60)
    r = report(run.verify(while_down=True))
    assert victim.connector.stats.rebalances >= 2
    assert r.unique == r.expected


def test_every_member_expired_at_once(stack, zk, names, topic_factory, fault_run,
                                      report) -> None:
    topic = topic_factory(names.topic, 6)
    run = fault_run(stack, topic, 6)
    members = _start(run, 3)
    sessions = {m.name: m.session for m in members}
    # Every session within a fraction of a second: the first, then, as soon as the others
    # took its partitions over, the two others together. (All three at the same instant
    # leaves it to kazoo's random reconnect backoff whether one member re-registers and claims
    # everything while another still consumes; the stagger makes the test deterministic.)
    first = {p for p, th in group_owners(zk, run.group, topic).items()
             if th.startswith(members[0].consumer_id)}
    _backlog(run, members)
    members[0].expire(stack.zookeeper)
    wait_until(lambda: all(not th.startswith(members[0].consumer_id) for p, th in
                           group_owners(zk, run.group, topic).items() if p in first)
               and len(group_owners(zk, run.group, topic)) == 6, 10,
               "the others owning the first member's partitions", every=0.005)
    threads = [threading.Thread(target=m.expire, args=(stack.zookeeper,)) for m in members[1:]]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    for m in members:
        wait_until(lambda m=m: _back(zk, run, m, sessions[m.name][0]), 30,
                   f"{m.name} re-registered")
    wait_until(lambda: owners_settled(zk, run.group, topic), 30, "the group settled")
    marks = {m.name: run.collector.delivered_by(m.name) for m in members}
    wait_until(lambda: all(run.collector.delivered_by(m.name) > marks[m.name] + 50
                           for m in members), 30, "every member consuming again")
    run.workload.stop()
    run.wait_consumed(60)
    report(run.verify(while_down=True))


def test_connection_blips_keep_every_partition_where_it_is(
        stack, zk, names, topic_factory, fault_run, report) -> None:
    """Each member's ZooKeeper connection breaks in turn (same session back at once): nothing
    handed out while disconnected, no message lost, and no member gives up or restarts
    anything (the original did not rebalance on a reconnection either)."""
    topic = topic_factory(names.topic, 6)
    run = fault_run(stack, topic, 6)
    members = _start(run, 3)
    wait_until(lambda: owners_settled(zk, run.group, topic), 30, "the group settled")
    owners = group_owners(zk, run.group, topic)
    sessions = {m.name: m.session[0] for m in members}
    rebalances = {m.name: m.connector.stats.rebalances for m in members}
    _backlog(run, members)
    for m in members:
        unchanged = m.connector.stats.unchanged
        drop_connection(m.connector._zk)
        wait_until(lambda m=m, u=unchanged: m.connector.stats.unchanged > u
                   and not m.connector.paused, 30, f"{m.name} back after its blip")
    marks = {m.name: run.collector.delivered_by(m.name) for m in members}
    wait_until(lambda: all(run.collector.delivered_by(m.name) > marks[m.name] + 50
                           for m in members), 30, "every member consuming after the blips")
    run.workload.stop()
    run.wait_consumed(60)
    assert {m.name: m.session[0] for m in members} == sessions  # blips, not expiries
    assert {m.name: m.connector.stats.rebalances for m in members} == rebalances
    assert group_owners(zk, run.group, topic) == owners
    report(run.verify(while_down=True), "3 blips, no rebalance")
