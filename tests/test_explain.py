"""detector.explain and `neardup explain`: a pair as the detector judges it, held to the
detector's own decisions on the bundled samples (texts, pages, vectors, sketches), the
block tables to the scheme, the terminal to the JSON, and bad input to clean errors."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from detector import options
from detector.blocks import BlockScheme
from detector.cli import main
from detector.engine import TEXT_SPACE, Print
from detector.explain import (
    BEYOND_K,
    NO_SHARED_TABLE,
    REASONS,
    Record,
    Rules,
    explain,
    render,
    tables,
)
from detector.index.memory import MemoryIndex
from detector.pipeline import prepare
from detector.records import Decision
from detector.settings import EngineSettings

from .helpers import (
    EMBED_SAMPLE,
    HTML_SAMPLE,
    ROOT,
    SAMPLE,
    read_jsonl,
    read_lines,
    run_module,
    write_jsonl,
)

K = 6  # the default scheme's, k6-b8


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """`neardup explain ARGS` in process: (status, stdout, stderr)."""
    code = main(["explain", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def as_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code, out, err = run(capsys, *args, "--json")
    assert code == 0, err
    assert len(out.splitlines()) == 1
    got: dict[str, Any] = json.loads(out)
    return got


@cache
def decided(path: Path, **options: Any) -> dict[str, Decision]:
    """The detector's own decisions of a bundled file as `neardup detect` makes them
    (pages cut, batches of its 512), by id."""
    settings = EngineSettings(**options)
    index = MemoryIndex(
        settings.block_scheme(),
        vectors=settings.vector_block_scheme(),
        text_window=settings.text_window,
    )
    detector = settings.detector(index)
    raw = read_lines(path)
    out: dict[str, Decision] = {}
    for at in range(0, len(raw), 512):
        records = [(r, {}) for r in raw[at : at + 512]]
        batch = prepare(detector.engine, records, extractor=detector.extractor)
        assert not batch.errors
        out |= {d.id: d for d in detector.process(batch.docs, batch.prints)}
    return out


def decisions_file(tmp_path: Path, path: Path, **options: Any) -> Path:
    """Those decisions as `neardup detect` writes them."""
    lines = [d.to_json() for d in decided(path, **options).values()]
    return write_jsonl(tmp_path / "decisions.jsonl", lines)


def near_duplicates(path: Path) -> list[Decision]:
    return [d for d in decided(path).values() if d.duplicate_of is not None and not d.exact]


# ------------------------------------------------------------------ texts of the sample


def test_every_near_duplicate_of_the_sample_is_within_k_in_a_table_at_its_jaccard(
    capsys: pytest.CaptureFixture[str],
) -> None:
    scheme = BlockScheme.parse("k6-b8")
    pairs = near_duplicates(SAMPLE)
    assert len(pairs) == 8
    for d in pairs:
        got = as_json(capsys, SAMPLE, "--ids", f"{d.duplicate_of},{d.id}")
        assert (got["a"]["id"], got["b"]["id"]) == (d.duplicate_of, d.id)
        assert got["verdict"] | {"text": ""} == {
            "duplicate": True,
            "reason": "above_threshold",
            "evidence": "text",
            "similarity": d.similarity,
            "text": "",
        }
        assert got["jaccard"] == d.similarity  # the detector's figure, to the last bit
        assert got["distance"] == d.distance <= K == got["scheme"]["k"]
        fa, fb = int(got["a"]["fingerprint"], 16), int(got["b"]["fingerprint"], 16)
        assert fb == d.fingerprint and (fa ^ fb).bit_count() == d.distance
        assert got["differing_bits"] == [i for i in range(64) if (fa ^ fb) >> i & 1]
        # the tables listed are those whose keys are equal, each with its key
        keys_a, keys_b = scheme.keys([fa, fb])
        shared = [t for t in range(len(scheme.tables)) if keys_a[t] == keys_b[t]]
        assert shared and [t["table"] for t in got["shared_tables"]] == shared
        for t in got["shared_tables"]:
            assert int(t["key_a"], 16) == int(t["key_b"], 16) == keys_a[t["table"]]
        s = got["shingles"]
        assert s["shared"] / (s["a"] + s["b"] - s["shared"]) == pytest.approx(d.similarity)


def test_a_decision_is_explained_against_the_record_it_names_and_agrees(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    decisions = decisions_file(tmp_path, SAMPLE)
    for d in decided(SAMPLE).values():
        if d.duplicate_of is None:
            continue
        got = as_json(capsys, SAMPLE, "--decisions", decisions, "--id", d.id)
        assert got["a"]["id"] == d.duplicate_of and got["agrees"] is True
        assert got["decision"]["duplicate_of"] == d.duplicate_of and got["note"] is None
        if d.exact:
            assert got["verdict"]["reason"] == "exact_copy" and got["exact"]
            assert got["verdict"]["evidence"] == "digest" and got["distance"] == 0


def test_a_unique_record_is_explained_against_the_earlier_record_nearest_by_fingerprint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    decisions = decisions_file(tmp_path, SAMPLE)
    order = list(decided(SAMPLE).values())
    for at in (1, 150, 299, 399):
        d = order[at]
        if d.duplicate_of is not None:
            continue
        got = as_json(capsys, SAMPLE, "--decisions", decisions, "--id", d.id)
        nearest = min(
            (e.fingerprint ^ d.fingerprint).bit_count() for e in order[:at] if e.id != d.id
        )
        assert got["b"]["id"] == d.id and got["distance"] == nearest
        assert got["verdict"]["duplicate"] is False and got["agrees"] is True
        assert got["verdict"]["reason"] in ("no_shared_table", "beyond_k", "below_threshold")
    first = as_json(capsys, SAMPLE, "--decisions", decisions, "--id", order[0].id)
    assert first["a"] is None and first["verdict"]["reason"] == "nothing_to_compare"


def test_a_pair_beyond_k_says_no_table_found_it(capsys: pytest.CaptureFixture[str]) -> None:
    got = as_json(capsys, SAMPLE, "--ids", "d000001,d000300")
    assert got["distance"] > K and got["shared_tables"] == []
    assert got["verdict"]["reason"] == "no_shared_table" and not got["verdict"]["duplicate"]
    assert got["jaccard"] < 0.8  # the literal figure is shown even where no table finds it
    code, out, _ = run(capsys, SAMPLE, "--ids", "d000300,d000001")  # the file's order wins
    assert code == 0
    assert out.startswith("explain:      d000300 (sample.jsonl.gz line 301) against d000001")
    assert "0 of 28 share a key" in out
    assert "the differing bits fall in every table's key" in out


def test_a_text_window_of_none_judges_on_the_sketch_as_the_detector_did(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    decisions = decisions_file(tmp_path, SAMPLE, text_window=0)
    judged = [
        d
        for d in decided(SAMPLE, text_window=0).values()
        if d.duplicate_of is not None and d.evidence == "sketch"
    ]
    assert judged
    for d in judged:
        got = as_json(capsys, SAMPLE, "--text-window", "0", "--decisions", decisions, "--id", d.id)
        assert got["sketch"]["used"] and got["verdict"]["evidence"] == "sketch"
        assert got["verdict"]["similarity"] == got["sketch"]["estimate"] == d.similarity
        assert got["jaccard"] is not None  # the exact figure too, from the file's text
    # d000220 is a duplicate on its text (0.8315), not on its sketch: both are shown
    assert "d000220" not in {d.id for d in judged}
    got = as_json(capsys, SAMPLE, "--text-window", "0", "--ids", "d000050,d000220")
    assert got["jaccard"] >= 0.8 > got["sketch"]["estimate"]
    assert got["verdict"]["reason"] == "below_threshold" and got["verdict"]["evidence"] == "sketch"


# ---------------------------------------------------------------------- the analysis


def record(doc_id: str, fingerprint: int, text: str = "one two three four five") -> Record:
    shingles = np.array([hash(text) & 0xFFFF], np.uint64)
    p = Print(TEXT_SPACE, fingerprint, f"digest-{doc_id}", text, shingles)
    return Record(doc_id, "test", p, text)


def rules(scheme: str) -> Rules:
    settings = EngineSettings(scheme=scheme)
    engine = settings.engine()
    return Rules(
        settings.block_scheme(),
        settings.vector_block_scheme(),
        settings.literal(engine.kernels),
        engine.kernels,
    )


def test_bits_beyond_k_in_one_block_leave_the_other_tables_holding_both() -> None:
    got = explain(record("a", 0), record("b", 0x7F), rules("k6-b8"))  # 7 bits of block 0
    assert got.distance == 7 and got.verdict.reason == BEYOND_K
    # the tables of two blocks of eight, bits 0-7 in none of their keys: 7 of 8 blocks
    assert [t.bits for t in got.found][:2] == ["8-23", "8-15,24-31"] and len(got.found) == 21
    assert "the lookup keeps the candidates within 6 bits only" in got.verdict.text


@given(st.integers(0, 2**64 - 1), st.sets(st.integers(0, 63), max_size=20))
def test_a_pair_within_k_always_shares_a_table_and_one_beyond_is_told_why(
    fp: int, flips: set[int]
) -> None:
    """Against the scheme itself: the tables listed are those whose keys are within the
    probe radius, and a pair within k always has one (pigeonhole), plain or probed."""
    other = fp
    for bit in flips:
        other ^= 1 << bit
    for spec in ("k6-b8", "k7-b4-m1"):
        got = explain(record("a", fp, "x y"), record("b", other, "z w"), RULES[spec])
        scheme = got.scheme
        keys_a, keys_b = scheme.keys([fp, other])
        found = [
            t
            for t in range(len(scheme.tables))
            if (keys_a[t] ^ keys_b[t]).bit_count() <= scheme.radius
        ]
        assert [t.table for t in got.found] == found
        if len(flips) <= scheme.k:
            assert found and got.verdict.reason == "below_threshold"
        else:
            assert got.verdict.reason == (BEYOND_K if found else NO_SHARED_TABLE)


RULES = {spec: rules(spec) for spec in ("k6-b8", "k7-b4-m1")}


def test_an_index_without_digests_has_no_exact_copies() -> None:
    """Decisions of an index written before digests were kept carry none: two of them are
    not exact copies for that."""
    a, b = record("a", 0, "one two"), record("b", 1, "three four")
    a.print.digest = b.print.digest = ""
    assert explain(a, b, RULES["k6-b8"]).verdict.reason == "below_threshold"
    b.print.digest = a.print.digest = "same"
    assert explain(a, b, RULES["k6-b8"]).verdict.reason == "exact_copy"


def test_tables_name_their_bits_and_keys() -> None:
    first, second, *_ = tables(BlockScheme.parse("k3-b4"), 0xABCD, 0xABCE)
    assert (first.bits, first.width, first.key_a, first.key_b, first.differing) == (
        "0-15",
        16,
        0xABCD,
        0xABCE,
        2,
    )
    assert (second.bits, second.key_a, second.key_b, second.differing) == ("16-31", 0, 0, 0)
    assert [t.bits for t in tables(BlockScheme.parse("k2-b4"), 0, 1)] == [
        *("0-31", "0-15,32-47", "0-15,48-63", "16-47", "16-31,48-63", "32-63")
    ]


# ------------------------------------------------------------------- pages and vectors


def test_an_html_pair_shows_each_page_cut_as_detect_and_extract_cut_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    decisions = decisions_file(tmp_path, HTML_SAMPLE)
    pages = [d for d in near_duplicates(HTML_SAMPLE) if d.extraction]
    assert len(pages) >= 5
    assert main(["extract", str(HTML_SAMPLE)]) == 0
    cut = {r["id"]: r for r in map(json.loads, capsys.readouterr().out.splitlines())}
    for d in pages:
        got = as_json(capsys, HTML_SAMPLE, "--decisions", decisions, "--id", d.id)
        assert got["agrees"] and got["jaccard"] == d.similarity
        for side in (got["a"], got["b"]):
            shown = cut[side["id"]]
            assert (side["extraction"], side["why"]) == (shown["extraction"], shown["why"])
        assert got["b"]["extraction"] == d.extraction
        # the diff is of the cut texts, not of the pages: no markup, no template
        words = sum(len(s["b"].split()) for s in got["diff"]["spans"])
        assert words == len(cut[d.id]["text"].split())
    d = pages[0]
    code, out, _ = run(capsys, HTML_SAMPLE, "--decisions", decisions, "--id", d.id)
    assert code == 0
    cuts = [line for line in out.splitlines() if line.startswith("cut:")]
    assert len(cuts) == 2 and d.extraction in cuts[1] and "of the page's weight" in cuts[1]


def test_a_vector_pair_gives_numpys_cosine_and_the_detectors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    decisions = decisions_file(tmp_path, EMBED_SAMPLE)
    embeddings = {r["id"]: np.array(r["embedding"]) for r in read_jsonl(EMBED_SAMPLE)}
    pairs = near_duplicates(EMBED_SAMPLE)
    assert len(pairs) > 50
    for d in pairs[:10]:
        assert d.duplicate_of is not None
        got = as_json(capsys, EMBED_SAMPLE, "--decisions", decisions, "--id", d.id)
        a, b = embeddings[d.duplicate_of], embeddings[d.id]
        assert got["cosine_exact"] == pytest.approx(
            np.dot(a, b) / np.linalg.norm(a) / np.linalg.norm(b), abs=1e-12
        )
        # the detector's: the new vector against the earlier one's int8 stored form
        assert got["cosine"] == d.similarity and abs(got["cosine"] - got["cosine_exact"]) < 0.01
        assert got["verdict"]["evidence"] == "vector" and got["jaccard"] is None
        assert got["scheme"]["k"] == d.k == 11 and got["a"]["space"] == d.space == "v384"
        assert got["scheme"]["probe_radius"] == 2 and got["shared_tables"]


def test_a_text_and_a_vector_never_meet(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = write_jsonl(
        tmp_path / "mixed.jsonl",
        [
            {"id": "t", "text": "the same words in both records here"},
            {"id": "v", "text": "the same words in both records here", "embedding": [1.0, 2.0]},
        ],
    )
    got = as_json(capsys, src, "--ids", "t,v")
    assert got["verdict"]["reason"] == "different_spaces" and got["distance"] is None
    assert got["diff"]["shared_words"] == 7


# ------------------------------------------------------------ the terminal and the JSON


def test_the_terminal_and_the_json_carry_the_same_figures(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for ids in ("d000050,d000220", "d000001,d000300", "d000050,d000169"):
        got = as_json(capsys, SAMPLE, "--ids", ids)
        code, out, _ = run(capsys, SAMPLE, "--ids", ids)
        assert code == 0
        field = {}
        for line in out.splitlines():
            label, _, value = line.partition(":")
            if not line.startswith(" ") and value:
                field.setdefault(label, []).append(value.strip())
        a, b = got["a"], got["b"]
        assert field["fingerprint"] == [
            f"{a['fingerprint']} {a['id']}",
            f"{b['fingerprint']} {b['id']}",
        ]
        assert field["distance"][0].startswith(f"{got['distance']} of 64 bits; k = 6 (")
        assert field["tables"] == [f"{len(got['shared_tables'])} of 28 share a key"]
        jaccard = re.match(r"([\d.]+) = (\d+) / (\d+)", field["jaccard"][0])
        assert jaccard is not None
        assert float(jaccard[1]) == round(got["jaccard"], 6)
        assert int(jaccard[2]) == got["shingles"]["shared"]
        assert field["verdict"][0].endswith(f"({got['verdict']['reason']})")
        assert field["why"] == [got["verdict"]["text"]]
        assert field["evidence"] == [got["verdict"]["evidence"]]
        shared = got["diff"]["shared_words"]
        words = f"{shared} words shared ({a['id']} has {got['diff']['words_a']}, "
        assert field["diff"][0].startswith(words + f"{b['id']} {got['diff']['words_b']})")


def test_the_json_keys_and_reasons_are_the_documented_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--help and the README list every key of the JSON (and of its objects) and every
    reason: a key added or renamed must be documented."""
    described = next(c.description for c in options.COMMANDS if c.name == "explain")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Why is this a duplicate?") :]
    section = section[: section.index("\n## ")]
    got = as_json(capsys, SAMPLE, "--ids", "d000050,d000220", "--text-window", "0")
    keys = set(got) | set(got["a"]) | set(got["verdict"]) | set(got["scheme"])
    keys |= set(got["shared_tables"][0]) | set(got["shingles"]) | set(got["sketch"])
    keys |= set(got["diff"]) | set(got["diff"]["spans"][0])
    for key in keys:
        assert re.search(rf"\b{key}\b", described), key
        assert f"`{key}`" in section, key
    for reason in REASONS:
        assert reason in described and f"`{reason}`" in section


def test_piped_output_has_no_ansi_escapes_and_color_is_asked_for() -> None:
    args = ["explain", str(SAMPLE), "--ids", "d000050,d000220"]
    piped = run_module(args)
    assert piped.returncode == 0, piped.stderr
    assert b"\x1b" not in piped.stdout and b"{+Re:+}" in piped.stdout
    colored = run_module([*args, "--color"])
    assert b"\x1b[4;32mRe:\x1b[0m" in colored.stdout and b"{+" not in colored.stdout
    as_json = run_module([*args, "--json", "--color"])  # JSON is never colored
    assert b"\x1b" not in as_json.stdout


def on_a_terminal(args: list[str], env: dict[str, str]) -> bytes:
    """What `python -m detector ARGS` writes to a pseudo-terminal as its stdout."""
    import pty

    terminal, its_end = pty.openpty()
    clean = {k: v for k, v in os.environ.items() if not k.startswith("NEARDUP_")}
    clean.pop("NO_COLOR", None)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "detector", *args],
            stdout=its_end,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            env=clean | {"PYTHONPATH": str(ROOT)} | env,
        )
        os.close(its_end)
        out = b""
        while True:
            try:
                chunk = os.read(terminal, 65536)
            except OSError:  # EIO: the process closed its end
                break
            if not chunk:
                break
            out += chunk
        proc.wait(timeout=60)
    finally:
        os.close(terminal)
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    return out


@pytest.mark.skipif(sys.platform != "linux", reason="a pseudo-terminal of Linux")
def test_a_terminal_gets_colors_unless_no_color_is_set() -> None:
    args = ["explain", str(SAMPLE), "--ids", "d000050,d000220"]
    assert b"\x1b[4;32mRe:" in on_a_terminal(args, {})
    plain = on_a_terminal(args, {"NO_COLOR": "1"})
    assert b"\x1b" not in plain and b"{+Re:+}" in plain
    assert b"\x1b[4;32mRe:" in on_a_terminal([*args, "--color"], {"NO_COLOR": "1"})


def test_render_colors_the_diff_or_marks_it() -> None:
    got = explain(record("a", 0, "one two"), record("b", 1, "one three"), RULES["k6-b8"])
    assert "[-two-] {+three+}" in render(got, color=False)
    assert "\x1b[" in render(got, color=True)


# ------------------------------------------------------------------------ two files


def test_two_files_of_one_record_each_explain_as_the_ids_of_one_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    by_id = {r["id"]: r for r in read_jsonl(SAMPLE)}
    first = tmp_path / "first.txt"
    first.write_text(by_id["d000050"]["text"], encoding="utf-8")
    second = write_jsonl(tmp_path / "second.jsonl", [by_id["d000220"]])
    got = as_json(capsys, first, second)
    same = as_json(capsys, SAMPLE, "--ids", "d000050,d000220")
    assert (got["a"]["id"], got["b"]["id"]) == ("first.txt", "d000220")
    for key in ("distance", "jaccard", "shingles", "shared_tables", "verdict", "diff"):
        assert got[key] == same[key], key
    swapped = as_json(capsys, second, first)  # the first file is the earlier record
    assert (swapped["a"]["id"], swapped["b"]["id"]) == ("d000220", "first.txt")


def test_the_same_id_twice_is_a_refetch_never_compared(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one = write_jsonl(tmp_path / "one.jsonl", [{"id": "x", "text": "alpha beta gamma delta"}])
    two = write_jsonl(tmp_path / "two.jsonl", [{"id": "x", "text": "alpha beta gamma"}])
    got = as_json(capsys, one, two)
    assert got["verdict"]["reason"] == "same_id" and not got["verdict"]["duplicate"]


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{sample}", "--ids", "d000050,nope"], "sample.jsonl.gz: no record with id 'nope'"),
        (["{sample}", "--ids", "d000050"], "--ids 'd000050': give two different ids, A,B"),
        (["{sample}"], "give --ids A,B, or --decisions FILE with --id X"),
        (["{sample}", "--id", "d000050"], "give --ids A,B, or --decisions FILE with --id X"),
        (["{sample}", "--decisions", "{bad}", "--id", "x"], "bad.jsonl: line 1 is not a decision"),
        (["{sample}", "--decisions", "{missing}", "--id", "x"], "cannot open input"),
        (["{bad}", "{text}"], "bad.jsonl: not a record: invalid_json"),
        (["{missing}", "{text}"], "cannot open input"),
        (["{empty}", "{text}"], "empty.txt: not a record detect decides (empty_text)"),
        (["{sample}", "{text}", "{text}"], "give one JSONL file with --ids A,B"),
        (["--ids", "a"], "--ids 'a': give two different ids"),
        (["--decisions", "{bad}", "--id", "a"], "reads the Redis index --index"),
    ],
)
def test_bad_input_is_a_clean_error_that_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    (tmp_path / "bad.jsonl").write_text("{not json\n", encoding="utf-8")
    (tmp_path / "text.txt").write_text("some words of a plain text", encoding="utf-8")
    (tmp_path / "empty.txt").write_text(" !!! ", encoding="utf-8")
    names = {
        "sample": SAMPLE,
        "bad": tmp_path / "bad.jsonl",
        "text": tmp_path / "text.txt",
        "empty": tmp_path / "empty.txt",
        "missing": tmp_path / "missing.jsonl",
    }
    code, out, err = run(capsys, *(a.format(**names) for a in args))
    assert code == 2 and out == ""
    assert message in err and err.startswith("neardup: error: ")


def test_an_unknown_id_as_a_process_exits_2_without_a_traceback() -> None:
    done = run_module(["explain", str(SAMPLE), "--ids", "d000001,zzz"])
    assert done.returncode == 2
    assert done.stderr.decode() == "neardup: error: sample.jsonl.gz: no record with id 'zzz'\n"


SHORT_TEXT = (
    "the quick brown fox jumps over a lazy dog while seven tired sailors sing about distant "
    "harbours and the merchant counts his silver coins beside an open window where swallows "
    "nest under old tiles every morning brings new rumours from the northern valley"
)


def test_a_short_text_is_explained_with_the_wider_radius_it_was_looked_up_with(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # 43 words with the last one changed: fingerprints 7 bits apart, beyond the scheme's
    # k = 6 and within the short text's own radius (9), and Jaccard 38/40
    path = tmp_path / "short.jsonl"
    write_jsonl(path, [
        {"id": "a", "text": SHORT_TEXT},
        {"id": "b", "text": SHORT_TEXT.replace("valley", "lantern")},
    ])  # fmt: skip
    decisions = tmp_path / "decisions.jsonl"
    assert main(["detect", str(path), "-o", str(decisions), "--no-progress"]) == 0
    capsys.readouterr()
    b = read_jsonl(decisions)[1]
    assert b["decision"] == "duplicate" and b["duplicate_of"] == "a"
    got = as_json(capsys, path, "--ids", "a,b")
    assert got["distance"] == 7 and got["scheme"]["k"] > K
    assert got["verdict"]["duplicate"] and got["verdict"]["reason"] == "above_threshold"
    assert as_json(capsys, path, "--decisions", decisions, "--id", "b")["agrees"]
    # with no wider radius, the same pair is beyond k, and detect calls b unique
    narrow = as_json(capsys, path, "--ids", "a,b", "--short-k", "6")
    assert narrow["scheme"]["k"] == K and narrow["verdict"]["reason"] == "beyond_k"
