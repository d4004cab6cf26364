"""The operator subcommands of ``zkconsumer``: what the legacy tools did, made pleasant.

=====================================  ===============================================
subcommand                             legacy tool
=====================================  ===============================================
``console-consumer``                   kafka-console-consumer ``--zookeeper``
``groups list|describe|delete``        ConsumerOffsetChecker, kafka-consumer-groups
                                       ``--zookeeper``
``offsets export`` / ``import``        ExportZkOffsets / ImportZkOffsets
``offsets reset``                      UpdateOffsetsInZK (plus offsets and date-times)
``verify-rebalance``                   VerifyConsumerRebalance
=====================================  ===============================================

The work is done by :mod:`zkconsumer.ops` (plain functions, no printing); this module
parses flags, prints tables that never cut a value (:mod:`zkconsumer.cli.tables`) or ``--json``
(a JSON list of objects with snake_case fields), and shows a progress display (rich) on a
terminal for long operations. Kafka's own command lines are :mod:`zkconsumer.cli.kafka`.
Every failure the user can fix raises :class:`zkconsumer.cli.CommandError` (or another
``ZkConsumerError``), which ``cli.main`` prints as one line with exit status 2. Input is
validated before anything is written. ZooKeeper credentials and the ACL of created znodes come
from the environment (``ZKCONSUMER_ZOOKEEPER_AUTH`` / ``ZKCONSUMER_ZOOKEEPER_ACL``, read by
:func:`zkconsumer.ops.connect`; the console consumer's connector gets them too).
"""

from __future__ import annotations

import argparse
import errno
import functools
import json
import logging
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
from kazoo.exceptions import KazooException, NoAuthError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from zkconsumer import ops as _ops
from zkconsumer._config import ConsumerConfig, read_properties
from zkconsumer._errors import (
    ConfigError,
    ConsumerTimeoutException,
    MessageDecodeError,
    ZkConsumerError,
)
from zkconsumer._filters import Blacklist, TopicFilter, Whitelist
from zkconsumer.broker.clients import parse_broker_list
from zkconsumer.cli.common import CommandError, positive_seconds, silence_stdout
from zkconsumer.cli.lag import add_groups_lag
from zkconsumer.cli.tables import Table
from zkconsumer.consumer.connector import create_consumer_connector
from zkconsumer.consumer.stream import CREATE_TIME, LOG_APPEND_TIME
from zkconsumer.zk import paths as zp
from zkconsumer.zk import session
from zkconsumer.zk.session import (
    AUTH_ENV,
    COMMAND_CONFIG_HELP,
    SECURITY_HELP,
    check_chroot,
    command_config,
    kafka_security,
    security_settings,
    zookeeper_failure,
)

if TYPE_CHECKING:
    from zkconsumer._config import ConsumerConfig
    from zkconsumer.consumer.connector import ZookeeperConsumerConnector

__all__ = ["register"]

#: Show a progress display from this many groups (export) or partitions (reset, import).
PROGRESS_THRESHOLD = 20

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


def _command_error(message: str) -> ZkConsumerError:

    return CommandError(message)


# --------------------------------------------------------------------------------------
# Shared plumbing
# --------------------------------------------------------------------------------------


def _handler(fn: Callable[..., int]) -> Callable[..., int]:
    """``fn(args, zk, *extra)`` becomes ``run(args, *extra)``: connect to ZooKeeper (bounded
    wait), run ``fn``, close; client errors become one line. kazoo and kafka-python
    exceptions often have empty messages, so their type name is shown too."""

    @functools.wraps(fn)
    def run(args: argparse.Namespace, *extra: Any) -> int:
        from kafka.errors import KafkaError

        zk = session.connect(args.zookeeper, args.connect_timeout)
        # kafka-python logs every failed connection attempt at ERROR; the tools report
        # failures themselves, in one line (-v shows everything).
        kafka_log = logging.getLogger("kafka")
        kafka_level = kafka_log.level
        if not getattr(args, "verbose", False):
            kafka_log.setLevel(logging.CRITICAL)
        try:
            check_chroot(zk)  # a typo there reads as "nothing": say so instead
            return fn(args, zk, *extra)
        except NoAuthError as e:
            # Where zkconsumer.ops knows the path it raises AclRefusedError; this is the rest.
            raise _command_error(
                f"ZooKeeper at {args.zookeeper} refused an operation by a znode's ACL "
                f"(NoAuth); set {AUTH_ENV} to credentials it grants"
            ) from e
        except (KazooTimeoutError, KazooException) as e:
            raise _command_error(
                zookeeper_failure(args.zookeeper, args.connect_timeout, e)) from e
        except KafkaError as e:
            raise _command_error(f"broker error: {type(e).__name__} {e}".rstrip()) from e
        finally:
            kafka_log.setLevel(kafka_level)
            zk.stop()
            zk.close()

    return run


def _add_common(p: argparse.ArgumentParser, *, bootstrap: bool = False,
                json_flag: bool = True) -> None:
    p.add_argument("--zookeeper", required=True, metavar="ZK",
                   help="ZooKeeper connect string, host:port[,host:port...][/chroot]")

    p.add_argument("--connect-timeout", type=positive_seconds, default=10.0, metavar="SECONDS",
                   help="longest wait for the ZooKeeper session (default: %(default)s)")
    p.epilog = SECURITY_HELP
    if bootstrap:
        p.add_argument("--bootstrap-server", metavar="B",
                       help="broker(s) host:port[,...]; default: the brokers registered "
                       "in ZooKeeper (/brokers/ids), as the legacy tools found them")
        p.add_argument("--command-config", metavar="FILE", help=COMMAND_CONFIG_HELP)
    if json_flag:
        p.add_argument("--json", action="store_true",
                       help="print a JSON list of objects instead of a table")


def _console(stderr: bool = False) -> Any:
    """A rich console on the current stdout/stderr (looked up now: tests swap them), for
    the progress display."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    return Console(file=stream, highlight=False, soft_wrap=True)


def _table(columns: Sequence[tuple[str, str]]) -> Table:
    """A table (:mod:`zkconsumer.cli.tables`); ``columns`` are (header, justify)."""
    return Table([h for h, _ in columns], right=[h for h, j in columns if j == "right"])


def _cell(value: object) -> str:
    return "-" if value is None else str(value)


#: "1 offset", "2 offsets" (shared with ``migrate``'s messages).
_count = _ops.counted


def _print_json(rows: Sequence[dict[str, Any]]) -> None:
    print(json.dumps(list(rows), indent=2))


class _LazyProgress:
    """A progress callback that shows a rich bar on stderr once the total is large enough.

    Used from the command's thread only; no lock needed.
    """

    def __init__(self, label: str, threshold: int = PROGRESS_THRESHOLD) -> None:
        self._label = label
        self._threshold = threshold
        self._progress: Any = None
        self._task: Any = None

    def __call__(self, done: int, total: int) -> None:
        if self._progress is None:
            if total < self._threshold:
                return
            from rich.progress import Progress

            console = _console(stderr=True)
            if not console.is_terminal:
                return
            self._progress = Progress(console=console, transient=True)
            self._progress.start()
            self._task = self._progress.add_task(self._label, total=total)
        self._progress.update(self._task, completed=done, total=total)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


@contextmanager
def _progress(label: str) -> Iterator[_LazyProgress]:
    bar = _LazyProgress(label)
    try:
        yield bar
    finally:
        bar.close()


def _name(value: str, what: str) -> str:
    """Validate a group/topic name from the command line (one clear line when unusable)."""
    problem = _ops.name_problem(value, what)
    if problem is not None:
        raise _command_error(f"bad --{what}: {problem}")
    return value


# --------------------------------------------------------------------------------------
# groups
# --------------------------------------------------------------------------------------


@_handler
def _cmd_groups_list(args: argparse.Namespace, zk: KazooClient) -> int:
    groups = _ops.list_groups(zk)
    if args.json:
        _print_json([g.to_json() for g in groups])
        return 0
    if not groups:
        print("no consumer groups in ZooKeeper")
        return 0
    table = _table([("GROUP", "left"), ("MEMBERS", "right")])
    for g in groups:
        table.add_row(g.group, str(g.members))
    table.print()
    return 0


@_handler
def _cmd_groups_describe(args: argparse.Namespace, zk: KazooClient) -> int:
    group = _name(args.group, "group")
    desc = _ops.describe_group(zk, group, args.bootstrap_server,
                                 kafka=command_config(args.command_config))
    if desc.log_end_error is not None:
        print(f"zkconsumer groups describe: warning: {desc.log_end_error}", file=sys.stderr)
    if desc.kafka_offsets_error is not None and not args.members:
        print(f"zkconsumer groups describe: warning: {desc.kafka_offsets_error}",
              file=sys.stderr)
    for warning in desc.warnings:
        print(f"zkconsumer groups describe: warning: {warning}", file=sys.stderr)
    note = None if args.members else desc.offsets_note()
    if note is not None:
        print(f"zkconsumer groups describe: warning: {note}", file=sys.stderr)
    for warning in [] if args.members else desc.bad_offsets_warnings():
        print(f"zkconsumer groups describe: warning: {warning}", file=sys.stderr)
    if desc.unknown_lags and not args.members:
        # Said in both modes: a JSON reader summing the lags must not take null for 0.
        print(f"zkconsumer groups describe: warning: total lag {desc.total_lag_text()}: lag "
              f"unknown where a partition has no committed offset or no known log end",
              file=sys.stderr)
    if args.json:
        if args.members:
            _print_json([m.to_json() for m in desc.members])
        else:
            _print_json([r.to_json() for r in desc.rows()])
        return 0
    if not args.members:
        n = len(desc.members)
        print(f"Group {group}: {n} registered member{'s' if n != 1 else ''}, "
              f"total lag {desc.total_lag_text()}")
        # Where each offset came from, last (the columns before it stay where they were),
        # once Kafka holds any: without one, every offset is ZooKeeper's.
        sources = desc.offsets_in_kafka
        columns = [("TOPIC", "left"), ("PARTITION", "right"), ("OFFSET", "right"),
                   ("LOG-END-OFFSET", "right"), ("LAG", "right"), ("OWNER", "left")]
        table = _table(columns + [("OFFSET-SOURCE", "left")] if sources else columns)
        for r in desc.partitions:
            cells = [_cell(r.topic), _cell(r.partition), _cell(r.offset),
                     _cell(r.log_end_offset), _cell(r.lag), _cell(r.owner)]
            table.add_row(*cells, *([_cell(r.offset_source)] if sources else []))
        if desc.partitions:
            table.print()
        else:
            print("no partitions: nothing subscribed, committed or owned")
        if desc.idle_threads:
            print("Threads owning no partition: " + ", ".join(desc.idle_threads))
    if desc.members or args.members:
        if not args.members:
            print()
        # The subscription without spaces: one cell of a space-separated line.
        mt = _table([("CONSUMER-ID", "left"), ("PATTERN", "left"), ("SUBSCRIPTION", "left"),
                     ("THREADS", "right"), ("PARTITIONS", "right")])
        for m in desc.members:
            sub = ",".join(f"{k}:{v}" for k, v in m.subscription.items())
            mt.add_row(m.consumer_id, m.pattern, sub, str(len(m.threads)),
                       str(m.owned_partitions))
        if desc.members:
            mt.print()
        else:
            print(f"group {group} has no registered members")
    return 0


@_handler
def _cmd_groups_delete(args: argparse.Namespace, zk: KazooClient) -> int:
    group = _name(args.group, "group")
    topic = _name(args.topic, "topic") if args.topic is not None else None
    kafka = command_config(args.command_config)  # a bad file: nothing deleted
    if args.bootstrap_server is not None:
        parse_broker_list(args.bootstrap_server)  # nor a typo in it
    result = _ops.delete_group(zk, group, topic)
    if result.group_deleted:
        extra = f" (topic {topic} was its only topic)" if topic is not None else ""
        print(f"deleted group {group}{extra}: {_count(result.deleted_znodes, 'znode')}")
    else:
        print(f"deleted topic {topic} of group {group}: "
              f"{_count(result.deleted_znodes, 'znode')}")
    # Kafka's offsets are not deleted (after a migration the modern group lives there under
    # the same id), but a member committing there resumes from them: say so.
    left = _ops.kafka_offsets_left(zk, group, topic, args.bootstrap_server, kafka)
    warning = left.warning(args.command_config)
    if warning is not None:
        print(f"zkconsumer groups delete: warning: {warning}", file=sys.stderr)
    return 0


def _warn_live_members(zk: KazooClient, command: str, groups: Sequence[str]) -> None:
    """After a --force write: the live members of ``groups`` neither re-read the offsets
    written nor keep them (a member's next commit of a partition it owns overwrites them)."""
    for group in groups:
        ids = _ops.registered_members(zk, group)
        if not ids:
            continue
        n = len(ids)
        shown = ", ".join(ids[:3]) + (f" and {n - 3} more" if n > 3 else "")
        print(f"zkconsumer {command}: warning: group {group} has {_count(n, 'live member')} "
              f"({shown}): {'it does' if n == 1 else 'they do'} not re-read the offsets, and "
              "a member's next commit after consuming overwrites them; stop "
              f"{'it' if n == 1 else 'them'} first for the new offsets to take effect; they "
              "are read when a member next claims the partition", file=sys.stderr)


# --------------------------------------------------------------------------------------
# offsets
# --------------------------------------------------------------------------------------


def _write_atomically(path: str, text: str) -> None:
    """Write ``path`` through a temporary file and a rename: never a half-written file."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".zkconsumer-export-", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _cmd_offsets_export(args: argparse.Namespace) -> int:
    if args.output == "-" and args.json:
        raise _command_error("--json and --output - both want stdout; "
                             "write the lines to a file with --output FILE")
    groups = [_name(g, "group") for g in args.group or []]
    return _export(args, groups)


@_handler
def _export(args: argparse.Namespace, zk: KazooClient, groups: list[str]) -> int:
    with _progress("exporting offsets") as bar:
        entries = _ops.export_offsets(zk, groups or None, progress=bar)
    if not args.zookeeper_only:
        _warn_kafka_differences(zk, args, entries, groups)
    _warn_illegal_names(entries)
    text = _ops.format_offset_lines(entries)
    if args.output not in (None, "-"):
        try:
            _write_atomically(args.output, text)
        except OSError as e:
            raise _command_error(f"cannot write {args.output}: {e.strerror or e}") from e
    if args.json:
        _print_json([e.to_json() for e in entries])
    elif args.output in (None, "-"):
        sys.stdout.write(text)
    else:
        n_groups = len({e.group for e in entries})
        print(f"exported {_count(len(entries), 'offset')} of {_count(n_groups, 'group')} "
              f"to {args.output}")
    return 0


def _warn_illegal_names(entries: list[_ops.OffsetEntry]) -> None:
    """Exported all the same (a backup keeps what ZooKeeper holds), but ``offsets import``
    refuses a file with such lines: say so now, not at the restore."""
    bad = sorted({problem for e in entries
                  for problem in (_ops.legal_name_problem(e.group, "group"),
                                  _ops.legal_name_problem(e.topic, "topic"))
                  if problem is not None})
    if bad:
        shown = "; ".join(bad[:3]) + (f"; and {len(bad) - 3} more" if len(bad) > 3 else "")
        print(f"zkconsumer offsets export: warning: {_count(len(bad), 'name')} no consumer can "
              f"use, whose lines `offsets import` refuses (remove them from the file to "
              f"import the rest): {shown}", file=sys.stderr)


def _warn_kafka_differences(zk: KazooClient, args: argparse.Namespace,
                            entries: list[_ops.OffsetEntry], groups: list[str]) -> None:
    """Warn about each exported group whose offsets in Kafka are not ZooKeeper's: the lines
    have no place for them."""
    differences, error = _ops.kafka_differences(
        zk, entries, groups or None, args.bootstrap_server,
        kafka=command_config(args.command_config))
    warn = "zkconsumer offsets export: warning:"
    if error is not None:
        print(f"{warn} cannot compare with the offsets in Kafka (the lines hold ZooKeeper's): "
              f"{error}", file=sys.stderr)
    by_group: dict[str, list[_ops.StoreDifference]] = {}
    for d in differences:
        by_group.setdefault(d.group, []).append(d)
    exported = {e.group for e in entries}
    for group, diffs in by_group.items():
        n = len(diffs)
        if group not in exported:
            # Nothing of it in the lines at all: not "other offsets" but none.
            print(f"{warn} group {group} has no offsets in ZooKeeper (nothing of it "
                  f"exported); its offsets in Kafka ({_count(n, 'partition')}) are not in the "
                  "line format, which holds ZooKeeper's only", file=sys.stderr)
            continue
        shown = ", ".join(f"{d.topic}:{d.partition} zookeeper {_cell(d.zookeeper_offset)} "
                          f"kafka {d.kafka_offset}" for d in diffs[:3])
        print(f"{warn} group {group}: Kafka holds other offsets than ZooKeeper for {n} "
              f"partition{'s' if n != 1 else ''} ({shown}{', ...' if n > 3 else ''}); the "
              "lines hold ZooKeeper's only", file=sys.stderr)


def _read_input(path: str) -> str:
    try:
        if path == "-":
            return sys.stdin.read()
        with open(path, encoding="utf-8") as f:
            return f.read()
    except UnicodeDecodeError as e:
        raise _command_error(f"{path} is not a UTF-8 text file ({e.reason} at byte "
                             f"{e.start})") from e
    except OSError as e:
        raise _command_error(f"cannot read {path}: {e.strerror or e}") from e


def _cmd_offsets_import(args: argparse.Namespace) -> int:
    # Validate the whole file before connecting: a bad line writes nothing.
    text = _read_input(args.input)
    source = "stdin" if args.input == "-" else args.input
    # Whatever `offsets export` writes: the legacy lines, or its --json list.
    if text.lstrip().startswith("["):
        entries = _ops.parse_offset_json(text, source)
    else:
        entries = _ops.parse_offset_lines(text.splitlines(), source)
    if not entries:
        raise _command_error(f"{source} holds no offsets")
    return _import(args, entries)


@_handler
def _import(args: argparse.Namespace, zk: KazooClient, entries: list[_ops.OffsetEntry]) -> int:
    # A dry run makes the same checks (a live group is refused) and the same plan.
    with _progress("importing offsets") as bar:
        result = _ops.import_offsets(
            zk, entries, force=args.force, progress=bar, dry_run=args.dry_run,
            bootstrap=args.bootstrap_server, kafka=command_config(args.command_config),
            zookeeper_only=args.zookeeper_only)
    _warn_unusable_offsets(result)
    if args.force:
        _warn_live_members(zk, "offsets import", result.groups)
    if args.json:
        if args.dry_run:
            _print_json([{**c.to_json(), "dry_run": True} for c in result.changes])
        else:
            _print_json([e.to_json() for e in entries])
        return 0
    groups = sorted({e.group for e in entries})
    # (No transaction when every offset is unchanged: nothing to write.)
    how = ("" if not result.transactions else " in one transaction"
           if result.transactions == 1 else f" in {result.transactions} transactions")
    what = f"{_count(len(entries), 'offset')} of {_count(len(groups), 'group')}{how}"
    in_kafka = _kafka_import_text(result.kafka, args.dry_run)
    if args.dry_run:
        print(f"dry run: would import {what} (create {result.created}, update "
              f"{result.updated}, unchanged {result.unchanged}){in_kafka}; nothing written")
        _print_import_plan(result.changes)
        return 0
    print(f"imported {what} (created {result.created}, updated {result.updated}, "
          f"unchanged {result.unchanged}){in_kafka}")
    return 0


#: The most offsets ``offsets import --dry-run`` lists (``--json`` has them all).
DRY_RUN_LIST_LIMIT = 50


def _print_import_plan(changes: Sequence[_ops.ImportChange]) -> None:
    """The offsets a dry run would create or change (ZooKeeper's), old and new."""
    changed = [c for c in changes if c.action != "unchanged"]
    if not changed:
        return
    table = _table([("GROUP", "left"), ("TOPIC", "left"), ("PARTITION", "right"),
                    ("OLD-OFFSET", "right"), ("NEW-OFFSET", "right")])
    for c in changed[:DRY_RUN_LIST_LIMIT]:
        table.add_row(c.group, c.topic, str(c.partition), _cell(c.old_offset), str(c.offset))
    table.print()
    if len(changed) > DRY_RUN_LIST_LIMIT:
        print(f"... and {len(changed) - DRY_RUN_LIST_LIMIT} more (--json lists them all)")


def _warn_unusable_offsets(result: _ops.ImportResult, limit: int = 3) -> None:
    """Warn about imported offsets no member can resume from now (imported all the same: a
    backup restored may predate a topic's deletion, and the topic may be created again)."""
    warn = "zkconsumer offsets import: warning:"

    def named(lines: list[str]) -> str:
        more = f" and {len(lines) - limit} more" if len(lines) > limit else ""
        return ", ".join(lines[:limit]) + more

    for entries, where, what in (
            (result.topic_missing, "topics not in /brokers/topics", "topic"),
            (result.partition_missing, "partitions their topics do not have", "partition")):
        if entries:
            print(f"{warn} {_count(len(entries), 'offset')} of {where} "
                  f"({named([e.line for e in entries])}): nothing to consume until the {what} "
                  "is created again; the members then resume there, or reset by "
                  "auto.offset.reset where past its log end", file=sys.stderr)
    if result.above_log_end:
        shown = named([f"{e.line} (log end {end})" for e, end in result.above_log_end])
        print(f"{warn} {_count(len(result.above_log_end), 'offset')} past the log end "
              f"({shown}): {_ops.OUT_OF_LOG_RESET}", file=sys.stderr)
    if result.log_end_error is not None:
        print(f"{warn} offsets past the log end not checked: {result.log_end_error}",
              file=sys.stderr)


def _kafka_import_text(kafka: list[_ops.KafkaImport], dry_run: bool) -> str:
    """"; and in Kafka, where group G has offsets: created 1, ...", or "" (no such group)."""
    if not kafka:
        return ""
    n = len(kafka)
    names = ", ".join(k.group for k in kafka[:3]) + (f" and {n - 3} more" if n > 3 else "")
    created, updated = ("create", "update") if dry_run else ("created", "updated")
    skipped = sum(k.skipped for k in kafka)
    left_out = f", left out {skipped} (no such partition in /brokers/topics)" if skipped else ""
    return (f"; and in Kafka, where group{'s' if n != 1 else ''} {names} "
            f"{'has' if n == 1 else 'have'} offsets: {created} "
            f"{sum(k.created for k in kafka)}, {updated} {sum(k.updated for k in kafka)}, "
            f"unchanged {sum(k.unchanged for k in kafka)}{left_out}")


def _cmd_offsets_reset(args: argparse.Namespace) -> int:
    group = _name(args.group, "group")
    topic = _name(args.topic, "topic")
    target = reset_target(args)
    # As Kafka's own reset tool: a preview unless --execute.
    args.dry_run = not args.execute
    return _reset(args, group, topic, target)


def reset_target(
    args: argparse.Namespace, *,
    shifted: str = "the committed offsets shifted by",
    datetime_form: str = "an ISO-8601 date-time (e.g. 2024-05-01T12:00:00Z)",
) -> _ops.ResetTarget:
    """The one target flag given (argparse makes them exclusive and one required).
    ``shifted`` and ``datetime_form`` word the shift's description and a bad date-time's
    error (Kafka's entry points say them as Kafka's tool does)."""
    if getattr(args, "to", None) is not None:
        return _ops.parse_reset_target(args.to)
    if args.to_earliest:
        return _ops.ResetTarget("earliest", text="earliest")
    if args.to_latest:
        return _ops.ResetTarget("latest", text="latest")
    if args.to_offset is not None:
        if args.to_offset < 0:
            raise _command_error(f"--to-offset must be >= 0, got {args.to_offset}")
        return _ops.ResetTarget("offset", offset=args.to_offset, text=str(args.to_offset))
    if args.shift_by is not None:
        return _ops.ResetTarget("shift", offset=args.shift_by,
                                  text=f"{shifted} {args.shift_by:+d}")
    target = _ops.parse_reset_target(args.to_datetime)
    if target.kind != "datetime":
        raise _command_error(f"--to-datetime {args.to_datetime!r} is not {datetime_form}")
    return target


@_handler
def _reset(args: argparse.Namespace, zk: KazooClient, group: str, topic: str,
           target: _ops.ResetTarget) -> int:
    new_group = not _ops.group_exists(zk, group)
    with _progress("resetting offsets") as bar:
        rows = _ops.reset_offsets(
            zk, group, topic, target, args.bootstrap_server, force=args.force,
            dry_run=args.dry_run, progress=bar, kafka=command_config(args.command_config),
            zookeeper_only=args.zookeeper_only,
        )
    clamped = [r for r in rows if r.clamped is not None]
    if clamped:
        # Said in both modes: the offset asked for is not the one written.
        shown = ", ".join(f"{r.topic}:{r.partition} to {r.offset} ({r.clamped})"
                          for r in clamped[:5])
        more = f" and {len(clamped) - 5} more" if len(clamped) > 5 else ""
        what = f"offset {target}" if target.kind == "offset" else str(target)
        print(f"zkconsumer offsets reset: note: {what} is outside the log of "
              f"{len(clamped)} of {_count(len(rows), 'partition')}, clamped: {shown}{more}",
              file=sys.stderr)
    if new_group:
        # Seeding a group before its first start is what the legacy tool was for; a typo in
        # --group would do the same, so it is said.
        print(f"zkconsumer offsets reset: note: group {group} had no znodes in ZooKeeper "
              f"(no {zp.group_dir(group)}): its offsets "
              f"{'would be' if args.dry_run else 'were'} created", file=sys.stderr)
    if args.force:
        _warn_live_members(zk, "offsets reset", [group])
    if args.json:
        _print_json([r.to_json() for r in rows])
        return 0
    verb = "would reset" if args.dry_run else "reset"
    # A group with offsets in Kafka gets the new ones there too; OLD-OFFSET stays ZooKeeper's.
    kafka = any(r.kafka for r in rows)
    print(f"{verb} group {group}, topic {topic} to {target}"
                  + (" in ZooKeeper and Kafka" if kafka else "")
                  + ((" (dry run: nothing written)" if args.explicit_dry_run else
                      " (preview: nothing written; --execute writes)") if args.dry_run else ""))
    columns = [("TOPIC", "left"), ("PARTITION", "right"), ("OLD-OFFSET", "right"),
               ("NEW-OFFSET", "right")]
    table = _table(columns + [("OLD-KAFKA-OFFSET", "right")] if kafka else columns)
    for r in rows:
        table.add_row(r.topic, str(r.partition), _cell(r.old_offset), str(r.offset),
                      *([_cell(r.old_kafka_offset)] if kafka else []))
    table.print()
    return 0


# --------------------------------------------------------------------------------------
# verify-rebalance
# --------------------------------------------------------------------------------------


@_handler
def _cmd_verify(args: argparse.Namespace, zk: KazooClient) -> int:
    group = _name(args.group, "group")
    result = _ops.verify_rebalance(zk, group)
    if args.json:
        _print_json([c.to_json() for c in result.checks])
        if not result.ok:
            print(result.reason, file=sys.stderr)
    else:
        print(result.reason)
    return 0 if result.ok else 1


# --------------------------------------------------------------------------------------
# console-consumer
# --------------------------------------------------------------------------------------


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


@_handler
def _console_consumer(args: argparse.Namespace, zk: KazooClient,
                      consumer_props: dict[str, str], output: _Output,
                      topic_filter: TopicFilter | None) -> int:

    if topic_filter is None and not _wait_for_topic(zk, args.topic, args.timeout_ms):
        print("Processed a total of 0 messages", file=sys.stderr)
        return 0

    throwaway = args.group is None
    group = _throwaway_group(zk) if throwaway else args.group

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

    delete = False
    if not throwaway:
        has_offsets = bool(zk.exists(zp.offsets_dir(group))) and bool(
            zk.get_children(zp.offsets_dir(group)))
        if args.from_beginning and has_offsets and not args.delete_consumer_offsets:
            raise _command_error(
                f"found previous offset information for group {group}; pass "
                "--delete-consumer-offsets to delete it, or leave out --from-beginning")
        delete = args.delete_consumer_offsets and _ops.group_exists(zk, group)

    count = 0
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
                if topic_filter is None:
                    stream = connector.create_message_streams({args.topic: 1})[args.topic][0]
                else:
                    stream = connector.create_message_streams_by_filter(topic_filter, 1)[0]
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
        if throwaway:
            _delete_quietly(zk, group,
                            lambda: session.connect(args.zookeeper, args.connect_timeout),
                            None if connector is None else connector.consumer_id, config)
        if not failed:
            print(f"Processed a total of {count} message{'s' if count != 1 else ''}",
                  file=sys.stderr)
    return 0


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


# --------------------------------------------------------------------------------------
# Registration
# --------------------------------------------------------------------------------------


def register(sub: Any) -> None:
    """Add ``console-consumer``, ``groups``, ``offsets`` and ``verify-rebalance`` to the CLI."""
    # console-consumer
    p = sub.add_parser(
        "console-consumer", help="print messages of topics with the ZooKeeper consumer",
        description="Consume with the ZooKeeper-based connector and print each message's "
        "value (or key<TAB>value with --property print.key=true). Without --group a "
        "throwaway group console-consumer-NNNNN is used and deleted on exit.")
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

    # groups, offsets: each action sets ``command`` to "groups list" etc., the prefix
    # cli.main gives an error ("zkconsumer offsets import: ..."), as the warnings have it.
    g = sub.add_parser("groups", help="list, describe or delete consumer groups",
                       description="Consumer groups in ZooKeeper (/consumers).")
    gsub = g.add_subparsers(dest="action", required=True, metavar="ACTION")
    p = gsub.add_parser("list", help="every group with its number of registered members",
                        description="List the groups under /consumers.")
    _add_common(p)
    p.set_defaults(func=_cmd_groups_list, command="groups list")
    p = gsub.add_parser(
        "describe", help="offsets, log end offsets, lag and owners of a group",
        description="Per partition: committed offset, log end offset, lag and owning "
        "thread; the total lag; threads owning nothing; the members and their "
        "subscriptions (--members for the member list alone). The committed offset is the "
        "one a member resumes from: the larger of ZooKeeper's and the group's offset in "
        "Kafka (offsets.storage=kafka, dual commit), with an OFFSET-SOURCE column once Kafka "
        "holds any; a warning says when Kafka could not be asked. Warnings also name "
        "offsets no member can resume from: past the log end, or of topics or partitions "
        "not in /brokers/topics.")
    _add_common(p, bootstrap=True)
    p.add_argument("--group", required=True, metavar="G", help="the consumer group")
    p.add_argument("--members", action="store_true",
                   help="list the members (consumer id, subscription, threads) only")
    p.set_defaults(func=_cmd_groups_describe, command="groups describe")
    p = gsub.add_parser(
        "delete", help="delete a group (or one topic of it) with no registered member",
        description="Delete /consumers/G, or only topic T's offsets and owners (the whole "
        "group when T is its only topic). Refused while members are registered. The group's "
        "committed offsets in Kafka (offsets.storage=kafka, dual commit) are not deleted: a "
        "warning says when it has any (a member committing there resumes from them), or "
        "when Kafka could not be asked.")
    _add_common(p, bootstrap=True, json_flag=False)
    p.add_argument("--group", required=True, metavar="G", help="the consumer group to delete")
    p.add_argument("--topic", metavar="T", help="delete only this topic's offsets and owners")
    p.set_defaults(func=_cmd_groups_delete, command="groups delete")
    add_groups_lag(gsub)

    # offsets
    o = sub.add_parser("offsets", help="export, import or reset committed offsets",
                       description="Committed offsets in ZooKeeper "
                       "(/consumers/G/offsets/T/P).")
    osub = o.add_subparsers(dest="action", required=True, metavar="ACTION")
    p = osub.add_parser(
        "export", help="write offsets as /consumers/G/offsets/T/P:offset lines",
        description="Export committed offsets in the ExportZkOffsets line format. "
        "Without --output the lines go to stdout; with --json stdout gets a JSON list. "
        "A warning on stderr names each group whose offsets in Kafka differ from "
        "ZooKeeper's (the lines hold ZooKeeper's only).")
    _add_common(p, bootstrap=True)
    p.add_argument(_ops.ZOOKEEPER_ONLY_FLAG, action="store_true",
                   help="do not compare with the groups' offsets in Kafka")
    p.add_argument("--group", action="append", metavar="G",
                   help="a group to export (repeatable; default: every group)")
    p.add_argument("--output", metavar="FILE", help="the file to write ('-': stdout)")
    p.set_defaults(func=_cmd_offsets_export, command="offsets export")
    p = osub.add_parser(
        "import", help="write offsets from /consumers/G/offsets/T/P:offset lines",
        description="Import an ExportZkOffsets file. Every line is validated first; "
        "nothing is written unless all are valid. All offsets are written in one "
        "ZooKeeper transaction when they fit. Refused for groups with registered members "
        "unless --force. A group with committed offsets in Kafka (offsets.storage=kafka) "
        "gets them there too (refused while it has active members in Kafka); refused "
        f"when Kafka cannot be asked, unless {_ops.ZOOKEEPER_ONLY_FLAG}. Offsets of "
        "topics or partitions not in /brokers/topics, or past the log end, are imported all "
        "the same, with a warning on stderr.")
    _add_common(p, bootstrap=True)
    p.add_argument("--input", required=True, metavar="FILE", help="the file ('-': stdin)")
    p.add_argument("--force", action="store_true",
                   help="write even when a group has registered members")
    p.add_argument("--dry-run", action="store_true",
                   help="make the same checks and list each offset it would create or "
                   "change, old and new; write nothing")
    p.add_argument(_ops.ZOOKEEPER_ONLY_FLAG, action="store_true",
                   help="write ZooKeeper's offsets alone, without asking Kafka for the "
                   "groups' committed offsets (the brokers are still asked for the log ends, "
                   "for the warning)")
    p.set_defaults(func=_cmd_offsets_import, command="offsets import")
    p = osub.add_parser(
        "reset", help="set a group's offsets of a topic to earliest, latest, N or a time",
        description="Set the committed offsets of every partition of a topic "
        "(UpdateOffsetsInZK). Shows the new offsets and writes nothing unless --execute "
        "(as Kafka's kafka-consumer-groups --reset-offsets). --to-earliest, --to-latest, "
        "--to-offset N, --shift-by N, --to-datetime DATETIME, or --to "
        "earliest|latest|OFFSET|DATETIME; an offset is clamped to each partition's log; "
        "DATETIME is ISO-8601 (local time without a zone) and resolves to the first offset "
        "at or after it. Refused while the group has "
        "registered members unless --force. A group with committed offsets in Kafka "
        "(offsets.storage=kafka) gets the new offsets there too (refused while it has "
        "active members in Kafka); refused when Kafka cannot be asked, unless "
        f"{_ops.ZOOKEEPER_ONLY_FLAG}.")
    _add_common(p, bootstrap=True)
    p.add_argument("--group", required=True, metavar="G", help="the consumer group")
    p.add_argument("--topic", required=True, metavar="T",
                   help="the topic whose partitions are reset (all of them)")
    to = p.add_mutually_exclusive_group(required=True)
    to.add_argument("--to", metavar="WHERE",
                    help="earliest, latest, an offset, or an ISO-8601 date-time")
    to.add_argument("--to-earliest", action="store_true", help="each partition's log start")
    to.add_argument("--to-latest", action="store_true", help="each partition's log end")
    to.add_argument("--to-offset", type=int, metavar="N",
                    help="offset N (clamped to each partition's log)")
    to.add_argument("--shift-by", type=int, metavar="N",
                    help="the committed offset plus N (negative: back), clamped to the log")
    to.add_argument("--to-datetime", metavar="DATETIME",
                    help="the first offset at or after an ISO-8601 date-time")
    p.add_argument("--force", action="store_true",
                   help="write even while the group has registered members")
    run = p.add_mutually_exclusive_group()
    run.add_argument("--execute", action="store_true",
                     help="write the new offsets (without it: a preview)")
    run.add_argument("--dry-run", dest="explicit_dry_run", action="store_true",
                     help="show the new offsets; write nothing (the default)")
    p.add_argument(_ops.ZOOKEEPER_ONLY_FLAG, action="store_true",
                   help="write ZooKeeper's offsets alone, without asking Kafka for the "
                   "group's committed offsets (the brokers are still needed for the log ends)")
    p.set_defaults(func=_cmd_offsets_reset, command="offsets reset")

    # verify-rebalance
    p = sub.add_parser(
        "verify-rebalance", help="check every partition has a live owner",
        description="VerifyConsumerRebalance: every partition of every subscribed topic has "
        "an owner, and every owner is a live thread of a registered member. Exit status 0 "
        "when so, 1 otherwise; the reason is printed.")
    _add_common(p)
    p.add_argument("--group", required=True, metavar="G", help="the consumer group to check")
    p.set_defaults(func=_cmd_verify)
