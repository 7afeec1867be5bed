"""Bytes of a decision: layout 3's form (a JSON header and the decision JSON, a key each),
layout 4's record (binary, a key each) and layout 5's (binary, the body deflated, fields
of the shards' decision hashes), for the first 3,000 records of a stream decided by the
default engine, by MEMORY USAGE, on a Redis of your own (it writes index 'measure-dec',
then deletes it):

    python bench/decision_records.py [STREAM] [--redis-url redis://127.0.0.1:6379]

At 3,000 ids the 65,536 decision hashes hold about one field each; at 10^7 about 150.
So the records are also written 150 to a hash (as at 10^7) and weighed there.

Then what sharding costs a batch's read of its ids (a commit's step 0): layout 5's
RedisIndex.records (the RECENT script on the coordinator, then one pipeline of HGET and
GET per node) against layout 4's one MGET of the batch's decision keys, 256 ids a batch,
the median of 5 passes over the 3,000 ids.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402

from detector.index.redis import RedisIndex  # noqa: E402
from detector.index.redis.keys import (  # noqa: E402
    RECORD_4,
    _body_json,
    parse_decision,
    record,
    record_body,
)
from detector.records import Document  # noqa: E402
from detector.settings import EngineSettings  # noqa: E402
from tests.helpers import layout3_value  # noqa: E402

NAME = "measure-dec"
DENSE = 150  # fields a decision hash holds at 10^7 ids
BATCH = 256  # ids a read (serve's --batch-size)


def drop(client: redis.Redis) -> None:
    for key in client.scan_iter(match=f"nd:{{{NAME}*"):
        client.delete(key)
    for key in client.scan_iter(match="tmp:measure-dec:*"):
        client.delete(key)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("stream", nargs="?", default="../shared/data/dev-stream.jsonl.gz")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379")
    args = parser.parse_args()
    client = redis.Redis.from_url(args.redis_url)
    drop(client)
    with gzip.open(args.stream, "rt") as f:
        records = [json.loads(line) for line in f][:3000]
    settings = EngineSettings()
    index = RedisIndex(client, settings.block_scheme(), NAME)
    detector = settings.detector(index)
    docs = [Document(r["id"], r["text"]) for r in records if r.get("text")]
    for at in range(0, len(docs), 200):
        detector.process(docs[at : at + 200])
    hashes = list(client.scan_iter(match=f"nd:{{{NAME}/*}}:dc:*"))
    fields = [(f, v) for h in hashes for f, v in client.hgetall(h).items()]
    sizes: dict[str, list[int]] = {"3": [], "4": [], "5": []}
    weights: dict[str, list[int]] = {"3": [], "4": []}
    for field, value in fields:
        stored = parse_decision(value, field.decode("utf-8", "surrogatepass"))
        five = record(stored)
        packed = record_body(stored.decision)
        four = RECORD_4 + five[5 : -len(packed)] + _body_json(packed)
        back = parse_decision(four, stored.decision.id)
        assert (back.decision, back.versions) == (stored.decision, stored.versions)
        for layout, v in (("3", layout3_value(stored)), ("4", four)):
            key = f"tmp:measure-dec:{layout}:" + stored.decision.id
            client.set(key, v)
            weights[layout].append(int(client.memory_usage(key, samples=0) or 0))
            if layout == "3":
                client.delete(key)
            sizes[layout].append(len(v))
        sizes["5"].append(len(five))
    ids = [f.decode("utf-8", "surrogatepass") for f, _ in fields]
    batches = [ids[at : at + BATCH] for at in range(0, len(ids), BATCH)]
    sharded = median_ms(batches, index.records)
    one_mget = median_ms(batches, lambda b: client.mget([f"tmp:measure-dec:4:{i}" for i in b]))
    sparse = sum(int(client.memory_usage(h, samples=0) or 0) for h in hashes)
    dense = 0
    for at in range(0, len(fields), DENSE):
        key = f"tmp:measure-dec:5:{at}"
        client.hset(key, mapping=dict(fields[at : at + DENSE]))
        dense += int(client.memory_usage(key, samples=0) or 0)
        encoding = client.object("encoding", key)
        client.delete(key)
    drop(client)
    n = len(fields)
    print(
        f"{n} decisions; a value (bytes): layout 3 {statistics.mean(sizes['3']):.0f}, "
        f"layout 4 {statistics.mean(sizes['4']):.0f}, layout 5 {statistics.mean(sizes['5']):.0f}\n"
        f"MEMORY USAGE a decision: layout 3 {statistics.mean(weights['3']):.0f} B (a key), "
        f"layout 4 {statistics.mean(weights['4']):.0f} B (a key), layout 5 "
        f"{sparse / n:.0f} B in {len(hashes):,} decision hashes (as at 3,000 ids), "
        f"{dense / n:.0f} B at {DENSE} a hash (as at 10^7 ids; {encoding!r})\n"
        f"reading {BATCH} ids' decisions, a batch (median): layout 5 {sharded:.2f} ms "
        f"(RECENT, then the shards), layout 4 {one_mget:.2f} ms (one MGET)"
    )


def median_ms(batches: list[list[str]], read: Any) -> float:
    took = []
    for _ in range(5):
        for batch in batches:
            started = time.perf_counter()
            read(batch)
            took.append((time.perf_counter() - started) * 1000)
    return statistics.median(took)


if __name__ == "__main__":
    main()
