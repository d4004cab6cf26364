"""Kafka's own ZooKeeper-era tools on the znodes of a zkconsumer group, and zkconsumer's tools
on what Kafka's wrote: the figures must agree.

* ``kafka.admin.ConsumerGroupCommand --zookeeper`` (Kafka 1.1.1): list, describe, delete;
* ``kafka.tools.ConsumerOffsetChecker`` (Kafka 0.11.0.3, its last release);
* ``kafka.tools.VerifyConsumerRebalance``, ``ExportZkOffsets`` / ``ImportZkOffsets`` and
  ``UpdateOffsetsInZK`` (Kafka 1.1.1).

The group: a zkconsumer member consumed and committed 10 messages of each of 3 partitions,
then 2 more were produced to each, and a member that commits nothing owns them now (lag 2).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from tests.conftest import Names
from tests.jvm import MemberProcess, py_member
from tests.support import StackInfo, produce, wait_until
from tools.legacy_jvm import LOG4J, classpath
from zkconsumer.zk import paths as zp

LEGACY = {"zookeeper.session.timeout.ms": "3000", "auto.offset.reset": "smallest"}


def kafka_tool(release: str, main: str, *args: str, check: bool = True
               ) -> subprocess.CompletedProcess[str]:
    """One of Kafka's command-line tools, run from its release's classpath."""
    done = subprocess.run(
        ["java", "-Xmx160m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
         f"-Dlog4j.configuration=file:{LOG4J}", "-cp", classpath(release), main, *args],
        capture_output=True, text=True, timeout=120)
    if check and done.returncode != 0:
        raise AssertionError(f"{main} {' '.join(args)} failed ({done.returncode}):\n"
                             f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return done


def zkconsumer_cli(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "zkconsumer", *args], capture_output=True,
                          text=True, timeout=120)
    if check and done.returncode != 0:
        raise AssertionError(f"zkconsumer {' '.join(args)} failed ({done.returncode}):\n"
                             f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return done


def table(text: str, header: str) -> list[list[str]]:
    """The rows after the line starting with ``header``, split on whitespace."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    return [line.split() for line in lines[start + 1:] if line.strip()]


@dataclass
class Group:
    name: str
    topic: str
    member: MemberProcess
    zookeeper: str


@pytest.fixture
def lagging_group(stack: StackInfo, names: Names, topic_factory: Any) -> Iterator[Group]:
    topic = topic_factory(names.topic, 3)
    produce(stack.bootstrap, topic, [(i % 3, None, b"x") for i in range(30)])
    with py_member(stack.zookeeper, names.group, topics=[topic], streams=2, commit="each",
                   props=LEGACY) as first:
        first.wait_ready()
        wait_until(lambda: len(first.handed()) >= 30, 60, "30 messages consumed")
        first.terminate()
    produce(stack.bootstrap, topic, [(i % 3, None, b"y") for i in range(6)])
    with py_member(stack.zookeeper, names.group, topics=[topic], streams=2, commit="none",
                   props=LEGACY) as owner:
        owner.wait_ready()
        wait_until(lambda: len(owner.handed()) >= 6, 60, "6 messages handed out")
        yield Group(names.group, topic, owner, stack.zookeeper)


def ours_described(g: Group) -> dict[int, tuple[int, int, int, str]]:
    """partition -> (offset, log end, lag, owning thread), from zkconsumer's describe."""
    rows = json.loads(zkconsumer_cli("groups", "describe", "--zookeeper", g.zookeeper,
                                     "--group", g.name, "--json").stdout)
    return {r["partition"]: (r["offset"], r["log_end_offset"], r["lag"], r["owner"])
            for r in rows if r["topic"] == g.topic}


def test_consumer_group_command_and_offset_checker_agree_with_describe(
    lagging_group: Group
) -> None:
    g = lagging_group
    ours = ours_described(g)
    assert {p: row[:3] for p, row in ours.items()} == {p: (10, 12, 2) for p in range(3)}

    listed = kafka_tool("1.1.1", "kafka.admin.ConsumerGroupCommand", "--zookeeper",
                        g.zookeeper, "--list").stdout.split()
    ours_listed = [r["group"] for r in json.loads(
        zkconsumer_cli("groups", "list", "--zookeeper", g.zookeeper, "--json").stdout)]
    assert g.name in listed and g.name in ours_listed

    # ConsumerGroupCommand names the owning consumer, without the thread number.
    described = kafka_tool("1.1.1", "kafka.admin.ConsumerGroupCommand", "--zookeeper",
                           g.zookeeper, "--describe", "--group", g.name).stdout
    theirs = {int(r[1]): (int(r[2]), int(r[3]), int(r[4]), r[5])
              for r in table(described, "TOPIC") if r[0] == g.topic}
    assert theirs == {p: (o, e, lag, zp.thread_consumer_id(owner))
                      for p, (o, e, lag, owner) in ours.items()}

    # ConsumerOffsetChecker names the owning thread, as zkconsumer does.
    checked = kafka_tool("0.11.0.3", "kafka.tools.ConsumerOffsetChecker", "--zookeeper",
                         g.zookeeper, "--group", g.name).stdout
    theirs = {int(r[2]): (int(r[3]), int(r[4]), int(r[5]), r[6])
              for r in table(checked, "Group") if r[1] == g.topic}
    assert theirs == ours


def test_verify_consumer_rebalance_agrees(lagging_group: Group, zk: KazooClient) -> None:
    g = lagging_group
    out = kafka_tool("1.1.1", "kafka.tools.VerifyConsumerRebalance", "--zookeeper.connect",
                     g.zookeeper, "--group", g.name).stdout
    assert "Rebalance operation successful" in out
    assert zkconsumer_cli("verify-rebalance", "--zookeeper", g.zookeeper,
                          "--group", g.name).returncode == 0
    # a partition of a live member's topic without an owner: both tools say so
    zk.delete(zp.owner_path(g.name, g.topic, 0))
    out = kafka_tool("1.1.1", "kafka.tools.VerifyConsumerRebalance", "--zookeeper.connect",
                     g.zookeeper, "--group", g.name).stdout
    assert "Rebalance operation successful" not in out
    assert zkconsumer_cli("verify-rebalance", "--zookeeper", g.zookeeper, "--group", g.name,
                          check=False).returncode == 1


def test_export_and_import_files_go_both_ways(
    lagging_group: Group, tmp_path: Path, names: Names
) -> None:
    g = lagging_group
    theirs, ours = tmp_path / "kafka.txt", tmp_path / "zkconsumer.txt"
    kafka_tool("1.1.1", "kafka.tools.ExportZkOffsets", "--zkconnect", g.zookeeper,
               "--group", g.name, "--output-file", str(theirs))
    zkconsumer_cli("offsets", "export", "--zookeeper", g.zookeeper, "--group", g.name,
                   "--output", str(ours))
    expected = {f"/consumers/{g.name}/offsets/{g.topic}/{p}:10" for p in range(3)}
    assert set(theirs.read_text().split()) == set(ours.read_text().split()) == expected

    # Kafka's file into a new group with zkconsumer, zkconsumer's into another with Kafka's
    moved = {name: tmp_path / f"{name}.txt" for name in (names("via-z"), names("via-k"))}
    for name, path in moved.items():
        path.write_text(theirs.read_text().replace(f"/consumers/{g.name}/",
                                                   f"/consumers/{name}/"))
    zkconsumer_cli("offsets", "import", "--zookeeper", g.zookeeper, "--zookeeper-only",
                   "--input", str(moved[names("via-z")]))
    kafka_tool("1.1.1", "kafka.tools.ImportZkOffsets", "--zkconnect", g.zookeeper,
               "--input-file", str(moved[names("via-k")]))
    for name in moved:
        exported = kafka_tool("1.1.1", "kafka.tools.ExportZkOffsets", "--zkconnect",
                              g.zookeeper, "--group", name, "--output-file",
                              str(tmp_path / "check.txt"))
        assert exported.returncode == 0
        assert set((tmp_path / "check.txt").read_text().split()) == {
            f"/consumers/{name}/offsets/{g.topic}/{p}:10" for p in range(3)}
        assert set(zkconsumer_cli("offsets", "export", "--zookeeper", g.zookeeper, "--group",
                                  name).stdout.split()) == {
            f"/consumers/{name}/offsets/{g.topic}/{p}:10" for p in range(3)}


def test_update_offsets_in_zk_and_delete(
    lagging_group: Group, tmp_path: Path, zk: KazooClient
) -> None:
    g = lagging_group
    g.member.terminate()
    props = tmp_path / "consumer.properties"
    props.write_text(f"zookeeper.connect={g.zookeeper}\ngroup.id={g.name}\n")
    for where, offset in (("earliest", 0), ("latest", 12)):
        kafka_tool("1.1.1", "kafka.tools.UpdateOffsetsInZK", where, str(props), g.topic)
        assert {p: row[0] for p, row in ours_described(g).items()} == dict.fromkeys(
            range(3), offset)

    deleted = kafka_tool("1.1.1", "kafka.admin.ConsumerGroupCommand", "--zookeeper",
                         g.zookeeper, "--delete", "--group", g.name).stdout
    assert f"Deleted all consumer group information for group '{g.name}'" in deleted
    assert zk.exists(zp.group_dir(g.name)) is None
    listed = [r["group"] for r in json.loads(
        zkconsumer_cli("groups", "list", "--zookeeper", g.zookeeper, "--json").stdout)]
    assert g.name not in listed


def _rows(text: str, header: str) -> list[list[str]]:
    """The header line and the rows after it, split on whitespace (the column widths are
    the only thing that may differ)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:1] == header.split()[:1])
    return [line.split() for line in lines[start:] if line.strip()]


def test_the_kafka_style_entry_points_print_what_kafkas_tools_print(
    lagging_group: Group
) -> None:
    """`zkconsumer consumer-groups` and `zkconsumer consumer-offset-checker`, with Kafka's
    flags, against Kafka's own tools on the same group: the same lines, header and rows, but
    for the padding between columns."""
    g = lagging_group
    zk_args = ("--zookeeper", g.zookeeper)
    cases = [
        ("1.1.1", "kafka.admin.ConsumerGroupCommand", "consumer-groups", "TOPIC",
         (*zk_args, "--describe", "--group", g.name)),
        ("0.11.0.3", "kafka.tools.ConsumerOffsetChecker", "consumer-offset-checker", "Group",
         (*zk_args, "--group", g.name)),
    ]
    for release, main, ours_name, header, args in cases:
        theirs = _rows(kafka_tool(release, main, *args).stdout, header)
        ours = _rows(zkconsumer_cli(ours_name, *args).stdout, header)
        assert ours == theirs, (ours_name, ours, theirs)
    listed = kafka_tool("1.1.1", "kafka.admin.ConsumerGroupCommand", *zk_args, "--list")
    ours_listed = zkconsumer_cli("consumer-groups", *zk_args, "--list")
    assert g.name in ours_listed.stdout.split()
    assert set(ours_listed.stdout.split()) == set(listed.stdout.split())
