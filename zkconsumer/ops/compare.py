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

Every member is a subprocess (``python -m zkconsumer.ops.compare member ...``) so that the kill
is real. Members report on stdout, one line per event, with their own wall-clock time:
``R t`` ready, ``A t p,p,..`` their assignment whenever it changes, ``M t p o`` each message
handed to the application, ``E t`` a clean exit. kafka-python members write a poll batch's
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

:func:`run_compare` returns a :class:`CompareResult`; :func:`write_report` writes
``report.md``, ``compare.png`` (matplotlib, Agg) and ``compare.json``. Nothing here prints
except the member processes' protocol lines and the ``progress`` callback.
"""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

from zkconsumer._config import ConsumerConfig
from zkconsumer._errors import (
    AdminError,
    CompareError,
    GroupActiveError,
    UnknownGroupError,
)
from zkconsumer._types import TopicPartition
from zkconsumer.broker.clients import (
    kafka_consumer,
    kafka_producer,
    log_end_offsets,
    modern_admin,
)
from zkconsumer.consumer.assignors.core import assign
from zkconsumer.consumer.connector import ZookeeperConsumerConnector
from zkconsumer.consumer.fetcher import FetcherManager
from zkconsumer.consumer.offsets import ZkOffsetStore
from zkconsumer.ops.groups import delete_group
from zkconsumer.ops.migrate_copy import write_kafka_offsets
from zkconsumer.zk.session import (
    command_config,
    command_config_properties,
    connect,
    security_settings,
)

if TYPE_CHECKING:
    from zkconsumer._config import ConsumerConfig

log = logging.getLogger("zkconsumer.compare")

PROTOCOLS = ("zookeeper", "kafka")
LABELS = {
    "zookeeper": "zkconsumer (ZooKeeper protocol)",
    "kafka": "kafka-python (group protocol)",
}
CHANGES = ("initial", "join", "leave", "kill")


# --------------------------------------------------------------------------------------
# Settings and results
# --------------------------------------------------------------------------------------


@dataclass
class CompareSettings:
    """Everything that defines one comparison; both protocols get the same values."""

    bootstrap: str
    zookeeper: str
    topic: str
    members: int
    messages: int = 20_000
    partitions: int | None = None  # when the topic must be created; default 2 x (members+1)
    rate: float = 200.0  # messages per second during the membership changes
    session_timeout_ms: int = 6000
    commit_interval_ms: int = 1000
    dwell_s: float = 3.0  # steady traffic between two changes
    quiet_s: float = 2.0  # no assignment change for this long = settled
    settle_timeout_s: float = 90.0
    drain_timeout_s: float = 60.0
    protocols: tuple[str, ...] = PROTOCOLS
    # The brokers' security settings (``--command-config``): every client of the run uses
    # them, members included (they read the file themselves: no secret on a command line).
    command_config: str | None = None
    #: How long to wait for a ZooKeeper session (``--connect-timeout``), every harness client.
    connect_timeout_s: float = 10.0

    @classmethod
    def short(cls, bootstrap: str, zookeeper: str, topic: str, members: int,
              messages: int | None = None) -> CompareSettings:
        """The small fast mode (CI): a small backlog, short timeouts and pauses."""
        return cls(bootstrap, zookeeper, topic, members,
                   messages=2000 if messages is None else messages, rate=100.0,
                   session_timeout_ms=3000, commit_interval_ms=500, dwell_s=0.5,
                   quiet_s=1.0, settle_timeout_s=45.0, drain_timeout_s=30.0)

    def validate(self) -> None:
        if self.members < 2:
            raise CompareError("--members must be at least 2 (one leaves, one is killed)")
        if self.members > 50:
            raise CompareError("--members must be at most 50 (each member is a process)")
        if self.messages < 1:
            raise CompareError("--messages must be at least 1")
        # Written so that NaN fails too (every comparison with NaN is False).
        if not (isinstance(self.rate, (int, float)) and math.isfinite(self.rate)
                and self.rate > 0):
            raise CompareError(f"--rate must be a positive number, got {self.rate!r}")
        for flag, ms in (("--session-timeout-ms", self.session_timeout_ms),
                         ("commit_interval_ms", self.commit_interval_ms)):
            if not (isinstance(ms, int) and not isinstance(ms, bool) and ms > 0):
                raise CompareError(f"{flag} must be a positive integer, got {ms!r}")
        for flag, seconds, zero_ok in (
            ("--connect-timeout", self.connect_timeout_s, False),
            ("dwell_s", self.dwell_s, True),
            ("quiet_s", self.quiet_s, True),
            ("settle_timeout_s", self.settle_timeout_s, False),
            ("drain_timeout_s", self.drain_timeout_s, False),
        ):
            if not (isinstance(seconds, (int, float)) and math.isfinite(seconds)
                    and (seconds >= 0 if zero_ok else seconds > 0)):
                what = "a finite number >= 0" if zero_ok else "a positive finite number"
                raise CompareError(f"{flag} must be {what} of seconds, got {seconds!r}")
        if self.partitions is not None and self.partitions < self.members + 1:
            raise CompareError(
                f"--partitions must be at least --members + 1 = {self.members + 1}"
            )
        for p in self.protocols:
            if p not in PROTOCOLS:
                raise CompareError(f"unknown protocol {p!r} (expected one of {PROTOCOLS})")


@dataclass
class ChangeResult:
    """One membership change and how the group took it."""

    change: str
    member: str | None  # who joined, left or was killed
    at_s: float  # seconds since the run started
    reassignment_s: float | None  # None: not settled within the timeout
    assignment: dict[str, list[int]]  # member name -> partitions, once settled
    expected: dict[str, list[int]]  # what the range assignor gives for the live members

    @property
    def as_expected(self) -> bool:
        return self.assignment == self.expected


@dataclass
class ProtocolResult:
    """One protocol's run."""

    protocol: str
    group: str
    members: int
    partitions: int
    changes: list[ChangeResult]
    backlog: int
    backlog_produce_s: float
    backlog_drain_s: float | None
    produced: int
    delivered: int
    unique: int
    lost: int
    duplicated: int
    duration_s: float
    #: member name -> [(seconds since the run started, cumulative messages)], for the chart.
    timeline: dict[str, list[tuple[float, int]]] = field(default_factory=dict)
    #: Duplicate deliveries by the change whose window they fell in (change -> count).
    duplicated_by_change: dict[str, int] = field(default_factory=dict)
    #: member name -> [(seconds since the run started, partitions)], every report.
    history: dict[str, list[tuple[float, list[int]]]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    @property
    def throughput(self) -> float | None:
        if not self.backlog_drain_s:
            return None
        return self.backlog / self.backlog_drain_s

    def change(self, name: str) -> ChangeResult | None:
        return next((c for c in self.changes if c.change == name), None)


@dataclass
class CompareResult:
    settings: CompareSettings
    results: list[ProtocolResult]
    when: str
    #: Why the comparison stopped early (the runs in ``results`` completed), or None.
    incomplete: str | None = None

    def by_protocol(self, protocol: str) -> ProtocolResult | None:
        return next((r for r in self.results if r.protocol == protocol), None)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"when": self.when, "settings": asdict(self.settings),
                               "machine": {"cpus": os.cpu_count()},
                               "incomplete": self.incomplete, "results": []}
        for r in self.results:
            d = asdict(r)
            d.pop("timeline")
            d["throughput"] = r.throughput
            for c, cd in zip(r.changes, d["changes"], strict=True):
                cd["as_expected"] = c.as_expected
            out["results"].append(d)
        return out


# --------------------------------------------------------------------------------------
# The member process
# --------------------------------------------------------------------------------------


class _Out:
    """Protocol lines on fd 1, written unbuffered; ``_lock`` serialises writers."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def line(self, text: str) -> None:
        data = (text + "\n").encode()
        with self._lock:
            os.write(1, data)

    def lines(self, texts: Sequence[str]) -> None:
        if texts:
            data = ("\n".join(texts) + "\n").encode()
            with self._lock:
                os.write(1, data)


def member_argv(name: str, protocol: str, settings: CompareSettings, group: str,
                go: bool) -> list[str]:
    """The arguments of a member process after ``python -m zkconsumer.ops.compare``."""
    argv = [
        "member", "--protocol", protocol, "--name", name, "--group", group,
        "--topic", settings.topic, "--zookeeper", settings.zookeeper,
        "--bootstrap", settings.bootstrap,
        "--session-timeout-ms", str(settings.session_timeout_ms),
        "--commit-interval-ms", str(settings.commit_interval_ms),
    ] + (["--go"] if go else [])
    if settings.command_config is not None:
        # Absolute: the member reads the file itself (its secrets stay off the command line).
        argv += ["--command-config", str(Path(settings.command_config).resolve())]
    return argv


def parse_member_argv(argv: Sequence[str]) -> Any:
    """:func:`member_argv`'s arguments, parsed (an ``argparse.Namespace``)."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m zkconsumer.ops.compare member")
    p.add_argument("role", choices=["member"])
    p.add_argument("--protocol", choices=PROTOCOLS, required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--zookeeper", required=True)
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--session-timeout-ms", type=int, required=True)
    p.add_argument("--commit-interval-ms", type=int, required=True)
    p.add_argument("--command-config", default=None)
    p.add_argument("--go", action="store_true", help="consume at once (no GO from stdin)")
    return p.parse_args(argv)


def _member_main(argv: Sequence[str]) -> int:
    args = parse_member_argv(argv)

    out = _Out()
    stop = threading.Event()
    go = threading.Event()
    if args.go:
        go.set()

    def on_term(signum: int, frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)

    def read_stdin() -> None:
        # GO releases the consumption; end of input means the harness died: stop.
        for raw in sys.stdin:
            if raw.strip() == "GO":
                go.set()
        stop.set()

    threading.Thread(target=read_stdin, name="stdin", daemon=True).start()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.protocol == "zookeeper":
        _zk_member(args, out, stop, go)
    else:
        _kafka_member(args, out, stop, go)
    out.line(f"E {time.time():.6f}")
    return 0


def _fmt_parts(parts: Any) -> str:
    return ",".join(str(p) for p in sorted(parts))


class _GatedFetcher:
    """The connector's fetch side, held shut until GO, so the backlog is not prefetched
    before the release (kafka-python members pause their partitions for the same reason).

    ``_lock`` guards ``_open`` and ``_pending`` (the rebalance thread calls
    start/stop, the stdin thread calls :meth:`open`).
    """

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._lock = threading.Lock()
        self._open = False
        self._pending: list[Any] | None = None

    def start_connections(self, infos: Any) -> None:
        with self._lock:
            if not self._open:
                self._pending = list(infos)
                return
        self._inner.start_connections(infos)

    def stop_connections(self) -> None:
        with self._lock:
            self._pending = None
        self._inner.stop_connections()

    def shutdown(self) -> None:
        self._inner.shutdown()

    def open(self) -> None:
        with self._lock:
            self._open = True
            pending, self._pending = self._pending, None
            # Started under the lock so a concurrent stop_connections cannot run between.
            if pending:
                self._inner.start_connections(pending)


def zk_member_config(args: Any) -> ConsumerConfig:
    """A zookeeper member's connector configuration, from its parsed arguments."""

    return ConsumerConfig({
        # The harness's login and ACL (ZKCONSUMER_ZOOKEEPER_*, inherited), as its own client.
        **security_settings(),
        **command_config_properties(args.command_config),
        "zookeeper.connect": args.zookeeper,
        "group.id": args.group,
        "consumer.id": args.name,
        "zookeeper.session.timeout.ms": str(args.session_timeout_ms),
        "auto.commit.enable": "true",
        "auto.commit.interval.ms": str(args.commit_interval_ms),
        "auto.offset.reset": "smallest",
        "partition.assignment.strategy": "range",
    })


def _zk_member(args: Any, out: _Out, stop: threading.Event, go: threading.Event) -> None:

    config = zk_member_config(args)
    gates: list[_GatedFetcher] = []

    def fetcher(c: ZookeeperConsumerConnector) -> _GatedFetcher:
        gates.append(_GatedFetcher(FetcherManager(c.config, c.consumer_id, c.broker_addresses)))
        return gates[-1]

    connector = ZookeeperConsumerConnector(config, fetcher_factory=fetcher)
    streams = connector.create_message_streams({args.topic: 1})[args.topic]
    out.line(f"R {time.time():.6f} {connector.consumer_id}")

    def release() -> None:
        go.wait()
        for g in gates:
            g.open()

    threading.Thread(target=release, name="release", daemon=True).start()

    def watch_assignment() -> None:
        # Owner znodes held by this member; polled because it is what the group sees.
        last: list[int] | None = None
        while not stop.is_set():
            now = sorted(tp.partition for tp in connector.owned_partitions())
            if now != last:
                out.line(f"A {time.time():.6f} {_fmt_parts(now)}")
                last = now
            stop.wait(0.01)

    def drain(stream: Any) -> None:
        while not go.wait(0.1):
            if stop.is_set():
                return
        for m in stream:
            out.line(f"M {time.time():.6f} {m.partition} {m.offset}")

    threads = [threading.Thread(target=watch_assignment, name="assignment", daemon=True)]
    threads += [threading.Thread(target=drain, args=(s,), name="drain", daemon=True)
                for s in streams]
    for t in threads:
        t.start()
    while not stop.wait(0.1):
        pass
    connector.shutdown()  # commits (auto-commit is on) and closes the session
    for t in threads:
        t.join(timeout=10)


def kafka_member_kwargs(args: Any) -> dict[str, Any]:
    """A kafka member's ``KafkaConsumer`` arguments, from its parsed arguments."""
    from kafka.coordinator.assignors.range import RangePartitionAssignor


    session = args.session_timeout_ms
    return dict(
        **command_config(args.command_config),
        bootstrap_servers=args.bootstrap.split(","),
        group_id=args.group,
        client_id=args.name,  # member ids are "<client id>-<uuid>": range sorts them by name
        partition_assignment_strategy=[RangePartitionAssignor],
        session_timeout_ms=session,
        heartbeat_interval_ms=max(100, session // 10),
        # Also the JoinGroup rebalance timeout: how long the coordinator waits for members
        # to rejoin. Members poll every 100 ms, so a low value is safe and speeds rebalances.
        max_poll_interval_ms=max(session, 3000),
        enable_auto_commit=True,
        auto_commit_interval_ms=args.commit_interval_ms,
        auto_offset_reset="earliest",
    )


def _kafka_member(args: Any, out: _Out, stop: threading.Event, go: threading.Event) -> None:
    from kafka.consumer.subscription_state import ConsumerRebalanceListener

    # kafka-python's own default, as before (the harness made the topic beforehand).
    consumer = kafka_consumer(**{"allow_auto_create_topics": True, **kafka_member_kwargs(args)})
    current: set[int] = set()
    held: list[Any] = []  # partitions paused until GO

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            current.difference_update(tp.partition for tp in revoked)
            out.line(f"A {time.time():.6f} {_fmt_parts(current)}")

        def on_partitions_assigned(self, assigned: Any) -> None:
            current.update(tp.partition for tp in assigned)
            if not go.is_set() and assigned:
                consumer.pause(*assigned)
                held.extend(assigned)
            out.line(f"A {time.time():.6f} {_fmt_parts(current)}")

    consumer.subscribe([args.topic], listener=Listener())
    out.line(f"R {time.time():.6f} {args.name}")
    released = go.is_set()
    while not stop.is_set():
        if not released and go.is_set():
            released = True
            mine = [tp for tp in held if tp in consumer.assignment()]
            if mine:
                consumer.resume(*mine)
        batch = consumer.poll(timeout_ms=100)
        lines = [f"M {time.time():.6f} {tp.partition} {r.offset}"
                 for tp, records in batch.items() for r in records]
        out.lines(lines)  # before the next poll, which may auto-commit past them
    consumer.close()  # commits (auto-commit is on) and leaves the group


# --------------------------------------------------------------------------------------
# The harness side
# --------------------------------------------------------------------------------------


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
        cmd = [sys.executable, "-m", "zkconsumer.ops.compare",
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
        except BaseException as e:  # Ctrl-C: the other groups are still named
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


# --------------------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------------------


def _num(value: float | None, fmt: str = "{:.2f}") -> str:
    return "timeout" if value is None else fmt.format(value)


def _assignment_text(a: Mapping[str, Sequence[int]]) -> str:
    return "; ".join(f"{n}: {','.join(map(str, ps)) or '-'}" for n, ps in sorted(a.items()))


def render_markdown(result: CompareResult, chart_name: str = "compare.png") -> str:
    s = result.settings
    lines = [
        "# zkconsumer vs kafka-python: the same group workload",
        "",
        f"Measured {result.when} on this machine ({os.cpu_count()} CPUs), topic "
        f"`{s.topic}`, {s.members} members (one thread each), range assignment, session "
        f"timeout {s.session_timeout_ms} ms for both, auto-commit every "
        f"{s.commit_interval_ms} ms for both, backlog {s.messages} messages, then "
        f"{s.rate:g} msg/s during the changes.",
        "",
    ]
    if result.incomplete is not None:
        done = ", ".join(r.protocol for r in result.results) or "none"
        lines += [f"**Incomplete**: the comparison stopped early ({result.incomplete}); "
                  f"only the completed runs are shown ({done}).", ""]
    lines += [
        "| protocol | initial assignment (s) | join (s) | leave (s) | kill (s) "
        "| throughput (msg/s) | produced | delivered | lost | duplicated |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result.results:
        times = []
        for name in CHANGES:
            c = r.change(name)
            times.append(_num(c.reassignment_s if c else None))
        lines.append(
            f"| {LABELS[r.protocol]} | " + " | ".join(times)
            + f" | {_num(r.throughput, '{:.0f}')} | {r.produced} | {r.delivered} "
            f"| {r.lost} | {r.duplicated} |"
        )
    lines += [
        "",
        "Duplicates by the change they followed: "
        + "; ".join(
            f"{r.protocol}: " + ", ".join(f"{k} {v}" for k, v in r.duplicated_by_change.items())
            for r in result.results
        ) + ".",
        "",
        "Times are from the change (process spawned, SIGTERM sent, SIGKILL sent) to the last "
        "assignment event that completed the new assignment. Throughput: the backlog over the "
        "time from releasing the held members to its last message's first delivery (backlog "
        "produced in "
        + ", ".join(f"{r.backlog_produce_s:.2f} s for {r.protocol}" for r in result.results)
        + ").",
        "",
        "## Assignments after each change",
        "",
        "| change | expected (range) | "
        + " | ".join(LABELS[r.protocol] for r in result.results) + " | protocols agree |",
        "|---|---|" + "---|" * len(result.results) + "---|",
    ]
    for name in CHANGES:
        per = [r.change(name) for r in result.results]
        expected = next((c.expected for c in per if c is not None), {})
        cells = []
        for c in per:
            if c is None:
                cells.append("n/a")
            else:
                mark = "" if c.as_expected else " (differs from expected)"
                cells.append(_assignment_text(c.assignment) + mark)
        assigned = [c.assignment for c in per if c is not None]
        agree = "yes" if len(assigned) == len(per) and all(
            a == assigned[0] for a in assigned) else "no"
        who = next((c.member for c in per if c is not None and c.member), None)
        label = f"{name} {who}" if who else name
        lines.append(f"| {label} | {_assignment_text(expected)} | " + " | ".join(cells)
                     + f" | {agree} |")
    lines += ["", f"![delivered messages over time]({chart_name})", ""]
    errors = [(r.protocol, e) for r in result.results for e in r.errors]
    if errors:
        lines += ["## Problems seen", ""] + [f"- {p}: {e}" for p, e in errors] + [""]
    return "\n".join(lines)


def render_chart(result: CompareResult, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(result.results), 1, figsize=(10, 3.6 * len(result.results)),
                             squeeze=False)
    for ax, r in zip(axes[:, 0], result.results, strict=True):
        for name, points in sorted(r.timeline.items()):
            if points:
                xs = [0.0] + [t for t, _ in points]
                ys = [0] + [n for _, n in points]
                ax.step(xs, ys, where="post", label=name)
        for c in r.changes:
            ax.axvline(c.at_s, color="grey", linestyle="--", linewidth=0.8)
            ax.annotate(c.change + (f" {c.member}" if c.member else ""), (c.at_s, 0),
                        xytext=(3, 3), textcoords="offset points", fontsize=8, rotation=90,
                        va="bottom", color="dimgrey")
        ax.set_title(f"{LABELS[r.protocol]}: lost {r.lost}, duplicated {r.duplicated}")
        ax.set_xlabel("seconds since the run started")
        ax.set_ylabel("messages delivered")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="upper left", fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_report(result: CompareResult, output: Path) -> dict[str, Path]:
    """Write ``report.md``, ``compare.png`` and ``compare.json`` into ``output``."""
    output.mkdir(parents=True, exist_ok=True)
    paths = {"markdown": output / "report.md", "chart": output / "compare.png",
             "json": output / "compare.json"}
    render_chart(result, paths["chart"])
    paths["markdown"].write_text(render_markdown(result, paths["chart"].name))
    paths["json"].write_text(json.dumps(result.to_dict(), indent=2) + "\n")
    return paths


if __name__ == "__main__":
    sys.exit(_member_main(sys.argv[1:]))
