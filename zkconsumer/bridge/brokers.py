"""The broker registrations: ``/brokers/ids/<id>``, ephemerals of the bridge's session, one
per broker of the cluster, as ZooKeeper-mode brokers registered themselves.

Which registrations are the bridge's is read back from ZooKeeper every round (the ephemerals
of its session), not trusted from memory: a session that survived a resync keeps them, and
only those are deleted when a broker or the whole cluster goes away. One held by another
session (a second bridge, a real broker) is left alone, as a broker starting with a taken id
would.
"""

from __future__ import annotations

import logging
import time

from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError

from zkconsumer._errors import ZooKeeperRefusedError
from zkconsumer.bridge.cluster import ClusterView
from zkconsumer.bridge.zk_requests import _ZK_GONE, Requests
from zkconsumer.zk import paths as zp

log = logging.getLogger("zkconsumer.bridge")


class BrokerRegistry:
    """The bridge's broker registrations; ``written``: id -> the details last written (the
    registrations of its session, read back by :meth:`adopt`). Brokers are registered with
    one listener of ``protocol``, as a broker with that listener alone would (readers look
    endpoints up by their security.protocol)."""

    def __init__(self, requests: Requests, protocol: str) -> None:
        self._requests = requests
        self._protocol = protocol
        self.written: dict[int, bytes] = {}
        self._warned_held: set[int] = set()  # broker ids held by another session, warned

    def adopt(self) -> None:
        """Which /brokers/ids/<id> are this bridge's (ephemerals of its session); replaces
        what was remembered. One remembered and still ours keeps what was written (it is
        rewritten only when the cluster's details change); one found ours but not remembered
        is rewritten this round."""
        zk = self._requests.zk
        session = zk.client_id[0] if zk.client_id else None
        try:
            children = self._requests.wait(zk.get_children_async(zp.BROKER_IDS),
                                           zp.BROKER_IDS)
        except NoNodeError:
            children = []
        owned: dict[int, bytes] = {}
        for child in children:
            bid = zp.parse_id(child)
            if bid is None:
                continue  # not a broker id the bridge writes
            path = zp.broker_path(bid)
            stat = self._requests.wait(zk.exists_async(path), path)
            if stat is not None and session is not None and stat.ephemeralOwner == session:
                # b"": never equal to a written key, so rewritten
                owned[bid] = self.written.get(bid, b"")
        self.written = owned

    def register(self, view: ClusterView) -> None:
        """Register the view's brokers whose details changed; drop those that left."""
        now_ms = int(time.time() * 1000)
        proto = self._protocol
        plaintext = proto == "PLAINTEXT"
        for bid, (host, port, rack) in sorted(view.brokers.items()):
            key = f"{proto}:{host}:{port}:{rack}".encode()
            if self.written.get(bid) == key:
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
            if self._write(bid, reg):
                self._warned_held.discard(bid)
                self.written[bid] = key
                log.info("bridge: registered broker %d at %s://%s:%d", bid, proto, host, port)
        for bid in sorted(set(self.written) - set(view.brokers)):
            log.info("bridge: broker %d left the cluster", bid)
            self._requests.delete(zp.broker_path(bid))
            del self.written[bid]

    def drop(self) -> None:
        """Delete every registration of the bridge's (the cluster is gone)."""
        if self.written:
            log.warning("bridge: deregistering brokers %s", sorted(self.written))
        for bid in list(self.written):
            self._requests.delete(zp.broker_path(bid))
            del self.written[bid]

    def deregister_all(self) -> None:
        """At stop: delete this bridge's broker registrations, as a broker's clean shutdown
        did; when ZooKeeper is unreachable, leave them to go with the session (they are
        ephemeral)."""
        zk = self._requests.zk
        left: list[int] = []
        try:
            if zk.connected:
                self.adopt()  # never another session's
            left = sorted(self.written)
            self.written.clear()
            while zk.connected and left:
                self._requests.delete(zp.broker_path(left[0]))
                left.pop(0)
        except _ZK_GONE:
            pass  # said below: the registrations left go with the session
        except (KazooException, ZooKeeperRefusedError) as e:
            # The session is closed right after: its ephemerals go with it.
            log.warning("bridge: cannot delete broker registrations %s (%s); they go with "
                        "the session, closed now", left, e)
            return
        if left:
            log.warning("bridge: ZooKeeper unreachable; broker registrations %s go when its "
                        "session expires", left)

    def _write(self, bid: int, reg: zp.BrokerRegistration) -> bool:
        """Create (or rewrite our own) ``/brokers/ids/<bid>``; False when it is not written
        this round (gone meanwhile, or another session's)."""
        zk, wait = self._requests.zk, self._requests.wait
        path = zp.broker_path(bid)
        try:
            wait(zk.create_async(path, reg.encode(), ephemeral=True, makepath=True), path,
                 "ensure")
            return True
        except NodeExistsError:
            pass
        # Ours (written before a resync, or with other details): rewritten. Another session's
        # (a second bridge, a real broker): left alone, as a broker starting with a taken id
        # would.
        stat = wait(zk.exists_async(path), path)
        if stat is None:
            return False  # gone meanwhile: next round
        if stat.ephemeralOwner != zk.client_id[0]:
            if bid not in self._warned_held:
                self._warned_held.add(bid)
                log.warning("bridge: %s is held by another session; not replacing it", path)
            return False
        wait(zk.set_async(path, reg.encode(), version=stat.version), path)
        return True
