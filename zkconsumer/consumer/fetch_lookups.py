"""The lookup clients the fetcher threads and the leader finder share: one for offsets, one
for leaders, over the library that fetches (:class:`_Lookups`): kafka-python (a consumer,
:func:`~zkconsumer.broker.clients.log_end_offsets`, and a ``KafkaAdminClient``) or
confluent-kafka (a ``Consumer``, :func:`~zkconsumer.broker.clients.confluent_list_offsets`
and its metadata).

Locks: each client's ``_lock`` guards its lookups' client and serialises its use (see
:class:`_SharedClient`); ``_closed`` is a flag set once by ``close()``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from zkconsumer._config import ConsumerConfig
from zkconsumer._errors import ConsumerShutdownError
from zkconsumer._tls import with_tls_deadline
from zkconsumer._types import TopicPartition
from zkconsumer.broker.clients import (
    confluent_consumer,
    confluent_list_offsets,
    kafka_admin,
    kafka_consumer,
    kafka_python_kwargs,
    log_end_offsets,
    request_timeout_ms,
)

if TYPE_CHECKING:
    from kafka import KafkaConsumer

log = logging.getLogger("zkconsumer.fetcher")


def network_errors(library: str) -> tuple[type[BaseException], ...]:
    """Exceptions that mean "the cluster did not answer as hoped" to a fetcher whose client
    library is ``library``: retried, never fatal. kafka-python's only where it fetches: its
    import (0.1 s of CPU) stays out of a confluent member's start."""
    errors: list[type[BaseException]] = [OSError]
    if library == "kafka-python":
        from kafka.errors import KafkaError

        errors.append(KafkaError)
    try:
        from confluent_kafka import KafkaException

        errors.append(KafkaException)
    except ImportError:  # pragma: no cover - confluent-kafka is optional
        pass
    return tuple(errors)


class _Lookups(Protocol):
    """What the shared clients ask the brokers, over one library's client (made at the first
    use of each kind of lookup). An error of :func:`network_errors` when the cluster does not
    answer (a timeout, an unknown partition, no leader): the callers retry."""

    def offsets(self, tps: Collection[TopicPartition], *, latest: bool,
                timeout_ms: int) -> dict[TopicPartition, int]:
        """ListOffsets: the log end (``latest``, the high watermark) or the log start."""
        ...

    def leaders(self, topics: Collection[str], timeout_ms: int) -> dict[TopicPartition, int]:
        """Partition -> leader broker id (-1: none) of these topics; unknown topics left out."""
        ...

    def close(self) -> None: ...


class _KafkaPythonLookups:
    """:class:`_Lookups` over a kafka-python ``KafkaConsumer`` (offsets) and
    ``KafkaAdminClient`` (leaders), each made at its first use."""

    def __init__(self, config: ConsumerConfig, consumer_id: str, bootstrap: list[str]) -> None:
        self._config = config
        self._bootstrap = bootstrap
        self._consumer: KafkaConsumer | None = None
        self._admin: Any = None

    def offsets(self, tps: Collection[TopicPartition], *, latest: bool,
                timeout_ms: int) -> dict[TopicPartition, int]:
        from kafka import TopicPartition as KTP

        if self._consumer is None:
            self._consumer = kafka_consumer(**kafka_python_kwargs(self._config, self._bootstrap))
        if latest:
            return log_end_offsets(tps, consumer=self._consumer, timeout_ms=timeout_ms)
        found = self._consumer.beginning_offsets([KTP(t, p) for t, p in tps],
                                                 timeout_ms=timeout_ms)
        return {TopicPartition(k.topic, k.partition): int(v) for k, v in found.items()}

    def leaders(self, topics: Collection[str], timeout_ms: int) -> dict[TopicPartition, int]:
        if self._admin is None:
            kwargs = with_tls_deadline(self._config.kafka_client_kwargs())
            kwargs["request_timeout_ms"] = timeout_ms
            self._admin = kafka_admin(bootstrap_servers=self._bootstrap, **kwargs)
        out: dict[TopicPartition, int] = {}
        for topic in self._admin.describe_topics(sorted(topics)):
            if topic.get("error_code", 0) != 0:
                continue
            for p in topic.get("partitions", []):
                tp = TopicPartition(topic["name"], int(p["partition_index"]))
                # 9: REPLICA_NOT_AVAILABLE is harmless (a follower is down, not the leader).
                ok = p.get("error_code", 0) in (0, 9)
                out[tp] = int(p.get("leader_id", -1)) if ok else -1
        return out

    def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        admin, self._admin = self._admin, None
        for client, kwargs in ((consumer, {"autocommit": False}), (admin, {})):
            if client is not None:
                try:
                    client.close(**kwargs)
                except Exception:  # already failing, or closing; the first error matters
                    log.debug("closing a lookup client failed", exc_info=True)


class _ConfluentLookups:
    """:class:`_Lookups` over one confluent-kafka ``Consumer`` (never subscribed), made at
    once: where librdkafka fetches, a kafka-python client is not worth its bootstrap (each
    member's first rebalance paid it, and kept kafka-python's import in its path)."""

    def __init__(self, config: ConsumerConfig, consumer_id: str, bootstrap: list[str]) -> None:
        self._consumer: Any = confluent_consumer(config, bootstrap, f"{consumer_id}-lookups")

    def offsets(self, tps: Collection[TopicPartition], *, latest: bool,
                timeout_ms: int) -> dict[TopicPartition, int]:
        return confluent_list_offsets(self._consumer, tps, latest=latest, timeout_ms=timeout_ms)

    def leaders(self, topics: Collection[str], timeout_ms: int) -> dict[TopicPartition, int]:
        from confluent_kafka import KafkaError

        wanted = sorted(set(topics))
        if not wanted:
            return {}
        # One topic: a metadata request for it alone; more: one for all (a request per topic
        # would be as many round trips). Never creates one (allow.auto.create.topics false).
        topic = wanted[0] if len(wanted) == 1 else None
        described = self._consumer.list_topics(topic=topic, timeout=timeout_ms / 1000.0).topics
        out: dict[TopicPartition, int] = {}
        for name in wanted:
            meta = described.get(name)
            if meta is None or meta.error is not None:
                continue
            for p in meta.partitions.values():
                ok = p.error is None or p.error.code() == KafkaError.REPLICA_NOT_AVAILABLE
                out[TopicPartition(name, int(p.id))] = int(p.leader) if ok else -1
        return out

    def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            try:
                consumer.close()
            except Exception:  # already failing, or closing; the first error matters
                log.debug("closing a lookup client failed", exc_info=True)


_LIBRARIES: dict[str, Callable[[ConsumerConfig, str, list[str]], _Lookups]] = {
    "kafka-python": _KafkaPythonLookups,
    "confluent": _ConfluentLookups,
}


class _SharedClient:
    """A lookup client (:class:`_Lookups` of ``library``, the manager's fetch library) made
    lazily, shared by the fetcher threads, dropped after a failure (the next use bootstraps
    from the brokers registered then). ``_lock`` guards ``_lookups`` and serialises its use
    (:meth:`_in_use`)."""

    def __init__(self, config: ConsumerConfig, consumer_id: str,
                 bootstrap: Callable[[], list[str]], library: str) -> None:
        self._config = config
        self._consumer_id = consumer_id
        self._bootstrap = bootstrap  # the brokers to bootstrap a new client from
        self._make = _LIBRARIES[library]
        #: What its lookups raise when the cluster does not answer (:func:`network_errors`).
        self.errors = network_errors(library)
        self._lock = threading.Lock()
        self._lookups: _Lookups | None = None
        self._closed = False  # close() came: a lookup under way then drops the client after

    @contextmanager
    def _in_use(self) -> Iterator[_Lookups]:
        with self._lock:
            try:
                yield self._client()
            except BaseException:
                self._drop()
                raise
            finally:
                if self._closed:
                    self._drop()

    def _client(self) -> _Lookups:
        if self._closed:  # a late thread: no new connection (nor a ZooKeeper read) for it
            raise ConsumerShutdownError(f"{self._consumer_id}: the fetcher is shut down")
        if self._lookups is None:
            self._lookups = self._make(self._config, self._consumer_id, self._bootstrap())
        return self._lookups

    def _drop(self) -> None:
        lookups, self._lookups = self._lookups, None
        if lookups is not None:
            lookups.close()

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
    """Offset lookups (no group): where a partition starts, log ends."""

    def resolve(self, tps: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        """Where auto.offset.reset says to start: log start (smallest) or log end (largest)."""
        latest = self._config.auto_offset_reset != "smallest"
        with self._in_use() as lookups:
            return lookups.offsets(tps, latest=latest, timeout_ms=request_timeout_ms(self._config))

    def log_end(
        self, tps: Collection[TopicPartition], *, timeout_ms: int | None = None,
    ) -> dict[TopicPartition, int]:
        """The log ends (:func:`log_end_offsets`, or its confluent-kafka counterpart) within
        ``timeout_ms`` (default: the request timeout)."""
        if timeout_ms is None:
            timeout_ms = request_timeout_ms(self._config)
        with self._in_use() as lookups:
            return lookups.offsets(tps, latest=True, timeout_ms=timeout_ms)


class _MetadataClient(_SharedClient):
    """Leader lookups (the leader finder's)."""

    def leaders(self, topics: Collection[str]) -> dict[TopicPartition, int]:
        """Partition -> leader broker id (-1: none) of these topics; unknown topics left out."""
        with self._in_use() as lookups:
            return lookups.leaders(topics, request_timeout_ms(self._config))


def fmt_tps(tps: Iterable[TopicPartition]) -> str:
    by_topic: dict[str, list[int]] = {}
    for t, p in tps:
        by_topic.setdefault(t, []).append(p)
    return ", ".join(f"{t}{sorted(ps)}" for t, ps in sorted(by_topic.items())) or "nothing"
