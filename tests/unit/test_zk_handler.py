"""The kazoo handler's poll-based select answers as kazoo's own selector-based one does."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from kazoo.handlers.utils import selector_select

from zkconsumer import ConsumerConfig
from zkconsumer.consumer.connector import _kazoo_client
from zkconsumer.zk.handler import PollingHandler


@contextmanager
def socket_pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair()
    try:
        yield a, b
    finally:
        a.close()
        b.close()


def both(rlist: list[object], wlist: list[object], timeout: float | None = 0.0
         ) -> tuple[object, object]:
    return (PollingHandler().select(rlist, wlist, [], timeout),
            selector_select(rlist, wlist, [], timeout))


def test_nothing_ready_within_the_timeout() -> None:
    with socket_pair() as (a, _):
        ours, kazoos = both([a], [], 0.01)
        assert ours == kazoos == ([], [], [])


def test_readable_and_writable_files() -> None:
    with socket_pair() as (a, b):
        b.send(b"x")
        ours, kazoos = both([a], [b])
        assert ours == kazoos == ([a], [b], [])


def test_a_file_ready_both_ways_is_reported_readable_only() -> None:
    with socket_pair() as (a, b):
        b.send(b"x")
        ours, kazoos = both([a], [a])
        assert ours == kazoos == ([a, a], [], [])


def test_a_closed_peer_makes_the_socket_readable() -> None:
    with socket_pair() as (a, b):
        b.close()
        ours, kazoos = both([a], [])
        assert ours == kazoos == ([a], [], [])


def test_file_descriptors_as_integers() -> None:
    with socket_pair() as (a, b):
        b.send(b"x")
        ours, kazoos = both([a.fileno()], [])
        assert ours == kazoos == ([a.fileno()], [], [])


def test_bad_arguments_fail_as_kazoo_fails() -> None:
    with socket_pair() as (a, _):
        with pytest.raises(ValueError):
            PollingHandler().select([a], [], [], -1)
        with pytest.raises(ValueError):
            selector_select([a], [], [], -1)
    closed = socket.socket()
    closed.close()
    with pytest.raises(TypeError):
        PollingHandler().select([closed], [], [], 0)
    with pytest.raises(TypeError):
        selector_select([closed], [], [], 0)


def test_the_consumers_zookeeper_client_uses_it() -> None:
    client = _kazoo_client(ConsumerConfig({"zookeeper.connect": "127.0.0.1:1",
                                           "group.id": "g"}), "g_test")
    try:
        assert isinstance(client.handler, PollingHandler)
    finally:
        client.close()
