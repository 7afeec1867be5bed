"""The engine's typed settings, and the one place that turns them into engine parts."""

from __future__ import annotations

from dataclasses import dataclass

from .blocks import BlockScheme
from .engine import Engine
from .features import FeatureConfig, Featurizer, IdfTable
from .records import DEFAULT_MAX_BYTES, DEFAULT_MAX_TOKENS
from .verify import DEFAULT_CACHE_BYTES, LiteralCheck

# Chosen by measurement on the dev stream (README, "Choosing the defaults").
DEFAULT_SCHEME = "k6-b8"
DEFAULT_THRESHOLD = 0.8


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
    max_tokens: int = DEFAULT_MAX_TOKENS
    literal_memory: int = DEFAULT_CACHE_BYTES

    def engine(self) -> Engine:
        weights = IdfTable.load(self.idf) if self.idf else None
        config = FeatureConfig(self.features, self.shingle_size, self.cjk_ngram)
        return Engine(Featurizer(config, weights), self.vector_seed, self.literal_shingle)

    def block_scheme(self) -> BlockScheme:
        return BlockScheme.parse(self.scheme)

    def literal(self) -> LiteralCheck:
        return LiteralCheck(self.threshold, self.literal_shingle, cache_bytes=self.literal_memory)
