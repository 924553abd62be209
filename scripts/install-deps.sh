#!/usr/bin/env bash
# Create the virtual environment and install llm-monitor into it. Idempotent.
#
#   install-deps.sh PYTHON VENV run    the package and its runtime dependencies only (make run,
#                                      make report): Python >= 3.11, no root, no system packages
#   install-deps.sh PYTHON VENV test   also the test peers and system packages (make test)
#
# Linux (Debian/Ubuntu) and macOS (Homebrew). System packages are installed only in test mode,
# and only as root; anyone else gets one line saying what to install.
set -euo pipefail
PY=${1:-python3}
VENV=${2:-.venv}
MODE=${3:-test}

die() { echo "install-deps: $*" >&2; exit 1; }

check_python() {
  # Python >= 3.11; when the one given is older, name a newer one found on PATH.
  local version
  command -v "$PY" >/dev/null 2>&1 || die "$PY not found; install Python >= 3.11 and pass it as PYTHON=/path/to/python3"
  version=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    local found=""
    for cand in python3.14 python3.13 python3.12 python3.11; do
      if command -v "$cand" >/dev/null 2>&1; then found=$cand; break; fi
    done
    if [ -n "$found" ]; then
      die "$PY is Python $version; llm-monitor needs >= 3.11: run make again with PYTHON=$found"
    fi
    die "$PY is Python $version; llm-monitor needs >= 3.11 (macOS: brew install python@3.12; Debian/Ubuntu: apt-get install python3.11), then run make again with PYTHON=python3.12 or the path to it"
  fi
}

system_packages() {
  # make test only: Boost headers (to build confseq, the test peer for confidence sequences),
  # Prometheus and Alertmanager (integration tests run them on loopback), Chromium (browser
  # tests of the web board and the HTML report).
  local missing=()
  if command -v apt-get >/dev/null 2>&1; then
    dpkg -s libboost-dev >/dev/null 2>&1 || missing+=(libboost-dev)
    command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
    command -v prometheus-alertmanager >/dev/null 2>&1 || missing+=(prometheus-alertmanager)
    command -v chromium >/dev/null 2>&1 || missing+=(chromium)
    command -v tmux >/dev/null 2>&1 || missing+=(tmux)  # the 80 × 24 terminal-view test
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "$(id -u)" != 0 ]; then
      die "make test needs system packages; install them once with: sudo apt-get install ${missing[*]} (make run needs none)"
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  elif [ "$(uname -s)" = Darwin ]; then
    # Homebrew names: boost, prometheus, alertmanager, and the Chromium cask.
    [ -d "$(brew --prefix 2>/dev/null)/include/boost" ] || missing+=(boost)
    command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
    command -v prometheus-alertmanager >/dev/null 2>&1 || command -v alertmanager >/dev/null 2>&1 || missing+=(alertmanager)
    command -v chromium >/dev/null 2>&1 || [ -d /Applications/Chromium.app ] || missing+=(chromium)
    [ ${#missing[@]} -eq 0 ] && return 0
    die "make test needs: brew install ${missing[*]} (make run needs none)"
  else
    die "make test needs Boost headers, prometheus, prometheus-alertmanager and chromium on PATH; install them with your package manager (make run needs none)"
  fi
}

case "$MODE" in
  run|test) ;;
  *) die "mode must be run or test, got $MODE" ;;
esac
check_python
[ "$MODE" = test ] && system_packages
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
if [ "$MODE" = run ]; then
  "$VENV/bin/python" -m pip install -q -e .
  exit 0
fi
"$VENV/bin/python" -m pip install -q -e '.[dev]'
# confseq pins an old pybind11 in its isolated build; build it against the venv instead.
if ! "$VENV/bin/python" -c 'import confseq.boundaries' 2>/dev/null; then
  "$VENV/bin/python" -m pip install -q 'pybind11>=2.10' setuptools wheel cmake scikit-build
  "$VENV/bin/python" -m pip install -q --no-build-isolation confseq==0.0.11
fi
