"""This member's owner znodes (``/consumers/<group>/owners/<topic>/<partition>``): claiming
them, releasing them, reading them back, and what it believes it owns.

Threads and locks (:class:`Ownership`):

- ``owned``, ``uncertain`` and ``registry`` change only under the connector's
  ``_rebalance_lock`` (held for a whole rebalance, by the watcher thread or the first
  caller, and by shutdown). Readers (``owned_partitions``, ``partition_infos``, commits) do
  not take it: ``dict(d)`` of a plain dict is one C call under the GIL, so a copy is
  consistent, and ``owned`` and ``registry`` are replaced wholesale or changed one key at a
  time.
- ``commit_lock`` (the commits' lock, :mod:`zkconsumer.consumer.commits`) is held by
  :meth:`release` and while :meth:`verify_owned` forgets what is not ours: a commit checks
  ownership and writes under it, so no offset of a partition is written after its owner
  znode is deleted.
- Every owner write is sent inside the membership's ``live_session()`` (its
  ``session_guard``), never under the next session.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass

from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.interfaces import IAsyncResult

from zkconsumer._config import ConsumerConfig
from zkconsumer._types import TopicPartition
from zkconsumer.consumer.assignors.jvmcompat import order_mismatch_hint
from zkconsumer.consumer.fence import CommitFence
from zkconsumer.consumer.group_view import (
    CONNECTION_ERRORS,
    GroupView,
    RebalanceStats,
    _Conflict,
    _Restart,
    timeout,
)
from zkconsumer.consumer.membership import Membership
from zkconsumer.consumer.metrics import ConsumerMetrics
from zkconsumer.consumer.partition import PartitionTopicInfo
from zkconsumer.zk import paths as zp


@dataclass
class OwnedReads:
    """The owner znodes' reads :meth:`Ownership.read_owned` sent, and the session sending."""

    session: int
    reads: list[tuple[TopicPartition, IAsyncResult]]


class Ownership:
    """What this member owns and the owner znodes behind it (locks: see the module docstring).

    ``owned``: partition -> owning thread, the owner znodes this session holds.
    ``uncertain``: entries of ``owned`` whose last create or delete failed with a connection
    error: the request may or may not have reached ZooKeeper (kazoo fails unsent ones too),
    so the znode may be missing, ours, or another member's claim. Claimed again, and read
    back before any delete. ``registry``: the partitions being fetched and their offsets.
    """

    def __init__(self, membership: Membership, config: ConsumerConfig, commit_lock: threading.Lock,
                 fence: CommitFence, metrics: ConsumerMetrics, stats: RebalanceStats,
                 shutdown_event: threading.Event,
                 log: logging.LoggerAdapter[logging.Logger]) -> None:
        self.membership = membership
        self.zk = membership.zk
        self.config = config
        self.group = config.group_id
        self.commit_lock = commit_lock
        self.fence = fence
        self.metrics = metrics
        self.stats = stats
        self.shutdown_event = shutdown_event
        self.log = log
        self.owned: dict[TopicPartition, str] = {}
        self.uncertain: set[TopicPartition] = set()
        self.registry: dict[TopicPartition, PartitionTopicInfo] = {}

    # -- claim and release -----------------------------------------------------------------
    def claim(self, mine: Mapping[TopicPartition, str], gen: int, view: GroupView) -> None:
        """Create every owner znode in ``mine``, waiting out members that are releasing;
        :class:`_Restart` as soon as the group view moves on from generation ``gen``.
        ``view``: the group as read, for the hint when a holder never lets go.

        The creates go in one pipelined round; after waiting for the first partition still
        held, every one still held is tried again in one round (the holders release at about
        the same time, so one wait usually covers them all)."""
        deadline = time.monotonic() + self.config.zookeeper_session_timeout_ms / 1000.0 + (
            self.config.rebalance_backoff_ms / 1000.0
        )
        todo = sorted((tp, th) for tp, th in mine.items()
                      if self.owned.get(tp) != th or tp in self.uncertain)
        held = self._create_all(todo)
        while held:
            if self.membership.view_changed(gen):
                raise _Restart()
            if self.shutdown_event.is_set():
                raise _Conflict("shutting down")
            tp, thread = held[0]
            if self._wait_released(tp, thread, gen, view, deadline):
                held = held[1:]  # ours already
            else:
                held = self._create_all(held)

    def _create_all(self, todo: list[tuple[TopicPartition, str]]
                    ) -> list[tuple[TopicPartition, str]]:
        """Every create at once (pipelined: one round trip, not one per partition); returns
        the conflicts (held by another member, or maybe ours: see :meth:`_wait_released`)."""
        self.membership.zk_ops += len(todo)
        with self.membership.live_session():
            pending = [
                (tp, th, self.membership.send(
                    self.zk.create_async, zp.owner_path(self.group, tp.topic, tp.partition),
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
                self.own(tp, thread)
            except NodeExistsError:
                conflicts.append((tp, thread))  # or ours already, if uncertain: read back
            except CONNECTION_ERRORS as e:
                # Maybe created: released (after reading it back) if it moves away, and
                # claimed again otherwise.
                self.own(tp, thread, uncertain=True)
                lost = lost or e
            except Exception as e:  # noqa: BLE001 - not created (NoAuth, say); raised below
                refused = refused or e
        if lost is not None:
            raise lost
        if refused is not None:
            raise refused
        return conflicts

    def _wait_released(self, tp: TopicPartition, thread: str, gen: int, view: GroupView,
                       deadline: float) -> bool:
        """Wait for the deletion of ``tp``'s owner znode (a watch), until ``deadline``
        (:class:`_Conflict`), a group change or shutdown; True if it turns out to be this
        session's own (a create whose reply was lost), taken back for ``thread``."""
        path = zp.owner_path(self.group, tp.topic, tp.partition)
        gone = threading.Event()
        try:
            self.membership.zk_ops += 1
            holder, stat = self.zk.get(path, watch=lambda _e, g=gone: g.set())
        except NoNodeError:
            return False  # released meanwhile
        holder_thread = holder.decode(errors="replace")
        if stat.ephemeralOwner == self.membership.session_id():
            self._take_back(tp, thread, path, holder_thread, stat.version)
            return True
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            self._warn_if_release_mismatch(view, tp, holder_thread)
            raise _Conflict(f"{path} is still held by {holder_thread!r}")
        self.log.debug("%s held by %s; waiting for its release", path, holder_thread)
        self.stats.claim_waits += 1
        # Wake on the deletion, on a group change, or on shutdown.
        end = time.monotonic() + remaining
        while not gone.is_set() and time.monotonic() < end:
            if self.membership.view_changed(gen) or self.shutdown_event.is_set():
                break
            gone.wait(0.05)
        return False

    def _take_back(self, tp: TopicPartition, thread: str, path: str, holder_thread: str,
                   version: int) -> None:
        """Ours already: a create whose reply was lost. Written again if it names another of
        our threads (the version: nobody else can have touched it)."""
        if holder_thread != thread:
            # Owned whatever the write's fate: released if it moves away.
            self.own(tp, thread, uncertain=True)
            self.membership.zk_ops += 1
            with self.membership.live_session():
                rewritten = self.zk.set_async(path, zp.encode_owner(thread), version=version)
            rewritten.get()
        self.own(tp, thread)

    def release(self, tps: set[TopicPartition], deadline: float | None = None) -> None:
        """Delete the owner znodes of ``tps`` this session holds.

        Answers are awaited until deadline (time.monotonic()) at most; None: for ever. A tp
        in ``owned`` and not ``uncertain`` is an ephemeral this session created, which nobody
        else can replace while the session lives: it is deleted without reading it back. An
        uncertain one is read back first and deleted only if this session holds it (else it
        is another member's claim, or missing). Requests are pipelined and sent only while
        the session is known to live (see the membership's ``session_guard``): after a loss,
        the same path may already be another member's claim.

        Under ``commit_lock``: no commit of these partitions is written after their owner
        znodes go (the next owner reads the committed offsets once it has claimed). Every
        answer is taken before anything is raised (as in :meth:`claim`): what was deleted
        after a refusal is no longer owned.
        """
        owned = sorted(tp for tp in tps if tp in self.owned)
        with self.commit_lock:
            errors: list[BaseException | None] = [None, None]  # lost, refused
            try:
                doubtful = [tp for tp in owned if tp in self.uncertain]
                ours = set(owned) - set(doubtful)
                if doubtful:
                    ours |= self._read_back(doubtful, deadline, errors)
                self._delete(ours, deadline, errors)
            finally:
                self.metrics.set_owned_partitions(self.owned)
        lost, refused = errors
        if lost is not None:
            raise lost
        if refused is not None:
            raise refused

    def _read_back(self, doubtful: list[TopicPartition], deadline: float | None,
                   errors: list[BaseException | None]) -> set[TopicPartition]:
        """Those of ``doubtful`` this session holds; those it does not are forgotten. The
        first connection error and the first other error go into ``errors`` (lost, refused)."""
        path = zp.owner_path
        with self.membership.live_session():
            session = self.membership.session_id()
            # A sync first: after a reconnection to another server of the ensemble, a
            # follower that has not applied our create yet would say missing, and a znode we
            # hold would be forgotten yet held until the session ends. The session's reads
            # wait behind its sync (pipelined: no extra round trip).
            self.zk.sync_async(zp.owners_dir(self.group))
            reads: list[tuple[TopicPartition, IAsyncResult]] = [
                (tp, self.membership.send(self.zk.exists_async,
                                          path(self.group, tp.topic, tp.partition)))
                for tp in doubtful]
        self.membership.zk_ops += len(reads)
        ours: set[TopicPartition] = set()
        for tp, result in reads:
            try:
                stat = result.get(timeout=timeout(deadline))
            except CONNECTION_ERRORS as e:
                errors[0] = errors[0] or e
                continue
            except Exception as e:  # noqa: BLE001 - stays uncertain; raised below
                errors[1] = errors[1] or e
                continue
            if stat is not None and stat.ephemeralOwner == session:
                ours.add(tp)
            else:
                self.disown(tp)  # missing, or another member's: not ours
        return ours

    def _delete(self, ours: set[TopicPartition], deadline: float | None,
                errors: list[BaseException | None]) -> None:
        """Delete these owner znodes of this session's; what was deleted is forgotten."""
        path = zp.owner_path
        with self.membership.live_session():
            pending = [
                (tp, self.membership.send(self.zk.delete_async,
                                          path(self.group, tp.topic, tp.partition)))
                for tp in sorted(ours)
            ]
        self.membership.zk_ops += len(pending)
        for tp, result in pending:
            try:
                result.get(timeout=timeout(deadline))
            except NoNodeError:
                pass
            except CONNECTION_ERRORS as e:
                # Maybe not deleted: stays in owned, read back and released later.
                self.uncertain.add(tp)
                errors[0] = errors[0] or e
                continue
            except Exception as e:  # noqa: BLE001 - refused (NoAuth, say): still ours
                errors[1] = errors[1] or e
                continue
            self.disown(tp)

    # -- what this member believes it owns -------------------------------------------------
    def own(self, tp: TopicPartition, thread: str, uncertain: bool = False) -> None:
        self.owned[tp] = thread
        if uncertain:
            self.uncertain.add(tp)
        else:
            self.uncertain.discard(tp)

    def disown(self, tp: TopicPartition) -> None:
        self.owned.pop(tp, None)
        self.uncertain.discard(tp)
        self.fence.forget([tp])

    def forget(self) -> None:
        """Forget everything owned without deleting anything (the session was lost: its
        ephemerals are gone, and the paths may be other members' claims by now)."""
        self.owned = {}
        self.uncertain.clear()
        self.fence.forget()

    def read_owned(self) -> OwnedReads:
        """Send the reads of :meth:`verify_owned` (pipelined, so that they travel with the
        group view's reads rather than after them)."""
        certain = sorted(tp for tp in self.owned if tp not in self.uncertain)
        if not certain:
            return OwnedReads(0, [])
        with self.membership.live_session():
            session = self.membership.session_id()
            reads = [(tp, self.membership.send(self.zk.get_async,
                                     zp.owner_path(self.group, tp.topic, tp.partition)))
                     for tp in certain]
        self.membership.zk_ops += len(reads)
        return OwnedReads(session, reads)

    def verify_owned(self, sent: OwnedReads) -> None:
        """Read this session's owner znodes back (:meth:`read_owned`, sent earlier in the
        same rebalance) rather than trusting ``owned``.

        One was deleted behind our back (by hand, or by a tool): it becomes uncertain, so the
        claim creates it again. One held by another session (deleted, then claimed by
        another member) is not ours: forgotten, so it is neither committed nor deleted, and
        the claim waits for it if the assignment still gives it to us. One of ours naming
        another of our threads is rewritten by the claim.
        """
        session, reads = sent.session, sent.reads
        if not reads:
            return
        # A missing one stays owned (uncertain) until the claim: its consumed offset is still
        # committed meanwhile, as it was before it went (the next owner reads it after claiming).
        with self.commit_lock:
            try:
                for tp, result in reads:
                    if tp not in self.owned:
                        continue  # released since the read was sent
                    try:
                        data, stat = result.get()
                    except NoNodeError:
                        self.log.warning("owner znode of %s-%d is gone: claiming it again",
                                         tp.topic, tp.partition)
                        self.uncertain.add(tp)
                        continue
                    if stat.ephemeralOwner != session:
                        self.log.warning("owner znode of %s-%d is held by %r of another "
                                         "session: not ours", tp.topic, tp.partition,
                                         data.decode(errors="replace"))
                        self.disown(tp)
                    elif data != zp.encode_owner(self.owned[tp]):
                        self.uncertain.add(tp)
            finally:
                self.metrics.set_owned_partitions(self.owned)

    def read_owners(self, assignment: Mapping[TopicPartition, str]
                     ) -> dict[TopicPartition, str | None]:
        pending = [(tp, self.zk.get_async(zp.owner_path(self.group, tp.topic, tp.partition)))
                   for tp in sorted(assignment)]
        self.membership.zk_ops += len(pending)
        owners: dict[TopicPartition, str | None] = {}
        for tp, result in pending:
            try:
                data, _ = result.get(timeout=30)
                owners[tp] = zp.decode_owner(data)
            except NoNodeError:
                owners[tp] = None
        return owners

    def _warn_if_release_mismatch(self, view: GroupView, tp: TopicPartition,
                                  holder: str) -> None:
        """A claim that never resolves because the holder's assignor orders partitions as
        another JVM release line does: say which jvm.compatibility to set."""
        hint = order_mismatch_hint(
            self.config.partition_assignment_strategy, view.consumers_for_topic,
            view.partitions_for_topic, self.config.jvm_behaviour, tp, holder)
        if hint is not None:
            self.log.warning("%s", hint)
