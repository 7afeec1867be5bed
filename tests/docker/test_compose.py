"""docker-compose.yml for real: Kafka, Redis and three detectors from the project's images,
the bundled sample through them, checked against `neardup detect` under the DESIGN
invariants; the health and metrics endpoints read from inside a detector container; a
detector killed (SIGKILL) while more records arrive, then started again, and no record lost;
at the end `down -v` leaves no container or volume of the project behind."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..helpers import SAMPLE, read_jsonl, write_jsonl
from ..integration.invariants import check_invariants
from ..integration.readers import DecisionReader
from .compose import (
    BOOTSTRAP,
    IMAGES,
    compose,
    containers,
    docker,
    inside,
    logs,
    metrics_port,
    neardup,
    phase,
    volumes,
    wait_healthy,
)

DETECTORS = 3
PARTITIONS = 6
DECIDE_TIMEOUT = 180.0


@pytest.fixture(scope="module")
def project() -> Iterator[None]:
    """The compose project up with three detectors; `down -v` at the end, whatever happened,
    and nothing of it left."""
    missing = [i for i in IMAGES if not docker("image", "ls", "-q", i).strip()]
    assert not missing, f"no image {', '.join(missing)}: run `bash ops/docker.sh all` first"
    compose("down", "-v", "--remove-orphans")  # what a failed run may have left
    try:
        with phase(f"compose up -d --scale detector={DETECTORS} (Kafka and Redis healthy)"):
            compose("up", "-d", "--scale", f"detector={DETECTORS}")
        yield
    finally:
        with phase("compose down -v"):
            compose("down", "-v", "--remove-orphans")
    assert containers(every=True) == [], "containers of the project left after down -v"
    assert volumes() == [], "volumes of the project left after down -v"


def decisions_of(records: list[dict[str, str]], reader: DecisionReader) -> None:
    ids = [r["id"] for r in records]
    missing = reader.wait_for(ids, DECIDE_TIMEOUT, idle=2.0)
    assert not missing, (
        f"{len(missing)} of {len(ids)} records undecided, e.g. {missing[:5]}\n"
        f"{logs(containers('detector', every=True))}"
    )


def two_rounds(
    tmp_path: Path,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], Path, list[dict[str, Any]]]:
    """The sample, a second round of it (the same texts under new ids: exact copies of the
    first round's), the second round's file, and `neardup detect`'s decisions of both."""
    first = read_jsonl(SAMPLE)
    second = [{**r, "id": f"{r['id']}-again"} for r in first]
    again = write_jsonl(tmp_path / "again.jsonl", second)
    both = write_jsonl(tmp_path / "both.jsonl", first + second)
    reference = [
        json.loads(line)
        for line in neardup(["detect", str(both), "-o", "-"]).stdout.splitlines()
        if line.strip()
    ]
    assert len(reference) == len(first) + len(second)
    return first, second, again, reference


def test_three_detectors_decide_like_detect_through_a_kill(project: None, tmp_path: Path) -> None:
    first, second, again, reference = two_rounds(tmp_path)

    with phase(f"produce {len(first)} records to a {PARTITIONS}-partition topic"):
        neardup(["produce", str(SAMPLE), "--topic", "documents", "--partitions", str(PARTITIONS)])
    detectors = containers("detector")
    assert len(detectors) == DETECTORS, detectors
    reader = DecisionReader("decisions", partitions=PARTITIONS, bootstrap=BOOTSTRAP)
    try:
        with phase(f"decide {len(first)} records with {DETECTORS} detectors"):
            decisions_of(first, reader)
        with phase(f"{DETECTORS} detectors healthy (/healthz: in the group, partitions held)"):
            wait_healthy(detectors, 120)

        # Each took its own metrics port on the shared network, and answers on it.
        ports = {c: metrics_port(c) for c in detectors}
        assert len(set(ports.values())) == DETECTORS, ports
        held = 0
        for c in detectors:
            status, body = inside(c, "/healthz")
            report = json.loads(body)
            assert status == 200 and report["ready"], (c, status, report)
            held += report["partitions"]
            status, text = inside(c, "/metrics")
            assert status == 200 and "neardup_decisions_total" in text, (c, status, text[:500])
        assert held == PARTITIONS, f"the detectors hold {held} partitions, not {PARTITIONS}"

        victim = detectors[0]
        with phase("docker kill a detector, produce the second round"):
            docker("kill", victim)
            neardup(["produce", str(again), "--topic", "documents"])
        with phase("docker start it again, every record decided"):
            docker("start", victim)
            decisions_of(first + second, reader)
        with phase("the restarted detector healthy again (its first check since the start)"):
            wait_healthy([victim], 120)
        status, body = inside(victim, "/healthz")
        assert status == 200 and json.loads(body)["ready"], (status, body)

        final = check_invariants(first + second, reader.by_id(), reference)
        # the second round's texts were all seen in the first: each is a duplicate
        assert all(final[r["id"]]["decision"] == "duplicate" for r in second)
    finally:
        reader.close()
