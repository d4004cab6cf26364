"""``zkconsumer exporter`` and ``zkconsumer groups lag``: lag monitoring of every group.

The polling, the Burrow-style status and the Prometheus text are
:mod:`zkconsumer.ops.exporter`'s; this module parses flags, runs the loop and prints.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sys
import threading
import time
from datetime import datetime
from types import FrameType
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from zkconsumer._errors import CommandError, ZkConsumerError
from zkconsumer.broker.clients import parse_broker_list
from zkconsumer.cli.common import positive_seconds
from zkconsumer.cli.tables import Table, terminal_width
from zkconsumer.ops.brokers import log_ends, message_times
from zkconsumer.ops.exporter import DEFAULT_WINDOW, ExporterServer, GroupLag, LagMonitor
from zkconsumer.ops.kafka_offsets import kafka_offsets_of
from zkconsumer.zk import session
from zkconsumer.zk.session import (
    COMMAND_CONFIG_HELP,
    SECURITY_HELP,
    check_chroot,
    command_config,
    zookeeper_failure,
)

__all__ = ["add_groups_lag", "register"]

#: The exporter's port unless told (a free one in Prometheus' list of exporter ports).
DEFAULT_PORT = 9308


def _command_error(message: str) -> ZkConsumerError:
    return CommandError(message)


def _monitor(args: argparse.Namespace) -> LagMonitor:
    kafka = command_config(args.command_config)
    if args.bootstrap_server is not None:
        parse_broker_list(args.bootstrap_server)
    if args.window < 2:
        raise _command_error(f"--window must be >= 2, got {args.window}")
    return LagMonitor(window=args.window, log_ends=lambda zk, tps: log_ends(
        zk, tps, args.bootstrap_server, kafka), message_times=lambda zk, positions:
        message_times(zk, positions, args.bootstrap_server, kafka),
        kafka_offsets=lambda zk, groups: kafka_offsets_of(zk, groups, args.bootstrap_server,
                                                          kafka))


def _connect(args: argparse.Namespace) -> KazooClient:
    zk = session.connect(args.zookeeper, args.connect_timeout)
    try:
        check_chroot(zk)
    except BaseException:
        _close(zk)
        raise
    return zk


def _close(zk: KazooClient | None) -> None:
    if zk is not None:
        zk.stop()
        zk.close()


def _failure(args: argparse.Namespace, e: BaseException) -> str:
    if isinstance(e, KazooException | KazooTimeoutError):
        return zookeeper_failure(args.zookeeper, args.connect_timeout, e)
    return str(e)


# --------------------------------------------------------------------------------------
# exporter
# --------------------------------------------------------------------------------------


def _cmd_exporter(args: argparse.Namespace) -> int:
    monitor = _monitor(args)
    zk = _connect(args)  # a typo in --zookeeper fails at once; later losses are retried
    try:
        if args.once:
            groups = monitor.poll(zk, args.group or None)
            _LogEnds("exporter").said(monitor)
            sys.stdout.buffer.write(monitor.render())
            return _unknown_status(groups)
        server = ExporterServer(monitor, args.port, args.address)
    except BaseException:
        _close(zk)
        raise
    print(f"zkconsumer exporter: serving http://{args.address}:{server.port}/metrics, "
          f"polling every {args.interval:g} s", file=sys.stderr, flush=True)
    stop = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        _poll_until(args, monitor, zk, stop)
    finally:
        server.close()
    return 0


#: The exit status of a one-shot ``groups lag`` or ``exporter --once`` that printed
#: everything but could not know some group's lag (a broker unreachable).
EXIT_UNKNOWN = 1


def _unknown_status(groups: list[GroupLag]) -> int:
    return EXIT_UNKNOWN if any(g.status == "UNKNOWN" for g in groups) else 0


class _LogEnds:
    """Says on stderr when the log ends become unknown, and when they are known again:
    once each, not at every poll."""

    def __init__(self, command: str) -> None:
        self._command = command
        self._error: str | None = None
        self._kafka_error: str | None = None

    def _kafka_said(self, monitor: LagMonitor) -> None:
        error = monitor.kafka_error
        if error is not None and error != self._kafka_error and monitor.log_end_error is None:
            print(f"zkconsumer {self._command}: warning: committed offsets in Kafka unknown "
                  f"(groups with offsets there shown as UNKNOWN): {error}", file=sys.stderr,
                  flush=True)
        elif error is None and self._kafka_error is not None:
            print(f"zkconsumer {self._command}: committed offsets in Kafka known again",
                  file=sys.stderr, flush=True)
        self._kafka_error = error

    def said(self, monitor: LagMonitor) -> None:
        self._kafka_said(monitor)
        error = monitor.log_end_error
        if error is not None and error != self._error:
            print(f"zkconsumer {self._command}: warning: log end offsets unknown (lag shown "
                  f"as unknown): {error}", file=sys.stderr, flush=True)
        elif error is None and self._error is not None:
            print(f"zkconsumer {self._command}: log end offsets known again", file=sys.stderr,
                  flush=True)
        self._error = error


def _poll_until(args: argparse.Namespace, monitor: LagMonitor, zk: KazooClient | None,
                stop: threading.Event) -> None:
    """Poll every --interval until ``stop``; a lost ZooKeeper is said once a loss and
    connected again at the next poll (the last values stay served meanwhile)."""
    outage = _Outage("exporter", args)
    ends = _LogEnds("exporter")
    try:
        while not stop.is_set():
            try:
                if zk is None:
                    zk = _connect(args)
                monitor.poll(zk, args.group or None)
                outage.over()
                ends.said(monitor)
            except (KazooException, KazooTimeoutError, ZkConsumerError) as e:
                monitor.failed(e)
                outage.failed(e)
                _close(zk)
                zk = None
            stop.wait(args.interval)
    finally:
        _close(zk)


class _Outage:
    """Says once that polls fail (retrying every --interval), and once that they work
    again."""

    def __init__(self, command: str, args: argparse.Namespace) -> None:
        self._command = command
        self._args = args
        self.failing = False

    def failed(self, e: BaseException) -> None:
        if not self.failing:
            print(f"zkconsumer {self._command}: poll failed, retrying every "
                  f"{self._args.interval:g} s: {_failure(self._args, e)}", file=sys.stderr,
                  flush=True)
        self.failing = True

    def over(self) -> None:
        if self.failing:
            print(f"zkconsumer {self._command}: polling again", file=sys.stderr, flush=True)
        self.failing = False


# --------------------------------------------------------------------------------------
# groups lag
# --------------------------------------------------------------------------------------


def _cmd_groups_lag(args: argparse.Namespace) -> int:
    monitor = _monitor(args)
    zk: KazooClient | None = _connect(args)  # a typo fails at once; --watch rides outages
    ends = _LogEnds("groups lag")
    outage = _Outage("groups lag", args)
    try:
        while True:
            try:
                if zk is None:
                    zk = _connect(args)
                groups = monitor.poll(zk, args.group or None)
            except (KazooException, KazooTimeoutError, ZkConsumerError) as e:
                if not args.watch:
                    raise _command_error(_failure(args, e)) from e
                outage.failed(e)
                _close(zk)
                zk = None
            else:
                outage.over()
                ends.said(monitor)
                _print_lag(args, groups, monitor)
                if not args.watch:
                    return _unknown_status(groups)
            time.sleep(args.interval)
    finally:
        _close(zk)


def _print_lag(args: argparse.Namespace, groups: list[GroupLag], monitor: LagMonitor) -> None:
    if args.json:
        text = json.dumps([g.to_json() for g in groups], indent=None if args.watch else 2)
        print(text, flush=True)
        return
    width = terminal_width()
    table = _partition_table(groups) if args.group else _group_table(groups)
    if not table.rows:
        lines = ["no consumer groups in ZooKeeper" if not args.group else "no partitions"]
    else:
        lines = table.lines(width)
    if args.watch:
        stamp = datetime.now().astimezone().isoformat(timespec="seconds")
        head = (f"every {args.interval:g} s, window {monitor.window}: {stamp} "
                f"(poll {monitor.polls})")
        if width is None:
            lines = ["", head, *lines]  # a pipe gets one table after another
        else:
            # A terminal shows the latest table in place, cut to its height so that the
            # header never scrolls away.
            lines = _screen([head, *lines], shutil.get_terminal_size().lines)
            sys.stdout.write("\x1b[H\x1b[2J")
    print("\n".join(lines))
    sys.stdout.flush()


def _screen(lines: list[str], height: int) -> list[str]:
    """``lines`` cut to a screen ``height`` lines tall, the last line saying how many were
    left out."""
    room = max(height - 1, 2)  # the cursor's line stays free
    if len(lines) <= room:
        return lines
    left = len(lines) - (room - 1)
    return [*lines[:room - 1], f"... {left} more lines: a taller terminal, --group or --json "
            "shows them"]


def _lag_cell(value: int | None, known: bool) -> str | int | None:
    """A lag or log end for a table: the number, ``?`` when unknown, None (``-``) when there
    is none to know (no committed offset)."""
    if value is not None:
        return value
    return "?" if not known else None


def age_cell(seconds: float | None, known: bool) -> str | None:
    """A time lag for a table: ``4.2s``, ``3m12s``, ``2h05m``; ``?`` when it cannot be told
    (yet), None (``-``) when there is none (no committed offset)."""
    if seconds is None:
        return "?" if not known else None
    whole = int(seconds)
    if whole < 60:
        return f"{seconds:.1f}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def _group_table(groups: list[GroupLag]) -> Table:
    t = Table(["GROUP", "MEMBERS", "PARTITIONS", "UNOWNED", "LAG", "MAX-LAG", "TIME-LAG",
               "STORE", "STATUS"], right=["MEMBERS", "PARTITIONS", "UNOWNED", "LAG", "MAX-LAG",
                                          "TIME-LAG"])
    for g in groups:
        none = g.status == "NOTFOUND"  # nothing committed: no lag (-), not an unknown one
        t.add_row(g.group, g.members, len(g.partitions), g.unowned,
                  _lag_cell(g.total_lag, none), _lag_cell(g.max_lag, none),
                  age_cell(g.max_time_lag, none), g.store, g.status)
    return t


def _partition_table(groups: list[GroupLag]) -> Table:
    """One row a partition; with ZK-OFFSET and KAFKA-OFFSET once a group shown has offsets in
    Kafka (OFFSET: the one the lag is of)."""
    both = any(p.kafka_offset is not None for g in groups for p in g.partitions)
    stores = ["ZK-OFFSET", "KAFKA-OFFSET"] if both else []
    t = Table(["GROUP", "TOPIC", "PARTITION", "OFFSET", *stores, "LOG-END-OFFSET", "LAG",
               "TIME-LAG", "OWNER", "STATUS"],
              right=["PARTITION", "OFFSET", *stores, "LOG-END-OFFSET", "LAG", "TIME-LAG"])
    for g in groups:
        for p in g.partitions:
            cells = [p.zookeeper_offset, p.kafka_offset] if both else []
            t.add_row(g.group, p.topic, p.partition, p.offset, *cells,
                      _lag_cell(p.log_end_offset, False),
                      _lag_cell(p.lag, p.offset is None),
                      age_cell(p.time_lag, p.offset is None), p.owner, p.status)
    return t


# --------------------------------------------------------------------------------------
# Registration
# --------------------------------------------------------------------------------------


def _common(p: argparse.ArgumentParser, interval: float) -> None:
    p.add_argument("--zookeeper", required=True, metavar="ZK",
                   help="ZooKeeper connect string, host:port[,host:port...][/chroot]")
    p.add_argument("--connect-timeout", type=positive_seconds, default=10.0, metavar="SECONDS",
                   help="longest wait for the ZooKeeper session (default: %(default)s)")
    p.add_argument("--bootstrap-server", metavar="B",
                   help="broker(s) host:port[,...] for the log ends; default: the brokers "
                   "registered in ZooKeeper")
    p.add_argument("--command-config", metavar="FILE", help=COMMAND_CONFIG_HELP)
    p.add_argument("--group", action="append", metavar="G",
                   help="a group to watch (repeatable; default: every group)")
    p.add_argument("--window", type=int, default=DEFAULT_WINDOW, metavar="N",
                   help="observations in each partition's status window (default: "
                   "%(default)s)")
    p.add_argument("--interval", type=positive_seconds, default=interval, metavar="SECONDS",
                   help="seconds between polls (default: %(default)s)")
    p.epilog = SECURITY_HELP


STATUS_HELP = ("Status per partition, as Burrow evaluates it over a sliding window of "
               "observations: OK, WARN (the offset moves but the lag never falls), STOP (no "
               "commit for longer than the window's commits span), STALL (commits, but the "
               "offset does not move), REWIND (the offset went back), NOTFOUND (no offset); "
               "a group's is its worst partition's (REWIND: ERR; NOTFOUND when nothing is "
               "committed). docs/operations.md has the rules with examples.")


def register(sub: Any) -> None:
    """Add ``exporter``."""
    p = sub.add_parser(
        "exporter", help="serve Prometheus metrics of every group's lag",
        description="Poll every consumer group in ZooKeeper (committed offsets, owners, "
        "members) and the log ends every --interval, and serve per partition the committed "
        "offset, log end, lag, owner and status, and per group the total and largest lag, "
        "members, unowned partitions and status, on http://ADDRESS:PORT/metrics. Offsets are "
        "read from both stores, ZooKeeper and Kafka (offsets.storage=kafka, dual commit), "
        "labelled store; a group's lag and status are of the store its offsets say it "
        "commits to. "
        + STATUS_HELP)
    _common(p, 30.0)
    p.add_argument("--port", type=int, default=DEFAULT_PORT,
                   help="port to serve on (default: %(default)s; 0: any free one)")
    p.add_argument("--address", default="127.0.0.1",
                   help="address to serve on (default: %(default)s; 0.0.0.0: all)")
    p.add_argument("--once", action="store_true",
                   help="poll once, print the metrics on stdout and exit")
    p.set_defaults(func=_cmd_exporter)


def add_groups_lag(gsub: Any) -> None:
    """Add ``groups lag`` (called by the ``groups`` command's registration)."""
    p = gsub.add_parser(
        "lag", help="every group's lag and status, once or live (--watch)",
        description="Per group: members, partitions, unowned partitions, total and largest "
        "lag and status (with --group: per partition). --watch polls again every "
        "--interval, the status window filling up. " + STATUS_HELP)
    _common(p, 5.0)
    p.add_argument("--watch", action="store_true", help="poll again every --interval")
    p.add_argument("--json", action="store_true",
                   help="print JSON (with --watch: one line per poll)")
    p.set_defaults(func=_cmd_groups_lag, command="groups lag")
