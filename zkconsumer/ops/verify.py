"""``verify-rebalance`` (the legacy VerifyConsumerRebalance): every partition of every subscribed
topic has an owner, and every owner is a live thread subscribed to that topic.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from kazoo.client import KazooClient

from zkconsumer._types import TopicPartition
from zkconsumer.ops.group_reads import (
    _consumer_of,
    _partitions_unknown,
    _read_owners,
    _read_registry,
    _readable_members,
    _require_group,
    read_members,
)
from zkconsumer.ops.results import OwnershipCheck, VerifyResult
from zkconsumer.zk import paths as zp
from zkconsumer.zk.read import children, consumers_for_topic

log = logging.getLogger("zkconsumer.admin")


def verify_rebalance(zk: KazooClient, group: str) -> VerifyResult:
    """VerifyConsumerRebalance: every partition of every subscribed topic has an owner,
    and every owner is a live thread (computed from the registered members) subscribed to
    that topic. Owner znodes of topics no member subscribes to are reported too.

    Not verified (not ok) where that cannot be known: the part of a member whose subscription
    cannot be read, and a subscribed topic whose ``/brokers/topics`` znode does not decode
    (its owners are checked, with a warning logged naming the znode: :func:`_read_registry`).
    """
    _require_group(zk, group)
    members, undecodable_ids = read_members(zk, group)
    if not members and not undecodable_ids:
        return VerifyResult(group, False, f"group {group!r} has no registered members")
    all_topics = children(zk, zp.BROKER_TOPICS)
    readable, unreadable = _readable_members(members)
    unreadable.update(undecodable_ids)  # its ids znode does not decode: subscription unknown
    subscribed = consumers_for_topic(readable, all_topics, True)
    owners = _read_owners(zk, group)
    registry, undecodable = _read_registry(zk, subscribed)
    for topic, why in undecodable.items():
        log.warning("%s; its part of the rebalance is not verified",
                    _partitions_unknown(topic, why))
    judge = _Judge(unreadable)
    checks: list[OwnershipCheck] = []
    for topic in sorted(subscribed):
        live = set(subscribed[topic])
        if topic in undecodable:
            # Its partitions are unknown: only the owners there are checked.
            checks += [judge.owned(tp.topic, tp.partition, thread, live)
                       for tp, thread in sorted(owners.items()) if tp.topic == topic]
        elif registry[topic] is not None:  # (None: a topic that does not exist (yet))
            checks += [judge.owned(topic, p, owners.get(TopicPartition(topic, p)), live)
                       for p in registry[topic] or ()]
    covered = {(c.topic, c.partition) for c in checks}
    checks += [judge.unsubscribed(tp, owner) for tp, owner in sorted(owners.items())
               if (tp.topic, tp.partition) not in covered]
    return _verdict(group, checks, sorted(subscribed), unreadable, undecodable)


class _Judge:
    """The check of one partition's owner against the live threads subscribed to its topic."""

    def __init__(self, unreadable: dict[str, str]) -> None:
        self.unreadable = unreadable

    def unverifiable(self, owner: str | None) -> str | None:
        """Why ``owner``'s partition cannot be checked: its member's subscription is
        unknown (it may well be right to own it)."""
        member = None if owner is None else _consumer_of(owner)
        if member is None or member not in self.unreadable:
            return None
        return f"cannot verify: owner {owner} is a thread of {member}, whose subscription " \
               f"is unknown"

    def owned(self, topic: str, partition: int, owner: str | None,
              live: set[str]) -> OwnershipCheck:
        problem = None
        if owner is None:
            problem = "no owner"
        elif owner not in live:
            problem = self.unverifiable(owner) or (
                f"owner {owner} is not a live thread subscribed to {topic}")
        return OwnershipCheck(topic, partition, owner, problem)

    def unsubscribed(self, tp: TopicPartition, owner: str) -> OwnershipCheck:
        return OwnershipCheck(
            tp.topic, tp.partition, owner,
            self.unverifiable(owner) or f"owned by {owner} but no live thread subscribes to "
            f"{tp.topic}:{tp.partition}",
        )


def _verdict(group: str, checks: list[OwnershipCheck], subscribed: list[str],
             unreadable: dict[str, str], undecodable: Mapping[str, str]) -> VerifyResult:
    """The result's one line: failed, not verified, nothing to own, or succeeded."""
    unknown = "".join(
        f"; cannot verify the part of member {cid}: its subscription is unknown ({why})"
        for cid, why in sorted(unreadable.items())
    ) + "".join(
        f"; cannot verify topic {topic}: its partitions are unknown ({zp.topic_path(topic)} "
        "does not decode)" for topic in undecodable
    )
    bad = [c for c in checks if not c.ok and not (c.problem or "").startswith("cannot verify")]
    if bad:
        shown = "; ".join(f"{c.topic}:{c.partition}: {c.problem}" for c in bad[:5])
        more = f"; and {len(bad) - 5} more" if len(bad) > 5 else ""
        return VerifyResult(group, False, f"rebalance failed for group {group!r}: {len(bad)} of "
                            f"{len(checks)} partitions wrong: {shown}{more}{unknown}", checks)
    if unreadable or undecodable:
        n_ok = sum(1 for c in checks if c.ok)
        return VerifyResult(group, False, f"rebalance not verified for group {group!r}: "
                            f"{n_ok} of {len(checks)} partitions checked are owned by live "
                            f"threads{unknown}", checks)
    if not checks:
        return VerifyResult(group, False, f"group {group!r}: no partition to own "
                            f"(subscribed topics: {subscribed or 'none'})", checks)
    n_topics = len({c.topic for c in checks})
    return VerifyResult(group, True, f"rebalance succeeded for group {group!r}: all "
                        f"{len(checks)} partitions of {n_topics} topic"
                        f"{'s' if n_topics != 1 else ''} owned by live threads", checks)
