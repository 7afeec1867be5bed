"""The page of `neardup review`: one self-contained HTML file drawn from a Review.

No server, no network: the CSS and a few lines of script are inline, and allowed by a
Content-Security-Policy that names their hashes and nothing else (an inline script that a
record smuggled in would not run, and nothing is fetched); the plots are SVG drawn here.
Every string of the inputs (texts, ids, urls, meta values, file names) is escaped: the
inputs are crawled pages, hostile by default. URLs are shown as text, never as links.
"""

from __future__ import annotations

import base64
import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

from .diff import Span, shared_words
from .review import (
    ALL_REASONS,
    EXHAUSTIVE,
    NOT_NEAREST,
    PASSED_OVER,
    REASONS,
    SOURCE,
    Clusters,
    Pair,
    Review,
    SpaceReview,
    Step,
    TruthReview,
)

CONTEXT = 12  # shared words kept at each end of a long shared run
SIDE_WORDS = 1_500  # words a side of a diff shows at most
DISTANCES = 40  # the distance plot's last bin holds this distance and beyond
SIM_BINS = 50
CLUSTER_BINS = ((1, 1), (2, 2), (3, 3), (4, 5), (6, 10), (11, 20), (21, 50), (51, 100))
SCORES = (
    *("truth", "records", "true_duplicates", "said_duplicate"),
    *("precision", "recall", "f1", "duplicate_of_not_earlier"),
)
FOLDS = 0.2  # a cluster holding this share of a group's records (of 20 or more) is flagged

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1280px;padding:0 20px 40px;
color:#222}
h1{font-size:22px;margin:18px 0 6px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px
solid #ccc}h3{font-size:15px;margin:18px 0 6px}
nav a{margin-right:12px}
table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid #ddd;padding:3px 8px;
text-align:left;vertical-align:top}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
.warn{color:#a40000}.muted{color:#666}.facts dt{font-weight:600;float:left;clear:left;
width:200px}.facts dd{margin:0 0 2px 210px}
.plots{display:flex;flex-wrap:wrap;gap:16px}svg.plot{border:1px solid #eee;background:#fff}
svg .axis{stroke:#444;stroke-width:1}svg .grid{stroke:#eee}svg text{font:11px sans-serif;
fill:#333}svg .duplicate{fill:#d9534f}svg .unique{fill:#5b8fd9}svg .clusters{fill:#7a6fbf}
svg .marker{stroke:#111;stroke-width:1.5;stroke-dasharray:5 3}
details.pair{border:1px solid #ddd;border-radius:4px;margin:4px 0;padding:2px 8px}
details.pair summary{cursor:pointer}details.pair .note{margin:4px 0;color:#444}
.sbs{display:grid;grid-template-columns:1fr 1fr;gap:10px}.side{min-width:0}
.side h4{margin:4px 0;font-size:13px;word-break:break-all}
.words{font:12.5px/1.5 ui-monospace,monospace;white-space:pre-wrap;word-break:break-word;
max-height:26em;overflow:auto;background:#fafafa;border:1px solid #eee;padding:6px;margin:0}
del{background:#fbd5d5;text-decoration:line-through}ins{background:#cdf0cd;
text-decoration:none}.gap{color:#888;font-style:italic}
code{word-break:break-all}button{margin:0 6px 6px 0}
table.largest{table-layout:fixed;width:100%}table.largest td{overflow-wrap:anywhere}
.w5{width:5em}.w9{width:9em}.w18{width:18em}td.begins{font-size:12.5px}
"""

SCRIPT = """
for (const b of document.querySelectorAll("button[data-open]")) {
  b.addEventListener("click", () => {
    for (const d of b.closest("section").querySelectorAll("details")) {
      d.open = b.dataset.open === "1";
    }
  });
}
"""


def _hash(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


POLICY = (
    f"default-src 'none'; style-src '{_hash(STYLE)}'; script-src '{_hash(SCRIPT)}'; "
    "img-src 'none'; base-uri 'none'; form-action 'none'"
)


def e(value: object) -> str:
    """Any value as HTML text or an attribute's value."""
    return escape(str(value), quote=True)


def _num(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def render(made: Review) -> str:
    """The whole page."""
    sections = [_summary(made)]
    for s in made.spaces:
        sections += [_distributions(s), _knobs(s, made), _near_threshold(s, made.top)]
    sections += [_clusters(made.clusters, made.top), _sources(made.clusters, made.top)]
    sections.append(_truth(made.truth, made.top, made))
    title = f"neardup review: {made.decisions_path}"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{e(POLICY)}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{e(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
        + "\n".join(sections)
        + f"\n<script>{SCRIPT}</script>\n</body></html>\n"
    )


def _anchor(kind: str, s: SpaceReview) -> str:
    return f"{kind}-{'text' if s.space == 't' else s.space}"


# --------------------------------------------------------------------------- the summary


def _summary(made: Review) -> str:
    r = made.reading
    records = r.records
    dups = sum(x.duplicate for x in records)
    exact = sum(x.exact for x in records)
    st = made.settings
    facts = [
        ("decisions", f"<code>{e(made.decisions_path)}</code>"),
        ("input", f"<code>{e(made.input_path)}</code>"),
        ("records decided", f"{len(records):,}: {dups:,} duplicates ({exact:,} exact copies)"),
        (
            "settings",
            f"--scheme {e(st.scheme)}, --threshold {st.threshold}, --cosine {st.cosine}, "
            f"--html {e(st.html)}, --max-candidates {st.max_candidates}",
        ),
    ]
    if made.pairs.sample:
        facts.append(
            (
                "pairs",
                f'<span class="warn">nearest earlier records found for a random sample of '
                f"{len(made.pairs.sampled):,} of {made.pairs.records:,} records</span> (each "
                f"against every record before it; all are compared up to {EXHAUSTIVE:,} "
                "records): the distributions, the pairs below the threshold and the knobs' "
                "figures are the sample's",
            )
        )
    else:
        facts.append(("pairs", "every record against every earlier one (exact)"))
    facts.append(("lists", f"each list shows at most {made.top} pairs (--top)"))
    facts.append(("gathered in", f"{made.seconds:.1f} s"))
    warnings = []
    if r.errors:
        warnings.append(f"{r.errors:,} input records are errors (detect gave them no decision)")
    if r.undecided:
        warnings.append(f"{r.undecided:,} input records have no decision in the decisions file")
    if r.unread:
        warnings.append(f"{r.unread:,} decisions name no record of the input")
    if r.prints_differ:
        warnings.append(
            f"{r.prints_differ:,} records' fingerprints differ from their decisions': were the "
            "decisions made with other engine options (--features, --idf, --html...)? The "
            "distances are the decisions', the texts and similarities this run's"
        )
    links = [(_anchor(k, s), f"{t} ({s.label})") for s in made.spaces for k, t in _SPACE_PARTS]
    links += [("clusters", "clusters"), ("sources", "sources"), ("truth", "against the truth")]
    nav = " ".join(f'<a href="#{e(a)}">{e(t)}</a>' for a, t in links)
    return (
        '<header id="summary">\n<h1>neardup review</h1>\n<dl class="facts">'
        + "".join(f"<dt>{e(k)}</dt><dd>{v}</dd>" for k, v in facts)
        + "</dl>\n"
        + "".join(f'<p class="warn">{e(w)}</p>' for w in warnings)
        + f"<nav>{nav}</nav>\n</header>"
    )


_SPACE_PARTS = (
    ("distributions", "distributions"),
    ("knobs", "the knobs"),
    ("threshold", "pairs at the threshold"),
)


# --------------------------------------------------------------------------- plots


@dataclass(frozen=True)
class Series:
    name: str
    css: str  # its class: the color
    counts: Sequence[int]  # one a bin


@dataclass(frozen=True)
class Marker:
    value: float
    css: str
    label: str


W, H = 560, 300
LEFT, RIGHT, TOP, BOTTOM = 58, W - 14, 58, H - 48


def plot(
    title: str,
    edges: Sequence[float],
    series: Sequence[Series],
    x_label: str,
    ticks: Sequence[tuple[float, str]],
    markers: Sequence[Marker] = (),
    css: str = "",
    y_label: str = "records",
) -> str:
    """Bars of counts a bin, the series side by side in each bin, on a log scale (so
    that the tens near a threshold show beside the thousands far from it). The x axis maps
    [edges[0], edges[-1]] onto [LEFT, RIGHT], as the svg's data- attributes say."""
    lo, hi = edges[0], edges[-1]

    def x(v: float) -> float:
        return LEFT + (v - lo) / (hi - lo) * (RIGHT - LEFT)

    most = max((c for s in series for c in s.counts), default=0)
    decades = max(1, math.ceil(math.log10(most + 1)))
    scale = math.log10(1 + 10**decades)

    def y(count: float) -> float:
        return BOTTOM - math.log10(1 + count) / scale * (BOTTOM - TOP)

    out = [
        f'<svg class="plot {e(css)}" role="img" width="{W}" height="{H}" '
        f'viewBox="0 0 {W} {H}" xmlns="http://www.w3.org/2000/svg" data-lo="{lo}" '
        f'data-hi="{hi}" data-left="{LEFT}" data-right="{RIGHT}">',
        f"<title>{e(title)}</title>",
        f'<text x="{LEFT}" y="16" font-weight="bold">{e(title)}</text>',
    ]
    for value in (0, *(10**p for p in range(decades + 1))):
        yy = y(value)
        out.append(
            f'<line class="grid" x1="{LEFT}" x2="{RIGHT}" y1="{yy:.2f}" y2="{yy:.2f}"/>'
            f'<text x="{LEFT - 6}" y="{yy + 4:.2f}" text-anchor="end">{value:,}</text>'
        )
    lx = LEFT
    for s in series:
        label = f"{s.name} ({sum(s.counts):,})"
        out.append(
            f'<rect class="{e(s.css)}" x="{lx}" y="25" width="10" height="10"/>'
            f'<text x="{lx + 14}" y="34">{e(label)}</text>'
        )
        lx += 30 + 7 * len(label)
    bins = len(edges) - 1
    for b in range(bins):
        x0, x1 = x(edges[b]), x(edges[b + 1])
        width = (x1 - x0) * 0.9 / max(len(series), 1)
        for n, s in enumerate(series):
            count = s.counts[b]
            if count:
                top = y(count)
                out.append(
                    f'<rect class="{e(s.css)}" x="{x0 + (x1 - x0) * 0.05 + n * width:.2f}" '
                    f'y="{top:.2f}" width="{width:.2f}" height="{BOTTOM - top:.2f}">'
                    f"<title>{e(s.name)}: {count:,}</title></rect>"
                )
    out.append(f'<line class="axis" x1="{LEFT}" x2="{RIGHT}" y1="{BOTTOM}" y2="{BOTTOM}"/>')
    out.append(f'<line class="axis" x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{BOTTOM}"/>')
    for value, label in ticks:
        xx = x(value)
        out.append(
            f'<line class="axis" x1="{xx:.2f}" x2="{xx:.2f}" y1="{BOTTOM}" y2="{BOTTOM + 4}"/>'
            f'<text x="{xx:.2f}" y="{BOTTOM + 16}" text-anchor="middle">{e(label)}</text>'
        )
    out.append(
        f'<text x="{(LEFT + RIGHT) / 2}" y="{H - 10}" text-anchor="middle">{e(x_label)}</text>'
        f'<text x="14" y="{(TOP + BOTTOM) / 2}" text-anchor="middle" '
        f'transform="rotate(-90 14 {(TOP + BOTTOM) / 2})">{e(y_label)} (log scale)</text>'
    )
    for m in markers:
        xx = x(m.value)
        out.append(
            f'<line class="marker {e(m.css)}" data-value="{m.value}" x1="{xx:.3f}" '
            f'x2="{xx:.3f}" y1="{TOP - 8}" y2="{BOTTOM}"/>'
            f'<text x="{xx + 4:.2f}" y="{TOP - 10}">{e(m.label)}</text>'
        )
    out.append("</svg>")
    return "".join(out)


def _counts(values: Sequence[float], bins: int, index: Callable[[float], int]) -> list[int]:
    out = [0] * bins
    for v in values:
        out[index(v)] += 1
    return out


def distance_plot(s: SpaceReview) -> str:
    edges = [d - 0.5 for d in range(DISTANCES + 2)]

    def at(d: float) -> int:
        return min(int(d), DISTANCES)

    series = [
        Series(f"{name}s", name, _counts(s.distances[name], DISTANCES + 1, at))
        for name in ("duplicate", "unique")
    ]
    ticks = [(float(t), str(t) if t < DISTANCES else f"{t}+") for t in range(0, DISTANCES + 1, 5)]
    return plot(
        f"Hamming distance ({s.label})",
        edges,
        series,
        "a duplicate: to the record it duplicates; a unique record: to its nearest earlier one",
        ticks,
        [Marker(s.k + 0.5, "radius", f"k = {s.k}: farther pairs are never compared")],
        css="distances",
    )


def similarity_plot(s: SpaceReview) -> str:
    edges = [b / SIM_BINS for b in range(SIM_BINS + 1)]

    def at(v: float) -> int:
        return min(max(math.floor(v * SIM_BINS + 1e-9), 0), SIM_BINS - 1)

    series = [
        Series(f"{name}s", name, _counts(s.similarities[name], SIM_BINS, at))
        for name in ("duplicate", "unique")
    ]
    ticks = [(t / 10, f"{t / 10:.1f}") for t in range(0, 11, 2)]
    below = " (below 0 counted at 0)" if s.measure == "cosine" else ""
    return plot(
        f"literal similarity: {s.measure} ({s.label})",
        edges,
        series,
        f"a duplicate: its decision's; a unique record: the most similar of its nearest{below}",
        ticks,
        [Marker(s.threshold, "threshold", f"{s.knob} {s.threshold}")],
        css="similarities",
    )


def cluster_plot(sizes: dict[int, int]) -> str:
    largest = max(sizes, default=1)
    bins = [b for b in CLUSTER_BINS if b[0] <= largest]
    if largest > CLUSTER_BINS[-1][1]:
        bins.append((CLUSTER_BINS[-1][1] + 1, largest))
    counts = [sum(c for size, c in sizes.items() if lo <= size <= hi) for lo, hi in bins]
    ticks = [(n + 0.5, str(lo) if lo == hi else f"{lo}-{hi}") for n, (lo, hi) in enumerate(bins)]
    return plot(
        "cluster sizes",
        [float(n) for n in range(len(bins) + 1)],
        [Series("clusters", "clusters", counts)],
        "records in the cluster",
        ticks,
        css="cluster-sizes",
        y_label="clusters",
    )


def _distributions(s: SpaceReview) -> str:
    d, u = len(s.distances["duplicate"]), len(s.distances["unique"])
    return (
        f'<section id="{_anchor("distributions", s)}" class="distributions">\n'
        f"<h2>Distributions: {e(s.label)}</h2>\n"
        f"<p>{s.records:,} records of this space: {d:,} duplicates with the distance and "
        f"similarity their decisions carry, and {u:,} unique records with their nearest "
        f"earlier records by fingerprint ({e(s.scheme)}: radius k = {s.k}). A duplicate "
        f"needs a candidate within k whose {s.measure} reaches {s.threshold}.</p>\n"
        f'<div class="plots">{distance_plot(s)}{similarity_plot(s)}</div>\n</section>'
    )


# --------------------------------------------------------------------------- the knobs


def _change(n: int, true: int | None, sign: str) -> str:
    if not n:
        return "0"
    return f"{sign}{n:,}" + (f" ({true:,} true)" if true is not None else "")


def _steps_table(steps: Sequence[Step], radius: bool) -> str:
    head = "<tr><th>setting</th>" + ('<th class="n">candidate pairs</th>' if radius else "")
    head += '<th class="n">duplicates gained</th><th class="n">duplicates lost</th>'
    head += "<th>tables</th></tr>" if radius else "</tr>"
    rows = []
    for st in steps:
        cells = [f"<td>{e(st.knob)} {st.value:g}</td>"]
        if radius:
            pairs = st.pairs or 0
            cells.append(f'<td class="n">{"+" if pairs > 0 else ""}{pairs:,}</td>')
        cells.append(f'<td class="n">{e(_change(st.gained, st.gained_true, "+"))}</td>')
        cells.append(f'<td class="n">{e(_change(st.lost, st.lost_true, "-"))}</td>')
        if radius:
            cells.append(f"<td>{e(st.scheme or '-')}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f'<table class="steps">{head}{"".join(rows)}</table>'


def step_sentence(st: Step) -> str:
    """One step in words: "--threshold 0.75: +12 duplicates, of which 9 true by the truth
    file; -0"."""
    words = []
    if st.pairs is not None:
        words.append(f"{'+' if st.pairs >= 0 else ''}{st.pairs:,} candidate pairs found")
    for n, true, sign in ((st.gained, st.gained_true, "+"), (st.lost, st.lost_true, "-")):
        if n:
            of = f", of which {true:,} true by the truth file" if true is not None else ""
            words.append(f"{sign}{n:,} duplicates{of}")
    return f"{st.knob} {st.value:g}: " + ("; ".join(words) or "no change")


def _knobs(s: SpaceReview, made: Review) -> str:
    agree, total = s.reproduced
    sample = " in the sample" if made.pairs.sample else ""
    threshold = [st for st in s.steps if st.knob != "k"]
    radius = [st for st in s.steps if st.knob == "k"]
    said = [step_sentence(st) for st in s.steps if st.gained or st.lost or st.pairs]
    true = " (true: by the truth file)" if made.truth is not None else ""
    return (
        f'<section id="{_anchor("knobs", s)}" class="knobs">\n'
        f"<h2>What the knobs would change: {e(s.label)}</h2>\n"
        f"<p>Computed from the pairs{sample}: a record is taken for a duplicate when it is an "
        f"exact copy or one of its {made.settings.max_candidates} nearest earlier records "
        f"within k has {s.measure} at or above the threshold. At the run's settings "
        f"({s.knob} {s.threshold}, k = {s.k}) that agrees with {agree:,} of {total:,} "
        f"decisions; each row is the change from there{true}.</p>\n"
        f"<h3>{e(s.knob)} (now {s.threshold})</h3>{_steps_table(threshold, False)}\n"
        f"<h3>the radius k (now {s.k}: {e(s.scheme)})</h3>{_steps_table(radius, True)}\n"
        + "<ul>"
        + "".join(f"<li>{e(line)}</li>" for line in said)
        + '</ul>\n<p class="muted">A wider radius costs more tables (or more probes a '
        "lookup) and more literal checks; it finds only what the threshold then accepts."
        "</p>\n</section>"
    )


# --------------------------------------------------------------------------- pairs


def diff_sides(diff: Sequence[Span]) -> tuple[str, str]:
    """The two texts of a diff as HTML: shared words plain (a long run shortened to its
    ends), each text's own words marked, the first's struck (del) and the second's added
    (ins); each side cut after about SIDE_WORDS words."""
    sides: tuple[list[str], list[str]] = ([], [])
    shown, cut = [0, 0], [False, False]
    for s in diff:
        for n, words in enumerate((s.a, s.b)):
            if not words:
                continue
            if shown[n] >= SIDE_WORDS:
                cut[n] = True
            elif s.tag != "equal":
                tag = "del" if n == 0 else "ins"
                sides[n].append(f"<{tag}>{e(' '.join(words))}</{tag}>")
                shown[n] += len(words)
            elif len(words) > 2 * CONTEXT + 1:
                gap = f'<span class="gap">… {len(words) - 2 * CONTEXT:,} shared words …</span>'
                ends = e(" ".join(words[:CONTEXT])), e(" ".join(words[-CONTEXT:]))
                sides[n].append(f"{ends[0]} {gap} {ends[1]}")
                shown[n] += 2 * CONTEXT
            else:
                sides[n].append(e(" ".join(words)))
                shown[n] += len(words)
    for n in (0, 1):
        if cut[n]:
            sides[n].append(f'<span class="gap">… (cut after about {SIDE_WORDS:,} words)</span>')
    return " ".join(sides[0]), " ".join(sides[1])


def _side(title: str, who: Pair, later: bool, words: str) -> str:
    r = who.later if later else who.earlier
    assert r is not None
    where = f" · {e(r.url)}" if r.url else ""
    cut = " · its cut (main content)" if r.page else ""
    return (
        f'<div class="side"><h4>{e(title)}: {e(r.id)}{where}{cut}</h4>'
        f'<p class="words">{words}</p></div>'
    )


def pair_html(p: Pair) -> str:
    facts = []
    if p.distance is not None:
        facts.append(f"distance {p.distance}")
    if p.similarity is not None:
        facts.append(f"ours {p.similarity:.3f}")
    if p.truth is not None:
        facts.append(f"truth {p.truth:.3f}")
    if p.reason is not None:
        facts.append(p.reason)
    partner = p.earlier.id if p.earlier is not None else "(not found)"
    summary = f"{e(p.later.id)} ← {e(partner)}: {e(', '.join(facts))}"
    if p.earlier is None:
        words = e(" ".join(p.later.text.split()[:300]))
        body = f'<div class="sbs">{_side("the record", p, True, words)}</div>'
    else:
        left, right = diff_sides(p.diff)
        shared, a, b = shared_words(p.diff)
        facts_line = f"{shared:,} words shared of {a:,} (earlier) and {b:,} (this record)"
        body = (
            f'<p class="muted">{e(facts_line)}</p><div class="sbs">'
            + _side("earlier", p, False, left)
            + _side("this record", p, True, right)
            + "</div>"
        )
    return (
        f'<details class="pair"><summary>{summary}</summary>'
        f'<p class="note">{e(p.note)}</p>{body}</details>'
    )


def pair_list(title: str, css: str, pairs: Sequence[Pair], total: int, top: int, why: str) -> str:
    cut = f" (the first {top} of {total:,})" if total > len(pairs) else ""
    if not pairs:
        return f'<div class="{e(css)}"><h3>{e(title)}: none</h3><p class="muted">{e(why)}</p></div>'
    return (
        f'<div class="{e(css)}"><h3>{e(title)}: {total:,}{e(cut)}</h3>'
        f'<p class="muted">{e(why)}</p>' + "".join(pair_html(p) for p in pairs) + "</div>"
    )


_BUTTONS = '<button type="button" data-open="1">open all</button>' + (
    '<button type="button" data-open="0">close all</button>'
)


def _near_threshold(s: SpaceReview, top: int) -> str:
    m = s.measure
    return (
        f'<section id="{_anchor("threshold", s)}" class="threshold">\n'
        f"<h2>Pairs nearest the threshold: {e(s.label)}</h2>\n{_BUTTONS}"
        + pair_list(
            "just above: duplicates, least similar first",
            "above",
            s.above,
            s.totals["above"],
            top,
            f"Decided duplicates (not exact copies) by their {m}, from {s.threshold} up.",
        )
        + pair_list(
            "just below: unique records' most similar candidate, most similar first",
            "below",
            s.below,
            s.totals["below"],
            top,
            f"Candidates within k = {s.k} that the threshold turned down; lowering "
            f"{s.knob} to a pair's {m} makes it a duplicate.",
        )
        + pair_list(
            "beyond the radius: unique records with a pair past k above the threshold",
            "beyond",
            s.beyond,
            s.totals["beyond"],
            top,
            f"Pairs up to k + 4 bits apart whose {m} reaches {s.threshold}: raising k to "
            "a pair's distance would find it.",
        )
        + "\n</section>"
    )


# --------------------------------------------------------------------------- clusters


def _clusters(c: Clusters, top: int) -> str:
    count = sum(c.sizes.values())
    largest = max(c.sizes, default=0)
    how = (
        "the decisions carry no cluster: derived by following duplicate_of"
        if c.derived
        else "the decisions' cluster field"
    )
    rows = []
    for cl in c.largest:
        groups = []
        for name, here, of in cl.groups:
            share = here / of if of else 0.0
            flag = share >= FOLDS and of >= 20
            text = f"{name}: {here:,} of its {of:,} ({_pct(here, of)})"
            groups.append(f'<span class="warn">{e(text)}</span>' if flag else e(text))
        more = f" … ({cl.size - len(cl.members):,} more)" if cl.size > len(cl.members) else ""
        rows.append(
            f'<tr><td><code>{e(cl.id)}</code></td><td class="n">{cl.size:,}</td>'
            f"<td>{'<br>'.join(groups)}</td>"
            f"<td>{e(', '.join(cl.members))}{e(more)}</td>"
            f'<td class="begins">{e(cl.text)}</td></tr>'
        )
    table = (
        '<table class="largest"><tr><th class="w9">first document</th><th class="n w5">'
        f'records</th><th class="w18">their groups ({e(c.group_by)})</th><th class="w18">'
        "members</th><th>its text begins</th></tr>" + "".join(rows) + "</table>"
        if rows
        else "<p>No cluster holds more than one record.</p>"
    )
    return (
        '<section id="clusters" class="clusters">\n<h2>Clusters</h2>\n'
        f"<p>{count:,} clusters ({e(how)}); the largest holds {largest:,} records. A cluster "
        f"holding {FOLDS:.0%} or more of a group's records is marked: one setting too loose "
        "can fold a whole site into one cluster.</p>\n"
        f'<div class="plots">{cluster_plot(dict(c.sizes))}</div>\n'
        f"<h3>The largest clusters</h3>{table}\n</section>"
    )


def _sources(c: Clusters, top: int) -> str:
    label = {"host": "host (of the url)", "auto": f"host (of the url; else meta.{SOURCE})"}.get(
        c.group_by, c.group_by
    )
    cut = f" (the {len(c.groups)} with the most records of {c.group_count:,})"
    rows = "".join(
        f'<tr><td>{e(g.name)}</td><td class="n">{g.records:,}</td>'
        f'<td class="n">{g.duplicates:,}</td><td class="n">{_pct(g.duplicates, g.records)}</td>'
        f'<td class="n">{g.exact:,}</td><td class="n">{g.largest:,}</td></tr>'
        for g in c.groups
    )
    return (
        '<section id="sources" class="sources">\n<h2>Duplicate rates by source</h2>\n'
        f"<p>Grouped by {e(label)}{e(cut) if c.group_count > len(c.groups) else ''}; "
        "--group-by meta.FIELD groups by a field of the records' meta instead.</p>\n"
        f'<table><tr><th>{e(label)}</th><th class="n">records</th><th class="n">duplicates'
        '</th><th class="n">rate</th><th class="n">exact copies</th><th class="n">largest '
        f"cluster</th></tr>{rows}</table>\n</section>"
    )


# --------------------------------------------------------------------------- the truth


def _truth(t: TruthReview | None, top: int, made: Review) -> str:
    if t is None:
        return (
            '<section id="truth" class="truth">\n<h2>Against the truth</h2>\n<p>No truth '
            "file given (--truth): precision, recall and the misses need one.</p>\n</section>"
        )
    s = t.scores
    scores = "".join(
        f'<tr><th>{e(k)}</th><td class="n">{e(s[k])}</td></tr>' for k in SCORES if k in s
    )
    why = {
        REASONS[0]: "our measure reaches the threshold, but the fingerprints are farther "
        "apart than k or share no block key: never compared (a wider k finds it)",
        REASONS[1]: "our measure is below the threshold (a lower threshold takes it)",
        REASONS[2]: "pages: the truth's main contents reach the threshold, our cuts do not "
        "(the extraction, not a knob)",
        NOT_NEAREST: "within reach and above the threshold, but more than --max-candidates "
        "candidates were nearer (raise --max-candidates)",
        PASSED_OVER: "within reach and above the threshold, yet unique: a replaced "
        "version, a text judged on its sketch, or decisions made with other settings",
    }
    reasons = "".join(
        f'<tr><td>{e(r)}</td><td class="n">{t.reasons.get(r, 0):,}</td><td>{e(why[r])}</td></tr>'
        for r in ALL_REASONS
        if r in t.reasons or r in REASONS
    )
    fn_total = sum(t.reasons.values())
    fn_lists = "".join(
        pair_list(
            f"false negatives: {reason}",
            "false-negatives",
            [p for p in t.false_negatives if (p.reason or PASSED_OVER) == reason],
            t.reasons[reason],
            top,
            why[reason],
        )
        for reason in ALL_REASONS
        if t.reasons.get(reason)
    )
    return (
        '<section id="truth" class="truth">\n<h2>Against the truth</h2>\n'
        f"<p>Scored as <code>neardup eval</code> scores: a record is truly a duplicate when "
        f"{e(t.field)} &gt;= {t.threshold}.</p>\n<table>{scores}</table>\n"
        f"<h3>Why the {fn_total:,} false negatives were missed</h3>"
        f'<table><tr><th>reason</th><th class="n">records</th><th>what it means</th></tr>'
        f"{reasons}</table>\n{_BUTTONS}"
        + pair_list(
            "false positives, the truth's highest first",
            "false-positives",
            t.false_positives,
            t.fp_total,
            top,
            "Decided duplicates the truth puts below its threshold: ours against the truth's.",
        )
        + (fn_lists or "<h3>false negatives: none</h3>")
        + "\n</section>"
    )
