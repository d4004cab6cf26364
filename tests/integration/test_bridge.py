"""The bridge's bookkeeping under faults: resyncs, odd metadata answers, znodes changed by
others, ZooKeeper refusing requests. Each test drives a bridge of its own on a tree of its own
(the stack's bridge owns /brokers), with metadata made by hand."""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import pytest
from kazoo.client import KazooClient
from kazoo.security import OPEN_ACL_UNSAFE, make_acl

from tests.support import (
    StackInfo,
    create_topic,
    delete_topic,
    reaped,
    running_bridge,
    started_zk,
    wait_until,
)
from zkconsumer.bridge import MANAGED_DIR, Bridge, ClusterView, read_cluster
from zkconsumer.stack.local import LocalStack, running_stack
from zkconsumer.zk import paths as zp

READ_ONLY = [make_acl("world", "anyone", read=True)]


# The bridge is for brokers that write nothing to ZooKeeper: its tests run against Kafka 4 in
# KRaft mode (``stack``, ``zk`` and ``topic_factory`` follow the mark).
pytestmark = pytest.mark.broker("kraft")


@pytest.fixture
def private_stack(tmp_path: Path) -> Iterator[LocalStack]:
    """A KRaft stack of its own, for tests that stop and start components."""
    with running_stack(tmp_path / "stack", broker="kraft") as s:
        yield s


def _broker_ids(zk: KazooClient) -> list[str]:
    return sorted(zk.get_children(zp.BROKER_IDS)) if zk.exists(zp.BROKER_IDS) else []


def _topic(name: str, partitions: int, error_code: int = 0, epoch: int = 0) -> dict[str, Any]:
    """A topic as kafka-python's describe_topics answers it; broker 1 leads everything."""
    return {"name": name, "error_code": error_code, "is_internal": False, "partitions": [
        {"partition_index": p, "replica_nodes": [1], "leader_id": 1, "leader_epoch": epoch,
         "isr_nodes": [1]} for p in range(partitions)]}


class _Admin:
    """kafka-python's admin client answering fixed metadata; ``brokers=None``: the cluster
    is unreachable."""

    def __init__(self, brokers: list[int] | None, topics: Mapping[str, int] = {}) -> None:
        self.brokers = brokers
        self.topics = [_topic(t, n) for t, n in topics.items()]

    def describe_cluster(self) -> dict[str, Any]:
        if self.brokers is None:
            raise ConnectionError("cluster unreachable")
        return {"brokers": [{"broker_id": b, "host": f"h{b}", "port": 9092, "rack": None}
                            for b in self.brokers]}

    def describe_topics(self) -> list[dict[str, Any]]:
        return self.topics

    def close(self) -> None:
        pass


def _parts(n: int, epoch: int = 0) -> dict[int, tuple[list[int], int, int, list[int]]]:
    return {p: ([1], 1, epoch, [1]) for p in range(n)}


BROKER: dict[int, tuple[str, int, str | None]] = {1: ("h1", 9092, None)}


def test_bridge_reconnects_to_zookeeper_at_least_every_second(
    stack: StackInfo, zk: KazooClient, names: Any
) -> None:
    # kazoo's default backoff grows to an hour: after a long outage the bridge reconnected
    # minutes late, and at start it could miss its --connect-timeout.
    with _bridge_on(stack, zk, f"/bridge-{names.suffix}") as bridge:
        retry = bridge._zk._conn_retry
        assert retry.max_tries == -1  # for ever: it waits for ZooKeeper
        assert retry.max_delay <= 1.0


def test_a_resync_keeps_the_registrations_the_bridge_owns(
    stack: StackInfo, zk: KazooClient, names: Any
) -> None:
    """A failed request makes the next round rewrite everything, but the session and its
    ephemerals survived: a broker leaving, or the cluster going away, must still remove them
    (and only them)."""
    root = f"/bridge-{names.suffix}"
    zk.create(root + zp.broker_path(3), b"{}", ephemeral=True, makepath=True)  # someone's
    with _bridge_on(stack, zk, root, gone_after_s=0.0) as bridge:
        bridge._admin = _Admin([1, 2, 3])
        bridge.reconcile_once()
        assert sorted(zk.get_children(root + zp.BROKER_IDS)) == ["1", "2", "3"]

        bridge._resync.set()  # as a ZooKeeper request that timed out does
        bridge._admin = _Admin([1, 3])
        bridge.reconcile_once()
        assert sorted(zk.get_children(root + zp.BROKER_IDS)) == ["1", "3"]  # 2 left

        bridge._resync.set()
        bridge._admin = _Admin(None)
        bridge.reconcile_once()  # the cluster is gone: its registrations go
        assert zk.get_children(root + zp.BROKER_IDS) == ["3"]
        assert zk.get(root + zp.broker_path(3))[0] == b"{}"


def test_registrations_are_read_back_every_round(
    stack: StackInfo, zk: KazooClient, names: Any
) -> None:
    """What the bridge remembers writing is not trusted: a registration deleted by hand is
    written again, and one another session holds now (another bridge took the id while this
    one's session was away) is never deleted, by a round or at stop."""
    root = f"/bridge-{names.suffix}"
    path = root + zp.broker_path(1)
    with _bridge_on(stack, zk, root) as bridge:
        bridge._admin = _Admin([1])
        bridge.reconcile_once()
        def registration() -> dict[str, Any]:
            data = json.loads(zk.get(path)[0])
            del data["timestamp"]  # the time it was written
            return cast(dict[str, Any], data)

        written = registration()
        zk.delete(path)
        bridge.reconcile_once()
        assert registration() == written  # written again

        zk.delete(path)
        zk.create(path, b"another bridge's", ephemeral=True)
        bridge._admin = _Admin(None)
        bridge.reconcile_once()  # the cluster is gone: only its own registrations go
        assert zk.get(path)[0] == b"another bridge's"
        bridge._deregister_all()
        assert zk.get(path)[0] == b"another bridge's"


def test_read_cluster_reports_topics_with_an_error_apart() -> None:
    class Admin(_Admin):
        def describe_topics(self) -> list[dict[str, Any]]:
            return [_topic("ok", 1), _topic("odd", 1, error_code=5)]  # LEADER_NOT_AVAILABLE

    view = read_cluster(Admin([1]))
    assert list(view.topics) == ["ok"]
    assert view.errored == {"odd"}


def test_a_topic_missing_from_one_answer_keeps_its_znodes(
    stack: StackInfo, zk: KazooClient, names: Any
) -> None:
    """Deleting and recreating a topic's znodes makes legacy consumers rebalance twice: an
    answer with an error for it changes nothing, and a topic is gone only once missing from
    two answers in a row."""
    root = f"/bridge-{names.suffix}"
    topic, marker = root + zp.topic_path("t"), root + MANAGED_DIR + "/t"
    with _bridge_on(stack, zk, root) as bridge:
        bridge.apply(ClusterView(BROKER, {"t": _parts(2)}))
        created = zk.exists(topic).czxid
        bridge.apply(ClusterView(BROKER, {}, frozenset({"t"})))  # errored
        bridge.apply(ClusterView(BROKER, {}))  # missing once
        bridge.apply(ClusterView(BROKER, {"t": _parts(2)}))
        bridge.apply(ClusterView(BROKER, {}))  # missing once again
        assert zk.exists(topic).czxid == created  # never deleted
        assert zk.exists(root + zp.partition_state_path("t", 1))
        assert zk.exists(marker)
        bridge.apply(ClusterView(BROKER, {}))  # missing twice in a row: gone
        assert zk.exists(topic) is None and zk.exists(marker) is None


def test_a_managed_topic_znode_deleted_by_hand_is_written_again(
    stack: StackInfo, zk: KazooClient, names: Any
) -> None:
    """Never left missing while its cached bytes match, and never recreated empty by a
    partition state's write (readers reject an empty topic znode as invalid JSON)."""
    root = f"/bridge-{names.suffix}"
    topic = root + zp.topic_path("t")
    with _bridge_on(stack, zk, root) as bridge:
        bridge.apply(ClusterView(BROKER, {"t": _parts(2)}))
        zk.delete(topic, recursive=True)
        bridge.apply(ClusterView(BROKER, {"t": _parts(2)}))  # nothing changed in the cluster
        assert zp.TopicAssignment.decode(zk.get(topic)[0]).partitions == {0: [1], 1: [1]}
        assert zk.exists(root + zp.partition_state_path("t", 1))

        # Deleted between the bridge's listing and its write of a partition state.
        real = bridge._zk.set_async
        deleted: list[str] = []

        def delete_first(path: str, *args: Any, **kwargs: Any) -> Any:
            if path == zp.partition_state_path("t", 0) and not deleted:
                deleted.append(path)
                zk.delete(topic, recursive=True)
            return real(path, *args, **kwargs)

        bridge._zk.set_async = delete_first
        bridge.apply(ClusterView(BROKER, {"t": _parts(2, epoch=1)}))  # a leader epoch moved
        assert deleted
        assert zk.exists(topic) is None  # not recreated empty
        bridge.apply(ClusterView(BROKER, {"t": _parts(2, epoch=1)}))
        assert zp.TopicAssignment.decode(zk.get(topic)[0]).partitions == {0: [1], 1: [1]}
        for p in (0, 1):
            state = zk.get(root + zp.partition_state_path("t", p))[0]
            assert zp.PartitionState.decode(state).leader_epoch == 1


def test_an_admin_tools_write_racing_the_bridges_first_one_wins(
    stack: StackInfo, zk: KazooClient, names: Any
) -> None:
    root = f"/bridge-{names.suffix}"
    topic = root + zp.topic_path("t")
    theirs = zp.TopicAssignment({0: [1], 1: [1], 2: [1]}).encode()
    with _bridge_on(stack, zk, root) as bridge:
        real = bridge._zk.ensure_path_async

        def admin_writes_first(path: str, *args: Any, **kwargs: Any) -> Any:
            if path == f"{MANAGED_DIR}/t" and not zk.exists(topic):
                zk.create(topic, theirs)  # after the bridge listed /brokers/topics
            return real(path, *args, **kwargs)

        bridge._zk.ensure_path_async = admin_writes_first
        for _ in range(2):
            bridge.apply(ClusterView(BROKER, {"t": _parts(1)}))
            assert zk.get(topic)[0] == theirs
            assert zk.exists(root + MANAGED_DIR + "/t") is None  # not the bridge's
            assert zk.exists(root + zp.partition_state_path("t", 0)) is None

        # The bridge's own bytes there (its create of a round that timed out, run late): its.
        bridge._zk.ensure_path_async = real
        mine = zp.TopicAssignment({0: [1]}).encode()
        real_create = bridge._zk.create_async

        def own_create_lands_first(path: str, *args: Any, **kwargs: Any) -> Any:
            if path == zp.topic_path("u") and not zk.exists(root + path):
                zk.create(root + path, mine)
            return real_create(path, *args, **kwargs)

        bridge._zk.create_async = own_create_lands_first
        bridge.apply(ClusterView(BROKER, {"u": _parts(1)}))
        assert zk.exists(root + MANAGED_DIR + "/u")
        assert zk.exists(root + zp.partition_state_path("u", 0))


def test_a_refused_write_is_logged_once_naming_its_znode(
    stack: StackInfo, zk: KazooClient, names: Any, caplog: pytest.LogCaptureFixture
) -> None:
    root = f"/bridge-{names.suffix}"
    with _bridge_on(stack, zk, root) as bridge:
        bridge._admin = _Admin([1], {"t": 1})
        bridge.run_round()
        # A hand-made ACL: no write (admin, to put it back below).
        zk.set_acls(root + zp.topic_path("t"), [make_acl("world", "anyone", read=True,
                                                          admin=True)])
        bridge._admin = _Admin([1], {"t": 2})
        with caplog.at_level(logging.INFO, logger="zkconsumer.bridge"):
            for _ in range(3):
                bridge.run_round()
            warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
            assert len(warnings) == 1, [r.getMessage() for r in warnings]
            assert not warnings[0].exc_info  # one line, no traceback
            assert "refused access to /brokers/topics/t (NoAuth)" in warnings[0].getMessage()
            zk.set_acls(root + zp.topic_path("t"), OPEN_ACL_UNSAFE)
            bridge.run_round()
        assert len(zp.TopicAssignment.decode(zk.get(root + zp.topic_path("t"))[0])
                   .partitions) == 2
        assert bridge.rounds == 2


def test_a_bridge_refused_its_top_level_paths_stops_with_one_line(
    stack: StackInfo, zk: KazooClient, names: Any
) -> None:
    root = f"/bridge-{names.suffix}"
    zk.create(root, acl=READ_ONLY)
    with reaped(subprocess.Popen(
            [sys.executable, "-m", "zkconsumer", "bridge", "--zookeeper",
             f"{stack.zookeeper}{root}", "--bootstrap-server", stack.bootstrap],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)) as proc:
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2, err
    assert "Traceback" not in err
    # Not "access to /brokers/ids": it does not exist, and the ACL at fault is the root's.
    assert err.strip().splitlines()[-1] == (
        f"zkconsumer bridge: ZooKeeper at {stack.zookeeper}{root} refused to create "
        f"{zp.BROKER_IDS} or a missing parent (NoAuth): the ACL of its nearest existing "
        "ancestor does not grant the bridge's login (ZKCONSUMER_ZOOKEEPER_AUTH) CREATE")


@pytest.mark.parametrize(("op", "says"), [
    ("create", "refused to create /brokers/topics/t (NoAuth): the ACL of its parent "
               "/brokers/topics does not grant the bridge's login (ZKCONSUMER_ZOOKEEPER_AUTH) "
               "CREATE"),
    ("delete", "refused to delete /brokers/topics/t (NoAuth): the ACL of its parent "
               "/brokers/topics does not grant the bridge's login (ZKCONSUMER_ZOOKEEPER_AUTH) "
               "DELETE"),
    ("access", "refused access to /brokers/topics/t (NoAuth): its ACL does not grant the "
               "bridge's login (ZKCONSUMER_ZOOKEEPER_AUTH) what the bridge needs"),
])
def test_a_refusal_names_the_znode_whose_acl_is_at_fault(op: str, says: str) -> None:
    # ZooKeeper checks a create's or a delete's permission on the parent.
    from zkconsumer._errors import ZooKeeperRefusedError

    error = ZooKeeperRefusedError("zk:2181", "/brokers/topics/t", op)
    assert str(error) == f"ZooKeeper at zk:2181 {says}"


def test_the_refusals_name_the_login_variable_the_tools_read() -> None:
    # _errors is a leaf: it spells the variable out rather than import it from zk.session.
    from zkconsumer import _errors
    from zkconsumer.zk.session import AUTH_ENV

    assert _errors._AUTH_ENV == AUTH_ENV


def test_an_unreachable_cluster_is_one_warning_not_a_flood(
    stack: StackInfo, zk: KazooClient, names: Any
) -> None:
    """kafka-python logs each failed connection attempt as an ERROR: the bridge's stderr was
    dozens of them in seconds, next to its own one line."""
    root = f"/bridge-{names.suffix}"
    zk.create(root)
    with reaped(subprocess.Popen(
            [sys.executable, "-m", "zkconsumer", "bridge", "--zookeeper",
             f"{stack.zookeeper}{root}", "--bootstrap-server", "127.0.0.1:1",
             "--interval", "0.2", "--connect-timeout", "0.5"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)) as proc:
        wait_until(lambda: zk.exists(root + zp.BROKER_IDS) is not None, 20,
                   "the bridge to start its rounds")
        try:
            proc.communicate(timeout=4)
        except subprocess.TimeoutExpired:
            proc.terminate()
        _, err = proc.communicate(timeout=30)
    lines = err.strip().splitlines()
    assert [line for line in lines if " kafka." in line] == [], err
    unreachable = [line for line in lines if "cluster 127.0.0.1:1 unreachable" in line]
    assert len(unreachable) == 1, err


def test_a_refused_deregistration_still_closes_the_session(
    stack: StackInfo, zk: KazooClient, names: Any
) -> None:
    root = f"/bridge-{names.suffix}"
    for path in (zp.BROKER_IDS, zp.BROKER_TOPICS, MANAGED_DIR):
        zk.ensure_path(root + path)
    bridge = Bridge(f"{stack.zookeeper}{root}", stack.bootstrap, interval_s=0.05, environ={})
    bridge._admin = _Admin([1])
    with running_bridge(bridge) as failed:
        wait_until(lambda: zk.exists(root + zp.broker_path(1)), 10, "broker registered")
        # Deleting a child is its parent's ACL's say: this one allows no delete.
        zk.set_acls(root + zp.BROKER_IDS,
                    [make_acl("world", "anyone", read=True, create=True)])
    assert not failed, failed
    # The session was closed all the same: its ephemeral went at once, not after a timeout.
    wait_until(lambda: zk.exists(root + zp.broker_path(1)) is None, 3, "the session closed")


def test_topics_with_names_kafka_forbids_are_skipped_with_one_warning(
    stack: StackInfo, zk: KazooClient, names: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Some Kafka-protocol brokers accept `..` and `a/b`: the bridge failed every round on
    them (no later topic, no broker registration again), and made `a/b`'s marker as `a`'s,
    deleting a hand-written /brokers/topics/a as its own."""
    root = f"/bridge-{names.suffix}"
    theirs = zp.TopicAssignment({0: [1]}).encode()
    zk.create(root + zp.topic_path("a"), theirs, makepath=True)
    bad = {"..": _parts(1), "a/b": _parts(1), "x" * 250: _parts(1)}
    with _bridge_on(stack, zk, root) as bridge, \
            caplog.at_level(logging.INFO, logger="zkconsumer.bridge"):
        bridge._admin = _Admin([1])
        for good in ("ok", "later"):
            bridge._admin.topics = [_topic(t, 1) for t in (*bad, "ok", good)]
            bridge.run_round()
            assert zk.exists(root + zp.topic_path(good)), good
        bridge._admin = _Admin([1], {"ok": 1})
        for _ in range(3):  # `a` missing from the answers: it was never the bridge's
            bridge.run_round()
        assert bridge.rounds == 5
        assert zk.exists(root + zp.broker_path(1))
        assert zk.get(root + zp.topic_path("a"))[0] == theirs
        assert zk.get_children(root + MANAGED_DIR) == ["ok"]
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warnings) == 3, warnings  # one per name, not one per round
        assert all("not a legal Kafka topic name" in w for w in warnings), warnings


def test_a_topic_that_fails_does_not_stop_the_others_nor_the_brokers(
    stack: StackInfo, zk: KazooClient, names: Any
) -> None:
    root = f"/bridge-{names.suffix}"
    with _bridge_on(stack, zk, root) as bridge:
        bridge.apply(ClusterView({}, {"a": _parts(1)}))
        zk.set_acls(root + zp.topic_path("a"), READ_ONLY)  # no write: its round fails
        with pytest.raises(Exception, match=r"refused access to /brokers/topics/a"):
            bridge.apply(ClusterView(BROKER, {"a": _parts(2), "b": _parts(1)}))
        assert zk.exists(root + zp.topic_path("b"))  # sorted after the failing one
        assert zk.exists(root + zp.partition_state_path("b", 0))
        assert zk.exists(root + zp.broker_path(1))


def test_a_missing_chroot_is_created_as_a_broker_did(
    stack: StackInfo, zk: KazooClient, names: Any
) -> None:
    """`--zookeeper host:port/kafka/x` on a fresh ZooKeeper: every request failed (NoNode) and
    the bridge did nothing for ever."""
    chroot = f"/bridge-{names.suffix}/kafka"
    bridge = Bridge(f"{stack.zookeeper}{chroot}", stack.bootstrap, interval_s=0.05, environ={})
    bridge._admin = _Admin([1], {"t": 1})
    with running_bridge(bridge) as failed:
        wait_until(lambda: zk.exists(chroot + zp.broker_path(1)), 15, "broker registered")
        assert zk.exists(chroot + zp.partition_state_path("t", 0))
    assert not failed, failed


def test_a_managed_topic_edited_by_hand_is_written_again(
    stack: StackInfo, zk: KazooClient, names: Any
) -> None:
    """docs/bridge.md says an assignment written by hand to a managed topic does not last: the
    bridge compared with what it remembered writing, not with ZooKeeper. What ZooKeeper
    holds is watched: an unchanged tree is not read again every round."""
    root = f"/bridge-{names.suffix}"
    topic, state = root + zp.topic_path("t"), root + zp.partition_state_path("t", 1)
    other = root + zp.partition_state_path("t", 2)
    view = ClusterView(BROKER, {"t": _parts(3)})
    with _bridge_on(stack, zk, root) as bridge:
        bridge.apply(view)
        bridge.apply(view)  # reads what it wrote, with watches
        written, written_state = zk.get(topic)[0], zk.get(state)[0]
        reads: list[str] = []
        real_get = bridge._zk.get_async

        def counted(path: str, *args: Any, **kwargs: Any) -> Any:
            reads.append(path)
            return real_get(path, *args, **kwargs)

        bridge._zk.get_async = counted
        bridge.apply(view)
        assert reads == []  # nothing changed: nothing read
        zk.set(topic, zp.TopicAssignment({p: [1] for p in range(5)}).encode())
        zk.delete(state)
        zk.set(other, zp.PartitionState(7, 9, 1, [7]).encode())

        def repaired() -> bool:
            bridge.apply(view)
            return zk.get(topic)[0] == written and zk.exists(state) is not None \
                and zp.PartitionState.decode(zk.get(other)[0]).leader == 1

        wait_until(repaired, 10, "the hand-made changes undone")
        assert zk.get(state)[0] == written_state
        unchanged = zk.exists(topic).mzxid
        bridge.apply(view)
        assert zk.exists(topic).mzxid == unchanged  # what matches is not written again


def test_a_topic_created_again_with_fewer_partitions_loses_their_states(
    stack: StackInfo, zk: KazooClient, names: Any
) -> None:
    root = f"/bridge-{names.suffix}"
    partitions = root + zp.partitions_dir("t")
    with _bridge_on(stack, zk, root) as bridge:
        bridge.apply(ClusterView(BROKER, {"t": _parts(4)}))
        assert sorted(zk.get_children(partitions)) == ["0", "1", "2", "3"]
        bridge.apply(ClusterView(BROKER, {}))  # deleted: missing from one answer
        written = zk.exists(root + zp.topic_path("t")).mzxid
        bridge.apply(ClusterView(BROKER, {"t": _parts(2)}))  # and created again
        # One answer with fewer partitions is not believed (a count never falls otherwise):
        # each rewrite makes every member rebalance.
        assert zk.exists(root + zp.topic_path("t")).mzxid == written
        assert sorted(zk.get_children(partitions)) == ["0", "1", "2", "3"]
        bridge.apply(ClusterView(BROKER, {"t": _parts(2)}))  # the next one is
        assert zp.TopicAssignment.decode(zk.get(root + zp.topic_path("t"))[0]).partitions \
            == {0: [1], 1: [1]}
        assert sorted(zk.get_children(partitions)) == ["0", "1"]


def test_one_answer_with_fewer_partitions_changes_nothing(
    stack: StackInfo, zk: KazooClient, names: Any
) -> None:
    """A metadata answer listing fewer partitions, once: the topic znode was rewritten and
    the missing partitions' states deleted, then both written back the next round (every
    legacy member rebalanced twice and briefly found no leader)."""
    root = f"/bridge-{names.suffix}"
    topic = root + zp.topic_path("t")
    with _bridge_on(stack, zk, root) as bridge:
        bridge.apply(ClusterView(BROKER, {"t": _parts(4)}))
        before = zk.exists(topic).mzxid
        bridge.apply(ClusterView(BROKER, {"t": _parts(3)}))
        bridge.apply(ClusterView(BROKER, {"t": _parts(4)}))
        assert zk.exists(topic).mzxid == before
        assert sorted(zk.get_children(root + zp.partitions_dir("t"))) == ["0", "1", "2", "3"]
        # A topic grows at once.
        bridge.apply(ClusterView(BROKER, {"t": _parts(5)}))
        assert sorted(zk.get_children(root + zp.partitions_dir("t"))) == ["0", "1", "2", "3",
                                                                           "4"]


def test_stop_ends_a_bridge_still_connecting_to_zookeeper(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """SIGINT/SIGTERM were ignored until --connect-timeout ran out (zk.start blocked)."""
    import threading

    from zkconsumer.stack.local import free_port

    bridge = Bridge(f"127.0.0.1:{free_port()}", "127.0.0.1:1", connect_timeout_s=60.0,
                    environ={})
    failed: list[BaseException] = []

    def run() -> None:
        try:
            bridge.run()
        except BaseException as e:  # noqa: BLE001 - checked below
            failed.append(e)

    thread = threading.Thread(target=run, daemon=True)
    with caplog.at_level(logging.DEBUG, logger="kazoo"):
        thread.start()
        wait_until(lambda: any("Connection dropped" in r.getMessage() for r in caplog.records),
                   15, "a connection attempt refused")
        bridge.stop()
        thread.join(5)
    assert not thread.is_alive(), "stop() did not end the connect"
    assert not failed, failed


def test_zookeeper_away_is_not_a_kazoo_warning_every_second(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """kazoo logs each refused connection attempt as a WARNING; the bridge's own client
    demotes them (the bridge says once that ZooKeeper is away), other clients keep them."""
    from zkconsumer._errors import ZkConsumerError
    from zkconsumer.stack.local import free_port

    bridge = Bridge(f"127.0.0.1:{free_port()}", "127.0.0.1:1", connect_timeout_s=2.5,
                    environ={})
    with caplog.at_level(logging.DEBUG, logger="kazoo"):
        with pytest.raises(ZkConsumerError, match=r"cannot connect to ZooKeeper .* within "
                           r"2.5 s \(last attempt: Connection dropped: .*\)$"):
            bridge.run()  # kazoo's reason, demoted, is the one clue: said in the error
        dropped = [r for r in caplog.records if r.getMessage().startswith("Connection dropped")]
        assert len(dropped) >= 2
        assert {r.levelno for r in dropped} == {logging.DEBUG}
        other = KazooClient(hosts=f"127.0.0.1:{free_port()}")
        other.logger.warning("Connection dropped: %s", "x")  # another client's: as it was
        assert caplog.records[-1].levelno == logging.WARNING


def test_the_bridge_makes_the_paths_a_zookeeper_mode_broker_made(
    stack: StackInfo, zk: KazooClient, names: Any
) -> None:
    """kafka-consumer-groups.sh --zookeeper --list failed on a missing /consumers before any
    legacy consumer ran. /consumers stays open whatever the ACL, as Kafka kept it."""
    from kazoo.security import ACL, Id

    root = f"/bridge-{names.suffix}"
    kafka = ["/consumers", "/brokers/ids", "/brokers/topics", "/brokers/seqid",
             "/config/changes", "/config/topics", "/config/clients", "/config/users",
             "/config/brokers", "/config/ips", "/admin/delete_topics",
             "/isr_change_notification", "/log_dir_event_notification"]
    bridge = Bridge(f"{stack.zookeeper}{root}", stack.bootstrap, interval_s=0.05,
                    environ={"ZKCONSUMER_ZOOKEEPER_ACL": "ip:127.0.0.1:cdrwa,world:anyone:r"})
    bridge._admin = _Admin([1])
    with running_bridge(bridge) as failed:
        wait_until(lambda: zk.exists(root + zp.broker_path(1)), 15, "broker registered")
    assert not failed, failed
    for path in kafka:
        assert zk.exists(root + path), path
    assert zk.get_acls(root + "/consumers")[0] == OPEN_ACL_UNSAFE
    assert sorted(zk.get_acls(root + "/brokers/ids")[0], key=str) == sorted(
        [ACL(31, Id("ip", "127.0.0.1")), ACL(1, Id("world", "anyone"))], key=str)
    # Kafka makes it holding null and parses whatever it holds: kazoo could only make it
    # empty, and a ZooKeeper-mode broker started here later would fail to parse it.
    assert zk.exists(root + "/latest_producer_id_block") is None


def test_kafkas_other_paths_refused_are_one_warning_not_the_end(
    stack: StackInfo, zk: KazooClient, names: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The bridge needs none of Kafka's other top-level paths: one it may not create (a
    secured Kafka's /config, say) is warned about once, and the bridge goes on, also after a
    resync (which made every round fail before it wrote anything)."""
    root = f"/bridge-{names.suffix}"
    zk.create(root)
    zk.create(root + "/config", acl=READ_ONLY)
    bridge = Bridge(f"{stack.zookeeper}{root}", stack.bootstrap, interval_s=0.05, environ={})
    bridge._admin = _Admin([1], {"t": 1})
    with caplog.at_level(logging.WARNING, logger="zkconsumer.bridge"):
        with running_bridge(bridge) as failed:
            wait_until(lambda: zk.exists(root + zp.broker_path(1)), 15, "broker registered")
            bridge._resync.set()  # as after a session expiry: the paths are made again
            rounds = bridge.rounds
            wait_until(lambda: bridge.rounds > rounds + 2, 15, "rounds after the resync")
        assert not failed, failed
    assert zk.exists(root + zp.topic_path("t"))
    refused = [r.getMessage() for r in caplog.records if "/config/" in r.getMessage()]
    assert len(refused) == len({m.split()[3] for m in refused}) == 6, refused
    assert all("going on without it" in m for m in refused), refused
    assert zk.exists(root + "/consumers")


def test_bridge_registers_new_topics_with_partition_state(
    stack: StackInfo, zk: KazooClient, names
) -> None:
    create_topic(stack.bootstrap, names.topic, 3)
    start = time.monotonic()
    wait_until(lambda: zk.exists(zp.topic_path(names.topic)), 5, "topic znode")
    assert time.monotonic() - start < 2.0  # "within one second", plus a poll interval of slack
    assignment = zp.TopicAssignment.decode(zk.get(zp.topic_path(names.topic))[0])
    broker = int(_broker_ids(zk)[0])
    assert assignment.partitions == {0: [broker], 1: [broker], 2: [broker]}
    for p in range(3):
        path = zp.partition_state_path(names.topic, p)
        state = wait_until(lambda path=path: zk.exists(path) and zk.get(path)[0], 5, path)
        decoded = zp.PartitionState.decode(state)
        assert (decoded.leader, decoded.isr) == (broker, [broker])


def test_bridge_leaves_topics_it_does_not_manage_alone(
    stack: StackInfo, zk: KazooClient, names
) -> None:
    # The ZooKeeper-era way to change a partition count: an admin tool writes the assignment.
    foreign = names("foreign")
    mine = names("mine")
    zk.create(zp.topic_path(foreign), zp.TopicAssignment({0: [1], 1: [1]}).encode(),
              makepath=True)
    create_topic(stack.bootstrap, foreign, 4)
    create_topic(stack.bootstrap, mine, 1)
    wait_until(lambda: zk.exists(zp.topic_path(mine)), 10, "a later topic")
    assignment = zp.TopicAssignment.decode(zk.get(zp.topic_path(foreign))[0])
    assert sorted(assignment.partitions) == [0, 1]


def test_bridge_reaches_the_cluster_with_the_kafka_security_settings(
    stack: StackInfo, zk: KazooClient, names
) -> None:
    from zkconsumer.bridge import Bridge

    root = f"/bridge-{names.suffix}"  # a tree of its own: the stack's bridge owns /brokers
    zk.create(root)
    sasl = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
            "sasl_plain_username": "alice", "sasl_plain_password": "wonder-land"}
    for kafka, registers in ((sasl, False), (None, True)):
        bridge = Bridge(f"{stack.zookeeper}{root}", stack.bootstrap, interval_s=0.2,
                        environ={}, kafka=kafka)
        thread = threading.Thread(target=bridge.run, daemon=True)
        thread.start()
        try:
            if registers:
                wait_until(lambda: zk.get_children(f"{root}{zp.BROKER_IDS}"), 60, "registered")
            else:
                # The test broker has no SASL: the settings reached the admin client when the
                # cluster is unreachable through it, and nothing is registered.
                wait_until(lambda b=bridge: b._unreachable_since is not None, 15, "a failed round")
                assert bridge.rounds == 0
                assert zk.get_children(f"{root}{zp.BROKER_IDS}") == []
        finally:
            bridge.stop()
            thread.join(15)
        assert not thread.is_alive()


@contextmanager
def _bridge_on(stack: StackInfo, zk: KazooClient, root: str, **kwargs: Any) -> Iterator[Any]:
    """A Bridge connected to a tree of its own (the stack's bridge owns /brokers), for
    driving :meth:`apply` with views made by hand."""
    from zkconsumer.bridge import MANAGED_DIR, Bridge

    for path in (zp.BROKER_IDS, zp.BROKER_TOPICS, MANAGED_DIR):
        zk.ensure_path(root + path)
    bridge = Bridge(f"{stack.zookeeper}{root}", stack.bootstrap, environ={}, **kwargs)
    bridge._zk = bridge._connect()
    try:
        yield bridge
    finally:
        bridge._zk.stop()
        bridge._zk.close()


def test_read_cluster_leaves_out_fenced_brokers() -> None:
    from zkconsumer.bridge import read_cluster

    class Admin:
        def describe_cluster(self) -> dict[str, Any]:
            return {"brokers": [
                {"broker_id": 1, "host": "a", "port": 9092, "rack": None, "is_fenced": False},
                {"broker_id": 2, "host": "b", "port": 9092, "rack": None, "is_fenced": True},
                {"broker_id": 3, "host": "c", "port": 9092, "rack": "r1"},  # older brokers
            ]}

        def describe_topics(self) -> list[dict[str, Any]]:
            return []

    assert read_cluster(Admin()).brokers == {1: ("a", 9092, None), 3: ("c", 9092, "r1")}


def test_bridge_registers_the_listener_of_its_security_protocol(
    stack: StackInfo, zk: KazooClient, names: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """As a broker with that listener alone: readers find it by their security.protocol
    (the endpoint said PLAINTEXT whatever the cluster's protocol was). A registration held by
    another session is left alone; one of its own, forgotten by a resync, is rewritten."""
    from zkconsumer.bridge import ClusterView

    root = f"/bridge-{names.suffix}"
    zk.create(root + zp.broker_path(2), b"{}", ephemeral=True, makepath=True)  # someone's
    with _bridge_on(stack, zk, root, kafka={"security_protocol": "SSL"}) as bridge:
        view = ClusterView({1: ("h1", 9093, None), 2: ("h2", 9093, None)})
        for _ in range(2):
            bridge.apply(view)
        data = zk.get(root + zp.broker_path(1))[0]
        reg = json.loads(data)
        assert (reg["endpoints"], reg["host"], reg["port"]) == (["SSL://h1:9093"], None, -1)
        assert reg["listener_security_protocol_map"] == {"SSL": "SSL"}
        assert zp.BrokerRegistration.decode(data).endpoint("SSL") == ("h1", 9093)
        assert zk.get(root + zp.broker_path(2))[0] == b"{}"  # not replaced
        assert sum("held by another session" in r.getMessage() for r in caplog.records) == 1
        bridge._brokers.written.clear()  # forgotten: rewritten all the same
        bridge.apply(ClusterView({1: ("h1", 9094, None)}))
        reg = json.loads(zk.get(root + zp.broker_path(1))[0])
        assert reg["endpoints"] == ["SSL://h1:9094"]


def test_a_round_cut_short_never_leaves_a_topic_the_bridge_takes_for_someone_elses(
    stack: StackInfo, zk: KazooClient, names: Any
) -> None:
    from kazoo.exceptions import ConnectionLoss

    from zkconsumer.bridge import MANAGED_DIR, ClusterView

    root = f"/bridge-{names.suffix}"
    with _bridge_on(stack, zk, root) as bridge:
        real = bridge._zk.ensure_path_async
        calls: list[str] = []

        def marker_fails(path: str, *args: Any, **kwargs: Any) -> Any:
            if path.startswith(MANAGED_DIR) and not calls:
                calls.append(path)
                raise ConnectionLoss()
            return real(path, *args, **kwargs)

        bridge._zk.ensure_path_async = marker_fails
        brokers = {1: ("h1", 9092, None)}
        two = {0: ([1], 1, 0, [1]), 1: ([1], 1, 0, [1])}
        with pytest.raises(ConnectionLoss):
            bridge.apply(ClusterView(brokers, {"t": two}))
        assert calls
        bridge.apply(ClusterView(brokers, {"t": two}))
        bridge.apply(ClusterView(brokers, {"t": {**two, 2: ([1], 1, 0, [1])}}))
        assignment = zp.TopicAssignment.decode(zk.get(root + zp.topic_path("t"))[0])
        assert sorted(assignment.partitions) == [0, 1, 2]


def test_bridge_follows_broker_and_its_own_restarts(private_stack: LocalStack) -> None:
    zk = KazooClient(hosts=private_stack.zookeeper)
    zk.start()
    try:
        wait_until(lambda: _broker_ids(zk), 10, "broker registered")
        create_topic(private_stack.bootstrap, "t1", 2)
        wait_until(lambda: zk.exists(zp.topic_path("t1")), 10, "topic registered")

        private_stack.stop("bridge")  # a clean stop deregisters what it registered
        wait_until(lambda: not _broker_ids(zk), 10, "brokers gone with the bridge")
        private_stack.start("bridge")
        wait_until(lambda: _broker_ids(zk), 10, "brokers back with the bridge")

        private_stack.stop("broker")  # a broker gone
        wait_until(lambda: not _broker_ids(zk), 15, "broker deregistered")
        private_stack.start("broker")  # its data kept: the topic is still there
        wait_until(lambda: _broker_ids(zk), 15, "broker registered again")
        assert zk.exists(zp.topic_path("t1"))
        delete_topic(private_stack.bootstrap, "t1")
        wait_until(lambda: not zk.exists(zp.topic_path("t1")), 15, "deleted topic removed")
    finally:
        zk.stop()
        zk.close()


def test_bridge_rides_out_zookeeper_going_away(private_stack: LocalStack) -> None:
    # kazoo's synchronous calls wait for ever while ZooKeeper is down: the bridge used to hang
    # in its round, and stop() (SIGTERM) could not end it.
    from kazoo.handlers.threading import KazooTimeoutError

    from zkconsumer.bridge import Bridge, ClusterView

    private_stack.stop("bridge")  # ours is the only one
    bridge = Bridge(private_stack.zookeeper, private_stack.bootstrap, interval_s=0.2,
                    request_timeout_s=1.0)
    thread = threading.Thread(target=bridge.run, daemon=True)
    zk = KazooClient(hosts=private_stack.zookeeper)
    zk.start()
    try:
        thread.start()
        wait_until(lambda: _broker_ids(zk), 30, "broker registered")
        private_stack.stop("zookeeper")
        # A round that meets the dead connection fails within the request timeout.
        stranded = Bridge(private_stack.zookeeper, private_stack.bootstrap,
                          request_timeout_s=1.0)
        stranded._zk = zk
        wait_until(lambda: not zk.connected, 15, "the client disconnected")
        with pytest.raises(KazooTimeoutError):
            stranded.apply(ClusterView(brokers={}))

        private_stack.start("zookeeper")  # the same port and data
        wait_until(lambda: zk.connected and _broker_ids(zk), 30, "broker registered again")
        private_stack.stop("zookeeper")
        wait_until(lambda: not zk.connected, 15, "the client disconnected again")
    finally:
        bridge.stop()
        thread.join(15)
        zk.stop()
        zk.close()
    assert not thread.is_alive(), "the bridge did not stop with ZooKeeper gone"


def test_the_bridge_answers_only_with_a_registration_naming_this_stacks_broker(
    stack: StackInfo, tmp_path: Path
) -> None:
    """A registration restored from ZooKeeper's data with the session of a bridge killed in
    an earlier run (its broker on another port) made `up` report a stack that was not."""
    from zkconsumer.stack.local import free_port

    assert stack.local is not None
    probe = LocalStack(tmp_path / "probe", broker="kraft")
    probe.zk_port = stack.local.zk_port
    probe.broker_port = stack.local.broker_port
    assert probe._broker_registered()
    probe.broker_port = free_port()  # another run's broker: what is registered is not it
    assert not probe._broker_registered()


def test_the_bridge_is_probed_logged_in_as_the_bridge_is(
    private_stack: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ZKCONSUMER_ZOOKEEPER_ACL giving no world read, the bridge (which inherits the
    login and ACL variables) wrote a registration the anonymous probe could not read: `up`
    waited its 60 s and said the bridge did not answer."""
    from kazoo.security import make_digest_acl

    monkeypatch.delenv("ZKCONSUMER_ZOOKEEPER_AUTH", raising=False)
    monkeypatch.delenv("ZKCONSUMER_ZOOKEEPER_ACL", raising=False)
    zk = KazooClient(hosts=private_stack.zookeeper)
    zk.start()
    try:
        wait_until(lambda: _broker_ids(zk), 10, "broker registered")
        for bid in _broker_ids(zk):
            zk.set_acls(zp.broker_path(int(bid)), [make_digest_acl("ops", "secret", all=True)])
        assert not private_stack._broker_registered()  # anonymous: not readable
        monkeypatch.setenv("ZKCONSUMER_ZOOKEEPER_AUTH", "digest:ops:secret")
        assert private_stack._broker_registered()
    finally:
        zk.stop()
        zk.close()


def test_up_after_zookeeper_and_the_broker_died_starts_the_bridge_again(
    tmp_path: Path,
) -> None:
    """ZooKeeper and the broker killed, the bridge alive: `up` emptied ZooKeeper and left the
    bridge, which the empty server refused (its session had seen later zxids), retrying for
    ever: `up` said ready, with no broker registered."""

    directory = tmp_path / "stack"
    try:
        first = LocalStack(directory, broker="kraft")
        first.up()
        with started_zk(first.zookeeper) as client:
            client.create("/filler", b"")
            for i in range(200):  # the bridge's session sees these zxids
                client.set("/filler", str(i).encode())
        bridge = first.procs["bridge"].pid
        for name in ("broker", "zookeeper"):
            first.stop(name, sig=signal.SIGKILL)
        again = LocalStack(directory)
        again.up()
        assert again.procs["bridge"].pid != bridge
        with started_zk(again.zookeeper) as client:
            wait_until(lambda: client.exists(zp.BROKER_IDS) is not None
                       and bool(client.get_children(zp.BROKER_IDS)), 15, "broker registered")
    finally:
        LocalStack(directory).down()


def test_a_group_over_a_kraft_cluster_consumes_exactly_once_through_topic_changes(
    stack: StackInfo, zk: KazooClient, names: Any
) -> None:
    """Two zkconsumer members (a whitelist, two streams each) over Kafka 4 in KRaft mode,
    which knows nothing of ZooKeeper: the bridge's registrations are all they see. 10,000
    messages, each handed out once, through a topic created, a partition added and a topic
    deleted meanwhile."""
    from collections import Counter

    from tests.support import add_partitions, produce
    from zkconsumer import (
        ConsumerConfig,
        ConsumerTimeoutException,
        Whitelist,
        create_consumer_connector,
    )

    a, b = names("a"), names("b")
    seen: Counter[tuple[str, int, int]] = Counter()
    lock = threading.Lock()
    errors: list[BaseException] = []
    stop = threading.Event()

    def drain(stream: Any) -> None:
        try:
            while not stop.is_set():
                try:
                    for m in stream:
                        with lock:
                            seen[(m.topic, m.partition, m.offset)] += 1
                    return
                except ConsumerTimeoutException:
                    continue
        except BaseException as e:  # noqa: BLE001 - asserted below
            errors.append(e)

    def consumed(n: int) -> Callable[[], bool]:
        return lambda: sum(seen.values()) >= n

    sent: Counter[tuple[str, int]] = Counter()

    def send(topic: str, partitions: int, n: int) -> None:
        produce(stack.bootstrap, topic, [(i % partitions, None, b"%d" % i) for i in range(n)])
        sent.update((topic, i % partitions) for i in range(n))

    create_topic(stack.bootstrap, a, 2)
    wait_until(lambda: zk.exists(zp.partition_state_path(a, 1)), 30, f"{a} registered")
    config = {"zookeeper.connect": stack.zookeeper, "group.id": names.group,
              "auto.offset.reset": "smallest", "zookeeper.session.timeout.ms": 3000,
              "rebalance.backoff.ms": 200, "consumer.timeout.ms": 200,
              "auto.commit.interval.ms": 200}
    members = [create_consumer_connector(ConsumerConfig(config)) for _ in range(2)]
    threads = [threading.Thread(target=drain, args=(s,), daemon=True) for m in members
               for s in m.create_message_streams_by_filter(Whitelist(f"({a}|{b})"), 2)]
    try:
        for t in threads:
            t.start()
        send(a, 2, 4000)
        wait_until(consumed(4000), 60, "the first topic's 4000")
        create_topic(stack.bootstrap, b, 2)  # a topic created: the whitelist takes it
        send(b, 2, 3000)
        wait_until(consumed(7000), 60, "the new topic's 3000")
        add_partitions(stack.bootstrap, a, 3)  # a partition added
        wait_until(lambda: zk.exists(zp.partition_state_path(a, 2)), 30, "partition 2")
        send(a, 3, 2000)
        wait_until(consumed(9000), 60, "2000 more over three partitions")
        delete_topic(stack.bootstrap, b)  # a topic deleted
        wait_until(lambda: not zk.exists(zp.topic_path(b)), 30, f"{b} gone from ZooKeeper")
        send(a, 3, 1000)
        wait_until(consumed(10_000), 60, "the last 1000")
    finally:
        stop.set()
        for m in members:
            m.shutdown()
        for t in threads:
            t.join(10)
    assert errors == []
    expected = {(t, p, o) for (t, p), n in sent.items() for o in range(n)}
    assert set(seen) == expected and len(expected) == 10_000
    assert [k for k, n in seen.items() if n > 1] == []
