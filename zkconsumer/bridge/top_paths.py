"""The top-level paths, made at start as a ZooKeeper-mode broker made them, even before any
broker: the bridge's own (:data:`OWN_PATHS`: one it may not create ends it) and, best effort,
the other persistent ones such a broker made (:data:`KAFKA_PATHS`)."""

from __future__ import annotations

import logging

from kazoo.exceptions import KazooException
from kazoo.security import OPEN_ACL_UNSAFE

from zkconsumer._errors import ZooKeeperRefusedError
from zkconsumer.bridge.zk_requests import _ZK_GONE, Requests
from zkconsumer.zk import paths as zp

log = logging.getLogger("zkconsumer.bridge")

#: Where the bridge marks the topics it manages: /zkconsumer/bridge/topics/<topic>.
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


class TopLevelPaths:
    """Makes the top-level paths; ``made``: they exist (False again after a resync, or a
    race with another writer that may have deleted them)."""

    def __init__(self, requests: Requests) -> None:
        self._requests = requests
        self.made = False
        self._warned: set[str] = set()  # KAFKA_PATHS it may not create, warned once each

    def make(self) -> None:
        """All requests sent at once, the answers read in order (a refusal of one of
        :data:`OWN_PATHS` names the first refused; one of :data:`KAFKA_PATHS` is warned
        about once and left)."""
        zk = self._requests.zk
        # /consumers stays open whatever the ACL, as Kafka kept it (ZkData.defaultAcls):
        # every legacy consumer writes under it.
        pending = [(path, zk.ensure_path_async(
            path, acl=OPEN_ACL_UNSAFE if path == zp.CONSUMERS else None))
            for path in (*OWN_PATHS, *KAFKA_PATHS)]
        for path, result in pending:
            if path in OWN_PATHS:
                self._requests.wait(result, path, "ensure")
                continue
            try:
                self._requests.wait(result, path, "ensure")
            except _ZK_GONE:
                raise
            except (ZooKeeperRefusedError, KazooException) as e:
                if path not in self._warned:
                    self._warned.add(path)
                    log.warning("bridge: cannot create %s, which ZooKeeper-era tools read "
                                "(%s); going on without it", path,
                                e if isinstance(e, ZooKeeperRefusedError) else type(e).__name__)
        self.made = True
