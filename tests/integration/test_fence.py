"""Fencing: a member whose ZooKeeper session may be gone commits (and hands out) nothing.

A *zombie* here is a member whose ZooKeeper client was frozen (its connection thread stopped
in ``select``, as a process pause stops it) until the server expired the session and another
member took its partitions; the rest of its process runs on, unaware.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from operator import length_hint
from typing import Any

import pytest
from kazoo.client import KazooClient

from tests.support import NullFetcher, StackInfo, produce, wait_until
from tools.fault_harness import expire_session
from zkconsumer import (
    CommitFencedError,
    ConsumerConfig,
    ConsumerShutdownError,
    ConsumerTimeoutException,
    TopicPartition,
    ZkConnectionLostError,
    ZookeeperConsumerConnector,
    _speedups,
)
from zkconsumer.consumer.async_commit import AsyncCommitter
from zkconsumer.consumer.fence import SessionLease
from zkconsumer.consumer.gate import PyLeaseDeadline, PyLeasePermit, lease_clock
from zkconsumer.consumer.offsets import KafkaOffsetStore
from zkconsumer.zk import paths as zp

TP = TopicPartition


def _config(stack: StackInfo, group: str, **extra: object) -> ConsumerConfig:
    props: dict[str, object] = {
        "zookeeper.connect": stack.zookeeper,
        "group.id": group,
        "zookeeper.session.timeout.ms": 2000,
        "auto.commit.enable": False,
        "rebalance.backoff.ms": 200,
    }
    props.update({k.replace("_", "."): v for k, v in extra.items()})
    return ConsumerConfig(props)


@contextmanager
def member(stack: StackInfo, group: str, **extra: object) -> Iterator[ZookeeperConsumerConnector]:
    c = ZookeeperConsumerConnector(_config(stack, group, **extra), fetcher_factory=NullFetcher)
    try:
        yield c
    finally:
        c.shutdown()


class Freezer:
    """Stops a kazoo client's connection thread at its next ``select`` until thawed: no
    ping goes out, no answer or state change comes in, as in a paused process."""

    def __init__(self, zk: KazooClient) -> None:
        self._thawed = threading.Event()
        self._thawed.set()
        self._frozen = threading.Event()
        real = zk.handler.select

        def select(*args: Any, **kwargs: Any) -> Any:
            if not self._thawed.is_set():
                self._frozen.set()
                self._thawed.wait()
            return real(*args, **kwargs)

        zk.handler.select = select  # type: ignore[method-assign]

    def freeze(self) -> None:
        self._thawed.clear()
        wait_until(self._frozen.is_set, 10, "the connection thread frozen")

    def thaw(self) -> None:
        self._thawed.set()


def _expired(zk: KazooClient, path: str) -> bool:
    return zk.exists(path) is None


def _zombie(stack: StackInfo, zk: KazooClient, a: ZookeeperConsumerConnector, group: str,
            topic: str) -> Freezer:
    """Freeze ``a``'s client until the server has expired its session (its owner znode of
    partition 0 is gone)."""
    freezer = Freezer(a._zk)
    freezer.freeze()
    wait_until(lambda: _expired(zk, zp.owner_path(group, topic, 0)), 20,
               "the frozen member's session expired")
    return freezer


def test_a_zombie_cannot_rewind_the_new_owners_kafka_offset(
        stack, zk, names, topic_factory) -> None:
    """Kafka storage has no condition to write against: the zombie's commit is dropped
    because it cannot show its session alive (its lease is stale and ZooKeeper does not
    answer). Before the fence, the commit was written and moved the offset back to 10."""
    topic = topic_factory(names.topic, 1)
    g = names.group
    kafka = KafkaOffsetStore(_config(stack, g), g, lambda: [stack.bootstrap])
    try:
        # "continue": the delivery fence stays open, so that the commit's own fence is what
        # stops the write (with "pause" the member is paused by then, and refuses at once).
        with member(stack, g, offsets_storage="kafka", zookeeper_outage_delivery="continue") as a:
            a.create_message_streams({topic: 1})
            freezer = _zombie(stack, zk, a, g, topic)
            try:
                with member(stack, g, offsets_storage="kafka") as b:
                    b.create_message_streams({topic: 1})
                    wait_until(lambda: TP(topic, 0) in b.owned_partitions(), 20,
                               "the other member owns the partition")
                    b.commit_offsets({(topic, 0): 100})
                    assert not a.paused  # its client noticed nothing
                    with pytest.raises(ZkConnectionLostError):
                        a.commit_offsets({(topic, 0): 10})
                    assert kafka.read([TP(topic, 0)]) == {TP(topic, 0): 100}
            finally:
                freezer.thaw()
    finally:
        kafka.close()


def test_a_members_store_writes_no_offset_of_a_partition_another_session_owns(
        stack, zk, names, topic_factory) -> None:
    """The store the Spark source commits through: its ZooKeeper transaction checks the
    owner znode, so the old member's commit of a partition the other member owns now is
    dropped, naming it, while its own partition's offset is written. Before the fence, the
    other member's offset went back to 10."""
    topic = topic_factory(names.topic, 2)
    g = names.group
    with member(stack, g) as a:
        a.create_message_streams({topic: 1})
        store = a.zookeeper_offset_store(timeout_s=5.0)
        with member(stack, g) as b:
            b.create_message_streams({topic: 1})
            wait_until(lambda: len(a.owned_partitions()) == 1
                       and len(b.owned_partitions()) == 1, 20, "one partition each")
            (theirs,) = b.owned_partitions()
            (mine,) = a.owned_partitions()
            b.commit_offsets({theirs: 100})
            with pytest.raises(CommitFencedError) as e:
                store.commit({theirs: 10, mine: 7})
            assert e.value.partitions == [theirs]
            assert zk.get(zp.offset_path(g, topic, theirs.partition))[0] == b"100"
            assert zk.get(zp.offset_path(g, topic, mine.partition))[0] == b"7"


def test_commits_of_a_partition_given_away_are_dropped_with_a_warning(
        stack, zk, names, topic_factory, caplog) -> None:
    """Consumed offsets of partitions no longer owned are dropped, named in a warning,
    and never written (the connector's own path)."""
    topic = topic_factory(names.topic, 2)
    g = names.group
    with member(stack, g) as a:
        a.create_message_streams({topic: 1})
        owned = set(a.owned_partitions())
        made_in = a._membership.session_gen
        with a._commit_lock:
            a._ownership.owned = {TP(topic, 0): a._ownership.owned[TP(topic, 0)]}
            result = a._commits.write_offsets({TP(topic, 0): 3, TP(topic, 1): 4}, False, made_in)
            a._ownership.owned = {tp: f"{a.consumer_id}-0" for tp in owned}
        assert isinstance(result, CommitFencedError)
        assert result.partitions == [(topic, 1)]
        assert f"{topic}:1" in caplog.text and "no longer owned" in caplog.text
        assert zk.exists(zp.offset_path(g, topic, 1)) is None
        assert zk.get(zp.offset_path(g, topic, 0))[0] == b"3"


def test_a_commit_made_under_an_earlier_session_is_dropped_whole(
        stack, zk, names, topic_factory) -> None:
    topic = topic_factory(names.topic, 1)
    g = names.group
    with member(stack, g) as a:
        a.create_message_streams({topic: 1})
        with a._commit_lock:
            result = a._commits.write_offsets({TP(topic, 0): 3}, False,
                                              a._membership.session_gen - 1)
        assert isinstance(result, CommitFencedError)
        assert "earlier ZooKeeper session" in str(result)
        assert zk.exists(zp.offset_path(g, topic, 0)) is None


def test_the_lease_goes_stale_after_its_share_of_the_timeout_and_on_a_clock_jump() -> None:
    now = [100.0]
    lease = SessionLease(0.5, 2.0, clock=lambda: now[0])
    assert not lease.fresh()
    lease.renew(7, 100.0)
    assert lease.fresh(7) and not lease.fresh(8)
    now[0] = 100.9
    assert lease.fresh()
    now[0] = 101.0  # half the timeout after the proof was sent
    assert not lease.fresh()
    lease.renew(7, 100.5)
    assert lease.fresh()
    now[0] = 109.0  # a pause: the monotonic clock jumped
    assert not lease.fresh()
    lease.renew(7, 99.0)  # an older proof never extends the lease
    assert not lease.fresh()
    lease.renew(8, 108.8)  # a new session starts over
    assert lease.fresh(8) and not lease.fresh(7)
    lease.forget()
    assert not lease.fresh()


# -- commit_offsets_async -------------------------------------------------------------------


class Calls:
    """Records callbacks; ``block`` makes the first one wait (holding the committer's thread,
    so that later commits queue up behind it)."""

    def __init__(self, block: bool = False) -> None:
        self.calls: list[tuple[dict[TopicPartition, int], BaseException | None]] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        if not block:
            self.release.set()

    def __call__(self, offsets: dict[TopicPartition, int], error: BaseException | None) -> None:
        self.entered.set()
        self.release.wait(30)
        self.calls.append((offsets, error))


def test_async_commits_return_at_once_and_land_in_order(stack, zk, names, topic_factory) -> None:
    topic = topic_factory(names.topic, 2)
    g = names.group
    with member(stack, g) as a:
        a.create_message_streams({topic: 1})
        calls = Calls(block=True)
        first = a.commit_offsets_async({(topic, 0): 1}, calls)
        wait_until(calls.entered.is_set, 10, "the first callback running")
        futures = [a.commit_offsets_async({(topic, 0): n, (topic, 1): 1000 - n}, calls)
                   for n in range(2, 60)]
        assert not any(f.done() for f in futures)  # queued behind the first: not waited for
        calls.release.set()
        for f in [first, *futures]:
            f.result(30)
        assert [o[TP(topic, 0)] for o, _ in calls.calls] == list(range(1, 60))
        assert all(error is None for _, error in calls.calls)
        assert zk.get(zp.offset_path(g, topic, 0))[0] == b"59"
        assert zk.get(zp.offset_path(g, topic, 1))[0] == b"941"


def test_an_async_commit_of_a_partition_not_owned_is_dropped_and_reported(
        stack, zk, names, topic_factory) -> None:
    topic = topic_factory(names.topic, 2)
    g = names.group
    with member(stack, g) as a, member(stack, g) as b:
        a.create_message_streams({topic: 1})
        b.create_message_streams({topic: 1})
        wait_until(lambda: len(a.owned_partitions()) == 1
                   and len(b.owned_partitions()) == 1, 20, "one partition each")
        (theirs,) = b.owned_partitions()
        (mine,) = a.owned_partitions()
        b.commit_offsets({theirs: 100})
        calls = Calls()
        future = a.commit_offsets_async({theirs: 10, mine: 5}, calls)
        with pytest.raises(CommitFencedError) as e:
            future.result(30)
        assert e.value.partitions == [theirs]
        assert calls.calls == [({theirs: 10, mine: 5}, e.value)]
        assert zk.get(zp.offset_path(g, topic, theirs.partition))[0] == b"100"
        assert zk.get(zp.offset_path(g, topic, mine.partition))[0] == b"5"


def test_an_async_commit_made_before_a_session_loss_is_never_written_after_it(
        stack, zk, names, topic_factory) -> None:
    topic = topic_factory(names.topic, 1)
    g = names.group
    with member(stack, g) as a:
        a.create_message_streams({topic: 1})
        calls = Calls(block=True)
        a.commit_offsets_async({(topic, 0): 1}, calls)
        wait_until(calls.entered.is_set, 10, "the first callback running")
        pending = a.commit_offsets_async({(topic, 0): 2}, calls)
        session = a._zk.client_id
        expire_session(stack.zookeeper, session)
        wait_until(lambda: a._zk.client_id != session and not a.paused
                   and TP(topic, 0) in a.owned_partitions(), 30,
                   "the member back under a new session, owning the partition again")
        calls.release.set()
        with pytest.raises(CommitFencedError, match="earlier ZooKeeper session"):
            pending.result(30)
        assert zk.get(zp.offset_path(g, topic, 0))[0] == b"1"


def test_shutdown_writes_queued_async_commits_and_refuses_new_ones(
        stack, zk, names, topic_factory) -> None:
    topic = topic_factory(names.topic, 1)
    g = names.group
    a = ZookeeperConsumerConnector(_config(stack, g), fetcher_factory=NullFetcher)
    a.create_message_streams({topic: 1})
    calls = Calls(block=True)
    a.commit_offsets_async({(topic, 0): 1}, calls)
    wait_until(calls.entered.is_set, 10, "the first callback running")
    queued = a.commit_offsets_async({(topic, 0): 7}, calls)
    stopper = threading.Thread(target=a.shutdown)
    stopper.start()
    wait_until(lambda: a._closed, 10, "shutdown begun")
    with pytest.raises(ConsumerShutdownError):
        a.commit_offsets_async({(topic, 0): 9})
    calls.release.set()
    stopper.join(30)
    assert queued.result(0) == {TP(topic, 0): 7}
    assert zk.get(zp.offset_path(g, topic, 0))[0] == b"7"


def test_async_commits_still_queued_when_closing_without_zookeeper_fail() -> None:
    written: list[dict[TopicPartition, int]] = []
    gate = threading.Event()
    writing = threading.Event()

    def write(offsets: dict[TopicPartition, int], made_in: int) -> None:
        writing.set()
        gate.wait(30)
        written.append(offsets)

    committer = AsyncCommitter("c1", write)
    calls = Calls()
    first = committer.submit({TP("t", 0): 1}, 0, calls)
    second = committer.submit({TP("t", 0): 2}, 0, calls)
    wait_until(writing.is_set, 10, "the first commit being written")
    closer = threading.Thread(target=committer.close, args=(0.0,))
    closer.start()
    wait_until(lambda: committer._abandon, 10, "the committer closing")
    gate.set()  # the write under way ends: it is not failed, the queued one is
    closer.join(30)
    first.result(10)
    with pytest.raises(ConsumerShutdownError):
        second.result(10)
    assert written == [{TP("t", 0): 1}]
    assert [type(e) for _, e in calls.calls] == [type(None), ConsumerShutdownError]


# -- the delivery fence ---------------------------------------------------------------------


class Drain:
    """Iterates a stream in a thread, recording (lease_clock() before next(), offset), with
    ``delay_s`` of work per message (so that the member has a backlog)."""

    def __init__(self, stream: Any, delay_s: float) -> None:
        self.seen: list[tuple[float, int, int]] = []
        self._stream = stream
        self._delay_s = delay_s
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        it = iter(self._stream)
        pause = threading.Event()
        while True:
            t0 = lease_clock()
            try:
                m = next(it)
            except StopIteration:
                return
            except ConsumerTimeoutException:
                continue
            self.seen.append((t0, m.partition, m.offset))
            pause.wait(self._delay_s)

    def after(self, t: float) -> list[tuple[float, int, int]]:
        return [d for d in self.seen if d[0] > t]

    def join(self) -> None:
        self._thread.join(30)


def _fetching_member(stack: StackInfo, group: str, **extra: object) -> ZookeeperConsumerConnector:
    props = {"fetch.message.max.bytes": 4096, "queued.max.message.chunks": 2,
             "auto.offset.reset": "smallest", "consumer.timeout.ms": 200,
             **{k.replace("_", "."): v for k, v in extra.items()}}
    return ZookeeperConsumerConnector(_config(stack, group, **props))


def test_a_member_whose_session_may_be_gone_hands_out_nothing(
        stack, zk, names, topic_factory) -> None:
    """The member's ZooKeeper client is frozen (a pause of its connection thread: the rest
    of the process runs on, fetching and handing out) until the session expired: from half
    the session timeout after the last answer it hands out nothing, though its client never
    reported the drop. Before the lease, it handed out its whole backlog."""
    topic = topic_factory(names.topic, 1)
    g = names.group
    produce(stack.bootstrap, topic, ((0, None, b"m%d" % i) for i in range(1500)))
    a = _fetching_member(stack, g)
    try:
        (stream,) = a.create_message_streams({topic: 1})[topic]
        drain = Drain(stream, 0.004)
        wait_until(lambda: len(drain.seen) > 30, 30, "the member consuming")
        freezer = Freezer(a._zk)
        frozen_at = lease_clock()
        freezer.freeze()
        try:
            wait_until(lambda: _expired(zk, zp.owner_path(g, topic, 0)), 20,
                       "the frozen member's session expired")
            late = drain.after(frozen_at + a._lease.length())
            assert late == [], f"{len(late)} messages handed out after the lease ran out"
            assert a.paused
        finally:
            freezer.thaw()
        # Back under a new session, it consumes on from the committed offset.
        before = len(drain.seen)
        wait_until(lambda: len(drain.seen) > before + 20, 30, "the member consuming again")
    finally:
        a.shutdown()
    drain.join()


def test_a_pause_shorter_than_the_session_timeout_changes_nothing(
        stack, zk, names, topic_factory) -> None:
    """Frozen for 0.6 of the session timeout (past the lease): the member stops handing out,
    then goes on under the same session once ZooKeeper answers: no rebalance, no message
    handed out twice, none skipped."""
    topic = topic_factory(names.topic, 1)
    g = names.group
    produce(stack.bootstrap, topic, ((0, None, b"m%d" % i) for i in range(600)))
    a = _fetching_member(stack, g)
    try:
        (stream,) = a.create_message_streams({topic: 1})[topic]
        drain = Drain(stream, 0.004)
        wait_until(lambda: len(drain.seen) > 30, 30, "the member consuming")
        session = a._zk.client_id
        rebalances = a.stats.rebalances
        freezer = Freezer(a._zk)
        freezer.freeze()
        wait_until(lambda: a.paused, 10, "the lease run out")
        frozen_for = 0.6 * a.config.zookeeper_session_timeout_ms / 1000.0
        threading.Event().wait(max(0.0, frozen_for - a._lease.age()))
        freezer.thaw()
        wait_until(lambda: len(drain.seen) >= 600, 60, "every message handed out")
        assert a._zk.client_id == session
        assert a.stats.rebalances == rebalances
        assert [o for _, _, o in drain.seen] == list(range(600))
    finally:
        a.shutdown()
    drain.join()


@pytest.mark.parametrize("impl", ["c", "python"])
def test_a_lease_permit_stops_at_its_count_and_at_its_deadline(impl: str) -> None:
    make_deadline, lease_permit = ((_speedups.LeaseDeadline, _speedups.lease_permit)
                                   if impl == "c" else (PyLeaseDeadline, PyLeasePermit))
    deadline = make_deadline()
    assert list(lease_permit("t", 3, deadline)) == []  # no lease yet
    deadline.deadline = lease_clock() + 60
    permit = lease_permit("t", 3, deadline)
    assert length_hint(permit) == 3
    assert [next(permit), next(permit)] == ["t", "t"]
    deadline.deadline = lease_clock() - 1  # the lease ran out (or the process was paused)
    assert list(permit) == [] and length_hint(permit) == 0
    deadline.deadline = lease_clock() + 60
    assert list(permit) == []  # spent for good: a new permit is made after the gate opens
    assert list(lease_permit("t", 2, deadline)) == ["t", "t"]


def test_closing_from_a_commit_callback_does_not_wait_for_itself() -> None:
    results: list[BaseException | None] = []
    committer: AsyncCommitter

    def write(offsets: dict[TopicPartition, int], made_in: int) -> None:
        return None

    def close_from_callback(offsets: dict[TopicPartition, int],
                            error: BaseException | None) -> None:
        committer.close(30.0)  # shutdown() called by the application's callback

    committer = AsyncCommitter("c1", write)
    writing = Calls(block=True)
    committer.submit({TP("t", 0): 1}, 0, writing)
    wait_until(writing.entered.is_set, 10, "the first callback running")
    committer.submit({TP("t", 0): 2}, 0, close_from_callback)
    queued = committer.submit({TP("t", 0): 3}, 0, lambda o, e: results.append(e))
    started = time.monotonic()
    writing.release.set()
    with pytest.raises(ConsumerShutdownError):
        queued.result(10)
    assert time.monotonic() - started < 5  # not the flush's 30 s, nor the abandon wait
    assert isinstance(results[0], ConsumerShutdownError)
