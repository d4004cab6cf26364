"""The ``zkconsumer migrate`` and ``zkconsumer compare`` subcommands.

- ``migrate status``: both offset stores side by side, live consumers of both protocols and
  a verdict (exit 0 when it is safe to switch to the modern protocol, 1 when not, 2 for a
  group or topic that exists nowhere);
- ``migrate copy --from zookeeper --to kafka`` (or back): seed one store from the other once
  no consumer is alive, refusing offsets outside their logs unless ``--force``;
  ``--dry-run`` shows the plan and who is alive (or that nobody is);
- ``compare``: the same workload through a zkconsumer group and a kafka-python group, with a
  Markdown report and a PNG chart.

``migrate status --json`` and ``migrate copy --json`` print one object (the verdict or the
result, with the rows under ``partitions``), not the list of rows the other tools print.

The work is in :mod:`zkconsumer.migration.status`, :mod:`~zkconsumer.migration.copy` and
:mod:`zkconsumer.migration.compare`; this module parses flags and prints. Failures the user can fix
raise :class:`zkconsumer.cli.CommandError`: one line on stderr, exit status 2.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from zkconsumer._errors import CommandError, ZkConsumerError
from zkconsumer.cli.common import positive_seconds
from zkconsumer.cli.tables import Table, terminal_width
from zkconsumer.migration.compare import run_compare
from zkconsumer.migration.compare_report import write_report
from zkconsumer.migration.compare_settings import LABELS, CompareSettings
from zkconsumer.migration.copy import copy_offsets, fmt_out_of_range
from zkconsumer.migration.status import migration_status
from zkconsumer.ops.common import OUT_OF_LOG_RESET, counted
from zkconsumer.zk import session
from zkconsumer.zk.session import (
    AUTH_ENV,
    COMMAND_CONFIG_HELP,
    SECURITY_HELP,
    check_chroot,
    command_config,
    zookeeper_failure,
)

__all__ = ["register"]


def _command_error(message: str) -> ZkConsumerError:

    return CommandError(message)


def _guarded(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Client-library failures (kazoo, kafka-python) become one-line CommandErrors."""

    @functools.wraps(fn)
    def run(args: argparse.Namespace) -> int:
        from kafka.errors import KafkaError
        from kazoo.exceptions import KazooException, NoAuthError
        from kazoo.handlers.threading import KazooTimeoutError


        try:
            return fn(args)
        except ZkConsumerError as e:
            if type(e).__name__ == "CommandError":
                raise
            raise _command_error(str(e)) from e
        except NoAuthError as e:
            raise _command_error(
                f"ZooKeeper refused an operation by a znode's ACL (NoAuth); set {AUTH_ENV} "
                "to credentials it grants"
            ) from e
        except (KazooException, KazooTimeoutError) as e:
            raise _command_error(zookeeper_failure(
                args.zookeeper, getattr(args, "connect_timeout", None), e)) from e
        except KafkaError as e:
            raise _command_error(f"Kafka failed: {type(e).__name__} {e}".rstrip()) from e

    return run


def _connect(args: argparse.Namespace) -> Any:

    zk = session.connect(args.zookeeper, args.connect_timeout)
    try:
        check_chroot(zk)  # a typo there reads as "no such group": say so instead
    except BaseException:
        zk.stop()
        zk.close()
        raise
    return zk


def _table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Aligned on a terminal (stacked when too wide), plain when piped: never cut."""
    table = Table(headers, right=[h for h in headers if h not in _LEFT])
    for row in rows:
        table.add_row(*row)
    return "\n".join(table.lines(terminal_width()))


#: The columns of text, aligned to the left on a terminal (numbers go to the right).
_LEFT = frozenset({"TOPIC", "CLASS", "ZK-OWNER", "ACTION"})


# --------------------------------------------------------------------------------------
# migrate status
# --------------------------------------------------------------------------------------


@_guarded
def _cmd_status(args: argparse.Namespace) -> int:

    kafka = command_config(args.command_config)
    if args.checks < 1:
        raise _command_error("--checks must be >= 1")
    zk = _connect(args)
    try:
        status = migration_status(zk, args.group, args.bootstrap_server, args.topic or None,
                                  kafka=kafka, checks=args.checks,
                                  check_interval_s=args.check_interval)
    finally:
        zk.stop()
        zk.close()
    if args.json:
        print(json.dumps(status.to_dict(), indent=2))
        return 0 if status.safe else 1
    rows = [
        (p.topic, p.partition, p.zookeeper_offset, p.kafka_offset, p.log_start, p.log_end,
         p.zookeeper_lag, p.kafka_lag, p.state, p.owner)
        for p in status.partitions
    ]
    print(f"group {status.group}")
    print(_table(("TOPIC", "PARTITION", "ZK-OFFSET", "KAFKA-OFFSET", "LOG-START", "LOG-END",
                  "ZK-LAG", "KAFKA-LAG", "CLASS", "ZK-OWNER"), rows))
    print()
    print("legacy consumers (ZooKeeper): "
          + (", ".join(status.zookeeper_members) or "none"))
    modern = ", ".join(f"{m.member_id} ({m.host})" for m in status.modern_members)
    print(f"modern members (group state {status.modern_state}): {modern or 'none'}")
    for w in status.warnings:
        print(f"warning: {w}")
    for b in status.blockers[1:]:
        print(f"also: {b}")
    print(("SAFE to switch: " if status.safe else "NOT safe to switch: ") + status.reason)
    return 0 if status.safe else 1


# --------------------------------------------------------------------------------------
# migrate copy
# --------------------------------------------------------------------------------------


@_guarded
def _cmd_copy(args: argparse.Namespace) -> int:

    kafka = command_config(args.command_config)
    if args.source == args.dest:
        raise _command_error(f"--from and --to are both {args.source}")
    if args.wait_timeout < 0 or args.check_interval < 0 or args.checks < 1:
        raise _command_error("--wait-timeout and --check-interval must be >= 0, --checks >= 1")
    def waiting(live: list[str], left_s: float) -> None:
        # The wait can last --wait-timeout: say what for, once and on each change.
        shown = "; ".join(live[:5]) + (f"; +{len(live) - 5} more" if len(live) > 5 else "")
        print(f"zkconsumer {args.command}: waiting up to {left_s:.3g} s for the group's "
              f"consumers to stop: {shown}", file=sys.stderr, flush=True)

    zk = _connect(args)
    try:
        result = copy_offsets(
            zk, args.group, args.bootstrap_server, args.source, args.dest,
            topics=args.topic or None, force=args.force, dry_run=args.dry_run,
            checks=args.checks, check_interval_s=args.check_interval,
            wait_timeout_s=args.wait_timeout, kafka=kafka, on_wait=waiting,
        )
    finally:
        zk.stop()
        zk.close()
    _copy_warnings(result, args.source, f"zkconsumer {args.command}: warning:")
    # A dry run whose real copy would refuse (offsets outside the log, a log range unknown)
    # exits 1, so that a script can tell; live consumers are only waited for.
    code = 1 if result.dry_run and not result.force and (
        result.log_range_error is not None
        or any(a.action == "out_of_range" for a in result.actions)) else 0
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
        return code
    rows = [(a.topic, a.partition, a.source_offset, a.dest_offset, a.action)
            for a in result.actions]
    print(_table(("TOPIC", "PARTITION", f"{args.source.upper()}", f"{args.dest.upper()}",
                  "ACTION"), rows))
    skipped = sum(1 for a in result.actions if a.action == "skip_newer")
    gone = sorted({a.topic for a in result.actions if a.action == "skip_topic_missing"})
    if result.dry_run:
        n = sum(1 for a in result.actions if a.writes)
        print(f"dry run: would write {counted(n, 'offset')} to {args.dest}")
        refused = [a for a in result.actions if a.action == "out_of_range"]
        if refused:
            one = len(refused) == 1
            print(f"a real copy refuses {counted(len(refused), 'offset')} outside "
                  f"{'its' if one else 'their'} partition's log ({fmt_out_of_range(refused)}) "
                  f"and writes nothing: reset {'it' if one else 'them'} explicitly first "
                  "(zkconsumer offsets reset), or pass --force to copy "
                  f"{'it as it is' if one else 'them as they are'}")
        if result.log_range_error is not None and not result.force:
            print("a real copy refuses to go on without the log range (--force copies "
                  "without the check)")
        if result.live_consumers:
            print(f"live consumers now (a real copy waits for them to go): "
                  f"{'; '.join(result.live_consumers[:5])}")
        else:
            print("live consumers now: none (no owner znode, no registered legacy consumer, "
                  "no modern member in Kafka)")
    else:
        # idle_checks counts every look, also those that still saw consumers.
        print(f"wrote {counted(result.written, 'offset')} to {args.dest} (no consumer seen on "
              f"the last {args.checks} of {counted(result.idle_checks, 'check')})")
    # Both: stale offsets, whether /brokers/topics still lists them or not (the brokers'
    # word decides, as for `migrate status`): nobody can consume them, Kafka refuses them.
    if gone:
        one = len(gone) == 1
        print(f"skipped the stale offsets of {counted(len(gone), 'topic')} the brokers do not "
              f"have ({'a deleted topic' if one else 'deleted topics'}, nothing to consume): "
              f"{', '.join(gone[:6])}" + (f" (+{len(gone) - 6} more)" if len(gone) > 6 else ""))
    shrunk = [a for a in result.actions if a.action == "skip_partition_missing"]
    stale = [f"{a.topic}:{a.partition}" for a in shrunk]
    if stale:
        one = len({a.topic for a in shrunk}) == 1
        print(f"skipped the stale offsets of {counted(len(stale), 'partition')} the brokers do "
              f"not have ({'a topic' if one else 'topics'} recreated with fewer partitions, "
              f"nothing to consume): {', '.join(stale[:6])}"
              + (f" (+{len(stale) - 6} more)" if len(stale) > 6 else ""))
    if skipped:
        print(f"kept {counted(skipped, 'newer offset')} in {args.dest} (--force overwrites "
              f"{'it' if skipped == 1 else 'them'})")
    return code


def _copy_warnings(result: Any, source: str, warn: str) -> None:
    """On stderr (also with --json), each line starting with ``warn``: what --force copied
    out of range, and a log range that could not be checked."""

    forced = [a for a in result.actions if a.writes and a.out_of_range is not None]
    if forced:
        verb = "would copy" if result.dry_run else "copied"
        one = len(forced) == 1
        print(f"{warn} {verb} {counted(len(forced), 'offset')} from {source} outside "
              f"{'its' if one else 'their'} partition's log as {'it is' if one else 'they are'} "
              f"(--force): {fmt_out_of_range(forced)}; {OUT_OF_LOG_RESET}", file=sys.stderr)
    if result.log_range_error is not None:
        print(f"{warn} the log range of the offsets to copy was not checked: "
              f"{result.log_range_error}", file=sys.stderr)


# --------------------------------------------------------------------------------------
# compare
# --------------------------------------------------------------------------------------


@_guarded
def _cmd_compare(args: argparse.Namespace) -> int:

    if args.short:
        settings = CompareSettings.short(args.bootstrap_server, args.zookeeper, args.topic,
                                         args.members, args.messages)
    else:
        settings = CompareSettings(args.bootstrap_server, args.zookeeper, args.topic,
                                   args.members,
                                   messages=20_000 if args.messages is None else args.messages)
    if args.partitions is not None:
        settings.partitions = args.partitions
    if args.rate is not None:
        settings.rate = args.rate
    if args.session_timeout_ms is not None:
        settings.session_timeout_ms = args.session_timeout_ms
    if args.protocol:
        settings.protocols = tuple(args.protocol)
    settings.command_config = args.command_config
    settings.connect_timeout_s = args.connect_timeout
    output = Path(args.output)

    def progress(msg: str) -> None:
        print(f"[compare] {msg}", file=sys.stderr, flush=True)

    result = run_compare(settings, output, progress)
    paths = write_report(result, output)
    for r in result.results:
        tput = f"{r.throughput:.0f} msg/s" if r.throughput else "n/a"
        times = ", ".join(
            f"{c.change} {c.reassignment_s:.2f} s" if c.reassignment_s is not None
            else f"{c.change} timeout" for c in r.changes
        )
        print(f"{LABELS[r.protocol]}: {times}; throughput {tput}; lost {r.lost}, "
              f"duplicated {r.duplicated} of {r.produced}")
    print(f"report: {paths['markdown']}  chart: {paths['chart']}  data: {paths['json']}")
    return 0 if all(not r.errors for r in result.results) else 1


# --------------------------------------------------------------------------------------
# Registration
# --------------------------------------------------------------------------------------


def _common(p: argparse.ArgumentParser, group: bool = True) -> None:
    # Late: the commands import their modules, and cli imports this one while building.

    if group:
        p.add_argument("--group", required=True, metavar="G",
                       help="the consumer group (one id in both protocols)")
    p.add_argument("--bootstrap-server", required=True, metavar="B",
                   help="Kafka bootstrap servers, host:port[,host:port]")
    p.add_argument("--command-config", metavar="FILE", help=COMMAND_CONFIG_HELP)
    p.add_argument("--zookeeper", required=True, metavar="ZK",
                   help="ZooKeeper connect string, host:port[,host:port][/chroot]")
    p.add_argument("--connect-timeout", type=positive_seconds, default=10.0, metavar="S",
                   help="seconds to wait for a ZooKeeper session (default 10)")
    p.epilog = SECURITY_HELP


def register(subparsers: Any) -> None:
    """Add ``migrate`` and ``compare`` to the ``zkconsumer`` command line."""

    # Each action sets ``command`` to "migrate status" or "migrate copy": the prefix cli.main
    # gives an error ("zkconsumer migrate copy: ..."), as the warnings have it and as the
    # other tools do.
    mig = subparsers.add_parser(
        "migrate", help="move a group from ZooKeeper offsets to the modern group protocol",
        description="Move a group from the legacy ZooKeeper consumer to the broker-"
        "coordinated group protocol (and back) without losing or replaying messages. "
        "See docs/migration.md, \"Migrating to the modern group protocol\".",
    )
    msub = mig.add_subparsers(dest="migrate_command", required=True, metavar="ACTION")

    p = msub.add_parser(
        "status", help="both offset stores, live consumers and a verdict",
        description="Per partition: the ZooKeeper offset, the Kafka committed offset, the "
        "log range, lag against each and a class (equal, zk_ahead, kafka_ahead, "
        "missing_in_zk, missing_in_kafka, below_log_start, above_log_end, no_offset, "
        "topic_missing, partition_missing: a deleted topic's or partition's stale offset, a "
        "warning only); the "
        "live consumers of both protocols; whether a modern group may take over now (no "
        "consumer of either protocol seen on --checks looks in a row). "
        "Exit status 0 when it is safe to switch, 1 when not, 2 on bad input (a group that "
        "exists in neither protocol, a --topic the group has no offset for that exists "
        "nowhere).",
    )
    _common(p)
    p.add_argument("--topic", action="append", metavar="T",
                   help="only this topic (repeatable)")
    p.add_argument("--checks", type=int, default=3, metavar="N",
                   help="looks for live consumers, all empty for SAFE (default 3)")
    p.add_argument("--check-interval", type=positive_seconds, default=1.0, metavar="S",
                   help="seconds between looks (default 1)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cmd_status, command="migrate status")

    p = msub.add_parser(
        "copy", help="seed one offset store from the other once no consumer is alive",
        description="Copy the group's offsets between ZooKeeper and Kafka, unchanged (both "
        "hold the next offset to consume). Waits until the group has no owner znode, no "
        "registered legacy consumer and no modern member on --checks checks in a row; "
        "never overwrites a newer offset unless --force; refuses offsets outside their "
        "partition's log (below its start, past its end: blockers for `migrate status` "
        "too) unless --force; skips the stale offsets of topics and partitions the brokers "
        "do not have (deleted, even where /brokers/topics still lists them).",
    )
    _common(p)
    p.add_argument("--from", dest="source", required=True, choices=["zookeeper", "kafka"],
                   help="the store to copy the offsets from")
    p.add_argument("--to", dest="dest", required=True, choices=["zookeeper", "kafka"],
                   help="the store to write them to")
    p.add_argument("--topic", action="append", metavar="T",
                   help="only this topic (repeatable)")
    p.add_argument("--force", action="store_true",
                   help="also overwrite offsets that are newer in the destination, and copy "
                   "offsets outside their partition's log (or whose log range cannot be "
                   "read) as they are")
    p.add_argument("--dry-run", action="store_true",
                   help="show the plan (and who is alive now); write nothing, wait for "
                   "nothing; exit status 1 when a real copy would refuse")
    p.add_argument("--wait-timeout", type=positive_seconds, default=30.0, metavar="S",
                   help="give up when consumers are still alive after S seconds (default 30)")
    p.add_argument("--checks", type=int, default=3, metavar="N",
                   help="consecutive idle checks required (default 3)")
    p.add_argument("--check-interval", type=positive_seconds, default=1.0, metavar="S",
                   help="seconds between checks (default 1)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cmd_copy, command="migrate copy")

    p = subparsers.add_parser(
        "compare", help="the same workload through a zkconsumer and a kafka-python group",
        description="Run the same workload (backlog, then join, clean leave and SIGKILL "
        "under steady traffic) through a zkconsumer group and a kafka-python group and "
        "report both side by side: assignments, time to full reassignment, throughput, "
        "lost and duplicated messages. Writes report.md, compare.png and compare.json.",
    )
    _common(p, group=False)
    p.add_argument("--topic", required=True, metavar="T",
                   help="topic to use (created when missing)")
    p.add_argument("--members", type=int, required=True, metavar="N",
                   help="members per group (at least 2)")
    p.add_argument("--messages", type=int, default=None, metavar="M",
                   help="backlog size (default 20000, 2000 with --short)")
    p.add_argument("--partitions", type=int, default=None, metavar="P",
                   help="partitions when the topic is created (default 2 x (N + 1))")
    p.add_argument("--rate", type=float, default=None, metavar="R",
                   help="messages per second during the changes (default 200, 100 --short)")
    p.add_argument("--session-timeout-ms", type=int, default=None, metavar="MS",
                   help="session timeout of both protocols (default 6000, 3000 --short)")
    p.add_argument("--protocol", action="append", choices=["zookeeper", "kafka"],
                   help="run only this protocol (repeatable; default both)")
    p.add_argument("--short", action="store_true",
                   help="small and fast (CI): small backlog, short pauses and timeouts")
    p.add_argument("--output", default="compare-output", metavar="DIR",
                   help="directory for the report (default ./compare-output)")
    p.set_defaults(func=_cmd_compare)
