"""`neardup serve` around the loop: signals, health, metrics, the log and upkeep.

The batch flow and its commit order are the loop's (detector/pipeline.py); a Service only
starts it with the Kafka source and sink, stops it on SIGTERM/SIGINT after the batch in
flight, and reports what it sees to Prometheus, the health endpoints and the log: the
group's assignments, progress every `log_every` seconds, and a last line when it stops.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kafka import TopicPartition

from .clusters import ClusterWatch, Runaway
from .decide import Detector
from .metrics import (
    ASSIGNED,
    BATCH_SECONDS,
    BUCKET_CUTS,
    CONFLICTS,
    DEAD_LETTERS,
    DECISIONS,
    EVICTIONS,
    EVIDENCE,
    HOST_CLUSTER_SHARE,
    LAG,
    LARGEST_CLUSTER,
    PARTITION_LAG,
    RECORDS_IN,
    REFETCHES,
    RETRIES,
    RUNAWAYS,
    TOMBSTONES,
    Health,
)
from .pipeline import Loop, Prepared
from .records import Decision
from .stream.kafka import KafkaSource

log = logging.getLogger("neardup.serve")

# The lag is read from the fetches' high watermarks, but a partition not fetched yet costs
# a request: at most this often.
LAG_EVERY = 5.0
# The clusters' gauges rank the hosts: at most this often.
CLUSTERS_EVERY = 5.0
HOSTS_SHOWN = 10


@dataclass
class Service:
    loop: Loop
    health: Health
    log_every: float = 30.0  # seconds between progress lines; 0: none
    runaway_share: float = 0.2  # ClusterWatch's share; 0: no warning
    watch: _Watch = field(init=False)

    def __post_init__(self) -> None:
        self.watch = _Watch(self.health, self.loop, self.log_every)
        clusters = ClusterWatch(self.runaway_share, report=_runaway)
        self.watch.clusters = clusters
        self.loop.observers = [*self.loop.observers, clusters, self.watch]
        if isinstance(self.loop.source, KafkaSource):
            self.loop.source.membership = self.watch

    def stop(self, signum: int = signal.SIGTERM, *_: Any) -> None:
        """SIGTERM/SIGINT: finish the batch in flight, commit it, then leave the group."""
        if not self.loop.stopping:
            log.info("%s: stopping after the batch in flight", signal.Signals(signum).name)
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
            log.info("stopped: %s; left the group", self.watch.total.summary())


@dataclass
class _Tally:
    """Records decided over a stretch of time, by outcome."""

    started: float = field(default_factory=time.monotonic)
    records: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)

    def add(self, batch: Prepared, decisions: list[Decision]) -> None:
        self.records += batch.size
        self.outcomes.update(d.decision for d in decisions)
        self.outcomes["dead letters"] += len(batch.errors)
        self.outcomes["tombstones"] += len(batch.tombstones)

    def summary(self) -> str:
        seconds = time.monotonic() - self.started
        kinds = ("unique", "duplicate", "dead letters", "tombstones")
        parts = ", ".join(f"{self.outcomes[k]:,} {k}" for k in kinds if self.outcomes[k])
        return (
            f"{self.records:,} records in {seconds:,.0f} s "
            f"({self.records / seconds if seconds else 0:,.0f}/s)" + (f": {parts}" if parts else "")
        )


class _Watch:
    """The loop's observer in serve, and the group's listener: Prometheus metrics, the
    health endpoints, the log."""

    def __init__(self, health: Health, loop: Loop, log_every: float) -> None:
        self.health = health
        self.loop = loop
        self.detector: Detector = loop.detector
        self.source = loop.source
        self.conflicts = self.detector.conflicts
        self.stale = self.detector.stale
        self.revisions = self.detector.revisions
        self.evicted = self.detector.index.evicted
        self.cuts = getattr(self.detector.index, "cuts", 0)
        self.log_every = log_every
        self.total = _Tally()
        self.recent = _Tally()
        self.lags: dict[TopicPartition, int] = {}
        self.lag_read = -float("inf")
        self.clusters = ClusterWatch(0)
        self.clusters_read = -float("inf")
        self.hosts_shown: set[str] = set()

    # the group (KafkaSource's Membership)
    def assigned(self, partitions: list[TopicPartition]) -> None:
        self.health.assigned(len(partitions))
        ASSIGNED.set(len(partitions))
        log.info("assigned %d partition(s): %s", len(partitions), _names(partitions))
        self.lag_read = -float("inf")  # the new partitions' lag, at the next poll

    def revoked(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self.lags.pop(tp, None)
            with contextlib.suppress(KeyError):  # never measured
                PARTITION_LAG.remove(tp.topic, str(tp.partition))
        if partitions:
            log.info("revoked %d partition(s): %s", len(partitions), _names(partitions))

    # the loop's Observer
    def polled(self, records: int) -> None:
        self.health.beat()
        RECORDS_IN.inc(records)
        now = time.monotonic()
        if isinstance(self.source, KafkaSource) and now - self.lag_read >= LAG_EVERY:
            self.lag_read = now
            self.lags = self.source.lags()
            for tp, lag in self.lags.items():
                PARTITION_LAG.labels(tp.topic, str(tp.partition)).set(lag)
            LAG.set(sum(self.lags.values()))
        if self.log_every and now - self.recent.started >= self.log_every:
            self._progress()

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
            EVIDENCE.labels(d.evidence or "").inc()
        REFETCHES.labels("stale").inc(self.detector.stale - self.stale)
        self.stale = self.detector.stale
        REFETCHES.labels("revision").inc(self.detector.revisions - self.revisions)
        self.revisions = self.detector.revisions
        TOMBSTONES.labels(self.loop.tombstones).inc(len(batch.tombstones))
        index = self.detector.index
        EVICTIONS.inc(index.evicted - self.evicted)
        self.evicted = index.evicted
        cuts = getattr(index, "cuts", 0)  # the Redis index's (the memory index cuts none)
        BUCKET_CUTS.inc(cuts - self.cuts)
        self.cuts = cuts
        BATCH_SECONDS.observe(seconds)
        self.total.add(batch, decisions)
        self.recent.add(batch, decisions)
        if time.monotonic() - self.clusters_read >= CLUSTERS_EVERY:
            self._clusters()

    def _clusters(self) -> None:
        self.clusters_read = time.monotonic()
        largest = self.clusters.largest(1)
        LARGEST_CLUSTER.set(largest[0][1] if largest else 0)
        shown = {r.host: r.share for r in self.clusters.host_shares(HOSTS_SHOWN)}
        for host in self.hosts_shown - shown.keys():
            with contextlib.suppress(KeyError):
                HOST_CLUSTER_SHARE.remove(host)
        for host, share in shown.items():
            HOST_CLUSTER_SHARE.labels(host).set(share)
        self.hosts_shown = set(shown)

    def _progress(self) -> None:
        lag = sum(self.lags.values())
        if self.recent.records or lag:
            log.info(
                "progress: %s; lag %s record(s)%s",
                self.recent.summary(),
                f"{lag:,}",
                f" ({_lags(self.lags)})" if lag else "",
            )
        self.recent = _Tally()


def _runaway(runaway: Runaway) -> None:
    RUNAWAYS.inc()
    log.warning("%s", runaway)


def _names(partitions: list[TopicPartition]) -> str:
    """documents-0, documents-3, ...: Kafka's own way of naming partitions."""
    return ", ".join(f"{tp.topic}-{tp.partition}" for tp in partitions) or "none"


def _lags(lags: dict[TopicPartition, int]) -> str:
    return ", ".join(f"{tp.topic}-{tp.partition}: {n:,}" for tp, n in sorted(lags.items()) if n)
