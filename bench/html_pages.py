"""HTML pages: quality by kind, pages/s end to end, the extraction's share, and the peer.

    .venv/bin/python bench/html_pages.py [--corpus PAGES.jsonl.gz --truth TRUTH.jsonl.gz]

Defaults to ../shared/data/html-dev-stream.jsonl.gz and its truth when present, else the
bundled tests/data/html-sample.jsonl.gz. In one run, on the same pages:
  - `neardup detect` (process start included) with --html auto (the default) and with
    --html text (tags stripped, today's behaviour before main-content extraction);
  - the extraction alone (detector.extract over every page, as detect batches them), so
    its share of detect's time: with the native walk (native/src/html.rs) and with the
    Python reference walk;
  - the peer: PyPI simhash with its default features (Simhash(text), character 4-grams of
    the whole page) and SimhashIndex k=3, its own timed loop (bench/peer/run_simhash.py).
Scores: precision and recall of "duplicate" against max_jaccard_earlier >= 0.8, overall,
by kind (recrawl, syndicated, original) and for short pages (under 150 main-content words).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import BENCH, ROOT, SHARED_DATA, last_json, parse_summary, run

DEFAULT = (SHARED_DATA / "html-dev-stream.jsonl.gz", SHARED_DATA / "html-dev-truth.jsonl.gz")
SAMPLE = (ROOT / "tests/data/html-sample.jsonl.gz", ROOT / "tests/data/html-sample-truth.jsonl.gz")


def corpus_and_truth(args: argparse.Namespace) -> tuple[Path, list[dict[str, Any]]]:
    """--corpus and --truth, or the dev stream when it is there, else the bundled sample."""
    corpus, truth = (
        (args.corpus, args.truth)
        if args.corpus
        else next((c, t) for c, t in (DEFAULT, SAMPLE) if c.is_file())
    )
    return corpus, read_jsonl(truth)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    opener: Any = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def scores(decisions: list[dict[str, Any]], truth: list[dict[str, Any]]) -> dict[str, Any]:
    said = {d["id"] for d in decisions if d.get("decision") == "duplicate"}
    groups: dict[str, list[int]] = {}
    for t in truth:
        true, got = t["max_jaccard_earlier"] >= 0.8, t["id"] in said
        kind = t.get("kind", "all")
        for g in ("all", kind, f"{kind}-short" if t.get("short") else None):
            if g is not None:
                c = groups.setdefault(g, [0, 0, 0])
                c[0] += true and got
                c[1] += got and not true
                c[2] += true and not got
    return {
        g: {
            "precision": round(tp / (tp + fp), 3) if tp + fp else None,
            "recall": round(tp / (tp + fn), 3) if tp + fn else None,
            "tp": tp,
            "fp": fp,
            "fn": fn,
        }
        for g, (tp, fp, fn) in sorted(groups.items())
    }


def detect(corpus: Path, out: Path, mode: str) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "detector", "detect", str(corpus), "-o", str(out)]
    rc, _, err, wall = run([*cmd, "--html", mode, "--no-progress"], timeout=3600)
    if rc != 0:
        raise RuntimeError(f"neardup detect failed ({rc}): {err.strip()[-2000:]}")
    return {"wall_s": round(wall, 2), "summary": parse_summary(err)}


def extraction_seconds(corpus: Path, kernels: str) -> tuple[float, int]:
    """The extraction alone over the corpus, with the walk of `kernels` (native or numpy:
    the Python reference)."""
    sys.path.insert(0, str(ROOT))
    from detector.extract import Extractor, walker
    from detector.records import Document
    from detector.templates import MemoryTemplates

    docs = [Document(r["id"], r["text"], r.get("url")) for r in read_jsonl(corpus)]
    extractor = Extractor("auto", MemoryTemplates(3), pages=walker(kernels))
    start = time.perf_counter()
    for at in range(0, len(docs), 512):
        extractor.batch(docs[at : at + 512])
    return time.perf_counter() - start, len(docs)


def peer(corpus: Path, out: Path) -> dict[str, Any]:
    rc, stdout, err, _ = run(["bash", str(BENCH / "peer" / "setup.sh")], timeout=1800)
    if rc != 0 or not stdout.strip():
        raise RuntimeError(f"bench/peer/setup.sh failed ({rc}): {err.strip()[-2000:]}")
    python = stdout.strip().splitlines()[-1]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    script = str(BENCH / "peer" / "run_simhash.py")
    cmd = [python, script, str(corpus), "--features", "default", "--out", str(out)]
    rc, stdout, err, _ = run(cmd, timeout=7200, env=env)
    if rc != 0:
        raise RuntimeError(f"peer failed ({rc}): {err.strip()[-2000:]}")
    return last_json(stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path)
    ap.add_argument("--truth", type=Path)
    ap.add_argument("--no-peer", action="store_true", help="skip the peer (it needs PyPI)")
    args = ap.parse_args()
    corpus, truth = corpus_and_truth(args)
    print(f"pages: {corpus} ({len(truth)} records)", flush=True)
    report: dict[str, Any] = {"corpus": str(corpus)}
    with tempfile.TemporaryDirectory() as tmp:
        for mode in ("auto", "text"):
            out = Path(tmp) / f"{mode}.jsonl"
            run_info = detect(corpus, out, mode)
            report[mode] = {**run_info, "scores": scores(read_jsonl(out), truth)}
            s = report[mode]["scores"]["all"]
            pages_s = len(truth) / run_info["wall_s"]
            report[mode]["pages_per_s"] = round(pages_s, 1)
            print(
                f"--html {mode}: P {s['precision']} R {s['recall']}, {pages_s:.0f} pages/s "
                f"end to end ({run_info['wall_s']} s)",
                flush=True,
            )
            for g, v in report[mode]["scores"].items():
                print(
                    f"    {g:18s} P {v['precision']}  R {v['recall']}  "
                    f"tp {v['tp']} fp {v['fp']} fn {v['fn']}"
                )
        sys.path.insert(0, str(ROOT))
        from detector.kernels import native_module

        kinds = ("native", "numpy") if native_module() is not None else ("numpy",)
        for kernels in kinds:
            seconds, pages = extraction_seconds(corpus, kernels)
            share = seconds / report["auto"]["wall_s"]
            report[f"extraction_{kernels}"] = {
                "seconds": round(seconds, 2),
                "pages_per_s": round(pages / seconds, 1),
                "us_per_page": round(seconds / pages * 1e6),
                "share_of_detect": round(share, 3),
            }
            print(
                f"extraction alone, {kernels} walk: {pages / seconds:.0f} pages/s "
                f"({seconds / pages * 1e6:.0f} us a page; {share:.0%} of detect's wall)"
            )
        if not args.no_peer:
            out = Path(tmp) / "peer.jsonl"
            got = peer(corpus, out)
            s = scores(read_jsonl(out), truth)["all"]
            ratio = report["auto"]["pages_per_s"] / got["docs_per_s"]
            report["peer"] = {**got, "scores": s, "neardup_over_peer": round(ratio, 2)}
            print(
                f"peer simhash {got.get('version')} (default features, k=3): "
                f"P {s['precision']} R {s['recall']}, {got['docs_per_s']:.0f} pages/s "
                f"(its timed loop); neardup end to end / peer = {ratio:.2f}x"
            )
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
