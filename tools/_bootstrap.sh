# Sourced by tools/test, tools/demo and tools/bench: idempotent set-up on a fresh
# Debian machine (Python 3.11, Java 17, no Docker engine). Installs ZooKeeper from
# Debian's package when missing, makes .venv and installs the package with its extras.
# Re-running is cheap: the pip step is skipped while setup.py is unchanged.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
export ZKCONSUMER_ROOT="$ROOT"

_as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

ensure_apt_packages() {
  local missing=()
  [ -f /usr/share/java/zookeeper.jar ] || missing+=(zookeeper)
  command -v java >/dev/null 2>&1 || missing+=(openjdk-17-jre-headless)
  command -v openssl >/dev/null 2>&1 || missing+=(openssl)  # the TLS tests make certificates
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "setup: installing ${missing[*]} from Debian's packages" >&2
    _as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
    _as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
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
  if [ ! -x "$VENV/bin/python" ] || [ ! -x "$VENV/bin/pip" ]; then
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
  local stamp="$VENV/.zkconsumer-installed"
  local want
  want="$(cat "$ROOT/setup.py" | sha256sum | cut -d' ' -f1)"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "setup: installing zkconsumer[dev,spark,fast] into $VENV" >&2
    "$VENV/bin/pip" install -q --upgrade pip >&2
    "$VENV/bin/pip" install -q -e "$ROOT[dev,spark,fast]" >&2
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
  export PATH="$VENV/bin:$PATH"
  export PYSPARK_PYTHON="$VENV/bin/python"
  export PYSPARK_DRIVER_PYTHON="$VENV/bin/python"
fi
