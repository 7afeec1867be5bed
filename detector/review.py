"""`neardup review`: what a run decided, gathered for a person who must choose its knobs.

The data of the page, not the page (detector/review_page.py draws it):

1. The records again, as `neardup detect` read them: parsed, each HTML page cut to its
   main content by an Extractor run in input order (so the template model learns as it
   did), fingerprinted by the Engine; each paired with its decision.
2. Each record's nearest earlier records by fingerprint (brute force, `candidate_pairs`),
   and their literal similarity: the decisions only carry the similarity of duplicates,
   and a threshold's effect shows in the pairs just below it.
3. From those pairs, per space (text, or vectors of one dimension): the distributions of
   distance and similarity, the pairs nearest the threshold on both sides, and what
   moving the threshold or the radius k would change.
4. Clusters (the decisions' `cluster`, else their `duplicate_of` chains) and duplicate
   rates per host or per a `meta` field.
5. With a truth file: the scores `neardup eval` prints, and each false positive and false
   negative with its partner and why it went that way.

Reading a stream again costs what `detect` costs; the pairs cost about N^2/2 popcounts,
exact up to EXHAUSTIVE records and for a random sample of the records beyond.
"""

from __future__ import annotations

import bisect
import re
import zlib
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .blocks import BlockScheme
from .decide import lookup_radius
from .diff import Span, spans
from .engine import TEXT_SPACE
from .errors import ConfigError
from .evaluate import evaluate, outcomes, truth_measure
from .extract import Extracted, Extractor, host_of
from .index import lookup_scheme, scheme_for
from .index.memory import MemoryIndex
from .normalize import strip_markup
from .pipeline import Limits, prepare
from .records import Document
from .settings import EngineSettings
from .stream.files import FileSource

EXHAUSTIVE = 50_000  # records whose pairs are all compared; beyond, a sample of them
PAIR_BUDGET = EXHAUSTIVE * (EXHAUSTIVE - 1) // 2  # fingerprint comparisons at most
WIDER = 4  # bits beyond k that pairs are kept for: what a wider radius would find
CHUNK = 256  # records whose distances to every earlier one are computed at once
LISTED = 50  # pairs a list shows by default (--top)
THRESHOLD_STEPS = (-0.1, -0.05, 0.05, 0.1)
K_STEPS = (-2, -1, 1, 2, 4)
EXACT = "digest"  # a decision's evidence for an exact copy

# Why a true duplicate was called unique, named by what would cure it. Beyond the three,
# a partner within reach and above the threshold can be left out of the --max-candidates
# nearest (short pages of one template: hundreds of candidates within k); the last should
# not happen (a re-fetch that replaced its partner, a text judged on its sketch, decisions
# made with other settings).
NO_TABLE = "no shared table"
BELOW = "below the threshold"
CUT = "a different cut"
NOT_NEAREST = "not among the nearest"
PASSED_OVER = "passed over"
REASONS = (NO_TABLE, BELOW, CUT)
ALL_REASONS = (*REASONS, NOT_NEAREST, PASSED_OVER)

# Progress: a stage's name and its total (None: unknown) -> a function told each step.
Progress = Callable[[str, int | None], Callable[[int], None]]


def no_progress(stage: str, total: int | None) -> Callable[[int], None]:
    return lambda done: None


# --------------------------------------------------------------------------- records


@dataclass
class Record:
    """One input record as the detector decided it, and its decision."""

    at: int  # position among the decided records, in input order
    id: str
    url: str | None
    group: str  # the host of its url, or a meta field (--group-by)
    packed: bytes  # the text decided on, before the fold (an HTML page's cut): zlib
    page: bool  # an HTML page, cut to its main content
    space: str  # "t", or "v384" for a vector of 384 dimensions
    fingerprint: int  # the decision's
    k: int  # its lookup radius (a short text's is wider: decide.lookup_radius)
    compared: np.ndarray  # what the second pass compares: its shingles, or unit vector
    stored: np.ndarray | None  # a vector as the index keeps it (what later ones compare)
    decision: dict[str, Any]

    @property
    def text(self) -> str:
        """Kept packed: a page lists a few hundred texts, and 60,000 of them weigh 700 MB
        as strings (a character of a non-Latin text takes 2 or 4 bytes) and a fifth that
        in zlib."""
        return zlib.decompress(self.packed).decode("utf-8", "surrogatepass")

    @property
    def duplicate(self) -> bool:
        return bool(self.decision["decision"] == "duplicate")

    @property
    def exact(self) -> bool:
        return bool(self.decision.get("exact")) or self.decision.get("evidence") == EXACT


@dataclass
class Reading:
    """The records and what did not line up between the input and the decisions."""

    records: list[Record]
    errors: int = 0  # input records detect would make error records
    undecided: int = 0  # input records no decision names
    unread: int = 0  # decisions that name no input record
    prints_differ: int = 0  # records whose fingerprint is not their decision's


_HEX16 = re.compile(r"[0-9a-f]{16}")


def check_decisions(decisions: Sequence[Any], path: str) -> None:
    """Every line a decision of `neardup detect`: else a ConfigError naming the line."""
    if not decisions:
        raise ConfigError(f"{path}: no decisions")
    for n, d in enumerate(decisions, start=1):
        where = f"{path}: decision {n}"
        if not isinstance(d, dict):
            raise ConfigError(f"{where} is not a JSON object")
        if "reason" in d and "decision" not in d:
            raise ConfigError(f"{where} is an error record, not a decision (give detect's -o)")
        if not isinstance(d.get("id"), str) or d.get("decision") not in ("unique", "duplicate"):
            raise ConfigError(f"{where} needs an id and a decision, unique or duplicate")
        fp = d.get("fingerprint")
        if not isinstance(fp, str) or not _HEX16.fullmatch(fp):
            raise ConfigError(f"{where}: fingerprint {fp!r} is not 16 hex digits")
        if d["decision"] == "duplicate" and not isinstance(d.get("duplicate_of"), str):
            raise ConfigError(f"{where}: a duplicate without duplicate_of")
        for name, kinds in (("distance", (int,)), ("similarity", (int, float))):
            value = d.get(name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, kinds)):
                raise ConfigError(f"{where}: {name} {value!r} is not a number")


def check_truth(truth: Sequence[Any], path: str) -> None:
    """Every line a truth record: an id and the measure the first line has, a number."""
    if not truth:
        raise ConfigError(f"{path}: no truth records")
    if not isinstance(truth[0], dict):
        raise ConfigError(f"{path}: line 1 is not a JSON object")
    field_name, _ = truth_measure(list(truth[:1]))
    for n, t in enumerate(truth, start=1):
        value = t.get(field_name) if isinstance(t, dict) else None
        if not isinstance(t, dict) or not isinstance(t.get("id"), str):
            raise ConfigError(f"{path}: line {n} needs an id (is it a truth file?)")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{path}: line {n} needs {field_name}, a number")


class _KeepingCuts(Extractor):
    """The settings' extractor, keeping each page's cut as it reads, before the fold (the
    decided text casefolded is hard to read)."""

    def __init__(self, like: Extractor) -> None:
        super().__init__(like.mode, like.templates, like.share, like.pages)
        self.cuts: dict[int, Extracted] = {}  # id() of a document of the last batch

    def batch(self, docs: Sequence[Document]) -> list[Extracted | None]:
        got = super().batch(docs)
        self.cuts = {id(d): g for d, g in zip(docs, got, strict=True) if g is not None}
        return got


SOURCE = "source"  # the meta field `--group-by auto` takes when a record has no url


def group_of(doc: Document, group_by: str) -> str:
    """A record's group: the host of its url or the value of a meta field (`meta.NAME`);
    `auto`, the host, else its meta's `source`."""
    meta = doc.meta or {}
    if group_by == "auto":
        host = host_of(doc.url)
        return host or (str(meta[SOURCE]) if meta.get(SOURCE) is not None else "(no url)")
    if group_by == "host":
        return host_of(doc.url) or "(no url)"
    name = group_by.removeprefix("meta.")
    return "(no " + name + ")" if meta.get(name) is None else str(meta[name])


def read_records(
    path: str,
    decisions: Sequence[dict[str, Any]],
    settings: EngineSettings,
    batch_size: int = 512,
    group_by: str = "auto",
    progress: Progress = no_progress,
) -> Reading:
    """The input read as `detect` reads it, each record with its decision: a record's
    decision is the next one of its id, in order (an id decided twice is a re-fetch)."""
    engine = settings.engine()
    extractor = _KeepingCuts(settings.extractor(MemoryIndex(settings.block_scheme())))
    schemes = settings.block_scheme(), settings.vector_block_scheme()
    short_k, weights = settings.short_k, engine.featurizer.weights
    waiting: dict[str, deque[dict[str, Any]]] = {}
    for d in decisions:
        waiting.setdefault(d["id"], deque()).append(d)
    out = Reading([])
    limits = Limits(settings.max_bytes, settings.max_tokens)
    source = FileSource(path, batch_size, settings.max_bytes)
    step = progress(f"reading {path}", len(decisions))  # about as many records
    try:
        for batch in source.batches():
            prepared = prepare(engine, batch.records, limits, extractor)
            out.errors += len(prepared.errors)
            for doc, p in zip(prepared.docs, prepared.prints, strict=True):
                queue = waiting.get(doc.id)
                if not queue:
                    out.undecided += 1
                    continue
                d = queue.popleft()
                fingerprint = int(d["fingerprint"], 16)
                out.prints_differ += fingerprint != p.fingerprint
                cut = extractor.cuts.get(id(doc))
                if p.vector is not None:
                    text = doc.text or ""
                else:
                    text = cut.text if cut is not None else strip_markup(doc.text)
                out.records.append(
                    Record(
                        at=len(out.records),
                        id=doc.id,
                        url=doc.url,
                        group=group_of(doc, group_by),
                        packed=zlib.compress(text.encode("utf-8", "surrogatepass"), 1),
                        page=cut is not None,
                        space=p.space,
                        fingerprint=fingerprint,
                        k=lookup_radius(p, scheme_for(p.space, *schemes).k, short_k, weights),
                        compared=p.vector if p.vector is not None else p.shingles,
                        stored=p.stored,
                        decision=d,
                    )
                )
            step(len(batch.records))
    finally:
        source.close()
    out.unread = sum(len(q) for q in waiting.values())
    if not out.records:
        raise ConfigError(
            f"no decision names a record of {path}: are the decisions and the input of the "
            "same run?"
        )
    return out


# --------------------------------------------------------------------------- pairs


@dataclass
class Pairs:
    """Each sampled record's nearest earlier records of its space by fingerprint: the
    nearest `keep` within `reach` bits, else the single nearest; with the literal
    similarity of each pair (the shingle Jaccard of texts, the cosine of vectors, as the
    second pass computes them). Arrays of equal length, by record and then distance."""

    query: np.ndarray
    other: np.ndarray
    distance: np.ndarray
    similarity: np.ndarray
    sampled: np.ndarray  # positions of the records whose pairs were looked for
    records: int  # of all records

    @property
    def sample(self) -> bool:
        return len(self.sampled) < self.records


def sample_rows(n: int, budget: int | None = None, seed: int = 0) -> np.ndarray:
    """Every record when its N^2/2 comparisons fit the budget (PAIR_BUDGET), else a
    random sample of them (each compared with every record before it)."""
    budget = PAIR_BUDGET if budget is None else budget
    total = n * (n - 1) // 2
    if total <= budget:
        return np.arange(n)
    size = max(1, int(n * budget / total))
    return np.sort(np.random.default_rng(seed).choice(n, size=size, replace=False))


def candidate_pairs(
    records: Sequence[Record],
    reach: dict[str, int],
    keep: int,
    kernels: Any,
    keep_old_versions: bool = False,
    rows: np.ndarray | None = None,
    progress: Progress = no_progress,
) -> Pairs:
    """Pairs (see Pairs) of the records at `rows` (default: sample_rows). A record's
    candidates are the earlier ones of its space and of another id (a re-fetch is decided
    without its own versions) that no later version of their id has replaced yet, unless
    old versions are kept."""
    n = len(records)
    rows = sample_rows(n) if rows is None else rows
    fps = np.array([r.fingerprint for r in records], np.uint64)
    space_names = sorted({r.space for r in records})
    space = np.array([space_names.index(r.space) for r in records], np.int32)
    ids: dict[str, int] = {}
    code = np.array([ids.setdefault(r.id, len(ids)) for r in records], np.int64)
    replaced = np.full(n, n, np.int64)  # where the next version of each record's id comes
    seen: dict[str, int] = {}
    for r in reversed(records):
        replaced[r.at] = seen.get(r.id, n)
        seen[r.id] = r.at
    limit = np.array([reach[s] for s in space_names])
    far = np.int16(99)  # no candidate
    query: list[np.ndarray] = []
    other: list[np.ndarray] = []
    dist: list[np.ndarray] = []
    sims: list[np.ndarray] = []
    step = progress("nearest earlier records", len(rows))
    for start in range(0, len(rows), CHUNK):
        block = rows[start : start + CHUNK]
        width = int(block[-1])
        if width == 0:
            step(len(block))
            continue
        d = np.bitwise_count(fps[block, None] ^ fps[None, :width]).astype(np.int16)
        cols = np.arange(width)[None, :]
        bad = cols >= block[:, None]
        bad |= space[None, :width] != space[block][:, None]
        bad |= code[None, :width] == code[block][:, None]
        if not keep_old_versions:
            bad |= replaced[None, :width] <= block[:, None]
        d[bad] = far
        for at, i in enumerate(block.tolist()):
            row = d[at, :i]
            if not len(row):
                continue
            near = np.flatnonzero(row <= limit[space[i]])
            if len(near):
                near = near[np.argsort(row[near], kind="stable")[:keep]]
            else:
                nearest = int(row.argmin())
                if row[nearest] == far:
                    continue
                near = np.array([nearest])
            query.append(np.full(len(near), i))
            other.append(near)
            dist.append(row[near])
            sims.append(_similarities(records[i], [records[j] for j in near.tolist()], kernels))
        step(len(block))
    return Pairs(
        _joined(query, np.int64),
        _joined(other, np.int64),
        _joined(dist, np.int16),
        _joined(sims, np.float64),
        rows,
        n,
    )


def _joined(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)


def _similarities(mine: Record, theirs: list[Record], kernels: Any) -> np.ndarray:
    """The second pass's measure of a record against earlier ones: the cosine of its
    vector with their stored ones, or the Jaccard of the shingle sets."""
    if mine.stored is not None:
        stored = np.stack([t.stored if t.stored is not None else t.compared for t in theirs])
        return np.asarray(stored @ mine.compared, np.float64)
    return np.asarray(kernels.jaccards(mine.compared, [t.compared for t in theirs]), np.float64)


def similarity(a: Record, b: Record, kernels: Any) -> float:
    """The second pass's measure of `a` against the earlier `b`."""
    if a.space != b.space:
        return 0.0
    return float(_similarities(a, [b], kernels)[0])


# --------------------------------------------------------------------------- per space


@dataclass
class Pair:
    """A record and an earlier one, as a list of the page shows them."""

    later: Record
    earlier: Record | None  # None: not among the records read
    distance: int | None
    similarity: float | None  # ours: the decision's, or computed as the second pass does
    note: str = ""  # why it is listed: the reason of a miss, the evidence of a decision
    reason: str | None = None
    truth: float | None = None
    diff: list[Span] = field(default_factory=list)


@dataclass
class Step:
    """What one setting of a knob would change against the run's, by the pairs."""

    knob: str
    value: float
    gained: int  # records that would become duplicates
    lost: int  # duplicates that would become unique
    gained_true: int | None = None  # of them, true duplicates by the truth
    lost_true: int | None = None
    pairs: int | None = None  # k: candidate pairs within it, against the run's k
    scheme: str | None = None  # k: a scheme of that radius, and its tables


@dataclass
class SpaceReview:
    space: str
    label: str  # "text", "vectors of 384 dimensions"
    measure: str  # "Jaccard" or "cosine"
    knob: str  # the threshold's option: --threshold or --cosine
    threshold: float
    k: int
    scheme: str
    records: int
    distances: dict[str, list[int]]  # "duplicate", "unique" -> a value a record
    similarities: dict[str, list[float]]
    above: list[Pair]  # duplicates nearest the threshold, least similar first
    below: list[Pair]  # candidates within k below it, most similar first
    beyond: list[Pair]  # pairs beyond k at or above it, nearest first
    totals: dict[str, int]  # of each list, before it was cut to --top
    steps: list[Step]
    reproduced: tuple[int, int]  # (decisions the pairs agree with, decisions)


def space_label(space: str) -> str:
    return "text" if space == TEXT_SPACE else f"vectors of {space[1:]} dimensions"


def review_space(
    space: str,
    records: Sequence[Record],
    pairs: Pairs,
    settings: EngineSettings,
    top: int = LISTED,
    actual: dict[str, bool] | None = None,
) -> SpaceReview:
    """A space's distributions, its pairs nearest the threshold and the knobs' effects."""
    scheme = scheme_for(space, settings.block_scheme(), settings.vector_block_scheme())
    vector = space != TEXT_SPACE
    threshold = settings.cosine if vector else settings.threshold
    k = scheme.k
    sampled = {int(i) for i in pairs.sampled}
    mine = [r for r in records if r.space == space and r.at in sampled]
    by_query: dict[int, list[tuple[int, int, float]]] = {}
    in_space = np.array([records[i].space == space for i in pairs.query.tolist()], bool)
    for i, j, d, s in zip(
        pairs.query[in_space].tolist(),
        pairs.other[in_space].tolist(),
        pairs.distance[in_space].tolist(),
        pairs.similarity[in_space].tolist(),
        strict=True,
    ):
        by_query.setdefault(i, []).append((j, d, s))

    distances: dict[str, list[int]] = {"duplicate": [], "unique": []}
    similarities: dict[str, list[float]] = {"duplicate": [], "unique": []}
    above: list[Pair] = []
    below: list[Pair] = []
    beyond: list[Pair] = []
    positions = _positions(records)
    for r in mine:
        near = by_query.get(r.at, [])
        if r.duplicate:
            d = r.decision
            distances["duplicate"].append(int(d.get("distance") or 0))
            similarities["duplicate"].append(float(d.get("similarity") or 0.0))
            if not r.exact:
                partner = _before(records, positions, d["duplicate_of"], r.at)
                above.append(Pair(r, partner, d.get("distance"), d.get("similarity"), _evidence(d)))
            continue
        if not near:
            continue
        distances["unique"].append(min(d for _, d, _ in near))
        similarities["unique"].append(max(s for _, _, s in near))
        within = [(j, d, s) for j, d, s in near if d <= k]
        if within:
            j, d, s = max(within, key=lambda c: (c[2], -c[1]))
            if s < threshold:
                below.append(Pair(r, records[j], d, s, f"the most similar of its {_n(within)}"))
        wider = [(j, d, s) for j, d, s in near if d > k and s >= threshold]
        if wider:
            j, d, s = min(wider, key=lambda c: (c[1], -c[2]))
            beyond.append(Pair(r, records[j], d, s, f"distance {d} > k {k}"))
    above.sort(key=lambda p: (p.similarity or 0.0, p.later.at))
    below.sort(key=lambda p: (-(p.similarity or 0.0), p.later.at))
    beyond.sort(key=lambda p: (p.distance or 0, -(p.similarity or 0.0), p.later.at))
    totals = {"above": len(above), "below": len(below), "beyond": len(beyond)}

    model = _Model(mine, by_query, actual)
    decided = {r.at for r in mine if r.duplicate}
    now = model.duplicates(threshold, k)
    knob = "--cosine" if vector else "--threshold"
    steps = [
        model.step(knob, value, value, k, now)
        for delta in THRESHOLD_STEPS
        if _takes(vector, value := round(threshold + delta, 4))
    ]
    for delta in K_STEPS:
        if 0 <= k + delta <= k + WIDER:
            step = model.step("k", k + delta, threshold, k + delta, now)
            step.pairs = model.pairs(k + delta) - model.pairs(k)
            step.scheme = _scheme_of_radius(scheme, k + delta)
            steps.append(step)
    agree = len(now & decided) + len(model.positions - now - decided)
    return SpaceReview(
        space=space,
        label=space_label(space),
        measure="cosine" if vector else "Jaccard",
        knob=knob,
        threshold=threshold,
        k=k,
        scheme=scheme.name,
        records=len(mine),
        distances=distances,
        similarities=similarities,
        above=above[:top],
        below=below[:top],
        beyond=beyond[:top],
        totals=totals,
        steps=steps,
        reproduced=(agree, len(mine)),
    )


def _takes(vector: bool, threshold: float) -> bool:
    """A threshold the option takes: a cosine in (-1, 1), a Jaccard in (0, 1]."""
    return -1 < threshold < 1 if vector else 0 < threshold <= 1


def _n(within: list[Any]) -> str:
    return "one candidate" if len(within) == 1 else f"{len(within)} candidates within k"


def _evidence(d: dict[str, Any]) -> str:
    said = {"text": "the texts' Jaccard", "sketch": "an estimate from a shingle sketch"}
    return "decided on " + said.get(d.get("evidence") or "text", str(d.get("evidence")))


class _Model:
    """The run again from the pairs: a record is a duplicate when it is an exact copy or
    one of its nearest --max-candidates within k reaches the threshold. It ignores what
    the pairs cannot see (texts judged on sketches, re-fetch replays), so each knob's
    effect is taken against the model at the run's own settings, not the decisions."""

    def __init__(
        self,
        records: Sequence[Record],
        near: dict[int, list[tuple[int, int, float]]],
        actual: dict[str, bool] | None,
    ) -> None:
        self.exact = {r.at for r in records if r.exact}
        self.positions = {r.at for r in records}
        self.near = near
        self.ids = {r.at: r.id for r in records}
        self.actual = actual

    def duplicates(self, threshold: float, k: int) -> set[int]:
        out = set(self.exact)
        for i in self.positions:
            if any(d <= k and s >= threshold for _, d, s in self.near.get(i, ())):
                out.add(i)
        return out

    def pairs(self, k: int) -> int:
        return sum(1 for i in self.positions for _, d, _ in self.near.get(i, ()) if d <= k)

    def step(self, knob: str, value: float, threshold: float, k: int, now: set[int]) -> Step:
        """`knob` set to `value` (the model at `threshold` and `k`) against `now`."""
        then = self.duplicates(threshold, k)
        gained, lost = then - now, now - then
        out = Step(knob, value, len(gained), len(lost))
        if self.actual is not None:
            out.gained_true = sum(self.actual.get(self.ids[i], False) for i in gained)
            out.lost_true = sum(self.actual.get(self.ids[i], False) for i in lost)
        return out


_PLAIN = re.compile(r"k(\d+)-b(\d+)")
_PROBED = re.compile(r"k(\d+)-b(\d+)-m(\d+)")


def _scheme_of_radius(scheme: BlockScheme, k: int) -> str | None:
    """A scheme of radius k like the run's (kK-bB: one block more a bit, k6-b8 -> k8-b10;
    kK-bB-mM: the same tables probed wider), with its tables; None if none fits."""
    from .blocks import NAMED

    name = NAMED.get(scheme.name, scheme.name)
    if m := _PROBED.fullmatch(name):
        spec = f"k{k}-b{m[2]}-m{m[3]}"
    elif m := _PLAIN.fullmatch(name):
        spec = f"k{k}-b{int(m[2]) + k - int(m[1])}"
    else:
        return None
    try:
        made = BlockScheme.parse(spec)
    except ConfigError:
        return None
    probes = f", {sum(len(f) for f in made.flips)} probes a lookup" if made.radius else ""
    return f"{spec}: {len(made.tables)} tables{probes}"


def _positions(records: Sequence[Record]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for r in records:
        out.setdefault(r.id, []).append(r.at)
    return out


def _before(
    records: Sequence[Record], positions: dict[str, list[int]], doc_id: Any, at: int
) -> Record | None:
    """The last record of an id before position `at` (else its first one after), or None."""
    found = positions.get(doc_id) if isinstance(doc_id, str) else None
    if not found:
        return None
    n = bisect.bisect_left(found, at)
    return records[found[n - 1] if n else found[0]]


# --------------------------------------------------------------------------- clusters


@dataclass
class Cluster:
    id: str  # its first document
    size: int
    members: list[str]  # the first few ids
    groups: list[tuple[str, int, int]]  # (group, its members here, the group's records)
    text: str  # the start of its first document's text


@dataclass
class Group:
    name: str
    records: int
    duplicates: int
    exact: int
    largest: int  # the size of the largest cluster its records are in


@dataclass
class Clusters:
    sizes: Counter[int]  # cluster size -> clusters of that size
    largest: list[Cluster]
    groups: list[Group]  # the groups with the most records
    group_count: int
    group_by: str
    derived: bool  # from duplicate_of chains (the decisions carry no cluster)


def cluster_of(decisions: Iterable[dict[str, Any]]) -> tuple[dict[str, str], bool]:
    """Each id's cluster: the decision's `cluster` when it carries one, else the first
    document of its duplicate_of chain (an id named but not decided heads its own).
    Whether any was derived."""
    said = {d["id"]: d for d in decisions}  # an id decided twice: its last decision
    out: dict[str, str] = {}
    derived = False
    for start in said:
        chain, at = [], start
        while at not in out:
            d = said.get(at)
            if d is not None and isinstance(d.get("cluster"), str):
                out[at] = d["cluster"]
                break
            derived = derived or d is not None
            of = d.get("duplicate_of") if d is not None else None
            if d is None or d["decision"] != "duplicate" or not isinstance(of, str) or of in chain:
                out[at] = at
                break
            chain.append(at)
            at = of
        for x in chain:
            out[x] = out[at]
    return {doc_id: out[doc_id] for doc_id in said}, derived


def review_clusters(
    records: Sequence[Record],
    decisions: Sequence[dict[str, Any]],
    group_by: str,
    top: int = LISTED,
    shown: int = 20,
) -> Clusters:
    heads, derived = cluster_of(decisions)
    members: dict[str, list[str]] = {}
    for doc_id, head in heads.items():
        members.setdefault(head, []).append(doc_id)
    last = {r.id: r for r in records}
    group_records = Counter(r.group for r in last.values())
    largest_of: dict[str, int] = {}
    for ids in members.values():
        for doc_id in ids:
            g = last[doc_id].group if doc_id in last else "(not in the input)"
            largest_of[g] = max(largest_of.get(g, 0), len(ids))
    ranked = sorted(members.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    largest = []
    for head, ids in ranked[:shown]:
        if len(ids) < 2:
            break
        where = Counter(last[i].group if i in last else "(not in the input)" for i in ids)
        first = last.get(head)
        largest.append(
            Cluster(
                head,
                len(ids),
                ids[:12],
                [(g, c, group_records.get(g, 0)) for g, c in where.most_common(5)],
                " ".join(first.text.split()[:40]) if first is not None else "",
            )
        )
    duplicates = Counter(r.group for r in last.values() if r.duplicate)
    exact = Counter(r.group for r in last.values() if r.exact)
    groups = [
        Group(name, count, duplicates[name], exact[name], largest_of.get(name, 1))
        for name, count in group_records.most_common(top)
    ]
    return Clusters(
        Counter(len(ids) for ids in members.values()),
        largest,
        groups,
        len(group_records),
        group_by,
        derived,
    )


# --------------------------------------------------------------------------- the truth


@dataclass
class TruthReview:
    scores: dict[str, Any]  # evaluate()'s, as `neardup eval` prints them
    field: str
    threshold: float
    false_positives: list[Pair]
    false_negatives: list[Pair]  # up to --top of each reason
    fp_total: int
    reasons: Counter[str]  # of every false negative


def review_truth(
    records: Sequence[Record],
    decisions: Sequence[dict[str, Any]],
    truth: Sequence[dict[str, Any]],
    settings: EngineSettings,
    kernels: Any,
    top: int = LISTED,
) -> TruthReview:
    field_name, threshold = truth_measure(list(truth), "auto", None)
    scores = evaluate(list(decisions), list(truth), threshold, field_name)
    _, fps, fns = outcomes(decisions, truth, threshold, field_name)
    of = {t["id"]: t for t in truth}
    last = {r.id: r for r in records}
    positions = _positions(records)
    false_positives = []
    for doc_id in fps:
        r = last.get(doc_id)
        if r is None:
            continue
        d = r.decision
        theirs = float(of[doc_id][field_name])
        partner = _before(records, positions, d.get("duplicate_of"), r.at)
        note = (
            f"our {_measure(r)} {_num(d.get('similarity'))} >= {_num(_threshold(r, settings))}; "
            f"the truth's {_num(theirs)} < {_num(threshold)}"
        )
        false_positives.append(Pair(r, partner, d.get("distance"), d.get("similarity"), note))
        false_positives[-1].truth = theirs
    false_positives.sort(key=lambda p: (-(p.truth or 0.0), p.later.at))
    false_negatives: list[Pair] = []
    reasons: Counter[str] = Counter()
    nearer = _Nearer(records)
    for doc_id in fns:
        r = last.get(doc_id)
        if r is None:
            continue
        t = of[doc_id]
        partner = _before(records, positions, t.get("most_similar_earlier"), r.at)
        ahead = nearer(r, partner) if partner is not None else 0
        pair = miss(r, partner, float(t[field_name]), settings, kernels, ahead)
        reasons[pair.reason or PASSED_OVER] += 1
        false_negatives.append(pair)
    order = {reason: n for n, reason in enumerate(ALL_REASONS)}
    false_negatives.sort(key=lambda p: (order[p.reason or PASSED_OVER], -(p.truth or 0.0)))
    kept: Counter[str] = Counter()
    listed = []
    for p in false_negatives:
        kept[p.reason or PASSED_OVER] += 1
        if kept[p.reason or PASSED_OVER] <= top:
            listed.append(p)
    return TruthReview(
        scores,
        field_name,
        threshold,
        false_positives[:top],
        listed,
        len(false_positives),
        reasons,
    )


class _Nearer:
    """How many candidates of a record the detector would verify before a given one: the
    earlier records of its space and of another id nearer by fingerprint, or as near and
    of a smaller id (its order)."""

    def __init__(self, records: Sequence[Record]) -> None:
        self.fps = np.array([r.fingerprint for r in records], np.uint64)
        self.ids = np.array([r.id for r in records])
        self.spaces = np.array([r.space for r in records])

    def __call__(self, r: Record, partner: Record) -> int:
        before = slice(0, r.at)
        d = np.bitwise_count(self.fps[before] ^ np.uint64(r.fingerprint))
        mine = (self.spaces[before] == r.space) & (self.ids[before] != r.id)
        far = (partner.fingerprint ^ r.fingerprint).bit_count()
        ahead = (d < far) | ((d == far) & (self.ids[before] < partner.id))
        return int(np.count_nonzero(mine & ahead))


def miss(
    r: Record,
    partner: Record | None,
    truth: float,
    settings: EngineSettings,
    kernels: Any,
    nearer: int = 0,
) -> Pair:
    """A true duplicate called unique, and why, named by what would cure it: our measure
    puts the pair below the threshold (for a page: our cuts do, where the truth's main
    contents reach it), else its fingerprints never met in a block table (beyond the
    radius, or no key shared), else `nearer` candidates (at least --max-candidates) came
    before its partner."""
    if partner is None:
        return Pair(
            r, None, None, None, "its truth partner is not a decided record", PASSED_OVER, truth
        )
    # the tables as r's lookup read them (a short text's wider radius)
    scheme = scheme_for(r.space, settings.block_scheme(), settings.vector_block_scheme())
    scheme = lookup_scheme(scheme, r.k)
    distance = (r.fingerprint ^ partner.fingerprint).bit_count()
    sim = similarity(r, partner, kernels)
    threshold = _threshold(r, settings)
    ours = f"our {_measure(r)} {_num(sim)}, the truth's {_num(truth)}"
    apart = f"distance {distance}" + (f" > k {scheme.k}" if distance > scheme.k else "")
    if partner.space != r.space:
        note, reason = "a vector and a text never meet", NO_TABLE
    elif sim < threshold:  # whatever k: a wider radius alone would not take it
        note = f"{apart}; {ours} (threshold {_num(threshold)})"
        reason = CUT if r.page or partner.page else BELOW
    elif distance > scheme.k:
        note, reason = f"{apart}; {ours}", NO_TABLE
    elif not scheme.reaches(r.fingerprint, partner.fingerprint):
        note, reason = f"{apart}, but no block key shared; {ours}", NO_TABLE
    elif nearer >= settings.max_candidates:
        note = (
            f"{apart}; {ours}: {nearer:,} candidates come before its partner, and the "
            f"detector verifies the --max-candidates {settings.max_candidates} nearest"
        )
        reason = NOT_NEAREST
    else:
        note = f"{apart}; {ours}: within reach and above the threshold"
        reason = PASSED_OVER
    return Pair(r, partner, distance, sim, note, reason, truth)


def _measure(r: Record) -> str:
    return "Jaccard" if r.space == TEXT_SPACE else "cosine"


def _threshold(r: Record, settings: EngineSettings) -> float:
    return settings.threshold if r.space == TEXT_SPACE else settings.cosine


def _num(x: Any) -> str:
    return "-" if x is None else f"{float(x):.3f}"


# --------------------------------------------------------------------------- the whole


@dataclass
class Review:
    decisions_path: str
    input_path: str
    settings: EngineSettings
    reading: Reading
    pairs: Pairs
    spaces: list[SpaceReview]
    clusters: Clusters
    truth: TruthReview | None
    top: int
    seconds: float = 0.0  # filled in by the caller once the page is drawn


def review(
    decisions_path: str,
    input_path: str,
    settings: EngineSettings,
    truth_path: str | None = None,
    group_by: str = "auto",
    top: int = LISTED,
    batch_size: int = 512,
    progress: Progress = no_progress,
) -> Review:
    """Everything the page shows (its steps are the module docstring's)."""
    from .evaluate import load_jsonl

    if group_by not in ("auto", "host") and not group_by.startswith("meta."):
        raise ConfigError(f"--group-by must be auto, host or meta.FIELD, not {group_by!r}")
    with _readable(decisions_path):
        decisions = load_jsonl(decisions_path)
    check_decisions(decisions, decisions_path)
    truth = None
    if truth_path is not None:
        with _readable(truth_path):
            truth = load_jsonl(truth_path)
        check_truth(truth, truth_path)
    with _readable(input_path):
        reading = read_records(input_path, decisions, settings, batch_size, group_by, progress)
    records = reading.records
    kernels = settings.engine().kernels
    reach = {
        s: scheme_for(s, settings.block_scheme(), settings.vector_block_scheme()).k + WIDER
        for s in {r.space for r in records}
    }
    pairs = candidate_pairs(
        records,
        reach,
        settings.max_candidates,
        kernels,
        settings.keep_old_versions,
        progress=progress,
    )
    actual = None
    truth_review = None
    if truth is not None:
        truth_review = review_truth(records, decisions, truth, settings, kernels, top)
        actual = {
            t["id"]: t[truth_review.field] >= truth_review.threshold
            for t in truth
            if truth_review.field in t
        }
    counts = Counter(r.space for r in records)
    spaces = [
        review_space(s, records, pairs, settings, top, actual)
        for s, _ in sorted(counts.items(), key=lambda kv: -kv[1])
    ]
    if truth_review is not None:
        measured = {t["id"]: t.get(truth_review.field) for t in truth or ()}
        for s in spaces:
            for p in (*s.above, *s.below, *s.beyond):
                p.truth = measured.get(p.later.id)
    clusters = review_clusters(records, decisions, group_by, top)
    made = Review(
        decisions_path, input_path, settings, reading, pairs, spaces, clusters, truth_review, top
    )
    add_diffs(made, progress)
    return made


@contextmanager
def _readable(path: str) -> Iterator[None]:
    """A file that breaks as it is read (a cut gzip, a disk error) is a ConfigError that
    names it, not a traceback."""
    try:
        yield
    except (OSError, EOFError) as exc:
        raise ConfigError(f"{path}: cannot be read: {exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None


def listed_pairs(made: Review) -> list[Pair]:
    out = [p for s in made.spaces for p in (*s.above, *s.below, *s.beyond)]
    if made.truth is not None:
        out += made.truth.false_positives + made.truth.false_negatives
    return out


DIFF_WORDS = 5_000  # words of each text a diff aligns; a longer text is cut there


def add_diffs(made: Review, progress: Progress = no_progress) -> None:
    """The word diff of every pair a list shows (difflib: quadratic in the worst case, so
    each text is cut to DIFF_WORDS words)."""
    listed = listed_pairs(made)
    step = progress("word diffs", len(listed))
    for p in listed:
        if p.earlier is not None:
            p.diff = spans(_first_words(p.earlier.text), _first_words(p.later.text))
        step(1)


def _first_words(text: str) -> str:
    words = text.split()
    return text if len(words) <= DIFF_WORDS else " ".join(words[:DIFF_WORDS])
