"""What the source asks ZooKeeper: its clients, the subscribed topics and partitions, the
brokers, and the check of the options against them."""

from __future__ import annotations

import logging

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from zkconsumer._config import ConsumerConfig
from zkconsumer._errors import ZkConsumerError, ZkDataError
from zkconsumer.spark.options import SourceOptions, _fail
from zkconsumer.zk import paths as zp
from zkconsumer.zk.handler import kazoo_handler
from zkconsumer.zk.read import broker_addresses, topic_partitions
from zkconsumer.zk.session import kazoo_security_kwargs, start_and_check_login

__all__ = ["validate_against_zookeeper"]

log = logging.getLogger("zkconsumer.spark")

# -- ZooKeeper and brokers ---------------------------------------------------------------------


def _zk_client(config: ConsumerConfig, long_lived: bool = False) -> KazooClient:
    """A started client; a ``long_lived`` one (the query's) reconnects for ever after a loss."""
    zk = KazooClient(
        hosts=config.zookeeper_connect,
        timeout=config.zookeeper_session_timeout_ms / 1000.0,
        handler=kazoo_handler(),
        **kazoo_security_kwargs(config),
        connection_retry={"max_tries": -1 if long_lived else 3, "delay": 0.1,
                          "max_delay": 1.0},
        command_retry={"max_tries": 3, "delay": 0.1, "max_delay": 1.0},
    )
    try:
        start_and_check_login(zk, config)
    except Exception as e:  # noqa: BLE001 - said as the source's one-line error, below
        _close_zk(zk)  # stopped first: a running client refuses close()
        raise ZkConsumerError(
            f"zkconsumer source: cannot connect to ZooKeeper at {config.zookeeper_connect}: {e}"
        ) from None
    return zk


def _close_zk(zk: KazooClient) -> None:
    try:
        zk.stop()
    finally:
        zk.close()


def _all_topics(zk: KazooClient) -> list[str]:
    try:
        return sorted(zk.get_children(zp.BROKER_TOPICS))
    except NoNodeError:
        return []


def _subscribed_partitions(zk: KazooClient, opts: SourceOptions) -> dict[str, list[int]]:
    """topic -> partitions of every subscribed topic that exists now.

    A topic whose ``/brokers/topics`` znode does not decode is left out, with a warning: the
    group's members ignore it the same way (none owns its partitions), and one bad znode
    must not stop a query over the other topics.
    """
    config = opts.config()
    names = (list(opts.topics) if opts.topic_filter is None else
             [t for t in _all_topics(zk) if opts.subscribes(t, config.exclude_internal_topics)])
    out: dict[str, list[int]] = {}
    for t in names:
        try:
            parts = topic_partitions(zk, t)
        except ZkDataError as e:
            log.warning("zkconsumer source: ignoring topic %s: %s", t, e)
            continue
        if parts is not None:
            out[t] = parts
    return out


def _brokers_from_zk(zk: KazooClient, listener: str) -> tuple[str, ...]:
    """``host:port`` of each broker registered under /brokers/ids."""
    out = broker_addresses(zk, listener)
    if not out:
        raise ZkConsumerError(
            "zkconsumer source: no broker is registered in ZooKeeper under /brokers/ids "
            "(or give the kafka.bootstrap.servers option)"
        )
    return tuple(out)


def _bootstrap(zk: KazooClient, opts: SourceOptions, config: ConsumerConfig) -> tuple[str, ...]:
    return opts.bootstrap or _brokers_from_zk(zk, config.security_protocol)


def validate_against_zookeeper(opts: SourceOptions) -> None:
    """Check what only ZooKeeper knows: the topics and the partitions in offset maps exist."""
    config = opts.config()
    zk = _zk_client(config)
    try:
        known: dict[str, list[int]] = {}
        for t in opts.topics:
            parts = topic_partitions(zk, t)
            if parts is None:
                existing = _all_topics(zk)
                hint = ", ".join(existing[:10]) + (", ..." if len(existing) > 10 else "")
                raise _fail(f"unknown topic {t!r}: it is not registered in ZooKeeper under "
                            f"{zp.BROKER_TOPICS} (known topics: {hint or 'none'})")
            known[t] = parts
        for name, spec in (("startingOffsets", opts.starting), ("endingOffsets", opts.ending)):
            if not isinstance(spec, dict):
                continue
            for t, offsets in spec.items():
                if not opts.subscribes(t, config.exclude_internal_topics):
                    raise _fail(f"{name} names topic {t!r}, which the query does not subscribe to")
                parts = known.get(t)
                if parts is None:
                    parts = topic_partitions(zk, t)
                    if parts is None:
                        raise _fail(f"{name} names unknown topic {t!r}")
                missing = sorted(set(offsets) - set(parts))
                if missing:
                    raise _fail(f"{name}: topic {t!r} has no partition {missing[0]} "
                                f"(it has {len(parts)})")
    finally:
        _close_zk(zk)
