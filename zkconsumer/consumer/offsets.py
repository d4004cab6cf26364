"""Offset storage: where a group's committed offsets live.

Both stores hold the *next* offset to consume (never plus or minus one across stores).

- :class:`ZkOffsetStore`: ``/consumers/G/offsets/T/P`` as a decimal string; a commit writes only
  the partitions whose offset changed since the last commit or read, all of them in one
  ZooKeeper multi transaction (one per :data:`MAX_COMMIT_OPS` partitions: a request over
  ZooKeeper's ``jute.maxbuffer``, 1 MB by default, about 10,000 offsets, makes the server
  drop the connection).
- :class:`KafkaOffsetStore`: the group's offsets in Kafka (``offsets.storage=kafka``); a commit
  is one OffsetCommit for the group with every given partition, a read one OffsetFetch. The
  group is never joined: the request carries no generation and no member id, as the legacy
  consumer's did, so Kafka accepts it while the group has no modern member.
- :class:`DualOffsetStore` (``dual.commit.enabled``): commits to both; reads the larger of the
  two, as the legacy consumer did while migrating.

:func:`make_offset_store` picks one per the configuration. Failures raise; retrying
(``offsets.commit.max.retries``, ``offsets.channel.backoff.ms``) is the connector's job.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, Protocol

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError, SessionExpiredError

from zkconsumer._errors import CommitFencedError, OffsetCommitError, ZkDataError
from zkconsumer._tls import with_tls_deadline
from zkconsumer._types import TopicPartition
from zkconsumer.broker.clients import kafka_admin
from zkconsumer.consumer.fence import CommitFence, missing_offset_nodes
from zkconsumer.zk import paths as zp
from zkconsumer.zk.read import transaction_cause

if TYPE_CHECKING:
    from zkconsumer._config import ConsumerConfig

log = logging.getLogger("zkconsumer.offsets")

#: Offsets written per ZooKeeper transaction (about 105 bytes each).
MAX_COMMIT_OPS = 1000
#: ZooKeeper requests sent before their answers are awaited. kazoo wakes its connection thread
#: with a byte on a socket that thread reads only while connected: a few hundred requests
#: made while the connection is down fill it, and the sender then blocks until ZooKeeper is
#: back, holding whatever it holds (a window's answers fail at once with the connection).
PIPELINE_WINDOW = 100


class OffsetStore(Protocol):
    """Reads and commits a group's offsets; see the module docstring."""

    def read(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        """Committed next-offsets; None where nothing was committed."""
        ...

    def commit(self, offsets: Mapping[TopicPartition, int]) -> int:
        """Store these offsets; return how many were written. Raises on failure."""
        ...

    def close(self) -> None: ...


class ZkOffsetStore:
    """Offsets in ZooKeeper. ``_lock`` guards ``_checkpointed`` (what ZooKeeper holds) and
    ``_commits`` (transactions that succeeded, ever).

    With a ``fence`` (a member's :class:`~zkconsumer.consumer.fence.CommitFence`), each transaction
    also checks every partition's owner znode at the version this member's session holds, so
    ZooKeeper writes an offset only while that session lives and owns the partition; the
    offsets of partitions it does not own are dropped (:class:`CommitFencedError`, raised
    after the rest was written)."""

    def __init__(
        self, zk: KazooClient, group: str, metrics: Any = None,
        send_guard: Callable[[], AbstractContextManager[Any]] = nullcontext,
        *, timeout_s: float | None = None, fence: CommitFence | None = None,
    ) -> None:
        self._fence = fence
        self._metrics = metrics  # a ConsumerMetrics (ZooKeeperCommitsPerSec), or None
        # How long one answer is awaited (kazoo's KazooTimeoutError past it); None: for ever.
        # kazoo holds a request made while disconnected until it reconnects.
        self._timeout = timeout_s
        # Held while a commit's transaction is sent (not while its answer is awaited): the
        # connector's check that the session that owns the partitions still lives.
        self._send_guard = send_guard
        self._zk = zk
        self._group = group
        self._lock = threading.Lock()
        self._checkpointed: dict[TopicPartition, int] = {}
        self._commits = 0

    def read(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        out: dict[TopicPartition, int | None] = {}
        with self._lock:
            commits = self._commits
        # Pipelined, a window at a time (see PIPELINE_WINDOW): every get of a window is sent
        # before the first answer is awaited.
        wanted = list(tps)
        for start in range(0, len(wanted), PIPELINE_WINDOW):
            self._read_some(wanted[start:start + PIPELINE_WINDOW], commits, out)
        return out

    def _read_some(self, tps: list[TopicPartition], commits: int,
                   out: dict[TopicPartition, int | None]) -> None:
        pending = [
            (tp, path, self._zk.get_async(path))
            for tp in tps
            for path in [zp.offset_path(self._group, tp.topic, tp.partition)]
        ]
        for tp, path, result in pending:
            try:
                data, _ = result.get(timeout=self._timeout)
            except NoNodeError:
                out[tp] = None
                with self._lock:
                    # Forgotten, not kept: an offset cached from before (the znode deleted
                    # since) would make the next commit of that value look unchanged.
                    self._checkpointed.pop(tp, None)
                continue
            try:
                out[tp] = zp.decode_offset(data, path)
            except ZkDataError as e:
                # A garbled offset is treated as no offset (auto.offset.reset applies), loudly.
                log.error("ignoring %s", e)
                out[tp] = None
                with self._lock:
                    self._checkpointed.pop(tp, None)
                continue
            with self._lock:
                # Unless a commit (another thread's) ended meanwhile: this answer may predate
                # it, and remembering it would make a later commit of that older value look
                # unchanged. What the commit wrote is in the cache already.
                if self._commits == commits:
                    self._checkpointed[tp] = out[tp]  # type: ignore[assignment]

    def commit(self, offsets: Mapping[TopicPartition, int]) -> int:
        with self._lock:
            changed = {
                tp: off
                for tp, off in offsets.items()
                if off >= 0 and self._checkpointed.get(tp) != off
            }
        if not changed:
            return 0
        items = sorted(changed.items())
        per_tx = MAX_COMMIT_OPS if self._fence is None else MAX_COMMIT_OPS // 2  # + checks
        fenced: list[TopicPartition] = []
        for i in range(0, len(items), per_tx):
            fenced += self._commit_some(dict(items[i:i + per_tx]))
        written = len(changed) - len(fenced)
        if self._metrics is not None and written:
            self._metrics.record_commit("zookeeper", written)
        if fenced:
            assert self._fence is not None
            raise CommitFencedError(self._fence.name, fenced, "the partition's owner znode is "
                                    "not this member's session's")
        return written

    def _commit_some(self, offsets: Mapping[TopicPartition, int]) -> list[TopicPartition]:
        """Write ``offsets``; return the partitions the fence refused."""
        try:
            if self._fence is None:
                self._send_commit(offsets)
                fenced: list[TopicPartition] = []
            else:
                fenced = self._send_fenced(offsets, self._fence)
        except BaseException:
            # Perhaps applied (sent before the connection went, or the creates of
            # _ensure_nodes wrote them): what ZooKeeper holds is unknown, so forgotten, or a
            # later commit of the value cached before (a rewind) would look unchanged.
            with self._lock:
                for tp in offsets:
                    self._checkpointed.pop(tp, None)
                self._commits += 1  # and a read under way must not cache what it got
            raise
        with self._lock:
            self._checkpointed.update({tp: off for tp, off in offsets.items()
                                       if tp not in fenced})
            for tp in fenced:
                self._checkpointed.pop(tp, None)
            self._commits += 1
        return fenced

    def _send_fenced(self, offsets: Mapping[TopicPartition, int], fence: CommitFence
                     ) -> list[TopicPartition]:
        """One transaction: per partition, a check of its owner znode's version and the
        offset's write (a create the first time). A check that fails means the znode was
        rewritten by this session (read back, tried again) or is not ours (dropped)."""
        todo = dict(offsets)
        fenced: list[TopicPartition] = []
        create: set[TopicPartition] = set()
        for _attempt in range(4):
            owners = fence.owner_versions(todo)
            for tp in owners.not_ours:
                todo.pop(tp, None)
                fenced.append(tp)
            if not todo:
                return fenced
            for topic in sorted({tp.topic for tp in create}):
                with self._send_guard():
                    made = self._zk.ensure_path_async(zp.offsets_topic_dir(self._group, topic))
                made.get(timeout=self._timeout)
            tx = self._zk.transaction()
            ops: list[tuple[TopicPartition, str]] = []
            for tp, off in sorted(todo.items()):
                tx.check(zp.owner_path(self._group, tp.topic, tp.partition),
                         owners.versions[tp])
                path = zp.offset_path(self._group, tp.topic, tp.partition)
                if tp in create:
                    tx.create(path, zp.encode_offset(off))
                else:
                    tx.set_data(path, zp.encode_offset(off))
                ops += [(tp, "check"), (tp, "write")]
            with self._send_guard():
                # The versions were read on this session: under the next one they would
                # prove nothing (another member's new owner znode has version 0 too).
                if not fence.current(owners.session):
                    raise SessionExpiredError()
                sent = tx.commit_async()
            results = sent.get(timeout=self._timeout)
            if not any(isinstance(r, Exception) for r in results):
                return fenced
            changed, missing = missing_offset_nodes(results, ops)
            fence.forget(changed)
            if missing:
                # The operations after the failed one were not tried: which others are missing?
                create |= missing | self._missing(set(todo) - missing)
            cause = transaction_cause(tx.operations, results)
            if cause is not None and isinstance(cause[1], NodeExistsError):
                # Created meanwhile (by a commit of ours whose answer was lost): written.
                create.clear()
                continue
            if not changed and not missing:
                first = next(r for r in results if isinstance(r, Exception))
                raise first if cause is None else cause[1]
        raise OffsetCommitError(self._group, dict.fromkeys(todo, "owner znode kept changing"))

    def _missing(self, tps: set[TopicPartition]) -> set[TopicPartition]:
        """The partitions among ``tps`` without an offset znode (pipelined reads)."""
        wanted = sorted(tps)
        missing: set[TopicPartition] = set()
        for start in range(0, len(wanted), PIPELINE_WINDOW):
            with self._send_guard():
                reads = [(tp, self._zk.exists_async(zp.offset_path(self._group, tp.topic,
                                                                    tp.partition)))
                         for tp in wanted[start:start + PIPELINE_WINDOW]]
            missing |= {tp for tp, read in reads if read.get(timeout=self._timeout) is None}
        return missing

    def _send_commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        for attempt in range(2):
            tx = self._zk.transaction()
            for tp, off in offsets.items():
                path = zp.offset_path(self._group, tp.topic, tp.partition)
                tx.set_data(path, zp.encode_offset(off))
            with self._send_guard():
                sent = tx.commit_async()
            results = sent.get(timeout=self._timeout)
            failed = [r for r in results if isinstance(r, Exception)]
            if not failed:
                break
            if attempt == 0 and any(isinstance(r, NoNodeError) for r in failed):
                # The first commit of these partitions: their znodes (and parents) are made.
                self._ensure_nodes(offsets)
                continue
            cause = transaction_cause(tx.operations, results)
            raise failed[0] if cause is None else cause[1]

    def _ensure_nodes(self, offsets: Mapping[TopicPartition, int]) -> None:
        # Pipelined, like read(), a window at a time.
        items = list(offsets.items())
        for start in range(0, len(items), PIPELINE_WINDOW):
            with self._send_guard():  # writes of the offsets too
                pending = [
                    self._zk.create_async(zp.offset_path(self._group, tp.topic, tp.partition),
                                          zp.encode_offset(off), makepath=True)
                    for tp, off in items[start:start + PIPELINE_WINDOW]
                ]
            for created in pending:
                try:
                    created.get(timeout=self._timeout)
                except NodeExistsError:
                    pass

    def close(self) -> None:
        pass


class KafkaOffsetStore:
    """Offsets in Kafka, through one kafka-python ``KafkaAdminClient`` (public API).

    ``_lock`` guards ``_admin`` (made lazily from ``brokers()``, dropped after a failure so that
    the next call bootstraps from the brokers registered then) and serialises its use.
    """

    def __init__(
        self,
        config: ConsumerConfig,
        group: str,
        brokers: Callable[[], list[str]],
        metrics: Any = None,
    ) -> None:
        self._metrics = metrics  # a ConsumerMetrics (KafkaCommitsPerSec), or None
        self._config = config
        self._group = group
        self._brokers = brokers
        self._lock = threading.Lock()
        self._admin: Any = None

    def _client(self) -> Any:
        from kafka.errors import KafkaConnectionError

        if self._admin is None:
            brokers = list(self._brokers())
            if not brokers:
                raise KafkaConnectionError("no broker is registered in ZooKeeper")
            kwargs = with_tls_deadline(self._config.kafka_client_kwargs())
            kwargs["request_timeout_ms"] = self._config.offsets_channel_socket_timeout_ms
            # Also the wait for a first broker (kafka-python's default is 30 s): with the
            # retries, an unreachable cluster held the rebalance for minutes.
            kwargs["bootstrap_timeout_ms"] = self._config.offsets_channel_socket_timeout_ms
            self._admin = kafka_admin(bootstrap_servers=brokers, **kwargs)
        return self._admin

    def read(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        from kafka import TopicPartition as KTP

        wanted = sorted({TopicPartition(t, p) for t, p in tps})
        if not wanted:
            return {}
        with self._lock:
            try:
                found = self._client().list_group_offsets(
                    {self._group: [KTP(t, p) for t, p in wanted]}
                ).get(self._group, {})
            except BaseException:
                self._drop()
                raise
        out: dict[TopicPartition, int | None] = dict.fromkeys(wanted)
        for k, v in found.items():
            tp = TopicPartition(k.topic, k.partition)
            if tp in out and v is not None and v.offset is not None and v.offset >= 0:
                out[tp] = int(v.offset)
        return out

    def commit(self, offsets: Mapping[TopicPartition, int]) -> int:
        from kafka import TopicPartition as KTP
        from kafka.errors import NoError
        from kafka.structs import OffsetAndMetadata

        valid = {TopicPartition(t, p): off for (t, p), off in offsets.items() if off >= 0}
        if not valid:
            return 0
        request = {KTP(t, p): OffsetAndMetadata(off, "", -1) for (t, p), off in valid.items()}
        with self._lock:
            try:
                result = self._client().alter_group_offsets(self._group, request)
            except BaseException:
                self._drop()
                raise
            refused = {k: e for k, e in result.items() if e is not NoError}
            errors = {
                TopicPartition(k.topic, k.partition): getattr(e, "__name__", str(e))
                for k, e in refused.items()
            }
            retriable = any(getattr(e, "retriable", True) for e in refused.values())
            if errors:
                # Errors come back per partition, not raised: NOT_COORDINATOR among them
                # means the coordinator moved, and kafka-python never forgets the one it
                # found. A new client finds it again on the next try.
                self._drop()
        if errors:
            raise OffsetCommitError(self._group, errors, retriable)
        if self._metrics is not None:
            self._metrics.record_commit("kafka", len(valid))
        return len(valid)

    def _drop(self) -> None:
        admin, self._admin = self._admin, None
        if admin is not None:
            try:
                admin.close()
            except Exception:  # already failing; the first error matters
                log.debug("closing the offsets admin client failed", exc_info=True)

    def close(self) -> None:
        with self._lock:
            self._drop()


class DualOffsetStore:
    """Both stores (``dual.commit.enabled``): commits go to ZooKeeper and Kafka; a read is the
    larger of the two (None only when neither has an offset). No state of its own."""

    def __init__(self, zk_store: OffsetStore, kafka_store: OffsetStore) -> None:
        self.zk_store = zk_store
        self.kafka_store = kafka_store

    def read(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        wanted = list(tps)
        from_kafka = self.kafka_store.read(wanted)
        from_zk = self.zk_store.read(wanted)
        out: dict[TopicPartition, int | None] = {}
        for tp in wanted:
            values = [v for v in (from_zk.get(tp), from_kafka.get(tp)) if v is not None]
            out[tp] = max(values) if values else None
        return out

    def commit(self, offsets: Mapping[TopicPartition, int]) -> int:
        """Kafka first, then ZooKeeper (the legacy order); returns what Kafka took. When Kafka
        refuses some partitions, those it took still go to ZooKeeper before the refusal is
        raised, as the original wrote ZooKeeper per partition Kafka accepted (else one
        partition refused for good froze every ZooKeeper offset of the group, and a member
        still on ZooKeeper storage taking one over replayed)."""
        try:
            written = self.kafka_store.commit(offsets)
        except OffsetCommitError as e:
            taken = {tp: off for tp, off in offsets.items()
                     if TopicPartition(*tp) not in e.errors}
            if taken:
                self.zk_store.commit(taken)
            raise
        self.zk_store.commit(offsets)
        return written

    def close(self) -> None:
        try:
            self.kafka_store.close()
        finally:
            self.zk_store.close()


def make_offset_store(
    config: ConsumerConfig,
    zk: KazooClient,
    brokers: Callable[[], list[str]],
    metrics: Any = None,
    send_guard: Callable[[], AbstractContextManager[Any]] = nullcontext,
    zk_timeout_s: float | None = None,
    fence: CommitFence | None = None,
) -> OffsetStore:
    """The store ``offsets.storage`` and ``dual.commit.enabled`` ask for.

    zookeeper: ZooKeeper only (dual commit applies to Kafka storage only, as in the original);
    kafka: Kafka, plus ZooKeeper when dual commit is on. ``send_guard`` and ``zk_timeout_s``
    (the ZooKeeper store's ``timeout_s``), ``fence``: see :class:`ZkOffsetStore`.
    """
    zk_store = ZkOffsetStore(zk, config.group_id, metrics, send_guard, timeout_s=zk_timeout_s,
                             fence=fence)
    if config.offsets_storage != "kafka":
        return zk_store
    kafka_store = KafkaOffsetStore(config, config.group_id, brokers, metrics)
    if config.dual_commit_enabled:
        return DualOffsetStore(zk_store, kafka_store)
    return kafka_store
