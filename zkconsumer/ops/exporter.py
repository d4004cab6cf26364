"""Lag monitoring of every ZooKeeper consumer group, with a status evaluated as Burrow does.

:class:`LagMonitor` polls ZooKeeper (every group's committed offsets with the time of their
last commit, owners and registered members, pipelined) and the brokers (the log end of every
partition involved) once per interval. Each partition keeps a sliding window of its last
``window`` observations (when seen, committed offset, lag, time of the last commit) and gets
a status by Burrow's rules, in this order:

1. no committed offset: ``NOTFOUND``; a lag of 0 now: ``OK``;
2. the committed offset went back within the window: ``REWIND`` (but a rewind seen while
   the group has no registered member, as ``offsets reset`` requires, is an operator's:
   the window starts anew from it);
3. the window not full yet, or a lag of 0 anywhere in it (caught up a moment ago): ``OK``;
4. no commit for longer than the window's commits span (now minus the last commit's time
   greater than the last commit's time minus the oldest's): ``STOP``;
5. commits made but the offset not moving, lag > 0: ``STALL``;
6. the offset moving but the lag never falling between two observations: ``WARN``;
7. otherwise ``OK``.

A group with no committed offset at all (no member yet, or members that have not committed)
is ``NOTFOUND``, its lag unknown (no sample), never 0.

A partition with a committed offset whose log end is unknown (the brokers did not answer)
is ``UNKNOWN``: its lag is None, never 0. A group's status is its worst partition's:
OK < WARN < STOP < STALL < ERR < UNKNOWN, where a REWIND partition makes the group ERR; an
UNKNOWN group's lag is None and its ``reason`` says why. (Burrow itself reports STOP and
STALL partitions as a group ERR; the group's status here says which.) Codes, as Burrow
numbers them: NOTFOUND 0, OK 1, WARN 2, ERR 3, STOP 4, STALL 5, REWIND 6; and UNKNOWN 7,
which Burrow does not have.

Each partition's time lag, the age of the oldest message its group has not committed, is
read from a timeline of the log ends the polls saw (:mod:`~zkconsumer.ops.time_lag`):
interpolated between the two polls around the committed offset, so off by at most one poll
interval. What the timeline cannot bound (a backlog older than its first poll, a quiet
partition) is read from the broker instead: the timestamp of the message at the committed
offset, once per partition and offset; where neither can tell, it is unknown (no sample,
never 0).

The time of a commit is the offset znode's modification time: the ZooKeeper consumers
(this one and the JVM's) write an offset only when it changed, so a consumer that stopped
committing leaves it still.

Every offset store: each poll also asks Kafka for every ZooKeeper group's committed offsets
(OffsetFetch, batched: :func:`~zkconsumer.ops.kafka_offsets.kafka_offsets_of`), where
members with ``offsets.storage=kafka`` commit (and, with ``dual.commit.enabled``, ZooKeeper
too). Both stores' offsets are served, labelled ``store``; a group's lag and status are of
the store its members commit to (``dual``: both, each partition's larger lag used). The ids
znodes of zkconsumer members say it (``offsets_storage``; members that differ make it
``dual``); where a member does not (a JVM's), or none is registered, the offsets tell it
(:func:`offset_store`): the only store with offsets; with both, the one ahead on some
partition and behind on none; else ``dual``. A group's
store changes when two polls in a row say so (a poll amid a dual commit sees one store ahead
for a moment). Kafka gives no commit time: a Kafka offset's is when a poll first saw it, so
a commit of the same offset again (STALL) reads as none (STOP). The groups are ZooKeeper's
(/consumers): one migrated to Kafka but still registered there is shown once. When Kafka
cannot be asked, the groups that had offsets there are UNKNOWN (their windows wait), the
others' lag is ZooKeeper's.

:meth:`LagMonitor.render` gives the Prometheus text exposition of the last poll, built once
per poll, so that a scrape only sends bytes already made. Library functions only: nothing
here prints.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kafka.errors import KafkaError
from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss, NoNodeError

from zkconsumer._errors import ZkConsumerError, ZkDataError
from zkconsumer._types import TopicPartition, partition_lag
from zkconsumer.consumer.metrics import (
    CLIENT_TIMEOUT_S,
    METRICS_PATH,
    MetricsServer,
    QuietHandler,
)
from zkconsumer.ops import brokers
from zkconsumer.ops.kafka_offsets import kafka_offsets_of
from zkconsumer.ops.time_lag import Timeline
from zkconsumer.zk import paths as zp

__all__ = ["STATUS_CODES", "ExporterServer", "GroupLag", "LagMonitor", "Observation",
           "PartitionLag", "evaluate_partition"]

log = logging.getLogger(__name__)

#: Burrow's status codes.
STATUS_CODES = {"NOTFOUND": 0, "OK": 1, "WARN": 2, "ERR": 3, "STOP": 4, "STALL": 5,
                "REWIND": 6, "UNKNOWN": 7}
#: A group's status from its worst partition's (REWIND makes the group ERR). UNKNOWN is
#: worst: a lag that cannot be read must not pass for a healthy group.
_GROUP_SEVERITY = {"NOTFOUND": 0, "OK": 1, "WARN": 2, "STOP": 3, "STALL": 4, "ERR": 5,
                   "UNKNOWN": 6}
_AS_GROUP = {"REWIND": "ERR"}

#: How many observations a partition's window holds unless told (Burrow's default).
DEFAULT_WINDOW = 10
#: Partitions a poll reads a message's own timestamp of, at most (each once per offset).
MAX_STAMP_LOOKUPS = 1000

#: Requests in flight at once while reading ZooKeeper (kazoo queues them all otherwise).
PIPELINE = 2000


@dataclass(frozen=True)
class Observation:
    """One poll's view of a partition: when seen, the committed offset, the lag then, and
    the time of the commit (the offset znode's modification time, epoch seconds)."""

    seen_at: float
    offset: int
    lag: int | None
    committed_at: float
    store: str = "zookeeper"


def evaluate_partition(window: Sequence[Observation], size: int, now: float) -> str:
    """The partition's status from its window (oldest first), by the rules of the module
    docstring; ``size``: how many observations make a full window."""
    if not window:
        return "NOTFOUND"
    window = list(window)  # a deque does not slice
    last = window[-1]
    if last.lag == 0:
        return "OK"
    if any(b.offset < a.offset for a, b in zip(window, window[1:], strict=False)):
        return "REWIND"
    if len(window) < size or last.lag is None:
        return "OK"
    if any(o.lag == 0 for o in window):
        return "OK"  # caught up within the window: a message since is no stop (Burrow #128)
    first = window[0]
    if now - last.committed_at > last.committed_at - first.committed_at:
        return "STOP"
    if first.offset == last.offset:
        return "STALL"
    lags = [o.lag for o in window]
    if all(a is not None and b is not None and b >= a
           for a, b in zip(lags, lags[1:], strict=False)):
        return "WARN"
    return "OK"


def group_status(statuses: Iterable[str]) -> str:
    """The worst of the partitions' statuses, as a group's (OK for a group with none)."""
    worst = "OK"
    for s in statuses:
        s = _AS_GROUP.get(s, s)
        if s != "NOTFOUND" and _GROUP_SEVERITY[s] > _GROUP_SEVERITY[worst]:
            worst = s
    return worst


@dataclass(frozen=True)
class PartitionLag:
    """One partition of a group at the last poll."""

    topic: str
    partition: int
    offset: int | None
    log_end_offset: int | None
    lag: int | None
    owner: str | None
    status: str
    time_lag: float | None = None
    """Seconds since the oldest message not committed was appended (see
    :mod:`~zkconsumer.ops.time_lag`); 0 when caught up, None when it cannot be told."""
    zookeeper_offset: int | None = None
    kafka_offset: int | None = None
    """Each store's committed offset (None: none there, or Kafka's unknown); ``offset`` is
    the one the status and the lag are of, from the store ``store`` names."""
    store: str | None = None

    def store_lag(self, store: str) -> int | None:
        """The lag against ``store``'s offset ("zookeeper" or "kafka"); None without one or
        without a log end."""
        offset = self.zookeeper_offset if store == "zookeeper" else self.kafka_offset
        return partition_lag(offset, self.log_end_offset) if offset is not None else None


@dataclass(frozen=True)
class GroupLag:
    """One group at the last poll: its partitions (those of every topic it has offsets or
    owners of), registered members, partitions without an owner, status and, for an
    UNKNOWN status, why."""

    group: str
    members: int
    partitions: list[PartitionLag]
    status: str
    reason: str | None = None
    store: str = "zookeeper"
    """Where the members commit, as the offsets tell (:func:`offset_store`): "zookeeper",
    "kafka" or "dual" (both; each partition's larger lag used)."""

    @property
    def unowned(self) -> int:
        return sum(1 for p in self.partitions if p.owner is None)

    @property
    def lag_known(self) -> bool:
        """Whether every partition with a committed offset has a known lag, and one has
        (a group that committed nothing has no lag to know)."""
        committed = [p for p in self.partitions if p.offset is not None]
        return bool(committed) and all(p.lag is not None for p in committed)

    @property
    def total_lag(self) -> int | None:
        """The sum of the partitions' lags; None when one is unknown (never a 0 that
        hides it)."""
        if not self.lag_known:
            return None
        return sum(p.lag for p in self.partitions if p.lag is not None)

    @property
    def max_lag(self) -> int | None:
        if not self.lag_known:
            return None
        return max((p.lag for p in self.partitions if p.lag is not None), default=0)

    @property
    def max_time_lag(self) -> float | None:
        """The largest partition time lag; None when one is unknown (never a 0 that hides
        it)."""
        committed = [p.time_lag for p in self.partitions if p.offset is not None]
        if not committed or any(t is None for t in committed):
            return None
        return max((t for t in committed if t is not None), default=0.0)

    def to_json(self) -> dict[str, Any]:
        return {"group": self.group, "members": self.members, "status": self.status,
                "status_reason": self.reason, "offset_store": self.store,
                "total_lag": self.total_lag, "max_lag": self.max_lag,
                "max_time_lag_s": self.max_time_lag,
                "unowned_partitions": self.unowned,
                "partitions": [p.__dict__ for p in self.partitions]}


@dataclass
class _RawGroup:
    """What ZooKeeper holds for one group: offset -> (value, commit time), owners, members;
    and Kafka: offset -> (value, when the monitor first saw it), None when unknown."""

    offsets: dict[TopicPartition, tuple[int, float]] = field(default_factory=dict)
    owners: dict[TopicPartition, str] = field(default_factory=dict)
    members: int = 0
    kafka: dict[TopicPartition, tuple[int, float]] | None = field(default_factory=dict)
    declared: list[str | None] = field(default_factory=list)
    """Each member's ``offsets_storage`` from its ids znode (None: not said, a JVM's)."""


def offset_store(zookeeper: Mapping[TopicPartition, int], kafka: Mapping[TopicPartition, int]
                 ) -> str:
    """Where a group's members commit, as its offsets tell: the only store with offsets;
    with both, the one ahead on some partition and behind on none (the other's offsets are
    left from before: a migrated group, or one rolled back to ZooKeeper); else (equal, or
    each ahead somewhere) "dual".

    >>> a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    >>> offset_store({a: 5}, {}), offset_store({}, {a: 5}), offset_store({a: 5}, {a: 5})
    ('zookeeper', 'kafka', 'dual')
    >>> offset_store({a: 5, b: 2}, {a: 9, b: 2}), offset_store({a: 5, b: 3}, {a: 9, b: 2})
    ('kafka', 'dual')
    """
    if not kafka:
        return "zookeeper"
    if not zookeeper:
        return "kafka"
    both = zookeeper.keys() & kafka.keys()
    zk_ahead = any(zookeeper[tp] > kafka[tp] for tp in both)
    kafka_ahead = any(kafka[tp] > zookeeper[tp] for tp in both)
    if kafka_ahead != zk_ahead:
        return "kafka" if kafka_ahead else "zookeeper"
    return "dual"


def _used(store: str, zookeeper: tuple[int, float] | None, kafka: tuple[int, float] | None
          ) -> tuple[tuple[int, float] | None, str | None]:
    """The offset (with its commit time) a partition's lag and status are of, and its store:
    the group's store's, else the other's (not hidden as NOTFOUND); with dual commit, the
    smaller (the larger lag), ZooKeeper's when equal."""
    if zookeeper is None or kafka is None:
        return (zookeeper, "zookeeper") if zookeeper is not None else (
            (kafka, "kafka") if kafka is not None else (None, None))
    if store == "zookeeper" or (store == "dual" and zookeeper[0] <= kafka[0]):
        return zookeeper, "zookeeper"
    return kafka, "kafka"


class LagMonitor:
    """Polls every group's offsets and the log ends, keeps each partition's window.

    Used from one thread (the poller); :meth:`render`'s bytes are made by :meth:`poll` and
    read by the serving threads as one reference (no lock needed: a reference swap).
    """

    def __init__(
        self, *, window: int = DEFAULT_WINDOW,
        log_ends: Callable[[KazooClient, Sequence[TopicPartition]], Mapping[TopicPartition, int]]
        | None = None,
        message_times: Callable[[KazooClient, Mapping[TopicPartition, int]],
                                Mapping[TopicPartition, float]] | None = None,
        kafka_offsets: Callable[[KazooClient, Sequence[str]],
                                Mapping[str, Mapping[TopicPartition, int]]] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if window < 2:
            raise ZkConsumerError(f"the window must hold at least 2 observations, got {window}")
        self.window = window
        self._log_ends = log_ends or (lambda zk, tps: brokers.log_ends(zk, tps))
        self._message_times = message_times or (
            lambda zk, positions: brokers.message_times(zk, positions))
        # (partition, committed offset) -> when that message was written, read from the
        # broker for what the timelines cannot date (a message's time never changes).
        self._stamps: dict[tuple[TopicPartition, int], float | None] = {}
        # Each group's committed offsets in Kafka (OffsetFetch, batched).
        self._kafka_offsets = kafka_offsets or (lambda zk, names: kafka_offsets_of(zk, names))
        # (group, partition) -> (Kafka's offset, when first seen): Kafka gives no commit time.
        self._kafka_seen: dict[tuple[str, TopicPartition], tuple[int, float]] = {}
        self._kafka_groups: set[str] = set()  # the groups with offsets in Kafka at last sight
        # group -> (its store, a different verdict seen once): a store changes only when told
        # twice in a row (a poll amid a dual commit sees one store ahead for a moment).
        self._stores: dict[str, tuple[str, str | None]] = {}
        self.kafka_error: str | None = None
        self._clock = clock
        self._windows: dict[tuple[str, TopicPartition], deque[Observation]] = {}
        self._seen: set[tuple[str, TopicPartition]] = set()  # the partitions of this poll
        # Each partition's log ends over the polls, for the time lags (shared by the groups).
        self._timelines: dict[TopicPartition, Timeline] = {}
        self._warned: set[str] = set()  # znodes named as undecodable
        self._cache: ZkCache | None = None
        self.groups: list[GroupLag] = []
        self.log_end_error: str | None = None
        self.poll_seconds = 0.0
        self.polled_at = 0.0
        self.polls = 0
        self.errors = 0
        self._rendered = b""

    @property
    def cache(self) -> ZkCache | None:
        """What the polls read through (None before the first)."""
        return self._cache

    # -- polling ---------------------------------------------------------------------------
    def poll(self, zk: KazooClient, groups: Sequence[str] | None = None) -> list[GroupLag]:
        """One poll of ``groups`` (default: every group under /consumers)."""
        start = time.monotonic()
        if not zk.connected:
            # The cache would answer from what it read before, as if ZooKeeper were there.
            raise ConnectionLoss("not connected to ZooKeeper: the values would be stale")
        if self._cache is None or self._cache.zk is not zk:
            self._cache = ZkCache(zk)  # a new client: its watches are its own
        raw = read_groups(self._cache, groups, self._warned)
        self._read_kafka(zk, raw, self._clock())
        topics = sorted({tp.topic for g in raw.values()
                         for tp in [*g.offsets, *g.owners, *(g.kafka or ())]})
        partitions = topic_partition_map(self._cache, topics)
        tps = [TopicPartition(t, p) for t in topics for p in partitions.get(t, [])]
        try:
            ends = dict(self._log_ends(zk, tps)) if tps else {}
            self.log_end_error = None
        except (ZkConsumerError, OSError) as e:
            # Said by the command that polls (once, not every poll), and in each group's
            # UNKNOWN status.
            ends, self.log_end_error = {}, str(e)
            log.debug("log end offsets unknown: %s", e)
        now = self._clock()
        for tp, end in ends.items():
            self._timelines.setdefault(tp, Timeline()).add(now, end)
        used = {name: self._used_offsets(name, g) for name, g in raw.items()}
        self._date_backlogs(zk, used, ends)
        out = [self._group(name, g, used[name], partitions, ends, now)
               for name, g in sorted(raw.items())]
        self._forget_gone(out)
        self.groups = out
        self.polled_at = now
        self.poll_seconds = time.monotonic() - start
        self.polls += 1
        self._rendered = render(self)
        return out

    def _read_kafka(self, zk: KazooClient, raw: Mapping[str, _RawGroup], now: float) -> None:
        """Every group's committed offsets in Kafka, into ``raw`` (a group's ``kafka`` is None
        when Kafka cannot be asked and it had offsets there at the last poll that could)."""
        try:
            found = self._kafka_offsets(zk, sorted(raw)) if raw else {}
            self.kafka_error = None
        except (ZkConsumerError, OSError, KafkaError) as e:
            # Said by the command that polls, and in each such group's UNKNOWN status.
            self.kafka_error = str(e)
            log.debug("committed offsets in Kafka unknown: %s", e)
            for name, g in raw.items():
                g.kafka = None if name in self._kafka_groups else {}
            return
        seen: dict[tuple[str, TopicPartition], tuple[int, float]] = {}
        for name, g in raw.items():
            for tp, offset in found.get(name, {}).items():
                before = self._kafka_seen.get((name, tp))
                seen[(name, tp)] = (offset, before[1] if before and before[0] == offset
                                    else now)
                assert g.kafka is not None
                g.kafka[tp] = seen[(name, tp)]
        self._kafka_seen = seen
        self._kafka_groups = {name for name, g in raw.items() if g.kafka}

    def _used_offsets(self, name: str, raw: _RawGroup
                      ) -> dict[TopicPartition, tuple[int, float, str]]:
        """The offset each partition's lag and status are of, its commit time and store."""
        if raw.kafka is None:
            return {}  # Kafka's unknown: so is the lag
        said = set(raw.declared)
        pending: str | None
        if raw.declared and None not in said:
            # Every member says where it commits (zkconsumer's do): taken as said, members
            # that differ (a rolling change of offsets.storage) making it both.
            verdict = store = str(said.pop()) if len(said) == 1 else "dual"
            pending = None
        else:
            verdict = offset_store({tp: o for tp, (o, _) in raw.offsets.items()},
                                   {tp: o for tp, (o, _) in raw.kafka.items()})
            store, pending = self._stores.get(name, (verdict, None))
        if verdict == store:
            pending = None
        elif pending == verdict or not raw.offsets or not raw.kafka:
            store, pending = verdict, None  # told twice, or only one store is left
        else:
            pending = verdict
        self._stores[name] = (store, pending)
        out: dict[TopicPartition, tuple[int, float, str]] = {}
        for tp in raw.offsets.keys() | raw.kafka.keys():
            found, source = _used(store, raw.offsets.get(tp), raw.kafka.get(tp))
            if found is not None and source is not None:
                out[tp] = (found[0], found[1], source)
        return out

    def _date_backlogs(self, zk: KazooClient,
                       used: Mapping[str, Mapping[TopicPartition, tuple[int, float, str]]],
                       ends: Mapping[TopicPartition, int]) -> None:
        """Reads from the broker when the message at each committed offset the timelines
        cannot bound was written (a backlog older than the first poll, a quiet partition): at
        most :data:`MAX_STAMP_LOOKUPS` partitions a poll, each once per offset. One pass,
        no sort: only offsets older than their timeline's first point are looked at twice."""
        undated: set[tuple[TopicPartition, int]] = set()
        wanted: dict[TopicPartition, int] = {}
        for offsets in used.values():
            for tp, (offset, _, _) in offsets.items():
                end = ends.get(tp)
                if end is None or offset >= end:
                    continue
                timeline = self._timelines.get(tp)
                if timeline is not None and timeline.bounds(offset):
                    continue
                undated.add((tp, offset))
                if ((tp, offset) not in self._stamps and tp not in wanted
                        and len(wanted) < MAX_STAMP_LOOKUPS):
                    wanted[tp] = offset
        for key in [k for k in self._stamps if k not in undated]:
            del self._stamps[key]
        if not wanted:
            return
        try:
            found = self._message_times(zk, wanted)
        except (ZkConsumerError, OSError, KafkaError) as e:
            log.debug("message timestamps unknown: %s", e)  # the time lags stay estimates
            return
        for tp, offset in wanted.items():
            # None: the message could not be read (retention, a broker down); not asked again
            # for this offset, so a poll never waits for it twice.
            self._stamps[(tp, offset)] = found.get(tp)

    def failed(self, error: BaseException) -> None:
        """A poll failed (ZooKeeper lost): counted, and the last good values stay served."""
        self.errors += 1
        self._rendered = render(self)

    def _group(self, name: str, raw: _RawGroup,
               used: Mapping[TopicPartition, tuple[int, float, str]],
               partitions: Mapping[str, list[int]], ends: Mapping[TopicPartition, int],
               now: float) -> GroupLag:
        mentioned = [*raw.offsets, *raw.owners, *(raw.kafka or ())]
        topics = sorted({tp.topic for tp in mentioned})
        rows = []
        for topic in topics:
            # Partitions the registry knows, and any with an offset or owner beyond them.
            known = set(partitions.get(topic, ())) | {
                tp.partition for tp in mentioned if tp.topic == topic}
            for p in sorted(known):
                rows.append(self._partition(name, TopicPartition(topic, p), raw, used, ends,
                                            now))
        store = self._stores.get(name, ("zookeeper", None))[0]
        if raw.kafka is None:
            return GroupLag(name, raw.members, rows, "UNKNOWN",
                            f"committed offsets in Kafka unknown: {self.kafka_error}", store)
        status = group_status(r.status for r in rows)
        if all(r.offset is None for r in rows):
            status = "NOTFOUND"  # nothing committed yet: no lag to tell, not a lag of 0
        return GroupLag(name, raw.members, rows, status,
                        self._unknown_reason(rows) if status == "UNKNOWN" else None, store)

    def _unknown_reason(self, rows: Sequence[PartitionLag]) -> str:
        unknown = [r for r in rows if r.status == "UNKNOWN"]
        if self.log_end_error is not None:
            return f"log end offsets unknown: {self.log_end_error}"
        named = ", ".join(f"{r.topic}-{r.partition}" for r in unknown[:3])
        more = f" and {len(unknown) - 3} more" if len(unknown) > 3 else ""
        return f"no log end for {named}{more} (not in /brokers/topics?)"

    def _partition(self, group: str, tp: TopicPartition, raw: _RawGroup,
                   used: Mapping[TopicPartition, tuple[int, float, str]],
                   ends: Mapping[TopicPartition, int], now: float) -> PartitionLag:
        zk_offset = raw.offsets[tp][0] if tp in raw.offsets else None
        kafka = raw.kafka.get(tp) if raw.kafka is not None else None
        kafka_offset = kafka[0] if kafka is not None else None
        end = ends.get(tp)
        owner = raw.owners.get(tp)
        key = (group, tp)
        self._seen.add(key)
        if raw.kafka is None:  # Kafka's offsets unknown: the window waits for them
            return PartitionLag(tp.topic, tp.partition, zk_offset, end, None, owner,
                                "UNKNOWN", None, zk_offset, None)
        committed = used.get(tp)
        if committed is None:
            self._windows.pop(key, None)
            return PartitionLag(tp.topic, tp.partition, None, end, None, owner, "NOTFOUND")
        offset, committed_at, source = committed
        lag = partition_lag(offset, end)
        window = self._windows.setdefault(key, deque(maxlen=self.window))
        if window and window[-1].store != source and (
                self._stores[group][0] != "dual"):
            window.clear()  # the group moved to another store: its history is the other's
        elif window and offset < window[-1].offset and raw.members == 0:
            window.clear()  # set back with nobody registered: an operator's reset
        window.append(Observation(now, offset, lag, committed_at, source))
        status = "UNKNOWN" if end is None else evaluate_partition(window, self.window, now)
        return PartitionLag(tp.topic, tp.partition, offset, end, lag, owner, status,
                            self._time_lag(tp, offset, end, now), zk_offset, kafka_offset,
                            source)

    def _time_lag(self, tp: TopicPartition, offset: int, end: int | None,
                  now: float) -> float | None:
        """The message's own time where it was read, else the timeline's estimate."""
        if end is None:
            return None
        stamp = self._stamps.get((tp, offset))
        if stamp is not None and offset < end:
            return round(max(0.0, now - stamp), 3)
        timeline = self._timelines.get(tp)
        found = timeline.time_lag(offset, now) if timeline is not None else None
        return None if found is None else round(found.seconds, 3)


    def _forget_gone(self, groups: Sequence[GroupLag]) -> None:
        seen, self._seen = self._seen, set()  # the keys _partition met this poll
        for key in [k for k in self._windows if k not in seen]:
            del self._windows[key]
        polled = {tp for _, tp in seen}
        for tp in [tp for tp in self._timelines if tp not in polled]:
            del self._timelines[tp]
        names = {g.group for g in groups}
        for name in [n for n in self._stores if n not in names]:
            del self._stores[name]

    def render(self) -> bytes:
        """The Prometheus text exposition of the last poll (made by :meth:`poll`)."""
        return self._rendered


# --------------------------------------------------------------------------------------
# Reading ZooKeeper, pipelined
# --------------------------------------------------------------------------------------


class ZkCache:
    """Znodes read once and read again only when ZooKeeper says they changed.

    Every read sets a watch; a watch firing (kazoo's event thread) marks its path dirty,
    and the next read of it goes to ZooKeeper again (and sets a new watch). A missing
    znode is watched with ``exists``, which fires when it is created. So a poll reads only
    what changed since the last one: the offsets committed since, the owners and members
    that moved. Reads are pipelined, :data:`PIPELINE` requests in flight at most.

    ``_lock`` guards ``_dirty`` (written by kazoo's thread); the cached answers are read
    and written by the polling thread only. One client per cache: a new session (whose
    watches are gone) needs a new cache.
    """

    def __init__(self, zk: KazooClient) -> None:
        self.zk = zk
        self._lock = threading.Lock()
        self._dirty: set[tuple[str, str]] = set()  # (kind, path)
        self._answers: dict[tuple[str, str], Any] = {}
        self.reads = 0  # requests sent to ZooKeeper (for the benchmark)

    def _fired(self, kind: str) -> Callable[[Any], None]:
        def fired(event: Any) -> None:
            with self._lock:
                self._dirty.add((kind, event.path))
        return fired

    def changed(self, kind: str, path: str) -> bool:
        """Whether ZooKeeper said ``path`` changed since it was last read (its next read
        goes to ZooKeeper)."""
        with self._lock:
            return (kind, path) in self._dirty

    def read(self, kind: str, paths: Sequence[str]) -> list[Any]:
        """The answers for ``paths`` in order: child lists (``kind`` "children") or
        ``(data, stat)`` ("get"); None for a missing znode."""
        with self._lock:
            dirty, self._dirty = {k for k in self._dirty if k[0] == kind}, {
                k for k in self._dirty if k[0] != kind}
        wanted = [p for p in paths if (kind, p) not in self._answers or (kind, p) in dirty]
        asked = set(paths)
        for key in dirty:
            if key[1] not in asked:
                self._answers.pop(key, None)  # not wanted any more: read anew if it is
        self._fetch(kind, wanted)
        return [self._answers.get((kind, p)) for p in paths]

    def _fetch(self, kind: str, paths: Sequence[str]) -> None:
        fired = self._fired(kind)
        for start in range(0, len(paths), PIPELINE):
            batch = paths[start:start + PIPELINE]
            pending = [self.zk.get_children_async(p, watch=fired) if kind == "children"
                       else self.zk.get_async(p, watch=fired) for p in batch]
            missing = []
            for path, result in zip(batch, pending, strict=True):
                try:
                    self._answers[(kind, path)] = result.get()
                except NoNodeError:
                    self._answers[(kind, path)] = None
                    missing.append(path)
            # Told when it is created (a read of a missing znode sets no watch).
            watches = [self.zk.exists_async(p, watch=fired) for p in missing]
            for path, result in zip(missing, watches, strict=True):
                if result.get() is not None:  # created meanwhile: read it next time
                    with self._lock:
                        self._dirty.add((kind, path))
            self.reads += len(batch) + len(missing)


def read_groups(zk: KazooClient | ZkCache, groups: Sequence[str] | None = None,
                warned: set[str] | None = None) -> dict[str, _RawGroup]:
    """Every group's offsets (with commit times), owners and number of members. A znode
    that does not decode is left out, with a warning the first time (``warned``: the
    paths already warned about, kept by the caller across polls). Given a :class:`ZkCache`,
    only what changed since its last read is read again."""
    cache = zk if isinstance(zk, ZkCache) else ZkCache(zk)
    warned = set() if warned is None else warned
    if groups is not None:
        names = list(groups)
    else:
        names = sorted(cache.read("children", [zp.CONSUMERS])[0] or [])
    raw = {g: _RawGroup() for g in names}
    dirs = [d for g in names for d in (zp.offsets_dir(g), zp.owners_dir(g), zp.ids_dir(g))]
    answers = cache.read("children", dirs)
    topic_dirs: list[str] = []
    kinds: list[tuple[str, str, str]] = []  # (group, "offsets"|"owners", topic)
    id_paths: list[tuple[str, str]] = []
    for i, g in enumerate(names):
        offset_topics, owner_topics, ids = answers[3 * i:3 * i + 3]
        raw[g].members = len(ids or [])
        id_paths += [(g, zp.id_path(g, c)) for c in ids or []]
        for what, topics in (("offsets", offset_topics), ("owners", owner_topics)):
            for topic in topics or []:
                topic_dirs.append(zp.offsets_topic_dir(g, topic) if what == "offsets"
                                  else zp.owners_topic_dir(g, topic))
                kinds.append((g, what, topic))
    for (g, path), answer in zip(id_paths, cache.read("get", [p for _, p in id_paths]),
                                 strict=True):
        if answer is not None:
            raw[g].declared.append(_declared_store(answer[0], path))
    leaves: list[str] = []
    leaf_keys: list[tuple[str, str, TopicPartition]] = []
    for (g, what, topic), children in zip(kinds, cache.read("children", topic_dirs),
                                          strict=True):
        for child in children or []:
            partition = zp.parse_id(child)
            if partition is None:
                continue  # not a partition: left out, as the tools do
            leaves.append(zp.offset_path(g, topic, partition) if what == "offsets"
                          else zp.owner_path(g, topic, partition))
            leaf_keys.append((g, what, TopicPartition(topic, partition)))
    for (g, what, tp), path, answer in zip(leaf_keys, leaves, cache.read("get", leaves),
                                           strict=True):
        if answer is None:
            continue  # gone meanwhile
        data, stat = answer
        try:
            if what == "offsets":
                raw[g].offsets[tp] = (zp.decode_offset(data, path), stat.mtime / 1000)
            else:
                raw[g].owners[tp] = zp.decode_owner(data, path)
        except ZkDataError as e:
            if path not in warned:
                warned.add(path)
                log.warning("left out: %s", e)
    return raw


def _declared_store(data: bytes, path: str) -> str | None:
    """Where the member of the ids znode says it commits (None: not said, or undecodable:
    the offsets tell instead)."""
    try:
        return zp.ConsumerRegistration.decode(data, path).offsets_storage
    except ZkDataError:
        return None


def topic_partition_map(zk: KazooClient | ZkCache, topics: Sequence[str]
                        ) -> dict[str, list[int]]:
    """Each topic's partitions from /brokers/topics (topics not there, or whose znode does
    not decode, left out)."""
    cache = zk if isinstance(zk, ZkCache) else ZkCache(zk)
    out: dict[str, list[int]] = {}
    answers = cache.read("get", [zp.topic_path(t) for t in topics])
    for topic, answer in zip(topics, answers, strict=True):
        if answer is None:
            continue
        try:
            out[topic] = sorted(zp.TopicAssignment.decode(answer[0],
                                                          zp.topic_path(topic)).partitions)
        except ZkDataError as e:
            log.warning("%s", e)
    return out


# --------------------------------------------------------------------------------------
# The exposition
# --------------------------------------------------------------------------------------

_HELP = {
    "zkconsumer_group_partition_offset": "Committed offset in each store the group has "
    "one in (store: zookeeper or kafka)",
    "zkconsumer_group_partition_lag": "Log end offset minus the store's committed offset",
    "zkconsumer_group_partition_time_lag_seconds": "Age of the oldest message not committed "
    "(estimated from the log ends seen at each poll; absent when it cannot be told)",
    "zkconsumer_group_partition_owner": "1 for the thread owning the partition",
    "zkconsumer_group_partition_status": "Burrow-style status code of the partition "
    "(NOTFOUND 0, OK 1, WARN 2, STOP 4, STALL 5, REWIND 6, UNKNOWN 7)",
    "zkconsumer_partition_log_end_offset": "Log end offset of the partition",
    "zkconsumer_group_lag": "Sum of the group's partition lags, of its offset store (absent "
    "when one is unknown, or nothing is committed)",
    "zkconsumer_group_max_lag": "Largest partition lag of the group, of its offset store "
    "(absent when one is unknown, or nothing is committed)",
    "zkconsumer_group_max_time_lag_seconds": "Largest partition time lag of the group "
    "(absent when one cannot be told)",
    "zkconsumer_group_offset_store": "1 for the store the group's lag and status are of "
    "(zookeeper, kafka, or dual: both, each partition's larger lag)",
    "zkconsumer_group_members": "Registered members of the group",
    "zkconsumer_group_unowned_partitions": "Partitions of the group's topics with no owner",
    "zkconsumer_group_status_code": "Burrow-style status code of the group (NOTFOUND 0: "
    "nothing committed, OK 1, WARN 2, ERR 3, STOP 4, STALL 5, UNKNOWN 7)",
    "zkconsumer_group_status": "1 for the group's current status",
    "zkconsumer_exporter_groups": "Groups seen at the last poll",
    "zkconsumer_exporter_poll_duration_seconds": "Duration of the last poll",
    "zkconsumer_exporter_last_poll_timestamp_seconds": "When the last poll finished",
    "zkconsumer_exporter_polls_total": "Polls made",
    "zkconsumer_exporter_poll_errors_total": "Polls that failed (ZooKeeper lost)",
    "zkconsumer_exporter_log_end_up": "1 when the brokers gave the log ends at the last poll",
    "zkconsumer_exporter_kafka_offsets_up": "1 when Kafka gave the groups' committed offsets "
    "at the last poll",
}
_COUNTERS = {"zkconsumer_exporter_polls_total", "zkconsumer_exporter_poll_errors_total"}


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def render(monitor: LagMonitor) -> bytes:
    """Every metric of the monitor's last poll, as Prometheus text (version 0.0.4)."""
    lines: dict[str, list[str]] = {name: [] for name in _HELP}

    def add(name: str, labels: str, value: float | int) -> None:
        lines[name].append(f"{name}{{{labels}}} {value}" if labels else f"{name} {value}")

    ends: dict[tuple[str, int], int] = {}
    # The partition samples are most of the text: appended straight to their lists, each
    # topic's label escaped once.
    offsets = lines["zkconsumer_group_partition_offset"]
    lags = lines["zkconsumer_group_partition_lag"]
    ages = lines["zkconsumer_group_partition_time_lag_seconds"]
    owners = lines["zkconsumer_group_partition_owner"]
    statuses = lines["zkconsumer_group_partition_status"]
    topic_labels: dict[str, str] = {}
    for g in monitor.groups:
        gl = f'group="{_label(g.group)}"'
        for p in g.partitions:
            tl = topic_labels.get(p.topic)
            if tl is None:
                tl = topic_labels[p.topic] = _label(p.topic)
            pl = f'{gl},topic="{tl}",partition="{p.partition}"'
            end = p.log_end_offset
            known = end is not None and p.status != "UNKNOWN"
            for store, offset in (("zookeeper", p.zookeeper_offset), ("kafka", p.kafka_offset)):
                if offset is None:
                    continue
                offsets.append(f'zkconsumer_group_partition_offset{{{pl},store="{store}"}} '
                               f'{offset}')
                if known:
                    lags.append(f'zkconsumer_group_partition_lag{{{pl},store="{store}"}} '
                                f'{partition_lag(offset, end)}')
            if p.time_lag is not None:
                ages.append(f"zkconsumer_group_partition_time_lag_seconds{{{pl}}} {p.time_lag}")
            if p.owner is not None:
                owners.append(f'zkconsumer_group_partition_owner{{{pl},owner="'
                              f'{_label(p.owner)}"}} 1')
            statuses.append(f"zkconsumer_group_partition_status{{{pl}}} "
                            f"{STATUS_CODES[p.status]}")
            if end is not None:
                ends[(p.topic, p.partition)] = end
        if g.total_lag is not None and g.max_lag is not None:  # an unknown lag: no sample
            add("zkconsumer_group_lag", gl, g.total_lag)
            add("zkconsumer_group_max_lag", gl, g.max_lag)
        if g.max_time_lag is not None:
            add("zkconsumer_group_max_time_lag_seconds", gl, g.max_time_lag)
        add("zkconsumer_group_offset_store", f'{gl},store="{g.store}"', 1)
        add("zkconsumer_group_members", gl, g.members)
        add("zkconsumer_group_unowned_partitions", gl, g.unowned)
        add("zkconsumer_group_status_code", gl, STATUS_CODES[g.status])
        add("zkconsumer_group_status", f'{gl},status="{g.status}"', 1)
    for (topic, partition), end in sorted(ends.items()):
        add("zkconsumer_partition_log_end_offset",
            f'topic="{_label(topic)}",partition="{partition}"', end)
    add("zkconsumer_exporter_groups", "", len(monitor.groups))
    add("zkconsumer_exporter_poll_duration_seconds", "", round(monitor.poll_seconds, 6))
    add("zkconsumer_exporter_last_poll_timestamp_seconds", "", round(monitor.polled_at, 3))
    add("zkconsumer_exporter_polls_total", "", monitor.polls)
    add("zkconsumer_exporter_poll_errors_total", "", monitor.errors)
    add("zkconsumer_exporter_log_end_up", "", 0 if monitor.log_end_error else 1)
    add("zkconsumer_exporter_kafka_offsets_up", "", 0 if monitor.kafka_error else 1)
    out: list[str] = []
    for name, samples in lines.items():
        kind = "counter" if name in _COUNTERS else "gauge"
        out += [f"# HELP {name} {_HELP[name]}", f"# TYPE {name} {kind}", *samples]
    return ("\n".join(out) + "\n").encode()


# --------------------------------------------------------------------------------------
# Serving
# --------------------------------------------------------------------------------------


class ExporterServer:
    """Serves :meth:`LagMonitor.render` on ``/metrics`` (404 elsewhere) in daemon threads,
    as a connector serves its metrics (the same bounded, time-limited connections)."""

    def __init__(self, monitor: LagMonitor, port: int, addr: str = "127.0.0.1") -> None:
        family = socket.getaddrinfo(addr, port, type=socket.SOCK_STREAM,
                                    flags=socket.AI_PASSIVE)[0][0]
        server_class = type("_Server", (MetricsServer,), {"address_family": family})
        handler = type("_Handler", (QuietHandler,), {"timeout": CLIENT_TIMEOUT_S})
        self._server = server_class((addr, port), handler)
        self._server.set_app(self._app)
        self._monitor = monitor
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.2},
                                        name="exporter-http", daemon=True)
        self._thread.start()

    def _app(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        if environ.get("PATH_INFO", "") != METRICS_PATH:
            start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
            return [f"not found: the metrics are on {METRICS_PATH}\n".encode()]
        body = self._monitor.render()
        start_response("200 OK", [("Content-Type", CONTENT_TYPE),
                                  ("Content-Length", str(len(body)))])
        return [body]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


#: The Prometheus text exposition's content type.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
