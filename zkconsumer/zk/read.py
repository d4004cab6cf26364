"""ZooKeeper reads shared by the connector, the tools and the Spark source, and the reading
of a failed transaction's answers (:func:`transaction_cause`).

Paths and payload formats come from :mod:`zkconsumer.zk.paths`; this module only adds the
kazoo calls and the tolerance rules (a broker whose registration cannot be decoded is
skipped with a warning, never a crash).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError, NoNodeError, RolledBackError, RuntimeInconsistency

from zkconsumer._errors import ZkDataError
from zkconsumer._filters import filter_from_registration
from zkconsumer.zk import paths as zp
from zkconsumer.zk.session import acl_refused

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


def consumers_for_topic(
    members: Mapping[str, zp.ConsumerRegistration],
    all_topics: Iterable[str],
    exclude_internal_topics: bool,
) -> dict[str, list[str]]:
    """Topic -> thread ids of every member subscribed to it, sorted as strings.

    Static members name their topics; wildcard members match their regex against
    ``all_topics``. Thread ids are ``<consumer id>-<n>``, n = 0 .. count-1::

        >>> reg = zp.ConsumerRegistration({"t": 2}, "static", 0)
        >>> consumers_for_topic({"g_c1": reg}, [], True)
        {'t': ['g_c1-0', 'g_c1-1']}
    """
    topics = sorted(all_topics)
    out: dict[str, list[str]] = {}
    for consumer_id, reg in members.items():
        for key, count in reg.subscription.items():
            flt = filter_from_registration(reg.pattern, key) if reg.is_wildcard else None
            matched = (
                [t for t in topics if flt.is_topic_allowed(t, exclude_internal_topics)]
                if flt is not None
                else [key]
            )
            for topic in matched:
                out.setdefault(topic, []).extend(zp.thread_ids(consumer_id, count))
    return {t: sorted(ids) for t, ids in out.items()}


def children(zk: KazooClient, path: str) -> list[str]:
    try:
        return list(zk.get_children(path))
    except NoNodeError:
        return []
    except NoAuthError:
        raise acl_refused(zk, "read", path) from None


def children_of(zk: KazooClient, path: str, result: Any) -> list[str]:
    """The answer of ``get_children_async(path)``; [] when absent."""
    try:
        return list(result.get())
    except NoNodeError:
        return []
    except NoAuthError:
        raise acl_refused(zk, "read", path) from None


def get_many(zk: KazooClient, paths: Sequence[str]) -> dict[str, bytes | None]:
    """Read many znodes pipelined (async requests, then the answers); None when absent."""
    pending = [(p, zk.get_async(p)) for p in paths]
    out: dict[str, bytes | None] = {}
    for path, async_result in pending:
        try:
            data, _ = async_result.get()
        except NoNodeError:
            out[path] = None
            continue
        except NoAuthError:
            raise acl_refused(zk, "read", path) from None
        out[path] = data
    return out
