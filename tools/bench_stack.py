"""The local stack's start-up time and memory, for each broker (quoted in docs/local-stack.md).

    tools/bench stack [--rounds 3]

Each round starts a fresh stack of each broker in a temporary directory (``stack up``: until
every component answers, the broker's group coordinator included), records the time that
took, waits ``--settle`` seconds, reads each component's resident memory (``VmRSS``), and
stops it. The JSON gives every round and the medians.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tools.bench_common import progress, write_result
from zkconsumer.stack.local import BROKERS, LocalStack, describe


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _one_round(broker: str, settle_s: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="zkc-bench-stack-") as d:
        stack = LocalStack(d, broker=broker, tied=True)
        started = time.monotonic()
        try:
            stack.up()
            up_s = time.monotonic() - started
            time.sleep(settle_s)  # memory at rest, not mid-start
            rss = {name: round(_rss_mib(proc.pid), 1) for name, proc in stack.procs.items()}
        finally:
            stack.down()
    return {"up_s": round(up_s, 2), "rss_mib": rss}


def bench_stack(args: argparse.Namespace) -> None:
    result: dict[str, Any] = {"settle_s": args.settle, "brokers": {}}
    for broker in BROKERS:
        rounds = []
        for i in range(args.rounds):
            rounds.append(_one_round(broker, args.settle))
            progress(f"{broker} round {i + 1}: {rounds[-1]}")
        components = rounds[0]["rss_mib"]
        result["brokers"][broker] = {
            "software": describe(broker),
            "rounds": rounds,
            "median_up_s": statistics.median(r["up_s"] for r in rounds),
            "median_rss_mib": {c: statistics.median(r["rss_mib"][c] for r in rounds)
                               for c in components},
        }
    write_result("stack", result)


def register(sub: Any) -> None:
    p = sub.add_parser("stack", help="the local stack's start-up time and memory per broker")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--settle", type=float, default=10.0,
                   help="seconds after up before memory is read")
    p.set_defaults(func=bench_stack)
