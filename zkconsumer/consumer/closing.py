"""The end of a member: stop fetching, the final commit, end the streams, leave the group,
close the clients; and waits that give up once ZooKeeper is unreachable.

:class:`Closing` does the steps ``ZookeeperConsumerConnector.shutdown()`` orders. It runs
in the thread that calls ``shutdown()`` (once: the connector's ``_state_lock`` sees to it)
and takes no lock of its own: ``end_streams`` runs with the connector's ``_rebalance_lock``
held when ZooKeeper is reachable (``locked``), and the commit under it takes the commit lock
as any commit does.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from zkconsumer._config import ConsumerConfig
from zkconsumer._types import TopicPartition
from zkconsumer.consumer.commits import Commits
from zkconsumer.consumer.group_view import CONNECTION_ERRORS, FetchSide, Subscription
from zkconsumer.consumer.membership import Membership
from zkconsumer.consumer.metrics import ConsumerMetrics
from zkconsumer.consumer.ownership import Ownership

#: The longest shutdown() waits for a background thread or a lock while ZooKeeper answers.
SHUTDOWN_WAIT_S = 30.0
#: How long without a ZooKeeper connection a wait goes on before it gives up.
DISCONNECTED_GIVE_UP_S = 1.0


class Closing:
    """The shutdown's steps over the member's collaborators (see the module docstring)."""

    def __init__(self, config: ConsumerConfig, zk: KazooClient, membership: Membership,
                 ownership: Ownership, commits: Commits, subscription: Subscription,
                 fetcher: FetchSide, metrics: ConsumerMetrics,
                 release: Callable[[set[TopicPartition], float | None], None],
                 log: logging.LoggerAdapter[Any]) -> None:
        self.config = config
        self._zk = zk
        self._membership = membership
        self._ownership = ownership
        self._commits = commits
        self._subscription = subscription
        self._fetcher = fetcher
        self.metrics = metrics
        self._release = release  # the connector's step, which tests wrap there
        self.log = log

    def end_streams(self, locked: bool) -> None:
        """Stop fetching, commit (when ``locked``: with ``_rebalance_lock``, ZooKeeper
        reachable), end the streams and leave the group."""
        self._fetcher.stop_connections()
        for q in self._subscription.all_queues():
            q.clear()
        for s in self._subscription.streams:
            s.clear()
        # While the partitions are still ours; with ZooKeeper unreachable, failed at once.
        self._commits.async_commits.close(
            self.config.zookeeper_session_timeout_ms / 1000.0 if locked else 0.0)
        if locked and self.config.auto_commit_enable:
            self._final_commit()
        for q in self._subscription.all_queues():
            q.put_shutdown()
        self._ownership.registry = {}
        # Leave the group now, before the slow part (closing the fetch clients): the
        # others rebalance as soon as the registration and owners are gone.
        if locked:
            self.leave_group()

    def _final_commit(self) -> None:
        try:
            # strict: told when paused (the connection dropped, before or during it).
            self._commits.commit(retry_on_failure=True, strict=True)
        except CONNECTION_ERRORS as e:
            self.log.warning("final commit not made: the ZooKeeper connection or session is "
                             "gone (%r); what was consumed since the last commit will be "
                             "delivered again", e)
        except Exception:  # shutdown goes on; the error is logged
            self.log.exception("final commit failed")

    def close_clients(self) -> None:
        try:
            self._fetcher.shutdown()
        finally:
            try:
                self._commits.offsets.close()
            finally:
                self._membership.stop_client()
                # Owns nothing now, whether or not it could leave the group explicitly.
                self.metrics.set_owned_partitions(())
                self.metrics.close()

    def leave_group(self) -> None:
        """Release every owner znode, then delete the registration (ids znode).

        Every answer is awaited until one session timeout from now at most: kazoo holds a
        request made while disconnected until the connection is back, and shutdown() must not
        wait for an outage (the session's end removes the znodes anyway).
        """
        if not self._zk.connected or self._membership.session_lost.is_set():
            # Nothing to delete: a lost session's ephemerals are gone, and the session's end
            # takes a live one's.
            self._ownership.owned.clear()
            self._ownership.uncertain.clear()
            return
        deadline = time.monotonic() + self.config.zookeeper_session_timeout_ms / 1000.0
        try:
            self._release(set(self._ownership.owned), deadline)
            if self._subscription.registration is not None:
                self._membership.unregister(deadline)
        except NoNodeError:
            pass
        except Exception as e:  # noqa: BLE001 - closing the session removes them anyway
            self.log.warning("leaving the group explicitly failed (%r); the session close "
                             "will remove the znodes", e)
        self._ownership.owned.clear()
        self._ownership.uncertain.clear()
        self.metrics.set_owned_partitions(self._ownership.owned)


def join_unless_disconnected(zk: KazooClient, t: threading.Thread) -> None:
    """Join ``t``, but stop waiting after a second without a ZooKeeper connection (then
    ``t`` may wait for it in a kazoo call, which only the client's stop() ends)."""
    if t is threading.current_thread() or not t.is_alive():
        return

    def joined() -> bool:
        t.join(0.05)
        return not t.is_alive()

    _wait_unless_disconnected(zk, joined)


def acquire_unless_disconnected(zk: KazooClient, lock: threading.RLock) -> bool:
    """Like :func:`join_unless_disconnected`, for a lock; True when acquired."""
    return _wait_unless_disconnected(zk, lambda: lock.acquire(timeout=0.05))


def _wait_unless_disconnected(zk: KazooClient, step: Callable[[], bool]) -> bool:
    """Call ``step`` (which waits briefly) until it returns True (then True), SHUTDOWN_WAIT_S
    pass, or ZooKeeper has been disconnected for DISCONNECTED_GIVE_UP_S (then False)."""
    deadline = time.monotonic() + SHUTDOWN_WAIT_S
    disconnected_since: float | None = None
    while time.monotonic() < deadline:
        if step():
            return True
        if zk.connected:
            disconnected_since = None
        elif disconnected_since is None:
            disconnected_since = time.monotonic()
        elif time.monotonic() - disconnected_since > DISCONNECTED_GIVE_UP_S:
            return False
    return False
