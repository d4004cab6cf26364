"""KafkaStream / ConsumerIterator: iteration, timeouts, decoders, skips, clear(), shutdown.

The stream's input is its chunk queue, filled here by hand with real record types (the
confluent backend's ConfluentRecords, made from real confluent_kafka Message objects;
kafka-python's ConsumerRecord; MessageAndMetadata); fetching from the broker into streams is
covered by test_fetcher.py.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from itertools import islice
from typing import Any

import pytest
from confluent_kafka import Message
from kafka.consumer.fetcher import ConsumerRecord

from tests.support import wait_until
from zkconsumer._errors import ConsumerTimeoutException, ZkConsumerError
from zkconsumer.broker.backends import ConfluentRecords
from zkconsumer.consumer.gate import DeliveryGate
from zkconsumer.consumer.partition import ChunkQueue, FetchedDataChunk, PartitionTopicInfo
from zkconsumer.consumer.stream import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    NO_TIMESTAMP_TYPE,
    KafkaStream,
    MessageAndMetadata,
    MessageDecodeError,
)


@pytest.fixture(autouse=True)
def _both_makers(speedups: str) -> None:
    """Every test here runs with the C MessageAndMetadata maker and with tuple.__new__."""


def _info(
    q: ChunkQueue, partition: int = 0, offset: int = 0, topic: str = "t"
) -> PartitionTopicInfo:
    return PartitionTopicInfo(topic, partition, q, offset, offset, 1 << 20, "cid", "c-0")


def _recs(info: PartitionTopicInfo, offsets: range, key: bytes | None = b"k") -> list[Any]:
    return [
        MessageAndMetadata(info.topic, info.partition, o, key, f"v{o}".encode(), 1000 + o,
                           CREATE_TIME)
        for o in offsets
    ]


def _confluent(
    info: PartitionTopicInfo, offsets: range, key: bytes | None = b"k", ts_type: int = 1
) -> ConfluentRecords:
    """What the confluent backend makes of librdkafka's messages (``ts_type`` is librdkafka's:
    0 none, 1 create time, 2 log append time)."""
    recs = ConfluentRecords(info.topic, info.partition)
    recs.add([
        Message(topic=info.topic, partition=info.partition, offset=o, key=key,
                value=f"v{o}".encode(), timestamp=(ts_type, 1000 + o))
        for o in offsets
    ])
    return recs


def _put(info: PartitionTopicInfo, offsets: range, key: bytes | None = b"k") -> None:
    """What a fetcher does: one chunk, then the fetched offset moves past it."""
    recs = _recs(info, offsets, key)
    assert info.enqueue(recs, offsets.stop, threading.Event())


def test_iterates_chunks_in_order_and_advances_consumed_offsets() -> None:
    q = ChunkQueue(4)
    a, b = _info(q, 0), _info(q, 1, offset=10)
    _put(a, range(0, 3))
    _put(b, range(10, 12))
    _put(a, range(3, 5))
    stream: KafkaStream[bytes, bytes] = KafkaStream(q, consumer_timeout_ms=0, client_id="cid")
    it = iter(stream)
    assert iter(stream) is it  # one iterator per stream
    got = []
    for _ in range(7):
        m = next(it)
        info = a if m.partition == 0 else b
        assert info.consumed_offset == m.offset + 1  # advanced as the message is handed out
        got.append((m.partition, m.offset, m.key, m.message, m.timestamp, m.timestamp_type))
    assert got == [
        (0, 0, b"k", b"v0", 1000, CREATE_TIME),
        (0, 1, b"k", b"v1", 1001, CREATE_TIME),
        (0, 2, b"k", b"v2", 1002, CREATE_TIME),
        (1, 10, b"k", b"v10", 1010, CREATE_TIME),
        (1, 11, b"k", b"v11", 1011, CREATE_TIME),
        (0, 3, b"k", b"v3", 1003, CREATE_TIME),
        (0, 4, b"k", b"v4", 1004, CREATE_TIME),
    ]
    assert (a.consumed_offset, b.consumed_offset) == (5, 12)
    with pytest.raises(ConsumerTimeoutException):
        next(it)


def test_kafka_python_records_become_message_and_metadata() -> None:
    q = ChunkQueue(2)
    info = _info(q, 3, offset=7)
    recs = [
        ConsumerRecord("t", 3, 0, 7, 1234, 1, b"key", b"val", [], None, 3, 3, -1),
        ConsumerRecord("t", 3, 0, 8, None, None, None, b"old", [], None, -1, 3, -1),
    ]
    assert info.enqueue(recs, 9, threading.Event())
    it = iter(KafkaStream(q, 0))
    m1, m2 = next(it), next(it)
    assert type(m1) is MessageAndMetadata
    assert tuple(m1) == ("t", 3, 7, b"key", b"val", 1234, 1)
    assert m1.value == m1.message == b"val"
    assert tuple(m2) == ("t", 3, 8, None, b"old", -1, NO_TIMESTAMP_TYPE)
    assert info.consumed_offset == 9


def test_confluent_records_become_message_and_metadata() -> None:
    q = ChunkQueue(4)
    info = _info(q, 2, offset=5)
    recs = _confluent(info, range(5, 8))
    # A sequence of MessageAndMetadata for the fetcher (batch[-1].offset) and everyone else.
    assert len(recs) == 3 and recs[-1].offset == 7 and type(recs[0]) is MessageAndMetadata
    assert [m.offset for m in recs] == [5, 6, 7] and [m.offset for m in recs[1:]] == [6, 7]
    q.put(FetchedDataChunk(recs, info, 5))
    q.put(FetchedDataChunk(_confluent(info, range(8, 9), key=None, ts_type=2), info, 8))
    q.put(FetchedDataChunk(_confluent(info, range(9, 10), ts_type=0), info, 9))
    it = iter(KafkaStream(q, 0))
    got = list(islice(it, 5))
    assert all(type(m) is MessageAndMetadata for m in got)
    assert [tuple(m) for m in got] == [
        ("t", 2, 5, b"k", b"v5", 1005, CREATE_TIME),
        ("t", 2, 6, b"k", b"v6", 1006, CREATE_TIME),
        ("t", 2, 7, b"k", b"v7", 1007, CREATE_TIME),
        ("t", 2, 8, None, b"v8", 1008, LOG_APPEND_TIME),
        ("t", 2, 9, b"k", b"v9", 1009, NO_TIMESTAMP_TYPE),
    ]
    assert info.consumed_offset == 10


def test_consumer_timeout_then_usable_again() -> None:
    q = ChunkQueue(2)
    info = _info(q)
    it = iter(KafkaStream(q, consumer_timeout_ms=200, client_id="cid"))
    start = time.monotonic()
    with pytest.raises(ConsumerTimeoutException, match="cid"):
        next(it)
    assert time.monotonic() - start >= 0.2
    with pytest.raises(ConsumerTimeoutException):  # and again: nothing changed
        next(it)
    _put(info, range(0, 2))
    assert [next(it).offset, next(it).offset] == [0, 1]
    with pytest.raises(ConsumerTimeoutException):
        next(it)


def _next_in_thread(it: Any) -> tuple[threading.Thread, list[Any]]:
    """``next(it)`` in a thread of its own; the list gets the message's offset, or what
    was raised."""
    got: list[Any] = []

    def run() -> None:
        try:
            got.append(next(it).offset)
        except BaseException as e:  # noqa: BLE001 - collected for the assertions
            got.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, got


def test_a_thread_waiting_behind_another_of_its_stream_keeps_its_timeout() -> None:
    """Several threads may iterate one stream: one waits for a chunk, the others for it.
    Each still gets ConsumerTimeoutException after consumer.timeout.ms, however long the
    first keeps the stream's slow path (here: for ever)."""
    q = ChunkQueue(2)
    _info(q)
    it = iter(KafkaStream(q, consumer_timeout_ms=200, client_id="cid"))
    it._chunks._inside = True  # what a thread inside the slow path leaves set
    try:
        t, errors = _next_in_thread(it)
        t.join(10)
        assert not t.is_alive(), "blocked behind the other thread"
    finally:
        it._chunks._inside = False
    assert len(errors) == 1 and isinstance(errors[0], ConsumerTimeoutException), errors
    assert "another thread" in str(errors[0])


def test_negative_timeout_blocks_until_data() -> None:
    q = ChunkQueue(2)
    info = _info(q)
    it = iter(KafkaStream(q, consumer_timeout_ms=-1))
    got: list[int] = []
    t = threading.Thread(target=lambda: got.append(next(it).offset), daemon=True)
    t.start()
    wait_until(lambda: q.not_empty._waiters, 5, "the iterator blocks on the queue")  # type: ignore[attr-defined]
    assert got == []
    _put(info, range(0, 1))
    t.join(5)
    assert got == [0]


def test_an_exception_while_blocked_leaves_the_stream_usable() -> None:
    """A signal handler that raises (Ctrl-C, say) while the iterator waits on its queue: the
    caller gets the exception and the stream goes on (``chain`` drops a source that raises:
    every later ``next()`` said StopIteration, as after a shutdown)."""
    assert threading.current_thread() is threading.main_thread()

    class Interrupted(Exception):
        pass

    def handler(signum: int, frame: Any) -> None:
        raise Interrupted()

    q = ChunkQueue(2)
    info = _info(q)
    it = iter(KafkaStream(q, consumer_timeout_ms=-1))
    main = threading.main_thread().ident
    assert main is not None

    def interrupt() -> None:
        wait_until(lambda: q.not_empty._waiters, 5, "the iterator blocks")  # type: ignore[attr-defined]
        signal.pthread_kill(main, signal.SIGUSR1)

    old = signal.signal(signal.SIGUSR1, handler)
    try:
        t = threading.Thread(target=interrupt, daemon=True)
        t.start()
        with pytest.raises(Interrupted):
            next(it)
        t.join(5)
    finally:
        signal.signal(signal.SIGUSR1, old)
    _put(info, range(0, 2))
    assert [m.offset for m in islice(it, 2)] == [0, 1]
    assert info.consumed_offset == 2


class _Gated:
    """A decoder that blocks on one value until released, then returns it or raises."""

    def __init__(self, slow: bytes, error: BaseException | None = None) -> None:
        self.slow, self.error = slow, error
        self.decoding, self.release = threading.Event(), threading.Event()

    def __call__(self, b: bytes) -> bytes:
        if b == self.slow:
            self.decoding.set()
            assert self.release.wait(10)
            if self.error is not None:
                raise self.error
        return b


def test_a_message_another_thread_still_decodes_is_not_counted_as_consumed() -> None:
    """Two threads on one stream with a decoder: the second hands out message 1 while the
    first still decodes message 0. A commit then must not cover message 0: a crash would
    lose it."""
    decoder = _Gated(b"v0")
    q = ChunkQueue(2)
    info = _info(q)
    _put(info, range(0, 2))
    it = iter(KafkaStream(q, 0, value_decoder=decoder))
    got: list[int] = []
    first = threading.Thread(target=lambda: got.append(next(it).offset), daemon=True)
    first.start()
    assert decoder.decoding.wait(10)
    assert next(it).offset == 1
    assert info.consumed_offset == 0
    decoder.release.set()
    first.join(10)
    assert got == [0]
    assert info.consumed_offset == 2


@pytest.mark.parametrize("error", [None, ValueError("bad")], ids=["decoded", "fails"])
def test_a_chunk_is_not_done_while_another_thread_decodes_its_last_message(
    error: BaseException | None, caplog: pytest.LogCaptureFixture,
) -> None:
    """Thread A decodes the chunk's last message; thread B, wanting the next one, must wait
    for it: taking the next chunk would move the consumed offset past A's message (a commit
    covering it, a crash losing it) and log a false "may lose data". When A's decode fails,
    B must go on (it slept for good: a lost wake-up, and A's next call then waited for B)."""
    decoder = _Gated(b"v2", error)
    q = ChunkQueue(2)
    info = _info(q)
    _put(info, range(0, 3))
    _put(info, range(3, 5))
    it = iter(KafkaStream(q, -1, value_decoder=decoder))
    assert [next(it).offset, next(it).offset] == [0, 1]
    a, got_a = _next_in_thread(it)
    assert decoder.decoding.wait(10)
    b, got_b = _next_in_thread(it)
    wait_until(lambda: _inside(b, "_wait_changed"), 10, "B waiting for A's message")
    assert info.consumed_offset == 2
    decoder.release.set()
    a.join(10)
    b.join(10)
    assert got_b == [3]
    if error is None:
        assert got_a == [2]
        assert info.consumed_offset == 4
    else:
        assert [type(e) for e in got_a] == [MessageDecodeError]
    assert "may lose data" not in caplog.text


def test_an_interrupted_decode_gives_the_message_back_though_a_later_one_went_out() -> None:
    """A Ctrl-C in A's decoder after B took and handed out a later message: A's message goes
    out next time, and no commit covers it meanwhile (it was lost, and committed)."""
    decoder = _Gated(b"v1", KeyboardInterrupt())
    q = ChunkQueue(2)
    info = _info(q)
    _put(info, range(0, 4))
    it = iter(KafkaStream(q, -1, value_decoder=decoder))
    assert next(it).offset == 0
    a, errors = _next_in_thread(it)
    assert decoder.decoding.wait(10)
    assert next(it).offset == 2  # B, meanwhile
    decoder.release.set()
    a.join(10)
    assert [type(e) for e in errors] == [KeyboardInterrupt]
    assert info.consumed_offset == 1
    decoder.error = None
    assert sorted([next(it).offset, next(it).offset]) == [1, 3]
    assert info.consumed_offset == 4


def test_a_message_decoded_while_the_gate_closed_waits_for_it_to_open() -> None:
    """The gate closes (ZooKeeper connection lost: the partition may be another member's)
    while a message is being decoded: it is not handed out until the gate opens."""
    gate = DeliveryGate()
    decoder = _Gated(b"v1")
    q = ChunkQueue(2)
    info = _info(q)
    _put(info, range(0, 3))
    it = iter(KafkaStream(q, -1, value_decoder=decoder, gate=gate))
    assert next(it).offset == 0
    got: list[int] = []
    a = threading.Thread(target=lambda: got.append(next(it).offset), daemon=True)
    a.start()
    assert decoder.decoding.wait(10)
    gate.close("connection")
    decoder.release.set()
    wait_until(lambda: _inside(a, "wait_gate"), 10, "A waiting at the gate")
    assert got == [] and info.consumed_offset == 1
    gate.open("connection")
    a.join(10)
    assert got == [1]
    assert next(it).offset == 2


def test_decoders_apply_to_key_and_value_and_none_stays_none() -> None:
    q = ChunkQueue(2)
    info = _info(q)
    _put(info, range(0, 1), key=b"41")
    _put(info, range(1, 2), key=None)
    stream: KafkaStream[int, str] = KafkaStream(
        q, 0, key_decoder=lambda b: int(b) + 1, value_decoder=bytes.decode
    )
    it = iter(stream)
    m1, m2 = next(it), next(it)
    assert tuple(m1) == ("t", 0, 0, 42, "v0", 1000, CREATE_TIME)
    assert tuple(m2) == ("t", 0, 1, None, "v1", 1001, CREATE_TIME)
    assert info.consumed_offset == 2


def _failing_value(b: bytes) -> str:
    if b == b"v1":
        raise UnicodeDecodeError("utf-8", b, 0, 1, "bad byte")
    return b.decode()


def test_decode_error_names_the_message_and_is_skipped_on_the_next_call(
    caplog: pytest.LogCaptureFixture,
) -> None:
    q = ChunkQueue(2)
    info = _info(q, partition=2, offset=0, topic="orders")
    _put(info, range(0, 3))
    it = iter(KafkaStream(q, 0, value_decoder=_failing_value, client_id="cid"))
    assert next(it).message == "v0"
    with pytest.raises(MessageDecodeError) as exc:
        next(it)
    e = exc.value
    assert isinstance(e, ZkConsumerError)
    assert (e.topic, e.partition, e.offset, e.part) == ("orders", 2, 1, "value")
    assert isinstance(e.__cause__, UnicodeDecodeError)
    assert "orders:2 offset 1" in str(e)
    # Not past the bad message until the application calls next() again.
    assert info.consumed_offset == 1
    with caplog.at_level(logging.WARNING, logger="zkconsumer.stream"):
        m = next(it)
    assert (m.offset, m.message) == (2, "v2")
    assert info.consumed_offset == 3
    assert any(
        "skipping" in r.getMessage() and "orders:2 offset 1" in r.getMessage()
        for r in caplog.records
    )


def test_key_decode_error_says_key() -> None:
    q = ChunkQueue(2)
    info = _info(q)
    _put(info, range(0, 1), key=b"not a number")
    it = iter(KafkaStream(q, 0, key_decoder=int))
    with pytest.raises(MessageDecodeError) as exc:
        next(it)
    assert (exc.value.part, exc.value.offset) == ("key", 0)
    assert isinstance(exc.value.__cause__, ValueError)
    assert info.consumed_offset == 0
    with pytest.raises(ConsumerTimeoutException):
        next(it)  # the bad message is skipped, and there is nothing after it
    assert info.consumed_offset == 1


@pytest.mark.parametrize("kind", ["confluent", "tuples"])
def test_skips_records_below_the_consumed_offset(kind: str) -> None:
    q = ChunkQueue(2)
    info = _info(q, offset=3)
    # A fetch that starts before the consumed offset.
    chunk = _confluent(info, range(0, 6)) if kind == "confluent" else _recs(info, range(0, 6))
    q.put(FetchedDataChunk(chunk, info, 0))
    info.reset_consumed_offset(4)
    it = iter(KafkaStream(q, 0))
    assert [next(it).offset, next(it).offset] == [4, 5]
    assert info.consumed_offset == 6
    with pytest.raises(ConsumerTimeoutException):
        next(it)


@pytest.mark.parametrize("kind", ["confluent", "tuples"])
def test_message_metrics_leave_out_records_skipped_as_consumed(kind: str) -> None:
    class Recorded:
        counts_bytes = True  # served: bytes are counted too

        def __init__(self) -> None:
            self.got: list[tuple[str, int, int]] = []

        def record_messages(self, topic: str, n: int, nbytes: int) -> None:
            self.got.append((topic, n, nbytes))

    q = ChunkQueue(2)
    info = _info(q, offset=4)
    chunk = _confluent(info, range(0, 6)) if kind == "confluent" else _recs(info, range(0, 6))
    q.put(FetchedDataChunk(chunk, info, 0))
    metrics = Recorded()
    it = iter(KafkaStream(q, 0, metrics=metrics))
    assert [m.offset for m in islice(it, 2)] == [4, 5]
    with pytest.raises(ConsumerTimeoutException):
        next(it)  # the iterator leaves the chunk: its messages handed out are counted
    assert metrics.got == [("t", 2, 2 * len(b"k") + len(b"v4") + len(b"v5"))]


def test_bytes_are_counted_for_an_application_that_reads_the_snapshot() -> None:
    """No Prometheus: an application reading ``snapshot()`` gets BytesPerSec too."""
    from zkconsumer.consumer.metrics import ConsumerMetrics

    metrics = ConsumerMetrics("cid")
    assert metrics.snapshot()["BytesPerSec"] == {}
    q = ChunkQueue(2)
    info = _info(q)
    _put(info, range(0, 2))
    it = iter(KafkaStream(q, 0, metrics=metrics))
    assert [m.offset for m in islice(it, 2)] == [0, 1]
    snap = metrics.snapshot()
    assert snap["MessagesPerSec"] == {"t": 2}
    assert snap["BytesPerSec"] == {"t": 2 * len(b"k") + len(b"v0") + len(b"v1")}


def test_chunk_beyond_the_consumed_offset_resets_it(caplog: pytest.LogCaptureFixture) -> None:
    q = ChunkQueue(2)
    info = _info(q, offset=0)
    q.put(FetchedDataChunk(_recs(info, range(5, 7)), info, 5))
    with caplog.at_level(logging.ERROR, logger="zkconsumer.stream"):
        assert next(iter(KafkaStream(q, 0))).offset == 5
    assert info.consumed_offset == 6
    assert any("may lose data" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("consumed", [100, 90], ids=["at-fetch-offset", "below-it"])
@pytest.mark.parametrize("decoder", [None, bytes.decode], ids=["plain", "decoding"])
@pytest.mark.parametrize("where", ["consumed-read", "cursor-made"])
def test_an_offset_reset_while_a_chunk_starts_drops_that_chunk(
    where: str, decoder: Any, consumed: int, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The fetcher resets the offsets backwards (out of range: the log was truncated and
    written again) while the iterator starts a chunk fetched before: after the iterator's
    early epoch check, as it reads the consumed offset or makes the chunk's cursor. The old
    chunk must be dropped; handed out, it moved the consumed offset back up past the refetched
    messages, which were then skipped as consumed (lost: 95 to 109 of the new log)."""
    import zkconsumer.consumer.stream as stream_module

    armed = [False]

    def fetcher_resets() -> None:
        # What the fetcher thread does at that instant: reset, then fetch from 95 again.
        if armed[0]:
            armed[0] = False
            info.reset_offsets(95)
            assert info.try_enqueue(_tagged(info, range(95, 105), "new"), 105, wake)

    class RacyInfo(PartitionTopicInfo):
        @property
        def consumed_offset(self) -> int:
            if where == "consumed-read":
                fetcher_resets()
            return int(PartitionTopicInfo.consumed_offset.fget(self))  # type: ignore[attr-defined]

    class RacyCursor(stream_module._Cursor):  # type: ignore[name-defined]
        def __init__(self, *args: Any) -> None:
            if where == "cursor-made":
                fetcher_resets()
            super().__init__(*args)

    class RacyDecodingCursor(stream_module._DecodingCursor):  # type: ignore[name-defined]
        def __init__(self, *args: Any) -> None:
            if where == "cursor-made":
                fetcher_resets()
            super().__init__(*args)

    monkeypatch.setattr(stream_module, "_Cursor", RacyCursor)
    monkeypatch.setattr(stream_module, "_DecodingCursor", RacyDecodingCursor)
    q = ChunkQueue(4)
    info = RacyInfo("t", 0, q, consumed, 100, 1 << 20, "cid", "c-0")
    wake = threading.Event()
    assert info.try_enqueue(_tagged(info, range(100, 110), "old"), 110, wake)
    stream: KafkaStream[Any, Any] = KafkaStream(q, 0, value_decoder=decoder)
    it = iter(stream)
    armed[0] = True
    with caplog.at_level(logging.ERROR, logger="zkconsumer.stream"):
        got = [(m.offset, m.message) for m in islice(it, 10)]
    assert not armed[0], "the reset did not happen"
    new = [(o, f"new{o}".encode()) for o in range(95, 105)]
    assert got == (new if decoder is None else [(o, v.decode()) for o, v in new])
    assert info.consumed_offset == 105 and info.fetched_offset == 105
    with pytest.raises(ConsumerTimeoutException):
        next(it)  # nothing of the old chunk comes after
    assert info.consumed_offset == 105
    if consumed == 100:  # the chunk started where the consumed offset was: nothing lost
        assert "may lose data" not in caplog.text


def _tagged(info: PartitionTopicInfo, offsets: range, tag: str) -> list[Any]:
    return [MessageAndMetadata(info.topic, info.partition, o, None, f"{tag}{o}".encode(), 0,
                               CREATE_TIME) for o in offsets]


def test_clear_drops_the_current_chunk() -> None:
    q = ChunkQueue(4)
    info = _info(q)
    _put(info, range(0, 5))
    stream: KafkaStream[bytes, bytes] = KafkaStream(q, 0)
    it = iter(stream)
    assert next(it).offset == 0
    stream.clear()  # what the rebalance does (after stopping fetchers, clearing the queue)
    assert info.consumed_offset == 1
    with pytest.raises(ConsumerTimeoutException):
        next(it)  # nothing of the dropped chunk comes out
    # New assignment: a new info starting at the committed (consumed) offset.
    new = _info(q, offset=info.consumed_offset)
    _put(new, range(1, 3))
    assert [next(it).offset, next(it).offset] == [1, 2]
    assert info.consumed_offset == 1
    assert new.consumed_offset == 3


def test_a_revoked_partition_stops_and_the_others_go_on() -> None:
    # What an incremental rebalance does when partition 0 moves away and 1 stays.
    q = ChunkQueue(8)
    moving, staying = _info(q, 0), _info(q, 1)
    _put(moving, range(0, 5))
    _put(staying, range(0, 3))
    _put(moving, range(5, 8))
    stream: KafkaStream[bytes, bytes] = KafkaStream(q, 0)
    it = iter(stream)
    assert next(it).offset == 0
    moving.revoke()
    stream.drop_revoked()
    assert q.drop_revoked() == 1  # the queued chunk of partition 0
    assert moving.consumed_offset == 1  # final: what the rebalance commits
    assert moving.enqueue(_recs(moving, range(8, 9)), 9, threading.Event())  # dropped
    assert [(m.partition, m.offset) for m in islice(it, 3)] == [(1, 0), (1, 1), (1, 2)]
    with pytest.raises(ConsumerTimeoutException):
        next(it)  # nothing more of partition 0
    assert moving.consumed_offset == 1 and staying.consumed_offset == 3
    moving.reset_offsets(0)  # a late reset by a fetcher changes nothing
    assert moving.consumed_offset == 1


def test_a_revoked_partitions_chunk_taken_before_it_is_not_handed_out() -> None:
    q = ChunkQueue(8)
    moving, staying = _info(q, 0), _info(q, 1)
    _put(moving, range(0, 2))
    _put(staying, range(0, 1))
    stream: KafkaStream[bytes, bytes] = KafkaStream(q, 0)
    it = iter(stream)
    moving.revoke()  # before the iterator started its chunk: dropped by its epoch
    assert [(m.partition, m.offset) for m in islice(it, 1)] == [(1, 0)]
    assert moving.consumed_offset == 0


def test_clear_drops_a_chunk_taken_off_the_queue_at_the_same_moment() -> None:
    """A next() that took a chunk before clear() ran must not hand it out afterwards."""
    cleared = threading.Event()
    stream_box: list[KafkaStream[bytes, bytes]] = []

    class RacingQueue(ChunkQueue):
        def _get(self) -> Any:
            item = super()._get()
            if not cleared.is_set():
                cleared.set()
                # clear() from another thread, while this next() holds the queue's mutex
                # having taken the chunk: clear() gets the chunk lock first, then waits.
                it = stream_box[0].iterator
                threading.Thread(target=stream_box[0].clear, daemon=True).start()
                wait_until(lambda: it._chunks.lock.locked(), 5, "clear() holds the chunk lock")
            return item

    q = RacingQueue(4)
    info = _info(q)
    _put(info, range(0, 3))
    stream: KafkaStream[bytes, bytes] = KafkaStream(q, 0)
    stream_box.append(stream)
    it = iter(stream)
    with pytest.raises(ConsumerTimeoutException):
        next(it)
    assert cleared.is_set()
    assert info.consumed_offset == 0
    new = _info(q)
    _put(new, range(0, 1))
    assert next(it).offset == 0
    assert new.consumed_offset == 1


def _take_until_timeout(
    stream: KafkaStream[bytes, bytes], got: list[int], going: threading.Event
) -> None:
    with pytest.raises(ConsumerTimeoutException):
        for m in stream:
            got.append(m.offset)
            if len(got) == 1000:
                going.set()


def test_clear_from_another_thread_leaves_the_consumed_offset_exact() -> None:
    """Whenever clear() comes, the consumed offset ends right after the last message the
    application got, and nothing more of the chunk comes out."""
    for _ in range(3):
        q = ChunkQueue(2)
        info = _info(q)
        q.put(FetchedDataChunk(_confluent(info, range(0, 100_000)), info, 0))
        stream: KafkaStream[bytes, bytes] = KafkaStream(q, 200)
        got: list[int] = []
        going = threading.Event()
        t = threading.Thread(target=_take_until_timeout, args=(stream, got, going), daemon=True)
        t.start()
        assert going.wait(10)
        stream.clear()  # while the other thread takes messages as fast as it can
        t.join(10)
        assert not t.is_alive()
        assert 1000 <= len(got) < 100_000
        assert got == list(range(len(got)))
        assert info.consumed_offset == len(got)


def test_closed_gate_stops_before_the_next_message_and_resumes_after() -> None:
    gate = DeliveryGate()
    q = ChunkQueue(2)
    info = _info(q)
    q.put(FetchedDataChunk(_confluent(info, range(0, 5)), info, 0))
    it = iter(KafkaStream(q, 200, gate=gate))
    assert [next(it).offset, next(it).offset] == [0, 1]
    gate.close("connection")
    with pytest.raises(ConsumerTimeoutException, match="delivery paused"):
        next(it)
    assert info.consumed_offset == 2
    gate.open("connection")
    assert [m.offset for m in islice(it, 3)] == [2, 3, 4]
    assert info.consumed_offset == 5


def test_reset_detaches_the_chunk_being_handed_out() -> None:
    q = ChunkQueue(4)
    info = _info(q)
    _put(info, range(0, 4))
    it = iter(KafkaStream(q, 0))
    assert next(it).offset == 0
    assert info.consumed_offset == 1
    info.reset_consumed_offset(10)  # the fetcher's reset (e.g. the offset was out of range)
    assert info.consumed_offset == 10
    assert [m.offset for m in islice(it, 3)] == [1, 2, 3]  # the rest of that chunk, once
    assert info.consumed_offset == 10  # which no longer moves it
    _put(info, range(8, 12))
    assert [m.offset for m in islice(it, 2)] == [10, 11]  # below the reset offset: skipped
    assert info.consumed_offset == 12


def test_clear_while_decoding_drops_that_message() -> None:
    q = ChunkQueue(2)
    info = _info(q)
    _put(info, range(0, 2))
    box: list[KafkaStream[bytes, bytes]] = []
    calls: list[bytes] = []

    def decoder(b: bytes) -> bytes:
        calls.append(b)
        if len(calls) == 1:
            box[0].clear()  # the rebalance runs while the application decodes
        return b

    stream: KafkaStream[bytes, bytes] = KafkaStream(q, 0, value_decoder=decoder)
    box.append(stream)
    with pytest.raises(ConsumerTimeoutException):
        next(iter(stream))
    assert calls == [b"v0"]
    assert info.consumed_offset == 0


def _drain_in_thread(stream: KafkaStream[bytes, bytes]) -> tuple[threading.Event, list[Any]]:
    """Iterate ``stream`` to its end in a daemon thread: (set at the end, what it got)."""
    done = threading.Event()
    got: list[Any] = []

    def run() -> None:
        got.extend(stream)
        done.set()

    threading.Thread(target=run, daemon=True).start()
    return done, got


def test_shutdown_sentinel_ends_an_iterator_blocked_in_another_thread() -> None:
    q = ChunkQueue(2)
    stream: KafkaStream[bytes, bytes] = KafkaStream(q, -1)
    done, got = _drain_in_thread(stream)
    wait_until(lambda: q.not_empty._waiters, 5, "the iterator blocks")  # type: ignore[attr-defined]
    q.put_shutdown()
    assert done.wait(5)
    assert got == []
    # And it keeps ending: later calls raise StopIteration at once, even with data queued.
    info = _info(q)
    _put(info, range(0, 1))
    with pytest.raises(StopIteration):
        next(iter(stream))
    assert list(stream) == []
    assert info.consumed_offset == 0


def test_shutdown_after_data_delivers_the_data_first() -> None:
    q = ChunkQueue(3)
    info = _info(q)
    _put(info, range(0, 2))
    q.put_shutdown()
    assert [m.offset for m in KafkaStream(q, -1)] == [0, 1]
    assert info.consumed_offset == 2


def _inside(t: threading.Thread, function: str) -> bool:
    """Whether ``function`` is on ``t``'s stack now."""
    frame = sys._current_frames().get(t.ident or -1)
    while frame is not None:
        if frame.f_code.co_name == function:
            return True
        frame = frame.f_back
    return False


def _two_threads_end_at_shutdown() -> list[BaseException]:
    q = ChunkQueue(2)
    it = iter(KafkaStream(q, -1))
    errors: list[BaseException] = []
    ended = threading.Barrier(3)

    def run() -> None:
        try:
            for _m in it:
                pass
            [bytearray(64) for _ in range(1000)]  # allocate: reuse what was freed
        except BaseException as e:  # noqa: BLE001 - collected for the assertion
            errors.append(e)
        ended.wait(5)

    threads = [threading.Thread(target=run, daemon=True) for _ in range(2)]
    for t in threads:
        t.start()
    wait_until(lambda: all(_inside(t, "_next_chunk") for t in threads), 5,
               "both threads waiting for a chunk")
    q.put_shutdown()
    ended.wait(5)
    return errors


def test_two_threads_on_one_stream_both_end_at_shutdown() -> None:
    """The legacy API lets several threads iterate one stream. When one of them takes the
    shutdown sentinel, ``chain`` drops its source while the other is still blocked inside it;
    the iterator keeps it alive (or the other thread read a freed object)."""
    for _ in range(30):
        assert _two_threads_end_at_shutdown() == []


def test_an_interrupt_while_a_chunk_starts_loses_no_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ctrl-C after a chunk was taken off the queue but before its first message: the next
    call hands out that chunk (it used to be lost, and the consumed offset jumped past it)."""
    import zkconsumer.consumer.stream as stream_module

    real = stream_module._columns
    calls: list[int] = []

    def interrupted_once(*args: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(stream_module, "_columns", interrupted_once)
    q = ChunkQueue(4)
    info = _info(q)
    _put(info, range(0, 3))
    _put(info, range(3, 5))
    it = iter(KafkaStream(q, 0))
    with pytest.raises(KeyboardInterrupt):
        next(it)
    assert [m.offset for m in islice(it, 5)] == [0, 1, 2, 3, 4]
    assert info.consumed_offset == 5


def test_an_interrupt_in_a_decoder_hands_the_message_out_next_time() -> None:
    """Ctrl-C in a slow decoder is not the message's fault: it is not skipped."""
    interrupted: list[bytes] = []

    def slow(b: bytes) -> str:
        if b == b"v1" and not interrupted:
            interrupted.append(b)
            raise KeyboardInterrupt
        return b.decode()

    q = ChunkQueue(2)
    info = _info(q)
    _put(info, range(0, 3))
    it = iter(KafkaStream(q, 0, value_decoder=slow))
    assert next(it).message == "v0"
    with pytest.raises(KeyboardInterrupt):
        next(it)
    assert info.consumed_offset == 1
    assert [(m.offset, m.message) for m in islice(it, 2)] == [(1, "v1"), (2, "v2")]
    assert info.consumed_offset == 3


def test_a_clear_after_shutdown_keeps_the_end_of_the_stream() -> None:
    """A rebalance that goes on after shutdown() (ZooKeeper back a moment too late) clears
    the queues: the shutdown sentinel survives, so no iterator blocks for ever."""
    q = ChunkQueue(2)
    info = _info(q)
    _put(info, range(0, 1))
    q.put_shutdown()
    q.clear()
    stream: KafkaStream[bytes, bytes] = KafkaStream(q, -1)
    done, got = _drain_in_thread(stream)
    assert done.wait(5), "the iterator blocked after a clear that followed the shutdown"
    assert got == []


def test_chunks_queued_before_an_offset_reset_are_dropped() -> None:
    """auto.offset.reset moved a lagging partition back (its log truncated and written
    again): the chunks queued before are obsolete. Handing them out would move the consumed
    offset back up, and the refetched messages below it would be skipped as consumed."""
    q = ChunkQueue(4)
    info = _info(q, offset=100)
    wake = threading.Event()
    assert info.try_enqueue(_recs(info, range(100, 110)), 110, wake)
    assert info.try_enqueue(_recs(info, range(110, 120)), 120, wake)
    info.reset_offsets(0)  # what the fetcher does for an out-of-range offset
    assert info.try_enqueue(_recs(info, range(0, 5)), 5, wake)
    it = iter(KafkaStream(q, 0))
    assert [m.offset for m in islice(it, 5)] == [0, 1, 2, 3, 4]
    assert info.consumed_offset == 5 and info.fetched_offset == 5
    with pytest.raises(ConsumerTimeoutException):
        next(it)
