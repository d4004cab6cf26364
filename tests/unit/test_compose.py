"""Static checks of docker-compose.yml (no Docker engine is needed, or used).

The compose stack runs the same software as the suite's local stack, started the same way:
the checks compare it with what :class:`zkconsumer.stack.local.LocalStack` runs (its commands and
configuration files, captured without starting anything) and with the suite's constants.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from zkconsumer.stack.classpaths import ZOOKEEPER_CLASSPATH, pom, pom_sha256
from zkconsumer.stack.local import (
    _LOG4J_PROPERTIES,
    BROKER_CLASSPATHS,
    BROKER_JVM_OPTIONS,
    BROKER_SETTINGS,
    LocalStack,
)

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
#: The files the compose services mount or build from.
COMPOSE_DIR = ROOT / "tools" / "compose"
#: Every image's build: one Dockerfile, a stage per kind of service.
DOCKERFILE = COMPOSE_DIR / "Dockerfile"
#: The one image pulled (or made with debootstrap): every other is built from it.
BASE_IMAGE = "debian:bookworm-slim"
#: Where the containers that download find the extra CA certificates (ZKCONSUMER_CA_CERTS).
CA_MOUNT = "/usr/local/share/ca-certificates/zkconsumer"
CA_SOURCE = "${ZKCONSUMER_CA_CERTS:-./tools/compose/ca-certificates}"
#: Where the jars service puts the classpaths (the volume), as ZKCONSUMER_JVM_DIR.
JARS = "/jars"
#: What differs between the suite's broker and the compose one: where each listens, where it
#: keeps its data, which ZooKeeper it registers in.
BROKER_PLACE_KEYS = {"zookeeper.connect", "listeners", "advertised.listeners",
                     "listener.security.protocol.map", "inter.broker.listener.name",
                     "log.dirs"}
#: The same for ZooKeeper.
ZOOKEEPER_PLACE_KEYS = {"dataDir", "clientPort", "clientPortAddress"}


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


def stages() -> dict[str, str]:
    """The Dockerfile's stages: name -> what it is built FROM."""
    out = {}
    for line in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        words = line.split()
        if words[:1] == ["FROM"]:
            assert len(words) == 4 and words[2] == "AS", line
            out[words[3]] = words[1]
    return out


def stage_text(name: str) -> str:
    """The Dockerfile's lines of stage ``name``, comments left out."""
    out, inside = [], False
    for line in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        if line.startswith("FROM "):
            inside = line.split()[-1] == name
        if inside and not line.startswith("#"):
            out.append(line)
    return "\n".join(out)


def built_stage(service: dict[str, Any]) -> str:
    """The Dockerfile stage a service's image is built from."""
    build = service["build"]
    assert (ROOT / build["context"]).resolve() == COMPOSE_DIR
    assert build.get("dockerfile", "Dockerfile") == "Dockerfile"
    return str(build["target"])


def lineage(stage: str) -> list[str]:
    """``stage``, the stage it is built from, and so on down to the base image."""
    out, known = [stage], stages()
    while out[-1] in known:
        out.append(known[out[-1]])
    return out


def pinned(name: str) -> dict[tuple[str | None, str | None], str | None]:
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    return {
        (d.findtext("m:groupId", namespaces=ns), d.findtext("m:artifactId", namespaces=ns)):
            d.findtext("m:version", namespaces=ns)
        for d in ET.parse(pom(name)).getroot().iterfind("m:dependencies/m:dependency", ns)
    }


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


def command(service: dict[str, Any]) -> list[str]:
    """A service's command as a list (the exec form)."""
    raw = service.get("command")
    assert isinstance(raw, list), f"{raw!r}: give the command in the list form"
    return [str(arg) for arg in raw]


def mounts(service: dict[str, Any]) -> dict[str, str]:
    """Container path -> source (``./path`` for a file of the repository, else a volume)."""
    out = {}
    for spec in service.get("volumes", []):
        spec = str(spec).replace(CA_SOURCE, "CA")  # its default holds a colon
        source, target = spec.split(":")[:2]
        out[target] = CA_SOURCE if source == "CA" else source
    return out


def mounted_file(service: dict[str, Any], target: str) -> Path:
    """The repository file a service mounts at ``target``."""
    source = mounts(service).get(target)
    assert source is not None and source.startswith("./"), f"{target} is not mounted"
    path = ROOT / source
    assert path.is_file(), source
    return path


def properties(text: str) -> dict[str, str]:
    """``key=value`` lines (comments and blank lines left out), each key once."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        assert sep and key not in out, line
        out[key] = value
    return out


def kafka_properties(services: dict[str, Any]) -> dict[str, str]:
    cfg = mounted_file(services["kafka"], command(services["kafka"])[-1])
    return properties(cfg.read_text(encoding="utf-8"))


def _capture_spawn(stack: LocalStack, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Make ``stack`` record the command lines it would start instead of starting them."""
    argvs: list[list[str]] = []

    def popen(name: str, argv: list[str], env: dict[str, str] | None = None) -> int:
        argvs.append(argv)
        return 0

    monkeypatch.setattr(stack, "_popen", popen)
    return argvs


def stamp(jvm: Path, name: str) -> None:
    """Mark ``jvm/name`` as copied from its pom as it is now (what tools/jvm/resolve writes)."""
    (jvm / name / ".resolved").write_text(pom_sha256(name) + "\n")


def suite_zookeeper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], Path]:
    """The command line and zoo.cfg the suite's stack starts ZooKeeper with."""
    jvm = tmp_path / "jvm"
    (jvm / ZOOKEEPER_CLASSPATH).mkdir(parents=True)
    stamp(jvm, ZOOKEEPER_CLASSPATH)
    monkeypatch.setenv("ZKCONSUMER_JVM_DIR", str(jvm))
    stack = LocalStack(tmp_path / "stack")
    stack.zk_port = 2181
    argvs = _capture_spawn(stack, monkeypatch)
    stack._spawn_zookeeper()
    return argvs[0], tmp_path / "stack" / "zookeeper" / "zoo.cfg"


def suite_kafka(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], Path]:
    """The command line and server.properties the suite's stack starts its broker with."""
    jvm = tmp_path / "jvm"
    (jvm / BROKER_CLASSPATHS["kafka"]).mkdir(parents=True)
    stamp(jvm, BROKER_CLASSPATHS["kafka"])
    monkeypatch.setenv("ZKCONSUMER_JVM_DIR", str(jvm))
    stack = LocalStack(tmp_path / "stack", broker="kafka")
    stack.zk_port, stack.broker_port = 2181, 9092
    argvs = _capture_spawn(stack, monkeypatch)
    stack._spawn_kafka()
    return argvs[0], tmp_path / "stack" / "broker" / "server.properties"


def test_the_four_services(services: dict[str, Any]) -> None:
    assert set(services) == {"jars", "zookeeper", "kafka", "tests"}


def test_the_jars_service_copies_the_suites_classpaths_with_the_suites_script(
    compose: dict[str, Any], services: dict[str, Any],
) -> None:
    jars = services["jars"]
    assert "maven" in lineage(built_stage(jars))
    # tools/jvm/resolve copies every pinned classpath to $ZKCONSUMER_JVM_DIR/<name>/ with its
    # .resolved stamp, as for the suite; the checkout is read-only to it.
    assert command(jars) == ["trust-ca-certificates", "bash", "/src/tools/jvm/resolve"]
    assert mounts(jars) == {"/src": ".", JARS: "jars", CA_MOUNT: CA_SOURCE}
    assert ".:/src:ro" in jars["volumes"]
    assert env(jars) == {"ZKCONSUMER_JVM_DIR": JARS}
    assert "jars" in compose["volumes"]
    assert "profiles" not in jars


def test_the_suites_poms_pin_apache_kafka_3_9_2_and_zookeeper_3_8_4() -> None:
    assert pinned(BROKER_CLASSPATHS["kafka"])[("org.apache.kafka", "kafka_2.13")] == "3.9.2"
    assert pinned(ZOOKEEPER_CLASSPATH)[("org.apache.zookeeper", "zookeeper")] == "3.8.4"


def test_kafka_runs_the_suites_jars(services: dict[str, Any]) -> None:
    kafka = services["kafka"]
    # Java 17, as the suite's broker needs (find_java(17)).
    assert "jre" in lineage(built_stage(kafka))
    assert mounts(kafka)[JARS] == "jars"
    assert "jars:/jars:ro" in kafka["volumes"]
    argv = command(kafka)
    assert argv[argv.index("-cp") + 1] == f"{JARS}/{BROKER_CLASSPATHS['kafka']}/*"
    assert argv[argv.index("-cp") + 2] == "kafka.Kafka"


def test_kafka_command_is_the_suites(
    services: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    suite, cfg = suite_kafka(tmp_path, monkeypatch)
    jvm = tmp_path / "jvm"
    expected = ["java"]
    for arg in suite[1:]:
        if arg.startswith("-Dzkconsumer.broker="):
            continue  # the suite's marker for its own processes
        arg = arg.replace(str(cfg.parent / "log4j.properties"), "/etc/zkconsumer/log4j.properties")
        arg = arg.replace(str(cfg), "/etc/zkconsumer/server.properties")
        expected.append(arg.replace(str(jvm), JARS))
    assert command(services["kafka"]) == expected
    assert tuple(command(services["kafka"])[1:1 + len(BROKER_JVM_OPTIONS)]) == BROKER_JVM_OPTIONS


def test_kafka_settings_are_the_suites(
    services: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    compose_settings = kafka_properties(services)
    for line in BROKER_SETTINGS:
        key, _, value = line.partition("=")
        assert compose_settings.get(key) == value, line
    # Nothing else differs from the suite's server.properties but where the broker is.
    _, cfg = suite_kafka(tmp_path, monkeypatch)
    suite_settings = properties(cfg.read_text(encoding="utf-8"))
    assert {k: v for k, v in compose_settings.items() if k not in BROKER_PLACE_KEYS} == {
        k: v for k, v in suite_settings.items() if k not in BROKER_PLACE_KEYS}


def test_kafka_logging_is_the_suites(services: dict[str, Any]) -> None:
    argv = command(services["kafka"])
    option = next(a for a in argv if a.startswith("-Dlog4j.configuration=file:"))
    log4j = mounted_file(services["kafka"], option.partition("file:")[2])
    lines = [line for line in log4j.read_text(encoding="utf-8").splitlines()
             if not line.startswith("#")]
    assert lines == _LOG4J_PROPERTIES.splitlines()


def test_every_image_is_built_from_debian_bookworm_slim(services: dict[str, Any]) -> None:
    known = stages()
    assert set(known.values()) - set(known) == {BASE_IMAGE}  # the one image not built here
    for name, service in services.items():
        assert lineage(built_stage(service))[-1] == BASE_IMAGE, name
        # Built here, tagged with a name of the project's own: never pulled by that name.
        assert service["image"].startswith("zkconsumer-compose/"), name


def test_the_images_are_debians_builds() -> None:
    # Java 17, Maven and Python 3.11 from Debian's packages, as on the suite's machines; no
    # ZooKeeper package (ZooKeeper is the zookeeper-3.8 classpath, from Maven Central).
    assert "openjdk-17-jre-headless" in stage_text("jre")
    assert """grep -q '"17\\.'""" in stage_text("jre")
    assert " maven" in stage_text("maven")
    assert "python3 python3-venv" in stage_text("tests")
    assert "sys.version_info[:2] == (3, 11)" in stage_text("tests")
    text = DOCKERFILE.read_text(encoding="utf-8")
    assert " zookeeper" not in text.replace("# ", "")
    assert "pip install" not in text  # builds fetch only Debian's packages (no CA needed)


def test_zookeeper_runs_the_suites_jars(services: dict[str, Any]) -> None:
    zookeeper = services["zookeeper"]
    assert "jre" in lineage(built_stage(zookeeper))
    assert mounts(zookeeper)[JARS] == "jars"
    argv = command(zookeeper)
    assert argv[argv.index("-cp") + 1] == f"{JARS}/{ZOOKEEPER_CLASSPATH}/*"
    assert argv[argv.index("-cp") + 2] == "org.apache.zookeeper.server.ZooKeeperServerMain"


def test_zookeeper_runs_as_the_suite_does(
    services: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    suite, cfg = suite_zookeeper(tmp_path, monkeypatch)
    jvm, logback = tmp_path / "jvm", cfg.parent / "logback.xml"
    expected = ["java"]
    for arg in suite[1:]:
        if arg.startswith("-Dzkconsumer.stack="):
            continue  # the suite's marker for its own processes
        arg = arg.replace(str(logback), "/etc/zkconsumer/logback.xml")
        arg = "/etc/zkconsumer/zoo.cfg" if arg == str(cfg) else arg
        expected.append(arg.replace(str(jvm), JARS))
    assert command(services["zookeeper"]) == expected


def test_zookeeper_logging_is_the_suites(
    services: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, cfg = suite_zookeeper(tmp_path, monkeypatch)
    suite = (cfg.parent / "logback.xml").read_text(encoding="utf-8")
    argv = command(services["zookeeper"])
    option = next(a for a in argv if a.startswith("-Dlogback.configurationFile="))
    ours = mounted_file(services["zookeeper"], option.partition("=")[2]).read_text(
        encoding="utf-8")
    # The compose file's first lines are a comment saying whose it is.
    assert ours[ours.index("-->\n") + 4:] == suite


def test_zookeeper_configuration_is_the_suites(
    services: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    zoo = properties(mounted_file(services["zookeeper"], command(services["zookeeper"])[-1])
                     .read_text(encoding="utf-8"))
    _, cfg = suite_zookeeper(tmp_path, monkeypatch)
    suite = properties(cfg.read_text(encoding="utf-8"))
    assert {k: v for k, v in zoo.items() if k not in ZOOKEEPER_PLACE_KEYS} == {
        k: v for k, v in suite.items() if k not in ZOOKEEPER_PLACE_KEYS}
    assert zoo["tickTime"] == "500"  # 2 s sessions (the suite's) are allowed
    # Reachable from the other containers, on the published port; data where Debian's
    # package gives its user a directory.
    assert (zoo["clientPortAddress"], int(zoo["clientPort"])) == (
        "0.0.0.0", published(services["zookeeper"])[0][2])
    # Its data in the container: `down` drops them with the broker's.
    assert zoo["dataDir"] == "/var/lib/zookeeper"
    assert not [m for m in mounts(services["zookeeper"]) if m.startswith(zoo["dataDir"])]


def test_published_ports_are_bound_to_localhost(services: dict[str, Any]) -> None:
    assert published(services["zookeeper"]) == [("127.0.0.1", 2181, 2181)]
    assert published(services["kafka"]) == [("127.0.0.1", 9092, 9092)]
    assert published(services["tests"]) == []
    assert published(services["jars"]) == []
    for name, service in services.items():
        for host_ip, _, _ in published(service):
            assert host_ip == "127.0.0.1", name


def test_kafka_runs_in_zookeeper_mode(services: dict[str, Any]) -> None:
    kafka = kafka_properties(services)
    assert kafka["zookeeper.connect"] == "zookeeper:2181"
    zk_host, _, zk_port = kafka["zookeeper.connect"].partition(":")
    assert zk_host in services
    assert int(zk_port) == published(services["zookeeper"])[0][2]
    # Any KRaft setting would make it a KRaft broker (or refuse to start).
    assert not [k for k in kafka if k in ("process.roles", "node.id")]
    assert not [k for k in kafka if k.startswith("controller.")]
    assert kafka["broker.id"] == "0"  # the suite's


def test_kafka_listeners(services: dict[str, Any]) -> None:
    kafka = kafka_properties(services)
    bound = listeners(kafka["listeners"])
    advertised = listeners(kafka["advertised.listeners"])
    assert advertised == {"INTERNAL": ("kafka", 29092), "PLAINTEXT": ("localhost", 9092)}
    assert {name: port for name, (_, port) in bound.items()} == {
        "INTERNAL": 29092,
        "PLAINTEXT": 9092,
    }
    protocol_map = dict(
        item.split(":") for item in kafka["listener.security.protocol.map"].split(",")
    )
    assert protocol_map == {"INTERNAL": "PLAINTEXT", "PLAINTEXT": "PLAINTEXT"}
    assert kafka["inter.broker.listener.name"] == "INTERNAL"
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
    advertised = listeners(kafka_properties(services)["advertised.listeners"])
    assert advertised["INTERNAL"] == (kafka_host, int(kafka_port))


def test_tests_service_reaches_the_registered_endpoint(services: dict[str, Any]) -> None:
    # Brokers found through ZooKeeper are reached on the PLAINTEXT listener, which is
    # advertised as localhost: the tests container must share the broker's network.
    assert services["tests"]["network_mode"] == "service:kafka"


def test_tests_service_runs_the_suite(services: dict[str, Any]) -> None:
    tests = services["tests"]
    assert "tests" in lineage(built_stage(tests))
    assert ".:/src" in tests["volumes"]
    assert tests["working_dir"] == "/src"
    argv = command(tests)
    assert argv[:3] == ["trust-ca-certificates", "sh", "-c"]
    # Everything the suite imports and starts, by default: the extras, then the suite.
    assert env(tests)["ZKCONSUMER_EXTRAS"] == "dev,spark,fast"
    assert env(tests)["ZKCONSUMER_PYTEST_ARGS"] == ""
    assert argv[3] == ('pip install -q -e ".[$$ZKCONSUMER_EXTRAS]" && '
                       "exec pytest -p no:cacheprovider $$ZKCONSUMER_PYTEST_ARGS")


def test_tests_service_runs_the_jars_services_classpaths(services: dict[str, Any]) -> None:
    # jvm_classpath() finds them (each with its .resolved stamp) under ZKCONSUMER_JVM_DIR.
    tests = services["tests"]
    assert env(tests)["ZKCONSUMER_JVM_DIR"] == env(services["jars"])["ZKCONSUMER_JVM_DIR"]
    assert mounts(tests)[JARS] == "jars"
    assert "jars:/jars:ro" in tests["volumes"]


def test_tests_service_only_with_the_test_profile(services: dict[str, Any]) -> None:
    assert services["tests"]["profiles"] == ["test"]
    for name in ("jars", "zookeeper", "kafka"):
        assert "profiles" not in services[name], name


def test_depends_on(services: dict[str, Any]) -> None:
    assert depends_on(services["jars"]) == {}
    assert depends_on(services["zookeeper"]) == {"jars": "service_completed_successfully"}
    assert depends_on(services["kafka"]) == {
        "jars": "service_completed_successfully",
        "zookeeper": "service_healthy",
    }
    assert depends_on(services["tests"]) == {
        "jars": "service_completed_successfully",
        "zookeeper": "service_healthy",
        "kafka": "service_healthy",
    }


def test_healthchecks(services: dict[str, Any]) -> None:
    zk_test = " ".join(services["zookeeper"]["healthcheck"]["test"])
    # The four-letter word (whitelisted in zoo.cfg) on the port ZooKeeper serves.
    assert "/dev/tcp/127.0.0.1/2181" in zk_test and "printf srvr" in zk_test
    assert "Mode: standalone" in zk_test
    kafka_test = " ".join(services["kafka"]["healthcheck"]["test"])
    # Kafka 3.9's own tool, from the suite's jars, through the listener the containers use.
    assert "kafka.admin.BrokerApiVersionsCommand --bootstrap-server kafka:29092" in kafka_test
    assert f"-cp '{JARS}/{BROKER_CLASSPATHS['kafka']}/*'" in kafka_test
    assert "healthcheck" not in services["tests"]
    assert "healthcheck" not in services["jars"]


def test_no_unescaped_interpolation() -> None:
    # Compose would substitute a bare $VAR from the caller's environment: only the CA
    # directory is meant to come from there.
    text = COMPOSE.read_text(encoding="utf-8")
    assert "$" not in text.replace("$$", "").replace(CA_SOURCE, "")


def test_the_containers_that_download_trust_the_extra_ca_certificates(
    services: dict[str, Any],
) -> None:
    for name in ("jars", "tests"):  # Maven; pip
        assert mounts(services[name])[CA_MOUNT] == CA_SOURCE, name
        assert f"{CA_SOURCE}:{CA_MOUNT}:ro" in services[name]["volumes"], name
        assert command(services[name])[0] == "trust-ca-certificates", name
    # The default directory is in the repository, with no certificate in it.
    default = ROOT / CA_SOURCE.partition(":-")[2].rstrip("}")
    assert default.is_dir() and not list(default.glob("*.crt"))
    script = (COMPOSE_DIR / "trust-ca-certificates").read_text(encoding="utf-8")
    assert f"{CA_MOUNT}/*.crt" in script and "update-ca-certificates" in script
    assert 'exec "$@"' in script
    # Installed where the commands find it, in the stage every image is built on; pip is told
    # the system bundle (which update-ca-certificates rewrites); Java's cacerts follows it.
    assert "COPY trust-ca-certificates /usr/local/bin/trust-ca-certificates" in stage_text("jre")
    assert "ca-certificates-java" in stage_text("jre")
    assert "PIP_CERT=/etc/ssl/certs/ca-certificates.crt" in stage_text("tests")


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
