"""Replicas: how many a batch's writes must reach before its decisions are published
(--redis-min-replicas), and what the last confirmation found.

Redis replicates asynchronously: a primary that dies can take its last writes with it, and
a promoted replica then no longer knows a commit whose decisions were published. A
redelivered record could be decided differently, or a near-duplicate of it be published
as unique too. WAIT closes that window: it blocks until the replicas have acknowledged
every write of its connection so far (by the primary's replication offset, so it covers
the writes of every consumer before it, on that primary). Store.confirm writes a small
key on each primary and sends WAIT on the same connection, in one round trip: a batch
whose commit wrote nothing (a redelivery) still confirms what its decisions rest on.

WAIT does not make a write synchronous: a write that was not confirmed stays on the
primary, and may or may not survive a failover. Nothing is published on it; the batch is
decided again (retry.LOOP), and gets the same decisions from whichever state survived.
On a Cluster each primary is confirmed on its own connection, and the shards' writes are
confirmed before the coordinator marks them applied (index.py, _apply): a shard that fails
over cannot lose entries the coordinator's log no longer holds.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import BackendUnavailable, ConfigError

# The barrier's key expires: it holds nothing anyone reads, and an idle index keeps no trace.
BARRIER_TTL_MS = 60_000


class Unconfirmed(BackendUnavailable):
    """Writes that fewer replicas acknowledged than --redis-min-replicas asks, within
    --redis-wait-timeout: a replica is away or behind. Retried like an outage."""


@dataclass(frozen=True)
class Replication:
    """`min_replicas` replicas must acknowledge a batch's writes within `timeout`
    seconds before it is published; 0: published on the primary's word alone."""

    min_replicas: int = 0
    timeout: float = 1.0

    def __post_init__(self) -> None:
        if self.min_replicas < 0:
            raise ConfigError(f"--redis-min-replicas must be 0 or more, not {self.min_replicas}")
        if not self.timeout > 0:
            raise ConfigError(f"--redis-wait-timeout must be more than 0, not {self.timeout}")

    @property
    def timeout_ms(self) -> int:
        return max(1, round(self.timeout * 1000))

    def wait(self) -> tuple[int, int] | None:
        """WAIT's arguments, or None when nothing is waited for."""
        return (self.min_replicas, self.timeout_ms) if self.min_replicas else None


@dataclass(frozen=True)
class Waited:
    """One confirmation: the fewest replicas that acknowledged, over the primaries it
    asked, and the seconds its round trip took."""

    confirmed: int
    seconds: float
