#!/usr/bin/env python3
"""The literal pass beyond the window of texts kept: precision and recall against the
text budget (`--text-window` at a share of the stream's length), and the bytes a
document the texts and sketches take, on the text and HTML dev streams.

    python bench/text_window.py [--data DIR] [--streams text,html]
                                [--windows 1,0.5,0.1,0.01,0] [--bands distance,unique,...]
                                [--band-distances 0,1,2,3,4] [--bins 1024 --bits 1]
                                [--redis-url URL]

Each run decides the whole stream as `neardup detect --text-window N` does (a memory
index, the default engine settings, batches of 512), N the share of the stream's records
times its length; "all" is the default, every text kept and no sketch. Printed per run:
precision, recall and F1 against the truth (max_jaccard_earlier >= 0.8), the decisions by
evidence, the pairs the band decided, and the bytes a document of the texts kept (packed)
and of the sketches, over the documents indexed. With --redis-url, each window is also
decided over a Redis index (one consumer, 256 a batch, as serve), trimmed to its window,
and its texts weighed: MEMORY USAGE of every tx, sk and tq key a document indexed (the
text dictionary aside); the index is dropped after. Figures only; it asserts nothing.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import os
import sys
import time
from dataclasses import replace

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

from detector.evaluate import evaluate  # noqa: E402
from detector.index.memory import MemoryIndex  # noqa: E402
from detector.pipeline import run  # noqa: E402
from detector.settings import EngineSettings  # noqa: E402
from detector.sketch import SketchShape  # noqa: E402
from detector.stream.memory import ListSink  # noqa: E402

STREAMS = {"text": "dev", "html": "html-dev"}


def decide(
    records: list[bytes], settings: EngineSettings, shape: SketchShape
) -> tuple[list[dict[str, object]], MemoryIndex, float, int]:
    index = MemoryIndex(
        settings.block_scheme(),
        "bench",
        vectors=settings.vector_block_scheme(),
        text_window=settings.text_window,
    )
    detector = settings.detector(index)
    if detector.literal.sketch is not None:
        detector.literal.sketch = shape
    banded = 0
    judge = detector.literal.judge

    def counting(mine: bytes, theirs: bytes, distance: int):  # type: ignore[no-untyped-def]
        nonlocal banded
        judged = judge(mine, theirs, distance)
        banded += judged.banded
        return judged

    detector.literal.judge = counting  # type: ignore[method-assign]
    sink = ListSink()
    started = time.perf_counter()
    run(detector, records, sink)
    seconds = time.perf_counter() - started
    return [d.to_dict() for d in sink.out], index, seconds, banded


def redis_bytes(url: str, records: list[bytes], settings: EngineSettings) -> dict[str, float]:
    """Decide over a Redis index with the settings' window; bytes a document by family."""
    import redis as redis_py

    from detector.index.redis import RedisIndex, maintenance

    client = redis_py.Redis.from_url(url)
    name = f"bench-window-{os.getpid()}"
    index = RedisIndex(
        client,
        settings.block_scheme(),
        name,
        vectors=settings.vector_block_scheme(),
        text_window=settings.text_window,
    )
    try:
        run(settings.detector(index), records, ListSink(), batch_size=256)
        index.trim_texts()
        docs = max(index.stats()["documents"], 1)
        weighed = maintenance.memory(index, exact=True).bytes
        return {f: weighed.get(f, 0.0) / docs for f in ("tx", "sk", "tq")}
    finally:
        maintenance.drop(index)
        client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--data", default=os.path.join(here, "..", "..", "shared", "data"))
    parser.add_argument("--streams", default="text,html")
    parser.add_argument("--windows", default="all,1,0.5,0.1,0.01,0")
    parser.add_argument("--bands", default="distance")
    parser.add_argument("--band-distances", default="3")
    parser.add_argument("--bins", type=int, default=SketchShape().bins)
    parser.add_argument("--bits", type=int, default=SketchShape().bits)
    parser.add_argument("--redis-url", help="also weigh each window's texts in this Redis")
    args = parser.parse_args()
    shape = SketchShape(args.bins, args.bits)
    print(f"sketch: {shape.bins} bins of {shape.bits} bits, {shape.nbytes} bytes")
    for stream in args.streams.split(","):
        name = STREAMS[stream]
        path = os.path.join(args.data, f"{name}-stream.jsonl.gz")
        if not os.path.exists(path):
            sys.exit(f"no {path}: give --data, the directory of the dev streams")
        with gzip.open(path) as f:
            records = f.read().splitlines()
        with gzip.open(os.path.join(args.data, f"{name}-truth.jsonl.gz")) as f:
            truth = [json.loads(line) for line in f]
        print(f"\n{stream} dev stream: {len(records)} records")
        print(
            f"{'window':>12} {'band':>11} {'P':>7} {'R':>7} {'F1':>7} {'banded':>6} "
            f"{'text B/doc':>10} {'sketch B/doc':>12} {'docs/s':>7}  evidence"
        )
        for w in args.windows.split(","):
            window = None if w == "all" else round(float(w) * len(records))
            rules = (
                [("-", 0)]
                if window is None
                else [
                    (b, int(d))
                    for b in args.bands.split(",")
                    for d in (args.band_distances.split(",") if b == "distance" else ["0"])
                ]
            )
            for rule, distance in rules:
                settings = replace(
                    EngineSettings(),
                    text_window=window,
                    sketch_band=rule if rule != "-" else "distance",
                    sketch_band_distance=distance,
                )
                decisions, index, seconds, banded = decide(records, settings, shape)
                score = evaluate(decisions, truth)
                stats = index.stats()
                docs = max(stats["documents"], 1)
                evidence = collections.Counter(
                    f"{d.get('evidence')}/{d['decision'][0]}" for d in decisions
                )
                label = "all" if window is None else f"{w} ({window})"
                band = f"{rule}<={distance}" if rule == "distance" else rule
                band = "-" if window is None else band
                print(
                    f"{label:>12} {band:>11} {score['precision']:>7.4f} {score['recall']:>7.4f} "
                    f"{score['f1']:>7.4f} {banded:>6} {stats['text_bytes'] / docs:>10.0f} "
                    f"{stats['sketch_bytes'] / docs:>12.0f} {len(records) / seconds:>7.0f}  "
                    + " ".join(f"{k} {v}" for k, v in sorted(evidence.items())),
                    flush=True,
                )
                if args.redis_url and rule in ("-", "estimate"):
                    weighed = redis_bytes(args.redis_url, records, settings)
                    print(
                        f"{'':>12} Redis, B a document: "
                        + ", ".join(f"{f} {b:,.0f}" for f, b in weighed.items())
                        + f"; texts and sketches in all {sum(weighed.values()):,.0f}",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
