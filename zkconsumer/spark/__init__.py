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

How it works (docs/spark.md has the user's view and the options table):

- **Driver** (the Python process Spark runs the stream reader in, for the query's lifetime):
  a :class:`~zkconsumer.ZookeeperConsumerConnector` joins the group with a fetch side that does
  not fetch (:class:`_Membership`): it only records which partitions the rebalance gave
  this member. The registration and owner znodes are the legacy ones, so Spark queries and
  legacy consumers share a group's partitions without overlap. Each micro-batch covers the
  partitions this member owns when the batch is planned, as offsets ``{"topic": {"0": 42}}`` in
  Spark's checkpoint; once a batch is done its end offsets go to ``/consumers/G/offsets/T/P``
  (only for partitions still owned), so the legacy lag tools show the pipeline's progress.
- **Executors** read one Kafka partition's offset range per Spark task (``minPartitions``
  cuts large ranges into several, as Spark's Kafka source does) in assign mode, never
  through ZooKeeper, with confluent-kafka when it is installed, else kafka-python (each
  executor decides, unless ``fetch.backend`` is given), and hand Spark Arrow record
  batches. A range that runs past the log end (the log truncated, or the topic recreated,
  after it was planned) is lost data (``failOnDataLoss``): the task fails, or ends its range
  at the log end, once the broker answers its position out of range or the log end has
  stayed at or below it for :data:`LOG_END_CONFIRM_S` (a new leader's high watermark may lag
  that long). Each Python worker keeps a few idle clients for its next tasks
  (:data:`MAX_IDLE_CLIENTS`).
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

The modules: :mod:`~zkconsumer.spark.options` (the options, parsed without I/O),
:mod:`~zkconsumer.spark.cluster` (what ZooKeeper says), :mod:`~zkconsumer.spark.offsets`
(checkpoint offsets, lookups from the brokers), :mod:`~zkconsumer.spark.read` (the
executors' reads), :mod:`~zkconsumer.spark.membership` (the driver's group member) and
:mod:`~zkconsumer.spark.readers` (Spark's readers and the data source); this package
re-exports the public names (the private ones named above live in those modules).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zkconsumer._errors import ZkConsumerSourceError
from zkconsumer.spark.options import SCHEMA, SourceOptions, parse_options
from zkconsumer.spark.read import OffsetRange
from zkconsumer.spark.readers import (
    ZkConsumerBatchReader,
    ZkConsumerDataSource,
    ZkConsumerStreamReader,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "SCHEMA",
    "OffsetRange",
    "SourceOptions",
    "ZkConsumerBatchReader",
    "ZkConsumerDataSource",
    "ZkConsumerSourceError",
    "ZkConsumerStreamReader",
    "parse_options",
    "register",
]


def register(spark: SparkSession) -> None:
    """Make ``format("zkconsumer")`` available in this Spark session."""
    spark.dataSource.register(ZkConsumerDataSource)
