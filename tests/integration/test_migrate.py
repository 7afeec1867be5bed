"""`neardup index migrate` on indexes that the code of key layouts 2, 3 and 4 wrote
(tests/data/layout{2,3,4}-index.jsonl.gz, made by tests/data/make_old_index.py), on the
server and the cluster: refused until migrated, with a message that names the command;
then lookups, stats and export give what they gave before, every decision is a record in
its shard's decision hashes, the coordinator keeps no decision or id hash, the old bucket
strings are gone, a second run and a run cut short are harmless, and new commits work."""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from redis.cluster import RedisCluster

from detector.errors import ConfigError
from detector.index import Query
from detector.index.redis import RedisIndex, maintenance
from detector.index.redis.keys import RECORD
from detector.index.redis.migrate import migrate
from detector.records import Document
from detector.settings import EngineSettings

from .admin import drop_index, index_keys, unique
from .endpoints import REDIS_CLUSTER_URL
from .processes import neardup
from .test_index_stats import cli

DATA = Path(__file__).resolve().parents[1] / "data"


def restore(client: Any, name: str, layout: str) -> dict[str, Any]:
    """The keys of the fixture of `layout` into index `name`; what the old code answered
    of it."""
    with gzip.open(DATA / f"layout{layout}-index.jsonl.gz", "rt") as f:
        head = json.loads(f.readline())
        for line in f:
            k = json.loads(line)
            key = k["key"].replace("NAME", name)
            client.restore(key, k["pttl"], base64.b64decode(k["dump"]), replace=True)
    expect: dict[str, Any] = head["expect"]
    return expect


Restored = Callable[[str], tuple[str, dict[str, Any]]]


@pytest.fixture
def restored(backend: Any) -> Iterator[Restored]:
    """Restores the fixture of a layout into a new index: (its name, what the old code
    answered); dropped after the test."""
    names: list[str] = []

    def make(layout: str) -> tuple[str, dict[str, Any]]:
        names.append(unique("migrate"))
        return names[-1], restore(backend, names[-1], layout)

    try:
        yield make
    finally:
        for name in names:
            drop_index(backend, name)


@pytest.fixture(params=["2", "3", "4"])
def old(restored: Restored, request: Any) -> tuple[str, dict[str, Any]]:
    return restored(request.param)


def records_only(client: Any, name: str) -> bool:
    """Every decision of the index is a record (keys.RECORD) in a shard's decision hash,
    and the coordinator keeps no decision key or id hash of an old layout."""
    keys = index_keys(client, name)
    hashes = [k for k in keys if b"}:dc:" in k]
    values = [v for k in hashes for v in client.hvals(k)]
    old = [k for k in keys if k.startswith(f"nd:{{{name}}}:".encode()) and b":dec:" in k]
    old += [k for k in keys if k.startswith(f"nd:{{{name}}}:id:".encode())]
    return bool(values) and all(v[:1] == RECORD for v in values) and not old


def answers(index: RedisIndex, expect: dict[str, Any]) -> dict[str, Any]:
    """What `expect` holds, as the migrated index answers it."""
    queries = [Query(space, int(fp, 16), "") for space, fp in expect["queries"]]
    found = index.lookup(queries)
    return {
        # the window of texts (none, once bound) is newer than every old layout
        "meta": {
            **{k: v for k, v in index.meta().items() if k != "text_window"},
            "layout": expect["meta"]["layout"],
        },
        # the server's memory varies; the window of texts is newer than every old layout
        "stats": {
            k: v
            for k, v in index.stats().items()
            if k not in ("server_used_memory", "windowed_texts")
        },
        "export": [_without_cluster(d) for d in maintenance.documents(index)],
        "queries": expect["queries"],
        "found": [[f.exact, [[c.id, c.distance] for c in f.candidates]] for f in found],
    }


def _without_cluster(document: dict[str, Any]) -> dict[str, Any]:
    """An exported document as an old layout wrote it: the decision's cluster is newer
    than every old layout, and an old decision's reads as its partner, or itself."""
    d = dict(document["decision"])
    assert d.pop("cluster") == (d["duplicate_of"] or d["id"])
    return {**document, "decision": d}


def families(client: Any, name: str) -> dict[str, int]:
    index = RedisIndex(client, EngineSettings().block_scheme(), name)
    out: dict[str, int] = {}
    for key in index_keys(client, name):
        family = index.layout.family(key) or "?"
        out[family] = out.get(family, 0) + 1
    return out


def test_an_old_index_is_refused_until_migrated_then_answers_as_before(
    backend: Any, old: tuple[str, dict[str, Any]]
) -> None:
    name, expect = old
    layout = expect["meta"]["layout"]
    assert (families(backend, name).get("b", 0) > 1000) == (layout == "2")  # bucket strings
    with pytest.raises(ConfigError, match=f"neardup index migrate --index {name}"):
        RedisIndex.open(backend, name)
    with pytest.raises(ConfigError, match=f"key layout {layout}, not 5: stop its consumers"):
        RedisIndex(backend, EngineSettings().block_scheme(), name).bind(expect["meta"]["version"])
    at = ["--redis-url", REDIS_CLUSTER_URL, "--redis-cluster"]
    refused = neardup(
        ["index", "stats", "--index", name, *(at if isinstance(backend, RedisCluster) else [])]
    )
    assert refused.returncode != 0 and "neardup index migrate" in refused.stderr

    ran = cli(backend, "index", "migrate", "--index", name)
    assert ran.returncode == 0, ran.stderr
    assert "meta: layout 5" in ran.stderr and "old bucket strings deleted" in ran.stderr
    assert "decisions moved into the shards" in ran.stderr

    have = families(backend, name)
    assert "b" not in have and "dec" not in have and have["bh"] > 0 and have["sp"] > 0
    assert records_only(backend, name)
    index = RedisIndex.open(backend, name)
    assert index.meta()["layout"] == "5"
    assert answers(index, expect) == expect
    # the candidates are there to be found: the lookups found some
    assert sum(len(f[1]) for f in expect["found"]) > len(expect["found"])

    again = migrate(backend, name, progress=lambda _: None)  # a second run: nothing to do
    assert again.already and again.deleted == 0 and again.moved == 0
    assert answers(RedisIndex.open(backend, name), expect) == expect

    # new commits: a copy of an indexed record is found, a new record is unique
    settings = EngineSettings(keep_old_versions=True)
    index = RedisIndex(backend, settings.block_scheme(), name)
    detector = settings.detector(index)
    exported = [r for r in expect["export"] if "text" in r]
    copy, new = exported[0], "a record none of the sample's resembles " * 30
    decisions = detector.process([Document("copy-1", copy["text"]), Document("new-1", new)])
    assert decisions[0].decision == "duplicate" and decisions[0].duplicate_of == copy["id"]
    assert decisions[1].decision == "unique"
    assert index.stats()["committed"] == expect["stats"]["committed"] + 1


CUTS = ["versions to enter", "space t:", "decisions moved into the shards", "meta: layout 5"]


@pytest.mark.parametrize(
    ("layout", "cut_at"),
    [*(("2", c) for c in CUTS), *((old, c) for old in ("3", "4") for c in CUTS[2:])],
)
def test_a_migration_cut_short_is_completed_by_running_it_again(
    backend: Any, restored: Restored, layout: str, cut_at: str
) -> None:
    """Cut after reading the versions (before any hash is written), after writing the
    hashes, after moving the decisions (before the meta flip), or after the flip (before
    the old strings are deleted): a second run leaves what one run does. (Layouts 3 and
    4 have no tables to rebuild: only the last two cuts.)"""
    name, expect = restored(layout)

    class Cut(Exception):
        pass

    def progress(message: str) -> None:
        if cut_at in message:
            raise Cut(message)

    with pytest.raises(Cut):
        migrate(backend, name, progress=progress)
    done = migrate(backend, name, progress=lambda _: None)
    assert done.already == (cut_at == "meta: layout 5")
    assert (done.deleted > 1000) == (layout == "2")
    assert "b" not in families(backend, name) and records_only(backend, name)
    assert answers(RedisIndex.open(backend, name), expect) == expect


def test_an_index_of_another_layout_is_not_migrated(backend: Any) -> None:
    name = unique("migrate")
    try:
        backend.hset(f"nd:{{{name}}}:meta", mapping={"layout": "1", "scheme": "k6-b8"})
        with pytest.raises(ConfigError, match="index its documents again"):
            migrate(backend, name, progress=lambda _: None)
        with pytest.raises(ConfigError, match="no index"):
            migrate(backend, unique("none"), progress=lambda _: None)
    finally:
        drop_index(backend, name)


def test_a_range_left_pending_is_applied_by_the_migration(backend: Any, restored: Restored) -> None:
    """A committer that died before applying its range left it pending and its digests
    unwritten: the migration from layout 2 writes them and takes the range off the pending
    list (from layout 3 a pending range stays for the consumers' repair)."""
    name, expect = restored("2")
    digests = [k for k in index_keys(backend, name) if b"}:dg:" in k]
    unapplied = {
        (key, field): number
        for key in digests
        for field, number in backend.hgetall(key).items()
        if int(number) > 240
    }
    assert len(unapplied) >= 5
    for key, field in unapplied:
        backend.hdel(key, field)
    pending = f"nd:{{{name}}}:pending"
    backend.zadd(pending, {"241:259:1700000000": 241})

    done = migrate(backend, name, progress=lambda _: None)
    assert done.pending == 1 and backend.zcard(pending) == 0
    assert {(k, f): backend.hget(k, f) for k, f in unapplied} == unapplied
    assert answers(RedisIndex.open(backend, name), expect) == expect


def test_an_export_of_an_old_layout_imports_into_layout_5(
    backend: Any, old: tuple[str, dict[str, Any]], tmp_path: Path
) -> None:
    """The other way across: what an old layout's `index export` wrote (the fixture's
    export, under its header) imports into a new index of layout 5."""
    _, expect = old
    path = tmp_path / "export.jsonl"
    header = {"neardup_index_export": 1, "name": "old", **expect["meta"]}
    assert header["layout"] in ("2", "3", "4")
    with path.open("w") as f:
        for line in (header, *expect["export"]):
            f.write(json.dumps(line) + "\n")
    name = unique("imported")
    try:
        done = cli(backend, "index", "import", str(path), "--index", name)
        assert f"imported {len(expect['export'])} records" in done.stderr
        index = RedisIndex.open(backend, name)
        indexed = [r for r in expect["export"] if "text" in r or "vector" in r]
        assert index.meta()["layout"] == "5"
        assert index.stats()["documents"] == len(indexed)
        prints = [int(r["decision"]["fingerprint"], 16) for r in indexed]
        found = index.lookup([Query("t", fp, "") for fp in prints])
        assert all(
            r["id"] in {c.id for c in f.candidates} for r, f in zip(indexed, found, strict=True)
        )
    finally:
        drop_index(backend, name)
