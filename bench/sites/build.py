"""Build held-out HTML "sites" streams with exact main-content truth (issue 22).

    python bench/sites/build.py [--out DIR] [--pages-per-site N] [--seed S]

Five documentation sites shipped in Debian packages, each under a made-up host, crawled
the way ../shared/data/README.md describes the dev HTML stream: originals as shipped,
recrawls whose template changed, syndicated copies in another site's template, and
template-generated sibling urls. The packages are fetched with `apt-get download` into
DIR/debs (kept as a cache) and unpacked into a temporary directory. Writes
DIR/sites-stream.jsonl.gz ({"id", "text", "url"}) and DIR/sites-truth.jsonl.gz, whose
max_jaccard_earlier is the exact word 5-shingle Jaccard of the main contents. The same
seed gives the same bytes.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import re
import subprocess
import sys
import tempfile
import time
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lxml.html
import numpy as np
from lxml import etree

DEFAULT_OUT = Path.home() / ".cache" / "neardup-sites"
SHORT = 150  # main-content words under which a page counts as short
SHINGLE = 5


@dataclass(frozen=True)
class Site:
    host: str
    name: str
    packages: tuple[str, ...]
    root: str  # folder inside each package that holds the pages
    base: str  # url path of the shipped version
    alias: str  # url path a template-generated sibling lives under
    content: str  # XPath of the element the site's markup marks as the page's content
    drop: str | None = None  # navigation inside that element that is not content
    skip: str = r"^$"  # relative paths that are not pages to crawl


_BODY = "//div[@role='main'][contains(concat(' ', normalize-space(@class), ' '), ' body ')]"
SITES = (
    Site(
        "doc.nodejs.example",
        "Node.js v18 Documentation",
        ("nodejs-doc",),
        "usr/share/doc/nodejs/api",
        "docs/v18.20.4/api",
        "docs/latest-v18.x/api",
        "//div[@id='apicontent']",
        skip=r"^all\.html$",  # every other page concatenated
    ),
    Site(
        "cmake-docs.example",
        "CMake 3.25 Documentation",
        ("cmake-doc",),
        "usr/share/doc/cmake-data/html",
        "cmake/help/v3.25",
        "cmake/help/latest",
        _BODY,
        skip=r"^(genindex|search)\.html$",
    ),
    Site(
        "sphinx-docs.example",
        "Sphinx documentation",
        ("sphinx-doc",),
        "usr/share/doc/sphinx-doc/html",
        "en/5.3.0",
        "en/master",
        _BODY,
        skip=r"^(_static|_sources|_modules)/|^(genindex|search|py-modindex)\.html$",
    ),
    Site(
        "debian-reference.example",
        "Debian Reference",
        tuple(f"debian-reference-{lang}" for lang in ("en", "de", "fr", "es", "ja", "zh-cn")),
        "usr/share/debian-reference",
        "manuals/2.100/debian-reference",
        "manuals/unstable/debian-reference",
        "/html/body/div[@class='chapter' or @class='preface' or @class='appendix'"
        " or @class='book']",
        drop=".//div[@class='toc' or @class='list-of-tables' or @class='list-of-figures']",
    ),
    Site(
        "sdl2-api.example",
        "SDL 2.0 API",
        ("libsdl2-doc",),
        "usr/share/doc/libsdl2-doc/html",
        "sdl2/2.26.5",
        "sdl2/latest",
        "//div[@id='doc-content']/div[@class='contents']",
        skip=r"_source\.html$|^search/",  # source listings, the search frames
    ),
)

# --- main content and words -------------------------------------------------------------

_CJK = (
    "\u2e80-\u2fdf\u3040-\u30ff\u3100-\u312f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff\U00020000-\U0003134f"
)
# A CJK character is a word by itself; any other word is a run of \w without CJK in it.
WORD = re.compile(f"[{_CJK}]|(?:(?![{_CJK}])\\w)+")
BLOCK = frozenset(
    (
        *("address", "article", "aside", "blockquote", "br", "caption", "dd", "details"),
        *("dialog", "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form"),
        *("h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li", "main", "nav", "ol", "p"),
        *("pre", "section", "summary", "table", "tbody", "td", "tfoot", "th", "thead", "tr"),
        "ul",
    )
)
INVISIBLE = frozenset(("script", "style", "noscript", "template"))


def words(text: str) -> list[str]:
    return WORD.findall(unicodedata.normalize("NFKC", text).casefold())


def parse(html: str) -> Any:
    # From bytes: the XHTML pages declare their encoding, which lxml refuses on a str.
    parser = lxml.html.HTMLParser(encoding="utf-8")
    return lxml.html.document_fromstring(html.encode("utf-8"), parser=parser)


def content_of(site: Site, root: Any) -> Any | None:
    found = root.xpath(site.content)
    return found[0] if found else None


def main_text(site: Site, content: Any) -> str:
    """The element's text with a line break at each block element, without what the
    site's own markup marks as navigation inside it."""
    dropped = set(content.xpath(site.drop)) if site.drop else set()
    parts: list[str] = []

    def walk(e: Any) -> None:
        if isinstance(e.tag, str) and e.tag not in INVISIBLE and e not in dropped:
            block = e.tag in BLOCK
            parts.append("\n" if block else "")
            parts.append(e.text or "")
            for child in e:
                walk(child)
                parts.append(child.tail or "")
            parts.append("\n" if block else "")

    walk(content)
    lines = (" ".join(line.split()) for line in "".join(parts).split("\n"))
    return "\n".join(line for line in lines if line)


# --- fetching and crawling --------------------------------------------------------------


def fetch(packages: list[str], debs: Path, into: Path) -> None:
    debs.mkdir(parents=True, exist_ok=True)
    for pkg in packages:
        if not list(debs.glob(f"{pkg}_*.deb")):
            print(f"  apt-get download {pkg}", flush=True)
            got = subprocess.run(["apt-get", "download", pkg], cwd=debs, capture_output=True)
            if got.returncode:
                sys.exit(f"apt-get download {pkg} failed: {got.stderr.decode()[-2000:]}")
        deb = sorted(debs.glob(f"{pkg}_*.deb"))[-1]
        subprocess.run(["dpkg-deb", "-x", str(deb), str(into / pkg)], check=True)


@dataclass
class Page:
    site: Site
    url: str
    html: str
    title: str
    fragment: str  # the content element's children, navigation dropped, as HTML
    words: int
    key: float = 0.0
    id: str = ""


def short_title(title: str) -> str:
    # "TTY | Node.js v18.20.4 Documentation" -> "TTY"; "SDL: SDL_keyboard.h ..." keeps all
    head = re.split(r"\s+[|\u2014\u2013]\s+|\s+::\s+|\s+-\s+", title)[0].strip()
    return head or title


def crawl(site: Site, unpacked: Path, cap: int, rng: random.Random) -> list[Page]:
    skip = re.compile(site.skip)
    files = []
    for pkg in site.packages:
        top = unpacked / pkg / site.root
        files += [(p.relative_to(top).as_posix(), p) for p in sorted(top.rglob("*.html"))]
    files = [(rel, p) for rel, p in files if not skip.search(rel)]
    rng.shuffle(files)
    pages: list[Page] = []
    missing = 0
    for rel, path in files:
        if len(pages) >= cap:
            break
        html = path.read_text(encoding="utf-8", errors="replace")
        root = parse(html)
        content = content_of(site, root)
        if content is None:
            missing += 1
            continue
        n = len(words(main_text(site, content)))
        if n < SHINGLE:  # nothing to shingle: no truth to give
            missing += 1
            continue
        title = " ".join((root.findtext(".//title") or rel).split())
        pages.append(
            Page(
                site,
                f"https://{site.host}/{site.base}/{rel}",
                html,
                title,
                _fragment(site, content),
                n,
            )
        )
    print(
        f"  {site.host}: {len(pages)} pages of {len(files)} ({missing} skipped without content)",
        flush=True,
    )
    return pages


def _fragment(site: Site, content: Any) -> str:
    content = lxml.html.fromstring(lxml.html.tostring(content, encoding="unicode"))
    for nav in content.xpath(site.drop) if site.drop else ():
        _remove(nav)
    text = content.text or ""
    return text + "".join(lxml.html.tostring(c, encoding="unicode") for c in content)


def _remove(e: Any) -> None:
    """Remove an element but keep its tail text in place."""
    parent, tail = e.getparent(), e.tail
    if tail:
        prev = e.getprevious()
        if prev is not None:
            prev.tail = (prev.tail or "") + tail
        else:
            parent.text = (parent.text or "") + tail
    parent.remove(e)


# --- what a crawler's later fetches add -------------------------------------------------

ADVERTS = (
    "Cloud databases with automatic failover are now available in every region.",
    "Save twenty percent on annual developer tooling subscriptions this month.",
    "Our hosted build farm compiles large projects in a fraction of the time.",
    "Sign up for the weekly newsletter and never miss a release announcement.",
    "Try the managed monitoring service free for thirty days, no card needed.",
    "Conference tickets for the spring engineering summit go on sale on Monday.",
    "Train your team with hands-on workshops led by experienced maintainers.",
    "Backups that restore in minutes: ask our storage experts for a demo today.",
    "Noise-cancelling headphones for programmers, shipped free within a week.",
    "The new laptop stand keeps your neck happy during long debugging sessions.",
)
BANNERS = (
    "Limited offer: premium support plans at half price until Friday.",
    "New: read this documentation offline in our desktop reader.",
    "Sponsored: deploy your app to a global edge network in one command.",
    "Job board: hundreds of remote positions for systems engineers.",
    "Black Friday deals on technical ebooks and video courses.",
    "Upgrade to the professional edition for priority bug fixes.",
)
PARAGRAPHS = (
    "Readers asked us to collect this material in one place, so we have reproduced it "
    "here with light formatting changes and a short introduction of our own.",
    "We keep this copy up to date with the upstream documentation whenever a new "
    "release comes out, but the original remains the authoritative reference.",
    "Comments are welcome below; our editors read every message and correct mistakes "
    "as soon as they are confirmed by the community.",
    "If this page helped you, consider sharing it with colleagues who work on similar "
    "problems, and bookmark the index for the rest of the series.",
)
SUBSTITUTES = (
    "value", "system", "option", "record", "handler", "module", "buffer", "service",
    "default", "program", "element", "request", "context", "resource", "channel",
)  # fmt: skip
HEADINGS = ("{}", "{}", "Guide: {}", "{} explained", "Notes on {}", "{} (reference)")


def _el(html: str) -> Any:
    return lxml.html.fragment_fromstring(html)


def _serialize(root: Any) -> str:
    doctype = root.getroottree().docinfo.doctype
    return lxml.html.tostring(root, encoding="unicode", doctype=doctype or None)


def _set_title(root: Any, title: str) -> None:
    el = root.find(".//title")
    if el is None:
        head = root.find("head")
        el = etree.SubElement(head if head is not None else root, "title")
    el.text = title


def _text_slots(content: Any) -> list[tuple[Any, str]]:
    """(element, "text" or "tail") of the content's text nodes with a replaceable word."""
    slots = []
    for e in content.iter():
        if not isinstance(e.tag, str) or e.tag in INVISIBLE:
            continue
        if re.search(r"[A-Za-z]{4,}", e.text or ""):
            slots.append((e, "text"))
        if e is not content and re.search(r"[A-Za-z]{4,}", e.tail or ""):
            slots.append((e, "tail"))
    return slots


def change_words(content: Any, n: int, rng: random.Random) -> int:
    slots = _text_slots(content)
    changed = 0
    for e, attr in rng.sample(slots, min(n, len(slots))):
        text = getattr(e, attr)
        found = list(re.finditer(r"\b[A-Za-z]{4,}\b", text))
        if not found:
            continue
        m = rng.choice(found)
        new = rng.choice([w for w in SUBSTITUTES if w != m.group().lower()])
        setattr(e, attr, text[: m.start()] + new + text[m.end() :])
        changed += 1
    return changed


def _anchors(content: Any) -> list[Any]:
    """Block elements directly in the content's flow, after which a block may go."""
    flow = ("div", "section", "article", "main", "blockquote")
    return [
        e
        for e in content.iter("p", "pre", "ul", "ol", "dl", "table", "blockquote")
        if e is not content and (e.getparent() is content or e.getparent().tag in flow)
    ]


def insert_block(content: Any, block: Any, rng: random.Random, within: float = 1.0) -> None:
    anchors = _anchors(content)
    anchors = anchors[: max(1, int(len(anchors) * within))]
    if anchors:
        rng.choice(anchors).addnext(block)
    else:
        content.append(block)


def drop_paragraph(content: Any, rng: random.Random) -> bool:
    paras = [p for p in _anchors(content) if p.tag == "p" and len(words(p.text_content())) >= 8]
    if not paras:
        return False
    _remove(rng.choice(paras))
    return True


def trim_tail(content: Any, keep: float) -> None:
    """Cut everything after the leaf block where `keep` of the words have been seen."""
    leaves = [
        e
        for e in content.iter(*BLOCK)
        if e is not content
        and not any(isinstance(d.tag, str) and d.tag in BLOCK for d in e.iterdescendants())
    ]
    total = sum(len(words(e.text_content())) for e in leaves)
    seen = 0
    for cut in leaves:
        seen += len(words(cut.text_content()))
        if seen >= keep * total:
            break
    else:
        return
    inside = set(content.iter())
    following = [e for e in cut.xpath("following::*") if e in inside]
    gone = set(following)
    for e in following:
        if e.getparent() not in gone:
            e.getparent().remove(e)
    e = cut
    while e is not content:  # text after the cut that belongs to its ancestors
        e.tail = None
        e = e.getparent()


def stamp(rng: random.Random) -> str:
    day = 1 + rng.randrange(365)
    month, dom = 1 + (day - 1) // 31 % 12, 1 + (day - 1) % 28
    return f"2025-{month:02d}-{dom:02d} {rng.randrange(24):02d}:{rng.randrange(60):02d}"


# --- the kinds of record ----------------------------------------------------------------


@dataclass
class Event:
    key: float
    kind: str
    edit: int | None
    source: Page
    target: Site | None = None
    template: Page | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def render_recrawl(ev: Event, by_site: dict[str, list[Page]], rng: random.Random) -> tuple:
    page = ev.source
    root = parse(page.html)
    content = content_of(page.site, root)
    if ev.edit:
        change_words(content, 1, rng)
    if rng.random() < 0.8:
        content.addprevious(_el(f'<div class="promo-strip"><p>{rng.choice(BANNERS)}</p></div>'))
    body = root.find("body")
    if rng.random() < 0.7:
        others = [p.title for p in by_site[page.site.host] if p is not page]
        items = "".join(
            f'<li><a href="#">{t}</a></li>'
            for t in rng.sample(others, min(len(others), rng.randint(4, 7)))
        )
        body.append(_el(f'<aside class="see-also"><h4>Related pages</h4><ul>{items}</ul></aside>'))
    body.append(_el(f'<p class="fetched-at">Page retrieved {stamp(rng)} UTC</p>'))
    return page.url, _serialize(root)


def _leading_heading(holder: Any) -> Any | None:
    """The page's title heading: an h1 or h2 before any paragraph (Doxygen's is outside
    the content, and its first h2 is a section's)."""
    for e in holder.iter("h1", "h2", "p", "pre", "table", "ul", "dl"):
        return e if e.tag in ("h1", "h2") else None
    return None


def render_syndicated(ev: Event, serial: int, rng: random.Random) -> tuple:
    page, target, template = ev.source, ev.target, ev.template
    root = parse(template.html)
    content = content_of(target, root)
    for child in list(content):
        content.remove(child)
    heading = rng.choice(HEADINGS).format(short_title(page.title))
    content.text = None
    holder = lxml.html.fragment_fromstring(page.fragment, create_parent="div")
    title = _leading_heading(holder)
    if title is not None:  # the copy's own heading replaces the page's
        _remove(title)
    content.append(_el(f"<h1>{heading}</h1>"))
    if holder.text and holder.text.strip():
        content[-1].tail = holder.text
    for child in list(holder):
        content.append(child)
    if ev.edit == 1:
        change_words(content, rng.randint(3, 6), rng)
    elif ev.edit == 2:
        if rng.random() < 0.5 or not drop_paragraph(content, rng):
            insert_block(content, _el(f"<p>{rng.choice(PARAGRAPHS)}</p>"), rng)
    elif ev.edit == 3:
        trim_tail(content, rng.uniform(0.65, 0.95))
    advert = " ".join(rng.sample(ADVERTS, rng.randint(2, 4)))
    insert_block(
        content,
        _el(f'<div class="sponsored"><p>Advertisement: {advert}</p></div>'),
        rng,
        within=0.7,
    )
    _set_title(root, f"{heading} | {target.name}")
    slug = "-".join(re.findall(r"[a-z0-9]+", short_title(page.title).lower())[:6]) or "page"
    return f"https://{target.host}/{target.base}/articles/{serial}-{slug}.html", _serialize(root)


def render_generated(ev: Event, rng: random.Random) -> tuple:
    page = ev.source
    site = page.site
    root = parse(page.html)
    content = content_of(site, root)
    branch = next(
        a for a, b in zip(site.alias.split("/"), site.base.split("/"), strict=True) if a != b
    )
    _set_title(root, f"{short_title(page.title)} ({branch}) | {site.name}")
    crumbs = f"{site.name} \u00bb {branch} \u00bb {short_title(page.title)}"
    content.addprevious(_el(f'<div class="version-crumbs"><p>{crumbs}</p></div>'))
    if ev.edit:  # the one line a generated variant has of its own
        note = rng.choice((
            f"This page documents the {branch} development version.",
            f"Generated from the {branch} branch on {stamp(rng)[:10]}.",
            "The behaviour described here may change before the next release.",
        ))  # fmt: skip
        content.insert(0, _el(f'<p class="version-note">{note}</p>'))
        content[0].tail, content.text = content.text, None
    url = page.url.replace(f"/{site.base}/", f"/{site.alias}/", 1)
    return url, _serialize(root)


def plan(pages: list[Page], rng: random.Random) -> list[Event]:
    """The crawl: originals in an order that interleaves the sites, every copy at a random
    later point than the page it copies."""
    rng.shuffle(pages)
    n = len(pages)
    events = []
    for i, p in enumerate(pages):
        p.key = float(i)
        events.append(Event(p.key, "original", None, p))

    def later(p: Page) -> float:
        return rng.uniform(p.key + 0.5, n + 0.5)

    by_site: dict[str, list[Page]] = {}
    for p in pages:
        by_site.setdefault(p.site.host, []).append(p)
    shorts = [p for p in pages if p.words < SHORT]
    longs = [p for p in pages if p.words >= SHORT]
    for p in shorts:  # short re-fetches, mostly unchanged
        for _ in range(rng.choice((0, 0, 1, 1, 1))):
            events.append(Event(later(p), "recrawl", int(rng.random() < 0.25), p))
    for p in longs:
        for _ in range(rng.choice((0, 1, 1, 1, 2))):
            events.append(Event(later(p), "recrawl", int(rng.random() < 0.3), p))
    hosts = sorted(by_site)
    long_by_site = {h: [p for p in longs if p.site.host == h] for h in hosts}
    for i in range(int(0.6 * len(longs))):
        src = rng.choice(long_by_site[rng.choice([h for h in hosts if long_by_site[h]])])
        target = rng.choice([h for h in hosts if h != src.site.host])
        template = rng.choice(by_site[target])
        events.append(Event(later(src), "syndicated", i % 4, src, template.site, template))
    for p in rng.sample(pages, int(0.08 * n)):
        events.append(Event(later(p), "generated", int(rng.random() < 0.5), p))
    events.sort(key=lambda e: e.key)
    return events


# --- exact Jaccard ----------------------------------------------------------------------


class Shingles:
    """Each record's set of word 5-shingles as ids: words interned to ints, a shingle's
    five ids to one id, so sets compare exactly (no hashing)."""

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}
        self.shingles: dict[bytes, int] = {}

    def ids(self, ws: list[str]) -> np.ndarray:
        w = np.fromiter((self.vocab.setdefault(x, len(self.vocab)) for x in ws), np.uint32, len(ws))
        if len(w) < SHINGLE:
            rows = [w.tobytes()] if len(w) else []
        else:
            grid = np.stack([w[i : len(w) - SHINGLE + 1 + i] for i in range(SHINGLE)], axis=1)
            rows = [r.tobytes() for r in np.unique(grid, axis=0)]
        table = self.shingles
        return np.unique(
            np.fromiter((table.setdefault(r, len(table)) for r in rows), np.int64, len(rows))
        )


def max_jaccard(sets: list[np.ndarray]) -> list[tuple[float, int | None]]:
    """For each set, the highest Jaccard with any earlier set and which one (the earliest
    on a tie), through an inverted index from shingle id to the records holding it."""
    sizes = np.array([len(s) for s in sets], np.int64)
    owners = np.repeat(np.arange(len(sets)), sizes)
    flat = np.concatenate(sets) if sets else np.zeros(0, np.int64)
    order = np.argsort(flat, kind="stable")  # stable: owners stay ascending per shingle
    flat, owners = flat[order], owners[order]
    out: list[tuple[float, int | None]] = []
    for r, s in enumerate(sets):
        lo, hi = np.searchsorted(flat, s, "left"), np.searchsorted(flat, s, "right")
        # each shingle's posting runs lo..hi; only records before r count
        lens = hi - lo
        idx = np.repeat(lo - np.cumsum(lens) + lens, lens) + np.arange(lens.sum())
        earlier = owners[idx]
        earlier = earlier[earlier < r]
        if r == 0 or len(earlier) == 0:
            out.append((0.0, None))
            continue
        inter = np.bincount(earlier, minlength=r)
        jac = inter / (sizes[:r] + len(s) - inter)
        best = int(np.argmax(jac))
        out.append((float(jac[best]), best))
    return out


# --- the build --------------------------------------------------------------------------


def build(out: Path, per_site: int, seed: int) -> None:
    start = time.perf_counter()
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="neardup-sites-") as tmp:
        print("packages:", flush=True)
        fetch(sorted({p for s in SITES for p in s.packages}), out / "debs", Path(tmp))
        print("crawling:", flush=True)
        pages = [p for s in SITES for p in crawl(s, Path(tmp), per_site, rng)]
    by_site: dict[str, list[Page]] = {}
    for p in pages:
        by_site.setdefault(p.site.host, []).append(p)
    events = plan(pages, rng)
    print(f"rendering {len(events)} records ...", flush=True)
    shingles = Shingles()
    sets: list[np.ndarray] = []
    truth: list[dict[str, Any]] = []
    stream_path = out / "sites-stream.jsonl.gz"
    with gzip.GzipFile(stream_path, "wb", mtime=0) as raw:
        for n, ev in enumerate(events):
            rid = f"s{n:06d}"
            site = ev.target or ev.source.site
            if ev.kind == "original":
                ev.source.id = rid
                url, html = ev.source.url, ev.source.html
            elif ev.kind == "recrawl":
                url, html = render_recrawl(ev, by_site, rng)
            elif ev.kind == "syndicated":
                url, html = render_syndicated(ev, n, rng)
            else:
                url, html = render_generated(ev, rng)
            content = content_of(site, parse(html))
            assert content is not None, (ev.kind, url)
            ws = words(main_text(site, content))
            sets.append(shingles.ids(ws))
            truth.append({
                "id": rid, "name": f"{ev.kind}{'' if ev.edit is None else ev.edit}:{site.host}",
                "url": url, "site": site.host, "kind": ev.kind, "edit": ev.edit,
                "source_id": None if ev.kind == "original" else ev.source.id,
                "source_site": ev.source.site.host, "short": len(ws) < SHORT,
                "main_words": len(ws),
            })  # fmt: skip
            line = json.dumps({"id": rid, "text": html, "url": url}, ensure_ascii=False)
            raw.write(line.encode("utf-8") + b"\n")
            if (n + 1) % 500 == 0:
                print(f"  {n + 1} records, {time.perf_counter() - start:.0f} s", flush=True)
    print("exact Jaccard against every earlier record ...", flush=True)
    for t, (jac, best) in zip(truth, max_jaccard(sets), strict=True):
        t["max_jaccard_earlier"] = round(jac, 4)
        t["most_similar_earlier"] = None if best is None else truth[best]["id"]
    truth_path = out / "sites-truth.jsonl.gz"
    with gzip.GzipFile(truth_path, "wb", mtime=0) as raw:
        for t in truth:
            raw.write(json.dumps(t, ensure_ascii=False).encode("utf-8") + b"\n")
    summary(truth, time.perf_counter() - start, stream_path, truth_path)


def summary(truth: list[dict[str, Any]], seconds: float, *paths: Path) -> None:
    by_site = Counter((t["site"], t["kind"]) for t in truth)
    kinds = sorted({t["kind"] for t in truth})
    print(f"\n{'site':26s}" + "".join(f"{k:>12s}" for k in kinds))
    for host in sorted({t["site"] for t in truth}):
        print(f"{host:26s}" + "".join(f"{by_site[host, k]:12d}" for k in kinds))
    groups: Counter[str] = Counter()
    dups: Counter[str] = Counter()
    for t in truth:
        edit = "" if t["edit"] is None else t["edit"]
        g = f"{t['kind']}{edit} {'short' if t['short'] else 'long'}"
        groups[g] += 1
        dups[g] += t["max_jaccard_earlier"] >= 0.8
    print(f"\n{'kind, edit, length':26s}{'records':>10s}{'J >= 0.8':>10s}")
    for g in sorted(groups):
        print(f"{g:26s}{groups[g]:10d}{dups[g]:10d}")
    total = sum(dups.values())
    print(
        f"\n{len(truth)} records, {total} duplicates (max_jaccard_earlier >= 0.8), "
        f"{sum(t['short'] for t in truth)} short; {seconds:.0f} s"
    )
    for p in paths:
        print(f"{p} ({p.stat().st_size / 1e6:.1f} MB)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"default {DEFAULT_OUT}")
    ap.add_argument("--pages-per-site", type=int, default=500)
    ap.add_argument("--seed", type=int, default=22)
    args = ap.parse_args()
    build(args.out, args.pages_per_site, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
