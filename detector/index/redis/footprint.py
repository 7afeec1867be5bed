"""What an index's keys weigh in Redis memory (MEMORY USAGE), by key family, on one server
or every primary of a cluster: exactly, by weighing every key (a SCAN of each primary,
O(keys)), or estimated from a bounded random sample of each primary's keys.

The estimate draws DRAWS keys at random from a primary (RANDOMKEY, uniform over its
keys), weighs those of the index, and scales by the primary's key count (DBSIZE): an
unbiased estimate of each family's keys and bytes whatever else the server holds, with
its standard error. The coordinator's keys of one name each (the log can hold megabytes)
would make a sample swing, so they are weighed by name; a primary with at most WHOLE
times DRAWS keys is weighed whole, which costs little more than the sample."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import redis
from redis.cluster import RedisCluster

from .cluster import Batch
from .keys import Layout

DRAWS = 10_000  # keys drawn from each primary: about 1% error on a family of a tenth of them
WHOLE = 5
CHUNK = 5_000  # keys weighed a round trip
SINGLE = (
    "meta",
    "seq",
    "log",
    "logbase",
    "pending",
    "epochs",
    "counts",
    "txdict",
    "rd",
    "rw",
    "rtrim",
)


@dataclass
class Footprint:
    exact: bool = True
    keys: dict[str, float] = field(default_factory=dict)  # family -> keys
    bytes: dict[str, float] = field(default_factory=dict)  # family -> bytes
    variance: float = 0.0  # of the estimate of the total bytes
    drawn: int = 0

    def add(self, family: str, keys: float, size: float) -> None:
        self.keys[family] = self.keys.get(family, 0.0) + keys
        self.bytes[family] = self.bytes.get(family, 0.0) + size

    @property
    def total(self) -> int:
        return round(sum(self.bytes.values()))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "bytes": self.total,
            "keys": round(sum(self.keys.values())),
            "method": "exact" if self.exact else "estimate",
        }
        if not self.exact:
            out.update(standard_error=round(math.sqrt(self.variance)), sampled=self.drawn)
        out["families"] = {
            f: {"keys": round(self.keys[f]), "bytes": round(self.bytes[f])}
            for f in sorted(self.bytes, key=lambda f: -self.bytes[f])
        }
        return out


def primaries(client: redis.Redis | RedisCluster) -> list[redis.Redis]:
    """A client for each primary: the server itself, or every primary of the cluster."""
    if not isinstance(client, RedisCluster):
        return [client]
    c: Any = client  # redis-py's cluster helpers are untyped
    return [c.get_redis_connection(node) for node in c.get_primaries()]


def weigh(
    client: redis.Redis | RedisCluster,
    layout: Layout,
    call: Callable[..., Any],
    exact: bool = False,
    draws: int = DRAWS,
    progress: Callable[[int], None] | None = None,
) -> Footprint:
    """The index's footprint; `call` makes a round trip (RedisIndex._call), `progress` is
    told how many keys each round trip of an exact weighing weighed."""
    out = Footprint()
    batch = Batch(client)
    for family in SINGLE:
        key = layout.prefix + family
        batch.add(key, "MEMORY", "USAGE", key, "SAMPLES", "0")
    for family, size in zip(SINGLE, call(batch.execute), strict=True):
        if size is not None:
            out.add(family, 1, int(size))
    for node in primaries(client):
        keys = int(call(node.dbsize))
        if exact or keys <= WHOLE * draws:
            _weigh_all(node, layout, call, out, progress)
        else:
            _weigh_sample(node, layout, call, out, keys, draws)
    return out


def _weigh_all(
    node: redis.Redis,
    layout: Layout,
    call: Callable[..., Any],
    out: Footprint,
    progress: Callable[[int], None] | None,
) -> None:
    for chunk in _chunks(node, layout, call):
        pipe: Any = node.pipeline(transaction=False)
        for key, _ in chunk:
            pipe.execute_command("MEMORY", "USAGE", key, "SAMPLES", "0")
        for (_, family), size in zip(chunk, call(pipe.execute), strict=True):
            if size is not None:  # else deleted since the SCAN
                out.add(family, 1, int(size))
        if progress is not None:
            progress(len(chunk))


def _chunks(
    node: redis.Redis, layout: Layout, call: Callable[..., Any]
) -> Iterator[list[tuple[bytes, str]]]:
    """The index's keys on `node` with their families, but those weighed by name."""
    chunk: list[tuple[bytes, str]] = []
    for pattern in layout.patterns:
        cursor = None
        while cursor != 0:
            cursor, keys = call(node.scan, cursor or 0, pattern, 10_000)
            chunk += _families(layout, keys).items()
            if len(chunk) >= CHUNK:
                yield chunk
                chunk = []
    if chunk:
        yield chunk


def _families(layout: Layout, keys: list[bytes]) -> dict[bytes, str]:
    """The index's keys among `keys`, but those weighed by name, with their families."""
    single = {(layout.prefix + f).encode("utf-8", "surrogatepass") for f in SINGLE}
    out = {}
    for key in keys:
        family = layout.family(key)
        if family is not None and key not in single:
            out[key] = family
    return out


def _weigh_sample(
    node: redis.Redis,
    layout: Layout,
    call: Callable[..., Any],
    out: Footprint,
    keys: int,
    draws: int,
) -> None:
    pipe: Any = node.pipeline(transaction=False)
    for _ in range(draws):
        pipe.execute_command("RANDOMKEY")
    drawn = [k for k in call(pipe.execute) if k is not None]
    mine = _families(layout, drawn)
    pipe = node.pipeline(transaction=False)
    for key in mine:
        pipe.execute_command("MEMORY", "USAGE", key, "SAMPLES", "0")
    size = {k: int(s or 0) for k, s in zip(mine, call(pipe.execute), strict=True)}
    # every draw is a key of the node with chance 1/keys: a family's bytes are keys times
    # the mean over the draws of what the drawn key adds to it (0 for another's key)
    scale = keys / max(1, len(drawn))
    total = sum_sq = 0
    for key in drawn:
        if key in mine:
            out.add(mine[key], scale, size[key] * scale)
            total += size[key]
            sum_sq += size[key] ** 2
    n = max(1, len(drawn))
    mean = total / n
    out.variance += keys**2 * max(0.0, sum_sq / n - mean**2) / n
    out.drawn += len(drawn)
    out.exact = False
