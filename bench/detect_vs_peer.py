#!/usr/bin/env python3
"""neardup against the peer baseline (PyPI simhash), native and numpy kernels side by side.

    python bench/detect_vs_peer.py [--corpus PATH] [--truth PATH] [--limit N] [--repeat R]

On the first --limit records (default 3,000; 0: all) of the dev stream, each measurement
for both text kernels of the engine (`--kernels native`, then `--kernels numpy`, one
after the other so that both see about the same load):
  (a)  `python -m detector detect CORPUS -o TMP --no-progress --kernels K` as a
       subprocess: wall time around it (interpreter start-up and imports included), and
       its own summary (whose "; K kernels" ending is checked);
  (a') the pipeline alone, timed in process around `run()` (no start-up, no imports),
       best of --repeat runs in a fresh interpreter, with --kernels K;
  (c)  fingerprinting alone, in batches of 512, pinned to one CPU with the BLAS/OpenMP
       thread counts set to 1 before numpy is imported, best of --repeat, for an
       Engine(kernels=K): Engine.fingerprint, and the "bare" path, normalize then
       engine.kernels.prints(texts) (fingerprints, digests, shingle sets), timed apart;
and once:
  (b)  the peer: bench/peer/setup.sh (a venv with simhash and numpy<2), then
       bench/peer/run_simhash.py, which times its own loop (reading and parsing excluded).
With --profile, one more `detect --profile` a kernel prints where the time goes.
Then the two kernels' decision files are compared field by field (all but decided_at),
precision/recall of both and of the peer against the truth file (neardup: `neardup eval
--json`; also bench/peer/score.py) and a table with the targets beside the figures:
end to end (process start included) >= 30x the peer; in one process (run()) >= 15,000
docs/s; fingerprinting alone >= 40,000 docs/s on one core. The native/numpy speed-up of
each measurement is printed under the table.
The machine is shared: the load average is printed at the start and the end.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import (
    BENCH,
    ROOT,
    Code,
    child_env,
    fmt,
    fmt_rate,
    footer,
    last_json,
    load,
    markdown,
    parse_summary,
    prepare_inputs,
    resolve_corpus,
    resolve_truth,
    run,
    snapshot_code,
    worker,
)

KERNELS = ("native", "numpy")  # measured in this order
DEFAULT_LIMIT = 3000
TARGET_RATIO = 30.0  # end to end (process start included), neardup docs/s over the peer's
TARGET_RUN = 15_000.0  # docs/s of run() in one process
TARGET_FINGERPRINT = 40_000.0  # docs/s of fingerprinting alone on one core
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
_KERNELS_RAN = re.compile(r"; (\w+) kernels\s*$")


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
    lines = err.strip().splitlines()
    m = _KERNELS_RAN.search(lines[-1]) if lines else None
    return {
        "wall_s": wall,
        "summary": parse_summary(err),
        "kernels": m[1] if m else None,
        "stderr": err.strip(),
    }


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


def compare_decisions(a: Path, b: Path) -> dict[str, Any]:
    """Two decision files, record by record, every field but decided_at."""

    def read(path: Path) -> list[dict[str, Any]]:
        out = []
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    d = json.loads(line)
                    d.pop("decided_at", None)
                    out.append(d)
        return out

    left, right = read(a), read(b)
    differing = []
    for i, (x, y) in enumerate(zip(left, right, strict=False)):
        if x != y:
            fields = sorted(k for k in x.keys() | y.keys() if x.get(k) != y.get(k))
            differing.append({"line": i + 1, "id": x.get("id"), "fields": fields})
    return {
        "identical": len(left) == len(right) and not differing,
        "records": [len(left), len(right)],
        "differing": len(differing),
        "examples": differing[:5],
    }


def native_module() -> dict[str, Any] | None:
    """The built native module measured (detector/_native*.so of the code measured), and
    whether the Rust sources in the work tree are newer than it."""
    found = sorted((Code.dir / "detector").glob("_native*.so")) + sorted(
        (Code.dir / "detector").glob("_native*.pyd")
    )
    if not found:
        return None
    so = found[0]
    built = so.stat().st_mtime
    sources = [
        p
        for p in (ROOT / "native").rglob("*")
        if p.is_file() and (p.suffix == ".rs" or p.name in ("Cargo.toml", "Cargo.lock"))
    ]
    newer = sorted(str(p.relative_to(ROOT)) for p in sources if p.stat().st_mtime > built)
    return {
        "file": so.name,
        "sha1": hashlib.sha1(so.read_bytes()).hexdigest()[:10],
        "built": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(built)),
        "sources_newer": newer,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", help="JSONL(.gz) stream (default: the shared dev stream)")
    ap.add_argument(
        "--truth", help="truth JSONL(.gz) (default: the dev truth, with the dev stream)"
    )
    ap.add_argument(
        "--limit",
        type=int,
        default=DEFAULT_LIMIT,
        help=f"only the first N records (default: {DEFAULT_LIMIT:,}; 0: all of them)",
    )
    ap.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="runs of the in-process measurements, best kept (default: 3)",
    )
    ap.add_argument(
        "--cpu",
        type=int,
        help="CPU for the one-core fingerprint measurements "
        "(default: the idlest allowed CPU over half a second)",
    )
    ap.add_argument(
        "--detect-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="extra argument for `neardup detect`, in both of its measurements, for both "
        "kernels (repeatable; e.g. --detect-arg=--workers=2; not --kernels)",
    )
    ap.add_argument("--skip-peer", action="store_true", help="do not run the peer")
    ap.add_argument(
        "--profile",
        action="store_true",
        help="also run `detect --profile` once per kernel and print where a document's "
        "time goes, by stage",
    )
    ap.add_argument(
        "--no-snapshot",
        action="store_true",
        help="measure the work tree's detector/ as it is at each step, instead "
        "of a snapshot taken at the start",
    )
    ap.add_argument("--json", help="also write all the raw figures to this JSON file")
    args = ap.parse_args(argv)
    if any(a.startswith("--kernels") for a in args.detect_arg):
        ap.error("--detect-arg cannot set --kernels: both kernels are measured")
    if args.limit < 0 or args.repeat < 1:
        ap.error("--limit must be >= 0 and --repeat >= 1")
    limit = args.limit or None

    corpus_arg = resolve_corpus(args.corpus)
    truth_arg = resolve_truth(args.truth, corpus_arg)
    load_start = load()
    print(f"load at start: {load_start}", flush=True)
    raw: dict[str, Any] = {"load_start": load_start, "limit": limit, "repeat": args.repeat}
    per: dict[str, dict[str, Any]] = {k: {} for k in KERNELS}
    raw["kernels"] = per
    with tempfile.TemporaryDirectory(prefix="neardup-bench-") as tmpdir:
        tmp = Path(tmpdir)
        corpus, truth, n = prepare_inputs(corpus_arg, truth_arg, limit, tmp)
        if not args.no_snapshot:
            snapshot_code(tmp, corpus)
        print(f"detector code measured: {Code.state}", flush=True)
        native = native_module()
        raw["native_module"] = native
        if native:
            print(
                f"native module: {native['file']}, sha1 {native['sha1']}, built {native['built']}",
                flush=True,
            )
            if native["sources_newer"]:
                print(
                    "    note: newer than it in the work tree: "
                    + ", ".join(native["sources_newer"])
                    + " (the module measured is the one built)",
                    flush=True,
                )
        else:
            print("native module: not built (the native measurements will fail)", flush=True)
        print(f"corpus: {corpus_arg} ({f'first {n:,}' if limit else f'all {n:,}'} records)")
        print(f"truth:  {truth_arg or 'none'}", flush=True)

        # (a) neardup end to end, each kernel.
        for k in KERNELS:
            print(f"(a) neardup detect --kernels {k} (subprocess) ...", flush=True)
            out = tmp / f"neardup-{k}.jsonl"
            detect = run_detect(corpus, out, [*args.detect_arg, "--kernels", k])
            if detect["kernels"] != k:
                raise SystemExit(f"detect --kernels {k} reported {detect['kernels']!r} kernels")
            per[k]["detect"] = detect
            print(
                f"    {detect['stderr'].splitlines()[-1]}  [wall {detect['wall_s']:.2f} s]",
                flush=True,
            )

        if args.profile:  # apart from the timed runs, which stay as they are
            for k in KERNELS:
                out = tmp / f"profile-{k}.jsonl"
                profiled = run_detect(corpus, out, [*args.detect_arg, "--kernels", k, "--profile"])
                table = profiled["stderr"][profiled["stderr"].find("profile: ") :]
                per[k]["profile"] = table
                print(f"(profile) neardup detect --kernels {k} --profile:", flush=True)
                print(
                    "\n".join(
                        line for line in table.splitlines() if not line.startswith("neardup:")
                    ),
                    flush=True,
                )

        # (a') the pipeline alone in process, each kernel.
        for k in KERNELS:
            print(
                f"(a') pipeline in process, --kernels {k}, best of {args.repeat} ...",
                flush=True,
            )
            pipe = worker(
                "pipeline",
                {
                    "corpus": str(corpus),
                    "out": str(tmp / f"pipeline-{k}.jsonl"),
                    "repeat": args.repeat,
                    "extra": [*args.detect_arg, "--kernels", k],
                },
                timeout=7200,
            )
            ran = {r["kernels"] for r in pipe["runs"]}
            if ran != {k}:
                raise SystemExit(f"pipeline --kernels {k} reported {sorted(map(str, ran))}")
            per[k]["pipeline"] = pipe
            print(
                "    run(): "
                + ", ".join(f"{r['run_s']:.2f} s" for r in pipe["runs"])
                + "; whole main(): "
                + ", ".join(f"{r['main_s']:.2f} s" for r in pipe["runs"])
                + f"  (imports before: {pipe['imports_s']:.2f} s)",
                flush=True,
            )

        # (b) the peer, once.
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

        # (c) fingerprinting alone on one core (the same one for both kernels).
        cpu = args.cpu if args.cpu is not None else idlest_cpu()
        raw["cpu"] = cpu
        for k in KERNELS:
            print(
                f"(c) fingerprinting, kernels {k}, on CPU {cpu}, batches of 512, best of "
                f"{args.repeat} ...",
                flush=True,
            )
            fp = worker(
                "fingerprint",
                {"corpus": str(corpus), "cpu": cpu, "repeat": args.repeat, "kernels": k},
                timeout=7200,
                env=child_env(**ONE_THREAD),
            )
            if fp["kernels"] != k:
                raise SystemExit(f"Engine(kernels={k!r}) has {fp['kernels']!r} kernels")
            per[k]["fingerprint"] = fp
            print(
                "    Engine.fingerprint: "
                + ", ".join(f"{s:.2f} s" for s in fp["engine_runs_s"])
                + "; normalize + kernels.prints: "
                + ", ".join(
                    f"{r['total']:.2f} s ({r['normalize']:.2f} + {r['kernel']:.2f})"
                    for r in fp["bare_runs"]
                ),
                flush=True,
            )

        # The two kernels' decisions, compared; scores.
        same = compare_decisions(tmp / "neardup-native.jsonl", tmp / "neardup-numpy.jsonl")
        raw["decisions_compared"] = same
        scores: dict[str, Any] = {}
        if truth is not None:
            for k in KERNELS:
                scores[f"neardup_{k}"] = neardup_scores(tmp / f"neardup-{k}.jsonl", truth)
                scores[f"neardup_{k}_by_peer_script"] = peer_scores(
                    tmp / f"neardup-{k}.jsonl", truth
                )
            if peer is not None:
                scores["peer"] = peer_scores(peer_decisions, truth)
        raw["scores"] = scores
    load_end = load()
    raw["load_end"] = load_end

    # The figures.
    docs = n
    peer_rate = peer["docs_per_s"] if peer else None
    fig: dict[str, dict[str, Any]] = {}
    for k in KERNELS:
        detect, pipe, fp = per[k]["detect"], per[k]["pipeline"], per[k]["fingerprint"]
        best_run = min(r["run_s"] for r in pipe["runs"])
        best_engine = min(fp["engine_runs_s"])
        best_bare = min(fp["bare_runs"], key=lambda r: r["total"])
        fig[k] = {
            "wall_s": detect["wall_s"],
            "e2e": docs / detect["wall_s"],
            "summary": detect["summary"],
            "summary_rate": detect["summary"]["rate"] if detect["summary"] else None,
            "run_s": best_run,
            "run": docs / best_run,
            "main_s": min(r["main_s"] for r in pipe["runs"]),
            "imports_s": pipe["imports_s"],
            "engine_s": best_engine,
            "engine": fp["docs"] / best_engine,
            "bare": best_bare,
            "bare_rate": fp["docs"] / best_bare["total"],
            "fp_docs": fp["docs"],
        }
    raw["figures"] = fig

    def ratio(x: float | None) -> str:
        return "n/a" if not peer_rate or x is None else f"{x / peer_rate:.1f}x"

    def verdict(ok: bool | None) -> str:
        return "n/a" if ok is None else ("met" if ok else "NOT met")

    rows: list[list[str]] = []
    for k in KERNELS:
        f = fig[k]
        rows.append(
            [
                f"neardup detect end to end (subprocess wall, incl. start-up), {k} kernels",
                f"{f['wall_s']:.2f}",
                fmt_rate(f["e2e"]),
                ratio(f["e2e"]),
                f">= {TARGET_RATIO:.0f}x peer",
                verdict(f["e2e"] / peer_rate >= TARGET_RATIO if peer_rate else None),
            ]
        )
    for k in KERNELS:
        f = fig[k]
        rows.append(
            [
                f"neardup detect, its own summary (run() in the CLI), {k} kernels",
                f"{f['summary']['seconds']:.1f}" if f["summary"] else "n/a",
                fmt_rate(f["summary_rate"]),
                ratio(f["summary_rate"]),
                "",
                "",
            ]
        )
    for k in KERNELS:
        f = fig[k]
        rows.append(
            [
                f"neardup pipeline only, run() in process (best of {args.repeat}), {k} kernels",
                f"{f['run_s']:.2f}",
                fmt_rate(f["run"]),
                ratio(f["run"]),
                f">= {TARGET_RUN:,.0f}/s",
                verdict(f["run"] >= TARGET_RUN),
            ]
        )
    rows.append(
        [
            "peer: simhash (PyPI) + SimhashIndex k=3, its timed loop",
            f"{peer['seconds']:.2f}" if peer else "n/a",
            fmt_rate(peer_rate),
            "1.0x" if peer else "n/a",
            "",
            "",
        ]
    )
    for k in KERNELS:
        f = fig[k]
        rows.append(
            [
                f"fingerprint: Engine.fingerprint, 1 core (CPU {cpu}, best of {args.repeat}), "
                f"{k} kernels",
                f"{f['engine_s']:.2f}",
                fmt_rate(f["engine"]),
                "",
                f">= {TARGET_FINGERPRINT:,.0f}/s",
                verdict(f["engine"] >= TARGET_FINGERPRINT),
            ]
        )
    for k in KERNELS:
        f = fig[k]
        rows.append(
            [
                f"fingerprint: normalize + kernels.prints, 1 core (best of {args.repeat}), "
                f"{k} kernels",
                f"{f['bare']['total']:.2f}",
                fmt_rate(f["bare_rate"]),
                "",
                f">= {TARGET_FINGERPRINT:,.0f}/s",
                verdict(f["bare_rate"] >= TARGET_FINGERPRINT),
            ]
        )
    text_mb = per[KERNELS[0]]["fingerprint"]["text_mb"]
    print()
    print(
        f"## neardup vs peer on {corpus_arg.name}: "
        f"{'first ' if limit else ''}{docs:,} records, {text_mb:.1f} MB of text"
    )
    print()
    print(
        markdown(
            ["measurement", "seconds", "docs/s", "vs peer", "target", "verdict"], rows, "lrrrll"
        )
    )
    print()

    def speedup(key: str, sub: str | None = None) -> str:
        a, b = fig["native"][key], fig["numpy"][key]
        if sub is not None:
            a, b = a[sub], b[sub]
        return "n/a" if not a or not b else f"{a / b:.2f}x"

    def slower(key: str, sub: str | None = None) -> str:  # times: numpy's over native's
        a, b = fig["native"][key], fig["numpy"][key]
        if sub is not None:
            a, b = a[sub], b[sub]
        return "n/a" if not a or not b else f"{b / a:.2f}x"

    print(
        "native/numpy speed-up: end to end "
        + speedup("e2e")
        + ", detect's own summary "
        + speedup("summary_rate")
        + ", run() in process "
        + speedup("run")
        + ", Engine.fingerprint "
        + speedup("engine")
        + ", normalize + kernels.prints "
        + speedup("bare_rate")
        + ", kernels.prints alone "
        + slower("bare", "kernel")
    )
    for k in KERNELS:
        f = fig[k]
        us = 1e6 / f["fp_docs"]
        bare = f["bare"]
        print(
            f"fingerprint time, {k} kernels (best bare run, CPU {cpu}): normalize "
            f"{bare['normalize'] * us:.1f} µs/doc, kernel {bare['kernel'] * us:.1f} µs/doc "
            f"({bare['normalize']:.2f} s + {bare['kernel']:.2f} s); Engine.fingerprint "
            f"{f['engine_s'] * us:.1f} µs/doc ({(f['engine_s'] - bare['total']) * us:+.1f} "
            "µs/doc against the bare run: the Print objects, and run-to-run noise)"
        )
    print(
        "the tokenizer's char-class table, built once per process, took "
        + ", ".join(f"{per[k]['fingerprint']['char_table_s'] * 1e3:.0f} ms ({k})" for k in KERNELS)
        + " (not in these figures)"
    )
    for k in KERNELS:
        f = fig[k]
        print(
            f"pipeline in process, {k} kernels: the imports took {f['imports_s']:.2f} s; the "
            f"whole main() call (adds building the Detector and opening files) best "
            f"{f['main_s']:.2f} s = {docs / f['main_s']:,.0f} docs/s; end-to-end wall minus "
            f"best run() = {f['wall_s'] - f['run_s']:.2f} s (start-up, imports, set-up, "
            "run-to-run noise)"
        )
    if any(a.startswith("--workers") for a in args.detect_arg):
        print(
            "detect ran with --workers (parsing and fingerprinting in forked processes): "
            "its rows may use more than one core; the peer uses one"
        )
    if args.detect_arg:
        print(f"neardup detect extra arguments: {' '.join(args.detect_arg)}")
    print()
    if same["identical"]:
        print(
            f"decisions identical: yes (native and numpy, {same['records'][0]:,} records, "
            "every field but decided_at)"
        )
    else:
        print(
            f"decisions identical: no ({same['records'][0]:,} native, {same['records'][1]:,} "
            f"numpy records; {same['differing']:,} differ; first: "
            + "; ".join(
                f"line {e['line']} {e['id']}: {','.join(e['fields'])}" for e in same["examples"]
            )
            + ")"
        )

    if scores:
        print()
        srows = []
        labels = [
            (f"neardup, {k} kernels ({how})", f"neardup_{k}{key}")
            for how, key in (("neardup eval", ""), ("bench/peer/score.py", "_by_peer_script"))
            for k in KERNELS
        ]
        for label, key in [*labels, ("peer (bench/peer/score.py)", "peer")]:
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
            f"## precision/recall against {truth_arg.name if truth_arg else ''}"
            f"{' (its records among the first ' + format(docs, ',') + ')' if limit else ''} "
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
                "recall by kind: "
                + "; ".join(
                    f"neardup {k} "
                    + json.dumps(scores[f"neardup_{k}_by_peer_script"]["recall_by_kind"])
                    for k in KERNELS
                )
                + "; peer "
                + json.dumps(scores["peer"]["recall_by_kind"])
            )
    print()
    footer(load_start, load_end)
    if args.json:
        Path(args.json).write_text(json.dumps(raw, indent=1))
    return 0 if same["identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
