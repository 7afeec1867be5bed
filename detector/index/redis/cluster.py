"""Cluster routing: how one round trip of the index reaches the nodes that serve its keys."""

from __future__ import annotations

from typing import Any

import redis
from redis.cluster import RedisCluster

from ...errors import BackendUnavailable

PACKED = object()  # the mark of a command add_packed() gives in the protocol
_FIELDS = [b"$%d\r\n%d\r\n" % (len(str(i)), i) for i in range(1 << 10)]  # keys.FIELD_BITS


def packed_hmget(key: str | bytes, fields: list[int]) -> bytes:
    """HMGET of a hash's fields (numbers below 1,024: a bucket hash's), in the protocol."""
    name = key.encode("utf-8", "surrogatepass") if isinstance(key, str) else key
    head = b"*%d\r\n$5\r\nHMGET\r\n$%d\r\n%s\r\n" % (len(fields) + 2, len(name), name)
    return head + b"".join(map(_FIELDS.__getitem__, fields))


def _raw(client: redis.Redis, commands: list[tuple[Any, ...]]) -> list[Any]:
    """One round trip on one connection of `client`'s pool: the commands, each packed by
    redis-py unless add_packed() gave it packed, and their raw replies (no callbacks)."""
    pool = client.connection_pool
    conn: Any = pool.get_connection()  # redis-py's connections are untyped
    try:
        conn.send_packed_command(
            [
                part
                for c in commands
                for part in ([c[1]] if c[0] is PACKED else conn.pack_command(*c))
            ]
        )
        replies = []
        errors = []
        for _ in commands:
            try:
                replies.append(conn.read_response())
            except redis.ResponseError as exc:
                replies.append(exc)
                errors.append(exc)
    except BaseException:
        conn.disconnect()  # replies may be left on the socket
        raise
    finally:
        pool.release(conn)
    if errors:
        raise errors[0]
    return replies


class Batch:
    """The commands of one round trip, each on the keys of one hash tag (`add` names the
    key that routes it). One server: one pipeline. A cluster: one pipeline per node, each
    command sent to the node that serves its key's slot; redis-py's own cluster pipeline
    refuses the MGET and EVAL that the index needs."""

    def __init__(self, client: redis.Redis | RedisCluster) -> None:
        self.client = client
        self.commands: list[tuple[str | bytes, tuple[Any, ...]]] = []

    def add(self, key: str | bytes, *command: Any) -> None:
        self.commands.append((key, command))

    def add_packed(self, key: str | bytes, packed: bytes) -> None:
        """A command already in the protocol (`packed_hmget`), whose reply needs no
        callback: redis-py packs an argument in some 3 us, and a vector lookup's HMGETs
        name 548 fields a record."""
        self.commands.append((key, (PACKED, packed)))

    def execute(self) -> list[Any]:
        packed = any(c[:1] == (PACKED,) for _, c in self.commands)
        if packed and not isinstance(self.client, RedisCluster):
            return _raw(self.client, [c for _, c in self.commands])
        if not isinstance(self.client, RedisCluster):
            pipe: Any = self.client.pipeline(transaction=False)
            for _, command in self.commands:
                pipe.execute_command(*command)
            return list(pipe.execute())
        client: Any = self.client  # redis-py's cluster helpers are untyped
        by_node: dict[str, tuple[Any, list[int]]] = {}
        for at, (key, _) in enumerate(self.commands):
            node = client.get_node_from_key(key)
            by_node.setdefault(node.name, (node, []))[1].append(at)
        out: list[Any] = [None] * len(self.commands)
        try:
            for node, positions in by_node.values():
                if packed:
                    got = _raw(
                        client.get_redis_connection(node),
                        [self.commands[at][1] for at in positions],
                    )
                    for at, reply in zip(positions, got, strict=True):
                        out[at] = reply
                    continue
                pipe = client.get_redis_connection(node).pipeline(transaction=False)
                for at in positions:
                    pipe.execute_command(*self.commands[at][1])
                for at, reply in zip(positions, pipe.execute(), strict=True):
                    out[at] = reply
        except (
            redis.exceptions.MovedError,
            redis.exceptions.AskError,
            redis.ConnectionError,
        ) as exc:
            # Slots moved (resharding, failover): learn the new map, and let the caller
            # retry the round trip.
            client.nodes_manager.initialize()
            raise BackendUnavailable(f"Redis Cluster: slots moved ({exc})") from exc
        return out
