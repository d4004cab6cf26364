"""The bridge: registers a Kafka-protocol cluster in ZooKeeper as ZooKeeper-mode brokers did.

Legacy ZooKeeper consumers find brokers, topics, partitions and leaders in ZooKeeper. Clusters
that no longer use ZooKeeper (Kafka 4 KRaft, Redpanda) write nothing there, so the bridge
reads the cluster's metadata over the Kafka protocol (kafka-python's admin client) and keeps this
part of the tree in sync, within about one poll interval (0.5 s by default)::

    /brokers/ids/<id>                          ephemeral, owned by the bridge's session
    /brokers/topics/<topic>                    {"version":1,"partitions":{"0":[111]}}
    /brokers/topics/<topic>/partitions/<p>/state
    /zkconsumer/bridge/topics/<topic>          marker: the bridge manages this topic

One module per step: :mod:`~zkconsumer.bridge.connecting` (the session at start: login, ACL,
chroot), :mod:`~zkconsumer.bridge.top_paths` (the top-level paths a ZooKeeper-mode broker
made), :mod:`~zkconsumer.bridge.cluster` (the cluster's metadata),
:mod:`~zkconsumer.bridge.topics` and :mod:`~zkconsumer.bridge.topic_znodes` (the topics,
read with watches and written where they differ), :mod:`~zkconsumer.bridge.brokers` (the
broker registrations), over :mod:`~zkconsumer.bridge.zk_requests` (every ZooKeeper request
waited for at most its time limit); :mod:`~zkconsumer.bridge.daemon` runs the rounds.

ZooKeeper security as for the command-line tools: the bridge logs in with
``ZKCONSUMER_ZOOKEEPER_AUTH`` and gives every znode it creates the ACL of
``ZKCONSUMER_ZOOKEEPER_ACL`` (as a secured ZooKeeper-mode broker did with
``zookeeper.set.acl``), so that on a secured ensemble nobody else can replace or delete its
broker registrations. A refused login, a bad variable, an unreachable ZooKeeper or top-level
paths it may not create make :meth:`Bridge.run` raise :class:`~zkconsumer.ZkConsumerError`
before the first round. Later, a request refused (NoAuth, naming the znode) or lost to a race
with another writer fails its round with one log line, not repeated while it lasts.
"""

from zkconsumer.bridge.cluster import ClusterView, legal_topic, read_cluster
from zkconsumer.bridge.connecting import KAZOO_LOG
from zkconsumer.bridge.daemon import Bridge
from zkconsumer.bridge.top_paths import KAFKA_PATHS, MANAGED_DIR, OWN_PATHS
from zkconsumer.bridge.topics import GONE_AFTER_ANSWERS

__all__ = ["GONE_AFTER_ANSWERS", "KAFKA_PATHS", "KAZOO_LOG", "MANAGED_DIR", "OWN_PATHS",
           "Bridge", "ClusterView", "legal_topic", "read_cluster"]
