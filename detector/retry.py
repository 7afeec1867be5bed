"""The one retry strategy: which errors a retry cures, how long to wait, how often to try.

Used at start-up (waiting for Redis and Kafka), in the loop (a backend outage pauses the
consumer, it loses nothing) and for commit conflicts between consumers. redis-py's `Retry`
with a backoff object is the model: the policy is an object, not sleeps in loops.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from .errors import BackendUnavailable, Contention

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

    def call(self, what: str, action: Callable[[], T], on_retry: OnRetry | None = None) -> T:
        failures = 0
        while True:
            try:
                return action()
            except self.retried as exc:
                failures += 1
                if self.attempts is not None and failures >= self.attempts:
                    raise
                wait = self.backoff.compute(failures - 1)
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
