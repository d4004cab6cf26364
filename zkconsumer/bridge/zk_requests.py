"""The bridge's ZooKeeper requests, each waited for at most ``request_timeout_s``.

kazoo's synchronous calls wait for ever while the connection is down, and then
:meth:`~zkconsumer.bridge.Bridge.stop` could not end the bridge: so every request is made
asynchronously and its answer awaited here. A request given up on stays queued in kazoo and
may still run once the connection is back: the caller's round fails, and the next one
rewrites everything after it.
"""

from __future__ import annotations

from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss, NoAuthError, NoNodeError, SessionExpiredError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.interfaces import IAsyncResult

from zkconsumer._errors import ZooKeeperRefusedError

# What a ZooKeeper request raises when the connection is gone.
_ZK_GONE = (KazooTimeoutError, ConnectionLoss, SessionExpiredError)


def wait(result: IAsyncResult, path: str, op: str, timeout_s: float, connect: str) -> Any:
    """The answer of a request on ``path``, or KazooTimeoutError after ``timeout_s``.
    NoAuth becomes :class:`ZooKeeperRefusedError` (of ZooKeeper ``connect``): kazoo's error
    does not say which znode's ACL is at fault. ``op``: ``create``, ``delete``, ``ensure``
    (``ensure_path``) or ``access`` (the rest), for that error."""
    try:
        return result.get(timeout=timeout_s)
    except NoAuthError:
        raise ZooKeeperRefusedError(connect, path, op) from None


class Requests:
    """The requests of one bridge on its client (``client``: set once connected)."""

    def __init__(self, connect: str, timeout_s: float) -> None:
        self.connect = connect
        self.timeout_s = timeout_s
        self.client: KazooClient | None = None

    @property
    def zk(self) -> KazooClient:
        assert self.client is not None, "the bridge is not connected"
        return self.client

    def wait(self, result: IAsyncResult, path: str, op: str = "access") -> Any:
        """As :func:`wait`, with this bridge's time limit."""
        return wait(result, path, op, self.timeout_s, self.connect)

    def answer(self, result: IAsyncResult, path: str) -> Any:
        """The answer of a read of ``path``; None when the znode does not exist."""
        try:
            return self.wait(result, path)
        except NoNodeError:
            return None

    def delete(self, path: str, recursive: bool = False) -> None:
        zk = self.zk
        try:
            if recursive:
                for child in self.wait(zk.get_children_async(path), path):
                    self.delete(f"{path}/{child}", recursive=True)
            self.wait(zk.delete_async(path), path, "delete")
        except NoNodeError:
            pass
