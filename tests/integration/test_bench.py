"""The benchmarks' stack: on the user's own stack, a benchmark deletes what it made."""

from __future__ import annotations

import argparse
import json

from kafka import KafkaAdminClient

from tests.support import wait_until
from tools import bench, bench_common, bench_pykafka, bench_throughput
from zkconsumer import ConsumerConfig, create_consumer_connector
from zkconsumer.zk import paths as zp


def _topics(bootstrap: str) -> set[str]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="zkc-tests")
    try:
        return set(admin.list_topics())
    finally:
        admin.close()


def test_a_benchmark_on_the_users_stack_deletes_its_topics_and_groups(
        stack, zk, names, topic_factory, monkeypatch, capsys) -> None:
    topic = topic_factory(names.topic, 2)
    live = names("live")
    # The live member reads a topic of its own: its fetcher asking for a deleted topic
    # would have the broker create it again.
    other = topic_factory(names("other"), 1)

    def member(group: str):  # type: ignore[no-untyped-def]
        return create_consumer_connector(ConsumerConfig({
            "zookeeper.connect": stack.zookeeper, "group.id": group,
            "auto.offset.reset": "smallest"}))

    with member(names.group) as gone:  # a group as a benchmark leaves it: members gone
        gone.create_message_streams({topic: 1})
    with member(live) as still_there:
        still_there.create_message_streams({other: 1})
        monkeypatch.setenv("ZKCONSUMER_ZOOKEEPER", stack.zookeeper)
        monkeypatch.setenv("ZKCONSUMER_BOOTSTRAP", stack.bootstrap)
        made = bench_common.Made()
        with bench_common.stack(made) as (zk_addr, bootstrap):
            assert (zk_addr, bootstrap) == (stack.zookeeper, stack.bootstrap)
            made.topics.add(topic)
            made.groups.update({names.group, live, names("never-created")})
        # The topic is deleted, a group with a live member is refused (and said), the rest
        # is deleted.
        wait_until(lambda: topic not in _topics(stack.bootstrap), 30, "the topic deleted")
        assert zk.exists(zp.group_dir(names.group)) is None
        assert zk.exists(zp.group_dir(live)) is not None
        err = capsys.readouterr().err
        assert f"left on the stack: group {live} (" in err, err
        assert names.group not in err and "never-created" not in err, err


def test_the_throughput_benchmark_measures_the_jvm_legacy_consumer_beside_zkconsumer(
        stack, monkeypatch, tmp_path) -> None:
    """One round on 4,000 messages: the JVM 1.1.1 row is there, with zkconsumer's ratio to it
    on both backends (the figures themselves mean nothing at this size)."""
    monkeypatch.setenv("ZKCONSUMER_ZOOKEEPER", stack.zookeeper)
    monkeypatch.setenv("ZKCONSUMER_BOOTSTRAP", stack.bootstrap)
    monkeypatch.setattr(bench_common, "RESULTS", tmp_path)
    bench_throughput.bench_throughput(
        argparse.Namespace(messages=4000, size=100, rounds=1, jvm=True, peers=True))
    result = json.loads((tmp_path / "throughput_4000.json").read_text())
    row = bench_throughput.JVM_ROW
    assert result["msgs_per_s"][row] > 0, result["msgs_per_s"]
    assert len(result["msgs_per_s_per_round"][row]) == 1
    for backend in ("kafka_python", "confluent"):
        [per_round] = result["ratio_to_jvm_per_round"][backend]
        expected = result["msgs_per_s"][f"zkconsumer_{backend}"] / result["msgs_per_s"][row]
        assert per_round == result["ratio_to_jvm"][backend] == round(expected, 3)
    assert "ZookeeperConsumerConnector" in result["jvm"]["consumer"]
    # The default configuration's goals (issue 38) against the JVM and raw confluent-kafka,
    # and the other peers (issue 42) read the same messages in the same run.
    default = result["default_configuration"]
    assert default["row"] == "zkconsumer_confluent", default
    assert set(default["goal_met_per_goal"]) == {"raw_confluent", row}, default
    assert default["goal_met"] == all(default["goal_met_per_goal"].values()), default
    assert default["ratio"]["raw_confluent"] == result["ratio"]["confluent"], default
    for peer in bench_throughput.PEER_ROWS:
        assert result["msgs_per_s"][peer] > 0, result["msgs_per_s"]
        assert result["peers"][peer]["default_ratio_to_it"] == default["ratio_to_peers"][peer]
    assert len(result["load_average"]["end"]) == 3
    assert len(result["load_average_per_round"]) == 1


def test_the_rebalance_benchmark_times_member_processes(stack, monkeypatch, tmp_path) -> None:
    """Three members, each in its own process, a fourth joining and leaving twice: every
    change is timed from the change to the end of the last rebalance it caused (the members'
    own clocks), and counted in ZooKeeper operations."""
    monkeypatch.setenv("ZKCONSUMER_ZOOKEEPER", stack.zookeeper)
    monkeypatch.setenv("ZKCONSUMER_BOOTSTRAP", stack.bootstrap)
    monkeypatch.setattr(bench_common, "RESULTS", tmp_path)
    bench.bench_rebalance(argparse.Namespace(members=3, partitions=8, changes=4, no_fetch=True,
                                             strategy="roundrobin", no_pykafka=True,
                                             warmup=1, peers="none"))
    result = json.loads((tmp_path / "rebalance_roundrobin_3x8.json").read_text())
    assert result["samples"] == 4 and result["members"] == 3
    assert len(result["warmup_ms"]["all"]) == 1
    assert all(0 < ms < 30000 for ms in result["latency_ms"]["all"]), result["latency_ms"]
    # A join rebalances all four members, a leave the three left: each reads the group.
    assert result["zk_ops_per_rebalance"]["per_member_median"] >= 4, result
    assert result["conflicts"]["failed_attempts"] == 0, result


def test_the_pykafka_storm_row_converges_and_counts(stack, zk) -> None:
    """The peer row of issue 30: pykafka's BalancedConsumers started at once converge on
    pykafka's own assignment, read from its owner znodes; the row says so."""
    made = bench_common.Made()
    try:
        row = bench_pykafka.storm_row(made, zk, stack.zookeeper, stack.bootstrap, [3], 1, 6,
                                      timeout=60)
    finally:
        bench_common.clean_up(stack.zookeeper, stack.bootstrap, made)
    assert row["client"].startswith("pykafka 2.8.0 BalancedConsumer"), row
    (storm,) = row["storms"]
    assert (storm["members"], storm["partitions"], storm["converged_rounds"]) == (3, 6, 1), row
    (r,) = storm["rounds"]
    assert r["converged"] is True and 0 < r["seconds"] < 60, r
    # Every member rebalanced at least once (pykafka's log, counted), none gave up.
    assert r["rebalances"] >= 3 and r["gave_up"] == 0 and r["stopped_on_error"] == 0, r
    assert storm["failed_attempts"] == r["failed_attempts"] >= 0, r
    assert storm["seconds_median"] == storm["seconds_max"] == r["seconds"], storm


def test_the_pykafka_rebalance_row_runs_its_members_in_processes(stack, zk) -> None:
    """pykafka's roundrobin row, each member in its own process as zkconsumer's are: the
    joins and leaves settle on pykafka's own assignment, and the members' log counts come
    back from their processes (every member rebalanced at each change)."""
    made = bench_common.Made()
    try:
        row = bench_pykafka.rebalance_row(made, zk, stack.zookeeper, stack.bootstrap, 2, 6, 2,
                                          fetch=False, timeout=60, strategy="roundrobin")
    finally:
        bench_common.clean_up(stack.zookeeper, stack.bootstrap, made)
    assert row["failure"] is None, row["failure"]
    assert row["member_processes"].startswith("one per member"), row
    assert "roundrobin" in row["assignment"], row
    assert row["latency_ms"]["samples"] == 2 and all(
        0 < ms < 60000 for ms in row["latency_ms"]["all"]), row["latency_ms"]
    assert [m["change"] for m in row["moves"]] == ["join", "leave"], row["moves"]
    # The join rebalanced the two members and the joiner, the leave the two left.
    assert row["rebalances"] >= 5 and row["gave_up"] == 0, row


def test_a_storm_round_starts_member_processes_at_once(stack, zk) -> None:
    """The storm benchmark's round: member processes told to join at once converge, timed
    from the join to the last rebalance's end on the members' clocks, with their counters."""
    made = bench_common.Made()
    args = argparse.Namespace(partitions=6, fetch=False)
    try:
        g = bench._fresh_group(made, zk, stack.zookeeper, stack.bootstrap, args, "range", "t")
        r = bench._storm_round(g, 3)
    finally:
        bench_common.clean_up(stack.zookeeper, stack.bootstrap, made)
    assert 0 < r["seconds"] < 120 and r["failed_attempts"] == 0, r
    assert r["restarts"] >= 0 and r["claim_waits"] >= 0, r
