"""``ZookeeperConsumerConnector``: the public face of a group member (streams, commits,
shutdown), delegating to its collaborators, one concern each:

- :mod:`~zkconsumer.consumer.membership`: the session, the registration in
  ``/consumers/<group>/ids``, the group view and the watches that ask for a rebalance;
- :mod:`~zkconsumer.consumer.ownership`: the owner znodes (claim, release, read back);
- :mod:`~zkconsumer.consumer.commits`: offset commits (sync, async, auto), the commit fence;
- :mod:`~zkconsumer.consumer.rebalance`: the rebalance steps, retried and rolled back;
- :mod:`~zkconsumer.consumer.watcher`: the watcher thread and the lost-session path;
- :mod:`~zkconsumer.consumer.group_view`: what they share (the subscription and its queues,
  the group view, the statistics).

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
  the arriving ones claimed and started (``Rebalancer.incremental``). Not with a rebalance
  listener
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

Threads and locks: each collaborator's docstring says which lock guards what. The connector
itself:

- ``_state_lock`` guards ``_streams_created``, ``_closed`` and ``_streams_ended`` (and the
  rebalancer's ``force_requested``); the session listener (:meth:`_on_zk_state`, kazoo's
  thread) changes the gate under it, so no change lands after :meth:`shutdown` opened the
  gate for good.
- ``_rebalance_lock`` (RLock): the rebalancer's, held for a whole rebalance; shutdown takes
  it (unless ZooKeeper is unreachable) to stop fetching, commit and leave the group.
- ``_commit_lock``: the commits' (see :mod:`~zkconsumer.consumer.commits`), shared with the
  ownership's release.
- ``_gate`` (the streams' :class:`~zkconsumer.consumer.gate.DeliveryGate`) has its own lock;
  closed for ``"connection"`` from SUSPENDED/LOST to CONNECTED and for ``"session"`` from
  LOST until a rebalance that started after the loss succeeds (the membership's
  ``session_gen`` counts losses), during :meth:`shutdown` too until it has ended the
  streams (``_streams_ended``); and for ``"lease"`` while ZooKeeper has not answered on the
  session lately.
- ``_lease`` / ``_lease_keeper`` / ``_fence`` (:mod:`zkconsumer.consumer.fence`): the proof
  that the session lives, renewed by the keeper's thread; it bounds every stream permit in
  time (``zookeeper.outage.delivery=pause``) and every offset write (the commit fence, called
  under ``_commit_lock``). Each has its own lock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import Any, overload

from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

from zkconsumer._config import ConsumerConfig
from zkconsumer._errors import (
    BackgroundThreadError,
    ConsumerShutdownError,
    MessageStreamsExistException,
    ZkConsumerError,
)
from zkconsumer._filters import TopicFilter
from zkconsumer._message import Decoder
from zkconsumer._types import TopicPartition
from zkconsumer.consumer.async_commit import CommitCallback
from zkconsumer.consumer.closing import (
    Closing,
    acquire_unless_disconnected,
    join_unless_disconnected,
)
from zkconsumer.consumer.commits import Commits, explicit_offsets
from zkconsumer.consumer.fence import LEASE_FRACTION, CommitFence, LeaseKeeper, SessionLease
from zkconsumer.consumer.fetcher import FetcherManager
from zkconsumer.consumer.gate import DeliveryGate
from zkconsumer.consumer.group_view import (
    FetchSide,
    GroupView,
    RebalanceStats,
    Subscription,
)
from zkconsumer.consumer.membership import Membership
from zkconsumer.consumer.metrics import ConsumerMetrics
from zkconsumer.consumer.offsets import OffsetStore, ZkOffsetStore, make_offset_store
from zkconsumer.consumer.ownership import Ownership
from zkconsumer.consumer.partition import ChunkQueue, PartitionTopicInfo
from zkconsumer.consumer.rebalance import ConsumerRebalanceListener, Rebalancer, RebalanceSteps
from zkconsumer.consumer.stream import KafkaStream
from zkconsumer.consumer.watcher import RebalanceWatcher
from zkconsumer.zk import paths as zp
from zkconsumer.zk.handler import kazoo_handler
from zkconsumer.zk.read import broker_addresses
from zkconsumer.zk.session import OutageLog, kazoo_security_kwargs, start_and_check_login

__all__ = ["ConsumerRebalanceListener", "ZookeeperConsumerConnector", "create_consumer_connector"]

log = logging.getLogger("zkconsumer.connector")



class ZookeeperConsumerConnector:
    """The legacy high-level consumer: create streams once, iterate them, shut down.

    ``with create_consumer_connector(config) as c: streams = c.create_message_streams({...})``

    Made by :func:`create_consumer_connector` (or directly, with a :class:`ConsumerConfig`):
    it connects to ZooKeeper and starts its background threads, but joins the group only
    when the streams are created. Used as a context manager, it shuts down at the end of the
    ``with`` block. Every public method may be called from any thread; each stream is
    iterated by one thread.

    Attributes: ``config`` (the :class:`ConsumerConfig`), ``group``, ``consumer_id`` (the
    member's id in the group), ``stats`` (rebalance counts and durations), ``metrics`` and
    ``metrics_port`` (the port bound, with ``metrics.port``; else None).

    :param config: the member's configuration.
    :param fetcher_factory: makes the fetch side from the connector; None (the default) for
        the fetcher of ``fetch.backend``. For tests and embedding.
    :raises ZkConsumerError: no ZooKeeper connection within
        ``zookeeper.connection.timeout.ms``, or its login (``zookeeper.auth``) refused.
    :raises MetricsPortError: ``metrics.port`` cannot be bound.
    :raises ConfigError: ``fetch.backend=confluent`` was given and confluent-kafka cannot be
        imported.
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

        self._make_state(config)
        self._zk = _kazoo_client(config, self.consumer_id)
        self._make_session_side(config)
        self._start_session()
        try:
            offsets = self._make_offset_store()
            factory = fetcher_factory or _default_fetcher
            self._fetcher: FetchSide = factory(self)
        except BaseException:
            # No connector to shut down: its session and metrics port must not outlive it
            # (a retry in the same process would find the port taken).
            self._zk.stop()
            self._zk.close()
            self.metrics.close()
            raise
        self._commits = Commits(config, self.consumer_id, self._membership, self._ownership,
                                offsets, self._gate, self._fence, self._commit_lock,
                                self._shutdown_event, self.log)
        self._make_rebalancer()
        self._closing = Closing(config, self._zk, self._membership, self._ownership,
                                self._commits, self._subscription, self._fetcher, self.metrics,
                                lambda tps, deadline: self._release(tps, deadline), self.log)
        self._lease_keeper.start()
        self._autocommit: threading.Thread | None = None
        if config.auto_commit_enable:
            self._autocommit = threading.Thread(
                target=self._commits.autocommit_loop, name=f"{self.consumer_id}-autocommit",
                daemon=True
            )
            self._autocommit.start()
        self.log.info("connector started for group %s", self.group)

    def _make_state(self, config: ConsumerConfig) -> None:
        """The locks, the session lease and delivery gate, the lifecycle flags."""
        self._rebalance_lock = threading.RLock()
        self._commit_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._shutdown_event = threading.Event()
        self._lease = SessionLease(LEASE_FRACTION, config.zookeeper_session_timeout_ms / 1000.0)
        # With zookeeper.outage.delivery=continue, the streams ignore the lease (and the
        # connection's drops): only a lost session stops them.
        self._pause_on_outage = config.zookeeper_outage_delivery == "pause"
        self._gate = DeliveryGate(self._lease.deadline if self._pause_on_outage else None)
        self._closed = False
        self._streams_created = False
        self._streams_ended = False  # shutdown() has put the streams' end and opened the gate
        # Subscription, fixed once streams are created.
        self._subscription = Subscription()

    def _make_session_side(self, config: ConsumerConfig) -> None:
        """The collaborators on the ZooKeeper session: membership, commit fence, lease
        keeper, ownership."""
        self._membership = Membership(self._zk, config, self.consumer_id, self._subscription,
                                      self._lease, self.log)
        # The membership's, shared: the same objects under the connector's names.
        self._session_lost = self._membership.session_lost
        self._session_guard = self._membership.session_guard
        self._wakeup = self._membership.wakeup
        self._zk.add_listener(self._on_zk_state)
        self._fence = CommitFence(self._zk, self.group, self._lease, self.consumer_id,
                                  self.log, timeout_s=config.zookeeper_session_timeout_ms / 1000.0,
                                  send_guard=self._membership.live_session)
        self._lease_keeper = LeaseKeeper(
            self._zk, self._lease, self._gate if self._pause_on_outage else None,
            zp.id_path(self.group, self.consumer_id), self.consumer_id, self._shutdown_event,
            self.log)
        self._ownership = Ownership(self._membership, config, self._commit_lock, self._fence,
                                    self.metrics, self.stats, self._shutdown_event, self.log)

    def _start_session(self) -> None:
        try:
            start_and_check_login(self._zk, self.config)
        except Exception as e:
            self._zk.close()
            self.metrics.close()
            raise ZkConsumerError(
                f"cannot connect to ZooKeeper at {self.config.zookeeper_connect}: {e}"
            ) from e

    def _make_rebalancer(self) -> None:
        # The steps through this object's attributes, looked up at each call (tests wrap
        # _read_view, _claim and _release on the connector).
        steps = RebalanceSteps(
            read_view=lambda: self._read_view(),
            claim=lambda mine, gen, view: self._claim(mine, gen, view),
            release=lambda tps: self._release(tps),
        )
        self._rebalancer = Rebalancer(
            self.config, self.consumer_id, self._membership, self._ownership, self._commits,
            self._subscription, self._fetcher, self._gate, steps, self.stats, self.metrics,
            self._rebalance_lock, self._shutdown_event, self.log)
        self._watcher = RebalanceWatcher(
            self.config, self.consumer_id, self._membership, self._ownership, self._rebalancer,
            self._subscription, self.metrics, self._shutdown_event, self.log)

    # -- context manager -------------------------------------------------------------------
    def __enter__(self) -> ZookeeperConsumerConnector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # -- public API ------------------------------------------------------------------------
    def set_consumer_rebalance_listener(self, listener: ConsumerRebalanceListener) -> None:
        """Call ``listener``'s hooks in every rebalance of this member, as the legacy
        ``setConsumerRebalanceListener``.

        The hooks run in the thread doing the rebalance (the caller of
        ``create_message_streams*`` for the first one, the watcher thread afterwards), with
        the rebalance's lock held; they may commit. A member with a listener always
        rebalances fully (every partition stops).

        :param listener: the hooks; replaces any listener set before.
        :raises MessageStreamsExistException: the streams were already created.
        """
        with self._state_lock:
            if self._streams_created:
                raise MessageStreamsExistException(
                    "set the rebalance listener before creating message streams"
                )
            self._rebalancer.listener = listener

    def create_message_streams(
        self,
        topic_count_map: Mapping[str, int],
        key_decoder: Decoder | None = None,
        value_decoder: Decoder | None = None,
    ) -> dict[str, list[KafkaStream[Any, Any]]]:
        """Register in the group, rebalance, and return ``n`` streams for each topic.

        The legacy ``createMessageStreams(topicCountMap)``. The first rebalance runs in the
        calling thread: on return the member owns its share of the partitions and fetching
        has started. Each stream is one consumer thread of the group (thread id
        ``<consumer id>-<n>``). If the first rebalance fails, the connector shuts down,
        leaving the group, before the error is raised.

        :param topic_count_map: topic -> number of streams (>= 1) for it.
        :param key_decoder: a callable on ``bytes`` applied to each key as the iterator hands
            the message out (None keys stay None); None: keys stay ``bytes``.
        :param value_decoder: the same for values.
        :returns: topic -> its streams, in thread-id order.
        :raises ValueError: an empty map, a stream count below 1 or a bad topic name.
        :raises MessageStreamsExistException: streams were already created on this connector.
        :raises ConsumerShutdownError: the connector is shut down.
        :raises ConsumerRebalanceFailedException: the first rebalance failed
            ``rebalance.max.retries`` times, or found no ZooKeeper connection within
            ``zookeeper.connection.timeout.ms``.
        :raises AssignmentStrategyMismatchError: this member's
            ``partition.assignment.strategy`` differs from its group's.
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
                q, s = self._new_stream(key_decoder, value_decoder)
                self._subscription.queues[(topic, thread_id)] = q
                self.metrics.watch_queue(topic, thread_id, q)
                result[topic].append(s)
        self._subscription.registration = zp.ConsumerRegistration(
            dict(topic_count_map), "static", int(time.time() * 1000),
            assignment_strategy=self.config.partition_assignment_strategy,
            offsets_storage=self._offsets_storage(),
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
        """Streams over every topic the whitelist/blacklist matches, now and later.

        The legacy ``createMessageStreamsByFilter``; registers and rebalances as
        :meth:`create_message_streams` does, with the same errors. Partitions of every
        matching topic are shared out between the streams.

        :param topic_filter: a :class:`Whitelist` or :class:`Blacklist`.
        :param num_streams: how many streams (>= 1).
        :param key_decoder: as for :meth:`create_message_streams`.
        :param value_decoder: as for :meth:`create_message_streams`.
        :returns: the streams, in thread-id order.
        :raises ValueError: ``num_streams`` below 1.
        :raises MessageStreamsExistException: streams were already created on this connector.
        :raises ConsumerShutdownError: the connector is shut down.
        :raises ConsumerRebalanceFailedException: the first rebalance failed.
        :raises AssignmentStrategyMismatchError: this member's
            ``partition.assignment.strategy`` differs from its group's.
        """
        if num_streams < 1:
            raise ValueError(f"num_streams must be >= 1, got {num_streams!r}")
        self._claim_streams()

        streams: list[KafkaStream[Any, Any]] = []
        for _ in range(num_streams):
            q, s = self._new_stream(key_decoder, value_decoder)
            self._subscription.wildcard_queues.append(q)
            # A FetchQueueSize series per topic the filter matches (set at each rebalance).
            self.metrics.watch_wildcard_queue(
                f"{self.consumer_id}-{len(self._subscription.wildcard_queues) - 1}", q
            )
            streams.append(s)
        self._subscription.topic_filter = topic_filter
        self._subscription.registration = zp.ConsumerRegistration(
            {topic_filter.regex: num_streams}, topic_filter.pattern_name, int(time.time() * 1000),
            assignment_strategy=self.config.partition_assignment_strategy,
            offsets_storage=self._offsets_storage(),
        )
        self._register_and_rebalance()
        return streams

    def _offsets_storage(self) -> str:
        """Where this member commits, for its ids znode (the lag exporter reads it)."""
        if self.config.offsets_storage != "kafka":
            return "zookeeper"
        return "dual" if self.config.dual_commit_enabled else "kafka"

    def _new_stream(self, key_decoder: Decoder | None, value_decoder: Decoder | None
                    ) -> tuple[ChunkQueue, KafkaStream[Any, Any]]:
        q = ChunkQueue(self.config.queued_max_message_chunks)
        s: KafkaStream[Any, Any] = KafkaStream(
            q, self.config.consumer_timeout_ms, key_decoder, value_decoder,
            self.config.client_id, self.metrics, self._gate,
        )
        self._subscription.streams.append(s)
        return q, s

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

        Waits for the asynchronous commits made before it. Offsets the commit fence drops
        (their partition is no longer this session's) are logged as a WARNING, not raised.

        :param offsets: ``{(topic, partition): next offset to consume}``; omitted: the
            consumed offsets of every owned partition.
        :param retry_on_failure: retry a failed write ``offsets.commit.max.retries`` times,
            ``offsets.channel.backoff.ms`` apart.
        :raises ValueError: ``offsets`` is not such a mapping, or holds a bad key or offset.
        :raises TypeError: ``retry_on_failure`` given both positionally and by name.
        :raises PartitionsNotOwnedError: ``offsets`` names partitions this member does not own;
            nothing was written.
        :raises ZkConnectionLostError: the ZooKeeper connection is down or the session lost
            (the member may no longer own the partitions; consumed offsets stay and the next
            commit after the pause stores them; paused only because ZooKeeper was slow to
            answer, the commit is tried, fenced), or the connection or the session went while
            it committed, or ZooKeeper left it unanswered for ``zookeeper.session.timeout.ms``
            (a write after a lost session is never sent).
        :raises OffsetCommitError: Kafka refused offsets (``offsets.storage=kafka``), after the
            retries when they can help.
        :raises BackgroundThreadError: a background thread of the connector died.
        :raises ConsumerShutdownError: :meth:`shutdown` has begun.
        """
        if isinstance(offsets, bool):  # the positional form of the first overload
            if retry_on_failure is not None:
                raise TypeError("commit_offsets() got retry_on_failure twice")
            offsets, retry_on_failure = None, offsets
        retry = True if retry_on_failure is None else retry_on_failure
        explicit = None if offsets is None else explicit_offsets(offsets)
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
        self._commits.commit_now(explicit, retry)

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

        :param offsets: as in :meth:`commit_offsets`; None: the consumed offsets of every
            owned partition, as of this call.
        :param callback: ``callback(offsets, error)``, called in the connector's async-commit
            thread once the commit is written or has failed; an exception it raises is
            logged.
        :returns: a future whose result is the offsets committed, or whose exception is the
            error given to the callback.
        :raises ValueError: ``offsets`` is not a mapping of valid keys and offsets.
        :raises BackgroundThreadError: a background thread of the connector died.
        :raises ConsumerShutdownError: the connector is shut down.
        """
        explicit = None if offsets is None else explicit_offsets(offsets)
        self._check()
        made_in = self._membership.session_gen
        if explicit is None:
            explicit = self._commits.consumed_offsets()
        with self._state_lock:
            if self._closed:
                raise ConsumerShutdownError(f"{self.consumer_id}: the connector is shut down; "
                                            "nothing committed")
        return self._commits.async_commits.submit(explicit, made_in, callback)

    def owned_partitions(self) -> dict[TopicPartition, str]:
        """Partitions this member owns now, with the owning thread id.

        Empty while :attr:`paused`: then the member cannot know that it owns anything. Never
        waits for a rebalance under way (it shows the rebalance's progress instead).

        :returns: partition -> owning thread id (``<consumer id>-<n>``); a copy.
        """
        if self._gate.closed:
            return {}
        return dict(self._ownership.owned)  # one C call under the GIL: a consistent copy

    def partition_infos(self) -> dict[TopicPartition, PartitionTopicInfo]:
        """The partitions being fetched (as of the last rebalance step) and their offsets.

        :returns: partition -> its fetch state (consumed and fetched offsets, the thread id);
            a copy of the mapping, the states themselves are live.
        """
        return dict(self._ownership.registry)

    @property
    def paused(self) -> bool:
        """True while the streams hand out nothing: the ZooKeeper connection is down, or
        ZooKeeper has not answered on the session for half its timeout (the lease, see
        ``zookeeper.outage.delivery``), or the session was lost and the member has not
        rebalanced since."""
        return self._gate.closed or self._gate.lapsed()

    def rebalance_now(self) -> None:
        """Ask the watcher thread for a full rebalance, even if the group has not changed
        (a ZooKeeper event that leaves the group as it was changes nothing).

        Returns at once; the rebalance runs in the watcher thread (every partition stops and
        starts again, and the rebalance listener is called).
        """
        with self._state_lock:
            self._rebalancer.force_requested += 1
        self._wakeup.set()

    def shutdown(self) -> None:
        """Stop everything; idempotent. Commits first when auto-commit is on.

        Returns within a few seconds even while ZooKeeper is unreachable: then it neither
        commits nor waits for a rebalance stuck in a ZooKeeper call (stopping the kazoo
        client fails that call); the session's end removes the member's znodes. A connection
        that drops while it commits or leaves the group ends that step (with a warning): it
        sends nothing more, and awaits no answer longer than ``zookeeper.session.timeout.ms``.

        In order: stop fetching, write the queued asynchronous commits (or fail them with
        :class:`ConsumerShutdownError`), commit the consumed offsets (with
        ``auto.commit.enable=true`` only), end every stream (their iterators stop), release
        the owner znodes and the registration, close the clients. May be called from any
        thread but the rebalance listener's hooks. A commit or a leave that fails is logged,
        not raised.
        """
        with self._state_lock:
            if self._closed:
                return
            self._closed = True
        self.log.info("shutting down")
        self._shutdown_event.set()
        self._wakeup.set()
        for t in (self._watcher.thread, self._autocommit):
            if t is not None:
                join_unless_disconnected(self._zk, t)
        self._lease_keeper.join(self._lease.length() + 1.0)
        locked = acquire_unless_disconnected(self._zk, self._rebalance_lock)
        if not locked:
            self.log.warning("ZooKeeper is unreachable and a rebalance is waiting for it; "
                             "shutting down without committing or leaving the group "
                             "explicitly (the session's end releases everything)")
        try:
            self._closing.end_streams(locked)
        finally:
            if locked:
                self._rebalance_lock.release()
            with self._state_lock:
                self._streams_ended = True  # the session listener leaves the gate alone now
            # Iterators waiting at the gate go on to the shutdown sentinel.
            self._gate.drop_lease()
            self._gate.open()
            self._closing.close_clients()
        self.log.info("shut down")

    # -- internals -------------------------------------------------------------------------
    def zookeeper_offset_store(self, timeout_s: float | None = None) -> ZkOffsetStore:
        """A store of the group's ZooKeeper offsets on this member's session: its commits are
        sent only while the session that owns the partitions lives, as the connector's own
        are, and each answer is awaited at most ``timeout_s``. For a caller that commits
        for the partitions this member owns, such as the Spark source's driver.

        :param timeout_s: the longest wait for each ZooKeeper answer; None: no bound.
        :returns: the store (its ``commit(offsets)`` raises :class:`CommitFencedError` for
            partitions whose owner znode is not this session's).
        """
        return ZkOffsetStore(self._zk, self.config.group_id, self.metrics,
                             self._membership.live_session, timeout_s=timeout_s,
                             fence=self._fence)

    def _make_offset_store(self) -> OffsetStore:
        # Each answer awaited one session timeout at most: a commit must not wait out an
        # outage (shutdown() commits too); a timed-out one counts as a connection loss.
        return make_offset_store(self.config, self._zk, self.broker_addresses, self.metrics,
                                 self._membership.live_session,
                                 zk_timeout_s=self.config.zookeeper_session_timeout_ms / 1000.0,
                                 fence=self._fence)

    def broker_addresses(self) -> list[str]:
        """``host:port`` of every broker registered in ZooKeeper, on the endpoint of
        ``security.protocol`` (a broker registered only with an SSL listener has no
        PLAINTEXT address).

        :returns: the addresses, possibly empty; read from ZooKeeper at each call.
        """
        return broker_addresses(self._zk, self.config.security_protocol)

    def _claim_streams(self) -> None:
        with self._state_lock:
            if self._closed:
                raise ConsumerShutdownError("the connector is shut down")
            if self._streams_created:
                raise MessageStreamsExistException(
                    "ZookeeperConsumerConnector can create message streams at most once"
                )
            self._streams_created = True

    def _check(self) -> None:
        self._watcher.check_fetcher()
        error = self._watcher.bg_error
        if error is not None:
            raise BackgroundThreadError(
                f"{self.consumer_id}: a background thread failed: {error!r}"
            ) from error

    def _register_and_rebalance(self) -> None:
        try:
            self._membership.register()
            self._watcher.first_rebalance()
            # Only now: one thread rebalances at a time. Events during the first rebalance
            # left _wakeup set, so the watcher's first pass looks at the group again.
            self._watcher.thread.start()
        except BaseException:
            # The caller never gets the streams: leave the group, rather than stay a member
            # the others give partitions to that nobody reads (as the original did).
            self.shutdown()
            raise

    def _on_zk_state(self, state: str) -> None:
        # Runs in kazoo's thread: only flags, and locks held for microseconds.
        if state == KazooState.LOST:
            self._membership.mark_lost()  # under the session guard, see there
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
            self.log.warning("consumer %s: ZooKeeper connection lost: %s", self.consumer_id,
                             "handing out nothing until it is back" if self._pause_on_outage
                             else "handing out messages on (zookeeper.outage.delivery="
                             "continue)")
        elif state == KazooState.LOST:
            self._wakeup.set()
        elif state == KazooState.CONNECTED:
            self._lease_keeper.wake()  # the lease may have run out meanwhile: renew it now
            if self._session_lost.is_set() or self._membership.rebalance_owed:
                self._wakeup.set()

    # -- the rebalance's steps, on this object: tests wrap them here ----------------------
    def _read_view(self) -> GroupView:
        return self._membership.read_view()

    def _claim(self, mine: Mapping[TopicPartition, str], gen: int, view: GroupView) -> None:
        self._ownership.claim(mine, gen, view)

    def _release(self, tps: set[TopicPartition], deadline: float | None = None) -> None:
        self._ownership.release(tps, deadline)


def _kazoo_client(config: ConsumerConfig, consumer_id: str) -> KazooClient:
    """The member's ZooKeeper client: reconnects for ever, retries a command three times;
    an outage's reconnects are not logged one by one (:class:`OutageLog`)."""
    outages = OutageLog(consumer_id)
    client = KazooClient(
        hosts=config.zookeeper_connect,
        **kazoo_security_kwargs(config),
        timeout=config.zookeeper_session_timeout_ms / 1000.0,
        handler=kazoo_handler(),
        connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 1.0},
        command_retry={"max_tries": 3, "delay": 0.1, "max_delay": 1.0},
        logger=outages,
    )
    client.add_listener(outages.on_state)
    return client


def _default_fetcher(connector: ZookeeperConsumerConnector) -> FetchSide:

    return FetcherManager(
        connector.config, connector.consumer_id, connector.broker_addresses,
        metrics=connector.metrics,
    )


def create_consumer_connector(
    config: ConsumerConfig | Mapping[str, object],
) -> ZookeeperConsumerConnector:
    """The Python face of ``Consumer.createJavaConsumerConnector(config)``.

    :param config: a :class:`ConsumerConfig`, or the mapping of dotted keys to make one from.
    :returns: a started connector, not in its group yet (see
        :meth:`ZookeeperConsumerConnector.create_message_streams`).
    :raises ConfigError: ``config`` is a mapping with a wrong or unknown key, or
        ``fetch.backend=confluent`` was given and confluent-kafka cannot be imported.
    :raises ZkConsumerError: no ZooKeeper connection within
        ``zookeeper.connection.timeout.ms``, or its login refused.
    :raises MetricsPortError: ``metrics.port`` cannot be bound.
    """
    if not isinstance(config, ConsumerConfig):
        config = ConsumerConfig(config)
    return ZookeeperConsumerConnector(config)
