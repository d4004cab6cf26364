"""tools/jvm/resolve: pinned JVM classpaths copied by Maven, one directory each."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
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
        (tmp / "tools" / "jvm" / name).mkdir()
        (tmp / "tools" / "jvm" / name / "pom.xml").write_text(
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
        "setup: Maven could not resolve the bad classpath (tools/jvm/bad/pom.xml): "
        "org.apache.kafka:kafka_2.13:jar:3.9.99 "), said
    assert f"(log: {tree / '.jvm' / 'bad.maven.log'})" in said[1]
    assert not (tree / ".jvm" / "bad").exists()  # nothing half-copied left
