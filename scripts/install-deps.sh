#!/usr/bin/env bash
# Create the virtual environment and install llm-monitor with everything its tests need.
# Idempotent; run by `make install` (and so by `make run` / `make test`) on a fresh machine.
set -euo pipefail
PY=${1:-python3}
VENV=${2:-.venv}

apt_install() {
  # System packages: Boost headers (to build confseq, the test peer for confidence sequences),
  # Prometheus and Alertmanager (integration tests run them on loopback).
  local missing=()
  dpkg -s libboost-dev >/dev/null 2>&1 || missing+=(libboost-dev)
  command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
  command -v prometheus-alertmanager >/dev/null 2>&1 || missing+=(prometheus-alertmanager)
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)
  if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then
      echo "install-deps: need root to apt-get install ${missing[*]}" >&2
      exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

apt_install
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q -e '.[dev]'
# confseq pins an old pybind11 in its isolated build; build it against the venv instead.
if ! "$VENV/bin/python" -c 'import confseq.boundaries' 2>/dev/null; then
  "$VENV/bin/python" -m pip install -q 'pybind11>=2.10' setuptools wheel cmake scikit-build
  "$VENV/bin/python" -m pip install -q --no-build-isolation confseq==0.0.11
fi
