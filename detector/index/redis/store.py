"""The round trips of a Redis index, beneath it: one command (`call`, timed and its
failures sorted into the error tree), one coordinator script (`eval`), one batch of
commands routed to the nodes that serve their keys (`batch`, cluster.Batch), and the
coordinator's snapshot that every lookup starts from. It knows the key layout's names
and the scripts' typed pairs (lua.py), nothing of what the index decides."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

import redis
from redis.cluster import RedisCluster

from ...errors import BackendUnavailable, ConfigError
from . import lua, resp
from .cluster import Batch
from .keys import SHARDS, Layout
from .replication import BARRIER_TTL_MS, Replication, Unconfirmed, Waited

# The error replies that say "not now" rather than "never": the round trip is retried.
RETRIED_REPLIES = frozenset({"NOREPLICAS", "MASTERDOWN", "UNBLOCKED"})


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
        self.replication = Replication()
        self.waited: Waited | None = None  # the last confirmation
        self.on_wait: Callable[[Waited | None], None] | None = None  # serve's metrics

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
        except redis.ResponseError as exc:
            # a primary with min-replicas-to-write that lacks its replicas, a replica that
            # lost its primary (replica-serve-stale-data no), or a WAIT cut short because
            # its primary was made a replica (a failover): each waits it out, and nothing
            # it wrote is published unconfirmed
            if resp.error_code(exc) in RETRIED_REPLIES:
                raise BackendUnavailable(f"Redis: {exc}") from exc
            raise
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

    def batch(self, confirmed: bool = False) -> Batch:
        """An empty round trip; `call(batch.execute)` sends it. `confirmed`: its writes
        reach --redis-min-replicas replicas before it returns (replication.py)."""
        return Batch(self.client, self.replication.wait() if confirmed else None)

    def confirm(self) -> None:
        """Every write each primary has taken so far (this process's, and those its reads
        saw) on --redis-min-replicas replicas, or Unconfirmed: a barrier key written and
        WAIT, one pipeline a primary. Nothing when no replica is asked for."""
        if (wait := self.replication.wait()) is None:
            return
        batch = self._barrier(wait)
        start = time.perf_counter()
        try:
            self.call(batch.execute)
        finally:
            if batch.confirmed is not None:
                self.waited = Waited(batch.confirmed, time.perf_counter() - start)
            if self.on_wait is not None:
                self.on_wait(self.waited if batch.confirmed is not None else None)

    def replicas(self) -> dict[str, Any]:
        """What `index stats` shows of replication: the replicas asked for, each primary's
        connected replicas and how many bytes each is behind, and one confirmation of
        them all now (WAIT's reply, and its round trip in ms)."""
        c: Any = self.client
        if isinstance(self.client, RedisCluster):
            infos = dict(c.info("replication", target_nodes=RedisCluster.PRIMARIES))
        else:
            infos = {"primary": self.call(c.info, "replication")}
        primaries: dict[str, dict[str, Any]] = {}
        for node, info in infos.items():
            offset = int(info.get("master_repl_offset", 0))
            lags = [
                offset - int(v.get("offset", 0))
                for k, v in info.items()
                if k.startswith("slave") and isinstance(v, dict)
            ]
            primaries[str(node)] = {"replicas": len(lags), "behind_bytes": lags}
        state: dict[str, Any] = {
            "min_replicas": self.replication.min_replicas,
            "wait_timeout": self.replication.timeout,
            "primaries": primaries,
        }
        everyone = min((int(p["replicas"]) for p in primaries.values()), default=0)
        if everyone:
            batch = self._barrier((everyone, self.replication.timeout_ms))
            start = time.perf_counter()
            with contextlib.suppress(Unconfirmed):
                self.call(batch.execute)
            state["confirmed"] = batch.confirmed
            state["wait_ms"] = round((time.perf_counter() - start) * 1000, 3)
        return state

    def _barrier(self, wait: tuple[int, int]) -> Batch:
        """A round trip that writes a barrier key on each primary and WAITs there (WAIT's
        replicas and milliseconds): it confirms every write the primary took before it."""
        batch = Batch(self.client, wait)
        for key in self._barriers():
            batch.add(key, "SET", key, 1, "PX", BARRIER_TTL_MS)
        return batch

    def _barriers(self) -> list[str]:
        """A key on each primary: the coordinator's, then one of each shard's primary."""
        keys = [self.layout.prefix + "wt"]
        if not isinstance(self.client, RedisCluster):
            return keys
        client: Any = self.client
        keys += [self.layout.shard_prefix(s) + "wt" for s in range(SHARDS)]
        by_node: dict[str, str] = {}
        for key in keys:
            by_node.setdefault(client.get_node_from_key(key).name, key)
        return list(by_node.values())

    def snapshot(self, retention: int) -> lua.Snapshot:
        """What a lookup reads before the shards (scripts/snapshot.lua)."""
        return lua.Snapshot.parse(self.eval(lua.snapshot_args(self.layout, retention)))
