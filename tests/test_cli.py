"""detector.cli: `neardup detect`, `fit-idf` and the options, through main() and as a process."""

from __future__ import annotations

import base64
import gzip
import json
import os
import random
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from detector.cli import delete_summary, main, parser
from detector.features import IdfTable

from .helpers import ROOT, SAMPLE, read_jsonl, run_module, verdicts, write_jsonl


def words_text(seed: int, n: int = 300) -> str:
    rng = random.Random(seed)
    return " ".join(f"w{rng.randrange(20_000)}" for _ in range(n))


TEXT = words_text(1)
NEAR = " ".join(w if i % 97 else "changed" for i, w in enumerate(TEXT.split()))
OTHER = words_text(2)


def detect(
    tmp_path: Path, records: list[Any], *options: str, gz: bool = False, name: str = "in.jsonl"
) -> tuple[int, list[dict[str, Any]], list[dict[str, Any]]]:
    """Run `neardup detect` in process; return (exit code, decisions, error records)."""
    src = write_jsonl(tmp_path / (name + (".gz" if gz else "")), records, gz=gz)
    out, err = tmp_path / "out.jsonl", tmp_path / "errors.jsonl"
    code = main(
        ["detect", str(src), "-o", str(out), "--errors", str(err), "--no-progress", *options]
    )
    decisions = read_jsonl(out) if out.exists() else []
    errors = read_jsonl(err) if err.exists() else []
    return code, decisions, errors


# --- bad input through detect ------------------------------------------------------------

BAD_LINES: dict[str, tuple[bytes, str]] = {
    "not json": (b"{not json", "invalid_json"),
    "invalid utf-8": (b'{"id": "x", "text": "\xff\xfe"}', "invalid_utf8"),
    "array": (b"[1, 2]", "not_an_object"),
    "number": (b"3.14", "not_an_object"),
    "string": (b'"text"', "not_an_object"),
    "missing id": (b'{"text": "t"}', "missing_id"),
    "id a number": (b'{"id": 7, "text": "t"}', "bad_id"),
    "empty id": (b'{"id": "", "text": "t"}', "bad_id"),
    "missing text": (b'{"id": "x"}', "missing_text"),
    "text a list": (b'{"id": "x", "text": ["t"]}', "bad_text"),
    "embedding strings": (b'{"id": "x", "text": "t", "embedding": ["a"]}', "bad_embedding"),
    "embedding NaN": (b'{"id": "x", "text": "t", "embedding": [NaN]}', "embedding_nan"),
    "embedding zero": (b'{"id": "x", "text": "t", "embedding": [0, 0]}', "embedding_zero"),
    "embedding empty": (b'{"id": "x", "text": "t", "embedding": []}', "bad_embedding"),
    "embedding bool": (b'{"id": "x", "text": "t", "embedding": [true]}', "bad_embedding"),
    "meta a list": (b'{"id": "x", "text": "t", "meta": [1]}', "bad_meta"),
    "url a number": (b'{"id": "x", "text": "t", "url": 1}', "bad_url"),
    "too large": (json.dumps({"id": "x", "text": "y" * 5000}).encode(), "too_large"),
}


@pytest.mark.parametrize("batch_size", ["1", "512"])
def test_every_bad_line_is_one_error_record_and_good_lines_are_decided(
    tmp_path: Path, batch_size: str
) -> None:
    lines: list[Any] = [{"id": "first", "text": TEXT}]
    expected_errors = []
    for n, (raw, reason) in enumerate(BAD_LINES.values()):
        lines.append(raw)
        expected_errors.append((len(lines), reason))
        lines.append({"id": f"good{n}", "text": TEXT if n % 2 else OTHER})
    lines.append(b"")  # blank lines are skipped, but still counted as lines
    lines.append(b"   \t")
    lines.append({"id": "last", "text": NEAR})
    code, decisions, errors = detect(
        tmp_path, lines, "--batch-size", batch_size, "--max-bytes", "4000", "--workers", "0"
    )
    assert code == 0
    assert [(e["line"], e["reason"]) for e in errors] == expected_errors
    for e in errors:
        assert e["source"] == "in.jsonl"
        assert e["raw_base64"] and e["detail"] is not None
    good = ["first"] + [f"good{n}" for n in range(len(BAD_LINES))] + ["last"]
    assert [d["id"] for d in decisions] == good
    by_id = {d["id"]: d for d in decisions}
    assert by_id["last"]["decision"] == "duplicate" and by_id["last"]["duplicate_of"] == "first"
    assert by_id["good1"]["exact"] is True and by_id["good1"]["duplicate_of"] == "first"


@pytest.mark.parametrize(
    ("case", "raw"),
    [
        (
            "integer too large for a float",
            b'{"id": "x", "text": "t", "embedding": [1' + b"0" * 400 + b"]}",
        ),
        ("deeply nested json", b"[" * 100_000 + b"]" * 100_000),
        ("lone surrogate in the text", b'{"id": "x", "text": "bad \\ud800 text"}'),
        ("lone surrogate in the id", b'{"id": "\\udc00", "text": "bad id"}'),
    ],
)
def test_detect_survives_hostile_lines(tmp_path: Path, case: str, raw: bytes) -> None:
    """Lines that are valid JSON text but break Python-level assumptions: each gets a
    decision or an error record, and the lines around it are decided; the exit code is 0."""
    lines = [{"id": "before", "text": TEXT}, raw, {"id": "after", "text": NEAR}]
    code, decisions, errors = detect(tmp_path, lines, "--workers", "0", "--batch-size", "1")
    assert code == 0
    ids = [d["id"] for d in decisions]
    assert ids[0] == "before" and ids[-1] == "after"
    assert len(decisions) + len(errors) == 3, "every line accounted for"
    assert all(e["line"] == 2 for e in errors)


def test_gzip_input_and_output(tmp_path: Path) -> None:
    records = [{"id": "a", "text": TEXT}, {"id": "b", "text": NEAR}, {"id": "c", "text": OTHER}]
    src = write_jsonl(tmp_path / "in.jsonl.gz", records, gz=True)
    out = tmp_path / "out.jsonl.gz"
    assert main(["detect", str(src), "-o", str(out), "--workers", "0", "--no-progress"]) == 0
    with gzip.open(out, "rt") as f:
        decisions = [json.loads(line) for line in f]
    assert [(d["id"], d["decision"], d["duplicate_of"]) for d in decisions] == [
        ("a", "unique", None),
        ("b", "duplicate", "a"),
        ("c", "unique", None),
    ]
    # gzip is recognized by its magic bytes, whatever the file is called
    renamed = tmp_path / "renamed.jsonl"
    renamed.write_bytes(src.read_bytes())
    code, decisions2, _ = detect(tmp_path, [], "--workers", "0", name="unused")
    assert code == 0 and decisions2 == []
    assert (
        main(
            [
                "detect",
                str(renamed),
                "-o",
                str(tmp_path / "o2.jsonl"),
                "--workers",
                "0",
                "--no-progress",
            ]
        )
        == 0
    )
    assert verdicts(read_jsonl(tmp_path / "o2.jsonl")) == verdicts(decisions)


def test_stdin_input_and_stdout_output() -> None:
    body = b"".join(
        json.dumps(r).encode() + b"\n"
        for r in [{"id": "a", "text": TEXT}, {"id": "b", "text": TEXT}]
    )
    body += b"garbage\n"
    done = run_module(["detect", "-", "--no-progress"], stdin=body)
    assert done.returncode == 0, done.stderr.decode()
    decisions = [json.loads(line) for line in done.stdout.decode().splitlines()]
    assert [(d["id"], d["decision"], d["exact"]) for d in decisions] == [
        ("a", "unique", False),
        ("b", "duplicate", True),
    ]
    stderr = done.stderr.decode()
    error_lines = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    assert [(e["line"], e["reason"]) for e in error_lines] == [(3, "invalid_json")]
    assert "Traceback" not in stderr
    assert "reading records from stdin" not in stderr, "a pipe needs no word of help"


@pytest.mark.skipif(sys.platform != "linux", reason="a pseudo-terminal of Linux")
def test_detect_on_a_terminal_says_it_reads_stdin_and_ends_on_ctrl_d() -> None:
    """With no input named and stdin a terminal, detect used to wait in silence."""
    import pty

    terminal, its_end = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEARDUP_")}
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "detector", "detect", "--no-progress"],
            stdin=its_end,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            env=env | {"PYTHONPATH": str(ROOT)},
        )
        os.close(its_end)
        os.write(terminal, json.dumps({"id": "typed", "text": TEXT}).encode() + b"\n\x04")
        out, err = proc.communicate(timeout=60)
    finally:
        os.close(terminal)
    assert proc.returncode == 0, err.decode()
    first = err.decode().splitlines()[0]
    assert first.startswith("neardup: reading records from stdin") and "Ctrl-D" in first
    assert "neardup detect FILE" in first
    assert json.loads(out)["id"] == "typed"


def test_gzip_on_stdin_with_worker_processes() -> None:
    body = gzip.compress(
        b"".join(
            json.dumps(r).encode() + b"\n"
            for r in [
                {"id": "a", "text": TEXT},
                {"id": "b", "text": NEAR},
                {"id": "c", "text": OTHER},
            ]
        )
    )
    done = run_module(
        ["detect", "--no-progress", "--workers", "2", "--batch-size", "1"], stdin=body
    )
    assert done.returncode == 0, done.stderr.decode()
    decisions = [json.loads(line) for line in done.stdout.decode().splitlines()]
    assert [(d["id"], d["decision"], d["duplicate_of"]) for d in decisions] == [
        ("a", "unique", None),
        ("b", "duplicate", "a"),
        ("c", "unique", None),
    ]


# --- decisions ------------------------------------------------------------------------


def test_batch_size_does_not_change_decisions(tmp_path: Path) -> None:
    records = read_jsonl(SAMPLE)[:150]
    _, one, _ = detect(tmp_path, records, "--batch-size", "1", "--workers", "0")
    _, big, _ = detect(tmp_path, records, "--batch-size", "1000", "--workers", "0")
    _, workers, _ = detect(tmp_path, records, "--batch-size", "7", "--workers", "2")
    _, ahead, _ = detect(tmp_path, records, "--batch-size", "7", "--prefetch")
    assert len(one) == len(records)
    assert verdicts(one) == verdicts(big) == verdicts(workers) == verdicts(ahead)


def test_repeated_ids_and_order(tmp_path: Path) -> None:
    records = [
        {"id": "a", "text": TEXT},
        {"id": "b", "text": OTHER},
        {"id": "c", "text": NEAR},
        {"id": "a", "text": OTHER},
        {"id": "c", "text": NEAR},
    ]
    code, decisions, _ = detect(tmp_path, records, "--batch-size", "2", "--workers", "0")
    assert code == 0
    assert [d["id"] for d in decisions] == ["a", "b", "c", "a", "c"]
    assert decisions[4] == decisions[2], "redelivered: the same decision"
    assert decisions[2]["duplicate_of"] == "a"
    # "a" re-fetched with b's text: a revision, decided afresh, an exact copy of b
    a1 = decisions[3]
    assert (a1["revision"], a1["previous_fingerprint"]) == (1, decisions[0]["fingerprint"])
    assert (a1["duplicate_of"], a1["exact"]) == ("b", True)
    assert "revision" not in decisions[0]


def test_options_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    records = [{"id": "a", "text": TEXT}, {"id": "b", "text": NEAR}]
    _, default, _ = detect(tmp_path, records, "--workers", "0")
    assert default[1]["decision"] == "duplicate"
    monkeypatch.setenv("NEARDUP_THRESHOLD", "0.999")
    monkeypatch.setenv("NEARDUP_INDEX", "from-env")
    _, strict, _ = detect(tmp_path, records, "--workers", "0")
    assert strict[1]["decision"] == "unique"
    assert strict[0]["index"] == "from-env"


@pytest.mark.parametrize(
    ("variable", "value"), [("NEARDUP_BATCH_SIZE", "lots"), ("NEARDUP_THRESHOLD", "high")]
)
def test_a_malformed_environment_value_is_a_clean_error(
    tmp_path: Path,
    variable: str,
    value: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A wrong NEARDUP_* value is a configuration error like a wrong --option value:
    exit code 2 and a message, not a Python traceback (main() must not raise)."""
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "text": "b"}])
    monkeypatch.setenv(variable, value)
    try:
        code = main(["detect", str(src), "--workers", "0"])
    except SystemExit as exit_:  # argparse's own clean error would be fine too
        code = exit_.code  # type: ignore[assignment]
    assert code == 2
    assert value in capsys.readouterr().err


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--scheme", "k3-b3"], "argument --scheme: block scheme 'k3-b3': need 0 <= k"),
        (["--scheme", "nonsense"], "argument --scheme: unknown block scheme 'nonsense'"),
        (["--features", "words", "--shingle-size", "0"], "argument --shingle-size: must be"),
        (["--cjk-ngram", "9"], "argument --cjk-ngram: must be between 1 and 4"),
    ],
)
def test_bad_engine_options_are_the_parsers_errors(
    tmp_path: Path, options: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        detect(tmp_path, [{"id": "a", "text": "b"}], *options)
    assert exit_.value.code == 2
    assert f"neardup detect: error: {message}" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--cosine", "0.1", "--vector-recall", "0.99"], "raise --cosine or lower"),
        (["--literal-memory", "1048576"], "give at least 1600000, or lower --max-tokens"),
    ],
)
def test_engine_options_that_cannot_work_together_are_clean_errors(
    tmp_path: Path, options: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, _ = detect(tmp_path, [{"id": "a", "text": "b"}], *options)
    assert code == 2
    err = capsys.readouterr().err
    assert "neardup: error:" in err and message in err


def test_missing_input_is_a_clean_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["detect", str(tmp_path / "nope.jsonl"), "--no-progress"]) == 2
    assert "nope.jsonl" in capsys.readouterr().err


# --- fit-idf ------------------------------------------------------------------------------


def test_fit_idf_writes_a_table_that_detect_loads(tmp_path: Path) -> None:
    corpus = [
        {"id": f"c{i}", "text": words_text(100 + i, 50) + " common words here"} for i in range(30)
    ]
    corpus.append(b"not json: skipped when fitting")
    corpus.append({"id": "v", "embedding": [0.5, 1]})  # no text: no document of the corpus
    corpus.append({"id": "big", "text": "common " * 700_000})  # too large for detect, too
    src = write_jsonl(tmp_path / "corpus.jsonl", corpus)
    table_path = tmp_path / "idf.json.gz"
    assert main(["fit-idf", str(src), "-o", str(table_path), "--min-df", "2"]) == 0
    table = IdfTable.load(table_path)
    assert table.docs == 30
    assert table.doc_freq["common"] == 30
    assert all(df >= 2 for df in table.doc_freq.values())
    assert table.weight("common") < table.weight("a-word-never-seen")

    records = [{"id": "a", "text": TEXT}, {"id": "b", "text": NEAR}, {"id": "c", "text": OTHER}]
    code, decisions, _ = detect(tmp_path, records, "--idf", str(table_path), "--workers", "0")
    assert code == 0
    assert [d["decision"] for d in decisions] == ["unique", "duplicate", "unique"]
    assert table.version in decisions[0]["features"]
    _, plain, _ = detect(tmp_path, records, "--workers", "0")
    assert plain[0]["features"] != decisions[0]["features"]


def _gz(path: Path, body: bytes) -> Path:
    with gzip.open(path, "wb") as f:
        f.write(body)
    return path


def damaged_tables(tmp_path: Path) -> dict[str, Path]:
    good = IdfTable({"alpha": 3, "beta": 1}, 5)
    tables = {
        "plain text": tmp_path / "t.txt",
        "json not gzip": tmp_path / "t.json",
        "truncated gzip": tmp_path / "trunc.gz",
        "gzip of garbage": _gz(tmp_path / "garbage.gz", b"\x00\x01 not json"),
        "a json array": _gz(tmp_path / "array.gz", b"[1, 2, 3]"),
        "another format": _gz(
            tmp_path / "other.gz",
            json.dumps({"format": "something-else/2", "docs": 1, "doc_freq": {}}).encode(),
        ),
        "edited counts": _gz(
            tmp_path / "edited.gz",
            json.dumps(
                {
                    "format": "neardup-idf/1",
                    "version": good.version,
                    "docs": 5,
                    "doc_freq": {"alpha": 4, "beta": 1},
                }
            ).encode(),
        ),
        "format only": _gz(tmp_path / "bare.gz", json.dumps({"format": "neardup-idf/1"}).encode()),
        "doc_freq a list": _gz(
            tmp_path / "list.gz",
            json.dumps(
                {"format": "neardup-idf/1", "version": "idf-x", "docs": 5, "doc_freq": ["alpha"]}
            ).encode(),
        ),
        "docs a string": _gz(
            tmp_path / "docs.gz",
            json.dumps(
                {
                    "format": "neardup-idf/1",
                    "version": good.version,
                    "docs": "5",
                    "doc_freq": good.doc_freq,
                }
            ).encode(),
        ),
        "counts as strings": _gz(
            tmp_path / "strcounts.gz",
            json.dumps(
                {
                    "format": "neardup-idf/1",
                    "version": good.version,
                    "docs": 5,
                    "doc_freq": {"alpha": "3", "beta": "1"},
                }
            ).encode(),
        ),
    }
    tables["plain text"].write_text("hello")
    tables["json not gzip"].write_text(json.dumps({"format": "neardup-idf/1"}))
    tables["truncated gzip"].write_bytes(gzip.compress(b'{"format": "neardup-idf/1"}')[:12])
    return tables


DAMAGED = [
    "plain text",
    "json not gzip",
    "truncated gzip",
    "gzip of garbage",
    "a json array",
    "another format",
    "edited counts",
    "format only",
    "doc_freq a list",
    "docs a string",
    "counts as strings",
]


@pytest.mark.parametrize("case", DAMAGED)
def test_damaged_or_foreign_idf_table_is_a_clean_error(
    tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit code 2 and one line of explanation; main() must not raise (a traceback)."""
    table = damaged_tables(tmp_path)[case]
    # The table's own tokens occur, so that a table that loads but cannot weigh is caught.
    code, decisions, _ = detect(
        tmp_path,
        [{"id": "a", "text": "alpha words here"}, {"id": "b", "text": "beta words there"}],
        "--idf",
        str(table),
        "--workers",
        "0",
    )
    assert code == 2
    assert "neardup: error:" in capsys.readouterr().err
    assert decisions == [], "no decisions with an unusable table"


def test_damaged_idf_table_as_a_process(tmp_path: Path) -> None:
    table = damaged_tables(tmp_path)["edited counts"]
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "text": "alpha"}])
    done = run_module(["detect", str(src), "--idf", str(table)])
    stderr = done.stderr.decode()
    assert done.returncode == 2 and "Traceback" not in stderr
    assert "damaged" in stderr and done.stdout == b""


# --- help -----------------------------------------------------------------------------

DETECT_OPTIONS = [
    "--output",
    "--errors",
    "--batch-size",
    "--index-name",
    "--workers",
    "--progress",
    "--features",
    "--shingle-size",
    "--cjk-ngram",
    "--idf",
    "--scheme",
    "--threshold",
    "--literal-shingle",
    "--max-candidates",
    "--vector-seed",
    "--max-bytes",
]


def test_detect_help_mentions_every_option(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["detect", "--help"])
    assert info.value.code == 0
    text = capsys.readouterr().out
    detect_parser = next(
        a
        for a in parser()._subparsers._group_actions  # type: ignore[union-attr]
    ).choices["detect"]
    declared = {s for a in detect_parser._actions for s in a.option_strings}
    for option in declared | set(DETECT_OPTIONS):
        assert option in text, option
    for name in ("manku-4", "k6-b8", "NEARDUP_"):
        assert name in text


def test_help_and_version_as_a_process() -> None:
    done = run_module(["detect", "--help"])
    assert done.returncode == 0
    assert b"--scheme" in done.stdout
    done = run_module(["--version"])
    assert done.returncode == 0 and done.stdout.startswith(b"neardup ")
    done = run_module([])
    assert done.returncode == 2  # a command is required


@pytest.mark.parametrize(
    ("value", "expected"), [("1", True), ("yes", True), ("off", False), ("False", False)]
)
def test_boolean_options_from_the_environment(
    value: str, expected: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NEARDUP_REDIS_CLUSTER", value)
    args = parser().parse_args(["serve"])
    assert args.redis_cluster is expected


def test_a_malformed_boolean_is_a_clean_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("NEARDUP_REDIS_CLUSTER", "maybe")
    assert main(["serve"]) == 2
    assert "maybe" in capsys.readouterr().err


def test_delete_names_the_ids_it_did_not_find() -> None:
    assert delete_summary(["a", "b", "a"], ["a", "b"]) == "deleted 2 of 2 ids"
    assert delete_summary(["a", 'x "y"', "z\n"], ["a"]) == (
        'deleted 1 of 3 ids; not found: "x \\"y\\"", "z\\n"'
    )
    many = [f"m{i}" for i in range(1_500)]
    assert delete_summary(["a", *many], ["a"]) == (
        "deleted 1 of 1501 ids; 1500 not found, the first 10: "
        + ", ".join(f'"m{i}"' for i in range(10))
    )


def test_index_actions_take_the_redis_options_and_limits_are_options(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = parser().parse_args(["index", "delete", "a", "b", "--index", "x", "--redis-cluster"])
    assert (args.action, args.ids, args.index, args.redis_cluster) == (
        "delete",
        ["a", "b"],
        "x",
        True,
    )
    args = parser().parse_args(["index", "import", "file.jsonl"])
    assert args.index is None  # the name in the file
    serve = parser().parse_args(["serve", "--retention", "86400", "--max-bucket", "64"])
    assert (serve.retention, serve.max_bucket) == (86400, 64)
    detect = parser().parse_args(["detect", "--max-tokens", "10", "--literal-memory", "2000000"])
    assert (detect.max_tokens, detect.literal_memory) == (10, 2_000_000)


def test_detect_applies_the_token_limit(tmp_path: Path) -> None:
    records = [{"id": "short", "text": "a b c"}, {"id": "long", "text": "word " * 50}]
    code, decisions, errors = detect(tmp_path, records, "--max-tokens", "20")
    assert code == 0
    assert [d["id"] for d in decisions] == ["short"]
    assert [e["reason"] for e in errors] == ["too_many_tokens"]


# --- empty texts, and a run of nothing but errors -------------------------------------

EMPTY_PAGE = (
    "<!DOCTYPE html><html><head><style>p {}</style></head>"
    "<body><div><p>&nbsp;</p><img src=a.png></div><script>go()</script></body></html>"
)


def test_a_text_without_words_is_an_error_never_an_exact_copy(tmp_path: Path) -> None:
    """Fingerprint 0 for "" made every later empty text its exact copy: a record with no
    words once normalized (a page: once its text is extracted) and no embedding is an
    `empty_text` error, and never enters the index; one with an embedding is decided on
    its vector as ever."""
    records = [
        {"id": "empty", "text": ""},
        {"id": "blank", "text": "   <br> "},
        {"id": "marks", "text": "!!!"},
        {"id": "page", "text": EMPTY_PAGE},
        {"id": "words", "text": TEXT},
        {"id": "empty-again", "text": ""},
        {"id": "vector", "text": "", "embedding": [0.5, 1.0]},
    ]
    code, decisions, errors = detect(tmp_path, records, "--batch-size", "3", "--workers", "0")
    assert code == 0
    assert [(d["id"], d["decision"]) for d in decisions] == [
        ("words", "unique"),
        ("vector", "unique"),
    ]
    assert [(e["line"], e["reason"], e["detail"]) for e in errors] == [
        (1, "empty_text", "no words once normalized"),
        (2, "empty_text", "no words once normalized"),
        (3, "empty_text", "no words once normalized"),
        (4, "empty_text", "no words once its text is extracted (body)"),
        (6, "empty_text", "no words once normalized"),
    ]


def test_an_id_refetched_empty_keeps_its_indexed_version(tmp_path: Path) -> None:
    """A re-fetch that lost its words is an error, not a revision: the index keeps the
    version before it, so a later copy of that text is still its duplicate."""
    records = [{"id": "a", "text": TEXT}, {"id": "a", "text": " "}, {"id": "b", "text": NEAR}]
    code, decisions, errors = detect(tmp_path, records, "--batch-size", "1", "--workers", "0")
    assert code == 0
    assert [e["reason"] for e in errors] == ["empty_text"]
    assert [(d["id"], d["duplicate_of"]) for d in decisions] == [("a", None), ("b", "a")]


def test_a_run_of_nothing_but_errors_exits_1_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, decisions, errors = detect(tmp_path, [{"id": "e", "text": ""}, b"{not json"])
    assert (code, decisions, len(errors)) == (1, [], 2)
    assert capsys.readouterr().err.rstrip().endswith("every record was an error (exit status 1)")
    # one decision is enough for a 0, and so is an input of no records at all
    assert detect(tmp_path, [{"id": "e", "text": ""}, {"id": "w", "text": TEXT}])[0] == 0
    assert detect(tmp_path, [b"", b"  "])[0] == 0
    assert "every record" not in capsys.readouterr().err


# --- records too large -----------------------------------------------------------------

MiB = 1 << 20


def test_an_error_line_keeps_the_first_4_kib_of_a_large_bad_record(tmp_path: Path) -> None:
    """The line number points at the whole record; a 5 MB record made a 7 MB error line."""
    big = b'{"id": "big", "text": "' + b"y" * (5 * MiB) + b'"}'  # over the limit: cut as read
    bad = b"{" + b"not json " * 300_000  # under it, read whole
    code, decisions, errors = detect(tmp_path, [big, bad, {"id": "ok", "text": TEXT}])
    assert code == 0 and [d["id"] for d in decisions] == ["ok"]
    assert [(e["line"], e["reason"]) for e in errors] == [(1, "too_large"), (2, "invalid_json")]
    for error, raw in zip(errors, (big, bad), strict=True):
        assert (error["raw_bytes"], error["raw_truncated"]) == (len(raw), True)
        assert base64.b64decode(error["raw_base64"]) == raw[:4096]
        assert len(json.dumps(error)) < 6000
    assert errors[0]["detail"] == f"{len(big)} bytes, the limit is {4 * MiB}"


MEMORY_LIMIT = 512 * MiB  # detect on a small input starts under 200 MiB of address space
HUGE = 2048 * MiB


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS is Linux's")
def test_a_line_larger_than_memory_is_too_large_and_the_next_is_decided(tmp_path: Path) -> None:
    """2 GiB of one line in a 9 MB gzip file, with 512 MiB of address space: detect read
    the line whole and died of a MemoryError before deciding anything. It is read by
    chunks and dropped, an error record at its true size, and the record after it is
    decided."""
    path = tmp_path / "huge.jsonl.gz"
    head, tail = b'{"id": "huge", "text": "', b'"}\n'
    with gzip.open(path, "wb", compresslevel=1) as f:
        f.write(head)
        chunk = b"x" * MiB
        for _ in range(HUGE // MiB):
            f.write(chunk)
        f.write(tail + json.dumps({"id": "after", "text": TEXT}).encode() + b"\n")
    out, errors = tmp_path / "out.jsonl", tmp_path / "errors.jsonl"

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    env = {k: v for k, v in os.environ.items() if not k.startswith("NEARDUP_")}
    # OpenBLAS reserves buffers per core as numpy loads: a machine's core count must not
    # decide whether the interpreter starts under the limit
    env |= {"PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1"}
    args = ["detect", str(path), "-o", str(out), "--errors", str(errors), "--no-progress"]
    done = subprocess.run(
        [sys.executable, "-m", "detector", *args],
        env=env,
        preexec_fn=limited,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (error,) = read_jsonl(errors)
    assert (error["line"], error["reason"]) == (1, "too_large")
    assert error["raw_bytes"] == len(head) + HUGE + len(tail) - 1  # its newline is not its
    assert error["raw_truncated"] is True
    assert base64.b64decode(error["raw_base64"]) == (head + chunk)[:4096]
    assert [(d["id"], d["decision"]) for d in read_jsonl(out)] == [("after", "unique")]


# --- the config file and the environment: read in every form, checked -------------------

STRICT = "threshold = 0.999\n"  # makes NEAR unique: proof that the file was read


@pytest.mark.parametrize(
    "where",
    ["--config FILE first", "--config=FILE first", "--config FILE last", "--config=FILE last"],
)
def test_the_config_file_is_read_in_both_forms_anywhere(tmp_path: Path, where: str) -> None:
    config = tmp_path / "neardup.toml"
    config.write_text(STRICT)
    given = [f"--config={config}"] if "=" in where else ["--config", str(config)]
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "text": TEXT}, {"id": "b", "text": NEAR}])
    out = tmp_path / "out.jsonl"
    argv = ["detect", str(src), "-o", str(out), "--workers", "0", "--no-progress"]
    assert main(given + argv if "first" in where else argv + given) == 0
    assert [d["decision"] for d in read_jsonl(out)] == ["unique", "unique"]


def test_the_config_file_from_the_environment_and_a_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "neardup.toml"
    config.write_text("[neardup]\n" + STRICT + 'index = "from-file"\n')
    monkeypatch.setenv("NEARDUP_CONFIG", str(config))
    code, decisions, _ = detect(tmp_path, [{"id": "a", "text": TEXT}, {"id": "b", "text": NEAR}])
    assert code == 0
    assert [d["decision"] for d in decisions] == ["unique", "unique"]
    assert decisions[0]["index"] == "from-file"


def test_an_abbreviated_config_option_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--conf must not be taken for --config by argparse and then dropped unread."""
    config = tmp_path / "neardup.toml"
    config.write_text(STRICT)
    with pytest.raises(SystemExit) as info:
        main(["detect", "-", "--conf", str(config)])
    assert info.value.code == 2
    assert "--config" in capsys.readouterr().err


BAD_FILES = [
    pytest.param(
        "treshold = 0.9\n", "unknown key 'treshold' (did you mean 'threshold'?)", id="unknown key"
    ),
    pytest.param(
        "batch-sise = 9\n",
        "unknown key 'batch-sise' (did you mean 'batch-size'?)",
        id="unknown key, dashes",
    ),
    pytest.param(
        "[neardup]\nshceme = 'k6-b8'\n",
        "unknown [neardup] key 'shceme'",
        id="unknown key in [neardup]",
    ),
    pytest.param(
        'output = "x.jsonl"\n',
        "key 'output': --output is given on the command line only",
        id="command-line only",
    ),
    pytest.param(
        "progress = true\n",
        "--progress is given on the command line only",
        id="command-line only bool",
    ),
    pytest.param(
        'input = "x.jsonl"\n',
        "the input argument is given on the command line only",
        id="positional",
    ),
    pytest.param('topic = "t"\n', "'input_topic' or 'output_topic'", id="an alias"),
    pytest.param(
        'threshold = "high"\n',
        'threshold = "high": expected a number, not a string',
        id="a float for a number",
    ),
    pytest.param(
        "batch_size = 2.5\n",
        "batch_size = 2.5: expected a whole number, not a float",
        id="a float for an int",
    ),
    pytest.param(
        'batch_size = "64"\n',
        'batch_size = "64": expected a whole number, not a string',
        id="a string for an int",
    ),
    pytest.param(
        "batch-size = true\n",
        "batch-size = true: expected a whole number, not a boolean",
        id="a bool for an int",
    ),
    pytest.param(
        'redis_cluster = "yes"\n',
        'redis_cluster = "yes": expected true or false, not a string',
        id="a string for a bool",
    ),
    pytest.param(
        'features = "bag"\n', 'features = "bag": expected one of words, shingles', id="a choice"
    ),
    pytest.param(
        'kafka-security-protocol = "TLS"\n',
        "expected one of PLAINTEXT, SSL, SASL_PLAINTEXT",
        id="a choice of Kafka",
    ),
    pytest.param(
        "scheme = ['k6-b8']\n", "scheme = ['k6-b8']: expected a string, not an array", id="an array"
    ),
    pytest.param(
        "threshold = 0.9\n[kafka]\nbootstrap_servers = 'h:1'\n",
        "unexpected table [kafka]",
        id="another table",
    ),
    pytest.param(
        "[neardup.engine]\nscheme = 'k6-b8'\n",
        "unexpected table [neardup.engine]",
        id="a table in [neardup]",
    ),
    pytest.param(
        "batch-size = 1\nbatch_size = 2\n",
        "'batch_size' is given twice, as batch-size and batch_size",
        id="twice",
    ),
    pytest.param(
        'config = "other.toml"\n', "key 'config': a config file cannot name another", id="itself"
    ),
    pytest.param("threshold = \n", "not valid TOML: ", id="malformed"),
]


@pytest.mark.parametrize(("body", "message"), BAD_FILES)
@pytest.mark.parametrize("form", ["--config FILE", "--config=FILE"])
def test_a_bad_config_file_is_an_error_that_names_the_file_and_the_key(
    tmp_path: Path, body: str, message: str, form: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(body)
    given = ["--config", str(config)] if " " in form else [f"--config={config}"]
    code, decisions, _ = detect(tmp_path, [{"id": "a", "text": TEXT}], *given)
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"neardup: error: config file {config}: " in err
    assert message in err
    assert decisions == []


@pytest.mark.parametrize("case", ["missing", "a directory", "not UTF-8"])
def test_an_unreadable_config_file_is_an_error_that_says_why(
    tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config = {"missing": tmp_path / "nope.toml", "a directory": tmp_path}.get(case)
    if config is None:
        config = tmp_path / "latin1.toml"
        config.write_bytes(b'index = "caf\xe9"\n')
    code, _, _ = detect(tmp_path, [{"id": "a", "text": TEXT}], "--config", str(config))
    err = capsys.readouterr().err
    assert code == 2
    reason = {"missing": "No such file", "a directory": "directory", "not UTF-8": "UTF-8"}[case]
    assert f"config file {config}: " in err and reason in err


BAD_VARIABLES = [
    (
        "NEARDUP_TRESHOLD",
        "1",
        "unknown variable NEARDUP_TRESHOLD (did you mean NEARDUP_THRESHOLD?)",
    ),
    (
        "NEARDUP_threshold",
        "0.9",
        "unknown variable NEARDUP_threshold (did you mean NEARDUP_THRESHOLD",
    ),
    ("NEARDUP_TOPIC", "t", "(did you mean NEARDUP_INPUT_TOPIC or NEARDUP_OUTPUT_TOPIC?)"),
    ("NEARDUP_INDEX_NAME", "x", "(did you mean NEARDUP_INDEX?)"),
    ("NEARDUP_OUTPUT", "x.jsonl", "NEARDUP_OUTPUT: --output is given on the command line only"),
    ("NEARDUP_PROGRESS", "1", "NEARDUP_PROGRESS: --progress is given on the command line only"),
    ("NEARDUP_BATCH_SIZE", "abc", "NEARDUP_BATCH_SIZE='abc': expected a whole number"),
    ("NEARDUP_WORKERS", "2.5", "NEARDUP_WORKERS='2.5': expected a whole number"),
    ("NEARDUP_MAX_CANDIDATES", "", ""),  # empty: unset, no error
    ("NEARDUP_VECTOR_SEED", "lots", "NEARDUP_VECTOR_SEED='lots': expected a whole number"),
    ("NEARDUP_LITERAL_MEMORY", "1e9", "NEARDUP_LITERAL_MEMORY='1e9': expected a whole number"),
    ("NEARDUP_THRESHOLD", "high", "NEARDUP_THRESHOLD='high': expected a number"),
    ("NEARDUP_REDIS_CLUSTER", "maybe", "NEARDUP_REDIS_CLUSTER='maybe': expected true or false"),
    ("NEARDUP_FEATURES", "bag", "NEARDUP_FEATURES='bag': expected one of words, shingles"),
    ("NEARDUP_KAFKA_SASL_MECHANISM", "GSSAPI", "expected one of PLAIN, SCRAM-SHA-256"),
]


@pytest.mark.parametrize(
    ("variable", "value", "message"), BAD_VARIABLES, ids=[v[0] for v in BAD_VARIABLES]
)
def test_a_bad_neardup_variable_is_an_error_that_names_it(
    tmp_path: Path,
    variable: str,
    value: str,
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(variable, value)
    code, decisions, _ = detect(tmp_path, [{"id": "a", "text": TEXT}], "--workers", "0")
    err = capsys.readouterr().err
    if not message:
        assert code == 0 and len(decisions) == 1
        return
    assert code == 2, err
    assert f"neardup: error: environment: {message}" in err or message in err
    assert variable in err


def test_neardup_stack_variables_belong_to_ops_and_are_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NEARDUP_STACK_REDIS_PASSWORD", "pw")
    monkeypatch.setenv("NEARDUP_STACK_ANYTHING_AT_ALL", "x")
    code, decisions, _ = detect(tmp_path, [{"id": "a", "text": TEXT}], "--workers", "0")
    assert code == 0 and len(decisions) == 1


def test_an_unknown_variable_stops_the_process(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    from .helpers import ROOT, SAMPLE

    env = {k: v for k, v in os.environ.items() if not k.startswith("NEARDUP_")}
    env.update(PYTHONPATH=str(ROOT), NEARDUP_TRESHOLD="1")
    out = tmp_path / "out.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "detector", "detect", str(SAMPLE), "-o", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=60,
    )
    assert done.returncode == 2
    assert "NEARDUP_TRESHOLD (did you mean NEARDUP_THRESHOLD?)" in done.stderr
    assert "Traceback" not in done.stderr and not out.exists()


def test_renamed_options_keep_their_old_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    """detect --index-name is --index; produce's and tail's --topic are --input-topic and
    --output-topic, whose variables they now read."""
    for flag in ("--index", "--index-name"):
        assert parser().parse_args(["detect", flag, "x"]).index == "x"
    for flag in ("--topic", "--input-topic"):
        assert parser().parse_args(["produce", flag, "t"]).input_topic == "t"
    for flag in ("--topic", "--output-topic"):
        assert parser().parse_args(["tail", flag, "t"]).output_topic == "t"
    assert parser().parse_args(["produce"]).input_topic == "documents"
    assert parser().parse_args(["tail"]).output_topic == "decisions"
    monkeypatch.setenv("NEARDUP_INPUT_TOPIC", "in")
    monkeypatch.setenv("NEARDUP_OUTPUT_TOPIC", "out")
    monkeypatch.setenv("NEARDUP_INDEX", "ix")
    assert parser().parse_args(["produce"]).input_topic == "in"
    assert parser().parse_args(["tail"]).output_topic == "out"
    serve = parser().parse_args(["serve"])
    assert (serve.input_topic, serve.output_topic, serve.index) == ("in", "out", "ix")
    assert parser().parse_args(["detect"]).index == "ix"
    assert parser().parse_args(["index", "import", "f"]).index == "ix"
