"""The index's Lua scripts, read once from the package's scripts/ directory. Each file's
header says what its KEYS and ARGV are and what it answers."""

from __future__ import annotations

from importlib.resources import files


def _script(name: str) -> str:
    return (files(__package__) / "scripts" / f"{name}.lua").read_text(encoding="utf-8")


# the coordinator's (RedisIndex._eval)
SNAPSHOT = _script("snapshot")
COMMIT = _script("commit")
APPLIED = _script("applied")
DELETE = _script("delete")
# a shard's (one EVAL per shard in a Batch)
APPLY_SHARD = _script("apply_shard")
FILTER_BUCKET = _script("filter_bucket")
FORGET_DIGEST = _script("forget_digest")
SWEEP_DIGESTS = _script("sweep_digests")
