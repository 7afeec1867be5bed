#!/usr/bin/env python3
"""Writes tests/data/layoutL-index.jsonl.gz, an index of key layout L that
tests/integration/test_migrate.py migrates: run it with the code of that layout, against a
Redis of your own. Layout 2's is commit c7141af (the last before layout 3), layout 3's
3b821d2 (the last before layout 4), layout 4's c5588c3 (the last before layout 5):

    git archive c7141af | tar -x -C /tmp/layout2 && cp detector/_native*.so /tmp/layout2/detector/
    PYTHONPATH=/tmp/layout2 python tests/data/make_old_index.py --redis-url redis://...

The index: the first 240 records of tests/data/sample.jsonl.gz (their first 1,200
characters) decided in batches of 50 by the default engine, 19 of them fetched again with
new text (revisions) and 7 with the same, then 10 deleted; with --keep-old-versions, so
that the decision headers list kept versions too. The file: a first line with what the
old code answered (the meta, stats, the export, and lookups of every record's
fingerprint), then one line per key: its name with the index's name as NAME, its DUMP
payload (base64) and PTTL."""

from __future__ import annotations

import argparse
import base64
import gzip
import json
import sys
from pathlib import Path

import redis

from detector.index import Query
from detector.index.redis import RedisIndex, maintenance
from detector.index.redis.keys import LAYOUT
from detector.records import Document
from detector.settings import EngineSettings

HERE = Path(__file__).resolve().parent
NAME = f"layout{LAYOUT}-fixture"
RECORDS, TEXT = 240, 1200  # records, and characters of each text kept: a small file


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--out", default=str(HERE / f"layout{LAYOUT}-index.jsonl.gz"))
    args = parser.parse_args()
    assert LAYOUT in ("2", "3", "4"), "run with the code of key layout 2, 3 or 4"
    client = redis.Redis.from_url(args.redis_url)
    for pattern in (f"nd:{{{NAME}}}:*", f"nd:{{{NAME}/*"):
        for key in client.scan_iter(match=pattern):
            client.delete(key)

    with gzip.open(HERE / "sample.jsonl.gz", "rt") as f:
        records = [json.loads(line) for line in f]
    settings = EngineSettings(keep_old_versions=True)
    index = RedisIndex(client, settings.block_scheme(), NAME)
    detector = settings.detector(index)
    docs = [Document(r["id"], r["text"][:TEXT]) for r in records[:RECORDS]]
    for at in range(0, len(docs), 50):
        detector.process(docs[at : at + 50])
    added = "\n\nUpdated: a paragraph added on a re-fetch."
    detector.process([Document(d.id, d.text + added) for d in docs[::13]])
    detector.process(docs[5::37])  # the same text again
    decided = index.decisions([d.id for d in docs])
    index.delete([d.id for d in docs[3::26]])

    # every record's fingerprint, the deleted ones' too
    queries = [Query("t", decided[d.id].fingerprint, "") for d in docs if d.id in decided]
    found = index.lookup(queries)
    expect = {
        "meta": index.meta(),
        "stats": {k: v for k, v in index.stats().items() if k != "server_used_memory"},
        "export": list(maintenance.documents(index)),
        "queries": [[q.space, f"{q.fingerprint:016x}"] for q in queries],
        "found": [[f.exact, [[c.id, c.distance] for c in f.candidates]] for f in found],
    }
    keys = sorted(
        k for p in (f"nd:{{{NAME}}}:*", f"nd:{{{NAME}/*") for k in client.scan_iter(match=p)
    )
    with gzip.open(args.out, "wt", compresslevel=9) as out:
        out.write(json.dumps({"name": NAME, "expect": expect}, sort_keys=True) + "\n")
        for key in keys:
            line = {
                "key": key.decode().replace(NAME, "NAME"),
                "dump": base64.b64encode(client.dump(key)).decode("ascii"),
                "pttl": max(0, int(client.pttl(key))),
            }
            out.write(json.dumps(line) + "\n")
    print(f"{len(keys)} keys, {expect['stats']} -> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
