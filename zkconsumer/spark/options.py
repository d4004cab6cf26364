"""The source's options: their tables, :func:`parse_options` (no I/O) and the checks of
each kind of read; the fixed :data:`SCHEMA` of the rows."""

from __future__ import annotations

import difflib
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

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
from zkconsumer._errors import ConfigError, ZkConsumerSourceError
from zkconsumer._filters import Blacklist, TopicFilter, Whitelist
from zkconsumer.zk import paths as zp

__all__ = [
    "BATCH_ONLY",
    "EARLIEST",
    "LATEST",
    "SCHEMA",
    "SOURCE_KEYS",
    "STREAM_ONLY",
    "OffsetSpec",
    "SourceOptions",
    "parse_options",
]

log = logging.getLogger("zkconsumer.spark")

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
    "minpartitions": "minPartitions",
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
        ("maxrecordsperpartition", "mintriggerdelay", "maxtriggerdelay",
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
#: In JSON offset maps, as in Spark's Kafka source.
EARLIEST, LATEST = -2, -1
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
    #: At least this many Spark tasks per read or micro-batch: a partition's range is split
    #: in proportion to its share of the offsets (None: one task per partition).
    min_partitions: int | None = None
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

    topics, topic_filter = _subscription(source)
    props, config = _legacy_config(opts)
    group_given = "group.id" in opts
    bootstrap = _bootstrap_servers(source.get("kafka.bootstrap.servers")
                                   or config.bootstrap_servers)

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
    min_partitions = (_parse_int("minPartitions", source["minpartitions"], 1)
                      if "minpartitions" in source else None)
    named = {SOURCE_KEYS[k] for k in source}
    named.update(k for k in opts if not (k == "auto.commit.enable"
                                         and opts[k].strip().lower() == "false"))
    return SourceOptions(
        props=tuple(sorted(props.items())), group_given=group_given, topics=topics,
        topic_filter=topic_filter, starting=starting, ending=ending,
        max_offsets_per_trigger=max_per_trigger, bootstrap=bootstrap,
        fail_on_data_loss=fail_on_data_loss, streams=streams, min_partitions=min_partitions,
        given=frozenset(named),
    )


def _subscription(source: Mapping[str, str]) -> tuple[tuple[str, ...], tuple[str, str] | None]:
    """(topics, topic filter) of the source options: exactly one of topics, whitelist or
    blacklist."""
    given = [SOURCE_KEYS[k] for k in ("topics", "whitelist", "blacklist") if k in source]
    if len(given) != 1:
        what = " and ".join(given) if given else "none"
        raise _fail(f"give exactly one of topics, whitelist or blacklist (got {what})")
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
        return tuple(dict.fromkeys(names)), None
    kind = "whitelist" if "whitelist" in source else "blacklist"
    try:
        (Whitelist if kind == "whitelist" else Blacklist)(source[kind])
    except ConfigError as e:
        raise _fail(f"{kind}: {e}") from None
    return (), (kind, source[kind])


def _legacy_config(opts: Mapping[str, str]) -> tuple[dict[str, str], ConsumerConfig]:
    """The legacy consumer keys (the options that are not the source's) as the source uses
    them, validated: (props, their ConsumerConfig)."""
    if "zookeeper.connect" not in opts:
        raise _fail("the zookeeper.connect option is required (host:port[,host:port][/chroot])")
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
    return props, config


def _bootstrap_servers(raw_bs: str | None) -> tuple[str, ...] | None:
    """``kafka.bootstrap.servers`` (or ``bootstrap.servers``) as host:port entries."""
    if not raw_bs:
        return None
    bootstrap = tuple(h.strip() for h in raw_bs.split(",") if h.strip())
    if not bootstrap or not all(":" in h for h in bootstrap):
        raise _fail(f"kafka.bootstrap.servers must be host:port[,host:port], got {raw_bs!r}")
    return bootstrap


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


def _check_schema(schema: StructType) -> None:
    if schema != SCHEMA:
        raise _fail(f"the schema is fixed: {SCHEMA.simpleString()}; got {schema.simpleString()}"
                    " (select or cast columns after load() instead)")
