#!/usr/bin/env python3
"""Soak: `neardup serve` held at 70% of its measured maximum rate for 10 minutes, printing
memory and latency as it goes, to show what grows and what levels off. Not part of CI.

    python bench/soak.py [--corpus PATH] [--minutes 10] [--fraction 0.7] [--rate R]
                         [--consumers 1] [--retention 120] [--every 30]

It runs against a running stack (`bash ops/stack.sh up`), found like every neardup
command: NEARDUP_BOOTSTRAP_SERVERS, NEARDUP_REDIS_URL, and NEARDUP_REDIS_CLUSTER=1 for a
Redis Cluster (plaintext connections only).

1. The maximum: the corpus waits on a topic and --consumers serve processes drain it
   (as `neardup bench` measures it). --rate skips this.
2. The soak: the corpus again and again at --fraction of that rate, for --minutes. Each
   pass is a new generation: its ids get a suffix and its ASCII letters go through a
   permutation drawn for that generation, so a generation is a new stream with the
   corpus's own duplicates in it (identical words stay identical), not near-copies of
   the generation before, which would make every record's family of candidates grow for
   the whole run. The serve processes run with --retention SECONDS
   (0: keep everything), so the index should level off once the horizon is reached.
Every --every seconds a row: elapsed time, records sent and decided, the lag, latency
p50/p99/max of the decisions that came in that window (decision timestamp minus send
time), Redis used_memory (all primaries of a cluster), documents indexed, and the RSS
of the serve processes. Then the first and last rows side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
from kafka import KafkaConsumer, KafkaProducer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from detector.bench import Run, _records, throughput  # noqa: E402
from detector.blocks import BlockScheme  # noqa: E402
from detector.index.redis import RedisIndex  # noqa: E402
from detector.index.redis.connect import RedisSettings  # noqa: E402
from detector.options import Config  # noqa: E402
from detector.settings import DEFAULT_SCHEME  # noqa: E402
from detector.stream.kafka import KafkaSettings  # noqa: E402

DEFAULT_CORPUS = ROOT.parent / "shared" / "data" / "dev-stream.jsonl.gz"
FALLBACK_CORPUS = ROOT / "tests" / "data" / "stream-2k.jsonl.gz"


def generation(docs: list[dict[str, Any]], n: int) -> list[tuple[str, bytes]]:
    """The corpus as pass n sends it: new ids, and the ASCII letters of each text through
    a permutation drawn for that generation (bytes.translate: the feed, a thread of this
    process, must not stall the sends; the corpus has no text that is mostly non-ASCII)."""
    table = bytearray(range(256))
    if n:
        rng = random.Random(n)
        for low, high in ((0x41, 0x5A), (0x61, 0x7A)):
            letters = list(range(low, high + 1))
            shuffled = letters[:]
            rng.shuffle(shuffled)
            for a, b in zip(letters, shuffled, strict=True):
                table[a] = b
    out = []
    for doc in docs:
        text = doc["text"].encode("utf-8", "surrogatepass").translate(table)
        changed = {**doc, "id": f"{doc['id']}~{n}", "text": text.decode("utf-8", "surrogatepass")}
        out.append((changed["id"], json.dumps(changed).encode()))
    return out


class Feed(threading.Thread):
    """Sends the generations at a steady rate; remembers when each record went out."""

    def __init__(self, run: Run, docs: list[dict[str, Any]], rate: float, until: float):
        super().__init__(daemon=True)
        self.run_, self.docs, self.rate, self.until = run, docs, rate, until
        self.sent: dict[str, float] = {}
        self.count = 0

    def run(self) -> None:
        producer = KafkaProducer(**self.run_.kafka.common(), linger_ms=5)
        start = time.time()
        n = 0
        try:
            while True:
                for doc_id, raw in generation(self.docs, n):
                    due = start + self.count / self.rate
                    if due >= self.until:
                        return
                    if (pause := due - time.time()) > 0:
                        time.sleep(pause)
                    now_ms = time.time() * 1000
                    self.sent[doc_id] = now_ms
                    producer.send(
                        self.run_.input, key=doc_id.encode(), value=raw, timestamp_ms=int(now_ms)
                    )
                    self.count += 1
                n += 1
        finally:
            producer.flush()
            producer.close()


class Watch(threading.Thread):
    """Reads the decisions; keeps each one's latency until a row takes them."""

    def __init__(self, run: Run, feed: Feed):
        super().__init__(daemon=True)
        self.run_, self.feed = run, feed
        self.window: list[float] = []
        self.decided = 0
        self.lock = threading.Lock()
        self.stop = False

    def run(self) -> None:
        consumer = KafkaConsumer(
            self.run_.output,
            **self.run_.kafka.common(),
            group_id=None,
            auto_offset_reset="earliest",
            consumer_timeout_ms=1000,
        )
        while not self.stop:
            for message in consumer:
                doc_id = json.loads(message.value)["id"]
                sent = self.feed.sent.get(doc_id)
                with self.lock:
                    self.decided += 1
                    if sent is not None:
                        self.window.append(message.timestamp - sent)
                if self.stop:
                    break
        consumer.close()

    def take(self) -> tuple[int, list[float]]:
        with self.lock:
            window, self.window = self.window, []
            return self.decided, window


def rss_mb(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                total += next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
        except (OSError, StopIteration):
            pass
    return total / 1024


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--corpus", type=Path)
    p.add_argument("--minutes", type=float, default=10)
    p.add_argument("--fraction", type=float, default=0.7)
    p.add_argument("--rate", type=float, help="docs/s to hold (default: fraction x measured)")
    p.add_argument("--consumers", type=int, default=1)
    p.add_argument("--retention", type=int, default=120)
    p.add_argument("--every", type=float, default=30)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--scheme", default=DEFAULT_SCHEME)
    a = p.parse_args()
    corpus = a.corpus or (DEFAULT_CORPUS if DEFAULT_CORPUS.is_file() else FALLBACK_CORPUS)
    config = Config.load(os.environ)  # NEARDUP_* and the file of NEARDUP_CONFIG, as neardup
    args = SimpleNamespace(
        kafka=KafkaSettings(config.value("bootstrap-servers", "bench")),
        redis=RedisSettings.from_options(
            config.value("redis-url", "bench"),
            cluster=config.value("redis-cluster", "bench"),
        ),
        scheme=a.scheme,
        batch_size=a.batch_size,
    )
    records = _records(str(corpus))
    where = f"Redis{' Cluster' if args.redis.cluster else ''} at {args.redis.where()}"
    print(f"soak: {len(records):,} records of {corpus.name} per generation; {where}", flush=True)
    rate = a.rate
    if rate is None:
        top, _ = throughput(args, records, a.consumers)
        rate = a.fraction * top
        print(f"measured maximum: {top:,.0f} docs/s with {a.consumers} consumer(s)", flush=True)
    print(
        f"holding {rate:,.0f} docs/s for {a.minutes:g} min, --retention {a.retention} s",
        flush=True,
    )

    run = Run(args, partitions=max(2, a.consumers))
    run.start(a.consumers, ["--retention", str(a.retention)])
    index = RedisIndex(args.redis.client(), BlockScheme.parse(a.scheme), run.index)
    time.sleep(8)  # the consumers join their group before the clock starts
    start = time.time()
    feed = Feed(run, [json.loads(raw) for _, raw in records], rate, start + a.minutes * 60)
    watch = Watch(run, feed)
    feed.start()
    watch.start()
    header = (
        "| s | sent | decided | lag | p50 ms | p99 ms | max ms | Redis MB | indexed "
        "| serve RSS MB |"
    )
    print(header + "\n|" + "---:|" * (header.count("|") - 1), flush=True)
    rows: list[dict[str, Any]] = []
    try:
        while feed.is_alive() or watch.decided < feed.count:
            time.sleep(a.every)
            decided, window = watch.take()
            stats = index.stats()
            ms = np.array(window) if window else np.zeros(1)
            row = {
                "s": time.time() - start,
                "sent": feed.count,
                "decided": decided,
                "p50": float(np.percentile(ms, 50)),
                "p99": float(np.percentile(ms, 99)),
                "max": float(ms.max()),
                "redis_mb": stats["server_used_memory"] / 2**20,
                "indexed": stats["documents"],
                "rss_mb": rss_mb([proc.pid for proc in run.procs]),
            }
            rows.append(row)
            print(
                f"| {row['s']:.0f} | {row['sent']:,} | {row['decided']:,} | "
                f"{row['sent'] - row['decided']:,} | {row['p50']:.0f} | {row['p99']:.0f} | "
                f"{row['max']:.0f} | {row['redis_mb']:,.0f} | {row['indexed']:,} | "
                f"{row['rss_mb']:,.0f} |",
                flush=True,
            )
            if not feed.is_alive() and time.time() - feed.until > 120:
                break  # the consumers cannot catch up: the table says so
    finally:
        watch.stop = True
        run.stop()
    if len(rows) >= 4:
        half = len(rows) // 2
        first, last = rows[1:half], rows[half:]
        for key, label in (("p99", "p99 ms"), ("redis_mb", "Redis MB"), ("rss_mb", "RSS MB")):
            print(
                f"{label}: first half mean {np.mean([r[key] for r in first]):,.0f}, "
                f"second half mean {np.mean([r[key] for r in last]):,.0f}, "
                f"last {rows[-1][key]:,.0f}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
