"""The consumer end to end: the legacy program, rebalances mid-stream, kills, shutdown."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.support import StackInfo, group_owners, offset_znodes, produce, produce_bulk, wait_until
from zkconsumer import (
    ConsumerConfig,
    ConsumerShutdownError,
    ConsumerTimeoutException,
    ZookeeperConsumerConnector,
    create_consumer_connector,
)
from zkconsumer.broker.clients import log_end_offsets
from zkconsumer.zk import paths as zp

CHUNKS = int(os.environ.get("ZKC_TEST_CHUNKS", "2"))  # raise it to see the memory test fail
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BACKENDS = ("kafka-python", "confluent")
_backend = BACKENDS[0]  # the fetch backend of the test running now (see the fixture below)


@pytest.fixture(autouse=True, params=BACKENDS)
def fetch_backend(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every test of this module runs once per fetch backend (connectors and member
    processes alike)."""
    global _backend
    _backend = request.param
    try:
        yield request.param
    finally:
        _backend = BACKENDS[0]


def _props(stack: StackInfo, group: str, **extra: object) -> dict[str, object]:
    props: dict[str, object] = {
        "zookeeper.connect": stack.zookeeper,
        "group.id": group,
        "auto.offset.reset": "smallest",
        "zookeeper.session.timeout.ms": 2000,
        "rebalance.backoff.ms": 200,
        "auto.commit.enable": False,
        "fetch.backend": _backend,
    }
    props.update({k.replace("_", "."): v for k, v in extra.items()})
    return props


class Collector:
    """Drains streams in threads; counts (partition, offset) deliveries."""

    def __init__(self) -> None:
        self.seen: Counter[tuple[int, int]] = Counter()
        self.values: dict[tuple[int, int], bytes] = {}
        self.lock = threading.Lock()
        self.threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []

    def drain(self, stream: Any) -> None:
        def run() -> None:
            try:
                while True:
                    try:
                        for m in stream:
                            with self.lock:
                                self.seen[(m.partition, m.offset)] += 1
                                self.values[(m.partition, m.offset)] = m.message
                        return
                    except ConsumerTimeoutException:
                        continue
            except BaseException as e:  # noqa: BLE001 - asserted by the tests
                self.errors.append(e)

        t = threading.Thread(target=run, daemon=True)
        t.start()
        self.threads.append(t)

    def count(self) -> int:
        with self.lock:
            return len(self.seen)

    def duplicates(self) -> int:
        with self.lock:
            return sum(v - 1 for v in self.seen.values())


@contextmanager
def connector(stack: StackInfo, group: str, **extra: object) -> Iterator[
        ZookeeperConsumerConnector]:
    c = create_consumer_connector(ConsumerConfig(_props(stack, group, **extra)))
    try:
        yield c
    finally:
        c.shutdown()


def _next_or_none(stream: Any) -> Any:
    """The stream's next message, or None when it times out (consumer.timeout.ms)."""
    try:
        return next(iter(stream))
    except ConsumerTimeoutException:
        return None


def _fill(stack: StackInfo, topic: str, partitions: int, n: int) -> None:
    produce(stack.bootstrap, topic,
            ((i % partitions, str(i).encode(), f"m{i}".encode()) for i in range(n)))


def test_legacy_program_two_connectors_exactly_once(stack, zk, names, topic_factory) -> None:
    topic = topic_factory(names.topic, 4)
    n = 50_000
    _fill(stack, topic, 4, n)
    col = Collector()
    with connector(stack, names.group, consumer_timeout_ms=200) as a, connector(
            stack, names.group, consumer_timeout_ms=200) as b:
        for c in (a, b):
            for s in c.create_message_streams({topic: 2})[topic]:
                col.drain(s)
        wait_until(lambda: col.count() >= n, 180, f"{n} messages")
        assert col.duplicates() == 0
        assert a.stats.rebalances + b.stats.rebalances >= 2
        a.commit_offsets()
        b.commit_offsets()
        assert offset_znodes(zk, names.group, topic, 4) == {p: n // 4 for p in range(4)}
    assert col.errors == []
    assert sorted(col.seen) == sorted((i % 4, i // 4) for i in range(n))
    assert col.values[(1, 0)] == b"m1"


def test_third_member_joins_and_leaves_without_loss_or_duplicates(
        stack, zk, names, topic_factory) -> None:
    topic = topic_factory(names.topic, 4)
    n = 20_000
    _fill(stack, topic, 4, n)
    col = Collector()
    # Commits happen only at rebalances and shutdown (graceful): no duplicates expected.
    with connector(stack, names.group, consumer_timeout_ms=100, auto_commit_enable=True,
                   fetch_message_max_bytes=4096, queued_max_message_chunks=1) as a:
        for s in a.create_message_streams({topic: 2})[topic]:
            col.drain(s)
        wait_until(lambda: col.count() >= n // 4, 60, "a quarter consumed")
        with connector(stack, names.group, consumer_timeout_ms=100,
                       auto_commit_enable=True) as c:
            col.drain(c.create_message_streams({topic: 1})[topic][0])
            wait_until(lambda: len(set(group_owners(zk, names.group, topic).values())) == 3,
                       30, "three owners")
            wait_until(lambda: col.count() >= n // 2, 60, "half consumed")
        wait_until(lambda: col.count() >= n, 120, "everything consumed")
    assert col.errors == []
    assert len(col.seen) == n
    assert col.duplicates() == 0


def test_partitions_that_stay_keep_fetching_through_a_join_and_a_leave(
        stack, zk, names, topic_factory) -> None:
    # Only the partitions that move are stopped, committed and released: the others keep
    # their PartitionTopicInfo (their fetch and their consumed offset) throughout, and
    # nothing is lost or delivered twice.
    topic = topic_factory(names.topic, 4)
    n = 8_000
    _fill(stack, topic, 4, n)
    col = Collector()
    with connector(stack, names.group, consumer_timeout_ms=100, auto_commit_enable=True,
                   fetch_message_max_bytes=4096, queued_max_message_chunks=1) as a:
        for s in a.create_message_streams({topic: 2})[topic]:
            col.drain(s)
        wait_until(lambda: col.count() >= n // 8, 60, "some consumed")
        before = a.partition_infos()
        with connector(stack, names.group, consumer_timeout_ms=100,
                       auto_commit_enable=True) as b:
            col.drain(b.create_message_streams({topic: 1})[topic][0])
            wait_until(lambda: len(set(group_owners(zk, names.group, topic).values())) == 3,
                       30, "three owners")
            wait_until(lambda: 0 < len(a.partition_infos()) < 4, 30, "a's rebalance")
            during = a.partition_infos()
            kept = {tp for tp in during if during[tp] is before.get(tp)}
            assert kept and kept == set(during)  # a's remaining partitions never restarted
            assert a.stats.incremental == 1
            assert all(before[tp].revoked for tp in set(before) - set(during))
            wait_until(lambda: col.count() >= n // 2, 60, "half consumed")
        wait_until(lambda: len(a.partition_infos()) == 4, 30, "a owns everything again")
        after = a.partition_infos()
        assert all(after[tp] is during[tp] for tp in during)
        assert a.stats.incremental >= 2
        wait_until(lambda: col.count() >= n, 120, "everything consumed")
    assert col.errors == []
    assert len(col.seen) == n
    assert col.duplicates() == 0


def test_member_killed_mid_stream_loses_nothing(
    stack, zk, names, topic_factory, tmp_path
) -> None:
    topic = topic_factory(names.topic, 4)
    n = 20_000
    _fill(stack, topic, 4, n)
    lines = tmp_path / "victim.log"  # a file, not a pipe: see tests/member.py
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.member", stack.zookeeper, names.group, topic, "2",
         "auto.offset.reset=smallest", "auto.commit.interval.ms=200", f"out={lines}",
         "fetch.message.max.bytes=2048", f"fetch.backend={_backend}"],
        stdout=subprocess.PIPE, text=True, cwd=ROOT)

    def read_victim() -> Counter[tuple[int, int]]:
        seen: Counter[tuple[int, int]] = Counter()
        for out in lines.read_text().splitlines() if lines.exists() else []:
            if out.startswith("MSG ") and out.count(" ") == 3:  # not a line being written
                _, _, p, o = out.split()
                seen[(int(p), int(o))] += 1
        return seen

    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("READY "), line
        victim = line.split()[1]
        col = Collector()
        with connector(stack, names.group, consumer_timeout_ms=100,
                       auto_commit_enable=True, auto_commit_interval_ms=200) as a:
            col.drain(a.create_message_streams({topic: 1})[topic][0])
            wait_until(lambda: sum(read_victim().values()) > 1000, 60, "the victim consuming")
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            victim_seen = read_victim()  # all of it: the victim is dead
            wait_until(lambda: not zk.exists(zp.id_path(names.group, victim)), 30,
                       "the victim's session to expire")
            delivered = lambda: set(col.seen) | set(victim_seen)  # noqa: E731
            wait_until(lambda: len(delivered()) >= n, 120, "every message delivered")
        both = Counter(col.seen) + victim_seen
        duplicates = sum(v - 1 for v in both.values())
        assert set(both) == {(i % 4, i // 4) for i in range(n)}
        # Duplicates only from the victim's uncommitted window: what it received on the
        # partitions it owned, after its last commit, at most.
        assert duplicates <= sum(victim_seen.values())
    finally:
        proc.kill()
        proc.wait()


def test_offset_out_of_range_resets_both_ways(stack, zk, names, topic_factory) -> None:
    topic = topic_factory(names.topic, 1)
    _fill(stack, topic, 1, 100)
    g = names.group
    # Committed offset beyond the log end, and -> largest
    zk.create(zp.offset_path(g, topic, 0), zp.encode_offset(10_000), makepath=True)
    with connector(stack, g, auto_offset_reset="largest", consumer_timeout_ms=300) as c:
        stream = c.create_message_streams({topic: 1})[topic][0]
        with pytest.raises(ConsumerTimeoutException):
            next(iter(stream))
        info = c.partition_infos()[next(iter(c.partition_infos()))]
        wait_until(lambda: info.fetched_offset == 100, 20, "reset to the log end")
        assert info.consumed_offset == 100
        produce(stack.bootstrap, topic, [(0, None, b"after")])
        m = next(iter(stream))
        assert (m.offset, m.message) == (100, b"after")
    # Beyond the end again, and -> smallest
    zk.set(zp.offset_path(g, topic, 0), zp.encode_offset(50_000))
    with connector(stack, g, auto_offset_reset="smallest", consumer_timeout_ms=3000) as c:
        stream = c.create_message_streams({topic: 1})[topic][0]
        m = next(iter(stream))
        assert (m.offset, m.message) == (0, b"m0")


def test_no_committed_offset_largest_starts_at_true_log_end(
        stack, names, topic_factory) -> None:
    topic = topic_factory(names.topic, 1)
    _fill(stack, topic, 1, 500)  # multi-record batches
    assert log_end_offsets_for(stack, topic) == 500
    with connector(stack, names.group, auto_offset_reset="largest",
                   consumer_timeout_ms=300) as c:
        stream = c.create_message_streams({topic: 1})[topic][0]
        with pytest.raises(ConsumerTimeoutException):
            next(iter(stream))
        # "largest" is the log end when the fetcher looks it up: produced before that, the
        # new message would be skipped (as by the legacy consumer), so wait for the lookup.
        wait_until(lambda: [i.fetched_offset for i in c.partition_infos().values()] == [500],
                   30, "the start offset looked up")
        produce(stack.bootstrap, topic, [(0, b"k", b"new")])
        # The stream stays usable after a timeout; the new message may take more than one
        # 300 ms wait to be fetched (a fetch waits up to fetch.wait.max.ms on the broker).
        m = wait_until(lambda: _next_or_none(stream), 30, "the new message")
        assert (m.offset, m.key, m.message) == (500, b"k", b"new")


def log_end_offsets_for(stack: StackInfo, topic: str) -> int:
    from zkconsumer import TopicPartition

    ends = log_end_offsets([(topic, 0)], bootstrap_servers=stack.bootstrap)
    return ends[TopicPartition(topic, 0)]


def test_transactional_messages_are_read_uncommitted_on_both_backends(
        stack, zk, names, topic_factory) -> None:
    """As the legacy consumer (no isolation level): every message up to the high watermark,
    those of an aborted and of a still open transaction included, and no transaction marker.
    librdkafka's default (read_committed) stopped the confluent backend at the open
    transaction: nothing after it was delivered (a hanging transaction stalled the
    partition), where kafka-python delivered it all."""
    from confluent_kafka import Producer

    topic = topic_factory(names.topic, 1)
    produce(stack.bootstrap, topic, [(0, None, b"plain0"), (0, None, b"plain1")])  # 0, 1
    txn = Producer({"bootstrap.servers": stack.bootstrap,
                    "transactional.id": names("txn"), "transaction.timeout.ms": 300_000})
    left_open = False
    try:
        txn.init_transactions(30)
        for tag, end in (("aborted", txn.abort_transaction),  # 2, 3; its marker 4
                         ("committed", txn.commit_transaction),  # 5, 6; marker 7
                         ("open", None)):  # 8, 9, 10, and no marker: left open
            txn.begin_transaction()
            left_open = end is None
            for i in range(2 if end else 3):
                txn.produce(topic, f"{tag}{i}".encode(), partition=0)
            assert txn.flush(30) == 0
            if end is not None:
                end(30)
        produce(stack.bootstrap, topic, [(0, None, f"after{i}".encode()) for i in range(3)])
        expected = [(0, b"plain0"), (1, b"plain1"), (2, b"aborted0"), (3, b"aborted1"),
                    (5, b"committed0"), (6, b"committed1"), (8, b"open0"), (9, b"open1"),
                    (10, b"open2"), (11, b"after0"), (12, b"after1"), (13, b"after2")]
        got: list[tuple[int, bytes]] = []
        with connector(stack, names.group, consumer_timeout_ms=10_000) as c:
            it = iter(c.create_message_streams({topic: 1})[topic][0])
            try:
                while len(got) < len(expected):
                    m = next(it)
                    got.append((m.offset, m.message))
            except ConsumerTimeoutException:
                pass  # asserted below: what came before the wait that timed out
            assert got == expected
            c.commit_offsets()
            assert offset_znodes(zk, names.group, topic, 1) == {0: 14}
    finally:
        try:
            if left_open:
                txn.abort_transaction(30)
        finally:
            txn.close()


def test_decoders_and_metadata(stack, names, topic_factory) -> None:
    topic = topic_factory(names.topic, 1)
    produce(stack.bootstrap, topic, [(0, b"7", b"hello"), (0, None, b"world")])
    with connector(stack, names.group, consumer_timeout_ms=5000) as c:
        stream = c.create_message_streams(
            {topic: 1}, key_decoder=lambda b: int(b), value_decoder=bytes.decode)[topic][0]
        it = iter(stream)
        m1, m2 = next(it), next(it)
    assert (m1.topic, m1.partition, m1.offset, m1.key, m1.message) == (topic, 0, 0, 7, "hello")
    assert (m2.key, m2.message, m2.offset) == (None, "world", 1)
    assert m1.timestamp > 0


def test_shutdown_ends_an_iterator_blocked_in_another_thread(
        stack, names, topic_factory) -> None:
    topic = topic_factory(names.topic, 1)
    c = create_consumer_connector(ConsumerConfig(_props(stack, names.group)))
    stream = c.create_message_streams({topic: 1})[topic][0]
    done = threading.Event()
    got: list[Any] = []

    def run() -> None:
        got.extend(stream)  # blocks: nothing to consume, no consumer timeout
        done.set()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    assert not done.wait(0.3)
    c.shutdown()
    assert done.wait(10)
    assert got == []
    c.shutdown()  # idempotent
    # Iterating again after the shutdown ends at once too (the client's stop reports the
    # session LOST afterwards: that must not pause the streams again).
    late: list[Any] = []
    again = threading.Thread(target=lambda: late.append(next(iter(stream), "end")), daemon=True)
    again.start()
    again.join(10)
    assert late == ["end"], "next() after shutdown() blocked"
    # Committing now cannot store anything (what was owned is forgotten): it says so, rather
    # than return as if the application's offsets were stored.
    for commit in (lambda: c.commit_offsets(), lambda: c.commit_offsets({(topic, 0): 0})):
        with pytest.raises(ConsumerShutdownError, match="shut down; nothing committed"):
            commit()


def test_commit_before_release_on_rebalance(stack, zk, names, topic_factory) -> None:
    topic = topic_factory(names.topic, 2)
    _fill(stack, topic, 2, 10)
    with connector(stack, names.group, auto_commit_enable=True,
                   consumer_timeout_ms=3000) as a:
        it = iter(a.create_message_streams({topic: 1})[topic][0])
        got = [next(it) for _ in range(4)]
        assert len(got) == 4
        consumed = {p: o for p, o in ((m.partition, m.offset + 1) for m in got)}
        with connector(stack, names.group) as b:
            b.create_message_streams({topic: 1})
            wait_until(lambda: len(a.owned_partitions()) == 1, 20, "a gave one partition up")
        wait_until(lambda: len(a.owned_partitions()) == 2, 20, "a owns both again")
        offs = offset_znodes(zk, names.group, topic, 2)
        for p, o in consumed.items():
            assert offs[p] == o


def _rss_mb(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _slow_member(stack: StackInfo, group: str, topic: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.member", stack.zookeeper, group, topic, "1",
         "auto.offset.reset=smallest", "print=1", "slow=0.2",
         "fetch.message.max.bytes=1048576", f"queued.max.message.chunks={CHUNKS}",
         f"fetch.backend={_backend}"],
        stdout=subprocess.PIPE, text=True, cwd=ROOT)


def test_slow_consumer_memory_stays_bounded(stack, names, topic_factory) -> None:
    """100 MB wait in the topic; a slow member's RSS grows by about the queue bound only."""
    empty = topic_factory(names("empty"), 1)
    full = topic_factory(names.topic, 1)
    payload = b"x" * 10_000
    produce_bulk(stack.bootstrap, full, 0, payload, 10_000)  # 100 MB
    baseline = _slow_member(stack, names("g0"), empty)
    slow = _slow_member(stack, names.group, full)
    try:
        for p in (baseline, slow):
            assert p.stdout is not None
            assert p.stdout.readline().startswith("READY ")
        assert slow.stdout is not None
        for _ in range(5):  # it is consuming (slowly), so its fetcher has filled the queue
            assert slow.stdout.readline().startswith("MSG ")
        base = _rss_mb(baseline.pid)
        # bound: streams x queued.max.message.chunks x fetch.message.max.bytes = 2 MB, plus
        # the fetch client's own buffers; far below the 100 MB waiting in the topic.
        samples = []
        for _ in range(10):
            samples.append(_rss_mb(slow.pid))
            assert slow.stdout.readline().startswith("MSG ")  # paced by the slow application
        print(f"baseline {base:.0f} MB, slow member {max(samples):.0f} MB")
        assert max(samples) - base < 40, (base, samples)
    finally:
        for p in (baseline, slow):
            p.kill()
            p.wait()


def test_new_owner_starts_after_what_the_old_owner_consumed(
        stack, zk, names, topic_factory) -> None:
    """The new owner reads the committed offset only once it owns the partition.

    The old owner commits just before it releases; a new owner that read offsets before its
    claim (while waiting for the release) would replay the old owner's last window.
    """
    topic = topic_factory(names.topic, 2)
    _fill(stack, topic, 2, 200)
    with connector(stack, names.group, auto_commit_enable=True,
                   consumer_timeout_ms=3000) as a:
        it = iter(a.create_message_streams({topic: 1})[topic][0])
        first = [next(it) for _ in range(150)]
        consumed = {m.partition: m.offset + 1 for m in first}
        b = create_consumer_connector(ConsumerConfig(_props(
            stack, names.group, auto_commit_enable=True, consumer_timeout_ms=3000)))
        try:
            with a._rebalance_lock:  # a is slow to react: b's claim must wait for it
                joined = threading.Thread(target=b.create_message_streams, args=({topic: 1},))
                joined.start()
                wait_until(lambda: b.stats.claim_waits > 0, 20, "b waiting for a's release")
            joined.join(30)
            mine = b.owned_partitions()
            assert len(mine) == 1
            (tp,) = mine
            info = b.partition_infos()[tp]
            assert info.consumed_offset == consumed[tp.partition]
        finally:
            b.shutdown()
