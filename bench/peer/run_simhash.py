#!/usr/bin/env python3
"""Peer baseline: streaming near-duplicate detection with the PyPI `simhash` package
(1e0ng/simhash: Simhash + SimhashIndex), used the way its documentation shows.

Run it with the peer venv's python (see bench/peer/setup.sh):

    PY=$(bash bench/peer/setup.sh)
    $PY bench/peer/run_simhash.py CORPUS.jsonl[.gz] [--limit N] [--k 3] [--out decisions.jsonl]

For each record, in stream order:
    sh = Simhash(features(text))
    near = index.get_near_dups(sh)       # ids already in the index within k bits
    duplicate of the earliest-added id in `near` if any, else unique
    index.add(id, sh)                    # every record is added, as a user would

Features (--features):
  readme  (default) the idiom of the library's documented "Getting Started" example:
          lowercase, drop every run of non-word characters (re.sub(r'[^\\w]+', '', s)),
          then overlapping character 3-grams (unweighted list).
  default Simhash(text): the library's built-in tokenizer (lowercase, keep
          [\\w\\u4e00-\\u9fcc]+ runs joined, character 4-grams, counted as weights).

Timing: all records are read and parsed first; only the loop above is timed
(time.perf_counter, wall clock). Logging is left exactly as a plain user gets it:
nothing here configures it (the "simhash" logger's debug/info calls are dropped at
the level check; a WARNING, e.g. "Big bucket found", would reach stderr through
Python's last-resort handler, as it would for any user).

Prints one JSON line on stdout:
  {"tool": "simhash-pypi", "version", "docs", "seconds", "docs_per_s", "duplicates", ...}
"""
import argparse
import gzip
import json
import re
import sys
import time
from importlib.metadata import version as pkg_version

from simhash import Simhash, SimhashIndex

_NON_WORD = re.compile(r"[^\w]+")


def readme_features(text, width=3):
    s = _NON_WORD.sub("", text.lower())
    return [s[i:i + width] for i in range(max(len(s) - width + 1, 1))]


def open_text(path):
    if path.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, "r", encoding="utf-8")


def read_records(path, limit=None):
    records = []
    with open_text(path) as fh:
        for line in fh:
            if limit is not None and len(records) >= limit:
                break
            line = line.strip()
            if not line:
                continue
            obj = json.loads(line)
            records.append((str(obj["id"]), obj["text"]))
    return records


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus", help="JSONL or JSONL.gz of {'id', 'text'} records")
    ap.add_argument("--limit", type=int, default=None, help="only the first N records")
    ap.add_argument("--k", type=int, default=3, help="Hamming tolerance of SimhashIndex (default 3)")
    ap.add_argument("--features", choices=("readme", "default"), default="readme",
                    help="readme: documented char-3-gram idiom (default); default: Simhash(text)")
    ap.add_argument("--out", default=None, help="write decisions JSONL here")
    ap.add_argument("--progress", type=int, default=0,
                    help="every N records print elapsed seconds to stderr (0 = off)")
    args = ap.parse_args(argv)

    records = read_records(args.corpus, args.limit)
    n = len(records)

    if args.features == "readme":
        def make(text):
            return Simhash(readme_features(text))
    else:
        def make(text):
            return Simhash(text)

    index = SimhashIndex([], k=args.k)
    order = {}            # id -> stream position of its first add (deterministic tie-break)
    decisions = []        # (id, duplicate_of or None)
    duplicates = 0
    progress = args.progress

    t0 = time.perf_counter()
    for pos, (rid, text) in enumerate(records):
        sh = make(text)
        near = index.get_near_dups(sh)
        if near:
            dup_of = min(near, key=lambda x: (order.get(x, pos), x))
            duplicates += 1
        else:
            dup_of = None
        decisions.append((rid, dup_of))
        index.add(rid, sh)
        order.setdefault(rid, pos)
        if progress and (pos + 1) % progress == 0:
            print("progress %d %.3f" % (pos + 1, time.perf_counter() - t0),
                  file=sys.stderr, flush=True)
    seconds = time.perf_counter() - t0

    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            for rid, dup_of in decisions:
                fh.write(json.dumps({
                    "id": rid,
                    "decision": "duplicate" if dup_of is not None else "unique",
                    "duplicate_of": dup_of,
                }) + "\n")

    print(json.dumps({
        "tool": "simhash-pypi",
        "version": pkg_version("simhash"),
        "numpy": pkg_version("numpy"),
        "features": args.features,
        "k": args.k,
        "docs": n,
        "seconds": round(seconds, 4),
        "docs_per_s": round(n / seconds, 2) if seconds > 0 else None,
        "duplicates": duplicates,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
