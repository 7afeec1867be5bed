"""Cluster routing: how one round trip of the index reaches the nodes that serve its keys."""

from __future__ import annotations

from typing import Any

import redis
from redis.cluster import RedisCluster

from ...errors import BackendUnavailable
from . import resp


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

    def execute(self) -> list[Any]:
        if not isinstance(self.client, RedisCluster):
            return resp.execute(self.client, [command for _, command in self.commands])
        client: Any = self.client  # redis-py's cluster helpers are untyped
        by_node: dict[str, tuple[Any, list[int]]] = {}
        for at, (key, _) in enumerate(self.commands):
            node = client.get_node_from_key(key)
            by_node.setdefault(node.name, (node, []))[1].append(at)
        out: list[Any] = [None] * len(self.commands)
        try:
            for node, positions in by_node.values():
                replies = resp.execute(
                    client.get_redis_connection(node), [self.commands[at][1] for at in positions]
                )
                for at, reply in zip(positions, replies, strict=True):
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
