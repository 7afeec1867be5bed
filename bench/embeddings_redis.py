"""Redis bytes per indexed vector, by key family, and the decide path's rate on Redis.

    eval "$(bash ops/stack.sh env)"; .venv/bin/python bench/embeddings_redis.py [--corpus F]

Indexes the embedding dev stream (../shared/data/embed-dev-stream.jsonl.gz, else the
bundled tests/data/embed-sample.jsonl.gz) into a fresh index on NEARDUP_REDIS_URL with the
default settings, one Detector in this process, batches of 256, then weighs every key
(MEMORY USAGE) and drops the index. Vectors are stored int8 and then float16.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time
from pathlib import Path

from _common import ROOT, SHARED_DATA

sys.path.insert(0, str(ROOT))

import redis

from detector.bench import key_families
from detector.index.redis import RedisIndex, maintenance
from detector.records import parse_document
from detector.settings import EngineSettings

DEFAULTS = (SHARED_DATA / "embed-dev-stream.jsonl.gz", ROOT / "tests/data/embed-sample.jsonl.gz")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=next((p for p in DEFAULTS if p.is_file()), None))
    args = ap.parse_args()
    with gzip.open(args.corpus, "rb") as f:
        docs = [parse_document(line) for line in f if line.strip()]
    client = redis.Redis.from_url(os.environ.get("NEARDUP_REDIS_URL", "redis://127.0.0.1:6379"))
    out = {}
    for storage in ("int8", "float16"):
        settings = EngineSettings(vector_storage=storage)
        name = f"bench-vectors-{storage}-{os.getpid()}"
        index = RedisIndex(
            client, settings.block_scheme(), name, vectors=settings.vector_block_scheme()
        )
        detector = settings.detector(index)
        start = time.perf_counter()
        decided = []
        for at in range(0, len(docs), 256):
            decided += detector.process(docs[at : at + 256])
        seconds = time.perf_counter() - start
        indexed = index.stats()["documents"]
        families = key_families(index)
        maintenance.drop(index)
        per = {k: round(v / indexed, 1) for k, v in sorted(families.items())}
        out[storage] = {
            "records": len(docs),
            "indexed": indexed,
            "duplicates": sum(d.duplicate_of is not None for d in decided),
            "docs_per_s": round(len(docs) / seconds),
            "bytes_per_vector": round(sum(families.values()) / indexed, 1),
            "by_family": per,
        }
        print(
            f"{storage:>8}: {len(docs)} records, {indexed} indexed, "
            f"{out[storage]['docs_per_s']:,} records/s (decide path, one process), "
            f"{out[storage]['bytes_per_vector']} bytes a vector: {per}",
            file=sys.stderr,
        )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
