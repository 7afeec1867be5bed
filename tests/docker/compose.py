"""The compose project of tests/docker, through the docker CLI: its settings (read once, at
import: the unit suite's autouse fixture empties NEARDUP_* while a test runs), commands,
containers and their health, and the time each phase took."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from datetime import datetime

from ..helpers import ROOT

CALLER_ENV = {k: v for k, v in os.environ.items() if k.startswith("NEARDUP_STACK_DOCKER_")}
PROJECT = CALLER_ENV.get("NEARDUP_STACK_DOCKER_PROJECT") or "neardup-test"
KAFKA_PORT = CALLER_ENV.get("NEARDUP_STACK_DOCKER_KAFKA_PORT") or "29092"
REDIS_PORT = CALLER_ENV.get("NEARDUP_STACK_DOCKER_REDIS_PORT") or "16379"
# Not 9464: ops/walkthrough.sh's consumers take 9464 and 9465 on the same machine.
METRICS_PORT = CALLER_ENV.get("NEARDUP_STACK_DOCKER_METRICS_PORT") or "19464"
BOOTSTRAP = f"127.0.0.1:{KAFKA_PORT}"
IMAGES = ("neardup", "neardup-kafka", "neardup-redis")
BASE = ("docker-compose.yml",)
REPLICAS = (*BASE, "docker-compose.replicas.yml")  # with the replica set and its Sentinels
PHASES: list[tuple[str, float]] = []  # (what, seconds), printed by conftest at the end


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    t0 = time.monotonic()
    try:
        yield
    finally:
        PHASES.append((name, time.monotonic() - t0))


def docker(*args: str, timeout: float = 120, check: bool = True) -> str:
    """`docker ARGS`: its stdout; a failure shows its stderr."""
    done = subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )
    if check:
        assert done.returncode == 0, f"docker {' '.join(args)} failed:\n{done.stderr[-3000:]}"
    return done.stdout


def compose_command() -> list[str]:
    """Compose v2 (the docker CLI plugin) where it is installed, else docker-compose 1.29."""
    plugin = subprocess.run(["docker", "compose", "version"], capture_output=True)
    if plugin.returncode == 0:
        return ["docker", "compose"]
    assert shutil.which("docker-compose"), "neither `docker compose` nor docker-compose"
    return ["docker-compose"]


def compose(*args: str, timeout: float = 600, files: Sequence[str] = BASE) -> str:
    """`docker compose -p PROJECT ARGS` on the repository's docker-compose.yml (and the
    override FILES name), with the project's ports; checked."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEARDUP_")}
    env |= {
        "NEARDUP_STACK_DOCKER_KAFKA_PORT": KAFKA_PORT,
        "NEARDUP_STACK_DOCKER_REDIS_PORT": REDIS_PORT,
        "NEARDUP_STACK_DOCKER_METRICS_PORT": METRICS_PORT,
    }
    named = [arg for f in files for arg in ("-f", str(ROOT / f))]
    argv = [*compose_command(), "-p", PROJECT, *named, *args]
    done = subprocess.run(
        argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, f"{' '.join(argv)} failed:\n{done.stderr[-3000:]}"
    return done.stdout


def project_filter(service: str | None = None) -> list[str]:
    labels = [f"label=com.docker.compose.project={PROJECT}"]
    if service:
        labels.append(f"label=com.docker.compose.service={service}")
    return [arg for label in labels for arg in ("--filter", label)]


def containers(service: str | None = None, every: bool = False) -> list[str]:
    """The project's container ids (of one service), running ones or every one."""
    out = docker("ps", "-q", *(["-a"] if every else []), *project_filter(service))
    return sorted(out.split())


def volumes() -> list[str]:
    return docker("volume", "ls", "-q", *project_filter()).split()


def instant(text: str) -> datetime:
    """A time docker prints (RFC 3339, nanoseconds), to the microsecond."""
    return datetime.fromisoformat(re.sub(r"(\.\d{6})\d+", r"\1", text.replace("Z", "+00:00")))


def health(container: str) -> str:
    """healthy or unhealthy by the container's checks since it last started (docker keeps
    the status of the run before until a new check), starting before its first; else the
    state of a container that is not running."""
    state = json.loads(docker("inspect", "--format", "{{json .State}}", container))
    if state.get("Status") != "running":
        return str(state.get("Status"))
    checks = (state.get("Health") or {}).get("Log") or []
    since = instant(state["StartedAt"])
    if not [c for c in checks if instant(c["Start"]) > since]:
        return "starting"
    return str(state["Health"]["Status"])


def wait_healthy(ids: Sequence[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while (states := {c: health(c) for c in ids}) and set(states.values()) != {"healthy"}:
        if time.monotonic() > deadline:
            raise AssertionError(f"not healthy within {timeout:.0f} s: {states}\n{logs(ids)}")
        time.sleep(1)


def logs(ids: Sequence[str], tail: int = 30) -> str:
    """The last lines each container wrote (serve logs to stderr)."""
    return "\n".join(
        f"----- {c} -----\n"
        + subprocess.run(
            ["docker", "logs", "--tail", str(tail), c],
            capture_output=False,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        ).stdout
        for c in ids
    )


def inside(container: str, path: str) -> tuple[int, str]:
    """GET http://127.0.0.1:PORT/PATH from inside a detector container, PORT the one its
    serve took (NEARDUP_METRICS_PORT_FILE): (status, body)."""
    script = (
        "import urllib.request as u, urllib.error as e, json, sys\n"
        "port = open('/tmp/neardup-metrics-port').read().strip()\n"
        "try:\n"
        f"    r = u.urlopen(f'http://127.0.0.1:{{port}}{path}', timeout=5)\n"
        "    status, body = r.status, r.read()\n"
        "except e.HTTPError as error:\n"
        "    status, body = error.code, error.read()\n"
        "print(json.dumps({'status': status, 'body': body.decode()}))\n"
    )
    reply = json.loads(docker("exec", container, "python", "-c", script))
    return int(reply["status"]), str(reply["body"])


def metrics_port(container: str) -> int:
    return int(docker("exec", container, "cat", "/tmp/neardup-metrics-port").strip())


def neardup(args: Sequence[str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`python -m detector ARGS` on the host, against the project's Kafka; checked."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEARDUP_")}
    env |= {"NEARDUP_BOOTSTRAP_SERVERS": BOOTSTRAP, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "detector", *args], cwd=ROOT, env=env, capture_output=True,
        text=True, timeout=timeout,
    )  # fmt: skip
    assert done.returncode == 0, f"neardup {' '.join(args)} failed:\n{done.stderr[-3000:]}"
    return done


def image_sizes() -> list[str]:
    out = docker("image", "ls", "--format", "{{.Repository}}:{{.Tag}} {{.Size}}", check=False)
    return [line for line in out.splitlines() if line.split(":")[0] in IMAGES]
