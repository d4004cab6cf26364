"""An example Spark pipeline on the zkconsumer source, start to finish, in one command.

    tools/spark_pipeline                      # its own local stack, in a temp dir
    tools/spark_pipeline --zookeeper zk:2181 [--bootstrap broker:9092]

``tools/spark_pipeline`` sets up the venv first, as ``tools/demo`` does (``tools/_bootstrap.sh``),
and runs this file from the repository's root (a relative ``--output`` is under it); in an
environment that has zkconsumer[spark] already, ``python tools/spark_pipeline.py`` is the same.

1. without ``--zookeeper``, start the local stack (ZooKeeper 3.8, Kafka 3.9) in a temp dir;
2. create the topic and produce sample JSON orders ``{"user", "amount", "ts"}`` keyed by user,
   with event times spread over the last minute;
3. run one streaming query, a member of the ZooKeeper group ``--group``: parse the JSON,
   count orders and sum amounts per user in event-time windows (watermarked, so each window is
   written once, when it closes), and write every micro-batch's closed windows to Parquet and
   to the console;
4. stop once every order is counted (or after ``--seconds``), print the group's offsets as
   ZooKeeper holds them, the totals read back from Parquet, and where the Parquet output is.

Bounded: it stops by itself, and stops the stack it started.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from zkconsumer._errors import ZkConsumerError
from zkconsumer.spark import register
from zkconsumer.stack.local import LocalStack, sigterm_interrupts
from zkconsumer.stack.testing import create_topic, wait_until
from zkconsumer.zk import paths as zp

#: A key whose single event sits far ahead in event time: it moves the watermark past every
#: sample window, so all of them close (and are written) before the run ends. Its own window
#: never closes; its count is left out of the output.
CLOCK_KEY = "__clock__"


def say(msg: str) -> None:
    print(f"==> {msg}", flush=True)


@contextmanager
def _stack(args: argparse.Namespace) -> Iterator[tuple[str, str]]:
    if args.zookeeper:
        yield args.zookeeper, args.bootstrap or _bootstrap_from_zk(args.zookeeper)
        return
    # SIGTERM (a CI job cancelled, kill) stops the stack too, as Ctrl-C does.
    with tempfile.TemporaryDirectory(prefix="zkc-spark-stack-") as d, sigterm_interrupts():
        say(f"starting the local stack in {d}")
        stack = LocalStack(d, tied=True)  # a SIGKILL leaves nothing running either
        try:
            stack.up()
            yield stack.zookeeper, stack.bootstrap
        finally:
            say("stopping the local stack")
            stack.down()


def _bootstrap_from_zk(zookeeper: str) -> str:
    zk = KazooClient(hosts=zookeeper, timeout=10.0)
    try:
        zk.start(timeout=15)
    except Exception as e:  # noqa: BLE001 - any failure to connect: one line, the tool's error
        raise ZkConsumerError(f"cannot connect to ZooKeeper at {zookeeper}: {e}") from None
    try:
        for bid in sorted(zk.get_children(zp.BROKER_IDS) if zk.exists(zp.BROKER_IDS) else []):
            path = zp.broker_path(int(bid))
            host, port = zp.BrokerRegistration.decode(zk.get(path)[0], path).endpoint()
            return f"{host}:{port}"
    finally:
        zk.stop()
        zk.close()
    raise ZkConsumerError(f"no broker is registered in ZooKeeper at {zookeeper}; "
                          "give --bootstrap")


def _ensure_topic(zookeeper: str, bootstrap: str, topic: str, partitions: int) -> None:
    zk = KazooClient(hosts=zookeeper, timeout=10.0)
    zk.start(timeout=15)
    try:
        if zk.exists(zp.topic_path(topic)) is None:
            create_topic(bootstrap, topic, partitions)
            wait_until(lambda: zk.exists(zp.topic_path(topic)), 60,
                       f"topic {topic} to be registered in ZooKeeper")
    finally:
        zk.stop()
        zk.close()


def _produce_orders(bootstrap: str, topic: str, n: int, users: int) -> float:
    """``n`` orders over the last minute, then one clock event; returns the total amount."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, acks=1,
                             enable_idempotence=False)
    base = time.time() - 60.0
    total = 0.0
    try:
        for i in range(n):
            user = f"user-{i % users}"
            amount = round(1 + (i * 7919) % 9900 / 100.0, 2)
            total += amount
            event = {"user": user, "amount": amount,
                     "ts": _iso(base + 60.0 * i / max(1, n))}
            producer.send(topic, key=user.encode(), value=json.dumps(event).encode())
        clock = {"user": CLOCK_KEY, "amount": 0.0, "ts": _iso(base + 3600.0)}
        producer.send(topic, key=CLOCK_KEY.encode(), value=json.dumps(clock).encode())
        producer.flush(timeout=60)
    finally:
        producer.close()
    return round(total, 2)


def _iso(epoch_s: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch_s)) + (
        f".{int(epoch_s * 1000) % 1000:03d}Z")


def _spark() -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("zkconsumer-spark-pipeline")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def run_pipeline(args: argparse.Namespace, zookeeper: str, bootstrap: str) -> int:
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    topic = args.topic or f"orders-{int(time.time())}"
    group = args.group or f"spark-pipeline-{int(time.time())}"
    out = Path(args.output or tempfile.mkdtemp(prefix="zkc-spark-pipeline-")).absolute()
    parquet = out / "windowed_counts"
    checkpoint = out / "checkpoint"

    _ensure_topic(zookeeper, bootstrap, topic, args.partitions)
    say(f"producing {args.messages} JSON orders to {topic}")
    expected_total = _produce_orders(bootstrap, topic, args.messages, args.users)

    say("starting Spark (local[2])")
    spark = _spark()
    try:
        orders = (
            spark.readStream.format("zkconsumer")
            .option("zookeeper.connect", zookeeper)
            .option("group.id", group)
            .option("topics", topic)
            .option("auto.offset.reset", "smallest")
            .load()
            .select(F.from_json(F.col("value").cast("string"),
                                "user STRING, amount DOUBLE, ts TIMESTAMP").alias("o"))
            .select("o.*")
            .withWatermark("ts", args.watermark)
        )
        counts = (orders.groupBy(F.window("ts", args.window).alias("window"), "user")
                  .agg(F.count("*").alias("orders"), F.round(F.sum("amount"), 2).alias("amount"))
                  .select(F.col("window.start").alias("window_start"),
                          F.col("window.end").alias("window_end"), "user", "orders", "amount"))

        def write(batch: DataFrame, batch_id: int) -> None:
            # Closed windows only (append mode): each window reaches Parquet exactly once.
            # The clock event is dropped only here: a filter before the aggregation would be
            # pushed below the watermark, which would then never see it.
            batch = batch.where(F.col("user") != CLOCK_KEY)
            if batch.isEmpty():
                return
            batch.write.mode("append").parquet(str(parquet))
            print(f"-- batch {batch_id}: windows closed --", flush=True)
            batch.orderBy("window_start", "user").show(100, truncate=False)

        say(f"streaming from group {group}; output in {parquet}")
        query = (counts.writeStream.outputMode("append").foreachBatch(write)
                 .option("checkpointLocation", str(checkpoint))
                 .trigger(processingTime="1 second").start())
        deadline = time.monotonic() + args.seconds
        counted = 0
        try:
            while time.monotonic() < deadline and query.isActive:
                time.sleep(1.0)
                counted = _counted(spark, parquet)
                if counted >= args.messages:
                    break
        finally:
            query.stop()
        if query.exception() is not None:
            print(f"error: the query failed: {query.exception()}", file=sys.stderr)
            return 1
        batches = [(p["batchId"], p["numInputRows"], p.get("eventTime", {}).get("watermark"))
                   for p in query.recentProgress]
        say("micro-batches (id, input rows, watermark): " + ", ".join(map(str, batches)))

        _print_offsets(zookeeper, group, topic)
        totals = (spark.read.parquet(str(parquet)).agg(F.sum("orders"), F.sum("amount"))
                  .collect()[0] if parquet.exists() else (0, 0.0))
        say(f"Parquet totals: {totals[0] or 0} orders, amount {round(totals[1] or 0.0, 2)} "
            f"(produced {args.messages} orders, amount {expected_total})")
        say(f"Parquet output: {parquet}")
        if counted < args.messages:
            print(f"error: only {counted} of {args.messages} orders were counted within "
                  f"{args.seconds} s", file=sys.stderr)
            return 1
        return 0
    finally:
        spark.stop()


def _counted(spark: Any, parquet: Path) -> int:
    if not parquet.exists() or not any(parquet.glob("*.parquet")):
        return 0
    row = spark.read.parquet(str(parquet)).agg({"orders": "sum"}).collect()[0]
    return int(row[0] or 0)


def _print_offsets(zookeeper: str, group: str, topic: str) -> None:
    zk = KazooClient(hosts=zookeeper, timeout=10.0)
    zk.start(timeout=15)
    try:
        say(f"the group's offsets in ZooKeeper ({zp.offsets_topic_dir(group, topic)}):")
        path = zp.offsets_topic_dir(group, topic)
        for p in sorted(zk.get_children(path) if zk.exists(path) else [], key=int):
            data, _ = zk.get(zp.offset_path(group, topic, int(p)))
            print(f"    partition {p}: {data.decode()}")
    finally:
        zk.stop()
        zk.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="tools/spark_pipeline", description=__doc__.split(
        "\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zookeeper", help="host:port[/chroot]; default: start a local stack")
    ap.add_argument("--bootstrap", help="broker host:port (default: from ZooKeeper)")
    ap.add_argument("--topic", help="default: orders-<time> (created when missing)")
    ap.add_argument("--group", help="consumer group (default: spark-pipeline-<time>)")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--users", type=int, default=5)
    ap.add_argument("--window", default="10 seconds")
    ap.add_argument("--watermark", default="5 seconds")
    ap.add_argument("--seconds", type=float, default=120.0, help="stop after this long")
    ap.add_argument("--output", help="output directory (default: a new temp dir, kept)")
    args = ap.parse_args(argv)
    for name in ("partitions", "messages", "users"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} must be >= 1")
    if args.bootstrap and not args.zookeeper:
        ap.error("--bootstrap needs --zookeeper (the local stack has its own broker)")
    if args.output and Path(args.output).exists() and any(Path(args.output).iterdir()):
        # Another run's Parquet files would count towards this one's totals, and its
        # checkpoint (of another topic and group) would be resumed.
        ap.error(f"--output {args.output} is not empty: give a new or empty directory")
    try:
        with _stack(args) as (zookeeper, bootstrap):
            return run_pipeline(args, zookeeper, bootstrap)
    except ZkConsumerError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
