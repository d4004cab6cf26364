"""Fixtures of the compose fault tests (tests/compose, run only by tools/compose-check).

They take the docker-compose stack as the suite's external one (``ZKCONSUMER_ZOOKEEPER``,
``ZKCONSUMER_BOOTSTRAP``) and reach its containers through the Docker engine with the
``docker`` package (the ``compose`` extra): ``ZKCONSUMER_COMPOSE_PROJECT`` names the compose
project. ``fault_run`` and ``report`` are the fault suite's.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.faults.conftest import fault_run, report
from tests.support import wait_until

__all__ = ["Compose", "compose", "fault_run", "report"]


@dataclass
class Compose:
    """The compose project's containers and network, by service name."""

    client: Any
    project: str

    def container(self, service: str) -> Any:
        found = self.client.containers.list(all=True, filters={"label": [
            f"com.docker.compose.project={self.project}",
            f"com.docker.compose.service={service}"]})
        assert len(found) == 1, f"{len(found)} {service} containers in project {self.project}"
        return found[0]

    def network(self) -> Any:
        found = self.client.networks.list(names=[f"{self.project}_default"])
        assert len(found) == 1, f"no network {self.project}_default"
        return found[0]

    def wait_healthy(self, service: str, timeout: float = 120.0) -> None:
        def healthy() -> bool:
            c = self.container(service)
            assert c.status in ("running", "paused"), (
                f"{service} {c.status}:\n{c.logs(tail=40).decode(errors='replace')}")
            return bool(c.attrs["State"].get("Health", {}).get("Status") == "healthy")

        wait_until(healthy, timeout, f"{service} healthy")


@pytest.fixture(scope="session")
def compose() -> Iterator[Compose]:
    import docker

    project = os.environ.get("ZKCONSUMER_COMPOSE_PROJECT")
    if not (project and os.environ.get("ZKCONSUMER_ZOOKEEPER")
            and os.environ.get("ZKCONSUMER_BOOTSTRAP")):
        pytest.exit("tests/compose needs the compose stack: set ZKCONSUMER_COMPOSE_PROJECT, "
                    "ZKCONSUMER_ZOOKEEPER and ZKCONSUMER_BOOTSTRAP (tools/compose-check does)",
                    2)
    client = docker.from_env()
    stack = Compose(client, project)
    try:
        for service in ("zookeeper", "kafka"):
            stack.wait_healthy(service)
        yield stack
    finally:
        client.close()
