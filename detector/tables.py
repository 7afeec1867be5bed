"""Per-code-point tables of the interpreter's Unicode database, cached on disk.

The tokenizer's character classes and NFKC's combining marks are properties of the
interpreter's Unicode version, so they cannot ship with the package; computing them scans
all 1.1M code points (about 0.3 s, most of a short run). They are computed once per
interpreter and Unicode version and kept under $XDG_CACHE_HOME/neardup (~/.cache/neardup),
run-length coded: a few kB, read in a millisecond. A cache that cannot be read or written
only costs the scan.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import xxhash

CODE_POINTS = 0x110000
UNICODE_VERSION = unicodedata.unidata_version


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "neardup"


def cached(
    name: str,
    source: str,
    build: Callable[[], np.ndarray],
    size: int = CODE_POINTS,
    dtype: type[np.integer[Any]] = np.uint8,
) -> np.ndarray:
    """The table of `size` integers `build` makes, from the cache when an equal one was
    kept there.

    `source` is what the table depends on besides the Unicode version (a pattern, a
    definition's version): a change to it names another file.
    """
    identity = f"{sys.implementation.cache_tag}\0{UNICODE_VERSION}\0{source}"
    key = xxhash.xxh64(identity.encode("utf-8", "surrogatepass")).hexdigest()
    path = cache_dir() / f"{name}-u{UNICODE_VERSION}-{key}.npy"
    try:
        runs = np.load(path, allow_pickle=False)
        table = _decode(runs, size, dtype)
        if table is not None:
            return table
    except (OSError, ValueError, EOFError):
        pass
    table = build()
    _store(path, _encode(table))
    return table


def _encode(table: np.ndarray) -> np.ndarray:
    """(2, runs) int64: the first code point of each run of equal values, and the value."""
    starts = np.flatnonzero(np.concatenate(([True], table[1:] != table[:-1])))
    return np.stack((starts, table[starts].astype(np.int64)))


def _decode(runs: np.ndarray, size: int, dtype: type[np.integer[Any]]) -> np.ndarray | None:
    if runs.ndim != 2 or runs.shape[0] != 2 or runs.shape[1] == 0 or runs.dtype != np.int64:
        return None
    starts, values = runs
    if starts[0] != 0 or (np.diff(starts) <= 0).any() or starts[-1] >= size:
        return None
    limits = np.iinfo(dtype)
    if (values < limits.min).any() or (values > limits.max).any():
        return None
    lengths = np.diff(np.append(starts, size))
    return np.repeat(values.astype(dtype), lengths)


def _store(path: Path, runs: np.ndarray) -> None:
    """Written whole or not at all: concurrent first runs each write their own file."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as f:
            np.save(f, runs, allow_pickle=False)
        os.replace(tmp, path)
    except OSError:  # a full disk: no half-written file stays behind
        with contextlib.suppress(OSError):
            os.unlink(tmp)
