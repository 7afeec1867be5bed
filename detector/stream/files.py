"""File and stdin source, JSONL sink: the adapters of the embedded default."""

from __future__ import annotations

import gzip
import io
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from ..errors import ConfigError
from ..records import Decision, RawRecord, Tombstone
from . import Batch, Headers, chunks

GZIP_MAGIC = b"\x1f\x8b"


def open_input(path: str) -> IO[bytes]:
    """A binary stream of the input: '-' is stdin; gzip is recognized by its magic bytes."""
    if path == "-":
        raw: IO[bytes] = sys.stdin.buffer
    else:
        try:
            raw = open(path, "rb")  # noqa: SIM115 - closed by the caller
        except OSError as exc:
            raise ConfigError(f"cannot open input {path}: {exc.strerror}") from exc
    peek = raw.peek(2)[:2] if isinstance(raw, io.BufferedReader) else b""
    if peek == GZIP_MAGIC or (not peek and path.endswith(".gz")):
        return _GzipLines(raw)
    return raw


class _GzipLines(io.BufferedReader):
    """gzip input behind a large buffer (GzipFile's own readline is slow); closing it
    closes the file under it too, unless that is stdin."""

    def __init__(self, raw: IO[bytes]) -> None:
        super().__init__(gzip.GzipFile(fileobj=raw), 1 << 20)
        self._under = raw

    def close(self) -> None:
        super().close()
        if self._under is not sys.stdin.buffer:
            self._under.close()


def read_lines(stream: IO[bytes], source: str) -> Iterator[RawRecord]:
    """Every non-blank line with its line number; the newline is not part of the record."""
    try:
        for number, line in enumerate(stream, start=1):
            record = line.rstrip(b"\r\n")
            if number == 1:
                record = record.removeprefix(b"\xef\xbb\xbf")  # a byte-order mark
            if record.strip():
                yield record, {"source": source, "line": number}
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise ConfigError(f"cannot read {source}: {exc}") from exc


class FileSource:
    """The lines of a JSONL file (gzip too) or of stdin ('-'), in batches. A file is read
    once, so commit has nothing to remember."""

    def __init__(self, path: str, batch_size: int) -> None:
        self.label = input_label(path)
        self.stream = open_input(path)
        self.batch_size = batch_size

    rewinds = 0  # a file or a list never goes back

    def batches(self) -> Iterator[Batch]:
        for part in chunks(read_lines(self.stream, self.label), self.batch_size):
            yield Batch(part)

    def commit(self, position: object) -> None:
        pass

    def close(self) -> None:
        if self.stream is not sys.stdin.buffer:
            self.stream.close()


def open_output(path: str | None, default: IO[str]) -> IO[str]:
    if path is None or path == "-":
        return default
    try:
        if path.endswith(".gz"):
            return gzip.open(path, "wt", encoding="utf-8")
        return open(path, "w", encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror}") from exc


class JsonlSink:
    """Decisions as JSON lines to one stream, error records to another. close() closes
    the files it was given, never stdout or stderr."""

    def __init__(self, out: IO[str], errors: IO[str]) -> None:
        self.out = out
        self.errors = errors

    def decisions(self, decisions: list[Decision], headers: Sequence[Headers] = ()) -> None:
        self.out.write("".join(d.to_json() + "\n" for d in decisions))

    def error(self, record: dict[str, Any], headers: Headers = None) -> None:
        self.errors.write(json.dumps(record) + "\n")

    def tombstone(self, dead: Tombstone, headers: Headers = None) -> None:
        """A file has no tombstones to forward (its records always have a value)."""

    def flush(self) -> None:
        self.out.flush()
        self.errors.flush()

    def close(self) -> None:
        for f in (self.out, self.errors):
            if f not in (sys.stdout, sys.stderr):
                f.close()


def input_label(path: str) -> str:
    return "stdin" if path == "-" else Path(path).name
