"""The fetcher threads: each fetches the partitions one broker leads (and of one fetcher
id) with one client, and puts their chunks on the streams' queues; see
:mod:`zkconsumer.consumer.fetcher` for the design. Locks: see :class:`_FetcherThread`;
the statistics (:class:`_Stats`) have their own.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import count
from typing import Any, Protocol

from zkconsumer._config import ConsumerConfig
from zkconsumer._errors import ConsumerShutdownError
from zkconsumer._types import TopicPartition
from zkconsumer.broker.backends import FetchBackend, PollResult
from zkconsumer.consumer.fetch_lookups import _OffsetClient, fmt_tps
from zkconsumer.consumer.partition import INVALID_OFFSET, PartitionTopicInfo

log = logging.getLogger("zkconsumer.fetcher")

#: How long one fetch poll waits for data; also how quickly a fetcher thread notices new
#: partitions or a stop while idle.
POLL_TIMEOUT_MS = 100
#: The poll's wait while some chunk is held back by a full queue: its put is tried again
#: after each poll.
HELD_POLL_TIMEOUT_MS = 10
#: Longest wait of a fetcher thread whose partitions are all held back by full queues (a
#: queue with room wakes it at once); also the unit of ``FetchStats.full_queue_waits``.
FULL_QUEUE_WAIT_S = 0.1
#: A position above the cached high watermark must persist this long before it is checked
#: against a fresh log end (a cached high watermark may predate a seek).
BEYOND_END_CONFIRM_S = 1.0
#: A partition held back by a full queue (paused, so never fetched) this long has its log end
#: looked up again, at most this often per fetcher thread, so ConsumerLag and MaxLag keep
#: growing while the application is stuck.
HELD_LOG_END_REFRESH_S = 5.0
#: Longest such a lookup may take beyond fetch.wait.max.ms (in a helper thread: the fetcher
#: thread never waits for it); a failure is retried at the next refresh.
HELD_LOG_END_TIMEOUT_MS = 2_000

_thread_serial = count(1)  # see _FetcherThread.metrics_key


class FetchMetrics(Protocol):
    """What the fetchers report (``zkconsumer.consumer.metrics.ConsumerMetrics`` has these)."""

    def record_fetch_request(self, fetcher_id: str) -> None: ...

    def remove_fetcher(self, fetcher_id: str) -> None: ...

    def update_lag(
        self, topic: str, partition: int, offset: PartitionTopicInfo,
        log_end_offset: int | None,
    ) -> None: ...

    def lags_missing(self, tps: Iterable[TopicPartition]) -> list[TopicPartition]: ...


# -- statistics ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class FetchStats:
    """Totals over every fetcher thread of a manager since it was made.

    ``full_queue_waits`` counts, for each chunk held back by its stream's full queue, every
    100 ms (:data:`FULL_QUEUE_WAIT_S`) it waited to be put.
    """

    polls: int = 0
    chunks: int = 0
    records: int = 0
    full_queue_waits: int = 0
    offset_resets: int = 0


class _Stats:
    """Mutable counters; ``_lock`` guards all of them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values = dict.fromkeys(
            ("polls", "chunks", "records", "full_queue_waits", "offset_resets"), 0
        )

    def add(self, **counts: int) -> None:
        with self._lock:
            for k, v in counts.items():
                self._values[k] += v

    def snapshot(self) -> FetchStats:
        with self._lock:
            return FetchStats(**self._values)


@dataclass
class _Held:
    """A chunk that found its stream's queue full, held (its partition paused) until it fits."""

    info: PartitionTopicInfo
    records: Sequence[Any]
    next_offset: int
    since: float  # time.monotonic() when first refused
    waits: int = 0  # FULL_QUEUE_WAIT_S periods counted so far


class FetcherHost(Protocol):
    """What a fetcher thread needs of the manager that started it
    (:class:`~zkconsumer.consumer.fetcher.FetcherManager` is one); the thread reaches it
    through nothing else."""

    @property
    def config(self) -> ConsumerConfig: ...

    @property
    def consumer_id(self) -> str: ...

    @property
    def metrics(self) -> FetchMetrics | None: ...

    @property
    def counters(self) -> _Stats:
        """The manager's statistics, added to by every thread."""
        ...

    @property
    def offset_client(self) -> _OffsetClient:
        """Offset lookups: where a partition starts, log ends."""
        ...

    @property
    def held_offset_client(self) -> _OffsetClient:
        """Log ends of held partitions, apart from the threads' own lookups."""
        ...

    def make_backend(self) -> FetchBackend:
        """A client to fetch with (a stopped thread's, or a new one)."""
        ...

    def keep_backend(self, backend: FetchBackend) -> bool:
        """Keep a stopped thread's client for reuse; False: close it."""
        ...

    def start_helper(self, helper: threading.Thread) -> bool:
        """Start ``helper`` among the threads shut down with the manager; False once shut
        down."""
        ...

    def thread_failed(self, thread: threading.Thread, error: BaseException) -> None:
        """An unexpected exception ended ``thread``: kept for the application."""
        ...

    def leader_lost(
        self, thread: _FetcherThread, infos: Mapping[TopicPartition, PartitionTopicInfo]
    ) -> None:
        """These partitions lost their leader: back to the leader finder."""
        ...


# -- threads -------------------------------------------------------------------------------------


class _FetcherThread(threading.Thread):
    """Fetches the partitions led by one broker (and of one fetcher id) with one client.

    A chunk whose stream queue is full is not waited for: it is held (one per partition at
    most, in ``_held``), its partition paused in the client, and the put is tried again each
    round of the loop; once it fits, the partition is resumed. The other partitions are
    fetched meanwhile. When every partition is held, the thread waits on ``_wake``, which a
    queue sets as soon as it has room (:meth:`ChunkQueue.offer`), as do new partitions and
    :meth:`begin_stop`.

    Locks: ``_lock`` (condition ``_cond``) guards ``_partitions`` (partition -> info being
    fetched), ``_pending`` (added by the leader finder, not yet applied), ``_removing``
    (given away by an incremental rebalance, dropped at the next round) and ``_inflight``
    (taken out of either for an offset lookup or on their way back to the leader finder; they
    keep the thread from counting as idle, so the leader finder's sweep never stops it with
    partitions in its hands); it is held only briefly and never during network calls.
    ``_gate`` is held while the thread changes an info's offsets or enqueues a chunk, each time
    after checking ``_stop_event``; :meth:`quiesce` takes it after :meth:`begin_stop`, so once
    it returns the thread changes and enqueues nothing more. The backend client, ``_held``,
    ``_beyond_end``, ``_held_ends``, ``_ends_looked_up`` and ``_ends_lookup`` belong to this
    thread alone (``_found_ends``, the log-end helper's answers, is under ``_lock``);
    ``_stop_event`` and ``_wake`` are Events.
    """

    def __init__(self, manager: FetcherHost, broker_id: int, fid: int) -> None:
        super().__init__(
            name=f"ConsumerFetcherThread-{manager.consumer_id}-{fid}-{broker_id}", daemon=True
        )
        self.manager = manager
        self.broker_id = broker_id
        self.fetcher_id = fid
        # Its MinFetchRate entry's key: the name comes back at the next rebalance, and this
        # thread, stopping late, must not remove its successor's entry.
        self.metrics_key = f"{self.name}#{next(_thread_serial)}"
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._gate = threading.Lock()
        self._stop_event = threading.Event()
        self._wake = threading.Event()
        self._partitions: dict[TopicPartition, PartitionTopicInfo] = {}
        self._pending: dict[TopicPartition, PartitionTopicInfo] = {}
        self._inflight: dict[TopicPartition, PartitionTopicInfo] = {}
        # Partitions a rebalance gave away, to stop fetching at the next round (under _lock;
        # the info too: the same partition may come back with a new one).
        self._removing: dict[TopicPartition, PartitionTopicInfo] = {}
        self._held: dict[TopicPartition, _Held] = {}
        self._beyond_end: dict[TopicPartition, float] = {}
        # Log ends of held partitions looked up by _refresh_held_lag, and when it last did.
        self._held_ends: dict[TopicPartition, int] = {}
        self._ends_looked_up = 0.0
        self._ends_lookup: threading.Thread | None = None  # its helper thread
        # The helper's answers, each with the hold it was looked up for (under _lock).
        self._found_ends: dict[TopicPartition, tuple[_Held, int]] = {}

    # -- called by the manager (under the manager's lock) --
    def add_partitions(self, infos: Iterable[PartitionTopicInfo]) -> None:
        with self._lock:
            for info in infos:
                self._pending[info.tp] = info
            self._cond.notify_all()
        self._wake.set()

    def remove_partitions(self, infos: Mapping[TopicPartition, PartitionTopicInfo]) -> None:
        """Stop fetching these (at the next round; their infos are revoked, so nothing of
        them is enqueued meanwhile)."""
        with self._lock:
            for tp, info in infos.items():
                if self._pending.get(tp) is info:
                    del self._pending[tp]
                else:
                    self._removing[tp] = info
            self._cond.notify_all()
        self._wake.set()

    def idle(self) -> bool:
        with self._lock:
            return not self._partitions and not self._pending and not self._inflight

    def begin_stop(self) -> None:
        self._stop_event.set()
        self._wake.set()
        with self._lock:
            self._cond.notify_all()

    @property
    def stopping(self) -> bool:
        return self._stop_event.is_set()

    def quiesce(self) -> None:
        """After :meth:`begin_stop`: wait until no info change or enqueue is under way."""
        with self._gate:
            pass

    # -- the thread --
    def run(self) -> None:
        backend: FetchBackend | None = None
        clean = False
        try:
            backend = self._connect()
            if backend is not None:
                self._loop(backend)
            clean = True
        except BaseException as e:  # noqa: BLE001 - kept and re-raised to the user
            self.manager.thread_failed(self, e)
        finally:
            # A client that ended cleanly goes back to the manager for the next rebalance's
            # fetchers: making a new one costs more than the rest of a rebalance.
            if backend is not None and not (clean and self.manager.keep_backend(backend)):
                try:
                    backend.close()
                except Exception:  # closing; nothing depends on it
                    log.debug("%s: closing the fetch client failed", self.name, exc_info=True)
            if self.manager.metrics is not None:
                self.manager.metrics.remove_fetcher(self.metrics_key)
            log.debug("%s stopped", self.name)

    def _connect(self) -> FetchBackend | None:
        retriable = self.manager.offset_client.errors
        while not self.stopping:
            try:
                return self.manager.make_backend()
            except retriable as e:
                log.warning("%s: cannot connect to the brokers (%s); retrying", self.name, e)
                self._stop_event.wait(self.manager.config.refresh_leader_backoff_ms / 1000.0)
        return None

    def _loop(self, backend: FetchBackend) -> None:
        stats = self.manager.counters
        metrics = self.manager.metrics
        recorded = 0.0  # when a fetch request was last counted for MinFetchRate
        while not self.stopping:
            # Cleared before the puts are tried: room made after a refused put sets it again.
            self._wake.clear()
            self._apply_pending(backend)
            self._apply_removals(backend)
            self._put_held(backend)
            if self._held and metrics is not None:
                self._refresh_held_lag(metrics)
            with self._lock:
                if not self._partitions:
                    if not self._pending and not self.stopping:
                        self._cond.wait(1.0)
                    continue
                infos = dict(self._partitions)
            if self.stopping:
                return
            if self._held and all(tp in self._held for tp in infos):
                self._wake.wait(FULL_QUEUE_WAIT_S)  # every partition paused: nothing to poll
                continue
            short = bool(self._held)
            result = backend.poll(HELD_POLL_TIMEOUT_MS if short else POLL_TIMEOUT_MS)
            stats.add(polls=1)
            now = time.monotonic()
            if metrics is not None and (
                not short or result.batches or now - recorded >= POLL_TIMEOUT_MS / 1000.0
            ):
                # A long poll, a fetch answered, or a long poll's worth of time: the short
                # polls made while a chunk is held are not requests (else MinFetchRate would
                # rise as the application falls behind; the legacy fetcher stopped then).
                metrics.record_fetch_request(self.metrics_key)
                recorded = now
            delivered = self._deliver(backend, result, infos, now)
            if delivered is None:
                return  # stopping
            got, again = delivered
            if result.error is not None:
                self._fetch_failed(backend, result.error)
                continue
            if result.partition_errors:
                self._partitions_failed(backend, result.partition_errors)
            self._log_corrupt(result, again)
            if metrics is not None and len(got) < len(infos):
                self._first_lags(backend, metrics, infos, got)
            out_of_range = dict(result.out_of_range)
            out_of_range.update(self._beyond_log_end(backend, infos, got))
            if out_of_range:
                self._reset_out_of_range(backend, out_of_range)

    def _deliver(self, backend: FetchBackend, result: PollResult,
                 infos: Mapping[TopicPartition, PartitionTopicInfo], now: float,
                 ) -> tuple[set[TopicPartition], dict[TopicPartition, int]] | None:
        """Put each batch of the poll in its partition's queue, or hold it (queue full);
        pause the partitions held. The partitions with data, and those to fetch again from
        an offset (data behind a held chunk); None when the thread is stopping."""
        stats = self.manager.counters
        metrics = self.manager.metrics
        got: set[TopicPartition] = set()
        refused: list[TopicPartition] = []
        again: dict[TopicPartition, int] = {}
        for tp, batch in result.batches:
            info = infos.get(tp)
            if info is None or not batch or info.revoked:
                continue  # (revoked: given away; removed from this thread next round)
            got.add(tp)
            held = self._held.get(tp)
            if held is not None:
                # Data of a paused partition (the client had it already): it must not
                # overtake the held chunk, so it is fetched again after that one.
                again[tp] = held.next_offset
                continue
            next_offset = batch[-1].offset + 1
            with self._gate:
                if self.stopping:
                    return None
                put = info.try_enqueue(batch, next_offset, self._wake)
                if put and metrics is not None:
                    # Under the gate: once stopped, a fetcher brings back no lag of a
                    # partition a rebalance gave away.
                    metrics.update_lag(tp.topic, tp.partition, info, backend.highwater(tp))
            if put:
                stats.add(chunks=1, records=len(batch))
            else:
                self._held[tp] = _Held(info, batch, next_offset, now)
                refused.append(tp)
        if again:
            backend.add(again)
            refused.extend(again)
        if refused:
            backend.pause(refused)
        return got, again

    def _log_corrupt(self, result: PollResult, again: Mapping[TopicPartition, int]) -> None:
        for tp, (offset, next_offset, error) in result.corrupt.items():
            if tp in again:
                continue  # re-sought to before it: reported when fetched again
            # Skipped, not retried for ever: the consumed offset will pass it (see the
            # module docstring), so this line is all that tells of the lost message(s).
            log.error(
                "%s: corrupt data in %s:%d at offset %d (%s); skipped, never delivered: "
                "fetching on from offset %d",
                self.name, tp.topic, tp.partition, offset, error, next_offset,
            )

    def _first_lags(
        self,
        backend: FetchBackend,
        metrics: FetchMetrics,
        infos: Mapping[TopicPartition, PartitionTopicInfo],
        got: Collection[TopicPartition],
    ) -> None:
        """ConsumerLag of the partitions with no lag yet and nothing queued by this fetch
        (nothing new to fetch, or nothing consumed yet): from the fetch answer's log end, so
        that every owned partition has a series from its first fetch on, not from its first
        chunk. Under the gate, as in ``_loop``."""
        candidates = [tp for tp in infos if tp not in got and tp not in self._held]
        missing = metrics.lags_missing(candidates) if candidates else []
        if not missing:
            return
        ends = {tp: backend.highwater(tp) for tp in missing}
        with self._gate:
            if self.stopping:
                return
            for tp, end in ends.items():
                if end is not None:
                    metrics.update_lag(tp.topic, tp.partition, infos[tp], end)

    def _put_held(self, backend: FetchBackend) -> None:
        """Try again to put the held chunks; resume the partitions of those that went in."""
        if not self._held:
            return
        stats = self.manager.counters
        metrics = self.manager.metrics
        now = time.monotonic()
        put: list[tuple[TopicPartition, _Held]] = []
        waits = 0
        with self._gate:
            if self.stopping:
                return
            for tp, held in list(self._held.items()):
                if held.info.try_enqueue(held.records, held.next_offset, self._wake):
                    del self._held[tp]
                    put.append((tp, held))
                    continue
                # One wait per FULL_QUEUE_WAIT_S a chunk is refused, whatever the loop's pace.
                periods = int((now - held.since) / FULL_QUEUE_WAIT_S)
                waits += periods - held.waits
                held.waits = periods
            if metrics is not None:  # under the gate, as in _loop
                for tp, held in put:
                    if held.info.revoked:
                        continue  # given away (nothing was put): no lag of it comes back
                    # The client's high watermark is as old as the pause; a log end looked up
                    # since is newer.
                    hw = backend.highwater(tp)
                    end = self._held_ends.pop(tp, None)
                    if end is not None and (hw is None or end > hw):
                        hw = end
                    metrics.update_lag(tp.topic, tp.partition, held.info, hw)
        if waits:
            stats.add(full_queue_waits=waits)
        if not put:
            return
        stats.add(chunks=len(put), records=sum(len(h.records) for _, h in put))
        backend.resume([tp for tp, _ in put])

    def _refresh_held_lag(self, metrics: FetchMetrics) -> None:
        """ConsumerLag of the partitions held back for :data:`HELD_LOG_END_REFRESH_S`: they
        are paused, so no fetch answer brings their log end. A helper thread looks it up (a
        fetch, see :func:`log_end_offsets`), at most every :data:`HELD_LOG_END_REFRESH_S` and
        one at a time, so that this thread, which feeds the other partitions' streams, never
        waits on it; what it found is applied here, under the gate as in ``_loop``."""
        with self._lock:
            found, self._found_ends = self._found_ends, {}
        if found:
            with self._gate:
                if self.stopping:
                    return
                for tp, (hold, end) in found.items():
                    # Only for the hold it was looked up for: a later one's lag is newer.
                    if self._held.get(tp) is hold:
                        self._held_ends[tp] = end
                        metrics.update_lag(tp.topic, tp.partition, hold.info, end)
        now = time.monotonic()
        if (now - self._ends_looked_up < HELD_LOG_END_REFRESH_S or self.stopping
                or (self._ends_lookup is not None and self._ends_lookup.is_alive())):
            return
        stale = {tp: h for tp, h in self._held.items() if now - h.since >= HELD_LOG_END_REFRESH_S}
        if not stale:
            return
        self._ends_looked_up = now
        helper = threading.Thread(
            target=self._look_up_ends, args=(stale,), name=f"{self.name}-log-ends",
            daemon=True)
        if self.manager.start_helper(helper):
            self._ends_lookup = helper

    def _look_up_ends(self, holds: dict[TopicPartition, _Held]) -> None:
        """In the helper thread of :meth:`_refresh_held_lag`, with the manager's own client
        for it (a fetch held at the log end never delays this thread's lookups). Only a
        metric: the cluster failing to answer is logged at DEBUG and retried at the next
        refresh; an unexpected error is this thread's, as everywhere."""
        if self.stopping:
            return
        lookups = self.manager.held_offset_client
        retriable: tuple[type[BaseException], ...] = (*lookups.errors, ConsumerShutdownError)
        try:
            # The broker holds a fetch at the log end for fetch.wait.max.ms: on top of that.
            timeout_ms = self.manager.config.fetch_wait_max_ms + HELD_LOG_END_TIMEOUT_MS
            ends = self.manager.held_offset_client.log_end(list(holds), timeout_ms=timeout_ms)
        except retriable as e:
            log.debug("%s: log end lookup of held partitions failed: %r", self.name, e)
            return
        except Exception as e:  # noqa: BLE001 - kept for the user's next call
            self.manager.thread_failed(self, e)
            return
        with self._lock:
            self._found_ends.update((tp, (holds[tp], end)) for tp, end in ends.items()
                                    if tp in holds)

    def _apply_pending(self, backend: FetchBackend) -> None:
        with self._lock:
            pending, self._pending = self._pending, {}
            self._inflight.update(pending)
        if not pending:
            return
        try:
            self._start_fetching(backend, pending)
        finally:
            self._land(pending)

    def _apply_removals(self, backend: FetchBackend) -> None:
        with self._lock:
            if not self._removing:
                return
            gone = [tp for tp, info in self._removing.items()
                    if self._partitions.get(tp) is info]
            # Still in flight (an offset lookup): removed once it has landed. Anything else
            # is no longer this thread's.
            self._removing = {tp: info for tp, info in self._removing.items()
                              if self._inflight.get(tp) is info}
        infos = self._take_off(gone)
        try:
            if infos:
                backend.remove(list(infos))
        finally:
            self._land(infos)

    def _land(self, infos: Mapping[TopicPartition, PartitionTopicInfo]) -> None:
        """These partitions are no longer in flight (fetched, given back or dropped)."""
        with self._lock:
            for tp, info in infos.items():
                if self._inflight.get(tp) is info:
                    del self._inflight[tp]

    def _start_fetching(
        self, backend: FetchBackend, pending: Mapping[TopicPartition, PartitionTopicInfo]
    ) -> None:
        positions: dict[TopicPartition, int] = {}
        unresolved: dict[TopicPartition, PartitionTopicInfo] = {}
        for tp, info in pending.items():
            offset = info.fetched_offset
            if offset < 0:
                unresolved[tp] = info  # -1: nothing committed; below -1: out of range
            else:
                positions[tp] = offset
        if unresolved:
            resolved = self._resolve(unresolved, "added")
            positions.update(resolved)
        if not positions or self.stopping:
            return
        backend.add(positions)
        with self._lock:
            for tp in positions:
                self._partitions[tp] = pending[tp]
                self._beyond_end.pop(tp, None)

    def _resolve(
        self, infos: Mapping[TopicPartition, PartitionTopicInfo], why: str
    ) -> dict[TopicPartition, int]:
        """Reset both offsets of these partitions per auto.offset.reset; return the new ones.

        On a lookup failure the partitions go back to the leader finder (and are left out).
        """
        policy = self.manager.config.auto_offset_reset
        try:
            found = self.manager.offset_client.resolve(list(infos))
        except self.manager.offset_client.errors as e:
            log.warning(
                "%s: cannot look up the %s offsets of %s (%s); retrying after a leader lookup",
                self.name, policy, fmt_tps(infos), e,
            )
            self._give_back(dict(infos))
            return {}
        missing = {tp: info for tp, info in infos.items() if tp not in found}
        if missing:
            self._give_back(missing)
        out: dict[TopicPartition, int] = {}
        resets = 0
        with self._gate:
            if self.stopping:
                return {}
            for tp, offset in found.items():
                info = infos[tp]
                old = info.fetched_offset
                info.reset_offsets(offset)
                out[tp] = offset
                if old == INVALID_OFFSET and why == "added":
                    log.info(
                        "%s: no committed offset for %s:%d; starting at the %s offset %d",
                        self.name, tp.topic, tp.partition, policy, offset,
                    )
                else:
                    resets += 1
                    log.warning(
                        "%s: offset %d of %s:%d is out of range; reset to the %s offset %d "
                        "(auto.offset.reset=%s)",
                        self.name, old, tp.topic, tp.partition, policy, offset, policy,
                    )
        self.manager.counters.add(offset_resets=resets)
        return out

    def _reset_out_of_range(
        self, backend: FetchBackend, offsets: Mapping[TopicPartition, int]
    ) -> None:
        infos = self._take_off(offsets)
        if not infos:
            return
        try:
            backend.remove(list(infos))
            resolved = self._resolve(infos, "out of range")
            if resolved and not self.stopping:
                backend.add(resolved)
                with self._lock:
                    for tp in resolved:
                        self._partitions[tp] = infos[tp]
                        self._beyond_end.pop(tp, None)
        finally:
            self._land(infos)

    def _take_off(
        self, tps: Iterable[TopicPartition] | None
    ) -> dict[TopicPartition, PartitionTopicInfo]:
        """Stop fetching these partitions (None: all); in flight until :meth:`_land`."""
        with self._lock:
            if tps is None:
                infos, self._partitions = self._partitions, {}
            else:
                infos = {tp: self._partitions.pop(tp) for tp in tps if tp in self._partitions}
            self._inflight.update(infos)
        for tp in infos:
            # Never enqueued, so the fetched offset is still where the held chunk starts.
            self._held.pop(tp, None)
            self._held_ends.pop(tp, None)
        return infos

    def _beyond_log_end(
        self,
        backend: FetchBackend,
        infos: Mapping[TopicPartition, PartitionTopicInfo],
        got: Collection[TopicPartition],
    ) -> dict[TopicPartition, int]:
        """Partitions fetched from above the log end (brokers that never say out of range)."""
        now = time.monotonic()
        suspects: dict[TopicPartition, int] = {}
        for tp, info in infos.items():
            if tp in got:
                self._beyond_end.pop(tp, None)
                continue
            hw = backend.highwater(tp)
            position = info.fetched_offset
            if hw is None or position <= hw:
                self._beyond_end.pop(tp, None)
                continue
            first = self._beyond_end.setdefault(tp, now)
            if now - first >= BEYOND_END_CONFIRM_S:
                suspects[tp] = position
        if not suspects:
            return {}
        for tp in suspects:
            self._beyond_end.pop(tp, None)
        try:
            ends = self.manager.offset_client.log_end(list(suspects))
        except self.manager.offset_client.errors as e:
            log.debug("%s: log end lookup failed: %s", self.name, e)
            return {}
        return {tp: pos for tp, pos in suspects.items() if tp in ends and pos > ends[tp]}

    def _partitions_failed(
        self, backend: FetchBackend, errors: Mapping[TopicPartition, BaseException]
    ) -> None:
        infos = self._take_off(errors)
        if not infos:
            return
        try:
            for tp in infos:
                log.warning(
                    "%s: fetching %s:%d failed (%s); looking up its leader again",
                    self.name, tp.topic, tp.partition, errors[tp],
                )
            backend.remove(list(infos))
            self._give_back(infos)
        finally:
            self._land(infos)

    def _fetch_failed(self, backend: FetchBackend, error: BaseException) -> None:
        infos = self._take_off(None)
        try:
            log.warning(
                "%s: fetch from broker %d failed (%r); looking up the leaders of %s again",
                self.name, self.broker_id, error, fmt_tps(infos),
            )
            backend.remove(list(infos))
            self._give_back(infos)
        finally:
            self._land(infos)
        self._stop_event.wait(self.manager.config.refresh_leader_backoff_ms / 1000.0)

    def _give_back(self, infos: Mapping[TopicPartition, PartitionTopicInfo]) -> None:
        if infos:
            self.manager.leader_lost(self, infos)
