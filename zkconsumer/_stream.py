"""Streams: what the application iterates over (``KafkaStream`` and ``ConsumerIterator``).

As in the original, each stream owns one bounded :class:`~zkconsumer._partition.ChunkQueue`
that the fetcher threads fill with :class:`~zkconsumer._partition.FetchedDataChunk` objects, and
each stream has exactly one iterator (``iter(stream)`` always returns the same one). The
iterator

- blocks on the queue, or waits ``consumer.timeout.ms`` (when >= 0) and raises
  :class:`~zkconsumer._errors.ConsumerTimeoutException`; the stream stays usable afterwards;
- skips records below the partition's consumed offset (re-fetched data, or chunks made
  obsolete by an offset reset) and advances the consumed offset as it hands each message out,
  so a commit never covers a message the application did not receive;
- decodes key and value with the stream's decoders (callables on ``bytes``; a ``None`` key or
  value stays ``None``). A decoder that raises makes ``next()`` raise
  :class:`MessageDecodeError` naming the topic, partition and offset, with the decoder's
  exception as ``__cause__``; the consumed offset stays *at* that message until the
  application calls ``next()`` again, which skips it (logged);
- ends (``StopIteration``, now and on every later call) at the shutdown sentinel;
- waits, before handing out each message, while the connector's
  :class:`~zkconsumer._gate.DeliveryGate` is closed (its ZooKeeper connection is down: it may
  no longer own the partition), with ``consumer.timeout.ms`` applying to that wait too.

:meth:`KafkaStream.clear` (called by the rebalance from another thread) drops the current
chunk; afterwards the iterator hands out nothing from it, nor from any chunk it had taken off
the queue before the clear (the rebalance clears the queue too).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Generic, NamedTuple, TypeVar

from ._errors import (
    BackgroundThreadError,
    ConsumerTimeoutException,
    MessageDecodeError,
)
from ._gate import DeliveryGate
from ._partition import (
    SHUTDOWN,
    ChunkQueue,
    FetchedDataChunk,
    FetcherFailed,
    PartitionTopicInfo,
)

log = logging.getLogger("zkconsumer.stream")

K = TypeVar("K")
V = TypeVar("V")

#: ``timestamp_type`` values (Kafka's ``TimestampType``): no timestamp (old message format),
#: set by the producer, set by the broker.
NO_TIMESTAMP_TYPE = -1
CREATE_TIME = 0
LOG_APPEND_TIME = 1

_tuple_new = tuple.__new__


class MessageAndMetadata(NamedTuple, Generic[K, V]):
    """One message as the iterator hands it out (the original's ``MessageAndMetadata``).

    ``message`` is the decoded value (``value`` is an alias, so a message is also a valid
    fetched record). ``timestamp`` is in epoch milliseconds (-1 when the message has none);
    ``timestamp_type`` is one of :data:`NO_TIMESTAMP_TYPE`, :data:`CREATE_TIME`,
    :data:`LOG_APPEND_TIME`.
    """

    topic: str
    partition: int
    offset: int
    key: K
    message: V
    timestamp: int
    timestamp_type: int

    @property
    def value(self) -> V:
        return self.message


Decoder = Callable[[bytes], Any]


class ConsumerIterator(Generic[K, V]):
    """The one iterator of a :class:`KafkaStream`; see the module docstring.

    Locks (taken in this order when nested):

    - ``_next_lock`` serialises the slow path of ``next()`` (taking a chunk off the queue,
      decoding); it is held while blocking on the queue. :meth:`clear` never takes it.
    - ``_chunk_lock`` guards the current chunk (``_records``, ``_n``, ``_pos``, ``_info``,
      ``_advance``, ``_consumed``), ``_pending_skip``, ``_done`` and ``_gen``; a record is
      taken and the consumed offset advanced under it, and it is never held while blocking on
      the queue.
    - ``_gen`` (bumped by :meth:`clear`) is written holding ``_chunk_lock`` *and* the queue's
      mutex, so the iterator reads it atomically with taking a chunk off the queue: a chunk
      taken before a clear carries the old generation and is dropped.

    ``_consumed`` is the iterator's view of the partition's consumed offset: read from the
    partition when a chunk starts, then advanced as messages are handed out (each also
    advancing the partition's, :meth:`PartitionTopicInfo.advance_consumed`).
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
        self._queue = chunk_queue
        self._gate = gate if gate is not None else DeliveryGate()
        self._metrics = metrics  # a ConsumerMetrics, or None
        self._timeout_s = consumer_timeout_ms / 1000.0 if consumer_timeout_ms >= 0 else None
        self._key_decoder = key_decoder
        self._value_decoder = value_decoder
        self._plain = key_decoder is None and value_decoder is None
        self.client_id = client_id
        self._next_lock = threading.Lock()
        self._chunk_lock = threading.Lock()
        self._gen = 0
        self._records: Sequence[Any] | None = None
        self._n = 0
        self._pos = 0
        self._info: PartitionTopicInfo | None = None
        self._advance: Callable[[int], None] = _no_advance
        self._consumed = 0
        self._pending_skip: tuple[PartitionTopicInfo, int, int] | None = None  # info, off, gen
        self._done = False
        self._failed: FetcherFailed | None = None

    def __iter__(self) -> ConsumerIterator[K, V]:
        return self

    def __next__(self) -> MessageAndMetadata[K, V]:
        if self._gate.closed:
            self._wait_gate()
        if self._plain:
            # Fast path: the next record of the current chunk, no decoding.
            with self._chunk_lock:
                records = self._records
                if records is not None:
                    pos = self._pos
                    n = self._n
                    consumed = self._consumed
                    while pos < n:
                        r = records[pos]
                        pos += 1
                        offset = r.offset
                        if offset >= consumed:
                            self._pos = pos
                            self._consumed = offset + 1
                            self._advance(offset + 1)
                            if type(r) is MessageAndMetadata:
                                return r
                            return _to_message(r)
                    self._pos = pos
                    self._drop_chunk()
        with self._next_lock:
            return self._next_slow()

    def clear(self) -> None:
        """Drop the current chunk (and any chunk a blocked ``next()`` is taking right now)."""
        with self._chunk_lock:
            with self._queue.mutex:
                self._gen += 1
            self._drop_chunk()
            self._pending_skip = None

    # -- internals ---------------------------------------------------------------------------
    def _wait_gate(self) -> None:
        deadline = None if self._timeout_s is None else time.monotonic() + self._timeout_s
        if not self._gate.wait(deadline):
            raise ConsumerTimeoutException(
                f"{self.client_id}: no message within consumer.timeout.ms "
                f"({self._timeout_s * 1000 if self._timeout_s else 0:.0f} ms): delivery paused"
            )

    def _drop_chunk(self) -> None:
        self._records = None
        self._info = None
        self._advance = _no_advance
        self._n = self._pos = 0

    def _next_slow(self) -> MessageAndMetadata[K, V]:
        deadline: float | None = None
        while True:
            rec: Any = None
            gen = 0
            with self._chunk_lock:
                if self._pending_skip is not None:
                    self._skip_undecodable()
                if self._done:
                    raise StopIteration
                if self._failed is not None:
                    raise BackgroundThreadError(
                        f"{self.client_id}: fetching failed: {self._failed.error!r}"
                    ) from self._failed.error
                records = self._records
                info = self._info
                if records is not None and info is not None:
                    while self._pos < self._n:
                        r = records[self._pos]
                        self._pos += 1
                        offset = r.offset
                        if offset < self._consumed:
                            continue  # already consumed (re-fetched, or the offset was reset)
                        if self._plain:
                            self._consumed = offset + 1
                            info.advance_consumed(offset + 1)
                            if type(r) is MessageAndMetadata:
                                return r
                            return _to_message(r)
                        rec = r
                        gen = self._gen
                        break
                    else:
                        self._drop_chunk()
            if rec is not None:
                assert info is not None
                message = self._decode(rec, info, gen)
                if message is not None:
                    return message
                continue  # cleared while decoding: that record is gone
            # No current chunk: take one off the queue.
            if deadline is None and self._timeout_s is not None:
                deadline = time.monotonic() + self._timeout_s
            chunk, gen = self._take(deadline)
            with self._chunk_lock:
                if chunk is SHUTDOWN:
                    self._done = True
                    raise StopIteration
                if isinstance(chunk, FetcherFailed):
                    self._failed = chunk  # raised now and on every later call
                    continue
                if gen != self._gen:
                    continue  # taken before a clear(): obsolete
                self._set_chunk(chunk)

    def _set_chunk(self, chunk: FetchedDataChunk) -> None:
        # Called with _chunk_lock held.
        info = chunk.topic_info
        consumed = info.consumed_offset
        if consumed < chunk.fetch_offset:
            log.error(
                "%s consumed offset %d does not match fetch offset %d for %s:%d; consumer may "
                "lose data", self.client_id, consumed, chunk.fetch_offset, info.topic,
                info.partition,
            )
            info.reset_consumed_offset(chunk.fetch_offset)
            consumed = chunk.fetch_offset
        self._records = chunk.records
        self._n = len(chunk.records)
        self._pos = 0
        self._info = info
        self._advance = info.advance_consumed
        self._consumed = consumed
        metrics = self._metrics
        if metrics is not None:
            # Counted per chunk as it starts (the legacy iterator counted per message; this
            # keeps the per-message path free). Bytes only when the metrics are served.
            nbytes = _chunk_bytes(chunk.records) if metrics.port is not None else 0
            metrics.record_messages(info.topic, self._n, nbytes)

    def _take(self, deadline: float | None) -> tuple[Any, int]:
        """Block for the next chunk; return it with the generation current when it was taken."""
        q = self._queue
        with q.not_empty:
            while not q._qsize():
                if deadline is None:
                    q.not_empty.wait()
                    continue
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    timeout_ms = -1 if self._timeout_s is None else self._timeout_s * 1000
                    raise ConsumerTimeoutException(
                        f"{self.client_id}: no message within consumer.timeout.ms "
                        f"({timeout_ms:.0f} ms)"
                    )
                q.not_empty.wait(remaining)
            item = q._get()
            q.not_full.notify()
            return item, self._gen

    def _decode(
        self, rec: Any, info: PartitionTopicInfo, gen: int
    ) -> MessageAndMetadata[K, V] | None:
        key = rec.key
        value = rec.value
        part = "key"
        try:
            if key is not None and self._key_decoder is not None:
                key = self._key_decoder(key)
            part = "value"
            if value is not None and self._value_decoder is not None:
                value = self._value_decoder(value)
        except Exception as e:
            with self._chunk_lock:
                if self._gen == gen:
                    self._pending_skip = (info, rec.offset, gen)
            raise MessageDecodeError(rec.topic, rec.partition, rec.offset, part, e) from e
        with self._chunk_lock:
            if self._gen != gen:
                return None
            if rec.offset + 1 > self._consumed:
                self._consumed = rec.offset + 1
            info.advance_consumed(rec.offset + 1)
        ts_type = rec.timestamp_type
        ts = rec.timestamp
        result: MessageAndMetadata[K, V] = _tuple_new(
            MessageAndMetadata,
            (rec.topic, rec.partition, rec.offset, key, value,
             -1 if ts is None else ts, NO_TIMESTAMP_TYPE if ts_type is None else ts_type),
        )
        return result

    def _skip_undecodable(self) -> None:
        # Called with _chunk_lock held.
        pending = self._pending_skip
        self._pending_skip = None
        if pending is None:
            return
        info, offset, gen = pending
        if gen != self._gen:
            return
        log.warning(
            "%s skipping the message at %s:%d offset %d that failed to decode",
            self.client_id, info.topic, info.partition, offset,
        )
        if info is self._info and offset + 1 > self._consumed:
            self._consumed = offset + 1
        info.advance_consumed(offset + 1)


def _no_advance(offset: int) -> None:
    pass


def _to_message(rec: Any) -> MessageAndMetadata[Any, Any]:
    ts_type = rec.timestamp_type
    ts = rec.timestamp
    result: MessageAndMetadata[Any, Any] = _tuple_new(
        MessageAndMetadata,
        (rec.topic, rec.partition, rec.offset, rec.key, rec.value,
         -1 if ts is None else ts, NO_TIMESTAMP_TYPE if ts_type is None else ts_type),
    )
    return result


def _chunk_bytes(records: Sequence[Any]) -> int:
    return sum(len(r.key or b"") + len(r.value or b"") for r in records)


class KafkaStream(Generic[K, V]):
    """An iterable over the messages of the partitions assigned to one consumer thread id.

    Iterating twice continues the same iterator (one iterator per stream, as in the
    original). Thread safety: :meth:`clear` may be called from any thread; see
    :class:`ConsumerIterator` for the locks.
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
        return self._iter

    def clear(self) -> None:
        """Drop the iterator's current chunk (the rebalance calls this after clearing the
        queue)."""
        self._iter.clear()

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
