"""The index planner (`neardup plan`): which block-table layouts an index of N documents
can be made with, what each costs in Redis (bytes a document by key family, the entries a
lookup reads, commands and server CPU a document) and what it finds (recall at a radius).

Everything about Redis here is a model of today's key layout (layout 5, index/redis/keys.py)
with its constants in one table, `Costs`, each calibrated on a measurement named beside it.
Bucket sizes assume fingerprints spread uniformly over a table's keys (random SimHash bits);
a real stream's near-duplicates crowd some buckets, which --max-bucket caps.

Recall: by default the binomial model (a pair at angle theta differs in Binomial(64,
theta / pi) of SimHash's 64 bits; the radius k stands for pairs whose expected distance is
k), with the chance a scheme finds a pair at distance d: 1 within its K (pigeonhole), and
beyond it a Monte Carlo estimate over random sets of d differing bits (MC_PAIRS of them, a
fixed seed). With a sample, the true pairs' own fingerprints are asked of each scheme.

Also the plan of an index made with `--expected-docs N` (the planned bucket size and the
refusal of a scheme that reaches the cap below N) and how far an index is from its plan.
Light at import: blocks and numpy; the sample's engine is imported when a sample is read.
"""

from __future__ import annotations

import math
import re
import textwrap
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from math import comb
from typing import Any

import numpy as np

from .blocks import BITS, MAX_PROBES, MAX_TABLES, BlockScheme, probe_radius
from .errors import ConfigError
from .radius import WIDEST

MAX_PLANNED_BUCKET = 512  # entries a bucket may hold on average at N: "a few hundred"
MAX_LOOKUP_ENTRIES = 2_000  # entries a lookup may read at N (issue 19's target)
# Bucket reads a lookup, each a Redis command (Costs.us_bucket_op): beyond 256, probing
# costs more server CPU than the fewer tables save.
MAX_BUCKET_READS = 256
MC_PAIRS = 4000  # random pairs a distance for the chance a scheme finds it beyond its K
MC_SEED = 19
NOTE_WIDTH = 100
FAMILIES = ("b", "id", "dec", "dg", "log", "tx")
SHARD_TAGS = 64  # keys.SHARDS: the tags a cluster spreads; more primaries gain nothing
LOG_KEEP = 65_536  # index.LOG_KEEP: the log's entries stay bounded whatever N is


@dataclass(frozen=True)
class Costs:
    """The model's constants. Bytes are Redis's (INFO used_memory or MEMORY USAGE), CPU is
    the server's (INFO cpu). Re-calibrate here from the 10^6 / 10^7 scale benchmark."""

    # Layout 3 (keys.py): a table's buckets are fields of hashes of 2^field_bits buckets,
    # an entry is the fingerprint's bits beyond the narrowest key and a 4-byte number. A
    # hash is a listpack while it has at most `listpack_fields` fields of at most
    # `listpack_value` bytes (the server settings the index checks), a hashtable after.
    field_bits: int = 10
    listpack_fields: int = 512
    listpack_value: int = 256
    # A bucket's bytes above its entries: about 5 B as a listpack field (k6-b8 at 3,000
    # dev-stream documents: 478 B/doc of tables, 17.1 a table); as a hashtable's, 48 B
    # and the allocator's rounding of the value, 7.5% of it (10^6: 389 B/doc, 15 entries
    # a bucket; 10^7: 311 B/doc, 153 a bucket, 1,792 hashes of 1.73 MB; bench/scale.py,
    # README "Layout 3" and "At scale"); a hash key about 100 B.
    field_listpack: float = 5.0
    field_hashtable: float = 48.0
    alloc_slack: float = 0.075
    hash_key: float = 100.0
    # Bytes a document of the other families, at 10^7 in layout 5 (bench/scale.py, README
    # "Layout 5"; on the dev stream's 3,000: id 12.6, dc 198, dg 98):
    id: float = 20.6  # id map: hashes of 128 ids
    dec: float = 130.0  # decision records, deflated, in hashes of ~150 (sharded: dc)
    dg: float = 24.0  # digests
    log: float = 67.0  # log, while every document is in it (bounded by LOG_KEEP; dev stream)
    tx: float = 829.0  # a dev-stream text, zstd with the index's dictionary (README "Texts")
    # With --text-window (README "Texts beyond memory"): a text in the window holds its
    # sketch too (135 B and a 6-byte header) and a queue entry (tq, 112 B); past the
    # window, a sketch is a field of a sketch hash, 167 B (ids of 8 characters at 4 x
    # 10^6; 214 B for URLs of 54), or with retention a tx key of its own, 251 B (299)
    sketch: float = 141.0
    queue: float = 112.0
    sketch_key: float = 167.0
    # Server CPU of the decide path, modelled: a bucket read or append costs
    # `us_bucket_op`, every entry a lookup reads `us_entry` more (APPLY_SHARD's HGET and
    # HSET of a bucket grow with it too), and the rest of a document (digest, id map,
    # decision, text, the scripts' shares) `us_rest`, layout 2's fit. Fitted to
    # bench/scale.py's decide path in layout 3 (README "At scale"; a Detector over the
    # index, 512 a batch) at the sizes a plan is for: k6-b8 133.5 us at 10^6 and 309 us at
    # 10^7 (479 and 4,324 entries a lookup). It overestimates a small index (114 us
    # against 82.6 measured at 3,000), and does not model `neardup bench`'s figures
    # through Kafka (smaller batches, each snapshot reading the log): it ranks layouts.
    # Layout 5 reads and writes the same buckets; it was not refitted (its 10^7 decide
    # path measured 650 us a document on a machine shared with a test run).
    us_bucket_op: float = 1.64
    us_entry: float = 0.0456
    us_rest: float = 19.8
    # digest, id map, decision, text, the scripts' shares: layout 5's decide path at 10^7
    # made 69.5 commands a document, 56 of them bucket reads and appends
    other_commands: float = 13.5


COSTS = Costs()
MEASURED = {  # bench/scale.py (README "At scale", "Layout 3 against layout 2", "Layout 5")
    "k6-b8": "layout 3: tables 478 B/doc at 3,000, 389 at 10^6, 311 at 10^7; decide "
    "82.6 us/doc at 3,000, 133.5 at 10^6, 309 at 10^7; lookup 479 entries at 10^6, "
    "4,324 at 10^7; layout 5 at 10^7: 487 B/doc in all (used_memory), decisions 130",
    "k7-b4-m1": "layout 2 at 10^6: tables 76 B/doc, lookup 1,086 entries, decide 104 us/doc",
}


# ------------------------------------------------------------------ parsing


_SUFFIX = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*", re.IGNORECASE)


def parse_bytes(text: str) -> int:
    """64G, 64GiB (2^30 each), 64GB (10^9), 1.5T, or a plain number of bytes."""
    m = _SUFFIX.fullmatch(str(text))
    if not m or (m[3].lower() == "i" or (m[3] and not m[2])):
        raise ValueError(f"not a size: {text!r} (e.g. 64G, 64GiB, 64GB or 68719476736)")
    power = " kmgt".index(m[2].lower() or " ")
    base = 1000 if m[3].lower() == "b" else 1024
    value = float(m[1]) * base**power
    if value < 1:
        raise ValueError(f"not a size: {text!r} (at least one byte)")
    return int(value)


def bytes_problem(text: str) -> str | None:
    """options.py's check of --memory."""
    try:
        parse_bytes(text)
    except ValueError as exc:
        return str(exc)
    return None


def human(n: float) -> str:
    for unit, size in (("T", 2**40), ("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if abs(n) >= size:
            return f"{n / size:.1f}{unit}"
    return f"{n:.0f}"


# ------------------------------------------------------------------ one scheme at N


_WIDTHS: dict[tuple[str, int], list[int]] = {}  # a scheme's name and tables say its widths


def key_widths(scheme: BlockScheme) -> list[int]:
    name = (scheme.name, len(scheme.tables))
    if name not in _WIDTHS:
        _WIDTHS[name] = scheme.key_bits()
    return _WIDTHS[name]


def probes_per_table(scheme: BlockScheme) -> list[int]:
    return [sum(comb(w, i) for i in range(scheme.radius + 1)) for w in key_widths(scheme)]


def bucket_size(width: int, docs: float) -> float:
    """Expected entries of a bucket of a `width`-bit table at `docs` documents."""
    return docs / 2.0**width


def cap_docs(scheme: BlockScheme, max_bucket: int) -> float:
    """Documents at which the narrowest table's buckets hold --max-bucket entries on
    average: from there on its buckets are cut, the oldest entries no longer read."""
    return max_bucket * 2.0 ** min(key_widths(scheme))


def planned_bucket(scheme: BlockScheme, max_bucket: int, docs: int) -> tuple[float, str | None]:
    """The mean entries of the narrowest table's buckets at `docs` documents, and what is
    wrong with planning `docs` on this scheme (None: nothing)."""
    size = bucket_size(min(key_widths(scheme)), docs)
    reach = cap_docs(scheme, max_bucket)
    if reach <= docs:
        return size, (
            f"scheme {scheme.name} reaches --max-bucket {max_bucket} at {reach:,.0f} "
            f"documents, below the {docs:,} planned: past that its buckets drop their "
            f"oldest entries from every lookup; choose one with `neardup plan --docs {docs}`"
        )
    return size, None


def entry_bytes(scheme: BlockScheme) -> int:
    """keys.entry_bytes: the fingerprint's bits beyond the narrowest key, and a number."""
    return (64 - min(key_widths(scheme)) + 7) // 8 + 4


@lru_cache(maxsize=4096)
def _fullest(mean: float, buckets: int) -> int:
    """The entries of the fullest of `buckets` buckets of Poisson(mean) entries (its
    1 - 1/buckets quantile)."""
    if mean <= 0:
        return 0
    if mean > 30:  # the normal tail (exp(-mean) underflows the sum below by 700)
        return math.ceil(mean + math.sqrt(2 * mean * math.log(max(buckets, 2))))
    goal, k, term = 1 - 1 / max(buckets, 2), 0, math.exp(-mean)
    total = term
    while total < goal:
        k += 1
        term *= mean / k
        total += term
    return k


def text_bytes(docs: int, window: int | None, costs: Costs = COSTS) -> float:
    """Bytes a document of the texts (tx, tq) at `docs` documents, the newest `window`
    of them keeping their text (None: all, and no sketch)."""
    if window is None:
        return costs.tx
    kept = min(window, docs) / docs
    return kept * (costs.tx + costs.sketch + costs.queue) + (1 - kept) * costs.sketch_key


def family_bytes(
    scheme: BlockScheme, docs: int, costs: Costs = COSTS, window: int | None = None
) -> dict[str, float]:
    """Bytes a document of each key family at `docs` documents (layout 5), with texts for
    the newest `window` (None: every text)."""
    entry = entry_bytes(scheme)
    tables = 0.0
    for width in key_widths(scheme):
        buckets = 2.0**width
        per_hash = min(buckets, 2.0**costs.field_bits)
        hashes = buckets / per_hash
        # buckets holding at least one entry (Poisson); a hash is a listpack while it has
        # few enough of them and its fullest holds few enough bytes
        filled = buckets * -math.expm1(-docs / buckets)
        compact = (
            filled / hashes <= costs.listpack_fields
            and _fullest(docs / buckets, int(per_hash)) * entry <= costs.listpack_value
        )
        value = entry * docs / filled
        field_bytes = (
            costs.field_listpack if compact else costs.field_hashtable + value * costs.alloc_slack
        )
        used = hashes * -math.expm1(-filled / hashes)  # hashes with any bucket
        tables += entry + (field_bytes * filled + costs.hash_key * used) / docs
    return {
        "b": tables,
        "id": costs.id,
        "dec": costs.dec,
        "dg": costs.dg,
        "log": costs.log * min(docs, LOG_KEEP) / docs,
        "tx": text_bytes(docs, window, costs),
    }


@dataclass
class Row:
    """One layout's plan at N."""

    scheme: str
    k: int
    tables: int
    key_bits: tuple[int, int]
    probes: int  # bucket reads a lookup, over all tables
    bytes: dict[str, float]
    bucket_mean: float
    bucket_worst: float  # the narrowest table's
    entries: float  # a lookup reads
    commands: float
    cpu_us: float
    cap_docs: float
    found: dict[int, float] = field(default_factory=dict)  # distance -> chance found
    recall: float | None = None
    sample_recall: float | None = None
    primaries: int | None = None
    excluded: list[str] = field(default_factory=list)
    default: bool = False
    # a short text's lookup (detector.radius): the same tables read one probe bit further
    short: tuple[int, float, float] = (0, 0.0, 0.0)  # bucket reads, entries, CPU us a doc

    @property
    def total(self) -> float:
        return sum(self.bytes.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "scheme": self.scheme,
            "k": self.k,
            "tables": self.tables,
            "key_bits": list(self.key_bits),
            "bucket_reads": self.probes,
            "bytes_per_doc": {k: round(v, 1) for k, v in self.bytes.items()},
            "bytes_per_doc_total": round(self.total, 1),
            "bucket_mean": round(self.bucket_mean, 3),
            "bucket_worst_table": round(self.bucket_worst, 3),
            "entries_per_lookup": round(self.entries, 1),
            "commands_per_doc": round(self.commands, 1),
            "commands": {
                "bucket_reads": self.probes,
                "appends": self.tables,
                "other": round(self.commands - self.probes - self.tables, 1),
            },
            "cpu_us_per_doc": round(self.cpu_us, 1),
            "reaches_max_bucket_at": round(self.cap_docs),
            "found_at_distance": {str(d): round(p, 4) for d, p in self.found.items()},
            "recall_binomial": None if self.recall is None else round(self.recall, 4),
            "recall_sample": None if self.sample_recall is None else round(self.sample_recall, 4),
            "cluster_primaries": self.primaries,
            "excluded": self.excluded,
            "default": self.default,
            "short_text_lookup": {
                "bucket_reads": self.short[0],
                "entries_per_lookup": round(self.short[1], 1),
                "cpu_us_per_doc": round(self.short[2], 1),
            },
        }


def row(
    scheme: BlockScheme,
    docs: int,
    max_bucket: int,
    costs: Costs = COSTS,
    window: int | None = None,
) -> Row:
    widths = key_widths(scheme)
    probes = probes_per_table(scheme)
    read = [min(bucket_size(w, docs), max_bucket) for w in widths]
    entries = sum(p * r for p, r in zip(probes, read, strict=True))
    commands = sum(probes) + len(widths) + costs.other_commands
    return Row(
        scheme=scheme.name,
        k=scheme.k,
        tables=len(widths),
        key_bits=(min(widths), max(widths)),
        probes=sum(probes),
        bytes=family_bytes(scheme, docs, costs, window),
        bucket_mean=float(np.mean([bucket_size(w, docs) for w in widths])),
        bucket_worst=bucket_size(min(widths), docs),
        entries=entries,
        commands=commands,
        cpu_us=costs.us_bucket_op * (sum(probes) + len(widths))
        + costs.us_entry * entries
        + costs.us_rest,
        cap_docs=cap_docs(scheme, max_bucket),
    )


# ------------------------------------------------------------------ recall


def key_masks(scheme: BlockScheme) -> np.ndarray:
    """Each table's key bits as a 64-bit mask of the fingerprint."""
    return np.array(
        [sum(((1 << w) - 1) << s for s, w in runs) for runs in scheme.tables], np.uint64
    )


def found_flips(scheme: BlockScheme, flips: np.ndarray) -> np.ndarray:
    """Whether a pair differing in the bits of each mask shares a key of some table
    within the scheme's probe radius: what a lookup of one finds the other by."""
    masks = key_masks(scheme)
    found = np.zeros(len(flips), bool)
    for start in range(0, len(masks), 64):  # bounded memory for 1,024 tables
        differ = np.bitwise_count(flips[:, None] & masks[None, start : start + 64])
        found |= (differ <= scheme.radius).any(axis=1)
    return found


def random_flips(distance: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """`count` masks of `distance` bits, each set uniformly among the C(64, d)."""
    order = np.argsort(rng.random((count, BITS)), axis=1)[:, :distance]
    bits = np.left_shift(np.uint64(1), order.astype(np.uint64))
    return np.bitwise_or.reduce(bits, axis=1) if distance else np.zeros(count, np.uint64)


def found_at(scheme: BlockScheme, distance: int, pairs: int = MC_PAIRS) -> float:
    """Chance a pair at `distance` is found: 1 within the scheme's K (pigeonhole, or the
    probes' guarantee), else the Monte Carlo share of `pairs` random pairs."""
    if distance <= scheme.k:
        return 1.0
    rng = np.random.default_rng(MC_SEED + distance)
    return float(found_flips(scheme, random_flips(distance, pairs, rng)).mean())


def binomial(n: int, p: float, d: int) -> float:
    return comb(n, d) * p**d * (1 - p) ** (n - d)


def binomial_recall(scheme: BlockScheme, radius: int, pairs: int = MC_PAIRS) -> float:
    """Share found of pairs whose expected distance is the radius (angle pi * radius/64):
    sum over d of Binomial(64, radius/64)(d) times the chance a pair at d is found."""
    p = radius / BITS
    total = 0.0
    for d in range(BITS + 1):
        weight = binomial(BITS, p, d)
        if d > scheme.k and weight < 1e-5:  # the rest of the tail: below 1e-4 in all
            break
        total += weight * found_at(scheme, d, pairs)
    return total


def sample_recall(scheme: BlockScheme, pairs: np.ndarray) -> float:
    """Share of the sample's true pairs (fingerprint pairs, n by 2) the scheme finds."""
    if not len(pairs):
        return float("nan")
    return float(found_flips(scheme, pairs[:, 0] ^ pairs[:, 1]).mean())


# ------------------------------------------------------------------ candidates


@lru_cache(maxsize=16)
def candidates(radius: int, extra: int = 2) -> tuple[BlockScheme, ...]:
    """The layouts blocks.py can express for K = radius .. radius + extra: kK-bB,
    two-level kK-bBxC and probed kK-bB-mM, within its limits on tables and probes."""
    specs: list[str] = []
    for k in range(radius, min(radius + extra, BITS - 1) + 1):
        for b in range(k + 1, BITS + 1):
            if comb(b, k) <= MAX_TABLES:
                specs.append(f"k{k}-b{b}")
        for b in range(k + 1, k + 5):
            for c in range(k + 1, k + 5):
                if comb(b, k) * comb(c, k) <= MAX_TABLES:
                    specs.append(f"k{k}-b{b}x{c}")
        for b in range(2, 17):
            for m in range(1, b):
                r = probe_radius(k, b, m)
                width = -(-BITS * m // b)
                if comb(b, m) * sum(comb(width, i) for i in range(r + 1)) <= MAX_PROBES:
                    specs.append(f"k{k}-b{b}-m{m}")
    # Probed specs of several K can be one layout (the same tables and probe radius):
    # keep the name of the largest K, the guarantee it really gives.
    out: dict[tuple[Any, ...], BlockScheme] = {}
    for spec in specs:
        try:
            scheme = BlockScheme.parse(spec)
        except ConfigError:  # a combination blocks.py refuses (too few bits left, ...)
            continue
        same = (scheme.tables, scheme.radius)
        if same not in out or out[same].k < scheme.k:
            out[same] = scheme
    return tuple(out.values())


# ------------------------------------------------------------------ the plan


@dataclass
class Plan:
    docs: int
    radius: int
    max_bucket: int
    memory: int | None
    rows: list[Row]  # that fit, best first
    excluded: list[Row]  # candidates left out, the default scheme's always among them
    default_row: Row
    sample: dict[str, Any] | None = None
    costs: Costs = COSTS
    window: int | None = None  # --text-window: the newest texts kept

    def to_dict(self) -> dict[str, Any]:
        return {
            "docs": self.docs,
            "text_window": self.window,
            "sketch": None if self.window is None else SKETCH_NOTE,
            "radius": self.radius,
            "max_bucket": self.max_bucket,
            "memory": self.memory,
            "layouts": [r.to_dict() for r in self.rows],
            "excluded": [r.to_dict() for r in self.excluded],
            "default": self.default_row.to_dict(),
            "sample": self.sample,
            "costs": {f: getattr(self.costs, f) for f in self.costs.__dataclass_fields__},
            "measured": MEASURED,
            "modelled": "bytes, entries, commands and CPU are modelled from `costs` "
            "(detector/plan.py); recall_binomial is the binomial model with a Monte "
            "Carlo beyond each scheme's K; recall_sample is measured on the sample",
            "coordinator": COORDINATOR_NOTE,
        }


# What judging on sketches costs in precision and recall, measured (bench/text_window.py,
# README "Texts beyond memory"): the default sketch, the default band rule
SKETCH_NOTE = (
    "past the window a candidate is judged on its 135-byte sketch (sigma 0.019 at Jaccard "
    "0.8, sure outside 3.72 sigma); measured with texts for the newest 10% of the text dev "
    "stream: precision 0.973, recall 0.948 (all texts: 1.000, 0.977)"
)
COORDINATOR_NOTE = (
    "on a Redis Cluster the coordinator's slot (nd:{NAME}:) holds the log, the recent writes "
    "and the counts, bounded whatever N is; b, id, dec, dg and tx spread over 64 shard tags "
    "(layout 5), so up to 64 primaries share them"
)
RECENT_BYTES = 16_384 * 600  # index.RECENT_KEEP recent records and notes, about 600 B each


SHARDED = ("b", "id", "dec", "dg", "tx")


def coordinator_bytes(bytes_: dict[str, float], docs: int) -> float:
    """What the coordinator's slot holds at `docs`: the log (its bytes a document are
    already bounded by LOG_KEEP) and the recent writes."""
    return docs * bytes_["log"] + RECENT_BYTES


def primaries(bytes_: dict[str, float], docs: int, memory: int) -> int | None:
    """Primaries of `memory` bytes a Redis Cluster needs: the 64 shard tags' data spread
    as evenly as whole tags go, plus the coordinator's slot on one of them; None when the
    coordinator's slot alone, or one tag, outgrows a primary."""
    coordinator = coordinator_bytes(bytes_, docs)
    per_tag = docs * sum(bytes_[f] for f in SHARDED) / SHARD_TAGS
    for count in range(1, SHARD_TAGS + 1):
        if coordinator + math.ceil(SHARD_TAGS / count) * per_tag <= memory:
            return count
    return None


def plan(
    docs: int,
    radius: int = 6,
    max_bucket: int = 1024,
    memory: int | None = None,
    default_scheme: str = "k6-b8",
    pairs: np.ndarray | None = None,
    show: int = 12,
    costs: Costs = COSTS,
    progress: Callable[[str], None] | None = None,
    recall: bool = True,
    window: int | None = None,
    short_k: int = WIDEST,
) -> Plan:
    """The layouts for `docs` documents that find every pair within `radius`, best first
    (fewest bytes a document, then least CPU): those whose buckets hold at most
    MAX_PLANNED_BUCKET entries at N, whose lookups read at most MAX_LOOKUP_ENTRIES in at
    most MAX_BUCKET_READS commands, that never reach --max-bucket below N, and that fit
    `memory`."""
    if docs < 1:
        raise ConfigError(f"--docs must be at least 1, not {docs}")
    if not 0 <= radius < BITS:
        raise ConfigError(f"--radius must be between 0 and 63, not {radius}")
    schemes = {s.name: s for s in candidates(radius)}
    default = BlockScheme.parse(default_scheme)
    schemes.setdefault(default.name, default)
    fit: list[Row] = []
    left: list[Row] = []
    for scheme in schemes.values():
        r = row(scheme, docs, max_bucket, costs, window)
        wide = row(scheme.widened(max(short_k, scheme.k)), docs, max_bucket, costs, window)
        r.short = (wide.probes, wide.entries, wide.cpu_us)
        r.default = scheme.name == default.name
        if scheme.k < radius:
            r.excluded.append(f"K={scheme.k} is below the radius {radius}")
        if r.bucket_worst > MAX_PLANNED_BUCKET:
            r.excluded.append(
                f"buckets of {r.bucket_worst:,.0f} entries at N (over {MAX_PLANNED_BUCKET})"
            )
        if r.entries > MAX_LOOKUP_ENTRIES:
            r.excluded.append(
                f"a lookup reads {r.entries:,.0f} entries at N (over {MAX_LOOKUP_ENTRIES:,})"
            )
        if r.probes > MAX_BUCKET_READS:
            r.excluded.append(
                f"{r.probes:,} bucket reads a lookup (over {MAX_BUCKET_READS}): "
                f"{r.cpu_us:,.0f} us of Redis CPU a document"
            )
        _, problem = planned_bucket(scheme, max_bucket, docs)
        if problem:
            r.excluded.append(
                f"reaches --max-bucket {max_bucket} at {r.cap_docs:,.0f} documents, below N"
            )
        if memory is not None:
            r.primaries = primaries(r.bytes, docs, memory)
            if docs * r.total > memory:
                coordinator = coordinator_bytes(r.bytes, docs)
                more = (
                    f"a Redis Cluster needs {r.primaries} primaries of {human(memory)}"
                    if r.primaries
                    else "no Redis Cluster of such primaries holds it: the coordinator's "
                    + (
                        f"slot alone ({human(coordinator)}) outgrows one"
                        if coordinator > memory
                        else "slot and one shard tag outgrow one"
                    )
                )
                r.excluded.append(f"{human(docs * r.total)} does not fit {human(memory)}; {more}")
        (left if r.excluded else fit).append(r)
    fit.sort(key=lambda r: (r.total, r.cpu_us))
    left.sort(key=lambda r: (len(r.excluded), r.total))
    shown = fit[:show]
    shown += [r for r in fit[show:] if r.default]  # the default's row, wherever it ranks
    default_row = next(r for r in fit + left if r.default)
    excluded = left[: show if not fit else 3]
    if default_row.excluded and default_row not in excluded:
        excluded.append(default_row)
    for r in shown + excluded if recall else []:  # recall=False: the selection alone
        scheme = schemes[r.scheme]
        if progress is not None:
            progress(f"recall of {r.scheme}")
        r.found = {d: found_at(scheme, d) for d in range(radius + 1, radius + 3)}
        r.recall = binomial_recall(scheme, radius)
        if pairs is not None:
            r.sample_recall = sample_recall(scheme, pairs)
    return Plan(
        docs, radius, max_bucket, memory, shown, excluded, default_row, costs=costs, window=window
    )


# ------------------------------------------------------------------ output


COLUMNS = (
    ("layout", "<"),
    ("tables", ">"),
    ("key bits", ">"),
    ("B/doc b", ">"),
    ("id", ">"),
    ("dec", ">"),
    ("dg", ">"),
    ("log", ">"),
    ("tx", ">"),
    ("total", ">"),
    ("bucket mean/worst", ">"),
    ("entries/lookup", ">"),
    ("cmds/doc", ">"),
    ("CPU us/doc", ">"),
    ("short: reads/entries/us", ">"),
)


def _cells(r: Row, radius: int, sample: bool, memory: bool) -> list[str]:
    lo, hi = r.key_bits
    b = r.bytes
    cells = [
        r.scheme + (" *" if r.default else ""),
        str(r.tables),
        f"{lo}" if lo == hi else f"{lo}-{hi}",
        *(f"{b[f]:,.0f}" for f in FAMILIES),
        f"{r.total:,.0f}",
        f"{r.bucket_mean:,.2f}/{r.bucket_worst:,.2f}",
        f"{r.entries:,.0f}",
        f"{r.commands:.0f}",
        f"{r.cpu_us:,.0f}",
        f"{r.short[0]:,}/{r.short[1]:,.0f}/{r.short[2]:,.0f}",
    ]
    cells += [f"{r.found.get(d, float('nan')):.3f}" for d in (radius + 1, radius + 2)]
    cells.append("-" if r.recall is None else f"{r.recall:.3f}")
    if sample:
        cells.append("-" if r.sample_recall is None else f"{r.sample_recall:.3f}")
    if memory:
        cells.append("-" if r.primaries is None else str(r.primaries))
    return cells


def _table(rows: Sequence[Row], radius: int, sample: bool, memory: bool) -> list[str]:
    heads = [c for c, _ in COLUMNS] + [f"found d={radius + 1}", f"d={radius + 2}", "recall"]
    aligns = [a for _, a in COLUMNS] + [">", ">", ">"]
    if sample:
        heads.append("sample")
        aligns.append(">")
    if memory:
        heads.append("primaries")
        aligns.append(">")
    body = [_cells(r, radius, sample, memory) for r in rows]
    widths = [max(len(x) for x in col) for col in zip(heads, *body, strict=True)]

    def line(cells: Iterable[str]) -> str:
        return "  ".join(
            c.ljust(w) if a == "<" else c.rjust(w)
            for c, w, a in zip(cells, widths, aligns, strict=True)
        ).rstrip()

    return [line(heads)] + [line(c) for c in body]


def render(p: Plan) -> str:
    sample = p.sample is not None
    memory = p.memory is not None
    fits = f" in {human(p.memory)}" if p.memory is not None else ""
    out = [
        f"Layouts for {p.docs:,} documents that find every pair within distance {p.radius} "
        f"(--max-bucket {p.max_bucket}{fits}), fewest bytes first; * the default scheme.",
    ]
    if p.rows:
        out += _table(p.rows, p.radius, sample, memory)
    else:
        out.append("No layout fits: every candidate is excluded (below, with why).")
    if p.excluded:
        out += ["", "Excluded (why after each):"]
        table = _table(p.excluded, p.radius, sample, memory)
        out.append(table[0])
        for r, text in zip(p.excluded, table[1:], strict=True):
            out.append(text)
            out += [f"    - {why}" for why in r.excluded]
    notes = [
        "Modelled (detector/plan.py, Costs): bytes a document by key family (b block "
        "tables, id map, dec decisions, dg digests, log, tx texts), bucket sizes for "
        "uniform fingerprints, entries a lookup reads (tables x probes x min(bucket, "
        "--max-bucket)), Redis commands and server CPU a document. Measured: "
        + "; ".join(f"{k}: {v}" for k, v in MEASURED.items())
        + ".",
        "short: a text of under 150 words is looked up to its own radius, at most "
        f"{WIDEST} (detector/radius.py), the same tables read one probe bit further: "
        "its bucket reads, entries and CPU us a document; a long text's are the columns "
        "before.",
        f"found d=: chance a pair at that distance is found (Monte Carlo, {MC_PAIRS:,} "
        f"random pairs; 1 within a scheme's K); recall: of pairs at angle pi*{p.radius}/64 "
        f"(distance ~ Binomial(64, {p.radius}/64)).",
    ]
    if p.window is not None:
        notes.append(
            f"tx: texts for the newest {p.window:,} documents (--text-window), with their "
            f"sketches and queue entries, and a sketch alone for the rest; {SKETCH_NOTE}."
        )
    if p.sample is not None:
        notes.append(
            f"sample: the share of the {p.sample['pairs']:,} true pairs of "
            f"{p.sample['file']} ({p.sample['source']}) each layout finds, measured."
        )
    if memory:
        notes.append(
            f"primaries: of {human(p.memory or 0)} each, for a Redis Cluster; "
            + COORDINATOR_NOTE
            + "."
        )
    out.append("")
    out += [line for note in notes for line in textwrap.wrap(note, NOTE_WIDTH)]
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------ the sample


def truth_file(path: str) -> str | None:
    """The truth file beside a stream: dev-stream.jsonl.gz -> dev-truth.jsonl.gz,
    sample.jsonl.gz -> sample-truth.jsonl.gz."""
    import os

    head, name = os.path.split(path)
    stem, dot, ext = name.partition(".")
    options = [stem.replace("stream", "truth")] if "stream" in stem else []
    options.append(stem + "-truth")
    for option in options:
        candidate = os.path.join(head, option + dot + ext)
        if candidate != path and os.path.exists(candidate):
            return candidate
    return None


def read_sample(
    path: str, progress: Callable[[int], None] | None = None
) -> tuple[np.ndarray, dict[str, Any]]:
    """The true pairs' fingerprints (n by 2, uint64) of a sample: a decisions file of
    `neardup detect` (its duplicates not found by the digest, with the fingerprints it
    carries), or a stream whose records carry their truth or have a truth file beside
    them (fingerprinted here with the default engine; HTML loses its tags only)."""
    from .evaluate import load_jsonl, truth_measure

    try:
        lines = load_jsonl(path)
    except OSError as exc:
        raise ConfigError(f"--sample {path}: cannot read it ({exc.strerror or exc})") from exc
    except ConfigError as exc:
        raise ConfigError(f"--sample {exc}") from exc
    if not lines or not isinstance(lines[0], dict):
        raise ConfigError(f"--sample {path}: no records")
    first = lines[0]
    if "decision" in first and "fingerprint" in first:
        return _decision_pairs(path, lines)
    if "text" not in first and "embedding" not in first:
        raise ConfigError(f"--sample {path}: neither a stream (text) nor a decisions file")
    inline = any(f in first for f in ("max_jaccard_earlier", "max_cosine_earlier"))
    truth = lines if inline else None
    source = "truth in the records"
    if truth is None:
        beside = truth_file(path)
        if beside is None:
            raise ConfigError(
                f"--sample {path}: a stream without truth: give records with "
                "max_jaccard_earlier and most_similar_earlier, or put its truth file "
                "beside it (NAME-truth.jsonl.gz)"
            )
        truth = load_jsonl(beside)
        source = f"truth {beside}"
    field_, threshold = truth_measure(truth)
    prints = _fingerprints(path, progress)
    pairs = []
    for t in truth:
        earlier = t.get("most_similar_earlier")
        score = t.get(field_)
        if earlier is None or score is None or score < threshold:
            continue
        a, b = prints.get(t["id"]), prints.get(earlier)
        if a is not None and b is not None:
            pairs.append((a, b))
    about = {"file": path, "source": f"stream, {source}, {field_} >= {threshold}"}
    return np.array(pairs, np.uint64).reshape(-1, 2), {**about, "pairs": len(pairs)}


def _decision_pairs(path: str, lines: list[dict[str, Any]]) -> tuple[np.ndarray, dict[str, Any]]:
    seen: dict[str, int] = {}
    pairs = []
    for d in lines:
        fp = int(d["fingerprint"], 16)
        other = d.get("duplicate_of")
        # exact copies are answered by the digest map, not the tables; a vector's
        # fingerprint lives in another space and another scheme
        plain = not d.get("exact") and not d.get("space")
        if other is not None and plain and other in seen:
            pairs.append((fp, seen[other]))
        seen.setdefault(d["id"], fp)
    about = {"file": path, "source": "decisions: the literal pass's duplicates"}
    return np.array(pairs, np.uint64).reshape(-1, 2), {**about, "pairs": len(pairs)}


def _fingerprints(path: str, progress: Callable[[int], None] | None) -> dict[str, int]:
    """Text fingerprints of a stream's records by id, with the default engine."""
    from .engine import TEXT_SPACE
    from .pipeline import prepare
    from .settings import EngineSettings
    from .stream.files import FileSource

    engine = EngineSettings().engine()
    source = FileSource(path, 512)
    out: dict[str, int] = {}
    try:
        for batch in source.batches():
            prepared = prepare(engine, batch.records)
            for doc, p in zip(prepared.docs, prepared.prints, strict=True):
                if p.space == TEXT_SPACE:
                    out[doc.id] = p.fingerprint
            if progress is not None:
                progress(len(batch.records))
    finally:
        source.close()
    return out


# ------------------------------------------------------------------ an index's plan


def plan_lines(meta: dict[str, str], stats: dict[str, int], max_bucket: int) -> dict[str, Any]:
    """How far an index is from its plan (`index stats`): None-valued fields when the
    index was made without --expected-docs."""
    expected = meta.get("expected_docs")
    if not expected:
        return {}
    planned = int(expected)
    scheme = BlockScheme.parse(meta["scheme"])
    widths = key_widths(scheme)
    docs = int(stats.get("documents", 0))
    evicted = int(stats.get("evicted", 0))
    return {
        "expected_docs": planned,
        "of_plan": round(docs / planned, 4),
        "bucket_mean_now": round(float(np.mean([bucket_size(w, docs) for w in widths])), 3),
        "bucket_mean_planned": round(float(np.mean([bucket_size(w, planned) for w in widths])), 3),
        "reaches_max_bucket_at": round(cap_docs(scheme, max_bucket)),
        "evictions": "begun" if evicted else "none",
    }
