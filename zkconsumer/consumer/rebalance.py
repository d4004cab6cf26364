"""The rebalance: the legacy steps (docs/znodes.md, "Rebalance order") of one member, full or
incremental, retried until they succeed, and rolled back (all-or-nothing) when they fail.

Threads and locks (:class:`Rebalancer`): a rebalance runs under the connector's
``_rebalance_lock`` (RLock, ``rebalance_lock`` here), held for a whole
:meth:`~Rebalancer.synced_rebalance` by the watcher thread or the first caller of
``create_message_streams``; it guards every change to the ownership's ``owned``,
``uncertain`` and ``registry``, the fetchers' start and stop, and this class's
``settled_view``, ``agreement`` and ``listener_told``. ``force_requested`` is incremented
under the connector's ``_state_lock`` (``rebalance_now``); the rebalance reads it without a
lock (an int read is atomic under the GIL) and writes ``force_served``, so no request made
during an attempt is lost to it. Commits take the commits' ``commit_lock`` themselves.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kazoo.exceptions import NodeExistsError, NoNodeError

from zkconsumer._config import ConsumerConfig
from zkconsumer._errors import (
    AssignmentStrategyMismatchError,
    ConsumerRebalanceFailedException,
    ZkDataError,
)
from zkconsumer._types import TopicPartition
from zkconsumer.consumer.assignors.core import assign
from zkconsumer.consumer.commits import Commits
from zkconsumer.consumer.gate import DeliveryGate
from zkconsumer.consumer.group_view import (
    CONNECTION_ERRORS,
    AgreementCheck,
    FetchSide,
    GroupView,
    IncrementalFetchSide,
    RebalanceStats,
    Subscription,
    _Conflict,
    _Disconnected,
    _Restart,
    _ShuttingDown,
    _Unregistered,
    agreement_delay_s,
    fmt_owned,
)
from zkconsumer.consumer.membership import Membership
from zkconsumer.consumer.metrics import ConsumerMetrics
from zkconsumer.consumer.ownership import Ownership
from zkconsumer.consumer.partition import INVALID_OFFSET, PartitionTopicInfo
from zkconsumer.zk import paths as zp


class ConsumerRebalanceListener:
    """Hooks into the rebalance; override what you need (both default to doing nothing).

    Set with ``set_consumer_rebalance_listener`` before the streams are created. The hooks
    run in the thread doing the rebalance (the caller of ``create_message_streams*`` for the
    first one, the connector's watcher thread afterwards), with the rebalance's lock held:
    the whole group waits for them, so keep them short. They may call ``commit_offsets``;
    not ``shutdown``. Exceptions raised here fail the rebalance attempt (it is retried), as
    in the original.
    """

    def before_releasing_partitions(self, partition_ownership: Mapping[str, set[int]]) -> None:
        """Called after fetchers stop and offsets are committed, before owners are released.

        The member still owns the partitions: the place to commit what was processed
        (``commit_offsets(offsets)``), with ``auto.commit.enable=false``.

        :param partition_ownership: topic -> partitions this member owned until now (empty
            in the first rebalance).
        :raises Exception: anything raised fails the rebalance attempt, which is retried.
        """

    def before_starting_fetchers(
        self, consumer_id: str, global_partition_assignment: Mapping[str, Mapping[int, str]]
    ) -> None:
        """Called once this member owns its partitions, before fetching starts.

        :param consumer_id: this member's id in the group.
        :param global_partition_assignment: the whole group's assignment: topic -> partition
            -> owning thread id (``<consumer id>-<n>``).
        :raises Exception: anything raised fails the rebalance attempt, which is retried.
        """


@dataclass
class RebalanceSteps:
    """The steps a rebalance reaches through the connector (``_read_view``, ``_claim``,
    ``_release``), looked up on it at each call: tests wrap them on the connector."""

    read_view: Callable[[], GroupView]
    claim: Callable[[Mapping[TopicPartition, str], int, GroupView], None]
    release: Callable[[set[TopicPartition]], None]


@dataclass
class _Run:
    """One synced rebalance's tally of its attempts."""

    session_gen: int  # the membership's, when it began
    failures: int = 0
    reregistered: bool = False
    mismatch: AssignmentStrategyMismatchError | None = None


class Rebalancer:
    """Runs this member's rebalances (locks: see the module docstring)."""

    def __init__(self, config: ConsumerConfig, consumer_id: str, membership: Membership,
                 ownership: Ownership, commits: Commits, subscription: Subscription,
                 fetcher: FetchSide, gate: DeliveryGate, steps: RebalanceSteps,
                 stats: RebalanceStats, metrics: ConsumerMetrics,
                 rebalance_lock: threading.RLock, shutdown_event: threading.Event,
                 log: logging.LoggerAdapter[logging.Logger]) -> None:
        self.config = config
        self.group = config.group_id
        self.consumer_id = consumer_id
        self.membership = membership
        self.ownership = ownership
        self.commits = commits
        self.subscription = subscription
        self.fetcher = fetcher
        self.gate = gate
        self.steps = steps
        self.stats = stats
        self.metrics = metrics
        self.rebalance_lock = rebalance_lock
        self.shutdown_event = shutdown_event
        self.log = log
        self.listener: ConsumerRebalanceListener | None = None
        # This rebalance attempt called before_releasing_partitions.
        self.listener_told = False
        # What the last complete rebalance was computed from, while its fetchers run (cleared
        # whenever they stop): a rebalance reading the same again has nothing to change.
        self.settled_view: tuple[object, ...] | None = None
        # The last full rebalance's result, to compare with the owner znodes once the group
        # had time to settle (members that disagree never do). The watcher thread's only.
        self.agreement: AgreementCheck | None = None
        # rebalance_now() calls so far, and how many of them a full rebalance has served
        # (counters, so that a call during an attempt is never lost to it).
        self.force_requested = 0
        self.force_served = 0

    # -- until it succeeds -------------------------------------------------------------------
    def synced_rebalance(self) -> None:
        """Rebalance until it succeeds (``rebalance.max.retries`` failures at most).

        Raises :class:`_Disconnected` when ZooKeeper is unreachable or the session was lost:
        the caller waits for the connection, and after a lost session re-registers first.
        What this member fetches and owns then stays as it is (the gate is closed, so nothing
        is handed out): with the same session back, the next rebalance commits what was
        consumed and releases what moves; a lost session stops and forgets everything.
        """
        start = time.monotonic()
        m = self.membership
        with self.rebalance_lock:
            m.zk_ops = 0
            m.rebalance_owed = False
            run = _Run(m.session_gen)
            max_retries = self.config.rebalance_max_retries
            while True:
                if self.shutdown_event.is_set():
                    return
                m.wakeup.clear()  # events from now on mean another rebalance
                if m.session_lost.is_set() or not m.zk.connected:
                    raise _Disconnected()
                self.stats.attempts += 1
                outcome = self._one_attempt(run)
                if outcome == "stop":
                    return
                if outcome == "restart":
                    continue
                if outcome != "failed":
                    self._succeeded(outcome == "changed", run, start)
                    return
                self._roll_back()
                if run.mismatch is not None:
                    raise run.mismatch
                if run.failures >= max_retries:
                    # Timed too, as the legacy rebalance timer timed a failure: the slowest
                    # rebalances are the ones to see.
                    self.metrics.record_rebalance(time.monotonic() - start)
                    raise ConsumerRebalanceFailedException(
                        f"{self.consumer_id} can't rebalance after {max_retries} retries"
                    )
                if self.shutdown_event.wait(self.config.rebalance_backoff_ms / 1000.0):
                    return

    def _one_attempt(self, run: _Run) -> str:
        """One attempt: "changed" or "unchanged" when it succeeded, "restart" to try again at
        once, "failed" (counted in ``run``) for the rollback and the backoff, "stop" when
        shutting down. Raises :class:`_Disconnected`."""
        m = self.membership
        try:
            changed = self.attempt()
        except _Disconnected:
            self.log.warning("rebalance attempt cut short: the commit before release "
                             "waits for ZooKeeper")
            raise
        except _ShuttingDown:
            return "stop"
        except _Restart:
            self.stats.restarts += 1
            self.log.info("group view changed during the rebalance; starting again")
            return "restart"
        except _Unregistered as e:
            return self._register_again(e, run)
        except AssignmentStrategyMismatchError as e:
            # Not retried here: only a change of the group can end it (the watcher
            # thread tries again after the backoff). Everything owned goes first.
            run.mismatch = e
            self.stats.failures += 1
        except (_Conflict, ZkDataError, NoNodeError, NodeExistsError) as e:
            run.failures += 1
            self.stats.failures += 1
            self.log.info("rebalance attempt %d failed: %s", run.failures, e)
        except Exception as e:
            if self.shutdown_event.is_set():
                return "stop"
            run.failures += 1
            self.stats.failures += 1
            if (isinstance(e, CONNECTION_ERRORS) or m.session_lost.is_set()
                    or not m.zk.connected):
                # Keep owned as it is: what this session holds is released by the
                # next attempt once connected (or forgotten if the session is lost).
                self.log.warning("rebalance attempt %d cut short: ZooKeeper %s (%r)",
                                 run.failures, "session lost" if m.session_lost.is_set()
                                 else "connection lost", e)
                raise _Disconnected() from e
            self.log.warning("rebalance attempt %d failed: %r", run.failures, e)
        else:
            return "changed" if changed else "unchanged"
        return "failed"

    def _register_again(self, e: _Unregistered, run: _Run) -> str:
        """This member's registration went missing under a live session: made again, and
        the attempt restarted at once the first time ("restart"), else "failed"."""
        if self.membership.session_lost.is_set():
            raise _Disconnected() from e  # the session-loss path registers again
        self.log.warning("%s is missing while the ZooKeeper session lives (deleted "
                         "by hand, or by a process with the same consumer.id "
                         "leaving): registering again", e)
        try:
            self.membership.register(replace_stale=False)
        except CONNECTION_ERRORS as e2:
            raise _Disconnected() from e2
        except Exception as e2:  # noqa: BLE001 - a failed attempt, retried
            run.failures += 1
            self.stats.failures += 1
            self.log.warning("rebalance attempt %d failed: registering again "
                             "failed: %r", run.failures, e2)
            return "failed"
        if not run.reregistered:
            # At once, as a restart: the new registration wakes every member
            # once (this one too), nothing more.
            run.reregistered = True
            self.stats.restarts += 1
            return "restart"
        # Missing again: deleted as soon as made; the backoff applies.
        run.failures += 1
        self.stats.failures += 1
        self.log.warning("rebalance attempt %d failed: the registration "
                         "went missing again", run.failures)
        return "failed"

    def _succeeded(self, changed: bool, run: _Run, start: float) -> None:
        owned = self.ownership.owned
        if self.membership.session_gen == run.session_gen:
            # Every claim was made under the session current now.
            self.gate.open("session")
        if not changed:
            self.stats.unchanged += 1
            self.log.info("group unchanged since the last rebalance: keeping %s",
                          fmt_owned(owned))
            return
        duration = time.monotonic() - start
        self.stats.rebalances += 1
        self.stats.last_duration_s = duration
        self.stats.last_done_at = time.time()
        self.stats.last_zk_ops = self.membership.zk_ops
        self.stats.durations_s.append(duration)
        self.metrics.record_rebalance(duration)
        self.metrics.set_owned_partitions(owned)
        self.log.info("rebalance done in %.0f ms: owns %s", duration * 1000, fmt_owned(owned))

    def _roll_back(self) -> None:
        """All-or-nothing: a failed attempt leaves this member owning nothing. What was
        consumed is committed first, as in step 2 (an attempt that failed after step 3 left
        nothing to commit)."""
        self.stop_fetching(commit=self.config.auto_commit_enable)
        if self.ownership.owned and not self.listener_told and self.listener is not None:
            # Failed before step 3: the application (committing itself, say) is told
            # before its partitions go, as in a rebalance that succeeds.
            try:
                self.tell_releasing()
            except Exception:  # the rollback goes on all the same
                self.log.exception("before_releasing_partitions failed")
        self.ownership.registry = {}
        try:
            self.steps.release(set(self.ownership.owned))
        except CONNECTION_ERRORS as e:
            raise _Disconnected() from e

    # -- one attempt -------------------------------------------------------------------------
    def attempt(self) -> bool:
        """One attempt of the original's steps; False if it found nothing to change."""
        self.listener_told = False
        # Read first: a rebalance_now() from here on asks for another attempt.
        forced = self.force_requested
        # Before the view: an event from here on makes a waiting claim restart.
        gen = self.membership.view_gen
        # Sent first: they travel with the view's reads (the answers are taken below).
        owned_reads = self.ownership.read_owned()
        # 1. read the group's members, the topics' partitions, the brokers
        view = self.steps.read_view()
        self.check_strategy(view)
        if self.subscription.topic_filter is not None:
            # What the filter matches now: each has an OwnedPartitionsCount, 0 if none owned.
            self.metrics.set_subscribed_topics(
                t for t, ids in view.consumers_for_topic.items()
                if any(zp.thread_consumer_id(i) == self.consumer_id for i in ids)
            )
        if not view.brokers:
            # Stop here, as the original did: keep the current assignment and fetchers (the
            # brokers may well be up, only their registration gone); the watch on
            # /brokers/ids wakes us when a broker registers, for a full rebalance.
            self.settled_view = None
            self.log.warning("no broker is registered in ZooKeeper; waiting for one")
            return True
        self.ownership.verify_owned(owned_reads)
        # 5 (computed first: partitions staying here keep their owner znodes, and an
        # unchanged group changes nothing)
        global_assignment = assign(
            self.config.partition_assignment_strategy, view.consumers_for_topic,
            view.partitions_for_topic,
            dashed_names=self.config.jvm_behaviour.dashed_partition_names,
        )
        mine = {
            tp: thread
            for tp, thread in global_assignment.items()
            if zp.thread_consumer_id(thread) == self.consumer_id
        }
        settled = (view.consumers_for_topic, view.partitions_for_topic, view.brokers)
        if (forced == self.force_served and settled == self.settled_view
                and mine == self.ownership.owned and not self.ownership.uncertain):
            # The group is as the last rebalance left it, whose fetchers still run: the usual
            # case after a ZooKeeper connection blip (kazoo fires every watch then, and the
            # read above set them again). The original's ZkClient kept its watches over a
            # reconnection and did not rebalance at all; stopping and restarting the
            # fetchers would pause every member of the group for nothing.
            return False
        if self.shutdown_event.is_set():
            # shutdown() gave up waiting for this attempt (ZooKeeper was away) and has put
            # the streams' end: stopping, claiming or fetching now would only undo that.
            raise _ShuttingDown()
        full = forced != self.force_served  # rebalance_now() asks for a full one
        self.force_served = forced  # a full rebalance from here on
        if not full and self.incremental_possible():
            self.incremental(mine, gen, view)
        else:
            self._full(mine, gen, view, global_assignment)
        self.settled_view = settled
        self.agreement = AgreementCheck(view, global_assignment,
                                        time.monotonic() + agreement_delay_s(self.config))
        return True

    def _full(self, mine: Mapping[TopicPartition, str], gen: int, view: GroupView,
              global_assignment: Mapping[TopicPartition, str]) -> None:
        """Steps 2 to 8 for every partition."""
        # 2. stop the fetchers, clear queues and streams, commit
        self.stop_fetching(commit=self.config.auto_commit_enable)
        # 3. the listener, with what this member owned until now
        self.tell_releasing()
        self.ownership.registry = {}  # kept until now: the listener may commit from it
        # 4. release what moves away (or to another of our threads)
        self.steps.release({tp for tp, th in self.ownership.owned.items() if mine.get(tp) != th})
        # 7. claim everything; a conflict waits for the holder to let go
        self.steps.claim(mine, gen, view)
        # 6, after 7: the previous owner commits before it releases, so only once we own a
        # partition is its committed offset final (reading first would replay its last
        # window whenever the claim had to wait).
        committed = self.commits.offsets.read(sorted(mine))
        # 8. the listener, then the fetchers
        if self.listener is not None:
            per_topic: dict[str, dict[int, str]] = {}
            for tp, thread in sorted(global_assignment.items()):
                per_topic.setdefault(tp.topic, {})[tp.partition] = thread
            self.listener.before_starting_fetchers(self.consumer_id, per_topic)
        registry = {tp: self.new_info(tp, thread, committed.get(tp))
                    for tp, thread in sorted(mine.items())}
        self.ownership.registry = registry
        if registry:
            self.fetcher.start_connections(registry.values())

    def incremental(self, mine: Mapping[TopicPartition, str], gen: int,
                     view: GroupView) -> None:
        """Steps 2 to 8 for the partitions that move only: those staying with the same thread
        go on being fetched and handed out throughout. Those leaving are stopped, their
        consumed offsets committed, then released; the arriving ones are claimed, their
        offsets read and their fetching started. (Everything is released after a failure,
        as in a full rebalance.)"""
        fetcher = self.fetcher
        assert isinstance(fetcher, IncrementalFetchSide)
        registry = self.ownership.registry
        staying = {tp: info for tp, info in registry.items()
                   if mine.get(tp) == info.thread_id == self.ownership.owned.get(tp)
                   and tp not in self.ownership.uncertain}
        leaving = [info for tp, info in registry.items() if tp not in staying]
        self.stats.incremental += 1
        self.stats.last_kept = len(staying)
        if leaving:
            self._stop_partitions(leaving, fetcher)
        # 4. release what moves away (or to another of our threads)
        self.steps.release({tp for tp, th in self.ownership.owned.items() if mine.get(tp) != th})
        self.ownership.registry = staying  # what left is committed and no longer owned
        # 7. claim; 6. offsets of the arriving partitions, once owned (see the full steps)
        self.steps.claim(mine, gen, view)
        arriving = {tp: th for tp, th in mine.items() if tp not in staying}
        committed = self.commits.offsets.read(sorted(arriving))
        infos = [self.new_info(tp, th, committed.get(tp)) for tp, th in sorted(arriving.items())]
        self.ownership.registry = {**staying, **{i.tp: i for i in infos}}
        if infos:
            fetcher.add_partitions(infos)
        self.log.info("incremental rebalance: %d partitions kept fetching, %d stopped, %d "
                      "started", len(staying), len(leaving), len(infos))
    def _stop_partitions(self, infos: list[PartitionTopicInfo], fetcher: IncrementalFetchSide
                         ) -> None:
        """Step 2 for these partitions only: revoke them (nothing more of them is enqueued
        or handed out), stop fetching them, drop their chunks, and commit."""
        self.settled_view = None
        for info in infos:
            info.revoke()
        fetcher.remove_partitions(infos)
        for s in self.subscription.streams:
            s.drop_revoked()  # the current chunk's consumed offset is final after this
        for q in self.subscription.all_queues():
            q.drop_revoked()
        if self.config.auto_commit_enable:
            if self.gate.closed:
                raise _Disconnected()
            try:
                self.commits.commit(retry_on_failure=True, strict=True)
            except CONNECTION_ERRORS as e:
                raise _Disconnected() from e
            except Exception:  # the rebalance goes on, as in the original
                self.log.exception("commit before release failed")
    def stop_fetching(self, commit: bool) -> None:
        """Step 2: stop fetchers, clear queues and streams, commit consumed offsets.

        The registry stays, as in the original: the listener (step 3) may commit from it;
        the caller forgets it. A commit ZooKeeper is not there for raises
        :class:`_Disconnected` rather than letting the partitions go uncommitted (what was
        consumed stays in the registry, and the next attempt commits it).
        """
        self.settled_view = None
        self.fetcher.stop_connections()
        for q in self.subscription.all_queues():
            q.clear()
        self.subscription.requeue_fetch_failure()
        for s in self.subscription.streams:
            s.clear()
        if commit and self.ownership.registry:
            if self.commits.cut_off():
                raise _Disconnected()
            try:
                # strict: the gate closing after the check above must not skip it quietly.
                self.commits.commit(retry_on_failure=True, strict=True)
            except CONNECTION_ERRORS as e:
                raise _Disconnected() from e
            except Exception:  # the rebalance goes on, as in the original
                self.log.exception("commit before release failed")
    def new_info(self, tp: TopicPartition, thread: str, offset: int | None
                  ) -> PartitionTopicInfo:
        off = INVALID_OFFSET if offset is None else offset
        return PartitionTopicInfo(
            tp.topic, tp.partition, self.subscription.queue_for(tp.topic, thread), off, off,
            self.config.fetch_message_max_bytes, self.config.client_id, thread,
        )
    def check_strategy(self, view: GroupView) -> None:
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
    def tell_releasing(self) -> None:
        """The listener's ``before_releasing_partitions`` with what this member owns (marked
        told: a failed attempt's rollback tells it only when the attempt had not)."""
        self.listener_told = True
        if self.listener is not None:
            ownership: dict[str, set[int]] = {}
            for tp in self.ownership.owned:
                ownership.setdefault(tp.topic, set()).add(tp.partition)
            self.listener.before_releasing_partitions(ownership)
    def incremental_possible(self) -> bool:
        """Whether only the partitions that move need to stop: some are being fetched, the
        fetch side can stop and start some of them, and no rebalance listener expects every
        partition to stop (its before_releasing_partitions is told of all it owns)."""
        return (bool(self.ownership.registry) and self.listener is None
                and isinstance(self.fetcher, IncrementalFetchSide))
