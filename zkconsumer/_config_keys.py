"""The configuration keys: one table, :data:`CONFIG_KEYS`, and the checks of their values.

Each :class:`ConfigKey` gives a key's name, kind, default (or the key its default is derived
from), allowed values or range and a one-line description. Validation, the typed attributes
of :class:`~zkconsumer._config.ConsumerConfig`, redaction of secrets, the kafka-python
keyword mapping and the table of docs/configuration.md (:func:`config_table_markdown`) all
read that table.
The syntax checks of string values (hosts, ZooKeeper logins and ACLs, Kafka releases) are
here too, with the small types they parse into (:class:`ZkAcl`, :class:`ZkSaslLogin`,
:class:`JvmCompatibility`).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from zkconsumer._errors import ConfigError

__all__ = [
    "CONFIG_KEYS",
    "REDACTED",
    "ConfigKey",
    "JvmCompatibility",
    "ZkAcl",
    "ZkSaslLogin",
    "config_table_markdown",
    "legal_id_problem",
]

REDACTED = "******"
"""What a secret value is replaced with in ``repr()``, ``str()``, messages and properties."""

JAVA_INT_MAX = 2**31 - 1
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
        "zookeeper.session.timeout.ms", "int", default=6000, min=1, max=JAVA_INT_MAX,
        doc="ZooKeeper session timeout; a consumer silent this long is considered dead.",
    ),
    ConfigKey(
        "zookeeper.connection.timeout.ms", "int", derived_from="zookeeper.session.timeout.ms",
        min=1, max=JAVA_INT_MAX,
        doc="Longest wait for the ZooKeeper connection to be established.",
    ),
    ConfigKey(
        "zookeeper.sync.time.ms", "int", default=2000, min=0, max=JAVA_INT_MAX,
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
        "socket.timeout.ms", "int", default=30000, min=1, max=JAVA_INT_MAX,
        doc="Network request timeout to brokers; must be >= fetch.wait.max.ms.",
    ),
    ConfigKey(
        "socket.receive.buffer.bytes", "int", default=65536, min=-1, max=JAVA_INT_MAX,
        modern_name="receive.buffer.bytes",
        doc="Socket receive buffer size for broker connections; -1 or 0: the operating "
            "system's default (as the original).",
    ),
    ConfigKey(
        "fetch.message.max.bytes", "int", default=1048576, min=1, max=JAVA_INT_MAX,
        modern_name="max.partition.fetch.bytes",
        doc="Bytes fetched per partition per request.",
    ),
    ConfigKey(
        "num.consumer.fetchers", "int", default=1, min=1, max=JAVA_INT_MAX,
        doc="Fetcher threads per broker.",
    ),
    ConfigKey(
        "fetch.min.bytes", "int", default=1, min=0, max=JAVA_INT_MAX,
        doc="Minimum bytes a broker should have before answering a fetch.",
    ),
    ConfigKey(
        "fetch.wait.max.ms", "int", default=100, min=0, max=JAVA_INT_MAX,
        modern_name="fetch.max.wait.ms",
        doc="Longest a broker waits for fetch.min.bytes before answering a fetch.",
    ),
    ConfigKey(
        "queued.max.message.chunks", "int", default=2, min=1, max=JAVA_INT_MAX,
        doc="Capacity of each stream's queue, in fetched chunks.",
    ),
    ConfigKey(
        "auto.commit.enable", "bool", default=True, modern_name="enable.auto.commit",
        doc="Commit consumed offsets periodically (and on rebalance and shutdown).",
    ),
    ConfigKey(
        "auto.commit.interval.ms", "int", default=60000, min=1, max=JAVA_INT_MAX,
        doc="Auto-commit period; the first commit is one interval after start.",
    ),
    ConfigKey(
        "auto.offset.reset", "enum", default="largest", choices=("smallest", "largest"),
        value_hints=(("earliest", "smallest"), ("latest", "largest")),
        doc="Where to start when there is no committed offset or it is out of range.",
    ),
    ConfigKey(
        "consumer.timeout.ms", "int", default=-1, min=-1, max=JAVA_INT_MAX,
        doc="-1: iterators block; >= 0: raise ConsumerTimeoutException after that long idle.",
    ),
    ConfigKey(
        "rebalance.max.retries", "int", default=4, min=1, max=JAVA_INT_MAX,
        doc="Rebalance attempts before ConsumerRebalanceFailedException.",
    ),
    ConfigKey(
        "rebalance.backoff.ms", "int", derived_from="zookeeper.sync.time.ms",
        min=0, max=JAVA_INT_MAX,
        doc="Pause between rebalance attempts.",
    ),
    ConfigKey(
        "refresh.leader.backoff.ms", "int", default=200, min=0, max=JAVA_INT_MAX,
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
        "offsets.channel.backoff.ms", "int", default=1000, min=0, max=JAVA_INT_MAX,
        doc="Pause before retrying the offsets channel to the coordinator.",
    ),
    ConfigKey(
        "offsets.channel.socket.timeout.ms", "int", default=10000, min=1, max=JAVA_INT_MAX,
        doc="Socket timeout of offset commit and fetch requests to the coordinator.",
    ),
    ConfigKey(
        "offsets.commit.max.retries", "int", default=5, min=0, max=JAVA_INT_MAX,
        doc="Retries of a failed offset commit to Kafka (the shutdown commit).",
    ),
    # ---- zkconsumer extensions ----
    ConfigKey(
        "fetch.backend", "enum", default="confluent", choices=("kafka-python", "confluent"),
        extension=True,
        doc="Client library that fetches from brokers; by default confluent-kafka, or "
            "kafka-python where confluent-kafka cannot be imported (logged once at INFO).",
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
        if hi == JAVA_INT_MAX:
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
