"""Static checks of docker-compose.yml (no Docker engine is needed, or used)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml")

COMPOSE = Path(__file__).resolve().parent.parent / "docker-compose.yml"

# Confluent Platform 7.N packages Apache Kafka 3.N.
CONFLUENT_TO_KAFKA = {"7.9": "3.9"}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, Any]:
    svcs = compose["services"]
    assert isinstance(svcs, dict)
    return svcs


def env(service: dict[str, Any]) -> dict[str, str]:
    """A service's environment as a dict, whichever compose syntax it uses."""
    raw = service.get("environment", {})
    if isinstance(raw, list):
        return dict(item.split("=", 1) for item in raw)
    return {k: str(v) for k, v in raw.items()}


def image(service: dict[str, Any]) -> tuple[str, str]:
    repo, _, tag = service["image"].rpartition(":")
    return repo, tag


def published(service: dict[str, Any]) -> list[tuple[str, int, int]]:
    """(host ip, host port, container port) of each published port (short or long syntax)."""
    out = []
    for port in service.get("ports", []):
        if isinstance(port, dict):
            out.append((port["host_ip"], int(port["published"]), int(port["target"])))
        else:
            parts = str(port).split(":")
            assert len(parts) == 3, f"{port!r} does not name the host address"
            out.append((parts[0], int(parts[1]), int(parts[2].split("/")[0])))
    return out


def depends_on(service: dict[str, Any]) -> dict[str, str]:
    raw = service.get("depends_on", {})
    if isinstance(raw, list):
        return {name: "service_started" for name in raw}
    return {name: spec.get("condition", "service_started") for name, spec in raw.items()}


def listeners(value: str) -> dict[str, tuple[str, int]]:
    """'NAME://host:port,...' -> {NAME: (host, port)}."""
    out = {}
    for item in value.split(","):
        name, _, address = item.partition("://")
        host, _, port = address.rpartition(":")
        out[name] = (host, int(port))
    return out


def test_the_three_services(services: dict[str, Any]) -> None:
    assert set(services) == {"zookeeper", "kafka", "tests"}


def test_zookeeper_is_3_8(services: dict[str, Any]) -> None:
    assert image(services["zookeeper"]) == ("zookeeper", "3.8")


def test_kafka_is_3_9(services: dict[str, Any]) -> None:
    repo, tag = image(services["kafka"])
    # apache/kafka is KRaft-only and bitnami/kafka's versioned tags are gone (see the file).
    assert repo == "confluentinc/cp-kafka"
    major_minor = ".".join(tag.split(".")[:2])
    assert CONFLUENT_TO_KAFKA.get(major_minor) == "3.9", tag
    assert len(tag.split(".")) == 3, "pin a patch release"


def test_published_ports_are_bound_to_localhost(services: dict[str, Any]) -> None:
    assert published(services["zookeeper"]) == [("127.0.0.1", 2181, 2181)]
    assert published(services["kafka"]) == [("127.0.0.1", 9092, 9092)]
    assert published(services["tests"]) == []
    for name, service in services.items():
        for host_ip, _, _ in published(service):
            assert host_ip == "127.0.0.1", name


def test_kafka_runs_in_zookeeper_mode(services: dict[str, Any]) -> None:
    kafka = env(services["kafka"])
    assert kafka["KAFKA_ZOOKEEPER_CONNECT"] == "zookeeper:2181"
    zk_host, _, zk_port = kafka["KAFKA_ZOOKEEPER_CONNECT"].partition(":")
    assert zk_host in services
    assert int(zk_port) == published(services["zookeeper"])[0][2]
    # Any KRaft setting would make it a KRaft broker (or refuse to start).
    assert not [k for k in kafka if k in ("KAFKA_PROCESS_ROLES", "KAFKA_NODE_ID", "CLUSTER_ID")]
    assert not [k for k in kafka if k.startswith("KAFKA_CONTROLLER")]
    assert kafka["KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"] == "1"


def test_kafka_listeners(services: dict[str, Any]) -> None:
    kafka = env(services["kafka"])
    bound = listeners(kafka["KAFKA_LISTENERS"])
    advertised = listeners(kafka["KAFKA_ADVERTISED_LISTENERS"])
    assert advertised == {"INTERNAL": ("kafka", 29092), "PLAINTEXT": ("localhost", 9092)}
    assert {name: port for name, (_, port) in bound.items()} == {
        "INTERNAL": 29092,
        "PLAINTEXT": 9092,
    }
    protocol_map = dict(
        item.split(":") for item in kafka["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(",")
    )
    assert protocol_map == {"INTERNAL": "PLAINTEXT", "PLAINTEXT": "PLAINTEXT"}
    assert kafka["KAFKA_INTER_BROKER_LISTENER_NAME"] == "INTERNAL"
    # The host-facing listener is the published port.
    assert advertised["PLAINTEXT"][1] == published(services["kafka"])[0][1]


def test_tests_service_points_at_the_compose_stack(services: dict[str, Any]) -> None:
    tests = services["tests"]
    variables = env(tests)
    assert variables["ZKCONSUMER_ZOOKEEPER"] == "zookeeper:2181"
    assert variables["ZKCONSUMER_BOOTSTRAP"] == "kafka:29092"
    zk_host, _, zk_port = variables["ZKCONSUMER_ZOOKEEPER"].partition(":")
    assert zk_host in services and int(zk_port) == 2181
    kafka_host, _, kafka_port = variables["ZKCONSUMER_BOOTSTRAP"].partition(":")
    assert kafka_host in services
    advertised = listeners(env(services["kafka"])["KAFKA_ADVERTISED_LISTENERS"])
    assert advertised["INTERNAL"] == (kafka_host, int(kafka_port))


def test_tests_service_reaches_the_registered_endpoint(services: dict[str, Any]) -> None:
    # Brokers found through ZooKeeper are reached on the PLAINTEXT listener, which is
    # advertised as localhost: the tests container must share the broker's network.
    assert services["tests"]["network_mode"] == "service:kafka"


def test_tests_service_runs_the_suite(services: dict[str, Any]) -> None:
    tests = services["tests"]
    assert tests["image"] == "python:3.11-slim-bookworm"
    assert ".:/src" in tests["volumes"]
    assert tests["working_dir"] == "/src"
    command = tests["command"]
    script = command if isinstance(command, str) else " ".join(command)
    # Everything the suite imports and starts: the extras, Java, Debian's ZooKeeper.
    assert "pip install -e '.[dev,spark,fast]' && pytest" in script
    assert "openjdk-17-jre-headless" in script and " zookeeper " in script


def test_tests_service_only_with_the_test_profile(services: dict[str, Any]) -> None:
    assert services["tests"]["profiles"] == ["test"]
    assert "profiles" not in services["zookeeper"]
    assert "profiles" not in services["kafka"]


def test_depends_on(services: dict[str, Any]) -> None:
    assert depends_on(services["zookeeper"]) == {}
    assert depends_on(services["kafka"]) == {"zookeeper": "service_healthy"}
    assert depends_on(services["tests"]) == {
        "zookeeper": "service_healthy",
        "kafka": "service_healthy",
    }


def test_healthchecks(services: dict[str, Any]) -> None:
    zk_test = services["zookeeper"]["healthcheck"]["test"]
    assert "zkServer.sh status" in " ".join(zk_test)
    kafka_test = " ".join(services["kafka"]["healthcheck"]["test"])
    assert "--bootstrap-server kafka:29092" in kafka_test
    assert "healthcheck" not in services["tests"]


def test_no_unescaped_interpolation() -> None:
    # Compose would substitute a bare $VAR from the caller's environment.
    text = COMPOSE.read_text(encoding="utf-8")
    assert "$" not in text.replace("$$", "")


def test_the_test_container_keeps_the_tools_off_the_mounted_venv(
    services: dict[str, Any],
) -> None:
    """The repository is mounted at /src: the host's .venv is there, with a python that does
    not exist in the container. tools/soak (run by a test) would delete it and make another."""
    assert env(services["tests"]).get("ZKCONSUMER_NO_VENV") == "1"


def _bootstrap_copy(tmp_path: Path) -> Path:
    """A repository of one file, tools/_bootstrap.sh, with a .venv whose python is gone."""
    import shutil

    (tmp_path / "tools").mkdir()
    shutil.copy(COMPOSE.parent / "tools" / "_bootstrap.sh", tmp_path / "tools")
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "python").symlink_to("/nonexistent/python3.11")
    return tmp_path


def test_bootstrap_in_a_prepared_environment_leaves_the_venv_alone(tmp_path: Path) -> None:
    import subprocess

    root = _bootstrap_copy(tmp_path)
    done = subprocess.run(
        ["bash", "-c", 'source tools/_bootstrap.sh && echo "$PYSPARK_PYTHON"'],
        cwd=root, env={"PATH": "/usr/bin:/bin", "ZKCONSUMER_NO_VENV": "1"},
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("python3")
    assert (root / ".venv" / "bin" / "python").is_symlink()  # untouched


def test_bootstrap_refuses_a_python_older_than_3_11(tmp_path: Path) -> None:
    import subprocess

    root = _bootstrap_copy(tmp_path)
    old = root / "python3.9"
    old.write_text('#!/bin/sh\n[ "$1" = -V ] && echo "Python 3.9.2"\nexit 1\n')
    old.chmod(0o755)
    done = subprocess.run(
        ["bash", "-c", "source tools/_bootstrap.sh"], cwd=root,
        env={"PATH": "/usr/bin:/bin", "PYTHON": str(old)},
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "zkconsumer needs Python 3.11 or later" in done.stderr
    assert "Python 3.9.2" in done.stderr
    assert (root / ".venv" / "bin" / "python").is_symlink()  # untouched
