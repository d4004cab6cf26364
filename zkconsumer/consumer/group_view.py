"""What the connector's collaborators share: the fetch side they drive, the subscription and
its queues, the group view a rebalance reads, its statistics, and the control-flow
exceptions of an attempt.

Nothing here has a lock of its own: a :class:`GroupView` is one read, made and used by one
rebalance; :class:`RebalanceStats` is written only under the connector's ``_rebalance_lock``;
a :class:`Subscription` is fixed once streams are created, before the first rebalance, except
``fetch_failure`` (see there).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from kazoo.exceptions import ConnectionClosedError, ConnectionLoss, SessionExpiredError
from kazoo.handlers.threading import KazooTimeoutError

from zkconsumer._config import ConsumerConfig
from zkconsumer._filters import TopicFilter
from zkconsumer._types import TopicPartition
from zkconsumer.consumer.partition import ChunkQueue, FetcherFailed, PartitionTopicInfo
from zkconsumer.consumer.stream import KafkaStream
from zkconsumer.zk import paths as zp


class FetchSide(Protocol):
    """What the rebalance needs from the fetch side (see ``_fetcher.FetcherManager``)."""

    def start_connections(self, infos: Iterable[PartitionTopicInfo]) -> None: ...

    def stop_connections(self) -> None: ...

    def shutdown(self) -> None: ...


@runtime_checkable
class IncrementalFetchSide(FetchSide, Protocol):
    """A fetch side that can also stop and start some partitions while the others go on
    (``_fetcher.FetcherManager``): then a rebalance stops only the partitions that move."""

    def add_partitions(self, infos: Iterable[PartitionTopicInfo]) -> None: ...

    def remove_partitions(self, infos: Iterable[PartitionTopicInfo]) -> None: ...


class Subscription:
    """What this member subscribed to and the streams' queues, fixed once streams are
    created. ``fetch_failure`` is what the iterators must raise once fetching (or the
    watcher thread) died: set once, by the thread that finds it."""

    def __init__(self) -> None:
        self.registration: zp.ConsumerRegistration | None = None
        self.topic_filter: TopicFilter | None = None
        self.queues: dict[tuple[str, str], ChunkQueue] = {}  # (topic, thread id) -> queue
        self.wildcard_queues: list[ChunkQueue] = []
        self.streams: list[KafkaStream[Any, Any]] = []
        self.fetch_failure: FetcherFailed | None = None

    def all_queues(self) -> list[ChunkQueue]:
        return list(self.queues.values()) + list(self.wildcard_queues)

    def queue_for(self, topic: str, thread_id: str) -> ChunkQueue:
        if self.wildcard_queues:
            n = int(thread_id.rsplit("-", 1)[1])
            return self.wildcard_queues[n]
        return self.queues[(topic, thread_id)]

    def requeue_fetch_failure(self) -> None:
        # Put again after every clear of the queues: a rebalance must not drop it before an
        # iterator has taken it (an iterator that took it raises it on every later call).
        failure = self.fetch_failure
        if failure is not None:
            for q in self.all_queues():
                q.put_shutdown(failure)


@dataclass
class GroupView:
    """One consistent read of what a rebalance needs (step 1)."""

    members: dict[str, zp.ConsumerRegistration]
    ids_version: int
    consumers_for_topic: dict[str, list[str]]
    partitions_for_topic: dict[str, list[int]]
    brokers: list[int]
    # Members whose strategy differs from the group's (left out of consumers_for_topic),
    # with the group's strategy as an error names it (see _strategy.py).
    refused: dict[str, str] = field(default_factory=dict)


@dataclass
class RebalanceStats:
    """Counters for the benchmark and the metrics (RebalanceRateAndTime)."""

    rebalances: int = 0
    attempts: int = 0
    failures: int = 0
    restarts: int = 0  # attempts abandoned because the group view changed
    # Rebalances that found the group as the last one left it (after a ZooKeeper connection
    # blip, say) and kept the fetchers running instead of stopping and restarting them.
    unchanged: int = 0
    claim_waits: int = 0  # claims that waited for another member to release
    # Rebalances that stopped only the partitions that moved, and how many partitions the
    # last one kept fetching throughout.
    incremental: int = 0
    last_kept: int = 0
    last_duration_s: float = 0.0
    last_done_at: float = 0.0  # time.time() when the last rebalance ended (0: none yet)
    last_zk_ops: int = 0
    # The last 1000 rebalances' (a long-lived process rebalances without end).
    durations_s: deque[float] = field(default_factory=lambda: deque(maxlen=1000))


@dataclass
class AgreementCheck:
    """A full rebalance's result, to check against the owner znodes at ``due``."""

    view: GroupView
    assignment: dict[TopicPartition, str]
    due: float  # time.monotonic()
    rounds: int = 0


class _Restart(Exception):
    """The group view changed during an attempt: start again with a fresh view."""


class _ShuttingDown(Exception):
    """shutdown() began while an attempt waited for ZooKeeper: it changes nothing more."""


class _Conflict(Exception):
    """A claim stayed held by another member for the whole wait."""


class _Disconnected(Exception):
    """ZooKeeper is unreachable or the session was lost: the rebalance waits for the
    (re)connection, which wakes the watcher thread."""


class _Unregistered(Exception):
    """This member's registration (its ids znode, or the group's ids directory) is missing
    while its session lives: it registers again."""


#: Errors of a ZooKeeper call that mean "the connection or the session is gone", or that no
#: answer came in time: either way the request may or may not have been applied.
CONNECTION_ERRORS = (ConnectionLoss, SessionExpiredError, ConnectionClosedError,
                     KazooTimeoutError)


def timeout(deadline: float | None) -> float | None:
    """What is left until ``deadline`` (``time.monotonic()``), for a kazoo ``get()``."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def fmt_owned(owned: Mapping[TopicPartition, str]) -> str:
    by_topic: dict[str, list[int]] = {}
    for tp in owned:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return ", ".join(f"{t}{sorted(ps)}" for t, ps in sorted(by_topic.items())) or "nothing"


def agreement_delay_s(config: ConsumerConfig) -> float:
    """Long enough for every member's claims to have waited out their holders (then a full
    rebalance's result is checked against the owner znodes)."""
    return (config.zookeeper_session_timeout_ms + 2 * config.rebalance_backoff_ms) / 1000.0
