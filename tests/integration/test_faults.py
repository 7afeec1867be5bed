"""Faults mid-stream: a consumer killed with SIGKILL and restarted, Redis restarted, the
Kafka broker restarted. Nothing may be lost, and the consumers ride the outages out.

The sample (400 records) is fed in small chunks by a background producer, so that the
fault lands while records are still arriving and being decided. The servers are always
up again at the end of each test, whatever happened: `ops/stack.sh up`, or the containers
started (tests/integration/servers.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ..helpers import SAMPLE, read_jsonl
from .admin import create_topics, wait_for_group
from .invariants import check_invariants
from .processes import Names, Serve, logs, run_detector
from .readers import DecisionReader, Feeder, Producer
from .servers import Servers

PARTITIONS = 6
PAUSED = 6.0  # seconds Redis stops answering: well under serve's 30 s socket timeout


def produce(topic: str, records: list[dict[str, Any]]) -> None:
    with Producer() as producer:
        for r in records:
            producer.send_record(topic, r)
        producer.flush()


@pytest.fixture
def restore_stack(
    names: Names, serve: Callable[..., Serve], decisions: DecisionReader, servers: Servers
) -> Iterator[Servers]:
    """The servers, which the test may restart or pause; torn down before the servers and the
    names: Kafka and Redis are up again."""
    yield servers
    servers.restore()


@pytest.fixture(scope="module")
def sample_reference(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    out = tmp_path_factory.mktemp("detect") / "sample.jsonl"
    run_detector(["detect", str(SAMPLE), "-o", str(out)])
    return read_jsonl(out)


def wait_decided(decisions: DecisionReader, count: int, timeout: float = 90) -> None:
    assert decisions.until(lambda r: len({d["id"] for d in r.records}) >= count, timeout), (
        f"fewer than {count} decisions within {timeout}s"
    )


def test_a_consumer_killed_and_restarted_loses_nothing_and_changes_nothing(
    names: Names,
    serve: Callable[..., Serve],
    decisions: DecisionReader,
    sample_reference: list[dict[str, Any]],
    restore_stack: Servers,
) -> None:
    records = read_jsonl(SAMPLE)
    ids = [r["id"] for r in records]
    create_topics({names.input: PARTITIONS})
    victim, survivor = serve(), serve()
    wait_for_group(names.group, 2, why=lambda: logs([victim, survivor]))

    feeder = Feeder(names.input, records, chunk=16, pause=0.1)
    feeder.start()
    wait_decided(decisions, 60)
    victim.kill()  # SIGKILL: no batch finished, no offset committed, no group left
    decided_before = len({d["id"] for d in decisions.records})
    assert decided_before < len(ids), "the stream was over before the crash"
    time.sleep(1.0)
    restarted = serve()
    feeder.finish()

    # The group waits for the killed member's session to time out before its partitions
    # move: allow for it (kafka-python's default session is 45 s).
    servers = [victim, survivor, restarted]
    missing = decisions.wait_for(ids, timeout=150, idle=2.0)
    assert not missing, f"{len(missing)} records undecided, e.g. {missing[:5]}\n{logs(servers)}"
    assert survivor.alive() and restarted.alive(), logs(servers)
    check_invariants(records, decisions.by_id(), sample_reference)
    for s in (survivor, restarted):
        assert s.stop() == 0, logs(servers)


@pytest.mark.exclusive
@pytest.mark.parametrize("fault", ["restart", "kill", "pause"])
def test_redis_fault_mid_stream(
    fault: str,
    names: Names,
    serve: Callable[..., Serve],
    decisions: DecisionReader,
    sample_reference: list[dict[str, Any]],
    restore_stack: Servers,
) -> None:
    """The consumers ride a Redis fault out and nothing is lost: a restart (SIGTERM, then
    the AOF reloaded), a SIGKILL and a start, or a server that stops answering for a while
    with its connections open (SIGSTOP, or `docker pause`). That the index itself survives a
    restart whole is test_durability's."""
    records = read_jsonl(SAMPLE)
    ids = [r["id"] for r in records]
    create_topics({names.input: PARTITIONS})
    servers = [serve(), serve()]
    wait_for_group(names.group, 2, why=lambda: logs(servers))

    feeder = Feeder(names.input, records[:300], chunk=16, pause=0.2)
    feeder.start()
    wait_decided(decisions, 60)
    if fault == "pause":
        with restore_stack.redis_paused():
            time.sleep(PAUSED)
    elif fault == "kill":
        restore_stack.kill_redis()
    else:
        restore_stack.restart("redis")
    after_fault = len(decisions.records)
    feeder.finish()
    produce(names.input, records[300:])

    missing = decisions.wait_for(ids, timeout=120, idle=1.0)
    assert not missing, f"{len(missing)} records undecided, e.g. {missing[:5]}\n{logs(servers)}"
    assert all(s.alive() for s in servers), logs(servers)
    later = {d["id"] for d in decisions.records[after_fault:]}
    assert set(ids[300:]) <= later, f"records sent after the {fault} were not decided"
    check_invariants(records, decisions.by_id(), sample_reference)
    for s in servers:
        assert s.stop() == 0, logs(servers)


@pytest.mark.exclusive
def test_kafka_restarted_mid_stream(
    names: Names,
    serve: Callable[..., Serve],
    decisions: DecisionReader,
    sample_reference: list[dict[str, Any]],
    restore_stack: Servers,
    tmp_path: Path,
) -> None:
    records = read_jsonl(SAMPLE)
    ids = [r["id"] for r in records]
    create_topics({names.input: PARTITIONS})
    servers = [serve(), serve()]
    wait_for_group(names.group, 2, why=lambda: logs(servers))

    # the feeder's producer buffers what it sends while the broker is away
    feeder = Feeder(names.input, records, chunk=16, pause=0.2)
    feeder.start()
    wait_decided(decisions, 60)
    restore_stack.restart("kafka")
    feeder.finish()

    missing = decisions.wait_for(ids, timeout=150, idle=2.0)
    assert not missing, f"{len(missing)} records undecided, e.g. {missing[:5]}\n{logs(servers)}"
    assert all(s.alive() for s in servers), logs(servers)
    check_invariants(records, decisions.by_id(), sample_reference)
    for s in servers:
        assert s.stop() == 0, logs(servers)
