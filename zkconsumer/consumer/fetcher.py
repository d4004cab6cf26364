"""Fetching: the fetcher manager and the leader finder (the fetcher threads are in
:mod:`zkconsumer.consumer.fetcher_thread`, the shared lookup clients in
:mod:`zkconsumer.consumer.fetch_lookups`).

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

- ``fetch.backend=kafka-python``: one ``kafka.KafkaConsumer`` per fetcher thread, in
  assign mode, ``group_id=None``, ``auto_offset_reset='none'``;
- ``fetch.backend=confluent`` (default; kafka-python where confluent-kafka cannot be imported,
  see :func:`~zkconsumer.broker.clients.fetch_library`): one ``confluent_kafka.Consumer`` per
  fetcher thread, in assign mode, with a throwaway ``group.id`` that never commits.

Both read uncommitted, as the legacy consumer did (it had no isolation level): every message
up to the high watermark, those of open and aborted transactions included (transaction
markers, control records, are never handed out), so both deliver the same messages and an
open transaction never holds a partition back.

Offsets and leaders are looked up with shared clients of the same library
(:mod:`~zkconsumer.consumer.fetch_lookups`): with kafka-python, a consumer
(:func:`log_end_offsets`) and a ``KafkaAdminClient``; with confluent-kafka, a ``Consumer``
(:func:`~zkconsumer.broker.clients.confluent_list_offsets`, its metadata). Some
Kafka-protocol brokers that are not Apache Kafka never answer OFFSET_OUT_OF_RANGE for an
offset past the log end; a fetcher therefore also treats a position above the partition's
high watermark, seen for ``fetcher_thread.BEYOND_END_CONFIRM_S`` and confirmed by a fresh
log-end lookup, as out of range (Kafka answers OFFSET_OUT_OF_RANGE first).
A partition held back by a full queue is paused, so no fetch answer updates its high watermark;
for ConsumerLag its log end is looked up every ``fetcher_thread.HELD_LOG_END_REFRESH_S``
instead.

An unexpected exception in any background thread is kept (:attr:`FetcherManager.error`) and
re-raised by :meth:`FetcherManager.check` as :class:`BackgroundThreadError`; it is never
swallowed.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from zkconsumer._errors import BackgroundThreadError, ConfigError, ConsumerShutdownError
from zkconsumer._types import TopicPartition
from zkconsumer.broker.backends import ConfluentBackend, FetchBackend, KafkaPythonBackend
from zkconsumer.broker.clients import fetch_library
from zkconsumer.consumer.assignors.core import java_string_hashcode
from zkconsumer.consumer.fetch_lookups import (
    _MetadataClient,
    _OffsetClient,
    fmt_tps,
)
from zkconsumer.consumer.fetcher_thread import FetchMetrics, FetchStats, _FetcherThread, _Stats
from zkconsumer.consumer.partition import PartitionTopicInfo

if TYPE_CHECKING:

    from zkconsumer._config import ConsumerConfig

log = logging.getLogger("zkconsumer.fetcher")

#: Longest shutdown() waits for background threads to finish closing their clients.
SHUTDOWN_JOIN_S = 10.0
# Stopped fetchers' clients kept for the next rebalance (per FetcherManager).
MAX_IDLE_BACKENDS = 4


def fetcher_id(topic: str, partition: int, num_fetchers: int) -> int:
    """Kafka's ``Utils.abs(31 * topic.hashCode() + partitionId) % numFetchers`` (Java ints)."""
    n = (31 * java_string_hashcode(topic) + partition) & 0xFFFFFFFF
    if n >= 0x80000000:
        n -= 0x100000000
    n = 0 if n == -0x80000000 else abs(n)
    return n % num_fetchers


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
        retriable: tuple[type[BaseException], ...] = (*m._metadata.errors, ValueError)
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
            m.thread_failed(self, e)


# -- the manager -----------------------------------------------------------------------------------


class FetcherManager:
    """Fetches the owned partitions into their streams' queues (``ConsumerFetcherManager``).

    ``brokers()`` returns the ``host:port`` of the brokers registered in ZooKeeper; new
    clients bootstrap from it. ``metrics`` (optional) receives each fetch request
    (MinFetchRate), each fetcher thread's end and, per chunk, the partition's consumed offset
    and high watermark (ConsumerLag). ``library`` is the client library its fetcher threads use
    (:func:`~zkconsumer.broker.clients.fetch_library`), fixed when it is made.

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
        self.counters = _Stats()
        # Decided now, not in a fetcher thread: fetch.backend=confluent given where
        # confluent-kafka cannot be imported fails here. The lookups use it too.
        self.library = fetch_library(config)
        self.offset_client = _OffsetClient(config, consumer_id, self._bootstrap, self.library)
        # The held partitions' log ends (a metric), apart: such a lookup is a fetch the
        # broker may hold at the log end, and the fetcher threads' own lookups never wait on it.
        self.held_offset_client = _OffsetClient(config, consumer_id, self._bootstrap,
                                                self.library)
        self._metadata = _MetadataClient(config, consumer_id, self._bootstrap, self.library)

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
            "%s: fetching %s", self.consumer_id, fmt_tps(dict.fromkeys(i.tp for i in infos))
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
                 fmt_tps(dict.fromkeys(i.tp for i in infos)))

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
            log.info("%s: no longer fetching %s", self.consumer_id, fmt_tps(gone))

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
            except Exception:  # closing; nothing depends on it
                log.debug("%s: closing an idle fetch client failed", self.consumer_id,
                          exc_info=True)
        self.offset_client.close(max(0.1, deadline - time.monotonic()))
        self.held_offset_client.close(max(0.1, deadline - time.monotonic()))
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
        return self.counters.snapshot()

    def fetcher_threads(self) -> dict[tuple[int, int], str]:
        """(leader broker id, fetcher id) -> thread name, of the running fetcher threads."""
        with self._lock:
            return {k: t.name for k, t in self._fetchers.items()}

    def partitions_without_leader(self) -> set[TopicPartition]:
        with self._lock:
            return set(self._no_leader)

    # -- for the fetcher threads (FetcherHost, all they use) and the lookups (_bootstrap) -------
    def _bootstrap(self) -> list[str]:
        # ConnectionError, an OSError: retried by every caller, whichever the library.
        try:
            brokers = list(self._brokers())
        except Exception as e:  # e.g. ZooKeeper unreachable: retried later
            raise ConnectionError(f"cannot list the brokers: {e!r}") from e
        if not brokers:
            raise ConnectionError("no broker is registered in ZooKeeper")
        return brokers

    def keep_backend(self, backend: FetchBackend) -> bool:
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

    def make_backend(self) -> FetchBackend:
        with self._lock:
            if self._idle_backends:
                return self._idle_backends.pop()
        if self.library == "confluent":
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
                    fmt_tps(dict.fromkeys(i.tp for i in infos)),
                )

    def _shutdown_idle_fetchers(self) -> None:
        with self._lock:
            for key, thread in list(self._fetchers.items()):
                if thread.idle():
                    thread.begin_stop()
                    del self._fetchers[key]
                    self._retired.append(thread)

    def leader_lost(
        self, thread: _FetcherThread, infos: Mapping[TopicPartition, PartitionTopicInfo]
    ) -> None:
        """These partitions of ``thread`` lost their leader: back to the leader finder."""
        with self._lock:
            if self._fetchers.get((thread.broker_id, thread.fetcher_id)) is not thread:
                return  # stopped meanwhile
            for tp, info in infos.items():
                if self._partition_map.get(tp) is info:
                    self._no_leader.add(tp)
            self._cond.notify_all()

    def start_helper(self, helper: threading.Thread) -> bool:
        """Start ``helper`` among the threads :meth:`shutdown` joins; False once shut down."""
        with self._lock:
            if self._closed:
                return False
            self._retired = [t for t in self._retired if t.is_alive()]
            helper.start()  # under the lock: alive before another call prunes the list
            self._retired.append(helper)
            return True

    def thread_failed(self, thread: threading.Thread, error: BaseException) -> None:
        stopping = getattr(thread, "stopping", False)
        if stopping or self._closed:
            log.debug("%s failed while stopping: %r", thread.name, error)
            return
        log.error("%s died", thread.name, exc_info=error)
        with self._error_lock:
            if self._error is None:
                self._error = error


__all__ = [
    "ConfluentBackend",
    "FetchBackend",
    "FetchMetrics",
    "FetchStats",
    "FetcherManager",
    "KafkaPythonBackend",
    "fetcher_id",
]
