"""Which members of a group may claim partitions, given the strategies they record.

Every member computes the whole group's assignment, so all must use the same strategy.
zkconsumer members record theirs in their ids znode (``assignment_strategy``); a
registration without it is a JVM member (or an older zkconsumer), which can only be using
``range`` or ``roundrobin`` and never refuses to claim. From one view of the group, every
member computes the same answer:

- The group's strategy is the first recorded one in registration order (the ids znodes'
  creation order, ``czxid``), skipping ``sticky`` when a member without a record is present.
- A member whose recorded strategy differs is *refused*: it claims nothing, and the others
  leave it out of the assignment (so its refusal leaves no partition unowned). With members
  without a record present and no recorded range or roundrobin, the group's strategy is
  theirs, unknown but range or roundrobin: every ``sticky`` member is refused, since a JVM
  member would claim by its own strategy over partitions sticky gives to others.

Members without a record are never refused (they would not notice), and cannot be checked
between themselves: a JVM group mixing range and roundrobin fails as it always did.

>>> strategy_refusals({"a": "range", "b": "sticky"}, ["a", "b"])
({'b': "'range' (the strategy of the group's first member a)"}, 'range')
>>> print(strategy_refusals({"jvm": None, "z": "sticky"}, ["z", "jvm"])[0]["z"])
'range' or 'roundrobin' (members without a recorded strategy, JVM members such as jvm,
use one of those)
>>> strategy_refusals({"jvm": None, "z": "roundrobin"}, ["jvm", "z"])
({}, 'roundrobin')
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["LEGACY_STRATEGIES", "strategy_refusals"]

#: What a member without a recorded strategy may be using.
LEGACY_STRATEGIES = ("range", "roundrobin")


def strategy_refusals(
    strategies: Mapping[str, str | None], registration_order: Sequence[str]
) -> tuple[dict[str, str], str | None]:
    """(refused member -> the group's strategy as the error should name it, the group's
    strategy or None when only unrecorded members set it).

    ``strategies``: consumer id -> recorded strategy (None: no record);
    ``registration_order``: the consumer ids from the earliest registered.
    """
    ordered = [cid for cid in registration_order if cid in strategies]
    known = set(ordered)
    ordered += sorted(cid for cid in strategies if cid not in known)
    unrecorded = [cid for cid in ordered if strategies[cid] is None]
    recorded = [(cid, s) for cid in ordered if (s := strategies[cid]) is not None]
    if unrecorded:
        recorded = [(cid, s) for cid, s in recorded if s in LEGACY_STRATEGIES]
    if recorded:
        first, group = recorded[0]
        described = f"{group!r} (the strategy of the group's first member {first})"
    else:
        group = None
        described = (" or ".join(repr(s) for s in LEGACY_STRATEGIES)
                     + " (members without a recorded strategy, JVM members such as "
                     + f"{unrecorded[0] if unrecorded else '?'}, use one of those)")
    refused = {
        cid: described for cid, s in strategies.items()
        if s is not None and s != group and not (group is None and s in LEGACY_STRATEGIES)
    }
    return refused, group
