"""The index's round trips (index/redis/resp.py: one RESP buffer, packed natively) against
redis-py's pipeline on the real server and cluster: the same replies, the same error, and
a connection that stays in step after an error reply; and a WAIT that its primary breaks
off is an outage to retry."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster

from detector.errors import BackendUnavailable
from detector.index.redis import resp
from detector.index.redis.cluster import Batch
from detector.index.redis.keys import Layout
from detector.index.redis.replication import Replication
from detector.index.redis.store import Store

from ..helpers import until
from .endpoints import REDIS_CLUSTER_URL, REDIS_URL


def commands(tag: str) -> list[tuple[Any, ...]]:
    k = f"{{{tag}}}"
    return [
        ("SET", f"{k}:s", b"v\x00\xff", "NX"),
        ("SET", f"{k}:s", "again", "NX"),
        ("GET", f"{k}:s"),
        ("HSET", f"{k}:h", "a", 1, "b", 2.5),
        ("HSETNX", f"{k}:h", "a", "x"),
        ("HMGET", f"{k}:h", "a", "b", "missing"),
        ("ZADD", f"{k}:z", 3, "m"),
        ("EVAL", "return {KEYS[1], ARGV[1], tonumber(ARGV[2]) + 1}", 1, f"{k}:s", "é", 41),
        ("EXISTS", f"{k}:s", f"{k}:none"),
    ]


def pipeline(client: redis.Redis, cmds: list[tuple[Any, ...]]) -> list[Any]:
    pipe = client.pipeline(transaction=False)
    for c in cmds:
        pipe.execute_command(*c)
    return list(pipe.execute())


@pytest.fixture(params=["native", "reference"])
def packer(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways a round trip goes: the native packer, and redis-py's pipeline."""
    assert resp.PACK is not None, "the native packer was not built"
    if request.param == "reference":
        monkeypatch.setattr(resp, "PACK", None)
    return str(request.param)


def test_replies_are_a_pipelines(rclient: redis.Redis, packer: str) -> None:
    a, b = uuid.uuid4().hex, uuid.uuid4().hex
    try:
        got = resp.execute(rclient, commands(a))
        assert got[7][0] == f"{{{a}}}:s".encode()  # the script's own key: the rest is alike
        got[7][0] = f"{{{b}}}:s".encode()
        assert got == pipeline(rclient, commands(b))
        assert got[0] is True and got[1] is None and got[5] == [b"1", b"2.5", None]
    finally:
        rclient.delete(*(f"{{{t}}}:{s}" for t in (a, b) for s in "shz"))


def test_an_error_reply_is_raised_after_every_reply_is_read(
    rclient: redis.Redis, packer: str
) -> None:
    tag = uuid.uuid4().hex
    k = f"{{{tag}}}"
    rclient.set(f"{k}:s", "text")
    cmds = [("SET", f"{k}:t", "1"), ("INCR", f"{k}:s"), ("SET", f"{k}:u", "2")]
    try:
        with pytest.raises(redis.ResponseError, match="not an integer"):
            resp.execute(rclient, cmds)
        # both writes around the error went in, and the connection reads its own replies
        assert resp.execute(rclient, [("MGET", f"{k}:t", f"{k}:u")]) == [[b"1", b"2"]]
    finally:
        rclient.delete(f"{k}:s", f"{k}:t", f"{k}:u")


def test_a_batch_routes_to_each_keys_node(backend: redis.Redis | RedisCluster, packer: str) -> None:
    tags = [uuid.uuid4().hex for _ in range(6)]  # hash tags of (very likely) every node
    batch = Batch(backend)
    for t in tags:
        for c in commands(t):
            batch.add(c[1] if c[0] != "EVAL" else c[3], *c)
    try:
        got = batch.execute()
        assert len(got) == len(tags) * len(commands(""))
        for n in range(len(tags)):
            part = got[n * len(commands("")) : (n + 1) * len(commands(""))]
            assert part[0] is True and part[2] == b"v\x00\xff" and part[-1] == 1
            assert part[7] == [f"{{{tags[n]}}}:s".encode(), "é".encode(), 42]
    finally:
        for t in tags:
            for s in "shz":
                backend.delete(f"{{{t}}}:{s}")


@pytest.mark.parametrize("kind", ["server", "cluster"])
def test_a_wait_its_primary_breaks_off_is_an_outage_to_retry(kind: str, packer: str) -> None:
    """A failover that makes a primary a replica ends the WAITs blocked on it with an
    UNBLOCKED error reply (as CLIENT UNBLOCK ERROR does here): the confirmation failed, and
    serve retries the batch; it is not an error that ends serve (CI saw one do so)."""
    name = f"it-unblock-{uuid.uuid4().hex[:12]}"
    options: dict[str, Any] = {"client_name": name, "socket_timeout": 30}
    client: Any = (
        redis.Redis.from_url(REDIS_URL, **options)
        if kind == "server"
        else RedisCluster.from_url(REDIS_CLUSTER_URL, **options)
    )
    nodes = (
        [client]
        if kind == "server"
        else [client.get_redis_connection(n) for n in client.get_primaries()]
    )
    store = Store(client, Layout(name))
    store.replication = Replication(min_replicas=9, timeout=25)  # more replicas than any has
    failed: list[BaseException] = []

    def confirm() -> None:
        try:
            store.confirm()
        except BaseException as exc:  # the test reads what it was
            failed.append(exc)

    def blocked() -> list[tuple[Any, int]]:
        return [
            (node, int(c["id"]))
            for node in nodes
            for c in node.client_list()
            if c.get("name") == name and c.get("cmd") == "wait"
        ]

    waiting = threading.Thread(target=confirm, daemon=True)
    waiting.start()
    try:
        until(lambda: bool(blocked()), 10, "the barrier's WAIT to block")
        for node, client_id in blocked():
            node.execute_command("CLIENT UNBLOCK", client_id, "ERROR")
        waiting.join(10)
        assert not waiting.is_alive(), "the WAIT went on after it was broken off"
        assert len(failed) == 1 and isinstance(failed[0], BackendUnavailable), failed
        assert "UNBLOCKED" in str(failed[0])
    finally:
        for node, client_id in blocked():
            node.execute_command("CLIENT UNBLOCK", client_id, "ERROR")
        waiting.join(30)
        client.close()
