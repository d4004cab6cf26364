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
