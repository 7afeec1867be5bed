"""Typed settings, and the one place that turns them into engine parts.

Every option has a NEARDUP_* environment variable (the option's long name, upper case,
dashes as underscores), so containers and the command line configure the same things.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass

from .blocks import BlockScheme
from .engine import Engine
from .errors import ConfigError
from .features import FeatureConfig, Featurizer, IdfTable
from .records import DEFAULT_MAX_BYTES
from .verify import LiteralCheck

# Chosen by measurement on the dev stream (README, "Choosing the defaults").
DEFAULT_SCHEME = "k6-b8"
DEFAULT_THRESHOLD = 0.8


_file_settings: dict[str, str] = {}


def load_file(path: str) -> None:
    """Settings from a TOML file (keys are option names); the environment and the
    command line override them."""
    try:
        with open(path, "rb") as f:
            body = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from exc
    section = body.get("neardup", body)
    _file_settings.clear()
    _file_settings.update(
        {k.replace("-", "_"): str(v) for k, v in section.items() if not isinstance(v, dict)}
    )


def env(name: str, default: str | None = None) -> str | None:
    """An option's default: NEARDUP_<NAME> in the environment, else the config file."""
    key = name.replace("-", "_")
    return os.environ.get(f"NEARDUP_{key.upper()}", _file_settings.get(key, default))


def env_int(name: str, default: int) -> int:
    value = env(name, str(default))
    try:
        return int(value or default)
    except ValueError:
        raise ConfigError(f"{name} must be a whole number, not {value!r}") from None


def env_float(name: str, default: float) -> float:
    value = env(name, str(default))
    try:
        return float(value or default)
    except ValueError:
        raise ConfigError(f"{name} must be a number, not {value!r}") from None


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
