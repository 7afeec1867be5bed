"""detector.retry: what a retry cures, how often it tries, how long it waits."""

from __future__ import annotations

import time

import pytest

from detector.errors import BackendUnavailable, ConfigError, GaveUp
from detector.retry import ExponentialBackoff, Retry, Startup


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


def test_a_startup_gives_up_at_its_deadline_saying_what_it_waited_for(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Every wait of a start-up counts against one deadline: the second wait has only
    what the first left of it; each retry says what it waits for, and the last error
    names the option that bounds it (GaveUp: exit status 1, not a configuration error)."""
    waited: list[str] = []
    start = Startup(0.6, on_wait=waited.append)
    tries: list[float] = []

    def away() -> None:
        tries.append(time.monotonic())
        raise BackendUnavailable("connection refused")

    started = time.monotonic()
    with pytest.raises(
        GaveUp, match=r"gave up waiting for Redis at x after \d+ s: connection"
    ) as e:
        start.wait("Redis at x", away)
    assert "(--startup-timeout 0.6)" in str(e.value) and e.value.exit_status == 1
    assert 0.55 < time.monotonic() - started < 2.0
    assert len(tries) >= 2 and set(waited) == {"Redis at x"}
    assert "waiting for Redis at x: connection refused; trying again in" in caplog.text

    with pytest.raises(GaveUp):  # nothing is left of the deadline: one try, at once
        start.wait("Kafka", away)
    assert start.wait("Kafka", lambda: "up") == "up"  # a server that answers is not waited for

    with pytest.raises(ConfigError):  # no wait cures a refusal
        Startup(10).wait("Redis", lambda: (_ for _ in ()).throw(ConfigError("wrong password")))
