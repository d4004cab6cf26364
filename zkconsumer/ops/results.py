"""The operator tools' results: dataclasses, nothing here reads or writes.

What :mod:`zkconsumer.ops` returns for ``groups list|describe|delete``, ``offsets
export|import|reset`` and ``verify-rebalance``; each row type's JSON form (``--json``) is
its fields unless it says otherwise. Also :func:`resume_offset`, the committed offset a
member resumes from given both stores' (lag itself is :func:`zkconsumer._types.partition_lag`,
which ``groups describe`` and the ``ConsumerLag``/``MaxLag`` metrics share).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, cast

from zkconsumer._types import TopicPartition
from zkconsumer.ops.common import OUT_OF_LOG_RESET, counted
from zkconsumer.zk import paths as zp


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
    of ``offset`` and the log end, ``owner`` the owning thread id (None: unowned),
    ``time_lag`` the lag in seconds. A
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
    time_lag: float | None = None
    """Seconds since the message at ``offset`` was appended (its timestamp); 0 when caught
    up; None when it cannot be told (no offset or log end, the message not readable)."""


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
    status`` names them (:func:`zkconsumer.ops.kafka_store.classify`): ``below_log_start``
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
# The offset a member resumes from
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


@dataclass(frozen=True)
class StoreDifference:
    """A partition whose offset in Kafka is not the one in ZooKeeper (None: none there)."""

    group: str
    topic: str
    partition: int
    zookeeper_offset: int | None
    kafka_offset: int


#: The pattern :class:`MemberInfo` shows for a member whose ids znode does not decode.
UNKNOWN_PATTERN = "unknown"


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
