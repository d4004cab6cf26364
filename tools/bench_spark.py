"""Spark: rows per second from the zkconsumer source into a memory sink, against a Parquet copy.

    tools/bench spark [--messages 1000000] [--partitions 8] [--size 100]
                      [--backend kafka-python|confluent|both]

One run: produce ``--messages`` values of ``--size`` bytes over ``--partitions`` partitions;
start Spark (``local[2]``); then, each measured as a streaming query with
``trigger(availableNow=True)`` into the memory sink, from ``start()`` to its end:

- the zkconsumer source (a group member reading every partition from the beginning), once per
  fetch backend asked for;
- Spark's own file source reading the same rows from a Parquet copy (written beforehand by a
  batch read of the zkconsumer source): the ceiling, what the rest of the query costs.

The result (bench-results/spark.json) has rows per second for each and the ratio of each
source run to the ceiling. Speed goals are reported, never asserted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tools.bench import Made, progress, stack, write_result  # noqa: E402


def _produce(bootstrap: str, topic: str, n: int, partitions: int, size: int) -> None:
    """``n`` values of ``size`` bytes, round-robin over the partitions (no keys)."""
    import importlib.util

    payload = b"x" * size
    if importlib.util.find_spec("confluent_kafka") is not None:
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": 1,
                      "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000})
        for i in range(n):
            while True:
                try:
                    p.produce(topic, value=payload, partition=i % partitions)
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
        kp.send(topic, value=payload, partition=i % partitions)
        if i and i % 100_000 == 0:
            progress(f"produced {i}")
    kp.flush()
    kp.close()


def _spark_session() -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from zkconsumer.spark import register

    spark = (SparkSession.builder.master("local[2]").appName("zkconsumer-bench")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "3g")
             .config("spark.sql.shuffle.partitions", "2")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def _timed_query(spark: Any, df: Any, checkpoint: str) -> dict[str, Any]:
    """Run ``df`` into a memory sink with availableNow.

    ``seconds``: from ``start()`` to the end of the run (query start-up and shut-down
    included); ``batch_seconds``: the micro-batches that carried rows (Spark's
    triggerExecution), i.e. without start-up and the final empty trigger.
    """
    name = f"bench_{uuid.uuid4().hex[:10]}"
    t0 = time.perf_counter()
    q = (df.writeStream.format("memory").queryName(name)
         .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    q.awaitTermination()
    elapsed = time.perf_counter() - t0
    if q.exception() is not None:
        raise RuntimeError(f"the query failed: {q.exception()}")
    rows = int(spark.table(name).count())
    spark.catalog.dropTempView(name)
    batches = [p for p in q.recentProgress if p["numInputRows"]]
    busy = sum(p["durationMs"].get("triggerExecution", 0) for p in batches) / 1000.0
    return {"rows": rows, "seconds": round(elapsed, 2), "rows_per_s": round(rows / elapsed),
            "batches": len(batches), "batch_seconds": round(busy, 2),
            "batch_rows_per_s": round(rows / busy) if busy else None}


def bench_spark(args: argparse.Namespace) -> None:
    backends = ["kafka-python", "confluent"] if args.backend == "both" else [args.backend]
    work = Path(tempfile.mkdtemp(prefix="zkc-bench-spark-"))
    try:
        made = Made()
        with stack(made) as (zk_addr, bootstrap):
            result = _run(args, backends, zk_addr, bootstrap, work, made)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    write_result("spark", result)


def _run(args: argparse.Namespace, backends: list[str], zk_addr: str, bootstrap: str,
         work: Path, made: Made) -> dict[str, Any]:
    from kazoo.client import KazooClient

    from tests.support import create_topic, wait_until
    from zkconsumer.zk import paths as zp

    n, parts = args.messages, args.partitions
    topic = f"bench-spark-{uuid.uuid4().hex[:8]}"
    made.topics.update((topic, f"{topic}-warm"))
    create_topic(bootstrap, topic, parts)

    def wait_topic(name: str) -> None:
        zk = KazooClient(hosts=zk_addr)
        zk.start()
        try:
            wait_until(lambda: zk.exists(zp.topic_path(name)), 30, "the topic in ZooKeeper")
        finally:
            zk.stop()
            zk.close()

    wait_topic(topic)
    progress(f"producing {n} messages of {args.size} bytes over {parts} partitions")
    t0 = time.perf_counter()
    _produce(bootstrap, topic, n, parts, args.size)
    progress(f"produced in {time.perf_counter() - t0:.1f} s; starting Spark")

    spark = _spark_session()
    try:
        base = {"zookeeper.connect": zk_addr, "topics": topic}
        parquet = str(work / "copy.parquet")
        t0 = time.perf_counter()
        spark.read.format("zkconsumer").options(**base).load().write.parquet(parquet)
        progress(f"Parquet copy written in {time.perf_counter() - t0:.1f} s")
        schema = spark.read.parquet(parquet).schema

        def source(backend: str) -> Any:
            group = f"bench-spark-{uuid.uuid4().hex[:8]}"
            made.groups.add(group)
            reader = (spark.readStream.format("zkconsumer").options(**base)
                      .option("group.id", group).option("auto.offset.reset", "smallest")
                      .option("fetch.backend", backend))
            return reader.load()

        # Warm-up: one small streaming run of each kind (JIT, Python workers, clients).
        warm = str(work / "warm.parquet")
        spark.read.parquet(parquet).limit(1000).write.parquet(warm)
        _timed_query(spark, spark.readStream.format("parquet").schema(schema).load(warm),
                     str(work / "ck-warm-parquet"))
        warm_topic = f"{topic}-warm"
        create_topic(bootstrap, warm_topic, parts)
        wait_topic(warm_topic)
        _produce(bootstrap, warm_topic, 1000, parts, args.size)
        for backend in backends:
            warm_group = f"warm-{uuid.uuid4().hex}"
            made.groups.add(warm_group)
            df = (spark.readStream.format("zkconsumer").option("zookeeper.connect", zk_addr)
                  .option("topics", warm_topic).option("group.id", warm_group)
                  .option("auto.offset.reset", "smallest").option("fetch.backend", backend)
                  .load())
            _timed_query(spark, df, str(work / f"ck-warm-{backend}"))

        runs: dict[str, Any] = {}
        for backend in backends:
            progress(f"zkconsumer source, fetch.backend={backend}")
            run = _timed_query(spark, source(backend), str(work / f"ck-{backend}"))
            if run["rows"] != n:
                raise RuntimeError(f"the source delivered {run['rows']} rows, expected {n}")
            runs[backend] = run
            progress(f"{backend}: {n} rows in {run['seconds']} s = {run['rows_per_s']:,} rows/s")

        progress("ceiling: Spark's file source on the Parquet copy")
        ceiling = _timed_query(spark, spark.readStream.format("parquet").schema(schema)
                               .load(parquet), str(work / "ck-parquet"))
        if ceiling["rows"] != n:
            raise RuntimeError(f"the Parquet copy gave {ceiling['rows']} rows, expected {n}")
        progress(f"parquet: {n} rows in {ceiling['seconds']} s = "
                 f"{ceiling['rows_per_s']:,} rows/s")
    finally:
        spark.stop()

    for r in runs.values():
        r["ratio_to_parquet"] = round(r["rows_per_s"] / ceiling["rows_per_s"], 3)
        if r["batch_rows_per_s"] and ceiling["batch_rows_per_s"]:
            r["batch_ratio_to_parquet"] = round(
                r["batch_rows_per_s"] / ceiling["batch_rows_per_s"], 3)
    best = max(runs, key=lambda b: runs[b]["rows_per_s"])
    return {
        "messages": n, "partitions": parts, "message_bytes": args.size,
        "spark": {"master": "local[2]", "trigger": "availableNow", "sink": "memory"},
        "zkconsumer_source": runs,
        "parquet_ceiling": ceiling,
        "best_backend": best,
        "best_ratio_to_parquet": runs[best]["ratio_to_parquet"],
        "measured": "seconds: wall time from writeStream.start() to the end of the "
                    "availableNow run; batch_seconds: Spark's triggerExecution of the "
                    "batches with rows",
    }


def register(subparsers: Any) -> None:
    """Add the ``spark`` subcommand to tools/bench."""
    p = subparsers.add_parser("spark", help="zkconsumer Spark source vs a Parquet copy")
    p.add_argument("--messages", type=int, default=1_000_000)
    p.add_argument("--partitions", type=int, default=8)
    p.add_argument("--size", type=int, default=100, help="bytes per message value")
    p.add_argument("--backend", choices=["kafka-python", "confluent", "both"], default="both",
                   help="executor fetch backend(s) to measure")
    p.set_defaults(func=bench_spark)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="tools/bench_spark.py")
    register(parser.add_subparsers(dest="name", required=True))
    parsed = parser.parse_args(["spark", *sys.argv[1:]])
    parsed.func(parsed)
