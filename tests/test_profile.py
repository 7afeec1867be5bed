"""The stage profile (`--profile`): nesting, each parent's rest, the loop's order, the wall
a table divides, and that it is off unless turned on."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from detector import profile
from detector.cli import main

from .helpers import SAMPLE, read_jsonl


@pytest.fixture(autouse=True)
def _off() -> None:
    yield
    profile.stop()


def test_off_unless_started_and_then_every_stage_counts() -> None:
    assert profile.active() is None
    with profile.stage("decide"):
        pass
    p = profile.start()
    p.poll(0, 5.0, 9.0)  # before the first records: idle, and no clock yet
    p.poll(100, 10.0, 10.5)
    p.add("decide/lookup", 1.0)
    p.add("decide/index", 2.0)
    p.add("decide", 4.0)
    p.add("publish", 0.25)
    p.batch(100, done=12.0)
    p.batch(0, done=30.0)  # an empty batch moves no clock
    p.poll(300, 12.0, 12.0)
    p.batch(300, done=14.0)
    rows = p.rows(p.docs)
    assert [r["stage"] for r in rows] == [
        "idle",
        "poll",
        "decide",
        "decide/lookup",
        "decide/index",
        f"decide/{profile.REST}",
        "publish",
    ]
    by = {r["stage"]: r for r in rows}
    assert by[f"decide/{profile.REST}"]["seconds"] == pytest.approx(1.0)
    assert by["decide"]["us_per_doc"] == pytest.approx(4.0 / 400 * 1e6)
    assert p.docs == 400 and p.wall == pytest.approx(4.0)
    table = p.table()
    assert table.startswith("profile: 400 documents in 4.00 s wall (10000 us a document)")
    assert "    lookup" in table and "    (rest)" in table


def test_stages_of_another_thread_say_so() -> None:
    p = profile.start()

    def prepare() -> None:
        with profile.stage("prepare"), profile.stage("prepare/fingerprint"):
            pass

    worker = threading.Thread(target=prepare)
    worker.start()
    worker.join()
    with profile.stage("decide"):
        pass
    threads = {r["stage"]: r["thread"] for r in p.rows(1)}
    assert threads == {
        "prepare": "prepare",
        "prepare/fingerprint": "prepare",
        f"prepare/{profile.REST}": "prepare",
        "decide": "loop",
    }


def test_detect_prints_where_the_time_went(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "d.jsonl"
    assert main(["detect", str(SAMPLE), "-o", str(out), "--no-progress", "--profile"]) == 0
    err = capsys.readouterr().err
    records = len(read_jsonl(out))
    assert f"profile: {records:,} documents in" in err
    for stage in ("poll", "prepare", "fingerprint", "decide", "lookup", "index", "publish"):
        assert f" {stage} " in err, stage
    assert main(["detect", str(SAMPLE), "-o", str(out), "--no-progress"]) == 0
    assert "profile:" not in capsys.readouterr().err
