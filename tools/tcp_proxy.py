"""A loopback TCP proxy whose forwarding can be cut: one member's own path to ZooKeeper.

    with TcpProxy("127.0.0.1", 2181) as proxy:   # listens on 127.0.0.1:<proxy.port>
        proxy.cut()      # nothing goes through either way, nor do new connections
        proxy.restore()  # what was held goes through again

A cut holds the bytes (the connections stay open, new ones wait unanswered), as a network
that drops every packet for a while: the client hears nothing, its session expires on the
server, and whatever it sent meanwhile reaches ZooKeeper only once the cut ends. Loopback
only. One thread accepts; two threads pump each connection. ``_lock`` guards ``_conns``;
``_open`` (an Event) is set while bytes may flow.
"""

from __future__ import annotations

import select
import socket
import threading


class TcpProxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._open = threading.Event()
        self._open.set()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._conns: list[socket.socket] = []
        self._accepter = threading.Thread(target=self._accept, daemon=True,
                                          name=f"proxy-{self.port}")
        self._accepter.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cut(self) -> None:
        self._open.clear()

    def restore(self) -> None:
        self._open.set()

    def close(self) -> None:
        self._stop.set()
        self._open.set()
        self._listener.close()
        with self._lock:
            conns, self._conns = self._conns, []
        for s in conns:
            try:
                s.close()
            except OSError:
                pass
        self._accepter.join(5)

    def __enter__(self) -> TcpProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select([self._listener], [], [], 0.1)
                if not ready:
                    continue
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._connect, args=(client,), daemon=True).start()

    def _connect(self, client: socket.socket) -> None:
        # A connection made during a cut waits for its end before it reaches ZooKeeper.
        while not self._open.wait(0.1):
            if self._stop.is_set():
                client.close()
                return
        try:
            upstream = socket.create_connection(self.upstream, timeout=5)
        except OSError:
            client.close()
            return
        with self._lock:
            self._conns += [client, upstream]
        for a, b in ((client, upstream), (upstream, client)):
            threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while not self._stop.is_set():
                if not self._open.wait(0.1):
                    continue  # cut: the bytes wait in the kernel's buffers
                ready, _, _ = select.select([src], [], [], 0.1)
                if not ready or not self._open.is_set():
                    continue
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except (OSError, ValueError):  # ValueError: the other direction closed the socket
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


__all__ = ["TcpProxy"]
