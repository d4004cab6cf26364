"""The cluster's side of the bridge: its metadata, read over the Kafka protocol
(kafka-python's admin client) and reduced to what ZooKeeper-mode brokers wrote."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from zkconsumer._config_keys import legal_id_problem

#: A topic's partitions: partition -> (replicas, leader, leader_epoch, isr).
Partitions = dict[int, tuple[list[int], int, int, list[int]]]


def legal_topic(name: str) -> bool:
    """Whether ``name`` is a legal Kafka topic name (Topic.validate: the characters of a
    legal group.id, at most 249 of them, not "." or ".."). Anything else a cluster reports
    cannot be a ZooKeeper-mode topic, and may not even be a znode name ("..", "a/b")."""
    return len(name) <= 249 and name not in (".", "..") and legal_id_problem(name) is None


@dataclass(frozen=True)
class ClusterView:
    """What the cluster says, reduced to what ZooKeeper-mode brokers wrote."""

    brokers: dict[int, tuple[str, int, str | None]]  # id -> (host, port, rack)
    topics: dict[str, Partitions] = field(default_factory=dict)
    # Topics the answer named with a topic-level error: unknown this round, not gone.
    errored: frozenset[str] = frozenset()


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
    topics: dict[str, Partitions] = {}
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
