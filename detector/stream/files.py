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
from ..records import CUT, DEFAULT_MAX_BYTES, LINE_RAW_KEPT, Decision, RawRecord, Tombstone
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


BOM = b"\xef\xbb\xbf"
SKIP_CHUNK = 1 << 20  # what the rest of a line too long to hold is read by


def read_lines(
    stream: IO[bytes], source: str, max_bytes: int | None = None, keep: int = LINE_RAW_KEPT
) -> Iterator[RawRecord]:
    """Every non-blank line with its line number; the newline is not part of the record.

    With `max_bytes`, no longer line is held in memory (one line of a small gzip file can
    be gigabytes): it is read by chunks, and given as its first `keep` bytes with
    where[CUT] set to its size, blank or not. Without it (the caller's own files, such as
    an index export), lines are read whole."""
    # "\r\n" fits as well: a line of max_bytes with its ending is read whole (and the
    # first one with a byte-order mark)
    bound = -1 if max_bytes is None else max_bytes + 2
    limit = -1 if max_bytes is None else bound + len(BOM)
    number = 0
    try:
        while line := stream.readline(limit):
            number += 1
            whole = len(line) != limit or line.endswith(b"\n")
            if number == 1:
                line, limit = line.removeprefix(BOM), bound
            size = None
            if not whole:
                line, size = _cut(stream, line, keep)
            record = line.rstrip(b"\r\n")
            if size is not None:
                yield record, {"source": source, "line": number, CUT: size}
            elif record.strip():
                yield record, {"source": source, "line": number}
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise ConfigError(f"cannot read {source}: {exc}") from exc


def _cut(stream: IO[bytes], start: bytes, keep: int) -> tuple[bytes, int]:
    """A line's first `keep` bytes and its size without its ending, the rest of it read
    and dropped a chunk at a time."""
    size, tail = len(start), start[-2:]
    while not tail.endswith(b"\n") and (chunk := stream.readline(SKIP_CHUNK)):
        size, tail = size + len(chunk), tail[-1:] + chunk  # "\r" may end the chunk before
    return start[:keep], size - (len(tail) - len(tail.rstrip(b"\r\n")))


class FileSource:
    """The lines of a JSONL file (gzip too) or of stdin ('-'), in batches. A file is read
    once, so commit has nothing to remember. A line over `max_bytes` (the loop's limit)
    is cut to `keep` bytes as it is read (read_lines)."""

    def __init__(
        self,
        path: str,
        batch_size: int,
        max_bytes: int = DEFAULT_MAX_BYTES,
        keep: int = LINE_RAW_KEPT,
    ) -> None:
        self.label = input_label(path)
        self.stream = open_input(path)
        self.batch_size = batch_size
        self.max_bytes = max_bytes
        self.keep = keep

    rewinds = 0  # a file or a list never goes back

    def batches(self) -> Iterator[Batch]:
        lines = read_lines(self.stream, self.label, self.max_bytes, self.keep)
        for part in chunks(lines, self.batch_size):
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
        # The batch's bytes as a Kafka sink sends them (natively encoded), as text again
        lines = b"".join(value + b"\n" for value in Decision.encode_many(decisions))
        self.out.write(lines.decode())

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
