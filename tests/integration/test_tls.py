"""The TLS handshake deadline of kafka-python clients (``zkconsumer._tls``)."""

from __future__ import annotations

import select
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import StackInfo, self_signed_cert, wait_until
from zkconsumer import _tls as _tls
from zkconsumer._errors import AdminError, ConfigError
from zkconsumer._tls import with_tls_deadline
from zkconsumer.zk.session import command_config


@pytest.fixture
def cert(tmp_path: Path) -> tuple[str, str]:
    return self_signed_cert(tmp_path)


@pytest.fixture
def silent_peer() -> Iterator[tuple[str, int]]:
    """A listener that accepts connections (the kernel does) and never says a word."""
    server = socket.create_server(("127.0.0.1", 0), backlog=32)
    try:
        yield server.getsockname()[:2]
    finally:
        server.close()


def _client_socket(addr: tuple[str, int], context: ssl.SSLContext) -> ssl.SSLSocket:
    # As kafka-python makes it: non-blocking, the handshake driven by hand.
    sock = socket.create_connection(addr, timeout=5)
    sock.setblocking(False)
    return context.wrap_socket(sock, server_hostname=addr[0], do_handshake_on_connect=False)


def test_plaintext_and_given_contexts_are_left_alone() -> None:
    plain = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN"}
    assert with_tls_deadline(plain) == plain
    mine = ssl.create_default_context()
    assert with_tls_deadline({"security_protocol": "SSL", "ssl_context": mine})[
        "ssl_context"] is mine


def test_certificate_files_that_do_not_load_are_a_config_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.pem"
    with pytest.raises(ConfigError, match=f"ssl.cafile={missing}"):
        with_tls_deadline({"security_protocol": "SSL", "ssl_cafile": str(missing)})
    props = tmp_path / "client.properties"
    props.write_text(f"security.protocol=SSL\nssl.cafile={missing}\n")
    with pytest.raises(AdminError, match=f"^{props}: the TLS settings do not load"):
        command_config(str(props))


def test_a_tls_peer_completes_the_handshake(cert: tuple[str, str]) -> None:
    crt, key = cert
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(crt, key)
    server = socket.create_server(("127.0.0.1", 0))
    errors: list[BaseException] = []

    def serve() -> None:
        try:
            conn, _ = server.accept()
            with server_ctx.wrap_socket(conn, server_side=True) as tls:
                tls.sendall(b"hello")
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        kwargs = with_tls_deadline({"security_protocol": "SSL", "ssl_cafile": crt})
        tls = _client_socket(server.getsockname()[:2], kwargs["ssl_context"])
        with tls:
            while True:
                try:
                    tls.do_handshake()
                    break
                except ssl.SSLWantReadError:
                    select.select([tls], [], [], 5)
            assert tls.version() is not None  # verified against the CA file, as configured
            timer = tls._zkc_timer
            assert timer is not None
            wait_until(lambda: not timer.is_alive(), 5, "the deadline cancelled")
            select.select([tls], [], [], 5)
            assert tls.recv(5) == b"hello"
        thread.join(5)
        assert errors == []
    finally:
        server.close()


def test_a_silent_peer_ends_the_handshake_at_the_deadline(
    silent_peer: tuple[str, int], monkeypatch: Any
) -> None:
    monkeypatch.setattr(_tls, "HANDSHAKE_TIMEOUT_S", 0.5)
    context = with_tls_deadline({"security_protocol": "SSL"})["ssl_context"]
    tls = _client_socket(silent_peer, context)
    with tls:
        start = time.monotonic()
        with pytest.raises(ssl.SSLWantReadError):
            tls.do_handshake()
        # What kafka-python waits for: the socket becoming readable. It does, at the deadline.
        readable, _, _ = select.select([tls], [], [], 10)
        assert readable and time.monotonic() - start < 5
        with pytest.raises(TimeoutError, match="no TLS handshake answer within 0.5 s"):
            tls.do_handshake()


def test_a_connection_closed_before_the_deadline_is_not_reported(
    silent_peer: tuple[str, int], monkeypatch: Any, caplog: Any
) -> None:
    monkeypatch.setattr(_tls, "HANDSHAKE_TIMEOUT_S", 0.2)
    context = with_tls_deadline({"security_protocol": "SSL"})["ssl_context"]
    tls = _client_socket(silent_peer, context)
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    timer = tls._zkc_timer
    assert timer is not None
    tls.close()  # as kafka-python closes a connection it gives up for another reason
    timer.join(5)
    assert not timer.is_alive()
    assert "no TLS handshake answer" not in caplog.text


def test_ssl_settings_against_a_plaintext_broker_fail_instead_of_hanging(
    stack: StackInfo, tmp_path: Path, monkeypatch: Any
) -> None:
    # Kafka's plaintext listener closes the connection on a TLS hello; listeners that read it
    # as the start of a huge request wait for the rest, and without the deadline
    # kafka-python's handshake would wait for ever (test_a_silent_peer_* covers those).
    from zkconsumer._errors import MigrationError
    from zkconsumer.broker.clients import modern_admin

    monkeypatch.setattr(_tls, "HANDSHAKE_TIMEOUT_S", 1.0)
    props = tmp_path / "client.properties"
    props.write_text("security.protocol=SSL\n")
    outcome: list[BaseException | None] = []

    def connect() -> None:
        try:
            modern_admin(stack.bootstrap, bootstrap_timeout_ms=3000,
                         kafka=command_config(str(props))).close()
            outcome.append(None)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            outcome.append(e)

    thread = threading.Thread(target=connect, daemon=True)
    thread.start()
    thread.join(60)
    assert not thread.is_alive(), "the SSL client still hangs after 60 s"
    assert isinstance(outcome[0], MigrationError)
    assert f"cannot connect to the brokers at {stack.bootstrap}" in str(outcome[0])
