"""The exporter scraped by a real Prometheus (Debian's ``prometheus``, installed by the
bootstrap): every PromQL expression of the Grafana dashboard and of the shipped alerting rules
(docs/prometheus/zkconsumer-alerts.yml) returns series for a live group, and every alert is
evaluated by Prometheus on those series (pending, as their ``for`` has not passed)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from kazoo.client import KazooClient

from tests.support import StackInfo, produce, produce_bulk, reaped, wait_until
from zkconsumer.stack.local import free_port
from zkconsumer.zk import paths as zp

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "docs" / "grafana" / "zkconsumer-lag.json"
RULES = REPO / "docs" / "prometheus" / "zkconsumer-alerts.yml"
JOB = "zkconsumer-exporter"  # the job name ZkConsumerExporterDown names
#: Alerts whose thresholds a live group reaches only after minutes (a 10-minute-old backlog).
NEEDS_HISTORY = {"ZkConsumerTimeLagHigh"}


def dashboard_exprs() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return [t["expr"] for p in dashboard["panels"] for t in p["targets"]]


def rules() -> list[dict[str, Any]]:
    return [r for g in yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]
            for r in g["rules"]]


@contextmanager
def exporter(zookeeper: str, group: str, *extra: str) -> Iterator[str]:
    """``zkconsumer exporter`` for one group, polling every 0.5 s with a window of 2; yields
    its ``host:port``."""
    argv = [sys.executable, "-m", "zkconsumer", "exporter", "--zookeeper", zookeeper,
            "--group", group, "--port", "0", "--interval", "0.5", "--window", "2", *extra]
    with reaped(subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, cwd=REPO,
                                 env={**os.environ, "PYTHONPATH": str(REPO)})) as proc:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        found = re.match(r"zkconsumer exporter: serving http://(127\.0\.0\.1:\d+)/metrics", first)
        assert found, first
        yield found.group(1)


class Prometheus:
    """A Prometheus server of its own, scraping ``targets`` every second as job ``JOB`` and
    evaluating the shipped rules every second."""

    def __init__(self, directory: Path, targets: list[str]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(RULES)],
            "scrape_configs": [{"job_name": JOB, "static_configs": [{"targets": targets}]}],
        }
        (directory / "prometheus.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
        self.argv = [str(shutil.which("prometheus")),
                     f"--config.file={directory / 'prometheus.yml'}",
                     f"--storage.tsdb.path={directory / 'data'}",
                     f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"]

    def get(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        try:
            with urllib.request.urlopen(f"{self.url}{path}{query}", timeout=10) as answer:
                body = json.loads(answer.read().decode())
        except urllib.error.HTTPError as e:  # Prometheus says why in the body
            raise AssertionError(f"{path} {params}: {e} {e.read().decode()}") from e
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        data = self.get("/api/v1/query", query=expr)
        assert data["resultType"] == "vector", (expr, data)
        return list(data["result"])

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False


@pytest.fixture
def live_group(stack: StackInfo, zk: KazooClient, names: Any, topic_factory: Any
               ) -> tuple[str, str]:
    """(group, topic): one member owning partition 0 of two, committed at 1 of 10,002 (lag
    10,001, above ZkConsumerLagHigh's 10,000) and committing no more (so STOP once the
    exporter's window is full); partition 1 unowned."""
    topic = topic_factory(names.topic, 2)
    produce_bulk(stack.bootstrap, topic, 0, b"x", 10_002)
    produce(stack.bootstrap, topic, [(1, None, b"y")] * 2)
    g = names.group
    zk.create(zp.offset_path(g, topic, 0), b"1", makepath=True)
    reg = zp.ConsumerRegistration.static({topic: 1}, int(time.time() * 1000))
    zk.create(zp.id_path(g, f"{g}_m"), reg.encode(), ephemeral=True, makepath=True)
    zk.create(zp.owner_path(g, topic, 0), zp.encode_owner(f"{g}_m-0"), ephemeral=True,
              makepath=True)
    return g, topic


def test_dashboard_and_alerts_evaluate_on_a_live_group(
        stack: StackInfo, live_group: tuple[str, str]) -> None:
    assert shutil.which("prometheus"), "no prometheus on PATH: tools/_bootstrap.sh installs it"
    g, topic = live_group
    with ExitStack() as stack_of, tempfile.TemporaryDirectory(prefix="zkc-prom-") as d:
        live = stack_of.enter_context(exporter(stack.zookeeper, g))
        # A second exporter whose brokers do not answer (log ends unknown), and a target
        # where nothing listens (the exporter down).
        blind = stack_of.enter_context(
            exporter(stack.zookeeper, g, "--bootstrap-server", "127.0.0.1:1"))
        prom = Prometheus(Path(d), [live, blind, f"127.0.0.1:{free_port()}"])
        stack_of.enter_context(reaped(subprocess.Popen(
            prom.argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)))
        wait_until(prom.ready, 60, "Prometheus ready")
        # Messages appended while the exporter polls give its timeline a rate: the backlog
        # from before its first poll gets an age (extrapolated from that rate).
        produce(stack.bootstrap, topic, [(0, None, b"z")] * 20)
        wait_until(lambda: prom.query(f'zkconsumer_group_max_time_lag_seconds{{group="{g}"}}'),
                   60, "the group's time lag, as Prometheus sees it")
        wait_until(lambda: prom.query(f'zkconsumer_group_status_code{{group="{g}"}} > 1'), 60,
                   "the group's status not OK, as Prometheus sees it")
        # rate() over [5m] needs two samples of each series.
        wait_until(lambda: prom.query(f'count_over_time(zkconsumer_group_lag{{group="{g}"}}[5m])'
                                      ' > 2'), 30, "three scrapes")

        for expr in dashboard_exprs():
            # The group's name is plain: letters, digits and '-', literal in a regex too.
            got = prom.query(expr.replace("$group", g))
            assert got, f"no series for the dashboard's {expr!r}"
            assert all(s["metric"].get("group", g) == g for s in got), (expr, got)

        for rule in rules():
            expr = rule["expr"]
            if rule["alert"] in NEEDS_HISTORY:
                # Its threshold takes longer than a test to reach: what it compares must
                # have series, and the whole expression must evaluate.
                prom.query(expr)
                expr = expr.rsplit(">", 1)[0]
            got = prom.query(expr)
            assert got, f"no series for {rule['alert']}'s {expr!r}"
            if "group" in rule["expr"] and "exporter" not in rule["expr"]:
                assert {s["metric"].get("group") for s in got} == {g}, (rule["alert"], got)

        def evaluated() -> dict[str, tuple[str, str, int]]:
            found = prom.get("/api/v1/rules", type="alert")["groups"]
            return {r["name"]: (r["health"], r["state"], len(r["alerts"]))
                    for grp in found for r in grp["rules"]}

        names = {r["alert"] for r in rules()}
        wait_until(lambda: set(evaluated()) == names
                   and all(n > 0 for name, (_, _, n) in evaluated().items()
                           if name not in NEEDS_HISTORY), 30,
                   "every alert evaluated with an active alert")
        for name, (health, state, _) in evaluated().items():
            assert health == "ok", (name, health)
            assert name in NEEDS_HISTORY or state in ("pending", "firing"), (name, state)
