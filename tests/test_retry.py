"""detector.retry: what a retry cures, how often it tries, how long it waits."""

from __future__ import annotations

import pytest

from detector.errors import BackendUnavailable, ConfigError
from detector.retry import ExponentialBackoff, Retry


def test_retry_retries_only_what_it_names_and_gives_up_after_its_attempts() -> None:
    tries: list[int] = []

    def fails_twice() -> str:
        tries.append(1)
        if len(tries) < 3:
            raise BackendUnavailable("away")
        return "ok"

    waits: list[float] = []
    retry = Retry(ExponentialBackoff(0.0, 0.0), (BackendUnavailable,))
    assert retry.call("x", fails_twice, on_retry=lambda _, __, w: waits.append(w)) == "ok"
    assert len(tries) == 3 and waits == [0.0, 0.0]

    def misconfigured() -> None:
        tries.append(1)
        raise ConfigError("bad password")

    tries.clear()
    with pytest.raises(ConfigError):
        retry.call("x", misconfigured)
    assert len(tries) == 1

    def always_away() -> None:
        tries.append(1)
        raise BackendUnavailable("still away")

    limited = Retry(ExponentialBackoff(0.0, 0.0), (BackendUnavailable,), attempts=4)
    tries.clear()
    with pytest.raises(BackendUnavailable, match="still away"):
        limited.call("x", always_away)
    assert len(tries) == 4


def test_backoff_is_jittered_and_capped() -> None:
    b = ExponentialBackoff(base=0.1, cap=1.0)
    draws = [b.compute(n) for n in range(40) for _ in range(20)]
    assert all(0 <= w <= 1.0 for w in draws)
    assert max(b.compute(0) for _ in range(200)) <= 0.1
    assert len({round(w, 6) for w in draws}) > 100  # not one value for all consumers
