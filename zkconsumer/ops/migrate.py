"""Moving a group from the legacy ZooKeeper consumer to the broker-coordinated protocol.

Two operations, as plain functions returning dataclasses (nothing here prints;
``zkconsumer.cli.migrate`` turns them into ``zkconsumer migrate status|copy``):

- :func:`migration_status`: per partition, the ZooKeeper offset, the Kafka committed offset,
  the log start and end, the lag against each store and a class (:data:`CLASSES`); the live
  legacy members and owners (ZooKeeper) and the live modern members (DescribeGroups); and a
  verdict: whether a modern consumer group may take over now without losing or replaying
  messages, with the reason.
- :func:`copy_offsets`: seed one store from the other (ZooKeeper -> Kafka to migrate,
  Kafka -> ZooKeeper to roll back). It first waits until the group has no live consumer of
  either protocol, seen on several checks in a row; it never replaces a newer offset unless
  forced; it copies the value as is, because both stores hold the *next* offset to consume
  (REFERENCE.md section 6: tools that add or subtract one are wrong); it refuses, unless
  forced, offsets outside their partition's log (what status calls ``below_log_start`` and
  ``above_log_end``: blockers), so that the two agree.

Both refuse a group that exists in neither protocol (:class:`MigrationUnknownGroupError`: no
``/consumers/G``, no offsets or members in Kafka) and a requested topic the group has no
offset for that exists nowhere (:class:`MigrationUnknownTopicError`): typos, which a verdict of "not
safe" would hide.

The live alternative needs no tool: run the legacy connectors with ``offsets.storage=kafka``
and ``dual.commit.enabled=true`` (commits go to both stores, reads take the max), roll,
then turn dual commit off, roll again; the README's section "Migrating to the modern group
protocol" has the whole procedure.

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

import logging
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
)

from zkconsumer._errors import (
    MigrationError,
    MigrationGroupActiveError,
    MigrationUnknownGroupError,
    MigrationUnknownTopicError,
    OutOfRangeError,
    ZkDataError,
)
from zkconsumer._types import TopicPartition, partition_lag
from zkconsumer.broker.clients import log_end_offsets, modern_admin
from zkconsumer.ops.common import OUT_OF_LOG_RESET, counted
from zkconsumer.zk import paths as zp
from zkconsumer.zk.read import transaction_cause
from zkconsumer.zk.session import acl_refused
from zkconsumer.zk.transactions import MAX_TRANSACTION_OPS, acl_unreadable, full_acl

__all__ = [
    "CLASSES",
    "CopyAction",
    "CopyResult",
    "MigrationGroupActiveError",
    "MigrationError",
    "MigrationStatus",
    "ModernMember",
    "OutOfRangeError",
    "PartitionState",
    "MigrationUnknownGroupError",
    "MigrationUnknownTopicError",
    "broker_log_range",
    "classify",
    "copy_offsets",
    "fmt_out_of_range",
    "migration_status",
    "verdict",
    "modern_admin",
    "plan_copy",
    "read_kafka_offsets",
    "read_zk_offsets",
    "wait_until_idle",
    "write_kafka_offsets",
]

log = logging.getLogger("zkconsumer.migrate")

Store = Literal["zookeeper", "kafka"]
STORES: tuple[Store, ...] = ("zookeeper", "kafka")

#: Partition classes, in the order they are checked (the first that applies wins).
CLASSES = (
    "topic_missing",     # the brokers do not have the topic (deleted)
    "partition_missing",  # the topic exists on the brokers, with fewer partitions: stale too
    "no_offset",         # neither store has an offset: both protocols apply their reset policy
    "below_log_start",   # the newer offset points at deleted messages
    "above_log_end",     # the newer offset points past the log end (truncated or recreated)
    "missing_in_zk",     # only Kafka has an offset
    "missing_in_kafka",  # only ZooKeeper has an offset
    "equal",
    "zk_ahead",          # ZooKeeper is newer: a modern consumer would replay the difference
    "kafka_ahead",       # Kafka is newer (dual commit, or modern consumers already ran)
)


# --------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------


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
class ModernMember:
    """A member of the broker-coordinated group (from DescribeGroups)."""

    member_id: str
    client_id: str
    host: str
    partitions: list[TopicPartition]


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


@dataclass
class CopyAction:
    """What the copy does (or did) with one partition."""

    topic: str
    partition: int
    source_offset: int | None
    dest_offset: int | None
    # copy: destination missing or older; overwrite: destination newer, --force;
    # skip_newer: destination newer; skip_equal; skip_missing: nothing in the source;
    # skip_topic_missing: the brokers do not have the topic any more (deleted; even if
    # /brokers/topics still lists it), nothing to resume; skip_partition_missing: the
    # brokers' topic has no such partition any more (recreated smaller);
    # out_of_range: it would be copied, but the source offset is outside the partition's
    # log (``out_of_range`` says where): a real copy refuses the whole copy unless --force.
    action: str
    #: The partition's log range, read for the partitions the copy would write (None for
    #: the others, and where the brokers could not tell).
    log_start: int | None = None
    log_end: int | None = None
    #: ``below_log_start`` or ``above_log_end`` (the classes of ``migrate status``) when the
    #: source offset is outside [log_start, log_end]: a member fetching there resets the
    #: offset by auto.offset.reset. Set with --force too, where such an offset is copied.
    out_of_range: str | None = None

    @property
    def writes(self) -> bool:
        return self.action in ("copy", "overwrite")

    def range_note(self) -> str:
        """``t:3 12 > log end 10`` (or ``< log start``), for an out-of-range offset."""
        where = (f"< log start {self.log_start}" if self.out_of_range == "below_log_start"
                 else f"> log end {self.log_end}")
        return f"{self.topic}:{self.partition} {self.source_offset} {where}"


def fmt_out_of_range(actions: Sequence[CopyAction], limit: int = 4) -> str:
    """The :meth:`CopyAction.range_note` of the first ``limit`` actions, and how many more."""
    shown = ", ".join(a.range_note() for a in actions[:limit])
    return shown + (f", +{len(actions) - limit} more" if len(actions) > limit else "")


@dataclass
class CopyResult:
    """The plan, and what was written (nothing on a dry run)."""

    group: str
    source: Store
    dest: Store
    dry_run: bool
    force: bool
    actions: list[CopyAction]
    written: int
    #: Live consumers seen by the last check (dry run: reported, not waited for).
    live_consumers: list[str] = field(default_factory=list)
    idle_checks: int = 0
    #: Why the log range of the partitions to write could not be checked (a dry run, or
    #: --force, goes on without it; a real copy refuses); None when it was checked.
    log_range_error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "from": self.source,
            "to": self.dest,
            "dry_run": self.dry_run,
            "force": self.force,
            "written": self.written,
            "live_consumers": list(self.live_consumers),
            "idle_checks": self.idle_checks,
            "log_range_error": self.log_range_error,
            "partitions": [asdict(a) for a in self.actions],
        }


# --------------------------------------------------------------------------------------
# Classification and verdict (pure)
# --------------------------------------------------------------------------------------


def _present(offset: int | None) -> int | None:
    return offset if offset is not None and offset >= 0 else None


def classify(
    zk_offset: int | None,
    kafka_offset: int | None,
    log_start: int | None = None,
    log_end: int | None = None,
    *,
    topic_exists: bool = True,
    partition_exists: bool = True,
) -> str:
    """The class of one partition (see :data:`CLASSES`; the first that applies wins).

    >>> classify(5, 5), classify(7, 5), classify(5, 7), classify(None, 3), classify(3, None)
    ('equal', 'zk_ahead', 'kafka_ahead', 'missing_in_zk', 'missing_in_kafka')
    >>> classify(2, 3, log_start=4), classify(None, None)
    ('below_log_start', 'no_offset')

    The range is checked on the newer offset, the one the modern consumers start from once
    the copy (which never overwrites a newer offset) is done: a stale ZooKeeper offset below
    the log start does not matter when Kafka's is newer and valid (dual commit turned off,
    say)::

    >>> classify(2, 9, log_start=4)
    'kafka_ahead'

    A partition of a topic that exists nowhere (``topic_exists=False``) is ``topic_missing``
    whatever its offsets: nobody can consume it, so neither store's value matters.

    >>> classify(3, None, topic_exists=False)
    'topic_missing'

    Likewise a partition its topic no longer has (recreated with fewer partitions).

    >>> classify(3, 3, partition_exists=False)
    'partition_missing'
    """
    if not topic_exists:
        return "topic_missing"
    if not partition_exists:
        return "partition_missing"
    zk_offset, kafka_offset = _present(zk_offset), _present(kafka_offset)
    present = [o for o in (zk_offset, kafka_offset) if o is not None]
    if not present:
        return "no_offset"
    used = max(present)
    if log_start is not None and log_start >= 0 and used < log_start:
        return "below_log_start"
    if log_end is not None and log_end >= 0 and used > log_end:
        return "above_log_end"
    if zk_offset is None:
        return "missing_in_zk"
    if kafka_offset is None:
        return "missing_in_kafka"
    if zk_offset == kafka_offset:
        return "equal"
    return "zk_ahead" if zk_offset > kafka_offset else "kafka_ahead"


def _lag(offset: int | None, end: int | None) -> int | None:

    return partition_lag(offset, end)


def _fmt_tps(tps: Iterable[TopicPartition], limit: int = 6) -> str:
    items = [f"{tp.topic}:{tp.partition}" for tp in sorted(tps)]
    more = f" (+{len(items) - limit} more)" if len(items) > limit else ""
    return ", ".join(items[:limit]) + more


def _fmt_live(live: Sequence[str]) -> str:
    """The first sign of a live consumer, and how many more (``live`` is not empty)."""
    return live[0] + (f" and {len(live) - 1} more" if len(live) > 1 else "")


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
    blockers: list[str] = []
    warnings: list[str] = []
    by_class: dict[str, list[TopicPartition]] = {}
    listed: list[TopicPartition] = []
    for p in partitions:
        tp = TopicPartition(p.topic, p.partition)
        if tp in listed_in_zookeeper and p.state in ("topic_missing", "partition_missing"):
            listed.append(tp)
        else:
            by_class.setdefault(p.state, []).append(tp)
    if zookeeper_owners:
        n = len(zookeeper_owners)
        blockers.append(
            f"{counted(n, 'owner znode')} {_is(n)} live ("
            f"{'a legacy consumer owns' if n == 1 else 'legacy consumers own'} "
            f"{_fmt_tps(zookeeper_owners)}): stop the legacy consumers first; a mixed group "
            f"consumes {'that partition' if n == 1 else 'those partitions'} twice"
        )
    elif zookeeper_members:
        n = len(zookeeper_members)
        blockers.append(
            f"{counted(n, 'legacy consumer')} {_is(n)} registered "
            f"({', '.join(sorted(zookeeper_members)[:4])}): stop "
            f"{'it' if n == 1 else 'them'} first"
        )
    if modern_members and (zookeeper_owners or zookeeper_members):
        n = len(modern_members)
        blockers.append(
            f"{counted(n, 'modern member')} {_is(n)} live at the same time: both "
            "protocols consume the group now"
        )
    # Without the log range the out-of-range classes cannot be told: never call that safe.
    unknown = [TopicPartition(p.topic, p.partition) for p in partitions
               if p.state not in ("no_offset", "topic_missing", "partition_missing")
               and (p.log_start is None or p.log_end is None)]
    if unknown:
        why = f" ({log_range_error})" if log_range_error else ""
        blockers.append(
            f"log range unknown for {counted(len(unknown), 'partition')} "
            f"({_fmt_tps(unknown)}){why}: cannot verify the offsets are in range; run again "
            "once the brokers answer"
        )
    if "zk_ahead" in by_class:
        tps = by_class["zk_ahead"]
        blockers.append(
            f"ZooKeeper is ahead of Kafka on {counted(len(tps), 'partition')} "
            f"({_fmt_tps(tps)}): a modern consumer would replay; run `zkconsumer migrate "
            "copy --from zookeeper --to kafka` first"
        )
    if "missing_in_kafka" in by_class:
        tps = by_class["missing_in_kafka"]
        blockers.append(
            f"Kafka has no offset for {counted(len(tps), 'partition')} ({_fmt_tps(tps)}): a "
            "modern consumer would start at its auto_offset_reset; run `zkconsumer migrate "
            "copy --from zookeeper --to kafka` first"
        )
    for cls, what in (("below_log_start", "below the log start (messages already deleted)"),
                      ("above_log_end", "past the log end")):
        if cls in by_class:
            tps = by_class[cls]
            one = len(tps) == 1
            blockers.append(
                f"{'an offset' if one else 'offsets'} {what} on "
                f"{counted(len(tps), 'partition')} ({_fmt_tps(tps)}): {OUT_OF_LOG_RESET}; "
                f"reset {'it' if one else 'them'} explicitly first"
            )
    if "topic_missing" in by_class:
        tps = by_class["topic_missing"]
        topics = sorted({tp.topic for tp in tps})
        one = len(topics) == 1
        warnings.append(
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
        warnings.append(
            f"stale offsets for {counted(len(tps), 'partition')} {whose[0]} "
            f"({_fmt_tps(tps)}): {whose[1]} recreated with fewer partitions, nothing to "
            "consume; `migrate copy` skips them"
        )
    if listed:
        warnings.append(
            f"stale offsets for {counted(len(listed), 'partition')} the brokers do not have "
            f"but /brokers/topics still lists ({_fmt_tps(listed)}): deleted on the brokers "
            "only (ZooKeeper not told yet) or registered by hand, nothing to consume; "
            "`migrate copy` skips them"
        )
    if "no_offset" in by_class:
        tps = by_class["no_offset"]
        warnings.append(
            f"no offset in either store for {counted(len(tps), 'partition')} "
            f"({_fmt_tps(tps)}): give the modern consumers the reset policy the legacy ones "
            "had (smallest = earliest, largest = latest)"
        )
    if "kafka_ahead" in by_class:
        warnings.append(
            f"Kafka is ahead of ZooKeeper on "
            f"{counted(len(by_class['kafka_ahead']), 'partition')}: fine for the switch "
            "(Kafka's offsets are used); a rollback must copy them back"
        )
    if not partitions:
        # A group that exists nowhere is refused before this (MigrationUnknownGroupError): this one
        # has a /consumers/G (or modern members) but nothing to check.
        blockers.append(
            f"group {group!r} has no committed offsets in ZooKeeper or Kafka and no "
            "subscribed topic: nothing to check"
        )
    if blockers:
        return False, blockers[0], blockers, warnings
    if modern_members:
        n = len(modern_members)
        reason = (f"no legacy consumer is alive and {counted(n, 'modern member')} already "
                  f"{'consumes' if n == 1 else 'consume'} the group; Kafka's offsets are "
                  "current")
    else:
        reason = ("no consumer of either protocol is alive and Kafka holds an offset at or "
                  "after ZooKeeper's for every partition: modern consumers resume exactly "
                  "where the legacy group stopped")
    return True, reason, blockers, warnings


# --------------------------------------------------------------------------------------
# Reading the two stores
# --------------------------------------------------------------------------------------


def _children(zk: KazooClient, path: str) -> list[str]:
    try:
        return list(zk.get_children(path))
    except NoNodeError:
        return []


def _check_group(group: str) -> None:
    try:
        zp.group_dir(group)
    except ValueError as e:
        raise MigrationError(f"bad group name: {e}") from e


def _check_topics(topics: Iterable[str]) -> None:
    for topic in topics:
        try:
            zp.topic_path(topic)
        except ValueError as e:
            raise MigrationError(f"bad topic name: {e}") from e


def _require_group(
    zk: KazooClient, group: str, kafka_offsets: Mapping[TopicPartition, int],
    modern_members: Sequence[ModernMember],
) -> None:
    """Refuse a group that exists in neither protocol (a typo, most likely): no
    ``/consumers/G``, and neither committed offsets nor members in Kafka. A group that
    exists in Kafka only (after the switch) is a real one."""
    if not kafka_offsets and not modern_members and zk.exists(zp.group_dir(group)) is None:
        raise MigrationUnknownGroupError(
            f"group {group!r} not found: no {zp.group_dir(group)} in ZooKeeper and no "
            "committed offsets or members in Kafka"
        )


def _require_topics(
    group: str, wanted: Iterable[str], known: Collection[str],
    parts_of: Mapping[str, list[int] | None],
) -> None:
    """Refuse the ``wanted`` topics (``--topic``) that the group knows nothing of (no offset
    in either store, no owner, no subscription: not in ``known``) and that exist neither in
    ``/brokers/topics`` nor on the brokers (``parts_of`` says None or lacks them)."""
    unknown = sorted(t for t in set(wanted) if t not in known and parts_of.get(t) is None)
    if unknown:
        listed = ", ".join(repr(t) for t in unknown)
        raise MigrationUnknownTopicError(
            f"topic{'s' if len(unknown) > 1 else ''} {listed} not found: group {group!r} "
            f"has no offset for {'them' if len(unknown) > 1 else 'it'}, and "
            f"{'they exist' if len(unknown) > 1 else 'it exists'} neither in /brokers/topics "
            "nor on the brokers"
        )


def read_zk_offsets(
    zk: KazooClient, group: str, topics: Iterable[str] | None = None
) -> dict[TopicPartition, int]:
    """Every offset under ``/consumers/G/offsets`` (restricted to ``topics`` when given)."""
    wanted = set(topics) if topics is not None else None
    out: dict[TopicPartition, int] = {}
    for topic in sorted(_children(zk, zp.offsets_dir(group))):
        if wanted is not None and topic not in wanted:
            continue
        parts = [p for name in _children(zk, zp.offsets_topic_dir(group, topic))
                 if (p := zp.parse_id(name)) is not None]
        pending = [(p, zk.get_async(zp.offset_path(group, topic, p))) for p in parts]
        for p, result in pending:
            path = zp.offset_path(group, topic, p)
            try:
                data, _ = result.get()
                offset = zp.decode_offset(data, path)
            except NoNodeError:
                continue
            except ZkDataError as e:
                log.warning("ignoring %s", e)
                continue
            if offset >= 0:
                out[TopicPartition(topic, p)] = offset
    return out


def _read_zk_owners(zk: KazooClient, group: str) -> dict[TopicPartition, str]:
    out: dict[TopicPartition, str] = {}
    for topic in sorted(_children(zk, zp.owners_dir(group))):
        for name in _children(zk, zp.owners_topic_dir(group, topic)):
            p = zp.parse_id(name)
            if p is None:
                continue
            path = zp.owner_path(group, topic, p)
            try:
                data, _ = zk.get(path)
                out[TopicPartition(topic, p)] = zp.decode_owner(data, path)
            except NoNodeError:
                continue
            except ZkDataError as e:
                # An unreadable owner znode is still an owner: it blocks the switch.
                out[TopicPartition(topic, p)] = f"<unreadable: {e}>"
    return out


def _read_zk_members(zk: KazooClient, group: str) -> dict[str, zp.ConsumerRegistration | None]:
    out: dict[str, zp.ConsumerRegistration | None] = {}
    for cid in sorted(_children(zk, zp.ids_dir(group))):
        path = zp.id_path(group, cid)
        try:
            data, _ = zk.get(path)
        except NoNodeError:
            continue
        try:
            out[cid] = zp.ConsumerRegistration.decode(data, path)
        except ZkDataError as e:
            log.warning("member %s: %s", cid, e)
            out[cid] = None  # still a live member
    return out


def _zk_topic_partitions(zk: KazooClient, topic: str) -> list[int] | None:
    path = zp.topic_path(topic)
    try:
        data, _ = zk.get(path)
    except NoNodeError:
        return None
    try:
        return sorted(zp.TopicAssignment.decode(data, path).partitions)
    except ZkDataError as e:
        log.warning("ignoring %s", e)
        return None


def read_kafka_offsets(
    admin: Any, group: str, tps: Iterable[TopicPartition] | None = None
) -> dict[TopicPartition, int]:
    """The group's committed offsets in Kafka (all of them, or those of ``tps``)."""
    from kafka import TopicPartition as KTP

    spec = None if tps is None else [KTP(t, p) for t, p in sorted(set(tps))]
    if spec == []:
        return {}
    result = admin.list_group_offsets({group: spec}).get(group, {})
    return {
        TopicPartition(k.topic, k.partition): int(v.offset)
        for k, v in result.items()
        if v is not None and v.offset is not None and v.offset >= 0
    }


def _modern_group(admin: Any, group: str) -> tuple[str, list[ModernMember]]:
    from kafka.errors import GroupIdNotFoundError

    desc = admin.describe_groups([group]).get(group, {})
    error = desc.get("error")  # kafka-python gives the error as text
    if error and str(error).startswith(f"[Error {GroupIdNotFoundError.errno}] "):
        # Kafka 4 answers so for a group it does not know; Kafka 3.9 says "Dead".
        return "Dead", []
    if error:
        raise MigrationError(f"DescribeGroups for {group!r} failed: {error}")
    members = []
    for m in desc.get("members") or []:
        members.append(ModernMember(
            str(m.get("member_id") or ""), str(m.get("client_id") or ""),
            str(m.get("client_host") or ""), _assigned(m.get("member_assignment")),
        ))
    return str(desc.get("group_state") or "Unknown"), sorted(members, key=lambda m: m.member_id)


def _assigned(assignment: Any) -> list[TopicPartition]:
    """A member's partitions from DescribeGroups' decoded assignment, whatever its shape.

    kafka-python gives a ``ConsumerProtocolAssignment`` (or its dict form); an empty
    assignment (a member between generations, or a broker that leaves it out) gives nothing.
    """
    if not assignment or isinstance(assignment, (str, bytes)):
        return []
    if callable(getattr(assignment, "partitions", None)):
        return sorted(TopicPartition(tp[0], int(tp[1])) for tp in assignment.partitions())
    entries = (assignment.get("assigned_partitions") if isinstance(assignment, dict)
               else getattr(assignment, "assigned_partitions", None)) or []
    out: list[TopicPartition] = []
    for entry in entries:
        if isinstance(entry, dict):
            topic, parts = entry.get("topic"), entry.get("partitions") or []
        else:
            topic, parts = entry[0], entry[1]
        out.extend(TopicPartition(str(topic), int(p)) for p in parts)
    return sorted(out)


LogRange = tuple[dict[TopicPartition, int], dict[TopicPartition, int], str | None]


def broker_log_range(
    admin: Any, bootstrap: str, tps: Sequence[TopicPartition], timeout_ms: int = 15_000,
    kafka: Mapping[str, Any] | None = None,
) -> LogRange:
    """(log starts, log ends, error): ends through the fetcher's ``log_end_offsets`` (the one
    way zkconsumer reads them), starts through ListOffsets(earliest). On failure both maps
    are empty and ``error`` says why."""
    if not tps:
        return {}, {}, None
    from kafka import TopicPartition as KTP
    from kafka.admin import OffsetSpec


    try:
        ends = log_end_offsets(tps, bootstrap_servers=bootstrap.split(","),
                               timeout_ms=timeout_ms, **dict(kafka or {}))
        earliest = admin.list_partition_offsets({KTP(t, p): OffsetSpec.EARLIEST for t, p in tps})
    except Exception as e:  # noqa: BLE001 - reported as unknown log range, with the reason
        log.debug("log range failed", exc_info=True)
        return {}, {}, f"cannot read the log range from the brokers: {e!r}"
    starts = {TopicPartition(k.topic, k.partition): int(v.offset) for k, v in earliest.items()}
    return starts, {TopicPartition(t, p): int(o) for (t, p), o in ends.items()}, None


def _topic_partitions(
    zk: KazooClient, admin: Any, topics: Iterable[str]
) -> dict[str, list[int] | None]:
    """Each topic's partitions from ``/brokers/topics`` or else the brokers' metadata; None
    for a topic that exists in neither (deleted: its offsets are stale)."""
    out: dict[str, list[int] | None] = {}
    for topic in sorted(set(topics)):
        out[topic] = _zk_topic_partitions(zk, topic)
    asked = [t for t, parts in out.items() if parts is None]
    if asked:
        out.update(_broker_topics(admin, asked))  # one metadata request for all
    return out


#: The one metadata error that says a topic does not exist.
_UNKNOWN_TOPIC = 3  # UNKNOWN_TOPIC_OR_PARTITION


def _describe_topics(
    admin: Any, topics: Sequence[str]
) -> tuple[dict[str, list[int] | None], list[str]]:
    """The brokers' answer for ``topics``, asked by name: the partitions of each topic they
    described, None for one that does not exist; and the topics they did not answer for,
    each as ``name (error N)`` (not authorized to describe it, say) or ``name (not in the
    answer)``. Raises what ``describe_topics`` raises (no answer at all)."""
    answered: dict[str, list[int] | None] = {}
    refused: list[str] = []
    for t in admin.describe_topics(list(topics)):
        name = str(t.get("topic") or t.get("name"))
        code = int(t.get("error_code") or 0)
        if code == _UNKNOWN_TOPIC:
            answered[name] = None
        elif code:
            refused.append(f"{name} (error {code})")
        else:
            answered[name] = sorted(int(p["partition_index"] if "partition_index" in p
                                        else p["partition"]) for p in t.get("partitions", []))
    unanswered = [t for t in topics if t not in answered and not any(
        r.startswith(f"{t} (") for r in refused)]
    return answered, refused + [f"{t} (not in the answer)" for t in unanswered]


def _broker_topics(admin: Any, topics: Sequence[str]) -> dict[str, list[int] | None]:
    """The partitions of ``topics`` on the brokers, asked by name; None for a topic that
    does not exist. Any other answer (not authorized to describe it, say: the brokers leave
    such topics out of an all-topics answer) raises: a topic that cannot be seen is not a
    deleted one, and taking it for one would skip its offsets."""
    answered, refused = _describe_topics(admin, topics)
    if refused:
        one = len(refused) == 1
        raise MigrationError(
            f"cannot tell whether {'topic' if one else 'topics'} {', '.join(refused)} "
            f"{'exists' if one else 'exist'}: {'it is' if one else 'they are'} not in "
            f"/brokers/topics and the brokers did not describe {'it' if one else 'them'} (an "
            "authorization the tool lacks?); nothing was decided for "
            f"{'its' if one else 'their'} offsets"
        )
    return answered


def _described_log_range(
    admin: Any, bootstrap: str, tps: Sequence[TopicPartition], timeout_ms: int,
    kafka: Mapping[str, Any] | None,
    log_range: Callable[[Sequence[TopicPartition]], LogRange] | None,
) -> tuple[LogRange, dict[str, list[int] | None]]:
    """The log range of ``tps`` as :func:`broker_log_range` (``log_range`` replaces it), the
    brokers asked first which of their topics and partitions exist; and that answer (see
    :func:`_describe_topics`; a topic they did not answer for is not in it).

    Partitions the brokers do not have (of a topic they lack, or have with fewer partitions:
    still in ``/brokers/topics`` only, say) are not asked: the log end lookup would wait its
    whole timeout for them, and give no range for any partition. Partitions the brokers
    could not be asked about are left out of the maps, with the reason as the error (all of
    them when the brokers cannot describe the topics at all)."""
    topics = sorted({tp.topic for tp in tps})
    if not topics:
        return ({}, {}, None), {}
    try:
        described, doubtful = _describe_topics(admin, topics)
    except Exception as e:  # noqa: BLE001 - an unknown log range, with the reason
        log.debug("describe topics failed", exc_info=True)
        return ({}, {}, f"cannot describe the topics on the brokers: {e!r}"), {}
    ask = sorted(tp for tp in tps if tp.partition in (described.get(tp.topic) or ()))
    if log_range is None:
        starts, ends, error = broker_log_range(admin, bootstrap, ask, timeout_ms, kafka)
    else:
        starts, ends, error = log_range(ask)
    unknown = [tp for tp in ask if tp not in starts or tp not in ends]
    if doubtful:
        error = (f"the brokers did not describe {', '.join(doubtful)}"
                 + (f"; {error}" if error else ""))
    elif unknown and error is None:
        error = f"the brokers gave no log range for {_fmt_tps(unknown)}"
    return (starts, ends, error), described


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
        modern_state, modern_members = _modern_group(admin, group)
        _require_group(zk, group, kafka_all, modern_members)

        names: set[str] = {tp.topic for tp in zk_offsets} | {tp.topic for tp in owners}
        names |= {tp.topic for tp in kafka_all}
        for reg in members.values():
            if reg is not None and not reg.is_wildcard:
                names |= set(reg.subscription)
        for m in modern_members:
            names |= {tp.topic for tp in m.partitions}
        known = set(names)
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
        exists = {**parts_of, **described}  # the brokers' word, where they gave one
        rows = []
        listed: list[TopicPartition] = []  # missing on the brokers, listed in ZooKeeper
        for tp in sorted(tps):
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
        safe, reason, blockers, warnings = verdict(
            group, rows, list(members), owners, modern_members, log_range_error=error,
            listed_in_zookeeper=listed,
        )
        if checks < 1:
            raise MigrationError(f"checks must be >= 1, got {checks}")
        for look in range(2, checks + 1 if safe else 0):
            sleep(check_interval_s)
            live = _live_consumers(zk, admin, group)
            if live:
                safe = False
                reason = (f"a consumer was seen on look {look} of {checks}: "
                          f"{_fmt_live(live)}; run status again once the group has stopped")
                blockers = [reason]
                break
        else:
            if safe and checks > 1:
                reason += f" (no consumer seen on {checks} looks, {check_interval_s:g} s apart)"
        return MigrationStatus(group, rows, sorted(members), owners, modern_state,
                               modern_members, safe, reason, blockers, warnings)
    finally:
        if own_admin:
            admin.close()


# --------------------------------------------------------------------------------------
# migrate copy
# --------------------------------------------------------------------------------------


def _live_consumers(zk: KazooClient, admin: Any, group: str) -> list[str]:
    """Every sign of a live consumer: owner znodes, registered ids, modern members."""
    live = [f"owner {tp.topic}:{tp.partition} = {o}"
            for tp, o in sorted(_read_zk_owners(zk, group).items())]
    live += [f"legacy consumer {cid}" for cid in sorted(_children(zk, zp.ids_dir(group)))]
    _, modern = _modern_group(admin, group)
    live += [f"modern member {m.member_id}" for m in modern]
    return live


def wait_until_idle(
    probe: Callable[[], list[str]],
    *,
    checks: int = 3,
    interval_s: float = 1.0,
    timeout_s: float = 30.0,
    sleep: Callable[[float], None] = time.sleep,
    on_wait: Callable[[list[str], float], None] | None = None,
) -> int:
    """Wait until ``probe()`` finds nothing live on ``checks`` probes in a row, ``interval_s``
    apart; return the number of probes made.

    Several checks, because an owner znode can vanish for an instant during a rebalance
    (released by one member, not yet claimed by the next) and one empty look proves nothing.
    Raises :class:`MigrationGroupActiveError` listing what is still live after ``timeout_s``; stale
    ephemerals of a killed consumer go away when its ZooKeeper session expires, so a
    timeout longer than ``zookeeper.session.timeout.ms`` rides those out. ``on_wait(live,
    seconds_left)`` is told what a probe found live, the first time and whenever that
    changes (not on every probe), so a caller can say what it waits for.
    """
    if checks < 1:
        raise MigrationError(f"checks must be >= 1, got {checks}")
    deadline = time.monotonic() + timeout_s
    idle = probes = 0
    told: list[str] = []
    while True:
        live = probe()
        probes += 1
        idle = 0 if live else idle + 1
        if idle >= checks:
            return probes
        if live and on_wait is not None and sorted(live) != told:
            told = sorted(live)
            on_wait(live, max(0.0, deadline - time.monotonic()))
        if time.monotonic() + interval_s > deadline and live:
            shown = "; ".join(live[:5]) + (f"; +{len(live) - 5} more" if len(live) > 5 else "")
            raise MigrationGroupActiveError(
                f"the group still has live consumers after {timeout_s:g} s ({shown}): stop "
                "them (a killed consumer's znodes go when its session expires) and retry"
            )
        sleep(interval_s)


def plan_copy(
    source: Mapping[TopicPartition, int],
    dest: Mapping[TopicPartition, int],
    tps: Iterable[TopicPartition],
    force: bool,
    missing_topics: Collection[str] = (),
    missing_partitions: Collection[TopicPartition] = (),
    *,
    log_starts: Mapping[TopicPartition, int] | None = None,
    log_ends: Mapping[TopicPartition, int] | None = None,
) -> list[CopyAction]:
    """One action per partition; see :class:`CopyAction`. Values are copied unchanged;
    partitions of ``missing_topics`` (deleted topics) and ``missing_partitions`` (no longer
    in their topics) are never written.

    With ``log_starts`` and ``log_ends``, a partition to write whose source offset is
    outside its log (``migrate status``'s ``below_log_start`` and ``above_log_end``, judged
    on the offset the copy would leave in the destination) becomes ``out_of_range``, or is
    written all the same with ``force``; either way ``out_of_range`` names its class.

    >>> t = TopicPartition("t", 0)
    >>> [a.action for a in plan_copy({t: 12}, {}, [t], False, log_starts={t: 0},
    ...                              log_ends={t: 10})]
    ['out_of_range']
    >>> a, = plan_copy({t: 12}, {}, [t], True, log_starts={t: 0}, log_ends={t: 10})
    >>> a.action, a.out_of_range
    ('copy', 'above_log_end')
    """
    actions = []
    for tp in sorted(set(tps)):
        s, d = source.get(tp), dest.get(tp)
        if tp.topic in missing_topics:
            action = "skip_topic_missing"
        elif tp in missing_partitions:
            action = "skip_partition_missing"
        elif s is None:
            action = "skip_missing"
        elif d is None or d < s:
            action = "copy"
        elif d == s:
            action = "skip_equal"
        else:
            action = "overwrite" if force else "skip_newer"
        a = CopyAction(tp.topic, tp.partition, s, d, action)
        if a.writes and s is not None:
            a.log_start = (log_starts or {}).get(tp)
            a.log_end = (log_ends or {}).get(tp)
            if a.log_start is not None and a.log_start >= 0 and s < a.log_start:
                a.out_of_range = "below_log_start"
            elif a.log_end is not None and a.log_end >= 0 and s > a.log_end:
                a.out_of_range = "above_log_end"
            if a.out_of_range is not None and not force:
                a.action = "out_of_range"
        actions.append(a)
    return actions


class _TxFailed(MigrationError):
    """A ZooKeeper transaction of the copy failed; nothing of it was applied."""


class _AclUnknown(MigrationError):
    """A znode's ACL, needed for one the copy creates, cannot be read in full."""


def _acl_unknown(judge: str, why: str) -> _AclUnknown:
    return _AclUnknown(acl_unreadable(judge, why))


def _new_znode_acl(zk: KazooClient, path: str) -> list[Any] | None:
    """The ACL to create ``path`` with: None (the client's) when the tools' ACL is configured
    (``ZKCONSUMER_ZOOKEEPER_ACL`` becomes kazoo's default_acl, the ACL of every znode a tool
    creates); otherwise the nearest existing ancestor's, because kazoo's fallback is
    world-open and would strip a protected group's offsets of their protection."""
    if zk.default_acl:
        return None
    parent = path.rsplit("/", 1)[0]
    while parent and zk.exists(parent) is None:
        parent = parent.rsplit("/", 1)[0]
    if not parent:
        return None  # a new /consumers tree: nothing to inherit
    acl = full_acl(zk, parent)
    if acl is None:
        raise _acl_unknown(parent, f"create {path}")
    return acl


def _ids_guard(tx: Any, zk: KazooClient, group: str) -> None:
    """Make ``tx`` fail if a consumer registers in ``group`` before it commits: delete and
    re-create ``/consumers/G/ids`` (NotEmpty once a member is in it), or create and delete
    it (NodeExists once it appeared). The re-created znode keeps the ACL it had (or gets
    the tools' ACL when that cannot be read)."""
    ids = zp.ids_dir(group)
    if zk.exists(ids) is not None:
        acl = full_acl(zk, ids)
        if acl is None and not zk.default_acl:
            raise _acl_unknown(ids, f"re-create {ids} (the guard against consumers "
                               "registering during the copy)")
        tx.delete(ids)
        tx.create(ids, b"", acl=acl)
    else:
        group_dir = zp.group_dir(group)
        if zk.exists(group_dir) is None:
            zk.ensure_path(group_dir, acl=_new_znode_acl(zk, group_dir))
        tx.create(ids, b"")
        tx.delete(ids)


def _commit_chunk(
    zk: KazooClient, group: str, chunk: Sequence[tuple[TopicPartition, int]],
    expected: Mapping[TopicPartition, int], acls: dict[str, list[Any] | None],
    what: str = "migrate copy",
) -> None:
    """One transaction: the ids guard, then ``chunk``'s offsets, each conditional on the
    value the plan read (the znode's version now, or its absence)."""
    tx = zk.transaction()
    _ids_guard(tx, zk, group)
    ids = zp.ids_dir(group)
    for tp, off in chunk:
        path = zp.offset_path(group, tp.topic, tp.partition)
        try:
            data, stat = zk.get(path)
        except NoNodeError:
            if tp in expected:
                raise _TxFailed(f"the offset of {tp.topic}:{tp.partition} disappeared since "
                                "the plan") from None
            if tp.topic not in acls:  # read once per topic, and only when creating
                acls[tp.topic] = _new_znode_acl(zk, path)
            tx.create(path, zp.encode_offset(off), acl=acls[tp.topic])
            continue
        current: int | None
        try:
            current = zp.decode_offset(data, path)
        except ZkDataError:
            current = None
        if current is not None and current < 0:
            current = None  # "no offset", as the plan read it (read_zk_offsets skips it)
        if current != expected.get(tp):
            raise _TxFailed(f"the offset of {tp.topic}:{tp.partition} changed since the plan "
                            f"({expected.get(tp)} -> {current})")
        tx.set_data(path, zp.encode_offset(off), version=stat.version)
    results = tx.commit()
    for op, r in zip(tx.operations, results, strict=False):
        if isinstance(r, NoAuthError):

            verb = {"Create": "create", "Create2": "create", "Delete": "delete"}.get(
                type(op).__name__, "write")
            raise acl_refused(zk, verb, op.path, what)
    cause = transaction_cause(tx.operations, results)
    if cause is None:
        if any(isinstance(r, Exception) for r in results):
            raise _TxFailed("the ZooKeeper transaction failed without a cause")
        return
    op, error = cause
    path = zk.unchroot(op.path)  # the ops carry the chroot prefix
    if path == ids and isinstance(error, (NotEmptyError, NodeExistsError)):
        raise MigrationGroupActiveError(f"a consumer registered in group {group!r} during the copy")
    tp_of = {zp.offset_path(group, tp.topic, tp.partition): tp for tp, _ in chunk}
    if path in tp_of and isinstance(error, (BadVersionError, NodeExistsError, NoNodeError)):
        tp = tp_of[path]
        raise _TxFailed(f"the offset of {tp.topic}:{tp.partition} changed since the plan "
                        f"({type(error).__name__})")
    raise _TxFailed(f"the ZooKeeper transaction failed on {path} ({type(error).__name__})")


def _write_zookeeper(
    zk: KazooClient, group: str, offsets: Mapping[TopicPartition, int],
    expected: Mapping[TopicPartition, int],
) -> None:
    """Write ``offsets`` in transactions that fail if anything changed since the plan.

    Existing znodes are set with the version read now and checked against the planned value;
    each transaction also deletes and re-creates ``/consumers/G/ids`` (or creates and
    deletes it), which ZooKeeper refuses when a consumer registered since the idle checks.
    A transaction holds at most :data:`MAX_TRANSACTION_OPS` operations (ZooKeeper refuses
    requests over ~1 MB): a bigger group is written in several, and a failure names how
    many offsets the earlier ones wrote. New znodes get the ACL of the group's (see
    :func:`_new_znode_acl`).
    """
    items = sorted(offsets.items())
    per_tx = max(1, MAX_TRANSACTION_OPS - 2)  # two ops of each go to the ids guard
    acls: dict[str, list[Any] | None] = {}
    done = 0
    try:
        for topic in sorted({tp.topic for tp in offsets}):
            topic_dir = zp.offsets_topic_dir(group, topic)
            if zk.exists(topic_dir) is None:
                zk.ensure_path(topic_dir, acl=_new_znode_acl(zk, topic_dir))
        for i in range(0, len(items), per_tx):
            chunk = items[i:i + per_tx]
            what = "migrate copy" + (f" ({done} of {len(items)} offsets written before)"
                                     if done else "")
            _commit_chunk(zk, group, chunk, expected, acls, what)
            done += len(chunk)
    except MigrationError as e:
        if not done:
            told = "nothing was written"
        else:
            told = (f"{done} of {counted(len(items), 'offset')} were written before (a copy "
                    f"this big is split into transactions of {per_tx} offsets); the rest were "
                    "not")
        hint = {MigrationGroupActiveError: "; stop it and run again", _AclUnknown: ""}.get(
            type(e), "; run again")
        raise type(e)(f"{e}; {told}{hint}") from None


#: OffsetCommit errors meaning the group has members now (a commit outside any generation
#: is accepted only while it is empty).
_GROUP_ACTIVE_ERRORS = frozenset(
    {"UnknownMemberIdError", "IllegalGenerationError", "RebalanceInProgressError"}
)


def write_kafka_offsets(admin: Any, group: str, offsets: Mapping[TopicPartition, int]) -> None:
    """Commit ``offsets`` for ``group`` in Kafka as is (OffsetCommit outside any generation,
    which the broker accepts only while the group has no members).

    The broker answers per partition and commits the ones it accepts: a refusal raises
    :class:`MigrationError` naming what was and was not written, or
    :class:`MigrationGroupActiveError` when the refusal says a member joined (its ``written``: the
    partitions committed all the same).
    """
    from kafka import TopicPartition as KTP
    from kafka.errors import NoError
    from kafka.structs import OffsetAndMetadata

    result = admin.alter_group_offsets(
        group, {KTP(t, p): OffsetAndMetadata(off, "", -1) for (t, p), off in offsets.items()}
    )
    refused = {TopicPartition(k.topic, k.partition): str(getattr(e, "__name__", e))
               for k, e in result.items() if e is not NoError}
    if not refused:
        return
    written = [TopicPartition(k.topic, k.partition) for k, e in result.items()
               if e is NoError]
    told = (f"the other {len(written)} {'was' if len(written) == 1 else 'were'} written "
            f"({_fmt_tps(written)})" if written else "nothing was written")
    active = sorted({e for e in refused.values() if e in _GROUP_ACTIVE_ERRORS})
    if active:
        raise MigrationGroupActiveError(
            f"a modern consumer joined group {group!r} during the copy (Kafka answered "
            f"{', '.join(active)} for {counted(len(refused), 'offset')}); {told}; stop it and "
            "run again", written)
    shown = ", ".join(f"{tp.topic}:{tp.partition} {e}" for tp, e in sorted(refused.items())[:4])
    more = f", +{len(refused) - 4} more" if len(refused) > 4 else ""
    raise MigrationError(
        f"Kafka refused {len(refused)} of {counted(len(result), 'offset')} for group "
        f"{group!r} ({shown}{more}), which {'was' if len(refused) == 1 else 'were'} not "
        f"written; {told}; check that the refused partitions exist on the brokers"
    )


def copy_offsets(
    zk: KazooClient,
    group: str,
    bootstrap: str,
    source: Store,
    dest: Store,
    *,
    topics: Sequence[str] | None = None,
    force: bool = False,
    dry_run: bool = False,
    checks: int = 3,
    check_interval_s: float = 1.0,
    wait_timeout_s: float = 30.0,
    admin: Any = None,
    kafka: Mapping[str, Any] | None = None,
    timeout_ms: int = 15_000,
    log_range: Callable[[Sequence[TopicPartition]], LogRange] | None = None,
    on_wait: Callable[[list[str], float], None] | None = None,
) -> CopyResult:
    """Copy ``group``'s offsets from ``source`` to ``dest`` once no consumer is alive.

    Refuses at once, as ``migrate status`` does, a group that exists in neither protocol
    (:class:`MigrationUnknownGroupError`) and a topic of ``topics`` the group has no offset for that
    exists nowhere (:class:`MigrationUnknownTopicError`). Then waits (see :func:`wait_until_idle`)
    until the group has no owner znode, no registered legacy consumer and no modern member;
    a dry run looks once and reports what it saw instead. A partition is written when the
    destination has no offset or an older one; a newer destination offset is kept unless
    ``force``. Partitions of topics the brokers do not have (deleted; also those
    ``/brokers/topics`` still lists, as ``migrate status``'s ``topic_missing``) are skipped
    (``skip_topic_missing``), and so are partitions the brokers' topics do not have
    (``skip_partition_missing``): their offsets are stale, and Kafka would refuse them. A
    topic the brokers do not answer for (not authorized to describe it, say) is not taken
    for missing: its offsets are to be written, their log range unknown (see below).

    The offsets to write are checked against their partitions' log range (read within
    ``timeout_ms``; ``log_range`` replaces :func:`broker_log_range`, as in
    :func:`migration_status`): an offset below the log start or past the log end, which
    ``migrate status`` calls a blocker, is refused with :class:`OutOfRangeError` and
    nothing is written, and so is a copy whose log range cannot be read; ``force`` copies
    them as they are. A dry run reports both instead (``out_of_range`` actions,
    ``log_range_error``). The written values are verified by reading them back.
    ``kafka``: the brokers' security settings (``zkconsumer.zk.session.command_config``).
    """
    if source not in STORES or dest not in STORES:
        raise MigrationError(f"stores are 'zookeeper' and 'kafka', got {source!r} -> {dest!r}")
    if source == dest:
        raise MigrationError(f"--from and --to are both {source!r}")
    _check_group(group)
    _check_topics(topics or ())
    own_admin = admin is None
    if admin is None:
        admin = modern_admin(bootstrap, kafka=kafka)
    try:
        wanted = set(topics) if topics else None
        # A typo is refused before waiting for anything, as `migrate status` refuses it.
        if wanted is not None or zk.exists(zp.group_dir(group)) is None:
            kafka_before = read_kafka_offsets(admin, group)
            if not kafka_before:
                _require_group(zk, group, kafka_before, _modern_group(admin, group)[1])
            if wanted is not None:
                known = ({tp.topic for tp in read_zk_offsets(zk, group, wanted)}
                         | {tp.topic for tp in kafka_before})
                _require_topics(group, wanted, known,
                                _topic_partitions(zk, admin, wanted - known))

        def probe() -> list[str]:
            return _live_consumers(zk, admin, group)

        live: list[str] = []
        if dry_run:
            live = probe()
            probes = 1
        else:
            probes = wait_until_idle(probe, checks=checks, interval_s=check_interval_s,
                                     timeout_s=wait_timeout_s, on_wait=on_wait)
        zk_offsets = read_zk_offsets(zk, group, wanted)
        kafka_offsets = read_kafka_offsets(admin, group)
        if wanted is not None:
            kafka_offsets = {tp: o for tp, o in kafka_offsets.items() if tp.topic in wanted}
        src, dst = ((zk_offsets, kafka_offsets) if source == "zookeeper"
                    else (kafka_offsets, zk_offsets))
        if not src:
            where = "ZooKeeper" if source == "zookeeper" else "Kafka"
            raise MigrationError(f"group {group!r} has no committed offsets in {where}"
                                 + (f" for {', '.join(sorted(wanted))}" if wanted else ""))
        # Offsets of deleted topics and partitions: nothing to resume, and the broker
        # refuses them. Which exist is the brokers' word where they gave one, in both
        # directions, as `migrate status` takes it: /brokers/topics may lag them (the bridge
        # behind, a rollback while it is down: partitions it does not list yet are live), or
        # still list what they deleted (status calls those topic_missing, partition_missing).
        # ZooKeeper's word stands for a topic the brokers did not answer for; its log range is
        # then unknown.
        parts_of = _topic_partitions(zk, admin, {tp.topic for tp in src})
        (starts, ends, range_error), described = _described_log_range(
            admin, bootstrap, sorted(src), timeout_ms, kafka, log_range)
        exists = {**parts_of, **described}
        missing = {t for t, parts in exists.items() if parts is None}
        gone = {tp for tp in src
                if (parts := exists.get(tp.topic)) is not None and tp.partition not in parts}
        actions = plan_copy(src, dst, src, force, missing, gone, log_starts=starts,
                            log_ends=ends)
        if range_error is not None and all(
                tp in starts and tp in ends
                for tp in (TopicPartition(a.topic, a.partition) for a in actions if a.writes)):
            range_error = None  # only partitions not written lack a range: not needed
        refused = [a for a in actions if a.action == "out_of_range"]
        if refused and not dry_run:
            one = len(refused) == 1
            raise OutOfRangeError(
                f"{counted(len(refused), 'offset')} in {source} {'is' if one else 'are'} "
                f"outside {'its' if one else 'their'} partition's log "
                f"({fmt_out_of_range(refused)}): {OUT_OF_LOG_RESET}; reset "
                f"{'it' if one else 'them'} explicitly first (zkconsumer offsets reset), or "
                f"pass --force to copy {'it as it is' if one else 'them as they are'}; "
                "nothing was written"
            )
        if range_error is not None and not dry_run and not force:
            raise OutOfRangeError(
                f"cannot check that the offsets to copy are in their partitions' log range "
                f"({range_error}): run again once the brokers answer, or pass --force to copy "
                "without the check; nothing was written"
            )
        to_write = {TopicPartition(a.topic, a.partition): a.source_offset
                    for a in actions if a.writes and a.source_offset is not None}
        written = 0
        if to_write and not dry_run:
            try:
                if dest == "kafka":
                    write_kafka_offsets(admin, group, to_write)
                else:
                    _write_zookeeper(zk, group, to_write, {tp: dst[tp] for tp in to_write
                                                           if tp in dst})
            except KeyboardInterrupt as e:
                e.add_note(f"interrupted while writing {counted(len(to_write), 'offset')} to "
                           f"{dest}: some may be written; run the same copy again (it writes "
                           "what differs), then `migrate status`")
                raise
            if dest == "kafka":
                now = read_kafka_offsets(admin, group, to_write)
            else:
                now = read_zk_offsets(zk, group, {tp.topic for tp in to_write})
            wrong = {tp: now.get(tp) for tp, off in to_write.items() if now.get(tp) != off}
            if wrong:
                raise MigrationError(
                    f"read-back after the copy differs on {_fmt_tps(wrong)}: "
                    + ", ".join(f"{tp.topic}:{tp.partition}={v}" for tp, v in
                                sorted(wrong.items())[:4])
                )
            # The last idle check was before the offsets were read: a consumer that started
            # since (and committed to the source, or to the destination before the write
            # overwrote it) would leave a stale copy that looks complete.
            source_now = (read_zk_offsets(zk, group, {tp.topic for tp in to_write})
                          if source == "zookeeper" else read_kafka_offsets(admin, group, to_write))
            moved = {tp: source_now.get(tp) for tp, off in to_write.items()
                     if source_now.get(tp) != off}
            live = probe()
            if moved or live:
                what = ([f"{source} offsets moved during the copy on {_fmt_tps(moved)}"]
                        if moved else []) + ([f"live now: {_fmt_live(live)}"] if live else [])
                raise MigrationError(
                    f"a consumer ran while the copy wrote ({'; '.join(what)}): the "
                    f"{len(to_write)} offsets written to {dest} may be stale; stop every "
                    "consumer of the group and run the copy again")
            written = len(to_write)
        return CopyResult(group, source, dest, dry_run, force, actions, written, live, probes,
                          range_error)
    finally:
        if own_admin:
            admin.close()
