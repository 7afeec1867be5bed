"""The rules of the names neardup gives things on its servers: Kafka topics and consumer
groups, and index names (the Redis key namespace).

Each rule is a function from a name to what is wrong with it ("must be ..."), or None. They
import nothing, so that the options table can check a name as it reads it, and the
adapters that use the name (the Redis key layout, the Kafka clients) apply the same rule.
"""

from __future__ import annotations

import re

# Kafka's own rule (kafka.common.internals.Topic): ASCII letters, digits, '.', '_', '-'.
_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")


def topic_problem(name: str) -> str | None:
    if _TOPIC.fullmatch(name) and name not in (".", ".."):
        return None
    return "must be 1 to 249 of the characters a-z, A-Z, 0-9, '.', '_' and '-' (not . or ..)"


def group_problem(name: str) -> str | None:
    """Kafka takes any group id but an empty one; one with spaces or control characters
    would be a trap in logs, transactional ids and the broker's tools."""
    if name and name.isprintable() and not any(c.isspace() for c in name):
        return None
    return "must not be empty, and hold no spaces or control characters"


def index_name_problem(name: str) -> str | None:
    """An index name is in braces in every key (a Redis Cluster hash tag), between ':'
    separators, and before '/' in a shard's keys: none of them may be in it."""
    if name and not any(c in name for c in "{}:/ "):
        return None
    return "must be non-empty, without {}:/ or spaces"
