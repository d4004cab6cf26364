"""Group membership and the rebalance against the real ZooKeeper (fetching stubbed out)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import ConnectionLoss

from tests.support import (
    NullFetcher,
    StackInfo,
    drop_connection,
    expected_owners,
    group_owners,
    offset_znodes,
    started_zk,
    wait_until,
)
from zkconsumer import (
    AssignmentStrategyMismatchError,
    BackgroundThreadError,
    ConsumerConfig,
    ConsumerRebalanceFailedException,
    ConsumerRebalanceListener,
    ConsumerShutdownError,
    MessageStreamsExistException,
    PartitionsNotOwnedError,
    TopicPartition,
    Whitelist,
    ZkConnectionLostError,
    ZookeeperConsumerConnector,
)
from zkconsumer.zk import paths as zp


def _config(stack: StackInfo, group: str, **extra: object) -> ConsumerConfig:
    props: dict[str, object] = {
        "zookeeper.connect": stack.zookeeper,
        "group.id": group,
        "zookeeper.session.timeout.ms": 2000,
        "auto.commit.enable": False,
        "rebalance.backoff.ms": 200,
    }
    props.update({k.replace("_", "."): v for k, v in extra.items()})
    return ConsumerConfig(props)


@contextmanager
def member(stack: StackInfo, group: str, **extra: object) -> Iterator[ZookeeperConsumerConnector]:
    c = ZookeeperConsumerConnector(_config(stack, group, **extra), fetcher_factory=NullFetcher)
    try:
        yield c
    finally:
        c.shutdown()


def settled(zk: KazooClient, group: str, topic: str, strategy: str = "range") -> bool:
    exp = expected_owners(zk, group, topic, strategy)
    return bool(exp) and group_owners(zk, group, topic) == exp


def test_one_three_one_members_match_the_assignor(stack, zk, names, topic_factory) -> None:
    topic = topic_factory(names.topic, 6)
    g = names.group
    with member(stack, g) as a:
        a.create_message_streams({topic: 1})
        assert group_owners(zk, g, topic) == {p: f"{a.consumer_id}-0" for p in range(6)}
        # ids znode: the legacy JSON, byte for byte in shape, and the strategy at the end
        data, stat = zk.get(zp.id_path(g, a.consumer_id))
        assert stat.ephemeralOwner != 0
        reg = json.loads(data)
        assert list(reg) == ["version", "subscription", "pattern", "timestamp",
                             "assignment_strategy", "offsets_storage"]
        assert reg["assignment_strategy"] == "range" and reg["offsets_storage"] == "zookeeper"
        assert reg["version"] == 1 and reg["subscription"] == {topic: 1}
        assert reg["pattern"] == "static" and isinstance(reg["timestamp"], str)
        assert data == json.dumps(reg, separators=(",", ":")).encode()
        with member(stack, g) as b, member(stack, g) as c:
            b.create_message_streams({topic: 1})
            c.create_message_streams({topic: 1})
            wait_until(lambda: settled(zk, g, topic), 20, "owners for 3 members")
            owners = group_owners(zk, g, topic)
            ids = sorted([a.consumer_id, b.consumer_id, c.consumer_id])
            assert owners == {0: f"{ids[0]}-0", 1: f"{ids[0]}-0", 2: f"{ids[1]}-0",
                              3: f"{ids[1]}-0", 4: f"{ids[2]}-0", 5: f"{ids[2]}-0"}
            _, ostat = zk.get(zp.owner_path(g, topic, 0))
            assert ostat.ephemeralOwner != 0
        wait_until(lambda: group_owners(zk, g, topic)
                   == {p: f"{a.consumer_id}-0" for p in range(6)}, 20, "back to one member")
        assert {tp.partition for tp in a.owned_partitions()} == set(range(6))


def test_roundrobin_and_thread_ids_sort_as_strings(stack, zk, names, topic_factory) -> None:
    topic = topic_factory(names.topic, 12)
    g = names.group
    with member(stack, g, partition_assignment_strategy="roundrobin") as a:
        a.create_message_streams({topic: 11})
        owners = group_owners(zk, g, topic)
        assert owners == expected_owners(zk, g, topic, "roundrobin")
        assert len(set(owners.values())) == 11


def test_streams_created_once(stack, names, topic_factory) -> None:
    topic = topic_factory(names.topic, 1)
    with member(stack, names.group) as a:
        a.create_message_streams({topic: 1})
        with pytest.raises(MessageStreamsExistException):
            a.create_message_streams({topic: 1})
        with pytest.raises(MessageStreamsExistException):
            a.create_message_streams_by_filter(Whitelist(".*"))


def test_listener_sees_release_and_global_assignment(stack, zk, names, topic_factory) -> None:
    topic = topic_factory(names.topic, 4)
    g = names.group
    calls: list[tuple[str, Any]] = []

    class Listener(ConsumerRebalanceListener):
        def before_releasing_partitions(self, partition_ownership: Any) -> None:
            calls.append(("release", {t: sorted(p) for t, p in partition_ownership.items()}))

        def before_starting_fetchers(self, consumer_id: str, assignment: Any) -> None:
            calls.append(("start", {t: dict(m) for t, m in assignment.items()}))

    with member(stack, g) as a:
        a.set_consumer_rebalance_listener(Listener())
        a.create_message_streams({topic: 2})
        t0, t1 = f"{a.consumer_id}-0", f"{a.consumer_id}-1"
        assert calls == [("release", {}), ("start", {topic: {0: t0, 1: t0, 2: t1, 3: t1}})]
        calls.clear()
        with member(stack, g) as b:
            b.create_message_streams({topic: 2})
            wait_until(lambda: len(calls) >= 2 and settled(zk, g, topic), 20, "rebalance")
            assert calls[0] == ("release", {topic: [0, 1, 2, 3]})
            assert calls[-1][0] == "start" and calls[-1][1] == {
                topic: {p: th for p, th in expected_owners(zk, g, topic).items()}}


def test_commit_explicit_offsets_of_owned_partitions_only(stack, zk, names, topic_factory):
    """``commit_offsets(offsets, retry_on_failure)``, the legacy second overload: exactly
    those offsets; all-or-nothing; never for a partition a rebalance gave away."""
    topic = topic_factory(names.topic, 4)
    g = names.group
    with member(stack, g) as a:
        a.create_message_streams({topic: 1})
        a.commit_offsets({(topic, 0): 5, TopicPartition(topic, 1): 7}, False)
        assert offset_znodes(zk, g, topic, 4) == {0: 5, 1: 7}
        a.commit_offsets(True)  # the first overload, positional: nothing consumed here
        a.commit_offsets(retry_on_failure=False)
        a.commit_offsets({})
        assert offset_znodes(zk, g, topic, 4) == {0: 5, 1: 7}
        for bad in ({(topic, 2): 3, (topic, 0): -1}, {(topic, 2): 3, (topic, 0): True},
                    {(topic, 2): 3, (topic, 0): "9"}, {(topic, 2): 3, topic: 1},
                    {(topic, 2): 3, (topic, -1): 1}, [((topic, 2), 3)]):
            with pytest.raises(ValueError):
                a.commit_offsets(bad)  # type: ignore[call-overload]
        with pytest.raises(TypeError):
            a.commit_offsets(True, retry_on_failure=True)  # type: ignore[call-overload]
        assert offset_znodes(zk, g, topic, 4) == {0: 5, 1: 7}  # nothing of a bad call
        with member(stack, g) as b:
            b.create_message_streams({topic: 1})
            wait_until(lambda: settled(zk, g, topic) and len(a.owned_partitions()) == 2, 20,
                       "two members")
            theirs = sorted(b.owned_partitions())
            ours = sorted(a.owned_partitions())
            with pytest.raises(PartitionsNotOwnedError) as exc:
                a.commit_offsets({ours[0]: 50, theirs[0]: 50})
            assert exc.value.partitions == [theirs[0]]
            assert f"{topic}:{theirs[0].partition}" in str(exc.value)
            assert 50 not in offset_znodes(zk, g, topic, 4).values()
            a.commit_offsets({tp: 60 + tp.partition for tp in ours})
            b.commit_offsets({tp: 80 + tp.partition for tp in theirs})
            assert offset_znodes(zk, g, topic, 4) == {
                **{tp.partition: 60 + tp.partition for tp in ours},
                **{tp.partition: 80 + tp.partition for tp in theirs}}


def test_listener_commits_processed_offsets_before_release(stack, zk, names, topic_factory):
    """The pattern explicit offsets are for: auto-commit off, and the rebalance listener
    commits what the application processed before the partitions go (from the rebalance's
    own thread, with its lock held)."""
    topic = topic_factory(names.topic, 4)
    g = names.group
    processed: dict[TopicPartition, int] = {}
    released: list[list[int]] = []

    class Committer(ConsumerRebalanceListener):
        def __init__(self, connector: ZookeeperConsumerConnector) -> None:
            self.connector = connector

        def before_releasing_partitions(self, partition_ownership: Any) -> None:
            mine = {tp: o for tp, o in processed.items()
                    if tp.partition in partition_ownership.get(tp.topic, ())}
            self.connector.commit_offsets(mine)
            released.append(sorted(tp.partition for tp in mine))

    with member(stack, g) as a:
        a.set_consumer_rebalance_listener(Committer(a))
        a.create_message_streams({topic: 1})
        processed.update({TopicPartition(topic, p): 100 + p for p in range(4)})
        with member(stack, g) as b:
            b.create_message_streams({topic: 1})
            wait_until(lambda: settled(zk, g, topic), 20, "two members")
            assert [0, 1, 2, 3] in released
            assert offset_znodes(zk, g, topic, 4) == {p: 100 + p for p in range(4)}


def test_listener_commits_consumed_offsets_before_release(stack, zk, names, topic_factory):
    """The legacy pattern (MirrorMaker's): auto-commit off, and the listener calls
    ``commit_offsets()`` to commit what was consumed. The registry is still there when it
    runs, as in the original, so the partitions go with their offsets."""
    topic = topic_factory(names.topic, 4)
    g = names.group

    class Committer(ConsumerRebalanceListener):
        def __init__(self, connector: ZookeeperConsumerConnector) -> None:
            self.connector = connector

        def before_releasing_partitions(self, partition_ownership: Any) -> None:
            self.connector.commit_offsets()

    with member(stack, g) as a:
        a.set_consumer_rebalance_listener(Committer(a))
        a.create_message_streams({topic: 1})
        for tp, info in a.partition_infos().items():
            info.reset_consumed_offset(100 + tp.partition)  # as if the stream handed them out
        with member(stack, g) as b:
            b.create_message_streams({topic: 1})
            wait_until(lambda: settled(zk, g, topic), 20, "two members")
            assert offset_znodes(zk, g, topic, 4) == {p: 100 + p for p in range(4)}


def test_a_commit_before_release_waits_for_a_connection_dropped_meanwhile(
    stack, zk, names, topic_factory
) -> None:
    """The connection drops between reading the group and the commit before release: the
    attempt stops there and the next one (once connected) commits, instead of releasing
    uncommitted partitions."""
    topic = topic_factory(names.topic, 4)
    g = names.group
    holder: list[ZookeeperConsumerConnector] = []

    class DroppingFetcher(NullFetcher):
        stops = 0

        def stop_connections(self) -> None:
            super().stop_connections()
            DroppingFetcher.stops += 1
            if DroppingFetcher.stops == 2:  # the rebalance b's joining starts
                c = holder[0]
                c._on_zk_state(KazooState.SUSPENDED)  # what kazoo says when it drops
                threading.Timer(0.5, c._on_zk_state, (KazooState.CONNECTED,)).start()

    a = ZookeeperConsumerConnector(
        _config(stack, g, auto_commit_enable=True, auto_commit_interval_ms=600_000),
        fetcher_factory=DroppingFetcher)
    holder.append(a)
    try:
        a.create_message_streams({topic: 1})
        for tp, info in a.partition_infos().items():
            info.reset_consumed_offset(100 + tp.partition)
        with member(stack, g) as b:
            b.create_message_streams({topic: 1})
            wait_until(lambda: settled(zk, g, topic) and not a.paused, 20, "two members")
            assert DroppingFetcher.stops >= 3  # the attempt was cut short, then run again
            assert offset_znodes(zk, g, topic, 4) == {p: 100 + p for p in range(4)}
    finally:
        a.shutdown()


@contextmanager
def _creates_lost(c: ZookeeperConsumerConnector, path: str, then: Any = None) -> Iterator[None]:
    """The first create of ``path`` by ``c`` fails with ConnectionLoss without being sent (as
    kazoo fails queued requests when the connection drops); ``then()`` runs at that moment."""
    real = c._zk.create_async
    failed: list[str] = []

    def create_async(p: str, *args: Any, **kwargs: Any) -> Any:
        if p == path and not failed:
            failed.append(p)
            if then is not None:
                then()
            result = c._zk.handler.async_result()
            result.set_exception(ConnectionLoss())
            return result
        return real(p, *args, **kwargs)

    c._zk.create_async = create_async  # type: ignore[method-assign]
    try:
        yield
    finally:
        c._zk.create_async = real  # type: ignore[method-assign]
    assert failed, f"{path} was never created"


def test_a_claim_lost_with_the_connection_is_made_again(stack, zk, names, topic_factory):
    """A create that failed with the connection may never have reached ZooKeeper: the next
    attempt claims the partition again rather than fetching it with no owner znode."""
    topic = topic_factory(names.topic, 4)
    g = names.group
    with member(stack, g) as a:
        with _creates_lost(a, zp.owner_path(g, topic, 3)):
            a.create_message_streams({topic: 1})
        assert sorted(a.owned_partitions()) == [TopicPartition(topic, p) for p in range(4)]
        assert group_owners(zk, g, topic) == {p: f"{a.consumer_id}-0" for p in range(4)}
        _, stat = zk.get(zp.owner_path(g, topic, 3))
        assert stat.ephemeralOwner == a._zk.client_id[0]


def test_a_doubtful_claim_another_member_holds_is_never_deleted(stack, zk, names, topic_factory):
    """The lost create never reached ZooKeeper and another member claimed the partition
    meanwhile: this member reads the znode back and leaves it alone (it would have deleted
    another member's claim when leaving)."""
    topic = topic_factory(names.topic, 4)
    g = names.group
    path = zp.owner_path(g, topic, 3)
    with ExitStack() as stack_:
        other = stack_.enter_context(started_zk(stack.zookeeper))
        a = stack_.enter_context(member(stack, g, rebalance_max_retries=1))
        with _creates_lost(a, path, then=lambda: other.create(
                path, b"someone-else-0", ephemeral=True, makepath=True)):
            with pytest.raises(ConsumerRebalanceFailedException):
                a.create_message_streams({topic: 1})  # waits for someone-else, in vain
        a.shutdown()
        holder, stat = zk.get(path)
        assert holder == b"someone-else-0" and stat.ephemeralOwner == other.client_id[0]
        assert group_owners(zk, g, topic) == {3: "someone-else-0"}


def test_member_killed_with_sigkill_loses_its_partitions(stack, zk, names, topic_factory):
    topic = topic_factory(names.topic, 4)
    g = names.group
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.member", stack.zookeeper, g, topic, "1"],
        stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2])
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        assert line.startswith("READY "), line
        victim = line.split()[1]
        with member(stack, g) as a:
            a.create_message_streams({topic: 1})
            wait_until(lambda: settled(zk, g, topic) and len(
                set(group_owners(zk, g, topic).values())) == 2, 20, "two owners")
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            # after the 2 s session timeout, the survivor owns everything
            wait_until(lambda: group_owners(zk, g, topic)
                       == {p: f"{a.consumer_id}-0" for p in range(4)}, 20, "failover")
            assert not zk.exists(zp.id_path(g, victim))
    finally:
        proc.kill()
        proc.wait()


def test_forced_session_expiry_comes_back(stack, zk, names, topic_factory) -> None:
    topic = topic_factory(names.topic, 4)
    g = names.group
    with member(stack, g) as a, member(stack, g) as b:
        a.create_message_streams({topic: 1})
        b.create_message_streams({topic: 1})
        wait_until(lambda: settled(zk, g, topic), 20, "two members settled")
        before = group_owners(zk, g, topic)
        # Expire a's session: a second client on the same session id and password, closed.
        session_id, password = a._zk.client_id
        thief = KazooClient(hosts=stack.zookeeper, client_id=(session_id, password))
        thief.start()
        thief.stop()
        thief.close()
        wait_until(lambda: a._zk.client_id[0] != session_id, 20, "a new session")
        wait_until(lambda: zk.exists(zp.id_path(g, a.consumer_id))
                   and settled(zk, g, topic), 30, "a re-registered and owning its share")
        assert group_owners(zk, g, topic) == before
        _, stat = zk.get(zp.id_path(g, a.consumer_id))
        assert stat.ephemeralOwner == a._zk.client_id[0]


def test_partition_count_change_triggers_rebalance(stack, zk, names, topic_factory) -> None:
    from tests.support import add_partitions

    g = names.group
    topic = topic_factory(names.topic, 2)
    with member(stack, g) as a, member(stack, g) as b:
        a.create_message_streams({topic: 1})
        b.create_message_streams({topic: 1})
        wait_until(lambda: settled(zk, g, topic) and len(group_owners(zk, g, topic)) == 2,
                   20, "2 partitions owned")
        add_partitions(stack.bootstrap, topic, 4)  # CreatePartitions, as an operator would
        wait_until(lambda: settled(zk, g, topic) and len(group_owners(zk, g, topic)) == 4,
                   20, "4 partitions owned")


def test_whitelist_picks_up_new_topics(stack, zk, names, topic_factory) -> None:
    g = names.group
    first = topic_factory(names("wl-a"), 2)
    with member(stack, g) as a:
        streams = a.create_message_streams_by_filter(Whitelist(f"wl-.*-{names.suffix}"), 2)
        assert len(streams) == 2
        data = json.loads(zk.get(zp.id_path(g, a.consumer_id))[0])
        assert data["pattern"] == "white_list"
        assert data["subscription"] == {f"wl-.*-{names.suffix}": 2}
        wait_until(lambda: len(group_owners(zk, g, first)) == 2, 10, "first topic owned")
        second = topic_factory(names("wl-b"), 3)
        wait_until(lambda: len(group_owners(zk, g, second)) == 3, 20, "new topic owned")
        assert {tp.topic for tp in a.owned_partitions()} == {first, second}


def test_no_broker_registered_waits(stack, zk, names) -> None:
    # A chroot with no brokers: the member registers and waits without failing.
    chroot = f"/{names('chroot')}"
    zk.ensure_path(chroot)
    cfg = _config(stack, names.group).copy_with(
        {"zookeeper.connect": stack.zookeeper + chroot})
    c = ZookeeperConsumerConnector(cfg, fetcher_factory=NullFetcher)
    try:
        c.create_message_streams({names.topic: 1})
        assert c.owned_partitions() == {}
        zk.create(f"{chroot}{zp.topic_path(names.topic)}",
                  zp.TopicAssignment({0: [1]}).encode(), makepath=True)
        zk.create(f"{chroot}{zp.broker_path(1)}", zp.BrokerRegistration(
            broker_id=1, endpoints=["PLAINTEXT://127.0.0.1:1"], host="127.0.0.1", port=1,
            timestamp_ms=0).encode(), makepath=True, ephemeral=True)
        wait_until(lambda: len(c.owned_partitions()) == 1, 10, "owned once a broker came")
    finally:
        c.shutdown()


def test_rebalance_failure_raises_to_caller(stack, zk, names, topic_factory) -> None:
    topic = topic_factory(names.topic, 1)
    g = names.group
    # A stranger's owner znode that never goes away, held by a member that stays registered.
    zk.create(zp.owner_path(g, topic, 0), b"stranger-0", makepath=True, ephemeral=True)
    zk.create(zp.id_path(g, "stranger"), zp.ConsumerRegistration({"other": 1}, "static", 0)
              .encode(), makepath=True, ephemeral=True)
    cfg = _config(stack, g, rebalance_max_retries=2, rebalance_backoff_ms=100,
                  zookeeper_session_timeout_ms=1000)
    c = ZookeeperConsumerConnector(cfg, fetcher_factory=NullFetcher)
    try:
        with pytest.raises(ConsumerRebalanceFailedException,
                           match=rf"^{c.consumer_id} can't rebalance after 2 retries$"):
            c.create_message_streams({topic: 1})
        assert c.owned_partitions() == {}
        # Timed, as the legacy rebalance timer timed failures.
        assert c.metrics.snapshot()["RebalanceRateAndTime"]["count"] == 1
        # It left the group: no member the others give partitions to that nobody reads.
        assert zk.exists(zp.id_path(g, c.consumer_id)) is None
        with pytest.raises(ConsumerShutdownError):
            c.create_message_streams({topic: 1})
    finally:
        c.shutdown()


def test_a_connector_that_fails_to_start_leaves_no_session_or_port(stack, names) -> None:
    """The fetch side refused to start (say, the confluent backend chosen without its
    extra): the ZooKeeper session and the metrics port go with the connector, so a retry in
    the same process can take the port again."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    def refuse(_c: object) -> NullFetcher:
        raise ImportError("no confluent_kafka")

    before = {t.ident for t in threading.enumerate()}
    with pytest.raises(ImportError):
        ZookeeperConsumerConnector(_config(stack, names.group, metrics_port=port),
                                   fetcher_factory=refuse)
    wait_until(lambda: {t.ident for t in threading.enumerate() if t.is_alive()} <= before,
               10, "the connector's threads gone")
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("0.0.0.0", port))


def test_storm_of_twenty_members(stack, zk, names, topic_factory) -> None:
    topic = topic_factory(names.topic, 60)
    g = names.group
    n = 20
    barrier = threading.Barrier(n)
    errors: list[BaseException] = []
    with ExitStack() as stack_:
        members = [stack_.enter_context(member(stack, g, rebalance_backoff_ms=2000))
                   for _ in range(n)]

        def join(c: ZookeeperConsumerConnector) -> None:
            barrier.wait()
            try:
                c.create_message_streams({topic: 1})
            except BaseException as e:  # noqa: BLE001 - collected and asserted below
                errors.append(e)

        threads = [threading.Thread(target=join, args=(c,)) for c in members]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert errors == []
        wait_until(lambda: settled(zk, g, topic), 60, "20 members settled")
        owners = group_owners(zk, g, topic)
        assert sorted(owners) == list(range(60))
        per_member: dict[str, int] = {}
        for th in owners.values():
            per_member[th] = per_member.get(th, 0) + 1
        assert sorted(per_member.values()) == [3] * 20
        # what each member believes it owns agrees with ZooKeeper
        for c in members:
            assert {tp.partition: th for tp, th in c.owned_partitions().items()} == {
                p: th for p, th in owners.items() if th.startswith(c.consumer_id + "-")}


def _start_at_once(members: list[ZookeeperConsumerConnector], topic: str) -> list[BaseException]:
    """``create_message_streams({topic: 1})`` on every member, all released by one barrier;
    returns what they raised."""
    barrier = threading.Barrier(len(members))
    errors: list[BaseException] = []

    def join(c: ZookeeperConsumerConnector) -> None:
        barrier.wait()
        try:
            c.create_message_streams({topic: 1})
        except BaseException as e:  # noqa: BLE001 - collected and asserted by the caller
            errors.append(e)

    threads = [threading.Thread(target=join, args=(c,)) for c in members]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return errors


def _converged(zk: KazooClient, group: str, topic: str, members: list[Any],
               partitions: int) -> bool:
    """Every partition owned by a live member, as the assignor says, and every member's own
    view agreeing with ZooKeeper."""
    owners = group_owners(zk, group, topic)
    if sorted(owners) != list(range(partitions)) or owners != expected_owners(zk, group, topic):
        return False
    return all(
        {tp.partition: th for tp, th in c.owned_partitions().items()}
        == {p: th for p, th in owners.items() if th.startswith(c.consumer_id + "-")}
        for c in members)


def _idle(c: ZookeeperConsumerConnector) -> bool:
    """No rebalance under way or asked for."""
    if c._wakeup.is_set() or not c._rebalance_lock.acquire(blocking=False):
        return False
    c._rebalance_lock.release()
    return not c._wakeup.is_set()


def test_members_starting_at_once_converge_without_a_failed_attempt(
        stack, zk, names, topic_factory) -> None:
    # Each member's first rebalance runs in its caller's thread; a claim it made from a view
    # that another member's join changed meanwhile must restart at once, not wait out
    # zookeeper.session.timeout.ms + rebalance.backoff.ms and fail (it used to: the watcher
    # thread took the wake-up the claim was waiting for).
    topic = topic_factory(names.topic, 100)
    g = names.group
    n = 20
    with ExitStack() as stack_:
        members = [stack_.enter_context(member(stack, g, zookeeper_session_timeout_ms=6000,
                                               rebalance_backoff_ms=2000))
                   for _ in range(n)]
        assert _start_at_once(members, topic) == []
        wait_until(lambda: _converged(zk, g, topic, members, 100), 60, "20 members converged")
        shares: dict[str, int] = {}
        for th in group_owners(zk, g, topic).values():
            shares[th] = shares.get(th, 0) + 1
        assert sorted(shares.values()) == [5] * n
        assert sum(c.stats.failures for c in members) == 0
        # Stable: no member has a rebalance still to make (each watcher has settled).
        wait_until(lambda: all(_idle(c) for c in members), 30, "every member idle")
        assert _converged(zk, g, topic, members, 100)
        assert sum(c.stats.failures for c in members) == 0


def test_a_sticky_group_owns_what_the_sticky_assignor_computes(
        stack, zk, names, topic_factory) -> None:
    topic = topic_factory(names.topic, 12)
    g = names.group
    with ExitStack() as stack_:
        members = [stack_.enter_context(member(stack, g, partition_assignment_strategy="sticky"))
                   for _ in range(3)]
        for c in members:
            c.create_message_streams({topic: 2})
        wait_until(lambda: settled(zk, g, topic, "sticky"), 30, "sticky owners")
        data, _ = zk.get(zp.id_path(g, members[0].consumer_id))
        assert json.loads(data)["assignment_strategy"] == "sticky"
        before = group_owners(zk, g, topic)
        members[1].shutdown()
        wait_until(lambda: settled(zk, g, topic, "sticky")
                   and set(group_owners(zk, g, topic).values()).isdisjoint(
                       zp.thread_ids(members[1].consumer_id, 2)), 30, "sticky owners after a leave")
        after = group_owners(zk, g, topic)
        assert sorted(after) == list(range(12))
        assert sorted(Counter(after.values()).values()) == [3, 3, 3, 3]
        assert before != after


def test_a_member_with_another_strategy_refuses_to_claim(stack, zk, names, topic_factory):
    topic = topic_factory(names.topic, 4)
    g = names.group
    with member(stack, g) as ranged, member(
            stack, g, partition_assignment_strategy="sticky") as sticky:
        ranged.create_message_streams({topic: 1})
        with pytest.raises(AssignmentStrategyMismatchError) as e:
            sticky.create_message_streams({topic: 1})
        msg = str(e.value)
        assert "'sticky'" in msg and "'range'" in msg and ranged.consumer_id in msg
        # It left the group; the range member kept everything throughout.
        assert zk.exists(zp.id_path(g, sticky.consumer_id)) is None
        assert set(group_owners(zk, g, topic).values()) == {f"{ranged.consumer_id}-0"}
        assert sticky.stats.attempts == 1  # refused at once, not retried


def test_sticky_is_refused_in_a_group_with_a_jvm_member(stack, zk, names, topic_factory):
    topic = topic_factory(names.topic, 4)
    g = names.group
    jvm_id = f"{g}_jvm-1494000000000-1a2b3c4d"
    # A JVM member's registration: no strategy recorded.
    zk.create(zp.id_path(g, jvm_id), zp.ConsumerRegistration({topic: 1}, "static", 1).encode(),
              ephemeral=True, makepath=True)
    with member(stack, g, partition_assignment_strategy="sticky") as sticky:
        with pytest.raises(AssignmentStrategyMismatchError,
                           match="'sticky' differs from the group's 'range' or 'roundrobin'"):
            sticky.create_message_streams({topic: 1})
    assert group_owners(zk, g, topic) == {}


class IncrementalRecorder(NullFetcher):
    """A fetch side that records which partitions are started and stopped, one by one."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.added: list[set[int]] = []
        self.removed: list[set[int]] = []

    def add_partitions(self, infos: Any) -> None:
        self.added.append({i.partition for i in infos})

    def remove_partitions(self, infos: Any) -> None:
        self.removed.append({i.partition for i in infos})


def test_only_the_partitions_that_move_are_stopped_and_started(
        stack, zk, names, topic_factory) -> None:
    topic = topic_factory(names.topic, 6)
    g = names.group
    fetch = IncrementalRecorder()
    a = ZookeeperConsumerConnector(_config(stack, g), fetcher_factory=lambda _c: fetch)
    try:
        a.create_message_streams({topic: 1})
        first = a.partition_infos()
        stops = fetch.stops  # the first rebalance's (nothing was fetched yet)
        assert len(first) == 6 and len(fetch.started) == 1
        with member(stack, g) as b:
            b.create_message_streams({topic: 1})
            wait_until(lambda: settled(zk, g, topic) and len(a.partition_infos()) == 3, 30,
                       "two members settled")
            mine = {tp.partition for tp in a.partition_infos()}
            assert fetch.removed == [set(range(6)) - mine]
            assert all(a.partition_infos()[tp] is first[tp] for tp in a.partition_infos())
            assert all(first[tp].revoked for tp in first if tp.partition not in mine)
            assert fetch.stops == stops and fetch.added == []
        wait_until(lambda: len(a.partition_infos()) == 6, 30, "a owns everything again")
        assert fetch.added == [set(range(6)) - mine]
        assert fetch.stops == stops and len(fetch.started) == 1
        assert a.stats.incremental == 2
    finally:
        a.shutdown()


def test_a_rebalance_listener_still_sees_every_partition_stop(
        stack, zk, names, topic_factory) -> None:
    # Its before_releasing_partitions is told of all the member owns: the full rebalance.
    topic = topic_factory(names.topic, 4)
    g = names.group
    fetch = IncrementalRecorder()
    told: list[dict[str, set[int]]] = []

    class Listener(ConsumerRebalanceListener):
        def before_releasing_partitions(self, partition_ownership: Any) -> None:
            told.append({t: set(ps) for t, ps in partition_ownership.items()})

    a = ZookeeperConsumerConnector(_config(stack, g), fetcher_factory=lambda _c: fetch)
    try:
        a.set_consumer_rebalance_listener(Listener())
        a.create_message_streams({topic: 1})
        stops = fetch.stops
        with member(stack, g) as b:
            b.create_message_streams({topic: 1})
            wait_until(lambda: settled(zk, g, topic) and len(a.partition_infos()) == 2, 30,
                       "two members settled")
        assert {topic: {0, 1, 2, 3}} in told
        assert fetch.stops > stops and fetch.removed == [] and a.stats.incremental == 0
    finally:
        a.shutdown()


def test_a_dead_fetch_side_reaches_the_iterating_thread(stack, names, topic_factory) -> None:
    topic = topic_factory(names.topic, 1)

    class DyingFetcher(NullFetcher):
        error: BaseException | None = None

    fetcher = DyingFetcher()
    c = ZookeeperConsumerConnector(_config(stack, names.group),
                                   fetcher_factory=lambda _c: fetcher)
    try:
        stream = c.create_message_streams({topic: 1})[topic][0]
        fetcher.error = RuntimeError("fetcher thread died")
        with pytest.raises(BackgroundThreadError) as exc:
            next(iter(stream))  # blocked on its queue until the failure is put there
        assert isinstance(exc.value.__cause__, RuntimeError)
        with pytest.raises(BackgroundThreadError):
            next(iter(stream))  # and on every later call
        with pytest.raises(BackgroundThreadError):
            c.commit_offsets()
        c.shutdown()
        # Once shut down, iterating ends (a loop that logs the failure and goes on ends too).
        assert list(stream) == []
    finally:
        c.shutdown()


def test_a_fetch_failure_outlives_a_rebalance_before_anyone_iterates(stack, names, topic_factory):
    """The failure put on the queues is put again after a rebalance clears them: the
    iterator still raises it (it blocked for ever before)."""
    topic = topic_factory(names.topic, 1)

    class DyingFetcher(NullFetcher):
        error: BaseException | None = None

    fetcher = DyingFetcher()
    c = ZookeeperConsumerConnector(_config(stack, names.group, consumer_timeout_ms=5000),
                                   fetcher_factory=lambda _c: fetcher)
    try:
        stream = c.create_message_streams({topic: 1})[topic][0]
        fetcher.error = RuntimeError("fetcher thread died")
        wait_until(lambda: stream.chunk_queue.qsize() > 0, 10, "the failure queued")
        done = c.stats.rebalances
        c.rebalance_now()
        wait_until(lambda: c.stats.rebalances > done, 10, "a rebalance")
        with pytest.raises(BackgroundThreadError) as exc:
            next(iter(stream))
        assert isinstance(exc.value.__cause__, RuntimeError)
    finally:
        c.shutdown()


def test_an_offset_commit_is_never_sent_after_the_session_is_lost(
    stack, zk, names, topic_factory
) -> None:
    """The session is lost between the commit's check and its write: the write is not sent
    (under the next session it could move another member's offset back), and the caller
    gets ZkConnectionLostError."""
    topic = topic_factory(names.topic, 2)
    g = names.group
    with member(stack, g) as a:
        a.create_message_streams({topic: 1})
        real = a._commits.offsets.commit

        def commit_after_the_loss(offsets: Any) -> int:
            a._on_zk_state(KazooState.LOST)  # what kazoo says when the session expired
            return real(offsets)

        a._commits.offsets.commit = commit_after_the_loss  # type: ignore[method-assign]
        with pytest.raises(ZkConnectionLostError):
            a.commit_offsets({(topic, 0): 50})
        assert offset_znodes(zk, g, topic, 2) == {}


def test_brokers_are_found_on_the_endpoint_of_the_security_protocol(stack, zk, names) -> None:
    """A cluster whose brokers register only TLS listeners: the fetchers and the Kafka
    offset store get those addresses (with the PLAINTEXT default they got none)."""
    chroot = f"/{names.group}-tls"
    reg = zp.BrokerRegistration(
        1, ["INTERNAL://10.0.0.1:9092", "EXTERNAL://broker1:9093"], None, -1,
        timestamp_ms=1, listener_security_protocol_map={"INTERNAL": "PLAINTEXT",
                                                        "EXTERNAL": "SSL"})
    zk.create(chroot + zp.broker_path(1), reg.encode(), makepath=True)
    for protocol, expected in (("SSL", ["broker1:9093"]), ("PLAINTEXT", ["10.0.0.1:9092"])):
        c = ZookeeperConsumerConnector(ConsumerConfig({
            "zookeeper.connect": stack.zookeeper + chroot, "group.id": names.group,
            "security.protocol": protocol}), fetcher_factory=NullFetcher)
        try:
            assert c.broker_addresses() == expected
        finally:
            c.shutdown()


def _counting_member(stack: StackInfo, group: str, **extra: object) -> Any:
    return ZookeeperConsumerConnector(_config(stack, group, **extra), fetcher_factory=NullFetcher)


def test_a_connection_blip_keeps_the_assignment_and_the_fetchers(
    stack, zk, names, topic_factory
) -> None:
    """kazoo fires and forgets every watch when its connection drops; the rebalance after the
    reconnection sets them again, finds the group as it was, and stops nothing (the
    original's ZkClient kept its watches and did not rebalance at all)."""
    topic = topic_factory(names.topic, 4)
    g = names.group
    with ExitStack() as es:
        a = _counting_member(stack, g)
        es.callback(a.shutdown)
        b = _counting_member(stack, g)
        es.callback(b.shutdown)
        a.create_message_streams({topic: 1})
        b.create_message_streams({topic: 1})
        # a's second rebalance (b joining) counted too, before the counts are taken.
        wait_until(lambda: settled(zk, g, topic) and a.stats.rebalances >= 2
                   and b.stats.rebalances >= 1 and not a.paused and not b.paused, 20,
                   "two members")
        owners = group_owners(zk, g, topic)
        stops = (a._fetcher.stops, b._fetcher.stops)
        rebalances = (a.stats.rebalances, b.stats.rebalances)
        session = a._zk.client_id[0]

        drop_connection(a._zk)
        wait_until(lambda: a.stats.unchanged >= 1 and not a.paused, 20,
                   "a's rebalance after the reconnection")
        assert a._zk.client_id[0] == session  # a blip, not a new session
        assert (a._fetcher.stops, b._fetcher.stops) == stops
        assert (a.stats.rebalances, b.stats.rebalances) == rebalances
        assert group_owners(zk, g, topic) == owners
        assert a.owned_partitions() == {TopicPartition(topic, p): th
                                        for p, th in owners.items() if th.startswith(a.consumer_id)}

        # The watches were set again: a third member still moves a's partitions.
        c = _counting_member(stack, g)
        es.callback(c.shutdown)
        c.create_message_streams({topic: 1})
        wait_until(lambda: a.stats.rebalances > rebalances[0], 20, "a rebalancing for c")
        wait_until(lambda: settled(zk, g, topic) and len(set(group_owners(zk, g, topic)
                                                              .values())) == 3, 20,
                   "three members")


def test_an_owner_znode_deleted_behind_the_members_back_is_claimed_again(
    stack, zk, names, topic_factory
) -> None:
    """Ownership is read back from ZooKeeper at each rebalance, not taken from a cache."""
    topic = topic_factory(names.topic, 2)
    g = names.group
    with member(stack, g) as a:
        a.create_message_streams({topic: 1})
        path = zp.owner_path(g, topic, 1)
        zk.delete(path)
        a.rebalance_now()

        def reclaimed() -> bool:
            stat = zk.exists(path)
            return stat is not None and stat.ephemeralOwner == a._zk.client_id[0]

        wait_until(reclaimed, 10, "the owner znode created again")
        assert group_owners(zk, g, topic) == {0: f"{a.consumer_id}-0", 1: f"{a.consumer_id}-0"}


def test_a_partition_another_session_took_behind_the_members_back_is_left_alone(
    stack, zk, names, topic_factory
) -> None:
    """The member's owner znode was deleted and another session claimed the path: the member
    finds it at its next rebalance, never commits to it, and never deletes it."""
    topic = topic_factory(names.topic, 2)
    g = names.group
    path = zp.owner_path(g, topic, 1)
    with started_zk(stack.zookeeper) as other:
        with member(stack, g, rebalance_max_retries=1, auto_commit_enable=True,
                    auto_commit_interval_ms=600_000) as a:
            a.create_message_streams({topic: 1})
            for tp, info in a.partition_infos().items():
                info.reset_consumed_offset(3 + tp.partition)  # as if consumed
            zk.delete(path)
            other.create(path, b"someone-else-0", ephemeral=True)
            a.rebalance_now()
            wait_until(lambda: TopicPartition(topic, 1) not in a.owned_partitions(), 10,
                       "the member seeing that it does not own partition 1")
            with pytest.raises(PartitionsNotOwnedError):
                a.commit_offsets({(topic, 1): 5})
        holder, stat = zk.get(path)
        assert holder == b"someone-else-0" and stat.ephemeralOwner == other.client_id[0]
        # The commit before release (step 2) wrote partition 0's offset, not partition 1's.
        assert offset_znodes(zk, g, topic, 2) == {0: 3}


def test_a_session_lost_during_shutdown_deletes_no_claim_of_another_member(
    stack, zk, names, topic_factory
) -> None:
    """The session expires while shutdown() is under way and another member claims the
    partitions at once: leaving the group must not delete the same paths (they are the
    other member's claims by then)."""
    topic = topic_factory(names.topic, 2)
    g = names.group
    holder: list[ZookeeperConsumerConnector] = []
    expired: list[int] = []

    class ExpiringFetcher(NullFetcher):
        def stop_connections(self) -> None:
            super().stop_connections()
            c = holder[0]
            if c._shutdown_event.is_set() and not expired:
                session_id, password = c._zk.client_id
                expired.append(session_id)
                thief = KazooClient(hosts=stack.zookeeper, client_id=(session_id, password))
                thief.start()
                thief.stop()
                thief.close()
                wait_until(lambda: c._zk.connected and c._zk.client_id[0] != session_id, 20,
                           "a new session for the member shutting down")
                wait_until(lambda: set(group_owners(zk, g, topic).values()) == {b_thread}, 20,
                           "the other member owning everything")

    with member(stack, g) as b:
        b.create_message_streams({topic: 1})
        b_thread = f"{b.consumer_id}-0"
        a = ZookeeperConsumerConnector(_config(stack, g), fetcher_factory=ExpiringFetcher)
        holder.append(a)
        try:
            a.create_message_streams({topic: 1})
            wait_until(lambda: settled(zk, g, topic) and len(a.owned_partitions()) == 1, 20,
                       "two members")
        finally:
            a.shutdown()
        assert expired, "the session was never expired"
        assert group_owners(zk, g, topic) == {0: b_thread, 1: b_thread}


@contextmanager
def _committing(stack: StackInfo, group: str, topic: str, store: Any,
                **extra: object) -> Iterator[ZookeeperConsumerConnector]:
    """A member owning ``topic`` (one partition) with offset 5 consumed, whose commits go to
    ``store`` (an object with ``commit(offsets)``)."""
    with member(stack, group, offsets_commit_max_retries=3, **extra) as c:
        c.create_message_streams({topic: 1})
        for info in c.partition_infos().values():
            info.reset_consumed_offset(5)
        real = c._commits.offsets
        c._commits.offsets = store
        try:
            yield c
        finally:
            c._commits.offsets = real


def test_a_commit_retry_is_not_sent_once_the_connection_dropped(
    stack, zk, names, topic_factory
) -> None:
    """The first attempt fails, the connection drops during the backoff: the retry is not
    sent (the partitions may be another member's by then), and the caller is told."""
    topic = topic_factory(names.topic, 1)
    attempts: list[dict[TopicPartition, int]] = []
    holder: list[ZookeeperConsumerConnector] = []

    class FailingOnce:
        def commit(self, offsets: dict[TopicPartition, int]) -> int:
            attempts.append(dict(offsets))
            if len(attempts) == 1:
                holder[0]._on_zk_state(KazooState.SUSPENDED)  # drops during the backoff
                raise RuntimeError("broker busy")
            return len(offsets)

    with _committing(stack, names.group, topic, FailingOnce(),
                     offsets_channel_backoff_ms=300) as c:
        holder.append(c)
        try:
            with pytest.raises(ZkConnectionLostError):
                c.commit_offsets()
        finally:
            c._on_zk_state(KazooState.CONNECTED)
    assert attempts == [{TopicPartition(topic, 0): 5}]


def test_a_commit_refused_for_good_is_not_retried(stack, zk, names, topic_factory) -> None:
    from zkconsumer._errors import OffsetCommitError

    topic = topic_factory(names.topic, 1)
    attempts: list[int] = []

    class Refusing:
        def commit(self, offsets: dict[TopicPartition, int]) -> int:
            attempts.append(1)
            raise OffsetCommitError(names.group, {(topic, 0): "IllegalGenerationError"},
                                    retriable=False)

    with _committing(stack, names.group, topic, Refusing(), offsets_channel_backoff_ms=50) as c:
        with pytest.raises(OffsetCommitError):
            c.commit_offsets()
    assert attempts == [1]


def test_a_failed_attempt_tells_the_listener_before_it_releases(
    stack, zk, names, topic_factory
) -> None:
    """An attempt that fails before step 3 (a garbled registration read, a refused read)
    releases everything: the listener (the application committing what it processed) was
    not told, and the next owner replayed."""
    from zkconsumer._errors import ZkDataError

    topic = topic_factory(names.topic, 4)
    told: list[dict[str, set[int]]] = []

    class Listener(ConsumerRebalanceListener):
        def before_releasing_partitions(self, partition_ownership: Any) -> None:
            told.append({t: set(ps) for t, ps in partition_ownership.items()})

    with member(stack, names.group) as a:
        a.set_consumer_rebalance_listener(Listener())
        a.create_message_streams({topic: 1})
        assert len(a.owned_partitions()) == 4
        told.clear()
        real = a._read_view
        calls = [0]

        def read_view() -> Any:
            calls[0] += 1
            if calls[0] == 1:
                raise ZkDataError("garbled registration")
            return real()

        a._read_view = read_view  # type: ignore[method-assign]
        a.rebalance_now()
        wait_until(lambda: calls[0] >= 2 and len(a.owned_partitions()) == 4, 20,
                   "rolled back, then owning all again")
        assert told and told[0] == {topic: {0, 1, 2, 3}}, told


def test_a_watcher_thread_that_dies_ends_the_iterators_with_its_error(
    stack, zk, names, topic_factory
) -> None:
    """A listener raising a BaseException (sys.exit) killed the watcher thread: no more
    rebalances, and the iterators waited for ever (only commit_offsets() raised it)."""
    topic = topic_factory(names.topic, 2)

    class Exiting(ConsumerRebalanceListener):
        armed = False

        def before_releasing_partitions(self, partition_ownership: Any) -> None:
            if self.armed:
                raise SystemExit(3)

    listener = Exiting()
    with member(stack, names.group, consumer_timeout_ms=15_000) as a:
        a.set_consumer_rebalance_listener(listener)
        (stream,) = a.create_message_streams({topic: 1})[topic]
        listener.armed = True
        a.rebalance_now()
        with pytest.raises(BackgroundThreadError, match="SystemExit"):
            next(iter(stream))


def test_a_jvm_member_subscribing_to_an_impossible_topic_name_does_not_stall_the_group(
    stack, zk, names, topic_factory
) -> None:
    """The JVM's createMessageStreams takes any string: a member subscribed to "logs/app"
    (not a path component) made every zkconsumer attempt fail, where the JVM reads the
    missing /brokers/topics znode as no partitions and goes on."""
    topic = topic_factory(names.topic, 2)
    g = names.group
    zk.create(zp.id_path(g, "jvm"), zp.ConsumerRegistration({"logs/app": 1}, "static", 0)
              .encode(), makepath=True, ephemeral=True)
    with member(stack, g, rebalance_max_retries=2, rebalance_backoff_ms=100) as c:
        c.create_message_streams({topic: 1})
        assert len(c.owned_partitions()) == 2


@contextmanager
def _recorded_reads(client: KazooClient, *methods: str) -> Iterator[list[tuple[str, str]]]:
    """(method, path) of each call of these read methods of ``client`` while inside."""
    calls: list[tuple[str, str]] = []
    real = {name: getattr(client, name) for name in methods}

    def recording(name: str) -> Any:
        def call(path: str, *args: Any, **kwargs: Any) -> Any:
            calls.append((name, path))
            return real[name](path, *args, **kwargs)
        return call

    for name in methods:
        setattr(client, name, recording(name))
    try:
        yield calls
    finally:
        for name, fn in real.items():
            setattr(client, name, fn)


def test_the_topic_and_broker_reads_travel_with_the_members_read(
        stack, zk, names, topic_factory) -> None:
    """The group view takes two round trips, not three: this member's own topics and the
    brokers are read while the members are, before any answer is awaited."""
    topic = topic_factory(names.topic, 2)
    with member(stack, names.group) as a:
        a.create_message_streams({topic: 1})
        with _recorded_reads(a._membership.zk, "get_children", "get_async",
                             "get_children_async") as calls:
            before = a.stats.attempts
            a.rebalance_now()
            wait_until(lambda: a.stats.attempts > before and not a.paused, 20, "a rebalance")
        members_read = calls.index(("get_children", zp.ids_dir(names.group)))
        topic_read = ("get_async", zp.topic_path(topic))
        assert topic_read in calls[:members_read], calls
        assert ("get_children_async", zp.BROKER_IDS) in calls[:members_read], calls
        assert topic_read not in calls[members_read:], calls


def _register_by_hand(zk: KazooClient, group: str, cid: str, topic: str, threads: int) -> None:
    """An ids znode as a JVM member writes it (no strategy field: range), with ``threads``
    streams of ``topic``."""
    reg = zp.ConsumerRegistration({topic: threads}, "static", 1)
    zk.create(zp.id_path(group, cid), reg.encode(), ephemeral=True, makepath=True)


def _owned_count(c: ZookeeperConsumerConnector) -> int:
    return len(c.owned_partitions())


def test_a_registration_made_again_with_other_data_is_read_again(
        stack, zk, names, topic_factory) -> None:
    """Registrations are read once and kept while their data watch lives: one deleted and
    made again under the same id with other data, or rewritten in place, is read again (a
    member's share changes with the other's thread count)."""
    topic = topic_factory(names.topic, 6)
    g = names.group
    other = f"{g}_~hand-0-ffffffff"  # "~" sorts after any host name: its threads after a's
    with member(stack, g) as a:
        a.create_message_streams({topic: 1})
        _register_by_hand(zk, g, other, topic, 1)  # range over a-0, other-0: 3 each
        wait_until(lambda: _owned_count(a) == 3 and not a.paused, 20, "a with half")
        zk.delete(zp.id_path(g, other))  # and made again at once, with 2 threads: 2 each
        _register_by_hand(zk, g, other, topic, 2)
        wait_until(lambda: _owned_count(a) == 2 and not a.paused, 20,
                   "a with a third, the other read again")
        reg = zp.ConsumerRegistration({topic: 5}, "static", 1)  # 6 threads: 1 each
        zk.set(zp.id_path(g, other), reg.encode())
        wait_until(lambda: _owned_count(a) == 1 and not a.paused, 20,
                   "a with one, the rewritten registration read again")


def test_a_leave_reads_no_registration_and_a_join_only_the_newcomers(
        stack, zk, names, topic_factory) -> None:
    topic = topic_factory(names.topic, 4)
    g = names.group
    with member(stack, g) as a:
        a.create_message_streams({topic: 1})
        with _recorded_reads(a._membership.zk, "get_async") as calls:

            def registrations_read() -> list[str]:
                return [zp.id_of_path(path) for _, path in calls
                        if path.startswith(zp.ids_dir(g) + "/")]

            done = a.stats.rebalances
            with member(stack, g) as b:
                b.create_message_streams({topic: 1})
                wait_until(lambda: a.stats.rebalances > done and settled(zk, g, topic), 20,
                           "a rebalanced for b")
                assert registrations_read() == [b.consumer_id]
                done = a.stats.rebalances
            wait_until(lambda: a.stats.rebalances > done and _owned_count(a) == 4, 20,
                       "a rebalanced after b left")
            assert registrations_read() == [b.consumer_id]
