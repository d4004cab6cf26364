"""The fault suite's own detectors catch what they claim to (so a passing fault test means
something): the ownership sampler, the ownership log, the replay check."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from kazoo.client import KazooClient

from tools.fault_harness import (
    TP,
    Delivery,
    OwnershipLog,
    OwnershipSampler,
    longest_partition_pause,
    replays,
    uncommitted_window,
)
from zkconsumer.zk import paths as zp


def _fake_member(name: str, consumer_id: str, session: int, owned: dict[TP, str]) -> Any:
    """What the sampler reads of an in-process member."""
    connector = SimpleNamespace(
        consumer_id=consumer_id, _zk=SimpleNamespace(client_id=(session, b"")), paused=False,
        owned_partitions=lambda: dict(owned), partition_infos=lambda: dict(owned))
    return SimpleNamespace(name=name, connector=connector)


def test_sampler_reports_double_owners_foreign_sessions_and_offset_regressions(
        stack, zk, names) -> None:
    g, t = names.group, names.topic
    a, b = f"{g}_a", f"{g}_b"
    other = KazooClient(hosts=stack.zookeeper, timeout=10.0)
    other.start(timeout=15)
    sampler = OwnershipSampler(stack.zookeeper, g, [t], interval=0.02)
    try:
        reg = zp.ConsumerRegistration({t: 1}, "static", 0).encode()
        zk.create(zp.id_path(g, a), reg, ephemeral=True, makepath=True)
        other.create(zp.id_path(g, b), reg, ephemeral=True, makepath=True)
        # p0: a's thread, a's session: fine. p1: names a's thread, but b's session created it.
        zk.create(zp.owner_path(g, t, 0), f"{a}-0".encode(), ephemeral=True, makepath=True)
        other.create(zp.owner_path(g, t, 1), f"{a}-0".encode(), ephemeral=True)
        zk.create(zp.offset_path(g, t, 0), b"10", makepath=True)
        sessions = {a: zk.client_id[0], b: other.client_id[0]}
        # Two in-process members both believing they own p0; b believes it too while
        # ZooKeeper says a (live) owns it.
        sampler.watch(_fake_member("x", a, sessions[a], {TP(t, 0): f"{a}-0"}))
        sampler.watch(_fake_member("y", b, sessions[b], {TP(t, 0): f"{b}-0"}))
        sampler.start()
        sampler.wait_rounds(2)
        zk.set(zp.offset_path(g, t, 0), b"5")
        sampler.wait_rounds(2)
        text = "\n".join(sampler.violations)
        assert f"{t}:0: x and y are both owned it" in text
        assert f"{t}:0: x and y are both fetching it" in text
        assert f"{t}:0: y believes it owns it while ZooKeeper says {a}-0" in text
        assert f"{t}:1: owner znode names {a}-0 but belongs to session {sessions[b]:#x}" in text
        assert f"{t}:0: committed offset went back from 10 to 5" in text
        assert f"{t}:0: x believes" not in text  # a's own znode is consistent
        assert len(sampler.violations) == 5, sampler.violations
        assert sampler.committed[TP(t, 0)][-1][1] == 5
    finally:
        sampler.stop()
        other.stop()
        other.close()


def _d(member: str, offset: int, t0: int, t: int | None = None, p: int = 0) -> Delivery:
    return Delivery(member, "t", p, offset, t0, t0 if t is None else t, b"")


def test_ownership_log_overlaps_and_stale_deliveries() -> None:
    log = OwnershipLog()
    p0 = TP("t", 0)
    log.claim("a", 100, [p0])
    log.release("a", 200)
    log.claim("b", 210, [p0])      # a clean handover: no overlap
    log.down("b", 300)             # b's connection dropped
    log.claim("c", 250, [p0])      # c claimed while b still believed: overlap 250..300
    assert log.overlaps(until_ns=1000) == ["t:0 owned by b and c at once for 0.0 ms"]
    deliveries = [
        _d("a", 1, 150), _d("b", 2, 220),
        _d("b", 3, 260),           # after c's claim: b and c consumed p0 at once
        _d("c", 2, 240, 270),      # handed out after c's claim (t0 before it): fine
        _d("b", 4, 320),           # and after b's connection dropped, too
    ]
    assert log.stale_deliveries(deliveries) == [
        "b delivered 2 message(s) of t:0 (offsets 3..4) after c had claimed it"]
    assert log.deliveries_while_down(deliveries, grace_ns=0) == [
        "b handed out 1 message(s) after its ZooKeeper connection dropped, before claiming "
        "again (e.g. t:0@4, 0 ms after the drop)"]
    assert log.deliveries_while_down(deliveries, grace_ns=50) == []


def test_replays_flag_only_redelivery_of_committed_progress() -> None:
    committed = {TP("t", 0): [(100, 5), (300, 8)]}
    deliveries = [
        _d("a", 4, 50),            # before any commit was seen
        _d("b", 6, 200),           # above the committed 5: an uncommitted-window duplicate
        _d("b", 4, 200),           # below the committed 5: committed progress replayed
        _d("c", 7, 400),           # below 8, committed at 300
    ]
    out = replays(deliveries, committed)
    assert [x.split(" ms")[0] for x in out] == [
        "b delivered t:0@4 0", "c delivered t:0@7 0"]
    assert uncommitted_window(
        [_d("a", 9, 1), _d("a", 12, 2), _d("a", 3, 3, p=1)], "a",
        {TP("t", 0): 10, TP("t", 1): 4}) == 3


def test_ownership_resumes_when_the_same_session_comes_back() -> None:
    """A blip: the belief ends at the drop and resumes at "up" (same session), so deliveries
    in between are flagged, later ones are not, and a claim by another member while the
    first one believes again is an overlap."""
    log = OwnershipLog()
    p0, p1 = TP("t", 0), TP("t", 1)
    log.claim("a", 100, [p0, p1])
    log.down("a", 200)
    log.up("a", 400)
    log.claim("b", 500, [p1])      # a believes again from 400: overlap 500..1000
    assert log.overlaps(until_ns=1000) == ["t:1 owned by a and b at once for 0.0 ms"]
    deliveries = [_d("a", 1, 250, 260), _d("a", 2, 350, 360), _d("a", 3, 450, 460)]
    flagged = log.deliveries_while_down(deliveries, grace_ns=0, up_grace_ns=60)
    assert len(flagged) == 1 and "1 message(s)" in flagged[0] and "t:0@1" in flagged[0]
    # A release, or a new session's claim, is not undone by a later "up".
    log2 = OwnershipLog()
    log2.claim("a", 100, [p0])
    log2.release("a", 150)
    log2.down("a", 200)
    log2.up("a", 300)
    log2.claim("b", 400, [p0])
    assert log2.overlaps(until_ns=1000) == []


def test_a_partition_stalled_the_whole_window_is_the_longest_pause() -> None:
    """No delivery at all from one partition in the window: that is the longest pause (it
    read as 0 s, and the report named another partition's short gap)."""
    s = 1_000_000_000

    def at(partition: int, t: int) -> Delivery:
        return Delivery("m", "t", partition, t, t * s, t * s, b"")

    deliveries = [at(0, t) for t in range(10, 20)]  # partition 1: nothing in [10, 20]
    assert longest_partition_pause(deliveries, 10 * s, 20 * s, partitions=[("t", 0), ("t", 1)]
                                   ) == (10.0, "t:1")
    assert longest_partition_pause(deliveries, 10 * s, 20 * s) == (1.0, "t:0")
