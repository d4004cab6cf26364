"""Consumer configuration: the legacy dotted keys, validated, typed and documented.

The legacy Scala consumer (``kafka.consumer.ConsumerConfig``) was configured with a
``java.util.Properties`` of dotted keys such as ``zookeeper.connect`` and
``auto.commit.enable``. :class:`ConsumerConfig` accepts exactly those keys, with the
original defaults and derived defaults, plus a few zkconsumer extensions (fetch backend,
metrics port, ZooKeeper authentication and ACLs, broker security settings passed through
to kafka-python).

Everything is driven by one table, :data:`~zkconsumer._config_keys.CONFIG_KEYS`: a tuple of
:class:`~zkconsumer._config_keys.ConfigKey` entries giving each key's name, kind, default (or
the key its default is derived from), allowed values or range and a one-line description.
Validation, the typed attributes of :class:`ConsumerConfig`, redaction of secrets, the
kafka-python keyword mapping and the table of docs/configuration.md
(:func:`~zkconsumer._config_keys.config_table_markdown`) all read that table.

Values may be Python values (``6000``, ``True``) or strings as read from a properties
file (``"6000"``, ``"true"``):

* integers: an ``int`` (never a ``bool``) or a decimal string;
* booleans: a ``bool`` or ``true``/``false`` in any case;
* ``None``, or an empty string for a key whose default is unset or derived, means "not
  given": the default applies.

Unlike the original, which only logged a warning, an unknown key is an error (with a
did-you-mean suggestion). Every problem found is reported at once in one
:class:`~zkconsumer._errors.ConfigError`: a single problem as a one-line message, several
as a summary line followed by one line per problem. Messages name the key and the value;
the values of secrets are shown as ``******``.

:meth:`ConsumerConfig.from_properties` reads an existing Java ``consumer.properties``
file with the ``java.util.Properties`` syntax (:mod:`zkconsumer._properties`); its errors
name the file and line.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Mapping
from typing import Any, Generic, Literal, NoReturn, TypeVar, cast, overload

from zkconsumer._config_keys import (
    _BY_NAME,
    _INT_RE,
    _ZK_SASL_SCHEME,
    CONFIG_KEYS,
    REDACTED,
    ConfigKey,
    JvmCompatibility,
    ZkAcl,
    ZkSaslLogin,
    _as_string,
    _normalise_chroot,
    _parse_zk_acl_entry,
    _raise_problems,
    _split_zk_auth,
    _split_zk_connect,
)
from zkconsumer._properties import _parse_properties, _read_text

__all__ = ["ConsumerConfig"]


# --------------------------------------------------------------------------------------
# Coercion and validation.


class _Invalid(Exception):
    """One value is wrong; the argument is the reason (after ``key=value``)."""


def _shown(key: ConfigKey, raw: object) -> str:
    """``key=value`` for messages, with secrets redacted."""
    if key.redact is not None:
        shown = key.redact(raw) if isinstance(raw, str) else REDACTED
        return f"{key.name}={shown!r}"
    return f"{key.name}={raw!r}"


def _unset_when_empty(key: ConfigKey) -> bool:
    return not key.required and key.default is None


def _coerce(key: ConfigKey, raw: object) -> object:
    """The typed value of ``raw`` for ``key``; None means "not given". Raises _Invalid."""
    if isinstance(raw, str) and not raw.strip() and _unset_when_empty(key):
        return None
    if key.kind == "bool":
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
            return raw.strip().lower() == "true"
        raise _Invalid("is not a boolean (true or false)")
    if key.kind == "int":
        if isinstance(raw, int) and not isinstance(raw, bool):
            value = raw
        elif isinstance(raw, str) and _INT_RE.fullmatch(raw.strip()):
            value = int(raw.strip())
        else:
            raise _Invalid("is not an integer")
        lo, hi = key.min, key.max
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            if hi is None:
                raise _Invalid(f"is out of range: must be >= {lo}")
            if lo is None:  # pragma: no cover - every int key has a minimum
                raise _Invalid(f"is out of range: must be <= {hi}")
            raise _Invalid(f"is out of range: must be between {lo} and {hi}")
        return value
    if not isinstance(raw, str):
        raise _Invalid("is not a string")
    text = raw if key.secret else raw.strip()
    if key.kind == "enum":
        match = text
        if key.case is not None:
            match = text.lower() if key.case == "lower" else text.upper()
        if match not in key.choices:
            hint = dict(key.value_hints).get(text.lower())
            extra = f" (the legacy consumer calls it {hint!r})" if hint else ""
            raise _Invalid(f"is not one of: {', '.join(key.choices)}{extra}")
        return match
    if not text:
        raise _Invalid("is empty" + ("; it is required" if key.required else ""))
    if key.check is not None:
        problem = key.check(text)
        if problem is not None:
            raise _Invalid(problem)
    if key.normalise is not None:
        text = key.normalise(text)
    return text


def _suggest(name: str) -> str:
    modern = {k.modern_name: k.name for k in CONFIG_KEYS if k.modern_name}
    if name in modern:
        return f" (the legacy name is {modern[name]!r})"
    candidates = [k.name for k in CONFIG_KEYS]
    match = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    if not match:
        match = difflib.get_close_matches(name.replace("_", ".").lower(), candidates, n=1)
    return f" (did you mean {match[0]!r}?)" if match else ""


def _unknown_key_message(name: str) -> str:
    return f"unknown configuration key {name!r}{_suggest(name)}"


def _resolve(
    props: Mapping[str, object],
    origins: Mapping[str, str],
    problems: list[str],
) -> tuple[dict[str, object], dict[str, object]]:
    """Validate ``props``: (effective values of every key, given values by key name).

    Problems are appended to ``problems``; the caller raises when there are any.
    """

    def report(key: str | None, message: str) -> None:
        where = origins.get(key) if key is not None else None
        problems.append(f"{where}: {message}" if where else message)

    given = _given_values(props, report)
    values, failed = _effective_values(given, report)
    _check_cross_key_rules(values, given, failed, report)
    return values, given


_Report = Callable[[str | None, str], None]


def _given_values(props: Mapping[str, object], report: _Report) -> dict[str, object]:
    """The values given (not None) by key name; unknown keys are reported."""
    given: dict[str, object] = {}
    for raw_key, raw in props.items():
        if not isinstance(raw_key, str):
            report(None, f"configuration keys must be strings, got {raw_key!r}")
            continue
        name = raw_key.strip()
        if name not in _BY_NAME:
            report(raw_key, _unknown_key_message(name))
            continue
        if raw is not None:
            given[name] = raw
    return given


def _effective_values(given: Mapping[str, object],
                      report: _Report) -> tuple[dict[str, object], set[str]]:
    """(the effective value of every key that has one, the keys that failed): the given
    value, else the default or the derived one."""
    values: dict[str, object] = {}
    failed: set[str] = set()
    for key in CONFIG_KEYS:
        value: object = None
        if key.name in given:
            try:
                value = _coerce(key, given[key.name])
            except _Invalid as exc:
                report(key.name, f"{_shown(key, given[key.name])} {exc}")
                failed.add(key.name)
                continue
        if value is None:
            if key.required:
                report(key.name, f"missing required configuration key {key.name!r}")
                failed.add(key.name)
                continue
            if key.derived_from is not None:
                if key.derived_from in failed:
                    failed.add(key.name)
                    continue
                base = values[key.derived_from]
                value = key.derive(base) if key.derive is not None else base
            else:
                value = key.default
        values[key.name] = value
    return values, failed


def _check_cross_key_rules(values: Mapping[str, object], given: Mapping[str, object],
                           failed: set[str], report: _Report) -> None:
    """Rules between keys, checked where none of their keys failed on its own."""

    def ok(*names: str) -> bool:
        return not failed.intersection(names)

    # Cross-key rules.
    if ok("fetch.wait.max.ms", "socket.timeout.ms"):
        wait = cast(int, values["fetch.wait.max.ms"])
        sock = cast(int, values["socket.timeout.ms"])
        if wait > sock:
            report(
                "fetch.wait.max.ms" if "fetch.wait.max.ms" in given else "socket.timeout.ms",
                f"fetch.wait.max.ms={wait} is greater than socket.timeout.ms={sock}: "
                "socket.timeout.ms must be at least fetch.wait.max.ms",
            )
    if ok("security.protocol", "sasl.mechanism", "sasl.plain.username", "sasl.plain.password"):
        protocol, mechanism = values["security.protocol"], values["sasl.mechanism"]
        if str(protocol).startswith("SASL_"):
            if mechanism is None:
                report(
                    "security.protocol",
                    f"security.protocol={protocol!r} needs sasl.mechanism "
                    "(one of: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, GSSAPI, OAUTHBEARER)",
                )
            elif mechanism == "PLAIN" or str(mechanism).startswith("SCRAM-"):
                for needed in ("sasl.plain.username", "sasl.plain.password"):
                    if values[needed] is None:
                        report(
                            "sasl.mechanism",
                            f"sasl.mechanism={mechanism!r} with security.protocol={protocol!r} "
                            f"needs {needed}",
                        )
    if ok("ssl.certfile", "ssl.keyfile", "ssl.password") and values["ssl.certfile"] is None:
        # Both clients load a key only with its certificate: alone, it would be ignored and
        # mutual TLS fail at the handshake, much later.
        for alone in ("ssl.keyfile", "ssl.password"):
            if values[alone] is not None:
                report(alone, f"{alone} needs ssl.certfile (the client certificate it is for)")


# --------------------------------------------------------------------------------------
# The config object.

_T = TypeVar("_T")


class _Setting(Generic[_T]):
    """A typed, read-only attribute of ConsumerConfig reading one key of the table."""

    def __init__(self, name: str) -> None:
        self.key = _BY_NAME[name]

    def __set_name__(self, owner: type, attribute: str) -> None:
        if attribute != self.key.attribute:
            raise TypeError(f"{attribute} should be named {self.key.attribute}")

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> _Setting[_T]: ...

    @overload
    def __get__(self, obj: ConsumerConfig, owner: type | None = None) -> _T: ...

    def __get__(self, obj: ConsumerConfig | None, owner: type | None = None) -> _Setting[_T] | _T:
        if obj is None:
            return self
        return cast(_T, obj._values[self.key.name])

    def __set__(self, obj: ConsumerConfig, value: NoReturn) -> None:
        raise AttributeError(f"{self.key.attribute} is read-only; use copy_with()")

    def __delete__(self, obj: ConsumerConfig) -> None:
        raise AttributeError(f"{self.key.attribute} is read-only")


class ConsumerConfig:
    """A validated, immutable consumer configuration (see the module docstring).

    >>> c = ConsumerConfig({"zookeeper.connect": "zk:2181/kafka", "group.id": "g"})
    >>> c.client_id, c.rebalance_backoff_ms, c.zk_chroot
    ('g', 2000, '/kafka')
    >>> c.copy_with({"group.id": "h"}).client_id   # client.id follows group.id
    'h'

    Every key has a typed attribute, its dotted name with underscores
    (``c.auto_commit_enable``), and :meth:`get` takes the dotted name.

    :param props: dotted keys (the legacy ones and zkconsumer's extensions) -> values,
        Python values or the strings of a properties file; None, or an empty string for a
        key without a fixed default, means "not given".
    :raises ConfigError: a required key is missing, a key is unknown (with a did-you-mean
        suggestion), or a value is wrong (type, range, choices, or a rule between keys such
        as ``fetch.wait.max.ms`` <= ``socket.timeout.ms``); every problem in one error.
    """

    __slots__ = ("_values", "_given", "_zk_hosts", "_zk_chroot", "__weakref__")

    _values: dict[str, object]
    _given: dict[str, object]
    _zk_hosts: str
    _zk_chroot: str

    def __init__(self, props: Mapping[str, object]) -> None:
        self._init(props, {}, [], "")

    def _init(
        self,
        props: Mapping[str, object],
        origins: Mapping[str, str],
        problems: list[str],
        context: str,
    ) -> None:
        values, given = _resolve(props, origins, problems)
        _raise_problems(problems, context)
        self._values = values
        self._given = given
        hosts, chroot = _split_zk_connect(cast(str, values["zookeeper.connect"]))
        self._zk_hosts = ",".join(hosts)
        self._zk_chroot = _normalise_chroot(chroot)

    @classmethod
    def from_properties(
        cls,
        path: str | os.PathLike[str],
        overrides: Mapping[str, object] | None = None,
    ) -> ConsumerConfig:
        """Read a Java ``consumer.properties`` file; ``overrides`` win over the file.

        The file is read with the ``java.util.Properties`` syntax (comments, ``key=value``,
        ``key:value``, continuations, escapes), as UTF-8 or else ISO-8859-1.

        :param path: the properties file.
        :param overrides: keys -> values applied over the file's.
        :returns: the configuration.
        :raises ConfigError: the file cannot be read, or has syntax or value problems: every
            problem in one error, those coming from the file naming it and the line.
        """
        source = os.fspath(path)
        props, origins, problems = _parse_properties(_read_text(path), source)
        merged: dict[str, object] = dict(props)
        merged_origins = dict(origins)
        for key, value in (overrides or {}).items():
            name = key.strip()
            for old in [k for k in merged if k.strip() == name]:
                del merged[old]
                merged_origins.pop(old, None)
            merged[key] = value
        self = cls.__new__(cls)
        self._init(merged, merged_origins, problems, f" in {source}")
        return self

    def copy_with(self, props: Mapping[str, object]) -> ConsumerConfig:
        """A new config: the keys given to this one, updated with ``props``.

        Derived defaults follow again (a new ``group.id`` changes an unset ``client.id``);
        a value of None removes a key given before, so that its default applies.

        :param props: keys -> new values (None: back to the default).
        :returns: the new configuration; this one is unchanged.
        :raises ConfigError: as the constructor.
        """
        merged: dict[str, object] = dict(self._given)
        for key, value in props.items():
            merged[key.strip()] = value
        return ConsumerConfig(merged)

    # ---- generic access ----

    def get(self, key: str) -> object:
        """The typed effective value of a dotted key (None when unset).

        :param key: a dotted key, e.g. ``auto.commit.interval.ms``.
        :returns: the value given, or the default or derived one: ``int``, ``bool`` or
            ``str`` by the key's type.
        :raises KeyError: ``key`` is not a configuration key (the message suggests one).
        """
        try:
            return self._values[key]
        except KeyError:
            raise KeyError(_unknown_key_message(key)) from None

    def __getitem__(self, key: str) -> object:
        return self.get(key)

    def is_given(self, key: str) -> bool:
        """Whether ``key`` was given explicitly (rather than defaulted or derived).

        :param key: a dotted key.
        :raises KeyError: ``key`` is not a configuration key.
        """
        self.get(key)
        return key in self._given

    def as_properties(self, redact: bool = True) -> dict[str, str]:
        """Every set effective value as a string (booleans as true/false), in table order.

        Unset keys are left out.

        :param redact: show secrets (passwords, credentials) as ``******``.
        :returns: dotted key -> value, as a properties file would hold it.
        """
        out: dict[str, str] = {}
        for key in CONFIG_KEYS:
            value = self._values[key.name]
            if value is None:
                continue
            text = _as_string(value)
            if redact and key.redact is not None:
                text = key.redact(text)
            out[key.name] = text
        return out

    def kafka_client_kwargs(self) -> dict[str, Any]:
        """kafka-python keyword arguments: ``client_id`` and the set security settings.

        ``bootstrap.servers`` is not included: brokers normally come from ZooKeeper.

        :returns: keyword -> value, for ``kafka.KafkaConsumer`` and the admin client.
        """
        out: dict[str, Any] = {}
        for key in CONFIG_KEYS:
            value = self._values[key.name]
            if key.kafka_kwarg is not None and value is not None:
                out[key.kafka_kwarg] = value
        return out

    # ---- parsed helpers ----

    @property
    def zk_hosts(self) -> str:
        """The ZooKeeper connect string without the chroot, e.g. ``h1:2181,h2:2181``."""
        return self._zk_hosts

    @property
    def zk_chroot(self) -> str:
        """The chroot of zookeeper.connect without a trailing slash (``/kafka``), or ``""``."""
        return self._zk_chroot

    @property
    def zk_auth_data(self) -> list[tuple[str, str]]:
        """zookeeper.auth without its sasl entry, as (scheme, credential) pairs.

        What ZooKeeper's ``addauth`` takes (kazoo's ``auth_data``); the SASL login is
        :attr:`zk_sasl`.
        """
        auth = self.zookeeper_auth
        if auth is None:
            return []
        return [(s, c) for s, c in _split_zk_auth(auth) if s != _ZK_SASL_SCHEME]

    @property
    def zk_sasl(self) -> ZkSaslLogin | None:
        """The ``sasl:user:password`` entry of zookeeper.auth (kazoo's ``sasl_options``)."""
        auth = self.zookeeper_auth
        for scheme, credential in [] if auth is None else _split_zk_auth(auth):
            if scheme == _ZK_SASL_SCHEME:
                user, _, password = credential.partition(":")
                return ZkSaslLogin(user, password)
        return None

    @property
    def zk_acl(self) -> list[ZkAcl]:
        """zookeeper.acl parsed; empty when unset (ZooKeeper's default, open ACL)."""
        acl = self.zookeeper_acl
        if acl is None:
            return []
        return [cast(ZkAcl, _parse_zk_acl_entry(entry)) for entry in acl.split(",")]

    @property
    def jvm_behaviour(self) -> JvmCompatibility:
        """jvm.compatibility parsed: what the group's JVM members do that zkconsumer copies."""
        return JvmCompatibility.of(self.jvm_compatibility)

    # ---- object protocol ----

    def __repr__(self) -> str:
        shown = {}
        for name in self._given:
            key = _BY_NAME[name]
            value = self._values[name]
            if key.redact is not None and value is not None:
                value = key.redact(_as_string(value))
            shown[name] = value
        return f"ConsumerConfig({shown!r})"

    def __str__(self) -> str:
        return "\n".join(f"{k}={v}" for k, v in self.as_properties(redact=True).items())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ConsumerConfig):
            return NotImplemented
        return self._values == other._values

    def __hash__(self) -> int:
        return hash(tuple(self._values.values()))

    # ---- typed attributes, one per key of the table ----

    zookeeper_connect = _Setting[str]("zookeeper.connect")
    zookeeper_session_timeout_ms = _Setting[int]("zookeeper.session.timeout.ms")
    zookeeper_connection_timeout_ms = _Setting[int]("zookeeper.connection.timeout.ms")
    zookeeper_sync_time_ms = _Setting[int]("zookeeper.sync.time.ms")
    group_id = _Setting[str]("group.id")
    consumer_id = _Setting[str | None]("consumer.id")
    client_id = _Setting[str]("client.id")
    socket_timeout_ms = _Setting[int]("socket.timeout.ms")
    socket_receive_buffer_bytes = _Setting[int]("socket.receive.buffer.bytes")
    fetch_message_max_bytes = _Setting[int]("fetch.message.max.bytes")
    num_consumer_fetchers = _Setting[int]("num.consumer.fetchers")
    fetch_min_bytes = _Setting[int]("fetch.min.bytes")
    fetch_wait_max_ms = _Setting[int]("fetch.wait.max.ms")
    queued_max_message_chunks = _Setting[int]("queued.max.message.chunks")
    auto_commit_enable = _Setting[bool]("auto.commit.enable")
    auto_commit_interval_ms = _Setting[int]("auto.commit.interval.ms")
    auto_offset_reset = _Setting[Literal["smallest", "largest"]]("auto.offset.reset")
    consumer_timeout_ms = _Setting[int]("consumer.timeout.ms")
    rebalance_max_retries = _Setting[int]("rebalance.max.retries")
    rebalance_backoff_ms = _Setting[int]("rebalance.backoff.ms")
    refresh_leader_backoff_ms = _Setting[int]("refresh.leader.backoff.ms")
    exclude_internal_topics = _Setting[bool]("exclude.internal.topics")
    partition_assignment_strategy = _Setting[Literal["range", "roundrobin", "sticky"]](
        "partition.assignment.strategy"
    )
    offsets_storage = _Setting[Literal["zookeeper", "kafka"]]("offsets.storage")
    dual_commit_enabled = _Setting[bool]("dual.commit.enabled")
    offsets_channel_backoff_ms = _Setting[int]("offsets.channel.backoff.ms")
    offsets_channel_socket_timeout_ms = _Setting[int]("offsets.channel.socket.timeout.ms")
    offsets_commit_max_retries = _Setting[int]("offsets.commit.max.retries")
    fetch_backend = _Setting[Literal["kafka-python", "confluent"]]("fetch.backend")
    jvm_compatibility = _Setting[str]("jvm.compatibility")
    zookeeper_outage_delivery = _Setting[Literal["pause", "continue"]](
        "zookeeper.outage.delivery")
    metrics_port = _Setting[int | None]("metrics.port")
    metrics_address = _Setting[str]("metrics.address")
    zookeeper_auth = _Setting[str | None]("zookeeper.auth")
    zookeeper_acl = _Setting[str | None]("zookeeper.acl")
    bootstrap_servers = _Setting[str | None]("bootstrap.servers")
    security_protocol = _Setting[Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]](
        "security.protocol"
    )
    ssl_cafile = _Setting[str | None]("ssl.cafile")
    ssl_certfile = _Setting[str | None]("ssl.certfile")
    ssl_keyfile = _Setting[str | None]("ssl.keyfile")
    ssl_password = _Setting[str | None]("ssl.password")
    ssl_check_hostname = _Setting[bool]("ssl.check.hostname")
    sasl_mechanism = _Setting[
        Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER"] | None
    ]("sasl.mechanism")
    sasl_plain_username = _Setting[str | None]("sasl.plain.username")
    sasl_plain_password = _Setting[str | None]("sasl.plain.password")
    sasl_kerberos_service_name = _Setting[str]("sasl.kerberos.service.name")


def _check_attributes() -> None:
    """Every key of the table has exactly one typed attribute."""
    settings = {v.key.name for v in vars(ConsumerConfig).values() if isinstance(v, _Setting)}
    missing = set(_BY_NAME) - settings
    if missing:  # pragma: no cover - a development error
        raise TypeError(f"ConsumerConfig lacks attributes for {sorted(missing)}")


_check_attributes()

