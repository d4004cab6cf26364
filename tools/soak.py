"""A bounded soak run: a group of member processes under random faults, invariants checked.

    tools/soak [--seconds 300] [--members 4] [--partitions 8] [--rate 200] [--seed N]
               [--faults kill,kill2,expire,join,blip,pause,cut]
               [--backend kafka-python|confluent]
               [--output bench-results/soak.json]

A topic of ``--partitions`` partitions gets ``--rate`` messages a second while ``--members``
member processes (``python -m tools.fault_harness member``) consume it. Every few seconds one
fault, picked at random (seeded): a member SIGKILLed and restarted, two members SIGKILLed at
once and restarted, a member's ZooKeeper session expired, a fifth member joining (and, next
time, leaving), a member's ZooKeeper connection broken (a network blip: it reconnects with the
same session, and must neither lose its partitions nor hand out anything while disconnected), a
member paused (SIGSTOP) past its session timeout and resumed (a zombie: it must hand out nothing
the new owners of its partitions hand out), or a member's own path to ZooKeeper cut past its
session timeout (each member reaches ZooKeeper through a loopback proxy of its own). The first
faults are always an expiry, a kill, a pause and a cut, so even a short run has each. Members
fetch with ``--backend`` (``fetch.backend``).

At the end production stops, the group must consume everything, every member shuts down
cleanly, and the invariants are checked (see ``tools/fault_harness.py``):

- every acknowledged message consumed at least once;
- duplicates only from uncommitted windows (no message delivered again after a commit had
  covered it);
- committed offsets never go back, and after the clean shutdown they equal the log ends;
- at most one owner per partition at any moment (the sampler's view of ZooKeeper, the
  members' claims and releases, and their deliveries);
- no zombie duplicates (a member paused or cut off past its session timeout hands out nothing
  that its partitions' new owners hand out);
- every member that is asked to leave (SIGTERM) shuts down within 60 s (otherwise its thread
  stacks are in the summary).

The invariants are checked over the messages the broker acknowledged. A send that fails (not
acknowledged: an error or a timeout) is counted, ``send_failures`` in the summary, and fails
the run: the faults are the members', not the broker's, so a failed send means the load was not
what the run claims, and its message may still have reached the log, where the members read
it though nothing expects it (the counts then disagree for a reason that is not the
consumer's).

The summary is printed as JSON and written to ``--output``: messages (acknowledged),
``send_failures`` (and ``send_errors``, the first few reasons), deliveries, duplicates,
rebalances (summed over every member process), faults done, ``longest_pause_s`` (longest time
the whole group delivered nothing) and ``longest_partition_pause_s`` (longest time one partition
did, e.g. while a killed member's session had not yet expired), ``zombie_duplicates`` (messages
a member handed out after another member had claimed the partition, which that one handed out
too; the goal is 0), the invariants and the problems found. The exit status is 1 when an
invariant fails or a send failed. The members' logs (their stderr) are deleted after a run that
passed; after one that failed (or crashed) they are kept, and their directory is printed and
given as ``member_logs``. Uses its own local stack, or ZKCONSUMER_ZOOKEEPER/ZKCONSUMER_BOOTSTRAP
when both are set.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tools.bench_common import ROOT, measured_commit, result_header, stack
from tools.fault_harness import (
    FAULT_PROPS,
    TP,
    FaultRun,
    ProcessMember,
    Workload,
    committed_offsets,
    expire_session,
    log_ends,
    make_topic,
    now_ns,
    zk_client,
)
from tools.tcp_proxy import TcpProxy

RESULTS = ROOT / "bench-results"
#: Fault kinds and how often each is picked: one member SIGKILLed (and restarted), two at
#: once, a session expired, a fifth member joining or leaving, a connection blip, a member
#: paused past its session timeout, a member's path to ZooKeeper cut past it.
FAULT_WEIGHTS = {"kill": 30, "kill2": 10, "expire": 25, "join": 15, "blip": 20, "pause": 10,
                 "cut": 10}
#: How long a pause or a cut lasts, in session timeouts.
ZOMBIE_TIMEOUTS = 2.5


def progress(msg: str) -> None:
    print(f"[soak] {msg}", file=sys.stderr, flush=True)


class SoakWorkload(Workload):
    """The harness's workload, keeping the first few reasons of failed sends (the harness
    counts them only) so that the summary can say why."""

    #: How many distinct reasons are kept.
    KEEP = 5

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        super().__init__(bootstrap, topic, partitions)
        self.errors: list[str] = []

    def note_error(self, reason: str) -> None:
        with self._lock:
            if len(self.errors) < self.KEEP and reason not in self.errors:
                self.errors.append(reason)

    def _send(self, n: int) -> list[Any]:
        try:
            return super()._send(n)
        except Exception as e:  # the harness counts the batch as failed
            self.note_error(repr(e))
            raise

    def _failed(self, exc: BaseException) -> None:  # a send's errback
        super()._failed(exc)
        self.note_error(repr(exc))

    def failures(self) -> tuple[int, list[str]]:
        with self._lock:
            return self.failed, list(self.errors)


def send_problems(failed: int, acknowledged: int, errors: list[str]) -> list[str]:
    """What failed sends mean for the run, as problems of the summary (none when none failed).

    The soak faults the members, never the broker: a send that was not acknowledged means
    the load was not what the run claims, and its message may still be in the log, read by the
    members but expected by nothing. So the run does not pass, even if every invariant held
    over the acknowledged messages."""
    if failed <= 0:
        return []
    why = f" ({'; '.join(errors)})" if errors else ""
    return [f"{failed} send(s) failed{why}: the invariants were checked over the "
            f"{acknowledged} acknowledged messages only, and a failed send may still have "
            f"reached the log; the run does not pass"]


def verdict(data: dict[str, Any]) -> tuple[int, str]:
    """The exit status and the last line for a summary: 0 when it is ``ok``; otherwise 1, and
    whether an invariant failed or the run failed otherwise (failed sends, a drain that did
    not finish) with its first problems."""
    if data["ok"]:
        return 0, "ok"
    broken = [k for k, v in data["invariants"].items() if not v]
    head = (f"INVARIANT FAILED ({', '.join(broken)})" if broken else
            f"SENDS FAILED ({data['send_failures']})" if data["send_failures"] else
            "SOAK FAILED")
    return 1, f"{head}: " + "; ".join(data["problems"][:5])


def dispose_logs(log_dir: Path, keep: bool) -> bool:
    """Delete the members' log directory, unless ``keep`` and it holds a log: then print where
    it is. True when it was kept."""
    if keep and log_dir.is_dir() and any(log_dir.iterdir()):
        progress(f"the members' logs (stderr) are kept in {log_dir}")
        return True
    shutil.rmtree(log_dir, ignore_errors=True)
    return False


class Soak:
    """The run's state: the FaultRun, the faults done, the joiner (if any)."""

    def __init__(self, run: FaultRun, members: int, rng: random.Random, backend: str) -> None:
        self.run = run
        self.backend = backend
        self.rng = rng
        self.members = members
        self.faults: Counter[str] = Counter()
        self.timeline: list[dict[str, Any]] = []
        self.joiner: ProcessMember | None = None
        self.hung: list[ProcessMember] = []  # members whose clean shutdown did not end
        self.start = time.monotonic()
        self._n = 0
        self.proxies: dict[str, TcpProxy] = {}  # member name -> its path to ZooKeeper

    def _name(self) -> str:
        self._n += 1
        return f"m{self._n}"

    def _log(self, action: str, *who: str) -> None:
        t = round(time.monotonic() - self.start, 1)
        self.timeline.append({"t": t, "action": action, "members": list(who)})
        progress(f"{t:6.1f}s {action} {' '.join(who)}")

    def alive(self) -> list[ProcessMember]:
        return [p for p in self.run.processes if p.alive and p is not self.joiner]

    def add(self) -> ProcessMember:
        name = self._name()
        host, port = self.run.zookeeper.split(",")[0].split("/")[0].rsplit(":", 1)
        proxy = self.proxies[name] = TcpProxy(host, int(port))
        chroot = self.run.zookeeper[len(self.run.zookeeper.split("/")[0]):]
        return self.run.add_process(name, zookeeper=proxy.address + chroot,
                                    fetch_backend=self.backend)

    def _zombie_s(self) -> float:
        timeout_ms = int(str(FAULT_PROPS["zookeeper.session.timeout.ms"]))
        return ZOMBIE_TIMEOUTS * timeout_ms / 1000.0

    def pause(self) -> None:
        """SIGSTOP one member past its session timeout (the others take its partitions),
        then SIGCONT: a zombie until it notices."""
        candidates = self.alive()
        if not candidates:
            return
        v = self.rng.choice(candidates)
        assert v.proc is not None
        # Its belief ends now: anything it hands out before claiming again is counted.
        self.run.ownership.down(v.name, now_ns())
        v.proc.send_signal(signal.SIGSTOP)
        self._log("SIGSTOP", v.name)
        time.sleep(self._zombie_s())
        v.proc.send_signal(signal.SIGCONT)
        self.faults["pauses"] += 1
        self._log("SIGCONT", v.name)

    def cut(self) -> None:
        """Cut one member's path to ZooKeeper past its session timeout, then restore it."""
        candidates = [p for p in self.alive() if p.name in self.proxies]
        if not candidates:
            return
        v = self.rng.choice(candidates)
        proxy = self.proxies[v.name]
        proxy.cut()
        self._log("ZooKeeper cut", v.name)
        time.sleep(self._zombie_s())
        proxy.restore()
        self.faults["cuts"] += 1
        self._log("ZooKeeper restored", v.name)

    def close_proxies(self) -> None:
        for proxy in self.proxies.values():
            proxy.close()

    def kill(self, n: int = 1) -> None:
        victims = self.rng.sample(self.alive(), min(n, len(self.alive())))
        for v in victims:  # the signals first, so they die together
            assert v.proc is not None
            v.proc.send_signal(signal.SIGKILL)
        for v in victims:
            v.kill()
        self.faults["kills"] += len(victims)
        self._log(f"SIGKILL x{len(victims)}", *(v.name for v in victims))
        for _ in victims:
            self.add()  # restarted (a new process joins in its place)

    def expire(self) -> None:
        candidates = [p for p in self.alive() if p.session is not None]
        if not candidates:
            return
        v = self.rng.choice(candidates)
        assert v.session is not None
        expire_session(self.run.zookeeper, v.session)
        self.faults["expiries"] += 1
        self._log("session expired", v.name)

    def blip(self) -> None:
        candidates = self.alive()
        if not candidates:
            return
        v = self.rng.choice(candidates)
        assert v.proc is not None
        v.proc.send_signal(signal.SIGUSR2)  # the member breaks its own ZooKeeper connection
        self.faults["blips"] += 1
        self._log("connection blip", v.name)

    def join_or_leave(self) -> None:
        if self.joiner is None:
            self.joiner = self.add()
            self.faults["joins"] += 1
            self._log("joined", self.joiner.name)
        else:
            if not self.joiner.stop():
                self.hung.append(self.joiner)
            self.faults["leaves"] += 1
            self._log("left", self.joiner.name)
            self.joiner = None

    def step(self, first: list[str], kinds: dict[str, int]) -> None:
        action = first.pop(0) if first else self.rng.choices(
            list(kinds), weights=list(kinds.values()))[0]
        if action == "kill":
            self.kill(1)
        elif action == "kill2":
            self.kill(2)
        elif action == "expire":
            self.expire()
        elif action == "blip":
            self.blip()
        elif action == "pause":
            self.pause()
        elif action == "cut":
            self.cut()
        else:
            self.join_or_leave()


def soak(zookeeper: str, bootstrap: str, args: argparse.Namespace,
         log_dir: Path) -> dict[str, Any]:
    rng = random.Random(args.seed)
    zk = zk_client(zookeeper)
    suffix = f"{int(time.time())}-{rng.randrange(1 << 16):04x}"
    topic = make_topic(bootstrap, zk, f"soak-{suffix}", args.partitions)
    run = FaultRun("soak", zookeeper, bootstrap, f"soak-{suffix}", topic, args.partitions,
                   log_dir)
    workload = run.workload = SoakWorkload(bootstrap, topic, args.partitions)
    s = Soak(run, args.members, rng, args.backend)
    checks: dict[str, bool] = {}
    problems: list[str] = []
    try:
        run.workload.produce(args.partitions * 50)
        run.workload.start(rate_per_s=args.rate)
        for _ in range(args.members):
            s.add()
        progress(f"{args.members} members consuming {topic} ({args.backend}); faults for "
                 f"{args.seconds} s")
        deadline = time.monotonic() + args.seconds
        load_from_ns = now_ns()
        kinds = {k: w for k, w in FAULT_WEIGHTS.items() if k in args.faults}
        first: list[str] = [k for k in ("expire", "kill", "pause", "cut") if k in kinds]
        failed_seen = 0

        def note_failed_sends() -> None:
            nonlocal failed_seen
            failed, errors = workload.failures()
            if failed > failed_seen:
                progress(f"{failed} send(s) failed so far"
                         + (f", e.g. {errors[0]}" if errors else ""))
                failed_seen = failed

        while kinds:
            pause = rng.uniform(3.0, 6.0)
            if time.monotonic() + pause >= deadline:
                break
            time.sleep(pause)
            s.step(first, kinds)
            note_failed_sends()
        time.sleep(max(0.0, deadline - time.monotonic()))
        try:
            workload.stop()  # waits for every acknowledgement (or failure)
        except Exception as e:  # noqa: BLE001 - reported: sends neither acked nor failed
            workload.note_error(f"the final flush failed: {e!r}")
            problems.append(f"the producer's final flush failed ({e!r}): some sends were "
                            f"neither acknowledged nor failed")
        produced_until = time.monotonic()
        load_until_ns = now_ns()
        note_failed_sends()
        send_failures, send_errors = workload.failures()
        progress(f"{len(workload.expected())} messages produced (acknowledged), "
                 f"{send_failures} send(s) failed; draining")
        try:
            run.wait_consumed(180)
        except AssertionError as e:
            problems.append(str(e))
        drained_s = time.monotonic() - produced_until
        rebalances = 0
        for p in run.processes:
            if p.alive and not p.stop():
                s.hung.append(p)
            rebalances += p.rebalances
        run.sampler.wait_rounds(2)
        # After the clean shutdown: its rebalances and final commits are checked too.
        report = run.verify(while_down=True, load_from_ns=load_from_ns,
                            load_until_ns=load_until_ns)
        ends = {TP(topic, p): off for p, off in log_ends(bootstrap, topic,
                                                          args.partitions).items()}
        final = {TP(topic, p): off for p, off in committed_offsets(zk, run.group,
                                                                   topic).items()}
        regressions = [v for v in report.violations if "committed offset went back" in v]
        ownership = [v for v in report.violations if v not in regressions] + report.overlaps
        checks = {
            "every_message_consumed": not report.missing,
            "duplicates_only_from_uncommitted_windows": not report.replays,
            "committed_offsets_never_go_back": not regressions,
            "final_commit_at_log_end": final == ends,
            "at_most_one_owner": not ownership,
            "no_zombie_duplicates": report.zombie_duplicates == 0,
            "no_consumer_errors": not report.errors,
            "clean_shutdowns": not s.hung,
        }
        for p in s.hung:
            problems.append(f"{p.name} did not exit within 60 s of SIGTERM; its stderr ends "
                            f"with:\n{p.hang}")
        problems[:0] = send_problems(send_failures, report.expected, send_errors)
        problems += report.problems()
        if final != ends:
            behind = {f"{tp.topic}:{tp.partition}": (final.get(tp), off)
                      for tp, off in ends.items() if final.get(tp) != off}
            problems.append(f"committed (got, log end) differ after the clean shutdown: "
                            f"{behind}")
        return {
            "seconds": args.seconds,
            "members": args.members,
            "partitions": args.partitions,
            "rate_per_s": args.rate,
            "seed": args.seed,
            "fetch_backend": args.backend,
            "fault_kinds": args.faults,
            "faults": dict(sorted(s.faults.items())),
            "messages": report.expected,
            "send_failures": send_failures,
            "send_errors": send_errors,
            "deliveries": report.delivered,
            "duplicates": report.duplicates,
            "zombie_duplicates": report.zombie_duplicates,
            "missing": len(report.missing),
            "rebalances": rebalances,
            "member_processes": len(run.processes),
            "longest_pause_s": round(report.longest_pause_s, 3),
            "longest_partition_pause_s": round(report.longest_partition_pause_s, 3),
            "drain_after_load_s": round(drained_s, 2),
            "sampler_rounds": report.sampler_rounds,
            "invariants": checks,
            "ok": all(checks.values()) and not problems and not send_failures,
            "problems": problems[:30],
            "timeline": s.timeline,
        }
    finally:
        run.close()
        s.close_proxies()
        zk.stop()
        zk.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="tools/soak", description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=300.0, help="length of the faulty phase")
    ap.add_argument("--members", type=int, default=4)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--rate", type=float, default=200.0, help="messages produced per second")
    ap.add_argument("--seed", type=int, default=None, help="random seed (default: random)")
    ap.add_argument("--output", type=Path, default=None,
                    help="result file (default: bench-results/soak.json, or soak_confluent.json "
                    "with --backend confluent)")
    ap.add_argument("--faults", default=",".join(FAULT_WEIGHTS),
                    help=f"comma-separated fault kinds (default: all of {','.join(FAULT_WEIGHTS)})")
    ap.add_argument("--backend", choices=("kafka-python", "confluent"), default="kafka-python",
                    help="the members' fetch.backend (default: kafka-python)")
    args = ap.parse_args(argv)
    measured_commit()  # read now: the code measured, whatever is edited while it runs
    if args.output is None:
        args.output = RESULTS / ("soak.json" if args.backend == "kafka-python"
                                 else "soak_confluent.json")
    args.faults = [f.strip() for f in args.faults.split(",") if f.strip()]
    unknown = sorted(set(args.faults) - set(FAULT_WEIGHTS))
    if unknown:
        ap.error(f"unknown fault kind(s) {', '.join(unknown)}; known: {', '.join(FAULT_WEIGHTS)}")
    if args.seconds <= 0 or args.members < 1 or args.partitions < 1 or args.rate <= 0:
        ap.error("--seconds, --members, --partitions and --rate must be positive")
    if args.seed is None:
        args.seed = random.randrange(1 << 30)
    logs = Path(tempfile.mkdtemp(prefix="zkc-soak-logs-"))
    passed = False  # a crash (or Ctrl-C, SIGTERM) keeps the logs too
    try:
        with stack() as (zk, bs):
            result = soak(zk, bs, args, logs)
        passed = bool(result["ok"])
        data = {**result_header("soak"), **result}
        if not passed and any(logs.iterdir()):
            data["member_logs"] = str(logs)
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(data, indent=2) + "\n")
        print(json.dumps(data, indent=2))
    finally:
        dispose_logs(logs, keep=not passed)
    status, line = verdict(data)
    progress(f"{line}; summary in {args.output}")
    return status


if __name__ == "__main__":
    sys.exit(main())
