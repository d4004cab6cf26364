"""The peer rows of issue 42 (tools/bench_peers.py): each peer's smallest storm, so that the
rows do not rot. Each peer's program is built on first use here, as the benchmark does (not
by the suite's set-up)."""

from __future__ import annotations

import pytest

from tools import bench_common, bench_peers


@pytest.mark.parametrize("name", bench_peers.peer_names())
def test_a_peers_short_storm_converges_on_its_own_assignment(stack, zk, name) -> None:
    """Three members of the peer, each in its own process, started at once: the group
    converges on the peer's own assignment, read from its own znodes; the row counts its
    rebalances (and its failed attempts, where the peer lets them be counted)."""
    made = bench_common.Made()
    try:
        row = bench_peers.storm_row(name, made, zk, stack.zookeeper, stack.bootstrap, [3], 1,
                                    6, timeout=180)
    finally:
        bench_common.clean_up(stack.zookeeper, stack.bootstrap, made)
    assert "not_run" not in row, row.get("not_run")
    (storm,) = row["storms"]
    (r,) = storm["rounds"]
    assert r["converged"] is True and 0 < r["seconds"] < 180, r
    assert r["rebalances"] >= 3, r  # every member rebalanced at least once
    if bench_peers.PEERS[name].fails_counted():
        assert r["failed_attempts"] >= 0 and storm["failed_attempts"] == r["failed_attempts"]
    else:
        assert r["failed_attempts"] is None and "not counted" in row["failed_attempts"], row
    assert storm["seconds_median"] == storm["seconds_max"] == r["seconds"], storm
    assert row["client"] and row["assignment"] and row["layout"], row


@pytest.mark.parametrize("name", bench_peers.peer_names())
def test_a_peers_rebalance_row_times_a_join_and_a_leave(stack, zk, name) -> None:
    """Two members of the peer, then a third joining and leaving: both changes settle on the
    peer's own assignment and are timed; every member rebalanced at each change."""
    made = bench_common.Made()
    try:
        row = bench_peers.rebalance_row(name, made, zk, stack.zookeeper, stack.bootstrap, 2,
                                        6, 2, timeout=180)
    finally:
        bench_common.clean_up(stack.zookeeper, stack.bootstrap, made)
    assert row["failure"] is None, row["failure"]
    assert row["latency_ms"]["samples"] == 2 and all(
        0 < ms < 180000 for ms in row["latency_ms"]["all"]), row["latency_ms"]
    assert row["join_latency_ms"]["samples"] == row["leave_latency_ms"]["samples"] == 1, row
    # The join rebalanced the two members and the joiner, the leave the two left.
    assert row["rebalances"] >= 5, row
