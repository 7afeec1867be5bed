"""Where the integration suite's Kafka and Redis come from: one fixture, three sources.

NEARDUP_STACK_SERVERS chooses, read once at import:
  urls        the servers the caller names: NEARDUP_BOOTSTRAP_SERVERS, NEARDUP_REDIS_URL and the
              NEARDUP_STACK_* lines of `ops/stack.sh env`. The fault tests restart them with
              ops/stack.sh, so they must be its servers.
  containers  containers of the project's images (neardup-kafka, neardup-redis; `bash
              ops/docker.sh all` builds them), through testcontainers: started for the session
              and removed at its end. Their ports are ops/stack.sh's plus 30000 (Kafka
              39092-39095, Redis 36379 and TLS 36380, the Cluster 37000-37005, the replica set
              36381-36382 and its Sentinels 56379-56381), so that both
              sources can run on one machine at once. The fault tests use the container API:
              restart, pause.
  ops         `ops/stack.sh up` as the session starts; the stack is left running (`ops/stack.sh
              down` stops it).
  auto        the default: urls when NEARDUP_BOOTSTRAP_SERVERS is set, else containers when a
              Docker engine answers and has both images, else ops.
Whatever the source, the servers run with ops/stack.py's configuration: its files in ops/kafka/
and ops/redis/, its certificates (a test CA), its users and its arguments. Nothing is mocked.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from ..helpers import ROOT

# The product refuses NEARDUP_* names it does not know; the suite's own settings are
# NEARDUP_STACK_*. Read before any test empties NEARDUP_* from os.environ.
CALLER_ENV = {k: v for k, v in os.environ.items() if k.startswith("NEARDUP_")}
SOURCES = ("auto", "urls", "containers", "ops")
OFFSET = 30000  # the containers' ports: ops/stack.sh's plus this
IMAGES = {"kafka": "neardup-kafka", "redis": "neardup-redis"}
PREFIX = "neardup-test-"  # the containers' names: neardup-test-kafka, neardup-test-redis, ...
READY_WAIT = 120.0  # seconds the servers get to answer


class ServersError(Exception):
    """The chosen source cannot give the servers; the message says why and what to do."""


def load_stack() -> ModuleType:
    """ops/stack.py (standard library only) as a module: its settings, certificates, users
    and server arguments are the one configuration of every source."""
    spec = importlib.util.spec_from_file_location("neardup_ops_stack", ROOT / "ops" / "stack.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass-free classes still want a module name
    spec.loader.exec_module(module)
    return module


stack_py = load_stack()


@dataclass(frozen=True)
class Endpoints:
    """What the tests connect to; the secured ones are test_security's."""

    bootstrap: str
    redis_url: str
    cluster_url: str
    redis_user: str = ""
    redis_password: str = ""
    redis_tls_url: str = ""
    ca_file: str = ""
    client_cert: str = ""
    client_key: str = ""
    kafka_sasl: str = ""
    kafka_sasl_ssl: str = ""
    kafka_user: str = ""
    kafka_password: str = ""
    kafka_controller: str = ""  # KRaft's controller listener: a port that is not a broker
    sentinels: str = ""  # the replica set's Sentinels, host:port,... (serve's --redis-sentinel)
    service: str = ""  # the name they know its primary by (--redis-service)

    @classmethod
    def of_stack(cls, s: Any, credentials: Any) -> Endpoints:
        """The endpoints of a stack with settings S (ops/stack.py's Settings), as `env` prints
        them."""
        tls, host = stack_py.Tls(s), stack_py.HOST
        return cls(
            bootstrap=f"{host}:{s.kafka_port}",
            redis_url=f"redis://{host}:{s.redis_port}/0",
            cluster_url=f"redis://{host}:{s.cluster_ports[0]}/0",
            redis_user=credentials.redis_user,
            redis_password=credentials.redis_password,
            redis_tls_url=f"rediss://{host}:{s.redis_tls_port}/0",
            ca_file=str(tls.ca),
            client_cert=str(tls.client),
            client_key=str(tls.client_key),
            kafka_sasl=f"{host}:{s.kafka_sasl_port}",
            kafka_sasl_ssl=f"{host}:{s.kafka_sasl_ssl_port}",
            kafka_user=credentials.kafka_user,
            kafka_password=credentials.kafka_password,
            kafka_controller=f"{host}:{s.kafka_controller_port}",
            sentinels=",".join(f"{host}:{p}" for p in s.sentinel_ports) if s.replicas else "",
            service=s.redis_service if s.replicas else "",
        )

    @classmethod
    def of_urls(cls, env: Mapping[str, str]) -> Endpoints:
        return cls(
            bootstrap=env.get("NEARDUP_BOOTSTRAP_SERVERS") or "127.0.0.1:9092",
            redis_url=env.get("NEARDUP_REDIS_URL") or "redis://127.0.0.1:6379/0",
            cluster_url=env.get("NEARDUP_STACK_REDIS_CLUSTER_URL", ""),
            redis_user=env.get("NEARDUP_STACK_REDIS_USER", ""),
            redis_password=env.get("NEARDUP_STACK_REDIS_PASSWORD", ""),
            redis_tls_url=env.get("NEARDUP_STACK_REDIS_TLS_URL", ""),
            ca_file=env.get("NEARDUP_STACK_CA_FILE", ""),
            client_cert=env.get("NEARDUP_STACK_CLIENT_CERT", ""),
            client_key=env.get("NEARDUP_STACK_CLIENT_KEY", ""),
            kafka_sasl=env.get("NEARDUP_STACK_KAFKA_SASL", ""),
            kafka_sasl_ssl=env.get("NEARDUP_STACK_KAFKA_SASL_SSL", ""),
            kafka_user=env.get("NEARDUP_STACK_KAFKA_USER", ""),
            kafka_password=env.get("NEARDUP_STACK_KAFKA_PASSWORD", ""),
            kafka_controller=f"{stack_py.HOST}:{stack_py.Settings(env).kafka_controller_port}",
            sentinels=env.get("NEARDUP_STACK_REDIS_SENTINEL", ""),
            service=env.get("NEARDUP_STACK_REDIS_SERVICE", ""),
        )


# ------------------------------------------------------------------ ops/stack.sh


def stack_command(command: str, timeout: float = 300) -> None:
    """`bash ops/stack.sh COMMAND` with the caller's stack settings (ports, dirs)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEARDUP_")}
    env.update(CALLER_ENV)
    done = subprocess.run(
        ["bash", str(ROOT / "ops" / "stack.sh"), command],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, f"ops/stack.sh {command} failed:\n{done.stderr[-3000:]}"


class StackServers:
    """ops/stack.sh's servers: started by the session (source ops), or the caller's (urls)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.settings = stack_py.Settings(CALLER_ENV)
        if source == "urls":
            self.endpoints = Endpoints.of_urls(CALLER_ENV)
        else:  # the passwords `up` will keep (made now if none are kept yet)
            credentials = stack_py.Credentials(self.settings)
            self.endpoints = Endpoints.of_stack(self.settings, credentials)

    def describe(self) -> str:
        return "ops/stack.sh's servers" + (" (NEARDUP_* URLs)" if self.source == "urls" else "")

    def start(self) -> None:
        if self.source == "ops":
            stack_command("up")

    def diagnose(self) -> str:
        return f"(their logs: {self.settings.state})"

    def stop(self) -> None:
        """Left running: the next session starts in seconds (`ops/stack.sh down` stops it)."""

    def restart(self, service: str) -> None:
        """Stop and start `redis`, `kafka` or `cluster`, keeping its data."""
        stack_command({"cluster": "restart-redis-cluster"}.get(service, f"restart-{service}"))

    def restore(self) -> None:
        stack_command("up")

    def kill_redis(self) -> None:
        """SIGKILL, then `up` starts it again (its AOF holds what it acknowledged)."""
        self.kill_node(self.settings.redis_port)
        stack_command("up")

    def kill_node(self, port: int) -> None:
        """SIGKILL the Redis on PORT (a node of the replica set or of the Cluster), and wait
        until it is gone; restore() starts it again."""
        pid = int(redis_on(port).info("server")["process_id"])
        os.kill(pid, signal.SIGKILL)
        while stack_py.alive(pid):
            time.sleep(0.05)

    @contextlib.contextmanager
    def redis_paused(self) -> Iterator[None]:
        """Redis stops answering, its connections open (SIGSTOP), until the block ends."""
        pid = int(redis_on(self.settings.redis_port).info("server")["process_id"])
        os.kill(pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(pid, signal.SIGCONT)

    def kafka_tool(self, argv: Sequence[str], stdin: str) -> subprocess.CompletedProcess[str]:
        """A Kafka command-line tool (a class of the broker's jars, and its arguments), run
        with the stack's jars."""
        jars = sorted(self.settings.cache.glob("kafka-libs-*"))
        assert jars, f"no Kafka jars under {self.settings.cache}: `ops/stack.sh up` fetches them"
        logging = ROOT / "ops" / "kafka" / "log4j2-tools.xml"
        java = ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp", f"{jars[-1]}/*",
                f"-Dlog4j2.configurationFile={logging}"]  # fmt: skip
        return subprocess.run(
            [*java, *argv], input=stdin, capture_output=True, text=True, timeout=120
        )


# ------------------------------------------------------------------ containers


class ContainerServers:
    """Kafka, Redis (plain and TLS, with the ACL user), a Redis Cluster (three primaries and
    their replicas) and the Sentinel replica set, each a
    testcontainers container of the project's images on the host's network (no image
    registry is needed, nor any port mapping)."""

    def __init__(self) -> None:
        state = CALLER_ENV.get("NEARDUP_STACK_CONTAINERS_DIR") or "/tmp/neardup-containers"
        defaults = {
            "KAFKA_PORT": 9092, "KAFKA_CONTROLLER_PORT": 9093, "KAFKA_SASL_PORT": 9094,
            "KAFKA_SASL_SSL_PORT": 9095, "REDIS_PORT": 6379, "REDIS_TLS_PORT": 6380,
            "REDIS_CLUSTER_PORT": 7000, "REDIS_PRIMARY_PORT": 6381, "SENTINEL_PORT": 26379,
        }  # fmt: skip
        env = {f"NEARDUP_STACK_{k}": str(v + OFFSET) for k, v in defaults.items()}
        env["NEARDUP_STACK_DIR"] = state
        self.settings = s = stack_py.Settings(env)
        self.credentials = stack_py.Credentials(s)
        self.endpoints = Endpoints.of_stack(s, self.credentials)
        self.containers: dict[str, Any] = {}  # name: DockerContainer, those this worker started
        self.client: Any = None  # the Docker engine's, once asked for

    def describe(self) -> str:
        return (
            f"testcontainers of {', '.join(IMAGES.values())} "
            f"(Kafka {self.endpoints.bootstrap}, Redis {self.endpoints.redis_url})"
        )

    @staticmethod
    def engine() -> Any:
        """A docker client of the engine, or ServersError."""
        os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")  # its image is pulled
        try:
            import docker  # testcontainers' own client library

            client = docker.from_env(timeout=30)
            client.ping()
            return client
        except Exception as exc:
            raise ServersError(
                f"no Docker engine answers ({type(exc).__name__}: {exc}): "
                "`bash ops/docker.sh all` starts one and builds the images"
            ) from None

    @classmethod
    def available(cls) -> bool:
        """A Docker engine answers and holds both images."""
        try:
            return not cls.missing_images(cls.engine())
        except ServersError:
            return False

    @staticmethod
    def missing_images(client: Any) -> list[str]:
        """The project's images the engine does not hold."""
        tags = {t.split(":")[0] for image in client.images.list() for t in image.tags}
        return [i for i in IMAGES.values() if i not in tags]

    def container(self, name: str, image: str, command: Sequence[str] = (),
                  env: Mapping[str, str] | None = None,
                  files: Sequence[tuple[bytes, str]] = ()) -> Any:  # fmt: skip
        from testcontainers.core.container import DockerContainer

        c = DockerContainer(image, name=f"{PREFIX}{name}").with_kwargs(network_mode="host")
        if command:
            c = c.with_command(list(command))
        for k, v in (env or {}).items():
            c = c.with_env(k, v)
        for data, path in files:  # readable by the image's own user
            c = c.with_copy_into_container(data, path, 0o644)
        self.containers[name] = c.start()
        return c

    def start(self) -> None:
        """The containers, started by the first of a run's pytest-xdist workers and used by
        the others (the run's id and the count of workers using them are kept in the state
        dir); or removed and started afresh, when a killed session left them."""
        run = os.environ.get("PYTEST_XDIST_TESTRUNUID", "")
        with held(self.settings.state / ".session.lock"):
            users = self.users()
            if run and users[0] == run:
                self.write_users(run, users[1] + 1)
                return self.wait()
            self.remove()
            self.launch()
            self.write_users(run, 1)

    def users(self) -> tuple[str, int]:
        """The run whose workers use the containers, and how many of them do."""
        with contextlib.suppress(FileNotFoundError, ValueError):
            run, count = (self.settings.state / "session").read_text().split()
            return run, int(count)
        return "", 0

    def write_users(self, run: str, count: int) -> None:
        (self.settings.state / "session").write_text(f"{run or '-'} {count}\n")

    def launch(self) -> None:
        s, c = self.settings, self.credentials
        if missing := self.missing_images(self.engine()):
            raise ServersError(
                f"no image {', '.join(missing)}: `bash ops/docker.sh all` builds them"
            )
        tls = stack_py.Tls(s).ensure(stack_py.Installer(s))
        # Kafka: ops/stack.sh's own listeners (SASL, TLS) and users, its storage in the
        # image's volume
        kafka = stack_py.Kafka(s)
        kafka.data = Path("/var/lib/kafka/data")
        scram = [f"{m}=[name={c.kafka_user},password={c.kafka_password}]" for m in stack_py.SCRAM]
        self.container("kafka", IMAGES["kafka"], env={
            "KAFKA_PORT": str(s.kafka_port),
            "KAFKA_CONTROLLER_PORT": str(s.kafka_controller_port),
            "KAFKA_EXTRA_CONFIG": kafka.properties(c, tls),
            "KAFKA_SCRAM_CREDENTIALS": "\n".join(scram),
        })  # fmt: skip
        # Redis: ops/stack.sh's arguments, with the certificates and users copied in
        conf, tls_dir = Path("/etc/neardup"), Path("/etc/neardup/tls")
        files = [
            (f.read_bytes(), str(tls_dir / f.name)) for f in (tls.ca, tls.server, tls.server_key)
        ]
        files.append((stack_py.Redis.users(c).encode(), str(conf / "users.acl")))
        self.container("redis", IMAGES["redis"], [
            "redis-server", str(conf / "redis.conf"), "--include", str(conf / "persistence.conf"),
            *stack_py.Redis.arguments(s, Path("/data"), tls_dir, conf / "users.acl"),
        ], files=files)  # fmt: skip
        node_conf = (ROOT / "ops" / "redis" / "cluster-node.conf").read_bytes()
        for port, bus in zip(s.cluster_ports, s.bus_ports, strict=True):
            self.container(f"cluster-{port}", IMAGES["redis"], [
                "redis-server", str(conf / "cluster-node.conf"),
                "--include", str(conf / "persistence.conf"),
                *stack_py.Cluster.arguments(port, bus, Path("/data")),
            ], files=[(node_conf, str(conf / "cluster-node.conf"))])  # fmt: skip
        self.wait()
        first = self.containers[f"cluster-{s.cluster_ports[0]}"]
        code, out = first.exec(stack_py.Cluster.create_command(s.cluster_ports))
        assert code == 0, f"redis-cli --cluster create failed: {out.decode()[-2000:]}"
        self.start_replica_set()
        self.wait()

    def start_replica_set(self) -> None:
        """ops/stack.sh's replica set: a primary, its replica and three Sentinels, each run by
        the image's replica-set.sh (docker-compose.replicas.yml's too) from ops/redis/'s
        replica-node.conf and sentinel.conf."""
        s, script = self.settings, "/etc/neardup/replica-set.sh"
        primary = s.replica_ports[0]
        for port in s.replica_ports:
            of = [str(primary)] if port != primary else []
            self.container(f"replica-{port}", IMAGES["redis"], [script, "node", str(port), *of])
        for port in s.sentinel_ports:
            command = [script, "sentinel", str(port), str(primary), s.redis_service]
            self.container(f"sentinel-{port}", IMAGES["redis"], command)

    def stop(self) -> None:
        """The last worker using the containers removes them."""
        with held(self.settings.state / ".session.lock"):
            run, count = self.users()
            if count > 1:
                return self.write_users(run, count - 1)
            self.remove()
            (self.settings.state / "session").unlink(missing_ok=True)

    def remove(self) -> None:
        """Removes the containers (and their volumes), this session's and any a killed one
        left on these ports."""
        self.containers.clear()
        for container in self.mine():
            container.remove(force=True, v=True)

    def mine(self) -> list[Any]:
        """The engine's containers of this source, by name (whichever worker started them)."""
        self.client = self.client or self.engine()
        found = self.client.containers.list(all=True)
        return [c for c in found if c.name.startswith(PREFIX)]

    def wait(self) -> None:
        """Until every Redis answers PING (its AOF loaded), each node of a made Cluster says
        cluster_state:ok, each Sentinel sees the replica set whole, and the broker answers a
        metadata request."""
        s, deadline = self.settings, time.monotonic() + READY_WAIT

        def until(check: Callable[[], object], what: str) -> None:
            when_ready(check, what, deadline - time.monotonic(), self.diagnose)

        for port in [s.redis_port, *s.cluster_ports]:
            until(redis_on(port).ping, f"Redis on {port}")
        if self.clustered():
            for port in s.cluster_ports:
                until(lambda p=port: redis_on(p).cluster("info")["cluster_state"] == "ok",
                      f"the cluster node on {port}")  # fmt: skip
        if any(c.name.startswith(f"{PREFIX}sentinel-") for c in self.mine()):
            for port in s.sentinel_ports:
                until(lambda p=port: sentinel_knows_all(p, s.redis_service), f"Sentinel {port}")
        until(lambda: kafka_answers(self.endpoints.bootstrap), f"Kafka at {s.kafka_port}")

    def clustered(self) -> bool:
        """The Cluster's slots are assigned (not yet while its nodes start)."""
        try:
            info = redis_on(self.settings.cluster_ports[0]).cluster("info")
            return int(info["cluster_slots_assigned"]) > 0
        except Exception:
            return False

    def diagnose(self) -> str:
        """Each container's state and the last lines it wrote: why a server did not answer."""
        out = []
        for w in self.mine():
            tail = w.logs(tail=15).decode(errors="replace")
            out.append(f"--- {w.name}: {w.status}\n{tail}")
        return "\n".join(out)

    def wrapped(self, name: str) -> Any:
        """The container NAME (kafka, redis, cluster-PORT, replica-PORT, sentinel-PORT)."""
        self.client = self.client or self.engine()
        return self.client.containers.get(f"{PREFIX}{name}")

    def restart(self, service: str) -> None:
        for w in self.mine():
            if w.name == f"{PREFIX}{service}" or w.name.startswith(f"{PREFIX}{service}-"):
                w.restart(timeout=self.settings.stop_timeout)
        self.wait()

    def restore(self) -> None:
        for w in self.mine():
            if w.status == "paused":
                w.unpause()
            elif w.status != "running":
                w.start()
        self.wait()

    def kill_redis(self) -> None:
        self.wrapped("redis").kill()  # SIGKILL
        self.wrapped("redis").start()
        self.wait()

    def kill_node(self, port: int) -> None:
        """`docker kill` of the Redis on PORT (a node of the replica set or of the Cluster);
        restore() starts it again."""
        replica = port in self.settings.replica_ports
        w = self.wrapped(f"replica-{port}" if replica else f"cluster-{port}")
        w.kill()
        w.wait(timeout=30)  # until it has exited

    @contextlib.contextmanager
    def redis_paused(self) -> Iterator[None]:
        """`docker pause`: the container's processes are frozen, their sockets open."""
        self.wrapped("redis").pause()
        try:
            yield
        finally:
            self.wrapped("redis").unpause()

    def kafka_tool(self, argv: Sequence[str], stdin: str) -> subprocess.CompletedProcess[str]:
        """A Kafka command-line tool, run in the Kafka container with its jars."""
        java = ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp", "/opt/kafka/libs/*",
                "-Dlog4j2.configurationFile=/opt/kafka/config/log4j2-tools.xml"]  # fmt: skip
        container = self.wrapped("kafka").id
        return subprocess.run(
            ["docker", "exec", "-i", container, *java, *argv],
            input=stdin, capture_output=True, text=True, timeout=120,
        )  # fmt: skip


def redis_on(port: int) -> Any:
    import redis

    return redis.Redis(stack_py.HOST, port, socket_timeout=5, decode_responses=True)


def sentinel_knows_all(port: int, service: str) -> bool:
    """The Sentinel on PORT knows the primary, its replica and the two other Sentinels: a
    failover could reach its quorum."""
    try:
        m = redis_on(port).sentinel_master(service)
    except Exception:
        return False
    return (
        bool(m.get("is_master")) and m.get("num-slaves") == 1 and m.get("num-other-sentinels") == 2
    )


# ------------------------------------------------------------------ workers sharing servers


@contextlib.contextmanager
def held(path: Path, how: int = fcntl.LOCK_EX) -> Iterator[None]:
    """An flock on PATH (made if missing) for the block: among processes, as pytest-xdist's
    workers are (an flock belongs to its open file, so threads of one process exclude each
    other too)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, how)
        yield
    finally:
        os.close(fd)  # and the lock with it


@contextlib.contextmanager
def turn(state: Path, exclusive: bool, alone_on: Sequence[str] = ()) -> Iterator[None]:
    """A test's turn on the servers whose state dir is STATE. The suite's workers run their
    tests side by side, but a test that restarts, kills, pauses or reconfigures a shared
    server (marked `exclusive`) runs alone: it waits for the tests running to end, and none
    starts meanwhile. One whose faults reach only servers no other test uses (the replica
    set's: `exclusive("replica set")`) runs beside the others, but alone among those marked
    with the same name. A readers-writer lock of two flocks: the gate makes an exclusive
    test that waits go before the tests that come after it (an flock alone lets readers
    starve a writer)."""
    gate, servers = state / ".turn-gate.lock", state / ".turn.lock"
    if exclusive:
        with held(gate), held(servers):
            yield
        return
    with contextlib.ExitStack() as stack:
        with held(gate, fcntl.LOCK_SH):
            stack.enter_context(held(servers, fcntl.LOCK_SH))
        for name in alone_on:
            stack.enter_context(held(state / f".turn-{name.replace(' ', '-')}.lock"))
        yield


# ------------------------------------------------------------------ the choice


def choose(env: Mapping[str, str]) -> StackServers | ContainerServers:
    source = env.get("NEARDUP_STACK_SERVERS") or "auto"
    if source not in SOURCES:
        raise ServersError(
            f"NEARDUP_STACK_SERVERS must be one of {', '.join(SOURCES)}, not {source!r}"
        )
    if source == "auto":
        if env.get("NEARDUP_BOOTSTRAP_SERVERS"):
            source = "urls"
        else:
            source = "containers" if ContainerServers.available() else "ops"
    return ContainerServers() if source == "containers" else StackServers(source)


Servers = StackServers | ContainerServers
SERVERS = choose(CALLER_ENV)


def when_ready(
    check: Callable[[], object],
    what: str,
    timeout: float = READY_WAIT,
    why: Callable[[], str] = str,
) -> None:
    """Until CHECK returns true (servers boot, a broker elects itself; a server not up yet
    may raise); else ServersError with the last problem, and WHY() (the servers' logs)."""
    deadline, problem = time.monotonic() + timeout, "no answer yet"
    while True:
        try:
            if check():
                return
        except Exception as exc:
            problem = f"{type(exc).__name__}: {exc}"
        if time.monotonic() >= deadline:
            raise ServersError(f"{what} did not answer within {timeout:.0f} s: {problem}\n{why()}")
        time.sleep(0.2)


def kafka_answers(bootstrap: str) -> bool:
    """A metadata request to the broker answered (else an error)."""
    from kafka import KafkaAdminClient

    KafkaAdminClient(bootstrap_servers=bootstrap.split(",")).close()
    return True
