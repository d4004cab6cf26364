"""The watcher thread: it merges bursts of ZooKeeper events into one rebalance, retries a
failed one after the backoff, handles a lost session, checks the group's agreement, and
hands a dead fetch side's error to the iterators. The first rebalance runs in the caller's
thread (:meth:`RebalanceWatcher.first_rebalance`) and the thread starts only after it: one
thread rebalances at a time.

Threads and locks (:class:`RebalanceWatcher`): a rebalance and the session-loss path run
under the connector's ``_rebalance_lock`` (the rebalancer's ``rebalance_lock``); forgetting
what a lost session owned takes the commits' ``commit_lock`` too (a commit under way ends
first, while ``session_lost`` is still set, so its write is not sent; later ones find
nothing owned), and clearing ``session_lost`` takes the membership's ``session_guard``.
``bg_error`` is written once, by this thread or by :meth:`~RebalanceWatcher.check_fetcher`
(any thread; a second failure is not kept); the connector reads it without a lock.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace

from zkconsumer._config import ConsumerConfig
from zkconsumer._errors import (
    ConsumerRebalanceFailedException,
    ConsumerShutdownError,
    ZkConsumerError,
)
from zkconsumer.consumer.assignors.jvmcompat import disagreement_hint
from zkconsumer.consumer.group_view import Subscription, _Disconnected, agreement_delay_s
from zkconsumer.consumer.membership import Membership
from zkconsumer.consumer.metrics import ConsumerMetrics
from zkconsumer.consumer.ownership import Ownership
from zkconsumer.consumer.partition import FetcherFailed
from zkconsumer.consumer.rebalance import Rebalancer


class RebalanceWatcher:
    """Runs rebalances when the group changes (locks: see the module docstring)."""

    def __init__(self, config: ConsumerConfig, consumer_id: str, membership: Membership,
                 ownership: Ownership, rebalancer: Rebalancer, subscription: Subscription,
                 metrics: ConsumerMetrics, shutdown_event: threading.Event,
                 log: logging.LoggerAdapter[logging.Logger]) -> None:
        self.config = config
        self.consumer_id = consumer_id
        self.membership = membership
        self.ownership = ownership
        self.rebalancer = rebalancer
        self.subscription = subscription
        self.metrics = metrics
        self.shutdown_event = shutdown_event
        self.log = log
        self.bg_error: BaseException | None = None
        self.thread = threading.Thread(
            target=self.watcher_loop, name=f"{consumer_id}-watcher", daemon=True
        )

    def first_rebalance(self) -> None:
        """The first rebalance, in the caller's thread so its failure reaches the caller; a
        connection that drops meanwhile is waited for (zookeeper.connection.timeout.ms) like
        at start."""
        m = self.membership
        r = self.rebalancer
        deadline = time.monotonic() + self.config.zookeeper_connection_timeout_ms / 1000.0
        while True:
            try:
                r.synced_rebalance()
                return
            except _Disconnected:
                pass
            while not m.zk.connected or m.session_lost.is_set():
                if time.monotonic() > deadline:
                    raise ConsumerRebalanceFailedException(
                        f"{self.consumer_id} can't rebalance: no ZooKeeper connection within "
                        f"zookeeper.connection.timeout.ms "
                        f"({self.config.zookeeper_connection_timeout_ms} ms)"
                    )
                if m.session_lost.is_set() and m.zk.connected:
                    self.handle_session_loss()
                    continue
                if self.shutdown_event.wait(0.05):
                    raise ConsumerShutdownError("the connector is shut down")

    def watcher_loop(self) -> None:
        """The watcher thread: merges bursts of events into one rebalance, retries a failed
        one after the backoff, and wakes every second to check for shutdown."""
        m = self.membership
        r = self.rebalancer
        backoff_s = self.config.rebalance_backoff_ms / 1000.0
        retry_at: float | None = None  # a failed rebalance is retried then (or on an event)
        try:
            while not self.shutdown_event.is_set():
                wait_s = 1.0 if retry_at is None else min(1.0, retry_at - time.monotonic())
                woken = m.wakeup.wait(max(0.0, wait_s))
                self.check_fetcher()
                if not woken:
                    self._check_agreement()
                if self.shutdown_event.is_set():
                    break
                if retry_at is not None and time.monotonic() >= retry_at:
                    woken = True
                if not woken:
                    continue
                retry_at = None
                # Cleared before acting: an event from now on means another pass.
                m.wakeup.clear()
                try:
                    if m.session_lost.is_set():
                        self.handle_session_loss()
                    if not m.zk.connected or m.session_lost.is_set():
                        m.owe_rebalance()  # the CONNECTED state wakes us
                        continue
                    r.synced_rebalance()
                except _Disconnected:
                    m.owe_rebalance()
                except ConsumerRebalanceFailedException as e:
                    self.log.error("%s; retrying in %d ms", e, self.config.rebalance_backoff_ms)
                    retry_at = time.monotonic() + backoff_s
                except ZkConsumerError as e:
                    self.log.error("rebalance failed: %s; retrying", e)
                    retry_at = time.monotonic() + backoff_s
                except Exception as e:  # noqa: BLE001 - ZooKeeper connection errors and such
                    if self.shutdown_event.is_set():
                        break
                    self.log.warning("rebalance interrupted (%r); retrying", e)
                    retry_at = time.monotonic() + backoff_s
        except BaseException as e:  # kept and re-raised to the user
            self.bg_error = e
            self.log.exception("watcher thread died")
            if not self.shutdown_event.is_set():
                # No rebalance will run any more: the iterators raise it rather than wait
                # for ever (commit_offsets() raises it too).
                self.subscription.fetch_failure = FetcherFailed(e)
                self.subscription.requeue_fetch_failure()

    def _check_agreement(self) -> None:
        """Once due, compare the owner znodes with the last assignment; a disagreement the
        other JVM release line's roundrobin order explains is logged with the setting to
        change (checked again a few times while partitions just stay unowned)."""
        r = self.rebalancer
        check = r.agreement
        if check is None or time.monotonic() < check.due:
            return
        r.agreement = None
        try:
            owners = self.ownership.read_owners(check.assignment)
        except Exception as e:  # noqa: BLE001 - a diagnosis only; the next rebalance re-arms
            self.log.debug("could not read the owners to check the assignment: %r", e)
            return
        hint = disagreement_hint(
            self.config.partition_assignment_strategy, check.view.consumers_for_topic,
            check.view.partitions_for_topic, self.config.jvm_behaviour, check.assignment,
            owners, persistent=check.rounds >= 2)
        if hint is not None:
            self.log.warning("%s", hint)
        elif check.rounds < 2 and any(check.assignment[tp] != o for tp, o in owners.items()):
            r.agreement = replace(check, due=time.monotonic() + agreement_delay_s(self.config),
                                      rounds=check.rounds + 1)

    def check_fetcher(self) -> None:
        """A fetch side that died is re-raised to the application, never swallowed."""
        r = self.rebalancer
        error = getattr(r.fetcher, "error", None)
        if error is None or self.bg_error is not None:
            return
        self.bg_error = error
        self.subscription.fetch_failure = FetcherFailed(error)
        self.log.error("fetching failed: %r; iterators will raise it", error)
        self.subscription.requeue_fetch_failure()

    def handle_session_loss(self) -> None:
        """The session expired: our ephemerals are gone. Stop fetching, forget the owner
        znodes (deleting nothing), and re-register once connected."""
        m = self.membership
        r = self.rebalancer
        with r.rebalance_lock:
            gen = m.session_gen
            if self.ownership.registry or self.ownership.owned:
                self.log.warning("ZooKeeper session lost: stopping fetchers, forgetting "
                                 "%d owned partitions", len(self.ownership.owned))
                r.stop_fetching(commit=False)
                self.ownership.registry = {}
            # Under _commit_lock: a commit under way (it checked ownership under it) ends
            # first, while _session_lost is still set, so its write is not sent; later ones
            # find nothing owned.
            with self.ownership.commit_lock:
                self.ownership.forget()
            r.settled_view = None
            self.metrics.set_owned_partitions(self.ownership.owned)
            if not m.zk.connected:
                return
            self.log.info("new ZooKeeper session: re-registering")
            m.register()
            with m.session_guard:
                if m.session_gen == gen:  # not lost again meanwhile
                    m.session_lost.clear()
            m.wakeup.set()
