"""Telling a group whose members disagree about the JVM release from one that is just busy.

Members of one group must compute the same assignment, or each claims partitions another
holds and the claims never resolve. zkconsumer and the JVM members read the same znodes; the
one thing that makes them compute differently is ``jvm.compatibility``'s roundrobin order
(Kafka 1.0.0 changed the string whose hash orders the partitions). When a claim has waited
its whole time for a holder, :func:`order_mismatch_hint` checks whether the other order
explains who holds it, so that the warning can name the setting to change.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from zkconsumer._config_keys import JvmCompatibility
from zkconsumer._types import TopicPartition
from zkconsumer.consumer.assignors.core import roundrobin_assign

__all__ = ["disagreement_hint", "order_mismatch_hint"]


def order_mismatch_hint(
    strategy: str,
    consumers_for_topic: Mapping[str, Iterable[str]],
    partitions_for_topic: Mapping[str, Iterable[int]],
    behaviour: JvmCompatibility,
    tp: TopicPartition,
    holder: str,
) -> str | None:
    """What to set when ``holder`` owns ``tp`` as the *other* roundrobin order assigns it
    (a JVM member of the other release line), else None.

    >>> cft, pft = {"t": ["a-0", "b-0", "c-0"]}, {"t": range(12)}
    >>> order_mismatch_hint("roundrobin", cft, pft, JvmCompatibility.of("0.10.2"),
    ...                     TopicPartition("t", 0), "a-0")[:62]
    't-0 is held by a-0, which Kafka 1.0.0 to 1.1.1 members assign '
    >>> order_mismatch_hint("roundrobin", cft, pft, JvmCompatibility.of("1.1.1"),
    ...                     TopicPartition("t", 0), "a-0") is None
    True
    """
    if strategy != "roundrobin":
        return None
    other = not behaviour.dashed_partition_names
    other_owner = roundrobin_assign(consumers_for_topic, partitions_for_topic,
                                    dashed_names=other).get(tp)
    if other_owner != holder:
        return None
    releases, setting = ("1.0.0 to 1.1.1", "1.1.1") if other else ("0.8.2 to 0.11", "0.10.2")
    return (f"{tp.topic}-{tp.partition} is held by {holder}, which Kafka {releases} members "
            f"assign it to with roundrobin: the group's JVM members seem to run such a release; "
            f"set jvm.compatibility={setting} (now {'.'.join(map(str, behaviour.release))}) "
            f"on every zkconsumer member of the group")


def disagreement_hint(
    strategy: str,
    consumers_for_topic: Mapping[str, Iterable[str]],
    partitions_for_topic: Mapping[str, Iterable[int]],
    behaviour: JvmCompatibility,
    assignment: Mapping[TopicPartition, str],
    owners: Mapping[TopicPartition, str | None],
    *,
    persistent: bool,
) -> str | None:
    """What to set, when the owner znodes some time after a rebalance disagree with the
    ``assignment`` this member computed (``owners``: tp -> owning thread, None if unowned).

    A partition held by the thread the other roundrobin order names is proof enough. A
    partition left unowned where the two orders differ is a hint only once it has lasted
    (``persistent``): members that disagree keep releasing what they fail to claim.

    >>> from zkconsumer.consumer.assignors.core import roundrobin_assign
    >>> cft, pft = {"t": ["a-0", "b-0", "c-0"]}, {"t": range(12)}
    >>> ours = roundrobin_assign(cft, pft)
    >>> b = JvmCompatibility.of("0.10.2")
    >>> disagreement_hint("roundrobin", cft, pft, b, ours, ours, persistent=True) is None
    True
    >>> held = {**ours, TopicPartition("t", 0): "a-0"}  # as 1.x members deal it
    >>> "jvm.compatibility=1.1.1" in disagreement_hint("roundrobin", cft, pft, b, ours, held,
    ...                                                  persistent=False)
    True
    >>> unowned = {**ours, TopicPartition("t", 0): None}
    >>> disagreement_hint("roundrobin", cft, pft, b, ours, unowned, persistent=False) is None
    True
    >>> "stay unowned" in disagreement_hint("roundrobin", cft, pft, b, ours, unowned,
    ...                                     persistent=True)
    True
    """
    stray = {tp: owner for tp, owner in owners.items() if assignment.get(tp) != owner}
    if strategy != "roundrobin" or not stray:
        return None
    for tp, owner in sorted(stray.items()):
        if owner is not None:
            hint = order_mismatch_hint(strategy, consumers_for_topic, partitions_for_topic,
                                       behaviour, tp, owner)
            if hint is not None:
                return hint
    if not persistent or any(owner is not None for owner in stray.values()):
        return None
    other = roundrobin_assign(consumers_for_topic, partitions_for_topic,
                              dashed_names=not behaviour.dashed_partition_names)
    moved = sorted(tp for tp in stray if other.get(tp) != assignment.get(tp))
    if not moved:
        return None
    setting = "0.10.2" if behaviour.dashed_partition_names else "1.1.1"
    shown = ", ".join(f"{tp.topic}-{tp.partition}" for tp in moved[:5])
    return (f"partitions assigned to other members stay unowned ({shown}"
            f"{', ...' if len(moved) > 5 else ''}): members that compute another "
            f"roundrobin order keep failing to claim them; if the group has JVM members of "
            f"another release line, set jvm.compatibility={setting} (now "
            f"{'.'.join(map(str, behaviour.release))}) on every zkconsumer member")
