"""What --redis-min-replicas costs a batch: the decide path (lookup, literal pass, commit,
and with N > 0 the confirmation, a write and WAIT on each primary) with N = 0 and N = 1,
on the same servers in the same run, alternated so that neither gets the warmer cache.

    eval "$(bash ops/stack.sh env)"; .venv/bin/python bench/replicas.py [--rounds 5]

On ops/stack.sh's replica set through its Sentinels (NEARDUP_STACK_REDIS_SENTINEL), and on
its Redis Cluster when the Cluster has replicas. Each round indexes the sample (400
records of the dev stream, batches of 64) into a fresh index, then drops it. Prints the
median milliseconds a batch over the rounds, the confirmation's own mean, and the ratio.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import replace

from _common import ROOT

sys.path.insert(0, str(ROOT))

from detector.errors import ConfigError
from detector.index.redis import RedisIndex, maintenance
from detector.index.redis.connect import RedisSettings, check_replicas
from detector.index.redis.replication import Replication, Waited
from detector.records import parse_document
from detector.settings import EngineSettings
from tests.helpers import SAMPLE, read_lines

BATCH = 64


def one_round(settings: RedisSettings, min_replicas: int) -> tuple[float, float]:
    """(median ms a batch, mean ms a confirmation) indexing the sample once."""
    engine = EngineSettings()
    client = settings.client()
    index = RedisIndex(
        client,
        engine.block_scheme(),
        f"bench-replicas-{min_replicas}-{os.getpid()}",
        replication=Replication(min_replicas, 1.0),
    )
    waits: list[float] = []

    def waited(w: Waited | None) -> None:
        if w is not None:
            waits.append(w.seconds)

    index.store.on_wait = waited
    detector = engine.detector(index)
    docs = [parse_document(line) for line in read_lines(SAMPLE)]
    prints = detector.engine.fingerprint(docs)  # outside the clock
    seconds = []
    for at in range(0, len(docs), BATCH):
        start = time.perf_counter()
        detector.process(docs[at : at + BATCH], prints[at : at + BATCH])
        seconds.append(time.perf_counter() - start)
    maintenance.drop(index)
    client.close()
    return statistics.median(seconds) * 1000, statistics.mean(waits or [0.0]) * 1000


def measure(name: str, settings: RedisSettings, rounds: int) -> None:
    try:
        check_replicas(settings.client(), replace(settings, replication=Replication(1)))
    except ConfigError as exc:
        print(f"{name}: skipped ({exc})")
        return
    runs: dict[int, list[tuple[float, float]]] = {0: [], 1: []}
    for r in range(rounds):
        for n in (0, 1) if r % 2 else (1, 0):  # neither always runs after the other's drop
            runs[n].append(one_round(settings, n))
    base = statistics.median(r[0] for r in runs[0])
    confirmed = statistics.median(r[0] for r in runs[1])
    wait = statistics.median(r[1] for r in runs[1])  # of the rounds' means
    print(
        f"{name}: batch of {BATCH}, median of {rounds} rounds: "
        f"--redis-min-replicas 0 {base:.2f} ms, 1 {confirmed:.2f} ms "
        f"(ratio {confirmed / base:.3f}; the confirmation itself {wait:.2f} ms on average)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    sentinel = os.environ.get("NEARDUP_STACK_REDIS_SENTINEL")
    if not sentinel:
        sys.exit('NEARDUP_STACK_REDIS_SENTINEL is unset: eval "$(bash ops/stack.sh env)"')
    service = os.environ.get("NEARDUP_STACK_REDIS_SERVICE", "neardup")
    measure(
        "Sentinel primary + 1 replica",
        RedisSettings.from_options(sentinel=sentinel, service=service),
        args.rounds,
    )
    if cluster := os.environ.get("NEARDUP_STACK_REDIS_CLUSTER_URL"):
        measure(
            "Redis Cluster",
            RedisSettings.from_options(cluster, cluster=True),
            args.rounds,
        )


if __name__ == "__main__":
    main()
