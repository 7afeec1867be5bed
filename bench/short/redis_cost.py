"""What a short text's wider lookup costs on Redis: the short-text stream decided into a
fresh Redis index with --short-k 10 (the default) and with --short-k 6 (off), alternately,
in one process: seconds, Redis commands a record (INFO commandstats: a script's own calls
included) and the recall.

    python bench/short/redis_cost.py [--stream FILE] [--truth FILE] [--redis-url URL]
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import redis

from detector import profile
from detector.index.redis import RedisIndex, maintenance
from detector.records import Document
from detector.settings import EngineSettings

CACHE = Path.home() / ".cache" / "neardup-short"
BATCH = 512


def commands(client: Any) -> int:
    return sum(v["calls"] for v in client.info("commandstats").values())


def run(client: Any, docs: list[Document], short_k: int, name: str) -> tuple[float, int, set[str]]:
    settings = EngineSettings(short_k=short_k)
    index = RedisIndex(client, settings.block_scheme(), name)
    detector = settings.detector(index)
    before, started = commands(client), time.perf_counter()
    dups = set()
    for at in range(0, len(docs), BATCH):
        dups |= {d.id for d in detector.process(docs[at : at + BATCH]) if d.duplicate_of}
    seconds = time.perf_counter() - started
    used = commands(client) - before
    maintenance.drop(index)
    return seconds, used, dups


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stream", type=Path, default=CACHE / "short-dev-stream.jsonl.gz")
    ap.add_argument("--truth", type=Path, default=CACHE / "short-dev-truth.jsonl.gz")
    ap.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--profile", action="store_true", help="the time of each stage, each run")
    args = ap.parse_args()
    with gzip.open(args.stream) as f:
        docs = [Document(r["id"], r["text"]) for r in map(json.loads, f)]
    with gzip.open(args.truth) as f:
        true = {t["id"] for t in map(json.loads, f) if t["max_jaccard_earlier"] >= 0.8}
    client = redis.Redis.from_url(args.redis_url)
    print(f"{args.stream.name}: {len(docs):,} records, {len(true):,} true duplicates")
    for r in range(args.rounds):
        for short_k in (10, 6) if r % 2 == 0 else (6, 10):
            profiled = profile.start() if args.profile else None
            s, used, dups = run(client, docs, short_k, f"bench-short-{r}-{short_k}")
            print(
                f"  round {r + 1}, --short-k {short_k}: {s:.2f} s, {len(docs) / s:,.0f} records/s, "
                f"{used / len(docs):.1f} Redis commands a record, precision "
                f"{len(dups & true) / max(len(dups), 1):.4f}, "
                f"recall {len(dups & true) / len(true):.4f}"
            )
            if profiled is not None:
                print(profiled.table())
                profile.stop()


if __name__ == "__main__":
    main()
