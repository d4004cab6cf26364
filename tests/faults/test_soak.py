"""The short soak: ``tools/soak --seconds 40`` (the CI version of the 5-minute run).

One run, shared by the first tests below: they read its JSON summary. The others need no stack:
how the soak reports failed sends and keeps its members' logs when it fails (tools/soak.py), and
the deadline of the throughput benchmark's raw loops (tools/bench_throughput.py).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support import record_summary
from tools import bench_throughput
from tools import soak as soak_tool
from tools.fault_harness import ROOT


@pytest.fixture(scope="module")
def soak(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("soak") / "soak.json"
    proc = subprocess.Popen(
        ["bash", str(ROOT / "tools" / "soak"), "--seconds", "40", "--output", str(out)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        stdin=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        # Well within pytest's own timeout (pyproject.toml), which would kill the soak with
        # no chance to stop its stack and members.
        stdout, stderr = proc.communicate(timeout=200)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)  # the soak stops its stack and members itself
        try:
            stdout, stderr = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
        pytest.fail(f"tools/soak did not finish within 200 s; stopped. Its stderr ends with:\n"
                    f"{stderr[-4000:]}")
    assert out.exists(), f"tools/soak wrote no summary (exit {proc.returncode}):\n" + \
        stderr[-4000:]
    data: dict[str, Any] = json.loads(Path(out).read_text())
    data["exit_status"] = proc.returncode
    data["stderr_tail"] = stderr[-4000:]
    assert json.loads(stdout) == {k: v for k, v in data.items()
                                  if k not in ("exit_status", "stderr_tail")}
    return data


def test_soak_consumes_everything_and_keeps_committed_progress(
        soak: dict[str, Any], request: pytest.FixtureRequest) -> None:
    record_summary(request.node, (
        f"[soak] {soak['messages']} messages, {soak['duplicates']} duplicates, "
        f"{soak['rebalances']} rebalances, longest pause {soak['longest_pause_s']} s, "
        f"faults {soak['faults']}, invariants {soak['invariants']}"))
    inv = soak["invariants"]
    # The run did what it says: faults of every kind, load, a summary.
    assert soak["faults"].get("kills", 0) >= 1 and soak["faults"].get("expiries", 0) >= 1
    assert soak["messages"] >= 40 * 200 * 0.8
    assert soak["rebalances"] > 0 and soak["sampler_rounds"] > 100
    assert inv["every_message_consumed"] and soak["missing"] == 0, soak["problems"]
    assert inv["duplicates_only_from_uncommitted_windows"], soak["problems"]
    assert inv["committed_offsets_never_go_back"], soak["problems"]
    assert soak["faults"].get("pauses", 0) >= 1 and soak["faults"].get("cuts", 0) >= 1
    assert inv["no_zombie_duplicates"] and soak["zombie_duplicates"] == 0, soak["problems"]
    assert inv["final_commit_at_log_end"], soak["problems"]
    assert inv["no_consumer_errors"], soak["problems"]
    assert inv["clean_shutdowns"], soak["problems"]
    assert soak["send_failures"] == 0, soak["send_errors"]
    assert soak["deliveries"] == soak["messages"] + soak["duplicates"]


def test_soak_never_two_owners(soak: dict[str, Any]) -> None:
    assert soak["invariants"]["at_most_one_owner"], soak["problems"]
    assert soak["ok"] and soak["exit_status"] == 0, soak["stderr_tail"]
    assert "member_logs" not in soak and "logs (stderr) are kept" not in soak["stderr_tail"]


# -- without a stack: failed sends, kept logs (tools/soak.py) -----------------------------------

INVARIANTS = ("every_message_consumed", "duplicates_only_from_uncommitted_windows",
              "committed_offsets_never_go_back", "final_commit_at_log_end", "at_most_one_owner",
              "no_zombie_duplicates", "no_consumer_errors", "clean_shutdowns")


def summary(send_failures: int = 0, broken: tuple[str, ...] = (),
            problems: tuple[str, ...] = ()) -> dict[str, Any]:
    """A summary as ``soak()`` returns it (the fields ``main`` and ``verdict`` read)."""
    if send_failures:
        problems = (f"{send_failures} send(s) failed (KafkaTimeoutError())", *problems)
    invariants = {k: k not in broken for k in INVARIANTS}
    return {"messages": 990, "send_failures": send_failures,
            "send_errors": ["KafkaTimeoutError()"] if send_failures else [],
            "invariants": invariants, "problems": list(problems),
            "ok": all(invariants.values()) and not problems and not send_failures}


def test_failed_sends_fail_the_run_with_their_count_and_reasons() -> None:
    assert soak_tool.send_problems(0, 1000, []) == []
    [problem] = soak_tool.send_problems(10, 990, ["KafkaTimeoutError('Batch expired')"])
    assert problem.startswith("10 send(s) failed (KafkaTimeoutError('Batch expired')): the "
                              "invariants were checked over the 990 acknowledged messages only")
    assert soak_tool.verdict(summary()) == (0, "ok")
    status, line = soak_tool.verdict(summary(send_failures=10))
    assert status == 1 and line.startswith("SENDS FAILED (10): 10 send(s) failed"), line
    # An invariant that failed is named first, whatever else went wrong.
    status, line = soak_tool.verdict(summary(send_failures=3, broken=("every_message_consumed",),
                                             problems=("2 produced message(s) never consumed",)))
    assert status == 1 and line.startswith("INVARIANT FAILED (every_message_consumed): 3 send(s)")
    assert line.endswith("; 2 produced message(s) never consumed")
    status, line = soak_tool.verdict(summary(problems=("120 messages consumed (have 119)",)))
    assert (status, line) == (1, "SOAK FAILED: 120 messages consumed (have 119)")


class _FailingProducer:
    """A KafkaProducer whose sends fail: each future with ``error``, or each call raising it
    (``at_once``: the producer's buffer full, no metadata within max.block.ms)."""

    def __init__(self, error: Exception, at_once: bool = False) -> None:
        self.error, self.at_once = error, at_once
        self.pending: list[threading.Timer] = []

    def send(self, topic: str, value: bytes, partition: int) -> Any:
        from kafka.future import Future

        if self.at_once:
            raise self.error
        fut = Future()
        fails = threading.Timer(0.01, fut.failure, (self.error,))  # as the sender thread does
        fails.start()
        self.pending.append(fails)
        return fut

    def flush(self, timeout: float | None = None) -> None:
        for t in self.pending:
            t.join(timeout)

    def close(self, timeout: float | None = None) -> None:
        pass


def test_the_soak_workload_counts_failed_sends_and_keeps_why() -> None:
    from kafka.errors import KafkaTimeoutError

    w = soak_tool.SoakWorkload("127.0.0.1:1", "t", 2)
    w._producer = _FailingProducer(KafkaTimeoutError("Batch expired"))
    w.produce(7)
    assert w.failures() == (7, ["KafkaTimeoutError('Batch expired')"])
    assert w.expected() == {}
    # The background load: a send that raises counts its whole batch.
    w._producer = _FailingProducer(KafkaTimeoutError("no metadata"), at_once=True)
    w.start(rate_per_s=1000, batch=5)
    deadline = time.monotonic() + 10
    while w.failures()[0] < 17 and time.monotonic() < deadline:
        time.sleep(0.02)
    w.stop()
    failed, errors = w.failures()
    assert failed >= 17 and failed % 5 == 2
    assert errors == ["KafkaTimeoutError('Batch expired')", "KafkaTimeoutError('no metadata')"]


@pytest.fixture
def soak_main(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Any]:
    """``soak_main(result_or_exception)`` runs ``tools/soak``'s main with ``soak()`` (and the
    stack) replaced: the fake writes a member's log and returns (or raises) what it is given.
    Returns (exit status, the JSON written, the logs' directory); temp dirs go to tmp/."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))

    @contextmanager
    def no_stack() -> Iterator[tuple[str, str]]:
        yield "zk:2181", "broker:9092"

    monkeypatch.setattr(soak_tool, "stack", no_stack)
    out = tmp_path / "soak.json"

    def run(result: dict[str, Any] | BaseException) -> tuple[int, dict[str, Any], Path]:
        seen: list[Path] = []

        def fake_soak(zk: str, bs: str, args: argparse.Namespace,
                      log_dir: Path) -> dict[str, Any]:
            seen.append(log_dir)
            (log_dir / "m1.stderr").write_text("member m1's log\n")
            if isinstance(result, BaseException):
                raise result
            return result

        monkeypatch.setattr(soak_tool, "soak", fake_soak)
        status = soak_tool.main(["--seconds", "1", "--seed", "1", "--output", str(out)])
        return status, json.loads(out.read_text()), seen[0]

    yield run


def test_a_failed_soak_keeps_its_members_logs_and_says_where(
        soak_main: Any, capsys: pytest.CaptureFixture[str]) -> None:
    status, data, logs = soak_main(summary(send_failures=2))
    err = capsys.readouterr().err
    assert status == 1 and not data["ok"] and data["send_failures"] == 2
    assert (logs / "m1.stderr").read_text() == "member m1's log\n"
    assert data["member_logs"] == str(logs)
    assert f"the members' logs (stderr) are kept in {logs}" in err
    assert "SENDS FAILED (2)" in err

    status, data, logs = soak_main(summary(broken=("at_most_one_owner",), problems=("two",)))
    assert status == 1 and data["member_logs"] == str(logs) and logs.is_dir()
    assert "INVARIANT FAILED (at_most_one_owner): two" in capsys.readouterr().err


def test_a_soak_that_passed_deletes_its_members_logs(
        soak_main: Any, capsys: pytest.CaptureFixture[str]) -> None:
    status, data, logs = soak_main(summary())
    assert status == 0 and data["ok"] and "member_logs" not in data
    assert not logs.exists()
    assert "kept" not in capsys.readouterr().err


def test_a_soak_that_crashed_keeps_its_members_logs(
        soak_main: Any, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(KeyboardInterrupt):  # SIGTERM or Ctrl-C in the middle
        soak_main(KeyboardInterrupt())
    [logs] = (Path(tempfile.gettempdir())).glob("zkc-soak-logs-*")
    assert (logs / "m1.stderr").exists()
    assert f"kept in {logs}" in capsys.readouterr().err


# -- without a stack: the throughput benchmark's raw loops have a deadline ------------------------


class _Record:
    value = b"x"


class _QuietKafkaConsumer:
    """A kafka-python KafkaConsumer whose broker answers the first poll and then nothing."""

    closed = False

    def __init__(self, **config: Any) -> None:
        self.polls = 0

    def assign(self, partitions: Any) -> None:
        pass

    def seek_to_beginning(self) -> None:
        pass

    def poll(self, timeout_ms: int) -> dict[Any, list[_Record]]:
        self.polls += 1
        if self.polls == 1:
            return {"tp0": [_Record()] * 3, "tp1": [_Record()] * 2}
        time.sleep(min(timeout_ms, 50) / 1000)
        return {}

    def close(self) -> None:
        type(self).closed = True


def test_raw_kafka_python_stops_at_its_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    import kafka

    monkeypatch.setattr(kafka, "KafkaConsumer", _QuietKafkaConsumer)
    t0 = time.monotonic()
    with pytest.raises(RuntimeError) as e:
        bench_throughput.raw_kafka_python("broker:9092", "t", 4000, timeout_s=0.5)
    assert str(e.value) == ("raw kafka-python: only 5 of 4000 messages read when the 0.5 s "
                            "deadline passed")
    assert time.monotonic() - t0 < 5 and _QuietKafkaConsumer.closed


class _Message:
    def __init__(self, error: str | None = None) -> None:
        self._error = error

    def error(self) -> str | None:
        return self._error

    def value(self) -> bytes:
        return b"x"


class _QuietConfluentConsumer:
    """A confluent-kafka Consumer: two messages and an error, then nothing."""

    closed = False

    def __init__(self, config: dict[str, Any]) -> None:
        self.calls = 0

    def assign(self, partitions: Any) -> None:
        pass

    def consume(self, num_messages: int, timeout: float) -> list[_Message]:
        self.calls += 1
        if self.calls == 1:
            return [_Message(), _Message("KafkaError{code=_TRANSPORT}"), _Message()]
        time.sleep(min(timeout, 0.05))
        return []

    def close(self) -> None:
        type(self).closed = True


def test_raw_confluent_stops_at_its_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    import confluent_kafka

    monkeypatch.setattr(confluent_kafka, "Consumer", _QuietConfluentConsumer)
    with pytest.raises(RuntimeError) as e:
        bench_throughput.raw_confluent("broker:9092", "t", 4000, timeout_s=0.5)
    assert str(e.value) == ("raw confluent-kafka: only 2 of 4000 messages read when the 0.5 s "
                            "deadline passed (last error: KafkaError{code=_TRANSPORT})")
    assert _QuietConfluentConsumer.closed


def test_raw_confluent_stops_at_its_deadline_when_the_broker_never_answers() -> None:
    """The real client against a port that accepts connections and never answers."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(srv.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    t0 = time.monotonic()
    try:
        with pytest.raises(RuntimeError, match=r"^raw confluent-kafka: only 0 of 4000 messages "
                                               r"read when the 1 s deadline passed"):
            bench_throughput.raw_confluent(f"127.0.0.1:{srv.getsockname()[1]}", "t", 4000,
                                           timeout_s=1.0)
        assert time.monotonic() - t0 < 30
    finally:
        srv.close()
        for c in held:
            c.close()
