"""The message a stream hands out, and how columns of plain values become messages."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import repeat
from typing import Any, Generic, NamedTuple, TypeVar

K = TypeVar("K")
V = TypeVar("V")

#: tuple.__new__, called directly: a NamedTuple's own __new__ costs an argument parse.
_tuple_new = tuple.__new__

class MessageAndMetadata(NamedTuple, Generic[K, V]):
    """One message as the iterator hands it out (the original's ``MessageAndMetadata``).

    ``message`` is the decoded value (``value`` is an alias, so a message is also a valid
    fetched record). ``timestamp`` is in epoch milliseconds (-1 when the message has none);
    ``timestamp_type`` is one of :data:`NO_TIMESTAMP_TYPE`, :data:`CREATE_TIME`,
    :data:`LOG_APPEND_TIME`.
    """

    topic: str
    partition: int
    offset: int
    key: K
    message: V
    timestamp: int
    timestamp_type: int

    @property
    def value(self) -> V:
        return self.message


try:
    from zkconsumer._speedups import message_zipper
except ImportError:  # built without a C compiler (see setup.py): map/zip/tuple.__new__ do it
    message_zipper = None  # type: ignore[assignment]

#: ``zip_messages(*iterables)``: ``map(partial(tuple.__new__, MessageAndMetadata),
#: zip(*iterables))`` in one C object, without the zip's tuple, the map's call and
#: ``tuple.__new__``'s argument handling (about 50 ns a message less); None without
#: :mod:`zkconsumer._speedups`.
_zip_messages = None if message_zipper is None else message_zipper(MessageAndMetadata)


def make_messages(*iterables: Iterable[Any]) -> Iterator[MessageAndMetadata[Any, Any]]:
    """A ``MessageAndMetadata`` of each round of items of ``iterables`` (one per field, as
    ``zip`` takes them: in order, ending at the first that ends), made as it is taken, in C:
    each ``next()`` is one C call that runs no Python code of its own (see the module
    docstring for why the stream iterator needs that)."""
    zip_messages = _zip_messages
    if zip_messages is None:
        return map(_tuple_new, repeat(MessageAndMetadata), zip(*iterables, strict=False))
    return zip_messages(*iterables)


Decoder = Callable[[bytes], Any]
