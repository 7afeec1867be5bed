"""Score a detector's decisions on a sites stream against its main-content truth.

    python bench/sites/score.py DECISIONS.jsonl[.gz] [TRUTH.jsonl.gz] [--json]

TRUTH defaults to ~/.cache/neardup-sites/sites-truth.jsonl.gz (what build.py writes).
Precision and recall of decision == "duplicate" against max_jaccard_earlier >= 0.8, with
bench/html_pages.py's `scores`: overall, per site (the template's host), per kind, per
kind and edit, and per kind split into short (under 150 main-content words) and long.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from html_pages import read_jsonl, scores

DEFAULT_TRUTH = Path.home() / ".cache" / "neardup-sites" / "sites-truth.jsonl.gz"


def grouped(decisions: list[dict[str, Any]], truth: list[dict[str, Any]]) -> dict[str, Any]:
    """`scores` groups by the truth's kind, so each grouping relabels the kind."""

    def by(label: Any) -> dict[str, Any]:
        got = scores(decisions, [{**t, "kind": label(t), "short": False} for t in truth])
        return {g: v for g, v in got.items() if g != "all"}

    length = "{0[kind]} {1}".format
    return {
        "all": scores(decisions, truth)["all"],
        "site": by(lambda t: t["site"]),
        "kind": by(lambda t: t["kind"]),
        "kind+edit": by(lambda t: t["kind"] + ("" if t["edit"] is None else str(t["edit"]))),
        "kind x short": by(lambda t: length(t, "short" if t["short"] else "long")),
    }


def table(report: dict[str, Any]) -> str:
    lines = [f"{'group':32s}{'P':>7s}{'R':>7s}{'tp':>7s}{'fp':>7s}{'fn':>7s}"]

    def row(name: str, v: dict[str, Any]) -> None:
        p, r = ("-" if x is None else f"{x:.3f}" for x in (v["precision"], v["recall"]))
        lines.append(f"{name:32s}{p:>7s}{r:>7s}{v['tp']:7d}{v['fp']:7d}{v['fn']:7d}")

    row("all", report["all"])
    for section in ("site", "kind", "kind+edit", "kind x short"):
        lines.append(f"-- by {section}")
        for name, v in report[section].items():
            row(name, v)
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("decisions", type=Path)
    ap.add_argument("truth", type=Path, nargs="?", default=DEFAULT_TRUTH)
    ap.add_argument("--json", action="store_true", help="print the report as JSON too")
    args = ap.parse_args()
    decisions, truth = read_jsonl(args.decisions), read_jsonl(args.truth)
    ids = {t["id"] for t in truth}
    if {d["id"] for d in decisions if "id" in d} != ids:
        print("warning: decisions and truth do not cover the same ids", file=sys.stderr)
    report = grouped(decisions, truth)
    print(
        f"{len(truth)} records, {sum(t['max_jaccard_earlier'] >= 0.8 for t in truth)} "
        "duplicates (max_jaccard_earlier >= 0.8)"
    )
    print(table(report))
    if args.json:
        print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
