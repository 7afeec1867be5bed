"""Runaway clusters: one document taking in a host's pages.

A decision's cluster is the first document of its duplicate chain (`Decision.cluster`).
When a site's cut keeps its template, or a threshold is set too low, every page of the
site comes out a near copy of the one before, and one cluster takes in the whole host:
a pipeline that drops duplicates then keeps one page of the site. Real duplication seldom
looks so: the copies of a site's pages are spread over many clusters. So the share of a
host's pages in its largest cluster is watched, and a share past `share` over at least
`min_pages` pages is reported once per host and cluster, as a warning to look at the
host's cut (`neardup extract`) and at a pair (`neardup explain`).

What is counted is the documents this process decides: a record delivered again, or
re-fetched unchanged, gets its stored decision again and is not counted twice. The
counters are bounded (`kept` keys each, the heaviest kept when they are pruned), so a
crawl of millions of hosts holds the heavy ones and forgets the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from .extract import host_of
from .records import Decision

SHARE = 0.2
MIN_PAGES = 50
KEPT = 10_000

K = TypeVar("K", bound=Hashable)


class Heavy(Generic[K]):
    """Counts of keys, at most 2 x `kept` of them: past that, the `kept` heaviest stay
    (a lossy count: a key pruned and seen again starts from 0)."""

    def __init__(self, kept: int = KEPT) -> None:
        self.kept = kept
        self.counts: dict[K, int] = {}

    def add(self, key: K) -> int:
        n = self.counts[key] = self.counts.get(key, 0) + 1
        if len(self.counts) > 2 * self.kept:
            heavy = sorted(self.counts.items(), key=lambda kv: kv[1], reverse=True)
            self.counts = dict(heavy[: self.kept])
        return n

    def __getitem__(self, key: K) -> int:
        return self.counts.get(key, 0)

    def top(self, n: int) -> list[tuple[K, int]]:
        return sorted(self.counts.items(), key=lambda kv: kv[1], reverse=True)[:n]


@dataclass(frozen=True)
class Runaway:
    host: str
    cluster: str
    pages: int  # of the host's, in the cluster
    of: int  # the host's pages decided

    @property
    def share(self) -> float:
        return self.pages / self.of

    def __str__(self) -> str:
        return (
            f"cluster {self.cluster!r} holds {self.share:.0%} of the {self.of:,} pages of "
            f"{self.host} decided here: usually the site's template kept in its cut, not "
            f"real duplication (see `neardup extract --id` on its pages and `neardup "
            f"explain` on a pair)"
        )


class ClusterWatch:
    """The counts, and the loop's observer (detector.pipeline.Observer): each batch's
    new decisions are counted, and each runaway is given to `report` as it is found."""

    def __init__(
        self,
        share: float = SHARE,
        min_pages: int = MIN_PAGES,
        kept: int = KEPT,
        report: Callable[[Runaway], object] = lambda _: None,
    ) -> None:
        self.share = share
        self.report = report
        self.since = datetime.now(UTC)
        self.min_pages = min_pages
        self.sizes: Heavy[str] = Heavy(kept)  # cluster -> its documents decided here
        self.hosts: Heavy[str] = Heavy(kept)  # host -> its pages decided here
        self.in_host: Heavy[tuple[str, str]] = Heavy(kept)  # (host, cluster) -> pages
        self.warned: set[tuple[str, str]] = set()
        self.runaways: list[Runaway] = []

    def add(self, decisions: Iterable[Decision], since: datetime | None = None) -> list[Runaway]:
        """Count the decisions made at or after `since` (the others are stored decisions
        given again); the runaways they make, each the first time."""
        new: list[Runaway] = []
        for d in decisions:
            if since is not None and datetime.fromisoformat(d.decided_at) < since:
                continue
            self.sizes.add(d.cluster)
            host = host_of(d.url) if d.url else ""
            if not host:
                continue
            of = self.hosts.add(host)
            pages = self.in_host.add((host, d.cluster))
            runaway = of >= self.min_pages and pages >= self.share * of
            if runaway and (host, d.cluster) not in self.warned:
                self.warned.add((host, d.cluster))
                new.append(Runaway(host, d.cluster, pages, of))
        self.runaways += new
        return new

    # the loop's Observer: what a batch decides is dated after its poll
    def polled(self, records: int) -> None:
        self.since = datetime.now(UTC)

    def retrying(self, step: str, exc: Exception, wait: float) -> None:
        pass

    def done(self, batch: Any, decisions: list[Decision], seconds: float) -> None:
        if self.share:
            for runaway in self.add(decisions, self.since):
                self.report(runaway)

    def largest(self, n: int = 10) -> list[tuple[str, int]]:
        return self.sizes.top(n)

    def host_shares(self, n: int = 10) -> list[Runaway]:
        """The hosts of at least `min_pages` pages whose largest cluster holds the most of
        them, most first."""
        best: dict[str, tuple[str, int]] = {}
        for (host, cluster), pages in self.in_host.counts.items():
            if self.hosts[host] >= self.min_pages and pages > best.get(host, ("", 0))[1]:
                best[host] = (cluster, pages)
        ranked = [Runaway(h, c, p, self.hosts[h]) for h, (c, p) in best.items()]
        return sorted(ranked, key=lambda r: r.share, reverse=True)[:n]
