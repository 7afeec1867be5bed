"""detector.stream.files: the file/stdin source and the JSONL sink of `neardup detect`."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pytest

from detector.errors import ConfigError
from detector.records import CUT, Decision
from detector.stream.files import JsonlSink, input_label, open_input, open_output, read_lines


def test_read_lines_skips_blank_lines_but_counts_them(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"a": 1}\r\n\n   \n\t\r\n{"b": 2}\n{"c": 3}')  # no final newline
    with open_input(str(path)) as stream:
        lines = list(read_lines(stream, "x.jsonl"))
    assert lines == [
        (b'{"a": 1}', {"source": "x.jsonl", "line": 1}),
        (b'{"b": 2}', {"source": "x.jsonl", "line": 5}),
        (b'{"c": 3}', {"source": "x.jsonl", "line": 6}),
    ]


@pytest.mark.parametrize("gz", [False, True])
def test_a_line_over_the_limit_is_cut_as_it_is_read(tmp_path: Path, gz: bool) -> None:
    """Its first `keep` bytes and its true size (without its ending), whatever ends it;
    a line of exactly the limit is read whole, and every line after a cut one keeps its
    number."""
    body = (
        b"\xef\xbb\xbf" + b"a" * 30 + b"\n"  # 1: a byte-order mark is not the record's
        + b"b" * 20 + b"\r\n"  # 2: the limit exactly, with "\r\n"
        + b"c" * 21 + b"\n"  # 3: one over, whole in the first read: parse_document's to refuse
        + b"d" * 22 + b"\r\n"  # 4
        + b" " * 50 + b"\n"  # 5: a long blank line is cut too, not passed over
        + b'{"id": "e"}\n'  # 6
        + b"f" * 21 + b"\r"  # 7: "\r" last in the first read, its "\n" in the next
        + b"\n" + b"g" * 5000  # 8: the last line, no ending
    )  # fmt: skip
    path = tmp_path / "x.jsonl"
    path.write_bytes(gzip.compress(body) if gz else body)
    with open_input(str(path)) as stream:
        lines = list(read_lines(stream, "x", max_bytes=20, keep=4))
    cut = [(raw, w["line"], w.get(CUT)) for raw, w in lines]
    assert cut == [
        (b"aaaa", 1, 30),
        (b"b" * 20, 2, None),
        (b"c" * 21, 3, None),
        (b"dddd", 4, 22),
        (b"    ", 5, 50),
        (b'{"id": "e"}', 6, None),
        (b"ffff", 7, 21),
        (b"gggg", 8, 5000),
    ]
    with open_input(str(path)) as stream:  # a first line of the limit, after its mark
        (first, where), *_ = read_lines(stream, "x", max_bytes=30, keep=4)
        assert (first, CUT in where) == (b"a" * 30, False)
    with open_input(str(path)) as stream:  # unbounded: every line whole, blank ones skipped
        assert [len(raw) for raw, _ in read_lines(stream, "x")] == [30, 20, 21, 22, 11, 21, 5000]


@pytest.mark.parametrize("name", ["data.jsonl.gz", "data.jsonl", "data.bin"])
def test_gzip_is_recognized_by_its_magic_bytes(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(gzip.compress(b'{"id": "a"}\n{"id": "b"}\n'))
    with open_input(str(path)) as stream:
        assert [raw for raw, _ in read_lines(stream, name)] == [b'{"id": "a"}', b'{"id": "b"}']


def test_plain_file_named_gz_is_read_as_plain(tmp_path: Path) -> None:
    path = tmp_path / "mislabelled.jsonl.gz"
    path.write_bytes(b'{"id": "a"}\n')
    with open_input(str(path)) as stream:
        assert [raw for raw, _ in read_lines(stream, "m")] == [b'{"id": "a"}']


def test_empty_files(tmp_path: Path) -> None:
    for name in ("empty.jsonl", "empty.jsonl.gz"):
        (tmp_path / name).write_bytes(b"")
        with open_input(str(tmp_path / name)) as stream:
            assert list(read_lines(stream, name)) == []


def test_corrupt_gzip_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.jsonl.gz"
    path.write_bytes(gzip.compress(b'{"id": "a"}\n' * 1000)[:60])
    with pytest.raises(ConfigError), open_input(str(path)) as stream:
        list(read_lines(stream, "broken"))


def test_missing_input_and_unwritable_output(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        open_input(str(tmp_path / "absent.jsonl"))
    with pytest.raises(ConfigError):
        open_output(str(tmp_path / "no-such-dir" / "out.jsonl"), io.StringIO())


def test_jsonl_sink_writes_one_line_per_decision_and_error() -> None:
    out, errors = io.StringIO(), io.StringIO()
    sink = JsonlSink(out, errors)
    sink.decisions([Decision("a", None, 1), Decision("b", "a", 1, 0, 1.0, exact=True)])
    sink.error({"line": 3, "reason": "invalid_json"})
    sink.flush()
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    assert [(d["id"], d["decision"]) for d in lines] == [("a", "unique"), ("b", "duplicate")]
    assert json.loads(errors.getvalue()) == {"line": 3, "reason": "invalid_json"}
    assert Path(input_label("/some/dir/in.jsonl")).name == "in.jsonl"
    assert input_label("-") == "stdin"
