"""The engine's typed settings, and the one place that turns them into engine parts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from .blocks import BlockScheme
from .decide import Detector
from .engine import Engine
from .errors import ConfigError
from .extract import Extractor, Mode, walker
from .features import FeatureConfig, Featurizer, IdfTable
from .index import Index
from .kernels import Kernels
from .options import default
from .sketch import SketchShape
from .vectors import parse_vector_scheme
from .verify import LiteralCheck

# The defaults are the command line's (detector/options.py, the one table of them), so
# that EngineSettings() decides as `neardup detect` with no options does.
DEFAULT_SCHEME: str = default("scheme")
DEFAULT_THRESHOLD: float = default("threshold")


@dataclass(frozen=True)
class EngineSettings:
    """The engine's options (the table's group "engine"), one field each."""

    features: str = default("features")
    shingle_size: int = default("shingle-size")
    cjk_ngram: int = default("cjk-ngram")
    idf: str | None = default("idf")
    scheme: str = DEFAULT_SCHEME
    threshold: float = DEFAULT_THRESHOLD
    literal_shingle: int = default("literal-shingle")
    max_candidates: int = default("max-candidates")
    short_k: int = default("short-k")
    vector_seed: int = default("vector-seed")
    cosine: float = default("cosine")
    vector_recall: float = default("vector-recall")
    vector_scheme: str = default("vector-scheme")
    vector_storage: str = default("vector-storage")
    html: str = default("html")
    template_urls: int = default("template-urls")
    content_share: float = default("content-share")
    max_bytes: int = default("max-bytes")
    max_tokens: int = default("max-tokens")
    keep_old_versions: bool = default("keep-old-versions")
    literal_memory: int = default("literal-memory")
    text_window: int | None = default("text-window")
    sketch_band: str = default("sketch-band")
    sketch_band_distance: int = default("sketch-band-distance")
    kernels: str = default("kernels")

    def engine(self) -> Engine:
        weights = IdfTable.load(self.idf) if self.idf else None
        config = FeatureConfig(self.features, self.shingle_size, self.cjk_ngram)
        featurizer = Featurizer(config, weights)
        return Engine(
            featurizer, self.vector_seed, self.literal_shingle, self.vector_storage, self.kernels
        )

    def block_scheme(self) -> BlockScheme:
        return BlockScheme.parse(self.scheme)

    def vector_block_scheme(self) -> BlockScheme:
        if not -1 < self.cosine < 1:
            raise ConfigError(f"cosine must be in (-1, 1), not {self.cosine}")
        return parse_vector_scheme(self.vector_scheme, self.cosine, self.vector_recall)

    def literal(self, kernels: Kernels | None = None) -> LiteralCheck:
        """The second pass; `kernels` are its engine's, the numpy reference's if none."""
        # A shingle set (8 bytes a shingle, a shingle at most a token) larger than the
        # cache is dropped as it comes: its document could never be found a duplicate of.
        if self.literal_memory < 8 * self.max_tokens:
            raise ConfigError(
                f"--literal-memory {self.literal_memory} cannot hold the shingle set of a "
                f"record of --max-tokens {self.max_tokens} tokens (8 bytes a token): give at "
                f"least {8 * self.max_tokens}, or lower --max-tokens"
            )
        return LiteralCheck(
            self.threshold,
            self.literal_shingle,
            cache_bytes=self.literal_memory,
            cosine=self.cosine,
            kernels=kernels,
            sketch=SketchShape() if self.text_window is not None else None,
            band_rule=self.sketch_band,
            band_distance=self.sketch_band_distance,
            window=self.text_window,
        )

    def detector(self, index: Index, bind: bool = True) -> Detector:
        """A Detector of these settings over an index (bind=False: the caller binds it
        once its server answers)."""
        scheme = self.block_scheme()
        engine = self.engine()
        return Detector(
            engine,
            index,
            scheme,
            self.literal(engine.kernels),
            self.max_candidates,
            bind=bind,
            keep_previous=self.keep_old_versions,
            extractor=self.extractor(index),
            vector_scheme=self.vector_block_scheme(),
            short_k=self.short_k,
        )

    def extractor(self, index: Index) -> Extractor:
        if self.template_urls < 1 or not 0 < self.content_share <= 1:
            raise ConfigError("template-urls must be >= 1 and content-share in (0, 1]")
        mode = cast(Mode, self.html)
        return Extractor(
            mode,
            index.templates(self.template_urls),
            self.content_share,
            pages=walker(self.kernels),
        )
