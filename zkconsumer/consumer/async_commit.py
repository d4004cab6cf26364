"""``commit_offsets_async``: commits written in the background, in the order they were made.

Modelled on the modern consumer's ``commitAsync``: the call takes its offsets (given, or the
consumed ones at that moment) and returns at once; one worker thread per connector writes the
commits one after another, first in first out, so a later commit of a partition never lands
before an earlier one; each commit's callback gets the offsets and the error (None when all
was written), in the worker thread. A commit goes through the same fence as every other
(see :mod:`zkconsumer.consumer.fence`): made under one ZooKeeper session, it is written under that
session only, and only for partitions the member owns then.

:meth:`AsyncCommitter.close` (from ``shutdown()``) writes what is queued while the member
still owns its partitions, within a bound, and fails what is left with
:class:`~zkconsumer._errors.ConsumerShutdownError`.

Locking: ``_cond``'s lock guards ``_queue``, ``_busy``, ``_closed``, ``_abandon`` and
``_thread``; the
writes and the callbacks run without it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

from zkconsumer._errors import ConsumerShutdownError
from zkconsumer._types import TopicPartition

log = logging.getLogger("zkconsumer.connector")

#: How long close() lets the worker fail the commits left (in order) before failing them
#: itself: the worker may be stuck in a write ZooKeeper does not answer.
ABANDON_WAIT_S = 5.0

Offsets = dict[TopicPartition, int]
#: ``callback(offsets, error)``: error is None when every offset was written.
CommitCallback = Callable[[Offsets, "BaseException | None"], object]
#: Writes one commit made when the session count was the int; raises on failure, returns
#: the error that says what the fence dropped (None: nothing).
Writer = Callable[[Offsets, int], "BaseException | None"]


@dataclass
class _Commit:
    offsets: Offsets
    made_in: int
    callback: CommitCallback | None
    future: Future[Offsets] = field(default_factory=Future)


class AsyncCommitter:
    """The queue and worker thread behind ``commit_offsets_async`` (see the module doc)."""

    def __init__(self, name: str, write: Writer,
                 logger: logging.LoggerAdapter[logging.Logger] | None = None) -> None:
        self._name = name
        self._write = write
        self._log = logger or logging.LoggerAdapter(log, {})
        self._cond = threading.Condition(threading.Lock())
        self._queue: deque[_Commit] = deque()
        self._busy = False
        self._closed = False
        self._abandon = False  # closed: fail what is left instead of writing it
        self._thread: threading.Thread | None = None

    def submit(self, offsets: Offsets, made_in: int,
               callback: CommitCallback | None) -> Future[Offsets]:
        commit = _Commit(dict(offsets), made_in, callback)
        with self._cond:
            if self._closed:
                raise ConsumerShutdownError(f"{self._name}: the connector is shut down; "
                                            "nothing committed")
            self._queue.append(commit)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name=f"{self._name}-async-commit")
                self._thread.start()
            self._cond.notify_all()
        return commit.future

    def in_worker(self) -> bool:
        return threading.current_thread() is self._thread

    def flush(self, timeout_s: float | None = None) -> bool:
        """Wait until every commit queued so far is done; False if ``timeout_s`` passed."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._cond:
            while self._queue or self._busy:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._cond.wait(remaining)
        return True

    def close(self, flush_timeout_s: float) -> None:
        """Refuse new commits; write the queued ones for up to ``flush_timeout_s`` (0: none),
        then fail the rest (in the worker, so callbacks keep their order, unless it is stuck
        in a write for :data:`ABANDON_WAIT_S` more)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        # From a callback (shutdown() called in the worker): no waiting for itself.
        waits = not self.in_worker()
        if flush_timeout_s > 0 and waits:
            self.flush(flush_timeout_s)
        with self._cond:
            self._abandon = True
            self._cond.notify_all()
        if waits and self.flush(ABANDON_WAIT_S):
            return
        with self._cond:
            left = list(self._queue)
            self._queue.clear()
            self._cond.notify_all()
        for commit in left:
            self._finish(commit, self._shut_down())

    def _shut_down(self) -> ConsumerShutdownError:
        return ConsumerShutdownError(
            f"{self._name}: shut down before this asynchronous commit was written")

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if not self._queue:
                    return
                commit = self._queue.popleft()
                abandon = self._abandon
                self._busy = True
            try:
                if abandon:
                    error: BaseException | None = self._shut_down()
                else:
                    try:
                        error = self._write(commit.offsets, commit.made_in)
                    except Exception as e:  # noqa: BLE001 - handed to the callback
                        error = e
                self._finish(commit, error)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _finish(self, commit: _Commit, error: BaseException | None) -> None:
        if commit.callback is not None:
            try:
                commit.callback(dict(commit.offsets), error)
            except Exception:  # noqa: BLE001 - the application's; the next commits go on
                self._log.exception("commit callback raised")
        if error is None:
            commit.future.set_result(commit.offsets)
        else:
            commit.future.set_exception(error)


__all__ = ["AsyncCommitter", "CommitCallback"]
