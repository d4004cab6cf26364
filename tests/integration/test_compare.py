"""``zkconsumer compare``: the short mode end to end on the real stack, and its report."""

from __future__ import annotations

import json
import re
import struct
import zlib
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.support import StackInfo
from zkconsumer import cli as cli
from zkconsumer.broker.clients import modern_admin
from zkconsumer.migration.compare import expected_range
from zkconsumer.migration.compare_member import (
    kafka_member_kwargs,
    member_argv,
    parse_member_argv,
    zk_member_config,
)
from zkconsumer.migration.compare_report import render_markdown
from zkconsumer.migration.compare_settings import (
    LABELS,
    ChangeResult,
    CompareResult,
    CompareSettings,
    ProtocolResult,
)
from zkconsumer.zk import paths as zp


def png_size(path: Path) -> tuple[int, int]:
    """Width and height of a PNG, after checking its signature and every chunk's CRC."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG signature"
    pos, kinds = 8, []
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        assert zlib.crc32(kind + body) == crc, f"bad CRC in chunk {kind!r}"
        kinds.append(kind)
        pos += 12 + length
    assert kinds[0] == b"IHDR" and kinds[-1] == b"IEND" and b"IDAT" in kinds
    width, height = struct.unpack(">II", data[16:24])
    return width, height


ROW = re.compile(
    r"^\| (?P<label>[^|]+) \| (?P<initial>[0-9.]+) \| (?P<join>[0-9.]+) \| (?P<leave>[0-9.]+) "
    r"\| (?P<kill>[0-9.]+) \| (?P<tput>[0-9]+) \| (?P<produced>[0-9]+) \| (?P<delivered>[0-9]+) "
    r"\| (?P<lost>[0-9]+) \| (?P<dup>[0-9]+) \|$",
    re.MULTILINE,
)


def test_expected_range_matches_both_id_schemes() -> None:
    assert expected_range(["m02", "m00", "m01"], 8) == {
        "m00": [0, 1, 2], "m01": [3, 4, 5], "m02": [6, 7]}
    assert expected_range(["m01", "m02"], 6) == {"m01": [0, 1, 2], "m02": [3, 4, 5]}


def test_short_compare_end_to_end(
    stack: StackInfo, names: Any, tmp_path: Path, capsys: Any, zk: Any
) -> None:
    out_dir = tmp_path / "cmp"
    # What a plaintext cluster's command config holds: every client of the run reads it.
    settings_file = tmp_path / "client.properties"
    settings_file.write_text("security.protocol=PLAINTEXT\n")
    code = cli.main([
        "compare", "--bootstrap-server", stack.bootstrap, "--zookeeper", stack.zookeeper,
        "--topic", names.topic, "--members", "2", "--short", "--output", str(out_dir),
        "--command-config", str(settings_file),
    ])
    stdout, stderr = capsys.readouterr()
    report = (out_dir / "report.md").read_text()
    assert code == 0, report + stderr

    rows = {m["label"]: m for m in ROW.finditer(report)}
    assert set(rows) == {LABELS["zookeeper"], LABELS["kafka"]}, report
    data = json.loads((out_dir / "compare.json").read_text())
    results = {r["protocol"]: r for r in data["results"]}
    for protocol, r in results.items():
        row = rows[LABELS[protocol]]
        assert r["errors"] == []
        assert r["lost"] == 0 == int(row["lost"])
        assert r["produced"] > 2000 and int(row["produced"]) == r["produced"]
        assert r["delivered"] == r["produced"] + r["duplicated"] == int(row["delivered"])
        assert int(row["dup"]) == r["duplicated"] == sum(r["duplicated_by_change"].values())
        # Clean changes replay nothing: offsets are committed before partitions move. Only a
        # kill may replay (what was consumed after the victim's last auto-commit).
        by_change = r["duplicated_by_change"]
        assert (by_change["initial"], by_change["join"], by_change["leave"]) == (0, 0, 0)
        assert r["throughput"] > 0 and int(row["tput"]) == round(r["throughput"])
        # Every change settled, on the range assignment both protocols should compute.
        assert [c["change"] for c in r["changes"]] == ["initial", "join", "leave", "kill"]
        assert all(c["reassignment_s"] is not None and c["as_expected"] for c in r["changes"])
        assert r["changes"][1]["assignment"] == {"m00": [0, 1], "m01": [2, 3], "m02": [4, 5]}
        assert r["changes"][3]["assignment"] == {"m02": [0, 1, 2, 3, 4, 5]}
        # The killed member's session must time out first (3 s in the short mode).
        assert r["changes"][3]["reassignment_s"] >= 2.5
        assert float(row["kill"]) == pytest.approx(r["changes"][3]["reassignment_s"], abs=0.01)
    assert report.count("| yes |") == 4  # both protocols agree after every change
    # The run's groups are gone with it (they were left behind).
    assert zk.exists(f"/consumers/{results['zookeeper']['group']}") is None
    admin = modern_admin(stack.bootstrap)
    try:
        assert results["kafka"]["group"] not in {g["group_id"] for g in admin.list_groups()}
    finally:
        admin.close()

    width, height = png_size(out_dir / "compare.png")
    assert width >= 600 and height >= 400
    assert f"report: {out_dir / 'report.md'}" in stdout


def _fake_result(lost: int) -> CompareResult:
    settings = CompareSettings("b:9092", "zk:2181", "t", 2)
    change = ChangeResult("initial", None, 0.0, 1.5, {"m00": [0], "m01": [1]},
                          {"m00": [0], "m01": [1]})
    results = [
        ProtocolResult(p, f"g-{p}", 2, 2, [change], 100, 0.1, 0.5, 150, 152, 150 - lost,
                       lost, 2, 10.0)
        for p in ("zookeeper", "kafka")
    ]
    return CompareResult(settings, results, "2024-01-01 00:00:00")


def test_markdown_rows_show_the_numbers() -> None:
    text = render_markdown(_fake_result(lost=3))
    rows = list(ROW.finditer(text.replace("timeout", "0")))
    assert [r["label"] for r in rows] == [LABELS["zookeeper"], LABELS["kafka"]]
    assert [(r["initial"], r["tput"], r["lost"], r["dup"]) for r in rows] == [
        ("1.50", "200", "3", "2")] * 2
    assert "| initial | m00: 0; m01: 1 | m00: 0; m01: 1 | m00: 0; m01: 1 | yes |" in text


@pytest.mark.parametrize("argv, message", [
    (["--members", "1"], "--members must be at least 2 (one leaves, one is killed)"),
    (["--members", "2", "--messages", "0"], "--messages must be at least 1"),
    (["--members", "3", "--partitions", "3"], "--partitions must be at least --members + 1 = 4"),
])
def test_bad_arguments_are_one_line(
    argv: list[str], message: str, tmp_path: Path, capsys: Any
) -> None:
    code = cli.main(["compare", "--bootstrap-server", "127.0.0.1:1", "--zookeeper",
                     "127.0.0.1:1", "--topic", "t", "--output", str(tmp_path), *argv])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err == f"zkconsumer compare: {message}\n"


SASL = (
    "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
    "sasl.plain.username=alice\nsasl.plain.password=secret\n"
)


@pytest.mark.parametrize("protocol", ["zookeeper", "kafka"])
def test_members_read_the_command_config(
    protocol: str, tmp_path: Path, monkeypatch: Any
) -> None:
    (tmp_path / "sasl.properties").write_text(SASL)
    monkeypatch.chdir(tmp_path)  # a relative path must reach the member as an absolute one
    settings = CompareSettings("b:9092", "zk:2181", "t", 2, command_config="sasl.properties")
    argv = member_argv("m00", protocol, settings, "g", go=False)
    assert "secret" not in " ".join(argv)  # the member reads the file itself
    args = parse_member_argv(argv)
    assert args.command_config == str(tmp_path / "sasl.properties")
    monkeypatch.chdir("/")
    expected = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
                "sasl_plain_username": "alice", "sasl_plain_password": "secret"}
    if protocol == "zookeeper":
        got = zk_member_config(args).kafka_client_kwargs()
    else:
        got = kafka_member_kwargs(args)
        assert got["client_id"] == "m00" and got["group_id"] == "g"
    assert {k: got.get(k) for k in expected} == expected

    plain = parse_member_argv(member_argv("m00", protocol, CompareSettings(
        "b:9092", "zk:2181", "t", 2), "g", go=False))
    assert plain.command_config is None
    got = (zk_member_config(plain).kafka_client_kwargs() if protocol == "zookeeper"
           else kafka_member_kwargs(plain))
    assert got.get("security_protocol", "PLAINTEXT") == "PLAINTEXT"
    assert got.get("sasl_plain_username") is None


def test_a_bad_command_config_is_one_line(tmp_path: Path, capsys: Any) -> None:
    bad = tmp_path / "client.properties"
    bad.write_text("security.protocol=PLAINTEXT\nbootstrap.servers=elsewhere:9092\n")
    code = cli.main(["compare", "--bootstrap-server", "127.0.0.1:1", "--zookeeper",
                     "127.0.0.1:1", "--topic", "t", "--members", "2", "--output",
                     str(tmp_path / "out"), "--command-config", str(bad)])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err.startswith(f"zkconsumer compare: {bad}: bootstrap.servers: not a broker "
                          "security setting") and err.count("\n") == 1
    assert not (tmp_path / "out").exists()  # refused before anything ran


def test_the_harness_talks_to_the_brokers_with_the_command_config(
    stack: StackInfo, names: Any, tmp_path: Path, capsys: Any
) -> None:
    # The local broker has no SASL listener: a harness that used these settings cannot
    # reach it (one that ignored them would create the topic and run).
    sasl = tmp_path / "sasl.properties"
    sasl.write_text(SASL)
    code = cli.main([
        "compare", "--bootstrap-server", stack.bootstrap, "--zookeeper", stack.zookeeper,
        "--topic", names.topic, "--members", "2", "--short", "--output",
        str(tmp_path / "out"), "--command-config", str(sasl),
    ])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert f"cannot connect to the brokers at {stack.bootstrap}" in err, err


def test_a_group_that_cannot_be_deleted_is_named_with_a_command_that_deletes_it(
    stack: StackInfo, zk: Any, names: Any
) -> None:
    """A group gone already is no news; one still held (a member's session has not expired)
    is named, with a command that runs as printed."""
    from zkconsumer.migration.compare import _forget_group
    from zkconsumer.migration.compare_settings import CompareSettings, ProtocolResult

    settings = CompareSettings(stack.bootstrap, stack.zookeeper, names.topic, 2,
                               session_timeout_ms=500)
    said: list[str] = []
    held = ProtocolResult("zookeeper", names.group, 2, 2, [], 0, 0.0, None, 0, 0, 0, 0, 0, 0.0)
    _forget_group(settings, held, {}, said.append)  # no such group: nothing to say
    assert said == []
    zk.create(zp.ids_dir(names.group) + "/live-member", b"{}", ephemeral=True, makepath=True)
    _forget_group(settings, held, {}, said.append)
    (line,) = said
    assert line.endswith(f"delete it with zkconsumer groups delete --zookeeper "
                         f"{stack.zookeeper} --group {names.group}"), line
    assert zk.exists(zp.ids_dir(names.group))


@pytest.mark.parametrize("argv, message", [
    (["--rate", "nan"], "--rate must be a positive number, got nan"),
    (["--rate", "inf"], "--rate must be a positive number, got inf"),
    (["--rate", "0"], "--rate must be a positive number, got 0.0"),
    (["--session-timeout-ms", "0"], "--session-timeout-ms must be a positive integer, got 0"),
    (["--session-timeout-ms", "-5"],
     "--session-timeout-ms must be a positive integer, got -5"),
])
def test_non_finite_or_non_positive_numbers_are_one_line(
    argv: list[str], message: str, tmp_path: Path, capsys: Any
) -> None:
    code = cli.main(["compare", "--bootstrap-server", "127.0.0.1:1", "--zookeeper",
                     "127.0.0.1:1", "--topic", "t", "--members", "2", "--output",
                     str(tmp_path / "out"), *argv])
    out, err = capsys.readouterr()
    assert (code, out, err) == (2, "", f"zkconsumer compare: {message}\n")
    assert not (tmp_path / "out").exists()  # refused before anything ran


@pytest.mark.parametrize("field_name", [
    "connect_timeout_s", "dwell_s", "quiet_s", "settle_timeout_s", "drain_timeout_s"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1.0])
def test_every_float_setting_must_be_finite(field_name: str, value: float) -> None:
    from zkconsumer._errors import CompareError

    settings = CompareSettings("b:9092", "zk:2181", "t", 2)
    settings.validate()
    setattr(settings, field_name, value)
    with pytest.raises(CompareError, match="must be a"):
        settings.validate()


def _topics(bootstrap: str) -> set[str]:
    admin = modern_admin(bootstrap)
    try:
        return set(admin.list_topics())
    finally:
        admin.close()


def test_an_unreachable_zookeeper_is_found_first_within_the_connect_timeout(
    stack: StackInfo, names: Any, tmp_path: Path
) -> None:
    import time

    from zkconsumer.migration.compare import run_compare

    settings = CompareSettings.short(stack.bootstrap, "127.0.0.1:1", names.topic, 2)
    settings.connect_timeout_s = 1.0
    t = time.monotonic()
    with pytest.raises(Exception, match="127.0.0.1:1"):
        run_compare(settings, tmp_path / "out")
    assert time.monotonic() - t < 6  # 1 s asked for; the default is 10 s
    assert names.topic not in _topics(stack.bootstrap)  # nothing was created
    # The same through the command line, whose --connect-timeout was not passed on.
    t = time.monotonic()
    code = cli.main(["compare", "--bootstrap-server", stack.bootstrap, "--zookeeper",
                     "127.0.0.1:1", "--connect-timeout", "1", "--topic", names.topic,
                     "--members", "2", "--short", "--output", str(tmp_path / "cli")])
    assert code == 2
    assert time.monotonic() - t < 6
    assert names.topic not in _topics(stack.bootstrap)


def _kafka_groups(bootstrap: str) -> set[str]:
    admin = modern_admin(bootstrap)
    try:
        return {g["group_id"] for g in admin.list_groups()}
    finally:
        admin.close()


@pytest.mark.parametrize("protocol", ["zookeeper", "kafka"])
def test_an_interrupted_run_deletes_its_group_and_exits_130(
    protocol: str, stack: StackInfo, names: Any, tmp_path: Path, capsys: Any, zk: Any,
    monkeypatch: Any,
) -> None:
    """Ctrl-C after the run's start offsets were written, before any member started: the
    group those offsets made is deleted all the same."""
    from zkconsumer.migration import compare as _compare

    groups: list[str] = []

    def interrupted(self: Any, name: str, go: bool) -> Any:
        groups.append(self.group)
        if protocol == "zookeeper":
            assert zk.exists(f"/consumers/{self.group}/offsets")
        else:
            assert self.group in _kafka_groups(stack.bootstrap)
        raise KeyboardInterrupt

    monkeypatch.setattr(_compare._Run, "_spawn", interrupted)
    code = cli.main([
        "compare", "--bootstrap-server", stack.bootstrap, "--zookeeper", stack.zookeeper,
        "--topic", names.topic, "--members", "2", "--short", "--protocol", protocol,
        "--output", str(tmp_path / "out"),
    ])
    _, err = capsys.readouterr()
    assert code == 130, err
    (group,) = groups
    assert "left behind" not in err, err
    if protocol == "zookeeper":
        assert zk.exists(f"/consumers/{group}") is None
    else:
        assert group not in _kafka_groups(stack.bootstrap)


def test_a_failed_second_run_keeps_the_first_runs_report(
    stack: StackInfo, names: Any, tmp_path: Path, capsys: Any, monkeypatch: Any
) -> None:
    from zkconsumer._errors import CompareError
    from zkconsumer.migration import compare as _compare

    done = _fake_result(lost=0).results[0]

    def run(self: Any) -> ProtocolResult:
        if self.protocol == "zookeeper":
            return done
        raise CompareError("kafka member m01 exited unexpectedly (code -9)")

    monkeypatch.setattr(_compare._Run, "run", run)
    out_dir = tmp_path / "out"
    code = cli.main([
        "compare", "--bootstrap-server", stack.bootstrap, "--zookeeper", stack.zookeeper,
        "--topic", names.topic, "--members", "2", "--short", "--output", str(out_dir),
    ])
    _, err = capsys.readouterr()
    assert code == 2
    assert err.endswith("zkconsumer compare: kafka member m01 exited unexpectedly "
                        "(code -9)\n"), err
    assert f"incomplete report of the completed runs: {out_dir / 'report.md'}" in err
    data = json.loads((out_dir / "compare.json").read_text())
    assert data["incomplete"] == "kafka run failed: kafka member m01 exited unexpectedly " \
                                 "(code -9)"
    assert [r["protocol"] for r in data["results"]] == ["zookeeper"]
    report = (out_dir / "report.md").read_text()
    assert "**Incomplete**" in report and LABELS["zookeeper"] in report
    assert LABELS["kafka"] not in report


def test_ctrl_c_while_deleting_the_groups_keeps_the_report_and_names_them(
    stack: StackInfo, names: Any, tmp_path: Path, capsys: Any, monkeypatch: Any
) -> None:
    """Both runs done, then Ctrl-C while the first group is deleted (waiting for the killed
    member's session): the report was lost, and the second group neither deleted nor
    named."""
    from zkconsumer.migration import compare as _compare

    done = {p: _fake_result(lost=0).results[0] for p in ("zookeeper", "kafka")}

    def run(self: Any) -> ProtocolResult:
        self.touched = True  # its group was written to
        return replace(done["zookeeper"], protocol=self.protocol, group=self.group)

    def forget(settings: Any, result: Any, kafka: Any, say: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(_compare._Run, "run", run)
    monkeypatch.setattr(_compare, "_forget_group", forget)
    out_dir = tmp_path / "out"
    code = cli.main([
        "compare", "--bootstrap-server", stack.bootstrap, "--zookeeper", stack.zookeeper,
        "--topic", names.topic, "--members", "2", "--short", "--output", str(out_dir),
    ])
    _, err = capsys.readouterr()
    assert code == 130, err
    left = re.findall(r"the run's group (\S+) is left behind \(([^)]*)\)", err)
    assert [why for _, why in left] == ["interrupted while deleting it",
                                        "not deleted: interrupted"], err
    assert left[0][0].startswith("zkc-compare-zk-") and left[1][0].startswith(
        "zkc-compare-kafka-")
    data = json.loads((out_dir / "compare.json").read_text())
    assert data["incomplete"] == "interrupted while deleting the groups"
    assert [r["protocol"] for r in data["results"]] == ["zookeeper", "kafka"]


def test_a_second_ctrl_c_while_the_partial_report_is_written_still_deletes_the_groups(
    stack: StackInfo, names: Any, tmp_path: Path, capsys: Any, monkeypatch: Any
) -> None:
    """Ctrl-C in the second run, and again while the incomplete report is rendered: the
    groups were neither deleted nor named."""
    from zkconsumer.migration import compare as _compare

    done = _fake_result(lost=0).results[0]
    forgotten: list[str] = []

    def run(self: Any) -> ProtocolResult:
        self.touched = True
        if self.protocol == "kafka":
            raise KeyboardInterrupt
        return replace(done, protocol=self.protocol, group=self.group)

    def write_report(result: Any, output: Path) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(_compare._Run, "run", run)
    monkeypatch.setattr(_compare, "write_report", write_report)
    monkeypatch.setattr(_compare, "_forget_group",
                        lambda settings, result, kafka, say: forgotten.append(result.group))
    code = cli.main([
        "compare", "--bootstrap-server", stack.bootstrap, "--zookeeper", stack.zookeeper,
        "--topic", names.topic, "--members", "2", "--short", "--output", str(tmp_path / "o"),
    ])
    _, err = capsys.readouterr()
    assert code == 130, err
    assert [g.split("-")[2] for g in forgotten] == ["zk", "kafka"], forgotten


def test_a_kafka_group_left_behind_is_named_with_the_command_config() -> None:
    """On a secured cluster the printed command fails without the run's command config."""
    from zkconsumer.migration.compare import _left_behind
    from zkconsumer.migration.compare_settings import CompareSettings, ProtocolResult

    settings = CompareSettings("b:9093", "z:2181", "t", 2, command_config="/etc/client.props")
    kept = ProtocolResult("kafka", "zkc-compare-kafka-1", 2, 2, [], 0, 0.0, None, 0, 0, 0, 0, 0,
                          0.0)
    said: list[str] = []
    _left_behind(settings, kept, "interrupted", said.append)
    assert said == ["kafka: the run's group zkc-compare-kafka-1 is left behind (interrupted); "
                    "delete it with kafka-consumer-groups.sh --bootstrap-server b:9093 "
                    "--command-config /etc/client.props --delete --group zkc-compare-kafka-1"]
