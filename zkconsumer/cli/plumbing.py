"""What the ZooKeeper tools' subcommands share (``groups``, ``offsets``, ``verify-rebalance``,
``console-consumer``): the ZooKeeper connection around a command, the common flags, tables,
JSON and the progress display.

The work is done by :mod:`zkconsumer.ops` (plain functions, no printing); the command
modules parse flags, print tables that never cut a value (:mod:`zkconsumer.cli.tables`) or
``--json`` (a JSON list of objects with snake_case fields), and show a progress display (rich)
on a terminal for long operations. Every failure the user can fix raises
:class:`zkconsumer._errors.CommandError` (or another ``ZkConsumerError``), which ``cli.main``
prints as one line with exit status 2. Input is validated before anything is written.
ZooKeeper credentials and the ACL of created znodes come from the environment
(``ZKCONSUMER_ZOOKEEPER_AUTH`` / ``ZKCONSUMER_ZOOKEEPER_ACL``, read by
:func:`zkconsumer.ops.connect`; the console consumer's connector gets them too).
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from kazoo.exceptions import KazooException, NoAuthError
from kazoo.handlers.threading import KazooTimeoutError

from zkconsumer import ops as _ops
from zkconsumer._errors import CommandError, ZkConsumerError
from zkconsumer.cli.common import positive_seconds, with_notes
from zkconsumer.cli.tables import Table
from zkconsumer.zk import session
from zkconsumer.zk.session import (
    AUTH_ENV,
    COMMAND_CONFIG_HELP,
    SECURITY_HELP,
    check_chroot,
    zookeeper_failure,
)

#: Show a progress display from this many groups (export) or partitions (reset, import).
PROGRESS_THRESHOLD = 20


def _command_error(message: str) -> ZkConsumerError:

    return CommandError(message)





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
            # Where _admin knows the path it raises AclRefusedError; this is the rest.
            raise _command_error(
                f"ZooKeeper at {args.zookeeper} refused an operation by a znode's ACL "
                f"(NoAuth); set {AUTH_ENV} to credentials it grants"
            ) from e
        except (KazooTimeoutError, KazooException) as e:
            raise _command_error(with_notes(
                zookeeper_failure(args.zookeeper, args.connect_timeout, e), e)) from e
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
