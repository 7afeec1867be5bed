"""detector.stream.files: the file/stdin source and the JSONL sink of `neardup detect`."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pytest

from detector.errors import ConfigError
from detector.records import Decision
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
