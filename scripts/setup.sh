#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian machine with Python 3.11: Debian's redis-server when
# none is on PATH, a .venv, and shardsched installed editable with its dev extras. With
# --tests, also the Debian tools only the test suite uses (it says which before it installs
# them). Quiet when there is nothing to do.
#
# It never stops, disables or reconfigures anything already on the machine: where
# Debian's redis-server package starts a system service of its own, that service is left
# as it is (shardsched runs its own redis-server on a free port) and this says so.
set -euo pipefail
cd "$(dirname "$0")/.."

tests=0
for arg in "$@"; do
  case $arg in
    --tests) tests=1 ;;
    *) echo "usage: bash scripts/setup.sh [--tests]" >&2; exit 2 ;;
  esac
done

sudo=""
[[ $(id -u) -eq 0 ]] || sudo="sudo"
updated=0
apt_install() { # what, packages...
  local what=$1
  shift
  echo "setup: installing Debian's $* ($what)" >&2
  export DEBIAN_FRONTEND=noninteractive
  if (( ! updated )); then
    $sudo apt-get update -qq >/dev/null
    updated=1
  fi
  $sudo apt-get install -y -qq "$@" >/dev/null
}

# Running: redis-server (the embedded server of `dev`, and the tests').
if ! command -v redis-server >/dev/null 2>&1 && [[ ! -x /usr/bin/redis-server ]]; then
  was_active=0
  systemctl is-active --quiet redis-server 2>/dev/null && was_active=1
  apt_install "shardsched dev runs it on a free port of its own" redis-server
  if (( ! was_active )) && systemctl is-active --quiet redis-server 2>/dev/null; then
    echo "setup: Debian's package started its own redis-server service; shardsched does" \
      "not use it (to stop it: systemctl disable --now redis-server)" >&2
  fi
fi

# Testing only: curl (the README's tour, executed by the tests), faketime (the fault
# campaign's "node clock 30 s ahead"), zsh and fish (`shardsched completion` checked in
# the shells), valgrind (`bench instructions` under callgrind), systemd-analyze (the docs
# test verifies deploy/systemd's units), a C compiler (a job builds a library another
# preloads, tests/worker/test_hostile_jobs.py), openssl (the tests' certificates) and
# chromium with its driver (the browser tests of /docs and the dashboard, headless) and
# DejaVu with fontconfig (tests/router/test_console_glyphs.py), and
# Node.js with npm (scripts/check formats and lints the console's JavaScript with Biome,
# from tools/js: a development tool only; installing shardsched needs no Node), and
# luacheck (lua-check: every Lua script as Redis runs it, tests/store/test_lua_lint.py).
if (( tests )); then
  missing=()
  command -v curl >/dev/null 2>&1 || missing+=(curl)
  compgen -G "/usr/lib/*/faketime/libfaketimeMT.so.1" >/dev/null || missing+=(faketime)
  command -v zsh >/dev/null 2>&1 || missing+=(zsh)
  command -v fish >/dev/null 2>&1 || missing+=(fish)
  command -v valgrind >/dev/null 2>&1 || missing+=(valgrind)
  command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)
  command -v cc >/dev/null 2>&1 || missing+=(gcc libc6-dev)
  command -v openssl >/dev/null 2>&1 || missing+=(openssl)
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)
  command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
  # the font a bare Debian desktop has: the console's state glyphs must all be in it
  command -v fc-list >/dev/null 2>&1 || missing+=(fontconfig)
  [[ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ]] || missing+=(fonts-dejavu-core)
  command -v node >/dev/null 2>&1 || missing+=(nodejs)
  command -v npm >/dev/null 2>&1 || missing+=(npm)
  command -v luacheck >/dev/null 2>&1 || missing+=(lua-check)
  if (( ${#missing[@]} )); then
    apt_install "used by the test suite only" "${missing[@]}"
  fi
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

if (( tests )); then
  jsstamp=tools/js/node_modules/.installed
  if [[ ! -f $jsstamp || tools/js/package-lock.json -nt $jsstamp ]]; then
    echo "setup: installing the console's JS formatter and linter (Biome) into tools/js" >&2
    npm ci --prefix tools/js --no-audit --no-fund --loglevel=error >/dev/null
    touch "$jsstamp"
  fi
fi
