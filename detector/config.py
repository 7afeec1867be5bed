"""Option values from the config file and the environment (NEARDUP_<OPTION>)."""

from __future__ import annotations

import os
import tomllib

from .errors import ConfigError

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


def env_bool(name: str, default: bool) -> bool:
    value = (env(name) or "").strip().lower()
    if not value:
        return default
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name} must be true or false (1/0, yes/no, on/off), not {value!r}")


def env_float(name: str, default: float) -> float:
    value = env(name, str(default))
    try:
        return float(value or default)
    except ValueError:
        raise ConfigError(f"{name} must be a number, not {value!r}") from None
