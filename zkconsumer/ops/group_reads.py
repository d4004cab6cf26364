"""The tools' readers of a group in ZooKeeper, and their name checks.

Members (``/consumers/G/ids``), committed offsets and owners (``/consumers/G/offsets|owners``)
and the topics' partitions (``/brokers/topics``), read so that one znode that does not decode
is said (a warning, or a member or topic set apart) and never hides the rest. Every path comes
from :mod:`zkconsumer.zk.paths`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Literal, TypeVar

from kazoo.client import KazooClient

from zkconsumer._config_keys import legal_id_problem
from zkconsumer._errors import AdminError, UnknownGroupError, ZkDataError
from zkconsumer._filters import filter_from_registration
from zkconsumer._types import TopicPartition
from zkconsumer.ops.common import did_you_mean
from zkconsumer.zk import paths as zp
from zkconsumer.zk.read import children, children_of, get_many, topic_partitions

log = logging.getLogger("zkconsumer.admin")

_T = TypeVar("_T")


def _readable_members(
    members: Mapping[str, zp.ConsumerRegistration],
) -> tuple[dict[str, zp.ConsumerRegistration], dict[str, str]]:
    """``members`` split into those whose subscription can be evaluated and the others
    (consumer id -> why not): one member's wildcard regex that does not translate (a JVM
    member's Java-only syntax, a corrupt znode) must not stop a tool looking at the rest."""
    readable: dict[str, zp.ConsumerRegistration] = {}
    unreadable: dict[str, str] = {}
    for cid, reg in members.items():
        if reg.is_wildcard:
            try:
                for key in reg.subscription:
                    filter_from_registration(reg.pattern, key)
            except ZkDataError as e:
                unreadable[cid] = str(e)
                continue
        readable[cid] = reg
    return readable, unreadable


def name_problem(value: str, what: str) -> str | None:
    """Why ``value`` cannot be a ``what`` ("group" or "topic") name, or None when it can."""
    try:
        if what == "group":
            zp.group_dir(value)
        else:
            zp.topic_path(value)
    except ValueError as e:
        return str(e)
    return None


def _check_name(value: str, what: str) -> str:
    """Validate a group or topic name as a path component; AdminError when unusable."""
    problem = name_problem(value, what)
    if problem is not None:
        raise AdminError(f"bad {what} name: {problem}")
    return value


def legal_name_problem(value: str, what: str) -> str | None:
    """Why no consumer can use ``value`` as a ``what`` ("group" or "topic") name, or None:
    the legacy ConsumerConfig's rule for group.id, Kafka's for topics ([a-zA-Z0-9._-], at most
    249 of them)."""
    problem = legal_id_problem(value)
    if problem is None and what == "topic" and len(value) > 249:
        problem = f"{len(value)} characters, more than the 249 Kafka allows"  # Topic.validate
    return None if problem is None else f"{value!r} is not a legal {what} name: {problem}"


def _check_legal_name(value: str, what: str) -> str:
    """A name a write is about to create: a path component and legal; AdminError if not
    (a group or topic no consumer can use would only hold offsets nobody reads)."""
    _check_name(value, what)
    problem = legal_name_problem(value, what)
    if problem is not None:
        raise AdminError(problem)
    return value


def not_found_message(what: str, value: str, missing: str) -> str:
    """"group 'g' not found in ZooKeeper (no /consumers/g)"; for an illegal name (a typo
    more likely than a group a broken tool made), that it is not a legal name."""
    problem = legal_name_problem(value, what)
    if problem is not None:
        return f"{problem} (and there is no {missing})"
    return f"{what} {value!r} not found in ZooKeeper (no {missing})"


def group_exists(zk: KazooClient, group: str) -> bool:
    _check_name(group, "group")
    return zk.exists(zp.group_dir(group)) is not None


def require_group(zk: KazooClient, group: str) -> None:
    """UnknownGroupError unless ``/consumers/<group>`` exists (under any name: a group a
    broken tool made under an illegal one can still be described and deleted)."""
    if not group_exists(zk, group):
        raise UnknownGroupError(unknown_group_message(zk, group))


def unknown_group_message(zk: KazooClient, group: str) -> str:
    """"group 'g33' not found in ZooKeeper (no /consumers/g33) (did you mean 'g3'?)"."""
    return (not_found_message("group", group, zp.group_dir(group))
            + did_you_mean(group, children(zk, zp.CONSUMERS)))


_require_group = require_group  # the name the ops modules import


def read_members(
    zk: KazooClient, group: str
) -> tuple[dict[str, zp.ConsumerRegistration], dict[str, str]]:
    """Registered members: consumer id -> registration; and apart, those whose ids znode
    does not decode, consumer id -> why (the ZkDataError's text, naming the znode).

    Such a member is registered all the same (``groups list`` counts it, deletes are refused
    while it is there), only its subscription is unknown: the callers treat it as one whose
    wildcard regex cannot be read (:func:`_readable_members`), and say so once."""
    ids = sorted(children(zk, zp.ids_dir(group)))
    data = get_many(zk, [zp.id_path(group, c) for c in ids])
    members: dict[str, zp.ConsumerRegistration] = {}
    undecodable: dict[str, str] = {}
    for cid in ids:
        path = zp.id_path(group, cid)
        raw = data[path]
        if raw is None:
            continue  # left meanwhile
        try:
            members[cid] = zp.ConsumerRegistration.decode(raw, path)
        except ZkDataError as e:
            undecodable[cid] = str(e)
    return members, undecodable


def registered_members(zk: KazooClient, group: str) -> list[str]:
    """The consumer ids registered in ``group`` (its ids znodes, decodable or not), sorted."""
    return sorted(children(zk, zp.ids_dir(group)))


def _member_threads(consumer_id: str, reg: zp.ConsumerRegistration) -> list[str]:
    """The member's thread ids (as the connector numbers them), sorted as strings."""
    if reg.is_wildcard:
        return zp.thread_ids(consumer_id, reg.wildcard_streams or 0)
    threads: set[str] = set()
    for count in reg.subscription.values():
        threads.update(zp.thread_ids(consumer_id, count))
    return sorted(threads)


def _read_partition_values(
    zk: KazooClient, kind: Literal["offsets", "owners"], group: str
) -> dict[TopicPartition, bytes]:
    """Every ``/consumers/G/<kind>/T/P`` znode's payload, keyed by topic-partition."""
    topic_dir = zp.offsets_topic_dir if kind == "offsets" else zp.owners_topic_dir
    node_path = zp.offset_path if kind == "offsets" else zp.owner_path
    topics = sorted(children(zk, zp.offsets_dir(group) if kind == "offsets"
                              else zp.owners_dir(group)))
    pending = [(t, zk.get_children_async(topic_dir(group, t))) for t in topics]
    tps: list[TopicPartition] = []
    for topic, result in pending:
        for p in children_of(zk, topic_dir(group, topic), result):
            partition = zp.parse_id(p)
            if partition is not None:
                tps.append(TopicPartition(topic, partition))
            else:
                log.warning("ignoring %s/%s: not a partition number", topic_dir(group, topic), p)
    paths = {tp: node_path(group, tp.topic, tp.partition) for tp in tps}
    data = get_many(zk, list(paths.values()))
    return {tp: raw for tp, path in sorted(paths.items()) if (raw := data[path]) is not None}


def _read_decoded(
    zk: KazooClient, group: str, kind: Literal["offsets", "owners"],
    decode: Callable[[bytes, str], _T], path_of: Callable[[str, str, int], str],
) -> dict[TopicPartition, _T]:
    """The group's ``kind`` znodes, decoded; one that does not decode is logged and left out."""
    out: dict[TopicPartition, _T] = {}
    for tp, raw in _read_partition_values(zk, kind, group).items():
        try:
            out[tp] = decode(raw, path_of(group, tp.topic, tp.partition))
        except ZkDataError as e:
            log.warning("ignoring %s", e)
    return out


def _read_offsets(zk: KazooClient, group: str) -> dict[TopicPartition, int]:
    return _read_decoded(zk, group, "offsets", zp.decode_offset, zp.offset_path)


def _read_owners(zk: KazooClient, group: str) -> dict[TopicPartition, str]:
    return _read_decoded(zk, group, "owners", zp.decode_owner, zp.owner_path)


def _read_registry(
    zk: KazooClient, topics: Iterable[str]
) -> tuple[dict[str, list[int] | None], dict[str, str]]:
    """Each topic's partitions from ``/brokers/topics/T`` (None: no such znode), and apart
    from those, the topics whose znode does not decode, with why (the ZkDataError's text,
    naming the znode).

    One znode written by a broken tool must not hide the rest from a tool: such a topic's
    partitions are unknown (not missing), and the caller goes on without them. The
    connector ignores such a topic the same way (its members consume none of it)."""
    registry: dict[str, list[int] | None] = {}
    undecodable: dict[str, str] = {}
    for topic in sorted(set(topics)):
        try:
            registry[topic] = topic_partitions(zk, topic)
        except ZkDataError as e:
            undecodable[topic] = str(e)
    return registry, undecodable


def _partitions_unknown(topic: str, why: str) -> str:
    """The start of every warning about a topic :func:`_read_registry` could not decode."""
    return (f"topic {topic}: partitions unknown ({why}); zkconsumer members consume none of "
            f"it until the znode decodes")


def committed_offsets(zk: KazooClient, group: str) -> dict[TopicPartition, int]:
    """The group's committed offsets in ZooKeeper."""
    return _read_offsets(zk, group)


def committed_topics(zk: KazooClient, group: str) -> list[str]:
    """The topics the group has offsets of in ZooKeeper, sorted."""
    return sorted({tp.topic for tp in _read_offsets(zk, group)})


def owners_of(
    zk: KazooClient, group: str, tps: Iterable[TopicPartition]
) -> dict[TopicPartition, str]:
    """The owning thread id of each of ``tps`` that has an owner znode."""
    wanted = set(tps)
    return {tp: owner for tp, owner in _read_owners(zk, group).items() if tp in wanted}


def groups_of_topic(zk: KazooClient, topic: str) -> list[str]:
    """The groups with offsets or owners of ``topic`` in ZooKeeper, sorted."""
    out = []
    for group in sorted(children(zk, zp.CONSUMERS)):
        if (zk.exists(zp.offsets_topic_dir(group, topic)) is not None
                or zk.exists(zp.owners_topic_dir(group, topic)) is not None):
            out.append(group)
    return out


def _consumer_of(thread_id: str) -> str | None:
    try:
        return zp.thread_consumer_id(thread_id)
    except ZkDataError:
        return None
