"""Fetching: the fetcher manager, the leader finder and the fetcher threads.

The legacy design (``ConsumerFetcherManager``), kept:

- :meth:`FetcherManager.start_connections` takes the owned partitions' infos; all of them start
  *without a leader*. The leader finder thread (``<consumer id>-leader-finder-thread``) looks up
  the leaders of partitions without one every ``refresh.leader.backoff.ms`` and hands each
  partition to the fetcher thread keyed by (leader broker id, fetcher id), where
  ``fetcher id = abs(31 * String.hashCode(topic) + partition) % num.consumer.fetchers`` as in
  Kafka's ``AbstractFetcherManager``. Fetcher threads with nothing left to fetch are shut down.
- A fetcher thread (``ConsumerFetcherThread-<consumer id>-<fetcher id>-<broker id>``) fetches
  from each partition's ``fetched_offset`` and puts one chunk per partition per fetch on the
  partition's stream queue. Unlike the legacy put, which blocked while the queue was full (so
  one slow stream held back every partition of its fetcher thread), the put never blocks
  (:meth:`PartitionTopicInfo.try_enqueue`): a chunk that finds its queue full is held, at most
  one per partition, and its partition paused in the client until the chunk is put. Memory
  stays bounded by about (streams x ``queued.max.message.chunks`` + partitions) x
  ``fetch.message.max.bytes``, plus what each client buffers (one fetch response per partition
  for kafka-python, ``queued.max.messages.kbytes`` for librdkafka). That assumes the broker
  honours the per-partition fetch size, as Kafka does; a broker that fills a response up to
  the whole-request limit (4 x ``fetch.message.max.bytes`` here) makes one chunk that large.
- A partition whose fetch fails goes back to the leader finder; the whole thread's partitions do
  when a fetch as a whole fails. An offset out of range resets both offsets of the partition
  per ``auto.offset.reset`` (WARNING naming the partition, the old and the new offset); so does
  a fetched offset of :data:`INVALID_OFFSET` (no committed offset; logged at INFO). An offset
  below -1 is out of range (below every log start) without asking the broker.
- Corrupt data (a record batch failing its CRC check; librdkafka checks with ``check.crcs``,
  which the confluent backend sets): a logged skip. The backend moves the partition past it,
  one offset per round (a corrupt batch's length is not to be trusted), the fetcher logs an
  ERROR naming the partition and the offset, and fetches on; the corrupt message is never
  delivered, and the consumed (committed) offset passes it once the next message is handed
  out. Retrying could never succeed (the broker stores the bytes as they are) and would stall
  the partition for good.

What differs: fetching goes through a client library's public API, never hand-written protocol.
Two backends implement :class:`FetchBackend`, so the thread code is shared:

- ``fetch.backend=kafka-python`` (default): one ``kafka.KafkaConsumer`` per fetcher thread, in
  assign mode, ``group_id=None``, ``auto_offset_reset='none'``;
- ``fetch.backend=confluent``: one ``confluent_kafka.Consumer`` per fetcher thread, in assign
  mode, with a throwaway ``group.id`` that never commits.

Both read uncommitted, as the legacy consumer did (it had no isolation level): every message
up to the high watermark, those of open and aborted transactions included (transaction
markers, control records, are never handed out), so both deliver the same messages and an
open transaction never holds a partition back.

Offsets are looked up with one shared kafka-python client (:func:`log_end_offsets` is the only
way zkconsumer computes a log end), leaders with one shared ``KafkaAdminClient``. Some
Kafka-protocol brokers that are not Apache Kafka never answer OFFSET_OUT_OF_RANGE for an
offset past the log end; a fetcher therefore also treats a position above the partition's
high watermark, seen for :data:`BEYOND_END_CONFIRM_S` and confirmed by a fresh log-end lookup,
as out of range (Kafka answers OFFSET_OUT_OF_RANGE first).
A partition held back by a full queue is paused, so no fetch answer updates its high watermark;
for ConsumerLag its log end is looked up every :data:`HELD_LOG_END_REFRESH_S` instead.

An unexpected exception in any background thread is kept (:attr:`FetcherManager.error`) and
re-raised by :meth:`FetcherManager.check` as :class:`BackgroundThreadError`; it is never
swallowed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import count
from typing import TYPE_CHECKING, Any, Protocol

from kafka import KafkaConsumer

from zkconsumer._errors import BackgroundThreadError, ConfigError, ConsumerShutdownError
from zkconsumer._tls import with_tls_deadline
from zkconsumer._types import TopicPartition
from zkconsumer.broker.backends import ConfluentBackend, FetchBackend, KafkaPythonBackend
from zkconsumer.broker.clients import (
    _request_timeout_ms,
    kafka_consumer,
    kafka_python_kwargs,
    log_end_offsets,
)
from zkconsumer.consumer.assignors.core import java_string_hashcode
from zkconsumer.consumer.partition import INVALID_OFFSET, PartitionTopicInfo

if TYPE_CHECKING:

    from zkconsumer._config import ConsumerConfig

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
#: Longest shutdown() waits for background threads to finish closing their clients.
SHUTDOWN_JOIN_S = 10.0
# Stopped fetchers' clients kept for the next rebalance (per FetcherManager).
MAX_IDLE_BACKENDS = 4

_thread_serial = count(1)  # see _FetcherThread.metrics_key


def fetcher_id(topic: str, partition: int, num_fetchers: int) -> int:
    """Kafka's ``Utils.abs(31 * topic.hashCode() + partitionId) % numFetchers`` (Java ints)."""
    n = (31 * java_string_hashcode(topic) + partition) & 0xFFFFFFFF
    if n >= 0x80000000:
        n -= 0x100000000
    n = 0 if n == -0x80000000 else abs(n)
    return n % num_fetchers


class FetchMetrics(Protocol):
    """What the fetchers report (``zkconsumer.consumer.metrics.ConsumerMetrics`` has these)."""

    def record_fetch_request(self, fetcher_id: str) -> None: ...

    def remove_fetcher(self, fetcher_id: str) -> None: ...

    def update_lag(
        self, topic: str, partition: int, offset: PartitionTopicInfo,
        log_end_offset: int | None,
    ) -> None: ...

    def lags_missing(self, tps: Iterable[TopicPartition]) -> list[TopicPartition]: ...


# -- shared clients ----------------------------------------------------------------------------


def _network_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that mean "the cluster did not answer as hoped": retried, never fatal."""
    from kafka.errors import KafkaError

    errors: list[type[BaseException]] = [KafkaError, OSError]
    try:
        from confluent_kafka import KafkaException

        errors.append(KafkaException)
    except ImportError:  # pragma: no cover - confluent-kafka is optional
        pass
    return tuple(errors)


class _SharedClient:
    """A kafka-python client made lazily, shared by the fetcher threads, dropped after a
    failure (the next use bootstraps from the brokers registered then). ``_lock`` guards the
    client and serialises its use (:meth:`_in_use`)."""

    def __init__(self, manager: FetcherManager) -> None:
        self._manager = manager
        self._lock = threading.Lock()
        self._closed = False  # close() came: a lookup under way then drops the client after

    @contextmanager
    def _in_use(self) -> Iterator[None]:
        with self._lock:
            try:
                yield
            except BaseException:
                self._drop()
                raise
            finally:
                if self._closed:
                    self._drop()

    def _drop(self) -> None:
        raise NotImplementedError

    def close(self, timeout_s: float) -> None:
        # Flagged first: a lookup that outlives the wait (a request timeout is 30 s or more)
        # closes the client itself when it ends, and so does one made by a late thread.
        self._closed = True
        if self._lock.acquire(timeout=timeout_s):
            try:
                self._drop()
            finally:
                self._lock.release()


class _OffsetClient(_SharedClient):
    """One kafka-python consumer (no group) for offset lookups."""

    def __init__(self, manager: FetcherManager) -> None:
        super().__init__(manager)
        self._consumer: KafkaConsumer | None = None

    def _client(self) -> KafkaConsumer:
        if self._closed:  # a late thread: no new connection (nor a ZooKeeper read) for it
            raise ConsumerShutdownError(f"{self._manager.consumer_id}: the fetcher is shut down")
        if self._consumer is None:
            m = self._manager
            self._consumer = kafka_consumer(**kafka_python_kwargs(m.config, m._bootstrap()))
        return self._consumer

    def resolve(self, tps: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        """Where auto.offset.reset says to start: log start (smallest) or log end (largest)."""
        from kafka import TopicPartition as KTP

        timeout_ms = _request_timeout_ms(self._manager.config)
        with self._in_use():
            consumer = self._client()
            if self._manager.config.auto_offset_reset == "smallest":
                ktps = [KTP(t, p) for t, p in tps]
                found = consumer.beginning_offsets(ktps, timeout_ms=timeout_ms)
                return {TopicPartition(k.topic, k.partition): int(v) for k, v in found.items()}
            return log_end_offsets(tps, consumer=consumer, timeout_ms=timeout_ms)

    def log_end(
        self, tps: Collection[TopicPartition], *, timeout_ms: int | None = None,
    ) -> dict[TopicPartition, int]:
        """:func:`log_end_offsets` within ``timeout_ms`` (default: the request timeout)."""
        if timeout_ms is None:
            timeout_ms = _request_timeout_ms(self._manager.config)
        with self._in_use():
            return log_end_offsets(tps, consumer=self._client(), timeout_ms=timeout_ms)

    def _drop(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            try:
                consumer.close(autocommit=False)
            except Exception:  # noqa: BLE001 - already failing; the first error matters
                log.debug("closing the offset client failed", exc_info=True)


class _MetadataClient(_SharedClient):
    """One ``KafkaAdminClient`` for leader lookups (the leader finder's)."""

    def __init__(self, manager: FetcherManager) -> None:
        super().__init__(manager)
        self._admin: Any = None

    def leaders(self, topics: Collection[str]) -> dict[TopicPartition, int]:
        """Partition -> leader broker id (-1: none) of these topics; unknown topics left out."""
        from kafka import KafkaAdminClient

        with self._in_use():
            if self._admin is None:
                m = self._manager
                kwargs = with_tls_deadline(m.config.kafka_client_kwargs())
                kwargs["request_timeout_ms"] = _request_timeout_ms(m.config)
                self._admin = KafkaAdminClient(bootstrap_servers=m._bootstrap(), **kwargs)
            described = self._admin.describe_topics(sorted(topics))
        out: dict[TopicPartition, int] = {}
        for topic in described:
            if topic.get("error_code", 0) != 0:
                continue
            for p in topic.get("partitions", []):
                if p.get("error_code", 0) not in (0, 9):  # 9: REPLICA_NOT_AVAILABLE is harmless
                    out[TopicPartition(topic["name"], int(p["partition_index"]))] = -1
                    continue
                out[TopicPartition(topic["name"], int(p["partition_index"]))] = int(
                    p.get("leader_id", -1)
                )
        return out

    def _drop(self) -> None:
        admin, self._admin = self._admin, None
        if admin is not None:
            try:
                admin.close()
            except Exception:  # noqa: BLE001 - already failing
                log.debug("closing the metadata client failed", exc_info=True)


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

    def __init__(self, manager: FetcherManager, broker_id: int, fid: int) -> None:
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
            self.manager._thread_failed(self, e)
        finally:
            # A client that ended cleanly goes back to the manager for the next rebalance's
            # fetchers: making a new one costs more than the rest of a rebalance.
            if backend is not None and not (clean and self.manager._keep_backend(backend)):
                try:
                    backend.close()
                except Exception:  # noqa: BLE001 - closing; nothing depends on it
                    log.debug("%s: closing the fetch client failed", self.name, exc_info=True)
            if self.manager.metrics is not None:
                self.manager.metrics.remove_fetcher(self.metrics_key)
            log.debug("%s stopped", self.name)

    def _connect(self) -> FetchBackend | None:
        retriable = _network_errors()
        while not self.stopping:
            try:
                return self.manager._make_backend()
            except retriable as e:
                log.warning("%s: cannot connect to the brokers (%s); retrying", self.name, e)
                self._stop_event.wait(self.manager.config.refresh_leader_backoff_ms / 1000.0)
        return None

    def _loop(self, backend: FetchBackend) -> None:
        stats = self.manager._stats
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
                        return
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
            if result.error is not None:
                self._fetch_failed(backend, result.error)
                continue
            if result.partition_errors:
                self._partitions_failed(backend, result.partition_errors)
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
            if metrics is not None and len(got) < len(infos):
                self._first_lags(backend, metrics, infos, got)
            out_of_range = dict(result.out_of_range)
            out_of_range.update(self._beyond_log_end(backend, infos, got))
            if out_of_range:
                self._reset_out_of_range(backend, out_of_range)

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
        stats = self.manager._stats
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
        if self.manager._start_helper(helper):
            self._ends_lookup = helper

    def _look_up_ends(self, holds: dict[TopicPartition, _Held]) -> None:
        """In the helper thread of :meth:`_refresh_held_lag`, with the manager's own client
        for it (a fetch held at the log end never delays this thread's lookups). Only a
        metric: the cluster failing to answer is logged at DEBUG and retried at the next
        refresh; an unexpected error is this thread's, as everywhere."""
        if self.stopping:
            return
        retriable: tuple[type[BaseException], ...] = (*_network_errors(), ConsumerShutdownError)
        try:
            # The broker holds a fetch at the log end for fetch.wait.max.ms: on top of that.
            timeout_ms = self.manager.config.fetch_wait_max_ms + HELD_LOG_END_TIMEOUT_MS
            ends = self.manager._held_offsets.log_end(list(holds), timeout_ms=timeout_ms)
        except retriable as e:
            log.debug("%s: log end lookup of held partitions failed: %r", self.name, e)
            return
        except Exception as e:  # noqa: BLE001 - kept for the user's next call
            self.manager._thread_failed(self, e)
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
            found = self.manager._offsets.resolve(list(infos))
        except _network_errors() as e:
            log.warning(
                "%s: cannot look up the %s offsets of %s (%s); retrying after a leader lookup",
                self.name, policy, _fmt_tps(infos), e,
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
        self.manager._stats.add(offset_resets=resets)
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
            ends = self.manager._offsets.log_end(list(suspects))
        except _network_errors() as e:
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
                self.name, self.broker_id, error, _fmt_tps(infos),
            )
            backend.remove(list(infos))
            self._give_back(infos)
        finally:
            self._land(infos)
        self._stop_event.wait(self.manager.config.refresh_leader_backoff_ms / 1000.0)

    def _give_back(self, infos: Mapping[TopicPartition, PartitionTopicInfo]) -> None:
        if infos:
            self.manager._partitions_without_leader(self, infos)


class _LeaderFinder(threading.Thread):
    """Finds leaders for the manager's partitions without one; see the module docstring.

    Holds no state of its own besides ``_stop`` (an Event): the partitions waiting for a
    leader are the manager's, under the manager's lock.
    """

    def __init__(self, manager: FetcherManager) -> None:
        super().__init__(name=f"{manager.consumer_id}-leader-finder-thread", daemon=True)
        self.manager = manager
        self._stop_event = threading.Event()

    @property
    def stopping(self) -> bool:
        return self._stop_event.is_set()

    def begin_stop(self) -> None:
        """Call with the manager's lock held (it wakes the finder through the manager's cond)."""
        self._stop_event.set()
        self.manager._cond.notify_all()

    def run(self) -> None:
        m = self.manager
        backoff_s = m.config.refresh_leader_backoff_ms / 1000.0
        # ValueError: metadata kafka-python cannot decode (e.g. unknown ACL operation bits).
        retriable: tuple[type[BaseException], ...] = (*_network_errors(), ValueError)
        try:
            while not self.stopping:
                with m._lock:
                    while not m._no_leader and not self.stopping:
                        m._cond.wait(1.0)
                    if self.stopping:
                        break
                    wanted = {tp: m._partition_map[tp] for tp in m._no_leader}
                try:
                    leaders = m._metadata.leaders({tp.topic for tp in wanted})
                except retriable as e:
                    log.warning("%s: leader lookup failed: %s", self.name, e)
                    leaders = {}
                found = {tp: leaders[tp] for tp in wanted if leaders.get(tp, -1) >= 0}
                if found:
                    m._add_fetchers(self, {tp: (wanted[tp], lead) for tp, lead in found.items()})
                m._shutdown_idle_fetchers()
                self._stop_event.wait(backoff_s)
        except BaseException as e:  # noqa: BLE001 - kept and re-raised to the user
            m._thread_failed(self, e)


# -- the manager -----------------------------------------------------------------------------------


class FetcherManager:
    """Fetches the owned partitions into their streams' queues (``ConsumerFetcherManager``).

    ``brokers()`` returns the ``host:port`` of the brokers registered in ZooKeeper; new
    clients bootstrap from it. ``metrics`` (optional) receives each fetch request
    (MinFetchRate), each fetcher thread's end and, per chunk, the partition's consumed offset
    and high watermark (ConsumerLag).

    Locks: ``_lock`` (condition ``_cond``) guards ``_partition_map`` (partition -> info of the
    current :meth:`start_connections`, changed by :meth:`add_partitions` and
    :meth:`remove_partitions`), ``_no_leader`` (partitions waiting for a leader),
    ``_fetchers`` ((leader broker id, fetcher id) -> thread), ``_retired`` (stopped threads
    and running helpers, joined by :meth:`shutdown`), ``_idle_backends`` (clients of stopped
    fetchers, reused by the next ones), ``_leader_finder`` and ``_closed``; it is never held
    during network calls, nor while waiting for a fetcher thread. ``_error_lock`` guards ``_error``.
    The shared clients and the statistics have their own locks.
    """

    def __init__(
        self,
        config: ConsumerConfig,
        consumer_id: str,
        brokers: Callable[[], list[str]],
        metrics: FetchMetrics | None = None,
    ) -> None:
        self.config = config
        self.consumer_id = consumer_id
        self._brokers = brokers
        self.metrics = metrics
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._partition_map: dict[TopicPartition, PartitionTopicInfo] = {}
        self._no_leader: set[TopicPartition] = set()
        self._fetchers: dict[tuple[int, int], _FetcherThread] = {}
        self._retired: list[threading.Thread] = []
        self._idle_backends: list[FetchBackend] = []
        self._leader_finder: _LeaderFinder | None = None
        self._closed = False
        self._error_lock = threading.Lock()
        self._error: BaseException | None = None
        self._stats = _Stats()
        self._offsets = _OffsetClient(self)
        # The held partitions' log ends (a metric), apart: such a lookup is a fetch the
        # broker may hold at the log end, and the fetcher threads' own lookups never wait on it.
        self._held_offsets = _OffsetClient(self)
        self._metadata = _MetadataClient(self)
        if config.fetch_backend == "confluent":
            import confluent_kafka  # noqa: F401 - fail now, not in a fetcher thread

    # -- public API ------------------------------------------------------------------------
    def start_connections(self, infos: Iterable[PartitionTopicInfo]) -> None:
        """Start fetching these partitions, each from its ``fetched_offset``."""
        infos = list(infos)
        with self._lock:
            busy = bool(self._partition_map or self._fetchers or self._leader_finder)
        if busy:
            self.stop_connections()
        with self._lock:
            if self._closed:
                raise ConsumerShutdownError(f"{self.consumer_id}: the fetcher is shut down")
            self._partition_map = {info.tp: info for info in infos}
            self._no_leader = set(self._partition_map)
            finder = _LeaderFinder(self)
            self._leader_finder = finder
            finder.start()
            self._cond.notify_all()
        log.info(
            "%s: fetching %s", self.consumer_id, _fmt_tps(dict.fromkeys(i.tp for i in infos))
        )

    def add_partitions(self, infos: Iterable[PartitionTopicInfo]) -> None:
        """Start fetching these partitions too, the others going on (an incremental
        rebalance), each from its ``fetched_offset``."""
        infos = list(infos)
        with self._lock:
            running = self._leader_finder is not None
        if not running:
            self.start_connections(infos)
            return
        with self._lock:
            if self._closed:
                raise ConsumerShutdownError(f"{self.consumer_id}: the fetcher is shut down")
            for info in infos:
                self._partition_map[info.tp] = info
                self._no_leader.add(info.tp)
            self._cond.notify_all()
        log.info("%s: fetching %s too", self.consumer_id,
                 _fmt_tps(dict.fromkeys(i.tp for i in infos)))

    def remove_partitions(self, infos: Iterable[PartitionTopicInfo]) -> None:
        """Stop fetching these partitions (revoked: nothing of them is enqueued any more),
        the others going on (an incremental rebalance)."""
        with self._lock:
            gone: dict[TopicPartition, PartitionTopicInfo] = {}
            for info in infos:
                if self._partition_map.get(info.tp) is info:
                    del self._partition_map[info.tp]
                    self._no_leader.discard(info.tp)
                    gone[info.tp] = info
            for thread in self._fetchers.values():
                thread.remove_partitions(gone)
        if gone:
            log.info("%s: no longer fetching %s", self.consumer_id, _fmt_tps(gone))

    def stop_connections(self) -> None:
        """Stop every fetcher thread; once this returns, nothing more is enqueued."""
        with self._lock:
            finder, self._leader_finder = self._leader_finder, None
            if finder is not None:
                finder.begin_stop()
            fetchers = list(self._fetchers.values())
            self._fetchers.clear()
            self._partition_map = {}
            self._no_leader = set()
            for f in fetchers:
                f.begin_stop()
            self._retired = [t for t in self._retired if t.is_alive()]
            self._retired.extend(fetchers)
            if finder is not None:
                self._retired.append(finder)
        for f in fetchers:
            f.quiesce()
        if fetchers:
            log.debug("%s: stopped %d fetcher thread(s)", self.consumer_id, len(fetchers))

    def shutdown(self) -> None:
        """Stop everything and close the clients; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.stop_connections()
        with self._lock:
            threads = list(self._retired)
            self._retired.clear()
        deadline = time.monotonic() + SHUTDOWN_JOIN_S
        for t in threads:
            if t is not threading.current_thread():
                t.join(max(0.0, deadline - time.monotonic()))
                if t.is_alive():
                    log.warning("%s: %s did not stop in time", self.consumer_id, t.name)
        with self._lock:
            idle, self._idle_backends = self._idle_backends, []
        for backend in idle:
            try:
                backend.close()
            except Exception:  # noqa: BLE001 - closing; nothing depends on it
                log.debug("%s: closing an idle fetch client failed", self.consumer_id,
                          exc_info=True)
        self._offsets.close(max(0.1, deadline - time.monotonic()))
        self._held_offsets.close(max(0.1, deadline - time.monotonic()))
        self._metadata.close(max(0.1, deadline - time.monotonic()))
        log.info("%s: fetcher shut down", self.consumer_id)

    @property
    def error(self) -> BaseException | None:
        """The first unexpected exception of a background thread, if any."""
        with self._error_lock:
            return self._error

    def check(self) -> None:
        """Raise :class:`BackgroundThreadError` (from the kept exception) if a thread failed."""
        error = self.error
        if error is not None:
            raise BackgroundThreadError(
                f"{self.consumer_id}: a fetcher thread failed: {error!r}"
            ) from error

    def stats(self) -> FetchStats:
        return self._stats.snapshot()

    def fetcher_threads(self) -> dict[tuple[int, int], str]:
        """(leader broker id, fetcher id) -> thread name, of the running fetcher threads."""
        with self._lock:
            return {k: t.name for k, t in self._fetchers.items()}

    def partitions_without_leader(self) -> set[TopicPartition]:
        with self._lock:
            return set(self._no_leader)

    # -- for the threads ---------------------------------------------------------------------
    def _bootstrap(self) -> list[str]:
        from kafka.errors import KafkaConnectionError

        try:
            brokers = list(self._brokers())
        except Exception as e:  # noqa: BLE001 - e.g. ZooKeeper unreachable: retried later
            raise KafkaConnectionError(f"cannot list the brokers: {e!r}") from e
        if not brokers:
            raise KafkaConnectionError("no broker is registered in ZooKeeper")
        return brokers

    def _keep_backend(self, backend: FetchBackend) -> bool:
        """Keep a stopped fetcher's client for reuse; False when it should be closed."""
        with self._lock:
            if self._closed or len(self._idle_backends) >= MAX_IDLE_BACKENDS:
                return False
        try:
            backend.reset()
        except Exception:  # noqa: BLE001 - an unusable client is closed instead
            return False
        with self._lock:
            if self._closed:
                return False
            self._idle_backends.append(backend)
            return True

    def _make_backend(self) -> FetchBackend:
        with self._lock:
            if self._idle_backends:
                return self._idle_backends.pop()
        if self.config.fetch_backend == "confluent":
            from confluent_kafka import KafkaError, KafkaException

            try:
                return ConfluentBackend(self.config, self._bootstrap(), self.consumer_id)
            except KafkaException as e:
                err = e.args[0] if e.args else None
                if isinstance(err, KafkaError) and err.code() in (
                        KafkaError._INVALID_ARG, KafkaError._UNKNOWN_PROTOCOL):
                    # A configuration librdkafka refuses: retrying cannot help (not retriable:
                    # the fetcher thread fails and the application hears of it).
                    raise ConfigError(
                        f"fetch.backend=confluent: librdkafka refused the configuration: "
                        f"{err.str()}"
                    ) from e
                raise
        return KafkaPythonBackend(self.config, self._bootstrap())

    def _add_fetchers(
        self,
        finder: _LeaderFinder,
        found: Mapping[TopicPartition, tuple[PartitionTopicInfo, int]],
    ) -> None:
        """Hand partitions whose leader was found to their fetcher threads."""
        n = self.config.num_consumer_fetchers
        with self._lock:
            if finder.stopping or finder is not self._leader_finder:
                return
            groups: dict[tuple[int, int], list[PartitionTopicInfo]] = {}
            for tp, (info, leader) in found.items():
                if tp not in self._no_leader or self._partition_map.get(tp) is not info:
                    continue
                self._no_leader.discard(tp)
                key = (leader, fetcher_id(tp.topic, tp.partition, n))
                groups.setdefault(key, []).append(info)
            for key, infos in groups.items():
                thread = self._fetchers.get(key)
                if thread is None:
                    thread = _FetcherThread(self, key[0], key[1])
                    self._fetchers[key] = thread
                    thread.start()
                thread.add_partitions(infos)
                log.debug(
                    "%s: %s fetches %s", self.consumer_id, thread.name,
                    _fmt_tps(dict.fromkeys(i.tp for i in infos)),
                )

    def _shutdown_idle_fetchers(self) -> None:
        with self._lock:
            for key, thread in list(self._fetchers.items()):
                if thread.idle():
                    thread.begin_stop()
                    del self._fetchers[key]
                    self._retired.append(thread)

    def _partitions_without_leader(
        self, thread: _FetcherThread, infos: Mapping[TopicPartition, PartitionTopicInfo]
    ) -> None:
        with self._lock:
            if self._fetchers.get((thread.broker_id, thread.fetcher_id)) is not thread:
                return  # stopped meanwhile
            for tp, info in infos.items():
                if self._partition_map.get(tp) is info:
                    self._no_leader.add(tp)
            self._cond.notify_all()

    def _start_helper(self, helper: threading.Thread) -> bool:
        """Start ``helper`` among the threads :meth:`shutdown` joins; False once shut down."""
        with self._lock:
            if self._closed:
                return False
            self._retired = [t for t in self._retired if t.is_alive()]
            helper.start()  # under the lock: alive before another call prunes the list
            self._retired.append(helper)
            return True

    def _thread_failed(self, thread: threading.Thread, error: BaseException) -> None:
        stopping = getattr(thread, "stopping", False)
        if stopping or self._closed:
            log.debug("%s failed while stopping: %r", thread.name, error)
            return
        log.error("%s died", thread.name, exc_info=error)
        with self._error_lock:
            if self._error is None:
                self._error = error


def _fmt_tps(tps: Iterable[TopicPartition]) -> str:
    by_topic: dict[str, list[int]] = {}
    for t, p in tps:
        by_topic.setdefault(t, []).append(p)
    return ", ".join(f"{t}{sorted(ps)}" for t, ps in sorted(by_topic.items())) or "nothing"


__all__ = [
    "BEYOND_END_CONFIRM_S",
    "ConfluentBackend",
    "FetchBackend",
    "FetchMetrics",
    "FetchStats",
    "FetcherManager",
    "KafkaPythonBackend",
    "fetcher_id",
]
