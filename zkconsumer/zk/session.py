"""ZooKeeper sessions: the login (digest, SASL) and ACL settings, connecting with checks.

The consumer and the tools both connect through here: :func:`kazoo_security_kwargs` turns a
:class:`~zkconsumer.ConsumerConfig` into kazoo's arguments, :func:`check_kazoo_login`
makes a refused login fail at once (kazoo would retry it for ever), and :func:`connect`
is the tools' connection (a session within a timeout, or one line saying why not). Nothing
here starts a thread of its own; kazoo's handler does.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss, KazooException, SessionExpiredError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KeeperState

from zkconsumer._config import ConsumerConfig
from zkconsumer._config_keys import CONFIG_KEYS, JAVA_INT_MAX
from zkconsumer._errors import (
    AclRefusedError,
    AdminError,
    ConfigError,
    ZkConsumerError,
    ZooKeeperUnreachableError,
)
from zkconsumer._properties import read_properties
from zkconsumer._tls import with_tls_deadline
from zkconsumer.zk.handler import kazoo_handler


def acl_refused(
    zk: KazooClient, verb: str, path: str, what: str = "", told: str = ""
) -> AclRefusedError:
    """The error for a NoAuth answer to ``verb`` (create, delete, write, read) on ``path``.

    kazoo's NoAuthError carries no path; this names it, and the znode whose ACL decides:
    the parent's for create and delete, the znode's own otherwise. ``what``: the operation,
    said first (the tools leave it out: their prefix names the command); ``told``: what the
    failed write left behind, said last.
    """
    path = zk.unchroot(path)
    judge = (path.rsplit("/", 1)[0] or "/") if verb in ("create", "delete") else path
    prefix = f"{what}: " if what else ""
    suffix = f"; {told}" if told else ""
    return AclRefusedError(
        f"{prefix}ZooKeeper refused to {verb} {path}: the ACL of {judge} does not allow this "
        f"client (NoAuth); set {AUTH_ENV} to credentials it grants (e.g. digest:user:password)"
        f"{suffix}"
    )


#: The environment variable with the tools' ZooKeeper login: ``zookeeper.auth``'s syntax.
AUTH_ENV = "ZKCONSUMER_ZOOKEEPER_AUTH"
#: The environment variable with the ACL of the znodes the tools create: ``zookeeper.acl``'s.
ACL_ENV = "ZKCONSUMER_ZOOKEEPER_ACL"
_SECURITY_ENV = {AUTH_ENV: "zookeeper.auth", ACL_ENV: "zookeeper.acl"}

#: The tools' ``--help`` epilog about :data:`AUTH_ENV` and :data:`ACL_ENV`.
SECURITY_HELP = (
    f"ZooKeeper login and ACL come from the environment, never from options (which show in "
    f"ps): {AUTH_ENV}=digest:USER:PASSWORD and/or sasl:USER:PASSWORD (as zookeeper.auth); "
    f"{ACL_ENV}=SCHEME:ID:PERMS,... or creator (as zookeeper.acl), the ACL of every znode "
    f"the command creates."
)

# Keys ConsumerConfig requires, to validate the environment variables through it.
_VALIDATION_BASE = {"zookeeper.connect": "localhost:2181", "group.id": "zkconsumer-tools"}


def security_settings(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``zookeeper.auth`` / ``zookeeper.acl`` from :data:`AUTH_ENV` / :data:`ACL_ENV`.

    ``environ`` defaults to ``os.environ``; unset or blank variables are left out. Each
    value is checked by the config key's own validation (a ConsumerConfig is built with
    it); a bad one raises AdminError naming the variable, with credentials redacted.
    """
    env = os.environ if environ is None else environ
    out: dict[str, str] = {}
    for var, key in _SECURITY_ENV.items():
        value = env.get(var)
        if value is None or not value.strip():
            continue
        try:
            ConsumerConfig({**_VALIDATION_BASE, key: value})
        except ConfigError as e:
            raise AdminError(f"{var}: {e}") from None
        out[key] = value
    return out


def security_config(
    zookeeper: str, timeout_s: float, environ: Mapping[str, str] | None
) -> ConsumerConfig | None:
    """The ConsumerConfig whose zookeeper.auth/acl the tools' (and the bridge's) client uses
    (None: neither variable set), with ``zookeeper.connect`` and the timeout of this
    connection so that :func:`~zkconsumer.consumer.connector.check_kazoo_login` waits and reports as
    it should."""
    security = security_settings(environ)
    if not security:
        return None
    timeout_ms = int(min(max(timeout_s * 1000, 1), JAVA_INT_MAX))
    try:
        return ConsumerConfig({
            "zookeeper.connect": zookeeper, "group.id": _VALIDATION_BASE["group.id"],
            "zookeeper.connection.timeout.ms": timeout_ms, **security,
        })
    except ConfigError as e:  # the variables are valid: the address is not
        raise AdminError(f"bad ZooKeeper address {zookeeper!r}: {e}") from None


#: ``--command-config``'s help.
COMMAND_CONFIG_HELP = (
    "properties file with the brokers' security settings (security.protocol, ssl.*, "
    "sasl.*), as Kafka's tools take one"
)

#: The keys a ``--command-config`` file may hold: the brokers' security settings.
COMMAND_CONFIG_KEYS = tuple(
    k.name for k in CONFIG_KEYS if k.kafka_kwarg is not None and k.name != "client.id"
)


def command_config(path: str | None) -> dict[str, Any]:
    """The kafka-python arguments of a ``--command-config`` properties file (as Kafka's
    tools take one): the brokers' security settings, :data:`COMMAND_CONFIG_KEYS`, each
    checked as ConsumerConfig checks it. Any other key is an AdminError naming it: a typo
    must not leave a tool talking plaintext to a secured cluster. ``None``: no file, ``{}``.
    """
    if path is None:
        return {}
    try:
        return kafka_security(_read_command_config(path)[1])
    except ConfigError as e:
        raise AdminError(f"{path}: {e}") from None


def kafka_security(config: ConsumerConfig) -> dict[str, Any]:
    """The brokers' security settings of ``config`` as the tools' kafka-python clients take
    them (what :func:`command_config` makes of a file; the console consumer's come from its
    connector's config). ConfigError when its certificate files do not load."""
    kwargs = config.kafka_client_kwargs()
    kwargs.pop("client_id", None)
    return with_tls_deadline(kwargs)


def command_config_properties(path: str | None) -> dict[str, str]:
    """The properties of a ``--command-config`` file as ConsumerConfig keys, checked as
    :func:`command_config` checks them (what a connector built from the file takes)."""
    return {} if path is None else _read_command_config(path)[0]


def _read_command_config(path: str) -> tuple[dict[str, str], ConsumerConfig]:
    """The file's properties, and the ConsumerConfig that checked them."""
    try:
        props = read_properties(path)
    except ConfigError as e:
        raise AdminError(str(e)) from None
    other = sorted(set(props) - set(COMMAND_CONFIG_KEYS))
    if other:
        raise AdminError(
            f"{path}: {', '.join(other)}: not a broker security setting (a command config "
            f"holds only {', '.join(COMMAND_CONFIG_KEYS)})"
        )
    try:
        return props, ConsumerConfig({**_VALIDATION_BASE, **props})
    except ConfigError as e:
        raise AdminError(f"{path}: {e}") from None


def _check_login(client: KazooClient, config: ConsumerConfig, timeout_s: float) -> None:
    """Whether ZooKeeper accepted the login of :data:`AUTH_ENV` (as the connector checks
    it); AdminError if not."""
    # which import this module

    try:
        check_kazoo_login(client, config)
    except ZkConsumerError as e:
        raise AdminError(f"{AUTH_ENV}: {e}") from None


def _endpoint_problem(host: str, port: int, timeout_s: float) -> str | None:
    """Why nothing answers a TCP connection to ``host:port``, or None when something does.

    A refused connection or a name that does not resolve is known at once: the tools say
    so instead of waiting out their whole time-out, as their client libraries do."""
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
        return None
    except socket.gaierror:
        return f"cannot resolve host {host!r}"
    except TimeoutError:
        return f"no answer within {timeout_s:g} s"
    except OSError as e:
        return (e.strerror or str(e)).lower() if e.errno is not None else str(e)


def zookeeper_endpoints(connect: str) -> list[tuple[str, str, int]]:
    """The (entry, host, port) of a ZooKeeper connect string ``host[:port],...[/chroot]``
    (port 2181 when omitted, as kazoo takes it); AdminError naming a bad one."""
    hosts = connect.strip().split("/", 1)[0]
    out = []
    for entry in (e.strip() for e in hosts.split(",") if e.strip()):
        host, sep, port = entry.rpartition(":")
        if not sep or "]" in port:  # "host", "[::1]"
            host, port = entry, "2181"
        host = host.strip("[]")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise AdminError(f"bad ZooKeeper address {entry!r} in {connect!r} "
                             "(expected host:port)")
        out.append((entry, host, int(port)))
    if not out:
        raise AdminError(f"bad ZooKeeper address {connect!r}: no host:port in it")
    return out


def unreachable_endpoints(
    endpoints: Sequence[tuple[str, str, int]], timeout_s: float
) -> str | None:
    """None when one of ``endpoints`` accepts a TCP connection, else why each does not
    ("a:1: connection refused; b:2: cannot resolve host 'b'")."""
    problems = []
    for entry, host, port in endpoints:
        problem = _endpoint_problem(host, port, max(timeout_s / len(endpoints), 0.5))
        if problem is None:
            return None
        problems.append(f"{entry}: {problem}" if len(endpoints) > 1 else problem)
    return "; ".join(problems)


def zookeeper_failure(zookeeper: str | None, connect_timeout_s: float | None,
                      e: BaseException) -> str:
    """One line for a kazoo exception: which ZooKeeper, and what failed (kazoo's exceptions
    often have no text of their own)."""
    text = f"{type(e).__name__} {e}".rstrip()
    if isinstance(e, ConnectionLoss | SessionExpiredError | KazooTimeoutError):
        within = "" if connect_timeout_s is None else f" within {connect_timeout_s:g} s"
        text += f" (the connection was lost mid-command and not re-established{within})"
    return f"ZooKeeper at {zookeeper} failed: {text}" if zookeeper else f"ZooKeeper failed: {text}"


# A logger of its own for the tools' kazoo client: kazoo logs each failed connection
# attempt, which would bury the one-line "cannot connect" error under a screen of retries.
_kazoo_log = logging.getLogger("zkconsumer.admin.kazoo")


def connect(
    zookeeper: str, timeout_s: float = 10.0, environ: Mapping[str, str] | None = None
) -> KazooClient:
    """A started kazoo client for ``zookeeper`` (``host:port,...[/chroot]``).

    Waits at most ``timeout_s`` for a session; raises :class:`ZooKeeperUnreachableError`
    naming the address otherwise. If the connection is lost later, the client tries to
    reconnect for ``timeout_s``, then closes: the waiting request raises ``ConnectionLoss``.
    Logs in with :data:`AUTH_ENV` and gives every znode it creates the ACL of :data:`ACL_ENV`
    (read from ``environ``, default ``os.environ``), as the connector does with
    ``zookeeper.auth`` / ``zookeeper.acl``; a refused login is an AdminError naming the
    variable, never showing the credentials. The caller stops and closes the client.
    """
    if not zookeeper or not zookeeper.strip():
        raise AdminError("--zookeeper is empty")
    config = security_config(zookeeper.strip(), timeout_s, environ)
    # Refused or unresolvable: said at once, not after timeout_s of kazoo's retries.
    problem = unreachable_endpoints(zookeeper_endpoints(zookeeper), timeout_s)
    if problem is not None:
        raise ZooKeeperUnreachableError(f"cannot connect to ZooKeeper at {zookeeper}: "
                                        f"{problem}")
    security: dict[str, Any] = {}
    if config is not None:

        security = kazoo_security_kwargs(config)
    previous = _kazoo_log.level
    _kazoo_log.setLevel(logging.CRITICAL)
    try:
        try:
            client = KazooClient(
                hosts=zookeeper.strip(),
                timeout=max(timeout_s, 1.0),
                # A ZooKeeper gone mid-command: after timeout_s of failed reconnects the client
                # closes and the request waiting fails (kazoo would otherwise wait for ever).
                connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 1.0,
                                  "deadline": max(timeout_s, 1.0)},
                command_retry={"max_tries": 3, "delay": 0.1, "max_delay": 1.0},
                logger=_kazoo_log,
                handler=kazoo_handler(),
                **security,
            )
        except (ValueError, KazooException) as e:
            raise AdminError(f"bad ZooKeeper address {zookeeper!r}: {e}") from e

        try:
            with warnings.catch_warnings(), login_refusal(client) as refused:
                # kazoo warns when the chroot does not exist (a typo in the connect string):
                # the tools say so in one line instead (check_chroot).
                warnings.simplefilter("ignore", UserWarning)
                client.start(timeout=timeout_s)
        except (KazooTimeoutError, KazooException, OSError) as e:
            client.stop()
            client.close()
            if refused.is_set() and config is not None and config.zk_sasl is not None:
                # Refused before kazoo reported the connection: not a time-out.
                raise AdminError(f"{AUTH_ENV}: {sasl_refused(config)}") from None
            raise ZooKeeperUnreachableError(
                f"cannot connect to ZooKeeper at {zookeeper} within {timeout_s:g} s"
            ) from e
        if config is not None:
            try:
                _check_login(client, config, timeout_s)
            except (AdminError, KazooTimeoutError, KazooException) as e:
                client.stop()
                client.close()
                if isinstance(e, AdminError):
                    raise
                raise ZooKeeperUnreachableError(
                    f"cannot connect to ZooKeeper at {zookeeper} within {timeout_s:g} s"
                ) from e
    finally:
        # Still quiet during the login check: kazoo logs a refused login as a warning.
        _kazoo_log.setLevel(previous)
    return client


def _no_chroot(chroot: str) -> str:
    """Why nothing is there to read and nothing can be created: the chroot is missing."""
    return f"the chroot {chroot} of the connect string does not exist"


def check_chroot(zk: KazooClient) -> None:
    """AdminError when the chroot of ``zk``'s connect string (``host:port/chroot``) does
    not exist: every read would find nothing there (no groups, topics or brokers) and every
    write be refused, so a typo in it is named at once rather than answered with
    "nothing there". The write path names it too (:func:`commit_transaction`), for callers
    that do not check first."""
    if zk.chroot and zk.exists("/") is None:
        raise AdminError(f"{_no_chroot(zk.chroot)}; check --zookeeper")




def kazoo_security_kwargs(config: ConsumerConfig) -> dict[str, Any]:
    """``zookeeper.auth`` and ``zookeeper.acl`` as kazoo's ``auth_data``, ``sasl_options``
    and ``default_acl``.

    Every znode the connector creates (ids, owners, offsets, and their parents) then carries
    the ACL, so a client without the credentials cannot delete or overwrite them. A
    ``sasl:user:password`` entry becomes a SASL DIGEST-MD5 login (kazoo's ``sasl_options``,
    not its deprecated sasl-in-``auth_data`` path); :func:`check_kazoo_login` after
    ``start()`` tells whether ZooKeeper accepted it.
    """
    from kazoo.security import ACL, Id

    kwargs: dict[str, Any] = {}
    if config.zk_auth_data:
        kwargs["auth_data"] = list(config.zk_auth_data)
    sasl = config.zk_sasl
    if sasl is not None:
        kwargs["sasl_options"] = {
            "mechanism": sasl.mechanism, "username": sasl.username, "password": sasl.password,
        }
    if config.zk_acl:
        kwargs["default_acl"] = [ACL(a.perms_mask, Id(a.scheme, a.id)) for a in config.zk_acl]
    return kwargs


@contextmanager
def login_refusal(zk: KazooClient) -> Iterator[threading.Event]:
    """For the ``with`` block, an Event set if ZooKeeper refuses ``zk``'s login while it
    connects. A SASL login refused before kazoo reported the connection (the server answered
    the exchange first) makes ``start()`` time out, and kazoo says "Connection time-out":
    with this, the caller can say the login was refused (:func:`sasl_refused`)."""
    refused = threading.Event()

    def on_state(state: str) -> None:
        # kazoo sets its raw state before it tells the listeners.
        if zk.client_state == KeeperState.AUTH_FAILED:
            refused.set()

    zk.add_listener(on_state)
    try:
        yield refused
    finally:
        zk.remove_listener(on_state)


def start_and_check_login(zk: KazooClient, config: ConsumerConfig) -> None:
    """``zk.start()`` within zookeeper.connection.timeout.ms, then
    :func:`check_kazoo_login`; a SASL login refused first says so (:func:`login_refusal`)."""
    with login_refusal(zk) as refused:
        try:
            zk.start(timeout=config.zookeeper_connection_timeout_ms / 1000.0)
        except zk.handler.timeout_exception:
            if refused.is_set() and config.zk_sasl is not None:
                raise ZkConsumerError(sasl_refused(config)) from None
            raise
        check_kazoo_login(zk, config)


def sasl_refused(config: ConsumerConfig) -> str:
    sasl = config.zk_sasl
    assert sasl is not None
    return (f"SASL login as {sasl.username!r} (zookeeper.auth) refused by ZooKeeper at "
            f"{config.zk_hosts}: wrong user or password, or the server has no SASL login "
            "configured (JAAS Server section)")


def check_kazoo_login(zk: KazooClient, config: ConsumerConfig) -> None:
    """After ``zk.start()``: check that ZooKeeper accepted the login of ``zookeeper.auth``.

    kazoo reports CONNECTED before it runs the SASL exchange, and before the server answers
    the other schemes' ``addauth`` (refused when the server has no provider for the scheme),
    so ``start()`` succeeds even when the login is refused; one round trip (queued behind
    them) shows the outcome. On failure the client is stopped and ZkConsumerError says why.
    """
    sasl = config.zk_sasl
    if sasl is None:
        if config.zk_auth_data:
            _check_addauth(zk, config)
        return
    import importlib.util

    from kazoo.exceptions import AuthFailedError, KazooException

    def fail(reason: str) -> ZkConsumerError:
        try:
            zk.stop()
        except Exception:  # noqa: BLE001 - the error below matters, not this one
            pass
        return ZkConsumerError(f"SASL login as {sasl.username!r} (zookeeper.auth) {reason}")

    if importlib.util.find_spec("puresasl") is None:
        raise fail("needs the pure-sasl package: pip install pure-sasl")
    timeout_s = config.zookeeper_connection_timeout_ms / 1000.0
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            zk.exists_async("/").get(timeout=max(0.0, deadline - time.monotonic()))
            return
        except AuthFailedError:
            try:
                zk.stop()
            except Exception:  # noqa: BLE001 - the error below matters, not this one
                pass
            raise ZkConsumerError(sasl_refused(config)) from None
        except ConnectionLoss as e:
            # kazoo reconnects (and logs in again) by itself: ask again until the deadline.
            if time.monotonic() >= deadline:
                raise fail(f"not completed within {timeout_s:g} s: {e!r}") from e
            time.sleep(0.05)
        except zk.handler.timeout_exception as e:
            # kazoo 2.11 keeps sending empty SASL tokens to a server that has no SASL
            # login configured, until the server expires the session.
            raise fail(
                f"not completed within {timeout_s:g} s by ZooKeeper at {config.zk_hosts}; "
                "does it have a SASL login configured (JAAS Server section)?"
            ) from e
        except KazooException as e:
            raise fail(f"failed: {e!r}") from e


def _check_addauth(zk: KazooClient, config: ConsumerConfig) -> None:
    from kazoo.exceptions import AuthFailedError

    try:
        zk.exists_async("/").get(timeout=config.zookeeper_connection_timeout_ms / 1000.0)
    except AuthFailedError:
        try:
            zk.stop()
        except Exception:  # noqa: BLE001 - the error below matters, not this one
            pass
        schemes = ", ".join(sorted({s for s, _ in config.zk_auth_data}))
        raise ZkConsumerError(
            f"ZooKeeper at {config.zk_hosts} refused the login of zookeeper.auth (scheme "
            f"{schemes}); is an authentication provider for it enabled on the server?"
        ) from None




# --------------------------------------------------------------------------------------
# A member's outages, said once
# --------------------------------------------------------------------------------------

#: kazoo's lines at each failed attempt while ZooKeeper is away (a few a second).
_RETRY_LINES = frozenset({"Connection dropped: %s", "Connection time-out: %s",
                          "Transition to CONNECTING", "Cannot resolve %s: %s",
                          "Failed connecting to Zookeeper within the connection retry policy."})


class OutageLog(logging.LoggerAdapter):  # type: ignore[type-arg]
    """The logger of a member's kazoo client: kazoo's line at every failed reconnect
    (``Connection dropped: ... Connection refused``, 56 of them in a 35 s outage) is
    logged at DEBUG, and the outage's end once, at WARNING, naming the consumer, how long
    it lasted and what the first failure was. Its start is the connector's to say (it says
    what the member does meanwhile). Add :meth:`on_state` as a listener of the client.
    """

    def __init__(self, consumer_id: str, logger: logging.Logger | None = None) -> None:
        super().__init__(logger or logging.getLogger("zkconsumer.zookeeper"),
                         {"consumer_id": consumer_id})
        self.consumer_id = consumer_id
        self._lock = threading.Lock()
        self._down_since: float | None = None
        self._first_failure: str | None = None

    def log(self, level: int, msg: object, *args: Any, **kwargs: Any) -> None:
        if msg in _RETRY_LINES and level > logging.DEBUG:
            with self._lock:  # (kazoo logs the first before the state changes)
                if self._first_failure is None:
                    self._first_failure = str(msg) % args if args else str(msg)
            level = logging.DEBUG
        super().log(level, msg, *args, **kwargs)

    def on_state(self, state: str) -> None:
        """kazoo's connection state listener: notes when an outage starts, says when it
        ends."""
        if state in ("SUSPENDED", "LOST"):
            with self._lock:
                if self._down_since is None:
                    self._down_since = time.monotonic()
            return
        with self._lock:  # CONNECTED (failures before the first connect are not an outage)
            since, first = self._down_since, self._first_failure
            self._down_since = self._first_failure = None
        if since is not None:
            self.warning("consumer %s: ZooKeeper connection back after %.1f s%s",
                         self.consumer_id, time.monotonic() - since,
                         f" (reconnects failed meanwhile: {first})" if first else "")
