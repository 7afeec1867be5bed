#!/usr/bin/env bash
# Local Kafka + Redis stack for neardup's tests and development, without Docker:
#   ops/stack.sh up | down | status | env | restart-kafka | restart-redis |
#                restart-redis-cluster | install | browser | help
# The launcher is ops/stack.py (standard-library Python 3.10+, since it runs before the
# project's venv exists); its docstring, or `ops/stack.sh help`, lists what runs and the
# NEARDUP_STACK_* variables. This script stays as the entry point every caller knows.
set -euo pipefail
command -v python3 >/dev/null 2>&1 || { echo "[stack] ERROR: python3 (3.10+) is needed" >&2; exit 1; }
exec python3 "$(dirname "${BASH_SOURCE[0]}")/stack.py" "$@"
