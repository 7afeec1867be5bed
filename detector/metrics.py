"""Prometheus metrics and the health endpoint of `neardup serve`."""

from __future__ import annotations

import errno
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, Counter, Gauge, Histogram, generate_latest

from .errors import ConfigError

RECORDS_IN = Counter("neardup_records_in_total", "Input records consumed")
DECISIONS = Counter("neardup_decisions_total", "Decisions published", ["decision"])
EVIDENCE = Counter(
    "neardup_evidence_total",
    "Decisions by what decided them: digest (an exact copy), text (the exact shingle "
    "Jaccard), sketch (a text past --text-window, judged on its sketch), vector (cosine), "
    "fingerprint (no candidate)",
    ["evidence"],
)
DEAD_LETTERS = Counter(
    "neardup_dead_letters_total", "Bad records sent to the dead-letter topic", ["reason"]
)
CONFLICTS = Counter(
    "neardup_commit_conflicts_total",
    "Commits that met another consumer's documents and were redone",
)
RETRIES = Counter(
    "neardup_retries_total",
    "Loop steps retried (a backend away, or conflicts outlasting retries)",
    ["step"],
)
BATCH_SECONDS = Histogram(
    "neardup_batch_seconds",
    "Time from poll to committed offsets",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
REDIS_SECONDS = Histogram(
    "neardup_redis_round_trip_seconds",
    "Redis round trips",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5),
)
MIN_REPLICAS = Gauge(
    "neardup_redis_min_replicas",
    "--redis-min-replicas: the replicas a batch's writes must reach before it is published",
)
REPLICAS_CONFIRMED = Gauge(
    "neardup_redis_replicas_confirmed",
    "Replicas that acknowledged the last batch's writes (WAIT's reply; the fewest over the "
    "primaries), with --redis-min-replicas",
)
WAIT_SECONDS = Histogram(
    "neardup_redis_wait_seconds",
    "Confirmations of a batch's writes on the replicas (a write and WAIT on each primary)",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 5),
)
UNCONFIRMED = Counter(
    "neardup_redis_unconfirmed_total",
    "Batches whose writes reached fewer replicas than --redis-min-replicas in time: "
    "decided again, never published unconfirmed",
)
TRANSACTIONS = Counter(
    "neardup_transactions_total",
    "Kafka transactions of serve --exactly-once (a batch's decisions, dead letters and "
    "offsets), by outcome: committed, or aborted (the batch is sent again or redelivered)",
    ["outcome"],
)
REFETCHES = Counter(
    "neardup_refetches_total",
    "Records of a known id: revision (changed content, decided afresh), stale (older than "
    "its last version: the stored decision again)",
    ["kind"],
)
EVICTIONS = Counter(
    "neardup_bucket_evictions_total",
    "Block-table entries pushed out of the lookups' reads by --max-bucket (a hot bucket "
    "keeps its newest entries; the documents stay candidates through their other tables)",
)
BUCKET_CUTS = Counter(
    "neardup_bucket_cuts_total",
    "Buckets cut back to their newest --max-bucket entries (each is logged with its table and key)",
)
TOMBSTONES = Counter(
    "neardup_tombstones_total", "Kafka tombstones, by what was done (delete, ignore)", ["action"]
)
LARGEST_CLUSTER = Gauge(
    "neardup_largest_cluster_size",
    "Documents of the largest cluster (duplicate chain) among those this consumer decided",
)
HOST_CLUSTER_SHARE = Gauge(
    "neardup_host_cluster_share",
    "Share of a host's pages decided here that its largest cluster holds, for the hosts of "
    "50 pages or more nearest a runaway (--runaway-share)",
    ["host"],
)
RUNAWAYS = Counter(
    "neardup_runaway_clusters_total",
    "Clusters found holding --runaway-share of a host's pages (each is logged once)",
)
LAG = Gauge("neardup_consumer_lag", "Records on the assigned partitions not yet consumed")
PARTITION_LAG = Gauge(
    "neardup_partition_lag",
    "Records of one assigned partition not yet consumed",
    ["topic", "partition"],
)
ASSIGNED = Gauge("neardup_assigned_partitions", "Partitions of the input topic this member holds")
KERNELS = Gauge(
    "neardup_kernels",
    "1 for the text kernels this process runs: native or numpy",
    ["implementation"],
)


class Health:
    """What the process says of itself, for /livez and /readyz (and /healthz, the same
    as /readyz).

    Live: it keeps coming back, within `stale` seconds, from its start-up steps or from
    the loop, and it has not stopped. Ready: live, and a member of its consumer group
    with its partitions assigned (none, when the group has more members than the topic
    has partitions), and not waiting out a server that is away.
    """

    def __init__(self, stale: float = 60.0) -> None:
        self.stale = stale
        self.last_beat = time.monotonic()
        self.state = "starting"
        self.partitions: int | None = None  # None until the group first assigns

    def beat(self, state: str = "running") -> None:
        self.last_beat = time.monotonic()
        self.state = state

    def assigned(self, partitions: int) -> None:
        self.partitions = partitions

    def report(self, ready: bool = True) -> tuple[bool, dict[str, Any]]:
        """(ok, the JSON body): of readiness, or of liveness alone."""
        age = time.monotonic() - self.last_beat
        live = age < self.stale and self.state != "stopped"
        is_ready = live and self.partitions is not None and self.state == "running"
        ok = is_ready if ready else live
        return ok, {
            "status": "ok" if ok else ("not ready" if live else "unhealthy"),
            "state": self.state,
            "live": live,
            "ready": is_ready,
            "partitions": self.partitions,
            "seconds_since_progress": round(age, 1),
        }


def serve_http(host: str, port: int, health: Health, count: int = 1) -> ThreadingHTTPServer:
    """GET /metrics (Prometheus), and /livez, /readyz and /healthz (= /readyz): 200 or 503
    with a JSON body, in a daemon thread, on the first free port of PORT .. PORT+COUNT-1
    (`server_address` says which). ConfigError when none is free."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.partition("?")[0]
            if path == "/metrics":
                body, status, kind = generate_latest(), 200, CONTENT_TYPE_LATEST
            elif path in ("/livez", "/readyz", "/healthz"):
                ok, report = health.report(ready=path != "/livez")
                body, status, kind = (
                    json.dumps(report).encode(),
                    200 if ok else 503,
                    "application/json",
                )
            else:
                body, status, kind = b"not found\n", 404, "text/plain"
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # scrapes every few seconds would drown the log

    for candidate in range(port, port + count):
        try:
            server = ThreadingHTTPServer((host, candidate), Handler)
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise ConfigError(f"--metrics-port {candidate} on {host}: {exc.strerror}") from None
            continue
        threading.Thread(target=server.serve_forever, daemon=True, name="metrics").start()
        return server
    ports = f"{port}" if count == 1 else f"{port}-{port + count - 1}"
    raise ConfigError(
        f"the metrics port{'s' if count > 1 else ''} {ports} on {host} "
        f"{'are all' if count > 1 else 'is'} in use (--metrics-port, --metrics-port-count)"
    )
