"""The round trips of a Redis index, beneath it: one command (`call`, timed and its
failures sorted into the error tree), one coordinator script (`eval`), one batch of
commands routed to the nodes that serve their keys (`batch`, cluster.Batch), and the
coordinator's snapshot that every lookup starts from. It knows the key layout's names
and the scripts' typed pairs (lua.py), nothing of what the index decides."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import redis
from redis.cluster import RedisCluster

from ...errors import BackendUnavailable, ConfigError
from . import lua
from .cluster import Batch
from .keys import Layout


class Store:
    """`observe`, if given, is called with the seconds of every round trip (serve passes
    its Prometheus histogram's `observe`)."""

    def __init__(
        self,
        client: redis.Redis | RedisCluster,
        layout: Layout,
        observe: Callable[[float], None] | None = None,
    ) -> None:
        self.client = client
        self.layout = layout
        self.observe = observe

    def call(self, fn: Any, *args: Any) -> Any:
        """One round trip: timed, and its failures sorted into the error tree."""
        start = time.perf_counter()
        try:
            return fn(*args)
        except redis.AuthenticationError as exc:
            raise ConfigError(f"Redis refused the credentials: {exc}") from exc
        except (
            redis.ConnectionError,
            redis.TimeoutError,
            redis.BusyLoadingError,
            redis.exceptions.ClusterError,
            redis.exceptions.TryAgainError,
            redis.exceptions.ReadOnlyError,
        ) as exc:
            raise BackendUnavailable(f"Redis: {exc}") from exc
        finally:
            if self.observe is not None:
                self.observe(time.perf_counter() - start)

    def eval(self, args: lua.Args) -> Any:
        """One script, alone in its round trip (the coordinator's: its first key, seq,
        routes it to the coordinator's slot). EVAL rather than EVALSHA: Redis caches the
        compiled script either way, and EVAL needs no reload after a restart or a
        failover. It goes as a batch of one: a commit's script carries arguments by the
        thousand, which the batches' packer writes at once (resp.py)."""
        batch = self.batch()
        batch.add(args.keys[0], "EVAL", args.script, len(args.keys), *args.keys, *args.argv)
        return self.call(batch.execute)[0]

    def batch(self) -> Batch:
        """An empty round trip; `call(batch.execute)` sends it."""
        return Batch(self.client)

    def snapshot(self, retention: int) -> lua.Snapshot:
        """What a lookup reads before the shards (scripts/snapshot.lua)."""
        return lua.Snapshot.parse(self.eval(lua.snapshot_args(self.layout, retention)))
