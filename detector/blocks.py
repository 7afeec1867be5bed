"""Block tables for Hamming distance k (Manku, Jain, Das Sarma, WWW 2007, section 3).

Split the 64 bits into B blocks. Two fingerprints within distance k differ in at most k
blocks, so they agree exactly on some B - k of them: one table per choice of B - k blocks,
keyed by those blocks' bits, finds every pair within k (pigeonhole). The two-level layout
splits the bits left over by each first-level choice again, trading more tables for longer
keys and smaller buckets.

Fewer tables, probed: `kK-bB-mM` keys each table by M of the B blocks whatever K is. A
pair within K then differs in at most r bits of some table's key, where r is the sum of
the M smallest block counts when K bits are spread as evenly as they can be; a lookup
reads every key within r of the fingerprint's own (1 + w probes for r = 1 and w-bit keys).
Four tables probed at radius 1 find every pair within 7: a quarter of the memory of the
28 tables of k6-b8, for 17 bucket reads per table instead of one.
Pure: fingerprints in, table keys out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cache, cached_property
from itertools import combinations
from math import comb

import numpy as np

from .errors import ConfigError

BITS = 64
MAX_TABLES = 1024
Runs = tuple[tuple[int, int], ...]  # (first bit, width) of each contiguous piece of a key

# Manku's layouts for k = 3 (his Table 1 family) and the wider ones measured for recall.
NAMED = {
    "manku-4": "k3-b4",  # 4 tables, 16-bit keys: the classic configuration
    "manku-10": "k3-b5",  # 10 tables, 25-26-bit keys
    "manku-16": "k3-b4x4",  # 16 tables, 28-bit keys
    "manku-20": "k3-b6",  # 20 tables, 31-33-bit keys
}
_SPEC = re.compile(r"k(\d+)-b(\d+)(?:x(\d+)|-m(\d+))?")
MAX_PROBES = 4096  # bucket reads per lookup


def probe_radius(k: int, blocks: int, kept: int) -> int:
    """Most differing bits a pair within k can have in its best choice of `kept` blocks:
    the adversary spreads the k bits evenly, and the best choice takes the emptiest."""
    each, rest = divmod(k, blocks)
    even = blocks - rest  # blocks holding `each` bits; the other `rest` hold each + 1
    return kept * each if kept <= even else even * each + (kept - even) * (each + 1)


def _split(positions: list[int], parts: int) -> list[list[int]]:
    """Cut bit positions into `parts` consecutive groups, the larger groups first."""
    size, extra = divmod(len(positions), parts)
    out, at = [], 0
    for i in range(parts):
        width = size + (i < extra)
        out.append(positions[at : at + width])
        at += width
    return out


def _runs(positions: list[int]) -> Runs:
    runs: list[tuple[int, int]] = []
    for p in positions:
        if runs and runs[-1][0] + runs[-1][1] == p:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((p, 1))
    return tuple(runs)


@dataclass(frozen=True)
class BlockScheme:
    """Which bits key each table; every pair within distance k shares some table key."""

    name: str
    k: int
    tables: tuple[Runs, ...]
    radius: int = 0  # key bits a lookup may flip (multi-probe)

    @classmethod
    def parse(cls, spec: str) -> BlockScheme:
        """`manku-4`, `k5-b7` (7 blocks, choose 2), `k3-b4x4` (two levels) or `k7-b4-m1`
        (4 blocks, one per table, probed)."""
        canonical = NAMED.get(spec, spec)
        m = _SPEC.fullmatch(canonical)
        if not m:
            names = ", ".join(NAMED)
            raise ConfigError(
                f"unknown block scheme {spec!r}: use {names}, kK-bB, kK-bBxC or kK-bB-mM"
            )
        if m[4]:
            return cls._probed(spec, int(m[1]), int(m[2]), int(m[4]))
        k, b1, b2 = int(m[1]), int(m[2]), int(m[3]) if m[3] else None
        if not (0 <= k < b1 <= BITS) or (b2 is not None and not k < b2 <= BITS):
            raise ConfigError(f"block scheme {spec!r}: need 0 <= k < blocks <= 64")
        count = comb(b1, k) * (comb(b2, k) if b2 else 1)
        if count > MAX_TABLES:
            raise ConfigError(
                f"block scheme {spec!r} needs {count} tables; at most {MAX_TABLES} are allowed"
            )
        tables: list[Runs] = []
        for chosen in combinations(_split(list(range(BITS)), b1), b1 - k):
            kept = sorted(p for block in chosen for p in block)
            if b2 is None:
                tables.append(_runs(kept))
                continue
            rest = sorted(set(range(BITS)) - set(kept))
            if len(rest) < b2:
                raise ConfigError(f"block scheme {spec!r}: too few bits for {b2} sub-blocks")
            for sub in combinations(_split(rest, b2), b2 - k):
                tables.append(_runs(sorted(kept + [p for block in sub for p in block])))
        return cls(name=spec, k=k, tables=tuple(tables))

    @classmethod
    def _probed(cls, spec: str, k: int, blocks: int, kept: int) -> BlockScheme:
        if not (1 <= kept <= blocks <= BITS) or k < 0:
            raise ConfigError(f"block scheme {spec!r}: need 1 <= M <= B <= 64 and k >= 0")
        count = comb(blocks, kept)
        radius = probe_radius(k, blocks, kept)
        width = -(-BITS * kept // blocks)
        probes = count * sum(comb(width, i) for i in range(radius + 1))
        if count > MAX_TABLES or probes > MAX_PROBES:
            raise ConfigError(
                f"block scheme {spec!r} needs {count} tables and {probes} bucket "
                f"reads a lookup (at most {MAX_TABLES} and {MAX_PROBES})"
            )
        tables = tuple(
            _runs(sorted(p for block in chosen for p in block))
            for chosen in combinations(_split(list(range(BITS)), blocks), kept)
        )
        return cls(name=spec, k=k, tables=tables, radius=radius)

    def widened(self, k: int) -> BlockScheme:
        """The same tables read at one probe radius more (each key's neighbours within
        1 bit, for a table of plain keys), filtered to distance k: a lookup wider than the
        tables were laid out for, which finds most pairs within k, not every one
        (detector.radius)."""
        return _widened(self, k)

    def reaches(self, a: int, b: int) -> bool:
        """Whether a lookup of `a` reads a bucket holding `b`: some table's keys of the two
        within the probe radius (the same key, for a scheme not probed)."""
        ka, kb = self.keys([a, b])
        return any((x ^ y).bit_count() <= self.radius for x, y in zip(ka, kb, strict=True))

    @cached_property
    def flips(self) -> list[np.ndarray]:
        """Per table, the masks a lookup XORs into the key (0 first: the key itself)."""
        out = []
        for bits in self.key_bits():
            masks = [
                sum(1 << b for b in chosen)
                for r in range(self.radius + 1)
                for chosen in combinations(range(bits), r)
            ]
            out.append(np.array(masks, np.uint64))
        return out

    def probes(self, fingerprints: Sequence[int]) -> list[list[tuple[int, int]]]:
        """(table, key) of every bucket a lookup of each fingerprint reads."""
        tables, keys = self.probe_array(fingerprints)
        return [list(zip(tables.tolist(), row, strict=True)) for row in keys.tolist()]

    def probe_array(
        self, fingerprints: Sequence[int] | np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """probes() as arrays: the table of each probe, and the keys, fingerprints by
        probes (each table's own key first, then those within the radius of it)."""
        own = self.key_array(fingerprints)
        keys = np.concatenate([own[:, t, None] ^ f[None, :] for t, f in enumerate(self.flips)], 1)
        tables = np.concatenate([np.full(len(f), t) for t, f in enumerate(self.flips)])
        return tables, keys

    def key_bits(self) -> list[int]:
        return [sum(w for _, w in runs) for runs in self.tables]

    def keys(self, fingerprints: Sequence[int]) -> list[list[int]]:
        """The key of each fingerprint in each table."""
        if len(fingerprints) < 16:  # numpy's per-call cost outweighs a few Python shifts
            return [
                [sum(((fp >> s) & m) << o for s, m, o in t) for t in self._pieces]
                for fp in fingerprints
            ]
        rows: list[list[int]] = self.key_array(fingerprints).tolist()
        return rows

    def key_array(self, fingerprints: Sequence[int] | np.ndarray) -> np.ndarray:
        """keys() as an array, documents by tables (uint64)."""
        fps = np.asarray(fingerprints, dtype=np.uint64)
        out = np.zeros((len(fps), len(self.tables)), np.uint64)
        for t, pieces in enumerate(self._pieces):
            for start, mask, offset in pieces:
                out[:, t] |= ((fps >> np.uint64(start)) & np.uint64(mask)) << np.uint64(offset)
        return out

    def rest_array(self, fingerprints: np.ndarray, table: int) -> np.ndarray:
        """The bits of each fingerprint that `table`'s key does not hold, in order from
        bit 0: with the key, all of it (`compose`). uint64."""
        fps = np.asarray(fingerprints, dtype=np.uint64)
        out = np.zeros(len(fps), np.uint64)
        for start, mask, offset in self._rest_pieces[table]:
            out |= ((fps >> np.uint64(start)) & np.uint64(mask)) << np.uint64(offset)
        return out

    def compose(self, table: int, keys: np.ndarray, rests: np.ndarray) -> np.ndarray:
        """The fingerprints whose key in `table` and rest (rest_array) are given."""
        keys, rests = np.asarray(keys, np.uint64), np.asarray(rests, np.uint64)
        out = np.zeros(len(keys), np.uint64)
        for pieces, part in ((self._pieces[table], keys), (self._rest_pieces[table], rests)):
            for start, mask, offset in pieces:
                out |= ((part >> np.uint64(offset)) & np.uint64(mask)) << np.uint64(start)
        return out

    @cached_property
    def _rest_pieces(self) -> list[list[tuple[int, int, int]]]:
        """Per table: (first bit, mask, offset in the rest) of each run its key lacks."""
        out = []
        for runs in self.tables:
            held = {p for start, width in runs for p in range(start, start + width)}
            pieces, offset = [], 0
            for start, width in _runs([p for p in range(BITS) if p not in held]):
                pieces.append((start, (1 << width) - 1, offset))
                offset += width
            out.append(pieces)
        return out

    @cached_property
    def _pieces(self) -> list[list[tuple[int, int, int]]]:
        """Per table: (first bit, mask, offset in the key) of each run."""
        out = []
        for runs in self.tables:
            pieces, offset = [], 0
            for start, width in runs:
                pieces.append((start, (1 << width) - 1, offset))
                offset += width
            out.append(pieces)
        return out

    def describe(self) -> str:
        bits = self.key_bits()
        probe = f", {len(self.flips[0])} probes a table" if self.radius else ""
        return (
            f"{self.name}: k={self.k}, {len(self.tables)} tables, "
            f"{min(bits)}-{max(bits)}-bit keys{probe}"
        )


@cache
def _widened(scheme: BlockScheme, k: int) -> BlockScheme:
    return replace(
        scheme, name=f"{scheme.name}+r{scheme.radius + 1}", k=k, radius=scheme.radius + 1
    )
