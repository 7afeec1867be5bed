"""The index's Lua scripts, read once from the package's scripts/ directory. Each file's
header says what its KEYS and ARGV are and what it answers."""

from __future__ import annotations

from importlib.resources import files


def _script(name: str, *before: str) -> str:
    """A script, after the shared parts it names (Redis has no includes)."""
    return "\n".join(
        (files(__package__) / "scripts" / f"{part}.lua").read_text(encoding="utf-8")
        for part in (*before, name)
    )


# the coordinator's (RedisIndex._eval)
SNAPSHOT = _script("snapshot")
COMMIT = _script("commit", "versions")
APPLIED = _script("applied")
DELETE = _script("delete", "versions")
SWEEP_IDS = _script("sweep_ids", "versions")
COUNT_IDS = _script("count_ids")
# a shard's (one EVAL per shard in a Batch)
APPLY_SHARD = _script("apply_shard")
FILTER_BUCKET = _script("filter_bucket")
FORGET_DIGEST = _script("forget_digest")
SWEEP_DIGESTS = _script("sweep_digests")
LEARN_TEMPLATE = _script("learn_template")
REPACK = _script("repack")
