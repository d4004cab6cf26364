"""Consumer metrics: the legacy names, one registry per connector, served for Prometheus.

The legacy consumer reported these through Yammer metrics / JMX; :class:`ConsumerMetrics`
keeps the same names and meanings, one object per connector (labelled with its
``client.id``), and can serve them over HTTP for Prometheus on a dedicated
:class:`prometheus_client.CollectorRegistry` (never the process-global one), so several
connectors in one process each have their own endpoint and never collide.

Legacy name -> Prometheus metric (every one also has the labels ``client_id`` and
``consumer_id``: the members of a group share their ``client.id``, the group id by default;
the consumer id tells them apart):

==========================  ===================================================  =========
legacy (JMX)                Prometheus                                           type
==========================  ===================================================  =========
MessagesPerSec              ``zkconsumer_messages_per_sec_total{topic}``         counter
BytesPerSec                 ``zkconsumer_bytes_per_sec_total{topic}``            counter
KafkaCommitsPerSec          ``zkconsumer_kafka_commits_per_sec_total``           counter
ZooKeeperCommitsPerSec      ``zkconsumer_zookeeper_commits_per_sec_total``       counter
RebalanceRateAndTime        ``zkconsumer_rebalance_rate_and_time_seconds``       histogram
OwnedPartitionsCount        ``zkconsumer_owned_partitions_count{topic}``         gauge
FetchQueueSize              ``zkconsumer_fetch_queue_size{topic,thread_id}``     gauge
ConsumerLag                 ``zkconsumer_consumer_lag{topic,partition}``         gauge
MaxLag                      ``zkconsumer_max_lag``                               gauge
MinFetchRate                ``zkconsumer_min_fetch_rate``                        gauge
==========================  ===================================================  =========

MessagesPerSec and BytesPerSec count the messages handed to the application, as the legacy
iterator's message meter did (the legacy byte meter counted the bytes of each chunk fetched, as
it was queued: here bytes are the key and value bytes of the messages handed out, so the two
agree), per chunk rather than per message so the iterator's per-message path stays free: each
stream adds what it handed out of a chunk as it leaves it (used up, dropped by a rebalance or
shutdown) and, for the chunk it is in, at each :meth:`~ConsumerMetrics.snapshot` or scrape
(:meth:`ConsumerMetrics.watch_stream`). A message fetched and never handed out (a chunk dropped
by a rebalance, then fetched again) is never counted.

FetchQueueSize has a series per stream: for a static subscription, its topic and thread id;
for a wildcard one (:meth:`ConsumerMetrics.watch_wildcard_queue`), as in the legacy consumer,
one per topic the filter matched at the last rebalance (the subscribed topics), all reading
the same queue, never the regex.

:meth:`ConsumerMetrics.serve` binds ``metrics.address`` (``127.0.0.1`` unless set); each
connection may stay idle :data:`CLIENT_TIMEOUT_S` at most, and :meth:`ConsumerMetrics.close`
cuts those still open.

The legacy "PerSec" meters become counters: Prometheus computes the rate
(``rate(zkconsumer_messages_per_sec_total[1m])``), which is what a meter's one-minute rate
was; the legacy ``AllTopics`` aggregate is ``sum without (topic)``, so it is not exported
twice. RebalanceRateAndTime (a timer: rate and duration) is a histogram: ``_count`` gives
the rate, ``_sum``/``_bucket`` the durations. The commit counters count partition offsets
written, as the legacy meters did. MinFetchRate is the lowest fetch-request rate (requests
per second over the last :data:`FETCH_RATE_WINDOW_S`) among the live fetcher threads, 0
while there is none.

OwnedPartitionsCount has a series for every topic the connector subscribes to
(:meth:`ConsumerMetrics.set_subscribed_topics`), 0 while it owns none of its partitions, so a
dashboard shows 0 rather than no data. For a wildcard subscription those are the existing
topics the filter matched at the last rebalance, never the regex. (The legacy gauge had a
series only for topics with an owned partition; ``sum without (topic)`` gives its all-topics
value.) After :meth:`ConsumerMetrics.close` (the connector shut down) none is left at 0.

ConsumerLag is the owned partition's log end (the last fetch's high watermark) minus its
consumed offset as it is when read (so it falls as the application catches up), the same
:func:`zkconsumer._types.partition_lag` that ``zkconsumer groups describe`` applies to the
committed offset, so the two agree once the consumed offset is committed.
MaxLag is the largest ConsumerLag.

Only the standard library and prometheus-client are needed; :meth:`snapshot` gives the
same values as plain data (for tests and for applications without Prometheus).
"""

from __future__ import annotations

import logging
import socket
import socketserver
import threading
import time
import weakref
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Literal, Protocol
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from prometheus_client import CollectorRegistry, generate_latest, make_wsgi_app
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from zkconsumer._errors import MetricsPortError
from zkconsumer._types import partition_lag
from zkconsumer.zk import paths as zp

log = logging.getLogger(__name__)

__all__ = [
    "CLIENT_TIMEOUT_S",
    "FETCH_RATE_WINDOW_S",
    "LEGACY_NAMES",
    "REBALANCE_BUCKETS",
    "ConsumerMetrics",
]

#: Seconds of fetch requests MinFetchRate averages over (the legacy meter's one minute).
FETCH_RATE_WINDOW_S = 60.0

#: Seconds a connection to the metrics endpoint may stay silent before it is closed.
CLIENT_TIMEOUT_S = 5.0
#: Seconds a connection to the metrics endpoint may last at all (a client sending a byte now
#: and then is never silent for CLIENT_TIMEOUT_S).
CLIENT_DEADLINE_S = 30.0
#: Connections served at once; one more is closed at once (a scraper tries again).
MAX_CLIENTS = 16

#: Upper bounds (seconds) of the rebalance duration histogram's buckets.
REBALANCE_BUCKETS: tuple[float, ...] = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

#: Legacy metric name -> Prometheus metric name (counters without their ``_total``).
LEGACY_NAMES: dict[str, str] = {
    "MessagesPerSec": "zkconsumer_messages_per_sec",
    "BytesPerSec": "zkconsumer_bytes_per_sec",
    "KafkaCommitsPerSec": "zkconsumer_kafka_commits_per_sec",
    "ZooKeeperCommitsPerSec": "zkconsumer_zookeeper_commits_per_sec",
    "RebalanceRateAndTime": "zkconsumer_rebalance_rate_and_time_seconds",
    "OwnedPartitionsCount": "zkconsumer_owned_partitions_count",
    "FetchQueueSize": "zkconsumer_fetch_queue_size",
    "ConsumerLag": "zkconsumer_consumer_lag",
    "MaxLag": "zkconsumer_max_lag",
    "MinFetchRate": "zkconsumer_min_fetch_rate",
}

CommitKind = Literal["kafka", "zookeeper"]


class _Sized(Protocol):
    def qsize(self) -> int: ...


class _Position(Protocol):
    """What holds a partition's consumed offset (a ``PartitionTopicInfo``)."""

    @property
    def consumed_offset(self) -> int | None: ...


class _Counted(Protocol):
    """A stream's slow path (``_Chunks``): adds the messages it handed out to the meters."""

    def flush_metrics(self) -> None: ...


class _Fixed:
    """A consumed offset given as a value."""

    __slots__ = ("consumed_offset",)

    def __init__(self, consumed_offset: int | None) -> None:
        self.consumed_offset = consumed_offset


class ConsumerMetrics:
    """The metrics of one connector; every method is thread-safe and cheap.

    ``_lock`` guards every counter, gauge and dict below (message and byte counts, commit
    counts, rebalance durations, owned partitions and subscribed topics, lags, queue sizes
    and watched queues and streams, fetch request times) and ``_server``. Streams are
    flushed (:meth:`watch_stream`) before it is taken, never with it held. Queue sizes of
    watched queues are read at scrape time, outside the lock (``qsize`` takes the queue's own
    lock).
    """

    def __init__(self, client_id: str, *, consumer_id: str | None = None,
                 clock: Any = time.monotonic) -> None:
        self.client_id = client_id
        # The consumer id label: given, or learned from the first thread id this object is
        # told of (a stream's queue or an owned partition: ``<consumer id>-<n>``); "" before.
        self._consumer_id = consumer_id
        self._clock = clock
        self._lock = threading.Lock()
        self._messages: dict[str, int] = {}
        self._bytes: dict[str, int] = {}
        self._commits: dict[str, int] = {"kafka": 0, "zookeeper": 0}
        self._rebalance_count = 0
        self._rebalance_sum = 0.0
        self._rebalance_last = 0.0
        self._rebalance_buckets = [0] * (len(REBALANCE_BUCKETS) + 1)  # last: +Inf
        self._owned: dict[str, int] = {}
        self._owned_total_only = False  # set_owned_partitions was given a count, no topics
        # Topics subscribed to (set_subscribed_topics): each has an OwnedPartitionsCount
        # value, 0 while none of its partitions is owned.
        self._subscribed: frozenset[str] = frozenset()
        # (topic, partition) -> (what has the consumed offset, the log end last fetched):
        # the lag is worked out when read, so it falls as the application consumes.
        self._lag: dict[tuple[str, int], tuple[_Position, int]] = {}
        self._queue_sizes: dict[tuple[str, str], int] = {}
        self._queues: dict[tuple[str, str], _Sized] = {}
        # thread id -> queue of a wildcard stream: a series per subscribed topic.
        self._wildcard_queues: dict[str, _Sized] = {}
        # Streams whose current chunk's messages handed out are added at each read.
        self._streams: weakref.WeakSet[_Counted] = weakref.WeakSet()
        self._fetches: dict[str, deque[float]] = {}
        self._fetch_started: dict[str, float] = {}
        self._server: Any = None
        self._bytes_read = False  # snapshot() was called: BytesPerSec is wanted
        self._server_thread: threading.Thread | None = None
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_Collector(self))

    # -- recording (called by the connector, the fetchers and the streams) -----------------
    def record_messages(self, topic: str, n: int, nbytes: int) -> None:
        """``n`` more messages of ``topic``, ``nbytes`` (key + value) in all, were handed to
        the application (streams call this per chunk: see the module docstring)."""
        with self._lock:
            self._messages[topic] = self._messages.get(topic, 0) + n
            self._bytes[topic] = self._bytes.get(topic, 0) + nbytes

    def record_commit(self, kind: CommitKind, n: int = 1) -> None:
        """``n`` partition offsets were committed to ``kind`` (``kafka`` or ``zookeeper``)."""
        if kind not in self._commits:
            raise ValueError(f"commit kind must be 'kafka' or 'zookeeper', got {kind!r}")
        with self._lock:
            self._commits[kind] += n

    def record_rebalance(self, seconds: float) -> None:
        """One rebalance finished after ``seconds``."""
        with self._lock:
            self._rebalance_count += 1
            self._rebalance_sum += seconds
            self._rebalance_last = seconds
            for i, bound in enumerate(REBALANCE_BUCKETS):
                if seconds <= bound:
                    self._rebalance_buckets[i] += 1
                    break
            else:
                self._rebalance_buckets[-1] += 1

    def set_owned_partitions(self, owned: int | Iterable[tuple[str, int]]) -> None:
        """What this connector owns now: topic-partitions (or just a count, topic ``""``).

        Given the partitions, the lags of partitions no longer owned are dropped. A subscribed
        topic (:meth:`set_subscribed_topics`) with no partition here reads 0; given a count,
        there are no per-topic values, so none reads 0.
        """
        with self._lock:
            if isinstance(owned, int):
                self._owned = {"": owned}
                self._owned_total_only = True
                return
            self._owned_total_only = False
            if isinstance(owned, Mapping):  # partition -> owning thread id
                for thread_id in owned.values():
                    self._learn_consumer_id(thread_id)
                    break
            counts: dict[str, int] = {}
            keep: set[tuple[str, int]] = set()
            for topic, partition in owned:
                counts[topic] = counts.get(topic, 0) + 1
                keep.add((topic, partition))
            self._owned = counts
            self._lag = {k: v for k, v in self._lag.items() if k in keep}

    def set_subscribed_topics(self, topics: Iterable[str]) -> None:
        """The topics this connector subscribes to now (replacing those given before).

        Each has an OwnedPartitionsCount value, 0 while no partition of it is owned (see the
        module docstring for which topics a connector gives: a static subscription's, or the
        existing topics a wildcard filter matched at the last rebalance).
        """
        names = frozenset(topics)
        with self._lock:
            self._subscribed = names

    def _owned_counts(self) -> dict[str, int]:
        # Called with _lock held: topic -> partitions owned, subscribed topics included (0).
        if self._owned_total_only:
            return dict(self._owned)
        counts = dict.fromkeys(self._subscribed, 0)
        counts.update(self._owned)
        return dict(sorted(counts.items()))

    @property
    def consumer_id(self) -> str:
        """The ``consumer_id`` label: the member's consumer id, "" while unknown."""
        with self._lock:
            return self._consumer_id or ""

    def _learn_consumer_id(self, thread_id: object) -> None:
        # Called with _lock held.
        if self._consumer_id is None and isinstance(thread_id, str):
            try:
                self._consumer_id = zp.thread_consumer_id(thread_id)
            except ValueError:
                pass

    def set_queue_size(self, topic: str, thread_id: str, size: int) -> None:
        """The number of chunks queued for the stream of ``thread_id`` (FetchQueueSize)."""
        with self._lock:
            self._learn_consumer_id(thread_id)
            self._queue_sizes[(topic, thread_id)] = size

    def watch_queue(self, topic: str, thread_id: str, chunk_queue: _Sized) -> None:
        """Report ``chunk_queue.qsize()`` as FetchQueueSize at each scrape (no calls needed)."""
        with self._lock:
            self._learn_consumer_id(thread_id)
            self._queues[(topic, thread_id)] = chunk_queue

    def watch_wildcard_queue(self, thread_id: str, chunk_queue: _Sized) -> None:
        """Like :meth:`watch_queue` for a wildcard stream's queue: one series per subscribed
        topic (:meth:`set_subscribed_topics`: those the filter matched at the last rebalance),
        each reading ``chunk_queue``, as the legacy consumer registered them."""
        with self._lock:
            self._learn_consumer_id(thread_id)
            self._wildcard_queues[thread_id] = chunk_queue

    def watch_stream(self, stream: _Counted) -> None:
        """Call ``stream.flush_metrics()`` before each read (:meth:`snapshot`, a scrape), so
        the messages handed out of the chunk it is in are counted too (held weakly)."""
        with self._lock:
            self._streams.add(stream)

    def _flush_streams(self) -> None:
        with self._lock:
            streams = list(self._streams)
        for stream in streams:  # outside _lock: they call record_messages
            stream.flush_metrics()

    def _watched_queues(self) -> dict[tuple[str, str], _Sized]:
        # Called with _lock held: (topic, thread id) -> queue, wildcard ones per topic.
        watched = dict(self._queues)
        for thread_id, q in self._wildcard_queues.items():
            for topic in self._subscribed:
                watched[(topic, thread_id)] = q
        return watched

    def update_lag(
        self, topic: str, partition: int, offset: int | None | _Position,
        log_end_offset: int | None,
    ) -> None:
        """ConsumerLag from the consumed offset and the log end (the fetch high watermark),
        computed by :func:`~zkconsumer._types.partition_lag` like ``groups describe``.

        ``offset`` may be what holds the consumed offset (a ``PartitionTopicInfo``): its
        ``consumed_offset`` is then read at each scrape, so the lag falls to 0 as the
        application catches up, with no new fetch needed. An unknown log end drops the gauge.
        """
        with self._lock:
            if log_end_offset is None:
                self._lag.pop((topic, partition), None)
            else:
                position = _Fixed(offset) if offset is None or isinstance(offset, int) \
                    else offset
                self._lag[(topic, partition)] = (position, log_end_offset)

    def lags_missing(self, tps: Iterable[tuple[str, int]]) -> list[Any]:
        """Those of ``tps`` (topic-partition pairs, returned as given) with no ConsumerLag
        yet: a fetcher gives them their first from a fetch answer's log end."""
        with self._lock:
            return [tp for tp in tps if (tp[0], tp[1]) not in self._lag]

    def _lags(self) -> dict[tuple[str, int], int]:
        # Called with _lock held: the known lags now.
        out = {}
        for key, (position, log_end) in self._lag.items():
            lag = partition_lag(position.consumed_offset, log_end)
            if lag is not None:
                out[key] = lag
        return out

    def forget_partitions(self, tps: Iterable[tuple[str, int]]) -> None:
        """Drop the lag gauges of partitions released by a rebalance."""
        with self._lock:
            for tp in tps:
                self._lag.pop((tp[0], tp[1]), None)

    def record_fetch_request(self, fetcher_id: str) -> None:
        """A fetcher thread sent one fetch request (for MinFetchRate)."""
        now = self._clock()
        with self._lock:
            times = self._fetches.get(fetcher_id)
            if times is None:
                times = self._fetches[fetcher_id] = deque()
                self._fetch_started[fetcher_id] = now
            times.append(now)
            self._trim(times, now)

    def remove_fetcher(self, fetcher_id: str) -> None:
        """A fetcher thread stopped: it no longer counts for MinFetchRate."""
        with self._lock:
            self._fetches.pop(fetcher_id, None)
            self._fetch_started.pop(fetcher_id, None)

    # -- reading ---------------------------------------------------------------------------
    @staticmethod
    def _trim(times: deque[float], now: float) -> None:
        while times and times[0] < now - FETCH_RATE_WINDOW_S:
            times.popleft()

    def _min_fetch_rate(self) -> float:
        # Called with _lock held. A thread younger than the window is averaged over its age
        # (at least one second, so a first request does not read as a huge rate).
        now = self._clock()
        rates = []
        for fetcher_id, times in self._fetches.items():
            self._trim(times, now)
            age = now - self._fetch_started[fetcher_id]
            span = min(FETCH_RATE_WINDOW_S, max(age, 1.0))
            rates.append(len(times) / span)
        return min(rates) if rates else 0.0

    def _queue_snapshot(self, watched: Mapping[tuple[str, str], _Sized]) -> dict[
        tuple[str, str], int
    ]:
        sizes = dict(self._queue_sizes)
        for key, q in watched.items():
            sizes[key] = q.qsize()
        return sizes

    def snapshot(self) -> dict[str, Any]:
        """Every metric under its legacy name, as plain data.

        ``MessagesPerSec``/``BytesPerSec`` are totals per topic, ``AllTopicsMessagesPerSec``
        / ``AllTopicsBytesPerSec`` (the legacy all-topics names) their sums;
        the commit entries are totals; ``RebalanceRateAndTime`` is ``{"count", "total_s",
        "last_s"}``; ``OwnedPartitionsCount`` maps ``topic -> partitions owned``, with 0 for
        each subscribed topic owning none, as served; ``ConsumerLag`` maps
        ``topic -> {partition: lag}``; ``FetchQueueSize`` maps
        ``topic -> {thread_id: chunks}``. Bytes are counted from the first call on (or since
        the metrics were served).
        """
        self._bytes_read = True
        self._flush_streams()
        with self._lock:
            watched = self._watched_queues()
            lags = self._lags()
            lag: dict[str, dict[int, int]] = {}
            for (topic, partition), value in sorted(lags.items()):
                lag.setdefault(topic, {})[partition] = value
            out: dict[str, Any] = {
                "client_id": self.client_id,
                "consumer_id": self._consumer_id or "",
                "MessagesPerSec": dict(self._messages),
                "AllTopicsMessagesPerSec": sum(self._messages.values()),
                "BytesPerSec": dict(self._bytes),
                "AllTopicsBytesPerSec": sum(self._bytes.values()),
                "KafkaCommitsPerSec": self._commits["kafka"],
                "ZooKeeperCommitsPerSec": self._commits["zookeeper"],
                "RebalanceRateAndTime": {
                    "count": self._rebalance_count,
                    "total_s": self._rebalance_sum,
                    "last_s": self._rebalance_last,
                },
                "OwnedPartitionsCount": self._owned_counts(),
                "ConsumerLag": lag,
                "MaxLag": max(lags.values(), default=0),
                "MinFetchRate": self._min_fetch_rate(),
            }
        queues: dict[str, dict[str, int]] = {}
        for (topic, thread), size in sorted(self._queue_snapshot(watched).items()):
            queues.setdefault(topic, {})[thread] = size
        out["FetchQueueSize"] = queues
        return out

    def collect(self) -> Iterator[Metric]:
        """The Prometheus metric families (see the module docstring for the names)."""
        cid, mid = self.client_id, self.consumer_id
        self._flush_streams()
        with self._lock:
            messages = dict(self._messages)
            nbytes = dict(self._bytes)
            commits = dict(self._commits)
            reb_count, reb_sum = self._rebalance_count, self._rebalance_sum
            reb_buckets = list(self._rebalance_buckets)
            owned = self._owned_counts()
            lags = self._lags()
            min_rate = self._min_fetch_rate()
            watched = self._watched_queues()
            queue_sizes = self._queue_snapshot({})
        queue_sizes.update({k: q.qsize() for k, q in watched.items()})

        ids = [cid, mid]

        def family(cls: type[CounterMetricFamily | GaugeMetricFamily], legacy: str, doc: str,
                   labels: list[str], rows: Iterable[tuple[list[str], float]]) -> Metric:
            """A family of the legacy metric's name, one series per row (its labels after
            client_id and consumer_id)."""
            m = cls(LEGACY_NAMES[legacy], f"{doc} (legacy {legacy})",
                    labels=["client_id", "consumer_id", *labels])
            for values, n in rows:
                m.add_metric([*ids, *values], n)
            return m

        yield family(CounterMetricFamily, "MessagesPerSec", "Messages handed to the "
                     "application", ["topic"], (([t], n) for t, n in sorted(messages.items())))
        yield family(CounterMetricFamily, "BytesPerSec", "Bytes handed to the application, "
                     "key + value", ["topic"], (([t], n) for t, n in sorted(nbytes.items())))
        for kind, legacy in (("kafka", "KafkaCommitsPerSec"),
                             ("zookeeper", "ZooKeeperCommitsPerSec")):
            yield family(CounterMetricFamily, legacy, f"Partition offsets committed to {kind}",
                         [], [([], commits[kind])])
        yield self._rebalance_histogram(ids, reb_count, reb_sum, reb_buckets)
        yield family(GaugeMetricFamily, "OwnedPartitionsCount", "Partitions owned", ["topic"],
                     (([t], n) for t, n in sorted(owned.items())))
        yield family(GaugeMetricFamily, "FetchQueueSize", "Chunks queued per stream",
                     ["topic", "thread_id"],
                     (([t, th], n) for (t, th), n in sorted(queue_sizes.items())))
        yield family(GaugeMetricFamily, "ConsumerLag", "Log end minus consumed offset",
                     ["topic", "partition"],
                     (([t, str(p)], lag) for (t, p), lag in sorted(lags.items())))
        yield family(GaugeMetricFamily, "MaxLag", "Largest ConsumerLag", [],
                     [([], max(lags.values(), default=0))])
        yield family(GaugeMetricFamily, "MinFetchRate", "Lowest fetch request rate of the "
                     "fetcher threads, per second", [], [([], min_rate)])

    @staticmethod
    def _rebalance_histogram(ids: list[str], count: int, total: float,
                             counts: list[int]) -> Metric:
        h = HistogramMetricFamily(LEGACY_NAMES["RebalanceRateAndTime"],
                                  "Rebalances and their duration (legacy RebalanceRateAndTime)",
                                  labels=["client_id", "consumer_id"])
        cumulative, buckets = 0, []
        for bound, n in zip([*map(str, REBALANCE_BUCKETS), "+Inf"], counts, strict=True):
            cumulative += n
            buckets.append((bound, float(cumulative)))
        h.add_metric(ids, buckets, total)
        assert cumulative == count
        return h

    def render(self) -> bytes:
        """The Prometheus text exposition of this registry (what the HTTP server answers)."""
        return bytes(generate_latest(self.registry))

    # -- serving ---------------------------------------------------------------------------
    def serve(self, port: int, addr: str = "127.0.0.1") -> int:
        """Serve ``/metrics`` on ``addr:port`` (0: any free port; ``addr`` the interface,
        ``0.0.0.0`` for all IPv4 ones, ``::`` for all, IPv4 too where the system maps them)
        in a daemon thread, one short-lived thread per connection: at most
        :data:`MAX_CLIENTS` at once, each closed after :data:`CLIENT_TIMEOUT_S` of silence
        or :data:`CLIENT_DEADLINE_S` in all.

        Returns the bound port. Raises OSError when the port is taken, and RuntimeError
        when this object already serves.
        """
        with self._lock:
            if self._server is not None:
                raise RuntimeError(f"metrics of {self.client_id} already served")
            try:
                family = socket.getaddrinfo(addr, port, type=socket.SOCK_STREAM,
                                            flags=socket.AI_PASSIVE)[0][0]
                server_class = type("_Server", (MetricsServer,), {"address_family": family})
                handler = type("_Handler", (QuietHandler,), {"timeout": CLIENT_TIMEOUT_S})
                server = server_class((addr, port), handler)
            except OSError as e:
                why = e.strerror or str(e)
                raise MetricsPortError(e.errno, why, (
                    f"cannot serve metrics on metrics.port={port} (metrics.address={addr}): "
                    f"{why}")) from e
            server.set_app(_metrics_path_only(make_wsgi_app(self.registry)))
            thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2},
                                      name=f"{self.client_id}-metrics", daemon=True)
            thread.start()
            self._server, self._server_thread = server, thread
            return int(server.server_address[1])

    @property
    def counts_bytes(self) -> bool:
        """Whether BytesPerSec is counted: once served, or once :meth:`snapshot` was called
        (it costs a pass over each chunk's keys and values, so only when someone reads it)."""
        return self._server is not None or self._bytes_read

    @property
    def port(self) -> int | None:
        """The port served on, or None."""
        with self._lock:
            return None if self._server is None else int(self._server.server_address[1])

    def close(self) -> None:
        """Stop serving (idempotent), cutting the connections still open; the recorded
        values stay readable.

        The connector closes its metrics when it shuts down, when it subscribes to nothing:
        the subscribed topics are forgotten, so none reads 0 owned partitions any more.
        """
        with self._lock:
            server, thread = self._server, self._server_thread
            self._server = self._server_thread = None
            self._subscribed = frozenset()
        if server is not None:
            server.shutdown()
            server.server_close()
        if thread is not None:
            thread.join(timeout=5)


#: The one path the endpoint answers (any other: 404), as Prometheus scrapes by default.
METRICS_PATH = "/metrics"


def _metrics_path_only(app: Any) -> Any:
    """``app`` on :data:`METRICS_PATH`; 404 on any other path (every path answered the
    metrics, so a typo in a scrape configuration went unnoticed)."""

    def only(environ: dict[str, Any], start_response: Any) -> Any:
        if environ.get("PATH_INFO", "") != METRICS_PATH:
            start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
            return [f"not found: the metrics are on {METRICS_PATH}\n".encode()]
        return app(environ, start_response)

    return only


class QuietHandler(WSGIRequestHandler):
    """A request handler that logs nothing and ends a connection silent for ``timeout``."""

    def handle(self) -> None:
        try:
            super().handle()
        except (TimeoutError, ConnectionError):
            self.close_connection = True  # idle or gone: the connection ends here

    def log_message(self, format: str, *args: Any) -> None:  # the base's name
        pass


class MetricsServer(socketserver.ThreadingMixIn, WSGIServer):
    """The wsgiref server, a daemon thread per connection, :data:`MAX_CLIENTS` at most, each
    cut after :data:`CLIENT_DEADLINE_S` (checked by the serving thread between requests);
    :meth:`server_close` neither waits for them nor leaves their connections open.
    ``_clients_lock`` guards ``_clients`` (open connection -> when accepted)."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._clients: dict[socket.socket, float] = {}
        self._clients_lock = threading.Lock()
        super().__init__(*args, **kwargs)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._clients_lock:
            full = len(self._clients) >= MAX_CLIENTS
            if not full:
                self._clients[request] = time.monotonic()
        if full:
            log.debug("metrics endpoint: %d connections open; refusing %s", MAX_CLIENTS,
                      client_address)
            super().shutdown_request(request)
            return
        super().process_request(request, client_address)

    def service_actions(self) -> None:
        too_old = time.monotonic() - CLIENT_DEADLINE_S
        with self._clients_lock:
            late = [c for c, since in self._clients.items() if since < too_old]
        _cut(late)

    def shutdown_request(self, request: Any) -> None:
        with self._clients_lock:
            self._clients.pop(request, None)
        super().shutdown_request(request)

    def server_close(self) -> None:
        super().server_close()
        with self._clients_lock:
            clients = list(self._clients)
        _cut(clients)


def _cut(clients: Iterable[socket.socket]) -> None:
    """End these connections: their threads see the end of the stream and finish."""
    for client in clients:
        try:
            client.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class _Collector(Collector):
    """Adapts :meth:`ConsumerMetrics.collect` to the registry's collector protocol."""

    def __init__(self, metrics: ConsumerMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterable[Metric]:
        return self._metrics.collect()
