"""The topics serve, produce and tail use: whether they exist, how many partitions they
have and how large a record they take, creating the ones that are missing, and removing a
benchmark's own.

No client of ours lets the broker create a topic by naming it (auto.create.topics.enable
is on by default): a mistyped `--input-topic docments` would otherwise become a topic of
one partition that serve reads for ever. Topics are made here, on purpose, or not at all.
"""

from __future__ import annotations

import contextlib
import difflib
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient
from kafka.errors import AuthorizationError, KafkaError, TopicAlreadyExistsError

from ...errors import BackendUnavailable, ConfigError, cause
from .settings import KafkaSettings, connect, plain

log = logging.getLogger("neardup.kafka")

# The broker's default max.message.bytes: what a topic takes when we cannot ask it.
BROKER_DEFAULT_MAX_MESSAGE = 1_048_588
# What a record batch of one record adds to its key, value and headers: the batch header
# (61 bytes), the record's own varints and attributes, with room to spare.
RECORD_OVERHEAD = 128


@dataclass(frozen=True)
class Topic:
    name: str
    partitions: int
    # max.message.bytes: the largest record batch it takes (None: not allowed to ask)
    max_message_bytes: int | None


def record_size(key: bytes | None, value: bytes | None, headers: Iterable[Any] | None) -> int:
    """What one record weighs against a topic's max.message.bytes (an upper bound)."""
    size = RECORD_OVERHEAD + len(key or b"") + len(value or b"")
    return size + sum(len(k.encode()) + len(v or b"") + 8 for k, v in headers or ())


class Topics:
    """An admin connection for a command's start: look up, create, check."""

    def __init__(self, settings: KafkaSettings) -> None:
        self.admin = connect(KafkaAdminClient, "admin client", **settings.common())

    def __enter__(self) -> Topics:
        return self

    def __exit__(self, *_: object) -> None:
        self.admin.close()

    def names(self) -> list[str]:
        names: list[str] = self._ask(self.admin.list_topics)
        return [t for t in names if not t.startswith("__")]

    def describe(self, names: Iterable[str]) -> dict[str, Topic]:
        """The topics of `names` that exist (the others are left out)."""
        wanted = list(dict.fromkeys(names))
        found = self._ask(lambda: self.admin.describe_topics(wanted))
        partitions = {t["name"]: len(t["partitions"]) for t in found if t["error_code"] == 0}
        limits = self.limits(list(partitions))
        return {n: Topic(n, partitions[n], limits.get(n)) for n in wanted if n in partitions}

    def limits(self, names: Iterable[str]) -> dict[str, int]:
        """max.message.bytes of each topic, of those the broker lets us ask."""
        names = list(names)
        if not names:
            return {}
        wanted = {"max.message.bytes": None}
        resources = [ConfigResource(ConfigResourceType.TOPIC, n, configs=wanted) for n in names]
        try:
            got = self.admin.describe_configs(resources, config_filter="all")
        except KafkaError as exc:  # e.g. no DESCRIBE_CONFIGS in the ACL: assume the default
            log.warning(
                "cannot read the topics' max.message.bytes (%s): assuming %d",
                exc,
                BROKER_DEFAULT_MAX_MESSAGE,
            )
            return {}
        limits = {}
        for name, configs in got.get("topic", {}).items():
            with contextlib.suppress(KeyError, TypeError, ValueError):
                limits[name] = int(configs["max.message.bytes"]["value"])
        return limits

    def create(self, topics: dict[str, int], configs: dict[str, str] | None = None) -> list[str]:
        """Create those of the topics (name -> partitions) that do not exist; the names
        of those it created. The replication factor is the broker's default."""
        existing = set(self.names())
        new = {
            name: {"num_partitions": n, "replication_factor": -1, "configs": configs or {}}
            for name, n in topics.items()
            if name not in existing
        }
        if new:
            try:
                self._ask(lambda: self.admin.create_topics(new, wait_for_metadata=True))
            except ConfigError:
                raise
            except BackendUnavailable as exc:
                if isinstance(exc.__cause__, TopicAlreadyExistsError):
                    return []  # another process made them first
                raise
        return list(new)

    def missing(self, name: str, role: str) -> str:
        """Why a topic that does not exist is a problem, with the nearest existing names."""
        close = difflib.get_close_matches(name, self.names(), n=2, cutoff=0.75)
        hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
        return f"the {role} {name!r} does not exist{hint}"

    def _ask(self, request: Any) -> Any:
        try:
            return request()
        except KafkaError as exc:
            if cause(exc, AuthorizationError):
                raise ConfigError(f"Kafka refused an admin request: {exc}") from None
            raise BackendUnavailable(f"Kafka's admin API did not answer ({plain(exc)})") from exc


class TopicLimits:
    """The largest record each of some topics takes, read when made and again on
    refresh() (a topic's max.message.bytes can be changed while serve runs)."""

    def __init__(self, settings: KafkaSettings | None, topics: Iterable[str]) -> None:
        self.settings = settings
        self.topics = list(topics)
        self.bytes: dict[str, int] = {}
        self.refresh()

    def refresh(self) -> None:
        if self.settings is not None:  # None: the broker's default for every topic
            with Topics(self.settings) as admin:
                self.bytes = admin.limits(self.topics)

    def of(self, topic: str) -> int:
        return self.bytes.get(topic, BROKER_DEFAULT_MAX_MESSAGE)


def ensure_topics(settings: KafkaSettings, topics: dict[str, int]) -> None:
    """Create the topics that do not exist yet (name -> partitions)."""
    with Topics(settings) as admin:
        admin.create(topics)


def remove(settings: KafkaSettings, topics: list[str], groups: list[str]) -> None:
    """Delete topics and consumer groups that nothing uses any more (a bench run's own),
    as far as the broker lets: what is left is only clutter."""
    admin = connect(KafkaAdminClient, "admin client", **settings.common())
    try:
        for delete, names in ((admin.delete_topics, topics), (admin.delete_groups, groups)):
            with contextlib.suppress(KafkaError):
                delete(names)
    finally:
        admin.close()
