"""Dense embeddings: neardup's cosine decisions against exact and approximate vector peers.

    .venv/bin/python bench/embeddings.py [--records 100000] [--cosine 0.90,0.95,0.98]
                                         [--no-peers] [--peer-timeout 3600]

Streams: ../shared/data/embed-dev-stream.jsonl.gz (6,046 records, all-MiniLM-L6-v2
vectors) with its exact truth; and, unless --records 0, a stream of N records built from
it and cached under /tmp/neardup-bench-embed/: the dev records, then rounds of copies of
the dev stream, each round turned by its own seeded rotation (the 384 dimensions paired
by a random permutation, each pair rotated by 50-70 degrees). A rotation keeps every
cosine within a round and moves a vector to cosine ~0.5 of itself, so each round adds its
own near-duplicates at the dev stream's rate. Ids get a suffix -rR; texts are copied. Its
truth is exact: numpy brute force by blocked float32 matrix products
(bench/peer/run_vectors.py --write-truth), cached beside it.

On each stream and each threshold T (--cosine; the peers on the big stream only at 0.90,
to bound the time), a record is truly a duplicate when max_cosine_earlier >= T:
  - neardup: `python -m detector detect STREAM --cosine T` as a subprocess (process start
    included) of a snapshot of detector/; docs/s from its summary line, the probes,
    candidates and bytes a vector from its `neardup: vectors:` line;
  - the peers (bench/peer/setup_vectors.sh, then bench/peer/run_vectors.py): numpy brute
    force, faiss IndexFlatIP range search (both exact), hnswlib and faiss binary
    multi-hash (approximate); each times its own stream loop, one record at a time, with
    its vectors parsed beforehand, and has a timeout (--peer-timeout).
All are scored alike: precision, recall, and duplicate_of naming an earlier record.
neardup's docs/s (its summary line) include reading and parsing the stream; the peers'
do not, so the ratios favour the peers.
The machine is shared and timings are noisy: the ratios are of runs of one process
session, one after another; the load average is printed at the start and the end.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import math
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import (
    BENCH,
    SHARED_DATA,
    Code,
    fmt,
    fmt_rate,
    last_json,
    load,
    markdown,
    parse_summary,
    run,
    snapshot_code,
    work_tree_changed,
)

DEV = SHARED_DATA / "embed-dev-stream.jsonl.gz"
DEV_TRUTH = SHARED_DATA / "embed-dev-truth.jsonl.gz"
CACHE = Path("/tmp/neardup-bench-embed")
BUILD = "rot1"  # names the construction of the big stream in its cache file names
PEERS = ("numpy-bruteforce", "faiss-flat-range", "hnswlib", "faiss-multihash")
BIG_PEER_COSINE = 0.90
TARGET = ("faiss-flat-range", 20.0, 0.95)  # neardup >= 20x its docs/s at recall >= 0.95

# The line detect prints after its summary when records had embeddings.
_VECTORS = re.compile(
    r"neardup: vectors: ([\d,]+) lookups, ([\d.,]+) probes a lookup, "
    r"([\d.,]+) candidates a lookup, ([\d.,]+) bytes a vector \(([^)]*)\)"
)


def say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def load1() -> float:
    """The 1-minute load average after a run: a busy machine explains a slow figure."""
    return round(os.getloadavg()[0], 2)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    opener: Any = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def rotation(seed: int, r: int, dim: int) -> list[tuple[int, int, float, float]]:
    rng = random.Random(seed * 1_000_003 + r)
    perm = list(range(dim))
    rng.shuffle(perm)
    angles = [math.radians(rng.uniform(50.0, 70.0)) for _ in range(dim // 2)]
    return [(perm[2 * k], perm[2 * k + 1], math.cos(a), math.sin(a)) for k, a in enumerate(angles)]


def rotate(v: list[float], pairs: list[tuple[int, int, float, float]]) -> list[float]:
    out = list(v)  # an odd dimension keeps its last, unpaired component
    for a, b, c, s in pairs:
        x, y = v[a], v[b]
        out[a], out[b] = c * x - s * y, s * x + c * y
    return out


def big_stream(n: int, seed: int, peer_python: str) -> tuple[Path, Path]:
    """The N-record stream and its exact truth, built once and cached."""
    digest = hashlib.sha1(DEV.read_bytes()).hexdigest()[:8]
    stem = CACHE / f"embed-{n}-s{seed}-{BUILD}-{digest}"
    stream, truth = Path(f"{stem}.jsonl.gz"), Path(f"{stem}-truth.jsonl")
    if not stream.is_file():
        say(f"building {stream} ({n:,} records)")
        CACHE.mkdir(parents=True, exist_ok=True)
        with gzip.open(DEV, "rt", encoding="utf-8") as f:
            lines = [line.rstrip("\n") for line in f if line.strip()]
        dev = [json.loads(line) for line in lines]
        part = stream.with_suffix(".part")
        with gzip.open(part, "wt", encoding="utf-8", compresslevel=1) as out:
            for i in range(n):
                r, rec = divmod(i, len(dev))
                if r == 0:
                    out.write(lines[rec] + "\n")
                    continue
                if rec == 0:
                    pairs = rotation(seed, r, len(dev[0]["embedding"]))
                    say(f"  round {r}: records {i:,}..{min(n, i + len(dev)) - 1:,}")
                d = dev[rec]
                vec = ",".join(f"{x:.5f}" for x in rotate(d["embedding"], pairs))
                rid, text = json.dumps(f"{d['id']}-r{r}"), json.dumps(d["text"])
                out.write(f'{{"id": {rid}, "text": {text}, "embedding": [{vec}]}}\n')
        part.rename(stream)
    if not truth.is_file():
        say(f"exact truth of {stream.name} (numpy, blocked float32 products)")
        part = truth.with_suffix(".part")
        # The main venv's numpy does it when the peers are skipped: no install needed.
        python = peer_python or sys.executable
        cmd = [python, str(BENCH / "peer" / "run_vectors.py"), str(stream)]
        rc, _, err, wall = run([*cmd, "--write-truth", str(part)], timeout=7200)
        if rc != 0:
            raise RuntimeError(f"truth failed ({rc}): {err.strip()[-2000:]}")
        part.rename(truth)
        say(f"  truth in {wall:.0f} s")
    return stream, truth


def rates(truth: list[dict[str, Any]], cosines: list[float]) -> dict[str, float]:
    return {
        f"{t:.2f}": round(sum(r["max_cosine_earlier"] >= t for r in truth) / len(truth), 4)
        for t in cosines
    }


def score(decisions: Path, truth: list[dict[str, Any]], t: float) -> dict[str, Any]:
    position = {r["id"]: i for i, r in enumerate(truth)}
    said, decided = {}, 0
    for d in read_jsonl(decisions):
        decided += 1
        if d.get("decision") == "duplicate":
            said[d["id"]] = d.get("duplicate_of")
    tp = fp = fn = bad = 0
    for i, r in enumerate(truth):
        true, got = r["max_cosine_earlier"] >= t, r["id"] in said
        tp += true and got
        fp += got and not true
        fn += true and not got
        bad += got and position.get(said[r["id"]], i) >= i
    return {
        "precision": round(tp / (tp + fp), 4) if tp + fp else None,
        "recall": round(tp / (tp + fn), 4) if tp + fn else None,
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "bad_links": bad,
        "decided": decided,
    }


def vectors_line(stderr: str) -> dict[str, Any] | None:
    m = _VECTORS.search(stderr)
    if not m:
        return None
    lookups, probes, candidates, size = (float(g.replace(",", "")) for g in m.groups()[:4])
    return {
        "lookups": int(lookups),
        "probes": probes,
        "candidates": candidates,
        "bytes_per_vector": size,
        "scheme": m[5],
    }


def neardup(stream: Path, t: float, out: Path, timeout: float) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "detector", "detect", str(stream), "--cosine", str(t)]
    rc, _, err, wall = run([*cmd, "-o", str(out), "--no-progress"], timeout=timeout)
    if rc != 0:
        why = f"timed out after {timeout:.0f} s" if rc is None else f"exit {rc}"
        say(f"neardup detect {why}: {err.strip()[-2000:]}")
        return {"tool": "neardup", "error": why}
    summary = parse_summary(err)
    return {
        "tool": "neardup",
        "wall_s": round(wall, 2),
        "docs_per_s": summary["rate"] if summary else None,
        "end_to_end_docs_per_s": round(summary["records"] / wall, 1) if summary else None,
        "summary": summary,
        "vectors": vectors_line(err),
    }


def setup_peers() -> str:
    rc, stdout, err, _ = run(["bash", str(BENCH / "peer" / "setup_vectors.sh")], timeout=1800)
    if rc != 0 or not stdout.strip():
        raise RuntimeError(f"bench/peer/setup_vectors.sh failed ({rc}): {err.strip()[-2000:]}")
    return stdout.strip().splitlines()[-1]


def peer(python: str, name: str, stream: Path, t: float, out: Path, timeout: float) -> dict:
    """One peer in its own process; its progress lines go straight to our stderr."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    cmd = [python, str(BENCH / "peer" / "run_vectors.py"), str(stream), "--peer", name]
    cmd += ["--cosine", str(t), "--out", str(out), "--progress", "10000"]
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"tool": name, "error": f"timed out after {timeout:.0f} s"}
    if p.returncode != 0:
        return {"tool": name, "error": f"exit {p.returncode}"}
    return last_json(p.stdout)


def row(r: dict[str, Any], neardup_rate: dict[float, float | None]) -> list[str]:
    s, v = r.get("scores") or {}, r.get("vectors") or {}
    size = r.get("bytes_per_vector", v.get("bytes_per_vector"))
    rate = r.get("docs_per_s")
    mine = neardup_rate.get(r["cosine"])
    ratio = "" if r["tool"] == "neardup" or not rate or not mine else f"{mine / rate:.1f}x"
    return [
        r["tool"] + (f" ({r['error']})" if "error" in r else ""),
        f"{r['cosine']:.2f}",
        fmt(s.get("precision")),
        fmt(s.get("recall")),
        str(s.get("bad_links", "")),
        fmt_rate(rate),
        fmt(size, 0) if size is not None else "n/a",
        ratio,
    ]


def report(name: str, results: list[dict[str, Any]]) -> None:
    rate = {r["cosine"]: r.get("docs_per_s") for r in results if r["tool"] == "neardup"}
    headers = ["tool", "T", "precision", "recall", "bad links", "docs/s", "bytes/vector"]
    print(f"\n{name}\n")
    print(markdown([*headers, "neardup/peer"], [row(r, rate) for r in results], "lrrrrrrr"))
    frontier = [
        [
            f"{r['cosine']:.2f}",
            fmt((r.get("scores") or {}).get("recall")),
            fmt((r.get("vectors") or {}).get("probes"), 0),
            fmt((r.get("vectors") or {}).get("candidates"), 2),
            fmt_rate(r.get("docs_per_s")),
            fmt((r.get("vectors") or {}).get("bytes_per_vector"), 0),
            (r.get("vectors") or {}).get("scheme", "n/a"),
        ]
        for r in results
        if r["tool"] == "neardup"
    ]
    print(f"\nneardup's frontier ({name})\n")
    heads = ["T", "recall", "probes/lookup", "candidates/lookup", "docs/s", "bytes/vector"]
    print(markdown([*heads, "scheme"], frontier, "rrrrrrl"))
    tool, factor, recall = TARGET
    verdicts = []
    for p in results:
        if p["tool"] == tool and p.get("docs_per_s"):
            mine = next(r for r in results if r["tool"] == "neardup" and r["cosine"] == p["cosine"])
            got = (mine.get("scores") or {}).get("recall")
            x = (mine.get("docs_per_s") or 0.0) / p["docs_per_s"]
            ok = "met" if x >= factor and got is not None and got >= recall else "NOT met"
            verdicts.append(f"T {p['cosine']:.2f}: {x:.1f}x at recall {fmt(got)}, {ok}")
    if verdicts:
        print(
            f"\ntarget neardup >= {factor:.0f}x {tool} at recall >= {recall}: "
            + "; ".join(verdicts)
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=100_000, help="big stream; 0 skips it")
    ap.add_argument("--cosine", default="0.90,0.95,0.98", help="thresholds T, comma separated")
    ap.add_argument("--seed", type=int, default=0, help="seed of the big stream's rotations")
    ap.add_argument("--no-peers", action="store_true", help="neardup only (no peer venv)")
    ap.add_argument("--peers", default=",".join(PEERS), help="which peers, comma separated")
    ap.add_argument("--peer-timeout", type=float, default=3600.0, help="seconds, each peer run")
    ap.add_argument("--detect-timeout", type=float, default=3600.0, help="seconds, each detect")
    args = ap.parse_args()
    cosines = [float(c) for c in args.cosine.split(",")]
    peers = [] if args.no_peers else [p for p in args.peers.split(",") if p]
    started = time.perf_counter()
    print(f"load at start: {load()}", flush=True)

    figures: dict[str, Any] = {"cosines": cosines, "streams": {}}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        say("snapshot of detector/")
        snapshot_code(tmp, DEV)
        print(f"measured code: {Code.state}", flush=True)
        python = setup_peers() if peers else ""
        streams = [("dev", DEV, DEV_TRUTH)]
        if args.records:
            streams.append((f"{args.records:,}", *big_stream(args.records, args.seed, python)))
        for name, stream, truth_path in streams:
            truth = read_jsonl(truth_path)
            share = rates(truth, sorted({*cosines, 0.90, 0.95, 0.98}))
            print(f"\nstream {name}: {stream} ({len(truth):,} records), duplicate rate {share}")
            results: list[dict[str, Any]] = []
            for t in cosines:
                say(f"neardup detect on {name}, T {t:.2f}")
                out = tmp / "neardup.jsonl"
                r = neardup(stream, t, out, args.detect_timeout)
                if "error" not in r:
                    r["scores"] = score(out, truth, t)
                results.append({**r, "cosine": t, "load": load1()})
                for p in peers if name == "dev" or t == BIG_PEER_COSINE else ():
                    say(f"{p} on {name}, T {t:.2f} (timeout {args.peer_timeout:.0f} s)")
                    out = tmp / f"{p}.jsonl"
                    got = peer(python, p, stream, t, out, args.peer_timeout)
                    if "error" not in got:
                        got["scores"] = score(out, truth, t)
                        del got["decisions"]  # a temporary file
                    results.append({**got, "cosine": t, "load": load1()})
                    out.unlink(missing_ok=True)
            report(f"stream {name}", results)
            figures["streams"][name] = {
                "path": str(stream),
                "records": len(truth),
                "duplicate_rate": share,
                "results": results,
            }
    changed = work_tree_changed()
    if changed:
        print(f"note: {changed} (measured: {Code.state})")
    figures.update(code=Code.state, wall_s=round(time.perf_counter() - started, 1))
    print(f"\nload at end: {load()}; wall {figures['wall_s']:.0f} s")
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
