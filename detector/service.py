"""`neardup serve`: one consumer-group member, from poll to committed offsets.

The order of one batch, written once:
  1. poll a batch from the input topic
  2. parse and validate; bad records go to the dead-letter topic with their reason
  3. fingerprint the batch
  4. decide: one Redis round trip for candidates, the literal pass, then the atomic
     check-and-insert (redone from a conflict if another consumer got there first)
  5. produce the decisions, keyed by id
  6. flush the producer: every decision and dead letter acknowledged by the broker
  7. commit the offsets
A crash anywhere before 7 redelivers the batch; the index remembers every decision by id,
so the redelivered records get the decisions already published.
"""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .backoff import ExponentialBackoff
from .errors import BackendUnavailable
from .metrics import (
    BATCH_SECONDS,
    CONFLICTS,
    DEAD_LETTERS,
    DECISIONS,
    LAG,
    RECORDS_IN,
    RETRIES,
    Health,
)
from .pipeline import Detector, prepare
from .records import DEFAULT_MAX_TOKENS
from .stream.kafka import KafkaSink, KafkaSource

log = logging.getLogger("neardup.serve")
T = TypeVar("T")


@dataclass
class Service:
    detector: Detector
    source: KafkaSource
    sink: KafkaSink
    max_bytes: int
    health: Health
    max_tokens: int = DEFAULT_MAX_TOKENS
    # Upkeep between batches (the retention sweep), at most once per `upkeep_every` s.
    upkeep: Callable[[], object] | None = None
    upkeep_every: float = 1.0
    backoff: ExponentialBackoff = field(default_factory=lambda: ExponentialBackoff(0.2, 10.0))
    stopping: bool = False
    _upkept: float = 0.0

    def stop(self, *_: Any) -> None:
        """SIGTERM/SIGINT: finish the batch in flight, commit it, then leave the group."""
        self.stopping = True

    def run(self) -> None:
        signal.signal(signal.SIGTERM, self.stop)
        signal.signal(signal.SIGINT, self.stop)
        try:
            while not self.stopping:
                self.step()
        finally:
            self.health.beat("stopped")
            self.sink.close()
            self.source.close()

    def step(self) -> None:
        if self.upkeep is not None and time.monotonic() - self._upkept >= self.upkeep_every:
            self._retry("redis", self.upkeep)
            self._upkept = time.monotonic()
        batch, offsets = self.source.poll()  # 1
        self.health.beat()
        if not batch:
            LAG.set(self.source.lag())
            return
        started = time.perf_counter()
        RECORDS_IN.inc(len(batch))
        prepared = prepare(self.detector.engine, batch, self.max_bytes, self.max_tokens)  # 2, 3
        conflicts = self.detector.conflicts
        decisions = self._retry(
            "redis",
            lambda: (
                self.detector.process(  # 4
                    prepared.docs, prepared.prints
                )
                if prepared.docs
                else []
            ),
        )
        CONFLICTS.inc(self.detector.conflicts - conflicts)

        def publish() -> None:
            for error in prepared.errors:
                self.sink.error(error)
            self.sink.decisions(decisions)  # 5
            self.sink.flush()  # 6

        self._retry("kafka", publish)
        self._retry("kafka", lambda: self.source.commit(offsets))  # 7
        for error in prepared.errors:
            DEAD_LETTERS.labels(str(error["reason"])).inc()
        for d in decisions:
            DECISIONS.labels(d.decision).inc()
        BATCH_SECONDS.observe(time.perf_counter() - started)

    def _retry(self, backend: str, action: Callable[[], T]) -> T:
        """Run until it succeeds: a backend outage pauses the consumer, it loses nothing.
        Stopping does not interrupt a batch: its records must be decided and published."""
        failures = 0
        while True:
            try:
                return action()
            except BackendUnavailable as exc:
                RETRIES.labels(backend).inc()
                wait = self.backoff.compute(failures)
                log.warning("%s unavailable (%s); retrying in %.1f s", backend, exc, wait)
                self.health.beat(f"waiting for {backend}")
                time.sleep(wait)
                failures += 1


def wait_for(backend: str, action: Callable[[], T]) -> T:
    """Start-up: wait until a backend answers (a wrong setting fails at once instead)."""
    backoff = ExponentialBackoff(base=0.5, cap=10.0)
    failures = 0
    while True:
        try:
            return action()
        except BackendUnavailable as exc:
            wait = backoff.compute(failures)
            log.warning("%s unavailable (%s); retrying in %.1f s", backend, exc, wait)
            time.sleep(wait)
            failures += 1
