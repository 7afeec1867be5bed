#!/usr/bin/env bash
# Create (or reuse) a virtualenv for the streaming MinHash peer of bench/serve_vs_minhash.py:
# datasketch (MinHash, MinHashLSH with Redis storage), kafka-python, redis with hiredis,
# numpy and crc32c (kafka-python's fast CRC-32C for record batches). It lives outside the
# repo, so the peer's versions never touch the project's .venv.
#
#   bash bench/peer/setup_minhash.sh          # prints the venv's python path on its last line
#   NEARDUP_STACK_MINHASH_VENV=/some/dir bash bench/peer/setup_minhash.sh
#
# The specs can be overridden with NEARDUP_STACK_MINHASH_DATASKETCH_SPEC,
# _KAFKA_SPEC, _REDIS_SPEC, _NUMPY_SPEC and _CRC32C_SPEC (NEARDUP_STACK_* names only:
# neardup refuses other unknown NEARDUP_* variables in its environment).
set -euo pipefail

VENV="${NEARDUP_STACK_MINHASH_VENV:-/tmp/neardup-minhash-peer}"
DATASKETCH_SPEC="${NEARDUP_STACK_MINHASH_DATASKETCH_SPEC:-datasketch>=1.6,<3}"
KAFKA_SPEC="${NEARDUP_STACK_MINHASH_KAFKA_SPEC:-kafka-python>=2.2,<4}"
REDIS_SPEC="${NEARDUP_STACK_MINHASH_REDIS_SPEC:-redis[hiredis]>=5,<9}"
NUMPY_SPEC="${NEARDUP_STACK_MINHASH_NUMPY_SPEC:-numpy>=1.24,<3}"
CRC32C_SPEC="${NEARDUP_STACK_MINHASH_CRC32C_SPEC:-crc32c>=2.4,<3}"
PY="$VENV/bin/python"

venv_ok() {
    [ -x "$PY" ] && "$PY" - <<'PY' >/dev/null 2>&1
import crc32c, hiredis, kafka, numpy, redis
from datasketch import MinHash, MinHashLSH
from importlib.metadata import version
import kafka.record.util as record_util
assert getattr(record_util, "crc32c_c", crc32c.crc32c) is not None  # the C CRC is used
a, b = MinHash.bulk([[b"a b c d e", b"b c d e f"], [b"a b c d e", b"b c d e f"]], num_perm=128)
lsh = MinHashLSH(threshold=0.8, num_perm=128)  # in memory: the venv check needs no server
lsh.insert("x", a)
assert lsh.query(b) == ["x"]
assert redis.utils.HIREDIS_AVAILABLE
for name in ("datasketch", "kafka-python", "redis", "hiredis", "numpy", "crc32c"):
    version(name)
PY
}

if venv_ok; then
    echo "minhash peer venv already works: $VENV" >&2
else
    echo "creating minhash peer venv: $VENV" >&2
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    "$PY" -m pip install --quiet --upgrade pip >&2 || true
    "$PY" -m pip install --quiet "$DATASKETCH_SPEC" "$KAFKA_SPEC" "$REDIS_SPEC" \
        "$NUMPY_SPEC" "$CRC32C_SPEC" >&2
    if ! venv_ok; then
        echo "minhash peer venv check failed after install" >&2
        exit 1
    fi
fi

"$PY" - <<'PY' >&2
from importlib.metadata import version
print(", ".join(f"{n} {version(n)}" for n in
                ("datasketch", "kafka-python", "redis", "hiredis", "numpy", "crc32c")))
PY
echo "$PY"
