"""The exporter's status without false alarms (Burrow's: STOP or ERR while caught up, a
group with no member and no offsets), on real groups: caught up but idle, a group with no
member, a group with no offsets yet, a rewind by ``offsets reset``, a partition added."""

from __future__ import annotations

import time
from typing import Any

from kazoo.client import KazooClient

from tests.support import StackInfo, add_partitions, produce, wait_until
from zkconsumer import cli
from zkconsumer.ops.exporter import GroupLag, LagMonitor
from zkconsumer.zk import paths as zp


def polled(monitor: LagMonitor, zk: KazooClient, group: str) -> GroupLag:
    [found] = monitor.poll(zk, [group])
    return found


def register(zk: KazooClient, group: str, topic: str, consumer_id: str = "c1") -> None:
    """A registered member (its ids znode, as a member writes it)."""
    reg = zp.ConsumerRegistration.static({topic: 1}, int(time.time() * 1000))
    zk.create(zp.id_path(group, consumer_id), reg.encode(), makepath=True)


def test_caught_up_but_idle_is_ok_and_a_message_since_is_no_stop(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
) -> None:
    topic, g = topic_factory(names.topic, 1), names.group
    produce(stack.bootstrap, topic, [(0, None, b"x")] * 5)
    zk.create(zp.offset_path(g, topic, 0), b"5", makepath=True)  # caught up
    committed = zk.exists(zp.offset_path(g, topic, 0)).mtime / 1000
    clock = [committed + 3600.0]  # the last commit an hour ago: idle
    monitor = LagMonitor(window=3, clock=lambda: clock[0])
    for _ in range(4):
        clock[0] += 30
        group = polled(monitor, zk, g)
        assert (group.status, group.total_lag) == ("OK", 0)
    # One message arrives; the member has not read it by the next poll: not a stop.
    produce(stack.bootstrap, topic, [(0, None, b"y")])
    clock[0] += 30
    group = polled(monitor, zk, g)
    assert (group.total_lag, group.status) == (1, "OK")
    clock[0] += 30
    assert polled(monitor, zk, g).status == "OK"  # caught up two polls ago
    # Still not read a whole window later: now it is one.
    clock[0] += 30
    assert polled(monitor, zk, g).status == "STOP"


def test_a_group_with_no_member_is_ok_caught_up_and_stop_behind(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
) -> None:
    topic = topic_factory(names.topic, 1)
    produce(stack.bootstrap, topic, [(0, None, b"x")] * 4)
    idle, behind = names("idle"), names("behind")
    zk.create(zp.offset_path(idle, topic, 0), b"4", makepath=True)
    zk.create(zp.offset_path(behind, topic, 0), b"1", makepath=True)
    zk.ensure_path(zp.ids_dir(idle))
    zk.ensure_path(zp.ids_dir(behind))
    clock = [time.time()]
    monitor = LagMonitor(window=3, clock=lambda: clock[0])
    for _ in range(3):
        clock[0] += 30
        by_group = {x.group: x for x in monitor.poll(zk, [idle, behind])}
    assert (by_group[idle].members, by_group[idle].status) == (0, "OK")
    assert (by_group[behind].members, by_group[behind].status, by_group[behind].total_lag) == (
        0, "STOP", 3)


def test_a_group_with_no_offsets_yet_is_notfound_with_no_lag_not_0(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any, capsys: Any,
) -> None:
    topic = topic_factory(names.topic, 2)
    produce(stack.bootstrap, topic, [(0, None, b"x")] * 3)
    empty, fresh = names("empty"), names("fresh")
    zk.ensure_path(zp.ids_dir(empty))  # no live member, no offsets znode (Burrow #144)
    register(zk, fresh, topic)  # a member that owns a partition and has committed nothing
    zk.create(zp.owner_path(fresh, topic, 0), f"{fresh}_c1-0".encode(), makepath=True)
    monitor = LagMonitor()
    by_group = {x.group: x for x in monitor.poll(zk, [empty, fresh])}
    for name, members in ((empty, 0), (fresh, 1)):
        group = by_group[name]
        assert (group.status, group.members) == ("NOTFOUND", members)
        assert group.total_lag is None and group.max_lag is None
        assert group.max_time_lag is None
    assert {p.status for p in by_group[fresh].partitions} == {"NOTFOUND"}
    text = monitor.render().decode()
    for name in (empty, fresh):
        assert f'zkconsumer_group_status_code{{group="{name}"}} 0' in text
        assert f'zkconsumer_group_lag{{group="{name}"}}' not in text
        assert f'zkconsumer_group_max_lag{{group="{name}"}}' not in text
    assert cli.main(["groups", "lag", "--zookeeper", stack.zookeeper, "--group", empty,
                     "--group", fresh]) == 0
    capsys.readouterr()
    cli.main(["groups", "lag", "--zookeeper", stack.zookeeper])  # 1 if another is UNKNOWN
    [line] = [r for r in capsys.readouterr().out.splitlines() if r.startswith(fresh)]
    assert line.split()[4:7] == ["-", "-", "-"]  # no lag: not 0, not unknown


def test_a_rewind_by_offsets_reset_is_no_alarm_but_a_members_is(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any, capsys: Any,
) -> None:
    topic = topic_factory(names.topic, 1)
    produce(stack.bootstrap, topic, [(0, None, b"x")] * 10)
    reset, rewound = names("reset"), names("rewound")
    for g in (reset, rewound):
        zk.create(zp.offset_path(g, topic, 0), b"8", makepath=True)
    register(zk, rewound, topic)
    monitor = LagMonitor(window=3)

    def both() -> dict[str, GroupLag]:
        return {x.group: x for x in monitor.poll(zk, [reset, rewound])}

    assert {x.status for x in both().values()} == {"OK"}
    code = cli.main(["offsets", "reset", "--zookeeper", stack.zookeeper, "--group", reset,
                     "--topic", topic, "--to-earliest", "--execute",
                     "--bootstrap-server", stack.bootstrap])
    capsys.readouterr()
    assert code == 0
    zk.set(zp.offset_path(rewound, topic, 0), b"2")  # a member's offset going back
    by_group = wait_until(lambda: (x := both())[reset].partitions[0].offset == 0
                          and x[rewound].partitions[0].offset == 2 and x, 10, "both seen")
    assert (by_group[reset].status, by_group[reset].partitions[0].status) == ("OK", "OK")
    assert (by_group[rewound].status, by_group[rewound].partitions[0].status) == (
        "ERR", "REWIND")


def test_a_partition_added_is_notfound_and_leaves_the_group_ok(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
) -> None:
    topic, g = topic_factory(names.topic, 1), names.group
    produce(stack.bootstrap, topic, [(0, None, b"x")] * 3)
    zk.create(zp.offset_path(g, topic, 0), b"3", makepath=True)
    register(zk, g, topic)
    zk.create(zp.owner_path(g, topic, 0), f"{g}_c1-0".encode(), makepath=True)
    monitor = LagMonitor(window=3)
    assert polled(monitor, zk, g).status == "OK"
    add_partitions(stack.bootstrap, topic, 2)
    wait_until(lambda: len(zp.TopicAssignment.decode(
        zk.get(zp.topic_path(topic))[0]).partitions) == 2, 30, "the partition registered")
    produce(stack.bootstrap, topic, [(1, None, b"y")] * 2)
    group = wait_until(lambda: (x := polled(monitor, zk, g)).partitions[-1].log_end_offset == 2
                       and x, 30, "the new partition's log end")
    new = group.partitions[1]
    assert (new.partition, new.offset, new.lag, new.owner, new.status) == (
        1, None, None, None, "NOTFOUND")
    assert (group.status, group.total_lag, group.unowned) == ("OK", 0, 1)
