"""The bridge: registers a Kafka-protocol cluster in ZooKeeper as ZooKeeper-mode brokers did.

Legacy ZooKeeper consumers find brokers, topics, partitions and leaders in ZooKeeper. Clusters
that no longer use ZooKeeper (Kafka 4 KRaft, Tansu, Redpanda) write nothing there, so the bridge
reads the cluster's metadata over the Kafka protocol (kafka-python's admin client) and keeps this
part of the tree in sync, within about one poll interval (0.5 s by default)::

    /brokers/ids/<id>                          ephemeral, owned by the bridge's session
    /brokers/topics/<topic>                    {"version":1,"partitions":{"0":[111]}}
    /brokers/topics/<topic>/partitions/<p>/state
    /zkconsumer/bridge/topics/<topic>          marker: the bridge manages this topic

A topic whose /brokers/topics znode was written by someone else (an admin tool, a test that
changes the partition count the ZooKeeper-era way) is left alone: the bridge only rewrites
and deletes topics it marked as its own.

Threading: :meth:`Bridge.run` loops in the caller's thread. ``_stop`` (an Event) is the only
state shared with other threads; ``_resync`` is set from kazoo's state listener and only
makes the next round rewrite everything (ephemerals vanish with an expired session).

ZooKeeper going away must not hang the bridge: kazoo's synchronous calls wait for ever while
the connection is down, and then :meth:`Bridge.stop` could not end it. So no round runs while
the client is disconnected, and every request is made asynchronously and waited for at most
``request_timeout_s``; a round that meets a dead connection fails with one warning and the
next round, once ZooKeeper is back, rewrites everything. At stop, the broker registrations are
deleted only while connected: otherwise they are ephemeral and go with the session.

ZooKeeper security as for the command-line tools: the bridge logs in with
``ZKCONSUMER_ZOOKEEPER_AUTH`` and gives every znode it creates the ACL of
``ZKCONSUMER_ZOOKEEPER_ACL`` (as a secured ZooKeeper-mode broker did with
``zookeeper.set.acl``), so that on a secured ensemble nobody else can replace or delete its
broker registrations. A refused login, a bad variable or an unreachable ZooKeeper makes
:meth:`Bridge.run` raise :class:`~zkconsumer.ZkConsumerError` before the first round.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss, NodeExistsError, NoNodeError, SessionExpiredError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.interfaces import IAsyncResult
from kazoo.protocol.states import KazooState

from . import _zkpaths as zp
from ._admin import security_config
from ._errors import ZkConsumerError

log = logging.getLogger("zkconsumer.bridge")

MANAGED_DIR = "/zkconsumer/bridge/topics"

# What a ZooKeeper request raises when the connection is gone (see the module docstring).
_ZK_GONE = (KazooTimeoutError, ConnectionLoss, SessionExpiredError)


@dataclass(frozen=True)
class ClusterView:
    """What the cluster says, reduced to what ZooKeeper-mode brokers wrote."""

    brokers: dict[int, tuple[str, int, str | None]]  # id -> (host, port, rack)
    # topic -> partition -> (replicas, leader, leader_epoch, isr)
    topics: dict[str, dict[int, tuple[list[int], int, int, list[int]]]] = field(
        default_factory=dict
    )


def read_cluster(admin: Any) -> ClusterView:
    """One metadata round trip through kafka-python's admin client."""
    cluster = admin.describe_cluster()
    brokers = {
        int(b["broker_id"]): (str(b["host"]), int(b["port"]), b.get("rack"))
        for b in cluster["brokers"]
        # A fenced broker (KRaft, KIP-1073) is down: its ZooKeeper-mode znode would have
        # gone with its session.
        if not b.get("is_fenced")
    }
    topics: dict[str, dict[int, tuple[list[int], int, int, list[int]]]] = {}
    for t in admin.describe_topics():
        if t.get("error_code", 0) != 0 or t.get("is_internal"):
            continue
        parts = {}
        for p in t["partitions"]:
            parts[int(p["partition_index"])] = (
                [int(r) for r in p["replica_nodes"]],
                int(p["leader_id"]),
                max(int(p.get("leader_epoch", 0)), 0),
                [int(r) for r in p["isr_nodes"]],
            )
        topics[str(t["name"])] = parts
    return ClusterView(brokers, topics)


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
        (``zkconsumer._admin.command_config``); ``request_timeout_s`` bounds each ZooKeeper
        request."""
        self._request_timeout = request_timeout_s
        self._kafka = dict(kafka or {})
        # Brokers are registered with one listener of this protocol, as a broker with that
        # listener alone would (readers look endpoints up by their security.protocol).
        self._protocol = str(self._kafka.get("security_protocol", "PLAINTEXT")).upper()
        self._warned_held: set[int] = set()  # broker ids held by another session, warned
        self._zk_connect = zookeeper
        self._connect_timeout = connect_timeout_s
        self._environ = environ
        self._bootstrap = bootstrap
        self._interval = interval_s
        self._gone_after = gone_after_s
        self._stop = threading.Event()
        self._resync = threading.Event()
        self._zk: KazooClient | None = None
        self._admin: Any = None
        # What this bridge last wrote; compared each round so unchanged state costs nothing.
        self._written_brokers: dict[int, bytes] = {}
        self._written_topics: dict[str, bytes] = {}
        self._written_states: dict[tuple[str, int], bytes] = {}
        self._unreachable_since: float | None = None
        self._paths_made = False  # the top-level paths exist (made again after a resync)
        self.rounds = 0

    # -- lifecycle -------------------------------------------------------------------------
    def stop(self) -> None:
        self._stop.set()

    def run(self) -> None:
        """Connect, then reconcile every interval until :meth:`stop`."""
        zk = self._connect()
        self._zk = zk
        try:
            log.info("bridge: %s -> ZooKeeper %s", self._bootstrap, self._zk_connect)
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
                    try:
                        self.reconcile_once()
                    except _ZK_GONE as e:
                        self._resync.set()
                        log.warning("bridge: ZooKeeper request failed (%s); retrying",
                                    type(e).__name__)
                    except Exception:  # noqa: BLE001 - one bad round must not end the bridge
                        log.exception("bridge round failed; retrying")
                self._stop.wait(self._interval)
        finally:
            self._close_admin()
            self._deregister_all()
            zk.stop()
            zk.close()

    def _deregister_all(self) -> None:
        """Delete this bridge's broker registrations, as a broker's clean shutdown did; when
        ZooKeeper is unreachable, leave them to go with the session (they are ephemeral)."""
        zk = self._zk
        assert zk is not None
        left = sorted(self._written_brokers)
        self._written_brokers.clear()
        try:
            while zk.connected and left:
                self._delete(zp.broker_path(left[0]))
                left.pop(0)
        except _ZK_GONE:
            pass
        if left:
            log.warning("bridge: ZooKeeper unreachable; broker registrations %s go when its "
                        "session expires", left)

    def _connect(self) -> KazooClient:
        """A started client, logged in and with the default ACL from the environment;
        ZkConsumerError (one line, no traceback in the CLI) if that cannot be."""
        config = security_config(self._zk_connect, self._connect_timeout, self._environ)
        security: dict[str, Any] = {}
        if config is not None:
            from ._connector import kazoo_security_kwargs  # late: only a secured bridge needs it

            security = kazoo_security_kwargs(config)
        try:
            zk = KazooClient(hosts=self._zk_connect, timeout=10.0, **security)
        except ValueError as e:
            raise ZkConsumerError(f"bad ZooKeeper address {self._zk_connect!r}: {e}") from None
        zk.add_listener(self._on_state)
        try:
            zk.start(timeout=self._connect_timeout)
        except KazooTimeoutError:
            zk.stop()
            zk.close()
            raise ZkConsumerError(
                f"cannot connect to ZooKeeper at {self._zk_connect} within "
                f"{self._connect_timeout:g} s"
            ) from None
        if config is not None:
            from ._connector import check_kazoo_login

            try:
                check_kazoo_login(zk, config)  # stops the client when it raises
            except ZkConsumerError:
                zk.close()
                raise
        return zk

    def _on_state(self, state: str) -> None:
        # Never block in a kazoo callback: only flag a full rewrite for the next round.
        if state == KazooState.LOST:
            self._resync.set()

    def _close_admin(self) -> None:
        if self._admin is not None:
            try:
                self._admin.close()
            except Exception:  # noqa: BLE001
                pass
            self._admin = None

    # -- one round -------------------------------------------------------------------------
    def reconcile_once(self) -> None:
        if self._resync.is_set():
            self._resync.clear()
            self._written_brokers.clear()
            self._written_topics.clear()
            self._written_states.clear()
            self._paths_made = False
        if not self._paths_made:  # as a ZooKeeper-mode broker did, even before any broker
            zk = self._zk
            assert zk is not None
            for path in (zp.BROKER_IDS, zp.BROKER_TOPICS, MANAGED_DIR):
                self._wait(zk.ensure_path_async(path))
            self._paths_made = True
        try:
            if self._admin is None:
                from kafka import KafkaAdminClient

                self._admin = KafkaAdminClient(
                    bootstrap_servers=self._bootstrap,
                    request_timeout_ms=3000,
                    bootstrap_timeout_ms=3000,
                    reconnect_backoff_max_ms=1000,
                    **{**self._kafka, "client_id": "zkconsumer-bridge"},
                )
            view = read_cluster(self._admin)
        except Exception as e:  # noqa: BLE001 - an unreachable cluster is a state, not a crash
            self._close_admin()
            now = time.monotonic()
            if self._unreachable_since is None:
                self._unreachable_since = now
                log.warning("bridge: cluster %s unreachable: %s", self._bootstrap, e)
            if now - self._unreachable_since >= self._gone_after and self._written_brokers:
                log.warning("bridge: deregistering brokers %s", sorted(self._written_brokers))
                for bid in list(self._written_brokers):
                    self._delete(zp.broker_path(bid))
                    del self._written_brokers[bid]
            return
        if self._unreachable_since is not None:
            log.info("bridge: cluster %s reachable again", self._bootstrap)
        self._unreachable_since = None
        self.apply(view)
        self.rounds += 1

    def apply(self, view: ClusterView) -> None:
        """Make ZooKeeper match ``view`` (topics first, so brokers appear with their topics)."""
        zk = self._zk
        assert zk is not None
        managed = set(self._wait(zk.get_children_async(MANAGED_DIR)))
        existing = set(self._wait(zk.get_children_async(zp.BROKER_TOPICS)))
        for topic, parts in sorted(view.topics.items()):
            if topic in existing and topic not in managed:
                continue  # someone else's topic znode: leave it alone
            assignment = zp.TopicAssignment({p: r for p, (r, _, _, _) in parts.items()})
            data = assignment.encode()
            if self._written_topics.get(topic) != data:
                if topic not in managed:
                    # The marker first: a round cut short in between leaves a managed topic
                    # without its znode (written next round), never a topic znode the
                    # bridge would then take for someone else's and leave for good.
                    self._wait(zk.ensure_path_async(f"{MANAGED_DIR}/{topic}"))
                self._write(zp.topic_path(topic), data)
                self._written_topics[topic] = data
                log.info("bridge: topic %s with %d partitions", topic, len(parts))
            for p, (_, leader, epoch, isr) in parts.items():
                state = zp.PartitionState(leader, epoch, 1, isr).encode()
                if self._written_states.get((topic, p)) != state:
                    self._write(zp.partition_state_path(topic, p), state)
                    self._written_states[(topic, p)] = state
        for topic in sorted(managed - set(view.topics)):
            log.info("bridge: topic %s is gone from the cluster", topic)
            self._delete(zp.topic_path(topic), recursive=True)
            self._delete(f"{MANAGED_DIR}/{topic}")
            self._written_topics.pop(topic, None)
            for stale in [k for k in self._written_states if k[0] == topic]:
                del self._written_states[stale]

        now_ms = int(time.time() * 1000)
        proto = self._protocol
        plaintext = proto == "PLAINTEXT"
        for bid, (host, port, rack) in sorted(view.brokers.items()):
            reg = zp.BrokerRegistration(
                broker_id=bid,
                endpoints=[f"{proto}://{host}:{port}"],
                # The top-level host and port are the PLAINTEXT listener's (null and -1
                # without one), as ZooKeeper-mode brokers wrote them.
                host=host if plaintext else None,
                port=port if plaintext else -1,
                timestamp_ms=now_ms,
                rack=rack,
                listener_security_protocol_map={proto: proto},
            )
            key = f"{proto}:{host}:{port}:{rack}".encode()
            if self._written_brokers.get(bid) != key:
                path = zp.broker_path(bid)
                try:
                    self._wait(zk.create_async(path, reg.encode(), ephemeral=True,
                                               makepath=True))
                except NodeExistsError:
                    # Ours (written before a resync, or with other details): rewritten. Another
                    # session's (a second bridge, a real broker): left alone, as a broker
                    # starting with a taken id would.
                    stat = self._wait(zk.exists_async(path))
                    if stat is None:
                        continue  # gone meanwhile: next round
                    if stat.ephemeralOwner != zk.client_id[0]:
                        if bid not in self._warned_held:
                            self._warned_held.add(bid)
                            log.warning("bridge: %s is held by another session; not "
                                        "replacing it", path)
                        continue
                    self._wait(zk.set_async(path, reg.encode(), version=stat.version))
                self._warned_held.discard(bid)
                self._written_brokers[bid] = key
                log.info("bridge: registered broker %d at %s://%s:%d", bid, proto, host, port)
        for bid in sorted(set(self._written_brokers) - set(view.brokers)):
            log.info("bridge: broker %d left the cluster", bid)
            self._delete(zp.broker_path(bid))
            del self._written_brokers[bid]

    # -- small ZooKeeper helpers -------------------------------------------------------------
    def _wait(self, result: IAsyncResult) -> Any:
        """The answer of a request, or KazooTimeoutError after ``request_timeout_s``. A request
        given up on stays queued in kazoo and may still run once the connection is back: the
        caller's round fails, and the next one rewrites everything after it."""
        return result.get(timeout=self._request_timeout)

    def _write(self, path: str, data: bytes) -> None:
        zk = self._zk
        assert zk is not None
        try:
            self._wait(zk.set_async(path, data))
        except NoNodeError:
            self._wait(zk.create_async(path, data, makepath=True))

    def _delete(self, path: str, recursive: bool = False) -> None:
        zk = self._zk
        assert zk is not None
        try:
            if recursive:
                for child in self._wait(zk.get_children_async(path)):
                    self._delete(f"{path}/{child}", recursive=True)
            self._wait(zk.delete_async(path))
        except NoNodeError:
            pass
