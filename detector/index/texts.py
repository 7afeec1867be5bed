"""How the indexes keep the literal texts of the second pass: exact, and small.

Pure: texts in, bytes out; the indexes store the bytes and the dictionary.

A packed text is one of two forms, told apart by its first four bytes, so that an index
may hold both and no text needs migrating:

- a zstd frame (magic 28 b5 2f fd) at LEVEL, with the index's dictionary or, before the
  index has one, without: the frame's header names the dictionary by its id (0: none);
- an LZ4 block with the text's length in front (`store_size`), the only form before:
  its first four bytes are that length, little endian, and a text would need 0xFD2FB528
  bytes (4 GiB) to start like a zstd frame, when a Redis string stops at 512 MiB.

The dictionary is trained on the first texts an index writes (`Sample`), once per index;
the index keeps it (the memory index in memory, the Redis index in a key of its own,
keys.py) and every writer of the index packs with it. A reader that meets a frame naming a
dictionary it has not loaded asks the index for it (`Codec.missing`, `Codec.use`).

Beside its text, an index keeps each document's shingle sketch (detector.sketch), which
stays when the text leaves the window of texts kept (`--text-window`). The Redis index
keeps the two in one value (`join`): SKETCHED, the sketch's length (uint16 LE), the sketch,
then the packed text, or nothing where the sketch stays alone in the key once its text
left the window (with retention; else it moves to a sketch hash, keys.py: sk). SKETCHED
read as an LZ4 length would be 4 GiB, and it is not a zstd magic, so the three forms
never meet.
bench/texts.py measures the forms, levels and sample sizes (README, "Texts").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

import lz4.block
import zstandard

from ..errors import ConfigError

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
SKETCHED = b"SKT\xfe"
DICTIONARY_MAGIC = b"\x37\xa4\x30\xec"  # the first 4 bytes of a zstd dictionary; its id next
# Level 5 with the dictionary: 0.33 of LZ4's bytes on the text dev stream at 33 us a text;
# level 3 took 0.37 at 19 us, level 6 0.32 at 50 us (bench/texts.py, README "Texts").
# Memory is what an index at crawler scale runs out of; CPU grows with the consumers.
LEVEL = 5
# The dictionary is trained once a process has written this many texts of the index, or
# this many bytes of them: judged on later texts, one trained on 1,000 texts packed within
# 0.005 of LZ4's bytes of one trained on 4,000 on the text dev stream (HTML: 0.015), one
# trained on 100 lost 0.03 to 0.04.
SAMPLE_TEXTS = 1000
SAMPLE_BYTES = 8 << 20
SAMPLE_TEXT_BYTES = 128 << 10  # of a long text, the head is what the trainer reads
# At most (below, a quarter of the sample's bytes): just under 512 KiB, the allocation
# Redis makes for it then; a few bytes more and it takes 640 KiB.
DICTIONARY_BYTES = (512 << 10) - 64
# The trainer's segment and d-mer sizes. Left to itself, fastCover picks among a few
# segment sizes by a trial on a quarter of the sample, and on the dev stream it chose 50
# bytes for a sample of 500 texts: a dictionary of 321 KB that packed worse than one of
# 246 KB. 1024 and 8 were as good as its best choice on all three dev streams, every time.
SEGMENT, DMER = 1024, 8
# A sampled text packed larger than this keeps its first form: the sample would hold all
# of it until the dictionary comes, for the few percent a dictionary saves on a long text.
REPACK_BYTES = 256 << 10

Form = Literal["zstd", "lz4"]


class MissingDictionary(ConfigError):
    """A text names a dictionary that its index does not keep: the dictionary key was lost
    or deleted, and the texts packed with it cannot be read."""

    def __init__(self, dictionary: int, have: int) -> None:
        self.dictionary = dictionary
        super().__init__(
            f"a text is packed with zstd dictionary {dictionary}, which the index does not "
            f"keep (it has {have or 'none'})"
        )


def dictionary_id(data: bytes) -> int:
    """The id a dictionary's frames name it by (0: not a zstd dictionary)."""
    if len(data) < 8 or data[:4] != DICTIONARY_MAGIC:
        return 0
    return int.from_bytes(data[4:8], "little")


def frame_dictionary(packed: bytes) -> int | None:
    """The dictionary a packed text names: None for LZ4, 0 for a frame without one."""
    if not packed.startswith(ZSTD_MAGIC):
        return None
    return int(zstandard.get_frame_parameters(packed).dict_id)


def train(texts: Iterable[bytes], level: int = LEVEL) -> bytes | None:
    """A dictionary for texts like these (UTF-8), or None when zstd can make none of them
    (too few, or too short, to learn from)."""
    samples: list[bytes | bytearray | memoryview] = [t[:SAMPLE_TEXT_BYTES] for t in texts]
    size = min(DICTIONARY_BYTES, sum(map(len, samples)) // 4)
    try:
        trained = zstandard.train_dictionary(size, samples, k=SEGMENT, d=DMER, level=level)
    except zstandard.ZstdError:
        return None
    return trained.as_bytes()


class Codec:
    """Packs and unpacks texts: `form` "zstd" (the default), with the index's dictionary
    once `use` gave it one (unless not `with_dictionary`), or "lz4", the form of older
    indexes (for measurements, and for an index that an older neardup must still read).
    It reads every form, with any dictionary `use` gave it."""

    def __init__(self, form: Form = "zstd", level: int = LEVEL, with_dictionary: bool = True):
        if form not in ("zstd", "lz4"):
            raise ConfigError(f"unknown text form {form!r}")
        self.form = form
        self.level = level
        # whether it packs with a dictionary, and so whether its index trains one
        self.with_dictionary = with_dictionary and form == "zstd"
        self.dictionary: bytes | None = None  # the one it packs with
        self.dictionary_id = 0
        self._plain = zstandard.ZstdCompressor(level=level)
        self._packer = self._plain
        self._readers: dict[int, zstandard.ZstdDecompressor] = {0: zstandard.ZstdDecompressor()}
        self._prepared: dict[int, zstandard.ZstdCompressionDict] = {}

    def use(self, data: bytes) -> int:
        """Read the texts that name this dictionary, and pack with it from now on (if
        `with_dictionary`); its id."""
        got = dictionary_id(data)
        if not got:
            raise ConfigError("not a zstd dictionary (no dictionary magic)")
        if got not in self._readers:
            prepared = zstandard.ZstdCompressionDict(data, dict_type=zstandard.DICT_TYPE_FULLDICT)
            self._readers[got] = zstandard.ZstdDecompressor(dict_data=prepared)
            self._prepared[got] = prepared
        if self.with_dictionary and got != self.dictionary_id:
            prepared = self._prepared[got]
            prepared.precompute_compress(level=self.level)  # once, not at every text
            self._packer = zstandard.ZstdCompressor(level=self.level, dict_data=prepared)
            self.dictionary, self.dictionary_id = data, got
        return got

    def pack(self, text: str) -> bytes:
        raw = text.encode("utf-8")
        if self.form == "lz4":
            return lz4.block.compress(raw, store_size=True)  # type: ignore[no-any-return]
        return self._packer.compress(raw)

    def unpack(self, packed: bytes) -> str:
        which = frame_dictionary(packed)
        if which is None:
            raw = lz4.block.decompress(packed)
        else:
            reader = self._readers.get(which)
            if reader is None:
                raise MissingDictionary(which, self.dictionary_id)
            raw = reader.decompress(packed)
        return raw.decode("utf-8")  # type: ignore[no-any-return]

    def missing(self, packed: Iterable[bytes]) -> set[int]:
        """Dictionaries these texts name that this codec has not loaded."""
        return {d for p in packed if (d := frame_dictionary(p)) and d not in self._readers}


@dataclass
class Sample:
    """The texts an index writes before it has a dictionary: what trains it (the head of
    each), and what to pack again with it (the name and the form written of each)."""

    heads: list[bytes] = field(default_factory=list)
    size: int = 0  # bytes of the heads
    written: list[tuple[str, bytes]] = field(default_factory=list)

    def add(self, name: str, text: str, packed: bytes) -> None:
        if self.full:
            return
        head = text.encode("utf-8")[:SAMPLE_TEXT_BYTES]
        self.heads.append(head)
        self.size += len(head)
        if len(packed) <= REPACK_BYTES:
            self.written.append((name, packed))

    @property
    def full(self) -> bool:
        return len(self.heads) >= SAMPLE_TEXTS or self.size >= SAMPLE_BYTES

    def train(self, level: int = LEVEL) -> bytes | None:
        return train(self.heads, level)

    def repacked(self, codec: Codec) -> list[tuple[str, bytes, bytes]]:
        """(name, form written, the same text packed by `codec`) of the sampled texts
        written without a dictionary; the index replaces the first by the second where it
        still holds the first."""
        out = []
        for name, packed in self.written:
            if frame_dictionary(packed) == 0:
                again = codec.pack(codec.unpack(packed))
                if len(again) < len(packed):
                    out.append((name, packed, again))
        return out


def join(sketch: bytes, packed: bytes | None) -> bytes:
    """A sketch and a packed text (None: the text is not kept) as one stored value."""
    return SKETCHED + len(sketch).to_bytes(2, "little") + sketch + (packed or b"")


def split(value: bytes) -> tuple[bytes | None, bytes | None]:
    """(sketch, packed text) of a stored value: a value written before sketches is a
    packed text alone, and a trimmed one a sketch alone."""
    if not value.startswith(SKETCHED):
        return None, value
    end = 6 + int.from_bytes(value[4:6], "little")
    return value[6:end], value[end:] or None
