#!/usr/bin/env python3
"""The floor of any kafka-python consumer on this stack, beside one `neardup serve`: the
drain rate of a consumer that does nothing but Kafka I/O, and serve's, in one run on the
same backlog. It prints figures; it asserts nothing.

    bash ops/stack.sh up; eval "$(bash ops/stack.sh env)"; export NEARDUP_KERNELS=native
    .venv/bin/python bench/floor.py [--corpus PATH] [--limit N] [--rounds R]

The floor consumer, in its own process, polls a batch, parses each record (json.loads),
sends one decision-sized JSON (the fields and about the bytes of a neardup decision) keyed
by the record's id, flushes, checks every send and commits the batch's offsets: no
fingerprint, no index. It reads and writes with the options serve's own KafkaSource and
KafkaSink are made with (consumer_options, producer_options), so a setting changed there
moves both figures.

Each measurement gets fresh topics (the backlog produced to its own input topic, as
`neardup bench` does, --partitions of them), its own group and output topic; a collector
in this process reads the output read_committed, and the rate is counted from the first
output record's Kafka timestamp to the last (start-up and the group join do not count).
Floor and serve alternate, the order flipping every round, since the machine is shared:
compare the figures of one run, never across runs. Also printed: the output topic's size
on the broker (bytes on the wire, compression included) and the mean decision's JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import (
    Code,
    footer,
    keyed_records,
    load,
    markdown,
    prepare_inputs,
    resolve_corpus,
    run_snapshot,
    stack_settings,
)

KINDS = ("floor", "serve", "adapters")


def say(msg: str) -> None:
    print(f"[floor] {msg}", file=sys.stderr, flush=True)


def consume(spec: dict[str, Any]) -> None:
    """The floor consumer (its own process; ends when terminated)."""
    import zlib
    from datetime import UTC, datetime

    from kafka import KafkaConsumer, KafkaProducer
    from kafka.structs import OffsetAndMetadata

    from detector.stream.kafka import TopicLimits, consumer_options, producer_options

    kafka = stack_settings(spec["batch_size"]).kafka
    out = spec["output"]
    consumer = KafkaConsumer(**consumer_options(kafka, spec["group"], spec["batch_size"]))
    consumer.subscribe([spec["input"]])
    producer = KafkaProducer(**producer_options(kafka, TopicLimits(kafka, [out])))
    while True:
        polled = consumer.poll(timeout_ms=500, max_records=spec["batch_size"])
        if not polled:
            continue
        futures, offsets = [], {}
        for tp, records in polled.items():
            for r in records:
                doc = json.loads(r.value)
                value = {
                    "id": doc["id"],
                    "decision": "unique",
                    "duplicate_of": None,
                    "distance": None,
                    "similarity": None,
                    "fingerprint": f"{zlib.crc32(r.value):016x}",
                    "exact": False,
                    "evidence": "fingerprint",
                    "topic": r.topic,
                    "partition": r.partition,
                    "offset": r.offset,
                    "features": "words-cjk2.builtin-sqrtlen1+u14.0.0+hyperplanes-s0",
                    "index": spec["group"],
                    "detector": "0.1.0",
                    "decided_at": datetime.now(UTC).isoformat(),
                }
                futures.append(
                    producer.send(
                        out,
                        key=doc["id"].encode(),
                        value=json.dumps(value, ensure_ascii=False).encode(),
                    )
                )
            offsets[tp] = OffsetAndMetadata(records[-1].offset + 1, "", -1)
        producer.flush()
        for f in futures:
            f.get(timeout=30)  # raises what the broker refused: the floor commits nothing then
        consumer.commit(offsets)


def adapters(spec: dict[str, Any]) -> None:
    """The floor through neardup's own KafkaSource and KafkaSink (Decision objects, the
    sink's encoding and checks, the source's offsets): what serve spends on Kafka I/O
    without deciding anything (its own process; ends when terminated)."""
    import zlib

    from detector.records import Decision
    from detector.stream.kafka import KafkaSink, KafkaSource, TopicLimits

    kafka = stack_settings(spec["batch_size"]).kafka
    dlq = spec["input"] + ".dlq"
    source = KafkaSource(kafka, spec["input"], spec["group"], spec["batch_size"])
    sink = KafkaSink(kafka, spec["output"], dlq, limits=TopicLimits(kafka, [spec["output"], dlq]))
    while True:
        records, offsets = source.poll()
        if not records:
            continue
        decisions, headers = [], []
        for raw, where in records:
            doc = json.loads(raw)
            decisions.append(
                Decision(
                    doc["id"],
                    None,
                    zlib.crc32(raw),
                    evidence="fingerprint",
                    features="words-cjk2.builtin-sqrtlen1+u14.0.0+hyperplanes-s0",
                    namespace=spec["group"],
                    detector="0.1.0",
                    origin={k: where[k] for k in ("topic", "partition", "offset")},
                )
            )
            headers.append(where.get("headers"))
        sink.decisions(decisions, headers)
        sink.flush()
        source.commit(offsets)


def collect(kafka: Any, topic: str, expected: int, timeout: float) -> dict[str, float]:
    from detector.bench import read_decisions

    stamps, sizes = [], []
    for d, ts in read_decisions(kafka, topic, expected, timeout):
        stamps.append(ts)
        sizes.append(len(json.dumps(d, ensure_ascii=False).encode()))
    seconds = (max(stamps) - min(stamps)) / 1000 if stamps else 0.0
    return {
        "outputs": float(len(stamps)),
        "seconds": seconds,
        "docs_per_s": len(stamps) / seconds if seconds > 0 else float("nan"),
        "value_bytes": statistics.fmean(sizes) if sizes else float("nan"),
    }


def topic_bytes(kafka: Any, topic: str) -> int | None:
    """The topic's size in the broker's log dirs (what was sent, as sent: compressed or
    not), or None when the broker does not say."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(**kafka.common())
    try:
        total, seen = 0, False
        for broker in admin.describe_log_dirs([topic]):
            for log_dir in broker.get("log_dirs", []):
                for t in log_dir.get("topics", []):
                    if t.get("name") == topic:
                        for p in t.get("partitions", []):
                            total += int(p.get("partition_size", 0))
                            seen = True
        return total if seen else None
    except Exception:  # an old broker or a missing ACL: the size is only informative
        return None
    finally:
        admin.close()


def measure(
    kind: str, ns: Any, args: argparse.Namespace, records: list[tuple[str, bytes]]
) -> dict[str, Any]:
    from detector.bench import Run, send_all

    run = Run(ns, partitions=args.partitions)
    try:
        send_all(run, records)
        if kind == "serve":
            run.start(1, args.serve_arg)
        else:  # floor, adapters
            spec = {
                "kind": kind,
                "input": run.input,
                "output": run.output,
                "group": run.group,
                "batch_size": args.batch_size,
            }
            env = {**os.environ, **ns.kafka.env()}
            cmd = [sys.executable, str(Path(__file__).resolve()), "--consume", json.dumps(spec)]
            run.procs.append(subprocess.Popen(cmd, env=env))
        got = collect(ns.kafka, run.output, len(records), args.timeout)
        time.sleep(1)  # the last segment's size settles once the producer's last ack is in
        got["topic_bytes"] = topic_bytes(ns.kafka, run.output)
        return got
    finally:
        run.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", help="JSONL(.gz) stream (default: the shared dev stream)")
    ap.add_argument("--limit", type=int, default=20_000, help="first N records (20,000)")
    ap.add_argument(
        "--copies",
        type=int,
        default=1,
        help="the records this many times, the copies' ids suffixed #2, #3...: a longer "
        "drain for the Kafka-only consumers (serve decides each copy an exact duplicate)",
    )
    ap.add_argument("--rounds", type=int, default=2, help="floor/serve pairs (default: 2)")
    ap.add_argument(
        "--partitions", type=int, default=2, help="input partitions (2, as neardup bench)"
    )
    ap.add_argument("--batch-size", type=int, default=256, help="serve's --batch-size (256)")
    ap.add_argument(
        "--serve-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="extra argument for `neardup serve` (repeatable; e.g. --serve-arg=--prefetch)",
    )
    ap.add_argument(
        "--kinds",
        nargs="+",
        choices=KINDS,
        default=["floor", "serve"],
        help="what to measure, in this order in odd rounds (default: floor serve); "
        "adapters: the floor through neardup's KafkaSource and KafkaSink, deciding nothing",
    )
    ap.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        help="seconds without an output record before a drain is given up (300)",
    )
    ap.add_argument(
        "--no-snapshot",
        action="store_true",
        help="run the work tree's detector/ instead of a snapshot taken at the start",
    )
    ap.add_argument("--json", help="also write the raw figures to this JSON file")
    ap.add_argument("--consume", help=argparse.SUPPRESS)  # the floor consumer's process
    args = ap.parse_args(argv)
    if args.consume:
        spec = json.loads(args.consume)
        (adapters if spec["kind"] == "adapters" else consume)(spec)
        return 0

    corpus_arg = resolve_corpus(args.corpus)
    load_start = load()
    say(f"load at start: {load_start}")
    kinds = args.kinds
    rounds: list[dict[str, dict[str, Any]]] = []
    with tempfile.TemporaryDirectory(prefix="neardup-floor-") as tmpdir:
        tmp = Path(tmpdir)
        corpus, _, n = prepare_inputs(corpus_arg, None, args.limit, tmp)
        if not args.no_snapshot:
            say("snapshot of detector/ ...")
            run_snapshot(tmp, corpus)  # this process, its consumers and serve run the copy
        say(f"detector code measured: {Code.state}")
        ns = stack_settings(args.batch_size)
        records = keyed_records(corpus)
        records += [
            (f"{i}#{c}", json.dumps({**json.loads(raw), "id": f"{i}#{c}"}).encode())
            for c in range(2, args.copies + 1)
            for i, raw in records
        ]
        say(f"{len(records)} records from {corpus_arg}; Kafka {ns.kafka.bootstrap_servers}")
        for r in range(args.rounds):
            got: dict[str, dict[str, Any]] = {}
            for kind in kinds if r % 2 == 0 else kinds[::-1]:
                got[kind] = measure(kind, ns, args, records)
                say(
                    f"round {r + 1}, {kind}: {got[kind]['outputs']:.0f} outputs in "
                    f"{got[kind]['seconds']:.2f} s, {got[kind]['docs_per_s']:,.0f} docs/s"
                )
            rounds.append(got)
    load_end = load()
    report(args, corpus_arg, n, kinds, rounds)
    footer(load_start, load_end)
    if args.json:
        raw = {"load_start": load_start, "load_end": load_end, "rounds": rounds}
        Path(args.json).write_text(json.dumps(raw, indent=1))
    return 0


def report(
    args: argparse.Namespace,
    corpus: Path,
    n: int,
    kinds: list[str],
    rounds: list[dict[str, dict[str, Any]]],
) -> None:
    rows = []
    for i, got in enumerate(rounds, 1):
        for kind in kinds:
            g = got[kind]
            size = g["topic_bytes"]
            rows.append(
                [
                    str(i),
                    kind,
                    f"{g['outputs']:.0f}",
                    f"{g['seconds']:.2f}",
                    f"{g['docs_per_s']:,.0f}",
                    f"{g['value_bytes']:.0f}",
                    "n/a" if size is None else f"{size:,}",
                ]
            )
        if "serve" in kinds and "floor" in kinds:
            ratio = got["serve"]["docs_per_s"] / got["floor"]["docs_per_s"]
            rows.append(["", "serve/floor", "", "", f"{ratio:.2f}", "", ""])
    print()
    print(
        f"## floor vs neardup serve on {corpus.name}: {n} records"
        + (f" x {args.copies}" if args.copies > 1 else "")
        + f", {args.partitions} input "
        f"partition(s), batch {args.batch_size}, one consumer each"
        + (f", serve {' '.join(args.serve_arg)}" if args.serve_arg else "")
    )
    print()
    print(
        markdown(
            ["round", "consumer", "outputs", "seconds", "docs/s", "JSON bytes", "topic bytes"],
            rows,
            "llrrrrr",
        )
    )
    rates = {k: statistics.median(g[k]["docs_per_s"] for g in rounds) for k in kinds}
    print()
    for k in kinds:
        print(f"median {k}: {rates[k]:,.0f} docs/s")
    for k in kinds:
        if k not in ("floor", "serve") and "floor" in kinds:
            print(f"{k}/floor (medians): {rates[k] / rates['floor']:.2f}")
    if "serve" in kinds and "floor" in kinds:
        print(f"serve/floor (medians): {rates['serve'] / rates['floor']:.2f} (target >= 0.8)")


if __name__ == "__main__":
    sys.exit(main())
