"""`neardup index stats` and `index delete` on the real Redis server and Redis Cluster: the
counts follow commits, re-fetches, deletes and the retention sweep exactly, also while
consumers write at once; the memory
reported is the index's own, not the server's nor another index's; a delete names the ids
it did not find."""

from __future__ import annotations

import json
import random
import threading
import uuid
from typing import Any

from redis.cluster import RedisCluster

from detector.decide import Detector
from detector.index.redis import RedisIndex, footprint, maintenance
from detector.records import Document
from detector.settings import EngineSettings

from ..helpers import words_text
from .admin import index_keys, index_names, unique  # noqa: F401 - the `names` fixture
from .endpoints import REDIS_CLUSTER_URL
from .processes import run_detector
from .test_retention import SCHEME, add, entries, weight

COUNTS = ("documents", "committed", "replaced", "deleted", "expired")


def new_index(backend: Any, names: list[str], retention: int = 0) -> RedisIndex:
    index = RedisIndex(backend, SCHEME, unique("stats"), retention=retention)
    names.append(index.namespace)
    index.bind("v1")
    return index


def mapped(client: Any, name: str) -> int:
    """The numbers the id map names, field by field (in the shards; '' and NUL are
    versions taken out): what `documents` must equal."""
    return sum(
        sum(1 for v in client.hvals(k) if v not in (b"", b"\0"))
        for k in client.scan_iter(match=f"nd:{{{name}/*}}:id:*")
    )


def counts(index: RedisIndex) -> dict[str, int]:
    stats = index.stats()
    return {k: stats[k] for k in COUNTS}


def assert_exact(index: RedisIndex) -> dict[str, int]:
    """The counts against the id map itself, and the one identity they keep."""
    c = counts(index)
    assert c["documents"] == mapped(index.client, index.namespace), c
    assert c["documents"] == c["committed"] - c["replaced"] - c["deleted"] - c["expired"], c
    return c


def cli(backend: Any, *args: str) -> Any:
    at = ["--redis-url", REDIS_CLUSTER_URL, "--redis-cluster"]
    return run_detector([*args, *(at if isinstance(backend, RedisCluster) else [])])


# ------------------------------------------------------------------------------ stats


def test_stats_of_an_empty_index(backend: Any, names: list[str]) -> None:
    index = new_index(backend, names)
    assert counts(index) == dict.fromkeys(COUNTS, 0)
    memory = maintenance.memory(index, exact=True)
    assert set(memory.bytes) == {"meta"}
    assert memory.total == weight(backend, index.namespace) > 0

    out = json.loads(cli(backend, "index", "stats", "--index", index.namespace).stdout)
    assert {k: out[k] for k in COUNTS} == dict.fromkeys(COUNTS, 0)
    assert out["memory"]["bytes"] == memory.total  # sampled or not: meta is weighed by name
    assert "used_memory" not in out and out["server_used_memory"] > out["memory"]["bytes"]


def test_a_delete_lowers_documents_and_memory_not_committed(backend: Any, names: list[str]) -> None:
    index = new_index(backend, names)
    index.recent_keep = 0  # the recent writes' memory back at once (test_retention.py)
    docs = entries("d", 300, seed=11)
    add(index, docs)
    assert assert_exact(index) == {**dict.fromkeys(COUNTS, 0), "documents": 300, "committed": 300}
    before = maintenance.memory(index, exact=True)
    assert before.total == weight(backend, index.namespace)

    # another index whose name extends this one's, and keys of nothing: none of them count
    other = RedisIndex(backend, SCHEME, index.namespace + "x")
    names.append(other.namespace)
    other.bind("v1")
    add(other, entries("o", 300, seed=12))
    stray = f"nd:{{{index.namespace}}}x:{uuid.uuid4().hex}"
    backend.set(stray, b"x" * 100_000)
    try:
        assert maintenance.memory(index, exact=True).bytes == before.bytes
        assert index.stats()["server_used_memory"] > before.total + 100_000

        # the sampled estimate, made to sample: within its error of the exact figure, so
        # neither the other index (as large) nor the stray key is in it
        # (200 draws: a primary weighs every key when it holds at most 5 x draws, and in
        # layout 3 the two indexes are some 5,400 keys, 1,500 on the cluster's smallest)
        sampled = footprint.weigh(backend, index.layout, index.store.call, draws=200)
        assert not sampled.exact and sampled.variance > 0
        error = sampled.variance**0.5
        assert abs(sampled.total - before.total) < 4 * error + 0.02 * before.total, (
            sampled.to_dict(),
            before.to_dict(),
        )

        gone = [e.id for e in docs[:100]]
        done = cli(backend, "index", "delete", "--index", index.namespace, *gone, "nope", 'a "b"')
        assert done.returncode == 0
        assert 'deleted 100 of 102 ids; not found: "nope", "a \\"b\\""' in done.stderr
        assert assert_exact(index) == {
            **dict.fromkeys(COUNTS, 0),
            "documents": 200,
            "committed": 300,
            "deleted": 100,
        }
        after = maintenance.memory(index, exact=True)
        assert after.total == weight(backend, index.namespace)
        # the families that grow with the documents (not those bounded whatever the index
        # holds: the log and recent writes, LOG_KEEP and RECENT_KEEP; nor the per-shard
        # keys, a fixed cost that at 300 small documents is a fifth of the whole)
        grown = ("bh", "dc", "dg", "id", "tx")
        assert sum(after.bytes.get(f, 0) for f in grown) < 0.8 * sum(
            before.bytes.get(f, 0) for f in grown
        ), (after.bytes, before.bytes)
        assert after.keys["tx"] == 200
        decided = [
            v
            for k in backend.scan_iter(match=f"nd:{{{index.namespace}/*}}:dc:*")
            for v in backend.hvals(k)
        ]
        assert sum(1 for v in decided if v[:1] != b"\0") == 200

        out = json.loads(cli(backend, "index", "stats", "--index", index.namespace).stdout)
        assert (out["documents"], out["committed"], out["deleted"]) == (200, 300, 100)
    finally:
        backend.delete(stray)


def test_delete_names_the_first_ids_it_did_not_find_when_many(
    backend: Any, names: list[str]
) -> None:
    index = new_index(backend, names)
    add(index, entries("k", 3, seed=13))
    missing = [f"m{i:02d}" for i in range(25)]
    done = cli(backend, "index", "delete", "--index", index.namespace, "k0001", *missing)
    first = ", ".join(f'"{m}"' for m in missing[:10])
    assert f"deleted 1 of 26 ids; 25 not found, the first 10: {first}" in done.stderr
    assert counts(index)["documents"] == 2


# ------------------------------------------------------------ the counts under writers


def detector(backend: Any, name: str) -> Detector:
    """A consumer of index NAME: its own RedisIndex (its own lookup mark)."""
    s = EngineSettings()
    return s.detector(RedisIndex(backend, s.block_scheme(), name))


def test_counts_stay_exact_while_consumers_commit_revise_and_delete_at_once(
    backend: Any, names: list[str]
) -> None:
    """Two consumers decide new records and re-fetches with changed content of the same
    ids (a revision replaces its version; of two revisions of one id at once, one is
    decided again), while a third deletes ids as tombstones do."""
    name = unique("stats")
    names.append(name)
    ids = [f"r{i:03d}" for i in range(120)]
    go = threading.Barrier(3)
    consumed = threading.Semaphore(0)
    failed: list[BaseException] = []

    def consume(seed: int) -> None:
        rng = random.Random(seed)
        consumer = detector(backend, name)
        try:
            go.wait()
            for round_ in range(12):
                batch = rng.sample(ids, 10)  # new ids at first, re-fetches later
                consumer.process(
                    [
                        Document(i, words_text(seed * 10_000 + round_ * 100 + n))
                        for n, i in enumerate(batch)
                    ]
                )
        finally:
            consumed.release()

    def delete() -> None:
        """Until both consumers are done, and once more after."""
        rng = random.Random(3)
        index = RedisIndex(backend, SCHEME, name)
        go.wait()
        for _ in range(2):  # a release from each consumer
            while not consumed.acquire(timeout=0.005):
                index.delete(rng.sample(ids, 3))
        index.delete(rng.sample(ids, 3))

    def run(target: Any, *args: Any) -> None:
        try:
            target(*args)
        except BaseException as exc:  # reported by the test, not lost in the thread
            failed.append(exc)
            go.abort()

    threads = [
        threading.Thread(target=run, args=(consume, 1)),
        threading.Thread(target=run, args=(consume, 2)),
        threading.Thread(target=run, args=(delete,)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not failed, failed
    c = assert_exact(RedisIndex(backend, SCHEME, name))
    assert c["replaced"] > 0 and c["deleted"] > 0, c
    live = RedisIndex(backend, SCHEME, name).decisions(ids)
    assert c["documents"] == len(live)  # each live id has one version indexed: no copies


def test_index_keys_are_all_weighed(backend: Any, names: list[str]) -> None:
    """The exact weighing and the test's own: every key of the index, once."""
    index = new_index(backend, names)
    add(index, entries("w", 50, seed=15))
    memory = maintenance.memory(index, exact=True)
    assert round(sum(memory.keys.values())) == len(index_keys(backend, index.namespace))
