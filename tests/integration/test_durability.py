"""Durability and moving an index: on a Redis with AOF persistence (as ops/stack.sh runs
it) the index survives a restart whole; `neardup index export` / `import` move an index
from the server to the cluster, and `index delete` and `index stats` work on it there.

Restarting Redis must come last in the run (conftest orders this module with the fault
tests)."""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from detector.engine import TEXT_SPACE
from detector.index import Query
from detector.index.redis import RedisIndex
from detector.settings import EngineSettings

from ..helpers import SAMPLE, decide_in_batches, read_lines, verdict
from .admin import drop_index, index_keys, unique
from .endpoints import REDIS_CLUSTER_URL, cluster_client, redis_client
from .processes import run_detector
from .servers import Servers

SCHEME = EngineSettings().block_scheme()
CLUSTER = ["--redis-url", REDIS_CLUSTER_URL, "--redis-cluster"]


def contents(client: Any, name: str) -> dict[bytes, Any]:
    """Every key of the index with its value, read by type."""
    out: dict[bytes, Any] = {}
    for key in index_keys(client, name):
        kind = client.type(key)
        if kind == b"string":
            out[key] = client.get(key)
        elif kind == b"hash":
            out[key] = client.hgetall(key)
        elif kind == b"zset":
            out[key] = client.zrange(key, 0, -1, withscores=True)
        elif kind == b"set":
            out[key] = client.smembers(key)
        else:
            raise AssertionError(f"{key!r} is a {kind!r}: the index writes no such key")
    return out


@pytest.mark.exclusive
def test_the_index_survives_a_redis_restart_whole(rclient: redis.Redis, servers: Servers) -> None:
    appendonly = rclient.config_get("appendonly")["appendonly"]
    assert appendonly == "yes", "ops/stack.sh must run Redis with AOF (appendonly yes)"
    raw = read_lines(SAMPLE)
    name = unique("index")
    try:
        index = RedisIndex(rclient, SCHEME, name)
        decide_in_batches(index, raw[:300])
        before = contents(rclient, name)
        assert len(before) > 1000

        servers.restart("redis")
        client = redis_client()
        deadline = time.monotonic() + 30
        while True:  # the AOF loads before Redis answers PING
            try:
                client.ping()
                break
            except redis.RedisError:
                assert time.monotonic() < deadline, "Redis did not come back"
                time.sleep(0.2)
        assert contents(client, name) == before

        # the index goes on where it stopped: the rest decides as it would have
        again = RedisIndex(client, SCHEME, name)
        later = decide_in_batches(again, raw[300:])
        fresh = unique("index")
        try:
            straight = decide_in_batches(RedisIndex(client, SCHEME, fresh), raw)[300:]
            assert [verdict(d.to_dict()) for d in later] == [verdict(d.to_dict()) for d in straight]
        finally:
            drop_index(client, fresh)
        assert int(client.get(f"nd:{{{name}}}:seq") or 0) > int(
            before[f"nd:{{{name}}}:seq".encode()]
        )
    finally:
        drop_index(redis_client(), name)


def test_an_index_exported_from_the_server_and_imported_into_the_cluster(
    rclient: redis.Redis, tmp_path: Path
) -> None:
    raw = read_lines(SAMPLE)
    source, copy = unique("index"), unique("index")
    cluster = cluster_client()
    try:
        decide_in_batches(RedisIndex(rclient, SCHEME, source), raw[:300])
        exported = tmp_path / "index.jsonl.gz"
        run_detector(["index", "export", "--index", source, "-o", str(exported)])
        run_detector(["index", "import", str(exported), "--index", copy, *CLUSTER])
        again = tmp_path / "again.jsonl"
        run_detector(["index", "export", "--index", copy, "-o", str(again), *CLUSTER])

        def records(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
            opener: Any = gzip.open if path.suffix == ".gz" else open
            with opener(path, "rt", encoding="utf-8") as f:
                header, *rest = [json.loads(line) for line in f]
            return header, {r["decision"]["id"]: r for r in rest}

        head_a, a = records(exported)
        head_b, b = records(again)
        assert (head_a["name"], head_b["name"]) == (source, copy)
        assert {k: v for k, v in head_a.items() if k != "name"} == {
            k: v for k, v in head_b.items() if k != "name"
        }
        assert a == b and len(a) == 300
        assert sum("text" in r for r in a.values()) > 250

        stats = json.loads(run_detector(["index", "stats", "--index", copy, *CLUSTER]).stdout)
        assert stats["documents"] == sum("text" in r for r in a.values())
        assert stats["scheme"] == SCHEME.name

        # both decide what comes next alike
        on_server = decide_in_batches(RedisIndex(rclient, SCHEME, source), raw[300:])
        on_cluster = decide_in_batches(RedisIndex(cluster, SCHEME, copy), raw[300:])
        assert [verdict(d.to_dict()) for d in on_server] == [
            verdict(d.to_dict()) for d in on_cluster
        ]

        # delete on the cluster: the record is no candidate any more, its decision gone
        victim = next(r for r in a.values() if "text" in r)
        fp = int(victim["decision"]["fingerprint"], 16)
        index = RedisIndex.open(cluster, copy)
        assert victim["id"] in {
            c.id for c in index.lookup([Query(TEXT_SPACE, fp, "x")])[0].candidates
        }
        run_detector(["index", "delete", "--index", copy, victim["id"], *CLUSTER])
        assert victim["id"] not in {
            c.id for c in index.lookup([Query(TEXT_SPACE, fp, "x")])[0].candidates
        }
        assert index.decisions([victim["id"]]) == {}
    finally:
        drop_index(rclient, source)
        drop_index(cluster, copy)
        cluster.close()
