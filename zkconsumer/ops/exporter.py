"""Lag monitoring of every ZooKeeper consumer group, with a status evaluated as Burrow does.

:class:`LagMonitor` polls ZooKeeper (every group's committed offsets with the time of their
last commit, owners and registered members, pipelined) and the brokers (the log end of every
partition involved) once per interval. Each partition keeps a sliding window of its last
``window`` observations (when seen, committed offset, lag, time of the last commit) and gets
a status by Burrow's rules, in this order:

1. no committed offset: ``NOTFOUND``; a lag of 0 now: ``OK``;
2. the committed offset went back within the window: ``REWIND``;
3. (a full window only) no commit for longer than the window's commits span (now minus the
   last commit's time greater than the last commit's time minus the oldest's): ``STOP``;
4. (a full window only) commits made but the offset not moving, lag > 0: ``STALL``;
5. (a full window only) the offset moving but the lag never falling between two
   observations: ``WARN``;
6. otherwise ``OK`` (so too while the window is not full: not enough data to say more).

A partition with a committed offset whose log end is unknown (the brokers did not answer)
is ``UNKNOWN``: its lag is None, never 0. A group's status is its worst partition's:
OK < WARN < STOP < STALL < ERR < UNKNOWN, where a REWIND partition makes the group ERR; an
UNKNOWN group's lag is None and its ``reason`` says why. (Burrow itself reports STOP and
STALL partitions as a group ERR; the group's status here says which.) Codes, as Burrow
numbers them: NOTFOUND 0, OK 1, WARN 2, ERR 3, STOP 4, STALL 5, REWIND 6; and UNKNOWN 7,
which Burrow does not have.

The time of a commit is the offset znode's modification time: the ZooKeeper consumers
(this one and the JVM's) write an offset only when it changed, so a consumer that stopped
committing leaves it still. Offsets the groups keep in Kafka (``offsets.storage=kafka``) are
not read: the monitor watches ZooKeeper's.

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

    @property
    def unowned(self) -> int:
        return sum(1 for p in self.partitions if p.owner is None)

    @property
    def lag_known(self) -> bool:
        """Whether every partition with a committed offset has a known lag."""
        return all(p.lag is not None for p in self.partitions if p.offset is not None)

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

    def to_json(self) -> dict[str, Any]:
        return {"group": self.group, "members": self.members, "status": self.status,
                "status_reason": self.reason,
                "total_lag": self.total_lag, "max_lag": self.max_lag,
                "unowned_partitions": self.unowned,
                "partitions": [p.__dict__ for p in self.partitions]}


@dataclass
class _RawGroup:
    """What ZooKeeper holds for one group: offset -> (value, commit time), owners, members."""

    offsets: dict[TopicPartition, tuple[int, float]] = field(default_factory=dict)
    owners: dict[TopicPartition, str] = field(default_factory=dict)
    members: int = 0


class LagMonitor:
    """Polls every group's offsets and the log ends, keeps each partition's window.

    Used from one thread (the poller); :meth:`render`'s bytes are made by :meth:`poll` and
    read by the serving threads as one reference (no lock needed: a reference swap).
    """

    def __init__(
        self, *, window: int = DEFAULT_WINDOW,
        log_ends: Callable[[KazooClient, Sequence[TopicPartition]], Mapping[TopicPartition, int]]
        | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if window < 2:
            raise ZkConsumerError(f"the window must hold at least 2 observations, got {window}")
        self.window = window
        self._log_ends = log_ends or (lambda zk, tps: brokers.log_ends(zk, tps))
        self._clock = clock
        self._windows: dict[tuple[str, TopicPartition], deque[Observation]] = {}
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
        topics = sorted({tp.topic for g in raw.values()
                         for tp in [*g.offsets, *g.owners]})
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
        out = [self._group(name, g, partitions, ends, now) for name, g in sorted(raw.items())]
        self._forget_gone(out)
        self.groups = out
        self.polled_at = now
        self.poll_seconds = time.monotonic() - start
        self.polls += 1
        self._rendered = render(self)
        return out

    def failed(self, error: BaseException) -> None:
        """A poll failed (ZooKeeper lost): counted, and the last good values stay served."""
        self.errors += 1
        self._rendered = render(self)

    def _group(self, name: str, raw: _RawGroup, partitions: Mapping[str, list[int]],
               ends: Mapping[TopicPartition, int], now: float) -> GroupLag:
        topics = sorted({tp.topic for tp in [*raw.offsets, *raw.owners]})
        rows = []
        for topic in topics:
            # Partitions the registry knows, and any with an offset or owner beyond them.
            known = set(partitions.get(topic, ())) | {
                tp.partition for tp in [*raw.offsets, *raw.owners] if tp.topic == topic}
            for p in sorted(known):
                rows.append(self._partition(name, TopicPartition(topic, p), raw, ends, now))
        status = group_status(r.status for r in rows)
        return GroupLag(name, raw.members, rows, status,
                        self._unknown_reason(rows) if status == "UNKNOWN" else None)

    def _unknown_reason(self, rows: Sequence[PartitionLag]) -> str:
        unknown = [r for r in rows if r.status == "UNKNOWN"]
        if self.log_end_error is not None:
            return f"log end offsets unknown: {self.log_end_error}"
        named = ", ".join(f"{r.topic}-{r.partition}" for r in unknown[:3])
        more = f" and {len(unknown) - 3} more" if len(unknown) > 3 else ""
        return f"no log end for {named}{more} (not in /brokers/topics?)"

    def _partition(self, group: str, tp: TopicPartition, raw: _RawGroup,
                   ends: Mapping[TopicPartition, int], now: float) -> PartitionLag:
        committed = raw.offsets.get(tp)
        end = ends.get(tp)
        key = (group, tp)
        if committed is None:
            self._windows.pop(key, None)
            return PartitionLag(tp.topic, tp.partition, None, end, None, raw.owners.get(tp),
                                "NOTFOUND")
        offset, committed_at = committed
        lag = partition_lag(offset, end)
        window = self._windows.setdefault(key, deque(maxlen=self.window))
        window.append(Observation(now, offset, lag, committed_at))
        status = "UNKNOWN" if end is None else evaluate_partition(window, self.window, now)
        return PartitionLag(tp.topic, tp.partition, offset, end, lag, raw.owners.get(tp),
                            status)

    def _forget_gone(self, groups: Sequence[GroupLag]) -> None:
        seen = {(g.group, TopicPartition(p.topic, p.partition))
                for g in groups for p in g.partitions}
        for key in [k for k in self._windows if k not in seen]:
            del self._windows[key]

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
    for i, g in enumerate(names):
        offset_topics, owner_topics, ids = answers[3 * i:3 * i + 3]
        raw[g].members = len(ids or [])
        for what, topics in (("offsets", offset_topics), ("owners", owner_topics)):
            for topic in topics or []:
                topic_dirs.append(zp.offsets_topic_dir(g, topic) if what == "offsets"
                                  else zp.owners_topic_dir(g, topic))
                kinds.append((g, what, topic))
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
    "zkconsumer_group_partition_offset": "Committed offset in ZooKeeper",
    "zkconsumer_group_partition_lag": "Log end offset minus committed offset",
    "zkconsumer_group_partition_owner": "1 for the thread owning the partition",
    "zkconsumer_group_partition_status": "Burrow-style status code of the partition "
    "(NOTFOUND 0, OK 1, WARN 2, STOP 4, STALL 5, REWIND 6, UNKNOWN 7)",
    "zkconsumer_partition_log_end_offset": "Log end offset of the partition",
    "zkconsumer_group_lag": "Sum of the group's partition lags (absent when one is unknown)",
    "zkconsumer_group_max_lag": "Largest partition lag of the group (absent when one is "
    "unknown)",
    "zkconsumer_group_members": "Registered members of the group",
    "zkconsumer_group_unowned_partitions": "Partitions of the group's topics with no owner",
    "zkconsumer_group_status_code": "Burrow-style status code of the group (OK 1, WARN 2, "
    "ERR 3, STOP 4, STALL 5, UNKNOWN 7)",
    "zkconsumer_group_status": "1 for the group's current status",
    "zkconsumer_exporter_groups": "Groups seen at the last poll",
    "zkconsumer_exporter_poll_duration_seconds": "Duration of the last poll",
    "zkconsumer_exporter_last_poll_timestamp_seconds": "When the last poll finished",
    "zkconsumer_exporter_polls_total": "Polls made",
    "zkconsumer_exporter_poll_errors_total": "Polls that failed (ZooKeeper lost)",
    "zkconsumer_exporter_log_end_up": "1 when the brokers gave the log ends at the last poll",
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
    for g in monitor.groups:
        gl = f'group="{_label(g.group)}"'
        for p in g.partitions:
            pl = f'{gl},topic="{_label(p.topic)}",partition="{p.partition}"'
            if p.offset is not None:
                add("zkconsumer_group_partition_offset", pl, p.offset)
            if p.lag is not None:
                add("zkconsumer_group_partition_lag", pl, p.lag)
            if p.owner is not None:
                add("zkconsumer_group_partition_owner", f'{pl},owner="{_label(p.owner)}"', 1)
            add("zkconsumer_group_partition_status", pl, STATUS_CODES[p.status])
            if p.log_end_offset is not None:
                ends[(p.topic, p.partition)] = p.log_end_offset
        if g.total_lag is not None and g.max_lag is not None:  # an unknown lag: no sample
            add("zkconsumer_group_lag", gl, g.total_lag)
            add("zkconsumer_group_max_lag", gl, g.max_lag)
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
