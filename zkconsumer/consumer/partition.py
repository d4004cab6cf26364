"""Per-partition consumer state and the chunk queues between fetchers and streams.

The legacy design, kept: each owned partition has one :class:`PartitionTopicInfo` holding two
offsets (both meaning "the next offset"):

- ``fetched_offset``: what the fetcher asks the broker for next;
- ``consumed_offset``: the next offset the application has not yet received; this is what a
  commit stores, so a commit never covers a message the application did not get.

Fetchers put :class:`FetchedDataChunk` objects on the owning stream's bounded
:class:`ChunkQueue` (``queued.max.message.chunks``), which bounds memory however slow the
application is. Unlike the original, a fetcher never blocks on a full queue (that held back
every other partition of its thread): it holds the chunk, pauses that partition and tries
again (:meth:`PartitionTopicInfo.try_enqueue`, :meth:`ChunkQueue.offer`). :data:`SHUTDOWN` on
a queue ends the stream's iteration.

Locking: ``PartitionTopicInfo._lock`` guards the fetched offset and the *epoch*, and serialises
every change of the consumed offset: a reset, and the stream iterator attaching or detaching
its *cursor*.
The consumed offset is read without the lock (a plain attribute read, atomic under the GIL):
while the iterator hands out a chunk of the partition, the cursor attached to it
(``_cursor``) computes the offset from how far the application got in that chunk; otherwise
it is ``_consumed``. A detaching cursor stores its final offset in ``_consumed`` before it
lets go, so a reader gets one or the other, and never an offset past a message not yet
handed out (see :mod:`zkconsumer.consumer.stream` for how the cursor keeps that true).
:meth:`PartitionTopicInfo.reset_consumed_offset` detaches the cursor: the rest of that chunk
is still handed out (once) but no longer moves the consumed offset, and the next chunk starts
from the reset offset (records below it are skipped). Everything else is immutable after
construction.

A partition an incremental rebalance gives away is *revoked* (:meth:`PartitionTopicInfo.revoke`,
for good: a partition claimed again gets a new info): its epoch is bumped, so every chunk
fetched before is obsolete, and no chunk is enqueued after; the stream drops its cursor over
the partition's current chunk, leaving the consumed offset after the last message handed out,
which the rebalance then commits.

The epoch counts offset resets (:meth:`PartitionTopicInfo.reset_offsets`, the fetcher's
``auto.offset.reset``); each chunk carries the epoch it was fetched in, and a chunk of an
older epoch is obsolete: it must never move the consumed offset. The iterator may read the
epoch without the lock to drop such a chunk early, but the check that counts is made under
the lock, in the same step as the change it guards (:meth:`PartitionTopicInfo.attach_cursor`,
:meth:`PartitionTopicInfo.skip_consumed_to`): a reset that comes after the iterator's early
check and before it attaches its cursor is then seen, and the chunk dropped, instead of the
chunk taking the reset back (its messages handed out, the consumed offset moved back up past
the refetched ones, which were then skipped as consumed).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from zkconsumer._types import TopicPartition

INVALID_OFFSET = -1


class PartitionTopicInfo:
    """One owned partition: its queue, its fetched and consumed offsets."""

    def __init__(
        self,
        topic: str,
        partition: int,
        chunk_queue: ChunkQueue,
        consumed_offset: int,
        fetched_offset: int,
        fetch_size: int,
        client_id: str,
        thread_id: str,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.tp = TopicPartition(topic, partition)
        self.chunk_queue = chunk_queue
        self.fetch_size = fetch_size
        self.client_id = client_id
        self.thread_id = thread_id
        self._lock = threading.Lock()
        self._consumed = consumed_offset
        self._fetched = fetched_offset
        # Bumped by reset_offsets(): chunks fetched before a reset carry an older epoch and
        # are dropped by the iterator, which would otherwise take the reset back. Only ever
        # grows; checked under _lock where it matters (see the module docstring).
        self._epoch = 0
        self._revoked = False  # given away by a rebalance (under _lock; see revoke())

    #: The stream iterator's cursor over the chunk of this partition it is handing out, while
    #: it hands it out (see the module docstring); None otherwise.
    _cursor: Any = None

    @property
    def consumed_offset(self) -> int:
        cursor = self._cursor
        if cursor is not None:
            return int(cursor.consumed())
        return self._consumed

    @property
    def fetched_offset(self) -> int:
        with self._lock:
            return self._fetched

    def reset_consumed_offset(self, offset: int) -> None:
        with self._lock:
            self._consumed = offset
            self._cursor = None

    def reset_fetched_offset(self, offset: int) -> None:
        with self._lock:
            self._fetched = offset

    @property
    def epoch(self) -> int:
        """The number of offset resets so far. Read without the lock: a value that differs
        from a chunk's epoch means that chunk is obsolete for good (the epoch only grows); one
        that matches may be stale already, so only the checks under the lock count."""
        return self._epoch

    @property
    def revoked(self) -> bool:
        """Whether a rebalance gave the partition away (read without the lock: it never
        goes back to False)."""
        return self._revoked

    def revoke(self) -> None:
        """A rebalance gives the partition away: every chunk fetched so far is obsolete, none
        is enqueued from now on, and offsets no longer change but for the stream's cursor
        detaching (:meth:`detach_cursor`), which leaves the final consumed offset."""
        with self._lock:
            self._revoked = True
            self._epoch += 1

    def reset_offsets(self, offset: int) -> None:
        """Both offsets to ``offset`` (an ``auto.offset.reset``): chunks already queued are
        obsolete. (The original kept them, and the first one moved the consumed offset back
        up to where it started: after a reset backwards, the messages refetched below that
        were skipped as consumed.)"""
        with self._lock:
            if self._revoked:
                return  # its consumed offset is final (the rebalance commits it)
            self._fetched = offset
            self._consumed = offset
            self._cursor = None
            self._epoch += 1

    def attach_cursor(self, cursor: Any, expected: int, epoch: int) -> bool:
        """The iterator starts handing out a chunk of epoch ``epoch`` from ``expected``, the
        consumed offset it read: from now on ``cursor.consumed()`` is the consumed offset.
        False (nothing attached) when a reset came first: the consumed offset is no longer
        ``expected``, or the epoch is no longer ``epoch`` (the chunk is obsolete: the
        iterator drops it, it must not hand it out)."""
        with self._lock:
            if self._epoch != epoch or self.consumed_offset != expected:
                return False
            self._consumed = expected
            self._cursor = cursor
            return True

    def skip_consumed_to(self, offset: int, expected: int, epoch: int) -> bool:
        """The iterator found the consumed offset (``expected``) below the fetch offset
        (``offset``) of a chunk of epoch ``epoch``: the consumed offset moves up to
        ``offset`` (the messages in between are lost; the caller logs it). False (nothing
        changed) when a reset came since the iterator read ``expected``: the consumed offset
        is no longer ``expected``, or the epoch no longer ``epoch`` (a reset backwards sets
        the consumed offset below the obsolete chunk's fetch offset: moving it up would take
        the reset back)."""
        with self._lock:
            if self._epoch != epoch or self.consumed_offset != expected:
                return False
            self._consumed = offset
            self._cursor = None
            return True

    def detach_cursor(self, cursor: Any, final: int) -> None:
        """``cursor`` is done (its chunk handed out, or dropped): the consumed offset stays at
        ``final``. Nothing happens if ``cursor`` is no longer attached (a reset detached it)."""
        with self._lock:
            if self._cursor is cursor:
                self._consumed = final  # before the cursor goes: readers see one or the other
                self._cursor = None

    def enqueue(
        self, records: Sequence[Any], next_fetch_offset: int, stop: threading.Event
    ) -> bool:
        """Put one chunk on the stream's queue, then advance the fetched offset.

        Blocks while the queue is full (that is the memory bound) but wakes every 100 ms to
        honour ``stop``; returns False, having put nothing, when ``stop`` was set first.
        """
        if not records:
            return True
        with self._lock:
            fetch_offset, epoch = self._fetched, self._epoch
        if self._revoked:
            return True  # given away: dropped (its chunks would be dropped by the stream)
        chunk = FetchedDataChunk(records, self, fetch_offset, epoch)
        while not stop.is_set():
            try:
                self.chunk_queue.put(chunk, timeout=0.1)
            except queue.Full:
                continue
            with self._lock:
                self._fetched = next_fetch_offset
            return True
        return False

    def try_enqueue(
        self, records: Sequence[Any], next_fetch_offset: int, wake: threading.Event
    ) -> bool:
        """Put one chunk on the stream's queue if it has room, then advance the fetched offset.

        Never blocks: when the queue is full this puts nothing, returns False and has ``wake``
        set once the queue has room again (see :meth:`ChunkQueue.offer`).
        """
        if not records:
            return True
        with self._lock:
            fetch_offset, epoch = self._fetched, self._epoch
        if self._revoked:
            return True  # given away: dropped (its chunks would be dropped by the stream)
        if not self.chunk_queue.offer(FetchedDataChunk(records, self, fetch_offset, epoch),
                                      wake):
            return False
        with self._lock:
            self._fetched = next_fetch_offset
        return True

    def __repr__(self) -> str:
        return (
            f"PartitionTopicInfo({self.topic}:{self.partition}, fetched={self.fetched_offset}, "
            f"consumed={self.consumed_offset}, thread={self.thread_id})"
        )


@dataclass(frozen=True)
class FetchedDataChunk:
    """Records of one partition from one fetch, in offset order.

    ``records`` are the fetch backend's record objects; each has ``topic``, ``partition``,
    ``offset``, ``key``, ``value``, ``timestamp`` and ``timestamp_type`` attributes.
    """

    records: Sequence[Any]
    topic_info: PartitionTopicInfo
    fetch_offset: int
    epoch: int = 0  # the info's epoch when fetched (see PartitionTopicInfo.reset_offsets)


class _Shutdown:
    def __repr__(self) -> str:
        return "SHUTDOWN"


#: Put on a stream's queue to end its iteration.
SHUTDOWN: Any = _Shutdown()


class FetcherFailed:
    """Put on every queue when fetching failed for good: iterators raise
    ``BackgroundThreadError`` (from ``error``) instead of blocking forever."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def __repr__(self) -> str:
        return f"FetcherFailed({self.error!r})"


class ChunkQueue(queue.Queue):  # type: ignore[type-arg]
    """A bounded queue of chunks; :meth:`clear` drops everything queued (rebalance).

    Besides the blocking ``put``, :meth:`offer` puts without blocking and, when the queue is
    full, registers an Event that is set as soon as an item is taken or the queue cleared.
    ``_wake_on_room`` (those Events) is guarded by ``mutex``, like the queue itself.
    """

    def __init__(self, maxsize: int = 0) -> None:
        super().__init__(maxsize)
        self._wake_on_room: list[threading.Event] = []
        self._shut = False  # the shutdown sentinel was put: it outlives clear()

    @property
    def shut(self) -> bool:
        """Whether the shutdown sentinel was put (taken since, or not)."""
        return self._shut

    def offer(self, item: Any, wake: threading.Event) -> bool:
        """Put ``item`` if the queue has room and return True; else put nothing, arrange for
        ``wake`` to be set when there is room, and return False. Never blocks."""
        with self.mutex:
            if 0 < self.maxsize <= self._qsize():
                if wake not in self._wake_on_room:
                    self._wake_on_room.append(wake)
                return False
            self._put(item)
            self.unfinished_tasks += 1
            self.not_empty.notify()
            return True

    def _get(self) -> Any:
        # Every taker (get(), the stream iterator's own loop) goes through here, mutex held.
        item = super()._get()
        self._room_made()
        return item

    def _room_made(self) -> None:
        if self._wake_on_room:
            for wake in self._wake_on_room:
                wake.set()
            self._wake_on_room.clear()

    def clear(self) -> int:
        dropped = 0
        with self.mutex:
            dropped = len(self.queue)
            self.queue.clear()
            if self._shut:
                # A clear after shutdown (a rebalance that went on once ZooKeeper came back,
                # say) must not leave iterators blocked for ever.
                self.queue.append(SHUTDOWN)
                self.not_empty.notify_all()
            self.not_full.notify_all()
            self._room_made()
        return dropped

    def drop_revoked(self) -> int:
        """Drop the queued chunks of revoked partitions (an incremental rebalance gave them
        away), making room for the others'; returns how many."""
        with self.mutex:
            kept = [c for c in self.queue
                    if not (isinstance(c, FetchedDataChunk) and c.topic_info.revoked)]
            dropped = len(self.queue) - len(kept)
            if dropped:
                self.queue.clear()
                self.queue.extend(kept)
                self.not_full.notify_all()
                self._room_made()
        return dropped

    def put_shutdown(self, item: Any = SHUTDOWN) -> None:
        """Put the sentinel even when the queue is full: shutdown must not block."""
        with self.mutex:
            if item is SHUTDOWN:
                self._shut = True
            self.queue.append(item)
            self.unfinished_tasks += 1
            self.not_empty.notify()
