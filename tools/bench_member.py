"""One group member in its own process, driven over stdin by ``tools/bench rebalance``
(through :class:`tools.bench_procs.MemberProcess`).

    python -m tools.bench_member ZK GROUP TOPIC [fetch=0|1] [kind=zkconsumer|pykafka]
        [key=value ...]

A group's members are separate processes, as they are in production: run in one process,
ten members share one interpreter lock, and every ZooKeeper answer waits its turn behind the
other members' threads, which measures the benchmark's packing rather than the rebalance.
``kind=pykafka`` runs pykafka 2.8.0's BalancedConsumer instead (its peer row; the extra
``strategy=range|roundrobin`` picks its membership protocol).

Commands, one per line; each answer is one line of JSON on stdout:

- ``join``: make the member (its clients too) and start it; ``{"at": <time.time() before
  making it>, "id": <consumer id>}`` once its first rebalance is done.
- ``stats``: zkconsumer's rebalance counters, with ``done_at``, the time.time() at which its
  last rebalance ended; pykafka's log counts (it keeps no counters).
- ``owned`` (zkconsumer): what the member believes it owns, partition -> thread.
- ``prepare`` (pykafka, before ``join``): make its clients and open its session, so that
  ``join`` only starts it.
- ``leave``: ``{"at": <time.time()>}`` at once, then the member leaves (zkconsumer's
  ``shutdown()``, pykafka's ``stop()``).
- ``halt``: pykafka's member stops reacting to the group's watches (a run's end: the others
  leaving then start no rebalance); nothing for zkconsumer's, whose shutdown does so first.
- end of input: the member stops (pykafka's without leaving the group, so that the others
  do not rebalance at a run's end) and the process exits.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

from tools import bench_pykafka
from zkconsumer import ConsumerConfig, ZookeeperConsumerConnector
from zkconsumer.stack.testing import NullFetcher


def _drain(stream: Any) -> None:
    """A stream read as an application would (a bench topic is idle or near it)."""
    try:
        for _ in stream:
            pass
    except Exception:  # noqa: BLE001 - the stream ends (or fails) at shutdown
        pass


def answer(data: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(data) + "\n")
    sys.stdout.flush()


class ZkConsumerMember:
    def __init__(self, zk: str, group: str, topic: str, fetch: bool,
                 props: dict[str, str]) -> None:
        self.topic = topic
        self.fetch = fetch
        self.streams = int(props.pop("streams", "1"))
        self.props = {"zookeeper.connect": zk, "group.id": group, **props}
        self.connector: ZookeeperConsumerConnector | None = None

    def join(self) -> str:
        self.connector = ZookeeperConsumerConnector(
            ConsumerConfig(self.props), fetcher_factory=None if self.fetch else NullFetcher)
        for stream in self.connector.create_message_streams(
                {self.topic: self.streams})[self.topic]:
            threading.Thread(target=_drain, args=(stream,), daemon=True).start()
        return self.connector.consumer_id

    def stats(self) -> dict[str, Any]:
        if self.connector is None:
            return {}
        s = self.connector.stats
        return {"rebalances": s.rebalances, "done_at": s.last_done_at,
                "zk_ops": s.last_zk_ops, "claim_waits": s.claim_waits,
                "failures": s.failures, "restarts": s.restarts}

    def owned(self) -> dict[str, str]:
        """Partition (as a string) -> thread, as this member believes it owns them."""
        if self.connector is None:
            return {}
        return {str(tp.partition): th for tp, th in self.connector.owned_partitions().items()}

    def leave(self) -> None:
        if self.connector is not None:
            self.connector.shutdown()
            self.connector = None

    stop = leave


class PykafkaMember:
    def __init__(self, zk: str, group: str, topic: str, fetch: bool,
                 props: dict[str, str]) -> None:
        self.group = bench_pykafka.group_of_one(zk, props["bootstrap"], group, topic, fetch,
                                                props.get("strategy", "range"))
        self.member: Any = None

    def prepare(self) -> str:
        """Its clients made and its session open, not started (a storm's start is timed
        alone, as the in-process storm's was)."""
        self.member = self.group.new_member(start=False)
        return str(self.member.id)

    def join(self) -> str:
        if self.member is None:
            self.member = self.group.new_member()
        else:
            self.member.consumer.start()
        return str(self.member.id)

    def stats(self) -> dict[str, Any]:
        return dict(bench_pykafka.log_counts())

    def leave(self) -> None:
        if self.member is not None:
            self.member.close(True)
            self.member = None

    def stop(self) -> None:
        if self.member is not None:
            self.member.close(False)
            self.member = None

    def halt(self) -> None:
        """Stop reacting to the group's watches (as the in-process rows did to every member
        before closing any): the others leaving at a run's end then start no rebalance."""
        if self.member is not None:
            self.member.consumer._running = False


def main() -> None:
    zk, group, topic = sys.argv[1:4]
    extra = dict(arg.split("=", 1) for arg in sys.argv[4:])
    fetch = extra.pop("fetch", "1") == "1"
    kind = extra.pop("kind", "zkconsumer")
    member = (PykafkaMember if kind == "pykafka" else ZkConsumerMember)(
        zk, group, topic, fetch, extra)
    joined = False
    for line in sys.stdin:
        command = line.strip()
        if command == "join" and not joined:
            at = time.time()
            answer({"at": at, "id": member.join()})
            joined = True
        elif command == "stats":
            answer(member.stats())
        elif command == "owned" and isinstance(member, ZkConsumerMember):
            answer(member.owned())
        elif command == "prepare" and isinstance(member, PykafkaMember) and not joined:
            answer({"id": member.prepare()})
        elif command == "halt":
            if isinstance(member, PykafkaMember):
                member.halt()
            answer({})  # zkconsumer's: its shutdown stops its rebalancing first anyway
        elif command == "leave" and joined:
            answer({"at": time.time()})
            member.leave()
        else:
            answer({"error": f"unknown or out-of-turn command {command!r}"})
    member.stop()


if __name__ == "__main__":
    main()
