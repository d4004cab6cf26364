"""Streams: what the application iterates over (``KafkaStream`` and ``ConsumerIterator``).

As in the original, each stream owns one bounded :class:`~zkconsumer.consumer.partition.ChunkQueue`
that the fetcher threads fill with :class:`FetchedDataChunk` objects, and
each stream has exactly one iterator (``iter(stream)`` always returns the same one). The
iterator

- blocks on the queue, or waits ``consumer.timeout.ms`` (when >= 0) and raises
  :class:`~zkconsumer._errors.ConsumerTimeoutException`; the stream stays usable afterwards;
- skips records below the partition's consumed offset (re-fetched data) and advances the
  consumed offset as it hands each message out, so a commit never covers a message the
  application did not receive;
- drops every chunk fetched before an offset reset of its partition (``auto.offset.reset``,
  which the fetcher fetches again from the reset offset) that it had not started yet: it
  checks the chunk's epoch under the partition's lock as it attaches its cursor (see
  :mod:`zkconsumer.consumer.partition`), so a reset that lands while it starts the chunk is never
  taken back. (The rest of a chunk already started when the reset comes still goes out, once,
  and no longer moves the consumed offset.)
- decodes key and value with the stream's decoders (callables on ``bytes``; a ``None`` key or
  value stays ``None``). A decoder that raises makes ``next()`` raise
  :class:`MessageDecodeError` naming the topic, partition and offset, with the decoder's
  exception as ``__cause__``; the consumed offset stays *at* that message until the
  application calls ``next()`` again, which skips it (logged);
- ends (``StopIteration``, now and on every later call) at the shutdown sentinel;
- raises :class:`~zkconsumer._errors.BackgroundThreadError` once fetching failed for good,
  on every call until the connector shuts down, and then ends;
- waits, before handing out each message, while the connector's
  :class:`DeliveryGate` is closed (its ZooKeeper connection is down: it may
  no longer own the partition), with ``consumer.timeout.ms`` applying to that wait too.

:meth:`KafkaStream.clear` (called by the rebalance from another thread) drops the current
chunk; afterwards the iterator hands out nothing from it, nor from any chunk it had taken off
the queue before the clear (the rebalance clears the queue too).

A stream is meant to be iterated by one thread, as in the original; several threads on one
stream still get each message once and stop at a closed gate (every iterator over a chunk
shares its cursor and permit), and ``clear()`` may come from any thread.

How: the per-message path is C code, with no lock and no Python call (the previous one, two
locks and a Python method call per message, cost about 1 µs a message on the development
machine, about what librdkafka takes to fetch it). :class:`ConsumerIterator` is an
``itertools.chain`` over one iterator per chunk; the slow path, :meth:`_Chunks.next_chunk`
(Python), makes the next one when the previous one ends: it takes a chunk off the queue, skips
what was consumed, waits at the gate, and turns timeouts and failures into an iterator that
raises once (the chain must never see its source raise: that would end it). Without decoders,
a chunk's iterator is :func:`make_messages` (a ``zip`` that makes the messages) over list
iterators on the chunk's *columns* (offsets, keys, values, timestamps, timestamp types;
:func:`_columns`): each ``next()`` takes one message off them within one C call, which the GIL
makes atomic, so the offsets' list iterator's position *is* how many messages were handed out
(but for the gap below). The
partition's consumed offset is computed from it (:class:`_Cursor`, attached to the
:class:`PartitionTopicInfo`), not stored per message. With a gate, the
first iterable it reads is a bounded ``repeat`` of the topic that the gate's close drains (a
listener, one C call), so a closed gate ends the chunk's iterator before it takes another
message; the slow path waits at the gate and
goes on with the same cursor. ``clear()`` empties the offsets' list iterator in one C call
(``list(it)``), which also tells exactly how many messages had been handed out. One gap: making
a ``MessageAndMetadata`` allocates, and the garbage collector may run a finalizer then, which
may let another thread run; a ``clear()`` (or a gate close) at that instant sees the message
as handed out (it counts as consumed) and the application receives it just after. With
decoders, a Python iterator (:class:`_DecodingCursor`) decodes each message and keeps the
count itself, under the chunk lock.
"""

from __future__ import annotations

import logging
import threading
import time
from bisect import bisect_left
from collections import deque
from collections.abc import Iterator, Sequence
from heapq import heappop, heappush
from itertools import chain, islice, repeat
from operator import attrgetter, length_hint
from typing import Any, Generic, TypeVar, cast

from zkconsumer._errors import (
    BackgroundThreadError,
    ConsumerTimeoutException,
    MessageDecodeError,
)
from zkconsumer._message import (
    Decoder,
    MessageAndMetadata,
    make_messages,
)
from zkconsumer.consumer.gate import DeliveryGate
from zkconsumer.consumer.partition import (
    SHUTDOWN,
    ChunkQueue,
    FetchedDataChunk,
    FetcherFailed,
    PartitionTopicInfo,
)

#: tuple.__new__, called directly: a NamedTuple's own __new__ costs an argument parse.
_tuple_new = tuple.__new__
#: Longest single wait on a stream's Condition before its state is looked at again.
_RECHECK_S = 0.5

_END: Any = object()  # next_chunk's "no more chunks, ever" (it took the shutdown sentinel)
_offset_of = attrgetter("offset")


log = logging.getLogger("zkconsumer.stream")

K = TypeVar("K")
V = TypeVar("V")

#: ``timestamp_type`` values (Kafka's ``TimestampType``): no timestamp (old message format),
#: set by the producer, set by the broker.
NO_TIMESTAMP_TYPE = -1
CREATE_TIME = 0
LOG_APPEND_TIME = 1



def _columns(records: Sequence[Any], start: int) -> tuple[list[list[Any]], int]:
    """The columns of a chunk's records (offsets, keys, values, timestamps, timestamp types,
    one item per record) and the index to start from.

    Records that have ``columns()`` (the confluent backend's ``ConfluentRecords``) give them
    as they are; others (kafka-python's ``ConsumerRecord``, ``MessageAndMetadata``) are read
    from ``start`` on. Lists of plain values are what the iterator zips; a list of
    ``MessageAndMetadata`` would be thousands of objects the garbage collector tracks while
    they wait in the queue (it untracks plain tuples, never a tuple subclass).
    """
    columns = getattr(records, "columns", None)
    if columns is not None:
        return list(columns()[2:]), start
    recs = list(islice(records, start, None))
    return [
        [r.offset for r in recs],
        [r.key for r in recs],
        [r.value for r in recs],
        [-1 if r.timestamp is None else r.timestamp for r in recs],
        [NO_TIMESTAMP_TYPE if r.timestamp_type is None else r.timestamp_type for r in recs],
    ], 0


class _Cursor:
    """How far the application got in one chunk (no decoders): list iterators, in step, over
    the chunk's columns from index ``start`` on; ``it`` is the offsets' one.

    ``consumed()`` is the partition's consumed offset while the cursor is attached: the offset
    after the last message handed out, or ``base`` (the consumed offset when the chunk
    started) before the first. :meth:`drop` sets ``dropped`` *before* it empties ``it``, and
    ``consumed()`` reads ``it``'s position *before* ``dropped``: so a reader that finds ``it``
    emptied also finds ``dropped`` set, and returns ``frozen`` (the exact offset, once ``drop``
    has computed it) or ``base``, never the end of the chunk.
    """

    __slots__ = ("base", "columns", "counted", "dropped", "frozen", "info", "it", "iters", "n",
                 "offsets", "permit", "start")

    def __init__(
        self, info: PartitionTopicInfo, columns: Sequence[list[Any]], start: int, base: int
    ) -> None:
        self.info = info
        self.columns = columns
        self.offsets = columns[0]
        self.n = len(self.offsets)
        self.start = self.counted = start  # counted: index up to which the meters have it
        self.base = base
        self.dropped = False
        self.frozen: int | None = None
        self.permit: Iterator[str] | None = None  # see _Chunks._iterator
        iters = []
        for column in columns:
            it = list.__iter__(column)  # a list iterator, whatever list subclass it is
            if start:
                deque(islice(it, start), maxlen=0)  # skip the consumed ones
            iters.append(it)
        self.iters = iters
        self.it = iters[0]

    def _offset_after(self, pos: int) -> int:
        return int(self.offsets[pos - 1]) + 1 if pos > self.start else self.base

    def consumed(self) -> int:
        left = length_hint(self.it)
        if self.dropped:
            frozen = self.frozen
            return self.base if frozen is None else frozen
        return self._offset_after(self.n - left)

    def exhausted(self) -> bool:
        return length_hint(self.it) == 0

    def position(self) -> int:
        """The index after the last message handed out (not meaningful once dropped)."""
        return self.n - length_hint(self.it)

    def bytes_between(self, start: int, end: int) -> int:
        """Key + value bytes of the messages at indexes ``start`` to ``end``."""
        keys, values = self.columns[1], self.columns[2]
        # Slices, not islice: that would walk from the chunk's start at each read.
        return (sum(map(len, filter(None, keys[start:end])))
                + sum(map(len, filter(None, values[start:end]))))

    def drop(self) -> int:
        """Hand out nothing more; the consumed offset stays after the last message handed out.
        Returns the index after that message."""
        self.dropped = True
        # One C call, atomic under the GIL: each message is handed out before it, or never.
        rest = list(self.it)
        end = self.n - len(rest)
        final = self.frozen = self._offset_after(end)
        self.info.detach_cursor(self, final)
        return end


class _DecodingCursor:
    """A chunk's iterator when the stream has decoders: decodes each message (Python).

    Under the owner's ``lock`` (which :meth:`drop` holds too, so a message decoded while the
    chunk was dropped is not handed out): ``pos`` (the next record never taken), ``redo``
    (a heap of records taken and given back: a Ctrl-C while decoding, the gate closing; they
    go out again before ``pos``), ``busy`` (records being decoded, by one thread each) and
    ``handed`` (every record before it was handed out). ``handed`` stops at the first busy or
    given-back record: with several threads on one stream, a commit never covers a message
    not handed out yet. After a decode error, ``skip`` is the bad record's index (kept busy):
    the next call lets it go (logged).

    Any exception but the decode error leaving :meth:`__next__` after a record was taken
    gives it back: the application did not get it.
    """

    __slots__ = (
        "base", "busy", "counted", "dropped", "frozen", "handed", "info", "n", "owner", "pos",
        "records", "redo", "skip", "start",
    )

    def __init__(
        self, owner: _Chunks, info: PartitionTopicInfo, records: Sequence[Any], start: int,
        base: int,
    ) -> None:
        self.owner = owner
        self.info = info
        self.records = records
        self.n = len(records)
        self.start = self.pos = self.handed = self.counted = start
        self.base = base
        self.dropped = False
        self.frozen: int | None = None
        self.busy: set[int] = set()
        self.redo: list[int] = []
        self.skip: int | None = None

    # -- called with the owner's lock held --
    def _settle(self) -> None:
        low = min(self.busy) if self.busy else self.pos
        if self.redo:
            low = min(low, self.redo[0])
        self.handed = low
        if self.owner._waiting:  # a thread may wait for the chunk to be done
            self.owner._changed.notify_all()

    def _done(self, index: int) -> None:
        """Record ``index`` was handed out (or let go after a decode error)."""
        busy = self.busy
        busy.discard(index)
        if busy or self.redo:
            self._settle()
        else:  # the one-thread case, inline: this runs for every message
            self.handed = self.pos
            if self.owner._waiting:
                self.owner._changed.notify_all()

    def _give_back(self, index: int) -> None:
        """Record ``index`` was taken and not handed out: it goes out again."""
        self.busy.discard(index)
        heappush(self.redo, index)
        self._settle()

    def _offset_after(self, pos: int) -> int:
        return int(self.records[pos - 1].offset) + 1 if pos > self.start else self.base

    def consumed(self) -> int:
        handed = self.handed
        if self.dropped:
            frozen = self.frozen
            return self.base if frozen is None else frozen
        return self._offset_after(handed)

    def exhausted(self) -> bool:
        return self.dropped or (
            self.pos >= self.n and self.skip is None and not self.busy and not self.redo)

    def only_busy_left(self) -> bool:
        """Every message taken; some still being decoded by other threads."""
        return (not self.dropped and self.pos >= self.n and self.skip is None
                and not self.redo and bool(self.busy))

    def position(self) -> int:
        """Called with the owner's lock held: every message before this index was handed out
        (or let go after a decode error)."""
        return self.handed

    def bytes_between(self, start: int, end: int) -> int:
        return _chunk_bytes(self.records, start, end)

    def drop(self) -> int:
        # Called with the owner's lock held.
        self.dropped = True
        final = self.frozen = self._offset_after(self.handed)
        self.info.detach_cursor(self, final)
        return self.handed

    def __iter__(self) -> _DecodingCursor:
        return self

    def _skipped(self, index: int) -> None:
        owner = self.owner
        log.warning("%s skipping the message at %s:%d offset %d that failed to decode",
                    owner.client_id, self.info.topic, self.info.partition,
                    self.records[index].offset)

    def __next__(self) -> MessageAndMetadata[Any, Any]:
        owner = self.owner
        while True:
            if owner.gate is not None and (owner.gate.closed or owner.gate.lapsed()):
                owner.wait_gate(None)
            index = -1
            try:
                with owner.lock:
                    if self.dropped:
                        raise StopIteration
                    bad = self.skip
                    if bad is not None:
                        self.skip = None
                        self._done(bad)
                    if self.redo:
                        index = heappop(self.redo)
                    elif self.pos < self.n:
                        index = self.pos
                        self.pos = index + 1
                    else:
                        raise StopIteration
                    self.busy.add(index)
                if bad is not None:
                    self._skipped(bad)
                rec = self.records[index]
                key = rec.key
                value = rec.value
                part = "key"
                try:
                    if key is not None and owner.key_decoder is not None:
                        key = owner.key_decoder(key)
                    part = "value"
                    if value is not None and owner.value_decoder is not None:
                        value = owner.value_decoder(value)
                except Exception as e:
                    other = None
                    with owner.lock:
                        if not self.dropped:
                            other, self.skip = self.skip, index
                            if other is not None:  # another thread's, not let go yet
                                self._done(other)
                            elif owner._waiting:
                                owner._changed.notify_all()  # not only busy ones left now
                    index = -1  # kept, as the message to skip: not given back
                    if other is not None:
                        self._skipped(other)
                    raise MessageDecodeError(
                        rec.topic, rec.partition, rec.offset, part, e) from e
                ts_type = rec.timestamp_type
                ts = rec.timestamp
                result: MessageAndMetadata[Any, Any] = _tuple_new(
                    MessageAndMetadata,
                    (rec.topic, rec.partition, rec.offset, key, value,
                     -1 if ts is None else ts,
                     NO_TIMESTAMP_TYPE if ts_type is None else ts_type),
                )
                with owner.lock:
                    if self.dropped:
                        continue  # dropped while decoding: that message is gone
                    if owner.gate is not None and (owner.gate.closed or owner.gate.lapsed()):
                        # Closed (or the lease ran out) while decoding: the partition may be
                        # another member's by now. Out again once the gate opens (the
                        # no-decoder path's permit).
                        self._give_back(index)
                        index = -1
                        continue
                    self._done(index)
                return result
            except MessageDecodeError:
                raise
            except BaseException:
                # Not handed out (Ctrl-C in a slow decoder, say): out again next time.
                if index >= 0:
                    with owner.lock:
                        if not self.dropped:
                            self._give_back(index)
                raise


class _Raise:
    """A chain iterator that raises ``error`` once, then ends (the chain then asks the slow
    path again: the stream stays usable after a timeout)."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error: BaseException | None = error

    def __iter__(self) -> _Raise:
        return self

    def __next__(self) -> Any:
        error, self.error = self.error, None
        if error is None:
            raise StopIteration
        raise error


class _Chunks:
    """The slow path of one stream's iterator: :meth:`next_chunk` gives the chain the iterator
    of each chunk in turn.

    Locks and flags:

    - ``lock`` guards ``_cursor`` (the current chunk's), ``_done``, ``_failed``, ``_gen`` and
      ``_inside``, and a :class:`_DecodingCursor`'s positions; it is only held while waiting
      on ``_changed`` (a Condition on it), never while blocking otherwise.
    - ``_inside``: one thread is in :meth:`next_chunk`'s slow path (which blocks on the
      queue or the gate); another waits on ``_changed`` for it to leave, with its own
      ``consumer.timeout.ms``. A flag, not a lock held across the slow path: taken and
      recorded in one statement inside a ``with``, so a Ctrl-C cannot leave it taken.
      :meth:`clear` never waits for it.
    - ``_changed`` is notified when the slow path is left, when a decoding thread is done
      with a message, and by :meth:`clear`.
    - ``_pending`` (the chunk taken off the queue and not yet started, with its generation)
      is only touched inside the slow path: a Ctrl-C while a chunk is being started leaves
      it there for the next call instead of losing it.
    - ``_gen`` (bumped by :meth:`clear`) is written holding ``lock`` *and* the queue's mutex,
      so :meth:`_take` reads it atomically with taking a chunk off the queue: a chunk taken
      before a clear carries the old generation and is dropped.
    """

    def __init__(
        self,
        chunk_queue: ChunkQueue,
        consumer_timeout_ms: int,
        key_decoder: Decoder | None,
        value_decoder: Decoder | None,
        client_id: str,
        metrics: Any,
        gate: DeliveryGate | None,
    ) -> None:
        self.queue = chunk_queue
        self.gate = gate  # None: never closes
        self.metrics = metrics  # a ConsumerMetrics, or None
        self.timeout_s = consumer_timeout_ms / 1000.0 if consumer_timeout_ms >= 0 else None
        self.key_decoder = key_decoder
        self.value_decoder = value_decoder
        self.plain = key_decoder is None and value_decoder is None
        self.client_id = client_id
        self.lock = threading.Lock()
        self._changed = threading.Condition(self.lock)
        self._waiting = 0  # threads waiting on _changed (notified only when there are some)
        self._inside = False
        self._gen = 0
        self._cursor: _Cursor | _DecodingCursor | None = None
        self._pending: tuple[Any, int] | None = None
        self._done = False
        self._failed: FetcherFailed | None = None
        # The current chunk iterator's permission to hand out messages (see _iterator).
        self._permit: Iterator[str] | None = None
        if gate is not None:
            gate.on_close(self._revoke)
        watch = getattr(metrics, "watch_stream", None)
        if watch is not None:
            watch(self)  # flush_metrics at each read of the metrics

    def _revoke(self) -> None:
        # In the thread closing the gate: one C call, atomic under the GIL (a message is taken
        # before it, or not until the slow path has waited for the gate).
        permit = self._permit
        if permit is not None:
            deque(permit, maxlen=0)

    def clear(self) -> None:
        with self.lock:
            with self.queue.mutex:
                self._gen += 1
            cursor = self._cursor
            if cursor is not None:
                self._cursor = None
                self._count(cursor, cursor.drop())
            if self._waiting:
                self._changed.notify_all()

    def drop_revoked(self) -> None:
        """Drop the current chunk if its partition was revoked (an incremental rebalance gave
        it away): nothing more of it is handed out, and its consumed offset stays after the
        last message that was. Chunks of it not started yet are dropped by their epoch."""
        with self.lock:
            cursor = self._cursor
            if cursor is not None and cursor.info.revoked:
                self._cursor = None
                self._count(cursor, cursor.drop())
                if self._waiting:
                    self._changed.notify_all()

    def next_chunk(self) -> Iterator[Any]:
        """The chain's next iterator: the next chunk's (or the rest of the current one, after
        a gate wait), a :class:`_Raise`, or ``_END``. Never raises: ``chain`` drops a source
        that raises, which would end the stream for good (a Ctrl-C while it blocks, say)."""
        try:
            return self._next_chunk()
        except BaseException as e:  # noqa: BLE001 - raised by the chain, once
            return _Raise(e)

    def _wait_changed(self, deadline: float | None) -> bool:
        """Wait (``lock`` held) for ``_changed``, at most :data:`_RECHECK_S` (a notify lost
        to a Ctrl-C at the wrong instant then costs that much, not a hang); False once
        ``deadline`` has passed."""
        wait = _RECHECK_S
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            wait = min(wait, remaining)
        self._waiting += 1
        try:
            self._changed.wait(wait)
        finally:
            self._waiting -= 1
        return True

    def _next_chunk(self) -> Iterator[Any]:
        # Waiting for another thread of this stream (itself waiting for a chunk) counts.
        deadline = None if self.timeout_s is None else time.monotonic() + self.timeout_s
        inside = False
        try:
            with self.lock:
                while self._inside:
                    if not self._wait_changed(deadline):
                        return _Raise(self._timed_out("another thread of this stream waits"))
                self._inside = inside = True  # one statement (see the class docstring)
            while True:
                with self.lock:
                    cursor = self._cursor
                    if cursor is not None and cursor.exhausted():
                        self._cursor = None
                        cursor.info.detach_cursor(cursor, cursor.consumed())
                        self._count(cursor, cursor.position())
                        cursor = None
                    elif isinstance(cursor, _DecodingCursor) and cursor.only_busy_left():
                        # Another thread still decodes the chunk's last messages: the chunk
                        # is not done (its consumed offset must not pass them) until it has.
                        if not self._wait_changed(deadline):
                            return _Raise(self._timed_out(
                                "another thread of this stream still decodes a message"))
                        continue
                    if cursor is None:
                        if self._done:
                            return cast(Iterator[Any], _END)
                        if self._failed is not None:
                            if self.queue.shut:
                                # Shut down since: the loop that handles the failure ends.
                                self._done = True
                                return cast(Iterator[Any], _END)
                            error = BackgroundThreadError(
                                f"{self.client_id}: fetching failed: {self._failed.error!r}"
                            )
                            error.__cause__ = self._failed.error
                            return _Raise(error)
                if self.gate is not None and (self.gate.closed or self.gate.lapsed()):
                    try:
                        self.wait_gate(deadline)
                    except ConsumerTimeoutException as e:
                        return _Raise(e)
                    continue  # look again: a clear() may have come meanwhile
                if cursor is not None:
                    return self._iterator(cursor)  # the rest of a chunk stopped at the gate
                if self._pending is None:
                    try:
                        self._take(deadline)
                    except ConsumerTimeoutException as e:
                        return _Raise(e)
                pending = self._pending
                assert pending is not None
                chunk, gen = pending
                with self.lock:
                    if chunk is SHUTDOWN:
                        self._done = True
                        self._pending = None
                        return cast(Iterator[Any], _END)
                    if isinstance(chunk, FetcherFailed):
                        self._failed = chunk  # raised now and on every later call
                        self._pending = None
                        continue
                    if gen != self._gen:
                        self._pending = None
                        continue  # taken before a clear(): obsolete
                    # Started again if interrupted before the end: a cursor attached here
                    # and then lost reports the consumed offset it started from.
                    cursor = self._start(chunk)
                    self._cursor = cursor
                    self._pending = None  # after: a chunk started twice skips what it gave
                    if cursor is None:
                        continue  # all of it consumed already
                return self._iterator(cursor)
        finally:
            if inside:
                self._inside = False  # a plain store first: nothing can keep it from happening
                with self.lock:
                    if self._waiting:
                        self._changed.notify_all()

    def _count(self, cursor: _Cursor | _DecodingCursor, end: int) -> None:
        """Called with ``lock`` held: add the messages of ``cursor``'s chunk handed out up to
        index ``end`` and not counted yet to MessagesPerSec (and BytesPerSec) — per chunk as
        the iterator leaves it, and at each read of the metrics (:meth:`flush_metrics`), never
        per message. The legacy meters counted messages handed out, not fetched."""
        metrics = self.metrics
        start = cursor.counted
        if metrics is None or end <= start:
            return
        cursor.counted = end
        nbytes = cursor.bytes_between(start, end) if metrics.counts_bytes else 0
        metrics.record_messages(cursor.info.topic, end - start, nbytes)

    def flush_metrics(self) -> None:
        """Count what was handed out of the current chunk so far (the metrics are read)."""
        with self.lock:
            cursor = self._cursor
            if cursor is not None and not cursor.dropped:
                self._count(cursor, cursor.position())

    def _timed_out(self, why: str | None) -> ConsumerTimeoutException:
        timeout_ms = -1 if self.timeout_s is None else self.timeout_s * 1000
        return ConsumerTimeoutException(
            f"{self.client_id}: no message within consumer.timeout.ms ({timeout_ms:.0f} ms)"
            + (f": {why}" if why else "")
        )

    def wait_gate(self, deadline: float | None) -> None:
        assert self.gate is not None
        if deadline is None and self.timeout_s is not None:
            deadline = time.monotonic() + self.timeout_s
        if not self.gate.wait(deadline):
            raise self._timed_out("delivery paused")

    # -- internals ---------------------------------------------------------------------------
    def _iterator(self, cursor: _Cursor | _DecodingCursor) -> Iterator[Any]:
        if isinstance(cursor, _DecodingCursor):
            return cursor
        info = cursor.info
        first: Iterator[str]
        if self.gate is None:
            first = repeat(info.topic)
        else:
            # make_messages takes the topic before anything of the chunk: a permit per message
            # left, drained by the gate's close. One per cursor, shared by every iterator made
            # over it (two threads on one stream each get one), until a close drains it.
            # Published before the gate is read here, so a close either drains it or came
            # before.
            first_or_none = cursor.permit
            if first_or_none is None or not length_hint(first_or_none):
                first_or_none = cursor.permit = self.gate.permit(info.topic,
                                                                 length_hint(cursor.it))
            first = first_or_none
            self._permit = first
            if self.gate.closed:
                deque(first, maxlen=0)
        return make_messages(first, repeat(info.partition), *cursor.iters)

    def _start(self, chunk: FetchedDataChunk) -> _Cursor | _DecodingCursor | None:
        # Called with lock held.
        info = chunk.topic_info
        epoch = chunk.epoch
        records = chunk.records
        n = len(records)
        while True:
            # Early and without the lock; a reset that comes after this is caught under the
            # info's lock below (skip_consumed_to, attach_cursor), and the loop comes back here.
            if epoch != info.epoch:
                # Fetched before an offset reset: the fetcher fetches from the reset offset
                # again. Handed out, it would take the reset back.
                log.debug("%s dropping a chunk of %s:%d fetched before its offset reset",
                          self.client_id, info.topic, info.partition)
                return None
            consumed = info.consumed_offset
            if consumed < chunk.fetch_offset:
                if not info.skip_consumed_to(chunk.fetch_offset, consumed, epoch):
                    continue  # a reset came meanwhile: look again
                log.error(
                    "%s consumed offset %d does not match fetch offset %d for %s:%d; consumer "
                    "may lose data", self.client_id, consumed, chunk.fetch_offset, info.topic,
                    info.partition,
                )
                consumed = chunk.fetch_offset
            # A chunk's records are in offset order: those already consumed are a prefix.
            if not n or records[0].offset >= consumed:
                start = 0
            else:
                start = bisect_left(records, consumed, key=_offset_of)
            if start >= n:
                return None
            cursor: _Cursor | _DecodingCursor
            if self.plain:
                cursor = _Cursor(info, *_columns(records, start), consumed)
            else:
                cursor = _DecodingCursor(self, info, records, start, consumed)
            if info.attach_cursor(cursor, consumed, epoch):
                # Its messages are counted as they are handed out, per chunk (_count).
                return cursor
            # A reset came meanwhile: start over from the new consumed offset, or drop the
            # chunk (above) if the reset made it obsolete.

    def _take(self, deadline: float | None) -> None:
        """Block for the next chunk; make it ``_pending``, with the generation current when it
        was taken."""
        q = self.queue
        with q.not_empty:
            while not q._qsize():
                if deadline is None:
                    q.not_empty.wait()
                    continue
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise self._timed_out(None)
                q.not_empty.wait(remaining)
            # One statement: no Ctrl-C between taking it and keeping it.
            self._pending = (q._get(), self._gen)
            q.not_full.notify()


class ConsumerIterator(chain[MessageAndMetadata[K, V]], Generic[K, V]):
    """The one iterator of a :class:`KafkaStream`; see the module docstring.

    An ``itertools.chain`` (so ``next()`` is C code) over the iterators :class:`_Chunks`
    makes, one per chunk. :meth:`clear` may be called from any thread.
    """

    __slots__ = ("_chunks", "_source")
    _chunks: _Chunks
    _source: Iterator[Iterator[Any]]

    def __new__(
        cls,
        chunk_queue: ChunkQueue,
        consumer_timeout_ms: int,
        key_decoder: Decoder | None = None,
        value_decoder: Decoder | None = None,
        client_id: str = "",
        metrics: Any = None,
        gate: DeliveryGate | None = None,
    ) -> ConsumerIterator[K, V]:
        chunks = _Chunks(
            chunk_queue, consumer_timeout_ms, key_decoder, value_decoder, client_id, metrics,
            gate,
        )
        # from_iterable makes an instance of cls; the source never raises (see next_chunk).
        source = iter(chunks.next_chunk, _END)
        self = cast(ConsumerIterator[K, V], super().from_iterable(source))
        self._chunks = chunks
        # Kept: once the source ends, chain drops its reference while another thread may
        # still be inside it (blocked in next_chunk); C code does not hold one of its own.
        self._source = source
        return self

    @property
    def client_id(self) -> str:
        return self._chunks.client_id

    def clear(self) -> None:
        """Drop the current chunk (and any chunk a blocked ``next()`` is taking right now)."""
        self._chunks.clear()

    def drop_revoked(self) -> None:
        """Drop the current chunk if its partition was revoked (see ``_Chunks``)."""
        self._chunks.drop_revoked()


def _chunk_bytes(records: Sequence[Any], start: int, end: int) -> int:
    columns = getattr(records, "columns", None)
    if columns is not None:
        keys, values = (c[start:end] for c in columns()[3:5])
        return sum(map(len, filter(None, keys))) + sum(map(len, filter(None, values)))
    return sum(len(r.key or b"") + len(r.value or b"") for r in records[start:end])


class KafkaStream(Generic[K, V]):
    """An iterable over the messages of the partitions assigned to one consumer thread id.

    Made by ``create_message_streams*``, never by the application. Iterating twice continues
    the same iterator (one iterator per stream, as in the original). Each ``next()`` hands
    out a :class:`MessageAndMetadata` and moves its partition's consumed offset past it.

    ``next()`` (a ``for`` loop) blocks until a message comes, and

    - raises :class:`ConsumerTimeoutException` after ``consumer.timeout.ms`` (when >= 0)
      without one; the stream stays usable;
    - raises :class:`MessageDecodeError` when a decoder fails; the next call skips that
      message;
    - raises :class:`BackgroundThreadError` on every call once fetching failed for good,
      until the connector shuts down;
    - ends (``StopIteration``) once the connector is shut down.

    Thread safety: meant to be iterated by one thread (several still get each message
    once); :meth:`clear` may be called from any thread; see :class:`_Chunks` for the locks.
    """

    def __init__(
        self,
        chunk_queue: ChunkQueue,
        consumer_timeout_ms: int,
        key_decoder: Decoder | None = None,
        value_decoder: Decoder | None = None,
        client_id: str = "",
        metrics: Any = None,
        gate: DeliveryGate | None = None,
    ) -> None:
        self.chunk_queue = chunk_queue
        self.client_id = client_id
        self._iter: ConsumerIterator[K, V] = ConsumerIterator(
            chunk_queue, consumer_timeout_ms, key_decoder, value_decoder, client_id, metrics,
            gate,
        )

    def __iter__(self) -> Iterator[MessageAndMetadata[K, V]]:
        return self._iter

    @property
    def iterator(self) -> ConsumerIterator[K, V]:
        """The stream's one iterator (``iter(stream)``), as the original's
        ``stream.iterator()``."""
        return self._iter

    def clear(self) -> None:
        """Drop the iterator's current chunk (the rebalance calls this after clearing the
        queue; an application has no reason to).

        Nothing more of that chunk is handed out; its partition's consumed offset stays
        after the last message handed out.
        """
        self._iter.clear()

    def drop_revoked(self) -> None:
        """Drop the current chunk if a rebalance revoked its partition (the others go on);
        called by the incremental rebalance."""
        self._iter.drop_revoked()

    def __repr__(self) -> str:
        return f"KafkaStream(client_id={self.client_id!r}, queued={self.chunk_queue.qsize()})"


__all__ = [
    "CREATE_TIME",
    "LOG_APPEND_TIME",
    "NO_TIMESTAMP_TYPE",
    "ConsumerIterator",
    "KafkaStream",
    "MessageAndMetadata",
    "MessageDecodeError",
]
