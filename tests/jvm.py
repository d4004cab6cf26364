"""JVM members of legacy consumer groups, for the interoperability tests.

Runs ``tools/jvm/src/Member.java`` (Kafka's own ``ZookeeperConsumerConnector`` and
``PartitionAssignor``) on the classpath of a legacy Kafka release, resolved by
``tools/jvm/resolve`` into ``.jvm/legacy-<release>/`` (or ``$ZKCONSUMER_JVM_DIR``). The
source is compiled once per release and test session (``javac``, a few seconds) rather than
at every start, as a single-file launch would.

* :func:`jvm_member`: a context manager starting one member, parsing its lines as they come
  (its consumer id, each message handed out), stopping it (SIGTERM, or SIGKILL) at the end;
* :func:`py_member`: the same for a zkconsumer member (tests/mixed_member.py), which prints
  the same lines;
* :func:`jvm_assign`: the JVM's own assignment of groups laid out in ZooKeeper.

The classpaths and the ``java`` command line are :mod:`tools.legacy_jvm`'s (the benchmarks
run the same member).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tools.legacy_jvm import java_argv
from zkconsumer._types import TopicPartition
from zkconsumer.stack.testing import wait_until

#: The JVM releases tested: the last of the legacy consumer (1.1.1) and the last before
#: 1.0 (0.11.0.3), whose roundrobin orders partitions differently.
JVM_RELEASES = ("1.1.1", "0.11.0.3")

#: The jvm.compatibility value matching each release.
COMPATIBILITY = {"1.1.1": "1.0.1", "0.11.0.3": "0.8.2"}

@dataclass(frozen=True)
class Handed:
    """One message a JVM member handed out to its application."""

    topic: str
    partition: int
    offset: int
    stream: int
    at_ms: int  # when (epoch millis, this machine's clock)
    by: str  # the member's consumer id


class MemberProcess:
    """A running member, JVM or zkconsumer. Its lines are read by a thread as they come:

    ``consumer_id`` (``READY``), ``messages`` (``MSG``, in order), ``closed`` (``CLOSED``).
    ``lock`` guards ``messages``, ``consumer_id`` and ``closed``.
    """

    def __init__(self, kind: str, argv: list[str], stderr_path: Path) -> None:
        self.kind = kind  # "JVM 1.1.1", "zkconsumer"
        self.lock = threading.Lock()
        self.consumer_id: str | None = None
        self.closed = False
        self.messages: list[Handed] = []
        self._stderr_path = stderr_path
        self._stderr = open(stderr_path, "wb")  # closed in _reap
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self._stderr,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        self._reader = threading.Thread(target=self._read, name="member-reader",
                                        daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            words = raw.decode("utf-8", "replace").split()
            with self.lock:
                if words[:1] == ["MSG"] and len(words) == 6:
                    self.messages.append(Handed(words[1], int(words[2]), int(words[3]),
                                                int(words[4]), int(words[5]),
                                                self.consumer_id or "?"))
                elif words[:1] == ["READY"]:
                    self.consumer_id = words[1]
                elif words[:1] == ["CLOSED"]:
                    self.closed = True

    def stderr_text(self) -> str:
        return self._stderr_path.read_text(errors="replace")

    def stderr_tail(self, n: int = 15) -> str:
        lines = self._stderr_path.read_text(errors="replace").splitlines()
        return "\n".join(lines[-n:])

    def wait_ready(self, timeout: float = 60.0) -> str:
        """The consumer id, once the member has created its streams (it has registered)."""

        def ready() -> str | None:
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.kind} member exited with "
                                     f"{self.proc.returncode}:\n{self.stderr_tail()}")
            with self.lock:
                return self.consumer_id

        return str(wait_until(ready, timeout, f"{self.kind} member ready"))

    def handed(self) -> list[Handed]:
        with self.lock:
            return list(self.messages)

    def terminate(self, timeout: float = 60.0) -> None:
        """SIGTERM and wait: the member closes its connector (committing as configured) and
        prints CLOSED; a JVM then exits with 143 (its shutdown hook ran)."""
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout)
        self._reader.join(10)
        if code not in (0, 143) or not self.closed:
            raise AssertionError(f"{self.kind} member did not close cleanly (exit "
                                 f"{code}):\n{self.stderr_tail()}")

    def kill(self) -> None:
        """SIGKILL: no shutdown hook, no commit; its ZooKeeper session lingers until it
        expires."""
        self.proc.kill()
        self.proc.wait(30)
        self._reader.join(10)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def _reap(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._stderr.close()


@contextmanager
def jvm_member(
    release: str,
    zookeeper: str,
    group: str,
    *,
    topics: Iterable[str] = (),
    whitelist: str | None = None,
    streams: int = 1,
    strategy: str = "range",
    commit: str = "auto",
    props: Mapping[str, str] | None = None,
) -> Iterator[MemberProcess]:
    """A JVM member of ``group`` for the ``with`` block; killed at its end if still running.

    ``commit``: ``auto`` (the legacy properties decide), ``each`` (commit before handing out
    each message), ``none`` (auto-commit off).
    """
    args = ["member", "--zookeeper", zookeeper, "--group", group, "--streams", str(streams),
            "--strategy", strategy, "--commit", commit]
    if whitelist is not None:
        args += ["--whitelist", whitelist]
    else:
        args += ["--topics", ",".join(topics)]
    for key, value in (props or {}).items():
        args += ["--prop", f"{key}={value}"]
    with _running(f"JVM {release}", java_argv(release, *args)) as member:
        yield member


@contextmanager
def _running(kind: str, argv: list[str]) -> Iterator[MemberProcess]:
    with tempfile.TemporaryDirectory(prefix="zkc-member-") as d:
        member = MemberProcess(kind, argv, Path(d) / "stderr.log")
        try:
            yield member
        finally:
            member._reap()


@contextmanager
def py_member(
    zookeeper: str,
    group: str,
    *,
    topics: Iterable[str] = (),
    whitelist: str | None = None,
    streams: int = 1,
    commit: str = "auto",
    props: Mapping[str, str] | None = None,
) -> Iterator[MemberProcess]:
    """A zkconsumer member of ``group`` in its own process, as :func:`jvm_member` (the
    strategy and jvm.compatibility go in ``props``)."""
    args = [zookeeper, group, f"streams={streams}", f"commit={commit}"]
    args.append(f"whitelist={whitelist}" if whitelist is not None
                else f"topics={','.join(topics)}")
    args += [f"{key}={value}" for key, value in (props or {}).items()]
    with _running("zkconsumer", [sys.executable, "-m", "tests.mixed_member", *args]) as member:
        yield member


def jvm_assign(
    release: str, zookeeper: str, strategy: str, chroots: Iterable[str], group: str = "g1"
) -> dict[str, dict[TopicPartition, str]]:
    """chroot -> the global assignment the JVM's own assignor computes for ``group`` as laid
    out under that chroot of ``zookeeper`` (every member's share, united); chroot ``""``: the
    live group itself."""
    wanted = list(chroots)
    args = ["assign", "--zookeeper", zookeeper, "--strategy", strategy, "--group", group]
    for chroot in wanted:
        args += ["--scenario", chroot]
    done = subprocess.run(java_argv(release, *args), capture_output=True, timeout=600)
    if done.returncode != 0:
        raise AssertionError(f"JVM {release} assign failed ({done.returncode}):\n"
                             + done.stderr.decode(errors="replace")[-3000:])
    # The JVM names the scenario without a chroot "/".
    out: dict[str, dict[TopicPartition, str]] = {c or "/": {} for c in wanted}
    finished: set[str] = set()
    for line in done.stdout.decode().splitlines():
        words = line.split()
        if words[0] == "ASSIGN":
            chroot, topic, partition, thread = words[1:]
            out[chroot][TopicPartition(topic, int(partition))] = thread
        elif words[0] == "DONE":
            finished.add(words[1])
    assert finished == set(out), f"the JVM did not finish {set(out) - finished}"
    return {c: out[c or "/"] for c in wanted}
