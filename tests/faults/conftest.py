"""Fixtures of the fault suite.

- ``private_stack``: a stack of its own for the module (tests that stop ZooKeeper, the broker
  or the bridge must not disturb the session stack other tests use); before and after each
  test every component is (re)started, so a test that fails mid-outage leaves no damage.
  Kafka 3.9 in ZooKeeper mode, or the broker a test's ``@pytest.mark.broker("kraft")`` names
  (Kafka 4 with the bridge, for the bridge's faults).
- ``pzk``: a kazoo client on the private stack that survives its outages.
- ``fault_run``: makes a :class:`~tools.fault_harness.FaultRun` and closes it after the test.
- ``report``: prints a run's summary in the test output (duplicates counted there, as asked)
  and fails the test on any invariant violation.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from tests.support import StackInfo, record_summary
from tools.fault_harness import FaultRun, RunReport, zk_client
from zkconsumer.stack.local import DEFAULT_BROKER, LocalStack


@pytest.fixture(scope="module")
def _private_locals() -> Iterator[Callable[[str], LocalStack]]:
    """``get(broker)``: the module's private stack of that broker, started on first use."""
    stacks: dict[str, LocalStack] = {}
    with tempfile.TemporaryDirectory(prefix="zkc-faults-") as d:

        def get(broker: str) -> LocalStack:
            if broker not in stacks:
                stacks[broker] = LocalStack(Path(d) / broker, broker=broker)
                stacks[broker].up()
            return stacks[broker]

        try:
            yield get
        finally:
            for local in stacks.values():
                local.down()


@pytest.fixture
def _private_local(
    request: pytest.FixtureRequest, _private_locals: Callable[[str], LocalStack]
) -> LocalStack:
    marker = request.node.get_closest_marker("broker")
    return _private_locals(marker.args[0] if marker else DEFAULT_BROKER)


def _restore(local: LocalStack) -> None:
    for name in local.components:
        if not local.running(name):
            local.start(name)


@pytest.fixture
def private_stack(_private_local: LocalStack) -> Iterator[StackInfo]:
    _restore(_private_local)
    try:
        yield StackInfo(_private_local.zookeeper, _private_local.bootstrap, _private_local)
    finally:
        _restore(_private_local)


@pytest.fixture
def pzk(private_stack: StackInfo) -> Iterator[KazooClient]:
    client = zk_client(private_stack.zookeeper)
    try:
        yield client
    finally:
        client.stop()
        client.close()


@pytest.fixture
def fault_run(names: Any, tmp_path: Path) -> Iterator[Callable[..., FaultRun]]:
    """``fault_run(stack, topic, partitions, **kw)`` -> a FaultRun closed after the test."""
    runs: list[FaultRun] = []

    def make(stack: StackInfo, topic: str, partitions: int, **kw: Any) -> FaultRun:
        run = FaultRun(names.suffix, stack.zookeeper, stack.bootstrap, kw.pop(
            "group", names.group), topic, partitions, tmp_path, **kw)
        runs.append(run)
        return run

    try:
        yield make
    finally:
        for run in runs:
            run.close()


@pytest.fixture
def report(request: pytest.FixtureRequest) -> Callable[..., RunReport]:
    """``report(run_report, *notes)``: show the summary (and notes) in the run's closing
    summary, fail on any problem."""

    def show(r: RunReport, *notes: str) -> RunReport:
        r.name = request.node.name
        record_summary(request.node, f"[faults] {r.summary()}" + "".join(f"; {n}" for n in notes))
        problems = r.problems()
        assert not problems, "\n".join(problems)
        return r

    return show
