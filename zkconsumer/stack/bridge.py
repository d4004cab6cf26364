"""The bridge: registers a Kafka-protocol cluster in ZooKeeper as ZooKeeper-mode brokers did.

Legacy ZooKeeper consumers find brokers, topics, partitions and leaders in ZooKeeper. Clusters
that no longer use ZooKeeper (Kafka 4 KRaft, Redpanda) write nothing there, so the bridge
reads the cluster's metadata over the Kafka protocol (kafka-python's admin client) and keeps this
part of the tree in sync, within about one poll interval (0.5 s by default)::

    /brokers/ids/<id>                          ephemeral, owned by the bridge's session
    /brokers/topics/<topic>                    {"version":1,"partitions":{"0":[111]}}
    /brokers/topics/<topic>/partitions/<p>/state
    /zkconsumer/bridge/topics/<topic>          marker: the bridge manages this topic

A topic whose /brokers/topics znode was written by someone else (an admin tool, a test that
changes the partition count the ZooKeeper-era way) is left alone: the bridge only rewrites and
deletes topics it marked as its own, and creates a topic's znode (never overwrites it) until it
has marked it, so an admin tool's write racing its first one wins. A managed topic errored in
one metadata answer is kept as it was; one missing from the answers is deleted after
:data:`GONE_AFTER_ANSWERS` answers in a row. Each round compares the cluster with what
ZooKeeper holds of the managed topics, not with what the bridge remembers writing, and writes
whatever differs: a topic znode or partition state deleted or edited by hand does not last, and
the partitions a topic no longer has lose their state znodes (fewer partitions than ZooKeeper
holds are believed after :data:`GONE_AFTER_ANSWERS` answers in a row too). What ZooKeeper holds
is read with watches set (all reads of a round sent before any answer is awaited) and kept
until a watch reports a change, or the connection drops (kazoo then fires every watch): an
unchanged tree costs no read. A name that cannot be a Kafka topic (some brokers accept ``..`` and
``a/b``) is skipped with one warning; a topic whose writes fail does not keep the other topics,
nor the broker registrations, from being written in the same round.

At start, as a ZooKeeper-mode broker: a missing chroot (``host:port/kafka``) is created, and
so are its own top-level paths (:data:`OWN_PATHS`) and, best effort, the other
persistent ones such a broker made (:data:`KAFKA_PATHS`).

Threading: :meth:`Bridge.run` loops in the caller's thread. ``_stop`` (an Event) is the only
state shared with other threads (the connect at start waits on it too, so SIGTERM ends a
bridge still waiting for ZooKeeper), besides two flags kazoo's threads set: ``_resync``, set
from the state listener, makes the next round make the top-level paths again and read every
topic again (ephemerals vanish with an expired session); and the topics a watch reported
changed (``_changed``, under ``_watch_lock``), read again next round. Which
broker registrations are the bridge's is then read back from ZooKeeper (the ephemerals of its
session), not forgotten: a session that survived keeps them, and only those are deleted when
a broker or the whole cluster goes away.

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
broker registrations. A refused login, a bad variable, an unreachable ZooKeeper or top-level
paths it may not create make :meth:`Bridge.run` raise :class:`~zkconsumer.ZkConsumerError`
before the first round. Later, a request refused (NoAuth, naming the znode) or lost to a race
with another writer fails its round with one log line, not repeated while it lasts.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import (
    ConnectionLoss,
    KazooException,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.interfaces import IAsyncResult
from kazoo.protocol.states import KazooState, WatchedEvent
from kazoo.security import OPEN_ACL_UNSAFE

from zkconsumer._config_keys import legal_id_problem
from zkconsumer._errors import ZkConsumerError, ZooKeeperRefusedError
from zkconsumer.broker.clients import kafka_admin
from zkconsumer.zk import paths as zp
from zkconsumer.zk.handler import kazoo_handler
from zkconsumer.zk.session import (
    check_kazoo_login,
    kazoo_security_kwargs,
    login_refusal,
    sasl_refused,
    security_config,
)

log = logging.getLogger("zkconsumer.bridge")

MANAGED_DIR = "/zkconsumer/bridge/topics"

#: Kafka's ConfigType.all: the entity types of /config/<type>.
_CONFIG_TYPES = ("topics", "clients", "users", "brokers", "ips")

#: The paths the bridge writes under, made at start: one it may not create ends it.
OWN_PATHS = (zp.BROKER_IDS, zp.BROKER_TOPICS, MANAGED_DIR)

#: The other persistent paths a ZooKeeper-mode broker made at start (Kafka's
#: ZkData.PersistentZkPaths, made by KafkaZkClient.createTopLevelPaths): tools read them
#: before anything is written there (``kafka-consumer-groups.sh --zookeeper --list`` lists
#: /consumers). Made at start as well, best effort: the bridge itself needs none of them, so
#: one it may not create (a secured Kafka's /config) is warned about once, not fatal.
#: Not /latest_producer_id_block: Kafka makes it holding null and parses any data it finds,
#: and kazoo can only create it empty (a broker started on this ZooKeeper later could then
#: hand out no producer ids). _zkpaths names only the consumer and broker ones, so the
#: others are spelled here.
KAFKA_PATHS = (
    zp.CONSUMERS, "/brokers/seqid", "/config/changes", "/admin/delete_topics",
    "/isr_change_notification", "/log_dir_event_notification",
    *(f"/config/{t}" for t in _CONFIG_TYPES),
)

def legal_topic(name: str) -> bool:
    """Whether ``name`` is a legal Kafka topic name (Topic.validate: the characters of a
    legal group.id, at most 249 of them, not "." or ".."). Anything else a cluster reports
    cannot be a ZooKeeper-mode topic, and may not even be a znode name ("..", "a/b")."""
    return len(name) <= 249 and name not in (".", "..") and legal_id_problem(name) is None


def _partition_count(data: bytes | None) -> int:
    """The partitions a topic znode's payload names (0: none, or not a payload to keep)."""
    if data is None:
        return 0
    try:
        return len(zp.TopicAssignment.decode(data).partitions)
    except ValueError:
        return 0


class _OutageFilter(logging.Filter):
    """kazoo logs every failed connection attempt at WARNING (``Connection dropped``,
    ``Connection time-out``, ``Cannot resolve``), about once a second while ZooKeeper is away,
    where the bridge says so once; and, as the connection retries never give up, "Failed
    connecting ... within the connection retry policy" only when the bridge stops while
    connecting. Those records of the bridge's own clients are demoted to DEBUG (dropped
    unless its logger is enabled for DEBUG); every other passes as it is."""

    _MESSAGES = frozenset({
        "Connection dropped: %s", "Connection time-out: %s", "Transition to CONNECTING",
        "Cannot resolve %s: %s",
        "Failed connecting to Zookeeper within the connection retry policy.",
    })

    def __init__(self) -> None:
        super().__init__()
        #: The last record demoted, as text: why a connect that timed out failed.
        self.last: str | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.WARNING or record.msg not in self._MESSAGES:
            return True
        if record.msg.startswith(("Connection dropped", "Connection time-out", "Cannot")):
            self.last = record.getMessage()
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


#: The logger of the bridge's kazoo clients: under "kazoo", so the levels set for kazoo
#: apply, but filtered apart from every other client's (the connector's keep their warnings).
KAZOO_LOG = logging.getLogger("kazoo.client.bridge")
_OUTAGES = _OutageFilter()
KAZOO_LOG.addFilter(_OUTAGES)

# What a ZooKeeper request raises when the connection is gone (see the module docstring).
_ZK_GONE = (KazooTimeoutError, ConnectionLoss, SessionExpiredError)

# Successful metadata answers in a row a managed topic must be missing from before its
# znodes are deleted: one odd answer must not make legacy consumers rebalance twice.
GONE_AFTER_ANSWERS = 2

# As the connector and the tools: reconnect at least every second. kazoo's default backoff
# grows to an hour, so after a long outage the bridge came back minutes late.
_CONNECTION_RETRY: dict[str, Any] = {"max_tries": -1, "delay": 0.1, "max_delay": 1.0}


class _StoppedError(ZkConsumerError):
    """:meth:`Bridge.stop` was called while the bridge was connecting; never escapes run()."""


@dataclass(frozen=True)
class ClusterView:
    """What the cluster says, reduced to what ZooKeeper-mode brokers wrote."""

    brokers: dict[int, tuple[str, int, str | None]]  # id -> (host, port, rack)
    # topic -> partition -> (replicas, leader, leader_epoch, isr)
    topics: dict[str, dict[int, tuple[list[int], int, int, list[int]]]] = field(
        default_factory=dict
    )
    # Topics the answer named with a topic-level error: unknown this round, not gone.
    errored: frozenset[str] = frozenset()


@dataclass(frozen=True)
class _TopicRead:
    """Reads in flight of a managed topic's znodes, with watches (see :meth:`Bridge.apply`)."""

    data: IAsyncResult  # /brokers/topics/<topic>
    children: IAsyncResult  # its partitions directory
    states: dict[int, IAsyncResult]  # partition -> its state znode


@dataclass(frozen=True)
class _Held:
    """What ZooKeeper holds of a managed topic, as read with watches set."""

    data: bytes  # /brokers/topics/<topic>
    states: dict[int, bytes]  # partition -> its state znode, for those that exist
    partitions: list[str]  # the children of its partitions directory


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
    errored: set[str] = set()
    for t in admin.describe_topics():
        if t.get("is_internal"):
            continue
        if t.get("error_code", 0) != 0:
            errored.add(str(t["name"]))
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
    return ClusterView(brokers, topics, frozenset(errored))


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
        # The registrations this bridge last wrote (topics are read back from ZooKeeper).
        self._written_brokers: dict[int, bytes] = {}
        self._warned_names: set[str] = set()  # illegal topic names, warned once each
        self._warned_paths: set[str] = set()  # KAFKA_PATHS it may not create, warned once each
        # Failures of a round besides the one it raises, logged once each until a round works.
        self._other_failures: set[str] = set()
        # managed topic -> what ZooKeeper holds of it, kept until a watch reports a change
        self._held: dict[str, _Held] = {}
        self._watch_lock = threading.Lock()
        self._changed: set[str] = set()  # topics a watch reported changed, under the lock
        self._all_changed = False  # the connection dropped: every watch fired
        self._unreachable_since: float | None = None
        self._paths_made = False  # the top-level paths exist (made again after a resync)
        # managed topic -> successful answers in a row it was missing from
        self._absent_answers: dict[str, int] = {}
        # Managed topic -> answers in a row with fewer partitions than ZooKeeper holds.
        self._fewer_answers: dict[str, int] = {}
        self._last_failure: str | None = None  # the failure last logged, until a round works
        self.rounds = 0

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
                self._make_paths()
            except (*_ZK_GONE, KazooException):
                pass  # the first round makes them, or says why it cannot
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
                    self.run_round()
                self._stop.wait(self._interval)
        finally:
            try:
                self._close_admin()
                self._deregister_all()
            finally:
                zk.stop()
                zk.close()

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
            self._paths_made = False  # in case someone deleted them
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
        """Delete this bridge's broker registrations, as a broker's clean shutdown did; when
        ZooKeeper is unreachable, leave them to go with the session (they are ephemeral)."""
        zk = self._zk
        assert zk is not None
        left: list[int] = []
        try:
            if zk.connected:
                self._adopt_registrations()  # never another session's
            left = sorted(self._written_brokers)
            self._written_brokers.clear()
            while zk.connected and left:
                self._delete(zp.broker_path(left[0]))
                left.pop(0)
        except _ZK_GONE:
            pass
        except (KazooException, ZooKeeperRefusedError) as e:
            # The session is closed right after: its ephemerals go with it.
            log.warning("bridge: cannot delete broker registrations %s (%s); they go with "
                        "the session, closed now", left, e)
            return
        if left:
            log.warning("bridge: ZooKeeper unreachable; broker registrations %s go when its "
                        "session expires", left)

    def _connect(self) -> KazooClient:
        """A started client, logged in and with the default ACL from the environment, its
        chroot created if missing; ZkConsumerError (one line, no traceback in the CLI) if that
        cannot be, _StoppedError when :meth:`stop` is called meanwhile."""
        config = security_config(self._zk_connect, self._connect_timeout, self._environ)
        security: dict[str, Any] = {}
        if config is not None:

            security = kazoo_security_kwargs(config)
        zk = self._start_client(self._zk_connect, config, security, self._on_state)
        try:
            if zk.chroot and self._wait(zk.exists_async("/"), zk.chroot) is None:
                self._make_chroot(zk.chroot, config, security)
        except BaseException as e:
            zk.stop()
            zk.close()
            if isinstance(e, (*_ZK_GONE, KazooException)):
                raise ZkConsumerError(f"cannot check the chroot {zk.chroot} on ZooKeeper at "
                                      f"{self._zk_connect} ({type(e).__name__}: {e})") from None
            raise
        return zk

    def _start_client(self, hosts: str, config: Any, security: dict[str, Any],
                      listener: Any = None) -> KazooClient:
        """A client of ``hosts`` started within ``--connect-timeout``. Not ``zk.start()``: it
        waits without looking at the stop flag, and SIGTERM must end a bridge waiting for
        ZooKeeper at start too."""
        try:
            zk = KazooClient(hosts=hosts, timeout=10.0, logger=KAZOO_LOG, handler=kazoo_handler(),
                             connection_retry=dict(_CONNECTION_RETRY), **security)
        except ValueError as e:
            raise ZkConsumerError(f"bad ZooKeeper address {self._zk_connect!r}: {e}") from None
        if listener is not None:
            zk.add_listener(listener)
        _OUTAGES.last = None

        with login_refusal(zk) as refused:
            connected = zk.start_async()
            deadline = time.monotonic() + self._connect_timeout
            while not connected.wait(max(0.0, min(0.1, deadline - time.monotonic()))):
                if self._stop.is_set() or time.monotonic() >= deadline:
                    zk.stop()
                    zk.close()
                    if self._stop.is_set():
                        raise _StoppedError("stopped while connecting to ZooKeeper")
                    if refused.is_set() and config is not None and config.zk_sasl is not None:
                        # Refused before kazoo reported the connection: not a time-out.
                        raise ZkConsumerError(sasl_refused(config))
                    # kazoo's own reason, demoted to DEBUG by _OutageFilter, is the one clue.
                    why = f" (last attempt: {_OUTAGES.last})" if _OUTAGES.last else ""
                    raise ZkConsumerError(
                        f"cannot connect to ZooKeeper at {self._zk_connect} within "
                        f"{self._connect_timeout:g} s{why}"
                    )
        if config is not None:
            try:
                check_kazoo_login(zk, config)  # stops the client when it raises
            except ZkConsumerError:
                zk.close()
                raise
        return zk

    def _make_chroot(self, chroot: str, config: Any, security: dict[str, Any]) -> None:
        """Create the missing chroot through a client without it, as a ZooKeeper-mode broker
        did at start (KafkaServer.initZk): until then every request in it fails (NoNode)."""
        hosts = self._zk_connect.partition("/")[0]
        root = self._start_client(hosts, config, security)
        try:
            self._wait(root.ensure_path_async(chroot), chroot, "ensure")
        except (*_ZK_GONE, KazooException) as e:
            raise ZkConsumerError(f"cannot create the chroot {chroot} on ZooKeeper at {hosts} "
                                  f"({type(e).__name__}: {e})") from None
        finally:
            root.stop()
            root.close()
        log.info("bridge: created the chroot %s on ZooKeeper %s", chroot, hosts)

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
            self._paths_made = False
            self._held.clear()  # its watches may have gone with the session
        if not self._paths_made:
            self._make_paths()
        # Every round: which registrations are this session's is read back, not trusted
        # from memory (a resync, an expired session whose ids another bridge took since,
        # one deleted by hand: each is found here, and only what is ours is deleted).
        self._adopt_registrations()
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

    def _make_paths(self) -> None:
        """The top-level paths, as a ZooKeeper-mode broker made them, even before any broker:
        all requests sent at once, the answers read in order (a refusal of one of
        :data:`OWN_PATHS` names the first refused; one of :data:`KAFKA_PATHS` is warned about
        once and left)."""
        zk = self._zk
        assert zk is not None
        # /consumers stays open whatever the ACL, as Kafka kept it (ZkData.defaultAcls):
        # every legacy consumer writes under it.
        pending = [(path, zk.ensure_path_async(
            path, acl=OPEN_ACL_UNSAFE if path == zp.CONSUMERS else None))
            for path in (*OWN_PATHS, *KAFKA_PATHS)]
        for path, result in pending:
            if path in OWN_PATHS:
                self._wait(result, path, "ensure")
                continue
            try:
                self._wait(result, path, "ensure")
            except _ZK_GONE:
                raise
            except (ZooKeeperRefusedError, KazooException) as e:
                if path not in self._warned_paths:
                    self._warned_paths.add(path)
                    log.warning("bridge: cannot create %s, which ZooKeeper-era tools read "
                                "(%s); going on without it", path,
                                e if isinstance(e, ZooKeeperRefusedError) else type(e).__name__)
        self._paths_made = True

    def _adopt_registrations(self) -> None:
        """Which /brokers/ids/<id> are this bridge's (ephemerals of its session); replaces
        what was remembered. One remembered and still ours keeps what was written (it is
        rewritten only when the cluster's details change); one found ours but not remembered
        is rewritten this round."""
        zk = self._zk
        assert zk is not None
        session = zk.client_id[0] if zk.client_id else None
        try:
            children = self._wait(zk.get_children_async(zp.BROKER_IDS), zp.BROKER_IDS)
        except NoNodeError:
            children = []
        owned: dict[int, bytes] = {}
        for child in children:
            bid = zp.parse_id(child)
            if bid is None:
                continue  # not a broker id the bridge writes
            path = zp.broker_path(bid)
            stat = self._wait(zk.exists_async(path), path)
            if stat is not None and session is not None and stat.ephemeralOwner == session:
                # b"": never equal to a written key, so rewritten
                owned[bid] = self._written_brokers.get(bid, b"")
        self._written_brokers = owned

    def apply(self, view: ClusterView) -> None:
        """Make ZooKeeper match ``view`` (topics first, so brokers appear with their topics).
        A topic whose writes fail does not stop the others nor the broker registrations: the
        round raises its first failure at the end (a lost connection at once)."""
        zk = self._zk
        assert zk is not None
        self._take_changes()
        managed = set(self._wait(zk.get_children_async(MANAGED_DIR), MANAGED_DIR))
        existing = set(self._wait(zk.get_children_async(zp.BROKER_TOPICS), zp.BROKER_TOPICS))
        failures = self._sync_topics(view, managed, existing)
        failures += self._drop_gone_topics(view, managed)
        self._register_brokers(view)
        if failures:
            self._raise_first(failures)

    def _sync_topics(self, view: ClusterView, managed: set[str],
                     existing: set[str]) -> list[Exception]:
        """Write the view's topics that are the bridge's (or no one's); the failures."""
        for topic in set(self._held) - (managed & existing):
            del self._held[topic]  # deleted, or no longer the bridge's
        # Someone else's topic znode (listed but not marked) is left alone.
        mine = {topic: parts for topic, parts in view.topics.items()
                if self._legal(topic) and (topic in managed or topic not in existing)}
        # What ZooKeeper holds of those not read since their last change, every read sent
        # before any answer is awaited.
        reads = {topic: self._read_topic(topic, parts) for topic, parts in mine.items()
                 if topic in existing and topic not in self._held}
        failures: list[Exception] = []
        for topic, parts in sorted(mine.items()):
            try:
                self._sync_topic(topic, parts, topic in managed, reads.get(topic))
            except _ZK_GONE:
                raise  # every other request would wait as long
            except Exception as e:  # noqa: BLE001 - one topic must not stop the others
                failures.append(e)
        return failures

    def _drop_gone_topics(self, view: ClusterView, managed: set[str]) -> list[Exception]:
        """Delete the bridge's topics the cluster no longer has; the failures. A topic
        errored in this answer is unknown, not gone; a missing one goes only after
        GONE_AFTER_ANSWERS answers in a row."""
        failures: list[Exception] = []
        absent = managed - set(view.topics) - view.errored
        self._absent_answers = {t: self._absent_answers.get(t, 0) + 1 for t in absent}
        for topic in sorted(absent):
            if self._absent_answers[topic] < GONE_AFTER_ANSWERS:
                continue
            log.info("bridge: topic %s is gone from the cluster", topic)
            try:
                self._delete(zp.topic_path(topic), recursive=True)
                self._delete(self._marker(topic))
            except _ZK_GONE:
                raise
            except Exception as e:  # noqa: BLE001 - as above
                failures.append(e)
                continue
            del self._absent_answers[topic]
            self._fewer_answers.pop(topic, None)
        return failures

    def _register_brokers(self, view: ClusterView) -> None:
        """Register the view's brokers whose details changed; drop those that left."""
        now_ms = int(time.time() * 1000)
        proto = self._protocol
        plaintext = proto == "PLAINTEXT"
        for bid, (host, port, rack) in sorted(view.brokers.items()):
            key = f"{proto}:{host}:{port}:{rack}".encode()
            if self._written_brokers.get(bid) == key:
                continue
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
            if self._write_broker(bid, reg):
                self._warned_held.discard(bid)
                self._written_brokers[bid] = key
                log.info("bridge: registered broker %d at %s://%s:%d", bid, proto, host, port)
        for bid in sorted(set(self._written_brokers) - set(view.brokers)):
            log.info("bridge: broker %d left the cluster", bid)
            self._delete(zp.broker_path(bid))
            del self._written_brokers[bid]

    def _write_broker(self, bid: int, reg: zp.BrokerRegistration) -> bool:
        """Create (or rewrite our own) ``/brokers/ids/<bid>``; False when it is not written
        this round (gone meanwhile, or another session's)."""
        zk = self._zk
        assert zk is not None
        path = zp.broker_path(bid)
        try:
            self._wait(zk.create_async(path, reg.encode(), ephemeral=True, makepath=True),
                       path, "ensure")
            return True
        except NodeExistsError:
            pass
        # Ours (written before a resync, or with other details): rewritten. Another session's
        # (a second bridge, a real broker): left alone, as a broker starting with a taken id
        # would.
        stat = self._wait(zk.exists_async(path), path)
        if stat is None:
            return False  # gone meanwhile: next round
        if stat.ephemeralOwner != zk.client_id[0]:
            if bid not in self._warned_held:
                self._warned_held.add(bid)
                log.warning("bridge: %s is held by another session; not replacing it", path)
            return False
        self._wait(zk.set_async(path, reg.encode(), version=stat.version), path)
        return True

    def _raise_first(self, failures: list[Exception]) -> None:
        """Raise the round's first failure (logged once by run_round); the others are logged
        here, once each, or a lasting failure of an early topic would hide them."""
        for other in failures[1:]:
            text = f"{type(other).__name__}: {other}"
            if text not in self._other_failures:
                self._other_failures.add(text)
                log.warning("bridge: this round also failed: %s", text)
        raise failures[0]

    def _legal(self, topic: str) -> bool:
        """Whether ``topic`` can be registered; warns once per name that cannot."""
        if legal_topic(topic):
            return True
        if topic not in self._warned_names:
            self._warned_names.add(topic)
            log.warning("bridge: the cluster has a topic named %r, not a legal Kafka topic "
                        "name ([a-zA-Z0-9._-], 1 to 249 characters, not '.' or '..'); it is "
                        "not registered in ZooKeeper", topic)
        return False

    @staticmethod
    def _marker(topic: str) -> str:
        return f"{MANAGED_DIR}/{topic}"  # topic: a legal name, checked by _legal

    @staticmethod
    def _partition_dir(topic: str, partition: int) -> str:
        return zp.partition_state_path(topic, partition).rsplit("/", 1)[0]

    def _on_topic_watch(self, event: WatchedEvent) -> None:
        # A kazoo callback: never block, only note which topic to read again next round. An
        # event without a path (the connection dropped) fired every watch.
        prefix = zp.BROKER_TOPICS + "/"
        with self._watch_lock:
            if event.path and event.path.startswith(prefix):
                self._changed.add(event.path[len(prefix):].split("/", 1)[0])
            else:
                self._all_changed = True

    def _take_changes(self) -> None:
        """Forget what ZooKeeper held of the topics a watch reported changed since."""
        with self._watch_lock:
            changed, everything = self._changed, self._all_changed
            self._changed, self._all_changed = set(), False
        if everything:
            self._held.clear()
        for topic in changed:
            self._held.pop(topic, None)

    def _read_topic(
        self, topic: str, parts: Mapping[int, tuple[list[int], int, int, list[int]]]
    ) -> _TopicRead:
        """Send the reads of a listed topic's znodes, each setting a watch (one per znode:
        kazoo keeps a set of callbacks); answers awaited by :meth:`_sync_topic`."""
        zk = self._zk
        assert zk is not None
        watch = self._on_topic_watch
        return _TopicRead(
            zk.get_async(zp.topic_path(topic), watch=watch),
            zk.get_children_async(zp.partitions_dir(topic), watch=watch),
            {p: zk.get_async(zp.partition_state_path(topic, p), watch=watch) for p in parts},
        )

    def _answer(self, result: IAsyncResult, path: str) -> Any:
        """The answer of a read of ``path``; None when the znode does not exist."""
        try:
            return self._wait(result, path)
        except NoNodeError:
            return None

    def _sync_topic(
        self, topic: str, parts: Mapping[int, tuple[list[int], int, int, list[int]]],
        marked: bool, read: _TopicRead | None,
    ) -> None:
        """Write what differs between ZooKeeper (``read``, or what was held of it since;
        neither when the topic was not listed) and the cluster: the topic znode, the
        partition states, and the partitions directories of partitions the topic no longer
        has. Once anything is written, the topic is read again next round (which watches
        what this round created)."""
        zk = self._zk
        assert zk is not None
        data = zp.TopicAssignment({p: r for p, (r, _, _, _) in parts.items()}).encode()
        if read is not None:
            got = self._answer(read.data, zp.topic_path(topic))
            if got is not None:  # else deleted since the listing: created below
                states: dict[int, bytes] = {}
                for p, result in read.states.items():
                    state = self._answer(result, zp.partition_state_path(topic, p))
                    if state is not None:
                        states[p] = state[0]
                children = self._answer(read.children, zp.partitions_dir(topic)) or []
                self._held[topic] = _Held(got[0], states, children)
        held = self._held.pop(topic, None)  # put back below when nothing differs
        held_data = held.data if held is not None else None  # None: no topic znode
        held_states = held.states if held is not None else {}
        wanted = {p: zp.PartitionState(leader, epoch, 1, isr).encode()
                  for p, (_, leader, epoch, isr) in parts.items()}
        stale = [] if held is None else [
            gone for gone in (zp.parse_id(c) for c in held.partitions)
            if gone is not None and gone not in parts]
        if marked and (stale or _partition_count(held_data) > len(parts)):
            # A partition count never falls, unless the topic was deleted and created again:
            # believed after GONE_AFTER_ANSWERS answers in a row, as a topic's absence is
            # (one odd answer would make every member rebalance twice).
            seen = self._fewer_answers[topic] = self._fewer_answers.get(topic, 0) + 1
            if seen < GONE_AFTER_ANSWERS:
                if held is not None:
                    self._held[topic] = held
                return
        self._fewer_answers.pop(topic, None)
        if held is not None and held_data == data and not stale and all(
                held_states.get(p) == state for p, state in wanted.items()):
            self._held[topic] = held
            return
        if held_data != data:
            if not marked:
                # The marker first: a round cut short in between leaves a managed topic
                # without its znode (written next round), never a topic znode the bridge
                # would then take for someone else's and leave for good.
                path = self._marker(topic)
                self._wait(zk.ensure_path_async(path), path, "ensure")
            if not self._write_topic(topic, data, held_data is not None):
                return
            log.info("bridge: topic %s with %d partitions", topic, len(parts))
        for p, state in sorted(wanted.items()):
            if held_states.get(p) != state and not self._write_state(topic, p, state):
                return  # its topic znode was deleted meanwhile: written again next round
        for gone in sorted(stale):
            # Deleted and created again with fewer partitions within GONE_AFTER_ANSWERS: a
            # reader must not find a leader for a partition that does not exist.
            log.info("bridge: topic %s has no partition %d any more", topic, gone)
            self._delete(self._partition_dir(topic, gone), recursive=True)

    # -- small ZooKeeper helpers -------------------------------------------------------------
    def _wait(self, result: IAsyncResult, path: str, op: str = "access") -> Any:
        """The answer of a request on ``path``, or KazooTimeoutError after
        ``request_timeout_s``. A request given up on stays queued in kazoo and may still run
        once the connection is back: the caller's round fails, and the next one rewrites
        everything after it. NoAuth becomes :class:`ZooKeeperRefusedError`: kazoo's error
        does not say which znode's ACL is at fault. ``op``: ``create``, ``delete``,
        ``ensure`` (``ensure_path``) or ``access`` (the rest), for that error."""
        try:
            return result.get(timeout=self._request_timeout)
        except NoAuthError:
            raise ZooKeeperRefusedError(self._zk_connect, path, op) from None

    def _write_topic(self, topic: str, data: bytes, listed: bool) -> bool:
        """Write a managed topic's znode; False when someone else created it first (an admin
        tool, between the listing and this write): then it is theirs, and left alone."""
        zk = self._zk
        assert zk is not None
        path = zp.topic_path(topic)
        if listed:
            try:
                self._wait(zk.set_async(path, data), path)
                return True
            except NoNodeError:
                pass  # deleted since the listing: created below
        try:
            self._wait(zk.create_async(path, data), path, "create")  # /brokers/topics exists
        except NodeExistsError:
            try:
                if self._wait(zk.get_async(path), path)[0] == data:
                    return True  # ours after all (a create left queued by a timeout)
            except NoNodeError:
                pass  # deleted again: theirs all the same
            self._delete(self._marker(topic))
            log.info("bridge: topic %s was written by someone else; leaving it alone", topic)
            return False
        return True

    def _write_state(self, topic: str, partition: int, data: bytes) -> bool:
        """Write a partition's state znode; False when the topic's znode is gone. Its
        parents are created level by level, never the topic znode: kazoo's makepath would
        create that one empty, which readers reject as invalid JSON."""
        zk = self._zk
        assert zk is not None
        path = zp.partition_state_path(topic, partition)
        try:
            self._wait(zk.set_async(path, data), path)
            return True
        except NoNodeError:
            pass
        try:
            for parent in (zp.partitions_dir(topic), self._partition_dir(topic, partition)):
                try:
                    self._wait(zk.create_async(parent), parent, "create")
                except NodeExistsError:
                    pass
            try:
                self._wait(zk.create_async(path, data), path, "create")
            except NodeExistsError:  # written meanwhile (a request left queued by a timeout)
                self._wait(zk.set_async(path, data), path)
        except NoNodeError:
            return False
        return True

    def _delete(self, path: str, recursive: bool = False) -> None:
        zk = self._zk
        assert zk is not None
        try:
            if recursive:
                for child in self._wait(zk.get_children_async(path), path):
                    self._delete(f"{path}/{child}", recursive=True)
            self._wait(zk.delete_async(path), path, "delete")
        except NoNodeError:
            pass
