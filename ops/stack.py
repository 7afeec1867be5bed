#!/usr/bin/env python3
"""Local Kafka + Redis stack for neardup's tests and development, without Docker.

  ops/stack.sh up                     install what is missing, start it all, wait until it answers
  ops/stack.sh down                   stop it all (safe when nothing runs)
  ops/stack.sh status                 show what runs (exit 0 only if all of it runs)
  ops/stack.sh restart-kafka          stop and start Kafka, keeping its data
  ops/stack.sh restart-redis          stop and start Redis, keeping its data (AOF)
  ops/stack.sh restart-redis-cluster  stop and start the cluster's nodes, keeping data and slots
  ops/stack.sh env                    print `export NEARDUP_...=` lines (endpoints, users, certs)
  ops/stack.sh install                only install / fetch what is missing (Redis, openssl, jars)
  ops/stack.sh browser                install Chromium and its driver when missing (tests/browser)

What runs, on 127.0.0.1 (each service's configuration files are in ops/<service>/):
  Kafka 4.2, one KRaft node  9092 PLAINTEXT, 9093 controller, 9094 SASL_PLAINTEXT, 9095 SASL_SSL;
                             one SASL user for PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512
  Redis 7                    6379, and 6380 with TLS and client certificates; an ACL user
  Redis Cluster              7000-7005: three primaries and a replica each, no password (bus
                             ports 17000-17005); a dead primary's replica takes over in ~2 s
  Redis with replicas        6381 primary, 6382 its replica, no password; three Sentinels on
                             26379-26381 watch them as service `neardup` and promote the replica
                             when the primary is down for a second (ops/redis/sentinel.conf)
  and a test CA with certificates in <state>/tls, random passwords kept in <state>/secrets.
`up` is idempotent: what runs with the same configuration is left alone, a server running with
another one is restarted, a new Redis password is applied with ACL LOAD. It returns once a SCRAM
login over SASL_SSL succeeds, the cluster reports cluster_state:ok and each Sentinel knows the
replica and the two other Sentinels. `env` prints the
product's NEARDUP_BOOTSTRAP_SERVERS and NEARDUP_REDIS_URL, and the secured endpoints, users,
passwords and certificate paths as NEARDUP_STACK_* lines for the tests.

Environment, all optional. Only NEARDUP_STACK_* names are read (any other NEARDUP_* name is an
option of the product); give every command the same values.
  NEARDUP_STACK_DIR                     data, logs, pids, certificates    (/tmp/neardup-stack)
  NEARDUP_STACK_CACHE                   where the Kafka jars are kept     (ops/.cache)
  NEARDUP_STACK_KAFKA_PORT              PLAINTEXT listener                (9092)
  NEARDUP_STACK_KAFKA_CONTROLLER_PORT   KRaft controller listener         (9093)
  NEARDUP_STACK_KAFKA_SASL_PORT         SASL_PLAINTEXT listener           (9094)
  NEARDUP_STACK_KAFKA_SASL_SSL_PORT     SASL_SSL listener                 (9095)
  NEARDUP_STACK_KAFKA_USER              the SASL user                     (neardup)
  NEARDUP_STACK_KAFKA_PASSWORD          its password, of A-Za-z0-9._~@%+:/!-  (random, kept)
  NEARDUP_STACK_KAFKA_HEAP_OPTS         broker heap, split on spaces      (ops/kafka/jvm.options)
  NEARDUP_STACK_KAFKA_JVM_OPTS          other broker JVM flags, split on spaces (jvm.options)
  NEARDUP_STACK_KAFKA_EXTRA_CONFIG      server.properties lines, appended last (they win)
  NEARDUP_STACK_KAFKA_CLUSTER_ID        cluster id of fresh storage       (random)
  NEARDUP_STACK_KAFKA_START_TIMEOUT     seconds to wait for the broker    (120)
  NEARDUP_STACK_REDIS_PORT              Redis port                        (6379)
  NEARDUP_STACK_REDIS_TLS_PORT          Redis TLS port                    (6380)
  NEARDUP_STACK_REDIS_USER              the ACL user                      (neardup)
  NEARDUP_STACK_REDIS_PASSWORD          its password                      (random, kept)
  NEARDUP_STACK_REDIS_ARGS              more redis-server arguments for the main server, after
                                        ours (they win); split into words as a shell would,
                                        never run: '--appendonly no', '--save "60 1"'
  NEARDUP_STACK_CLUSTER                 1: up starts the Redis Cluster, 0: not   (1)
  NEARDUP_STACK_REDIS_CLUSTER_PORT      first of the cluster's 6 ports    (7000)
  NEARDUP_STACK_REDIS_CLUSTER_BUS_PORT  first of its 6 bus ports          (cluster port + 10000)
  NEARDUP_STACK_REPLICAS                1: up starts the primary, its replica and the Sentinels,
                                        0: not                            (1)
  NEARDUP_STACK_REDIS_PRIMARY_PORT      first of the replica set's 2 ports (6381)
  NEARDUP_STACK_SENTINEL_PORT           first of the 3 Sentinels' ports   (26379)
  NEARDUP_STACK_REDIS_SERVICE           the name the Sentinels know the set by (neardup)
  NEARDUP_STACK_REDIS_START_TIMEOUT     seconds to wait for each Redis and the cluster   (30)
  NEARDUP_STACK_STOP_TIMEOUT            seconds from SIGTERM to SIGKILL   (30)
Progress and errors go to stderr. Standard library only: this runs before the project's venv.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import os
import re
import secrets
import shlex
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NoReturn

OPS = Path(__file__).resolve().parent
HOST = "127.0.0.1"  # every server of the stack listens on loopback only


def jvm_options(path: Path) -> tuple[str, str]:
    """The broker's JVM flags from PATH (ops/kafka/jvm.options, which the Kafka image runs
    with too): (the heap flags, the others), each as one string of words."""
    words = [w for line in path.read_text().splitlines() for w in line.partition("#")[0].split()]
    heap = [w for w in words if w.startswith(("-Xms", "-Xmx"))]
    return " ".join(heap), " ".join(w for w in words if w not in heap)


KAFKA_HEAP_OPTS, KAFKA_JVM_OPTS = jvm_options(OPS / "kafka/jvm.options")
# The Kafka tools (format, login check, ConfigCommand) live for seconds: a small heap, no C2.
TOOL_JVM = [
    "-Xmx256m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",
    f"-Dlog4j2.configurationFile={OPS / 'kafka/log4j2-tools.xml'}",
]
SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")
CLUSTER_NODES = 6  # the Redis Cluster's: three primaries and their replicas
# What the bash version of this script read. Still set, it means a caller that expects it to
# work (other ports, another state dir): refused rather than ignored.
RENAMED = [
    f"NEARDUP_{name}"
    for name in [
        "KAFKA_PORT",
        "KAFKA_CONTROLLER_PORT",
        "KAFKA_SASL_PORT",
        "KAFKA_SASL_SSL_PORT",
        "KAFKA_HEAP_OPTS",
        "KAFKA_JVM_OPTS",
        "KAFKA_EXTRA_CONFIG",
        "KAFKA_CLUSTER_ID",
        "KAFKA_START_TIMEOUT",
        "REDIS_PORT",
        "REDIS_TLS_PORT",
        "REDIS_ARGS",
        "REDIS_CLUSTER_PORT",
        "REDIS_CLUSTER_BUS_PORT",
        "REDIS_START_TIMEOUT",
        "STOP_TIMEOUT",
    ]
]


# ---------------------------------------------------------------- messages, files, processes


class StackError(Exception):
    """A failure; what explains it (log tails) is already on stderr."""


def log(message: str) -> None:
    print(f"[stack] {message}", file=sys.stderr, flush=True)


def fail(message: str, *logs: tuple[Path, int]) -> NoReturn:
    """Show the last lines of these logs, then stop with MESSAGE."""
    for path, lines in logs:
        try:
            with path.open("rb") as f:  # a broker's log can be 20 MB: read its end only
                f.seek(max(0, f.seek(0, os.SEEK_END) - 256 * 1024))
                tail = f.read().decode(errors="replace").splitlines()[-lines:]
        except OSError:
            tail = []
        if not "".join(tail).strip():
            log(f"({path} is empty or missing)")
            continue
        print(
            f"[stack] ---- last {lines} lines of {path} ----",
            *tail,
            f"[stack] ---- end of {path} ----",
            sep="\n",
            file=sys.stderr,
        )
    raise StackError(message)


def sha256(data: str | bytes) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def read(path: Path) -> str:
    """The file's text, "" if there is none (or, under /proc, no such process any more)."""
    try:
        return path.read_text()
    except (FileNotFoundError, ProcessLookupError):
        return ""


def write(path: Path, text: str, private: bool = False) -> None:
    """Replace PATH at once (no reader sees half a file); PRIVATE (passwords, keys): owner-only
    from the start, never readable by others even for a moment."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    with os.fdopen(
        os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644), "w"
    ) as f:
        f.write(text)
    os.replace(tmp, path)


def render(template: Path, values: Mapping[str, str]) -> str:
    """TEMPLATE with each @NAME@ replaced by values[NAME], as plain text: a value is never
    parsed, run or searched for more placeholders (a password may hold an @)."""
    text = template.read_text()
    if missing := set(re.findall(r"@([A-Z][A-Z0-9_]*)@", text)) - set(values):
        raise StackError(f"{template}: no value for {', '.join(sorted(missing))}")
    return re.sub(r"@([A-Z][A-Z0-9_]*)@", lambda m: values[m.group(1)], text)


def run_logged(
    argv: Sequence[str],
    logfile: Path,
    append: bool = False,
    timeout: float | None = None,
    cwd: Path | None = None,
) -> bool:
    """Run ARGV with its output in LOGFILE; true if it exits 0 within TIMEOUT seconds."""
    logfile.parent.mkdir(parents=True, exist_ok=True)
    with logfile.open("a" if append else "w") as out:
        try:
            return (
                subprocess.run(
                    argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, timeout=timeout, cwd=cwd
                ).returncode
                == 0
            )
        except (subprocess.TimeoutExpired, OSError) as exc:
            out.write(f"\n[stack] {argv[0]}: {exc}\n")
            return False


def spawn(name: str, argv: Sequence[str], out: Path) -> subprocess.Popen[bytes]:
    """Start a server in its own session (it outlives the caller's terminal and process group),
    with neither our stdio (a caller reading our output would wait for the server) nor the
    lock (Python opens descriptors non-inheritable); its output goes to OUT."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a") as f:
        f.write(
            f"\n===== {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} "
            f"ops/stack.sh starting {name} =====\n"
        )
        f.flush()
        return subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=f, stderr=f, start_new_session=True
        )


def alive(pid: int) -> bool:
    """True if PID exists and has not exited: an exited daemon stays a zombie until init, its
    parent, reaps it, which some container inits do only every second or two."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, as another user
    return not re.search(r"^State:\s+Z", read(Path(f"/proc/{pid}/status")), re.MULTILINE)


def running_pid(pidfile: Path, marker: str) -> int | None:
    """The pid in PIDFILE if it runs and its command line holds MARKER: a pid file left over (a
    reboot, a kill -9) may name a pid that now belongs to another program."""
    digits = re.sub(r"\D", "", read(pidfile))
    if not digits or not alive(pid := int(digits)):
        return None
    try:
        return pid if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes() else None
    except OSError:
        return pid  # no /proc to look in: trust the pid file


def stop_pidfile(name: str, pidfile: Path, marker: str, timeout: int) -> None:
    """SIGTERM the process of PIDFILE, wait up to TIMEOUT seconds, then SIGKILL it."""
    if (pid := running_pid(pidfile, marker)) is None:
        log(f"{name} is not running")
    else:
        log(f"stopping {name} (pid {pid})")
        if not signal_and_wait(pid, 15, timeout):
            log(f"{name} did not stop within {timeout}s, sending SIGKILL")
            if not signal_and_wait(pid, 9, 10):
                fail(f"could not kill {name} (pid {pid})")
        log(f"{name} stopped")
    pidfile.unlink(missing_ok=True)


def signal_and_wait(pid: int, signal: int, timeout: float) -> bool:
    """True if PID is gone within TIMEOUT seconds of SIGNAL."""
    with contextlib.suppress(ProcessLookupError):  # it exited meanwhile
        os.kill(pid, signal)
    deadline = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def port_open(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=2):
            return True
    except OSError:
        return False


def check_free(ports: Sequence[int], what: str, names: str) -> None:
    """Stop unless the ports are free: our server would fail on them, naming a port, not why."""
    for port in ports:
        if port_open(port):
            fail(
                f"port {HOST}:{port} is already in use by another process (not our {what}); "
                f"stop it or choose other ports ({names})"
            )


def take_lock(state: Path) -> None:
    """Serialize the commands that start or stop servers on one state dir (the flock the bash
    version took too); held until this process exits."""
    state.mkdir(parents=True, exist_ok=True)
    fd = os.open(state / ".stack.lock", os.O_WRONLY | os.O_CREAT, 0o644)  # stays open: held
    deadline, waiting = time.monotonic() + 900, False
    while True:
        try:
            return fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if time.monotonic() >= deadline:
                fail(f"another ops/stack.sh still runs on {state} (lock {state}/.stack.lock)")
            if not waiting:
                log(f"waiting for another ops/stack.sh on {state}")
                waiting = True
            time.sleep(0.2)


# ---------------------------------------------------------------- settings


class Settings:
    """The NEARDUP_STACK_* variables (see the top), checked, with their defaults."""

    def __init__(self, env: Mapping[str, str]) -> None:
        if renamed := [name for name in RENAMED if name in env]:
            raise StackError(
                "ops/stack.sh reads NEARDUP_STACK_* only (other NEARDUP_* names are "
                "the product's options); rename "
                + ", ".join(f"{n} -> NEARDUP_STACK_{n[8:]}" for n in renamed)
            )
        self.env = env
        state = self.get("DIR", "/tmp/neardup-stack")
        if "\n" in state or "\\" in state:  # it goes into properties files
            raise StackError("NEARDUP_STACK_DIR must hold no newline or backslash")
        self.state = Path(state).absolute()  # absolute: `env` prints paths for other processes
        self.cache = Path(self.get("CACHE", str(OPS / ".cache"))).absolute()
        self.kafka_port = self.number("KAFKA_PORT", 9092)
        self.kafka_controller_port = self.number("KAFKA_CONTROLLER_PORT", 9093)
        self.kafka_sasl_port = self.number("KAFKA_SASL_PORT", 9094)
        self.kafka_sasl_ssl_port = self.number("KAFKA_SASL_SSL_PORT", 9095)
        self.kafka_heap_opts = self.get("KAFKA_HEAP_OPTS", KAFKA_HEAP_OPTS).split()
        self.kafka_jvm_opts = self.get("KAFKA_JVM_OPTS", KAFKA_JVM_OPTS).split()
        self.kafka_start_timeout = self.number("KAFKA_START_TIMEOUT", 120)
        self.redis_port = self.number("REDIS_PORT", 6379)
        self.redis_tls_port = self.number("REDIS_TLS_PORT", 6380)
        try:  # quoted words as a shell would split them (--save "60 1"), never evaluated
            self.redis_args = shlex.split(self.get("REDIS_ARGS"))
        except ValueError as exc:
            raise StackError(f"NEARDUP_STACK_REDIS_ARGS: {exc}") from None
        self.redis_start_timeout = self.number("REDIS_START_TIMEOUT", 30)
        if (cluster := self.get("CLUSTER", "1")) not in ("0", "1"):
            raise StackError(f"NEARDUP_STACK_CLUSTER must be 0 or 1, not {cluster!r}")
        self.cluster = cluster == "1"
        first = self.number("REDIS_CLUSTER_PORT", 7000)
        self.cluster_ports = [first + i for i in range(CLUSTER_NODES)]
        bus = self.number("REDIS_CLUSTER_BUS_PORT", first + 10000)
        self.bus_ports = [bus + i for i in range(CLUSTER_NODES)]
        if (replicas := self.get("REPLICAS", "1")) not in ("0", "1"):
            raise StackError(f"NEARDUP_STACK_REPLICAS must be 0 or 1, not {replicas!r}")
        self.replicas = replicas == "1"
        primary = self.number("REDIS_PRIMARY_PORT", 6381)
        self.replica_ports = [primary, primary + 1]
        sentinel = self.number("SENTINEL_PORT", 26379)
        self.sentinel_ports = [sentinel, sentinel + 1, sentinel + 2]
        self.redis_service = self.get("REDIS_SERVICE", "neardup")
        if not re.fullmatch(r"[A-Za-z0-9._-]+", self.redis_service):
            raise StackError(
                f"NEARDUP_STACK_REDIS_SERVICE must be of A-Za-z0-9._-, not {self.redis_service!r}"
            )
        self.stop_timeout = self.number("STOP_TIMEOUT", 30)

    def get(self, name: str, default: str = "") -> str:
        return self.env.get(f"NEARDUP_STACK_{name}") or default

    def number(self, name: str, default: int) -> int:
        value = self.get(name, str(default))
        if not value.isdigit() or int(value) == 0:
            raise StackError(f"NEARDUP_STACK_{name} must be a positive number, not {value!r}")
        return int(value)

    def check_ports(self) -> None:
        """Stop if a port is no port or two of the stack's listeners share one."""
        ports = {
            "NEARDUP_STACK_KAFKA_PORT": self.kafka_port,
            "NEARDUP_STACK_KAFKA_CONTROLLER_PORT": self.kafka_controller_port,
            "NEARDUP_STACK_KAFKA_SASL_PORT": self.kafka_sasl_port,
            "NEARDUP_STACK_KAFKA_SASL_SSL_PORT": self.kafka_sasl_ssl_port,
            "NEARDUP_STACK_REDIS_PORT": self.redis_port,
            "NEARDUP_STACK_REDIS_TLS_PORT": self.redis_tls_port,
        }
        if self.cluster:
            for i in range(CLUSTER_NODES):
                ports[f"NEARDUP_STACK_REDIS_CLUSTER_PORT(+{i})"] = self.cluster_ports[i]
                ports[f"NEARDUP_STACK_REDIS_CLUSTER_BUS_PORT(+{i})"] = self.bus_ports[i]
        if self.replicas:
            for i in range(2):
                ports[f"NEARDUP_STACK_REDIS_PRIMARY_PORT(+{i})"] = self.replica_ports[i]
            for i in range(3):
                ports[f"NEARDUP_STACK_SENTINEL_PORT(+{i})"] = self.sentinel_ports[i]
        seen: dict[int, str] = {}
        for name, port in ports.items():
            if port > 65535:
                raise StackError(f"{name}={port} is not a port (1-65535)")
            if port in seen:
                raise StackError(f"{name}={port}: that port is also {seen[port]}")
            seen[port] = name


# ---------------------------------------------------------------- installing


class Installer:
    """Debian packages with apt-get (Java 17, Maven, Redis, openssl) and the Kafka jars with
    Maven, each only when missing."""

    def __init__(self, s: Settings) -> None:
        self.s, self.updated = s, False

    def apt(self, *packages: str) -> None:
        if not shutil.which("apt-get"):
            fail(f"apt-get not found; install these yourself: {' '.join(packages)}")
        root = [] if os.geteuid() == 0 else ["sudo"]
        if root and not shutil.which("sudo"):
            fail(f"need root (or sudo) to install {' '.join(packages)}")
        apt = [
            *root,
            "env",
            "DEBIAN_FRONTEND=noninteractive",
            "apt-get",
            "-q",
            "-o",
            "DPkg::Lock::Timeout=300",
        ]
        aptlog = self.s.state / "apt.log"
        if not self.updated:
            log(f"apt-get update (log: {aptlog})")
            if not run_logged([*apt, "update"], aptlog):
                fail("apt-get update failed", (aptlog, 30))
            self.updated = True
        log(f"apt-get install {' '.join(packages)} (log: {aptlog})")
        # Keep the packages' own services from starting (we run our own daemons): a policy-rc.d
        # that refuses is honoured by invoke-rc.d and deb-systemd-invoke.
        policy = "/usr/sbin/policy-rc.d"
        made = not os.path.exists(policy) and run_logged(
            [*root, "sh", "-c", f"printf '#!/bin/sh\\nexit 101\\n' > {policy}; chmod 755 {policy}"],
            aptlog,
            append=True,
        )
        ok = run_logged(
            [*apt, "install", "-y", "--no-install-recommends", *packages], aptlog, append=True
        )
        if made:
            run_logged([*root, "rm", "-f", policy], aptlog, append=True)
        if not ok:
            fail(f"apt-get install {' '.join(packages)} failed", (aptlog, 30))

    def need(self, *commands: str, package: str) -> None:
        if not all(shutil.which(c) for c in commands):
            self.apt(package)
            if not all(shutil.which(c) for c in commands):
                fail(f"{' and '.join(commands)} not found after installing {package}")

    def java(self) -> None:
        def major() -> int:  # 17 for 'openjdk version "17.0.15"'
            if not shutil.which("java"):
                return 0
            done = subprocess.run(["java", "-version"], capture_output=True, text=True)
            found = re.search(r'version "(\d+)', done.stderr + done.stdout)
            return int(found.group(1)) if found else 0

        if (found := major()) < 17:
            log(f"Java 17+ is needed for Kafka 4 (found: {found or 'none'})")
            self.apt("openjdk-17-jre-headless")
            if major() < 17:
                fail("java 17+ still not found on PATH")

    def kafka_libs(self) -> Path:
        """The broker's jars, fetched by Maven once. The directory's name holds a hash of
        pom.xml, so bumping a version there fetches a fresh set on the next `up`."""
        pom = OPS / "kafka/pom.xml"
        libs = self.s.cache / f"kafka-libs-{sha256(pom.read_bytes())[:12]}"
        if (libs / ".complete").exists():
            return libs
        self.java()
        self.need("mvn", package="maven")
        version = re.search(r"<kafka.version>(.*?)</kafka.version>", pom.read_text())
        mvnlog, tmp = self.s.cache / "mvn-copy.log", libs.with_name(f"{libs.name}.{os.getpid()}")
        log(f"fetching Kafka {version and version.group(1)} jars with Maven (log: {mvnlog})")
        for attempt in (1, 2, 3):  # Maven Central has its bad minutes
            shutil.rmtree(tmp, ignore_errors=True)
            if run_logged(
                [
                    "mvn",
                    "-B",
                    "-ntp",
                    "-f",
                    str(pom),
                    f"-Dkafka.lib.dir={tmp}",
                    "dependency:copy-dependencies",
                ],
                mvnlog,
            ):
                break
            log(f"Maven attempt {attempt} failed")
            time.sleep(attempt * 3)
        if not any(tmp.glob("kafka_2.13-*.jar")):
            shutil.rmtree(tmp, ignore_errors=True)
            fail("could not fetch the Kafka jars with Maven", (mvnlog, 40))
        (tmp / ".complete").touch()
        shutil.rmtree(libs, ignore_errors=True)
        tmp.rename(libs)
        log(f"Kafka jars cached in {libs} ({len(list(libs.glob('*.jar')))} jars)")
        return libs


# ---------------------------------------------------------------- TLS and credentials


class Tls:
    """A test CA and, signed by it, a server certificate (127.0.0.1 and localhost: clients check
    the host name) and a client certificate, PEM with unencrypted keys. Made with openssl and
    ops/tls/openssl.cnf on the first `up`, reused while valid."""

    CA, SERVER, SERVER_KEY = "ca.crt", "server.crt", "server.key"

    def __init__(self, s: Settings) -> None:
        self.dir = s.state / "tls"
        self.ca, self.ca_key = self.dir / self.CA, self.dir / "ca.key"
        self.server, self.server_key = self.dir / self.SERVER, self.dir / self.SERVER_KEY
        self.client, self.client_key = self.dir / "client.crt", self.dir / "client.key"

    def valid(self) -> bool:
        """All there, chained to the CA, valid for at least another week."""

        def ok(*args: Path | str) -> bool:
            return subprocess.run(["openssl", *map(str, args)], capture_output=True).returncode == 0

        certs = (self.ca, self.server, self.client)
        files = (*certs, self.ca_key, self.server_key, self.client_key)
        return (
            all(f.exists() and f.stat().st_size > 0 for f in files)
            and ok("verify", "-CAfile", self.ca, self.server, self.client)
            and all(ok("x509", "-in", f, "-noout", "-checkend", "604800") for f in certs)
        )

    def ensure(self, installer: Installer) -> Tls:
        installer.need("openssl", package="openssl")
        if self.valid():
            return self
        out, tmp = self.dir.with_name("tls.log"), self.dir.with_name("tls.tmp")
        cnf = OPS / "tls/openssl.cnf"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        log(f"making a test CA and certificates in {self.dir} (log: {out})")
        new = ["req", "-config", cnf, "-new", "-newkey", "rsa:2048", "-nodes", "-sha256"]
        steps = [
            [
                *new,
                "-x509",
                "-days",
                "3650",
                "-subj",
                "/CN=neardup-stack test CA",
                "-extensions",
                "ca_ext",
                "-keyout",
                "ca.key",
                "-out",
                "ca.crt",
            ]
        ]
        for name, subject in (("server", f"/CN={HOST}"), ("client", "/CN=neardup-stack client")):
            steps += [
                [*new, "-subj", subject, "-keyout", f"{name}.key", "-out", f"{name}.csr"],
                [
                    "x509",
                    "-req",
                    "-in",
                    f"{name}.csr",
                    "-CA",
                    "ca.crt",
                    "-CAkey",
                    "ca.key",
                    "-CAcreateserial",
                    "-CAserial",
                    "ca.srl",
                    "-days",
                    "825",
                    "-sha256",
                    "-extfile",
                    cnf,
                    "-extensions",
                    f"{name}_ext",
                    "-out",
                    f"{name}.crt",
                ],
            ]
        out.write_text("")
        old_umask = os.umask(0o077)  # the keys are never readable by others, even for a moment
        try:
            ok = all(
                run_logged(["openssl", *map(str, step)], out, append=True, cwd=tmp)
                for step in steps
            )
        finally:
            os.umask(old_umask)
        if not ok:
            shutil.rmtree(tmp, ignore_errors=True)
            fail("could not make the test certificates with openssl", (out, 30))
        for f in tmp.glob("*.csr"):
            f.unlink()
        for f in tmp.glob("*.crt"):
            f.chmod(0o644)
        shutil.rmtree(self.dir, ignore_errors=True)
        tmp.rename(self.dir)
        if not self.valid():
            fail(f"the certificates just made in {self.dir} do not verify against their CA")
        return self

    def digest(self) -> str:
        """Changes with the CA or the server's certificate or key: a server started with other
        ones is restarted."""
        return sha256(b"".join(f.read_bytes() for f in (self.ca, self.server, self.server_key)))

    @staticmethod
    def pem_value(path: Path) -> str:
        """A PEM file as one properties value: its newlines as \\n escapes."""
        return "".join(line + "\\n" for line in path.read_text().splitlines())


USER = r"[A-Za-z][A-Za-z0-9._-]{0,63}"
KAFKA_PASSWORD = r"[A-Za-z0-9._~@%+:/!-]{1,128}"  # safe unquoted in JAAS and the SCRAM syntax


class Credentials:
    """The Kafka SASL user and the Redis ACL user with their passwords: from NEARDUP_STACK_*,
    else as kept in <state>/secrets (owner-only), else neardup and a random password; kept."""

    def __init__(self, s: Settings, keep: bool = True) -> None:
        folder, values = s.state / "secrets", []
        for name, pattern in (
            ("redis-user", USER),
            ("redis-password", ".+"),
            ("kafka-user", USER),
            ("kafka-password", KAFKA_PASSWORD),
        ):
            kept = read(folder / name).rstrip("\n")
            if not keep:  # `env`: what `up` kept
                if not kept:
                    raise StackError(
                        f"no {folder / name} yet: run 'ops/stack.sh up' first, with "
                        "the same NEARDUP_STACK_DIR"
                    )
                values.append(kept)
                continue
            var = "NEARDUP_STACK_" + name.upper().replace("-", "_")
            value = (
                s.env.get(var)
                or kept
                or ("neardup" if name.endswith("user") else secrets.token_urlsafe(18))
            )  # 144 bits
            if not re.fullmatch(pattern, value):  # checked before it is kept
                raise StackError(f"{var} (or {folder / name}) must match {pattern}")
            if value != kept:
                folder.mkdir(mode=0o700, parents=True, exist_ok=True)
                write(folder / name, value + "\n", private=True)
            values.append(value)
        self.redis_user, self.redis_password, self.kafka_user, self.kafka_password = values


# ---------------------------------------------------------------- Kafka


class Kafka:
    """One KRaft node, broker and controller, run as `java -cp '<jars>/*' kafka.Kafka
    server.properties`. Its server.properties: ops/kafka/server.properties (shared with
    docker-compose.yml), ops/kafka/stack.properties filled in, NEARDUP_STACK_KAFKA_EXTRA_CONFIG."""

    MARKER = "kafka.Kafka"  # in the broker's command line, in no tool's

    def __init__(self, s: Settings) -> None:
        self.s, self.dir = s, s.state / "kafka"
        self.data, self.logs = self.dir / "data", self.dir / "logs"
        self.pid = self.dir / "kafka.pid"
        self.props = self.dir / "server.properties"
        self.client_props = self.dir / "client-sasl-ssl.properties"
        self.ready = self.dir / "ready.pid"  # the broker that passed the login check
        self.proc: subprocess.Popen[bytes] | None = None  # the broker we started
        self.waiting: int | None = None  # the broker wait() must check
        self.log_offset = -1  # where its start begins in server.log; -1: it had started before
        self.libs = Path()

    def tool(self, main: str, *args: str) -> list[str]:
        return ["java", *TOOL_JVM, "-cp", f"{self.libs}/*", main, *args]

    def properties(self, c: Credentials, tls: Tls) -> str:
        s = self.s
        values = {
            "KAFKA_PORT": s.kafka_port,
            "KAFKA_CONTROLLER_PORT": s.kafka_controller_port,
            "KAFKA_SASL_PORT": s.kafka_sasl_port,
            "KAFKA_SASL_SSL_PORT": s.kafka_sasl_ssl_port,
            "KAFKA_DATA_DIR": self.data,
            "KAFKA_USER": c.kafka_user,
            "KAFKA_PASSWORD": c.kafka_password,
            "SERVER_CERT_PEM": tls.pem_value(tls.server),
            "SERVER_KEY_PEM": tls.pem_value(tls.server_key),
            "CA_CERT_PEM": tls.pem_value(tls.ca),
        }
        stack = render(OPS / "kafka/stack.properties", {k: str(v) for k, v in values.items()})
        extra = s.get("KAFKA_EXTRA_CONFIG")
        return (
            "# written by ops/stack.sh on each start from ops/kafka/server.properties and\n"
            "# ops/kafka/stack.properties: edit those, or NEARDUP_STACK_KAFKA_EXTRA_CONFIG\n\n"
            + (OPS / "kafka/server.properties").read_text()
            + "\n"
            + stack
            + (f"\n# NEARDUP_STACK_KAFKA_EXTRA_CONFIG\n{extra}\n" if extra else "")
        )

    @staticmethod
    def settings(properties: str) -> dict[str, str]:
        """The key=value lines, later ones winning as in Kafka: files with the same settings
        configure the same broker, whatever their comments and order."""
        pairs = (line.lstrip().partition("=") for line in properties.splitlines())
        return {k.strip(): v.lstrip() for k, _, v in pairs if k.strip() and k[0] not in "#!"}

    def launch(self, installer: Installer, c: Credentials, tls: Tls) -> None:
        """Make sure a broker with the current configuration runs; wait() waits for it, so
        that it boots while the Redis servers start."""
        s = self.s
        installer.java()
        self.libs = installer.kafka_libs()
        props = self.properties(c, tls)
        if (pid := running_pid(self.pid, self.MARKER)) is not None:
            if self.settings(props) == self.settings(read(self.props)):
                write(self.props, props, private=True)  # comments and order may have changed
                if read(self.ready).strip() != str(pid):
                    log(f"Kafka already running (pid {pid}), not yet checked: waiting for a login")
                    self.waiting = pid
                else:
                    log(f"Kafka already running (pid {pid}) on {HOST}:{s.kafka_port}")
                return
            log(
                f"Kafka (pid {pid}) runs with another configuration (ports, password, "
                "certificates or settings): restarting it"
            )
            self.stop()
        check_free(
            [s.kafka_port, s.kafka_controller_port, s.kafka_sasl_port, s.kafka_sasl_ssl_port],
            "Kafka",
            "NEARDUP_STACK_KAFKA_PORT, "
            "NEARDUP_STACK_KAFKA_CONTROLLER_PORT, _SASL_PORT, _SASL_SSL_PORT",
        )
        write(self.props, props, private=True)  # it holds the SASL password and the server key
        self.ready.unlink(missing_ok=True)
        self.format(c)
        server_log = self.logs / "server.log"
        self.log_offset = server_log.stat().st_size if server_log.exists() else 0
        log(
            f"starting Kafka on {HOST}:{s.kafka_port} (SASL_PLAINTEXT {s.kafka_sasl_port}, "
            f"SASL_SSL {s.kafka_sasl_ssl_port}, controller {s.kafka_controller_port})"
        )
        self.proc = spawn(
            "Kafka",
            [
                "java",
                *s.kafka_heap_opts,
                *s.kafka_jvm_opts,
                f"-Dkafka.logs.dir={self.logs}",
                f"-Dlog4j2.configurationFile={OPS / 'kafka/log4j2.xml'}",
                "-cp",
                f"{self.libs}/*",
                self.MARKER,
                str(self.props),
            ],
            self.logs / "kafka.out",
        )
        write(self.pid, f"{self.proc.pid}\n")
        self.waiting = self.proc.pid

    def format(self, c: Credentials) -> None:
        """Format fresh storage, with the user's SCRAM credentials in the new metadata log (so
        the first start needs no ConfigCommand)."""
        if (self.data / "meta.properties").exists():
            return
        cluster_id = self.dir / "cluster.id"
        cid = self.s.get("KAFKA_CLUSTER_ID") or read(cluster_id).strip()
        while not cid or cid.startswith("-"):  # a base64url UUID, as Kafka makes them
            cid = base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")
        write(cluster_id, cid + "\n")
        log(
            f"formatting Kafka storage in {self.data} (cluster id {cid}, SCRAM user "
            f"'{c.kafka_user}')"
        )
        scram = [f"{m}=[name={c.kafka_user},password={c.kafka_password}]" for m in SCRAM]
        out = self.logs / "storage-format.log"
        if not run_logged(
            self.tool(
                "kafka.tools.StorageTool",
                "format",
                "--ignore-formatted",
                "-t",
                cid,
                "-c",
                str(self.props),
                "--add-scram",
                scram[0],
                "--add-scram",
                scram[1],
            ),
            out,
        ):
            fail("formatting Kafka storage failed", (out, 40))

    def login_ok(self) -> bool:
        """A SCRAM login over SASL_SSL (TLS with host name check) and a metadata request."""
        return run_logged(
            self.tool(
                "org.apache.kafka.tools.TopicCommand",
                "--list",
                "--command-config",
                str(self.client_props),
                "--bootstrap-server",
                f"{HOST}:{self.s.kafka_sasl_ssl_port}",
            ),
            self.logs / "readiness-check.log",
            timeout=45,
        )

    def set_scram(self, c: Credentials) -> bool:
        """(Re)write the user's SCRAM credentials through the PLAINTEXT listener; idempotent. One
        mechanism per request (Kafka 4.2 refuses both in one: "A user credential cannot be
        altered twice in the same request"), from a file: a command line is public."""
        out, file = self.logs / "scram-credentials.log", self.dir / "scram.properties"
        out.write_text("")
        try:
            for mechanism in SCRAM:
                write(file, f"{mechanism}=password={c.kafka_password}\n", private=True)
                if not run_logged(
                    self.tool(
                        "kafka.admin.ConfigCommand",
                        "--bootstrap-server",
                        f"{HOST}:{self.s.kafka_port}",
                        "--alter",
                        "--entity-type",
                        "users",
                        "--entity-name",
                        c.kafka_user,
                        "--add-config-file",
                        str(file),
                    ),
                    out,
                    append=True,
                    timeout=60,
                ):
                    return False
            return True
        finally:
            file.unlink(missing_ok=True)

    def started(self) -> bool:
        """True once the broker logged, in this start's part of server.log, that it serves."""
        server_log = self.logs / "server.log"
        if not server_log.exists():
            return False
        if server_log.stat().st_size < self.log_offset:
            self.log_offset = 0  # the log was rolled over
        with server_log.open("rb") as f:
            f.seek(self.log_offset)
            text = f.read()
        return b"Kafka Server started" in text or b"started (kafka.server.KafkaRaftServer)" in text

    def wait(self, c: Credentials, tls: Tls) -> None:
        """Wait until the broker serves a SCRAM login over SASL_SSL. If a login fails (storage
        formatted without the user, or with another password), write the user's SCRAM
        credentials once through the PLAINTEXT listener and try again."""
        if (pid := self.waiting) is None:
            return
        s, logs = self.s, self.logs
        write(
            self.client_props,
            render(
                OPS / "kafka/client-sasl-ssl.properties",
                {
                    "KAFKA_USER": c.kafka_user,
                    "KAFKA_PASSWORD": c.kafka_password,
                    "CA_FILE": str(tls.ca),
                },
            ),
            private=True,
        )
        tails = ((logs / "kafka.out", 40), (logs / "server.log", 60))
        deadline, started = time.monotonic() + s.kafka_start_timeout, self.log_offset < 0
        scram_written, scram_failures = False, 0
        while True:
            if not (self.proc.poll() is None if self.proc else alive(pid)):
                self.pid.unlink(missing_ok=True)
                fail(f"Kafka exited while starting (logs in {logs})", *tails)
            started = started or (port_open(s.kafka_port) and self.started())
            if started and self.login_ok():
                break
            if started and not scram_written:
                if scram_failures == 0:
                    log(f"no SCRAM login as '{c.kafka_user}' yet: writing its SCRAM credentials")
                scram_written = self.set_scram(c)
                scram_failures += 0 if scram_written else 1
                if scram_failures >= 3:
                    fail(
                        f"could not write the SCRAM credentials of '{c.kafka_user}' (Kafka pid "
                        f"{pid} still running; logs in {logs})",
                        (logs / "scram-credentials.log", 30),
                    )
            if time.monotonic() >= deadline:
                fail(
                    f"Kafka did not accept a SCRAM login over SASL_SSL on {HOST}:"
                    f"{s.kafka_sasl_ssl_port} within {s.kafka_start_timeout}s (pid {pid} still "
                    f"running; logs in {logs})",
                    *tails,
                    (logs / "scram-credentials.log", 20),
                    (logs / "readiness-check.log", 20),
                )
            time.sleep(0.5)
        write(self.ready, f"{pid}\n")
        log(
            f"Kafka is up (pid {pid}) on {HOST}:{s.kafka_port}, SASL on {s.kafka_sasl_port} and "
            f"{s.kafka_sasl_ssl_port} (user '{c.kafka_user}')"
        )

    def stop(self) -> None:
        stop_pidfile("Kafka", self.pid, self.MARKER, self.s.stop_timeout)
        self.ready.unlink(missing_ok=True)

    def status(self) -> tuple[str, bool]:
        s = self.s
        if (pid := running_pid(self.pid, self.MARKER)) is None:
            return "kafka: stopped", False
        if closed := [
            str(p)
            for p in (s.kafka_port, s.kafka_sasl_port, s.kafka_sasl_ssl_port)
            if not port_open(p)
        ]:
            return (
                f"kafka: running (pid {pid}) but not accepting connections on port(s) "
                f"{' '.join(closed)}"
            ), False
        return (
            f"kafka: running (pid {pid}) on {HOST}:{s.kafka_port}, SASL_PLAINTEXT "
            f"{s.kafka_sasl_port}, SASL_SSL {s.kafka_sasl_ssl_port}"
        ), True


# ---------------------------------------------------------------- Redis


def redis_cli(port: int, *args: str) -> str:
    """A command to the Redis on PORT as the default user: its reply, "" if it does not answer."""
    try:
        done = subprocess.run(
            ["redis-cli", "-h", HOST, "-p", str(port), *args],
            text=True,
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


class RedisServer:
    """One redis-server of the stack (Debian's, run as our own daemon, not the system's
    service): `redis-server CONF --include ops/redis/persistence.conf ARGS`, its files in DIR."""

    MARKER = "redis-server"
    PERSISTENCE = OPS / "redis/persistence.conf"

    def __init__(self, s: Settings, name: str, dir: Path, ports: Sequence[int]) -> None:
        self.s, self.name, self.dir, self.ports = s, name, dir, list(ports)
        self.pid, self.stamp, self.log = dir / "redis.pid", dir / "redis.stamp", dir / "redis.log"
        self.out = dir / "redis.out"
        self.proc: subprocess.Popen[bytes] | None = None  # the server launch() started

    persistent = True  # with ops/redis/persistence.conf

    def program(self) -> list[str]:
        return ["redis-server"]

    def launch(self, conf: Path, args: list[str], extra: str = "", own_conf: bool = False) -> None:
        """Make sure it runs with CONF and ARGS. One running with the same command line, config
        files and EXTRA (a digest of its certificates) is left alone; one with others is
        stopped; then a new one is started (in the foreground of its own session, not
        --daemonize, so that one dying as it starts is noticed at once). OWN_CONF: CONF is
        the server's to rewrite (a Sentinel, or a node Sentinel reconfigures), so EXTRA stands
        for it in the stamp instead of its text."""
        argv = [
            *self.program(),
            str(conf),
            *(["--include", str(self.PERSISTENCE)] if self.persistent else []),
            *args,
            "--pidfile",
            str(self.pid),
            "--logfile",
            str(self.log),
        ]
        text = "" if own_conf else read(conf)
        stamp = sha256("\n".join([*argv, text, read(self.PERSISTENCE), extra]))
        where = f"{HOST}:{','.join(map(str, self.ports))}"
        if (pid := running_pid(self.pid, self.MARKER)) is not None:
            if read(self.stamp).strip() == stamp:
                return log(f"{self.name} already running (pid {pid}) on {where}")
            log(f"{self.name} (pid {pid}) runs with another configuration: restarting it")
            self.stop()
        check_free(
            self.ports,
            self.name,
            "NEARDUP_STACK_REDIS_PORT, _REDIS_TLS_PORT, _REDIS_CLUSTER_PORT, "
            "_REDIS_CLUSTER_BUS_PORT, _REDIS_PRIMARY_PORT, _SENTINEL_PORT; or the system's "
            "redis-server: 'service redis-server stop'",
        )
        self.pid.unlink(missing_ok=True)
        log(f"starting {self.name} on {where}")
        self.proc = spawn(self.name, argv, self.out)
        write(self.stamp, stamp + "\n")

    def wait(self) -> None:
        """Until the server launch() started answers PONG: its AOF is loaded."""
        if self.proc is None:
            return
        deadline = time.monotonic() + self.s.redis_start_timeout
        tails = ((self.out, 20), (self.log, 40))
        while redis_cli(self.ports[0], "PING") != "PONG":  # LOADING while it reads its AOF
            if self.proc.poll() is not None and running_pid(self.pid, self.MARKER) is None:
                self.stamp.unlink(missing_ok=True)
                fail(f"{self.name} exited while starting (log: {self.log})", *tails)
            if time.monotonic() >= deadline:
                fail(
                    f"{self.name} did not answer PING on {HOST}:{self.ports[0]} within "
                    f"{self.s.redis_start_timeout}s (still loading its AOF? "
                    "NEARDUP_STACK_REDIS_START_TIMEOUT)",
                    *tails,
                )
            time.sleep(0.1)
        for _ in range(50):  # it answers a moment before it writes its pid file
            if (pid := running_pid(self.pid, self.MARKER)) is not None:
                return log(f"{self.name} is up (pid {pid}) on {HOST}:{self.ports[0]}")
            time.sleep(0.1)
        fail(f"{self.name} answers but its pid file {self.pid} is missing")

    def stop(self) -> None:
        stop_pidfile(self.name, self.pid, self.MARKER, self.s.stop_timeout)


class Redis(RedisServer):
    """The main server: a plain port and a TLS port that wants a client certificate from the
    stack's CA; the users of ops/redis/users.acl; persistence as every Redis of the project."""

    def __init__(self, s: Settings) -> None:
        super().__init__(s, "Redis", s.state / "redis", (s.redis_port, s.redis_tls_port))

    @staticmethod
    def users(c: Credentials) -> str:
        """The ACL file: ops/redis/users.acl filled in, without its comments (an ACL file has
        none)."""
        users = render(
            OPS / "redis/users.acl",
            {"REDIS_USER": c.redis_user, "REDIS_PASSWORD_SHA256": sha256(c.redis_password)},
        )
        return "".join(line for line in users.splitlines(True) if line[:1] != "#")

    @staticmethod
    def arguments(s: Settings, dir: Path, tls: Path, acl: Path) -> list[str]:
        """redis-server's arguments after the configuration files: the ports, the data DIR,
        the certificates of the TLS directory and the ACL file (paths on the machine, or in a
        container: tests/integration/servers.py runs the same server in one)."""
        return [
            "--port",
            str(s.redis_port),
            "--tls-port",
            str(s.redis_tls_port),
            "--dir",
            str(dir),
            "--tls-cert-file",
            str(tls / Tls.SERVER),
            "--tls-key-file",
            str(tls / Tls.SERVER_KEY),
            "--tls-ca-cert-file",
            str(tls / Tls.CA),
            "--aclfile",
            str(acl),
        ]

    def start(self, c: Credentials, tls: Tls) -> None:
        acl, s = self.dir / "users.acl", self.s
        write(acl, self.users(c), private=True)
        self.launch(
            OPS / "redis/redis.conf",
            [*self.arguments(s, self.dir, tls.dir, acl), *s.redis_args],
            f"tls {tls.digest()}",
        )  # NEARDUP_STACK_REDIS_ARGS last: they win
        if self.proc is not None:
            return self.wait()
        # it runs with the same settings: only the users may have changed
        if (reply := redis_cli(s.redis_port, "ACL", "LOAD")) != "OK":
            fail(f"Redis (port {s.redis_port}) did not reload its users from {acl}: {reply}")

    def status(self) -> tuple[str, bool]:
        s = self.s
        if (pid := running_pid(self.pid, self.MARKER)) is None:
            return "redis: stopped", False
        if redis_cli(s.redis_port, "PING") != "PONG":
            return f"redis: running (pid {pid}) but no PONG on {HOST}:{s.redis_port}", False
        if not port_open(s.redis_tls_port):
            return (
                f"redis: running (pid {pid}) on {HOST}:{s.redis_port} but its TLS port "
                f"{s.redis_tls_port} is closed"
            ), False
        return f"redis: running (pid {pid}) on {HOST}:{s.redis_port}, TLS {s.redis_tls_port}", True


# ---------------------------------------------------------------- Redis Cluster


class Cluster:
    """Three primaries, each with a replica (which the tests promote: CLUSTER FAILOVER, or the
    primary killed), no password, created once with `redis-cli --cluster create`; each node's
    nodes.conf and AOF (<state>/redis-cluster/<port>) keep the cluster, its roles and its data
    across restarts."""

    def __init__(self, s: Settings) -> None:
        self.s, self.dir = s, s.state / "redis-cluster"
        pairs = zip(s.cluster_ports, s.bus_ports, strict=True)
        self.nodes = [
            RedisServer(s, f"Redis Cluster node {p}", self.dir / str(p), (p, bus))
            for p, bus in pairs
        ]

    @staticmethod
    def arguments(port: int, bus: int, dir: Path) -> list[str]:
        """A node's arguments after cluster-node.conf: its ports and its data DIR (on the
        machine, or in a container)."""
        return [
            "--port",
            str(port),
            "--cluster-port",
            str(bus),
            "--dir",
            str(dir),
            "--cluster-config-file",
            str(dir / "nodes.conf"),
        ]

    @staticmethod
    def create_command(ports: Sequence[int]) -> list[str]:
        """redis-cli's command that makes the cluster of fresh nodes: three primaries, and a
        replica of each (redis-cli puts a replica on another port than its primary's)."""
        addresses = [f"{HOST}:{port}" for port in ports]
        return ["redis-cli", "--cluster", "create", *addresses, "--cluster-replicas", "1",
                "--cluster-yes"]  # fmt: skip

    @staticmethod
    def info(port: int) -> dict[str, str]:
        text = redis_cli(port, "CLUSTER", "INFO")
        return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)

    def start(self) -> None:
        for node in self.nodes:  # all three boot at once, then each is waited for
            port, bus = node.ports
            node.launch(OPS / "redis/cluster-node.conf", self.arguments(port, bus, node.dir))
        for node in self.nodes:
            node.wait()
        # create it if every node is new (knows only itself, holds no slots)
        addresses = [f"{HOST}:{port}" for port in self.s.cluster_ports]
        out = self.dir / "create.log"
        infos = [self.info(port) for port in self.s.cluster_ports]
        fresh = sum(
            i.get("cluster_known_nodes") == "1" and i.get("cluster_slots_assigned") == "0"
            for i in infos
        )
        if fresh == len(self.nodes):
            log(f"creating the Redis Cluster of {' '.join(addresses)} (log: {out})")
            if not run_logged(self.create_command(self.s.cluster_ports), out):
                fail("redis-cli --cluster create failed", (out, 30))
        elif fresh:
            fail(
                f"the Redis Cluster in {self.dir} is half made ({fresh} of {len(self.nodes)} "
                "nodes are new): run 'ops/stack.sh down', remove that directory (its data) and "
                "run up again"
            )
        deadline = time.monotonic() + self.s.redis_start_timeout
        while True:
            states = {n: self.info(n.ports[0]).get("cluster_state", "?") for n in self.nodes}
            if not (bad := [node for node, state in states.items() if state != "ok"]):
                break
            if time.monotonic() >= deadline:
                node, state = bad[0], states[bad[0]]
                fail(
                    f"the Redis Cluster node on {HOST}:{node.ports[0]} says cluster_state:{state}"
                    f" after {self.s.redis_start_timeout}s (to start afresh: ops/stack.sh down; "
                    f"rm -rf {self.dir})",
                    (out, 20),
                    (node.log, 30),
                )
            time.sleep(0.2)
        log(f"Redis Cluster is up: {' '.join(addresses)} (cluster_state:ok)")

    def stop(self) -> None:
        """Every node with a directory in the state dir, whatever the ports are now."""
        for pid in sorted(self.dir.glob("*/redis.pid")):
            stop_pidfile(
                f"Redis Cluster node {pid.parent.name}",
                pid,
                RedisServer.MARKER,
                self.s.stop_timeout,
            )

    def status(self) -> list[tuple[str, bool]]:
        lines = []
        for node in self.nodes:
            port = node.ports[0]
            if (pid := running_pid(node.pid, node.MARKER)) is None:
                lines.append((f"redis-cluster: node on {HOST}:{port} stopped", False))
            else:
                state = self.info(port).get("cluster_state", "?")
                lines.append(
                    (
                        f"redis-cluster: node running (pid {pid}) on {HOST}:{port}, "
                        f"cluster_state:{state}",
                        state == "ok",
                    )
                )
        return lines


# ---------------------------------------------------------------- Redis with replicas


class SentinelServer(RedisServer):
    """One `redis-sentinel CONF`: no persistence file (it keeps its state in CONF)."""

    MARKER = "redis-sentinel"
    persistent = False

    def program(self) -> list[str]:
        return ["redis-sentinel"]


class ReplicaSet:
    """A primary and its replica, no password, and three Sentinels that watch them as one
    service and promote the replica when the primary is down. Each node and Sentinel starts
    on a copy of its configuration in its own directory (<state>/redis-replicas/<port>),
    made once: the Sentinels rewrite them as roles change, so who is primary is kept across
    restarts, and `up` leaves a set that failed over as it is."""

    def __init__(self, s: Settings) -> None:
        self.s, self.dir = s, s.state / "redis-replicas"
        self.nodes = [
            RedisServer(s, f"Redis replica-set node {p}", self.dir / str(p), (p,))
            for p in s.replica_ports
        ]
        self.sentinels = [
            SentinelServer(s, f"Redis Sentinel {p}", self.dir / str(p), (p,))
            for p in s.sentinel_ports
        ]

    def start(self) -> None:
        s, primary = self.s, self.s.replica_ports[0]
        for node in self.nodes:
            port = node.ports[0]
            conf = node.dir / "redis.conf"
            made = (OPS / "redis/replica-node.conf").read_text()
            if port != primary:
                made += f"replicaof {HOST} {primary}\n"
            self._once(conf, made)
            node.launch(
                conf,
                ["--port", str(port), "--dir", str(node.dir)],
                extra=f"made {sha256(made)}",
                own_conf=True,
            )
        for node in self.nodes:
            node.wait()
        for sentinel in self.sentinels:
            conf = sentinel.dir / "sentinel.conf"
            made = render(
                OPS / "redis/sentinel.conf",
                {
                    "PORT": str(sentinel.ports[0]),
                    "DIR": str(sentinel.dir),
                    "SERVICE": s.redis_service,
                    "PRIMARY_PORT": str(primary),
                },
            )
            self._once(conf, made)
            sentinel.launch(conf, [], extra=f"made {sha256(made)}", own_conf=True)
        for sentinel in self.sentinels:
            sentinel.wait()
        self._wait_ready()

    @staticmethod
    def _once(conf: Path, made: str) -> None:
        """Write CONF unless it was made from MADE before: the server's rewrites of it stay,
        a change of ours (other ports) replaces it."""
        mark = conf.with_name(conf.name + ".made")
        if read(mark) != sha256(made) or not conf.exists():
            write(conf, made)
            write(mark, sha256(made))

    def sentinel_state(self, port: int) -> dict[str, str]:
        """What the Sentinel on PORT knows of the service (SENTINEL MASTER), {} if nothing."""
        words = redis_cli(port, "SENTINEL", "MASTER", self.s.redis_service).splitlines()
        return dict(zip(words[::2], words[1::2], strict=False))

    def _wait_ready(self) -> None:
        """Until each Sentinel knows the primary, its replica and the two other Sentinels:
        before that a failover could not reach its quorum."""
        deadline = time.monotonic() + self.s.redis_start_timeout
        while True:
            states = [self.sentinel_state(p) for p in self.s.sentinel_ports]
            if all(
                st.get("flags") == "master"
                and st.get("num-slaves") == "1"
                and st.get("num-other-sentinels") == "2"
                for st in states
            ):
                break
            if time.monotonic() >= deadline:
                fail(
                    f"the Sentinels do not all see the primary, its replica and each other "
                    f"after {self.s.redis_start_timeout}s: {states}",
                    *((x.log, 20) for x in self.sentinels),
                )
            time.sleep(0.2)
        primary = states[0].get("ip", "?") + ":" + states[0].get("port", "?")
        log(f"Redis replica set is up: primary {primary}, Sentinels {self.addresses()}")

    def addresses(self) -> str:
        return ",".join(f"{HOST}:{p}" for p in self.s.sentinel_ports)

    def stop(self) -> None:
        """The Sentinels first (else they would fail over a primary being stopped), then
        every node with a directory in the state dir, whatever the ports are now."""
        for pid in sorted(self.dir.glob("*/redis.pid")):
            is_sentinel = (pid.parent / "sentinel.conf").exists()
            if is_sentinel:
                stop_pidfile(
                    f"Redis Sentinel {pid.parent.name}", pid, "redis-sentinel", self.s.stop_timeout
                )
        for pid in sorted(self.dir.glob("*/redis.pid")):
            if not (pid.parent / "sentinel.conf").exists():
                stop_pidfile(
                    f"Redis replica-set node {pid.parent.name}",
                    pid,
                    RedisServer.MARKER,
                    self.s.stop_timeout,
                )

    def status(self) -> list[tuple[str, bool]]:
        lines = []
        for node in self.nodes:
            port = node.ports[0]
            if (pid := running_pid(node.pid, node.MARKER)) is None:
                lines.append((f"redis-replicas: node on {HOST}:{port} stopped", False))
                continue
            info = redis_cli(port, "INFO", "replication")
            role = re.search(r"^role:(\w+)", info, re.MULTILINE)
            lines.append(
                (
                    f"redis-replicas: node running (pid {pid}) on {HOST}:{port}, "
                    f"role:{role.group(1) if role else '?'}",
                    role is not None,
                )
            )
        for sentinel in self.sentinels:
            port = sentinel.ports[0]
            if (pid := running_pid(sentinel.pid, sentinel.MARKER)) is None:
                lines.append((f"redis-sentinel: on {HOST}:{port} stopped", False))
                continue
            st = self.sentinel_state(port)
            lines.append(
                (
                    f"redis-sentinel: running (pid {pid}) on {HOST}:{port}, primary "
                    f"{st.get('ip', '?')}:{st.get('port', '?')} ({st.get('flags', '?')})",
                    st.get("flags") == "master",
                )
            )
        return lines


# ---------------------------------------------------------------- commands


class Stack:
    def __init__(self, s: Settings) -> None:
        self.s, self.installer, self.tls = s, Installer(s), Tls(s)
        self.kafka, self.redis, self.cluster = Kafka(s), Redis(s), Cluster(s)
        self.replicas = ReplicaSet(s)

    def prepare(self) -> Credentials:
        """What every start needs first: sane ports, the certificates, the passwords."""
        self.s.check_ports()
        self.tls.ensure(self.installer)
        return Credentials(self.s)

    def up(self) -> None:
        t0, c = time.monotonic(), self.prepare()
        self.kafka.launch(self.installer, c, self.tls)  # it boots while the Redis servers start
        self.installer.need("redis-server", "redis-cli", package="redis-server")
        self.redis.start(c, self.tls)
        if self.s.cluster:
            self.cluster.start()
        if self.s.replicas:
            self.installer.need("redis-sentinel", package="redis-sentinel")
            self.replicas.start()
        self.kafka.wait(c, self.tls)
        log(f"stack is up in {time.monotonic() - t0:.0f}s; state in {self.s.state}")

    def down(self) -> None:
        self.kafka.stop()
        self.redis.stop()
        self.cluster.stop()
        self.replicas.stop()

    def status(self) -> int:
        lines = [self.kafka.status(), self.redis.status()]
        lines += self.cluster.status() if self.s.cluster else []
        lines += self.replicas.status() if self.s.replicas else []
        print(*(line for line, _ in lines), f"state: {self.s.state}", sep="\n")
        return 0 if all(ok for _, ok in lines) else 1

    def env(self) -> None:
        s, c, tls = self.s, Credentials(self.s, keep=False), self.tls
        if missing := [f for f in (tls.ca, tls.client, tls.client_key) if not f.exists()]:
            raise StackError(
                f"no {missing[0]} yet: run 'ops/stack.sh up' first, with the same NEARDUP_STACK_DIR"
            )
        lines = {
            "NEARDUP_BOOTSTRAP_SERVERS": f"{HOST}:{s.kafka_port}",
            "NEARDUP_REDIS_URL": f"redis://{HOST}:{s.redis_port}/0",
            "NEARDUP_STACK_REDIS_USER": c.redis_user,
            "NEARDUP_STACK_REDIS_PASSWORD": c.redis_password,
            "NEARDUP_STACK_REDIS_TLS_URL": f"rediss://{HOST}:{s.redis_tls_port}/0",
            "NEARDUP_STACK_CA_FILE": str(tls.ca),
            "NEARDUP_STACK_CLIENT_CERT": str(tls.client),
            "NEARDUP_STACK_CLIENT_KEY": str(tls.client_key),
            "NEARDUP_STACK_KAFKA_SASL": f"{HOST}:{s.kafka_sasl_port}",
            "NEARDUP_STACK_KAFKA_SASL_SSL": f"{HOST}:{s.kafka_sasl_ssl_port}",
            "NEARDUP_STACK_KAFKA_USER": c.kafka_user,
            "NEARDUP_STACK_KAFKA_PASSWORD": c.kafka_password,
        }
        if s.cluster:
            lines["NEARDUP_STACK_REDIS_CLUSTER_URL"] = f"redis://{HOST}:{s.cluster_ports[0]}/0"
        if s.replicas:  # the values of serve's --redis-sentinel and --redis-service
            lines["NEARDUP_STACK_REDIS_SENTINEL"] = self.replicas.addresses()
            lines["NEARDUP_STACK_REDIS_SERVICE"] = s.redis_service
        for name, value in lines.items():  # always single-quoted for sh: it's -> 'it'\''s'
            print(f"export {name}='" + value.replace("'", "'\\''") + "'")

    def restart_kafka(self) -> None:
        c = self.prepare()
        self.kafka.stop()
        self.kafka.launch(self.installer, c, self.tls)
        self.kafka.wait(c, self.tls)

    def restart_redis(self) -> None:
        c = self.prepare()
        self.redis.stop()
        self.installer.need("redis-server", "redis-cli", package="redis-server")
        self.redis.start(c, self.tls)

    def restart_redis_cluster(self) -> None:
        if not self.s.cluster:
            raise StackError("the Redis Cluster is off (NEARDUP_STACK_CLUSTER=0)")
        self.s.check_ports()
        self.cluster.stop()
        self.installer.need("redis-server", "redis-cli", package="redis-server")
        self.cluster.start()

    def install(self) -> None:
        self.installer.need("redis-server", "redis-cli", package="redis-server")
        self.installer.need("redis-sentinel", package="redis-sentinel")
        self.installer.need("openssl", package="openssl")
        self.installer.java()
        libs = self.installer.kafka_libs()
        log(f"installed: redis-server, redis-sentinel, openssl, java 17+; Kafka jars in {libs}")

    def browser(self) -> None:
        """Debian's Chromium and chromedriver, for the browser tests (tests/browser)."""
        self.installer.need("chromium", package="chromium")
        self.installer.need("chromedriver", package="chromium-driver")
        log("installed: chromium, chromedriver")


def main(argv: list[str]) -> int:
    command = argv[0] if argv else ""
    if command in ("help", "-h", "--help"):
        sys.stderr.write(__doc__ or "")
        return 0
    if command not in (
        "up",
        "down",
        "status",
        "env",
        "restart-kafka",
        "restart-redis",
        "restart-redis-cluster",
        "install",
        "browser",
    ):
        sys.stderr.write((__doc__ or "").split("\n\n")[1] + "\n")  # the usage lines
        return 2
    try:
        stack = Stack(Settings(os.environ))
        if command not in ("status", "env"):  # those only look
            take_lock(stack.s.state)
        return getattr(stack, command.replace("-", "_"))() or 0
    except StackError as exc:
        log(f"ERROR: {exc}")
        return 1
    except KeyboardInterrupt:
        log("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
