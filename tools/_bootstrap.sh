# Sourced by tools/test, tools/demo and tools/bench: idempotent set-up on a fresh
# Debian machine (Python 3.11, Java 17, no Docker engine). Installs what is missing from
# Debian's packages (Java, a C compiler, openssl), makes .venv and installs the package with
# its extras, then has Maven copy the JVM classpaths (ZooKeeper, the brokers, the JVM
# consumers) into .jvm/. Re-running is cheap: the pip step is skipped while setup.py is
# unchanged, and Maven while the poms are.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
export ZKCONSUMER_ROOT="$ROOT"

_as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

ensure_apt_packages() {
  local missing=()
  # Debian's default JRE: 17 on bookworm, 21 on trixie (PySpark 4 takes either).
  command -v java >/dev/null 2>&1 || missing+=(default-jre-headless)
  # The JVM legacy consumer of the interoperability tests (tools/jvm/src/Member.java) is
  # compiled from source: javac.
  command -v javac >/dev/null 2>&1 || missing+=(default-jdk-headless)
  command -v openssl >/dev/null 2>&1 || missing+=(openssl)  # the TLS tests make certificates
  # A real Prometheus scrapes the exporter in the tests; promtool checks the alerting rules.
  command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
  # zkconsumer._speedups (the confluent fetch path's C steps) is built at install.
  command -v cc >/dev/null 2>&1 || missing+=(gcc libc6-dev)
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "setup: installing ${missing[*]} from Debian's packages" >&2
    _as_root env DEBIAN_FRONTEND=noninteractive apt-get -o Acquire::Retries=3 update -q >&2
    _as_root env DEBIAN_FRONTEND=noninteractive apt-get -o Acquire::Retries=3 install -y -q --no-install-recommends "${missing[@]}" >&2
  fi
  local major
  major="$(java -version 2>&1 | sed -n 's/.*version "\(1\.\)\{0,1\}\([0-9]*\).*/\2/p' | head -1)"
  if [ -n "$major" ] && [ "$major" -lt 17 ]; then
    echo "setup: PySpark 4 needs Java 17 or later; $(command -v java) is Java $major." >&2
    echo "setup: install default-jre-headless (or put a newer java first on PATH) and run again." >&2
    exit 2
  fi
}

ensure_venv() {
  local py="${PYTHON:-python3.11}"
  command -v "$py" >/dev/null 2>&1 || py=python3
  if ! "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "setup: zkconsumer needs Python 3.11 or later; $py is $("$py" -V 2>&1)." >&2
    echo "setup: install python3.11 (or set PYTHON to one) and run again." >&2
    exit 2
  fi
  if ! "$py" -c 'import os, sysconfig; p = sysconfig.get_paths()["include"]
raise SystemExit(not os.path.exists(os.path.join(p, "Python.h")))' 2>/dev/null; then
    # Debian's own python3 has no headers without python3-dev: zkconsumer._speedups needs them.
    echo "setup: installing the Python headers (python3-dev) from Debian's packages" >&2
    _as_root env DEBIAN_FRONTEND=noninteractive apt-get -o Acquire::Retries=3 update -q >&2
    _as_root env DEBIAN_FRONTEND=noninteractive apt-get -o Acquire::Retries=3 install -y -q --no-install-recommends python3-dev >&2
  fi
  local stamp="$VENV/.zkconsumer-installed"
  if [ -f "$stamp" ] && [ -n "$(awk '{print $2}' "$stamp")" ] \
      && [ "$(awk '{print $2}' "$stamp")" != "$VENV" ]; then
    # Its scripts (pip, pytest, ruff, mypy) name the old path in their first line.
    echo "setup: $VENV was made for another path (a moved or copied checkout): making it again" >&2
    rm -rf "$VENV"
  fi
  if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
    # (Re)made whole: a venv left without pip by a failed first run would fail every run.
    rm -rf "$VENV"
    echo "setup: creating $VENV" >&2
    if ! "$py" -m venv "$VENV" >&2; then
      # Debian's own python3 makes venvs only with python3-venv (ensurepip).
      rm -rf "$VENV"
      echo "setup: installing python3-venv from Debian's packages" >&2
      _as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
      _as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3-venv >&2
      "$py" -m venv "$VENV"
    fi
  fi
  local want
  # setup.py and the C source it builds (zkconsumer._speedups, built in place).
  want="$(cat "$ROOT/setup.py" "$ROOT/zkconsumer/_speedups.c" | sha256sum | cut -d' ' -f1) $VENV"
  # Installed again when either changed, or a package went missing (uninstalled by hand).
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ] \
      || ! "$VENV/bin/python" -c 'import zkconsumer, kazoo, kafka, confluent_kafka, pytest, xdist, mypy, ruff, pyarrow, mkdocs, mkdocstrings, pykafka' 2>/dev/null; then
    echo "setup: installing zkconsumer[dev,spark,bench] into $VENV" >&2
    "$VENV/bin/python" -m pip install -q --upgrade pip >&2
    "$VENV/bin/python" -m pip install -q -e "$ROOT[dev,spark,bench]" >&2
    # The bench extra's peer (tools/bench_pykafka.py, tested by tests/integration): pykafka
    # pins kazoo==2.5.0, which would replace ours; it runs on ours, so it comes without its
    # dependencies (the extra has the rest). pip then warns of the pin: expected.
    "$VENV/bin/python" -m pip install -q --no-deps "pykafka==2.8.0" >&2
    echo "$want" > "$stamp"
  fi
}

if [ "${ZKCONSUMER_NO_VENV:-}" = 1 ]; then
  # A prepared environment (the compose test container): its own Python has everything.
  # Never touch the .venv here: in a container it is the host's, mounted.
  PY="$(command -v python3)"
  export PYSPARK_PYTHON="$PY" PYSPARK_DRIVER_PYTHON="$PY"
  unset PY
else
  ensure_apt_packages
  ensure_venv
  # ZooKeeper, the brokers (Kafka 3.9, Kafka 4) and the JVM consumers' classpaths, from
  # Maven Central.
  source "$ROOT/tools/jvm/resolve"
  ensure_jvm_classpaths
  export PATH="$VENV/bin:$PATH"
  # The package is installed in place (editable), so nothing compiled it as pip compiles a
  # wheel's modules: where PYTHONDONTWRITEBYTECODE is set (as on some CI machines), every
  # process would compile all of zkconsumer again (80 ms of CPU each, which a storm of
  # member processes and the benchmarks would measure). Python reads the cached bytecode
  # with or without that variable, and never a stale one; up-to-date files are skipped.
  "$VENV/bin/python" -m compileall -q -j 0 "$ROOT/zkconsumer" "$ROOT/tools" "$ROOT/tests" >/dev/null
  export PYSPARK_PYTHON="$VENV/bin/python"
  export PYSPARK_DRIVER_PYTHON="$VENV/bin/python"
fi
