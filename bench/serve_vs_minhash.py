#!/usr/bin/env python3
"""One `neardup serve` consumer against a kafka-python + datasketch MinHashLSH (Redis
storage) consumer: drain rate, precision/recall and Redis bytes per document, in one run
on the same Kafka and Redis.

    bash ops/stack.sh up; eval "$(bash ops/stack.sh env)"
    .venv/bin/python bench/serve_vs_minhash.py [--corpus PATH] [--truth PATH] [--limit N]

(1) The corpus (default: the shared dev stream, and its truth) is produced once, as a
    backlog, to a new topic (--partitions, default 1: one partition keeps stream order,
    which the truth's "earlier record" is about).
(2) One `python -m detector serve` (as `neardup bench` starts it: its own group, index
    and output topic, --batch-size 256) drains it. Its drain rate is counted from the
    first decision to the last, by the decisions' Kafka timestamps, as `neardup bench`
    does (so start-up and the group join do not count); then MEMORY USAGE of every key of
    its index, over the documents it indexed; then it is stopped.
(3) bench/peer/setup_minhash.sh (a venv outside the repo), then
    bench/peer/run_minhash_kafka.py drains the same topic with its own group, publishing
    its decisions to its own topic; its rate is counted the same way, from its decisions'
    Kafka timestamps; then MEMORY USAGE of every key under its datasketch basename (SCAN),
    over the records it indexed.
(4) Both decision sets are scored with detector.evaluate (what `neardup eval` does).
Everything the run made (topics, groups, both indexes' Redis keys) is deleted after. The
detector code measured is a snapshot of detector/ taken at the start (--no-snapshot: the
work tree). The machine is shared: the load average is printed at the start and the end.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from _common import (
    BENCH,
    Code,
    fmt,
    fmt_rate,
    footer,
    keyed_records,
    last_json,
    load,
    markdown,
    prepare_inputs,
    resolve_corpus,
    resolve_truth,
    run_snapshot,
    stack_settings,
)

TARGET_RATIO = 10.0  # neardup serve's drain rate over the peer's
PEER_SETUP = BENCH / "peer" / "setup_minhash.sh"
PEER = BENCH / "peer" / "run_minhash_kafka.py"


def say(msg: str) -> None:
    print(f"[serve_vs_minhash] {msg}", file=sys.stderr, flush=True)


def drain(
    kafka: Any, topic: str, expected: int, timeout: float, out: Path
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    from detector.bench import read_decisions

    decisions, stamps = [], []
    for d, ts in read_decisions(kafka, topic, expected, timeout):
        decisions.append(d)
        stamps.append(ts)
        if len(stamps) % 2000 == 0:
            say(f"  {len(stamps)} of {expected} decisions read from {topic}")
    with open(out, "w", encoding="utf-8") as f:
        for d in decisions:
            f.write(json.dumps(d) + "\n")
    seconds = (max(stamps) - min(stamps)) / 1000 if stamps else 0.0
    rate = {
        "decisions": float(len(stamps)),
        "seconds": seconds,
        "docs_per_s": len(stamps) / seconds if seconds > 0 else float("nan"),
    }
    return decisions, rate


def measure_keys(client: Any, keys: list[bytes]) -> int:
    total = 0
    for at in range(0, len(keys), 5000):
        pipe = client.pipeline(transaction=False)
        for key in keys[at : at + 5000]:
            pipe.memory_usage(key, samples=0)
        total += sum(int(size or 0) for size in pipe.execute())
    return total


def peer_memory(client: Any, basename: bytes) -> dict[str, Any]:
    """MEMORY USAGE of every key of datasketch's index (prefix `basename`), by family:
    the band tables (a hash per band naming its buckets, a set of keys per bucket) and the
    key table (a hash of the keys, a list of the band hashes per key)."""
    keys = list(client.scan_iter(match=basename + b"*", count=10_000))
    bands = [k for k in keys if k.startswith(basename + b"_bucket_")]
    table = [k for k in keys if k.startswith(basename + b"_keys")]
    return {
        "keys": len(keys),
        "indexed": int(client.hlen(basename + b"_keys")),
        "bytes": {
            "band tables": measure_keys(client, bands),
            "key table": measure_keys(client, table),
        },
        "other": len(keys) - len(bands) - len(table),
    }


def drop_keys(client: Any, basename: bytes) -> int:
    keys = list(client.scan_iter(match=basename + b"*", count=10_000))
    for at in range(0, len(keys), 1000):
        client.unlink(*keys[at : at + 1000])
    return len(keys)


def setup_peer(python: str | None) -> str:
    if python:
        return python
    say(f"peer venv: bash {PEER_SETUP.relative_to(BENCH.parent)}")
    p = subprocess.run(
        ["bash", str(PEER_SETUP)], stdout=subprocess.PIPE, text=True, timeout=1800, check=False
    )
    if p.returncode != 0 or not p.stdout.strip():
        sys.exit(f"error: {PEER_SETUP} failed (exit {p.returncode})")
    return p.stdout.strip().splitlines()[-1]


def run_peer(python: str, ns: Any, argv: list[str], timeout: float) -> dict[str, Any]:
    # Connection settings (a password too) travel in the environment, as serve's do; the
    # snapshot's PYTHONPATH is none of the peer venv's business.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(ns.kafka.env())
    env.update(ns.redis.env())
    p = subprocess.run(
        [python, str(PEER), *argv],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )  # its stderr (progress) goes to ours
    if p.returncode != 0:
        raise RuntimeError(f"peer {PEER.name} exit {p.returncode}: {p.stdout.strip()[-1000:]}")
    return last_json(p.stdout)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", help="JSONL(.gz) stream (default: the shared dev stream)")
    ap.add_argument(
        "--truth", help="truth JSONL(.gz) (default: the dev truth, with the dev stream)"
    )
    ap.add_argument("--limit", type=int, help="only the first N records")
    ap.add_argument(
        "--partitions", type=int, default=1, help="partitions of the input topic (default: 1)"
    )
    ap.add_argument("--batch-size", type=int, default=256, help="serve's --batch-size (256)")
    ap.add_argument(
        "--serve-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="extra argument for `neardup serve` (repeatable; e.g. --serve-arg=--exactly-once)",
    )
    ap.add_argument(
        "--peer-python", help="python of a ready peer venv (default: run setup_minhash.sh)"
    )
    ap.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        help="seconds without a decision before a drain is given up (default: 600)",
    )
    ap.add_argument(
        "--no-snapshot",
        action="store_true",
        help="run the work tree's detector/ instead of a snapshot taken at the start",
    )
    ap.add_argument("--json", help="also write the raw figures to this JSON file")
    args = ap.parse_args(argv)

    corpus_arg = resolve_corpus(args.corpus)
    truth_arg = resolve_truth(args.truth, corpus_arg)
    load_start = load()
    say(f"load at start: {load_start}")
    peer_python = setup_peer(args.peer_python)  # before anything is made that needs cleaning
    raw: dict[str, Any] = {"load_start": load_start}
    with tempfile.TemporaryDirectory(prefix="neardup-serve-vs-minhash-") as tmpdir:
        tmp = Path(tmpdir)
        corpus, truth, n = prepare_inputs(corpus_arg, truth_arg, args.limit, tmp)
        if not args.no_snapshot:
            say("snapshot of detector/ ...")
            run_snapshot(tmp, corpus)  # this process, its consumers and serve run the copy
        say(f"detector code measured: {Code.state}")
        result = measure(args, corpus, truth, n, tmp, peer_python, raw)
    load_end = load()
    say(f"load at end: {load_end}")
    raw["load_end"] = load_end
    report(args, corpus_arg, truth_arg, n, result, load_start, load_end)
    if args.json:
        Path(args.json).write_text(json.dumps(raw | result, indent=1, default=str))
    return 0


def measure(
    args: argparse.Namespace,
    corpus: Path,
    truth: Path | None,
    n: int,
    tmp: Path,
    peer_python: str,
    raw: dict[str, Any],
) -> dict[str, Any]:
    from kafka import KafkaProducer

    from detector.bench import Run, key_families
    from detector.blocks import BlockScheme
    from detector.evaluate import evaluate, load_jsonl, truth_measure
    from detector.index.redis import RedisIndex
    from detector.stream.kafka import ensure_topics, remove

    ns = stack_settings(args.batch_size)
    if ns.kafka.security_protocol != "PLAINTEXT" or ns.redis.cluster or ns.redis.tls:
        sys.exit("error: the peer runs on PLAINTEXT Kafka and a redis:// server only")
    records = keyed_records(corpus)
    say(
        f"{len(records)} records from {corpus}; Kafka {ns.kafka.bootstrap_servers}, "
        f"Redis {ns.redis.where()}"
    )

    run = Run(ns, partitions=args.partitions)  # the input, output and dead-letter topics
    peer_out, peer_group = f"{run.group}-minhash-out", f"{run.group}-minhash"
    basename = f"{run.group}-minhash".encode()
    client = ns.redis.client()
    result: dict[str, Any] = {"topic": run.input, "partitions": args.partitions}
    try:
        ensure_topics(ns.kafka, {peer_out: 1})
        say(f"(1) producing the backlog to {run.input} ({args.partitions} partition(s))")
        producer = KafkaProducer(**ns.kafka.common(), linger_ms=20)
        for doc_id, line in records:
            producer.send(run.input, key=doc_id.encode(), value=line)
        producer.flush()
        producer.close()

        say(f"(2) one neardup serve (group {run.group}, index {run.index}) draining it")
        run.start(1, args.serve_arg)
        decisions, rate = drain(ns.kafka, run.output, n, args.timeout, tmp / "neardup.jsonl")
        say(
            f"    {rate['decisions']:.0f} decisions in {rate['seconds']:.2f} s: "
            f"{rate['docs_per_s']:,.0f} docs/s"
        )
        index = RedisIndex(client, BlockScheme.parse(ns.scheme), run.index)
        families = key_families(index)
        result["neardup"] = {
            **rate,
            "indexed": index.stats()["documents"],
            "bytes": families,
            "serve_args": ["--batch-size", str(args.batch_size), *args.serve_arg],
        }
        for p in run.procs:  # stopped before the peer runs: the two never share the CPUs
            p.terminate()
        for p in run.procs:
            p.wait(timeout=60)

        say(f"(3) peer: kafka-python + datasketch MinHashLSH on Redis (group {peer_group})")
        peer_file = tmp / "peer.jsonl"
        summary = run_peer(
            peer_python,
            ns,
            [
                "--input-topic", run.input,
                "--output-topic", peer_out,
                "--group", peer_group,
                "--basename", basename.decode(),
                "--expected", str(n),
                "--out", str(peer_file),
                "--idle", str(args.timeout),
            ],
            timeout=7200,
        )  # fmt: skip
        say(
            f"    its own clock: {summary['records']} records in {summary['seconds']:.2f} s, "
            f"{summary['docs_per_s']:,.0f} docs/s"
        )
        peer_decisions, peer_rate = drain(ns.kafka, peer_out, n, 60, tmp / "peer-topic.jsonl")
        say(f"    by the decisions' Kafka timestamps: {peer_rate['docs_per_s']:,.0f} docs/s")
        result["peer"] = {**peer_rate, "summary": summary, **peer_memory(client, basename)}

        if truth is not None:
            say("(4) scores")
            truth_rows = load_jsonl(str(truth))
            field, threshold = truth_measure(truth_rows)
            result["truth"] = f"{field} >= {threshold}"
            result["neardup"]["scores"] = evaluate(decisions, truth_rows, threshold, field)
            result["peer"]["scores"] = evaluate(
                load_jsonl(str(peer_file)), truth_rows, threshold, field
            )
            result["peer"]["scores_of_topic"] = evaluate(
                peer_decisions, truth_rows, threshold, field
            )
    finally:
        say("cleaning up: topics, groups and Redis keys of this run")
        run.stop()
        remove(ns.kafka, [peer_out], [peer_group])
        say(f"    {drop_keys(client, basename)} keys of the peer's index deleted")
    return result


def report(
    args: argparse.Namespace,
    corpus: Path,
    truth: Path | None,
    n: int,
    r: dict[str, Any],
    load_start: str,
    load_end: str,
) -> None:
    nd, peer = r["neardup"], r["peer"]
    s = peer["summary"]
    ratio = nd["docs_per_s"] / peer["docs_per_s"]
    nd_bytes = sum(nd["bytes"].values()) / max(nd["indexed"], 1)
    peer_bytes = sum(peer["bytes"].values()) / max(peer["indexed"], 1)

    def scores(x: dict[str, Any]) -> list[str]:
        sc = x.get("scores")
        if sc is None:
            return ["n/a"] * 4
        return [fmt(sc["precision"]), fmt(sc["recall"]), fmt(sc["f1"]), str(sc["said_duplicate"])]

    rows = [
        [
            f"neardup serve, 1 consumer (batch {args.batch_size})",
            f"{nd['decisions']:.0f}",
            f"{nd['seconds']:.2f}",
            fmt_rate(nd["docs_per_s"]),
            f"{ratio:.1f}x",
            f">= {TARGET_RATIO:.0f}x",
            "met" if ratio >= TARGET_RATIO else "NOT met",
            *scores(nd),
            f"{nd_bytes:,.0f}",
            f"{nd['indexed']:,}",
        ],
        [
            f"peer: kafka-python {s['kafka_python']} + datasketch {s['datasketch']} "
            f"MinHashLSH (Redis)",
            f"{peer['decisions']:.0f}",
            f"{peer['seconds']:.2f}",
            fmt_rate(peer["docs_per_s"]),
            "1.0x",
            "",
            "",
            *scores(peer),
            f"{peer_bytes:,.0f}",
            f"{peer['indexed']:,}",
        ],
    ]
    print()
    print(
        f"## neardup serve vs kafka-python + datasketch MinHashLSH on {corpus.name}: {n} "
        f"records{' (--limit)' if args.limit else ''}, one consumer each, same Kafka and Redis"
    )
    print()
    print(
        markdown(
            [
                "pipeline",
                "decisions",
                "drain s",
                "docs/s",
                "vs peer",
                "target",
                "verdict",
                "precision",
                "recall",
                "F1",
                "said dup",
                "Redis bytes/indexed doc",
                "indexed",
            ],
            rows,
            "lrrrrllrrrrrr",
        )
    )
    print()
    true_dups = (nd.get("scores") or {}).get("true_duplicates")
    if truth is not None:
        print(
            f"scores: detector.evaluate against {truth.name} ({r['truth']}: "
            f"{true_dups} true duplicates); 'duplicate' decisions are the positives; "
            f"duplicate_of not an earlier record: neardup "
            f"{nd['scores']['duplicate_of_not_earlier']}, peer "
            f"{peer['scores']['duplicate_of_not_earlier']}"
        )
    print(
        "drain docs/s: decisions over the span from the first decision's Kafka timestamp to "
        f"the last's, on a backlog in {r['partitions']} partition(s) of {r['topic']}; the peer's "
        f"own clock: {fmt_rate(s['docs_per_s'])} docs/s over {s['seconds']:.2f} s, "
        f"{s['start_to_last_s']:.2f} s from its start to its last decision, {s['batches']} "
        "poll batches"
    )
    print(
        "neardup Redis bytes by key family (per indexed doc): "
        + ", ".join(f"{k} {v / max(nd['indexed'], 1):,.0f}" for k, v in sorted(nd["bytes"].items()))
        + f"; serve {' '.join(nd['serve_args'])}"
    )
    print(
        "peer Redis bytes (per indexed doc): "
        + ", ".join(f"{k} {v / max(peer['indexed'], 1):,.0f}" for k, v in peer["bytes"].items())
        + f"; {peer['keys']:,} keys; MinHashLSH threshold {s['threshold']}, num_perm "
        f"{s['num_perm']}, {s['bands']} bands of {s['rows']} rows; redis-py {s['redis_py']}, "
        f"numpy {s['numpy']}"
    )
    footer(load_start, load_end)


if __name__ == "__main__":
    sys.exit(main())
