"""The group's offsets in Kafka, for the commands that read or write offsets.

Members with ``offsets.storage=kafka`` resume from Kafka's committed offsets, so offsets
written for a group are also committed in Kafka when the group has committed offsets there:
Kafka is asked first (one OffsetFetch per group, :func:`_ask_kafka`), refusals come before any
write (active members in Kafka: :class:`~zkconsumer._errors.KafkaGroupActiveError`; Kafka not
reachable, unless ``--zookeeper-only``: :class:`~zkconsumer._errors.KafkaUnknownError`), and
Kafka is written after ZooKeeper (:func:`_commit_kafka`); a refusal then says that ZooKeeper
was written, and which of Kafka's offsets were. Kafka is asked through one admin client
(:class:`_KafkaGroups`, built by :func:`zkconsumer.broker.clients.modern_admin`); the group is
never joined.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kafka.errors import KafkaError
from kazoo.client import KazooClient

from zkconsumer._errors import (
    AdminError,
    GroupActiveError,
    KafkaGroupActiveError,
    KafkaUnknownError,
    MigrationError,
)
from zkconsumer._types import TopicPartition
from zkconsumer.broker.clients import modern_admin
from zkconsumer.ops.brokers import (
    BOOTSTRAP_TIMEOUT_MS,
    TOOLS_CLIENT_ID,
    _BrokersUnreachableError,
    _reachable_brokers,
    _reason,
)
from zkconsumer.ops.kafka_store import modern_group as _modern_group
from zkconsumer.ops.kafka_store import read_kafka_offsets, write_kafka_offsets
from zkconsumer.ops.results import KafkaImport, KafkaOffsetsLeft, OffsetEntry, StoreDifference
from zkconsumer.zk import paths as zp
from zkconsumer.zk.read import children

log = logging.getLogger("zkconsumer.admin")


#: The flag of ``offsets reset|import|export`` that leaves Kafka alone.
ZOOKEEPER_ONLY_FLAG = "--zookeeper-only"
#: How a refusal for want of Kafka's answer ends.
_ZOOKEEPER_ONLY_HINT = f"{ZOOKEEPER_ONLY_FLAG} writes ZooKeeper's alone"


class _KafkaGroups:
    """One admin client asking Kafka about groups and committing their offsets, through
    the Kafka-store helpers the migration shares (:mod:`zkconsumer.ops.kafka_store`;
    kafka-python's public API: OffsetFetch,
    DescribeGroups, OffsetCommit outside any generation). The group is never joined.

    :class:`_BrokersUnreachableError` when no broker answers within
    :data:`BOOTSTRAP_TIMEOUT_MS`. Made by :func:`_kafka_groups`; a context manager."""

    def __init__(self, servers: str, kafka: Mapping[str, Any] | None = None) -> None:

        self.servers = servers
        try:
            self._admin = modern_admin(servers, BOOTSTRAP_TIMEOUT_MS, kafka,
                                       client_id=TOOLS_CLIENT_ID)
        except MigrationError as e:
            raise _BrokersUnreachableError(str(e)) from e

    def __enter__(self) -> _KafkaGroups:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def offsets(self, group: str) -> dict[TopicPartition, int]:
        """The group's committed offsets in Kafka (one OffsetFetch)."""

        return read_kafka_offsets(self._admin, group)

    def members(self, group: str) -> list[str]:
        """The member ids of the group's active members in Kafka (DescribeGroups)."""

        return [m.member_id for m in _modern_group(self._admin, group)[1]]

    def log_starts(
        self, servers: str, tps: Sequence[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """The log start of each of ``tps`` (ListOffsets(earliest); the log ends come from
        :func:`_log_end_offsets`), as
        ``migrate status`` reads them (:func:`zkconsumer.migration.stores.broker_log_range`).
        ``servers``: this client's, taken for the signature of the readers it stands in
        for."""
        from kafka import TopicPartition as KTP
        from kafka.admin import OffsetSpec

        if not tps:
            return {}
        found = self._admin.list_partition_offsets(
            {KTP(t, p): OffsetSpec.EARLIEST for t, p in tps})
        return {TopicPartition(k.topic, k.partition): int(v.offset) for k, v in found.items()}

    def offsets_of(self, groups: Sequence[str]) -> dict[str, dict[TopicPartition, int]]:
        """Each group's committed offsets in Kafka (groups with none: an empty dict), in
        batches of :data:`OFFSET_FETCH_BATCH` (one OffsetFetch v8 per coordinator and batch,
        as kafka-python sends it to brokers of Kafka 3.0 and later). A batch that fails
        (one group refused) is asked again group by group, and a group that still fails
        raises."""
        out: dict[str, dict[TopicPartition, int]] = {}
        for start in range(0, len(groups), OFFSET_FETCH_BATCH):
            batch = list(groups[start:start + OFFSET_FETCH_BATCH])
            try:
                found = self._admin.list_group_offsets(batch)
            except KafkaError:
                log.debug("batched OffsetFetch failed; asking group by group", exc_info=True)
                found = {g: self._admin.list_group_offsets([g]).get(g, {}) for g in batch}
            for group in batch:
                out[group] = {TopicPartition(k.topic, k.partition): int(v.offset)
                              for k, v in found.get(group, {}).items()
                              if v is not None and v.offset is not None and v.offset >= 0}
        return out

    def commit(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit ``offsets`` for ``group`` (raises as ``write_kafka_offsets`` does)."""

        write_kafka_offsets(self._admin, group, offsets)

    def close(self) -> None:
        self._admin.close()


#: Groups one OffsetFetch asks about, at most.
OFFSET_FETCH_BATCH = 500


def kafka_offsets_of(
    zk: KazooClient, groups: Sequence[str], bootstrap: str | None = None,
    kafka: Mapping[str, Any] | None = None,
) -> dict[str, dict[TopicPartition, int]]:
    """Each group's committed offsets in Kafka (an empty dict for one with none), asked in
    batches (:meth:`_KafkaGroups.offsets_of`) through one admin client on ``bootstrap`` or
    the brokers registered in ZooKeeper, closed before returning (a monitor polling every
    30 s leaves no client behind between polls). AdminError naming why Kafka cannot be
    asked."""
    if not groups:
        return {}
    with _kafka_groups(zk, bootstrap, kafka) as client:
        try:
            return client.offsets_of(groups)
        except Exception as e:  # said by the caller (the store unknown), with the reason
            log.debug("committed offsets in Kafka failed", exc_info=True)
            raise AdminError(f"committed offsets in Kafka unknown: {_reason(e)}") from e


def _kafka_groups(
    zk: KazooClient, bootstrap: str | None, kafka: Mapping[str, Any] | None
) -> _KafkaGroups:
    """A :class:`_KafkaGroups` client on the brokers (``bootstrap``, else those registered
    in ZooKeeper), once one is seen to accept connections: AdminError naming why not (none
    registered, none reachable, no answer within :data:`BOOTSTRAP_TIMEOUT_MS`)."""
    return _KafkaGroups(_reachable_brokers(zk, bootstrap, kafka), kafka)


def kafka_committed(
    zk: KazooClient, group: str, kafka: Mapping[str, Any] | None = None,
    bootstrap: str | None = None,
) -> dict[TopicPartition, int]:
    """The group's committed offsets in Kafka (one OffsetFetch); AdminError naming why
    Kafka cannot be asked."""
    with _kafka_groups(zk, bootstrap, kafka) as client:
        return client.offsets(group)


@dataclass
class _KafkaPlan:
    """What Kafka holds for the groups a command writes: ``offsets`` has the groups with
    committed offsets there (their offsets), which get the new offsets too; ``client`` is
    None when Kafka was not asked (``--zookeeper-only``)."""

    client: _KafkaGroups | None = None
    offsets: dict[str, dict[TopicPartition, int]] = field(default_factory=dict)

    def __enter__(self) -> _KafkaPlan:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.client is not None:
            self.client.close()


def _groups_text(groups: Sequence[str]) -> str:
    """"group 'a'", or "groups 'a', 'b' and 3 more"."""
    shown = ", ".join(repr(g) for g in groups[:3])
    more = f" and {len(groups) - 3} more" if len(groups) > 3 else ""
    return f"group{'s' if len(groups) != 1 else ''} {shown}{more}"


def _kafka_unknown(action: str, groups: Sequence[str], reason: str) -> KafkaUnknownError:
    have = "has" if len(groups) == 1 else "have"
    return KafkaUnknownError(
        f"refusing to {action}: cannot ask Kafka whether {_groups_text(groups)} {have} "
        f"offsets there (members with offsets.storage=kafka resume from those): {reason}; "
        f"{_ZOOKEEPER_ONLY_HINT}"
    )


def _ask_kafka(
    zk: KazooClient, groups: Sequence[str], bootstrap: str | None,
    kafka: Mapping[str, Any] | None, action: str,
) -> _KafkaPlan:
    """Which of ``groups`` have committed offsets in Kafka (one OffsetFetch each, as
    ``groups describe`` asks); the caller writes theirs to Kafka too. Refuses
    (:class:`KafkaGroupActiveError`) when such a group has active members in Kafka, and
    (:class:`KafkaUnknownError`) when Kafka cannot be asked. The caller closes the plan."""
    try:
        client = _kafka_groups(zk, bootstrap, kafka)
    except AdminError as e:
        raise _kafka_unknown(action, groups, str(e)) from e
    plan = _KafkaPlan(client)
    try:
        for group in groups:
            try:
                found = client.offsets(group)
            except Exception as e:  # refused, with the reason
                log.debug("committed offsets in Kafka failed", exc_info=True)
                raise _kafka_unknown(action, [group], _reason(e)) from e
            if found:
                plan.offsets[group] = found
        for group in plan.offsets:
            try:
                members = client.members(group)
            except Exception as e:  # refused, with the reason
                log.debug("DescribeGroups failed", exc_info=True)
                raise KafkaUnknownError(
                    f"refusing to {action}: cannot ask Kafka whether group {group!r}, which "
                    f"has offsets there, has active members: {_reason(e)}; "
                    f"{_ZOOKEEPER_ONLY_HINT}"
                ) from e
            if members:
                n = len(members)
                shown = ", ".join(members[:3]) + (f" and {n - 3} more" if n > 3 else "")
                raise KafkaGroupActiveError(
                    f"refusing to {action}: group {group!r} has {n} active member"
                    f"{'s' if n != 1 else ''} in Kafka ({shown}), and Kafka takes offsets "
                    f"for it only while it has none; stop {'it' if n == 1 else 'them'} first"
                )
    except BaseException:
        plan.__exit__()
        raise
    return plan


def _kafka_writes(
    plan: _KafkaPlan, entries: Iterable[OffsetEntry],
    exists: Callable[[TopicPartition], bool] = lambda tp: True,
) -> tuple[dict[str, dict[TopicPartition, int]], list[KafkaImport]]:
    """The offsets of ``entries`` to commit in Kafka (those of groups with offsets there
    that differ from Kafka's), and what that does per group."""
    writes: dict[str, dict[TopicPartition, int]] = {}
    counts: dict[str, list[int]] = {}
    for e in entries:
        current = plan.offsets.get(e.group)
        if current is None:
            continue
        tp = TopicPartition(e.topic, e.partition)
        n = counts.setdefault(e.group, [0, 0, 0, 0])
        if not exists(tp):
            n[3] += 1
            continue
        old = current.get(tp)
        if old == e.offset:
            n[2] += 1
            continue
        n[0 if old is None else 1] += 1
        writes.setdefault(e.group, {})[tp] = e.offset
    return writes, [KafkaImport(g, *n) for g, n in sorted(counts.items())]


def _commit_kafka(plan: _KafkaPlan, writes: Mapping[str, Mapping[TopicPartition, int]],
                  what: str) -> None:
    """Commit ``writes`` (group -> offsets) in Kafka, after ZooKeeper's were written.
    ``what``: the operation, said first in a failure's message (empty: not said), which
    says what was written: ZooKeeper's offsets, the groups committed before, and those of
    the failing group that Kafka took before refusing the rest."""
    if plan.client is None:
        return
    done: list[str] = []
    for group, offsets in sorted(writes.items()):
        if not offsets:
            continue
        try:
            plan.client.commit(group, offsets)
        except Exception as e:
            if isinstance(e, GroupActiveError):  # a member joined since _ask_kafka
                # (_migrate's subclass, from write_kafka_offsets: its ``written`` are the
                # partitions Kafka committed before refusing the rest)
                written = sorted(getattr(e, "written", ()))
                shown = ", ".join(f"{t}:{p}" for t, p in written[:6]) + (
                    f" and {len(written) - 6} more" if len(written) > 6 else "")
                refused = ("its offsets" if not written else
                           f"{len(offsets) - len(written)} of its {len(offsets)} offsets "
                           f"(the other {len(written)} "
                           f"{'was' if len(written) == 1 else 'were'} written: {shown})")
                why = (f"a modern consumer joined group {group!r} meanwhile and Kafka refused "
                       f"{refused}; stop it and run this again")
            else:  # write_kafka_offsets' message says what it wrote
                why = f"group {group!r}: {_reason(e)}; run this again"
            also = f" (and Kafka's of {_groups_text(done)})" if done else ""
            head = f"{what}: " if what else ""
            raise AdminError(f"{head}ZooKeeper's offsets written{also}, Kafka's not all: "
                             f"{why}") from e
        done.append(group)


def kafka_differences(
    zk: KazooClient,
    entries: Sequence[OffsetEntry],
    groups: Sequence[str] | None = None,
    bootstrap: str | None = None,
    *,
    kafka: Mapping[str, Any] | None = None,
) -> tuple[list[StoreDifference], str | None]:
    """Where the exported ``entries`` (ZooKeeper's offsets of ``groups``, all groups when
    None) are not what Kafka holds for the group (one OffsetFetch per group): the legacy
    line format has no place for Kafka's. Also why Kafka could not be asked (None: asked)."""
    selected = sorted(set(groups)) if groups else sorted(children(zk, zp.CONSUMERS))
    if not selected:
        return [], None
    ours = {(e.group, TopicPartition(e.topic, e.partition)): e.offset for e in entries}
    try:
        client = _kafka_groups(zk, bootstrap, kafka)
    except AdminError as e:
        return [], str(e)
    out: list[StoreDifference] = []
    failed: list[str] = []
    reason = ""
    try:
        for group in selected:
            try:
                found = client.offsets(group)
            except Exception as e:  # noqa: BLE001 - said in the warning
                failed.append(group)
                reason = reason or _reason(e)
                continue
            for tp, offset in sorted(found.items()):
                z = ours.get((group, tp))
                if z != offset:
                    out.append(StoreDifference(group, tp.topic, tp.partition, z, offset))
    finally:
        client.close()
    return out, (f"{_groups_text(failed)}: {reason}" if failed else None)


def kafka_offsets_left(
    zk: KazooClient, group: str, topic: str | None = None, bootstrap: str | None = None,
    kafka: Mapping[str, Any] | None = None,
) -> KafkaOffsetsLeft:
    """The group's committed offsets in Kafka (of ``topic`` only, when given), asked as
    ``groups describe`` asks (one OffsetFetch, to ``bootstrap`` or the brokers registered in
    ZooKeeper); after :func:`delete_group`, what is left where a member may resume from.
    Never raises for want of Kafka: ``error`` says why it could not be asked."""
    try:
        client = _kafka_groups(zk, bootstrap, kafka)
    except Exception as e:  # noqa: BLE001 - said in the warning: not checked
        return KafkaOffsetsLeft(group, topic, [], error=_reason(e))
    with client:
        try:
            found = client.offsets(group)
        except Exception as e:  # said in the warning: not checked
            log.debug("committed offsets in Kafka failed", exc_info=True)
            return KafkaOffsetsLeft(group, topic, [], client.servers, _reason(e))
    tps = sorted(tp for tp in found if topic is None or tp.topic == topic)
    return KafkaOffsetsLeft(group, topic, tps, client.servers)
