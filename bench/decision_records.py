"""Bytes of a decision key: layout 3's form (a JSON header and the decision JSON) against
layout 4's record, for the first 3,000 records of a stream decided by the default engine,
MEMORY USAGE of each key, on a Redis of your own (it writes index 'measure-dec', then
deletes it):

    python bench/decision_records.py [STREAM] [--redis-url redis://127.0.0.1:6379]
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402

from detector.index.redis import RedisIndex  # noqa: E402
from detector.index.redis.keys import parse_decision  # noqa: E402
from detector.records import Document  # noqa: E402
from detector.settings import EngineSettings  # noqa: E402
from tests.helpers import layout3_value  # noqa: E402

NAME = "measure-dec"


def drop(client: redis.Redis) -> None:
    for key in client.scan_iter(match=f"nd:{{{NAME}*"):
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
    keys = list(client.scan_iter(match=f"nd:{{{NAME}}}:dec:*"))
    new_bytes, old_bytes, new_len, old_len = [], [], [], []
    for key in keys:
        value: bytes = client.get(key)  # type: ignore[assignment]
        old = layout3_value(parse_decision(value, index.layout.decision_id(key)))
        client.set(b"tmp:" + key, old)
        new_bytes.append(int(client.memory_usage(key) or 0))
        old_bytes.append(int(client.memory_usage(b"tmp:" + key) or 0))
        new_len.append(len(value))
        old_len.append(len(old))
        client.delete(b"tmp:" + key)
    drop(client)
    print(
        f"{len(keys)} decisions: MEMORY USAGE a key, layout 3's form "
        f"{statistics.mean(old_bytes):.0f} B, layout 4's record {statistics.mean(new_bytes):.0f} B;"
        f" values {statistics.mean(old_len):.0f} -> {statistics.mean(new_len):.0f} B"
    )


if __name__ == "__main__":
    main()
