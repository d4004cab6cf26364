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
