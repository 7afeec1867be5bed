"""The topics serve, produce and tail use: whether they exist, what they take, creating
the ones that are missing, removing a benchmark's own."""

from __future__ import annotations

import contextlib

from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import (
    KafkaError,
    TopicAlreadyExistsError,
)

from .settings import KafkaSettings, connect


def ensure_topics(settings: KafkaSettings, topics: dict[str, int]) -> None:
    """Create the topics that do not exist yet (name -> partitions)."""
    admin = connect(KafkaAdminClient, "admin", **settings.common())
    try:
        existing = set(admin.list_topics())
        new = [NewTopic(t, n, 1) for t, n in topics.items() if t not in existing]
        if new:
            with contextlib.suppress(TopicAlreadyExistsError):  # another got there first
                admin.create_topics(new)
    finally:
        admin.close()


def remove(settings: KafkaSettings, topics: list[str], groups: list[str]) -> None:
    """Delete topics and consumer groups that nothing uses any more (a bench run's own),
    as far as the broker lets: what is left is only clutter."""
    admin = connect(KafkaAdminClient, "admin", **settings.common())
    try:
        for delete, names in ((admin.delete_topics, topics), (admin.delete_groups, groups)):
            with contextlib.suppress(KafkaError):
                delete(names)
    finally:
        admin.close()
