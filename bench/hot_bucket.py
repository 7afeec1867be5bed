#!/usr/bin/env python3
"""A hot bucket: what a flood of variants into the same block-table buckets costs every
lookup that touches them, with the bound (`max_bucket`, the newest entries of a bucket
only) and without it; and what the bound costs in recall on the dev stream.

    python bench/hot_bucket.py [--flood N] [--redis-url URL] [--no-redis]
                               [--corpus PATH --truth PATH] [--caps 2 8 32 1024]

1. Work per lookup. Into an empty index (memory, and Redis at --redis-url unless
   --no-redis) go N documents whose fingerprints differ from one base only in their top two
   8-bit blocks: 15 of the default scheme's 28 tables put them all in one bucket each. Then,
   timed, batches of 64 lookups: near the flood (more variants) and of random
   fingerprints (cold buckets), with the default bound and with none (max_bucket 10^9).
   Printed: ms per batch of 64 and the candidates a lookup returns, and the ratio.
2. Recall. `Detector.process` over the dev stream (or --corpus) into a memory index
   with each --caps value, scored against the truth like `neardup eval`.
Figures only; it asserts nothing.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from detector.decide import Detector  # noqa: E402
from detector.evaluate import evaluate, load_jsonl  # noqa: E402
from detector.index import DEFAULT_MAX_BUCKET, Commit, Entry, Index, Query  # noqa: E402
from detector.index.memory import MemoryIndex  # noqa: E402
from detector.pipeline import Limits, prepare  # noqa: E402
from detector.records import Decision  # noqa: E402
from detector.settings import EngineSettings  # noqa: E402
from detector.stream.files import input_label, open_input, read_lines  # noqa: E402

DEV = ROOT.parent / "shared" / "data"
UNBOUNDED = 10**9
BATCH = 64


def variant(rng: random.Random) -> int:
    """A change in the top two 8-bit blocks only: the variants share their bucket in the
    15 tables of the default scheme that key on neither block."""
    return rng.getrandbits(16) << 48


def flood(index: Index, base: int, count: int) -> None:
    rng = random.Random(7)
    for at in range(0, count, 256):
        docs = [
            Entry(f"f{i}", "t", base ^ variant(rng), f"fd{i}", "")
            for i in range(at, min(at + 256, count))
        ]
        index.lookup([Query("t", e.fingerprint, e.digest) for e in docs])
        index.commit([Commit(Decision(e.id, None, e.fingerprint), e) for e in docs])


def timed_lookups(index: Index, queries: list[list[int]]) -> tuple[float, float]:
    """ms per batch, candidates per lookup."""
    started = time.perf_counter()
    found = 0
    for batch in queries:
        for f in index.lookup([Query("t", q, "none") for q in batch]):
            found += len(f.candidates)
    ms = (time.perf_counter() - started) * 1000 / len(queries)
    return ms, found / (len(queries) * BATCH)


def work_per_lookup(make: Any, label: str, count: int) -> None:
    scheme = EngineSettings().block_scheme()
    base = 0x0123456789ABCDEF
    rng = random.Random(11)
    near = [[base ^ variant(rng) for _ in range(BATCH)] for _ in range(5)]
    cold = [[rng.getrandbits(64) for _ in range(BATCH)] for _ in range(5)]
    rows = {}
    for cap in (DEFAULT_MAX_BUCKET, UNBOUNDED):
        index = make(scheme, cap)
        started = time.perf_counter()
        flood(index, base, count)
        fill = time.perf_counter() - started
        rows[cap] = (timed_lookups(index, near), timed_lookups(index, cold), fill)
        close = getattr(index, "drop", None)
        if close:
            close()
    (bn, bc, bf), (un, uc, uf) = rows[DEFAULT_MAX_BUCKET], rows[UNBOUNDED]
    print(f"\n{label}: {count:,} variants in 15 of 28 buckets of the default scheme")
    print("| lookups of 64 | bounded (max_bucket 1024) | unbounded | unbounded / bounded |")
    print("|---|---:|---:|---:|")
    print(f"| near the flood, ms | {bn[0]:,.1f} | {un[0]:,.1f} | {un[0] / bn[0]:,.1f}x |")
    print(f"| near the flood, candidates each | {bn[1]:,.0f} | {un[1]:,.0f} | |")
    print(f"| random, ms | {bc[0]:,.1f} | {uc[0]:,.1f} | {uc[0] / bc[0]:,.1f}x |")
    print(f"| filling the flood, s | {bf:,.1f} | {uf:,.1f} | |", flush=True)


def redis_maker(url: str) -> Any:
    import redis

    from detector.index.redis import RedisIndex

    client = redis.Redis.from_url(url)

    def make(scheme: Any, cap: int) -> Index:
        name = f"bench-hot-{uuid.uuid4().hex[:8]}"
        index = RedisIndex(client, scheme, name, max_bucket=cap)
        index.bind("bench")
        return index

    return make


def recall(corpus: Path, truth: Path, caps: list[int]) -> None:
    with open_input(str(corpus)) as f:
        raw = list(read_lines(f, input_label(str(corpus))))
    truth_rows = load_jsonl(str(truth))
    print(f"\nrecall on {corpus.name} ({len(raw):,} records), memory index:")
    print("| max_bucket | precision | recall | F1 |")
    print("|---:|---:|---:|---:|")
    settings = EngineSettings()
    for cap in caps:
        scheme = settings.block_scheme()
        detector = Detector(
            settings.engine(),
            MemoryIndex(scheme, max_bucket=cap),
            scheme,
            settings.literal(),
            settings.max_candidates,
        )
        decisions = []
        for at in range(0, len(raw), 512):
            batch = prepare(detector.engine, raw[at : at + 512], Limits(settings.max_bytes))
            decisions += [d.to_dict() for d in detector.process(batch.docs, batch.prints)]
        s = evaluate(decisions, truth_rows, 0.8)
        print(f"| {cap:,} | {s['precision']:.3f} | {s['recall']:.4f} | {s['f1']:.3f} |", flush=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--flood", type=int, default=8_000)
    p.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    p.add_argument("--no-redis", action="store_true")
    p.add_argument("--corpus", type=Path, default=DEV / "dev-stream.jsonl.gz")
    p.add_argument("--truth", type=Path, default=DEV / "dev-truth.jsonl.gz")
    p.add_argument("--caps", type=int, nargs="+", default=[1, 2, 4, 8, 32, DEFAULT_MAX_BUCKET])
    args = p.parse_args()
    work_per_lookup(lambda s, cap: MemoryIndex(s, max_bucket=cap), "memory index", args.flood)
    if not args.no_redis:
        work_per_lookup(redis_maker(args.redis_url), "Redis index", args.flood)
    if args.corpus.is_file() and args.truth.is_file():
        recall(args.corpus, args.truth, args.caps)
    else:
        print(f"\n(no {args.corpus}: recall not measured)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
