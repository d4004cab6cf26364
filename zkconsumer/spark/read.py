"""What executors read: one :class:`OffsetRange` per Spark task, as Arrow record batches,
with confluent-kafka or kafka-python clients from :mod:`zkconsumer.broker.clients`, kept in a
small pool per Python worker; and what a range past the log end or over lost data does."""

from __future__ import annotations

import bisect
import dataclasses
import logging
import math
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import InputPartition

from zkconsumer._config import ConsumerConfig
from zkconsumer._errors import ZkConsumerError
from zkconsumer._types import TopicPartition
from zkconsumer.broker.clients import (
    confluent_consumer,
    fetch_library,
    kafka_consumer,
    kafka_python_kwargs,
)
from zkconsumer.spark.offsets import _OffsetLookup
from zkconsumer.spark.options import SCHEMA

try:
    from zkconsumer._speedups import split_messages
except ImportError:  # built without a C compiler (see setup.py): the Python path does it
    split_messages = None  # type: ignore[assignment]

if TYPE_CHECKING:
    import pyarrow as pa


__all__ = [
    "ARROW_BATCH_ROWS",
    "LOG_END_CONFIRM_S",
    "LOG_END_RETRIES",
    "LOG_END_RETRY_S",
    "MAX_IDLE_CLIENTS",
    "READ_STALL_S",
    "OffsetRange",
    "read_range",
    "split_ranges",
]

log = logging.getLogger("zkconsumer.spark")

#: When the driver plans, a log end found below a partition's position (or a batch read's
#: endingOffsets) is looked up again this often, this far apart, before it counts as lost data.
LOG_END_RETRIES = 3
LOG_END_RETRY_S = 1.0
#: An executor ends a range at its position as past the log end (lost data) only once the log
#: end has stayed at or below the position this long, looked up at most every LOG_END_RETRY_S
#: meanwhile. After a leader change the new leader's high watermark can stay below the old
#: one's until its in-sync followers have caught up: for up to replica.lag.time.max.ms, whose
#: default is 30 s. Offsets that exist must not be skipped (or a task failed) in that window.
LOG_END_CONFIRM_S = 30.0

#: Rows per Arrow record batch handed to Spark.
ARROW_BATCH_ROWS = 65_536
#: An executor fails its task when an offset range makes no progress for this long (not
#: counting the time its log end is known to be at or below its position: see _LogEndCheck).
READ_STALL_S = 60.0
# -- what executors read ----------------------------------------------------------------------


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """One Spark task: offsets ``[start, end)`` of one Kafka partition."""

    topic: str
    partition: int
    start: int
    end: int
    bootstrap: tuple[str, ...]
    props: tuple[tuple[str, str], ...]
    fail_on_data_loss: bool

    def __repr__(self) -> str:
        return f"OffsetRange({self.topic}:{self.partition} [{self.start}, {self.end}))"


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """``ranges`` as at least about ``min_partitions`` tasks, as Spark's Kafka source splits
    them: when there are fewer ranges, each is cut into contiguous pieces, their number in
    proportion to its share of all the offsets (at least one; rounded half up). Deterministic:
    a micro-batch replayed after a restart gets the same tasks."""
    total = sum(r.end - r.start for r in ranges)
    if min_partitions is None or len(ranges) >= min_partitions or total <= 0:
        return ranges
    out = []
    for rng in ranges:
        size = rng.end - rng.start
        pieces = max(math.floor(size / total * min_partitions + 0.5), 1)  # Scala's round
        start, remaining = rng.start, size
        for i in range(pieces):
            this = remaining // (pieces - i)  # the last pieces take what rounding left
            remaining -= this
            if this > 0:
                out.append(dataclasses.replace(rng, start=start, end=start + this))
            start += this
    return out


_CLIENTS_LOCK = threading.Lock()
#: Executor-side clients not in use, by (backend, bootstrap, props), the least recently used
#: first: kept for the next tasks the Python worker runs (Spark reuses workers). A task takes
#: its client out while it reads, so a client in use is never closed by the bound below.
#: Guarded by ``_CLIENTS_LOCK``.
_CLIENTS: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
#: At most this many idle clients per Python worker; the least recently used one beyond is
#: closed. Each holds sockets (and librdkafka's threads): a long-lived worker running reads
#: with many group.ids or brokers would otherwise pile them up.
MAX_IDLE_CLIENTS = 4


def _arrow_schema() -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    # Exactly what Spark checks record batches against.
    return to_arrow_schema(SCHEMA, timezone="UTC")


def _to_batch(
    schema: pa.Schema, rng: OffsetRange, keys: list[Any], values: list[Any],
    offsets: list[int], timestamps: list[int | None] | pa.Array,
) -> pa.RecordBatch:
    import pyarrow as pa

    n = len(offsets)
    return pa.RecordBatch.from_arrays(
        [
            pa.array(keys, pa.binary()),
            pa.array(values, pa.binary()),
            pa.repeat(pa.scalar(rng.topic, pa.string()), n),
            pa.repeat(pa.scalar(rng.partition, pa.int32()), n),
            pa.array(offsets, pa.int64()),
            (timestamps if isinstance(timestamps, pa.Array)
             else pa.array(timestamps, pa.timestamp("us", tz="UTC"))),
        ],
        schema=schema,
    )


def _stamps_us(stamps: list[int], has: list[int]) -> pa.Array:
    """librdkafka's millisecond timestamps as Arrow microseconds; null where a message has
    none (``has`` 0, or a negative one)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = pa.timestamp("us", tz="UTC")
    ms = pa.array(stamps, pa.int64())
    if all(has) and (not stamps or pc.min(ms).as_py() >= 0):  # the usual case, in C
        return pc.multiply(ms, 1000).cast(kind)
    return pa.array([t * 1000 if h and t >= 0 else None
                     for t, h in zip(stamps, has, strict=True)], kind)


def _corrupt(rng: OffsetRange, at: int, detail: object) -> ZkConsumerError:
    # Never skipped here: a batch's rows would silently lack the message. The broker keeps
    # the bytes as they are, so a retried task fails the same way.
    return ZkConsumerError(
        f"zkconsumer source: corrupt data in {rng.topic}:{rng.partition} at offset {at} "
        f"(a record batch failed its CRC check): {detail}"
    )


def _data_loss(rng: OffsetRange, at: int, earliest: int | None) -> ZkConsumerError:
    where = f"earliest available is {earliest}" if earliest is not None else "out of range"
    hint = "; set failOnDataLoss=false to skip lost data" if rng.fail_on_data_loss else ""
    return ZkConsumerError(
        f"zkconsumer source: offsets [{at}, {rng.end}) of {rng.topic}:{rng.partition} are no "
        f"longer available ({where}){hint}"
    )


def _past_log_end(rng: OffsetRange, at: int, log_end: int, *, out_of_range: bool = False,
                  how: str | None = None) -> ZkConsumerError | None:
    """Offsets ``[at, end)`` of the range are beyond the partition's log end: lost data.

    Known either from the broker (``out_of_range``: it answered OFFSET_OUT_OF_RANGE for
    ``at``, whose log start is not above it, or ``how`` it told), or because the log end
    stayed at or below ``at`` for LOG_END_CONFIRM_S (:class:`_LogEndCheck`). The error to raise with
    failOnDataLoss; else None, after a warning: the range ends at ``at`` (the next batch's plan
    goes on from the log end).
    """
    where = f"{rng.topic}:{rng.partition}"
    cause = "the log was truncated or the topic recreated after the range was planned"
    answered = how or f"the broker answered offset {at} out of range"
    if not out_of_range:
        message = (f"offsets [{at}, {rng.end}) of {where} are beyond its log end {log_end}, "
                   f"where it stayed for {LOG_END_CONFIRM_S:g} s ({cause}, or a new "
                   "leader's high watermark lagged longer than that)")
    elif log_end <= at:
        message = (f"offsets [{at}, {rng.end}) of {where} are beyond its log end {log_end} "
                   f"({answered}: {cause})")
    else:  # the log grew again between the broker's answer and the lookup of its end
        message = (f"offsets [{at}, {rng.end}) of {where} were beyond its log end ({answered}: "
                   f"{cause}; its log end is {log_end} now)")
    if rng.fail_on_data_loss:
        return ZkConsumerError(f"zkconsumer source: {message}; set failOnDataLoss=false to "
                               "go on from the log end")
    log.warning("zkconsumer source: %s; the range ends at %d", message, at)
    return None


class _LogEndCheck:
    """Whether a task's position has reached the log end before its range's end.

    The hint is a fetch answer without records whose high watermark is at or below the
    position. The log end is then looked up afresh (a fetch's high watermark, as the plan
    does) at most every LOG_END_RETRY_S, with one client kept while it stays there, and the
    range counts as past the log end only once it has stayed at or below the position for
    LOG_END_CONFIRM_S. So a stale high watermark never ends a range early: neither a new
    leader's, which lags the old one's for up to replica.lag.time.max.ms (30 s by default),
    nor a reused confluent client's cached one, the last task's until this task's first fetch
    answer (the reader takes no hint from it before). Progress, or a log end found above the
    position (by a lookup, or a fetch answer's high watermark), starts the window again;
    from a log end found above, no more lookups are made until the position passes it or a
    fetch answer's high watermark falls below it (the log truncated since).

    While the log end is known to be at or below the position, the no-progress guard
    (READ_STALL_S) waits for the window (:meth:`stalled`). It is what ends a task whose log end
    is above its position but whose records do not arrive, or whose log end is unknown (a
    lookup that fails).
    """

    def __init__(self, rng: OffsetRange, config: ConsumerConfig) -> None:
        self.rng = rng
        self.config = config
        self.known_end = -1  # a log end found beyond an earlier position
        self.next_lookup = 0.0
        #: Since when lookups have found the log end at or below the position (None: not).
        self.low_since: float | None = None
        #: When the log end was last known to be at or below the position.
        self.low_until = 0.0
        self._position: int | None = None
        self._lookup: _OffsetLookup | None = None

    def log_end(self, position: int, high_watermark: int | None) -> int | None:
        """The log end once it has stayed at or below ``position`` for LOG_END_CONFIRM_S, else
        None. ``high_watermark``: that of this task's last fetch answer (None: not known)."""
        if position != self._position:  # progress: what was found is about another position
            self._position = position
            self._reset()
        if high_watermark is not None and high_watermark > position:
            self.known_end = max(self.known_end, high_watermark)  # the leader says: above
            self._reset()
            return None
        if high_watermark is not None and 0 <= high_watermark < self.known_end:
            # The leader says lower than a log end found before: truncated since (an unclean
            # leader election), or a new leader's lagging high watermark. Looked up again.
            self.known_end = -1
        if self.low_since is None and (high_watermark is None or high_watermark < 0
                                       or position < self.known_end):
            return None
        started = time.monotonic()
        if started < self.next_lookup:
            if self.low_since is not None:
                self.low_until = started
            return None
        self.next_lookup = started + LOG_END_RETRY_S
        tp = TopicPartition(self.rng.topic, self.rng.partition)
        if self._lookup is None:
            self._lookup = _OffsetLookup(self.config, self.rng.bootstrap)
        try:
            end = self._lookup.latest([tp])[tp]
        except Exception as e:  # noqa: BLE001 - unknown: the no-progress guard decides
            log.warning("%s:%d: looking up the log end failed: %r", tp.topic, tp.partition, e)
            self._reset()
            self.next_lookup = time.monotonic() + 5 * LOG_END_RETRY_S
            return None
        if end > position:
            self.known_end = end
            self._reset()
            return None
        self.low_until = time.monotonic()
        if self.low_since is None:
            self.low_since = self.low_until
        return end if started - self.low_since >= LOG_END_CONFIRM_S else None

    def range_ends(self, position: int, high_watermark: int | None,
                   last_progress: float) -> bool:
        """After a fetch answer without records short of the range's end: True when the
        range ends at ``position`` (past the log end, failOnDataLoss=false: warned). Raises
        the data-loss error (failOnDataLoss) or the no-progress one (:meth:`stalled`)."""
        log_end = self.log_end(position, high_watermark)
        if log_end is not None:
            error = _past_log_end(self.rng, position, log_end)
            if error is not None:
                raise error
            return True
        if self.stalled(last_progress):
            raise ZkConsumerError(
                f"zkconsumer source: no progress reading {self.rng.topic}:"
                f"{self.rng.partition} at offset {position} (range ends at {self.rng.end}) "
                f"for {READ_STALL_S:.0f} s"
            )
        return False

    def stalled(self, last_progress: float) -> bool:
        """Whether the no-progress guard ends the task: no progress for READ_STALL_S, not
        counting the time the log end was known to be at or below the position."""
        return (self.low_since is None
                and time.monotonic() - max(last_progress, self.low_until) > READ_STALL_S)

    def _reset(self) -> None:
        self.low_since = None
        self.close()

    def close(self) -> None:
        lookup, self._lookup = self._lookup, None
        if lookup is not None:
            lookup.close()


def read_range(rng: OffsetRange) -> Iterator[pa.RecordBatch]:
    """The records of ``rng`` as Arrow record batches (executor side)."""
    if rng.end <= rng.start:
        return iter(())
    config = ConsumerConfig(dict(rng.props))
    # Decided here, not in the driver: executors may lack what the driver has.
    if fetch_library(config) == "confluent":
        return _read_confluent(rng, config)
    return _read_kafka_python(rng, config)


def _take_client(key: tuple[Any, ...], make: Any) -> Any:
    """An idle client for ``key``, taken out of the pool while the task uses it, or a new one."""
    with _CLIENTS_LOCK:
        client = _CLIENTS.pop(key, None)
    return make() if client is None else client


def _return_client(key: tuple[Any, ...], client: Any) -> None:
    """Keep ``client`` for the next task, closing the least recently used beyond the bound."""
    with _CLIENTS_LOCK:
        evicted = []
        previous = _CLIENTS.pop(key, None)  # one returned meanwhile (a concurrent task's)
        if previous is not None and previous is not client:
            evicted.append(previous)
        _CLIENTS[key] = client
        while len(_CLIENTS) > MAX_IDLE_CLIENTS:
            evicted.append(_CLIENTS.popitem(last=False)[1])
    for old in evicted:
        _close_client(old)


def _close_client(client: Any) -> None:
    try:
        client.close()
    except Exception:  # nothing left to do with it
        log.debug("closing a client failed", exc_info=True)


def _read_kafka_python(rng: OffsetRange, config: ConsumerConfig) -> Iterator[pa.RecordBatch]:
    from kafka import TopicPartition as KTP

    key = ("kafka-python", rng.bootstrap, rng.props)

    def make() -> Any:
        # Only for a new client: with TLS, the settings load certificate files.
        kwargs = kafka_python_kwargs(config, rng.bootstrap)
        kwargs["max_poll_records"] = ARROW_BATCH_ROWS
        return kafka_consumer(**kwargs)

    consumer = _take_client(key, make)
    schema = _arrow_schema()
    ktp = KTP(rng.topic, rng.partition)
    ends = _LogEndCheck(rng, config)
    ok = False
    try:
        yield from _kafka_python_batches(consumer, ktp, rng, schema, ends)
        consumer.unsubscribe()
        ok = True
    finally:
        ends.close()
        if ok:
            _return_client(key, consumer)
        else:
            _close_client(consumer)


def _kafka_python_batches(consumer: Any, ktp: Any, rng: OffsetRange, schema: pa.Schema,
                          ends: _LogEndCheck) -> Iterator[pa.RecordBatch]:
    """The records of ``rng`` read with a kafka-python ``consumer``, as record batches."""
    consumer.assign([ktp])
    consumer.seek(ktp, rng.start)
    position = rng.start
    last_progress = time.monotonic()
    keys: list[Any] = []
    values: list[Any] = []
    offsets: list[int] = []
    stamps: list[int | None] = []
    while position < rng.end:
        fetched, position, stop = _poll_kafka_python(consumer, ktp, rng, position)
        if stop:
            break
        if fetched is None:
            continue
        records = fetched.get(ktp, ())
        for r in records:
            if r.offset >= rng.end:
                position = rng.end
                break
            if r.offset < position:
                continue
            keys.append(r.key)
            values.append(r.value)
            offsets.append(r.offset)
            ts = r.timestamp
            stamps.append(ts * 1000 if ts is not None and ts >= 0 else None)
            position = r.offset + 1
        else:
            # Past control records and compacted gaps too.
            position = max(position, min(rng.end, consumer.position(ktp)))
        if records:
            last_progress = time.monotonic()
        elif position < rng.end:
            if ends.range_ends(position, consumer.highwater(ktp), last_progress):
                break
        if len(offsets) >= ARROW_BATCH_ROWS or (offsets and position >= rng.end):
            yield _to_batch(schema, rng, keys, values, offsets, stamps)
            keys, values, offsets, stamps = [], [], [], []
    if offsets:  # read before lost data ended the range, or a skip took it beyond
        yield _to_batch(schema, rng, keys, values, offsets, stamps)


def _poll_kafka_python(consumer: Any, ktp: Any, rng: OffsetRange,
                       position: int) -> tuple[dict[Any, Any] | None, int, bool]:
    """One poll at ``position``: (what it fetched, None when nothing is to be taken from it
    this time; the position to go on from; whether the range ends here). Lost data and
    corrupt records raise, or (failOnDataLoss=false) end the range or skip past them."""
    from kafka.errors import CorruptRecordError, LogTruncationError, OffsetOutOfRangeError

    try:
        # No more than the range needs: kafka-python parses a response's batches as
        # it hands records out, so a corrupt batch past the range is never reached.
        fetched = consumer.poll(
            timeout_ms=500, max_records=min(ARROW_BATCH_ROWS, rng.end - position)
        )
    except OffsetOutOfRangeError:
        earliest = int(consumer.beginning_offsets([ktp])[ktp])
        if earliest <= position:
            # Out of range, not below the log start: beyond the log end.
            error = _past_log_end(rng, position, int(consumer.end_offsets([ktp])[ktp]),
                                  out_of_range=True)
            if error is not None:
                raise error from None
            return None, position, True
        if rng.fail_on_data_loss:
            raise _data_loss(rng, position, earliest) from None
        log.warning("%s:%s: offsets [%d, %d) were lost; going on from %d",
                    rng.topic, rng.partition, position, earliest, earliest)
        consumer.seek(ktp, earliest)
        return None, earliest, False
    except LogTruncationError as e:
        if ktp not in e.divergent_offsets:
            return None, position, False  # a pooled client's, of an earlier task's partition
        # KIP-320: the new leader's log ends below records read (an unclean leader
        # election), where it diverges, or (None) somewhere unknown.
        diverged = e.divergent_offsets[ktp]
        end = (int(diverged.offset) if diverged is not None
               else int(consumer.end_offsets([ktp])[ktp]))
        error = _past_log_end(rng, position, end, out_of_range=True,
                              how="the new leader's log was truncated below it")
        if error is not None:
            raise error from None
        return None, position, True
    except CorruptRecordError as e:
        at = re.search(r"at offset (\d+)", str(e))
        raise _corrupt(rng, int(at.group(1)) if at else position, e) from e
    return fetched, position, False


def _read_confluent(rng: OffsetRange, config: ConsumerConfig) -> Iterator[pa.RecordBatch]:
    from confluent_kafka import TopicPartition as CTP

    key = ("confluent", rng.bootstrap, rng.props)
    consumer = _take_client(key, lambda: confluent_consumer(config, rng.bootstrap,
                                                            f"spark-{os.getpid()}"))
    schema = _arrow_schema()
    ctp = CTP(rng.topic, rng.partition)
    ends = _LogEndCheck(rng, config)
    ok = False
    try:
        consumer.assign([CTP(rng.topic, rng.partition, rng.start)])
        yield from _confluent_batches(consumer, ctp, rng, schema, ends, config)
        consumer.unassign()
        ok = True
    finally:
        ends.close()
        if ok:
            _return_client(key, consumer)
        else:
            _close_client(consumer)


def _confluent_batches(consumer: Any, ctp: Any, rng: OffsetRange, schema: pa.Schema,
                       ends: _LogEndCheck, config: ConsumerConfig) -> Iterator[pa.RecordBatch]:
    """The records of ``rng`` read with a confluent-kafka ``consumer`` (assigned at the
    range's start), as record batches."""
    # librdkafka keeps a partition's cached watermarks across unassign/assign: a reused
    # client's are the last task's until this task's first fetch answer, and no hint of
    # this task's log end. The answer is in once a message or event is consumed, or the
    # watermarks change, or (the same watermarks again) once it is due.
    inherited = _cached_watermarks(consumer, ctp)
    answer_due = time.monotonic() + config.fetch_wait_max_ms / 1000 + LOG_END_RETRY_S
    answered = False
    position = rng.start
    last_progress = time.monotonic()
    while position < rng.end:
        messages = consumer.consume(min(ARROW_BATCH_ROWS, rng.end - position), 0.5)
        answered = answered or bool(messages)
        ended = False
        skip_to: int | None = None
        columns = _columns(messages, rng)
        if columns is None and [m for m in messages if m.error() is not None]:
            messages, position, ended, skip_to = _confluent_errors(
                consumer, rng, messages, position,
                timeout_s=max(config.socket_timeout_ms, 10_000) / 1000)
        if messages:
            last_progress = time.monotonic()
            batch, position = (_columns_batch(schema, rng, columns, position)
                               if columns is not None
                               else _confluent_batch(schema, rng, messages, position))
            if batch is not None:
                yield batch
            if skip_to is not None:
                position = max(position, skip_to)  # past what retention deleted
        elif skip_to is not None:
            position = skip_to
        elif not ended:
            pos = consumer.position([ctp])[0].offset
            if pos is not None and pos > position:
                position = min(rng.end, pos)  # past control records and gaps
                continue
            cached = _cached_watermarks(consumer, ctp)
            answered = (answered or cached != inherited
                        or time.monotonic() >= answer_due)
            # The high watermark of this task's last fetch answer (-1001 before the first).
            high = cached[1] if answered and cached is not None else None
            if ends.range_ends(position, high, last_progress):
                break
        if ended:
            break


#: split_messages' value for each librdkafka timestamp type (not available, create time,
#: log append time): whether the message has a timestamp.
_HAS_TIMESTAMP = (0, 1, 1)
_Columns = tuple[list[int], list[Any], list[Any], list[int], list[int]]


def _columns(messages: list[Any], rng: OffsetRange) -> _Columns | None:
    """``messages`` as columns (offsets, keys, values, timestamps, whether each has one),
    read in C by :mod:`zkconsumer._speedups`; None when it is not built, or when a message is
    an error or of another partition (what :func:`_confluent_batch` and
    :func:`_confluent_errors` handle, message by message)."""
    if split_messages is None or not messages:
        return None
    runs, errors = split_messages(messages, _HAS_TIMESTAMP)
    if errors or len(runs) != 1:
        return None
    topic, partition, offsets, keys, values, stamps, has = runs[0]
    if topic != rng.topic or partition != rng.partition:
        return None
    return offsets, keys, values, stamps, has


def _columns_batch(schema: pa.Schema, rng: OffsetRange, columns: _Columns,
                   position: int) -> tuple[pa.RecordBatch | None, int]:
    """:func:`_confluent_batch` of messages read as ``columns``."""
    offsets, keys, values, stamps, has = columns
    lo = bisect.bisect_left(offsets, position)
    hi = bisect.bisect_left(offsets, rng.end)
    reached_end = hi < len(offsets)
    if lo or reached_end:
        offsets, keys, values = offsets[lo:hi], keys[lo:hi], values[lo:hi]
        stamps, has = stamps[lo:hi], has[lo:hi]
    batch = None
    if offsets:
        position = offsets[-1] + 1
        batch = _to_batch(schema, rng, keys, values, offsets, _stamps_us(stamps, has))
    if reached_end:
        position = rng.end
    return batch, position


def _confluent_batch(schema: pa.Schema, rng: OffsetRange, messages: list[Any],
                     position: int) -> tuple[pa.RecordBatch | None, int]:
    """The messages in ``[position, end)`` of the range as a record batch (None: there are
    none), and the position after them (the range's end once a message reaches it)."""
    # One partition, in offset order: keep what lies in [position, end).
    offsets = [m.offset() for m in messages]
    lo = bisect.bisect_left(offsets, position)
    hi = bisect.bisect_left(offsets, rng.end)
    reached_end = hi < len(offsets)
    if lo or reached_end:
        messages, offsets = messages[lo:hi], offsets[lo:hi]
    batch = None
    if messages:
        position = offsets[-1] + 1
        stamps = [ts * 1000 if kind and ts >= 0 else None
                  for kind, ts in (m.timestamp() for m in messages)]
        batch = _to_batch(schema, rng, [m.key() for m in messages],
                          [m.value() for m in messages], offsets, stamps)
    if reached_end:
        position = rng.end
    return batch, position


def _cached_watermarks(consumer: Any, ctp: Any) -> tuple[int, int] | None:
    """librdkafka's cached (low, high) watermarks of ``ctp``; None when it has none."""
    try:
        found = consumer.get_watermark_offsets(ctp, cached=True)
    except Exception:  # noqa: BLE001 - the partition unknown to it yet: no hint
        return None
    return (int(found[0]), int(found[1])) if found else None


def _confluent_errors(
    consumer: Any, rng: OffsetRange, messages: list[Any], position: int, timeout_s: float = 10.0,
) -> tuple[list[Any], int, bool, int | None]:
    """Drop error events from ``messages``; an offset reset means lost data (or a re-seek).

    (messages, position, whether the range ends after the messages returned, where reading
    goes on after them), with failOnDataLoss=false: the range ends when the broker answered
    the offset after them out of range beyond the log end; it goes on at the log start when
    retention deleted that offset. The messages returned are read either way: they came
    before the offset that failed. When they reach the range's end, or the offset that
    failed is past it, the range was read whole: it ends, whatever happened after it.
    """
    from confluent_kafka import KafkaError

    good = []
    for m in messages:
        err = m.error()
        if err is None:
            good.append(m)
        elif err.code() == KafkaError._PARTITION_EOF:
            continue
        elif err.code() == KafkaError._BAD_MSG:  # check.crcs: a batch failed its CRC check
            if m.offset() >= rng.end:
                continue  # past the range: what comes before it is all the range has
            raise _corrupt(rng, max(position, m.offset()), err.str())
        elif err.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
            failed_at = m.offset()
            if (any(g.offset() >= rng.end for g in good)
                    or (failed_at is not None and failed_at >= rng.end)):
                return good, position, True, None  # the range was read to its end first
            return _confluent_out_of_range(consumer, rng, good, position, err.str(), timeout_s)
        else:
            raise ZkConsumerError(f"zkconsumer source: reading {rng.topic}:{rng.partition}: "
                                  f"{err}")
    return good, position, False, None


def _confluent_out_of_range(
    consumer: Any, rng: OffsetRange, good: list[Any], position: int, error_text: str,
    timeout_s: float,
) -> tuple[list[Any], int, bool, int | None]:
    """The broker answered the offset after ``good`` out of range: beyond the log end (the
    range ends after them) or below the log start (lost data: an error, or reading goes on
    at the log start). What :func:`_confluent_errors` returns."""
    from confluent_kafka import TopicPartition as CTP

    found = consumer.get_watermark_offsets(CTP(rng.topic, rng.partition), timeout=timeout_s)
    if found is None:  # no answer within the timeout (the default waits for ever)
        raise ZkConsumerError(
            f"zkconsumer source: reading {rng.topic}:{rng.partition}: the broker "
            f"answered out of range ({error_text}), then gave no watermarks within "
            f"{timeout_s:g} s")
    low, high = found
    # What failed comes after this answer's messages of the range: they are read.
    at = position
    for g in good:
        if at <= g.offset() < rng.end:
            at = g.offset() + 1
    if low <= at:
        # Out of range, not below the log start: beyond the log end. The range
        # ends after this answer's messages.
        error = _past_log_end(rng, at, int(high), out_of_range=True)
        if error is not None:
            raise error
        return good, position, True, None
    if rng.fail_on_data_loss:
        raise _data_loss(rng, at, int(low))
    log.warning("%s:%s: offsets [%d, %d) were lost; going on from %d",
                rng.topic, rng.partition, at, low, low)
    consumer.assign([CTP(rng.topic, rng.partition, int(low))])
    return good, position, False, int(low)
