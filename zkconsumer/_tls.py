"""A deadline on TLS handshakes of kafka-python clients.

kafka-python 3 waits for the peer's answer to its TLS handshake with no limit
(``KafkaSSLTransport.handshake`` waits for the socket to become readable, and its bootstrap
timeout does not end that wait). A peer that accepts the connection and never answers, such as
a plaintext listener that waits for the rest of what it reads as a huge request, so hangs
every client configured with ``security.protocol=SSL`` or ``SASL_SSL``. A Kafka broker's
plaintext listener closes such a connection; others (some Kafka-protocol brokers, proxies, a
wrong port) do not.

:func:`with_tls_deadline` gives a client kafka-python's own SSL context (built by
kafka-python from the same ``ssl_*`` settings), with one change: its sockets shut themselves
down when a handshake has not finished within :data:`HANDSHAKE_TIMEOUT_S`. The shutdown
makes the socket readable, so kafka-python's wait ends, its handshake fails and the client
goes on as after any failed connection (retries, then its own bootstrap or request timeout).
The handshake itself stays kafka-python's, non-blocking, in its network thread.

It also loads the certificate files when the client's settings are made, so a missing or
unreadable ``ssl.cafile``, ``ssl.certfile`` or ``ssl.keyfile`` is a :class:`ConfigError` then,
as librdkafka makes it for the confluent backend, rather than a connection failure retried
for ever.
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
from collections.abc import Mapping
from typing import Any

from zkconsumer._errors import ConfigError

log = logging.getLogger("zkconsumer.tls")

#: Seconds a TLS handshake may take before the socket gives up.
HANDSHAKE_TIMEOUT_S = 10.0

_TLS_PROTOCOLS = ("SSL", "SASL_SSL")


class _DeadlineSSLSocket(ssl.SSLSocket):
    """An SSLSocket whose first ``do_handshake`` starts a timer; the handshake's completion
    cancels it, and if it fires first it shuts the socket down (see the module docstring) and
    the next ``do_handshake`` raises ``TimeoutError`` (an OSError, as kafka-python expects of
    a failed handshake).

    ``_zkc_timer`` is set once, by the thread that drives the handshake; the timer thread
    sets ``_zkc_expired`` and shuts the socket down, which is safe while another thread
    waits on it.
    """

    _zkc_timer: threading.Timer | None = None
    _zkc_expired: float | None = None  # the deadline that passed, once it has

    def do_handshake(self, block: bool = False) -> None:
        if self._zkc_timer is None:
            timeout = HANDSHAKE_TIMEOUT_S
            timer = threading.Timer(timeout, self._zkc_give_up, args=(timeout,))
            timer.daemon = True
            timer.name = "zkconsumer-tls-deadline"
            self._zkc_timer = timer
            timer.start()
        expired = self._zkc_expired
        if expired is not None:
            raise TimeoutError(
                f"no TLS handshake answer within {expired:g} s (is it a plaintext listener? "
                "security.protocol asks for TLS)"
            )
        super().do_handshake(block)
        self._zkc_timer.cancel()  # reached only once the handshake is complete

    def _zkc_give_up(self, timeout: float) -> None:
        if self.fileno() == -1:
            return  # closed already (the handshake failed otherwise): nothing to end
        try:
            host, port = self.getpeername()[:2]
            peer = f"{host}:{port}"
        except OSError:
            peer = "the broker"
        log.warning("no TLS handshake answer from %s within %g s; giving up this connection",
                    peer, timeout)
        self._zkc_expired = timeout
        try:
            # The plain socket's shutdown: it wakes whoever waits to read, and leaves the TLS
            # state alone (SSLSocket.shutdown would drop it under that reader).
            socket.socket.shutdown(self, socket.SHUT_RDWR)
        except OSError:
            pass  # closed meanwhile


def with_tls_deadline(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """``kwargs`` (kafka-python client arguments) with ``ssl_context`` set to kafka-python's
    own context for these settings, whose handshakes have a deadline, when
    ``security_protocol`` uses TLS and no ``ssl_context`` is given; otherwise unchanged.
    A ConfigError when the certificate files do not load."""
    out = dict(kwargs)
    if out.get("security_protocol") not in _TLS_PROTOCOLS or out.get("ssl_context") is not None:
        return out
    try:
        from kafka.net.transport import KafkaSSLTransport

        build = KafkaSSLTransport._build_ssl_context
        settings = dict(KafkaSSLTransport.DEFAULT_CONFIG)
    except (ImportError, AttributeError):  # another kafka-python layout: no deadline, then
        log.debug("kafka-python's SSL context builder not found; no TLS handshake deadline")
        return out
    settings.update((k, v) for k, v in out.items() if k in settings)
    try:
        context = build(settings)
    except OSError as e:  # ssl.SSLError and FileNotFoundError are OSErrors
        files = ", ".join(
            f"{name.replace('_', '.')}={settings[name]}"
            for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile") if settings.get(name)
        )
        raise ConfigError(
            f"the TLS settings do not load ({files or 'the default certificates'}): {e}"
        ) from None
    context.sslsocket_class = _DeadlineSSLSocket
    out["ssl_context"] = context
    return out


__all__ = ["HANDSHAKE_TIMEOUT_S", "with_tls_deadline"]
