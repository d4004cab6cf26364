"""``migrate status``: whether a group may move from the legacy ZooKeeper consumer to the
broker-coordinated protocol now.

:func:`migration_status` shows, per partition, the ZooKeeper offset, the Kafka committed
offset, the log start and end, the lag against each store and a class (:data:`CLASSES`,
:func:`classify`); the live legacy members and owners (ZooKeeper) and the live modern members
(DescribeGroups); and a verdict (:func:`verdict`): whether a modern consumer group may take
over now without losing or replaying messages, with the reason. Nothing here prints;
``zkconsumer.cli.migrate`` does. The copy is :mod:`zkconsumer.migration.copy`; what both
read, :mod:`zkconsumer.migration.stores`.

Status and copy both refuse a group that exists in neither protocol
(:class:`MigrationUnknownGroupError`: no ``/consumers/G``, no offsets or members in Kafka) and
a requested topic the group has no offset for that exists nowhere
(:class:`MigrationUnknownTopicError`): typos, which a verdict of "not safe" would hide.

The live alternative needs no tool: run the legacy connectors with ``offsets.storage=kafka``
and ``dual.commit.enabled=true`` (commits go to both stores, reads take the max), roll,
then turn dual commit off, roll again; docs/migration.md, "Migrating to the modern group
protocol", has the whole procedure.

Offsets below zero (Kafka answers -1 for "nothing committed") count as absent everywhere.
Offsets of topics that exist neither in ``/brokers/topics`` nor on the brokers (deleted long
ago; legacy groups keep their offset znodes for ever) are class ``topic_missing``: reported,
never copied, never a blocker. Both status and copy take the brokers' word on which topics
and partitions exist (asked before the log range): one that ``/brokers/topics`` still lists
but the brokers lack is ``topic_missing`` (``partition_missing``) too, and the copy skips it
as well (stale: nothing to consume, and Kafka would refuse its offsets). A topic the
brokers do not answer for is not taken for missing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from kazoo.client import KazooClient

from zkconsumer._errors import MigrationError
from zkconsumer._types import TopicPartition, partition_lag
from zkconsumer.broker.clients import modern_admin
from zkconsumer.migration.stores import (
    LogRange,
    _check_group,
    _check_topics,
    _described_log_range,
    _fmt_live,
    _live_consumers,
    _read_zk_members,
    _read_zk_owners,
    _require_group,
    _require_topics,
    _topic_partitions,
    read_zk_offsets,
)
from zkconsumer.ops.common import OUT_OF_LOG_RESET, counted
from zkconsumer.ops.kafka_store import (
    ModernMember,
    classify,
    fmt_tps,
    modern_group,
    read_kafka_offsets,
)
from zkconsumer.zk import paths as zp


@dataclass
class PartitionState:
    """One partition of the group as both stores and the broker see it."""

    topic: str
    partition: int
    zookeeper_offset: int | None
    kafka_offset: int | None
    log_start: int | None
    log_end: int | None
    zookeeper_lag: int | None
    kafka_lag: int | None
    state: str  # one of CLASSES
    owner: str | None  # the legacy owner thread, when an owner znode exists


@dataclass
class MigrationStatus:
    """What ``migrate status`` reports; ``safe`` is the verdict, ``reason`` why."""

    group: str
    partitions: list[PartitionState]
    zookeeper_members: list[str]
    zookeeper_owners: dict[TopicPartition, str]
    modern_state: str
    modern_members: list[ModernMember]
    safe: bool
    reason: str
    blockers: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "safe": self.safe,
            "reason": self.reason,
            "blockers": list(self.blockers),
            "warnings": list(self.warnings),
            "zookeeper": {
                "members": list(self.zookeeper_members),
                "owners": {f"{tp.topic}:{tp.partition}": o
                           for tp, o in sorted(self.zookeeper_owners.items())},
            },
            "kafka": {
                "state": self.modern_state,
                "members": [
                    {"member_id": m.member_id, "client_id": m.client_id, "host": m.host,
                     "partitions": [f"{tp.topic}:{tp.partition}" for tp in m.partitions]}
                    for m in self.modern_members
                ],
            },
            "partitions": [
                {k: v for k, v in asdict(p).items() if k != "state"} | {"class": p.state}
                for p in self.partitions
            ],
        }


# --------------------------------------------------------------------------------------
# Classification and verdict (pure)
# --------------------------------------------------------------------------------------


def _lag(offset: int | None, end: int | None) -> int | None:

    return partition_lag(offset, end)


def _is(n: int) -> str:
    """"is" for one, "are" for any other count."""
    return "is" if n == 1 else "are"


def verdict(
    group: str,
    partitions: Sequence[PartitionState],
    zookeeper_members: Sequence[str],
    zookeeper_owners: Mapping[TopicPartition, str],
    modern_members: Sequence[ModernMember],
    log_range_error: str | None = None,
    *,
    listed_in_zookeeper: Collection[TopicPartition] = (),
) -> tuple[bool, str, list[str], list[str]]:
    """(safe, reason, blockers, warnings) for switching ``group`` to the modern protocol now.

    Safe means: no legacy consumer is alive (a mixed group gives duplicate ownership), and a
    modern consumer starting from Kafka's offsets would neither replay (ZooKeeper ahead) nor
    fall back to its reset policy where the legacy group had a position (missing in Kafka,
    offsets out of the log's range). A partition with an offset but no known log range
    (``log_range_error`` says why, when the lookup failed) blocks: its range is unverified.
    Partitions of deleted topics (``topic_missing``) and the partitions topics no longer
    have (``partition_missing``) only warn: nobody consumes them.
    ``listed_in_zookeeper``: those of the ``topic_missing`` and ``partition_missing`` ones
    that ``/brokers/topics`` still lists (the brokers lack them); they have a warning of
    their own, saying why ZooKeeper still has them (the copy skips them all the same).
    """
    by_class: dict[str, list[TopicPartition]] = {}
    listed: list[TopicPartition] = []
    for p in partitions:
        tp = TopicPartition(p.topic, p.partition)
        if tp in listed_in_zookeeper and p.state in ("topic_missing", "partition_missing"):
            listed.append(tp)
        else:
            by_class.setdefault(p.state, []).append(tp)
    blockers = _membership_blockers(zookeeper_members, zookeeper_owners, modern_members)
    blockers += _offset_blockers(partitions, by_class, log_range_error)
    warnings = _stale_warnings(by_class, listed)
    if not partitions:
        # A group that exists nowhere is refused before this (MigrationUnknownGroupError): this one
        # has a /consumers/G (or modern members) but nothing to check.
        blockers.append(
            f"group {group!r} has no committed offsets in ZooKeeper or Kafka and no "
            "subscribed topic: nothing to check"
        )
    if blockers:
        return False, blockers[0], blockers, warnings
    return True, _safe_reason(modern_members), blockers, warnings


def _membership_blockers(
    zookeeper_members: Sequence[str], zookeeper_owners: Mapping[TopicPartition, str],
    modern_members: Sequence[ModernMember],
) -> list[str]:
    """What blocks the switch in the group's membership: live legacy consumers (owners,
    else registered ids), and modern members live at the same time."""
    out: list[str] = []
    if zookeeper_owners:
        n = len(zookeeper_owners)
        out.append(
            f"{counted(n, 'owner znode')} {_is(n)} live ("
            f"{'a legacy consumer owns' if n == 1 else 'legacy consumers own'} "
            f"{fmt_tps(zookeeper_owners)}): stop the legacy consumers first; a mixed group "
            f"consumes {'that partition' if n == 1 else 'those partitions'} twice"
        )
    elif zookeeper_members:
        n = len(zookeeper_members)
        out.append(
            f"{counted(n, 'legacy consumer')} {_is(n)} registered "
            f"({', '.join(sorted(zookeeper_members)[:4])}): stop "
            f"{'it' if n == 1 else 'them'} first"
        )
    if modern_members and (zookeeper_owners or zookeeper_members):
        n = len(modern_members)
        out.append(
            f"{counted(n, 'modern member')} {_is(n)} live at the same time: both "
            "protocols consume the group now"
        )
    return out


def _offset_blockers(
    partitions: Sequence[PartitionState], by_class: Mapping[str, list[TopicPartition]],
    log_range_error: str | None,
) -> list[str]:
    """What blocks the switch in the offsets: an unknown log range, ZooKeeper ahead, Kafka
    missing offsets, offsets outside the log."""
    out: list[str] = []
    # Without the log range the out-of-range classes cannot be told: never call that safe.
    unknown = [TopicPartition(p.topic, p.partition) for p in partitions
               if p.state not in ("no_offset", "topic_missing", "partition_missing")
               and (p.log_start is None or p.log_end is None)]
    if unknown:
        why = f" ({log_range_error})" if log_range_error else ""
        out.append(
            f"log range unknown for {counted(len(unknown), 'partition')} "
            f"({fmt_tps(unknown)}){why}: cannot verify the offsets are in range; run again "
            "once the brokers answer"
        )
    if "zk_ahead" in by_class:
        tps = by_class["zk_ahead"]
        out.append(
            f"ZooKeeper is ahead of Kafka on {counted(len(tps), 'partition')} "
            f"({fmt_tps(tps)}): a modern consumer would replay; run `zkconsumer migrate "
            "copy --from zookeeper --to kafka` first"
        )
    if "missing_in_kafka" in by_class:
        tps = by_class["missing_in_kafka"]
        out.append(
            f"Kafka has no offset for {counted(len(tps), 'partition')} ({fmt_tps(tps)}): a "
            "modern consumer would start at its auto_offset_reset; run `zkconsumer migrate "
            "copy --from zookeeper --to kafka` first"
        )
    for cls, what in (("below_log_start", "below the log start (messages already deleted)"),
                      ("above_log_end", "past the log end")):
        if cls in by_class:
            tps = by_class[cls]
            one = len(tps) == 1
            out.append(
                f"{'an offset' if one else 'offsets'} {what} on "
                f"{counted(len(tps), 'partition')} ({fmt_tps(tps)}): {OUT_OF_LOG_RESET}; "
                f"reset {'it' if one else 'them'} explicitly first"
            )
    return out


def _stale_warnings(
    by_class: Mapping[str, list[TopicPartition]], listed: Sequence[TopicPartition]
) -> list[str]:
    """What to know that does not block the switch: stale offsets (deleted topics and
    partitions, those only ``/brokers/topics`` still lists), partitions without an offset,
    Kafka ahead."""
    out: list[str] = []
    if "topic_missing" in by_class:
        tps = by_class["topic_missing"]
        topics = sorted({tp.topic for tp in tps})
        one = len(topics) == 1
        out.append(
            f"stale offsets for {counted(len(tps), 'partition')} of "
            f"{counted(len(topics), 'topic')} that {'exists' if one else 'exist'} neither in "
            f"ZooKeeper nor on the brokers ({', '.join(topics[:4])}"
            f"{', ...' if len(topics) > 4 else ''}): "
            f"{'a deleted topic' if one else 'deleted topics'}, nothing to consume; "
            "`migrate copy` skips them"
        )
    if "partition_missing" in by_class:
        tps = by_class["partition_missing"]
        one = len({tp.topic for tp in tps}) == 1
        whose = ((f"{'its' if len(tps) == 1 else 'their'} topic no longer has", "a topic")
                 if one else ("their topics no longer have", "topics"))
        out.append(
            f"stale offsets for {counted(len(tps), 'partition')} {whose[0]} "
            f"({fmt_tps(tps)}): {whose[1]} recreated with fewer partitions, nothing to "
            "consume; `migrate copy` skips them"
        )
    if listed:
        out.append(
            f"stale offsets for {counted(len(listed), 'partition')} the brokers do not have "
            f"but /brokers/topics still lists ({fmt_tps(listed)}): deleted on the brokers "
            "only (ZooKeeper not told yet) or registered by hand, nothing to consume; "
            "`migrate copy` skips them"
        )
    if "no_offset" in by_class:
        tps = by_class["no_offset"]
        out.append(
            f"no offset in either store for {counted(len(tps), 'partition')} "
            f"({fmt_tps(tps)}): give the modern consumers the reset policy the legacy ones "
            "had (smallest = earliest, largest = latest)"
        )
    if "kafka_ahead" in by_class:
        out.append(
            f"Kafka is ahead of ZooKeeper on "
            f"{counted(len(by_class['kafka_ahead']), 'partition')}: fine for the switch "
            "(Kafka's offsets are used); a rollback must copy them back"
        )
    return out


def _safe_reason(modern_members: Sequence[ModernMember]) -> str:
    """Why the switch is safe (nothing blocks it)."""
    if modern_members:
        n = len(modern_members)
        reason = (f"no legacy consumer is alive and {counted(n, 'modern member')} already "
                  f"{'consumes' if n == 1 else 'consume'} the group; Kafka's offsets are "
                  "current")
    else:
        reason = ("no consumer of either protocol is alive and Kafka holds an offset at or "
                  "after ZooKeeper's for every partition: modern consumers resume exactly "
                  "where the legacy group stopped")
    return reason


# --------------------------------------------------------------------------------------
# migrate status
# --------------------------------------------------------------------------------------


def migration_status(
    zk: KazooClient,
    group: str,
    bootstrap: str,
    topics: Sequence[str] | None = None,
    *,
    admin: Any = None,
    timeout_ms: int = 15_000,
    log_range: Callable[[Sequence[TopicPartition]], LogRange] | None = None,
    kafka: Mapping[str, Any] | None = None,
    checks: int = 1,
    check_interval_s: float = 1.0,
    sleep: Callable[[float], None] = time.sleep,
) -> MigrationStatus:
    """Both stores, the log range and both protocols' live members for ``group``.

    Safe only when no consumer of either protocol is seen on ``checks`` looks in a row,
    ``check_interval_s`` apart (the first is the full read; as :func:`wait_until_idle`, one
    empty look proves nothing: a member restarting, or an owner znode between its release
    and the next claim).

    The partitions shown are every partition of each topic the group has an offset for (in
    either store), owns, or subscribes to (static subscriptions of live legacy members);
    ``topics`` restricts them to those topics, and shows each of them even when the group
    has nothing for it. Partition lists come from ``/brokers/topics`` and, for topics
    ZooKeeper does not know, from the broker's metadata; whether a topic or partition
    exists is the brokers' answer (asked by name, before the log range): a topic or
    partition that ``/brokers/topics`` still lists but the brokers lack is
    ``topic_missing`` or ``partition_missing`` (a topic they do not answer for keeps
    ZooKeeper's partitions, its log range unknown with the reason). ``log_range`` replaces
    :func:`broker_log_range` (for tests). ``kafka``: the brokers' security
    settings (``zkconsumer.zk.session.command_config``).

    Raises :class:`MigrationUnknownGroupError` for a group that exists in neither protocol (no
    ``/consumers/G``, no offsets or members in Kafka: a typo; a group that exists in Kafka
    only is fine), and :class:`MigrationUnknownTopicError` for a topic of ``topics`` the group has
    nothing for and that exists neither in ZooKeeper nor on the brokers.
    """
    _check_group(group)
    _check_topics(topics or ())
    own_admin = admin is None
    if admin is None:
        admin = modern_admin(bootstrap, kafka=kafka)
    try:
        wanted = set(topics) if topics else None
        zk_offsets = read_zk_offsets(zk, group, wanted)
        owners = _read_zk_owners(zk, group)
        members = _read_zk_members(zk, group)
        kafka_all = read_kafka_offsets(admin, group)
        modern_state, modern_members = modern_group(admin, group)
        _require_group(zk, group, kafka_all, modern_members)

        known = _topics_of(zk_offsets, owners, kafka_all, members, modern_members)
        names = set(known)
        if wanted is not None:
            # Every topic asked for is shown, also one the group has nothing for yet (its
            # partitions: no_offset); one that exists nowhere either is refused below.
            names = set(wanted)
            owners = {tp: o for tp, o in owners.items() if tp.topic in wanted}
            kafka_all = {tp: o for tp, o in kafka_all.items() if tp.topic in wanted}
        tps: set[TopicPartition] = set(zk_offsets) | set(kafka_all) | set(owners)
        parts_of = _topic_partitions(zk, admin, names)
        _require_topics(group, wanted or (), known, parts_of)
        for topic, parts in parts_of.items():
            tps.update(TopicPartition(topic, p) for p in parts or [])
        # The brokers are asked which of the topics /brokers/topics lists they have, as the
        # copy asks them: one they lack (deleted on a KRaft cluster before the bridge
        # removed it, or registered by hand) would make the log end lookup wait its whole
        # timeout and leave every partition without a log range. Those (and partitions the
        # brokers lack) are classed as the brokers say.
        (starts, ends, error), described = _described_log_range(
            admin, bootstrap, sorted(tp for tp in tps if parts_of.get(tp.topic) is not None),
            timeout_ms, kafka, log_range)
        rows, listed = _partition_rows(sorted(tps), zk_offsets, kafka_all, owners, starts,
                                       ends, parts_of, {**parts_of, **described})
        safe, reason, blockers, warnings = verdict(
            group, rows, list(members), owners, modern_members, log_range_error=error,
            listed_in_zookeeper=listed,
        )
        if checks < 1:
            raise MigrationError(f"checks must be >= 1, got {checks}")
        if safe:
            safe, reason, blockers = _looks_idle(zk, admin, group, checks, check_interval_s,
                                                 sleep, reason, blockers)
        return MigrationStatus(group, rows, sorted(members), owners, modern_state,
                               modern_members, safe, reason, blockers, warnings)
    finally:
        if own_admin:
            admin.close()


def _topics_of(zk_offsets: Mapping[TopicPartition, int], owners: Mapping[TopicPartition, str],
               kafka_all: Mapping[TopicPartition, int],
               members: Mapping[str, zp.ConsumerRegistration | None],
               modern_members: Sequence[ModernMember]) -> set[str]:
    """The topics the group has an offset for (in either store), owns, or subscribes to
    (static subscriptions of live legacy members; modern members' assignments)."""
    names = {tp.topic for tp in zk_offsets} | {tp.topic for tp in owners}
    names |= {tp.topic for tp in kafka_all}
    for reg in members.values():
        if reg is not None and not reg.is_wildcard:
            names |= set(reg.subscription)
    for m in modern_members:
        names |= {tp.topic for tp in m.partitions}
    return names


def _partition_rows(
    tps: Sequence[TopicPartition], zk_offsets: Mapping[TopicPartition, int],
    kafka_all: Mapping[TopicPartition, int], owners: Mapping[TopicPartition, str],
    starts: Mapping[TopicPartition, int], ends: Mapping[TopicPartition, int],
    parts_of: Mapping[str, list[int] | None], exists: Mapping[str, list[int] | None],
) -> tuple[list[PartitionState], list[TopicPartition]]:
    """Each partition's row, classified; and those the brokers lack that ZooKeeper lists.
    ``exists``: each topic's partitions as the brokers (else ZooKeeper) say."""
    rows = []
    listed: list[TopicPartition] = []  # missing on the brokers, listed in ZooKeeper
    for tp in tps:
        z, k = zk_offsets.get(tp), kafka_all.get(tp)
        start, end = starts.get(tp), ends.get(tp)
        state = classify(z, k, start, end, topic_exists=exists.get(tp.topic) is not None,
                         partition_exists=tp.partition in (exists.get(tp.topic) or ())
                         or tp.topic not in exists)
        if (state in ("topic_missing", "partition_missing")
                and tp.partition in (parts_of.get(tp.topic) or ())):
            listed.append(tp)
        rows.append(PartitionState(
            tp.topic, tp.partition, z, k, start, end, _lag(z, end), _lag(k, end), state,
            owners.get(tp),
        ))
    return rows, listed


def _looks_idle(zk: KazooClient, admin: Any, group: str, checks: int, interval_s: float,
                sleep: Callable[[float], None], reason: str, blockers: list[str],
                ) -> tuple[bool, str, list[str]]:
    """Looks 2..``checks`` for a live consumer (the first was the full read): the verdict's
    safety, reason and blockers after them."""
    for look in range(2, checks + 1):
        sleep(interval_s)
        live = _live_consumers(zk, admin, group)
        if live:
            reason = (f"a consumer was seen on look {look} of {checks}: "
                      f"{_fmt_live(live)}; run status again once the group has stopped")
            return False, reason, [reason]
    if checks > 1:
        reason += f" (no consumer seen on {checks} looks, {interval_s:g} s apart)"
    return True, reason, blockers
