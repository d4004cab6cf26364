"""The fetch backends: kafka-python's and confluent-kafka's consumers behind one protocol.

A backend is assigned partitions at offsets and polled; it hands back columns of plain
values per partition (the stream iterator makes the messages). The fetcher threads of
:mod:`zkconsumer.consumer.fetcher` own them.
"""

from __future__ import annotations

import gc
import logging
import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress, islice, repeat
from operator import itemgetter, ne
from typing import Any, Protocol, overload

from zkconsumer._config import ConsumerConfig
from zkconsumer._message import MessageAndMetadata, make_messages
from zkconsumer._types import TopicPartition
from zkconsumer.broker.clients import (
    MAX_POLL_RECORDS,
    confluent_consumer,
    kafka_consumer,
    kafka_python_kwargs,
)

try:
    # With this module, not at the first fetcher's start: the import (asyncio with it) costs
    # 25 to 80 ms of CPU, which a member's first rebalance paid, while its whole group did.
    import confluent_kafka  # noqa: F401
except ImportError:  # fetching falls back to kafka-python (broker.clients.fetch_library)
    pass

try:
    from zkconsumer._speedups import split_messages
except ImportError:  # built without a C compiler (see setup.py): _group_py does the same
    split_messages = None  # type: ignore[assignment]

log = logging.getLogger("zkconsumer.fetcher")

#: tuple.__new__, called directly: a NamedTuple's own __new__ costs an argument parse.
_tuple_new = tuple.__new__

#: Messages taken from librdkafka's queue per confluent poll. Small enough that a poll's
#: columns (about 1 MB of 100-byte messages) are still in the CPU's cache when the streams
#: hand them out: over 1,000,000 messages the 4-stream benchmark ran at 0.75 to 0.79 of the
#: raw client's rate with 4,000, at 0.68 with 10,000.
CONFLUENT_BATCH = 4_000


@dataclass
class PollResult:
    """What one poll of a backend produced.

    ``batches``: (partition, records in offset order) pairs, one per partition with data;
    ``out_of_range``: partition -> offset the broker called out of range;
    ``partition_errors``: partition -> error (the partition goes back to the leader finder);
    ``corrupt``: partition -> (offset, next offset, error): corrupt data at ``offset`` that the
    backend skipped (it fetches from ``next offset`` on);
    ``error``: the fetch failed as a whole (every partition goes back to the leader finder).
    """

    batches: list[tuple[TopicPartition, Sequence[Any]]] = field(default_factory=list)
    out_of_range: dict[TopicPartition, int] = field(default_factory=dict)
    partition_errors: dict[TopicPartition, BaseException] = field(default_factory=dict)
    corrupt: dict[TopicPartition, tuple[int, int, BaseException]] = field(default_factory=dict)
    error: BaseException | None = None


class FetchBackend(Protocol):
    """One fetching client, used by one fetcher thread only.

    Records expose ``topic, partition, offset, key, value, timestamp, timestamp_type``.
    """

    def add(self, positions: Mapping[TopicPartition, int]) -> None:
        """Fetch these partitions (too) from these offsets; re-seeks (and resumes) ones
        already fetched."""
        ...

    def remove(self, tps: Collection[TopicPartition]) -> None:
        """Stop fetching these partitions."""
        ...

    def pause(self, tps: Collection[TopicPartition]) -> None:
        """Fetch nothing more of these (assigned) partitions until :meth:`resume`; the next
        polls return none of their data. :meth:`add` ends a pause, so does :meth:`remove`
        (a partition added later is fetched)."""
        ...

    def resume(self, tps: Collection[TopicPartition]) -> None:
        """Fetch these paused partitions again, from after the last data returned."""
        ...

    def poll(self, timeout_ms: int) -> PollResult:
        """Wait up to ``timeout_ms`` for fetched data."""
        ...

    def highwater(self, tp: TopicPartition) -> int | None:
        """The high watermark in the last fetch response for ``tp``, if any."""
        ...

    def reset(self) -> None:
        """Stop fetching every partition (the client is kept for another fetcher)."""
        ...

    def close(self) -> None: ...


class KafkaPythonBackend:
    """kafka-python ``KafkaConsumer`` in assign mode. Records are kafka-python's
    ``ConsumerRecord`` objects. Not thread-safe: one fetcher thread owns it."""

    def __init__(self, config: ConsumerConfig, bootstrap: Sequence[str]) -> None:
        self._consumer = kafka_consumer(**kafka_python_kwargs(config, bootstrap))
        self._assigned: set[TopicPartition] = set()

    def add(self, positions: Mapping[TopicPartition, int]) -> None:
        from kafka import TopicPartition as KTP

        if not positions:
            return
        again = [KTP(t, p) for t, p in positions if (t, p) in self._assigned]
        if not set(positions) <= self._assigned:
            self._assigned.update(positions)
            self._consumer.assign([KTP(t, p) for t, p in sorted(self._assigned)])
        for (t, p), offset in positions.items():
            self._consumer.seek(KTP(t, p), offset)
        if again:
            self._consumer.resume(*again)  # a seek keeps a pause; a new assignment has none

    def reset(self) -> None:
        self.remove(set(self._assigned))

    def remove(self, tps: Collection[TopicPartition]) -> None:
        from kafka import TopicPartition as KTP

        gone = self._assigned.intersection(tps)
        if not gone:
            return
        self._assigned -= gone
        if self._assigned:
            self._consumer.assign([KTP(t, p) for t, p in sorted(self._assigned)])
        else:
            self._consumer.unsubscribe()

    def pause(self, tps: Collection[TopicPartition]) -> None:
        from kafka import TopicPartition as KTP

        # Buffered data of a paused partition stays parked in kafka-python (one fetch
        # response at most) and is returned after resume, in order.
        self._consumer.pause(*[KTP(t, p) for t, p in tps if (t, p) in self._assigned])

    def resume(self, tps: Collection[TopicPartition]) -> None:
        from kafka import TopicPartition as KTP

        self._consumer.resume(*[KTP(t, p) for t, p in tps if (t, p) in self._assigned])

    def poll(self, timeout_ms: int) -> PollResult:
        from kafka.errors import CorruptRecordError, KafkaError, OffsetOutOfRangeError

        try:
            fetched = self._consumer.poll(timeout_ms=timeout_ms, max_records=MAX_POLL_RECORDS)
        except OffsetOutOfRangeError as e:
            detail = e.args[0] if e.args and isinstance(e.args[0], dict) else {}
            return PollResult(
                out_of_range={TopicPartition(k.topic, k.partition): v for k, v in detail.items()}
            )
        except CorruptRecordError as e:
            return self._skip_corrupt(e)
        except KafkaError as e:
            return PollResult(error=e)
        result = PollResult(
            batches=[(TopicPartition(k.topic, k.partition), recs) for k, recs in fetched.items()]
        )
        # Good records followed by a corrupt batch: kafka-python returned the records and
        # keeps the error for the next poll, which raises it only if the partition is still
        # fetchable. Paused meanwhile (its queue full), the error was dropped, and once
        # resumed every poll looped for ever over the partition's exhausted records. So it
        # is taken now, and skipped as if raised.
        fetcher: Any = getattr(self._consumer, "_fetcher", None)
        deferred = getattr(fetcher, "_next_in_line_exception_metadata", None)
        if deferred is not None and isinstance(deferred.exception, CorruptRecordError):
            fetcher._next_in_line_exception_metadata = None
            skipped = self._skip_corrupt(deferred.exception, deferred.partition)
            result.corrupt.update(skipped.corrupt)
            result.error = skipped.error
        return result

    def _skip_corrupt(self, error: BaseException, ktp: Any = None) -> PollResult:
        """Seek past the corrupt data ``poll`` raised ``error`` about.

        kafka-python (3.0.x) raises CorruptRecordError while parsing a partition's records and
        keeps that partition's half-read records as the next ones to hand out; every later
        poll then loops over them without end. Seeking makes it drop them (their offset no
        longer matches the position). The partition is the one whose records were being
        parsed (or, failing that, the one the message names); the offset is the one the
        message names ("... at offset N ..."), or the position if that is further on (a
        corrupt batch fetched again from inside it). A corrupt batch's last offset is not to
        be trusted, so the seek goes one offset further and the broker answers from there:
        a corrupt batch of several records takes one round per record, each logged.
        """
        from kafka import TopicPartition as KTP

        text = str(error)
        if ktp is None:
            part = getattr(getattr(self._consumer, "_fetcher", None), "_next_partition_records",
                           None)
            ktp = getattr(part, "topic_partition", None) if part else None
        if ktp is None:
            named = re.search(r"topic='([^']*)', partition=(\d+)", text)
            if named is not None:
                ktp = KTP(named.group(1), int(named.group(2)))
        if ktp is None or TopicPartition(ktp.topic, ktp.partition) not in self._assigned:
            return PollResult(error=error)  # which partition is unknown: all start over
        at = re.search(r"at offset (\d+)", text)
        position = self._consumer.position(ktp, timeout_ms=0)
        offset = max(int(at.group(1)) if at else -1, -1 if position is None else int(position))
        if offset < 0:
            return PollResult(error=error)
        self._consumer.seek(ktp, offset + 1)
        return PollResult(
            corrupt={TopicPartition(ktp.topic, ktp.partition): (offset, offset + 1, error)}
        )

    def highwater(self, tp: TopicPartition) -> int | None:
        from kafka import TopicPartition as KTP

        hw = self._consumer.highwater(KTP(tp.topic, tp.partition))
        return None if hw is None else int(hw)

    def close(self) -> None:
        self._consumer.close(autocommit=False)


# librdkafka timestamp types (NOT_AVAILABLE, CREATE_TIME, LOG_APPEND_TIME) -> Kafka's.
_CONFLUENT_TS_TYPE = (-1, 0, 1)
# librdkafka's RD_KAFKA_TIMESTAMP_NOT_AVAILABLE: also the type of every errored message
# (rd_kafka_message_timestamp answers it when the message has an error).
_RD_TS_NOT_AVAILABLE = 0
_first = itemgetter(0)
_second = itemgetter(1)


class ConfluentRecords(Sequence[MessageAndMetadata[bytes | None, bytes | None]]):
    """The messages of one partition from one poll of the confluent backend, in offset order.

    A sequence of :class:`~zkconsumer.MessageAndMetadata` (indexing and iterating make
    them), stored as columns: one list per field, filled in the fetcher thread from
    librdkafka's messages, which then go at once. The stream iterator zips the columns
    (:meth:`columns`) and makes each ``MessageAndMetadata`` as it hands it out, in C (see
    :mod:`zkconsumer.consumer.stream`). Why columns: a chunk then holds no per-message object the
    garbage collector tracks (a ``Message`` or a ``MessageAndMetadata`` is tracked, and the
    collector never untracks a tuple subclass; ints and bytes are not tracked). Thousands of
    tracked objects waiting in the chunk queues made garbage collection the largest cost per
    message.
    """

    __slots__ = ("keys", "offsets", "partition", "timestamp_types", "timestamps", "topic",
                 "values")

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.offsets: list[int] = []
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.timestamps: list[int] = []
        self.timestamp_types: list[int] = []

    def add(
        self, messages: list[Any], stamps: list[tuple[int, int]] | None = None,
        types: list[int] | int | None = None,
    ) -> None:
        """Append these ``confluent_kafka.Message`` objects (of this partition, in offset
        order, without errors). Each column is filled by one ``map`` (C).

        ``stamps`` are their ``timestamp()`` pairs and ``types`` the librdkafka timestamp
        type of each, or the one type of them all, when the caller has them already.
        """
        message = type(messages[0])
        self.offsets += map(message.offset, messages)
        self.keys += map(message.key, messages)
        self.values += map(message.value, messages)
        if stamps is None:
            stamps = list(map(message.timestamp, messages))  # (librdkafka type, timestamp)
        self.timestamps += map(_second, stamps)
        if types is None:
            types = list(map(_first, stamps))
            if types.count(types[0]) == len(types):  # the usual case: one type per topic
                types = types[0]
        if isinstance(types, int):
            self.timestamp_types += repeat(_CONFLUENT_TS_TYPE[types], len(messages))
        else:
            self.timestamp_types += map(_CONFLUENT_TS_TYPE.__getitem__, types)

    def extend(
        self, offsets: list[int], keys: list[Any], values: list[Any], timestamps: list[int],
        timestamp_types: list[int],
    ) -> None:
        """Append these columns (one item per message; as :func:`split_messages` makes
        them). A first run is taken as it is, not copied: the lists are new and nobody
        else's."""
        if not self.offsets:
            self.offsets, self.keys, self.values = offsets, keys, values
            self.timestamps, self.timestamp_types = timestamps, timestamp_types
            return
        self.offsets += offsets
        self.keys += keys
        self.values += values
        self.timestamps += timestamps
        self.timestamp_types += timestamp_types

    @classmethod
    def collect(
        cls, into: dict[tuple[str, int], ConfluentRecords], key: tuple[str, int],
        messages: list[Any], stamps: list[tuple[int, int]], types: list[int] | int,
    ) -> None:
        """Add ``messages`` (of partition ``key``) to ``into[key]``, made when missing."""
        records = into.get(key)
        if records is None:
            records = into[key] = cls(*key)
        records.add(messages, stamps, types)

    def columns(self) -> tuple[str, int, list[int], list[Any], list[Any], list[int], list[int]]:
        """``topic, partition, offsets, keys, values, timestamps, timestamp_types`` (the
        ``MessageAndMetadata`` fields; the lists have one item per message)."""
        return (self.topic, self.partition, self.offsets, self.keys, self.values,
                self.timestamps, self.timestamp_types)

    def __len__(self) -> int:
        return len(self.offsets)

    @overload
    def __getitem__(self, i: int) -> MessageAndMetadata[bytes | None, bytes | None]: ...

    @overload
    def __getitem__(self, i: slice) -> ConfluentRecords: ...

    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            part = ConfluentRecords(self.topic, self.partition)
            part.offsets = self.offsets[i]
            part.keys = self.keys[i]
            part.values = self.values[i]
            part.timestamps = self.timestamps[i]
            part.timestamp_types = self.timestamp_types[i]
            return part
        return _tuple_new(
            MessageAndMetadata,
            (self.topic, self.partition, self.offsets[i], self.keys[i], self.values[i],
             self.timestamps[i], self.timestamp_types[i]),
        )

    def __iter__(self) -> Iterator[MessageAndMetadata[bytes | None, bytes | None]]:
        return make_messages(
            repeat(self.topic), repeat(self.partition), self.offsets, self.keys, self.values,
            self.timestamps, self.timestamp_types,
        )


class ConfluentBackend:
    """confluent-kafka ``Consumer`` in assign mode. Batches are :class:`ConfluentRecords`
    (columns of plain values; the stream iterator zips them into ``MessageAndMetadata``).
    Not thread-safe: one fetcher thread owns it."""

    def __init__(self, config: ConsumerConfig, bootstrap: Sequence[str], consumer_id: str) -> None:
        self._consumer = confluent_consumer(config, bootstrap, consumer_id)
        self._consumer_id = consumer_id
        self._assigned: set[TopicPartition] = set()
        # Partition -> the offset this backend last moved it to past corrupt data.
        self._skipped: dict[TopicPartition, int] = {}

    def add(self, positions: Mapping[TopicPartition, int]) -> None:
        from confluent_kafka import TopicPartition as CTP

        if not positions:
            return
        for tp in positions:
            self._skipped.pop(tp, None)
        again = [CTP(t, p) for t, p in positions if (t, p) in self._assigned]
        if again:
            # A re-seek: unassigning drops what librdkafka prefetched from the old position.
            self._consumer.incremental_unassign(again)
        self._consumer.incremental_assign([CTP(t, p, off) for (t, p), off in positions.items()])
        self._assigned.update(positions)
        # librdkafka keeps a partition's pause across unassign and assign (a re-seek, a
        # partition removed while paused, a client reused after reset()): end it.
        self._consumer.resume([CTP(t, p) for t, p in positions])

    def reset(self) -> None:
        self.remove(set(self._assigned))

    def remove(self, tps: Collection[TopicPartition]) -> None:
        from confluent_kafka import TopicPartition as CTP

        gone = self._assigned.intersection(tps)
        if not gone:
            return
        self._consumer.incremental_unassign([CTP(t, p) for t, p in sorted(gone)])
        self._assigned -= gone
        for tp in gone:
            self._skipped.pop(tp, None)

    def pause(self, tps: Collection[TopicPartition]) -> None:
        from confluent_kafka import TopicPartition as CTP

        # librdkafka drops what it prefetched of a paused partition and, on resume, fetches
        # again from after the last message it returned.
        wanted = [CTP(t, p) for t, p in tps if (t, p) in self._assigned]
        if wanted:
            self._consumer.pause(wanted)

    def resume(self, tps: Collection[TopicPartition]) -> None:
        from confluent_kafka import TopicPartition as CTP

        wanted = [CTP(t, p) for t, p in tps if (t, p) in self._assigned]
        if wanted:
            self._consumer.resume(wanted)

    def poll(self, timeout_ms: int) -> PollResult:
        c = self._consumer
        first = c.poll(timeout_ms / 1000.0)
        if first is None:
            return PollResult()
        result = PollResult()
        batches: dict[tuple[str, int], ConfluentRecords] = {}
        # Up to CONFLUENT_BATCH messages, taken from librdkafka a few hundred at a time (half
        # the garbage collector's first threshold) and stored as columns at once: the Message
        # objects, which the collector tracks, then die before a collection sees them (taken
        # thousands at a time, garbage collection was the largest cost per message).
        threshold = gc.get_threshold()[0]
        step = max(100, threshold // 2) if threshold and gc.isenabled() else CONFLUENT_BATCH
        messages = [first]
        got = 0
        while True:
            taken = len(messages)
            got += taken
            self._group(messages, batches, result)
            # Freed now, not when the next consume's list replaces it: both lists at once
            # would be a whole threshold of young Message objects, and a collection.
            messages = []
            if got >= CONFLUENT_BATCH or (got > 1 and taken < step):
                break  # librdkafka has nothing more right now
            messages = c.consume(min(step, CONFLUENT_BATCH - got), 0)
            if not messages:
                break
        result.batches = [(TopicPartition(t, p), recs) for (t, p), recs in batches.items()]
        if result.corrupt:
            self._skip_corrupt(result)
        return result

    def _skip_corrupt(self, result: PollResult) -> None:
        """Move each partition with corrupt data past it (librdkafka reports the batch failing
        its CRC check, then fetches it again and again). Its base offset is the one reported,
        or, when librdkafka reports the same batch again (fetched from inside it), the offset
        this backend moved to last time: a corrupt batch of several records takes one round
        per record, each logged, as with kafka-python. Not when this poll gave messages of
        the partition after it: librdkafka went on by itself (the loss is still logged)."""
        for tp, (offset, _, error) in list(result.corrupt.items()):
            offset = max(offset, self._skipped.get(tp, -1))
            batch = next((recs for got, recs in result.batches if got == tp), None)
            after = [m.offset for m in batch if m.offset > offset] if batch is not None else []
            if after:
                result.corrupt[tp] = (offset, after[0], error)  # still lost: logged
                continue
            result.corrupt[tp] = (offset, offset + 1, error)
            self.add({tp: offset + 1})
            self._skipped[tp] = offset + 1

    def _group(
        self, messages: list[Any], batches: dict[tuple[str, int], ConfluentRecords],
        result: PollResult,
    ) -> None:
        """Add ``messages`` to ``batches``, one run of a partition's messages at a time; the
        errored ones go to :meth:`_on_error`. With :mod:`zkconsumer._speedups` built, its
        ``split_messages`` does it (in C: see there); otherwise :meth:`_group_py`."""
        if split_messages is None:
            self._group_py(messages, batches, result)
            return
        runs, errors = split_messages(messages, _CONFLUENT_TS_TYPE)
        for m in errors:
            self._on_error(m, result)
        for topic, partition, *columns in runs:
            records = batches.get((topic, partition))
            if records is None:
                records = batches[topic, partition] = ConfluentRecords(topic, partition)
            records.extend(*columns)

    def _group_py(
        self, messages: list[Any], batches: dict[tuple[str, int], ConfluentRecords],
        result: PollResult,
    ) -> None:
        """:meth:`_group` in Python.

        In C as far as possible (one ``map`` per field, the run boundaries by comparing the
        keys shifted by one): a Python loop over the messages cost about 150 ns a message.
        Two shortcuts for the usual case, each checked by counting (C) rather than assumed:
        when every message has the same timestamp type and it is not NOT_AVAILABLE, none has
        an error (librdkafka gives an errored message that type), so errors are not looked
        for; and when every message has the same topic and partition (librdkafka returns a
        partition's messages in runs, usually longer than one ``consume``), they are one run.
        """
        message = type(messages[0])
        stamps = list(map(message.timestamp, messages))  # (librdkafka type, timestamp)
        types = list(map(_first, stamps))
        kind = types[0]
        one_kind: int | None = kind if types.count(kind) == len(types) else None
        if one_kind is None or one_kind == _RD_TS_NOT_AVAILABLE:
            if _RD_TS_NOT_AVAILABLE in types and any(map(message.error, messages)):
                good = []
                for m in messages:
                    if m.error() is None:
                        good.append(m)
                    else:
                        self._on_error(m, result)
                if not good:
                    return
                messages = good
                stamps = list(map(message.timestamp, messages))
                types = list(map(_first, stamps))
        topics = list(map(message.topic, messages))
        parts = list(map(message.partition, messages))
        n = len(messages)
        collect = ConfluentRecords.collect
        if parts.count(parts[0]) == n and topics.count(topics[0]) == n:
            collect(batches, (topics[0], parts[0]), messages, stamps,
                    types if one_kind is None else one_kind)
            return
        keys = list(zip(topics, parts, strict=True))
        # Where the key changes: librdkafka returns each partition's messages in runs.
        cuts = [0, *compress(range(1, n), map(ne, islice(keys, 1, None), keys)), n]
        for start, end in zip(cuts, islice(cuts, 1, None), strict=False):
            collect(batches, keys[start], messages[start:end], stamps[start:end],
                    types[start:end] if one_kind is None else one_kind)

    def _on_error(self, m: Any, result: PollResult) -> None:
        from confluent_kafka import KafkaError, KafkaException

        err = m.error()
        code = err.code()
        if code == KafkaError._PARTITION_EOF:
            return
        topic, part = m.topic(), m.partition()
        tp = TopicPartition(topic, part) if topic and part is not None and part >= 0 else None
        out_of_range = (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE)
        if tp is not None and code in out_of_range:
            result.out_of_range[tp] = m.offset() if m.offset() is not None else -1
        elif (tp is not None and code == KafkaError._BAD_MSG and tp in self._assigned
              and m.offset() is not None and m.offset() >= 0):
            result.corrupt[tp] = (m.offset(), m.offset() + 1, KafkaException(err))
        elif err.fatal():
            raise KafkaException(err)
        elif tp is not None and tp in self._assigned:
            result.partition_errors[tp] = KafkaException(err)
        else:
            # Client-level (transport, all brokers down): librdkafka reconnects by itself.
            log.warning("%s: fetch client error: %s", self._consumer_id, err)

    def highwater(self, tp: TopicPartition) -> int | None:
        from confluent_kafka import KafkaException
        from confluent_kafka import TopicPartition as CTP

        try:
            _, hi = self._consumer.get_watermark_offsets(CTP(tp.topic, tp.partition), cached=True)
        except KafkaException:
            return None
        return int(hi) if hi is not None and hi >= 0 else None

    def close(self) -> None:
        self._consumer.close()
