"""The one retry strategy: which errors a retry cures, how long to wait, how often to try.

Used at start-up (waiting for Redis and Kafka), in the loop (a backend outage pauses the
consumer, it loses nothing) and for commit conflicts between consumers. redis-py's `Retry`
with a backoff object is the model: the policy is an object, not sleeps in loops.
"""

from __future__ import annotations

import contextlib
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from .errors import BackendUnavailable, Contention, GaveUp

T = TypeVar("T")
OUTAGES: tuple[type[Exception], ...] = (BackendUnavailable,)  # a server away: wait for it
CONTENTION: tuple[type[Exception], ...] = (Contention,)  # another consumer was first: redo

log = logging.getLogger("neardup.retry")


@dataclass(frozen=True)
class ExponentialBackoff:
    """Full jitter (a uniform draw up to base * 2**failures, capped), so consumers that
    failed together do not retry in lockstep."""

    base: float = 0.1
    cap: float = 10.0

    def compute(self, failures: int) -> float:
        return random.uniform(0, min(self.cap, self.base * 2 ** min(failures, 32)))


OnRetry = Callable[[str, Exception, float], None]  # what, the error, seconds to wait


@dataclass(frozen=True)
class Retry:
    """Run an action until it succeeds, waiting `backoff` after each failure of the
    `retried` classes; after `attempts` tries (None: no limit) the last error is raised."""

    backoff: ExponentialBackoff
    retried: tuple[type[Exception], ...] = OUTAGES
    attempts: int | None = None

    def call(
        self,
        what: str,
        action: Callable[[], T],
        on_retry: OnRetry | None = None,
        deadline: float | None = None,
    ) -> T:
        """`deadline` (time.monotonic()): give up rather than wait past it, with a
        BackendUnavailable that says what was waited for, and how long."""
        failures = 0
        started = time.monotonic()
        while True:
            try:
                return action()
            except self.retried as exc:
                failures += 1
                if self.attempts is not None and failures >= self.attempts:
                    raise
                wait = self.backoff.compute(failures - 1)
                if deadline is not None and time.monotonic() + wait > deadline:
                    if time.monotonic() < deadline:
                        time.sleep(max(0.0, deadline - time.monotonic()))
                        with contextlib.suppress(*self.retried):
                            return action()  # one last try at the deadline
                    waited = time.monotonic() - started
                    raise GaveUp(f"gave up waiting for {what} after {waited:.0f} s: {exc}") from exc
                (on_retry or log_retry)(what, exc, wait)
                time.sleep(wait)


def log_retry(what: str, exc: Exception, wait: float) -> None:
    log.warning("%s: %s; retrying in %.1f s", what, exc, wait)


# Waiting for a server at start-up: a wrong setting fails at once instead (ConfigError).
STARTUP = Retry(ExponentialBackoff(base=0.5, cap=10.0), OUTAGES + CONTENTION)
# The loop: an outage pauses the consumer for as long as it lasts; a batch whose conflicts
# outlasted CONFLICTS is decided again whole.
LOOP = Retry(ExponentialBackoff(base=0.2, cap=10.0), OUTAGES + CONTENTION)
# A commit that met another consumer's documents: decide the rest again, at once or nearly.
CONFLICTS = Retry(ExponentialBackoff(base=0.001, cap=0.1), CONTENTION, attempts=20)


class Startup:
    """A command's start-up: every wait for a server (or a topic) counts against one
    deadline, `timeout` seconds from now (--startup-timeout), and each says what it waits
    for. `on_wait` hears of each wait (serve's health endpoints)."""

    def __init__(self, timeout: float, on_wait: Callable[[str], object] = lambda what: None):
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout
        self.on_wait = on_wait

    def wait(self, what: str, action: Callable[[], T]) -> T:
        try:
            return STARTUP.call(what, action, self._waiting, self.deadline)
        except GaveUp as exc:
            raise GaveUp(f"{exc} (--startup-timeout {self.timeout:g})") from exc.__cause__

    def _waiting(self, what: str, exc: Exception, wait: float) -> None:
        self.on_wait(what)
        left = max(0.0, self.deadline - time.monotonic())
        log.warning(
            "waiting for %s: %s; trying again in %.1f s (giving up in %.0f s)",
            what,
            exc,
            wait,
            left,
        )
