"""Kafka's ZooKeeper-era tools under their own flags: the output compared with the formats
of Kafka's sources (ConsumerGroupCommand 1.1, ConsumerOffsetChecker 0.11, ExportZkOffsets,
ImportZkOffsets, UpdateOffsetsInZK, VerifyConsumerRebalance, ConsoleConsumer's
DefaultMessageFormatter), transcribed here as Java format strings."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from kazoo.client import KazooClient

from tests.support import StackInfo, produce
from zkconsumer.cli import main
from zkconsumer.zk import paths as zp

NOTE = ("Note: This will only show information about consumers that use ZooKeeper (not those "
        "using the Java consumer API).\n")


def java_format(fmt: str, *args: object) -> str:
    """Java's String.format for the ``%s`` and ``%-Ns`` the tools use (``%%`` unused)."""
    values = iter(args)

    def one(m: re.Match[str]) -> str:
        value = str(next(values))
        width = int(m.group(1)) if m.group(1) else 0
        return value.ljust(width)

    return re.sub(r"%-?(\d*)s", one, fmt)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def seed(zk: KazooClient, group: str, offsets: dict[tuple[str, int], int]) -> None:
    for (topic, partition), offset in offsets.items():
        zk.create(zp.offset_path(group, topic, partition), zp.encode_offset(offset),
                  makepath=True)


def member(zk: KazooClient, group: str, consumer_id: str, topic: str,
           owns: tuple[int, ...] = ()) -> None:
    """A registered member (ephemeral, the test's session) owning partitions ``owns``."""
    reg = zp.ConsumerRegistration.static({topic: 1}, int(time.time() * 1000))
    zk.create(zp.id_path(group, consumer_id), reg.encode(), ephemeral=True, makepath=True)
    for p in owns:
        zk.create(zp.owner_path(group, topic, p), zp.encode_owner(f"{consumer_id}-0"),
                  ephemeral=True, makepath=True)


@pytest.fixture
def group_on_topic(stack: StackInfo, zk: KazooClient, names: Any,
                   topic_factory: Any) -> tuple[str, str, str]:
    """Group g on a 3-partition topic (5, 2, 0 messages): offsets 1 and 2 committed on
    partitions 0 and 1, none on 2; member ``<g>_busy`` owns 0 and 1, ``<g>_idle`` nothing."""
    topic = topic_factory(names.topic, 3)
    produce(stack.bootstrap, topic, [(0, None, b"a")] * 5 + [(1, None, b"b")] * 2)
    g = names.group
    seed(zk, g, {(topic, 0): 1, (topic, 1): 2})
    member(zk, g, f"{g}_busy", topic, owns=(0, 1))
    member(zk, g, f"{g}_idle", topic)
    return g, topic, stack.zookeeper


def test_consumer_groups_list_and_describe_print_kafkas_lines(
    group_on_topic: tuple[str, str, str], capsys: pytest.CaptureFixture[str],
) -> None:
    g, topic, zk = group_on_topic
    rc, out, err = run(capsys, "consumer-groups", "--zookeeper", zk, "--list")
    assert (rc, err) == (0, NOTE)
    assert g in out.splitlines()  # one name a line, nothing else

    rc, out, err = run(capsys, "consumer-groups", "--zookeeper", zk, "--describe",
                       "--group", g)
    assert (rc, err) == (0, NOTE)
    topic_w, id_w = max(15, len(topic)), max(15, len(g) + 5)
    row = f"%-{topic_w}s %-10s %-15s %-15s %-15s %-{id_w}s "
    assert out.split("\n") == [
        f"Error: Could not fetch offset from zookeeper for group '{g}' partition "
        f"'[{topic},2]' due to missing offset data in zookeeper.",
        "",
        java_format(row, "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                    "CONSUMER-ID"),
        java_format(row, topic, 0, 1, 5, 4, f"{g}_busy"),
        java_format(row, topic, 1, 2, 2, 0, f"{g}_busy"),
        java_format(row, topic, 2, "-", 0, "-", "-"),
        java_format(row, "-", "-", "-", "-", "-", f"{g}_idle"),
        "",
    ]

    rc, out, err = run(capsys, "consumer-groups", "--zookeeper", zk, "--describe",
                       "--group", "no-such-group")
    assert (rc, out, err) == (2, "Error: The consumer group 'no-such-group' does not exist.\n",
                              NOTE)
    # Kafka's usage errors.
    with pytest.raises(SystemExit):
        main(["consumer-groups", "--zookeeper", zk, "--list", "--describe"])
    assert "Command must include exactly one action" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["consumer-groups", "--zookeeper", zk, "--list", "--bootstrap-server", "b:9092"])
    assert "Option [bootstrap-server] is not valid with [zookeeper]." in capsys.readouterr().err


def test_consumer_groups_delete_and_reset_offsets(
    stack: StackInfo, zk: KazooClient, group_on_topic: tuple[str, str, str],
    capsys: pytest.CaptureFixture[str], names: Any,
) -> None:
    g, topic, zkc = group_on_topic
    base = ["consumer-groups", "--zookeeper", zkc]
    rc, out, _ = run(capsys, *base, "--delete", "--group", g)
    assert (rc, out) == (
        2, f"Error: Delete for group '{g}' failed because its consumers are still active.\n")
    idle = names("idle")
    seed(zk, idle, {(topic, 0): 3})
    rc, out, _ = run(capsys, *base, "--delete", "--group", idle, "--group", names("none"))
    assert out == (f"Deleted all consumer group information for group '{idle}' in zookeeper.\n"
                   f"Error: Delete for group '{names('none')}' failed because group does not "
                   "exist.\n")
    assert zk.exists(zp.group_dir(idle)) is None

    # --reset-offsets (Kafka 1.1 refused it with --zookeeper): its table, a preview unless
    # --execute; refused while members are registered (a preview too, as Kafka's check of
    # the group's state) unless --force.
    reset = [*base, "--reset-offsets", "--group", g, "--topic", topic, "--to-earliest"]
    rc, out, err = run(capsys, *reset, "--dry-run")
    assert rc == 2 and "registered member" in err
    rc, out, err = run(capsys, *reset, "--dry-run", "--force")
    assert rc == 0
    assert out.split("\n") == [
        "", java_format("%-30s %-10s %-15s", "TOPIC", "PARTITION", "NEW-OFFSET"),
        *(java_format("%-30s %-10s %-15s", topic, p, 0) for p in range(3)), ""]
    assert zk.get(zp.offset_path(g, topic, 0))[0] == b"1"
    rc, out, err = run(capsys, *reset, "--execute", "--force")
    assert rc == 0 and zk.get(zp.offset_path(g, topic, 0))[0] == b"0"
    rc, out, err = run(capsys, *reset, "--force")
    assert err.startswith(NOTE + "WARN: No action will be performed as the --execute option "
                          "is missing.")


def test_consumer_offset_checker_prints_its_table_and_broker_info(
    group_on_topic: tuple[str, str, str], capsys: pytest.CaptureFixture[str],
) -> None:
    g, topic, zk = group_on_topic
    rc, out, err = run(capsys, "consumer-offset-checker", "--zookeeper", zk, "--group", g,
                       "--broker-info")
    assert (rc, err) == (0, "")
    line = "%-15s %-30s %-3s %-15s %-15s %-15s %s"
    lines = out.splitlines()
    assert lines[:4] == [
        java_format(line, "Group", "Topic", "Pid", "Offset", "logSize", "Lag", "Owner"),
        java_format(line, g, topic, 0, 1, 5, 4, f"{g}_busy-0"),
        java_format(line, g, topic, 1, 2, 2, 0, f"{g}_busy-0"),
        # The topic has offsets, this partition none: -1, as the checker put it.
        java_format(line, g, topic, 2, -1, 0, "unknown", "none"),
    ]
    assert lines[4] == "BROKER INFO"
    assert re.fullmatch(r"\d+ -> [^:]+:\d+", lines[5]) and len(lines) == 6
    # --topic: those topics, not the owners' (none here: Kafka's "Exiting due to").
    rc, out, _ = run(capsys, "consumer-offset-checker", "--zookeeper", zk, "--group", g,
                     "--topic", topic)
    assert (rc, out.splitlines()) == (0, lines[:4])
    # A group that does not exist: one line naming it (Kafka's tool said "Exiting due to:
    # ... NoNode for /consumers/none/owners", also for a group without owners).
    rc, out, err = run(capsys, "consumer-offset-checker", "--zookeeper", zk, "--group", "none")
    assert (rc, out) == (2, "")
    assert err == ("zkconsumer consumer-offset-checker: group 'none' not found in ZooKeeper "
                   "(no /consumers/none)\n")


def test_export_import_update_and_verify_as_the_legacy_tools(
    stack: StackInfo, zk: KazooClient, group_on_topic: tuple[str, str, str],
    capsys: pytest.CaptureFixture[str], tmp_path: Any, names: Any,
) -> None:
    g, topic, zkc = group_on_topic
    exported = tmp_path / "offsets"
    rc, out, err = run(capsys, "export-zk-offsets", "--zkconnect", zkc, "--group", g,
                       "--output-file", str(exported))
    assert (rc, out, err) == (0, "", "")
    assert exported.read_text() == (f"/consumers/{g}/offsets/{topic}/0:1\n"
                                    f"/consumers/{g}/offsets/{topic}/1:2\n")

    copy = names("copy")
    lines = exported.read_text().replace(f"/consumers/{g}/", f"/consumers/{copy}/")
    (tmp_path / "copy").write_text(lines)
    rc, out, err = run(capsys, "import-zk-offsets", "--zkconnect", zkc, "--input-file",
                       str(tmp_path / "copy"))
    assert (rc, out, err) == (0, "", "")
    assert zk.get(zp.offset_path(copy, topic, 1))[0] == b"2"

    props = tmp_path / "consumer.properties"
    props.write_text(f"zookeeper.connect={zkc}\ngroup.id={copy}\n")
    rc, out, err = run(capsys, "update-offsets-in-zk", "latest", str(props), topic)
    assert (rc, err) == (0, "")
    assert out == ("updating partition 0 with new offset: 5\n"
                   "updating partition 1 with new offset: 2\n"
                   "updating partition 2 with new offset: 0\n"
                   "updated the offset for 3 partitions\n")
    rc, out, err = run(capsys, "update-offsets-in-zk", "newest", str(props), topic)
    assert (rc, out) == (2, "")
    assert err == ("zkconsumer update-offsets-in-zk: 'newest' is neither earliest nor latest; "
                   "usage: zkconsumer update-offsets-in-zk [earliest | latest] "
                   "consumer.properties topic\n")

    # Partition 2 has no owner: failed, each problem on stderr as Kafka logged it.
    rc, out, err = run(capsys, "verify-consumer-rebalance", "--zookeeper.connect", zkc,
                       "--group", g)
    assert (rc, out) == (0, "Rebalance operation failed !\n")
    assert f"ERROR No owner for partition [{topic},2] (kafka.tools.VerifyConsumerRebalance$)" \
        in err.splitlines()
    rc, out, err = run(capsys, "verify-consumer-rebalance", "--zookeeper.connect", zkc,
                       "--group", copy)  # no members: nothing to fail, as Kafka's tool
    assert (rc, out) == (0, "Rebalance operation successful !\n")


def test_console_consumer_takes_kafkas_formatter_properties_and_config_file(
    stack: StackInfo, topic_factory: Any, names: Any, capsys: pytest.CaptureFixture[str],
    tmp_path: Any,
) -> None:
    topic = topic_factory(names.topic, 1)
    produce(stack.bootstrap, topic, [(0, b"k1", b"v1"), (0, None, b"v2")])
    config = tmp_path / "consumer.properties"
    config.write_text("consumer.timeout.ms=5000\nauto.offset.reset=smallest\n")
    argv = ["console-consumer", "--zookeeper", stack.zookeeper, "--topic", topic,
            "--consumer.config", str(config), "--max-messages", "2"]
    rc, out, err = run(capsys, *argv, "--property", "print.timestamp=true", "--property",
                       "print.partition=true", "--property", "print.offset=true",
                       "--property", "print.key=true")
    assert rc == 0, err
    first, second = out.splitlines()
    assert re.fullmatch(r"CreateTime:\d+\tPartition:0\tOffset:0\tk1\tv1", first), first
    assert re.fullmatch(r"CreateTime:\d+\tPartition:0\tOffset:1\tnull\tv2", second), second
    assert err == "Processed a total of 2 messages\n"
    # print.value=false: the key alone, then the line separator (as Kafka's formatter).
    rc, out, _ = run(capsys, *argv, "--property", "print.key=true", "--property",
                     "print.value=false")
    assert (rc, out) == (0, "k1\nnull\n")
    rc, out, err = run(capsys, *argv, "--formatter", "kafka.tools.NoOpMessageFormatter")
    assert (rc, out, err) == (0, "", "Processed a total of 2 messages\n")


def test_the_kafka_style_tools_refuse_what_zkconsumers_own_refuse(
    zk: KazooClient, group_on_topic: tuple[str, str, str],
    capsys: pytest.CaptureFixture[str], tmp_path: Any, names: Any,
) -> None:
    g, topic, zkc = group_on_topic
    copy = names("copy")
    line = f"/consumers/{copy}/offsets/{topic}/0:1\n"
    imports = ["import-zk-offsets", "--zkconnect", zkc, "--input-file"]

    # Not UTF-8: one line (it was a UnicodeDecodeError traceback, exit 1).
    latin = tmp_path / "latin1"
    latin.write_bytes(line.encode() + b"# caf\xe9\n")
    rc, out, err = run(capsys, *imports, str(latin))
    assert (rc, out) == (2, "")
    assert err == (f"zkconsumer import-zk-offsets: {latin} is not a UTF-8 text file (invalid "
                   f"continuation byte at byte {len(line) + 5})\n")
    # A bad line after a blank one: refused, nothing written (the lines before the blank
    # were imported, the rest ignored, exit 0).
    blank = tmp_path / "blank"
    blank.write_text(line + "\nnot an offset line\n")
    rc, out, err = run(capsys, *imports, str(blank))
    assert (rc, out) == (2, "")
    assert f"{blank}:3: not /consumers/" in err, err
    assert zk.exists(zp.group_dir(copy)) is None
    # As offsets import says it.
    _, _, own = run(capsys, "offsets", "import", "--zookeeper", zkc, "--input", str(blank))
    assert err == own.replace("zkconsumer offsets import:", "zkconsumer import-zk-offsets:")
    # Lines after a blank one are imported too, as by offsets import.
    blank.write_text(line + "\n" + line.replace("/0:1", "/1:2"))
    assert run(capsys, *imports, str(blank)) == (0, "", "")
    assert zk.get(zp.offset_path(copy, topic, 1))[0] == b"2"

    # A group made by an import has no owners znode: the checker shows its offsets.
    rc, out, err = run(capsys, "consumer-offset-checker", "--zookeeper", zkc, "--group", copy)
    assert (rc, err) == (0, "")
    checker = "%-15s %-30s %-3s %-15s %-15s %-15s %s"
    assert out.splitlines() == [
        java_format(checker, "Group", "Topic", "Pid", "Offset", "logSize", "Lag", "Owner"),
        java_format(checker, copy, topic, 0, 1, 5, 4, "none"),
        java_format(checker, copy, topic, 1, 2, 2, 0, "none"),
        java_format(checker, copy, topic, 2, -1, 0, "unknown", "none")]

    # UpdateOffsetsInZK's usage errors: one line on stderr, exit status 2.
    props = tmp_path / "consumer.properties"
    props.write_text(f"zookeeper.connect={zkc}\ngroup.id={copy}\n")
    rc, out, err = run(capsys, "update-offsets-in-zk", "earlist", str(props), topic)
    assert (rc, out) == (2, "")
    assert err.startswith("zkconsumer update-offsets-in-zk: 'earlist' is neither earliest nor "
                          "latest (did you mean 'earliest'?); usage: "), err
    assert len(err.splitlines()) == 1
    rc, out, err = run(capsys, "update-offsets-in-zk", "latest", str(props))
    assert (rc, out, len(err.splitlines())) == (2, "", 1)
    assert "takes 3 arguments, got 2" in err

    # A misspelt topic: named, with the likely one (a header and no rows, exit 0, before).
    typo = topic[:-1]
    rc, out, err = run(capsys, "consumer-offset-checker", "--zookeeper", zkc, "--group", g,
                       "--topic", typo)
    assert (rc, out) == (2, "")
    assert err == (f"zkconsumer consumer-offset-checker: topic {typo!r} not found in "
                   f"ZooKeeper (no /brokers/topics/{typo}) (did you mean {topic!r}?)\n")
    rc, out, err = run(capsys, "consumer-groups", "--zookeeper", zkc, "--describe", "--group",
                       g, "--topic", typo)
    assert (rc, out) == (2, "")
    assert err == NOTE + (f"zkconsumer consumer-groups: group {g!r} has no offsets, owners or "
                          f"subscription of topic {typo!r} (did you mean {topic!r}?)\n")


def test_the_tools_json_has_time_lags_unknown_as_null_never_0(
    stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import json

    from tests.support import delete_records

    topic, g = topic_factory(names.topic, 3), names.group
    before = time.time()
    produce(stack.bootstrap, topic, [(0, None, b"a")] * 3 + [(1, None, b"b")] * 2
            + [(2, None, b"c")] * 3)
    delete_records(stack.bootstrap, topic, {2: 2})  # the message at offset 1 is gone
    for p, offset in ((0, 1), (1, 2), (2, 1)):  # behind, caught up, behind a deleted one
        zk.create(zp.offset_path(g, topic, p), zp.encode_offset(offset), makepath=True)
    zkc = ("--zookeeper", stack.zookeeper)
    for argv in (("consumer-groups", *zkc, "--describe", "--group", g, "--json"),
                 ("consumer-offset-checker", *zkc, "--group", g, "--json")):
        rc, out, _ = run(capsys, *argv)
        assert rc == 0, argv
        rows = json.loads(out)
        ages = [r["time_lag"] for r in rows]
        assert ages[0] is not None and 0 <= ages[0] <= time.time() - before + 1, ages
        assert ages[1:] == [0.0, None], ages  # caught up: 0; its message deleted: unknown
        assert [r["lag"] for r in rows] == [2, 0, 2]
