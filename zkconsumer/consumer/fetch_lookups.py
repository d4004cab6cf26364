"""The lookup clients the fetcher threads and the leader finder share: one kafka-python
consumer for offsets (:func:`~zkconsumer.broker.clients.log_end_offsets` is the only way
zkconsumer computes a log end), one ``KafkaAdminClient`` for leaders.

Locks: each client's ``_lock`` guards the client and serialises its use (see
:class:`_SharedClient`); ``_closed`` is a flag set once by ``close()``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from kafka import KafkaConsumer

from zkconsumer._config import ConsumerConfig
from zkconsumer._errors import ConsumerShutdownError
from zkconsumer._tls import with_tls_deadline
from zkconsumer._types import TopicPartition
from zkconsumer.broker.clients import (
    kafka_admin,
    kafka_consumer,
    kafka_python_kwargs,
    log_end_offsets,
    request_timeout_ms,
)

log = logging.getLogger("zkconsumer.fetcher")


def network_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that mean "the cluster did not answer as hoped": retried, never fatal."""
    from kafka.errors import KafkaError

    errors: list[type[BaseException]] = [KafkaError, OSError]
    try:
        from confluent_kafka import KafkaException

        errors.append(KafkaException)
    except ImportError:  # pragma: no cover - confluent-kafka is optional
        pass
    return tuple(errors)


class _SharedClient:
    """A kafka-python client made lazily, shared by the fetcher threads, dropped after a
    failure (the next use bootstraps from the brokers registered then). ``_lock`` guards the
    client and serialises its use (:meth:`_in_use`)."""

    def __init__(self, config: ConsumerConfig, consumer_id: str,
                 bootstrap: Callable[[], list[str]]) -> None:
        self._config = config
        self._consumer_id = consumer_id
        self._bootstrap = bootstrap  # the brokers to bootstrap a new client from
        self._lock = threading.Lock()
        self._closed = False  # close() came: a lookup under way then drops the client after

    @contextmanager
    def _in_use(self) -> Iterator[None]:
        with self._lock:
            try:
                yield
            except BaseException:
                self._drop()
                raise
            finally:
                if self._closed:
                    self._drop()

    def _drop(self) -> None:
        raise NotImplementedError

    def close(self, timeout_s: float) -> None:
        # Flagged first: a lookup that outlives the wait (a request timeout is 30 s or more)
        # closes the client itself when it ends, and so does one made by a late thread.
        self._closed = True
        if self._lock.acquire(timeout=timeout_s):
            try:
                self._drop()
            finally:
                self._lock.release()


class _OffsetClient(_SharedClient):
    """One kafka-python consumer (no group) for offset lookups."""

    def __init__(self, config: ConsumerConfig, consumer_id: str,
                 bootstrap: Callable[[], list[str]]) -> None:
        super().__init__(config, consumer_id, bootstrap)
        self._consumer: KafkaConsumer | None = None

    def _client(self) -> KafkaConsumer:
        if self._closed:  # a late thread: no new connection (nor a ZooKeeper read) for it
            raise ConsumerShutdownError(f"{self._consumer_id}: the fetcher is shut down")
        if self._consumer is None:
            self._consumer = kafka_consumer(**kafka_python_kwargs(self._config, self._bootstrap()))
        return self._consumer

    def resolve(self, tps: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        """Where auto.offset.reset says to start: log start (smallest) or log end (largest)."""
        from kafka import TopicPartition as KTP

        timeout_ms = request_timeout_ms(self._config)
        with self._in_use():
            consumer = self._client()
            if self._config.auto_offset_reset == "smallest":
                ktps = [KTP(t, p) for t, p in tps]
                found = consumer.beginning_offsets(ktps, timeout_ms=timeout_ms)
                return {TopicPartition(k.topic, k.partition): int(v) for k, v in found.items()}
            return log_end_offsets(tps, consumer=consumer, timeout_ms=timeout_ms)

    def log_end(
        self, tps: Collection[TopicPartition], *, timeout_ms: int | None = None,
    ) -> dict[TopicPartition, int]:
        """:func:`log_end_offsets` within ``timeout_ms`` (default: the request timeout)."""
        if timeout_ms is None:
            timeout_ms = request_timeout_ms(self._config)
        with self._in_use():
            return log_end_offsets(tps, consumer=self._client(), timeout_ms=timeout_ms)

    def _drop(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            try:
                consumer.close(autocommit=False)
            except Exception:  # already failing; the first error matters
                log.debug("closing the offset client failed", exc_info=True)


class _MetadataClient(_SharedClient):
    """One ``KafkaAdminClient`` for leader lookups (the leader finder's)."""

    def __init__(self, config: ConsumerConfig, consumer_id: str,
                 bootstrap: Callable[[], list[str]]) -> None:
        super().__init__(config, consumer_id, bootstrap)
        self._admin: Any = None

    def leaders(self, topics: Collection[str]) -> dict[TopicPartition, int]:
        """Partition -> leader broker id (-1: none) of these topics; unknown topics left out."""

        with self._in_use():
            if self._admin is None:
                kwargs = with_tls_deadline(self._config.kafka_client_kwargs())
                kwargs["request_timeout_ms"] = request_timeout_ms(self._config)
                self._admin = kafka_admin(bootstrap_servers=self._bootstrap(), **kwargs)
            described = self._admin.describe_topics(sorted(topics))
        out: dict[TopicPartition, int] = {}
        for topic in described:
            if topic.get("error_code", 0) != 0:
                continue
            for p in topic.get("partitions", []):
                if p.get("error_code", 0) not in (0, 9):  # 9: REPLICA_NOT_AVAILABLE is harmless
                    out[TopicPartition(topic["name"], int(p["partition_index"]))] = -1
                    continue
                out[TopicPartition(topic["name"], int(p["partition_index"]))] = int(
                    p.get("leader_id", -1)
                )
        return out

    def _drop(self) -> None:
        admin, self._admin = self._admin, None
        if admin is not None:
            try:
                admin.close()
            except Exception:  # already failing
                log.debug("closing the metadata client failed", exc_info=True)


def fmt_tps(tps: Iterable[TopicPartition]) -> str:
    by_topic: dict[str, list[int]] = {}
    for t, p in tps:
        by_topic.setdefault(t, []).append(p)
    return ", ".join(f"{t}{sorted(ps)}" for t, ps in sorted(by_topic.items())) or "nothing"
