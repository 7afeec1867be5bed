"""Where the integration suite's servers are, and the stack's credentials; clients of them.

Everything comes from the caller's NEARDUP_* and NEARDUP_STACK_* variables (as `ops/stack.sh
env` prints them), with the stack's defaults when they are unset, read once, at import: the
unit suite's autouse fixture removes every NEARDUP_* variable from os.environ while a test
runs. Nothing here mocks Kafka or Redis.
"""

from __future__ import annotations

import os

import pytest
import redis
from redis.cluster import RedisCluster

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
