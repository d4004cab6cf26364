"""ConsumerMetrics: the legacy names, exact values, served over HTTP and scraped."""

from __future__ import annotations

import queue
import urllib.error
import urllib.request

import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from zkconsumer._metrics import FETCH_RATE_WINDOW_S, LEGACY_NAMES, ConsumerMetrics


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
        cid = (("client_id", "a"),)
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
                          (("client_id", "b"), ("topic", "t")))] == 1
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
