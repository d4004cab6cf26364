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

Locking: ``_cond``'s lock guards ``_reasons``, ``closed`` and ``_listeners``. ``closed`` is
also read without the lock (a plain attribute read). Streams do not read it per message: they
register a listener (:meth:`on_close`) that revokes their current chunk's permission to hand
out messages, in one C call, when the gate closes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class DeliveryGate:
    """Open unless closed for some reason; iterators :meth:`wait` at it."""

    __slots__ = ("_cond", "_listeners", "_reasons", "closed")

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._reasons: set[str] = set()
        self._listeners: list[Callable[[], None]] = []
        self.closed = False

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


__all__ = ["DeliveryGate"]
