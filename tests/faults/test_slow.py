"""A slow application thread: memory stays bounded and the other streams keep their pace."""

from __future__ import annotations

import pytest

from tests.support import produce
from tools.fault_harness import TP, wait_until

VALUE = b"v" * 1000
PER_PARTITION = 2000
FETCH_BYTES = 16384


@pytest.mark.parametrize("backend", ["kafka-python", "confluent"])
def test_slow_stream_is_bounded_and_does_not_hold_back_the_others(
        backend, stack, names, topic_factory, fault_run, report) -> None:
    topic = topic_factory(names.topic, 2)
    run = fault_run(stack, topic, 2)
    produce(stack.bootstrap, topic, ((i % 2, None, VALUE) for i in range(2 * PER_PARTITION)))
    # range: partition 0 -> stream 0 (slow: 20 ms per message), partition 1 -> stream 1.
    member = run.add_member(streams=2, delays=(0.02, 0.0), fetch_message_max_bytes=FETCH_BYTES,
                            queued_max_message_chunks=2, fetch_backend=backend)
    c = member.connector
    infos = c.partition_infos()
    slow, fast = infos[TP(topic, 0)], infos[TP(topic, 1)]
    # With kafka-python one chunk holds at most what one fetch response carries for a
    # partition; some brokers fill a response up to the request's limit
    # (4 x fetch.message.max.bytes here). A chunk held back by the full queue is not counted:
    # the fetched offset passes it only once it is queued.
    per_chunk = 4 * FETCH_BYTES // len(VALUE) + 1
    bound = (2 + 1) * per_chunk  # queued chunks, the iterator's chunk
    ahead = []

    def fast_done() -> bool:
        ahead.append(slow.fetched_offset - slow.consumed_offset)
        return fast.consumed_offset >= PER_PARTITION

    # Alone, the fast stream needs about a second for its partition; paced by the slow one
    # (one chunk of each per fetch) it needs 40 s.
    wait_until(fast_done, 10, "the fast stream consuming its whole partition", every=0.1)
    slow_progress = slow.consumed_offset
    r = report(run.verify(expected=[(topic, 1, o) for o in range(PER_PARTITION)]),
               f"slow stream at {slow_progress}/{PER_PARTITION} when the fast one finished; "
               f"slow partition fetched ahead by at most {max(ahead)} "
               f"({f'bound {bound}' if backend == 'kafka-python' else 'not checked'})")
    # The fast stream did not wait for the slow one...
    assert slow_progress < PER_PARTITION // 4, slow_progress
    # ...and the slow partition is not fetched further ahead than its queue can hold. (With
    # confluent a chunk is whatever librdkafka prefetched for the partition between two
    # polls, up to queued.max.messages.kbytes: no bound this small holds for it.)
    if backend == "kafka-python":
        assert max(ahead) <= bound, (max(ahead), bound)
    assert all(q.qsize() <= 2 for q in c._subscription.all_queues())
    assert r.duplicates == 0
