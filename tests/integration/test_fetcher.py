"""FetcherManager against the real stack: fetching, offset resolution, resets, stopping, memory.

Partitions are handed to the manager as the connector does it, as hand-made
PartitionTopicInfos over ChunkQueues; every test runs on both fetch backends.
"""

from __future__ import annotations

import gc
import logging
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from kazoo.client import KazooClient

from tests.support import StackInfo, produce, produce_with_bad_crc, wait_until
from zkconsumer._config import ConsumerConfig
from zkconsumer._errors import (
    BackgroundThreadError,
    ConfigError,
    ConsumerShutdownError,
    ConsumerTimeoutException,
)
from zkconsumer._types import TopicPartition
from zkconsumer.broker import clients
from zkconsumer.broker.clients import log_end_offsets
from zkconsumer.consumer.fetcher import FetcherManager, fetcher_id
from zkconsumer.consumer.partition import INVALID_OFFSET, ChunkQueue, PartitionTopicInfo
from zkconsumer.consumer.stream import KafkaStream, MessageAndMetadata
from zkconsumer.zk import paths as zp

BACKENDS = ["kafka-python", "confluent"]

MakeManager = Callable[..., FetcherManager]


@pytest.fixture
def make_manager(stack: StackInfo, names: Any) -> Iterator[MakeManager]:
    """``make_manager(backend, **props)``: a FetcherManager shut down after the test."""
    made: list[FetcherManager] = []

    def make(backend: str | None, **props: object) -> FetcherManager:
        """``backend`` None: fetch.backend not given (its default)."""
        config = ConsumerConfig({
            "zookeeper.connect": stack.zookeeper,
            "group.id": names.group,
            **({} if backend is None else {"fetch.backend": backend}),
            "refresh.leader.backoff.ms": 100,
            **{k.replace("_", "."): v for k, v in props.items()},
        })
        m = FetcherManager(config, f"{names.group}_test-{len(made)}", lambda: [stack.bootstrap])
        made.append(m)
        return m

    yield make
    for m in made:
        m.shutdown()
        assert m.error is None, m.error


def _info(q: ChunkQueue, topic: str, partition: int, offset: int) -> PartitionTopicInfo:
    return PartitionTopicInfo(topic, partition, q, offset, offset, 1 << 20, "client", "c-0")


def _take(stream: KafkaStream[Any, Any], n: int) -> list[MessageAndMetadata[Any, Any]]:
    it = iter(stream)
    return [next(it) for _ in range(n)]


def _assert_no_more(q: ChunkQueue) -> None:
    """Nothing more arrives on this queue (within 300 ms)."""
    with pytest.raises(ConsumerTimeoutException):
        next(iter(KafkaStream(q, 300)))


def _values(n: int, partitions: int) -> list[tuple[int, bytes, bytes]]:
    return [(i % partitions, f"k{i}".encode(), f"v{i}".encode()) for i in range(n)]


def test_fetcher_id_is_kafkas() -> None:
    # Utils.abs(31 * topic.hashCode() + partition) % numFetchers, in Java ints.
    assert fetcher_id("t", 0, 3) == (31 * 116) % 3 == 2
    assert fetcher_id("t", 1, 3) == (31 * 116 + 1) % 3 == 0
    assert fetcher_id("t", 5, 1) == 0
    # "polygenelubricants".hashCode() is Integer.MIN_VALUE; 31 * MIN_VALUE overflows to itself.
    assert fetcher_id("polygenelubricants", 0, 7) == 0  # Utils.abs(MIN_VALUE) == 0
    assert fetcher_id("polygenelubricants", 1, 10) == (2**31 - 1) % 10 == 7


@pytest.mark.parametrize("importable", [True, False], ids=["confluent", "no-confluent"])
def test_the_default_backend_fetches(
    importable: bool, stack: StackInfo, names: Any, topic_factory: Any,
    make_manager: MakeManager, monkeypatch: pytest.MonkeyPatch, caplog: Any,
) -> None:
    """fetch.backend not given: confluent-kafka fetches; where it cannot be imported,
    kafka-python does, and one INFO line says so."""
    caplog.set_level(logging.INFO, logger="zkconsumer")
    if not importable:
        monkeypatch.setitem(sys.modules, "confluent_kafka", None)  # its import fails
        monkeypatch.setattr(clients, "_CONFLUENT_MISSING", [])
        monkeypatch.setattr(clients, "_FALLBACK_LOGGED", threading.Event())
    made: list[str] = []
    real = FetcherManager.make_backend

    def recorded(self: FetcherManager) -> Any:
        backend = real(self)
        made.append(type(backend).__name__)
        return backend

    monkeypatch.setattr(FetcherManager, "make_backend", recorded)
    topic = topic_factory(names.topic, 1)
    produce(stack.bootstrap, topic, _values(50, 1))
    m = make_manager(None)
    q = ChunkQueue(2)
    m.start_connections([_info(q, topic, 0, 0)])
    got = _take(KafkaStream(q, 20_000), 50)
    assert [x.message for x in got] == [f"v{i}".encode() for i in range(50)]
    library = "confluent" if importable else "kafka-python"
    assert m.library == library
    assert set(made) == {"ConfluentBackend" if importable else "KafkaPythonBackend"}
    fallback = [r.getMessage() for r in caplog.records
                if "confluent-kafka cannot be imported" in r.getMessage()]
    assert len(fallback) == (0 if importable else 1), fallback


@pytest.mark.parametrize("backend", BACKENDS)
def test_fetches_every_message_once_in_order(
    backend: str, stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
    make_manager: MakeManager,
) -> None:
    topic = topic_factory(names.topic, 3)
    produce(stack.bootstrap, topic, _values(300, 3))
    m = make_manager(backend, num_consumer_fetchers=2)
    q0, q1 = ChunkQueue(2), ChunkQueue(2)
    infos = [_info(q0, topic, 0, 0), _info(q1, topic, 1, 0), _info(q1, topic, 2, 40)]
    s0: KafkaStream[bytes, bytes] = KafkaStream(q0, 20_000)
    s1: KafkaStream[bytes, bytes] = KafkaStream(q1, 20_000)
    m.start_connections(infos)

    got0 = _take(s0, 100)
    got1 = _take(s1, 160)
    assert [(x.partition, x.offset, x.key, x.message) for x in got0] == [
        (0, o, f"k{3 * o}".encode(), f"v{3 * o}".encode()) for o in range(100)
    ]
    by_partition = {p: [(x.offset, x.message) for x in got1 if x.partition == p] for p in (1, 2)}
    assert by_partition[1] == [(o, f"v{3 * o + 1}".encode()) for o in range(100)]
    assert by_partition[2] == [(o, f"v{3 * o + 2}".encode()) for o in range(40, 100)]
    assert all(x.topic == topic and x.timestamp > 0 and x.timestamp_type == 0 for x in got1)
    m.stop_connections()
    _assert_no_more(q0)
    _assert_no_more(q1)
    assert [(i.fetched_offset, i.consumed_offset) for i in infos] == [(100, 100)] * 3

    # Threads are named after the consumer id; fetchers are keyed (leader broker, fetcher id).
    m.start_connections(infos)
    produce(stack.bootstrap, topic, [(2, b"late", b"late")])
    assert [(x.partition, x.offset, x.message) for x in _take(s1, 1)] == [(2, 100, b"late")]
    broker = int(zk.get_children(zp.BROKER_IDS)[0])
    expected = {(broker, fetcher_id(topic, p, 2)) for p in range(3)}
    wait_until(lambda: set(m.fetcher_threads()) == expected, 10, "fetcher threads")
    cid = m.consumer_id
    assert set(m.fetcher_threads().values()) == {
        f"ConsumerFetcherThread-{cid}-{fid}-{b}" for b, fid in expected
    }
    names_now = {t.name for t in threading.enumerate()}
    assert f"{cid}-leader-finder-thread" in names_now
    assert set(m.fetcher_threads().values()) <= names_now
    assert m.stats().records == 261


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_committed_offset_starts_at_the_log_start_with_smallest(
    backend: str, stack: StackInfo, names: Any, topic_factory: Any, make_manager: MakeManager,
) -> None:
    topic = topic_factory(names.topic, 1)
    produce(stack.bootstrap, topic, _values(20, 1))
    m = make_manager(backend, auto_offset_reset="smallest")
    q = ChunkQueue(2)
    info = _info(q, topic, 0, INVALID_OFFSET)
    m.start_connections([info])
    stream: KafkaStream[bytes, bytes] = KafkaStream(q, 20_000)
    assert [x.offset for x in _take(stream, 20)] == list(range(20))
    assert (info.fetched_offset, info.consumed_offset) == (20, 20)
    assert m.stats().offset_resets == 0  # a missing offset is not "out of range"


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_committed_offset_starts_at_the_true_log_end_with_largest(
    backend: str, stack: StackInfo, names: Any, topic_factory: Any, make_manager: MakeManager,
) -> None:
    topic = topic_factory(names.topic, 1)
    produce(stack.bootstrap, topic, _values(500, 1))  # several records per batch
    assert log_end_offsets([(topic, 0)], bootstrap_servers=stack.bootstrap) == {
        TopicPartition(topic, 0): 500
    }
    m = make_manager(backend, auto_offset_reset="largest")
    q = ChunkQueue(2)
    info = _info(q, topic, 0, INVALID_OFFSET)
    m.start_connections([info])
    wait_until(lambda: info.fetched_offset == 500, 20, "the offset resolved to the log end")
    assert info.consumed_offset == 500
    _assert_no_more(q)
    produce(stack.bootstrap, topic, [(0, b"k", b"first new")])
    stream: KafkaStream[bytes, bytes] = KafkaStream(q, 20_000)
    assert [(x.offset, x.message) for x in _take(stream, 1)] == [(500, b"first new")]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("start", "policy", "expected"),
    [
        (10_000, "smallest", 0),  # above the log end
        (10_000, "largest", 30),
        (-7, "smallest", 0),  # below the log start
        (-7, "largest", 30),
    ],
)
def test_out_of_range_resets_both_offsets_per_policy(
    backend: str, start: int, policy: str, expected: int, stack: StackInfo, names: Any,
    topic_factory: Any, make_manager: MakeManager, caplog: pytest.LogCaptureFixture,
) -> None:
    topic = topic_factory(names.topic, 1)
    produce(stack.bootstrap, topic, _values(30, 1))
    caplog.set_level(logging.WARNING, logger="zkconsumer.fetcher")
    m = make_manager(backend, auto_offset_reset=policy)
    q = ChunkQueue(2)
    info = _info(q, topic, 0, start)
    m.start_connections([info])
    wait_until(lambda: info.fetched_offset != start, 20, "the reset")
    if expected == 0:
        wait_until(lambda: info.fetched_offset == 30, 20, "fetched from the log start")
    else:
        assert info.fetched_offset == 30
    stream: KafkaStream[bytes, bytes] = KafkaStream(q, 20_000)
    if expected == 0:
        assert [x.offset for x in _take(stream, 30)] == list(range(30))
    produce(stack.bootstrap, topic, [(0, None, b"new")])
    assert [(x.offset, x.message) for x in _take(stream, 1)] == [(30, b"new")]
    assert (info.fetched_offset, info.consumed_offset) == (31, 31)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(
        f"offset {start} of {topic}:0 is out of range; reset to the {policy} offset {expected}"
        in w for w in warnings
    ), warnings
    assert m.stats().offset_resets == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_stop_connections_returns_promptly_while_a_queue_is_full(
    backend: str, stack: StackInfo, names: Any, topic_factory: Any, make_manager: MakeManager,
) -> None:
    topic = topic_factory(names.topic, 3)
    produce(stack.bootstrap, topic, _values(60, 3))
    m = make_manager(backend)
    q = ChunkQueue(1)
    infos = [_info(q, topic, p, 0) for p in range(3)]
    m.start_connections(infos)
    wait_until(lambda: m.stats().full_queue_waits >= 3, 20, "chunks held back by the full queue")
    start = time.monotonic()
    m.stop_connections()
    assert time.monotonic() - start < 1.0
    chunks = m.stats().chunks
    q.clear()  # what the connector does next
    cid = m.consumer_id
    wait_until(
        lambda: not any(cid in t.name for t in threading.enumerate()), 20,
        "every fetcher thread ended",
    )
    assert q.qsize() == 0  # nothing was enqueued after stop_connections returned
    assert m.stats().chunks == chunks


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_full_queue_stops_fetching(
    backend: str, stack: StackInfo, names: Any, topic_factory: Any, make_manager: MakeManager,
) -> None:
    """Memory bound: with queued.max.message.chunks=2 and nobody consuming, the fetcher
    holds at most one chunk per partition besides the queue, and does not fetch more."""
    topic = topic_factory(names.topic, 4)
    produce(stack.bootstrap, topic, _values(400, 4))
    m = make_manager(backend, queued_max_message_chunks=2)
    q = ChunkQueue(2)
    infos = [_info(q, topic, p, 0) for p in range(4)]

    def held() -> dict[TopicPartition, tuple[int, int]]:
        """Partition -> (first offset, records) of the chunk its fetcher holds back."""
        return {tp: (h.records[0].offset, len(h.records)) for t in list(m._fetchers.values())
                for tp, h in list(t._held.items())}

    m.start_connections(infos)
    wait_until(lambda: m.stats().full_queue_waits >= 2, 20, "a chunk held back")
    first = m.stats()
    assert q.qsize() == 2
    assert first.chunks == 2
    # Fetched offsets advance once a chunk is enqueued, not before.
    assert sum(i.fetched_offset for i in infos) == first.records
    # More for every partition: those whose chunk is queued fetch one more chunk and hold it;
    # those holding one fetch nothing more.
    produce(stack.bootstrap, topic, _values(400, 4))
    wait_until(lambda: len(held()) == 4, 20, "one chunk held back per partition")
    blocked = m.stats()
    assert blocked.chunks == 2 and q.qsize() == 2
    assert sum(i.fetched_offset for i in infos) == blocked.records
    in_hands = held()
    # Each held chunk starts where its partition's fetched offset is.
    assert {info.tp: info.fetched_offset for info in infos} == {
        tp: first for tp, (first, _) in in_hands.items()
    }
    # Still so half a second later: every partition paused, so no poll, no chunk, nothing
    # fetched meanwhile.
    wait_until(
        lambda: m.stats().full_queue_waits >= blocked.full_queue_waits + 4 * 5, 20, "waits"
    )
    later = m.stats()
    assert (later.polls, later.chunks, later.records) == (
        blocked.polls, blocked.chunks, blocked.records
    )
    assert held() == in_hands
    assert q.qsize() == 2
    # Take one chunk: exactly one more goes in, then the queue is full again.
    taken = q.get_nowait()
    wait_until(lambda: m.stats().chunks == 3, 20, "a held chunk enqueued")
    assert q.qsize() == 2
    mark = m.stats().full_queue_waits
    wait_until(lambda: m.stats().full_queue_waits >= mark + 5, 20, "waits")
    assert m.stats().chunks == 3
    # Drain everything: all 800 messages arrive, each once.
    stream: KafkaStream[bytes, bytes] = KafkaStream(q, 20_000)
    seen = [(taken.topic_info.partition, r.offset) for r in taken.records]
    seen += [(x.partition, x.offset) for x in _take(stream, 800 - len(seen))]
    assert sorted(seen) == sorted((p, o) for p in range(4) for o in range(200))
    _assert_no_more(q)
    assert held() == {}


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_partition_paused_by_a_full_queue_is_fetched_after_a_restart(
    backend: str, stack: StackInfo, names: Any, topic_factory: Any, make_manager: MakeManager,
) -> None:
    """Stopped while its chunk was held back (partition paused in the client), a partition is
    fetched again by the next start_connections, which reuses that client."""
    topic = topic_factory(names.topic, 1)
    produce(stack.bootstrap, topic, _values(10, 1))
    m = make_manager(backend)
    q = ChunkQueue(1)
    info = _info(q, topic, 0, 0)
    m.start_connections([info])
    wait_until(lambda: q.qsize() == 1, 20, "the first chunk")
    produce(stack.bootstrap, topic, _values(10, 1))
    wait_until(lambda: m.stats().full_queue_waits >= 1, 20, "the second chunk held back")
    m.stop_connections()
    q.clear()
    assert info.fetched_offset == 10
    m.start_connections([info])
    stream: KafkaStream[bytes, bytes] = KafkaStream(q, 20_000)
    assert [x.offset for x in _take(stream, 10)] == list(range(10, 20))


@pytest.mark.parametrize("backend", BACKENDS)
def test_partitions_wait_for_a_leader(
    backend: str, stack: StackInfo, names: Any, topic_factory: Any, make_manager: MakeManager,
) -> None:
    topic = names("later")
    m = make_manager(backend)
    q = ChunkQueue(2)
    info = _info(q, topic, 0, 0)
    m.start_connections([info])
    assert m.partitions_without_leader() == {TopicPartition(topic, 0)}
    assert m.fetcher_threads() == {}
    topic_factory(topic, 1)
    produce(stack.bootstrap, topic, [(0, b"k", b"hello")])
    stream: KafkaStream[bytes, bytes] = KafkaStream(q, 20_000)
    assert [(x.offset, x.message) for x in _take(stream, 1)] == [(0, b"hello")]
    assert m.partitions_without_leader() == set()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_partition_is_kept_while_its_offset_lookup_is_slow(
    backend: str, stack: StackInfo, names: Any, topic_factory: Any, make_manager: MakeManager,
) -> None:
    """While a fetcher thread looks up where a partition starts, it is not idle: the leader
    finder's sweep of idle fetchers must not stop it and lose the partition."""
    topic = topic_factory(names.topic, 1)
    produce(stack.bootstrap, topic, _values(20, 1))
    m = make_manager(backend, auto_offset_reset="smallest", refresh_leader_backoff_ms=20)
    entered, release = threading.Event(), threading.Event()
    resolve = m.offset_client.resolve

    def slow_resolve(tps: Any) -> dict[TopicPartition, int]:
        entered.set()
        release.wait(30)
        return resolve(tps)

    sweeps = [0]
    sweep = m._shutdown_idle_fetchers

    def counted_sweep() -> None:
        sweep()
        sweeps[0] += 1

    m.offset_client.resolve = slow_resolve  # type: ignore[method-assign]
    m._shutdown_idle_fetchers = counted_sweep  # type: ignore[method-assign]
    q = ChunkQueue(2)
    info = _info(q, topic, 0, INVALID_OFFSET)
    # A partition of a topic that does not exist keeps the leader finder looking (and
    # sweeping idle fetchers) every refresh.leader.backoff.ms.
    m.start_connections([info, _info(ChunkQueue(2), names("missing"), 0, 0)])
    try:
        wait_until(entered.is_set, 20, "the offset lookup under way")
        # Several sweeps of idle fetchers while the lookup is under way.
        mark = sweeps[0]
        wait_until(lambda: sweeps[0] >= mark + 3, 20, "idle sweeps during the lookup")
    finally:
        release.set()
    stream: KafkaStream[bytes, bytes] = KafkaStream(q, 20_000)
    assert [x.offset for x in _take(stream, 20)] == list(range(20))
    assert (info.fetched_offset, info.consumed_offset) == (20, 20)


def test_a_dead_fetcher_thread_is_reported_not_swallowed(
    stack: StackInfo, names: Any, topic_factory: Any,
) -> None:
    topic = topic_factory(names.topic, 1)
    produce(stack.bootstrap, topic, _values(3, 1))
    config = ConsumerConfig({"zookeeper.connect": stack.zookeeper, "group.id": names.group})
    m = FetcherManager(config, f"{names.group}_dead", lambda: [stack.bootstrap])
    try:
        broken: Any = object()  # not a queue: enqueueing into it fails in the fetcher thread
        m.start_connections([_info(broken, topic, 0, 0)])
        wait_until(lambda: m.error is not None, 20, "the fetcher thread failed")
        with pytest.raises(BackgroundThreadError) as exc:
            m.check()
        assert isinstance(exc.value.__cause__, AttributeError)
        assert m.error is exc.value.__cause__
    finally:
        m.shutdown()


def test_shutdown_is_idempotent_and_final(
    stack: StackInfo, names: Any, topic_factory: Any, make_manager: MakeManager,
) -> None:
    topic = topic_factory(names.topic, 1)
    m = make_manager("kafka-python")
    q = ChunkQueue(2)
    m.start_connections([_info(q, topic, 0, 0)])
    m.shutdown()
    m.shutdown()
    with pytest.raises(ConsumerShutdownError):
        m.start_connections([_info(q, topic, 0, 0)])
    cid = m.consumer_id
    assert not any(cid in t.name for t in threading.enumerate())


@pytest.mark.parametrize("backend", BACKENDS)
def test_fetchers_report_fetch_rate_and_lag_to_the_metrics(
    backend: str, stack: StackInfo, names: Any, topic_factory: Any,
) -> None:
    from zkconsumer.consumer.metrics import ConsumerMetrics

    topic = topic_factory(names.topic, 1)
    produce(stack.bootstrap, topic, _values(10, 1))
    metrics = ConsumerMetrics("client")
    config = ConsumerConfig({"zookeeper.connect": stack.zookeeper, "group.id": names.group,
                             "fetch.backend": backend})
    m = FetcherManager(config, f"{names.group}_m", lambda: [stack.bootstrap], metrics=metrics)
    try:
        q = ChunkQueue(2)
        m.start_connections([_info(q, topic, 0, 0)])
        wait_until(lambda: q.qsize() == 1, 20, "the chunk")
        snap = metrics.snapshot()
        assert snap["MinFetchRate"] > 0
        assert snap["ConsumerLag"] == {topic: {0: 10}}  # nothing consumed yet, log end 10
        it = iter(KafkaStream(q, 0))
        assert [next(it).offset for _ in range(4)] == [0, 1, 2, 3]
        # Read as the application consumes, with no fetch in between: it falls.
        assert metrics.snapshot()["ConsumerLag"] == {topic: {0: 6}}
        assert len([next(it) for _ in range(6)]) == 6
        assert metrics.snapshot()["ConsumerLag"] == {topic: {0: 0}}
        assert metrics.snapshot()["MaxLag"] == 0
        m.stop_connections()
        wait_until(lambda: metrics.snapshot()["MinFetchRate"] == 0, 20, "fetchers removed")
    finally:
        m.shutdown()


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_lag_of_partitions_held_back_by_a_full_queue_follows_the_log_end(
    backend: str, stack: StackInfo, names: Any, topic_factory: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The application stops consuming: its partitions are paused (chunks held back by a full
    queue), so no fetch brings their high watermark. ConsumerLag and MaxLag, what alerts on a
    stuck consumer, must still grow with the log end, and not fall back to the stale high
    watermark when a held chunk is finally put."""
    import zkconsumer.consumer.fetcher_thread as fetcher_thread_module
    from zkconsumer.consumer.metrics import ConsumerMetrics

    # 5 s would make a slow test (raising=False: the test also runs against older code).
    monkeypatch.setattr(fetcher_thread_module, "HELD_LOG_END_REFRESH_S", 0.5, raising=False)
    topic = topic_factory(names.topic, 2)
    produce(stack.bootstrap, topic, _values(20, 2))  # 10 per partition
    metrics = ConsumerMetrics("client")
    config = ConsumerConfig({"zookeeper.connect": stack.zookeeper, "group.id": names.group,
                             "fetch.backend": backend})
    m = FetcherManager(config, f"{names.group}_m", lambda: [stack.bootstrap], metrics=metrics)
    try:
        q = ChunkQueue(1)
        infos = [_info(q, topic, p, 0) for p in range(2)]
        m.start_connections(infos)
        wait_until(lambda: q.qsize() == 1 and m.stats().full_queue_waits >= 1, 20,
                   "one chunk queued, the other held back")
        produce(stack.bootstrap, topic, _values(60, 2))  # log ends 40, nothing consumed
        wait_until(
            lambda: metrics.snapshot()["ConsumerLag"] == {topic: {0: 40, 1: 40}}, 20,
            "ConsumerLag of the paused partitions at their log end",
        )
        assert metrics.snapshot()["MaxLag"] == 40
        assert m.stats().chunks == 1  # still paused: the lag came from log end lookups
        # The application reads the queued chunk; a held chunk goes in with the lag kept.
        it = iter(KafkaStream(q, 20_000))
        first = next(it)
        for _ in range(first.offset + 1, infos[first.partition].fetched_offset):
            next(it)
        wait_until(lambda: m.stats().chunks == 2, 20, "a held chunk enqueued")
        assert metrics.snapshot()["ConsumerLag"] == {
            topic: {p: 40 - infos[p].consumed_offset for p in range(2)}
        }
    finally:
        m.shutdown()


def test_the_short_polls_of_a_held_chunk_do_not_count_as_fetch_requests(
    stack: StackInfo, names: Any, topic_factory: Any,
) -> None:
    """The application falls behind on one partition: its fetcher polls the others every
    few milliseconds meanwhile. Those polls are not fetch requests; MinFetchRate must not
    rise as the application falls behind."""
    from zkconsumer.consumer.metrics import ConsumerMetrics

    topic = topic_factory(names.topic, 2)
    produce(stack.bootstrap, topic, [(0, None, b"x" * 100) for _ in range(200)])
    metrics = ConsumerMetrics("client")
    config = ConsumerConfig({"zookeeper.connect": stack.zookeeper, "group.id": names.group,
                             "fetch.message.max.bytes": 2048})
    m = FetcherManager(config, f"{names.group}_m", lambda: [stack.bootstrap], metrics=metrics)
    try:
        m.start_connections([_info(ChunkQueue(1), topic, 0, 0),  # nobody reads it
                             _info(ChunkQueue(1), topic, 1, 0)])  # nothing to read
        # The fetcher's start (leader and offset lookups of a topic just made, a new client)
        # took over 20 s once in a full run on 2 cores (a lookup waiting out its timeout?).
        wait_until(lambda: any(t._held for t in list(m._fetchers.values())), 60,
                   "a chunk held back")
        (fetcher,) = m._fetchers.values()

        def requests() -> int:
            with metrics._lock:
                return len(metrics._fetches.get(fetcher.metrics_key, ()))

        polls, counted = m.stats().polls, requests()
        wait_until(lambda: m.stats().polls >= polls + 60, 20, "short polls")
        polls, counted = m.stats().polls - polls, requests() - counted
        assert counted * 3 < polls, (counted, polls)
    finally:
        m.shutdown()


def test_a_fetcher_thread_that_stops_late_leaves_its_successors_fetch_rate(
    stack: StackInfo, names: Any, topic_factory: Any,
) -> None:
    """Fetcher threads are named as the JVM named them, so the next rebalance's thread for
    the same broker has the same name: the old one, ending after it started, must not take
    the new one out of MinFetchRate."""
    from zkconsumer.consumer.metrics import ConsumerMetrics

    topic = topic_factory(names.topic, 1)
    metrics = ConsumerMetrics("client")
    config = ConsumerConfig({"zookeeper.connect": stack.zookeeper, "group.id": names.group})
    m = FetcherManager(config, f"{names.group}_m", lambda: [stack.bootstrap], metrics=metrics)
    try:
        m.start_connections([_info(ChunkQueue(2), topic, 0, 0)])
        wait_until(lambda: metrics.snapshot()["MinFetchRate"] > 0, 20, "a fetch")
        (current,) = m._fetchers.values()
        late = type(current)(m, current.broker_id, current.fetcher_id)
        assert late.name == current.name
        late.begin_stop()
        late.run()  # its whole life, ending now: no client made, its end reported
        assert metrics.snapshot()["MinFetchRate"] > 0
    finally:
        m.shutdown()


@pytest.mark.parametrize("backend, message", [
    ("confluent", "librdkafka refused the configuration.*ssl.ca"),
    ("kafka-python", "ssl.cafile=/nonexistent/ca.pem"),
])
def test_tls_files_that_do_not_load_are_a_config_error_not_a_retry(
    backend: str, message: str
) -> None:
    # Not a connection failure retried for ever (what kafka-python alone makes of it).
    config = ConsumerConfig({
        "zookeeper.connect": "127.0.0.1:1", "group.id": "g", "fetch.backend": backend,
        "security.protocol": "SSL", "ssl.cafile": "/nonexistent/ca.pem"})
    manager = FetcherManager(config, "g_c", lambda: ["127.0.0.1:9"])
    try:
        with pytest.raises(ConfigError, match=message):
            manager.make_backend()
    finally:
        manager.shutdown()


def _msg(topic: str, partition: int, offset: int, ts_type: int = 1, err: Any = None) -> Any:
    """A real ``confluent_kafka.Message`` as librdkafka gives it: key ``k<offset>``, value
    ``v<offset>``, timestamp ``1000 + offset`` of librdkafka type ``ts_type`` (0 none, 1 create
    time, 2 log append time). An errored one has no key, value or timestamp (type 0), as
    ``rd_kafka_message_timestamp`` answers for any message with an error."""
    from confluent_kafka import Message

    if err is not None:
        return Message(topic=topic, partition=partition, offset=offset, error=err)
    return Message(topic=topic, partition=partition, offset=offset, key=b"k%d" % offset,
                   value=b"v%d" % offset, timestamp=(ts_type, 1000 + offset))


def _grouped(*polls: list[Any]) -> tuple[dict[tuple[str, int], list[tuple[Any, ...]]], Any]:
    """What ConfluentBackend._group makes of these polls: per partition, (offset, key, value,
    timestamp, timestamp type) of each message; and the poll result (errors)."""
    from zkconsumer.broker.backends import ConfluentRecords, PollResult
    from zkconsumer.consumer.fetcher import ConfluentBackend

    backend = ConfluentBackend.__new__(ConfluentBackend)  # no client: only the grouping
    backend._assigned = set()
    backend._consumer_id = "test"
    batches: dict[tuple[str, int], ConfluentRecords] = {}
    result = PollResult()
    for messages in polls:
        backend._group(messages, batches, result)
    got = {key: [(m.offset, m.key, m.value, m.timestamp, m.timestamp_type) for m in recs]
           for key, recs in batches.items()}
    return got, result


def _fields(offsets: Any, ts_type: int = 0) -> list[tuple[Any, ...]]:
    return [(o, b"k%d" % o, b"v%d" % o, 1000 + o, ts_type) for o in offsets]


def test_confluent_poll_groups_interleaved_runs_per_partition_in_order(speedups: str) -> None:
    from confluent_kafka import KafkaError

    eof = KafkaError(KafkaError._PARTITION_EOF)
    got, result = _grouped(
        [_msg("a", 0, 0), _msg("a", 0, 1), _msg("b", 1, 7), _msg("a", 0, 2),
         _msg("a", 0, -1, err=eof), _msg("b", 1, 8), _msg("a", 1, 3)],
        [_msg("b", 1, 9)],
    )
    assert got == {("a", 0): _fields((0, 1, 2)), ("b", 1): _fields((7, 8, 9)),
                   ("a", 1): _fields((3,))}
    assert not result.partition_errors and not result.out_of_range


def test_confluent_poll_one_run_and_the_shortcuts_checks(speedups: str) -> None:
    """The usual poll (one partition, one timestamp type) is one run; each shortcut is
    checked: the same partition number of another topic, an error among timestamped
    messages, messages without a timestamp (kept, type -1), mixed timestamp types."""
    from confluent_kafka import KafkaError

    got, _ = _grouped([_msg("a", 0, o) for o in range(5)])
    assert got == {("a", 0): _fields(range(5))}

    got, _ = _grouped([_msg("a", 0, 0), _msg("a", 0, 1), _msg("b", 0, 5), _msg("b", 0, 6)])
    assert got == {("a", 0): _fields((0, 1)), ("b", 0): _fields((5, 6))}

    out_of_range = KafkaError(KafkaError.OFFSET_OUT_OF_RANGE)
    got, result = _grouped([_msg("a", 0, 0), _msg("a", 1, 40, err=out_of_range),
                            _msg("a", 0, 1)])
    assert got == {("a", 0): _fields((0, 1))}
    assert result.out_of_range == {TopicPartition("a", 1): 40}

    got, _ = _grouped([_msg("a", 0, o, ts_type=0) for o in range(3)])
    assert got == {("a", 0): [(o, b"k%d" % o, b"v%d" % o, 1000 + o, -1) for o in range(3)]}

    got, _ = _grouped([_msg("a", 0, 0, ts_type=1), _msg("a", 0, 1, ts_type=2),
                       _msg("a", 0, 2, ts_type=0), _msg("b", 0, 3, ts_type=2)])
    assert got == {("a", 0): [(0, b"k0", b"v0", 1000, 0), (1, b"k1", b"v1", 1001, 1),
                              (2, b"k2", b"v2", 1002, -1)],
                   ("b", 0): [(3, b"k3", b"v3", 1003, 1)]}


class _ScriptedConsumer:
    """A stand-in for ``confluent_kafka.Consumer`` that returns scripted polls and records
    where the backend moves partitions to (the real-stack case is in test_bad_input.py)."""

    def __init__(self, polls: list[list[Any]]) -> None:
        self.polls = polls
        self.assigned: list[tuple[str, int, int]] = []

    def poll(self, timeout: float) -> Any:
        return self.polls[0].pop(0) if self.polls and self.polls[0] else None

    def consume(self, num: int, timeout: float) -> list[Any]:
        return self.polls.pop(0) if self.polls else []

    def incremental_assign(self, tps: list[Any]) -> None:
        self.assigned += [(tp.topic, tp.partition, tp.offset) for tp in tps]

    def incremental_unassign(self, tps: list[Any]) -> None:
        pass

    def resume(self, tps: list[Any]) -> None:
        pass


def test_confluent_poll_frees_each_consumed_list_before_taking_the_next() -> None:
    """A poll takes librdkafka's messages half a garbage-collector threshold at a time, so
    that they are freed before a collection sees them; the list of one consume() must be
    gone before the next consume() makes its own (both at once were a whole threshold: in
    the throughput benchmark, a collection every 3,300 messages, 7 % of the time)."""
    from zkconsumer.consumer.fetcher import ConfluentBackend

    step = max(100, gc.get_threshold()[0] // 2)
    offsets = iter(range(10**6))
    polls = [[_msg("a", 0, next(offsets)) for _ in range(step)] for _ in range(4)]
    first = polls[0].pop(0)  # what poll() gives; the rest of that poll comes from consume()

    class Counting(_ScriptedConsumer):
        """Records how many references the backend still holds to the list the previous
        consume() returned, when it calls consume() again."""

        def __init__(self) -> None:
            super().__init__(polls[1:])
            del polls[1:]  # the lists' only references are the consumer's and the backend's
            self.last: list[Any] | None = None
            self.held: list[int] = []

        def poll(self, timeout: float) -> Any:
            return first

        def consume(self, num: int, timeout: float) -> list[Any]:
            if self.last is not None:
                self.held.append(sys.getrefcount(self.last) - 2)  # self.last, the argument
            self.last = super().consume(num, timeout)
            return self.last

    backend = ConfluentBackend.__new__(ConfluentBackend)
    backend._assigned = {TopicPartition("a", 0)}
    backend._consumer_id = "test"
    backend._skipped = {}
    backend._consumer = consumer = Counting()
    result = backend.poll(0)
    assert [len(recs) for _, recs in result.batches] == [1 + 3 * step]
    assert consumer.held == [0, 0, 0]


def test_confluent_corrupt_batch_is_skipped_one_offset_per_round(speedups: str) -> None:
    from confluent_kafka import KafkaError

    from zkconsumer.consumer.fetcher import ConfluentBackend

    bad = KafkaError(KafkaError._BAD_MSG)
    tp = TopicPartition("a", 0)
    backend = ConfluentBackend.__new__(ConfluentBackend)
    backend._assigned = {tp}
    backend._consumer_id = "test"
    backend._skipped = {}
    # librdkafka reports the batch at 5 three times (fetched again from 6, then 7), then
    # hands out 8 and the error of a later corrupt batch at 20 in the same poll.
    consumer = _ScriptedConsumer([
        [_msg("a", 0, 4), _msg("a", 0, 5, err=bad)],
        [_msg("a", 0, 5, err=bad)],
        [_msg("a", 0, 5, err=bad)],
        [_msg("a", 0, 20, err=bad), _msg("a", 0, 21)],
    ])
    backend._consumer = consumer
    corrupt = []
    for _ in range(4):
        result = backend.poll(0)
        corrupt.append({k: v[:2] for k, v in result.corrupt.items()})
    assert corrupt == [{tp: (5, 6)}, {tp: (6, 7)}, {tp: (7, 8)}, {tp: (20, 21)}]
    assert consumer.assigned == [("a", 0, 6), ("a", 0, 7), ("a", 0, 8)]  # none for 20


def test_a_metadata_refresh_cancelled_by_a_close_is_not_logged_as_an_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from kafka.errors import Cancelled, KafkaConnectionError

    cluster = logging.getLogger("kafka.cluster")  # what kafka-python logs it to
    with caplog.at_level(logging.WARNING):
        cluster.error("Metadata refresh: failed %s", Cancelled())
        cluster.error("Metadata refresh: failed %s", KafkaConnectionError("reset"))
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("ERROR", "Metadata refresh: failed KafkaConnectionError: reset")]


@contextmanager
def _handled(name: str) -> Iterator[tuple[logging.Logger, list[logging.LogRecord]]]:
    """Logger ``name`` with a handler of no level (as ``logging.basicConfig`` sets up) that
    collects what reaches it; the logger's level is restored after."""
    records: list[logging.LogRecord] = []

    class _Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logger = logging.getLogger(name)
    handler, level = _Collect(), logger.level
    logger.addHandler(handler)
    try:
        yield logger, records
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def test_a_cancelled_metadata_refresh_is_not_shown_by_a_warning_level_application() -> None:
    # As logging.basicConfig(level=WARNING) sets things up: the level on the logger, none on
    # the handler. The demoted record must not reach the handler labelled DEBUG.
    from kafka.errors import Cancelled, KafkaConnectionError

    with _handled("kafka.cluster") as (cluster, records):
        for enabled in (logging.WARNING, logging.DEBUG):
            cluster.setLevel(enabled)
            cluster.error("Metadata refresh: failed %s", Cancelled())
            cluster.error("Metadata refresh: failed %s", KafkaConnectionError("reset"))
    assert [(r.levelname, r.getMessage()) for r in records] == [
        ("ERROR", "Metadata refresh: failed KafkaConnectionError: reset"),  # at WARNING
        ("DEBUG", "Metadata refresh: failed Cancelled"),  # at DEBUG: shown, as DEBUG
        ("ERROR", "Metadata refresh: failed KafkaConnectionError: reset"),
    ]


def test_a_read_woken_after_a_clean_close_is_not_logged_as_an_error() -> None:
    # kafka-python 3.0.12's race: a read resumes after close() set the socket to None; the
    # AttributeError is logged at ERROR with a traceback on a clean shutdown.
    class _Transport:  # what the record's argument is, as far as the filter looks
        _closed = False

        def __str__(self) -> str:
            return f"<KafkaTCPTransport [127.0.0.1:9092]{' (closed)' if self._closed else ''}>"

    transport = _Transport()
    with _handled("kafka.net.transport") as (transport_log, records):
        transport_log.setLevel(logging.WARNING)
        for closed, error in ((True, AttributeError("'NoneType' object has no attribute 'recv'")),
                              (True, ConnectionResetError("reset")),
                              (False, AttributeError("a real bug"))):
            transport._closed = closed
            try:
                raise error
            except Exception:  # noqa: BLE001 - logged with its traceback, as kafka-python does
                transport_log.exception("%s: Error receiving network data closing socket",
                                        transport)
    assert [(r.levelname, type(r.exc_info[1]).__name__ if r.exc_info else "")
            for r in records] == [("ERROR", "ConnectionResetError"), ("ERROR", "AttributeError")]


class _ScriptedBackend:
    """A fetch backend whose polls return the given results, then nothing (stopping the
    fetcher thread at the end of the script)."""

    def __init__(self, thread: Any, script: list[Any]) -> None:
        self.thread = thread
        self.script = script
        self.added: list[dict[TopicPartition, int]] = []
        self.paused: list[TopicPartition] = []

    def add(self, positions: Any) -> None:
        self.added.append(dict(positions))

    def remove(self, tps: Any) -> None:
        pass

    def pause(self, tps: Any) -> None:
        self.paused.extend(tps)

    def resume(self, tps: Any) -> None:
        pass

    def poll(self, timeout_ms: int) -> Any:
        from zkconsumer.broker.backends import PollResult

        if not self.script:
            self.thread.begin_stop()
            return PollResult()
        return self.script.pop(0)

    def highwater(self, tp: TopicPartition) -> int | None:
        return None

    def reset(self) -> None:
        pass

    def close(self) -> None:
        pass


def test_corrupt_data_of_a_held_partition_is_reported_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A poll with more data of a partition held by its full queue (fetched again from the
    held chunk's end) and a corrupt batch after it: the corrupt batch is logged when it is
    fetched again, not twice."""
    from zkconsumer.broker.backends import PollResult
    from zkconsumer.consumer.fetcher_thread import _FetcherThread

    config = ConsumerConfig({"zookeeper.connect": "127.0.0.1:1", "group.id": "g"})
    manager = FetcherManager(config, "g_test", lambda: [])
    held, other = TopicPartition("a", 0), TopicPartition("a", 1)
    full = ChunkQueue(1)
    full.put("a chunk nobody takes")

    def records(p: int, offsets: range) -> list[MessageAndMetadata[Any, Any]]:
        return [MessageAndMetadata("a", p, o, None, b"v", -1, -1) for o in offsets]

    bad = RuntimeError("CRC mismatch")
    thread = _FetcherThread(manager, 0, 0)
    thread._partitions = {held: _info(full, "a", 0, 0), other: _info(ChunkQueue(10), "a", 1, 0)}
    backend = _ScriptedBackend(thread, [
        PollResult(batches=[(held, records(0, range(0, 10)))]),  # refused: held, paused
        PollResult(batches=[(held, records(0, range(10, 15))), (other, records(1, range(3)))],
                   corrupt={held: (20, 21, bad)}),
        PollResult(corrupt={held: (20, 21, bad)}),  # fetched again after the held chunk
    ])
    with caplog.at_level(logging.ERROR, logger="zkconsumer.fetcher"):
        thread._loop(backend)  # type: ignore[arg-type]
    try:
        assert backend.paused == [held, held]
        assert backend.added == [{held: 10}]  # the second poll's data: fetched again later
        reports = [r.getMessage() for r in caplog.records if "corrupt data" in r.getMessage()]
        assert len(reports) == 1, reports
        assert "a:0 at offset 20" in reports[0] and "from offset 21" in reports[0]
    finally:
        manager.shutdown()


def test_kafka_python_corrupt_batch_after_good_records_of_a_paused_partition(
    stack: StackInfo, names: Any, topic_factory: Any
) -> None:
    """Good records, then a corrupt batch, in one fetch: kafka-python hands out the records
    and keeps the error for its next poll, which drops it if the partition was paused
    meanwhile (its queue full); after the resume every poll spun for ever. The backend takes
    the error at once and skips the batch."""
    from zkconsumer.consumer.fetcher import KafkaPythonBackend

    topic = topic_factory(names.topic, 2)
    produce_with_bad_crc(stack, topic, 1)  # partition 0: 0, corrupt 1, then 2..9
    config = ConsumerConfig({"zookeeper.connect": "127.0.0.1:1", "group.id": "g"})
    backend = KafkaPythonBackend(config, [stack.bootstrap])
    tp = TopicPartition(topic, 0)
    try:
        backend.add({tp: 0})
        got: list[int] = []
        corrupt: dict[TopicPartition, Any] = {}
        deadline = time.monotonic() + 20
        while not got and time.monotonic() < deadline:
            result = backend.poll(200)
            got += [r.offset for t, recs in result.batches if t == tp for r in recs]
            corrupt.update(result.corrupt)
        assert got == [0]
        assert corrupt[tp][:2] == (1, 2)  # skipped along with the good record
        backend.pause([tp])  # what a full queue does
        backend.poll(200)
        backend.resume([tp])
        done: list[int] = []

        def poll_rest() -> None:
            end = time.monotonic() + 20
            while len(done) < 8 and time.monotonic() < end:
                done.extend(r.offset for t, recs in backend.poll(200).batches if t == tp
                            for r in recs)

        t = threading.Thread(target=poll_rest, daemon=True)
        t.start()
        t.join(30)
        assert not t.is_alive(), "poll() never returned after the resume"
        assert done == list(range(2, 10))
    finally:
        backend.close()


def test_a_rebalance_to_no_partitions_stops_the_previous_leader_finder() -> None:
    config = ConsumerConfig({"zookeeper.connect": "127.0.0.1:1", "group.id": "g"})
    manager = FetcherManager(config, "g_test", lambda: [])
    try:
        manager.start_connections([])
        first = manager._leader_finder
        assert first is not None and first.is_alive()
        manager.start_connections([])
        assert manager._leader_finder is not first
        wait_until(lambda: not first.is_alive(), 10, "the first leader finder to stop")
    finally:
        manager.shutdown()


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_offset_client_busy_past_shutdown_closes_itself(
    backend: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A lookup that outlives shutdown's wait (a request timeout is 30 s or more) used to
    leave its client open for good: it closes it when it ends."""
    import zkconsumer.consumer.fetch_lookups as lookups_module
    from zkconsumer.consumer.fetch_lookups import _OffsetClient

    ends = _LogEnds({TopicPartition("t", 0): 5})
    ends.stall = True
    monkeypatch.setitem(lookups_module._LIBRARIES, backend, lambda *args: ends)
    client = _OffsetClient(ConsumerConfig({"zookeeper.connect": "127.0.0.1:1", "group.id": "g"}),
                           "g_test", lambda: ["127.0.0.1:1"], backend)
    t = threading.Thread(target=client.log_end, args=([TopicPartition("t", 0)],), daemon=True)
    t.start()
    assert ends.stalled.wait(5), "the lookup under way"
    client.close(0.1)  # gives up waiting for the lookup
    assert ends.closed == 0
    ends.release.set()
    t.join(5)
    assert ends.closed == 1 and client._lookups is None


# -- the held partitions' log-end helper (no cluster: the lookups are stand-ins) ---------------


class _LogEnds:
    """Stand-in lookups (:class:`~zkconsumer.consumer.fetch_lookups._Lookups`): log ends
    answer ``ends``, or raise ``error`` when set. While ``stall`` is set, the next lookup
    waits for ``release`` (the others answer). ``closed`` counts closes."""

    def __init__(self, ends: dict[TopicPartition, int]) -> None:
        self.ends = ends
        self.stall = False
        self.release = threading.Event()
        self.stalled = threading.Event()
        self.error: BaseException | None = None
        self.closed = 0

    def offsets(self, tps: Any, *, latest: bool, timeout_ms: int) -> dict[TopicPartition, int]:
        assert latest
        if self.stall:
            self.stall = False
            self.stalled.set()
            self.release.wait(30)
        if self.error is not None:
            raise self.error
        return {tp: self.ends[tp] for tp in tps}

    def leaders(self, topics: Any, timeout_ms: int) -> dict[TopicPartition, int]:
        return {}

    def close(self) -> None:
        self.closed += 1


@pytest.fixture(params=BACKENDS)
def held_fetcher(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[Any, _LogEnds]]:
    """A fetcher thread (not started) of a manager whose offset lookups are a _LogEnds."""
    import zkconsumer.consumer.fetch_lookups as lookups_module
    from zkconsumer.consumer.fetcher_thread import _FetcherThread

    tp = TopicPartition("t", 0)
    ends = _LogEnds({tp: 100})
    monkeypatch.setitem(lookups_module._LIBRARIES, request.param, lambda *args: ends)
    config = ConsumerConfig({"zookeeper.connect": "127.0.0.1:1", "group.id": "g",
                             "fetch.backend": request.param})
    m = FetcherManager(config, "g_c", lambda: ["127.0.0.1:1"])
    try:
        yield _FetcherThread(m, 0, 0), ends
    finally:
        ends.release.set()
        m.shutdown()


def _hold(tp: TopicPartition) -> Any:
    from zkconsumer.consumer.fetcher_thread import _Held

    return _Held(_info(ChunkQueue(1), tp.topic, tp.partition, 0), [], 0, time.monotonic() - 60)


def test_a_held_partitions_log_end_lookup_never_delays_the_fetchers_own_lookups(
    held_fetcher: tuple[Any, _LogEnds],
) -> None:
    """The helper's lookup is a fetch the broker may hold at the log end (and may have to
    connect first): the fetcher thread's own lookups (a reset, a check beyond the log end)
    must not queue behind it, or every partition of that broker stops being fetched."""
    fetcher, ends = held_fetcher
    tp = TopicPartition("t", 0)
    ends.stall = True
    helper = threading.Thread(target=fetcher._look_up_ends, args=({tp: _hold(tp)},),
                              daemon=True)
    helper.start()
    assert ends.stalled.wait(10), "the helper's lookup under way"
    answered: list[dict[TopicPartition, int]] = []
    own = threading.Thread(
        target=lambda: answered.append(fetcher.manager.offset_client.log_end([tp])), daemon=True)
    own.start()
    own.join(5)
    ends.release.set()
    assert answered == [{tp: 100}], "the fetcher's lookup waited for the helper's"
    helper.join(10)


def test_a_log_end_found_for_an_ended_hold_is_not_applied_to_a_later_one(
    held_fetcher: tuple[Any, _LogEnds],
) -> None:
    """The held chunk went in before the helper answered; much later the partition is held
    again. The old log end must not become the new hold's lag (it would fall, even to 0)."""
    fetcher, _ = held_fetcher
    tp = TopicPartition("t", 0)
    first, later = _hold(tp), _hold(tp)
    fetcher._look_up_ends({tp: first})  # answers 100 for the first hold
    fetcher._held[tp] = later
    lags: list[tuple[str, int, int]] = []

    class Metrics:
        def update_lag(self, topic: str, partition: int, info: Any, end: int) -> None:
            lags.append((topic, partition, end))

    fetcher._ends_looked_up = time.monotonic()  # no new lookup now
    fetcher._refresh_held_lag(Metrics())
    assert lags == [] and tp not in fetcher._held_ends
    fetcher._look_up_ends({tp: later})
    fetcher._refresh_held_lag(Metrics())
    assert lags == [("t", 0, 100)]


def test_an_unexpected_error_of_the_log_end_helper_is_kept_for_the_user(
    held_fetcher: tuple[Any, _LogEnds],
) -> None:
    """Only a metric, but a programming error is never swallowed: it is kept as any
    background thread's is; the cluster not answering is only retried."""
    from confluent_kafka import KafkaException
    from kafka.errors import KafkaTimeoutError

    fetcher, ends = held_fetcher
    tp = TopicPartition("t", 0)
    # What each library's lookup raises when no answer comes in time.
    ends.error = (KafkaException("no answer") if fetcher.manager.library == "confluent"
                  else KafkaTimeoutError("no answer"))
    fetcher._look_up_ends({tp: _hold(tp)})
    assert fetcher.manager.error is None
    ends.error = TypeError("a bug")
    fetcher._look_up_ends({tp: _hold(tp)})
    assert isinstance(fetcher.manager.error, TypeError)
    with pytest.raises(BackgroundThreadError, match="a bug"):
        fetcher.manager.check()


def test_no_log_end_lookup_connects_after_shutdown(held_fetcher: tuple[Any, _LogEnds]) -> None:
    """A helper late past shutdown must not make a new client (nor ask ZooKeeper for the
    brokers through a closed connection), and shutdown starts no more helpers."""
    fetcher, _ = held_fetcher
    m = fetcher.manager
    m.shutdown()
    with pytest.raises(ConsumerShutdownError):
        m.held_offset_client._client()
    assert not m.start_helper(threading.Thread(target=lambda: None))


def test_asking_about_a_missing_topic_does_not_make_it(stack: StackInfo, names: Any) -> None:
    """kafka-python 3.0's client asked the broker to create every topic its metadata named
    (allow_auto_create_topics was not passed on): on a broker with auto.create.topics.enable
    a fetcher still following a deleted topic made it again, empty."""
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTP

    from zkconsumer.broker.clients import kafka_consumer

    missing = names("missing")
    consumer = kafka_consumer(bootstrap_servers=stack.bootstrap, group_id=None,
                              enable_auto_commit=False)
    try:
        consumer.assign([KTP(missing, 0)])
        consumer.poll(timeout_ms=1500)  # asks for the topic's metadata, and leaders
    finally:
        consumer.close()
    admin = KafkaAdminClient(bootstrap_servers=stack.bootstrap)
    try:
        assert missing not in admin.list_topics()
    finally:
        admin.close()


def _lookup_config(stack: StackInfo, names: Any, **props: object) -> ConsumerConfig:
    return ConsumerConfig({"zookeeper.connect": stack.zookeeper, "group.id": names.group,
                           **{k.replace("_", "."): v for k, v in props.items()}})


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_lookups_of_a_missing_topic_leave_it_out_fail_retriably_and_do_not_make_it(
    backend: str, stack: StackInfo, names: Any,
) -> None:
    """The leader finder leaves a missing topic's partitions waiting; an offset lookup raises
    what the fetcher threads retry (kafka-python: a timeout; confluent-kafka: the partition's
    error); neither asks the broker (auto.create.topics.enable) to make the topic."""
    from kafka import KafkaAdminClient

    from zkconsumer.consumer.fetch_lookups import _MetadataClient, _OffsetClient

    missing = names("missing")
    config = _lookup_config(stack, names, socket_timeout_ms=3000)
    meta = _MetadataClient(config, "c", lambda: [stack.bootstrap], backend)
    offsets = _OffsetClient(config, "c", lambda: [stack.bootstrap], backend)
    try:
        assert meta.leaders({missing}) == {}
        with pytest.raises(offsets.errors):
            offsets.log_end([TopicPartition(missing, 0)])
        assert offsets._lookups is None  # dropped after the failure
    finally:
        meta.close(5)
        offsets.close(5)
    admin = KafkaAdminClient(bootstrap_servers=stack.bootstrap)
    try:
        assert missing not in admin.list_topics()
    finally:
        admin.close()


def test_both_libraries_look_up_the_same_leaders_and_offsets(
    stack: StackInfo, names: Any, topic_factory: Any,
) -> None:
    from zkconsumer.consumer.fetch_lookups import _MetadataClient, _OffsetClient

    topic = topic_factory(names.topic, 3)
    other = topic_factory(names("other"), 1)
    produce(stack.bootstrap, topic, _values(30, 3))
    tps = [TopicPartition(topic, p) for p in range(3)]
    found: dict[str, tuple[Any, ...]] = {}
    for backend in BACKENDS:
        clients: list[Any] = []
        try:
            meta = _MetadataClient(_lookup_config(stack, names), "c", lambda: [stack.bootstrap],
                                   backend)
            clients.append(meta)
            starts, ends = (
                _OffsetClient(_lookup_config(stack, names, auto_offset_reset=policy), "c",
                              lambda: [stack.bootstrap], backend)
                for policy in ("smallest", "largest"))
            clients += [starts, ends]
            found[backend] = (meta.leaders({topic}), meta.leaders({topic, other, names("no")}),
                              starts.resolve(tps), ends.resolve(tps), ends.log_end(tps[:1]))
        finally:
            for c in clients:
                c.close(5)
    one, several, smallest, largest, log_end = found["confluent"]
    assert set(one) == set(tps) and all(lead >= 0 for lead in one.values())
    assert set(several) == {*tps, TopicPartition(other, 0)}
    assert smallest == dict.fromkeys(tps, 0) and largest == dict.fromkeys(tps, 10)
    assert log_end == {tps[0]: 10}
    assert found["kafka-python"] == found["confluent"]


def test_a_confluent_connector_builds_no_kafka_python_client(
    stack: StackInfo, names: Any, topic_factory: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where librdkafka fetches, its lookups are librdkafka's too: bootstrapping kafka-python
    clients cost every member time at its first rebalance (#38)."""
    import kafka

    from zkconsumer import create_consumer_connector

    topic = topic_factory(names.topic, 2)
    produce(stack.bootstrap, topic, _values(20, 2))
    made: list[str] = []  # from here on: the connector's
    for name in ("KafkaConsumer", "KafkaAdminClient"):
        real = getattr(kafka, name)

        def counted(*args: Any, __real: Any = real, __name: str = name, **kwargs: Any) -> Any:
            made.append(__name)
            return __real(*args, **kwargs)

        monkeypatch.setattr(kafka, name, counted)
    c = create_consumer_connector(ConsumerConfig({
        "zookeeper.connect": stack.zookeeper, "group.id": names.group,
        "fetch.backend": "confluent", "auto.offset.reset": "smallest",
        "auto.commit.enable": False, "consumer.timeout.ms": 20_000,
    }))
    try:
        stream = c.create_message_streams({topic: 1})[topic][0]
        assert len(_take(stream, 20)) == 20
    finally:
        c.shutdown()
    assert made == []


#: A member process: consumes ``n`` messages of a topic with the default configuration, then
#: says whether kafka-python was ever imported.
_MEMBER_WITHOUT_KAFKA_PYTHON = """
import sys
from zkconsumer import ConsumerConfig, create_consumer_connector
zk, group, topic, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
c = create_consumer_connector(ConsumerConfig({
    "zookeeper.connect": zk, "group.id": group, "auto.offset.reset": "smallest",
    "consumer.timeout.ms": 20000}))
try:
    stream = c.create_message_streams({topic: 1})[topic][0]
    it = iter(stream)
    got = [next(it) for _ in range(n)]
    c.commit_offsets()
finally:
    c.shutdown()
print(len(got), "kafka" in sys.modules)
"""


def test_a_default_member_never_imports_kafka_python(
    stack: StackInfo, names: Any, topic_factory: Any,
) -> None:
    """A member of the default install (confluent-kafka, offsets in ZooKeeper) consumes and
    commits without loading kafka-python: its import was 0.1 s of CPU in every member's start
    (a storm of 20 to 50 processes) and in each Spark stream query's reader process (#38)."""
    topic = topic_factory(names.topic, 2)
    produce(stack.bootstrap, topic, _values(20, 2))
    done = subprocess.run(
        [sys.executable, "-c", _MEMBER_WITHOUT_KAFKA_PYTHON, stack.zookeeper, names.group,
         topic, "20"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["20", "False"], done.stderr[-2000:]
