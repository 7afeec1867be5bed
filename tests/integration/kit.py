"""Helpers of the integration suite: endpoints, unique names, topics, producing, reading
decisions back, and `neardup serve` child processes.

Nothing here mocks Kafka or Redis: every helper talks to the real servers whose endpoints
come from NEARDUP_BOOTSTRAP_SERVERS and NEARDUP_REDIS_URL (as `ops/stack.sh env` prints
them), with the stack's defaults when they are unset.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import pytest
import redis
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import KafkaError, TopicAlreadyExistsError, UnknownTopicOrPartitionError
from redis.cluster import RedisCluster

from detector.index import Index
from detector.pipeline import Detector, prepare
from detector.records import Decision
from detector.settings import EngineSettings

# Read once, at import: the unit suite's autouse fixture removes every NEARDUP_* variable
# from os.environ while a test runs.
CALLER_ENV = {k: v for k, v in os.environ.items() if k.startswith("NEARDUP_")}
BOOTSTRAP = CALLER_ENV.get("NEARDUP_BOOTSTRAP_SERVERS") or "127.0.0.1:9092"
REDIS_URL = CALLER_ENV.get("NEARDUP_REDIS_URL") or "redis://127.0.0.1:6379/0"

# The stack's secured endpoints (tests/integration/test_security.py): an ACL user on the
# Redis above and its TLS port, and SASL listeners of the broker above (same topics).
STACK_REDIS_USER = CALLER_ENV.get("NEARDUP_STACK_REDIS_USER", "")
STACK_REDIS_PASSWORD = CALLER_ENV.get("NEARDUP_STACK_REDIS_PASSWORD", "")
STACK_REDIS_TLS_URL = CALLER_ENV.get("NEARDUP_STACK_REDIS_TLS_URL", "")
STACK_CA_FILE = CALLER_ENV.get("NEARDUP_STACK_CA_FILE", "")
STACK_CLIENT_CERT = CALLER_ENV.get("NEARDUP_STACK_CLIENT_CERT", "")
STACK_CLIENT_KEY = CALLER_ENV.get("NEARDUP_STACK_CLIENT_KEY", "")
STACK_KAFKA_SASL = CALLER_ENV.get("NEARDUP_STACK_KAFKA_SASL", "")  # SASL_PLAINTEXT
STACK_KAFKA_SASL_SSL = CALLER_ENV.get("NEARDUP_STACK_KAFKA_SASL_SSL", "")
STACK_KAFKA_USER = CALLER_ENV.get("NEARDUP_STACK_KAFKA_USER", "")
STACK_KAFKA_PASSWORD = CALLER_ENV.get("NEARDUP_STACK_KAFKA_PASSWORD", "")
# One node of the stack's Redis Cluster (3 primaries).
REDIS_CLUSTER_URL = CALLER_ENV.get("NEARDUP_STACK_REDIS_CLUSTER_URL", "")

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
SAMPLE = DATA / "sample.jsonl.gz"
SAMPLE_TRUTH = DATA / "sample-truth.jsonl.gz"
STREAM_2K = DATA / "stream-2k.jsonl.gz"
STREAM_2K_TRUTH = DATA / "stream-2k-truth.jsonl.gz"

# The fields that make a decision what it is (not the audit fields: time, version...).
VERDICT = ("decision", "duplicate_of", "distance", "similarity", "fingerprint", "exact")


def unique(prefix: str) -> str:
    return f"it-{prefix}-{uuid.uuid4().hex[:12]}"


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def write_jsonl(path: Path, records: Iterable[dict[str, Any]]) -> Path:
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            body = {k: v for k, v in r.items() if not k.startswith("_")}  # not reader notes
            f.write(json.dumps(body, ensure_ascii=False) + "\n")
    return path


def verdict(d: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(d.get(k) for k in VERDICT)


def child_env() -> dict[str, str]:
    """The environment of a child `python -m detector`: the caller's, without any
    NEARDUP_* engine option (so serve and detect decide with the same defaults), plus
    the two endpoints."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEARDUP_")}
    env["NEARDUP_BOOTSTRAP_SERVERS"] = BOOTSTRAP
    env["NEARDUP_REDIS_URL"] = REDIS_URL
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_detector(args: Sequence[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`python -m detector ARGS`, checked."""
    done = subprocess.run(
        [sys.executable, "-m", "detector", *args],
        cwd=ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, f"neardup {' '.join(args)} failed:\n{done.stderr[-3000:]}"
    return done


def stack(command: str, timeout: float = 300) -> None:
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


# ------------------------------------------------------------------------------- Redis


def redis_client() -> redis.Redis:
    return redis.Redis.from_url(REDIS_URL, socket_timeout=10, socket_connect_timeout=5)


def cluster_client() -> RedisCluster:
    """The stack's Redis Cluster; a test that needs it fails (never skips) without it."""
    if not REDIS_CLUSTER_URL:
        pytest.fail(
            "NEARDUP_STACK_REDIS_CLUSTER_URL is unset: `ops/stack.sh up` starts the cluster "
            "and `ops/stack.sh env` names it",
            pytrace=False,
        )
    return RedisCluster.from_url(REDIS_CLUSTER_URL, socket_timeout=10, socket_connect_timeout=5)


def index_keys(client: redis.Redis | RedisCluster, name: str) -> list[bytes]:
    """Every key of index NAME: its coordinator's (`nd:{NAME}:*`) and its shards'."""
    return [
        key
        for pattern in (f"nd:{{{name}}}:*", f"nd:{{{name}/*")
        for key in client.scan_iter(match=pattern, count=1000)
    ]


def drop_index(client: redis.Redis | RedisCluster, name: str) -> None:
    """Delete every key of index NAME (a cluster client splits the DEL by slot)."""
    keys = index_keys(client, name)
    for at in range(0, len(keys), 500):
        client.delete(*keys[at : at + 500])


# ------------------------------------------------------------------------------- Kafka


def admin() -> KafkaAdminClient:
    return KafkaAdminClient(
        bootstrap_servers=BOOTSTRAP.split(","), client_id="neardup-it", request_timeout_ms=20000
    )


def create_topics(topics: dict[str, int], configs: dict[str, str] | None = None) -> None:
    """Create topics (name -> partitions), with topic configs (e.g. `max.message.bytes`)
    if given, and wait until the broker serves them all."""
    client = admin()
    try:
        with contextlib.suppress(TopicAlreadyExistsError):
            client.create_topics(
                [NewTopic(t, n, 1, topic_configs=configs or {}) for t, n in topics.items()]
            )
        deadline = time.monotonic() + 30
        while True:
            described = {
                t["name"]: len(t["partitions"])
                for t in client.describe_topics(list(topics))
                if not t.get("error_code") and all(p["leader_id"] >= 0 for p in t["partitions"])
            }
            if all(described.get(t) == n for t, n in topics.items()):
                return
            assert time.monotonic() < deadline, f"topics not ready: {described} vs {topics}"
            time.sleep(0.2)
    finally:
        client.close()


def delete_topics(topics: Iterable[str]) -> None:
    """Best effort: the broker of a test machine should not collect every test's topics."""
    try:
        client = admin()
    except KafkaError:
        return
    try:
        client.delete_topics(list(topics), timeout_ms=10000)
    except (KafkaError, OSError):
        pass
    finally:
        client.close()


def delete_groups(groups: Iterable[str]) -> None:
    """Best effort, like delete_topics."""
    try:
        client = admin()
    except KafkaError:
        return
    try:
        client.delete_groups(list(groups))
    except (KafkaError, OSError):
        pass
    finally:
        client.close()


def group_members(group: str) -> tuple[str, int]:
    """(state, number of members) of a consumer group."""
    client = admin()
    try:
        described = client.describe_groups([group])
    finally:
        client.close()
    info = described.get(group, {}) if isinstance(described, dict) else {}
    return str(info.get("group_state", "")), len(info.get("members") or [])


def wait_for_group(group: str, members: int, timeout: float = 60) -> None:
    """Until the group is Stable with that many members (every member has partitions)."""
    deadline = time.monotonic() + timeout
    state: tuple[str, int] = ("", 0)
    while time.monotonic() < deadline:
        with contextlib.suppress(KafkaError):
            state = group_members(group)
        if state == ("Stable", members):
            return
        time.sleep(0.3)
    raise AssertionError(f"group {group} is {state}, not Stable with {members} members")


def committed_offset(group: str, topic: str, partition: int = 0) -> int | None:
    """The offset a group has committed (read without joining the group)."""
    consumer = KafkaConsumer(
        bootstrap_servers=BOOTSTRAP.split(","), group_id=group, enable_auto_commit=False
    )
    try:
        offset: int | None = consumer.committed(TopicPartition(topic, partition))
        return offset
    finally:
        consumer.close()


class Producer:
    """kafka-python producer that checks every send was acknowledged. A record larger than
    16 MiB needs a larger max_request_size (and a topic whose max.message.bytes takes it)."""

    def __init__(self, max_request_size: int = 16 * 1024 * 1024) -> None:
        self.producer = KafkaProducer(
            bootstrap_servers=BOOTSTRAP.split(","),
            acks="all",
            linger_ms=5,
            max_request_size=max_request_size,
        )
        self.pending: list[Any] = []

    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
    ) -> Any:
        future = self.producer.send(topic, value=value, key=key, partition=partition)
        self.pending.append(future)
        return future

    def send_record(self, topic: str, record: dict[str, Any], partition: int | None = None) -> Any:
        body = json.dumps(record, ensure_ascii=False).encode("utf-8")
        key = record["id"].encode("utf-8") if isinstance(record.get("id"), str) else None
        return self.send(topic, body, key, partition)

    def flush(self, timeout: float = 60) -> list[Any]:
        """Wait for every acknowledgement; returns their RecordMetadata, in send order."""
        self.producer.flush(timeout=timeout)
        done = [f.get(timeout=timeout) for f in self.pending]
        self.pending = []
        return done

    def close(self) -> None:
        self.producer.close(timeout=10)

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def produce_file(path: Path, topic: str, partitions: int) -> None:
    """The project's own producer: `neardup produce FILE --topic T --partitions N`."""
    run_detector(["produce", str(path), "--topic", topic, "--partitions", str(partitions)])


class TopicReader:
    """Reads a topic from its beginning without a group (nothing is committed), and keeps
    every record it has seen, in arrival order."""

    def __init__(self, topic: str, partitions: int = 1) -> None:
        self.topic = topic
        self.consumer = KafkaConsumer(
            bootstrap_servers=BOOTSTRAP.split(","),
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_partition_fetch_bytes=8 * 1024 * 1024,
        )
        self.partitions = [TopicPartition(topic, p) for p in range(partitions)]
        self.consumer.assign(self.partitions)
        self.consumer.seek_to_beginning(*self.partitions)
        self.records: list[dict[str, Any]] = []  # values, parsed, with _partition/_offset

    def poll(self, timeout_ms: int = 500) -> int:
        try:
            polled = self.consumer.poll(timeout_ms=timeout_ms)
        except UnknownTopicOrPartitionError:
            time.sleep(timeout_ms / 1000)
            return 0
        n = 0
        for tp in sorted(polled, key=lambda tp: tp.partition):
            for m in polled[tp]:
                value = json.loads(m.value)
                value["_partition"], value["_offset"] = m.partition, m.offset
                value["_key"] = m.key
                self.records.append(value)
                n += 1
        return n

    def until(self, done: Callable[[TopicReader], bool], timeout: float, idle: float = 0.0) -> bool:
        """Poll until done(self) holds (then keep polling while records still arrive,
        up to `idle` seconds), or until the timeout. True if done."""
        deadline = time.monotonic() + timeout
        while not done(self):
            if time.monotonic() > deadline:
                return False
            self.poll()
        quiet_until = time.monotonic() + idle
        while time.monotonic() < min(quiet_until, deadline):
            if self.poll(timeout_ms=300):
                quiet_until = time.monotonic() + idle
        return True

    def close(self) -> None:
        self.consumer.close()


class DecisionReader(TopicReader):
    def by_id(self) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in self.records:
            out[r["id"]].append(r)
        return out

    def first(self) -> dict[str, dict[str, Any]]:
        """The first decision published for each id."""
        out: dict[str, dict[str, Any]] = {}
        for r in self.records:
            out.setdefault(r["id"], r)
        return out

    def missing(self, ids: Iterable[str]) -> list[str]:
        seen = {r["id"] for r in self.records}
        return [i for i in ids if i not in seen]

    def wait_for(self, ids: Iterable[str], timeout: float, idle: float = 1.0) -> list[str]:
        """Poll until every id has a decision; returns the ids still missing."""
        wanted = set(ids)
        seen: set[str] = set()
        at = 0

        def complete(reader: TopicReader) -> bool:
            nonlocal at
            for r in reader.records[at:]:
                seen.add(r["id"])
            at = len(reader.records)
            return wanted <= seen

        self.until(complete, timeout, idle)
        return sorted(wanted - seen)


# ----------------------------------------------------------------------------- invariants


def when(decision: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(decision["decided_at"])


def check_invariants(
    records: list[dict[str, Any]],
    published: dict[str, list[dict[str, Any]]],
    reference: list[dict[str, Any]],
    threshold: float = 0.8,
) -> dict[str, dict[str, Any]]:
    """The DESIGN invariants on what serve published; returns one decision per id."""
    ids = [r["id"] for r in records]
    missing = [i for i in ids if i not in published]
    assert not missing, f"{len(missing)} records got no decision, e.g. {missing[:5]}"
    strangers = set(published) - set(ids)
    assert not strangers, f"decisions for ids never sent: {sorted(strangers)[:5]}"

    # A record delivered (or decided) more than once got the same decision each time.
    for i, ds in published.items():
        assert len({verdict(d) for d in ds}) == 1, f"{i} got different decisions: {ds}"
    final = {i: ds[0] for i, ds in published.items()}

    for i, d in final.items():
        assert d["decision"] in ("unique", "duplicate"), d
        assert (d["decision"] == "duplicate") == (d["duplicate_of"] is not None), d
        assert len(d["fingerprint"]) == 16 and int(d["fingerprint"], 16) >= 0, d
        assert d["_key"] == i.encode(), f"decision of {i} keyed {d['_key']!r}, not by its id"

    # No two records the detector itself judges near-duplicates are both unique: `detect`
    # on the same file names the pairs (id, duplicate_of) with their literal similarity.
    both_unique = [
        (r["id"], r["duplicate_of"], r["similarity"])
        for r in reference
        if r["duplicate_of"] is not None
        and r["similarity"] >= threshold
        and final[r["id"]]["decision"] == "unique"
        and final[r["duplicate_of"]]["decision"] == "unique"
    ]
    assert not both_unique, f"near-duplicate pairs both published as unique: {both_unique[:10]}"

    # Every duplicate_of names a record that was indexed before it: a record of the input,
    # itself indexed (exact copies are not), decided no later, and no cycle.
    for i, d in final.items():
        target = d["duplicate_of"]
        if target is None:
            continue
        assert target != i, d
        assert target in final, f"{i} is a duplicate of {target!r}, which is not an input record"
        assert not final[target]["exact"], (
            f"{i} is a duplicate of {target}, an exact copy that was never indexed"
        )
        assert when(final[target]) <= when(d), (
            f"{i} ({d['decided_at']}) names {target}, decided later ({final[target]['decided_at']})"
        )
    for start in final:
        seen = [start]
        at = final[start]["duplicate_of"]
        while at is not None:
            assert at not in seen, f"duplicate_of cycle: {[*seen, at]}"
            seen.append(at)
            at = final[at]["duplicate_of"]
    return final


# ------------------------------------------------------------------------- neardup serve


@dataclass
class Names:
    """Everything a test owns on the shared servers."""

    input: str = field(default_factory=lambda: unique("in"))
    output: str = field(default_factory=lambda: unique("out"))
    dead_letter: str = field(default_factory=lambda: unique("dlq"))
    group: str = field(default_factory=lambda: unique("group"))
    index: str = field(default_factory=lambda: unique("index"))

    def topics(self) -> list[str]:
        return [self.input, self.output, self.dead_letter]


class Serve:
    """One `neardup serve` child process; its log goes to a file. `env` adds to (or
    overrides) child_env(): how secrets reach it, as they never go on a command line."""

    def __init__(
        self,
        names: Names,
        log_path: Path,
        extra: Sequence[str] = (),
        env: dict[str, str] | None = None,
    ) -> None:
        self.names = names
        self.log_path = log_path
        self.env = dict(env or {})
        self.args = [
            sys.executable,
            "-m",
            "detector",
            "serve",
            "--input-topic",
            names.input,
            "--output-topic",
            names.output,
            "--dead-letter-topic",
            names.dead_letter,
            "--group",
            names.group,
            "--index",
            names.index,
            "--metrics-port",
            "0",
            "--batch-size",
            "64",
            *extra,
        ]
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def start(self) -> Serve:
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in wait()
        self.proc = subprocess.Popen(
            self.args,
            cwd=ROOT,
            env={**child_env(), **self.env},
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log(self, tail: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-tail:]
        except OSError:
            return ""

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM (finish the batch, commit, leave the group) and wait; the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"serve {self.pid} did not stop within {timeout}s of SIGTERM:\n{self.log()}"
            ) from None

    def kill(self) -> None:
        """SIGKILL: a crash, nothing finished or committed."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.kill()
        self.wait(30)

    def wait(self, timeout: float) -> int:
        assert self.proc is not None
        code = self.proc.wait(timeout)
        if self._log is not None:
            self._log.close()
            self._log = None
        return code


def new_ca(directory: Path) -> Path:
    """A freshly made CA certificate (PEM) that signed nothing: a trust anchor under which
    no server's certificate verifies."""
    key, cert = directory / "other-ca.key", directory / "other-ca.crt"
    request = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2"]
    subprocess.run(
        [*request, "-subj", "/CN=neardup-it-other-ca", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert


def logs(servers: Iterable[Serve]) -> str:
    return "\n".join(
        f"----- serve pid {s.pid} ({'alive' if s.alive() else 'exited'}) -----\n{s.log()}"
        for s in servers
        if s.proc is not None
    )


def decide_in_batches(index: Index, raw: list[bytes], size: int = 64) -> list[Decision]:
    """Decide raw records against an index as serve does, a batch at a time."""
    settings_ = EngineSettings()
    detector = Detector(
        settings_.engine(),
        index,
        settings_.block_scheme(),
        settings_.literal(),
        settings_.max_candidates,
    )
    out: list[Decision] = []
    for at in range(0, len(raw), size):
        batch = prepare(detector.engine, [(r, {}) for r in raw[at : at + size]], 10**7)
        assert not batch.errors
        out += detector.process(batch.docs, batch.prints)
    return out
