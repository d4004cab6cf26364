"""The local stack and the bridge, against the real ZooKeeper and broker."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from tests.support import StackInfo, create_topic, reaped, wait_until
from zkconsumer.stack.local import LocalStack, port_open, running_stack, zk_four_letter
from zkconsumer.zk import paths as zp


def _broker_ids(zk: KazooClient) -> list[str]:
    return sorted(zk.get_children(zp.BROKER_IDS)) if zk.exists(zp.BROKER_IDS) else []


def test_zookeeper_is_real_and_the_broker_registers_itself(
    stack: StackInfo, zk: KazooClient
) -> None:
    assert zk_four_letter(stack.zookeeper, "ruok") == "imok"
    assert "Zookeeper version: 3.8" in zk_four_letter(stack.zookeeper, "srvr")
    ids = wait_until(lambda: _broker_ids(zk), 10, "a registered broker")
    data, stat = zk.get(zp.broker_path(int(ids[0])))
    assert stat.ephemeralOwner != 0  # ephemeral: the broker's own session
    reg = json.loads(data)
    host, port = stack.bootstrap.rsplit(":", 1)
    assert reg["version"] == 5  # Kafka 3.9 in ZooKeeper mode
    assert reg["endpoints"] == [f"PLAINTEXT://{host}:{port}"]
    assert (reg["host"], reg["port"]) == (host, int(port))
    assert not zk.exists("/zkconsumer")  # no bridge ran here


#: Where what the bridge writes for a KRaft cluster differs from what a Kafka 3.9 broker in
#: ZooKeeper mode writes about itself (docs/bridge.md explains each): znode ->
#: (keys only Kafka 3.9 writes, keys only the bridge writes, {key: (Kafka 3.9's, bridge's)}).
KNOWN_DIFFERENCES: dict[str, tuple[set[str], set[str], dict[str, tuple[Any, Any]]]] = {
    "broker": ({"features"}, {"rack"}, {"version": (5, 4)}),
    "topic": ({"topic_id", "adding_replicas", "removing_replicas"}, set(),
              {"version": (3, 1)}),
    "state": (set(), set(), {}),
}


def _znodes(info: StackInfo, topic: str) -> dict[str, Any]:
    """The registration of the stack's one broker, ``topic``'s znode and its partition 0's
    state and znode data, as written; with what zkconsumer's readers make of them."""
    from tests.support import started_zk
    from zkconsumer.ops.brokers import find_bootstrap
    from zkconsumer.zk.read import broker_addresses, topic_partitions

    with started_zk(info.zookeeper) as zk:
        broker = int(wait_until(lambda: _broker_ids(zk), 30, "a broker")[0])
        wait_until(lambda: zk.exists(zp.partition_state_path(topic, 2)), 30, "the states")
        return {
            "id": broker,
            "broker": json.loads(zk.get(zp.broker_path(broker))[0]),
            "topic": json.loads(zk.get(zp.topic_path(topic))[0]),
            "state": json.loads(zk.get(zp.partition_state_path(topic, 0))[0]),
            "partition_data": zk.get(zp.topic_path(topic) + "/partitions/0")[0],
            "read": (zp.BrokerRegistration.decode(zk.get(zp.broker_path(broker))[0]).endpoint(),
                     broker_addresses(zk), find_bootstrap(zk, None, None),
                     topic_partitions(zk, topic),
                     zp.TopicAssignment.decode(zk.get(zp.topic_path(topic))[0]).partitions,
                     zp.PartitionState.decode(zk.get(zp.partition_state_path(topic, 0))[0])),
        }


def _ours(info: StackInfo, value: Any, broker: int, key: str = "") -> Any:
    """``value`` (decoded JSON, found under ``key``) with the stack's own address, port and
    broker id made generic, so two stacks' znodes compare."""
    if isinstance(value, dict):
        # A topic's partitions map numbers to replica lists: the replicas are broker ids.
        return {k: _ours(info, v, broker, key if key == "partitions" else k)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_ours(info, v, broker, key) for v in value]
    if isinstance(value, str):
        return value.replace(info.bootstrap, "HOST:PORT")
    if key == "port" and value == int(info.bootstrap.rsplit(":", 1)[1]):
        return "PORT"
    if key in ("leader", "isr", "partitions") and value == broker:
        return "ID"
    return value


def test_the_bridge_writes_what_a_zookeeper_mode_broker_writes(
    stack: StackInfo, kraft_stack: StackInfo, names: Any
) -> None:
    """Field by field: Kafka 3.9's own znodes about itself against the bridge's about a
    Kafka 4 KRaft cluster; zkconsumer's readers (the consumer's and the tools') make the
    same of both. Where the JSON differs is :data:`KNOWN_DIFFERENCES`, exactly."""
    found = {}
    for name, info in (("kafka", stack), ("bridge", kraft_stack)):
        create_topic(info.bootstrap, names.topic, 3)
        found[name] = _znodes(info, names.topic)
    kafka, bridge = found["kafka"], found["bridge"]
    for znode, (only_kafka, only_bridge, values) in KNOWN_DIFFERENCES.items():
        assert set(kafka[znode]) - set(bridge[znode]) == only_kafka, znode
        assert set(bridge[znode]) - set(kafka[znode]) == only_bridge, znode
        for key in set(kafka[znode]) & set(bridge[znode]):
            mine = (_ours(stack, kafka[znode][key], kafka["id"], key),
                    _ours(kraft_stack, bridge[znode][key], bridge["id"], key))
            if key in values:
                assert mine == values[key], (znode, key)
            elif key not in ("timestamp", "controller_epoch"):
                assert mine[0] == mine[1], (znode, key)
    assert (kafka["partition_data"], bridge["partition_data"]) == (None, b"")
    k_endpoint, k_addresses, k_bootstrap, k_partitions, k_assignment, k_state = kafka["read"]
    b_endpoint, b_addresses, b_bootstrap, b_partitions, b_assignment, b_state = bridge["read"]
    assert (k_endpoint, k_addresses, k_bootstrap) == (
        tuple(stack.bootstrap.split(":")[:1]) + (int(stack.bootstrap.split(":")[1]),),
        [stack.bootstrap], stack.bootstrap)
    assert (b_endpoint, b_addresses, b_bootstrap) == (
        tuple(kraft_stack.bootstrap.split(":")[:1]) + (int(kraft_stack.bootstrap.split(":")[1]),),
        [kraft_stack.bootstrap], kraft_stack.bootstrap)
    assert k_partitions == b_partitions == [0, 1, 2]
    assert k_assignment == {p: [kafka["id"]] for p in range(3)}
    assert b_assignment == {p: [bridge["id"]] for p in range(3)}
    assert (k_state.leader, k_state.isr, k_state.leader_epoch) == (kafka["id"], [kafka["id"]], 0)
    assert (b_state.leader, b_state.isr, b_state.leader_epoch) == (
        bridge["id"], [bridge["id"]], 0)


@pytest.fixture
def private_stack(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A stack of its own, for tests that stop and start components."""
    with running_stack(tmp_path / "stack") as s:
        yield s


def test_a_process_is_taken_for_a_component_only_when_it_names_this_stack(
    private_stack: LocalStack, tmp_path: Path
) -> None:
    """The stack knows its components by pid and a marker in their command line. Generic
    markers ("broker") made a reused pid, another stack's component say, look like ours:
    `down` would have signalled it."""
    from zkconsumer.stack.local import _Proc

    other = tmp_path / "other-stack"
    stranger = subprocess.Popen([  # what another stack's three components run
        sys.executable, "-c", "import time; time.sleep(60)",
        f"-Dzkconsumer.stack={other}", "ZooKeeperServerMain",
        "broker", "--listener-url", "tcp://127.0.0.1:1",
        "zkconsumer", "bridge", "--zookeeper", "127.0.0.1:1",
    ])
    with reaped(stranger):
        for name, proc in private_stack.procs.items():
            assert private_stack.running_proc(proc), name
            assert not private_stack.running_proc(_Proc(stranger.pid, proc.marker)), name


def test_up_is_not_fooled_by_another_process_listening_on_a_port(tmp_path: Path) -> None:
    """A component is ready when *its* process listens: another listener on the port (a
    component of a stack whose state was lost) answered while ours failed to bind, and `up`
    reported a running stack."""
    import socket

    from zkconsumer._errors import StackError
    from zkconsumer.stack.local import listens

    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        assert listens(os.getpid(), port)
        with reaped(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])) as p:
            assert not listens(p.pid, port)
        stack = LocalStack(tmp_path / "stack")
        stack.broker_port = port
        try:
            with pytest.raises(StackError, match=r"^the kafka broker exited at start: .*Address "
                               r"already in use.* \(log: .*broker\.log\)$"):
                stack.up(timeout=20)
            # Nothing left running, so the taken port is forgotten: the next `up` works.
            state = json.loads((tmp_path / "stack" / "stack.json").read_text())
            assert (state["zk_port"], state["broker_port"], state["procs"]) == (0, 0, {})
            again = LocalStack(tmp_path / "stack")
            again.up(timeout=60)
            assert again.broker_port != port and port_open(again.bootstrap)
            again.down()
        finally:
            stack.down()


@pytest.mark.parametrize(("broker", "components"), [
    (None, ("zookeeper", "broker")),  # Kafka 3.9 registers itself: no bridge
    ("kraft", ("zookeeper", "broker", "bridge")),
])
def test_stack_cli_up_status_down(
    tmp_path: Path, broker: str | None, components: tuple[str, ...]
) -> None:
    d = tmp_path / "cli-stack"
    env = dict(os.environ)
    up = subprocess.run([sys.executable, "-m", "zkconsumer", "stack", "up", "--dir", str(d),
                         *(["--broker", broker] if broker else [])],
                        capture_output=True, text=True, timeout=120, env=env)
    try:
        assert up.returncode == 0, up.stderr
        lines = up.stdout.strip().splitlines()
        assert len(lines) == 1
        addresses = json.loads(lines[0])
        assert set(addresses) == {"zookeeper", "bootstrap"}
        assert zk_four_letter(addresses["zookeeper"]) == "imok"
        status = subprocess.run(
            [sys.executable, "-m", "zkconsumer", "stack", "status", "--dir", str(d)],
            capture_output=True, text=True, timeout=60)
        assert status.returncode == 0, status.stdout + status.stderr
        st = json.loads(status.stdout)
        assert tuple(st) == components
        assert all(st[c]["answering"] for c in components)
        assert st["zookeeper"]["address"] == addresses["zookeeper"]
        assert st["broker"]["address"] == addresses["bootstrap"]
        pids = [st[c]["pid"] for c in components]
    finally:
        down = subprocess.run(
            [sys.executable, "-m", "zkconsumer", "stack", "down", "--dir", str(d)],
            capture_output=True, text=True, timeout=60)
    assert down.returncode == 0, down.stderr
    assert json.loads(down.stdout)["stopped"] == list(reversed(components))
    for pid in pids:
        wait_until(lambda pid=pid: not Path(f"/proc/{pid}").exists()
                   or "Z" in Path(f"/proc/{pid}/stat").read_text().split(") ")[1][:1],
                   10, f"pid {pid} gone")
    status = subprocess.run(
        [sys.executable, "-m", "zkconsumer", "stack", "status", "--dir", str(d)],
        capture_output=True, text=True, timeout=60)
    assert status.returncode == 1


_HOLD_A_STACK = """
import json, sys, time
from pathlib import Path
from zkconsumer.stack.local import running_stack
with running_stack(sys.argv[1]) as s:
    Path(sys.argv[2]).write_text(json.dumps([s.zookeeper, s.bootstrap]))
    time.sleep(600)
"""


@contextmanager
def _held_stack(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path, str, str]]:
    """A stack up in another Python process (``_HOLD_A_STACK``): that process, the stack's
    directory, its ZooKeeper and bootstrap addresses. Whatever is left is stopped after."""
    directory, ready = tmp_path / "stack", tmp_path / "ready.json"
    proc = subprocess.Popen([sys.executable, "-c", _HOLD_A_STACK, str(directory), str(ready)],
                            stderr=subprocess.PIPE)
    try:
        wait_until(ready.exists, 120, "the stack up")
        zookeeper, bootstrap = json.loads(ready.read_text())
        assert port_open(zookeeper) and port_open(bootstrap)
        yield proc, directory, zookeeper, bootstrap
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        LocalStack(directory).down()  # whatever a failure left running


def test_sigterm_stops_a_running_stack(tmp_path: Path) -> None:
    # Its processes live in their own sessions: SIGTERM to the Python process that holds
    # the stack must still stop them (a killed test run or benchmark leaves nothing behind).
    with _held_stack(tmp_path) as (proc, directory, zookeeper, bootstrap):
        proc.terminate()
        _, err = proc.communicate(timeout=60)
        assert b"KeyboardInterrupt" in err  # stopped through the finally blocks
        assert not port_open(zookeeper) and not port_open(bootstrap)
        assert json.loads((directory / "stack.json").read_text())["procs"] == {}


def test_sigkill_of_the_holder_leaves_no_component_running(tmp_path: Path) -> None:
    # SIGKILL runs no finally block: the components, in their own sessions, must still go
    # (they are tied to the holder), or a killed CI job leaves a java and a broker behind.
    with _held_stack(tmp_path) as (proc, directory, zookeeper, bootstrap):
        procs = json.loads((directory / "stack.json").read_text())["procs"]
        pids = [p["pid"] for p in procs.values()]
        assert len(pids) == 2  # ZooKeeper and Kafka 3.9
        proc.kill()
        proc.communicate()
        wait_until(lambda: not any(_running(pid) for pid in pids), 60,
                   "the components gone after their holder's SIGKILL")
        assert not port_open(zookeeper) and not port_open(bootstrap)


_SPAWN_A_SLEEPER = """
import sys, time
from zkconsumer.stack.local import LocalStack
stack = LocalStack(sys.argv[1], tied=sys.argv[2] == "tied")
print(stack._popen("sleeper", [sys.executable, "-c", "import time; time.sleep(120)"]), flush=True)
time.sleep(600)
"""


def _running(pid: int) -> bool:
    # Not a zombie either (an orphan is reaped by init, but not at once).
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


def _status(pid: int, field: str) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name == field:
            return value.strip()
    raise AssertionError(f"no {field} in /proc/{pid}/status")


@pytest.mark.parametrize("tied", [True, False])
def test_only_a_tied_stacks_processes_end_with_their_parent(tmp_path: Path, tied: bool) -> None:
    # `zkconsumer stack up` leaves its stack running when it exits: only tied stacks end.
    argv = [sys.executable, "-c", _SPAWN_A_SLEEPER, str(tmp_path), "tied" if tied else "free"]
    with reaped(subprocess.Popen(argv, stdout=subprocess.PIPE)) as parent:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        try:
            assert _running(child)
            parent.kill()
            parent.wait()
            if tied:
                wait_until(lambda: not _running(child), 30, "the tied child gone")
            else:
                # The kernel sends the signal of a tied child as it gives it a new parent.
                wait_until(lambda: _status(child, "PPid") != str(parent.pid), 30, "reparented")
                assert _running(child)
                pending = int(_status(child, "ShdPnd"), 16) | int(_status(child, "SigPnd"), 16)
                assert not pending & (1 << (signal.SIGTERM - 1))
        finally:
            if _running(child):
                os.kill(child, signal.SIGKILL)


def test_sigterm_during_stack_up_stops_what_it_started(tmp_path: Path) -> None:
    """`zkconsumer stack up` killed by SIGTERM while it waits (a CI timeout, say) stops
    ZooKeeper and the broker it started (they live in their own sessions)."""
    directory = tmp_path / "stack"
    state = directory / "stack.json"

    def started() -> dict[str, Any] | None:
        try:
            procs: dict[str, Any] = json.loads(state.read_text())["procs"]
        except (OSError, ValueError, KeyError):
            return None
        return procs or None

    try:
        with reaped(subprocess.Popen(
                [sys.executable, "-m", "zkconsumer", "stack", "up", "--dir", str(directory)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE)) as proc:
            procs = wait_until(started, 60, "a component started")
            proc.terminate()
            proc.communicate(timeout=60)
        for p in procs.values():
            wait_until(lambda pid=p["pid"]: not _alive(pid), 30, f"pid {p['pid']} stopped")
    finally:
        LocalStack(directory).down()  # whatever a failure left running


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie of a process we did not start is not ours to reap: it is stopped.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_zookeeper_that_cannot_start_says_why(tmp_path: Path) -> None:
    """ZooKeeper's logback, given no configuration, would log every DEBUG line: the stack
    gives it one (warnings and errors to its log), so the error shows ZooKeeper's reason."""
    import socket

    from zkconsumer.stack.local import StackError

    with socket.create_server(("127.0.0.1", 0)) as taken:
        stack = LocalStack(tmp_path / "stack")
        stack.zk_port = taken.getsockname()[1]
        try:
            with pytest.raises(StackError, match="Address already in use"):
                stack.start("zookeeper", timeout=60)
        finally:
            stack.down()


def test_a_failed_stack_up_leaves_what_was_running_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from zkconsumer._errors import StackError
    from zkconsumer.stack.local import free_port

    directory = tmp_path / "stack"
    first = LocalStack(directory)
    first.zk_port = free_port()
    try:
        first.start("zookeeper", timeout=60)  # someone's stack, half up
        again = LocalStack(directory)

        def no_broker() -> Any:
            raise StackError("no broker here")

        monkeypatch.setattr(again, "_spawn_broker", no_broker)
        with pytest.raises(StackError, match="no broker here"):
            again.up(timeout=60)
        assert again.answering("zookeeper")
        assert list(json.loads((directory / "stack.json").read_text())["procs"]) == [
            "zookeeper"]
    finally:
        LocalStack(directory).down()


_SLEEPER = "import signal, sys, time; {}print('ready', flush=True); time.sleep(60)"


@contextmanager
def _sleeper(ignore_sigterm: bool = False, **popen: Any) -> Iterator[subprocess.Popen[str]]:
    """A process standing in for a component; its command line holds 'zkc-sleeper'."""
    ignore = "signal.signal(signal.SIGTERM, signal.SIG_IGN); " if ignore_sigterm else ""
    with reaped(subprocess.Popen([sys.executable, "-c", _SLEEPER.format(ignore), "zkc-sleeper"],
                                 stdout=subprocess.PIPE, text=True, **popen)) as proc:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        yield proc


def test_stop_kills_a_component_that_left_its_process_group(tmp_path: Path) -> None:
    from zkconsumer.stack.local import _Proc

    stack = LocalStack(tmp_path / "stack")
    stack.dir.mkdir()
    with _sleeper(ignore_sigterm=True) as proc:  # in our group: no group of its own pid
        stack.procs["bridge"] = _Proc(proc.pid, "zkc-sleeper")
        stack.stop("bridge", timeout=0.2)  # SIGTERM ignored: SIGKILL
        assert not stack.running_proc(_Proc(proc.pid, "zkc-sleeper"))
    assert json.loads(stack.state_file.read_text())["procs"] == {}


def test_down_goes_on_past_a_component_that_will_not_stop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from zkconsumer._errors import StackError
    from zkconsumer.stack import local as _stack
    from zkconsumer.stack.local import _Proc

    monkeypatch.setattr(_stack, "KILL_WAIT_S", 0.2)
    stack = LocalStack(tmp_path / "stack")
    stack.dir.mkdir()
    with _sleeper(start_new_session=True) as zookeeper, \
            _sleeper(start_new_session=True) as broker, \
            _sleeper(start_new_session=True) as bridge:
        for name, proc in (("zookeeper", zookeeper), ("broker", broker), ("bridge", bridge)):
            stack.procs[name] = _Proc(proc.pid, "zkc-sleeper")
        real = stack.running_proc
        # Unkillable (a process stuck in the kernel): it still runs after SIGKILL.
        monkeypatch.setattr(stack, "running_proc",
                            lambda p: p.pid == broker.pid or real(p))
        failed: list[BaseException] = []

        def down() -> None:
            try:
                stack.down(timeout=0.2)
            except BaseException as e:  # noqa: BLE001 - checked below
                failed.append(e)

        thread = threading.Thread(target=down, daemon=True)
        thread.start()
        thread.join(10)
        assert not thread.is_alive(), "down() waits for ever after SIGKILL"
        assert len(failed) == 1 and isinstance(failed[0], StackError), failed
        assert f"broker (pid {broker.pid}) still runs" in str(failed[0])
        wait_until(lambda: zookeeper.poll() is not None and bridge.poll() is not None, 10,
                   "the others stopped")
        assert list(json.loads(stack.state_file.read_text())["procs"]) == ["broker"]


@pytest.mark.parametrize("content", ["{", '{"zk_port": 1}', '{"zk_port": 1, "broker_port": 2, '
                                     '"procs": {"bridge": {"pid": "x"}}}'])
def test_a_corrupt_stack_json_is_one_line(tmp_path: Path, content: str) -> None:
    from zkconsumer._errors import StackError

    directory = tmp_path / "stack"
    directory.mkdir()
    (directory / "stack.json").write_text(content)
    with pytest.raises(StackError, match="stack.json is not a stack's state"):
        LocalStack(directory)
    down = subprocess.run(
        [sys.executable, "-m", "zkconsumer", "stack", "down", "--dir", str(directory)],
        capture_output=True, text=True, timeout=60)
    assert down.returncode == 2
    assert "Traceback" not in down.stderr
    assert len(down.stderr.strip().splitlines()) == 1
    assert "stack.json is not a stack's state" in down.stderr


def _path_with(tmp_path: Path, *tools: str) -> str:
    """A PATH holding only ``tools`` (links to this machine's)."""
    directory = tmp_path / "bin"
    directory.mkdir()
    for tool in tools:
        found = shutil.which(tool)
        assert found, tool
        (directory / tool).symlink_to(found)
    return str(directory)


@pytest.mark.parametrize(("tools", "needs"), [
    ((), "needs Java 17 or later (java) to run ZooKeeper and Kafka: install a Java 17+ runtime"),
    (("java",), "needs Maven (mvn) to fetch the Kafka and ZooKeeper jars from Maven Central"),
])
def test_stack_up_without_java_or_maven_says_what_to_install(
    tmp_path: Path, tools: tuple[str, ...], needs: str,
) -> None:
    """A first `stack up` (no jars yet) on a machine without Java, or without Maven: one
    line, before anything starts."""
    env = {**os.environ, "PATH": _path_with(tmp_path, *tools),
           "ZKCONSUMER_JVM_DIR": str(tmp_path / "jvm")}
    directory = tmp_path / "stack"
    up = subprocess.run(
        [sys.executable, "-m", "zkconsumer", "stack", "up", "--dir", str(directory)],
        env=env, capture_output=True, text=True, timeout=60)
    assert up.returncode == 2, up.stderr
    assert up.stderr.startswith(f"zkconsumer stack: {needs}"), up.stderr
    assert len(up.stderr.strip().splitlines()) == 1 and "Debian: apt-get install" in up.stderr
    assert up.stdout == ""
    assert not (directory / "zookeeper.log").exists()  # nothing started


def test_down_forgets_the_ports_so_the_next_up_picks_free_ones(tmp_path: Path) -> None:
    """The ports of a stack that is down were kept and reused by the next `up`: one taken by
    someone meanwhile made every later `up` fail the same way."""
    (tmp_path / "stack").mkdir()
    stack = LocalStack(tmp_path / "stack")
    stack.zk_port, stack.broker_port = 41325, 55717  # a stack's, once up
    stack._save()
    LocalStack(tmp_path / "stack").down()  # nothing running
    state = json.loads((tmp_path / "stack" / "stack.json").read_text())
    assert (state["zk_port"], state["broker_port"]) == (0, 0)


def test_up_starts_zookeeper_as_empty_as_the_broker(tmp_path: Path) -> None:
    """The broker keeps nothing across down/up: ZooKeeper kept a group's offsets, and a topic
    created again resumed from them, skipping messages."""
    from tests.support import started_zk

    directory = tmp_path / "stack"
    offset = zp.offset_path("g", "t", 0)
    try:
        first = LocalStack(directory)
        first.up()
        with started_zk(first.zookeeper) as client:
            client.create(offset, zp.encode_offset(42), makepath=True)
        first.down()
        again = LocalStack(directory)
        again.up()
        with started_zk(again.zookeeper) as client:
            assert client.exists(offset) is None
            assert client.exists(zp.BROKER_IDS)  # the bridge made its paths again
    finally:
        LocalStack(directory).down()


def test_up_and_down_on_a_directory_in_use_fail_at_once(tmp_path: Path) -> None:
    """Two `stack up` on one directory both failed and left a stale stack.json."""
    import fcntl

    from zkconsumer._errors import StackError

    directory = tmp_path / "stack"
    directory.mkdir()
    with open(directory / "stack.lock", "w") as held:  # what a running `up` holds
        fcntl.flock(held, fcntl.LOCK_EX)
        held.write("4242\n")
        held.flush()
        try:
            started = time.monotonic()
            for action in (LocalStack(directory).up, LocalStack(directory).down):
                with pytest.raises(StackError, match=r"another `stack up` or `stack down` "
                                   r"\(pid 4242\) is using"):
                    action()
            assert time.monotonic() - started < 5
            assert not (directory / "stack.json").exists()
        finally:
            fcntl.flock(held, fcntl.LOCK_UN)
            LocalStack(directory).down()  # whatever a failure left running
