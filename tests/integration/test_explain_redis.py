"""`neardup explain` on a Redis index (the server, then the cluster): what the index keeps
of the documents `serve` decided gives the same analysis as the file they came from, with
the decisions the index holds; where a text has left the window, the index's own sketch
decides, as it did for the detector."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster

from detector.cli import main
from detector.index.redis import RedisIndex
from detector.pipeline import prepare
from detector.records import Decision
from detector.settings import EngineSettings

from ..helpers import EMBED_SAMPLE, SAMPLE, make_detector, read_lines, write_jsonl
from .admin import drop_index, unique
from .endpoints import REDIS_CLUSTER_URL, REDIS_URL, cluster_client, redis_client

K = 6
# What both paths must agree on; the diff is of the index's normalized texts, not of the
# texts as written, and `where` names the index.
SAME = ("distance", "differing_bits", "scheme", "shared_tables", "threshold", "jaccard")
SAME += ("shingles", "exact", "verdict", "agrees", "cosine")


@pytest.fixture(params=["server", "cluster"])
def at(request: pytest.FixtureRequest) -> Iterator[tuple[Any, list[str], list[str]]]:
    """A client of the Redis server, then of the cluster, and explain's flags for it;
    the indexes a test makes there are dropped at the end."""
    client: redis.Redis | RedisCluster
    if request.param == "server":
        client, flags = redis_client(), ["--redis-url", REDIS_URL]
    else:
        client = cluster_client()
        flags = ["--redis-url", REDIS_CLUSTER_URL, "--redis-cluster"]
    made: list[str] = []
    yield client, flags, made
    for name in made:
        drop_index(client, name)
    client.close()


def index_of(
    at: Any, path: Path, tmp_path: Path, size: int = 64, **options: Any
) -> tuple[str, dict[str, Decision], Path]:
    """`path` decided into a new Redis index as serve decides it (batches of `size`, the
    engine options given): its name, the decisions, and them as a decisions file."""
    client, _, made = at
    name = unique("explain")
    made.append(name)
    # the default schemes (of texts and of vectors), and the window the options give
    window = options.get("text_window")
    index = RedisIndex(client, EngineSettings().block_scheme(), name, text_window=window)
    detector = make_detector(index, **options)
    raw = read_lines(path)
    decided: dict[str, Decision] = {}
    for start in range(0, len(raw), size):
        batch = prepare(detector.engine, [(r, {}) for r in raw[start : start + size]])
        decided |= {d.id: d for d in detector.process(batch.docs, batch.prints)}
    lines = [d.to_json() for d in decided.values()]
    return name, decided, write_jsonl(tmp_path / f"{name}.jsonl", lines)


def explained(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code = main(["explain", *map(str, args), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    got: dict[str, Any] = json.loads(out)
    return got


def test_an_index_explains_its_decisions_as_the_file_does(
    at: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name, decided, decisions = index_of(at, SAMPLE, tmp_path)
    flags = [*at[1], "--index", name]
    duplicates = [d for d in decided.values() if d.duplicate_of is not None]
    assert len(duplicates) == 10
    for d in duplicates:
        stored = explained(capsys, *flags, "--id", d.id)
        read = explained(capsys, SAMPLE, "--decisions", decisions, "--id", d.id)
        if d.exact:  # never indexed: the index keeps no text of an exact copy
            assert stored["jaccard"] is None and stored["diff"] is None
            assert not stored["b"]["text_kept"] and stored["a"]["text_kept"]
            stored |= {k: read[k] for k in ("jaccard", "shingles", "diff")}
        assert {k: stored[k] for k in SAME} == {k: read[k] for k in SAME}, d.id
        for side in ("a", "b"):
            for key in ("id", "space", "fingerprint"):
                assert stored[side][key] == read[side][key]
            assert stored[side]["where"] == f"index {name}"
        assert stored["decision"]["similarity"] == read["decision"]["similarity"]
        assert stored["verdict"]["duplicate"] and stored["agrees"]
        assert stored["diff"]["words_a"] == read["diff"]["words_a"]
    # a pair by ids: the one whose decision names the other is the later
    d = next(d for d in duplicates if not d.exact)
    assert d.duplicate_of is not None
    pair = explained(capsys, *flags, "--ids", f"{d.id},{d.duplicate_of}")
    same = explained(capsys, SAMPLE, "--ids", f"{d.duplicate_of},{d.id}")
    assert {k: pair[k] for k in SAME if k != "agrees"} == {
        k: same[k] for k in SAME if k != "agrees"
    }


def test_a_unique_record_of_an_index_meets_its_nearest_candidate_within_k(
    at: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a batch's records share their decision's time: one a batch, so that "decided
    # before" is the file's order
    name, decided, decisions = index_of(at, SAMPLE, tmp_path, size=1)
    flags = [*at[1], "--index", name]
    order = list(decided.values())
    seen = {"within": 0, "beyond": 0}
    for position, d in enumerate(order):
        # those whose candidates were judged on their texts, and a sample of the rest
        if d.duplicate_of is not None or (d.evidence != "text" and position % 7 != 1):
            continue
        stored = explained(capsys, *flags, "--id", d.id)
        read = explained(capsys, SAMPLE, "--decisions", decisions, "--id", d.id)
        assert not stored["verdict"]["duplicate"] and stored["agrees"]
        if read["distance"] is not None and read["distance"] <= K:
            seen["within"] += 1  # the same candidate: the index gives those within k
            assert stored["distance"] == read["distance"]
            assert stored["verdict"]["reason"] == read["verdict"]["reason"]
        else:
            seen["beyond"] += 1
            assert stored["a"] is None and stored["verdict"]["reason"] == "nothing_to_compare"
    assert seen["within"] > 10 and seen["beyond"] > 10


def test_a_text_that_left_the_window_is_judged_on_the_index_s_sketch(
    at: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name, decided, decisions = index_of(at, SAMPLE, tmp_path, text_window=0)
    flags = [*at[1], "--index", name]
    judged = [d for d in decided.values() if d.duplicate_of and d.evidence == "sketch"]
    assert len(judged) >= 5
    for d in judged:
        stored = explained(capsys, *flags, "--id", d.id)
        read = explained(
            capsys, SAMPLE, "--text-window", "0", "--decisions", decisions, "--id", d.id
        )
        assert stored["sketch"] == read["sketch"] and stored["sketch"]["used"]
        assert stored["verdict"] == read["verdict"]
        assert stored["verdict"]["similarity"] == d.similarity
        # the index keeps no text of either: no exact figure, no diff
        assert stored["jaccard"] is None and stored["diff"] is None
        assert not stored["a"]["text_kept"]


def test_vectors_of_an_index_are_its_stored_forms(
    at: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name, decided, decisions = index_of(at, EMBED_SAMPLE, tmp_path)
    flags = [*at[1], "--index", name]
    near = [d for d in decided.values() if d.duplicate_of and not d.exact][:5]
    assert near
    for d in near:
        stored = explained(capsys, *flags, "--id", d.id)
        read = explained(capsys, EMBED_SAMPLE, "--decisions", decisions, "--id", d.id)
        assert stored["verdict"]["reason"] == read["verdict"]["reason"] == "above_threshold"
        assert stored["distance"] == read["distance"] and stored["scheme"]["k"] == 11
        # both stored forms, where the detector had the new vector itself
        assert abs(stored["cosine"] - read["cosine"]) < 0.005 and read["cosine"] == d.similarity


def test_an_unknown_id_or_index_is_a_clean_error(
    at: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name, _, _ = index_of(at, SAMPLE, tmp_path)
    code = main(["explain", *at[1], "--index", name, "--id", "nope"])
    assert code == 2
    assert f"index {name} has no record with id 'nope'" in capsys.readouterr().err
    code = main(["explain", *at[1], "--index", "it-explain-none", "--ids", "a,b"])
    assert code == 2
    assert "there is no index 'it-explain-none'" in capsys.readouterr().err
