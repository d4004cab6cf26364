"""Fencing: a member that may have lost its ZooKeeper session commits nothing.

A ZooKeeper server expires a session only after it heard nothing from the client for the
negotiated session timeout, and it answers no request of an expired session. So every answer
to a request sent on a session at monotonic time ``t`` proves that the session lives until
``t + timeout`` at least: :class:`SessionLease` keeps the latest such proof. A process paused
(a long GC, SIGSTOP, a frozen VM) past the timeout finds its lease stale on resume, before its
ZooKeeper client has noticed anything.

:class:`CommitFence` decides which offsets may be written:

- only under the session that made the commit (a commit made before a session loss is dropped,
  never retried under the next session), and only for partitions this member owns;
- in ZooKeeper, conditionally: the offsets' transaction carries a ``check`` of each
  partition's owner znode at the version this session created it with (read back once per
  session and partition: its ``ephemeralOwner`` must be this session). The server runs the
  transaction only if the session is alive and the owner znodes are unchanged, so a zombie
  cannot win a race with the partition's next owner;
- in Kafka (``offsets.storage=kafka``, dual commit), which has no such condition for a group
  without a generation: only while the lease is fresh, confirmed by a ZooKeeper round trip
  when it is not. A pause between that check and the request's send is the one race left.

Dropped offsets are logged as a warning naming the partitions, and reported to an
asynchronous commit's callback as :class:`~zkconsumer._errors.CommitFencedError`.

Locking: ``SessionLease._lock`` guards its ``_session`` and ``_proof``;
``CommitFence._lock`` guards ``_session`` and ``_versions``. Neither is held across a
ZooKeeper call.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss, NoNodeError, RolledBackError, RuntimeInconsistency
from kazoo.handlers.threading import KazooTimeoutError

from zkconsumer._errors import SessionUnprovenError
from zkconsumer._types import TopicPartition
from zkconsumer.consumer.gate import DeliveryGate, LeaseDeadline, lease_clock
from zkconsumer.zk import paths as zp

log = logging.getLogger("zkconsumer.fence")

Clock = Callable[[], float]

#: The share of the negotiated session timeout a proof of the session is trusted for.
LEASE_FRACTION = 0.5
#: Owner znodes read per window (sent together, then awaited).
READ_WINDOW = 100
#: Renewals sent per lease length: a few answers may be slow or lost before it runs out.
RENEWALS_PER_LEASE = 4


class SessionLease:
    """The latest proof that this member's ZooKeeper session lives (see the module doc).

    ``fraction`` of the negotiated timeout is how long a proof is trusted: the rest is the
    margin for the other members to notice the expiry (they need at least one more ZooKeeper
    round trip after it), for clock rate differences between hosts, and for a thread that
    checked the lease just before a pause.
    """

    def __init__(self, fraction: float, timeout_s: float, clock: Clock = lease_clock) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        #: The delivery gate's view of the lease: its deadline, moved on with every renewal
        #: (read by the streams' permits, per message).
        self.deadline = LeaseDeadline()
        self.fraction = fraction
        self._timeout_s = timeout_s
        self._session: int | None = None
        self._proof = float("-inf")

    @property
    def clock(self) -> Clock:
        return self._clock

    def set_timeout(self, timeout_s: float) -> None:
        """The negotiated session timeout (ZooKeeper may cut the one asked for)."""
        with self._lock:
            self._timeout_s = timeout_s
            if self._session is not None:
                self.deadline.deadline = self._proof + self.fraction * self._timeout_s

    def renew(self, session: int, sent_at: float) -> None:
        """A request sent on ``session`` at ``sent_at`` (this lease's clock) was answered."""
        with self._lock:
            if session != self._session:
                self._session = session
                self._proof = sent_at
            else:
                self._proof = max(self._proof, sent_at)
            self.deadline.deadline = self._proof + self.fraction * self._timeout_s

    def forget(self) -> None:
        """The session is (or may be) gone: no proof holds until a new answer comes."""
        with self._lock:
            self._session = None
            self._proof = float("-inf")
            self.deadline.deadline = float("-inf")

    def expires_at(self, session: int | None = None) -> float:
        """When the latest proof stops being trusted (``-inf`` for another session)."""
        with self._lock:
            if self._session is None or (session is not None and session != self._session):
                return float("-inf")
            return self._proof + self.fraction * self._timeout_s

    def fresh(self, session: int | None = None) -> bool:
        return self._clock() < self.expires_at(session)

    def length(self) -> float:
        """How long a proof is trusted, in seconds."""
        with self._lock:
            return self.fraction * self._timeout_s

    def age(self) -> float:
        """Seconds since the latest proof was sent (``inf`` without one)."""
        with self._lock:
            return self._clock() - self._proof


@dataclass(frozen=True)
class OwnerVersions:
    """What :meth:`CommitFence.owner_versions` found: the owner znode version of each
    partition this ``session`` owns, and the partitions it does not own."""

    session: int
    versions: dict[TopicPartition, int]
    not_ours: list[TopicPartition]


class CommitFence:
    """Which offsets this member may write (see the module doc)."""

    def __init__(self, zk: KazooClient, group: str, lease: SessionLease, name: str,
                 logger: logging.LoggerAdapter[logging.Logger] | None = None,
                 timeout_s: float | None = None,
                 send_guard: Callable[[], AbstractContextManager[Any]] = nullcontext) -> None:
        self.name = name  # the member's consumer id, for errors and logs
        # Held while requests are sent: the connector's check that the session that owns the
        # partitions lives and is connected (kazoo holds a request made while disconnected).
        self._send_guard = send_guard
        self._zk = zk
        self._group = group
        self.lease = lease
        self._log = logger or logging.LoggerAdapter(log, {})
        self._timeout = timeout_s  # longest wait for one answer
        self._lock = threading.Lock()
        self._session: int | None = None
        self._versions: dict[TopicPartition, int] = {}

    # -- sessions ----------------------------------------------------------------------------
    def session(self) -> int:
        """The client's session id now; ConnectionLoss while it has none."""
        client_id = self._zk.client_id
        if client_id is None:
            raise ConnectionLoss()
        return int(client_id[0])

    def current(self, session: int) -> bool:
        """Whether the client is still on ``session`` (checked as a write is sent)."""
        client_id = self._zk.client_id
        return client_id is not None and int(client_id[0]) == session

    # -- what may be committed ---------------------------------------------------------------
    def admit(self, offsets: Mapping[TopicPartition, int], made_in: int, now_in: int,
              owned: Collection[TopicPartition]) -> tuple[dict[TopicPartition, int],
                                                          dict[TopicPartition, str]]:
        """Split ``offsets`` into what may be written and what is dropped (with why).

        ``made_in`` and ``now_in`` count the sessions lost before the commit was made and
        now: a commit made under an earlier session is dropped whole.
        """
        if made_in != now_in:
            return {}, dict.fromkeys(offsets, "made under an earlier ZooKeeper session")
        kept = {tp: off for tp, off in offsets.items() if tp in owned}
        dropped = dict.fromkeys((tp for tp in offsets if tp not in kept),
                                "the partition is no longer owned by this member")
        return kept, dropped

    def warn_dropped(self, dropped: Mapping[TopicPartition, str]) -> None:
        by_reason: dict[str, list[TopicPartition]] = {}
        for tp, why in dropped.items():
            by_reason.setdefault(why, []).append(tp)
        for why, tps in sorted(by_reason.items()):
            self._log.warning("offsets of %s not committed (never retried): %s",
                              ", ".join(f"{t}:{p}" for t, p in sorted(tps)), why)

    # -- ZooKeeper: conditional writes -------------------------------------------------------
    def owner_versions(self, tps: Collection[TopicPartition],
                       reread: bool = False) -> OwnerVersions:
        """The version of each partition's owner znode held by this session, read back once
        per session (``reread``: now), and the partitions whose owner znode is missing or
        another session's. Every answer renews the lease."""
        session = self.session()
        with self._lock:
            if self._session != session:
                self._session = session
                self._versions = {}
            known = {} if reread else {tp: self._versions[tp] for tp in tps
                                       if tp in self._versions}
        unknown = sorted(tp for tp in tps if tp not in known)
        not_ours: list[TopicPartition] = []
        if unknown or reread:
            sent_at = self.lease.clock()
            found: dict[TopicPartition, int] = {}
            if not unknown:  # nothing to read: a sync is the round trip that renews the lease
                with self._send_guard():
                    synced = self._zk.sync_async(zp.owners_dir(self._group))
                synced.get(timeout=self._timeout)
            # A window at a time, each sent only while connected (see _offsets.PIPELINE_WINDOW:
            # hundreds of requests queued while disconnected would block the sender).
            for start in range(0, len(unknown), READ_WINDOW):
                with self._send_guard():
                    reads = [(tp, self._zk.exists_async(zp.owner_path(
                        self._group, tp.topic, tp.partition)))
                        for tp in unknown[start:start + READ_WINDOW]]
                for tp, result in reads:
                    stat = result.get(timeout=self._timeout)
                    if stat is not None and stat.ephemeralOwner == session:
                        found[tp] = stat.version
                    else:
                        not_ours.append(tp)
            if not self.current(session):
                raise ConnectionLoss()  # answered, but a new session may have answered
            self.lease.renew(session, sent_at)
            with self._lock:
                if self._session == session:
                    self._versions.update(found)
                    for tp in not_ours:
                        self._versions.pop(tp, None)
            known.update(found)
        return OwnerVersions(session, known, not_ours)

    def forget(self, tps: Collection[TopicPartition] | None = None) -> None:
        """Owner znodes released, rewritten or lost: read them back before the next write."""
        with self._lock:
            if tps is None:
                self._versions = {}
                self._session = None
            else:
                for tp in tps:
                    self._versions.pop(tp, None)

    # -- Kafka: writes without a condition ---------------------------------------------------
    def confirm_alive(self, tps: Collection[TopicPartition]) -> list[TopicPartition]:
        """Before an unconditional (Kafka) write of ``tps``: make sure the lease is fresh,
        with a ZooKeeper round trip when it is not (which also reads the owner znodes back),
        and return the partitions whose owner znode is not this session's. Raises
        ConnectionLoss when the session cannot be shown alive."""
        session = self.session()
        not_ours: list[TopicPartition] = []
        if not self.lease.fresh(session):
            try:
                not_ours = self.owner_versions(tps, reread=True).not_ours
            except KazooTimeoutError as e:
                raise SessionUnprovenError() from e
        if not self.lease.fresh(session):
            # Still stale right after an answer: the process paused meanwhile.
            raise SessionUnprovenError()
        return not_ours


class LeaseKeeper:
    """Renews the lease with a cheap request (``exists`` of the member's ids znode) every
    :data:`RENEWALS_PER_LEASE`-th of the lease, in its own daemon thread; closes ``gate``
    (reason ``"lease"``) once the lease has run out, and opens it again when an answer on
    the same session renews it. After a lost session the connector's own ``"session"``
    reason keeps the gate closed until it has rebalanced under the new one.

    Without a gate (``zookeeper.outage.delivery=continue``) it only renews the lease that
    the Kafka commits need.
    """

    def __init__(self, zk: KazooClient, lease: SessionLease, gate: DeliveryGate | None,
                 path: str, name: str, stop: threading.Event,
                 logger: logging.LoggerAdapter[logging.Logger] | None = None) -> None:
        self._zk = zk
        self._lease = lease
        self._gate = gate
        self._path = path
        self._stop = stop
        self._wake = threading.Event()  # renew now: the connection is back, or stopping
        self._log = logger or logging.LoggerAdapter(log, {})
        self._thread = threading.Thread(target=self._run, name=f"{name}-lease", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        """Renew (or notice the stop) now rather than at the next interval; never blocks
        (kazoo's thread calls it when the connection is back)."""
        self._wake.set()

    def join(self, timeout_s: float) -> None:
        self.wake()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)

    def interval(self) -> float:
        return self._lease.length() / RENEWALS_PER_LEASE

    def _run(self) -> None:
        while True:
            try:
                self.renew()
            except Exception as e:  # noqa: BLE001 - the next round tries again
                self._log.debug("lease renewal failed: %r", e)
            self.check()
            self._wake.wait(self.interval())
            self._wake.clear()
            if self._stop.is_set():
                return

    def check(self) -> None:
        """Close the gate once the lease has run out (a stream may have done it first)."""
        gate = self._gate
        if gate is not None and "lease" not in gate.reasons() and gate.lapsed():
            self._log.warning("no answer from ZooKeeper on this session for %.1f s: handing "
                              "out nothing until it answers (the session may have expired "
                              "and the partitions moved)", self._lease.age())

    def renew(self) -> bool:
        """One request; True when its answer renewed the lease."""
        client_id = self._zk.client_id
        if client_id is None or not self._zk.connected:
            return False
        session = int(client_id[0])
        sent_at = self._lease.clock()
        self._zk.exists_async(self._path).get(timeout=self._lease.length())
        client_id = self._zk.client_id
        if client_id is None or int(client_id[0]) != session:
            return False  # answered under another session: proves nothing about this one
        was_fresh = self._lease.fresh(session)
        self._lease.renew(session, sent_at)
        if self._gate is not None and self._lease.fresh(session):
            if not was_fresh and "lease" in self._gate.reasons():
                self._log.info("ZooKeeper answered on the same session again: handing out "
                               "messages again")
            self._gate.open("lease")
        return True


def missing_offset_nodes(results: list[object], ops: list[tuple[TopicPartition, str]]
                         ) -> tuple[set[TopicPartition], set[TopicPartition]]:
    """From a failed offsets transaction: (partitions whose owner check failed, partitions
    whose offset znode is missing). ``ops`` names each operation: (partition, "check" or
    "write")."""
    owners: set[TopicPartition] = set()
    missing: set[TopicPartition] = set()
    for (tp, kind), result in zip(ops, results, strict=False):
        if not isinstance(result, Exception):
            continue
        if kind == "check" and not _rolled_back(result):
            owners.add(tp)
        elif kind == "write" and isinstance(result, NoNodeError):
            missing.add(tp)
    return owners, missing


def _rolled_back(error: Exception) -> bool:
    return isinstance(error, (RolledBackError, RuntimeInconsistency))


__all__ = [
    "LEASE_FRACTION", "RENEWALS_PER_LEASE", "CommitFence", "LeaseKeeper", "OwnerVersions",
    "SessionLease", "missing_offset_nodes",
]
