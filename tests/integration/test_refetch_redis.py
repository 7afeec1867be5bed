"""Re-fetches on the Redis index, on one server and on the cluster: the brute-force model
of tests/refetch_model.py, and a revision racing a copy of its new content."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, settings

from detector.decide import Detector
from detector.index import Index
from detector.index.redis import RedisIndex, maintenance
from detector.records import Document
from detector.settings import EngineSettings

from ..helpers import edit_words, words_text
from ..refetch_model import machine
from .admin import unique
from .endpoints import cluster_client, redis_client

STATEFUL = settings(
    max_examples=15,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def on(client: Callable[[], Any]) -> Callable[[bool], tuple[Detector, Index]]:
    def make(keep: bool) -> tuple[Detector, Index]:
        s = EngineSettings(keep_old_versions=keep)
        index = RedisIndex(client(), s.block_scheme(), unique("refetch"))
        return s.detector(index), index

    return make


ServerRefetches = machine(on(redis_client))
ServerRefetches.TestCase.settings = STATEFUL
TestServerRefetches = ServerRefetches.TestCase

ClusterRefetches = machine(on(cluster_client))
ClusterRefetches.TestCase.settings = STATEFUL
TestClusterRefetches = ClusterRefetches.TestCase


def test_a_revision_and_a_copy_of_its_new_content_at_once_are_never_both_unique() -> None:
    """Two consumers of one index: one gets a changed record of a known id, the other a
    copy of the new content under another id, at the same moment. One of the two is a
    duplicate of the other, on the server and on the cluster, however they interleave."""
    for client in (redis_client, cluster_client):
        for attempt in range(12):
            name = unique("race")
            s = EngineSettings()
            first = RedisIndex(client(), s.block_scheme(), name)
            second = RedisIndex(client(), s.block_scheme(), name)
            try:
                a, b = s.detector(first), s.detector(second)
                old, new = words_text(100 + attempt), words_text(200 + attempt)
                a.process([Document("page", old)])
                out: dict[str, Any] = {}
                go = threading.Barrier(2)
                threads = [
                    threading.Thread(target=_race, args=(go, out, a, Document("page", new))),
                    threading.Thread(target=_race, args=(go, out, b, Document("copy", new))),
                ]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join(60)
                page, copy = out["page"], out["copy"]
                assert page.revision == 1
                assert (page.decision, copy.decision) != ("unique", "unique"), (page, copy)
                if copy.decision == "duplicate":
                    assert (copy.duplicate_of, copy.duplicate_of_revision) == ("page", 1)
                else:
                    assert page.duplicate_of == "copy"
            finally:
                maintenance.drop(first)


def test_a_record_and_its_revision_in_one_batch_are_counted_as_indexed() -> None:
    """The first version, numbered and replaced within one commit, never enters the
    lookups; the id map still takes it in and out, so `documents` counts the one live
    version (both when old versions are kept)."""
    for client in (redis_client, cluster_client):
        for keep, live in ((False, 1), (True, 2)):
            s = EngineSettings(keep_old_versions=keep)
            index = RedisIndex(client(), s.block_scheme(), unique("batch"))
            try:
                text = words_text(7, 120)
                docs = [Document("a", text), Document("a", edit_words(text, 2, 1))]
                got = s.detector(index).process(docs)
                assert [(d.revision, d.duplicate_of) for d in got] == [(0, None), (1, None)]
                stats = index.stats()
                assert (stats["documents"], stats["replaced"]) == (live, int(not keep))
            finally:
                maintenance.drop(index)


def _race(go: threading.Barrier, out: dict[str, Any], d: Detector, doc: Document) -> None:
    go.wait()
    out[doc.id] = d.process([doc])[0]
