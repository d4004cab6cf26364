"""The streaming driver's membership in the ZooKeeper group: the connector's fetch side and
rebalance listener (:class:`_Membership`: ownership and the hand-over rule) and the member
with its clients (:class:`_GroupMember`)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss, SessionExpiredError
from kazoo.handlers.threading import KazooTimeoutError

from zkconsumer._errors import CommitFencedError
from zkconsumer._types import TopicPartition
from zkconsumer.consumer.connector import ConsumerRebalanceListener, ZookeeperConsumerConnector
from zkconsumer.spark.cluster import _bootstrap, _close_zk, _subscribed_partitions, _zk_client
from zkconsumer.spark.offsets import Positions, _OffsetLookup
from zkconsumer.spark.options import SourceOptions
from zkconsumer.zk import paths as zp

if TYPE_CHECKING:

    from zkconsumer.consumer.partition import PartitionTopicInfo

log = logging.getLogger("zkconsumer.spark")

# -- the group member (streaming driver) -------------------------------------------------------


class _NoBatch(Exception):
    """Planning cannot decide a batch now (its message says why): no batch this trigger."""


class _ZooKeeperAway(_NoBatch):
    """Planning needs ZooKeeper, and it cannot be reached now."""


#: What a ZooKeeper request raises when ZooKeeper cannot be reached (a timeout: no answer
#: within the store's wait).
_ZK_AWAY = (ConnectionLoss, SessionExpiredError, KazooTimeoutError)


class _Membership(ConsumerRebalanceListener):
    """The connector's fetch side and rebalance listener: ownership and the hand-over rule.

    The fetch side fetches nothing; the rebalance's ``before_starting_fetchers`` tells which
    partitions this member owns now. The hand-over rule: a rebalance releases this member's
    partitions (``before_releasing_partitions``) only once no batch is being planned and the
    batch in flight is done, after committing where it ended, so the next owner starts
    exactly there (waiting at most ``release_wait_s``; past that, rows of the running batch
    may be read twice, as with the legacy consumer).

    ``cond`` (a Condition over an RLock) guards every attribute; Spark's thread plans batches,
    the connector's rebalance (its watcher thread, or Spark's thread for the first one) calls
    the hooks.
    """

    def __init__(self, release_wait_s: float) -> None:
        self.cond = threading.Condition()
        self.release_wait_s = release_wait_s
        self.commit_fn: Any = None  # set by the member: Mapping[TopicPartition, int] -> int
        self.generation = 0  # +1 per completed rebalance
        self.assigned: frozenset[TopicPartition] = frozenset()
        self.rebalancing = False
        self.planning = False
        self.in_flight: Positions | None = None  # end offsets of the batch being processed
        self.done: Positions | None = None  # where the last completed batch ended
        #: partition -> generation in which its position in the offsets was confirmed ours.
        self.verified: dict[TopicPartition, int] = {}
        #: Partitions the batch being planned or run moved back to their log end (truncated,
        #: failOnDataLoss=false) -> that position, until Spark says that batch is done: the
        #: end of the batch before, still to be committed, is beyond it.
        self.moved_back: Positions = {}
        self.closed = False

    # -- fetch side ------------------------------------------------------------------------
    def start_connections(self, infos: Iterable[PartitionTopicInfo]) -> None:
        pass  # ownership comes from before_starting_fetchers (called even when owning none)

    def stop_connections(self) -> None:
        # A rebalance (or a session loss) starts: until it ends, this member owns nothing.
        with self.cond:
            self.rebalancing = True
            self.assigned = frozenset()

    def shutdown(self) -> None:
        self.close()

    # -- rebalance listener ----------------------------------------------------------------
    def before_releasing_partitions(self, partition_ownership: Mapping[str, set[int]]) -> None:
        owned = {TopicPartition(t, p) for t, ps in partition_ownership.items() for p in ps}
        if not owned:
            return
        with self.cond:
            deadline = time.monotonic() + self.release_wait_s
            while (self.planning or self.in_flight is not None) and not self.closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    log.warning("releasing partitions before Spark has said that the last "
                                "micro-batch is done (it says so when it plans the next one; "
                                "waited %.1f s): its rows of them may be read again by their "
                                "next owner", self.release_wait_s)
                    break
                self.cond.wait(min(remaining, 0.5))
            done = {tp: min(off, self.moved_back.get(tp, off))
                    for tp, off in (self.done or {}).items()
                    if tp in owned and self.verified.get(tp) == self.generation}
        if done and self.commit_fn is not None:
            try:
                self.commit_fn(done)
            except Exception:  # the rebalance goes on; the next batch commits
                log.exception("committing offsets before releasing partitions failed")

    def before_starting_fetchers(
        self, consumer_id: str, global_partition_assignment: Mapping[str, Mapping[int, str]]
    ) -> None:
        mine = frozenset(
            TopicPartition(t, p)
            for t, parts in global_partition_assignment.items()
            for p, thread in parts.items()
            if zp.thread_consumer_id(thread) == consumer_id
        )
        with self.cond:
            self.assigned = mine
            self.generation += 1
            self.rebalancing = False
            for tp in [tp for tp in self.verified if tp not in mine]:
                del self.verified[tp]
            self.cond.notify_all()

    # -- planning (Spark's thread) ---------------------------------------------------------
    def batch_done(self, positions: Positions) -> None:
        """Spark asks for the next batch: the one that ended at ``positions`` is complete."""
        with self.cond:
            self.done = dict(positions)
            self.in_flight = None
            self.moved_back = {}  # `positions` has them
            self.cond.notify_all()

    def begin_planning(self, wait_s: float) -> tuple[int, frozenset[TopicPartition], bool]:
        """Wait out a running rebalance; (generation, owned partitions, whether no rebalance
        is under way) until end_planning. Owned is empty while one is."""
        with self.cond:
            deadline = time.monotonic() + wait_s
            while self.rebalancing and not self.closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break  # still rebalancing: the caller must not plan with this
                self.cond.wait(min(remaining, 0.5))
            self.planning = True
            return self.generation, self.assigned, not self.rebalancing

    def end_planning(self, in_flight: Positions | None) -> None:
        with self.cond:
            self.planning = False
            if in_flight is not None:
                self.in_flight = dict(in_flight)
            self.cond.notify_all()

    def running(self, in_flight: Positions) -> None:
        """A batch ending at ``in_flight`` is about to run (also a replay after a restart)."""
        with self.cond:
            self.in_flight = dict(in_flight)

    def snapshot(self) -> tuple[int, frozenset[TopicPartition], dict[TopicPartition, int]]:
        with self.cond:
            return self.generation, self.assigned, dict(self.verified)

    def committable(self, end: Positions) -> Positions:
        """What of a completed batch's ``end`` may be committed: the partitions owned and
        confirmed ours in this generation, none beyond where a later plan moved it back."""
        with self.cond:
            return {tp: off for tp, off in end.items()
                    if tp in self.assigned and self.verified.get(tp) == self.generation
                    and off <= self.moved_back.get(tp, off)}

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()


class _GroupMember:
    """This query's membership in the ZooKeeper group, plus the driver's clients.

    Used from Spark's thread (and the SIGTERM handler, on the same thread); the connector's
    own threads only call into :class:`_Membership`.
    """

    def __init__(self, opts: SourceOptions) -> None:

        self.opts = opts
        self.config = opts.config()
        self.zk: KazooClient | None = _zk_client(self.config, long_lived=True)
        self.connector: ZookeeperConsumerConnector | None = None
        self.lookup: _OffsetLookup | None = None
        try:
            self.bootstrap = _bootstrap(self.zk, opts, self.config)
            self.lookup = _OffsetLookup(self.config, self.bootstrap)
            self.membership = _Membership(self.config.zookeeper_session_timeout_ms / 1000.0)
            self.membership.commit_fn = self.commit
            membership = self.membership
            self.connector = ZookeeperConsumerConnector(
                self.config, fetcher_factory=lambda _c: membership
            )
            # Offsets are read and written on the session that owns the partitions, and
            # written only while it lives: a write queued in an outage never lands after
            # the session expired and the partitions became another member's.
            self.store = self.connector.zookeeper_offset_store(
                timeout_s=self.config.zookeeper_session_timeout_ms / 1000.0)
            self.connector.set_consumer_rebalance_listener(membership)
            flt = opts.make_filter()
            if flt is None:
                self.connector.create_message_streams({t: opts.streams for t in opts.topics})
            else:
                self.connector.create_message_streams_by_filter(flt, opts.streams)
        except BaseException:
            self.close()
            raise
        self.consumer_id = self.connector.consumer_id
        log.info("%s joined group %s", self.consumer_id, self.config.group_id)

    def offsets(self) -> _OffsetLookup:
        assert self.lookup is not None, "the group member is closed"
        return self.lookup

    def zk_connected(self) -> bool:
        """Whether the member's session is connected and owns what the last rebalance gave
        it (the connector hands out nothing otherwise).

        kazoo holds a request made while disconnected until it reconnects: planning asks
        first, and every answer is awaited at most a session timeout (the store's), rather
        than block Spark's thread for the length of an outage.
        """
        return self.connector is not None and not self.connector.paused

    def committed(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        """The group's committed offsets, read now from ZooKeeper; :class:`_ZooKeeperAway`
        when it cannot be asked."""
        if not self.zk_connected():
            raise _ZooKeeperAway("ZooKeeper is unreachable: cannot read the group's offsets")
        try:
            return self.store.read(sorted(set(tps)))
        except _ZK_AWAY as e:
            raise _ZooKeeperAway(f"reading the group's offsets failed: {e!r}") from None

    def commit(self, offsets: Mapping[TopicPartition, int], best_effort: bool = False) -> int:
        """Write these offsets to /consumers/G/offsets (only the ones that changed).

        When ZooKeeper is unreachable, or the write fails for that reason: with
        ``best_effort``, log and go on (the checkpoint holds the positions; the next batch's
        commit writes them); else :class:`_ZooKeeperAway`.
        """
        if not offsets:
            return 0
        try:
            if not self.zk_connected():
                raise _ZooKeeperAway("ZooKeeper is unreachable")
            try:
                return self.store.commit(offsets)
            except CommitFencedError as e:
                # Written conditionally on this session's owner znodes (see the connector's
                # fence): a partition another member owns now keeps that member's offset.
                log.warning("%s", e)
                return 0
            except _ZK_AWAY as e:
                raise _ZooKeeperAway(f"writing the group's offsets failed: {e!r}") from None
        except _ZooKeeperAway as e:
            if not best_effort:
                raise
            log.warning("%s: %s; the group's offsets are written with the next batch",
                        self.consumer_id, e)
            return 0

    def subscribed_partitions(self) -> dict[str, list[int]]:
        assert self.zk is not None, "the group member is closed"
        return _subscribed_partitions(self.zk, self.opts)

    def close(self) -> None:
        membership: _Membership | None = getattr(self, "membership", None)
        if membership is not None:
            membership.close()
        connector, self.connector = self.connector, None
        try:
            if connector is not None:
                connector.shutdown()
        finally:
            lookup, self.lookup = self.lookup, None
            if lookup is not None:
                lookup.close()
            zk, self.zk = self.zk, None
            if zk is not None:
                _close_zk(zk)
