#!/usr/bin/env bash
# Set up and run the whole test suite from a fresh clone:
#   1. a virtualenv (.venv) with the package and its dev tools
#   2. the local Kafka and Redis (ops/stack.sh up), stopped again on exit
#   3. ruff (lint and format), mypy (strict) and pytest, unit and integration tests
# Extra arguments go to pytest, e.g. ops/test.sh -k blocks -x
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

VENV="${NEARDUP_VENV:-.venv}"
if [[ ! -x "$VENV/bin/python" ]]; then
  echo "[test] creating $VENV" >&2
  python3 -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet -e ".[dev]"

bash ops/stack.sh up
trap 'bash ops/stack.sh down' EXIT
eval "$(bash ops/stack.sh env)"

echo "[test] ruff" >&2
"$VENV/bin/ruff" check detector tests bench
"$VENV/bin/ruff" format --check detector tests bench
echo "[test] mypy" >&2
"$VENV/bin/mypy"
echo "[test] pytest" >&2
"$VENV/bin/python" -m pytest "$@"
