"""Spark: the zkconsumer source against Spark's own Kafka source, in one session, on one topic.

    tools/bench spark [--messages 2000000] [--partitions 8] [--size 100] [--rounds 2]
                      [--backend default|confluent|kafka-python] [--min-partitions N]
                      [--no-kafka-source]

One run: produce ``--messages`` JSON values of ``--size`` bytes (``{"user", "amount", "ts",
"pad"}``, keyed by user, event times one millisecond apart) over ``--partitions`` partitions;
start Spark (``local[2]``) with Spark's Kafka source on its classpath (``spark-sql-kafka-0-10``
pinned by ``tools/jvm/spark-kafka-4.2/pom.xml``, copied by Maven from Maven Central into
``.jvm/spark-kafka-4.2/`` the first time); then,
per round and per source (the order alternating between rounds), each timed from the action's
start to its end:

- **batch**: ``spark.read`` of the whole topic into the ``noop`` sink (rows and value bytes
  counted on the way with ``observe``);
- **stream**: ``spark.readStream`` with ``trigger(availableNow=True)`` into the ``noop`` sink
  (the zkconsumer source as a new member of a new group), from ``start()`` to its end;
- **pipeline**: the same stream with the values parsed (``from_json``), counted and summed per
  user in 10-second event-time windows (watermark 10 s), written to Parquet (append mode).

The result (bench-results/spark.json) has rows per second of each (the median over the
rounds), the ratio of the zkconsumer source to Spark's Kafka source, the versions of Spark,
of the connector and of the fetch backend, and ``goal_met``: the zkconsumer source at least
as fast as Spark's Kafka source in batch and stream. Speed goals are reported, never asserted.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from tools.bench_common import ROOT, Made, progress, stack, write_result
from zkconsumer.spark import register as register_source
from zkconsumer.stack.classpaths import jvm_dir
from zkconsumer.stack.testing import create_topic, wait_until
from zkconsumer.zk import paths as zp

#: Spark's own Kafka source: its pinned Maven project, and its directory under .jvm/.
SPARK_KAFKA = "spark-kafka-4.2"
SPARK_KAFKA_POM = ROOT / "tools" / "jvm" / SPARK_KAFKA / "pom.xml"
#: The zkconsumer source at least this fast as Spark's Kafka source (batch and stream).
GOAL_RATIO = 1.0
WORKLOADS = ("batch", "stream", "pipeline")
USERS = 100
WINDOW, WATERMARK = "10 seconds", "10 seconds"


def _values(n: int, size: int) -> Callable[[int], tuple[bytes, bytes]]:
    """Message ``i``: (key, JSON value padded to ``size`` bytes)."""
    base_ms = int(time.time() * 1000) - n

    def make(i: int) -> tuple[bytes, bytes]:
        user = f"user-{i % USERS}"
        ms = base_ms + i
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + f".{ms % 1000:03d}Z"
        head = f'{{"user":"{user}","amount":{1 + i % 9900 / 100:.2f},"ts":"{ts}","pad":"'
        return user.encode(), (head + "x" * max(0, size - len(head) - 2) + '"}').encode()

    return make


def _produce(bootstrap: str, topic: str, n: int, partitions: int, size: int) -> None:
    """``n`` keyed JSON values, message ``i`` to partition ``i % partitions``."""
    make = _values(n, size)
    if importlib.util.find_spec("confluent_kafka") is not None:
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": 1,
                      "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000})
        for i in range(n):
            key, value = make(i)
            while True:
                try:
                    p.produce(topic, key=key, value=value, partition=i % partitions)
                    break
                except BufferError:
                    p.poll(0.05)
            if i % 100_000 == 0:
                p.poll(0)
                if i:
                    progress(f"produced {i}")
        if p.flush(120) != 0:
            raise RuntimeError("the producer could not deliver every message")
        return
    from kafka import KafkaProducer

    kp = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, batch_size=262144, acks=1,
                       enable_idempotence=False)
    for i in range(n):
        key, value = make(i)
        kp.send(topic, key=key, value=value, partition=i % partitions)
        if i and i % 100_000 == 0:
            progress(f"produced {i}")
    kp.flush()
    kp.close()


def _connector_jars() -> list[str]:
    """The jars of Spark's Kafka source, copied by Maven from ``SPARK_KAFKA_POM`` into
    ``.jvm/spark-kafka-4.2/`` the first time (again when the pom changed)."""
    out = jvm_dir() / SPARK_KAFKA
    want = hashlib.sha256(SPARK_KAFKA_POM.read_bytes()).hexdigest()
    stamp = out / ".resolved"
    if not (stamp.is_file() and stamp.read_text().strip() == want):
        mvn = shutil.which("mvn")
        if mvn is None:
            raise SystemExit("tools/bench spark: Maven (mvn) is needed to fetch Spark's Kafka "
                             "source; install it, or give --no-kafka-source")
        progress(f"resolving {SPARK_KAFKA_POM.relative_to(ROOT)} with Maven into {out}")
        tmp = out.with_name(out.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        done = subprocess.run([mvn, "-B", "-q", "-f", str(SPARK_KAFKA_POM),
                               "dependency:copy-dependencies", f"-DoutputDirectory={tmp}"],
                              capture_output=True, text=True)
        if done.returncode != 0:
            errors = [ln for ln in done.stdout.splitlines() if "[ERROR]" in ln]
            raise SystemExit(f"tools/bench spark: Maven could not resolve {SPARK_KAFKA_POM}: "
                             f"{(errors or ['see mvn output'])[0][:300]}")
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
        stamp.write_text(want + "\n")
    return sorted(str(p) for p in out.glob("*.jar"))


def _spark_session(jars: list[str]) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master("local[2]").appName("zkconsumer-bench")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.memory", "3g")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC"))
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register_source(spark)
    return spark


class Sources:
    """The DataFrames of each source on one topic: ``zkconsumer`` and ``kafka`` (Spark's)."""

    def __init__(self, spark: Any, zk_addr: str, bootstrap: str, made: Made,
                 args: argparse.Namespace) -> None:
        self.spark, self.zk_addr, self.bootstrap, self.made = spark, zk_addr, bootstrap, made
        self.backend: str = args.backend
        self.min_partitions: int | None = args.min_partitions

    def _zk(self, reader: Any, topic: str) -> Any:
        reader = (reader.format("zkconsumer").option("zookeeper.connect", self.zk_addr)
                  .option("topics", topic))
        if self.backend != "default":
            reader = reader.option("fetch.backend", self.backend)
        if self.min_partitions:
            reader = reader.option("minPartitions", str(self.min_partitions))
        return reader

    def _kafka(self, reader: Any, topic: str) -> Any:
        reader = (reader.format("kafka").option("kafka.bootstrap.servers", self.bootstrap)
                  .option("subscribe", topic).option("startingOffsets", "earliest"))
        if self.min_partitions:
            reader = reader.option("minPartitions", str(self.min_partitions))
        return reader

    def batch(self, source: str, topic: str) -> Any:
        if source == "zkconsumer":
            return self._zk(self.spark.read, topic).load()
        return self._kafka(self.spark.read, topic).option("endingOffsets", "latest").load()

    def stream(self, source: str, topic: str) -> Any:
        if source == "zkconsumer":
            group = f"bench-spark-{uuid.uuid4().hex[:8]}"
            self.made.groups.add(group)
            return (self._zk(self.spark.readStream, topic).option("group.id", group)
                    .option("auto.offset.reset", "smallest").load())
        return self._kafka(self.spark.readStream, topic).load()


def _timed_batch(df: Any) -> dict[str, Any]:
    """``df`` into the noop sink; rows and value bytes counted on the way."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    seen = Observation(f"bench_{uuid.uuid4().hex[:8]}")
    observed = df.observe(seen, F.count(F.lit(1)).alias("rows"),
                          F.sum(F.length("value")).alias("value_bytes"))
    t0 = time.perf_counter()
    observed.write.format("noop").mode("overwrite").save()
    elapsed = time.perf_counter() - t0
    got = seen.get
    rows = int(got["rows"])
    return {"rows": rows, "value_bytes": int(got["value_bytes"] or 0),
            "seconds": round(elapsed, 2), "rows_per_s": round(rows / elapsed)}


def _timed_stream(writer: Any, checkpoint: str) -> dict[str, Any]:
    """Run ``writer`` (a DataStreamWriter) with availableNow from ``start()`` to its end.

    ``batches``: the micro-batches that carried rows; ``batch_seconds``: their Spark
    triggerExecution; ``phases_ms``: Spark's durationMs of every micro-batch, summed per phase
    (where the rest of the time went: planning, offsets, the checkpoint's logs);
    ``outside_batches_s``: the time outside every micro-batch (the query's start, the source's
    set-up, its end).
    """
    t0 = time.perf_counter()
    q = writer.option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
    q.awaitTermination()
    elapsed = time.perf_counter() - t0
    if q.exception() is not None:
        raise RuntimeError(f"the query failed: {q.exception()}")
    progress_ = q.recentProgress
    rows = sum(int(p["numInputRows"]) for p in progress_)
    with_rows = [p for p in progress_ if p["numInputRows"]]
    busy = sum(p["durationMs"].get("triggerExecution", 0) for p in with_rows) / 1000.0
    phases: dict[str, int] = {}
    for p in progress_:
        for k, v in p["durationMs"].items():
            phases[k] = phases.get(k, 0) + int(v)
    return {"rows": rows, "seconds": round(elapsed, 2), "rows_per_s": round(rows / elapsed),
            "micro_batches": len(progress_), "batches": len(with_rows),
            "batch_seconds": round(busy, 2),
            "outside_batches_s": round(elapsed - phases.get("triggerExecution", 0) / 1000, 2),
            "phases_ms": phases}


def _pipeline(df: Any, out: str) -> Any:
    """JSON values parsed, counted and summed per user in event-time windows, to Parquet."""
    from pyspark.sql import functions as F

    orders = (df.select(F.from_json(F.col("value").cast("string"),
                                    "user STRING, amount DOUBLE, ts TIMESTAMP").alias("o"))
              .select("o.*").withWatermark("ts", WATERMARK))
    counts = (orders.groupBy(F.window("ts", WINDOW).alias("w"), "user")
              .agg(F.count("*").alias("orders"), F.sum("amount").alias("amount"))
              .select(F.col("w.start").alias("window_start"), "user", "orders", "amount"))
    return counts.writeStream.format("parquet").outputMode("append").option("path", out)


def _run_one(spark: Any, sources: Sources, source: str, workload: str, topic: str,
             work: Path) -> dict[str, Any]:
    tag = f"{source}-{workload}-{uuid.uuid4().hex[:6]}"
    load = round(os.getloadavg()[0], 2)  # the machine is shared: the load each run met
    if workload == "batch":
        return {**_timed_batch(sources.batch(source, topic)), "load_1min": load}
    if workload == "stream":
        writer = sources.stream(source, topic).writeStream.format("noop")
        return {**_timed_stream(writer, str(work / f"ck-{tag}")), "load_1min": load}
    out = str(work / f"out-{tag}")
    run = _timed_stream(_pipeline(sources.stream(source, topic), out), str(work / f"ck-{tag}"))
    from pyspark.sql import functions as F

    row = spark.read.parquet(out).agg(F.count("*"), F.sum("orders")).collect()[0]
    run["windows_written"], run["orders_in_windows"] = int(row[0]), int(row[1] or 0)
    run["load_1min"] = load
    return run


def bench_spark(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="zkc-bench-spark-"))
    try:
        made = Made()
        with stack(made) as (zk_addr, bootstrap):
            result = _run(args, zk_addr, bootstrap, work, made)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    write_result("spark", result)


def _make_topic(zk_addr: str, bootstrap: str, topic: str, parts: int) -> None:
    create_topic(bootstrap, topic, parts)
    zk = KazooClient(hosts=zk_addr)
    zk.start()
    try:
        wait_until(lambda: zk.exists(zp.topic_path(topic)), 30, "the topic in ZooKeeper")
    finally:
        zk.stop()
        zk.close()


def _run(args: argparse.Namespace, zk_addr: str, bootstrap: str, work: Path,
         made: Made) -> dict[str, Any]:
    n, parts = args.messages, args.partitions
    names = ["zkconsumer"] + ([] if args.no_kafka_source else ["kafka"])
    jars = [] if args.no_kafka_source else _connector_jars()
    topic = f"bench-spark-{uuid.uuid4().hex[:8]}"
    warm = f"{topic}-warm"
    made.topics.update((topic, warm))
    for t in (topic, warm):
        _make_topic(zk_addr, bootstrap, t, parts)
    progress(f"producing {n} JSON messages of {args.size} bytes over {parts} partitions")
    t0 = time.perf_counter()
    _produce(bootstrap, topic, n, parts, args.size)
    _produce(bootstrap, warm, 2000, parts, args.size)
    progress(f"produced in {time.perf_counter() - t0:.1f} s; starting Spark")

    spark = _spark_session(jars)
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {s: {w: [] for w in WORKLOADS}
                                                         for s in names}
    try:
        # Not given, the executors take confluent-kafka when they can import it (they run
        # this interpreter).
        backend = args.backend if args.backend != "default" else (
            "confluent" if importlib.util.find_spec("confluent_kafka") else "kafka-python")
        versions = _versions(spark, jars, backend)
        sources = Sources(spark, zk_addr, bootstrap, made, args)
        # Warm-up: each kind once on a small topic (JIT, Python workers, clients, classes).
        for source in names:
            for workload in WORKLOADS:
                _run_one(spark, sources, source, workload, warm, work)
        for r in range(args.rounds):
            order = names if r % 2 == 0 else names[::-1]
            for workload in WORKLOADS:
                for source in order:
                    run = _run_one(spark, sources, source, workload, topic, work)
                    if run["rows"] != n:
                        raise RuntimeError(f"{source} {workload}: {run['rows']} rows, "
                                           f"expected {n}")
                    runs[source][workload].append(run)
                    progress(f"round {r + 1} {source} {workload}: {n} rows in "
                             f"{run['seconds']} s = {run['rows_per_s']:,} rows/s")
    finally:
        spark.stop()
    return _summary(args, names, runs, versions)


def _versions(spark: Any, jars: list[str], backend: str) -> dict[str, Any]:
    connector = next((Path(j).name.removesuffix(".jar").rsplit("-", 1)[1] for j in jars
                      if Path(j).name.startswith("spark-sql-kafka-0-10")), None)
    clients = next((Path(j).name.removesuffix(".jar").rsplit("-", 1)[1] for j in jars
                    if Path(j).name.startswith("kafka-clients-")), None)
    out: dict[str, Any] = {"spark": spark.version, "pyspark": __import__("pyspark").__version__,
                           "spark_sql_kafka_0_10": connector, "kafka_clients": clients,
                           "zkconsumer_fetch_backend": backend}
    if importlib.util.find_spec("confluent_kafka") is not None:
        import confluent_kafka

        out["confluent_kafka"] = confluent_kafka.__version__
        out["librdkafka"] = confluent_kafka.libversion()[0]
    return out


def _summary(args: argparse.Namespace, names: list[str],
             runs: dict[str, dict[str, list[dict[str, Any]]]],
             versions: dict[str, Any]) -> dict[str, Any]:
    medians = {s: {w: round(statistics.median(r["rows_per_s"] for r in rs))
                   for w, rs in by.items()} for s, by in runs.items()}
    out: dict[str, Any] = {
        "messages": args.messages, "partitions": args.partitions, "message_bytes": args.size,
        "rounds": args.rounds, "min_partitions": args.min_partitions,
        "fetch_backend_option": args.backend, "versions": versions,
        "spark": {"master": "local[2]", "trigger": "availableNow", "sink": "noop",
                  "pipeline": f"from_json, {WINDOW} event-time windows per user (watermark "
                              f"{WATERMARK}), count and sum, Parquet in append mode"},
        "rows_per_s_median": medians, "runs": runs,
        "measured": "seconds: wall time of the action (batch: write to noop; stream and "
                    "pipeline: writeStream.start() to the end of the availableNow run); "
                    "rows_per_s: messages / seconds, the median over the rounds",
    }
    if "kafka" not in names:
        out["goal_met"] = None
        out["goal_why_not"] = "Spark's Kafka source was not measured (--no-kafka-source)"
        return out
    ratios = {w: round(medians["zkconsumer"][w] / medians["kafka"][w], 3) for w in WORKLOADS}
    out["ratio_to_spark_kafka"] = ratios
    pipe = {s: [r["orders_in_windows"] for r in runs[s]["pipeline"]] for s in names}
    out["pipeline_same_output"] = len({x for v in pipe.values() for x in v}) == 1
    missed = [w for w in ("batch", "stream") if ratios[w] < GOAL_RATIO]
    out["goal"] = f"zkconsumer >= {GOAL_RATIO:g}x Spark's Kafka source in batch and stream"
    out["goal_met"] = not missed
    if missed:
        out["goal_why_not"] = "; ".join(
            f"{w}: {ratios[w]:.2f}x ({medians['zkconsumer'][w]:,} vs "
            f"{medians['kafka'][w]:,} rows/s)" for w in missed)
    return out


def register(subparsers: Any) -> None:
    """Add the ``spark`` subcommand to tools/bench."""
    p = subparsers.add_parser("spark", help="zkconsumer Spark source vs Spark's Kafka source")
    p.add_argument("--messages", type=int, default=2_000_000)
    p.add_argument("--partitions", type=int, default=8)
    p.add_argument("--size", type=int, default=100, help="bytes per message value (>= 80)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--backend", choices=["default", "confluent", "kafka-python"],
                   default="default", help="the zkconsumer executors' fetch.backend "
                   "(default: not given, the source's own choice)")
    p.add_argument("--min-partitions", type=int, default=None,
                   help="minPartitions for both sources (default: not given)")
    p.add_argument("--no-kafka-source", action="store_true",
                   help="leave Spark's Kafka source out (no .jvm/spark-kafka-4.2 needed)")
    p.set_defaults(func=bench_spark)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="tools/bench_spark.py")
    register(parser.add_subparsers(dest="name", required=True))
    parsed = parser.parse_args(["spark", *sys.argv[1:]])
    parsed.func(parsed)
