"""Short-text streams with exact near-duplicate truth, from Python docstrings (issue 27).

    python bench/short/build.py [--out DIR] [--records 20000] [--seed 27]

Writes two streams in the formats of `../shared/data/README.md` (the text dev stream's),
each `NAME-stream.jsonl.gz` and `NAME-truth.jsonl.gz`:

* `short-dev`: docstrings of the standard library (the interpreter's own) and of half of
  the packages installed beside it (site-packages, split by the crc32 of a package's name),
  to tune on;
* `short-holdout`: docstrings of the other half of the packages, to score on: other
  authors, other subjects, never tuned on.

A docstring is read from the source with `ast` (nothing is imported), its whitespace
collapsed, and kept when it has 20 to 150 words. Each stream takes `--records` records
(fewer when there are too few docstrings): distinct originals in a shuffled order, and
about a quarter of them again later as reposts: an exact copy, or one to three edits (a
word replaced, deleted or inserted, a short clause added, the tail trimmed, case or
punctuation changed). Docstrings repeat each other on their own too (an overload, an
inherited text), and the truth counts those like the reposts: `max_jaccard_earlier` is the
exact Jaccard similarity of the record's word 5-shingles with those of the most similar
earlier record (words: NFKC, casefolded, `\\w+` runs), computed through an inverted index
of the shingles, not estimated. A record is a true duplicate at 0.8 or more. `DIR`
defaults to `~/.cache/neardup-short` (rebuilt, never committed). The same seed and the same Python
installation give the same bytes; another set of packages gives another holdout stream.
"""

from __future__ import annotations

import argparse
import ast
import gzip
import json
import random
import re
import sys
import sysconfig
import time
import unicodedata
import warnings
import zlib
from collections import defaultdict
from pathlib import Path
from typing import Any

MIN_WORDS, MAX_WORDS = 20, 150
SHINGLE = 5
REPOSTS = 0.25
CLAUSES = (
    "See the documentation for details.",
    "This is new in this release.",
    "Deprecated since version 3.",
    "Thread safe.",
    "Use with care.",
    "For internal use only.",
)
_WORD = re.compile(r"\w+")
_SPACE = re.compile(r"\s+")


def docstrings(root: Path, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """Each distinct docstring of the .py files under `root`, by its first place."""
    out: dict[str, str] = {}
    seen: set[str] = set()
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if any(part in rel for part in skip):
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = ast.parse(path.read_bytes())
        except (SyntaxError, ValueError, OSError):
            continue
        for node in ast.walk(tree):
            if not isinstance(
                node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
            ):
                continue
            doc = ast.get_docstring(node)
            if not doc:
                continue
            text = _SPACE.sub(" ", doc).strip()
            n = len(text.split())
            if MIN_WORDS <= n <= MAX_WORDS and text not in seen:
                seen.add(text)
                name = getattr(node, "name", "<module>")
                out[f"{rel}:{name}:{getattr(node, 'lineno', 0)}"] = text
    return out


def words(text: str) -> list[str]:
    return _WORD.findall(unicodedata.normalize("NFKC", text).casefold())


def shingles(text: str) -> frozenset[tuple[str, ...]]:
    w = words(text)
    if len(w) < SHINGLE:
        return frozenset({tuple(w)})
    return frozenset(tuple(w[i : i + SHINGLE]) for i in range(len(w) - SHINGLE + 1))


def edit(text: str, edits: int, rng: random.Random) -> str:
    ws = text.split()
    for _ in range(edits):
        op = rng.choice(("replace", "delete", "insert", "clause", "trim", "case"))
        at = rng.randrange(len(ws))
        if op == "replace":
            ws[at] = rng.choice(("value", "object", "result", "item", "argument", "data"))
        elif op == "delete" and len(ws) > MIN_WORDS // 2:
            del ws[at]
        elif op == "insert":
            ws.insert(at, rng.choice(("also", "then", "only", "always", "usually", "now")))
        elif op == "clause":
            ws[at:at] = rng.choice(CLAUSES).split()
        elif op == "trim" and len(ws) > MIN_WORDS:
            del ws[len(ws) - max(1, len(ws) // 10) :]
        else:
            ws[at] = ws[at].upper() if rng.random() < 0.5 else ws[at].rstrip(".,;:") + ";"
    return " ".join(ws)


def stream(
    sources: dict[str, str], records: int, rng: random.Random, prefix: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    names = sorted(sources)
    rng.shuffle(names)
    originals = names[: round(records / (1 + REPOSTS))]  # all of them, when too few
    plan: list[tuple[float, str, int | None, str]] = [
        (float(i), name, None, sources[name]) for i, name in enumerate(originals)
    ]
    for i, name in enumerate(originals):
        if len(plan) >= records:
            break
        if rng.random() < REPOSTS * (1 + REPOSTS):
            edits = rng.choice((0, 1, 1, 2, 2, 3))
            text = sources[name] if edits == 0 else edit(sources[name], edits, rng)
            plan.append((rng.uniform(i + 0.5, len(originals) + 0.5), name, edits, text))
    plan.sort(key=lambda p: p[0])
    plan = plan[:records]
    out, truth = [], []
    postings: dict[tuple[str, ...], list[int]] = defaultdict(list)
    sets: list[frozenset[tuple[str, ...]]] = []
    for at, (_, name, edits, text) in enumerate(plan):
        rid = f"{prefix}{at:06d}"
        mine = shingles(text)
        overlap: dict[int, int] = defaultdict(int)
        for s in mine:
            for j in postings[s]:
                overlap[j] += 1
        best, of = 0.0, None
        for j, shared in overlap.items():
            jac = shared / (len(mine) + len(sets[j]) - shared)
            if jac > best:
                best, of = jac, j
        for s in mine:
            postings[s].append(at)
        sets.append(mine)
        out.append({"id": rid, "text": text})
        truth.append(
            {
                "id": rid,
                "name": name,
                "kind": "original" if edits is None else f"repost{edits}",
                "words": len(words(text)),
                "max_jaccard_earlier": round(best, 4),
                "most_similar_earlier": None if of is None else f"{prefix}{of:06d}",
            }
        )
    return out, truth


def write(path: Path, rows: list[dict[str, Any]]) -> None:
    with gzip.GzipFile(path, "wb", mtime=0) as f:
        for r in rows:
            f.write((json.dumps(r, ensure_ascii=False) + "\n").encode())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path.home() / ".cache" / "neardup-short")
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=27)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    site = Path(sysconfig.get_paths()["purelib"])
    started = time.perf_counter()
    std = docstrings(stdlib, ("site-packages", "dist-packages", "test/", "tests/", "idlelib/"))
    packages = docstrings(site, ("test/", "tests/", "_vendor/"))
    halves: tuple[dict[str, str], dict[str, str]] = ({}, {})
    for place, text in packages.items():  # a package is wholly on one side
        halves[zlib.crc32(place.split("/")[0].encode()) % 2][place] = text
    for name, root, found in (
        ("short-dev", f"{stdlib} and half of {site}'s packages", {**std, **halves[0]}),
        ("short-holdout", f"the other half of {site}'s packages", halves[1]),
    ):
        rows, truth = stream(found, args.records, random.Random(args.seed), name[6] + "s")
        write(args.out / f"{name}-stream.jsonl.gz", rows)
        write(args.out / f"{name}-truth.jsonl.gz", truth)
        dups = sum(t["max_jaccard_earlier"] >= 0.8 for t in truth)
        median = sorted(t["words"] for t in truth)[len(truth) // 2]
        print(
            f"{name}: {len(found):,} docstrings of {MIN_WORDS}-{MAX_WORDS} words from {root}; "
            f"{len(rows):,} records, median {median} words, {dups:,} true duplicates "
            f"({time.perf_counter() - started:.0f} s)",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
