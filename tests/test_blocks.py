"""detector.blocks: the pigeonhole guarantee of every block scheme, and spec parsing."""

from __future__ import annotations

import os
import subprocess
import sys
from math import comb

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from detector.blocks import NAMED, BlockScheme
from detector.errors import ConfigError

from .helpers import ALL_SPECS, PROBE_SPECS, ROOT, SCHEMES, adversarial_flips, flip
from .strategies import u64


@st.composite
def near_pair(draw: st.DrawFn, k: int) -> tuple[int, int]:
    """Two fingerprints at Hamming distance 0..k exactly."""
    a = draw(u64)
    positions = draw(st.lists(st.integers(0, 63), max_size=k, unique=True))
    return a, flip(a, positions)


@pytest.mark.parametrize("spec", ALL_SPECS)
def test_scheme_covers_all_64_bits_per_table_shape(spec: str) -> None:
    scheme = SCHEMES[spec]
    assert scheme.tables, "a scheme needs at least one table"
    for runs in scheme.tables:
        bits = [start + i for start, width in runs for i in range(width)]
        assert len(bits) == len(set(bits)), "a key uses a bit twice"
        assert all(0 <= b < 64 for b in bits)
        assert bits, "an empty key would put every fingerprint in one bucket"
    assert len(scheme.key_bits()) == len(scheme.tables)


@pytest.mark.parametrize("spec", ALL_SPECS)
@given(data=st.data())
def test_any_pair_within_k_shares_a_table_key(spec: str, data: st.DataObject) -> None:
    """Pigeonhole: fingerprints within distance k agree on the key of at least one table."""
    scheme = SCHEMES[spec]
    a, b = data.draw(near_pair(scheme.k))
    ka, kb = scheme.keys([a, b])
    assert any(x == y for x, y in zip(ka, kb, strict=True)), (hex(a), hex(b))


@pytest.mark.parametrize("spec", ALL_SPECS)
def test_worst_case_flips_share_a_table_key(spec: str) -> None:
    """Exactly k flipped bits spread over different blocks: the adversarial case."""
    scheme = SCHEMES[spec]
    k = scheme.k
    base = 0x0123456789ABCDEF
    spreads = [
        [int(i * 64 / max(k, 1)) % 64 for i in range(k)],  # one flip per block, spread out
        list(range(k)),  # all in the first bits
        list(range(63, 63 - k, -1)),  # all in the last bits
        [(17 * i + 5) % 64 for i in range(k)],
    ]
    for positions in spreads:
        positions = sorted(set(positions))
        other = flip(base, positions)
        ka, kb = scheme.keys([base, other])
        assert any(x == y for x, y in zip(ka, kb, strict=True)), positions


@pytest.mark.parametrize("spec", ALL_SPECS)
def test_adversarial_pairs_share_a_table_key(spec: str) -> None:
    scheme = SCHEMES[spec]
    for base in (0, 2**64 - 1, 0x0123456789ABCDEF):
        for positions in adversarial_flips(scheme):
            assert len(positions) <= scheme.k
            ka, kb = scheme.keys([base, flip(base, positions)])
            assert any(x == y for x, y in zip(ka, kb, strict=True)), positions


def test_adversarial_pairs_depend_on_single_tables() -> None:
    """The construction above has teeth: for plain kK-bB schemes each of its pairs shares
    exactly one table key, so a scheme missing any table would fail the test above."""
    for spec in ("k3-b4", "k5-b7", "k6-b8", "k3-b6"):
        scheme = SCHEMES[spec]
        for positions in adversarial_flips(scheme):
            ka, kb = scheme.keys([0, flip(0, positions)])
            assert sum(x == y for x, y in zip(ka, kb, strict=True)) == 1, (spec, positions)


@pytest.mark.parametrize("spec", ALL_SPECS)
@given(fps=st.lists(u64, min_size=16, max_size=40))
def test_vectorized_keys_equal_scalar_keys(spec: str, fps: list[int]) -> None:
    """keys() takes a numpy path from 16 fingerprints on; both paths give the same keys."""
    scheme = SCHEMES[spec]
    batch = scheme.keys(fps)
    one_by_one = [scheme.keys([fp])[0] for fp in fps]
    assert batch == one_by_one
    assert all(isinstance(k, int) for row in batch for k in row)


@pytest.mark.parametrize("spec", ALL_SPECS)
@given(fp=u64)
def test_key_is_exactly_the_selected_bits(spec: str, fp: int) -> None:
    """Each key is the fingerprint's bits of that table's runs, packed in order."""
    scheme = SCHEMES[spec]
    row = scheme.keys([fp])[0]
    for runs, key in zip(scheme.tables, row, strict=True):
        expected, offset = 0, 0
        for start, width in runs:
            expected |= ((fp >> start) & ((1 << width) - 1)) << offset
            offset += width
        assert key == expected


@pytest.mark.parametrize(
    ("spec", "tables", "k"),
    [
        ("manku-4", 4, 3),
        ("k3-b4", 4, 3),
        ("manku-10", 10, 3),
        ("manku-16", 16, 3),
        ("manku-20", 20, 3),
        ("k5-b7", 21, 5),
        ("k6-b8", 28, 6),
        ("k2-b3x3", 9, 2),
        ("k0-b1", 1, 0),
    ],
)
def test_table_counts_follow_the_binomials(spec: str, tables: int, k: int) -> None:
    scheme = BlockScheme.parse(spec)
    assert (len(scheme.tables), scheme.k) == (tables, k)
    assert scheme.name == spec
    assert str(k) in scheme.describe()


@pytest.mark.parametrize("name", sorted(NAMED))
def test_names_are_their_specs(name: str) -> None:
    by_name, by_spec = BlockScheme.parse(name), BlockScheme.parse(NAMED[name])
    assert (by_name.k, by_name.tables) == (by_spec.k, by_spec.tables)
    assert by_name.name == name


def test_manku_4_is_four_16_bit_blocks() -> None:
    scheme = BlockScheme.parse("manku-4")
    assert scheme.key_bits() == [16, 16, 16, 16]
    assert sorted(scheme.tables) == [((0, 16),), ((16, 16),), ((32, 16),), ((48, 16),)]


@pytest.mark.parametrize(
    "spec",
    [
        "",
        "k3",
        "b4",
        "k3-b3",
        "k4-b4",
        "k3-b2",
        "k3-b65",
        "k-1-b4",
        "k3-b0",
        "k3-b4x3",
        "k3-b4x2",
        "k3-b4x65",
        "k3-b4x64",
        "k3-b4x",
        "k3-b4x0",
        "kx-b4",
        "K3-B4",
        " k3-b4",
        "k3-b4 ",
        "manku-5",
        "manku",
        "k3_b4",
        "k3-b4x4x4",
        "k1.5-b4",
        "k3-b99999999999999999999",
    ],
)
def test_parse_rejects_bad_specs(spec: str) -> None:
    with pytest.raises(ConfigError):
        BlockScheme.parse(spec)


def test_parse_refuses_a_scheme_with_an_astronomical_number_of_tables() -> None:
    """k32-b64 would need C(64, 32) ~ 1.8e18 tables: a clean ConfigError, not a hang.

    Run in a child process with a memory cap and a 3 s limit, so that a parser that
    tries to build the tables fails this test instead of taking the machine down.
    """
    code = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
        "from detector.blocks import BlockScheme\n"
        "from detector.errors import ConfigError\n"
        "try:\n"
        "    BlockScheme.parse('k32-b64')\n"
        "except ConfigError:\n"
        "    sys.exit(0)\n"
        "sys.exit(3)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, env=env, timeout=3)
    except subprocess.TimeoutExpired:
        pytest.fail("BlockScheme.parse('k32-b64') did not return within 3 s")
    assert done.returncode == 0, done.stderr.decode()[-500:]


def test_probe_radius_is_the_worst_spread_of_k_bits() -> None:
    """Against brute force: over every way of putting k differing bits into B blocks, the
    largest total of the M emptiest blocks."""
    from itertools import product

    from detector.blocks import probe_radius

    for blocks in range(1, 6):
        for kept in range(1, blocks + 1):
            for k in range(0, 9):
                worst = max(
                    sum(sorted(counts)[:kept])
                    for counts in product(range(k + 1), repeat=blocks)
                    if sum(counts) == k
                )
                assert probe_radius(k, blocks, kept) == worst, (k, blocks, kept)


@pytest.mark.parametrize("spec", PROBE_SPECS)
@given(data=st.data())
def test_probed_lookup_reads_the_bucket_of_every_pair_within_k(
    spec: str, data: st.DataObject
) -> None:
    scheme = SCHEMES[spec]
    a, b = data.draw(near_pair(scheme.k))
    (kb,) = scheme.keys([b])
    (probes,) = scheme.probes([a])
    assert any((t, key) in set(probes) for t, key in enumerate(kb)), (hex(a), hex(b))


@pytest.mark.parametrize("spec", PROBE_SPECS)
def test_probed_scheme_reads_each_table_at_its_radius(spec: str) -> None:
    scheme = SCHEMES[spec]
    (probes,) = scheme.probes([0])
    per_table = [sum(1 for t, _ in probes if t == u) for u in range(len(scheme.tables))]
    widths = scheme.key_bits()
    assert per_table == [sum(comb(w, r) for r in range(scheme.radius + 1)) for w in widths]
    assert all(key.bit_count() <= scheme.radius for _, key in probes)


def test_classic_schemes_probe_only_their_own_keys() -> None:
    for spec in ALL_SPECS:
        scheme = SCHEMES[spec]
        assert scheme.radius == 0
        assert scheme.probes([12345]) == [list(enumerate(scheme.keys([12345])[0]))]


@pytest.mark.parametrize("spec", ["k6-b8", "k3-b4", "k7-b4-m1", "k7-b8", "k5-b7"])
def test_a_key_and_its_rest_are_the_whole_fingerprint(spec: str) -> None:
    """What a bucket entry stores of a fingerprint (the rest of it beyond the table's key,
    keys.pack_entries) gives it back with the bucket's key, in every table."""
    from detector.index.redis.keys import entry_bytes, pack_entries, unpack_entries

    scheme = BlockScheme.parse(spec)
    rng = np.random.default_rng(7)
    fps = rng.integers(0, 2**64 - 1, 500, dtype=np.uint64, endpoint=True)
    fps[:2] = (0, 2**64 - 1)
    nums = rng.integers(1, 2**32 - 1, 500, dtype=np.uint32)
    keys = scheme.key_array(fps)
    size = entry_bytes(scheme)
    assert size == (64 - min(scheme.key_bits()) + 7) // 8 + 4
    for t, bits in enumerate(scheme.key_bits()):
        rests = scheme.rest_array(fps, t)
        assert int(rests.max()) < 2 ** (64 - bits)
        assert scheme.compose(t, keys[:, t], rests).tolist() == fps.tolist()
        got, numbers = unpack_entries(pack_entries(scheme, t, fps, nums, size).ravel(), size)
        assert got.tolist() == rests.tolist() and numbers.tolist() == nums.tolist()
