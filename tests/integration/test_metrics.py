"""ConsumerMetrics: the legacy names, exact values, served over HTTP and scraped."""

from __future__ import annotations

import queue
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from itertools import islice
from typing import Any

import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from tests.support import NullFetcher, StackInfo, wait_until
from zkconsumer import ConsumerConfig, Whitelist, ZookeeperConsumerConnector
from zkconsumer._errors import ConsumerTimeoutException
from zkconsumer.consumer.metrics import FETCH_RATE_WINDOW_S, LEGACY_NAMES, ConsumerMetrics
from zkconsumer.consumer.partition import ChunkQueue, FetchedDataChunk, PartitionTopicInfo
from zkconsumer.consumer.stream import CREATE_TIME, KafkaStream, MessageAndMetadata


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample served on ``port``: (name, sorted labels) -> value."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


#: The labels of every series of ``ConsumerMetrics("app")`` told of no thread id.
APP = (("client_id", "app"), ("consumer_id", ""))


def test_snapshot_has_every_legacy_name_with_exact_values() -> None:
    clock = FakeClock()
    m = ConsumerMetrics("app", clock=clock)
    m.record_messages("t", 3, 30)
    m.record_messages("t", 2, 5)
    m.record_messages("u", 1, 7)
    m.record_commit("zookeeper", 4)
    m.record_commit("kafka")
    m.record_rebalance(0.25)
    m.record_rebalance(70.0)
    m.set_owned_partitions([("t", 0), ("t", 1), ("u", 0)])
    m.update_lag("t", 0, 5, 12)
    m.update_lag("t", 1, 9, 9)
    m.update_lag("u", 0, None, 4)  # nothing consumed yet: unknown, no gauge
    m.set_queue_size("t", "app_c-0", 2)
    q: queue.Queue[int] = queue.Queue()
    q.put(1)
    m.watch_queue("u", "app_c-1", q)
    m.record_fetch_request("f1")
    clock.now += 10
    for _ in range(20):
        m.record_fetch_request("f2")
    m.record_fetch_request("f1")

    snap = m.snapshot()
    assert set(LEGACY_NAMES) <= set(snap)
    assert snap == {
        "client_id": "app",
        "consumer_id": "app_c",  # from the thread ids of its streams
        "MessagesPerSec": {"t": 5, "u": 1},
        "AllTopicsMessagesPerSec": 6,
        "BytesPerSec": {"t": 35, "u": 7},
        "AllTopicsBytesPerSec": 42,
        "KafkaCommitsPerSec": 1,
        "ZooKeeperCommitsPerSec": 4,
        "RebalanceRateAndTime": {"count": 2, "total_s": 70.25, "last_s": 70.0},
        "OwnedPartitionsCount": {"t": 2, "u": 1},
        "ConsumerLag": {"t": {0: 7, 1: 0}},
        "MaxLag": 7,
        # f1: 2 requests in its 10 s of life; f2: 20 in its first second (counted as 1 s).
        "MinFetchRate": 0.2,
        "FetchQueueSize": {"t": {"app_c-0": 2}, "u": {"app_c-1": 1}},
    }

    # Releasing partitions drops their lag; a fetcher that stops no longer counts.
    m.set_owned_partitions([("t", 1)])
    m.remove_fetcher("f1")
    clock.now += FETCH_RATE_WINDOW_S + 1  # f2's requests leave the window
    snap = m.snapshot()
    assert snap["OwnedPartitionsCount"] == {"t": 1}
    assert snap["ConsumerLag"] == {"t": {1: 0}} and snap["MaxLag"] == 0
    assert snap["MinFetchRate"] == 0.0
    with pytest.raises(ValueError, match="commit kind must be 'kafka' or 'zookeeper'"):
        m.record_commit("disk")  # type: ignore[arg-type]


def test_served_for_prometheus_per_connector_without_the_global_registry() -> None:
    a, b = ConsumerMetrics("a"), ConsumerMetrics("b")
    try:
        a.record_messages("t", 4, 400)
        a.record_commit("zookeeper", 2)
        a.record_rebalance(0.3)
        a.set_owned_partitions([("t", 0), ("t", 1)])
        a.update_lag("t", 1, 10, 15)
        a.set_queue_size("t", "a-0", 1)
        b.record_messages("t", 1, 9)
        port_a, port_b = a.serve(0, "127.0.0.1"), b.serve(0, "127.0.0.1")
        assert port_a != port_b and a.port == port_a

        samples = scrape(port_a)
        cid = (("client_id", "a"), ("consumer_id", "a"))
        assert samples[("zkconsumer_messages_per_sec_total", (*cid, ("topic", "t")))] == 4
        assert samples[("zkconsumer_bytes_per_sec_total", (*cid, ("topic", "t")))] == 400
        assert samples[("zkconsumer_zookeeper_commits_per_sec_total", cid)] == 2
        assert samples[("zkconsumer_kafka_commits_per_sec_total", cid)] == 0
        assert samples[("zkconsumer_rebalance_rate_and_time_seconds_count", cid)] == 1
        assert samples[("zkconsumer_rebalance_rate_and_time_seconds_sum", cid)] == 0.3
        assert samples[("zkconsumer_rebalance_rate_and_time_seconds_bucket",
                        (*cid, ("le", "0.25")))] == 0
        assert samples[("zkconsumer_rebalance_rate_and_time_seconds_bucket",
                        (*cid, ("le", "0.5")))] == 1
        assert samples[("zkconsumer_owned_partitions_count", (*cid, ("topic", "t")))] == 2
        assert samples[("zkconsumer_consumer_lag",
                        (*cid, ("partition", "1"), ("topic", "t")))] == 5
        assert samples[("zkconsumer_max_lag", cid)] == 5
        assert samples[("zkconsumer_fetch_queue_size",
                        (*cid, ("thread_id", "a-0"), ("topic", "t")))] == 1
        assert samples[("zkconsumer_min_fetch_rate", cid)] == 0
        assert {name for name, _ in samples} == {
            "zkconsumer_messages_per_sec_total", "zkconsumer_bytes_per_sec_total",
            "zkconsumer_kafka_commits_per_sec_total",
            "zkconsumer_zookeeper_commits_per_sec_total",
            "zkconsumer_rebalance_rate_and_time_seconds_bucket",
            "zkconsumer_rebalance_rate_and_time_seconds_count",
            "zkconsumer_rebalance_rate_and_time_seconds_sum",
            "zkconsumer_owned_partitions_count", "zkconsumer_fetch_queue_size",
            "zkconsumer_consumer_lag", "zkconsumer_max_lag", "zkconsumer_min_fetch_rate",
        }

        # The other connector's endpoint has its own values only.
        samples_b = scrape(port_b)
        assert samples_b[("zkconsumer_messages_per_sec_total",
                          (("client_id", "b"), ("consumer_id", ""), ("topic", "t")))] == 1
        assert all(dict(labels).get("client_id") == "b" for _, labels in samples_b)
        # Nothing went to the process-global registry.
        assert REGISTRY.get_sample_value(
            "zkconsumer_messages_per_sec_total", {"client_id": "a", "topic": "t"}) is None
        with pytest.raises(RuntimeError, match="already served"):
            a.serve(0, "127.0.0.1")
    finally:
        a.close()
        b.close()
    with pytest.raises(urllib.error.URLError):
        scrape(port_a)
    assert a.port is None
    a.close()  # idempotent


def owned_series(m: ConsumerMetrics) -> dict[str, float]:
    """OwnedPartitionsCount as Prometheus reads it: topic -> value (checks client_id)."""
    out = {}
    for family in text_string_to_metric_families(m.render().decode()):
        for s in family.samples:
            if s.name == "zkconsumer_owned_partitions_count":
                assert s.labels["client_id"] == m.client_id
                out[s.labels["topic"]] = s.value
    return out


def test_owned_partitions_count_is_0_for_a_subscribed_topic_owning_nothing() -> None:
    """A subscribed topic none of whose partitions is owned had no series ("no data")."""
    m = ConsumerMetrics("app")
    m.set_subscribed_topics(["t", "u"])
    m.set_owned_partitions([("t", 0), ("t", 2)])
    assert m.snapshot()["OwnedPartitionsCount"] == {"t": 2, "u": 0}
    assert owned_series(m) == {"t": 2, "u": 0}
    # A rebalance took everything: both still there, at 0.
    m.set_owned_partitions(())
    assert m.snapshot()["OwnedPartitionsCount"] == {"t": 0, "u": 0}
    assert owned_series(m) == {"t": 0, "u": 0}
    # A wildcard's matched topics change (u deleted, v created): the series follow.
    m.set_subscribed_topics(["t", "v"])
    m.set_owned_partitions([("v", 1)])
    assert m.snapshot()["OwnedPartitionsCount"] == {"t": 0, "v": 1}
    assert owned_series(m) == {"t": 0, "v": 1}
    # Owned without being named as subscribed: counted all the same.
    m.set_owned_partitions([("w", 0)])
    assert owned_series(m) == {"t": 0, "v": 0, "w": 1}
    # A bare count has no per-topic values: no zeros beside it.
    m.set_owned_partitions(3)
    assert m.snapshot()["OwnedPartitionsCount"] == owned_series(m) == {"": 3}
    # Shut down (closed): subscribed to nothing, no series left at 0.
    m.set_owned_partitions(())
    m.close()
    assert m.snapshot()["OwnedPartitionsCount"] == owned_series(m) == {}


# --------------------------------------------------------------------------------------
# OwnedPartitionsCount of real connectors

@contextmanager
def members(stack: StackInfo, group: str, *ids: str) -> Iterator[list[ZookeeperConsumerConnector]]:
    with ExitStack() as stack_:
        out = []
        for cid in ids:
            c = ZookeeperConsumerConnector(ConsumerConfig({
                "zookeeper.connect": stack.zookeeper, "group.id": group, "consumer.id": cid,
                "auto.commit.enable": False, "rebalance.backoff.ms": 200,
            }), fetcher_factory=NullFetcher)
            stack_.callback(c.shutdown)
            out.append(c)
        yield out


def test_a_member_owning_no_partition_of_its_static_topic_reports_0(
    stack: StackInfo, names: Any, topic_factory: Any,
) -> None:
    topic = topic_factory(names.topic, 1)
    with members(stack, names.group, "a", "b") as (a, b):
        a.create_message_streams({topic: 1})
        b.create_message_streams({topic: 1})
        # Range, threads sorted as strings: the one partition is a's.
        wait_until(lambda: len(a.owned_partitions()) == 1 and not b.owned_partitions()
                   and a.metrics.snapshot()["RebalanceRateAndTime"]["count"] >= 2,
                   30, "the group settled with b owning nothing")
        assert a.metrics.snapshot()["OwnedPartitionsCount"] == {topic: 1}
        assert b.metrics.snapshot()["OwnedPartitionsCount"] == {topic: 0}
        assert owned_series(b.metrics) == {topic: 0}
        a.shutdown()
        wait_until(lambda: len(b.owned_partitions()) == 1, 30, "b took the partition over")
        wait_until(lambda: owned_series(b.metrics) == {topic: 1}, 10, "b's gauge at 1")
        b.shutdown()
        assert b.metrics.snapshot()["OwnedPartitionsCount"] == owned_series(b.metrics) == {}


def test_a_wildcard_member_reports_0_for_each_existing_topic_its_filter_matches(
    stack: StackInfo, names: Any, topic_factory: Any,
) -> None:
    """The topics that get a 0 series are those the filter matched at the last rebalance
    (existing ones), never the regex itself nor topics it does not match."""
    t1, t2 = topic_factory(names("w1"), 1), topic_factory(names("w2"), 1)
    other = topic_factory(names("x"), 1)
    regex = f"w[0-9]-{names.suffix}"
    with members(stack, names.group, "a", "b") as (a, b):
        a.create_message_streams_by_filter(Whitelist(regex))
        b.create_message_streams_by_filter(Whitelist(regex))
        wait_until(lambda: len(a.owned_partitions()) == 2 and not b.owned_partitions()
                   and a.metrics.snapshot()["RebalanceRateAndTime"]["count"] >= 2,
                   30, "the group settled with b owning nothing")
        assert a.metrics.snapshot()["OwnedPartitionsCount"] == {t1: 1, t2: 1}
        assert b.metrics.snapshot()["OwnedPartitionsCount"] == {t1: 0, t2: 0}
        assert owned_series(b.metrics) == {t1: 0, t2: 0}
        assert other not in owned_series(a.metrics)


# --------------------------------------------------------------------------------------
# MessagesPerSec / BytesPerSec: messages handed out, not fetched


def _chunk(info: PartitionTopicInfo, offsets: range) -> FetchedDataChunk:
    return FetchedDataChunk(
        [MessageAndMetadata(info.topic, info.partition, o, b"k", b"v" * 9, 0, CREATE_TIME)
         for o in offsets], info, offsets.start)


@pytest.mark.parametrize("decoder", [None, bytes.decode], ids=["plain", "decoding"])
def test_messages_per_sec_counts_messages_handed_out_once_across_a_rebalance(
    decoder: Any,
) -> None:
    """5 messages read of a 1000-message chunk count 5 (not 1000); the chunk dropped by a
    rebalance and fetched again counts only what is handed out of it (not 1995 for 10)."""
    m = ConsumerMetrics("app")
    assert m.counts_bytes is False and m.snapshot()["BytesPerSec"] == {}  # bytes wanted now
    q = ChunkQueue(4)
    info = PartitionTopicInfo("t", 0, q, 0, 0, 1 << 20, "app", "app-0")
    stream: KafkaStream[Any, Any] = KafkaStream(q, 0, decoder, decoder, "app", m)
    it = iter(stream)
    q.put(_chunk(info, range(0, 1000)))
    assert [x.offset for x in islice(it, 5)] == [0, 1, 2, 3, 4]
    snap = m.snapshot()  # the chunk the stream is in is counted as it is read
    assert (snap["MessagesPerSec"], snap["BytesPerSec"]) == ({"t": 5}, {"t": 50})
    # A rebalance drops the chunk (and the queue); the fetcher fetches from 5 again.
    q.clear()
    stream.clear()
    assert info.consumed_offset == 5
    assert m.snapshot()["MessagesPerSec"] == {"t": 5}
    q.put(_chunk(info, range(5, 1005)))
    assert [x.offset for x in islice(it, 5)] == [5, 6, 7, 8, 9]
    assert m.snapshot()["MessagesPerSec"] == {"t": 10}
    assert m.snapshot()["AllTopicsBytesPerSec"] == 100  # read twice: counted once
    # Shutdown clears the stream too: what was handed out stays counted, once.
    stream.clear()
    assert m.snapshot()["MessagesPerSec"] == {"t": 10}


def test_a_chunk_is_counted_as_the_iterator_leaves_it_without_a_read() -> None:
    """Unread metrics: each chunk's messages handed out are counted as the iterator leaves
    it (used up, or dropped), with no per-message call."""
    recorded: list[tuple[str, int, int]] = []

    class Recorder:
        counts_bytes = True

        def record_messages(self, topic: str, n: int, nbytes: int) -> None:
            recorded.append((topic, n, nbytes))

    q = ChunkQueue(4)
    info = PartitionTopicInfo("t", 0, q, 0, 0, 1 << 20, "app", "app-0")
    stream: KafkaStream[Any, Any] = KafkaStream(q, 0, metrics=Recorder())
    it = iter(stream)
    q.put(_chunk(info, range(0, 3)))
    q.put(_chunk(info, range(3, 10)))
    assert [x.offset for x in islice(it, 5)] == [0, 1, 2, 3, 4]
    assert recorded == [("t", 3, 30)]  # the first chunk, left; the second is still read
    stream.clear()
    assert recorded == [("t", 3, 30), ("t", 2, 20)]
    with pytest.raises(ConsumerTimeoutException):
        next(it)
    assert recorded == [("t", 3, 30), ("t", 2, 20)]


# --------------------------------------------------------------------------------------
# The endpoint: its address, idle connections, close()


def _idle_connections(port: int, n: int) -> list[socket.socket]:
    out = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        out.append(s)
    return out


def _closed_by_server(s: socket.socket) -> bool:
    s.settimeout(0.05)
    try:
        return s.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


def test_the_endpoint_binds_127_0_0_1_unless_told() -> None:
    assert ConsumerConfig({"zookeeper.connect": "h:2181", "group.id": "g"}) \
        .metrics_address == "127.0.0.1"
    m = ConsumerMetrics("app")
    try:
        m.serve(0)
        assert m._server.server_address[0] == "127.0.0.1"
    finally:
        m.close()


def _started_since(before: set[threading.Thread]) -> int:
    """How many threads alive now were not alive in ``before``: the threads a test made (a
    thread of an earlier test ending meanwhile does not change the count, as it did with
    ``threading.active_count()``)."""
    return sum(1 for t in threading.enumerate() if t not in before)


def test_idle_connections_end_after_the_client_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each idle connection held a thread for ever (300 connections, 300 threads)."""
    import zkconsumer.consumer.metrics as metrics_module

    monkeypatch.setattr(metrics_module, "CLIENT_TIMEOUT_S", 0.3, raising=False)
    m = ConsumerMetrics("app")
    before = set(threading.enumerate())
    try:
        port = m.serve(0, "127.0.0.1")
        idle = _idle_connections(port, 20)
        try:
            wait_until(lambda: all(_closed_by_server(s) for s in idle), 10,
                       "the server closed the idle connections")
            wait_until(lambda: _started_since(before) == 1, 10,
                       "their threads ended")
            assert scrape(port)[("zkconsumer_max_lag", APP)] == 0
        finally:
            for s in idle:
                s.close()
    finally:
        m.close()


def test_a_client_sending_a_byte_now_and_then_is_cut_at_the_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Never silent for the client timeout, such a client held its thread for as long as it
    went on (the request line may be 64 KiB long)."""
    import zkconsumer.consumer.metrics as metrics_module

    monkeypatch.setattr(metrics_module, "CLIENT_DEADLINE_S", 1.0, raising=False)
    m = ConsumerMetrics("app")
    stop = threading.Event()
    try:
        port = m.serve(0, "127.0.0.1")
        (slow,) = _idle_connections(port, 1)

        def drip() -> None:
            while not stop.wait(0.2):
                try:
                    slow.send(b"G")
                except OSError:
                    return

        dripping = threading.Thread(target=drip, daemon=True)
        dripping.start()
        try:
            wait_until(lambda: _closed_by_server(slow), 10, "the slow client cut")
        finally:
            stop.set()
            dripping.join(5)
            slow.close()
        assert scrape(port)[("zkconsumer_max_lag", APP)] == 0
    finally:
        m.close()


def test_connections_beyond_the_bound_are_closed_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A thread per connection, with no bound: a client opening many kept as many threads."""
    import zkconsumer.consumer.metrics as metrics_module

    monkeypatch.setattr(metrics_module, "MAX_CLIENTS", 3, raising=False)
    m = ConsumerMetrics("app")
    before = set(threading.enumerate())
    try:
        port = m.serve(0, "127.0.0.1")
        idle = _idle_connections(port, 3)
        try:
            wait_until(lambda: _started_since(before) == 1 + 3, 10,
                       "a thread per connection")
            (extra,) = _idle_connections(port, 1)
            try:
                wait_until(lambda: _closed_by_server(extra), 3, "the extra connection closed")
            finally:
                extra.close()
            assert _started_since(before) == 1 + 3
            assert not any(_closed_by_server(s) for s in idle)
        finally:
            for s in idle:
                s.close()
        wait_until(lambda: _started_since(before) == 1, 10, "their threads ended")
        assert scrape(port)[("zkconsumer_max_lag", APP)] == 0
    finally:
        m.close()


def test_close_cuts_idle_connections_without_waiting_for_them() -> None:
    m = ConsumerMetrics("app")
    before = set(threading.enumerate())
    port = m.serve(0, "127.0.0.1")
    idle = _idle_connections(port, 5)
    try:
        wait_until(lambda: _started_since(before) >= 1 + len(idle), 10,
                   "a thread per connection")
        closer = threading.Thread(target=m.close, daemon=True)
        closer.start()
        closer.join(3)  # less than CLIENT_TIMEOUT_S: close() did not wait for them
        assert not closer.is_alive(), "close() waits on idle connections"
        wait_until(lambda: all(_closed_by_server(s) for s in idle), 3, "connections cut")
        wait_until(lambda: _started_since(before) == 0, 3, "no thread left")
    finally:
        for s in idle:
            s.close()
        m.close()


# --------------------------------------------------------------------------------------
# FetchQueueSize of wildcard streams: per matched topic, never the regex


def test_a_wildcard_queue_has_a_series_per_subscribed_topic() -> None:
    m = ConsumerMetrics("app")
    q: queue.Queue[int] = queue.Queue()
    q.put(1)
    m.watch_wildcard_queue("app_c-0", q)
    assert m.snapshot()["FetchQueueSize"] == {}  # no rebalance yet: nothing matched
    m.set_subscribed_topics(["t", "u"])
    assert m.snapshot()["FetchQueueSize"] == {"t": {"app_c-0": 1}, "u": {"app_c-0": 1}}
    q.put(2)
    m.set_subscribed_topics(["u", "v"])  # t deleted, v created
    assert m.snapshot()["FetchQueueSize"] == {"u": {"app_c-0": 2}, "v": {"app_c-0": 2}}
    assert queue_series(m) == {("u", "app_c-0"): 2, ("v", "app_c-0"): 2}
    m.close()
    assert m.snapshot()["FetchQueueSize"] == {}


def queue_series(m: ConsumerMetrics) -> dict[tuple[str, str], float]:
    out = {}
    for family in text_string_to_metric_families(m.render().decode()):
        for s in family.samples:
            if s.name == "zkconsumer_fetch_queue_size":
                out[(s.labels["topic"], s.labels["thread_id"])] = s.value
    return out


def test_a_wildcard_member_has_fetch_queue_size_per_matched_topic(
    stack: StackInfo, names: Any, topic_factory: Any,
) -> None:
    t1 = topic_factory(names("w1"), 1)
    topic_factory(names("x"), 1)
    regex = f"w[0-9]-{names.suffix}"
    with members(stack, names.group, "a") as (a,):
        a.create_message_streams_by_filter(Whitelist(regex), 2)
        threads = [f"{a.consumer_id}-0", f"{a.consumer_id}-1"]
        wait_until(lambda: len(a.owned_partitions()) == 1, 30, "a owns w1")
        assert queue_series(a.metrics) == {(t1, t): 0 for t in threads}
        # A new matching topic gets its series at the rebalance its creation causes.
        t2 = topic_factory(names("w2"), 1)
        wait_until(lambda: len(a.owned_partitions()) == 2, 30, "a owns w2 too")
        assert queue_series(a.metrics) == {(t, th): 0 for t in (t1, t2) for th in threads}
        assert a.metrics.snapshot()["FetchQueueSize"] == {
            t1: dict.fromkeys(threads, 0), t2: dict.fromkeys(threads, 0)}


def test_a_connector_serves_on_its_metrics_address(stack: StackInfo, names: Any) -> None:
    c = ZookeeperConsumerConnector(ConsumerConfig({
        "zookeeper.connect": stack.zookeeper, "group.id": names.group,
        "metrics.port": 0, "metrics.address": "0.0.0.0",
    }), fetcher_factory=NullFetcher)
    try:
        assert c.metrics._server.server_address[0] == "0.0.0.0"
        assert scrape(c.metrics_port or 0)[("zkconsumer_max_lag",
                                            (("client_id", names.group),
                                             ("consumer_id", "")))] == 0
    finally:
        c.shutdown()


def test_paths_other_than_metrics_are_404() -> None:
    """Every path answered the metrics with 200 (a typo in a scrape config went unseen)."""
    m = ConsumerMetrics("app")
    try:
        port = m.serve(0, "127.0.0.1")
        for path in ("/", "/metric", "/metrics/x", "/favicon.ico"):
            with pytest.raises(urllib.error.HTTPError) as answer:
                urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10)
            assert answer.value.code == 404
            assert answer.value.read() == b"not found: the metrics are on /metrics\n"
        assert scrape(port)[("zkconsumer_max_lag", APP)] == 0
    finally:
        m.close()


def test_a_metrics_port_in_use_names_the_key(stack: StackInfo, names: Any) -> None:
    """It was OSError "[Errno 98] Address already in use", naming neither key nor port."""
    from zkconsumer._errors import MetricsPortError, ZkConsumerError

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(MetricsPortError) as failed:
            ZookeeperConsumerConnector(ConsumerConfig({
                "zookeeper.connect": stack.zookeeper, "group.id": names.group,
                "metrics.port": port}), fetcher_factory=NullFetcher)
    assert str(failed.value) == (f"cannot serve metrics on metrics.port={port} "
                                 "(metrics.address=127.0.0.1): Address already in use")
    assert isinstance(failed.value, ZkConsumerError) and isinstance(failed.value, OSError)


def test_members_are_told_apart_and_every_owned_partition_has_a_lag_from_the_start(
    stack: StackInfo, names: Any, topic_factory: Any,
) -> None:
    """Two members of a group had the same labels (client_id is the group id by default);
    a partition with nothing fetched yet had no ConsumerLag series."""
    from tests.support import produce

    topic = topic_factory(names.topic, 4)
    produce(stack.bootstrap, topic, [(0, None, b"x")] * 3)
    connectors = []
    with ExitStack() as cleanup:
        for cid in ("a", "b"):
            c = ZookeeperConsumerConnector(ConsumerConfig({
                "zookeeper.connect": stack.zookeeper, "group.id": names.group,
                "consumer.id": cid, "auto.commit.enable": False, "rebalance.backoff.ms": 200,
                "auto.offset.reset": "smallest", "metrics.port": 0}))
            cleanup.callback(c.shutdown)
            c.create_message_streams({topic: 1})
            connectors.append(c)
        a, b = connectors
        wait_until(lambda: len(a.owned_partitions()) == 2 == len(b.owned_partitions()), 30,
                   "two partitions each")

        def lags(c: ZookeeperConsumerConnector) -> dict[int, float]:
            out = {}
            for (name, labels), value in scrape(c.metrics_port or 0).items():
                found = dict(labels)
                assert found["consumer_id"] == c.consumer_id, (name, found)
                assert found["client_id"] == names.group
                if name == "zkconsumer_consumer_lag":
                    out[int(found["partition"])] = value
            return out

        # Nothing consumed (the streams are not read), partitions 1-3 empty: a series each.
        wait_until(lambda: lags(a) == {0: 3, 1: 0}, 30, "a's lags")
        wait_until(lambda: lags(b) == {2: 0, 3: 0}, 30, "b's lags")
        assert a.consumer_id != b.consumer_id
