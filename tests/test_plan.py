"""detector.plan: the planner's models against brute force through the real BlockScheme
(which pairs a lookup finds, how full the buckets are, what a lookup reads), its cap rule
(no layout it lists reaches --max-bucket below N), an index's plan, and `neardup plan`."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from detector import plan as P
from detector.blocks import BlockScheme
from detector.cli import main
from detector.errors import ConfigError

from .helpers import ROOT
from .strategies import u64

SAMPLE = ROOT / "tests" / "data" / "sample.jsonl.gz"
# plain, two-level and probed: every shape the planner lists
SPECS = ("k6-b8", "k3-b4", "k6-b7", "k3-b4x4", "k7-b4-m1", "k6-b7-m2", "k8-b3-m1", "k6-b5-m2")
SCHEMES = {s: BlockScheme.parse(s) for s in SPECS}


def shares_a_key(scheme: BlockScheme, a: int, b: int) -> bool:
    """Brute force: does a lookup of `a` read a bucket `b` was entered in?"""
    tables, keys = scheme.probe_array([a])
    own = scheme.key_array([b])[0]
    return bool(np.any(keys[0] == own[tables]))


# ------------------------------------------------------------------ recall


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(SPECS), u64, st.lists(st.integers(0, 63), max_size=14, unique=True))
def test_found_flips_is_what_the_scheme_finds(spec: str, a: int, positions: list[int]) -> None:
    scheme = SCHEMES[spec]
    flips = sum(1 << p for p in positions)
    model = bool(P.found_flips(scheme, np.array([flips], np.uint64))[0])
    assert model == shares_a_key(scheme, a, a ^ flips)
    if len(positions) <= scheme.k:  # pigeonhole, or the probes' guarantee
        assert model


@pytest.mark.parametrize("spec", ["k6-b8", "k3-b4x4", "k7-b4-m1", "k6-b7-m2"])
def test_the_chance_beyond_k_matches_random_pairs_through_the_scheme(spec: str) -> None:
    """The Monte Carlo estimate against pairs drawn otherwise (bit flips one by one, a
    different generator) and asked of the real scheme: within 4 standard errors of both."""
    scheme = SCHEMES[spec]
    rng = np.random.default_rng(7)
    for d in (scheme.k + 1, scheme.k + 3):
        count = 1500
        found = 0
        for _ in range(count):
            a = int(rng.integers(0, 2**63)) * 2 + int(rng.integers(0, 2))
            b = a
            for p in rng.choice(64, size=d, replace=False):
                b ^= 1 << int(p)
            found += shares_a_key(scheme, a, b)
        measured = found / count
        model = P.found_at(scheme, d)
        p = max(min(model, 1 - 1e-3), 1e-3)
        error = math.sqrt(p * (1 - p) / count) + math.sqrt(p * (1 - p) / P.MC_PAIRS)
        assert abs(model - measured) <= 4 * error + 1e-9, (spec, d, model, measured)


def test_within_k_every_pair_is_found_and_the_binomial_recall_is_a_share() -> None:
    for scheme in SCHEMES.values():
        assert all(P.found_at(scheme, d) == 1.0 for d in range(scheme.k + 1))
    k6 = P.binomial_recall(SCHEMES["k6-b8"], 6)
    # at least the binomial mass within 6, at most 1, and more for a wider K
    within = sum(P.binomial(64, 6 / 64, d) for d in range(7))
    assert within <= k6 <= 1
    assert P.binomial_recall(SCHEMES["k8-b3-m1"], 6) > k6


# ------------------------------------------------------------------ buckets


@pytest.mark.parametrize(
    ("spec", "docs"), [("k6-b8", 200_000), ("k3-b4", 50_000), ("k7-b4-m1", 100_000)]
)
def test_the_bucket_model_against_random_fingerprints_bucketed(spec: str, docs: int) -> None:
    """Mean entries a bucket, buckets filled (the per-key bytes), and entries a lookup
    reads, against the real keys of random fingerprints: within 3% (the lookup's, an
    average of 300 random queries, within 10%)."""
    scheme = SCHEMES[spec]
    rng = np.random.default_rng(11)
    fps = rng.integers(0, 2**64, size=docs, dtype=np.uint64)
    keys = scheme.key_array(fps)
    sizes = []
    for t, width in enumerate(P.key_widths(scheme)):
        filled = len(np.unique(keys[:, t]))
        model = 2.0**width * -math.expm1(-docs / 2.0**width)
        assert abs(filled - model) <= 0.03 * model, (t, filled, model)
        sizes.append(docs / filled * (filled / 2.0**width))  # entries over all buckets
        assert sizes[-1] == pytest.approx(P.bucket_size(width, docs))
    counts = [
        dict(zip(*np.unique(keys[:, t], return_counts=True), strict=True))
        for t in range(keys.shape[1])
    ]
    queries = rng.integers(0, 2**64, size=300, dtype=np.uint64)
    tables, probes = scheme.probe_array(queries)
    read = np.array(
        [[counts[t].get(k, 0) for t, k in zip(tables, row, strict=True)] for row in probes.tolist()]
    )
    row = P.row(scheme, docs, max_bucket=10**9)
    assert abs(read.sum(axis=1).mean() - row.entries) <= 0.1 * row.entries
    assert row.probes == probes.shape[1]


# ------------------------------------------------------------------ the cap rule


@settings(max_examples=25, deadline=None)
@given(
    st.integers(1, 10**10),
    st.sampled_from([1, 64, 256, 1024, 4096]),
    st.integers(0, 8),
)
def test_no_listed_layout_reaches_the_cap_below_n(docs: int, max_bucket: int, radius: int) -> None:
    made = P.plan(docs, radius, max_bucket, show=1000, recall=False)
    for r in made.rows:
        assert r.cap_docs > docs and r.bucket_worst <= P.MAX_PLANNED_BUCKET
        assert r.k >= radius and r.entries <= P.MAX_LOOKUP_ENTRIES and not r.excluded
        assert r.probes <= P.MAX_BUCKET_READS
        _, problem = P.planned_bucket(BlockScheme.parse(r.scheme), max_bucket, docs)
        assert problem is None
    for r in made.excluded:
        assert r.excluded  # every exclusion says why
    if made.default_row.cap_docs <= docs:
        assert made.default_row in made.excluded
        assert any("reaches --max-bucket" in why for why in made.default_row.excluded)


@given(st.sampled_from(SPECS), st.integers(1, 4096), st.integers(1, 10**12))
def test_planned_bucket_refuses_exactly_the_schemes_that_reach_the_cap(
    spec: str, max_bucket: int, docs: int
) -> None:
    scheme = SCHEMES[spec]
    size, problem = P.planned_bucket(scheme, max_bucket, docs)
    assert size == docs / 2 ** min(scheme.key_bits())
    assert (problem is not None) == (max_bucket * 2 ** min(scheme.key_bits()) <= docs)
    if problem:
        assert f"neardup plan --docs {docs}" in problem


def test_when_nothing_fits_the_plan_says_why() -> None:
    made = P.plan(10**8, memory=P.parse_bytes("64G"))
    assert made.rows == [] and made.excluded
    text = P.render(made)
    assert "No layout fits" in text
    assert "k6-b8 *" in text  # the default's row, excluded, with why
    assert "reaches --max-bucket 1024 at 67,108,864 documents, below N" in text
    assert "primaries" in text and "coordinator's slot" in text


def test_the_costs_reproduce_the_measurements_they_were_calibrated_on() -> None:
    # layout 3's tables, bench/scale.py: 478 B/doc at 3,000 dev-stream documents (listpack
    # hashes), 389 at 10^6 and 311 at 10^7 (hashtables)
    assert P.family_bytes(SCHEMES["k6-b8"], 3000)["b"] == pytest.approx(478, rel=0.03)
    assert P.family_bytes(SCHEMES["k6-b8"], 10**6)["b"] == pytest.approx(389, rel=0.03)
    assert P.family_bytes(SCHEMES["k6-b8"], 10**7)["b"] == pytest.approx(311, rel=0.03)
    assert P.entry_bytes(SCHEMES["k6-b8"]) == 10
    assert P.row(SCHEMES["k6-b8"], 10**6, 1024).cpu_us == pytest.approx(133.5, rel=0.1)
    assert P.row(SCHEMES["k6-b8"], 10**7, 1024).cpu_us == pytest.approx(309, rel=0.1)


def test_cluster_primaries() -> None:
    bytes_ = {"b": 600.0, "id": 13.0, "dec": 503.0, "dg": 99.0, "log": 0.0, "tx": 875.0}
    assert P.primaries(bytes_, 10**6, 2**40) == 1
    needed = P.primaries(bytes_, 10**8, 64 * 2**30)
    assert needed is not None and needed > 1
    # layout 5 spreads everything that grows with N: 2,090 GB over 64 tags, two a primary
    assert P.primaries(bytes_, 10**9, 64 * 2**30) == 32
    assert P.primaries(bytes_, 10**11, 64 * 2**30) is None  # one tag outgrows a primary


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("64G", 64 * 2**30),
        ("64GiB", 64 * 2**30),
        ("64GB", 64 * 10**9),
        ("1.5T", int(1.5 * 2**40)),
        ("123", 123),
        ("2k", 2048),
    ],
)
def test_sizes(text: str, value: int) -> None:
    assert P.parse_bytes(text) == value


@pytest.mark.parametrize("text", ["", "G", "12Q", "-1G", "64Gi", "0"])
def test_bad_sizes(text: str) -> None:
    with pytest.raises(ValueError):
        P.parse_bytes(text)


# ------------------------------------------------------------------ an index's plan


def test_plan_lines() -> None:
    meta = {"scheme": "k6-b8", "expected_docs": "1000000"}
    out = P.plan_lines(meta, {"documents": 250_000, "evicted": 0}, 1024)
    assert out["of_plan"] == 0.25 and out["evictions"] == "none"
    assert out["bucket_mean_planned"] == round(10**6 / 2**16, 3)
    assert out["bucket_mean_now"] == round(250_000 / 2**16, 3)
    assert P.plan_lines(meta, {"documents": 1, "evicted": 3}, 1024)["evictions"] == "begun"
    assert P.plan_lines({"scheme": "k6-b8"}, {"documents": 1}, 1024) == {}


def test_a_refused_plan_is_a_config_error_before_redis() -> None:
    from detector.index.redis import RedisIndex

    with pytest.raises(ConfigError, match="neardup plan --docs 100000000"):
        RedisIndex(None, SCHEMES["k6-b8"], "x", expected_docs=10**8)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="--expected-docs must be at least 1"):
        RedisIndex(None, SCHEMES["k6-b8"], "x", expected_docs=0)  # type: ignore[arg-type]


# ------------------------------------------------------------------ neardup plan


def test_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--docs", "1000000"]) == 0
    out = capsys.readouterr().out
    head = out.splitlines()[1]
    for column in ("layout", "B/doc b", "entries/lookup", "CPU us/doc", "recall"):
        assert column in head
    assert "k6-b8 *" in out and "Modelled" in out and "Measured" in out


def test_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--docs", "1000000", "--radius", "5", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["docs"] == 10**6 and out["radius"] == 5 and out["layouts"]
    first = out["layouts"][0]
    assert set(first["bytes_per_doc"]) == set(P.FAMILIES)
    assert all(r["k"] >= 5 for r in out["layouts"])
    totals = [r["bytes_per_doc_total"] for r in out["layouts"]]
    assert totals == sorted(totals)  # best first
    assert out["default"]["scheme"] == "k6-b8"


def test_a_sample_stream_with_truth_beside_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--docs", "100000", "--sample", str(SAMPLE), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["sample"]["pairs"] > 0
    assert all(0 <= r["recall_sample"] <= 1 for r in out["layouts"])


def test_a_sample_of_decisions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    decisions = tmp_path / "decisions.jsonl"
    assert main(["detect", str(SAMPLE), "-o", str(decisions)]) == 0
    capsys.readouterr()
    pairs, about = P.read_sample(str(decisions))
    assert about["pairs"] == len(pairs) > 0
    # every pair the default scheme verified, it found through its tables
    assert P.sample_recall(SCHEMES["k6-b8"], pairs) == 1.0
    assert main(["plan", "--docs", "1000", "--sample", str(decisions)]) == 0
    assert "sample" in capsys.readouterr().out


def test_a_stream_with_truth_in_its_records(tmp_path: Path) -> None:
    with (
        gzip.open(SAMPLE, "rt") as s,
        gzip.open(ROOT / "tests/data/sample-truth.jsonl.gz", "rt") as t,
    ):
        joined = [{**json.loads(a), **json.loads(b)} for a, b in zip(s, t, strict=True)]
    path = tmp_path / "with-truth.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in joined))
    pairs, about = P.read_sample(str(path))
    beside, _ = P.read_sample(str(SAMPLE))
    assert len(pairs) == len(beside) > 0 and "in the records" in about["source"]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--docs", "0"], "argument --docs: must be at least 1"),
        (["--docs", "10", "--radius", "65"], "argument --radius: must be between 0 and 63"),
        (["--docs", "10", "--memory", "12Q"], "argument --memory: not a size: '12Q'"),
    ],
)
def test_bad_values_name_the_option(
    args: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        main(["plan", *args])
    assert done.value.code == 2
    assert words in capsys.readouterr().err


def test_an_unreadable_sample(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--docs", "10", "--sample", str(tmp_path / "missing.jsonl")]) == 2
    assert "--sample" in capsys.readouterr().err
    alone = tmp_path / "alone.jsonl"
    alone.write_text('{"id": "a", "text": "no truth anywhere"}\n')
    assert main(["plan", "--docs", "10", "--sample", str(alone)]) == 2
    assert "a stream without truth" in capsys.readouterr().err


def test_the_default_row_is_shown_wherever_it_ranks() -> None:
    made = P.plan(100_000, 3, show=1, recall=False)
    assert made.rows[0].scheme != "k6-b8"
    assert any(r.default and r.scheme == "k6-b8" for r in made.rows)


def test_a_text_window_counts_texts_for_the_newest_and_a_sketch_for_the_rest() -> None:
    """tx with --text-window: the window's texts with their sketches and queue entries,
    a sketch's key for every other document; the plan says so."""
    c = P.COSTS
    assert P.text_bytes(10**8, None) == c.tx
    assert P.text_bytes(10**6, 10**7) == c.tx + c.sketch + c.queue  # all in the window
    assert P.text_bytes(10**8, 0) == c.sketch_key
    assert P.text_bytes(10**8, 10**7) == pytest.approx(
        0.1 * (c.tx + c.sketch + c.queue) + 0.9 * c.sketch_key
    )
    made = P.plan(10**8, window=10**7, recall=False)
    assert made.default_row.bytes["tx"] == pytest.approx(P.text_bytes(10**8, 10**7))
    assert made.to_dict()["text_window"] == 10**7
    assert "--text-window" in P.render(made)


def test_a_short_texts_lookup_is_planned_beside_the_long_ones() -> None:
    """A short text reads every table one probe bit further (detector.radius): for 28
    tables of 16-bit keys, 28 x 17 bucket reads and that many times a bucket's entries."""
    got = P.plan(1_000_000, show=40, recall=False)
    k6b8 = next(r for r in got.rows + got.excluded if r.scheme == "k6-b8")
    reads, entries, cpu = k6b8.short
    assert (k6b8.probes, reads) == (28, 28 * 17)
    assert entries == pytest.approx(17 * k6b8.entries) and cpu > k6b8.cpu_us
    assert k6b8.to_dict()["short_text_lookup"]["bucket_reads"] == 476
