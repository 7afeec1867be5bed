#!/usr/bin/env python3
"""The shingle sketch (detector/sketch.py) by shape: its bytes, its error in theory and
measured on real pairs, the time to make and compare sketches; and the packed texts by
length, against which SHORT_SHINGLES is chosen.

    python bench/sketch.py [--data DIR] [--reference-docs 2048] [--repeat 3]

The documents are the text dev stream's, fingerprinted as the engine does (default
settings, 256 a batch): Print.shingles is the shingle set the detector sketches, Print.text
the normalized text an index keeps. The pairs are the truth's (dev-truth.jsonl.gz): each
record and its most similar earlier record, kept where their exact Jaccard
(verify.jaccard of the two shingle sets) is in [0.7, 0.9], around the threshold 0.8.

Per shape: the sketch's bytes; sigma at J = 0.8 from the binomial model alone (Li &
König), and with the small-set term for a union of 500 shingles (sketch.sigma); over the
pairs, the standard deviation of (estimate - exact), the same in units of each pair's own
model sigma (sigma at its exact J and its sizes: at most 1 when the model is right or
conservative), the share of pairs judged on the wrong side of 0.8 beyond Z = 3.72 sigma
(LiteralCheck.judge's sure verdicts that are wrong: the model promises about 1e-4), and
the share left in the band for the band rule. The pairs come in families of near-identical
pages that share shingles, so their errors are correlated: the figures vary more than as
many independent pairs' would (the mean error by 0.002-0.005 from one choice of the
sketch's hash seeds to another). Then microseconds to make a sketch a document
(the numpy reference over the first --reference-docs documents, the native kernels over
all; 256 a batch, the best of --repeat passes, one thread) and to estimate a pair.

Then the texts by shingle count: the dev stream's, and the embedding dev stream's texts
without their embeddings (short passages: the dev stream has almost no text of 64
shingles or fewer), packed by index.texts.Codec: zstd at its level without a dictionary,
and with the dictionary an index trains on the stream's first texts (texts.Sample), the
form the index keeps once it has one.
Figures only; it asserts nothing.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _common import read_records  # noqa: E402

from detector.engine import Print  # noqa: E402
from detector.features import Featurizer  # noqa: E402
from detector.index.texts import LEVEL, Codec, Sample  # noqa: E402
from detector.kernels import make  # noqa: E402
from detector.records import parse_document  # noqa: E402
from detector.settings import EngineSettings  # noqa: E402
from detector.sketch import SHORT_SHINGLES, SketchShape, estimate, sigma, sketches  # noqa: E402
from detector.verify import LiteralCheck, Z, jaccard  # noqa: E402

SHAPES = [(256, 1), (512, 1), (1024, 1), (2048, 1), (4096, 1), (512, 2), (256, 4), (128, 8)]
THRESHOLD = 0.8
UNION = 500  # the union the small-set column is for
BATCH = 256
BUCKETS = [(0, 32, "<= 32"), (33, 64, "33-64"), (65, 128, "65-128"), (129, 256, "129-256")]
BUCKETS.append((257, 1 << 62, "> 256"))


def fingerprint(raw: list[bytes]) -> tuple[list[str], list[Print], str]:
    """Ids and prints of the records, as the engine makes them; and its kernels' name."""
    engine = EngineSettings().engine()
    docs = [parse_document(line) for line in raw]
    prints: list[Print] = []
    for at in range(0, len(docs), BATCH):
        prints += engine.fingerprint(docs[at : at + BATCH])
    return [d.id for d in docs], prints, engine.kernels.name


def truth_pairs(path: Path, ids: list[str], prints: list[Print]) -> list[tuple[int, int, float]]:
    """(record, its most similar earlier record, their exact Jaccard) in [0.7, 0.9]."""
    at = {d: n for n, d in enumerate(ids)}
    out = []
    with gzip.open(path, "rt") as f:
        for line in f:
            row = json.loads(line)
            other = row.get("most_similar_earlier")
            if other is None:
                continue
            i, j = at[row["id"]], at[other]
            exact = jaccard(prints[i].shingles, prints[j].shingles)
            if 0.7 <= exact <= 0.9:
                out.append((i, j, exact))
    return out


def best_of(fn: Callable[[], Any], repeat: int) -> tuple[Any, float]:
    """fn's result and its seconds, the best of `repeat` runs (CPU time of this process)."""
    best, out = float("inf"), None
    for _ in range(repeat):
        start = time.process_time()
        out = fn()
        best = min(best, time.process_time() - start)
    return out, best


def batched(
    make_sketches: Callable[[list[np.ndarray], SketchShape], list[bytes]],
    sets: list[np.ndarray],
    shape: SketchShape,
) -> list[bytes]:
    out: list[bytes] = []
    for at in range(0, len(sets), BATCH):
        out += make_sketches(sets[at : at + BATCH], shape)
    return out


def measure(
    shape: SketchShape,
    sets: list[np.ndarray],
    pairs: list[tuple[int, int, float]],
    reference_docs: int,
    repeat: int,
) -> dict[str, Any]:
    native = make("native", Featurizer(), 5)  # the engine's: default features, 5-shingles
    made, native_s = best_of(lambda: batched(native.sketches, sets, shape), repeat)
    head = sets[:reference_docs]
    reference, numpy_s = best_of(lambda: batched(sketches, head, shape), repeat)
    same = reference == made[: len(head)]
    check = LiteralCheck(THRESHOLD, sketch=shape)

    def estimates() -> list[Any]:
        return [estimate(made[i], made[j], THRESHOLD) for i, j, _ in pairs]

    found, estimate_s = best_of(estimates, repeat)
    err, z, wrong, banded = [], [], 0, 0
    for (i, j, exact), e in zip(pairs, found, strict=True):
        err.append(e.jaccard - exact)
        z.append((e.jaccard - exact) / sigma(exact, shape, len(sets[i]) + len(sets[j])))
        judged = check.judge(made[i], made[j], 0)
        banded += judged.banded
        wrong += not judged.banded and judged.duplicate != (exact >= THRESHOLD)
    return {
        "sd": float(np.std(err)),
        "mean": float(np.mean(err)),
        "z": float(np.std(z)),
        "wrong": wrong / len(pairs),
        "wrong_n": wrong,
        "band": banded / len(pairs),
        "numpy_us": numpy_s / len(head) * 1e6,
        "native_us": native_s / len(sets) * 1e6,
        "estimate_us": estimate_s / len(pairs) * 1e6,
        "same": same,
    }


def trained(texts: list[str]) -> Codec:
    """The codec an index packs with once it has trained its dictionary on these texts."""
    sample = Sample()
    for n, t in enumerate(texts):
        if sample.full:
            break
        sample.add(str(n), t, b"")
    data = sample.train(LEVEL)
    codec = Codec()
    if data is not None:
        codec.use(data)
    return codec


def text_sizes(prints: list[Print]) -> list[dict[str, Any]]:
    """Per bucket of shingle count: texts, their mean shingles, bytes, packed bytes."""
    texts = [p.text for p in prints]
    plain, dictionary = Codec(with_dictionary=False), trained(texts)
    rows = []
    for low, high, name in BUCKETS:
        mine = [p for p in prints if low <= len(p.shingles) <= high]
        if not mine:
            rows.append({"bucket": name, "texts": 0})
            continue
        rows.append(
            {
                "bucket": name,
                "texts": len(mine),
                "shingles": np.mean([len(p.shingles) for p in mine]),
                "raw": np.mean([len(p.text.encode("utf-8")) for p in mine]),
                "plain": np.mean([len(plain.pack(p.text)) for p in mine]),
                "dictionary": np.mean([len(dictionary.pack(p.text)) for p in mine]),
            }
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--reference-docs", type=int, default=2048, help="timed with numpy")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    start = time.perf_counter()
    ids, prints, kernels = fingerprint(read_records(args.data / "dev-stream.jsonl.gz"))
    sets = [p.shingles for p in prints]
    pairs = truth_pairs(args.data / "dev-truth.jsonl.gz", ids, prints)
    exact = np.array([j for _, _, j in pairs])
    unions = np.array([len(np.union1d(sets[i], sets[j])) for i, j, _ in pairs])
    short = sum(min(len(sets[i]), len(sets[j])) <= SHORT_SHINGLES for i, j, _ in pairs)
    print(
        f"dev stream: {len(prints):,} documents ({kernels} kernels), "
        f"{np.mean([len(s) for s in sets]):,.0f} shingles a document (median "
        f"{np.median([len(s) for s in sets]):,.0f}); {len(pairs):,} truth pairs of exact "
        f"Jaccard 0.7-0.9 ({(exact >= THRESHOLD).sum():,} at or above {THRESHOLD}; their "
        f"union median {np.median(unions):,.0f}, 10-90% {np.percentile(unions, 10):,.0f}-"
        f"{np.percentile(unions, 90):,.0f} shingles; {short} with a side of at most "
        f"{SHORT_SHINGLES} shingles)\n"
    )
    print(
        f"| shape | bytes | sigma J=0.8 | sigma, union {UNION} | measured sd | mean error "
        f"| sd / own sigma | sure and wrong (Z={Z}) | in band | numpy us/doc "
        "| native us/doc | estimate us/pair |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    differs = []
    for bins, bits in SHAPES:
        shape = SketchShape(bins, bits)
        r = measure(shape, sets, pairs, args.reference_docs, args.repeat)
        if not r["same"]:
            differs.append(f"{bins}x{bits}")
        small = sigma(THRESHOLD, shape, round(UNION * (1 + THRESHOLD)))
        print(
            f"| {bins} x {bits} bit | {shape.nbytes} | {sigma(THRESHOLD, shape):.4f} "
            f"| {small:.4f} | {r['sd']:.4f} | {r['mean']:+.4f} | {r['z']:.3f} "
            f"| {r['wrong']:.4f} ({r['wrong_n']}) | {r['band']:.3f} | {r['numpy_us']:,.1f} "
            f"| {r['native_us']:,.1f} | {r['estimate_us']:,.1f} |",
            flush=True,
        )
    if differs:
        print(f"\nNATIVE AND REFERENCE SKETCHES DIFFER for {', '.join(differs)}")

    passages = read_records(args.data / "embed-dev-stream.jsonl.gz", drop_embeddings=True)
    embedded = fingerprint(passages)[1]
    for name, stream in (("dev stream", prints), ("embedding dev stream, texts only", embedded)):
        print(
            f"\nTexts of the {name} by shingle count: mean bytes, normalized and packed "
            f"(zstd {LEVEL}; with the dictionary an index trains on the first texts):\n"
        )
        print("| shingles | texts | mean shingles | text bytes | zstd | zstd + dictionary |")
        print("|---|---:|---:|---:|---:|---:|")
        for row in text_sizes(stream):
            if not row["texts"]:
                print(f"| {row['bucket']} | 0 | | | | |")
                continue
            print(
                f"| {row['bucket']} | {row['texts']:,} | {row['shingles']:,.0f} "
                f"| {row['raw']:,.0f} | {row['plain']:,.0f} | {row['dictionary']:,.0f} |"
            )
    default = SketchShape()
    print(
        f"\nA sketch of the default shape ({default.bins} x {default.bits} bit) is "
        f"{default.nbytes} bytes; SHORT_SHINGLES = {SHORT_SHINGLES}. "
        f"{time.perf_counter() - start:,.0f} s in all."
    )


if __name__ == "__main__":
    main()
