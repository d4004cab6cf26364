"""The delivery gate, alone and in front of a stream's iterator (no ZooKeeper needed: the
connector's use of it is covered by tests/faults/test_session_expiry.py)."""

from __future__ import annotations

import threading
import time

import pytest

from tests.support import wait_until
from zkconsumer._errors import ConsumerTimeoutException
from zkconsumer.consumer.gate import DeliveryGate
from zkconsumer.consumer.partition import ChunkQueue, FetchedDataChunk, PartitionTopicInfo
from zkconsumer.consumer.stream import CREATE_TIME, KafkaStream, MessageAndMetadata


def test_gate_opens_only_when_every_reason_is_gone() -> None:
    g = DeliveryGate()
    assert not g.closed and g.wait(time.monotonic())
    g.close("connection")
    g.close("session")
    assert g.closed and g.reasons() == {"connection", "session"}
    g.open("connection")
    assert g.closed and not g.wait(time.monotonic() + 0.01)
    g.open("session")
    assert not g.closed and g.wait(time.monotonic())
    g.close("a")
    g.close("b")
    g.open()  # every reason
    assert not g.closed and "open" in repr(g)


def test_gate_wakes_a_waiter_when_it_opens() -> None:
    g = DeliveryGate()
    g.close("connection")
    woke = threading.Event()
    t = threading.Thread(target=lambda: g.wait() and woke.set(), daemon=True)
    t.start()
    assert not woke.wait(0.05)
    g.open("connection")
    wait_until(woke.is_set, 5, "the waiter woken")


def _stream_with(offsets: range, gate: DeliveryGate, timeout_ms: int) -> KafkaStream[
        bytes, bytes]:
    q = ChunkQueue(4)
    info = PartitionTopicInfo("t", 0, q, 0, 0, 1 << 20, "cid", "c-0")
    recs = [MessageAndMetadata("t", 0, o, None, b"v%d" % o, 0, CREATE_TIME) for o in offsets]
    q.put(FetchedDataChunk(recs, info, offsets.start))
    return KafkaStream(q, timeout_ms, client_id="cid", gate=gate)


def test_a_closed_gate_stops_the_iterator_mid_chunk() -> None:
    gate = DeliveryGate()
    it = iter(_stream_with(range(5), gate, timeout_ms=-1))
    assert next(it).offset == 0
    gate.close("connection")
    got: list[int] = []
    t = threading.Thread(target=lambda: got.extend(next(it).offset for _ in range(4)),
                         daemon=True)
    t.start()
    t.join(0.2)
    assert got == [] and t.is_alive(), "handed out a message while the gate was closed"
    gate.open("connection")
    t.join(5)
    assert got == [1, 2, 3, 4]


def test_consumer_timeout_applies_at_a_closed_gate() -> None:
    gate = DeliveryGate()
    it = iter(_stream_with(range(3), gate, timeout_ms=50))
    gate.close("session")
    with pytest.raises(ConsumerTimeoutException, match="paused"):
        next(it)
    gate.open("session")
    assert [next(it).offset for _ in range(3)] == [0, 1, 2]  # nothing skipped by the wait


def test_two_threads_on_one_stream_get_each_message_once_and_both_stop_at_the_gate() -> None:
    """Not the legacy usage (one thread per stream), but it must not lose, repeat, or ignore
    the gate: chunk iterators made by different threads share the chunk's cursor and permit."""
    gate = DeliveryGate()
    q = ChunkQueue(4)
    info = PartitionTopicInfo("t", 0, q, 0, 0, 1 << 20, "cid", "c-0")
    stream: KafkaStream[bytes, bytes] = KafkaStream(q, 50, client_id="cid", gate=gate)
    per_chunk, chunks = 500, 40
    got: list[list[int]] = [[], []]
    paused = threading.Event()
    after_close: list[int] = []

    def drain(mine: list[int]) -> None:
        it = iter(stream)
        while True:
            try:
                for m in it:
                    if paused.is_set():
                        after_close.append(m.offset)
                    mine.append(m.offset)
                    if m.offset % 25 == 0:
                        time.sleep(0.001)  # slow: the gate closes with chunks half consumed
                return
            except ConsumerTimeoutException:
                continue

    def feed() -> None:
        for c in range(chunks):
            offs = range(c * per_chunk, (c + 1) * per_chunk)
            recs = [MessageAndMetadata("t", 0, o, None, b"", 0, CREATE_TIME) for o in offs]
            q.put(FetchedDataChunk(recs, info, offs.start))

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    threads = [threading.Thread(target=drain, args=(g,), daemon=True) for g in got]
    for t in threads:
        t.start()
    wait_until(lambda: sum(map(len, got)) > chunks * per_chunk // 3, 30, "a third consumed")
    gate.close("connection")
    paused.set()
    time.sleep(0.2)  # both threads meet the closed gate (an absence needs a duration)
    paused.clear()
    gate.open("connection")
    wait_until(lambda: info.consumed_offset == chunks * per_chunk, 30, "everything consumed")
    q.put_shutdown()
    for t in threads:
        t.join(10)
    delivered = sorted(got[0] + got[1])
    assert delivered == list(range(chunks * per_chunk))  # each message once
    # At most the message each thread had in hand when the gate closed.
    assert len(after_close) <= len(threads), f"handed out while closed: {after_close}"
