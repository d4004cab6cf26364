"""A member process of ``zkconsumer compare``:
``python -m zkconsumer.migration.compare_member member ...``.

The harness (:mod:`zkconsumer.migration.compare`) starts each member as a subprocess so that the
kill is real; :func:`member_argv` makes its arguments, :func:`parse_member_argv` reads them.
A member is a zkconsumer connector (``--protocol zookeeper``) or a kafka-python
``KafkaConsumer`` in a group (``--protocol kafka``), held until ``GO`` on stdin (or
``--go``), and reports on stdout, one line per event, with its own wall-clock time: ``R t``
ready, ``A t p,p,..`` its assignment whenever it changes, ``M t p o`` each message handed to
the application, ``E t`` a clean exit. SIGTERM stops it cleanly (it commits and leaves).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from zkconsumer._config import ConsumerConfig
from zkconsumer.broker.clients import kafka_consumer
from zkconsumer.consumer.connector import ZookeeperConsumerConnector
from zkconsumer.consumer.fetcher import FetcherManager
from zkconsumer.migration.compare_settings import PROTOCOLS, CompareSettings
from zkconsumer.zk.session import command_config, command_config_properties, security_settings


class _Out:
    """Protocol lines on fd 1, written unbuffered; ``_lock`` serialises writers."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def line(self, text: str) -> None:
        data = (text + "\n").encode()
        with self._lock:
            os.write(1, data)

    def lines(self, texts: Sequence[str]) -> None:
        if texts:
            data = ("\n".join(texts) + "\n").encode()
            with self._lock:
                os.write(1, data)


def member_argv(name: str, protocol: str, settings: CompareSettings, group: str,
                go: bool) -> list[str]:
    """The arguments of a member process after ``python -m zkconsumer.migration.compare_member``."""
    argv = [
        "member", "--protocol", protocol, "--name", name, "--group", group,
        "--topic", settings.topic, "--zookeeper", settings.zookeeper,
        "--bootstrap", settings.bootstrap,
        "--session-timeout-ms", str(settings.session_timeout_ms),
        "--commit-interval-ms", str(settings.commit_interval_ms),
    ] + (["--go"] if go else [])
    if settings.command_config is not None:
        # Absolute: the member reads the file itself (its secrets stay off the command line).
        argv += ["--command-config", str(Path(settings.command_config).resolve())]
    return argv


def parse_member_argv(argv: Sequence[str]) -> Any:
    """:func:`member_argv`'s arguments, parsed (an ``argparse.Namespace``)."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m zkconsumer.migration.compare_member member")
    p.add_argument("role", choices=["member"])
    p.add_argument("--protocol", choices=PROTOCOLS, required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--zookeeper", required=True)
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--session-timeout-ms", type=int, required=True)
    p.add_argument("--commit-interval-ms", type=int, required=True)
    p.add_argument("--command-config", default=None)
    p.add_argument("--go", action="store_true", help="consume at once (no GO from stdin)")
    return p.parse_args(argv)


def _member_main(argv: Sequence[str]) -> int:
    args = parse_member_argv(argv)

    out = _Out()
    stop = threading.Event()
    go = threading.Event()
    if args.go:
        go.set()

    def on_term(signum: int, frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)

    def read_stdin() -> None:
        # GO releases the consumption; end of input means the harness died: stop.
        for raw in sys.stdin:
            if raw.strip() == "GO":
                go.set()
        stop.set()

    threading.Thread(target=read_stdin, name="stdin", daemon=True).start()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.protocol == "zookeeper":
        _zk_member(args, out, stop, go)
    else:
        _kafka_member(args, out, stop, go)
    out.line(f"E {time.time():.6f}")
    return 0


def _fmt_parts(parts: Any) -> str:
    return ",".join(str(p) for p in sorted(parts))


class _GatedFetcher:
    """The connector's fetch side, held shut until GO, so the backlog is not prefetched
    before the release (kafka-python members pause their partitions for the same reason).

    ``_lock`` guards ``_open`` and ``_pending`` (the rebalance thread calls
    start/stop, the stdin thread calls :meth:`open`).
    """

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._lock = threading.Lock()
        self._open = False
        self._pending: list[Any] | None = None

    def start_connections(self, infos: Any) -> None:
        with self._lock:
            if not self._open:
                self._pending = list(infos)
                return
        self._inner.start_connections(infos)

    def stop_connections(self) -> None:
        with self._lock:
            self._pending = None
        self._inner.stop_connections()

    def shutdown(self) -> None:
        self._inner.shutdown()

    def open(self) -> None:
        with self._lock:
            self._open = True
            pending, self._pending = self._pending, None
            # Started under the lock so a concurrent stop_connections cannot run between.
            if pending:
                self._inner.start_connections(pending)


def zk_member_config(args: Any) -> ConsumerConfig:
    """A zookeeper member's connector configuration, from its parsed arguments."""

    return ConsumerConfig({
        # The harness's login and ACL (ZKCONSUMER_ZOOKEEPER_*, inherited), as its own client.
        **security_settings(),
        **command_config_properties(args.command_config),
        "zookeeper.connect": args.zookeeper,
        "group.id": args.group,
        "consumer.id": args.name,
        "zookeeper.session.timeout.ms": str(args.session_timeout_ms),
        "auto.commit.enable": "true",
        "auto.commit.interval.ms": str(args.commit_interval_ms),
        "auto.offset.reset": "smallest",
        "partition.assignment.strategy": "range",
    })


def _zk_member(args: Any, out: _Out, stop: threading.Event, go: threading.Event) -> None:

    config = zk_member_config(args)
    gates: list[_GatedFetcher] = []

    def fetcher(c: ZookeeperConsumerConnector) -> _GatedFetcher:
        gates.append(_GatedFetcher(FetcherManager(c.config, c.consumer_id, c.broker_addresses)))
        return gates[-1]

    connector = ZookeeperConsumerConnector(config, fetcher_factory=fetcher)
    streams = connector.create_message_streams({args.topic: 1})[args.topic]
    out.line(f"R {time.time():.6f} {connector.consumer_id}")

    def release() -> None:
        go.wait()
        for g in gates:
            g.open()

    threading.Thread(target=release, name="release", daemon=True).start()

    def watch_assignment() -> None:
        # Owner znodes held by this member; polled because it is what the group sees.
        last: list[int] | None = None
        while not stop.is_set():
            now = sorted(tp.partition for tp in connector.owned_partitions())
            if now != last:
                out.line(f"A {time.time():.6f} {_fmt_parts(now)}")
                last = now
            stop.wait(0.01)

    def drain(stream: Any) -> None:
        while not go.wait(0.1):
            if stop.is_set():
                return
        for m in stream:
            out.line(f"M {time.time():.6f} {m.partition} {m.offset}")

    threads = [threading.Thread(target=watch_assignment, name="assignment", daemon=True)]
    threads += [threading.Thread(target=drain, args=(s,), name="drain", daemon=True)
                for s in streams]
    for t in threads:
        t.start()
    while not stop.wait(0.1):
        pass
    connector.shutdown()  # commits (auto-commit is on) and closes the session
    for t in threads:
        t.join(timeout=10)


def kafka_member_kwargs(args: Any) -> dict[str, Any]:
    """A kafka member's ``KafkaConsumer`` arguments, from its parsed arguments."""
    from kafka.coordinator.assignors.range import RangePartitionAssignor


    session = args.session_timeout_ms
    return dict(
        **command_config(args.command_config),
        bootstrap_servers=args.bootstrap.split(","),
        group_id=args.group,
        client_id=args.name,  # member ids are "<client id>-<uuid>": range sorts them by name
        partition_assignment_strategy=[RangePartitionAssignor],
        session_timeout_ms=session,
        heartbeat_interval_ms=max(100, session // 10),
        # Also the JoinGroup rebalance timeout: how long the coordinator waits for members
        # to rejoin. Members poll every 100 ms, so a low value is safe and speeds rebalances.
        max_poll_interval_ms=max(session, 3000),
        enable_auto_commit=True,
        auto_commit_interval_ms=args.commit_interval_ms,
        auto_offset_reset="earliest",
    )


def _kafka_member(args: Any, out: _Out, stop: threading.Event, go: threading.Event) -> None:
    from kafka.consumer.subscription_state import ConsumerRebalanceListener

    consumer = kafka_consumer(**kafka_member_kwargs(args))
    current: set[int] = set()
    held: list[Any] = []  # partitions paused until GO

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            current.difference_update(tp.partition for tp in revoked)
            out.line(f"A {time.time():.6f} {_fmt_parts(current)}")

        def on_partitions_assigned(self, assigned: Any) -> None:
            current.update(tp.partition for tp in assigned)
            if not go.is_set() and assigned:
                consumer.pause(*assigned)
                held.extend(assigned)
            out.line(f"A {time.time():.6f} {_fmt_parts(current)}")

    # The topic's metadata before joining: kafka-python 3.0's group leader assigns from the
    # metadata it has when the group forms, and without the topic's ("No partition metadata
    # for topic") it assigned nothing until a metadata refresh minutes later.
    deadline = time.monotonic() + 30
    while not consumer.partitions_for_topic(args.topic) and time.monotonic() < deadline:
        time.sleep(0.1)
    consumer.subscribe([args.topic], listener=Listener())
    out.line(f"R {time.time():.6f} {args.name}")
    released = go.is_set()
    while not stop.is_set():
        if not released and go.is_set():
            released = True
            mine = [tp for tp in held if tp in consumer.assignment()]
            if mine:
                consumer.resume(*mine)
        batch = consumer.poll(timeout_ms=100)
        lines = [f"M {time.time():.6f} {tp.partition} {r.offset}"
                 for tp, records in batch.items() for r in records]
        out.lines(lines)  # before the next poll, which may auto-commit past them
    consumer.close()  # commits (auto-commit is on) and leaves the group


if __name__ == "__main__":
    sys.exit(_member_main(sys.argv[1:]))
