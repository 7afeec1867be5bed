#!/usr/bin/env python3
"""neardup against the peer baseline (PyPI simhash), and fingerprinting alone on one core.

    python bench/detect_vs_peer.py [--corpus PATH] [--truth PATH] [--limit N]

In one go on the dev stream:
  (a) `python -m detector detect CORPUS -o TMP --no-progress` as a subprocess: wall time
      around it (interpreter start-up and imports included), and its own summary; then
      the pipeline alone, timed in process around `run()` (no start-up, no imports),
      best of --repeat runs in a fresh interpreter;
  (b) the peer: bench/peer/setup.sh (a venv with simhash and numpy<2), then
      bench/peer/run_simhash.py, which times its own loop (reading and parsing excluded);
  (c) normalize + features + SimHash alone, in batches of 512, pinned to one CPU with the
      BLAS/OpenMP thread counts set to 1 before numpy is imported, best of --repeat.
Then precision/recall of both against the truth file (neardup: `neardup eval --json`;
the peer: bench/peer/score.py) and a table with the targets beside the figures.
The machine is shared: the load average is printed at the start and the end.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import (
    BENCH,
    Code,
    child_env,
    fmt,
    fmt_rate,
    last_json,
    load,
    markdown,
    parse_summary,
    prepare_inputs,
    resolve_corpus,
    resolve_truth,
    run,
    snapshot_code,
    work_tree_changed,
    worker,
)

TARGET_RATIO = 20.0  # end to end, neardup docs/s over the peer's
TARGET_FINGERPRINT = 10_000.0  # docs/s on one core
ONE_THREAD = {
    k: "1"
    for k in (
        "OPENBLAS_NUM_THREADS",
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "NUMEXPR_NUM_THREADS",
        "VECLIB_MAXIMUM_THREADS",
    )
}


def idlest_cpu(sample: float = 0.5) -> int:
    """The allowed CPU with the most idle time over a short sample of /proc/stat."""
    allowed = sorted(os.sched_getaffinity(0))

    def idle() -> dict[int, tuple[int, int]]:
        out = {}
        with open("/proc/stat") as f:
            for line in f:
                name, *fields = line.split()
                if name.startswith("cpu") and name != "cpu":
                    values = [int(x) for x in fields]
                    out[int(name[3:])] = (values[3] + values[4], sum(values))
        return out

    try:
        a = idle()
        time.sleep(sample)
        b = idle()
    except OSError:
        return allowed[-1]

    def idle_share(c: int) -> float:
        return (b[c][0] - a[c][0]) / max(b[c][1] - a[c][1], 1)

    return max(allowed, key=lambda c: (idle_share(c), c))


def neardup_scores(decisions: Path, truth: Path) -> dict[str, Any]:
    rc, out, err, _ = run(
        [sys.executable, "-m", "detector", "eval", str(decisions), str(truth), "--json"],
        timeout=600,
    )
    if rc != 0:
        raise RuntimeError(f"neardup eval failed: {err.strip()[-1000:]}")
    return last_json(out)


def peer_scores(decisions: Path, truth: Path) -> dict[str, Any]:
    rc, out, err, _ = run(
        [sys.executable, str(BENCH / "peer" / "score.py"), str(decisions), str(truth), "--json"],
        timeout=600,
    )
    if rc != 0:
        raise RuntimeError(f"peer score.py failed: {err.strip()[-1000:]}")
    return last_json(out)


def run_detect(corpus: Path, out: Path, extra: list[str]) -> dict[str, Any]:
    cmd = [
        sys.executable,
        "-m",
        "detector",
        "detect",
        str(corpus),
        "-o",
        str(out),
        "--no-progress",
        *extra,
    ]
    rc, _, err, wall = run(cmd, timeout=3600)
    if rc != 0:
        raise RuntimeError(f"neardup detect failed ({rc}): {err.strip()[-2000:]}")
    return {"wall_s": wall, "summary": parse_summary(err), "stderr": err.strip()}


def detect_has_workers() -> bool:
    rc, out, _, _ = run([sys.executable, "-m", "detector", "detect", "--help"], timeout=120)
    return rc == 0 and "--workers" in out


def run_peer(corpus: Path, out: Path) -> dict[str, Any]:
    rc, stdout, err, wall = run(
        ["bash", str(BENCH / "peer" / "setup.sh")], timeout=1800, env=dict(os.environ)
    )
    if rc != 0 or not stdout.strip():
        raise RuntimeError(f"bench/peer/setup.sh failed ({rc}): {err.strip()[-2000:]}")
    python = stdout.strip().splitlines()[-1]
    peer_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    rc, stdout, err, wall = run(
        [python, str(BENCH / "peer" / "run_simhash.py"), str(corpus), "--out", str(out)],
        timeout=7200,
        env=peer_env,
    )
    if rc != 0:
        raise RuntimeError(f"peer run_simhash.py failed ({rc}): {err.strip()[-2000:]}")
    result = last_json(stdout)
    result["wall_s"] = wall
    if err.strip():
        result["stderr"] = err.strip()[-500:]
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", help="JSONL(.gz) stream (default: the shared dev stream)")
    ap.add_argument(
        "--truth", help="truth JSONL(.gz) (default: the dev truth, with the dev stream)"
    )
    ap.add_argument("--limit", type=int, help="only the first N records")
    ap.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="runs of the in-process measurements, best kept (default: 3)",
    )
    ap.add_argument(
        "--cpu",
        type=int,
        help="CPU for the one-core fingerprint measurement "
        "(default: the idlest allowed CPU over half a second)",
    )
    ap.add_argument(
        "--detect-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="extra argument for `neardup detect`, in both of its measurements "
        "(repeatable; e.g. --detect-arg=--workers=0)",
    )
    ap.add_argument("--skip-peer", action="store_true", help="do not run the peer")
    ap.add_argument(
        "--no-snapshot",
        action="store_true",
        help="measure the work tree's detector/ as it is at each step, instead "
        "of a snapshot taken at the start",
    )
    ap.add_argument("--json", help="also write all the raw figures to this JSON file")
    args = ap.parse_args(argv)

    corpus_arg = resolve_corpus(args.corpus)
    truth_arg = resolve_truth(args.truth, corpus_arg)
    load_start = load()
    print(f"load at start: {load_start}", flush=True)
    raw: dict[str, Any] = {"load_start": load_start}
    with tempfile.TemporaryDirectory(prefix="neardup-bench-") as tmpdir:
        tmp = Path(tmpdir)
        corpus, truth, n = prepare_inputs(corpus_arg, truth_arg, args.limit, tmp)
        if not args.no_snapshot:
            snapshot_code(tmp, corpus)
        print(f"detector code measured: {Code.state}", flush=True)
        print(f"corpus: {corpus_arg} ({n} records{', first ' + str(n) if args.limit else ''})")
        print(f"truth:  {truth_arg or 'none'}", flush=True)

        # (a) neardup end to end, then the pipeline alone in process.
        decisions = tmp / "neardup.jsonl"
        print("(a) neardup detect (subprocess) ...", flush=True)
        detect = run_detect(corpus, decisions, args.detect_arg)
        raw["detect"] = detect
        print(
            f"    {detect['stderr'].splitlines()[-1]}  [wall {detect['wall_s']:.2f} s]", flush=True
        )
        print(f"(a) pipeline in process, best of {args.repeat} ...", flush=True)
        pipe = worker(
            "pipeline",
            {
                "corpus": str(corpus),
                "out": str(tmp / "pipeline.jsonl"),
                "repeat": args.repeat,
                "extra": args.detect_arg,
            },
            timeout=7200,
        )
        raw["pipeline"] = pipe
        pipe_runs = [r["run_s"] for r in pipe["runs"]]
        print(
            "    run(): "
            + ", ".join(f"{s:.2f} s" for s in pipe_runs)
            + "; whole main(): "
            + ", ".join(f"{r['main_s']:.2f} s" for r in pipe["runs"])
            + f"  (imports before: {pipe['imports_s']:.2f} s)",
            flush=True,
        )
        # With worker processes (detect's --workers), run() uses more than one core; the
        # single-process figure is the like-for-like one against the single-threaded peer.
        single: dict[str, Any] | None = None
        if not any(a.startswith("--workers") for a in args.detect_arg) and detect_has_workers():
            print(
                f"(a) pipeline in process with --workers 0 (one process), best of "
                f"{args.repeat} ...",
                flush=True,
            )
            single = worker(
                "pipeline",
                {
                    "corpus": str(corpus),
                    "out": str(tmp / "pipeline.jsonl"),
                    "repeat": args.repeat,
                    "extra": [*args.detect_arg, "--workers", "0"],
                },
                timeout=7200,
            )
            raw["pipeline_workers0"] = single
            print(
                "    run(): " + ", ".join(f"{r['run_s']:.2f} s" for r in single["runs"]), flush=True
            )

        # (b) the peer.
        peer: dict[str, Any] | None = None
        peer_decisions = tmp / "peer.jsonl"
        if not args.skip_peer:
            print("(b) peer: bench/peer/setup.sh + run_simhash.py ...", flush=True)
            try:
                peer = run_peer(corpus, peer_decisions)
                print(
                    f"    simhash {peer['version']}: {peer['docs']} docs in "
                    f"{peer['seconds']:.2f} s (loop), wall {peer['wall_s']:.2f} s",
                    flush=True,
                )
            except RuntimeError as exc:
                print(f"    peer unavailable: {exc}", flush=True)
            raw["peer"] = peer

        # (c) fingerprinting alone on one core.
        cpu = args.cpu if args.cpu is not None else idlest_cpu()
        print(
            f"(c) fingerprinting on CPU {cpu}, batches of 512, best of {args.repeat} ...",
            flush=True,
        )
        fp = worker(
            "fingerprint",
            {"corpus": str(corpus), "cpu": cpu, "repeat": args.repeat},
            timeout=7200,
            env=child_env(**ONE_THREAD),
        )
        raw["fingerprint"] = fp
        print(
            "    Engine.fingerprint: "
            + ", ".join(f"{s:.2f} s" for s in fp["engine_runs_s"])
            + "; normalize+features+simhash: "
            + ", ".join(f"{r['total']:.2f} s" for r in fp["bare_runs"]),
            flush=True,
        )

        # Scores.
        scores: dict[str, Any] = {}
        if truth is not None:
            scores["neardup"] = neardup_scores(decisions, truth)
            scores["neardup_by_peer_script"] = peer_scores(decisions, truth)
            if peer is not None:
                scores["peer"] = peer_scores(peer_decisions, truth)
        raw["scores"] = scores
    load_end = load()
    raw["load_end"] = load_end

    # The table.
    docs = n
    e2e_rate = docs / detect["wall_s"]
    summary = detect["summary"]
    summary_rate = summary["rate"] if summary else None
    best_run = min(pipe_runs)
    pipe_rate = docs / best_run
    peer_rate = peer["docs_per_s"] if peer else None
    fp_docs = fp["docs"]
    fp_engine = fp_docs / min(fp["engine_runs_s"])
    best_bare = min(fp["bare_runs"], key=lambda r: r["total"])
    fp_bare = fp_docs / best_bare["total"]

    def ratio(x: float) -> str:
        return "n/a" if not peer_rate else f"{x / peer_rate:.1f}x"

    def verdict(ok: bool | None) -> str:
        return "n/a" if ok is None else ("met" if ok else "NOT met")

    rows = [
        [
            "neardup detect, end to end (subprocess wall, incl. start-up)",
            f"{detect['wall_s']:.2f}",
            fmt_rate(e2e_rate),
            ratio(e2e_rate),
            f">= {TARGET_RATIO:.0f}x peer",
            verdict(e2e_rate / peer_rate >= TARGET_RATIO if peer_rate else None),
        ],
        [
            "neardup detect, its own summary (run() in the CLI)",
            f"{summary['seconds']:.1f}" if summary else "n/a",
            fmt_rate(summary_rate),
            ratio(summary_rate) if summary_rate else "n/a",
            "",
            "",
        ],
        [
            f"neardup pipeline only, run() in process (best of {len(pipe_runs)})",
            f"{best_run:.2f}",
            fmt_rate(pipe_rate),
            ratio(pipe_rate),
            f">= {TARGET_RATIO:.0f}x peer",
            verdict(pipe_rate / peer_rate >= TARGET_RATIO if peer_rate else None),
        ],
    ]
    if single is not None:
        best_single = min(r["run_s"] for r in single["runs"])
        rate = docs / best_single
        rows.append(
            [
                f"neardup pipeline only, --workers 0: one process (best of {len(single['runs'])})",
                f"{best_single:.2f}",
                fmt_rate(rate),
                ratio(rate),
                f">= {TARGET_RATIO:.0f}x peer",
                verdict(rate / peer_rate >= TARGET_RATIO if peer_rate else None),
            ]
        )
    rows += [
        [
            "peer: simhash (PyPI) + SimhashIndex k=3, its timed loop",
            f"{peer['seconds']:.2f}" if peer else "n/a",
            fmt_rate(peer_rate),
            "1.0x" if peer else "n/a",
            "",
            "",
        ],
        [
            f"fingerprint: Engine.fingerprint, 1 core (CPU {cpu}, "
            f"best of {len(fp['engine_runs_s'])})",
            f"{min(fp['engine_runs_s']):.2f}",
            fmt_rate(fp_engine),
            "",
            f">= {TARGET_FINGERPRINT:,.0f}/s",
            verdict(fp_engine >= TARGET_FINGERPRINT),
        ],
        [
            f"fingerprint: normalize+features+simhash, 1 core (best of {len(fp['bare_runs'])})",
            f"{best_bare['total']:.2f}",
            fmt_rate(fp_bare),
            "",
            f">= {TARGET_FINGERPRINT:,.0f}/s",
            verdict(fp_bare >= TARGET_FINGERPRINT),
        ],
    ]
    print()
    print(
        f"## neardup vs peer on {corpus_arg.name}: {docs} records, {fp['text_mb']:.1f} MB of text"
    )
    print()
    print(
        markdown(
            ["measurement", "seconds", "docs/s", "vs peer", "target", "verdict"], rows, "lrrrll"
        )
    )
    print()
    print(
        f"fingerprint stages (best bare run, CPU {cpu}): normalize "
        f"{best_bare['normalize']:.2f} s, features {best_bare['features']:.2f} s, simhash "
        f"{best_bare['simhash']:.2f} s; Engine.fingerprint adds what else the pipeline asks "
        "of it (exact-copy digests, Print objects, now the literal pass's shingle sets) "
        f"({min(fp['engine_runs_s']) - best_bare['total']:+.2f} s); the tokenizer's "
        f"char-class table, built once per process, took {fp['char_table_s']:.2f} s "
        "(not in these figures)"
    )
    best_main = min(r["main_s"] for r in pipe["runs"])
    print(
        f"pipeline in process: the imports took {pipe['imports_s']:.2f} s; the whole "
        f"main() call (adds building the Detector and opening files) best {best_main:.2f} s "
        f"= {docs / best_main:,.0f} docs/s; end-to-end wall minus best run() = "
        f"{detect['wall_s'] - best_run:.2f} s (start-up, imports, set-up, run-to-run noise)"
    )
    if single is not None:
        print(
            "the first three neardup rows run detect with its defaults, which include "
            "--workers (parsing and fingerprinting in forked processes ahead of the "
            "decisions): they may use both cores; the --workers 0 row uses one process, "
            "like the peer"
        )
    if args.detect_arg:
        print(f"neardup detect extra arguments: {' '.join(args.detect_arg)}")

    if scores:
        print()
        srows = []
        for label, key in (
            ("neardup (neardup eval)", "neardup"),
            ("neardup (bench/peer/score.py)", "neardup_by_peer_script"),
            ("peer (bench/peer/score.py)", "peer"),
        ):
            s = scores.get(key)
            if s is None:
                continue
            bad = s.get("duplicate_of_not_earlier", s.get("links_not_to_earlier_record"))
            srows.append(
                [
                    label,
                    fmt(s["precision"]),
                    fmt(s["recall"]),
                    fmt(s["f1"]),
                    str(s["said_duplicate"]),
                    str(s["true_duplicates"]),
                    str(bad),
                ]
            )
        print(
            f"## precision/recall against {truth_arg.name if truth_arg else ''} "
            "(a record is a duplicate when max_jaccard_earlier >= 0.8)"
        )
        print()
        print(
            markdown(
                [
                    "detector",
                    "precision",
                    "recall",
                    "F1",
                    "said dup",
                    "true dup",
                    "link not earlier",
                ],
                srows,
            )
        )
        if "peer" in scores and scores["peer"].get("recall_by_kind"):
            print()
            print(
                "recall by kind: neardup "
                + json.dumps(scores["neardup_by_peer_script"]["recall_by_kind"])
                + "; peer "
                + json.dumps(scores["peer"]["recall_by_kind"])
            )
    print()
    print(f"load at start: {load_start}")
    print(f"load at end:   {load_end}")
    print(f"detector code measured: {Code.state}")
    changed = work_tree_changed()
    if changed:
        print(f"note: {changed}; these figures are of the snapshot above")
    if args.json:
        Path(args.json).write_text(json.dumps(raw, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
