"""``zkconsumer compare``: the legacy ZooKeeper group against the broker-coordinated group.

The same workload runs twice on one topic, first through a zkconsumer group, then through a
kafka-python ``KafkaConsumer`` group, with the same member count, the same assignor family
(zkconsumer's ``range``, kafka-python's ``RangePartitionAssignor``), the same session
timeout and auto-commit interval, and the same membership changes:

1. ``initial``: N members start; the time until the group owns every partition;
2. ``backlog``: a backlog of ``--messages`` messages is produced while the members are held
   (zkconsumer streams not iterated, kafka-python partitions paused), then released at once:
   throughput is the backlog over the time from the release to its last first delivery;
3. then, while a paced producer writes ``--rate`` messages per second:
   ``join`` (one member more), ``leave`` (one member shuts down cleanly: SIGTERM, it commits
   and leaves), ``kill`` (one member is SIGKILLed: nothing committed since its last
   auto-commit, its ZooKeeper session or group session has to time out; the kill comes half
   an auto-commit interval after the previous change settled plus the dwell, so that it does
   not line up with kafka-python's commit schedule, which restarts at every rebalance);
4. the producer stops, the survivors drain the log, everyone stops cleanly.

Every member is a subprocess (``python -m zkconsumer.migration.compare_member member ...``:
:mod:`zkconsumer.migration.compare_member`) so that the kill is real. Members report on stdout,
one line per event, with their own wall-clock time: ``R t`` ready, ``A t p,p,..`` their
assignment whenever it changes, ``M t p o`` each message handed to the application, ``E t``
a clean exit. kafka-python members write a poll batch's
lines before the next poll, so before the consumer could commit past them. zkconsumer members
write each message's line as ``next()`` returns it; the iterator has advanced the consumed
offset by then, so a kill in those microseconds, just after an auto-commit, could count one
message as lost that was handed out. Otherwise a message the harness did not see was never
committed by the member that got it.

After each change the harness waits until the live members own every partition exactly once,
each live member owns at least one, and no assignment changed for a quiet period; the time to
full reassignment is the last assignment event before that, minus the change. Lost messages
are the offsets between the run's start and end log offsets that no member reported;
duplicates are reports beyond the first per offset.

:func:`run_compare` returns a :class:`~zkconsumer.migration.compare_settings.CompareResult`;
:func:`~zkconsumer.migration.compare_report.write_report` writes ``report.md``, ``compare.png``
(matplotlib, Agg) and ``compare.json``. Nothing here prints
except the member processes' protocol lines and the ``progress`` callback.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Protocol

from zkconsumer._errors import AdminError, CompareError, GroupActiveError, UnknownGroupError
from zkconsumer._types import TopicPartition
from zkconsumer.broker.clients import kafka_producer, log_end_offsets, modern_admin
from zkconsumer.consumer.assignors.core import assign
from zkconsumer.consumer.offsets import ZkOffsetStore
from zkconsumer.migration.compare_member import member_argv
from zkconsumer.migration.compare_report import write_report
from zkconsumer.migration.compare_settings import (
    ChangeResult,
    CompareResult,
    CompareSettings,
    ProtocolResult,
)
from zkconsumer.ops.groups import delete_group
from zkconsumer.ops.kafka_store import write_kafka_offsets
from zkconsumer.zk.session import command_config, connect

log = logging.getLogger("zkconsumer.compare")



class _Member:
    """A member subprocess and what it reported.

    ``_lock`` guards ``assignment``, ``assigned_at``, ``history``, ``messages``,
    ``ready_at`` and ``exited``; the reader thread is their only writer. ``killed`` and
    ``stopped_at`` belong to the harness thread.
    """

    def __init__(self, name: str, protocol: str, settings: CompareSettings, group: str,
                 go: bool, log_dir: Path) -> None:
        self.name = name
        self.protocol = protocol
        self._lock = threading.Lock()
        self.assignment: set[int] = set()
        self.assigned_at = 0.0
        self.history: list[tuple[float, list[int]]] = []  # every assignment it reported
        self.ready_at: float | None = None
        self.messages: list[tuple[float, int, int]] = []  # (time, partition, offset)
        self.exited = False
        self.killed = False
        self.stopped_at: float | None = None
        cmd = [sys.executable, "-m", "zkconsumer.migration.compare_member",
               *member_argv(name, protocol, settings, group, go)]
        self._stderr: IO[bytes] = open(log_dir / f"{protocol}-{name}.log", "wb")
        # The member imports this very package, wherever it was imported from.
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, env=env,
        )
        self._reader = threading.Thread(target=self._read, name=f"read-{name}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            parts = raw.decode(errors="replace").split()
            if not parts:
                continue
            kind = parts[0]
            try:
                t = float(parts[1])
                with self._lock:
                    if kind == "M":
                        self.messages.append((t, int(parts[2]), int(parts[3])))
                    elif kind == "A":
                        self.assignment = (
                            {int(p) for p in parts[2].split(",")} if len(parts) > 2 else set()
                        )
                        self.assigned_at = t
                        self.history.append((t, sorted(self.assignment)))
                    elif kind == "R":
                        self.ready_at = t
                    elif kind == "E":
                        self.exited = True
            except (IndexError, ValueError):
                log.warning("member %s: bad line %r", self.name, raw)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None and not self.killed and self.stopped_at is None

    def snapshot(self) -> tuple[set[int], float]:
        with self._lock:
            return set(self.assignment), self.assigned_at

    def message_count(self) -> int:
        with self._lock:
            return len(self.messages)

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"GO\n")
        self.proc.stdin.flush()

    def terminate(self) -> None:
        """A clean stop: SIGTERM; the member commits and leaves."""
        self.stopped_at = time.time()
        self.proc.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL: no commit, no goodbye; the session has to time out."""
        self.killed = True
        self.stopped_at = time.time()
        self.proc.kill()

    def wait(self, timeout: float) -> bool:
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        self._reader.join(timeout=5)
        return True

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self._reader.join(timeout=5)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        self._stderr.close()


class _PacedProducer:
    """Produces ``rate`` messages per second round-robin over the partitions until stopped.

    Only the producer thread touches the KafkaProducer; ``sent`` is read after ``stop()``.
    """

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float,
                 tag: str, kafka: Mapping[str, Any]) -> None:
        self._args = (bootstrap, topic, partitions, rate, tag)
        self._kafka = kafka
        self._stop = threading.Event()
        self.sent = 0
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="paced-producer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        bootstrap, topic, partitions, rate, tag = self._args
        producer = kafka_producer(**self._kafka, bootstrap_servers=bootstrap.split(","),
                                 linger_ms=5, acks=1, enable_idempotence=False)
        try:
            start = time.monotonic()
            while not self._stop.is_set():
                due = int((time.monotonic() - start) * rate)
                while self.sent < due:
                    producer.send(topic, value=f"{tag}:{self.sent}".encode(),
                                  partition=self.sent % partitions)
                    self.sent += 1
                producer.flush(timeout=30)
                self._stop.wait(0.02)
            producer.flush(timeout=30)
        except BaseException as e:  # noqa: BLE001 - reported by the run
            self.error = e
        finally:
            producer.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)


def _produce(bootstrap: str, topic: str, partitions: int, n: int, tag: str,
             kafka: Mapping[str, Any]) -> None:
    producer = kafka_producer(**kafka, bootstrap_servers=bootstrap.split(","), linger_ms=10,
                             acks=1, enable_idempotence=False, batch_size=65536)
    try:
        for i in range(n):
            producer.send(topic, value=f"{tag}:{i}".encode(), partition=i % partitions)
        producer.flush(timeout=120)
    finally:
        producer.close()


def _log_ends(bootstrap: str, topic: str, partitions: int,
              kafka: Mapping[str, Any]) -> dict[int, int]:

    ends = log_end_offsets([(topic, p) for p in range(partitions)],
                           bootstrap_servers=bootstrap.split(","), **kafka)
    return {p: int(ends[TopicPartition(topic, p)]) for p in range(partitions)}


def _ensure_topic(settings: CompareSettings, kafka: Mapping[str, Any]) -> int:
    """The topic's partition count, creating the topic (and waiting for it) if needed."""
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError


    admin = modern_admin(settings.bootstrap, kafka=kafka)
    try:
        wanted = settings.partitions or 2 * (settings.members + 1)
        try:
            admin.create_topics([NewTopic(settings.topic, wanted, 1)])
        except TopicAlreadyExistsError:
            pass
        deadline = time.monotonic() + 30
        while True:
            found = [t for t in admin.describe_topics([settings.topic])
                     if not t.get("error_code")]
            if found and found[0].get("partitions"):
                n = len(found[0]["partitions"])
                break
            if time.monotonic() > deadline:
                raise CompareError(f"topic {settings.topic!r} did not appear on the broker")
            time.sleep(0.2)
    finally:
        admin.close()
    if n < settings.members + 1:
        raise CompareError(
            f"topic {settings.topic!r} has {n} partitions; the comparison needs at least "
            f"--members + 1 = {settings.members + 1} so that every member owns one"
        )
    return n


def expected_range(names: Sequence[str], partitions: int) -> dict[str, list[int]]:
    """The range assignment of ``partitions`` over single-thread members ``names``.

    Both protocols sort members by id, and both ids start with the name (zkconsumer:
    ``<group>_<name>-0``; kafka-python: ``<client id = name>-<uuid>``), so one computation
    predicts both.

    >>> expected_range(["m01", "m00"], 3)
    {'m00': [0, 1], 'm01': [2]}
    """
    threads = {f"{n}-0": n for n in names}
    result = assign("range", {"t": sorted(threads)}, {"t": list(range(partitions))})
    out: dict[str, list[int]] = {n: [] for n in sorted(names)}
    for tp, thread in sorted(result.items()):
        out[threads[thread]].append(tp.partition)
    return out


class _Run:
    """One protocol's run of the scenario. Used from one thread (the caller's)."""

    def __init__(self, protocol: str, settings: CompareSettings, partitions: int,
                 log_dir: Path, progress: Callable[[str], None],
                 kafka: Mapping[str, Any]) -> None:
        self.protocol = protocol
        self.s = settings
        self.kafka = kafka  # the brokers' security settings, as kafka-python arguments
        self.partitions = partitions
        self.log_dir = log_dir
        self.progress = progress
        suffix = uuid.uuid4().hex[:8]
        self.group = f"zkc-compare-{'zk' if protocol == 'zookeeper' else 'kafka'}-{suffix}"
        self.tag = f"{protocol}-{suffix}"
        self.members: dict[str, _Member] = {}
        self.errors: list[str] = []
        self.t0 = 0.0
        #: Set before the first write of the group (its start offsets): from then on the
        #: group may exist and must be deleted, however the run ends.
        self.touched = False

    # -- steps ----------------------------------------------------------------------------
    def _commit_start(self, start: Mapping[int, int]) -> None:
        """Both groups start exactly at the run's first offset (no reset policy involved)."""
        tps = {TopicPartition(self.s.topic, p): off for p, off in start.items()}
        if self.protocol == "zookeeper":

            zk = connect(self.s.zookeeper, self.s.connect_timeout_s)
            try:
                ZkOffsetStore(zk, self.group).commit(tps)
            finally:
                zk.stop()
                zk.close()
        else:

            admin = modern_admin(self.s.bootstrap, kafka=self.kafka)
            try:
                write_kafka_offsets(admin, self.group, tps)
            finally:
                admin.close()

    def _spawn(self, name: str, go: bool) -> _Member:
        m = _Member(name, self.protocol, self.s, self.group, go, self.log_dir)
        self.members[name] = m
        return m

    def _live(self) -> list[_Member]:
        return [m for m in self.members.values() if m.alive]

    def _wait_settled(self, since: float) -> tuple[float | None, dict[str, list[int]]]:
        """Wait until the live members own every partition once, each at least one, with no
        assignment change for ``quiet_s``; return (seconds from ``since``, assignment)."""
        deadline = time.time() + self.s.settle_timeout_s
        everything = set(range(self.partitions))
        while True:
            live = self._live()
            snaps = {m.name: m.snapshot() for m in live}
            owned = [p for parts, _ in snaps.values() for p in parts]
            last = max([t for _, t in snaps.values()] + [since])
            assignment = {n: sorted(parts) for n, (parts, _) in sorted(snaps.items())}
            complete = (
                bool(live)
                and len(owned) == len(set(owned))
                and set(owned) == everything
                and all(parts for parts, _ in snaps.values())
            )
            now = time.time()
            if complete and now - last >= self.s.quiet_s:
                return max(0.0, last - since), assignment
            for m in self.members.values():
                if not m.killed and m.stopped_at is None and m.proc.poll() is not None:
                    raise CompareError(
                        f"{self.protocol} member {m.name} exited unexpectedly (code "
                        f"{m.proc.returncode}); see {self.log_dir}/{self.protocol}-{m.name}.log"
                    )
            if now > deadline:
                self.errors.append(
                    f"no full reassignment within {self.s.settle_timeout_s:g} s "
                    f"(last seen: {assignment})"
                )
                return None, assignment
            time.sleep(0.05)

    def _change(self, change: str, member: str | None, at: float) -> ChangeResult:
        took, assignment = self._wait_settled(at)
        expected = expected_range([m.name for m in self._live()], self.partitions)
        result = ChangeResult(change, member, at - self.t0, took, assignment, expected)
        self.progress(
            f"{self.protocol}: {change}{' ' + member if member else ''}: "
            + (f"reassigned in {took:.2f} s" if took is not None else "NOT settled")
            + f" {assignment}"
        )
        return result

    def _delivered(self) -> list[tuple[float, str, int, int]]:
        out: list[tuple[float, str, int, int]] = []
        for m in self.members.values():
            with m._lock:
                out.extend((t, m.name, p, o) for t, p, o in m.messages)
        return out

    def _wait_delivered(self, ranges: Mapping[int, tuple[int, int]], timeout: float) -> bool:
        """Wait until every offset in ``ranges`` (partition -> [lo, hi)) was reported."""
        want = sum(hi - lo for lo, hi in ranges.values())
        deadline = time.time() + timeout
        # Read on from where the last pass stopped: copying every delivery each pass cost
        # the harness most of a core, taken from the members being timed.
        seen: set[tuple[int, int]] = set()
        read: dict[int, int] = {}  # id(member) -> deliveries read
        while True:
            for m in list(self.members.values()):
                with m._lock:
                    new = m.messages[read.get(id(m), 0):]
                    read[id(m)] = len(m.messages)
                seen.update((p, o) for _, p, o in new
                            if p in ranges and ranges[p][0] <= o < ranges[p][1])
            if len(seen) >= want:
                return True
            if time.time() > deadline:
                return False
            time.sleep(0.05)

    def run(self) -> ProtocolResult:
        s = self.s
        names = [f"m{i:02d}" for i in range(s.members + 1)]
        start = _log_ends(s.bootstrap, s.topic, self.partitions, self.kafka)
        self.touched = True
        self._commit_start(start)
        self.t0 = time.time()
        changes: list[ChangeResult] = []
        producer: _PacedProducer | None = None
        drain_s: float | None = None
        produce_s = 0.0
        try:
            # 1. initial membership, held (nothing consumed yet)
            at = time.time()
            for name in names[: s.members]:
                self._spawn(name, go=False)
            changes.append(self._change("initial", None, at))

            # 2. the backlog, then release everyone at once
            t = time.monotonic()
            _produce(s.bootstrap, s.topic, self.partitions, s.messages, f"{self.tag}:b",
                     self.kafka)
            produce_s = time.monotonic() - t
            backlog_end = _log_ends(s.bootstrap, s.topic, self.partitions, self.kafka)
            released = time.time()
            for m in self._live():
                m.go()
            ranges = {p: (start[p], backlog_end[p]) for p in range(self.partitions)}
            if self._wait_delivered(ranges, s.drain_timeout_s + s.messages / 500.0):
                last = max((t for t, _, p, o in self._first_deliveries()
                            if ranges[p][0] <= o < ranges[p][1]), default=released)
                drain_s = max(last - released, 1e-6)
                self.progress(f"{self.protocol}: backlog of {s.messages} drained in "
                              f"{drain_s:.2f} s ({s.messages / drain_s:.0f} msg/s)")
            else:
                self.errors.append(f"the backlog was not drained within "
                                   f"{s.drain_timeout_s + s.messages / 500.0:g} s")

            # 3. membership changes under steady traffic
            producer = _PacedProducer(s.bootstrap, s.topic, self.partitions, s.rate,
                                      f"{self.tag}:p", self.kafka)
            producer.start()
            time.sleep(s.dwell_s)
            joiner = names[s.members]
            at = time.time()
            self._spawn(joiner, go=True)
            changes.append(self._change("join", joiner, at))
            time.sleep(s.dwell_s)
            leaver = names[0]
            self.members[leaver].terminate()
            at = self.members[leaver].stopped_at or time.time()
            changes.append(self._change("leave", leaver, at))
            # Half an auto-commit interval more: kafka-python restarts its commit schedule
            # when a rebalance completes, and quiet_s + dwell_s is often a whole number of
            # intervals; without this the kill would land right after a commit every time
            # and hide the replay a kill causes on average.
            time.sleep(s.dwell_s + s.commit_interval_ms / 2000.0)
            victim = names[1]
            self.members[victim].kill()
            at = self.members[victim].stopped_at or time.time()
            changes.append(self._change("kill", victim, at))
            time.sleep(s.dwell_s)
            producer.stop()
            if producer.error is not None:
                self.errors.append(f"the paced producer failed: {producer.error!r}")
            producer = None

            # 4. drain, then stop everyone cleanly
            end = _log_ends(s.bootstrap, s.topic, self.partitions, self.kafka)
            all_ranges = {p: (start[p], end[p]) for p in range(self.partitions)}
            if not self._wait_delivered(all_ranges, s.drain_timeout_s):
                self.errors.append(f"not everything was delivered within "
                                   f"{s.drain_timeout_s:g} s of the producer stopping")
        finally:
            if producer is not None:
                producer.stop()
            for m in self._live():
                m.terminate()
            for m in self.members.values():
                if not m.wait(timeout=30):
                    self.errors.append(f"member {m.name} did not stop within 30 s; killed")
                m.close()
        duration = time.time() - self.t0
        end = _log_ends(s.bootstrap, s.topic, self.partitions, self.kafka)
        return self._result(changes, start, end, produce_s, drain_s, duration)

    def _first_deliveries(self) -> list[tuple[float, str, int, int]]:
        first: dict[tuple[int, int], tuple[float, str, int, int]] = {}
        for ev in sorted(self._delivered()):
            first.setdefault((ev[2], ev[3]), ev)
        return list(first.values())

    def _result(self, changes: list[ChangeResult], start: Mapping[int, int],
                end: Mapping[int, int], produce_s: float, drain_s: float | None,
                duration: float) -> ProtocolResult:
        delivered = self._delivered()
        counts = Counter((p, o) for _, _, p, o in delivered
                         if start[p] <= o < end[p])
        expected = sum(end[p] - start[p] for p in range(self.partitions))
        unexpected = sum(1 for _, _, p, o in delivered if not start[p] <= o < end[p])
        if unexpected:
            self.errors.append(f"{unexpected} deliveries outside the run's offsets")
        timeline: dict[str, list[tuple[float, int]]] = {}
        for name in self.members:
            times = sorted(t for t, n, _, _ in delivered if n == name)
            timeline[name] = [(t - self.t0, i + 1) for i, t in enumerate(times)]
        by_change: dict[str, int] = dict.fromkeys((c.change for c in changes), 0)
        seen: set[tuple[int, int]] = set()
        for t, _, p, o in sorted(delivered):
            if (p, o) not in seen:
                seen.add((p, o))
                continue
            window = [c.change for c in changes if c.at_s <= t - self.t0]
            key = window[-1] if window else "initial"
            by_change[key] = by_change.get(key, 0) + 1
        history = {}
        for name, m in self.members.items():
            with m._lock:
                history[name] = [(t - self.t0, parts) for t, parts in m.history]
        return ProtocolResult(
            protocol=self.protocol, group=self.group, members=self.s.members,
            partitions=self.partitions, changes=changes, backlog=self.s.messages,
            backlog_produce_s=produce_s, backlog_drain_s=drain_s, produced=expected,
            delivered=len(delivered), unique=len(counts),
            lost=expected - len(counts), duplicated=sum(c - 1 for c in counts.values()),
            duration_s=duration, timeline=timeline, duplicated_by_change=by_change,
            history=history, errors=list(self.errors),
        )


def run_compare(
    settings: CompareSettings, output: Path, progress: Callable[[str], None] | None = None
) -> CompareResult:
    """Run the scenario for each protocol in turn; see the module docstring."""

    settings.validate()
    kafka = command_config(settings.command_config)  # checked before anything starts
    say = progress or (lambda _msg: None)
    _check_zookeeper(settings)  # before the topic is created: a bad address leaves nothing
    partitions = _ensure_topic(settings, kafka)
    log_dir = output / "members"
    log_dir.mkdir(parents=True, exist_ok=True)
    results: list[ProtocolResult] = []
    runs: list[_Run] = []
    protocol = ""
    try:
        for protocol in settings.protocols:
            say(f"{protocol}: {settings.members} members on {settings.topic} "
                f"({partitions} partitions)")
            runs.append(_Run(protocol, settings, partitions, log_dir, say, kafka))
            results.append(runs[-1].run())
    except BaseException as e:
        try:
            if results:  # what completed is still worth having
                why = ("interrupted" if isinstance(e, KeyboardInterrupt)
                       else f"{protocol} run failed: {e}")
                _write_partial(CompareResult(settings, results,
                                             time.strftime("%Y-%m-%d %H:%M:%S"),
                                             incomplete=why), output, say)
        finally:  # even on a second Ctrl-C while the report is written
            _forget_groups(settings, runs, kafka, say)
        raise
    # Every run completed: the report is kept even if the clean-up is interrupted.
    try:
        _forget_groups(settings, runs, kafka, say)
    except BaseException:
        _write_partial(CompareResult(settings, results, time.strftime("%Y-%m-%d %H:%M:%S"),
                                     incomplete="interrupted while deleting the groups"),
                       output, say)
        raise
    return CompareResult(settings, results, time.strftime("%Y-%m-%d %H:%M:%S"))


def _forget_groups(settings: CompareSettings, runs: Sequence[_Run], kafka: Mapping[str, Any],
                   say: Callable[[str], None]) -> None:
    """Every group the runs wrote to, however they ended (a failure, Ctrl-C): deleted, or
    named with the command that deletes it. A Ctrl-C while one is deleted (waiting for the
    killed member's session to expire) names it and the rest, then is raised."""
    stopped: BaseException | None = None
    for run in runs:
        if not run.touched:
            continue
        if stopped is not None:
            _left_behind(settings, run, "not deleted: interrupted", say)
            continue
        try:
            _forget_group(settings, run, kafka, say)
        except BaseException as e:  # noqa: BLE001 - re-raised below; Ctrl-C: the others are still named
            stopped = e
            _left_behind(settings, run, "interrupted while deleting it", say)
    if stopped is not None:
        raise stopped


def _check_zookeeper(settings: CompareSettings) -> None:
    """Open (and close) a ZooKeeper session, within ``--connect-timeout``: raises the
    one-line error of :func:`connect` when ZooKeeper cannot be reached."""

    zk = connect(settings.zookeeper, settings.connect_timeout_s)
    zk.stop()
    zk.close()


def _write_partial(result: CompareResult, output: Path, say: Callable[[str], None]) -> None:
    """Best-effort: the report of the runs that completed; the original error stays the
    one raised."""
    try:
        paths = write_report(result, output)
    except Exception as e:  # noqa: BLE001 - best-effort: said, the run's own error wins
        say(f"could not write the incomplete report to {output}: {e}")
    else:
        say(f"incomplete report of the completed runs: {paths['markdown']}")


class _GroupOwner(Protocol):
    """What :func:`_forget_group` needs of a run or its result."""

    @property
    def protocol(self) -> str: ...

    @property
    def group(self) -> str: ...


def _forget_group(settings: CompareSettings, result: _GroupOwner,
                  kafka: Mapping[str, Any], say: Callable[[str], None]) -> None:
    """Delete a run's group (its znodes, or the Kafka group), so runs leave nothing behind.

    The killed member's registration lasts until its session times out: waited for, up to
    twice the session timeout. Best-effort: a group that stays is said, with how to delete it.
    """

    deadline = time.monotonic() + 2 * settings.session_timeout_ms / 1000.0
    group = result.group
    error: Exception | None = None
    while True:
        try:
            if result.protocol == "zookeeper":
                zk = connect(settings.zookeeper, settings.connect_timeout_s)
                try:
                    delete_group(zk, group)
                except UnknownGroupError:
                    pass  # gone already: nothing left behind
                finally:
                    zk.stop()
                    zk.close()
            else:
                admin = modern_admin(settings.bootstrap, kafka=kafka)
                try:
                    answer = admin.delete_groups([group]).get(group)
                finally:
                    admin.close()
                if answer not in ("OK", None) and "GroupIdNotFound" not in str(answer):
                    raise AdminError(str(answer))
            return
        except GroupActiveError as e:  # the killed member's session has not expired yet
            error = e
        except Exception as e:  # noqa: BLE001 - best-effort: said below
            error = e
            if result.protocol == "zookeeper":
                break
        if time.monotonic() > deadline:
            break
        time.sleep(0.5)
    _left_behind(settings, result, str(error), say)


def _left_behind(settings: CompareSettings, result: _GroupOwner, why: str,
                 say: Callable[[str], None]) -> None:
    """Say that a run's group stays, and the command that deletes it."""
    group = result.group
    config = (f" --command-config {settings.command_config}" if settings.command_config
              else "")  # the secured cluster's settings, or the command fails there too
    how = (f"zkconsumer groups delete --zookeeper {settings.zookeeper} --group {group}"
           if result.protocol == "zookeeper" else
           f"kafka-consumer-groups.sh --bootstrap-server {settings.bootstrap}{config} "
           f"--delete --group {group}")
    say(f"{result.protocol}: the run's group {group} is left behind ({why}); delete it "
        f"with {how}")
