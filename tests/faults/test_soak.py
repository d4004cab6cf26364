"""The short soak: ``tools/soak --seconds 40`` (the CI version of the 5-minute run).

One run, shared by the tests below: they read its JSON summary.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.faults.harness import ROOT


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
        soak: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    with capsys.disabled():
        print(f"\n[soak] {soak['messages']} messages, {soak['duplicates']} duplicates, "
              f"{soak['rebalances']} rebalances, longest pause {soak['longest_pause_s']} s, "
              f"faults {soak['faults']}, invariants {soak['invariants']}")
    inv = soak["invariants"]
    # The run did what it says: faults of every kind, load, a summary.
    assert soak["faults"].get("kills", 0) >= 1 and soak["faults"].get("expiries", 0) >= 1
    assert soak["messages"] >= 40 * 200 * 0.8
    assert soak["rebalances"] > 0 and soak["sampler_rounds"] > 100
    assert inv["every_message_consumed"] and soak["missing"] == 0, soak["problems"]
    assert inv["duplicates_only_from_uncommitted_windows"], soak["problems"]
    assert inv["committed_offsets_never_go_back"], soak["problems"]
    assert inv["final_commit_at_log_end"], soak["problems"]
    assert inv["no_consumer_errors"], soak["problems"]
    assert inv["clean_shutdowns"], soak["problems"]
    assert soak["deliveries"] == soak["messages"] + soak["duplicates"]


def test_soak_never_two_owners(soak: dict[str, Any]) -> None:
    assert soak["invariants"]["at_most_one_owner"], soak["problems"]
    assert soak["ok"] and soak["exit_status"] == 0, soak["stderr_tail"]
