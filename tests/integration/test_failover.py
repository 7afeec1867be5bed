"""Losing the Redis primary while three consumers serve a steady stream: the primary is
killed with SIGKILL, the Sentinels promote its replica, and the old primary comes back
as the new primary's replica; twice. On the Redis Cluster: a replica takes over its
primary by CLUSTER FAILOVER, then another primary is killed and its replica promoted.
Then the DESIGN invariants on what was published.

With --redis-min-replicas 1 every batch's writes are on the replica before its decisions
are published, so a failover takes back nothing that was published: the invariants must
hold. With 0 a failover may take back the newest commits: the test reports what it saw
(a loss needs the kill to land between a commit and its replication, which a local
replica rarely lets happen), and asserts only that every record got a decision.

The servers are ops/stack.sh's replica set: a primary, its replica and three Sentinels
(NEARDUP_STACK_REDIS_SENTINEL, _REDIS_SERVICE, printed by `ops/stack.sh env`), or the same
set as containers (tests/integration/servers.py), killed with `docker kill`.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from ..helpers import SAMPLE, read_jsonl, until
from .admin import create_topics, drop_index, wait_for_group
from .endpoints import E, cluster_client
from .invariants import check_invariants
from .processes import Names, Serve, logs, run_detector
from .readers import DecisionReader, Feeder
from .servers import Servers

# The Sentinel tests kill the replica set's nodes, which only they use: they run beside the
# others, one at a time. The Cluster's failover kills nodes every test of the Cluster uses.
REPLICA_SET = pytest.mark.exclusive("replica set")

PARTITIONS = 6
CONSUMERS = 3
RECORDS = 300
SENTINELS, SERVICE = E.sentinels, E.service or "neardup"
FAILOVER_WAIT = 30.0  # seconds for a promotion, or for a node to rejoin as a replica


def sentinels() -> list[redis.Redis]:
    if not SENTINELS:
        pytest.fail(
            "NEARDUP_STACK_REDIS_SENTINEL is unset: `ops/stack.sh up` starts the replica set "
            'and `eval "$(ops/stack.sh env)"` names its Sentinels',
            pytrace=False,
        )
    out = []
    for address in SENTINELS.split(","):
        host, _, port = address.rpartition(":")
        out.append(redis.Redis(host, int(port), socket_timeout=5, decode_responses=True))
    return out


def primary_address() -> tuple[str, int]:
    """The primary, as the Sentinels' majority names it."""
    seen: dict[tuple[str, int], int] = {}
    for s in sentinels():
        with contextlib.suppress(redis.RedisError):
            host, port = s.sentinel_get_master_addr_by_name(SERVICE)
            seen[(host, int(port))] = seen.get((host, int(port)), 0) + 1
    assert seen, "no Sentinel answers"
    return max(seen, key=lambda a: seen[a])


def node(address: tuple[str, int]) -> redis.Redis:
    return redis.Redis(address[0], address[1], socket_timeout=5, decode_responses=True)


def replica_in_sync(primary: tuple[str, int]) -> bool:
    """The primary has a replica online, and every Sentinel knows it as its replica: a
    failover could promote it now."""
    try:
        info = node(primary).info("replication")
        if info.get("role") != "master" or int(info.get("connected_slaves", 0)) < 1:
            return False
        for s in sentinels():
            master = s.sentinel_master(SERVICE)
            if (master["ip"], int(master["port"])) != primary:
                return False
            replicas = s.sentinel_slaves(SERVICE)
            if not any(
                r["flags"] == "slave" and r.get("master-link-status") == "ok" for r in replicas
            ):
                return False
        return True
    except (redis.RedisError, KeyError):
        return False


def fail_over(servers: Servers) -> tuple[str, int]:
    """SIGKILL the primary, wait for the Sentinels to promote the replica, start the old
    primary again (`ops/stack.sh up`, or the container started: the node comes back on its
    own configuration and the Sentinels make it a replica) and wait until it is in sync.
    Returns the new primary."""
    old = primary_address()
    servers.kill_node(old[1])
    until(lambda: primary_address() != old, FAILOVER_WAIT, "the Sentinels to promote the replica")
    new = primary_address()
    servers.restore()
    until(lambda: replica_in_sync(new), FAILOVER_WAIT, f"{old} to rejoin as {new}'s replica")
    return new


@pytest.fixture(scope="module")
def sample_reference(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    out = tmp_path_factory.mktemp("detect") / "sample.jsonl"
    run_detector(["detect", str(SAMPLE), "-o", str(out)])
    return read_jsonl(out)


@pytest.fixture
def replica_set(names: Names, servers: Servers) -> Iterator[dict[str, str]]:
    """serve's environment for the replica set; at the end the set is whole again (both
    nodes up) and the test's index is dropped from its primary."""
    sentinels()  # fails the test at once without them
    until(lambda: replica_in_sync(primary_address()), FAILOVER_WAIT, "the replica set")
    yield {"NEARDUP_REDIS_SENTINEL": SENTINELS, "NEARDUP_REDIS_SERVICE": SERVICE}
    servers.restore()
    primary = primary_address()
    until(lambda: replica_in_sync(primary), FAILOVER_WAIT, "the replica set, after the test")
    drop_index(node(primary), names.index)


def serve_through_failovers(
    servers_: Servers,
    names: Names,
    serve: Callable[..., Serve],
    decisions: DecisionReader,
    env: dict[str, str],
    min_replicas: int,
) -> tuple[list[dict[str, Any]], list[Serve], list[tuple[str, int]]]:
    """Three consumers, a steady stream, two failovers while it flows; every record decided."""
    records = read_jsonl(SAMPLE)[:RECORDS]
    create_topics({names.input: PARTITIONS})
    extra = {**env, "NEARDUP_REDIS_MIN_REPLICAS": str(min_replicas)}
    extra["NEARDUP_REDIS_WAIT_TIMEOUT"] = "0.5"
    servers = [serve(env=extra) for _ in range(CONSUMERS)]
    wait_for_group(names.group, CONSUMERS, why=lambda: logs(servers))

    feeder = Feeder(names.input, records, chunk=10, pause=0.3)  # ~10 s of stream
    feeder.start()
    primaries = [primary_address()]
    for round_ in (1, 2):
        # each failover lands while records are being decided
        goal = len({d["id"] for d in decisions.records}) + 20
        assert decisions.until(lambda r, goal=goal: len({d["id"] for d in r.records}) > goal, 60), (
            f"no progress before failover {round_}\n{logs(servers)}"
        )
        primaries.append(fail_over(servers_))
    feeder.finish()
    ids = [r["id"] for r in records]
    missing = decisions.wait_for(ids, timeout=90, idle=2.0)
    assert not missing, f"{len(missing)} records undecided, e.g. {missing[:5]}\n{logs(servers)}"
    assert all(s.alive() for s in servers), logs(servers)
    return records, servers, primaries


@REPLICA_SET
def test_sentinel_failovers_take_back_nothing_published(
    names: Names,
    serve: Callable[..., Serve],
    decisions: DecisionReader,
    sample_reference: list[dict[str, Any]],
    replica_set: dict[str, str],
    servers: Servers,
) -> None:
    records, consumers, primaries = serve_through_failovers(
        servers, names, serve, decisions, replica_set, min_replicas=1
    )
    assert primaries[0] != primaries[1] != primaries[2], primaries
    check_invariants(records, decisions.by_id(), sample_reference[:RECORDS])
    # the consumers met the failovers (a commit refused or unconfirmed, then retried)
    assert any("retrying" in s.log(100_000) for s in consumers), logs(consumers)
    for s in consumers:
        assert s.stop() == 0, logs(consumers)


@REPLICA_SET
def test_sentinel_failovers_without_replicas_confirmed(
    names: Names,
    serve: Callable[..., Serve],
    decisions: DecisionReader,
    sample_reference: list[dict[str, Any]],
    replica_set: dict[str, str],
    servers: Servers,
) -> None:
    """--redis-min-replicas 0: what the failovers took back, if anything, is reported."""
    records, consumers, _ = serve_through_failovers(
        servers, names, serve, decisions, replica_set, min_replicas=0
    )
    published = decisions.by_id()
    contradicted = [i for i, ds in published.items() if len({_verdict(d) for d in ds}) > 1]
    try:
        check_invariants(records, published, sample_reference[:RECORDS])
        broken = "none"
    except AssertionError as exc:
        broken = str(exc).splitlines()[0]
    print(
        f"\n[failover, --redis-min-replicas 0] {len(records)} records, "
        f"{sum(map(len, published.values()))} decisions published, "
        f"{len(contradicted)} ids with contradictory decisions; invariant broken: {broken}"
    )
    for s in consumers:
        assert s.stop() == 0, logs(consumers)


def _verdict(d: dict[str, Any]) -> tuple[Any, ...]:
    return (d["decision"], d["duplicate_of"])


# ------------------------------------------------------------------ the Redis Cluster


def cluster_roles() -> dict[int, tuple[bool, int | None, bool]]:
    """Each live node of the Cluster, as a live node sees it: port -> (primary, its
    primary's port for a replica, failing)."""
    ports = [int(a.rpartition(":")[2]) for a in node_ports()]
    for port in ports:
        with contextlib.suppress(redis.RedisError):
            nodes = node(("127.0.0.1", port)).execute_command("CLUSTER NODES")
            by_id = {
                v["node_id"]: int(k.split("@")[0].rpartition(":")[2]) for k, v in nodes.items()
            }
            return {
                int(k.split("@")[0].rpartition(":")[2]): (
                    "master" in v["flags"],
                    by_id.get(v["master_id"]),
                    "fail" in v["flags"],
                )
                for k, v in nodes.items()
            }
    raise AssertionError("no node of the Cluster answers")


@functools.cache
def node_ports() -> list[str]:
    """host:port of every node, from the one the endpoints name (before anything fails)."""
    first = E.cluster_url.rpartition("//")[2].partition("/")[0]
    host, _, port = first.rpartition(":")
    return list(node((host, int(port))).execute_command("CLUSTER NODES"))


def cluster_whole() -> bool:
    """cluster_state:ok on every node, and each primary has a replica in sync."""
    try:
        roles = cluster_roles()
        for port, (primary, _, failing) in roles.items():
            if failing or node(("127.0.0.1", port)).cluster("info")["cluster_state"] != "ok":
                return False
            if (
                not primary
                and node(("127.0.0.1", port)).info("replication").get("master_link_status") != "up"
            ):
                return False
        primaries = [p for p, (is_primary, _, _) in roles.items() if is_primary]
        return len(primaries) == 3 and all(
            any(of == p for _, of, _ in roles.values()) for p in primaries
        )
    except (redis.RedisError, KeyError):
        return False


@pytest.mark.exclusive
def test_cluster_failovers_take_back_nothing_published(
    names: Names,
    serve: Callable[..., Serve],
    decisions: DecisionReader,
    sample_reference: list[dict[str, Any]],
    servers: Servers,
) -> None:
    """--redis-min-replicas 1 on the Cluster: a replica takes over by CLUSTER FAILOVER (no
    write lost), then a primary is killed and its replica promoted (what it had not sent
    is lost, but nothing published was not on the replica)."""
    until(cluster_whole, FAILOVER_WAIT, "the Cluster, each primary with a replica")
    records = read_jsonl(SAMPLE)[:RECORDS]
    create_topics({names.input: PARTITIONS})
    env = {
        "NEARDUP_REDIS_URL": E.cluster_url,
        "NEARDUP_REDIS_CLUSTER": "1",
        "NEARDUP_REDIS_MIN_REPLICAS": "1",
        "NEARDUP_REDIS_WAIT_TIMEOUT": "0.5",
    }
    consumers = [serve(env=env) for _ in range(CONSUMERS)]
    try:
        wait_for_group(names.group, CONSUMERS, why=lambda: logs(consumers))
        feeder = Feeder(names.input, records, chunk=10, pause=0.3)
        feeder.start()

        def progress(round_: int) -> None:
            goal = len({d["id"] for d in decisions.records}) + 20
            assert decisions.until(lambda r: len({d["id"] for d in r.records}) > goal, 60), (
                f"no progress before failover {round_}\n{logs(consumers)}"
            )

        progress(1)
        roles = cluster_roles()
        replica, primary = next((p, of) for p, (is_p, of, _) in roles.items() if not is_p)
        assert primary is not None
        node(("127.0.0.1", replica)).execute_command("CLUSTER FAILOVER")
        until(
            lambda: cluster_roles()[replica][0] and not cluster_roles()[primary][0],
            FAILOVER_WAIT,
            f"{replica} to take over from {primary}",
        )
        progress(2)
        roles = cluster_roles()
        victim = next(p for p, (is_p, _, _) in roles.items() if is_p and p != replica)
        heir = next(p for p, (_, of, _) in roles.items() if of == victim)
        servers.kill_node(victim)
        until(lambda: cluster_roles()[heir][0], FAILOVER_WAIT, f"{heir} to take over {victim}")
        servers.restore()
        until(cluster_whole, FAILOVER_WAIT, f"{victim} back as a replica")
        feeder.finish()

        ids = [r["id"] for r in records]
        missing = decisions.wait_for(ids, timeout=90, idle=2.0)
        assert not missing, f"{len(missing)} undecided, e.g. {missing[:5]}\n{logs(consumers)}"
        assert all(s.alive() for s in consumers), logs(consumers)
        check_invariants(records, decisions.by_id(), sample_reference[:RECORDS])
        for s in consumers:
            assert s.stop() == 0, logs(consumers)
    finally:
        servers.restore()
        until(cluster_whole, FAILOVER_WAIT, "the Cluster whole again")
        client = cluster_client()
        drop_index(client, names.index)
        client.close()
