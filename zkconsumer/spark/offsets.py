"""Offsets: as Spark's checkpoint holds them, shared out per trigger (:func:`rate_limit`),
and looked up from the brokers (driver side, and the executors' log-end checks)."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from zkconsumer._config import ConsumerConfig
from zkconsumer._errors import ZkConsumerError
from zkconsumer._types import TopicPartition
from zkconsumer.broker.clients import (
    confluent_consumer,
    confluent_list_offsets,
    fetch_library,
    kafka_consumer,
    kafka_python_kwargs,
    log_end_offsets,
)
from zkconsumer.spark.options import EARLIEST, LATEST, OffsetSpec

__all__ = [
    "INITIAL_OFFSET",
    "Positions",
    "decode_offsets",
    "encode_offsets",
    "rate_limit",
]

log = logging.getLogger("zkconsumer.spark")

#: What ``initialOffset()`` answers: no partition (the key is no legal topic name, so it is
#: never an end offset the source plans; it decodes to no positions).
INITIAL_OFFSET: dict[str, dict[str, int]] = {"(query start)": {}}

# -- offsets in the checkpoint -------------------------------------------------------------------


Positions = dict[TopicPartition, int]


def encode_offsets(positions: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """``{"topic": {"0": 42}}``: the next offset of each partition, sorted."""
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(positions):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(positions[tp])
    return out


def decode_offsets(obj: Mapping[str, Any]) -> Positions:
    try:
        return {
            TopicPartition(str(t), int(p)): int(off)
            for t, parts in obj.items()
            for p, off in parts.items()
        }
    except (AttributeError, TypeError, ValueError) as e:
        raise ZkConsumerError(f"zkconsumer source: unreadable offsets {obj!r}: {e}") from None


def rate_limit(
    start: Mapping[TopicPartition, int], available: Mapping[TopicPartition, int], max_rows: int
) -> Positions:
    """End offsets taking about ``max_rows`` in all, shared in proportion to each lag.

    ``available`` is each partition's log end (or cap). The split is deterministic: floors of
    the proportional shares, but at least one for every partition with a backlog (as in
    Spark's Kafka source, so a quiet partition beside a busy one is not starved; the total
    may then pass ``max_rows`` by up to the number of partitions), then the remainder one
    offset at a time to the partitions with the most left to read (ties by partition), never
    more than a partition's lag::

        >>> a, b = TopicPartition("t", 0), TopicPartition("t", 1)
        >>> rate_limit({a: 0, b: 10}, {a: 30, b: 20}, 8) == {a: 6, b: 12}
        True
        >>> rate_limit({a: 0, b: 0}, {a: 1, b: 10**6}, 100) == {a: 1, b: 99}
        True
    """
    lags = {tp: max(0, available[tp] - start[tp]) for tp in start}
    total = sum(lags.values())
    if total <= max_rows:
        return {tp: start[tp] + lags[tp] for tp in start}
    # Every partition with a backlog gets at least one row (as Spark's Kafka source rounds
    # shares below one up): else a quiet partition next to a busy one waits for ever.
    take = {tp: max(1, (max_rows * lag) // total) if lag else 0 for tp, lag in lags.items()}
    left = max_rows - sum(take.values())
    for tp in sorted(lags, key=lambda x: (-(lags[x] - take[x]), x)):
        if left <= 0:
            break
        if take[tp] < lags[tp]:
            take[tp] += 1
            left -= 1
    return {tp: start[tp] + take[tp] for tp in start}


# -- offsets from the brokers (driver side) --------------------------------------------------


class _OffsetLookup:
    """One client (no group) for earliest and log-end offsets: a confluent-kafka consumer
    where confluent-kafka fetches (:func:`~zkconsumer.broker.clients.fetch_library`), else a
    kafka-python one. Not kafka-python for both: the driver's stream reader is a new Python
    process per query, whose first lookup bootstrapped a kafka-python client (0.15 s; with
    librdkafka, 0.01 to 0.02 s).

    Used from one thread (Spark calls the reader's methods one at a time); not thread-safe.
    """

    def __init__(self, config: ConsumerConfig, bootstrap: Sequence[str]) -> None:
        self._config = config
        self._bootstrap = tuple(bootstrap)
        self._confluent = fetch_library(config) == "confluent"
        self._consumer: Any = None

    def _get(self) -> Any:
        if self._consumer is None:
            if self._confluent:
                self._consumer = confluent_consumer(self._config, self._bootstrap,
                                                    f"spark-offsets-{os.getpid()}")
                return self._consumer
            kwargs = kafka_python_kwargs(self._config, self._bootstrap)
            # Log ends come from a fetch's high watermark: do not let the broker hold it.
            kwargs["fetch_max_wait_ms"] = 10
            self._consumer = kafka_consumer(**kwargs)
        return self._consumer

    def _timeout_ms(self) -> int:
        return max(self._config.socket_timeout_ms, 10_000)

    def _look_up(self, tps: Iterable[TopicPartition], latest: bool) -> Positions:
        wanted = sorted(set(tps))
        if not wanted:
            return {}
        try:
            client = self._get()
            if self._confluent:
                return confluent_list_offsets(client, wanted, latest=latest,
                                              timeout_ms=self._timeout_ms())
            if latest:
                return log_end_offsets(wanted, consumer=client, timeout_ms=self._timeout_ms())
            from kafka import TopicPartition as KTP

            found = client.beginning_offsets([KTP(t, p) for t, p in wanted],
                                             timeout_ms=self._timeout_ms())
        except BaseException:
            self.close()
            raise
        return {TopicPartition(k.topic, k.partition): int(v) for k, v in found.items()}

    def earliest(self, tps: Iterable[TopicPartition]) -> Positions:
        return self._look_up(tps, latest=False)

    def latest(self, tps: Iterable[TopicPartition]) -> Positions:
        return self._look_up(tps, latest=True)

    def reset(self, tps: Iterable[TopicPartition], policy: str) -> Positions:
        """auto.offset.reset: smallest = log start, largest = log end."""
        return self.earliest(tps) if policy == "smallest" else self.latest(tps)

    def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            try:
                if self._confluent:
                    consumer.close()
                else:
                    consumer.close(autocommit=False)
            except Exception:  # closing; nothing left to do
                log.debug("closing the offset consumer failed", exc_info=True)


def _resolve_spec(
    spec: OffsetSpec, tps: Sequence[TopicPartition], default: str,
    committed: Mapping[TopicPartition, int | None] | None, lookup: _OffsetLookup,
    reset_policy: str,
) -> Positions:
    """Offsets per ``spec`` for ``tps``; partitions a JSON map leaves out follow ``default``.

    ``committed`` partitions without a committed offset follow ``reset_policy``.
    """
    kind: dict[TopicPartition, str] = {}
    out: Positions = {}
    for tp in tps:
        if isinstance(spec, dict):
            given = spec.get(tp.topic, {}).get(tp.partition)
            if given is None:
                kind[tp] = default
            elif given == EARLIEST:
                kind[tp] = "earliest"
            elif given == LATEST:
                kind[tp] = "latest"
            else:
                out[tp] = given
        else:
            kind[tp] = spec
    if any(k == "committed" for k in kind.values()):
        assert committed is not None
        for tp, k in list(kind.items()):
            if k == "committed":
                off = committed.get(tp)
                if off is not None and off >= 0:
                    out[tp] = off
                    del kind[tp]
                else:
                    kind[tp] = "earliest" if reset_policy == "smallest" else "latest"
    early = [tp for tp, k in kind.items() if k == "earliest"]
    late = [tp for tp, k in kind.items() if k == "latest"]
    out.update(lookup.earliest(early))
    out.update(lookup.latest(late))
    return out
