"""`neardup serve` around the loop: signals, health, metrics and upkeep.

The batch flow and its commit order are the loop's (detector/pipeline.py); a Service only
starts it with the Kafka source and sink, stops it on SIGTERM/SIGINT after the batch in
flight, and reports what it sees to Prometheus and the health endpoint.
"""

from __future__ import annotations

import logging
import signal
from dataclasses import dataclass
from typing import Any

from .decide import Detector
from .metrics import (
    BATCH_SECONDS,
    CONFLICTS,
    DEAD_LETTERS,
    DECISIONS,
    LAG,
    RECORDS_IN,
    REFETCHES,
    RETRIES,
    TOMBSTONES,
    Health,
)
from .pipeline import Loop, Prepared
from .records import Decision
from .stream.kafka import KafkaSource

log = logging.getLogger("neardup.serve")


@dataclass
class Service:
    loop: Loop
    health: Health

    def __post_init__(self) -> None:
        self.loop.observers = [*self.loop.observers, _Watch(self.health, self.loop)]

    def stop(self, *_: Any) -> None:
        """SIGTERM/SIGINT: finish the batch in flight, commit it, then leave the group."""
        self.loop.stopping = True

    def run(self) -> None:
        signal.signal(signal.SIGTERM, self.stop)
        signal.signal(signal.SIGINT, self.stop)
        try:
            self.loop.run()
        finally:
            self.health.beat("stopped")
            self.loop.sink.close()
            self.loop.source.close()


class _Watch:
    """The loop's observer in serve: Prometheus metrics, the health beat, the log."""

    def __init__(self, health: Health, loop: Loop) -> None:
        self.health = health
        self.loop = loop
        self.detector: Detector = loop.detector
        self.source = loop.source
        self.conflicts = self.detector.conflicts
        self.stale = self.detector.stale
        self.revisions = self.detector.revisions

    def polled(self, records: int) -> None:
        self.health.beat()
        RECORDS_IN.inc(records)
        if not records and isinstance(self.source, KafkaSource):
            LAG.set(self.source.lag())

    def retrying(self, step: str, exc: Exception, wait: float) -> None:
        RETRIES.labels(step).inc()
        log.warning("%s: %s; retrying in %.1f s", step, exc, wait)
        self.health.beat(f"waiting ({step})")

    def done(self, batch: Prepared, decisions: list[Decision], seconds: float) -> None:
        CONFLICTS.inc(self.detector.conflicts - self.conflicts)
        self.conflicts = self.detector.conflicts
        for error in batch.errors:
            DEAD_LETTERS.labels(str(error["reason"])).inc()
        for d in decisions:
            DECISIONS.labels(d.decision).inc()
        REFETCHES.labels("stale").inc(self.detector.stale - self.stale)
        self.stale = self.detector.stale
        REFETCHES.labels("revision").inc(self.detector.revisions - self.revisions)
        self.revisions = self.detector.revisions
        TOMBSTONES.labels(self.loop.tombstones).inc(len(batch.tombstones))
        BATCH_SECONDS.observe(seconds)
