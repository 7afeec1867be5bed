#!/usr/bin/env bash
# Create (or reuse) a virtualenv holding the PyPI `simhash` package (1e0ng/simhash),
# the peer baseline for the neardup benchmark. It needs numpy < 2, so it lives in its
# own venv outside the repo.
#
#   bash bench/peer/setup.sh          # prints the venv's python path on its last line
#   NEARDUP_STACK_PEER_VENV=/some/dir bash bench/peer/setup.sh
set -euo pipefail

VENV="${NEARDUP_STACK_PEER_VENV:-/tmp/neardup-peer-venv}"
SIMHASH_SPEC="${NEARDUP_STACK_PEER_SIMHASH_SPEC:-simhash==2.1.2}"
NUMPY_SPEC="numpy<2"
PY="$VENV/bin/python"

venv_ok() {
    [ -x "$PY" ] && "$PY" - <<'PY' >/dev/null 2>&1
import numpy, simhash
from importlib.metadata import version
assert int(numpy.__version__.split(".")[0]) < 2
from simhash import Simhash, SimhashIndex
idx = SimhashIndex([], k=3)
idx.add("a", Simhash("hello world"))
assert idx.get_near_dups(Simhash("hello world")) == ["a"]
version("simhash")
PY
}

if venv_ok; then
    echo "peer venv already works: $VENV" >&2
else
    echo "creating peer venv: $VENV" >&2
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    "$PY" -m pip install --quiet --upgrade pip >&2 || true
    "$PY" -m pip install --quiet "$SIMHASH_SPEC" "$NUMPY_SPEC" >&2
    if ! venv_ok; then
        echo "peer venv check failed after install" >&2
        exit 1
    fi
fi

"$PY" - <<'PY' >&2
from importlib.metadata import version
print("simhash", version("simhash"), "numpy", version("numpy"))
PY
echo "$PY"
