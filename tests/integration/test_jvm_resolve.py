"""The pinned JVM classpaths copied by Maven, one directory each: by tools/jvm/resolve (a
checkout's set-up, docker compose) and by zkconsumer.stack.classpaths (``zkconsumer stack
up``), from the same poms (zkconsumer/stack/jvm/NAME/pom.xml), with the same stamps."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from zkconsumer._errors import StackError
from zkconsumer.stack import classpaths

ROOT = Path(__file__).resolve().parents[2]
#: Where a checkout keeps the poms, relative to its root.
POMS = Path("zkconsumer") / "stack" / "jvm"
POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>zkconsumer.jvm</groupId><artifactId>{name}</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies><dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>
    <version>{version}</version></dependency></dependencies>
</project>
"""


def _tree(tmp: Path, **poms: tuple[str, str, str]) -> Path:
    """A checkout of its own: the resolve script and the given poms (name -> coordinates)."""
    (tmp / "tools" / "jvm").mkdir(parents=True)
    shutil.copy(ROOT / "tools" / "jvm" / "resolve", tmp / "tools" / "jvm" / "resolve")
    for name, (group, artifact, version) in poms.items():
        (tmp / POMS / name).mkdir(parents=True)
        (tmp / POMS / name / "pom.xml").write_text(
            POM.format(name=name, group=group, artifact=artifact, version=version))
    return tmp


def _resolve(tree: Path, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": path or os.environ["PATH"]}
    env.pop("ZKCONSUMER_JVM_DIR", None)
    return subprocess.run([shutil.which("bash") or "/bin/bash",
                           str(tree / "tools" / "jvm" / "resolve")], env=env,
                          capture_output=True, text=True, timeout=300)


def _bin_without_maven(tmp: Path) -> str:
    """A PATH with the few commands the script needs besides Maven (and apt-get)."""
    directory = tmp / "bin"
    directory.mkdir()
    for tool in ("mkdir", "sha256sum", "cut", "cat", "basename", "dirname", "rm", "mv"):
        found = shutil.which(tool)
        assert found, tool
        (directory / tool).symlink_to(found)
    return str(directory)


def test_a_classpath_is_copied_once_and_then_skipped_without_maven(tmp_path: Path) -> None:
    tree = _tree(tmp_path, small=("org.slf4j", "slf4j-api", "1.7.36"))
    first = _resolve(tree)
    assert first.returncode == 0, first.stderr
    assert sorted(p.name for p in (tree / ".jvm" / "small").iterdir()) == [
        ".resolved", "slf4j-api-1.7.36.jar"]
    # Unchanged pom: no Maven at all (a PATH without mvn would fail otherwise).
    again = _resolve(tree, path=_bin_without_maven(tmp_path))
    assert (again.returncode, again.stderr) == (0, "")


def test_an_artifact_maven_cannot_serve_is_one_line_naming_it(tmp_path: Path) -> None:
    tree = _tree(tmp_path, bad=("org.apache.kafka", "kafka_2.13", "3.9.99"))
    done = _resolve(tree)
    assert done.returncode == 2
    said = done.stderr.strip().splitlines()
    assert said[0] == f"setup: resolving the bad classpath with Maven into {tree / '.jvm' / 'bad'}"
    assert len(said) == 2 and said[1].startswith(
        "setup: Maven could not resolve the bad classpath (zkconsumer/stack/jvm/bad/pom.xml): "
        "org.apache.kafka:kafka_2.13:jar:3.9.99 "), said
    assert f"(log: {tree / '.jvm' / 'bad.maven.log'})" in said[1]
    assert not (tree / ".jvm" / "bad").exists()  # nothing half-copied left


def test_the_checkouts_poms_are_the_packages() -> None:
    """One copy: the script resolves the poms the package ships, every one of them."""
    assert classpaths.POM_ROOT == ROOT / POMS
    assert classpaths.names() == ["kafka-3.9", "kafka-4", "legacy-0.11.0.3", "legacy-1.1.1",
                                  "zookeeper-3.8"]
    assert not (ROOT / "tools" / "jvm" / "kafka-3.9").exists()


@pytest.fixture
def poms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The package's poms in ``tmp_path/tree`` (a checkout with the resolve script), the JVM
    directory its ``.jvm``."""
    tree = _tree(tmp_path / "tree", small=("org.slf4j", "slf4j-api", "1.7.36"))
    monkeypatch.setattr(classpaths, "POM_ROOT", tree / POMS)
    monkeypatch.setenv("ZKCONSUMER_JVM_DIR", str(tree / ".jvm"))
    return tree


def test_stack_up_copies_a_classpath_once_saying_so_and_then_without_maven(
    poms: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    said: list[str] = []
    classpaths.ensure(["small"], said.append)
    out = poms / ".jvm" / "small"
    assert said == [f"resolving small with Maven into {out} (first run only) ..."]
    assert sorted(p.name for p in out.iterdir()) == [".resolved", "slf4j-api-1.7.36.jar"]
    assert classpaths.classpath("small") == f"{out}/*"
    # Resolved: no Maven needed, nothing said.
    monkeypatch.setenv("PATH", _bin_without_maven(tmp_path))
    classpaths.ensure(["small"], said.append)
    assert len(said) == 1
    # The script takes it for its own (the same stamp): it runs no Maven either.
    again = _resolve(poms, path=os.environ["PATH"])
    assert (again.returncode, again.stderr) == (0, "")


def test_a_classpath_the_script_copied_is_resolved_for_stack_up(poms: Path) -> None:
    assert _resolve(poms).returncode == 0
    assert classpaths.is_resolved("small")
    # A changed pom is copied again.
    pom = poms / POMS / "small" / "pom.xml"
    pom.write_text(pom.read_text().replace("1.7.36", "1.7.35"))
    assert not classpaths.is_resolved("small")
    with pytest.raises(StackError, match="the small jars are not in .* its pom changed"):
        classpaths.classpath("small")


def test_stack_up_names_the_artifact_maven_cannot_serve_in_one_line(poms: Path) -> None:
    (poms / POMS / "bad").mkdir()
    (poms / POMS / "bad" / "pom.xml").write_text(POM.format(
        name="bad", group="org.apache.kafka", artifact="kafka_2.13", version="3.9.99"))
    with pytest.raises(StackError) as e:
        classpaths.ensure(["bad"])
    said = str(e.value)
    assert said.startswith(
        f"Maven could not resolve the bad classpath ({poms / POMS / 'bad' / 'pom.xml'}): "
        "org.apache.kafka:kafka_2.13:jar:3.9.99 "), said
    assert "\n" not in said and f"(log: {poms / '.jvm' / 'bad.maven.log'})" in said
    assert not (poms / ".jvm" / "bad").exists() and not (poms / ".jvm" / "bad.tmp").exists()


def test_stack_up_without_maven_says_what_to_install(
    poms: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", _bin_without_maven(tmp_path))
    with pytest.raises(StackError) as e:
        classpaths.ensure(["small"])
    assert str(e.value) == classpaths.MAVEN_MISSING
    assert "install maven" in str(e.value)
