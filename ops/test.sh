#!/usr/bin/env bash
# Set up and run the whole test suite from a fresh clone (CI runs exactly this):
#   1. a virtualenv (NEARDUP_STACK_VENV, default .venv) with the package and its dev tools
#   2. ruff (lint and format) and mypy (strict), which need no server
#   3. Chromium for the browser tests (ops/stack.sh browser: Debian's chromium and driver)
#   4. two runs of the integration suite at once, on two sets of servers
#      (tests/integration/servers.py, NEARDUP_STACK_SERVERS):
#        ops         the unit tests and the integration suite on ops/stack.sh's servers
#        containers  the integration suite on testcontainers of the project's images, once
#                    ops/docker.sh all (Docker engine, base image, images) has built them;
#                    its output goes to a log, printed when it ends
#   5. the README's first command and its Kafka walkthrough, as written, in a fresh clone
#      (ops/walkthrough.sh), once the suite's stack is down: it starts its own
#   6. docker-compose.yml for real (tests/docker), then ops/docker.sh down
# NEARDUP_STACK_DOCKER=0 leaves out what needs Docker (the containers run and step 6), for a
# machine where no Docker engine can run. Each run of step 4 spreads its tests over
# NEARDUP_STACK_WORKERS pytest-xdist workers (default 2): most tests wait on servers, not
# on the CPU, and the tests marked `exclusive` still run alone (tests/integration/servers.py).
#
#   ops/test.sh --unit        steps 1-3 and the unit tests alone: no server, no Docker
#   ops/test.sh PYTEST_ARGS   steps 1-3, then pytest PYTEST_ARGS on ops/stack.sh's servers
#                             (e.g. ops/test.sh tests/integration/test_faults.py -x)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# the product refuses NEARDUP_* names it does not know: the old name would fail the tests later
if [[ -n "${NEARDUP_VENV+set}" ]]; then
  echo "[test] ERROR: NEARDUP_VENV was renamed NEARDUP_STACK_VENV" >&2
  exit 1
fi
VENV="${NEARDUP_STACK_VENV:-.venv}"
if [[ ! -x "$VENV/bin/python" ]]; then
  echo "[test] creating $VENV" >&2
  python3 -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip
# The native kernels build with the machine's Rust (rustup puts cargo in ~/.cargo/bin).
if ! command -v cargo >/dev/null && [[ -x "$HOME/.cargo/bin/cargo" ]]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi
"$VENV/bin/python" -m pip install --quiet -e ".[dev]"
# pip goes on without the kernels when they do not build; the suite must not
if ! "$VENV/bin/python" -c "import detector._native"; then
  echo "[test] ERROR: the native kernels (native/) did not build: is cargo on PATH?" >&2
  exit 1
fi
# every engine of the suite, in process or in a child neardup, runs the native kernels
# (tests/test_native.py holds them to the numpy reference)
export NEARDUP_KERNELS=native

# the checks that need no server first: a lint or type error fails in seconds
echo "[test] ruff" >&2
"$VENV/bin/ruff" check detector tests bench ops
"$VENV/bin/ruff" format --check detector tests bench ops
echo "[test] mypy" >&2
"$VENV/bin/mypy"
"$VENV/bin/mypy" --strict ops/stack.py

bash ops/stack.sh browser
pytest=("$VENV/bin/python" -m pytest)

if [[ "${1:-}" == --unit ]]; then
  shift
  echo "[test] pytest: the unit tests" >&2
  exec "${pytest[@]}" -m "not integration" --ignore=tests/docker "$@"
fi

trap 'bash ops/stack.sh down' EXIT
if [[ $# -gt 0 ]]; then
  NEARDUP_STACK_SERVERS=ops "${pytest[@]}" --ignore=tests/docker "$@"
  exit
fi

DOCKER="${NEARDUP_STACK_DOCKER:-1}"
WORKERS="${NEARDUP_STACK_WORKERS:-2}"
LOGS="$(mktemp -d /tmp/neardup-test.XXXXXX)"
containers_pid=""
# what apt installs, one after the other (two apt runs at once: one fails on dpkg's lock)
bash ops/stack.sh install
if [[ "$DOCKER" == 1 ]]; then
  bash ops/docker.sh install
  trap 'bash ops/docker.sh down; bash ops/stack.sh down' EXIT
  echo "[test] containers run: ops/docker.sh all, then tests/integration on" \
    "testcontainers (log: $LOGS/containers.log)" >&2
  (
    t0=$SECONDS
    bash ops/docker.sh all
    NEARDUP_STACK_SERVERS=containers "${pytest[@]}" -n "$WORKERS" -p no:cacheprovider \
      tests/integration
    echo "[test] containers run: $((SECONDS - t0)) s"
  ) >"$LOGS/containers.log" 2>&1 &
  containers_pid=$!
fi

echo "[test] pytest on ops/stack.sh's servers" >&2
t0=$SECONDS
NEARDUP_STACK_SERVERS=ops "${pytest[@]}" -n "$WORKERS" --ignore=tests/docker
echo "[test] ops run: $((SECONDS - t0)) s" >&2
bash ops/stack.sh down

if [[ -n "$containers_pid" ]]; then
  status=0
  wait "$containers_pid" || status=$?
  echo "[test] the containers run (ops/docker.sh all, tests/integration):" >&2
  cat "$LOGS/containers.log" >&2
  [[ $status -eq 0 ]] || { echo "[test] ERROR: the containers run failed" >&2; exit "$status"; }
fi

echo "[test] the README's walkthrough" >&2
bash ops/walkthrough.sh

if [[ "$DOCKER" == 1 ]]; then
  echo "[test] docker: tests/docker" >&2
  NEARDUP_STACK_DOCKER=1 "${pytest[@]}" tests/docker
fi
