"""One managed topic's znodes: read with watches set, and written where they differ.

``/brokers/topics/<topic>`` (``{"version":1,"partitions":{"0":[111]}}``), its partitions'
``.../partitions/<p>/state`` and the marker ``/zkconsumer/bridge/topics/<topic>`` (the bridge
manages this topic). A topic znode someone else created first (an admin tool racing the
bridge's first write) is theirs, and left alone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.interfaces import IAsyncResult
from kazoo.protocol.states import WatchedEvent

from zkconsumer.bridge.top_paths import MANAGED_DIR
from zkconsumer.bridge.zk_requests import Requests
from zkconsumer.zk import paths as zp

log = logging.getLogger("zkconsumer.bridge")


@dataclass(frozen=True)
class _TopicRead:
    """Reads in flight of a managed topic's znodes, with watches (see :func:`read_topic`)."""

    data: IAsyncResult  # /brokers/topics/<topic>
    children: IAsyncResult  # its partitions directory
    states: dict[int, IAsyncResult]  # partition -> its state znode


@dataclass(frozen=True)
class _Held:
    """What ZooKeeper holds of a managed topic, as read with watches set."""

    data: bytes  # /brokers/topics/<topic>
    states: dict[int, bytes]  # partition -> its state znode, for those that exist
    partitions: list[str]  # the children of its partitions directory


def marker(topic: str) -> str:
    return f"{MANAGED_DIR}/{topic}"  # topic: a legal name, checked before


def partition_dir(topic: str, partition: int) -> str:
    return zp.partition_state_path(topic, partition).rsplit("/", 1)[0]


def partition_count(data: bytes | None) -> int:
    """The partitions a topic znode's payload names (0: none, or not a payload to keep)."""
    if data is None:
        return 0
    try:
        return len(zp.TopicAssignment.decode(data).partitions)
    except ValueError:
        return 0


def read_topic(requests: Requests, topic: str, parts: Mapping[int, Any],
               watch: Callable[[WatchedEvent], None]) -> _TopicRead:
    """Send the reads of a listed topic's znodes, each setting ``watch`` (one per znode:
    kazoo keeps a set of callbacks); answers awaited by :func:`held_of`."""
    zk = requests.zk
    return _TopicRead(
        zk.get_async(zp.topic_path(topic), watch=watch),
        zk.get_children_async(zp.partitions_dir(topic), watch=watch),
        {p: zk.get_async(zp.partition_state_path(topic, p), watch=watch) for p in parts},
    )


def held_of(requests: Requests, topic: str, read: _TopicRead) -> _Held | None:
    """What the reads answered; None when the topic znode was deleted since the listing."""
    got = requests.answer(read.data, zp.topic_path(topic))
    if got is None:
        return None
    states: dict[int, bytes] = {}
    for p, result in read.states.items():
        state = requests.answer(result, zp.partition_state_path(topic, p))
        if state is not None:
            states[p] = state[0]
    children = requests.answer(read.children, zp.partitions_dir(topic)) or []
    return _Held(got[0], states, children)


def write_topic(requests: Requests, topic: str, data: bytes, listed: bool) -> bool:
    """Write a managed topic's znode; False when someone else created it first (an admin
    tool, between the listing and this write): then it is theirs, and left alone."""
    zk, wait = requests.zk, requests.wait
    path = zp.topic_path(topic)
    if listed:
        try:
            wait(zk.set_async(path, data), path)
            return True
        except NoNodeError:
            pass  # deleted since the listing: created below
    try:
        wait(zk.create_async(path, data), path, "create")  # /brokers/topics exists
    except NodeExistsError:
        try:
            if wait(zk.get_async(path), path)[0] == data:
                return True  # ours after all (a create left queued by a timeout)
        except NoNodeError:
            pass  # deleted again: theirs all the same
        requests.delete(marker(topic))
        log.info("bridge: topic %s was written by someone else; leaving it alone", topic)
        return False
    return True


def write_state(requests: Requests, topic: str, partition: int, data: bytes) -> bool:
    """Write a partition's state znode; False when the topic's znode is gone. Its
    parents are created level by level, never the topic znode: kazoo's makepath would
    create that one empty, which readers reject as invalid JSON."""
    zk, wait = requests.zk, requests.wait
    path = zp.partition_state_path(topic, partition)
    try:
        wait(zk.set_async(path, data), path)
        return True
    except NoNodeError:
        pass
    try:
        for parent in (zp.partitions_dir(topic), partition_dir(topic, partition)):
            try:
                wait(zk.create_async(parent), parent, "create")
            except NodeExistsError:
                pass
        try:
            wait(zk.create_async(path, data), path, "create")
        except NodeExistsError:  # written meanwhile (a request left queued by a timeout)
            wait(zk.set_async(path, data), path)
    except NoNodeError:
        return False
    return True
