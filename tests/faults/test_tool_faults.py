"""The operator tools under ZooKeeper faults: a write that fails part way says what it
wrote and what not, and how to finish."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import pytest
from kazoo.client import KazooClient

from tests.support import StackInfo, reaped, wait_until
from zkconsumer import ConsumerConfig, ZookeeperConsumerConnector
from zkconsumer.cli import main
from zkconsumer.cli import offsets as offsets_cli
from zkconsumer.zk import paths as zp

GROUPS, PARTITIONS = 6, 1000
ROOT = str(Path(__file__).resolve().parents[2])


def _offsets_file(path: Path, prefix: str, topic: str) -> Path:
    path.write_text("".join(f"{zp.offset_path(f'{prefix}{g}', topic, p)}:{p + 7}\n"
                            for g in range(GROUPS) for p in range(PARTITIONS)))
    return path


def _written(zk: KazooClient, group: str, topic: str) -> int:
    stat = zk.exists(zp.offsets_topic_dir(group, topic))
    return 0 if stat is None else stat.numChildren


def _pausing_after(transactions: int, pause: Callable[[], None]
                   ) -> Callable[[str], Any]:
    """A stand-in for the command's progress display that pauses ZooKeeper once
    ``transactions`` transactions have been committed (it is called after each)."""

    @contextmanager
    def progress(label: str) -> Iterator[Callable[[int, int], None]]:
        commits = [0]

        def step(done: int, total: int) -> None:
            commits[0] += 1
            if commits[0] == transactions:
                pause()

        yield step

    return progress


def _paused_run(private_stack: StackInfo, monkeypatch: pytest.MonkeyPatch,
                capsys: pytest.CaptureFixture[str], cli_module: Any, after: int,
                argv: list[str]) -> str:
    """Run the command ``argv``, ZooKeeper paused (SIGSTOP) once its progress display has
    been called ``after`` times, and resumed once it failed (status 2): its one stderr line."""
    zookeeper = private_stack.local.procs["zookeeper"].pid
    paused = []

    def pause() -> None:
        os.killpg(zookeeper, signal.SIGSTOP)
        paused.append(True)

    monkeypatch.setattr(cli_module, "_progress", _pausing_after(after, pause))
    try:
        assert main(argv) == 2
    finally:
        os.killpg(zookeeper, signal.SIGCONT)
        monkeypatch.undo()
    assert paused
    [line] = capsys.readouterr().err.splitlines()
    return line


def test_an_import_paused_part_way_says_what_it_wrote_and_how_to_finish(
    private_stack: StackInfo, pzk: KazooClient, names: Any, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    prefix, topic = f"big{names.suffix}-", names.topic
    path = _offsets_file(tmp_path / "offsets.txt", prefix, topic)
    argv = ["offsets", "import", "--zookeeper", private_stack.zookeeper, "--input", str(path),
            "--zookeeper-only", "--connect-timeout", "2"]
    line = _paused_run(private_stack, monkeypatch, capsys, offsets_cli, 2, argv)
    # Two transactions of 1000 operations committed: the parents' creates and the first
    # group's offsets, then most of the second's.
    assert line.startswith(f"zkconsumer offsets import: ZooKeeper at {private_stack.zookeeper}"
                           " failed: ConnectionLoss"), line
    first = f"{prefix}0"
    assert "import offsets failed part way: " in line
    written = int(line.split("failed part way: ")[1].split(" ")[0])
    assert PARTITIONS <= written < 2 * PARTITIONS, line
    assert f"of {GROUPS * PARTITIONS} written (groups {first}, {prefix}1 (" in line, line
    assert "in the transaction in flight, written or not" in line
    assert "not written (groups " in line and f"{prefix}5" in line.split("not written")[-1]
    assert "import offsets again to finish" in line
    # What it said it wrote is there, what it said it did not is not.
    assert _written(pzk, first, topic) == PARTITIONS
    assert _written(pzk, f"{prefix}5", topic) == 0

    # The rerun it names finishes the import.
    assert main(argv[:-2]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"imported {GROUPS * PARTITIONS} offsets of {GROUPS} groups"), out
    assert all(_written(pzk, f"{prefix}{g}", topic) == PARTITIONS for g in range(GROUPS))
    data, _ = pzk.get(zp.offset_path(f"{prefix}5", topic, 999))
    assert data == b"1006"


def test_a_group_delete_paused_part_way_says_what_it_deleted_and_how_to_finish(
    private_stack: StackInfo, pzk: KazooClient, names: Any,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """A group too big for one transaction is deleted znode by znode: ZooKeeper paused part
    way, the error named only how many operations were written; now it names the topics
    whose offsets are gone, partly gone and kept, and the rerun it names finishes it."""
    from zkconsumer import ops as _ops
    from zkconsumer.cli import groups as groups_cli

    group = f"del{names.suffix}"
    sizes = {"a": 400, "b": 1200, "c": 300}  # deepest first, topic by topic: a, b, c
    _ops.import_offsets(pzk, [_ops.OffsetEntry(group, t, p, 5) for t, n in sizes.items()
                              for p in range(n)], zookeeper_only=True)
    argv = ["groups", "delete", "--zookeeper", private_stack.zookeeper, "--group", group,
            "--connect-timeout", "2"]
    # Paused once 1,000 znodes are deleted: a's 400 and its topic znode, then most of b's.
    line = _paused_run(private_stack, monkeypatch, capsys, groups_cli, 10, argv)
    assert f"delete group '{group}' failed part way: " in line, line
    assert ": the offsets of topic a, 599 of topic b's 1200 offsets; the offsets of topic c " \
        "not deleted; run it again to finish" in line, line
    # What it said it deleted is gone, what it said it kept is there.
    assert pzk.exists(zp.offsets_topic_dir(group, "a")) is None
    # The delete in flight when ZooKeeper stopped may have been applied when it went on.
    assert _written(pzk, group, "b") in (1200 - 599, 1200 - 600)
    assert _written(pzk, group, "c") == 300

    assert main(argv[:-2]) == 0  # the rerun it names
    assert capsys.readouterr().out.startswith(f"deleted group {group}: ")
    assert pzk.exists(zp.group_dir(group)) is None


def test_a_members_zookeeper_outage_is_logged_once_at_its_start_and_once_at_its_end(
    private_stack: StackInfo, names: Any, caplog: pytest.LogCaptureFixture,
) -> None:
    """kazoo logged "Connection dropped: socket connection error: Connection refused" at
    every reconnect, 56 times in a 35 s outage, with no logging set up by the application."""
    caplog.set_level(logging.DEBUG, logger="zkconsumer")
    local = private_stack.local
    c = ZookeeperConsumerConnector(ConsumerConfig({
        "zookeeper.connect": private_stack.zookeeper, "group.id": names.group,
        "zookeeper.session.timeout.ms": 30000}))
    try:
        local.stop("zookeeper")
        # Reconnects failing (kazoo tries a few times a second), each a DEBUG line now.
        wait_until(lambda: sum(r.getMessage().startswith("Connection dropped")
                               for r in caplog.records) >= 5, 30, "five failed reconnects")
        local.start("zookeeper")
        wait_until(lambda: any("connection back" in r.getMessage() for r in caplog.records),
                   30, "the connection back")
    finally:
        c.shutdown()
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    lost = [m for m in said if "ZooKeeper connection lost" in m]
    back = [m for m in said if "ZooKeeper connection back" in m]
    assert lost == [f"consumer {c.consumer_id}: ZooKeeper connection lost: handing out "
                    "nothing until it is back"], said
    assert len(back) == 1, said
    assert back[0].startswith(f"consumer {c.consumer_id}: ZooKeeper connection back after "), \
        back
    assert "(reconnects failed meanwhile: Connection dropped: " in back[0]
    assert not [m for m in said if "Connection dropped" in m and m not in back], said


def _lines_of(stream: IO[str]) -> list[str]:
    """The lines ``stream`` gives, collected by a thread as they come."""
    lines: list[str] = []

    def read() -> None:
        for line in stream:
            lines.append(line)

    threading.Thread(target=read, daemon=True).start()
    return lines


def test_groups_lag_watch_rides_through_a_zookeeper_pause(
    private_stack: StackInfo, pzk: KazooClient, names: Any,
) -> None:
    """It ended with status 2 on a ZooKeeper pause of about 7 s."""
    g, topic = names.group, names.topic
    pzk.create(zp.offset_path(g, topic, 0), b"1", makepath=True)
    zookeeper = private_stack.local.procs["zookeeper"].pid
    argv = [sys.executable, "-m", "zkconsumer", "groups", "lag", "--zookeeper",
            private_stack.zookeeper, "--group", g, "--watch", "--interval", "0.3",
            "--connect-timeout", "1"]
    with reaped(subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
                ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        out, err = _lines_of(proc.stdout), _lines_of(proc.stderr)

        def polls() -> int:
            return sum(line.startswith("every 0.3 s") for line in out)

        wait_until(lambda: polls() >= 1, 30, "a first poll")
        os.killpg(zookeeper, signal.SIGSTOP)
        try:
            wait_until(lambda: any("poll failed, retrying every 0.3 s" in x for x in err), 30,
                       "the outage said")
            before = polls()
        finally:
            os.killpg(zookeeper, signal.SIGCONT)
        wait_until(lambda: any("polling again" in x for x in err), 60, "polling again")
        wait_until(lambda: polls() > before, 30, "a poll after the outage")
        assert proc.poll() is None
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 130
    said = [x for x in err if x.startswith("zkconsumer groups lag: ")]
    assert len([x for x in said if "poll failed" in x]) == 1, err
    assert "Traceback" not in "".join(err)
