"""docker-compose.replicas.yml for real: three detectors that find the Redis primary through
three Sentinels and publish a batch only once the replica has it (--redis-min-replicas 1).
The sample through them, the primary's container killed (SIGKILL), the Sentinels promote
the replica while a second round arrives, the old primary started again (it rejoins as the
replica, which lets the detectors publish again), and every record decided under the DESIGN
invariants; `down -v` leaves nothing behind."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from ..helpers import SAMPLE
from ..integration.invariants import check_invariants
from ..integration.readers import DecisionReader
from .compose import BOOTSTRAP, REPLICAS, compose, containers, docker, neardup, phase, volumes
from .test_compose import DETECTORS, PARTITIONS, decisions_of, two_rounds

SENTINEL = 26479  # docker-compose.replicas.yml's first Sentinel
PRIMARY, REPLICA = 16381, 16382
FAILOVER_WAIT = 60.0


@pytest.fixture(scope="module")
def project() -> Iterator[None]:
    compose("down", "-v", "--remove-orphans", files=REPLICAS)
    try:
        with phase(f"compose up (with the replica set) -d --scale detector={DETECTORS}"):
            compose("up", "-d", "--scale", f"detector={DETECTORS}", files=REPLICAS)
        yield
    finally:
        with phase("compose down -v (with the replica set)"):
            compose("down", "-v", "--remove-orphans", files=REPLICAS)
    assert containers(every=True) == [], "containers of the project left after down -v"
    assert volumes() == [], "volumes of the project left after down -v"


def primary_port() -> int | None:
    try:
        sentinel = redis.Redis("127.0.0.1", SENTINEL, socket_timeout=2, decode_responses=True)
        return int(sentinel.sentinel_get_master_addr_by_name("neardup")[1])
    except (redis.RedisError, TypeError):
        return None


def test_a_killed_primary_through_the_sentinels_loses_nothing(
    project: None, tmp_path: Path
) -> None:
    first, second, again, reference = two_rounds(tmp_path)
    neardup(["produce", str(SAMPLE), "--topic", "documents", "--partitions", str(PARTITIONS)])
    reader = DecisionReader("decisions", partitions=PARTITIONS, bootstrap=BOOTSTRAP)
    try:
        with phase(f"decide {len(first)} records through the Sentinels"):
            decisions_of(first, reader)
        assert primary_port() == PRIMARY
        [primary] = containers("redis-primary")
        with phase("docker kill the primary; the Sentinels promote the replica"):
            docker("kill", primary)
            deadline = time.monotonic() + FAILOVER_WAIT
            while primary_port() != REPLICA:
                assert time.monotonic() < deadline, "the Sentinels did not promote the replica"
                time.sleep(0.2)
        with phase("produce the second round, start the old primary, every record decided"):
            neardup(["produce", str(again), "--topic", "documents"])
            docker("start", primary)
            decisions_of(first + second, reader)
        final = check_invariants(first + second, reader.by_id(), reference)
        assert all(final[r["id"]]["decision"] == "duplicate" for r in second)
        assert primary_port() == REPLICA  # the old primary came back as its replica
    finally:
        reader.close()
