"""The benchmarks' handle on a member process (tools/bench_member.py): zkconsumer's or
pykafka's (or a peer's program, tools/bench_peers.py), told to join, leave and report over
its stdin, one line of JSON back each."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


class MemberProcess:
    """A member in its own process, told to join, leave and report (see tools/bench_member)."""

    def __init__(self, zk_addr: str, group: str, topic: str, props: dict[str, str],
                 fetch: bool, kind: str = "zkconsumer", argv: list[str] | None = None
                 ) -> None:
        """``argv``: another program speaking the same protocol (a peer's member,
        tools/bench_peers.py) instead of tools/bench_member.py."""
        if argv is None:
            argv = [sys.executable, "-m", "tools.bench_member", zk_addr, group, topic,
                    f"fetch={int(fetch)}", f"kind={kind}",
                    *(f"{k}={v}" for k, v in props.items())]
        self.proc = subprocess.Popen(argv, cwd=ROOT, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, bufsize=1)
        self.id = ""

    def send(self, command: str) -> dict[str, Any]:
        self.post(command)
        return self.receive(command)

    def post(self, command: str) -> None:
        """Send ``command`` without waiting for its answer (:meth:`receive` takes it)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def receive(self, command: str) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"tools/bench: a member process exited ({self.proc.wait()}) "
                             f"on {command!r}")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise SystemExit(f"tools/bench: a member process: {answer['error']}")
        return answer

    def join(self) -> float:
        """Join the group; the time.time() at which the member began (in its process)."""
        answer = self.send("join")
        self.id = answer["id"]
        return float(answer["at"])

    def end(self) -> None:
        """End of input: the member stops and its process exits (see :meth:`close`)."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()

    def close(self) -> None:
        """:meth:`end`, then wait for the process to exit; killed if it does not in 30 s."""
        self.end()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Spawned:
    """The member processes of one benchmark run, each made by ``make`` (then given to
    ``then``, e.g. a peer's ``prepare``) and kept from the start, so that :meth:`close` ends
    every one, the spare started ahead included, whatever failed meanwhile."""

    def __init__(self, make: Callable[[], MemberProcess],
                 then: Callable[[MemberProcess], object] | None = None) -> None:
        self._make = make
        self._then = then
        self.all: list[MemberProcess] = []

    def new(self) -> MemberProcess:
        member = self._make()
        self.all.append(member)
        if self._then is not None:
            self._then(member)
        return member

    def close(self) -> None:
        close_all(self.all)


def close_all(members: list[MemberProcess]) -> None:
    """End a whole group at once: every member first told to ``halt`` (it stops reacting to
    the group, so the others' leaving makes no member rebalance), then every input ended
    before any exit is awaited."""
    halting = []
    for m in members:
        if m.proc.poll() is None and not m.proc.stdin.closed:  # type: ignore[union-attr]
            try:
                m.post("halt")
            except OSError:
                continue  # exited meanwhile: nothing to halt
            halting.append(m)
    for m in halting:
        try:
            m.receive("halt")
        except SystemExit:
            pass  # exited meanwhile
    for m in members:
        m.end()
    for m in members:
        m.close()
