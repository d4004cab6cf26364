"""Partition assignors of the legacy ZooKeeper consumer, as pure functions.

These reproduce, result for result, the Scala assignors of Kafka 0.10.2
(``kafka.consumer.RangeAssignor`` and ``kafka.consumer.RoundRobinAssignor``), so that a
zkconsumer member and a JVM member of the same group compute the same global assignment
from the same ZooKeeper view. Nothing here touches ZooKeeper: the inputs are plain data.

Both assignors take the same two mappings:

``consumers_for_topic``
    topic -> the thread ids (``"<consumer id>-<n>"``) of every group member subscribed
    to it, in any order (duplicates are ignored).
``partitions_for_topic``
    topic -> its partition numbers, in any order (duplicates are ignored).

and return the global assignment ``{TopicPartition: owning thread id}``, covering every
partition of every topic that has at least one consumer thread. Topics without a
consumer thread, or without partitions, contribute nothing.

Ordering rules (where a naive port goes wrong):

* thread ids sort **as strings**, the way Java's ``String.compareTo`` orders them
  (UTF-16 code units), so ``"c-10"`` sorts before ``"c-2"``;
* partitions sort as numbers (range);
* roundrobin deals topic-partitions in the order of the Java ``String.hashCode`` of
  ``"[topic,partition]"``, a signed 32-bit integer, *not* in numeric order.

>>> range_assign({"t": ["C1-0", "C1-1", "C2-0", "C2-1"]}, {"t": range(5)})[TopicPartition("t", 1)]
'C1-0'
>>> sorted(roundrobin_assign({"t": ["c0-0"]}, {"t": [0]}).items())
[(TopicPartition(topic='t', partition=0), 'c0-0')]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from zkconsumer._types import TopicPartition
from zkconsumer.consumer.assignors.sticky import sticky_assign

__all__ = [
    "ASSIGNORS",
    "Assignor",
    "assign",
    "consumer_id_of_thread",
    "java_string_hashcode",
    "jvm_partition_name",
    "partitions_for_thread",
    "partitions_owned_by_consumer",
    "range_assign",
    "roundrobin_assign",
]

Assignor = Callable[
    [Mapping[str, Iterable[str]], Mapping[str, Iterable[int]]], dict[TopicPartition, str]
]
"""The common signature of :func:`range_assign` and :func:`roundrobin_assign`."""


def java_string_hashcode(s: str) -> int:
    """Return Java's ``String.hashCode`` of ``s``: a signed 32-bit integer.

    ``s[0]*31**(n-1) + s[1]*31**(n-2) + ... + s[n-1]`` over the UTF-16 code units of the
    string, with Java ``int`` overflow. A character outside the Basic Multilingual Plane
    counts as its two surrogate code units, as in Java.

    >>> java_string_hashcode("")
    0
    >>> java_string_hashcode("hello")
    99162322
    >>> java_string_hashcode("polygenelubricants")
    -2147483648
    >>> java_string_hashcode("[t,10]")
    -1581226645
    >>> java_string_hashcode("\\U0001F600")  # one code point, two UTF-16 code units
    1772899
    """
    data = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def _java_order(s: str) -> bytes:
    """Sort key giving Java's ``String.compareTo`` order (by UTF-16 code units).

    Python compares strings by code point, which differs from Java only when a
    non-BMP character meets one in U+E000..U+FFFF; big-endian UTF-16 bytes compare
    exactly like Java's code units (a proper prefix sorts first in both).
    """
    return s.encode("utf-16-be", "surrogatepass")


def _sorted_threads(threads: Iterable[str]) -> list[str]:
    return sorted(set(threads), key=_java_order)


def _subscribed_topics(
    consumers_for_topic: Mapping[str, Iterable[str]],
    partitions_for_topic: Mapping[str, Iterable[int]],
) -> dict[str, tuple[list[str], list[int]]]:
    """topic -> (its threads sorted as strings, its partitions sorted as numbers).

    Only topics with at least one thread and at least one partition are kept.
    Every input iterable is consumed exactly once.
    """
    result: dict[str, tuple[list[str], list[int]]] = {}
    for topic, threads in consumers_for_topic.items():
        thread_list = _sorted_threads(threads)
        partitions = sorted(set(partitions_for_topic.get(topic, ())))
        if thread_list and partitions:
            result[topic] = (thread_list, partitions)
    return result


def range_assign(
    consumers_for_topic: Mapping[str, Iterable[str]],
    partitions_for_topic: Mapping[str, Iterable[int]],
) -> dict[TopicPartition, str]:
    """The ``range`` strategy: consecutive ranges of partitions, topic by topic.

    For each topic, lay the partitions out in numeric order and the subscribed threads
    in string order; with ``p`` partitions and ``c`` threads each thread gets ``p // c``
    consecutive partitions and the first ``p % c`` threads one extra. The thread at
    position ``i`` starts at ``(p // c) * i + min(i, p % c)``. Threads past the last
    partition get nothing. Topics are independent of each other.

    Consumers C1 and C2 with two threads each, one topic of five partitions
    (the example from the Scala source):

    >>> a = range_assign({"t": ["C2-1", "C1-0", "C2-0", "C1-1"]}, {"t": [4, 3, 2, 1, 0]})
    >>> [a[TopicPartition("t", p)] for p in range(5)]
    ['C1-0', 'C1-0', 'C1-1', 'C2-0', 'C2-1']

    Seven partitions, five single-thread consumers: 7 // 5 = 1 each, 7 % 5 = 2 extra
    for the first two, so c0 {0,1}, c1 {2,3}, c2 {4}, c3 {5}, c4 {6}:

    >>> a = range_assign({"t": [f"c{i}-0" for i in range(5)]}, {"t": range(7)})
    >>> partitions_for_thread(a, ["c0-0", "c1-0", "c4-0"])["c1-0"]
    [TopicPartition(topic='t', partition=2), TopicPartition(topic='t', partition=3)]

    Threads sort as strings: with threads ``c-0`` .. ``c-11`` the order is
    ``c-0, c-1, c-10, c-11, c-2, ...``, so ``c-10`` gets partition 2:

    >>> range_assign({"t": [f"c-{i}" for i in range(12)]}, {"t": range(12)})[TopicPartition("t", 2)]
    'c-10'
    """
    assignment: dict[TopicPartition, str] = {}
    for topic, (threads, partitions) in _subscribed_topics(
        consumers_for_topic, partitions_for_topic
    ).items():
        per_thread, extra = divmod(len(partitions), len(threads))
        for pos, thread in enumerate(threads):
            start = per_thread * pos + min(pos, extra)
            count = per_thread + (1 if pos < extra else 0)
            for partition in partitions[start : start + count]:
                assignment[TopicPartition(topic, partition)] = thread
    return assignment


def jvm_partition_name(tp: TopicPartition, dashed: bool = False) -> str:
    """The JVM's ``TopicAndPartition.toString``, whose hash orders roundrobin's dealing:
    ``[topic,partition]`` up to Kafka 0.11, ``topic-partition`` from 1.0.0 (KAFKA-5822).

    >>> t = TopicPartition("t", 3)
    >>> jvm_partition_name(t), jvm_partition_name(t, dashed=True)
    ('[t,3]', 't-3')
    """
    return f"{tp.topic}-{tp.partition}" if dashed else f"[{tp.topic},{tp.partition}]"


def roundrobin_assign(
    consumers_for_topic: Mapping[str, Iterable[str]],
    partitions_for_topic: Mapping[str, Iterable[int]],
    *,
    dashed_names: bool = False,
) -> dict[TopicPartition, str]:
    """The ``roundrobin`` strategy: deal all topic-partitions to all threads in a circle.

    1. All thread ids of all topics, deduplicated and sorted as strings, form a circle.
    2. All topic-partitions of the subscribed topics are sorted by
       ``java_string_hashcode(str(tp))`` of ``"[topic,partition]"`` (signed; ties, which
       need a hash collision, are broken by topic and then partition number); with
       ``dashed_names`` of ``"topic-partition"``, as Kafka 1.0.0 to 1.1.1 do
       (``jvm.compatibility``). Scala's
       stable sort matches this within one topic; for a collision across topics it kept
       its HashMap's iteration order, which cannot be reproduced here.
    3. Each partition in turn goes to the next thread of the circle that is subscribed
       to its topic; threads not subscribed to it are passed over, and the next
       partition continues after the chosen thread (Scala's
       ``circularIterator.dropWhile(notSubscribed).next``).

    With identical subscriptions, every thread ends with the same number of
    partitions, give or take one.

    Topic ``t`` of 7 partitions, single-thread consumers c0..c2. For one-digit
    partitions of one topic the hash order is the numeric order:

    >>> a = roundrobin_assign({"t": ["c2-0", "c0-0", "c1-0"]}, {"t": range(7)})
    >>> {c: [tp.partition for tp in tps]
    ...  for c, tps in partitions_for_thread(a, ["c0-0", "c1-0", "c2-0"]).items()}
    {'c0-0': [0, 3, 6], 'c1-0': [1, 4], 'c2-0': [2, 5]}

    With 12 partitions the hashes of ``"[t,10]"`` and ``"[t,11]"`` overflow to negative
    numbers, so the dealing order is 10, 11, 0, 1, ..., 9:

    >>> a = roundrobin_assign({"t": ["c0-0", "c1-0", "c2-0"]}, {"t": range(12)})
    >>> [a[TopicPartition("t", p)] for p in (10, 11, 0, 1)]
    ['c0-0', 'c1-0', 'c2-0', 'c0-0']
    """
    topics = _subscribed_topics(consumers_for_topic, partitions_for_topic)
    if not topics:
        return {}
    subscribers = {topic: frozenset(threads) for topic, (threads, _) in topics.items()}
    circle = _sorted_threads(t for threads, _ in topics.values() for t in threads)
    ordered = sorted(
        (TopicPartition(topic, p) for topic, (_, parts) in topics.items() for p in parts),
        key=lambda tp: (java_string_hashcode(jvm_partition_name(tp, dashed_names)),
                        _java_order(tp.topic), tp.partition),
    )
    assignment: dict[TopicPartition, str] = {}
    pos = 0
    for tp in ordered:
        wanted = subscribers[tp.topic]  # never empty, so the scan below terminates
        while circle[pos] not in wanted:
            pos = (pos + 1) % len(circle)
        assignment[tp] = circle[pos]
        pos = (pos + 1) % len(circle)
    return assignment


ASSIGNORS: dict[str, Assignor] = {
    "range": range_assign,
    "roundrobin": roundrobin_assign,
    # zkconsumer-only (see _sticky.py): never in a group with JVM members.
    "sticky": sticky_assign,
}
"""The strategies accepted by ``partition.assignment.strategy``, by name."""


def assign(
    strategy: str,
    consumers_for_topic: Mapping[str, Iterable[str]],
    partitions_for_topic: Mapping[str, Iterable[int]],
    *,
    dashed_names: bool = False,
) -> dict[TopicPartition, str]:
    """Run the assignor named ``strategy`` (``"range"``, ``"roundrobin"`` or ``"sticky"``);
    ``dashed_names`` goes to roundrobin (see :func:`roundrobin_assign`).

    >>> assign("range", {"t": ["c-0"]}, {"t": [0]})
    {TopicPartition(topic='t', partition=0): 'c-0'}
    >>> assign("fair", {}, {})
    Traceback (most recent call last):
    ...
    ValueError: unknown partition.assignment.strategy 'fair' (expected 'range' or
    'roundrobin' or 'sticky')
    """
    try:
        assignor = ASSIGNORS[strategy]
    except KeyError:
        expected = " or ".join(repr(name) for name in ASSIGNORS)
        raise ValueError(
            f"unknown partition.assignment.strategy {strategy!r} (expected {expected})"
        ) from None
    if assignor is roundrobin_assign:
        return roundrobin_assign(consumers_for_topic, partitions_for_topic,
                                 dashed_names=dashed_names)
    return assignor(consumers_for_topic, partitions_for_topic)


def _is_thread_number(s: str) -> bool:
    return s.isascii() and s.isdigit()


def consumer_id_of_thread(thread_id: str) -> str:
    """The consumer id of a thread id ``"<consumer id>-<n>"``.

    Consumer ids contain dashes themselves; only the last one separates the thread
    number.

    >>> consumer_id_of_thread("g_host-1494000000000-1a2b3c4d-10")
    'g_host-1494000000000-1a2b3c4d'
    """
    consumer_id, sep, number = thread_id.rpartition("-")
    if not sep or not consumer_id or not _is_thread_number(number):
        raise ValueError(f"not a consumer thread id: {thread_id!r}")
    return consumer_id


def partitions_for_thread(
    assignment: Mapping[TopicPartition, str], thread_ids: Iterable[str]
) -> dict[str, list[TopicPartition]]:
    """Invert ``assignment`` for the given threads: thread id -> its sorted partitions.

    Every thread id given appears in the result, with an empty list when it owns
    nothing; owners not among ``thread_ids`` are left out.

    >>> t0, t1, u0 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)
    >>> a = {t1: "c-0", t0: "c-0", u0: "x-0"}
    >>> for thread, tps in partitions_for_thread(a, ["c-0", "c-1"]).items():
    ...     print(thread, [str(tp) for tp in tps])
    c-0 ['[t,0]', '[t,1]']
    c-1 []
    """
    result: dict[str, list[TopicPartition]] = {t: [] for t in thread_ids}
    for tp, owner in assignment.items():
        owned = result.get(owner)
        if owned is not None:
            owned.append(tp)
    for owned in result.values():
        owned.sort()
    return result


def partitions_owned_by_consumer(
    assignment: Mapping[TopicPartition, str], consumer_id: str
) -> dict[TopicPartition, str]:
    """The part of ``assignment`` owned by threads of ``consumer_id``, sorted by partition.

    This is what one member acts on after computing the global assignment (the Scala
    ``partitionAssignment.get(consumerId)``). A thread belongs to ``consumer_id`` when it
    is ``"<consumer_id>-<n>"``; a longer consumer id sharing the prefix does not match.

    >>> a = {TopicPartition("t", 0): "g_c-1-0", TopicPartition("t", 1): "g_c-0"}
    >>> partitions_owned_by_consumer(a, "g_c")
    {TopicPartition(topic='t', partition=1): 'g_c-0'}
    """
    prefix = consumer_id + "-"
    return {
        tp: owner
        for tp, owner in sorted(assignment.items())
        if owner.startswith(prefix) and _is_thread_number(owner[len(prefix) :])
    }
