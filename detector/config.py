"""Typed settings, and the one place that turns them into engine parts.

Every option has a NEARDUP_* environment variable (the option's long name, upper case,
dashes as underscores), so containers and the command line configure the same things.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .blocks import BlockScheme
from .engine import Engine
from .features import FeatureConfig, Featurizer, IdfTable
from .records import DEFAULT_MAX_BYTES
from .verify import LiteralCheck

# Chosen by measurement on the dev stream (README, "Choosing the defaults").
DEFAULT_SCHEME = "k6-b8"
DEFAULT_THRESHOLD = 0.8


def env(name: str, default: str | None = None) -> str | None:
    return os.environ.get(f"NEARDUP_{name.upper().replace('-', '_')}", default)


@dataclass(frozen=True)
class EngineSettings:
    features: str = "words"
    shingle_size: int = 2
    cjk_ngram: int = 2
    idf: str | None = None
    scheme: str = DEFAULT_SCHEME
    threshold: float = DEFAULT_THRESHOLD
    literal_shingle: int = 5
    max_candidates: int = 32
    vector_seed: int = 0
    max_bytes: int = DEFAULT_MAX_BYTES

    def engine(self) -> Engine:
        weights = IdfTable.load(self.idf) if self.idf else None
        config = FeatureConfig(self.features, self.shingle_size, self.cjk_ngram)
        return Engine(Featurizer(config, weights), self.vector_seed, self.literal_shingle)

    def block_scheme(self) -> BlockScheme:
        return BlockScheme.parse(self.scheme)

    def literal(self) -> LiteralCheck:
        return LiteralCheck(self.threshold, self.literal_shingle)
