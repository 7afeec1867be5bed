"""detector.simhash (and the features it sums): Charikar's theorem measured, the text
SimHash against a naive per-bit accumulation, and independence from the batch."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from detector import features as features_module
from detector.features import FeatureConfig, Featurizer, IdfTable
from detector.normalize import NO_SPACE_CHAR, TOKEN, normalize
from detector.simhash import hamming, hamming_many, hyperplanes, simhash, simhash_vectors

M64 = (1 << 64) - 1
MIX = 0x9E3779B97F4A7C15


# --- Charikar: Pr[bit differs] = theta / pi -------------------------------------------


def pair_at_angle(rng: np.random.Generator, dim: int, theta: float) -> tuple[np.ndarray, ...]:
    """u, and v = cos(theta) u + sin(theta) w with w a unit vector orthogonal to u.

    u and w come from isotropic Gaussians (Gram-Schmidt), so the pair's plane is uniformly
    oriented; the angle between u and v is exactly theta."""
    u = rng.standard_normal(dim)
    u /= np.linalg.norm(u)
    w = rng.standard_normal(dim)
    w -= (w @ u) * u
    w /= np.linalg.norm(w)
    return u, math.cos(theta) * u + math.sin(theta) * w


THETAS = [math.pi / 8, math.pi / 4, math.pi / 2, 3 * math.pi / 4]


def fixed_pair(kind: str, dim: int, theta: float) -> tuple[np.ndarray, np.ndarray]:
    """A pair at angle theta in a fixed plane: spanned by two axes, or a generic plane."""
    if kind == "axes":
        u, w = np.zeros(dim), np.zeros(dim)
        u[0], w[dim - 1] = 1.0, 1.0
        return u, math.cos(theta) * u + math.sin(theta) * w
    return pair_at_angle(np.random.default_rng(99), dim, theta)  # type: ignore[return-value]


@pytest.mark.parametrize("plane", ["axes", "generic"])
@pytest.mark.parametrize("theta", THETAS, ids=["pi/8", "pi/4", "pi/2", "3pi/4"])
def test_charikar_fresh_planes_per_trial(theta: float, plane: str) -> None:
    """Hamming distance / 64 estimates theta / pi, for a fixed pair and random planes.

    Derivation of the bound. For one hyperplane normal r with i.i.d. N(0, 1) coordinates
    and two fixed vectors at angle theta, the projection of r onto their plane is an
    isotropic 2-D Gaussian, so its direction is uniform on the circle and the line
    perpendicular to it separates the two vectors with probability theta/pi: bit i differs
    with p = theta/pi (Goemans-Williamson; Charikar 2002). The 64 normals of one seed are
    independent, so the 64 bits of a trial are independent Bernoulli(p); every trial takes
    its planes from its own seed, so all N*64 bits are i.i.d. Bernoulli(p). Their mean has
    standard deviation sqrt(p(1-p) / (64 N)); a correct implementation lands outside
    5 standard deviations with probability < 6e-7 (and the seeds are fixed, so the outcome
    is deterministic). The pair is fixed, not random, so that planes that are not
    isotropic (e.g. not Gaussian, or not centred) fail: a random pair would average the
    planes' bias away.
    """
    n, dim = 1500, 24
    pair = np.stack(fixed_pair(plane, dim, theta))
    assert math.isclose(float(pair[0] @ pair[1]), math.cos(theta), abs_tol=1e-12)
    total = 0
    for trial in range(n):
        a, b = simhash_vectors(pair, hyperplanes(dim, seed=10_000 + trial))
        total += hamming(int(a), int(b))
    p = theta / math.pi
    mean = total / (64 * n)
    sd = math.sqrt(p * (1 - p) / (64 * n))
    assert abs(mean - p) <= 5 * sd, (mean, p, sd)


@pytest.mark.parametrize("theta", THETAS, ids=["pi/8", "pi/4", "pi/2", "3pi/4"])
def test_charikar_same_planes_independent_pairs(theta: float) -> None:
    """One set of planes (as a running detector has), many independent isotropic pairs.

    Given the planes, each bit still differs with probability theta/pi (the pair's plane
    is uniformly oriented), but the 64 bits of one pair are no longer independent (the
    planes are fixed, not averaged over). The per-pair distances are i.i.d., though, so
    their mean is within 5 standard errors (sample sd / sqrt(N)) of 64 theta/pi.
    """
    n, dim = 3000, 24
    rng = np.random.default_rng(7)
    planes = hyperplanes(dim, seed=3)
    u, v = zip(*(pair_at_angle(rng, dim, theta) for _ in range(n)), strict=True)
    fa = simhash_vectors(np.array(u), planes)
    fb = simhash_vectors(np.array(v), planes)
    d = np.bitwise_count(fa ^ fb).astype(float) / 64
    se = d.std(ddof=1) / math.sqrt(n)
    assert abs(d.mean() - theta / math.pi) <= 5 * se, (d.mean(), theta / math.pi, se)


def test_vector_fingerprint_extremes_and_scale_invariance() -> None:
    rng = np.random.default_rng(1)
    planes = hyperplanes(12, seed=5)
    v = rng.standard_normal((20, 12))
    same = simhash_vectors(v, planes)
    assert np.array_equal(same, simhash_vectors(v * 3.5, planes)), "only the direction counts"
    assert np.all(np.bitwise_count(same ^ simhash_vectors(-v, planes)) == 64), "opposite: all"
    # bit i is the sign of r_i . v
    for row, fp in zip(v, same, strict=True):
        for i in range(64):
            assert ((int(fp) >> i) & 1) == int(planes[i] @ row > 0)


def test_hyperplanes_are_fixed_by_the_seed() -> None:
    a = hyperplanes(16, 42)
    assert a.shape == (64, 16)
    assert np.array_equal(a, hyperplanes(16, 42))
    assert not np.array_equal(a, hyperplanes(16, 43))


@given(a=st.integers(0, M64), others=st.lists(st.integers(0, M64), max_size=20))
def test_hamming_helpers(a: int, others: list[int]) -> None:
    expected = [bin(a ^ o).count("1") for o in others]
    assert [hamming(a, o) for o in others] == expected
    assert hamming_many(a, np.array(others, np.uint64)).tolist() == expected


# --- the text SimHash against a naive accumulation ------------------------------------


def py_fmix64(h: int) -> int:
    h ^= h >> 33
    h = (h * 0xFF51AFD7ED558CCD) & M64
    h ^= h >> 33
    h = (h * 0xC4CEB93FE53A87E3) & M64
    return h ^ (h >> 33)


def py_combine(hashes: list[int]) -> int:
    acc = hashes[0]
    for h in hashes[1:]:
        acc = (acc * MIX + h) & M64
    return py_fmix64(acc)


def naive_features(
    normalized: str,
    weight,
    cjk_n: int = 2,  # type: ignore[no-untyped-def]
    kind: str = "words",
    n: int = 2,
) -> list[tuple[int, float]]:
    """(hash, weight) of every feature, the slow obvious way (FeatureConfig semantics):
    a token's feature hash is xxh3_64 of its UTF-8 bytes; runs of adjacent no-space
    characters become their character n-grams (a shorter run: one feature of the whole
    run), weighted by the mean of their characters' weights; shingles combine n features."""
    spans = [(m.group(), m.start(), m.end()) for m in re.finditer(TOKEN, normalized)]
    feats: list[tuple[int, float]] = []
    i = 0
    while i < len(spans):
        text, _, _end = spans[i]
        if not re.fullmatch(NO_SPACE_CHAR, text) or cjk_n == 1:
            feats.append((xxhash.xxh3_64_intdigest(text.encode()), np.float32(weight(text))))
            i += 1
            continue
        run = [spans[i]]
        while (
            i + len(run) < len(spans)
            and re.fullmatch(NO_SPACE_CHAR, spans[i + len(run)][0])
            and spans[i + len(run)][1] == run[-1][2]
        ):
            run.append(spans[i + len(run)])
        hs = [xxhash.xxh3_64_intdigest(t.encode()) for t, _, _ in run]
        ws = [np.float32(weight(t)) for t, _, _ in run]
        width = min(cjk_n, len(run))
        for s in range(max(len(run) - cjk_n + 1, 1)):
            total = ws[s]
            for j in range(1, width):
                total = np.float32(total + ws[s + j])
            feats.append((py_combine(hs[s : s + width]), np.float32(total / width)))
        i += len(run)
    if kind == "shingles" and n > 1 and len(feats) >= n:
        out = []
        for s in range(len(feats) - n + 1):
            total = np.float32(0)
            for j in range(n):
                total = np.float32(total + feats[s + j][1])
            out.append((py_combine([h for h, _ in feats[s : s + n]]), np.float32(total / n)))
        feats = out
    return feats


def naive_simhash(feats: list[tuple[int, float]]) -> int:
    """Slot i = sum of +w where the feature's bit i is 1, -w where it is 0; bit = slot > 0.
    math.fsum is exactly rounded, so the sign is the sign of the exact sum."""
    fp = 0
    for i in range(64):
        slot = math.fsum(float(w) if (h >> i) & 1 else -float(w) for h, w in feats)
        fp |= (slot > 0) << i
    return fp


VOCAB = [
    "the",
    "a",
    "Cat",
    "sat",
    "on",
    "mat",
    "internationalization",
    "x",
    "42",
    "naïve",
    "中",
    "文",
    "日本語",
    "のテキスト",
    "ภาษา",
    "straße",
    "_",
    "ok",
]
long_text = st.tuples(
    st.lists(st.sampled_from(VOCAB), min_size=10, max_size=20).map(" ".join),
    st.text(st.characters(exclude_categories=("Cs",)), max_size=20),
).map(" ".join)
text_strategy = st.one_of(
    st.lists(st.sampled_from(VOCAB), max_size=30).map(" ".join),
    st.lists(st.sampled_from(VOCAB), max_size=30).map("".join),
    st.text(st.characters(exclude_categories=("Cs",)), max_size=40),
)


def builtin_weight(token: str) -> float:
    return min(len(token.encode("utf-8")), 12) ** 0.5


@given(texts=st.lists(text_strategy, min_size=1, max_size=6))
def test_simhash_equals_naive_accumulation_over_the_batch_features(texts: list[str]) -> None:
    """simhash() against the definition, on the very features the featurizer produced."""
    fb = Featurizer().batch([normalize(t) for t in texts])
    got = simhash(fb)
    assert len(got) == len(texts)
    for d in range(len(texts)):
        mine = fb.doc == d
        feats = list(zip(fb.hash[mine].tolist(), fb.weight[mine].tolist(), strict=True))
        assert int(got[d]) == naive_simhash(feats), texts[d]


@given(texts=st.lists(text_strategy, min_size=1, max_size=6))
def test_text_fingerprint_equals_naive_features_and_accumulation(texts: list[str]) -> None:
    """End to end from the normalized text: naive features (xxh3 per token, sqrt-length
    weights, CJK bigrams) and a naive per-bit accumulation give the same fingerprints."""
    normalized = [normalize(t) for t in texts]
    got = simhash(Featurizer().batch(normalized))
    for d, text in enumerate(normalized):
        assert int(got[d]) == naive_simhash(naive_features(text, builtin_weight)), text


@settings(max_examples=30)
@given(
    texts=st.lists(st.one_of(text_strategy, long_text), min_size=1, max_size=5).filter(
        lambda ts: sum(len(t.split()) for t in ts) >= 8
    ),
    n=st.integers(2, 8),
    cjk_n=st.integers(1, 4),
)
def test_other_feature_configs_equal_the_naive_definition(
    texts: list[str], n: int, cjk_n: int
) -> None:
    """Word shingles of n features, CJK n-grams of 1..4 characters (batches with at least
    eight words; fewer are test_shingles_of_a_batch_with_fewer_features_than_n)."""
    normalized = [normalize(t) for t in texts]
    config = FeatureConfig("shingles", n=n, cjk_n=cjk_n)
    got = simhash(Featurizer(config).batch(normalized))
    for d, text in enumerate(normalized):
        feats = naive_features(text, builtin_weight, cjk_n=cjk_n, kind="shingles", n=n)
        assert int(got[d]) == naive_simhash(feats), text


@pytest.mark.parametrize(
    ("n", "text"), [(4, "hello world"), (5, "one two three"), (8, "a b c d e f"), (3, "x")]
)
def test_shingles_of_a_batch_with_fewer_features_than_n(n: int, text: str) -> None:
    """--features shingles --shingle-size N on a batch holding fewer than N words in all
    (one short record with --batch-size 1, or a short last batch): the text keeps its words
    as features, like any text shorter than N."""
    fb = Featurizer(FeatureConfig("shingles", n=n)).batch([normalize(text)])
    got = int(simhash(fb)[0])
    feats = naive_features(normalize(text), builtin_weight, kind="shingles", n=n)
    assert got == naive_simhash(feats)


def test_idf_weights_are_used() -> None:
    corpus = ["the cat sat", "the dog ran", "the cat ran far", "a bird", "the end"]
    table = IdfTable.fit(corpus, min_df=1)
    assert table.weight("the") < table.weight("cat") < table.weight("never-seen-token")
    texts = [normalize("The cat sat on the mat, far away"), normalize("dog bird the")]
    got = simhash(Featurizer(weights=table).batch(texts))
    for d, text in enumerate(texts):
        assert int(got[d]) == naive_simhash(naive_features(text, table.weight))


def test_a_text_without_features_gets_zero() -> None:
    got = simhash(Featurizer().batch(["", "!!! ...", "word"]))
    assert got[0] == 0 and got[1] == 0 and got[2] != 0


# --- the fingerprint does not depend on the batch -------------------------------------


@given(texts=st.lists(text_strategy, min_size=1, max_size=8), seed=st.integers(0, 1000))
def test_fingerprint_does_not_depend_on_the_batch(texts: list[str], seed: int) -> None:
    normalized = [normalize(t) for t in texts]
    together = simhash(Featurizer().batch(normalized))
    alone = [int(simhash(Featurizer().batch([t]))[0]) for t in normalized]
    assert together.tolist() == alone
    # A long-lived featurizer (warm token cache) seeing the texts in another order.
    warm = Featurizer()
    warm.batch([normalize(t) for t in VOCAB])
    order = np.random.default_rng(seed).permutation(len(normalized))
    shuffled = simhash(warm.batch([normalized[i] for i in order]))
    assert [int(shuffled[list(order).index(i)]) for i in range(len(texts))] == alone


def test_fingerprint_survives_the_token_cache_starting_over(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The token cache starts over when it reaches _TokenTable.LIMIT distinct tokens
    (4,194,304: a long stream gets there). A batch that mixes tokens seen before the reset
    with new ones must still get the fingerprints a fresh featurizer computes. The limit
    is lowered here so that the reset happens within two small batches."""
    monkeypatch.setattr(features_module._TokenTable, "LIMIT", 8)
    warm = Featurizer()
    warm.batch(["one two three four five six"])
    text = "one two three seven eight nine ten"
    got = warm.batch([text])
    fresh = Featurizer().batch([text])
    assert got.hash.tolist() == fresh.hash.tolist()
    assert got.weight.tolist() == fresh.weight.tolist()
    assert simhash(got).tolist() == simhash(fresh).tolist()


def test_token_cache_growth_keeps_fingerprints() -> None:
    """Many distinct tokens force the open-addressing table to grow (rehash) several times."""
    warm = Featurizer()
    rng = np.random.default_rng(0)
    texts = [" ".join(f"w{int(x)}" for x in rng.integers(0, 200_000, 300)) for _ in range(200)]
    for start in range(0, len(texts), 20):
        warm.batch(texts[start : start + 20])
    probe = [*texts[::17], "w1 w2 w3 brand new words"]
    assert simhash(warm.batch(probe)).tolist() == simhash(Featurizer().batch(probe)).tolist()


def test_text_simhash_is_near_for_near_texts() -> None:
    """Sanity of the whole: a long text and a copy with two words changed are near, an
    unrelated text is not."""
    rng = np.random.default_rng(5)
    words = [f"word{int(i)}" for i in rng.integers(0, 5000, 400)]
    edited = list(words)
    edited[10], edited[200] = "changed", "altered"
    other = [f"word{int(i)}" for i in rng.integers(0, 5000, 400)]
    a, b, c = simhash(Featurizer().batch([" ".join(words), " ".join(edited), " ".join(other)]))
    assert hamming(int(a), int(b)) <= 4
    assert hamming(int(a), int(c)) >= 16


def test_module_has_the_expected_regex() -> None:
    """naive_features relies on TOKEN being the reference tokenizer of normalize.tokens."""
    assert re.compile(TOKEN).findall("中文ab c") == ["中", "文", "ab", "c"]
