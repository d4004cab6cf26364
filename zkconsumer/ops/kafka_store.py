"""A group's offsets in Kafka's store, beside ZooKeeper's: what the operator commands and the
migration (:mod:`zkconsumer.migration`) both read and write.

Kafka's committed offsets of a group (OffsetFetch, :func:`read_kafka_offsets`) and its
members (DescribeGroups, :func:`modern_group`), through a ``KafkaAdminClient`` from
:func:`zkconsumer.broker.clients.modern_admin`; the commit of offsets outside any generation
(:func:`write_kafka_offsets`); and the class of one partition across both stores
(:data:`CLASSES`, :func:`classify`), which ``groups describe`` and ``migrate status`` show.
Offsets below zero (Kafka answers -1 for "nothing committed") count as absent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from zkconsumer._errors import MigrationError, MigrationGroupActiveError
from zkconsumer._types import TopicPartition
from zkconsumer.ops.common import counted

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


@dataclass
class ModernMember:
    """A member of the broker-coordinated group (from DescribeGroups)."""

    member_id: str
    client_id: str
    host: str
    partitions: list[TopicPartition]


def fmt_tps(tps: Iterable[TopicPartition], limit: int = 6) -> str:
    items = [f"{tp.topic}:{tp.partition}" for tp in sorted(tps)]
    more = f" (+{len(items) - limit} more)" if len(items) > limit else ""
    return ", ".join(items[:limit]) + more


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



def modern_group(admin: Any, group: str) -> tuple[str, list[ModernMember]]:
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
            f"({fmt_tps(written)})" if written else "nothing was written")
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
