"""What a decision's cluster costs on Redis: the read of the partners' clusters, once a
batch (detector.decide._clusters), against the same run without it, in one process.

    python bench/clusters.py [--corpus FILE] [--redis-url URL] [--rounds 2]

Each round decides the corpus into a fresh index twice, with and without the read (the
order alternates), and prints the time of each, the Redis commands a document costs
(INFO commandstats) and the round trips of the batch. Needs a Redis of its own: the
index is dropped after each run.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import redis
from _common import read_records, resolve_corpus

from detector.index.redis import RedisIndex, maintenance
from detector.records import Document
from detector.settings import EngineSettings

BATCH = 512


def commands(client: Any) -> int:
    return sum(v["calls"] for v in client.info("commandstats").values())


def run(
    client: Any, docs: list[list[Document]], read: bool, name: str
) -> tuple[float, int, int, int]:
    settings = EngineSettings()
    index = RedisIndex(client, settings.block_scheme(), name)
    detector = settings.detector(index)
    if not read:  # every duplicate names its partner as its cluster: no read
        detector._clusters = lambda items: None  # type: ignore[method-assign]
    calls = 0
    original = index.clusters

    def counted(ids: Any) -> Any:
        nonlocal calls
        calls += 1
        return original(ids)

    index.clusters = counted  # type: ignore[method-assign]
    before = commands(client)
    started = time.perf_counter()
    duplicates = 0
    for batch in docs:
        duplicates += sum(d.duplicate_of is not None for d in detector.process(batch))
    seconds = time.perf_counter() - started
    used = commands(client) - before
    maintenance.drop(index)
    return seconds, used, calls, duplicates


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus")
    ap.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    corpus = resolve_corpus(args.corpus)
    rows = [json.loads(raw) for raw in read_records(corpus)]
    every = [Document(r["id"], r["text"], r.get("url")) for r in rows]
    docs = [every[at : at + BATCH] for at in range(0, len(every), BATCH)]
    n = sum(len(b) for b in docs)
    client = redis.Redis.from_url(args.redis_url)
    print(f"{corpus.name}: {n:,} records in {len(docs)} batches of {BATCH}")
    for r in range(args.rounds):
        for read in (r % 2 == 0, r % 2 == 1):
            s, used, calls, duplicates = run(client, docs, read, f"bench-clusters-{r}-{int(read)}")
            print(
                f"  round {r + 1}, {'with' if read else 'without'} the cluster read: {s:.2f} s, "
                f"{n / s:,.0f} records/s, {used / n:.2f} Redis commands a record, "
                f"{calls} cluster reads, {duplicates:,} duplicates"
            )


if __name__ == "__main__":
    main()
