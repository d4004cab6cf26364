"""Members killed with SIGKILL, several at once, while the group is rebalancing."""

from __future__ import annotations

import signal

from tools.fault_harness import TP, uncommitted_window, wait_until
from zkconsumer.zk import paths as zp


def test_sigkill_two_members_at_once_during_a_rebalance(
        stack, zk, names, topic_factory, fault_run, report) -> None:
    topic = topic_factory(names.topic, 8)
    run = fault_run(stack, topic, 8)
    run.workload.produce(2000)
    run.workload.start(rate_per_s=800)
    victims = [run.add_process(), run.add_process()]
    run.add_process()
    run.add_member()
    wait_until(lambda: all(run.collector.delivered_by(v.name) > 100 for v in victims), 60,
               "the victims consuming")
    # A fifth member joins: every member rebalances. Kill both victims the moment the group
    # sees the join, so they die mid-rebalance, holding owner znodes until their sessions end.
    ids_dir = zp.ids_dir(names.group)
    joiner = run.add_process(wait=False)
    wait_until(lambda: len(zk.get_children(ids_dir)) == 5, 60, "the joiner registered",
               every=0.005)
    for v in victims:
        v.proc.send_signal(signal.SIGKILL)  # type: ignore[union-attr]
    for v in victims:
        v.kill()  # reaps it; records the end of its ownership
    joiner.wait_ready()
    run.sampler.wait_rounds(2)
    committed = {tp: off for tp, off in run.sampler.committed_now().items()}
    deliveries = run.collector.snapshot()
    window = sum(uncommitted_window(deliveries, v.name, committed) for v in victims)
    # The victims' sessions expire (2 s); their partitions move to the three live members.
    wait_until(lambda: len(zk.get_children(ids_dir)) == 3, 30, "the victims' sessions gone")
    live = {m.consumer_id for m in run.members} | {p.consumer_id for p in run.processes
                                                    if p.alive}
    wait_until(lambda: len(run.sampler.committed_now()) == 8 and {
        zp.thread_consumer_id(th) for th in _owners(zk, names.group, topic).values()} == live
        and len(_owners(zk, names.group, topic)) == 8, 30, "the live members owning everything")
    run.workload.stop()
    run.wait_consumed(90)
    r = report(run.verify(), f"the victims' uncommitted window: {window}")
    assert r.duplicates <= window, (r.duplicates, window)
    # A clean shutdown of the survivors commits exactly the log end.
    for p in run.processes:
        if p.alive:
            p.stop()
    for m in run.members:
        run.stop_member(m)
    ends = _ends(run)
    assert run.sampler.committed_now() == ends or _committed(zk, names.group, topic) == ends


def _owners(zk, group: str, topic: str) -> dict[int, str]:
    from tests.support import group_owners

    return group_owners(zk, group, topic)


def _ends(run) -> dict[TP, int]:
    from tools.fault_harness import log_ends

    return {TP(run.topic, p): off for p, off in log_ends(run.bootstrap, run.topic,
                                                          run.partitions).items()}


def _committed(zk, group: str, topic: str) -> dict[TP, int]:
    from tools.fault_harness import committed_offsets

    return {TP(topic, p): off for p, off in committed_offsets(zk, group, topic).items()}
