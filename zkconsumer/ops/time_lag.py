"""Lag in seconds: how old the oldest message a group has not committed is.

A lag in messages says little without the rate ("100,000 behind" is a second of one topic and
a week of another). Like kafka-lag-exporter, the monitor keeps for each partition a timeline
of the log end offsets it saw at each poll, ``(when, log end)``, and reads from it when the
message at a committed offset ``c`` was appended: between the last poll that saw the log end
at or below ``c`` and the first that saw it past ``c``, interpolated linearly between the two.
The time lag is ``now`` minus that time; 0 when the group has committed everything.

Error bound: the message was appended between those two polls, so the estimate is off by at
most the time between them (one poll interval while the timeline reaches back far enough).
A committed offset older than the timeline's first point is extrapolated from the timeline's
average rate, with ``bound=None``: no bound can be given (a monitor that knows the message's
own timestamp, read from the broker, has an exact figure instead: ``exact=True``). The
timeline keeps at most ``max_points`` points, dropping every other
old one when full, so it reaches further back as it ages, with a coarser bound there.

Pure functions and a small class: nothing here talks to ZooKeeper or Kafka.

>>> t = Timeline(max_points=8)
>>> for when, end in ((0.0, 0), (10.0, 100), (20.0, 300)):
...     t.add(when, end)
>>> t.time_lag(149, now=25.0)   # offset 149 was appended between t=10 and t=20: at 12.5
TimeLag(seconds=12.5, bound=10.0, exact=False)
>>> t.time_lag(300, now=25.0)   # nothing left to consume
TimeLag(seconds=0.0, bound=0.0, exact=True)
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

__all__ = ["TimeLag", "Timeline"]

#: Points a partition's timeline keeps before thinning out its older half.
DEFAULT_MAX_POINTS = 64


@dataclass(frozen=True)
class TimeLag:
    """Seconds since the oldest message not yet committed was appended.

    ``bound``: the most the estimate can be off by (None: unknown, an extrapolation);
    ``exact``: read from the message's own timestamp, or nothing to consume.
    """

    seconds: float
    bound: float | None
    exact: bool


class Timeline:
    """One partition's log end offsets over time, oldest first (not thread-safe: one poller
    owns it)."""

    def __init__(self, max_points: int = DEFAULT_MAX_POINTS) -> None:
        if max_points < 2:
            raise ValueError("a timeline needs at least two points")
        self.max_points = max_points
        self._when: list[float] = []
        self._end: list[int] = []

    def __len__(self) -> int:
        return len(self._when)

    def add(self, when: float, log_end: int) -> None:
        """A poll saw ``log_end`` at ``when``. A log end that went back (the topic deleted
        and made again, a broker's disk lost) starts the timeline anew; one unchanged only
        moves the last point's time forward when the point before it has the same end."""
        if self._end and log_end < self._end[-1]:
            self._when.clear()
            self._end.clear()
        if len(self._end) >= 2 and self._end[-1] == self._end[-2] == log_end:
            self._when[-1] = when  # a quiet partition: keep the span, not every poll
            return
        self._when.append(when)
        self._end.append(log_end)
        if len(self._when) > self.max_points:
            self._thin()

    def _thin(self) -> None:
        """Drop every other point of the older half (the newest half keeps its resolution)."""
        half = len(self._when) // 2
        keep = list(range(0, half, 2)) + list(range(half, len(self._when)))
        self._when = [self._when[i] for i in keep]
        self._end = [self._end[i] for i in keep]

    def bounds(self, offset: int) -> bool:
        """Whether the timeline bounds when the message at ``offset`` was appended: a poll
        saw the log end at or below it (a message older than the first point is only
        extrapolated, without a bound). Stays true as the timeline grows (its first point
        is kept), until a log end that went back starts it anew."""
        return bool(self._end) and self._end[0] <= offset

    def appended_at(self, offset: int) -> tuple[float, float | None] | None:
        """(when the message at ``offset`` was appended, the error bound), or None when it
        cannot be told: no poll has seen the log end past it yet, or it is older than the
        timeline, which has no rate yet to go back by."""
        ends = self._end
        i = bisect_right(ends, offset)  # the first point whose log end is past offset
        if i == len(ends):
            return None
        if i == 0:
            back = self._extrapolated(offset)
            return None if back is None else (back, None)
        t0, e0, t1, e1 = self._when[i - 1], ends[i - 1], self._when[i], ends[i]
        # Offset `offset` makes the log end `offset + 1`: where that falls between the polls.
        share = (offset + 1 - e0) / (e1 - e0)
        return t0 + share * (t1 - t0), t1 - t0

    def _extrapolated(self, offset: int) -> float | None:
        """Before the first point: back from it at the timeline's average rate; None while
        there is no rate to go by (one point, or no message appended since the first)."""
        t0, e0 = self._when[0], self._end[0]
        span_t, span_e = self._when[-1] - t0, self._end[-1] - e0
        if span_t <= 0 or span_e <= 0:
            return None
        return t0 - (e0 - (offset + 1)) * span_t / span_e  # when the log end was offset + 1

    def time_lag(self, committed: int, now: float) -> TimeLag | None:
        """The time lag of a group committed at ``committed`` (the next offset it reads), or
        None while it cannot be told (no point yet, or an offset older than a timeline with
        no rate)."""
        if not self._end:
            return None
        if committed >= self._end[-1]:
            return TimeLag(0.0, 0.0, True)
        found = self.appended_at(committed)
        if found is None:
            return None
        when, bound = found
        return TimeLag(max(0.0, now - when), bound, False)
