"""Spark's side: the stream reader (planning batches as a member of the group), the batch
reader, and :class:`ZkConsumerDataSource` (``format("zkconsumer")``)."""

from __future__ import annotations

import atexit
import logging
import os
import signal
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from types import FrameType
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from zkconsumer._errors import ZkConsumerError
from zkconsumer._types import TopicPartition
from zkconsumer.consumer.offsets import ZkOffsetStore
from zkconsumer.spark.cluster import (
    _bootstrap,
    _close_zk,
    _subscribed_partitions,
    _zk_client,
    validate_against_zookeeper,
)
from zkconsumer.spark.membership import _GroupMember, _NoBatch
from zkconsumer.spark.offsets import (
    INITIAL_OFFSET,
    Positions,
    _OffsetLookup,
    _resolve_spec,
    decode_offsets,
    encode_offsets,
    rate_limit,
)
from zkconsumer.spark.options import (
    SCHEMA,
    OffsetSpec,
    SourceOptions,
    _check_batch_options,
    _check_schema,
    _check_stream_options,
    _fail,
    parse_options,
)
from zkconsumer.spark.read import (
    LOG_END_RETRIES,
    LOG_END_RETRY_S,
    OffsetRange,
    read_range,
    split_ranges,
)

if TYPE_CHECKING:
    import pyarrow as pa


__all__ = [
    "AVAILABLE_NOW_WAITS",
    "ZkConsumerBatchReader",
    "ZkConsumerDataSource",
    "ZkConsumerStreamReader",
]

log = logging.getLogger("zkconsumer.spark")

#: A Trigger.AvailableNow run waits this many planning waits for a rebalance (or a ZooKeeper
#: outage) to end before it fails: an empty batch would end it as if it had read everything.
AVAILABLE_NOW_WAITS = 3
# -- readers -----------------------------------------------------------------------------------


def _check_group_offsets(
    lookup: _OffsetLookup, begin: Positions, unsure: list[TopicPartition],
    committed: Mapping[TopicPartition, int | None],
) -> tuple[set[TopicPartition], list[TopicPartition]]:
    """(partitions to reseat at the group's offset, partitions whose position is confirmed
    ours) of the ``unsure`` ones: another member committed beyond our position meanwhile, or
    not."""
    ahead = {tp: z for tp in unsure
             if (z := committed.get(tp)) is not None and z > begin[tp]}
    # Not an offset beyond the log end, which no member consumed up to: one committed
    # before the log was truncated. Taking it would skip what was written since.
    ends = lookup.latest(list(ahead)) if ahead else {}
    reseat = set()
    confirmed: list[TopicPartition] = []
    for tp in unsure:
        z = ahead.get(tp)
        if z is not None and z <= ends[tp]:
            log.info("%s:%d: the group committed %d beyond our position %d; taking the "
                     "group's offset", tp.topic, tp.partition, z, begin[tp])
            reseat.add(tp)
        else:
            if z is not None:
                log.warning("%s:%d: the group's offset %d is beyond the log end %d (the "
                            "log was truncated, or the topic recreated): keeping our "
                            "position %d", tp.topic, tp.partition, z, ends[tp], begin[tp])
            confirmed.append(tp)
    return reseat, confirmed


class ZkConsumerStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The streaming side; see the module docstring for the offsets and ownership rules.

    Spark calls the driver methods (``initialOffset``, ``latestOffset``, ``partitions``,
    ``commit``, ``stop``) one at a time from one thread of one long-lived process; ``read``
    runs on executors on an unpickled copy that never joined the group. Shared state with the
    connector's threads lives in :class:`_Membership` (under its condition); the rest is
    Spark's thread's alone.
    """

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._member: _GroupMember | None = None
        #: Trigger.AvailableNow: the log ends when the run began.
        self._target: Positions | None = None
        self._closed = False

    def __getstate__(self) -> dict[str, Any]:
        # Executors get the options only; the group member stays in the driver.
        return {"opts": self.opts}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["opts"])  # type: ignore[misc]

    # -- membership ----------------------------------------------------------------------------
    def _join(self) -> _GroupMember:
        if self._closed:
            raise ZkConsumerError("zkconsumer source: the stream reader is stopped")
        if self._member is None:
            self._member = _GroupMember(self.opts)
            self._install_exit_hooks()
        return self._member

    def _install_exit_hooks(self) -> None:
        # Spark ends this process with SIGTERM when the query stops, without calling stop():
        # leave the group at once (closing the ZooKeeper session deletes our ephemeral
        # znodes), rather than leaving a dead member until its session times out.
        atexit.register(self.stop)
        if threading.current_thread() is not threading.main_thread():
            return
        previous = signal.getsignal(signal.SIGTERM)

        def on_sigterm(signum: int, frame: FrameType | None) -> None:
            try:
                self.stop()
            finally:
                if callable(previous):
                    previous(signum, frame)
                else:
                    signal.signal(signal.SIGTERM, previous or signal.SIG_DFL)
                    os.kill(os.getpid(), signal.SIGTERM)

        signal.signal(signal.SIGTERM, on_sigterm)

    def _wait_s(self, member: _GroupMember) -> float:
        # How long planning waits for a running rebalance: a claim waits about this long.
        c = member.config
        return (c.zookeeper_session_timeout_ms + c.rebalance_backoff_ms) / 1000.0

    # -- Spark's API ---------------------------------------------------------------------------
    def initialOffset(self) -> dict[str, dict[str, int]]:
        # Constant (see the module docstring): Spark asks again when it replays the first
        # batch after a restart. Joining now reports a bad group or ZooKeeper at start.
        self._join()
        return INITIAL_OFFSET

    def prepareForTriggerAvailableNow(self) -> None:
        member = self._join()
        deadline = time.monotonic() + AVAILABLE_NOW_WAITS * self._wait_s(member)
        while not member.zk_connected():  # reading the subscription would wait for ever
            if time.monotonic() > deadline:
                raise ZkConsumerError(
                    f"zkconsumer source: ZooKeeper is unreachable after "
                    f"{AVAILABLE_NOW_WAITS * self._wait_s(member):.0f} s; the "
                    "Trigger.AvailableNow run cannot read the subscribed partitions")
            time.sleep(0.5)
        subscribed = member.subscribed_partitions()
        self._target = member.offsets().latest(
            TopicPartition(t, p) for t, parts in subscribed.items() for p in parts)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, dict[str, int]]:
        member = self._join()
        m = member.membership
        first = start == INITIAL_OFFSET
        begin = decode_offsets(start)
        # Spark plans the next batch only once the one that ended at `start` is complete in
        # the sink: a rebalance waiting to release partitions may go on now.
        m.batch_done(begin)
        wait_s = self._wait_s(member)
        deadline = time.monotonic() + AVAILABLE_NOW_WAITS * wait_s
        while True:
            generation, owned, settled = m.begin_planning(wait_s)
            rebalancing = not settled  # begin_planning waited for it already
            end: Positions | None = None
            why = "a rebalance is still under way"
            try:
                if settled and not member.zk_connected():
                    settled, why = False, "ZooKeeper is unreachable"
                if settled:
                    try:
                        end = self._plan(member, begin, generation, owned, limit, first)
                    except _NoBatch as e:
                        why = str(e)
            finally:
                # A batch without rows (positions only) is not waited for by a rebalance.
                rows = end is not None and any(off > begin.get(tp, off)
                                               for tp, off in end.items())
                m.end_planning(end if rows else None)
            if end is not None:
                return encode_offsets(end)
            # Ownership is unknown: no batch this time rather than one that drops every
            # partition from the offsets (they would come back at the group's offsets, which
            # may be a batch behind). But an empty batch ends a Trigger.AvailableNow run as if
            # it had read everything: that one waits, and then fails.
            if self._target is None:
                log.info("%s: %s; no new batch this trigger", member.consumer_id, why)
                return start
            if time.monotonic() > deadline:
                raise ZkConsumerError(
                    f"zkconsumer source: {member.consumer_id}: {why} after "
                    f"{AVAILABLE_NOW_WAITS * wait_s:.0f} s; the Trigger.AvailableNow run "
                    "cannot know which partitions to read")
            if not rebalancing:
                time.sleep(min(1.0, wait_s))

    def _plan(self, member: _GroupMember, begin: Positions, generation: int,
              owned: frozenset[TopicPartition], limit: ReadLimit, first: bool) -> Positions:
        # While planning, no rebalance releases our partitions (see _Membership), but one
        # after a session loss owns nothing to release and does not wait: what this plan
        # confirms goes to `verified` at the end, under the lock, and only if no rebalance
        # completed meanwhile.
        m = member.membership
        lookup = member.offsets()
        # Partitions owned since an earlier rebalance or before a restart: is our position
        # still the group's? Another member may have consumed and committed beyond it.
        unsure = [tp for tp in begin if tp in owned and m.verified.get(tp) != generation]
        newcomers = sorted(tp for tp in owned if tp not in begin)
        committed = member.committed(unsure + newcomers) if unsure or newcomers else {}
        reseat, confirmed = _check_group_offsets(lookup, begin, unsure, committed)
        end = self._position_newcomers(member, newcomers, committed, first)
        confirmed += newcomers
        # Positions to record in the group where they differ from its offsets (startingOffsets,
        # or auto.offset.reset), so that the next owner starts there too.
        placed = {tp: off for tp, off in end.items() if committed.get(tp) != off}

        reading = sorted(tp for tp in begin if tp in owned and tp not in reseat)
        available, behind = self._log_ends(lookup, begin, reading, placed, end)
        # Written to the group before the batch, as new positions are: else a rebalance or
        # a restart would take the group's offset (beyond the log end) again.
        moved = {tp: available[tp] for tp in behind if tp not in placed}

        # The batch that ended at `start` is complete: record it in the group, for the
        # partitions that are still ours, with the new positions. After the checks above: a
        # position beyond the log end (a mistyped startingOffsets, say) is never written to
        # the group.
        # The new positions must be written (else a rebalance or a restart takes the group's
        # offsets instead, undoing a rewind): no batch when they cannot be. The rest can
        # wait for the next batch.
        with m.cond:
            if m.generation != generation:
                raise _NoBatch("a rebalance completed while the batch was planned")
            m.verified.update(dict.fromkeys(confirmed, generation))
            done = {tp: off for tp, off in begin.items()
                    if tp in owned and m.verified.get(tp) == generation and tp not in behind}
            # Spark commits the batch before (ending at `begin`) after this plan: not these.
            m.moved_back.update(moved)
        member.commit({**done, **placed, **moved}, best_effort=not (placed or moved))
        end.update(self._batch_ends(begin, reading, behind, available, limit))
        return end

    def _position_newcomers(self, member: _GroupMember, newcomers: list[TopicPartition],
                            committed: Mapping[TopicPartition, int | None],
                            first: bool) -> Positions:
        """The positions of the newly owned partitions (no rows for them in this batch)."""
        # In the query's first batch, per startingOffsets. After it, one without a committed
        # offset is read from its start, as Spark's Kafka source reads partitions found after
        # the start: it is a partition added since (every one this query placed was written
        # to the group), and auto.offset.reset=largest would skip what was written to it.
        spec: OffsetSpec = (self.opts.starting or "committed") if first else "committed"
        reset = member.config.auto_offset_reset if first else "smallest"
        end: Positions = _resolve_spec(spec, newcomers, "committed", committed,
                                       member.offsets(), reset)
        if not first:
            for tp in newcomers:
                if committed.get(tp) is None:
                    log.info("%s:%d has no committed offset: read from its earliest offset "
                             "(a partition added after the query started)", tp.topic,
                             tp.partition)
        if first:
            log.info("%s starts at %s", member.consumer_id, encode_offsets(end))
        return end

    def _log_ends(self, lookup: _OffsetLookup, begin: Positions, reading: list[TopicPartition],
                  placed: Positions, end: Positions) -> tuple[Positions, list[TopicPartition]]:
        """(log ends, partitions whose position is beyond theirs) of the partitions read and
        placed. One beyond is lost data: an error (failOnDataLoss), or a warning and a new
        position placed at the log end (in ``placed`` and ``end``)."""
        positions = {**{tp: begin[tp] for tp in reading}, **placed}
        available = lookup.latest(positions)
        behind = [tp for tp in positions if available[tp] < positions[tp]]
        for _ in range(LOG_END_RETRIES):
            if not behind:
                break
            time.sleep(LOG_END_RETRY_S)  # a new leader's high watermark may lag a moment
            available.update(lookup.latest(behind))
            behind = [tp for tp in behind if available[tp] < positions[tp]]
        for tp in behind:
            if tp in placed:
                message = (f"{tp.topic}:{tp.partition}: the starting offset {placed[tp]} is "
                           f"beyond the log end {available[tp]}")
            else:
                # The log was truncated (an unclean leader election) or the topic recreated:
                # what is written from its end on would be skipped up to our position.
                message = (f"{tp.topic}:{tp.partition}: our position {begin[tp]} is beyond the "
                           f"log end {available[tp]} (the log was truncated or the topic "
                           "recreated)")
            if self.opts.fail_on_data_loss:
                raise ZkConsumerError(f"zkconsumer source: {message}; set failOnDataLoss=false "
                                      "to go on from the log end")
            log.warning("%s; going on from the log end", message)
            if tp in placed:
                end[tp] = placed[tp] = available[tp]
        return available, behind

    def _batch_ends(self, begin: Positions, reading: list[TopicPartition],
                    behind: list[TopicPartition], available: Positions,
                    limit: ReadLimit) -> Positions:
        """Where the batch ends in the partitions read: their log ends (Trigger.AvailableNow:
        no further than when the run began), or less per ``limit``."""
        for tp in reading:
            if tp in behind:
                continue
            if self._target is not None:
                # Trigger.AvailableNow: nothing newer than when the run began.
                available[tp] = min(available[tp], self._target.get(tp, begin[tp]))
            available[tp] = max(available[tp], begin[tp])
        base = {tp: min(begin[tp], available[tp]) for tp in reading}
        if isinstance(limit, ReadMaxRows):
            return rate_limit(base, available, limit.max_rows)
        return {tp: available[tp] for tp in reading}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin, finish = decode_offsets(start), decode_offsets(end)
        # A partition's end below its start was moved back to its log end (failOnDataLoss
        # false): nothing to read. The first batch (start: INITIAL_OFFSET) only positions.
        ranges = [(tp, begin[tp], off) for tp, off in sorted(finish.items())
                  if tp in begin and off > begin[tp]]
        if not ranges:
            return []
        member = self._join()
        member.membership.running(finish)
        return split_ranges([
            OffsetRange(tp.topic, tp.partition, lo, hi, member.bootstrap, self.opts.props,
                        self.opts.fail_on_data_loss)
            for tp, lo, hi in ranges
        ], self.opts.min_partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, OffsetRange), partition
        return read_range(partition)

    def commit(self, end: dict[str, Any]) -> None:
        # Never waits for a rebalance: one may be waiting for the batch Spark runs next.
        member = self._join()
        member.commit(member.membership.committable(decode_offsets(end)), best_effort=True)

    def stop(self) -> None:
        if self._closed:
            return
        self._closed = True
        member, self._member = self._member, None
        if member is not None:
            log.info("%s leaves group %s", member.consumer_id, member.config.group_id)
            member.close()


class ZkConsumerBatchReader(DataSourceReader):
    """``spark.read``: the offsets are resolved when Spark plans the read."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        opts = self.opts
        config = opts.config()
        zk = _zk_client(config)
        lookup: _OffsetLookup | None = None
        try:
            subscribed = _subscribed_partitions(zk, opts)
            tps = [TopicPartition(t, p) for t, parts in sorted(subscribed.items()) for p in parts]
            bootstrap = _bootstrap(zk, opts, config)
            lookup = _OffsetLookup(config, bootstrap)
            starting = opts.starting or "earliest"
            ending = opts.ending or "latest"
            committed: dict[TopicPartition, int | None] | None = None
            if "committed" in (starting, ending):

                committed = ZkOffsetStore(zk, config.group_id).read(tps)
            reset = config.auto_offset_reset
            begin = _resolve_spec(starting, tps, "earliest", committed, lookup, reset)
            finish = _resolve_spec(ending, tps, "latest", committed, lookup, reset)
            backwards = [tp for tp in tps if finish[tp] < begin[tp]]
            if backwards:
                tp = backwards[0]
                raise _fail(f"{tp.topic}:{tp.partition}: the ending offset {finish[tp]} is "
                            f"before the starting offset {begin[tp]}")
            if ending != "latest":
                # A given (or committed) end beyond the log end: the executor would wait for
                # offsets that do not exist.
                self._check_log_ends(lookup, begin, finish)
        finally:
            if lookup is not None:
                lookup.close()
            _close_zk(zk)
        return split_ranges([
            OffsetRange(tp.topic, tp.partition, begin[tp], finish[tp], bootstrap, opts.props,
                        opts.fail_on_data_loss)
            for tp in tps if finish[tp] > begin[tp]
        ], opts.min_partitions)

    def _check_log_ends(self, lookup: _OffsetLookup, begin: Positions,
                        finish: Positions) -> None:
        """An ending offset beyond the log end fails the read (failOnDataLoss), or is moved
        back to it with a warning (to the starting offset, when that is beyond it too)."""
        wanted = [tp for tp in finish if finish[tp] > begin[tp]]
        log_ends = lookup.latest(wanted)
        beyond = [tp for tp in wanted if finish[tp] > log_ends[tp]]
        for _ in range(LOG_END_RETRIES):
            if not beyond:
                break
            time.sleep(LOG_END_RETRY_S)  # a new leader's high watermark may lag a moment
            log_ends.update(lookup.latest(beyond))
            beyond = [tp for tp in beyond if finish[tp] > log_ends[tp]]
        for tp in beyond:
            message = (f"endingOffsets: {tp.topic}:{tp.partition} ends at {finish[tp]}, beyond "
                       f"its log end {log_ends[tp]}")
            if self.opts.fail_on_data_loss:
                raise _fail(f"{message}; give an offset up to the log end, or latest (with "
                            "failOnDataLoss=false the read ends at the log end)")
            log.warning("zkconsumer source: %s; reading up to the log end", message)
            finish[tp] = max(begin[tp], log_ends[tp])

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, OffsetRange):
            return iter(())  # Spark's placeholder partition when there is nothing to read
        return read_range(partition)


class ZkConsumerDataSource(DataSource):
    """``format("zkconsumer")``: Kafka topics as a member of a legacy ZooKeeper group.

    Options are checked when the DataFrame is defined (``load()``): syntax, legacy keys, and
    that the topics exist in ZooKeeper.
    """

    #: The parsed options, set by the first schema()/reader()/streamReader() call; it travels
    #: with the pickled data source, so the topics are checked in ZooKeeper once.
    _parsed: SourceOptions | None = None

    @classmethod
    def name(cls) -> str:
        return "zkconsumer"

    def _options(self) -> SourceOptions:
        parsed = self._parsed
        if parsed is None:
            parsed = parse_options(self.options)
            validate_against_zookeeper(parsed)
            self._parsed = parsed
        return parsed

    def schema(self) -> StructType:
        self._options()
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        _check_schema(schema)
        opts = self._options()
        _check_batch_options(opts)
        return ZkConsumerBatchReader(opts)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        _check_schema(schema)
        opts = self._options()
        _check_stream_options(opts)
        return ZkConsumerStreamReader(opts)
