#!/usr/bin/env bash
# Set up and run the whole test suite from a fresh clone (CI runs exactly this):
#   1. what apt installs, one after the other: ops/stack.sh's servers, Chromium and its
#      driver for the browser tests, the Docker engine, compose and mmdebstrap
#   2. in the background, the containers run: ops/docker.sh all (the engine, the base
#      image, the images), then, once step 3 is done, the integration suite on
#      testcontainers of those images (NEARDUP_STACK_SERVERS=containers), then
#      docker-compose.yml for real (tests/docker); its output goes to a log, printed at
#      the end
#   3. a virtualenv (NEARDUP_STACK_VENV, default .venv) with the package and its dev tools;
#      ruff (lint and format) and mypy (strict), which need no server
#   4. the ops run: the unit tests and the integration suite on ops/stack.sh's servers
#   5. the README's first command and its Kafka walkthrough, as written, in a fresh clone
#      (ops/walkthrough.sh), once the ops run's stack is down: it starts its own
#   6. the end of the containers run
# Steps 4 and 5 run beside the containers run, whose servers are on other ports
# (tests/integration/servers.py, docker-compose.yml). NEARDUP_STACK_DOCKER=0 leaves out
# the containers run, for a machine where no Docker engine can run. Each run of
# the suite spreads its tests over NEARDUP_STACK_WORKERS pytest-xdist workers (default 2):
# most tests wait on servers, not on the CPU, and the tests marked `exclusive` still run
# alone (servers.turn).
#
#   ops/test.sh --unit        step 3, Chromium, and the unit tests alone: no server, no Docker
#   ops/test.sh PYTEST_ARGS   step 3, Chromium, then pytest PYTEST_ARGS (one at a time) on
#                             ops/stack.sh's servers
#                             (e.g. ops/test.sh tests/integration/test_faults.py -x)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# the product refuses NEARDUP_* names it does not know: the old name would fail the tests later
if [[ -n "${NEARDUP_VENV+set}" ]]; then
  echo "[test] ERROR: NEARDUP_VENV was renamed NEARDUP_STACK_VENV" >&2
  exit 1
fi
VENV="${NEARDUP_STACK_VENV:-.venv}"
DOCKER="${NEARDUP_STACK_DOCKER:-1}"
WORKERS="${NEARDUP_STACK_WORKERS:-2}"
pytest=("$VENV/bin/python" -m pytest)
say() { echo "[test] $* (at $SECONDS s)" >&2; }
full=0
[[ $# -eq 0 ]] && full=1

containers_pid=""
if [[ $full == 1 ]]; then
  LOGS="$(mktemp -d /tmp/neardup-test.XXXXXX)"
  # what apt installs, one after the other (two apt runs at once: one fails on dpkg's lock)
  bash ops/stack.sh install
  bash ops/stack.sh browser
  trap 'bash ops/stack.sh down' EXIT
  if [[ "$DOCKER" == 1 ]]; then
    bash ops/docker.sh install
    trap '[[ -z "$containers_pid" ]] || kill "$containers_pid" 2>/dev/null || true
          bash ops/docker.sh down; bash ops/stack.sh down' EXIT
    # The images build while the venv is made and checked; its tests start once the venv
    # is. Compose's servers are on ports of their own, so tests/docker runs beside the ops
    # run too.
    say "containers run: ops/docker.sh all, tests/integration on testcontainers," \
      "tests/docker (log: $LOGS/containers.log)"
    (
      t0=$SECONDS
      bash ops/docker.sh all
      echo "[test] images: $((SECONDS - t0)) s"
      until [[ -e "$LOGS/venv" ]]; do sleep 1; done
      t1=$SECONDS
      NEARDUP_STACK_SERVERS=containers "${pytest[@]}" -n "$WORKERS" -p no:cacheprovider \
        tests/integration
      t2=$SECONDS
      echo "[test] containers run: tests/integration $((t2 - t1)) s"
      NEARDUP_STACK_DOCKER=1 "${pytest[@]}" -p no:cacheprovider tests/docker
      echo "[test] containers run: tests/docker $((SECONDS - t2)) s; in all $((SECONDS - t0)) s"
    ) >"$LOGS/containers.log" 2>&1 &
    containers_pid=$!
  fi
fi

if [[ ! -x "$VENV/bin/python" ]]; then
  say "creating $VENV"
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
say ruff
"$VENV/bin/ruff" check detector tests bench ops
"$VENV/bin/ruff" format --check detector tests bench ops
say mypy
"$VENV/bin/mypy"
"$VENV/bin/mypy" --strict ops/stack.py

if [[ "${1:-}" == --unit ]]; then
  shift
  bash ops/stack.sh browser
  say "pytest: the unit tests"
  exec "${pytest[@]}" -m "not integration" --ignore=tests/docker "$@"
fi
if [[ $full == 0 ]]; then
  bash ops/stack.sh browser
  trap 'bash ops/stack.sh down' EXIT
  NEARDUP_STACK_SERVERS=ops "${pytest[@]}" --ignore=tests/docker "$@"
  exit
fi
touch "$LOGS/venv"

say "ops run: the unit tests and tests/integration on ops/stack.sh's servers"
t0=$SECONDS
NEARDUP_STACK_SERVERS=ops "${pytest[@]}" -n "$WORKERS" --ignore=tests/docker
say "ops run: $((SECONDS - t0)) s"
bash ops/stack.sh down

# Beside the containers run: the walkthrough's stack takes the default ports, which the
# ops run has just left, and the containers are on other ports.
say "the README's walkthrough"
bash ops/walkthrough.sh

if [[ "$DOCKER" == 1 ]]; then
  status=0
  wait "$containers_pid" || status=$?
  containers_pid=""
  say "the containers run (ops/docker.sh all, tests/integration, tests/docker):"
  cat "$LOGS/containers.log" >&2
  [[ $status -eq 0 ]] || { echo "[test] ERROR: the containers run failed" >&2; exit "$status"; }
fi
say "all passed"
