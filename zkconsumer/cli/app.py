"""The ``zkconsumer`` command line.

Every subcommand lives in a small function registered in :func:`build_parser`. Failures the
user can fix (bad flags, an unreachable address, bad input) print one line on stderr and exit
with status 2; they never show a traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
from collections.abc import Sequence
from types import FrameType

from kafka.errors import KafkaError
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from zkconsumer._errors import ZkConsumerError
from zkconsumer._version import __version__
from zkconsumer.bridge import Bridge
from zkconsumer.cli import consume, groups, kafka, lag, migrate, offsets, verify
from zkconsumer.cli.common import (
    EXIT_USAGE,
    Parser,
    _stdout_closed,
    positive_seconds,
    silence_stdout,
    with_notes,
)
from zkconsumer.cli.examples import HelpFormatter, examples_text
from zkconsumer.stack.local import BROKERS, LocalStack, sigterm_interrupts
from zkconsumer.zk.session import (
    COMMAND_CONFIG_HELP,
    SECURITY_HELP,
    command_config,
    zookeeper_failure,
)


def _progress(line: str) -> None:
    """Long work (Maven fetching jars on a first `stack up`) said on stderr as it starts."""
    print(line, file=sys.stderr, flush=True)


def _cmd_stack(args: argparse.Namespace) -> int:

    stack = LocalStack(args.dir, broker=args.broker if args.action == "up" else None,
                       progress=_progress)
    if args.action == "up":
        # A SIGTERM while it waits (a CI job's timeout, `timeout 30 ...`) stops what it has
        # started, as Ctrl-C does: the components live in their own sessions.
        with sigterm_interrupts():
            addresses = stack.up(timeout=args.timeout)
        print(json.dumps(addresses), flush=True)
    elif args.action == "down":
        stopped = stack.down()
        print(json.dumps({"stopped": stopped}))
    else:
        status = stack.status()
        print(json.dumps(status))
        return 0 if all(component["answering"] for component in status.values()) else 1
    return 0


def _cmd_bridge(args: argparse.Namespace) -> int:

    bridge = Bridge(args.zookeeper, args.bootstrap_server, interval_s=args.interval,
                    connect_timeout_s=args.connect_timeout,
                    kafka=command_config(args.command_config))

    def _stop(signum: int, frame: FrameType | None) -> None:
        bridge.stop()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    bridge.run()
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="zkconsumer",
        description="Kafka's legacy ZooKeeper consumer, its tools and its local stack.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    parser.add_argument("--version", action="version", version=f"zkconsumer {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("stack", help="start, stop or inspect the local ZooKeeper+broker stack",
                       description="The local stack: real ZooKeeper 3.8 and a real Kafka "
                       "broker (3.9 in ZooKeeper mode by default), as background processes "
                       "with pids, data and logs in DIR. up: start what is not running and "
                       "print the addresses as JSON; down: stop every component; status: "
                       "each component's pid and whether it answers, as JSON (exit 1 when "
                       "one does not). Needs Java 17+; the first `up` has "
                       "Maven (mvn) fetch their jars from Maven Central into "
                       "~/.cache/zkconsumer/jvm ($XDG_CACHE_HOME; .jvm/ in a checkout; "
                       "ZKCONSUMER_JVM_DIR overrides).")
    p.add_argument("action", choices=["up", "down", "status"],
                   help="up, down or status (above)")
    p.add_argument("--dir", required=True, help="directory for data, logs and pids")
    p.add_argument("--broker", choices=BROKERS, default=None,
                   help="up: kafka (Kafka 3.9 in ZooKeeper mode, registering itself) or "
                   "kraft (Kafka 4 in KRaft mode, registered by the bridge); default: the "
                   "one DIR ran last, else kafka")
    p.add_argument("--timeout", type=positive_seconds, default=60.0,
                   help="seconds to wait for each component to answer (up)")
    p.set_defaults(func=_cmd_stack)

    p = sub.add_parser("bridge", help="register a Kafka-protocol cluster in ZooKeeper",
                       description="Keep /brokers/ids and /brokers/topics in ZooKeeper equal "
                       "to a Kafka-protocol cluster's metadata, as ZooKeeper-mode brokers did.",
                       epilog=SECURITY_HELP)
    p.add_argument("--zookeeper", required=True, metavar="ZK",
                   help="ZooKeeper connect string to register the brokers in, "
                   "host:port[,...][/chroot]")
    p.add_argument("--bootstrap-server", required=True, metavar="B",
                   help="the Kafka-protocol cluster's broker(s), host:port[,...]")
    p.add_argument("--interval", type=positive_seconds, default=0.5,
                   help="seconds between syncs")
    p.add_argument("--connect-timeout", type=positive_seconds, default=30.0,
                   help="seconds to wait for ZooKeeper at start")
    p.add_argument("--command-config", metavar="FILE", help=COMMAND_CONFIG_HELP)
    p.set_defaults(func=_cmd_bridge)

    # Subcommands that live in their own modules register themselves here.
    for module in (consume, groups, offsets, verify, migrate, kafka, lag):
        module.register(sub)
    _mark_leaves(parser)
    return parser


def _mark_leaves(parser: argparse.ArgumentParser) -> None:
    """Each subcommand's parser records itself in the namespace it parses, so that an
    unknown flag is answered with that subcommand's usage, not the top level's."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in set(action.choices.values()):
                child.set_defaults(_parser=child)
                _with_examples(child)
                _mark_leaves(child)


def _with_examples(p: argparse.ArgumentParser) -> None:
    """End ``p``'s help with its examples (:mod:`zkconsumer.cli.examples`)."""
    text = examples_text(p.prog.removeprefix("zkconsumer "))
    if text is not None:
        p.epilog = f"{p.epilog}\n\n{text}" if p.epilog else text
        p.formatter_class = HelpFormatter


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    Parser.argv = list(sys.argv[1:] if argv is None else argv)
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        leaf: argparse.ArgumentParser = getattr(args, "_parser", parser)
        leaf.error(f"unrecognized arguments: {' '.join(unknown)}")
    level = logging.INFO if args.verbose or args.command == "bridge" else logging.WARNING
    # A tool's output carries no library log lines unless -v: a warning the library logs
    # (a znode left out, a member's lost ZooKeeper) reads as the command's own.
    handler = logging.StreamHandler()
    handler.setFormatter(
        logging.Formatter("%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s")
        if args.verbose or args.command == "bridge" else _ToolFormatter(args.command))
    logging.basicConfig(level=level, handlers=[handler])
    # kafka-python logs every failed connection attempt as an ERROR, kazoo every lost or
    # refused one as a WARNING, a few a second while a server is away. The bridge says once
    # that the cluster is unreachable, and again when it is back; the tools fail in one line
    # naming what failed. --verbose shows them all.
    quiet = not args.verbose
    # Restored on the way out: main() called in a process that goes on (a test, an
    # application) must not leave the libraries' logging silenced for it.
    saved = {name: logging.getLogger(name).level for name in ("kafka", *LIBRARY_LOGGERS[1:])}
    logging.getLogger("kafka").setLevel(logging.CRITICAL if quiet else logging.WARNING)
    for name in LIBRARY_LOGGERS[1:]:
        quiet_here = quiet and args.command != "bridge"
        logging.getLogger(name).setLevel(logging.CRITICAL if quiet_here else logging.WARNING)
    try:
        return _run(args)
    finally:
        for name, saved_level in saved.items():
            logging.getLogger(name).setLevel(saved_level)


def _run(args: argparse.Namespace) -> int:
    try:
        rc = int(args.func(args))
        sys.stdout.flush()  # here, not at exit: a closed pipe must end as below
        return rc
    except BrokenPipeError as e:
        if not _stdout_closed():
            # A socket's broken pipe (a broker, ZooKeeper): a failure like any other.
            print(f"zkconsumer {args.command}: {e}", file=sys.stderr)
            return EXIT_USAGE
        # The reader went away (`zkconsumer offsets export | head`): stop quietly, as the
        # console consumer does.
        silence_stdout()
        return 0
    except (ZkConsumerError, OSError) as e:
        print(f"zkconsumer {args.command}: {with_notes(str(e), e)}", file=sys.stderr)
        return EXIT_USAGE
    except (KazooException, KazooTimeoutError) as e:
        # One the subcommand did not put in its own words.
        print(f"zkconsumer {args.command}: {with_notes(_zookeeper_failure(args, e), e)}",
              file=sys.stderr)
        return EXIT_USAGE
    except KafkaError as e:
        print(f"zkconsumer {args.command}: Kafka failed: {type(e).__name__} {e}".rstrip(),
              file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt as e:
        # What an interrupted command had done, when it says (a note added on the way out).
        for note in getattr(e, "__notes__", ()):
            print(f"zkconsumer {args.command}: {note}", file=sys.stderr)
        return 130


class _ToolFormatter(logging.Formatter):
    """``zkconsumer COMMAND: warning: message``, as the tools' own warnings are said."""

    def __init__(self, command: str) -> None:
        super().__init__()
        self._command = command

    def format(self, record: logging.LogRecord) -> str:
        return (f"zkconsumer {self._command}: {record.levelname.lower()}: "
                f"{record.getMessage()}")


#: The client libraries' loggers that the tools keep quiet unless --verbose (kazoo's client
#: of the tools logs under the second name).
LIBRARY_LOGGERS = ("kafka", "kazoo", "zkconsumer.admin.kazoo")


def _zookeeper_failure(args: argparse.Namespace, e: BaseException) -> str:
    return zookeeper_failure(getattr(args, "zookeeper", None),
                             getattr(args, "connect_timeout", None), e)


