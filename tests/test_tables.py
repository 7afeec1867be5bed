"""detector.tables: the Unicode tables come from the cache when it holds them, equal to
a fresh scan, and a cache that is damaged or cannot be written costs only the scan."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from detector import tables


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "neardup"


def build() -> np.ndarray:
    table = np.zeros(tables.CODE_POINTS, np.uint8)
    table[0x41:0x5B] = 1
    table[0x4E00:0xA000] = 2
    table[-1] = 3
    return table


def test_a_table_is_kept_and_read_back_equal(cache: Path) -> None:
    calls = []

    def counted() -> np.ndarray:
        calls.append(1)
        return build()

    first = tables.cached("t", "v1", counted)
    again = tables.cached("t", "v1", counted)
    assert calls == [1]
    assert np.array_equal(first, build()) and np.array_equal(again, build())
    (path,) = cache.glob("t-*.npy")
    assert path.stat().st_size < 1000  # run-length coded: 4 runs, not 1.1 MB
    tables.cached("t", "v2", counted)  # another source: another file
    assert calls == [1, 1]


def test_a_damaged_cache_is_built_again(cache: Path) -> None:
    tables.cached("t", "v1", build)
    (path,) = cache.glob("t-*.npy")
    for damage in (b"not numpy", np.zeros(3, np.int64), np.array([[5, 9], [1, 2]])):
        if isinstance(damage, bytes):
            path.write_bytes(damage)
        else:
            np.save(path, damage)
        assert np.array_equal(tables.cached("t", "v1", build), build())


def test_a_cache_that_cannot_be_written_only_costs_the_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("a file where the cache directory would be")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    assert np.array_equal(tables.cached("t", "v1", build), build())


def test_the_real_tables_from_the_cache_equal_a_scan(cache: Path) -> None:
    from detector.normalize import _non_starters
    from detector.tokenize import TOKEN, _char_classes

    for name, source, scan in (
        ("char-classes", f"{TOKEN}/1", _char_classes),
        ("non-starters", "x", _non_starters),
    ):
        tables.cached(name, source, scan)
        assert np.array_equal(tables.cached(name, source, lambda: pytest.fail("scanned")), scan())
