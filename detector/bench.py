"""`neardup bench`: throughput, latency and Redis memory of `neardup serve` on a running
stack. It prints its figures; it asserts nothing.

1. Sustained docs/s with 1 and with 2 consumers: the corpus waits on a topic, the
   consumers start, and the rate is counted from the first decision to the last
   (Kafka timestamps of the decisions), so group joins and start-up do not count.
2. Decision latency at half the 1-consumer rate: records are produced at that pace and
   each one's latency is its decision's timestamp minus its own.
3. Redis bytes per indexed document, by key family (MEMORY USAGE of every key), and at
   --memory-docs synthetic documents the block tables and the number-to-id map, beside
   the naive layout (a set per bucket of "fingerprint:id" strings, a hash fingerprint->id).
Every run uses its own topics, group and index name, and deletes its Redis keys after.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np
import redis
from kafka import KafkaConsumer, KafkaProducer

from .blocks import BlockScheme
from .index import Commit, Entry
from .index.redis import RedisIndex
from .records import Decision
from .stream.files import input_label, open_input, read_lines
from .stream.kafka import KafkaSettings, ensure_topics


def _say(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def _records(corpus: str) -> list[tuple[str, bytes]]:
    out = []
    with open_input(corpus) as f:
        for raw, _ in read_lines(f, input_label(corpus)):
            out.append((json.loads(raw)["id"], raw))
    return out


class Run:
    """Topics, a group and an index of one measurement, with its serve processes."""

    def __init__(self, args: Any, partitions: int) -> None:
        tag = uuid.uuid4().hex[:8]
        self.args = args
        self.input, self.output = f"bench-{tag}-in", f"bench-{tag}-out"
        self.group, self.index = f"bench-{tag}", f"bench-{tag}"
        self.kafka = KafkaSettings(args.bootstrap_servers)
        ensure_topics(self.kafka, {self.input: partitions, self.output: 1, f"{self.input}.dlq": 1})
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, consumers: int) -> None:
        env = {
            **os.environ,
            "NEARDUP_BOOTSTRAP_SERVERS": self.args.bootstrap_servers,
            "NEARDUP_REDIS_URL": self.args.redis_url,
        }
        cmd = [
            sys.executable,
            "-m",
            "detector",
            "serve",
            "--input-topic",
            self.input,
            "--output-topic",
            self.output,
            "--dead-letter-topic",
            f"{self.input}.dlq",
            "--group",
            self.group,
            "--index",
            self.index,
            "--metrics-port",
            "0",
            "--scheme",
            self.args.scheme,
            "--batch-size",
            str(self.args.batch_size),
        ]
        for _ in range(consumers):
            self.procs.append(subprocess.Popen(cmd, env=env, stderr=subprocess.DEVNULL))

    def stop(self) -> None:
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            p.wait(timeout=60)
        client = redis.Redis.from_url(self.args.redis_url)
        for key in client.scan_iter(f"nd:{{{self.index}}}:*", count=10_000):
            client.unlink(key)

    def decisions(self, expected: int, timeout: float) -> Iterator[tuple[dict[str, Any], int]]:
        """Decisions with their Kafka timestamps (ms), until `expected` distinct ids."""
        consumer = KafkaConsumer(
            self.output,
            bootstrap_servers=self.kafka.bootstrap_servers,
            group_id=None,
            auto_offset_reset="earliest",
            consumer_timeout_ms=int(timeout * 1000),
        )
        seen: set[str] = set()
        try:
            for message in consumer:
                d = json.loads(message.value)
                if d["id"] not in seen:
                    seen.add(d["id"])
                    yield d, message.timestamp
                if len(seen) >= expected:
                    return
        finally:
            consumer.close()


def throughput(args: Any, records: list[tuple[str, bytes]], consumers: int) -> float:
    run = Run(args, partitions=max(2, consumers))
    producer = KafkaProducer(bootstrap_servers=run.kafka.bootstrap_servers, linger_ms=20)
    for doc_id, raw in records:
        producer.send(run.input, key=doc_id.encode(), value=raw)
    producer.flush()
    producer.close()
    run.start(consumers)
    try:
        stamps = [ts for _, ts in run.decisions(len(records), timeout=600)]
    finally:
        run.stop()
    seconds = (max(stamps) - min(stamps)) / 1000
    return len(stamps) / seconds if seconds > 0 else float("nan")


def latency(args: Any, records: list[tuple[str, bytes]], rate: float) -> dict[str, float]:
    run = Run(args, partitions=2)
    run.start(1)
    time.sleep(8)  # let the consumer join its group before the clock starts
    sent: dict[str, float] = {}
    count = min(len(records), int(rate * args.latency_seconds))
    producer = KafkaProducer(bootstrap_servers=run.kafka.bootstrap_servers, linger_ms=0)
    start = time.time()
    try:
        for i, (doc_id, raw) in enumerate(records[:count]):
            pause = start + i / rate - time.time()
            if pause > 0:
                time.sleep(pause)
            sent[doc_id] = time.time() * 1000
            producer.send(run.input, key=doc_id.encode(), value=raw, timestamp_ms=int(sent[doc_id]))
        producer.flush()
        waits = [
            ts - sent[d["id"]] for d, ts in run.decisions(count, timeout=300) if d["id"] in sent
        ]
    finally:
        producer.close()
        run.stop()
    ms = np.array(waits)
    return {
        "records": len(ms),
        "rate": rate,
        "p50_ms": float(np.percentile(ms, 50)),
        "p99_ms": float(np.percentile(ms, 99)),
        "max_ms": float(ms.max()),
    }


def key_families(client: redis.Redis, index: str) -> dict[str, int]:
    """Bytes of every key of an index, by the family after the prefix (b, id, dg, tx, dec)."""
    prefix = f"nd:{{{index}}}:"
    sizes: dict[str, int] = {}
    keys = list(client.scan_iter(prefix + "*", count=10_000))
    for at in range(0, len(keys), 5000):
        chunk = keys[at : at + 5000]
        pipe = client.pipeline(transaction=False)
        for key in chunk:
            pipe.memory_usage(key, samples=0)
        for key, size in zip(chunk, pipe.execute(), strict=True):
            family = key.decode()[len(prefix) :].split(":")[0]
            sizes[family] = sizes.get(family, 0) + int(size or 0)
    return sizes


def corpus_memory(args: Any, records: list[tuple[str, bytes]]) -> dict[str, Any]:
    """Index the corpus with one consumer and weigh every key family."""
    run = Run(args, partitions=1)
    producer = KafkaProducer(bootstrap_servers=run.kafka.bootstrap_servers, linger_ms=20)
    for doc_id, raw in records:
        producer.send(run.input, key=doc_id.encode(), value=raw)
    producer.flush()
    producer.close()
    run.start(1)
    try:
        for _ in run.decisions(len(records), timeout=600):
            pass
        client = redis.Redis.from_url(args.redis_url)
        indexed = int(client.get(f"nd:{{{run.index}}}:seq") or 0)
        return {"indexed": indexed, "bytes": key_families(client, run.index)}
    finally:
        run.stop()


def synthetic_memory(args: Any, docs: int) -> dict[str, float]:
    """Block tables and id map at `docs` documents, ours against the naive layout."""
    client = redis.Redis.from_url(args.redis_url)
    scheme = BlockScheme.parse(args.scheme)
    name = f"bench-{uuid.uuid4().hex[:8]}"
    index = RedisIndex(client, scheme, name)
    rng = np.random.default_rng(1)
    fps = rng.integers(0, 2**63, docs, dtype=np.int64).astype(np.uint64) * np.uint64(
        2
    ) + rng.integers(0, 2, docs).astype(np.uint64)
    before = int(client.info("memory")["used_memory"])
    batch = 2000
    for at in range(0, docs, batch):
        items = []
        for i in range(at, min(docs, at + batch)):
            fp, doc_id = int(fps[i]), f"d{i:08d}"
            entry = Entry(doc_id, "t", fp, f"{i:032x}", "")
            items.append(Commit(Decision(doc_id, None, fp), entry))
        index.commit(items)
        if at % 200_000 == 0:
            _say(f"synthetic: {at:,} of {docs:,} documents")
    families = key_families(client, name)
    for key in client.scan_iter(f"nd:{{{name}}}:*", count=10_000):
        client.unlink(key)
    ours = families.get("b", 0) + families.get("id", 0)

    naive = f"naive-{uuid.uuid4().hex[:8]}"
    base = int(client.info("memory")["used_memory"])
    tables = scheme.keys(fps.tolist())
    for at in range(0, docs, batch):
        pipe = client.pipeline(transaction=False)
        for i in range(at, min(docs, at + batch)):
            member = f"{int(fps[i]):016x}:d{i:08d}"
            for t, key in enumerate(tables[i]):
                pipe.sadd(f"{naive}:{t}:{key:x}", member)
            pipe.hset(f"{naive}:ids", f"{int(fps[i]):016x}", f"d{i:08d}")
        pipe.execute()
    naive_bytes = int(client.info("memory")["used_memory"]) - base
    for key in client.scan_iter(f"{naive}:*", count=10_000):
        client.unlink(key)
    del before
    return {
        "docs": docs,
        "ours_per_doc": ours / docs,
        "digests_per_doc": families.get("dg", 0) / docs,
        "naive_per_doc": naive_bytes / docs,
    }


def main(args: Any) -> int:
    records = _records(args.corpus)
    _say(f"{len(records)} records from {args.corpus}; scheme {args.scheme}")
    rates = {}
    for n in args.consumers:
        _say(f"throughput with {n} consumer(s)")
        rates[n] = throughput(args, records, n)
        print(f"sustained rate, {n} consumer(s): {rates[n]:,.0f} docs/s", flush=True)
    half = rates[min(rates)] / 2
    _say(f"latency at {half:,.0f} docs/s")
    lat = latency(args, records, half)
    print(
        f"latency at {lat['rate']:,.0f} docs/s ({lat['records']} records): "
        f"p50 {lat['p50_ms']:.0f} ms, p99 {lat['p99_ms']:.0f} ms, max {lat['max_ms']:.0f} ms",
        flush=True,
    )
    _say("Redis memory of the corpus")
    mem = corpus_memory(args, records)
    per = {k: v / max(mem["indexed"], 1) for k, v in mem["bytes"].items()}
    print(
        f"Redis bytes per indexed document ({mem['indexed']} indexed): "
        + ", ".join(f"{k} {v:,.0f}" for k, v in sorted(per.items()))
        + f"; total {sum(per.values()):,.0f}",
        flush=True,
    )
    if args.memory_docs:
        _say(f"synthetic index of {args.memory_docs:,} documents")
        syn = synthetic_memory(args, args.memory_docs)
        print(
            f"at {syn['docs']:,} documents: block tables + id map {syn['ours_per_doc']:.0f} "
            f"bytes/doc (digests {syn['digests_per_doc']:.0f} more); naive layout "
            f"{syn['naive_per_doc']:.0f} bytes/doc",
            flush=True,
        )
    return 0
