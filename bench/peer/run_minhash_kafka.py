#!/usr/bin/env python3
"""Peer baseline of bench/serve_vs_minhash.py: the streaming near-duplicate pipeline a
Python engineer would assemble today from the usual parts, a kafka-python consumer and
datasketch's MinHashLSH on Redis storage.

Run it with the venv of bench/peer/setup_minhash.sh:

    PY=$(bash bench/peer/setup_minhash.sh)
    $PY bench/peer/run_minhash_kafka.py --input-topic IN --output-topic OUT \\
        --group G --basename B --expected N --out decisions.jsonl

Connection: --bootstrap-servers (default $NEARDUP_BOOTSTRAP_SERVERS, PLAINTEXT only) and
--redis-url (default $NEARDUP_REDIS_URL, a redis:// URL of one server; an ACL user and
password from the URL or from $NEARDUP_REDIS_USERNAME / $NEARDUP_REDIS_PASSWORD, the
variables neardup's own children get).

One consumer (its own group, auto_offset_reset="earliest", auto commit off). For each poll
batch (kafka-python's default max_poll_records, 500):
  1. parse the JSONL records {"id", "text"};
  2. normalize the obvious way: lowercase, words = re.findall(r"\\w+"); word 5-shingles
     (a text of fewer than 5 words is one shingle of all its words);
  3. MinHash.bulk(shingles of the batch, num_perm=128);
  4. for each record in order: lsh.query(m) against the Redis index (earlier batches)
     and, for the records before it in the same batch, an in-memory MinHashLSH of the
     same parameters holding the batch so far (so the decisions are those of a strictly
     sequential stream); "duplicate" of the first candidate (the smallest id among the
     Redis candidates, else among the batch's; every candidate is an earlier record),
     else "unique". No verification of the candidates: LSH's answer is the decision;
  5. every record is inserted (as a typical pipeline inserts every document) through
     `with lsh.insertion_session() as session: session.insert(id, m)` (datasketch's
     defaults: check_duplication=True, buffered MULTI/EXEC pipelines);
  6. a JSON decision per record to the output topic (KafkaProducer, key = id), flush,
     then consumer.commit().
It stops once it has decided --expected distinct ids (or after --idle seconds without a
record), writes the decisions as JSONL {"id", "decision", "duplicate_of"} to --out, and
prints one JSON line on stdout: records, seconds from its first decision to its last (its
own clock at each send, which is also the decisions' Kafka timestamp), docs/s, the
decisions file, and the versions and LSH parameters.
"""
import argparse
import json
import os
import re
import sys
import time
from importlib.metadata import version as pkg_version
from urllib.parse import unquote, urlsplit

from datasketch import MinHash, MinHashLSH
from kafka import KafkaConsumer, KafkaProducer

WORD = re.compile(r"\w+")
SHINGLE = 5


def shingles(text):
    words = WORD.findall(text.lower())
    if len(words) < SHINGLE:
        return [" ".join(words).encode("utf-8")]
    return [" ".join(words[i:i + SHINGLE]).encode("utf-8") for i in range(len(words) - SHINGLE + 1)]


def redis_params(url):
    """redis.Redis keyword arguments of a redis:// URL (the 'redis' part of datasketch's
    storage_config)."""
    parts = urlsplit(url)
    if parts.scheme != "redis":
        sys.exit(f"error: the peer takes a redis:// URL of one server, not {parts.scheme}://")
    params = {"host": parts.hostname or "127.0.0.1", "port": parts.port or 6379}
    db = parts.path.strip("/")
    if db:
        params["db"] = int(db)
    username = unquote(parts.username) if parts.username else os.environ.get("NEARDUP_REDIS_USERNAME")
    password = unquote(parts.password) if parts.password else os.environ.get("NEARDUP_REDIS_PASSWORD")
    if username:
        params["username"] = username
    if password:
        params["password"] = password
    return params


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap-servers", default=os.environ.get("NEARDUP_BOOTSTRAP_SERVERS", "127.0.0.1:9092"))
    ap.add_argument("--redis-url", default=os.environ.get("NEARDUP_REDIS_URL", "redis://127.0.0.1:6379/0"))
    ap.add_argument("--input-topic", required=True)
    ap.add_argument("--output-topic", required=True)
    ap.add_argument("--group", required=True, help="consumer group id (its own)")
    ap.add_argument("--basename", required=True, help="datasketch's Redis key prefix (unique)")
    ap.add_argument("--expected", type=int, required=True, help="stop after this many decided ids")
    ap.add_argument("--out", required=True, help="decisions JSONL to write")
    ap.add_argument("--threshold", type=float, default=0.8)
    ap.add_argument("--num-perm", type=int, default=128)
    ap.add_argument("--idle", type=float, default=120.0, help="give up after this many seconds without a record")
    ap.add_argument("--progress", type=int, default=1000, help="progress to stderr every N records (0: off)")
    args = ap.parse_args(argv)

    storage_config = {
        "type": "redis",
        "redis": redis_params(args.redis_url),
        "basename": args.basename.encode("utf-8"),
    }
    lsh = MinHashLSH(threshold=args.threshold, num_perm=args.num_perm, storage_config=storage_config)
    servers = args.bootstrap_servers.split(",")
    consumer = KafkaConsumer(
        args.input_topic,
        bootstrap_servers=servers,
        group_id=args.group,
        client_id="minhash-peer",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    producer = KafkaProducer(bootstrap_servers=servers, client_id="minhash-peer")

    decided = set()
    duplicates = batches = 0
    first = last = None
    started = time.time()
    last_record = started
    next_progress = args.progress
    complete = True
    with open(args.out, "w", encoding="utf-8") as out:
        while len(decided) < args.expected:
            polled = consumer.poll(timeout_ms=1000)
            messages = [m for part in polled.values() for m in part]
            if not messages:
                if time.time() - last_record > args.idle:
                    complete = False
                    break
                continue
            last_record = time.time()
            batches += 1
            records = []
            for m in messages:
                obj = json.loads(m.value)
                records.append((str(obj["id"]), obj["text"]))
            minhashes = MinHash.bulk([shingles(text) for _, text in records], num_perm=args.num_perm)

            batch_lsh = MinHashLSH(threshold=args.threshold, num_perm=args.num_perm)  # in memory
            results = []
            for (rid, _), m in zip(records, minhashes):
                candidates = lsh.query(m)
                if not candidates:
                    candidates = batch_lsh.query(m)
                dup_of = min(candidates) if candidates else None
                if rid not in batch_lsh:  # a repeated id (a redelivery) is not added twice
                    batch_lsh.insert(rid, m)
                results.append((rid, dup_of))

            with lsh.insertion_session() as session:
                for (rid, _), m in zip(records, minhashes):
                    try:
                        session.insert(rid, m)
                    except ValueError:  # "The given key already exists": a redelivery
                        pass

            for rid, dup_of in results:
                decision = {
                    "id": rid,
                    "decision": "unique" if dup_of is None else "duplicate",
                    "duplicate_of": dup_of,
                }
                producer.send(args.output_topic, key=rid.encode("utf-8"), value=json.dumps(decision).encode("utf-8"))
                now = time.time()
                first = now if first is None else first
                last = now
                if rid not in decided:
                    decided.add(rid)
                    duplicates += dup_of is not None
                    out.write(json.dumps(decision) + "\n")
            producer.flush()
            consumer.commit()
            if args.progress and len(decided) >= next_progress:
                print(f"[minhash-peer] {len(decided)} of {args.expected} decided, "
                      f"{last - first:.1f} s since the first decision", file=sys.stderr, flush=True)
                next_progress += args.progress
    producer.close()
    consumer.close()

    seconds = (last - first) if first is not None else 0.0
    print(json.dumps({
        "tool": "kafka-python + datasketch MinHashLSH (Redis storage)",
        "datasketch": pkg_version("datasketch"),
        "kafka_python": pkg_version("kafka-python"),
        "redis_py": pkg_version("redis"),
        "numpy": pkg_version("numpy"),
        "threshold": args.threshold,
        "num_perm": args.num_perm,
        "bands": lsh.b,
        "rows": lsh.r,
        "records": len(decided),
        "expected": args.expected,
        "complete": complete,
        "batches": batches,
        "duplicates": duplicates,
        "seconds": round(seconds, 4),
        "docs_per_s": round(len(decided) / seconds, 2) if seconds > 0 else None,
        "start_to_last_s": round(last - started, 4) if last is not None else None,
        "decisions": os.path.abspath(args.out),
    }))
    return 0 if complete else 1


if __name__ == "__main__":
    sys.exit(main())
