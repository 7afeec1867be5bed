#!/usr/bin/env python3
"""Score a detector's decisions against the near-duplicate truth (standard library only).

    python3 bench/peer/score.py decisions.jsonl truth.jsonl.gz [--threshold 0.8] [--json]

decisions.jsonl: {"id", "decision": "unique"|"duplicate", "duplicate_of": id|null}
truth.jsonl[.gz]: {"id", "max_jaccard_earlier", "kind", ...}, one line per record in
stream order; a record is truly a duplicate when max_jaccard_earlier >= threshold.

Only the records present in the decisions file are scored (so a --limit run scores its
prefix). Prints precision, recall and F1 of the "duplicate" decisions, the counts behind
them, recall broken down by truth "kind", and how many duplicate_of links do not name an
earlier record.
"""
import argparse
import gzip
import json
import sys
from collections import Counter


def open_text(path):
    if path.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, "r", encoding="utf-8")


def read_jsonl(path):
    with open_text(path) as fh:
        for line in fh:
            line = line.strip()
            if line:
                yield json.loads(line)


def main(argv=None):
    ap = argparse.ArgumentParser(description="precision/recall/F1 of duplicate decisions")
    ap.add_argument("decisions")
    ap.add_argument("truth")
    ap.add_argument("--threshold", type=float, default=0.8)
    ap.add_argument("--json", action="store_true", help="print one JSON line instead of text")
    args = ap.parse_args(argv)

    truth = {}
    position = {}
    kind = {}
    for pos, rec in enumerate(read_jsonl(args.truth)):
        rid = str(rec["id"])
        truth[rid] = float(rec.get("max_jaccard_earlier") or 0.0) >= args.threshold
        position[rid] = pos
        kind[rid] = rec.get("kind", "?")

    tp = fp = fn = tn = 0
    missing = 0
    bad_links = 0
    kind_pos = Counter()
    kind_hit = Counter()
    seen = 0
    for rec in read_jsonl(args.decisions):
        rid = str(rec["id"])
        if rid not in truth:
            missing += 1
            continue
        seen += 1
        said_dup = rec.get("decision") == "duplicate"
        is_dup = truth[rid]
        if said_dup:
            of = rec.get("duplicate_of")
            if of is None or str(of) not in position or position[str(of)] >= position[rid]:
                bad_links += 1
        if is_dup:
            kind_pos[kind[rid]] += 1
            if said_dup:
                kind_hit[kind[rid]] += 1
        if said_dup and is_dup:
            tp += 1
        elif said_dup:
            fp += 1
        elif is_dup:
            fn += 1
        else:
            tn += 1

    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    result = {
        "records": seen, "threshold": args.threshold,
        "true_duplicates": tp + fn, "said_duplicate": tp + fp,
        "tp": tp, "fp": fp, "fn": fn, "tn": tn,
        "precision": round(precision, 4), "recall": round(recall, 4), "f1": round(f1, 4),
        "recall_by_kind": {k: round(kind_hit[k] / kind_pos[k], 4) for k in sorted(kind_pos)},
        "true_duplicates_by_kind": {k: kind_pos[k] for k in sorted(kind_pos)},
        "links_not_to_earlier_record": bad_links,
        "ids_not_in_truth": missing,
    }
    if args.json:
        print(json.dumps(result))
    else:
        print("records scored        %d (threshold max_jaccard_earlier >= %g)" % (seen, args.threshold))
        print("true duplicates       %d" % (tp + fn))
        print("said duplicate        %d  (tp %d, fp %d, fn %d, tn %d)" % (tp + fp, tp, fp, fn, tn))
        print("precision             %.4f" % precision)
        print("recall                %.4f" % recall)
        print("F1                    %.4f" % f1)
        print("recall by kind        " + ", ".join(
            "%s %d/%d" % (k, kind_hit[k], kind_pos[k]) for k in sorted(kind_pos)))
        print("bad duplicate_of      %d (not an earlier record)" % bad_links)
        if missing:
            print("ids not in truth      %d" % missing)
    return 0


if __name__ == "__main__":
    sys.exit(main())
