"""`neardup bench`: throughput, latency and Redis memory of `neardup serve` on a running
stack. It prints its figures; it asserts nothing.

1. Sustained docs/s with 1 and with 2 consumers: the corpus waits on a topic, the
   consumers start, and the rate is counted from the first decision to the last
   (Kafka timestamps of the decisions), so group joins and start-up do not count.
2. Decision latency at half the 1-consumer rate, or at --latency-rate: records are
   produced at that pace and each one's latency is its decision's timestamp minus its
   own, and the moment a reader of the output got the decision minus the record's
   timestamp. They differ by the flush
   and, with --exactly-once, by the transaction's commit: its decisions are stamped when
   they are sent, but a read_committed reader gets them once the batch is committed.
3. Redis bytes per indexed document, by key family (MEMORY USAGE of every key), and at
   --memory-docs synthetic documents the block tables and the number-to-id map, beside
   the naive layout (a set per bucket of "fingerprint:id" strings, a hash fingerprint->id).
Every run uses its own topics, group and index name, and deletes them (and the index's
Redis keys) after.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import redis
from kafka import KafkaConsumer, KafkaProducer

from .blocks import BlockScheme
from .errors import BackendUnavailable
from .index.redis import IDS_PER_HASH, RedisIndex, maintenance
from .stream.files import input_label, open_input, read_lines
from .stream.kafka import ensure_topics, remove


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
        self.kafka = args.kafka  # KafkaSettings and RedisSettings, from the command line
        ensure_topics(self.kafka, {self.input: partitions, self.output: 1, f"{self.input}.dlq": 1})
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs: list[Any] = []  # each profiled consumer's stderr

    def start(self, consumers: int, extra: Sequence[str] = (), profile: bool = False) -> None:
        """Start serve processes; `extra` are more serve options (e.g. --retention);
        `profile` has each print its profile at exit (`profiles`)."""
        # Connection settings (passwords too) go to the children in their environment,
        # which no other user can read, rather than on their command lines.
        env = {**os.environ, **self.kafka.env(), **self.args.redis.env()}
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
            *(["--exactly-once"] if self.args.exactly_once else []),
            *extra,
            *(["--profile"] if profile else []),
        ]
        for _ in range(consumers):
            log: Any = subprocess.DEVNULL
            if profile:
                log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in profiles()
                self.logs.append(log)
            self.procs.append(subprocess.Popen(cmd, env=env, stderr=log))

    def stop(self) -> None:
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            p.wait(timeout=60)
        maintenance.drop(
            RedisIndex(self.args.redis.client(), BlockScheme.parse(self.args.scheme), self.index)
        )
        # a bench of both modes makes some thirty topics: the broker need not keep them
        remove(self.kafka, [self.input, self.output, f"{self.input}.dlq"], [self.group])

    def profiles(self) -> list[str]:
        """The profile tables the profiled consumers printed as they stopped."""
        out = []
        for log in self.logs:
            log.seek(0)
            text = log.read().decode("utf-8", "replace")
            at = text.find("profile: ")
            out.append(text[at:].rstrip() if at >= 0 else "(no profile printed)")
            log.close()
        self.logs = []
        return out

    def decisions(self, expected: int, timeout: float) -> Iterator[tuple[dict[str, Any], int]]:
        return read_decisions(self.kafka, self.output, expected, timeout)


def read_decisions(
    kafka: Any, topic: str, expected: int, timeout: float
) -> Iterator[tuple[dict[str, Any], int]]:
    """A topic's decisions with their Kafka timestamps (ms), the first of each id, until
    `expected` ids or `timeout` seconds without a record. Read read_committed: what a
    reader of serve --exactly-once gets (and, of a topic written without transactions,
    everything)."""
    consumer = KafkaConsumer(
        topic,
        **kafka.common(),
        group_id=None,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
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


def throughput(args: Any, records: list[tuple[str, bytes]], consumers: int) -> tuple[float, float]:
    """Sustained docs/s, and the Redis server's CPU seconds per document (INFO cpu, over
    every node, from the consumers' start to the last decision: their start-up too)."""
    run = Run(args, partitions=max(2, consumers))
    send_all(run, records)
    client = args.redis.client()
    cpu = _redis_cpu(client)
    run.start(consumers, profile=args.profile)
    try:
        stamps = [ts for _, ts in run.decisions(len(records), timeout=600)]
        cpu = _redis_cpu(client) - cpu
    finally:
        run.stop()
        client.close()
    for n, table in enumerate(run.profiles(), 1):
        print(f"consumer {n} of {consumers}, {table}", flush=True)
    seconds = (max(stamps) - min(stamps)) / 1000
    return len(stamps) / seconds if seconds > 0 else float("nan"), cpu / len(stamps)


def send_all(run: Run, records: list[tuple[str, bytes]]) -> None:
    """The corpus onto the run's input topic, every send checked: a record the topic
    refused would leave the run waiting for a decision that never comes."""
    producer = KafkaProducer(**run.kafka.common(), linger_ms=20)
    try:
        futures = [producer.send(run.input, key=i.encode(), value=raw) for i, raw in records]
        producer.flush()
        _check(futures)
    finally:
        producer.close()


def _check(futures: list[Any]) -> None:
    failed = [f for f in futures if not f.is_done or f.failed()]
    if failed:
        first = failed[0].exception if failed[0].is_done else "no answer"
        raise BackendUnavailable(
            f"Kafka did not take {len(failed)} of the {len(futures)} corpus records "
            f"(the first: {first}); the run would wait for their decisions"
        )


def _redis_cpu(client: Any) -> float:
    """used_cpu_sys + used_cpu_user of the server, or summed over a cluster's nodes."""
    if isinstance(client, redis.RedisCluster):
        infos = list(client.info("cpu", target_nodes=redis.RedisCluster.ALL_NODES).values())
    else:
        infos = [client.info("cpu")]
    return sum(float(i["used_cpu_sys"]) + float(i["used_cpu_user"]) for i in infos)


def latency(args: Any, records: list[tuple[str, bytes]], rate: float) -> dict[str, Any]:
    """Per record: (decision timestamp, moment read) minus the record's timestamp, in ms."""
    run = Run(args, partitions=2)
    run.start(1)
    time.sleep(8)  # let the consumer join its group before the clock starts
    count = min(len(records), int(rate * args.latency_seconds))
    got: list[tuple[str, int, float]] = []  # id, decision timestamp, when read

    def read() -> None:
        for d, ts in run.decisions(count, timeout=300):
            got.append((d["id"], ts, time.time() * 1000))

    reader = threading.Thread(target=read, daemon=True)  # reads while records are produced
    reader.start()
    sent: dict[str, float] = {}
    futures: list[Any] = []
    producer = KafkaProducer(**run.kafka.common(), linger_ms=0)
    start = time.time()
    try:
        for i, (doc_id, raw) in enumerate(records[:count]):
            pause = start + i / rate - time.time()
            if pause > 0:
                time.sleep(pause)
            sent[doc_id] = time.time() * 1000
            futures.append(
                producer.send(
                    run.input, key=doc_id.encode(), value=raw, timestamp_ms=int(sent[doc_id])
                )
            )
        producer.flush()
        _check(futures)
        reader.join()
    finally:
        producer.close()
        run.stop()
    stamped = np.array([ts - sent[i] for i, ts, _ in got if i in sent])
    seen = np.array([at - sent[i] for i, _, at in got if i in sent])
    return {
        "records": len(stamped),
        "rate": rate,
        "stamped": _spread(stamped),
        "seen": _spread(seen),
    }


def _spread(ms: Any) -> dict[str, float]:
    return {
        "p50": float(np.percentile(ms, 50)),
        "p99": float(np.percentile(ms, 99)),
        "max": float(ms.max()),
    }


def key_families(index: RedisIndex) -> dict[str, int]:
    """Bytes of every key of an index (on every node of a cluster), by the family after
    the hash tag: bh, dg, tx, id, dc, ... (shards); log, rd, rw, ... (coordinator)."""
    return {f: round(size) for f, size in maintenance.memory(index, exact=True).bytes.items()}


def corpus_memory(args: Any, records: list[tuple[str, bytes]]) -> dict[str, Any]:
    """Index the corpus with one consumer and weigh every key family."""
    run = Run(args, partitions=1)
    send_all(run, records)
    run.start(1)
    try:
        for _ in run.decisions(len(records), timeout=600):
            pass
        index = RedisIndex(args.redis.client(), BlockScheme.parse(args.scheme), run.index)
        return {"indexed": index.stats()["documents"], "bytes": key_families(index)}
    finally:
        run.stop()


def _fill(client: redis.Redis, docs: int, write: Any, label: str) -> int:
    """Bytes (INFO used_memory) that `write(pipe, i)` for every document adds."""
    before = int(client.info("memory")["used_memory"])
    for at in range(0, docs, 5000):
        pipe = client.pipeline(transaction=False)
        for i in range(at, min(docs, at + 5000)):
            write(pipe, i)
        pipe.execute()
        if at % 250_000 == 0:
            _say(f"{label}: {at:,} of {docs:,} documents")
    return int(client.info("memory")["used_memory"]) - before


def synthetic_memory(args: Any, docs: int) -> dict[str, float]:
    """Block tables and the number-to-id map at `docs` random fingerprints, written in our
    layout (the same keys and entries the commit script writes), against the naive one."""
    client = args.redis.client()
    scheme = BlockScheme.parse(args.scheme)
    rng = np.random.default_rng(1)
    fps = rng.integers(0, 2**32, (docs, 2), dtype=np.uint64)
    fps = ((fps[:, 0] << np.uint64(32)) | fps[:, 1]).tolist()
    keys = scheme.keys(fps)
    ours = f"nd:{{bench-{uuid.uuid4().hex[:8]}}}:"

    def layout(pipe: Any, i: int) -> None:
        entry = fps[i].to_bytes(8, "little") + (i + 1).to_bytes(4, "little")
        for t, key in enumerate(keys[i]):
            pipe.append(f"{ours}b:t:{t}:{key:x}", entry)
        pipe.hset(f"{ours}id:{(i + 1) // IDS_PER_HASH}", (i + 1) % IDS_PER_HASH, f"d{i:08d}")

    naive = f"naive-{uuid.uuid4().hex[:8]}:"

    def naive_layout(pipe: Any, i: int) -> None:
        member = f"{fps[i]:016x}:d{i:08d}"
        for t, key in enumerate(keys[i]):
            pipe.sadd(f"{naive}{t}:{key:x}", member)
        pipe.hset(f"{naive}ids", f"{fps[i]:016x}", f"d{i:08d}")

    out = {"docs": float(docs)}
    for name, prefix, write in (("ours", ours, layout), ("naive", naive, naive_layout)):
        out[name] = _fill(client, docs, write, f"{name} layout") / docs
        keys = list(client.scan_iter(prefix + "*", count=10_000))
        for at in range(0, len(keys), 10_000):  # one UNLINK per key took minutes
            client.unlink(*keys[at : at + 10_000])
    return out


def main(args: Any) -> int:
    records = _records(args.corpus)
    mode = "exactly once" if args.exactly_once else "at least once"
    _say(f"{len(records)} records from {args.corpus}; scheme {args.scheme}; {mode}")
    rates = {}
    for n in args.consumers:
        _say(f"throughput with {n} consumer(s)")
        rates[n], redis_cpu = throughput(args, records, n)
        print(
            f"sustained rate, {n} consumer(s): {rates[n]:,.0f} docs/s; "
            f"Redis CPU {redis_cpu * 1e6:,.0f} us a document",
            flush=True,
        )
    pace = args.latency_rate or rates[min(rates)] / 2
    _say(f"latency at {pace:,.0f} docs/s")
    lat = latency(args, records, pace)
    print(
        f"latency at {lat['rate']:,.0f} docs/s ({lat['records']} records), "
        + "; ".join(
            f"{what}: p50 {lat[key]['p50']:.0f} ms, p99 {lat[key]['p99']:.0f} ms, "
            f"max {lat[key]['max']:.0f} ms"
            for key, what in (("stamped", "decision timestamp"), ("seen", "read by a reader"))
        ),
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
    if args.memory_docs and args.redis.cluster:
        _say("the synthetic memory figure is for one server: skipped on a cluster")
    elif args.memory_docs:
        _say(f"synthetic index of {args.memory_docs:,} documents")
        syn = synthetic_memory(args, args.memory_docs)
        print(
            f"at {syn['docs']:,.0f} documents ({args.scheme}): block tables + id map "
            f"{syn['ours']:.0f} bytes/doc; naive layout (a set per bucket of "
            f"'fingerprint:id', a hash fingerprint->id) {syn['naive']:.0f} bytes/doc",
            flush=True,
        )
    return 0
