"""detector.clusters: the runaway-cluster guard, on decisions and through `neardup detect`."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from detector.cli import main
from detector.clusters import ClusterWatch, Heavy
from detector.records import Decision

from .helpers import template_site

NOW = datetime(2026, 12, 6, tzinfo=UTC)


def page(i: int, cluster: str, host: str = "site.example", when: datetime = NOW) -> Decision:
    partner = None if cluster == f"p{i}" else cluster
    return Decision(f"p{i}", partner, i, url=f"https://{host}/{i}", decided_at=when.isoformat())


def test_a_host_taken_in_by_one_cluster_is_reported_once() -> None:
    watch = ClusterWatch(share=0.2, min_pages=50)
    spread = [page(i, f"p{i - i % 3}") for i in range(100)]  # clusters of three
    assert watch.add(spread) == [] and watch.host_shares(1)[0].share == pytest.approx(0.03)
    other = ClusterWatch(share=0.2, min_pages=50)
    runaway = [page(i, "p0" if i % 3 == 0 else f"p{i}") for i in range(60)]
    got = other.add(runaway)
    assert [(r.host, r.cluster, r.pages, r.of) for r in got] == [("site.example", "p0", 18, 52)]
    assert "35% of the 52 pages of site.example" in str(got[0])
    assert other.add([page(i, "p0") for i in range(60, 90)]) == []  # once a host and cluster
    assert other.host_shares(1)[0].pages == 20 + 30 and other.largest(1) == [("p0", 50)]


def test_decisions_given_again_are_not_counted() -> None:
    watch = ClusterWatch(share=0.2, min_pages=5)
    again = [page(0, "p0", when=NOW - timedelta(seconds=1)) for _ in range(50)]
    assert watch.add(again, since=NOW) == [] and watch.largest() == []
    assert watch.add([page(i, "p0") for i in range(1, 6)], since=NOW) != []


def test_the_counts_keep_the_heaviest_keys() -> None:
    heavy: Heavy[str] = Heavy(kept=10)
    for _ in range(5):
        heavy.add("big")
    for i in range(1000):
        heavy.add(f"k{i}")
    assert len(heavy.counts) <= 20 and heavy["big"] == 5 and heavy.top(1) == [("big", 5)]


def test_detect_warns_of_a_site_cut_to_its_template(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With tags only stripped (--html text), a site's shared menu makes every page a copy
    of the first; cut to their content (the default), they are unique."""
    records = template_site()
    stream = tmp_path / "site.jsonl"
    stream.write_text("".join(json.dumps(r) + "\n" for r in records))
    for html, warned in (("text", True), ("auto", False)):
        out = tmp_path / f"{html}.jsonl"
        assert main(["detect", str(stream), "-o", str(out), "--html", html, "--no-progress"]) == 0
        err = capsys.readouterr().err
        assert ("holds" in err and "site.example" in err) is warned, err
        clusters = {json.loads(line)["cluster"] for line in out.read_text().splitlines()}
        assert (len(clusters) < 10) is warned
