"""The operator subcommands against the real stack: exact JSON, exact failures.

Every failure case asserts the exit status (2), the one-line message on stderr and that
nothing was written to ZooKeeper.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError, NoNodeError
from kazoo.security import make_digest_acl_credential

from tests.support import (
    NullFetcher,
    StackInfo,
    create_topic,
    group_owners,
    offset_znodes,
    produce,
    reaped,
    self_signed_cert,
    started_zk,
    wait_until,
)
from zkconsumer import ConsumerConfig, TopicPartition, ZookeeperConsumerConnector
from zkconsumer.cli import main
from zkconsumer.consumer.metrics import ConsumerMetrics
from zkconsumer.ops.brokers import find_bootstrap
from zkconsumer.zk import paths as zp
from zkconsumer.zk.session import kazoo_security_kwargs

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# --------------------------------------------------------------------------------------
# helpers


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    rc, out, err = run(capsys, *argv, "--json")
    assert rc == 0, err
    return json.loads(out)


def fails(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run a command that must fail with status 2 and one line on stderr; return the line."""
    rc, out, err = run(capsys, *argv)
    assert rc == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def seed(zk: KazooClient, group: str, offsets: dict[tuple[str, int], int]) -> None:
    for (topic, partition), offset in offsets.items():
        zk.create(zp.offset_path(group, topic, partition), zp.encode_offset(offset),
                  makepath=True)


def tree(zk: KazooClient, path: str) -> dict[str, bytes]:
    """Every znode under ``path`` (included) with its data: to assert nothing changed."""
    out: dict[str, bytes] = {}
    try:
        data, _ = zk.get(path)
    except NoNodeError:
        return out
    out[path] = data
    for child in zk.get_children(path):
        out.update(tree(zk, f"{path}/{child}"))
    return out


def fake_member(zk: KazooClient, group: str, consumer_id: str, topic: str) -> None:
    """Register an ids znode as a member would (ephemeral, on the test's session)."""
    reg = zp.ConsumerRegistration.static({topic: 1}, int(time.time() * 1000))
    zk.create(zp.id_path(group, consumer_id), reg.encode(), ephemeral=True, makepath=True)


def config(stack: StackInfo, group: str, **extra: object) -> ConsumerConfig:
    props: dict[str, object] = {
        "zookeeper.connect": stack.zookeeper,
        "group.id": group,
        "zookeeper.session.timeout.ms": 6000,
        "auto.commit.enable": False,
        "auto.offset.reset": "smallest",
        "rebalance.backoff.ms": 200,
        "consumer.timeout.ms": 15000,
    }
    props.update({k.replace("_", "."): v for k, v in extra.items()})
    return ConsumerConfig(props)


@contextmanager
def connector(cfg: ConsumerConfig, null: bool = False) -> Iterator[ZookeeperConsumerConnector]:
    c = ZookeeperConsumerConnector(cfg, fetcher_factory=NullFetcher if null else None)
    try:
        yield c
    finally:
        c.shutdown()


def take(stream: Any, n: int) -> list[Any]:
    it = iter(stream)
    return [next(it) for _ in range(n)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --------------------------------------------------------------------------------------
# groups describe against a running group


def test_describe_matches_a_running_group(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    topic = topic_factory(names.topic, 4)
    g = names.group
    counts = {0: 5, 1: 3, 2: 0, 3: 2}
    produce(stack.bootstrap, topic,
            [(p, f"k{p}".encode(), f"v{p}-{i}".encode()) for p, n in counts.items()
             for i in range(n)])
    zkc = ["--zookeeper", stack.zookeeper]
    with connector(config(stack, g, consumer_id="a")) as a, \
            connector(config(stack, g, consumer_id="b")) as b:
        sa = a.create_message_streams({topic: 1})[topic]
        sb = b.create_message_streams({topic: 5})[topic]
        # Range over 6 threads sorted as strings: the first four get one partition each.
        expected_owners = {0: f"{g}_a-0", 1: f"{g}_b-0", 2: f"{g}_b-1", 3: f"{g}_b-2"}
        wait_until(lambda: group_owners(zk, g, topic) == expected_owners
                   and len(a.owned_partitions()) == 1 and len(b.owned_partitions()) == 3,
                   30, "the two members settled")
        owned = {**a.owned_partitions(), **b.owned_partitions()}
        assert {tp.partition: th for tp, th in owned.items()} == expected_owners

        got = take(sa[0], 5) + take(sb[0], 3) + take(sb[2], 2)
        assert sorted((m.partition, m.offset) for m in got) == sorted(
            (p, i) for p, n in counts.items() for i in range(n))
        infos = {**a.partition_infos(), **b.partition_infos()}
        # Partition 2 is empty: its consumed offset is reset to the log start (0).
        wait_until(lambda: all(i.consumed_offset >= 0 for i in infos.values()), 20,
                   "every consumed offset known")
        a.commit_offsets()
        b.commit_offsets()
        produced_late = time.time()
        produce(stack.bootstrap, topic, [(0, b"k0", f"late-{i}".encode()) for i in range(3)])

        rows = run_json(capsys, "groups", "describe", *zkc, "--group", g)
        # The time lag: the age of the message at the offset (a late one), 0 caught up,
        # null for a row without a partition.
        ages = [r.pop("time_lag") for r in rows]
        assert 0 <= ages[0] <= time.time() - produced_late + 1, ages
        assert ages[1:] == [0.0, 0.0, 0.0, None, None]
        idle = {"group": g, "topic": None, "partition": None, "offset": None,
                "log_end_offset": None, "lag": None, "offset_source": None,
                "zookeeper_offset": None, "kafka_offset": None}
        # Kafka was asked and holds no offset of the group: every offset is ZooKeeper's.
        zk_only = {"offset_source": "zookeeper", "kafka_offset": None}
        assert rows == [
            {"group": g, "topic": topic, "partition": 0, "offset": 5, "log_end_offset": 8,
             "lag": 3, "owner": f"{g}_a-0", **zk_only, "zookeeper_offset": 5},
            {"group": g, "topic": topic, "partition": 1, "offset": 3, "log_end_offset": 3,
             "lag": 0, "owner": f"{g}_b-0", **zk_only, "zookeeper_offset": 3},
            {"group": g, "topic": topic, "partition": 2, "offset": 0, "log_end_offset": 0,
             "lag": 0, "owner": f"{g}_b-1", **zk_only, "zookeeper_offset": 0},
            {"group": g, "topic": topic, "partition": 3, "offset": 2, "log_end_offset": 2,
             "lag": 0, "owner": f"{g}_b-2", **zk_only, "zookeeper_offset": 2},
            {**idle, "owner": f"{g}_b-3"},
            {**idle, "owner": f"{g}_b-4"},
        ]
        # The committed offsets are what the connectors consumed.
        assert {tp.partition: info.consumed_offset for tp, info in infos.items()} == {
            r["partition"]: r["offset"] for r in rows[:4]}

        members = run_json(capsys, "groups", "describe", *zkc, "--group", g, "--members")
        for m in members:
            assert m.pop("consumer_id") in (f"{g}_a", f"{g}_b")
        assert members == [
            {"group": g, "pattern": "static", "subscription": {topic: 1},
             "threads": [f"{g}_a-0"], "owned_partitions": 1},
            {"group": g, "pattern": "static", "subscription": {topic: 5},
             "threads": [f"{g}_b-{i}" for i in range(5)], "owned_partitions": 3},
        ]

        rc, out, err = run(capsys, "groups", "describe", *zkc, "--group", g)
        assert rc == 0 and err == ""
        lines = [line.rstrip() for line in out.splitlines()]
        assert lines[0] == f"Group {g}: 2 registered members, total lag 3"
        assert lines[1].split() == ["TOPIC", "PARTITION", "OFFSET", "LOG-END-OFFSET", "LAG",
                                    "OWNER", "TIME-LAG"]
        # Piped: one space between cells, no rule, no padding, no TOTAL row (the first line
        # has the total).
        assert lines[2].startswith(f"{topic} 0 5 8 3 {g}_a-0 ") and lines[2].endswith("s")
        assert lines[3] == f"{topic} 1 3 3 0 {g}_b-0 0.0s"
        assert not [line for line in lines if line.startswith("TOTAL")]
        assert f"Threads owning no partition: {g}_b-3, {g}_b-4" in lines

        # The metrics compute lag with the same function: same inputs, same answer.
        metrics = ConsumerMetrics("c")
        for r in rows[:4]:
            metrics.update_lag(topic, r["partition"], r["offset"], r["log_end_offset"])
        assert metrics.snapshot()["ConsumerLag"] == {topic: {0: 3, 1: 0, 2: 0, 3: 0}}
        assert metrics.snapshot()["MaxLag"] == 3

        # Deleting the group is refused while it has members; nothing is deleted.
        before = tree(zk, zp.group_dir(g))
        line = fails(capsys, "groups", "delete", *zkc, "--group", g)
        assert line == (f"zkconsumer groups delete: refusing to delete group '{g}': group "
                        f"'{g}' has 2 registered members ({g}_a, {g}_b)")
        assert tree(zk, zp.group_dir(g)) == before


# --------------------------------------------------------------------------------------
# groups list / delete


def test_groups_list_and_delete(
    stack: StackInfo, zk: KazooClient, names: Any, capsys: pytest.CaptureFixture[str],
) -> None:
    zkc = ["--zookeeper", stack.zookeeper]
    g, h = names("ga"), names("gb")
    t1, t2 = names("t1"), names("t2")
    seed(zk, g, {(t1, 0): 4, (t1, 1): 7, (t2, 0): 1})
    seed(zk, h, {(t1, 0): 2})
    fake_member(zk, h, f"{h}_x", t1)

    listed = [r for r in run_json(capsys, "groups", "list", *zkc)
              if r["group"] in (g, h)]
    assert listed == [{"group": g, "members": 0}, {"group": h, "members": 1}]

    before = tree(zk, zp.group_dir(h))
    line = fails(capsys, "groups", "delete", *zkc, "--group", h)
    assert line == (f"zkconsumer groups delete: refusing to delete group '{h}': group '{h}' has 1 "
                    f"registered member ({h}_x)")
    line = fails(capsys, "groups", "delete", *zkc, "--group", h, "--topic", t1)
    assert "refusing to delete topic" in line
    assert tree(zk, zp.group_dir(h)) == before

    line = fails(capsys, "groups", "delete", *zkc, "--group", g, "--topic", names("nope"))
    assert line == (f"zkconsumer groups delete: group '{g}' has no offsets or owners for topic "
                    f"'{names('nope')}'")

    rc, out, _ = run(capsys, "groups", "delete", *zkc, "--group", g, "--topic", t1)
    assert rc == 0 and out == f"deleted topic {t1} of group {g}: 3 znodes\n"
    assert sorted(tree(zk, zp.offsets_dir(g))) == [
        zp.offsets_dir(g), zp.offsets_topic_dir(g, t2), zp.offset_path(g, t2, 0)]

    rc, out, _ = run(capsys, "groups", "delete", *zkc, "--group", g)
    assert rc == 0 and out == f"deleted group {g}: 4 znodes\n"
    assert zk.exists(zp.group_dir(g)) is None

    # Gone, and one letter away from group h: named as the one likely meant.
    line = fails(capsys, "groups", "delete", *zkc, "--group", g)
    assert line == (f"zkconsumer groups delete: group '{g}' not found in ZooKeeper "
                    f"(no /consumers/{g}) (did you mean {h!r}?)")
    line = fails(capsys, "groups", "describe", *zkc, "--group", g)
    assert line == (f"zkconsumer groups describe: group '{g}' not found in ZooKeeper "
                    f"(no /consumers/{g}) (did you mean {h!r}?)")
    other = names("other")
    assert fails(capsys, "groups", "describe", *zkc, "--group", other) == (
        f"zkconsumer groups describe: group '{other}' not found in ZooKeeper "
        f"(no /consumers/{other})")
    assert fails(capsys, "groups", "describe", *zkc, "--group", "a/b") == (
        "zkconsumer groups describe: bad --group: group must not contain '/': 'a/b'")


# --------------------------------------------------------------------------------------
# offsets export / import


def test_export_import_round_trip_and_bad_files(
    stack: StackInfo, zk: KazooClient, names: Any, capsys: pytest.CaptureFixture[str],
    tmp_path: Any,
) -> None:
    zkc = ["--zookeeper", stack.zookeeper]
    g1, g2 = names("e1"), names("e2")
    ta, tb = names("ta"), names("tb")
    seed(zk, g1, {(ta, 10): 3, (ta, 2): 40, (tb, 0): 0})
    seed(zk, g2, {(tb, 1): 123456789012})
    first = tmp_path / "first.txt"
    rc, out, _ = run(capsys, "offsets", "export", *zkc, "--group", g2, "--group", g1,
                     "--output", str(first))
    assert rc == 0 and out == f"exported 4 offsets of 2 groups to {first}\n"
    expected_lines = [
        f"/consumers/{g1}/offsets/{ta}/2:40",
        f"/consumers/{g1}/offsets/{ta}/10:3",
        f"/consumers/{g1}/offsets/{tb}/0:0",
        f"/consumers/{g2}/offsets/{tb}/1:123456789012",
    ]
    assert first.read_text() == "".join(f"{line}\n" for line in expected_lines)
    assert run_json(capsys, "offsets", "export", *zkc, "--group", g2) == [
        {"group": g2, "topic": tb, "partition": 1, "offset": 123456789012}]
    rc, out, _ = run(capsys, "offsets", "export", *zkc, "--group", g1)
    assert rc == 0 and out == "".join(f"{line}\n" for line in expected_lines[:3])

    for g in (g1, g2):
        assert run(capsys, "groups", "delete", *zkc, "--group", g)[0] == 0
    rc, out, _ = run(capsys, "offsets", "import", *zkc, "--input", str(first))
    assert rc == 0
    assert out == ("imported 4 offsets of 2 groups in one transaction "
                   "(created 4, updated 0, unchanged 0)\n")
    second = tmp_path / "second.txt"
    assert run(capsys, "offsets", "export", *zkc, "--group", g1, "--group", g2,
               "--output", str(second))[0] == 0
    assert second.read_bytes() == first.read_bytes()

    # Malformed lines: every one reported with its line number, nothing written.
    g3 = names("e3")
    bad = tmp_path / "bad.txt"
    bad.write_text(f"/consumers/{g3}/offsets/{ta}/0:5\n"
                   f"/consumers/{g3}/offsets/{ta}/x:5\n"
                   "\n"
                   f"/consumers/{g3}/owners/{ta}/1:5\n"
                   f"/consumers/{g1}/offsets/{ta}/2:41\n"
                   f"/consumers/{g3}/offsets/{ta}/0:6\n")
    before = tree(zk, zp.CONSUMERS + "/" + g1)
    rc, out, err = run(capsys, "offsets", "import", *zkc, "--input", str(bad))
    assert (rc, out) == (2, "")
    lines = err.splitlines()
    assert lines[0] == f"zkconsumer offsets import: {bad}: 3 malformed lines, nothing written"
    assert lines[1].startswith(f"{bad}:2: not /consumers/<group>/offsets/<topic>/<partition>:"
                               "<offset>")
    assert lines[2].startswith(f"{bad}:4: ")
    assert lines[3] == (f"{bad}:6: /consumers/{g3}/offsets/{ta}/0 set again (line 1 sets 5, "
                        "this line 6)")
    assert len(lines) == 4
    assert zk.exists(zp.group_dir(g3)) is None
    assert tree(zk, zp.group_dir(g1)) == before

    # A group with a registered member is refused unless --force; nothing written.
    fake_member(zk, g1, f"{g1}_m", ta)
    change = tmp_path / "change.txt"
    change.write_text(f"/consumers/{g1}/offsets/{ta}/2:41\n/consumers/{g3}/offsets/{ta}/0:1\n")
    line = fails(capsys, "offsets", "import", *zkc, "--input", str(change))
    assert line == (f"zkconsumer offsets import: refusing to import offsets: group '{g1}' has 1 "
                    f"registered member ({g1}_m); pass --force to write anyway")
    assert zk.get(zp.offset_path(g1, ta, 2))[0] == b"40"
    assert zk.exists(zp.group_dir(g3)) is None
    rc, out, _ = run(capsys, "offsets", "import", *zkc, "--input", str(change), "--force")
    assert rc == 0 and "(created 1, updated 1, unchanged 0)" in out
    assert zk.get(zp.offset_path(g1, ta, 2))[0] == b"41"
    assert zk.get(zp.offset_path(g3, ta, 0))[0] == b"1"

    # Conflicting flags and unknown groups.
    assert fails(capsys, "offsets", "export", *zkc, "--output", "-", "--json") == (
        "zkconsumer offsets export: --json and --output - both want stdout; write the lines to a "
        "file with --output FILE")
    assert fails(capsys, "offsets", "export", *zkc, "--group", names("none")) == (
        f"zkconsumer offsets export: group '{names('none')}' not found in ZooKeeper "
        f"(no /consumers/{names('none')})")
    assert fails(capsys, "offsets", "import", *zkc, "--input", str(tmp_path / "missing")) == (
        f"zkconsumer offsets import: cannot read {tmp_path / 'missing'}: No such file or directory")


# --------------------------------------------------------------------------------------
# a group protected by zookeeper.acl: credentials and ACL from the environment


def acl_set(zk: KazooClient, path: str) -> set[tuple[str, str, int]]:
    """(scheme, user or id, perms) of each ACL entry (the digest hash is hidden from
    unauthenticated clients)."""
    acls, _ = zk.get_acls(path)
    return {(a.id.scheme, a.id.id.split(":")[0], a.perms) for a in acls}


def test_offsets_import_into_an_acl_protected_group(
    stack: StackInfo, zk: KazooClient, names: Any, capsys: pytest.CaptureFixture[str],
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    zkc = ["--zookeeper", stack.zookeeper]
    g, t, u = names.group, names("ta"), names("tb")
    user, password = "zkc-tools", "tools-s3cret"
    auth = f"digest:{user}:{password}"
    acl = f"digest:{make_digest_acl_credential(user, password)}:cdrwa,world:anyone:r"
    protected = {("digest", user, 31), ("world", "anyone", 1)}
    # The group as a connector with zookeeper.auth/acl leaves it: every znode protected.
    # /consumers itself stays open (created first, without an ACL), as for other groups.
    zk.ensure_path(zp.CONSUMERS)
    owner = KazooClient(hosts=stack.zookeeper, timeout=10.0, **kazoo_security_kwargs(
        config(stack, g, zookeeper_auth=auth, zookeeper_acl=acl)))
    owner.start(timeout=15)
    try:
        owner.create(zp.offset_path(g, t, 0), b"5", makepath=True)
        owner.ensure_path(zp.ids_dir(g))
        assert acl_set(zk, zp.group_dir(g)) == protected
        lines = tmp_path / "offsets.txt"
        lines.write_text(f"{zp.offset_path(g, t, 0)}:7\n{zp.offset_path(g, t, 1)}:3\n"
                         f"{zp.offset_path(g, u, 0)}:1\n")
        before = tree(zk, zp.group_dir(g))

        # Without credentials, or with ones the ACL does not grant: one clear line, the
        # path, the variable to set; nothing written.
        monkeypatch.delenv("ZKCONSUMER_ZOOKEEPER_AUTH", raising=False)
        monkeypatch.delenv("ZKCONSUMER_ZOOKEEPER_ACL", raising=False)
        # (The guard's ids znode is made again with its own ACL, which such a client sees
        # redacted: refused before ZooKeeper would refuse the delete.)
        refused = (f"zkconsumer offsets import: cannot re-create {zp.ids_dir(g)} (the guard "
                   f"against members registering meanwhile) with the ACL of {zp.ids_dir(g)}: "
                   "reading it in full needs the ADMIN permission there; set "
                   "ZKCONSUMER_ZOOKEEPER_AUTH to credentials that have it, or "
                   "ZKCONSUMER_ZOOKEEPER_ACL to the ACL the znodes should get; nothing written")
        assert fails(capsys, "offsets", "import", *zkc, "--input", str(lines)) == refused
        monkeypatch.setenv("ZKCONSUMER_ZOOKEEPER_AUTH", f"digest:{user}:wrong-password")
        assert fails(capsys, "offsets", "import", *zkc, "--input", str(lines)) == refused
        assert tree(zk, zp.group_dir(g)) == before

        # A malformed variable is refused by the config key's own check, secrets redacted.
        monkeypatch.setenv("ZKCONSUMER_ZOOKEEPER_AUTH", f"sasl:{user}:{password},sasl:x:y")
        line = fails(capsys, "offsets", "import", *zkc, "--input", str(lines))
        assert line == ("zkconsumer offsets import: ZKCONSUMER_ZOOKEEPER_AUTH: "
                        "zookeeper.auth='sasl:******,sasl:******' entry 2 is a second sasl "
                        "entry; a connection authenticates one SASL user")

        # With them: written, and what the tool creates carries ZKCONSUMER_ZOOKEEPER_ACL.
        monkeypatch.setenv("ZKCONSUMER_ZOOKEEPER_AUTH", auth)
        monkeypatch.setenv("ZKCONSUMER_ZOOKEEPER_ACL", acl)
        rc, out, err = run(capsys, "offsets", "import", *zkc, "--input", str(lines))
        # (The topics are names only: said, imported all the same.)
        assert rc == 0 and err.startswith("zkconsumer offsets import: warning: 3 offsets of "
                                          "topics not in /brokers/topics ("), err
        assert out == ("imported 3 offsets of 1 group in one transaction "
                       "(created 2, updated 1, unchanged 0)\n")
        assert password not in out
        assert [zk.get(zp.offset_path(g, topic, p))[0] for topic, p in ((t, 0), (t, 1), (u, 0))
                ] == [b"7", b"3", b"1"]
        for path in (zp.offset_path(g, t, 0), zp.offset_path(g, t, 1),
                     zp.offsets_topic_dir(g, u), zp.offset_path(g, u, 0)):
            assert acl_set(zk, path) == protected, path
        with pytest.raises(NoAuthError):
            zk.set(zp.offset_path(g, t, 1), b"0")
    finally:
        owner.delete(zp.group_dir(g), recursive=True)
        owner.stop()
        owner.close()


# --------------------------------------------------------------------------------------
# offsets reset


def test_reset_offsets(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    zkc = ["--zookeeper", stack.zookeeper]
    topic = topic_factory(names.topic, 2)
    g = names.group
    produce(stack.bootstrap, topic, [(0, None, b"a%d" % i) for i in range(3)])
    middle_ms = int(time.time() * 1000) + 1
    wait_until(lambda: time.time() * 1000 > middle_ms + 1, 5, "the clock to move on")
    produce(stack.bootstrap, topic, [(0, None, b"b0"), (0, None, b"b1"), (1, None, b"c0")])
    seed(zk, g, {(topic, 0): 1})

    def reset(to: str, *extra: str) -> Any:
        execute = [] if "--dry-run" in extra else ["--execute"]
        return run_json(capsys, "offsets", "reset", *zkc, "--group", g, "--topic", topic,
                        "--to", to, *extra, *execute)

    def row(p: int, old: int | None, new: int) -> dict[str, Any]:
        return {"group": g, "topic": topic, "partition": p, "old_offset": old, "offset": new}

    def committed() -> dict[int, int]:
        return {p: int(zk.get(zp.offset_path(g, topic, p))[0]) for p in (0, 1)}

    assert reset("latest", "--dry-run") == [row(0, 1, 5), row(1, None, 1)]
    assert zk.exists(zp.offset_path(g, topic, 1)) is None  # dry run: nothing written
    assert reset("latest") == [row(0, 1, 5), row(1, None, 1)]
    assert committed() == {0: 5, 1: 1}
    assert reset("earliest") == [row(0, 5, 0), row(1, 1, 0)]
    assert reset("4") == [row(0, 0, 4), row(1, 0, 1)]  # clamped to the log end of 1
    middle = datetime.fromtimestamp(middle_ms / 1000, tz=UTC).isoformat(timespec="milliseconds")
    assert reset(middle) == [row(0, 4, 3), row(1, 1, 0)]
    assert reset("2999-01-01T00:00:00+00:00") == [row(0, 3, 5), row(1, 0, 1)]
    assert committed() == {0: 5, 1: 1}

    # Refused while the group has a registered member, unless --force.
    fake_member(zk, g, f"{g}_m", topic)
    before = tree(zk, zp.group_dir(g))
    line = fails(capsys, "offsets", "reset", *zkc, "--group", g, "--topic", topic,
                 "--to", "earliest", "--execute")
    assert line == (f"zkconsumer offsets reset: refusing to reset offsets: group '{g}' has 1 "
                    f"registered member ({g}_m); stop it first or pass --force")
    assert tree(zk, zp.group_dir(g)) == before
    assert reset("earliest", "--force") == [row(0, 5, 0), row(1, 1, 0)]
    assert committed() == {0: 0, 1: 0}

    before = tree(zk, zp.group_dir(g))
    assert fails(capsys, "offsets", "reset", *zkc, "--group", g, "--topic", names("none"),
                 "--to", "earliest") == (
        f"zkconsumer offsets reset: topic '{names('none')}' not found in ZooKeeper "
        f"(no /brokers/topics/{names('none')})")
    assert fails(capsys, "offsets", "reset", *zkc, "--group", g, "--topic", topic,
                 "--to", "yesterday") == (
        "zkconsumer offsets reset: --to 'yesterday' is not earliest, latest, an offset or an "
        "ISO-8601 date-time (e.g. 2024-05-01T12:00:00Z)")
    # Dates the clock cannot hold, or before Kafka's timestamps (negative ones mean
    # latest/earliest to ListOffsets): one line, no traceback.
    assert fails(capsys, "offsets", "reset", *zkc, "--group", g, "--topic", topic,
                 "--to", "0001-01-01") == (
        "zkconsumer offsets reset: --to '0001-01-01' is out of range")
    assert fails(capsys, "offsets", "reset", *zkc, "--group", g, "--topic", topic,
                 "--to", "1969-12-31T00:00:00Z") == (
        "zkconsumer offsets reset: --to '1969-12-31T00:00:00Z' is before 1970, when Kafka "
        "timestamps begin")
    # (A group that does not exist yet is seeded: test_reset_seeds_a_group_not_there_yet.)
    dead = f"127.0.0.1:{free_port()}"
    assert fails(capsys, "offsets", "reset", *zkc, "--group", g, "--topic", topic,
                 "--to", "latest", "--force", "--bootstrap-server", dead) == (
        f"zkconsumer offsets reset: cannot reach any broker ({dead}: Connection refused)")
    assert tree(zk, zp.group_dir(g)) == before

    # describe without a broker: the offsets and owners, log ends and Kafka's offsets
    # unknown, warnings.
    rc, out, err = run(capsys, "groups", "describe", *zkc, "--group", g, "--json",
                       "--bootstrap-server", dead)
    assert rc == 0
    assert err == ("zkconsumer groups describe: warning: log end offsets unknown: cannot reach "
                   f"any broker ({dead}: Connection refused)\n"
                   "zkconsumer groups describe: warning: committed offsets in Kafka unknown, so "
                   "the offsets shown are ZooKeeper's only (a group committing to Kafka may be "
                   f"further on): cannot reach any broker ({dead}: Connection refused)\n"
                   "zkconsumer groups describe: warning: total lag unknown: lag unknown where "
                   "a partition has no committed offset or no known log end\n")
    assert [(r["partition"], r["offset"], r["log_end_offset"], r["lag"])
            for r in json.loads(out)] == [(0, 0, None, None), (1, 0, None, None),
                                          (None, None, None, None)]  # the member's idle thread


# --------------------------------------------------------------------------------------
# verify-rebalance


def test_verify_rebalance(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    zkc = ["--zookeeper", stack.zookeeper]
    topic = topic_factory(names.topic, 3)
    g = names.group
    with ExitStack() as stack_:
        a = stack_.enter_context(connector(config(stack, g, consumer_id="a"), null=True))
        b = stack_.enter_context(connector(config(stack, g, consumer_id="b"), null=True))
        a.create_message_streams({topic: 1})
        b.create_message_streams({topic: 1})
        owners = {0: f"{g}_a-0", 1: f"{g}_a-0", 2: f"{g}_b-0"}
        wait_until(lambda: group_owners(zk, g, topic) == owners, 20, "settled")

        rc, out, _ = run(capsys, "verify-rebalance", *zkc, "--group", g)
        assert (rc, out) == (0, f"rebalance succeeded for group '{g}': all 3 partitions of "
                                "1 topic owned by live threads\n")
        assert run_json(capsys, "verify-rebalance", *zkc, "--group", g) == [
            {"topic": topic, "partition": p, "owner": owners[p], "ok": True, "problem": None}
            for p in range(3)]

        # An owner znode naming a thread of a consumer that is gone.
        zk.set(zp.owner_path(g, topic, 2), zp.encode_owner(f"{g}_dead-0"))
        rc, out, _ = run(capsys, "verify-rebalance", *zkc, "--group", g)
        assert (rc, out) == (1, f"rebalance failed for group '{g}': 1 of 3 partitions wrong: "
                                f"{topic}:2: owner {g}_dead-0 is not a live thread subscribed "
                                f"to {topic}\n")
        # And a partition with no owner at all.
        zk.delete(zp.owner_path(g, topic, 2))
        rc, out, _ = run(capsys, "verify-rebalance", *zkc, "--group", g, "--json")
        assert rc == 1
        assert json.loads(out)[2] == {"topic": topic, "partition": 2, "owner": None,
                                      "ok": False, "problem": "no owner"}
    rc, out, _ = run(capsys, "verify-rebalance", *zkc, "--group", g)
    assert (rc, out) == (1, f"group '{g}' has no registered members\n")
    assert fails(capsys, "verify-rebalance", *zkc, "--group", names("none")) == (
        f"zkconsumer verify-rebalance: group '{names('none')}' not found in ZooKeeper "
        f"(no /consumers/{names('none')})")


# --------------------------------------------------------------------------------------
# bad input that needs no group


def test_unreachable_zookeeper_and_bad_flags(capsys: pytest.CaptureFixture[str]) -> None:
    address = f"127.0.0.1:{free_port()}"
    start = time.monotonic()
    line = fails(capsys, "groups", "list", "--zookeeper", address, "--connect-timeout", "1")
    assert time.monotonic() - start < 5
    assert line == f"zkconsumer groups list: cannot connect to ZooKeeper at {address}: " \
        "connection refused"
    line = fails(capsys, "console-consumer", "--zookeeper", address, "--topic", "t",
                 "--delete-consumer-offsets")
    assert line == ("zkconsumer console-consumer: --delete-consumer-offsets needs --group "
                    "(a throwaway group has no offsets to delete)")
    assert fails(capsys, "console-consumer", "--zookeeper", address, "--topic", "t",
                 "--property", "print.headers=true") == (
        "zkconsumer console-consumer: --property 'print.headers' is not known; known: "
        "print.key, print.value, print.timestamp, print.partition, print.offset, "
        "key.separator, line.separator")
    assert fails(capsys, "console-consumer", "--zookeeper", address, "--topic", "t",
                 "--max-messages", "0") == (
        "zkconsumer console-consumer: --max-messages must be >= 1, got 0")
    # argparse's own conflicts: usage and the error on stderr, exit status 2.
    with pytest.raises(SystemExit) as exc:
        main(["console-consumer", "--zookeeper", address, "--topic", "t", "--whitelist", "x"])
    assert exc.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_a_command_whose_zookeeper_goes_away_fails_in_one_line(
    tmp_path: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # kazoo's client reconnects for ever by default, and a request made meanwhile waits for
    # ever: a tool whose ZooKeeper went away mid-command hung instead of failing.
    import threading

    from zkconsumer.stack.local import running_stack
    from zkconsumer.zk import session

    with running_stack(tmp_path / "stack") as stack:
        real_connect = session.connect

        def connect_then_lose_zookeeper(*args: Any, **kwargs: Any) -> KazooClient:
            client = real_connect(*args, **kwargs)
            stack.stop("zookeeper")
            return client

        monkeypatch.setattr(session, "connect", connect_then_lose_zookeeper)
        result: list[tuple[int, str, str]] = []
        command = threading.Thread(target=lambda: result.append(run(
            capsys, "groups", "list", "--zookeeper", stack.zookeeper, "--connect-timeout", "2")),
            daemon=True)
        command.start()
        command.join(60)
        assert not command.is_alive(), "the command waited for ever for ZooKeeper"
    rc, _, err = result[0]
    assert rc == 2
    assert err.strip().startswith(
        f"zkconsumer groups list: ZooKeeper at {stack.zookeeper} failed: Connection"), err
    assert len(err.strip().splitlines()) == 1, err


# --------------------------------------------------------------------------------------
# console-consumer


def _console_groups(zk: KazooClient) -> set[str]:
    if not zk.exists(zp.CONSUMERS):  # a fresh stack, this test run alone
        return set()
    return {g for g in zk.get_children(zp.CONSUMERS) if g.startswith("console-consumer-")}


def _cli(*argv: str) -> list[str]:
    return [sys.executable, "-m", "zkconsumer", *argv]


def test_console_consumer(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    topic = topic_factory(names.topic, 2)
    produce(stack.bootstrap, topic,
            [(0, b"k0", b"a0"), (0, b"k1", b"a1"), (0, None, b"a2"), (1, b"k3", b"b0"),
             (1, b"k4", b"b1")])
    zkc = ["--zookeeper", stack.zookeeper]
    before = _console_groups(zk)

    # --timeout-ms ends cleanly; the throwaway group is deleted.
    proc = subprocess.run(
        _cli("console-consumer", *zkc, "--topic", topic, "--from-beginning",
             "--timeout-ms", "3000", "--property", "print.key=true"),
        cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [x for x in lines if x.endswith(("a0", "a1", "a2"))] == ["k0\ta0", "k1\ta1",
                                                                    "null\ta2"]
    assert sorted(lines) == sorted(["k0\ta0", "k1\ta1", "null\ta2", "k3\tb0", "k4\tb1"])
    assert proc.stderr.splitlines()[-1] == "Processed a total of 5 messages"
    assert _console_groups(zk) == before

    # --max-messages exits with messages still available; a named group keeps its offsets.
    g = names.group
    proc = subprocess.run(
        _cli("console-consumer", *zkc, "--whitelist", f" '{topic}' ", "--group", g,
             "--from-beginning", "--max-messages", "2"),
        cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.splitlines()) == 2
    assert set(proc.stdout.splitlines()) <= {"a0", "a1", "a2", "b0", "b1"}
    exported = run_json(capsys, "offsets", "export", *zkc, "--group", g)
    assert sum(e["offset"] for e in exported) == 2

    # Reusing it from the beginning is refused (nothing written) unless offsets are deleted.
    before_tree = tree(zk, zp.group_dir(g))
    line = fails(capsys, "console-consumer", *zkc, "--topic", topic, "--group", g,
                 "--from-beginning")
    assert line == (f"zkconsumer console-consumer: found previous offset information for "
                    f"group {g}; pass --delete-consumer-offsets to delete it, or leave out "
                    "--from-beginning")
    assert tree(zk, zp.group_dir(g)) == before_tree
    rc, out, err = run(capsys, "console-consumer", *zkc, "--topic", topic, "--group", g,
                       "--from-beginning", "--delete-consumer-offsets", "--max-messages", "5")
    assert rc == 0, err
    assert sorted(out.splitlines()) == ["a0", "a1", "a2", "b0", "b1"]
    assert sorted(e["offset"] for e in run_json(capsys, "offsets", "export", *zkc, "--group",
                                                g)) == [2, 3]

    # A topic not there yet is waited for, as the legacy tool did (it exited with status 2).
    rc, out, err = run(capsys, "console-consumer", *zkc, "--topic", names("none"),
                       "--timeout-ms", "300")
    assert (rc, out) == (0, "")
    assert err == (f"zkconsumer console-consumer: topic {names('none')} does not exist yet (no "
                   f"/brokers/topics/{names('none')}); waiting for it to be created\n"
                   "Processed a total of 0 messages\n")
    assert _console_groups(zk) == before


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_console_consumer_sigterm_deletes_its_group(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any, signum: int,
    status: int,
) -> None:
    """SIGTERM ends it as Ctrl-C does (the throwaway group deleted), with the status a shell
    gives a process it killed: 128 + 15 (it was 130, Ctrl-C's)."""
    topic = topic_factory(names.topic, 1)
    produce(stack.bootstrap, topic, [(0, None, b"first")])
    before = _console_groups(zk)
    with reaped(subprocess.Popen(
            _cli("console-consumer", "--zookeeper", stack.zookeeper, "--topic", topic,
                 "--from-beginning"),
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "first\n"
        (group,) = _console_groups(zk) - before
        assert zk.get_children(zp.ids_dir(group)) != []
        proc.send_signal(signum)
        assert proc.wait(timeout=60) == status
    assert proc.stderr is not None
    assert proc.stderr.read().splitlines()[-1] == "Processed a total of 1 message"
    assert zk.exists(zp.group_dir(group)) is None


def test_console_consumer_deletes_its_group_after_a_zookeeper_outage(tmp_path: Any) -> None:
    """The tool's own client stops reconnecting after --connect-timeout; the consumer runs
    on through a longer outage, and its throwaway group is still deleted at exit."""
    from zkconsumer.stack.local import running_stack

    with running_stack(tmp_path / "stack") as private:
        with started_zk(private.zookeeper) as zk:
            create_topic(private.bootstrap, "t", 1)
            produce(private.bootstrap, "t", [(0, None, b"first")])
            wait_until(lambda: zk.exists(zp.topic_path("t")), 30, "the topic registered")
            with reaped(subprocess.Popen(
                    _cli("console-consumer", "--zookeeper", private.zookeeper, "--topic", "t",
                         "--from-beginning", "--connect-timeout", "1"),
                    cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    text=True)) as proc:
                assert proc.stdout is not None
                assert proc.stdout.readline() == "first\n"
                (group,) = _console_groups(zk)
                private.stop("zookeeper")
                time.sleep(3)  # the outage itself: longer than --connect-timeout
                private.start("zookeeper")  # the same port and data
                # Handed out only with ZooKeeper back: the consumer is connected again.
                produce(private.bootstrap, "t", [(0, None, b"second")])
                assert proc.stdout.readline() == "second\n"
                proc.send_signal(signal.SIGTERM)
                assert proc.wait(timeout=60) == 143  # 128 + SIGTERM
            assert proc.stderr is not None
            err = proc.stderr.read()
            assert "could not delete" not in err, err
            wait_until(lambda: zk.exists(zp.group_dir(group)) is None, 10, "the group deleted")


def test_console_consumer_keeps_in_a_file_the_offsets_an_outage_left_uncommitted(
    tmp_path: Any,
) -> None:
    """Ctrl-C while ZooKeeper is down cannot commit: the offsets of what was printed are
    written to a file it names, in ``offsets import``'s format, and importing that file
    after the outage keeps them (the messages are not delivered again). Before, they were
    lost: the group had no offsets and the next run printed everything again."""
    from zkconsumer.stack.local import running_stack

    work = tmp_path / "cwd"
    work.mkdir()
    with running_stack(tmp_path / "stack") as private:
        with started_zk(private.zookeeper) as zk:
            create_topic(private.bootstrap, "t", 2)
            produce(private.bootstrap, "t", [(0, None, b"a0"), (0, None, b"a1"),
                                             (1, None, b"b0")])
            wait_until(lambda: zk.exists(zp.topic_path("t")), 30, "the topic registered")
            with reaped(subprocess.Popen(
                    _cli("console-consumer", "--zookeeper", private.zookeeper, "--topic", "t",
                         "--group", "keep", "--from-beginning", "--connect-timeout", "1"),
                    cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    text=True)) as proc:
                assert proc.stdout is not None
                printed = {proc.stdout.readline() for _ in range(3)}
                assert printed == {"a0\n", "a1\n", "b0\n"}
                private.stop("zookeeper")
                proc.send_signal(signal.SIGINT)
                assert proc.wait(timeout=60) == 130
            assert proc.stderr is not None
            err = proc.stderr.read()
            (kept,) = list(work.iterdir())
            assert f"were not committed (ZooKeeper unreachable); kept in {kept}" in err, err
            assert sorted(kept.read_text().splitlines()) == [
                "/consumers/keep/offsets/t/0:2", "/consumers/keep/offsets/t/1:1"]
            private.start("zookeeper")  # the same port and data
            wait_until(lambda: zk.connected, 30, "the test's client reconnected")
            # The member's registration outlives the outage until its session expires.
            imported = subprocess.run(
                _cli("offsets", "import", "--zookeeper", private.zookeeper, "--input",
                     str(kept), "--force"),
                cwd=work, capture_output=True, text=True, timeout=120)
            assert imported.returncode == 0, imported.stderr
            assert zk.get(zp.offset_path("keep", "t", 0))[0] == b"2"
            assert zk.get(zp.offset_path("keep", "t", 1))[0] == b"1"


def test_offsets_and_owners_that_do_not_decode_are_left_out_with_a_warning(
    zk: KazooClient, names: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from zkconsumer._types import TopicPartition
    from zkconsumer.ops import group_reads as _reads

    g, t = names("junk"), names("tj")
    seed(zk, g, {(t, 0): 5})
    zk.create(zp.offset_path(g, t, 1), b"junk", makepath=True)
    zk.create(zp.owner_path(g, t, 0), b"c1-0", makepath=True)
    zk.create(zp.owner_path(g, t, 1), b"  ", makepath=True)
    with caplog.at_level(logging.WARNING, logger="zkconsumer.admin"):
        assert _reads._read_offsets(zk, g) == {TopicPartition(t, 0): 5}
        assert _reads._read_owners(zk, g) == {TopicPartition(t, 0): "c1-0"}
    warned = [r.getMessage() for r in caplog.records]
    assert any(zp.offset_path(g, t, 1) in m for m in warned), warned
    assert any(zp.owner_path(g, t, 1) in m for m in warned), warned


# --------------------------------------------------------------------------------------
# --command-config: the brokers' security settings for the commands that talk to brokers

SASL_PLAIN = ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
              "sasl.plain.username=alice\nsasl.plain.password=wonder-land\n")


def test_command_config_holds_broker_security_settings_only(tmp_path: Any) -> None:
    from zkconsumer._errors import AdminError
    from zkconsumer.zk.session import command_config

    ca, _ = self_signed_cert(tmp_path)  # the CA file must load (a TLS client is built)
    good = tmp_path / "client.properties"
    good.write_text("# a secured cluster\nsecurity.protocol=sasl_ssl\n"
                    "sasl.mechanism=SCRAM-SHA-512\nsasl.plain.username=alice\nsasl.plain.password=wonder-land\n"
                    f"ssl.cafile={ca}\nssl.check.hostname=false\n")
    kwargs = command_config(str(good))
    assert {k: kwargs[k] for k in ("security_protocol", "sasl_mechanism", "sasl_plain_username",
                                   "sasl_plain_password", "ssl_cafile", "ssl_check_hostname")} \
        == {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_plain_username": "alice", "sasl_plain_password": "wonder-land",
            "ssl_cafile": ca, "ssl_check_hostname": False}
    assert "client_id" not in kwargs  # each command names its own client
    assert command_config(None) == {}

    cases = {
        "sasl.mechansim=PLAIN\n": r"sasl\.mechansim: not a broker security setting",
        "group.id=g\n": r"group\.id: not a broker security setting",
        "security.protocol=TLS\n": r"security\.protocol",
        "security.protocol=SASL_SSL\nsasl.plain.password=wonder-land\n":
            r"needs sasl\.mechanism",
    }
    for text, expected in cases.items():
        bad = tmp_path / "bad.properties"
        bad.write_text(text)
        with pytest.raises(AdminError, match=expected) as exc:
            command_config(str(bad))
        assert str(bad) in str(exc.value) and "wonder-land" not in str(exc.value)
    with pytest.raises(AdminError, match="cannot read properties file"):
        command_config(str(tmp_path / "missing.properties"))


def test_describe_reaches_the_brokers_with_the_command_config(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
    capsys: pytest.CaptureFixture[str], tmp_path: Any,
) -> None:
    topic = topic_factory(names.topic, 1)
    produce(stack.bootstrap, topic, [(0, None, b"x")] * 3)
    seed(zk, names.group, {(topic, 0): 1})
    argv = ["groups", "describe", "--zookeeper", stack.zookeeper, "--group", names.group]
    [row] = run_json(capsys, *argv)
    assert (row["offset"], row["log_end_offset"], row["lag"]) == (1, 3, 2)
    sasl = tmp_path / "sasl.properties"
    sasl.write_text(SASL_PLAIN)
    # The test broker has no SASL: the settings reached the client when the log end is
    # unknown for that reason.
    rc, out, err = run(capsys, *argv, "--command-config", str(sasl), "--bootstrap-server",
                       stack.bootstrap, "--json")
    assert rc == 0, err
    [row] = json.loads(out)
    assert (row["offset"], row["log_end_offset"], row["lag"]) == (1, None, None)
    assert err.startswith("zkconsumer groups describe: warning:"), err
    # Brokers found in ZooKeeper are taken on the endpoint of the command config's security
    # protocol (the bridge registers PLAINTEXT only); the offsets are shown all the same.
    rc, out, err = run(capsys, *argv, "--command-config", str(sasl), "--json")
    assert rc == 0, err
    [row] = json.loads(out)
    assert (row["offset"], row["log_end_offset"]) == (1, None)
    assert "with a SASL_PLAINTEXT endpoint" in err, err
    typo = tmp_path / "typo.properties"
    typo.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechansim=PLAIN\n")
    assert "sasl.mechansim: not a broker security setting" in fails(
        capsys, *argv, "--command-config", str(typo))


def test_a_member_registering_during_a_whole_group_delete_is_not_deleted(
    zk: KazooClient, names: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The member check and the walk of the tree are two reads: a member registering in
    between was deleted with the group. It is refused now."""
    from zkconsumer._errors import GroupActiveError
    from zkconsumer.ops import groups as _groups

    group = names.group
    seed(zk, group, {("t", 0): 1})
    zk.ensure_path(zp.ids_dir(group))
    real = _groups._subtree
    member = zp.id_path(group, f"{group}_late")

    def subtree_after_a_join(client: Any, path: str) -> list[str]:
        if not zk.exists(member):
            zk.create(member, b"{}", ephemeral=True)
        return real(client, path)

    monkeypatch.setattr(_groups, "_subtree", subtree_after_a_join)
    with pytest.raises(GroupActiveError):
        _groups.delete_group(zk, group)
    assert zk.exists(member) is not None
    assert zk.exists(zp.offset_path(group, "t", 0)) is not None


def test_the_member_guard_keeps_the_ids_znode_acl(zk: KazooClient, names: Any) -> None:
    """The guard deletes and makes /consumers/G/ids again: with its own ACL, not the tools'
    (consumers that protect their group would find it open, or be locked out of it)."""
    from kazoo.security import ACL, Id, Permissions

    from zkconsumer import ops as _ops

    group = names.group
    seed(zk, group, {("a", 0): 1, ("b", 0): 2})
    custom = [ACL(Permissions.READ | Permissions.WRITE | Permissions.CREATE
                  | Permissions.DELETE, Id("world", "anyone"))]
    zk.create(zp.ids_dir(group), b"", acl=custom)
    _ops.delete_group(zk, group, "a")  # one topic: the guarded transaction
    assert zk.exists(zp.offsets_topic_dir(group, "a")) is None
    assert zk.get_acls(zp.ids_dir(group))[0] == custom


def test_the_member_guard_refuses_to_remake_an_ids_znode_whose_acl_it_sees_redacted(
    stack: StackInfo, zk: KazooClient, names: Any,
) -> None:
    """Without the ADMIN permission ZooKeeper shows digest ids as ``user:x``: made again
    with that ACL, ``ids`` locked its owner out (and with none, kazoo's, it was open)."""
    from kazoo.security import ACL, Id

    from zkconsumer import ops as _ops
    from zkconsumer._errors import AdminError

    group = names.group
    seed(zk, group, {("a", 0): 1, ("b", 0): 2})
    owner_id = Id("digest", make_digest_acl_credential("zkc", "acl-pw"))
    tool_id = Id("digest", make_digest_acl_credential("tool", "tool-pw"))
    protected = [ACL(31, owner_id), ACL(15, tool_id)]  # the tool: all but ADMIN
    zk.create(zp.ids_dir(group), b"", acl=protected)
    tool = KazooClient(hosts=stack.zookeeper, auth_data=[("digest", "tool:tool-pw")])
    tool.start(timeout=15)
    try:
        with pytest.raises(AdminError, match="needs the ADMIN permission"):
            _ops.delete_group(tool, group, "a")  # one topic: the guarded transaction
        assert zk.exists(zp.offsets_topic_dir(group, "a")) is not None  # nothing deleted
        entries = _ops.parse_offset_lines([f"{zp.offset_path(group, 'a', 0)}:5"])
        for dry_run in (True, False):  # a dry run refuses what the real run refuses
            with pytest.raises(AdminError, match="needs the ADMIN permission"):
                _ops.import_offsets(tool, entries, dry_run=dry_run)
        assert zk.get(zp.offset_path(group, "a", 0))[0] == b"1"
        owner = KazooClient(hosts=stack.zookeeper, auth_data=[("digest", "zkc:acl-pw")])
        owner.start(timeout=15)
        try:
            assert sorted(owner.get_acls(zp.ids_dir(group))[0]) == sorted(protected)
            owner.delete(zp.ids_dir(group))
        finally:
            owner.stop()
            owner.close()
    finally:
        tool.stop()
        tool.close()


def test_the_console_consumers_throwaway_group_is_deleted_after_a_long_outage(
    stack, zk, names, capsys
) -> None:
    """After a ZooKeeper outage longer than --connect-timeout the tool's own client is closed
    and the consumer's registration outlives its shutdown (its session has not expired):
    the group is still deleted, with a new client, own registration first."""
    from zkconsumer.cli.consume import _delete_quietly

    group = f"console-consumer-{names.suffix}"
    member = f"{group}_host-1-abcd"
    with started_zk(stack.zookeeper) as stale, started_zk(stack.zookeeper) as fresh:
        stale.create(zp.id_path(group, member), b"{}", ephemeral=True, makepath=True)
        zk.create(zp.offset_path(group, "t", 0), b"5", makepath=True)
        tool = KazooClient(hosts=stack.zookeeper)  # the tool's client, closed by now
        tool.start(timeout=15)
        tool.stop()
        reconnects: list[KazooClient] = []

        def reconnect() -> KazooClient:
            reconnects.append(fresh)
            return fresh

        _delete_quietly(tool, group, reconnect, member)
        assert reconnects == [fresh]
        assert zk.exists(zp.group_dir(group)) is None
        assert "could not delete" not in capsys.readouterr().err
        tool.close()


def test_an_import_too_big_for_one_transaction_says_what_it_wrote(
    stack, zk, names, monkeypatch
) -> None:
    """Split into several transactions, an import that fails in a later one says how much
    of it was written (it used to say "nothing written"), and that much is there."""
    from kazoo.security import ACL, Id, Permissions

    from zkconsumer._errors import AclRefusedError
    from zkconsumer.ops import OffsetEntry
    from zkconsumer.ops import offset_files as _offset_files

    monkeypatch.setattr(_offset_files, "MAX_TRANSACTION_OPS", 3)
    g1, g2 = names("open"), names("locked")
    read_only = [ACL(Permissions.READ, Id("world", "anyone"))]
    zk.ensure_path(zp.offsets_dir(g2))
    zk.create(zp.offsets_topic_dir(g2, "t"), b"", acl=read_only)
    entries = [OffsetEntry(g1, "t", p, 10 + p) for p in range(4)] + [OffsetEntry(g2, "t", 0, 7)]
    # 3 parents of g1's znodes, then 4 offsets of g1, then g2's refused: 3 transactions.
    with pytest.raises(AclRefusedError) as exc:
        _offset_files.import_offsets(zk, entries)
    assert "6 operations of it written before this failure" in str(exc.value)
    assert "nothing written" not in str(exc.value)
    assert offset_znodes(zk, g1, "t", 4) == {0: 10, 1: 11, 2: 12}


# --------------------------------------------------------------------------------------
# input checked before anything is written; odd input answered in one line


def test_console_consumer_checks_its_config_before_deleting_offsets(
    stack: StackInfo, zk: KazooClient, names: Any, capsys: pytest.CaptureFixture[str],
) -> None:
    """--delete-consumer-offsets deleted the group, then failed on a typo in a
    --consumer-property: the typo must cost nothing."""
    g = names.group
    seed(zk, g, {(names.topic, 0): 42})
    before = tree(zk, zp.group_dir(g))
    line = fails(capsys, "console-consumer", "--zookeeper", stack.zookeeper, "--whitelist",
                 names.topic, "--group", g, "--from-beginning", "--delete-consumer-offsets",
                 "--consumer-property", "fetch.mesage.max.bytes=2097152")
    assert line.startswith("zkconsumer console-consumer: ") and "fetch.mesage.max.bytes" in line
    assert tree(zk, zp.group_dir(g)) == before


def test_console_consumer_separators_take_java_properties_escapes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from zkconsumer.cli.consume import _unescape

    assert _unescape("é\\t", "key.separator") == "é\t"  # was garbled to "Ã©\t"
    assert _unescape("\\r\\n", "line.separator") == "\r\n"
    assert _unescape("a\\\\b\\u00e9\\f", "key.separator") == "a\\bé\f"
    assert _unescape(" | ", "key.separator") == " | "
    address = f"127.0.0.1:{free_port()}"  # refused before connecting
    for value, shown in (("\\", "\\"), ("\\x", "\\x"), ("a\\q", "\\q"), ("\\u12", "\\u12"),
                         ("\\uD800", "\\uD800")):
        line = fails(capsys, "console-consumer", "--zookeeper", address, "--topic", "t",
                     "--property", f"key.separator={value}")
        assert line.startswith(f"zkconsumer console-consumer: --property key.separator: "
                               f"unknown escape {shown} at character "), line


@pytest.mark.parametrize("argv", [
    ["groups", "list", "--zookeeper", "127.0.0.1:1", "--connect-timeout"],
    ["offsets", "reset", "--zookeeper", "127.0.0.1:1", "--group", "g", "--topic", "t",
     "--to", "latest", "--connect-timeout"],
    ["bridge", "--zookeeper", "127.0.0.1:1", "--bootstrap-server", "127.0.0.1:1",
     "--interval"],
    ["bridge", "--zookeeper", "127.0.0.1:1", "--bootstrap-server", "127.0.0.1:1",
     "--connect-timeout"],
    ["stack", "status", "--dir", "/nonexistent", "--timeout"],
    ["migrate", "status", "--group", "g", "--bootstrap-server", "127.0.0.1:1",
     "--zookeeper", "127.0.0.1:1", "--connect-timeout"],
    ["migrate", "copy", "--group", "g", "--bootstrap-server", "127.0.0.1:1",
     "--zookeeper", "127.0.0.1:1", "--from", "zookeeper", "--to", "kafka", "--wait-timeout"],
    ["migrate", "copy", "--group", "g", "--bootstrap-server", "127.0.0.1:1",
     "--zookeeper", "127.0.0.1:1", "--from", "zookeeper", "--to", "kafka",
     "--check-interval"],
])
@pytest.mark.parametrize("value", ["inf", "-1", "nan", "0", "-0.5", "1e300", "abc"])
def test_seconds_flags_take_positive_finite_numbers_only(
    argv: list[str], value: str, capsys: pytest.CaptureFixture[str],
) -> None:
    """inf overflowed a timer (a traceback), nan and negatives gave odd failures, and a
    bridge --interval of 0 or less spun at full CPU: argparse refuses them now."""
    with pytest.raises(SystemExit) as exc:
        main([*argv, value])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"error: argument {argv[-1]}: " in err.splitlines()[-1], err
    assert ("must be a number of seconds > 0 and <= 1000000" in err
            or "not a number of seconds" in err), err


def test_describe_says_when_the_total_lag_is_unknown_or_partial(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The total was the sum of the known lags: "total lag 0" with no broker reachable, or
    with partitions nothing was committed for."""
    topic = topic_factory(names.topic, 2)
    produce(stack.bootstrap, topic, [(0, None, b"x")] * 3 + [(1, None, b"y")] * 4)
    g = names.group
    seed(zk, g, {(topic, 0): 1})  # partition 1: nothing committed, lag unknown
    argv = ["groups", "describe", "--zookeeper", stack.zookeeper, "--group", g]
    rc, out, err = run(capsys, *argv)
    assert rc == 0
    lines = [line.rstrip() for line in out.splitlines()]
    assert lines[0] == f"Group {g}: 0 registered members, total lag at least 2 (1 of 2 " \
                       "partitions unknown)"
    assert err == ("zkconsumer groups describe: warning: total lag at least 2 (1 of 2 "
                   "partitions unknown): lag unknown where a partition has no committed "
                   "offset or no known log end\n")
    # --json keeps its rows (lag null) and says the same on stderr.
    rc, out, err2 = run(capsys, *argv, "--json")
    assert rc == 0 and err2 == err
    assert [r["lag"] for r in json.loads(out)] == [2, None]

    # No broker reachable: every lag unknown, so is the total (it said 0).
    seed(zk, g, {(topic, 1): 0})
    dead = f"127.0.0.1:{free_port()}"
    rc, out, err = run(capsys, *argv, "--bootstrap-server", dead)
    assert rc == 0
    lines = [line.rstrip() for line in out.splitlines()]
    assert lines[0] == f"Group {g}: 0 registered members, total lag unknown"
    assert "warning: total lag unknown" in err
    # All known: the plain number, no warning.
    rc, out, err = run(capsys, *argv)
    assert (rc, err) == (0, "")
    assert out.splitlines()[0] == f"Group {g}: 0 registered members, total lag 6"


def kafka_commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit offsets for ``group`` in Kafka, as a member with offsets.storage=kafka does."""
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTP
    from kafka.errors import NoError
    from kafka.structs import OffsetAndMetadata

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="zkc-tests")
    try:
        result = admin.alter_group_offsets(
            group, {KTP(t, p): OffsetAndMetadata(o, "", -1) for (t, p), o in offsets.items()})
    finally:
        admin.close()
    assert all(e is NoError for e in result.values()), result


def test_describe_shows_the_offsets_a_member_committing_to_kafka_resumes_from(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Only ZooKeeper's offsets were shown: for a group with offsets.storage=kafka, stale or
    none, and so a wrong lag."""
    topic = topic_factory(names.topic, 2)
    g = names.group
    produce(stack.bootstrap, topic, [(0, None, b"a")] * 4 + [(1, None, b"b")] * 3)
    seed(zk, g, {(topic, 0): 1})  # left in ZooKeeper from before the group moved to Kafka
    zkc = ["--zookeeper", stack.zookeeper]
    cfg = config(stack, g, consumer_id="a", offsets_storage="kafka", dual_commit_enabled=False)
    with connector(cfg) as a:
        [stream] = a.create_message_streams({topic: 1})[topic]
        # Kafka has no offset for it: it starts at the log start (smallest), not at 1.
        assert sorted((m.partition, m.offset) for m in take(stream, 7)) == [
            (0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 1), (1, 2)]
        a.commit_offsets()

        rows = run_json(capsys, "groups", "describe", *zkc, "--group", g)
        assert rows == [
            {"group": g, "topic": topic, "partition": 0, "offset": 4, "log_end_offset": 4,
             "lag": 0, "owner": f"{g}_a-0", "offset_source": "kafka", "zookeeper_offset": 1,
             "kafka_offset": 4, "time_lag": 0.0},
            {"group": g, "topic": topic, "partition": 1, "offset": 3, "log_end_offset": 3,
             "lag": 0, "owner": f"{g}_a-0", "offset_source": "kafka", "zookeeper_offset": None,
             "kafka_offset": 3, "time_lag": 0.0},
        ]

        rc, out, err = run(capsys, "groups", "describe", *zkc, "--group", g)
        assert rc == 0
        lines = [line.rstrip() for line in out.splitlines()]
        assert lines[0] == f"Group {g}: 1 registered member, total lag 0"
        # The columns scripts read stay where they were; where each offset came from is last.
        assert lines[1].split() == ["TOPIC", "PARTITION", "OFFSET", "LOG-END-OFFSET", "LAG",
                                    "OWNER", "OFFSET-SOURCE", "TIME-LAG"]
        assert lines[2].split() == [topic, "0", "4", "4", "0", f"{g}_a-0", "kafka", "0.0s"]
        assert lines[3].split() == [topic, "1", "3", "3", "0", f"{g}_a-0", "kafka", "0.0s"]
        assert err == (
            f"zkconsumer groups describe: warning: ZooKeeper and Kafka hold different offsets "
            f"for 1 partition ({topic}:0 zookeeper 1 kafka 4): the larger is shown, where a "
            "member with dual commit resumes; a member with offsets.storage=zookeeper resumes "
            "from ZooKeeper's, one with offsets.storage=kafka and dual.commit.enabled=false "
            "from Kafka's (--json has both)\n")
        # The member list says nothing about offsets.
        rc, _, err = run(capsys, "groups", "describe", *zkc, "--group", g, "--members")
        assert (rc, err) == (0, "")


def test_describe_shows_the_larger_of_both_stores_as_a_dual_commit_member_reads_them(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from zkconsumer.consumer.offsets import DualOffsetStore, make_offset_store

    topic = topic_factory(names.topic, 4)
    g = names.group
    produce(stack.bootstrap, topic, [(p, None, b"x") for p in range(4) for _ in range(6)])
    seed(zk, g, {(topic, 0): 2, (topic, 1): 5, (topic, 2): 3})
    kafka_commit(stack.bootstrap, g, {(topic, 0): 4, (topic, 1): 1, (topic, 2): 3,
                                      (topic, 3): 6})
    zkc = ["--zookeeper", stack.zookeeper]
    rows = run_json(capsys, "groups", "describe", *zkc, "--group", g)
    assert [(r["partition"], r["offset"], r["offset_source"], r["zookeeper_offset"],
             r["kafka_offset"], r["lag"]) for r in rows] == [
        (0, 4, "kafka", 2, 4, 2), (1, 5, "zookeeper", 5, 1, 1), (2, 3, "both", 3, 3, 3),
        (3, 6, "kafka", None, 6, 0)]
    # Exactly what a member with dual commit reads before it fetches.
    store = make_offset_store(config(stack, g, offsets_storage="kafka"), zk,
                              lambda: [stack.bootstrap])
    try:
        assert isinstance(store, DualOffsetStore)
        tps = [TopicPartition(topic, p) for p in range(4)]
        assert store.read(tps) == {tp: r["offset"] for tp, r in zip(tps, rows, strict=True)}
    finally:
        store.close()

    rc, out, err = run(capsys, "groups", "describe", *zkc, "--group", g)
    assert rc == 0
    lines = [line.rstrip() for line in out.splitlines()]
    assert lines[0] == f"Group {g}: 0 registered members, total lag 6"
    assert [line.split()[:7] for line in lines[2:6]] == [
        [topic, "0", "4", "6", "2", "-", "kafka"], [topic, "1", "5", "6", "1", "-", "zookeeper"],
        [topic, "2", "3", "6", "3", "-", "both"], [topic, "3", "6", "6", "0", "-", "kafka"]]
    assert lines[5].split()[7] == "0.0s"  # TIME-LAG, last
    assert err.startswith(
        f"zkconsumer groups describe: warning: ZooKeeper and Kafka hold different offsets for "
        f"2 partitions ({topic}:0 zookeeper 2 kafka 4, {topic}:1 zookeeper 5 kafka 1): "), err
    assert err.count("\n") == 1, err


def test_describe_says_when_kafka_cannot_be_asked_and_shows_zookeepers_offsets(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The brokers answer (log ends known) but the group's offsets in Kafka cannot be read:
    an ACL refusing the group, say. (Kafka is asked through the client offsets reset, import
    and export use, as the tools' client id.)"""
    from kafka.errors import GroupAuthorizationFailedError

    from zkconsumer.ops import describe_group
    from zkconsumer.ops.kafka_offsets import _KafkaGroups

    topic = topic_factory(names.topic, 1)
    g = names.group
    produce(stack.bootstrap, topic, [(0, None, b"x")] * 3)
    seed(zk, g, {(topic, 0): 1})
    kafka_commit(stack.bootstrap, g, {(topic, 0): 3})

    def refused(self: Any, group: str) -> dict[Any, int]:
        assert (self.servers, group) == (stack.bootstrap, g)
        assert self._admin.config["client_id"] == "zkconsumer-tools"
        raise GroupAuthorizationFailedError(f"group {group}")

    with monkeypatch.context() as patched:
        patched.setattr(_KafkaGroups, "offsets", refused)
        desc = describe_group(zk, g, stack.bootstrap)
    assert desc.kafka_offsets_error == (
        "committed offsets in Kafka unknown, so the offsets shown are ZooKeeper's only (a "
        "group committing to Kafka may be further on): [Error 30] "
        f"GroupAuthorizationFailedError: group {g}")
    assert desc.log_end_error is None
    [row] = desc.partitions
    assert (row.offset, row.log_end_offset, row.lag, row.offset_source, row.zookeeper_offset,
            row.kafka_offset) == (1, 3, 2, "zookeeper", 1, None)
    assert not desc.offsets_in_kafka and desc.offsets_note() is None
    # Asked, Kafka's offset is the one a member resumes from.
    [row] = describe_group(zk, g, stack.bootstrap).partitions
    assert (row.offset, row.lag, row.offset_source) == (3, 0, "kafka")


def test_one_members_unreadable_regex_does_not_stop_describe_or_verify(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A member whose registered wildcard regex does not translate (here Python-only
    syntax) made both commands fail outright; now its part is unknown, the rest shown."""
    topic = topic_factory(names.topic, 2)
    g = names.group
    now = int(time.time() * 1000)
    fake_member(zk, g, f"{g}_a", topic)
    odd = zp.ConsumerRegistration.wildcard("white_list", "(?P<x>t)-.*", 1, now)
    zk.create(zp.id_path(g, f"{g}_b"), odd.encode(), ephemeral=True, makepath=True)
    zk.create(zp.owner_path(g, topic, 0), zp.encode_owner(f"{g}_a-0"), makepath=True)
    zk.create(zp.owner_path(g, topic, 1), zp.encode_owner(f"{g}_b-0"), makepath=True)
    zkc = ["--zookeeper", stack.zookeeper]

    rc, out, err = run(capsys, "groups", "describe", *zkc, "--group", g, "--json")
    assert rc == 0, err
    assert [(r["partition"], r["owner"]) for r in json.loads(out)] == [
        (0, f"{g}_a-0"), (1, f"{g}_b-0")]
    assert (f"zkconsumer groups describe: warning: member {g}_b: subscription unknown "
            "(registered white_list regex is unusable: ") in err, err

    rc, out, _ = run(capsys, "verify-rebalance", *zkc, "--group", g)
    assert rc == 1
    assert out.startswith(f"rebalance not verified for group '{g}': 1 of 2 partitions "
                          f"checked are owned by live threads; cannot verify the part of "
                          f"member {g}_b: its subscription is unknown ("), out
    checks = run_json_rc(capsys, 1, "verify-rebalance", *zkc, "--group", g)
    assert checks[0] == {"topic": topic, "partition": 0, "owner": f"{g}_a-0", "ok": True,
                         "problem": None}
    assert checks[1]["owner"] == f"{g}_b-0" and not checks[1]["ok"]
    assert checks[1]["problem"].startswith("cannot verify: ")

    # A real problem elsewhere is still reported as one.
    zk.delete(zp.owner_path(g, topic, 0))
    rc, out, _ = run(capsys, "verify-rebalance", *zkc, "--group", g)
    assert rc == 1
    assert out.startswith(f"rebalance failed for group '{g}': 1 of 2 partitions wrong: "
                          f"{topic}:0: no owner; cannot verify the part of member {g}_b"), out


def run_json_rc(capsys: pytest.CaptureFixture[str], rc: int, *argv: str) -> Any:
    got, out, err = run(capsys, *argv, "--json")
    assert got == rc, err
    return json.loads(out)


@pytest.mark.broker("kraft")  # a ZooKeeper-mode broker rewrites the znode
def test_a_topic_znode_that_does_not_decode_does_not_stop_describe_verify_or_import(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture, tmp_path: Any,
) -> None:
    """A /brokers/topics/T of garbage (a broken tool wrote it) made `groups describe` and
    `verify-rebalance` fail for every group with offsets for, owners of or a subscription to
    T, and `offsets import` fail for any file naming T. Now T's partitions are unknown: the
    group's known ones are shown (log end unknown), imported, checked where they can be,
    with one warning naming the znode and why it does not decode."""
    topic = topic_factory(names.topic, 2)
    produce(stack.bootstrap, topic, [(0, None, b"x")] * 3)
    bad = names("bad")  # no broker has it: the bridge leaves its znode alone
    path = zp.topic_path(bad)
    zk.create(path, b"{not json", makepath=True)
    try:
        g = names.group
        reg = zp.ConsumerRegistration.static({topic: 1, bad: 1}, int(time.time() * 1000))
        zk.create(zp.id_path(g, f"{g}_a"), reg.encode(), ephemeral=True, makepath=True)
        thread = f"{g}_a-0"
        seed(zk, g, {(topic, 0): 1, (topic, 1): 0, (bad, 0): 5, (bad, 1): 7})
        for t, p in ((topic, 0), (topic, 1), (bad, 0)):
            zk.create(zp.owner_path(g, t, p), zp.encode_owner(thread), makepath=True)
        zkc = ["--zookeeper", stack.zookeeper]
        warn = "zkconsumer groups describe: warning:"
        why = f"cannot decode topic assignment at {path}: invalid JSON ("

        # describe: T's partitions the group has offsets for or owns, log end unknown.
        argv = ["groups", "describe", *zkc, "--group", g]
        rc, out, err = run(capsys, *argv, "--json")
        assert rc == 0, err
        assert [(r["topic"], r["partition"], r["offset"], r["log_end_offset"], r["lag"],
                 r["owner"]) for r in json.loads(out)] == [
            (bad, 0, 5, None, None, thread), (bad, 1, 7, None, None, None),
            (topic, 0, 1, 3, 2, thread), (topic, 1, 0, 0, 0, thread)]
        lines = err.splitlines()
        assert len(lines) == 2 and "Traceback" not in err, err
        assert lines[0].startswith(f"{warn} topic {bad}: partitions unknown ({why}"), err
        assert lines[0].endswith("; data=b'{not json'); zkconsumer members consume none of "
                                 "it until the znode decodes; shown are the partitions the "
                                 "group has offsets for or owns, log end unknown"), err
        assert lines[1] == (f"{warn} total lag at least 2 (2 of 4 partitions unknown): lag "
                            "unknown where a partition has no committed offset or no known "
                            "log end")
        # Not taken for a missing topic (no "topics not in /brokers/topics" warning).
        rc, out, err2 = run(capsys, *argv)
        assert (rc, err2) == (0, err)
        assert [bad, "1", "7", "-", "-", "-", "?"] in _table_rows(out)  # no time lag: ?

        # verify-rebalance: T's owners checked, T's part not verified (it cannot be).
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="zkconsumer.admin"):
            rc, out, _ = run(capsys, "verify-rebalance", *zkc, "--group", g)
        assert (rc, out) == (1, f"rebalance not verified for group '{g}': 3 of 3 partitions "
                                f"checked are owned by live threads; cannot verify topic "
                                f"{bad}: its partitions are unknown ({path} does not "
                                "decode)\n")
        warned = [r.getMessage() for r in caplog.records if path in r.getMessage()]
        assert len(warned) == 1 and why in warned[0], warned
        assert [(c["topic"], c["partition"], c["ok"]) for c in run_json_rc(
            capsys, 1, "verify-rebalance", *zkc, "--group", g)] == [
            (bad, 0, True), (topic, 0, True), (topic, 1, True)]
        # A real problem is still one.
        zk.set(zp.owner_path(g, bad, 0), zp.encode_owner(f"{g}_dead-0"))
        rc, out, _ = run(capsys, "verify-rebalance", *zkc, "--group", g)
        assert rc == 1 and out.startswith(
            f"rebalance failed for group '{g}': 1 of 3 partitions wrong: {bad}:0: owner "
            f"{g}_dead-0 is not a live thread subscribed to {bad}; cannot verify topic "
            f"{bad}"), out

        # offsets import (a real process: the warning is logged to its stderr): T's offsets
        # are imported, unchecked; the other topic's are checked as ever.
        h = names("h")
        lines = [f"{zp.offset_path(h, topic, 0)}:2", f"{zp.offset_path(h, bad, 0)}:5",
                 f"{zp.offset_path(h, bad, 1)}:9"]
        offsets = tmp_path / "offsets.txt"
        offsets.write_text("".join(f"{line}\n" for line in lines))
        done = subprocess.run(_cli("offsets", "import", *zkc, "--input", str(offsets)),
                              capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        assert done.stdout == ("imported 3 offsets of 1 group in one transaction (created 3, "
                               "updated 0, unchanged 0)\n")
        [line] = done.stderr.splitlines()
        # The library's warning, said as the command's own (no log line's time and name).
        assert line.startswith(f"zkconsumer offsets import: warning: topic {bad}: partitions "
                               f"unknown ({why}") \
            and line.endswith("; its offsets are imported without checking its "
                                      "partitions or log end"), done.stderr
        assert offset_znodes(zk, h, bad, 2) == {0: 5, 1: 9}
        assert offset_znodes(zk, h, topic, 2) == {0: 2}
    finally:
        zk.delete(path)


def test_a_write_zookeeper_refuses_for_good_is_reported_at_once(
    stack: StackInfo, zk: KazooClient, names: Any, capsys: pytest.CaptureFixture[str],
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every failed transaction was taken for a race and retried, then reported as
    "ZooKeeper kept changing": a chroot typo or a refusal no retry can help is named now."""
    from zkconsumer._errors import AdminError
    from zkconsumer.ops import offset_files as _offset_files

    commits: list[str] = []
    real_commit = _offset_files.commit_transaction

    def counted(tx: Any, what: str, written: int = 0) -> None:
        commits.append(what)
        real_commit(tx, what, written)

    monkeypatch.setattr(_offset_files, "commit_transaction", counted)
    g, t = names.group, names.topic
    lines = tmp_path / "offsets.txt"
    lines.write_text(f"{zp.offset_path(g, t, 0)}:5\n")
    chroot = f"/no-such-chroot-{names.suffix}"
    # (The command checks the chroot before anything: test_a_mistyped_chroot_...; the write
    # path names it too, for a caller that did not check.)
    from zkconsumer.zk import session as _session

    chrooted = _session.connect(stack.zookeeper + chroot)
    try:
        with pytest.raises(AdminError) as exc:
            _offset_files.import_offsets(chrooted, [_offset_files.OffsetEntry(g, t, 0, 5)],
                                  zookeeper_only=True)
    finally:
        chrooted.stop()
        chrooted.close()
    assert str(exc.value) == (f"ZooKeeper refused to create /consumers: the chroot {chroot} "
                              "of the connect string does not exist (NoNodeError); nothing "
                              "written")
    assert len(commits) == 1  # not retried
    assert zk.exists(chroot) is None

    # A refusal that is no race (a child of an ephemeral znode): at once, path and cause.
    zk.create(zp.offsets_topic_dir(g, t), b"", ephemeral=True, makepath=True)
    commits.clear()
    line = fails(capsys, "offsets", "import", "--zookeeper", stack.zookeeper,
                 "--input", str(lines))
    assert line == (f"zkconsumer offsets import: ZooKeeper refused to create "
                    f"{zp.offset_path(g, t, 0)} (NoChildrenForEphemeralsError); nothing "
                    "written")
    assert len(commits) == 1
    assert zk.get_children(zp.offsets_topic_dir(g, t)) == []


def test_partition_znodes_with_odd_names_are_left_out_with_a_warning(
    zk: KazooClient, names: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """"²" passed isdigit() and crashed int(); "007" was read as partition 7."""
    from zkconsumer._types import TopicPartition
    from zkconsumer.ops import group_reads as _reads

    g, t = names("odd"), names("to")
    seed(zk, g, {(t, 0): 5, (t, 10): 6})
    for odd in ("\u00b2", "007", "x", "-1", "\u0663"):  # superscript two, Arabic-Indic three
        zk.create(f"{zp.offsets_topic_dir(g, t)}/{odd}", b"9")
    zk.create(zp.offset_path(g, t, 7), b"70")
    with caplog.at_level(logging.WARNING, logger="zkconsumer.admin"):
        assert _reads._read_offsets(zk, g) == {TopicPartition(t, 0): 5,
                                               TopicPartition(t, 7): 70,
                                               TopicPartition(t, 10): 6}
    warned = " ".join(r.getMessage() for r in caplog.records)
    for odd in ("\u00b2", "007", "x", "-1", "\u0663"):
        assert f"{zp.offsets_topic_dir(g, t)}/{odd}: not a partition number" in warned, warned


def test_reset_to_an_offset_says_when_it_is_clamped_and_refuses_dates(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--to 20240501 (a date) was taken as an offset and silently clamped to the log end."""
    topic = topic_factory(names.topic, 2)
    produce(stack.bootstrap, topic, [(0, None, b"x")] * 3 + [(1, None, b"y")])
    g = names.group
    seed(zk, g, {(topic, 0): 0, (topic, 1): 0})
    zkc = ["--zookeeper", stack.zookeeper]

    def reset(to: str, *extra: str) -> tuple[int, str, str]:
        execute = [] if "--dry-run" in extra else ["--execute"]
        return run(capsys, "offsets", "reset", *zkc, "--group", g, "--topic", topic,
                   "--to", to, *extra, *execute)

    before = tree(zk, zp.group_dir(g))
    for to, meant in (("20240501", "2024-05-01"),
                      ("1714521600000", "2024-05-01T00:00:00.000+00:00"),
                      ("1714521600", "2024-05-01T00:00:00+00:00")):
        rc, _, err = reset(to)
        assert rc == 2
        assert err == (f"zkconsumer offsets reset: --to {to} is past the log end of every "
                       f"partition of '{topic}' (at most 3) and reads as the date-time "
                       f"{meant}: for a time write it in ISO-8601 (--to {meant}); for the log "
                       "end, --to latest\n")
    assert tree(zk, zp.group_dir(g)) == before

    # Clamped on one partition: done, and said (text and --json alike).
    rc, out, err = reset("2", "--dry-run")
    assert rc == 0
    assert err == (f"zkconsumer offsets reset: note: offset 2 is outside the log of 1 of 2 "
                   f"partitions, clamped: {topic}:1 to 1 (log end)\n")
    assert "would reset" in out
    rc, out, err2 = reset("2", "--json")
    assert (rc, err2) == (0, err)
    assert [(r["partition"], r["offset"]) for r in json.loads(out)] == [(0, 2), (1, 1)]
    assert set(json.loads(out)[1]) == {"group", "topic", "partition", "old_offset", "offset"}
    # Not clamped: no note.
    rc, _, err = reset("1")
    assert (rc, err) == (0, "")


def test_a_closed_stdout_pipe_ends_any_command_quietly(
    stack: StackInfo, zk: KazooClient, names: Any,
) -> None:
    """`zkconsumer offsets export | head` ended with "[Errno 32] Broken pipe", status 2."""
    g = names.group
    seed(zk, g, {(names.topic, p): p for p in range(50)})
    for argv in (["offsets", "export", "--group", g], ["groups", "list", "--json"]):
        read_end, write_end = os.pipe()
        os.close(read_end)  # the reader is gone before the first write
        try:
            proc = subprocess.run(_cli(*argv, "--zookeeper", stack.zookeeper), cwd=REPO,
                                  stdout=write_end, stderr=subprocess.PIPE, text=True,
                                  timeout=60)
        finally:
            os.close(write_end)
        assert (proc.returncode, proc.stderr) == (0, ""), argv


def test_an_import_dry_run_refuses_what_the_real_run_refuses(
    stack: StackInfo, zk: KazooClient, names: Any, capsys: pytest.CaptureFixture[str],
    tmp_path: Any,
) -> None:
    """It skipped the member check and said "would import" where the real run refuses
    (offsets reset --dry-run already refused a live group)."""
    g, t = names.group, names.topic
    seed(zk, g, {(t, 0): 1})
    fake_member(zk, g, f"{g}_m", t)
    lines = tmp_path / "offsets.txt"
    lines.write_text(f"{zp.offset_path(g, t, 0)}:5\n{zp.offset_path(g, t, 1)}:6\n"
                     f"{zp.offset_path(g, t, 2)}:0\n")
    zk.create(zp.offset_path(g, t, 2), b"0")
    before = tree(zk, zp.group_dir(g))
    zkc = ["--zookeeper", stack.zookeeper, "--input", str(lines)]
    refused = (f"zkconsumer offsets import: refusing to import offsets: group '{g}' has 1 "
               f"registered member ({g}_m); pass --force to write anyway")
    assert fails(capsys, "offsets", "import", *zkc, "--dry-run") == refused
    assert fails(capsys, "offsets", "import", *zkc) == refused
    rc, out, _ = run(capsys, "offsets", "import", *zkc, "--dry-run", "--force")
    assert rc == 0
    assert out.splitlines()[0] == ("dry run: would import 3 offsets of 1 group in one "
                                   "transaction (create 1, update 1, unchanged 1); nothing "
                                   "written")
    assert tree(zk, zp.group_dir(g)) == before
    rc, out, _ = run(capsys, "offsets", "import", *zkc, "--force")
    assert (rc, out) == (0, "imported 3 offsets of 1 group in one transaction "
                            "(created 1, updated 1, unchanged 1)\n")


def test_a_broken_pipe_to_a_server_is_still_an_error(
    stack: StackInfo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Only a closed stdout ends a command quietly: a socket's EPIPE (a broker, ZooKeeper)
    is a failure, reported in one line."""
    from zkconsumer import ops as _ops

    def broken(zk: Any) -> Any:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(_ops, "list_groups", broken)
    assert fails(capsys, "groups", "list", "--zookeeper", stack.zookeeper) == (
        "zkconsumer groups list: [Errno 32] Broken pipe")


# --------------------------------------------------------------------------------------
# offsets reset / import / export and a group whose offsets are (also) in Kafka


def kafka_read(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    """The group's committed offsets in Kafka."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="zkc-tests")
    try:
        found = admin.list_group_offsets({group: None}).get(group, {})
    finally:
        admin.close()
    return {(k.topic, k.partition): v.offset for k, v in found.items() if v.offset >= 0}


def test_reset_and_import_write_kafka_too_for_a_group_with_offsets_there(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
    capsys: pytest.CaptureFixture[str], tmp_path: Any,
) -> None:
    """They wrote ZooKeeper alone: a group with offsets.storage=kafka resumes from Kafka (a
    dual commit member from the larger of the two), so a reset back to earliest did nothing."""
    from zkconsumer.consumer.offsets import DualOffsetStore, make_offset_store

    topic = topic_factory(names.topic, 2)
    g = names.group
    produce(stack.bootstrap, topic, [(p, None, b"x") for p in (0, 1) for _ in range(5)])
    seed(zk, g, {(topic, 0): 3, (topic, 1): 4})
    kafka_commit(stack.bootstrap, g, {(topic, 0): 5, (topic, 1): 5})
    zkc = ["--zookeeper", stack.zookeeper]
    reset = ["offsets", "reset", *zkc, "--group", g, "--topic", topic]

    def row(p: int, old: int | None, old_kafka: int | None, new: int) -> dict[str, Any]:
        return {"group": g, "topic": topic, "partition": p, "old_offset": old, "offset": new,
                "old_kafka_offset": old_kafka}

    # A dry run shows what each store would get, and writes nothing.
    before = tree(zk, zp.group_dir(g))
    rc, out, err = run(capsys, *reset, "--to", "earliest", "--dry-run")
    assert (rc, err) == (0, "")
    lines = [line.rstrip() for line in out.splitlines()]
    assert lines[0] == (f"would reset group {g}, topic {topic} to earliest in ZooKeeper and "
                        "Kafka (dry run: nothing written)")
    assert lines[1].split() == ["TOPIC", "PARTITION", "OLD-OFFSET", "NEW-OFFSET",
                                "OLD-KAFKA-OFFSET"]
    assert [line.split() for line in lines[2:]] == [[topic, "0", "3", "0", "5"],
                                                    [topic, "1", "4", "0", "5"]]
    assert run_json(capsys, *reset, "--to", "earliest", "--dry-run") == [
        row(0, 3, 5, 0), row(1, 4, 5, 0)]
    assert tree(zk, zp.group_dir(g)) == before
    assert kafka_read(stack.bootstrap, g) == {(topic, 0): 5, (topic, 1): 5}

    assert run_json(capsys, *reset, "--to", "earliest", "--execute") == [
        row(0, 3, 5, 0), row(1, 4, 5, 0)]
    assert offset_znodes(zk, g, topic, 2) == {0: 0, 1: 0}
    assert kafka_read(stack.bootstrap, g) == {(topic, 0): 0, (topic, 1): 0}
    # What a member with dual commit resumes from (the larger of the two stores).
    store = make_offset_store(config(stack, g, offsets_storage="kafka"), zk,
                              lambda: [stack.bootstrap])
    try:
        assert isinstance(store, DualOffsetStore)
        tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
        assert store.read(tps) == dict.fromkeys(tps, 0)
    finally:
        store.close()

    # import: the same, except the offsets of a partition Kafka does not have.
    gone = names("gone")
    offsets = tmp_path / "offsets.txt"
    offsets.write_text(f"{zp.offset_path(g, topic, 0)}:2\n{zp.offset_path(g, topic, 1)}:0\n"
                       f"{zp.offset_path(g, gone, 0)}:7\n")
    imp = ["offsets", "import", *zkc, "--input", str(offsets)]
    in_kafka = f"; and in Kafka, where group {g} has offsets: "
    gone_warning = ("zkconsumer offsets import: warning: 1 offset of topics not in "
                    f"/brokers/topics ({zp.offset_path(g, gone, 0)}:7): nothing to consume "
                    "until the topic is created again; the members then resume there, or reset "
                    "by auto.offset.reset where past its log end\n")
    rc, out, err = run(capsys, *imp, "--dry-run")
    assert (rc, err) == (0, gone_warning)
    assert out.splitlines()[0] == (
        "dry run: would import 3 offsets of 1 group in one transaction (create 1, update 1, "
        f"unchanged 1){in_kafka}create 0, update 1, unchanged 1, left out 1 (no such partition "
        "in /brokers/topics); nothing written")
    assert offset_znodes(zk, g, topic, 2) == {0: 0, 1: 0}
    assert kafka_read(stack.bootstrap, g) == {(topic, 0): 0, (topic, 1): 0}
    rc, out, err = run(capsys, *imp)
    assert (rc, err) == (0, gone_warning)
    assert out == ("imported 3 offsets of 1 group in one transaction (created 1, updated 1, "
                   f"unchanged 1){in_kafka}created 0, updated 1, unchanged 1, left out 1 (no "
                   "such partition in /brokers/topics)\n")
    assert offset_znodes(zk, g, topic, 2) == {0: 2, 1: 0}
    assert zk.get(zp.offset_path(g, gone, 0))[0] == b"7"
    assert kafka_read(stack.bootstrap, g) == {(topic, 0): 2, (topic, 1): 0}

    # --zookeeper-only: ZooKeeper alone, as before (and the JSON rows as they were).
    assert run_json(capsys, *reset, "--to", "latest", "--zookeeper-only", "--execute") == [
        {"group": g, "topic": topic, "partition": p, "old_offset": old, "offset": 5}
        for p, old in ((0, 2), (1, 0))]
    assert offset_znodes(zk, g, topic, 2) == {0: 5, 1: 5}
    assert kafka_read(stack.bootstrap, g) == {(topic, 0): 2, (topic, 1): 0}


def modern_member(stack: StackInfo, group: str, topic: str) -> Any:
    """A kafka-python consumer that has joined ``group`` (the modern protocol)."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(bootstrap_servers=stack.bootstrap, group_id=group,
                             client_id="modern", enable_auto_commit=False,
                             auto_offset_reset="earliest", session_timeout_ms=6000,
                             heartbeat_interval_ms=500, max_poll_interval_ms=6000)
    # The topic's metadata before joining (kafka-python 3.0's leader may assign without it).
    wait_until(lambda: bool(consumer.partitions_for_topic(topic)), 30, f"{topic}'s metadata")
    consumer.subscribe([topic])
    try:
        wait_until(lambda: consumer.poll(timeout_ms=100) is not None and consumer.assignment(),
                   timeout=60, what="the modern member's assignment", every=0)
    except BaseException:
        consumer.close()
        raise
    return consumer


def test_offsets_writes_are_refused_while_the_group_has_active_members_in_kafka(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
    capsys: pytest.CaptureFixture[str], tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kafka takes a group's offsets from outside only while it has no member: refused
    before anything is written (--force is about ZooKeeper's members), and said clearly
    when a member joins between the check and the commit."""
    from zkconsumer.ops.kafka_offsets import _KafkaGroups

    topic = topic_factory(names.topic, 1)
    g = names.group
    produce(stack.bootstrap, topic, [(0, None, b"x")] * 4)
    seed(zk, g, {(topic, 0): 3})
    kafka_commit(stack.bootstrap, g, {(topic, 0): 3})
    zkc = ["--zookeeper", stack.zookeeper]
    reset = ["offsets", "reset", *zkc, "--group", g, "--topic", topic, "--to", "earliest"]
    offsets = tmp_path / "offsets.txt"
    offsets.write_text(f"{zp.offset_path(g, topic, 0)}:1\n")
    imp = ["offsets", "import", *zkc, "--input", str(offsets)]
    modern = modern_member(stack, g, topic)
    try:
        before = tree(zk, zp.group_dir(g))
        for argv, action in ((reset, "reset offsets"), (imp, "import offsets")):
            for extra in ([], ["--force"], ["--dry-run"]):
                line = fails(capsys, *argv, *extra)
                command = "offsets " + action.split()[0]
                assert line.startswith(f"zkconsumer {command}: refusing to {action}: group "
                                       f"'{g}' has 1 active member in Kafka (modern-"), line
                assert line.endswith("), and Kafka takes offsets for it only while it has "
                                     "none; stop it first"), line
        assert tree(zk, zp.group_dir(g)) == before
        assert kafka_read(stack.bootstrap, g) == {(topic, 0): 3}

        # A member joining after the check: ZooKeeper is written, Kafka refuses; said so.
        monkeypatch.setattr(_KafkaGroups, "members", lambda self, group: [])
        assert fails(capsys, *reset, "--execute") == (
            "zkconsumer offsets reset: ZooKeeper's offsets written, Kafka's not all: "
            f"a modern consumer joined group '{g}' meanwhile and Kafka refused its offsets; "
            "stop it and run this again")
        assert offset_znodes(zk, g, topic, 1) == {0: 0}
        assert kafka_read(stack.bootstrap, g) == {(topic, 0): 3}
        monkeypatch.undo()
    finally:
        modern.close()
    # Stopped (it leaves the group): run again, it finishes the job.
    wait_until(lambda: run(capsys, *reset, "--execute")[0] == 0, 30,
               "the reset once the member left")
    assert kafka_read(stack.bootstrap, g) == {(topic, 0): 0}


def test_offsets_writes_are_refused_when_kafka_cannot_be_asked(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
    capsys: pytest.CaptureFixture[str], tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whether the group has offsets in Kafka unknown: refused, unless --zookeeper-only."""
    from kafka.errors import GroupAuthorizationFailedError

    from zkconsumer.ops.kafka_offsets import _KafkaGroups

    topic = topic_factory(names.topic, 1)
    g = names.group
    produce(stack.bootstrap, topic, [(0, None, b"x")] * 3)
    seed(zk, g, {(topic, 0): 1})
    kafka_commit(stack.bootstrap, g, {(topic, 0): 3})
    zkc = ["--zookeeper", stack.zookeeper]
    offsets = tmp_path / "offsets.txt"
    offsets.write_text(f"{zp.offset_path(g, topic, 0)}:2\n")
    imp = ["offsets", "import", *zkc, "--input", str(offsets)]
    dead = f"127.0.0.1:{free_port()}"
    refused = (f"zkconsumer offsets {{0}}: refusing to {{0}} offsets: cannot ask Kafka whether "
               f"group '{g}' has offsets there (members with offsets.storage=kafka resume from "
               "those): {1}; --zookeeper-only writes ZooKeeper's alone")
    before = tree(zk, zp.group_dir(g))
    unreachable = f"cannot reach any broker ({dead}: Connection refused)"
    for extra in ([], ["--dry-run"]):
        assert fails(capsys, *imp, "--bootstrap-server", dead, *extra) == refused.format(
            "import", unreachable)

    # The brokers answer, but not about the group (an ACL, say).
    def denied(self: Any, group: str) -> Any:
        raise GroupAuthorizationFailedError(f"group {group}")

    monkeypatch.setattr(_KafkaGroups, "offsets", denied)
    reset = ["offsets", "reset", *zkc, "--group", g, "--topic", topic, "--to", "earliest",
             "--execute"]
    assert fails(capsys, *reset) == refused.format(
        "reset", f"[Error 30] GroupAuthorizationFailedError: group {g}")
    assert tree(zk, zp.group_dir(g)) == before
    assert kafka_read(stack.bootstrap, g) == {(topic, 0): 3}
    monkeypatch.undo()

    # Its offsets read, but not whether it has active members (DescribeGroups refused):
    # refused the same, with the same way out.
    monkeypatch.setattr(_KafkaGroups, "members", denied)
    for argv, action in ((reset, "reset"), (imp, "import")):
        assert fails(capsys, *argv) == (
            f"zkconsumer offsets {action}: refusing to {action} offsets: cannot ask Kafka "
            f"whether group '{g}', which has offsets there, has active members: [Error 30] "
            f"GroupAuthorizationFailedError: group {g}; --zookeeper-only writes ZooKeeper's "
            "alone")
    assert tree(zk, zp.group_dir(g)) == before
    assert kafka_read(stack.bootstrap, g) == {(topic, 0): 3}

    # --zookeeper-only: ZooKeeper alone, Kafka's offsets not asked. (The log ends are, for
    # a warning only: the brokers being unreachable, that check was not made.)
    rc, out, err = run(capsys, *reset, "--zookeeper-only")
    assert (rc, err) == (0, "")
    assert out.splitlines()[0] == f"reset group {g}, topic {topic} to earliest"
    rc, out, err = run(capsys, *imp, "--bootstrap-server", dead, "--zookeeper-only")
    assert (rc, err) == (0, "zkconsumer offsets import: warning: offsets past the log end not "
                            f"checked: {unreachable}\n")
    assert out == ("imported 1 offset of 1 group in one transaction (created 0, updated 1, "
                   "unchanged 0)\n")
    assert offset_znodes(zk, g, topic, 1) == {0: 2}
    assert kafka_read(stack.bootstrap, g) == {(topic, 0): 3}


def test_a_kafka_refusal_after_zookeeper_was_written_says_what_kafka_took(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
    capsys: pytest.CaptureFixture[str], tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kafka answers an offset commit per partition: a modern consumer joining meanwhile may
    find some of the group's offsets taken and the rest refused. The error said "Kafka's not
    all", not which were written. Running the command again finishes it."""
    from kafka.errors import UnknownMemberIdError

    from zkconsumer.ops.kafka_offsets import _KafkaGroups

    topic = topic_factory(names.topic, 3)
    g = names.group
    produce(stack.bootstrap, topic, [(p, None, b"x") for p in range(3) for _ in range(4)])
    seed(zk, g, {(topic, p): 1 for p in range(3)})
    kafka_commit(stack.bootstrap, g, {(topic, p): 1 for p in range(3)})

    class Joined:
        """The brokers as a member joins during the commit: partitions 0 and 1 committed
        (for real), partition 2 refused."""

        def __init__(self, admin: Any) -> None:
            self._admin = admin

        def alter_group_offsets(self, group: str, offsets: dict[Any, Any]) -> dict[Any, Any]:
            answer = self._admin.alter_group_offsets(
                group, {k: v for k, v in offsets.items() if k.partition < 2})
            return {**answer, **{k: UnknownMemberIdError for k in offsets if k.partition == 2}}

        def __getattr__(self, name: str) -> Any:
            return getattr(self._admin, name)

    real_init = _KafkaGroups.__init__

    def init(self: Any, servers: str, kafka: Any = None) -> None:
        real_init(self, servers, kafka)
        self._admin = Joined(self._admin)

    offsets = tmp_path / "offsets.txt"
    offsets.write_text("".join(f"{zp.offset_path(g, topic, p)}:3\n" for p in range(3)))
    imp = ["offsets", "import", "--zookeeper", stack.zookeeper, "--input", str(offsets)]
    with monkeypatch.context() as patched:
        patched.setattr(_KafkaGroups, "__init__", init)
        assert fails(capsys, *imp) == (
            "zkconsumer offsets import: ZooKeeper's offsets written, Kafka's not all: a modern "
            f"consumer joined group '{g}' meanwhile and Kafka refused 1 of its 3 offsets (the "
            f"other 2 were written: {topic}:0, {topic}:1); stop it and run this again")
    assert offset_znodes(zk, g, topic, 3) == {0: 3, 1: 3, 2: 3}
    assert kafka_read(stack.bootstrap, g) == {(topic, 0): 3, (topic, 1): 3, (topic, 2): 1}
    rc, out, err = run(capsys, *imp)
    assert (rc, err) == (0, "")
    assert out == ("imported 3 offsets of 1 group (created 0, updated 0, unchanged 3); and in "
                   f"Kafka, where group {g} has offsets: created 0, updated 1, unchanged 2\n")
    assert kafka_read(stack.bootstrap, g) == {(topic, p): 3 for p in range(3)}


def test_a_member_registering_during_a_reset_is_refused_in_a_resets_words(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Checked again just before the write, a member that registered meanwhile was refused
    in an import's words: "refusing to import offsets ...; pass --force to write anyway"."""
    from zkconsumer.ops import reset as _reset

    topic = topic_factory(names.topic, 1)
    g = names.group
    produce(stack.bootstrap, topic, [(0, None, b"x")] * 3)
    seed(zk, g, {(topic, 0): 2})
    real = _reset._kafka_writes

    def joining(*args: Any, **kwargs: Any) -> Any:  # between the checks and the write
        if not zk.exists(zp.id_path(g, "late")):
            fake_member(zk, g, "late", topic)
        return real(*args, **kwargs)

    monkeypatch.setattr(_reset, "_kafka_writes", joining)
    assert fails(capsys, "offsets", "reset", "--zookeeper", stack.zookeeper, "--group", g,
                 "--topic", topic, "--to", "earliest", "--execute") == (
        f"zkconsumer offsets reset: refusing to reset offsets: group '{g}' has 1 registered "
        "member (late); stop it first or pass --force")
    assert offset_znodes(zk, g, topic, 1) == {0: 2}


def test_export_warns_when_kafka_holds_other_offsets_than_the_lines(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The line format has no place for Kafka's offsets: an export of a group committing to
    Kafka silently held offsets its members do not resume from."""
    topic = topic_factory(names.topic, 3)
    g1, g2, g3 = names("kafka"), names("same"), names("zk")
    seed(zk, g1, {(topic, 0): 1, (topic, 1): 2})
    kafka_commit(stack.bootstrap, g1, {(topic, 0): 4, (topic, 1): 2, (topic, 2): 3})
    seed(zk, g2, {(topic, 0): 5})
    kafka_commit(stack.bootstrap, g2, {(topic, 0): 5})
    seed(zk, g3, {(topic, 0): 0})
    export = ["offsets", "export", "--zookeeper", stack.zookeeper, "--group", g1, "--group",
              g2, "--group", g3]
    lines = "".join(f"{zp.offset_path(g, topic, p)}:{o}\n"
                    for g, p, o in ((g1, 0, 1), (g1, 1, 2), (g2, 0, 5), (g3, 0, 0)))
    warning = (f"zkconsumer offsets export: warning: group {g1}: Kafka holds other offsets than "
               f"ZooKeeper for 2 partitions ({topic}:0 zookeeper 1 kafka 4, {topic}:2 "
               "zookeeper - kafka 3); the lines hold ZooKeeper's only\n")
    assert run(capsys, *export) == (0, lines, warning)
    rc, out, err = run(capsys, *export, "--json")
    assert (rc, err) == (0, warning) and len(json.loads(out)) == 4
    assert run(capsys, *export, "--zookeeper-only") == (0, lines, "")
    dead = f"127.0.0.1:{free_port()}"
    assert run(capsys, *export, "--bootstrap-server", dead) == (
        0, lines, "zkconsumer offsets export: warning: cannot compare with the offsets in "
        f"Kafka (the lines hold ZooKeeper's): cannot reach any broker ({dead}: Connection "
        "refused)\n")


# --------------------------------------------------------------------------------------
# offsets no member can resume from: past the log end, of missing topics or partitions


def test_describe_warns_about_offsets_past_the_log_end_or_of_missing_partitions(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An offset past the log end showed lag 0, and one of a topic or partition that does
    not exist showed dashes, with no word of either."""
    topic = topic_factory(names.topic, 5)
    gone = names("gone")
    produce(stack.bootstrap, topic, [(0, None, b"x")] * 3)
    g = names.group
    seed(zk, g, {(topic, 0): 10, (topic, 1): 4, (topic, 2): 2, (topic, 3): 1, (topic, 4): 0,
                 (topic, 7): 3, (gone, 0): 7})
    argv = ["groups", "describe", "--zookeeper", stack.zookeeper, "--group", g]
    warn = "zkconsumer groups describe: warning:"
    expected = (
        f"{warn} offsets past the log end on 4 partitions ({topic}:0 offset 10 log end 3, "
        f"{topic}:1 offset 4 log end 0, {topic}:2 offset 2 log end 0 and 1 more): lag shows "
        "0, but a member fetching there resets the offset by auto.offset.reset (smallest: to "
        "the log start; largest: to the log end)\n"
        f"{warn} offsets of topics not in /brokers/topics on 1 partition ({gone}:0 offset 7): "
        "nothing to consume; should the topic be created again, the members resume from "
        "these offsets (reset by auto.offset.reset where past its log end)\n"
        f"{warn} offsets of partitions their topics do not have on 1 partition ({topic}:7 "
        "offset 3): nothing to consume; should the partition be created again, the members "
        "resume from these offsets (reset by auto.offset.reset where past its log end)\n"
        f"{warn} total lag at least 0 (2 of 7 partitions unknown): lag unknown where a "
        "partition has no committed offset or no known log end\n")
    rc, out, err = run(capsys, *argv)
    assert (rc, err) == (0, expected)
    # --json says the same on stderr; the rows are as they were (lag 0 past the log end).
    rc, out, err = run(capsys, *argv, "--json")
    assert (rc, err) == (0, expected)
    assert [(r["topic"], r["partition"], r["lag"]) for r in json.loads(out)] == [
        (gone, 0, None), *((topic, p, 0) for p in range(5)), (topic, 7, None)]
    # The member list has nothing to do with offsets.
    assert run(capsys, *argv, "--members")[2] == ""
    # Offsets within the log: no warning.
    h = names("fine")
    seed(zk, h, {(topic, p): 3 if p == 0 else 0 for p in range(5)})
    rc, _, err = run(capsys, "groups", "describe", "--zookeeper", stack.zookeeper, "--group", h)
    assert (rc, err) == (0, "")


def _table_rows(text: str) -> list[list[str]]:
    """The cells of a table printed by the tools (the rule under the header left out)."""
    return [line.split() for line in text.splitlines()
            if line.strip() and not set(line.strip()) <= {"─", " "}]


def test_offsets_import_warns_about_offsets_no_member_can_resume_from_and_lists_a_dry_run(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
    capsys: pytest.CaptureFixture[str], tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Offsets of missing topics or partitions, or past the log end, were imported without a
    word (they still are: a backup restored may predate a topic's deletion); --dry-run
    printed counts only, for a command documented to show what it would create and update."""
    from zkconsumer.cli import offsets as _cli_offsets

    topic = topic_factory(names.topic, 2)
    produce(stack.bootstrap, topic, [(0, None, b"x")] * 3)
    g, h, gone = names("a"), names("b"), names("gone")
    seed(zk, g, {(topic, 0): 1, (topic, 1): 0})
    lines = [f"{zp.offset_path(g, topic, 0)}:2", f"{zp.offset_path(g, topic, 1)}:0",
             f"{zp.offset_path(h, topic, 0)}:9", f"{zp.offset_path(h, topic, 4)}:1",
             *(f"{zp.offset_path(h, gone, p)}:5" for p in range(4))]
    offsets = tmp_path / "offsets.txt"
    offsets.write_text("".join(f"{line}\n" for line in lines))
    imp = ["offsets", "import", "--zookeeper", stack.zookeeper, "--input", str(offsets)]
    warn = "zkconsumer offsets import: warning:"
    warnings = (
        f"{warn} 4 offsets of topics not in /brokers/topics ({lines[4]}, {lines[5]}, "
        f"{lines[6]} and 1 more): nothing to consume until the topic is created again; the "
        "members then resume there, or reset by auto.offset.reset where past its log end\n"
        f"{warn} 1 offset of partitions their topics do not have ({lines[3]}): nothing to "
        "consume until the partition is created again; the members then resume there, or "
        "reset by auto.offset.reset where past its log end\n"
        f"{warn} 1 offset past the log end ({lines[2]} (log end 3)): a member fetching there "
        "resets the offset by auto.offset.reset\n")
    before = tree(zk, zp.CONSUMERS)

    # The dry run: the summary, then every offset it would create or change, old and new.
    rc, out, err = run(capsys, *imp, "--dry-run")
    assert (rc, err) == (0, warnings)
    summary, table = out.split("\n", 1)
    assert summary == ("dry run: would import 8 offsets of 2 groups in one transaction "
                       "(create 6, update 1, unchanged 1); nothing written")
    assert _table_rows(table) == [
        ["GROUP", "TOPIC", "PARTITION", "OLD-OFFSET", "NEW-OFFSET"],
        [g, topic, "0", "1", "2"],
        [h, topic, "0", "-", "9"],
        [h, topic, "4", "-", "1"],
        *([h, gone, str(p), "-", "5"] for p in range(4)),
    ]
    # A long list is cut short, saying how much is left out.
    monkeypatch.setattr(_cli_offsets, "DRY_RUN_LIST_LIMIT", 2)
    rc, out, _ = run(capsys, *imp, "--dry-run")
    assert rc == 0 and len(_table_rows(out.split("\n", 1)[1])) == 1 + 2 + 1
    assert out.splitlines()[-1] == "... and 5 more (--json lists them all)"
    # --json says it is a dry run, with the old offset and the action of every entry.
    rc, out, err = run(capsys, *imp, "--dry-run", "--json")
    assert (rc, err) == (0, warnings)
    dry = {"dry_run": True}
    assert json.loads(out) == [
        {"group": g, "topic": topic, "partition": 0, "offset": 2, "old_offset": 1,
         "action": "update", **dry},
        {"group": g, "topic": topic, "partition": 1, "offset": 0, "old_offset": 0,
         "action": "unchanged", **dry},
        {"group": h, "topic": topic, "partition": 0, "offset": 9, "old_offset": None,
         "action": "create", **dry},
        {"group": h, "topic": topic, "partition": 4, "offset": 1, "old_offset": None,
         "action": "create", **dry},
        *({"group": h, "topic": gone, "partition": p, "offset": 5, "old_offset": None,
           "action": "create", **dry} for p in range(4)),
    ]
    assert tree(zk, zp.CONSUMERS) == before

    # The real run imports them all the same, with the same warnings; its --json is as was.
    rc, out, err = run(capsys, *imp, "--json")
    assert (rc, err) == (0, warnings)
    assert json.loads(out) == [
        dict(zip(("group", "topic", "partition", "offset"),
                 (*zp.parse_offset_line(line)[:3], int(line.rsplit(":", 1)[1])), strict=True))
        for line in lines]
    assert offset_znodes(zk, h, gone, 4) == {p: 5 for p in range(4)}
    # All in range now: no warning, and a dry run has nothing to list.
    good = tmp_path / "good.txt"
    good.write_text(f"{zp.offset_path(g, topic, 0)}:2\n")
    rc, out, err = run(capsys, "offsets", "import", "--zookeeper", stack.zookeeper, "--input",
                       str(good), "--dry-run")
    assert (rc, err) == (0, "")
    assert out == ("dry run: would import 1 offset of 1 group (create 0, update 0, "
                   "unchanged 1); nothing written\n")


# --------------------------------------------------------------------------------------
# console-consumer: the --consumer-property keys a flag sets


def test_console_consumer_takes_a_flags_property_when_the_flag_is_not_given(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each was refused with "conflicts with the flag that sets it; use the flag", naming no
    flag, even with the flag not given; Kafka's console consumer takes them then."""
    address = f"127.0.0.1:{free_port()}"  # refused before connecting
    base = ["console-consumer", "--zookeeper", address, "--topic", "t"]
    prefix = "zkconsumer console-consumer: --consumer-property"
    for extra, line in (
            (["--from-beginning", "--consumer-property", "auto.offset.reset=largest"],
             f"{prefix} auto.offset.reset=largest conflicts with --from-beginning, which sets "
             "auto.offset.reset=smallest (start at the earliest offset when the group has "
             "none committed); leave one out"),
            (["--timeout-ms", "100", "--consumer-property", "consumer.timeout.ms=200"],
             f"{prefix} consumer.timeout.ms=200 conflicts with --timeout-ms 100, which sets "
             "it (exit when no message arrives for that long); leave one out"),
            (["--group", "a", "--consumer-property", "group.id=b"],
             f"{prefix} group.id=b conflicts with --group a, which sets it; leave one out"),
            (["--consumer-property", "zookeeper.connect=elsewhere:2181"],
             f"{prefix} zookeeper.connect=elsewhere:2181 conflicts with --zookeeper {address}, "
             "which sets it (the tool reads and deletes the group there too); leave it out"),
            (["--consumer-property", "group.id=a/b"],
             "zkconsumer console-consumer: bad --consumer-property group.id: group must not "
             "contain '/': 'a/b'"),
    ):
        assert fails(capsys, *base, *extra) == line

    # Without the flags: from the beginning, ending when idle, in a group that is kept.
    topic = topic_factory(names.topic, 1)
    produce(stack.bootstrap, topic, [(0, None, f"m{i}".encode()) for i in range(3)])
    g = names.group
    rc, out, err = run(capsys, "console-consumer", "--zookeeper", stack.zookeeper, "--topic",
                       topic, "--consumer-property", "auto.offset.reset=smallest",
                       "--consumer-property", "consumer.timeout.ms=2000",
                       "--consumer-property", f"group.id={g}",
                       "--consumer-property", "auto.commit.interval.ms=100")
    assert rc == 0, err
    assert out.splitlines() == ["m0", "m1", "m2"]
    assert offset_znodes(zk, g, topic, 1) == {0: 3}
    # A value that is no value of the key is not hidden by the flag's.
    line = fails(capsys, "console-consumer", "--zookeeper", stack.zookeeper, "--topic", topic,
                 "--from-beginning", "--consumer-property", "auto.offset.reset=earliest")
    assert line.startswith("zkconsumer console-consumer: ") and "'smallest'" in line, line
    # The flag and an agreeing property together are fine.
    rc, out, err = run(capsys, "console-consumer", "--zookeeper", stack.zookeeper, "--topic",
                       topic, "--group", g, "--consumer-property", f"group.id={g}",
                       "--from-beginning", "--delete-consumer-offsets", "--consumer-property",
                       "auto.offset.reset=smallest", "--max-messages", "3")
    assert rc == 0, err
    assert out.splitlines() == ["m0", "m1", "m2"]


# --------------------------------------------------------------------------------------
# a chroot that does not exist


def test_a_mistyped_chroot_is_named_by_every_command(
    stack: StackInfo, zk: KazooClient, names: Any, capsys: pytest.CaptureFixture[str],
    tmp_path: Any,
) -> None:
    """Only writes noticed it: a read under a chroot that does not exist found nothing, and
    said "no consumer groups", exported nothing, or that the group or topic is not there."""
    chroot = f"/typo-{names.suffix}"
    zkc = ["--zookeeper", stack.zookeeper + chroot]
    offsets = tmp_path / "offsets.txt"
    offsets.write_text(f"{zp.offset_path(names.group, names.topic, 0)}:1\n")
    group = ["--group", names.group]
    for argv in (["groups", "list"], ["groups", "describe", *group],
                 ["groups", "delete", *group], ["offsets", "export"],
                 ["offsets", "import", "--input", str(offsets), "--dry-run"],
                 ["offsets", "import", "--input", str(offsets)],
                 ["offsets", "reset", *group, "--topic", names.topic, "--to", "earliest"],
                 ["verify-rebalance", *group],
                 ["console-consumer", "--topic", names.topic]):
        command = " ".join(argv[:2] if argv[0] in ("groups", "offsets") else argv[:1])
        assert fails(capsys, *argv, *zkc) == (
            f"zkconsumer {command}: the chroot {chroot} of the connect string does not "
            "exist; check --zookeeper"), argv
    assert zk.exists(chroot) is None
    # A chroot that exists is fine, empty or not.
    zk.ensure_path(chroot)
    try:
        assert run_json(capsys, "groups", "list", *zkc) == []
        rc, out, err = run(capsys, "offsets", "export", *zkc)
        assert (rc, out) == (0, "")
    finally:
        zk.delete(chroot, recursive=True)


def test_zookeeper_only_says_what_it_leaves_out(capsys: pytest.CaptureFixture[str]) -> None:
    """--zookeeper-only's help said "without asking Kafka" for a reset, which needs the
    brokers for the log ends all the same; import's said "the groups' offsets"."""
    readme = " ".join((open(os.path.join(REPO, "docs", "operations.md"), encoding="utf-8")
                       .read().split("\n## Operator tools\n")[1].split("\n## ")[0]).split())
    for action, whose in (("reset", "group's"), ("import", "groups'")):
        with pytest.raises(SystemExit):
            main(["offsets", action, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        said = f"without asking Kafka for the {whose} committed offsets"
        assert f"--zookeeper-only write ZooKeeper's offsets alone, {said} (the brokers" in text
        assert said in readme
    # The second exception to "a command that fails writes nothing": Kafka failing after
    # ZooKeeper was written.
    assert "exits with status 2 having written ZooKeeper's offsets" in readme


# --------------------------------------------------------------------------------------
# groups delete: the group's offsets in Kafka


def test_groups_delete_warns_when_kafka_still_holds_the_groups_offsets(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """It said "deleted group g: N znodes" while Kafka still held the group's offsets: a
    member with offsets.storage=kafka (or dual commit) restarted resumed from those, not
    from auto.offset.reset. They are not deleted (a migrated group lives there), but said."""

    t1, t2 = topic_factory(names("t1"), 2), topic_factory(names("t2"), 1)
    produce(stack.bootstrap, t1, [(p, None, b"x") for p in (0, 1) for _ in range(3)])
    g = names.group
    seed(zk, g, {(t1, 0): 1, (t1, 1): 2, (t2, 0): 0})
    kafka_commit(stack.bootstrap, g, {(t1, 0): 3, (t1, 1): 3, (t2, 0): 0})
    zkc = ["--zookeeper", stack.zookeeper]
    b = ["--bootstrap-server", stack.bootstrap]
    warn = "zkconsumer groups delete: warning:"
    also = ("a member with offsets.storage=kafka or dual commit resumes from them, not from "
            "auto.offset.reset; to delete them, once no modern consumer uses the group: "
            f"kafka-consumer-groups.sh --bootstrap-server {stack.bootstrap}")

    rc, out, err = run(capsys, "groups", "delete", *zkc, *b, "--group", g, "--topic", t1)
    assert (rc, out) == (0, f"deleted topic {t1} of group {g}: 3 znodes\n")
    assert err == (f"{warn} Kafka still holds committed offsets of group {g} of topic {t1} for "
                   f"2 partitions: {also} --delete-offsets --group {g} --topic {t1}\n")
    # The brokers registered in ZooKeeper when --bootstrap-server is left out.
    rc, out, err = run(capsys, "groups", "delete", *zkc, "--group", g)
    assert (rc, out) == (0, f"deleted group {g}: 4 znodes\n")
    assert err == (
        f"{warn} Kafka still holds committed offsets of group {g} for 3 partitions: "
        + also.replace(stack.bootstrap, find_bootstrap(zk)) + f" --delete --group {g}\n")
    assert zk.exists(zp.group_dir(g)) is None
    assert kafka_read(stack.bootstrap, g) == {(t1, 0): 3, (t1, 1): 3, (t2, 0): 0}

    # Nothing in Kafka: nothing said.
    h = names("h")
    seed(zk, h, {(t1, 0): 1})
    assert run(capsys, "groups", "delete", *zkc, "--group", h) == (
        0, f"deleted group {h}: 4 znodes\n", "")
    # A --bootstrap-server that is no address: refused before anything is deleted.
    seed(zk, h, {(t1, 0): 1})
    assert fails(capsys, "groups", "delete", *zkc, "--group", h, "--bootstrap-server",
                 "nohostport") == (
        "zkconsumer groups delete: bad broker address 'nohostport' (expected host:port)")
    assert zk.exists(zp.group_dir(h)) is not None
    zk.delete(zp.group_dir(h), recursive=True)
    # Kafka cannot be asked: deleted all the same, and said that it was not checked.
    seed(zk, h, {(t1, 0): 1})
    dead = f"127.0.0.1:{free_port()}"
    assert run(capsys, "groups", "delete", *zkc, "--group", h, "--bootstrap-server", dead) == (
        0, f"deleted group {h}: 4 znodes\n",
        f"{warn} not checked whether Kafka holds committed offsets of group {h} (a member "
        "with offsets.storage=kafka or dual commit resumes from those): cannot reach any "
        f"broker ({dead}: Connection refused)\n")


def test_console_consumer_delete_consumer_offsets_warns_about_kafkas_offsets(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--delete-consumer-offsets goes through the same delete: the same warning; a throwaway
    group, with nothing in Kafka, stays quiet."""

    topic = topic_factory(names.topic, 1)
    produce(stack.bootstrap, topic, [(0, None, b"m0"), (0, None, b"m1")])
    g = names.group
    seed(zk, g, {(topic, 0): 1})
    kafka_commit(stack.bootstrap, g, {(topic, 0): 2})
    zkc = ["--zookeeper", stack.zookeeper]
    rc, out, err = run(capsys, "console-consumer", *zkc, "--topic", topic, "--group", g,
                       "--from-beginning", "--delete-consumer-offsets", "--max-messages", "2")
    assert (rc, out) == (0, "m0\nm1\n"), err
    assert err == (
        f"zkconsumer console-consumer: warning: Kafka still holds committed offsets of group "
        f"{g} for 1 partition: a member with offsets.storage=kafka or dual commit resumes from "
        "them, not from auto.offset.reset; to delete them, once no modern consumer uses the "
        f"group: kafka-consumer-groups.sh --bootstrap-server {find_bootstrap(zk)} "
        f"--delete --group {g}\n"
        "Processed a total of 2 messages\n")
    # The throwaway group: nothing but the count.
    rc, out, err = run(capsys, "console-consumer", *zkc, "--topic", topic, "--from-beginning",
                       "--max-messages", "1")
    assert (rc, out, err) == (0, "m0\n", "Processed a total of 1 message\n")
    # Unless told to commit to Kafka: its offsets there are left, and said.
    rc, out, err = run(capsys, "console-consumer", *zkc, "--topic", topic, "--from-beginning",
                       "--max-messages", "1", "--consumer-property", "offsets.storage=kafka",
                       "--consumer-property", "auto.commit.enable=true")
    assert (rc, out) == (0, "m0\n"), err
    first, count = err.splitlines()
    assert first.startswith("zkconsumer console-consumer: warning: Kafka still holds committed "
                            "offsets of group console-consumer-"), err
    assert first.endswith(" for 1 partition: a member with offsets.storage=kafka or dual "
                          "commit resumes from them, not from auto.offset.reset; to delete "
                          "them, once no modern consumer uses the group: kafka-consumer-groups"
                          f".sh --bootstrap-server {find_bootstrap(zk)} --delete --group "
                          f"{first.split(' group ')[1].split()[0]}"), err
    assert count == "Processed a total of 1 message"


# --------------------------------------------------------------------------------------
# --force writes with live members


def test_forced_writes_say_the_live_members_overwrite_the_offsets(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
    capsys: pytest.CaptureFixture[str], tmp_path: Any,
) -> None:
    """reset and import --force wrote silently; the live members neither re-read the
    offsets nor keep them (a member's next commit overwrites them)."""
    topic = topic_factory(names.topic, 1)
    g = names.group
    seed(zk, g, {(topic, 0): 0})
    members = [f"{g}_{c}" for c in "abcd"]
    for m in members:
        fake_member(zk, g, m, topic)
    zkc = ["--zookeeper", stack.zookeeper]
    tail = ("they do not re-read the offsets, and a member's next commit after consuming "
            "overwrites them; stop them first for the new offsets to take effect; they are "
            "read when a member next claims the partition\n")
    reset = ["offsets", "reset", *zkc, "--group", g, "--topic", topic, "--to", "latest",
             "--force"]
    for extra in (["--execute"], ["--execute", "--json"], ["--dry-run"]):
        rc, _, err = run(capsys, *reset, *extra)
        assert (rc, err) == (
            0, f"zkconsumer offsets reset: warning: group {g} has 4 live members ({g}_a, "
            f"{g}_b, {g}_c and 1 more): {tail}"), extra
    lines = tmp_path / "offsets.txt"
    lines.write_text(f"{zp.offset_path(g, topic, 0)}:0\n")
    for m in members[1:]:
        zk.delete(zp.id_path(g, m))
    rc, _, err = run(capsys, "offsets", "import", *zkc, "--input", str(lines), "--force")
    assert (rc, err) == (
        0, f"zkconsumer offsets import: warning: group {g} has 1 live member ({g}_a): it does "
        "not re-read the offsets, and a member's next commit after consuming overwrites "
        "them; stop it first for the new offsets to take effect; they are read when a member "
        "next claims the partition\n")
    # No member: nothing to say.
    zk.delete(zp.id_path(g, members[0]))
    assert run(capsys, *reset, "--execute")[::2] == (0, "")
    assert run(capsys, "offsets", "import", *zkc, "--input", str(lines), "--force")[::2] == (
        0, "")


# --------------------------------------------------------------------------------------
# console-consumer: what can fail at start fails before --delete-consumer-offsets deletes


def test_console_consumer_fails_before_deleting_when_its_metrics_port_is_taken(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """It deleted the group, then failed with "[Errno 98] Address already in use", naming
    no key: the offsets were gone for nothing."""
    from zkconsumer import ZkConsumerError, ZookeeperConsumerConnector

    topic = topic_factory(names.topic, 1)
    g = names.group
    seed(zk, g, {(topic, 0): 1})
    before = tree(zk, zp.group_dir(g))
    argv = ["console-consumer", "--zookeeper", stack.zookeeper, "--topic", topic, "--group", g,
            "--from-beginning", "--delete-consumer-offsets", "--max-messages", "1"]
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = fails(capsys, *argv, "--consumer-property", f"metrics.port={port}")
    assert line == (f"zkconsumer console-consumer: cannot serve metrics on metrics.port={port}: "
                    "Address already in use; choose a free port (0: any)")
    assert tree(zk, zp.group_dir(g)) == before

    # A failure that can only come once the group is deleted (registering, the first
    # rebalance) says the offsets are gone.
    def broken(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise ZkConsumerError("the first rebalance failed")

    monkeypatch.setattr(ZookeeperConsumerConnector, "create_message_streams", broken)
    assert fails(capsys, *argv) == (
        f"zkconsumer console-consumer: the first rebalance failed (group {g}'s offsets were "
        "already deleted by --delete-consumer-offsets)")
    assert zk.exists(zp.group_dir(g)) is None
    # Without the flag, nothing was deleted: nothing said of it.
    seed(zk, g, {(topic, 0): 1})
    assert fails(capsys, *argv[:-4]) == (
        "zkconsumer console-consumer: the first rebalance failed")


# --------------------------------------------------------------------------------------
# names no consumer can use


def test_names_no_consumer_can_use_are_refused_or_named(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
    capsys: pytest.CaptureFixture[str], tmp_path: Any,
) -> None:
    """import wrote offsets of groups and topics no consumer can use (Kafka's and the legacy
    ConsumerConfig's rule: [a-zA-Z0-9._-]); describe and reset of such a group said "not
    found". A group that exists under such a name is still shown and deletable."""
    topic = topic_factory(names.topic, 1)
    zkc = ["--zookeeper", stack.zookeeper]
    g = names.group
    legal = "legal are a-z A-Z 0-9 . _ -"
    bad = tmp_path / "bad.txt"
    bad.write_text(f"{zp.offset_path(g, topic, 0)}:1\n"
                   f"/consumers/a b-{names.suffix}/offsets/{topic}/0:1\n"
                   f"/consumers/{g}/offsets/or:ders/0:1\n")
    before = tree(zk, zp.CONSUMERS)
    rc, out, err = run(capsys, "offsets", "import", *zkc, "--input", str(bad))
    assert (rc, out) == (2, "")
    assert err.splitlines() == [
        f"zkconsumer offsets import: {bad}: 2 malformed lines, nothing written",
        f"{bad}:2: 'a b-{names.suffix}' is not a legal group name: contains illegal characters "
        f"(' '); {legal}",
        f"{bad}:3: 'or:ders' is not a legal topic name: contains illegal characters (':'); "
        f"{legal}"]
    assert tree(zk, zp.CONSUMERS) == before
    long_topic = "t" * 250  # legal characters, but Kafka's Topic.validate allows 249
    assert fails(capsys, "offsets", "reset", *zkc, "--group", g, "--topic", long_topic,
                 "--to", "earliest") == (
        f"zkconsumer offsets reset: '{long_topic}' is not a legal topic name: 250 "
        f"characters, more than the 249 Kafka allows")

    odd = f"bad group-{names.suffix}"
    reset = ["offsets", "reset", *zkc, "--topic", topic, "--to", "earliest"]
    assert fails(capsys, *reset, "--group", odd) == (
        f"zkconsumer offsets reset: '{odd}' is not a legal group name: contains illegal "
        f"characters (' '); {legal}")
    assert fails(capsys, "offsets", "reset", *zkc, "--group", g, "--topic", "or:ders", "--to",
                 "earliest") == (
        f"zkconsumer offsets reset: 'or:ders' is not a legal topic name: contains illegal "
        f"characters (':'); {legal}")
    for argv in (["groups", "describe"], ["groups", "delete"], ["verify-rebalance"],
                 ["offsets", "export"]):
        command = " ".join(argv)
        assert fails(capsys, *argv, *zkc, "--group", odd) == (
            f"zkconsumer {command}: '{odd}' is not a legal group name: contains illegal "
            f"characters (' '); {legal} (and there is no /consumers/{odd})"), argv
    assert tree(zk, zp.CONSUMERS) == before

    # One a broken tool made: shown, exported (a backup keeps it) with a warning that import
    # refuses its lines, and deleted (not written: reset refuses it as above).
    seed(zk, odd, {(topic, 0): 0})
    rows = run_json(capsys, "groups", "describe", *zkc, "--group", odd)
    assert [(r["group"], r["partition"], r["offset"]) for r in rows] == [(odd, 0, 0)]
    rc, out, err = run(capsys, "offsets", "export", *zkc, "--group", odd, "--zookeeper-only")
    assert (rc, out) == (0, f"/consumers/{odd}/offsets/{topic}/0:0\n")
    assert err == (
        "zkconsumer offsets export: warning: 1 name no consumer can use, whose lines `offsets "
        "import` refuses (remove them from the file to import the rest): "
        f"'{odd}' is not a legal group name: contains illegal characters (' '); {legal}\n")
    assert run(capsys, "groups", "delete", *zkc, "--group", odd)[:2] == (
        0, f"deleted group {odd}: 4 znodes\n")


# --------------------------------------------------------------------------------------
# offsets reset of a group not there yet


def test_reset_seeds_a_group_not_there_yet(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """"group 'g' not found": the legacy UpdateOffsetsInZK wrote for any group id, and
    operators set offsets before a group's first start. Previewed with a note; written
    only with --create (a typo of a group's name is refused, naming the likely one)."""
    topic = topic_factory(names.topic, 2)
    produce(stack.bootstrap, topic, [(0, None, b"x")] * 3)
    g = names.group
    reset = ["offsets", "reset", "--zookeeper", stack.zookeeper, "--group", g, "--topic", topic,
             "--to", "latest"]
    note = (f"zkconsumer offsets reset: note: group {g} had no znodes in ZooKeeper (no "
            f"/consumers/{g}): its offsets ")
    rows = [{"group": g, "topic": topic, "partition": 0, "old_offset": None, "offset": 3},
            {"group": g, "topic": topic, "partition": 1, "old_offset": None, "offset": 0}]
    rc, out, err = run(capsys, *reset, "--dry-run", "--json")
    assert (rc, json.loads(out), err) == (0, rows, note + "would be created\n")
    rc, out, err = run(capsys, *reset, "--dry-run")
    assert (rc, err) == (0, note + "would be created\n")
    assert out.splitlines()[0] == f"would reset group {g}, topic {topic} to latest (dry run: " \
                                  "nothing written)"
    assert zk.exists(zp.group_dir(g)) is None
    rc, out, err = run(capsys, *reset, "--json", "--execute")
    assert (rc, out) == (2, "")
    assert err == (f"zkconsumer offsets reset: group {g!r} not found in ZooKeeper (no "
                   f"/consumers/{g}): pass --create to seed the offsets of a new group\n")
    assert zk.exists(zp.group_dir(g)) is None
    rc, out, err = run(capsys, *reset, "--json", "--execute", "--create")
    assert (rc, json.loads(out), err) == (0, rows, note + "were created\n")
    assert offset_znodes(zk, g, topic, 2) == {0: 3, 1: 0}
    # There now: no note, no --create needed.
    rc, out, err = run(capsys, *reset, "--execute")
    assert (rc, err) == (0, "")
    # A typo of its name: refused, naming it.
    typo = g + "3"
    rc, out, err = run(capsys, *reset[:5], typo, *reset[6:], "--execute")
    assert (rc, out) == (2, "")
    assert err == (f"zkconsumer offsets reset: group {typo!r} not found in ZooKeeper (no "
                   f"/consumers/{typo}) (did you mean {g!r}?): pass --create to seed the "
                   "offsets of a new group\n")


# --------------------------------------------------------------------------------------
# a member whose ids znode does not decode


def test_a_member_whose_registration_does_not_decode_is_one_whose_subscription_is_unknown(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`groups list` counted it, `describe` did not, `verify-rebalance` verified the rest as
    if it were not there (exit 0), and a raw logging line said so twice."""
    topic = topic_factory(names.topic, 2)
    g = names.group
    fake_member(zk, g, f"{g}_a", topic)
    zk.create(zp.id_path(g, f"{g}_b"), b"not json", ephemeral=True)
    zk.create(zp.owner_path(g, topic, 0), zp.encode_owner(f"{g}_a-0"), makepath=True)
    zk.create(zp.owner_path(g, topic, 1), zp.encode_owner(f"{g}_b-0"), makepath=True)
    seed(zk, g, {(topic, 0): 0, (topic, 1): 0})
    zkc = ["--zookeeper", stack.zookeeper]
    why = f"cannot decode consumer registration at {zp.id_path(g, f'{g}_b')}: invalid JSON ("

    assert [r for r in run_json(capsys, "groups", "list", *zkc) if r["group"] == g] == [
        {"group": g, "members": 2}]
    # describe (a real process: a logged line would show): counted, listed, said once.
    done = subprocess.run(_cli("groups", "describe", *zkc, "--group", g), capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == f"Group {g}: 2 registered members, total lag 0"
    [line] = done.stderr.splitlines()
    assert line.startswith(f"zkconsumer groups describe: warning: member {g}_b: subscription "
                           f"unknown ({why}") and line.endswith(
        "); only the partitions it owns or has offsets for are shown for it"), line
    members = run_json(capsys, "groups", "describe", *zkc, "--group", g, "--members")
    assert [(m["consumer_id"], m["pattern"], m["threads"], m["owned_partitions"])
            for m in members] == [(f"{g}_a", "static", [f"{g}_a-0"], 1),
                                  (f"{g}_b", "unknown", [f"{g}_b-0"], 1)]
    # verify: its part is not verified (exit 1), as for an unreadable regex.
    done = subprocess.run(_cli("verify-rebalance", *zkc, "--group", g), capture_output=True,
                          text=True, timeout=120, check=False)
    assert (done.returncode, done.stderr) == (1, "")
    assert done.stdout.startswith(
        f"rebalance not verified for group '{g}': 1 of 2 partitions checked are owned by live "
        f"threads; cannot verify the part of member {g}_b: its subscription is unknown "
        f"({why}"), done.stdout


# --------------------------------------------------------------------------------------
# groups describe: offsets below the log start


def test_describe_warns_about_offsets_below_the_log_start(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """describe_group classified with no log start: an offset below it (messages deleted by
    retention) was never warned about. The log starts are moved by DeleteRecords, as
    retention or `kafka-delete-records` moves them."""
    from tests.support import delete_records
    from zkconsumer.ops import describe_group

    topic = topic_factory(names.topic, 3)
    produce(stack.bootstrap, topic, [(p, None, b"x") for p in range(3) for _ in range(10)])
    g = names.group
    seed(zk, g, {(topic, 0): 2, (topic, 1): 7, (topic, 2): 4})
    tp = [TopicPartition(topic, p) for p in range(3)]
    # Every log start is 0 on a fresh topic, nothing to say.
    desc = describe_group(zk, g, stack.bootstrap)
    assert desc.log_starts == {t: 0 for t in tp}
    assert desc.bad_offsets == {} and desc.bad_offsets_warnings() == []

    delete_records(stack.bootstrap, topic, {0: 5, 1: 5, 2: 5})
    desc = describe_group(zk, g, stack.bootstrap)
    assert desc.log_starts == {t: 5 for t in tp}
    assert [(r.partition, r.offset, r.log_end_offset, r.lag)
            for r in desc.bad_offsets["below_log_start"]] == [(0, 2, 10, 8), (2, 4, 10, 6)]
    expected = (
        f"offsets below the log start on 2 partitions ({topic}:0 offset 2 log start 5, "
        f"{topic}:2 offset 4 log start 5): the messages there were deleted (retention) and "
        "the lag counts them, but a member fetching there resets the offset by "
        "auto.offset.reset (smallest: to the log start; largest: to the log end)")
    assert desc.bad_offsets_warnings() == [expected]

    # The command says it, --json too (its rows as they were).
    for extra in ([], ["--json"]):
        rc, out, err = run(capsys, "groups", "describe", "--zookeeper", stack.zookeeper,
                           "--group", g, *extra)
        assert (rc, err) == (0, f"zkconsumer groups describe: warning: {expected}\n")
    assert sorted(json.loads(out)[0]) == sorted(
        ["group", "topic", "partition", "offset", "log_end_offset", "lag", "owner",
         "offset_source", "zookeeper_offset", "kafka_offset", "time_lag"])

    # The log starts not read: said, once the log ends were.
    from zkconsumer.ops.kafka_offsets import _KafkaGroups

    def refused(self: Any, servers: str, tps: Any) -> dict[TopicPartition, int]:
        raise RuntimeError("ListOffsets failed")

    monkeypatch.setattr(_KafkaGroups, "log_starts", refused)
    rc, out, err = run(capsys, "groups", "describe", "--zookeeper", stack.zookeeper,
                       "--group", g)
    assert (rc, err) == (0, "zkconsumer groups describe: warning: offsets below the log start "
                            "not checked: log start offsets unknown: ListOffsets failed\n")


# --------------------------------------------------------------------------------------
# offsets export of a group whose offsets are Kafka's only


def test_export_says_when_a_groups_offsets_are_only_in_kafka(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
    capsys: pytest.CaptureFixture[str], tmp_path: Any,
) -> None:
    """"exported 0 offsets of 0 groups", with no word that the group's offsets are in Kafka."""
    topic = topic_factory(names.topic, 2)
    g = names.group
    zk.ensure_path(zp.ids_dir(g))  # a group committing to Kafka only: no offsets znode
    kafka_commit(stack.bootstrap, g, {(topic, 0): 1, (topic, 1): 0})
    out_file = tmp_path / "offsets.txt"
    rc, out, err = run(capsys, "offsets", "export", "--zookeeper", stack.zookeeper, "--group",
                       g, "--output", str(out_file))
    assert (rc, out) == (0, f"exported 0 offsets of 0 groups to {out_file}\n")
    assert err == (f"zkconsumer offsets export: warning: group {g} has no offsets in ZooKeeper "
                   "(nothing of it exported); its offsets in Kafka (2 partitions) are not in "
                   "the line format, which holds ZooKeeper's only\n")
    assert out_file.read_text() == ""


def test_flag_properties_are_compared_as_the_config_parses_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`auto.offset.reset=largest ` (padded) was not refused with --from-beginning: the raw
    string was compared, ConsumerConfig strips it. Likewise each key a flag sets."""
    address = f"127.0.0.1:{free_port()}"  # refused before connecting
    base = ["console-consumer", "--zookeeper", address, "--topic", "t"]
    prefix = "zkconsumer console-consumer: --consumer-property"
    assert fails(capsys, *base, "--from-beginning", "--consumer-property",
                 "auto.offset.reset= largest ") == (
        f"{prefix} auto.offset.reset= largest  conflicts with --from-beginning, which sets "
        "auto.offset.reset=smallest (start at the earliest offset when the group has none "
        "committed); leave one out")
    assert fails(capsys, *base, "--timeout-ms", "100", "--consumer-property",
                 "consumer.timeout.ms=+200 ").startswith(
        f"{prefix} consumer.timeout.ms=+200  conflicts with --timeout-ms 100")
    # Agreeing once parsed: no conflict (it goes on, to the unreachable ZooKeeper).
    for extra in (["--group", "a", "--consumer-property", "group.id= a "],
                  ["--consumer-property", f"zookeeper.connect= {address}/ "],
                  ["--timeout-ms", "100", "--consumer-property", "consumer.timeout.ms= 100"]):
        assert fails(capsys, *base, *extra, "--connect-timeout", "1") == (
            f"zkconsumer console-consumer: cannot connect to ZooKeeper at {address}: "
            "connection refused"), extra


# --------------------------------------------------------------------------------------
# tables on a terminal and in a pipe


def _on_pty(argv: list[str], columns: int) -> str:
    """Run ``zkconsumer argv`` with its stdout on a pseudo-terminal ``columns`` wide."""
    import pty

    leader, follower = pty.openpty()
    env = {**os.environ, "COLUMNS": str(columns), "PYTHONPATH": REPO}
    with reaped(subprocess.Popen(_cli(*argv), stdout=follower, stderr=subprocess.PIPE,
                                 env=env, cwd=REPO)) as proc:
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the child closed its end
                break
            if not chunk:
                break
            chunks.append(chunk)
        proc.wait(60)
        os.close(leader)
        assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    return b"".join(chunks).decode().replace("\r\n", "\n")


def test_describe_on_an_80_column_terminal_cuts_nothing(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """rich shrank the columns to "order..." and "..." at 80 columns; piped, it padded the
    lines to 400 columns."""
    topic = topic_factory(names.topic + "-orders100", 2)
    produce(stack.bootstrap, topic, [(0, None, b"x")] * 4)
    g = names.group
    member = f"{g}_worker-host-17.eu-west-1.compute.internal-1732780000000-9f3a2b1c"
    fake_member(zk, g, member, topic)
    seed(zk, g, {(topic, 0): 1, (topic, 1): 0})
    zk.create(zp.owner_path(g, topic, 0), zp.encode_owner(f"{member}-0"), ephemeral=True,
              makepath=True)
    argv = ["groups", "describe", "--zookeeper", stack.zookeeper, "--group", g]
    text = _on_pty(argv, 80)
    assert "..." not in text and "…" not in text
    assert f"OWNER           {member}-0" in text.splitlines()
    assert f"CONSUMER-ID   {member}" in text.splitlines()
    assert f"TOPIC           {topic}" in text.splitlines()
    # Wide enough: aligned columns, the same cells.
    wide = _on_pty(argv, 300).splitlines()
    assert wide[2].split()[:6] == [topic, "0", "1", "4", "3", f"{member}-0"]
    # Piped: one space between cells, nothing padded.
    rc, out, _ = run(capsys, *argv)
    assert rc == 0
    header, row0, row1 = out.splitlines()[1:4]
    assert header == "TOPIC PARTITION OFFSET LOG-END-OFFSET LAG OWNER TIME-LAG"
    assert row0.startswith(f"{topic} 0 1 4 3 {member}-0 ") and row0.endswith("s")
    assert row1 == f"{topic} 1 0 0 0 - 0.0s"
    assert out.splitlines()[-2:] == ["CONSUMER-ID PATTERN SUBSCRIPTION THREADS PARTITIONS",
                                     f"{member} static {topic}:1 1 1"]


# --------------------------------------------------------------------------------------
# failures in one line


#: Runs ``zkconsumer ARGV...`` (sys.argv[2:]) in a process whose ZooKeeper (the stack in
#: the directory sys.argv[1]) is stopped as soon as the command has connected.
_LOSE_ZOOKEEPER = """
import sys
from zkconsumer import cli
from zkconsumer.stack.local import LocalStack
from zkconsumer.zk import session
real = session.connect
def connect_then_lose_zookeeper(*args, **kwargs):
    client = real(*args, **kwargs)
    LocalStack(sys.argv[1]).stop("zookeeper")
    return client
session.connect = connect_then_lose_zookeeper
sys.exit(cli.main(sys.argv[2:]))
"""


def test_zookeeper_lost_mid_command_is_one_line_without_kazoos_warnings(tmp_path: Any) -> None:
    """kazoo's timestamped WARNING lines came first (three of them, then 'ConnectionLoss');
    -v still shows them."""
    from zkconsumer.stack.local import LocalStack

    stack = LocalStack(tmp_path / "zk")
    stack.zk_port = free_port()
    try:
        for verbose in ([], ["-v"]):
            stack.start("zookeeper")
            argv = [*verbose, "groups", "list", "--zookeeper", stack.zookeeper,
                    "--connect-timeout", "2"]
            done = subprocess.run(
                [sys.executable, "-c", _LOSE_ZOOKEEPER, str(stack.dir), *argv],
                capture_output=True, text=True, timeout=60, cwd=REPO,
                env={**os.environ, "PYTHONPATH": REPO})
            assert (done.returncode, done.stdout) == (2, ""), done.stderr
            lines = done.stderr.splitlines()
            if not verbose:
                assert lines == [
                    f"zkconsumer groups list: ZooKeeper at {stack.zookeeper} failed: "
                    "ConnectionLoss (the connection was lost mid-command and not "
                    "re-established within 2 s)"]
            else:
                assert any("WARNING" in line and "kazoo" in line for line in lines), lines
                assert lines[-1].startswith(f"zkconsumer groups list: ZooKeeper at "
                                            f"{stack.zookeeper} failed: ConnectionLoss")
            stack.stop("zookeeper")
    finally:
        stack.down()


def test_a_refused_or_unresolvable_server_fails_at_once(
    stack: StackInfo, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each waited out the whole --connect-timeout (10 s) before failing."""
    refused = f"127.0.0.1:{free_port()}"
    start = time.monotonic()
    assert fails(capsys, "groups", "list", "--zookeeper", refused) == (
        f"zkconsumer groups list: cannot connect to ZooKeeper at {refused}: connection refused")
    assert fails(capsys, "groups", "list", "--zookeeper", f"no-such-host.invalid:2181,{refused}"
                 ) == ("zkconsumer groups list: cannot connect to ZooKeeper at "
                       f"no-such-host.invalid:2181,{refused}: no-such-host.invalid:2181: cannot "
                       f"resolve host 'no-such-host.invalid'; {refused}: connection refused")
    assert fails(capsys, "migrate", "status", "--zookeeper", stack.zookeeper, "--group", "g",
                 "--bootstrap-server", refused) == (
        f"zkconsumer migrate status: cannot connect to the brokers at {refused}: {refused}: "
        "Connection refused")
    assert fails(capsys, "migrate", "status", "--zookeeper", stack.zookeeper, "--group", "g",
                 "--bootstrap-server", "no-such-host.invalid:9092") == (
        "zkconsumer migrate status: cannot connect to the brokers at no-such-host.invalid:9092: "
        "no-such-host.invalid:9092: cannot resolve host 'no-such-host.invalid'")
    assert time.monotonic() - start < 8


# --------------------------------------------------------------------------------------
# offsets import: every format export writes, every error on its own line


def test_offsets_import_reads_what_export_json_writes(
    stack: StackInfo, zk: KazooClient, names: Any, capsys: pytest.CaptureFixture[str],
    tmp_path: Any,
) -> None:
    """It read the line format only: `offsets export --json` could not be imported."""
    zkc = ["--zookeeper", stack.zookeeper]
    g, topic = names.group, names.topic
    seed(zk, g, {(topic, 0): 7, (topic, 1): 2**63 - 1})
    rc, out, _ = run(capsys, "offsets", "export", *zkc, "--group", g, "--json",
                     "--zookeeper-only")
    assert rc == 0
    saved = tmp_path / "offsets.json"
    saved.write_text(out)
    assert run(capsys, "groups", "delete", *zkc, "--group", g)[0] == 0
    rc, out, err = run(capsys, "offsets", "import", *zkc, "--input", str(saved),
                       "--zookeeper-only")
    assert (rc, out) == (0, "imported 2 offsets of 1 group in one transaction (created 2, "
                            "updated 0, unchanged 0)\n"), err
    assert [zk.get(zp.offset_path(g, topic, p))[0] for p in (0, 1)] == [b"7", b"%d" % (2**63 - 1)]


def test_offsets_import_names_negative_and_overflowing_offsets_one_error_a_line(
    stack: StackInfo, zk: KazooClient, names: Any, capsys: pytest.CaptureFixture[str],
    tmp_path: Any,
) -> None:
    """Seven bad lines came as one line of about 1,000 characters, and -5 or 2**63 were
    'not /consumers/<group>/offsets/<topic>/<partition>:<offset>'."""
    zkc = ["--zookeeper", stack.zookeeper]
    g, topic = names.group, names.topic
    bad = tmp_path / "bad.txt"
    bad.write_text(f"/consumers/{g}/offsets/{topic}/0:-5\n"
                   f"/consumers/{g}/offsets/{topic}/1:{2**63}\n"
                   f"/consumers/{g}/offsets/{topic}/2:-1\n")
    rc, out, err = run(capsys, "offsets", "import", *zkc, "--input", str(bad))
    assert (rc, out) == (2, "")
    assert err.splitlines() == [
        f"zkconsumer offsets import: {bad}: 2 malformed lines, nothing written",
        f"{bad}:1: offset -5 is negative: an offset is the next message's position, from 0 "
        "(only -1, 'no offset', is allowed below 0)",
        f"{bad}:2: offset {2**63} does not fit in a signed 64-bit integer (the largest is "
        f"{2**63 - 1})"]
    # The same in JSON, each entry named by its number.
    bad_json = tmp_path / "bad.json"
    bad_json.write_text(json.dumps([
        {"group": g, "topic": topic, "partition": 0, "offset": -5},
        {"group": g, "topic": topic, "partition": 1, "offset": 1},
        {"group": g, "topic": topic, "partition": "x", "offset": 1}]))
    rc, out, err = run(capsys, "offsets", "import", *zkc, "--input", str(bad_json))
    assert err.splitlines() == [
        f"zkconsumer offsets import: {bad_json}: 2 malformed entries, nothing written",
        f"{bad_json}:1: offset -5 is negative: an offset is the next message's position, "
        "from 0 (only -1, 'no offset', is allowed below 0)",
        f"{bad_json}:3: partition must be an integer from 0 to 2147483647, got 'x'"]
    # Many: the first 20, then how many more.
    many = tmp_path / "many.txt"
    many.write_text("".join(f"/consumers/{g}/offsets/{topic}/{p}:-{p + 2}\n" for p in range(27)))
    rc, out, err = run(capsys, "offsets", "import", *zkc, "--input", str(many))
    lines = err.splitlines()
    assert rc == 2 and len(lines) == 1 + 20 + 1
    assert lines[0] == (f"zkconsumer offsets import: {many}: 27 malformed lines, nothing "
                        "written (the first 20 follow)")
    assert lines[20].startswith(f"{many}:20: offset -21 is negative")
    assert lines[21] == f"{many}: and 7 more malformed lines"
    assert zk.exists(zp.group_dir(g)) is None


def test_offsets_reset_previews_unless_execute_with_kafkas_target_flags(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """It wrote unless --dry-run was given, and knew --to only."""
    topic = topic_factory(names.topic, 2)
    produce(stack.bootstrap, topic, [(0, None, b"x")] * 6 + [(1, None, b"y")] * 2)
    g = names.group
    seed(zk, g, {(topic, 0): 3, (topic, 1): 1})
    base = ["offsets", "reset", "--zookeeper", stack.zookeeper, "--group", g, "--topic", topic]

    def rows(*argv: str) -> list[tuple[int, int | None, int]]:
        out = run_json(capsys, *base, *argv)
        return [(r["partition"], r["old_offset"], r["offset"]) for r in out]

    before = tree(zk, zp.group_dir(g))
    rc, out, err = run(capsys, *base, "--to-earliest")
    assert (rc, err) == (0, "")
    assert out.splitlines() == [
        f"would reset group {g}, topic {topic} to earliest (preview: nothing written; "
        "--execute writes)",
        "TOPIC PARTITION OLD-OFFSET NEW-OFFSET", f"{topic} 0 3 0", f"{topic} 1 1 0"]
    assert rows("--to-latest") == [(0, 3, 6), (1, 1, 2)]
    assert rows("--to-offset", "5") == [(0, 3, 5), (1, 1, 2)]
    assert rows("--to-datetime", "2999-01-01T00:00:00Z") == [(0, 3, 6), (1, 1, 2)]
    assert tree(zk, zp.group_dir(g)) == before  # previews only

    rc, out, err = run(capsys, *base, "--shift-by", "-2", "--execute")
    assert rc == 0
    assert out.splitlines()[0] == (f"reset group {g}, topic {topic} to the committed offsets "
                                   "shifted by -2")
    assert err == ("zkconsumer offsets reset: note: the committed offsets shifted by -2 is "
                   f"outside the log of 1 of 2 partitions, clamped: {topic}:1 to 0 (log start)\n")
    assert offset_znodes(zk, g, topic, 2) == {0: 1, 1: 0}
    assert rows("--shift-by", "+4", "--execute") == [(0, 1, 5), (1, 0, 2)]
    assert offset_znodes(zk, g, topic, 2) == {0: 5, 1: 2}

    # One target, and no shift without a committed offset.
    with pytest.raises(SystemExit):
        main([*base, "--to-earliest", "--to-latest"])
    assert "not allowed with argument" in capsys.readouterr().err
    h = names("fresh")
    assert fails(capsys, "offsets", "reset", "--zookeeper", stack.zookeeper, "--group", h,
                 "--topic", topic, "--shift-by", "1") == (
        f"zkconsumer offsets reset: cannot shift the offsets of group '{h}': no committed "
        f"offset for {topic}:0, {topic}:1 (set one with --to-earliest, --to-latest or "
        "--to-offset)")
    assert fails(capsys, *base, "--to-datetime", "latest") == (
        "zkconsumer offsets reset: --to-datetime 'latest' is not an ISO-8601 date-time "
        "(e.g. 2024-05-01T12:00:00Z)")


def test_console_consumer_waits_for_a_topic_created_later(
    stack: StackInfo, names: Any, topic_factory: Any,
) -> None:
    topic = names.topic
    argv = _cli("console-consumer", "--zookeeper", stack.zookeeper, "--topic", topic,
                "--from-beginning", "--max-messages", "2")
    with reaped(subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, cwd=REPO,
                                 env={**os.environ, "PYTHONPATH": REPO})) as proc:
        assert proc.stderr is not None
        assert proc.stderr.readline() == (
            f"zkconsumer console-consumer: topic {topic} does not exist yet (no "
            f"/brokers/topics/{topic}); waiting for it to be created\n")
        topic_factory(topic, 1)
        produce(stack.bootstrap, topic, [(0, None, b"first"), (0, None, b"second")])
        out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out) == (0, "first\nsecond\n"), err
    assert err == "Processed a total of 2 messages\n"
