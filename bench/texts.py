#!/usr/bin/env python3
"""The literal texts an index keeps: bytes a text and CPU a text, by codec, on the three
dev streams, against LZ4 (the form before zstd); the dictionary's size and training time;
and how the dictionary's gain depends on the size of the sample it is trained on.

    python bench/texts.py [--data DIR] [--streams text,html,vectors] [--repeat 3]
                          [--redis-url URL [--redis-cluster]]

The texts are those an index keeps: each stream is decided by a Detector over a memory
index with its default settings (HTML pages: their main content, normalized), and the
texts it indexed are taken in the order it wrote them. A record with an embedding is
decided on its vector and the index keeps the vector, not a text: for the vector stream
the texts are those of its records without their embeddings (short passages, which an
index of text records would keep).

Codecs: LZ4 (lz4.block with the length in front, as indexes wrote before); zstd without a
dictionary at a few levels; zstd with the index's dictionary (texts.train on the first
texts the index writes, as texts.Sample takes them, trained for that level), every text
packed with it, as the index holds them once it has packed its sample again. Printed per
stream and codec: bytes a text (the value Redis keeps; mean), the total against LZ4's,
and microseconds a text to pack and to unpack (the best of --repeat passes over every
text, one process, one thread). With --redis-url, the texts of LZ4 and of the default
codec: the stream decided over a Redis index (one consumer, in this process) with each,
and its tx keys weighed (MEMORY USAGE: key, value, and the allocator's rounding), with its
txdict key; the index is dropped after.

Then the sample: dictionaries trained on the first N texts (default level), each judged
on the texts after the largest sample (held out from every one of them).
Figures only; it asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _common import read_records  # noqa: E402

from detector.index.memory import MemoryIndex  # noqa: E402
from detector.index.texts import LEVEL, Codec, Sample  # noqa: E402
from detector.pipeline import Limits, prepare  # noqa: E402
from detector.settings import EngineSettings  # noqa: E402

STREAMS = {
    "text": "dev-stream.jsonl.gz",
    "html": "html-dev-stream.jsonl.gz",
    "vectors": "embed-dev-stream.jsonl.gz",
}
PLAIN_LEVELS = (1, 3, 5, 9)
DICTIONARY_LEVELS = (1, 3, 4, 5, 6, 7, 9, 19)
SAMPLES = (100, 250, 500, 1000, 2000, 4000)


def decide(raw: list[bytes], index: Any) -> None:
    """The records decided over `index` with the default settings, 256 a batch."""
    detector = EngineSettings().detector(index)
    for at in range(0, len(raw), 256):
        batch: list[tuple[bytes, dict[str, Any]]] = [(r, {}) for r in raw[at : at + 256]]
        prepared = prepare(detector.engine, batch, Limits(10**8), detector.extractor)
        detector.process(prepared.docs, prepared.prints)


def indexed_texts(raw: list[bytes]) -> list[str]:
    """The normalized texts a memory index keeps for these records, in the order written."""
    index = MemoryIndex(EngineSettings().block_scheme(), compress=False)
    decide(raw, index)
    return [t for t in index._texts.values() if isinstance(t, str)]


def per_text(fn: Callable[[Any], Any], items: list[Any], repeat: int) -> tuple[list[Any], float]:
    """fn over every item; microseconds an item, the best of `repeat` passes."""
    best, out = float("inf"), []
    for _ in range(repeat):
        start = time.process_time()
        out = [fn(x) for x in items]
        best = min(best, time.process_time() - start)
    return out, best / len(items) * 1e6


def dictionary_for(texts: list[str], level: int) -> tuple[bytes, float]:
    """The dictionary an index would train on these texts, and the training's seconds."""
    sample = Sample()
    for n, t in enumerate(texts):
        if sample.full:
            break
        sample.add(str(n), t, b"")
    start = time.process_time()
    data = sample.train(level)
    if data is None:
        raise SystemExit("no dictionary could be trained on the sample")
    return data, time.process_time() - start


def measure(texts: list[str], repeat: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []

    def run(name: str, codec: Codec, extra: dict[str, Any]) -> None:
        packed, pack_us = per_text(codec.pack, texts, repeat)
        back, unpack_us = per_text(codec.unpack, packed, repeat)
        assert back == texts, f"{name} did not give the texts back"
        size = sum(map(len, packed))
        rows.append(
            {"codec": name, "bytes": size, "pack_us": pack_us, "unpack_us": unpack_us, **extra}
        )

    run("lz4", Codec("lz4"), {})
    for level in PLAIN_LEVELS:
        run(f"zstd {level}", Codec(level=level, with_dictionary=False), {})
    for level in DICTIONARY_LEVELS:
        data, seconds = dictionary_for(texts, level)
        codec = Codec(level=level)
        codec.use(data)
        extra = {"dictionary": len(data), "train_s": seconds}
        run(f"zstd {level} + dictionary", codec, extra)
    return rows


def sample_sweep(texts: list[str]) -> list[dict[str, Any]]:
    """Dictionaries trained on the first N texts (the default rule for their size), each
    judged on the texts after the largest N."""
    held = texts[max(SAMPLES) :]
    if not held:
        return []
    lz4 = Codec("lz4")
    base = sum(len(lz4.pack(t)) for t in held)
    out = []
    for n in SAMPLES:
        sample = Sample()
        for t in texts[:n]:
            sample.heads.append(t.encode("utf-8"))
            sample.size += len(sample.heads[-1])
        start = time.process_time()
        data = sample.train(LEVEL)
        seconds = time.process_time() - start
        if data is None:
            out.append({"texts": n, "sample": sample.size, "dictionary": 0})
            continue
        codec = Codec()
        codec.use(data)
        size = sum(len(codec.pack(t)) for t in held)
        out.append(
            {
                "texts": n,
                "sample": sample.size,
                "dictionary": len(data),
                "train_s": seconds,
                "ratio": size / base,
                "held": len(held),
            }
        )
    return out


def redis_bytes(url: str, cluster: bool, raw: list[bytes]) -> dict[str, tuple[float, float]]:
    """The records decided over a Redis index with LZ4 texts, then with the default codec:
    MEMORY USAGE of its tx keys a text and of its txdict key (the index is dropped)."""
    import redis
    from redis.cluster import RedisCluster

    from detector.index.redis import RedisIndex, maintenance

    client: Any = RedisCluster.from_url(url) if cluster else redis.Redis.from_url(url)
    out = {}
    for name, codec in (("lz4", Codec("lz4")), (f"zstd {LEVEL} + dictionary", Codec())):
        scheme = EngineSettings().block_scheme()
        index = RedisIndex(client, scheme, f"bench-texts-{os.getpid()}", codec=codec)
        try:
            decide(raw, index)
            weighed = maintenance.memory(index, exact=True)
            texts = weighed.keys["tx"]
            out[name] = (weighed.bytes["tx"] / texts, weighed.bytes.get("txdict", 0.0))
        finally:
            maintenance.drop(index)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--streams", default=",".join(STREAMS))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--redis-url", default=None)
    ap.add_argument("--redis-cluster", action="store_true", help="--redis-url is a cluster's")
    args = ap.parse_args()
    wanted = args.streams.split(",")
    if unknown := set(wanted) - set(STREAMS):
        ap.error(f"unknown streams {sorted(unknown)}; choose from {list(STREAMS)}")

    print(
        "| stream | codec | bytes a text | vs LZ4 | pack us | unpack us | dictionary | training |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    sweeps: dict[str, list[dict[str, Any]]] = {}
    weighed: dict[str, dict[str, tuple[float, float]]] = {}
    for stream in wanted:
        raw = read_records(args.data / STREAMS[stream], drop_embeddings=stream == "vectors")
        texts = indexed_texts(raw)
        rows = measure(texts, args.repeat)
        base = rows[0]["bytes"]
        mean = sum(len(t.encode("utf-8")) for t in texts) / len(texts)
        print(f"| {stream} ({len(texts):,} texts, {mean:,.0f} bytes) | | | | | | | |")
        for r in rows:
            dictionary = f"{r['dictionary'] / 1024:,.0f} KiB" if "dictionary" in r else ""
            training = f"{r['train_s'] * 1000:,.0f} ms" if "train_s" in r else ""
            print(
                f"| | {r['codec']} | {r['bytes'] / len(texts):,.0f} | {r['bytes'] / base:.3f} "
                f"| {r['pack_us']:,.1f} | {r['unpack_us']:,.1f} | {dictionary} | {training} |",
                flush=True,
            )
        sweeps[stream] = sample_sweep(texts)
        if args.redis_url:
            weighed[stream] = redis_bytes(args.redis_url, args.redis_cluster, raw)

    print(f"\nThe sample (zstd {LEVEL} + dictionary, judged on the texts after the largest):\n")
    print("| stream | first texts | their bytes | dictionary | training | vs LZ4 |")
    print("|---|---:|---:|---:|---:|---:|")
    for stream, rows in sweeps.items():
        for r in rows:
            if not r["dictionary"]:
                print(f"| {stream} | {r['texts']:,} | {r['sample']:,} | none | | |")
                continue
            print(
                f"| {stream} | {r['texts']:,} | {r['sample'] / 1024:,.0f} KiB "
                f"| {r['dictionary'] / 1024:,.0f} KiB | {r['train_s'] * 1000:,.0f} ms "
                f"| {r['ratio']:.3f} ({r['held']:,} texts) |"
            )
    if weighed:
        print("\nIn Redis (MEMORY USAGE of the index's tx keys a text, and of its txdict):\n")
        print(f"| stream | LZ4 | zstd {LEVEL} + dictionary | vs LZ4 | txdict |")
        print("|---|---:|---:|---:|---:|")
        for stream, w in weighed.items():
            (lz4, _), (ours, dictionary) = w["lz4"], w[f"zstd {LEVEL} + dictionary"]
            print(
                f"| {stream} | {lz4:,.0f} | {ours:,.0f} | {ours / lz4:.3f} "
                f"| {dictionary / 1024:,.0f} KiB |"
            )


if __name__ == "__main__":
    main()
