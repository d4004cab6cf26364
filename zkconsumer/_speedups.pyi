"""Type stubs of the optional C module (see _speedups.c)."""

from collections.abc import Callable
from typing import Any

def message_maker(cls: type[tuple[Any, ...]]) -> Callable[[tuple[Any, ...]], Any]: ...
def split_messages(
    messages: list[Any], timestamp_types: tuple[int, ...]
) -> tuple[
    list[tuple[str, int, list[int], list[Any], list[Any], list[int], list[int]]], list[Any]
]: ...
