"""Time lag from a timeline of log ends (zkconsumer.ops.time_lag): worked cases, the error
bound, and randomized producers whose true append times are known."""

from __future__ import annotations

import random

import pytest

from zkconsumer.ops.time_lag import TimeLag, Timeline


def timeline(*points: tuple[float, int], max_points: int = 64) -> Timeline:
    t = Timeline(max_points)
    for when, end in points:
        t.add(when, end)
    return t


def test_nothing_known_before_the_first_poll() -> None:
    assert Timeline().time_lag(0, now=1.0) is None


def test_caught_up_is_zero_and_exact() -> None:
    t = timeline((0.0, 10), (5.0, 10))
    assert t.time_lag(10, now=100.0) == TimeLag(0.0, 0.0, True)


def test_interpolated_between_the_two_polls_around_the_offset() -> None:
    t = timeline((0.0, 0), (10.0, 100), (20.0, 300))
    # Offset 49 makes the log end 50: halfway between the first two polls.
    assert t.time_lag(49, now=30.0) == TimeLag(25.0, 10.0, False)
    assert t.time_lag(299, now=30.0) == TimeLag(10.0, 10.0, False)


def test_before_the_first_point_is_extrapolated_without_a_bound() -> None:
    t = timeline((100.0, 1000), (110.0, 2000))  # 100 messages a second
    lag = t.time_lag(500, now=110.0)
    assert lag is not None and lag.bound is None and not lag.exact
    assert lag.seconds == pytest.approx(15.0)


def test_a_quiet_partition_keeps_its_span_in_two_points() -> None:
    t = timeline((0.0, 0), (10.0, 50), *((10.0 + i, 50) for i in range(1, 100)))
    assert len(t) == 3
    # Produced again at 200: offset 50 appended between the last quiet poll and then.
    t.add(200.0, 60)
    lag = t.time_lag(50, now=200.0)
    assert lag is not None and lag.bound == pytest.approx(91.0)


def test_a_log_end_that_went_back_starts_anew() -> None:
    t = timeline((0.0, 500), (10.0, 600))
    t.add(20.0, 3)  # the topic was made again
    assert len(t) == 1
    assert t.time_lag(0, now=25.0) == TimeLag(5.0, None, False)


def test_thinning_keeps_the_newest_half_and_the_bound_honest() -> None:
    t = Timeline(max_points=8)
    for i in range(100):
        t.add(float(i), i * 10)
    assert len(t) <= 8
    lag = t.time_lag(985, now=99.0)  # recent: one poll's resolution
    assert lag is not None and lag.bound == pytest.approx(1.0)


@pytest.mark.parametrize("seed", range(20))
def test_the_true_age_is_within_the_bound(seed: int) -> None:
    rng = random.Random(seed)
    appended: list[float] = []  # offset -> its true append time
    t = Timeline(max_points=rng.choice([4, 8, 64]))
    now = 0.0
    t.add(now, 0)
    for _ in range(rng.randint(5, 60)):
        step = rng.uniform(0.5, 30.0)
        for _ in range(rng.choice([0, 1, 5, 50])):
            appended.append(now + rng.uniform(0.0, step))
        appended.sort()
        now += step
        t.add(now, len(appended))
    if not appended:
        return
    committed = rng.randrange(len(appended))
    lag = t.time_lag(committed, now)
    assert lag is not None and lag.bound is not None
    assert abs(lag.seconds - (now - appended[committed])) <= lag.bound + 1e-9
