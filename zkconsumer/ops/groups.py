"""``groups list``, ``groups describe`` and ``groups delete`` as plain functions.

:func:`describe_group` shows per partition the committed offset a member resumes from (the
larger of ZooKeeper's and Kafka's), the log end, the lag and the owner; :func:`delete_group`
deletes a group's znodes (or one topic's) in one transaction, refused while members are
registered.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError, NoNodeError, NotEmptyError

from zkconsumer._errors import AdminError, UnknownTopicError, ZooKeeperChangedError
from zkconsumer._types import TopicPartition, partition_lag
from zkconsumer.ops import brokers
from zkconsumer.ops.brokers import _log_end_offsets, _reason
from zkconsumer.ops.common import Progress, counted
from zkconsumer.ops.group_reads import (
    _check_name,
    _consumer_of,
    _member_threads,
    _partitions_unknown,
    _read_offsets,
    _read_owners,
    _read_registry,
    _readable_members,
    _require_group,
    legal_name_problem,
    read_members,
)
from zkconsumer.ops.kafka_offsets import _kafka_groups, _KafkaGroups
from zkconsumer.ops.kafka_store import classify
from zkconsumer.ops.results import (
    UNKNOWN_PATTERN,
    DeleteResult,
    GroupDescription,
    GroupSummary,
    MemberInfo,
    PartitionStatus,
    resume_offset,
)
from zkconsumer.zk import paths as zp
from zkconsumer.zk.read import children, children_of, consumers_for_topic
from zkconsumer.zk.session import acl_refused
from zkconsumer.zk.transactions import (
    MAX_TRANSACTION_OPS,
    commit_transaction,
    members_guard,
    require_no_members,
    written_count,
)

log = logging.getLogger("zkconsumer.admin")


def list_groups(zk: KazooClient) -> list[GroupSummary]:
    """Every group under ``/consumers`` with its number of registered members, by name."""
    groups = sorted(children(zk, zp.CONSUMERS))
    pending = [(g, zk.get_children_async(zp.ids_dir(g))) for g in groups]
    return [GroupSummary(group, len(children_of(zk, zp.ids_dir(group), result)))
            for group, result in pending]


def describe_group(
    zk: KazooClient,
    group: str,
    bootstrap: str | None = None,
    *,
    log_end_offsets: Callable[[str, Sequence[TopicPartition]], Mapping[TopicPartition, int]]
    | None = None,
    log_start_offsets: Callable[[str, Sequence[TopicPartition]], Mapping[TopicPartition, int]]
    | None = None,
    kafka: Mapping[str, Any] | None = None,
    time_lags: bool = True,
    message_times: Callable[[Mapping[TopicPartition, int]], Mapping[TopicPartition, float]]
    | None = None,
) -> GroupDescription:
    """Per partition: committed offset, log end, lag, owner; idle threads; members.

    The committed offset is the one a member resumes from: the group's offsets are read from
    ZooKeeper and, when the brokers can be reached, from Kafka (OffsetFetch for the group,
    where ``offsets.storage=kafka`` keeps them), and each partition shows the larger
    (:func:`resume_offset`), with both stores' values and where it came from. The legacy
    ConsumerOffsetChecker also asked Kafka first; it then took ZooKeeper's only where Kafka
    had none, which shows a stale Kafka offset for a group rolled back to ZooKeeper storage.
    When Kafka cannot be asked the offsets are ZooKeeper's and ``kafka_offsets_error`` says
    why; when the brokers cannot be reached at all, ``log_end_error`` says so too.

    The topics shown are those the members subscribe to (wildcards matched against
    ``/brokers/topics``, internal topics excluded as the consumer does), plus every topic
    with a committed offset (in either store) or an owner znode; each with all its
    partitions, except a topic whose ``/brokers/topics`` znode does not decode: the
    partitions the group has offsets for or owns, log end unknown, with a warning naming
    the znode (:func:`_read_registry`). ``kafka``: the brokers' security settings as
    kafka-python arguments (:func:`command_config`). ``log_end_offsets`` (servers,
    partitions) replaces the log end read, ``log_start_offsets`` the log start read
    (ListOffsets(earliest) through the same admin client). Kafka is asked through the client
    ``offsets reset|import|export`` use (:func:`_kafka_groups`).

    A member whose ids znode does not decode counts as a member whose subscription is
    unknown (as one whose wildcard regex cannot be read): listed, with a warning.

    ``time_lags``: each row's lag in seconds too (:func:`~zkconsumer.ops.brokers.time_lags`:
    the timestamp of the message at the offset, one fetch from every partition behind);
    ``message_times`` replaces that read.
    """
    _require_group(zk, group)
    members, undecodable_ids = read_members(zk, group)
    zk_offsets = _read_offsets(zk, group)
    owners = _read_owners(zk, group)
    subscribed, warnings = _subscriptions(zk, members, undecodable_ids)

    # The brokers: reachable at all (with no broker reachable, or registered, the offsets
    # and owners in ZooKeeper are still worth showing)? An admin client that gets no answer
    # within BOOTSTRAP_TIMEOUT_MS counts as none: a log end read would wait as long for
    # nothing.
    servers: str | None = None
    unreachable: str | None = None
    kafka_found: Mapping[TopicPartition, int] = {}
    kafka_error: str | None = None
    client: _KafkaGroups | None = None
    try:
        client = _kafka_groups(zk, bootstrap, kafka)
    except Exception as e:  # noqa: BLE001 - shown as "unknown" with the reason
        unreachable = kafka_error = _reason(e)
    else:
        servers = client.servers
    try:
        if client is not None:
            try:
                kafka_found = client.offsets(group)
            except Exception as e:  # shown as "unknown" with the reason
                kafka_error = _reason(e)
                log.debug("committed offsets in Kafka failed", exc_info=True)
        if kafka_error is not None:
            kafka_error = (f"committed offsets in Kafka unknown, so the offsets shown are "
                           f"ZooKeeper's only (a group committing to Kafka may be further on): "
                           f"{kafka_error}")

        topics = sorted(set(subscribed) | {tp.topic for tp in zk_offsets}
                        | {tp.topic for tp in kafka_found} | {tp.topic for tp in owners})
        tps: set[TopicPartition] = set(zk_offsets) | set(kafka_found) | set(owners)
        known: list[TopicPartition] = []  # partitions the broker registry knows
        registry, undecodable = _read_registry(zk, topics)
        warnings.extend(
            f"{_partitions_unknown(topic, why)}; shown are the partitions the group has "
            "offsets for or owns, log end unknown"
            for topic, why in undecodable.items()
        )
        for topic, partitions in registry.items():
            if partitions is None:
                continue
            for p in partitions:
                tp = TopicPartition(topic, p)
                tps.add(tp)
                known.append(tp)
        committed = [tp for tp in known if tp in zk_offsets or tp in kafka_found]
        ends, starts, error = _log_range(
            known, committed, servers, unreachable, client, warnings,
            log_end_offsets=log_end_offsets, log_start_offsets=log_start_offsets,
            kafka=kafka)
    finally:
        if client is not None:
            client.close()

    rows, bad = _partition_rows(group, sorted(tps), zk_offsets, kafka_found, owners, ends,
                                starts, registry, undecodable)
    if time_lags and servers is not None and error is None:
        ages = brokers.time_lags(zk, {TopicPartition(r.topic, r.partition): (
            r.offset, r.log_end_offset) for r in rows if r.topic is not None
            and r.partition is not None}, servers, kafka, read_times=message_times)
        rows = [replace(r, time_lag=ages.get(TopicPartition(r.topic, r.partition)))
                if r.topic is not None and r.partition is not None else r for r in rows]
    infos, idle = _member_infos(group, members, undecodable_ids, owners)
    return GroupDescription(group, rows, idle, infos, error, warnings, kafka_error,
                            bad, dict(starts))


_OffsetsReader = Callable[[str, Sequence[TopicPartition]], Mapping[TopicPartition, int]]


def _subscriptions(
    zk: KazooClient, members: Mapping[str, zp.ConsumerRegistration],
    undecodable_ids: Mapping[str, str],
) -> tuple[dict[str, list[str]], list[str]]:
    """The members' subscriptions (topic -> thread ids; wildcards matched against
    ``/brokers/topics``, internal topics excluded), and a warning for each member whose
    subscription is unknown (its regex does not translate, or its ids znode does not
    decode)."""
    readable, unreadable = _readable_members(members)
    unreadable.update(undecodable_ids)
    warnings = [
        f"member {cid}: subscription unknown ({why}); only the partitions it owns or has "
        "offsets for are shown for it"
        for cid, why in sorted(unreadable.items())
    ]
    all_topics = children(zk, zp.BROKER_TOPICS) if any(
        r.is_wildcard for r in readable.values()
    ) else []
    return consumers_for_topic(readable, all_topics, True), warnings


def _log_range(
    known: list[TopicPartition], committed: list[TopicPartition], servers: str | None,
    unreachable: str | None, client: _KafkaGroups | None, warnings: list[str], *,
    log_end_offsets: _OffsetsReader | None, log_start_offsets: _OffsetsReader | None,
    kafka: Mapping[str, Any] | None,
) -> tuple[Mapping[TopicPartition, int], Mapping[TopicPartition, int], str | None]:
    """The log ends of the ``known`` partitions and the log starts of the ``committed`` ones,
    and why the log ends are unknown (None: read). A failed log start read is a warning,
    appended to ``warnings``."""
    ends: Mapping[TopicPartition, int] = {}
    starts: Mapping[TopicPartition, int] = {}
    error: str | None = None
    if known and (servers is None or unreachable is not None):
        error = f"log end offsets unknown: {unreachable}"
    elif known and servers is not None:
        reader = log_end_offsets or partial(_log_end_offsets, kafka=kafka)
        try:
            ends = reader(servers, known)
        except Exception as e:  # shown as "unknown" with the reason
            error = f"log end offsets unknown: {e}"
            log.debug("log end offsets failed", exc_info=True)
        # The log starts, for offsets below them (messages deleted by retention): asked
        # only where an offset is committed.
        start_reader = log_start_offsets or (
            client.log_starts if client is not None else None)
        # Not when the log ends failed: the brokers would make it wait as long again.
        if committed and start_reader is not None and error is None:
            try:
                starts = start_reader(servers, committed)
            except Exception as e:  # said in a warning: not checked
                log.debug("log start offsets failed", exc_info=True)
                warnings.append(f"offsets below the log start not checked: log start "
                                f"offsets unknown: {_reason(e)}")
    return ends, starts, error


def _partition_rows(
    group: str, tps: Sequence[TopicPartition], zk_offsets: Mapping[TopicPartition, int],
    kafka_found: Mapping[TopicPartition, int], owners: Mapping[TopicPartition, str],
    ends: Mapping[TopicPartition, int], starts: Mapping[TopicPartition, int],
    registry: Mapping[str, list[int] | None], undecodable: Mapping[str, str],
) -> tuple[list[PartitionStatus], dict[str, list[PartitionStatus]]]:
    """One row per partition of ``tps``, and the rows whose offset no member can resume
    from, by class (:attr:`GroupDescription.bad_offsets`)."""
    rows = []
    bad: dict[str, list[PartitionStatus]] = {}
    for tp in tps:
        z, k = zk_offsets.get(tp), kafka_found.get(tp)
        offset, source = resume_offset(z, k)
        end = ends.get(tp)
        row = PartitionStatus(
            group, tp.topic, tp.partition, offset, end, partition_lag(offset, end),
            owners.get(tp), source, z, k,
        )
        rows.append(row)
        if tp.topic in undecodable:
            continue  # whether its partition exists, and its log end, are unknown
        # As `migrate status` classes it (the larger of both stores, as here).
        partitions = registry.get(tp.topic)
        state = classify(z, k, starts.get(tp), end, topic_exists=partitions is not None,
                         partition_exists=tp.partition in (partitions or ()))
        if offset is not None and state in _BAD_OFFSET_CLASSES:
            bad.setdefault(state, []).append(row)
    return rows, bad


def _member_infos(
    group: str, members: Mapping[str, zp.ConsumerRegistration],
    undecodable_ids: Mapping[str, str], owners: Mapping[TopicPartition, str],
) -> tuple[list[MemberInfo], list[str]]:
    """Each member (by consumer id), and the registered threads that own nothing, sorted."""
    owning = set(owners.values())
    infos = []
    idle: list[str] = []
    for cid, reg in sorted(members.items()):
        threads = _member_threads(cid, reg)
        idle.extend(t for t in threads if t not in owning)
        owned = sum(1 for o in owners.values() if _consumer_of(o) == cid)
        infos.append(MemberInfo(group, cid, reg.pattern, dict(reg.subscription), threads, owned))
    for cid in undecodable_ids:
        # Its threads are unknown but for those owning partitions.
        threads = sorted({o for o in owners.values() if _consumer_of(o) == cid})
        owned = sum(1 for o in owners.values() if _consumer_of(o) == cid)
        infos.append(MemberInfo(group, cid, UNKNOWN_PATTERN, {}, threads, owned))
    infos.sort(key=lambda m: m.consumer_id)
    return infos, sorted(idle)


#: The classes of :func:`zkconsumer.ops.kafka_store.classify` ``groups describe`` warns about.
_BAD_OFFSET_CLASSES = ("below_log_start", "above_log_end", "topic_missing",
                       "partition_missing")


# --------------------------------------------------------------------------------------
# groups delete
# --------------------------------------------------------------------------------------

#: A big delete's progress is reported every this many znodes.
DELETE_PROGRESS_STEP = 100


def _subtree(zk: KazooClient, path: str) -> list[str]:
    """``path`` and all its descendants, deepest first (the order deletes need)."""
    out: list[str] = []

    def walk(p: str) -> None:
        for child in children(zk, p):
            walk(f"{p}/{child}")
        out.append(p)

    if zk.exists(path) is not None:
        walk(path)
    return out


def delete_group(zk: KazooClient, group: str, topic: str | None = None,
                 progress: Progress | None = None) -> DeleteResult:
    """Delete a group's znodes, or only one topic's offsets and owners.

    Refuses while members are registered. As the legacy tool did, deleting the only topic
    a group has offsets for deletes the whole group. One transaction when it fits; on a
    concurrent change nothing is deleted (AdminError). A group too big for one is deleted
    znode by znode, deepest first: a failure part way says (in the exception's note) how
    much was deleted, by topic, and that a rerun finishes it.

    :param progress: called with (znodes deleted, znodes to delete) during a big delete.
    :raises GroupActiveError: members are registered.
    :raises UnknownTopicError: ``topic`` is not one of the group's.
    """
    _require_group(zk, group)
    if topic is not None:
        _check_name(topic, "topic")
    action = f"delete group {group!r}" if topic is None else (
        f"delete topic {topic!r} of group {group!r}"
    )
    for _ in range(3):
        require_no_members(zk, group, action)
        whole = topic is None
        if topic is not None:
            topics = set(children(zk, zp.offsets_dir(group))) | set(
                children(zk, zp.owners_dir(group))
            )
            if topic not in topics:
                illegal = legal_name_problem(topic, "topic")
                raise UnknownTopicError(
                    f"group {group!r} has no offsets or owners for topic {topic!r}"
                    + ("" if illegal is None else f", and {illegal}")
                )
            whole = topics == {topic}
        if whole:
            paths = _subtree(zk, zp.group_dir(group))
            if any(p.startswith(zp.ids_dir(group) + "/") for p in paths):
                continue  # a member registered since the check: it refuses now
        else:
            assert topic is not None
            paths = _subtree(zk, zp.offsets_topic_dir(group, topic)) + _subtree(
                zk, zp.owners_topic_dir(group, topic)
            )
        try:
            if len(paths) + 2 <= MAX_TRANSACTION_OPS:
                tx = zk.transaction()
                if not whole:
                    members_guard(tx, zk, group, action)
                for p in paths:
                    tx.delete(p)
                commit_transaction(tx, action)
            else:
                _delete_one_by_one(zk, group, paths, action, progress)
        except ZooKeeperChangedError:
            continue
        return DeleteResult(group, topic, len(paths), whole)
    raise AdminError(f"{action}: the group kept changing; nothing deleted")


def _delete_one_by_one(zk: KazooClient, group: str, paths: Sequence[str], action: str,
                       progress: Progress | None) -> None:
    """Delete ``paths`` in order (too many for one transaction), the members checked just
    before; a failure part way gets a note of what was deleted and what not."""
    require_no_members(zk, group, action)
    i = 0
    try:
        for i, p in enumerate(paths):
            try:
                zk.delete(p)
            except NoNodeError:
                pass
            except NoAuthError:
                raise acl_refused(zk, "delete", p, action, written_count(i)) from None
            except NotEmptyError:
                # A member registered after the check (it refuses if run again).
                raise AdminError(f"{action}: {zk.unchroot(p)} got a child meanwhile; "
                                 f"{written_count(i)}") from None
            if progress is not None and (i + 1) % DELETE_PROGRESS_STEP == 0:
                progress(i + 1, len(paths))
    except Exception as e:
        if i:
            e.add_note(partial_delete_note(group, paths, i, action))
        raise


def partial_delete_note(group: str, paths: Sequence[str], done: int, action: str) -> str:
    """What a delete of ``paths`` (deepest first) that failed after ``done`` of them left,
    the group's offsets counted by topic, and how to finish."""
    total, deleted = _offsets_by_topic(group, paths), _offsets_by_topic(group, paths[:done])
    gone = sorted(t for t, n in total.items() if deleted.get(t, 0) == n)
    part = sorted(t for t, n in total.items() if 0 < deleted.get(t, 0) < n)
    kept = sorted(t for t in total if t not in deleted)
    said = [f"the offsets of {_topics(gone)}"] if gone else []
    said += [f"{deleted[t]} of topic {t}'s {total[t]} offsets" for t in part]
    text = (f"{action} failed part way: {done} of {counted(len(paths), 'znode')} deleted "
            "(and perhaps the one in flight)")
    if said:
        text += f": {', '.join(said)}"
    if kept:
        text += f"; the offsets of {_topics(kept)} not deleted"
    return text + "; run it again to finish: a rerun deletes what is left"


def _offsets_by_topic(group: str, paths: Sequence[str]) -> dict[str, int]:
    """How many of ``paths`` are offset znodes of the group, per topic."""
    root = zp.offsets_dir(group) + "/"
    counts: dict[str, int] = {}
    for p in paths:
        topic, sep, _ = p.removeprefix(root).partition("/") if p.startswith(root) else ("", "", "")
        if sep:
            counts[topic] = counts.get(topic, 0) + 1
    return counts


def _topics(names: Sequence[str], shown: int = 6) -> str:
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return f"topic{'s' if len(names) != 1 else ''} {', '.join(names[:shown])}{more}"
