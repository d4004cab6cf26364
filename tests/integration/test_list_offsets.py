"""The Spark source's offset lookups (``zkconsumer.spark.offsets._OffsetLookup``) with each
library: confluent-kafka's (``broker.clients.confluent_list_offsets``) must answer what
kafka-python's (``log_end_offsets``, ``beginning_offsets``) answers, the high watermark
included while a transaction is open (``read_uncommitted``: a ``read_committed`` lookup stops
at the open transaction's first message)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support import StackInfo, delete_records, produce
from zkconsumer._config import ConsumerConfig
from zkconsumer._types import TopicPartition
from zkconsumer.broker.clients import log_end_offsets
from zkconsumer.spark.offsets import _OffsetLookup


def _lookup(stack: StackInfo, backend: str) -> _OffsetLookup:
    config = ConsumerConfig({"zookeeper.connect": stack.zookeeper, "group.id": "lookups",
                             "fetch.backend": backend})
    return _OffsetLookup(config, [stack.bootstrap])


def test_both_libraries_find_the_same_log_starts_and_ends(
        stack: StackInfo, names: Any, topic_factory: Any) -> None:
    from confluent_kafka import Producer

    topic = topic_factory(names.topic, 3)
    produce(stack.bootstrap, topic, [(p, None, f"v{p}-{i}".encode())
                                     for p in range(3) for i in range(5 + p)])
    delete_records(stack.bootstrap, topic, {1: 2})  # partition 1 starts at 2 now
    txn = Producer({"bootstrap.servers": stack.bootstrap, "transactional.id": names("txn"),
                    "transaction.timeout.ms": 300_000})
    txn.init_transactions(30)
    txn.begin_transaction()
    for i in range(4):
        txn.produce(topic, f"open{i}".encode(), partition=2)
    assert txn.flush(30) == 0  # left open: partition 2's high watermark is past its LSO
    tps = [TopicPartition(topic, p) for p in range(3)]
    try:
        expected_ends = {tps[0]: 5, tps[1]: 6, tps[2]: 11}
        assert log_end_offsets(tps, bootstrap_servers=stack.bootstrap) == expected_ends
        for backend in ("confluent", "kafka-python"):
            lookup = _lookup(stack, backend)
            try:
                assert lookup.latest(tps) == expected_ends, backend
                assert lookup.earliest(tps) == {tps[0]: 0, tps[1]: 2, tps[2]: 0}, backend
                assert lookup.reset(tps[:1], "largest") == {tps[0]: 5}, backend
            finally:
                lookup.close()
    finally:
        txn.abort_transaction(30)


def test_an_unknown_partition_fails_the_confluent_lookup(
        stack: StackInfo, names: Any, topic_factory: Any) -> None:
    from confluent_kafka import KafkaException

    topic = topic_factory(names.topic, 1)
    lookup = _lookup(stack, "confluent")
    try:
        with pytest.raises(KafkaException):
            lookup.latest([TopicPartition(topic, 0), TopicPartition(topic, 7)])
        # The failed client was dropped; the next lookup makes a new one.
        assert lookup.latest([TopicPartition(topic, 0)]) == {TopicPartition(topic, 0): 0}
    finally:
        lookup.close()
