"""``ZookeeperConsumerConnector``: group membership, the rebalance, streams and commits.

The rebalance follows the legacy order (docs/znodes.md, "Rebalance order") so a zkconsumer
member and a JVM member can share a group, with these differences where the original failed
its users:

- Watch callbacks only set :attr:`_wakeup` and count the event in :attr:`_view_gen` (the
  generation of the group view, as kazoo's partitioner recipe counts them); one watcher thread
  merges bursts of events into one rebalance and wakes every second to check for shutdown.
  The first rebalance runs in the caller's thread inside ``create_message_streams``, and the
  watcher thread starts only after it: one thread rebalances at a time.
- A claim that conflicts with another member's owner znode waits for that znode's deletion (a
  watch), not a blind sleep, and the attempt restarts at once, without counting as a failure,
  when the group view changed meanwhile (the generation moved on since the attempt read the
  view). That is what lets many members join at once. The generation, not ``_wakeup``, tells
  it: the wake-up is cleared by whichever thread acts on it, so an attempt waiting on it could
  miss the very change it waits for and wait out the whole claim timeout.
- Incremental: partitions that stay with the same thread of this member keep their owner
  znodes, their fetching and their delivery through a rebalance; only those that move are
  stopped (revoked: nothing more of them is handed out), committed and released, and only
  the arriving ones claimed and started (:meth:`_incremental`). Not with a rebalance listener
  (its ``before_releasing_partitions`` expects every partition to stop), nor for
  :meth:`rebalance_now`, nor with a fetch side that cannot stop single partitions. Owner
  znodes that stay are never released, so members with a stale view cannot grab them in the
  gap; everything is released after a failed attempt
  (all-or-nothing), and a failed rebalance in the watcher thread is retried after the backoff
  instead of waiting for the next ZooKeeper event, so partitions do not stay unowned.
- The moment the ZooKeeper connection drops, the streams stop handing out messages (the
  :class:`~zkconsumer.consumer.gate.DeliveryGate` closes, in kazoo's thread): the member cannot know
  whether its session, and so its ownership, still exists, and another member may own its
  partitions milliseconds later. With the same session back, delivery goes on where it
  stopped; after a lost session the member stops fetching, forgets its owner znodes (without
  deleting anything: under a new session that would delete other members' claims),
  re-registers, rebalances, and only then delivers again. Commits are skipped while the gate is
  closed (a late commit could move another owner's offset back).
- A registration found missing while the session lives (its ids znode deleted by hand, the
  group's tree deleted, or a process with the same ``consumer.id`` leaving after taking it
  over) is made again by the rebalance that finds it missing, which the deletion's event
  starts; an ids znode another session holds by then is left to it (replacing it would have
  that process replace ours in turn).
- No thread waits on ZooKeeper while holding ``_rebalance_lock`` for longer than the outage
  lasts, and :meth:`shutdown` does not need the lock when ZooKeeper is unreachable: it stops
  the kazoo client, which fails the calls that wait for the connection. What shutdown itself
  sends (the final commit, leaving the group) is sent only while connected and awaited at
  most ``zookeeper.session.timeout.ms``.

Threads and locks:

- ``_rebalance_lock`` (RLock) guards changes to ``_owned``, ``_topic_registry`` and the
  fetchers' start and stop; held for a whole rebalance, by the watcher thread or the first
  caller. Readers (:meth:`owned_partitions`, :meth:`partition_infos`, commits) do not take it:
  ``dict(d)`` of a plain dict is one C call under the GIL, so a copy is consistent, and the
  registry is replaced wholesale, never mutated.
- ``_session_guard`` (Lock) makes "the session is not lost" and "send this write" one step:
  the LOST listener sets ``_session_lost`` under it (waiting for it
  :data:`LISTENER_GUARD_WAIT_S` at most, see :meth:`_on_zk_state`; each request of a batch
  is checked again, :meth:`_send`), and owner znode writes, the deletion of the registration
  when leaving, and ZooKeeper offset commits are sent (asynchronously, never awaited under
  it) only after checking the flag under it, and only while connected
  (:meth:`_live_session`). Kazoo fails every request still queued when it learns of the
  expiry, so no such write of the old session runs under the new one.
- ``_commit_lock`` serialises commits (auto-commit thread, rebalance, the user) with
  :meth:`_release`: a commit checks ownership and writes under it, so no offset of a
  partition is written after its owner znode is deleted.
- ``_state_lock`` guards ``_streams_created``, ``_closed`` and ``_streams_ended``; the session
  listener changes the gate under it, so no change lands after :meth:`shutdown` opened the
  gate for good.
- ``_wakeup`` (Event) is set by watch callbacks and the session listener (kazoo's thread).
- ``_view_gen`` (int) is incremented only by watch callbacks, in kazoo's event thread (one
  writer); attempts read it without a lock (an int read is atomic under the GIL).
- ``_gate`` (the streams' :class:`DeliveryGate`) has its own lock; closed for
  ``"connection"`` from SUSPENDED/LOST to CONNECTED and for ``"session"`` from LOST until a
  rebalance that started after the loss succeeds (``_session_gen`` counts losses), during
  :meth:`shutdown` too until it has ended the streams (``_streams_ended``); and for
  ``"lease"`` while ZooKeeper has not answered on the session lately (see below).
- ``_lease`` / ``_lease_keeper`` / ``_fence`` (:mod:`zkconsumer.consumer.fence`): the proof that
  the session lives, renewed by the keeper's thread; it bounds every stream permit in time
  (``zookeeper.outage.delivery=pause``) and every offset write (the commit fence, called
  under ``_commit_lock``). Each has its own lock.
- ``_async_commits`` (:mod:`zkconsumer.consumer.async_commit`): ``commit_offsets_async``'s queue and
  thread, which takes ``_commit_lock`` per commit.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, overload, runtime_checkable

from kazoo.client import KazooClient
from kazoo.exceptions import (
    ConnectionClosedError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.interfaces import IAsyncResult
from kazoo.protocol.states import KazooState, WatchedEvent

from zkconsumer._config import ConsumerConfig
from zkconsumer._errors import (
    AssignmentStrategyMismatchError,
    BackgroundThreadError,
    CommitFencedError,
    ConsumerRebalanceFailedException,
    ConsumerShutdownError,
    MessageStreamsExistException,
    PartitionsNotOwnedError,
    ZkConnectionLostError,
    ZkConsumerError,
    ZkDataError,
)
from zkconsumer._filters import TopicFilter, filter_from_registration
from zkconsumer._types import TopicPartition
from zkconsumer.consumer.assignors.core import assign
from zkconsumer.consumer.assignors.jvmcompat import disagreement_hint, order_mismatch_hint
from zkconsumer.consumer.assignors.strategy import strategy_refusals
from zkconsumer.consumer.async_commit import AsyncCommitter, CommitCallback
from zkconsumer.consumer.fence import LEASE_FRACTION, CommitFence, LeaseKeeper, SessionLease
from zkconsumer.consumer.fetcher import FetcherManager
from zkconsumer.consumer.gate import DeliveryGate
from zkconsumer.consumer.metrics import ConsumerMetrics
from zkconsumer.consumer.offsets import OffsetStore, ZkOffsetStore, make_offset_store
from zkconsumer.consumer.partition import (
    INVALID_OFFSET,
    ChunkQueue,
    FetcherFailed,
    PartitionTopicInfo,
)
from zkconsumer.consumer.stream import KafkaStream
from zkconsumer.zk import paths as zp
from zkconsumer.zk.read import broker_addresses, consumers_for_topic
from zkconsumer.zk.session import kazoo_security_kwargs, start_and_check_login

if TYPE_CHECKING:
    from zkconsumer.consumer.stream import KafkaStream

log = logging.getLogger("zkconsumer.connector")

#: Longest shutdown() waits for a background thread or a rebalance while ZooKeeper answers.
SHUTDOWN_WAIT_S = 30.0
#: Longest the LOST listener (kazoo's connection thread) waits for ``_session_guard``. A
#: holder is normally sending a few requests; one still holding it after this is stuck in
#: kazoo's wake-up write, which only the connection thread, waiting here, would unblock.
LISTENER_GUARD_WAIT_S = 2.0

Decoder = Callable[[bytes], Any]


class ConsumerRebalanceListener:
    """Hooks into the rebalance; override what you need (both default to doing nothing).

    Exceptions raised here fail the rebalance attempt (it is retried), as in the original.
    """

    def before_releasing_partitions(self, partition_ownership: Mapping[str, set[int]]) -> None:
        """Called after fetchers stop and offsets are committed, before owners are released.

        ``partition_ownership`` maps topic -> partitions this member owned until now.
        """

    def before_starting_fetchers(
        self, consumer_id: str, global_partition_assignment: Mapping[str, Mapping[int, str]]
    ) -> None:
        """Called once this member owns its partitions, before fetching starts.

        ``global_partition_assignment`` is the whole group's assignment: topic -> partition ->
        owning thread id.
        """


class FetchSide(Protocol):
    """What the rebalance needs from the fetch side (see ``_fetcher.FetcherManager``)."""

    def start_connections(self, infos: Iterable[PartitionTopicInfo]) -> None: ...

    def stop_connections(self) -> None: ...

    def shutdown(self) -> None: ...


@runtime_checkable
class IncrementalFetchSide(FetchSide, Protocol):
    """A fetch side that can also stop and start some partitions while the others go on
    (``_fetcher.FetcherManager``): then a rebalance stops only the partitions that move."""

    def add_partitions(self, infos: Iterable[PartitionTopicInfo]) -> None: ...

    def remove_partitions(self, infos: Iterable[PartitionTopicInfo]) -> None: ...


@dataclass
class GroupView:
    """One consistent read of what a rebalance needs (step 1)."""

    members: dict[str, zp.ConsumerRegistration]
    ids_version: int
    consumers_for_topic: dict[str, list[str]]
    partitions_for_topic: dict[str, list[int]]
    brokers: list[int]
    # Members whose strategy differs from the group's (left out of consumers_for_topic),
    # with the group's strategy as an error names it (see _strategy.py).
    refused: dict[str, str] = field(default_factory=dict)


@dataclass
class RebalanceStats:
    """Counters for the benchmark and the metrics (RebalanceRateAndTime)."""

    rebalances: int = 0
    attempts: int = 0
    failures: int = 0
    restarts: int = 0  # attempts abandoned because the group view changed
    # Rebalances that found the group as the last one left it (after a ZooKeeper connection
    # blip, say) and kept the fetchers running instead of stopping and restarting them.
    unchanged: int = 0
    claim_waits: int = 0  # claims that waited for another member to release
    # Rebalances that stopped only the partitions that moved, and how many partitions the
    # last one kept fetching throughout.
    incremental: int = 0
    last_kept: int = 0
    last_duration_s: float = 0.0
    last_zk_ops: int = 0
    # The last 1000 rebalances' (a long-lived process rebalances without end).
    durations_s: deque[float] = field(default_factory=lambda: deque(maxlen=1000))


@dataclass
class _AgreementCheck:
    """A full rebalance's result, to check against the owner znodes at ``due``."""

    view: GroupView
    assignment: dict[TopicPartition, str]
    due: float  # time.monotonic()
    rounds: int = 0


class _Restart(Exception):
    """The group view changed during an attempt: start again with a fresh view."""


class _ShuttingDown(Exception):
    """shutdown() began while an attempt waited for ZooKeeper: it changes nothing more."""


class _Conflict(Exception):
    """A claim stayed held by another member for the whole wait."""


class _Disconnected(Exception):
    """ZooKeeper is unreachable or the session was lost: the rebalance waits for the
    (re)connection, which wakes the watcher thread."""


class _Unregistered(Exception):
    """This member's registration (its ids znode, or the group's ids directory) is missing
    while its session lives: it registers again."""


#: Errors of a ZooKeeper call that mean "the connection or the session is gone", or that no
#: answer came in time: either way the request may or may not have been applied.
_CONNECTION_ERRORS = (ConnectionLoss, SessionExpiredError, ConnectionClosedError,
                      KazooTimeoutError)


def _timeout(deadline: float | None) -> float | None:
    """What is left until ``deadline`` (``time.monotonic()``), for a kazoo ``get()``."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())


class ZookeeperConsumerConnector:
    """The legacy high-level consumer: create streams once, iterate them, shut down.

    ``with create_consumer_connector(config) as c: streams = c.create_message_streams({...})``
    """

    def __init__(
        self,
        config: ConsumerConfig,
        fetcher_factory: Callable[[ZookeeperConsumerConnector], FetchSide] | None = None,
    ) -> None:
        self.config = config
        self.group = config.group_id
        self.consumer_id = zp.make_consumer_id(self.group, config.consumer_id)
        self.log = logging.LoggerAdapter(log, {"consumer_id": self.consumer_id})
        self.stats = RebalanceStats()

        self.metrics = ConsumerMetrics(config.client_id)
        self.metrics_port: int | None = (
            self.metrics.serve(config.metrics_port, config.metrics_address)
            if config.metrics_port is not None else None
        )

        self._rebalance_lock = threading.RLock()
        self._commit_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._wakeup = threading.Event()
        # Group-view events so far (watch callbacks; see the module docstring).
        self._view_gen = 0
        self._shutdown_event = threading.Event()
        self._session_lost = threading.Event()
        self._session_guard = threading.Lock()
        self._session_gen = 0  # sessions lost so far (written in kazoo's thread)
        self._rebalance_owed = False  # a rebalance was cut short by a disconnection
        session_timeout_s = config.zookeeper_session_timeout_ms / 1000.0
        self._lease = SessionLease(LEASE_FRACTION, session_timeout_s)
        # With zookeeper.outage.delivery=continue, the streams ignore the lease (and the
        # connection's drops): only a lost session stops them.
        self._pause_on_outage = config.zookeeper_outage_delivery == "pause"
        self._gate = DeliveryGate(self._lease.deadline if self._pause_on_outage else None)
        self._closed = False
        self._streams_created = False
        self._streams_ended = False  # shutdown() has put the streams' end and opened the gate
        self._bg_error: BaseException | None = None

        # Subscription, fixed once streams are created.
        self._registration: zp.ConsumerRegistration | None = None
        self._topic_filter: TopicFilter | None = None
        self._queues: dict[tuple[str, str], ChunkQueue] = {}  # (topic, thread id) -> queue
        self._wildcard_queues: list[ChunkQueue] = []
        self._streams: list[KafkaStream[Any, Any]] = []

        # Rebalance state (under _rebalance_lock).
        self._owned: dict[TopicPartition, str] = {}  # owner znodes this session holds
        # Entries of _owned whose last create or delete failed with a connection error: the
        # request may or may not have reached ZooKeeper (kazoo fails unsent ones too), so
        # the znode may be missing, ours, or another member's claim. Claimed again, and read
        # back before any delete.
        self._uncertain: set[TopicPartition] = set()
        self._topic_registry: dict[TopicPartition, PartitionTopicInfo] = {}
        self._fetch_failure: FetcherFailed | None = None  # what _check_fetcher queued
        # This rebalance attempt called before_releasing_partitions (under _rebalance_lock).
        self._listener_told = False
        # What the last complete rebalance was computed from, while its fetchers run (cleared
        # whenever they stop): a rebalance reading the same again has nothing to change.
        self._settled_view: tuple[object, ...] | None = None
        # The last full rebalance's result, to compare with the owner znodes once the group
        # had time to settle (members that disagree never do). The watcher thread's only.
        self._agreement: _AgreementCheck | None = None
        # rebalance_now() calls so far, and how many of them a full rebalance has served
        # (counters, so that a call during an attempt is never lost to it).
        self._force_requested = 0
        self._force_served = 0
        self._zk_ops = 0
        self._listener: ConsumerRebalanceListener | None = None

        self._zk = KazooClient(
            hosts=config.zookeeper_connect,
            **kazoo_security_kwargs(config),
            timeout=config.zookeeper_session_timeout_ms / 1000.0,
            connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 1.0},
            command_retry={"max_tries": 3, "delay": 0.1, "max_delay": 1.0},
        )
        self._zk.add_listener(self._on_zk_state)
        self._fence = CommitFence(self._zk, self.group, self._lease, self.consumer_id,
                                  self.log, timeout_s=session_timeout_s,
                                  send_guard=self._live_session)
        self._lease_keeper = LeaseKeeper(
            self._zk, self._lease, self._gate if self._pause_on_outage else None,
            zp.id_path(self.group, self.consumer_id), self.consumer_id, self._shutdown_event,
            self.log)
        try:
            start_and_check_login(self._zk, config)
        except Exception as e:
            self._zk.close()
            self.metrics.close()
            raise ZkConsumerError(
                f"cannot connect to ZooKeeper at {config.zookeeper_connect}: {e}"
            ) from e
        try:
            self._offsets = self._make_offset_store()
            factory = fetcher_factory or _default_fetcher
            self._fetcher: FetchSide = factory(self)
        except BaseException:
            # No connector to shut down: its session and metrics port must not outlive it
            # (a retry in the same process would find the port taken).
            self._zk.stop()
            self._zk.close()
            self.metrics.close()
            raise
        self._watcher = threading.Thread(
            target=self._watcher_loop, name=f"{self.consumer_id}-watcher", daemon=True
        )
        self._async_commits = AsyncCommitter(self.consumer_id, self._write_async, self.log)
        self._lease_keeper.start()
        self._autocommit: threading.Thread | None = None
        if config.auto_commit_enable:
            self._autocommit = threading.Thread(
                target=self._autocommit_loop, name=f"{self.consumer_id}-autocommit", daemon=True
            )
            self._autocommit.start()
        self.log.info("connector started for group %s", self.group)

    # -- context manager -------------------------------------------------------------------
    def __enter__(self) -> ZookeeperConsumerConnector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # -- public API ------------------------------------------------------------------------
    def set_consumer_rebalance_listener(self, listener: ConsumerRebalanceListener) -> None:
        with self._state_lock:
            if self._streams_created:
                raise MessageStreamsExistException(
                    "set the rebalance listener before creating message streams"
                )
            self._listener = listener

    def create_message_streams(
        self,
        topic_count_map: Mapping[str, int],
        key_decoder: Decoder | None = None,
        value_decoder: Decoder | None = None,
    ) -> dict[str, list[KafkaStream[Any, Any]]]:
        """Register in the group, rebalance, and return ``n`` streams for each topic.

        If the first rebalance fails (:class:`ConsumerRebalanceFailedException`), the
        connector shuts down, leaving the group, before the error is raised.
        """
        if not topic_count_map:
            raise ValueError("topic_count_map is empty")
        for topic, n in topic_count_map.items():
            if not isinstance(n, int) or isinstance(n, bool) or n < 1:
                raise ValueError(f"stream count for topic {topic!r} must be >= 1, got {n!r}")
            zp.topic_path(topic)  # validates the name
        self._claim_streams()

        result: dict[str, list[KafkaStream[Any, Any]]] = {}
        for topic, n in topic_count_map.items():
            result[topic] = []
            for thread_id in zp.thread_ids(self.consumer_id, n):
                q = ChunkQueue(self.config.queued_max_message_chunks)
                self._queues[(topic, thread_id)] = q
                self.metrics.watch_queue(topic, thread_id, q)
                s: KafkaStream[Any, Any] = KafkaStream(
                    q, self.config.consumer_timeout_ms, key_decoder, value_decoder,
                    self.config.client_id, self.metrics, self._gate,
                )
                self._streams.append(s)
                result[topic].append(s)
        self._registration = zp.ConsumerRegistration(
            dict(topic_count_map), "static", int(time.time() * 1000),
            assignment_strategy=self.config.partition_assignment_strategy,
        )
        self.metrics.set_subscribed_topics(topic_count_map)
        self._register_and_rebalance()
        return result

    def create_message_streams_by_filter(
        self,
        topic_filter: TopicFilter,
        num_streams: int = 1,
        key_decoder: Decoder | None = None,
        value_decoder: Decoder | None = None,
    ) -> list[KafkaStream[Any, Any]]:
        """Streams over every topic the whitelist/blacklist matches, now and later."""
        if num_streams < 1:
            raise ValueError(f"num_streams must be >= 1, got {num_streams!r}")
        self._claim_streams()

        streams: list[KafkaStream[Any, Any]] = []
        for _ in range(num_streams):
            q = ChunkQueue(self.config.queued_max_message_chunks)
            self._wildcard_queues.append(q)
            # A FetchQueueSize series per topic the filter matches (set at each rebalance).
            self.metrics.watch_wildcard_queue(
                f"{self.consumer_id}-{len(self._wildcard_queues) - 1}", q
            )
            s: KafkaStream[Any, Any] = KafkaStream(
                q, self.config.consumer_timeout_ms, key_decoder, value_decoder,
                self.config.client_id, self.metrics, self._gate,
            )
            self._streams.append(s)
            streams.append(s)
        self._topic_filter = topic_filter
        self._registration = zp.ConsumerRegistration(
            {topic_filter.regex: num_streams}, topic_filter.pattern_name, int(time.time() * 1000),
            assignment_strategy=self.config.partition_assignment_strategy,
        )
        self._register_and_rebalance()
        return streams

    @overload
    def commit_offsets(self, *, retry_on_failure: bool = True) -> None: ...

    @overload
    def commit_offsets(self, retry_on_failure: bool, /) -> None: ...

    @overload
    def commit_offsets(
        self, offsets: Mapping[tuple[str, int], int], retry_on_failure: bool = True
    ) -> None: ...

    def commit_offsets(
        self, offsets: Mapping[tuple[str, int], int] | bool | None = None,
        retry_on_failure: bool | None = None,
    ) -> None:
        """Commit offsets, as the legacy ``commitOffsets`` overloads did.

        - ``commit_offsets(retry_on_failure=True)``: each owned partition's consumed offset
          (the offset after the last message its stream handed out).
        - ``commit_offsets(offsets, retry_on_failure=True)``: exactly these next offsets to
          consume, ``{(topic, partition): offset}`` (a :class:`TopicPartition` key or a plain
          pair), for an application that commits what it has *processed* rather than what it
          has received (with ``auto.commit.enable=false``: auto-commits, and the commit
          before a rebalance releases partitions, commit consumed offsets). Unlike the
          original, every partition must be owned by this member: a partition a rebalance
          gave away would have its new owner's offset overwritten, so then nothing is
          committed and :class:`PartitionsNotOwnedError` names them. Offsets are checked
          before anything is written (``ValueError``).

        ``retry_on_failure`` retries a failed write ``offsets.commit.max.retries`` times,
        ``offsets.channel.backoff.ms`` apart. Raises :class:`ZkConnectionLostError` while
        the ZooKeeper connection is down or the session lost (the member may no longer own
        the partitions; consumed offsets stay and the next commit after the pause stores
        them; paused only because ZooKeeper was slow to answer, the commit is tried, fenced),
        and when the connection or the session
        goes while it commits, or ZooKeeper leaves it unanswered for
        ``zookeeper.session.timeout.ms`` (a write after a lost session is never sent).
        Raises :class:`ConsumerShutdownError` once :meth:`shutdown` has begun.
        """
        if isinstance(offsets, bool):  # the positional form of the first overload
            if retry_on_failure is not None:
                raise TypeError("commit_offsets() got retry_on_failure twice")
            offsets, retry_on_failure = None, offsets
        retry = True if retry_on_failure is None else retry_on_failure
        explicit = None if offsets is None else _explicit_offsets(offsets)
        self._check()
        with self._state_lock:
            closed = self._closed
        if closed:
            # Loud, as the original failed: shutdown forgot what was owned, so this would
            # commit nothing and return as if it had.
            raise ConsumerShutdownError(
                f"{self.consumer_id}: the connector is shut down; nothing committed (commit "
                "before shutdown(), which commits consumed offsets itself only with "
                "auto.commit.enable=true)")
        lost = ZkConnectionLostError(
            f"{self.consumer_id}: not committing while the ZooKeeper connection is down "
            "or the session was lost (the partitions may belong to another member now)"
        )
        if self._cut_off():
            raise lost
        if not self._async_commits.in_worker():
            # After the asynchronous commits made before it, as their order says.
            self._async_commits.flush(self.config.zookeeper_session_timeout_ms / 1000.0 * 2)
        try:
            if explicit is None:
                self._commit(retry, strict=True)
            elif explicit:
                self._commit_explicit(explicit, retry)
        except _CONNECTION_ERRORS as e:
            raise lost from e  # lost meanwhile: the write was not sent, or its fate unknown

    def commit_offsets_async(
        self, offsets: Mapping[tuple[str, int], int] | None = None,
        callback: CommitCallback | None = None,
    ) -> Future[dict[TopicPartition, int]]:
        """Commit without waiting, as the modern consumer's ``commitAsync``.

        ``offsets`` as in :meth:`commit_offsets` (checked now, ``ValueError``); None: each
        owned partition's consumed offset as of this call. Returns at once; a background
        thread writes the commits in the order they were made (a later commit of a partition
        never lands before an earlier one), then calls ``callback(offsets, error)`` in that
        thread: ``error`` is None when everything was written, :class:`CommitFencedError`
        naming the partitions dropped because this member's session no longer owns them (or
        the commit was made under an earlier session; the rest was written),
        :class:`ZkConnectionLostError` when the member was paused, or the write's error. The
        returned future ends the same way (its result: the offsets). :meth:`shutdown` writes
        the queued commits while the member still owns its partitions, or fails them with
        :class:`ConsumerShutdownError`; after it this raises that error at once.
        """
        explicit = None if offsets is None else _explicit_offsets(offsets)
        self._check()
        made_in = self._session_gen
        if explicit is None:
            owned = self._owned
            explicit = {tp: info.consumed_offset
                        for tp, info in self._topic_registry.items()
                        if info.consumed_offset >= 0 and tp in owned}
        with self._state_lock:
            if self._closed:
                raise ConsumerShutdownError(f"{self.consumer_id}: the connector is shut down; "
                                            "nothing committed")
        return self._async_commits.submit(explicit, made_in, callback)

    def _write_async(self, offsets: dict[TopicPartition, int], made_in: int
                     ) -> BaseException | None:
        """One asynchronous commit, in the committer's thread (see commit_offsets_async)."""
        if not offsets:
            return None
        try:
            if self._cut_off():
                raise ConnectionLoss()
            with self._commit_lock:
                return self._write_offsets(offsets, True, made_in)
        except _CONNECTION_ERRORS as e:
            raise ZkConnectionLostError(
                f"{self.consumer_id}: not committed: the ZooKeeper connection is down or the "
                "session was lost (the partitions may belong to another member now)") from e

    def owned_partitions(self) -> dict[TopicPartition, str]:
        """Partitions this member owns now, with the owning thread id.

        Empty while :attr:`paused`: then the member cannot know that it owns anything. Never
        waits for a rebalance under way (it shows the rebalance's progress instead).
        """
        if self._gate.closed:
            return {}
        return dict(self._owned)  # one C call under the GIL: a consistent copy

    def partition_infos(self) -> dict[TopicPartition, PartitionTopicInfo]:
        """The partitions being fetched (as of the last rebalance step) and their offsets."""
        return dict(self._topic_registry)

    @property
    def paused(self) -> bool:
        """True while the streams hand out nothing: the ZooKeeper connection is down, or
        ZooKeeper has not answered on the session for half its timeout (the lease, see
        ``zookeeper.outage.delivery``), or the session was lost and the member has not
        rebalanced since."""
        return self._gate.closed or self._gate.lapsed()

    def rebalance_now(self) -> None:
        """Ask the watcher thread for a full rebalance, even if the group has not changed
        (a ZooKeeper event that leaves the group as it was changes nothing)."""
        with self._state_lock:
            self._force_requested += 1
        self._wakeup.set()

    def shutdown(self) -> None:
        """Stop everything; idempotent. Commits first when auto-commit is on.

        Returns within a few seconds even while ZooKeeper is unreachable: then it neither
        commits nor waits for a rebalance stuck in a ZooKeeper call (stopping the kazoo
        client fails that call); the session's end removes the member's znodes. A connection
        that drops while it commits or leaves the group ends that step (with a warning): it
        sends nothing more, and awaits no answer longer than ``zookeeper.session.timeout.ms``.
        """
        with self._state_lock:
            if self._closed:
                return
            self._closed = True
        self.log.info("shutting down")
        self._shutdown_event.set()
        self._wakeup.set()
        for t in (self._watcher, self._autocommit):
            if t is not None:
                self._join_unless_disconnected(t)
        self._lease_keeper.join(self._lease.length() + 1.0)
        locked = self._acquire_unless_disconnected(self._rebalance_lock)
        if not locked:
            self.log.warning("ZooKeeper is unreachable and a rebalance is waiting for it; "
                             "shutting down without committing or leaving the group "
                             "explicitly (the session's end releases everything)")
        try:
            self._fetcher.stop_connections()
            for q in self._all_queues():
                q.clear()
            for s in self._streams:
                s.clear()
            # While the partitions are still ours; with ZooKeeper unreachable, failed at once.
            self._async_commits.close(
                self.config.zookeeper_session_timeout_ms / 1000.0 if locked else 0.0)
            if locked and self.config.auto_commit_enable:
                try:
                    # strict: told when paused (the connection dropped, before or during it).
                    self._commit(retry_on_failure=True, strict=True)
                except _CONNECTION_ERRORS as e:
                    self.log.warning("final commit not made: the ZooKeeper connection or "
                                     "session is gone (%r); what was consumed since the last "
                                     "commit will be delivered again", e)
                except Exception:  # noqa: BLE001 - shutdown goes on; the error is logged
                    self.log.exception("final commit failed")
            for q in self._all_queues():
                q.put_shutdown()
            self._topic_registry = {}
            # Leave the group now, before the slow part (closing the fetch clients): the
            # others rebalance as soon as the registration and owners are gone.
            if locked:
                self._leave_group()
        finally:
            if locked:
                self._rebalance_lock.release()
            with self._state_lock:
                self._streams_ended = True  # the session listener leaves the gate alone now
            # Iterators waiting at the gate go on to the shutdown sentinel.
            self._gate.drop_lease()
            self._gate.open()
            try:
                self._fetcher.shutdown()
            finally:
                try:
                    self._offsets.close()
                finally:
                    self._stop_client()
                    # Owns nothing now, whether or not it could leave the group explicitly.
                    self.metrics.set_owned_partitions(())
                    self.metrics.close()
        self.log.info("shut down")

    def _stop_client(self) -> None:
        """Stop the ZooKeeper client (which fails any call still waiting for the connection)
        and close it, within kazoo's own bound on stopping plus a little. kazoo's stop()
        writes to a socket that only its connection thread reads: one filled by requests
        made while disconnected would block it until ZooKeeper is back (a process can exit
        all the same: the stop is left to a daemon thread, the client unclosed)."""
        failed: list[BaseException] = []

        def stop() -> None:
            try:
                self._zk.stop()
            except Exception as e:  # noqa: BLE001 - said below; the client is closed anyway
                failed.append(e)

        stopper = threading.Thread(target=stop, name=f"{self.consumer_id}-zk-stop",
                                   daemon=True)
        stopper.start()
        timeout_s = max(10.0, self.config.zookeeper_session_timeout_ms / 1000.0) + 2.0
        stopper.join(timeout_s)
        if stopper.is_alive():
            self.log.warning("the ZooKeeper client did not stop within %.0f s: left to stop "
                             "in the background", timeout_s)
            return
        if failed:
            self.log.warning("stopping the ZooKeeper client: %r", failed[0])
        self._zk.close()

    def _join_unless_disconnected(self, t: threading.Thread) -> None:
        """Join ``t``, but stop waiting after a second without a ZooKeeper connection (then
        ``t`` may wait for it in a kazoo call, which only the client's stop() ends)."""
        if t is threading.current_thread() or not t.is_alive():
            return
        deadline = time.monotonic() + SHUTDOWN_WAIT_S
        disconnected_since: float | None = None
        while t.is_alive() and time.monotonic() < deadline:
            t.join(0.05)
            if self._zk.connected:
                disconnected_since = None
            elif disconnected_since is None:
                disconnected_since = time.monotonic()
            elif time.monotonic() - disconnected_since > 1.0:
                return

    def _acquire_unless_disconnected(self, lock: threading.RLock) -> bool:
        """Like :meth:`_join_unless_disconnected`, for a lock; True when acquired."""
        deadline = time.monotonic() + SHUTDOWN_WAIT_S
        disconnected_since: float | None = None
        while time.monotonic() < deadline:
            if lock.acquire(timeout=0.05):
                return True
            if self._zk.connected:
                disconnected_since = None
            elif disconnected_since is None:
                disconnected_since = time.monotonic()
            elif time.monotonic() - disconnected_since > 1.0:
                return False
        return False

    def _leave_group(self) -> None:
        """Release every owner znode, then delete the registration (ids znode).

        Every answer is awaited until one session timeout from now at most: kazoo holds a
        request made while disconnected until the connection is back, and shutdown() must not
        wait for an outage (the session's end removes the znodes anyway).
        """
        if not self._zk.connected or self._session_lost.is_set():
            # Nothing to delete: a lost session's ephemerals are gone, and the session's end
            # takes a live one's.
            self._owned.clear()
            self._uncertain.clear()
            return
        deadline = time.monotonic() + self.config.zookeeper_session_timeout_ms / 1000.0
        try:
            self._release(set(self._owned), deadline)
            if self._registration is not None:
                self._unregister(deadline)
        except NoNodeError:
            pass
        except Exception as e:  # noqa: BLE001 - closing the session removes them anyway
            self.log.warning("leaving the group explicitly failed (%r); the session close "
                             "will remove the znodes", e)
        self._owned.clear()
        self._uncertain.clear()
        self.metrics.set_owned_partitions(self._owned)

    def _unregister(self, deadline: float) -> None:
        """Delete this member's ids znode, if this session holds it: one that another session
        holds is a process's with the same consumer.id (see :meth:`_register`), not ours."""
        path = zp.id_path(self.group, self.consumer_id)
        with self._live_session():
            session = self._session_id()
            read = self._zk.exists_async(path)
        stat = read.get(timeout=_timeout(deadline))
        if stat is None or stat.ephemeralOwner != session:
            return
        with self._live_session():
            deleted = self._zk.delete_async(path, version=stat.version)
        deleted.get(timeout=_timeout(deadline))

    def zookeeper_offset_store(self, timeout_s: float | None = None) -> ZkOffsetStore:
        """A store of the group's ZooKeeper offsets on this member's session: its commits are
        sent only while the session that owns the partitions lives, as the connector's own
        are, and each answer is awaited at most ``timeout_s``. For a caller that commits
        for the partitions this member owns, such as the Spark source's driver."""
        return ZkOffsetStore(self._zk, self.config.group_id, self.metrics, self._live_session,
                             timeout_s=timeout_s, fence=self._fence)

    # -- internals: set-up ---------------------------------------------------------------
    def _make_offset_store(self) -> OffsetStore:
        # Each answer awaited one session timeout at most: a commit must not wait out an
        # outage (shutdown() commits too); a timed-out one counts as a connection loss.
        return make_offset_store(self.config, self._zk, self.broker_addresses, self.metrics,
                                 self._live_session,
                                 zk_timeout_s=self.config.zookeeper_session_timeout_ms / 1000.0,
                                 fence=self._fence)

    @contextmanager
    def _live_session(self) -> Iterator[None]:
        """Held while an owner, registration or offset write is sent: raises if the session
        that owns the partitions is lost (see :meth:`_on_zk_state`), so the write never goes
        out under the next session, when the partitions may be another member's; and raises
        ConnectionLoss while disconnected (kazoo would hold the request until it reconnects,
        and whoever awaits the answer would wait out the outage)."""
        with self._session_guard:
            self._check_session()
            if not self._zk.connected:
                raise ConnectionLoss()
            yield

    def _send(self, call: Callable[..., IAsyncResult], *args: Any, **kwargs: Any
              ) -> IAsyncResult:
        """``call(*args, **kwargs)`` (a kazoo ``*_async`` request), inside :meth:`_live_session`,
        unless the session was lost or the connection dropped since the batch began: then an
        answer failed with that error, as if sent and failed (the caller treats it so), and
        nothing is sent. Per request, because a batch of hundreds can block in kazoo until
        the connection is back, possibly with the next session (see :meth:`_on_zk_state`)."""
        error: BaseException | None = None
        if self._session_lost.is_set():
            error = SessionExpiredError()
        elif not self._zk.connected:
            error = ConnectionLoss()
        if error is None:
            return call(*args, **kwargs)
        failed = self._zk.handler.async_result()
        failed.set_exception(error)
        return failed

    def _claim_streams(self) -> None:
        with self._state_lock:
            if self._closed:
                raise ConsumerShutdownError("the connector is shut down")
            if self._streams_created:
                raise MessageStreamsExistException(
                    "ZookeeperConsumerConnector can create message streams at most once"
                )
            self._streams_created = True

    def _all_queues(self) -> list[ChunkQueue]:
        return list(self._queues.values()) + list(self._wildcard_queues)

    def _check(self) -> None:
        self._check_fetcher()
        if self._bg_error is not None:
            raise BackgroundThreadError(
                f"{self.consumer_id}: a background thread failed: {self._bg_error!r}"
            ) from self._bg_error

    def _register_and_rebalance(self) -> None:
        try:
            self._register()
            self._first_rebalance()
            # Only now: one thread rebalances at a time. Events during the first rebalance
            # left _wakeup set, so the watcher's first pass looks at the group again.
            self._watcher.start()
        except BaseException:
            # The caller never gets the streams: leave the group, rather than stay a member
            # the others give partitions to that nobody reads (as the original did).
            self.shutdown()
            raise

    def _first_rebalance(self) -> None:
        # The first rebalance runs here so its failure reaches the caller; a connection that
        # drops meanwhile is waited for (zookeeper.connection.timeout.ms) like at start.
        deadline = time.monotonic() + self.config.zookeeper_connection_timeout_ms / 1000.0
        while True:
            try:
                self._synced_rebalance()
                return
            except _Disconnected:
                pass
            while not self._zk.connected or self._session_lost.is_set():
                if time.monotonic() > deadline:
                    raise ConsumerRebalanceFailedException(
                        f"{self.consumer_id} can't rebalance: no ZooKeeper connection within "
                        f"zookeeper.connection.timeout.ms "
                        f"({self.config.zookeeper_connection_timeout_ms} ms)"
                    )
                if self._session_lost.is_set() and self._zk.connected:
                    self._handle_session_loss()
                    continue
                if self._shutdown_event.wait(0.05):
                    raise ConsumerShutdownError("the connector is shut down")

    def _register(self, replace_stale: bool = True) -> None:
        """Create this member's ids znode (and the group's ids directory).

        ``replace_stale``: an ids znode of another session at our path is replaced (a restart
        with the same consumer.id finds its previous session's until that one expires). Not
        when registering again because ours went missing under a live session: whoever made
        it since is a live process with the same consumer.id, and replacing it would have it
        replace ours in turn.
        """
        reg = self._registration
        assert reg is not None
        path = zp.id_path(self.group, self.consumer_id)
        data = reg.encode(regex_escaped_twice=self.config.jvm_behaviour.regex_escaped_twice)
        if self.config.zk_acl and not self._zk.exists(zp.CONSUMERS):
            # /consumers is every group's parent: zookeeper.acl applies from the group's own
            # znode down, or the first secured group would lock the others out.
            from kazoo.security import OPEN_ACL_UNSAFE

            try:
                self._zk.create(zp.CONSUMERS, b"", acl=OPEN_ACL_UNSAFE)
            except NodeExistsError:
                pass
        self._zk.ensure_path(zp.ids_dir(self.group))
        try:
            self._zk.create(path, data, ephemeral=True)
        except NodeExistsError:
            # Ours from this session (a retried create), or a stale one from an earlier
            # session with the same consumer.id: replace the stale one, keep our own.
            existing, stat = self._zk.get(path)
            if stat.ephemeralOwner != self._session_id():
                if not replace_stale:
                    self.log.warning("%s is held by another session (a process with the same "
                                     "consumer.id?): not replacing it", path)
                    return
                self.log.warning("replacing stale registration %s", path)
                self._zk.delete(path)
                self._zk.create(path, data, ephemeral=True)
            elif existing != data:
                self._zk.set(path, data)
        self.log.info("registered %s %s", path, data.decode())

    # -- internals: ZooKeeper events -------------------------------------------------------
    def _on_watch(self, event: WatchedEvent | Any = None) -> None:
        # Runs in kazoo's event thread: never block here, only ask for a rebalance. The
        # generation first: whoever sees the wake-up must find the new generation too.
        self._view_gen += 1
        self._wakeup.set()

    def _on_zk_state(self, state: str) -> None:
        # Runs in kazoo's thread: only flags, and locks held for microseconds.
        if state == KazooState.LOST:
            # Recorded during shutdown too: shutdown must not delete the owner znodes of a
            # lost session (the paths may be other members' claims by now). Under the guard,
            # so a sender past its check has queued its request before kazoo fails the queue;
            # but not waited for long: each kazoo request writes a byte to a socket only this
            # thread reads, and a sender that filled it (hundreds of requests while the
            # connection was down) waits for this thread. Its queued requests are failed
            # all the same, and it sends no more once it sees the flag (_send).
            locked = self._session_guard.acquire(timeout=LISTENER_GUARD_WAIT_S)
            try:
                self._session_gen += 1
                self._session_lost.set()
                self._lease.forget()
            finally:
                if locked:
                    self._session_guard.release()
            if not locked:
                self.log.warning("session lost while a ZooKeeper request was stuck being "
                                 "sent; its requests fail with the session")
        with self._state_lock:
            # During shutdown too, until it has ended the streams: a closed gate stops its
            # final commit. Then the gate stays open for good (stopping the client reports
            # LOST), so that iterators reach the end of their streams.
            if self._streams_ended:
                return
            if state == KazooState.LOST or (state == KazooState.SUSPENDED
                                            and self._pause_on_outage):
                self._gate.close("connection")
            if state == KazooState.LOST:
                self._gate.close("session")
            elif state == KazooState.CONNECTED:
                self._gate.open("connection")
        if state == KazooState.SUSPENDED:
            self.log.warning("ZooKeeper connection lost: %s", "handing out nothing until it "
                             "is back" if self._pause_on_outage else "handing out messages "
                             "on (zookeeper.outage.delivery=continue)")
        elif state == KazooState.LOST:
            self._wakeup.set()
        elif state == KazooState.CONNECTED:
            self._lease_keeper.wake()  # the lease may have run out meanwhile: renew it now
            if self._session_lost.is_set() or self._rebalance_owed:
                self._wakeup.set()

    def _watcher_loop(self) -> None:
        backoff_s = self.config.rebalance_backoff_ms / 1000.0
        retry_at: float | None = None  # a failed rebalance is retried then (or on an event)
        try:
            while not self._shutdown_event.is_set():
                wait_s = 1.0 if retry_at is None else min(1.0, retry_at - time.monotonic())
                woken = self._wakeup.wait(max(0.0, wait_s))
                self._check_fetcher()
                if not woken:
                    self._check_agreement()
                if self._shutdown_event.is_set():
                    break
                if retry_at is not None and time.monotonic() >= retry_at:
                    woken = True
                if not woken:
                    continue
                retry_at = None
                # Cleared before acting: an event from now on means another pass.
                self._wakeup.clear()
                try:
                    if self._session_lost.is_set():
                        self._handle_session_loss()
                    if not self._zk.connected or self._session_lost.is_set():
                        self._owe_rebalance()  # the CONNECTED state wakes us
                        continue
                    self._synced_rebalance()
                except _Disconnected:
                    self._owe_rebalance()
                except ConsumerRebalanceFailedException as e:
                    self.log.error("%s; retrying in %d ms", e, self.config.rebalance_backoff_ms)
                    retry_at = time.monotonic() + backoff_s
                except ZkConsumerError as e:
                    self.log.error("rebalance failed: %s; retrying", e)
                    retry_at = time.monotonic() + backoff_s
                except Exception as e:  # noqa: BLE001 - ZooKeeper connection errors and such
                    if self._shutdown_event.is_set():
                        break
                    self.log.warning("rebalance interrupted (%r); retrying", e)
                    retry_at = time.monotonic() + backoff_s
        except BaseException as e:  # noqa: BLE001 - kept and re-raised to the user
            self._bg_error = e
            self.log.exception("watcher thread died")
            if not self._shutdown_event.is_set():
                # No rebalance will run any more: the iterators raise it rather than wait
                # for ever (commit_offsets() raises it too).
                self._fetch_failure = FetcherFailed(e)
                self._requeue_fetch_failure()

    def _agreement_delay_s(self) -> float:
        """Long enough for every member's claims to have waited out their holders."""
        return (self.config.zookeeper_session_timeout_ms
                + 2 * self.config.rebalance_backoff_ms) / 1000.0

    def _check_agreement(self) -> None:
        """Once due, compare the owner znodes with the last assignment; a disagreement the
        other JVM release line's roundrobin order explains is logged with the setting to
        change (checked again a few times while partitions just stay unowned)."""
        check = self._agreement
        if check is None or time.monotonic() < check.due:
            return
        self._agreement = None
        try:
            owners = self._read_owners(check.assignment)
        except Exception as e:  # noqa: BLE001 - a diagnosis only; the next rebalance re-arms
            self.log.debug("could not read the owners to check the assignment: %r", e)
            return
        hint = disagreement_hint(
            self.config.partition_assignment_strategy, check.view.consumers_for_topic,
            check.view.partitions_for_topic, self.config.jvm_behaviour, check.assignment,
            owners, persistent=check.rounds >= 2)
        if hint is not None:
            self.log.warning("%s", hint)
        elif check.rounds < 2 and any(check.assignment[tp] != o for tp, o in owners.items()):
            self._agreement = replace(check, due=time.monotonic() + self._agreement_delay_s(),
                                      rounds=check.rounds + 1)

    def _read_owners(self, assignment: Mapping[TopicPartition, str]
                     ) -> dict[TopicPartition, str | None]:
        pending = [(tp, self._zk.get_async(zp.owner_path(self.group, tp.topic, tp.partition)))
                   for tp in sorted(assignment)]
        self._zk_ops += len(pending)
        owners: dict[TopicPartition, str | None] = {}
        for tp, result in pending:
            try:
                data, _ = result.get(timeout=30)
                owners[tp] = zp.decode_owner(data)
            except NoNodeError:
                owners[tp] = None
        return owners

    def _owe_rebalance(self) -> None:
        """Rebalance once connected again (the CONNECTED listener reads the flag; checking
        the state after setting it closes the race with a reconnection in between)."""
        self._rebalance_owed = True
        if self._zk.connected:
            self._wakeup.set()

    def _check_fetcher(self) -> None:
        """A fetch side that died is re-raised to the application, never swallowed."""
        error = getattr(self._fetcher, "error", None)
        if error is None or self._bg_error is not None:
            return
        self._bg_error = error
        self._fetch_failure = FetcherFailed(error)
        self.log.error("fetching failed: %r; iterators will raise it", error)
        self._requeue_fetch_failure()

    def _requeue_fetch_failure(self) -> None:
        # Put again after every clear of the queues: a rebalance must not drop it before an
        # iterator has taken it (an iterator that took it raises it on every later call).
        failure = self._fetch_failure
        if failure is not None:
            for q in self._all_queues():
                q.put_shutdown(failure)

    def _handle_session_loss(self) -> None:
        """The session expired: our ephemerals are gone. Stop fetching, forget the owner
        znodes (deleting nothing), and re-register once connected."""
        with self._rebalance_lock:
            gen = self._session_gen
            if self._topic_registry or self._owned:
                self.log.warning("ZooKeeper session lost: stopping fetchers, forgetting "
                                 "%d owned partitions", len(self._owned))
                self._stop_fetching(commit=False)
                self._topic_registry = {}
            # Under _commit_lock: a commit under way (it checked ownership under it) ends
            # first, while _session_lost is still set, so its write is not sent; later ones
            # find nothing owned.
            with self._commit_lock:
                self._owned = {}
                self._uncertain.clear()
                self._fence.forget()
            self._settled_view = None
            self.metrics.set_owned_partitions(self._owned)
            if not self._zk.connected:
                return
            self.log.info("new ZooKeeper session: re-registering")
            self._register()
            with self._session_guard:
                if self._session_gen == gen:  # not lost again meanwhile
                    self._session_lost.clear()
            self._wakeup.set()

    # -- the rebalance ---------------------------------------------------------------------
    def _synced_rebalance(self) -> None:
        """Rebalance until it succeeds (``rebalance.max.retries`` failures at most).

        Raises :class:`_Disconnected` when ZooKeeper is unreachable or the session was lost:
        the caller waits for the connection, and after a lost session re-registers first.
        What this member fetches and owns then stays as it is (the gate is closed, so nothing
        is handed out): with the same session back, the next rebalance commits what was
        consumed and releases what moves; a lost session stops and forgets everything.
        """
        start = time.monotonic()
        with self._rebalance_lock:
            self._zk_ops = 0
            self._rebalance_owed = False
            session_gen = self._session_gen
            failures = 0
            reregistered = False
            mismatch: AssignmentStrategyMismatchError | None = None
            max_retries = self.config.rebalance_max_retries
            while True:
                if self._shutdown_event.is_set():
                    return
                self._wakeup.clear()  # events from now on mean another rebalance
                if self._session_lost.is_set() or not self._zk.connected:
                    raise _Disconnected()
                self.stats.attempts += 1
                try:
                    changed = self._rebalance_attempt()
                except _Disconnected:
                    self.log.warning("rebalance attempt cut short: the commit before release "
                                     "waits for ZooKeeper")
                    raise
                except _ShuttingDown:
                    return
                except _Restart:
                    self.stats.restarts += 1
                    self.log.info("group view changed during the rebalance; starting again")
                    continue
                except _Unregistered as e:
                    if self._session_lost.is_set():
                        raise _Disconnected() from e  # the session-loss path registers again
                    self.log.warning("%s is missing while the ZooKeeper session lives (deleted "
                                     "by hand, or by a process with the same consumer.id "
                                     "leaving): registering again", e)
                    try:
                        self._register(replace_stale=False)
                    except _CONNECTION_ERRORS as e2:
                        raise _Disconnected() from e2
                    except Exception as e2:  # noqa: BLE001 - a failed attempt, retried
                        failures += 1
                        self.stats.failures += 1
                        self.log.warning("rebalance attempt %d failed: registering again "
                                         "failed: %r", failures, e2)
                    else:
                        if not reregistered:
                            # At once, as a restart: the new registration wakes every member
                            # once (this one too), nothing more.
                            reregistered = True
                            self.stats.restarts += 1
                            continue
                        # Missing again: deleted as soon as made; the backoff applies.
                        failures += 1
                        self.stats.failures += 1
                        self.log.warning("rebalance attempt %d failed: the registration "
                                         "went missing again", failures)
                except AssignmentStrategyMismatchError as e:
                    # Not retried here: only a change of the group can end it (the watcher
                    # thread tries again after the backoff). Everything owned goes first.
                    mismatch = e
                    self.stats.failures += 1
                except (_Conflict, ZkDataError, NoNodeError, NodeExistsError) as e:
                    failures += 1
                    self.stats.failures += 1
                    self.log.info("rebalance attempt %d failed: %s", failures, e)
                except Exception as e:
                    if self._shutdown_event.is_set():
                        return
                    failures += 1
                    self.stats.failures += 1
                    if (isinstance(e, _CONNECTION_ERRORS) or self._session_lost.is_set()
                            or not self._zk.connected):
                        # Keep _owned as it is: what this session holds is released by the
                        # next attempt once connected (or forgotten if the session is lost).
                        self.log.warning("rebalance attempt %d cut short: ZooKeeper %s (%r)",
                                         failures, "session lost" if self._session_lost.is_set()
                                         else "connection lost", e)
                        raise _Disconnected() from e
                    self.log.warning("rebalance attempt %d failed: %r", failures, e)
                else:
                    if self._session_gen == session_gen:
                        # Every claim was made under the session current now.
                        self._gate.open("session")
                    if not changed:
                        self.stats.unchanged += 1
                        self.log.info("group unchanged since the last rebalance: keeping %s",
                                      _fmt_owned(self._owned))
                        return
                    duration = time.monotonic() - start
                    self.stats.rebalances += 1
                    self.stats.last_duration_s = duration
                    self.stats.last_zk_ops = self._zk_ops
                    self.stats.durations_s.append(duration)
                    self.metrics.record_rebalance(duration)
                    self.metrics.set_owned_partitions(self._owned)
                    self.log.info(
                        "rebalance done in %.0f ms: owns %s", duration * 1000,
                        _fmt_owned(self._owned),
                    )
                    return
                # All-or-nothing: a failed attempt leaves this member owning nothing. What
                # was consumed is committed first, as in step 2 (an attempt that failed after
                # step 3 left nothing to commit).
                self._stop_fetching(commit=self.config.auto_commit_enable)
                if self._owned and not self._listener_told and self._listener is not None:
                    # Failed before step 3: the application (committing itself, say) is told
                    # before its partitions go, as in a rebalance that succeeds.
                    try:
                        self._tell_releasing()
                    except Exception:  # noqa: BLE001 - the rollback goes on all the same
                        self.log.exception("before_releasing_partitions failed")
                self._topic_registry = {}
                try:
                    self._release(set(self._owned))
                except _CONNECTION_ERRORS as e:
                    raise _Disconnected() from e
                if mismatch is not None:
                    raise mismatch
                if failures >= max_retries:
                    # Timed too, as the legacy rebalance timer timed a failure: the slowest
                    # rebalances are the ones to see.
                    self.metrics.record_rebalance(time.monotonic() - start)
                    raise ConsumerRebalanceFailedException(
                        f"{self.consumer_id} can't rebalance after {max_retries} retries"
                    )
                if self._shutdown_event.wait(self.config.rebalance_backoff_ms / 1000.0):
                    return

    def _tell_releasing(self) -> None:
        """The listener's ``before_releasing_partitions`` with what this member owns (marked
        told: a failed attempt's rollback tells it only when the attempt had not)."""
        self._listener_told = True
        if self._listener is not None:
            ownership: dict[str, set[int]] = {}
            for tp in self._owned:
                ownership.setdefault(tp.topic, set()).add(tp.partition)
            self._listener.before_releasing_partitions(ownership)

    def _rebalance_attempt(self) -> bool:
        """One attempt of the original's steps; False if it found nothing to change."""
        self._listener_told = False
        # Read first: a rebalance_now() from here on asks for another attempt.
        forced = self._force_requested
        # Before the view: an event from here on makes a waiting claim restart.
        gen = self._view_gen
        # 1. read the group's members, the topics' partitions, the brokers
        view = self._read_view()
        self._check_strategy(view)
        if self._topic_filter is not None:
            # What the filter matches now: each has an OwnedPartitionsCount, 0 if none owned.
            self.metrics.set_subscribed_topics(
                t for t, ids in view.consumers_for_topic.items()
                if any(zp.thread_consumer_id(i) == self.consumer_id for i in ids)
            )
        if not view.brokers:
            # Stop here, as the original did: keep the current assignment and fetchers (the
            # brokers may well be up, only their registration gone); the watch on
            # /brokers/ids wakes us when a broker registers, for a full rebalance.
            self._settled_view = None
            self.log.warning("no broker is registered in ZooKeeper; waiting for one")
            return True
        self._verify_owned()
        # 5 (computed first: partitions staying here keep their owner znodes, and an
        # unchanged group changes nothing)
        strategy = self.config.partition_assignment_strategy
        global_assignment = assign(
            strategy, view.consumers_for_topic, view.partitions_for_topic,
            dashed_names=self.config.jvm_behaviour.dashed_partition_names,
        )
        mine = {
            tp: thread
            for tp, thread in global_assignment.items()
            if zp.thread_consumer_id(thread) == self.consumer_id
        }
        settled = (view.consumers_for_topic, view.partitions_for_topic, view.brokers)
        if (forced == self._force_served and settled == self._settled_view
                and mine == self._owned and not self._uncertain):
            # The group is as the last rebalance left it, whose fetchers still run: the usual
            # case after a ZooKeeper connection blip (kazoo fires every watch then, and the
            # read above set them again). The original's ZkClient kept its watches over a
            # reconnection and did not rebalance at all; stopping and restarting the
            # fetchers would pause every member of the group for nothing.
            return False
        if self._shutdown_event.is_set():
            # shutdown() gave up waiting for this attempt (ZooKeeper was away) and has put
            # the streams' end: stopping, claiming or fetching now would only undo that.
            raise _ShuttingDown()
        full = forced != self._force_served  # rebalance_now() asks for a full one
        self._force_served = forced  # a full rebalance from here on
        if not full and self._incremental_possible():
            self._incremental(mine, gen, view)
            self._settled_view = settled
            self._agreement = _AgreementCheck(view, global_assignment,
                                              time.monotonic() + self._agreement_delay_s())
            return True
        # 2. stop the fetchers, clear queues and streams, commit
        self._stop_fetching(commit=self.config.auto_commit_enable)
        # 3. the listener, with what this member owned until now
        self._tell_releasing()
        self._topic_registry = {}  # kept until now: the listener may commit from it
        # 4. release what moves away (or to another of our threads)
        self._release({tp for tp, th in self._owned.items() if mine.get(tp) != th})
        # 7. claim everything; a conflict waits for the holder to let go
        self._claim(mine, gen, view)
        # 6, after 7: the previous owner commits before it releases, so only once we own a
        # partition is its committed offset final (reading first would replay its last
        # window whenever the claim had to wait).
        committed = self._offsets.read(sorted(mine))
        # 8. the listener, then the fetchers
        if self._listener is not None:
            per_topic: dict[str, dict[int, str]] = {}
            for tp, thread in sorted(global_assignment.items()):
                per_topic.setdefault(tp.topic, {})[tp.partition] = thread
            self._listener.before_starting_fetchers(self.consumer_id, per_topic)
        registry = {tp: self._new_info(tp, thread, committed.get(tp))
                    for tp, thread in sorted(mine.items())}
        self._topic_registry = registry
        if registry:
            self._fetcher.start_connections(registry.values())
        self._settled_view = settled
        self._agreement = _AgreementCheck(view, global_assignment,
                                          time.monotonic() + self._agreement_delay_s())
        return True

    def _incremental_possible(self) -> bool:
        """Whether only the partitions that move need to stop: some are being fetched, the
        fetch side can stop and start some of them, and no rebalance listener expects every
        partition to stop (its before_releasing_partitions is told of all it owns)."""
        return (bool(self._topic_registry) and self._listener is None
                and isinstance(self._fetcher, IncrementalFetchSide))

    def _incremental(self, mine: Mapping[TopicPartition, str], gen: int,
                     view: GroupView) -> None:
        """Steps 2 to 8 for the partitions that move only: those staying with the same thread
        go on being fetched and handed out throughout. Those leaving are stopped, their
        consumed offsets committed, then released; the arriving ones are claimed, their
        offsets read and their fetching started. (Everything is released after a failure,
        as in a full rebalance.)"""
        fetcher = self._fetcher
        assert isinstance(fetcher, IncrementalFetchSide)
        registry = self._topic_registry
        staying = {tp: info for tp, info in registry.items()
                   if mine.get(tp) == info.thread_id == self._owned.get(tp)
                   and tp not in self._uncertain}
        leaving = [info for tp, info in registry.items() if tp not in staying]
        self.stats.incremental += 1
        self.stats.last_kept = len(staying)
        if leaving:
            self._stop_partitions(leaving, fetcher)
        # 4. release what moves away (or to another of our threads)
        self._release({tp for tp, th in self._owned.items() if mine.get(tp) != th})
        self._topic_registry = staying  # what left is committed and no longer owned
        # 7. claim; 6. offsets of the arriving partitions, once owned (see the full steps)
        self._claim(mine, gen, view)
        arriving = {tp: th for tp, th in mine.items() if tp not in staying}
        committed = self._offsets.read(sorted(arriving))
        infos = [self._new_info(tp, th, committed.get(tp)) for tp, th in sorted(arriving.items())]
        self._topic_registry = {**staying, **{i.tp: i for i in infos}}
        if infos:
            fetcher.add_partitions(infos)
        self.log.info("incremental rebalance: %d partitions kept fetching, %d stopped, %d "
                      "started", len(staying), len(leaving), len(infos))

    def _stop_partitions(self, infos: list[PartitionTopicInfo], fetcher: IncrementalFetchSide
                         ) -> None:
        """Step 2 for these partitions only: revoke them (nothing more of them is enqueued
        or handed out), stop fetching them, drop their chunks, and commit."""
        self._settled_view = None
        for info in infos:
            info.revoke()
        fetcher.remove_partitions(infos)
        for s in self._streams:
            s.drop_revoked()  # the current chunk's consumed offset is final after this
        for q in self._all_queues():
            q.drop_revoked()
        if self.config.auto_commit_enable:
            if self._gate.closed:
                raise _Disconnected()
            try:
                self._commit(retry_on_failure=True, strict=True)
            except _CONNECTION_ERRORS as e:
                raise _Disconnected() from e
            except Exception:  # noqa: BLE001 - the rebalance goes on, as in the original
                self.log.exception("commit before release failed")

    def _new_info(self, tp: TopicPartition, thread: str, offset: int | None
                  ) -> PartitionTopicInfo:
        off = INVALID_OFFSET if offset is None else offset
        return PartitionTopicInfo(
            tp.topic, tp.partition, self._queue_for(tp.topic, thread), off, off,
            self.config.fetch_message_max_bytes, self.config.client_id, thread,
        )

    def _check_strategy(self, view: GroupView) -> None:
        """Refuse to claim when this member's strategy differs from the group's."""
        group = view.refused.get(self.consumer_id)
        if group is None:
            for cid in sorted(view.refused):
                self.log.warning("group member %s is left out of the assignment: its strategy "
                                 "%r differs from the group's %s", cid,
                                 view.members[cid].assignment_strategy, view.refused[cid])
            return
        raise AssignmentStrategyMismatchError(
            f"{self.consumer_id}: partition.assignment.strategy "
            f"{self.config.partition_assignment_strategy!r} differs from the group's {group}: "
            "not claiming any partition (give every member of group "
            f"{self.group} the same strategy; sticky needs a group of zkconsumer members only)")

    def _queue_for(self, topic: str, thread_id: str) -> ChunkQueue:
        if self._wildcard_queues:
            n = int(thread_id.rsplit("-", 1)[1])
            return self._wildcard_queues[n]
        return self._queues[(topic, thread_id)]

    def _read_view(self) -> GroupView:
        zk = self._zk
        ids_dir = zp.ids_dir(self.group)
        self._zk_ops += 1
        try:
            children, stat = zk.get_children(ids_dir, watch=self._on_watch, include_data=True)
        except NoNodeError:
            raise _Unregistered(f"the group's {ids_dir}") from None  # the group deleted
        members: dict[str, zp.ConsumerRegistration] = {}
        created: dict[str, int] = {}  # consumer id -> czxid: the registration order
        pending = [(cid, zk.get_async(zp.id_path(self.group, cid))) for cid in sorted(children)]
        self._zk_ops += len(pending)
        for cid, result in pending:
            path = zp.id_path(self.group, cid)
            try:
                data, id_stat = result.get()
                created[cid] = id_stat.czxid
                reg = zp.ConsumerRegistration.decode(data, path)
                if reg.is_wildcard:
                    filter_from_registration(reg.pattern, next(iter(reg.subscription)))
                members[cid] = reg
            except NoNodeError:
                continue  # left between the two reads; its deletion event is queued
            except ZkDataError as e:
                self.log.error("skipping a group member with an unreadable registration: %s", e)
        if self.consumer_id not in members:
            # Missing (or unreadable, logged above: registering again rewrites it).
            raise _Unregistered(f"registration {zp.id_path(self.group, self.consumer_id)}")
        refused, _ = strategy_refusals(
            {cid: reg.assignment_strategy for cid, reg in members.items()},
            sorted(created, key=lambda cid: (created[cid], cid)))
        everyone = members
        members = {cid: reg for cid, reg in members.items() if cid not in refused}

        wildcard = any(reg.is_wildcard for reg in members.values())
        all_topics: list[str] = []
        if wildcard:
            self._zk_ops += 1
            try:
                all_topics = zk.get_children(zp.BROKER_TOPICS, watch=self._on_watch)
            except NoNodeError:
                all_topics = []
        cft = consumers_for_topic(members, all_topics, self.config.exclude_internal_topics)
        my_topics = {t for t, ids in cft.items()
                     if any(zp.thread_consumer_id(i) == self.consumer_id for i in ids)}
        if (self._registration is not None and not self._registration.is_wildcard
                and self.consumer_id not in refused):
            my_topics |= set(self._registration.subscription)

        partitions: dict[str, list[int]] = {}
        for topic in sorted(set(cft) | my_topics):
            try:
                path = zp.topic_path(topic)
            except ValueError as e:
                # A JVM member may subscribe to any string ("logs/app"): no such topic can
                # exist, as the JVM finds (no /brokers/topics znode), and the others go on.
                self.log.warning("ignoring topic %r a member subscribes to: %s", topic, e)
                continue
            self._zk_ops += 1
            try:
                data, _ = zk.get(path, watch=self._on_watch)
            except NoNodeError:
                # Watch for the topic's creation.
                zk.exists(path, watch=self._on_watch)
                continue
            try:
                partitions[topic] = sorted(zp.TopicAssignment.decode(data, path).partitions)
            except ZkDataError as e:
                self.log.error("ignoring topic %s: %s", topic, e)
        cft = {t: ids for t, ids in cft.items() if t in partitions}

        self._zk_ops += 1
        try:
            brokers = zk.get_children(zp.BROKER_IDS)
        except NoNodeError:
            brokers = []
        if not brokers:
            self._zk_ops += 1
            zk.exists(zp.BROKER_IDS, watch=self._on_watch)
            try:
                brokers = zk.get_children(zp.BROKER_IDS, watch=self._on_watch)
            except NoNodeError:
                brokers = []
        return GroupView(everyone, stat.cversion, cft, partitions,
                         sorted(i for b in brokers if (i := zp.parse_id(b)) is not None),
                         refused)

    def _verify_owned(self) -> None:
        """Read this session's owner znodes back rather than trusting ``_owned``.

        One was deleted behind our back (by hand, or by a tool): it becomes uncertain, so the
        claim creates it again. One held by another session (deleted, then claimed by
        another member) is not ours: forgotten, so it is neither committed nor deleted, and
        the claim waits for it if the assignment still gives it to us. One of ours naming
        another of our threads is rewritten by the claim.
        """
        certain = sorted(tp for tp in self._owned if tp not in self._uncertain)
        if not certain:
            return
        with self._live_session():
            session = self._session_id()
            reads = [(tp, self._send(self._zk.get_async,
                                     zp.owner_path(self.group, tp.topic, tp.partition)))
                     for tp in certain]
        self._zk_ops += len(reads)
        # A missing one stays owned (uncertain) until the claim: its consumed offset is still
        # committed meanwhile, as it was before it went (the next owner reads it after claiming).
        with self._commit_lock:
            try:
                for tp, result in reads:
                    try:
                        data, stat = result.get()
                    except NoNodeError:
                        self.log.warning("owner znode of %s-%d is gone: claiming it again",
                                         tp.topic, tp.partition)
                        self._uncertain.add(tp)
                        continue
                    if stat.ephemeralOwner != session:
                        self.log.warning("owner znode of %s-%d is held by %r of another "
                                         "session: not ours", tp.topic, tp.partition,
                                         data.decode(errors="replace"))
                        self._disown(tp)
                    elif data != zp.encode_owner(self._owned[tp]):
                        self._uncertain.add(tp)
            finally:
                self.metrics.set_owned_partitions(self._owned)

    def _view_changed(self, gen: int) -> bool:
        """The group view changed since generation ``gen`` was read (or the session is lost,
        so whatever this attempt claims is void)."""
        return self._view_gen != gen or self._session_lost.is_set()

    def _claim(self, mine: Mapping[TopicPartition, str], gen: int, view: GroupView) -> None:
        """Create every owner znode in ``mine``, waiting out members that are releasing;
        :class:`_Restart` as soon as the group view moves on from generation ``gen``.
        ``view``: the group as read, for the hint when a holder never lets go."""
        deadline = time.monotonic() + self.config.zookeeper_session_timeout_ms / 1000.0 + (
            self.config.rebalance_backoff_ms / 1000.0
        )
        todo = sorted((tp, th) for tp, th in mine.items()
                      if self._owned.get(tp) != th or tp in self._uncertain)
        # First every create at once (pipelined: one round trip, not one per partition);
        # only the conflicts go through the one-by-one wait below.
        self._zk_ops += len(todo)
        with self._live_session():
            pending = [
                (tp, th, self._send(
                    self._zk.create_async, zp.owner_path(self.group, tp.topic, tp.partition),
                    zp.encode_owner(th), ephemeral=True, makepath=True))
                for tp, th in todo
            ]
        conflicts = []
        lost: BaseException | None = None
        refused: BaseException | None = None
        # Every answer is taken before anything is raised: a create that succeeded after one
        # that failed is owned all the same, so the failed attempt releases it (else it would
        # stay held by this session, and its next owner could never claim it).
        for tp, thread, result in pending:
            try:
                result.get()
                self._own(tp, thread)
            except NodeExistsError:
                conflicts.append((tp, thread))  # or ours already, if uncertain: read back
            except _CONNECTION_ERRORS as e:
                # Maybe created: released (after reading it back) if it moves away, and
                # claimed again otherwise.
                self._own(tp, thread, uncertain=True)
                lost = lost or e
            except Exception as e:  # noqa: BLE001 - not created (NoAuth, say); raised below
                refused = refused or e
        if lost is not None:
            raise lost
        if refused is not None:
            raise refused
        for tp, thread in conflicts:
            path = zp.owner_path(self.group, tp.topic, tp.partition)
            data = zp.encode_owner(thread)
            while True:
                if self._view_changed(gen):
                    raise _Restart()
                if self._shutdown_event.is_set():
                    raise _Conflict("shutting down")
                self._zk_ops += 1
                with self._live_session():
                    created = self._zk.create_async(path, data, ephemeral=True, makepath=True)
                try:
                    created.get()
                    self._own(tp, thread)
                    break
                except NodeExistsError:
                    pass
                except _CONNECTION_ERRORS:
                    self._own(tp, thread, uncertain=True)  # maybe created, as above
                    raise
                gone = threading.Event()
                try:
                    self._zk_ops += 1
                    holder, stat = self._zk.get(path, watch=lambda _e, g=gone: g.set())
                except NoNodeError:
                    continue
                holder_thread = holder.decode(errors="replace")
                if stat.ephemeralOwner == self._session_id():
                    # Ours already: a create whose reply was lost. Written again if it names
                    # another of our threads (the version: nobody else can have touched it).
                    if holder_thread != thread:
                        # Owned whatever the write's fate: released if it moves away.
                        self._own(tp, thread, uncertain=True)
                        self._zk_ops += 1
                        with self._live_session():
                            rewritten = self._zk.set_async(path, data, version=stat.version)
                        rewritten.get()
                    self._own(tp, thread)
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self._warn_if_release_mismatch(view, tp, holder_thread)
                    raise _Conflict(f"{path} is still held by {holder_thread!r}")
                self.log.debug("%s held by %s; waiting for its release", path, holder_thread)
                self.stats.claim_waits += 1
                # Wake on the deletion, on a group change, or on shutdown.
                end = time.monotonic() + remaining
                while not gone.is_set() and time.monotonic() < end:
                    if self._view_changed(gen) or self._shutdown_event.is_set():
                        break
                    gone.wait(0.05)

    def _warn_if_release_mismatch(self, view: GroupView, tp: TopicPartition,
                                  holder: str) -> None:
        """A claim that never resolves because the holder's assignor orders partitions as
        another JVM release line does: say which jvm.compatibility to set."""
        hint = order_mismatch_hint(
            self.config.partition_assignment_strategy, view.consumers_for_topic,
            view.partitions_for_topic, self.config.jvm_behaviour, tp, holder)
        if hint is not None:
            self.log.warning("%s", hint)

    def _own(self, tp: TopicPartition, thread: str, uncertain: bool = False) -> None:
        self._owned[tp] = thread
        if uncertain:
            self._uncertain.add(tp)
        else:
            self._uncertain.discard(tp)

    def _disown(self, tp: TopicPartition) -> None:
        self._owned.pop(tp, None)
        self._uncertain.discard(tp)
        self._fence.forget([tp])

    def _release(self, tps: set[TopicPartition], deadline: float | None = None) -> None:
        # Answers are awaited until deadline (time.monotonic()) at most; None: for ever.
        # A tp in _owned and not _uncertain is an ephemeral this session created, which
        # nobody else can replace while the session lives: it is deleted without reading it
        # back. An uncertain one is read back first and deleted only if this session holds
        # it (else it is another member's claim, or missing). Requests are pipelined and
        # sent only while the session is known to live (see _session_guard): after a loss,
        # the same path may already be another member's claim.
        # Under _commit_lock: no commit of these partitions is written after their owner
        # znodes go (the next owner reads the committed offsets once it has claimed).
        # Every answer is taken before anything is raised (as in _claim): what was deleted
        # after a refusal is no longer owned.
        owned = sorted(tp for tp in tps if tp in self._owned)
        path = zp.owner_path
        with self._commit_lock:
            lost: BaseException | None = None
            refused: BaseException | None = None
            try:
                doubtful = [tp for tp in owned if tp in self._uncertain]
                ours = set(owned) - set(doubtful)
                if doubtful:
                    with self._live_session():
                        session = self._session_id()
                        # A sync first: after a reconnection to another server of the
                        # ensemble, a follower that has not applied our create yet would
                        # say missing, and a znode we hold would be forgotten yet held
                        # until the session ends. The session's reads wait behind its sync
                        # (pipelined: no extra round trip).
                        self._zk.sync_async(zp.owners_dir(self.group))
                        reads = [(tp, self._send(self._zk.exists_async,
                                                 path(self.group, tp.topic, tp.partition)))
                                 for tp in doubtful]
                    self._zk_ops += len(reads)
                    for tp, result in reads:
                        try:
                            stat = result.get(timeout=_timeout(deadline))
                        except _CONNECTION_ERRORS as e:
                            lost = lost or e
                            continue
                        except Exception as e:  # noqa: BLE001 - stays uncertain; raised below
                            refused = refused or e
                            continue
                        if stat is not None and stat.ephemeralOwner == session:
                            ours.add(tp)
                        else:
                            self._disown(tp)  # missing, or another member's: not ours
                with self._live_session():
                    pending = [
                        (tp, self._send(self._zk.delete_async,
                                        path(self.group, tp.topic, tp.partition)))
                        for tp in sorted(ours)
                    ]
                self._zk_ops += len(pending)
                for tp, result in pending:
                    try:
                        result.get(timeout=_timeout(deadline))
                    except NoNodeError:
                        pass
                    except _CONNECTION_ERRORS as e:
                        # Maybe not deleted: stays in _owned, read back and released later.
                        self._uncertain.add(tp)
                        lost = lost or e
                        continue
                    except Exception as e:  # noqa: BLE001 - refused (NoAuth, say): still ours
                        refused = refused or e
                        continue
                    self._disown(tp)
            finally:
                self.metrics.set_owned_partitions(self._owned)
        if lost is not None:
            raise lost
        if refused is not None:
            raise refused

    def _session_id(self) -> int:
        """This client's session id; ConnectionLoss while disconnected (kazoo then says
        None). Read inside ``_live_session()`` when comparing it with a znode's owner."""
        client_id = self._zk.client_id
        if client_id is None:
            raise ConnectionLoss()
        return int(client_id[0])

    def _check_session(self) -> None:
        """Call with ``_session_guard`` held, before sending owner or offset writes."""
        if self._session_lost.is_set():
            raise SessionExpiredError()

    def _stop_fetching(self, commit: bool) -> None:
        """Step 2: stop fetchers, clear queues and streams, commit consumed offsets.

        The registry stays, as in the original: the listener (step 3) may commit from it;
        the caller forgets it. A commit ZooKeeper is not there for raises
        :class:`_Disconnected` rather than letting the partitions go uncommitted (what was
        consumed stays in the registry, and the next attempt commits it).
        """
        self._settled_view = None
        self._fetcher.stop_connections()
        for q in self._all_queues():
            q.clear()
        self._requeue_fetch_failure()
        for s in self._streams:
            s.clear()
        if commit and self._topic_registry:
            if self._cut_off():
                raise _Disconnected()
            try:
                # strict: the gate closing after the check above must not skip it quietly.
                self._commit(retry_on_failure=True, strict=True)
            except _CONNECTION_ERRORS as e:
                raise _Disconnected() from e
            except Exception:  # noqa: BLE001 - the rebalance goes on, as in the original
                self.log.exception("commit before release failed")

    # -- commits ---------------------------------------------------------------------------
    def _cut_off(self) -> bool:
        """The gate is closed for a reason other than the lease: the connection is down or
        the session was lost, so no commit is sent. A lapsed lease alone does not stop
        commits (nor a rebalance's): they are fenced themselves (see _fence), and would
        succeed exactly when the session still lives."""
        return self._gate.closed and bool(self._gate.reasons() - {"lease"})

    def _commit(self, retry_on_failure: bool, strict: bool = False) -> None:
        """Commit consumed offsets. Paused, nothing is written: quietly, or with ``strict``
        (the application asked) ConnectionLoss."""
        made_in = self._session_gen
        if self._cut_off():
            # The partitions may be another member's by now: a late commit could move its
            # offsets back. What was consumed stays in the registry for the next commit.
            self.log.debug("not committing while paused (%s)", ", ".join(self._gate.reasons()))
            if strict:
                raise ConnectionLoss()
            return
        with self._commit_lock:
            # Only what this member still owns: between a rebalance's release and its new
            # registry, the registry still holds the partitions given away (see _release).
            owned = self._owned
            offsets = {
                tp: info.consumed_offset
                for tp, info in self._topic_registry.items()
                if info.consumed_offset >= 0 and tp in owned
            }
            self._write_offsets(offsets, retry_on_failure, made_in)

    def _commit_explicit(self, offsets: dict[TopicPartition, int], retry_on_failure: bool) -> None:
        made_in = self._session_gen
        with self._commit_lock:
            # Checked under the lock _release holds while it gives partitions away: an owned
            # partition's commit is written before its owner znode goes.
            owned = self._owned
            missing = [tp for tp in offsets if tp not in owned]
            if missing:
                raise PartitionsNotOwnedError(self.consumer_id, missing)
            self._write_offsets(offsets, retry_on_failure, made_in)

    def _write_offsets(self, offsets: Mapping[TopicPartition, int], retry_on_failure: bool,
                       made_in: int) -> CommitFencedError | None:
        """Store ``offsets`` (a commit made when ``_session_gen`` was ``made_in``), retrying
        per the configuration; call with ``_commit_lock`` held. What the fence drops (see
        :mod:`zkconsumer.consumer.fence`) is logged, never retried, and returned."""
        dropped: dict[TopicPartition, str] = {}
        try:
            self._write_admitted(dict(offsets), retry_on_failure, made_in, dropped)
        finally:
            if dropped:
                self._fence.warn_dropped(dropped)
        if not dropped:
            return None
        return CommitFencedError(self.consumer_id, dropped, "; ".join(sorted(
            set(dropped.values()))))

    def _write_admitted(self, offsets: dict[TopicPartition, int], retry_on_failure: bool,
                        made_in: int, dropped: dict[TopicPartition, str]) -> None:
        retries = self.config.offsets_commit_max_retries if retry_on_failure else 0
        for attempt in range(retries + 1):
            # Checked before every attempt (a retry comes after a backoff): paused, or with
            # the session lost, the partitions may be another member's.
            if offsets and (self._cut_off() or self._session_lost.is_set()):
                raise ConnectionLoss()
            offsets, refused = self._fence.admit(offsets, made_in, self._session_gen,
                                                 self._owned)
            dropped.update(refused)
            if not offsets:
                return
            try:
                self._send_offsets(offsets, dropped)
                return
            except CommitFencedError as e:
                dropped.update(dict.fromkeys(map(TopicPartition._make, e.partitions), e.reason))
                return
            except Exception as e:
                if not self._retry_commit(e, attempt, retries):
                    raise

    def _send_offsets(self, offsets: dict[TopicPartition, int],
                      dropped: dict[TopicPartition, str]) -> None:
        """One write to the store. Kafka has no condition on the owner znodes: the fence
        first shows the session alive (a ZooKeeper round trip when its lease is stale)."""
        if self.config.offsets_storage == "kafka":
            for tp in self._fence.confirm_alive(offsets):
                dropped[tp] = "its owner znode is not this member's session's"
                offsets.pop(tp, None)
            if not offsets:
                return
        n = self._offsets.commit(offsets)
        if n:
            self.log.debug("committed %d offsets", n)

    def _retry_commit(self, e: Exception, attempt: int, retries: int) -> bool:
        """Whether to retry after the failed write ``e`` (True once the backoff has passed);
        False when it cannot help (a rebalance waits on this commit). Raises ConnectionLoss
        when the retry could not be sent (said now rather than after the backoff)."""
        if (attempt >= retries or self._session_lost.is_set()
                or not getattr(e, "retriable", True)):
            return False
        if self._cut_off() or not self._zk.connected:
            raise ConnectionLoss() from e
        self.log.warning("offset commit failed (%r); retrying", e)
        time.sleep(self.config.offsets_channel_backoff_ms / 1000.0)
        return True

    def _autocommit_loop(self) -> None:
        interval = self.config.auto_commit_interval_ms / 1000.0
        while not self._shutdown_event.wait(interval):
            try:
                self._commit(retry_on_failure=False)
            except Exception as e:  # noqa: BLE001 - the next interval tries again
                self.log.warning("auto-commit failed: %r", e)

    # -- brokers, for the fetchers ---------------------------------------------------------
    def broker_addresses(self) -> list[str]:
        """``host:port`` of every broker registered in ZooKeeper, on the endpoint of
        ``security.protocol`` (a broker registered only with an SSL listener has no
        PLAINTEXT address)."""
        return broker_addresses(self._zk, self.config.security_protocol)


def _explicit_offsets(offsets: Mapping[tuple[str, int], int]) -> dict[TopicPartition, int]:
    """``commit_offsets(offsets)``'s argument checked: ``ValueError`` naming the bad item."""
    if not isinstance(offsets, Mapping):
        raise ValueError(
            "offsets must be a mapping {(topic, partition): offset}, got "
            f"{type(offsets).__name__}"
        )
    out: dict[TopicPartition, int] = {}
    for key, offset in offsets.items():
        if not (isinstance(key, tuple) and len(key) == 2 and isinstance(key[0], str)
                and _is_int(key[1]) and key[1] >= 0):
            raise ValueError(f"offsets: a key must be (topic, partition), got {key!r}")
        if not _is_int(offset) or offset < 0:
            raise ValueError(
                f"offsets: the offset of {key[0]}:{key[1]} must be an int >= 0 (the next "
                f"offset to consume), got {offset!r}"
            )
        out[TopicPartition(key[0], key[1])] = offset
    return out


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _fmt_owned(owned: Mapping[TopicPartition, str]) -> str:
    by_topic: dict[str, list[int]] = {}
    for tp in owned:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return ", ".join(f"{t}{sorted(ps)}" for t, ps in sorted(by_topic.items())) or "nothing"


def _default_fetcher(connector: ZookeeperConsumerConnector) -> FetchSide:

    return FetcherManager(
        connector.config, connector.consumer_id, connector.broker_addresses,
        metrics=connector.metrics,
    )


def create_consumer_connector(
    config: ConsumerConfig | Mapping[str, object],
) -> ZookeeperConsumerConnector:
    """The Python face of ``Consumer.createJavaConsumerConnector(config)``."""
    if not isinstance(config, ConsumerConfig):
        config = ConsumerConfig(config)
    return ZookeeperConsumerConnector(config)
