#!/usr/bin/env bash
# Create (or reuse) a virtualenv holding the dense-vector peers of the embeddings
# benchmark: faiss-cpu (exact flat index, binary multi-hash), hnswlib (HNSW graph) and
# numpy. It lives outside the repo, like the simhash peer's (bench/peer/setup.sh).
#
#   bash bench/peer/setup_vectors.sh          # prints the venv's python path on its last line
#   NEARDUP_STACK_PEER_VECTORS_VENV=/some/dir bash bench/peer/setup_vectors.sh
set -euo pipefail

VENV="${NEARDUP_STACK_PEER_VECTORS_VENV:-/tmp/neardup-vector-peers}"
FAISS_SPEC="faiss-cpu>=1.15,<1.16"
HNSWLIB_SPEC="hnswlib>=0.8,<0.9"  # an sdist: pip builds it, so a C++ compiler is needed
NUMPY_SPEC="numpy>=2.0,<3"
PY="$VENV/bin/python"

venv_ok() {
    [ -x "$PY" ] && "$PY" - <<'PY' >/dev/null 2>&1
import faiss, hnswlib, numpy as np
assert faiss.__version__.startswith("1.15.")
assert int(np.__version__.split(".")[0]) == 2
x = np.eye(4, dtype=np.float32)
flat = faiss.IndexFlatIP(4)
flat.add(x)
lims, dist, ids = flat.range_search(x[:1], 0.5)
assert ids.tolist() == [0]
graph = hnswlib.Index(space="ip", dim=4)
graph.init_index(max_elements=4, ef_construction=10, M=4)
graph.add_items(x, np.arange(4))
assert graph.knn_query(x[1:2], k=1)[0].tolist() == [[1]]
PY
}

if venv_ok; then
    echo "vector peer venv already works: $VENV" >&2
else
    echo "creating vector peer venv: $VENV" >&2
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    "$PY" -m pip install --quiet --upgrade pip >&2 || true
    "$PY" -m pip install --quiet "$FAISS_SPEC" "$HNSWLIB_SPEC" "$NUMPY_SPEC" >&2
    if ! venv_ok; then
        echo "vector peer venv check failed after install" >&2
        exit 1
    fi
fi

"$PY" - <<'PY' >&2
from importlib.metadata import version
print(*(f"{p} {version(p)}" for p in ("faiss-cpu", "hnswlib", "numpy")), sep=", ")
PY
echo "$PY"
