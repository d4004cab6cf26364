"""Every ZooKeeper path and every znode payload zkconsumer reads or writes.

This is the only module that knows the layout; everything else calls the builders and
codecs below. The layout is the one Kafka's legacy high-level consumer (0.8.2 to 0.10.2)
and ZooKeeper-mode brokers use, so a zkconsumer group can share ZooKeeper with JVM
consumers and real brokers::

    /
    ├── consumers                                   CONSUMERS
    │   └── <group>                                 group_dir(g)
    │       ├── ids                                 ids_dir(g)
    │       │   └── <consumer id>      ephemeral    id_path(g, c)         ConsumerRegistration
    │       ├── owners                              owners_dir(g)
    │       │   └── <topic>                         owners_topic_dir(g, t)
    │       │       └── <partition>    ephemeral    owner_path(g, t, p)   thread id (utf-8)
    │       └── offsets                             offsets_dir(g)
    │           └── <topic>                         offsets_topic_dir(g, t)
    │               └── <partition>    persistent   offset_path(g, t, p)  next offset (decimal)
    └── brokers
        ├── ids                                     BROKER_IDS
        │   └── <broker id>            ephemeral    broker_path(b)        BrokerRegistration
        └── topics                                  BROKER_TOPICS
            └── <topic>                persistent   topic_path(t)         TopicAssignment
                └── partitions                      partitions_dir(t)
                    └── <partition>
                        └── state      persistent   partition_state_path(t, p)  PartitionState

Identifiers:

* consumer id: ``<group>_<hostname>-<epoch millis>-<8 hex chars of a uuid4>``, or
  ``<group>_<consumer.id>`` when ``consumer.id`` is set (:func:`make_consumer_id`);
* thread id: ``<consumer id>-<n>``, n = 0 .. streams-1 (:func:`thread_ids`).

Encoders produce compact JSON with the key order shown in the reference: the JVM's bytes but
for its escaping (in a pattern it escapes ``/`` with a backslash, and U+007F..U+009F as
backslash-u sequences), so the parsed values are the same.
Decoders are tolerant of older and newer versions of each payload, and raise
:class:`~zkconsumer._errors.ZkDataError` (naming the path) for anything they cannot make
sense of; they never raise another exception type.
"""

from __future__ import annotations

import json
import re
import socket
import time
import uuid
from dataclasses import KW_ONLY, dataclass
from typing import Any, NoReturn

from zkconsumer._errors import ZkDataError

__all__ = [
    "parse_id",
    "BROKER_IDS",
    "BROKER_TOPICS",
    "CONSUMERS",
    "PATTERN_BLACKLIST",
    "PATTERN_STATIC",
    "PATTERN_WHITELIST",
    "BrokerRegistration",
    "ConsumerRegistration",
    "PartitionState",
    "TopicAssignment",
    "broker_path",
    "decode_offset",
    "decode_owner",
    "encode_offset",
    "encode_owner",
    "group_dir",
    "id_of_path",
    "id_path",
    "jvm_json_escape",
    "ids_dir",
    "make_consumer_id",
    "offset_path",
    "offsets_dir",
    "offsets_topic_dir",
    "owner_path",
    "owners_dir",
    "owners_topic_dir",
    "parse_offset_line",
    "parse_offset_path",
    "parse_owner_path",
    "partition_state_path",
    "partitions_dir",
    "thread_consumer_id",
    "thread_ids",
    "topic_path",
]

# --------------------------------------------------------------------------------------
# Paths
# --------------------------------------------------------------------------------------

CONSUMERS = "/consumers"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"


def _name(value: object, what: str) -> str:
    """Validate one path component: a non-empty string without ``/``."""
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a string, got {value!r}")
    if not value:
        raise ValueError(f"{what} must not be empty")
    if "/" in value:
        raise ValueError(f"{what} must not contain '/': {value!r}")
    if value in (".", ".."):
        raise ValueError(f"{what} must not be {value!r} (ZooKeeper rejects it)")
    if "\x00" in value:
        raise ValueError(f"{what} must not contain a NUL character: {value!r}")
    return value


def _number(value: object, what: str) -> int:
    """Validate a partition or broker id used as a path component."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what} must be an int, got {value!r}")
    if value < 0:
        raise ValueError(f"{what} must not be negative, got {value}")
    return value


def group_dir(group: str) -> str:
    """``/consumers/<group>``."""
    return f"{CONSUMERS}/{_name(group, 'group')}"


def ids_dir(group: str) -> str:
    """``/consumers/<group>/ids``: one ephemeral child per live consumer."""
    return f"{group_dir(group)}/ids"


def id_path(group: str, consumer_id: str) -> str:
    """``/consumers/<group>/ids/<consumer id>``: holds a :class:`ConsumerRegistration`."""
    return f"{ids_dir(group)}/{_name(consumer_id, 'consumer id')}"


def id_of_path(path: str) -> str:
    """The consumer id at the end of an :func:`id_path` (a watch event names the path).

    >>> id_of_path(id_path("g", "g_host-1-ab"))
    'g_host-1-ab'
    """
    return path.rsplit("/", 1)[-1]


def owners_dir(group: str) -> str:
    """``/consumers/<group>/owners``."""
    return f"{group_dir(group)}/owners"


def owners_topic_dir(group: str, topic: str) -> str:
    """``/consumers/<group>/owners/<topic>``."""
    return f"{owners_dir(group)}/{_name(topic, 'topic')}"


def owner_path(group: str, topic: str, partition: int) -> str:
    """``/consumers/<group>/owners/<topic>/<partition>``: holds the owning thread id."""
    return f"{owners_topic_dir(group, topic)}/{_number(partition, 'partition')}"


def offsets_dir(group: str) -> str:
    """``/consumers/<group>/offsets``."""
    return f"{group_dir(group)}/offsets"


def offsets_topic_dir(group: str, topic: str) -> str:
    """``/consumers/<group>/offsets/<topic>``."""
    return f"{offsets_dir(group)}/{_name(topic, 'topic')}"


def offset_path(group: str, topic: str, partition: int) -> str:
    """``/consumers/<group>/offsets/<topic>/<partition>``: the next offset to consume."""
    return f"{offsets_topic_dir(group, topic)}/{_number(partition, 'partition')}"


_ID_NAME = re.compile(r"0|[1-9][0-9]*", re.ASCII)


def parse_id(name: str) -> int | None:
    """The number a partition or broker id znode is named by, as the JVM names them
    (``Int.toString``: ASCII digits, no sign, no leading zero); None for any other name
    (``str.isdigit`` takes "²", which ``int`` refuses, and "007", which names another path).

    >>> parse_id("7"), parse_id("0"), parse_id("007"), parse_id("²"), parse_id("-1")
    (7, 0, None, None, None)
    """
    return int(name) if _ID_NAME.fullmatch(name) else None


def broker_path(broker_id: int) -> str:
    """``/brokers/ids/<broker id>``: holds a :class:`BrokerRegistration`."""
    return f"{BROKER_IDS}/{_number(broker_id, 'broker id')}"


def topic_path(topic: str) -> str:
    """``/brokers/topics/<topic>``: holds a :class:`TopicAssignment`."""
    return f"{BROKER_TOPICS}/{_name(topic, 'topic')}"


def partitions_dir(topic: str) -> str:
    """``/brokers/topics/<topic>/partitions``."""
    return f"{topic_path(topic)}/partitions"


def partition_state_path(topic: str, partition: int) -> str:
    """``/brokers/topics/<topic>/partitions/<partition>/state``: a :class:`PartitionState`."""
    return f"{partitions_dir(topic)}/{_number(partition, 'partition')}/state"


_GROUP_TOPIC_PARTITION = {
    kind: re.compile(rf"/consumers/([^/]+)/{kind}/([^/]+)/([0-9]+)", re.ASCII)
    for kind in ("offsets", "owners")
}


def _parse_gtp(path: object, kind: str) -> tuple[str, str, int]:
    if not isinstance(path, str):
        raise ValueError(f"not a /consumers/<group>/{kind}/<topic>/<partition> path: {path!r}")
    match = _GROUP_TOPIC_PARTITION[kind].fullmatch(path)
    if match is None or match.group(1) in (".", "..") or match.group(2) in (".", ".."):
        raise ValueError(f"not a /consumers/<group>/{kind}/<topic>/<partition> path: {path!r}")
    return match.group(1), match.group(2), int(match.group(3))


def parse_offset_path(path: str) -> tuple[str, str, int]:
    """Split ``/consumers/G/offsets/T/P`` into ``(G, T, P)``; ValueError if not that shape.

    This is the path half of the ExportZkOffsets / ImportZkOffsets line
    ``/consumers/G/offsets/T/P:offset`` (see :func:`parse_offset_line`).
    """
    return _parse_gtp(path, "offsets")


def parse_owner_path(path: str) -> tuple[str, str, int]:
    """Split ``/consumers/G/owners/T/P`` into ``(G, T, P)``; ValueError if not that shape."""
    return _parse_gtp(path, "owners")


def parse_offset_line(line: str) -> tuple[str, str, int, int]:
    """Parse one ExportZkOffsets line ``/consumers/G/offsets/T/P:offset``.

    Returns ``(G, T, P, offset)``; surrounding whitespace (the newline) is ignored.
    Raises ValueError for a malformed line.
    """
    if not isinstance(line, str):
        raise ValueError(f"not an offsets line: {line!r}")
    path, sep, offset_text = line.strip().rpartition(":")
    if not sep:
        raise ValueError(f"not an offsets line (no ':offset'): {line!r}")
    group, topic, partition = parse_offset_path(path)
    if _OFFSET_TEXT.fullmatch(offset_text) is None:
        raise ValueError(f"not an offsets line (bad offset): {line!r}")
    offset = int(offset_text)
    if not -1 <= offset <= _INT64_MAX:
        raise ValueError(f"not an offsets line (offset out of range): {line!r}")
    return group, topic, partition, offset


# --------------------------------------------------------------------------------------
# Consumer and thread ids
# --------------------------------------------------------------------------------------

_HEX8 = re.compile(r"[0-9a-f]{8}", re.ASCII)
_THREAD_ID = re.compile(r"(.+)-([0-9]+)", re.ASCII | re.DOTALL)


def make_consumer_id(
    group: str,
    consumer_id_setting: str | None,
    hostname: str | None = None,
    now_ms: int | None = None,
    uuid_hex8: str | None = None,
) -> str:
    """The consumer id the JVM consumer would register.

    ``<group>_<consumer.id>`` when the ``consumer.id`` setting is given, otherwise
    ``<group>_<hostname>-<epoch millis>-<first 8 hex chars of a random uuid4>``.
    ``hostname``, ``now_ms`` and ``uuid_hex8`` default to the local host name, the
    current time and a fresh uuid4; tests pass them to get a fixed id.
    """
    _name(group, "group")
    if consumer_id_setting is not None:
        _name(consumer_id_setting, "consumer.id")
        return f"{group}_{consumer_id_setting}"
    host = socket.gethostname() if hostname is None else hostname
    _name(host, "hostname")
    millis = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    if isinstance(millis, bool) or not isinstance(millis, int) or millis < 0:
        raise ValueError(f"now_ms must be a non-negative int, got {millis!r}")
    hex8 = uuid.uuid4().hex[:8] if uuid_hex8 is None else uuid_hex8
    if not isinstance(hex8, str) or _HEX8.fullmatch(hex8) is None:
        raise ValueError(f"uuid_hex8 must be 8 lowercase hex characters, got {hex8!r}")
    return f"{group}_{host}-{millis}-{hex8}"


def thread_ids(consumer_id: str, n: int) -> list[str]:
    """``[<consumer id>-0, ..., <consumer id>-(n-1)]``: the ids of a consumer's streams."""
    _name(consumer_id, "consumer id")
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"number of streams must be a non-negative int, got {n!r}")
    return [f"{consumer_id}-{i}" for i in range(n)]


def thread_consumer_id(thread_id: str) -> str:
    """The consumer id a thread id belongs to: ``c-3`` -> ``c``.

    Raises ZkDataError when ``thread_id`` is not ``<consumer id>-<n>``.
    """
    if not isinstance(thread_id, str):
        raise ZkDataError(f"not a consumer thread id: {thread_id!r}")
    match = _THREAD_ID.fullmatch(thread_id)
    if match is None:
        raise ZkDataError(f"not a consumer thread id (<consumer id>-<n>): {thread_id!r}")
    return match.group(1)


# --------------------------------------------------------------------------------------
# Decoding helpers
# --------------------------------------------------------------------------------------

_INT64_MAX = 2**63 - 1
_INT32_MAX = 2**31 - 1
_OFFSET_TEXT = re.compile(r"[+-]?[0-9]+", re.ASCII)
_DECIMAL = re.compile(r"-?[0-9]+", re.ASCII)


def _compact(obj: object) -> bytes:
    """Compact JSON (no spaces), non-ASCII written as UTF-8 like Jackson does."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode(
        "utf-8"
    )


class _Decoder:
    """Carries the path and payload kind so every failure names them."""

    def __init__(self, what: str, data: object, path: str | None) -> None:
        self.what = what
        self.data = data
        self.path = path

    def fail(self, reason: str) -> NoReturn:
        where = self.path if self.path is not None else "<unknown path>"
        preview = self.data
        if isinstance(preview, (bytes, bytearray)) and len(preview) > 200:
            preview = bytes(preview[:200]) + b"..."
        raise ZkDataError(f"cannot decode {self.what} at {where}: {reason}; data={preview!r}")

    def text(self) -> str:
        data = self.data
        if data is None:
            self.fail("the znode has no data")
        if not isinstance(data, (bytes, bytearray, memoryview)):
            self.fail(f"expected bytes, got {type(data).__name__}")
        try:
            return bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            self.fail(f"not UTF-8 ({exc})")

    def json_object(self) -> dict[str, Any]:
        text = self.text()

        def no_constants(name: str) -> NoReturn:
            raise ValueError(f"{name} is not JSON")

        try:
            obj = json.loads(text, parse_constant=no_constants)
        except (ValueError, RecursionError) as exc:
            self.fail(f"invalid JSON ({exc})")
        if not isinstance(obj, dict):
            self.fail(f"expected a JSON object, got {type(obj).__name__}")
        return obj

    # typed field access ----------------------------------------------------------------

    def int_value(self, value: object, key: str, *, allow_str: bool = False) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if allow_str and isinstance(value, str) and _DECIMAL.fullmatch(value.strip()):
            return int(value.strip())
        self.fail(f"{key!r} must be an integer, got {value!r}")

    def req_int(self, obj: dict[str, Any], key: str, *, allow_str: bool = False) -> int:
        if key not in obj:
            self.fail(f"missing {key!r}")
        return self.int_value(obj[key], key, allow_str=allow_str)

    def opt_int(
        self, obj: dict[str, Any], key: str, default: int, *, allow_str: bool = False
    ) -> int:
        value = obj.get(key)
        if value is None:
            return default
        return self.int_value(value, key, allow_str=allow_str)

    def opt_str(self, obj: dict[str, Any], key: str) -> str | None:
        value = obj.get(key)
        if value is None or isinstance(value, str):
            return value
        self.fail(f"{key!r} must be a string or null, got {value!r}")

    def int_list(self, value: object, key: str) -> list[int]:
        if not isinstance(value, list):
            self.fail(f"{key!r} must be a list of integers, got {value!r}")
        return [self.int_value(item, key) for item in value]

    def str_list(self, value: object, key: str) -> list[str]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.fail(f"{key!r} must be a list of strings, got {value!r}")
        return list(value)

    def version(self, obj: dict[str, Any], default: int = 1) -> int:
        version = self.opt_int(obj, "version", default)
        if version < 0:
            self.fail(f"bad version {version}")
        return version


def _lenient_int(value: object, default: int, minimum: int | None = None) -> int:
    """An integer (or decimal string) in a field nobody relies on; else ``default``."""
    if isinstance(value, str) and _DECIMAL.fullmatch(value.strip()):
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int):
        return default
    return default if minimum is not None and value < minimum else value


def _check_int(value: object, what: str, minimum: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what} must be an int, got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{what} must be >= {minimum}, got {value}")


# --------------------------------------------------------------------------------------
# /consumers/G/ids/C
# --------------------------------------------------------------------------------------

PATTERN_STATIC = "static"
PATTERN_WHITELIST = "white_list"
PATTERN_BLACKLIST = "black_list"
_PATTERNS = (PATTERN_STATIC, PATTERN_WHITELIST, PATTERN_BLACKLIST)
#: The ids JSON field in which a zkconsumer member records its partition.assignment.strategy.
STRATEGY_FIELD = "assignment_strategy"
#: The ids JSON field in which a zkconsumer member records where it commits its offsets.
STORAGE_FIELD = "offsets_storage"
#: Its values: ZooKeeper, Kafka, or both (``offsets.storage=kafka`` with dual commit).
OFFSET_STORES = ("zookeeper", "kafka", "dual")


_JVM_ESCAPES = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f",
                "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def jvm_json_escape(text: str) -> str:
    r"""The JVM's ``CoreUtils.JSONEscapeString``, which a wildcard member applies to its
    regex before registering it: ``" \ /`` and the C0 controls backslash-escaped, the other
    controls (U+0000..U+001F, U+007F..U+009F) as ``\uXXXX``.

    >>> print(jvm_json_escape(r'a\.b/"c"'))
    a\\.b\/\"c\"
    >>> jvm_json_escape("\x7f\n")
    '\\u007f\\n'
    """
    out = []
    for ch in text:
        if ch in _JVM_ESCAPES:
            out.append(_JVM_ESCAPES[ch])
        elif ch <= "\x1f" or "\x7f" <= ch <= "\x9f":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out)


@dataclass(frozen=True)
class ConsumerRegistration:
    """The payload of ``/consumers/G/ids/C``.

    Static subscriptions map each topic to its number of streams. Wildcard ones
    (``pattern`` ``white_list`` or ``black_list``) hold exactly one entry: the normalised
    regex to its number of streams. Encoded exactly as the JVM consumer does::

        {"version":1,"subscription":{"t":2},"pattern":"static","timestamp":"1494000000000"}

    A zkconsumer member adds its ``partition.assignment.strategy`` as one more field (the
    JVM consumer reads only the pattern and the subscription, and ignores the rest)::

        {...,"timestamp":"1494000000000","assignment_strategy":"sticky"}

    ``assignment_strategy`` is None for a registration without it (a JVM member, or an older
    zkconsumer), which can only be using ``range`` or ``roundrobin``. Likewise
    ``offsets_storage``, where the member commits (``zookeeper``, ``kafka``, or ``dual``:
    ``offsets.storage=kafka`` with ``dual.commit.enabled``), which the lag exporter reads;
    None for a JVM member, which does not say it.
    """

    subscription: dict[str, int]
    pattern: str
    timestamp_ms: int
    version: int = 1
    assignment_strategy: str | None = None
    offsets_storage: str | None = None

    def __post_init__(self) -> None:
        if self.pattern not in _PATTERNS:
            raise ValueError(f"pattern must be one of {_PATTERNS}, got {self.pattern!r}")
        if not isinstance(self.subscription, dict):
            raise ValueError(f"subscription must be a dict, got {self.subscription!r}")
        for topic, count in self.subscription.items():
            # A wildcard's key is its regex, which may normalise to "".
            if not isinstance(topic, str) or not (topic or self.is_wildcard):
                raise ValueError(f"subscription keys must be non-empty strings, got {topic!r}")
            _check_int(count, f"stream count of {topic!r}", 0)
        if self.is_wildcard and len(self.subscription) != 1:
            raise ValueError(
                f"a {self.pattern} subscription has exactly one regex, got {self.subscription!r}"
            )
        _check_int(self.timestamp_ms, "timestamp_ms")
        _check_int(self.version, "version", 0)
        if self.assignment_strategy is not None and (
                not isinstance(self.assignment_strategy, str) or not self.assignment_strategy):
            raise ValueError("assignment_strategy must be a non-empty string or None, got "
                             f"{self.assignment_strategy!r}")
        if self.offsets_storage is not None and self.offsets_storage not in OFFSET_STORES:
            raise ValueError(f"offsets_storage must be one of {OFFSET_STORES} or None, got "
                             f"{self.offsets_storage!r}")

    @classmethod
    def static(cls, topic_counts: dict[str, int], timestamp_ms: int) -> ConsumerRegistration:
        """A static subscription ``{topic: streams}``."""
        return cls(dict(topic_counts), PATTERN_STATIC, timestamp_ms)

    @classmethod
    def wildcard(
        cls, pattern: str, regex: str, num_streams: int, timestamp_ms: int
    ) -> ConsumerRegistration:
        """A wildcard subscription; ``regex`` should be the filter's normalised regex."""
        if pattern not in (PATTERN_WHITELIST, PATTERN_BLACKLIST):
            raise ValueError(f"wildcard pattern must be white_list or black_list: {pattern!r}")
        return cls({regex: num_streams}, pattern, timestamp_ms)

    @property
    def is_wildcard(self) -> bool:
        """True for ``white_list`` / ``black_list`` subscriptions."""
        return self.pattern != PATTERN_STATIC

    @property
    def wildcard_regex(self) -> str | None:
        """The regex of a wildcard subscription; None when static."""
        if not self.is_wildcard:
            return None
        return next(iter(self.subscription))

    @property
    def wildcard_streams(self) -> int | None:
        """The number of streams of a wildcard subscription; None when static."""
        if not self.is_wildcard:
            return None
        return next(iter(self.subscription.values()))

    def encode(self, *, regex_escaped_twice: bool = False) -> bytes:
        """The JSON a JVM member writes (with zkconsumer's ``assignment_strategy`` when
        set). ``regex_escaped_twice``: a wildcard's regex as Kafka 1.0.1 to 1.1.1 write it
        (``jvm.compatibility``), escaped by :func:`jvm_json_escape` before the JSON encoding
        escapes it again, so that every reader takes the once-escaped text for the regex, as
        from such a JVM member."""
        subscription = self.subscription
        if regex_escaped_twice and self.is_wildcard:
            subscription = {jvm_json_escape(k): v for k, v in subscription.items()}
        obj: dict[str, object] = {
            "version": self.version,
            "subscription": subscription,
            "pattern": self.pattern,
            "timestamp": str(self.timestamp_ms),
        }
        if self.assignment_strategy is not None:
            obj[STRATEGY_FIELD] = self.assignment_strategy
        if self.offsets_storage is not None:
            obj[STORAGE_FIELD] = self.offsets_storage
        return _compact(obj)

    @classmethod
    def decode(cls, data: bytes | None, path: str | None = None) -> ConsumerRegistration:
        """Decode an ids znode.

        Tolerates a timestamp as a number, a string or anything else (then -1), stream
        counts written as strings, a version missing or unusable (1), and an unknown pattern,
        which reads as ``static`` (as the JVM consumer does). A missing pattern reads as
        ``static`` too (the JVM fails its rebalance on such a member; no JVM member writes
        one). A wildcard pattern with an empty subscription also reads as static, like the
        original.
        """
        d = _Decoder("consumer registration", data, path)
        obj = d.json_object()
        # The JVM reads only the pattern and the subscription: a member whose version or
        # timestamp it would accept is never left out of the group view for those.
        version = _lenient_int(obj.get("version"), 1, minimum=1)
        raw_pattern = obj.get("pattern")
        if raw_pattern is not None and not isinstance(raw_pattern, str):
            d.fail(f"'pattern' must be a string, got {raw_pattern!r}")
        pattern = raw_pattern if raw_pattern in _PATTERNS else PATTERN_STATIC
        if "subscription" not in obj:
            d.fail("missing 'subscription'")
        raw_sub = obj["subscription"]
        if not isinstance(raw_sub, dict):
            d.fail(f"'subscription' must be an object, got {raw_sub!r}")
        subscription: dict[str, int] = {}
        for topic, count in raw_sub.items():
            n = d.int_value(count, f"subscription[{topic!r}]", allow_str=True)
            if n < 0:
                d.fail(f"negative stream count for {topic!r}")
            subscription[topic] = n
        if pattern != PATTERN_STATIC:
            if not subscription:
                pattern = PATTERN_STATIC
            elif len(subscription) != 1:
                d.fail(f"a {pattern} subscription must hold exactly one regex")
        timestamp = _lenient_int(obj.get("timestamp"), -1)
        # Written only by zkconsumer; anything but a non-empty string reads as absent.
        raw_strategy = obj.get(STRATEGY_FIELD)
        strategy = raw_strategy if isinstance(raw_strategy, str) and raw_strategy else None
        raw_storage = obj.get(STORAGE_FIELD)  # likewise: anything unknown reads as absent
        storage = raw_storage if raw_storage in OFFSET_STORES else None
        try:
            return cls(subscription, pattern, timestamp, version, strategy, storage)
        except ValueError as exc:
            d.fail(str(exc))


# --------------------------------------------------------------------------------------
# /consumers/G/owners/T/P and /consumers/G/offsets/T/P
# --------------------------------------------------------------------------------------


def encode_owner(thread_id: str) -> bytes:
    """The payload of an owner znode: the owning thread id, UTF-8."""
    if not isinstance(thread_id, str) or not thread_id.strip():
        raise ValueError(f"thread id must be a non-empty string, got {thread_id!r}")
    return thread_id.encode("utf-8")


def decode_owner(data: bytes | None, path: str | None = None) -> str:
    """The thread id held by an owner znode (stripped); ZkDataError if empty or not UTF-8."""
    d = _Decoder("partition owner", data, path)
    owner = d.text().strip()
    if not owner:
        d.fail("empty owner")
    return owner


def encode_offset(offset: int) -> bytes:
    """The payload of an offset znode: the next offset to consume, in decimal."""
    _check_int(offset, "offset", -1)
    if offset > _INT64_MAX:
        raise ValueError(f"offset does not fit in a signed 64-bit integer: {offset}")
    return str(offset).encode("ascii")


def decode_offset(data: bytes | None, path: str | None = None) -> int:
    """The offset held by an offset znode; surrounding whitespace is ignored.

    ZkDataError for anything that is not a decimal integer between -1 and 2**63-1.
    """
    d = _Decoder("offset", data, path)
    text = d.text().strip()
    if _OFFSET_TEXT.fullmatch(text) is None:
        d.fail("not a decimal integer")
    offset = int(text)
    if offset < -1:
        d.fail(f"negative offset {offset}")
    if offset > _INT64_MAX:
        d.fail("offset does not fit in a signed 64-bit integer")
    return offset


# --------------------------------------------------------------------------------------
# /brokers/ids/B
# --------------------------------------------------------------------------------------

# NAME://host:port, NAME://[v6]:port; like Kafka's EndPoint regex, also NAME://::1:port.
_ENDPOINT = re.compile(r"([^:/]*)://(?:\[([^\]]*)\]|([^/\[\]]*)):([0-9]+)", re.ASCII)
_BROKER_ID_PATH = re.compile(r"/brokers/ids/([0-9]+)", re.ASCII)


def _parse_endpoint(endpoint: str) -> tuple[str, str, int] | None:
    """``NAME://host:port`` -> ``(NAME upper-cased, host, port)``; None if unusable."""
    match = _ENDPOINT.fullmatch(endpoint)
    if match is None:
        return None
    name = match.group(1).upper()
    host = match.group(2) if match.group(2) is not None else match.group(3)
    port = int(match.group(4))
    if not name or not host or not 0 < port < 65536:
        return None
    return name, host, port


@dataclass(frozen=True)
class BrokerRegistration:
    """The payload of ``/brokers/ids/B``, as a ZooKeeper-mode broker writes it.

    ``broker_id`` comes from the znode's name, not from the JSON. Encoded (version 4) in
    the key order of the reference::

        {"version":4,"host":"h","port":9092,"endpoints":["PLAINTEXT://h:9092"],
         "jmx_port":-1,"timestamp":"...","rack":null,
         "listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"}}

    (Real brokers build this object from a hash map and leave ``rack`` out when unset;
    the key order is not significant to any JSON reader, Kafka's included.)
    """

    broker_id: int
    endpoints: list[str]
    host: str | None
    port: int
    _: KW_ONLY
    jmx_port: int = -1
    timestamp_ms: int
    rack: str | None = None
    listener_security_protocol_map: dict[str, str] | None = None
    features: dict[str, dict[str, int]] | None = None
    version: int = 4

    def __post_init__(self) -> None:
        _check_int(self.broker_id, "broker_id")
        if not isinstance(self.endpoints, list) or not all(
            isinstance(e, str) for e in self.endpoints
        ):
            raise ValueError(f"endpoints must be a list of strings, got {self.endpoints!r}")
        if self.host is not None and not isinstance(self.host, str):
            raise ValueError(f"host must be a string or None, got {self.host!r}")
        _check_int(self.port, "port")
        _check_int(self.jmx_port, "jmx_port")
        _check_int(self.timestamp_ms, "timestamp_ms")
        if self.rack is not None and not isinstance(self.rack, str):
            raise ValueError(f"rack must be a string or None, got {self.rack!r}")
        lspm = self.listener_security_protocol_map
        if lspm is not None and not (
            isinstance(lspm, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in lspm.items())
        ):
            raise ValueError(f"listener_security_protocol_map must map str to str: {lspm!r}")
        _check_int(self.version, "version", 1)

    def _protocol_map(self) -> dict[str, str]:
        """Listener name -> security protocol, upper-cased.

        Without a map (versions 2 and 3) each listener is named after its protocol.
        """
        if self.listener_security_protocol_map is not None:
            return {k.upper(): v.upper() for k, v in self.listener_security_protocol_map.items()}
        names = (_parse_endpoint(e) for e in self.endpoints)
        return {p[0]: p[0] for p in names if p is not None}

    def endpoint(self, listener: str = "PLAINTEXT") -> tuple[str, int]:
        """``(host, port)`` to reach this broker on ``listener``.

        ``listener`` is a listener name or a security protocol (case-insensitive): an
        endpoint with that listener name wins; otherwise the first endpoint whose listener
        maps to that security protocol in ``listener_security_protocol_map``; otherwise,
        for PLAINTEXT, the top-level host and port (the only address of a version 1
        registration). IPv6 hosts are returned without brackets. ZkDataError naming the
        broker when there is no usable endpoint.
        """
        wanted = listener.upper()
        parsed = [p for p in (_parse_endpoint(e) for e in self.endpoints) if p is not None]
        for name, host, port in parsed:
            if name == wanted:
                return host, port
        protocols = self._protocol_map()
        for name, host, port in parsed:
            if protocols.get(name) == wanted:
                return host, port
        if wanted == "PLAINTEXT" and self.host and 0 < self.port < 65536:
            return self.host, self.port
        raise ZkDataError(
            f"broker {self.broker_id} has no usable endpoint for listener {listener!r} "
            f"(endpoints={self.endpoints!r}, host={self.host!r}, port={self.port})"
        )

    def encode(self) -> bytes:
        obj: dict[str, object] = {"version": self.version, "host": self.host, "port": self.port}
        if self.version >= 2:
            obj["endpoints"] = list(self.endpoints)
        obj["jmx_port"] = self.jmx_port
        obj["timestamp"] = str(self.timestamp_ms)
        if self.version >= 3:
            obj["rack"] = self.rack
        if self.version >= 4:
            obj["listener_security_protocol_map"] = (
                dict(self.listener_security_protocol_map)
                if self.listener_security_protocol_map is not None
                else self._protocol_map()
            )
        if self.version >= 5:
            obj["features"] = dict(self.features) if self.features is not None else {}
        return _compact(obj)

    @classmethod
    def decode(
        cls, data: bytes | None, path: str | None = None, *, broker_id: int | None = None
    ) -> BrokerRegistration:
        """Decode a broker registration, versions 1 to 5.

        The broker id is ``broker_id`` if given, else the last component of
        ``/brokers/ids/<id>`` ``path``, else -1. Tolerates a missing ``rack`` or
        ``endpoints``, a null ``host``, a missing ``jmx_port`` or ``timestamp`` (-1), and
        ignores unknown keys.
        """
        d = _Decoder("broker registration", data, path)
        if broker_id is None:
            match = _BROKER_ID_PATH.fullmatch(path) if isinstance(path, str) else None
            broker_id = int(match.group(1)) if match is not None else -1
        obj = d.json_object()
        if "version" not in obj:
            d.fail("missing 'version'")
        version = d.version(obj)
        if version < 1:
            d.fail(f"unsupported version {version}")
        host = d.opt_str(obj, "host")
        port = d.opt_int(obj, "port", -1)
        endpoints = d.str_list(obj["endpoints"], "endpoints") if "endpoints" in obj else []
        jmx_port = d.opt_int(obj, "jmx_port", -1, allow_str=True)
        timestamp = d.opt_int(obj, "timestamp", -1, allow_str=True)
        rack = d.opt_str(obj, "rack")
        lspm_raw = obj.get("listener_security_protocol_map")
        lspm: dict[str, str] | None = None
        if lspm_raw is not None:
            if not isinstance(lspm_raw, dict) or not all(
                isinstance(v, str) for v in lspm_raw.values()
            ):
                d.fail(f"'listener_security_protocol_map' must map strings: {lspm_raw!r}")
            lspm = dict(lspm_raw)
        features: dict[str, dict[str, int]] | None = None
        features_raw = obj.get("features")
        if features_raw is not None:
            if not isinstance(features_raw, dict):
                d.fail(f"'features' must be an object, got {features_raw!r}")
            features = {}
            for name, ranges in features_raw.items():
                if not isinstance(ranges, dict):
                    d.fail(f"feature {name!r} must be an object, got {ranges!r}")
                features[name] = {
                    k: d.int_value(v, f"features.{name}.{k}") for k, v in ranges.items()
                }
        try:
            return cls(
                broker_id,
                endpoints,
                host,
                port,
                jmx_port=jmx_port,
                timestamp_ms=timestamp,
                rack=rack,
                listener_security_protocol_map=lspm,
                features=features,
                version=version,
            )
        except ValueError as exc:
            d.fail(str(exc))


# --------------------------------------------------------------------------------------
# /brokers/topics/T and /brokers/topics/T/partitions/P/state
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TopicAssignment:
    """The payload of ``/brokers/topics/T``: partition -> replica broker ids.

    Encoded ``{"version":1,"partitions":{"0":[1,2],"1":[2,3]}}``, partitions in numeric
    order.
    """

    partitions: dict[int, list[int]]
    version: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.partitions, dict):
            raise ValueError(f"partitions must be a dict, got {self.partitions!r}")
        for partition, replicas in self.partitions.items():
            _check_int(partition, "partition", 0)
            if not isinstance(replicas, list):
                raise ValueError(f"replicas of partition {partition} must be a list")
            for replica in replicas:
                _check_int(replica, f"replica of partition {partition}")
        _check_int(self.version, "version", 0)

    @property
    def partition_ids(self) -> list[int]:
        """The partition numbers, sorted numerically."""
        return sorted(self.partitions)

    def encode(self) -> bytes:
        return _compact(
            {
                "version": self.version,
                "partitions": {str(p): list(self.partitions[p]) for p in sorted(self.partitions)},
            }
        )

    @classmethod
    def decode(cls, data: bytes | None, path: str | None = None) -> TopicAssignment:
        """Decode a topic znode; ignores the version 2/3 extras (``adding_replicas``,
        ``removing_replicas``, ``topic_id``). The partitions come back in numeric order."""
        d = _Decoder("topic assignment", data, path)
        obj = d.json_object()
        version = d.version(obj)
        raw = obj.get("partitions")
        if not isinstance(raw, dict):
            d.fail(f"'partitions' must be an object, got {raw!r}")
        parsed: dict[int, list[int]] = {}
        for key, replicas in raw.items():
            if re.fullmatch(r"[0-9]+", key, re.ASCII) is None:
                d.fail(f"partition {key!r} is not a number")
            parsed[int(key)] = d.int_list(replicas, f"partitions[{key!r}]")
        if len(parsed) != len(raw):
            d.fail("the same partition is listed twice")
        try:
            return cls({p: parsed[p] for p in sorted(parsed)}, version)
        except ValueError as exc:
            d.fail(str(exc))


@dataclass(frozen=True)
class PartitionState:
    """The payload of ``/brokers/topics/T/partitions/P/state`` (leader and ISR).

    Encoded ``{"version":1,"leader":1,"leader_epoch":0,"controller_epoch":1,"isr":[1,2]}``.
    ``leader`` is -1 while the partition has no leader.
    """

    leader: int
    leader_epoch: int
    controller_epoch: int
    isr: list[int]
    version: int = 1

    def __post_init__(self) -> None:
        _check_int(self.leader, "leader", -1)
        _check_int(self.leader_epoch, "leader_epoch")
        _check_int(self.controller_epoch, "controller_epoch")
        if not isinstance(self.isr, list):
            raise ValueError(f"isr must be a list, got {self.isr!r}")
        for replica in self.isr:
            _check_int(replica, "isr replica")
        _check_int(self.version, "version", 0)

    @property
    def has_leader(self) -> bool:
        return self.leader >= 0

    def encode(self) -> bytes:
        return _compact(
            {
                "version": self.version,
                "leader": self.leader,
                "leader_epoch": self.leader_epoch,
                "controller_epoch": self.controller_epoch,
                "isr": list(self.isr),
            }
        )

    @classmethod
    def decode(cls, data: bytes | None, path: str | None = None) -> PartitionState:
        """Decode a partition state znode; unknown keys (``leader_recovery_state``,
        ``partition_epoch``, ...) are ignored, a missing version reads as 1."""
        d = _Decoder("partition state", data, path)
        obj = d.json_object()
        version = d.version(obj)
        leader = d.req_int(obj, "leader")
        leader_epoch = d.req_int(obj, "leader_epoch")
        controller_epoch = d.req_int(obj, "controller_epoch")
        if "isr" not in obj:
            d.fail("missing 'isr'")
        isr = d.int_list(obj["isr"], "isr")
        try:
            return cls(leader, leader_epoch, controller_epoch, isr, version)
        except ValueError as exc:
            d.fail(str(exc))
