"""Operator tools as plain functions: what Kafka's legacy ZooKeeper tools did, made safe.

The original shipped ConsumerOffsetChecker / ``kafka-consumer-groups --zookeeper``,
ExportZkOffsets, ImportZkOffsets, UpdateOffsetsInZK and VerifyConsumerRebalance
(REFERENCE.md section 5). Here each is a function over a connected
:class:`~kazoo.client.KazooClient` (and, where the broker is needed, a bootstrap address)
returning dataclasses; nothing here prints. ``zkconsumer.cli.tools`` turns them into the
``zkconsumer groups|offsets|verify-rebalance|console-consumer`` subcommands.

Rules every function follows:

* Every path comes from :mod:`zkconsumer.zk.paths`.
* A function that writes checks everything first and writes nothing when a check fails;
  the writes of one call go into one ZooKeeper transaction (``multi``) when they fit
  (:data:`MAX_TRANSACTION_OPS`), so a failure half-way leaves nothing behind. Bigger
  writes are split, and their failure says how much was written.
* "Refuse while members are registered" is enforced atomically: the transaction also
  deletes and re-creates ``/consumers/G/ids`` (or creates and deletes it when it does not
  exist), which ZooKeeper refuses (``NotEmpty`` / ``NodeExists``) if a member registered
  after the check; then nothing of the transaction is applied.
* Offsets written for a group are also committed in Kafka when the group has committed
  offsets there (members with ``offsets.storage=kafka`` resume from those): Kafka is asked
  first (one OffsetFetch per group), refusals come before any write (active members in
  Kafka; Kafka not reachable, unless ``--zookeeper-only``), and Kafka is written after
  ZooKeeper; a refusal then says that ZooKeeper was written, and which of Kafka's offsets
  were.
* Failures the user can fix raise :class:`AdminError` (a ``ZkConsumerError``) with a
  one-line message naming the group, topic, file line or address; a znode ACL refusing
  this client (NoAuth) is :class:`AclRefusedError`, naming the path.

ZooKeeper login and ACL come from the environment (:data:`AUTH_ENV`, :data:`ACL_ENV`), never
from options, which anyone on the host can read in ``ps``; they mean what the connector's
``zookeeper.auth`` / ``zookeeper.acl`` mean and are validated by those keys' own checks.
:func:`connect` applies them exactly as the connector does (login, and the ACL of every
znode the tools create).

Lag is computed in one place, :func:`partition_lag`, which ``groups describe`` and the
``ConsumerLag``/``MaxLag`` metrics (:mod:`zkconsumer.consumer.metrics`) both use.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from typing import Any, Literal, TypeVar, cast

from kazoo.client import KazooClient
from kazoo.exceptions import (
    NoAuthError,
    NoNodeError,
    NotEmptyError,
)

from zkconsumer._config import _JAVA_INT_MAX, legal_id_problem
from zkconsumer._errors import (
    AdminError,
    GroupActiveError,
    KafkaGroupActiveError,
    KafkaUnknownError,
    MigrationError,
    OffsetFileError,
    UnknownGroupError,
    UnknownTopicError,
    ZkDataError,
)
from zkconsumer._filters import filter_from_registration
from zkconsumer._types import TopicPartition, partition_lag
from zkconsumer.broker.clients import modern_admin
from zkconsumer.ops.brokers import (
    BOOTSTRAP_TIMEOUT_MS,
    TOOLS_CLIENT_ID,
    _BrokerOffsets,
    _BrokersUnreachableError,
    _log_end_offsets,
    _reachable_brokers,
    _reason,
)
from zkconsumer.ops.common import OUT_OF_LOG_RESET, Progress, counted
from zkconsumer.ops.migrate import (
    _modern_group,
    classify,
    read_kafka_offsets,
    write_kafka_offsets,
)
from zkconsumer.zk import paths as zp
from zkconsumer.zk.read import (
    children,
    children_of,
    consumers_for_topic,
    get_many,
    topic_partitions,
)
from zkconsumer.zk.session import (
    ACL_ENV,
    AUTH_ENV,
    acl_refused,
)
from zkconsumer.zk.transactions import (
    MAX_TRANSACTION_OPS,
    _Changed,
    _commit,
    _members_guard,
    _require_no_members,
    _written,
)

__all__ = [
    "ACL_ENV",
    "AUTH_ENV",
    "MAX_TRANSACTION_OPS",
    "OUT_OF_LOG_RESET",
    "AdminError",
    "DeleteResult",
    "GroupActiveError",
    "GroupDescription",
    "GroupSummary",
    "ImportChange",
    "ImportResult",
    "KafkaGroupActiveError",
    "KafkaImport",
    "KafkaOffsetsLeft",
    "KafkaUnknownError",
    "MemberInfo",
    "OffsetEntry",
    "OffsetFileError",
    "OwnershipCheck",
    "PartitionStatus",
    "ResetRow",
    "ResetTarget",
    "StoreDifference",
    "UNKNOWN_PATTERN",
    "UnknownGroupError",
    "UnknownTopicError",
    "VerifyResult",
    "ZOOKEEPER_ONLY_FLAG",
    "counted",
    "delete_group",
    "describe_group",
    "export_offsets",
    "format_offset_lines",
    "group_exists",
    "import_offsets",
    "kafka_differences",
    "kafka_offsets_left",
    "legal_name_problem",
    "list_groups",
    "name_problem",
    "not_found_message",
    "parse_offset_lines",
    "parse_reset_target",
    "partition_lag",
    "read_members",
    "registered_members",
    "reset_offsets",
    "resume_offset",
    "verify_rebalance",
]

_T = TypeVar("_T")

log = logging.getLogger("zkconsumer.admin")

# --------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------
# Result types
# --------------------------------------------------------------------------------------


class _JsonRow:
    """A result row whose JSON form (``--json``) is its dataclass fields, in order."""

    def to_json(self) -> dict[str, Any]:
        row: dict[str, Any] = asdict(cast(Any, self))  # lists and dicts copied
        return row


@dataclass(frozen=True)
class GroupSummary(_JsonRow):
    """One group of ``groups list``."""

    group: str
    members: int


#: Where a row's ``offset`` came from (:attr:`PartitionStatus.offset_source`).
OffsetSource = Literal["zookeeper", "kafka", "both"]


@dataclass(frozen=True)
class PartitionStatus(_JsonRow):
    """One row of ``groups describe``.

    ``offset`` is the committed next offset a member resumes from (None: nothing
    committed): the larger of ``zookeeper_offset`` and ``kafka_offset``, as a member with
    dual commit reads it (:func:`resume_offset`); ``offset_source`` says which store holds it
    ("both" when they hold the same). ``kafka_offset`` is None when Kafka has none, or when
    Kafka could not be asked (:attr:`GroupDescription.kafka_offsets_error` then says why).
    ``log_end_offset`` is the partition's log end (None: unknown), ``lag`` :func:`partition_lag`
    of ``offset`` and the log end, ``owner`` the owning thread id (None: unowned). A
    registered thread that owns no partition is a row with ``topic`` and ``partition`` None
    and ``owner`` set.
    """

    group: str
    topic: str | None
    partition: int | None
    offset: int | None
    log_end_offset: int | None
    lag: int | None
    owner: str | None
    offset_source: OffsetSource | None = None
    zookeeper_offset: int | None = None
    kafka_offset: int | None = None


@dataclass(frozen=True)
class MemberInfo(_JsonRow):
    """One registered member: its subscription, thread ids and how many partitions it owns."""

    group: str
    consumer_id: str
    pattern: str
    subscription: dict[str, int]
    threads: list[str]
    owned_partitions: int


@dataclass(frozen=True)
class GroupDescription:
    """``groups describe``: partitions, idle threads, members and the total lag."""

    group: str
    partitions: list[PartitionStatus]
    idle_threads: list[str]
    members: list[MemberInfo]
    log_end_error: str | None = None
    """Why log end offsets are unknown (the brokers could not be reached), else None."""
    warnings: list[str] = field(default_factory=list)
    """What else the description could not tell (a member's unreadable subscription)."""
    kafka_offsets_error: str | None = None
    """Why the group's committed offsets in Kafka are unknown (the brokers could not be
    reached, OffsetFetch failed), so that the offsets are ZooKeeper's alone; else None."""
    bad_offsets: dict[str, list[PartitionStatus]] = field(default_factory=dict)
    """Partitions whose committed offset no member can resume from, by class as ``migrate
    status`` names them (:func:`zkconsumer.ops.migrate.classify`): ``below_log_start``
    (messages deleted by retention), ``above_log_end``, ``topic_missing`` (not in
    ``/brokers/topics``), ``partition_missing`` (the topic has fewer partitions). See
    :meth:`bad_offsets_warnings`."""
    log_starts: dict[TopicPartition, int] = field(default_factory=dict)
    """The log start of each partition with a committed offset, where the brokers told it
    (not in the rows' JSON form, which stays as it was)."""

    @property
    def offsets_in_kafka(self) -> bool:
        """Whether an offset shown is (also) Kafka's: the group commits to Kafka."""
        return any(p.offset_source in ("kafka", "both") for p in self.partitions)

    def offsets_note(self, limit: int = 3) -> str | None:
        """What to know when ZooKeeper and Kafka hold different offsets for a partition (the
        one shown is the larger, which only a member with dual commit is sure to resume
        from), else None."""
        differ = [p for p in self.partitions if p.offset_source in ("kafka", "zookeeper")
                  and p.zookeeper_offset is not None and p.kafka_offset is not None]
        if not differ:
            return None
        shown = ", ".join(f"{p.topic}:{p.partition} zookeeper {p.zookeeper_offset} kafka "
                          f"{p.kafka_offset}" for p in differ[:limit])
        if len(differ) > limit:
            shown += ", ..."
        n = len(differ)
        return (f"ZooKeeper and Kafka hold different offsets for {n} partition"
                f"{'s' if n != 1 else ''} ({shown}): the larger is shown, where a member with "
                "dual commit resumes; a member with offsets.storage=zookeeper resumes from "
                "ZooKeeper's, one with offsets.storage=kafka and dual.commit.enabled=false "
                "from Kafka's (--json has both)")

    def bad_offsets_warnings(self, limit: int = 3) -> list[str]:
        """What to know about :attr:`bad_offsets`, one line per class naming up to ``limit``
        partitions: an offset below the log start counts deleted messages in its lag, one
        past the log end shows lag 0, yet a member fetching at either resets it; the
        offsets of a topic or partition that does not exist are stale."""
        out = []
        below = self.bad_offsets.get("below_log_start", [])
        if below:
            starts = self.log_starts
            out.append(
                f"offsets below the log start on {_partitions(below, limit, starts=starts)}: "
                "the messages there were deleted (retention) and the lag counts them, but "
                f"{OUT_OF_LOG_RESET} (smallest: to the log start; largest: to the log end)")
        past = self.bad_offsets.get("above_log_end", [])
        if past:
            out.append(
                f"offsets past the log end on {_partitions(past, limit, log_end=True)}: lag "
                f"shows 0, but {OUT_OF_LOG_RESET} (smallest: to the log start; largest: to the "
                "log end)")
        for cls, what, again in (
                ("topic_missing", "topics not in /brokers/topics", "topic"),
                ("partition_missing", "partitions their topics do not have", "partition")):
            rows = self.bad_offsets.get(cls, [])
            if rows:
                out.append(
                    f"offsets of {what} on {_partitions(rows, limit)}: nothing to consume; "
                    f"should the {again} be created again, the members resume from these "
                    "offsets (reset by auto.offset.reset where past its log end)")
        return out

    @property
    def total_lag(self) -> int:
        """The sum of the known per-partition lags (see :attr:`unknown_lags`)."""
        return sum(p.lag for p in self.partitions if p.lag is not None)

    @property
    def unknown_lags(self) -> int:
        """Partitions whose lag is unknown (no committed offset, or no log end): while any
        is, :attr:`total_lag` is only a lower bound."""
        return sum(1 for p in self.partitions if p.lag is None)

    def total_lag_text(self) -> str:
        """The total lag for people: "3", or why it is unknown or only partly known."""
        unknown, n = self.unknown_lags, len(self.partitions)
        if not unknown:
            return str(self.total_lag)
        if unknown == n:
            return "unknown"
        return f"at least {self.total_lag} ({unknown} of {n} partitions unknown)"

    def rows(self) -> list[PartitionStatus]:
        """Partition rows, then one row per idle thread (topic and partition None)."""
        idle = [
            PartitionStatus(self.group, None, None, None, None, None, thread)
            for thread in self.idle_threads
        ]
        return [*self.partitions, *idle]


def _partitions(rows: Sequence[PartitionStatus], limit: int, log_end: bool = False,
                starts: Mapping[TopicPartition, int] | None = None) -> str:
    """"2 partitions (t:0 offset 7, t:1 offset 9)", up to ``limit`` named; ``log_end``:
    with each log end; ``starts``: with each log start found there."""

    def start(r: PartitionStatus) -> str:
        if starts is None or r.topic is None or r.partition is None:
            return ""
        found = starts.get(TopicPartition(r.topic, r.partition))
        return "" if found is None else f" log start {found}"

    shown = ", ".join(
        f"{r.topic}:{r.partition} offset {r.offset}" + start(r)
        + (f" log end {r.log_end_offset}" if log_end else "") for r in rows[:limit])
    more = f" and {len(rows) - limit} more" if len(rows) > limit else ""
    return f"{len(rows)} partition{'s' if len(rows) != 1 else ''} ({shown}{more})"


@dataclass(frozen=True)
class OffsetEntry(_JsonRow):
    """One committed offset: ``/consumers/<group>/offsets/<topic>/<partition>:<offset>``."""

    group: str
    topic: str
    partition: int
    offset: int

    @property
    def path(self) -> str:
        return zp.offset_path(self.group, self.topic, self.partition)

    @property
    def line(self) -> str:
        """The ExportZkOffsets / ImportZkOffsets line (without the newline)."""
        return f"{self.path}:{self.offset}"


@dataclass(frozen=True)
class ImportChange(_JsonRow):
    """One offset of ``offsets import`` as planned: ZooKeeper's offset before (None: no
    znode, or one that does not decode) and ``action``: create, update or unchanged."""

    group: str
    topic: str
    partition: int
    offset: int
    old_offset: int | None
    action: Literal["create", "update", "unchanged"]


@dataclass(frozen=True)
class ImportResult:
    """What ``offsets import`` wrote."""

    entries: list[OffsetEntry]
    created: int
    updated: int
    unchanged: int
    transactions: int
    kafka: list[KafkaImport] = field(default_factory=list)
    """The groups with offsets in Kafka, whose offsets were (or would be) committed there
    too; the counts above are ZooKeeper's."""
    changes: list[ImportChange] = field(default_factory=list)
    """Every entry's plan (ZooKeeper's), in the order of ``entries``."""
    topic_missing: list[OffsetEntry] = field(default_factory=list)
    """Entries of topics not in ``/brokers/topics`` (imported all the same)."""
    partition_missing: list[OffsetEntry] = field(default_factory=list)
    """Entries of partitions their topic does not have (imported all the same)."""
    above_log_end: list[tuple[OffsetEntry, int]] = field(default_factory=list)
    """Entries past their partition's log end, with the log end (imported all the same)."""
    log_end_error: str | None = None
    """Why the log ends could not be read (``above_log_end`` then unchecked), else None."""

    @property
    def groups(self) -> list[str]:
        return sorted({e.group for e in self.entries})


@dataclass(frozen=True)
class DeleteResult:
    """What ``groups delete`` removed."""

    group: str
    topic: str | None
    deleted_znodes: int
    group_deleted: bool


@dataclass(frozen=True)
class ResetTarget:
    """Where ``offsets reset`` moves a group: earliest, latest, an offset or a time."""

    kind: Literal["earliest", "latest", "offset", "datetime", "shift"]
    offset: int | None = None
    timestamp_ms: int | None = None
    text: str = ""

    def __str__(self) -> str:
        return self.text or self.kind


@dataclass(frozen=True)
class ResetRow(_JsonRow):
    """One partition of ``offsets reset``: the committed offset before and after.

    ``old_offset`` is ZooKeeper's. ``kafka``: the group has offsets in Kafka, so ``offset``
    is written there too; ``old_kafka_offset`` is Kafka's before (None: none). The JSON
    form has ``old_kafka_offset`` only then: for a group without offsets in Kafka it is
    what it was. ``clamped``: "log start" or "log end" when a requested offset was outside
    the partition's log and ``offset`` is that bound instead (not in the JSON form, which
    the CLI keeps as it was; it prints a note).
    """

    group: str
    topic: str
    partition: int
    old_offset: int | None
    offset: int
    clamped: str | None = field(default=None, compare=False)
    old_kafka_offset: int | None = None
    kafka: bool = False

    def to_json(self) -> dict[str, Any]:
        row = super().to_json()
        del row["clamped"], row["kafka"]
        if not self.kafka:
            del row["old_kafka_offset"]
        return row


@dataclass(frozen=True)
class OwnershipCheck:
    """One partition checked by ``verify-rebalance``; ``problem`` is None when fine."""

    topic: str
    partition: int
    owner: str | None
    problem: str | None

    @property
    def ok(self) -> bool:
        return self.problem is None

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "owner": self.owner,
            "ok": self.ok,
            "problem": self.problem,
        }


@dataclass(frozen=True)
class VerifyResult:
    """``verify-rebalance``: ``ok`` and the reason, plus every partition checked."""

    group: str
    ok: bool
    reason: str
    checks: list[OwnershipCheck] = field(default_factory=list)


# --------------------------------------------------------------------------------------
# Lag: the one computation shared by `groups describe` and the metrics
# --------------------------------------------------------------------------------------


def resume_offset(
    zookeeper: int | None, kafka: int | None
) -> tuple[int | None, OffsetSource | None]:
    """The committed offset a member resumes from, given each store's, and where it is.

    The larger of the two, as the consumer reads them with dual commit
    (:class:`zkconsumer.consumer.offsets.DualOffsetStore`); with one store only, what it holds. A
    negative offset ("none" in the legacy stores) counts as none.

    >>> resume_offset(3, None), resume_offset(3, 5), resume_offset(4, 4), resume_offset(None, -1)
    ((3, 'zookeeper'), (5, 'kafka'), (4, 'both'), (None, None))
    """
    z = zookeeper if zookeeper is not None and zookeeper >= 0 else None
    k = kafka if kafka is not None and kafka >= 0 else None
    if z is None and k is None:
        return None, None
    if k is None or (z is not None and z > k):
        return z, "zookeeper"
    if z is None or k > z:
        return k, "kafka"
    return z, "both"


# --------------------------------------------------------------------------------------
# Connecting; small readers
# --------------------------------------------------------------------------------------

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


def _require_group(zk: KazooClient, group: str) -> None:
    """UnknownGroupError unless ``/consumers/<group>`` exists (under any name: a group a
    broken tool made under an illegal one can still be described and deleted)."""
    if not group_exists(zk, group):
        raise UnknownGroupError(not_found_message("group", group, zp.group_dir(group)))


def list_groups(zk: KazooClient) -> list[GroupSummary]:
    """Every group under ``/consumers`` with its number of registered members, by name."""
    groups = sorted(children(zk, zp.CONSUMERS))
    pending = [(g, zk.get_children_async(zp.ids_dir(g))) for g in groups]
    return [GroupSummary(group, len(children_of(zk, zp.ids_dir(group), result)))
            for group, result in pending]


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


# --------------------------------------------------------------------------------------
# The group's offsets in Kafka, for the commands that write or export offsets
# --------------------------------------------------------------------------------------

#: The flag of ``offsets reset|import|export`` that leaves Kafka alone.
ZOOKEEPER_ONLY_FLAG = "--zookeeper-only"
#: How a refusal for want of Kafka's answer ends.
_ZOOKEEPER_ONLY_HINT = f"{ZOOKEEPER_ONLY_FLAG} writes ZooKeeper's alone"


class _KafkaGroups:
    """One admin client asking Kafka about groups and committing their offsets, through
    :mod:`zkconsumer.ops.migrate`'s helpers (kafka-python's public API: OffsetFetch,
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
        ``migrate status`` reads them (:func:`zkconsumer.ops.migrate.broker_log_range`).
        ``servers``: this client's, taken for the signature of the readers it stands in
        for."""
        from kafka import TopicPartition as KTP
        from kafka.admin import OffsetSpec

        if not tps:
            return {}
        found = self._admin.list_partition_offsets(
            {KTP(t, p): OffsetSpec.EARLIEST for t, p in tps})
        return {TopicPartition(k.topic, k.partition): int(v.offset) for k, v in found.items()}

    def commit(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit ``offsets`` for ``group`` (raises as ``write_kafka_offsets`` does)."""

        write_kafka_offsets(self._admin, group, offsets)

    def close(self) -> None:
        self._admin.close()


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
            except Exception as e:  # noqa: BLE001 - refused, with the reason
                log.debug("committed offsets in Kafka failed", exc_info=True)
                raise _kafka_unknown(action, [group], _reason(e)) from e
            if found:
                plan.offsets[group] = found
        for group in plan.offsets:
            try:
                members = client.members(group)
            except Exception as e:  # noqa: BLE001 - refused, with the reason
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


@dataclass(frozen=True)
class KafkaImport:
    """The offsets of one group ``offsets import`` also commits (or would) in Kafka, where
    the group has offsets: counts as :class:`ImportResult`'s; ``skipped``: offsets of
    partitions the broker registry does not have (a deleted topic), which Kafka refuses, or
    of a topic whose registry znode does not decode."""

    group: str
    created: int
    updated: int
    unchanged: int
    skipped: int = 0


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


@dataclass(frozen=True)
class StoreDifference:
    """A partition whose offset in Kafka is not the one in ZooKeeper (None: none there)."""

    group: str
    topic: str
    partition: int
    zookeeper_offset: int | None
    kafka_offset: int


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


# --------------------------------------------------------------------------------------
# groups describe
# --------------------------------------------------------------------------------------


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
    """
    _require_group(zk, group)
    members, undecodable_ids = read_members(zk, group)
    zk_offsets = _read_offsets(zk, group)
    owners = _read_owners(zk, group)
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
    subscribed = consumers_for_topic(readable, all_topics, True)

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
            except Exception as e:  # noqa: BLE001 - shown as "unknown" with the reason
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

        ends: Mapping[TopicPartition, int] = {}
        starts: Mapping[TopicPartition, int] = {}
        error: str | None = None
        if known and (servers is None or unreachable is not None):
            error = f"log end offsets unknown: {unreachable}"
        elif known and servers is not None:
            reader = log_end_offsets or partial(_log_end_offsets, kafka=kafka)
            try:
                ends = reader(servers, known)
            except Exception as e:  # noqa: BLE001 - shown as "unknown" with the reason
                error = f"log end offsets unknown: {e}"
                log.debug("log end offsets failed", exc_info=True)
            # The log starts, for offsets below them (messages deleted by retention): asked
            # only where an offset is committed.
            committed = [tp for tp in known if tp in zk_offsets or tp in kafka_found]
            start_reader = log_start_offsets or (
                client.log_starts if client is not None else None)
            # Not when the log ends failed: the brokers would make it wait as long again.
            if committed and start_reader is not None and error is None:
                try:
                    starts = start_reader(servers, committed)
                except Exception as e:  # noqa: BLE001 - said in a warning: not checked
                    log.debug("log start offsets failed", exc_info=True)
                    warnings.append(f"offsets below the log start not checked: log start "
                                    f"offsets unknown: {_reason(e)}")
    finally:
        if client is not None:
            client.close()


    rows = []
    bad: dict[str, list[PartitionStatus]] = {}
    for tp in sorted(tps):
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
    return GroupDescription(group, rows, sorted(idle), infos, error, warnings, kafka_error,
                            bad, dict(starts))


#: The pattern :class:`MemberInfo` shows for a member whose ids znode does not decode.
UNKNOWN_PATTERN = "unknown"


#: The classes of :func:`zkconsumer.ops.migrate.classify` ``groups describe`` warns about.
_BAD_OFFSET_CLASSES = ("below_log_start", "above_log_end", "topic_missing",
                       "partition_missing")


def _consumer_of(thread_id: str) -> str | None:
    try:
        return zp.thread_consumer_id(thread_id)
    except ZkDataError:
        return None


# --------------------------------------------------------------------------------------
# groups delete
# --------------------------------------------------------------------------------------


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


def delete_group(zk: KazooClient, group: str, topic: str | None = None) -> DeleteResult:
    """Delete a group's znodes, or only one topic's offsets and owners.

    Refuses while members are registered. As the legacy tool did, deleting the only topic
    a group has offsets for deletes the whole group. One transaction; on a concurrent
    change nothing is deleted (AdminError).
    """
    _require_group(zk, group)
    if topic is not None:
        _check_name(topic, "topic")
    action = f"delete group {group!r}" if topic is None else (
        f"delete topic {topic!r} of group {group!r}"
    )
    for _ in range(3):
        _require_no_members(zk, group, action)
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
                    _members_guard(tx, zk, group, action)
                for p in paths:
                    tx.delete(p)
                _commit(tx, action)
            else:
                # Too big for one multi: delete in order, members checked just before.
                _require_no_members(zk, group, action)
                for i, p in enumerate(paths):
                    try:
                        zk.delete(p)
                    except NoNodeError:
                        pass
                    except NoAuthError:
                        raise acl_refused(zk, "delete", p, action, _written(i)) from None
                    except NotEmptyError:
                        # A member registered after the check (it refuses if run again).
                        raise AdminError(f"{action}: {zk.unchroot(p)} got a child meanwhile; "
                                         f"{_written(i)}") from None
        except _Changed:
            continue
        return DeleteResult(group, topic, len(paths), whole)
    raise AdminError(f"{action}: the group kept changing; nothing deleted")


@dataclass(frozen=True)
class KafkaOffsetsLeft:
    """What Kafka holds for a group whose znodes ``groups delete`` removed (all its topics,
    or ``topic``): a member with ``offsets.storage=kafka`` (dual commit or not) resumes from
    those, not from ``auto.offset.reset``. Never deleted by the tools: after a migration the
    modern group lives there under the same id. ``error``: why Kafka could not be asked."""

    group: str
    topic: str | None
    partitions: list[TopicPartition]
    servers: str | None = None
    error: str | None = None

    def warning(self, command_config: str | None = None) -> str | None:
        """What to tell the user (None: nothing in Kafka): how many partitions, what a
        member resumes from, and Kafka's own tool's command that deletes them."""
        of = "" if self.topic is None else f" of topic {self.topic}"
        if self.error is not None:
            return (f"not checked whether Kafka holds committed offsets of group "
                    f"{self.group}{of} (a member with offsets.storage=kafka or dual commit "
                    f"resumes from those): {self.error}")
        if not self.partitions:
            return None
        config = f" --command-config {command_config}" if command_config else ""
        what = (f"--delete --group {self.group}" if self.topic is None
                else f"--delete-offsets --group {self.group} --topic {self.topic}")
        return (f"Kafka still holds committed offsets of group {self.group}{of} for "
                f"{counted(len(self.partitions), 'partition')}: a member with "
                "offsets.storage=kafka or dual commit resumes from them, not from "
                "auto.offset.reset; to delete them, once no modern consumer uses the group: "
                f"kafka-consumer-groups.sh --bootstrap-server {self.servers}{config} {what}")


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
        except Exception as e:  # noqa: BLE001 - said in the warning: not checked
            log.debug("committed offsets in Kafka failed", exc_info=True)
            return KafkaOffsetsLeft(group, topic, [], client.servers, _reason(e))
    tps = sorted(tp for tp in found if topic is None or tp.topic == topic)
    return KafkaOffsetsLeft(group, topic, tps, client.servers)


# --------------------------------------------------------------------------------------
# offsets export / import
# --------------------------------------------------------------------------------------


def export_offsets(
    zk: KazooClient, groups: Sequence[str] | None = None, progress: Progress | None = None
) -> list[OffsetEntry]:
    """Every committed offset of ``groups`` (all groups when None), sorted.

    Unknown groups raise UnknownGroupError before anything is read.
    """
    if groups:
        for g in groups:
            _require_group(zk, g)
        selected = sorted(set(groups))
    else:
        selected = sorted(children(zk, zp.CONSUMERS))
    out: list[OffsetEntry] = []
    for i, group in enumerate(selected, 1):
        for tp, offset in _read_offsets(zk, group).items():
            out.append(OffsetEntry(group, tp.topic, tp.partition, offset))
        if progress is not None:
            progress(i, len(selected))
    return out


def format_offset_lines(entries: Iterable[OffsetEntry]) -> str:
    """The legacy export file: one ``/consumers/G/offsets/T/P:offset`` line per entry."""
    return "".join(f"{e.line}\n" for e in entries)


def parse_offset_lines(lines: Iterable[str], source: str = "input") -> list[OffsetEntry]:
    """Parse and validate a whole offsets file; raise OffsetFileError listing every bad line.

    Blank lines are skipped. The same path given twice with different offsets is an
    error (naming both lines); given twice with the same offset, it counts once.
    """
    problems: list[tuple[int, str]] = []
    checked = _EntryChecks()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            problem = _offset_text_problem(line.strip().rpartition(":")[2])
            if problem is not None:
                problems.append((n, problem))
                continue
            group, topic, partition, offset = zp.parse_offset_line(line)
            zp.offset_path(group, topic, partition)
        except ValueError:
            problems.append((n, f"not /consumers/<group>/offsets/<topic>/<partition>:<offset>: "
                                f"{line.strip()[:120]!r}"))
            continue
        problem = checked.add(n, OffsetEntry(group, topic, partition, offset))
        if problem is not None:
            problems.append((n, problem))
    if problems:
        raise OffsetFileError(source, problems)
    return checked.entries


def parse_offset_json(text: str, source: str = "input") -> list[OffsetEntry]:
    """Parse and validate what ``offsets export --json`` writes: a JSON list of objects
    with ``group``, ``topic``, ``partition`` and ``offset`` (other fields are ignored).
    OffsetFileError lists every bad entry by its number, from 1; the same checks as the
    lines get."""
    try:
        items = json.loads(text)
    except json.JSONDecodeError as e:
        raise OffsetFileError(source, [(e.lineno, f"not JSON: {e.msg}")]) from None
    if not isinstance(items, list):
        raise OffsetFileError(source, [(1, "not a JSON list of offsets (as `offsets export "
                                           "--json` writes)")])
    problems: list[tuple[int, str]] = []
    checked = _EntryChecks("entry")
    for n, item in enumerate(items, 1):
        entry, problem = _json_entry(item)
        if entry is not None:
            problem = checked.add(n, entry)
        if problem is not None:
            problems.append((n, problem))
    if problems:
        raise OffsetFileError(source, problems, where="entry")
    return checked.entries


def _json_entry(item: object) -> tuple[OffsetEntry | None, str | None]:
    fields = ("group", "topic", "partition", "offset")
    if not isinstance(item, dict) or any(f not in item for f in fields):
        return None, f"not an object with {', '.join(fields)}: {json.dumps(item)[:120]}"
    group, topic, partition, offset = (item[f] for f in fields)
    if not isinstance(group, str) or not isinstance(topic, str):
        return None, "group and topic must be strings"
    if not isinstance(partition, int) or isinstance(partition, bool) or not (
            0 <= partition <= _JAVA_INT_MAX):
        return None, f"partition must be an integer from 0 to {_JAVA_INT_MAX}, got {partition!r}"
    if not isinstance(offset, int) or isinstance(offset, bool):
        return None, f"offset must be an integer, got {offset!r}"
    problem = _offset_problem(offset)
    if problem is not None:
        return None, problem
    try:
        zp.offset_path(group, topic, partition)
    except ValueError as e:
        return None, str(e)
    return OffsetEntry(group, topic, partition, offset), None


class _EntryChecks:
    """The checks every parsed entry gets, whatever the format: legal names, and no path
    set twice to different offsets. Used by one parse call; no lock needed."""

    def __init__(self, where: str = "line") -> None:
        self._where = where
        self.entries: list[OffsetEntry] = []
        self._seen: dict[str, tuple[int, int]] = {}

    def add(self, n: int, entry: OffsetEntry) -> str | None:
        """Keep ``entry`` (line or entry ``n``), or say what is wrong with it."""
        illegal = (legal_name_problem(entry.group, "group")
                   or legal_name_problem(entry.topic, "topic"))
        if illegal is not None:  # offsets no consumer could ever read
            return illegal
        first = self._seen.get(entry.path)
        if first is not None:
            if first[1] != entry.offset:
                return (f"{entry.path} set again ({self._where} {first[0]} sets {first[1]}, "
                        f"this {self._where} {entry.offset})")
            return None
        self._seen[entry.path] = (n, entry.offset)
        self.entries.append(entry)
        return None


_SIGNED_INT = re.compile(r"\s*[+-]?[0-9]+\s*", re.ASCII)
_INT64_MAX = 2**63 - 1


def _offset_text_problem(text: str) -> str | None:
    """What is wrong with an offset written as decimal ``text`` (None when it is not a
    number at all: the line's own check says so)."""
    if _SIGNED_INT.fullmatch(text) is None:
        return None
    return _offset_problem(int(text))


def _offset_problem(offset: int) -> str | None:
    """Why ``offset`` cannot be committed, precisely, or None. -1 is the legacy consumer's
    "no offset", kept as it is."""
    if offset < -1:
        return (f"offset {offset} is negative: an offset is the next message's position, "
                "from 0 (only -1, 'no offset', is allowed below 0)")
    if offset > _INT64_MAX:
        return (f"offset {offset} does not fit in a signed 64-bit integer (the largest is "
                f"{_INT64_MAX})")
    return None


def _ancestors(path: str) -> list[str]:
    """``/a/b/c`` -> ``["/a", "/a/b"]``."""
    parts = path.split("/")[1:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


#: What refuses an import while a group has registered members: the action and the hint.
_IMPORT_REFUSAL = ("import offsets", "; pass --force to write anyway")
#: The same for a reset.
_RESET_REFUSAL = ("reset offsets", "; stop it first or pass --force")


def import_offsets(
    zk: KazooClient,
    entries: Sequence[OffsetEntry],
    *,
    force: bool = False,
    progress: Progress | None = None,
    dry_run: bool = False,
    bootstrap: str | None = None,
    kafka: Mapping[str, Any] | None = None,
    zookeeper_only: bool = False,
    log_end_offsets: Callable[[str, Sequence[TopicPartition]], Mapping[TopicPartition, int]]
    | None = None,
) -> ImportResult:
    """Write every entry's offset (creating znodes as needed) in one transaction, and in
    Kafka too for the groups that have offsets there.

    Refuses (GroupActiveError) when a group in ``entries`` has registered members, unless
    ``force``. More than :data:`MAX_TRANSACTION_OPS` operations are split into several
    transactions (``transactions`` in the result says how many). ``dry_run``: the same
    checks and plan, nothing written (it refuses what the real run would refuse).

    Kafka is asked which groups have committed offsets there (one OffsetFetch per group, to
    ``bootstrap`` or the brokers registered in ZooKeeper; ``kafka``: their security
    settings): members with ``offsets.storage=kafka`` resume from those, so such a group's
    offsets are committed in Kafka as well (after ZooKeeper's; ``kafka`` in the result),
    except those of partitions the broker registry does not have, which Kafka refuses.
    Refuses (:class:`KafkaGroupActiveError`) when such a group has active members in Kafka,
    whatever ``force``, and (:class:`KafkaUnknownError`) when Kafka cannot be asked, unless
    ``zookeeper_only``: ZooKeeper alone, Kafka not asked.

    Offsets of topics or partitions ``/brokers/topics`` does not have, and offsets past
    their partition's log end (read from the brokers, ``zookeeper_only`` or not;
    ``log_end_offsets`` (servers, partitions) replaces that read), are imported all the
    same and listed in the result (:func:`_import_checks`). Those of a topic whose
    ``/brokers/topics`` znode does not decode are imported unchecked, not committed in Kafka,
    with a warning logged naming the znode (:func:`_read_registry`).
    """
    groups = sorted({e.group for e in entries})
    for group in groups:
        _check_legal_name(group, "group")
    for topic in sorted({e.topic for e in entries}):
        _check_legal_name(topic, "topic")
    if not force:
        for group in groups:
            _require_no_members(zk, group, *_IMPORT_REFUSAL)
    plan = _KafkaPlan() if zookeeper_only else _ask_kafka(zk, groups, bootstrap, kafka,
                                                          _IMPORT_REFUSAL[0])
    with plan:
        registry, undecodable = _read_registry(zk, {e.topic for e in entries})
        for topic, why in undecodable.items():
            kafka_too = any(e.topic == topic and e.group in plan.offsets for e in entries)
            log.warning("%s; its offsets are imported without checking its partitions or "
                        "log end%s", _partitions_unknown(topic, why),
                        ", and not committed in Kafka (counted as left out)"
                        if kafka_too else "")

        def exists(tp: TopicPartition) -> bool:
            known = registry.get(tp.topic)
            return known is not None and tp.partition in known

        writes, in_kafka = _kafka_writes(plan, entries, exists)
        topic_missing, partition_missing, above, error = _import_checks(
            zk, entries, registry, bootstrap, kafka, log_end_offsets)
        result = _import_zookeeper(zk, entries, groups, force, progress, dry_run)
        if not dry_run:
            _commit_kafka(plan, writes, "")
    return replace(result, kafka=in_kafka, topic_missing=topic_missing,
                   partition_missing=partition_missing, above_log_end=above,
                   log_end_error=error)


def _import_checks(
    zk: KazooClient,
    entries: Sequence[OffsetEntry],
    registry: Mapping[str, list[int] | None],
    bootstrap: str | None,
    kafka: Mapping[str, Any] | None,
    log_end_offsets: Callable[[str, Sequence[TopicPartition]], Mapping[TopicPartition, int]]
    | None,
) -> tuple[list[OffsetEntry], list[OffsetEntry], list[tuple[OffsetEntry, int]], str | None]:
    """The entries no member can resume from, as :class:`ImportResult` has them: of topics,
    of partitions the broker registry does not have, past the log end (read from the
    brokers), and why the log ends could not be read. Never a refusal: an import restores a
    backup, and its topics may be created again. Entries of a topic not in ``registry``
    (its znode does not decode: :func:`_read_registry`) are not checked."""
    topic_missing = [e for e in entries if e.topic in registry and registry[e.topic] is None]
    partition_missing = [e for e in entries if (known := registry.get(e.topic)) is not None
                         and e.partition not in known]
    present = [e for e in entries
               if (known := registry.get(e.topic)) is not None and e.partition in known]
    above: list[tuple[OffsetEntry, int]] = []
    error: str | None = None
    if present:
        reader = log_end_offsets or partial(_log_end_offsets, kafka=kafka)
        try:
            ends = reader(_reachable_brokers(zk, bootstrap, kafka),
                          sorted({TopicPartition(e.topic, e.partition) for e in present}))
        except Exception as e:  # noqa: BLE001 - said in the warning: not checked
            log.debug("log end offsets failed", exc_info=True)
            error = _reason(e)
        else:
            above = [(e, end) for e in present
                     if (end := ends.get(TopicPartition(e.topic, e.partition))) is not None
                     and e.offset > end]
    return topic_missing, partition_missing, above, error


def _import_zookeeper(
    zk: KazooClient,
    entries: Sequence[OffsetEntry],
    groups: Sequence[str],
    force: bool,
    progress: Progress | None = None,
    dry_run: bool = False,
    refusal: tuple[str, str] = _IMPORT_REFUSAL,
) -> ImportResult:
    """The ZooKeeper part of :func:`import_offsets` (and of :func:`reset_offsets`): checked,
    planned and written, planned again from a fresh read when ZooKeeper changed meanwhile.
    ``refusal``: the action and hint of the refusal while a group has registered members
    (:func:`_require_no_members`)."""
    written = 0
    for _ in range(3):
        if not force:
            for group in groups:
                _require_no_members(zk, group, *refusal)
        try:
            return _import_once(zk, entries, groups, force, progress, dry_run, refusal)
        except _Changed as e:
            written += e.written  # planned again: what is written now counts as unchanged
            continue
    raise AdminError(f"ZooKeeper kept changing; {_written(written)}")


def _import_once(
    zk: KazooClient,
    entries: Sequence[OffsetEntry],
    groups: Sequence[str],
    force: bool,
    progress: Progress | None,
    dry_run: bool = False,
    refusal: tuple[str, str] = _IMPORT_REFUSAL,
) -> ImportResult:
    paths = [e.path for e in entries]
    current = get_many(zk, paths)
    parents = sorted({a for p in paths for a in _ancestors(p)}, key=lambda a: (a.count("/"), a))
    present = {p for p, st in zip(parents, [zk.exists_async(p) for p in parents], strict=True)
               if st.get() is not None}
    ops: list[tuple[str, str, bytes]] = [("create", p, b"") for p in parents if p not in present]
    created = updated = unchanged = 0
    changes: list[ImportChange] = []
    for e in entries:
        payload = zp.encode_offset(e.offset)
        old = current[e.path]
        old_offset: int | None = None
        if old is None:
            ops.append(("create", e.path, payload))
            created += 1
            action: Literal["create", "update", "unchanged"] = "create"
        else:
            try:
                old_offset = zp.decode_offset(old, e.path)
            except ZkDataError:
                pass  # replaced; shown as none
            if old.strip() == payload:
                unchanged += 1
                action = "unchanged"
            else:
                ops.append(("set", e.path, payload))
                updated += 1
                action = "update"
        changes.append(ImportChange(e.group, e.topic, e.partition, e.offset, old_offset,
                                    action))
    guard_groups = [] if force else list(groups)
    chunks = [ops[i:i + MAX_TRANSACTION_OPS] for i in range(0, len(ops), MAX_TRANSACTION_OPS)]
    if dry_run:
        if len(chunks) == 1:
            # The guard's own checks (the ACL it must keep), on a transaction never sent.
            tx = zk.transaction()
            for group in guard_groups:
                _members_guard(tx, zk, group, "")
        return ImportResult(list(entries), created, updated, unchanged, len(chunks),
                            changes=changes)
    if len(chunks) > 1 and not force:
        # Not atomic any more: check again just before writing.
        for group in groups:
            _require_no_members(zk, group, *refusal)
        guard_groups = []
    done = 0
    for chunk in chunks:
        tx = zk.transaction()
        for group in guard_groups:
            _members_guard(tx, zk, group, "", done)
        for op, path, payload in chunk:
            if op == "create":
                tx.create(path, payload)
            else:
                tx.set_data(path, payload)
        _commit(tx, "", done)
        done += len(chunk)
        if progress is not None:
            progress(done, len(ops))
    return ImportResult(list(entries), created, updated, unchanged, len(chunks),
                        changes=changes)


# --------------------------------------------------------------------------------------
# offsets reset
# --------------------------------------------------------------------------------------

_INT = re.compile(r"[0-9]+")


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
        _require_no_members(zk, group, *_RESET_REFUSAL)
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


# --------------------------------------------------------------------------------------
# verify-rebalance
# --------------------------------------------------------------------------------------


def verify_rebalance(zk: KazooClient, group: str) -> VerifyResult:
    """VerifyConsumerRebalance: every partition of every subscribed topic has an owner,
    and every owner is a live thread (computed from the registered members) subscribed to
    that topic. Owner znodes of topics no member subscribes to are reported too.

    Not verified (not ok) where that cannot be known: the part of a member whose subscription
    cannot be read, and a subscribed topic whose ``/brokers/topics`` znode does not decode
    (its owners are checked, with a warning logged naming the znode: :func:`_read_registry`).
    """
    _require_group(zk, group)
    members, undecodable_ids = read_members(zk, group)
    if not members and not undecodable_ids:
        return VerifyResult(group, False, f"group {group!r} has no registered members")
    all_topics = children(zk, zp.BROKER_TOPICS)
    readable, unreadable = _readable_members(members)
    unreadable.update(undecodable_ids)  # its ids znode does not decode: subscription unknown
    subscribed = consumers_for_topic(readable, all_topics, True)
    owners = _read_owners(zk, group)

    def unverifiable(owner: str | None) -> str | None:
        """Why ``owner``'s partition cannot be checked: its member's subscription is
        unknown (it may well be right to own it)."""
        member = None if owner is None else _consumer_of(owner)
        if member is None or member not in unreadable:
            return None
        return f"cannot verify: owner {owner} is a thread of {member}, whose subscription " \
               f"is unknown"

    registry, undecodable = _read_registry(zk, subscribed)
    for topic, why in undecodable.items():
        log.warning("%s; its part of the rebalance is not verified",
                    _partitions_unknown(topic, why))
    checks: list[OwnershipCheck] = []
    for topic in sorted(subscribed):
        live = set(subscribed[topic])
        if topic in undecodable:
            # Its partitions are unknown: only the owners there are checked.
            for tp, thread in sorted(owners.items()):
                if tp.topic != topic:
                    continue
                problem = None if thread in live else unverifiable(thread) or (
                    f"owner {thread} is not a live thread subscribed to {topic}")
                checks.append(OwnershipCheck(topic, tp.partition, thread, problem))
            continue
        partitions = registry[topic]
        if partitions is None:
            continue  # subscribed to a topic that does not exist (yet): nothing to own
        for p in partitions:
            owner = owners.get(TopicPartition(topic, p))
            problem = None
            if owner is None:
                problem = "no owner"
            elif owner not in live:
                problem = unverifiable(owner) or (
                    f"owner {owner} is not a live thread subscribed to {topic}")
            checks.append(OwnershipCheck(topic, p, owner, problem))
    covered = {(c.topic, c.partition) for c in checks}
    for tp, owner in sorted(owners.items()):
        if (tp.topic, tp.partition) not in covered:
            checks.append(OwnershipCheck(
                tp.topic, tp.partition, owner,
                unverifiable(owner) or f"owned by {owner} but no live thread subscribes to "
                f"{tp.topic}:{tp.partition}",
            ))
    unknown = "".join(
        f"; cannot verify the part of member {cid}: its subscription is unknown ({why})"
        for cid, why in sorted(unreadable.items())
    ) + "".join(
        f"; cannot verify topic {topic}: its partitions are unknown ({zp.topic_path(topic)} "
        "does not decode)" for topic in undecodable
    )
    bad = [c for c in checks if not c.ok and not (c.problem or "").startswith("cannot verify")]
    if bad:
        shown = "; ".join(f"{c.topic}:{c.partition}: {c.problem}" for c in bad[:5])
        more = f"; and {len(bad) - 5} more" if len(bad) > 5 else ""
        return VerifyResult(group, False, f"rebalance failed for group {group!r}: {len(bad)} of "
                            f"{len(checks)} partitions wrong: {shown}{more}{unknown}", checks)
    if unreadable or undecodable:
        n_ok = sum(1 for c in checks if c.ok)
        return VerifyResult(group, False, f"rebalance not verified for group {group!r}: "
                            f"{n_ok} of {len(checks)} partitions checked are owned by live "
                            f"threads{unknown}", checks)
    if not checks:
        return VerifyResult(group, False, f"group {group!r}: no partition to own "
                            f"(subscribed topics: {sorted(subscribed) or 'none'})", checks)
    n_topics = len({c.topic for c in checks})
    return VerifyResult(group, True, f"rebalance succeeded for group {group!r}: all "
                        f"{len(checks)} partitions of {n_topics} topic"
                        f"{'s' if n_topics != 1 else ''} owned by live threads", checks)
