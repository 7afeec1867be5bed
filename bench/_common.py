"""Helpers shared by the benchmark scripts (standard library only: numpy is imported by
the worker subprocesses, never by the scripts that drive them).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
SHARED_DATA = ROOT.parent / "shared" / "data"
DEFAULT_CORPORA = (SHARED_DATA / "dev-stream.jsonl.gz", ROOT / "tests" / "data" / "sample.jsonl.gz")
DEFAULT_TRUTH = SHARED_DATA / "dev-truth.jsonl.gz"
WORKERS = BENCH / "_workers.py"

# "... 3.5 s, 2,144 records/s" at the end of `neardup detect`'s summary line.
_SUMMARY = re.compile(r"neardup: (\d+) records: .*; ([\d.]+) s, ([\d,.]+) records/s")


def resolve_corpus(arg: str | None) -> Path:
    if arg:
        path = Path(arg)
        if not path.is_file():
            sys.exit(f"error: corpus {path} does not exist")
        return path.resolve()
    for path in DEFAULT_CORPORA:
        if path.is_file():
            return path
    tried = " or ".join(str(p) for p in DEFAULT_CORPORA)
    sys.exit(
        f"error: no corpus given and no default corpus found (tried {tried}); pass --corpus PATH"
    )


def resolve_truth(arg: str | None, corpus: Path) -> Path | None:
    """The truth file: the one given, or the dev truth when the corpus is the dev stream."""
    if arg:
        path = Path(arg)
        if not path.is_file():
            sys.exit(f"error: truth file {path} does not exist")
        return path.resolve()
    if corpus == DEFAULT_CORPORA[0] and DEFAULT_TRUTH.is_file():
        return DEFAULT_TRUTH
    return None


def _open(path: Path, mode: str = "rb"):  # type: ignore[no-untyped-def]
    with open(path, "rb") as f:
        magic = f.read(2)
    return gzip.open(path, mode) if magic == b"\x1f\x8b" else open(path, mode)


def read_records(path: Path, drop_embeddings: bool = False) -> list[bytes]:
    """The non-blank lines of a gzipped JSONL stream; without their embeddings, as text
    records (the embedding dev stream's passages, where a benchmark wants texts)."""
    with gzip.open(path, "rb") as f:
        raw = [line for line in f if line.strip()]
    if drop_embeddings:
        raw = [
            json.dumps({k: v for k, v in json.loads(r).items() if k != "embedding"}).encode()
            for r in raw
        ]
    return raw


def stack_settings(batch_size: int) -> Any:
    """neardup's connection settings from the environment (`ops/stack.sh env`), read the
    way `neardup bench` reads them, in the Namespace that detector.bench.Run expects."""
    from detector import cli

    ns = cli.parser().parse_args(["bench", os.devnull, "--batch-size", str(batch_size)])
    ns.kafka = cli._kafka_settings(ns)
    ns.redis = cli._redis_settings(ns)
    return ns


def keyed_records(corpus: Path) -> list[tuple[str, bytes]]:
    """(id, line) of each record of a JSONL(.gz) stream: what a bench sends to a topic."""
    from detector.stream.files import input_label, open_input, read_lines

    out = []
    with open_input(str(corpus)) as f:
        for raw, _ in read_lines(f, input_label(str(corpus))):
            out.append((str(json.loads(raw)["id"]), raw))
    return out


def count_records(path: Path) -> int:
    with _open(path) as f:
        return sum(1 for line in f if line.strip())


def prepare_inputs(
    corpus: Path, truth: Path | None, limit: int | None, tmp: Path
) -> tuple[Path, Path | None, int]:
    """The corpus (its first `limit` records if given) and the truth of those records."""
    if limit is None:
        return corpus, truth, count_records(corpus)
    small = tmp / "corpus.jsonl"
    ids = set()
    n = 0
    with _open(corpus) as src, open(small, "wb") as dst:
        for line in src:
            if not line.strip():
                continue
            if n >= limit:
                break
            dst.write(line.rstrip(b"\r\n") + b"\n")
            with contextlib.suppress(ValueError, KeyError, TypeError):
                ids.add(str(json.loads(line)["id"]))
            n += 1
    if truth is None:
        return small, None, n
    small_truth = tmp / "truth.jsonl"
    with _open(truth) as src, open(small_truth, "wb") as dst:
        for line in src:
            if line.strip() and str(json.loads(line)["id"]) in ids:
                dst.write(line.rstrip(b"\r\n") + b"\n")
    return small, small_truth, n


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a child python: the measured detector first on the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(Code.dir), env.get("PYTHONPATH")) if p)
    env.update(extra)
    return env


def run(
    cmd: list[str], timeout: float | None = None, env: dict[str, str] | None = None
) -> tuple[int | None, str, str, float]:
    """(exit code or None on timeout, stdout, stderr, wall seconds)."""
    t0 = time.perf_counter()
    try:
        # cwd: `python -m detector` puts it first on the path.
        p = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=Code.dir,
            env=env if env is not None else child_env(),
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr or ""
        return None, out, err, time.perf_counter() - t0
    return p.returncode, p.stdout, p.stderr, time.perf_counter() - t0


def last_json(stdout: str) -> dict[str, Any]:
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)  # type: ignore[no-any-return]
    raise ValueError(f"no JSON line in output: {stdout[-500:]!r}")


def worker(
    name: str, args: dict[str, Any], timeout: float | None = None, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Run a measurement of bench/_workers.py in a fresh interpreter; its JSON result."""
    cmd = [sys.executable, str(WORKERS), name, json.dumps(args)]
    rc, out, err, wall = run(cmd, timeout, env)
    if rc != 0:
        why = "timed out" if rc is None else f"exit {rc}"
        raise RuntimeError(f"worker {name} {why}: {err.strip()[-2000:]}")
    result = last_json(out)
    result["wall_s"] = wall
    return result


def parse_summary(stderr: str) -> dict[str, float] | None:
    m = _SUMMARY.search(stderr)
    if not m:
        return None
    return {"records": int(m[1]), "seconds": float(m[2]), "rate": float(m[3].replace(",", ""))}


class Code:
    """Where the measured detector package lives: the work tree, or a snapshot of it.

    Another engineer may be editing detector/ while a benchmark runs for minutes; the
    scripts therefore copy detector/ once, check that the copy runs, and measure only the
    copy, so every figure of one run is of one version of the code."""

    dir: Path = ROOT
    state: str = "work tree"
    digest: str = ""


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def _digest(tree: Path) -> str:
    import hashlib

    h = hashlib.sha1()
    for f in sorted(tree.rglob("*.py")):
        h.update(str(f.relative_to(tree)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:10]


def _describe(tree: Path) -> str:
    try:
        head = _git("rev-parse", "--short", "HEAD")
        dirty = _git("status", "--porcelain", "--", "detector")
    except (OSError, subprocess.CalledProcessError):
        return f"content {_digest(tree)} (no git)"
    how = "uncommitted changes in detector/" if dirty else "detector/ as committed"
    return f"HEAD {head}, {how}, content {_digest(tree)}"


def snapshot_code(tmp: Path, smoke: Path | None, tries: int = 6, wait: float = 20.0) -> None:
    """Copy detector/ under tmp and make every child python use the copy. A copy that
    does not import, or (given a corpus) does not run `detect` on its first 200 records,
    was likely taken mid-edit: wait and copy again."""
    import shutil

    for attempt in range(1, tries + 1):
        dest = tmp / f"code{attempt}"
        shutil.copytree(
            ROOT / "detector",
            dest / "detector",
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
        )
        # Byte-compiled as pip compiles an installed package: a start reads .pyc files
        # (this machine sets PYTHONDONTWRITEBYTECODE, so no run would write them).
        import compileall

        compileall.compile_dir(dest / "detector", quiet=1)
        state = _describe(dest / "detector")
        Code.dir, Code.state, Code.digest = dest, state, _digest(dest / "detector")
        problem = _smoke(dest, smoke)
        if problem is None:
            Code.state = f"snapshot of {ROOT / 'detector'} at {time.strftime('%H:%M:%S')}: {state}"
            return
        print(
            f"snapshot {attempt} of detector/ does not run ({problem}); retrying in {wait:.0f} s",
            file=sys.stderr,
            flush=True,
        )
        time.sleep(wait)
    sys.exit("error: detector/ did not run in any snapshot; is it being edited?")


def run_snapshot(tmp: Path, smoke: Path | None) -> None:
    """snapshot_code, then this process and every `python -m detector` it starts (the
    current directory first on its path) run the copy."""
    snapshot_code(tmp, smoke)
    sys.path.insert(0, str(Code.dir))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(Code.dir), os.environ.get("PYTHONPATH")) if p
    )
    os.chdir(Code.dir)


def _smoke(code: Path, corpus: Path | None) -> str | None:
    env = child_env()
    rc, _, err, _ = run(
        [
            sys.executable,
            "-c",
            "import detector.cli, detector.pipeline, detector.index.memory, detector.options",
        ],
        timeout=120,
        env=env,
    )
    if rc != 0:
        return err.strip().splitlines()[-1] if err.strip() else f"exit {rc}"
    if corpus is None:
        return None
    with _open(corpus) as src:
        head = b"".join(line for _, line in zip(range(200), src, strict=False))
    sample = code / "smoke.jsonl"
    sample.write_bytes(head)
    rc, _, err, _ = run(
        [
            sys.executable,
            "-m",
            "detector",
            "detect",
            str(sample),
            "-o",
            os.devnull,
            "--no-progress",
        ],
        timeout=300,
        env=env,
    )
    if rc != 0:
        return err.strip().splitlines()[-1] if err.strip() else f"exit {rc}"
    return None


def work_tree_changed() -> str | None:
    """None if the work tree's detector/ still matches the snapshot measured."""
    if not Code.digest:
        return None
    now = _digest(ROOT / "detector")
    return None if now == Code.digest else f"detector/ in the work tree is now {now}"


def footer(load_start: str, load_end: str) -> None:
    """The last lines of a benchmark: the machine's load, and the code its figures are of."""
    print(f"load at start: {load_start}")
    print(f"load at end:   {load_end}")
    print(f"detector code measured: {Code.state}")
    changed = work_tree_changed()
    if changed:
        print(f"note: {changed}; these figures are of the snapshot above")


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f} (1/5/15 min, {os.cpu_count()} CPUs)"


def fmt_rate(x: float | None) -> str:
    return "n/a" if x is None else f"{x:,.0f}"


def fmt(x: float | None, digits: int = 4) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def markdown(headers: list[str], rows: list[list[str]], align: str | None = None) -> str:
    """A Markdown table; align is one character per column, l or r (default: l then r)."""
    align = align or "l" + "r" * (len(headers) - 1)
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)
    ]

    def line(cells: list[str]) -> str:
        return (
            "| "
            + " | ".join(
                c.ljust(w) if a == "l" else c.rjust(w)
                for c, w, a in zip(cells, widths, align, strict=True)
            )
            + " |"
        )

    rule = (
        "|"
        + "|".join(
            ("-" * (w + 1) + ":") if a == "r" else (":" + "-" * (w + 1))
            for w, a in zip(widths, align, strict=True)
        )
        + "|"
    )
    return "\n".join([line(headers), rule, *(line(r) for r in rows)])
