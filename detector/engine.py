"""The engine: a batch of documents -> normalized texts, fingerprints and digests.

Pure and I/O free. It owns the settings that make a fingerprint what it is (features,
weights, vector seed), so `version` names exactly what an index may be mixed with.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from . import kernels as _kernels
from .features import Featurizer
from .normalize import non_starters, strip_markup
from .records import Document
from .simhash import hyperplanes, simhash_vectors
from .tables import UNICODE_VERSION
from .tokenize import char_classes
from .vectors import check_storage, digest, pack_rows, space, units

TEXT_SPACE = "t"


@dataclass
class Print:
    """What the pipeline needs of one document to decide it."""

    space: str
    fingerprint: int
    digest: str
    text: str  # normalized ("" for a vector: the vector is what is compared)
    shingles: np.ndarray  # for the literal pass: sorted distinct word-shingle hashes
    vector: np.ndarray | None = None  # a record's embedding, float32 of length 1
    packed: bytes = b""  # the vector's stored form (vectors.pack)
    stored: np.ndarray | None = None  # and that form read back (vectors.unpack)


class Engine:
    def __init__(
        self,
        featurizer: Featurizer | None = None,
        vector_seed: int = 0,
        literal_shingle: int = 5,
        vector_storage: str = "int8",
        kernels: str = "auto",
    ) -> None:
        self.featurizer = featurizer or Featurizer()
        self.vector_seed = vector_seed
        self.literal_shingle = literal_shingle
        self.vector_storage = vector_storage
        check_storage(vector_storage)  # refuse an unknown form now, not at the first vector
        # The Unicode version: an interpreter of another one tokenizes some texts
        # otherwise, and must not mix its fingerprints into the same index.
        self.version = f"{self.featurizer.version}+u{UNICODE_VERSION}+hyperplanes-s{vector_seed}"
        char_classes()  # read the tables now, so that forked workers inherit them
        non_starters()
        self.kernels = _kernels.make(kernels, self.featurizer, literal_shingle)

    # Planes are per dimension; a few dimensions are kept, not one for every dimension a
    # stream of hostile records may name (up to MAX_EMBEDDING_DIM: 8 MB each).
    @lru_cache(maxsize=8)  # noqa: B019 - one engine lives for the whole run
    def _planes(self, dim: int) -> np.ndarray:
        return hyperplanes(dim, self.vector_seed)

    def fingerprint(self, docs: list[Document], texts: list[str] | None = None) -> list[Print]:
        """Prints of a batch; `texts` are the documents' normalized texts, when the caller
        has them already. A record with an embedding is decided on its vector alone."""
        if texts is None:
            texts = self.kernels.fold([strip_markup(d.text) for d in docs])
        plain: list[int] = []
        vectors: dict[int, list[int]] = {}  # dimension -> positions of its records
        for i, doc in enumerate(docs):
            if doc.embedding is None:
                plain.append(i)
            else:
                vectors.setdefault(len(doc.embedding), []).append(i)
        prints: list[Print] = [_NO_PRINT] * len(docs)
        if plain:
            for i, p in zip(plain, self._text_prints([texts[i] for i in plain]), strict=True):
                prints[i] = p
        for dim, rows in vectors.items():
            unit = units(np.array([docs[i].embedding for i in rows]))
            fps = simhash_vectors(unit, self._planes(dim)).tolist()
            packed, stored = pack_rows(unit, self.vector_storage)
            for n, i in enumerate(rows):
                v, s = unit[n], stored[n]
                prints[i] = Print(space(dim), fps[n], digest(v), "", _NONE, v, packed[n], s)
        return prints

    def _text_prints(self, texts: list[str]) -> list[Print]:
        fps, digests, shingles = self.kernels.prints(texts)
        return [
            Print(TEXT_SPACE, fp, dg, text, sh)
            for fp, dg, text, sh in zip(fps, digests, texts, shingles, strict=True)
        ]


_NONE = np.zeros(0, np.uint64)  # a vector's shingles: it has none
_NO_PRINT = Print("", 0, "", "", _NONE)
