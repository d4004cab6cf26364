"""Tests of zkconsumer.consumer.assignors.core against the Kafka 0.10.2 Scala assignors."""

from __future__ import annotations

import doctest
import itertools
import random
from collections import Counter
from collections.abc import Callable, Iterable, Mapping

import pytest

from zkconsumer._types import TopicPartition
from zkconsumer.consumer.assignors import core as _assignors
from zkconsumer.consumer.assignors.core import (
    ASSIGNORS,
    assign,
    consumer_id_of_thread,
    java_string_hashcode,
    partitions_for_thread,
    partitions_owned_by_consumer,
    range_assign,
    roundrobin_assign,
)

TP = TopicPartition


def owned(assignment: Mapping[TopicPartition, str], thread: str) -> list[tuple[str, int]]:
    """The (topic, partition) pairs owned by ``thread``, sorted."""
    return sorted((tp.topic, tp.partition) for tp, owner in assignment.items() if owner == thread)


def by_thread(assignment: Mapping[TopicPartition, str]) -> dict[str, list[int]]:
    """Single-topic view: thread -> sorted partition numbers."""
    result: dict[str, list[int]] = {}
    for tp, owner in assignment.items():
        result.setdefault(owner, []).append(tp.partition)
    return {owner: sorted(parts) for owner, parts in sorted(result.items())}


# --------------------------------------------------------------------------------------
# java_string_hashcode
# --------------------------------------------------------------------------------------

# Values printed by String.hashCode() on OpenJDK 17.
JAVA_HASHES = [
    ("", 0),
    ("hello", 99162322),
    ("polygenelubricants", -2147483648),  # Integer.MIN_VALUE
    ("[t,0]", 87540032),
    ("[t,9]", 87540311),
    ("[t,10]", -1581226645),
    ("[t,11]", -1581226614),
    ("[x,0]", 87659196),
    ("[y,0]", 87688987),
    ("[my-topic,3]", 1865677805),
    ("\u00e9t\u00e9", 227742),  # BMP, non-ASCII
    ("\U0001f600", 1772899),  # one code point, a surrogate pair in UTF-16
    ("a\U0001f600b", 57849694),
]


@pytest.mark.parametrize(("s", "expected"), JAVA_HASHES)
def test_java_string_hashcode_known_values(s: str, expected: int) -> None:
    assert java_string_hashcode(s) == expected


def test_java_string_hashcode_by_hand() -> None:
    # "[t,0]" = 91*31^4 + 116*31^3 + 44*31^2 + 48*31 + 93
    #         = 84040411 + 3455756 + 42284 + 1488 + 93 = 87540032
    assert java_string_hashcode("[t,0]") == 91 * 31**4 + 116 * 31**3 + 44 * 31**2 + 48 * 31 + 93
    # "[t,10]" = 91*31^5 + 116*31^4 + 44*31^3 + 49*31^2 + 48*31 + 93 = 2713740651,
    # past 2^31 - 1, so the Java int wraps to 2713740651 - 2^32 = -1581226645.
    unwrapped = 91 * 31**5 + 116 * 31**4 + 44 * 31**3 + 49 * 31**2 + 48 * 31 + 93
    assert unwrapped == 2713740651
    assert java_string_hashcode("[t,10]") == unwrapped - 2**32 == -1581226645


def _reference_hash(s: str) -> int:
    """Independent formulation: the polynomial over UTF-16 units with big ints, then wrap."""
    data = s.encode("utf-16-le", "surrogatepass")
    units = [int.from_bytes(data[i : i + 2], "little") for i in range(0, len(data), 2)]
    n = len(units)
    value = int(sum(u * 31 ** (n - 1 - i) for i, u in enumerate(units))) % 2**32
    return value - 2**32 if value >= 2**31 else value


def test_java_string_hashcode_matches_reference_on_random_strings() -> None:
    rng = random.Random(1234)
    alphabet = "abcXYZ019[],-_.\u00e9\u4e2d\uffff\U0001f600\U00010000"
    for _ in range(300):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))
        h = java_string_hashcode(s)
        assert -(2**31) <= h < 2**31
        assert h == _reference_hash(s)


def test_java_string_hashcode_lone_surrogate() -> None:
    # Java strings may hold unpaired surrogates; they hash as their code unit.
    assert java_string_hashcode("\ud800") == 0xD800


# --------------------------------------------------------------------------------------
# range: worked examples
# --------------------------------------------------------------------------------------


def test_range_two_consumers_two_threads_five_partitions() -> None:
    # Scala RangeAssignor doc: p0,p1 -> C1-0; p2 -> C1-1; p3 -> C2-0; p4 -> C2-1.
    a = range_assign({"t": ["C2-1", "C1-1", "C2-0", "C1-0"]}, {"t": [3, 1, 4, 0, 2]})
    assert a == {
        TP("t", 0): "C1-0",
        TP("t", 1): "C1-0",
        TP("t", 2): "C1-1",
        TP("t", 3): "C2-0",
        TP("t", 4): "C2-1",
    }


def test_range_seven_partitions_five_consumers() -> None:
    a = range_assign({"t": [f"c{i}-0" for i in range(5)]}, {"t": range(7)})
    assert by_thread(a) == {
        "c0-0": [0, 1],
        "c1-0": [2, 3],
        "c2-0": [4],
        "c3-0": [5],
        "c4-0": [6],
    }


def test_range_threads_sort_as_strings() -> None:
    threads = [f"c-{i}" for i in range(12)]
    # String order: c-0, c-1, c-10, c-11, c-2, c-3, ..., c-9.
    a = range_assign({"t": threads}, {"t": range(14)})
    # 14 partitions over 12 threads: 1 each, the first 2 in string order (c-0, c-1) get 2.
    assert by_thread(a) == {
        "c-0": [0, 1],
        "c-1": [2, 3],
        "c-10": [4],
        "c-11": [5],
        "c-2": [6],
        "c-3": [7],
        "c-4": [8],
        "c-5": [9],
        "c-6": [10],
        "c-7": [11],
        "c-8": [12],
        "c-9": [13],
    }


def test_range_consumer_ids_sort_as_strings_too() -> None:
    # Whole thread ids compare as strings: "g_c10-0" < "g_c2-0".
    a = range_assign({"t": ["g_c2-0", "g_c10-0"]}, {"t": range(3)})
    assert by_thread(a) == {"g_c10-0": [0, 1], "g_c2-0": [2]}


def test_range_partitions_sort_as_numbers() -> None:
    # Not "0, 1, 10, 11, 2, ...": the first thread gets the numerically lowest half.
    partitions = [10, 2, 11, 0, 1, 3, 4, 5, 6, 7, 8, 9]
    a = range_assign({"t": ["c-0", "c-1"]}, {"t": partitions})
    assert by_thread(a) == {"c-0": [0, 1, 2, 3, 4, 5], "c-1": [6, 7, 8, 9, 10, 11]}


def test_range_non_contiguous_partition_numbers() -> None:
    a = range_assign({"t": ["c-0", "c-1"]}, {"t": [7, 30, 2]})
    assert a == {TP("t", 2): "c-0", TP("t", 7): "c-0", TP("t", 30): "c-1"}


def test_range_more_threads_than_partitions() -> None:
    a = range_assign({"t": ["c-0", "c-1", "c-2", "c-3"]}, {"t": range(2)})
    assert a == {TP("t", 0): "c-0", TP("t", 1): "c-1"}


def test_range_java_string_order_not_code_point_order() -> None:
    # Java compares UTF-16 code units: the surrogate 0xD83D of U+1F600 sorts before
    # U+FF21, while Python's code-point order puts U+FF21 first. OpenJDK 17 sorts
    # ["c-\uff21", "c-\U0001f600", "c-10", "c-2"] as [c-10, c-2, c-\U0001f600, c-\uff21].
    threads = ["c-\uff21", "c-\U0001f600", "c-10", "c-2"]
    a = range_assign({"t": threads}, {"t": range(4)})
    assert [a[TP("t", p)] for p in range(4)] == ["c-10", "c-2", "c-\U0001f600", "c-\uff21"]


def test_range_per_topic_with_different_subscriptions() -> None:
    # Seed 000's example: t1 (5 partitions) for c0..c2, t2 (7 partitions) for c0..c4.
    a = range_assign(
        {"t1": ["c0-0", "c1-0", "c2-0"], "t2": [f"c{i}-0" for i in range(5)]},
        {"t1": range(5), "t2": range(7)},
    )
    assert owned(a, "c0-0") == [("t1", 0), ("t1", 1), ("t2", 0), ("t2", 1)]
    assert owned(a, "c1-0") == [("t1", 2), ("t1", 3), ("t2", 2), ("t2", 3)]
    assert owned(a, "c2-0") == [("t1", 4), ("t2", 4)]
    assert owned(a, "c3-0") == [("t2", 5)]
    assert owned(a, "c4-0") == [("t2", 6)]


# --------------------------------------------------------------------------------------
# roundrobin: worked examples
# --------------------------------------------------------------------------------------


def test_roundrobin_seven_partitions_three_consumers() -> None:
    # Hashes of "[t,0]".."[t,6]" increase with the partition: numeric order.
    a = roundrobin_assign({"t": ["c2-0", "c0-0", "c1-0"]}, {"t": range(7)})
    assert by_thread(a) == {"c0-0": [0, 3, 6], "c1-0": [1, 4], "c2-0": [2, 5]}


def test_roundrobin_twelve_partitions_uses_java_hash_order() -> None:
    # "[t,10]" and "[t,11]" hash to negative numbers (overflow), so the dealing order is
    # 10, 11, 0, 1, ..., 9: c0 {10,1,4,7}, c1 {11,2,5,8}, c2 {0,3,6,9}.
    assert java_string_hashcode("[t,10]") < java_string_hashcode("[t,11]") < 0
    a = roundrobin_assign({"t": ["c0-0", "c1-0", "c2-0"]}, {"t": range(12)})
    assert by_thread(a) == {
        "c0-0": [1, 4, 7, 10],
        "c1-0": [2, 5, 8, 11],
        "c2-0": [0, 3, 6, 9],
    }
    # A numeric-order port would have given c0-0 {0,3,6,9}.
    assert a[TP("t", 0)] != "c0-0"


def test_roundrobin_threads_sort_as_strings() -> None:
    threads = [f"c-{i}" for i in range(12)]
    a = roundrobin_assign({"t": threads}, {"t": range(10)})
    # Circle in string order: c-0, c-1, c-10, c-11, c-2, ..., c-9; partitions 0..9 are
    # dealt in numeric order (one-digit partitions), so c-10 gets 2 and c-9 nothing.
    circle = ["c-0", "c-1", "c-10", "c-11", "c-2", "c-3", "c-4", "c-5", "c-6", "c-7"]
    assert [a[TP("t", p)] for p in range(10)] == circle
    assert "c-8" not in a.values() and "c-9" not in a.values()


def test_roundrobin_multi_topic_skips_unsubscribed_threads() -> None:
    # Consumers a, b, c with one thread each. Topic x (3 partitions): all three;
    # topic y (4 partitions): only a-0 and c-0.
    #
    # Hashes ('['=91, ','=44, ']'=93, '0'=48, 'x'=120, 'y'=121):
    #   "[x,p]" = 91*31^4 + 120*31^3 + 44*31^2 + (48+p)*31 + 93 = 87659196 + 31p
    #   "[y,p]" = "[x,p]" + 31^3 = 87688987 + 31p
    # so the dealing order is x0, x1, x2, y0, y1, y2, y3. Circle: a-0, b-0, c-0.
    #   x0 -> a-0        (next: b-0)
    #   x1 -> b-0        (next: c-0)
    #   x2 -> c-0        (next: a-0)
    #   y0 -> a-0        (next: b-0)
    #   y1: b-0 skipped -> c-0 (next: a-0)
    #   y2 -> a-0        (next: b-0)
    #   y3: b-0 skipped -> c-0
    # a-0 {x0, y0, y2}; b-0 {x1}; c-0 {x2, y1, y3}.
    assert java_string_hashcode("[x,2]") == 87659196 + 2 * 31
    assert java_string_hashcode("[y,0]") == 87688987
    a = roundrobin_assign(
        {"x": ["c-0", "b-0", "a-0"], "y": ["c-0", "a-0"]},
        {"x": range(3), "y": range(4)},
    )
    assert owned(a, "a-0") == [("x", 0), ("y", 0), ("y", 2)]
    assert owned(a, "b-0") == [("x", 1)]
    assert owned(a, "c-0") == [("x", 2), ("y", 1), ("y", 3)]


def test_roundrobin_continues_after_the_chosen_thread() -> None:
    # Topic x (2 partitions) for a-0, b-0, c-0; topic y (2 partitions) for b-0 only.
    # Order x0, x1, y0, y1. x0 -> a-0, x1 -> b-0 (next: c-0); y0: c-0, a-0 skipped ->
    # b-0 (next: c-0); y1: c-0, a-0 skipped -> b-0.
    a = roundrobin_assign({"x": ["a-0", "b-0", "c-0"], "y": ["b-0"]}, {"x": [0, 1], "y": [0, 1]})
    assert a == {TP("x", 0): "a-0", TP("x", 1): "b-0", TP("y", 0): "b-0", TP("y", 1): "b-0"}


def test_roundrobin_interleaves_topics_by_hash() -> None:
    # Topics t (partitions 0..10) and u (partitions 0 and 10), threads c-0 and c-1.
    #   "[t,10]" = -1581226645, "[t,11]" would be -1581226614 (absent),
    #   "[u,10]" = "[t,10]" + 31^4 = -1580303124,
    #   "[t,p]"  = 87540032 + 31p for p <= 9, "[u,0]" = "[t,0]" + 31^3 = 87569823.
    # Dealing order: [t,10], [u,10], [t,0], ..., [t,9], [u,0]; alternately c-0, c-1.
    assert java_string_hashcode("[u,10]") == -1580303124
    assert java_string_hashcode("[u,0]") == 87569823
    a = roundrobin_assign(
        {"t": ["c-1", "c-0"], "u": ["c-0", "c-1"]}, {"t": range(11), "u": [10, 0]}
    )
    order = [TP("t", 10), TP("u", 10), *(TP("t", p) for p in range(10)), TP("u", 0)]
    assert sorted(a, key=lambda tp: java_string_hashcode(str(tp))) == order
    assert [a[tp] for tp in order] == ["c-0", "c-1"] * 6 + ["c-0"]
    assert a[TP("u", 0)] == "c-0" and a[TP("t", 9)] == "c-1"


# --------------------------------------------------------------------------------------
# assign / ASSIGNORS / helpers / edge cases
# --------------------------------------------------------------------------------------


def test_assignors_registry() -> None:
    assert set(ASSIGNORS) == {"range", "roundrobin", "sticky"}
    assert ASSIGNORS["range"] is range_assign
    assert ASSIGNORS["roundrobin"] is roundrobin_assign
    cft = {"t": ["c0-0", "c1-0", "c2-0"]}
    pft = {"t": range(12)}
    assert assign("range", cft, pft) == range_assign(cft, pft)
    assert assign("roundrobin", cft, pft) == roundrobin_assign(cft, pft)
    assert assign("range", cft, pft) != assign("roundrobin", cft, pft)


@pytest.mark.parametrize("strategy", ["", "fair", "Sticky", "Range", "ROUNDROBIN", " range"])
def test_assign_unknown_strategy(strategy: str) -> None:
    with pytest.raises(ValueError, match="partition.assignment.strategy"):
        assign(strategy, {"t": ["c-0"]}, {"t": [0]})


@pytest.mark.parametrize("assignor", [range_assign, roundrobin_assign])
def test_topics_without_threads_or_partitions_are_left_out(
    assignor: _assignors.Assignor,
) -> None:
    a = assignor(
        {"t": ["c-0"], "no-partitions": ["c-0"], "empty": [], "missing": ["c-0"]},
        {"t": [0, 1], "no-partitions": [], "empty": [0], "unsubscribed": [0, 1, 2]},
    )
    assert a == {TP("t", 0): "c-0", TP("t", 1): "c-0"}
    assert assignor({}, {"t": [0]}) == {}


@pytest.mark.parametrize("assignor", [range_assign, roundrobin_assign])
def test_accepts_one_shot_iterables(assignor: _assignors.Assignor) -> None:
    lists = {"x": ["a-0", "b-0", "c-0"], "y": ["c-0", "a-0"]}
    parts = {"x": [2, 0, 1], "y": [3, 1, 0, 2]}
    expected = assignor(lists, parts)
    gens_c = {t: (th for th in ths) for t, ths in lists.items()}
    gens_p = {t: iter(ps) for t, ps in parts.items()}
    assert assignor(gens_c, gens_p) == expected


@pytest.mark.parametrize("assignor", [range_assign, roundrobin_assign])
def test_duplicates_are_ignored(assignor: _assignors.Assignor) -> None:
    a = assignor({"t": ["c-1", "c-0", "c-1"]}, {"t": [0, 1, 1, 2, 0]})
    assert a == assignor({"t": ["c-0", "c-1"]}, {"t": [0, 1, 2]})


def test_partitions_for_thread() -> None:
    a = roundrobin_assign({"t": ["c0-0", "c1-0", "c2-0"]}, {"t": range(12)})
    result = partitions_for_thread(a, ["c2-0", "c0-0", "nobody-0"])
    assert list(result) == ["c2-0", "c0-0", "nobody-0"]
    assert result["c0-0"] == [TP("t", 1), TP("t", 4), TP("t", 7), TP("t", 10)]
    assert result["c2-0"] == [TP("t", p) for p in (0, 3, 6, 9)]
    assert result["nobody-0"] == []


def test_partitions_owned_by_consumer() -> None:
    consumer = "g_host-1494000000000-1a2b3c4d"
    threads = [f"{consumer}-{n}" for n in range(3)]
    other = "g_host-1494000000000-1a2b3c4d-1"  # a consumer id that extends ours
    a = range_assign({"t": [*threads, f"{other}-0"]}, {"t": range(8)})
    # As strings, "<consumer>-1" < "<consumer>-1-0" (= "<other>-0") < "<consumer>-2".
    mine = partitions_owned_by_consumer(a, consumer)
    assert mine == {
        TP("t", 0): f"{consumer}-0",
        TP("t", 1): f"{consumer}-0",
        TP("t", 2): f"{consumer}-1",
        TP("t", 3): f"{consumer}-1",
        TP("t", 6): f"{consumer}-2",
        TP("t", 7): f"{consumer}-2",
    }
    assert list(mine) == sorted(mine)
    # Thread "<other>-0" is "g_host-...-1a2b3c4d-1-0": it must not count as ours.
    assert partitions_owned_by_consumer(a, other) == {
        TP("t", 4): f"{other}-0",
        TP("t", 5): f"{other}-0",
    }
    assert partitions_owned_by_consumer(a, "g_host") == {}


def test_consumer_id_of_thread() -> None:
    assert consumer_id_of_thread("g_c-10") == "g_c"
    assert consumer_id_of_thread("g_h-1-2-3") == "g_h-1-2"
    for bad in ["nodash", "-0", "g_c-", "g_c-x", "g_c-\u0661"]:
        with pytest.raises(ValueError):
            consumer_id_of_thread(bad)


def test_docstring_examples() -> None:
    result = doctest.testmod(_assignors, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 10
    assert result.failed == 0


# --------------------------------------------------------------------------------------
# Randomized: oracles and invariants
# --------------------------------------------------------------------------------------


def _java_sorted(strings: Iterable[str]) -> list[str]:
    return sorted(set(strings), key=lambda s: s.encode("utf-16-be", "surrogatepass"))


def scala_roundrobin(
    cft: Mapping[str, list[str]], pft: Mapping[str, list[int]]
) -> dict[TopicPartition, str]:
    """A line-by-line transcription of the Scala RoundRobinAssignor, as an oracle."""
    consumers_for_topic = {t: ths for t, ths in cft.items() if ths}
    all_thread_ids = _java_sorted(t for ths in consumers_for_topic.values() for t in ths)
    thread_assignor = itertools.cycle(all_thread_ids)  # CoreUtils.circularIterator
    # partitionsForTopic has the numerically sorted partitions of every subscribed topic.
    all_topic_partitions = [
        TP(topic, p)
        for topic in sorted(consumers_for_topic)
        for p in sorted(set(pft.get(topic, [])))
    ]
    all_topic_partitions.sort(key=lambda tp: _reference_hash(str(tp)))  # stable sortWith(<)
    result: dict[TopicPartition, str] = {}
    for tp in all_topic_partitions:
        subscribed = consumers_for_topic[tp.topic]

        def not_subscribed(thread_id: str, subscribed: list[str] = subscribed) -> bool:
            return thread_id not in subscribed

        # Scala: threadAssignor.dropWhile(!subscribed).next -- consumes the skipped
        # threads and the chosen one from the shared circular iterator.
        result[tp] = next(itertools.dropwhile(not_subscribed, thread_assignor))
    return result


def scala_range(
    cft: Mapping[str, list[str]], pft: Mapping[str, list[int]]
) -> dict[TopicPartition, str]:
    """Range as the Scala code does it: indexOf position, startPart and nParts."""
    result: dict[TopicPartition, str] = {}
    for topic, threads in cft.items():
        cur_consumers = _java_sorted(threads)
        cur_partitions = sorted(set(pft.get(topic, [])))
        if not cur_consumers:
            continue
        n_parts_per_consumer = len(cur_partitions) // len(cur_consumers)
        n_consumers_with_extra_part = len(cur_partitions) % len(cur_consumers)
        for thread in cur_consumers:
            pos = cur_consumers.index(thread)
            start_part = n_parts_per_consumer * pos + min(pos, n_consumers_with_extra_part)
            n_parts = n_parts_per_consumer + (0 if pos + 1 > n_consumers_with_extra_part else 1)
            for i in range(start_part, start_part + n_parts):
                result[TP(topic, cur_partitions[i])] = thread
    return result


def random_group(
    rng: random.Random, identical: bool
) -> tuple[dict[str, list[str]], dict[str, list[int]]]:
    """A random group view: consumers with 1-13 threads, topics with 0-40 partitions."""
    n_consumers = rng.randint(1, 6)
    consumers = [f"g_c{rng.randrange(20)}x{i}" for i in range(n_consumers)]
    threads = {c: [f"{c}-{n}" for n in range(rng.choice([1, 1, 2, 3, 13]))] for c in consumers}
    prefixes = ["t", "topic", "my-topic", "a.b", "T_"]
    topics = [rng.choice(prefixes) + str(i) for i in range(rng.randint(1, 5))]
    pft: dict[str, list[int]] = {}
    for topic in topics:
        n = rng.choice([0, 1, 3, 7, 12, 25, 40])
        if rng.random() < 0.2:  # sparse partition numbers
            pft[topic] = rng.sample(range(100), n)
        else:
            pft[topic] = list(range(n))
    cft: dict[str, list[str]] = {}
    for topic in topics:
        subscribers = consumers if identical else [c for c in consumers if rng.random() < 0.6]
        if subscribers:
            cft[topic] = [th for c in subscribers for th in threads[c]]
    return cft, pft


def shuffled_copy(
    rng: random.Random, cft: Mapping[str, list[str]], pft: Mapping[str, list[int]]
) -> tuple[dict[str, list[str]], dict[str, list[int]]]:
    topics_c = list(cft)
    topics_p = list(pft)
    rng.shuffle(topics_c)
    rng.shuffle(topics_p)
    cft2 = {t: rng.sample(cft[t], len(cft[t])) for t in topics_c}
    pft2 = {t: rng.sample(pft[t], len(pft[t])) for t in topics_p}
    return cft2, pft2


CASES = 300
Oracle = Callable[[dict[str, list[str]], dict[str, list[int]]], dict[TopicPartition, str]]


@pytest.mark.parametrize(
    ("assignor", "oracle"), [(range_assign, scala_range), (roundrobin_assign, scala_roundrobin)]
)
def test_matches_scala_transcription(assignor: _assignors.Assignor, oracle: Oracle) -> None:
    rng = random.Random(20170221)
    for _ in range(CASES):
        cft, pft = random_group(rng, identical=rng.random() < 0.3)
        assert assignor(cft, pft) == oracle(cft, pft)


@pytest.mark.parametrize("strategy", sorted(ASSIGNORS))
def test_every_partition_owned_once_by_a_subscriber(strategy: str) -> None:
    rng = random.Random(len(strategy))
    for _ in range(CASES):
        cft, pft = random_group(rng, identical=False)
        a = assign(strategy, cft, pft)
        expected = {TP(t, p) for t, threads in cft.items() if threads for p in pft.get(t, [])}
        assert set(a) == expected  # every partition exactly once (dict keys), nothing else
        for tp, owner in a.items():
            assert owner in cft[tp.topic]


@pytest.mark.parametrize("strategy", sorted(ASSIGNORS))
def test_identical_subscriptions_are_balanced(strategy: str) -> None:
    rng = random.Random(7 + len(strategy))
    for _ in range(CASES):
        cft, pft = random_group(rng, identical=True)
        a = assign(strategy, cft, pft)
        all_threads = {th for threads in cft.values() for th in threads}
        if strategy in ("range", "sticky"):  # balanced topic by topic
            for topic, threads in cft.items():
                counts = Counter(owner for tp, owner in a.items() if tp.topic == topic)
                per_thread = [counts[th] for th in threads]
                assert max(per_thread) - min(per_thread) <= 1
                if strategy == "range":
                    # the extra partitions go to the first threads in string order
                    ordered = _java_sorted(threads)
                    assert [counts[th] for th in ordered] == sorted(per_thread, reverse=True)
        else:
            counts = Counter(a.values())
            per_thread = [counts[th] for th in all_threads]
            assert max(per_thread) - min(per_thread) <= 1


@pytest.mark.parametrize("strategy", sorted(ASSIGNORS))
def test_independent_of_input_order(strategy: str) -> None:
    rng = random.Random(99 + len(strategy))
    for _ in range(CASES):
        cft, pft = random_group(rng, identical=rng.random() < 0.5)
        a = assign(strategy, cft, pft)
        for _ in range(3):
            cft2, pft2 = shuffled_copy(rng, cft, pft)
            assert assign(strategy, cft2, pft2) == a


def test_range_ranges_are_consecutive() -> None:
    rng = random.Random(5)
    for _ in range(CASES):
        cft, pft = random_group(rng, identical=False)
        a = range_assign(cft, pft)
        for topic, threads in cft.items():
            parts = sorted(set(pft.get(topic, [])))
            owners = [a[TP(topic, p)] for p in parts]
            # owners along the sorted partitions: non-decreasing in string order of thread
            keys = [th.encode("utf-16-be") for th in owners]
            assert keys == sorted(keys)
            assert set(owners) <= set(threads)
