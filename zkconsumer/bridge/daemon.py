"""The bridge's loop: :class:`Bridge` connects, then runs a round every interval until
stopped.

A round (:meth:`Bridge.reconcile_once`) reads the cluster (:mod:`~zkconsumer.bridge.cluster`),
writes its topics (:mod:`~zkconsumer.bridge.topics`) and then its brokers
(:mod:`~zkconsumer.bridge.brokers`), so brokers appear with their topics. No round runs while
ZooKeeper is disconnected; a round that meets a dead connection fails with one warning and
the next one, once ZooKeeper is back, rewrites everything. A cluster unreachable for
``gone_after_s`` loses its broker registrations.

Threading: :meth:`Bridge.run` loops in the caller's thread. ``_stop`` (an Event) is the only
state shared with other threads (the connect at start waits on it too, so SIGTERM ends a
bridge still waiting for ZooKeeper), besides what kazoo's threads set: ``_resync``, set from
the state listener, makes the next round make the top-level paths again and read every topic
again (ephemerals vanish with an expired session); and the topics a watch reported changed
(:class:`~zkconsumer.bridge.topics.TopicSync`). At stop, the broker registrations are deleted
only while connected: otherwise they are ephemeral and go with the session.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.protocol.states import KazooState

from zkconsumer._errors import ZooKeeperRefusedError
from zkconsumer.bridge.brokers import BrokerRegistry
from zkconsumer.bridge.cluster import ClusterView, read_cluster
from zkconsumer.bridge.connecting import ZkTarget, _StoppedError, connect
from zkconsumer.bridge.top_paths import TopLevelPaths
from zkconsumer.bridge.topics import TopicSync
from zkconsumer.bridge.zk_requests import _ZK_GONE, Requests
from zkconsumer.broker.clients import kafka_admin

log = logging.getLogger("zkconsumer.bridge")


class Bridge:
    """Keeps ZooKeeper's broker registry equal to a Kafka-protocol cluster's metadata."""

    def __init__(
        self,
        zookeeper: str,
        bootstrap: str,
        interval_s: float = 0.5,
        gone_after_s: float = 1.0,
        connect_timeout_s: float = 30.0,
        environ: Mapping[str, str] | None = None,
        kafka: Mapping[str, Any] | None = None,
        request_timeout_s: float = 5.0,
    ) -> None:
        """``environ`` (default ``os.environ``) holds the ZooKeeper login and ACL variables;
        ``kafka`` the brokers' security settings as kafka-python arguments
        (``zkconsumer.zk.session.command_config``); ``request_timeout_s`` bounds each ZooKeeper
        request."""
        self._kafka = dict(kafka or {})
        self._zk_connect = zookeeper
        self._bootstrap = bootstrap
        self._interval = interval_s
        self._gone_after = gone_after_s
        self._stop = threading.Event()
        self._resync = threading.Event()
        self._target = ZkTarget(zookeeper, connect_timeout_s, request_timeout_s, environ,
                                self._stop)
        self._requests = Requests(zookeeper, request_timeout_s)
        self._paths = TopLevelPaths(self._requests)
        self._topics = TopicSync(self._requests)
        # Brokers are registered with one listener of this protocol (see BrokerRegistry).
        self._brokers = BrokerRegistry(
            self._requests, str(self._kafka.get("security_protocol", "PLAINTEXT")).upper())
        self._admin: Any = None
        # Failures of a round besides the one it raises, logged once each until a round works.
        self._other_failures: set[str] = set()
        self._unreachable_since: float | None = None
        self._last_failure: str | None = None  # the failure last logged, until a round works
        self.rounds = 0

    @property
    def _zk(self) -> KazooClient | None:
        """The bridge's client, once connected (every step's requests go through it)."""
        return self._requests.client

    @_zk.setter
    def _zk(self, client: KazooClient | None) -> None:
        self._requests.client = client

    # -- lifecycle -------------------------------------------------------------------------
    def stop(self) -> None:
        self._stop.set()

    def run(self) -> None:
        """Connect, then reconcile every interval until :meth:`stop`."""
        try:
            zk = self._connect()
        except _StoppedError:
            return
        self._zk = zk
        try:
            try:
                # A ZooKeeper that refuses the top-level paths ends the bridge at once (one
                # line in the CLI) rather than failing every round.
                self._paths.make()
            except (*_ZK_GONE, KazooException):
                pass  # the first round makes them, or says why it cannot
            log.info("bridge: %s -> ZooKeeper %s", self._bootstrap, self._zk_connect)
            self._loop(zk)
        finally:
            try:
                self._close_admin()
                self._deregister_all()
            finally:
                zk.stop()
                zk.close()

    def _loop(self, zk: KazooClient) -> None:
        away = False  # ZooKeeper unreachable, already logged
        while not self._stop.is_set():
            if not zk.connected:
                if not away:
                    log.warning("bridge: ZooKeeper %s unreachable; waiting for it",
                                self._zk_connect)
                    away = True
            else:
                if away:
                    log.info("bridge: ZooKeeper %s reachable again", self._zk_connect)
                    away = False
                self.run_round()
            self._stop.wait(self._interval)

    def run_round(self) -> None:
        """One :meth:`reconcile_once`; a failure is logged once until a round works again (a
        lasting one, such as an ACL refusing a write, must not log every interval)."""
        try:
            self.reconcile_once()
        except _ZK_GONE as e:
            self._resync.set()
            self._failed(f"bridge: ZooKeeper request failed ({type(e).__name__}); retrying")
        except ZooKeeperRefusedError as e:
            self._failed(f"bridge: {e}; retrying")
        except KazooException as e:  # a race with another writer: the next round redoes it
            self._paths.made = False  # in case someone deleted them
            self._failed(f"bridge: ZooKeeper request failed ({type(e).__name__}: {e}); "
                         "retrying")
        except Exception as e:  # noqa: BLE001 - one bad round must not end the bridge
            self._failed(f"bridge round failed ({type(e).__name__}: {e}); retrying",
                         trace=True)
        else:
            self._other_failures.clear()
            if self._last_failure is not None:
                log.info("bridge: rounds work again")
                self._last_failure = None

    def _failed(self, message: str, trace: bool = False) -> None:
        if message == self._last_failure:
            log.debug("%s", message)
            return
        self._last_failure = message
        log.warning("%s", message, exc_info=trace)

    def _deregister_all(self) -> None:
        self._brokers.deregister_all()

    def _connect(self) -> KazooClient:
        """A started client (see :func:`zkconsumer.bridge.connecting.connect`)."""
        return connect(self._target, self._on_state)

    def _on_state(self, state: str) -> None:
        # Never block in a kazoo callback: only flag the next round to make the paths again.
        if state == KazooState.LOST:
            self._resync.set()

    def _close_admin(self) -> None:
        if self._admin is not None:
            try:
                self._admin.close()
            except Exception:  # dropped anyway: a new one is made
                log.debug("closing the admin client failed", exc_info=True)
            self._admin = None

    # -- one round -------------------------------------------------------------------------
    def reconcile_once(self) -> None:
        if self._resync.is_set():
            self._resync.clear()
            self._paths.made = False
            self._topics.forget()  # its watches may have gone with the session
        if not self._paths.made:
            self._paths.make()
        # Every round: which registrations are this session's is read back, not trusted
        # from memory (a resync, an expired session whose ids another bridge took since,
        # one deleted by hand: each is found here, and only what is ours is deleted).
        self._brokers.adopt()
        try:
            if self._admin is None:
                self._admin = kafka_admin(
                    bootstrap_servers=self._bootstrap,
                    request_timeout_ms=3000,
                    bootstrap_timeout_ms=3000,
                    reconnect_backoff_max_ms=1000,
                    **{**self._kafka, "client_id": "zkconsumer-bridge"},
                )
            view = read_cluster(self._admin)
        except Exception as e:  # noqa: BLE001 - an unreachable cluster is a state, not a crash
            self._unreachable(e)
            return
        if self._unreachable_since is not None:
            log.info("bridge: cluster %s reachable again", self._bootstrap)
        self._unreachable_since = None
        self.apply(view)
        self.rounds += 1

    def _unreachable(self, e: Exception) -> None:
        """The cluster did not answer: said once; after ``gone_after_s`` its brokers go."""
        self._close_admin()
        now = time.monotonic()
        if self._unreachable_since is None:
            self._unreachable_since = now
            log.warning("bridge: cluster %s unreachable: %s", self._bootstrap, e)
        if now - self._unreachable_since >= self._gone_after:
            self._brokers.drop()

    def apply(self, view: ClusterView) -> None:
        """Make ZooKeeper match ``view`` (topics first, so brokers appear with their topics).
        A topic whose writes fail does not stop the others nor the broker registrations: the
        round raises its first failure at the end (a lost connection at once)."""
        failures = self._topics.sync(view)
        self._brokers.register(view)
        if failures:
            self._raise_first(failures)

    def _raise_first(self, failures: list[Exception]) -> None:
        """Raise the round's first failure (logged once by run_round); the others are logged
        here, once each, or a lasting failure of an early topic would hide them."""
        for other in failures[1:]:
            text = f"{type(other).__name__}: {other}"
            if text not in self._other_failures:
                self._other_failures.add(text)
                log.warning("bridge: this round also failed: %s", text)
        raise failures[0]
