"""Operator tools as plain functions: what Kafka's legacy ZooKeeper tools did, made safe.

This package's facade: the tools' public functions and results, from the modules that hold
them (:mod:`~zkconsumer.ops.groups`: ``groups list|describe|delete``;
:mod:`~zkconsumer.ops.offset_files`: ``offsets export|import`` and the file formats;
:mod:`~zkconsumer.ops.reset`: ``offsets reset``; :mod:`~zkconsumer.ops.verify`:
``verify-rebalance``; :mod:`~zkconsumer.ops.kafka_offsets`: the group's offsets in Kafka;
:mod:`~zkconsumer.ops.group_reads`: the group's znodes and name checks;
:mod:`~zkconsumer.ops.results`: the result dataclasses). The lag exporter
(:mod:`~zkconsumer.ops.exporter`) is imported from its own module; the migration and the
comparison, which build on these functions, are a package of their own
(:mod:`zkconsumer.migration`).

The original shipped ConsumerOffsetChecker / ``kafka-consumer-groups --zookeeper``,
ExportZkOffsets, ImportZkOffsets, UpdateOffsetsInZK and VerifyConsumerRebalance
(docs/znodes.md, "Offset tool files", and docs/operations.md). Here each is a function over
a connected :class:`~kazoo.client.KazooClient` (and, where the broker is needed, a bootstrap
address) returning dataclasses; nothing here prints. The ``zkconsumer.cli`` modules turn them
into the ``zkconsumer groups|offsets|verify-rebalance|console-consumer`` subcommands.

Rules every function follows:

* Every path comes from :mod:`zkconsumer.zk.paths`.
* A function that writes checks everything first and writes nothing when a check fails;
  the writes of one call go into one ZooKeeper transaction (``multi``) when they fit
  (:data:`~zkconsumer.zk.transactions.MAX_TRANSACTION_OPS`), so a failure half-way leaves
  nothing behind. Bigger writes are split, and their failure says how much was written.
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
* Failures the user can fix raise :class:`~zkconsumer._errors.AdminError` (a
  ``ZkConsumerError``) with a one-line message naming the group, topic, file line or
  address; a znode ACL refusing this client (NoAuth) is
  :class:`~zkconsumer._errors.AclRefusedError`, naming the path.

ZooKeeper login and ACL come from the environment (:data:`~zkconsumer.zk.session.AUTH_ENV`,
:data:`~zkconsumer.zk.session.ACL_ENV`), never from options, which anyone on the host can
read in ``ps``; they mean what the connector's ``zookeeper.auth`` / ``zookeeper.acl`` mean
and are validated by those keys' own checks. :func:`~zkconsumer.zk.session.connect` applies
them exactly as the connector does (login, and the ACL of every znode the tools create).

Lag is computed in one place, :func:`~zkconsumer._types.partition_lag`, which ``groups
describe`` and the ``ConsumerLag``/``MaxLag`` metrics (:mod:`zkconsumer.consumer.metrics`)
both use.
"""

from __future__ import annotations

from zkconsumer.ops.common import OUT_OF_LOG_RESET, counted, did_you_mean
from zkconsumer.ops.group_reads import (
    committed_offsets,
    committed_topics,
    group_exists,
    groups_of_topic,
    legal_name_problem,
    name_problem,
    not_found_message,
    owners_of,
    read_members,
    registered_members,
    require_group,
    unknown_group_message,
)
from zkconsumer.ops.groups import delete_group, describe_group, list_groups
from zkconsumer.ops.kafka_offsets import (
    ZOOKEEPER_ONLY_FLAG,
    kafka_committed,
    kafka_differences,
    kafka_offsets_left,
)
from zkconsumer.ops.offset_files import (
    export_offsets,
    format_offset_lines,
    import_offsets,
    parse_offset_json,
    parse_offset_lines,
)
from zkconsumer.ops.reset import parse_reset_target, reset_offsets
from zkconsumer.ops.results import (
    UNKNOWN_PATTERN,
    DeleteResult,
    GroupDescription,
    GroupSummary,
    ImportChange,
    ImportResult,
    KafkaImport,
    KafkaOffsetsLeft,
    MemberInfo,
    OffsetEntry,
    OwnershipCheck,
    PartitionStatus,
    ResetRow,
    ResetTarget,
    StoreDifference,
    VerifyResult,
    resume_offset,
)
from zkconsumer.ops.verify import verify_rebalance

__all__ = [
    "OUT_OF_LOG_RESET",
    "UNKNOWN_PATTERN",
    "ZOOKEEPER_ONLY_FLAG",
    "DeleteResult",
    "GroupDescription",
    "GroupSummary",
    "ImportChange",
    "ImportResult",
    "KafkaImport",
    "KafkaOffsetsLeft",
    "MemberInfo",
    "OffsetEntry",
    "OwnershipCheck",
    "PartitionStatus",
    "ResetRow",
    "ResetTarget",
    "StoreDifference",
    "VerifyResult",
    "committed_offsets",
    "committed_topics",
    "counted",
    "did_you_mean",
    "delete_group",
    "describe_group",
    "export_offsets",
    "format_offset_lines",
    "group_exists",
    "groups_of_topic",
    "import_offsets",
    "kafka_committed",
    "kafka_differences",
    "kafka_offsets_left",
    "legal_name_problem",
    "list_groups",
    "name_problem",
    "not_found_message",
    "owners_of",
    "parse_offset_json",
    "parse_offset_lines",
    "parse_reset_target",
    "read_members",
    "registered_members",
    "require_group",
    "unknown_group_message",
    "reset_offsets",
    "resume_offset",
    "verify_rebalance",
]
