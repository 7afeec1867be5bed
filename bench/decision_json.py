#!/usr/bin/env python3
"""A decision's JSON, as the sinks encode a batch (Decision.encode_many): the Python path
(to_dict, then json's encoder, then UTF-8) against the native encoder (native/src/json.rs)
on the same decisions, in one process, and that both give the same bytes.

    python bench/decision_json.py [DECISIONS.jsonl] [--corpus STREAM] [--batch 256] [--repeat 7]

The decisions are those of `neardup detect` (read back with Decision.from_dict): of the
file given, or of a run of detect on the corpus (default: the dev stream). Printed:
microseconds a decision of each path, the best of --repeat passes over every decision, a
batch of --batch at a time (serve's default batch size), and their ratio.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _common import ROOT, resolve_corpus, run

sys.path.insert(0, str(ROOT))

from detector import records
from detector.records import Decision


def python_path(batch: list[Decision]) -> list[bytes]:
    return [d.to_json().encode() for d in batch]


def best_us(
    encode: Callable[[list[Decision]], list[bytes]], batches: list[list[Decision]], repeat: int
) -> float:
    n = sum(map(len, batches))
    took = []
    for _ in range(repeat):
        started = time.perf_counter()
        for batch in batches:
            encode(batch)
        took.append(time.perf_counter() - started)
    return min(took) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("decisions", nargs="?", help="decisions of neardup detect (JSONL)")
    parser.add_argument("--corpus", help="else those of detect on this stream")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    if records._NATIVE_JSON is None:
        sys.exit("error: detector._native (with decision_json) is not built")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args.decisions) if args.decisions else Path(tmp) / "decisions.jsonl"
        if not args.decisions:
            corpus = resolve_corpus(args.corpus)
            detect = ["detect", str(corpus), "-o", str(path), "--no-progress"]
            code, _, err, _ = run([sys.executable, "-m", "detector", *detect])
            if code != 0:
                sys.exit(f"error: detect failed:\n{err}")
        with open(path, encoding="utf-8") as f:
            decisions = [Decision.from_dict(json.loads(line)) for line in f]
    batches = [decisions[at : at + args.batch] for at in range(0, len(decisions), args.batch)]
    same = all(Decision.encode_many(b) == python_path(b) for b in batches)
    python = best_us(python_path, batches, args.repeat)
    native = best_us(Decision.encode_many, batches, args.repeat)
    print(
        f"{len(decisions):,} decisions, {args.batch} a batch, best of {args.repeat}: "
        f"Python {python:.2f} us a decision, native {native:.2f} us ({python / native:.1f}x); "
        f"the same bytes: {same}"
    )


if __name__ == "__main__":
    main()
