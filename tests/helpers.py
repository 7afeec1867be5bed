"""Helpers shared by the unit and the integration suites: paths of the bundled data, JSONL
files, child `python -m detector` processes, what a decision says, detectors over an
index, and the block schemes the tests run over (with fingerprints built against them).

Hypothesis strategies are in strategies.py; the integration suite's servers, readers and
processes under integration/.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path
from typing import Any

from detector.blocks import NAMED, BlockScheme
from detector.decide import Detector
from detector.index import Index, record_of
from detector.index.memory import MemoryIndex
from detector.index.redis.keys import Stored
from detector.pipeline import Limits, prepare
from detector.records import Decision, Document
from detector.settings import DEFAULT_SCHEME, EngineSettings

# ----------------------------------------------------------------------------- the data

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
SAMPLE = DATA / "sample.jsonl.gz"  # the first 400 records of the dev stream
SAMPLE_TRUTH = DATA / "sample-truth.jsonl.gz"
STREAM_2K = DATA / "stream-2k.jsonl.gz"  # its first 2,000 (171 true near-duplicates)
STREAM_2K_TRUTH = DATA / "stream-2k-truth.jsonl.gz"
# 121 pages of two sites of the HTML dev stream: 90 originals, then re-fetches and
# syndicated copies of them (25 true near-duplicates)
HTML_SAMPLE = DATA / "html-sample.jsonl.gz"
HTML_SAMPLE_TRUTH = DATA / "html-sample-truth.jsonl.gz"
# 388 records of the embedding dev stream (all-MiniLM-L6-v2, 384 dimensions): 250 passages
# and every later copy and variant of them; the truth's max_cosine_earlier is the sample's
# own (120 records reach 0.9)
EMBED_SAMPLE = DATA / "embed-sample.jsonl.gz"
EMBED_SAMPLE_TRUTH = DATA / "embed-sample-truth.jsonl.gz"


def write_jsonl(path: Path, records: Iterable[Any], gz: bool = False) -> Path:
    """Records to a JSONL file; a bytes or str record is written as the line itself."""
    lines = []
    for r in records:
        if isinstance(r, bytes):
            lines.append(r)
        elif isinstance(r, str):
            lines.append(r.encode("utf-8"))
        else:
            lines.append(json.dumps(r).encode("utf-8"))
    body = b"".join(line + b"\n" for line in lines)
    if gz:
        with gzip.open(path, "wb") as f:
            f.write(body)
    else:
        path.write_bytes(body)
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def read_lines(path: Path = SAMPLE) -> list[bytes]:
    """The records of a JSONL file (gzipped or not) as raw lines, blank lines left out:
    what a source hands the pipeline."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        return [line.rstrip(b"\n") for line in f if line.strip()]


@cache
def stream_texts() -> tuple[str, ...]:
    """The texts of STREAM_2K's records, in order: real texts in the number an index
    trains its text dictionary on (index.texts.SAMPLE_TEXTS) and more."""
    return tuple(r["text"] for r in read_jsonl(STREAM_2K))


# ---------------------------------------------------------------------- child processes


def until(check: Callable[[], bool], timeout: float, why: str | Callable[[], str]) -> None:
    """Poll CHECK until it is true; past TIMEOUT seconds, an AssertionError: WHY (what was
    waited for), or WHY() (made then: a server's log, say)."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() >= deadline:
            raise AssertionError(why() if callable(why) else f"{why}: not within {timeout}s")
        time.sleep(0.1)


def run_module(
    args: list[str], stdin: bytes | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[bytes]:
    """`python -m detector ARGS` in a child process, from the project root."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env = {k: v for k, v in env.items() if not k.startswith("NEARDUP_")}
    return subprocess.run(
        [sys.executable, "-m", "detector", *args],
        input=stdin,
        capture_output=True,
        cwd=ROOT,
        env=env,
        timeout=timeout,
    )


# ---------------------------------------------------------------------------- decisions

# The fields that make a decision what it is (not the audit fields: time, version...).
VERDICT = ("decision", "duplicate_of", "distance", "similarity", "fingerprint", "exact", "cluster")


def verdict(d: dict[str, Any]) -> tuple[Any, ...]:
    """What one decision (its JSON form) says, without its id; a field it lacks is None."""
    return tuple(d.get(k) for k in VERDICT)


def verdicts(decisions: Iterable[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What a decision says, without the audit fields that may differ (timestamps)."""
    return [
        (
            d["id"],
            d["decision"],
            d["duplicate_of"],
            d["distance"],
            d["similarity"],
            d["fingerprint"],
            d["exact"],
        )
        for d in decisions
    ]


# ---------------------------------------------------------------------------- detectors


def make_detector(index: Index | None = None, **options: Any) -> Detector:
    """A Detector with these engine options (EngineSettings fields) over an index, by
    default a fresh memory index of the options' block scheme."""
    settings = EngineSettings(**options)
    return settings.detector(MemoryIndex(settings.block_scheme()) if index is None else index)


def decide_in_batches(index: Index, raw: list[bytes], size: int = 64) -> list[Decision]:
    """Decide raw records against an index as serve does (the default settings), a batch
    at a time."""
    detector = make_detector(index)
    out: list[Decision] = []
    for at in range(0, len(raw), size):
        batch = prepare(detector.engine, [(r, {}) for r in raw[at : at + size]], Limits(10**7))
        assert not batch.errors
        out += detector.process(batch.docs, batch.prints)
    return out


# ------------------------------------------------------------------------ block schemes

EXTRA_SPECS = ["k3-b4", "k5-b7", "k6-b8", "k2-b3x3", "k0-b1", "k1-b2", "k4-b6x5"]
# Every scheme the product offers: what the names stand for, the default, extras. (A name
# parses to the very tables of its spec: test_blocks.test_names_are_their_specs.)
ALL_SPECS = sorted(set(NAMED.values()) | {DEFAULT_SCHEME} | set(EXTRA_SPECS))
# Multi-probe schemes: a pair within k shares a key up to `radius` flipped bits.
PROBE_SPECS = ["k7-b4-m1", "k5-b4-m1", "k4-b8-m2", "k5-b6-m2", "k3-b4-m1"]
SCHEMES = {spec: BlockScheme.parse(spec) for spec in ALL_SPECS + PROBE_SPECS}


def flip(fp: int, positions: list[int]) -> int:
    for p in positions:
        fp ^= 1 << p
    return fp


def adversarial_flips(scheme: BlockScheme) -> list[list[int]]:
    """For every table, up to k bit positions outside its key that break as many other
    tables' keys as possible (greedy hitting set): pairs that only that table can find.
    Random flips rarely land like this, so these pairs test each table on its own."""
    keys = [{start + i for start, width in runs for i in range(width)} for runs in scheme.tables]
    out = []
    for t, mine in enumerate(keys):
        others = [other for u, other in enumerate(keys) if u != t]
        flips: list[int] = []
        while len(flips) < scheme.k:
            unbroken = [o for o in others if not o & set(flips)]
            if not unbroken:
                break
            free = [b for b in range(64) if b not in mine and b not in flips]
            if not free:
                break
            flips.append(max(free, key=lambda b: (sum(b in o for o in unbroken), -b)))
        out.append(flips)
    return out


# --- texts and streams of documents, for the decision tests -----------------------------


def decision_verdict(d: Decision) -> tuple[Any, ...]:
    return (
        d.id,
        d.decision,
        d.duplicate_of,
        d.distance,
        None if d.similarity is None else round(d.similarity, 9),
        d.fingerprint,
        d.exact,
    )


@cache
def sample_texts() -> list[str]:
    return [r["text"] for r in read_jsonl(SAMPLE)]


def words_text(seed: int, n: int = 300) -> str:
    rng = random.Random(seed)
    return " ".join(f"w{rng.randrange(20_000)}" for _ in range(n))


def edit_words(text: str, count: int, seed: int) -> str:
    rng = random.Random(seed)
    ws = text.split()
    for i in rng.sample(range(len(ws)), count):
        ws[i] = f"edited{rng.randrange(10**6)}"
    return " ".join(ws)


def stream_from(texts: list[str], rng: random.Random, size: int) -> list[Document]:
    """Originals, and reposts of earlier ones: words edited, an advert inserted, the tail
    trimmed, spacing changed, or an exact copy; sometimes a record delivered twice."""
    docs: list[Document] = []
    for i in range(size):
        if docs and rng.random() < 0.45:
            base = rng.choice(docs).text
            kind = rng.choice(["edit", "advert", "trim", "spacing", "copy"])
            if kind == "edit":
                ws = base.split()
                for _ in range(rng.randint(1, 4)):
                    if ws:
                        ws[rng.randrange(len(ws))] = f"x{rng.randrange(999)}"
                text = " ".join(ws)
            elif kind == "advert":
                cut = rng.randrange(len(base) + 1)
                text = base[:cut] + "\nBUY NOW: cheap widgets at example dot com\n" + base[cut:]
            elif kind == "trim":
                text = base[: max(1, int(len(base) * rng.uniform(0.8, 0.97)))]
            elif kind == "spacing":
                text = base.replace(" ", "  ")
            else:
                text = base
        else:
            text = rng.choice(texts)
        docs.append(Document(f"s{i}", text))
        if rng.random() < 0.05:  # a redelivery: the same record again
            again = docs[rng.randrange(len(docs))]
            docs.append(Document(again.id, again.text))
    return docs


def health(port: int, path: str) -> tuple[int, dict[str, Any]]:
    """(status, JSON body) of serve's /livez, /readyz or /healthz on localhost; (0, {})
    while nothing answers there yet."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())
    except (urllib.error.URLError, ConnectionError):
        return 0, {}


def free_port() -> int:
    """A port nothing listens on (closed again at once): connections to it are refused."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ----------------------------------------------------------------------------- old layouts


def layout3_value(s: Stored) -> bytes:
    """The decision key's value layout 3's COMMIT wrote for `s`: '#', a JSON header, the
    decision's JSON (tests/index/test_decision_records.py, bench/decision_records.py)."""
    d = s.decision
    h: dict[str, object] = {"n": s.current.num if s.current else 0, "r": d.revision}
    if d.digest:
        h["dg"] = d.digest
    if s.current:
        c = s.current
        h.update(s=c.space, dh=c.digest_hash.hex(), fp=f"{c.fingerprint:016x}")
    if d.version is not None:
        h["v"] = d.version
    if s.kept:
        h["k"] = [
            {"n": v.num, "r": record_of(v.name)[1], "s": v.space}
            | {"dh": v.digest_hash.hex(), "fp": f"{v.fingerprint:016x}"}
            for v in s.kept
        ]
    header = json.dumps(h, separators=(",", ":")).encode()
    return b"#" + header + b"\n" + d.to_json().encode()


def template_site(pages: int = 60, host: str = "site.example") -> list[dict[str, Any]]:
    """Pages of one site, each six words of its own in a long shared menu: stripped of tags
    only (--html text), every page is a near copy of the first; cut to their content, none
    is."""
    menu = " ".join(f"<li><a href='/m{j}'>menu entry {j} of the site</a></li>" for j in range(60))
    return [
        {
            "id": f"p{i}",
            "url": f"https://{host}/{i}",
            "text": f"<html><body><ul>{menu}</ul><main><h1>Page {i}</h1><p>"
            + " ".join(f"w{i}x{j}" for j in range(6))
            + "</p></main></body></html>",
        }
        for i in range(pages)
    ]
