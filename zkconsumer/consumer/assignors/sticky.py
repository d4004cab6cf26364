"""The ``sticky`` strategy: balanced rendezvous hashing, for groups of zkconsumer members only.

Without a coordinator every member computes the whole group's assignment from what it reads
in ZooKeeper, so the strategy must be a pure function of (threads, partitions) that every
member computes alike, whatever order it reads them in. It must also be balanced (per topic,
each thread gets ``P // T`` partitions or one more) and move few partitions when a member
joins or leaves. The choice: **rendezvous (highest-random-weight) hashing with quotas**.

1. Every (partition, thread) pair of a topic gets a score: the first 8 bytes of
   BLAKE2b(``"<topic>\\0<partition>\\0<thread id>"``), an unsigned 64-bit integer (the same on
   every machine and Python version, unlike ``hash()``).
2. Quotas: with ``P`` partitions and ``T`` threads, ``q, r = divmod(P, T)``; the ``r``
   threads with the lowest BLAKE2b(``"<topic>\\0<thread id>"``) get ``q + 1``, the others ``q``.
3. Pairs are taken from the highest score down (ties, which need a 64-bit collision, by
   partition then thread id); a pair is taken when its partition is still unassigned and its
   thread below its quota. This is the stable matching in which partitions and threads rank
   each other by the same score, so it does not depend on the order of the inputs (computed
   by deferred acceptance, which finds the same matching without sorting every pair).

Without quotas, step 3 gives every partition to its highest-scoring thread: plain rendezvous
hashing, where a join moves only what the newcomer takes and a leave only the leaver's
partitions, the minimum. The quotas cost extra moves: a partition kept from its first choice
by a full thread may land elsewhere once the quotas change. Measured over 1,000 random
groups at 10 single-thread members x 100 partitions (``tests/unit/test_assignors.py`` pins these
bounds over 200 of them): a join moves 9 to 20 partitions (mean 14.5; the minimum is 9 or
10, what the newcomer must take; range moves 25 to 55, roundrobin 90 to 100), and a leave
moves the leaver's 10 and 0 to 11 others (mean 5.1; range moves 19 to 44 others,
roundrobin 72 to 81). These are measured bounds, not proven ones.

Why not the minimum every time: "a leave moves only the leaver's partitions", for every
member and every subset of members, makes each partition's owner the first present thread of
a fixed per-partition order (a choice function consistent under removal is the maximum of a
linear order): rendezvous hashing without quotas, whose shares, with orders from a hash, are
binomial rather than balanced. No choice of orders is balanced for every set of threads
either: colour each pair of thread ids by the partitions whose order puts the first before
the second; by Ramsey's theorem some three ids t, u, v have pairs of one colour, and in the
group of those three u owns nothing (docs/rebalance.md spells it out). Balance needs the
quotas, and the quotas cost the extra moves; exact balance with minimal movement needs
memory of the previous assignment, which a coordinator keeps and this group has not.

Thread ids ``a-0`` .. ``d-0`` sharing 10 partitions: 2 or 3 each, whatever the input order:

>>> threads = ["a-0", "b-0", "c-0", "d-0"]
>>> a = sticky_assign({"t": threads}, {"t": range(10)})
>>> {t: [tp.partition for tp in sorted(a) if a[tp] == t] for t in threads}
{'a-0': [1, 8], 'b-0': [2, 4, 9], 'c-0': [5, 6, 7], 'd-0': [0, 3]}
>>> a == sticky_assign({"t": list(reversed(threads))}, {"t": [9, 8, 7, 6, 5, 4, 3, 2, 1, 0]})
True

``e-0`` joins: it takes partitions 4 and 7 from the two members that had 3, and nothing
else moves (the minimum). ``a-0`` leaves: its partitions 1 and 8 move, and so does 5, as
the quotas change (one partition more than the minimum):

>>> joined = sticky_assign({"t": threads + ["e-0"]}, {"t": range(10)})
>>> [(tp.partition, a[tp], joined[tp]) for tp in sorted(a) if joined[tp] != a[tp]]
[(4, 'b-0', 'e-0'), (7, 'c-0', 'e-0')]
>>> left = sticky_assign({"t": threads[1:]}, {"t": range(10)})
>>> [(tp.partition, a[tp], left[tp]) for tp in sorted(a) if left[tp] != a[tp]]
[(1, 'a-0', 'c-0'), (5, 'c-0', 'd-0'), (8, 'a-0', 'c-0')]
"""

from __future__ import annotations

import hashlib
import heapq
from array import array
from collections.abc import Iterable, Mapping
from functools import lru_cache

from zkconsumer._types import TopicPartition

__all__ = ["sticky_assign", "sticky_topic"]


def _score(*parts: str) -> int:
    """An unsigned 64-bit hash of ``parts`` joined by NUL, the same everywhere."""
    data = "\0".join(parts).encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


#: Score columns kept between rebalances (8 bytes per partition each: 2 MB at 1,000
#: partitions), enough for every thread of a group of hundreds on a few topics.
_COLUMNS_KEPT = 256


@lru_cache(maxsize=_COLUMNS_KEPT)
def _column(topic: str, thread: str, partitions: tuple[int, ...]) -> array[int]:
    """Step 1 for one thread: its score with each of ``partitions``, in their order. Kept (an
    LRU of :data:`_COLUMNS_KEPT` columns): threads outlive rebalances, so a rebalance hashes
    only the threads it has not seen (at 50 threads x 1,000 partitions, 8 ms instead of 50
    per member and rebalance)."""
    tail = thread.encode("utf-8", "surrogatepass")
    blake2b = hashlib.blake2b
    return array("Q", (
        int.from_bytes(blake2b(f"{topic}\0{p}\0".encode("utf-8", "surrogatepass") + tail,
                               digest_size=8).digest(), "big")
        for p in partitions))


def _quotas(topic: str, threads: list[str], partitions: int) -> dict[str, int]:
    """``q + 1`` for the ``r`` threads with the lowest score of (topic, thread), else ``q``."""
    q, r = divmod(partitions, len(threads))
    ranked = sorted(threads, key=lambda t: (_score(topic, t), t))
    return {t: q + (1 if i < r else 0) for i, t in enumerate(ranked)}


def sticky_topic(topic: str, threads: Iterable[str], partitions: Iterable[int]) -> dict[int, str]:
    """Partition -> thread for one topic (see the module docstring); {} without threads.

    >>> sticky_topic("t", ["x-0"], [3, 1])
    {1: 'x-0', 3: 'x-0'}
    >>> sticky_topic("t", [], [0])
    {}
    """
    thread_list = sorted(set(threads))
    part_list = tuple(sorted(set(partitions)))
    if not thread_list or not part_list:
        return {}
    quota = _quotas(topic, thread_list, len(part_list))
    caps = [quota[t] for t in thread_list]
    # Step 3 as deferred acceptance, which gives the same matching as taking the pairs from
    # the best score down (both sides rank by one strict order of the pairs: score
    # descending, then partition, then thread), without sorting every pair: each partition
    # proposes to its threads best first; a thread over its quota lets its worst pair go.
    rows = list(zip(*(_column(topic, t, part_list) for t in thread_list), strict=True))
    # Each partition's thread indices, worst first (popped from the end: best first); the
    # sort is stable, so of two equal scores the lower thread index comes out first.
    indices = range(len(thread_list))
    prefs = [sorted(indices, key=row.__getitem__) for row in rows]
    # Per thread, a min-heap of (score, -partition index): its worst pair on top.
    held: list[list[tuple[int, int]]] = [[] for _ in thread_list]
    free = list(range(len(part_list)))
    while free:
        i = free.pop()
        j = prefs[i].pop()
        heapq.heappush(held[j], (rows[i][j], -i))
        if len(held[j]) > caps[j]:
            free.append(-heapq.heappop(held[j])[1])
    out: dict[int, str] = {}
    for j, pairs in enumerate(held):
        for _, neg_i in pairs:
            out[part_list[-neg_i]] = thread_list[j]
    return dict(sorted(out.items()))


def sticky_assign(
    consumers_for_topic: Mapping[str, Iterable[str]],
    partitions_for_topic: Mapping[str, Iterable[int]],
) -> dict[TopicPartition, str]:
    """The ``sticky`` strategy over every topic, with the assignors' common signature
    (see :mod:`~zkconsumer.consumer.assignors.core`):
    topics are assigned independently of each other.

    >>> sticky_assign({"t": ["x-0"], "u": ["x-0"]}, {"t": [0], "v": [0]})
    {TopicPartition(topic='t', partition=0): 'x-0'}
    """
    assignment: dict[TopicPartition, str] = {}
    for topic, threads in consumers_for_topic.items():
        owners = sticky_topic(topic, threads, partitions_for_topic.get(topic, ()))
        for p, thread in owners.items():
            assignment[TopicPartition(topic, p)] = thread
    return assignment
