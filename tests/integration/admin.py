"""What a test owns on the shared servers, and how it is made and removed: unique names,
topics and consumer groups (Kafka's admin client), an index's Redis keys."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest
import redis
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import KafkaError, TopicAlreadyExistsError
from redis.cluster import RedisCluster

from .endpoints import BOOTSTRAP


def unique(prefix: str) -> str:
    return f"it-{prefix}-{uuid.uuid4().hex[:12]}"


# ------------------------------------------------------------------------------- Redis


def index_keys(client: redis.Redis | RedisCluster, name: str) -> list[bytes]:
    """Every key of index NAME: its coordinator's (`nd:{NAME}:*`) and its shards'."""
    return [
        key
        for pattern in (f"nd:{{{name}}}:*", f"nd:{{{name}/*")
        for key in client.scan_iter(match=pattern, count=1000)
    ]


@pytest.fixture(name="names")
def index_names(backend: Any) -> Iterator[list[str]]:
    """Index names for a test to take (it appends them); each one's keys are deleted at
    the end. Imported by the index suites, where it stands for conftest's `names`."""
    made: list[str] = []
    yield made
    for name in made:
        drop_index(backend, name)


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


def _best_effort(action: Callable[[KafkaAdminClient], object]) -> None:
    """Cleanup that must not fail a test: the broker may be restarting (a fault test)."""
    try:
        client = admin()
    except KafkaError:
        return
    try:
        action(client)
    except (KafkaError, OSError):
        pass
    finally:
        client.close()


def delete_topics(topics: Iterable[str]) -> None:
    """Best effort: the broker of a test machine should not collect every test's topics."""
    _best_effort(lambda client: client.delete_topics(list(topics), timeout_ms=10000))


def delete_groups(groups: Iterable[str]) -> None:
    """Best effort, like delete_topics."""
    _best_effort(lambda client: client.delete_groups(list(groups)))


def group_members(group: str) -> tuple[str, int]:
    """(state, number of members) of a consumer group."""
    client = admin()
    try:
        described = client.describe_groups([group])
    finally:
        client.close()
    info = described.get(group, {}) if isinstance(described, dict) else {}
    return str(info.get("group_state", "")), len(info.get("members") or [])


def wait_for_group(
    group: str, members: int, timeout: float = 60, why: Callable[[], str] = lambda: ""
) -> None:
    """Until the group is Stable with that many members (every member has partitions).
    `why` adds to the failure (the consumers' logs): a member that never joins says why."""
    deadline = time.monotonic() + timeout
    state: tuple[str, int] = ("", 0)
    while time.monotonic() < deadline:
        with contextlib.suppress(KafkaError):
            state = group_members(group)
        if state == ("Stable", members):
            return
        time.sleep(0.3)
    raise AssertionError(f"group {group} is {state}, not Stable with {members} members\n{why()}")


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
