"""Re-fetches on the memory index: the rules of issue 10 against a brute-force model
(tests/refetch_model.py), through `detect` too."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, settings

from detector.decide import Detector
from detector.index import Index
from detector.index.memory import MemoryIndex
from detector.settings import EngineSettings

from .helpers import run_module, words_text, write_jsonl
from .refetch_model import machine


def memory(keep: bool) -> tuple[Detector, Index]:
    s = EngineSettings(keep_old_versions=keep)
    index = MemoryIndex(s.block_scheme())
    return s.detector(index), index


Refetches = machine(memory)
Refetches.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestMemoryRefetches = Refetches.TestCase


def test_detect_treats_an_id_seen_twice_as_a_refetch(tmp_path: Path) -> None:
    old, new = words_text(1), words_text(2)
    records = [
        {"id": "page", "text": old, "url": "https://example.org/page", "version": 1},
        {"id": "page", "text": old, "version": 2},  # unchanged
        {"id": "page", "text": new, "version": 3},  # changed
        {"id": "copy-of-new", "text": new},
        {"id": "copy-of-old", "text": old},
        {"id": "page", "text": old, "version": 2},  # stale
    ]
    path = write_jsonl(tmp_path / "in.jsonl", records)
    done = run_module(["detect", str(path), "-o", str(tmp_path / "out.jsonl")])
    assert done.returncode == 0, done.stderr
    out = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    first, unchanged, changed, copy_new, copy_old, stale = out
    assert first["url"] == "https://example.org/page" and "revision" not in first
    assert unchanged == first
    assert (changed["revision"], changed["previous_fingerprint"]) == (1, first["fingerprint"])
    assert changed["decision"] == "unique" and changed["version"] == 3
    assert (copy_new["duplicate_of"], copy_new["duplicate_of_revision"]) == ("page", 1)
    assert copy_old["decision"] == "unique", "the old version left the index"
    assert stale == changed
    assert b"1 revisions, 1 stale" in done.stderr
