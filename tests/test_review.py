"""`neardup review`: the page built from the bundled samples (text and HTML, with their
truth), read back with an HTML parser, and the data behind it held to brute force."""

from __future__ import annotations

import json
import re
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from detector import review as rv
from detector import review_page as page_module
from detector.cli import main
from detector.evaluate import evaluate, load_jsonl, outcomes
from detector.review_page import SCRIPT, render
from detector.settings import EngineSettings
from detector.verify import jaccard

from .helpers import (
    HTML_SAMPLE,
    HTML_SAMPLE_TRUTH,
    SAMPLE,
    SAMPLE_TRUTH,
    edit_words,
    words_text,
    write_jsonl,
)

# --------------------------------------------------------------------------- the page


class Element:
    def __init__(self, tag: str, attrs: dict[str, str], parent: Element | None) -> None:
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list[Element] = []
        self.text: list[str] = []

    def all(self, tag: str | None = None, css: str | None = None) -> list[Element]:
        out = []
        for c in self.children:
            if (tag is None or c.tag == tag) and (css is None or css in c.classes):
                out.append(c)
            out += c.all(tag, css)
        return out

    @property
    def classes(self) -> list[str]:
        return self.attrs.get("class", "").split()

    def words(self) -> str:
        return "".join(self.text) + "".join(c.words() for c in self.children)

    def by_id(self, name: str) -> Element:
        found = [e for e in self.all() if e.attrs.get("id") == name]
        assert len(found) == 1, name
        return found[0]


VOID = {"meta", "br", "hr", "img", "input", "link"}  # none of them closed


class Page(HTMLParser):
    """The page as a tree, every start tag and the text of each element."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#root", {}, None)
        self.at = self.root
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        self.tags.append((tag, values))
        made = Element(tag, values, self.at)
        self.at.children.append(made)
        if tag not in VOID:
            self.at = made

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        self.tags.append((tag, values))
        self.at.children.append(Element(tag, values, self.at))

    def handle_endtag(self, tag: str) -> None:
        at: Element | None = self.at
        while at is not None and at.tag != tag:
            at = at.parent
        if at is not None and at.parent is not None:
            self.at = at.parent

    def handle_data(self, data: str) -> None:
        self.at.text.append(data)


def detect(tmp: Path, records: Path, *options: str) -> Path:
    out = tmp / f"decisions-{records.name}-{len(options)}.jsonl"
    assert main(["detect", str(records), "-o", str(out), "--no-progress", *options]) == 0
    return out


def build(tmp: Path, decisions: Path, records: Path, *more: str) -> str:
    page = tmp / "review.html"
    args = ["review", str(decisions), str(records), "-o", str(page), "--no-progress", *more]
    assert main(args) == 0
    return page.read_text(encoding="utf-8")


# (records, truth, engine options, threshold, k): the defaults; a loose threshold with a
# radius of 1 (false positives, and misses beyond the radius); a strict threshold (misses
# below it); the HTML pages
CASES = {
    "text": (SAMPLE, SAMPLE_TRUTH, (), 0.8, 6),
    "text-loose": (SAMPLE, SAMPLE_TRUTH, ("--threshold", "0.6", "--scheme", "k1-b2"), 0.6, 1),
    "text-strict": (SAMPLE, SAMPLE_TRUTH, ("--threshold", "0.9"), 0.9, 6),
    "html": (HTML_SAMPLE, HTML_SAMPLE_TRUTH, (), 0.8, 6),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def built(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    records, truth, options, threshold, k = CASES[request.param]
    tmp = tmp_path_factory.mktemp(request.param)
    decisions = detect(tmp, records, *options)
    html = build(tmp, decisions, records, "--truth", str(truth), *options)
    return Page(html), html, load_jsonl(str(decisions)), load_jsonl(str(truth)), threshold, k


def test_every_section_is_there(built: Any) -> None:
    page, *_ = built
    for name in ("summary", "distributions-text", "knobs-text", "threshold-text"):
        page.root.by_id(name)
    for name in ("clusters", "sources", "truth"):
        assert name in page.root.by_id(name).classes


def _x(svg: Element, value: float) -> float:
    a = svg.attrs
    lo, hi, left, right = (float(a[k]) for k in ("data-lo", "data-hi", "data-left", "data-right"))
    return left + (value - lo) / (hi - lo) * (right - left)


def test_the_plots_are_svg_with_the_threshold_and_k_where_they_belong(built: Any) -> None:
    page, _, _, _, threshold, k = built
    plots = {c for svg in page.root.all("svg", "plot") for c in svg.classes} - {"plot"}
    assert plots == {"distances", "similarities", "cluster-sizes"}
    similarities = page.root.all("svg", "similarities")[0]
    (line,) = similarities.all("line", "threshold")
    assert float(line.attrs["data-value"]) == threshold
    assert float(line.attrs["x1"]) == pytest.approx(_x(similarities, threshold), abs=0.01)
    left, right = page_module.LEFT, page_module.RIGHT
    assert float(line.attrs["x1"]) == pytest.approx(left + threshold * (right - left), abs=0.01)
    distances = page.root.all("svg", "distances")[0]
    (radius,) = distances.all("line", "radius")
    # between the bars of k and k + 1: pairs to its right are never compared
    assert float(radius.attrs["x1"]) == pytest.approx(_x(distances, k + 0.5), abs=0.01)
    assert all(float(r.attrs["height"]) >= 0 for r in page.root.all("rect"))


def _count(heading: Element) -> int:
    """The number a list's heading gives ("...: 12" or "...: 12 (the first 50 of 60)")."""
    text = heading.words()
    if text.endswith(": none"):
        return 0
    found = re.search(r": ([\d,]+)(?: \(the first \d+ of ([\d,]+)\))?$", text)
    assert found, text
    return int((found[2] or found[1]).replace(",", ""))


def _listed(section: Element, css: str) -> list[str]:
    return [
        d.all("summary")[0].words().split(" ← ")[0]
        for div in section.all("div", css)
        for d in div.all("details", "pair")
    ]


def test_the_false_positives_and_negatives_are_the_ones_eval_counts(built: Any) -> None:
    page, _, decisions, truth, _, _ = built
    scores = evaluate(decisions, truth)
    _, fps, fns = outcomes(decisions, truth)
    section = page.root.by_id("truth")
    fp_lists = section.all("div", "false-positives")
    assert sum(_count(div.all("h3")[0]) for div in fp_lists) == len(fps)
    assert len(fps) == scores["said_duplicate"] - (scores["true_duplicates"] - len(fns))
    assert _listed(section, "false-positives") == sorted(
        fps, key=lambda i: -next(t["max_jaccard_earlier"] for t in truth if t["id"] == i)
    )
    assert sorted(_listed(section, "false-negatives")) == sorted(fns)
    reasons = {
        row.all("td")[0].words(): int(row.all("td")[1].words().replace(",", ""))
        for row in section.all("table")[1].all("tr")[1:]
    }
    assert sum(reasons.values()) == len(fns)
    assert {r for r, n in reasons.items() if n} <= set(rv.REASONS)
    for div in section.all("div", "false-negatives"):
        reason = div.all("h3")[0].words().removeprefix("false negatives: ").rsplit(":", 1)[0]
        assert reason in rv.REASONS
        for summary in div.all("summary"):
            assert summary.words().endswith(reason)


@pytest.mark.parametrize(
    ("options", "reason"),
    [({"threshold": 0.6, "scheme": "k1-b2"}, rv.NO_TABLE), ({"threshold": 0.9}, rv.BELOW)],
)
def test_the_cases_have_the_misses_they_are_there_for(
    tmp_path: Path, options: dict[str, Any], reason: str
) -> None:
    """So that the checks above check something: false positives at 0.6, misses beyond a
    radius of 1, misses below a threshold of 0.9 (the truth's is 0.8)."""
    flags = [f for name, value in options.items() for f in (f"--{name}", str(value))]
    decisions = detect(tmp_path, SAMPLE, *flags)
    settings = EngineSettings(**options)
    made = rv.review(str(decisions), str(SAMPLE), settings, str(SAMPLE_TRUTH))
    assert made.truth is not None
    assert (made.truth.fp_total > 0) is (settings.threshold < 0.8)
    assert set(made.truth.reasons) == {reason}
    for p in made.truth.false_negatives:
        assert p.reason == reason and p.distance is not None and p.similarity is not None
        if reason == rv.NO_TABLE:
            assert p.distance > settings.block_scheme().k and p.similarity >= settings.threshold
        else:
            assert p.similarity < settings.threshold


def _clusters_by_hand(decisions: list[dict[str, Any]]) -> Counter[int]:
    head: dict[str, str] = {}
    for d in decisions:  # in order: duplicate_of always names an earlier record
        of = d["duplicate_of"]
        head[d["id"]] = head.get(of, of) if d["decision"] == "duplicate" else d["id"]
    return Counter(Counter(head.values()).values())


def test_the_cluster_sizes_are_the_decisions(built: Any) -> None:
    page, _, decisions, *_ = built
    sizes = _clusters_by_hand(decisions)
    section = page.root.by_id("clusters")
    rows = section.all("table")[0].all("tr")[1:] if section.all("table") else []
    shown = Counter(int(r.all("td")[1].words().replace(",", "")) for r in rows)
    assert shown == Counter({s: n for s, n in sizes.items() if s > 1})
    bars = section.all("svg", "cluster-sizes")[0].all("rect", "clusters")
    counted = [  # each bar's title; the legend's square has none
        int(b.all("title")[0].words().split(": ")[1].replace(",", "")) for b in bars if b.children
    ]
    assert sum(counted) == sum(sizes.values())
    assert f"the largest holds {max(sizes)} records" in section.words()


def test_the_page_reaches_for_nothing_outside_itself(built: Any) -> None:
    page, *_ = built
    for tag, attrs in page.tags:
        for name, value in attrs.items():
            if name in ("src", "href", "action", "xlink:href", "formaction", "data"):
                assert value.startswith("#"), (tag, name, value)
        assert tag not in ("img", "link", "iframe", "object", "embed", "base", "form")
    (policy,) = [
        a["content"] for t, a in page.tags if a.get("http-equiv") == "Content-Security-Policy"
    ]
    assert "default-src 'none'" in policy and "unsafe-inline" not in policy
    for tag, attrs in page.tags:  # a record's url is shown as text, never as a link
        assert all("://" not in v for k, v in attrs.items() if k != "xmlns"), (tag, attrs)


def test_the_pairs_listed_at_the_threshold_are_on_their_side(built: Any) -> None:
    page, _, decisions, _, threshold, _ = built
    section = page.root.by_id("threshold-text")
    said = {d["id"]: d for d in decisions}
    for css, above in (("above", True), ("below", False)):
        for doc_id in _listed(section, css):
            d = said[doc_id]
            assert (d["decision"] == "duplicate") is above
            if above:
                assert d["similarity"] >= threshold and not d["exact"]


# --------------------------------------------------------------------------- hostile input

HOSTILE = "&lt;script&gt;window.__pwned = 1&lt;/script&gt;"  # a plain text: decoded, decided on


def hostile_records() -> list[dict[str, Any]]:
    base = words_text(7, 250)
    return [
        {
            "id": "<script>alert('id')</script>",
            "text": f"{base} {HOSTILE}",
            "url": "javascript:alert(1)",
            "meta": {"source": "<img src=x onerror=alert(1)>"},
        },
        {
            "id": "b\"'><script>alert(2)</script>",
            "text": f"{edit_words(base, 3, 2)} {HOSTILE}",
            "url": 'https://evil.example/"><script>alert(3)</script>',
            "meta": {"source": "<img src=x onerror=alert(1)>"},
        },
        {"id": "c<b>", "text": f"{edit_words(base, 40, 3)} {HOSTILE}", "url": "//evil.example/x"},
        {"id": "d", "text": words_text(8, 100)},
    ]


def hostile_page(tmp: Path, *more: str) -> str:
    records = write_jsonl(tmp / "hostile.jsonl", hostile_records())
    truth = write_jsonl(
        tmp / "hostile-truth.jsonl",
        [
            {"id": r["id"], "max_jaccard_earlier": j, "most_similar_earlier": p}
            for r, j, p in zip(
                hostile_records(),
                (0.0, 0.5, 0.9, 0.0),
                (None, "<script>alert('id')</script>", "<script>alert('id')</script>", None),
                strict=True,
            )
        ],
    )
    return build(tmp, detect(tmp, records), records, "--truth", str(truth), *more)


def test_hostile_text_is_shown_as_text_and_never_run(tmp_path: Path) -> None:
    html = hostile_page(tmp_path, "--group-by", "meta.source")
    page = Page(html)
    scripts = [e for e in page.root.all("script")]
    assert len(scripts) == 1 and scripts[0].words() == SCRIPT  # ours, and only ours
    for tag, attrs in page.tags:
        assert not any(name.startswith("on") for name in attrs), (tag, attrs)
        assert tag != "img"
    words = page.root.words()
    assert "<script>window.__pwned = 1</script>" in words  # the record's words, as text
    assert "<script>alert('id')</script>" in words
    assert "<img src=x onerror=alert(1)>" in words  # the meta group, as text
    assert "javascript:alert(1)" in words
    assert "&lt;script&gt;window.__pwned" in html


# --------------------------------------------------------------------------- the data


@pytest.fixture(scope="module")
def sample_review(tmp_path_factory: pytest.TempPathFactory) -> rv.Review:
    tmp = tmp_path_factory.mktemp("data")
    decisions = detect(tmp, SAMPLE)
    return rv.review(str(decisions), str(SAMPLE), EngineSettings(), str(SAMPLE_TRUTH))


def test_the_pairs_are_the_nearest_earlier_records_by_brute_force(
    sample_review: rv.Review,
) -> None:
    records = sample_review.reading.records
    pairs = sample_review.pairs
    reach, keep = 6 + rv.WIDER, EngineSettings().max_candidates
    for i in range(1, len(records), 7):
        dist = [(records[i].fingerprint ^ records[j].fingerprint).bit_count() for j in range(i)]
        near = [j for j in range(i) if dist[j] <= reach]
        near = sorted(near, key=lambda j: (dist[j], j))[:keep] or [int(np.argmin(dist))]
        mine = pairs.query == i
        assert pairs.other[mine].tolist() == near
        assert pairs.distance[mine].tolist() == [dist[j] for j in near]
        expected = [jaccard(records[i].compared, records[j].compared) for j in near]
        assert pairs.similarity[mine].tolist() == pytest.approx(expected)


def test_the_model_reproduces_the_run_and_its_steps_match_the_pairs(
    sample_review: rv.Review,
) -> None:
    (space,) = sample_review.spaces
    assert space.reproduced == (400, 400)
    assert len(space.below) == space.totals["below"]  # not cut: every one is listed
    for step in space.steps:
        if step.knob == "--threshold" and step.value < space.threshold:
            assert step.gained == sum(p.similarity >= step.value for p in space.below)
            assert step.lost == 0
        if step.knob == "--threshold" and step.value > space.threshold:
            assert step.gained == 0
            assert step.lost == sum(p.similarity < step.value for p in space.above)


def test_clusters_follow_the_cluster_field_when_the_decisions_carry_it() -> None:
    decisions = [
        {"id": "a", "decision": "unique", "duplicate_of": None},
        {"id": "b", "decision": "duplicate", "duplicate_of": "a"},
        {"id": "c", "decision": "duplicate", "duplicate_of": "b"},
        {"id": "d", "decision": "duplicate", "duplicate_of": "gone"},  # from an older index
    ]
    heads, derived = rv.cluster_of(decisions)
    assert heads == {"a": "a", "b": "a", "c": "a", "d": "gone"} and derived
    carried = [{**d, "cluster": "z" if d["id"] in "bc" else d["id"]} for d in decisions]
    heads, derived = rv.cluster_of(carried)
    assert heads["b"] == heads["c"] == "z" and not derived


def test_beyond_the_budget_the_pairs_are_a_sample_and_the_page_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rv, "PAIR_BUDGET", 10_000)  # of 79,800 pairs in the sample
    decisions = detect(tmp_path, SAMPLE)
    made = rv.review(str(decisions), str(SAMPLE), EngineSettings())
    assert made.pairs.sample and 0 < len(made.pairs.sampled) < 400
    assert set(made.pairs.query.tolist()) <= set(made.pairs.sampled.tolist())
    (space,) = made.spaces
    assert space.records == len(made.pairs.sampled)
    assert "random sample" in Page(render(made)).root.by_id("summary").words()


def test_a_long_list_is_cut_and_says_so(tmp_path: Path) -> None:
    decisions = detect(tmp_path, SAMPLE)
    page = Page(build(tmp_path, decisions, SAMPLE, "--top", "3"))
    above = page.root.by_id("threshold-text").all("div", "above")[0]
    assert len(above.all("details")) == 3
    assert "(the first 3 of 8)" in above.all("h3")[0].words()


# --------------------------------------------------------------------------- bad input


def _error(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def test_bad_input_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    decisions = detect(tmp_path, SAMPLE)
    out = str(tmp_path / "page.html")
    lines = decisions.read_text().splitlines()

    def review(decided: str, records: str = str(SAMPLE), *more: str) -> str:
        return _error(["review", decided, records, "-o", out, "--no-progress", *more], capsys)

    bad = tmp_path / "bad.jsonl"
    bad.write_text(lines[0] + "\nnot json\n")
    assert "bad.jsonl:2: not JSON" in review(str(bad))
    record = json.loads(lines[0])
    bad.write_text(json.dumps({**record, "fingerprint": "xyz"}) + "\n")
    assert "decision 1: fingerprint 'xyz' is not 16 hex digits" in review(str(bad))
    bad.write_text(json.dumps({"line": 3, "reason": "not_json", "raw": "eA=="}) + "\n")
    assert "decision 1 is an error record" in review(str(bad))
    other = write_jsonl(tmp_path / "other.jsonl", [{"id": "zz", "text": "other words"}])
    assert "no decision names a record of" in review(str(decisions), str(other))
    assert "cannot open input" in review(str(decisions), str(tmp_path / "missing.jsonl"))
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(SAMPLE.read_bytes()[:5000])
    assert "cannot read cut.jsonl.gz" in review(str(decisions), str(cut))
    truth = write_jsonl(tmp_path / "truth.jsonl", [{"id": "d000000", "max_jaccard_earlier": 0}])
    truth.write_text(truth.read_text() + '{"id": "d000001"}\n')
    assert "line 2 needs max_jaccard_earlier" in review(
        str(decisions), str(SAMPLE), "--truth", str(truth)
    )
    with pytest.raises(SystemExit) as stopped:
        main(["review", str(decisions), str(SAMPLE), "-o", out, "--group-by", "site"])
    assert stopped.value.code == 2
    assert "--group-by: must be auto, host or meta.FIELD" in capsys.readouterr().err


def test_the_work_shows_its_progress_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    decisions = detect(tmp_path, SAMPLE)
    capsys.readouterr()
    page = tmp_path / "page.html"
    assert main(["review", str(decisions), str(SAMPLE), "-o", str(page), "--progress"]) == 0
    err = capsys.readouterr().err
    for stage in ("reading", "nearest earlier records", "word diffs"):
        assert stage in err
    assert f"neardup: {page}: 400 records, " in err


def test_a_record_is_grouped_by_its_host_else_its_meta_source() -> None:
    from detector.records import Document

    paged = Document("a", "x", url="https://Docs.Example/a?b", meta={"source": "feed"})
    fed = Document("b", "x", meta={"source": "feed", "site": "s1"})
    bare = Document("c", "x")
    assert [rv.group_of(d, "auto") for d in (paged, fed, bare)] == [
        "docs.example",
        "feed",
        "(no url)",
    ]
    assert [rv.group_of(d, "host") for d in (paged, fed)] == ["docs.example", "(no url)"]
    assert [rv.group_of(d, "meta.site") for d in (paged, fed)] == ["(no site)", "s1"]
