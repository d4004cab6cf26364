"""This member's membership of the group: its ZooKeeper session, its registration in
``/consumers/<group>/ids`` (the ids JSON), the group view it reads with the watches that ask
for a rebalance, and the session's events.

Threads and locks (:class:`Membership`):

- ``session_guard`` (Lock) makes "the session is not lost" and "send this write" one step:
  the connector's LOST listener sets ``session_lost`` under it (:meth:`mark_lost`, waiting
  for it :data:`LISTENER_GUARD_WAIT_S` at most; each request of a batch is checked again,
  :meth:`send`), and owner znode writes, the deletion of the registration when leaving, and
  ZooKeeper offset commits are sent (asynchronously, never awaited under it) only after
  checking the flag under it, and only while connected (:meth:`live_session`). Kazoo fails
  every request still queued when it learns of the expiry, so no such write of the old
  session runs under the new one.
- ``session_gen`` (int, sessions lost so far) is written only in kazoo's thread, under
  ``session_guard``.
- ``wakeup`` (Event) is set by watch callbacks and the session listener (kazoo's thread).
- ``view_gen`` (int) is incremented only by watch callbacks (:meth:`on_watch`), in kazoo's
  event thread (one writer); attempts read it without a lock (an int read is atomic under
  the GIL). The generation, not ``wakeup``, tells an attempt the view moved on: the wake-up
  is cleared by whichever thread acts on it.
- ``rebalance_owed`` and ``zk_ops`` are written by the rebalancing thread only (under the
  connector's ``_rebalance_lock``); the listener reads ``rebalance_owed``.
- ``known`` (the registrations read) is filled by the rebalancing thread and emptied of an
  entry by its data watch (kazoo's event thread), which also counts
  ``registration_events`` (one writer); each is one dict or int operation, atomic under
  the GIL.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss, NodeExistsError, NoNodeError, SessionExpiredError
from kazoo.interfaces import IAsyncResult
from kazoo.protocol.states import Callback, EventType, WatchedEvent
from kazoo.security import OPEN_ACL_UNSAFE

from zkconsumer._config import ConsumerConfig
from zkconsumer._errors import ZkDataError
from zkconsumer._filters import filter_from_registration
from zkconsumer.consumer.assignors.strategy import strategy_refusals
from zkconsumer.consumer.fence import SessionLease
from zkconsumer.consumer.group_view import GroupView, Subscription, _Unregistered, timeout
from zkconsumer.zk import paths as zp
from zkconsumer.zk.read import consumers_for_topic

#: Longest the LOST listener (kazoo's connection thread) waits for ``session_guard``. A
#: holder is normally sending a few requests; one still holding it after this is stuck in
#: kazoo's wake-up write, which only the connection thread, waiting here, would unblock.
LISTENER_GUARD_WAIT_S = 2.0

#: Longest a group view read waits for kazoo's event thread to run the watch callbacks queued
#: before it (normally a fraction of a millisecond); after it, every registration is read.
DRAIN_WAIT_S = 2.0


class Membership:
    """The session, the registration and the group view of one member (see the module
    docstring for its locks)."""

    def __init__(self, zk: KazooClient, config: ConsumerConfig, consumer_id: str,
                 subscription: Subscription, lease: SessionLease,
                 log: logging.LoggerAdapter[logging.Logger]) -> None:
        self.zk = zk
        self.config = config
        self.group = config.group_id
        self.consumer_id = consumer_id
        self.subscription = subscription
        self.lease = lease
        self.log = log
        self.session_lost = threading.Event()
        self.session_guard = threading.Lock()
        self.session_gen = 0  # sessions lost so far (written in kazoo's thread)
        self.wakeup = threading.Event()
        # Group-view events so far (watch callbacks; see the module docstring).
        self.view_gen = 0
        self.rebalance_owed = False  # a rebalance was cut short by a disconnection
        self.zk_ops = 0  # ZooKeeper requests of the rebalance under way
        # Members' registrations already read (consumer id -> registration, czxid), each kept
        # while the data watch its read set has not fired (see _read_registrations).
        self.known: dict[str, tuple[zp.ConsumerRegistration, int]] = {}
        self.registration_events = 0  # their watches fired so far (kazoo's event thread)

    # -- the session -------------------------------------------------------------------------
    @contextmanager
    def live_session(self) -> Iterator[None]:
        """Held while an owner, registration or offset write is sent: raises if the session
        that owns the partitions is lost (see :meth:`mark_lost`), so the write never goes
        out under the next session, when the partitions may be another member's; and raises
        ConnectionLoss while disconnected (kazoo would hold the request until it reconnects,
        and whoever awaits the answer would wait out the outage)."""
        with self.session_guard:
            self.check_session()
            if not self.zk.connected:
                raise ConnectionLoss()
            yield

    def send(self, call: Callable[..., IAsyncResult], *args: Any, **kwargs: Any
              ) -> IAsyncResult:
        """``call(*args, **kwargs)`` (a kazoo ``*_async`` request), inside :meth:`live_session`,
        unless the session was lost or the connection dropped since the batch began: then an
        answer failed with that error, as if sent and failed (the caller treats it so), and
        nothing is sent. Per request, because a batch of hundreds can block in kazoo until
        the connection is back, possibly with the next session (see :meth:`mark_lost`)."""
        error: BaseException | None = None
        if self.session_lost.is_set():
            error = SessionExpiredError()
        elif not self.zk.connected:
            error = ConnectionLoss()
        if error is None:
            return call(*args, **kwargs)
        failed = self.zk.handler.async_result()
        failed.set_exception(error)
        return failed

    def session_id(self) -> int:
        """This client's session id; ConnectionLoss while disconnected (kazoo then says
        None). Read inside ``_live_session()`` when comparing it with a znode's owner."""
        client_id = self.zk.client_id
        if client_id is None:
            raise ConnectionLoss()
        return int(client_id[0])

    def check_session(self) -> None:
        """Call with ``_session_guard`` held, before sending owner or offset writes."""
        if self.session_lost.is_set():
            raise SessionExpiredError()

    def mark_lost(self) -> None:
        """The session expired (kazoo's LOST, in its connection thread). Recorded during
        shutdown too: shutdown must not delete the owner znodes of a lost session (the paths
        may be other members' claims by now). Under the guard, so a sender past its check
        has queued its request before kazoo fails the queue; but not waited for long: each
        kazoo request writes a byte to a socket only this thread reads, and a sender that
        filled it (hundreds of requests while the connection was down) waits for this
        thread. Its queued requests are failed all the same, and it sends no more once it
        sees the flag (:meth:`send`)."""
        locked = self.session_guard.acquire(timeout=LISTENER_GUARD_WAIT_S)
        try:
            self.session_gen += 1
            self.session_lost.set()
            self.lease.forget()
        finally:
            if locked:
                self.session_guard.release()
        if not locked:
            self.log.warning("session lost while a ZooKeeper request was stuck being "
                             "sent; its requests fail with the session")

    def stop_client(self) -> None:
        """Stop the ZooKeeper client (which fails any call still waiting for the connection)
        and close it, within kazoo's own bound on stopping plus a little. kazoo's stop()
        writes to a socket that only its connection thread reads: one filled by requests
        made while disconnected would block it until ZooKeeper is back (a process can exit
        all the same: the stop is left to a daemon thread, the client unclosed)."""
        failed: list[BaseException] = []

        def stop() -> None:
            try:
                self.zk.stop()
            except Exception as e:  # noqa: BLE001 - said below; the client is closed anyway
                failed.append(e)

        stopper = threading.Thread(target=stop, name=f"{self.consumer_id}-zk-stop",
                                   daemon=True)
        stopper.start()
        timeout_s = max(10.0, self.config.zookeeper_session_timeout_ms / 1000.0) + 2.0
        stopper.join(timeout_s)
        if stopper.is_alive():
            self.log.warning("the ZooKeeper client did not stop within %.0f s: left to stop "
                             "in the background", timeout_s)
            return
        if failed:
            self.log.warning("stopping the ZooKeeper client: %r", failed[0])
        self.zk.close()

    # -- the registration ----------------------------------------------------------------
    def register(self, replace_stale: bool = True) -> None:
        """Create this member's ids znode (and the group's ids directory).

        ``replace_stale``: an ids znode of another session at our path is replaced (a restart
        with the same consumer.id finds its previous session's until that one expires). Not
        when registering again because ours went missing under a live session: whoever made
        it since is a live process with the same consumer.id, and replacing it would have it
        replace ours in turn.
        """
        reg = self.subscription.registration
        assert reg is not None
        path = zp.id_path(self.group, self.consumer_id)
        data = reg.encode(regex_escaped_twice=self.config.jvm_behaviour.regex_escaped_twice)
        if self.config.zk_acl and not self.zk.exists(zp.CONSUMERS):
            # /consumers is every group's parent: zookeeper.acl applies from the group's own
            # znode down, or the first secured group would lock the others out.
            try:
                self.zk.create(zp.CONSUMERS, b"", acl=OPEN_ACL_UNSAFE)
            except NodeExistsError:
                pass
        self.zk.ensure_path(zp.ids_dir(self.group))
        try:
            self.zk.create(path, data, ephemeral=True)
        except NodeExistsError:
            # Ours from this session (a retried create), or a stale one from an earlier
            # session with the same consumer.id: replace the stale one, keep our own.
            existing, stat = self.zk.get(path)
            if stat.ephemeralOwner != self.session_id():
                if not replace_stale:
                    self.log.warning("%s is held by another session (a process with the same "
                                     "consumer.id?): not replacing it", path)
                    return
                self.log.warning("replacing stale registration %s", path)
                self.zk.delete(path)
                self.zk.create(path, data, ephemeral=True)
            elif existing != data:
                self.zk.set(path, data)
        self.log.info("registered %s %s", path, data.decode())

    def unregister(self, deadline: float) -> None:
        """Delete this member's ids znode, if this session holds it: one that another session
        holds is a process's with the same consumer.id (see :meth:`register`), not ours."""
        path = zp.id_path(self.group, self.consumer_id)
        with self.live_session():
            session = self.session_id()
            read = self.zk.exists_async(path)
        stat = read.get(timeout=timeout(deadline))
        if stat is None or stat.ephemeralOwner != session:
            return
        with self.live_session():
            deleted = self.zk.delete_async(path, version=stat.version)
        deleted.get(timeout=timeout(deadline))

    # -- the group view and its events -------------------------------------------------
    def on_watch(self, event: WatchedEvent | Any = None) -> None:
        # Runs in kazoo's event thread: never block here, only ask for a rebalance. The
        # generation first: whoever sees the wake-up must find the new generation too.
        self.view_gen += 1
        self.wakeup.set()

    def view_changed(self, gen: int) -> bool:
        """The group view changed since generation ``gen`` was read (or the session is lost,
        so whatever this attempt claims is void)."""
        return self.view_gen != gen or self.session_lost.is_set()

    def owe_rebalance(self) -> None:
        """Rebalance once connected again (the CONNECTED listener reads the flag; checking
        the state after setting it closes the race with a reconnection in between)."""
        self.rebalance_owed = True
        if self.zk.connected:
            self.wakeup.set()

    def read_view(self) -> GroupView:
        """Step 1 of a rebalance: the group's members, the topics' partitions, the brokers;
        watches on each (:meth:`on_watch`) ask for the next rebalance. The reads of this
        member's own topics and of the brokers are sent with the members' (one round trip
        less); a topic only other members subscribe to is read once they are known."""
        registration = self.subscription.registration
        own_topics: list[str] = []
        if registration is not None and not registration.is_wildcard:
            own_topics = sorted(registration.subscription)
        early = self._send_topic_reads(own_topics)
        broker_ids = self.zk.get_children_async(zp.BROKER_IDS)
        self.zk_ops += 1
        members, cversion, refused, everyone = self._read_members()
        wildcard = any(reg.is_wildcard for reg in members.values())
        all_topics: list[str] = []
        if wildcard:
            self.zk_ops += 1
            try:
                all_topics = self.zk.get_children(zp.BROKER_TOPICS, watch=self.on_watch)
            except NoNodeError:
                all_topics = []
        cft = consumers_for_topic(members, all_topics, self.config.exclude_internal_topics)
        my_topics = {t for t, ids in cft.items()
                     if any(zp.thread_consumer_id(i) == self.consumer_id for i in ids)}
        if self.consumer_id not in refused:
            my_topics |= set(own_topics)
        wanted = set(cft) | my_topics
        late = self._send_topic_reads(sorted(wanted - set(own_topics)))
        partitions = self._topic_partitions([r for r in early + late if r[0] in wanted])
        brokers = self._broker_ids(broker_ids)
        cft = {t: ids for t, ids in cft.items() if t in partitions}
        return GroupView(everyone, cversion, cft, partitions, brokers, refused)

    def _read_members(self) -> tuple[dict[str, zp.ConsumerRegistration], int, dict[str, str],
                                      dict[str, zp.ConsumerRegistration]]:
        """The members whose strategy is the group's, the ids directory's cversion, the
        members refused (id -> the group's strategy) and every member."""
        zk = self.zk
        ids_dir = zp.ids_dir(self.group)
        self.zk_ops += 1
        try:
            children, stat = zk.get_children(ids_dir, watch=self.on_watch, include_data=True)
        except NoNodeError:
            raise _Unregistered(f"the group's {ids_dir}") from None  # the group deleted
        members, created = self._read_registrations(sorted(children))
        if self.consumer_id not in members:
            # Missing (or unreadable, logged above: registering again rewrites it).
            raise _Unregistered(f"registration {zp.id_path(self.group, self.consumer_id)}")
        refused, _ = strategy_refusals(
            {cid: reg.assignment_strategy for cid, reg in members.items()},
            sorted(created, key=lambda cid: (created[cid], cid)))
        kept = {cid: reg for cid, reg in members.items() if cid not in refused}
        return kept, stat.cversion, refused, members

    def _read_registrations(self, children: list[str]
                            ) -> tuple[dict[str, zp.ConsumerRegistration], dict[str, int]]:
        """Each member's registration and its czxid (the registration order), read once per
        znode and kept while the data watch that read set has not fired: a rebalance then
        reads only the members it has not seen (a join: the newcomer; a leave: none).

        Two races with kazoo's event thread, which runs the watch callbacks:

        - kazoo takes a fired watch off its books before it reads the next answer, but runs
          the callback later, maybe after this thread saw that answer. A callback queued
          behind every callback queued so far ends the wait below only once those ran, so a
          registration that changed before the children were read is not taken as kept.
        - A registration's watch may fire, and its callback run, between the answer of its
          read and the moment it is kept: then nothing from this read is kept (it serves
          this view only, and the next one reads it again).
        """
        if self.known:
            drained = threading.Event()
            self.zk.handler.dispatch_callback(Callback("watch", drained.set, ()))
            if not drained.wait(DRAIN_WAIT_S):
                self.known.clear()  # the event thread is stuck: read everything again
        kept = {cid: self.known[cid] for cid in children if cid in self.known}
        events = self.registration_events
        pending = [(cid, self.zk.get_async(zp.id_path(self.group, cid),
                                           watch=self._on_registration_event))
                   for cid in children if cid not in kept]
        self.zk_ops += len(pending)
        fresh: dict[str, tuple[zp.ConsumerRegistration, int]] = {}
        for cid, result in pending:
            path = zp.id_path(self.group, cid)
            try:
                data, id_stat = result.get()
                reg = zp.ConsumerRegistration.decode(data, path)
                if reg.is_wildcard:
                    filter_from_registration(reg.pattern, next(iter(reg.subscription)))
                fresh[cid] = (reg, id_stat.czxid)
            except NoNodeError:
                continue  # left between the two reads; its deletion event is queued
            except ZkDataError as e:
                self.log.error("skipping a group member with an unreadable registration: %s", e)
        if self.registration_events == events:
            self.known.update(fresh)
        read = {**kept, **fresh}
        members = {cid: read[cid][0] for cid in children if cid in read}
        created = {cid: read[cid][1] for cid in children if cid in read}
        return members, created

    def _on_registration_event(self, event: WatchedEvent) -> None:
        """A member's registration changed, went or lost its watch: read it again next time;
        rewritten in place, it is a change of the group (its going is the children watch's)."""
        self.registration_events += 1
        if event.path:
            self.known.pop(zp.id_of_path(event.path), None)
        else:
            self.known.clear()  # no path: the connection dropped and every watch went
        if event.type == EventType.CHANGED:
            self.on_watch(event)

    def _send_topic_reads(self, topics: list[str]) -> list[tuple[str, str, IAsyncResult]]:
        """Each topic's znode read, with a watch, sent and not awaited: (topic, path, answer).
        A JVM member may subscribe to any string ("logs/app"): no such topic can exist, as
        the JVM finds (no /brokers/topics znode), so it is left out and the others go on."""
        reads: list[tuple[str, str, IAsyncResult]] = []
        for topic in topics:
            try:
                path = zp.topic_path(topic)
            except ValueError as e:
                self.log.warning("ignoring topic %r a member subscribes to: %s", topic, e)
                continue
            reads.append((topic, path, self.zk.get_async(path, watch=self.on_watch)))
        self.zk_ops += len(reads)
        return reads

    def _topic_partitions(self, reads: list[tuple[str, str, IAsyncResult]]
                          ) -> dict[str, list[int]]:
        """The topics' partitions from their reads; a topic not created yet is watched for
        its creation."""
        partitions: dict[str, list[int]] = {}
        for topic, path, result in reads:
            try:
                data, _ = result.get()
            except NoNodeError:
                self.zk_ops += 1
                self.zk.exists(path, watch=self.on_watch)  # watch for the topic's creation
                continue
            try:
                partitions[topic] = sorted(zp.TopicAssignment.decode(data, path).partitions)
            except ZkDataError as e:
                self.log.error("ignoring topic %s: %s", topic, e)
        return partitions

    def _broker_ids(self, answer: IAsyncResult) -> list[int]:
        """The registered brokers' ids from the children read; with none registered, the
        first one's registration is watched for."""
        try:
            brokers = answer.get()
        except NoNodeError:
            brokers = []
        if not brokers:
            brokers = self._watch_brokers()
        return sorted(i for b in brokers if (i := zp.parse_id(b)) is not None)

    def _watch_brokers(self) -> list[str]:
        """No broker is registered: watch for the first one (the directory's creation, or a
        child), reading the children once more with the watch set."""
        zk = self.zk
        self.zk_ops += 2
        zk.exists(zp.BROKER_IDS, watch=self.on_watch)
        try:
            return list(zk.get_children(zp.BROKER_IDS, watch=self.on_watch))
        except NoNodeError:
            return []
