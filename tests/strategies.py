"""Hypothesis strategies shared by several test modules: fingerprints (random, and
clustered around near pairs), and hostile input (adversarial text, any JSON, record-like
objects) for the fuzz tests of the pipeline and of `neardup serve`."""

from __future__ import annotations

from hypothesis import strategies as st

# ------------------------------------------------------------------------ fingerprints

u64 = st.integers(min_value=0, max_value=2**64 - 1)


@st.composite
def clustered(draw: st.DrawFn, k: int, max_size: int = 40) -> list[int]:
    """Random base fingerprints, each with variants at 0..k+2 flipped bits (near pairs,
    pairs just beyond k, and equal fingerprints), plus loners: near pairs within k and
    just beyond it occur in every example."""
    out: list[int] = []
    for base in draw(st.lists(u64, min_size=1, max_size=5)):
        out.append(base)
        for flips in draw(st.lists(st.integers(0, k + 2), max_size=8)):
            bits = draw(st.lists(st.integers(0, 63), min_size=flips, max_size=flips, unique=True))
            out.append(base ^ sum(1 << b for b in bits))
    out += draw(st.lists(u64, max_size=5))
    return out[:max_size]


# ---------------------------------------------------------------------- hostile input

# Pieces of hostile text: controls, bidi, scripts without spaces, emoji sequences,
# combining marks (one long run of alternating classes), NFKC expansions, markup and
# entities (one far beyond Python's int() digit limit), a long word.
FRAGMENTS = [
    "\x00",
    "\x07\x1b[31m",
    "\x7f\x85",
    "\u202e\u2066rtl\u2069\u202c",
    "\u200f\u200e\u200b\u200d\ufeff",
    "עברית ومرحبا",
    "中文分词日本語のテキスト",
    "ภาษาไทย한국어",
    "👩\u200d💻🇫🇷👍🏽",
    "e\u0301\u0308",
    "\u0301\u0316" * 40,
    "\u0f73" * 40,
    "\ufdfa\u3316ﬃ",
    "Straße İ",
    "<html>",
    "<!doctype html>",
    "<p>",
    "<script>x=1</script>",
    "<SCRIPT type='a<b'>",
    "</script >",
    "<style>",
    "</style>",
    "<!--",
    "-->",
    "<",
    ">",
    "&amp;",
    "&#65;",
    "&#x1F600;",
    "&#0000000000065;",
    "&#" + "9" * 5000 + ";",
    "&am",
    "p;",
    "&#xD800;",
    "a" * 3000,
    " ",
    "\n\t",
]
any_text = st.text(st.characters(), max_size=30)  # surrogates included
hostile_text = st.lists(st.one_of(st.sampled_from(FRAGMENTS), any_text), max_size=12).map("".join)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | any_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(any_text, inner, max_size=4),
    max_leaves=12,
)
ids = st.text(min_size=1, max_size=12)
# Records right in form, hostile in content; and objects with anything in every field.
plausible = st.fixed_dictionaries(
    {"id": ids, "text": hostile_text},
    optional={
        "url": st.text(max_size=20),
        "embedding": st.lists(st.floats(-1e300, 1e300) | st.integers(-1000, 1000), min_size=1),
        "meta": st.dictionaries(any_text, json_values, max_size=3),
    },
)
anything = st.fixed_dictionaries(
    {"id": st.one_of(ids, json_values)},
    optional={
        "text": st.one_of(hostile_text, json_values),
        "url": st.one_of(st.text(max_size=20), json_values),
        "embedding": st.one_of(st.lists(st.floats() | st.integers(), min_size=1), json_values),
        "meta": json_values,
    },
)
records = st.one_of(plausible, plausible, anything)
