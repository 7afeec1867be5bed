"""Concurrency stress: families of mutual near-duplicates whose members arrive at the same
moment on different partitions, owned by different `neardup serve` processes. Each
process looks up before any of them has committed, so only the atomic check-and-insert
(and the redo from its conflict) can keep two members of a family from both being unique.
"""

from __future__ import annotations

import random
import re
import uuid
from collections.abc import Callable
from itertools import combinations
from typing import Any

import numpy as np

from detector.records import Document
from detector.settings import EngineSettings
from detector.verify import jaccard

from ..helpers import SAMPLE, read_jsonl, verdict
from .admin import create_topics, wait_for_group
from .processes import Names, Serve, logs
from .readers import DecisionReader, Producer

PARTITIONS = 6
CONSUMERS = 3
FAMILIES = 36
WAVES = 3  # the families are sent in three bursts, each right after the other
SETTINGS = EngineSettings()
ENGINE = SETTINGS.engine()
SCHEME = SETTINGS.block_scheme()
WORD = re.compile(r"\w+")


def near_duplicates(a: Any, b: Any) -> bool:
    """As the detector judges a pair: the same token stream, or fingerprints within k and
    word-shingle Jaccard at least the threshold."""
    if a.digest == b.digest:
        return True
    close = (a.fingerprint ^ b.fingerprint).bit_count() <= SCHEME.k
    return close and jaccard(a.shingles, b.shingles) >= max(SETTINGS.threshold, 0.85)


def edit_words(text: str, rng: random.Random, count: int) -> str:
    """Replace `count` words at random positions by new ones."""
    spans = [m.span() for m in WORD.finditer(text)]
    chosen = sorted(rng.sample(range(len(spans)), count), reverse=True)
    for at in chosen:
        start, end = spans[at]
        text = text[:start] + f"edit{rng.randrange(10**6)}x" + text[end:]
    return text


def respace(text: str, rng: random.Random) -> str:
    """The same words with other spacing: an exact copy to the detector."""
    spaces = [m.start() for m in re.finditer(" ", text)]
    for at in sorted(rng.sample(spaces, min(5, len(spaces))), reverse=True):
        text = text[:at] + "  \t" + text[at + 1 :]
    return text


def make_families(run: str) -> list[list[dict[str, str]]]:
    """FAMILIES originals from the sample (long, and no near-duplicate of each other),
    each with 3-5 copies: exact ones (the same text, or other spacing) and near ones (a
    few words changed); checked with the detector's own measures: all members of a family
    are mutual near-duplicates, no member is a near-duplicate of another family's."""
    rng = random.Random(20240607)
    sample = read_jsonl(SAMPLE)
    pool = [r for r in sample if len(WORD.findall(r["text"])) >= 500]
    rng.shuffle(pool)
    families: list[list[dict[str, str]]] = []
    prints_of: list[list[Any]] = []
    for original in pool:
        if len(families) == FAMILIES:
            break
        for _attempt in range(5):
            texts = [original["text"]]
            for c in range(rng.randint(3, 5)):
                kind = rng.choice(["same", "spacing", "near", "near", "near"]) if c else "near"
                if kind == "same":
                    texts.append(original["text"])
                elif kind == "spacing":
                    texts.append(respace(original["text"], rng))
                else:
                    texts.append(edit_words(original["text"], rng, rng.randint(1, 2)))
            prints = ENGINE.fingerprint([Document(f"x{i}", t) for i, t in enumerate(texts)])
            if all(near_duplicates(a, b) for a, b in combinations(prints, 2)):
                break
        else:
            continue
        strangers = [p for ps in prints_of for p in ps]
        if any(near_duplicates(a, b) for a in prints for b in strangers):
            continue
        f = len(families)
        families.append([{"id": f"{run}-f{f:02d}-m{m}", "text": t} for m, t in enumerate(texts)])
        prints_of.append(prints)
    assert len(families) == FAMILIES, "the sample has too few long, distinct originals"
    return families


def test_copies_on_different_partitions_at_once_make_one_unique_per_family(
    names: Names,
    index_at: dict[str, str],
    serve: Callable[..., Serve],
    decisions: DecisionReader,
) -> None:
    families = make_families(uuid.uuid4().hex[:8])
    family_of = {m["id"]: f for f, members in enumerate(families) for m in members}
    records = [m for members in families for m in members]
    assert 4 * FAMILIES <= len(records) <= 6 * FAMILIES

    create_topics({names.input: PARTITIONS})
    servers = [serve(env=index_at) for _ in range(CONSUMERS)]
    # every process owns two partitions
    wait_for_group(names.group, CONSUMERS, why=lambda: logs(servers))

    # Members of a family go to different partitions (so to different processes too,
    # mostly), all of a wave in one burst; the order within a partition is shuffled.
    rng = random.Random(7)
    with Producer() as producer:
        for wave in range(WAVES):
            sends = []
            for f in range(wave, FAMILIES, WAVES):
                first = rng.randrange(PARTITIONS)
                for m, member in enumerate(families[f]):
                    sends.append(((first + m) % PARTITIONS, member))
            rng.shuffle(sends)
            for partition, member in sends:
                producer.send_record(names.input, member, partition=partition)
            producer.flush()

    ids = [r["id"] for r in records]
    missing = decisions.wait_for(ids, timeout=90, idle=1.0)
    assert not missing, f"{len(missing)} records undecided, e.g. {missing[:5]}\n{logs(servers)}"
    assert all(s.alive() for s in servers), logs(servers)

    published = decisions.by_id()
    for i, ds in published.items():
        assert len({verdict(d) for d in ds}) == 1, f"{i} got different decisions: {ds}"
    final = {i: ds[0] for i, ds in published.items()}

    problems = []
    for f, members in enumerate(families):
        got = [final[m["id"]] for m in members]
        uniques = [d["id"] for d in got if d["decision"] == "unique"]
        if len(uniques) != 1:
            problems.append(f"family {f}: {len(uniques)} unique ({uniques}) of {len(members)}")
        for d in got:
            target = d["duplicate_of"]
            if target is None:
                continue
            if family_of.get(target) != f:
                problems.append(f"{d['id']} is a duplicate of {target}, not of its family")
            elif final[target]["exact"]:
                problems.append(f"{d['id']} is a duplicate of {target}, an unindexed copy")
    assert not problems, "\n".join(problems)

    # the exact copies were recognized as such (same token stream), the near ones not
    prints = ENGINE.fingerprint([Document(r["id"], r["text"]) for r in records])
    digest = {r["id"]: p.digest for r, p in zip(records, prints, strict=True)}
    for i, d in final.items():
        if d["exact"]:
            assert digest[i] == digest[d["duplicate_of"]], d
    assert np.mean([d["exact"] for d in final.values()]) > 0.05

    for s in servers:
        assert s.stop() == 0, logs(servers)
