"""Small value types shared by every module."""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    """A topic and a partition number; sorts by topic, then partition as a number."""

    topic: str
    partition: int

    def __str__(self) -> str:
        # Kafka's TopicAndPartition.toString, which roundrobin hashes: "[topic,partition]".
        return f"[{self.topic},{self.partition}]"


def partition_lag(offset: int | None, log_end_offset: int | None) -> int | None:
    """Messages between ``offset`` (the next offset to consume) and the log end.

    None when either is unknown (nothing committed, or the log end could not be read); a
    negative offset (-1, "no offset" in the legacy stores) counts as unknown. Never
    negative: an offset past the log end (a log truncated under it) has lag 0, because
    there is nothing left to consume; the consumer resets it by ``auto.offset.reset``.

    >>> partition_lag(3, 10), partition_lag(None, 10), partition_lag(12, 10)
    (7, None, 0)
    """
    if offset is None or log_end_offset is None or offset < 0 or log_end_offset < 0:
        return None
    return max(0, log_end_offset - offset)
