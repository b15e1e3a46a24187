#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian machine with Python 3.11: Debian's redis-server when
# none is on PATH, a .venv, and shardsched installed editable with its dev extras.
# Quiet when there is nothing to do.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages: redis-server (the embedded server of `dev`, and the tests'), curl (the
# README's tour, executed by the tests), faketime (a fault test), zsh and fish (the
# completion test).
missing=()
if ! command -v redis-server >/dev/null 2>&1 && [[ ! -x /usr/bin/redis-server ]]; then
  missing+=(redis-server)
fi
command -v curl >/dev/null 2>&1 || missing+=(curl)
# libfaketime: the fault campaign's "node clock 30 s ahead" (a slow test)
compgen -G "/usr/lib/*/faketime/libfaketimeMT.so.1" >/dev/null || missing+=(faketime)
# zsh and fish: the tests check `shardsched completion zsh|fish` in the shells themselves
command -v zsh >/dev/null 2>&1 || missing+=(zsh)
command -v fish >/dev/null 2>&1 || missing+=(fish)
# valgrind: `bench instructions` counts Redis's instructions per run under callgrind
command -v valgrind >/dev/null 2>&1 || missing+=(valgrind)
# systemd-analyze: the docs test verifies deploy/systemd's units with it
command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)
if (( ${#missing[@]} )); then
  echo "setup: installing Debian's ${missing[*]}" >&2
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq >/dev/null
  $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
  # The package starts a system-wide server where systemd runs; we start our own.
  $sudo systemctl disable --now redis-server >/dev/null 2>&1 || true
fi

python=${PYTHON:-python3}
if [[ ! -x .venv/bin/python ]]; then
  echo "setup: creating .venv" >&2
  "$python" -m venv .venv
fi

stamp=.venv/.shardsched-installed
if [[ ! -f $stamp || pyproject.toml -nt $stamp ]]; then
  echo "setup: installing shardsched and its dev extras into .venv" >&2
  .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev]' 2>&1 \
    | grep -v "is ignored: it is neither a file nor a directory" >&2 || true
  .venv/bin/python -c "import shardsched" # fail loudly if the install did not take
  touch "$stamp"
fi
