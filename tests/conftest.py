"""Shared helpers of the unit suite: no network, no servers, everything in tmp files."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
SAMPLE = DATA / "sample.jsonl.gz"
SAMPLE_TRUTH = DATA / "sample-truth.jsonl.gz"

# One profile for the whole suite: no per-example deadline (the first example of a run pays
# for numpy warm-up and the code-point table), and a bounded number of examples so that the
# suite stays well under a minute on two cores. Tests that need fewer set their own.
settings.register_profile(
    "unit",
    deadline=None,
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# HYPOTHESIS_PROFILE=thorough for a long hunt before a release.
settings.register_profile(
    "thorough",
    deadline=None,
    max_examples=2000,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "unit"))


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


def pytest_configure(config: pytest.Config) -> None:
    # kafka-python 3 loads its protocol schemas with a deprecated importlib call
    for message in ("read_text is deprecated", "open_text is deprecated"):
        config.addinivalue_line("filterwarnings", f"ignore:{message}:DeprecationWarning")


@pytest.fixture(autouse=True)
def _no_neardup_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Options come from NEARDUP_* variables too: keep the caller's environment out."""
    for name in list(os.environ):
        if name.startswith("NEARDUP_"):
            monkeypatch.delenv(name)
