"""Cluster routing: how one round trip of the index reaches the nodes that serve its keys."""

from __future__ import annotations

from typing import Any

import redis
from redis.cluster import RedisCluster

from ...errors import BackendUnavailable
from . import resp
from .replication import Unconfirmed


class Batch:
    """The commands of one round trip, each on the keys of one hash tag (`add` names the
    key that routes it). One server: one pipeline. A cluster: one pipeline per node, each
    command sent to the node that serves its key's slot; redis-py's own cluster pipeline
    refuses the MGET and EVAL that the index needs.

    `wait` (replicas, milliseconds): each node's pipeline ends with WAIT, on the connection
    that carried its writes, and fewer replicas than asked raise Unconfirmed once every
    reply is in (replication.py). `confirmed` is then the fewest any node had."""

    def __init__(
        self, client: redis.Redis | RedisCluster, wait: tuple[int, int] | None = None
    ) -> None:
        self.client = client
        self.commands: list[tuple[str | bytes, tuple[Any, ...]]] = []
        self.wait = wait
        self.confirmed: int | None = None
        self._short: list[str] = []

    def add(self, key: str | bytes, *command: Any) -> None:
        self.commands.append((key, command))

    def execute(self) -> list[Any]:
        self.confirmed, self._short = None, []
        out = self._execute()
        if self._short:
            raise Unconfirmed(
                f"Redis: writes reached {self.confirmed} replica(s), fewer than the "
                f"{self.wait[0] if self.wait else 0} asked (--redis-min-replicas) within "
                f"{self.wait[1] if self.wait else 0} ms, on {', '.join(self._short)}"
            )
        return out

    def _run(self, client: redis.Redis, commands: list[Any], node: str) -> list[Any]:
        """One node's pipeline, with its WAIT when one is asked."""
        if self.wait is None:
            return resp.execute(client, commands)
        *replies, acked = resp.execute(client, [*commands, ("WAIT", *self.wait)])
        acked = int(acked)
        self.confirmed = acked if self.confirmed is None else min(self.confirmed, acked)
        if acked < self.wait[0]:
            self._short.append(f"{node} ({acked})")
        return replies

    def _execute(self) -> list[Any]:
        if not isinstance(self.client, RedisCluster):
            return self._run(self.client, [command for _, command in self.commands], "the primary")
        client: Any = self.client  # redis-py's cluster helpers are untyped
        by_node: dict[str, tuple[Any, list[int]]] = {}
        for at, (key, _) in enumerate(self.commands):
            node = client.get_node_from_key(key)
            by_node.setdefault(node.name, (node, []))[1].append(at)
        out: list[Any] = [None] * len(self.commands)
        try:
            for node, positions in by_node.values():
                replies = self._run(
                    client.get_redis_connection(node),
                    [self.commands[at][1] for at in positions],
                    node.name,
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
