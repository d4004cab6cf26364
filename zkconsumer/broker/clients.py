"""The one place zkconsumer builds Kafka clients.

kafka-python's KafkaConsumer and KafkaAdminClient, and confluent-kafka's Consumer, are made
here from a :class:`~zkconsumer.ConsumerConfig` (security, timeouts, client ids), so a
setting is honoured alike by the fetchers, the tools, Spark and the bridge. Also the shared
clients the fetchers use for offset and metadata lookups, and the operator tools'
``KafkaAdminClient`` (:func:`modern_admin`), with the broker address checks it makes first.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from zkconsumer._config import ConsumerConfig
from zkconsumer._errors import AdminError, ConfigError, MigrationError
from zkconsumer._tls import with_tls_deadline
from zkconsumer._types import TopicPartition

if TYPE_CHECKING:
    # Imported where a kafka-python client is made: a member fetching with confluent-kafka
    # never loads kafka-python (0.1 s of CPU in each member's and Spark reader's start).
    from kafka import KafkaConsumer

log = logging.getLogger("zkconsumer.fetcher")

#: At most this many records come back from one kafka-python poll (one fetch response per
#: partition is already bounded by fetch.message.max.bytes).
MAX_POLL_RECORDS = 1_000_000


class _DeliberateCloseFilter(logging.Filter):
    """Records kafka-python (3.0.12) logs at ERROR when a client closes cleanly, which every
    clean shutdown can do; not failures:

    - ``Metadata refresh: failed Cancelled`` (``kafka.cluster``): the client closed with a
      metadata request in flight (``Cancelled`` is what a connection closed without an error
      fails its requests with);
    - ``Error receiving network data closing socket`` with an ``AttributeError`` and a
      traceback (``kafka.net.transport``): a read woke up just after the close had set the
      transport's socket to None.

    Such records are demoted to DEBUG, and dropped unless the logger is enabled for DEBUG (its
    level was checked for ERROR before filters run, and handlers usually have no level of their
    own); every other record passes as it is.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if not (self._cancelled_refresh(record) or self._read_after_close(record)):
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)

    @staticmethod
    def _cancelled_refresh(record: logging.LogRecord) -> bool:
        return record.msg == "Metadata refresh: failed %s" and isinstance(record.args, tuple) \
            and bool(record.args) and type(record.args[0]).__name__ == "Cancelled"

    @staticmethod
    def _read_after_close(record: logging.LogRecord) -> bool:
        return record.msg == "%s: Error receiving network data closing socket" \
            and isinstance(record.args, tuple) and bool(record.args) \
            and getattr(record.args[0], "_closed", False) is True \
            and record.exc_info is not None and isinstance(record.exc_info[1], AttributeError)


_DELIBERATE_CLOSE = _DeliberateCloseFilter()
logging.getLogger("kafka.cluster").addFilter(_DELIBERATE_CLOSE)
logging.getLogger("kafka.net.transport").addFilter(_DELIBERATE_CLOSE)


# -- small helpers ---------------------------------------------------------------------------


def request_timeout_ms(config: ConsumerConfig) -> int:
    # kafka-python needs fetch_max_wait_ms < request_timeout_ms.
    return max(config.socket_timeout_ms, config.fetch_wait_max_ms + 1000)


def kafka_python_kwargs(config: ConsumerConfig, bootstrap: Sequence[str]) -> dict[str, Any]:
    """Keyword arguments of a fetching ``kafka.KafkaConsumer`` (assign mode, no group)."""
    request_timeout = request_timeout_ms(config)
    kwargs: dict[str, Any] = {
        "bootstrap_servers": list(bootstrap),
        "group_id": None,
        "enable_auto_commit": False,
        "auto_offset_reset": "none",
        "client_id": config.client_id,
        "fetch_max_wait_ms": config.fetch_wait_max_ms,
        "fetch_min_bytes": config.fetch_min_bytes,
        "max_partition_fetch_bytes": config.fetch_message_max_bytes,
        # One fetch response (the client's own buffer) holds at most this much record data:
        # one partition's worth, because some brokers ignore the per-partition limit
        # and a larger response is what the chunk queue's memory bound would not cover.
        "fetch_max_bytes": config.fetch_message_max_bytes,
        # <= 0: the OS default, as the original's BlockingChannel (kafka-python says None).
        "receive_buffer_bytes": config.socket_receive_buffer_bytes
        if config.socket_receive_buffer_bytes > 0 else None,
        "request_timeout_ms": request_timeout,
        "connections_max_idle_ms": max(540_000, request_timeout + 1000),
        "bootstrap_timeout_ms": request_timeout,
        "max_poll_records": MAX_POLL_RECORDS,
        "allow_auto_create_topics": False,
        "metrics_enabled": False,
        # The legacy consumer read every message up to the high watermark, transactional or
        # not (it had no isolation level); kafka-python's default, stated so that both
        # backends plainly agree (see confluent_conf).
        "isolation_level": "read_uncommitted",
    }
    kwargs.update(config.kafka_client_kwargs())
    return with_tls_deadline(kwargs)


# kafka-python keyword -> librdkafka property.
_CONFLUENT_SECURITY = {
    "client_id": "client.id",
    "security_protocol": "security.protocol",
    "ssl_cafile": "ssl.ca.location",
    "ssl_certfile": "ssl.certificate.location",
    "ssl_keyfile": "ssl.key.location",
    "ssl_password": "ssl.key.password",
    "sasl_mechanism": "sasl.mechanism",
    "sasl_plain_username": "sasl.username",
    "sasl_plain_password": "sasl.password",
    "sasl_kerberos_service_name": "sasl.kerberos.service.name",
}


def confluent_conf(
    config: ConsumerConfig, bootstrap: Sequence[str], consumer_id: str
) -> dict[str, Any]:
    """Configuration of a fetching ``confluent_kafka.Consumer`` (assign mode, never commits)."""
    fetch_max = max(4 * config.fetch_message_max_bytes, 1024)
    conf: dict[str, Any] = {
        "bootstrap.servers": ",".join(bootstrap),
        # Required by librdkafka's consumer; only ever used in assign mode, never committed to.
        "group.id": f"zkconsumer-fetch.{consumer_id}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "error",
        "enable.partition.eof": False,
        "fetch.wait.max.ms": config.fetch_wait_max_ms,
        "fetch.min.bytes": max(1, config.fetch_min_bytes),
        "max.partition.fetch.bytes": config.fetch_message_max_bytes,
        "fetch.max.bytes": fetch_max,
        # librdkafka refuses fetch.max.bytes below message.max.bytes (default 1000000); a
        # consumer sends no messages, so only its (small) requests are bounded by it.
        "message.max.bytes": min(1_000_000, fetch_max),
        # Some brokers answer more than fetch.max.bytes: accept what kafka-python does.
        "receive.message.max.bytes": max(fetch_max + 512, 100_000_000),
        "socket.receive.buffer.bytes": max(0, config.socket_receive_buffer_bytes),  # 0: OS
        "socket.timeout.ms": max(10, config.socket_timeout_ms),
        # librdkafka's prefetch queue, per fetcher thread: two fetch responses' worth, and at
        # least 16 MiB (less starves librdkafka on brokers that answer more than asked).
        "queued.max.messages.kbytes": max(16384, 2 * fetch_max // 1024),
        # When that queue is full, look again soon (librdkafka's default waits a second).
        "fetch.queue.backoff.ms": 10,
        # A batch failing its CRC is then an error (skipped, see ConfluentBackend), not
        # handed out as it is: both backends treat corrupt data alike.
        "check.crcs": True,
        # librdkafka's default is read_committed: it would stop at the last stable offset
        # (an open transaction's first message), delivering nothing after it until the
        # transaction ends, and never a message of an aborted one, where kafka-python (and
        # the legacy consumer, which had no isolation level) deliver every message up to the
        # high watermark. A hanging transaction would stall the partition for as long. Both
        # backends must deliver the same messages.
        "isolation.level": "read_uncommitted",
        # Said, not left to the default: the lookups' metadata requests name topics that may
        # be gone, and asking must never make one again (kafka_consumer says why).
        "allow.auto.create.topics": False,
        "logger": logging.getLogger("zkconsumer.fetcher.librdkafka"),
    }
    for key, value in config.kafka_client_kwargs().items():
        if value is None:
            continue
        if key == "ssl_check_hostname":
            conf["ssl.endpoint.identification.algorithm"] = "https" if value else "none"
            continue
        prop = _CONFLUENT_SECURITY.get(key)
        if prop is None:
            raise ConfigError(f"{key} is not supported with fetch.backend=confluent")
        conf[prop] = value
    return conf


# -- which library fetches --------------------------------------------------------------------

#: Why confluent-kafka could not be imported, once looked up (None: it can be).
_CONFLUENT_MISSING: list[str | None] = []
_FALLBACK_LOGGED = threading.Event()


def _confluent_missing() -> str | None:
    """Why ``confluent_kafka`` cannot be imported here, or None when it can (looked up once:
    an import that failed fails again)."""
    if not _CONFLUENT_MISSING:
        try:
            import confluent_kafka  # noqa: F401
        except ImportError as e:
            _CONFLUENT_MISSING.append(f"{type(e).__name__}: {e}")
        else:
            _CONFLUENT_MISSING.append(None)
    return _CONFLUENT_MISSING[0]


def fetch_library(config: ConsumerConfig) -> Literal["kafka-python", "confluent"]:
    """The client library that fetches for ``config``: ``fetch.backend``, whose default,
    ``confluent``, falls back to kafka-python where confluent-kafka cannot be imported (one INFO
    line per process says so). ``fetch.backend=confluent`` given explicitly is not replaced.

    :raises ConfigError: ``fetch.backend=confluent`` was given and confluent-kafka cannot be
        imported.
    """
    if config.fetch_backend == "kafka-python":
        return "kafka-python"
    why = _confluent_missing()
    if why is None:
        return "confluent"
    if config.is_given("fetch.backend"):
        raise ConfigError(
            f"fetch.backend=confluent needs confluent-kafka, which cannot be imported ({why}): "
            f"pip install confluent-kafka, or set fetch.backend=kafka-python")
    if not _FALLBACK_LOGGED.is_set():
        _FALLBACK_LOGGED.set()
        log.info("confluent-kafka cannot be imported (%s): fetching with kafka-python "
                 "(fetch.backend=kafka-python says so and hides this line)", why)
    return "kafka-python"


# -- the one way to build a kafka-python consumer --------------------------------------------


def kafka_consumer(**kwargs: Any) -> KafkaConsumer:
    """A kafka-python ``KafkaConsumer`` that never makes a topic by asking for it.

    kafka-python 3.0 does not pass ``allow_auto_create_topics`` on to the metadata its
    client keeps (every metadata request asked the broker to create the topics it names):
    on a broker with ``auto.create.topics.enable`` a consumer still fetching a deleted
    topic made it again at once, empty. Set where kafka-python reads it.
    """
    from kafka import KafkaConsumer

    kwargs.setdefault("allow_auto_create_topics", False)
    consumer = KafkaConsumer(**kwargs)
    cluster = getattr(consumer, "_cluster", None)
    config = getattr(cluster, "config", None)
    if isinstance(config, dict):
        config["allow_auto_create_topics"] = kwargs["allow_auto_create_topics"]
    return consumer


def kafka_admin(**kwargs: Any) -> Any:
    """A kafka-python ``KafkaAdminClient``, as given (the callers set their own timeouts and
    client ids; :func:`modern_admin` is the tools' one, with their checks first)."""
    from kafka import KafkaAdminClient

    return KafkaAdminClient(**kwargs)


def confluent_consumer(config: ConsumerConfig, bootstrap: Sequence[str], client_id: str) -> Any:
    """A confluent-kafka ``Consumer`` configured by :func:`confluent_conf`."""
    from confluent_kafka import Consumer

    return Consumer(confluent_conf(config, bootstrap, client_id))


def kafka_producer(**kwargs: Any) -> Any:
    """A kafka-python ``KafkaProducer`` (``zkconsumer compare``'s workload), as given."""
    from kafka import KafkaProducer

    return KafkaProducer(**kwargs)


def confluent_producer(conf: Mapping[str, Any]) -> Any:
    """A confluent-kafka ``Producer`` with ``conf`` as given (the development stack's bulk
    loads, :func:`zkconsumer.stack.testing.produce_bulk`)."""
    from confluent_kafka import Producer

    return Producer(dict(conf))


# -- message timestamps ----------------------------------------------------------------------


def message_timestamps(
    positions: Mapping[TopicPartition, int],
    *,
    bootstrap_servers: str | Sequence[str],
    timeout_ms: int = 10_000,
    **client_kwargs: Any,
) -> dict[TopicPartition, float]:
    """The timestamp (epoch seconds) of the message at each partition's offset: one fetch
    from every partition at once with a throwaway kafka-python consumer. A partition whose
    message does not come within ``timeout_ms`` (deleted by retention, past the log end, a
    broker down) is left out; so is a message without a timestamp (-1, message format v0).
    """
    from kafka import TopicPartition as KTP
    from kafka.errors import OffsetOutOfRangeError

    if not positions:
        return {}
    kwargs: dict[str, Any] = {
        "group_id": None, "enable_auto_commit": False, "auto_offset_reset": "none",
        "allow_auto_create_topics": False, "metrics_enabled": False,
        # One batch per partition is all it takes: keep each small.
        "max_partition_fetch_bytes": 64 * 1024, "fetch_max_wait_ms": 100,
    }
    kwargs.update(client_kwargs)
    consumer = kafka_consumer(bootstrap_servers=bootstrap_servers, **kwargs)
    try:
        wanted = {KTP(tp.topic, tp.partition): offset for tp, offset in positions.items()}
        consumer.assign(list(wanted))
        for ktp, offset in wanted.items():
            consumer.seek(ktp, offset)
        found: dict[TopicPartition, float] = {}
        done: set[Any] = set()  # answered, with a timestamp or without one, or out of range
        deadline = time.monotonic() + timeout_ms / 1000
        while len(done) < len(wanted) and time.monotonic() < deadline:
            try:
                polled = consumer.poll(timeout_ms=200)
            except OffsetOutOfRangeError as e:  # deleted by retention: no message to date
                gone = e.args[0] if e.args and isinstance(e.args[0], dict) else {}
                if not gone:
                    break
                consumer.pause(*gone)
                done.update(gone)
                continue
            for ktp, records in polled.items():
                record = next((r for r in records if r.offset >= wanted[ktp]), None)
                if record is None:
                    continue
                if record.timestamp is not None and record.timestamp >= 0:
                    found[TopicPartition(ktp.topic, ktp.partition)] = record.timestamp / 1000
                consumer.pause(ktp)  # got what it came for
                done.add(ktp)
        return found
    finally:
        consumer.close()


# -- the one way to compute a log end ---------------------------------------------------------


def log_end_offsets(
    tps: Iterable[tuple[str, int]],
    *,
    consumer: KafkaConsumer | None = None,
    bootstrap_servers: str | Sequence[str] | None = None,
    timeout_ms: int = 30_000,
    **client_kwargs: Any,
) -> dict[TopicPartition, int]:
    """The log end offset (the next offset to be written) of each partition:
    ListOffsets(latest), which a Kafka broker answers with the high watermark.

    ``consumer`` is a kafka-python ``KafkaConsumer`` with ``group_id=None``, whose
    assignment this leaves empty (as it always has, for the callers that pool one); without
    one, a temporary consumer is made from ``bootstrap_servers`` and ``client_kwargs``.
    Raises ``kafka.errors.KafkaTimeoutError`` when some partition gives no answer within
    ``timeout_ms``.
    """
    from kafka import TopicPartition as KTP

    wanted = sorted({TopicPartition(t, p) for t, p in tps})
    if not wanted:
        return {}
    own = consumer is None
    if consumer is None:
        if bootstrap_servers is None:
            raise ValueError("log_end_offsets needs a consumer or bootstrap_servers")
        kwargs: dict[str, Any] = {
            "group_id": None,
            "enable_auto_commit": False,
            "auto_offset_reset": "none",
            "allow_auto_create_topics": False,
            "metrics_enabled": False,
        }
        kwargs.update(client_kwargs)
        consumer = kafka_consumer(bootstrap_servers=bootstrap_servers, **kwargs)
    try:
        ends = consumer.end_offsets([KTP(t, p) for t, p in wanted], timeout_ms=timeout_ms)
        return {TopicPartition(k.topic, k.partition): int(v) for k, v in ends.items()}
    finally:
        if own:
            consumer.close()
        else:
            consumer.unsubscribe()


def confluent_list_offsets(
    consumer: Any, tps: Iterable[tuple[str, int]], *, latest: bool, timeout_ms: int,
) -> dict[TopicPartition, int]:
    """:func:`log_end_offsets` (``latest``), or the log starts, with a confluent-kafka
    ``Consumer`` made by :func:`confluent_consumer`: the same ListOffsets (latest, or
    earliest), one request per leader, answered at ``read_uncommitted`` (that consumer's
    isolation level), so with the high watermark as kafka-python's. For callers that fetch
    with librdkafka anyway: bootstrapping a kafka-python client costs more than the lookup.
    Raises ``confluent_kafka.KafkaException`` when a partition has no answer (unknown, no
    leader, or none within ``timeout_ms``).
    """
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, KafkaException
    from confluent_kafka import TopicPartition as CTP

    wanted = sorted({TopicPartition(t, p) for t, p in tps})
    if not wanted:
        return {}
    # The offsets_for_times "timestamps" -1 and -2 are ListOffsets' latest and earliest.
    which = OFFSET_END if latest else OFFSET_BEGINNING
    found = consumer.offsets_for_times([CTP(t, p, which) for t, p in wanted],
                                       timeout_ms / 1000.0)
    out: dict[TopicPartition, int] = {}
    for ctp in found:
        if ctp.error is not None:
            raise KafkaException(ctp.error)
        if ctp.offset < 0:
            raise KafkaException(f"no offset for {ctp.topic}:{ctp.partition}")
        out[TopicPartition(ctp.topic, ctp.partition)] = int(ctp.offset)
    return out


# -- the brokers' addresses, and the one way to build the tools' kafka-python admin client --


def parse_broker_list(servers: str) -> list[tuple[str, str, int]]:
    """``servers`` (``host:port,...``) as (entry, host, port); AdminError naming the first
    that is not ``host:port``. Checked before a command writes, so that a typo in
    ``--bootstrap-server`` cannot come after it."""
    out = []
    for entry in (e.strip() for e in servers.split(",") if e.strip()):
        host, sep, port = entry.rpartition(":")
        host = host.strip("[]")
        if not sep or not host or not port.isdigit():
            raise AdminError(f"bad broker address {entry!r} (expected host:port)")
        out.append((entry, host, int(port)))
    return out


def brokers_problem(servers: str, timeout_s: float = 5.0) -> str | None:
    """None when one of ``servers`` accepts a TCP connection within ``timeout_s``, else
    why each does not ("b:9092: Connection refused; c:9092: cannot resolve host 'c'")."""
    problems = []
    for entry, host, port in parse_broker_list(servers):
        try:
            socket.create_connection((host, port), timeout=timeout_s).close()
            return None
        except socket.gaierror:
            problems.append(f"{entry}: cannot resolve host {host!r}")
        except OSError as e:
            problems.append(f"{entry}: {e.strerror or e}")
    return "; ".join(problems) or "none given"


def modern_admin(
    bootstrap: str, bootstrap_timeout_ms: int = 10_000, kafka: Mapping[str, Any] | None = None,
    *, client_id: str = "zkconsumer-migrate",
) -> Any:
    """A ``KafkaAdminClient`` that tolerates brokers answering unknown ACL operation bits;
    ``kafka``: the brokers' security settings (``zkconsumer.zk.session.command_config``);
    ``client_id``: who the brokers see asking (the tools say ``zkconsumer-tools``).

    kafka-python 3 decodes DescribeGroups' ``authorized_operations`` into an enum and raises
    ValueError on bits it does not know (some brokers send them); they are not needed here.
    """
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    class _Admin(KafkaAdminClient):  # type: ignore[misc]
        def _process_acl_operations(self, obj: dict[str, Any]) -> dict[str, Any]:
            try:
                result: dict[str, Any] = super()._process_acl_operations(obj)
            except ValueError:
                obj["authorized_operations"] = None
                return obj
            return result

    # A refused or unresolvable broker is said at once, not after the bootstrap time-out.
    problem = brokers_problem(bootstrap, bootstrap_timeout_ms / 1000)
    if problem is not None:
        raise MigrationError(f"cannot connect to the brokers at {bootstrap}: {problem}")
    # kafka-python logs every failed bootstrap attempt at ERROR; one line says it all.
    kafka_log = logging.getLogger("kafka")
    previous = kafka_log.level
    kafka_log.setLevel(logging.CRITICAL)
    try:
        return _Admin(bootstrap_servers=bootstrap.split(","), request_timeout_ms=15000,
                      bootstrap_timeout_ms=bootstrap_timeout_ms,
                      **{**dict(kafka or {}), "client_id": client_id})
    except (KafkaError, ValueError, OSError) as e:
        raise MigrationError(
            f"cannot connect to the brokers at {bootstrap} within "
            f"{bootstrap_timeout_ms / 1000:g} s ({type(e).__name__})"
        ) from e
    finally:
        kafka_log.setLevel(previous)
