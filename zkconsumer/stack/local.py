"""The local stack: a real ZooKeeper and a real Kafka broker (with the bridge where needed).

``zkconsumer stack up --dir DIR [--broker KIND]`` and the test fixtures use :class:`LocalStack`:

- ZooKeeper 3.8 (``org.apache.zookeeper:zookeeper`` from Maven Central) run with ``java``
  (``ZooKeeperServerMain``) on a free loopback port, its data in ``DIR/zookeeper``, its log
  in ``DIR/zookeeper.log``;
- the broker, one of :data:`BROKERS`:

  - ``kafka`` (the default): Apache Kafka 3.9 in ZooKeeper mode (``kafka.Kafka``), the broker
    the legacy consumer's users run. It registers itself in ZooKeeper (``/brokers/ids``,
    ``/brokers/topics``, partition states), so no bridge runs;
  - ``kraft``: Apache Kafka 4 in KRaft mode, one process as broker and controller, its
    storage formatted first. It writes nothing to ZooKeeper, so the bridge
    (``python -m zkconsumer bridge``) registers it there;

  the broker's data in ``DIR/broker``, its log in ``DIR/broker.log``.

The jars come from Maven Central: ``up`` first has Maven copy the classpaths it needs and does
not have yet (:mod:`zkconsumer.stack.classpaths`: into the per-user cache, or ``.jvm/`` in a
checkout), so a stack needs only Java 17 or later and Maven.

Processes run in their own sessions, so they outlive the command that started them; their
pids and ports are in ``DIR/stack.json``. ``down`` stops only processes recorded there whose
command line still matches, never a stranger that reused a pid; it tries every component and
then raises :class:`StackError` naming those that would not stop. A component is ready once
its own process listens on its port (another listener there does not count), and the
broker (or the bridge) once ZooKeeper holds a registration naming this stack's broker. A
failed ``up`` stops only what it started itself, and says in one line why the component did
not start and where its log is. ``up`` and ``down`` hold an exclusive lock on
``DIR/stack.lock`` (``flock``): another one on the same directory meanwhile fails at once
with :class:`StackError`. An ``up`` that starts both ZooKeeper and the broker starts them
empty: the broker's data and ZooKeeper's describe each other (the cluster id, topics,
offsets), and one kept without the other would make the broker refuse to start or a
consumer skip messages. Components can be stopped and started one at a time on the same
ports, keeping their data (the fault tests use this).
"""

from __future__ import annotations

import base64
import ctypes
import errno
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zkconsumer._errors import StackError
from zkconsumer.broker.clients import kafka_admin
from zkconsumer.stack.classpaths import ZOOKEEPER_CLASSPATH, ZOOKEEPER_MAIN, ensure, jvm_dir
from zkconsumer.stack.classpaths import classpath as jvm_classpath
from zkconsumer.zk import paths as zp
from zkconsumer.zk.session import connect

#: The JVM options ZooKeeper runs with: a small heap is plenty for one stack's groups.
ZOOKEEPER_JVM_OPTIONS = ("-Xmx256m", "-XX:+UseSerialGC")
#: Every component a stack can have, in start order.
COMPONENTS = ("zookeeper", "broker", "bridge")
#: The brokers a stack can run; the first is the default.
BROKERS = ("kafka", "kraft")
DEFAULT_BROKER = BROKERS[0]
#: The classpath (a directory under ``.jvm/``, see :func:`jvm_classpath`) each JVM broker runs.
BROKER_CLASSPATHS = {"kafka": "kafka-3.9", "kraft": "kafka-4"}
#: The JVM's heap and threads for a broker on a 2-core, 24 GiB machine: a 1 GiB heap is
#: plenty for the suite and the benchmarks; fewer GC and compiler threads than cores.
BROKER_JVM_OPTIONS = (
    "-Xms256m", "-Xmx1g", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
    "-XX:ParallelGCThreads=2", "-XX:ConcGCThreads=1", "-XX:CICompilerCount=2",
    "-Djava.awt.headless=true",
)
#: Broker settings for one broker on loopback: replication factors of 1 for the internal
#: topics, no initial rebalance delay (``group.initial.rebalance.delay.ms``, 3 s by default:
#: it holds a new group's first assignment so that members starting together join one
#: generation; ``zkconsumer compare`` measures the time to a first assignment and the
#: migration tests start one member at a time, so 0 measures the protocol, not the delay),
#: few threads, and a small log cleaner buffer (128 MiB by default).
BROKER_SETTINGS = (
    "num.partitions=1",
    "default.replication.factor=1",
    "offsets.topic.replication.factor=1",
    "offsets.topic.num.partitions=4",
    "transaction.state.log.replication.factor=1",
    "transaction.state.log.min.isr=1",
    "group.initial.rebalance.delay.ms=0",
    # Kafka's floor is 6 s; the suite and `zkconsumer compare` run modern members with the
    # short session timeouts their ZooKeeper members use (ZooKeeper's floor here is 1 s).
    "group.min.session.timeout.ms=1000",
    "num.network.threads=2",
    "num.io.threads=4",
    "background.threads=4",
    "num.recovery.threads.per.data.dir=1",
    "log.cleaner.threads=1",
    "log.cleaner.dedupe.buffer.size=16777216",
    "delete.topic.enable=true",
    # One broker: there is no other to hand leadership to before it stops, and with
    # ZooKeeper gone first (both told to stop at once) the handover retried for minutes.
    "controlled.shutdown.enable=false",
    "auto.create.topics.enable=true",
)
#: Kafka 3.9's logging (reload4j) to the broker's log: warnings, and the line saying it
#: started (how long a start took is read there).
_LOG4J_PROPERTIES = """\
log4j.rootLogger=WARN, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.server.KafkaServer=INFO
"""
#: Kafka 4's logging (log4j2), the same.
_LOG4J2_PROPERTIES = """\
status = warn
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.stdout.ref = STDOUT
logger.server.name = kafka.server.KafkaRaftServer
logger.server.level = info
"""
#: ZooKeeper's logging (logback, which its classpath brings; without a configuration it logs
#: every DEBUG line) to its log: warnings and errors, so a failed start says why, but not the
#: warning every start gives that maxCnxns is not set (0, no limit, is what the stack wants).
_LOGBACK_XML = """\
<configuration>
  <appender name="STDOUT" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>[%d] %p %m \\(%c\\)%n</pattern></encoder>
  </appender>
  <logger name="org.apache.zookeeper.server.ServerCnxnFactory" level="ERROR"/>
  <root level="WARN"><appender-ref ref="STDOUT"/></root>
</configuration>
"""
#: How long :meth:`LocalStack.stop` waits for a process to go after SIGKILL.
KILL_WAIT_S = 5.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def zk_four_letter(hostport: str, word: str = "ruok", timeout: float = 1.0) -> str:
    """Send a ZooKeeper four-letter word; '' when nothing answers."""
    host, _, port = hostport.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as s:
            s.sendall(word.encode())
            chunks = []
            while True:
                b = s.recv(4096)
                if not b:
                    break
                chunks.append(b)
        return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


def port_open(hostport: str, timeout: float = 0.5) -> bool:
    host, _, port = hostport.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return True
    except OSError:
        return False


def listens(pid: int, port: int) -> bool:
    """Whether process ``pid`` holds a TCP socket listening on ``port`` (Linux ``/proc``).

    True when this cannot be told (no ``/proc/net/tcp``): the check is then the port alone.
    """
    inodes: set[str] = set()
    readable = False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        readable = True
        for line in lines:
            fields = line.split()
            # local address "HEX_IP:HEX_PORT", state 0A = LISTEN, inode
            if len(fields) > 9 and fields[3] == "0A" and int(
                    fields[1].rpartition(":")[2], 16) == port:
                inodes.add(fields[9])
    if not readable:
        return True
    if not inodes:
        return False
    fd_dir = f"/proc/{pid}/fd"
    try:
        fds = os.listdir(fd_dir)
    except OSError:
        return False
    for fd in fds:
        try:
            target = os.readlink(f"{fd_dir}/{fd}")
        except OSError:
            continue
        if target.startswith("socket:[") and target[8:-1] in inodes:
            return True
    return False


def java_major(java: str) -> int:
    """The major version of ``java`` (17 for "17.0.15"), 0 when it cannot be told."""
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return 0
    for token in out.stderr.replace('"', " ").split():
        head = token.split(".")[0].split("-")[0].split("+")[0]
        if head.isdigit() and token[0].isdigit():
            major = int(head)
            return int(token.split(".")[1]) if major == 1 and "." in token else major
    return 0


def find_java(minimum: int) -> str:
    """``java`` on PATH, or StackError naming what to install; too old also fails."""
    java = shutil.which("java")
    if java is None:
        raise StackError(f"needs Java {minimum} or later (java) to run ZooKeeper and Kafka: "
                         f"install a Java {minimum}+ runtime (Debian: apt-get install "
                         "default-jre-headless), then run again")
    major = java_major(java)
    if 0 < major < minimum:
        raise StackError(f"{java} is Java {major}; ZooKeeper and Kafka need Java {minimum} or "
                         "later: install a newer one (Debian: apt-get install "
                         "default-jre-headless) or put it first on PATH")
    return java


#: How each broker is named in a description of the stack.
BROKER_NAMES = {"kafka": "Apache Kafka {} (ZooKeeper mode)",
                "kraft": "Apache Kafka {} (KRaft mode, registered by the bridge)"}


def broker_version(kind: str) -> str:
    """The version of ``kind``'s broker that a stack would run (its Kafka jar's), '?' when
    its classpath is not resolved."""
    for jar in sorted((jvm_dir() / BROKER_CLASSPATHS[kind]).glob("kafka_2.*-*.jar")):
        return jar.stem.rpartition("-")[2]
    return "?"


def zookeeper_version() -> str:
    """The version of ZooKeeper that a stack would run (its jar's), '?' when its classpath is
    not resolved."""
    for jar in sorted((jvm_dir() / ZOOKEEPER_CLASSPATH).glob("zookeeper-[0-9]*.jar")):
        return jar.stem.partition("-")[2]
    return "?"


def describe(kind: str) -> str:
    """One line naming the software a local stack of ``kind`` runs."""
    return (BROKER_NAMES[kind].format(broker_version(kind))
            + f", ZooKeeper {zookeeper_version()}")


#: What a component's log says when it did not start, most telling first: the first line
#: of the log that contains one of these is the cause :meth:`LocalStack.start` reports.
_CAUSES = (
    "Address already in use", "UnsupportedClassVersionError", "Could not find or load main",
    "ClassNotFoundException", "NoClassDefFoundError", "ConfigException", "InconsistentClusterId",
    "Exception", "Error", "error:", "ERROR",
)


def failure_cause(log_text: str) -> str:
    """The line of a component's log that best says why it did not start, or ''."""
    lines = [line.strip() for line in log_text.splitlines() if line.strip()]
    for needle in _CAUSES:
        for line in lines:
            if needle in line:
                return line[:300]
    return lines[-1][:300] if lines else ""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child still answers kill(0); reap it if it is ours.
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    except ChildProcessError:
        stat = Path(f"/proc/{pid}/stat")
        try:
            return stat.read_text().split(") ", 1)[1][0] != "Z"
        except (OSError, IndexError):
            return False


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


#: prctl(2) option: the signal a child gets when the thread that started it ends.
_PR_SET_PDEATHSIG = 1


def _tie_to_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` that has the child get SIGTERM when its parent dies (Linux), or None
    where prctl is not there. Looked up before the fork: the child only calls it."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def tie() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before prctl: no signal will come
            os.kill(os.getpid(), signal.SIGTERM)

    return tie


@dataclass
class _Proc:
    pid: int
    marker: str  # a string the process's command line must contain to be ours


class LocalStack:
    """ZooKeeper + broker (+ bridge) under one directory; see the module docstring.

    ``broker``: one of :data:`BROKERS`; None takes the one recorded in ``stack.json`` (a
    stack started earlier), else :data:`DEFAULT_BROKER`. Another than a running stack's is
    a StackError (``down`` it first).

    ``zk_config`` (extra ``zoo.cfg`` lines) and ``zk_jvm_options`` (e.g. a JAAS
    ``-Djava.security.auth.login.config=...``) set up a secured ZooKeeper; they apply when
    this object spawns it and are not recorded in ``stack.json``.

    ``tied``: the components get SIGTERM when the thread that started them ends, also when
    the process is killed with SIGKILL and cannot stop them (Linux). For a stack that lives
    as long as one ``with`` block or one program (the test suite's, a benchmark's, the
    demo's); not for ``zkconsumer stack up``, whose stack outlives the command.

    ``progress``: told one line for each classpath ``up`` has Maven copy (a first run).
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        zk_config: Sequence[str] = (),
        zk_jvm_options: Sequence[str] = (),
        tied: bool = False,
        broker: str | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self.dir = Path(directory).absolute()
        self.tied = tied
        self.progress = progress
        if broker is not None and broker not in BROKERS:
            raise StackError(f"unknown broker {broker!r}: choose one of {', '.join(BROKERS)}")
        if self.dir.exists() and not self.dir.is_dir():
            raise StackError(f"{self.dir} is not a directory: give the stack a directory of "
                             "its own")
        self.zk_config = list(zk_config)
        self.zk_jvm_options = list(zk_jvm_options)
        self.state_file = self.dir / "stack.json"
        self.zk_port = 0
        self.broker_port = 0
        self.controller_port = 0  # kraft: the controller's listener
        self.broker_kind = broker or DEFAULT_BROKER
        self.procs: dict[str, _Proc] = {}
        # Children started by this object: poll() is exact, unlike /proc, which can be read
        # mid-exec. Processes from another invocation are checked by pid and command line.
        self._children: dict[int, subprocess.Popen[bytes]] = {}
        if self.state_file.exists():
            self._load()
            if broker is not None and broker != self.broker_kind:
                if self.procs:
                    raise StackError(
                        f"{self.dir} holds a {self.broker_kind} stack: run `zkconsumer stack "
                        f"down --dir {self.dir}` before starting a {broker} one there")
                self.broker_kind = broker
                self.zk_port = self.broker_port = self.controller_port = 0

    @property
    def components(self) -> tuple[str, ...]:
        """This stack's components in start order: the bridge only where the broker does not
        register itself in ZooKeeper."""
        if self.broker_kind == "kafka":
            return ("zookeeper", "broker")
        return COMPONENTS

    # -- addresses ------------------------------------------------------------------------------
    @property
    def zookeeper(self) -> str:
        return f"127.0.0.1:{self.zk_port}"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    def addresses(self) -> dict[str, str]:
        return {"zookeeper": self.zookeeper, "bootstrap": self.bootstrap}

    # -- persistence ----------------------------------------------------------------------------
    def _load(self) -> None:
        try:
            data = json.loads(self.state_file.read_text())
            zk_port = int(data["zk_port"])
            broker_port = int(data["broker_port"])
            controller_port = int(data.get("controller_port", 0))
            kind = str(data.get("broker", DEFAULT_BROKER))
            if kind not in BROKERS:
                # A stack of an earlier release (Tansu): `down` still stops its processes.
                kind = DEFAULT_BROKER
            procs = {str(k): _Proc(int(v["pid"]), str(v["marker"]))
                     for k, v in data["procs"].items()}
        except OSError as e:
            raise StackError(f"cannot read {self.state_file}: {e}") from None
        except (ValueError, LookupError, TypeError, AttributeError) as e:
            # A truncated or hand-edited file: one clear line, not a traceback.
            raise StackError(
                f"{self.state_file} is not a stack's state ({type(e).__name__}: {e}); stop "
                "what it started by hand and remove it"
            ) from None
        self.zk_port, self.broker_port, self.procs = zk_port, broker_port, procs
        self.controller_port, self.broker_kind = controller_port, kind

    def _save(self, ports: bool = True) -> None:
        data = {
            "zk_port": self.zk_port if ports else 0,
            "broker_port": self.broker_port if ports else 0,
            "controller_port": self.controller_port if ports else 0,
            "broker": self.broker_kind,
            "procs": {k: {"pid": p.pid, "marker": p.marker} for k, p in self.procs.items()},
            **(self.addresses() if ports else {}),
        }
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        tmp.replace(self.state_file)

    # -- whole stack ----------------------------------------------------------------------------
    @contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold ``DIR/stack.lock`` exclusively, or StackError at once: two ``up`` on one
        directory each started components the other then took for its own, and both failed
        leaving a stale stack.json. Inside, the state is read again: the other process may
        have changed it since this object was made."""
        self.dir.mkdir(parents=True, exist_ok=True)
        lock = self.dir / "stack.lock"
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)  # not inherited by the components
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise StackError(f"cannot lock {lock}: {e}") from None
                holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
                raise StackError(f"another `stack up` or `stack down` (pid {holder}) is using "
                                 f"{self.dir}; try again when it has finished") from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            if self.state_file.exists():
                self._load()
            yield
        finally:
            os.close(fd)  # releases the lock

    def up(self, timeout: float = 60.0) -> dict[str, str]:
        """Start whatever is not running; return when everything answers."""
        with self._locked():
            return self._up(timeout)

    def _up(self, timeout: float) -> dict[str, str]:
        if not self.running("zookeeper") and not self.running("broker"):
            # The broker comes back empty: ZooKeeper must too (see the module docstring). A
            # bridge that outlived them goes first: an empty ZooKeeper refuses a session that
            # has seen a later zxid than its own, so it would retry for ever, registering
            # nothing; started again below, it makes a new session.
            if self.running("bridge"):
                self.stop("bridge")
            shutil.rmtree(self.dir / "zookeeper" / "data", ignore_errors=True)
            shutil.rmtree(self.dir / "broker", ignore_errors=True)
        self._prepare([name for name in self.components if not self.running(name)])
        self._pick_ports()
        started: list[str] = []
        try:
            for name in self.components:
                if not self.running(name):
                    started.append(name)
                    self.start(name, timeout=timeout)
        except BaseException:
            # Only what this call started: components already running (an earlier `up`)
            # are someone's stack and stay up.
            for name in reversed(started):
                try:
                    self.stop(name)
                except StackError:
                    pass  # the error that matters is the one being raised
            if not self.procs:
                # Nothing left running: ports forgotten, as by `down`. One taken by another
                # process (the likely cause) would make every later `up` fail the same way.
                self.zk_port = self.broker_port = self.controller_port = 0
                self._save(ports=False)
            raise
        return self.addresses()

    def _prepare(self, names: Sequence[str]) -> None:
        """Java, and the classpaths of the JVM components among ``names`` (Maven copies those
        missing), before anything starts: a first run without Java or Maven fails in one
        line saying what to install, not half-way."""
        wanted = [ZOOKEEPER_CLASSPATH] if "zookeeper" in names else []
        if "broker" in names:
            wanted.append(BROKER_CLASSPATHS[self.broker_kind])
        if wanted:
            find_java(17)
            ensure(wanted, self.progress)

    def _pick_ports(self) -> None:
        """Free ports for whatever has none yet, all different."""
        taken = {self.zk_port, self.broker_port, self.controller_port} - {0}
        for attr in ("zk_port", "broker_port", "controller_port"):
            if attr == "controller_port" and self.broker_kind != "kraft":
                continue
            while not getattr(self, attr):
                port = free_port()
                if port not in taken:
                    setattr(self, attr, port)
                    taken.add(port)

    def down(self, timeout: float = 15.0) -> list[str]:
        """Stop what this stack started (bridge first, so it can deregister cleanly). Every
        component is tried; StackError afterwards names those that would not stop (they stay
        recorded in stack.json, for another try)."""
        if not self.dir.is_dir():
            return []  # nothing was ever started here
        with self._locked():
            return self._down(timeout)

    def _down(self, timeout: float) -> list[str]:
        stopped = []
        failed: list[str] = []
        for name in reversed(COMPONENTS):
            if name in self.procs:
                try:
                    self.stop(name, timeout=timeout)
                except StackError as e:
                    failed.append(str(e))
                    continue
                stopped.append(name)
        if self.state_file.exists():
            # Once nothing is left running, the ports are not recorded: the next `up`
            # (another process) picks free ones, where the old ones, taken by someone
            # meanwhile, would make every later `up` fail the same way. This object keeps
            # them (its addresses stay).
            self._save(ports=bool(self.procs))
        if failed:
            raise StackError("; ".join(failed))
        return stopped

    def status(self) -> dict[str, Any]:
        address = {"zookeeper": self.zookeeper if self.zk_port else None,
                   "broker": self.bootstrap if self.broker_port else None, "bridge": None}
        out: dict[str, Any] = {}
        for name in self.components:
            proc = self.procs.get(name)
            out[name] = {
                "address": address[name],
                "pid": proc.pid if proc else None,
                "running": self.running(name),
                "answering": self.answering(name),
            }
        return out

    # -- one component --------------------------------------------------------------------------
    def running(self, name: str) -> bool:
        proc = self.procs.get(name)
        return bool(proc and self.running_proc(proc))

    def answering(self, name: str) -> bool:
        if not self.running(name):
            return False
        # The listener must be our process's: another one on the port (a component of a
        # stack whose state was lost) would answer while ours fails to bind and exits.
        if name == "zookeeper":
            return (zk_four_letter(self.zookeeper) == "imok"
                    and listens(self.procs[name].pid, self.zk_port))
        if name == "broker":
            if not (port_open(self.bootstrap)
                    and listens(self.procs[name].pid, self.broker_port)):
                return False
            # Kafka in ZooKeeper mode serves requests once it has registered itself.
            return self.broker_kind != "kafka" or self._broker_registered()
        return self._broker_registered()

    def start(self, name: str, timeout: float = 60.0) -> None:
        if name not in self.components:
            raise StackError(f"unknown stack component {name!r} (a {self.broker_kind} stack "
                             f"has {', '.join(self.components)})")
        self.dir.mkdir(parents=True, exist_ok=True)
        self._pick_ports()  # none yet after a failed `up` or a `down` forgot them
        starter = {"zookeeper": self._spawn_zookeeper, "broker": self._spawn_broker,
                   "bridge": self._spawn_bridge}[name]
        self.procs[name] = starter()
        self._save()
        deadline = time.monotonic() + timeout
        while not self.answering(name):
            if not self.running(name):
                raise StackError(f"{self._label(name)} exited at start: {self._cause(name)} "
                                 f"(log: {self._log(name)})")
            if time.monotonic() > deadline:
                raise StackError(f"{self._label(name)} did not answer within {timeout:.0f}s: "
                                 f"{self._cause(name)} (log: {self._log(name)})")
            time.sleep(0.1)
        while name == "broker" and not self._groups_served():
            if time.monotonic() > deadline:
                raise StackError(f"{self._label(name)} did not coordinate groups within "
                                 f"{timeout:.0f}s (log: {self._log(name)})")
            time.sleep(0.2)

    def _groups_served(self) -> bool:
        """Whether the broker coordinates groups yet. A new cluster makes its offsets topic
        at the first FindCoordinator, and answers COORDINATOR_NOT_AVAILABLE (then
        COORDINATOR_LOAD_IN_PROGRESS) until it is ready: a tool or test starting at once
        failed on it."""
        from kafka.errors import GroupIdNotFoundError

        try:
            admin = kafka_admin(bootstrap_servers=self.bootstrap, request_timeout_ms=5000,
                                client_id="zkconsumer-stack")
        except Exception:  # noqa: BLE001 - not answering yet
            return False
        try:
            error = admin.describe_groups(["zkconsumer-stack"])["zkconsumer-stack"]["error"]
            # Kafka 4 says it does not know the group; Kafka 3.9 describes it as Dead.
            return not error or str(error).startswith(f"[Error {GroupIdNotFoundError.errno}]")
        except Exception:  # noqa: BLE001 - not coordinating yet
            return False
        finally:
            admin.close()

    def _label(self, name: str) -> str:
        return f"the {self.broker_kind} broker" if name == "broker" else name

    def _cause(self, name: str) -> str:
        try:
            text = self._log(name).read_text(errors="replace")
        except OSError:
            text = ""
        return failure_cause(text) or "its log says nothing"

    def stop(self, name: str, sig: int = signal.SIGTERM, timeout: float = 15.0) -> None:
        """Signal ``name``'s process group with ``sig``, then SIGKILL after ``timeout``;
        StackError if it is still running :data:`KILL_WAIT_S` later (it stays recorded)."""
        proc = self.procs.get(name)
        if proc is None:
            return
        if self.running_proc(proc):
            self._signal(name, proc, sig)
            deadline = time.monotonic() + timeout
            while self.running_proc(proc) and time.monotonic() < deadline:
                time.sleep(0.05)
            if self.running_proc(proc):
                self._signal(name, proc, signal.SIGKILL)
                deadline = time.monotonic() + KILL_WAIT_S
                while self.running_proc(proc):
                    if time.monotonic() > deadline:
                        raise StackError(f"{name} (pid {proc.pid}) still runs {KILL_WAIT_S:g} s "
                                         "after SIGKILL")
                    time.sleep(0.05)
        del self.procs[name]
        self._save()

    def _signal(self, name: str, proc: _Proc, sig: int) -> None:
        """``sig`` to the process group the component leads; to the process alone when that
        group is gone (it exited meanwhile, or left its group)."""
        for kill in (os.killpg, os.kill):
            try:
                kill(proc.pid, sig)
                return
            except ProcessLookupError:
                pass
            except PermissionError as e:
                raise StackError(f"cannot stop {name} (pid {proc.pid}): {e}") from None

    def running_proc(self, proc: _Proc) -> bool:
        child = self._children.get(proc.pid)
        if child is not None:
            return child.poll() is None
        return _alive(proc.pid) and proc.marker in _cmdline(proc.pid)

    # -- spawning -------------------------------------------------------------------------------
    def _log(self, name: str) -> Path:
        return self.dir / f"{name}.log"

    def _popen(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> int:
        with open(self._log(name), "ab") as logf:
            p = subprocess.Popen(
                argv, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, cwd=self.dir, env=env,
                preexec_fn=_tie_to_parent() if self.tied else None,
            )
        self._children[p.pid] = p
        return p.pid

    def _spawn_zookeeper(self) -> _Proc:
        java = find_java(17)
        zkdir = self.dir / "zookeeper"
        (zkdir / "data").mkdir(parents=True, exist_ok=True)
        cfg = zkdir / "zoo.cfg"
        # tickTime 500 allows session timeouts from 1 s (2 ticks) to 60 s.
        cfg.write_text(
            "tickTime=500\n"
            f"dataDir={zkdir / 'data'}\n"
            f"clientPort={self.zk_port}\n"
            "clientPortAddress=127.0.0.1\n"
            "minSessionTimeout=1000\n"
            "maxSessionTimeout=60000\n"
            "maxClientCnxns=0\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,srvr,stat,mntr,cons\n"
            + "".join(f"{line}\n" for line in self.zk_config)
        )
        logback = zkdir / "logback.xml"
        logback.write_text(_LOGBACK_XML)
        argv = [java, *ZOOKEEPER_JVM_OPTIONS, f"-Dzkconsumer.stack={self.dir}",
                f"-Dlogback.configurationFile={logback}", *self.zk_jvm_options,
                "-cp", jvm_classpath(ZOOKEEPER_CLASSPATH), ZOOKEEPER_MAIN, str(cfg)]
        # Markers name this stack (its directory, its ports): a pid reused by another
        # process, even another stack's, is never taken for ours and never signalled.
        return _Proc(self._popen("zookeeper", argv), f"-Dzkconsumer.stack={self.dir} ")

    def _spawn_broker(self) -> _Proc:
        return self._spawn_kafka() if self.broker_kind == "kafka" else self._spawn_kraft()

    def _broker_dir(self) -> Path:
        directory = self.dir / "broker"
        (directory / "data").mkdir(parents=True, exist_ok=True)
        return directory

    def _kafka_properties(self, lines: Sequence[str]) -> Path:
        """``DIR/broker/server.properties``: ``lines``, this stack's listener and data
        directory, then :data:`BROKER_SETTINGS`."""
        directory = self._broker_dir()
        url = f"PLAINTEXT://127.0.0.1:{self.broker_port}"
        cfg = directory / "server.properties"
        cfg.write_text("".join(f"{line}\n" for line in (
            *lines, f"advertised.listeners={url}", f"log.dirs={directory / 'data'}",
            *BROKER_SETTINGS)))
        return cfg

    def _kafka_argv(self, classpath: str, main: str, *args: str,
                    logging: Sequence[str] = ()) -> list[str]:
        java = find_java(17)
        return [java, *BROKER_JVM_OPTIONS, f"-Dzkconsumer.broker={self.dir}", *logging,
                "-cp", jvm_classpath(classpath), main, *args]

    def _spawn_kafka(self) -> _Proc:
        """Kafka 3.9 in ZooKeeper mode: broker 0, registering itself in this ZooKeeper."""
        cfg = self._kafka_properties([
            "broker.id=0",
            f"zookeeper.connect={self.zookeeper}",
            f"listeners=PLAINTEXT://127.0.0.1:{self.broker_port}",
        ])
        log4j = self._broker_dir() / "log4j.properties"
        log4j.write_text(_LOG4J_PROPERTIES)
        argv = self._kafka_argv(BROKER_CLASSPATHS["kafka"], "kafka.Kafka", str(cfg),
                                logging=[f"-Dlog4j.configuration=file:{log4j}"])
        return _Proc(self._popen("broker", argv), f"-Dzkconsumer.broker={self.dir} ")

    def _spawn_kraft(self) -> _Proc:
        """Kafka 4 in KRaft mode: node 1 as broker and controller; storage formatted first
        (once: a restart keeps its data)."""
        cfg = self._kafka_properties([
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.voters=1@127.0.0.1:{self.controller_port}",
            f"listeners=PLAINTEXT://127.0.0.1:{self.broker_port},"
            f"CONTROLLER://127.0.0.1:{self.controller_port}",
            "controller.listener.names=CONTROLLER",
            "inter.broker.listener.name=PLAINTEXT",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        ])
        log4j = self._broker_dir() / "log4j2.properties"
        log4j.write_text(_LOG4J2_PROPERTIES)
        logging = [f"-Dlog4j2.configurationFile={log4j}"]
        classpath = BROKER_CLASSPATHS["kraft"]
        if not (self._broker_dir() / "data" / "meta.properties").exists():
            self._format_kraft_storage(classpath, cfg, logging)
        argv = self._kafka_argv(classpath, "kafka.Kafka", str(cfg), logging=logging)
        return _Proc(self._popen("broker", argv), f"-Dzkconsumer.broker={self.dir} ")

    def _format_kraft_storage(self, classpath: str, cfg: Path, logging: list[str]) -> None:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        # "--cluster-id=ID": an id starting with "-" (one in 64) is not taken for a flag.
        argv = self._kafka_argv(classpath, "kafka.tools.StorageTool", "format",
                                f"--cluster-id={cluster_id}", "-c", str(cfg), logging=logging)
        with open(self._log("broker"), "ab") as logf:
            done = subprocess.run(argv, stdout=logf, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, cwd=self.dir, timeout=120)
        if done.returncode != 0:
            raise StackError(f"formatting the kraft broker's storage failed: "
                             f"{self._cause('broker')} (log: {self._log('broker')})")

    def _spawn_bridge(self) -> _Proc:
        argv = [sys.executable, "-m", "zkconsumer", "bridge", "--zookeeper", self.zookeeper,
                "--bootstrap-server", self.bootstrap]
        return _Proc(self._popen("bridge", argv),
                     f"zkconsumer bridge --zookeeper {self.zookeeper} ")

    def _broker_registered(self) -> bool:
        """True when a broker registration in ZooKeeper names this stack's broker (what a
        ZooKeeper-mode broker or the bridge writes). Any registration did not do: one
        restored with an old session from ZooKeeper's data (a bridge or broker killed) names
        the broker of an earlier run, and stays until that session expires."""
        out = zk_four_letter(self.zookeeper, "cons")
        if not out:
            return False
        from kazoo.exceptions import NoNodeError


        try:
            # Logged in as the bridge is (it inherits ZKCONSUMER_ZOOKEEPER_AUTH and _ACL): an
            # ACL without world read made every probe fail, and `up` time out.
            zk = connect(self.zookeeper, 2.0)
        except Exception:  # noqa: BLE001 - not answering yet
            return False
        try:
            ids = zk.get_children(zp.BROKER_IDS) if zk.exists(zp.BROKER_IDS) else []
            for child in ids:
                bid = zp.parse_id(child)
                if bid is None:
                    continue
                try:
                    data, _ = zk.get(zp.broker_path(bid))
                    endpoint = zp.BrokerRegistration.decode(data).endpoint()
                except (NoNodeError, ValueError):
                    continue  # gone meanwhile, or not a registration the bridge writes
                if endpoint == ("127.0.0.1", self.broker_port):
                    return True
            return False
        except Exception:  # noqa: BLE001 - not answering yet
            return False
        finally:
            zk.stop()
            zk.close()


@contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """Inside, SIGTERM raises KeyboardInterrupt in the main thread, as Ctrl-C does, so that
    ``finally`` blocks run. The stack's processes live in their own sessions: without this, a
    test run or benchmark stopped by SIGTERM would leave ZooKeeper and the broker running.
    Does nothing outside the main thread, or when SIGTERM already has a handler."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL):
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


@contextmanager
def running_stack(directory: str | os.PathLike[str],
                  broker: str = DEFAULT_BROKER) -> Iterator[LocalStack]:
    """A stack for the length of a ``with`` block; always stopped on the way out, also when
    the process is told to stop by SIGTERM (:func:`sigterm_interrupts`), and tied to this
    thread (see :class:`LocalStack`): a SIGKILL leaves no component running."""
    stack = LocalStack(directory, tied=True, broker=broker)
    with sigterm_interrupts():
        try:
            stack.up()
            yield stack
        finally:
            stack.down()
