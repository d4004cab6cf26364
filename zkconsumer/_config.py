"""Consumer configuration: the legacy dotted keys, validated, typed and documented.

The legacy Scala consumer (``kafka.consumer.ConsumerConfig``) was configured with a
``java.util.Properties`` of dotted keys such as ``zookeeper.connect`` and
``auto.commit.enable``. :class:`ConsumerConfig` accepts exactly those keys, with the
original defaults and derived defaults, plus a few zkconsumer extensions (fetch backend,
metrics port, ZooKeeper authentication and ACLs, broker security settings passed through
to kafka-python).

Everything is driven by one table, :data:`CONFIG_KEYS`: a tuple of :class:`ConfigKey`
entries giving each key's name, kind, default (or the key its default is derived from),
allowed values or range and a one-line description. Validation, the typed attributes of
:class:`ConsumerConfig`, redaction of secrets, the kafka-python keyword mapping and the
table of docs/configuration.md (:func:`config_table_markdown`) all read that table.

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
file with the ``java.util.Properties`` syntax; its errors name the file and line.
"""

from __future__ import annotations

import difflib
import ipaddress
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, NoReturn, TypeVar, cast, overload

from zkconsumer._errors import ConfigError

__all__ = [
    "CONFIG_KEYS",
    "REDACTED",
    "ConfigKey",
    "ConsumerConfig",
    "JvmCompatibility",
    "ZkAcl",
    "ZkSaslLogin",
    "config_table_markdown",
    "legal_id_problem",
    "read_properties",
]

REDACTED = "******"
"""What a secret value is replaced with in ``repr()``, ``str()``, messages and properties."""

_JAVA_INT_MAX = 2**31 - 1
_LEGAL_ID = re.compile(r"[a-zA-Z0-9._-]+")
_INT_RE = re.compile(r"[+-]?[0-9]+")
_HOST_RE = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9._-]*[A-Za-z0-9_])?")
_IPV6_RE = re.compile(r"\[[0-9A-Fa-f:.]+(?:%[A-Za-z0-9._-]+)?\]")
_ZK_SCHEME_RE = re.compile(r"[A-Za-z0-9_-]+")
_ZK_PERMS = "rwcda"
_ZK_PERM_BITS = {"r": 1, "w": 2, "c": 4, "d": 8, "a": 16}  # ZooDefs.Perms

Kind = Literal["int", "bool", "str", "enum"]


# --------------------------------------------------------------------------------------
# Syntax checks used by the table. Each returns None when the value is fine, else the
# reason it is not (the caller prefixes "key=value").


def _check_host_port(entry: str, *, port_required: bool = False) -> str | None:
    """``host[:port]`` with a DNS name, IPv4 address or ``[IPv6]`` and a port 1..65535.

    Returns None when fine, else what is wrong (the caller names the entry).
    """
    host, port = entry, ""
    if entry.startswith("["):
        end = entry.find("]")
        if end < 0:
            return "unterminated '[' (IPv6 addresses are written [addr]:port)"
        host, rest = entry[: end + 1], entry[end + 1 :]
        if rest:
            if not rest.startswith(":"):
                return "not host[:port]"
            port = rest[1:]
        if not _IPV6_RE.fullmatch(host):
            return "malformed IPv6 address"
    else:
        if entry.count(":") > 1:
            return "not host[:port] (write IPv6 addresses as [addr]:port)"
        host, _, port = entry.partition(":")
        if ":" in entry and not port:
            return "empty port"
        if not _HOST_RE.fullmatch(host):
            return f"invalid host name {host!r}"
    if port:
        if not port.isascii() or not port.isdigit() or not 1 <= int(port) <= 65535:
            return f"invalid port {port!r} (must be 1..65535)"
    elif port_required:
        return "no port"
    return None


def _split_zk_connect(value: str) -> tuple[list[str], str]:
    """Split ``h1:2181,h2:2181/chroot`` into stripped host entries and the raw chroot."""
    slash = value.find("/")
    hosts, chroot = (value, "") if slash < 0 else (value[:slash], value[slash:])
    return [h.strip() for h in hosts.split(",")], chroot


def _normalise_chroot(chroot: str) -> str:
    """``/kafka/`` -> ``/kafka``; ``/`` or nothing -> ``""``."""
    return chroot.rstrip("/") if chroot.strip("/") else ""


def _normalise_zk_connect(value: str) -> str:
    """Spaces around host entries and a trailing slash of the chroot removed."""
    hosts, chroot = _split_zk_connect(value)
    return ",".join(hosts) + _normalise_chroot(chroot)


def _normalise_host_list(value: str) -> str:
    return ",".join(h.strip() for h in value.split(","))


def _check_zk_connect(value: str) -> str | None:
    hosts, chroot = _split_zk_connect(value)
    for i, host in enumerate(hosts, 1):
        if not host:
            return f"has an empty host entry (number {i}); expected host[:port],... [/chroot]"
        problem = _check_host_port(host)
        if problem is not None:
            return f"has an invalid entry {host!r}: {problem}"
    if chroot:
        path = _normalise_chroot(chroot)
        if path and not path.startswith("/"):  # pragma: no cover - split guarantees it
            return f"chroot {chroot!r} must start with '/'"
        for part in path.split("/")[1:]:
            if not part or part in (".", "..") or any(ord(c) < 0x20 for c in part):
                return f"has an invalid chroot path {chroot!r}"
    return None


def legal_id_problem(value: str) -> str | None:
    """Why ``value`` is not a legal group.id / client.id, or None: the legacy ConsumerConfig's
    rule, which is also Kafka's for topic names (the tools check names with it too)."""
    if not _LEGAL_ID.fullmatch(value):
        bad = sorted({c for c in value if not _LEGAL_ID.fullmatch(c)})
        shown = ", ".join(repr(c) for c in bad)
        return f"contains illegal characters ({shown}); legal are a-z A-Z 0-9 . _ -"
    if value in (".", ".."):
        return "cannot be '.' or '..' (it is a ZooKeeper path element)"
    return None


def _check_bind_address(value: str) -> str | None:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        if not _HOST_RE.fullmatch(value):
            return "is neither an IP address nor a host name"
    return None


def _check_consumer_id(value: str) -> str | None:
    if "/" in value or any(ord(c) < 0x20 for c in value):
        return "cannot contain '/' or control characters (it is part of a znode name)"
    return None


_RELEASE_RE = re.compile(r"[0-9]+(?:\.[0-9]+){1,3}")


def _release_tuple(value: str) -> tuple[int, ...]:
    """``"1.0"`` -> ``(1, 0, 0, 0)``: padded, so that 1.0 is 1.0.0 when compared."""
    numbers = [int(n) for n in value.split(".")]
    return tuple(numbers + [0] * (4 - len(numbers)))


def _check_jvm_release(value: str) -> str | None:
    """A Kafka release that has the ZooKeeper consumer: 0.8.2 to 1.1.x (2.0 removed it)."""
    if not _RELEASE_RE.fullmatch(value):
        return "is not a Kafka release number such as 0.10.2 or 1.1.1"
    release = _release_tuple(value)
    if release < (0, 8, 2):
        return "is older than 0.8.2, whose ZooKeeper layout zkconsumer does not follow"
    if release >= (2,):
        return "is 2.0 or later, which has no ZooKeeper consumer (the last is 1.1.1)"
    return None


@dataclass(frozen=True)
class JvmCompatibility:
    """What the JVM members of a group do that changed between Kafka releases
    (``jvm.compatibility``, the release of those members).

    * ``dashed_partition_names``: from 1.0.0 (KAFKA-5822) ``TopicAndPartition.toString`` is
      ``topic-partition``, before ``[topic,partition]``; roundrobin deals partitions in the
      order of the Java hash code of that string, so the two compute different assignments.
    * ``regex_escaped_twice``: from 1.0.1 (KAFKA-6319) a wildcard member's regex is JSON-escaped
      by hand and then quoted by the JSON encoder again, so every reader (any release) takes
      the once-escaped text for the regex: ``a\\.b`` is read as ``a\\\\.b``.

    >>> JvmCompatibility.of("0.10.2"), JvmCompatibility.of("1.1.1").regex_escaped_twice
    (JvmCompatibility(release=(0, 10, 2, 0)), True)
    """

    release: tuple[int, ...]

    @classmethod
    def of(cls, value: str) -> JvmCompatibility:
        problem = _check_jvm_release(value)
        if problem is not None:
            raise ValueError(f"jvm.compatibility={value!r} {problem}")
        return cls(_release_tuple(value))

    @property
    def dashed_partition_names(self) -> bool:
        return self.release >= (1, 0, 0)

    @property
    def regex_escaped_twice(self) -> bool:
        return self.release >= (1, 0, 1)


def _check_host_list(value: str) -> str | None:
    for i, host in enumerate((h.strip() for h in value.split(",")), 1):
        if not host:
            return f"has an empty entry (number {i}); expected host[:port],..."
        problem = _check_host_port(host)
        if problem is not None:
            return f"has an invalid entry {host!r}: {problem}"
    return None


_ZK_SASL_SCHEME = "sasl"


def _split_zk_auth(value: str) -> list[tuple[str, str]]:
    out = []
    for entry in value.split(","):
        scheme, _, credential = entry.partition(":")
        out.append((scheme.strip(), credential))
    return out


def _check_zk_auth(value: str) -> str | None:
    sasl_seen = False
    for i, entry in enumerate(value.split(","), 1):
        scheme, sep, credential = entry.partition(":")
        scheme = scheme.strip()
        if not sep or not _ZK_SCHEME_RE.fullmatch(scheme) or not credential:
            return f"entry {i} is not scheme:credential (e.g. digest:user:password)"
        if scheme == "digest" and not all(credential.partition(":")[::2]):
            # ZooKeeper accepts "digest:user" and then matches no ACL: a silent misconfig.
            return f"entry {i} is not digest:user:password"
        if scheme != _ZK_SASL_SCHEME:
            continue
        user, sep, password = credential.partition(":")
        if not sep or not user or not password:
            return (
                f"entry {i} is not sasl:user:password (SASL DIGEST-MD5; "
                "Kerberos/GSSAPI is not supported)"
            )
        if sasl_seen:
            return f"entry {i} is a second sasl entry; a connection authenticates one SASL user"
        sasl_seen = True
    return None


def _redact_zk_auth(value: str) -> str:
    parts = []
    for entry in value.split(","):
        scheme, sep, _ = entry.partition(":")
        parts.append(f"{scheme.strip()}:{REDACTED}" if sep else REDACTED)
    return ",".join(parts)


def _redact_all(value: str) -> str:
    return REDACTED


@dataclass(frozen=True)
class ZkSaslLogin:
    """The ``sasl:user:password`` entry of ``zookeeper.auth``: a SASL DIGEST-MD5 login.

    What ZooKeeper's JAAS ``DigestLoginModule`` (``user_<name>="<password>"`` in the
    server's ``Server`` section) accepts; the authenticated ACL id is ``sasl:<user>``.
    The password is left out of ``repr()``.
    """

    username: str
    password: str = field(repr=False)
    mechanism: str = "DIGEST-MD5"


@dataclass(frozen=True)
class ZkAcl:
    """One parsed ``zookeeper.acl`` entry: ``scheme:id:perms``.

    ``creator`` parses as ``ZkAcl("auth", "", "cdrwa")``, ZooKeeper's CREATOR_ALL_ACL.
    """

    scheme: str
    id: str
    perms: str

    @property
    def perms_mask(self) -> int:
        """The permission bits as ZooKeeper numbers them (READ=1 ... ADMIN=16)."""
        return sum(_ZK_PERM_BITS[p] for p in self.perms)


def _parse_zk_acl_entry(entry: str) -> ZkAcl | str:
    """A :class:`ZkAcl`, or the reason the entry is malformed."""
    entry = entry.strip()
    if entry.lower() == "creator":
        return ZkAcl("auth", "", "cdrwa")
    scheme, sep1, rest = entry.partition(":")
    ident, sep2, perms = rest.rpartition(":")
    if not sep1 or not sep2:
        return f"{entry!r} is not scheme:id:perms or 'creator'"
    if not _ZK_SCHEME_RE.fullmatch(scheme):
        return f"{entry!r} has an invalid scheme {scheme!r}"
    if not perms or any(p not in _ZK_PERMS for p in perms) or len(set(perms)) != len(perms):
        return f"{entry!r} has invalid permissions {perms!r} (a subset of {_ZK_PERMS!r})"
    if scheme == "world" and ident != "anyone":
        return f"{entry!r}: the world scheme only has the id 'anyone'"
    if scheme == "digest" and ":" not in ident:
        return f"{entry!r}: a digest id is user:base64-hash"
    if scheme not in ("world", "auth") and not ident:
        return f"{entry!r} has an empty id"
    return ZkAcl(scheme, ident, perms)


def _check_zk_acl(value: str) -> str | None:
    for i, entry in enumerate(value.split(","), 1):
        parsed = _parse_zk_acl_entry(entry)
        if isinstance(parsed, str):
            return f"entry {i}: {parsed}"
    return None


# --------------------------------------------------------------------------------------
# The table.


@dataclass(frozen=True)
class ConfigKey:
    """One configuration key. :data:`CONFIG_KEYS` is the single table of them."""

    name: str
    """The dotted key, as in a ``consumer.properties`` file."""
    kind: Kind
    """``int``, ``bool``, ``str`` or ``enum`` (a ``str`` restricted to ``choices``)."""
    doc: str
    """One-line description (Markdown)."""
    default: int | bool | str | None = None
    """The default; ``None`` means unset (or required, or derived)."""
    required: bool = False
    derived_from: str | None = None
    """The key whose effective value is the default (through ``derive`` when set)."""
    derive: Callable[[object], object] | None = None
    derive_doc: str | None = None
    """How the derived default reads in the table, when ``derive`` is not the identity."""
    choices: tuple[str, ...] = ()
    case: Literal["lower", "upper"] | None = None
    """For enums: matched case-insensitively and normalised to this case."""
    min: int | None = None
    max: int | None = None
    check: Callable[[str], str | None] | None = None
    """Extra syntax check of a string value: None if fine, else the reason."""
    check_doc: str | None = None
    """How the accepted syntax reads in the table."""
    normalise: Callable[[str], str] | None = None
    """Applied to a string value once it passed ``check``."""
    redact: Callable[[str], str] | None = None
    """Set for secrets: maps the value to what may be shown."""
    kafka_kwarg: str | None = None
    """The kafka-python keyword argument this key maps to."""
    extension: bool = False
    """A zkconsumer key the legacy consumer did not have."""
    modern_name: str | None = None
    """The modern consumer's name for the same setting (for did-you-mean)."""
    value_hints: tuple[tuple[str, str], ...] = ()
    """(modern value, legacy value) pairs suggested when a value is wrong."""

    @property
    def attribute(self) -> str:
        """The snake_case attribute name on :class:`ConsumerConfig`."""
        return self.name.replace(".", "_")

    @property
    def secret(self) -> bool:
        return self.redact is not None


def _is_kafka_storage(value: object) -> object:
    return value == "kafka"


# fmt: off
CONFIG_KEYS: tuple[ConfigKey, ...] = (
    # ---- legacy keys (kafka.consumer.ConsumerConfig / ZKConfig, Kafka 0.8.2-0.10.2) ----
    ConfigKey(
        "zookeeper.connect", "str", required=True, check=_check_zk_connect,
        check_doc="`host[:port],...` with an optional `/chroot`", normalise=_normalise_zk_connect,
        doc="ZooKeeper ensemble, e.g. `zk1:2181,zk2:2181/kafka`; may carry a chroot.",
    ),
    ConfigKey(
        "zookeeper.session.timeout.ms", "int", default=6000, min=1, max=_JAVA_INT_MAX,
        doc="ZooKeeper session timeout; a consumer silent this long is considered dead.",
    ),
    ConfigKey(
        "zookeeper.connection.timeout.ms", "int", derived_from="zookeeper.session.timeout.ms",
        min=1, max=_JAVA_INT_MAX,
        doc="Longest wait for the ZooKeeper connection to be established.",
    ),
    ConfigKey(
        "zookeeper.sync.time.ms", "int", default=2000, min=0, max=_JAVA_INT_MAX,
        doc="How far a ZooKeeper follower may be behind the leader.",
    ),
    ConfigKey(
        "group.id", "str", required=True, check=legal_id_problem, check_doc="`[a-zA-Z0-9._-]+`",
        doc="The consumer group; members share partitions and offsets under `/consumers/<group>`.",
    ),
    ConfigKey(
        "consumer.id", "str", check=_check_consumer_id, check_doc="no `/`",
        doc="Fixed consumer id suffix (`<group>_<consumer.id>`); generated when unset.",
    ),
    ConfigKey(
        "client.id", "str", derived_from="group.id", check=legal_id_problem,
        check_doc="`[a-zA-Z0-9._-]+`", kafka_kwarg="client_id",
        doc="Client id sent to the brokers with each request.",
    ),
    ConfigKey(
        "socket.timeout.ms", "int", default=30000, min=1, max=_JAVA_INT_MAX,
        doc="Network request timeout to brokers; must be >= fetch.wait.max.ms.",
    ),
    ConfigKey(
        "socket.receive.buffer.bytes", "int", default=65536, min=-1, max=_JAVA_INT_MAX,
        modern_name="receive.buffer.bytes",
        doc="Socket receive buffer size for broker connections; -1 or 0: the operating "
            "system's default (as the original).",
    ),
    ConfigKey(
        "fetch.message.max.bytes", "int", default=1048576, min=1, max=_JAVA_INT_MAX,
        modern_name="max.partition.fetch.bytes",
        doc="Bytes fetched per partition per request.",
    ),
    ConfigKey(
        "num.consumer.fetchers", "int", default=1, min=1, max=_JAVA_INT_MAX,
        doc="Fetcher threads per broker.",
    ),
    ConfigKey(
        "fetch.min.bytes", "int", default=1, min=0, max=_JAVA_INT_MAX,
        doc="Minimum bytes a broker should have before answering a fetch.",
    ),
    ConfigKey(
        "fetch.wait.max.ms", "int", default=100, min=0, max=_JAVA_INT_MAX,
        modern_name="fetch.max.wait.ms",
        doc="Longest a broker waits for fetch.min.bytes before answering a fetch.",
    ),
    ConfigKey(
        "queued.max.message.chunks", "int", default=2, min=1, max=_JAVA_INT_MAX,
        doc="Capacity of each stream's queue, in fetched chunks.",
    ),
    ConfigKey(
        "auto.commit.enable", "bool", default=True, modern_name="enable.auto.commit",
        doc="Commit consumed offsets periodically (and on rebalance and shutdown).",
    ),
    ConfigKey(
        "auto.commit.interval.ms", "int", default=60000, min=1, max=_JAVA_INT_MAX,
        doc="Auto-commit period; the first commit is one interval after start.",
    ),
    ConfigKey(
        "auto.offset.reset", "enum", default="largest", choices=("smallest", "largest"),
        value_hints=(("earliest", "smallest"), ("latest", "largest")),
        doc="Where to start when there is no committed offset or it is out of range.",
    ),
    ConfigKey(
        "consumer.timeout.ms", "int", default=-1, min=-1, max=_JAVA_INT_MAX,
        doc="-1: iterators block; >= 0: raise ConsumerTimeoutException after that long idle.",
    ),
    ConfigKey(
        "rebalance.max.retries", "int", default=4, min=1, max=_JAVA_INT_MAX,
        doc="Rebalance attempts before ConsumerRebalanceFailedException.",
    ),
    ConfigKey(
        "rebalance.backoff.ms", "int", derived_from="zookeeper.sync.time.ms",
        min=0, max=_JAVA_INT_MAX,
        doc="Pause between rebalance attempts.",
    ),
    ConfigKey(
        "refresh.leader.backoff.ms", "int", default=200, min=0, max=_JAVA_INT_MAX,
        doc="Pause before looking again for the leader of a leaderless partition.",
    ),
    ConfigKey(
        "exclude.internal.topics", "bool", default=True,
        doc="Wildcard subscriptions skip internal topics such as `__consumer_offsets`.",
    ),
    ConfigKey(
        "partition.assignment.strategy", "enum", default="range",
        choices=("range", "roundrobin", "sticky"),
        doc="How partitions are assigned to consumer threads. `sticky` (zkconsumer only: "
            "for groups without JVM members) moves few partitions when members join or "
            "leave.",
    ),
    ConfigKey(
        "offsets.storage", "enum", default="zookeeper", choices=("zookeeper", "kafka"),
        case="lower",
        doc="Where offsets are committed and read (case-insensitive).",
    ),
    ConfigKey(
        "dual.commit.enabled", "bool", derived_from="offsets.storage",
        derive=_is_kafka_storage, derive_doc="true iff offsets.storage is kafka",
        doc="With offsets.storage=kafka, also commit to ZooKeeper (for migration).",
    ),
    ConfigKey(
        "offsets.channel.backoff.ms", "int", default=1000, min=0, max=_JAVA_INT_MAX,
        doc="Pause before retrying the offsets channel to the coordinator.",
    ),
    ConfigKey(
        "offsets.channel.socket.timeout.ms", "int", default=10000, min=1, max=_JAVA_INT_MAX,
        doc="Socket timeout of offset commit and fetch requests to the coordinator.",
    ),
    ConfigKey(
        "offsets.commit.max.retries", "int", default=5, min=0, max=_JAVA_INT_MAX,
        doc="Retries of a failed offset commit to Kafka (the shutdown commit).",
    ),
    # ---- zkconsumer extensions ----
    ConfigKey(
        "fetch.backend", "enum", default="kafka-python", choices=("kafka-python", "confluent"),
        extension=True,
        doc="Client library that fetches from brokers (`confluent` needs the `fast` extra).",
    ),
    ConfigKey(
        "jvm.compatibility", "str", default="0.10.2", check=_check_jvm_release,
        check_doc="a Kafka release, `0.8.2` to `1.1.1`", extension=True,
        doc="The Kafka release of the group's JVM members: from `1.0.0` roundrobin orders "
            "partitions as those releases do; from `1.0.1` wildcard regexes are registered "
            "escaped twice, as they are (see Interoperability with JVM members).",
    ),
    ConfigKey(
        "metrics.port", "int", min=0, max=65535, extension=True,
        doc="Serve metrics over HTTP on this port (0: any free port); unset: no server.",
    ),
    ConfigKey(
        "metrics.address", "str", default="127.0.0.1", check=_check_bind_address,
        check_doc="an IP address or host name", extension=True,
        doc="Interface the metrics server binds (`0.0.0.0`: every IPv4 interface, `::` every "
            "one, IPv4 too where the system maps IPv4 into IPv6, as Linux does by default).",
    ),
    ConfigKey(
        "zookeeper.auth", "str", check=_check_zk_auth, redact=_redact_zk_auth,
        check_doc="`scheme:credential,...`; at most one `sasl:user:password`", extension=True,
        doc="ZooKeeper authentication: `digest:user:password` and/or `sasl:user:password` "
            "(SASL DIGEST-MD5); credentials are secret.",
    ),
    ConfigKey(
        "zookeeper.acl", "str", check=_check_zk_acl,
        check_doc="`scheme:id:perms,...` (perms from `rwcda`) or `creator`", extension=True,
        doc="ACL of the znodes zkconsumer creates, e.g. `digest:user:HASH=:cdrwa,world:anyone:r`.",
    ),
    ConfigKey(
        "bootstrap.servers", "str", check=_check_host_list, check_doc="`host[:port],...`",
        normalise=_normalise_host_list,
        extension=True,
        doc="Brokers to use instead of the ones registered in ZooKeeper (used by tools).",
    ),
    ConfigKey(
        "security.protocol", "enum", default="PLAINTEXT",
        choices=("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"), case="upper",
        kafka_kwarg="security_protocol", extension=True,
        doc="Protocol used to talk to brokers.",
    ),
    ConfigKey(
        "ssl.cafile", "str", kafka_kwarg="ssl_cafile", extension=True,
        doc="CA certificate file (PEM) to verify brokers with.",
    ),
    ConfigKey(
        "ssl.certfile", "str", kafka_kwarg="ssl_certfile", extension=True,
        doc="Client certificate file (PEM).",
    ),
    ConfigKey(
        "ssl.keyfile", "str", kafka_kwarg="ssl_keyfile", extension=True,
        doc="Client private key file (PEM); needs ssl.certfile.",
    ),
    ConfigKey(
        "ssl.password", "str", redact=_redact_all, kafka_kwarg="ssl_password", extension=True,
        doc="Password of the client private key (secret); needs ssl.certfile.",
    ),
    ConfigKey(
        "ssl.check.hostname", "bool", default=True, kafka_kwarg="ssl_check_hostname",
        extension=True,
        doc="Check that the broker certificate matches its host name.",
    ),
    ConfigKey(
        "sasl.mechanism", "enum",
        choices=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER"),
        case="upper", kafka_kwarg="sasl_mechanism", extension=True,
        doc="SASL mechanism; required with a SASL_* security.protocol.",
    ),
    ConfigKey(
        "sasl.plain.username", "str", kafka_kwarg="sasl_plain_username", extension=True,
        doc="User name for PLAIN and SCRAM.",
    ),
    ConfigKey(
        "sasl.plain.password", "str", redact=_redact_all, kafka_kwarg="sasl_plain_password",
        extension=True,
        doc="Password for PLAIN and SCRAM (secret).",
    ),
    ConfigKey(
        "sasl.kerberos.service.name", "str", default="kafka",
        kafka_kwarg="sasl_kerberos_service_name", extension=True,
        doc="Kerberos service name of the brokers (GSSAPI).",
    ),
    ConfigKey(
        "zookeeper.outage.delivery", "enum", default="pause", choices=("pause", "continue"),
        extension=True,
        doc="While ZooKeeper does not answer on the member's session (the member cannot tell "
            "being cut off from ZooKeeper being down for everyone): `pause` hands out nothing "
            "from half the session timeout after the last answer until ZooKeeper confirms the "
            "same session (a member cut off alone never hands out what its partitions' next "
            "owner also does); `continue` keeps handing out, as the original did, until the "
            "session is known to be lost. Commits are written only with proof either way.",
    ),
)
# fmt: on
"""Every configuration key, legacy keys first, then the zkconsumer extensions."""

_BY_NAME: dict[str, ConfigKey] = {k.name: k for k in CONFIG_KEYS}


def _check_table() -> None:
    """Import-time sanity checks of the table itself."""
    seen: set[str] = set()
    for key in CONFIG_KEYS:
        assert key.name not in seen, key.name
        assert key.derived_from is None or key.derived_from in seen, key.name
        assert (key.kind == "enum") == bool(key.choices), key.name
        assert not (key.required and (key.default is not None or key.derived_from)), key.name
        seen.add(key.name)


_check_table()


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
    return values, given


def _raise_problems(problems: list[str], context: str = "") -> None:
    if not problems:
        return
    if len(problems) == 1:
        raise ConfigError(problems[0])
    summary = f"{len(problems)} configuration problems{context}:"
    raise ConfigError("\n".join([summary, *(f"  {p}" for p in problems)]))


def _as_string(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# --------------------------------------------------------------------------------------
# java.util.Properties syntax.

_PROP_WS = " \t\f"


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, logical line) pairs, as java.util.Properties.LineReader does."""
    natural = re.split(r"\r\n|\r|\n", text)
    out: list[tuple[int, str]] = []
    i = 0
    while i < len(natural):
        start = i
        line = natural[i].lstrip(_PROP_WS)
        i += 1
        if not line or line[0] in "#!":
            continue  # blank and comment lines are never continued
        parts: list[str] = []
        while True:
            trailing = len(line) - len(line.rstrip("\\"))
            if trailing % 2 == 0:
                parts.append(line)
                break
            parts.append(line[:-1])
            if i >= len(natural):
                break
            line = natural[i].lstrip(_PROP_WS)
            i += 1
        out.append((start + 1, "".join(parts)))
    return out


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    """Java Properties escapes; unescaped trailing whitespace is dropped. Raises _Invalid."""
    chars: list[tuple[str, bool]] = []  # (char, was escaped)
    i = 0
    while i < len(text):
        c = text[i]
        i += 1
        if c != "\\":
            chars.append((c, False))
            continue
        if i >= len(text):
            break  # a lone backslash at the very end is dropped, as in Java
        c = text[i]
        i += 1
        if c == "u":
            digits = text[i : i + 4]
            if len(digits) != 4 or not all(d in "0123456789abcdefABCDEF" for d in digits):
                shown = "\\u" + digits
                raise _Invalid(f"malformed \\uxxxx escape {shown!r}")
            chars.append((chr(int(digits, 16)), True))
            i += 4
        else:
            chars.append((_ESCAPES.get(c, c), True))
    while chars and not chars[-1][1] and chars[-1][0] in _PROP_WS:
        chars.pop()
    return "".join(c for c, _ in chars)


def _split_key_value(line: str) -> tuple[str, str, bool]:
    """(raw key, raw value, had a separator) of a logical line."""
    backslash = False
    key_end = len(line)
    has_sep = False
    for pos, c in enumerate(line):
        if backslash:
            backslash = False
            continue
        if c == "\\":
            backslash = True
        elif c in "=:" or c in _PROP_WS:
            key_end = pos
            has_sep = c in "=:"
            break
    pos = key_end + (1 if has_sep else 0)
    while pos < len(line) and line[pos] in _PROP_WS:
        pos += 1
    if not has_sep and pos < len(line) and line[pos] in "=:":
        has_sep = True
        pos += 1
        while pos < len(line) and line[pos] in _PROP_WS:
            pos += 1
    value = line[pos:]
    return line[:key_end], value, has_sep or bool(value)


def _parse_properties(text: str, source: str) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """(properties, "source:line" by key, problems) of a properties document."""
    props: dict[str, str] = {}
    origins: dict[str, str] = {}
    problems: list[str] = []
    for lineno, line in _logical_lines(text):
        where = f"{source}:{lineno}"
        raw_key, raw_value, has_value = _split_key_value(line)
        try:
            key = _unescape(raw_key)
            value = _unescape(raw_value)
        except _Invalid as exc:
            problems.append(f"{where}: {exc}")
            continue
        if not key:
            problems.append(f"{where}: no key before the separator in {line!r}")
            continue
        if not has_value:
            problems.append(f"{where}: {line!r} is not key=value")
            continue
        props[key] = value
        origins[key] = where
    return props, origins, problems


def _read_text(path: str | os.PathLike[str]) -> str:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise ConfigError(f"cannot read properties file {os.fspath(path)!r}: {exc}") from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")  # what java.util.Properties.load(InputStream) reads
    return text.removeprefix("\ufeff")


def read_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """The key/value pairs of a Java properties file, keys not validated.

    Supports ``#``/``!`` comments, ``key=value``, ``key:value`` and ``key value``,
    backslash continuations and the ``\\t \\n \\r \\f \\\\ \\uXXXX`` escapes. The file is
    read as UTF-8, or ISO-8859-1 when it is not valid UTF-8. Raises ConfigError naming
    the file and line.
    """
    source = os.fspath(path)
    props, _, problems = _parse_properties(_read_text(path), source)
    _raise_problems(problems, f" in {source}")
    return props


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

        Every problem (syntax and values) is reported in one ConfigError; problems
        coming from the file name it and the line.
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
        """
        merged: dict[str, object] = dict(self._given)
        for key, value in props.items():
            merged[key.strip()] = value
        return ConsumerConfig(merged)

    # ---- generic access ----

    def get(self, key: str) -> object:
        """The typed effective value of a dotted key (None when unset)."""
        try:
            return self._values[key]
        except KeyError:
            raise KeyError(_unknown_key_message(key)) from None

    def __getitem__(self, key: str) -> object:
        return self.get(key)

    def is_given(self, key: str) -> bool:
        """Whether ``key`` was given explicitly (rather than defaulted or derived)."""
        self.get(key)
        return key in self._given

    def as_properties(self, redact: bool = True) -> dict[str, str]:
        """Every set effective value as a string (booleans as true/false), in table order.

        Unset keys are left out. With ``redact`` (the default), secrets read ``******``.
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


# --------------------------------------------------------------------------------------
# Documentation.


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def _default_doc(key: ConfigKey) -> str:
    if key.required:
        return "required"
    if key.derived_from is not None:
        return key.derive_doc or f"= {key.derived_from}"
    if key.default is None:
        return "unset"
    return f"`{_as_string(key.default)}`"


def _valid_doc(key: ConfigKey) -> str:
    if key.choices:
        return ", ".join(f"`{c}`" for c in key.choices)
    if key.kind == "bool":
        return "`true`, `false`"
    if key.kind == "int":
        lo, hi = key.min, key.max
        if hi == _JAVA_INT_MAX:
            return f">= {lo}"
        return f"{lo}..{hi}"
    return key.check_doc or "any string"


def config_table_markdown() -> str:
    """The Markdown table of every key (for docs/configuration.md), generated from CONFIG_KEYS."""
    lines = [
        "| key | type | default | valid values | description |",
        "|---|---|---|---|---|",
    ]
    for key in CONFIG_KEYS:
        doc = key.doc + (" *zkconsumer extension.*" if key.extension else "")
        row = (f"`{key.name}`", key.kind, _default_doc(key), _valid_doc(key), doc)
        lines.append("| " + " | ".join(_md(cell) for cell in row) + " |")
    return "\n".join(lines) + "\n"
