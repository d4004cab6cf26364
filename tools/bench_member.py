"""One group member in its own process, driven over stdin by ``tools/bench rebalance``.

    python -m tools.bench_member ZK GROUP TOPIC [key=value ...]   (fetch=0: no fetchers)

A group's members are separate processes, as they are in production: run in one process,
ten members share one interpreter lock, and every ZooKeeper answer waits its turn behind the
other members' threads, which measures the benchmark's packing rather than the rebalance.

Commands, one per line; each answer is one line of JSON on stdout:

- ``join``: create the connector and its stream; ``{"at": <time.time() before creating>,
  "id": <consumer id>}`` once the first rebalance is done.
- ``stats``: the connector's rebalance counters, and ``done_at``, the time.time() at which
  its last rebalance ended.
- ``leave``: ``{"at": <time.time()>}`` at once, then ``shutdown()`` (the group does not wait
  for the fetch clients to close once the member has left it).
- end of input: shut down and exit.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from tests.support import NullFetcher
from zkconsumer import ConsumerConfig, ZookeeperConsumerConnector


def answer(data: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(data) + "\n")
    sys.stdout.flush()


def stats(connector: ZookeeperConsumerConnector | None) -> dict[str, Any]:
    if connector is None:
        return {}
    s = connector.stats
    return {"rebalances": s.rebalances, "done_at": s.last_done_at,
            "zk_ops": s.last_zk_ops, "claim_waits": s.claim_waits, "failures": s.failures,
            "restarts": s.restarts}


def main() -> None:
    zk, group, topic = sys.argv[1:4]
    extra = dict(arg.split("=", 1) for arg in sys.argv[4:])
    fetch = extra.pop("fetch", "1") == "1"
    props = {"zookeeper.connect": zk, "group.id": group, **extra}
    connector: ZookeeperConsumerConnector | None = None
    for line in sys.stdin:
        command = line.strip()
        if command == "join" and connector is None:
            at = time.time()
            connector = ZookeeperConsumerConnector(
                ConsumerConfig(props), fetcher_factory=None if fetch else NullFetcher)
            connector.create_message_streams({topic: 1})
            answer({"at": at, "id": connector.consumer_id})
        elif command == "stats":
            answer(stats(connector))
        elif command == "leave" and connector is not None:
            answer({"at": time.time()})
            connector.shutdown()
            connector = None
        else:
            answer({"error": f"unknown or out-of-turn command {command!r}"})
    if connector is not None:
        connector.shutdown()


if __name__ == "__main__":
    main()
