"""``zkconsumer offsets export|import|reset``: ExportZkOffsets, ImportZkOffsets and
UpdateOffsetsInZK (plus offsets and date-times); :func:`reset_target` is Kafka's entry points'
too (:mod:`zkconsumer.cli.kafka`)."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

from kazoo.client import KazooClient

from zkconsumer import ops as _ops
from zkconsumer._errors import ZkConsumerError
from zkconsumer.cli.plumbing import (
    _add_common,
    _cell,
    _command_error,
    _count,
    _handler,
    _name,
    _print_json,
    _progress,
    _table,
)
from zkconsumer.zk import paths as zp
from zkconsumer.zk.session import command_config

__all__ = ["register", "reset_target"]



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


def read_input(path: str) -> str:
    """The text of file ``path`` (``-``: stdin); one-line CommandError when it cannot be
    read or is not UTF-8."""
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
    text = read_input(args.input)
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
    try:
        target = _ops.parse_reset_target(args.to_datetime)
    except ZkConsumerError:
        target = None  # its message is about --to
    if target is None or target.kind != "datetime":
        raise _command_error(f"--to-datetime {args.to_datetime!r} is not {datetime_form}")
    return target


@_handler
def _reset(args: argparse.Namespace, zk: KazooClient, group: str, topic: str,
           target: _ops.ResetTarget) -> int:
    new_group = not _ops.group_exists(zk, group)
    if new_group and not args.dry_run and not args.create:
        # A typo of --group would seed a new group: said, and written only when asked.
        raise _command_error(
            f"{_ops.unknown_group_message(zk, group)}: pass --create to seed the offsets of "
            "a new group")
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


def register(sub: Any) -> None:
    """Add ``offsets`` (export, import, reset) to the CLI."""
    # Each action sets ``command`` to "offsets import" etc., the prefix cli.main gives an
    # error ("zkconsumer offsets import: ..."), as the warnings have it.
    o = sub.add_parser("offsets", help="export, import or reset committed offsets",
                       description="Committed offsets in ZooKeeper "
                       "(/consumers/G/offsets/T/P).")
    osub = o.add_subparsers(dest="action", required=True, metavar="ACTION")
    _add_export(osub)
    _add_import(osub)
    _add_reset(osub)


def _add_export(osub: Any) -> None:
    """``offsets export``."""
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


def _add_import(osub: Any) -> None:
    """``offsets import``."""
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


def _add_reset(osub: Any) -> None:
    """``offsets reset``."""
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
    p.add_argument("--create", action="store_true",
                   help="with --execute: seed the offsets of a group not in ZooKeeper yet "
                   "(without it, refused: a misspelt --group would create a new group)")
    run = p.add_mutually_exclusive_group()
    run.add_argument("--execute", action="store_true",
                     help="write the new offsets (without it: a preview)")
    run.add_argument("--dry-run", dest="explicit_dry_run", action="store_true",
                     help="show the new offsets; write nothing (the default)")
    p.add_argument(_ops.ZOOKEEPER_ONLY_FLAG, action="store_true",
                   help="write ZooKeeper's offsets alone, without asking Kafka for the "
                   "group's committed offsets (the brokers are still needed for the log ends)")
    p.set_defaults(func=_cmd_offsets_reset, command="offsets reset")
