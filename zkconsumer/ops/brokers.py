"""The tools' view of the brokers: where they are, whether they answer, log ends, leaders."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from zkconsumer._errors import AdminError, ZkDataError
from zkconsumer._types import TopicPartition
from zkconsumer.broker.clients import (
    brokers_problem,
    kafka_consumer,
    log_end_offsets,
    message_timestamps,
)
from zkconsumer.zk import paths as zp
from zkconsumer.zk.read import broker_addresses, get_many

log = logging.getLogger("zkconsumer.admin")


def find_bootstrap(
    zk: KazooClient, bootstrap: str | None = None, kafka: Mapping[str, Any] | None = None
) -> str:
    """``bootstrap`` if given, else every broker registered in ``/brokers/ids``, on the
    endpoint of the security protocol in ``kafka`` (:func:`command_config`; PLAINTEXT).

    This is how the legacy tools found the brokers. AdminError when none is registered.
    """
    if bootstrap:
        return bootstrap
    protocol = str((kafka or {}).get("security_protocol", "PLAINTEXT"))
    addresses = broker_addresses(zk, protocol)
    if not addresses:
        raise AdminError(
            f"no broker is registered in ZooKeeper ({zp.BROKER_IDS}) with a {protocol} "
            "endpoint; pass --bootstrap-server"
        )
    return ",".join(addresses)


def check_brokers(servers: str, timeout_s: float = 5.0) -> None:
    """AdminError unless at least one of ``servers`` (``host:port,...``) accepts a TCP
    connection within ``timeout_s``: kafka-python would otherwise retry its bootstrap for
    30 s before giving up, logging each attempt."""
    problem = brokers_problem(servers, timeout_s)
    if problem is not None:
        raise AdminError(f"cannot reach any broker ({problem})")


def _reachable_brokers(
    zk: KazooClient, bootstrap: str | None, kafka: Mapping[str, Any] | None
) -> str:
    """The brokers to ask (:func:`find_bootstrap`), checked to be reachable
    (:func:`check_brokers`); AdminError naming why not."""
    servers = find_bootstrap(zk, bootstrap, kafka)
    check_brokers(servers)
    return servers


def _log_end_offsets(
    bootstrap: str, tps: Sequence[TopicPartition], kafka: Mapping[str, Any] | None = None
) -> dict[TopicPartition, int]:
    """Log end offsets through the fetcher's implementation (the one way zkconsumer reads
    them)."""
    if not tps:
        return {}

    result = log_end_offsets(
        list(tps), bootstrap_servers=bootstrap.split(","), timeout_ms=15_000,
        **{**dict(kafka or {}), "client_id": TOOLS_CLIENT_ID},
    )
    return {TopicPartition(tp[0], tp[1]): int(off) for tp, off in result.items()}


def log_ends(
    zk: KazooClient, tps: Sequence[TopicPartition], bootstrap: str | None = None,
    kafka: Mapping[str, Any] | None = None,
) -> dict[TopicPartition, int]:
    """The log end offsets of ``tps`` from the brokers (``bootstrap``, else those registered
    in ZooKeeper); AdminError naming why they cannot be asked."""
    return _log_end_offsets(_reachable_brokers(zk, bootstrap, kafka), tps, kafka)


def message_times(
    zk: KazooClient, positions: Mapping[TopicPartition, int], bootstrap: str | None = None,
    kafka: Mapping[str, Any] | None = None,
) -> dict[TopicPartition, float]:
    """When the message at each partition's offset was written (its timestamp, epoch
    seconds), from the brokers as :func:`log_ends` asks them; partitions whose message cannot
    be read are left out."""
    if not positions:
        return {}
    servers = _reachable_brokers(zk, bootstrap, kafka)
    return message_timestamps(positions, bootstrap_servers=servers.split(","),
                              **{**dict(kafka or {}), "client_id": TOOLS_CLIENT_ID})


def time_lags(
    zk: KazooClient, positions: Mapping[TopicPartition, tuple[int | None, int | None]],
    bootstrap: str | None = None, kafka: Mapping[str, Any] | None = None, *,
    now: float | None = None,
    read_times: Callable[[Mapping[TopicPartition, int]], Mapping[TopicPartition, float]]
    | None = None,
) -> dict[TopicPartition, float | None]:
    """Each partition's time lag in seconds, for a one-shot command, from ``positions``
    (committed offset, log end): 0 when caught up, the age of the message at the committed
    offset (its timestamp, read from the brokers as :func:`message_times` reads them) when
    behind, None when it cannot be told (no offset or log end, the message not readable, the
    brokers not answering: never 0). ``read_times`` replaces the read."""
    out: dict[TopicPartition, float | None] = {}
    behind: dict[TopicPartition, int] = {}
    for tp, (offset, end) in positions.items():
        if offset is None or offset < 0 or end is None:
            out[tp] = None
        elif offset >= end:
            out[tp] = 0.0
        else:
            behind[tp] = offset
    found: Mapping[TopicPartition, float] = {}
    if behind:
        try:
            found = (read_times(behind) if read_times is not None
                     else message_times(zk, behind, bootstrap, kafka))
        except Exception as e:  # noqa: BLE001 - the time lags stay unknown (None), not 0
            log.debug("message timestamps unknown: %s", e)
    at = time.time() if now is None else now
    for tp in behind:
        stamp = found.get(tp)
        out[tp] = None if stamp is None else round(max(0.0, at - stamp), 3)
    return out


def partition_leaders(
    zk: KazooClient, tps: Iterable[TopicPartition]
) -> dict[TopicPartition, int | None]:
    """Each partition's leader broker id from its state znode; None without a leader or a
    readable state (as the legacy tools read ``/brokers/topics/T/partitions/P/state``)."""
    out: dict[TopicPartition, int | None] = {}
    for path, data in get_many(zk, [zp.partition_state_path(t, p) for t, p in tps]).items():
        topic, partition = _state_tp(path)
        try:
            state = zp.PartitionState.decode(data, path) if data is not None else None
        except ZkDataError as e:
            log.warning("partition state unreadable: %s", e)
            state = None
        out[TopicPartition(topic, partition)] = (
            state.leader if state is not None and state.has_leader else None)
    return out


def _state_tp(path: str) -> tuple[str, int]:
    """``/brokers/topics/T/partitions/P/state`` -> (T, P)."""
    parts = path.split("/")
    return parts[3], int(parts[5])


def broker_endpoints(
    zk: KazooClient, broker_ids: Iterable[int], listener: str = "PLAINTEXT"
) -> dict[int, tuple[str, int]]:
    """``(host, port)`` of each registered broker of ``broker_ids`` (the others left out)."""
    out: dict[int, tuple[str, int]] = {}
    for bid in sorted(set(broker_ids)):
        path = zp.broker_path(bid)
        try:
            data, _ = zk.get(path)
            out[bid] = zp.BrokerRegistration.decode(data, path).endpoint(listener)
        except NoNodeError:
            continue
        except ZkDataError as e:
            log.warning("broker %s: %s", bid, e)
    return out


class _BrokersUnreachableError(AdminError):
    """A kafka-python client could not bootstrap from the brokers."""


#: Longest wait for a tool's kafka-python admin client to reach the brokers.
BOOTSTRAP_TIMEOUT_MS = 10_000

#: The client id of the tools' kafka-python clients.
TOOLS_CLIENT_ID = "zkconsumer-tools"


def _reason(e: BaseException) -> str:
    """``e`` for a message: its text, or its type when it has none (kafka-python's often)."""
    text = str(e).strip()
    return text or type(e).__name__


class _BrokerOffsets:
    """Earliest offsets and offsets for times through one kafka-python consumer."""

    def __init__(self, bootstrap: str, kafka: Mapping[str, Any] | None = None) -> None:

        self._consumer = kafka_consumer(
            bootstrap_servers=bootstrap.split(","),
            enable_auto_commit=False,
            request_timeout_ms=30000,
            **{**dict(kafka or {}), "client_id": TOOLS_CLIENT_ID},
        )

    def __enter__(self) -> _BrokerOffsets:
        return self

    def __exit__(self, *exc: object) -> None:
        self._consumer.close()

    def earliest(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        from kafka import TopicPartition as KTP

        result = self._consumer.beginning_offsets([KTP(t, p) for t, p in tps])
        return {TopicPartition(k.topic, k.partition): int(v) for k, v in result.items()}

    def for_time(
        self, tps: Sequence[TopicPartition], timestamp_ms: int
    ) -> dict[TopicPartition, int | None]:
        """The first offset with a timestamp >= ``timestamp_ms``; None when there is none."""
        from kafka import TopicPartition as KTP

        result = self._consumer.offsets_for_times({KTP(t, p): timestamp_ms for t, p in tps})
        out: dict[TopicPartition, int | None] = {}
        for k, v in result.items():
            # A broker with no message at or after the time answers offset -1 (kafka-python
            # then gives None); some brokers answer offset 0 with timestamp -1. Both mean
            # "none".
            found = v is not None and v.offset >= 0 and v.timestamp >= 0
            out[TopicPartition(k.topic, k.partition)] = int(v.offset) if found else None
        return out


