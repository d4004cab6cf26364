"""zkconsumer._speedups, the C twins of the confluent fetch path's per-message steps: each
gives exactly what its Python twin gives (randomized polls for ``split_messages``), refuses
bad input with an exception, and keeps no reference it should not (a leak in C would grow
the consumer's memory with every message)."""

from __future__ import annotations

import gc
import random
import sys
import tracemalloc
from collections.abc import Callable, Iterator
from itertools import repeat
from operator import length_hint
from typing import Any, NamedTuple

import pytest
from confluent_kafka import KafkaError, KafkaException, Message

from zkconsumer._types import TopicPartition
from zkconsumer.broker import backends
from zkconsumer.broker.backends import _CONFLUENT_TS_TYPE, ConfluentRecords, PollResult
from zkconsumer.consumer.fetcher import ConfluentBackend
from zkconsumer.consumer.stream import MessageAndMetadata

try:
    from zkconsumer import _speedups as _speedups
except ImportError:  # reported by test_the_extension_is_built; the rest cannot run
    _speedups = None  # type: ignore[assignment]

needs_speedups = pytest.mark.skipif(_speedups is None, reason="zkconsumer._speedups not built")


def test_the_extension_is_built() -> None:
    """The project's set-up (tools/_bootstrap.sh, the compose tests service) installs a C
    compiler, so the extension must be there: without it the confluent backend is about
    10 % slower, silently."""
    assert _speedups is not None, (
        "zkconsumer._speedups was not built: install a C compiler (Debian: gcc) and the "
        "Python headers, then reinstall (pip install -e .); pip's output says why it failed"
    )


# -- message_zipper --------------------------------------------------------------------------

_ITEMS = ("t", 3, 42, None, b"v", 1700000000000, 1)


def _columns(n: int) -> list[list[Any]]:
    return [[(field, i) for i in range(n)] for field in range(7)]


@needs_speedups
def test_zip_messages_is_map_tuple_new_over_zip() -> None:
    zip_messages = _speedups.message_zipper(MessageAndMetadata)
    (m,) = zip_messages(*([x] for x in _ITEMS))
    assert type(m) is MessageAndMetadata
    assert m == tuple.__new__(MessageAndMetadata, _ITEMS) == MessageAndMetadata(*_ITEMS)
    assert (m.topic, m.partition, m.offset, m.key, m.message, m.value) == (
        "t", 3, 42, None, b"v", b"v")
    # Tracked by the garbage collector, as tuple.__new__ makes it (the collector never
    # untracks a tuple subclass; nothing here depends on it being tracked or not).
    assert gc.is_tracked(m) == gc.is_tracked(tuple.__new__(MessageAndMetadata, _ITEMS))
    assert m._replace(offset=43).offset == 43
    columns = _columns(5)
    want = list(map(tuple.__new__, repeat(MessageAndMetadata), zip(*columns, strict=False)))
    got = list(zip_messages(*columns))
    assert got == want and all(type(g) is MessageAndMetadata for g in got)
    assert list(zip_messages(*[[]] * 7)) == []


@needs_speedups
def test_zip_messages_stops_as_zip_does() -> None:
    """In order, at the first iterator that ends, the later ones not advanced (the stream
    iterator's gate relies on it: a drained permit iterator, first, ends the chunk's
    iterator without taking a message off the columns); an iterator's exception passes
    through, and the items taken before it are dropped."""
    zip_messages = _speedups.message_zipper(MessageAndMetadata)
    columns = _columns(4)
    iters = [iter(c) for c in columns]
    permit = repeat("t", 2)
    it = zip_messages(permit, *iters[1:])
    assert [m.partition for m in it] == [(1, 0), (1, 1)]
    assert [length_hint(i) for i in iters[1:]] == [2] * 6  # nothing taken past the permit
    assert next(it, None) is None
    short = [*columns[:3], columns[3][:1], *columns[4:]]  # the 4th ends after one
    its = [iter(c) for c in short]
    assert len(list(zip_messages(*its))) == 1
    assert [length_hint(i) for i in its] == [2, 2, 2, 0, 3, 3, 3]  # as zip leaves them
    zips = [iter(c) for c in short]
    assert len(list(zip(*zips, strict=False))) == 1
    assert [length_hint(i) for i in zips] == [2, 2, 2, 0, 3, 3, 3]

    def failing() -> Iterator[int]:
        yield 1
        raise KeyError("boom")

    it = zip_messages(*columns[:6], failing())
    assert next(it).offset == (2, 0)
    with pytest.raises(KeyError, match="boom"):
        next(it)


@needs_speedups
def test_message_zipper_refuses_what_tuple_new_would_not_make_right() -> None:
    with pytest.raises(TypeError, match="subclass of tuple"):
        _speedups.message_zipper(list)
    with pytest.raises(TypeError, match="subclass of tuple"):
        _speedups.message_zipper(MessageAndMetadata(*_ITEMS))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="without instance attributes"):
        _speedups.message_zipper(_WithAttributes)
    zip_pairs = _speedups.message_zipper(_Pair)
    assert list(zip_pairs([1, 3], [2, 4])) == [_Pair(1, 2), _Pair(3, 4)]
    with pytest.raises(TypeError, match="takes 2 iterables \\(3 given\\)"):
        zip_pairs([1], [2], [3])
    with pytest.raises(TypeError, match="not iterable"):
        zip_pairs([1], 2)


class _WithAttributes(tuple):  # type: ignore[type-arg]
    _fields = ("a",)


class _Pair(NamedTuple):
    a: int
    b: int


# -- split_messages --------------------------------------------------------------------------

_ERRORS = [
    KafkaError(KafkaError._PARTITION_EOF),
    KafkaError(KafkaError.OFFSET_OUT_OF_RANGE),
    KafkaError(KafkaError._BAD_MSG),
    KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION),
]


def _random_poll(rng: random.Random, offsets: dict[tuple[str, int], int]) -> list[Any]:
    """A poll as librdkafka may give it: runs of one partition's messages (topics "a" and
    "b", partitions 0 to 2, the same number in both topics), each of one or mixed timestamp
    types, with keys and values or None, and now and then an errored message."""
    messages: list[Any] = []
    for _ in range(rng.randint(1, 6)):
        topic, part = rng.choice("ab"), rng.randint(0, 2)
        kinds = rng.choice([[0], [1], [2], [0, 1, 2]])
        for _ in range(rng.choice([1, 2, 5, 50])):
            if rng.random() < 0.05:
                messages.append(Message(topic=topic, partition=part,
                                        offset=offsets[topic, part], error=rng.choice(_ERRORS)))
                continue
            offset = offsets[topic, part] = offsets[topic, part] + 1
            messages.append(Message(
                topic=topic, partition=part, offset=offset,
                key=rng.choice([None, b"", b"k%d" % offset]),
                value=rng.choice([None, b"", b"v" * rng.randint(1, 300)]),
                timestamp=(rng.choice(kinds), rng.choice([-1, 0, 1700000000000 + offset])),
            ))
    return messages


def _group_with(group: Callable[..., None], polls: list[list[Any]]) -> tuple[Any, Any]:
    backend = ConfluentBackend.__new__(ConfluentBackend)  # no client: only the grouping
    backend._assigned = {TopicPartition(t, p) for t in "ab" for p in range(3)}
    backend._consumer_id = "test"
    batches: dict[tuple[str, int], ConfluentRecords] = {}
    result = PollResult()
    for messages in polls:
        group(backend, messages, batches, result)
    columns = {key: recs.columns() for key, recs in batches.items()}
    errors = (result.out_of_range, {tp: str(e) for tp, e in result.partition_errors.items()},
              {tp: (o, n, str(e)) for tp, (o, n, e) in result.corrupt.items()})
    return columns, errors


@needs_speedups
@pytest.mark.parametrize("seed", range(40))
def test_split_messages_groups_as_the_python_twin(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    offsets = {(t, p): rng.randint(-1, 10**12) for t in "ab" for p in range(3)}
    polls = [_random_poll(rng, offsets) for _ in range(rng.randint(1, 4))]
    assert backends.split_messages is _speedups.split_messages
    got = _group_with(ConfluentBackend._group, polls)
    want = _group_with(ConfluentBackend._group_py, polls)
    assert got == want
    assert sum(len(c[2]) for c in got[0].values()) == sum(
        1 for poll in polls for m in poll if m.error() is None)


@needs_speedups
def test_split_messages_runs_and_errors() -> None:
    """The shape: one run per stretch of one partition (the same partition number in
    another topic is another run), errored messages apart, in order."""
    eof = KafkaError(KafkaError._PARTITION_EOF)
    a0 = [Message(topic="a", partition=0, offset=o, value=b"v", timestamp=(1, 5)) for o in (1, 2)]
    b0 = Message(topic="b", partition=0, offset=9, key=b"k", timestamp=(2, 6))
    bad = Message(topic="a", partition=0, offset=3, error=eof)
    a0b = Message(topic="a", partition=0, offset=3, timestamp=(0, -1))
    runs, errors = _speedups.split_messages([*a0, b0, bad, a0b], _CONFLUENT_TS_TYPE)
    assert runs == [
        ("a", 0, [1, 2], [None, None], [b"v", b"v"], [5, 5], [0, 0]),
        ("b", 0, [9], [b"k"], [None], [6], [1]),
        ("a", 0, [3], [None], [None], [-1], [-1]),
    ]
    assert errors == [bad]
    assert _speedups.split_messages([], _CONFLUENT_TS_TYPE) == ([], [])


class _ShiftedMessage(Message):
    """A Message whose offset() is Python code: split_messages must call it, not the C
    function of Message.offset that it calls directly for Message itself."""

    def offset(self) -> int:  # type: ignore[override]
        offset = super().offset()
        assert offset is not None
        return offset + 1000


class _DuckMessage:
    """Not a Message at all, only the methods split_messages calls (in Python)."""

    def __init__(self, m: Any) -> None:
        self.m = m

    def error(self) -> Any:
        return self.m.error()

    def topic(self) -> Any:
        return self.m.topic()

    def partition(self) -> Any:
        return self.m.partition()

    def offset(self) -> Any:
        return self.m.offset()

    def key(self) -> Any:
        return self.m.key()

    def value(self) -> Any:
        return self.m.value()

    def timestamp(self) -> Any:
        return self.m.timestamp()


@needs_speedups
def test_split_messages_calls_each_type_s_own_methods() -> None:
    messages = _random_poll(random.Random(7), {(t, p): 0 for t in "ab" for p in range(3)})
    want, want_errors = _speedups.split_messages(messages, _CONFLUENT_TS_TYPE)
    assert want and want_errors  # the seed gives both

    ducks = [_DuckMessage(m) for m in messages]
    got, got_errors = _speedups.split_messages(ducks, _CONFLUENT_TS_TYPE)
    assert got == want
    assert [d.m for d in got_errors] == want_errors

    shifted = [  # one type a call: the errored messages left out
        _ShiftedMessage(topic=m.topic(), partition=m.partition(), offset=m.offset(),
                        key=m.key(), value=m.value(), timestamp=m.timestamp())
        for m in messages if m.error() is None
    ]
    got, _ = _speedups.split_messages(shifted, _CONFLUENT_TS_TYPE)
    assert [o - 1000 for run in got for o in run[2]] == [o for run in want for o in run[2]]


@needs_speedups
def test_split_messages_fills_long_and_short_runs_exactly() -> None:
    """Each run's columns are made with room for the rest of the poll and cut to what the
    run got: every length comes out right, the one-message runs as the long ones."""
    parts = [0] * 1000 + [1] + [0] + [2] * 3 + [1] * 500
    messages = [Message(topic="a", partition=p, offset=i, value=b"%d" % i, timestamp=(1, i))
                for i, p in enumerate(parts)]
    runs, errors = _speedups.split_messages(messages, _CONFLUENT_TS_TYPE)
    assert errors == []
    assert [(r[1], len(r[2])) for r in runs] == [(0, 1000), (1, 1), (0, 1), (2, 3), (1, 500)]
    assert [o for r in runs for o in r[2]] == list(range(len(parts)))
    assert all(len(col) == len(r[2]) for r in runs for col in r[3:])
    assert [v for r in runs for v in r[4]] == [b"%d" % i for i in range(len(parts))]


@needs_speedups
def test_split_messages_refuses_bad_input() -> None:
    m = Message(topic="a", partition=0, offset=1, timestamp=(1, 5))
    with pytest.raises(TypeError, match="list of messages"):
        _speedups.split_messages((m,), _CONFLUENT_TS_TYPE)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="tuple of timestamp types"):
        _speedups.split_messages([m], list(_CONFLUENT_TS_TYPE))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="takes 2 arguments"):
        _speedups.split_messages([m])  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="a tuple among .*Message messages"):
        _speedups.split_messages([m, (1, 2)], _CONFLUENT_TS_TYPE)
    with pytest.raises(ValueError, match="unknown librdkafka timestamp type 3"):
        _speedups.split_messages([Message(topic="a", partition=0, offset=1, timestamp=(3, 5))],
                                 _CONFLUENT_TS_TYPE)
    with pytest.raises(AttributeError, match="has no attribute"):
        _speedups.split_messages([object()], _CONFLUENT_TS_TYPE)


# -- no reference kept that should not be ------------------------------------------------

def _memory_growth(work: Callable[[], None], rounds: int = 2000) -> int:
    """Bytes still allocated after ``rounds`` more calls than a warm-up took."""
    for _ in range(200):
        work()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(rounds):
            work()
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


@needs_speedups
def test_no_reference_leaks() -> None:
    """Reference counts of everything handed in come back to where they were, and memory
    does not grow with the calls, on the normal and on every error path. (A leaked
    reference to a message's value would keep every value fetched alive.)"""
    value, key = b"v" * 1000, b"k" * 100
    eof = KafkaError(KafkaError._PARTITION_EOF)
    messages = [Message(topic="a", partition=o % 2, offset=o, key=key, value=value,
                        timestamp=(1, 7)) for o in range(20)]
    messages.append(Message(topic="a", partition=0, offset=99, error=eof))
    mixed = [*messages[:3], (1, 2)]
    bad_type = [*messages[:3], Message(topic="a", partition=0, offset=1, timestamp=(3, 5))]
    zip_messages = _speedups.message_zipper(MessageAndMetadata)
    # Objects of this test alone (not small ints or interned strings, which any thread's
    # code counts references to): only then do their counts say what these calls kept.
    items = ("".join(["to", "pic"]), *(int(f"{n}000000") for n in (1, 2)), key, value,
             *(int(f"{n}000000") for n in (3, 4)))

    def split() -> None:
        runs, errors = _speedups.split_messages(messages, _CONFLUENT_TS_TYPE)
        assert len(runs) == 20 and len(errors) == 1

    def refused() -> None:
        for poll, error in ((mixed, TypeError), (bad_type, ValueError)):
            try:
                _speedups.split_messages(poll, _CONFLUENT_TS_TYPE)
            except error:
                pass
        try:
            zip_messages([1])
        except TypeError:
            pass
        try:
            next(zip_messages(*([x] for x in items[:6]), iter(broken, None)))
        except KeyError:
            pass

    def broken() -> None:
        raise KeyError("boom")

    def made() -> None:
        (m,) = zip_messages(*([x] for x in items))
        assert m.message is value
        assert list(zip_messages(*([x] for x in items[:6]), [])) == []  # one ends

    watched = [value, key, eof, messages[0], messages[-1], mixed[-1], bad_type[-1], *items]
    counts = [sys.getrefcount(x) for x in watched]
    for work in (split, refused, made):
        growth = _memory_growth(work)
        assert growth < 20_000, f"{work.__name__}: {growth} bytes kept after 2000 calls"
    assert [sys.getrefcount(x) for x in watched] == counts


def test_the_exception_a_refused_message_raises_names_it() -> None:
    """Both twins hand errored messages to _on_error alike (a fatal error raises there)."""
    fatal = KafkaError(KafkaError._FATAL, "boom", fatal=True)
    backend = ConfluentBackend.__new__(ConfluentBackend)
    backend._assigned = set()
    backend._consumer_id = "test"
    for group in (ConfluentBackend._group, ConfluentBackend._group_py):
        with pytest.raises(KafkaException, match="boom"):
            group(backend, [Message(topic="a", partition=0, offset=1, error=fatal)], {},
                  PollResult())


def test_without_the_extension_zkconsumer_imports_and_uses_the_python_twins() -> None:
    """An install without a C compiler has no zkconsumer._speedups: the imports fall back."""
    import subprocess

    code = (
        "import sys; sys.modules['zkconsumer._speedups'] = None\n"
        "from zkconsumer import _message\n"
        "from zkconsumer.broker import backends\n"
        "from zkconsumer.consumer import stream\n"
        "assert backends.split_messages is None and _message._zip_messages is None\n"
        "m, = _message.make_messages(*([x] for x in ('t', 1, 2, None, b'v', 3, 0)))\n"
        "assert type(m) is _message.MessageAndMetadata and m.offset == 2, m\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
