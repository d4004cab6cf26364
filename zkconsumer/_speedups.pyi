"""Type stubs of the optional C module (see _speedups.c)."""

from collections.abc import Callable, Iterator
from typing import Any

def message_zipper(cls: type[tuple[Any, ...]]) -> Callable[..., Iterator[Any]]:
    """zip_messages(*iterables: Iterable[Any]) -> Iterator[cls]"""
    ...
def split_messages(
    messages: list[Any], timestamp_types: tuple[int, ...]
) -> tuple[
    list[tuple[str, int, list[int], list[Any], list[Any], list[int], list[int]]], list[Any]
]: ...

class LeaseDeadline:
    """A deadline (_gate.lease_clock() seconds) that lease permits read at every item."""

    deadline: float

def lease_permit(item: str, n: int, deadline: LeaseDeadline) -> Iterator[str]:
    """item up to n times, each while _gate.lease_clock() < deadline.deadline."""
    ...
