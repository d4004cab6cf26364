"""The legacy JVM consumer's member program (``tools/jvm/src/Member.java``: Kafka's own
``ZookeeperConsumerConnector`` and ``PartitionAssignor``) on the classpath of a legacy Kafka
release, resolved by ``tools/jvm/resolve`` into ``.jvm/legacy-<release>/`` (or
``$ZKCONSUMER_JVM_DIR``): for the interoperability tests (tests/jvm.py) and the benchmarks'
JVM rows. The source is compiled once per release and process (``javac``, a few seconds)
rather than at every start, as a single-file launch would.
"""

from __future__ import annotations

import functools
import hashlib
import os
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tools" / "jvm" / "src" / "Member.java"
LOG4J = ROOT / "tools" / "jvm" / "src" / "log4j.properties"

# Small heap, quick start: the tests start many short-lived members on two cores.
_JVM_FLAGS = ["-Xmx160m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k",
              f"-Dlog4j.configuration=file:{LOG4J}"]


def classpath(release: str) -> str:
    """The ``dir/*`` classpath of ``release``; a clear error when it was never resolved."""
    root = Path(os.environ.get("ZKCONSUMER_JVM_DIR") or ROOT / ".jvm")
    directory = root / f"legacy-{release}"
    if not any(directory.glob("kafka_*.jar")):
        raise RuntimeError(f"no Kafka {release} classpath in {directory}: run tools/jvm/resolve")
    return f"{directory}/*"


@functools.cache
def _compiled(release: str) -> str:
    """A directory holding Member.class compiled against ``release`` (once per session)."""
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]
    out = Path(tempfile.gettempdir()) / f"zkc-member-{release}-{digest}"
    if not (out / "Member.class").exists():
        tmp = Path(tempfile.mkdtemp(prefix=f"zkc-member-{release}-"))
        subprocess.run(["javac", "-nowarn", "-cp", classpath(release), "-d", str(tmp),
                        str(SOURCE)], check=True, capture_output=True, timeout=180)
        try:
            tmp.rename(out)
        except OSError:  # another test process compiled it meanwhile
            pass
    return str(out)


def java_argv(release: str, *args: str, flags: Iterable[str] | None = None) -> list[str]:
    """``java ... Member <args>`` for ``release``; ``flags``: the JVM's options instead of the
    tests' (small heap, quick start; tools/bench throughput gives its own)."""
    cp = f"{_compiled(release)}{os.pathsep}{classpath(release)}"
    return ["java", *(_JVM_FLAGS if flags is None else flags), "-cp", cp, "Member", *args]
