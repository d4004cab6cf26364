"""The pinned JVM classpaths (ZooKeeper, the brokers, the JVM legacy consumers), copied by Maven.

Each classpath is a Maven project shipped with the package, ``zkconsumer/stack/jvm/NAME/pom.xml``.
:func:`ensure` has ``mvn dependency:copy-dependencies`` copy its jars from Maven Central into
``JVM_DIR/NAME/``, one directory a classpath, never mixed, and stamps it with the pom's sha256
(``.resolved``): a classpath whose pom is unchanged is used as it is, without Maven, so only
the first ``zkconsumer stack up`` downloads. ``tools/jvm/resolve`` (a checkout's set-up, and
docker compose, which has no Python) copies the same poms the same way.

JVM_DIR (:func:`jvm_dir`) is ``$ZKCONSUMER_JVM_DIR`` when set; else ``.jvm`` in a source
checkout (``$ZKCONSUMER_ROOT``, or the checkout the package is imported from); else the
per-user cache, ``$XDG_CACHE_HOME/zkconsumer/jvm`` (``~/.cache/zkconsumer/jvm``).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from zkconsumer._errors import StackError

#: The Maven projects, one directory each (package data).
POM_ROOT = Path(__file__).resolve().with_name("jvm")
#: The classpath ZooKeeper runs from, and its main class.
ZOOKEEPER_CLASSPATH = "zookeeper-3.8"
ZOOKEEPER_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"
#: What to install when ``mvn`` is not on PATH.
MAVEN_MISSING = ("needs Maven (mvn) to fetch the Kafka and ZooKeeper jars from Maven Central "
                 "(first run only): install maven (Debian: apt-get install maven), then run "
                 "again")
#: Coordinates in Maven's errors (``group:artifact:jar:version``), and why it failed.
_ARTIFACT = re.compile(r"[A-Za-z0-9_.-]+:[A-Za-z0-9_.-]+:(?:jar|pom):[A-Za-z0-9_.-]+")
_REASON = re.compile(r"(?:was not found|Unknown host|Network is unreachable|Connection refused"
                     r"|Connect timed out|Could not transfer|Non-resolvable)[^\];]*")


def names() -> list[str]:
    """Every pinned classpath, by name."""
    return sorted(p.parent.name for p in POM_ROOT.glob("*/pom.xml"))


def pom(name: str) -> Path:
    """``name``'s Maven project, or StackError for a classpath that is not pinned."""
    path = POM_ROOT / name / "pom.xml"
    if not path.is_file():
        raise StackError(f"no pinned JVM classpath {name!r} (there are {', '.join(names())})")
    return path


def _checkout() -> Path | None:
    """The source checkout the package runs from, or None (an installed wheel)."""
    if os.environ.get("ZKCONSUMER_ROOT"):
        return Path(os.environ["ZKCONSUMER_ROOT"])
    root = Path(__file__).resolve().parents[2]
    return root if (root / "tools" / "jvm" / "resolve").is_file() else None


def jvm_dir() -> Path:
    """Where the classpaths are copied (see the module docstring)."""
    if os.environ.get("ZKCONSUMER_JVM_DIR"):
        return Path(os.environ["ZKCONSUMER_JVM_DIR"])
    checkout = _checkout()
    if checkout is not None:
        return checkout / ".jvm"
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "zkconsumer" / "jvm"


def pom_sha256(name: str) -> str:
    """The sha256 of ``name``'s pom: what the ``.resolved`` stamp of an up-to-date copy holds."""
    return hashlib.sha256(pom(name).read_bytes()).hexdigest()


def is_resolved(name: str) -> bool:
    """Whether ``name``'s jars are in :func:`jvm_dir`, copied from its pom as it is now."""
    try:
        return (jvm_dir() / name / ".resolved").read_text().strip() == pom_sha256(name)
    except OSError:
        return False


def classpath(name: str) -> str:
    """``name``'s classpath for ``java -cp`` (``DIR/*``), or StackError when not copied."""
    directory = jvm_dir() / name
    if not is_resolved(name):
        raise StackError(
            f"the {name} jars are not in {directory} (or its pom changed since): "
            "`zkconsumer stack up` fetches them with Maven (in a checkout, tools/jvm/resolve)")
    return str(directory / "*")


def maven_failure(log: str) -> str:
    """What Maven could not get, in a few words, from its output ``log``."""
    errors = [line for line in log.splitlines() if "[ERROR]" in line]
    what = next((m.group(0) for line in errors for m in _ARTIFACT.finditer(line)
                 if not m.group(0).startswith("zkconsumer.jvm:")), "")
    if what:
        why = _REASON.search(log)
        said = f"{what} {why.group(0) if why else 'could not be resolved'}"
        return said.split(" during a previous attempt")[0][:300]
    if errors:
        return errors[0].split("[ERROR]", 1)[1].strip()[:300]
    return "see the log"


@contextmanager
def _locked(name: str) -> Iterator[None]:
    """One copy of ``name`` at a time: two stacks starting at once with an empty cache."""
    root = jvm_dir()
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root / f"{name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def resolve(name: str, mvn: str) -> Path:
    """Copy ``name``'s jars with Maven (``mvn``) into :func:`jvm_dir`; StackError in one line
    naming what Maven could not get (its log is kept beside, ``NAME.maven.log``)."""
    root = jvm_dir()
    out, tmp, log = root / name, root / f"{name}.tmp", root / f"{name}.maven.log"
    shutil.rmtree(tmp, ignore_errors=True)
    argv = [mvn, "-B", "-f", str(pom(name)), "dependency:copy-dependencies",
            f"-DoutputDirectory={tmp}"]
    with open(log, "wb") as logf:
        done = subprocess.run(argv, stdout=logf, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, cwd=root, check=False)
    if done.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise StackError(
            f"Maven could not resolve the {name} classpath ({pom(name)}): "
            f"{maven_failure(log.read_text(errors='replace'))}; check that Maven Central is "
            f"reachable (a proxy goes in ~/.m2/settings.xml), then run again (log: {log})")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    (out / ".resolved").write_text(pom_sha256(name) + "\n")
    return out


def ensure(wanted: Sequence[str], progress: Callable[[str], None] | None = None) -> None:
    """Copy whichever of ``wanted`` is not resolved yet, telling ``progress`` one line for
    each; StackError saying what to install when Maven is needed and missing."""
    missing = [name for name in wanted if not is_resolved(name)]
    if not missing:
        return
    mvn = shutil.which("mvn")
    if mvn is None:
        raise StackError(MAVEN_MISSING)
    for name in missing:
        with _locked(name):
            if is_resolved(name):  # copied by another process meanwhile
                continue
            if progress is not None:
                progress(f"resolving {name} with Maven into {jvm_dir() / name} "
                         "(first run only) ...")
            resolve(name, mvn)
