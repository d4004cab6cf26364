"""The field's other ZooKeeper-group consumers as peer rows of ``tools/bench storm``,
``tools/bench rebalance`` and ``tools/bench throughput`` (issue 42), beside pykafka's
(tools/bench_pykafka.py):

* ``jvm_1_1_1``: the original, Kafka 1.1.1's ``ZookeeperConsumerConnector``
  (tools/peers/jvm/PeerMember.java, compiled against the ``legacy-1.1.1`` classpath);
* ``kafka_node_3_0_1``: kafka-node 3.0.1's ``HighLevelConsumer`` with node-zookeeper-client
  (tools/peers/kafka-node, pinned by its package-lock.json, installed with ``npm ci``);
* ``go_consumergroup``: Go's ``github.com/wvanbergen/kafka/consumergroup`` with kazoo-go and
  Sarama (tools/peers/go-consumergroup, pinned by go.sum, built with ``go build``).

Each peer's program is built on first use (:func:`build`) into ``.peers/`` (never by the
test suite's set-up), runs each member in its own process and speaks the line protocol of
tools/bench_member.py on stdin (``prepare``, ``join``, ``stats``, ``leave``, ``halt``). A
group has converged when every member is registered and every owner znode holds what *that
peer's own* assignment rule computes for the registered ids, read from its own znodes
(:meth:`Peer.expected`); this process polls ZooKeeper every 10 ms for it, as the pykafka row.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from tools.bench_procs import MemberProcess, Spawned, close_all
from tools.legacy_jvm import LOG4J, classpath
from zkconsumer.stack.testing import create_topic, expected_owners, wait_until
from zkconsumer.zk import paths as zp

ROOT = Path(__file__).resolve().parent.parent
PEERS_SRC = ROOT / "tools" / "peers"
#: Where the peers' programs are built (git-ignored).
BUILD = ROOT / ".peers"
#: Rebalance changes per peer row at most (each takes a second or more for some peers).
PEER_CHANGES = 20
#: The JVM peer's options: a modest heap (fifty of them start at once), its default JIT.
JVM_FLAGS = ["-Xmx256m", "-XX:+UseSerialGC", "-Xss512k"]


def _progress(msg: str) -> None:
    print(f"[bench] peers: {msg}", file=sys.stderr, flush=True)


class PeerUnavailable(Exception):
    """A peer that cannot be built or run here; its message goes into the JSON."""


def _run(argv: list[str], cwd: Path, what: str, timeout: float = 600) -> str:
    try:
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise PeerUnavailable(f"{what}: {e}") from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise PeerUnavailable(f"{what} failed ({done.returncode}): {' | '.join(tail)}")
    return done.stdout


def _range(ids: list[str], partitions: list[int], value: Callable[[str], str]
           ) -> dict[int, str]:
    """Contiguous slices of ``partitions`` (in the order given) to ``ids`` (in the order
    given), the first ``len(partitions) % len(ids)`` one longer: every peer's range."""
    out: dict[int, str] = {}
    if not ids:
        return out
    n, extra = divmod(len(partitions), len(ids))
    start = 0
    for i, cid in enumerate(ids):
        stop = start + n + (1 if i < extra else 0)
        for p in partitions[start:stop]:
            out[p] = value(cid)
        start = stop
    return out


def _partitions(zk: KazooClient, topic: str) -> list[int]:
    return sorted(zp.TopicAssignment.decode(zk.get(zp.topic_path(topic))[0]).partitions)


def _leader(zk: KazooClient, topic: str, partition: int) -> int:
    data, _ = zk.get(zp.partition_state_path(topic, partition))
    return int(json.loads(data)["leader"])


@dataclass(frozen=True)
class Peer:
    name: str
    about: dict[str, Any]

    def build(self) -> None:
        raise NotImplementedError

    def argv(self, zk: str, group: str, topic: str, extra: dict[str, str]) -> list[str]:
        raise NotImplementedError

    def expected(self, zk: KazooClient, group: str, topic: str, ids: list[str]
                 ) -> dict[int, str]:
        raise NotImplementedError

    def fails_counted(self) -> bool:
        return True

    def make_group(self, zk: KazooClient, group: str) -> None:
        """What the peer needs of a new group before its members start at once."""


class JvmPeer(Peer):
    def build(self) -> None:
        _compiled()

    def argv(self, zk: str, group: str, topic: str, extra: dict[str, str]) -> list[str]:
        cp = f"{_compiled()}{os.pathsep}{classpath('1.1.1')}"
        return ["java", *JVM_FLAGS, f"-Dlog4j.configuration=file:{LOG4J}", "-cp", cp,
                "PeerMember", zk, group, topic, *(f"{k}={v}" for k, v in extra.items())]

    def expected(self, zk: KazooClient, group: str, topic: str, ids: list[str]
                 ) -> dict[int, str]:
        return expected_owners(zk, group, topic, "range")


@functools.cache
def _compiled() -> str:
    try:
        cp = classpath("1.1.1")
    except RuntimeError as e:
        raise PeerUnavailable(str(e)) from None
    source = PEERS_SRC / "jvm" / "PeerMember.java"
    out = BUILD / "jvm"
    stamp = out / "source.sha"
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    if not stamp.exists() or stamp.read_text() != digest:
        out.mkdir(parents=True, exist_ok=True)
        _progress("compiling tools/peers/jvm/PeerMember.java")
        _run(["javac", "-nowarn", "-cp", cp, "-d", str(out), str(source)], ROOT,
             "javac PeerMember.java")
        stamp.write_text(digest)
    return str(out)


class KafkaNodePeer(Peer):
    def build(self) -> None:
        src = PEERS_SRC / "kafka-node"
        marker = src / "node_modules" / "kafka-node" / "package.json"
        if shutil.which("node") is None or shutil.which("npm") is None:
            raise PeerUnavailable("node and npm are not installed")
        if not marker.exists() or json.loads(marker.read_text())["version"] != "3.0.1":
            _progress("installing kafka-node 3.0.1 (npm ci, from package-lock.json)")
            _run(["npm", "ci", "--no-audit", "--no-fund", "--omit=optional"], src, "npm ci")

    def argv(self, zk: str, group: str, topic: str, extra: dict[str, str]) -> list[str]:
        return ["node", str(PEERS_SRC / "kafka-node" / "member.js"), zk, group, topic,
                *(f"{k}={v}" for k, v in extra.items())]

    def expected(self, zk: KazooClient, group: str, topic: str, ids: list[str]
                 ) -> dict[int, str]:
        # Its range (HighLevelConsumer.rebalanceAttempt): the ids sorted (JavaScript's sort:
        # UTF-16 order, the same as Python's on these ASCII ids), the partitions sorted as
        # numbers; owners valued by the bare id.
        return _range(sorted(ids), _partitions(zk, topic), str)


class GoPeer(Peer):
    def build(self) -> None:
        src = PEERS_SRC / "go-consumergroup"
        binary = BUILD / "go-consumergroup" / "member"
        if shutil.which("go") is None:
            raise PeerUnavailable("go is not installed")
        newest = max(p.stat().st_mtime for p in src.iterdir())
        if not binary.exists() or binary.stat().st_mtime < newest:
            _progress("building tools/peers/go-consumergroup (go build, from go.sum)")
            binary.parent.mkdir(parents=True, exist_ok=True)
            _run(["go", "build", "-mod=readonly", "-o", str(binary), "."], src, "go build")

    def argv(self, zk: str, group: str, topic: str, extra: dict[str, str]) -> list[str]:
        return [str(BUILD / "go-consumergroup" / "member"), zk, group, topic,
                *(f"{k}={v}" for k, v in extra.items())]

    def expected(self, zk: KazooClient, group: str, topic: str, ids: list[str]
                 ) -> dict[int, str]:
        # Its range (consumergroup.dividePartitionsBetweenConsumers): the ids sorted as
        # strings, the partitions sorted by (leader, partition); owners valued by the bare id.
        parts = sorted(_partitions(zk, topic), key=lambda p: (_leader(zk, topic, p), p))
        return _range(sorted(ids), parts, str)

    def fails_counted(self) -> bool:
        return False

    def make_group(self, zk: KazooClient, group: str) -> None:
        # JoinConsumerGroup checks that the group's znode exists, then creates it: members
        # starting at once on a new group race, and all but one fail with "zk: node already
        # exists"; its registration makes the ids directory the same way ("Consumer instance
        # already registered"). Both are made first, as for a group that has run before.
        zk.ensure_path(zp.ids_dir(group))


PEERS: dict[str, Peer] = {
    "jvm_1_1_1": JvmPeer("jvm_1_1_1", {
        "client": "Kafka 1.1.1 kafka.javaapi.consumer.ZookeeperConsumerConnector "
                  "(kafka_2.12:1.1.1, tools/peers/jvm/PeerMember.java)",
        "settings": {"auto.commit.enable": "false", "zookeeper.session.timeout.ms": "6000",
                     "rebalance.backoff.ms": "2000 (its default: zookeeper.sync.time.ms)",
                     "rebalance.max.retries": "4 (its default)", "jvm_flags": JVM_FLAGS},
        "layout": "the legacy layout zkconsumer shares: ids <group>_<host>-<ms>-<8 hex>, "
                  "owners valued <consumer id>-<thread>",
        "assignment": "the legacy range (zkconsumer's range computes it: zkconsumer.stack.testing."
                      "expected_owners)",
        "failed_attempts": "'Rebalancing attempt failed' lines of its own log, counted",
        "fetchers": "real (it cannot run without them)",
    }),
    "kafka_node_3_0_1": KafkaNodePeer("kafka_node_3_0_1", {
        "client": "kafka-node 3.0.1 HighLevelConsumer with node-zookeeper-client 0.2.3 "
                  "(tools/peers/kafka-node, package-lock.json)",
        "settings": {"autoCommit": False, "sessionTimeout": 6000,
                     "rebalanceRetry": "its default: 10 retries, 100 ms to 1 s backoff, "
                                       "randomized"},
        "layout": "ids <group>_<uuid> with pattern white_list, owners valued by the bare "
                  "consumer id, offsets through OffsetCommit/OffsetFetch v0 (the broker "
                  "keeps them in ZooKeeper); Fetch v0 and Metadata v0",
        "assignment": "its range: ids sorted, partitions sorted as numbers, one slice each",
        "failed_attempts": "rebalanceAttempt calls that ended in an error (the consumer's "
                           "own method wrapped to count them: it keeps no counter)",
        "fetchers": "real (it cannot run without them)",
    }),
    "go_consumergroup": GoPeer("go_consumergroup", {
        "client": "github.com/wvanbergen/kafka/consumergroup v0.0.0-20171203153745-"
                  "e2edea948ddf with kazoo-go v0.0.0-20180202103751-f72d8611297a and "
                  "github.com/Shopify/sarama v1.38.1 (tools/peers/go-consumergroup, go.sum)",
        "settings": {"Zookeeper.Timeout": "6s (its default is 1 s)",
                     "Offsets.Initial": "OffsetOldest",
                     "Offsets.ProcessingTimeout": "60s (its default)",
                     "sarama Version": "Sarama's default (V1_0_0_0)"},
        "layout": "ids <hostname>:<uuid> whose registration carries a Unix-seconds "
                  "timestamp, owners valued by the bare instance id, offsets in ZooKeeper",
        "assignment": "its range: ids sorted as strings, partitions sorted by (leader, "
                      "partition), one slice each",
        "group": "its znode and ids directory made before the members start: "
                 "JoinConsumerGroup checks that each exists, then creates it, and members "
                 "starting at once on a new group fail ('zk: node already exists', 'Consumer "
                 "instance already registered') but one",
        "failed_attempts": "not counted: it retries a partition still claimed by another "
                           "(ErrPartitionClaimedByOther) silently, once a second, and keeps "
                           "no counter; each partition's first claim waits 1 s by design",
        "fetchers": "real (it cannot run without them)",
    }),
}


def peer_names() -> list[str]:
    return list(PEERS)


def _owners(zk: KazooClient, group: str, topic: str, partitions: list[int]) -> dict[int, str]:
    futures = [(p, zk.get_async(zp.owner_path(group, topic, p))) for p in partitions]
    out = {}
    for p, f in futures:
        try:
            out[p] = f.get(timeout=5)[0].decode()
        except Exception:  # noqa: BLE001 - not owned right now
            pass
    return out


@dataclass
class _PeerGroup:
    peer: Peer
    zk: KazooClient
    zk_addr: str
    group: str
    topic: str
    partitions: list[int]

    def ids(self) -> list[str]:
        try:
            return list(self.zk.get_children(zp.ids_dir(self.group)))
        except Exception:  # noqa: BLE001 - not made yet
            return []

    def converged(self, n: int) -> bool:
        ids = self.ids()
        if len(ids) != n:
            return False
        return (_owners(self.zk, self.group, self.topic, self.partitions)
                == self.peer.expected(self.zk, self.group, self.topic, ids))

    def why_not(self, n: int) -> str:
        ids = self.ids()
        owners = _owners(self.zk, self.group, self.topic, self.partitions)
        live = set(ids)
        return (f"{len(ids)} of {n} members registered, "
                f"{sum(1 for o in owners.values() if o.split('-')[0] in live or o in live)} "
                f"of {len(self.partitions)} partitions owned")

    def spawn(self, extra: dict[str, str] | None = None) -> MemberProcess:
        return MemberProcess(self.zk_addr, self.group, self.topic, {}, True,
                             argv=self.peer.argv(self.zk_addr, self.group, self.topic,
                                                 extra or {}))

    def settles(self, n: int, timeout: float) -> bool:
        try:
            wait_until(functools.partial(self.converged, n), timeout, "peer's assignment",
                       every=0.01)
        except Exception:  # noqa: BLE001 - the row says why
            return False
        return True


def _fresh(peer: Peer, made: Any, zk: KazooClient, zk_addr: str, bootstrap: str,
           partitions: int, stem: str) -> _PeerGroup:
    name = f"bench-{peer.name.replace('_', '-')}-{stem}-{time.time_ns()}"
    made.topics.add(name)
    made.groups.add(name)
    create_topic(bootstrap, name, partitions)
    wait_until(lambda: zk.exists(zp.topic_path(name)), 30, "topic registered")
    peer.make_group(zk, name)
    return _PeerGroup(peer, zk, zk_addr, name, name, list(range(partitions)))


def _counts(stats: list[dict[str, Any]], peer: Peer) -> dict[str, Any]:
    errors = [e for s in stats for e in s.get("errors") or []]
    return {
        "rebalances": sum(int(s.get("rebalances", 0)) for s in stats),
        "failed_attempts": sum(int(s.get("failed_attempts", 0)) for s in stats)
        if peer.fails_counted() else None,
        **({"claim_errors": sum(int(s.get("claim_errors", 0)) for s in stats)}
           if not peer.fails_counted() else {}),
        "errors": sum(int(s.get("error_count", 0)) for s in stats),
        **({"error_sample": errors[:3]} if errors else {}),
    }


def _storm_round(g: _PeerGroup, n: int, timeout: float) -> dict[str, Any]:
    """``n`` member processes started ahead and prepared, then told to join at once; the
    time until the group has converged on the peer's own assignment (polled every 10 ms)."""
    procs = [g.spawn() for _ in range(n)]
    try:
        for p in procs:
            p.send("prepare")
        t0 = time.time()
        for p in procs:
            p.post("join")
        refused: list[str] = []
        for p in procs:
            try:
                p.id = p.receive("join")["id"]
            except SystemExit as e:  # the peer refused to join: said in the row
                refused.append(str(e))
        row: dict[str, Any]
        if refused:
            row = {"converged": False, "seconds": None,
                   "why": f"{len(refused)} of {n} members could not join: {refused[0]}"}
        elif g.settles(n, timeout):
            row = {"converged": True, "seconds": round(time.time() - t0, 3)}
        else:
            row = {"converged": False, "seconds": None,
                   "why": f"not converged {timeout:g} s after the start: {g.why_not(n)}"}
        row.update(_counts([p.send("stats") for p in procs], g.peer))
    finally:
        close_all(procs)
    return row


def storm_row(name: str, made: Any, zk: KazooClient, zk_addr: str, bootstrap: str,
              sizes: list[int], rounds: int, partitions: int,
              timeout: float = 120.0) -> dict[str, Any]:
    """A peer's storms: for each size, ``rounds`` fresh groups on fresh topics; or why it
    cannot run."""
    peer = PEERS[name]
    try:
        peer.build()
    except PeerUnavailable as e:
        return {**peer.about, "not_run": str(e)}
    out = []
    for n in sizes:
        rows = []
        for r in range(rounds):
            g = _fresh(peer, made, zk, zk_addr, bootstrap, partitions, "storm")
            rows.append(_storm_round(g, n, timeout))
            _progress(f"{name} storm of {n}, round {r + 1}: {rows[-1]}")
        secs = [x["seconds"] for x in rows if x["converged"]]
        fails = [x["failed_attempts"] for x in rows]
        out.append({
            "members": n, "partitions": partitions, "rounds": rows,
            "converged_rounds": len(secs),
            "seconds_median": statistics.median(secs) if secs else None,
            "seconds_max": max(secs) if len(secs) == len(rows) else None,
            "failed_attempts": None if None in fails else sum(fails),
        })
    return {**peer.about, "member_processes": "one per member", "storms": out,
            "timing": "from the join command posted to every prepared member process to "
                      "the owner znodes holding the peer's own assignment for all members "
                      "(polled every 10 ms from the benchmark's process)"}


def _pct(xs: list[float]) -> dict[str, Any]:
    if not xs:
        return {"p50": None, "p99": None, "samples": 0}
    s = sorted(xs)
    return {"p50": round(statistics.median(s) * 1000, 1),
            "p99": round(s[min(len(s) - 1, int(round(0.99 * (len(s) - 1))))] * 1000, 1),
            "max": round(s[-1] * 1000, 1), "samples": len(s)}


def rebalance_row(name: str, made: Any, zk: KazooClient, zk_addr: str, bootstrap: str,
                  members: int, partitions: int, changes: int,
                  timeout: float = 90.0) -> dict[str, Any]:
    """A peer's join and leave latency: ``members`` member processes started one after the
    other, then a spare (started ahead) joining and leaving in turn; each change timed from
    the change in the member's process (its ``at``) to the peer's own assignment for the
    new membership seen in ZooKeeper (polled every 10 ms)."""
    peer = PEERS[name]
    try:
        peer.build()
    except PeerUnavailable as e:
        return {**peer.about, "not_run": str(e)}
    g = _fresh(peer, made, zk, zk_addr, bootstrap, partitions, "rb")
    spawned = Spawned(g.spawn, then=lambda m: m.send("prepare"))
    spawn = spawned.new

    latencies: dict[str, list[float]] = {"join": [], "leave": []}
    failure: str | None = None
    live: list[MemberProcess] = []
    left: list[dict[str, Any]] = []
    counts: dict[str, Any] = {}
    try:
        _progress(f"{name}: starting {members} member processes on {partitions} partitions")
        spare = spawn()
        for k in range(members):
            m = spawn()
            try:
                m.join()
            except SystemExit as e:  # the peer refused to join: said in the row
                failure = f"member {k + 1} could not join: {e}"
                break
            live.append(m)
            if not g.settles(k + 1, timeout):
                failure = f"member {k + 1} not settled within {timeout:g} s: {g.why_not(k + 1)}"
                break
        before = [m.send("stats") for m in live]
        extra: MemberProcess | None = None
        for i in range(changes if failure is None else 0):
            if extra is None:
                kind, extra = "join", spare
                try:
                    t0 = extra.join()
                except SystemExit as e:
                    failure = f"change {i + 1} (join) could not join: {e}"
                    break
                live.append(extra)
            else:
                kind = "leave"
                left.append(extra.send("stats"))
                t0 = float(extra.send("leave")["at"])
                live.remove(extra)
                extra = None
            if not g.settles(len(live), timeout):
                failure = (f"change {i + 1} ({kind}) not settled within {timeout:g} s: "
                           f"{g.why_not(len(live))}")
                break
            latencies[kind].append(time.time() - t0)
            if kind == "leave":
                spare = spawn()  # the next joiner, started ahead, once settled
            _progress(f"{name} change {i + 1}/{changes} ({kind}): "
                      f"{latencies[kind][-1] * 1000:.0f} ms")
        after = [m.send("stats") for m in live] + left
        counts = _counts(after, peer)
        for key in ("rebalances", "failed_attempts"):
            if counts.get(key) is not None:
                counts[key] -= sum(int(s.get(key, 0)) for s in before)
    finally:
        spawned.close()
    both = latencies["join"] + latencies["leave"]
    return {
        **peer.about, "members": members, "partitions": partitions, "changes": changes,
        "latency_ms": {**_pct(both), "all": [round(x * 1000, 1) for x in both]},
        "join_latency_ms": _pct(latencies["join"]),
        "leave_latency_ms": _pct(latencies["leave"]),
        **counts,
        "counted_over": "the timed changes (the group's start excluded)",
        "member_processes": "one per member",
        "join": "timed from the joiner's start (in its process, started ahead) to the new "
                "assignment seen in ZooKeeper (polled every 10 ms)",
        "leave": "timed from the start of the leaver's close to the new assignment seen in "
                 "ZooKeeper (polled every 10 ms)",
        "failure": failure,
    }


# ---- throughput ---------------------------------------------------------------------------

def throughput_argv(name: str, zk: str, topic: str, n: int) -> list[str] | str:
    """The ``count=n`` command of a peer (its group added per run), or why it cannot run."""
    peer = PEERS[name]
    try:
        peer.build()
    except PeerUnavailable as e:
        return str(e)
    return peer.argv(zk, "{group}", topic, {"count": str(n)})


def counted_run(argv: list[str], timeout_s: float, grace_s: float
                ) -> tuple[int | None, tuple[int, int, int] | None, str]:
    """Runs a counting member (the peers', the JVM's ``--output count``) to its end, or
    SIGTERMs it after ``timeout_s`` (its shutdown prints the count so far) and kills it after
    ``grace_s`` more: (exit status, its last ``COUNT got first_ns last_ns`` line or None,
    its stderr)."""
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.terminate()
            try:
                out, _ = proc.communicate(timeout=grace_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, _ = proc.communicate()
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    counts = [line.split() for line in out.decode(errors="replace").splitlines()
              if line.startswith("COUNT ")]
    if not counts:
        return proc.returncode, None, stderr
    got, first, last = (int(w) for w in counts[-1][1:4])
    return proc.returncode, (got, first, last), stderr


def throughput_run(argv: list[str], n: int, made: Any, deadline_s: float) -> float:
    """One peer reading the ``n`` messages in a fresh group: its rate from its first message
    to its ``n``-th, timed by the peer (its COUNT line)."""
    group = f"bench-peer-{uuid.uuid4().hex[:8]}"
    made.groups.add(group)
    returncode, count, stderr = counted_run(
        [a.replace("{group}", group) for a in argv], deadline_s, grace_s=30)
    if count is None:
        raise RuntimeError(f"{argv[0]} exited with {returncode} and no count: "
                           f"{stderr[-2000:]}")
    got, first, last = count
    if got < n or last < 0:
        raise RuntimeError(f"{argv[0]}: only {got} of {n} messages read in {deadline_s:g} s")
    return n / ((last - first) / 1e9)


# ---- idle CPU (issue 38) -----------------------------------------------------------------

def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle_cpu(made: Any, zk: KazooClient, zk_addr: str, bootstrap: str, seconds: float,
             partitions: int = 10, streams: int = 2) -> dict[str, Any]:
    """One member at a time alone in a group on an idle topic (``partitions`` partitions,
    ``streams`` streams, real fetchers): its process's CPU seconds (/proc, user + system)
    over ``seconds`` once it owns every partition, per zkconsumer backend and the JVM."""
    rows: dict[str, Any] = {}
    kinds: list[tuple[str, Callable[[_PeerGroup], MemberProcess]]] = [
        (f"zkconsumer_{b.replace('-', '_')}",
         functools.partial(_zkc_member, backend=b, streams=streams))
        for b in ("kafka-python", "confluent")]
    kinds.append(("jvm_1_1_1", functools.partial(_jvm_member, streams=streams)))
    for row, make in kinds:
        peer = PEERS["jvm_1_1_1"]
        g = _fresh(peer, made, zk, zk_addr, bootstrap, partitions, f"idle-{row[:12]}")
        try:
            m = make(g)
        except PeerUnavailable as e:
            rows[row] = {"not_run": str(e)}
            continue
        try:
            m.join()
            wait_until(functools.partial(_owns_all, g), 60, f"{row} owns every partition")
            time.sleep(2.0)  # past its start
            c0, t0 = _cpu_s(m.proc.pid), time.monotonic()
            time.sleep(seconds)
            c1, t1 = _cpu_s(m.proc.pid), time.monotonic()
        finally:
            close_all([m])
        rows[row] = {"cpu_s": round(c1 - c0, 3), "wall_s": round(t1 - t0, 2),
                     "percent_of_a_core": round(100 * (c1 - c0) / (t1 - t0), 2)}
        _progress(f"idle {row}: {rows[row]}")
    return {"partitions": partitions, "streams": streams, "idle_s": seconds,
            "measure": "CPU seconds (user + system, /proc/<pid>/stat) of the member's "
                       "process over the idle window, after it owns every partition",
            "members": rows}


def _owns_all(g: _PeerGroup) -> bool:
    return len(_owners(g.zk, g.group, g.topic, g.partitions)) == len(g.partitions)


def _zkc_member(g: _PeerGroup, backend: str, streams: int) -> MemberProcess:
    props = {"auto.commit.enable": "false", "zookeeper.session.timeout.ms": "6000",
             "fetch.backend": backend, "streams": str(streams)}
    return MemberProcess(g.zk_addr, g.group, g.topic, props, fetch=True)


def _jvm_member(g: _PeerGroup, streams: int) -> MemberProcess:
    PEERS["jvm_1_1_1"].build()
    p = g.spawn({"streams": str(streams)})
    p.send("prepare")
    return p
