"""`--expected-docs N` on the real Redis server and Redis Cluster: an index made with it
records N in its meta, which no consumer must match (an index without it stays valid, a
consumer giving another N is warned, naming both); `index stats` reports how far the index
is from its plan; a scheme that reaches --max-bucket below N is refused at start, naming
`neardup plan --docs N`."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from redis.cluster import RedisCluster

from detector.blocks import BlockScheme
from detector.errors import ConfigError
from detector.index.redis import RedisIndex

from .admin import index_names, unique  # noqa: F401 - the `names` fixture
from .endpoints import REDIS_CLUSTER_URL
from .processes import neardup, run_detector
from .test_retention import SCHEME, add, entries

PLANNED = 1_000_000  # k6-b8 (16-bit keys) reaches --max-bucket 1024 at 67,108,864


def at(backend: Any) -> list[str]:
    return (
        ["--redis-url", REDIS_CLUSTER_URL, "--redis-cluster"]
        if isinstance(backend, RedisCluster)
        else []
    )


def test_the_plan_is_recorded_and_no_consumer_must_match_it(
    backend: Any, names: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    name = unique("plan")
    names.append(name)
    made = RedisIndex(backend, SCHEME, name, expected_docs=PLANNED)
    made.bind("v1")
    assert made.meta()["expected_docs"] == str(PLANNED)
    RedisIndex(backend, SCHEME, name).bind("v1")  # a consumer without a plan: valid
    with caplog.at_level(logging.WARNING, logger="neardup.index"):
        RedisIndex(backend, SCHEME, name, expected_docs=2_000_000).bind("v1")
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(str(PLANNED) in m and "2000000" in m for m in warned), warned
    assert made.meta()["expected_docs"] == str(PLANNED)  # the index keeps its own plan


def test_an_index_without_a_plan_is_as_before(backend: Any, names: list[str]) -> None:
    name = unique("plan")
    names.append(name)
    RedisIndex(backend, SCHEME, name).bind("v1")
    later = RedisIndex(backend, SCHEME, name, expected_docs=PLANNED)
    later.bind("v1")  # warned, not refused, and not recorded: the index was made without
    assert "expected_docs" not in later.meta()
    out = json.loads(run_detector(["index", "stats", "--index", name, *at(backend)]).stdout)
    assert "plan" not in out and "expected_docs" not in out


def test_stats_say_how_far_the_index_is_from_its_plan(backend: Any, names: list[str]) -> None:
    name = unique("plan")
    names.append(name)
    index = RedisIndex(backend, SCHEME, name, expected_docs=1000)
    index.bind("v1")
    add(index, entries("p", 250, seed=3))
    out = json.loads(run_detector(["index", "stats", "--index", name, *at(backend)]).stdout)
    assert out["expected_docs"] == "1000"
    plan = out["plan"]
    assert plan["expected_docs"] == 1000
    assert plan["of_plan"] == 0.25
    assert plan["bucket_mean_planned"] == round(1000 / 2**16, 3)
    assert plan["bucket_mean_now"] == round(250 / 2**16, 3)
    assert plan["evictions"] == "none"
    assert plan["reaches_max_bucket_at"] == 1024 * 2**16


def test_a_scheme_that_reaches_the_cap_below_the_plan_is_refused(
    backend: Any, names: list[str]
) -> None:
    with pytest.raises(ConfigError, match="neardup plan --docs 100000000"):
        RedisIndex(backend, SCHEME, unique("plan"), expected_docs=100_000_000)
    # a wider scheme, or a larger cap, takes the same plan
    RedisIndex(backend, BlockScheme.parse("k6-b7-m2"), unique("plan"), expected_docs=10**8)
    RedisIndex(backend, SCHEME, unique("plan"), max_bucket=2048, expected_docs=10**8)
    name = unique("plan")
    names.append(name)
    plan = ["--expected-docs", "100000000", "--startup-timeout", "5"]
    done = neardup(["serve", "--index", name, *plan, *at(backend)])
    assert done.returncode == 2, done.stderr[-2000:]
    assert "reaches --max-bucket 1024 at 67,108,864 documents" in done.stderr
    assert "neardup plan --docs 100000000" in done.stderr
    assert not backend.exists(f"nd:{{{name}}}:meta")  # refused before anything was written


def test_the_plan_travels_with_an_export(backend: Any, names: list[str], tmp_path: Any) -> None:
    name, copy = unique("plan"), unique("plan")
    names += [name, copy]
    index = RedisIndex(backend, SCHEME, name, expected_docs=PLANNED)
    index.bind("v1")
    add(index, entries("x", 20, seed=5))
    dump = tmp_path / "export.jsonl"
    run_detector(["index", "export", "--index", name, "-o", str(dump), *at(backend)])
    run_detector(["index", "import", str(dump), "--index", copy, *at(backend)])
    out = json.loads(run_detector(["index", "stats", "--index", copy, *at(backend)]).stdout)
    assert out["plan"]["expected_docs"] == PLANNED
    assert out["plan"]["of_plan"] == round(20 / PLANNED, 4)
