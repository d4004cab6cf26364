"""ZooKeeper reads shared by the connector, the tools and the Spark source, and the reading
of a failed transaction's answers (:func:`transaction_cause`).

Paths and payload formats come from :mod:`zkconsumer._zkpaths`; this module only adds the
kazoo calls and the tolerance rules (a broker whose registration cannot be decoded is
skipped with a warning, never a crash).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError, RolledBackError, RuntimeInconsistency

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


def transaction_cause(
    operations: Sequence[Any], results: Sequence[Any]
) -> tuple[Any, Exception] | None:
    """The operation that made a ZooKeeper transaction fail, with its error; None if none did.

    kazoo answers the operations before the failing one with RolledBackError and those
    after it with RuntimeInconsistency: the cause is the one error that is neither.
    """
    for op, result in zip(operations, results, strict=False):
        if isinstance(result, Exception) and not isinstance(
            result, (RolledBackError, RuntimeInconsistency)
        ):
            return op, result
    return None

