"""The command line: arguments and environment -> adapters -> the pipeline."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from . import __version__
from .blocks import NAMED
from .config import DEFAULT_SCHEME, DEFAULT_THRESHOLD, EngineSettings, env
from .errors import DetectorError
from .records import DEFAULT_MAX_BYTES


def _engine_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("engine (each also NEARDUP_<OPTION>, e.g. NEARDUP_SCHEME)")
    g.add_argument(
        "--features",
        choices=("words", "shingles"),
        default=env("features", "words"),
        help="fingerprint features: words, or word shingles (default: %(default)s)",
    )
    g.add_argument(
        "--shingle-size",
        type=int,
        default=int(env("shingle_size", "2") or 2),
        help="words per shingle with --features shingles (default: %(default)s)",
    )
    g.add_argument(
        "--cjk-ngram",
        type=int,
        default=int(env("cjk_ngram", "2") or 2),
        help="character n-gram size for scripts written without spaces (default: %(default)s)",
    )
    g.add_argument(
        "--idf",
        default=env("idf"),
        metavar="FILE",
        help="IDF table made by `neardup fit-idf`; without it a built-in length weighting is used",
    )
    names = ", ".join(f"{k} (={v})" for k, v in NAMED.items())
    g.add_argument(
        "--scheme",
        default=env("scheme", DEFAULT_SCHEME),
        help="block tables: kK-bB = distance K, B blocks, one table per choice of "
        f"B-K blocks; kK-bBxC = two levels; or {names} "
        "(default: %(default)s)",
    )
    g.add_argument(
        "--threshold",
        type=float,
        default=float(env("threshold", str(DEFAULT_THRESHOLD)) or DEFAULT_THRESHOLD),
        help="literal pass: word-shingle Jaccard needed to call a candidate a "
        "duplicate (default: %(default)s)",
    )
    g.add_argument(
        "--literal-shingle",
        type=int,
        default=int(env("literal_shingle", "5") or 5),
        help="words per shingle in the literal pass (default: %(default)s)",
    )
    g.add_argument(
        "--max-candidates",
        type=int,
        default=int(env("max_candidates", "32") or 32),
        help="nearest candidates verified per document (default: %(default)s)",
    )
    g.add_argument(
        "--vector-seed",
        type=int,
        default=int(env("vector_seed", "0") or 0),
        help="seed of the random hyperplanes for records with an embedding (default: %(default)s)",
    )
    g.add_argument(
        "--max-bytes",
        type=int,
        default=int(env("max_bytes", str(DEFAULT_MAX_BYTES)) or DEFAULT_MAX_BYTES),
        help="largest accepted record in bytes (default: %(default)s)",
    )


def _settings(a: argparse.Namespace) -> EngineSettings:
    return EngineSettings(
        features=a.features,
        shingle_size=a.shingle_size,
        cjk_ngram=a.cjk_ngram,
        idf=a.idf,
        scheme=a.scheme,
        threshold=a.threshold,
        literal_shingle=a.literal_shingle,
        max_candidates=a.max_candidates,
        vector_seed=a.vector_seed,
        max_bytes=a.max_bytes,
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="neardup",
        description="Streaming near-duplicate detection: SimHash fingerprints, Manku block "
        "tables and a literal second pass.",
    )
    p.add_argument("--version", action="version", version=f"neardup {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    d = sub.add_parser(
        "detect",
        help="decide every record of a JSONL file (no server needed)",
        description='Read {"id", "text"} records (JSONL, optionally gzip) '
        "and write one decision per record, in input order: `duplicate_of` "
        "always names an earlier record. Bad lines become error records.",
    )
    d.add_argument("input", nargs="?", default="-", help="JSONL or JSONL.gz file; - for stdin")
    d.add_argument("-o", "--output", help="decisions file (.gz to compress); default stdout")
    d.add_argument("--errors", help="error records file; default stderr")
    d.add_argument(
        "--batch-size",
        type=int,
        default=int(env("batch_size", "512") or 512),
        help="records fingerprinted together (default: %(default)s)",
    )
    d.add_argument(
        "--index-name",
        default=env("index", "default"),
        help="index namespace written into decisions (default: %(default)s)",
    )
    d.add_argument(
        "--workers",
        type=int,
        default=int(env("workers", "1") or 1),
        help="processes that parse and fingerprint ahead of the decisions; 0 "
        "does everything in one process (default: %(default)s)",
    )
    d.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar on stderr (default: when stderr is a terminal)",
    )
    _engine_options(d)

    f = sub.add_parser("fit-idf", help="build a frozen, versioned IDF table from a corpus")
    f.add_argument("corpus", help="JSONL or JSONL.gz with a `text` field per line")
    f.add_argument("-o", "--output", required=True, help="table file to write (gzip JSON)")
    f.add_argument(
        "--min-df",
        type=int,
        default=2,
        help="drop tokens seen in fewer documents (default: %(default)s)",
    )

    e = sub.add_parser(
        "eval",
        help="precision/recall of decisions against a truth file",
        description="Score `duplicate` decisions against a truth file "
        '({"id", "max_jaccard_earlier", "most_similar_earlier"} per line) '
        "and draw a PNG report.",
    )
    e.add_argument("decisions", help="decisions JSONL (from neardup detect)")
    e.add_argument("truth", help="truth JSONL or JSONL.gz")
    e.add_argument(
        "--threshold",
        type=float,
        default=0.8,
        help="a record is truly a duplicate when max_jaccard_earlier >= this "
        "(default: %(default)s)",
    )
    e.add_argument("--report", help="write a PNG report here")
    e.add_argument("--json", action="store_true", help="print the scores as one JSON line")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.command == "detect":
            return _detect(args)
        if args.command == "fit-idf":
            return _fit_idf(args)
        if args.command == "eval":
            return _eval(args)
    except DetectorError as exc:
        print(f"neardup: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 1


def _detect(args: argparse.Namespace) -> int:
    from .index.memory import MemoryIndex
    from .pipeline import Detector, run
    from .stream.files import (
        JsonlSink,
        input_label,
        open_input,
        open_output,
        read_lines,
    )

    settings = _settings(args)
    scheme = settings.block_scheme()
    detector = Detector(
        settings.engine(),
        MemoryIndex(scheme, args.index_name),
        scheme,
        settings.literal(),
        settings.max_candidates,
    )
    show = sys.stderr.isatty() if args.progress is None else args.progress
    stream = open_input(args.input)
    out = open_output(args.output, sys.stdout)
    errors = open_output(args.errors, sys.stderr)
    progress: Any = None
    if show:
        from tqdm import tqdm

        progress = tqdm(unit=" records", file=sys.stderr, smoothing=0.1)
    try:
        counts = run(
            detector,
            read_lines(stream, input_label(args.input)),
            JsonlSink(out, errors),
            args.batch_size,
            settings.max_bytes,
            progress,
            args.workers,
            start_method="fork",
        )
    finally:
        if progress is not None:
            progress.close()
        for f in (out, errors):
            if f not in (sys.stdout, sys.stderr):
                f.close()
        stream.close()
    print(f"neardup: {counts.summary()}", file=sys.stderr)
    return 0


def _fit_idf(args: argparse.Namespace) -> int:
    from .features import IdfTable
    from .records import parse_document
    from .stream.files import input_label, open_input, read_lines

    def texts() -> Iterator[str]:
        with open_input(args.corpus) as stream:
            for raw, _ in read_lines(stream, input_label(args.corpus)):
                try:
                    yield parse_document(raw).text
                except DetectorError:
                    continue  # fitting weights tolerates the lines detect would reject

    table = IdfTable.fit(texts(), min_df=args.min_df)
    table.save(args.output)
    print(
        f"neardup: {args.output}: {table.version}, {table.docs} documents, "
        f"{len(table.doc_freq)} tokens",
        file=sys.stderr,
    )
    return 0


def _eval(args: argparse.Namespace) -> int:
    from .evaluate import evaluate, load_jsonl, plot_report

    decisions = load_jsonl(args.decisions)
    truth = load_jsonl(args.truth)
    scores = evaluate(decisions, truth, args.threshold)
    if args.json:
        print(json.dumps(scores))
    else:
        for k, v in scores.items():
            print(f"{k:>22}: {v}")
    if args.report:
        plot_report(decisions, truth, args.threshold, args.report)
        print(f"neardup: report written to {args.report}", file=sys.stderr)
    return 0
