#!/usr/bin/env python3
"""The table used to choose neardup's defaults: quality, speed and index memory of
feature kinds, weights, block schemes and literal-pass thresholds on the dev stream.

    python bench/configs.py [--corpus PATH] [--truth PATH] [--quick] [--limit N]
                            [--repeat N] [--timeout S] [--no-memory] [--json FILE]

Each configuration, one after the other (the machine is shared; nothing runs in parallel):
  1. `python -m detector detect CORPUS -o TMP --no-progress --features ... --shingle-size
     ... [--idf TABLE] --scheme ... --threshold ...` as a subprocess, --repeat times;
     docs/s is the best rate of its summary line (run() only: no start-up), wall time
     beside it (a configuration slower than --timeout is skipped);
  2. `python -m detector eval TMP TRUTH --json`: precision, recall, F1 (a record is truly
     a duplicate when max_jaccard_earlier >= 0.8, whatever the detect threshold);
  3. a separate pass in a fresh interpreter for the index memory (tracemalloc slows
     everything, so it is never the timed pass): Detector.process over the corpus into a
     MemoryIndex with tracemalloc started just before the index is made; "index MiB" is
     tracemalloc's current after the run, with the Detector, its engine and its
     literal-pass cache dropped and gc run, minus current before. "tables MiB" is a
     recursive sys.getsizeof of the index's structures other than the texts, the digests
     and the decisions (the part the block scheme changes). Per-document figures divide
     by the documents indexed (exact copies are not). The index holds the same documents
     whatever the threshold, so rows that differ only in threshold share one memory pass.
The IDF table is fitted once on the corpus itself (`neardup fit-idf`): in-sample weights.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from _common import (
    Code,
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

MiB = 1024 * 1024
NOT_TABLES = ("_texts", "_digests", "_decisions")


def api() -> Any:
    """detector.blocks and detector.settings of the code measured (imported once the
    snapshot is taken)."""
    sys.path.insert(0, str(Code.dir))
    import detector.blocks
    import detector.settings

    return detector


@dataclass(frozen=True)
class _Config:
    scheme: str
    threshold: float
    features: str = "words"  # words | shingles
    shingle_size: int = 2
    idf: bool = False
    note: str = ""

    def label(self) -> str:
        feats = "words" if self.features == "words" else f"shingles{self.shingle_size}"
        weights = "idf" if self.idf else "builtin"
        canonical = api().blocks.NAMED.get(self.scheme, self.scheme)
        scheme = self.scheme if canonical == self.scheme else f"{self.scheme}={canonical}"
        out = f"{feats}, {weights}, {scheme}, t={self.threshold:g}"
        return f"{out} [{self.note}]" if self.note else out

    def options(self, idf_path: Path | None) -> list[str]:
        opts = [
            "--features",
            self.features,
            "--shingle-size",
            str(self.shingle_size),
            "--scheme",
            self.scheme,
            "--threshold",
            str(self.threshold),
        ]
        if self.idf:
            assert idf_path is not None
            opts += ["--idf", str(idf_path)]
        return opts

    def settings(self, idf_path: Path | None) -> dict[str, Any]:
        return {
            "features": self.features,
            "shingle_size": self.shingle_size,
            "idf": str(idf_path) if self.idf else None,
            "scheme": self.scheme,
            "threshold": self.threshold,
        }

    def index_key(self) -> tuple[str, int, bool, str]:
        return self.features, self.shingle_size, self.idf, self.scheme


def configurations(quick: bool) -> list[_Config]:
    """The configurations in table order (the quick subset with quick); duplicates dropped.
    Unless a row says otherwise: the scheme and threshold of detector.settings."""
    defaults = {
        "scheme": api().settings.DEFAULT_SCHEME,
        "threshold": api().settings.DEFAULT_THRESHOLD,
    }

    def Config(**kw: Any) -> _Config:
        return _Config(**{**defaults, **kw})

    rows: list[tuple[_Config, bool]] = [
        (Config(note="default"), True),
        # Features and weights, on the default scheme and threshold.
        (Config(features="shingles", shingle_size=2), True),
        (Config(features="shingles", shingle_size=3), False),
        (Config(idf=True), True),
        (Config(features="shingles", shingle_size=2, idf=True), False),
    ]
    # Block schemes, words with builtin weights.
    quick_schemes = {"manku-4", "manku-16", "k4-b5", "k8-b10"}
    for scheme in (
        "manku-4",
        "manku-10",
        "manku-16",
        "manku-20",
        "k4-b5",
        "k5-b6",
        "k5-b7",
        "k6-b7",
        "k6-b8",
        "k7-b8",
        "k8-b10",
    ):
        rows.append((Config(scheme=scheme), scheme in quick_schemes))
    # The literal pass's threshold on the default scheme.
    rows += [(Config(threshold=0.7), True), (Config(threshold=0.9), False)]
    # No second pass: every candidate within distance k is a duplicate (plain Manku).
    rows += [
        (Config(scheme="manku-4", threshold=0.0, note="k=3, no second pass"), True),
        (Config(threshold=0.0, note="no second pass"), False),
    ]
    seen: set[tuple[Any, ...]] = set()
    out = []
    for c, in_quick in rows:
        key = (*c.index_key(), c.threshold)
        if key in seen or (quick and not in_quick):
            continue
        seen.add(key)
        out.append(c)
    return out


def fit_idf(corpus: Path, path: Path) -> float:
    rc, _, err, wall = run(
        [sys.executable, "-m", "detector", "fit-idf", str(corpus), "-o", str(path)], timeout=1800
    )
    if rc != 0:
        raise SystemExit(f"neardup fit-idf failed ({rc}): {err.strip()[-2000:]}")
    print(f"  {err.strip().splitlines()[-1]}  [{wall:.1f} s]", flush=True)
    return wall


def measure(
    c: _Config,
    corpus: Path,
    truth: Path | None,
    idf: Path | None,
    tmp: Path,
    timeout: float,
    extra: list[str],
    repeat: int,
) -> dict[str, Any]:
    """Best of `repeat` detect runs (by the summary's rate), scored once: the decisions do
    not depend on timing."""
    out = tmp / "decisions.jsonl"
    cmd = [
        sys.executable,
        "-m",
        "detector",
        "detect",
        str(corpus),
        "-o",
        str(out),
        "--no-progress",
        *c.options(idf),
        *extra,
    ]
    result: dict[str, Any] = {"config": asdict(c), "label": c.label(), "runs": []}
    for _ in range(repeat):
        rc, _, err, wall = run(cmd, timeout=timeout)
        result["load1"] = float(load().split()[0])
        result["wall_s"] = min(wall, result.get("wall_s", wall))
        if rc is None:
            result["skipped"] = f"detect took over {timeout:.0f} s"
            return result
        if rc != 0:
            last = err.strip().splitlines()[-1][:160] if err.strip() else ""
            result["skipped"] = f"detect failed ({rc}): {last}"
            return result
        summary = parse_summary(err)
        result["runs"].append(summary)
        best = result.get("summary")
        if summary and (best is None or summary["rate"] > best["rate"]):
            result["summary"] = summary
    if truth is not None:
        rc, stdout, err, _ = run(
            [sys.executable, "-m", "detector", "eval", str(out), str(truth), "--json"],
            timeout=timeout,
        )
        result["scores"] = last_json(stdout) if rc == 0 else {"error": err.strip()[-300:]}
        if rc != 0:
            print(f"    neardup eval failed: {err.strip()[-300:]}", flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", help="JSONL(.gz) stream (default: the shared dev stream)")
    ap.add_argument(
        "--truth", help="truth JSONL(.gz) (default: the dev truth, with the dev stream)"
    )
    ap.add_argument("--quick", action="store_true", help="a subset of the configurations")
    ap.add_argument("--limit", type=int, help="only the first N records")
    ap.add_argument(
        "--timeout",
        type=float,
        default=300,
        help="skip a configuration whose detect (or memory pass) takes longer "
        "(seconds, default: %(default)s)",
    )
    ap.add_argument(
        "--repeat",
        type=int,
        default=2,
        help="detect runs per configuration, the fastest kept (default: "
        "%(default)s; the machine is shared and one run is noisy)",
    )
    ap.add_argument("--no-memory", action="store_true", help="skip the index memory passes")
    ap.add_argument(
        "--detect-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="extra argument for every `neardup detect` (repeatable, e.g. "
        "--detect-arg=--workers=0)",
    )
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
    configs = configurations(args.quick)
    results = []
    memory: dict[tuple[Any, ...], dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="neardup-configs-") as tmpdir:
        tmp = Path(tmpdir)
        corpus, truth, n = prepare_inputs(corpus_arg, truth_arg, args.limit, tmp)
        if not args.no_snapshot:
            snapshot_code(tmp, corpus)
        print(f"detector code measured: {Code.state}", flush=True)
        print(f"corpus: {corpus_arg} ({n} records{', first ' + str(n) if args.limit else ''})")
        print(f"truth:  {truth_arg or 'none'}")
        print(f"{len(configs)} configurations{' (quick)' if args.quick else ''}", flush=True)
        idf = None
        if any(c.idf for c in configs):
            idf = tmp / "corpus.idf.gz"
            print("fitting the IDF table on the corpus ...", flush=True)
            fit_idf(corpus, idf)
        for i, c in enumerate(configs, 1):
            print(f"[{i}/{len(configs)}] {c.label()} ...", flush=True)
            r = measure(c, corpus, truth, idf, tmp, args.timeout, args.detect_arg, args.repeat)
            if "skipped" not in r and not args.no_memory:
                key = c.index_key()
                if key not in memory:
                    try:
                        memory[key] = worker(
                            "memory",
                            {"corpus": str(corpus), "settings": c.settings(idf)},
                            timeout=args.timeout,
                        )
                    except RuntimeError as exc:
                        memory[key] = {"error": str(exc)[-300:]}
                r["memory"] = memory[key]
            results.append(r)
            s, sc = r.get("summary") or {}, r.get("scores") or {}
            print(
                f"    {r.get('skipped') or ''}"
                f"{'' if 'skipped' in r else 'docs/s ' + fmt_rate(s.get('rate'))}"
                f" P {fmt(sc.get('precision'))} R {fmt(sc.get('recall'))}"
                f" [wall {r['wall_s']:.1f} s, load {r['load1']:.2f}]",
                flush=True,
            )
    load_end = load()

    rows = []
    for r in results:
        c = _Config(**r["config"])
        spec = api().blocks.BlockScheme.parse(c.scheme)
        bits = spec.key_bits()
        s, sc, m = r.get("summary") or {}, r.get("scores") or {}, r.get("memory") or {}
        docs = (m.get("stats") or {}).get("documents")
        traced = m.get("traced_bytes")
        sizes = m.get("sizeof_bytes") or {}
        tables = sum(v for k, v in sizes.items() if k not in NOT_TABLES) if sizes else None
        rows.append(
            [
                c.label(),
                str(len(spec.tables)),
                f"{min(bits)}-{max(bits)}" if min(bits) != max(bits) else str(bits[0]),
                fmt(sc.get("precision")),
                fmt(sc.get("recall")),
                fmt(sc.get("f1")),
                str(sc.get("said_duplicate", "n/a")),
                r.get("skipped") or fmt_rate(s.get("rate")),
                f"{r['wall_s']:.1f}",
                f"{traced / MiB:.1f}" if traced is not None else "n/a",
                f"{traced / docs:,.0f}" if traced is not None and docs else "n/a",
                f"{tables / MiB:.2f}" if tables is not None else "n/a",
                f"{tables / docs:,.0f}" if tables is not None and docs else "n/a",
                f"{r['load1']:.2f}",
            ]
        )
    print()
    print(
        f"## Configurations on {corpus_arg.name} ({n} records"
        f"{', truth ' + truth_arg.name if truth_arg else ''})"
    )
    print()
    print(
        markdown(
            [
                "configuration",
                "tables",
                "key bits",
                "precision",
                "recall",
                "F1",
                "said dup",
                "docs/s",
                "wall s",
                "index MiB",
                "index B/doc",
                "tables MiB",
                "tables B/doc",
                "load",
            ],
            rows,
        )
    )
    print()
    print(
        f"docs/s: the rate in `neardup detect`'s summary (its run(), no interpreter "
        f"start-up), best of {args.repeat}; wall s: the whole subprocess, best of "
        f"{args.repeat}; detect's defaults for all else (e.g. --workers)."
        + (f" detect ran with {' '.join(args.detect_arg)}." if args.detect_arg else "")
    )
    print(
        "index MiB / B/doc: tracemalloc, current after the run minus before, only the "
        "MemoryIndex alive (texts, digests, decisions and tables); per indexed document "
        "(exact copies are not indexed)."
    )
    print(
        "tables MiB / B/doc: recursive sys.getsizeof of the index's structures other than "
        "texts, digests and decisions (fingerprint tables, id lists, positions)."
    )
    if memory:
        m = next(iter(v for v in memory.values() if "sizeof_bytes" in v), None)
        if m:
            parts = ", ".join(f"{k} {v / MiB:.1f}" for k, v in m["sizeof_bytes"].items())
            print(
                f"first memory pass, sys.getsizeof by structure (MiB): {parts}; "
                f"tracemalloc {m['traced_bytes'] / MiB:.1f}, peak during the run "
                f"{m['traced_peak_bytes'] / MiB:.1f}; stats {json.dumps(m['stats'])}"
            )
    print(
        "precision/recall: `neardup eval --json`; a record is truly a duplicate when "
        "max_jaccard_earlier >= 0.8, whatever the detect threshold t."
    )
    print()
    footer(load_start, load_end)
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {"load_start": load_start, "load_end": load_end, "results": results}, indent=1
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
