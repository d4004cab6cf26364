"""The delivery gate: a connector's streams hand out messages only while it is open.

A member whose ZooKeeper connection dropped cannot know whether its session, and so its
ownership, still exists: another client may have expired the session and another member may
own its partitions a few milliseconds later. So the connector closes its gate the moment kazoo
reports the drop (in kazoo's thread: closing never blocks on anything but the gate's own lock)
and every stream's iterator waits at the gate before handing out its next message. The gate
opens again when the connection comes back with the same session, or, after a lost session,
once a rebalance under the new session has succeeded.

The gate is closed for zero or more *reasons* (strings); it is open when there is none, so
that two independent causes (the connection is down; the session was lost and the member has
not rebalanced since) do not reopen it for each other.

With a *lease* (a :class:`LeaseDeadline` the connector's lease keeper moves on while
ZooKeeper answers on the member's session, see :mod:`zkconsumer.consumer.fence`), the permits are
also bounded in time: each message checks the clock (in C, about 20 ns) and none is handed
out once the deadline passed, so a process paused past its lease hands out nothing when it
resumes, before any of its threads has noticed the pause. The slow path then finds the gate
:meth:`lapsed` and closes it (reason ``"lease"``) until the keeper renews the lease on the
same session.

Locking: ``_cond``'s lock guards ``_reasons``, ``closed`` and ``_listeners``. ``closed`` is
also read without the lock (a plain attribute read). Streams do not read it per message: they
register a listener (:meth:`on_close`) that revokes their current chunk's permission to hand
out messages, in one C call, when the gate closes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from itertools import repeat

_BOOTTIME = getattr(time, "CLOCK_BOOTTIME", None)


def lease_clock() -> float:
    """The lease's clock: CLOCK_BOOTTIME where there is one (it also runs while the machine
    is suspended or the VM frozen), else ``time.monotonic()``; the C permit reads the same."""
    if _BOOTTIME is None:
        return time.monotonic()
    return time.clock_gettime(_BOOTTIME)


class PyLeaseDeadline:
    """:class:`LeaseDeadline` without :mod:`zkconsumer._speedups`."""

    __slots__ = ("deadline",)

    def __init__(self) -> None:
        self.deadline = float("-inf")


class PyLeasePermit:
    """``lease_permit`` without :mod:`zkconsumer._speedups`: ``item`` up to ``n`` times,
    each while :func:`lease_clock` is before ``deadline.deadline`` (Python code per
    message: slower, and a thread switch may come between the permit and the message)."""

    __slots__ = ("_deadline", "_item", "_left")

    def __init__(self, item: str, n: int, deadline: PyLeaseDeadline) -> None:
        self._item = item
        self._left = n
        self._deadline = deadline

    def __iter__(self) -> PyLeasePermit:
        return self

    def __next__(self) -> str:
        if self._left <= 0 or lease_clock() >= self._deadline.deadline:
            self._left = 0
            raise StopIteration
        self._left -= 1
        return self._item

    def __length_hint__(self) -> int:
        return max(self._left, 0)


try:
    from zkconsumer._speedups import LeaseDeadline, lease_permit
except ImportError:  # built without a C compiler (see setup.py)
    LeaseDeadline = PyLeaseDeadline  # type: ignore[assignment,misc]
    lease_permit = PyLeasePermit  # type: ignore[assignment]


class DeliveryGate:
    """Open unless closed for some reason; iterators :meth:`wait` at it."""

    __slots__ = ("_cond", "_listeners", "_reasons", "closed", "lease")

    def __init__(self, lease: LeaseDeadline | None = None) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._reasons: set[str] = set()
        self._listeners: list[Callable[[], None]] = []
        self.closed = False
        self.lease = lease  # None: permits are not bounded in time

    def permit(self, item: str, n: int) -> Iterator[str]:
        """A chunk's permit: ``item`` up to ``n`` times, within the lease if there is one."""
        lease = self.lease
        if lease is None:
            return repeat(item, n)
        return lease_permit(item, n, lease)

    def lapsed(self) -> bool:
        """True (and the gate closed, reason ``"lease"``) once the lease has run out."""
        lease = self.lease
        if lease is None or lease_clock() < lease.deadline:
            return False
        if "lease" not in self.reasons():
            self.close("lease")
        return True

    def drop_lease(self) -> None:
        """From now on permits are not bounded in time (at shutdown: the streams must reach
        their end), and the ``"lease"`` reason is gone."""
        self.lease = None
        self.open("lease")

    def on_close(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` (quick, never blocking: it runs in the closing thread) each time
        the gate closes, after ``closed`` reads true."""
        with self._cond:
            self._listeners.append(listener)

    def close(self, reason: str) -> None:
        with self._cond:
            self._reasons.add(reason)
            self.closed = True
            listeners = list(self._listeners)
        for listener in listeners:
            listener()

    def open(self, reason: str | None = None) -> None:
        """Drop ``reason`` (every reason when None); open when none is left."""
        with self._cond:
            if reason is None:
                self._reasons.clear()
            else:
                self._reasons.discard(reason)
            if not self._reasons and self.closed:
                self.closed = False
                self._cond.notify_all()

    def reasons(self) -> frozenset[str]:
        with self._cond:
            return frozenset(self._reasons)

    def wait(self, deadline: float | None = None) -> bool:
        """Wait until open; False when ``deadline`` (``time.monotonic()``) passed first."""
        with self._cond:
            while self.closed:
                if deadline is None:
                    self._cond.wait()
                    continue
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return True

    def __repr__(self) -> str:
        reasons = ", ".join(sorted(self.reasons()))
        return f"DeliveryGate({'closed: ' + reasons if self.closed else 'open'})"


__all__ = ["DeliveryGate", "LeaseDeadline", "PyLeaseDeadline", "PyLeasePermit", "lease_clock",
           "lease_permit"]
