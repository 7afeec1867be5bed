"""detector.evaluate and `neardup eval`; and the end-to-end figure on the bundled sample."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from detector.cli import main
from detector.errors import ConfigError
from detector.evaluate import evaluate, load_jsonl, nearest_earlier, truth_measure

from .helpers import SAMPLE, SAMPLE_TRUTH, read_jsonl, write_jsonl


def decision(doc_id: str, dup: str | None, fp: int = 0) -> dict[str, Any]:
    return {
        "id": doc_id,
        "decision": "unique" if dup is None else "duplicate",
        "duplicate_of": dup,
        "fingerprint": f"{fp:016x}",
    }


def truth(doc_id: str, jaccard: float, similar: str | None = None) -> dict[str, Any]:
    return {"id": doc_id, "max_jaccard_earlier": jaccard, "most_similar_earlier": similar}


# a..h in stream order. True duplicates (Jaccard >= 0.8): b, e, f, g.
TRUTH = [
    truth("a", 0.0),
    truth("b", 0.9, "a"),
    truth("c", 0.5, "a"),
    truth("d", 0.1, "a"),
    truth("e", 0.85, "d"),
    truth("f", 0.95, "a"),
    truth("g", 0.9, "a"),
    truth("h", 0.0),
]
# Said duplicate: b (right), c (wrong), e (right), g (right, but names a later record);
# f has no decision at all (a miss).
DECISIONS = [
    decision("a", None, 0b1),
    decision("b", "a", 0b11),
    decision("c", "a", 0b111),
    decision("d", None, 0xF0),
    decision("e", "d", 0xF1),
    decision("g", "h", 0b1),
    decision("h", None, 0xFFFF),
]


def test_evaluate_hand_computed() -> None:
    scores = evaluate(DECISIONS, TRUTH, threshold=0.8)
    # tp = b, e, g = 3; fp = c = 1; fn = f = 1
    assert scores["records"] == 8
    assert scores["decided"] == 7
    assert scores["true_duplicates"] == 4
    assert scores["said_duplicate"] == 4
    assert scores["precision"] == 0.75
    assert scores["recall"] == 0.75
    assert scores["f1"] == 0.75
    assert scores["duplicate_of_not_earlier"] == 1


def test_evaluate_threshold_changes_the_truth() -> None:
    scores = evaluate(DECISIONS, TRUTH, threshold=0.5)  # c becomes a true duplicate
    assert (scores["true_duplicates"], scores["precision"], scores["recall"]) == (5, 1.0, 0.8)


def test_a_negative_threshold_is_a_cosines_only() -> None:
    """--threshold takes -1..1 (a cosine may be negative); a Jaccard is never below 0."""
    cosine = [{"id": "a", "max_cosine_earlier": -0.2}]
    assert truth_measure(cosine, "auto", -0.5) == ("max_cosine_earlier", -0.5)
    assert truth_measure(TRUTH, "jaccard", 0.0) == ("max_jaccard_earlier", 0.0)
    with pytest.raises(ConfigError, match="--threshold of a Jaccard must be between 0 and 1"):
        truth_measure(TRUTH, "auto", -0.5)


def test_evaluate_without_duplicates_on_either_side() -> None:
    scores = evaluate([decision("a", None)], [truth("a", 0.0)])
    assert (scores["precision"], scores["recall"]) == (1.0, 1.0)


def test_nearest_earlier() -> None:
    fps = np.array([0b0, 0b1, 0b111, 0xFF], np.uint64)
    assert nearest_earlier(fps).tolist() == [65, 1, 2, 5]


def test_load_jsonl_reports_the_bad_line(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "x.jsonl", [{"a": 1}, b"", b"{oops"])
    with pytest.raises(ConfigError, match="3"):
        load_jsonl(str(path))


def test_eval_command_prints_the_scores(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dec = write_jsonl(tmp_path / "decisions.jsonl", DECISIONS)
    tru = write_jsonl(tmp_path / "truth.jsonl.gz", TRUTH, gz=True)
    assert main(["eval", str(dec), str(tru), "--json"]) == 0
    scores = json.loads(capsys.readouterr().out)
    assert (scores["precision"], scores["recall"], scores["duplicate_of_not_earlier"]) == (
        0.75,
        0.75,
        1,
    )
    assert main(["eval", str(dec), str(tru)]) == 0
    text = capsys.readouterr().out
    assert "precision: 0.75" in text and "recall: 0.75" in text


def test_eval_command_writes_a_png_report(tmp_path: Path) -> None:
    complete = [*DECISIONS, decision("f", None, 0x0F)]  # the report needs every fingerprint
    dec = write_jsonl(tmp_path / "decisions.jsonl", complete)
    tru = write_jsonl(tmp_path / "truth.jsonl", TRUTH)
    report = tmp_path / "report.png"
    assert main(["eval", str(dec), str(tru), "--report", str(report)]) == 0
    assert report.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert report.stat().st_size > 10_000


def test_eval_report_with_a_missing_decision_is_a_clean_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dec = write_jsonl(tmp_path / "decisions.jsonl", DECISIONS)  # f has no decision
    tru = write_jsonl(tmp_path / "truth.jsonl", TRUTH)
    assert main(["eval", str(dec), str(tru), "--report", str(tmp_path / "r.png")]) == 2
    assert "no decision" in capsys.readouterr().err


def test_eval_with_the_files_swapped_is_a_clean_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Decisions where the truth should be (an easy slip): exit code 2 and a message
    naming the problem, not a KeyError traceback."""
    dec = write_jsonl(tmp_path / "decisions.jsonl", DECISIONS)
    tru = write_jsonl(tmp_path / "truth.jsonl", TRUTH)
    assert main(["eval", str(tru), str(dec)]) == 2
    assert "neardup: error:" in capsys.readouterr().err


# --- the bundled sample, end to end -------------------------------------------------


def test_sample_is_the_head_of_the_dev_stream() -> None:
    """tests/data holds the first 400 records of the dev stream and their truth lines, so
    that the project stands alone."""
    records, truths = read_jsonl(SAMPLE), read_jsonl(SAMPLE_TRUTH)
    assert len(records) == len(truths) == 400
    assert [r["id"] for r in records] == [t["id"] for t in truths]
    assert sum(t["max_jaccard_earlier"] >= 0.8 for t in truths) == 10


def test_detect_and_eval_on_the_sample(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Measured with the defaults (k6-b8, threshold 0.8, built-in weights): precision 1.0
    and recall 1.0 (10 of 10 near duplicates found, none wrongly). The sample has only
    10 true duplicates, so one miss is recall 0.9 and one false alarm precision ~0.91:
    the bounds below allow neither."""
    decisions = tmp_path / "decisions.jsonl"
    report = tmp_path / "report.png"
    assert main(["detect", str(SAMPLE), "-o", str(decisions), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["eval", str(decisions), str(SAMPLE_TRUTH), "--json", "--report", str(report)]) == 0
    scores = json.loads(capsys.readouterr().out)
    assert scores["records"] == scores["decided"] == 400
    assert scores["duplicate_of_not_earlier"] == 0
    assert scores["precision"] >= 0.99, scores
    assert scores["recall"] >= 0.99, scores
    assert report.read_bytes()[:4] == b"\x89PNG"
