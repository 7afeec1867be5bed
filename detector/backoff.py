"""Retry policy as a strategy object: how long to wait after the n-th failure."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class ExponentialBackoff:
    """Full jitter (a uniform draw up to base * 2**failures, capped), so consumers that
    failed together do not retry in lockstep."""

    base: float = 0.1
    cap: float = 10.0

    def compute(self, failures: int) -> float:
        return random.uniform(0, min(self.cap, self.base * 2 ** min(failures, 32)))
