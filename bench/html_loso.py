"""HTML pages, leave one site out: the extraction's settings chosen without the site scored.

    .venv/bin/python bench/html_loso.py [--corpus PAGES.jsonl.gz --truth TRUTH.jsonl.gz]
        [--shares 0.8 0.85 0.9 0.95] [--template-urls 2 3 4 5]

`neardup detect` runs once on the whole stream for each setting of the grid (--content-share
x --template-urls; every other option at its default). Then, for each site S (the truth's
`site`: the host whose template a page has), the setting with the best F1 over the OTHER
sites' records is chosen, and S's records are scored with it: S's labels never choose
anything. Printed per site: the held-out figure, the defaults' figure, and the best setting
for S itself (the fit, which a new site never gets), then the held-out figures by kind.

The stream is not cut per site: a syndicated copy's original lives on another site, and the
truth's max_jaccard_earlier is over the whole stream. Choosing on the other sites' records
while S's pages are in the stream is what a deployment does: its template model sees every
site's pages, and its settings were chosen on other sites.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from _common import parse_summary, run
from html_pages import corpus_and_truth, read_jsonl

Setting = tuple[float, int]
Counts = tuple[int, int, int]  # true positives, false positives, false negatives


def detect(corpus: Path, out: Path, setting: Setting) -> None:
    share, urls = setting
    cmd = [sys.executable, "-m", "detector", "detect", str(corpus), "-o", str(out)]
    cmd += ["--content-share", str(share), "--template-urls", str(urls), "--no-progress"]
    rc, _, err, wall = run(cmd, timeout=3600)
    if rc != 0:
        raise RuntimeError(f"neardup detect failed ({rc}): {err.strip()[-2000:]}")
    print(f"  share {share} template-urls {urls}: {wall:.1f} s; {parse_summary(err)}", flush=True)


def counts(said: set[str], truth: list[dict[str, Any]]) -> Counts:
    tp = fp = fn = 0
    for t in truth:
        true, got = t["max_jaccard_earlier"] >= 0.8, t["id"] in said
        tp += true and got
        fp += got and not true
        fn += true and not got
    return tp, fp, fn


def f1(c: Counts) -> float:
    tp, fp, fn = c
    return 2 * tp / (2 * tp + fp + fn) if tp else 0.0


def pr(c: Counts) -> str:
    tp, fp, fn = c
    p = f"{tp / (tp + fp):.3f}" if tp + fp else "-"
    r = f"{tp / (tp + fn):.3f}" if tp + fn else "-"
    return f"{p} / {r}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path)
    ap.add_argument("--truth", type=Path)
    ap.add_argument("--shares", type=float, nargs="+", default=[0.8, 0.85, 0.9, 0.95])
    ap.add_argument("--template-urls", type=int, nargs="+", default=[2, 3, 4, 5])
    ap.add_argument("--default", default="0.9,3", help="the defaults' setting: SHARE,URLS")
    args = ap.parse_args()
    corpus, truth = corpus_and_truth(args)
    sites = sorted({t["site"] for t in truth})
    by_site = {s: [t for t in truth if t["site"] == s] for s in sites}
    share, urls = args.default.split(",")
    default: Setting = (float(share), int(urls))
    grid: list[Setting] = sorted(set(itertools.product(args.shares, args.template_urls)))
    grid = sorted(set(grid) | {default})
    print(f"pages: {corpus} ({len(truth)} records, {len(sites)} sites); {len(grid)} settings")

    said: dict[Setting, set[str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for setting in grid:
            out = Path(tmp) / "decisions.jsonl"
            detect(corpus, out, setting)
            said[setting] = {d["id"] for d in read_jsonl(out) if d.get("decision") == "duplicate"}

    report: dict[str, Any] = {"corpus": str(corpus), "grid": grid, "sites": {}}
    print(
        "\n| held-out site | chosen on the others | held out P / R | F1 | defaults P / R | F1 "
        "| best for the site itself (fit) |\n|---|---|---|---:|---|---:|---|"
    )
    # Each record as decided with the setting chosen without its site.
    held_said: set[str] = set()
    for s in sites:
        others = [t for t in truth if t["site"] != s]
        chosen = max(grid, key=lambda g: (f1(counts(said[g], others)), g == default))
        fit = max(grid, key=lambda g: (f1(counts(said[g], by_site[s])), g == default))
        held_said |= {t["id"] for t in by_site[s]} & said[chosen]
        c_held, c_default = counts(said[chosen], by_site[s]), counts(said[default], by_site[s])
        c_fit = counts(said[fit], by_site[s])
        print(
            f"| {s} | {chosen[0]}, {chosen[1]} | {pr(c_held)} | {f1(c_held):.3f} | "
            f"{pr(c_default)} | {f1(c_default):.3f} | {fit[0]}, {fit[1]}: {pr(c_fit)}, "
            f"F1 {f1(c_fit):.3f} |"
        )
        report["sites"][s] = {
            "chosen": chosen,
            "held_out": c_held,
            "default": c_default,
            "fit": fit,
            "fit_counts": c_fit,
        }
    c_all, c_def = counts(held_said, truth), counts(said[default], truth)
    print(
        f"| **every site held out** | | {pr(c_all)} | {f1(c_all):.3f} | {pr(c_def)} | "
        f"{f1(c_def):.3f} | |"
    )
    report["all"] = {"held_out": c_all, "default": c_def}

    print("\n| kind, each site held out | P / R | tp | fp | fn |\n|---|---|---:|---:|---:|")
    groups: dict[str, list[dict[str, Any]]] = {}
    for t in truth:
        kind = t.get("kind", "all")
        groups.setdefault(kind, []).append(t)
        if t.get("short"):
            groups.setdefault(f"{kind}-short", []).append(t)
    report["kinds"] = {}
    for g, members in sorted(groups.items()):
        c = counts(held_said, members)
        report["kinds"][g] = c
        print(f"| {g} | {pr(c)} | {c[0]} | {c[1]} | {c[2]} |")
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
