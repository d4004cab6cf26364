"""The topics: ZooKeeper's ``/brokers/topics`` kept equal to the cluster's topics, for the
topics the bridge manages (marked under :data:`~zkconsumer.bridge.top_paths.MANAGED_DIR`) or
that no one else wrote.

Each round compares the cluster with what ZooKeeper holds of the managed topics, not with
what the bridge remembers writing, and writes whatever differs. What ZooKeeper holds is read
with watches set (all reads of a round sent before any answer is awaited) and kept until a
watch reports a change, or the connection drops (kazoo then fires every watch): an unchanged
tree costs no read. A managed topic errored in one metadata answer is kept as it was; one
missing from the answers (or with fewer partitions than ZooKeeper holds) is believed after
:data:`GONE_AFTER_ANSWERS` answers in a row. A name that cannot be a Kafka topic is skipped
with one warning; a topic whose writes fail does not keep the others from being written.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping

from kazoo.protocol.states import WatchedEvent

from zkconsumer.bridge.cluster import ClusterView, legal_topic
from zkconsumer.bridge.top_paths import MANAGED_DIR
from zkconsumer.bridge.topic_znodes import (
    _Held,
    _TopicRead,
    held_of,
    marker,
    partition_count,
    partition_dir,
    read_topic,
    write_state,
    write_topic,
)
from zkconsumer.bridge.zk_requests import _ZK_GONE, Requests
from zkconsumer.zk import paths as zp

log = logging.getLogger("zkconsumer.bridge")

# Successful metadata answers in a row a managed topic must be missing from before its
# znodes are deleted: one odd answer must not make legacy consumers rebalance twice.
GONE_AFTER_ANSWERS = 2


class TopicSync:
    """Writes the cluster's topics into ZooKeeper. Watches fire in kazoo's threads: they
    only note which topic to read again (``_changed``, under ``_watch_lock``)."""

    def __init__(self, requests: Requests) -> None:
        self._requests = requests
        # managed topic -> what ZooKeeper holds of it, kept until a watch reports a change
        self._held: dict[str, _Held] = {}
        self._watch_lock = threading.Lock()
        self._changed: set[str] = set()  # topics a watch reported changed, under the lock
        self._all_changed = False  # the connection dropped: every watch fired
        self._warned_names: set[str] = set()  # illegal topic names, warned once each
        # managed topic -> successful answers in a row it was missing from
        self._absent_answers: dict[str, int] = {}
        # Managed topic -> answers in a row with fewer partitions than ZooKeeper holds.
        self._fewer_answers: dict[str, int] = {}

    def forget(self) -> None:
        """Read every topic again (after a resync: its watches may have gone with the
        session)."""
        self._held.clear()

    def sync(self, view: ClusterView) -> list[Exception]:
        """Write the view's topics and delete those gone; the failures (a lost connection
        is raised at once)."""
        zk, wait = self._requests.zk, self._requests.wait
        self._take_changes()
        managed = set(wait(zk.get_children_async(MANAGED_DIR), MANAGED_DIR))
        existing = set(wait(zk.get_children_async(zp.BROKER_TOPICS), zp.BROKER_TOPICS))
        failures = self._sync_topics(view, managed, existing)
        return failures + self._drop_gone_topics(view, managed)

    def _sync_topics(self, view: ClusterView, managed: set[str],
                     existing: set[str]) -> list[Exception]:
        """Write the view's topics that are the bridge's (or no one's); the failures."""
        for topic in set(self._held) - (managed & existing):
            del self._held[topic]  # deleted, or no longer the bridge's
        # Someone else's topic znode (listed but not marked) is left alone.
        mine = {topic: parts for topic, parts in view.topics.items()
                if self._legal(topic) and (topic in managed or topic not in existing)}
        # What ZooKeeper holds of those not read since their last change, every read sent
        # before any answer is awaited.
        reads = {topic: read_topic(self._requests, topic, parts, self._on_topic_watch)
                 for topic, parts in mine.items()
                 if topic in existing and topic not in self._held}
        failures: list[Exception] = []
        for topic, parts in sorted(mine.items()):
            try:
                self._sync_topic(topic, parts, topic in managed, reads.get(topic))
            except _ZK_GONE:
                raise  # every other request would wait as long
            except Exception as e:  # noqa: BLE001 - one topic must not stop the others
                failures.append(e)
        return failures

    def _drop_gone_topics(self, view: ClusterView, managed: set[str]) -> list[Exception]:
        """Delete the bridge's topics the cluster no longer has; the failures. A topic
        errored in this answer is unknown, not gone; a missing one goes only after
        GONE_AFTER_ANSWERS answers in a row."""
        failures: list[Exception] = []
        absent = managed - set(view.topics) - view.errored
        self._absent_answers = {t: self._absent_answers.get(t, 0) + 1 for t in absent}
        for topic in sorted(absent):
            if self._absent_answers[topic] < GONE_AFTER_ANSWERS:
                continue
            log.info("bridge: topic %s is gone from the cluster", topic)
            try:
                self._requests.delete(zp.topic_path(topic), recursive=True)
                self._requests.delete(marker(topic))
            except _ZK_GONE:
                raise
            except Exception as e:  # noqa: BLE001 - as above
                failures.append(e)
                continue
            del self._absent_answers[topic]
            self._fewer_answers.pop(topic, None)
        return failures

    def _legal(self, topic: str) -> bool:
        """Whether ``topic`` can be registered; warns once per name that cannot."""
        if legal_topic(topic):
            return True
        if topic not in self._warned_names:
            self._warned_names.add(topic)
            log.warning("bridge: the cluster has a topic named %r, not a legal Kafka topic "
                        "name ([a-zA-Z0-9._-], 1 to 249 characters, not '.' or '..'); it is "
                        "not registered in ZooKeeper", topic)
        return False

    def _on_topic_watch(self, event: WatchedEvent) -> None:
        # A kazoo callback: never block, only note which topic to read again next round. An
        # event without a path (the connection dropped) fired every watch.
        prefix = zp.BROKER_TOPICS + "/"
        with self._watch_lock:
            if event.path and event.path.startswith(prefix):
                self._changed.add(event.path[len(prefix):].split("/", 1)[0])
            else:
                self._all_changed = True

    def _take_changes(self) -> None:
        """Forget what ZooKeeper held of the topics a watch reported changed since."""
        with self._watch_lock:
            changed, everything = self._changed, self._all_changed
            self._changed, self._all_changed = set(), False
        if everything:
            self._held.clear()
        for topic in changed:
            self._held.pop(topic, None)

    def _sync_topic(
        self, topic: str, parts: Mapping[int, tuple[list[int], int, int, list[int]]],
        marked: bool, read: _TopicRead | None,
    ) -> None:
        """Write what differs between ZooKeeper (``read``, or what was held of it since;
        neither when the topic was not listed) and the cluster: the topic znode, the
        partition states, and the partitions directories of partitions the topic no longer
        has. Once anything is written, the topic is read again next round (which watches
        what this round created)."""
        requests = self._requests
        data = zp.TopicAssignment({p: r for p, (r, _, _, _) in parts.items()}).encode()
        if read is not None:
            got = held_of(requests, topic, read)
            if got is not None:  # else deleted since the listing: created below
                self._held[topic] = got
        held = self._held.pop(topic, None)  # put back below when nothing differs
        held_data = held.data if held is not None else None  # None: no topic znode
        held_states = held.states if held is not None else {}
        wanted = {p: zp.PartitionState(leader, epoch, 1, isr).encode()
                  for p, (_, leader, epoch, isr) in parts.items()}
        stale = [] if held is None else [
            gone for gone in (zp.parse_id(c) for c in held.partitions)
            if gone is not None and gone not in parts]
        if marked and (stale or partition_count(held_data) > len(parts)):
            # A partition count never falls, unless the topic was deleted and created again:
            # believed after GONE_AFTER_ANSWERS answers in a row, as a topic's absence is
            # (one odd answer would make every member rebalance twice).
            seen = self._fewer_answers[topic] = self._fewer_answers.get(topic, 0) + 1
            if seen < GONE_AFTER_ANSWERS:
                if held is not None:
                    self._held[topic] = held
                return
        self._fewer_answers.pop(topic, None)
        if held is not None and held_data == data and not stale and all(
                held_states.get(p) == state for p, state in wanted.items()):
            self._held[topic] = held
            return
        if held_data != data:
            if not marked:
                # The marker first: a round cut short in between leaves a managed topic
                # without its znode (written next round), never a topic znode the bridge
                # would then take for someone else's and leave for good.
                path = marker(topic)
                requests.wait(requests.zk.ensure_path_async(path), path, "ensure")
            if not write_topic(requests, topic, data, held_data is not None):
                return
            log.info("bridge: topic %s with %d partitions", topic, len(parts))
        for p, state in sorted(wanted.items()):
            if held_states.get(p) != state and not write_state(requests, topic, p, state):
                return  # its topic znode was deleted meanwhile: written again next round
        for gone in sorted(stale):
            # Deleted and created again with fewer partitions within GONE_AFTER_ANSWERS: a
            # reader must not find a leader for a partition that does not exist.
            log.info("bridge: topic %s has no partition %d any more", topic, gone)
            requests.delete(partition_dir(topic, gone), recursive=True)
