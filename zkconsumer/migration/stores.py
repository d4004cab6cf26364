"""What ``migrate status`` and ``migrate copy`` read: both offset stores, the brokers' view.

The group's offsets, owners and members in ZooKeeper; its committed offsets and members in
Kafka (through a ``KafkaAdminClient`` from :func:`zkconsumer.broker.clients.modern_admin`);
which topics and partitions exist (the brokers' word, asked by name, over
``/brokers/topics``'s) and their log range; and the checks that refuse a group or topic that
exists nowhere. Offsets below zero (Kafka answers -1 for "nothing committed") count as
absent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, Literal

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from zkconsumer._errors import (
    MigrationError,
    MigrationUnknownGroupError,
    MigrationUnknownTopicError,
    ZkDataError,
)
from zkconsumer._types import TopicPartition
from zkconsumer.broker.clients import log_end_offsets
from zkconsumer.ops.kafka_store import ModernMember, fmt_tps, modern_group
from zkconsumer.zk import paths as zp

log = logging.getLogger("zkconsumer.migrate")

Store = Literal["zookeeper", "kafka"]
STORES: tuple[Store, ...] = ("zookeeper", "kafka")


def _fmt_live(live: Sequence[str]) -> str:
    """The first sign of a live consumer, and how many more (``live`` is not empty)."""
    return live[0] + (f" and {len(live) - 1} more" if len(live) > 1 else "")


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
    except Exception as e:  # reported as unknown log range, with the reason
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
    except Exception as e:  # an unknown log range, with the reason
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
        error = f"the brokers gave no log range for {fmt_tps(unknown)}"
    return (starts, ends, error), described


# --------------------------------------------------------------------------------------
# Live consumers of either protocol
# --------------------------------------------------------------------------------------


def _live_consumers(zk: KazooClient, admin: Any, group: str) -> list[str]:
    """Every sign of a live consumer: owner znodes, registered ids, modern members."""
    live = [f"owner {tp.topic}:{tp.partition} = {o}"
            for tp, o in sorted(_read_zk_owners(zk, group).items())]
    live += [f"legacy consumer {cid}" for cid in sorted(_children(zk, zp.ids_dir(group)))]
    _, modern = modern_group(admin, group)
    live += [f"modern member {m.member_id}" for m in modern]
    return live
