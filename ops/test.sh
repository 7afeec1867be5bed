#!/usr/bin/env bash
# Set up and run the whole test suite from a fresh clone:
#   1. a virtualenv (NEARDUP_STACK_VENV, default .venv) with the package and its dev tools
#   2. ruff (lint and format) and mypy (strict), which need no server
#   3. the local Kafka and Redis (ops/stack.sh up), stopped again on exit, and Chromium for
#      the browser tests (ops/stack.sh browser: Debian's chromium and chromium-driver)
#   4. pytest: the unit and the integration tests
#   5. the README's first command and its Kafka walkthrough, as written, in a fresh clone
#      (ops/walkthrough.sh), once the suite's stack is down: it starts its own
#   6. the Docker engine, base image and images (ops/docker.sh all), docker-compose.yml for
#      real (tests/docker), then ops/docker.sh down: about 4.5 minutes from a cold machine;
#      NEARDUP_STACK_DOCKER=0 leaves it out (a machine where no Docker engine can run)
# Extra arguments go to pytest, e.g. ops/test.sh -k blocks -x (and skip step 5)
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
bash ops/stack.sh up
trap 'bash ops/stack.sh down' EXIT
eval "$(bash ops/stack.sh env)"

echo "[test] pytest" >&2
# tests/docker needs the Docker engine of step 6, not this stack
"$VENV/bin/python" -m pytest --ignore=tests/docker "$@"

if [[ $# -eq 0 ]]; then
  bash ops/stack.sh down
  trap - EXIT
  echo "[test] the README's walkthrough" >&2
  bash ops/walkthrough.sh
fi

export NEARDUP_STACK_DOCKER="${NEARDUP_STACK_DOCKER:-1}"
if [[ "$NEARDUP_STACK_DOCKER" == 1 ]]; then
  echo "[test] docker: ops/docker.sh all, tests/docker" >&2
  # on exit: the engine down, and the stack (still up when pytest had arguments)
  trap 'bash ops/docker.sh down; bash ops/stack.sh down' EXIT
  bash ops/docker.sh all
  "$VENV/bin/python" -m pytest tests/docker
fi
