"""What every benchmark (tools/bench_*.py) and the soak share: the stack they run on (a
local one, or the user's from ZKCONSUMER_ZOOKEEPER/ZKCONSUMER_BOOTSTRAP, cleaned up after),
progress lines, and the result files of bench-results/ with their header (the commit
measured, the machine, its load)."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka.admin import KafkaAdminClient

from zkconsumer._errors import UnknownGroupError
from zkconsumer.consumer import connector
from zkconsumer.ops import delete_group
from zkconsumer.stack.local import running_stack
from zkconsumer.zk.session import connect

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench-results"


@dataclass
class Made:
    """The topics and legacy groups a benchmark created: deleted at its end when the stack is
    the user's (``ZKCONSUMER_ZOOKEEPER``/``ZKCONSUMER_BOOTSTRAP``); a local stack goes whole."""

    topics: set[str] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)


@contextmanager
def stack(made: Made | None = None) -> Iterator[tuple[str, str]]:
    zk, bs = os.environ.get("ZKCONSUMER_ZOOKEEPER"), os.environ.get("ZKCONSUMER_BOOTSTRAP")
    if bool(zk) != bool(bs):
        # One alone would silently measure a local stack instead of the one meant.
        raise SystemExit("tools/bench: set both ZKCONSUMER_ZOOKEEPER and ZKCONSUMER_BOOTSTRAP "
                         "(or neither)")
    if zk and bs:
        try:
            yield zk, bs
        finally:
            if made is not None:
                clean_up(zk, bs, made)
        return
    with tempfile.TemporaryDirectory(prefix="zkc-bench-") as d, running_stack(d) as s:
        yield s.zookeeper, s.bootstrap


def clean_up(zk_addr: str, bootstrap: str, made: Made) -> None:
    """Delete what the benchmark made, best-effort: what stays is said, with the reason."""
    left: list[str] = []
    if made.groups:
        zk = connect(zk_addr)
        try:
            for group in sorted(made.groups):
                try:
                    delete_group(zk, group)
                except UnknownGroupError:
                    pass  # never created (a run that failed early)
                except Exception as e:  # noqa: BLE001 - said, and the rest still deleted
                    left.append(f"group {group} ({e})")
        finally:
            zk.stop()
            zk.close()
    if made.topics:
        try:
            admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="zkconsumer-bench")
            try:
                admin.delete_topics(sorted(made.topics))
            finally:
                admin.close()
        except Exception as e:  # noqa: BLE001 - said
            left.append(f"topics {', '.join(sorted(made.topics))} ({e})")
    for what in left:
        progress(f"left on the stack: {what}")


def progress(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


@functools.cache
def measured_commit() -> str | None:
    """``git rev-parse HEAD`` of the checkout (``+dirty`` with uncommitted changes outside
    ``bench-results``, ``docs`` and Markdown files), or None outside a git checkout. Read
    once, when the run starts (see :func:`main`): what was measured, whatever is edited
    while it runs."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True, check=True, timeout=10).stdout.strip()
        # Results files written since are not changes to the code measured.
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--",
                                ".", ":!bench-results", ":!docs", ":!*.md"],
                               cwd=ROOT, capture_output=True, text=True, check=True,
                               timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+dirty" if dirty else "")


def result_header(name: str) -> dict[str, Any]:
    """What every result file starts with (the benchmarks' and the soak's)."""
    return {
        "benchmark": name,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        # The code measured: a result older than the code it describes is then visible.
        "commit": measured_commit(),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform(),
                    "bytecode_cached": bytecode_cached()},
        # The machine's load (1, 5, 15 min) when the run started and ended: other work on a
        # 2-core machine shows in the figures.
        "load_average": {"start": load_at_start(), "end": load_average()},
    }


def bytecode_cached() -> bool:
    """Whether zkconsumer's modules load from cached bytecode, as a pip install's do: every
    member process compiling them again (80 ms of CPU each) shows in the storms' figures."""
    source = connector.__file__
    cached = importlib.util.cache_from_source(source)
    return os.path.exists(cached) and os.path.getmtime(cached) >= os.path.getmtime(source)


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


@functools.cache
def load_at_start() -> list[float]:
    """The load average when the run started (read first by :func:`main`)."""
    return load_average()


def write_result(name: str, data: dict[str, Any]) -> Path:
    RESULTS.mkdir(exist_ok=True)
    data = {**result_header(name), **data}
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(data, indent=2) + "\n")
    print(json.dumps(data, indent=2))
    return path
