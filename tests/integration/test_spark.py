"""The PySpark data source (``format("zkconsumer")``) against the real stack, Spark local[2].

One SparkSession for the module (starting Spark takes seconds). Streaming queries write to the
memory sink, or, across a restart from a checkpoint (which Spark's memory sink refuses in
append mode), to a foreachBatch that collects into a list; they run with
``trigger(availableNow=True)`` or until ``processAllAvailable()``. Every query is stopped by
the test that started it, and the group's ids znodes are checked to be gone, so a query that
leaves a member behind fails here rather than in a later test.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from kazoo.client import KazooClient
from pyspark.errors import AnalysisException, StreamingQueryException
from pyspark.sql import DataFrame, SparkSession

from tests.support import (
    StackInfo,
    group_owners,
    offset_znodes,
    owners_settled,
    produce,
    produce_with_bad_crc,
    started_zk,
    wait_until,
)
from zkconsumer import ConsumerTimeoutException, ZkConsumerError, create_consumer_connector
from zkconsumer._config import ConsumerConfig
from zkconsumer._types import TopicPartition
from zkconsumer.consumer.offsets import ZkOffsetStore
from zkconsumer.spark import OffsetRange, ZkConsumerSourceError, parse_options, register
from zkconsumer.spark.cluster import _subscribed_partitions
from zkconsumer.spark.offsets import INITIAL_OFFSET, rate_limit
from zkconsumer.spark.read import read_range
from zkconsumer.zk import paths as zp

Row4 = tuple[int, int, bytes, bytes]  # partition, offset, key, value


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    # Executors and the data source's Python workers must run this interpreter (the venv).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master("local[2]")
        .appName("zkconsumer-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    try:
        yield session
    finally:
        session.stop()


def _produce(stack: StackInfo, topic: str, partitions: int, per_partition: int,
             first: int = 0) -> list[Row4]:
    """``per_partition`` records to each partition; the rows a reader must return."""
    records = []
    expected = []
    for p in range(partitions):
        for i in range(first, first + per_partition):
            key, value = f"k{p}-{i}".encode(), json.dumps({"p": p, "i": i}).encode()
            records.append((p, key, value))
            expected.append((p, i, key, value))
    produce(stack.bootstrap, topic, records)
    return expected


def _rows(df: DataFrame) -> list[Row4]:
    return sorted((r.partition, r.offset, bytes(r.key), bytes(r.value)) for r in df.collect())


def _stream(spark: SparkSession, stack: StackInfo, group: str, topic: str | None,
            **options: str) -> DataFrame:
    """A stream over ``topic``, or over what a ``whitelist`` option matches."""
    reader = (spark.readStream.format("zkconsumer")
              .option("zookeeper.connect", stack.zookeeper)
              .option("group.id", group)
              .option("auto.offset.reset", "smallest")
              .option("zookeeper.session.timeout.ms", "4000"))
    if topic is not None:
        reader = reader.option("topics", topic)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def _members(zk: KazooClient, group: str) -> list[str]:
    path = zp.ids_dir(group)
    return zk.get_children(path) if zk.exists(path) else []


# Polling a memory sink runs a Spark job: poll it every half second, not every 50 ms, or the
# polls take the two cores from the queries they wait for.


def _query_name() -> str:
    return f"q_{uuid.uuid4().hex[:12]}"


def _data_rows(progress: list[dict[str, Any]]) -> list[int]:
    return [p["numInputRows"] for p in progress if p["numInputRows"]]


# -- streaming ----------------------------------------------------------------------------------


def test_stream_reads_each_message_once_across_triggers_and_a_restart(
    spark, stack, zk, names, topic_factory, tmp_path
) -> None:
    topic = topic_factory(names.topic, 3)
    group = names.group
    checkpoint = str(tmp_path / "checkpoint")
    first = _produce(stack, topic, 3, 20)
    # Spark's format("memory") refuses to recover from a checkpoint in append mode, so the
    # in-memory sink here is a foreachBatch collecting into a list (it runs in this process).
    sink: list[Row4] = []

    def collect(batch: DataFrame, batch_id: int) -> None:
        sink.extend(_rows(batch))

    def run() -> list[int]:
        q = (_stream(spark, stack, group, topic, maxOffsetsPerTrigger="25").writeStream
             .foreachBatch(collect).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
        q.awaitTermination(180)
        assert q.exception() is None
        # The query left the group when it stopped (no member left behind to time out).
        wait_until(lambda: _members(zk, group) == [], 20, "the query to leave the group")
        return _data_rows(q.recentProgress)

    # maxOffsetsPerTrigger: 60 messages in batches of at most 25.
    assert run() == [25, 25, 10]
    assert sorted(sink) == sorted(first)
    assert offset_znodes(zk, group, topic, 3) == {0: 20, 1: 20, 2: 20}

    second = _produce(stack, topic, 3, 10, first=20)
    assert run() == [25, 5]
    # Resumed exactly where the checkpoint says: only the new messages, each once.
    assert sorted(sink) == sorted(first + second)
    assert offset_znodes(zk, group, topic, 3) == {0: 30, 1: 30, 2: 30}


def test_zookeeper_offsets_follow_the_batches(spark, stack, zk, names, topic_factory,
                                              tmp_path) -> None:
    topic = topic_factory(names.topic, 1)
    group = names.group
    _produce(stack, topic, 1, 30)
    seen: list[tuple[int, int, int, dict[int, int]]] = []

    def record(batch: DataFrame, batch_id: int) -> None:
        offsets = [r.offset for r in batch.select("offset").collect()]
        if offsets:
            # What the legacy lag tools see while this batch runs.
            seen.append((min(offsets), max(offsets), len(offsets),
                         offset_znodes(zk, group, topic, 1)))

    # A wildcard subscription this time (the legacy whitelist, matching this topic only).
    q = (_stream(spark, stack, group, None, whitelist=f" '{topic}' ", maxOffsetsPerTrigger="10")
         .writeStream.foreachBatch(record)
         .option("checkpointLocation", str(tmp_path / "ck"))
         .trigger(availableNow=True).start())
    q.awaitTermination(180)
    assert q.exception() is None
    # Each batch starts where ZooKeeper says the group is; the last one is committed at the end.
    assert seen == [(0, 9, 10, {0: 0}), (10, 19, 10, {0: 10}), (20, 29, 10, {0: 20})]
    assert offset_znodes(zk, group, topic, 1) == {0: 30}
    wait_until(lambda: _members(zk, group) == [], 20, "the query to leave the group")


def test_two_queries_and_a_legacy_consumer_split_a_group(spark, stack, zk, names,
                                                         topic_factory, tmp_path) -> None:
    topic = topic_factory(names.topic, 6)
    group = names.group
    queries = []
    sinks = []
    legacy_rows: list[Row4] = []
    stop = threading.Event()
    legacy = None
    drainer = None
    try:
        for i in range(2):
            name = _query_name()
            q = (_stream(spark, stack, group, topic).writeStream.format("memory")
                 .queryName(name).option("checkpointLocation", str(tmp_path / f"ck{i}"))
                 .trigger(processingTime="300 milliseconds").start())
            queries.append(q)
            sinks.append(name)
            wait_until(lambda n=i + 1: len(_members(zk, group)) == n, 60,
                       f"query {i} to join the group")
        # A legacy member of the same group, fetching for real.
        legacy = create_consumer_connector({
            "zookeeper.connect": stack.zookeeper, "group.id": group,
            "auto.offset.reset": "smallest", "consumer.timeout.ms": 200,
            "auto.commit.interval.ms": 300, "zookeeper.session.timeout.ms": 4000})
        stream = legacy.create_message_streams({topic: 1})[topic][0]

        def drain() -> None:
            while not stop.is_set():
                try:
                    for m in stream:
                        legacy_rows.append((m.partition, m.offset, m.key, m.message))
                except ConsumerTimeoutException:
                    continue

        drainer = threading.Thread(target=drain, daemon=True)
        drainer.start()
        wait_until(lambda: owners_settled(zk, group, topic), 60, "the partitions to be split")
        by_member: dict[str, set[int]] = {}
        for p, thread in group_owners(zk, group, topic).items():
            by_member.setdefault(zp.thread_consumer_id(thread), set()).add(p)
        assert sorted(len(ps) for ps in by_member.values()) == [2, 2, 2]

        expected = _produce(stack, topic, 6, 10)
        wait_until(lambda: sum(spark.table(n).count() for n in sinks) + len(legacy_rows)
                   >= len(expected), 120, "the group to read everything", every=0.5)
        for q in queries:
            q.processAllAvailable()
        got = [_rows(spark.table(n)) for n in sinks] + [sorted(legacy_rows)]
        parts = [frozenset(r[0] for r in rows) for rows in got]
        # Each member read exactly the partitions it owns; together, everything once.
        assert sorted(parts, key=min) == sorted(map(frozenset, by_member.values()), key=min)
        assert sorted(got[0] + got[1] + got[2]) == sorted(expected)
        wait_until(lambda: offset_znodes(zk, group, topic, 6) == dict.fromkeys(range(6), 10), 30,
                   "every member to commit its offsets")
    finally:
        stop.set()
        if legacy is not None:
            legacy.shutdown()
        if drainer is not None:
            drainer.join(10)
        for q in queries:
            q.stop()
    wait_until(lambda: _members(zk, group) == [], 30, "every member to leave the group")


def test_partitions_handed_over_mid_stream_are_read_once(spark, stack, zk, names,
                                                        topic_factory, tmp_path) -> None:
    topic = topic_factory(names.topic, 4)
    group = names.group
    expected = _produce(stack, topic, 4, 100)
    queries = []
    sinks = []

    def start(i: int) -> None:
        name = _query_name()
        # A small maxOffsetsPerTrigger keeps the first query busy with its backlog while the
        # second one joins: two of its partitions move mid-stream.
        q = (_stream(spark, stack, group, topic, maxOffsetsPerTrigger="20")
             .writeStream.format("memory").queryName(name)
             .option("checkpointLocation", str(tmp_path / f"ck{i}"))
             .trigger(processingTime="0 seconds").start())
        queries.append(q)
        sinks.append(name)

    try:
        start(0)
        wait_until(lambda: spark.table(sinks[0]).count() >= 40, 60, "the first query to read",
                   every=0.5)
        start(1)
        wait_until(lambda: sum(spark.table(n).count() for n in sinks) >= len(expected), 120,
                   "both queries to read everything", every=0.5)
        for q in queries:
            q.processAllAvailable()
        first, second = (_rows(spark.table(n)) for n in sinks)
        assert sorted(first + second) == sorted(expected)  # nothing lost, nothing twice
        moved = {r[0] for r in second}
        assert len(moved) == 2 and second, "no partition moved while the first query read"
        for p in moved:
            # The hand-over point: the first query read a prefix, the second the rest.
            before = [r[1] for r in first if r[0] == p]
            after = [r[1] for r in second if r[0] == p]
            assert before == list(range(len(before)))
            assert after == list(range(len(before), 100))
    finally:
        for q in queries:
            q.stop()
    wait_until(lambda: _members(zk, group) == [], 30, "both queries to leave the group")


# -- batch --------------------------------------------------------------------------------------


def _batch(spark: SparkSession, stack: StackInfo, topic: str, **options: str) -> DataFrame:
    reader = (spark.read.format("zkconsumer").option("zookeeper.connect", stack.zookeeper)
              .option("topics", topic))
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def test_batch_read_returns_exactly_the_offset_range(spark, stack, zk, names,
                                                     topic_factory) -> None:
    topic = topic_factory(names.topic, 3)
    produced = _produce(stack, topic, 3, 10)
    start = {topic: {"0": 2, "1": -2, "2": 5}}
    end = {topic: {"0": 7, "1": 4, "2": 5}}
    df = _batch(spark, stack, topic, startingOffsets=json.dumps(start),
                endingOffsets=json.dumps(end))
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp>")
    rows = df.collect()
    assert {r.topic for r in rows} == {topic}
    assert all(r.timestamp is not None for r in rows)
    got = sorted((r.partition, r.offset, bytes(r.key), bytes(r.value)) for r in rows)
    assert got == [r for r in produced if (r[0] == 0 and 2 <= r[1] < 7)
                   or (r[0] == 1 and r[1] < 4)]

    # Everything by default (earliest to latest).
    assert _rows(_batch(spark, stack, topic)) == sorted(produced)

    # committed: the group's ZooKeeper offsets; none committed -> auto.offset.reset.
    store = ZkOffsetStore(zk, names.group)
    store.commit({TopicPartition(topic, 0): 8, TopicPartition(topic, 2): 3})
    df = _batch(spark, stack, topic, startingOffsets="committed", **{
        "group.id": names.group, "auto.offset.reset": "largest"})
    assert _rows(df) == [r for r in produced if (r[0] == 0 and r[1] >= 8)
                         or (r[0] == 2 and r[1] >= 3)]


@pytest.mark.broker("kraft")  # a ZooKeeper-mode broker rewrites the znode
def test_a_topic_znode_that_does_not_decode_is_left_out_of_a_wildcard_read(
        spark, stack, zk, names, topic_factory, caplog) -> None:
    """One bad /brokers/topics znode among the subscribed topics: the other topics are read
    (members ignore such a topic the same way), and a warning names the znode."""
    good = topic_factory(f"{names.topic}-good", 2)
    produced = _produce(stack, good, 2, 5)
    bad = zp.topic_path(f"{names.topic}-bad")
    zk.create(bad, b"not json")
    try:
        options = {"zookeeper.connect": stack.zookeeper, "whitelist": f"{names.topic}-.*"}
        df = spark.read.format("zkconsumer").options(**options).load()
        assert _rows(df) == sorted(produced)
        # The warning (Spark's Python workers log it where this process cannot see it).
        with caplog.at_level("WARNING", logger="zkconsumer.spark"):
            assert _subscribed_partitions(zk, parse_options(options)) == {good: [0, 1]}
        assert any(bad in r.getMessage() for r in caplog.records), caplog.text
    finally:
        zk.delete(bad)


# -- bad options --------------------------------------------------------------------------------

BAD = [
    ({"zookeeper.connect": None}, "the zookeeper.connect option is required"),
    ({"topics": "no-such-topic"}, "unknown topic 'no-such-topic'"),
    ({"startingOffsets": "{oops"}, "startingOffsets is malformed JSON"),
    ({"whitelist": "t-.*"},
     "give exactly one of topics, whitelist or blacklist (got topics and whitelist)"),
    ({"fetch.mesage.max.bytes": "1"},
     "unknown configuration key 'fetch.mesage.max.bytes' (did you mean "
     "'fetch.message.max.bytes'?)"),
    ({"auto.offset.reset": "earliest"}, "auto.offset.reset='earliest' is not one of"),
    ({"endingOffsets": '{"TOPIC": {"7": 1}}'}, "has no partition 7"),
    ({"endingOffsets": '{"TOPIC": {"\u00b2": 1}}'}, "partition '²' of topic"),
    ({"maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger must be >= 1"),
]


@pytest.mark.parametrize("streaming", [False, True], ids=["read", "readStream"])
def test_bad_options_fail_when_the_dataframe_is_defined(spark, stack, names, topic_factory,
                                                        streaming) -> None:
    topic = topic_factory(names.topic, 2)
    for change, message in BAD:
        options: dict[str, str | None] = {"zookeeper.connect": stack.zookeeper,
                                          "group.id": names.group, "topics": topic}
        options.update({k: v.replace("TOPIC", topic) if v else v for k, v in change.items()})
        reader = spark.readStream if streaming else spark.read
        reader = reader.format("zkconsumer")
        for k, v in options.items():
            if v is not None:
                reader = reader.option(k, v)
        with pytest.raises(AnalysisException) as info:
            reader.load()
        text = str(info.value)
        assert "ZkConsumerSourceError: zkconsumer source: " in text, text
        assert message in text, (change, text)


def test_stream_only_and_batch_only_options_fail_when_used_the_other_way(
    spark, stack, zk, names, topic_factory, tmp_path
) -> None:
    topic = topic_factory(names.topic, 1)
    df = _stream(spark, stack, names.group, topic, endingOffsets="latest")
    q = (df.writeStream.format("memory").queryName(_query_name())
         .option("checkpointLocation", str(tmp_path / "ck")).start())
    with pytest.raises(StreamingQueryException) as info:
        q.awaitTermination(120)
    assert "endingOffsets applies to batch reads only" in str(info.value)
    assert _members(zk, names.group) == []

    with pytest.raises(AnalysisException, match="maxOffsetsPerTrigger applies to streaming"):
        _batch(spark, stack, topic, maxOffsetsPerTrigger="5").collect()


def _tasks_of_job_group(spark: SparkSession, group: str) -> list[int]:
    """The task count of each stage of the jobs Spark ran in job ``group`` (a streaming
    query's jobs run in the group of its run id)."""
    tracker = spark.sparkContext.statusTracker()
    counts = []
    for job in tracker.getJobIdsForGroup(group):
        info = tracker.getJobInfo(job)
        for stage in info.stageIds if info is not None else ():
            stage_info = tracker.getStageInfo(stage)
            if stage_info is not None:
                counts.append(stage_info.numTasks)
    return counts


def test_min_partitions_splits_large_ranges_into_more_tasks(
    spark, stack, zk, names, topic_factory, tmp_path
) -> None:
    """minPartitions, as in Spark's Kafka source: a read of fewer partitions than that is
    split into about that many tasks, each partition in proportion to its share of the
    offsets, and every row is read exactly once, in batch reads and streams."""
    topic = topic_factory(names.topic, 2)
    produced = _produce(stack, topic, 1, 30)  # partition 0
    records = [(1, f"k1-{i}".encode(), f"v{i}".encode()) for i in range(10)]
    produce(stack.bootstrap, topic, records)
    produced += [(1, i, k, v) for i, (_, k, v) in enumerate(records)]

    df = _batch(spark, stack, topic, minPartitions="8")
    assert df.rdd.getNumPartitions() == 8  # 30 and 10 offsets: 6 tasks and 2
    assert _rows(df) == sorted(produced)
    assert _batch(spark, stack, topic).rdd.getNumPartitions() == 2
    assert _batch(spark, stack, topic, minPartitions="2").rdd.getNumPartitions() == 2
    one = _batch(spark, stack, topic, minPartitions="3",
                 startingOffsets=json.dumps({topic: {"0": 28, "1": 0}}))
    assert one.rdd.getNumPartitions() == 4  # 2 and 10 offsets: 1 task and 3 (2.5 rounded up)
    assert _rows(one) == sorted(r for r in produced if r[0] == 1 or r[1] >= 28)

    name = _query_name()
    q = (_stream(spark, stack, names.group, topic, minPartitions="5").writeStream
         .format("memory").queryName(name).option("checkpointLocation", str(tmp_path / "ck"))
         .trigger(availableNow=True).start())
    try:
        q.awaitTermination(180)
        assert q.exception() is None
        assert _rows(spark.table(name)) == sorted(produced)
        assert max(_tasks_of_job_group(spark, str(q.runId))) == 5
    finally:
        q.stop()
    wait_until(lambda: _members(zk, names.group) == [], 30, "the query to leave the group")
    with pytest.raises(ZkConsumerSourceError, match="minPartitions must be >= 1, got 0"):
        parse_options({"zookeeper.connect": "zk:2181", "topics": "a", "minPartitions": "0"})


# -- pure helpers -------------------------------------------------------------------------------


def test_split_ranges_cuts_in_proportion_and_covers_each_range_exactly() -> None:
    from zkconsumer.spark.read import split_ranges

    def rng(partition: int, start: int, end: int) -> OffsetRange:
        return OffsetRange("t", partition, start, end, ("b:1",), (), True)

    ranges = [rng(0, 100, 400), rng(1, 0, 100), rng(2, 5, 6)]
    assert split_ranges(ranges, None) == ranges
    assert split_ranges(ranges, 3) == ranges
    pieces = split_ranges(ranges, 8)
    assert [(r.partition, r.start, r.end) for r in pieces] == [
        (0, 100, 150), (0, 150, 200), (0, 200, 250), (0, 250, 300), (0, 300, 350),
        (0, 350, 400), (1, 0, 50), (1, 50, 100), (2, 5, 6)]  # 5.99, 2.0 and 0.02 of 8
    assert split_ranges(ranges, 8) == pieces  # the same again: a replayed batch's tasks
    # More pieces than offsets: no empty task.
    assert [(r.start, r.end) for r in split_ranges([rng(0, 0, 2)], 5)] == [(0, 1), (1, 2)]




def test_rate_limit_shares_in_proportion_to_lag_and_starves_no_partition() -> None:
    a, b, c = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)
    assert rate_limit({a: 0, b: 10}, {a: 30, b: 20}, 8) == {a: 6, b: 12}
    assert rate_limit({a: 0, b: 0, c: 5}, {a: 1, b: 1, c: 5}, 100) == {a: 1, b: 1, c: 5}
    # The remainder goes to the largest lags; the total is exactly the limit.
    end = rate_limit({a: 0, b: 0, c: 0}, {a: 10, b: 10, c: 10}, 10)
    assert sum(end.values()) == 10 and end == {a: 4, b: 3, c: 3}
    # A quiet partition beside a busy one gets a row each time (it got none, for ever).
    assert rate_limit({a: 0, b: 0}, {a: 1, b: 100}, 2) == {a: 1, b: 1}
    assert rate_limit({a: 0, b: 0}, {a: 1, b: 10**6}, 100) == {a: 1, b: 99}
    # So the total passes the limit by up to one row per partition, as in Spark's source.
    assert rate_limit({a: 0, b: 0, c: 0}, {a: 1, b: 1, c: 10**6}, 2) == {a: 1, b: 1, c: 1}


def test_rows_read_before_a_skip_past_lost_data_are_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """failOnDataLoss=false, kafka-python reader: offsets 0-9 read, then retention moved the
    log start to 500, past the range's end. The rows read were dropped with the skip."""
    import zkconsumer.spark.read as spark

    Consumer = _kafka_python_out_of_range_after(10, log_start=500, log_end=10)

    props = (("fetch.backend", "kafka-python"), ("group.id", "g"),
             ("zookeeper.connect", "127.0.0.1:1"))
    rng = OffsetRange("t", 0, 0, 100, ("127.0.0.1:1",), props, False)
    monkeypatch.setitem(spark._CLIENTS, ("kafka-python", rng.bootstrap, rng.props), Consumer())
    rows = [o for batch in read_range(rng) for o in batch.column("offset").to_pylist()]
    assert rows == list(range(10))


def test_parse_options_keeps_legacy_keys_and_forces_per_batch_commits() -> None:
    opts = parse_options({"zookeeper.connect": "zk:2181/kafka", "group.id": "g",
                          "topics": "a, b,a", "auto.commit.enable": "true",
                          "rebalance.max.retries": "7", "maxoffsetspertrigger": "100",
                          "startingoffsets": '{"a": {"0": 5, "1": -2}}'})
    config = opts.config()
    assert opts.topics == ("a", "b")
    assert config.rebalance_max_retries == 7 and config.zk_chroot == "/kafka"
    assert config.auto_commit_enable is False
    assert opts.max_offsets_per_trigger == 100
    assert opts.starting == {"a": {0: 5, 1: -2}}
    # The fetch backend is each executor's choice (what it has installed), not the driver's.
    assert "fetch.backend" not in dict(opts.props)
    for bad, message in [
        ({"topics": "a", "startingoffsets": '{"a": {"x": 1}}'}, "partition 'x' of topic 'a'"),
        ({"topics": "a", "startingoffsets": '{"a": {"0": -3}}'}, "must be an integer >= 0"),
        ({"whitelist": "a", "blacklist": "b"}, "got whitelist and blacklist"),
        ({}, "got none"),
        ({"topics": "a", "offsets.storage": "kafka"}, "offsets.storage must be zookeeper"),
        ({"topics": "a", "endingoffsets": "committed", "group.id": None},
         "endingOffsets=committed needs the group.id option"),
    ]:
        props: dict[str, str] = {"zookeeper.connect": "zk:2181", "group.id": "g"}
        props.update({k: v for k, v in bad.items() if v is not None})
        for k, v in bad.items():
            if v is None:
                props.pop(k)
        with pytest.raises(ZkConsumerSourceError, match="^zkconsumer source: ") as info:
            parse_options(props)
        assert message in str(info.value)


@pytest.mark.parametrize("backend", ["kafka-python", "confluent"])
def test_corrupt_data_fails_the_read_naming_partition_and_offset(
    stack: StackInfo, names: Any, topic_factory: Any, backend: str
) -> None:
    """Executor side, without Spark: a range over a batch that fails its CRC check is a clear
    error (never rows silently missing); ranges before and after it read as usual."""
    topic = topic_factory(names.topic, 2)
    produce_with_bad_crc(stack, topic, 1)  # partition 0: 0, corrupt 1, then 2..9
    props = (("zookeeper.connect", stack.zookeeper), ("group.id", names.group),
             ("fetch.backend", backend))

    def offsets(start: int, end: int) -> list[int]:
        rng = OffsetRange(topic, 0, start, end, (stack.bootstrap,), props, True)
        return [o for batch in read_range(rng) for o in batch.column("offset").to_pylist()]

    assert offsets(0, 1) == [0]
    with pytest.raises(ZkConsumerError, match=rf"corrupt data in {topic}:0 at offset 1 "):
        offsets(0, 10)
    assert offsets(2, 10) == list(range(2, 10))


@contextmanager
def _driver(stack: StackInfo, group: str, topic: str, **options: str) -> Iterator[Any]:
    """The streaming source's driver side without Spark: Spark's calls made by hand."""
    from zkconsumer.spark import ZkConsumerStreamReader

    reader = ZkConsumerStreamReader(parse_options({
        "zookeeper.connect": stack.zookeeper, "group.id": group, "topics": topic,
        "zookeeper.session.timeout.ms": "2000", "rebalance.backoff.ms": "200", **options}))
    try:
        yield reader
    finally:
        reader.stop()


def test_a_batch_planned_during_a_rebalance_keeps_every_position(
    stack: StackInfo, names: Any, topic_factory: Any
) -> None:
    """A rebalance still under way when Spark plans: no new batch, and no partition is
    dropped from the offsets (they came back at the group's offsets, a batch behind)."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    topic = topic_factory(names.topic, 2)
    _produce(stack, topic, 2, 5)
    with _driver(stack, names.group, topic, startingOffsets="earliest") as reader:
        start = reader.initialOffset()
        assert start == INITIAL_OFFSET
        placed = reader.latestOffset(start, ReadAllAvailable())
        assert placed == {topic: {"0": 0, "1": 0}}
        assert reader.partitions(start, placed) == []  # the first batch only positions
        end = reader.latestOffset(placed, ReadAllAvailable())
        assert end == {topic: {"0": 5, "1": 5}}
        reader._member.membership.stop_connections()  # what a rebalance's step 2 says
        assert reader.latestOffset(end, ReadAllAvailable()) == end


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_a_position_beyond_the_log_end_is_lost_data(
    stack: StackInfo, names: Any, topic_factory: Any, monkeypatch: pytest.MonkeyPatch,
    fail_on_data_loss: bool,
) -> None:
    """The log end is below the position (a mistyped starting offset, a truncated log, a
    recreated topic): an error (failOnDataLoss), or the partition goes on from the log end;
    never a silent wait that skips what is written up to the old position."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    import zkconsumer.spark.readers as source

    monkeypatch.setattr(source, "LOG_END_RETRY_S", 0.05)
    topic = topic_factory(names.topic, 1)
    _produce(stack, topic, 1, 5)
    with _driver(stack, names.group, topic, startingOffsets=json.dumps({topic: {"0": 40}}),
                 failOnDataLoss=str(fail_on_data_loss).lower()) as reader:
        start = reader.initialOffset()
        if fail_on_data_loss:
            with pytest.raises(ZkConsumerError, match=rf"{topic}:0: the starting offset 40 is "
                                                      r"beyond the log end 5"):
                reader.latestOffset(start, ReadAllAvailable())
        else:
            end = reader.latestOffset(start, ReadAllAvailable())
            assert end == {topic: {"0": 5}}
        # Either way, the position beyond the log end is never recorded as the group's
        # offset: the next owner would start from it.
        with started_zk(stack.zookeeper) as zk:
            assert offset_znodes(zk, names.group, topic, 1) == ({} if fail_on_data_loss
                                                                 else {0: 5})
        if fail_on_data_loss:
            return
        assert reader.partitions(start, end) == []
        _produce(stack, topic, 1, 3)
        later = reader.latestOffset(end, ReadAllAvailable())
        assert later == {topic: {"0": 8}}
        (rng,) = reader.partitions(end, later)
        assert (rng.start, rng.end) == (5, 8)

    # A position of a running query beyond the log end (the topic recreated, say).
    with _driver(stack, names("resumed"), topic,
                 failOnDataLoss=str(fail_on_data_loss).lower()) as reader:
        reader.initialOffset()
        resumed = {topic: {"0": 40}}
        if fail_on_data_loss:
            with pytest.raises(ZkConsumerError, match=rf"{topic}:0: our position 40 is "
                                                      r"beyond the log end 8"):
                reader.latestOffset(resumed, ReadAllAvailable())
        else:
            end = reader.latestOffset(resumed, ReadAllAvailable())
            assert end == {topic: {"0": 8}} and reader.partitions(resumed, end) == []
        with started_zk(stack.zookeeper) as zk:
            # Moved back: the group starts there too (a position beyond the log end is never
            # written).
            assert offset_znodes(zk, names("resumed"), topic, 1) == ({} if fail_on_data_loss
                                                                      else {0: 8})


@pytest.mark.parametrize("then", ["rebalance", "restart"])
def test_a_partition_moved_back_to_its_log_end_is_read_on_from_there(
    stack: StackInfo, names: Any, topic_factory: Any, monkeypatch: pytest.MonkeyPatch,
    then: str,
) -> None:
    """failOnDataLoss=false, a position beyond a truncated log's end: moved back to the log
    end, and read on from there. Spark's commit of the batch before (beyond the log end),
    which comes after the plan, must not overwrite that in the group; nor may a rebalance or
    a restart then take the group's offset beyond the log end: what is written after the
    truncation would be skipped."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    import zkconsumer.spark.readers as source

    monkeypatch.setattr(source, "LOG_END_RETRY_S", 0.05)
    topic = topic_factory(names.topic, 1)
    tp = TopicPartition(topic, 0)
    _produce(stack, topic, 1, 5)
    before = {topic: {"0": 40}}  # where the batch before ended, at offset 40 of the old log
    with started_zk(stack.zookeeper) as zk:
        ZkOffsetStore(zk, names.group).commit({tp: 30})  # the group's, from before that one
        with _driver(stack, names.group, topic, failOnDataLoss="false") as reader:
            reader.initialOffset()
            moved = reader.latestOffset(before, ReadAllAvailable())
            assert moved == {topic: {"0": 5}} and reader.partitions(before, moved) == []
            reader.commit(before)  # Spark: the batch before is done, after the plan
            assert offset_znodes(zk, names.group, topic, 1) == {0: 5}
            if then == "rebalance":
                # One that keeps the partition here: its release commits where we are.
                member = reader._join()
                member.membership.stop_connections()
                member.membership.before_releasing_partitions({topic: {0}})
                assert offset_znodes(zk, names.group, topic, 1) == {0: 5}
                member.membership.before_starting_fetchers(
                    member.consumer_id, {topic: {0: f"{member.consumer_id}-0"}})
                _produce(stack, topic, 1, 3)
                end = reader.latestOffset(moved, ReadAllAvailable())
                (rng,) = reader.partitions(moved, end)
                assert (rng.start, rng.end) == (5, 8)
                return
        # A restart, the group's offset beyond the log end all the same (written by an older
        # version, or before the log was truncated).
        ZkOffsetStore(zk, names.group).commit({tp: 40})
        _produce(stack, topic, 1, 3)
        with _driver(stack, names.group, topic, failOnDataLoss="false") as reader:
            reader.initialOffset()
            end = reader.latestOffset(moved, ReadAllAvailable())
            (rng,) = reader.partitions(moved, end)
            assert (rng.start, rng.end) == (5, 8)
            assert offset_znodes(zk, names.group, topic, 1) == {0: 5}


def test_the_first_batch_replayed_after_a_restart_reads_what_it_was_planned_to(
    stack: StackInfo, names: Any, topic_factory: Any
) -> None:
    """Spark replays the first batch after a restart from initialOffset() asked again, in a
    new process: "latest" resolved again there would skip what was written meanwhile. The
    first batch only positions, so its replay is the same whoever answers."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    topic = topic_factory(names.topic, 1)
    _produce(stack, topic, 1, 5)
    with _driver(stack, names.group, topic, startingOffsets="latest") as reader:
        planned = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
        assert planned == {topic: {"0": 5}}
    # The query died before the first batch was done; meanwhile 3 more are written.
    _produce(stack, topic, 1, 3)
    with _driver(stack, names.group, topic, startingOffsets="latest") as reader:
        assert reader.partitions(reader.initialOffset(), planned) == []
        end = reader.latestOffset(planned, ReadAllAvailable())
        (rng,) = reader.partitions(planned, end)
        assert (rng.start, rng.end) == (5, 8)


def test_a_rewind_with_starting_offsets_survives_a_rebalance(
    stack: StackInfo, names: Any, topic_factory: Any
) -> None:
    """startingOffsets positions a new query's partitions and writes them to the group, so a
    rebalance before the first rows does not take the group's older offsets instead."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    topic = topic_factory(names.topic, 1)
    _produce(stack, topic, 1, 5)
    with started_zk(stack.zookeeper) as zk:
        ZkOffsetStore(zk, names.group).commit({TopicPartition(topic, 0): 5})
        with _driver(stack, names.group, topic, startingOffsets="earliest") as reader:
            placed = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
            assert placed == {topic: {"0": 0}}
            assert offset_znodes(zk, names.group, topic, 1) == {0: 0}
            member = reader._join()
            thread = f"{member.consumer_id}-0"
            member.membership.stop_connections()  # a rebalance that gives the same back
            member.membership.before_starting_fetchers(member.consumer_id,
                                                       {topic: {0: thread}})
            end = reader.latestOffset(placed, ReadAllAvailable())
            (rng,) = reader.partitions(placed, end)
            assert (rng.start, rng.end) == (0, 5)


def test_the_first_positions_wait_for_a_rebalance_under_way(
    stack: StackInfo, names: Any, topic_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The starting offsets apply to what the member owns, so never in the middle of a
    rebalance (it owns nothing then): no batch until it ends. A Trigger.AvailableNow run,
    which an empty batch would end, waits for it instead, and fails clearly if it lasts."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    import zkconsumer.spark.readers as source

    topic = topic_factory(names.topic, 2)
    _produce(stack, topic, 2, 5)
    with _driver(stack, names.group, topic, startingOffsets="earliest") as reader:
        start = reader.initialOffset()
        member = reader._join()
        m = member.membership
        wait_until(lambda: len(m.snapshot()[1]) == 2, 20, "the member owning both partitions")
        thread = f"{member.consumer_id}-0"
        m.stop_connections()  # a rebalance's step 2: the member owns nothing until it ends
        assert reader.latestOffset(start, ReadAllAvailable()) == start  # no batch
        m.before_starting_fetchers(member.consumer_id, {topic: {0: thread, 1: thread}})
        assert reader.latestOffset(start, ReadAllAvailable()) == {topic: {"0": 0, "1": 0}}

    with _driver(stack, names("now"), topic, startingOffsets="earliest") as reader:
        start = reader.initialOffset()
        reader.prepareForTriggerAvailableNow()
        member = reader._join()
        m = member.membership
        wait_until(lambda: len(m.snapshot()[1]) == 2, 20, "the member owning both partitions")
        thread = f"{member.consumer_id}-0"
        m.stop_connections()
        # Longer than one planning wait (2.2 s with the driver's settings).
        timer = threading.Timer(3.0, m.before_starting_fetchers,
                                (member.consumer_id, {topic: {0: thread, 1: thread}}))
        timer.start()
        assert reader.latestOffset(start, ReadAllAvailable()) == {topic: {"0": 0, "1": 0}}
        timer.join()

        monkeypatch.setattr(source, "AVAILABLE_NOW_WAITS", 1)
        m.stop_connections()  # and this rebalance never ends
        with pytest.raises(ZkConsumerError, match="a rebalance is still under way after 2 s; "
                                                  "the Trigger.AvailableNow run cannot know"):
            reader.latestOffset(start, ReadAllAvailable())
        m.before_starting_fetchers(member.consumer_id, {topic: {0: thread, 1: thread}})
        monkeypatch.setattr(member, "zk_connected", lambda: False)  # nor does this outage
        with pytest.raises(ZkConsumerError, match="ZooKeeper is unreachable after 2 s; "
                                                  "the Trigger.AvailableNow run cannot know"):
            reader.latestOffset(start, ReadAllAvailable())


def test_new_positions_are_written_before_their_batch_runs(
    stack: StackInfo, names: Any, topic_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Positions that differ from the group's (a rewind) are written strictly: when the write
    fails, no batch (a rebalance or restart would take the group's older offsets). Where a
    batch ended is written best-effort: the next batch writes it. A batch of positions only
    is not one a rebalance waits for."""
    from kazoo.exceptions import ConnectionLoss
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    topic = topic_factory(names.topic, 1)
    _produce(stack, topic, 1, 5)
    with started_zk(stack.zookeeper) as zk:
        ZkOffsetStore(zk, names.group).commit({TopicPartition(topic, 0): 5})
        with _driver(stack, names.group, topic, startingOffsets="earliest") as reader:
            member = reader._join()

            def lost(offsets: Any) -> int:
                raise ConnectionLoss()

            monkeypatch.setattr(member.store, "commit", lost)
            start = reader.initialOffset()
            assert reader.latestOffset(start, ReadAllAvailable()) == start  # no batch
            assert offset_znodes(zk, names.group, topic, 1) == {0: 5}
            monkeypatch.undo()
            placed = reader.latestOffset(start, ReadAllAvailable())
            assert placed == {topic: {"0": 0}}
            assert offset_znodes(zk, names.group, topic, 1) == {0: 0}
            assert member.membership.in_flight is None  # no rows: nothing to wait for
            end = reader.latestOffset(placed, ReadAllAvailable())
            assert end == {topic: {"0": 5}}
            assert member.membership.in_flight == {TopicPartition(topic, 0): 5}
            _produce(stack, topic, 1, 2)
            monkeypatch.setattr(member.store, "commit", lost)
            assert reader.latestOffset(end, ReadAllAvailable()) == {topic: {"0": 7}}
            assert offset_znodes(zk, names.group, topic, 1) == {0: 0}


def test_zookeeper_out_of_reach_pauses_the_stream_without_failing_it(
    stack: StackInfo, names: Any, topic_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Planning asks ZooKeeper whether it can be reached: while it cannot, no batch (the
    ownership is unknown) and no commit, rather than a failed query or a thread blocked in
    kazoo until the outage ends. The next batch writes the offsets."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    topic = topic_factory(names.topic, 1)
    _produce(stack, topic, 1, 5)
    with _driver(stack, names.group, topic, startingOffsets="earliest") as reader:
        placed = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
        end = reader.latestOffset(placed, ReadAllAvailable())
        assert end == {topic: {"0": 5}}
        member = reader._join()
        monkeypatch.setattr(member, "zk_connected", lambda: False)
        _produce(stack, topic, 1, 3)
        assert reader.latestOffset(end, ReadAllAvailable()) == end
        reader.commit(end)  # Spark's commit of the batch: logged, not raised
        with started_zk(stack.zookeeper) as zk:
            assert offset_znodes(zk, names.group, topic, 1) == {0: 0}
            monkeypatch.undo()
            assert reader.latestOffset(end, ReadAllAvailable()) == {topic: {"0": 8}}
            assert offset_znodes(zk, names.group, topic, 1) == {0: 5}


def test_a_partition_added_after_the_start_is_read_from_its_first_offset(
    stack: StackInfo, names: Any, topic_factory: Any
) -> None:
    """auto.offset.reset=largest places the partitions a query owns when it starts; one with
    no committed offset found later is new (each placed one was written to the group), and is
    read from its start, as Spark's Kafka source does: else what was written to it is lost."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    topic = topic_factory(names.topic, 2)
    _produce(stack, topic, 2, 3)
    with _driver(stack, names.group, topic, **{"auto.offset.reset": "largest"}) as reader:
        member = reader._join()
        m = member.membership
        wait_until(lambda: len(m.snapshot()[1]) == 2, 20, "the member owning both partitions")
        thread = f"{member.consumer_id}-0"
        # As if the topic had one partition when the query started.
        m.stop_connections()
        m.before_starting_fetchers(member.consumer_id, {topic: {0: thread}})
        placed = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
        assert placed == {topic: {"0": 3}}
        m.stop_connections()
        m.before_starting_fetchers(member.consumer_id, {topic: {0: thread, 1: thread}})
        both = reader.latestOffset(placed, ReadAllAvailable())
        assert both == {topic: {"0": 3, "1": 0}}
        end = reader.latestOffset(both, ReadAllAvailable())
        assert [(r.partition, r.start, r.end) for r in reader.partitions(both, end)] == [
            (1, 0, 3)]


def test_a_partition_the_group_consumed_beyond_our_position_is_taken_at_the_groups_offset(
    stack: StackInfo, names: Any, topic_factory: Any
) -> None:
    """After a rebalance, another member may have owned the partition meanwhile and committed
    beyond our checkpoint: the partition is dropped for one batch, then placed at the group's
    offset (not read twice), and our older end is never written back over it."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    topic = topic_factory(names.topic, 1)
    _produce(stack, topic, 1, 10)
    with started_zk(stack.zookeeper) as zk, _driver(
            stack, names.group, topic, startingOffsets="earliest") as reader:
        placed = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
        end = reader.latestOffset(placed, ReadAllAvailable())
        assert end == {topic: {"0": 10}}
        member = reader._join()
        thread = f"{member.consumer_id}-0"
        m = member.membership
        m.stop_connections()  # the partition goes to another member, who consumes to 7 ...
        ZkOffsetStore(zk, names.group).commit({TopicPartition(topic, 0): 7})
        m.before_starting_fetchers(member.consumer_id, {topic: {0: thread}})  # ... and back
        # Spark had run the batch to 10 on the old ownership: it commits it now.
        reader.commit(end)
        assert offset_znodes(zk, names.group, topic, 1) == {0: 7}
        ZkOffsetStore(zk, names.group).commit({TopicPartition(topic, 0): 12})
        _produce(stack, topic, 1, 5, first=10)
        dropped = reader.latestOffset(end, ReadAllAvailable())
        assert dropped == {}  # not read from 10: the group is at 12
        again = reader.latestOffset(dropped, ReadAllAvailable())
        assert again == {topic: {"0": 12}}
        final = reader.latestOffset(again, ReadAllAvailable())
        (rng,) = reader.partitions(again, final)
        assert (rng.start, rng.end) == (12, 15)


def test_the_hand_over_waits_for_a_batch_with_rows_and_commits_where_it_ended() -> None:
    """A rebalance releasing partitions waits until Spark plans the next batch (the last one
    is then done) and commits where it ended; a batch of positions only is not waited for."""
    from zkconsumer.spark.membership import _Membership

    tp = TopicPartition("t", 0)
    m = _Membership(release_wait_s=30)
    committed: list[dict[TopicPartition, int]] = []
    m.commit_fn = lambda offsets: committed.append(dict(offsets)) or len(offsets)
    m.before_starting_fetchers("c", {"t": {0: "c-0"}})
    generation, _, _ = m.begin_planning(1)
    m.verified[tp] = generation
    m.end_planning({tp: 10})  # a batch with rows, to 10, runs
    releasing = threading.Thread(target=m.before_releasing_partitions, args=({"t": {0}},))
    releasing.start()
    releasing.join(0.5)
    assert releasing.is_alive() and committed == []  # waits for the batch
    m.batch_done({tp: 10})  # Spark plans the next one: the batch is done
    releasing.join(10)
    assert not releasing.is_alive() and committed == [{tp: 10}]

    m.end_planning(None)  # a batch of positions only is not in flight
    started = threading.Thread(target=m.before_releasing_partitions, args=({"t": {0}},))
    started.start()
    started.join(10)
    assert not started.is_alive()


# -- lost data at the log end, option checks, executor clients ------------------------------------


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
@pytest.mark.parametrize("backend", ["kafka-python", "confluent"])
def test_a_range_beyond_the_log_end_is_lost_data_not_a_stall(
    stack: StackInfo, names: Any, topic_factory: Any, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture, backend: str, fail_on_data_loss: bool,
) -> None:
    """A planned range that runs past the log end (the topic recreated smaller, the log
    truncated, after planning): the data-loss error, or (failOnDataLoss=false) the rows that
    exist and a warning, at once when the broker answers out of range, else once the log end
    has stayed there for LOG_END_CONFIRM_S; never the no-progress guard's wait."""
    import time

    import zkconsumer.spark.read as source

    monkeypatch.setattr(source, "READ_STALL_S", 10.0)  # the no-progress guard, kept
    monkeypatch.setattr(source, "LOG_END_RETRY_S", 0.05)
    monkeypatch.setattr(source, "LOG_END_CONFIRM_S", 1.0)  # 30 s: a lagging high watermark
    topic = topic_factory(names.topic, 1)
    _produce(stack, topic, 1, 3)  # log end 3
    props = (("zookeeper.connect", stack.zookeeper), ("group.id", names.group),
             ("fetch.backend", backend))
    for start, end, rows in [(0, 10, [0, 1, 2]), (5, 12, [])]:
        rng = OffsetRange(topic, 0, start, end, (stack.bootstrap,), props, fail_on_data_loss)
        began = time.monotonic()
        caplog.clear()
        lost = max(start, 3)
        if fail_on_data_loss:
            with pytest.raises(ZkConsumerError, match=rf"offsets \[{lost}, {end}\) of {topic}:0 "
                                                      r"are beyond its log end 3.*set "
                                                      r"failOnDataLoss=false"):
                list(read_range(rng))
        else:
            with caplog.at_level("WARNING", logger="zkconsumer.spark"):
                got = [o for b in read_range(rng) for o in b.column("offset").to_pylist()]
            assert got == rows
            assert f"offsets [{lost}, {end}) of {topic}:0 are beyond its log end 3" in caplog.text
        assert time.monotonic() - began < 8.0


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_out_of_range_beyond_the_log_end_is_not_reported_as_retention(
    monkeypatch: pytest.MonkeyPatch, fail_on_data_loss: bool
) -> None:
    """A Kafka broker answers OFFSET_OUT_OF_RANGE for a fetch beyond the log end. That is no
    data retention deleted (whose error says to set failOnDataLoss=false, even when it is):
    with failOnDataLoss=false the range ends at the log end, with either client."""
    from confluent_kafka import KafkaError

    import zkconsumer.spark.read as spark

    Consumer = _kafka_python_out_of_range_after(3, log_start=0, log_end=3)

    props = (("fetch.backend", "kafka-python"), ("group.id", "g"),
             ("zookeeper.connect", "127.0.0.1:1"))
    rng = OffsetRange("t", 0, 0, 10, ("127.0.0.1:1",), props, fail_on_data_loss)
    monkeypatch.setitem(spark._CLIENTS, ("kafka-python", rng.bootstrap, rng.props), Consumer())
    beyond = r"offsets \[3, 10\) of t:0 are beyond its log end 3"
    if fail_on_data_loss:
        with pytest.raises(ZkConsumerError, match=beyond):
            list(read_range(rng))
    else:
        assert [o for b in read_range(rng) for o in b.column("offset").to_pylist()] == [0, 1, 2]

    class Message:  # confluent-kafka's error event
        def error(self) -> KafkaError:
            return KafkaError(KafkaError.OFFSET_OUT_OF_RANGE)

        def offset(self) -> int:
            return 3

    class Confluent:
        def get_watermark_offsets(self, tp: Any, timeout: float | None = None
                                  ) -> tuple[int, int]:
            return 0, 3

    if fail_on_data_loss:
        with pytest.raises(ZkConsumerError, match=beyond):
            spark._confluent_errors(Confluent(), rng, [Message()], 3)
    else:
        assert spark._confluent_errors(Confluent(), rng, [Message()], 3) == ([], 3, True,
                                                                            None)


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_a_batch_ending_beyond_the_log_end_fails_when_planned_or_ends_at_the_log_end(
    stack: StackInfo, names: Any, topic_factory: Any, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture, fail_on_data_loss: bool,
) -> None:
    """endingOffsets past the log end: a clear error when the read is planned (not a task
    stalled on offsets that are not there), or with failOnDataLoss=false a read up to the
    log end, as Spark's Kafka source skips what is not there."""
    import zkconsumer.spark.readers as source
    from zkconsumer.spark import ZkConsumerBatchReader

    monkeypatch.setattr(source, "LOG_END_RETRY_S", 0.05)
    topic = topic_factory(names.topic, 3)
    _produce(stack, topic, 3, 5)  # log ends 5
    reader = ZkConsumerBatchReader(parse_options({
        "zookeeper.connect": stack.zookeeper, "topics": topic,
        "startingOffsets": json.dumps({topic: {"2": 7}}),
        "endingOffsets": json.dumps({topic: {"0": 8, "1": 3, "2": 9}}),
        "failOnDataLoss": str(fail_on_data_loss).lower()}))
    if fail_on_data_loss:
        with pytest.raises(ZkConsumerSourceError, match=rf"^zkconsumer source: endingOffsets: "
                                                        rf"{topic}:0 ends at 8, beyond its log "
                                                        r"end 5"):
            reader.partitions()
        return
    with caplog.at_level("WARNING", logger="zkconsumer.spark"):
        ranges = reader.partitions()
    # Partition 2 starts beyond the log end too: nothing of it is there to read.
    assert [(r.partition, r.start, r.end) for r in ranges] == [(0, 0, 5), (1, 0, 3)]
    assert f"endingOffsets: {topic}:0 ends at 8, beyond its log end 5" in caplog.text
    assert f"endingOffsets: {topic}:2 ends at 9, beyond its log end 5" in caplog.text


def test_options_of_the_other_kind_of_read_fail_and_keys_without_effect_warn_once(
    stack: StackInfo, names: Any, topic_factory: Any, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    import zkconsumer.spark.options as source
    from zkconsumer.spark import SCHEMA, ZkConsumerDataSource

    monkeypatch.setattr(source, "_WARNED", set(), raising=False)
    topic = topic_factory(names.topic, 1)
    base = {"zookeeper.connect": stack.zookeeper, "group.id": names.group, "topics": topic}

    def batch(**options: str) -> Any:
        return ZkConsumerDataSource({**base, **options}).reader(SCHEMA)

    def stream(**options: str) -> Any:
        return ZkConsumerDataSource({**base, **options}).streamReader(SCHEMA)

    for make, options, message in [
        (batch, {"streams": "3"}, "streams applies to streaming queries only "
                                  "(spark.readStream), not to batch reads"),
        (batch, {"maxOffsetsPerTrigger": "9", "streams": "1"},
         "maxOffsetsPerTrigger and streams apply to streaming queries only"),
        (stream, {"endingOffsets": "latest"}, "endingOffsets applies to batch reads only "
                                              "(spark.read), not to streams"),
    ]:
        with pytest.raises(ZkConsumerSourceError, match=re.escape(message)):
            make(**options)

    def warnings() -> list[str]:
        return [r.getMessage() for r in caplog.records if "has no effect" in r.getMessage()]

    with caplog.at_level("WARNING", logger="zkconsumer.spark"):
        keys = {"partition.assignment.strategy": "roundrobin", "consumer.timeout.ms": "100",
                "auto.commit.enable": "false", "auto.commit.interval.ms": "1000"}
        batch(**keys)
        assert warnings() == [
            "zkconsumer source: the auto.commit.interval.ms option has no effect in batch "
            "reads (a batch read commits nothing)",
            "zkconsumer source: the consumer.timeout.ms option has no effect in batch reads "
            "(the source iterates no message stream)",
            "zkconsumer source: the partition.assignment.strategy option has no effect in "
            "batch reads (a batch read joins no group)"]
        caplog.clear()
        batch(**keys)  # once per process
        # A stream uses the assignment strategy; auto.commit.enable=true is overridden.
        stream(**{**keys, "auto.commit.enable": "true"})
        assert warnings() == [
            "zkconsumer source: the auto.commit.enable option has no effect in streams (the "
            "source commits the group's offsets once per micro-batch)",
            "zkconsumer source: the auto.commit.interval.ms option has no effect in streams "
            "(the source commits the group's offsets once per micro-batch)",
            "zkconsumer source: the consumer.timeout.ms option has no effect in streams (the "
            "source iterates no message stream)"]


def test_a_misspelt_source_option_suggests_its_name() -> None:
    base = {"zookeeper.connect": "zk:2181", "group.id": "g", "topics": "a"}
    for key, message in [  # Spark passes option names lower-cased
        ("startingoffset", "unknown configuration key 'startingoffset' (did you mean "
                           "'startingOffsets'?)"),
        ("maxoffsetpertrigger", "(did you mean 'maxOffsetsPerTrigger'?)"),
        ("failondatalos", "(did you mean 'failOnDataLoss'?)"),
        ("stream", "(did you mean 'streams'?)"),
        # Legacy keys still get theirs.
        ("fetch.mesage.max.bytes", "(did you mean 'fetch.message.max.bytes'?)"),
    ]:
        with pytest.raises(ZkConsumerSourceError, match="^zkconsumer source: ") as info:
            parse_options({**base, key: "1"})
        assert message in str(info.value), (key, str(info.value))
    # Not reported as a missing subscription.
    with pytest.raises(ZkConsumerSourceError, match=r"'topic' \(did you mean 'topics'\?\)"):
        parse_options({"zookeeper.connect": "zk:2181", "topic": "a"})


def test_options_of_sparks_kafka_source_say_what_to_give_instead() -> None:
    """Moving a query from format("kafka"): its options are no misspellings of ours
    (startingOffsetsByTimestamp was "did you mean 'startingOffsets'?")."""
    base = {"zookeeper.connect": "zk:2181", "group.id": "g"}
    for options, message in [
        ({"subscribe": "a"}, "subscribe: name the topics with the topics option"),
        ({"subscribepattern": "a.*"}, "subscribepattern: give the regex as the whitelist "
                                      "option"),
        ({"topics": "a", "startingoffsetsbytimestamp": "{}"},
         "startingoffsetsbytimestamp: offsets by timestamp are not supported: give offsets "
         "(startingOffsets, endingOffsets)"),
        ({"topics": "a", "maxrecordsperpartition": "8"},
         "maxrecordsperpartition: an option of Spark's Kafka source this source does not have"),
    ]:
        with pytest.raises(ZkConsumerSourceError) as info:
            parse_options({**base, **options})
        assert str(info.value) == f"zkconsumer source: options of Spark's Kafka source: " \
                                  f"{message}", options


def test_executor_clients_are_bounded_and_one_in_use_is_never_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Python worker that runs reads with many group.ids keeps a few idle clients, closing
    the least recently used, never the one a running task reads with."""
    from collections import OrderedDict, namedtuple

    import kafka

    import zkconsumer.spark.read as spark

    record = namedtuple("record", "offset key value timestamp")
    made: list[Any] = []

    class Consumer:  # kafka-python's KafkaConsumer over an endless log
        def __init__(self, **kwargs: Any) -> None:
            self.closed = False
            self.position_ = 0
            made.append(self)

        def assign(self, tps: list[Any]) -> None:
            assert not self.closed
            self.tp = tps[0]

        def seek(self, tp: Any, offset: int) -> None:
            self.position_ = offset

        def poll(self, timeout_ms: int, max_records: int) -> dict[Any, list[Any]]:
            assert not self.closed
            first, self.position_ = self.position_, self.position_ + max_records
            return {self.tp: [record(o, b"k", b"v", 1000) for o in range(first, self.position_)]}

        def position(self, tp: Any) -> int:
            return self.position_

        def highwater(self, tp: Any) -> int:
            return 10**9

        def unsubscribe(self) -> None: ...

        def close(self, **kwargs: Any) -> None:
            self.closed = True

    monkeypatch.setattr(kafka, "KafkaConsumer", Consumer)
    monkeypatch.setattr(spark, "_CLIENTS", OrderedDict())
    monkeypatch.setattr(spark, "ARROW_BATCH_ROWS", 1)  # a batch per row: a task can pause
    bound = 3
    monkeypatch.setattr(spark, "MAX_IDLE_CLIENTS", bound, raising=False)

    def rng(group: str) -> OffsetRange:
        props = (("fetch.backend", "kafka-python"), ("group.id", group),
                 ("zookeeper.connect", "127.0.0.1:1"))
        return OffsetRange("t", 0, 0, 3, ("127.0.0.1:1",), props, True)

    def offsets(batches: Iterator[Any]) -> list[int]:
        return [o for b in batches for o in b.column("offset").to_pylist()]

    running = read_range(rng("running"))
    assert offsets([next(running)]) == [0]  # a task reading, paused between batches
    for i in range(10):
        assert offsets(read_range(rng(f"g{i}"))) == [0, 1, 2]
    assert offsets(read_range(rng("g9"))) == [0, 1, 2]  # reused: no new client
    assert len(made) == 11
    open_clients = [c for c in made if not c.closed]
    assert made[0] in open_clients and len(open_clients) == bound + 1
    assert offsets(running) == [1, 2]
    assert not made[0].closed and len([c for c in made if not c.closed]) == bound



# -- a lagging high watermark (a leader change) ----------------------------------------------------


class _LaggingLog:
    """Offsets 0-9 of t:0 whose reader reaches 5, then sees a high watermark of 3 (a new
    leader's, lagging the old one's until its followers catch up) for ``lag_s`` seconds
    (None: for ever), then 5-9. ``lookups`` counts the log end lookups, ``clients`` the
    lookup clients made."""

    def __init__(self, lag_s: float | None) -> None:
        self.lag_s = lag_s
        self.lag_from: float | None = None
        self.lookups = 0
        self.clients = 0

    def high(self) -> int:
        import time

        if self.lag_from is None:
            return 5
        lagging = self.lag_s is None or time.monotonic() < self.lag_from + self.lag_s
        return 3 if lagging else 10

    def fetch(self, position: int, most: int) -> tuple[list[int], int | None]:
        """A fetch at ``position``: the offsets it answers and the answer's high watermark
        (None: no answer yet). Sleeps a moment when it has no offsets."""
        import time

        if position < 5:
            last = min(5, position + most)
            if last == 5:
                self.lag_from = time.monotonic()  # the leader changes after this answer
            return list(range(position, last)), 5
        high = self.high()
        offsets = list(range(position, min(high, position + most)))
        if not offsets:
            time.sleep(0.01)
        return offsets, high

    def lookup_class(self) -> Any:
        log = self

        class Lookup:  # zkconsumer.spark.offsets._OffsetLookup
            def __init__(self, config: Any, bootstrap: Any) -> None:
                log.clients += 1

            def latest(self, tps: list[Any]) -> dict[Any, int]:
                log.lookups += 1
                return {tps[0]: log.high()}

            def close(self) -> None: ...

        return Lookup


def _kafka_python_fake(log: _LaggingLog) -> Any:
    from collections import namedtuple

    record = namedtuple("record", "offset key value timestamp")

    class Consumer:  # kafka-python's KafkaConsumer
        position_ = 0
        high: int | None = None  # of the last fetch answer

        def assign(self, tps: list[Any]) -> None:
            self.tp = tps[0]

        def seek(self, tp: Any, offset: int) -> None:
            self.position_ = offset

        def poll(self, timeout_ms: int, max_records: int) -> dict[Any, list[Any]]:
            offsets, high = log.fetch(self.position_, max_records)
            self.high = high if high is not None else self.high
            if not offsets:
                return {}
            self.position_ = offsets[-1] + 1
            return {self.tp: [record(o, b"k", b"v", 1000) for o in offsets]}

        def position(self, tp: Any) -> int:
            return self.position_

        def highwater(self, tp: Any) -> int | None:
            return self.high

        def unsubscribe(self) -> None: ...
        def close(self, **kwargs: Any) -> None: ...

    return Consumer()


def _confluent_fake(log: _LaggingLog, cached: tuple[int, int] = (-1001, -1001)) -> Any:
    """``cached``: the watermarks librdkafka has before this task's first fetch answer."""
    from types import SimpleNamespace

    Message = _ConfluentMessage

    class Consumer:  # confluent-kafka's Consumer
        def __init__(self) -> None:
            self.position_ = 0
            self.cached = cached

        def assign(self, tps: list[Any]) -> None:
            self.position_ = tps[0].offset

        def consume(self, num: int, timeout: float) -> list[Any]:
            offsets, high = log.fetch(self.position_, num)
            if high is not None:
                self.cached = (0, high)
            if offsets:
                self.position_ = offsets[-1] + 1
            return [Message(o) for o in offsets]

        def position(self, tps: list[Any]) -> list[Any]:
            return [SimpleNamespace(offset=self.position_)]

        def get_watermark_offsets(self, tp: Any, cached: bool = False,
                                  timeout: float | None = None) -> tuple[int, int]:
            return self.cached

        def unassign(self) -> None: ...
        def close(self) -> None: ...

    return Consumer()


def _offsets_read(rng: OffsetRange) -> list[int]:
    return [o for b in read_range(rng) for o in b.column("offset").to_pylist()]


def test_a_log_truncated_below_a_log_end_seen_earlier_is_found_within_the_window(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The task's first answer showed the log end past the range; the log is then truncated
    inside the range (an unclean leader election: a fetch there is legal, no out-of-range
    answer). The log end seen first must not keep the check off: the range ends once the
    new log end has stayed for the window, not at the no-progress guard's error."""
    import time

    import zkconsumer.spark.read as spark
    from zkconsumer.spark.read import _LogEndCheck

    monkeypatch.setattr(spark, "LOG_END_RETRY_S", 0.01)
    monkeypatch.setattr(spark, "LOG_END_CONFIRM_S", 0.3)

    class Lookup:  # zkconsumer.spark.offsets._OffsetLookup: the leader's log ends at 7 now
        def __init__(self, config: Any, bootstrap: Any) -> None: ...

        def latest(self, tps: Any) -> dict[Any, int]:
            return dict.fromkeys(tps, 7)

        def close(self) -> None: ...

    monkeypatch.setattr(spark, "_OffsetLookup", Lookup)
    props = (("fetch.backend", "kafka-python"), ("group.id", "g"),
             ("zookeeper.connect", "127.0.0.1:1"))
    rng = OffsetRange("t", 0, 0, 10, ("127.0.0.1:1",), props, False)
    check = _LogEndCheck(rng, ConsumerConfig(dict(props)))
    assert check.log_end(2, 12) is None  # the first answer: log end 12, past the range
    deadline = time.monotonic() + 5
    found = None
    while found is None and time.monotonic() < deadline:
        found = check.log_end(7, 7)  # the reader at 7, the answers' high watermark 7
        time.sleep(0.01)
    assert found == 7
    check.close()


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
@pytest.mark.parametrize("lag", ["shorter", "for ever"])
@pytest.mark.parametrize("backend", ["kafka-python", "confluent"])
def test_a_lagging_high_watermark_ends_a_range_only_once_it_stays_low_for_the_window(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, backend: str, lag: str,
    fail_on_data_loss: bool,
) -> None:
    """After a leader change the new leader's high watermark may stay below the position
    for up to replica.lag.time.max.ms: offsets that exist are neither skipped nor a failed
    task then. A log end that stays low for LOG_END_CONFIRM_S is lost data, and the
    no-progress guard never fires first meanwhile; the lookups reuse one client."""
    import time
    from collections import OrderedDict

    import zkconsumer.spark.read as spark

    window = 1.0
    monkeypatch.setattr(spark, "LOG_END_CONFIRM_S", window, raising=False)
    monkeypatch.setattr(spark, "LOG_END_RETRY_S", 0.05)
    monkeypatch.setattr(spark, "READ_STALL_S", 0.3)  # shorter than the window: must wait
    log = _LaggingLog(0.4 if lag == "shorter" else None)
    monkeypatch.setattr(spark, "_OffsetLookup", log.lookup_class())
    props = (("fetch.backend", backend), ("group.id", "g"), ("zookeeper.connect", "127.0.0.1:1"))
    rng = OffsetRange("t", 0, 0, 10, ("127.0.0.1:1",), props, fail_on_data_loss)
    client = _kafka_python_fake(log) if backend == "kafka-python" else _confluent_fake(log)
    monkeypatch.setattr(spark, "_CLIENTS", OrderedDict({(backend, rng.bootstrap, props): client}))

    began = time.monotonic()
    got: list[int] = []
    with caplog.at_level("WARNING", logger="zkconsumer.spark"):
        if lag == "shorter" or not fail_on_data_loss:
            got = _offsets_read(rng)
        else:
            with pytest.raises(ZkConsumerError, match=r"offsets \[5, 10\) of t:0 are beyond "
                                                      r"its log end 3, where it stayed for"):
                list(read_range(rng))
    took = time.monotonic() - began
    assert log.lag_from is not None and log.lookups >= 1
    assert "no progress" not in caplog.text
    if lag == "shorter":
        assert got == list(range(10))
        assert "beyond its log end" not in caplog.text
        assert log.lookups <= 0.4 / 0.05 + 2 and took < window
    else:
        if not fail_on_data_loss:
            assert got == list(range(5))
            assert "offsets [5, 10) of t:0 are beyond its log end 3" in caplog.text
        assert window <= took < window + 2.0
        assert log.lookups <= window / 0.05 + 2
    assert log.clients == 1  # one lookup client for the window, not one per poll


def test_a_reused_confluent_clients_cached_watermarks_are_no_hint_of_the_log_end(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    """librdkafka keeps a partition's cached watermarks across unassign/assign: before this
    task's first fetch answer they are the last task's (here: high watermark 5 at this
    range's start 5). They cost no lookup and end nothing; once an answer is due, the same
    watermarks are this task's (the log truncated to 5: the range ends after the window)."""
    import time
    from collections import OrderedDict

    import zkconsumer.spark.read as spark

    monkeypatch.setattr(spark, "LOG_END_CONFIRM_S", 0.5, raising=False)
    monkeypatch.setattr(spark, "LOG_END_RETRY_S", 0.5)
    monkeypatch.setattr(spark, "READ_STALL_S", 10.0)
    props = (("fetch.backend", "confluent"), ("group.id", "g"),
             ("zookeeper.connect", "127.0.0.1:1"))

    class SlowAnswer(_LaggingLog):  # the first fetch answer comes after 0.3 s: 5-9
        def fetch(self, position: int, most: int) -> tuple[list[int], int | None]:
            if self.lag_from is None:
                self.lag_from = time.monotonic()
            if time.monotonic() < self.lag_from + 0.3:
                time.sleep(0.01)
                return [], None
            return list(range(position, min(10, position + most))), 10

        def high(self) -> int:
            return 10

    class Truncated(_LaggingLog):  # truncated to 5 after the range was planned
        def fetch(self, position: int, most: int) -> tuple[list[int], int | None]:
            time.sleep(0.01)
            return [], 5

        def high(self) -> int:
            return 5

    for log, rows in [(SlowAnswer(None), [5, 6, 7, 8, 9]), (Truncated(None), [])]:
        rng = OffsetRange("t", 0, 5, 10, ("127.0.0.1:1",), props, False)
        monkeypatch.setattr(spark, "_OffsetLookup", log.lookup_class())
        client = _confluent_fake(log, cached=(0, 5))  # the last task read up to 5
        monkeypatch.setattr(spark, "_CLIENTS",
                            OrderedDict({("confluent", rng.bootstrap, props): client}))
        caplog.clear()
        began = time.monotonic()
        with caplog.at_level("WARNING", logger="zkconsumer.spark"):
            assert _offsets_read(rng) == rows
        if rows:
            assert log.lookups == 0 and "beyond its log end" not in caplog.text
        else:
            assert "offsets [5, 10) of t:0 are beyond its log end 5" in caplog.text
            assert time.monotonic() - began >= 0.5 and log.lookups >= 2


def test_out_of_range_after_records_in_the_same_answer_names_the_offsets_after_them() -> None:
    """An OFFSET_OUT_OF_RANGE error event after records of the range in one consume(): the
    error names the offsets after those records, and no confirmation window."""
    from confluent_kafka import KafkaError

    import zkconsumer.spark.read as spark

    Message = _ConfluentMessage

    class Confluent:
        def get_watermark_offsets(self, tp: Any, timeout: float | None = None
                                  ) -> tuple[int, int]:
            return 0, 3

    props = (("fetch.backend", "confluent"), ("group.id", "g"),
             ("zookeeper.connect", "127.0.0.1:1"))
    messages = [Message(0), Message(1), Message(2),
                Message(3, KafkaError(KafkaError.OFFSET_OUT_OF_RANGE))]
    failing = OffsetRange("t", 0, 0, 10, ("127.0.0.1:1",), props, True)
    with pytest.raises(ZkConsumerError, match=r"offsets \[3, 10\) of t:0 are beyond its log "
                                              r"end 3 \(the broker answered offset 3 out of "
                                              r"range"):
        spark._confluent_errors(Confluent(), failing, messages, 0)
    skipping = OffsetRange("t", 0, 0, 10, ("127.0.0.1:1",), props, False)
    good, position, ended, skip_to = spark._confluent_errors(Confluent(), skipping, messages, 0)
    assert [m.offset() for m in good] == [0, 1, 2] and ended and skip_to is None


def test_an_offset_reset_after_the_ranges_end_does_not_fail_a_range_read_whole() -> None:
    """confluent backend: the range's last records and records past its end (a gap of
    transaction markers before them), then an offset-reset event, retention or truncation
    racing librdkafka's prefetch: the range was read whole, nothing of it is lost. Also: a
    broker that answers no watermarks after an out-of-range answer fails the task with a
    clear error, where the lookup used to wait for ever."""
    from confluent_kafka import KafkaError

    import zkconsumer.spark.read as spark

    Message = _ConfluentMessage

    class Confluent:
        def __init__(self, answer: tuple[int, int] | None) -> None:
            self.answer = answer
            self.timeouts: list[float | None] = []

        def get_watermark_offsets(self, tp: Any, timeout: float | None = None
                                  ) -> tuple[int, int] | None:
            self.timeouts.append(timeout)
            return self.answer

    props = (("fetch.backend", "confluent"), ("group.id", "g"),
             ("zookeeper.connect", "127.0.0.1:1"))
    rng = OffsetRange("t", 0, 0, 10, ("127.0.0.1:1",), props, True)
    reset = KafkaError(KafkaError._AUTO_OFFSET_RESET)
    for messages in ([Message(8), Message(9), Message(12), Message(13, reset)],
                     [Message(8), Message(9), Message(11, reset)]):
        for answer in ((20, 30), (0, 5)):  # retention past the range, or a truncation
            good, position, ended, skip_to = spark._confluent_errors(
                Confluent(answer), rng, messages, 8)
            assert ([m.offset() for m in good], position, ended, skip_to) == (
                [m.offset() for m in messages[:-1]], 8, True, None)
    silent = Confluent(None)
    with pytest.raises(ZkConsumerError, match=r"^zkconsumer source: reading t:0: the broker "
                                              r"answered out of range .*then gave no "
                                              r"watermarks within 2.5 s"):
        spark._confluent_errors(silent, rng, [Message(3, reset)], 3, timeout_s=2.5)
    assert silent.timeouts == [2.5]


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_retention_loss_after_records_in_the_same_answer_keeps_those_records(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, fail_on_data_loss: bool,
) -> None:
    """confluent backend: records of the range, then an OFFSET_OUT_OF_RANGE error event in
    the same consume(), retention having deleted the offsets after them. Those records are
    read (they were fetched before the deletion), the loss named from after them, and with
    failOnDataLoss=false reading goes on at the new log start."""
    from collections import OrderedDict
    from types import SimpleNamespace

    from confluent_kafka import KafkaError

    import zkconsumer.spark.read as spark

    Message = _ConfluentMessage

    class Consumer:  # confluent-kafka's: [3, 6) deleted after 0, 1, 2 were fetched
        def __init__(self) -> None:
            self.at = 0

        def assign(self, tps: list[Any]) -> None:
            self.at = tps[0].offset

        def consume(self, num: int, timeout: float) -> list[Message]:
            if self.at == 0:
                self.at = 3
                return [Message(0), Message(1), Message(2),
                        Message(3, KafkaError(KafkaError.OFFSET_OUT_OF_RANGE))]
            got = [Message(o) for o in range(self.at, min(10, self.at + num))]
            self.at += len(got)
            return got

        def position(self, tps: list[Any]) -> list[Any]:
            return [SimpleNamespace(offset=self.at)]

        def get_watermark_offsets(self, tp: Any, cached: bool = False,
                                  timeout: float | None = None) -> tuple[int, int]:
            return 6, 10

        def unassign(self) -> None: ...
        def close(self) -> None: ...

    props = (("fetch.backend", "confluent"), ("group.id", "g"),
             ("zookeeper.connect", "127.0.0.1:1"))
    rng = OffsetRange("t", 0, 0, 10, ("127.0.0.1:1",), props, fail_on_data_loss)
    monkeypatch.setattr(spark, "_CLIENTS",
                        OrderedDict({("confluent", rng.bootstrap, props): Consumer()}))
    if fail_on_data_loss:
        with pytest.raises(ZkConsumerError, match=r"offsets \[3, 10\) of t:0 are no longer "
                                              r"available \(earliest available is 6\)"):
            _offsets_read(rng)
        return
    with caplog.at_level("WARNING", logger="zkconsumer.spark"):
        assert _offsets_read(rng) == [0, 1, 2, 6, 7, 8, 9]
    assert "t:0: offsets [3, 6) were lost; going on from 6" in caplog.text


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_a_log_truncation_found_by_kafka_python_is_lost_data_past_the_log_end(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, fail_on_data_loss: bool,
) -> None:
    """kafka-python 3 checks its position with a new leader (KIP-320) and raises
    LogTruncationError, no OffsetOutOfRangeError, after an unclean leader election: the
    log end's data-loss error (or, failOnDataLoss=false, the rows read and a warning), not
    a raw client error. One left on a pooled client by an earlier task's partition is not
    this task's."""
    from collections import OrderedDict, namedtuple

    from kafka import TopicPartition as KTP
    from kafka.errors import LogTruncationError
    from kafka.structs import OffsetAndMetadata

    import zkconsumer.spark.read as spark

    record = namedtuple("record", "offset key value timestamp")

    class Consumer:  # kafka-python's KafkaConsumer on t:0, truncated at 3 after 0-2 were read
        def __init__(self) -> None:
            self.polls = 0

        def poll(self, timeout_ms: int, max_records: int) -> dict[Any, list[Any]]:
            self.polls += 1
            if self.polls == 1:
                raise LogTruncationError({KTP("u", 1): None})  # an earlier task's
            if self.polls == 2:
                return {KTP("t", 0): [record(o, b"k", b"v", 1000) for o in range(3)]}
            raise LogTruncationError({KTP("t", 0): OffsetAndMetadata(3, "", 4)})

        def position(self, tp: Any) -> int:
            return 3

        def highwater(self, tp: Any) -> int:
            return 10

        def assign(self, tps: Any) -> None: ...
        def seek(self, tp: Any, offset: int) -> None: ...
        def unsubscribe(self) -> None: ...
        def close(self) -> None: ...

    props = (("fetch.backend", "kafka-python"), ("group.id", "g"),
             ("zookeeper.connect", "127.0.0.1:1"))
    rng = OffsetRange("t", 0, 0, 10, ("127.0.0.1:1",), props, fail_on_data_loss)
    monkeypatch.setattr(spark, "_CLIENTS",
                        OrderedDict({("kafka-python", rng.bootstrap, props): Consumer()}))
    lost = (r"offsets \[3, 10\) of t:0 are beyond its log end 3 \(the new leader's log was "
            r"truncated below it")
    if fail_on_data_loss:
        with pytest.raises(ZkConsumerError, match=lost):
            _offsets_read(rng)
        return
    with caplog.at_level("WARNING", logger="zkconsumer.spark"):
        assert _offsets_read(rng) == [0, 1, 2]
    assert re.search(lost, caplog.text)


class _ConfluentMessage:
    """A stand-in for confluent-kafka's ``Message``: a record at ``offset``, or (``error``)
    an error event."""

    def __init__(self, offset: int, error: Any = None) -> None:
        self.offset_, self.error_ = offset, error

    def error(self) -> Any:
        return self.error_

    def offset(self) -> int:
        return self.offset_

    def key(self) -> bytes:
        return b"k"

    def value(self) -> bytes:
        return b"v"

    def timestamp(self) -> tuple[int, int]:
        # librdkafka gives an error event the type NOT_AVAILABLE (what _speedups relies on).
        return (0, -1) if self.error_ is not None else (1, 1000)

    def topic(self) -> str:
        return "t"

    def partition(self) -> int:
        return 0


def _kafka_python_out_of_range_after(n: int, log_start: int, log_end: int) -> Any:
    """A stand-in for kafka-python's KafkaConsumer on partition t:0: its first poll gives
    offsets 0 to n - 1, every later one raises OffsetOutOfRangeError at ``n``; the log is
    [log_start, log_end)."""
    from collections import namedtuple

    from kafka import TopicPartition as KTP
    from kafka.errors import OffsetOutOfRangeError

    record = namedtuple("record", "offset key value timestamp")

    class Consumer:
        def __init__(self) -> None:
            self.polls = 0

        def poll(self, timeout_ms: int, max_records: int) -> dict[Any, list[Any]]:
            self.polls += 1
            if self.polls > 1:
                raise OffsetOutOfRangeError({KTP("t", 0): n})
            return {KTP("t", 0): [record(o, b"k", b"v", 1000) for o in range(n)]}

        def beginning_offsets(self, tps: list[Any]) -> dict[Any, int]:
            return {tps[0]: log_start}

        def end_offsets(self, tps: list[Any]) -> dict[Any, int]:
            return {tps[0]: log_end}

        def position(self, tp: Any) -> int:
            return n

        def assign(self, tps: Any) -> None: ...
        def seek(self, tp: Any, offset: int) -> None: ...
        def unsubscribe(self) -> None: ...
        def close(self) -> None: ...

    return Consumer
