"""Kafka's ZooKeeper-era tools under their own flags, printing what they printed.

=================================  ==================================================
subcommand                         Kafka's tool (the class ``kafka-run-class.sh`` ran)
=================================  ==================================================
``consumer-groups``                kafka-consumer-groups.sh --zookeeper (1.1)
``consumer-offset-checker``        kafka.tools.ConsumerOffsetChecker (0.11)
``export-zk-offsets``              kafka.tools.ExportZkOffsets
``import-zk-offsets``              kafka.tools.ImportZkOffsets
``update-offsets-in-zk``           kafka.tools.UpdateOffsetsInZK
``verify-consumer-rebalance``      kafka.tools.VerifyConsumerRebalance
=================================  ==================================================

(``console-consumer`` takes Kafka's console consumer's flags itself.) An operator's script
works with the command name swapped: the same flags, the same headers, columns and line
formats on stdout (column widths as Kafka's ``%-Ns`` formats pad them), the same
``Error: ...`` lines. What differs on purpose: a failure Kafka printed as a stack trace or
left to hang is one line on stderr, with exit status 2 (also after an ``Error: ...``
line); a write to a group with registered members is refused, as by ``offsets import`` and
``offsets reset``. The work is done by :mod:`zkconsumer.ops`; this module only formats.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from zkconsumer import ops as _ops
from zkconsumer._config import ConsumerConfig
from zkconsumer._errors import (
    AdminError,
    CommandError,
    GroupActiveError,
    KafkaToolError,
    UnknownGroupError,
    UnknownTopicError,
    ZkConsumerError,
)
from zkconsumer._properties import read_properties
from zkconsumer._types import TopicPartition
from zkconsumer.cli.common import positive_seconds
from zkconsumer.cli.offsets import read_input, reset_target
from zkconsumer.ops.brokers import broker_endpoints, log_ends, partition_leaders, time_lags
from zkconsumer.zk import paths as zp
from zkconsumer.zk import session
from zkconsumer.zk.read import topic_partitions
from zkconsumer.zk.session import (
    COMMAND_CONFIG_HELP,
    SECURITY_HELP,
    check_chroot,
    command_config,
    zookeeper_failure,
)

__all__ = ["register"]

#: The help of the tools' --json (not Kafka's: zkconsumer's own addition).
JSON_HELP = ("print the rows as JSON instead (not a flag of Kafka's tool), each with "
             "time_lag: the age in seconds of the message at the offset, 0.0 caught up, null "
             "when it cannot be told")

#: Kafka's placeholder for a missing value (ConsumerGroupCommand.MISSING_COLUMN_VALUE).
MISSING = "-"

#: What kafka-consumer-groups.sh --zookeeper says on stderr before anything else.
ZK_NOTE = ("Note: This will only show information about consumers that use ZooKeeper (not "
           "those using the Java consumer API).")

UPDATE_USAGE_LINE = ("zkconsumer update-offsets-in-zk [earliest | latest] consumer.properties "
                     "topic")
_UPDATE_TARGETS = ("earliest", "latest")


def _tool(fn: Callable[[argparse.Namespace, KazooClient], int]
          ) -> Callable[[argparse.Namespace], int]:
    """``fn(args, zk)`` becomes ``run(args)``: connect (bounded wait), run, close; the
    Kafka tool's error lines go to stdout, with exit status 2."""

    @functools.wraps(fn)
    def run(args: argparse.Namespace) -> int:
        zk = session.connect(args.zookeeper, args.connect_timeout)
        try:
            check_chroot(zk)
            return fn(args, zk)
        except KafkaToolError as e:
            for line in e.lines:
                print(line)
            return 2
        except (KazooTimeoutError, KazooException) as e:
            raise _command_error(
                zookeeper_failure(args.zookeeper, args.connect_timeout, e)) from e
        finally:
            zk.stop()
            zk.close()

    return run


def _command_error(message: str) -> ZkConsumerError:
    return CommandError(message)


def _pad(value: object, width: int) -> str:
    """Java's ``%-Ns``: left-aligned, at least ``width`` wide, never cut."""
    return f"{value!s:<{width}}"


# --------------------------------------------------------------------------------------
# consumer-groups (ConsumerGroupCommand with --zookeeper)
# --------------------------------------------------------------------------------------

_ACTIONS = ("list", "describe", "delete", "reset_offsets")
_RESET_SCENARIOS = ("to_earliest", "to_latest", "to_offset", "shift_by", "to_datetime")


def _cmd_consumer_groups(args: argparse.Namespace) -> int:
    actions = [a for a in _ACTIONS if getattr(args, a)]
    if len(actions) != 1:
        args._parser.error("Command must include exactly one action: --list, --describe, "
                           "--delete, --reset-offsets")
    if args.bootstrap_server is not None:
        args._parser.error("Option [bootstrap-server] is not valid with [zookeeper].")
    if args.describe and not args.group:
        args._parser.error("Missing required argument \"[group]\"")
    if args.delete and not args.group and not args.topic:
        args._parser.error("Option [delete] either takes [group], [topic], or both")
    if args.reset_offsets:
        _check_reset_args(args)
    print(ZK_NOTE, file=sys.stderr)
    return _consumer_groups(args)


def _check_reset_args(args: argparse.Namespace) -> None:
    if not args.group or len(args.group) != 1:
        args._parser.error("Option [reset-offsets] takes one [group]")
    if not args.topic and not args.all_topics:
        args._parser.error("Option [reset-offsets] takes [topic] or [all-topics]")
    scenarios = [s for s in _RESET_SCENARIOS if getattr(args, s) not in (None, False)]
    if len(scenarios) != 1:
        args._parser.error("Option [reset-offsets] takes exactly one of "
                           "[to-earliest], [to-latest], [to-offset], [shift-by], "
                           "[to-datetime]")
    if args.execute and args.dry_run:
        args._parser.error("Option [reset-offsets] only accepts one of [execute] and "
                           "[dry-run]")


@_tool
def _consumer_groups(args: argparse.Namespace, zk: KazooClient) -> int:
    if args.list:
        for g in _ops.list_groups(zk):
            print(g.group)
        return 0
    if args.describe:
        return _describe(args, zk, args.group[0])
    if args.delete:
        return _delete(args, zk)
    return _reset(args, zk)


def _describe(args: argparse.Namespace, zk: KazooClient, group: str) -> int:
    if not _ops.group_exists(zk, group):
        raise KafkaToolError(f"Error: The consumer group '{group}' does not exist.")
    kafka = command_config(args.command_config)
    desc = _ops.describe_group(zk, group, None, kafka=kafka, time_lags=False)
    # Kafka's tool said nothing on stdout about these; stderr says what is unknown.
    for problem in (desc.log_end_error, desc.kafka_offsets_error):
        if problem is not None:
            print(f"zkconsumer consumer-groups: warning: {problem}", file=sys.stderr)
    topics = {r.topic for r in desc.partitions if r.topic is not None}
    topics |= {t for m in desc.members for t in m.subscription}
    if args.topic and args.topic not in topics:
        raise UnknownTopicError(
            f"group {group!r} has no offsets, owners or subscription of topic "
            f"{args.topic!r}{_ops.did_you_mean(args.topic, topics)}")
    rows = [r for r in desc.partitions if r.topic is not None
            and (not args.topic or r.topic == args.topic)]
    lines: list[tuple[str, object, object, object, object, str]] = []
    found: list[dict[str, Any]] = []  # the same rows, for --json
    for r in rows:
        # As the original read them: Kafka's offset first, ZooKeeper's where Kafka has none.
        offset = r.kafka_offset if r.kafka_offset is not None else r.zookeeper_offset
        if offset is None and not args.json:
            print(f"Error: Could not fetch offset from zookeeper for group '{group}' partition "
                  f"'[{r.topic},{r.partition}]' due to missing offset data in zookeeper.")
        lag = (r.log_end_offset - offset if offset is not None and offset != -1
               and r.log_end_offset is not None else None)
        owner = MISSING if r.owner is None else _consumer_of(r.owner)
        lines.append((str(r.topic), r.partition, _or_missing(offset),
                      _or_missing(r.log_end_offset), _or_missing(lag), owner))
        found.append({"topic": r.topic, "partition": r.partition, "current_offset": offset,
                      "log_end_offset": r.log_end_offset, "lag": lag,
                      "consumer_id": None if r.owner is None else owner})
    owners = {line[5] for line in lines}
    for m in desc.members:  # members owning nothing: a row per subscribed topic
        if m.consumer_id not in owners:
            lines += [(MISSING, MISSING, MISSING, MISSING, MISSING, m.consumer_id)
                      for _ in m.subscription]
            found += [{"topic": None, "partition": None, "current_offset": None,
                       "log_end_offset": None, "lag": None, "consumer_id": m.consumer_id}
                      for _ in m.subscription]
    if args.json:
        _print_json(_with_time_lags(zk, found, "current_offset", kafka))
        return 0
    topic_w = max([15] + [len(line[0]) for line in lines])
    id_w = max([15] + [len(line[5]) for line in lines])
    print()
    print(_describe_line(("TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                          "CONSUMER-ID"), topic_w, id_w))
    for line in lines:
        print(_describe_line(line, topic_w, id_w))
    return 0


def _describe_line(cells: Sequence[object], topic_w: int, id_w: int) -> str:
    """``%-{topic}s %-10s %-15s %-15s %-15s %-{id}s `` (the trailing space is Kafka's)."""
    widths = (topic_w, 10, 15, 15, 15, id_w)
    return " ".join(_pad(c, w) for c, w in zip(cells, widths, strict=True)) + " "


def _or_missing(value: object) -> object:
    return MISSING if value is None else value


def _consumer_of(thread_id: str) -> str:
    """The owner's consumer id, as Kafka cut it: up to the last '-'."""
    return thread_id[:thread_id.rfind("-")] if "-" in thread_id else thread_id


def _delete(args: argparse.Namespace, zk: KazooClient) -> int:
    topic: str | None = args.topic
    if not args.group:
        assert topic is not None
        for group in _ops.groups_of_topic(zk, topic):
            try:
                _ops.delete_group(zk, group, topic)
            except GroupActiveError:
                continue  # "all inactive consumer groups"
        print(f"Deleted consumer group information for all inactive consumer groups for "
              f"topic '{topic}' in zookeeper.")
        return 0
    failed = False
    for group in args.group:
        what = f"group '{group}'" + (f" topic '{topic}'" if topic else "")
        try:
            _ops.delete_group(zk, group, topic)
        except GroupActiveError:
            print(f"Error: Delete for {what} failed because its consumers are still active.")
            failed = True
        except (UnknownGroupError, UnknownTopicError):
            print(f"Error: Delete for {what} failed because group does not exist.")
            failed = True
        else:
            if topic:
                print(f"Deleted consumer group information for {what} in zookeeper.")
            else:
                print(f"Deleted all consumer group information for {what} in zookeeper.")
    return 2 if failed else 0


def _reset(args: argparse.Namespace, zk: KazooClient) -> int:
    if not args.execute and not args.dry_run:
        print("WARN: No action will be performed as the --execute option is missing. In a "
              "future major release, the default behavior of this command will be to prompt "
              "the user before executing the reset rather than doing a dry run. You should "
              "add the --dry-run option explicitly if you are scripting this command and "
              "want to keep the current default behavior without prompting.", file=sys.stderr)
    group = args.group[0]
    topics = [args.topic] if args.topic else _ops.committed_topics(zk, group)
    target = reset_target(args, shifted="shifted by",
                          datetime_form="a date-time (YYYY-MM-DDTHH:mm:SS.sss)")
    rows: list[_ops.ResetRow] = []
    for topic in topics:
        rows += _ops.reset_offsets(
            zk, group, topic, target, force=args.force, dry_run=not args.execute,
            kafka=command_config(args.command_config))
    print()
    print(f"{_pad('TOPIC', 30)} {_pad('PARTITION', 10)} {_pad('NEW-OFFSET', 15)}")
    for r in rows:
        print(f"{_pad(r.topic, 30)} {_pad(r.partition, 10)} {_pad(r.offset, 15)}")
    return 0


# --------------------------------------------------------------------------------------
# consumer-offset-checker (ConsumerOffsetChecker)
# --------------------------------------------------------------------------------------

_CHECKER_LINE = "{:<15} {:<30} {:<3} {:<15} {:<15} {:<15} {}"


@_tool
def _cmd_offset_checker(args: argparse.Namespace, zk: KazooClient) -> int:
    group: str = args.group
    _ops.require_group(zk, group)
    if args.topic:
        topics = [t for t in args.topic.split(",") if t]
    else:
        # Those with owners, as Kafka's tool read them, and those with offsets: a group
        # made by import-zk-offsets has no owners znode (Kafka's tool failed on NoNode).
        topics = sorted(set(_children(zk, zp.owners_dir(group)))
                        | set(_ops.committed_topics(zk, group)))
    partitions = {t: ps for t in topics
                  if (ps := topic_partitions(zk, t)) is not None}
    if args.topic:
        _require_topics(zk, [t for t in topics if t not in partitions])
    tps = [TopicPartition(t, p) for t, ps in partitions.items() for p in ps]
    offsets = _checker_offsets(zk, group, tps, args)
    ends, _ = _log_ends_or_none(zk, tps, args)
    owners_of = _ops.owners_of(zk, group, tps)
    leaders = partition_leaders(zk, tps)
    if args.json:
        rows = [{"group": group, "topic": tp.topic, "partition": tp.partition,
                 "offset": None if offsets.get(tp, -1) == -1 else offsets[tp],
                 "log_size": ends.get(tp), "lag": None if offsets.get(tp, -1) == -1
                 or tp not in ends else ends[tp] - offsets[tp],
                 "owner": owners_of.get(tp), "leader": leaders.get(tp)}
                for topic in sorted(partitions) for tp in
                (TopicPartition(topic, p) for p in partitions[topic])]
        _print_json(_with_time_lags(zk, rows, "offset", command_config(args.command_config),
                                    end_key="log_size"))
        return 0
    print(_CHECKER_LINE.format("Group", "Topic", "Pid", "Offset", "logSize", "Lag", "Owner"))
    for topic in sorted(partitions):
        for p in partitions[topic]:
            tp = TopicPartition(topic, p)
            if leaders.get(tp) is None or tp not in ends:
                print(f"No broker for partition {topic} - {p}")
                continue
            offset = offsets.get(tp)
            lag = "unknown" if offset is None or offset == -1 else str(ends[tp] - offset)
            print(_CHECKER_LINE.format(group, topic, p, "unknown" if offset is None else offset,
                                       ends[tp], lag, owners_of.get(tp) or "none"))
    if args.broker_info:
        print("BROKER INFO")
        used = {b for b in leaders.values() if b is not None}
        for bid, (host, port) in broker_endpoints(zk, used).items():
            print(f"{bid} -> {host}:{port}")
    return 0


def _with_time_lags(zk: KazooClient, rows: list[dict[str, Any]], offset_key: str,
                    kafka: Mapping[str, Any] | None, end_key: str = "log_end_offset"
                    ) -> list[dict[str, Any]]:
    """``rows`` with ``time_lag`` (seconds; :func:`zkconsumer.ops.brokers.time_lags`): 0.0
    caught up, null when it cannot be told (never 0)."""
    positions = {TopicPartition(r["topic"], r["partition"]): (r[offset_key], r[end_key])
                 for r in rows if r["topic"] is not None}
    ages = time_lags(zk, positions, kafka=kafka) if positions else {}
    return [{**r, "time_lag": None if r["topic"] is None
             else ages.get(TopicPartition(r["topic"], r["partition"]))} for r in rows]


def _print_json(rows: Sequence[dict[str, Any]]) -> None:
    print(json.dumps(list(rows), indent=2))


def _children(zk: KazooClient, path: str) -> list[str]:
    try:
        return list(zk.get_children(path))
    except NoNodeError:
        return []


def _require_topics(zk: KazooClient, missing: Sequence[str]) -> None:
    """UnknownTopicError naming the first of ``missing`` (topics not in /brokers/topics),
    with the registered topic it most likely meant."""
    if missing:
        topic = missing[0]
        raise UnknownTopicError(
            f"topic {topic!r} not found in ZooKeeper (no {zp.topic_path(topic)})"
            + _ops.did_you_mean(topic, _children(zk, zp.BROKER_TOPICS)))


def _checker_offsets(zk: KazooClient, group: str, tps: Iterable[TopicPartition],
                     args: argparse.Namespace) -> dict[TopicPartition, int]:
    """As the checker read them: the group's offset in Kafka, else ZooKeeper's; -1 where
    the topic has offsets in ZooKeeper but not this partition."""
    try:
        kafka = _ops.kafka_committed(zk, group, command_config(args.command_config))
    except AdminError as e:
        print(f"zkconsumer consumer-offset-checker: warning: offsets in Kafka unknown, "
              f"ZooKeeper's shown: {e}", file=sys.stderr)
        kafka = {}
    zk_offsets = _ops.committed_offsets(zk, group)
    topics_with_offsets = {tp.topic for tp in zk_offsets}
    out: dict[TopicPartition, int] = {}
    for tp in tps:
        if tp in kafka:
            out[tp] = kafka[tp]
        elif tp in zk_offsets:
            out[tp] = zk_offsets[tp]
        elif tp.topic in topics_with_offsets:
            out[tp] = -1
    return out


def _log_ends_or_none(zk: KazooClient, tps: Sequence[TopicPartition],
                      args: argparse.Namespace) -> tuple[dict[TopicPartition, int], str | None]:
    try:
        return log_ends(zk, tps, kafka=command_config(args.command_config)), None
    except AdminError as e:
        print(f"zkconsumer consumer-offset-checker: warning: log sizes unknown: {e}",
              file=sys.stderr)
        return {}, str(e)


# --------------------------------------------------------------------------------------
# export-zk-offsets, import-zk-offsets, update-offsets-in-zk
# --------------------------------------------------------------------------------------


@_tool
def _cmd_export(args: argparse.Namespace, zk: KazooClient) -> int:
    entries = _ops.export_offsets(zk, args.group or None)
    text = _ops.format_offset_lines(entries)
    try:
        with open(args.output_file, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise _command_error(f"cannot write {args.output_file}: {e.strerror or e}") from e
    return 0


def _cmd_import(args: argparse.Namespace) -> int:
    # Read and checked as by offsets import: every line (ImportZkOffsets stopped at the
    # first empty one, ignoring the rest unread), refused whole when one is bad.
    lines = read_input(args.input_file).splitlines()
    entries = _ops.parse_offset_lines(lines, args.input_file)
    if not entries:
        raise _command_error(f"{args.input_file} holds no offsets")
    return _import(args, entries)


@_tool
def _import_entries(args: argparse.Namespace, zk: KazooClient) -> int:
    _ops.import_offsets(zk, args.entries, force=args.force, zookeeper_only=True)
    return 0


def _import(args: argparse.Namespace, entries: list[_ops.OffsetEntry]) -> int:
    args.entries = entries
    return _import_entries(args)


def _cmd_update_offsets(args: argparse.Namespace) -> int:
    # Kafka's tool printed its usage on stdout with status 1; here, one line on stderr.
    given = args.positional
    usage = f"usage: {UPDATE_USAGE_LINE}"
    if given and given[0] not in _UPDATE_TARGETS:
        raise _command_error(f"{given[0]!r} is neither earliest nor latest"
                             f"{_ops.did_you_mean(given[0], _UPDATE_TARGETS)}; {usage}")
    if len(given) != 3:
        raise _command_error(f"takes 3 arguments, got {len(given)}; {usage}")
    where, props_file, topic = given
    config = ConsumerConfig(read_properties(props_file))
    args.zookeeper = config.zookeeper_connect
    args.update = (where, config.group_id, topic)
    return _update_offsets(args)


@_tool
def _update_offsets(args: argparse.Namespace, zk: KazooClient) -> int:
    where, group, topic = args.update
    rows = _ops.reset_offsets(zk, group, topic, _ops.ResetTarget(where, text=where),
                                force=args.force, zookeeper_only=True)
    for r in rows:
        print(f"updating partition {r.partition} with new offset: {r.offset}")
    print(f"updated the offset for {len(rows)} partitions")
    return 0


# --------------------------------------------------------------------------------------
# verify-consumer-rebalance (VerifyConsumerRebalance)
# --------------------------------------------------------------------------------------


@_tool
def _cmd_verify(args: argparse.Namespace, zk: KazooClient) -> int:
    result = _ops.verify_rebalance(zk, args.group)
    # Kafka's tool checked the topics of the registered members: none, nothing to fail.
    ok = result.ok or (not result.checks and not _ops.registered_members(zk, args.group))
    for c in result.checks:
        if c.ok:
            continue
        if c.owner is None:
            why = f"No owner for partition [{c.topic},{c.partition}]"
        else:
            why = (f"Owner {c.owner} for partition [{c.topic},{c.partition}] is not a valid "
                   f"member of consumer group {args.group}")
        print(f"ERROR {why} (kafka.tools.VerifyConsumerRebalance$)", file=sys.stderr)
    print("Rebalance operation successful !" if ok else "Rebalance operation failed !")
    return 0


# --------------------------------------------------------------------------------------
# Registration
# --------------------------------------------------------------------------------------


def _connect_timeout(p: argparse.ArgumentParser) -> None:
    p.add_argument("--connect-timeout", type=positive_seconds, default=10.0, metavar="SECONDS",
                   help="longest wait for the ZooKeeper session (default: %(default)s)")


def _zookeeper(p: argparse.ArgumentParser, *names: str, required: bool = False) -> None:
    p.add_argument(*names, dest="zookeeper", required=required, metavar="ZK",
                   default=None if required else "localhost:2181",
                   help="ZooKeeper connect string host:port[,...][/chroot]"
                   + ("" if required else " (default: localhost:2181, as Kafka's tool)"))
    _connect_timeout(p)
    p.epilog = SECURITY_HELP


def register(sub: Any) -> None:
    """Add Kafka's ZooKeeper-era tools under their names (see the module docstring)."""
    _register_consumer_groups(sub)

    p = sub.add_parser(
        "consumer-offset-checker", help="kafka.tools.ConsumerOffsetChecker",
        description="Per partition of a group: offset, log size, lag and owner, as Kafka's "
        "ConsumerOffsetChecker printed them (Group Topic Pid Offset logSize Lag Owner).")
    _zookeeper(p, "--zookeeper")
    p.add_argument("--group", required=True, metavar="G", help="the consumer group")
    p.add_argument("--topic", metavar="T[,T...]",
                   help="comma-separated topics (default: those with owners)")
    p.add_argument("--broker-info", action="store_true", help="print the brokers asked")
    p.add_argument("--socket.timeout.ms", dest="socket_timeout_ms", type=int,
                   help="accepted for Kafka's command lines; not used")
    p.add_argument("--retry.backoff.ms", dest="retry_backoff_ms", type=int,
                   help="accepted for Kafka's command lines; not used")
    p.add_argument("--command-config", metavar="FILE", help=COMMAND_CONFIG_HELP)
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.set_defaults(func=_cmd_offset_checker)

    p = sub.add_parser(
        "export-zk-offsets", help="kafka.tools.ExportZkOffsets",
        description="Write the groups' offsets in ZooKeeper to a file, one "
        "/consumers/G/offsets/T/P:offset line each.")
    _zookeeper(p, "--zkconnect", "--zookeeper")
    p.add_argument("--group", action="append", metavar="G",
                   help="a group to export (repeatable; default: all)")
    p.add_argument("--output-file", required=True, metavar="FILE", help="the file to write")
    p.set_defaults(func=_cmd_export)

    p = sub.add_parser(
        "import-zk-offsets", help="kafka.tools.ImportZkOffsets",
        description="Write the offsets of an ExportZkOffsets file to ZooKeeper (every line "
        "is checked first; nothing is written unless all are valid).")
    _zookeeper(p, "--zkconnect", "--zookeeper")
    p.add_argument("--input-file", required=True, metavar="FILE", help="the file to read")
    p.add_argument("--force", action="store_true",
                   help="write even when a group has registered members")
    p.set_defaults(func=_cmd_import)

    p = sub.add_parser(
        "update-offsets-in-zk", help="kafka.tools.UpdateOffsetsInZK",
        usage=UPDATE_USAGE_LINE,
        description="Set a group's offsets of a topic to each partition's earliest or latest "
        "offset; the group and ZooKeeper come from the consumer properties file "
        "(group.id, zookeeper.connect).")
    p.add_argument("positional", nargs="*", metavar="earliest|latest properties topic",
                   help="where to set the offsets (each partition's earliest or latest "
                   "offset), the consumer properties file (its group.id and "
                   "zookeeper.connect) and the topic")
    p.add_argument("--force", action="store_true",
                   help="write even while the group has registered members")
    _connect_timeout(p)
    p.set_defaults(func=_cmd_update_offsets)

    p = sub.add_parser(
        "verify-consumer-rebalance", help="kafka.tools.VerifyConsumerRebalance",
        description="Check that every partition of the group's topics has a live owner; "
        "prints 'Rebalance operation successful !' or 'Rebalance operation failed !'.")
    _zookeeper(p, "--zookeeper.connect", "--zookeeper")
    p.add_argument("--group", required=True, metavar="G", help="the consumer group")
    p.set_defaults(func=_cmd_verify)


def _register_consumer_groups(sub: Any) -> None:
    p = sub.add_parser(
        "consumer-groups", help="kafka-consumer-groups.sh --zookeeper",
        description="List, describe, delete consumer groups, or reset their offsets, as "
        "kafka-consumer-groups.sh --zookeeper did (same flags, same output).")
    _zookeeper(p, "--zookeeper", required=True)
    actions = p.add_argument_group("actions (exactly one)")
    actions.add_argument("--list", action="store_true", help="list the groups")
    actions.add_argument("--describe", action="store_true",
                         help="offsets, log end offsets, lag and owner per partition")
    actions.add_argument("--delete", action="store_true",
                         help="delete a group, or a topic's offsets and owners of it")
    actions.add_argument("--reset-offsets", action="store_true",
                         help="set a group's offsets (a preview unless --execute)")
    p.add_argument("--group", action="append", metavar="G",
                   help="the consumer group (repeatable with --delete)")
    p.add_argument("--topic", metavar="T",
                   help="--delete: that topic's information only; --describe, "
                   "--reset-offsets: that topic")
    p.add_argument("--all-topics", action="store_true",
                   help="--reset-offsets: every topic the group has offsets of")
    p.add_argument("--bootstrap-server", metavar="B",
                   help="refused, with Kafka's error: this tool reads the groups in ZooKeeper "
                   "(--zookeeper); a modern group is Kafka's own kafka-consumer-groups.sh's")
    p.add_argument("--command-config", metavar="FILE", help=COMMAND_CONFIG_HELP)
    p.add_argument("--json", action="store_true", help="--describe: " + JSON_HELP)
    reset = p.add_argument_group("--reset-offsets")
    reset.add_argument("--to-earliest", action="store_true", help="the log start")
    reset.add_argument("--to-latest", action="store_true", help="the log end")
    reset.add_argument("--to-offset", type=int, metavar="N", help="offset N (clamped)")
    reset.add_argument("--shift-by", type=int, metavar="N",
                       help="the committed offset plus N (clamped)")
    reset.add_argument("--to-datetime", metavar="DATETIME",
                       help="the first offset at or after YYYY-MM-DDTHH:mm:SS.sss")
    reset.add_argument("--execute", action="store_true", help="write the new offsets")
    reset.add_argument("--dry-run", action="store_true", help="show them only (the default)")
    reset.add_argument("--force", action="store_true",
                       help="write even while the group has registered members")
    p.set_defaults(func=_cmd_consumer_groups)
