"""ZooKeeper reads shared by the connector, the tools and the Spark source.

Paths and payload formats come from :mod:`zkconsumer._zkpaths`; this module only adds the
kazoo calls and the tolerance rules (a broker whose registration cannot be decoded is
skipped with a warning, never a crash).
"""

from __future__ import annotations

import logging

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from . import _zkpaths as zp
from ._errors import ZkDataError

log = logging.getLogger("zkconsumer.zk")


def broker_addresses(zk: KazooClient, listener: str = "PLAINTEXT") -> list[str]:
    """``host:port`` (IPv6 hosts in brackets) of every broker registered in /brokers/ids."""
    try:
        ids = zk.get_children(zp.BROKER_IDS)
    except NoNodeError:
        return []
    out = []
    for bid in sorted(b for i in ids if (b := zp.parse_id(i)) is not None):
        path = zp.broker_path(bid)
        try:
            data, _ = zk.get(path)
            host, port = zp.BrokerRegistration.decode(data, path).endpoint(listener)
        except NoNodeError:
            continue  # gone between the two reads
        except ZkDataError as e:
            log.warning("skipping broker %s: %s", bid, e)
            continue
        out.append(f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
    return out


def topic_partitions(zk: KazooClient, topic: str) -> list[int] | None:
    """The topic's partitions from /brokers/topics/T, sorted; None when it is not there."""
    path = zp.topic_path(topic)
    try:
        data, _ = zk.get(path)
    except NoNodeError:
        return None
    return sorted(zp.TopicAssignment.decode(data, path).partitions)
