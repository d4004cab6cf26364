"""Lag monitoring of every group: the Burrow-style rules, the exporter against the real
stack (polled, scraped over HTTP) and ``groups lag``."""

from __future__ import annotations

import functools
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

import pytest
from kazoo.client import KazooClient
from prometheus_client.parser import text_string_to_metric_families

from tests.support import StackInfo, produce, reaped, wait_until
from zkconsumer._types import TopicPartition
from zkconsumer.cli import main
from zkconsumer.ops.exporter import (
    STATUS_CODES,
    LagMonitor,
    Observation,
    evaluate_partition,
    group_status,
)
from zkconsumer.zk import paths as zp

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def window(*points: tuple[int, int | None, float], seen_every: float = 10.0
           ) -> list[Observation]:
    """Observations of (offset, lag, commit time), seen every ``seen_every`` s from t=0."""
    return [Observation(i * seen_every, o, lag, c) for i, (o, lag, c) in enumerate(points)]


def test_burrows_rules_in_their_order() -> None:
    size = 4
    # Lag 0 now: OK whatever came before.
    assert evaluate_partition(window((5, 3, 0), (5, 3, 0), (5, 3, 0), (9, 0, 30)), size,
                              40) == "OK"
    # The offset went back: REWIND, even before the window is full.
    assert evaluate_partition(window((9, 1, 0), (4, 6, 10)), size, 20) == "REWIND"
    # Not a full window yet: OK (not enough data to say more).
    assert evaluate_partition(window((1, 5, 0), (1, 5, 0), (1, 5, 0)), size, 30) == "OK"
    # No commit for longer than the window's commits span: STOP.
    assert evaluate_partition(window((1, 5, 0), (1, 6, 0), (1, 7, 0), (1, 8, 0)), size,
                              40) == "STOP"
    # Commits, but the offset does not move: STALL.
    assert evaluate_partition(window((1, 5, 0), (1, 5, 10), (1, 5, 20), (1, 5, 30)), size,
                              35) == "STALL"
    # The offset moves, the lag never falls: WARN.
    assert evaluate_partition(window((1, 5, 0), (2, 5, 10), (3, 6, 20), (4, 8, 30)), size,
                              35) == "WARN"
    # The offset moves and the lag falls somewhere: OK.
    assert evaluate_partition(window((1, 5, 0), (2, 6, 10), (4, 4, 20), (5, 5, 30)), size,
                              35) == "OK"
    assert evaluate_partition([], size, 0) == "NOTFOUND"
    # The group: its worst partition; REWIND makes it ERR.
    assert group_status(["OK", "WARN", "NOTFOUND"]) == "WARN"
    assert group_status(["WARN", "STOP", "OK"]) == "STOP"
    assert group_status(["STOP", "STALL"]) == "STALL"
    assert group_status(["STALL", "REWIND"]) == "ERR"
    assert group_status(["NOTFOUND"]) == group_status([]) == "OK"


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _all_changed(monitor: LagMonitor, paths: list[str]) -> bool:
    cache = monitor.cache
    return cache is not None and all(cache.changed("get", p) for p in paths)


def test_statuses_of_real_groups_over_polls(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
) -> None:
    topic = topic_factory(names.topic, 1)
    produce(stack.bootstrap, topic, [(0, None, b"x")] * 20)
    stopped, stalled, warned, rewound, fine = (names(s) for s in
                                               ("stop", "stall", "warn", "rewind", "ok"))
    # The commit times are the znodes' modification times (ZooKeeper's clock). Each poll is
    # taken to come 10 ms after the last commit; the produce between two rounds of commits
    # takes longer than that.
    latest = [0.0]
    path = {g: zp.offset_path(g, topic, 0) for g in (stopped, stalled, warned, rewound, fine)}
    for g, offset in ((stopped, 5), (stalled, 5), (warned, 1), (rewound, 10), (fine, 20)):
        zk.create(path[g], zp.encode_offset(offset), makepath=True)
        latest[0] = max(latest[0], zk.exists(path[g]).mtime / 1000)

    def commit(p: str, data: bytes) -> None:
        latest[0] = max(latest[0], zk.set(p, data).mtime / 1000)

    # A member registered in the rewound group (a rewind with nobody registered is an
    # operator's reset, which starts the window anew).
    zk.create(zp.id_path(rewound, "c1"), zp.ConsumerRegistration.static(
        {topic: 1}, int(time.time() * 1000)).encode(), makepath=True)
    monitor = LagMonitor(window=3, clock=lambda: latest[0] + 0.01)
    groups = [stopped, stalled, warned, rewound, fine]
    for i in range(3):
        if i:
            produce(stack.bootstrap, topic, [(0, None, b"y")] * 2)  # lag grows by 1 a poll
            commit(path[stalled], b"5")  # committed again, the same offset
            commit(path[warned], zp.encode_offset(1 + i))
            commit(path[fine], zp.encode_offset(20 + 2 * i))  # keeps up: lag 0
        if i == 2:
            commit(path[rewound], b"3")
        if i:
            # The poll reads again what ZooKeeper's watches said changed.
            changed = [path[g] for g in (stalled, warned, fine)] + [path[rewound]] * (i == 2)
            wait_until(functools.partial(_all_changed, monitor, changed), 10,
                       "the watches fired")
        by_group = {g.group: g for g in monitor.poll(zk, groups)}
    assert {g: by_group[g].status for g in groups} == {
        stopped: "STOP", stalled: "STALL", warned: "WARN", rewound: "ERR", fine: "OK"}
    assert by_group[rewound].partitions[0].status == "REWIND"
    assert by_group[warned].partitions[0].lag == 24 - 3

    got = samples(monitor.render().decode())
    labels = (("group", warned), ("partition", "0"), ("topic", topic))
    in_zk = (*labels[:2], ("store", "zookeeper"), labels[2])
    assert got[("zkconsumer_group_partition_offset", in_zk)] == 3
    assert got[("zkconsumer_group_partition_lag", in_zk)] == 21
    assert got[("zkconsumer_group_offset_store", (("group", warned), ("store", "zookeeper")))] == 1
    assert got[("zkconsumer_group_partition_status", labels)] == STATUS_CODES["WARN"]
    assert got[("zkconsumer_partition_log_end_offset",
                (("partition", "0"), ("topic", topic)))] == 24
    assert got[("zkconsumer_group_status_code", (("group", stalled),))] == STATUS_CODES["STALL"]
    assert got[("zkconsumer_group_status", (("group", stopped), ("status", "STOP")))] == 1
    assert got[("zkconsumer_group_members", (("group", fine),))] == 0
    assert got[("zkconsumer_group_unowned_partitions", (("group", fine),))] == 1
    assert got[("zkconsumer_exporter_groups", ())] == 5


def test_exporter_serves_every_group_with_owners_and_members(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
) -> None:
    topic = topic_factory(names.topic, 2)
    produce(stack.bootstrap, topic, [(0, None, b"x")] * 4 + [(1, None, b"y")] * 2)
    g = names.group
    zk.create(zp.offset_path(g, topic, 0), b"1", makepath=True)
    reg = zp.ConsumerRegistration.static({topic: 1}, int(time.time() * 1000))
    zk.create(zp.id_path(g, f"{g}_m"), reg.encode(), ephemeral=True, makepath=True)
    zk.create(zp.owner_path(g, topic, 0), zp.encode_owner(f"{g}_m-0"), ephemeral=True,
              makepath=True)
    argv = [sys.executable, "-m", "zkconsumer", "exporter", "--zookeeper", stack.zookeeper,
            "--port", "0", "--interval", "0.5"]
    with reaped(subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, cwd=REPO,
                                 env={**os.environ, "PYTHONPATH": REPO})) as proc:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        found = re.fullmatch(r"zkconsumer exporter: serving http://127\.0\.0\.1:(\d+)/metrics, "
                             r"polling every 0\.5 s\n", first)
        assert found, first
        url = f"http://127.0.0.1:{found.group(1)}"

        def scrape() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
            with urllib.request.urlopen(f"{url}/metrics", timeout=10) as answer:
                return samples(answer.read().decode())

        wait_until(lambda: scrape().get(("zkconsumer_exporter_polls_total", ()), 0) >= 2, 30,
                   "two polls")
        got = scrape()
        p0 = (("group", g), ("partition", "0"), ("topic", topic))
        assert got[("zkconsumer_group_partition_lag",
                     (*p0[:2], ("store", "zookeeper"), p0[2]))] == 3
        assert got[("zkconsumer_group_partition_owner", (*p0[:1], ("owner", f"{g}_m-0"),
                                                          *p0[1:]))] == 1
        assert got[("zkconsumer_group_members", (("group", g),))] == 1
        assert got[("zkconsumer_group_unowned_partitions", (("group", g),))] == 1
        assert got[("zkconsumer_group_lag", (("group", g),))] == 3
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(f"{url}/", timeout=10)
        assert missing.value.code == 404
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        # (Other tests' groups with znodes that do not decode are named, once each.)
        rest = proc.stderr.read()
        assert "Traceback" not in rest and g not in rest


def test_groups_lag_once_json_and_watch(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    topic = topic_factory(names.topic, 1)
    before = time.time()
    produce(stack.bootstrap, topic, [(0, None, b"x")] * 3)
    g = names.group
    zk.create(zp.offset_path(g, topic, 0), b"1", makepath=True)
    base = ["groups", "lag", "--zookeeper", stack.zookeeper, "--group", g]
    assert main(base) == 0
    out = capsys.readouterr().out
    # One poll: the backlog's age is the message's own timestamp's.
    header, row = out.splitlines()
    assert header == "GROUP TOPIC PARTITION OFFSET LOG-END-OFFSET LAG TIME-LAG OWNER STATUS"
    assert re.fullmatch(rf"{g} {topic} 0 1 3 2 \d+\.\ds - OK", row), row
    assert main([*base, "--json"]) == 0
    [doc] = json.loads(capsys.readouterr().out)
    assert (doc["group"], doc["total_lag"], doc["status"], doc["members"]) == (g, 2, "OK", 0)
    [part] = doc["partitions"]
    age = part.pop("time_lag")
    assert part == {"topic": topic, "partition": 0, "offset": 1, "log_end_offset": 3,
                    "lag": 2, "owner": None, "status": "OK", "zookeeper_offset": 1,
                    "kafka_offset": None, "store": "zookeeper"}
    assert doc["offset_store"] == "zookeeper"
    assert 0 <= age <= time.time() - before + 1, age  # the broker's clock is this one
    assert doc["max_time_lag_s"] == age
    # --watch: a table a poll, each after a line saying when.
    argv = [sys.executable, "-m", "zkconsumer", *base, "--watch", "--interval", "0.2",
            "--window", "2"]
    with reaped(subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, cwd=REPO,
                                 env={**os.environ, "PYTHONPATH": REPO})) as proc:
        assert proc.stdout is not None
        polls = []
        for _ in range(3):
            lines = [proc.stdout.readline() for _ in range(4)]
            polls.append(lines)
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
    for n, (blank, head, header, _) in enumerate(polls, 1):
        assert blank == "\n"
        assert re.fullmatch(rf"every 0\.2 s, window 2: \S+ \(poll {n}\)\n", head), head
        assert header.startswith("GROUP TOPIC PARTITION")
    # No commit since: the full window of 2 says STOP from the second poll on.
    assert re.fullmatch(rf"{g} {topic} 0 1 3 2 \d+\.\ds - OK\n", polls[0][3]), polls[0]
    assert re.fullmatch(rf"{g} {topic} 0 1 3 2 \d+\.\ds - STOP\n", polls[2][3]), polls[2]


def test_the_grafana_dashboard_queries_metrics_the_exporter_serves() -> None:
    from zkconsumer.ops.exporter import _HELP

    path = os.path.join(REPO, "docs", "grafana", "zkconsumer-lag.json")
    with open(path, encoding="utf-8") as f:
        dashboard = json.load(f)
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    used = {m for e in exprs for m in re.findall(r"zkconsumer_[a-z_]+", e)}
    assert used and used <= set(_HELP), used - set(_HELP)
    assert dashboard["uid"] == "zkconsumer-lag"


def test_a_poll_reads_again_only_what_changed(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
) -> None:
    """Each poll read every znode of every group again (100,000 offsets took a minute)."""
    topic = topic_factory(names.topic, 5)
    g = names.group
    for p in range(5):
        zk.create(zp.offset_path(g, topic, p), b"0", makepath=True)
    monitor = LagMonitor()
    monitor.poll(zk, [g])
    cache = monitor.cache
    assert cache is not None
    first = cache.reads
    assert first >= 5
    monitor.poll(zk, [g])
    assert cache.reads == first  # nothing changed, nothing read
    zk.set(zp.offset_path(g, topic, 3), b"1")
    wait_until(lambda: cache.changed("get", zp.offset_path(g, topic, 3)), 10, "the watch")
    [group] = monitor.poll(zk, [g])
    assert cache.reads == first + 1
    assert [p.offset for p in group.partitions] == [0, 0, 0, 1, 0]
    # A partition committed for the first time: its topic's child list, then the offset.
    zk.create(zp.offset_path(g, topic, 7), b"2")
    wait_until(lambda: cache.changed("children", zp.offsets_topic_dir(g, topic)), 10,
               "the child watch")
    [group] = monitor.poll(zk, [g])
    assert cache.reads == first + 1 + 2
    assert group.partitions[-1].partition == 7 and group.partitions[-1].offset == 2


def _run_cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "zkconsumer", *argv], capture_output=True,
                          text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": REPO},
                          timeout=120)


def test_an_unreachable_broker_is_unknown_lag_never_0(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
) -> None:
    topic = topic_factory(names.topic, 1)
    produce(stack.bootstrap, topic, [(0, None, b"x")] * 5)
    g = names.group
    zk.create(zp.offset_path(g, topic, 0), b"1", makepath=True)
    nowhere = ["--zookeeper", stack.zookeeper, "--bootstrap-server", "127.0.0.1:1"]

    # The summary of every group: the group 4 behind is not "0 OK", and says why once.
    done = _run_cli("groups", "lag", *nowhere)
    [row] = [line for line in done.stdout.splitlines() if line.startswith(f"{g} ")]
    assert row == f"{g} 0 1 1 ? ? ? zookeeper UNKNOWN", done.stdout
    assert done.returncode == 1, done.stderr
    warnings = [line for line in done.stderr.splitlines() if "log end" in line]
    assert len(warnings) == 1, done.stderr
    assert warnings[0].startswith("zkconsumer groups lag: warning: log end offsets unknown"), \
        warnings
    assert "127.0.0.1:1" in warnings[0]

    # Per partition: the log end and the lag are "?".
    done = _run_cli("groups", "lag", *nowhere, "--group", g)
    assert done.stdout.splitlines()[1:] == [f"{g} {topic} 0 1 ? ? ? - UNKNOWN"], done.stdout
    assert done.returncode == 1

    done = _run_cli("groups", "lag", *nowhere, "--group", g, "--json")
    [doc] = json.loads(done.stdout)
    assert (doc["total_lag"], doc["max_lag"], doc["status"]) == (None, None, "UNKNOWN")
    assert "127.0.0.1:1" in doc["status_reason"]
    assert doc["partitions"][0]["lag"] is None

    # The exporter: no lag sample for the group (absent, not 0), an UNKNOWN status.
    done = _run_cli("exporter", *nowhere, "--group", g, "--once")
    assert done.returncode == 1, done.stderr
    got = samples(done.stdout)
    assert ("zkconsumer_group_lag", (("group", g),)) not in got
    assert ("zkconsumer_group_max_lag", (("group", g),)) not in got
    assert got[("zkconsumer_group_status_code", (("group", g),))] == STATUS_CODES["UNKNOWN"]
    assert got[("zkconsumer_group_status", (("group", g), ("status", "UNKNOWN")))] == 1
    assert got[("zkconsumer_exporter_log_end_up", ())] == 0
    assert len([x for x in done.stderr.splitlines() if "log end" in x]) == 1, done.stderr

    # Served: said once, not at every poll.
    argv = [sys.executable, "-m", "zkconsumer", "exporter", *nowhere, "--group", g, "--port",
            "0", "--interval", "0.2"]
    with reaped(subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, cwd=REPO,
                                 env={**os.environ, "PYTHONPATH": REPO})) as proc:
        assert proc.stderr is not None
        port = re.search(r":(\d+)/metrics", proc.stderr.readline())
        assert port is not None

        def polls() -> float:
            with urllib.request.urlopen(f"http://127.0.0.1:{port.group(1)}/metrics",
                                        timeout=10) as answer:
                return samples(answer.read().decode())[("zkconsumer_exporter_polls_total", ())]

        wait_until(lambda: polls() >= 4, 60, "four polls")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        rest = proc.stderr.read().splitlines()
    assert len([x for x in rest if "log end" in x]) == 1, rest
    assert rest[0].startswith("zkconsumer exporter: warning: log end offsets unknown"), rest

    # With the brokers back, the lag is known again and the exit status 0.
    done = _run_cli("groups", "lag", "--zookeeper", stack.zookeeper, "--group", g)
    [row] = done.stdout.splitlines()[1:]
    assert re.fullmatch(rf"{g} {topic} 0 1 5 4 \d+\.\ds - OK", row), done.stdout
    assert done.returncode == 0, done.stderr
    assert "log end" not in done.stderr


def test_a_partition_without_a_log_end_makes_the_group_unknown() -> None:
    from zkconsumer.ops.exporter import GroupLag, PartitionLag

    known = PartitionLag("t", 0, 1, 5, 4, None, "OK")
    unknown = PartitionLag("t", 1, 1, None, None, None, "UNKNOWN")
    no_offset = PartitionLag("t", 2, None, 7, None, None, "NOTFOUND")
    g = GroupLag("g", 0, [known, unknown, no_offset], "UNKNOWN", "log end unknown")
    assert (g.total_lag, g.max_lag) == (None, None)
    fine = GroupLag("g", 0, [known, no_offset], "OK")
    assert (fine.total_lag, fine.max_lag) == (4, 4)
    assert group_status(["OK", "UNKNOWN", "STALL"]) == "UNKNOWN"


def test_library_warnings_read_as_the_commands_own_unless_verbose(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
) -> None:
    """The library's warnings were timestamped log lines (``2026-12-01 ... WARNING
    MainThread zkconsumer.ops.exporter: left out: ...``) between the command's own."""
    topic = topic_factory(names.topic, 1)
    g = names.group
    zk.create(zp.offset_path(g, topic, 0), b"not a number", makepath=True)
    base = ["groups", "lag", "--zookeeper", stack.zookeeper, "--group", g]
    done = _run_cli(*base)
    [line] = [x for x in done.stderr.splitlines() if "left out" in x]
    assert line.startswith("zkconsumer groups lag: warning: left out: "), done.stderr
    assert f"/consumers/{g}/offsets/{topic}/0" in line
    done = _run_cli("-v", *base)
    [line] = [x for x in done.stderr.splitlines() if "left out" in x]
    assert re.match(r"\d{4}-\d\d-\d\d .* WARNING MainThread zkconsumer\.ops\.exporter: left "
                    r"out: ", line), line


def test_time_lag_from_the_log_ends_seen_at_each_poll(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
) -> None:
    """Messages produced between two polls are dated between them: the time lag of a group
    committed in their midst is within one poll interval of the truth, and never 0 before
    it can be told."""
    topic = topic_factory(names.topic, 1)
    g = names.group
    produce(stack.bootstrap, topic, [(0, None, b"old")] * 5)
    zk.create(zp.offset_path(g, topic, 0), b"5", makepath=True)
    clock = [1000.0]
    # The timeline alone (a broker that gives no message's timestamp).
    monitor = LagMonitor(clock=lambda: clock[0], message_times=lambda zk, positions: {})
    [group] = monitor.poll(zk, [g])
    assert group.partitions[0].time_lag == 0.0 and group.max_time_lag == 0.0  # caught up
    # 10 messages appended between the polls at t=1000 and t=1010.
    produced = time.time()
    produce(stack.bootstrap, topic, [(0, None, b"new")] * 10)
    clock[0] = 1010.0
    monitor.poll(zk, [g])
    zk.set(zp.offset_path(g, topic, 0), b"8")  # 3 of the new ones consumed
    wait_until(lambda: monitor.poll(zk, [g])[0].partitions[0].offset == 8, 10, "the commit")
    clock[0] = 1030.0
    [group] = monitor.poll(zk, [g])
    # Offset 8 was appended in (1000, 1010]: its age at 1030 is in [20, 30).
    age = group.partitions[0].time_lag
    assert age is not None and 20.0 <= age < 30.0, age
    assert group.max_time_lag == age
    rendered = monitor.render().decode()
    assert f'zkconsumer_group_max_time_lag_seconds{{group="{g}"}} {age}' in rendered
    # A backlog older than the first poll, with no rate yet: no sample, not 0.
    fresh = LagMonitor(clock=lambda: clock[0], message_times=lambda zk, positions: {})
    [group] = fresh.poll(zk, [g])
    assert group.partitions[0].time_lag is None and group.max_time_lag is None
    assert f'zkconsumer_group_max_time_lag_seconds{{group="{g}"}}' not in fresh.render().decode()
    # What the timeline cannot date, the broker can: the message's own timestamp.
    real = LagMonitor()
    [group] = real.poll(zk, [g])
    age = group.partitions[0].time_lag
    assert age is not None and 0 <= age <= time.time() - produced + 1, age


def test_the_broker_is_asked_once_per_offset_and_a_failure_is_not_retried(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
) -> None:
    topic = topic_factory(names.topic, 2)
    produce(stack.bootstrap, topic, [(0, None, b"a")] * 3 + [(1, None, b"b")] * 3)
    g = names.group
    zk.create(zp.offset_path(g, topic, 0), b"1", makepath=True)
    zk.create(zp.offset_path(g, topic, 1), b"3", makepath=True)  # caught up: nothing asked
    asked: list[dict[TopicPartition, int]] = []

    def times(_: Any, positions: Mapping[TopicPartition, int]) -> dict[TopicPartition, float]:
        asked.append(dict(positions))
        return {}  # as for a message deleted by retention

    monitor = LagMonitor(message_times=times)
    for _ in range(3):
        [group] = monitor.poll(zk, [g])
    assert asked == [{TopicPartition(topic, 0): 1}]
    assert group.partitions[0].time_lag is None  # unknown: not 0
    zk.set(zp.offset_path(g, topic, 0), b"2")
    wait_until(lambda: monitor.poll(zk, [g])[0].partitions[0].offset == 2, 10, "the commit")
    assert asked[-1] == {TopicPartition(topic, 0): 2}


def test_message_timestamps_skip_a_message_deleted_by_retention(
    stack: StackInfo, names: Any, topic_factory: Any,
) -> None:
    from tests.support import delete_records
    from zkconsumer.broker.clients import message_timestamps

    topic = topic_factory(names.topic, 2)
    before = time.time()
    produce(stack.bootstrap, topic, [(0, None, b"a")] * 5 + [(1, None, b"b")] * 5)
    delete_records(stack.bootstrap, topic, {0: 3})  # offsets 0 to 2 of partition 0 gone
    found = message_timestamps({TopicPartition(topic, 0): 1, TopicPartition(topic, 1): 2},
                               bootstrap_servers=stack.bootstrap)
    assert set(found) == {TopicPartition(topic, 1)}, found
    assert before - 1 <= found[TopicPartition(topic, 1)] <= time.time() + 1
