"""detector.metrics: what /livez, /readyz and /healthz answer as serve goes through its
start-up, joins its group, waits out an outage and stops (a real HTTP server on
localhost; no Kafka or Redis is needed to tell the states apart)."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from detector.errors import ConfigError
from detector.metrics import Health, serve_http

from .helpers import health as get


@pytest.fixture
def endpoint() -> Iterator[tuple[Health, int]]:
    health = Health(stale=60)
    server = serve_http("127.0.0.1", 0, health)
    yield health, server.server_address[1]
    server.shutdown()
    server.server_close()


def statuses(port: int) -> tuple[int, int, int]:
    return get(port, "/livez")[0], get(port, "/readyz")[0], get(port, "/healthz")[0]


def test_ready_only_once_the_group_assigned_and_nothing_is_waited_for(
    endpoint: tuple[Health, int],
) -> None:
    health, port = endpoint
    assert statuses(port) == (200, 503, 503)  # starting
    health.beat("waiting for Redis at redis://127.0.0.1:6379/0")
    assert statuses(port) == (200, 503, 503)
    assert get(port, "/readyz")[1]["state"] == "waiting for Redis at redis://127.0.0.1:6379/0"
    health.beat("running")  # polling, but the group has not assigned yet
    assert statuses(port) == (200, 503, 503)
    health.assigned(0)  # a member with no partition (more members than partitions) is ready
    assert statuses(port) == (200, 200, 200)
    health.assigned(3)
    assert get(port, "/healthz")[1] | {"seconds_since_progress": 0} == {
        "status": "ok",
        "state": "running",
        "live": True,
        "ready": True,
        "partitions": 3,
        "seconds_since_progress": 0,
    }
    health.beat("waiting (decide)")  # Redis went away while serving: live, not ready
    assert statuses(port) == (200, 503, 503)
    health.beat("running")
    assert statuses(port) == (200, 200, 200)
    health.beat("stopped")
    assert statuses(port) == (503, 503, 503)


def test_a_loop_that_stopped_coming_back_is_not_live(endpoint: tuple[Health, int]) -> None:
    health, port = endpoint
    health.assigned(1)
    health.beat("running")
    health.last_beat -= 61
    status, body = get(port, "/livez")
    assert status == 503 and body["status"] == "unhealthy" and not body["live"]


def test_metrics_are_served_and_unknown_paths_are_not(endpoint: tuple[Health, int]) -> None:
    _, port = endpoint
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        assert r.status == 200 and b"neardup_records_in_total" in r.read()
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/nothing", timeout=5)
    assert e.value.code == 404


def test_a_taken_port_moves_on_within_the_count_and_none_free_is_a_config_error(
    endpoint: tuple[Health, int],
) -> None:
    """Detectors on one network (containers on the host's) each take the first free port
    of --metrics-port .. + --metrics-port-count - 1."""
    health, taken = endpoint
    with pytest.raises(ConfigError, match=f"metrics port {taken} on 127.0.0.1 is in use"):
        serve_http("127.0.0.1", taken, health)
    other = serve_http("127.0.0.1", taken, health, count=3)
    try:
        port = other.server_address[1]
        assert taken < port <= taken + 2
        assert get(port, "/livez")[0] == 200
    finally:
        other.shutdown()
        other.server_close()
