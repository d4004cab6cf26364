"""``zkconsumer console-consumer``: kafka-console-consumer ``--zookeeper``, with Kafka's
DefaultMessageFormatter properties."""

from __future__ import annotations

import argparse
import errno
import os
import random
import re
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING, Any, BinaryIO

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError

from zkconsumer import ops as _ops
from zkconsumer._config import ConsumerConfig
from zkconsumer._errors import (
    ConfigError,
    ConsumerTimeoutException,
    MessageDecodeError,
    ZkConsumerError,
)
from zkconsumer._filters import Blacklist, TopicFilter, Whitelist
from zkconsumer._properties import read_properties
from zkconsumer.cli.common import silence_stdout
from zkconsumer.cli.plumbing import _add_common, _command_error, _handler, _name
from zkconsumer.consumer.connector import create_consumer_connector
from zkconsumer.consumer.stream import CREATE_TIME, LOG_APPEND_TIME
from zkconsumer.zk import paths as zp
from zkconsumer.zk import session
from zkconsumer.zk.session import kafka_security, security_settings

if TYPE_CHECKING:
    from zkconsumer.consumer.connector import ZookeeperConsumerConnector

__all__ = ["register"]

#: The properties of Kafka's DefaultMessageFormatter (print.partition and print.offset as
#: its later versions have them).
_CONSOLE_PROPERTIES = ("print.key", "print.value", "print.timestamp", "print.partition",
                       "print.offset", "key.separator", "line.separator")
_BOOLEAN_PROPERTIES = ("print.key", "print.value", "print.timestamp", "print.partition",
                       "print.offset")
#: --formatter values: Kafka's class names of the default formatter (before and after it
#: moved) and of the one that prints nothing.
_FORMATTERS = {
    "kafka.tools.DefaultMessageFormatter": "default",
    "org.apache.kafka.tools.consumer.DefaultMessageFormatter": "default",
    "kafka.tools.NoOpMessageFormatter": "none",
    "org.apache.kafka.tools.consumer.NoOpMessageFormatter": "none",
}


def _parse_properties(items: Sequence[str], allowed: Sequence[str] | None, flag: str
                      ) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise _command_error(f"{flag} {item!r} is not KEY=VALUE")
        if allowed is not None and key not in allowed:
            raise _command_error(f"{flag} {key!r} is not known; known: {', '.join(allowed)}")
        out[key] = value
    return out


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f", "\\": "\\"}
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")


def _unescape(text: str, name: str) -> str:
    """The escapes of a Java properties file (``\\t \\n \\r \\f \\\\ \\uXXXX``) as typed on
    a command line become the characters; the rest of ``text`` is kept as it is (any
    character, UTF-8 included). Any other backslash is an error naming ``name``: Java would
    silently drop it, which is rarely what was meant."""
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        e = text[i + 1:i + 2]
        if e in _ESCAPES:
            out.append(_ESCAPES[e])
            i += 2
        elif (e == "u" and _HEX4.fullmatch(text[i + 2:i + 6])
              and not 0xD800 <= int(text[i + 2:i + 6], 16) <= 0xDFFF):  # no UTF-8 for those
            out.append(chr(int(text[i + 2:i + 6], 16)))
            i += 6
        else:
            shown = text[i:i + 2] if e != "u" else text[i:i + 6]
            raise _command_error(
                f"--property {name}: unknown escape {shown} at character {i + 1}; known: "
                "\\t \\n \\r \\f \\\\ \\uXXXX (write \\\\ for a backslash)")
    return "".join(out)


class _Output:
    """Writes messages as bytes to stdout as Kafka's DefaultMessageFormatter does: the
    timestamp (``CreateTime:<ms>``), ``Partition:<p>``, ``Offset:<o>``, the key and the
    value, each enabled by its ``print.*`` property, separated by ``key.separator`` and
    ended by ``line.separator``; a null key or value prints ``null``."""

    def __init__(self, props: Mapping[str, bool], key_sep: bytes, line_sep: bytes,
                 enabled: bool = True) -> None:
        self._fields = [name for name in ("timestamp", "partition", "offset", "key", "value")
                        if props.get(f"print.{name}", name == "value")]
        self._key_sep = key_sep
        self._line_sep = line_sep
        self._enabled = enabled
        buffer: BinaryIO | None = getattr(sys.stdout, "buffer", None)
        self._buffer = buffer

    def format(self, message: Any) -> bytes:
        parts = []
        for n, name in enumerate(self._fields):
            parts.append(self._field(message, name))
            parts.append(self._key_sep if n < len(self._fields) - 1 else self._line_sep)
        return b"".join(parts)

    @staticmethod
    def _field(message: Any, name: str) -> bytes:
        if name == "timestamp":
            kind = _TIMESTAMP_TYPES.get(message.timestamp_type)
            return b"NO_TIMESTAMP" if kind is None else f"{kind}:{message.timestamp}".encode()
        if name == "partition":
            return f"Partition:{message.partition}".encode()
        if name == "offset":
            return f"Offset:{message.offset}".encode()
        data = message.key if name == "key" else message.message
        return b"null" if data is None else bytes(data)

    def write(self, message: Any) -> None:
        if not self._enabled:
            return
        data = self.format(message)
        if self._buffer is not None:
            sys.stdout.flush()
            self._buffer.write(data)
            self._buffer.flush()
        else:
            sys.stdout.write(data.decode("utf-8", errors="replace"))
            sys.stdout.flush()


#: Timestamp types as Kafka names them (TimestampType.toString).
_TIMESTAMP_TYPES = {CREATE_TIME: "CreateTime", LOG_APPEND_TIME: "LogAppendTime"}


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised as an interrupt: the console consumer ends as on Ctrl-C."""


#: The exit status after SIGTERM, as a shell reports a process it killed (Ctrl-C: 130).
EXIT_SIGTERM = 128 + signal.SIGTERM


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM ends the console consumer like Ctrl-C: cleanly, with the group deleted; it
    raises :class:`_Terminated` so that the exit status can tell it from Ctrl-C."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise _Terminated

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _cmd_console_consumer(args: argparse.Namespace) -> int:
    props = _parse_properties(args.property or [], _CONSOLE_PROPERTIES, "--property")
    # --consumer.config's keys first: --consumer-property wins, as in Kafka's tool.
    consumer_props = read_properties(args.consumer_config) if args.consumer_config else {}
    consumer_props.update(_parse_properties(args.consumer_property or [], None,
                                            "--consumer-property"))
    if args.max_messages is not None and args.max_messages < 1:
        raise _command_error(f"--max-messages must be >= 1, got {args.max_messages}")
    if args.timeout_ms is not None and args.timeout_ms < 0:
        raise _command_error(f"--timeout-ms must be >= 0, got {args.timeout_ms}")
    if args.group is not None:
        _name(args.group, "group")
    _flag_properties(args, consumer_props)
    if args.delete_consumer_offsets and args.group is None:
        raise _command_error("--delete-consumer-offsets needs --group (a throwaway group "
                             "has no offsets to delete)")
    if args.topic is not None:
        _name(args.topic, "topic")
    flags: dict[str, bool] = {}
    for key in _BOOLEAN_PROPERTIES:
        if key in props:
            value = props[key].strip().lower()
            if value not in ("true", "false"):
                raise _command_error(f"--property {key} must be true or false, got {value!r}")
            flags[key] = value == "true"
    formatter = _FORMATTERS.get(args.formatter or "kafka.tools.DefaultMessageFormatter")
    if formatter is None:
        raise _command_error(f"--formatter {args.formatter!r} is not known; known: "
                             f"{', '.join(_FORMATTERS)}")
    output = _Output(flags,
                     _unescape(props.get("key.separator", "\t"), "key.separator").encode(),
                     _unescape(props.get("line.separator", "\n"), "line.separator").encode(),
                     enabled=formatter == "default")
    topic_filter: TopicFilter | None = None
    if args.whitelist is not None:
        topic_filter = Whitelist(args.whitelist)  # ConfigError for a bad regex
    elif args.blacklist is not None:
        topic_filter = Blacklist(args.blacklist)
    try:
        return _console_consumer(args, consumer_props, output, topic_filter)
    except _Terminated:
        return EXIT_SIGTERM  # after the same clean-up as Ctrl-C


def _parsed(key: str, value: str) -> object:
    """``value`` of ``key`` as ConsumerConfig takes it (stripped, typed, normalised), or
    ``value`` itself when it is not valid (the config built later says what is wrong)."""

    base: dict[str, object] = {"zookeeper.connect": "localhost:2181", "group.id": "g"}
    try:
        return ConsumerConfig({**base, key: value}).get(key)
    except ConfigError:
        return value


def _flag_properties(args: argparse.Namespace, props: dict[str, str]) -> None:
    """Check the ``--consumer-property`` keys that a flag sets, as Kafka's console consumer
    does: each is taken when its flag is not given (group.id as --group: a group of the
    user's, never deleted) and refused when it says otherwise than the flag. --zookeeper is
    always given: the tool's own client reads, checks and deletes the group there. Values
    are compared as ConsumerConfig parses them (``largest `` is ``largest``)."""

    def conflict(key: str, flag: str, sets: str, fix: str = "leave one out") -> ZkConsumerError:
        return _command_error(f"--consumer-property {key}={props[key]} conflicts with {flag}, "
                              f"which sets {sets}; {fix}")

    zookeeper = props.get("zookeeper.connect")
    if zookeeper is not None and (
            _parsed("zookeeper.connect", zookeeper)
            != _parsed("zookeeper.connect", args.zookeeper)):
        raise conflict("zookeeper.connect", f"--zookeeper {args.zookeeper}",
                       "it (the tool reads and deletes the group there too)", "leave it out")
    group = props.get("group.id")
    if group is not None:
        parsed = _parsed("group.id", group)
        if args.group is None:
            problem = _ops.name_problem(str(parsed), "group")
            if problem is not None:
                raise _command_error(f"bad --consumer-property group.id: {problem}")
            args.group = str(parsed)
        elif parsed != args.group:
            raise conflict("group.id", f"--group {args.group}", "it")
    reset = props.get("auto.offset.reset")
    if args.from_beginning and reset is not None and _parsed("auto.offset.reset",
                                                             reset) == "largest":
        raise conflict("auto.offset.reset", "--from-beginning", "auto.offset.reset=smallest "
                       "(start at the earliest offset when the group has none committed)")
    timeout = props.get("consumer.timeout.ms")
    if args.timeout_ms is not None and timeout is not None:
        parsed = _parsed("consumer.timeout.ms", timeout)
        if isinstance(parsed, int) and parsed != args.timeout_ms:  # (else: not a number,
            # ConsumerConfig says so)
            raise conflict("consumer.timeout.ms", f"--timeout-ms {args.timeout_ms}", "it "
                           "(exit when no message arrives for that long)")


#: The errno values of a metrics.port the connector cannot bind.
_BIND_ERRNOS = (errno.EADDRINUSE, errno.EACCES, errno.EADDRNOTAVAIL)


def _start_connector(config: ConsumerConfig) -> ZookeeperConsumerConnector:
    """The console consumer's connector, not yet registered in its group (that is done by
    create_message_streams): what can fail when it is made (metrics.port taken, the
    ZooKeeper login, a bad configuration) fails here, before any offset is deleted. The Kafka
    offset store connects later, at the first rebalance: its failure then says that the
    offsets were already deleted."""

    try:
        return create_consumer_connector(config)
    except OSError as e:
        if config.metrics_port is not None and e.errno in _BIND_ERRNOS:
            raise _command_error(
                f"cannot serve metrics on metrics.port={config.metrics_port}: "
                f"{e.strerror or e}; choose a free port (0: any)") from e
        raise


def _failure_text(e: BaseException) -> str:
    """``e`` for a one-line message (kazoo's and kafka-python's often have no text)."""
    if isinstance(e, ZkConsumerError | OSError):
        return str(e)
    return f"{type(e).__name__} {e}".rstrip()


def _console_config(args: argparse.Namespace, consumer_props: dict[str, str], group: str,
                    throwaway: bool) -> ConsumerConfig:
    """The console consumer's connector configuration: the --consumer-property keys, and
    what the flags and the tool's own ZooKeeper login set."""
    # The whole configuration is checked before anything is deleted: a typo in a
    # --consumer-property must not cost the group its offsets.
    # A --consumer-property a flag sets agrees with the flag (_flag_properties), or is not
    # valid at all: kept, so that ConsumerConfig says what is wrong with it.
    settings: dict[str, object] = dict(consumer_props)
    settings.update({"zookeeper.connect": args.zookeeper, "group.id": group})
    settings.setdefault("auto.offset.reset", "smallest" if args.from_beginning else "largest")
    settings.setdefault("consumer.timeout.ms",
                        args.timeout_ms if args.timeout_ms is not None else -1)
    # The same login and ACL as the tool's own client (a --consumer-property wins).
    for key, value in security_settings().items():
        settings.setdefault(key, value)
    if throwaway:
        # Its offsets are deleted on exit anyway: do not write them.
        settings.setdefault("auto.commit.enable", "false")
    config = ConsumerConfig(settings)
    return config


def _offsets_to_delete(args: argparse.Namespace, zk: KazooClient, group: str) -> bool:
    """Whether --delete-consumer-offsets has a group to delete; refused when
    --from-beginning would be ignored for the group's offsets."""
    has_offsets = bool(zk.exists(zp.offsets_dir(group))) and bool(
        zk.get_children(zp.offsets_dir(group)))
    if args.from_beginning and has_offsets and not args.delete_consumer_offsets:
        raise _command_error(
            f"found previous offset information for group {group}; pass "
            "--delete-consumer-offsets to delete it, or leave out --from-beginning")
    return bool(args.delete_consumer_offsets and _ops.group_exists(zk, group))


def _stream(connector: ZookeeperConsumerConnector, topic: str,
            topic_filter: TopicFilter | None) -> Any:
    """The console consumer's one stream: of ``topic``, or of the topics ``topic_filter``
    allows."""
    if topic_filter is None:
        return connector.create_message_streams({topic: 1})[topic][0]
    return connector.create_message_streams_by_filter(topic_filter, 1)[0]


@_handler
def _console_consumer(args: argparse.Namespace, zk: KazooClient,
                      consumer_props: dict[str, str], output: _Output,
                      topic_filter: TopicFilter | None) -> int:

    if topic_filter is None and not _wait_for_topic(zk, args.topic, args.timeout_ms):
        print("Processed a total of 0 messages", file=sys.stderr)
        return 0

    throwaway = args.group is None
    group = _throwaway_group(zk) if throwaway else args.group

    config = _console_config(args, consumer_props, group, throwaway)

    delete = False if throwaway else _offsets_to_delete(args, zk, group)

    count = 0
    printed: dict[tuple[str, int], int] = {}  # the next offset of each partition printed
    connector = None
    deleted = False
    failed = False
    try:
        with _sigterm_as_interrupt():
            connector = _start_connector(config)
            if delete:
                _ops.delete_group(zk, group)  # refuses while members are registered
                deleted = True
                _warn_kafka_offsets_left(zk, group, config)
            try:
                stream = _stream(connector, args.topic, topic_filter)
                for message in _messages(stream, args.skip_message_on_error):
                    # Counted before it is written: a Ctrl-C (or SIGTERM) is taken when the
                    # write's system call returns, and the message printed must be counted.
                    count += 1
                    try:
                        output.write(message)
                    except BrokenPipeError:
                        # The reader went away (`| head`): stop quietly, as the legacy tool.
                        count -= 1
                        _silence_stdout()
                        break
                    printed[(message.topic, message.partition)] = message.offset + 1
                    if args.max_messages is not None and count >= args.max_messages:
                        break
            except Exception as e:
                if not deleted:
                    raise
                # Not "nothing written": say what the flag already did.
                raise _command_error(
                    f"{_failure_text(e)} (group {group}'s offsets were already deleted by "
                    "--delete-consumer-offsets)") from e
    except Exception:
        failed = True  # its one line says what happened
        raise
    finally:
        if connector is not None:
            connector.shutdown()
            if not throwaway and config.auto_commit_enable:
                _keep_uncommitted(zk, group, printed, args.zookeeper)
        if throwaway:
            _delete_quietly(zk, group,
                            lambda: session.connect(args.zookeeper, args.connect_timeout),
                            None if connector is None else connector.consumer_id, config)
        if not failed:
            print(f"Processed a total of {count} message{'s' if count != 1 else ''}",
                  file=sys.stderr)
    return 0


def _keep_uncommitted(zk: KazooClient, group: str, printed: Mapping[tuple[str, int], int],
                      zookeeper: str) -> None:
    """After the shutdown's commit: when ZooKeeper could not take it (unreachable, or it
    holds less than what was printed), the printed messages' offsets go to a file in
    ``offsets import``'s format, named on stderr, so that they are not delivered again."""
    missing = _uncommitted(zk, group, printed)
    if not missing:
        return
    text = _ops.format_offset_lines(
        _ops.OffsetEntry(group, t, p, o) for (t, p), o in sorted(missing.items()))
    try:
        path = _write_kept_offsets(group, text)
    except OSError as e:
        print(f"zkconsumer console-consumer: the offsets of {len(missing)} partition(s) of "
              f"group {group} were not committed (ZooKeeper unreachable), and could not be "
              f"kept in a file: {e}; they are:\n{text}", file=sys.stderr, end="")
        return
    print(f"zkconsumer console-consumer: the offsets of {len(missing)} partition(s) of group "
          f"{group} were not committed (ZooKeeper unreachable); kept in {path}: "
          f"`zkconsumer offsets import --zookeeper {zookeeper} --input {path}` writes them "
          "(--force while the member's session lasts)", file=sys.stderr)


def _uncommitted(zk: KazooClient, group: str,
                 printed: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    """The printed offsets ZooKeeper does not hold: all of them when it cannot be asked."""
    if not printed:
        return {}
    if not zk.connected:
        return dict(printed)
    held: dict[tuple[str, int], bytes] = {}
    try:
        for tp in printed:
            try:
                held[tp] = zk.get(zp.offset_path(group, *tp))[0]
            except NoNodeError:
                held[tp] = b""  # never committed
    except KazooException:
        return dict(printed)  # lost meanwhile
    return {tp: o for tp, o in printed.items() if not _at_least(held[tp], o)}


def _at_least(data: bytes, offset: int) -> bool:
    try:
        return int(data.decode()) >= offset
    except (UnicodeDecodeError, ValueError):
        return False  # not an offset: the printed one is worth keeping


def _write_kept_offsets(group: str, text: str) -> str:
    """``text`` in a new file of the working directory (the temporary one when that is not
    writable), named after the group and the time; its path."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    name = f"zkconsumer-{group}-uncommitted-{stamp}.offsets"
    last: OSError | None = None
    for directory in (os.getcwd(), tempfile.gettempdir()):
        path = os.path.join(directory, name)
        try:
            with open(path, "x", encoding="utf-8") as f:
                f.write(text)
            return path
        except OSError as e:
            last = e
    assert last is not None
    raise last


def _wait_for_topic(zk: KazooClient, topic: str, timeout_ms: int | None) -> bool:
    """Wait for ``topic`` to be created, as the legacy console consumer did (its connector
    waited for partitions), saying so on stderr; False when --timeout-ms passed first."""
    path = zp.topic_path(topic)
    created = threading.Event()
    if zk.exists(path, watch=lambda event: created.set()) is not None:
        return True
    print(f"zkconsumer console-consumer: topic {topic} does not exist yet (no {path}); "
          "waiting for it to be created", file=sys.stderr, flush=True)
    deadline = None if timeout_ms is None or timeout_ms <= 0 else (
        time.monotonic() + timeout_ms / 1000)
    while True:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return False
        # A watch fires once, and a reconnect may lose it: look again now and then.
        created.wait(TOPIC_WAIT_RECHECK_S if left is None else min(left,
                                                                   TOPIC_WAIT_RECHECK_S))
        created.clear()
        if zk.exists(path, watch=lambda event: created.set()) is not None:
            return True


#: How often the console consumer looks again for a topic it waits for, besides the watch.
TOPIC_WAIT_RECHECK_S = 5.0


def _messages(stream: Any, skip_errors: bool = False) -> Iterator[Any]:
    """The stream's messages until --timeout-ms passes with none (a normal end); with
    ``skip_errors`` (--skip-message-on-error) a message that cannot be decoded is said on
    stderr and skipped."""
    it = iter(stream)
    while True:
        try:
            yield next(it)
        except (ConsumerTimeoutException, StopIteration):
            return
        except MessageDecodeError as e:
            if not skip_errors:
                raise
            print(f"zkconsumer console-consumer: skipped a message: {e}", file=sys.stderr)


def _warn_kafka_offsets_left(zk: KazooClient, group: str, config: ConsumerConfig) -> None:
    """Warn when Kafka holds committed offsets of the group just deleted, or could not be
    asked (the brokers of ``config``'s security settings, as registered in ZooKeeper): a
    member committing there resumes from them."""
    try:
        kafka = kafka_security(config)
    except ZkConsumerError as e:
        left = _ops.KafkaOffsetsLeft(group, None, [], error=str(e))
    else:
        left = _ops.kafka_offsets_left(zk, group, kafka=kafka)
    warning = left.warning()
    if warning is not None:
        print(f"zkconsumer console-consumer: warning: {warning}", file=sys.stderr)


def _throwaway_group(zk: KazooClient) -> str:
    """``console-consumer-<5 random digits>``, one that does not exist yet."""
    for _ in range(100):
        group = f"console-consumer-{random.randint(10000, 99999)}"
        if zk.exists(zp.group_dir(group)) is None:
            return group
    raise _command_error("could not find an unused console-consumer-NNNNN group name")


def _delete_quietly(zk: KazooClient, group: str, reconnect: Callable[[], KazooClient],
                    member: str | None, config: ConsumerConfig | None = None) -> None:
    """Delete the throwaway ``group``. ``member``: this process's own consumer id, whose
    registration a shutdown without ZooKeeper left to its session's expiry (nobody else
    registers in a throwaway group). ``config``: its connector's; with offsets.storage=kafka
    (the only way a throwaway group gets offsets in Kafka), Kafka is asked whether it holds
    any, which are not deleted: said in a warning, nothing said otherwise."""
    fresh: KazooClient | None = None

    def delete(client: KazooClient) -> None:
        if not _ops.group_exists(client, group):
            return
        if member is not None:
            try:
                client.delete(zp.id_path(group, member))
            except NoNodeError:
                pass
        _ops.delete_group(client, group)
        if config is not None and config.offsets_storage == "kafka":
            _warn_kafka_offsets_left(client, group, config)

    try:
        try:
            delete(zk)
            return
        except KazooException:
            # The tool's client stops reconnecting after --connect-timeout; a consumer that
            # ran on through a longer ZooKeeper outage deletes its group with a new one.
            fresh = reconnect()
        delete(fresh)
    except (ZkConsumerError, KazooException) as e:
        print(f"zkconsumer console-consumer: could not delete the throwaway group {group}: "
              f"{e}", file=sys.stderr)
    finally:
        if fresh is not None:
            fresh.stop()
            fresh.close()


def _silence_stdout() -> None:

    silence_stdout()


def register(sub: Any) -> None:
    """Add ``console-consumer`` to the CLI."""
    p = sub.add_parser(
        "console-consumer", help="print messages of topics with the ZooKeeper consumer",
        description="Consume with the ZooKeeper-based connector and print each message's "
        "value (or key<TAB>value with --property print.key=true). Without --group a "
        "throwaway group console-consumer-NNNNN is used and deleted on exit. With --group, an "
        "exit while ZooKeeper is unreachable (nothing can be committed) writes the printed "
        "messages' offsets to a file it names, for `zkconsumer offsets import`.")
    _add_common(p, json_flag=False)
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", metavar="T", help="the topic to consume")
    which.add_argument("--whitelist", metavar="RE", help="consume topics matching RE")
    which.add_argument("--blacklist", metavar="RE", help="consume topics not matching RE")
    p.add_argument("--group", metavar="G", help="consumer group (default: a throwaway one)")
    p.add_argument("--from-beginning", action="store_true",
                   help="start at the earliest offset when the group has none committed")
    p.add_argument("--max-messages", type=int, metavar="N", help="exit after N messages")
    p.add_argument("--timeout-ms", type=int, metavar="MS",
                   help="exit when no message arrives for MS ms (consumer.timeout.ms)")
    p.add_argument("--property", action="append", metavar="KEY=VALUE",
                   help="formatter property: print.key, print.value, print.timestamp, "
                   "print.partition, print.offset (true|false), key.separator, "
                   "line.separator (repeatable)")
    p.add_argument("--formatter", metavar="CLASS",
                   help="kafka.tools.DefaultMessageFormatter (the default) or "
                   "kafka.tools.NoOpMessageFormatter (prints nothing)")
    p.add_argument("--consumer.config", dest="consumer_config", metavar="FILE",
                   help="a consumer properties file; --consumer-property wins over it")
    p.add_argument("--skip-message-on-error", action="store_true",
                   help="skip a message that cannot be decoded, saying so on stderr")
    p.add_argument("--consumer-property", action="append", metavar="KEY=VALUE",
                   help="a consumer configuration key, e.g. fetch.message.max.bytes=2097152 "
                   "(repeatable); group.id, auto.offset.reset and consumer.timeout.ms are "
                   "taken when --group, --from-beginning or --timeout-ms is not given, and "
                   "refused when they say otherwise")
    p.add_argument("--delete-consumer-offsets", action="store_true",
                   help="delete the group's offsets first (needed to reuse a group with "
                   "--from-beginning)")
    p.set_defaults(func=_cmd_console_consumer)
