"""Every exception zkconsumer raises derives from :class:`ZkConsumerError`.

The hierarchy (a test keeps it equal to the classes below)::

    ZkConsumerError
    ├── ConfigError (also ValueError)            bad or unknown configuration
    │   └── ZkConsumerSourceError                the Spark source: a wrong source option
    ├── ZkDataError (also ValueError)            a znode holds something we cannot decode
    ├── StackError                               the local stack could not start or stop
    ├── ConsumerRebalanceFailedException         "<id> can't rebalance after N retries"
    │   └── AssignmentStrategyMismatchError      members disagree on the strategy
    ├── MessageStreamsExistException             streams created twice on one connector
    ├── ConsumerTimeoutException                 consumer.timeout.ms passed with no message
    ├── MessageDecodeError                       a decoder raised (topic, partition, offset)
    ├── OffsetCommitError                        Kafka refused some offsets of a commit
    ├── PartitionsNotOwnedError                  explicit offsets for partitions not owned
    ├── CommitFencedError                        offsets not written: not this session's
    ├── ZkConnectionLostError                    ZooKeeper connection down or session lost
    ├── SessionUnprovenError (also kazoo's ConnectionLoss)  session not shown alive in time
    ├── ConsumerShutdownError                    the connector is shut down
    ├── MetricsPortError (also OSError)          metrics.port cannot be bound
    ├── BackgroundThreadError                    a background thread died; carries its cause
    ├── AdminError                               an operator tool cannot do what was asked
    │   ├── ZooKeeperUnreachableError            no ZooKeeper session within the timeout
    │   ├── UnknownGroupError                    no /consumers/<group>
    │   ├── UnknownTopicError                    no /brokers/topics/<topic>
    │   ├── GroupActiveError                     the group has registered members
    │   │   └── KafkaGroupActiveError            ... or active members in Kafka
    │   ├── ZooKeeperChangedError                the tree changed under a transaction
    │   ├── AclRefusedError                      a znode's ACL refused the operation
    │   ├── OffsetFileError                      an offsets file has malformed lines
    │   └── KafkaUnknownError                    Kafka not asked before offsets were written
    ├── MigrationError                           a migration step cannot be done
    │   ├── MigrationGroupActiveError            (also GroupActiveError)
    │   ├── MigrationUnknownGroupError           (also UnknownGroupError)
    │   ├── MigrationUnknownTopicError           (also UnknownTopicError)
    │   └── OutOfRangeError                      offsets outside their partitions' logs
    ├── CompareError                             ``zkconsumer compare`` cannot run
    ├── CommandError                             the CLI: a failure the user can fix (exit 2)
    ├── KafkaToolError                           the CLI: a Kafka tool's failure, its lines
    └── ZooKeeperRefusedError                    the bridge: ZooKeeper refused it (NoAuth)

Names ending in ``Exception`` keep the legacy (Scala) names so that ported code reads the
same; the rest follow Python conventions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kazoo.exceptions import ConnectionLoss

from zkconsumer._types import TopicPartition


class ZkConsumerError(Exception):
    """Root of every zkconsumer error."""


class ConfigError(ZkConsumerError, ValueError):
    """A configuration key or value is wrong; the message names the key and the value.

    Raised by ``ConsumerConfig(...)``, ``ConsumerConfig.from_properties`` (also for a file
    it cannot read), ``copy_with``, ``create_consumer_connector`` (given a mapping, or
    ``fetch.backend=confluent`` without confluent-kafka) and the topic filters."""


class ZkDataError(ZkConsumerError, ValueError):
    """A znode's payload cannot be decoded; the message names the path when known."""


class StackError(ZkConsumerError):
    """The local stack (ZooKeeper, broker, bridge) failed to start, stop or answer."""


class ConsumerRebalanceFailedException(ZkConsumerError):
    """The rebalance did not succeed within ``rebalance.max.retries`` attempts.

    Raised by ``create_message_streams*`` for the first rebalance, after the connector shut
    down (leaving the group); a later rebalance that fails is logged and retried instead."""


class AssignmentStrategyMismatchError(ConsumerRebalanceFailedException):
    """This member's ``partition.assignment.strategy`` differs from its group's: it claims
    nothing (the message names both). Raised at once by the first rebalance; later, the
    member logs it and tries again after ``rebalance.backoff.ms``."""


class MessageStreamsExistException(ZkConsumerError):
    """``create_message_streams*`` may be called once per connector.

    Raised by a second ``create_message_streams*``, and by
    ``set_consumer_rebalance_listener`` once the streams exist."""


class ConsumerTimeoutException(ZkConsumerError):
    """No message arrived within ``consumer.timeout.ms``; the stream stays usable.

    Raised by a stream's ``next()`` (a ``for`` loop over it); iterate again to go on."""


class ConsumerShutdownError(ZkConsumerError):
    """The operation needs a running connector, and it is shut down.

    Raised by ``commit_offsets``, ``commit_offsets_async`` and ``create_message_streams*``
    after ``shutdown()``, and given to the asynchronous commits ``shutdown()`` could not
    write."""


class MetricsPortError(ZkConsumerError, OSError):
    """``metrics.port`` (on ``metrics.address``) cannot be bound: taken, or not allowed.

    An OSError too, with the errno and ``strerror`` of the failed bind; its message names
    the key, the port and the address. Raised by ``create_consumer_connector``."""

    def __init__(self, errno: int | None, strerror: str, message: str) -> None:
        super().__init__(errno, strerror)
        self.message = message

    def __str__(self) -> str:
        return self.message


class BackgroundThreadError(ZkConsumerError):
    """A background thread of the connector failed; ``__cause__`` is its exception.

    Raised by the streams' ``next()`` (on every call, until shutdown), ``commit_offsets`` and
    ``commit_offsets_async``; shut the connector down and make a new one."""


class MessageDecodeError(ZkConsumerError):
    """A key or value decoder raised; ``__cause__`` is its exception.

    Raised by a stream's ``next()``. The consumed offset stays at :attr:`offset` until the
    next ``next()`` call, which skips the message.
    """

    def __init__(self, topic: str, partition: int, offset: int, part: str, cause: BaseException):
        super().__init__(
            f"cannot decode the {part} of the message at {topic}:{partition} offset {offset}: "
            f"{cause!r}"
        )
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.part = part  # "key" or "value"


class ZkConnectionLostError(ZkConsumerError):
    """The ZooKeeper connection is down or the session was lost (the member cannot know what
    it owns); retry once the connector is no longer ``paused``.

    Raised by ``commit_offsets``, and given to an asynchronous commit's callback and future:
    nothing of that commit was written."""


class SessionUnprovenError(ZkConsumerError, ConnectionLoss):  # type: ignore[misc]  # untyped
    """The member's ZooKeeper session could not be shown alive in time (see fencing), so a
    write that needed the proof was not sent and is not retried: the member may be a zombie.
    Also a kazoo ``ConnectionLoss``, which is how kazoo's retry helpers see it (not retriable)."""

    retriable = False


class PartitionsNotOwnedError(ZkConsumerError):
    """``commit_offsets(offsets)`` named partitions this member does not own (any more): a
    rebalance gave them to another member, whose offsets the commit would overwrite. Nothing
    of that commit was written; ``partitions`` lists the ones not owned."""

    def __init__(self, consumer_id: str, partitions: Iterable[tuple[str, int]]) -> None:
        self.partitions = sorted(partitions)
        shown = ", ".join(f"{t}:{p}" for t, p in self.partitions[:5])
        more = f" and {len(self.partitions) - 5} more" if len(self.partitions) > 5 else ""
        super().__init__(
            f"{consumer_id} does not own {shown}{more}: nothing committed (a rebalance "
            "moved them; commit the partitions in owned_partitions())"
        )


class CommitFencedError(ZkConsumerError):
    """Offsets that were not written because this member's session does not own their
    partitions (any more): the commit was made under an earlier session, the partition moved
    to another member, or its owner znode is not this session's. Never retried (another
    member's offset would be overwritten); what else the commit held was written.
    ``partitions`` lists the dropped ones. Given to an asynchronous commit's callback and
    future; a synchronous commit logs the same as a WARNING."""

    def __init__(self, consumer_id: str, partitions: Iterable[tuple[str, int]],
                 reason: str) -> None:
        self.partitions = sorted(partitions)
        self.reason = reason
        shown = ", ".join(f"{t}:{p}" for t, p in self.partitions[:5])
        more = f" and {len(self.partitions) - 5} more" if len(self.partitions) > 5 else ""
        super().__init__(f"{consumer_id}: offsets of {shown}{more} not committed: {reason}")


#: Kafka's answers to a commit without generation and member id while the group has members
#: of the broker-coordinated protocol.
_MODERN_GROUP_ERRORS = frozenset(
    {"IllegalGenerationError", "UnknownMemberIdError", "RebalanceInProgressError"})


class OffsetCommitError(ZkConsumerError):
    """Kafka refused some offsets of a commit; ``errors`` maps partition -> error name.

    ``retriable`` is False when trying again cannot help (every error is one Kafka does not
    call retriable: the group has modern members, an authorization failure, ...). Raised by
    ``commit_offsets`` (after its retries), given to an asynchronous commit's callback and
    future, logged by auto-commit.
    """

    def __init__(self, group: str, errors: Mapping[Any, str], retriable: bool = True) -> None:
        shown = ", ".join(f"{t}:{p}={e}" for (t, p), e in sorted(errors.items())[:5])
        more = f" and {len(errors) - 5} more" if len(errors) > 5 else ""
        hint = ""
        if _MODERN_GROUP_ERRORS & set(errors.values()):
            hint = (" (the group has members of the broker-coordinated protocol: a ZooKeeper-"
                    "based member cannot commit to Kafka while they are there; see the "
                    "migration paths in docs/migration.md)")
        super().__init__(
            f"Kafka refused {len(errors)} offset{'' if len(errors) == 1 else 's'} of group "
            f"{group!r}: {shown}{more}{hint}"
        )
        self.group = group
        self.errors = dict(errors)
        self.retriable = retriable


# The tools' errors (zkconsumer.ops): each printed as one line by the CLI.

class AdminError(ZkConsumerError):
    """A failure the user can fix: printed as one line by the CLI (exit status 2)."""


class ZooKeeperUnreachableError(AdminError):
    """No ZooKeeper session within the connect timeout."""


class UnknownGroupError(AdminError):
    """The group has no ``/consumers/<group>`` znode."""


class UnknownTopicError(AdminError):
    """The topic has no ``/brokers/topics/<topic>`` znode."""


class GroupActiveError(AdminError):
    """The operation needs a group without registered members."""


class ZooKeeperChangedError(AdminError):
    """The tree changed between planning and committing a transaction; ``written``:
    operations of the same command that earlier transactions applied."""

    def __init__(self, message: str, written: int = 0) -> None:
        super().__init__(message)
        self.written = written


class AclRefusedError(AdminError):
    """ZooKeeper refused an operation on a znode by its ACL (NoAuth)."""


class OffsetFileError(AdminError):
    """An offsets file has malformed lines; ``problems`` lists (line number, reason).

    Its message is one line per problem, ``SOURCE:LINE: reason`` (as compilers say it), the
    first :data:`SHOWN_PROBLEMS` of them, after a first line with the count."""

    def __init__(self, source: str, problems: Sequence[tuple[int, str]],
                 where: str = "line") -> None:
        self.source = source
        self.problems = list(problems)
        n = len(self.problems)
        plural = "entries" if where == "entry" else f"{where}s"
        noun = plural if n != 1 else where
        lines = [f"{source}: {n} malformed {noun}, nothing written"
                 + (f" (the first {SHOWN_PROBLEMS} follow)" if n > SHOWN_PROBLEMS else "")]
        lines += [f"{source}:{k}: {why}" for k, why in self.problems[:SHOWN_PROBLEMS]]
        if n > SHOWN_PROBLEMS:
            lines.append(f"{source}: and {n - SHOWN_PROBLEMS} more malformed {plural}")
        super().__init__("\n".join(lines))


#: The most problems of an offsets file that an error lists.
SHOWN_PROBLEMS = 20


# The migration's errors (zkconsumer.migration); the three named after the tools'
# errors derive from them too, so that whoever catches those catches these.

class MigrationError(ZkConsumerError):
    """A migration step cannot be done; the message says why and what to do."""


# The three below are also the tools' errors of the same name (zkconsumer.ops), so that
# whoever catches those catches these.


class MigrationGroupActiveError(MigrationError, GroupActiveError):
    """The group still has live consumers of either protocol.

    ``written``: raised by :func:`write_kafka_offsets`, the partitions Kafka committed
    before it refused the rest (it answers per partition); else empty."""

    def __init__(self, message: str, written: Sequence[TopicPartition] = ()) -> None:
        super().__init__(message)
        self.written = list(written)


class MigrationUnknownGroupError(MigrationError, UnknownGroupError):
    """The group exists nowhere: no ``/consumers/G`` and no offsets or members in Kafka."""


class MigrationUnknownTopicError(MigrationError, UnknownTopicError):
    """A topic asked for that the group has no offsets for and that does not exist."""


class OutOfRangeError(MigrationError):
    """The copy would write offsets outside their partitions' logs (or unverified ones)."""


# The CLI's, the bridge's and the Spark source's errors (zkconsumer.cli, zkconsumer.bridge,
# zkconsumer.spark).

class CommandError(ZkConsumerError):
    """A failure the user can fix; printed as one line, exit status 2."""


class KafkaToolError(ZkConsumerError):
    """A failure the Kafka tool reported on stdout (``lines``); exit status 2."""

    def __init__(self, *lines: str) -> None:
        super().__init__(lines[0] if lines else "")
        self.lines = list(lines)


#: The environment variable of the ZooKeeper login: zkconsumer.zk.session.AUTH_ENV, which a
#: leaf cannot import (tests/integration/test_bridge.py checks they agree).
_AUTH_ENV = "ZKCONSUMER_ZOOKEEPER_AUTH"


class ZooKeeperRefusedError(ZkConsumerError):
    """ZooKeeper refused a request for lack of permission (NoAuth); names the znode whose
    ACL is at fault: for a create or a delete, the parent's (ZooKeeper checks CREATE and
    DELETE there), for the rest the znode's own."""

    def __init__(self, zookeeper: str, path: str, op: str = "access") -> None:
        login = f"the bridge's login ({_AUTH_ENV})"
        if op == "access":
            why = (f"refused access to {path} (NoAuth): its ACL does not grant {login} what "
                   "the bridge needs")
        elif op == "ensure":
            why = (f"refused to create {path} or a missing parent (NoAuth): the ACL of its "
                   f"nearest existing ancestor does not grant {login} CREATE")
        else:
            parent = path.rsplit("/", 1)[0] or "/"
            why = (f"refused to {op} {path} (NoAuth): the ACL of its parent {parent} does "
                   f"not grant {login} {op.upper()}")
        super().__init__(f"ZooKeeper at {zookeeper} {why}")
        self.path = path


class ZkConsumerSourceError(ConfigError):
    """A source option is wrong; raised when the DataFrame is defined or the query starts."""
# The errors of the operator tools and the comparison (zkconsumer.ops: kafka_offsets, compare).


class KafkaUnknownError(AdminError):
    """Kafka could not be asked about a group before offsets were written to ZooKeeper:
    members with ``offsets.storage=kafka`` resume from Kafka's offsets, so a write to
    ZooKeeper alone may change nothing for them."""


class KafkaGroupActiveError(GroupActiveError):
    """The group has active members in Kafka (a modern consumer group that is not empty):
    Kafka refuses offsets committed for it from outside."""


class CompareError(ZkConsumerError):
    """The comparison cannot run (bad arguments, unusable topic, broken stack)."""
