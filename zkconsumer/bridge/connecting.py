"""The bridge's ZooKeeper session at start: connect (within ``--connect-timeout``, ending
early when the bridge is stopped), log in, and create a missing chroot, as a ZooKeeper-mode
broker did.

ZooKeeper security as for the command-line tools: the login of ``ZKCONSUMER_ZOOKEEPER_AUTH``,
and the ACL of ``ZKCONSUMER_ZOOKEEPER_ACL`` on every znode the client creates. A refused
login, a bad variable or an unreachable ZooKeeper raise :class:`~zkconsumer.ZkConsumerError`
(one line in the CLI).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException

from zkconsumer._errors import ZkConsumerError
from zkconsumer.bridge.zk_requests import _ZK_GONE, wait
from zkconsumer.zk.handler import kazoo_handler
from zkconsumer.zk.session import (
    check_kazoo_login,
    kazoo_security_kwargs,
    login_refusal,
    sasl_refused,
    security_config,
)

log = logging.getLogger("zkconsumer.bridge")


class _OutageFilter(logging.Filter):
    """kazoo logs every failed connection attempt at WARNING (``Connection dropped``,
    ``Connection time-out``, ``Cannot resolve``), about once a second while ZooKeeper is away,
    where the bridge says so once; and, as the connection retries never give up, "Failed
    connecting ... within the connection retry policy" only when the bridge stops while
    connecting. Those records of the bridge's own clients are demoted to DEBUG (dropped
    unless its logger is enabled for DEBUG); every other passes as it is."""

    _MESSAGES = frozenset({
        "Connection dropped: %s", "Connection time-out: %s", "Transition to CONNECTING",
        "Cannot resolve %s: %s",
        "Failed connecting to Zookeeper within the connection retry policy.",
    })

    def __init__(self) -> None:
        super().__init__()
        #: The last record demoted, as text: why a connect that timed out failed.
        self.last: str | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.WARNING or record.msg not in self._MESSAGES:
            return True
        if record.msg.startswith(("Connection dropped", "Connection time-out", "Cannot")):
            self.last = record.getMessage()
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


#: The logger of the bridge's kazoo clients: under "kazoo", so the levels set for kazoo
#: apply, but filtered apart from every other client's (the connector's keep their warnings).
KAZOO_LOG = logging.getLogger("kazoo.client.bridge")
_OUTAGES = _OutageFilter()
KAZOO_LOG.addFilter(_OUTAGES)

# As the connector and the tools: reconnect at least every second. kazoo's default backoff
# grows to an hour, so after a long outage the bridge came back minutes late.
_CONNECTION_RETRY: dict[str, Any] = {"max_tries": -1, "delay": 0.1, "max_delay": 1.0}


class _StoppedError(ZkConsumerError):
    """:meth:`Bridge.stop` was called while the bridge was connecting; never escapes run()."""


@dataclass(frozen=True)
class ZkTarget:
    """The ZooKeeper a bridge connects to, and how: ``environ`` (default ``os.environ``)
    holds the login and ACL variables; ``stop`` ends a connect under way."""

    connect: str
    connect_timeout_s: float
    request_timeout_s: float
    environ: Mapping[str, str] | None
    stop: threading.Event


def connect(target: ZkTarget, listener: Callable[[str], None]) -> KazooClient:
    """A started client, logged in and with the default ACL from the environment, its
    chroot created if missing; ZkConsumerError (one line, no traceback in the CLI) if that
    cannot be, _StoppedError when the bridge is stopped meanwhile."""
    config = security_config(target.connect, target.connect_timeout_s, target.environ)
    security: dict[str, Any] = {}
    if config is not None:
        security = kazoo_security_kwargs(config)
    zk = _start_client(target, target.connect, config, security, listener)
    try:
        if zk.chroot and wait(zk.exists_async("/"), zk.chroot, "access",
                              target.request_timeout_s, target.connect) is None:
            _make_chroot(target, zk.chroot, config, security)
    except BaseException as e:
        zk.stop()
        zk.close()
        if isinstance(e, (*_ZK_GONE, KazooException)):
            raise ZkConsumerError(f"cannot check the chroot {zk.chroot} on ZooKeeper at "
                                  f"{target.connect} ({type(e).__name__}: {e})") from None
        raise
    return zk


def _start_client(target: ZkTarget, hosts: str, config: Any, security: dict[str, Any],
                  listener: Callable[[str], None] | None = None) -> KazooClient:
    """A client of ``hosts`` started within ``--connect-timeout``. Not ``zk.start()``: it
    waits without looking at the stop flag, and SIGTERM must end a bridge waiting for
    ZooKeeper at start too."""
    try:
        zk = KazooClient(hosts=hosts, timeout=10.0, logger=KAZOO_LOG, handler=kazoo_handler(),
                         connection_retry=dict(_CONNECTION_RETRY), **security)
    except ValueError as e:
        raise ZkConsumerError(f"bad ZooKeeper address {target.connect!r}: {e}") from None
    if listener is not None:
        zk.add_listener(listener)
    _OUTAGES.last = None

    with login_refusal(zk) as refused:
        connected = zk.start_async()
        deadline = time.monotonic() + target.connect_timeout_s
        while not connected.wait(max(0.0, min(0.1, deadline - time.monotonic()))):
            if target.stop.is_set() or time.monotonic() >= deadline:
                zk.stop()
                zk.close()
                if target.stop.is_set():
                    raise _StoppedError("stopped while connecting to ZooKeeper")
                if refused.is_set() and config is not None and config.zk_sasl is not None:
                    # Refused before kazoo reported the connection: not a time-out.
                    raise ZkConsumerError(sasl_refused(config))
                # kazoo's own reason, demoted to DEBUG by _OutageFilter, is the one clue.
                why = f" (last attempt: {_OUTAGES.last})" if _OUTAGES.last else ""
                raise ZkConsumerError(
                    f"cannot connect to ZooKeeper at {target.connect} within "
                    f"{target.connect_timeout_s:g} s{why}"
                )
    if config is not None:
        try:
            check_kazoo_login(zk, config)  # stops the client when it raises
        except ZkConsumerError:
            zk.close()
            raise
    return zk


def _make_chroot(target: ZkTarget, chroot: str, config: Any, security: dict[str, Any]) -> None:
    """Create the missing chroot through a client without it, as a ZooKeeper-mode broker
    did at start (KafkaServer.initZk): until then every request in it fails (NoNode)."""
    hosts = target.connect.partition("/")[0]
    root = _start_client(target, hosts, config, security)
    try:
        wait(root.ensure_path_async(chroot), chroot, "ensure", target.request_timeout_s,
             target.connect)
    except (*_ZK_GONE, KazooException) as e:
        raise ZkConsumerError(f"cannot create the chroot {chroot} on ZooKeeper at {hosts} "
                              f"({type(e).__name__}: {e})") from None
    finally:
        root.stop()
        root.close()
    log.info("bridge: created the chroot %s on ZooKeeper %s", chroot, hosts)
