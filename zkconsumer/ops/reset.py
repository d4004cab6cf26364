"""``offsets reset`` (the legacy UpdateOffsetsInZK): a group's offsets of one topic moved to
earliest, latest, an offset, a date-time, or shifted by a number of messages.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Any, cast

from kazoo.client import KazooClient

from zkconsumer._errors import AdminError, UnknownTopicError
from zkconsumer._types import TopicPartition
from zkconsumer.ops.brokers import _BrokerOffsets, _log_end_offsets, _reachable_brokers
from zkconsumer.ops.common import Progress
from zkconsumer.ops.group_reads import _check_legal_name, _read_offsets
from zkconsumer.ops.kafka_offsets import _ask_kafka, _commit_kafka, _kafka_writes, _KafkaPlan
from zkconsumer.ops.offset_files import _import_zookeeper
from zkconsumer.ops.results import OffsetEntry, ResetRow, ResetTarget, resume_offset
from zkconsumer.zk import paths as zp
from zkconsumer.zk.read import topic_partitions
from zkconsumer.zk.transactions import require_no_members

_INT = re.compile(r"[0-9]+")

#: What refuses a reset while the group has registered members: the action and the hint.
_RESET_REFUSAL = ("reset offsets", "; stop it first or pass --force")


def parse_reset_target(text: str) -> ResetTarget:
    """``earliest``, ``latest``, an offset (``42``) or an ISO-8601 date-time.

    A date-time without a zone is local time. AdminError for anything else.
    """
    t = text.strip()
    low = t.lower()
    if low in ("earliest", "smallest"):
        return ResetTarget("earliest", text="earliest")
    if low in ("latest", "largest"):
        return ResetTarget("latest", text="latest")
    if _INT.fullmatch(t):
        return ResetTarget("offset", offset=int(t), text=t)
    try:
        when = datetime.fromisoformat(t)
    except ValueError:
        raise AdminError(
            f"--to {text!r} is not earliest, latest, an offset or an ISO-8601 date-time "
            "(e.g. 2024-05-01T12:00:00Z)"
        ) from None
    try:
        if when.tzinfo is None:
            when = when.astimezone()  # local time, as the modern reset tool reads it
        stamp = int(when.timestamp() * 1000)
    except (ValueError, OverflowError, OSError):  # a year the platform's clock cannot hold
        raise AdminError(f"--to {text!r} is out of range") from None
    if stamp < 0:
        raise AdminError(f"--to {text!r} is before 1970, when Kafka timestamps begin")
    return ResetTarget("datetime", timestamp_ms=stamp, text=t)


def reset_offsets(
    zk: KazooClient,
    group: str,
    topic: str,
    target: ResetTarget,
    bootstrap: str | None = None,
    *,
    force: bool = False,
    dry_run: bool = False,
    progress: Progress | None = None,
    log_end_offsets: Callable[[str, Sequence[TopicPartition]], Mapping[TopicPartition, int]]
    | None = None,
    kafka: Mapping[str, Any] | None = None,
    zookeeper_only: bool = False,
) -> list[ResetRow]:
    """Set a group's committed offsets of every partition of ``topic`` (UpdateOffsetsInZK).

    earliest / latest: the log start / log end; an offset: that offset, clamped to
    [log start, log end] per partition (an offset outside the log would only be reset by
    ``auto.offset.reset`` later); a date-time: the first offset at or after it
    (``offsets_for_times``), or the log end when there is none. Refuses while the group has
    registered members unless ``force``. One transaction; ``dry_run`` writes nothing.
    ``kafka``: the brokers' security settings (:func:`command_config`).

    When the group has committed offsets in Kafka (one OffsetFetch, as ``groups describe``
    asks), where members with ``offsets.storage=kafka`` resume from, the new offsets are
    committed there too, after ZooKeeper's (rows with ``kafka`` set). Refuses then while the
    group has active members in Kafka, whatever ``force``; refuses when Kafka cannot be
    asked, unless ``zookeeper_only`` (ZooKeeper alone, Kafka not asked): as
    :func:`import_offsets`.

    The group need not exist: as the legacy UpdateOffsetsInZK, offsets are seeded for a
    group before its first start (the caller says so: a typo would go unnoticed). Names
    no consumer can use are refused (:func:`legal_name_problem`).
    """
    _check_legal_name(group, "group")
    _check_legal_name(topic, "topic")
    partitions = topic_partitions(zk, topic)
    if partitions is None:
        raise UnknownTopicError(
            f"topic {topic!r} not found in ZooKeeper (no {zp.topic_path(topic)})"
        )
    if not force:
        require_no_members(zk, group, *_RESET_REFUSAL)
    tps = [TopicPartition(topic, p) for p in partitions]
    servers = _reachable_brokers(zk, bootstrap, kafka)
    plan = _KafkaPlan() if zookeeper_only else _ask_kafka(zk, [group], servers, kafka,
                                                          _RESET_REFUSAL[0])
    with plan:
        return _reset_with(zk, group, topic, target, servers, tps, plan, force=force,
                           dry_run=dry_run, progress=progress,
                           log_end_offsets=log_end_offsets, kafka=kafka)


def _reset_with(
    zk: KazooClient,
    group: str,
    topic: str,
    target: ResetTarget,
    servers: str,
    tps: Sequence[TopicPartition],
    plan: _KafkaPlan,
    *,
    force: bool,
    dry_run: bool,
    progress: Progress | None,
    log_end_offsets: Callable[[str, Sequence[TopicPartition]], Mapping[TopicPartition, int]]
    | None,
    kafka: Mapping[str, Any] | None,
) -> list[ResetRow]:
    """:func:`reset_offsets` once the checks passed and Kafka was asked (``plan``)."""
    ends_reader = log_end_offsets or partial(_log_end_offsets, kafka=kafka)
    new: dict[TopicPartition, int] = {}
    clamped: dict[TopicPartition, str] = {}
    try:
        if target.kind == "latest":
            new = dict(ends_reader(servers, tps))
        else:
            with _BrokerOffsets(servers, kafka) as broker:
                if target.kind == "earliest":
                    new = broker.earliest(tps)
                elif target.kind == "offset":
                    assert target.offset is not None
                    starts = broker.earliest(tps)
                    ends = ends_reader(servers, tps)
                    new = {tp: min(max(target.offset, starts[tp]), ends[tp]) for tp in tps}
                    _refuse_a_date_taken_for_an_offset(target, topic, ends)
                    clamped = {tp: "log start" if target.offset < starts[tp] else "log end"
                               for tp in tps if new[tp] != target.offset}
                elif target.kind == "shift":
                    assert target.offset is not None
                    starts = broker.earliest(tps)
                    ends = ends_reader(servers, tps)
                    new, clamped = _shifted(zk, group, tps, target.offset, plan, starts, ends)
                else:
                    assert target.timestamp_ms is not None
                    found = broker.for_time(tps, target.timestamp_ms)
                    missing = [tp for tp in tps if found.get(tp) is None]
                    ends = ends_reader(servers, missing) if missing else {}
                    new = {tp: _first(found.get(tp), ends.get(tp)) for tp in tps}
    except AdminError:
        raise
    except Exception as e:
        raise AdminError(f"cannot read offsets of {topic!r} from the brokers at {servers}: {e}"
                         ) from e
    absent = [tp for tp in tps if new.get(tp) is None]
    if absent:
        raise AdminError(f"the brokers at {servers} gave no offset for "
                         f"{', '.join(f'{t}:{p}' for t, p in absent)}")

    old = {tp: off for tp, off in _read_offsets(zk, group).items() if tp.topic == topic}
    in_kafka = plan.offsets.get(group)
    rows = []
    for i, tp in enumerate(tps, 1):
        rows.append(ResetRow(group, topic, tp.partition, old.get(tp), new[tp], clamped.get(tp),
                             None if in_kafka is None else in_kafka.get(tp),
                             in_kafka is not None))
        if progress is not None:
            progress(i, len(tps))
    if dry_run:
        return rows
    entries = [OffsetEntry(group, r.topic, r.partition, r.offset) for r in rows]
    writes, _ = _kafka_writes(plan, entries)
    _import_zookeeper(zk, entries, [group], force, refusal=_RESET_REFUSAL)
    _commit_kafka(plan, writes, "")
    return rows


def _shifted(
    zk: KazooClient, group: str, tps: Sequence[TopicPartition], by: int, plan: _KafkaPlan,
    starts: Mapping[TopicPartition, int], ends: Mapping[TopicPartition, int],
) -> tuple[dict[TopicPartition, int], dict[TopicPartition, str]]:
    """``--shift-by``: each partition's committed offset (the one a member resumes from:
    :func:`resume_offset` of both stores) moved by ``by``, clamped to the log as Kafka's
    tool clamps it; AdminError naming the partitions with no committed offset to move."""
    old = _read_offsets(zk, group)
    in_kafka = plan.offsets.get(group) or {}
    current = {tp: resume_offset(old.get(tp), in_kafka.get(tp))[0] for tp in tps}
    missing = [tp for tp in tps if current[tp] is None]
    if missing:
        raise AdminError(
            f"cannot shift the offsets of group {group!r}: no committed offset for "
            f"{', '.join(f'{t}:{p}' for t, p in missing)} (set one with --to-earliest, "
            "--to-latest or --to-offset)")
    new: dict[TopicPartition, int] = {}
    clamped: dict[TopicPartition, str] = {}
    for tp in tps:
        wanted = cast(int, current[tp]) + by
        new[tp] = min(max(wanted, starts[tp]), ends[tp])
        if new[tp] != wanted:
            clamped[tp] = "log start" if wanted < starts[tp] else "log end"
    return new, clamped


def _date_meant(n: int) -> str | None:
    """The date-time an offset typed as ``n`` most likely meant (YYYYMMDD, or epoch seconds
    or milliseconds of 2001-2100), ISO-8601; None when it does not look like one."""
    text = str(n)
    if len(text) == 8:
        try:
            day = datetime.strptime(text, "%Y%m%d")
        except ValueError:
            return None
        return day.date().isoformat() if 1970 <= day.year <= 2100 else None
    for digits, per_second in ((10, 1), (13, 1000)):
        if len(text) == digits and 10**9 <= n // per_second < 4102444800:  # to 2100
            when = datetime.fromtimestamp(n / per_second, tz=UTC)
            return when.isoformat(timespec="seconds" if per_second == 1 else "milliseconds")
    return None


def _refuse_a_date_taken_for_an_offset(
    target: ResetTarget, topic: str, ends: Mapping[TopicPartition, int]
) -> None:
    """AdminError when ``--to N`` is past the log end of every partition and N reads as a
    date: clamped, it would silently become ``latest`` (``--to 20240501`` meant May 1st)."""
    assert target.offset is not None
    meant = _date_meant(target.offset)
    if meant is None or not ends or any(target.offset <= end for end in ends.values()):
        return
    raise AdminError(
        f"--to {target.offset} is past the log end of every partition of {topic!r} (at most "
        f"{max(ends.values())}) and reads as the date-time {meant}: for a time write it in "
        f"ISO-8601 (--to {meant}); for the log end, --to latest"
    )


def _first(a: int | None, b: int | None) -> int:
    """``a`` unless it is None, else ``b`` (-1 when both are None: reported as absent)."""
    if a is not None:
        return a
    return b if b is not None else -1
