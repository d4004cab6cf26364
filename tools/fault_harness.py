"""Shared machinery of the fault-injection suite and of ``tools/soak``.

A run has:

- a :class:`Workload` that produces numbered messages and remembers every acknowledged
  (topic, partition, offset), so "every message consumed" is checked against what the broker
  accepted, not against a count;
- group members: :class:`InProcessMember` (a connector in this process, its streams drained by
  threads) and :class:`ProcessMember` (``python -m tools.fault_harness`` in its own process, so
  it can be SIGKILLed; it prints what it consumes and what it believes it owns, with
  ``time.monotonic_ns()`` timestamps, which are comparable across processes on Linux);
- a :class:`Collector` of every delivery (member, topic, partition, offset, time, value);
- an :class:`OwnershipLog`: when each member believed it owned which partitions, from its
  rebalance listener (claims are reported after the owner znodes were created, releases before
  they are deleted) and its ZooKeeper connection state (SUSPENDED or LOST ends it);
- an :class:`OwnershipSampler` thread that reads the group's owner, ids and offset znodes every
  50 ms and, for in-process members, what each connector believes it owns and fetches, and
  records every moment where one partition has two live owners, every owner znode that
  belongs to no live member's session, and every committed offset that went backwards.

:func:`verify` turns all of that into a :class:`RunReport`: messages missing, duplicates (and
whether each comes from an uncommitted window, i.e. was never delivered again after a commit
had covered it), ownership overlaps, sampler violations.
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import KazooState

from zkconsumer import (
    ConsumerConfig,
    ConsumerRebalanceListener,
    ConsumerTimeoutException,
    MessageDecodeError,
    TopicPartition,
    ZookeeperConsumerConnector,
)
from zkconsumer._errors import ZkDataError
from zkconsumer.broker.clients import log_end_offsets
from zkconsumer.stack.testing import create_topic, drop_connection, wait_until
from zkconsumer.zk import paths as zp

ROOT = Path(__file__).resolve().parent.parent
TP = TopicPartition
#: (topic, partition, offset): one message.
Key = tuple[str, int, int]

log = logging.getLogger("tests.faults")

#: How long a member may go on handing out messages after its ZooKeeper connection dropped
#: (the time to notice and stop); see :meth:`OwnershipLog.deliveries_while_down`.
DOWN_GRACE_NS = 20_000_000
#: How long before the report that its connection is back (with the same session) a member
#: may already hand out messages: kazoo calls the connector's state listener and the
#: harness's one after the other, in no set order, and other threads run in between.
UP_GRACE_NS = 100_000_000

#: Member settings of the fault runs: short session timeout and backoff (quick failover),
#: frequent auto-commit (small uncommitted windows), small fetches (many chunks).
FAULT_PROPS: dict[str, object] = {
    "zookeeper.session.timeout.ms": 2000,
    "rebalance.backoff.ms": 200,
    "rebalance.max.retries": 10,
    "auto.commit.enable": True,
    "auto.commit.interval.ms": 300,
    "auto.offset.reset": "smallest",
    "fetch.message.max.bytes": 16384,
    "queued.max.message.chunks": 2,
    "consumer.timeout.ms": 200,
}


def now_ns() -> int:
    return time.monotonic_ns()


def member_props(zookeeper: str, group: str, **extra: object) -> dict[str, object]:
    """:data:`FAULT_PROPS` for one group; ``extra`` keys use ``_`` for ``.``."""
    props: dict[str, object] = {"zookeeper.connect": zookeeper, "group.id": group}
    props.update(FAULT_PROPS)
    props.update({k.replace("_", "."): v for k, v in extra.items()})
    return props


# -- waiting (zkconsumer.stack.testing.wait_until), topics, ZooKeeper -------------------


def zk_client(hosts: str, timeout: float = 10.0) -> KazooClient:
    """A started kazoo client that retries its connection for ever (it outlives outages)."""
    client = KazooClient(
        hosts=hosts, timeout=timeout,
        connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 1.0},
        command_retry={"max_tries": 0},
    )
    client.start(timeout=15)
    return client


def make_topic(bootstrap: str, zk: KazooClient, name: str, partitions: int) -> str:
    """Create a topic on the broker (unless it exists) and wait until it is registered in
    ZooKeeper with ``partitions`` partitions.

    "Unless it exists": with ``auto.create.topics.enable`` (Kafka's default, and the local
    stack's), a client asking for a missing topic's metadata creates it; consumers still
    fetching a topic that vanished recreate it that way.
    """
    from kafka.errors import TopicAlreadyExistsError

    try:
        create_topic(bootstrap, name, partitions)
    except TopicAlreadyExistsError:
        pass
    wait_until(
        lambda: zk.exists(zp.topic_path(name)) is not None
        and len(zp.TopicAssignment.decode(zk.get(zp.topic_path(name))[0]).partitions)
        == partitions,
        30, f"topic {name} registered in ZooKeeper",
    )
    return name


def expire_session(zookeeper: str, session: tuple[int, bytes]) -> None:
    """Expire a ZooKeeper session: a second client on the same id and password, then closed."""
    thief = KazooClient(hosts=zookeeper, client_id=session, timeout=10.0)
    thief.start(timeout=15)
    thief.stop()
    thief.close()


def committed_offsets(zk: KazooClient, group: str, topic: str) -> dict[int, int]:
    """Partition -> committed offset, read from ZooKeeper (unreadable ones left out)."""
    out: dict[int, int] = {}
    try:
        children = zk.get_children(zp.offsets_topic_dir(group, topic))
    except NoNodeError:
        return out
    for p in children:
        try:
            out[int(p)] = zp.decode_offset(zk.get(zp.offset_path(group, topic, int(p)))[0])
        except (NoNodeError, ZkDataError, ValueError):
            continue
    return out


def log_ends(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """Partition -> true log end (see ``zkconsumer.broker.clients.log_end_offsets``)."""
    ends = log_end_offsets([(topic, p) for p in range(partitions)], bootstrap_servers=bootstrap)
    return {tp.partition: off for tp, off in ends.items()}


# -- the workload ------------------------------------------------------------------------------


class Workload:
    """Produces ``<prefix>-<n>`` messages round-robin over a topic's partitions.

    Every acknowledged send is remembered as (topic, partition, offset) -> value, so the
    expected set is exact. ``_lock`` guards ``acked``, ``failed`` and ``_next``.
    """

    def __init__(self, bootstrap: str, topic: str, partitions: int, prefix: str = "m") -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.prefix = prefix
        self.acked: dict[Key, bytes] = {}
        self.failed = 0
        self._next = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._producer: Any = None

    def _client(self) -> Any:
        from kafka import KafkaProducer

        if self._producer is None:
            self._producer = KafkaProducer(
                bootstrap_servers=self.bootstrap, linger_ms=5, acks=1, retries=3,
                request_timeout_ms=10_000, max_block_ms=10_000,
            )
        return self._producer

    def _send(self, n: int) -> list[Any]:
        producer = self._client()
        futures = []
        for _ in range(n):
            with self._lock:
                i = self._next
                self._next += 1
            value = f"{self.prefix}-{i}".encode()
            fut = producer.send(self.topic, value=value, partition=i % self.partitions)
            fut.add_callback(self._acked, value)
            fut.add_errback(self._failed)
            futures.append(fut)
        return futures

    def _acked(self, value: bytes, md: Any) -> None:
        with self._lock:
            self.acked[(md.topic, md.partition, md.offset)] = value

    def _failed(self, exc: BaseException) -> None:
        with self._lock:
            self.failed += 1

    def produce(self, n: int) -> None:
        """Send ``n`` messages and wait for every acknowledgement."""
        self._send(n)
        self._client().flush(timeout=60)

    def start(self, rate_per_s: float, batch: int = 20) -> None:
        """Produce in the background at about ``rate_per_s`` until :meth:`stop`."""
        self._stop.clear()

        def run() -> None:
            interval = batch / rate_per_s
            while not self._stop.wait(interval):
                try:
                    self._send(batch)
                except Exception as e:  # noqa: BLE001 - counted; the broker may be down
                    log.warning("produce failed: %r", e)
                    with self._lock:
                        self.failed += batch

        self._thread = threading.Thread(target=run, name="workload", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
            self._thread = None
        if self._producer is not None:
            self._producer.flush(timeout=60)

    def close(self) -> None:
        self.stop()
        if self._producer is not None:
            self._producer.close(timeout=10)
            self._producer = None

    def expected(self) -> dict[Key, bytes]:
        with self._lock:
            return dict(self.acked)


# -- deliveries -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Delivery:
    """One message handed to the application: ``t0_ns`` before the ``next()`` call that
    returned it, ``t_ns`` after, so it was handed out somewhere in between."""

    member: str
    topic: str
    partition: int
    offset: int
    t0_ns: int
    t_ns: int
    value: bytes


class Collector:
    """Every delivery of a run. ``_lock`` guards ``deliveries``, ``counts`` and ``errors``;
    drain threads and process reader threads append."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.deliveries: list[Delivery] = []
        self.counts: Counter[Key] = Counter()
        self.errors: list[tuple[str, BaseException]] = []
        self.threads: list[threading.Thread] = []

    def record(self, member: str, topic: str, partition: int, offset: int, t0_ns: int,
               t_ns: int, value: bytes) -> None:
        d = Delivery(member, topic, partition, offset, t0_ns, t_ns, value)
        with self._lock:
            self.deliveries.append(d)
            self.counts[(topic, partition, offset)] += 1

    def error(self, member: str, exc: BaseException) -> None:
        with self._lock:
            self.errors.append((member, exc))

    def drain(self, member: str, stream: Any, delay_s: float = 0.0) -> threading.Thread:
        """Iterate ``stream`` in a thread until it ends, recording each message.

        ``delay_s`` per message makes a slow application. A :class:`MessageDecodeError` is
        recorded and iteration goes on (the next ``next()`` skips the message).
        """

        def run() -> None:
            it = iter(stream)
            while True:
                t0 = now_ns()
                try:
                    m = next(it)
                except StopIteration:
                    return
                except ConsumerTimeoutException:
                    continue
                except MessageDecodeError as e:
                    self.error(member, e)
                    continue
                except BaseException as e:  # noqa: BLE001 - asserted by the tests
                    self.error(member, e)
                    return
                self.record(member, m.topic, m.partition, m.offset, t0, now_ns(), m.message)
                if delay_s:
                    time.sleep(delay_s)

        t = threading.Thread(target=run, name=f"drain-{member}", daemon=True)
        t.start()
        with self._lock:
            self.threads.append(t)
        return t

    def seen(self) -> set[Key]:
        with self._lock:
            return set(self.counts)

    def values(self) -> set[bytes]:
        with self._lock:
            return {d.value for d in self.deliveries}

    def count(self) -> int:
        with self._lock:
            return len(self.counts)

    def delivered_by(self, member: str) -> int:
        with self._lock:
            return sum(1 for d in self.deliveries if d.member == member)

    def snapshot(self) -> list[Delivery]:
        with self._lock:
            return list(self.deliveries)

    def has_all(self, keys: Iterable[Key]) -> bool:
        with self._lock:
            return all(k in self.counts for k in keys)


# -- who believed it owned what, when ------------------------------------------------------------


class OwnershipLog:
    """Ownership intervals per member, from rebalance listeners and ZooKeeper states.

    A claim is reported after the member created its owner znodes, a release before it deletes
    them, so a correct group never shows two overlapping intervals for one partition. An
    interval also ends when the member's ZooKeeper connection drops (SUSPENDED: from then on it
    cannot know whether its session, and so its ownership, still exists), when its session is
    LOST, and when it dies; it resumes ("up") when the connection comes back with the same
    session, whose owner znodes nobody else can have taken meanwhile.
    :meth:`stale_deliveries` checks deliveries against the claims.
    ``_lock`` guards ``_events``.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # member -> [(t_ns, kind, partitions)], kind in claim/release/down/up/end
        self._events: dict[str, list[tuple[int, str, frozenset[TopicPartition]]]] = {}

    def _add(self, member: str, t_ns: int, kind: str,
             tps: Iterable[TopicPartition] = ()) -> None:
        with self._lock:
            self._events.setdefault(member, []).append((t_ns, kind, frozenset(tps)))

    def claim(self, member: str, t_ns: int, tps: Iterable[TopicPartition]) -> None:
        self._add(member, t_ns, "claim", tps)

    def release(self, member: str, t_ns: int) -> None:
        self._add(member, t_ns, "release")

    def down(self, member: str, t_ns: int) -> None:
        """The member's ZooKeeper connection dropped or its session expired: it can no longer
        know that it owns anything."""
        self._add(member, t_ns, "down")

    def up(self, member: str, t_ns: int) -> None:
        """The member's connection is back with the same session: what it owned before the
        drop is still its own."""
        self._add(member, t_ns, "up")

    def end(self, member: str, t_ns: int) -> None:
        self._add(member, t_ns, "end")

    def intervals(self, until_ns: int | None = None) -> dict[TopicPartition, list[
            tuple[str, int, int]]]:
        """Partition -> [(member, from, to)] of every belief."""
        until = now_ns() if until_ns is None else until_ns
        with self._lock:
            events = {m: sorted(evs, key=lambda e: e[0]) for m, evs in self._events.items()}
        out: dict[TopicPartition, list[tuple[str, int, int]]] = {}
        for member, evs in events.items():
            current: frozenset[TopicPartition] = frozenset()
            held: frozenset[TopicPartition] = frozenset()  # owned when the connection dropped
            since = 0
            for t, kind, tps in evs:
                for tp in current:
                    out.setdefault(tp, []).append((member, since, t))
                if kind == "down":
                    held = held | current
                elif kind != "up":
                    held = frozenset()
                current = tps if kind == "claim" else held if kind == "up" else frozenset()
                if kind == "up":
                    held = frozenset()
                since = t
                if kind == "end":
                    break
            for tp in current:
                out.setdefault(tp, []).append((member, since, until))
        return out

    def overlaps(self, until_ns: int | None = None) -> list[str]:
        """Every time two members believed they owned the same partition."""
        found = []
        for tp, ivs in sorted(self.intervals(until_ns).items()):
            ivs.sort(key=lambda iv: iv[1])
            for i, (m1, _s1, e1) in enumerate(ivs):
                for m2, s2, e2 in ivs[i + 1:]:
                    if s2 >= e1:
                        break
                    if m1 != m2:
                        found.append(
                            f"{tp.topic}:{tp.partition} owned by {m1} and {m2} at once for "
                            f"{(min(e1, e2) - s2) / 1e6:.1f} ms"
                        )
        return found

    def stale_deliveries(self, deliveries: Iterable[Delivery]) -> list[str]:
        """Deliveries made after another member claimed the partition since the deliverer's own
        last claim of it: the partition was consumed by two members at once.

        A correct member stops fetching and clears its queues before it releases a partition,
        and another member can claim it only after that release, so every message it hands
        out from one claim comes before any later claim by someone else. A delivery happened
        between ``t0_ns`` and ``t_ns`` (before and after the ``next()`` call); each bound is
        used in the direction that can only understate a conflict.
        """
        out = []
        for (member, other, tp), ds in sorted(self._stale(deliveries).items()):
            out.append(f"{member} delivered {len(ds)} message(s) of {tp.topic}:{tp.partition} "
                       f"(offsets {ds[0].offset}..{ds[-1].offset}) after {other} had claimed it")
        return out

    def zombie_duplicates(self, deliveries: Iterable[Delivery]) -> int:
        """Messages a member handed out after another member had claimed the partition
        since its own last claim (see :meth:`stale_deliveries`: the other's claim came
        after the member's session expired, or after it released the partition), that
        another member handed out too."""
        deliveries = list(deliveries)
        by: dict[Key, set[str]] = {}
        for d in deliveries:
            by.setdefault((d.topic, d.partition, d.offset), set()).add(d.member)
        return sum(1 for ds in self._stale(deliveries).values() for d in ds
                   if len(by[(d.topic, d.partition, d.offset)]) > 1)

    def _stale(self, deliveries: Iterable[Delivery]
               ) -> dict[tuple[str, str, TopicPartition], list[Delivery]]:
        claims: dict[TopicPartition, list[tuple[int, str]]] = {}
        with self._lock:
            for member, evs in self._events.items():
                for t, kind, tps in evs:
                    if kind == "claim":
                        for tp in tps:
                            claims.setdefault(tp, []).append((t, member))
        for lst in claims.values():
            lst.sort()
        found: dict[tuple[str, str, TopicPartition], list[Delivery]] = {}
        for d in deliveries:
            tp = TP(d.topic, d.partition)
            lst = claims.get(tp, [])
            # The claim that let the member hand this message out came before the handout,
            # so before t_ns; another member's claim counts against it only if it surely came
            # before the handout, before t0_ns.
            mine = [t for t, m in lst if m == d.member and t <= d.t_ns]
            if not mine:
                continue
            since = mine[-1]
            for t, m in lst:
                if m != d.member and since < t < d.t0_ns:
                    found.setdefault((d.member, m, tp), []).append(d)
                    break
        return found

    def deliveries_while_down(self, deliveries: Iterable[Delivery],
                              grace_ns: int = DOWN_GRACE_NS,
                              up_grace_ns: int = UP_GRACE_NS) -> list[str]:
        """Messages a member handed out after its ZooKeeper connection dropped (SUSPENDED or
        LOST) and before it claimed partitions again.

        From the drop on, the member cannot know that it still owns anything: its session may
        be expired (or be expired at once by another client) and its partitions claimed by
        others, so each such message may be one another member consumes at the same time.
        Counted only when the ``next()`` call started more than ``grace_ns`` after the drop
        (the time a member may take to react) and returned before the next claim, or more than
        ``up_grace_ns`` before the connection came back with the same session (the report of
        that may come a moment after the member resumed).
        """
        with self._lock:
            events = {m: sorted(evs, key=lambda e: e[0]) for m, evs in self._events.items()}
        windows: dict[str, list[tuple[int, int]]] = {}
        for member, evs in events.items():
            down: int | None = None
            for t, kind, _tps in evs:
                if kind == "down" and down is None:
                    down = t
                elif kind in ("claim", "end", "up") and down is not None:
                    windows.setdefault(member, []).append(
                        (down, t - up_grace_ns if kind == "up" else t))
                    down = None
            if down is not None:
                windows.setdefault(member, []).append((down, 2**63))
        found: dict[tuple[str, int], list[Delivery]] = {}
        for d in deliveries:
            for start, end in windows.get(d.member, ()):
                if start + grace_ns < d.t0_ns and d.t_ns < end:
                    found.setdefault((d.member, start), []).append(d)
                    break
        return [f"{member} handed out {len(ds)} message(s) after its ZooKeeper connection "
                f"dropped, before claiming again (e.g. {ds[0].topic}:{ds[0].partition}@"
                f"{ds[0].offset}, {(ds[0].t0_ns - start) / 1e6:.0f} ms after the drop)"
                for (member, start), ds in sorted(found.items())]

    def claims(self) -> int:
        with self._lock:
            return sum(1 for evs in self._events.values() for e in evs if e[1] == "claim")


class _Listener(ConsumerRebalanceListener):
    """Reports an in-process member's claims and releases to the :class:`OwnershipLog`."""

    def __init__(self, member: str, ownership: OwnershipLog) -> None:
        self.member = member
        self.ownership = ownership

    def before_releasing_partitions(self, partition_ownership: Mapping[str, set[int]]) -> None:
        self.ownership.release(self.member, now_ns())

    def before_starting_fetchers(
        self, consumer_id: str, global_partition_assignment: Mapping[str, Mapping[int, str]]
    ) -> None:
        self.ownership.claim(self.member, now_ns(), _mine(consumer_id, global_partition_assignment))


def _mine(consumer_id: str, assignment: Mapping[str, Mapping[int, str]]) -> list[TopicPartition]:
    return sorted(
        TP(t, p) for t, parts in assignment.items() for p, th in parts.items()
        if th.rsplit("-", 1)[0] == consumer_id
    )


# -- members -----------------------------------------------------------------------------------


class InProcessMember:
    """A connector in this process; its streams are drained into the collector."""

    def __init__(
        self,
        name: str,
        props: Mapping[str, object],
        collector: Collector,
        ownership: OwnershipLog,
        fetcher_factory: Any = None,
    ) -> None:
        self.name = name
        self.collector = collector
        self.ownership = ownership
        self.connector = ZookeeperConsumerConnector(ConsumerConfig(dict(props)), fetcher_factory)
        self.connector.set_consumer_rebalance_listener(_Listener(name, ownership))
        self._session_id = self.connector._zk._session_id
        self.connector._zk.add_listener(self._on_state)
        self.streams: list[Any] = []

    def _on_state(self, state: str) -> None:
        if state in (KazooState.LOST, KazooState.SUSPENDED):
            self.ownership.down(self.name, now_ns())
        elif state == KazooState.CONNECTED:
            if self.connector._zk._session_id == self._session_id:
                self.ownership.up(self.name, now_ns())
            self._session_id = self.connector._zk._session_id

    @property
    def consumer_id(self) -> str:
        return self.connector.consumer_id

    @property
    def session(self) -> tuple[int, bytes]:
        client_id = self.connector._zk.client_id
        assert client_id is not None, f"{self.name} has no ZooKeeper session"
        return (int(client_id[0]), bytes(client_id[1]))

    def start(self, topic_counts: Mapping[str, int], delays: Sequence[float] = (),
              value_decoder: Any = None) -> InProcessMember:
        """Create the streams (the first rebalance runs here) and drain them; ``delays[i]``
        is the time the application spends on each message of stream ``i``."""
        result = self.connector.create_message_streams(
            dict(topic_counts), value_decoder=value_decoder)
        self.streams = [s for topic in topic_counts for s in result[topic]]
        for i, s in enumerate(self.streams):
            self.collector.drain(self.name, s, delays[i] if i < len(delays) else 0.0)
        return self

    def expire(self, zookeeper: str) -> int:
        """Expire this member's session; return the old session id."""
        session = self.session
        expire_session(zookeeper, session)
        return session[0]

    def stop(self) -> None:
        # Others may claim the partitions as soon as shutdown() closes the session, before it
        # returns: the ownership ends when the shutdown begins.
        self.ownership.release(self.name, now_ns())
        self.connector.shutdown()
        self.ownership.end(self.name, now_ns())


class ProcessMember:
    """``python -m tools.fault_harness member ...`` in its own process (see :func:`main`).

    A reader thread parses its output into the collector and the ownership log; ``_lock``
    guards ``consumer_id``, ``session`` and ``rebalances``.
    """

    def __init__(
        self,
        name: str,
        zookeeper: str,
        group: str,
        topic: str,
        streams: int,
        props: Mapping[str, object],
        collector: Collector,
        ownership: OwnershipLog,
        log_dir: Path,
    ) -> None:
        self.name = name
        self.argv = [
            sys.executable, "-m", "tools.fault_harness", "member", zookeeper, group, topic,
            str(streams),
            *(f"{k}={v}" for k, v in props.items() if k not in ("zookeeper.connect", "group.id")),
        ]
        self.topic = topic
        self.collector = collector
        self.ownership = ownership
        self.stderr_path = log_dir / f"{name}.stderr"
        self._lock = threading.Lock()
        self.consumer_id: str | None = None
        self.session: tuple[int, bytes] | None = None
        self.rebalances = 0
        self.ready = threading.Event()
        self.proc: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None
        self.ended_ns: int | None = None
        #: The tail of its stderr, with every thread's stack, when it did not exit in time.
        self.hang: str | None = None

    def start(self) -> ProcessMember:
        with open(self.stderr_path, "w") as err:
            self.proc = subprocess.Popen(
                self.argv, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL,
                text=True, cwd=ROOT, bufsize=1 << 16,
            )
        self._reader = threading.Thread(target=self._read, name=f"read-{self.name}",
                                        daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        record = self.collector.record
        name, topic = self.name, self.topic
        for line in self.proc.stdout:
            parts = line.split()
            if not parts:
                continue
            kind = parts[0]
            if kind == "MSG":
                record(name, topic, int(parts[1]), int(parts[2]), int(parts[3]), int(parts[4]),
                       parts[5].encode() if len(parts) > 5 else b"")
            elif kind == "CLAIM":
                tps = [] if parts[2] == "-" else [
                    TP(*_split_tp(x)) for x in parts[2].split(",")]
                self.ownership.claim(name, int(parts[1]), tps)
            elif kind == "RELEASE":
                self.ownership.release(name, int(parts[1]))
            elif kind == "DOWN":
                self.ownership.down(name, int(parts[1]))
            elif kind == "UP":
                self.ownership.up(name, int(parts[1]))
            elif kind in ("READY", "SESSION"):
                with self._lock:
                    if kind == "READY":
                        self.consumer_id = parts[1]
                        parts = parts[1:]
                    self.session = (int(parts[1], 16), bytes.fromhex(parts[2]))
                if kind == "READY":
                    self.ready.set()
            elif kind == "REBAL":
                with self._lock:
                    self.rebalances = int(parts[1])

    def wait_ready(self, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while not self.ready.wait(0.1):
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"member {self.name} exited ({self.proc.returncode}) "
                                     f"before READY:\n{self.stderr()[-3000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"member {self.name} not READY within {timeout}s:\n"
                                     f"{self.stderr()[-3000:]}")
        assert self.consumer_id is not None
        return self.consumer_id

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self, sig: int = signal.SIGKILL, timeout: float = 60.0) -> bool:
        """Send ``sig`` and wait up to ``timeout`` for the process to end; False if it did not
        (then its thread stacks are dumped to its stderr, see :attr:`hang`, and it is
        SIGKILLed)."""
        assert self.proc is not None
        ended = True
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            ended = False
            self.proc.send_signal(signal.SIGUSR1)  # faulthandler: every thread's stack
            time.sleep(1.0)
            self.proc.kill()
            self.proc.wait(60)
            self.hang = self.stderr()[-6000:]
        self.ended_ns = now_ns()
        self.ownership.end(self.name, self.ended_ns)
        if self._reader is not None:
            self._reader.join(30)
        return ended

    def stop(self, timeout: float = 60.0) -> bool:
        """Graceful: SIGTERM makes the member shut its connector down (final commit). False
        when it did not exit within ``timeout`` (a hung shutdown; see :attr:`hang`)."""
        return self.kill(signal.SIGTERM, timeout)

    def stderr(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""


def _split_tp(text: str) -> tuple[str, int]:
    topic, _, p = text.rpartition(":")
    return topic, int(p)


# -- the ownership sampler ------------------------------------------------------------------------


@dataclass
class _Belief:
    consumer_id: str
    session: int | None
    owned: dict[TopicPartition, str]
    fetching: frozenset[TopicPartition]


class OwnershipSampler(threading.Thread):
    """Samples the group's ownership every ``interval`` seconds while it runs.

    Each round reads the in-process connectors' beliefs (``owned_partitions`` and the
    partitions they fetch), then ZooKeeper (ids with their sessions, owner znodes with content
    and ephemeralOwner, committed offsets), then the beliefs again; a conflict counts only if
    both belief snapshots show it, so a member between "delete my znode" and "forget it" is
    not reported. Violations recorded:

    - two in-process members both owning (or both fetching) one partition;
    - an in-process member owning a partition whose znode names another live member's thread;
    - an owner znode whose content is not a thread of a registered member, or whose session is
      not that member's session (the znode's content and its ephemeralOwner disagree about
      who owns it: two members may both believe it is theirs);
    - a committed offset that went backwards (lost committed progress).

    ``ignore_owner(content)`` exempts znodes a test planted on purpose. ``_lock`` guards
    ``_members``, ``violations``, ``committed``, ``rounds`` and ``failed_rounds``. The ZooKeeper
    client belongs to this thread (and to :meth:`stop`).
    """

    def __init__(
        self,
        zookeeper: str,
        group: str,
        topics: Sequence[str],
        interval: float = 0.05,
        ignore_owner: Callable[[bytes], bool] | None = None,
    ) -> None:
        super().__init__(name=f"sampler-{group}", daemon=True)
        self.zookeeper = zookeeper
        self.group = group
        self.topics = list(topics)
        self.interval = interval
        self.ignore_owner = ignore_owner or (lambda _data: False)
        self._lock = threading.Lock()
        self._members: dict[str, ZookeeperConsumerConnector] = {}
        self._stop_event = threading.Event()
        self.violations: list[str] = []
        self._seen_violations: set[str] = set()
        self.committed: dict[TopicPartition, list[tuple[int, int]]] = {}
        self._last_committed: dict[TopicPartition, int] = {}
        self._forgive_all = False  # see forget_committed()
        self._forgive_topics: set[str] = set()
        self._forgiven: set[TopicPartition] = set()  # partitions that went back once already
        self.rounds = 0
        self.failed_rounds = 0
        self.max_owners_seen = 0
        self._zk = zk_client(zookeeper)

    # -- control --
    def watch(self, member: InProcessMember) -> None:
        with self._lock:
            self._members[member.name] = member.connector

    def unwatch(self, name: str) -> None:
        with self._lock:
            self._members.pop(name, None)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(30)
        self._zk.stop()
        self._zk.close()

    def forget_committed(self, topics: Iterable[str] | None = None) -> None:
        """From now on, the committed offset of each partition (of ``topics``, default all) may
        go back once: its log is about to be lost (broker restarted empty, topic deleted) and
        the members will reset. The history so far is dropped: it described that log."""
        with self._lock:
            if topics is None:
                self._forgive_all = True
            else:
                self._forgive_topics |= set(topics)
            for tp in [tp for tp in self.committed
                       if self._forgive_all or tp.topic in self._forgive_topics]:
                self.committed.pop(tp, None)

    def wait_rounds(self, n: int = 2, timeout: float = 30.0) -> None:
        """Wait until ``n`` more rounds completed (so the latest state was sampled)."""
        with self._lock:
            target = self.rounds + n
        wait_until(lambda: self.rounds >= target, timeout, f"{n} sampler rounds")

    def committed_now(self) -> dict[TopicPartition, int]:
        with self._lock:
            return {tp: hist[-1][1] for tp, hist in self.committed.items() if hist}

    # -- the thread --
    def run(self) -> None:
        while not self._stop_event.wait(self.interval):
            try:
                self._round()
            except Exception as e:  # noqa: BLE001 - ZooKeeper down: counted, sampled later
                log.debug("sampler round failed: %r", e)
                with self._lock:
                    self.failed_rounds += 1

    def _beliefs(self) -> dict[str, _Belief]:
        with self._lock:
            members = dict(self._members)
        out = {}
        for name, c in members.items():
            # A paused member (ZooKeeper connection down, or session lost and not rebalanced
            # since) hands out nothing and claims nothing: owned_partitions() is empty then.
            # Neither call waits for a rebalance under way.
            client_id = c._zk.client_id
            out[name] = _Belief(
                c.consumer_id, None if client_id is None else int(client_id[0]),
                c.owned_partitions(),
                frozenset() if c.paused else frozenset(c.partition_infos()),
            )
        return out

    def _ids(self) -> dict[str, int]:
        zk = self._zk
        ids_dir = zp.ids_dir(self.group)
        try:
            children = zk.get_children(ids_dir)
        except NoNodeError:
            return {}
        futures = [(c, zk.exists_async(zp.id_path(self.group, c))) for c in children]
        out = {}
        for c, f in futures:
            stat = f.get(timeout=10)
            if stat is not None:
                out[c] = int(stat.ephemeralOwner)
        return out

    def _partition_znodes(
        self, dir_of: Callable[[str, str], str], path_of: Callable[[str, str, int], str],
    ) -> dict[TopicPartition, tuple[bytes | None, Any]]:
        """Every ``/consumers/G/<kind>/T/P`` znode of the watched topics: (data, stat), read
        in one pipelined round; one that vanished meanwhile is left out."""
        zk = self._zk
        futures = []
        for topic in self.topics:
            try:
                children = zk.get_children(dir_of(self.group, topic))
            except NoNodeError:
                continue
            for p in children:
                if p.isdigit():
                    futures.append((TP(topic, int(p)),
                                    zk.get_async(path_of(self.group, topic, int(p)))))
        out = {}
        for tp, f in futures:
            try:
                out[tp] = f.get(timeout=10)
            except NoNodeError:
                continue
        return out

    def _owners(self) -> dict[TopicPartition, tuple[bytes, int]]:
        return {tp: (data or b"", int(stat.ephemeralOwner)) for tp, (data, stat) in
                self._partition_znodes(zp.owners_topic_dir, zp.owner_path).items()}

    def _offsets(self) -> dict[TopicPartition, int]:
        out = {}
        for tp, (data, _) in self._partition_znodes(zp.offsets_topic_dir,
                                                     zp.offset_path).items():
            try:
                out[tp] = zp.decode_offset(data)
            except ZkDataError:
                continue
        return out

    def _violation(self, text: str) -> None:
        # One entry per distinct situation (a conflict seen in ten rounds is one conflict).
        with self._lock:
            if text not in self._seen_violations:
                self._seen_violations.add(text)
                self.violations.append(text)

    def _round(self) -> None:
        before = self._beliefs()
        ids = self._ids()
        owners = self._owners()
        offsets = self._offsets()
        t_obs = now_ns()
        ids_again = self._ids() if owners else ids
        after = self._beliefs()

        # In-process beliefs against each other.
        stable = {n: b for n, b in before.items() if n in after
                  and after[n].consumer_id == b.consumer_id}
        for attr in ("owned", "fetching"):
            holders: dict[TopicPartition, list[str]] = {}
            for n, b in stable.items():
                both = set(getattr(b, attr)) & set(getattr(after[n], attr))
                for tp in both:
                    holders.setdefault(tp, []).append(n)
            for tp, names in holders.items():
                if len(names) > 1:
                    self._violation(f"{tp.topic}:{tp.partition}: {' and '.join(sorted(names))} "
                                    f"are both {attr} it")
        # In-process beliefs against ZooKeeper.
        sessions = {cid: {s for s in (ids.get(cid), ids_again.get(cid)) if s is not None}
                    for cid in set(ids) | set(ids_again)}
        for n, b in stable.items():
            for tp in set(b.owned) & set(after[n].owned):
                held = owners.get(tp)
                if held is None:
                    continue
                content, session = held
                holder = _owner_consumer(content)
                if holder is not None and holder != b.consumer_id and session in sessions.get(
                        holder, set()):
                    self._violation(
                        f"{tp.topic}:{tp.partition}: {n} believes it owns it while ZooKeeper "
                        f"says {content.decode(errors='replace')} (a live member) owns it")
        # Owner znodes: content and session must name the same live member.
        for tp, (content, session) in owners.items():
            if self.ignore_owner(content):
                continue
            holder = _owner_consumer(content)
            text = content.decode(errors="replace")
            if holder is None:
                self._violation(f"{tp.topic}:{tp.partition}: owner znode holds {text!r}, "
                                "not a consumer thread id")
            elif holder not in sessions:
                self._violation(f"{tp.topic}:{tp.partition}: owner znode names {text}, whose "
                                "member is not registered")
            elif session not in sessions[holder]:
                self._violation(
                    f"{tp.topic}:{tp.partition}: owner znode names {text} but belongs to "
                    f"session {session:#x}, not that member's session(s) "
                    f"{', '.join(hex(s) for s in sorted(sessions[holder]))}")
        # Committed offsets only move forward.
        regressions = []
        with self._lock:
            for tp, off in offsets.items():
                last = self._last_committed.get(tp)
                if last is not None and off < last:
                    forgivable = self._forgive_all or tp.topic in self._forgive_topics
                    if forgivable and tp not in self._forgiven:
                        self._forgiven.add(tp)
                    else:
                        regressions.append((tp, last, off))
                if last != off:
                    self.committed.setdefault(tp, []).append((t_obs, off))
                self._last_committed[tp] = off
            self.rounds += 1
            self.max_owners_seen = max(self.max_owners_seen, len(owners))
        for tp, last, off in regressions:
            self._violation(f"{tp.topic}:{tp.partition}: committed offset went back from "
                            f"{last} to {off}")


def _owner_consumer(content: bytes) -> str | None:
    try:
        return zp.thread_consumer_id(zp.decode_owner(content))
    except ZkDataError:
        return None


# -- verification -------------------------------------------------------------------------------


@dataclass
class RunReport:
    """What a run delivered against what it should have; :meth:`problems` lists failures."""

    name: str
    expected: int
    delivered: int
    unique: int
    duplicates: int
    #: Messages handed out by a member after its partition was claimed by another (its
    #: session expired) that another member also handed out: see
    #: OwnershipLog.zombie_duplicates.
    zombie_duplicates: int = 0
    missing: list[Key] = field(default_factory=list)
    replays: list[str] = field(default_factory=list)
    overlaps: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    longest_pause_s: float = 0.0
    longest_partition_pause_s: float = 0.0
    longest_partition_pause_at: str = ""
    sampler_rounds: int = 0

    def problems(self) -> list[str]:
        out = []
        if self.missing:
            out.append(f"{len(self.missing)} produced message(s) never consumed, e.g. "
                       f"{sorted(self.missing)[:5]}")
        out += [f"replayed committed progress: {r}" for r in self.replays[:10]]
        if self.zombie_duplicates:
            out.append(f"{self.zombie_duplicates} message(s) handed out by a member after "
                       "another had claimed the partition, and by that one too")
        out += [f"two owners: {o}" for o in self.overlaps[:10]]
        out += [f"sampler: {v}" for v in self.violations[:10]]
        out += [f"consumer error: {e}" for e in self.errors[:10]]
        return out

    def summary(self) -> str:
        return (f"{self.name}: {self.expected} produced, {self.delivered} deliveries, "
                f"{self.duplicates} duplicate(s) ({self.zombie_duplicates} zombie), all from "
                f"uncommitted windows: "
                f"{'yes' if not self.replays else 'NO'}; ownership overlaps "
                f"{len(self.overlaps)}, sampler violations {len(self.violations)} in "
                f"{self.sampler_rounds} rounds; longest pause {self.longest_pause_s:.2f} s "
                f"(one partition: {self.longest_partition_pause_s:.2f} s)")

    def to_json(self) -> dict[str, Any]:
        return {
            "expected": self.expected, "deliveries": self.delivered, "unique": self.unique,
            "duplicates": self.duplicates, "zombie_duplicates": self.zombie_duplicates,
            "missing": len(self.missing),
            "replays": self.replays[:20], "ownership_overlaps": self.overlaps[:20],
            "sampler_violations": self.violations[:20], "errors": self.errors[:20],
            "longest_pause_s": round(self.longest_pause_s, 3),
            "longest_partition_pause_s": round(self.longest_partition_pause_s, 3),
            "sampler_rounds": self.sampler_rounds,
        }


def replays(
    deliveries: Iterable[Delivery],
    committed: Mapping[TopicPartition, Sequence[tuple[int, int]]],
    since_ns: int = 0,
) -> list[str]:
    """Deliveries of an offset below one that had already been committed (observed) before.

    A duplicate from an uncommitted window is fine; one that replays committed progress means
    the group lost what it had committed (or two members consumed one partition at once).
    """
    out = []
    hist = {tp: sorted(h) for tp, h in committed.items()}
    for d in deliveries:
        if d.t0_ns < since_ns:
            continue
        h = hist.get(TP(d.topic, d.partition))
        if not h:
            continue
        best = -1
        best_t = 0
        for t, off in h:  # histories are short (one entry per change)
            if since_ns <= t < d.t0_ns and off > best:
                best, best_t = off, t
        if d.offset < best:
            out.append(f"{d.member} delivered {d.topic}:{d.partition}@{d.offset} "
                       f"{(d.t0_ns - best_t) / 1e6:.0f} ms after offset {best} was committed")
    return out


def longest_pause(deliveries: Iterable[Delivery], since_ns: int = 0,
                  until_ns: int | None = None) -> float:
    """Longest time (s) in [since, until] during which these deliveries had a gap (the
    whole window when there is none in it, and the window is bounded)."""
    until = 2**63 if until_ns is None else until_ns
    times = sorted(d.t_ns for d in deliveries if since_ns <= d.t_ns <= until)
    if not times:
        return (until_ns - since_ns) / 1e9 if since_ns and until_ns is not None else 0.0
    edges = [since_ns or times[0], *times]
    if until_ns is not None:
        edges.append(until_ns)
    return max((b - a for a, b in zip(edges, edges[1:], strict=False)), default=0) / 1e9


def longest_partition_pause(deliveries: Iterable[Delivery], since_ns: int,
                            until_ns: int, partitions: Iterable[tuple[str, int]] = ()
                            ) -> tuple[float, str]:
    """The longest time one partition went without a delivery in [since, until] (under a
    steady load, each partition should see messages all the time), and which partition.
    ``partitions``: those to look at besides the ones delivered from (a partition stalled
    the whole window has no delivery in it)."""
    by_tp: dict[tuple[str, int], list[Delivery]] = {tp: [] for tp in partitions}
    for d in deliveries:
        by_tp.setdefault((d.topic, d.partition), []).append(d)
    worst, which = 0.0, ""
    for (topic, p), ds in sorted(by_tp.items()):
        gap = longest_pause(ds, since_ns, until_ns)
        if gap > worst:
            worst, which = gap, f"{topic}:{p}"
    return worst, which


def uncommitted_window(
    deliveries: Iterable[Delivery], member: str, committed: Mapping[TopicPartition, int]
) -> int:
    """How many messages ``member`` had received beyond the committed offsets: what a new owner
    may deliver again after ``member`` dies (``committed`` read after its death)."""
    top: dict[TopicPartition, int] = {}
    for d in deliveries:
        if d.member == member:
            tp = TP(d.topic, d.partition)
            top[tp] = max(top.get(tp, -1), d.offset)
    return sum(max(0, last + 1 - committed.get(tp, 0)) for tp, last in top.items())


def verify(
    name: str,
    expected: Iterable[Key],
    collector: Collector,
    sampler: OwnershipSampler | None,
    ownership: OwnershipLog | None,
    since_ns: int = 0,
    pause_window: tuple[int, int] | None = None,
    topics: Iterable[str] | None = None,
    while_down: bool = False,
) -> RunReport:
    """Check a run's invariants; see :class:`RunReport`. Only deliveries from ``since_ns`` on
    (and of ``topics``, when given) count. ``while_down``: also count messages handed out
    while a member's ZooKeeper connection was down as ownership violations (see
    :meth:`OwnershipLog.deliveries_while_down`; for runs where sessions are expired)."""
    exp = set(expected)
    only = None if topics is None else set(topics)
    deliveries = [d for d in collector.snapshot() if only is None or d.topic in only]
    counts = Counter((d.topic, d.partition, d.offset) for d in deliveries if d.t0_ns >= since_ns)
    duplicates = sum(n - 1 for n in counts.values() if n > 1)
    report = RunReport(
        name=name, expected=len(exp), delivered=sum(counts.values()), unique=len(counts),
        duplicates=duplicates, missing=sorted(exp - set(counts)),
    )
    if sampler is not None:
        with sampler._lock:
            committed = {tp: list(h) for tp, h in sampler.committed.items()}
            report.violations = list(sampler.violations)
            report.sampler_rounds = sampler.rounds
        report.replays = replays(deliveries, committed, since_ns)
    if ownership is not None:
        report.overlaps = ownership.overlaps() + ownership.stale_deliveries(deliveries)
        report.zombie_duplicates = ownership.zombie_duplicates(
            d for d in deliveries if d.t0_ns >= since_ns)
        if while_down:
            report.overlaps += ownership.deliveries_while_down(deliveries)
    report.errors = [f"{m}: {e!r}" for m, e in collector.errors]
    if pause_window is not None:
        report.longest_pause_s = longest_pause(deliveries, *pause_window)
        report.longest_partition_pause_s, report.longest_partition_pause_at = (
            longest_partition_pause(deliveries, *pause_window,
                                    partitions={(t, p) for t, p, _ in exp}))
    return report


# -- one run ------------------------------------------------------------------------------------


class FaultRun:
    """One group on one topic with its workload, collector, ownership log and sampler.

    ``close()`` (or the ``with`` block's end) stops the workload, stops every member still
    alive gracefully (SIGTERM for processes) and stops the sampler. Members are named
    ``p<n>`` (processes) and ``c<n>`` (in-process) unless named explicitly.
    """

    def __init__(
        self,
        name: str,
        zookeeper: str,
        bootstrap: str,
        group: str,
        topic: str,
        partitions: int,
        log_dir: Path,
        ignore_owner: Callable[[bytes], bool] | None = None,
        topics: Sequence[str] = (),
    ) -> None:
        self.name = name
        self.zookeeper = zookeeper
        self.bootstrap = bootstrap
        self.group = group
        self.topic = topic
        self.partitions = partitions
        self.log_dir = log_dir
        self.collector = Collector()
        self.ownership = OwnershipLog()
        self.workload = Workload(bootstrap, topic, partitions)
        self.sampler = OwnershipSampler(zookeeper, group, [topic, *topics],
                                        ignore_owner=ignore_owner)
        self.sampler.start()
        self.processes: list[ProcessMember] = []
        self.members: list[InProcessMember] = []
        self.started_ns = now_ns()

    def __enter__(self) -> FaultRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def props(self, **extra: object) -> dict[str, object]:
        return member_props(self.zookeeper, self.group, **extra)

    def add_process(self, name: str | None = None, streams: int = 1, wait: bool = True,
                    zookeeper: str | None = None, **extra: object) -> ProcessMember:
        """A member process; ``zookeeper``: its own address of ZooKeeper (a proxy's)."""
        name = name or f"p{len(self.processes)}"
        m = ProcessMember(name, zookeeper or self.zookeeper, self.group, self.topic, streams,
                          self.props(**extra), self.collector, self.ownership, self.log_dir)
        self.processes.append(m)
        m.start()
        if wait:
            m.wait_ready()
        return m

    def add_member(self, name: str | None = None, streams: int = 1, delays: Sequence[float] = (),
                   fetcher_factory: Any = None, value_decoder: Any = None,
                   topic_counts: Mapping[str, int] | None = None,
                   **extra: object) -> InProcessMember:
        """A connector in this process, registered and rebalanced when this returns."""
        name = name or f"c{len(self.members)}"
        m = InProcessMember(name, self.props(**extra), self.collector, self.ownership,
                            fetcher_factory)
        self.members.append(m)
        self.sampler.watch(m)
        m.start(topic_counts or {self.topic: streams}, delays, value_decoder)
        return m

    def stop_member(self, m: InProcessMember) -> None:
        m.stop()
        self.sampler.unwatch(m.name)

    def close(self) -> None:
        try:
            self.workload.close()
        finally:
            for p in self.processes:
                if p.alive and not p.stop():
                    log.error("member %s did not shut down within 60 s:\n%s", p.name, p.hang)
            for m in self.members:
                m.stop()
            self.sampler.stop()

    def wait_consumed(self, timeout: float, keys: Iterable[Key] | None = None) -> None:
        """Wait until every acknowledged message (or ``keys``) was delivered at least once."""
        want = set(self.workload.expected() if keys is None else keys)
        wait_until(lambda: self.collector.has_all(want), timeout,
                   f"{len(want)} messages consumed "
                   f"(have {len(want & self.collector.seen())})")

    def verify(self, since_ns: int = 0, expected: Iterable[Key] | None = None,
               topics: Iterable[str] | None = None, while_down: bool = False,
               load_from_ns: int | None = None, load_until_ns: int | None = None) -> RunReport:
        """:func:`verify` for this run; pauses are measured from ``load_from_ns`` (default
        ``since_ns``, or the start) to ``load_until_ns`` (when the load stopped; default now)."""
        self.sampler.wait_rounds(2)
        exp = self.workload.expected() if expected is None else expected
        window = (load_from_ns or since_ns or self.started_ns, load_until_ns or now_ns())
        return verify(self.name, exp, self.collector, self.sampler, self.ownership, since_ns,
                      pause_window=window, topics=topics, while_down=while_down)


# -- the member process ----------------------------------------------------------------------------


def member_main(argv: Sequence[str]) -> int:
    """``member ZK GROUP TOPIC STREAMS [key=value ...] [slow=SECONDS]``.

    Prints, one line each (``T`` = ``time.monotonic_ns()``):

    - ``READY <consumer id> <session hex> <password hex>`` after the first rebalance;
    - ``SESSION <session hex> <password hex>`` when the ZooKeeper session changes;
    - ``CLAIM T <topic:p,...>`` after claiming, ``RELEASE T`` before releasing (listener)
      and when it starts to shut down;
    - ``UP T`` when the connection is back with the same session;
    - ``DOWN T <state>`` when the ZooKeeper connection is lost (SUSPENDED) or the session
      expired (LOST); ``REBAL <n>`` after each rebalance;
    - ``MSG <partition> <offset> T0 T <value>`` per message (T0 before the ``next()`` call).

    SIGUSR1 dumps every thread's stack to stderr. SIGUSR2 breaks the ZooKeeper connection (a
    network blip: kazoo reconnects with the same session).

    SIGTERM shuts the connector down cleanly (final commit) and exits 0. Output goes through
    one writer thread so that no consumer thread (nor kazoo's) ever blocks on the pipe.
    """
    import faulthandler

    # SIGUSR1 dumps every thread's stack to stderr: how the harness sees a hung shutdown.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    zk, group, topic, streams = argv[:4]
    extra = dict(arg.split("=", 1) for arg in argv[4:])
    slow = float(extra.pop("slow", "0"))
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    props: dict[str, object] = {"zookeeper.connect": zk, "group.id": group}
    props.update(extra)
    out: queue.SimpleQueue[str | None] = queue.SimpleQueue()
    # Set by the SIGTERM handler. Not an Event: the handler runs in the main thread, and
    # Event.set() there while the main thread is inside Event.wait() deadlocks on the Event's
    # lock (seen: a member that never exited).
    stopping: list[bool] = [False]

    def writer(stream: IO[str]) -> None:
        while True:
            line = out.get()
            lines = [line]
            try:
                while len(lines) < 512:
                    lines.append(out.get_nowait())
            except queue.Empty:
                pass
            stream.write("".join(x for x in lines if x is not None))
            stream.flush()
            if None in lines:
                return

    w = threading.Thread(target=writer, args=(sys.stdout,), daemon=True)
    w.start()

    class Listener(ConsumerRebalanceListener):
        def before_releasing_partitions(self, partition_ownership: Any) -> None:
            out.put(f"RELEASE {now_ns()}\n")

        def before_starting_fetchers(self, consumer_id: str, assignment: Any) -> None:
            mine = _mine(consumer_id, assignment)
            text = ",".join(f"{t}:{p}" for t, p in mine) or "-"
            out.put(f"CLAIM {now_ns()} {text}\n")

    connector = ZookeeperConsumerConnector(ConsumerConfig(props))
    connector.set_consumer_rebalance_listener(Listener())
    session_id = [connector._zk._session_id]

    def on_state(state: str) -> None:
        if state in (KazooState.LOST, KazooState.SUSPENDED):
            out.put(f"DOWN {now_ns()} {state}\n")
        elif state == KazooState.CONNECTED:
            if connector._zk._session_id == session_id[0]:
                out.put(f"UP {now_ns()}\n")
            session_id[0] = connector._zk._session_id

    connector._zk.add_listener(on_state)
    signal.signal(signal.SIGTERM, lambda *_: stopping.__setitem__(0, True))
    # SIGUSR2: a network blip (the connection drops; kazoo reconnects with the same session).
    def blip(*_: object) -> None:
        try:
            drop_connection(connector._zk)
        except (AssertionError, OSError):
            pass  # not connected just now: nothing to break

    signal.signal(signal.SIGUSR2, blip)
    result = connector.create_message_streams({topic: int(streams)})

    def session_text() -> str:
        client_id = connector._zk.client_id
        return "0 00" if client_id is None else f"{client_id[0]:x} {bytes(client_id[1]).hex()}"

    session = session_text()
    out.put(f"READY {connector.consumer_id} {session}\n")

    def drain(stream: Any) -> None:
        it = iter(stream)
        while True:
            t0 = now_ns()
            try:
                m = next(it)
            except StopIteration:
                return
            except ConsumerTimeoutException:
                continue
            except Exception as e:  # noqa: BLE001 - reported; the stream goes on
                print(f"iteration error: {e!r}", file=sys.stderr, flush=True)
                continue
            value = m.message.decode("ascii", "backslashreplace") if m.message else "-"
            out.put(f"MSG {m.partition} {m.offset} {t0} {now_ns()} {value}\n")
            if slow:
                time.sleep(slow)

    for s in result[topic]:
        threading.Thread(target=drain, args=(s,), daemon=True).start()
    rebalances = -1
    while not stopping[0]:
        time.sleep(0.05)
        now = session_text()
        if now != session and not now.startswith("0 "):
            session = now
            out.put(f"SESSION {session}\n")
        if connector.stats.rebalances != rebalances:
            rebalances = connector.stats.rebalances
            out.put(f"REBAL {rebalances}\n")
    # Leaving: from here on the member may stop consuming at any moment, and others may claim
    # its partitions once its session closes, inside shutdown(); its ownership ends now.
    out.put(f"RELEASE {now_ns()}\n")
    connector.shutdown()
    out.put(None)
    w.join(10)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] != "member" or len(args) < 5:
        print("usage: python -m tools.fault_harness member ZK GROUP TOPIC STREAMS "
              "[key=value ...] [slow=SECONDS]", file=sys.stderr)
        return 2
    return member_main(args[1:])


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
