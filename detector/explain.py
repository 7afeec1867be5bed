"""Why two documents were matched, or not: the pair as the detector sees it.

`explain(a, b, rules)` takes the earlier record of a pair (`a`, the candidate an index
holds) and the later one (`b`, the record being decided) and gives an `Explanation`: the
fingerprints and their Hamming distance against the radius k of the block scheme, the
block tables that hold both under one key (or why none does), the literal pass's exact
word-shingle Jaccard (a sketch's estimate where the index keeps a sketch instead of the
text; the cosine for vectors), a word-level diff, and the verdict the detector would give
for the pair alone, with its reason. `Explanation.to_dict()` is its JSON form, `render()`
its text for a terminal.

The records come in as `Record`s: from a file's records, fingerprinted and cut as `neardup
detect` cuts them (`scan`), or from what an index keeps of them (`from_index`). Nothing
here opens a file, a server or a terminal: `neardup explain` (cli.py) does, and `neardup
review` may call `explain` for its pairs.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import diff as worddiff
from .blocks import BITS, BlockScheme
from .decide import DIGEST, FINGERPRINT, SKETCH, TEXT, VECTOR, lookup_radius
from .engine import TEXT_SPACE, Engine, Print
from .errors import BadRecord, ConfigError
from .extract import Extractor, in_order, written
from .features import BuiltinWeights, Weights
from .index import Index, Query, lookup_scheme, record_of, scheme_for, version_id
from .kernels import Kernels
from .pipeline import check_tokens, check_words
from .records import Decision, Document, RawRecord
from .sketch import SHORT_SHINGLES, SketchShape
from .verify import LiteralCheck, cosine

# Why the pair is, or is not, a duplicate (Verdict.reason): stable names, in the JSON too.
SAME_ID = "same_id"  # a record and its own earlier version: a re-fetch, never compared
DIFFERENT_SPACES = "different_spaces"  # text and vector, or vectors of two dimensions
EXACT_COPY = "exact_copy"  # the same normalized token stream (or vector): the digest
NO_SHARED_TABLE = "no_shared_table"  # no block table holds both under one key
BEYOND_K = "beyond_k"  # a table holds both, but the lookup keeps candidates within k only
ABOVE_THRESHOLD = "above_threshold"  # within k, and the similarity reaches the threshold
BELOW_THRESHOLD = "below_threshold"  # within k, and it does not
TEXT_GONE = "text_gone"  # the index keeps neither the text nor a sketch: unverifiable
NOTHING_TO_COMPARE = "nothing_to_compare"  # no earlier record (within k, for an index)
REASONS = (
    *(SAME_ID, DIFFERENT_SPACES, EXACT_COPY, NO_SHARED_TABLE, BEYOND_K, ABOVE_THRESHOLD),
    *(BELOW_THRESHOLD, TEXT_GONE, NOTHING_TO_COMPARE),
)
ALONE = "no earlier record in its space to compare it with"
# an index gives the candidates within k, not the nearest record beyond
ALONE_IN_INDEX = "no other record of the index within k of its fingerprint, decided before it"
SHOWN_TABLES = 8  # tables the terminal lists one by one (the JSON lists every one)
DIFF_CONTEXT = 12  # shared words the terminal shows at each end of a shared run
DIFF_WORDS = 40  # and of a run of one text's own words


@dataclass
class Record:
    """One record of a pair, as the detector sees it. `text` is what the diff shows: the
    text as written (a page's cut) from a file, the normalized text from an index; None
    where the index no longer keeps it."""

    id: str
    where: str  # "sample.jsonl line 51", "index default"
    print: Print  # space, fingerprint, digest, normalized text, shingles, vector
    text: str | None
    extraction: str | None = None  # an HTML page's (detector.extract), as its decision says
    why: str = ""  # how the page was cut (a file's pages: Extracted.why)
    embedding: np.ndarray | None = None  # as the record gave it (a file's)
    # The index judges this record on its shingle sketch: its text has left the window of
    # texts kept (--text-window). `sketch` is the one the index keeps, None to make it from
    # the shingles, as the index did.
    text_gone: bool = False
    sketch: bytes | None = None
    decision: Decision | None = None  # the detector's decision of it, when known

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "where": self.where,
            "space": self.print.space,
            "fingerprint": f"{self.print.fingerprint:016x}",
            "extraction": self.extraction,
            "why": self.why or None,
            "text_kept": not self.text_gone and self.text is not None,
        }


@dataclass(frozen=True)
class Rules:
    """What the detector judges a pair by: the block tables of texts and of vectors, the
    literal pass (its thresholds and sketch rules), and the kernels that make shingle
    sets, their Jaccard and sketches."""

    scheme: BlockScheme
    vectors: BlockScheme
    literal: LiteralCheck
    kernels: Kernels
    short_k: int = 0  # a short text's widest lookup radius (--short-k; 0: the scheme's k)
    weights: Weights = field(default_factory=BuiltinWeights)  # the radius's word weights


@dataclass(frozen=True)
class Table:
    """A block table and the two fingerprints' keys in it. The lookup reads the buckets
    within `radius` bits of a key (0 but for multi-probe schemes): the table finds the pair
    when its keys differ in at most that many bits."""

    table: int
    bits: str  # the fingerprint bits its key is made of, "0-7,16-23" (bit 0 the lowest)
    width: int  # bits in a key
    key_a: int
    key_b: int
    differing: int  # bits in which the two keys differ

    def to_dict(self) -> dict[str, Any]:
        digits = -(-self.width // 4)
        return {
            "table": self.table,
            "bits": self.bits,
            "key_a": f"{self.key_a:0{digits}x}",
            "key_b": f"{self.key_b:0{digits}x}",
            "differing_key_bits": self.differing,
        }


def tables(scheme: BlockScheme, a: int, b: int) -> list[Table]:
    """Every table of a scheme with the keys of fingerprints a and b in it."""
    keys_a, keys_b = scheme.keys([a, b])
    out = []
    for t, (runs, width) in enumerate(zip(scheme.tables, scheme.key_bits(), strict=True)):
        bits = ",".join(f"{s}-{s + w - 1}" if w > 1 else str(s) for s, w in runs)
        ka, kb = keys_a[t], keys_b[t]
        out.append(Table(t, bits, width, ka, kb, (ka ^ kb).bit_count()))
    return out


@dataclass(frozen=True)
class Shingles:
    """The literal pass on texts: the exact Jaccard of the two shingle sets."""

    jaccard: float  # as the detector's kernels compute it
    a: int  # distinct shingles of each text, and those both have
    b: int
    shared: int


@dataclass(frozen=True)
class SketchView:
    """The shingle sketches' judgment (LiteralCheck.judge): `used` when the index judges
    the pair on it (a's text has left the window of texts kept)."""

    estimate: float
    sigma: float
    bound: float
    duplicate: bool
    banded: bool  # within the band around the threshold: decided by --sketch-band
    used: bool


@dataclass(frozen=True)
class Verdict:
    duplicate: bool
    reason: str  # one of REASONS
    evidence: str  # what decides it, as a decision's `evidence`
    similarity: float | None  # the figure that decided it (Jaccard, estimate or cosine)
    text: str  # the reason in words


@dataclass
class Explanation:
    """The pair (`a` earlier, `b` decided; `a` None when there was nothing to compare
    with) and what the detector makes of it."""

    a: Record | None
    b: Record
    scheme: BlockScheme
    verdict: Verdict
    distance: int | None = None
    tables: list[Table] = field(default_factory=list)
    radius: int = 0  # key bits the lookup's probes flip
    shingles: Shingles | None = None
    threshold: float = 0.0  # the literal pass's: Jaccard for texts, cosine for vectors
    literal_shingle: int = 5
    sketch: SketchView | None = None
    cosine: float | None = None  # as the detector computes it: b's vector, a's stored
    cosine_exact: float | None = None  # of the two embeddings as given (float64)
    diff: list[worddiff.Span] | None = None

    @property
    def found(self) -> list[Table]:
        """The tables whose lookup finds the pair: keys within the probe radius."""
        return [t for t in self.tables if t.differing <= self.radius]

    @property
    def differing_bits(self) -> list[int]:
        if self.a is None or self.distance is None:
            return []
        x = self.a.print.fingerprint ^ self.b.print.fingerprint
        return [i for i in range(BITS) if x >> i & 1]

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (its keys are listed in `neardup explain --help`)."""
        v = self.verdict
        words = worddiff.shared_words(self.diff) if self.diff is not None else None
        return {
            "a": self.a.to_dict() if self.a is not None else None,
            "b": self.b.to_dict(),
            "verdict": {
                "duplicate": v.duplicate,
                "reason": v.reason,
                "evidence": v.evidence,
                "similarity": v.similarity,
                "text": v.text,
            },
            "exact": v.reason == EXACT_COPY,
            "distance": self.distance,
            "differing_bits": self.differing_bits,
            "scheme": {
                "name": self.scheme.name,
                "k": self.scheme.k,
                "tables": len(self.scheme.tables),
                "probe_radius": self.radius,
                "description": self.scheme.describe(),
            },
            "shared_tables": [t.to_dict() for t in self.found],
            "threshold": self.threshold,
            "jaccard": self.shingles.jaccard if self.shingles else None,
            "shingles": (
                {"a": self.shingles.a, "b": self.shingles.b, "shared": self.shingles.shared}
                if self.shingles
                else None
            ),
            "literal_shingle": self.literal_shingle,
            "sketch": (
                {
                    "estimate": self.sketch.estimate,
                    "sigma": self.sketch.sigma,
                    "bound": self.sketch.bound,
                    "duplicate": self.sketch.duplicate,
                    "banded": self.sketch.banded,
                    "used": self.sketch.used,
                }
                if self.sketch
                else None
            ),
            "cosine": self.cosine,
            "cosine_exact": self.cosine_exact,
            "decision": self.b.decision.to_dict() if self.b.decision is not None else None,
            "agrees": self.agrees,
            "note": self.note,
            "diff": (
                {
                    "shared_words": words[0],
                    "words_a": words[1],
                    "words_b": words[2],
                    "spans": [
                        {"tag": s.tag, "a": " ".join(s.a), "b": " ".join(s.b)} for s in self.diff
                    ],
                }
                if self.diff is not None and words is not None
                else None
            ),
        }

    @property
    def note(self) -> str | None:
        """Where the detector's decision of b is not the verdict on the pair: why it may
        differ."""
        if self.agrees is not False:
            return None
        return (
            "the detector decided otherwise: it judged the record against its stream's "
            "index, where the earlier record may not be indexed (an exact copy or an error "
            "record is not), a more similar candidate may have won, or other options were "
            "given (give the run's --scheme, --threshold, --text-window, --batch-size...)"
        )

    @property
    def agrees(self) -> bool | None:
        """Whether the detector's decision of b (when known) is the verdict on the pair."""
        d = self.b.decision
        if d is None:
            return None
        if self.verdict.duplicate:
            return self.a is not None and d.duplicate_of == self.a.id
        return d.duplicate_of is None or self.a is None or d.duplicate_of != self.a.id


# ---------------------------------------------------------------------------- the pair


def explain(a: Record | None, b: Record, rules: Rules, alone: str = ALONE) -> Explanation:
    """The pair as the detector judges it: `b` decided against `a`, an earlier record the
    index holds. Only the pair: whether `a` is in the index (an exact copy is not), and
    nearer candidates beyond --max-candidates, are the stream's, not the pair's. `a` None:
    there was nothing to compare `b` with, as `alone` says."""
    # the tables as b's lookup read them: a short text's radius widens them (radius.py);
    # an index that no longer keeps b's text cannot tell its radius: the scheme's k
    scheme = scheme_for(b.print.space, rules.scheme, rules.vectors)
    if b.text is not None:
        scheme = lookup_scheme(
            scheme, lookup_radius(b.print, scheme.k, rules.short_k, rules.weights)
        )
    literal = rules.literal
    vector = b.print.space != TEXT_SPACE
    threshold = literal.cosine if vector else literal.threshold
    nothing = Verdict(False, NOTHING_TO_COMPARE, FINGERPRINT, None, alone)
    out = Explanation(a, b, scheme, nothing, radius=scheme.radius, threshold=threshold)
    out.literal_shingle = literal.n
    if a is None:
        return out
    if a.text is not None and b.text is not None:
        out.diff = worddiff.spans(a.text, b.text)
    if a.print.space != b.print.space:
        out.verdict = Verdict(
            False,
            DIFFERENT_SPACES,
            FINGERPRINT,
            None,
            f"{a.id} is in space {_space(a.print.space)} and {b.id} in {_space(b.print.space)}: "
            "records of different spaces never meet",
        )
        return out
    fa, fb = a.print.fingerprint, b.print.fingerprint
    out.distance = (fa ^ fb).bit_count()
    out.tables = tables(scheme, fa, fb)
    if vector:
        out.cosine = cosine(_vector(b.print.vector, b.print), _vector(a.print.stored, a.print))
        if a.embedding is not None and b.embedding is not None:
            ua, ub = (np.asarray(e, np.float64) for e in (a.embedding, b.embedding))
            out.cosine_exact = float(ua @ ub / (np.linalg.norm(ua) * np.linalg.norm(ub)))
    else:
        _literal(out, a, b, rules)
    out.verdict = _verdict(out, a, b)
    return out


def _vector(wanted: np.ndarray | None, p: Print) -> np.ndarray:
    """A record's vector as the second pass takes it: the new record's own and the
    candidate's stored form (`wanted`), else what there is (an index keeps only the
    stored form of either)."""
    for v in (wanted, p.stored, p.vector):
        if v is not None:
            return v
    raise ConfigError("a vector record without its vector")


def _literal(out: Explanation, a: Record, b: Record, rules: Rules) -> None:
    """The exact Jaccard where both shingle sets are had; the sketches' judgment where the
    index judges on a sketch, or where a window of texts is set (then as what it would
    say once a's text has left it)."""
    mine, theirs = _shingles(b), _shingles(a)
    if mine is not None and theirs is not None:
        jaccard = rules.literal.kernels.jaccards(mine, [theirs])[0]
        shared = len(np.intersect1d(mine, theirs, assume_unique=True))
        out.shingles = Shingles(jaccard, len(theirs), len(mine), shared)
    long = a.sketch is not None or (theirs is not None and len(theirs) > SHORT_SHINGLES)
    if not long or not (a.text_gone or rules.literal.sketch is not None):
        return
    sketch_a, sketch_b = _sketch(a, rules), _sketch(b, rules)
    if sketch_a is None or sketch_b is None:
        return
    judged = rules.literal.judge(sketch_b, sketch_a, out.distance or 0)
    e = judged.estimate
    out.sketch = SketchView(
        e.jaccard, e.sigma, e.bound, judged.duplicate, judged.banded, a.text_gone
    )


def _shingles(r: Record) -> np.ndarray | None:
    return None if r.text is None else r.print.shingles


def _sketch(r: Record, rules: Rules) -> bytes | None:
    if r.sketch is not None:
        return r.sketch
    if r.text is None:
        return None
    shape = rules.literal.sketch or SketchShape()
    return rules.kernels.sketches([r.print.shingles], shape)[0]


def _verdict(out: Explanation, a: Record, b: Record) -> Verdict:
    k, distance, found = out.scheme.k, out.distance or 0, out.found
    if record_of(a.id)[0] == record_of(b.id)[0]:
        return Verdict(
            False,
            SAME_ID,
            FINGERPRINT,
            None,
            f"both are records of id {a.id}: a re-fetch is decided against the index "
            "without its own earlier versions",
        )
    if a.print.digest and a.print.digest == b.print.digest:  # "": an index without digests
        what = "vector" if b.print.space != TEXT_SPACE else "normalized token stream"
        return Verdict(True, EXACT_COPY, DIGEST, 1.0, f"an exact copy: the same {what}")
    tabled = f"{len(found)} of {len(out.tables)} tables " + (
        f"find it (keys within {out.radius} bits: probed)"
        if out.radius
        else "hold both under one key"
    )
    if distance > k:
        if found:
            return Verdict(
                False,
                BEYOND_K,
                FINGERPRINT,
                None,
                f"distance {distance} > k = {k}: {tabled}, but the lookup keeps the "
                f"candidates within {k} bits only",
            )
        return Verdict(False, NO_SHARED_TABLE, FINGERPRINT, None, _no_table(out))
    if not found:  # within k, every pair shares a table (pigeonhole): a broken scheme
        return Verdict(
            False,
            NO_SHARED_TABLE,
            FINGERPRINT,
            None,
            f"within k ({distance} <= {k}), yet no table holds both: the scheme "
            f"{out.scheme.name} does not find every pair within its k",
        )
    near = f"within k ({distance} <= {k}), {tabled}"
    if out.cosine is not None:
        return _judged(out.cosine >= out.threshold, VECTOR, out.cosine, near, "cosine", out)
    sketch = out.sketch
    if sketch is not None and sketch.used:
        band = ", within the band: --sketch-band decides" if sketch.banded else ""
        return Verdict(
            sketch.duplicate,
            ABOVE_THRESHOLD if sketch.duplicate else BELOW_THRESHOLD,
            SKETCH,
            sketch.estimate,
            f"{near}; {a.id}'s text has left the window of texts kept, and its sketch "
            f"estimates Jaccard {sketch.estimate:.4f} ± {sketch.sigma:.4f} against the "
            f"threshold {out.threshold}{band}",
        )
    if out.shingles is None:
        return Verdict(
            False,
            TEXT_GONE,
            FINGERPRINT,
            None,
            f"{near}, but the index keeps neither {a.id}'s text nor a sketch of it: "
            "unverifiable, so not a duplicate",
        )
    j = out.shingles.jaccard
    return _judged(j >= out.threshold, TEXT, j, near, "Jaccard", out)


def _judged(
    duplicate: bool, evidence: str, value: float, near: str, name: str, out: Explanation
) -> Verdict:
    sign = ">=" if duplicate else "<"
    return Verdict(
        duplicate,
        ABOVE_THRESHOLD if duplicate else BELOW_THRESHOLD,
        evidence,
        value,
        f"{near}, and {name} {value:.4f} {sign} the threshold {out.threshold}",
    )


def _no_table(out: Explanation) -> str:
    least = min(t.differing for t in out.tables)
    probe = f"keys within {out.radius} bits of its own" if out.radius else "its own key only"
    return (
        f"distance {out.distance} > k = {out.scheme.k}, and the differing bits fall in every "
        f"table's key: each of the {len(out.tables)} keys differs in at least {least} "
        f"bit{'s' if least > 1 else ''} (a lookup reads {probe})"
    )


def _space(space: str) -> str:
    return "text" if space == TEXT_SPACE else f"{space} (vectors of {space[1:]} dimensions)"


# ------------------------------------------------------------------- records of a file


@dataclass
class Scanned:
    """A record of a file as `neardup detect` takes it (the records it would decide, in
    their order `at`), with its print and the text it is decided on, as written."""

    at: int
    where: dict[str, object]
    doc: Document
    text: str
    why: str
    print: Print

    def record(self, label: str) -> Record:
        return Record(
            self.doc.id,
            f"{label} line {self.where.get('line', self.at + 1)}",
            self.print,
            self.text if self.print.space == TEXT_SPACE or self.doc.text else None,
            self.doc.extraction,
            self.why,
            None if self.doc.embedding is None else np.asarray(self.doc.embedding),
        )


def scan(
    batches: Iterable[Sequence[RawRecord]],
    engine: Engine,
    extractor: Extractor,
    limits: tuple[int, int],
    refused: Callable[[dict[str, object], str], None] | None = None,
) -> Generator[Scanned]:
    """The records `detect` would decide, in order, each page cut as it cuts it (the
    batches must be detect's --batch-size: the template model learns a batch at a time),
    fingerprinted. `limits` are --max-bytes and --max-tokens; a line detect would make an
    error record is left out and told to `refused`."""
    max_bytes, max_tokens = limits
    at = 0
    for cuts in in_order(batches, extractor, max_bytes, refused):
        docs = [c.doc for c in cuts]
        shown = written(docs, [c.extracted for c in cuts])
        folded = engine.kernels.fold(shown)
        kept = []
        for cut, text, norm in zip(cuts, shown, folded, strict=True):
            try:
                check_tokens(norm, max_tokens)
                check_words(cut.doc, norm)
            except BadRecord as bad:
                if refused is not None:
                    refused(cut.where, bad.reason)
                continue
            kept.append((cut, text, norm))
        prints = engine.fingerprint([c.doc for c, _, _ in kept], [n for _, _, n in kept])
        for (cut, text, _), p in zip(kept, prints, strict=True):
            why = cut.extracted.why if cut.extracted is not None else ""
            yield Scanned(at, cut.where, cut.doc, text, why, p)
            at += 1


def nearest(scanned: Iterable[Scanned], target: Scanned) -> Scanned | None:
    """The record before `target` nearest to it by fingerprint, in its space and of another
    id (ties: the earliest)."""
    best: tuple[int, int, Scanned] | None = None
    for s in scanned:
        if s.at >= target.at:
            break
        if s.print.space != target.print.space or s.doc.id == target.doc.id:
            continue
        d = (s.print.fingerprint ^ target.print.fingerprint).bit_count()
        if best is None or d < best[0]:
            best = (d, s.at, s)
    return best[2] if best is not None else None


@dataclass
class Stream:
    """A file's records as `detect` reads them; `batches` reads the file again for each
    pass (a pass cuts its pages with a fresh template model, `extractor`)."""

    label: str  # the file's name, for a record's `where`
    batches: Callable[[], Iterable[Sequence[RawRecord]]]
    engine: Engine
    extractor: Callable[[], Extractor]
    limits: tuple[int, int]  # --max-bytes, --max-tokens
    # the lines the last pass left out, as detect makes them error records, and why
    refused: list[tuple[dict[str, object], str]] = field(default_factory=list)

    def records(self) -> Generator[Scanned]:
        self.refused.clear()

        def refuse(where: dict[str, object], reason: str) -> None:
            self.refused.append((where, reason))

        return scan(self.batches(), self.engine, self.extractor(), self.limits, refuse)

    def find(self, ids: Sequence[str]) -> dict[str, Scanned]:
        """The first record of each id, read up to the last one found."""
        wanted, found = set(ids), {}
        records = self.records()
        try:
            for s in records:
                if s.doc.id in wanted and s.doc.id not in found:
                    found[s.doc.id] = s
                    if len(found) == len(wanted):
                        return found
        finally:
            records.close()  # the file too
        missing = ", ".join(repr(i) for i in ids if i not in found)
        refused = ""
        if self.refused:
            lines = ", ".join(f"line {w.get('line')}: {why}" for w, why in self.refused[:3])
            more = f" and {len(self.refused) - 3} more" if len(self.refused) > 3 else ""
            refused = f" ({len(self.refused)} lines are not records detect decides: {lines}{more})"
        raise ConfigError(f"{self.label}: no record with id {missing}{refused}")


def in_file(
    stream: Stream, ids: Sequence[str], decision: Decision | None = None, window: int | None = None
) -> tuple[Record | None, Record]:
    """The pair of two ids of a file (earlier, later); or with one id and its decision, the
    record and the one its decision names, or for a unique one, the record before it
    nearest by fingerprint. `window` is --text-window: with 0 the index keeps no text."""
    if decision is not None and decision.duplicate_of is not None:
        ids = [decision.duplicate_of, *ids]
    found = stream.find(ids)
    if decision is not None and decision.duplicate_of is None:
        b = found[ids[0]]
        near = nearest(stream.records(), b)
        pair = (near.record(stream.label) if near is not None else None, b.record(stream.label))
    else:
        first, last = sorted(found.values(), key=lambda s: s.at)
        pair = (first.record(stream.label), last.record(stream.label))
    a, later = pair
    later.decision = decision
    if a is not None:
        told = (
            decision is not None and decision.evidence == SKETCH and a.id == decision.duplicate_of
        )
        a.text_gone = window == 0 or told
    return a, later


# ----------------------------------------------------------------- records of an index


def from_index(
    index: Index, engine: Engine, version: str, decision: Decision | None, where: str
) -> Record:
    """What an index keeps of an indexed version: its decision's fingerprint and digest,
    its text (normalized) while the index keeps it, else its sketch; its stored vector. A
    version the index no longer has (an exact copy is never indexed) keeps its decision's
    fingerprint and digest."""
    doc_id, revision = record_of(version)
    current = decision is not None and decision.revision == revision
    text = index.texts([version]).get(version)
    sketch = None if text is not None else index.sketches([version]).get(version)
    stored = index.vectors([version]).get(version)
    space = decision.space if decision is not None and decision.space else TEXT_SPACE
    if stored is not None:
        space = f"v{len(stored)}"
    elif space != TEXT_SPACE:
        raise ConfigError(f"{where} no longer keeps the vector of {version!r}")
    if current and decision is not None:
        fingerprint, digest = decision.fingerprint, decision.digest
    elif text is not None:  # an earlier version, kept: its text gives its print
        made = engine.fingerprint([Document(doc_id, text)], [text])[0]
        fingerprint, digest = made.fingerprint, made.digest
    else:
        raise ConfigError(f"{where} keeps neither a decision nor a text of {version!r}")
    shingles = engine.kernels.shingle_sets([text])[0] if text is not None else _NONE
    p = Print(space, fingerprint, digest, text or "", shingles, None, b"", stored)
    return Record(
        doc_id,
        where,
        p,
        text,
        decision.extraction if decision is not None else None,
        text_gone=text is None and sketch is not None,
        sketch=sketch,
        decision=decision,
    )


_NONE = np.zeros(0, np.uint64)


def indexed_candidate(index: Index, b: Record, decided_at: str) -> str | None:
    """For a unique record of an index: the version nearest to it that the block tables
    give (within k: the index cannot tell the nearest beyond), of another id, decided
    before it. A batch's records share one time: one of its batch is taken, unless it
    names b as the record it duplicates (then it came later)."""
    found = index.lookup([Query(b.print.space, b.print.fingerprint, b.print.digest)])[0]
    others = [c for c in found.candidates if record_of(c.id)[0] != b.id]
    decisions = index.decisions(sorted({record_of(c.id)[0] for c in others}))
    for c in others:  # nearest first
        d = decisions.get(record_of(c.id)[0])
        if d is None or (d.decided_at <= decided_at and d.duplicate_of != b.id):
            return c.id
    return None


def in_index(
    index: Index, engine: Engine, name: str, ids: Sequence[str]
) -> tuple[Record | None, Record]:
    """The pair of two ids of an index (earlier, later: the one whose decision names the
    other is later, else the one decided later); or with one id, the record and the one
    its decision names, or for a unique one, its nearest candidate decided before it."""
    where = f"index {name}"
    decisions = index.decisions(list(ids))
    for i in ids:
        if i not in decisions:
            raise ConfigError(f"{where} has no record with id {i!r}")

    def record(doc_id: str, revision: int) -> Record:
        d = decisions.get(doc_id)
        if d is None:
            d = index.decisions([doc_id]).get(doc_id)
        return from_index(index, engine, version_id(doc_id, revision), d, where)

    if len(ids) == 2:
        first, last = (decisions[i] for i in ids)
        if first.duplicate_of == last.id or (
            last.duplicate_of != first.id and first.decided_at > last.decided_at
        ):
            first, last = last, first
        return record(first.id, first.revision), record(last.id, last.revision)
    d = decisions[ids[0]]
    b = record(d.id, d.revision)
    b.decision = d
    if d.duplicate_of is not None:
        return record(d.duplicate_of, d.duplicate_of_revision), b
    near = indexed_candidate(index, b, d.decided_at)
    if near is None:
        return None, b
    doc_id, revision = record_of(near)
    return record(doc_id, revision), b


# ---------------------------------------------------------------------- the terminal


def render(e: Explanation, color: bool, width: int = 100) -> str:
    """The explanation as text for a terminal: a line a figure, then the diff (colored, or
    with [-...-] and {+...+} markers)."""
    a, b, v = e.a, e.b, e.verdict
    lines: list[str] = []

    def line(label: str, value: str) -> None:
        lines.append(f"{label + ':':<13} {value}")

    def named(r: Record) -> str:
        return r.id if r.where == r.id else f"{r.id} ({r.where})"

    line("explain", named(b) if a is None else f"{named(b)} against {named(a)}")
    of = f" of {a.id}" if v.duplicate and a is not None else ""
    line("verdict", f"{'duplicate' if v.duplicate else 'not a duplicate'}{of} ({v.reason})")
    line("why", v.text)
    line("evidence", v.evidence)
    if b.decision is not None:
        line("decision", _decision_words(b.decision, e.agrees))
    if e.note:
        line("note", e.note)
    for r in (a, b):
        if r is not None:
            line("fingerprint", f"{r.print.fingerprint:016x} {r.id}")
    if e.distance is not None:
        line("distance", f"{e.distance} of 64 bits; k = {e.scheme.k} ({e.scheme.describe()})")
        if e.differing_bits:
            line("differing", "bits " + " ".join(map(str, e.differing_bits)))
        if e.radius:
            found = f"find the pair (keys within {e.radius} bits: the lookup probes them)"
        else:
            found = "share a key"
        line("tables", f"{len(e.found)} of {len(e.tables)} {found}")
        for t in e.found[:SHOWN_TABLES]:
            shown = t.to_dict()
            keys = shown["key_a"] if t.key_a == t.key_b else f"{shown['key_a']} {shown['key_b']}"
            lines.append(f"{'':<13}   table {t.table:>3}  bits {t.bits:<22} key {keys}")
        if len(e.found) > SHOWN_TABLES:
            lines.append(
                f"{'':<13}   ... and {len(e.found) - SHOWN_TABLES} more (--json lists all)"
            )
    if e.shingles is not None and a is not None:
        s = e.shingles
        line(
            "jaccard",
            f"{s.jaccard:.6f} = {s.shared} / {s.a + s.b - s.shared} distinct "
            f"{e.literal_shingle}-word shingles ({a.id} {s.a}, {b.id} {s.b}); "
            f"threshold {e.threshold}",
        )
    if e.sketch is not None:
        k = e.sketch
        use = "decides" if k.used else "would decide once the earlier text left the window"
        line(
            "sketch",
            f"estimate {k.estimate:.4f} ± {k.sigma:.4f} (bound {k.bound:.4f}): "
            f"{'duplicate' if k.duplicate else 'not a duplicate'}"
            f"{', in the band' if k.banded else ''} ({use})",
        )
    if e.cosine is not None:
        exact = (
            f"; of the embeddings as given {e.cosine_exact:.6f}"
            if e.cosine_exact is not None
            else ""
        )
        line("cosine", f"{e.cosine:.6f}{exact}; threshold {e.threshold}")
    for r in (a, b):
        if r is not None and r.extraction:
            line("cut", f"{r.id}: {r.extraction}" + (f": {r.why}" if r.why else ""))
    if e.diff is not None and a is not None:
        shared, na, nb = worddiff.shared_words(e.diff)
        marks = "struck red" if color else "[-...-]"
        marks_b = "underlined green" if color else "{+...+}"
        line(
            "diff",
            f"{shared} words shared ({a.id} has {na}, {b.id} {nb}); "
            f"{a.id}'s own {marks}, {b.id}'s own {marks_b}",
        )
        body = worddiff.render(_shortened(e.diff), color, DIFF_CONTEXT)
        wrapped = textwrap.wrap(body, width - 2, break_long_words=False, break_on_hyphens=False)
        lines += ["  " + w for w in wrapped]
    return "\n".join(lines) + "\n"


def _shortened(diff: list[worddiff.Span]) -> list[worddiff.Span]:
    """The diff with each text's own words cut to DIFF_WORDS a run: two texts that share
    little would otherwise print both whole."""

    def cut(words: tuple[str, ...]) -> tuple[str, ...]:
        if len(words) <= DIFF_WORDS:
            return words
        return (*words[:DIFF_WORDS], f"... ({len(words) - DIFF_WORDS} more words)")

    return [s if s.tag == "equal" else worddiff.Span(s.tag, cut(s.a), cut(s.b)) for s in diff]


def _decision_words(d: Decision, agrees: bool | None) -> str:
    said = "unique" if d.duplicate_of is None else f"duplicate of {d.duplicate_of}"
    figures = [f"distance {d.distance}"] if d.distance is not None else []
    if d.similarity is not None:
        figures.append(f"similarity {d.similarity:.4f}")
    if d.evidence:
        figures.append(f"evidence {d.evidence}")
    told = f"{said} ({', '.join(figures)})" if figures else said
    return f"the detector said {told}" + ("" if agrees else ", not what the pair says")
