"""Offset commits of one member: synchronous and asynchronous, automatic, and the commit
before partitions are released; each through the commit fence
(:mod:`zkconsumer.consumer.fence`), to ZooKeeper, Kafka or both (``dual.commit.enabled``).

Threads and locks (:class:`Commits`):

- ``commit_lock`` (Lock) serialises commits (the auto-commit thread, the rebalance, the
  user, the asynchronous committer's thread) with the release of owner znodes
  (:meth:`Ownership.release <zkconsumer.consumer.ownership.Ownership.release>` holds it): a
  commit checks ownership and writes under it, so no offset of a partition is written after
  its owner znode is deleted.
- The fence (called under ``commit_lock``) and the store have their own locks; the
  membership's ``session_guard`` guards each ZooKeeper offset write (the store sends inside
  its ``live_session()``).
- ``async_commits`` (:class:`~zkconsumer.consumer.async_commit.AsyncCommitter`):
  ``commit_offsets_async``'s queue and thread, which takes ``commit_lock`` per commit.
- Commits are skipped while the delivery gate is closed for a reason other than the lease
  (:meth:`cut_off`): a late commit could move another owner's offset back.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping

from kazoo.exceptions import ConnectionLoss

from zkconsumer._config import ConsumerConfig
from zkconsumer._errors import CommitFencedError, PartitionsNotOwnedError, ZkConnectionLostError
from zkconsumer._types import TopicPartition
from zkconsumer.consumer.async_commit import AsyncCommitter
from zkconsumer.consumer.fence import CommitFence
from zkconsumer.consumer.gate import DeliveryGate
from zkconsumer.consumer.group_view import CONNECTION_ERRORS
from zkconsumer.consumer.membership import Membership
from zkconsumer.consumer.offsets import OffsetStore
from zkconsumer.consumer.ownership import Ownership


class Commits:
    """Writes this member's offsets (locks: see the module docstring)."""

    def __init__(self, config: ConsumerConfig, consumer_id: str, membership: Membership,
                 ownership: Ownership, offsets: OffsetStore, gate: DeliveryGate,
                 fence: CommitFence, commit_lock: threading.Lock,
                 shutdown_event: threading.Event,
                 log: logging.LoggerAdapter[logging.Logger]) -> None:
        self.config = config
        self.consumer_id = consumer_id
        self.membership = membership
        self.ownership = ownership
        self.offsets = offsets
        self.gate = gate
        self.fence = fence
        self.commit_lock = commit_lock
        self.shutdown_event = shutdown_event
        self.log = log
        self.async_commits = AsyncCommitter(consumer_id, self.write_async, log)

    def cut_off(self) -> bool:
        """The gate is closed for a reason other than the lease: the connection is down or
        the session was lost, so no commit is sent. A lapsed lease alone does not stop
        commits (nor a rebalance's): they are fenced themselves (see the fence), and would
        succeed exactly when the session still lives."""
        return self.gate.closed and bool(self.gate.reasons() - {"lease"})

    def consumed_offsets(self) -> dict[TopicPartition, int]:
        """Each owned partition's consumed offset. Only what this member still owns: between
        a rebalance's release and its new registry, the registry still holds the partitions
        given away (see :meth:`Ownership.release
        <zkconsumer.consumer.ownership.Ownership.release>`)."""
        owned = self.ownership.owned
        return {
            tp: info.consumed_offset
            for tp, info in self.ownership.registry.items()
            if info.consumed_offset >= 0 and tp in owned
        }

    def commit(self, retry_on_failure: bool, strict: bool = False) -> None:
        """Commit consumed offsets. Paused, nothing is written: quietly, or with ``strict``
        (the application asked) ConnectionLoss."""
        made_in = self.membership.session_gen
        if self.cut_off():
            # The partitions may be another member's by now: a late commit could move its
            # offsets back. What was consumed stays in the registry for the next commit.
            self.log.debug("not committing while paused (%s)", ", ".join(self.gate.reasons()))
            if strict:
                raise ConnectionLoss()
            return
        with self.commit_lock:
            # Only what this member still owns (see consumed_offsets).
            self.write_offsets(self.consumed_offsets(), retry_on_failure, made_in)

    def commit_explicit(self, offsets: dict[TopicPartition, int], retry_on_failure: bool) -> None:
        made_in = self.membership.session_gen
        with self.commit_lock:
            # Checked under the lock _release holds while it gives partitions away: an owned
            # partition's commit is written before its owner znode goes.
            owned = self.ownership.owned
            missing = [tp for tp in offsets if tp not in owned]
            if missing:
                raise PartitionsNotOwnedError(self.consumer_id, missing)
            self.write_offsets(offsets, retry_on_failure, made_in)

    def commit_now(self, explicit: dict[TopicPartition, int] | None, retry: bool) -> None:
        """``commit_offsets``' writes once its checks passed: the consumed offsets
        (``explicit`` None) or exactly ``explicit``, after the asynchronous commits made
        before; :class:`ZkConnectionLostError` while paused or when the connection or the
        session goes meanwhile."""
        lost = ZkConnectionLostError(
            f"{self.consumer_id}: not committing while the ZooKeeper connection is down "
            "or the session was lost (the partitions may belong to another member now)"
        )
        if self.cut_off():
            raise lost
        if not self.async_commits.in_worker():
            # After the asynchronous commits made before it, as their order says.
            self.async_commits.flush(self.config.zookeeper_session_timeout_ms / 1000.0 * 2)
        try:
            if explicit is None:
                self.commit(retry, strict=True)
            elif explicit:
                self.commit_explicit(explicit, retry)
        except CONNECTION_ERRORS as e:
            raise lost from e  # lost meanwhile: the write was not sent, or its fate unknown

    def write_async(self, offsets: dict[TopicPartition, int], made_in: int
                    ) -> BaseException | None:
        """One asynchronous commit, in the committer's thread (see commit_offsets_async)."""
        if not offsets:
            return None
        try:
            if self.cut_off():
                raise ConnectionLoss()
            with self.commit_lock:
                return self.write_offsets(offsets, True, made_in)
        except CONNECTION_ERRORS as e:
            raise ZkConnectionLostError(
                f"{self.consumer_id}: not committed: the ZooKeeper connection is down or the "
                "session was lost (the partitions may belong to another member now)") from e

    def write_offsets(self, offsets: Mapping[TopicPartition, int], retry_on_failure: bool,
                      made_in: int) -> CommitFencedError | None:
        """Store ``offsets`` (a commit made when the membership's ``session_gen`` was
        ``made_in``), retrying per the configuration; call with ``commit_lock`` held. What
        the fence drops (see :mod:`zkconsumer.consumer.fence`) is logged, never retried, and
        returned."""
        dropped: dict[TopicPartition, str] = {}
        try:
            self._write_admitted(dict(offsets), retry_on_failure, made_in, dropped)
        finally:
            if dropped:
                self.fence.warn_dropped(dropped)
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
            if offsets and (self.cut_off() or self.membership.session_lost.is_set()):
                raise ConnectionLoss()
            offsets, refused = self.fence.admit(offsets, made_in, self.membership.session_gen,
                                                 self.ownership.owned)
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
            for tp in self.fence.confirm_alive(offsets):
                dropped[tp] = "its owner znode is not this member's session's"
                offsets.pop(tp, None)
            if not offsets:
                return
        n = self.offsets.commit(offsets)
        if n:
            self.log.debug("committed %d offsets", n)

    def _retry_commit(self, e: Exception, attempt: int, retries: int) -> bool:
        """Whether to retry after the failed write ``e`` (True once the backoff has passed);
        False when it cannot help (a rebalance waits on this commit). Raises ConnectionLoss
        when the retry could not be sent (said now rather than after the backoff)."""
        if (attempt >= retries or self.membership.session_lost.is_set()
                or not getattr(e, "retriable", True)):
            return False
        if self.cut_off() or not self.membership.zk.connected:
            raise ConnectionLoss() from e
        self.log.warning("offset commit failed (%r); retrying", e)
        time.sleep(self.config.offsets_channel_backoff_ms / 1000.0)
        return True

    def autocommit_loop(self) -> None:
        interval = self.config.auto_commit_interval_ms / 1000.0
        while not self.shutdown_event.wait(interval):
            try:
                self.commit(retry_on_failure=False)
            except Exception as e:  # noqa: BLE001 - the next interval tries again
                self.log.warning("auto-commit failed: %r", e)


def explicit_offsets(offsets: Mapping[tuple[str, int], int]) -> dict[TopicPartition, int]:
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
