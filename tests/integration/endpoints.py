"""Where the integration suite's servers are, and the stack's credentials; clients of them.

They come from the source servers.py chose (the caller's URLs, containers, or ops/stack.sh),
once, at import: the unit suite's autouse fixture removes every NEARDUP_* variable from
os.environ while a test runs. Nothing here mocks Kafka or Redis.
"""

from __future__ import annotations

import pytest
import redis
from redis.cluster import RedisCluster

from .servers import SERVERS

E = SERVERS.endpoints
BOOTSTRAP = E.bootstrap
REDIS_URL = E.redis_url

# The stack's secured endpoints (tests/integration/test_security.py): an ACL user on the
# Redis above and its TLS port, and SASL listeners of the broker above (same topics).
STACK_REDIS_USER = E.redis_user
STACK_REDIS_PASSWORD = E.redis_password
STACK_REDIS_TLS_URL = E.redis_tls_url
STACK_CA_FILE = E.ca_file
STACK_CLIENT_CERT = E.client_cert
STACK_CLIENT_KEY = E.client_key
STACK_KAFKA_SASL = E.kafka_sasl  # SASL_PLAINTEXT
STACK_KAFKA_SASL_SSL = E.kafka_sasl_ssl
STACK_KAFKA_USER = E.kafka_user
STACK_KAFKA_PASSWORD = E.kafka_password
KAFKA_CONTROLLER = E.kafka_controller  # host:port of KRaft's controller, not a broker
# One node of the stack's Redis Cluster (3 primaries, a replica each).
REDIS_CLUSTER_URL = E.cluster_url


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
