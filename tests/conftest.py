"""Shared fixtures: one real stack per test session, fresh names per test.

The stack is the local one (real ZooKeeper 3.8, Apache Kafka 3.9 in ZooKeeper mode) started
in a temporary directory, unless ZKCONSUMER_ZOOKEEPER and ZKCONSUMER_BOOTSTRAP name an
external one (for example the docker-compose stack, the same software). The bridge's tests
use a second one, Kafka 4 in KRaft mode registered by the bridge (``kraft_stack``). Tests
never share group or topic names, so they do not see each other. The run's first lines say
which broker, version and ZooKeeper it runs against.
"""

from __future__ import annotations

import inspect
import os
import signal
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import cast

import pytest
from kazoo.client import KazooClient

from tests.support import SUMMARY_KEY, StackInfo, create_topic, started_zk, wait_until
from zkconsumer.stack.local import DEFAULT_BROKER, describe, running_stack, zk_four_letter
from zkconsumer.zk import paths as zp

#: The fixtures that start or reach a stack: a unit test (tests/unit) must not ask for them.
STACK_FIXTURES = frozenset({"kafka_stack", "kraft_stack", "stack", "zk", "topic_factory",
                            "private_stack"})
UNIT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "unit")

# A shell without job control starts `cmd &` with SIGINT ignored, and an ignored signal stays
# ignored across exec: the members and commands the tests start would then never see the
# Ctrl-C some tests send them. A handler (unlike SIG_IGN) is reset to the default at exec.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """tests/unit stays fast and needs nothing running: a test there that asks for a stack
    (a fixture, or the stack module's running_stack/LocalStack) stops the run at collection."""
    misplaced = []
    for item in items:
        if not str(item.path).startswith(UNIT_DIR + os.sep):
            continue
        source = ""
        if isinstance(item, pytest.Function):
            source = inspect.getsource(item.function)
        if STACK_FIXTURES & set(getattr(item, "fixturenames", ())) or any(
                name in source for name in ("running_stack(", "LocalStack(")):
            misplaced.append(item.nodeid)
    if misplaced:
        raise pytest.UsageError(
            f"unit tests that need a stack (move them to tests/integration): {misplaced}")


def _external() -> tuple[str | None, str | None]:
    return os.environ.get("ZKCONSUMER_ZOOKEEPER"), os.environ.get("ZKCONSUMER_BOOTSTRAP")


def pytest_report_header(config: pytest.Config) -> list[str]:
    zk, bootstrap = _external()
    if zk and bootstrap:
        version = zk_four_letter(zk.split(",")[0].split("/")[0], "srvr").partition("\n")[0]
        return [f"stack: external, broker at {bootstrap}, ZooKeeper at {zk} "
                f"({version.removeprefix('Zookeeper version: ') or 'not answering'})"]
    return [f"stack: {describe(DEFAULT_BROKER)}; bridge tests: {describe('kraft')}"]


@pytest.fixture(scope="session")
def kafka_stack() -> Iterator[StackInfo]:
    """The suite's stack: Kafka 3.9 in ZooKeeper mode, local or external."""
    zk, bootstrap = _external()
    if bool(zk) != bool(bootstrap):
        # One alone would silently test a local stack instead of the one meant.
        pytest.exit("set both ZKCONSUMER_ZOOKEEPER and ZKCONSUMER_BOOTSTRAP (or neither)", 2)
    if zk and bootstrap:
        yield StackInfo(zk, bootstrap, None)
        return
    with tempfile.TemporaryDirectory(prefix="zkc-stack-") as d, running_stack(d) as local:
        yield StackInfo(local.zookeeper, local.bootstrap, local)


@pytest.fixture(scope="session")
def kraft_stack() -> Iterator[StackInfo]:
    """Kafka 4 in KRaft mode with the bridge registering it in its own ZooKeeper: what the
    bridge is for. Always local (an external stack is the suite's main one)."""
    with (tempfile.TemporaryDirectory(prefix="zkc-kraft-") as d,
          running_stack(d, broker="kraft") as local):
        yield StackInfo(local.zookeeper, local.bootstrap, local)


@pytest.fixture
def stack(request: pytest.FixtureRequest) -> StackInfo:
    """The stack a test runs against: :func:`kafka_stack`, or :func:`kraft_stack` for a test
    marked ``@pytest.mark.broker("kraft")`` (``zk`` and ``topic_factory`` follow it). Kraft
    is for what only a cluster the bridge registers shows: a ZooKeeper-mode broker acts on
    what is written by hand under /brokers/topics (it creates the topic, and rewrites a znode
    that does not decode as an empty assignment); a KRaft cluster never reads it."""
    marker = request.node.get_closest_marker("broker")
    name = "kraft_stack" if marker and marker.args[0] == "kraft" else "kafka_stack"
    return cast(StackInfo, request.getfixturevalue(name))


@pytest.fixture
def zk(stack: StackInfo) -> Iterator[KazooClient]:
    with started_zk(stack.zookeeper) as client:
        yield client


@dataclass
class Names:
    """Per-test unique names: ``names.group``, ``names.topic``, ``names("x")``."""

    suffix: str

    @property
    def group(self) -> str:
        return f"g-{self.suffix}"

    @property
    def topic(self) -> str:
        return f"t-{self.suffix}"

    def __call__(self, stem: str) -> str:
        return f"{stem}-{self.suffix}"


@pytest.fixture
def names() -> Names:
    return Names(uuid.uuid4().hex[:10])


@pytest.fixture
def topic_factory(stack: StackInfo, zk: KazooClient):  # type: ignore[no-untyped-def]
    """``topic_factory(name, partitions)`` creates a topic and waits for the bridge."""

    def make(name: str, partitions: int) -> str:
        create_topic(stack.bootstrap, name, partitions)
        wait_until(
            lambda: zk.exists(zp.topic_path(name)) is not None
            and len(zp.TopicAssignment.decode(zk.get(zp.topic_path(name))[0]).partitions)
            == partitions,
            timeout=30,
            what=f"topic {name} registered in ZooKeeper",
        )
        return name

    return make


@pytest.fixture(params=["c", "python"])
def speedups(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs a test with zkconsumer._speedups (``"c"``) and with its Python twins
    (``"python"``, as an install without a C compiler runs): the confluent grouping and the
    stream iterator's MessageAndMetadata maker. (test_speedups.py fails if it is not built.)"""
    from zkconsumer import _message
    from zkconsumer.broker import backends

    if request.param == "python":
        monkeypatch.setattr(backends, "split_messages", None)
        monkeypatch.setattr(_message, "_zip_messages", None)
    elif backends.split_messages is None or _message._zip_messages is None:
        pytest.skip("zkconsumer._speedups not built (test_the_extension_is_built fails)")
    return str(request.param)


_summaries: list[str] = []
#: Layer (tests/unit, tests/integration, ..., or the package's doctests) -> [seconds, tests].
_layer_times: dict[str, list[float]] = {}


def layer_of(nodeid: str) -> str:
    """The part of the suite a test belongs to: its directory under tests/, or "doctests"."""
    parts = nodeid.split("::", 1)[0].split("/")
    if parts[0] == "tests" and len(parts) > 2:
        return parts[1]
    return "doctests" if parts[0] == "zkconsumer" else parts[0]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Collects the lines tests gave :func:`tests.support.record_summary`, and each layer's
    time (in the main process: the reports of pytest-xdist's workers come here too)."""
    times = _layer_times.setdefault(layer_of(report.nodeid), [0.0, 0])
    times[0] += report.duration  # setup, call and teardown: fixtures' stacks count too
    if report.when == "call":
        times[1] += 1
        _summaries.extend(str(v) for k, v in report.user_properties if k == SUMMARY_KEY)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _summaries:
        terminalreporter.section("fault runs and soak")
        for line in _summaries:
            terminalreporter.write_line(line)
    if _layer_times:
        # Summed over the processes: the wall time is about the total over the number of workers.
        terminalreporter.section("time per layer (summed over the worker processes)")
        for layer, (seconds, count) in sorted(_layer_times.items(), key=lambda kv: -kv[1][0]):
            terminalreporter.write_line(f"{layer:<12} {int(count):>5} tests "
                                        f"{int(seconds) // 60:>3} min {int(seconds) % 60:>2} s")
