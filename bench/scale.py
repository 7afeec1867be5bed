#!/usr/bin/env python3
"""The Redis index at scale (key layout 5): an index of --docs documents bulk-loaded
(detector.index.redis.bulk), then what it weighs and what a lookup and a decision cost.

    python bench/scale.py --docs 1000000 --redis-url redis://localhost:26390/0
                          [--scheme k6-b8] [--real FILE] [--cluster] [--keep]

The documents: the first --real-load records of --real (default ../shared/data/
dev-stream.jsonl.gz, when it exists), fingerprinted with the real engine and loaded with
their texts and digests, spread evenly among random fingerprints with ids of their own
(no text: a synthetic document is found, but not verified). Then it prints:

- the load: seconds and documents a second;
- memory: INFO used_memory before and after the load, a document; MEMORY USAGE by key
  family (every key with --exact, else a sample of each primary's keys: footprint.py),
  a document, everything but the texts apart from the texts (a text of the real records);
- the model constants of a planner: the bytes a bucket entry costs in Redis (its bucket
  hash's overhead spread over it), a hash's overhead above its entries, keys a family;
  the bucket hashes by encoding (OBJECT ENCODING of a sample);
- lookups: --lookups real records (after those loaded), looked up as one batch --repeat
  times: bucket entries each reads (mean, p99), round trips a batch, latency a batch and
  a document, Redis CPU a document (INFO cpu, used_cpu_user + used_cpu_sys);
- decisions: the records after those, decided by a Detector over the index (what
  `neardup detect --redis-url` does, 512 a batch): Redis CPU and commands a document
  (INFO commandstats), round trips a document.

Nothing is asserted; the index is dropped at the end unless --keep. Run it against a
Redis of your own, with nothing else on it: the CPU figures are the whole server's.
"""

from __future__ import annotations

import argparse
import gzip
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, overload

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import redis  # noqa: E402
from redis.cluster import RedisCluster  # noqa: E402

from detector.blocks import BlockScheme  # noqa: E402
from detector.index import Query  # noqa: E402
from detector.index.redis import Batch, RedisIndex, maintenance  # noqa: E402
from detector.index.redis.bulk import load  # noqa: E402
from detector.index.redis.keys import entry_bytes, fields  # noqa: E402
from detector.pipeline import Limits, prepare  # noqa: E402
from detector.settings import DEFAULT_SCHEME, EngineSettings  # noqa: E402
from detector.vectors import default_vector_scheme  # noqa: E402

DEFAULT_REAL = ROOT.parent / "shared" / "data" / "dev-stream.jsonl.gz"


class Named(Sequence[str]):
    """The documents' ids or digests: the real records', and one of its own for each
    synthetic document, made when asked (10^7 strings would take some 700 MB)."""

    def __init__(self, n: int, pattern: str) -> None:
        self.n = n
        self.pattern = pattern
        self.real: dict[int, str] = {}

    def __len__(self) -> int:
        return self.n

    @overload
    def __getitem__(self, at: int) -> str: ...
    @overload
    def __getitem__(self, at: slice) -> Sequence[str]: ...
    def __getitem__(self, at: int | slice) -> str | Sequence[str]:
        if isinstance(at, slice):
            return [self[i] for i in range(*at.indices(self.n))]
        if not -self.n <= at < self.n:
            raise IndexError(at)  # iter() stops at it
        return self.real.get(at % self.n) or self.pattern.format(at % self.n)


def say(msg: str) -> None:
    print(f"[scale] {msg}", file=sys.stderr, flush=True)


def nodes(client: Any) -> list[Any]:
    """A client per primary (the server itself)."""
    if isinstance(client, RedisCluster):
        return [client.get_redis_connection(n) for n in client.get_primaries()]
    return [client]


def info(client: Any, section: str) -> list[dict[str, Any]]:
    return [n.info(section) for n in nodes(client)]


def used_memory(client: Any) -> int:
    return sum(int(i["used_memory"]) for i in info(client, "memory"))


def cpu(client: Any) -> float:
    return sum(float(i["used_cpu_user"]) + float(i["used_cpu_sys"]) for i in info(client, "cpu"))


def commands(client: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for i in info(client, "commandstats"):
        for k, v in i.items():
            name = k.removeprefix("cmdstat_")
            out[name] = out.get(name, 0) + int(v["calls"])
    return out


def fingerprinted(engine: Any, raw: list[bytes]) -> tuple[list[Any], list[Any]]:
    docs, prints = [], []
    for at in range(0, len(raw), 512):
        batch = prepare(engine, [(r, {}) for r in raw[at : at + 512]], Limits(10**8))
        docs += batch.docs
        prints += batch.prints
    return docs, prints


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.array(values, float), q)) if values else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=1_000_000)
    ap.add_argument("--redis-url", default="redis://localhost:6379/0")
    ap.add_argument("--cluster", action="store_true", help="--redis-url is a cluster node's")
    ap.add_argument("--scheme", default=DEFAULT_SCHEME)
    ap.add_argument("--real", type=Path, default=DEFAULT_REAL if DEFAULT_REAL.is_file() else None)
    ap.add_argument("--real-load", type=int, default=3000, help="real records loaded")
    ap.add_argument("--lookups", type=int, default=256, help="real records a lookup batch")
    ap.add_argument("--repeat", type=int, default=5, help="lookup batches timed")
    ap.add_argument("--decide", type=int, default=3000, help="real records decided after")
    ap.add_argument("--exact", action="store_true", help="weigh every key, not a sample")
    ap.add_argument("--keep", action="store_true", help="leave the index on the server")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    client: Any = (
        RedisCluster.from_url(args.redis_url)
        if args.cluster
        else redis.Redis.from_url(args.redis_url)
    )
    settings = EngineSettings(scheme=args.scheme)
    engine = settings.engine()
    scheme = BlockScheme.parse(args.scheme)
    raw: list[bytes] = []
    if args.real is not None:
        with gzip.open(args.real, "rb") as f:
            raw = [line.rstrip(b"\n") for line in f if line.strip()]
    loaded_raw = raw[: args.real_load]
    after = raw[len(loaded_raw) :]
    say(f"fingerprinting {len(loaded_raw):,} real records of {args.real}")
    docs, prints = fingerprinted(engine, loaded_raw)
    real = [(d, p) for d, p in zip(docs, prints, strict=True) if p.space == "t" and p.text]

    n = args.docs
    rng = np.random.default_rng(args.seed)
    fps = rng.integers(0, 2**32, (n, 2), dtype=np.uint64)
    fps = (fps[:, 0] << np.uint64(32)) | fps[:, 1]
    ids, digests = Named(n, "syn-{:010d}"), Named(n, "syn:{}")
    texts: dict[int, str] = {}
    spots = (np.arange(len(real)) * n // max(1, len(real))).tolist() if len(real) <= n else []
    for at, (d, p) in zip(spots, real, strict=False):
        ids.real[at], fps[at], digests.real[at] = d.id, p.fingerprint, p.digest
        texts[at] = p.text
    name = f"scale-{uuid.uuid4().hex[:8]}"
    index = RedisIndex(client, scheme, name)
    print(
        f"index {name}: {n:,} documents ({len(texts):,} real records with texts), "
        f"scheme {scheme.name} ({len(scheme.key_bits())} tables), {args.redis_url}"
        + (" (cluster)" if args.cluster else ""),
        flush=True,
    )

    before = used_memory(client)
    got = load(index, engine.version, ids, fps, digests, texts, progress=say)
    added = used_memory(client) - before
    del digests, fps
    print(
        f"load: {got.seconds:,.1f} s, {n / got.seconds:,.0f} docs/s "
        f"({got.appends:,} buckets written; evicted {got.evicted}, buckets cut {got.cut})",
        flush=True,
    )
    print(f"INFO used_memory: +{added:,} bytes, {added / n:,.1f} B a document", flush=True)

    say("weighing the key families" + (" (every key)" if args.exact else " (a sample)"))
    fp = maintenance.memory(index, exact=args.exact)
    weigh(fp, n, len(texts), scheme)
    weigh_texts(client, index, [ids[at] for at in texts])

    grown(client, index, args.seed)

    queries_raw = after[: args.lookups]
    if queries_raw:
        lookups(client, index, engine, scheme, queries_raw, args.repeat)
    decide_raw = after[args.lookups : args.lookups + args.decide]
    if decide_raw:
        decisions(client, index, settings, decide_raw)

    if not args.keep:
        say("dropping the index")
        maintenance.drop(index)
    client.close()
    return 0


def weigh(fp: Any, n: int, n_texts: int, scheme: BlockScheme) -> None:
    method = "exact" if fp.exact else f"sampled ({fp.drawn:,} keys drawn)"
    print(f"MEMORY USAGE by key family ({method}), bytes a document of the {n:,}:", flush=True)
    for fam in sorted(fp.bytes, key=lambda f: -fp.bytes[f]):
        print(
            f"  {fam:8} {fp.bytes[fam] / n:10.1f} B/doc  {fp.keys[fam]:14,.0f} keys  "
            f"{fp.bytes[fam] / max(fp.keys[fam], 1):9.1f} B/key",
            flush=True,
        )
    texts = fp.bytes.get("tx", 0.0)
    print(
        f"  everything but texts {(fp.total - texts) / n:,.1f} B/doc; texts {texts / n:,.1f} "
        f"B/doc ({texts / max(n_texts, 1):,.0f} B a text of the {n_texts:,} with one); "
        f"total {fp.total / n:,.1f} B/doc",
        flush=True,
    )
    tables = len(scheme.key_bits())
    entries = n * tables
    size = entry_bytes(scheme, default_vector_scheme())
    b_bytes, b_keys = fp.bytes.get("bh", 0.0), fp.keys.get("bh", 1.0)
    per_key = (b_bytes - entries * size) / max(b_keys, 1)
    print(
        f"model: a bucket entry costs {b_bytes / entries:.2f} B ({size} of it the "
        f"entry; {entries / b_keys:,.1f} entries a bucket hash, {per_key:,.1f} B a bucket "
        f"hash above its entries: key, object, fields, listpack or hashtable); "
        f"{b_keys:,.0f} bucket hashes, {b_keys / tables:,.0f} a table",
        flush=True,
    )
    for fam, what in (
        ("dc", "a decision hash"),
        ("dk", "a decision key that expires"),
        ("id", "an id-map hash"),
        ("dg", "a digest hash"),
    ):
        if fam in fp.bytes:
            print(
                f"model: {what}: {fp.bytes[fam] / fp.keys[fam]:,.1f} B, "
                f"{fp.bytes[fam] / n:,.1f} B a document, {fp.keys[fam]:,.0f} keys",
                flush=True,
            )


def weigh_texts(client: Any, index: RedisIndex, ids: list[str]) -> None:
    """The texts weighed one by one: a sample of the server's keys holds too few of them."""
    batch = Batch(client)
    for i in ids:
        key = index.layout.text(i)
        batch.add(key, "MEMORY", "USAGE", key, "SAMPLES", "0")
    batch.add(index.layout.txdict, "MEMORY", "USAGE", index.layout.txdict, "SAMPLES", "0")
    *sizes, dictionary = [int(w or 0) for w in batch.execute()]
    print(
        f"texts, every key weighed: {len(sizes):,} tx keys, {sum(sizes):,} B, "
        f"{sum(sizes) / max(1, len(sizes)):,.0f} B a text; txdict {dictionary:,} B",
        flush=True,
    )


def grown(client: Any, index: RedisIndex, seed: int, hashes: int = 50) -> None:
    """What growing the buckets an entry at a time costs: a bulk load writes each bucket
    once, at its size, where the commits set it again with one more entry (APPLY_SHARD's
    HSET). A sample of bucket hashes is copied the commits' way, and both are weighed
    (MEMORY USAGE), with their encodings."""
    rng = np.random.default_rng(seed)
    tables, width = len(index.scheme.key_bits()), max(index.scheme.key_bits())
    keys = rng.integers(0, 2**width, hashes, dtype=np.uint64)
    at = rng.integers(0, tables, hashes)
    names, _ = index.layout.buckets(["t"] * hashes, at, keys)
    batch = Batch(client)
    for name in names:
        batch.add(name, "HGETALL", name)
    values = batch.execute()
    size = index.entry_bytes
    copies = [(n if isinstance(n, bytes) else n.encode()) + b":grown" for n in names]
    batch, queued = Batch(client), 0
    for copy, value in zip(copies, values, strict=True):
        longest = max((len(v) for v in value.values()), default=0)
        for end in range(size, longest + size, size):  # the commits' order: entry by entry
            for field, v in value.items():
                if end <= len(v):
                    batch.add(copy, "HSET", copy, field, v[:end])
                    queued += 1
                    if queued % 10_000 == 0:  # at 10^7, millions of HSETs of kilobytes
                        batch.execute()
                        batch = Batch(client)
    batch.execute()
    batch = Batch(client)
    for name, copy in zip(names, copies, strict=True):
        batch.add(name, "MEMORY", "USAGE", name, "SAMPLES", "0")
        batch.add(copy, "MEMORY", "USAGE", copy, "SAMPLES", "0")
        batch.add(name, "OBJECT", "ENCODING", name)
    weighed = batch.execute()
    batch = Batch(client)
    for copy in copies:
        batch.add(copy, "UNLINK", copy)
    batch.execute()
    once = sum(int(w or 0) for w in weighed[0::3])
    appended = sum(int(w or 0) for w in weighed[1::3])
    encodings: dict[str, int] = {}
    for e in weighed[2::3]:
        name = e.decode() if isinstance(e, bytes) else str(e)
        encodings[name] = encodings.get(name, 0) + 1
    entries = sum(len(v) for value in values for v in value.values()) // size
    buckets = sum(len(value) for value in values)
    print(
        f"model: {hashes} bucket hashes ({buckets / hashes:,.1f} buckets, {entries / hashes:,.1f} "
        f"entries each; {', '.join(f'{k} {v}' for k, v in sorted(encodings.items()))}) weigh "
        f"{once / max(entries, 1):.2f} B an entry written once (as loaded), "
        f"{appended / max(entries, 1):.2f} B an entry grown an entry at a time (as the commits "
        f"grow them): x{appended / max(once, 1):.3f}",
        flush=True,
    )


def lookups(
    client: Any, index: RedisIndex, engine: Any, scheme: BlockScheme, raw: list[bytes], repeat: int
) -> None:
    _, prints = fingerprinted(engine, raw)
    queries = [Query(p.space, p.fingerprint, p.digest) for p in prints if p.space == "t"]
    # entries read: the newest max_bucket of each probed bucket (HSTRLEN of each)
    tables, keys = scheme.probe_array([q.fingerprint for q in queries])
    per = keys.shape[1]
    names, _ = index.layout.buckets(
        ["t"] * keys.size, np.tile(np.broadcast_to(tables, (per,)), len(queries)), keys.ravel()
    )
    batch = Batch(client)
    for key, field in zip(names, fields(keys.ravel()), strict=True):
        batch.add(key, "HSTRLEN", key, field)
    lengths = np.minimum(np.array(batch.execute(), np.int64) // index.entry_bytes, index.max_bucket)
    read = lengths.reshape(len(queries), per).sum(axis=1).tolist()
    trips: list[float] = []
    index.observe = trips.append
    index.lookup(queries)  # warm: the scripts cached, the connections open
    trips.clear()
    walls = []
    found = 0
    start_cpu = cpu(client)
    for _ in range(repeat):
        t = time.perf_counter()
        out = index.lookup(queries)
        walls.append(time.perf_counter() - t)
        found = sum(len(f.candidates) for f in out)
    used = cpu(client) - start_cpu
    index.observe = None
    q = len(queries)
    print(
        f"lookup of {q} real records ({per} buckets each), x{repeat}: entries read a lookup "
        f"mean {np.mean(read):,.0f}, p99 {percentile(read, 99):,.0f}, max {max(read):,}; "
        f"{len(trips) / repeat:.1f} round trips a batch; latency a batch median "
        f"{np.median(walls) * 1e3:,.1f} ms ({np.median(walls) / q * 1e6:,.0f} us a document); "
        f"Redis CPU {used / (q * repeat) * 1e6:,.1f} us a looked-up document; "
        f"{found} candidates a batch",
        flush=True,
    )


def decisions(client: Any, index: RedisIndex, settings: EngineSettings, raw: list[bytes]) -> None:
    detector = settings.detector(index)
    trips: list[float] = []
    index.observe = trips.append
    before_cmd, before_cpu = commands(client), cpu(client)
    wall = time.perf_counter()
    decided = dups = 0
    for at in range(0, len(raw), 512):
        batch = prepare(detector.engine, [(r, {}) for r in raw[at : at + 512]], Limits(10**8))
        out = detector.process(batch.docs, batch.prints)
        decided += len(out)
        dups += sum(1 for d in out if d.duplicate_of is not None)
    wall = time.perf_counter() - wall
    used = cpu(client) - before_cpu
    after_cmd = commands(client)
    index.observe = None
    delta = {k: v - before_cmd.get(k, 0) for k, v in after_cmd.items()}
    delta = {k: v for k, v in delta.items() if v > 0 and k != "info"}
    top = ", ".join(f"{k} {v / decided:.2f}" for k, v in sorted(delta.items(), key=lambda x: -x[1]))
    print(
        f"decide {decided:,} real records ({dups:,} duplicates), 512 a batch: Redis CPU "
        f"{used / decided * 1e6:,.1f} us a document; {sum(delta.values()) / decided:,.2f} "
        f"commands a document ({top}); {len(trips) / decided:.3f} round trips a document; "
        f"{decided / wall:,.0f} docs/s in this process",
        flush=True,
    )


if __name__ == "__main__":
    sys.exit(main())
