"""The connector's own ZooKeeper state going wrong under it, on the real stack: its
registration (or the group's whole tree) deleted while its session lives, the connection lost
while shutdown() commits or leaves the group, and a claim or a release that ZooKeeper refuses
part-way (an ACL)."""

from __future__ import annotations

import logging
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.security import ACL, ANYONE_ID_UNSAFE, OPEN_ACL_UNSAFE, Permissions

from tests.support import NullFetcher, StackInfo, group_owners, owners_settled, wait_until
from tools.fault_harness import Collector, Workload, member_props
from zkconsumer import (
    ConsumerConfig,
    ConsumerRebalanceFailedException,
    TopicPartition,
    ZookeeperConsumerConnector,
)
from zkconsumer.zk import paths as zp

# -- a registration, or the whole group, deleted under a live session ----------------------


@contextmanager
def _consuming(stack: StackInfo, group: str, topic: str, names: list[str],
               collector: Collector) -> Iterator[list[ZookeeperConsumerConnector]]:
    """Members (real fetchers) of ``group`` on ``topic``, their streams drained into
    ``collector``; shut down at the end."""
    with ExitStack() as es:
        members = []
        for name in names:
            c = ZookeeperConsumerConnector(ConsumerConfig(member_props(stack.zookeeper, group)))
            es.callback(c.shutdown)
            for s in c.create_message_streams({topic: 1})[topic]:
                collector.drain(name, s)
            members.append(c)
        yield members


def _registered(zk: KazooClient, group: str, c: ZookeeperConsumerConnector) -> bool:
    """``c``'s ids znode exists and belongs to its (live) session."""
    stat = zk.exists(zp.id_path(group, c.consumer_id))
    client_id = c._zk.client_id
    return stat is not None and client_id is not None and stat.ephemeralOwner == client_id[0]


def _consumes_new_messages(workload: Workload, collector: Collector, n: int) -> None:
    before = set(workload.expected())
    workload.produce(n)
    new = set(workload.expected()) - before
    assert len(new) == n
    wait_until(lambda: collector.has_all(new), 30, f"the {n} messages produced now consumed")


def _reregistrations(caplog: pytest.LogCaptureFixture, c: ZookeeperConsumerConnector) -> int:
    return sum(1 for r in caplog.records
               if getattr(r, "consumer_id", None) == c.consumer_id
               and r.levelno == logging.WARNING and "registering again" in r.getMessage())


def _delete_tree(zk: KazooClient, path: str) -> bool:
    """Delete ``path`` and everything under it in one transaction (``deleteall``, but at
    once: members registering again meanwhile cannot leave part of it behind); False when a
    member changed the tree between the listing and the transaction."""
    order: list[str] = []

    def walk(p: str) -> None:
        for child in zk.get_children(p):
            walk(f"{p}/{child}")
        order.append(p)

    walk(path)
    tx = zk.transaction()
    for p in order:
        tx.delete(p)
    return not any(isinstance(r, Exception) for r in tx.commit())


@contextmanager
def _settled_group(stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any,
                   members: list[str]) -> Iterator[tuple[str, Workload, Collector,
                                                         list[ZookeeperConsumerConnector]]]:
    """A 4-partition topic, ``members`` consuming it in ``names.group``, settled, with 100
    messages consumed; the workload closed at the end (its collector's errors asserted)."""
    topic = topic_factory(names.topic, 4)
    workload = Workload(stack.bootstrap, topic, 4)
    collector = Collector()
    try:
        with _consuming(stack, names.group, topic, members, collector) as running:
            wait_until(lambda: owners_settled(zk, names.group, topic), 30, "members settled")
            _consumes_new_messages(workload, collector, 100)
            yield topic, workload, collector, running
    finally:
        workload.close()
    assert not collector.errors


def test_a_registration_deleted_by_hand_is_made_again(
    stack, zk, names, topic_factory, caplog
) -> None:
    """One member's ids znode deleted while its session lives: it registers again (once),
    the group's partitions are all owned again and messages produced afterwards are
    consumed. (It used to fail every rebalance from then on, for ever, owning nothing.)"""
    caplog.set_level(logging.WARNING, logger="zkconsumer.connector")
    g = names.group
    with _settled_group(stack, zk, names, topic_factory, ["a", "b"]) as (
            topic, workload, collector, (a, b)):
        zk.delete(zp.id_path(g, a.consumer_id))
        wait_until(lambda: _registered(zk, g, a) and owners_settled(zk, g, topic)
                   and len(group_owners(zk, g, topic)) == 4
                   and len(a.owned_partitions()) + len(b.owned_partitions()) == 4,
                   30, "a registered again and every partition owned")
        assert {th.rsplit("-", 1)[0] for th in group_owners(zk, g, topic).values()} == {
            a.consumer_id, b.consumer_id}
        _consumes_new_messages(workload, collector, 200)
        assert _reregistrations(caplog, a) == 1
        assert _reregistrations(caplog, b) == 0
        assert zp.id_path(g, a.consumer_id) in caplog.text  # the warning names it


def test_the_group_tree_deleted_under_running_members_is_made_again(
    stack, zk, names, topic_factory, caplog
) -> None:
    """``deleteall /consumers/G`` while two members consume: both register again, every
    partition is owned again and consumption goes on."""
    caplog.set_level(logging.WARNING, logger="zkconsumer.connector")
    g = names.group
    with _settled_group(stack, zk, names, topic_factory, ["a", "b"]) as (
            topic, workload, collector, members):
        wait_until(lambda: _delete_tree(zk, zp.group_dir(g)), 10, "the tree deleted")
        wait_until(lambda: all(_registered(zk, g, c) for c in members)
                   and owners_settled(zk, g, topic)
                   and len(group_owners(zk, g, topic)) == 4
                   and sum(len(c.owned_partitions()) for c in members) == 4,
                   30, "both registered again and every partition owned")
        _consumes_new_messages(workload, collector, 200)
        assert [_reregistrations(caplog, c) for c in members] == [1, 1]
        assert zp.ids_dir(g) in caplog.text  # what was missing, named


# -- the ZooKeeper connection lost during shutdown() ---------------------------------------


class ZkProxy:
    """A TCP proxy in front of ZooKeeper. :meth:`cut` breaks every connection through it and
    refuses new ones (accepted and closed at once, so the client keeps trying, as during an
    outage); :meth:`restore` lets them through again; :meth:`close` ends it all. ``_lock``
    guards ``_pairs``."""

    def __init__(self, target: str) -> None:
        host, port = target.rsplit(":", 1)
        self._target = (host, int(port))
        self._server = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._server.getsockname()[1]}"
        self._up = True
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._threads: list[threading.Thread] = []
        self._start(self._accept)

    def _start(self, target: Callable[..., None], *args: Any) -> None:
        t = threading.Thread(target=target, args=args, name="zk-proxy", daemon=True)
        t.start()
        self._threads.append(t)

    def _accept(self) -> None:
        while not self._closed.is_set():
            if not select.select([self._server], [], [], 0.1)[0]:
                continue
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            if not self._up:
                client.close()
                continue
            server = socket.create_connection(self._target)
            with self._lock:
                self._pairs.append((client, server))
            self._start(self._pump, client, server)

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        try:
            while not self._closed.is_set():
                for s in select.select([a, b], [], [], 0.1)[0]:
                    data = s.recv(65536)
                    if not data:
                        return
                    (b if s is a else a).sendall(data)
        except (OSError, ValueError):  # cut meanwhile
            pass
        finally:
            for s in (a, b):
                s.close()

    def cut(self) -> None:
        self._up = False
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            for s in pair:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def restore(self) -> None:
        self._up = True

    def close(self) -> None:
        self.cut()
        self._closed.set()
        for t in self._threads:
            t.join(5)
        self._server.close()


@pytest.mark.parametrize("moment", ["commit", "commit-noticed", "leave"])
def test_shutdown_returns_when_the_connection_drops_during_it(
    stack, names, topic_factory, caplog, moment
) -> None:
    """The connection to ZooKeeper breaks (and stays broken) while shutdown() makes its
    final commit (``commit``: kazoo notices while the commit is under way; ``commit-noticed``:
    before it is sent) or leaves the group (``leave``). kazoo holds a request made while
    disconnected until the connection is back; shutdown() must not wait for that: it
    returns, saying what it could not do."""
    caplog.set_level(logging.WARNING, logger="zkconsumer.connector")
    topic = topic_factory(names.topic, 2)
    session_s = 4.0
    proxy = ZkProxy(stack.zookeeper)
    try:
        c = ZookeeperConsumerConnector(ConsumerConfig({
            "zookeeper.connect": proxy.address, "group.id": names.group,
            "zookeeper.session.timeout.ms": int(session_s * 1000),
            "auto.commit.enable": moment != "leave", "auto.commit.interval.ms": 600_000,
            "rebalance.backoff.ms": 200,
        }), fetcher_factory=NullFetcher)
        c.create_message_streams({topic: 1})
        wait_until(lambda: len(c.owned_partitions()) == 2, 20, "both partitions owned")
        for info in c.partition_infos().values():
            info.reset_consumed_offset(5)  # as if consumed: the final commit has work
        cut_at: list[float] = []

        def cut(noticed: bool) -> None:
            if not cut_at:
                cut_at.append(time.monotonic())
                proxy.cut()
                if noticed:
                    wait_until(lambda: not c._zk.connected, 10, "kazoo seeing the cut")

        if moment.startswith("commit"):
            real_commit = c._commits.offsets.commit

            def commit(offsets: Any) -> int:
                cut(noticed=moment == "commit-noticed")
                return real_commit(offsets)

            c._commits.offsets.commit = commit  # type: ignore[method-assign]
        else:
            real_release = c._release

            def release(*args: Any, **kwargs: Any) -> None:
                real_release(*args, **kwargs)
                if c._shutdown_event.is_set():
                    cut(noticed=True)  # the owners released; then the registration

            c._release = release  # type: ignore[method-assign]

        t = threading.Thread(target=c.shutdown, name="shutdown", daemon=True)
        t.start()
        bound = 2 * session_s + 5
        t.join(bound)
        hung = t.is_alive()
        if hung:
            proxy.restore()  # let it end before the proxy does
            t.join(60)
        assert cut_at, "the connection was never cut"
        assert not hung, f"shutdown() still blocked {bound:g} s after it began"
        expected = ("final commit not made" if moment.startswith("commit")
                    else "leaving the group explicitly failed")
        assert any(expected in r.getMessage() and getattr(r, "consumer_id", None)
                   == c.consumer_id for r in caplog.records), caplog.text
    finally:
        proxy.close()


# -- a claim or a release refused part-way ----------------------------------------------------

#: No CREATE: the owner znodes under it cannot be made.
_NO_CREATE = [ACL(Permissions.READ | Permissions.DELETE | Permissions.ADMIN, ANYONE_ID_UNSAFE)]
#: No DELETE: the owner znodes under it cannot be deleted.
_NO_DELETE = [ACL(Permissions.READ | Permissions.CREATE | Permissions.WRITE | Permissions.ADMIN,
                  ANYONE_ID_UNSAFE)]


def _held_by(zk: KazooClient, group: str, topics: list[str], session: int
             ) -> set[TopicPartition]:
    """The owner znodes of ``topics`` that ``session`` holds, read back."""
    held = set()
    for topic in topics:
        try:
            children = zk.get_children(zp.owners_topic_dir(group, topic))
        except NoNodeError:
            continue
        for p in children:
            stat = zk.exists(zp.owner_path(group, topic, int(p)))
            if stat is not None and stat.ephemeralOwner == session:
                held.add(TopicPartition(topic, int(p)))
    return held


def _spy(c: ZookeeperConsumerConnector, zk: KazooClient, group: str, topics: list[str],
         seen: list[tuple[str, bool, set[TopicPartition], set[TopicPartition]]],
         after: Callable[[], None] = lambda: None) -> None:
    """Record, after each ``_claim`` and ``_release`` of ``c``: its name, whether it raised,
    what ``c`` believes it owns, and what its session holds in ZooKeeper."""
    for name in ("_claim", "_release"):
        real = getattr(c, name)

        def call(*args: Any, _name: str = name, _real: Any = real, **kwargs: Any) -> Any:
            raised = True
            try:
                result = _real(*args, **kwargs)
                raised = False
                return result
            finally:
                seen.append((_name, raised, set(c._ownership.owned),
                             _held_by(zk, group, topics, c._zk.client_id[0])))
                after()

        setattr(c, name, call)


def _config(stack: StackInfo, group: str, **extra: object) -> ConsumerConfig:
    props: dict[str, object] = {
        "zookeeper.connect": stack.zookeeper, "group.id": group,
        "zookeeper.session.timeout.ms": 2000, "auto.commit.enable": False,
        "rebalance.backoff.ms": 200,
    }
    props.update({k.replace("_", "."): v for k, v in extra.items()})
    return ConsumerConfig(props)


def test_a_claim_refused_part_way_leaves_no_orphan_owner_znode(
    stack, zk, names, topic_factory
) -> None:
    """The pipelined claim's creates of one topic are refused (NoAuth) between others that
    succeed: every create that succeeded is recorded, so the failed attempt releases it. (An
    orphan stayed held by the session, and no other member could ever claim it.)"""
    topics = [topic_factory(names(stem), 2) for stem in ("a", "b", "c")]  # claimed in order
    g = names.group
    zk.ensure_path(zp.owners_dir(g))
    zk.create(zp.owners_topic_dir(g, topics[1]), b"", acl=_NO_CREATE)
    c = ZookeeperConsumerConnector(_config(stack, g, rebalance_max_retries=1),
                                   fetcher_factory=NullFetcher)
    seen: list[tuple[str, bool, set[TopicPartition], set[TopicPartition]]] = []
    _spy(c, zk, g, topics, seen)
    try:
        with pytest.raises(ConsumerRebalanceFailedException):
            c.create_message_streams({t: 1 for t in topics})
    finally:
        c.shutdown()
    claims = [i for i, s in enumerate(seen) if s[0] == "_claim"]
    assert len(claims) == 1
    i = claims[0]
    _, raised, owned, held = seen[i]
    created = {TopicPartition(t, p) for t in (topics[0], topics[2]) for p in (0, 1)}
    assert raised and held == created
    assert owned == held, "a create that succeeded was not recorded"
    name, raised, owned, held = seen[i + 1]  # the failed attempt releases everything
    assert (name, raised, owned, held) == ("_release", False, set(), set())


def test_a_release_refused_part_way_forgets_what_it_deleted(
    stack, zk, names, topic_factory
) -> None:
    """A release whose deletes of one topic are refused (NoAuth) between others that
    succeed: what was deleted is no longer believed owned, what was refused still is."""
    topics = [topic_factory(names(stem), 2) for stem in ("a", "b", "c")]
    g = names.group
    locked = zp.owners_topic_dir(g, topics[1])
    seen: list[tuple[str, bool, set[TopicPartition], set[TopicPartition]]] = []
    unlocked: list[bool] = []

    def unlock_after_the_first_refusal() -> None:
        if not unlocked and any(raised for _, raised, _, _ in seen):
            unlocked.append(True)
            zk.set_acls(locked, OPEN_ACL_UNSAFE)

    with ExitStack() as es:
        a = ZookeeperConsumerConnector(_config(stack, g), fetcher_factory=NullFetcher)
        es.callback(a.shutdown)
        a.create_message_streams({t: 1 for t in topics})
        assert len(a.owned_partitions()) == 6
        zk.set_acls(locked, _NO_DELETE)
        es.callback(lambda: zk.set_acls(locked, OPEN_ACL_UNSAFE))
        _spy(a, zk, g, topics, seen, after=unlock_after_the_first_refusal)
        b = ZookeeperConsumerConnector(_config(stack, g), fetcher_factory=NullFetcher)
        es.callback(b.shutdown)
        b.create_message_streams({t: 1 for t in topics})  # a gives a partition of each
        wait_until(lambda: all(owners_settled(zk, g, t) for t in topics), 30, "settled")
    refused = [s for s in seen if s[0] == "_release" and s[1]]
    assert refused, "no release was refused"
    _, _, owned, held = refused[0]
    assert owned == held, "a partition deleted is still believed owned (or the reverse)"
    assert {tp.topic for tp in held} == set(topics)  # the refused one of b is still held


def test_an_uncertain_owner_znode_is_read_back_after_a_sync(
    stack, zk, names, topic_factory
) -> None:
    """A release reads back the owner znodes it is unsure of (a create or delete whose answer
    was lost) after a ``sync``: on an ensemble, the server it reconnected to may not have
    applied the create yet, and a znode the session holds would be forgotten yet held until
    the session ends (its next owner waiting for ever). The sync is pipelined before the
    reads, so ZooKeeper answers them after it."""
    topic = topic_factory(names.topic, 4)
    g = names.group
    calls: list[str] = []
    with ExitStack() as es:
        a = ZookeeperConsumerConnector(_config(stack, g), fetcher_factory=NullFetcher)
        es.callback(a.shutdown)
        a.create_message_streams({topic: 1})
        assert len(a.owned_partitions()) == 4
        for name in ("sync_async", "exists_async"):
            real = getattr(a._zk, name)

            def call(path: str, *args: Any, _name: str = name, _real: Any = real,
                     **kwargs: Any) -> Any:
                calls.append(_name)
                return _real(path, *args, **kwargs)

            setattr(a._zk, name, call)
        a._ownership.uncertain.update(a._ownership.owned)  # as after a lost answer
        b = ZookeeperConsumerConnector(_config(stack, g), fetcher_factory=NullFetcher)
        es.callback(b.shutdown)
        b.create_message_streams({topic: 1})  # a releases two of its (uncertain) four
        wait_until(lambda: owners_settled(zk, g, topic), 30, "settled")
        assert len(a.owned_partitions()) == len(b.owned_partitions()) == 2
    assert "exists_async" in calls, "no owner znode was read back"
    assert "sync_async" in calls, "read back without a sync"
    assert calls.index("sync_async") < calls.index("exists_async")


# -- a sender stuck in kazoo when the session is lost ------------------------------------------


def test_the_session_lost_listener_never_waits_for_ever_on_a_stuck_sender(
    stack: StackInfo, names: Any, topic_factory: Any
) -> None:
    """kazoo wakes its connection thread with a byte per request on a socket that thread
    reads only while connected: a claim or release of hundreds of partitions while the
    connection is down blocks the sender, holding the session guard, until that thread
    reads again; and the thread, reporting the session lost, waited for the guard: both
    for ever, the member silently dead. The listener now waits a bounded time, and the
    sender sends nothing more once it sees the loss."""
    from kazoo.exceptions import SessionExpiredError
    from kazoo.protocol.states import KazooState

    import zkconsumer.consumer.membership as membership_module

    topic = topic_factory(names.topic, 1)
    c = ZookeeperConsumerConnector(_config(stack, names.group), fetcher_factory=NullFetcher)
    try:
        c.create_message_streams({topic: 1})
        assert c._session_guard.acquire(timeout=5)  # the stuck sender
        try:
            listener = threading.Thread(target=c._on_zk_state, args=(KazooState.LOST,),
                                        daemon=True)
            listener.start()
            listener.join(getattr(membership_module, "LISTENER_GUARD_WAIT_S", 2.0) + 5)
            assert not listener.is_alive(), "the LOST listener waits for the guard for ever"
        finally:
            c._session_guard.release()
        assert c._session_lost.is_set()
        # What the stuck sender would send next: not sent, failed as with the session.
        path = f"/{names.group}-not-sent"
        result = c._membership.send(c._zk.create_async, path, b"x")
        with pytest.raises(SessionExpiredError):
            result.get(timeout=5)
        assert c._zk.exists(path) is None
    finally:
        c.shutdown()
