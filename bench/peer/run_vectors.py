#!/usr/bin/env python3
"""Dense-vector peers for the embeddings benchmark, and the exact truth of a stream.

Run it with the vector peer venv's python (see bench/peer/setup_vectors.sh):

    PY=$(bash bench/peer/setup_vectors.sh)
    $PY bench/peer/run_vectors.py STREAM.jsonl[.gz] --peer NAME --cosine 0.90 [--out D.jsonl]
    $PY bench/peer/run_vectors.py STREAM.jsonl[.gz] --write-truth TRUTH.jsonl

STREAM holds {"id", "embedding": [floats], ...} records. All of them are parsed into one
float32 matrix and L2-normalized first; only the stream loop is timed (time.perf_counter).
For each record in stream order, as a stream detector sees it, the peer queries the
vectors of the earlier records, then inserts the record's own. A record is a duplicate
when the peer finds an earlier vector with cosine >= T; duplicate_of names the best one
it found. Peers (threads: library defaults, what a user gets):

  numpy-bruteforce   exact: a preallocated float32 matrix, max of X[:i] @ q.
  faiss-flat-range   exact: faiss.IndexFlatIP, range_search(q, T). Faiss returns inner
                     products strictly above T: a cosine exactly T is missed.
  hnswlib            approximate: HNSW, space "ip", M=16, ef_construction=200 and ef=50
                     (the README's example), knn_query k=1 (the decision needs only the
                     nearest; ef bounds the search, not k).
  faiss-multihash    approximate: 64-bit codes sign(v @ R) (R Gaussian, seed 0) in
                     faiss.IndexBinaryMultiHash (4 tables of 16 bits, nflip 2: finds every
                     code within Hamming 11, the radius), then the exact cosines of the
                     candidates against the float vectors kept beside it.

Bytes a vector: numpy and faiss-flat computed from the index's own size (rows * d * 4);
hnswlib index.index_file_size() (its serialized size; in memory it also keeps a lock and
a label map entry per element); faiss-multihash the serialized binary index
(faiss.serialize_index_binary) plus the d * 4 bytes of the float vectors it verifies with.

--write-truth: max_cosine_earlier and most_similar_earlier of every record, exact, by
blocked float32 matrix products (the first record: -1.0 and null), one JSON line a record
in stream order; each cosine is written as the shortest decimal of its float32 value.

Prints one JSON line on stdout:
  {"tool", "version", "docs", "seconds", "docs_per_s", "duplicates", "decisions", ...}
"""
import argparse
import gzip
import json
import sys
import time
from importlib.metadata import version as pkg_version

import numpy as np

PEERS = ("numpy-bruteforce", "faiss-flat-range", "hnswlib", "faiss-multihash")


def read_stream(path, limit=None):
    opener = gzip.open if path.endswith(".gz") else open
    ids, rows = [], []
    with opener(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            if limit is not None and len(ids) >= limit:
                break
            if line.strip():
                obj = json.loads(line)
                ids.append(str(obj["id"]))
                rows.append(obj["embedding"])
    x = np.asarray(rows, dtype=np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return ids, x


def numpy_bruteforce(x, t, tick, **_):
    n, d = x.shape
    index = np.empty((n, d), np.float32)
    found = [None] * n
    for i in range(n):
        q = x[i]
        if i:
            s = index[:i] @ q
            j = int(s.argmax())
            if s[j] >= t:
                found[i] = j
        index[i] = q
        tick(i)
    return found, {"bytes_per_vector": index.nbytes / n, "bytes_how": "computed: rows*d*4"}


def faiss_flat_range(x, t, tick, **_):
    import faiss

    n, d = x.shape
    index = faiss.IndexFlatIP(d)
    found = [None] * n
    for i in range(n):
        q = x[i : i + 1]
        _, dist, labels = index.range_search(q, t)
        if len(labels):
            found[i] = int(labels[dist.argmax()])
        index.add(q)
        tick(i)
    size = index.ntotal * index.d * 4
    return found, {
        "bytes_per_vector": size / index.ntotal,
        "bytes_how": "computed: ntotal*d*4",
        "omp_max_threads": faiss.omp_get_max_threads(),
        "faiss": faiss.__version__,
    }


def hnsw(x, t, tick, m=16, ef_construction=200, ef=50, **_):
    import hnswlib

    n, d = x.shape
    index = hnswlib.Index(space="ip", dim=d)
    index.init_index(max_elements=n, ef_construction=ef_construction, M=m, random_seed=100)
    index.set_ef(ef)
    found = [None] * n
    for i in range(n):
        q = x[i : i + 1]
        if i:
            labels, dist = index.knn_query(q, k=1)
            if 1.0 - dist[0, 0] >= t:  # "ip" distance is 1 - inner product
                found[i] = int(labels[0, 0])
        index.add_items(q, [i])
        tick(i)
    return found, {
        "bytes_per_vector": index.index_file_size() / index.get_current_count(),
        "bytes_how": "serialized: index_file_size()/get_current_count()",
        "M": m,
        "ef_construction": ef_construction,
        "ef": ef,
    }


def faiss_multihash(x, t, tick, bits=64, tables=4, nflip=2, radius=11, **_):
    import faiss

    n, d = x.shape
    planes = np.random.default_rng(0).standard_normal((d, bits)).astype(np.float32)
    codes = np.packbits(x @ planes > 0, axis=1)  # the planes are the peer's features: untimed
    index = faiss.IndexBinaryMultiHash(bits, tables, bits // tables)
    index.nflip = nflip
    vectors = np.empty((n, d), np.float32)
    found = [None] * n
    candidates = 0
    for i in range(n):
        code, q = codes[i : i + 1], x[i]
        _, _, labels = index.range_search(code, radius + 1)  # keeps Hamming < radius + 1
        if len(labels):
            candidates += len(labels)
            s = vectors[labels] @ q
            j = int(s.argmax())
            if s[j] >= t:
                found[i] = int(labels[j])
        index.add(code)
        vectors[i] = q
        tick(i)
    hashed = faiss.serialize_index_binary(index).nbytes
    return found, {
        "bytes_per_vector": (hashed + vectors.nbytes) / n,
        "bytes_how": "serialized binary index + d*4 float vectors",
        "hash_bytes_per_vector": hashed / n,
        "candidates_per_lookup": candidates / n,
        "bits": bits,
        "tables": tables,
        "nflip": nflip,
        "radius": radius,
        "omp_max_threads": faiss.omp_get_max_threads(),
        "faiss": faiss.__version__,
    }


RUN = {
    "numpy-bruteforce": (numpy_bruteforce, "numpy"),
    "faiss-flat-range": (faiss_flat_range, "faiss-cpu"),
    "hnswlib": (hnsw, "hnswlib"),
    "faiss-multihash": (faiss_multihash, "faiss-cpu"),
}


def write_truth(path, ids, x, block=512):
    n = len(ids)
    best = np.full(n, -1.0, np.float32)
    arg = np.full(n, -1, np.int64)
    for a in range(1, n, block):
        b = min(n, a + block)
        s = x[a:b] @ x[:b].T
        s[:, a:b][np.triu(np.ones((b - a, b - a), bool))] = -np.inf  # self and later ones
        arg[a:b] = s.argmax(axis=1)
        best[a:b] = s[np.arange(b - a), arg[a:b]]
        if (a // block) % 40 == 0:
            print(f"truth: {b}/{n} records", file=sys.stderr, flush=True)
    with open(path, "w", encoding="utf-8") as fh:
        for i, rid in enumerate(ids):
            of = json.dumps(ids[arg[i]]) if arg[i] >= 0 else "null"
            fh.write(f'{{"id": {json.dumps(rid)}, "max_cosine_earlier": {best[i]!s}, '
                     f'"most_similar_earlier": {of}}}\n')


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("stream", help="JSONL or JSONL.gz of {'id', 'embedding'} records")
    ap.add_argument("--peer", choices=PEERS)
    ap.add_argument("--cosine", type=float, default=0.90, help="duplicate threshold T")
    ap.add_argument("--limit", type=int, default=None, help="only the first N records")
    ap.add_argument("--out", default=None, help="write decisions JSONL here")
    ap.add_argument("--write-truth", default=None, metavar="PATH")
    ap.add_argument("--progress", type=int, default=0,
                    help="every N records print elapsed seconds to stderr (0 = off)")
    args = ap.parse_args(argv)
    if not args.peer and not args.write_truth:
        ap.error("give --peer or --write-truth")

    t0 = time.perf_counter()
    ids, x = read_stream(args.stream, args.limit)
    n = len(ids)
    print(f"read {n} vectors of {x.shape[1]} in {time.perf_counter() - t0:.1f} s",
          file=sys.stderr, flush=True)
    if args.write_truth:
        t0 = time.perf_counter()
        write_truth(args.write_truth, ids, x)
        print(f"truth written in {time.perf_counter() - t0:.1f} s: {args.write_truth}",
              file=sys.stderr, flush=True)
        if not args.peer:
            return 0

    every = args.progress
    start = time.perf_counter()

    def tick(i):
        if every and (i + 1) % every == 0:
            print(f"{args.peer}: {i + 1}/{n} records, {time.perf_counter() - start:.1f} s",
                  file=sys.stderr, flush=True)

    fn, package = RUN[args.peer]
    start = time.perf_counter()
    found, extra = fn(x, args.cosine, tick)
    seconds = time.perf_counter() - start

    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            for rid, j in zip(ids, found):
                fh.write(json.dumps({
                    "id": rid,
                    "decision": "unique" if j is None else "duplicate",
                    "duplicate_of": None if j is None else ids[j],
                }) + "\n")
    print(json.dumps({
        "tool": args.peer,
        "version": pkg_version(package),
        "numpy": np.__version__,
        "cosine": args.cosine,
        "docs": n,
        "seconds": round(seconds, 4),
        "docs_per_s": round(n / seconds, 2) if seconds > 0 else None,
        "duplicates": sum(j is not None for j in found),
        "decisions": args.out,
        **extra,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
