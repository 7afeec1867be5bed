"""The site-template model in Redis (index.redis.templates), on the server and on the cluster:
the same answers as the reference MemoryTemplates for the same lessons, replays that teach
nothing, the cap and the retention TTL; and HTML pages through `neardup serve`, where two
consumers share the model."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from detector.blocks import BlockScheme
from detector.extract import path
from detector.index.redis import RedisIndex
from detector.templates import MemoryTemplates, lesson

from ..helpers import HTML_SAMPLE, read_jsonl
from .admin import create_topics, drop_index, index_keys, unique
from .processes import Names, Serve, logs
from .readers import DecisionReader, Producer


@pytest.fixture
def redis_index(backend: Any) -> Iterator[Callable[..., RedisIndex]]:
    """Fresh indexes on the server, then the cluster (conftest's `backend`), dropped after."""
    made: list[str] = []

    def make(**kwargs: Any) -> RedisIndex:
        made.append(unique("templates"))
        return RedisIndex(backend, BlockScheme.parse("k6-b8"), made[-1], **kwargs)

    yield make
    for name in made:
        drop_index(backend, name)
        assert not index_keys(backend, name)


def test_redis_templates_answer_as_the_reference(redis_index: Callable[..., RedisIndex]) -> None:
    rng = random.Random(7)
    memory, shared = MemoryTemplates(3), redis_index().templates(3)
    for _ in range(60):
        lessons = [
            lesson(f"h{rng.randrange(3)}", rng.randrange(12), sorted(rng.sample(range(40), 8)))
            for _ in range(rng.randrange(1, 6))
        ]
        assert shared.template(lessons) == memory.template(lessons)
        memory.learn(lessons)
        shared.learn(lessons)
        shared.learn(lessons)  # a replayed batch teaches nothing
    everything = [lesson(f"h{h}", 99, list(range(40))) for h in range(3)]
    assert shared.template(everything) == memory.template(everything)
    assert any(memory.template(everything)), "some lines became template"


def test_the_model_lives_as_long_as_the_retention(redis_index: Callable[..., RedisIndex]) -> None:
    index = redis_index(retention=3600)
    index.templates(2).learn([lesson("docs.example", 1, [5, 6])])
    pairs, counts = index.layout.template("docs.example")
    for key in (pairs, counts):
        assert 0 < index.client.ttl(key) <= index.keep
    assert index.client.hlen(counts) == 3  # the two lines, and the bits set in the bitmap
    assert int(index.client.hget(counts, "pairs")) == 2


def page(title: str, body: str, advert: str = "") -> str:
    nav = "".join(f'<li><a href="/c{i}.html">Chapter {i} of the book</a></li>' for i in range(10))
    return (
        f"<!DOCTYPE html><html><body><div class=top><p>The Book of Examples</p>{advert}</div>"
        f"<ul>{nav}</ul><div class=main><h1>{title}</h1><p>{body}</p></div>"
        "<div class=foot><p>Licensed under the terms of the MIT licence, see the file.</p>"
        "</div></body></html>"
    )


def test_html_pages_through_two_serve_consumers(
    names: Names,
    serve: Callable[..., Serve],
    decisions: DecisionReader,
    index_at: dict[str, str],
) -> None:
    """Real pages of the bundled sample, then re-fetches of synthetic pages with a new
    advert, on two partitions read by two consumers sharing one template model."""
    create_topics({names.input: 2})
    servers = [serve(env=index_at), serve(env=index_at)]
    real = read_jsonl(HTML_SAMPLE)[:40]
    words = [
        " ".join(f"word{chr(97 + (i * 7 + j) % 26)}{chr(97 + j % 26)}" for j in range(40))
        for i in range(12)
    ]
    synthetic = [
        {
            "id": f"p{i}",
            "url": f"https://book.example/p{i}.html",
            "text": page(f"Part {chr(65 + i)}", w),
        }
        for i, w in enumerate(words)
    ]
    advert = "<p>Limited offer: the complete bundle is now half price.</p>"
    again = [
        dict(r, id=f"again-{r['id']}", text=page(f"Part {chr(65 + i)}", words[i], advert))
        for i, r in enumerate(synthetic)
    ]
    # The first pages of the site and the first re-fetches teach its template and advert;
    # the later ones are cut by a model that knows them.
    waves = [[*real, *synthetic[:6]], synthetic[6:], again[:6], again[6:]]
    sent = 0
    with Producer() as producer:
        for wave in waves:  # the first re-fetches teach the advert; the next are cut as before
            for n, r in enumerate(wave):
                producer.send(
                    names.input, json.dumps(r).encode(), key=r["id"].encode(), partition=n % 2
                )
            producer.flush()
            sent += len(wave)
            assert decisions.until(
                lambda d, n=sent: len({x["id"] for x in d.records}) >= n, 120, idle=1.0
            ), logs(servers)
    by_id = {d["id"]: d for d in decisions.records}
    assert all(path(by_id[r["id"]]["extraction"]) in ("main", "body") for r in real)
    later = [by_id[r["id"]] for r in [*synthetic[6:], *again[6:]]]
    assert [path(c["extraction"]) for c in later] == ["main"] * len(later)
    later = later[6:]
    assert [(c["duplicate_of"], c["exact"]) for c in later] == [
        (r["id"], True) for r in synthetic[6:]
    ]
    for s in servers:
        assert s.stop() == 0, logs(servers)
