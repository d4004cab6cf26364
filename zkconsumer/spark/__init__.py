"""A PySpark 4 data source for Kafka topics consumed as a legacy ZooKeeper consumer group.

Spark removed the receiver-based ``KafkaUtils.createStream(ssc, zkQuorum, groupId, topics)``;
this source gives those pipelines a Structured Streaming home that still behaves as a member of
the ZooKeeper group::

    from zkconsumer.spark import register
    register(spark)                         # short name "zkconsumer"
    df = (spark.readStream.format("zkconsumer")
          .option("zookeeper.connect", "zk:2181").option("group.id", "pipeline")
          .option("topics", "orders,payments")      # or .option("whitelist", "orders.*")
          .load())      # columns: key, value, topic, partition, offset, timestamp

How it works (the README's Spark section has the user's view and the options table):

- **Driver** (the Python process Spark runs the stream reader in, for the query's lifetime):
  a :class:`~zkconsumer.ZookeeperConsumerConnector` joins the group with a fetch side that does
  not fetch (:class:`_Membership`): it only records which partitions the rebalance gave
  this member. The registration and owner znodes are the legacy ones, so Spark queries and
  legacy consumers share a group's partitions without overlap. Each micro-batch covers the
  partitions this member owns when the batch is planned, as offsets ``{"topic": {"0": 42}}`` in
  Spark's checkpoint; once a batch is done its end offsets go to ``/consumers/G/offsets/T/P``
  (only for partitions still owned), so the legacy lag tools show the pipeline's progress.
- **Executors** read one Kafka partition's offset range per Spark task in assign mode, never
  through ZooKeeper, with confluent-kafka when it is installed (about 3.5 times kafka-python's
  rate in ``tools/bench spark``), else kafka-python (each executor decides, unless
  ``fetch.backend`` is given), and hand Spark Arrow record batches. A range that runs past
  the log end (the log truncated, or the topic recreated, after it was planned) is lost data
  (``failOnDataLoss``): the task fails, or ends its range at the log end, once the broker
  answers its position out of range or the log end has stayed at or below it for
  :data:`LOG_END_CONFIRM_S` (a new leader's high watermark may lag that long). Each Python
  worker keeps a few idle clients for its next tasks (:data:`MAX_IDLE_CLIENTS`).
- **Batch** reads (``spark.read``) take ``startingOffsets``/``endingOffsets``.

Ownership and the checkpoint. A partition's position in the checkpoint is authoritative while
this member keeps owning it. A partition that is newly owned, i.e. absent from the batch's start
offsets, is first *positioned* (its end offset is the group's committed offset, or where
there is none ``auto.offset.reset`` in the query's first batch and the earliest offset after
it, as Spark's Kafka source does for partitions added later; no rows for it in that batch)
and read from the next batch on. The
query's first batch is such a batch for every partition it owns: ``initialOffset()`` is the
constant :data:`INITIAL_OFFSET` (no partition), and the first plan positions the owned
partitions per ``startingOffsets`` and writes them to the group (so a rewind is the group's
too, and survives a rebalance). Why: Spark does not log the first batch's start, and replays
that batch after a restart from ``initialOffset()`` asked again, of a new process that may own
other partitions by then; a first batch without rows replays the same whoever answers. After a
rebalance (and after a restart), a partition found in the start offsets is checked against the
group's committed offset: when another member committed beyond our position meanwhile, the
partition is dropped for one batch and then positioned again at the group's offset, so what the
other member consumed is not read twice. A partition lost to another member is dropped from the
next batch.

The hand-over (:class:`_Membership`): a rebalance releases this member's partitions only once
no batch is being planned and the last batch with rows is known to be done (Spark says so
only by planning the next one; a batch of positions only is not waited for), after committing
where it ended, so the next owner starts exactly there; it waits at most
``zookeeper.session.timeout.ms`` (with a longer trigger interval, or a slower batch, the next
owner reads the last batch's rows again: the legacy consumer's at-least-once). Planning waits
up to a session timeout plus ``rebalance.backoff.ms`` for a rebalance under way; while one
still is, or while the member's ZooKeeper connection is down (ownership is then unknown), or
when one completes during the planning, there is no batch that trigger; a
``Trigger.AvailableNow`` run waits for these to end instead, since no batch would end it.
Offsets are read and written on the connector's session, written only while the session that
owns the partitions lives. Commits of where a batch ended are best-effort: the checkpoint
holds the positions, and a commit missed in an outage is made by the next batch; new
positions that differ from the group's are written before their batch is planned (no batch
while they cannot be). Planning and commits await each ZooKeeper answer at most a session
timeout, so an outage never blocks them for its length (joining the group, at the start,
does wait for ZooKeeper). Across restarts of one query nothing is lost or read twice
(Spark's checkpoint); a batch replayed after a crash is replayed as planned, whoever owns its
partitions by then.
"""

from __future__ import annotations

import atexit
import bisect
import difflib
import importlib.util
import json
import logging
import os
import re
import signal
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING, Any, Literal

from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss, NoNodeError, SessionExpiredError
from kazoo.handlers.threading import KazooTimeoutError
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from zkconsumer._config import ConsumerConfig
from zkconsumer._config_keys import CONFIG_KEYS
from zkconsumer._errors import (
    CommitFencedError,
    ConfigError,
    ZkConsumerError,
    ZkConsumerSourceError,
    ZkDataError,
)
from zkconsumer._filters import Blacklist, TopicFilter, Whitelist
from zkconsumer._types import TopicPartition
from zkconsumer.broker.clients import (
    confluent_conf,
    kafka_consumer,
    kafka_python_kwargs,
    log_end_offsets,
)
from zkconsumer.consumer.connector import ConsumerRebalanceListener, ZookeeperConsumerConnector
from zkconsumer.consumer.offsets import ZkOffsetStore
from zkconsumer.zk import paths as zp
from zkconsumer.zk.read import broker_addresses, topic_partitions
from zkconsumer.zk.session import kazoo_security_kwargs, start_and_check_login

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

    from zkconsumer.consumer.connector import ZookeeperConsumerConnector
    from zkconsumer.consumer.partition import PartitionTopicInfo

__all__ = [
    "SCHEMA",
    "OffsetRange",
    "SourceOptions",
    "ZkConsumerDataSource",
    "ZkConsumerSourceError",
    "parse_options",
    "register",
]

log = logging.getLogger("zkconsumer.spark")

#: A Trigger.AvailableNow run waits this many planning waits for a rebalance (or a ZooKeeper
#: outage) to end before it fails: an empty batch would end it as if it had read everything.
AVAILABLE_NOW_WAITS = 3
#: When the driver plans, a log end found below a partition's position (or a batch read's
#: endingOffsets) is looked up again this often, this far apart, before it counts as lost data.
LOG_END_RETRIES = 3
LOG_END_RETRY_S = 1.0
#: An executor ends a range at its position as past the log end (lost data) only once the log
#: end has stayed at or below the position this long, looked up at most every LOG_END_RETRY_S
#: meanwhile. After a leader change the new leader's high watermark can stay below the old
#: one's until its in-sync followers have caught up: for up to replica.lag.time.max.ms, whose
#: default is 30 s. Offsets that exist must not be skipped (or a task failed) in that window.
LOG_END_CONFIRM_S = 30.0

#: The rows: what Spark's own Kafka source has, less the headers and timestamp type.
SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
    ]
)

#: Options of the source itself (Spark lower-cases option names); every other option is a
#: legacy consumer key, validated by ConsumerConfig.
SOURCE_KEYS = {
    "topics": "topics",
    "whitelist": "whitelist",
    "blacklist": "blacklist",
    "startingoffsets": "startingOffsets",
    "endingoffsets": "endingOffsets",
    "maxoffsetspertrigger": "maxOffsetsPerTrigger",
    "kafka.bootstrap.servers": "kafka.bootstrap.servers",
    "failondataloss": "failOnDataLoss",
    "streams": "streams",
}
#: Source options of one kind of read only: given to the other kind, they fail it.
STREAM_ONLY = ("maxOffsetsPerTrigger", "streams")
BATCH_ONLY = ("endingOffsets",)
#: Legacy consumer keys that a createStream's kafkaParams may carry but that change nothing
#: in the source: key -> why. Given, they are accepted (and validated) with a warning, once
#: per process and key.
_NO_EFFECT = {
    "auto.commit.enable": "the source commits the group's offsets once per micro-batch",
    "auto.commit.interval.ms": "the source commits the group's offsets once per micro-batch",
    "offsets.commit.max.retries": "a commit the source misses is made by the next batch",
    "consumer.timeout.ms": "the source iterates no message stream",
    "queued.max.message.chunks": "the source queues no chunks: each task reads its range",
    "num.consumer.fetchers": "each Spark task reads one partition with its own client",
    "refresh.leader.backoff.ms": "the executors' clients find the leaders themselves",
    "dual.commit.enabled": "the source keeps the group's offsets in ZooKeeper only",
    "offsets.channel.backoff.ms": "the source keeps the group's offsets in ZooKeeper only",
    "offsets.channel.socket.timeout.ms": "the source keeps the group's offsets in ZooKeeper only",
    "zookeeper.sync.time.ms": "zkconsumer does not use it",
}
#: ... and in batch reads, which join no group and commit nothing.
_NO_EFFECT_IN_BATCH = {
    **{key: "a batch read joins no group"
       for key in ("consumer.id", "partition.assignment.strategy", "rebalance.max.retries",
                   "rebalance.backoff.ms", "metrics.port", "metrics.address")},
    **{key: "a batch read commits nothing"
       for key in ("auto.commit.enable", "auto.commit.interval.ms",
                   "offsets.commit.max.retries")},
}
#: Options of Spark's own Kafka source ("kafka" format), lower-cased, that this source has not:
#: what to give instead. Told as such, not as a misspelling of the nearest option.
_SPARK_KAFKA_OPTIONS = {
    "subscribe": "name the topics with the topics option",
    "subscribepattern": "give the regex as the whitelist option",
    "assign": "a consumer group's members own partitions: name the topics with topics",
    **dict.fromkeys(
        ("startingoffsetsbytimestamp", "endingoffsetsbytimestamp", "startingtimestamp",
         "endingtimestamp", "startingoffsetsbytimestampstrategy"),
        "offsets by timestamp are not supported: give offsets (startingOffsets, endingOffsets)"),
    **dict.fromkeys(
        ("minpartitions", "maxrecordsperpartition", "mintriggerdelay", "maxtriggerdelay",
         "minoffsetspertrigger", "includeheaders", "groupidprefix",
         "kafkaconsumer.polltimeoutms", "fetchoffset.numretries",
         "fetchoffset.retryintervalms"),
        "an option of Spark's Kafka source this source does not have"),
}
_LEGACY_KEYS = frozenset(k.name for k in CONFIG_KEYS)
#: (kind of read, key) pairs already warned about in this process.
_WARNED: set[tuple[str, str]] = set()

#: Used to validate batch reads that give no group.id (they never touch the group's znodes).
_BATCH_GROUP = "zkconsumer-spark-batch"
#: Rows per Arrow record batch handed to Spark.
ARROW_BATCH_ROWS = 65_536
#: An executor fails its task when an offset range makes no progress for this long (not
#: counting the time its log end is known to be at or below its position: see _LogEndCheck).
READ_STALL_S = 60.0
#: In JSON offset maps, as in Spark's Kafka source.
EARLIEST, LATEST = -2, -1
#: What ``initialOffset()`` answers: no partition (the key is no legal topic name, so it is
#: never an end offset the source plans; it decodes to no positions).
INITIAL_OFFSET: dict[str, dict[str, int]] = {"(query start)": {}}

OffsetSpec = Literal["earliest", "latest", "committed"] | dict[str, dict[int, int]]


def _fail(message: str) -> ZkConsumerSourceError:
    return ZkConsumerSourceError(f"zkconsumer source: {message}")


# -- options ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceOptions:
    """The parsed options; picklable (it travels inside the data source and the readers)."""

    #: Legacy consumer keys for :class:`ConsumerConfig` (``zookeeper.connect``, ``group.id``...).
    props: tuple[tuple[str, str], ...]
    group_given: bool
    topics: tuple[str, ...]
    #: ``("whitelist" | "blacklist", raw regex)`` for a wildcard subscription.
    topic_filter: tuple[str, str] | None
    starting: OffsetSpec | None
    ending: OffsetSpec | None
    max_offsets_per_trigger: int | None
    bootstrap: tuple[str, ...] | None
    fail_on_data_loss: bool
    streams: int
    #: The options given: the source's by their names (``startingOffsets``), legacy keys as
    #: they are (``auto.commit.enable`` only when not ``false``, the value the source uses).
    given: frozenset[str] = frozenset()

    def config(self) -> ConsumerConfig:
        return ConsumerConfig(dict(self.props))

    def make_filter(self) -> TopicFilter | None:
        if self.topic_filter is None:
            return None
        kind, regex = self.topic_filter
        return Whitelist(regex) if kind == "whitelist" else Blacklist(regex)

    def subscribes(self, topic: str, exclude_internal: bool = True) -> bool:
        flt = self.make_filter()
        if flt is None:
            return topic in self.topics
        return flt.is_topic_allowed(topic, exclude_internal)


def _parse_offsets(name: str, raw: str) -> OffsetSpec:
    text = raw.strip()
    if text.lower() in ("earliest", "latest", "committed"):
        return text.lower()  # type: ignore[return-value]
    example = 'earliest, latest, committed, or a JSON map like {"topic": {"0": 42}}'
    try:
        obj = json.loads(text)
    except ValueError as e:
        raise _fail(f"{name} is malformed JSON ({e}): {raw!r}; expected {example}") from None
    if not isinstance(obj, dict) or not obj:
        raise _fail(f"{name} must be {example}; got {raw!r}")
    out: dict[str, dict[int, int]] = {}
    for topic, parts in obj.items():
        if not isinstance(parts, dict) or not parts:
            raise _fail(f"{name}: topic {topic!r} must map partition numbers to offsets, "
                        f"got {parts!r}")
        try:
            zp.topic_path(topic)
        except ValueError as e:
            raise _fail(f"{name}: {e}") from None
        out[topic] = {}
        for key, offset in parts.items():
            partition = zp.parse_id(key) if isinstance(key, str) else None
            if partition is None:
                raise _fail(f"{name}: partition {key!r} of topic {topic!r} is not a number")
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < EARLIEST:
                raise _fail(
                    f"{name}: offset {offset!r} of {topic}:{key} must be an integer >= 0, "
                    f"or -2 (earliest) or -1 (latest)"
                )
            out[topic][partition] = offset
    return out


def _parse_int(name: str, raw: str, minimum: int) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        raise _fail(f"{name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise _fail(f"{name} must be >= {minimum}, got {value}")
    return value


def _parse_bool(name: str, raw: str) -> bool:
    text = raw.strip().lower()
    if text not in ("true", "false"):
        raise _fail(f"{name} must be true or false, got {raw!r}")
    return text == "true"


def parse_options(options: Mapping[str, str]) -> SourceOptions:
    """Validate the options without any I/O; :class:`ZkConsumerSourceError` on a problem.

    The subscription is exactly one of ``topics`` (comma-separated), ``whitelist`` or
    ``blacklist`` (legacy regexes). Every option that is not a source option is a legacy
    consumer key, validated by :class:`ConsumerConfig` (unknown keys are errors).
    """
    opts = {str(k).strip().lower(): str(v) for k, v in options.items()}
    if "path" in opts:
        raise _fail("load(path) is not supported: name the topics with .option('topics', ...)")
    source = {k: opts.pop(k) for k in list(opts) if k in SOURCE_KEYS}
    spark_kafka = [f"{k}: {_SPARK_KAFKA_OPTIONS[k]}" for k in opts if k in _SPARK_KAFKA_OPTIONS]
    if spark_kafka:
        raise _fail("options of Spark's Kafka source: " + "; ".join(spark_kafka))
    misspelt = _misspelt_source_options(opts)
    if misspelt:  # first: a misspelt topics would be reported as no subscription
        raise _fail("; ".join(misspelt))

    given = [SOURCE_KEYS[k] for k in ("topics", "whitelist", "blacklist") if k in source]
    if len(given) != 1:
        what = " and ".join(given) if given else "none"
        raise _fail(f"give exactly one of topics, whitelist or blacklist (got {what})")
    topics: tuple[str, ...] = ()
    topic_filter: tuple[str, str] | None = None
    if "topics" in source:
        names = [t.strip() for t in source["topics"].split(",")]
        if not all(names):
            raise _fail(f"topics must be a comma-separated list of names, got "
                        f"{source['topics']!r}")
        for t in names:
            try:
                zp.topic_path(t)
            except ValueError as e:
                raise _fail(f"topics: {e}") from None
        topics = tuple(dict.fromkeys(names))
    else:
        kind = "whitelist" if "whitelist" in source else "blacklist"
        topic_filter = (kind, source[kind])
        try:
            (Whitelist if kind == "whitelist" else Blacklist)(source[kind])
        except ConfigError as e:
            raise _fail(f"{kind}: {e}") from None

    if "zookeeper.connect" not in opts:
        raise _fail("the zookeeper.connect option is required (host:port[,host:port][/chroot])")
    group_given = "group.id" in opts
    props = dict(opts)
    props.setdefault("group.id", _BATCH_GROUP)
    storage = props.get("offsets.storage", "zookeeper").strip().lower()
    if storage != "zookeeper":
        raise _fail("offsets.storage must be zookeeper: the source commits the group's offsets "
                    "to ZooKeeper, where the legacy tools read them")
    # Offsets are committed once per micro-batch, never on a timer.
    props["auto.commit.enable"] = "false"
    try:
        config = ConsumerConfig(props)
    except ConfigError as e:
        raise _fail(str(e).replace("\n", " ")) from None

    bootstrap: tuple[str, ...] | None = None
    raw_bs = source.get("kafka.bootstrap.servers") or config.bootstrap_servers
    if raw_bs:
        bootstrap = tuple(h.strip() for h in raw_bs.split(",") if h.strip())
        if not bootstrap or not all(":" in h for h in bootstrap):
            raise _fail(f"kafka.bootstrap.servers must be host:port[,host:port], got {raw_bs!r}")

    starting = (_parse_offsets("startingOffsets", source["startingoffsets"])
                if "startingoffsets" in source else None)
    ending = (_parse_offsets("endingOffsets", source["endingoffsets"])
              if "endingoffsets" in source else None)
    for name, spec in (("startingOffsets", starting), ("endingOffsets", ending)):
        if spec == "committed" and not group_given:
            raise _fail(f"{name}=committed needs the group.id option")
    max_per_trigger = (_parse_int("maxOffsetsPerTrigger", source["maxoffsetspertrigger"], 1)
                       if "maxoffsetspertrigger" in source else None)
    fail_on_data_loss = (_parse_bool("failOnDataLoss", source["failondataloss"])
                         if "failondataloss" in source else True)
    streams = _parse_int("streams", source["streams"], 1) if "streams" in source else 1
    named = {SOURCE_KEYS[k] for k in source}
    named.update(k for k in opts if not (k == "auto.commit.enable"
                                         and opts[k].strip().lower() == "false"))
    return SourceOptions(
        props=tuple(sorted(props.items())), group_given=group_given, topics=topics,
        topic_filter=topic_filter, starting=starting, ending=ending,
        max_offsets_per_trigger=max_per_trigger, bootstrap=bootstrap,
        fail_on_data_loss=fail_on_data_loss, streams=streams, given=frozenset(named),
    )


def _misspelt_source_options(opts: Iterable[str]) -> list[str]:
    """A message for each unknown key closer to a source option than to a legacy key.

    The other unknown keys are left to :class:`ConsumerConfig`, whose message suggests the
    legacy key they resemble.
    """
    candidates = [*SOURCE_KEYS, *sorted(_LEGACY_KEYS)]
    out = []
    for key in opts:
        if key in _LEGACY_KEYS or key in SOURCE_KEYS:
            continue
        match = difflib.get_close_matches(key, candidates, n=1, cutoff=0.6)
        if match and match[0] in SOURCE_KEYS:
            out.append(f"unknown configuration key {key!r} (did you mean "
                       f"{SOURCE_KEYS[match[0]]!r}?)")
    return out


def _check_kind(opts: SourceOptions, kind: str, wrong: Sequence[str], other: str,
                api: str) -> None:
    """Fail on the options of the other kind of read; warn about keys without effect."""
    misplaced = [name for name in wrong if name in opts.given]
    if misplaced:
        verb = "applies" if len(misplaced) == 1 else "apply"
        raise _fail(f"{' and '.join(misplaced)} {verb} to {other} only ({api}), not to "
                    f"{kind}")
    no_effect = {**_NO_EFFECT, **(_NO_EFFECT_IN_BATCH if kind == "batch reads" else {})}
    for key in sorted(opts.given):
        why = no_effect.get(key)
        if why is not None and (kind, key) not in _WARNED:
            _WARNED.add((kind, key))
            log.warning("zkconsumer source: the %s option has no effect in %s (%s)", key,
                        kind, why)


def _check_batch_options(opts: SourceOptions) -> None:
    _check_kind(opts, "batch reads", STREAM_ONLY, "streaming queries", "spark.readStream")


def _check_stream_options(opts: SourceOptions) -> None:
    if not opts.group_given:
        raise _fail("a streaming query joins a consumer group: the group.id option is required")
    _check_kind(opts, "streams", BATCH_ONLY, "batch reads", "spark.read")


# -- ZooKeeper and brokers ---------------------------------------------------------------------


def _zk_client(config: ConsumerConfig, long_lived: bool = False) -> KazooClient:
    """A started client; a ``long_lived`` one (the query's) reconnects for ever after a loss."""
    zk = KazooClient(
        hosts=config.zookeeper_connect,
        timeout=config.zookeeper_session_timeout_ms / 1000.0,
        **kazoo_security_kwargs(config),
        connection_retry={"max_tries": -1 if long_lived else 3, "delay": 0.1,
                          "max_delay": 1.0},
        command_retry={"max_tries": 3, "delay": 0.1, "max_delay": 1.0},
    )
    try:
        start_and_check_login(zk, config)
    except Exception as e:
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


# -- what executors read ----------------------------------------------------------------------


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """One Spark task: offsets ``[start, end)`` of one Kafka partition."""

    topic: str
    partition: int
    start: int
    end: int
    bootstrap: tuple[str, ...]
    props: tuple[tuple[str, str], ...]
    fail_on_data_loss: bool

    def __repr__(self) -> str:
        return f"OffsetRange({self.topic}:{self.partition} [{self.start}, {self.end}))"


_CLIENTS_LOCK = threading.Lock()
#: Executor-side clients not in use, by (backend, bootstrap, props), the least recently used
#: first: kept for the next tasks the Python worker runs (Spark reuses workers). A task takes
#: its client out while it reads, so a client in use is never closed by the bound below.
#: Guarded by ``_CLIENTS_LOCK``.
_CLIENTS: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
#: At most this many idle clients per Python worker; the least recently used one beyond is
#: closed. Each holds sockets (and librdkafka's threads): a long-lived worker running reads
#: with many group.ids or brokers would otherwise pile them up.
MAX_IDLE_CLIENTS = 4


def _arrow_schema() -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    # Exactly what Spark checks record batches against.
    return to_arrow_schema(SCHEMA, timezone="UTC")


def _to_batch(
    schema: pa.Schema, rng: OffsetRange, keys: list[Any], values: list[Any],
    offsets: list[int], timestamps: list[int | None],
) -> pa.RecordBatch:
    import pyarrow as pa

    n = len(offsets)
    return pa.RecordBatch.from_arrays(
        [
            pa.array(keys, pa.binary()),
            pa.array(values, pa.binary()),
            pa.array([rng.topic] * n, pa.string()),
            pa.array([rng.partition] * n, pa.int32()),
            pa.array(offsets, pa.int64()),
            pa.array(timestamps, pa.timestamp("us", tz="UTC")),
        ],
        schema=schema,
    )


def _corrupt(rng: OffsetRange, at: int, detail: object) -> ZkConsumerError:
    # Never skipped here: a batch's rows would silently lack the message. The broker keeps
    # the bytes as they are, so a retried task fails the same way.
    return ZkConsumerError(
        f"zkconsumer source: corrupt data in {rng.topic}:{rng.partition} at offset {at} "
        f"(a record batch failed its CRC check): {detail}"
    )


def _data_loss(rng: OffsetRange, at: int, earliest: int | None) -> ZkConsumerError:
    where = f"earliest available is {earliest}" if earliest is not None else "out of range"
    hint = "; set failOnDataLoss=false to skip lost data" if rng.fail_on_data_loss else ""
    return ZkConsumerError(
        f"zkconsumer source: offsets [{at}, {rng.end}) of {rng.topic}:{rng.partition} are no "
        f"longer available ({where}){hint}"
    )


def _past_log_end(rng: OffsetRange, at: int, log_end: int, *, out_of_range: bool = False,
                  how: str | None = None) -> ZkConsumerError | None:
    """Offsets ``[at, end)`` of the range are beyond the partition's log end: lost data.

    Known either from the broker (``out_of_range``: it answered OFFSET_OUT_OF_RANGE for
    ``at``, whose log start is not above it, or ``how`` it told), or because the log end
    stayed at or below ``at`` for LOG_END_CONFIRM_S (:class:`_LogEndCheck`). The error to raise with
    failOnDataLoss; else None, after a warning: the range ends at ``at`` (the next batch's plan
    goes on from the log end).
    """
    where = f"{rng.topic}:{rng.partition}"
    cause = "the log was truncated or the topic recreated after the range was planned"
    answered = how or f"the broker answered offset {at} out of range"
    if not out_of_range:
        message = (f"offsets [{at}, {rng.end}) of {where} are beyond its log end {log_end}, "
                   f"where it stayed for {LOG_END_CONFIRM_S:g} s ({cause}, or a new "
                   "leader's high watermark lagged longer than that)")
    elif log_end <= at:
        message = (f"offsets [{at}, {rng.end}) of {where} are beyond its log end {log_end} "
                   f"({answered}: {cause})")
    else:  # the log grew again between the broker's answer and the lookup of its end
        message = (f"offsets [{at}, {rng.end}) of {where} were beyond its log end ({answered}: "
                   f"{cause}; its log end is {log_end} now)")
    if rng.fail_on_data_loss:
        return ZkConsumerError(f"zkconsumer source: {message}; set failOnDataLoss=false to "
                               "go on from the log end")
    log.warning("zkconsumer source: %s; the range ends at %d", message, at)
    return None


class _LogEndCheck:
    """Whether a task's position has reached the log end before its range's end.

    The hint is a fetch answer without records whose high watermark is at or below the
    position. The log end is then looked up afresh (a fetch's high watermark, as the plan
    does) at most every LOG_END_RETRY_S, with one client kept while it stays there, and the
    range counts as past the log end only once it has stayed at or below the position for
    LOG_END_CONFIRM_S. So a stale high watermark never ends a range early: neither a new
    leader's, which lags the old one's for up to replica.lag.time.max.ms (30 s by default),
    nor a reused confluent client's cached one, the last task's until this task's first fetch
    answer (the reader takes no hint from it before). Progress, or a log end found above the
    position (by a lookup, or a fetch answer's high watermark), starts the window again;
    from a log end found above, no more lookups are made until the position passes it or a
    fetch answer's high watermark falls below it (the log truncated since).

    While the log end is known to be at or below the position, the no-progress guard
    (READ_STALL_S) waits for the window (:meth:`stalled`). It is what ends a task whose log end
    is above its position but whose records do not arrive, or whose log end is unknown (a
    lookup that fails).
    """

    def __init__(self, rng: OffsetRange, config: ConsumerConfig) -> None:
        self.rng = rng
        self.config = config
        self.known_end = -1  # a log end found beyond an earlier position
        self.next_lookup = 0.0
        #: Since when lookups have found the log end at or below the position (None: not).
        self.low_since: float | None = None
        #: When the log end was last known to be at or below the position.
        self.low_until = 0.0
        self._position: int | None = None
        self._lookup: _OffsetLookup | None = None

    def log_end(self, position: int, high_watermark: int | None) -> int | None:
        """The log end once it has stayed at or below ``position`` for LOG_END_CONFIRM_S, else
        None. ``high_watermark``: that of this task's last fetch answer (None: not known)."""
        if position != self._position:  # progress: what was found is about another position
            self._position = position
            self._reset()
        if high_watermark is not None and high_watermark > position:
            self.known_end = max(self.known_end, high_watermark)  # the leader says: above
            self._reset()
            return None
        if high_watermark is not None and 0 <= high_watermark < self.known_end:
            # The leader says lower than a log end found before: truncated since (an unclean
            # leader election), or a new leader's lagging high watermark. Looked up again.
            self.known_end = -1
        if self.low_since is None and (high_watermark is None or high_watermark < 0
                                       or position < self.known_end):
            return None
        started = time.monotonic()
        if started < self.next_lookup:
            if self.low_since is not None:
                self.low_until = started
            return None
        self.next_lookup = started + LOG_END_RETRY_S
        tp = TopicPartition(self.rng.topic, self.rng.partition)
        if self._lookup is None:
            self._lookup = _OffsetLookup(self.config, self.rng.bootstrap)
        try:
            end = self._lookup.latest([tp])[tp]
        except Exception as e:  # noqa: BLE001 - unknown: the no-progress guard decides
            log.warning("%s:%d: looking up the log end failed: %r", tp.topic, tp.partition, e)
            self._reset()
            self.next_lookup = time.monotonic() + 5 * LOG_END_RETRY_S
            return None
        if end > position:
            self.known_end = end
            self._reset()
            return None
        self.low_until = time.monotonic()
        if self.low_since is None:
            self.low_since = self.low_until
        return end if started - self.low_since >= LOG_END_CONFIRM_S else None

    def range_ends(self, position: int, high_watermark: int | None,
                   last_progress: float) -> bool:
        """After a fetch answer without records short of the range's end: True when the
        range ends at ``position`` (past the log end, failOnDataLoss=false: warned). Raises
        the data-loss error (failOnDataLoss) or the no-progress one (:meth:`stalled`)."""
        log_end = self.log_end(position, high_watermark)
        if log_end is not None:
            error = _past_log_end(self.rng, position, log_end)
            if error is not None:
                raise error
            return True
        if self.stalled(last_progress):
            raise ZkConsumerError(
                f"zkconsumer source: no progress reading {self.rng.topic}:"
                f"{self.rng.partition} at offset {position} (range ends at {self.rng.end}) "
                f"for {READ_STALL_S:.0f} s"
            )
        return False

    def stalled(self, last_progress: float) -> bool:
        """Whether the no-progress guard ends the task: no progress for READ_STALL_S, not
        counting the time the log end was known to be at or below the position."""
        return (self.low_since is None
                and time.monotonic() - max(last_progress, self.low_until) > READ_STALL_S)

    def _reset(self) -> None:
        self.low_since = None
        self.close()

    def close(self) -> None:
        lookup, self._lookup = self._lookup, None
        if lookup is not None:
            lookup.close()


def read_range(rng: OffsetRange) -> Iterator[pa.RecordBatch]:
    """The records of ``rng`` as Arrow record batches (executor side)."""
    if rng.end <= rng.start:
        return iter(())
    props = dict(rng.props)
    if "fetch.backend" not in props and importlib.util.find_spec("confluent_kafka") is not None:
        # Not given: librdkafka when this executor has it (about 3.5x kafka-python's rate).
        # Decided here, not in the driver: executors may lack what the driver has.
        props["fetch.backend"] = "confluent"
    config = ConsumerConfig(props)
    if config.fetch_backend == "confluent":
        return _read_confluent(rng, config)
    return _read_kafka_python(rng, config)


def _take_client(key: tuple[Any, ...], make: Any) -> Any:
    """An idle client for ``key``, taken out of the pool while the task uses it, or a new one."""
    with _CLIENTS_LOCK:
        client = _CLIENTS.pop(key, None)
    return make() if client is None else client


def _return_client(key: tuple[Any, ...], client: Any) -> None:
    """Keep ``client`` for the next task, closing the least recently used beyond the bound."""
    with _CLIENTS_LOCK:
        evicted = []
        previous = _CLIENTS.pop(key, None)  # one returned meanwhile (a concurrent task's)
        if previous is not None and previous is not client:
            evicted.append(previous)
        _CLIENTS[key] = client
        while len(_CLIENTS) > MAX_IDLE_CLIENTS:
            evicted.append(_CLIENTS.popitem(last=False)[1])
    for old in evicted:
        _close_client(old)


def _close_client(client: Any) -> None:
    try:
        client.close()
    except Exception:  # noqa: BLE001 - nothing left to do with it
        log.debug("closing a client failed", exc_info=True)


def _read_kafka_python(rng: OffsetRange, config: ConsumerConfig) -> Iterator[pa.RecordBatch]:
    from kafka import TopicPartition as KTP
    from kafka.errors import CorruptRecordError, LogTruncationError, OffsetOutOfRangeError


    key = ("kafka-python", rng.bootstrap, rng.props)

    def make() -> Any:
        # Only for a new client: with TLS, the settings load certificate files.
        kwargs = kafka_python_kwargs(config, rng.bootstrap)
        kwargs["max_poll_records"] = ARROW_BATCH_ROWS
        return kafka_consumer(**kwargs)

    consumer = _take_client(key, make)
    schema = _arrow_schema()
    ktp = KTP(rng.topic, rng.partition)
    ends = _LogEndCheck(rng, config)
    ok = False
    try:
        consumer.assign([ktp])
        consumer.seek(ktp, rng.start)
        position = rng.start
        last_progress = time.monotonic()
        keys: list[Any] = []
        values: list[Any] = []
        offsets: list[int] = []
        stamps: list[int | None] = []
        while position < rng.end:
            try:
                # No more than the range needs: kafka-python parses a response's batches as
                # it hands records out, so a corrupt batch past the range is never reached.
                fetched = consumer.poll(
                    timeout_ms=500, max_records=min(ARROW_BATCH_ROWS, rng.end - position)
                )
            except OffsetOutOfRangeError:
                earliest = int(consumer.beginning_offsets([ktp])[ktp])
                if earliest <= position:
                    # Out of range, not below the log start: beyond the log end.
                    error = _past_log_end(rng, position, int(consumer.end_offsets([ktp])[ktp]),
                                          out_of_range=True)
                    if error is not None:
                        raise error from None
                    break
                if rng.fail_on_data_loss:
                    raise _data_loss(rng, position, earliest) from None
                log.warning("%s:%s: offsets [%d, %d) were lost; going on from %d",
                            rng.topic, rng.partition, position, earliest, earliest)
                position = earliest
                consumer.seek(ktp, position)
                continue
            except LogTruncationError as e:
                if ktp not in e.divergent_offsets:
                    continue  # a pooled client's, of an earlier task's partition: not ours
                # KIP-320: the new leader's log ends below records read (an unclean leader
                # election), where it diverges, or (None) somewhere unknown.
                diverged = e.divergent_offsets[ktp]
                end = (int(diverged.offset) if diverged is not None
                       else int(consumer.end_offsets([ktp])[ktp]))
                error = _past_log_end(rng, position, end, out_of_range=True,
                                      how="the new leader's log was truncated below it")
                if error is not None:
                    raise error from None
                break
            except CorruptRecordError as e:
                at = re.search(r"at offset (\d+)", str(e))
                raise _corrupt(rng, int(at.group(1)) if at else position, e) from e
            records = fetched.get(ktp, ())
            for r in records:
                if r.offset >= rng.end:
                    position = rng.end
                    break
                if r.offset < position:
                    continue
                keys.append(r.key)
                values.append(r.value)
                offsets.append(r.offset)
                ts = r.timestamp
                stamps.append(ts * 1000 if ts is not None and ts >= 0 else None)
                position = r.offset + 1
            else:
                # Past control records and compacted gaps too.
                position = max(position, min(rng.end, consumer.position(ktp)))
            if records:
                last_progress = time.monotonic()
            elif position < rng.end:
                if ends.range_ends(position, consumer.highwater(ktp), last_progress):
                    break
            if len(offsets) >= ARROW_BATCH_ROWS or (offsets and position >= rng.end):
                yield _to_batch(schema, rng, keys, values, offsets, stamps)
                keys, values, offsets, stamps = [], [], [], []
        if offsets:  # read before lost data ended the range, or a skip took it beyond
            yield _to_batch(schema, rng, keys, values, offsets, stamps)
        consumer.unsubscribe()
        ok = True
    finally:
        ends.close()
        if ok:
            _return_client(key, consumer)
        else:
            _close_client(consumer)


def _read_confluent(rng: OffsetRange, config: ConsumerConfig) -> Iterator[pa.RecordBatch]:
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CTP


    key = ("confluent", rng.bootstrap, rng.props)
    conf = confluent_conf(config, rng.bootstrap, f"spark-{os.getpid()}")
    consumer = _take_client(key, lambda: Consumer(conf))
    schema = _arrow_schema()
    ctp = CTP(rng.topic, rng.partition)
    ends = _LogEndCheck(rng, config)
    ok = False
    try:
        consumer.assign([CTP(rng.topic, rng.partition, rng.start)])
        # librdkafka keeps a partition's cached watermarks across unassign/assign: a reused
        # client's are the last task's until this task's first fetch answer, and no hint of
        # this task's log end. The answer is in once a message or event is consumed, or the
        # watermarks change, or (the same watermarks again) once it is due.
        inherited = _cached_watermarks(consumer, ctp)
        answer_due = time.monotonic() + config.fetch_wait_max_ms / 1000 + LOG_END_RETRY_S
        answered = False
        position = rng.start
        last_progress = time.monotonic()
        while position < rng.end:
            messages = consumer.consume(min(ARROW_BATCH_ROWS, rng.end - position), 0.5)
            answered = answered or bool(messages)
            ended = False
            skip_to: int | None = None
            if [m for m in messages if m.error() is not None]:
                messages, position, ended, skip_to = _confluent_errors(
                    consumer, rng, messages, position,
                    timeout_s=max(config.socket_timeout_ms, 10_000) / 1000)
            if messages:
                last_progress = time.monotonic()
                # One partition, in offset order: keep what lies in [position, end).
                offsets = [m.offset() for m in messages]
                lo = bisect.bisect_left(offsets, position)
                hi = bisect.bisect_left(offsets, rng.end)
                reached_end = hi < len(offsets)
                if lo or reached_end:
                    messages, offsets = messages[lo:hi], offsets[lo:hi]
                if messages:
                    position = offsets[-1] + 1
                    stamps = [ts * 1000 if kind and ts >= 0 else None
                              for kind, ts in (m.timestamp() for m in messages)]
                    yield _to_batch(schema, rng, [m.key() for m in messages],
                                    [m.value() for m in messages], offsets, stamps)
                if reached_end:
                    position = rng.end
                if skip_to is not None:
                    position = max(position, skip_to)  # past what retention deleted
            elif skip_to is not None:
                position = skip_to
            elif not ended:
                pos = consumer.position([ctp])[0].offset
                if pos is not None and pos > position:
                    position = min(rng.end, pos)  # past control records and gaps
                    continue
                cached = _cached_watermarks(consumer, ctp)
                answered = (answered or cached != inherited
                            or time.monotonic() >= answer_due)
                # The high watermark of this task's last fetch answer (-1001 before the first).
                high = cached[1] if answered and cached is not None else None
                if ends.range_ends(position, high, last_progress):
                    break
            if ended:
                break
        consumer.unassign()
        ok = True
    finally:
        ends.close()
        if ok:
            _return_client(key, consumer)
        else:
            _close_client(consumer)


def _cached_watermarks(consumer: Any, ctp: Any) -> tuple[int, int] | None:
    """librdkafka's cached (low, high) watermarks of ``ctp``; None when it has none."""
    try:
        found = consumer.get_watermark_offsets(ctp, cached=True)
    except Exception:  # noqa: BLE001 - the partition unknown to it yet: no hint
        return None
    return (int(found[0]), int(found[1])) if found else None


def _confluent_errors(
    consumer: Any, rng: OffsetRange, messages: list[Any], position: int, timeout_s: float = 10.0,
) -> tuple[list[Any], int, bool, int | None]:
    """Drop error events from ``messages``; an offset reset means lost data (or a re-seek).

    (messages, position, whether the range ends after the messages returned, where reading
    goes on after them), with failOnDataLoss=false: the range ends when the broker answered
    the offset after them out of range beyond the log end; it goes on at the log start when
    retention deleted that offset. The messages returned are read either way: they came
    before the offset that failed. When they reach the range's end, or the offset that
    failed is past it, the range was read whole: it ends, whatever happened after it.
    """
    from confluent_kafka import KafkaError
    from confluent_kafka import TopicPartition as CTP

    good = []
    for m in messages:
        err = m.error()
        if err is None:
            good.append(m)
        elif err.code() == KafkaError._PARTITION_EOF:
            continue
        elif err.code() == KafkaError._BAD_MSG:  # check.crcs: a batch failed its CRC check
            if m.offset() >= rng.end:
                continue  # past the range: what comes before it is all the range has
            raise _corrupt(rng, max(position, m.offset()), err.str())
        elif err.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
            failed_at = m.offset()
            if (any(g.offset() >= rng.end for g in good)
                    or (failed_at is not None and failed_at >= rng.end)):
                return good, position, True, None  # the range was read to its end first
            found = consumer.get_watermark_offsets(CTP(rng.topic, rng.partition),
                                                   timeout=timeout_s)
            if found is None:  # no answer within the timeout (the default waits for ever)
                raise ZkConsumerError(
                    f"zkconsumer source: reading {rng.topic}:{rng.partition}: the broker "
                    f"answered out of range ({err.str()}), then gave no watermarks within "
                    f"{timeout_s:g} s")
            low, high = found
            # What failed comes after this answer's messages of the range: they are read.
            at = position
            for g in good:
                if at <= g.offset() < rng.end:
                    at = g.offset() + 1
            if low <= at:
                # Out of range, not below the log start: beyond the log end. The range
                # ends after this answer's messages.
                error = _past_log_end(rng, at, int(high), out_of_range=True)
                if error is not None:
                    raise error
                return good, position, True, None
            if rng.fail_on_data_loss:
                raise _data_loss(rng, at, int(low))
            log.warning("%s:%s: offsets [%d, %d) were lost; going on from %d",
                        rng.topic, rng.partition, at, low, low)
            consumer.assign([CTP(rng.topic, rng.partition, int(low))])
            return good, position, False, int(low)
        else:
            raise ZkConsumerError(f"zkconsumer source: reading {rng.topic}:{rng.partition}: "
                                  f"{err}")
    return good, position, False, None


# -- offsets from the brokers (driver side) --------------------------------------------------


class _OffsetLookup:
    """One kafka-python consumer (no group) for earliest and log-end offsets.

    Used from one thread (Spark calls the reader's methods one at a time); not thread-safe.
    """

    def __init__(self, config: ConsumerConfig, bootstrap: Sequence[str]) -> None:
        self._config = config
        self._bootstrap = tuple(bootstrap)
        self._consumer: Any = None

    def _get(self) -> Any:

        if self._consumer is None:
            kwargs = kafka_python_kwargs(self._config, self._bootstrap)
            # Log ends come from a fetch's high watermark: do not let the broker hold it.
            kwargs["fetch_max_wait_ms"] = 10
            self._consumer = kafka_consumer(**kwargs)
        return self._consumer

    def _timeout_ms(self) -> int:
        return max(self._config.socket_timeout_ms, 10_000)

    def earliest(self, tps: Iterable[TopicPartition]) -> Positions:
        from kafka import TopicPartition as KTP

        wanted = sorted(set(tps))
        if not wanted:
            return {}
        try:
            found = self._get().beginning_offsets(
                [KTP(t, p) for t, p in wanted], timeout_ms=self._timeout_ms())
        except BaseException:
            self.close()
            raise
        return {TopicPartition(k.topic, k.partition): int(v) for k, v in found.items()}

    def latest(self, tps: Iterable[TopicPartition]) -> Positions:

        wanted = sorted(set(tps))
        if not wanted:
            return {}
        try:
            return log_end_offsets(wanted, consumer=self._get(), timeout_ms=self._timeout_ms())
        except BaseException:
            self.close()
            raise

    def reset(self, tps: Iterable[TopicPartition], policy: str) -> Positions:
        """auto.offset.reset: smallest = log start, largest = log end."""
        return self.earliest(tps) if policy == "smallest" else self.latest(tps)

    def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            try:
                consumer.close(autocommit=False)
            except Exception:  # noqa: BLE001 - closing; nothing left to do
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


# -- the group member (streaming driver) -------------------------------------------------------


class _NoBatch(Exception):
    """Planning cannot decide a batch now (its message says why): no batch this trigger."""


class _ZooKeeperAway(_NoBatch):
    """Planning needs ZooKeeper, and it cannot be reached now."""


#: What a ZooKeeper request raises when ZooKeeper cannot be reached (a timeout: no answer
#: within the store's wait).
_ZK_AWAY = (ConnectionLoss, SessionExpiredError, KazooTimeoutError)


class _Membership(ConsumerRebalanceListener):
    """The connector's fetch side and rebalance listener: ownership and the hand-over rule.

    The fetch side fetches nothing; the rebalance's ``before_starting_fetchers`` tells which
    partitions this member owns now. The hand-over rule: a rebalance releases this member's
    partitions (``before_releasing_partitions``) only once no batch is being planned and the
    batch in flight is done, after committing where it ended, so the next owner starts
    exactly there (waiting at most ``release_wait_s``; past that, rows of the running batch
    may be read twice, as with the legacy consumer).

    ``cond`` (a Condition over an RLock) guards every attribute; Spark's thread plans batches,
    the connector's rebalance (its watcher thread, or Spark's thread for the first one) calls
    the hooks.
    """

    def __init__(self, release_wait_s: float) -> None:
        self.cond = threading.Condition()
        self.release_wait_s = release_wait_s
        self.commit_fn: Any = None  # set by the member: Mapping[TopicPartition, int] -> int
        self.generation = 0  # +1 per completed rebalance
        self.assigned: frozenset[TopicPartition] = frozenset()
        self.rebalancing = False
        self.planning = False
        self.in_flight: Positions | None = None  # end offsets of the batch being processed
        self.done: Positions | None = None  # where the last completed batch ended
        #: partition -> generation in which its position in the offsets was confirmed ours.
        self.verified: dict[TopicPartition, int] = {}
        #: Partitions the batch being planned or run moved back to their log end (truncated,
        #: failOnDataLoss=false) -> that position, until Spark says that batch is done: the
        #: end of the batch before, still to be committed, is beyond it.
        self.moved_back: Positions = {}
        self.closed = False

    # -- fetch side ------------------------------------------------------------------------
    def start_connections(self, infos: Iterable[PartitionTopicInfo]) -> None:
        pass  # ownership comes from before_starting_fetchers (called even when owning none)

    def stop_connections(self) -> None:
        # A rebalance (or a session loss) starts: until it ends, this member owns nothing.
        with self.cond:
            self.rebalancing = True
            self.assigned = frozenset()

    def shutdown(self) -> None:
        self.close()

    # -- rebalance listener ----------------------------------------------------------------
    def before_releasing_partitions(self, partition_ownership: Mapping[str, set[int]]) -> None:
        owned = {TopicPartition(t, p) for t, ps in partition_ownership.items() for p in ps}
        if not owned:
            return
        with self.cond:
            deadline = time.monotonic() + self.release_wait_s
            while (self.planning or self.in_flight is not None) and not self.closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    log.warning("releasing partitions before Spark has said that the last "
                                "micro-batch is done (it says so when it plans the next one; "
                                "waited %.1f s): its rows of them may be read again by their "
                                "next owner", self.release_wait_s)
                    break
                self.cond.wait(min(remaining, 0.5))
            done = {tp: min(off, self.moved_back.get(tp, off))
                    for tp, off in (self.done or {}).items()
                    if tp in owned and self.verified.get(tp) == self.generation}
        if done and self.commit_fn is not None:
            try:
                self.commit_fn(done)
            except Exception:  # noqa: BLE001 - the rebalance goes on; the next batch commits
                log.exception("committing offsets before releasing partitions failed")

    def before_starting_fetchers(
        self, consumer_id: str, global_partition_assignment: Mapping[str, Mapping[int, str]]
    ) -> None:
        mine = frozenset(
            TopicPartition(t, p)
            for t, parts in global_partition_assignment.items()
            for p, thread in parts.items()
            if zp.thread_consumer_id(thread) == consumer_id
        )
        with self.cond:
            self.assigned = mine
            self.generation += 1
            self.rebalancing = False
            for tp in [tp for tp in self.verified if tp not in mine]:
                del self.verified[tp]
            self.cond.notify_all()

    # -- planning (Spark's thread) ---------------------------------------------------------
    def batch_done(self, positions: Positions) -> None:
        """Spark asks for the next batch: the one that ended at ``positions`` is complete."""
        with self.cond:
            self.done = dict(positions)
            self.in_flight = None
            self.moved_back = {}  # `positions` has them
            self.cond.notify_all()

    def begin_planning(self, wait_s: float) -> tuple[int, frozenset[TopicPartition], bool]:
        """Wait out a running rebalance; (generation, owned partitions, whether no rebalance
        is under way) until end_planning. Owned is empty while one is."""
        with self.cond:
            deadline = time.monotonic() + wait_s
            while self.rebalancing and not self.closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break  # still rebalancing: the caller must not plan with this
                self.cond.wait(min(remaining, 0.5))
            self.planning = True
            return self.generation, self.assigned, not self.rebalancing

    def end_planning(self, in_flight: Positions | None) -> None:
        with self.cond:
            self.planning = False
            if in_flight is not None:
                self.in_flight = dict(in_flight)
            self.cond.notify_all()

    def running(self, in_flight: Positions) -> None:
        """A batch ending at ``in_flight`` is about to run (also a replay after a restart)."""
        with self.cond:
            self.in_flight = dict(in_flight)

    def snapshot(self) -> tuple[int, frozenset[TopicPartition], dict[TopicPartition, int]]:
        with self.cond:
            return self.generation, self.assigned, dict(self.verified)

    def committable(self, end: Positions) -> Positions:
        """What of a completed batch's ``end`` may be committed: the partitions owned and
        confirmed ours in this generation, none beyond where a later plan moved it back."""
        with self.cond:
            return {tp: off for tp, off in end.items()
                    if tp in self.assigned and self.verified.get(tp) == self.generation
                    and off <= self.moved_back.get(tp, off)}

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()


class _GroupMember:
    """This query's membership in the ZooKeeper group, plus the driver's clients.

    Used from Spark's thread (and the SIGTERM handler, on the same thread); the connector's
    own threads only call into :class:`_Membership`.
    """

    def __init__(self, opts: SourceOptions) -> None:

        self.opts = opts
        self.config = opts.config()
        self.zk: KazooClient | None = _zk_client(self.config, long_lived=True)
        self.connector: ZookeeperConsumerConnector | None = None
        self.lookup: _OffsetLookup | None = None
        try:
            self.bootstrap = _bootstrap(self.zk, opts, self.config)
            self.lookup = _OffsetLookup(self.config, self.bootstrap)
            self.membership = _Membership(self.config.zookeeper_session_timeout_ms / 1000.0)
            self.membership.commit_fn = self.commit
            membership = self.membership
            self.connector = ZookeeperConsumerConnector(
                self.config, fetcher_factory=lambda _c: membership
            )
            # Offsets are read and written on the session that owns the partitions, and
            # written only while it lives: a write queued in an outage never lands after
            # the session expired and the partitions became another member's.
            self.store = self.connector.zookeeper_offset_store(
                timeout_s=self.config.zookeeper_session_timeout_ms / 1000.0)
            self.connector.set_consumer_rebalance_listener(membership)
            flt = opts.make_filter()
            if flt is None:
                self.connector.create_message_streams({t: opts.streams for t in opts.topics})
            else:
                self.connector.create_message_streams_by_filter(flt, opts.streams)
        except BaseException:
            self.close()
            raise
        self.consumer_id = self.connector.consumer_id
        log.info("%s joined group %s", self.consumer_id, self.config.group_id)

    def offsets(self) -> _OffsetLookup:
        assert self.lookup is not None, "the group member is closed"
        return self.lookup

    def zk_connected(self) -> bool:
        """Whether the member's session is connected and owns what the last rebalance gave
        it (the connector hands out nothing otherwise).

        kazoo holds a request made while disconnected until it reconnects: planning asks
        first, and every answer is awaited at most a session timeout (the store's), rather
        than block Spark's thread for the length of an outage.
        """
        return self.connector is not None and not self.connector.paused

    def committed(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        """The group's committed offsets, read now from ZooKeeper; :class:`_ZooKeeperAway`
        when it cannot be asked."""
        if not self.zk_connected():
            raise _ZooKeeperAway("ZooKeeper is unreachable: cannot read the group's offsets")
        try:
            return self.store.read(sorted(set(tps)))
        except _ZK_AWAY as e:
            raise _ZooKeeperAway(f"reading the group's offsets failed: {e!r}") from None

    def commit(self, offsets: Mapping[TopicPartition, int], best_effort: bool = False) -> int:
        """Write these offsets to /consumers/G/offsets (only the ones that changed).

        When ZooKeeper is unreachable, or the write fails for that reason: with
        ``best_effort``, log and go on (the checkpoint holds the positions; the next batch's
        commit writes them); else :class:`_ZooKeeperAway`.
        """
        if not offsets:
            return 0
        try:
            if not self.zk_connected():
                raise _ZooKeeperAway("ZooKeeper is unreachable")
            try:
                return self.store.commit(offsets)
            except CommitFencedError as e:
                # Written conditionally on this session's owner znodes (see the connector's
                # fence): a partition another member owns now keeps that member's offset.
                log.warning("%s", e)
                return 0
            except _ZK_AWAY as e:
                raise _ZooKeeperAway(f"writing the group's offsets failed: {e!r}") from None
        except _ZooKeeperAway as e:
            if not best_effort:
                raise
            log.warning("%s: %s; the group's offsets are written with the next batch",
                        self.consumer_id, e)
            return 0

    def subscribed_partitions(self) -> dict[str, list[int]]:
        assert self.zk is not None, "the group member is closed"
        return _subscribed_partitions(self.zk, self.opts)

    def close(self) -> None:
        membership: _Membership | None = getattr(self, "membership", None)
        if membership is not None:
            membership.close()
        connector, self.connector = self.connector, None
        try:
            if connector is not None:
                connector.shutdown()
        finally:
            lookup, self.lookup = self.lookup, None
            if lookup is not None:
                lookup.close()
            zk, self.zk = self.zk, None
            if zk is not None:
                _close_zk(zk)


# -- readers -----------------------------------------------------------------------------------


def _check_schema(schema: StructType) -> None:
    if schema != SCHEMA:
        raise _fail(f"the schema is fixed: {SCHEMA.simpleString()}; got {schema.simpleString()}"
                    " (select or cast columns after load() instead)")


class ZkConsumerStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The streaming side; see the module docstring for the offsets and ownership rules.

    Spark calls the driver methods (``initialOffset``, ``latestOffset``, ``partitions``,
    ``commit``, ``stop``) one at a time from one thread of one long-lived process; ``read``
    runs on executors on an unpickled copy that never joined the group. Shared state with the
    connector's threads lives in :class:`_Membership` (under its condition); the rest is
    Spark's thread's alone.
    """

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._member: _GroupMember | None = None
        #: Trigger.AvailableNow: the log ends when the run began.
        self._target: Positions | None = None
        self._closed = False

    def __getstate__(self) -> dict[str, Any]:
        # Executors get the options only; the group member stays in the driver.
        return {"opts": self.opts}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["opts"])  # type: ignore[misc]

    # -- membership ----------------------------------------------------------------------------
    def _join(self) -> _GroupMember:
        if self._closed:
            raise ZkConsumerError("zkconsumer source: the stream reader is stopped")
        if self._member is None:
            self._member = _GroupMember(self.opts)
            self._install_exit_hooks()
        return self._member

    def _install_exit_hooks(self) -> None:
        # Spark ends this process with SIGTERM when the query stops, without calling stop():
        # leave the group at once (closing the ZooKeeper session deletes our ephemeral
        # znodes), rather than leaving a dead member until its session times out.
        atexit.register(self.stop)
        if threading.current_thread() is not threading.main_thread():
            return
        previous = signal.getsignal(signal.SIGTERM)

        def on_sigterm(signum: int, frame: FrameType | None) -> None:
            try:
                self.stop()
            finally:
                if callable(previous):
                    previous(signum, frame)
                else:
                    signal.signal(signal.SIGTERM, previous or signal.SIG_DFL)
                    os.kill(os.getpid(), signal.SIGTERM)

        signal.signal(signal.SIGTERM, on_sigterm)

    def _wait_s(self, member: _GroupMember) -> float:
        # How long planning waits for a running rebalance: a claim waits about this long.
        c = member.config
        return (c.zookeeper_session_timeout_ms + c.rebalance_backoff_ms) / 1000.0

    # -- Spark's API ---------------------------------------------------------------------------
    def initialOffset(self) -> dict[str, dict[str, int]]:
        # Constant (see the module docstring): Spark asks again when it replays the first
        # batch after a restart. Joining now reports a bad group or ZooKeeper at start.
        self._join()
        return INITIAL_OFFSET

    def prepareForTriggerAvailableNow(self) -> None:
        member = self._join()
        deadline = time.monotonic() + AVAILABLE_NOW_WAITS * self._wait_s(member)
        while not member.zk_connected():  # reading the subscription would wait for ever
            if time.monotonic() > deadline:
                raise ZkConsumerError(
                    f"zkconsumer source: ZooKeeper is unreachable after "
                    f"{AVAILABLE_NOW_WAITS * self._wait_s(member):.0f} s; the "
                    "Trigger.AvailableNow run cannot read the subscribed partitions")
            time.sleep(0.5)
        subscribed = member.subscribed_partitions()
        self._target = member.offsets().latest(
            TopicPartition(t, p) for t, parts in subscribed.items() for p in parts)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, dict[str, int]]:
        member = self._join()
        m = member.membership
        first = start == INITIAL_OFFSET
        begin = decode_offsets(start)
        # Spark plans the next batch only once the one that ended at `start` is complete in
        # the sink: a rebalance waiting to release partitions may go on now.
        m.batch_done(begin)
        wait_s = self._wait_s(member)
        deadline = time.monotonic() + AVAILABLE_NOW_WAITS * wait_s
        while True:
            generation, owned, settled = m.begin_planning(wait_s)
            rebalancing = not settled  # begin_planning waited for it already
            end: Positions | None = None
            why = "a rebalance is still under way"
            try:
                if settled and not member.zk_connected():
                    settled, why = False, "ZooKeeper is unreachable"
                if settled:
                    try:
                        end = self._plan(member, begin, generation, owned, limit, first)
                    except _NoBatch as e:
                        why = str(e)
            finally:
                # A batch without rows (positions only) is not waited for by a rebalance.
                rows = end is not None and any(off > begin.get(tp, off)
                                               for tp, off in end.items())
                m.end_planning(end if rows else None)
            if end is not None:
                return encode_offsets(end)
            # Ownership is unknown: no batch this time rather than one that drops every
            # partition from the offsets (they would come back at the group's offsets, which
            # may be a batch behind). But an empty batch ends a Trigger.AvailableNow run as if
            # it had read everything: that one waits, and then fails.
            if self._target is None:
                log.info("%s: %s; no new batch this trigger", member.consumer_id, why)
                return start
            if time.monotonic() > deadline:
                raise ZkConsumerError(
                    f"zkconsumer source: {member.consumer_id}: {why} after "
                    f"{AVAILABLE_NOW_WAITS * wait_s:.0f} s; the Trigger.AvailableNow run "
                    "cannot know which partitions to read")
            if not rebalancing:
                time.sleep(min(1.0, wait_s))

    def _plan(self, member: _GroupMember, begin: Positions, generation: int,
              owned: frozenset[TopicPartition], limit: ReadLimit, first: bool) -> Positions:
        # While planning, no rebalance releases our partitions (see _Membership), but one
        # after a session loss owns nothing to release and does not wait: what this plan
        # confirms goes to `verified` at the end, under the lock, and only if no rebalance
        # completed meanwhile.
        m = member.membership
        confirmed: list[TopicPartition] = []
        lookup = member.offsets()
        # Partitions owned since an earlier rebalance or before a restart: is our position
        # still the group's? Another member may have consumed and committed beyond it.
        unsure = [tp for tp in begin if tp in owned and m.verified.get(tp) != generation]
        newcomers = sorted(tp for tp in owned if tp not in begin)
        committed = member.committed(unsure + newcomers) if unsure or newcomers else {}
        ahead = {tp: z for tp in unsure
                 if (z := committed.get(tp)) is not None and z > begin[tp]}
        # Not an offset beyond the log end, which no member consumed up to: one committed
        # before the log was truncated. Taking it would skip what was written since.
        ends = lookup.latest(list(ahead)) if ahead else {}
        reseat = set()
        for tp in unsure:
            z = ahead.get(tp)
            if z is not None and z <= ends[tp]:
                log.info("%s:%d: the group committed %d beyond our position %d; taking the "
                         "group's offset", tp.topic, tp.partition, z, begin[tp])
                reseat.add(tp)
            else:
                if z is not None:
                    log.warning("%s:%d: the group's offset %d is beyond the log end %d (the "
                                "log was truncated, or the topic recreated): keeping our "
                                "position %d", tp.topic, tp.partition, z, ends[tp], begin[tp])
                confirmed.append(tp)

        # Newly owned partitions are positioned (no rows for them in this batch); in the
        # query's first batch, per startingOffsets. After it, one without a committed offset
        # is read from its start, as Spark's Kafka source reads partitions found after the
        # start: it is a partition added since (every one this query placed was written to
        # the group), and auto.offset.reset=largest would skip what was written to it.
        spec: OffsetSpec = (self.opts.starting or "committed") if first else "committed"
        reset = member.config.auto_offset_reset if first else "smallest"
        end: Positions = _resolve_spec(spec, newcomers, "committed", committed, lookup, reset)
        if not first:
            for tp in newcomers:
                if committed.get(tp) is None:
                    log.info("%s:%d has no committed offset: read from its earliest offset "
                             "(a partition added after the query started)", tp.topic,
                             tp.partition)
        confirmed += newcomers
        if first:
            log.info("%s starts at %s", member.consumer_id, encode_offsets(end))
        # Positions to record in the group where they differ from its offsets (startingOffsets,
        # or auto.offset.reset), so that the next owner starts there too.
        placed = {tp: off for tp, off in end.items() if committed.get(tp) != off}

        reading = sorted(tp for tp in begin if tp in owned and tp not in reseat)
        positions = {**{tp: begin[tp] for tp in reading}, **placed}
        available = lookup.latest(positions)
        behind = [tp for tp in positions if available[tp] < positions[tp]]
        for _ in range(LOG_END_RETRIES):
            if not behind:
                break
            time.sleep(LOG_END_RETRY_S)  # a new leader's high watermark may lag a moment
            available.update(lookup.latest(behind))
            behind = [tp for tp in behind if available[tp] < positions[tp]]
        for tp in behind:
            if tp in placed:
                message = (f"{tp.topic}:{tp.partition}: the starting offset {placed[tp]} is "
                           f"beyond the log end {available[tp]}")
            else:
                # The log was truncated (an unclean leader election) or the topic recreated:
                # what is written from its end on would be skipped up to our position.
                message = (f"{tp.topic}:{tp.partition}: our position {begin[tp]} is beyond the "
                           f"log end {available[tp]} (the log was truncated or the topic "
                           "recreated)")
            if self.opts.fail_on_data_loss:
                raise ZkConsumerError(f"zkconsumer source: {message}; set failOnDataLoss=false "
                                      "to go on from the log end")
            log.warning("%s; going on from the log end", message)
            if tp in placed:
                end[tp] = placed[tp] = available[tp]
        # Written to the group before the batch, as new positions are: else a rebalance or
        # a restart would take the group's offset (beyond the log end) again.
        moved = {tp: available[tp] for tp in behind if tp not in placed}

        # The batch that ended at `start` is complete: record it in the group, for the
        # partitions that are still ours, with the new positions. After the checks above: a
        # position beyond the log end (a mistyped startingOffsets, say) is never written to
        # the group.
        # The new positions must be written (else a rebalance or a restart takes the group's
        # offsets instead, undoing a rewind): no batch when they cannot be. The rest can
        # wait for the next batch.
        with m.cond:
            if m.generation != generation:
                raise _NoBatch("a rebalance completed while the batch was planned")
            m.verified.update(dict.fromkeys(confirmed, generation))
            done = {tp: off for tp, off in begin.items()
                    if tp in owned and m.verified.get(tp) == generation and tp not in behind}
            # Spark commits the batch before (ending at `begin`) after this plan: not these.
            m.moved_back.update(moved)
        member.commit({**done, **placed, **moved}, best_effort=not (placed or moved))
        for tp in reading:
            if tp in behind:
                continue
            if self._target is not None:
                # Trigger.AvailableNow: nothing newer than when the run began.
                available[tp] = min(available[tp], self._target.get(tp, begin[tp]))
            available[tp] = max(available[tp], begin[tp])
        base = {tp: min(begin[tp], available[tp]) for tp in reading}
        if isinstance(limit, ReadMaxRows):
            end.update(rate_limit(base, available, limit.max_rows))
        else:
            end.update({tp: available[tp] for tp in reading})
        return end

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin, finish = decode_offsets(start), decode_offsets(end)
        # A partition's end below its start was moved back to its log end (failOnDataLoss
        # false): nothing to read. The first batch (start: INITIAL_OFFSET) only positions.
        ranges = [(tp, begin[tp], off) for tp, off in sorted(finish.items())
                  if tp in begin and off > begin[tp]]
        if not ranges:
            return []
        member = self._join()
        member.membership.running(finish)
        return [
            OffsetRange(tp.topic, tp.partition, lo, hi, member.bootstrap, self.opts.props,
                        self.opts.fail_on_data_loss)
            for tp, lo, hi in ranges
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, OffsetRange), partition
        return read_range(partition)

    def commit(self, end: dict[str, Any]) -> None:
        # Never waits for a rebalance: one may be waiting for the batch Spark runs next.
        member = self._join()
        member.commit(member.membership.committable(decode_offsets(end)), best_effort=True)

    def stop(self) -> None:
        if self._closed:
            return
        self._closed = True
        member, self._member = self._member, None
        if member is not None:
            log.info("%s leaves group %s", member.consumer_id, member.config.group_id)
            member.close()


class ZkConsumerBatchReader(DataSourceReader):
    """``spark.read``: the offsets are resolved when Spark plans the read."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        opts = self.opts
        config = opts.config()
        zk = _zk_client(config)
        lookup: _OffsetLookup | None = None
        try:
            subscribed = _subscribed_partitions(zk, opts)
            tps = [TopicPartition(t, p) for t, parts in sorted(subscribed.items()) for p in parts]
            bootstrap = _bootstrap(zk, opts, config)
            lookup = _OffsetLookup(config, bootstrap)
            starting = opts.starting or "earliest"
            ending = opts.ending or "latest"
            committed: dict[TopicPartition, int | None] | None = None
            if "committed" in (starting, ending):

                committed = ZkOffsetStore(zk, config.group_id).read(tps)
            reset = config.auto_offset_reset
            begin = _resolve_spec(starting, tps, "earliest", committed, lookup, reset)
            finish = _resolve_spec(ending, tps, "latest", committed, lookup, reset)
            backwards = [tp for tp in tps if finish[tp] < begin[tp]]
            if backwards:
                tp = backwards[0]
                raise _fail(f"{tp.topic}:{tp.partition}: the ending offset {finish[tp]} is "
                            f"before the starting offset {begin[tp]}")
            if ending != "latest":
                # A given (or committed) end beyond the log end: the executor would wait for
                # offsets that do not exist.
                self._check_log_ends(lookup, begin, finish)
        finally:
            if lookup is not None:
                lookup.close()
            _close_zk(zk)
        return [
            OffsetRange(tp.topic, tp.partition, begin[tp], finish[tp], bootstrap, opts.props,
                        opts.fail_on_data_loss)
            for tp in tps if finish[tp] > begin[tp]
        ]

    def _check_log_ends(self, lookup: _OffsetLookup, begin: Positions,
                        finish: Positions) -> None:
        """An ending offset beyond the log end fails the read (failOnDataLoss), or is moved
        back to it with a warning (to the starting offset, when that is beyond it too)."""
        wanted = [tp for tp in finish if finish[tp] > begin[tp]]
        log_ends = lookup.latest(wanted)
        beyond = [tp for tp in wanted if finish[tp] > log_ends[tp]]
        for _ in range(LOG_END_RETRIES):
            if not beyond:
                break
            time.sleep(LOG_END_RETRY_S)  # a new leader's high watermark may lag a moment
            log_ends.update(lookup.latest(beyond))
            beyond = [tp for tp in beyond if finish[tp] > log_ends[tp]]
        for tp in beyond:
            message = (f"endingOffsets: {tp.topic}:{tp.partition} ends at {finish[tp]}, beyond "
                       f"its log end {log_ends[tp]}")
            if self.opts.fail_on_data_loss:
                raise _fail(f"{message}; give an offset up to the log end, or latest (with "
                            "failOnDataLoss=false the read ends at the log end)")
            log.warning("zkconsumer source: %s; reading up to the log end", message)
            finish[tp] = max(begin[tp], log_ends[tp])

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, OffsetRange):
            return iter(())  # Spark's placeholder partition when there is nothing to read
        return read_range(partition)


class ZkConsumerDataSource(DataSource):
    """``format("zkconsumer")``: Kafka topics as a member of a legacy ZooKeeper group.

    Options are checked when the DataFrame is defined (``load()``): syntax, legacy keys, and
    that the topics exist in ZooKeeper.
    """

    #: The parsed options, set by the first schema()/reader()/streamReader() call; it travels
    #: with the pickled data source, so the topics are checked in ZooKeeper once.
    _parsed: SourceOptions | None = None

    @classmethod
    def name(cls) -> str:
        return "zkconsumer"

    def _options(self) -> SourceOptions:
        parsed = self._parsed
        if parsed is None:
            parsed = parse_options(self.options)
            validate_against_zookeeper(parsed)
            self._parsed = parsed
        return parsed

    def schema(self) -> StructType:
        self._options()
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        _check_schema(schema)
        opts = self._options()
        _check_batch_options(opts)
        return ZkConsumerBatchReader(opts)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        _check_schema(schema)
        opts = self._options()
        _check_stream_options(opts)
        return ZkConsumerStreamReader(opts)


def register(spark: SparkSession) -> None:
    """Make ``format("zkconsumer")`` available in this Spark session."""
    spark.dataSource.register(ZkConsumerDataSource)
