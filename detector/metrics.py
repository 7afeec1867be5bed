"""Prometheus metrics and the health endpoint of `neardup serve`."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, Counter, Gauge, Histogram, generate_latest

RECORDS_IN = Counter("neardup_records_in_total", "Input records consumed")
DECISIONS = Counter("neardup_decisions_total", "Decisions published", ["decision"])
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
TOMBSTONES = Counter(
    "neardup_tombstones_total", "Kafka tombstones, by what was done (delete, ignore)", ["action"]
)
LAG = Gauge("neardup_consumer_lag", "Records on the assigned partitions not yet consumed")
KERNELS = Gauge(
    "neardup_kernels",
    "1 for the text kernels this process runs: native or numpy",
    ["implementation"],
)


class Health:
    """Healthy while the loop keeps coming back within `stale` seconds."""

    def __init__(self, stale: float = 60.0) -> None:
        self.stale = stale
        self.last_beat = time.monotonic()
        self.state = "starting"

    def beat(self, state: str = "running") -> None:
        self.last_beat = time.monotonic()
        self.state = state

    def report(self) -> tuple[bool, dict[str, Any]]:
        age = time.monotonic() - self.last_beat
        ok = age < self.stale and self.state != "stopped"
        return ok, {
            "status": "ok" if ok else "unhealthy",
            "state": self.state,
            "seconds_since_progress": round(age, 1),
        }


def serve_http(host: str, port: int, health: Health) -> ThreadingHTTPServer:
    """GET /metrics (Prometheus) and GET /healthz (200 or 503, JSON), in a daemon thread."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.startswith("/metrics"):
                body, status, kind = generate_latest(), 200, CONTENT_TYPE_LATEST
            elif self.path.startswith("/healthz"):
                ok, report = health.report()
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

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True, name="metrics").start()
    return server
