"""The replica settings, without a server: what is refused, and how it is said."""

from __future__ import annotations

import pytest

from detector.errors import ConfigError
from detector.index.redis.connect import RedisSettings
from detector.index.redis.replication import Replication


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"sentinel": "h:26379", "cluster": True}, "--redis-sentinel and --redis-cluster"),
        ({"sentinel": "h:26379"}, "--redis-sentinel needs --redis-service"),
        ({"service": "neardup"}, "give --redis-sentinel"),
        ({"sentinel": "h:26379,h:0", "service": "s"}, "must be host:port"),
        (
            {"url": "unix:///tmp/redis.sock", "sentinel": "h", "service": "s"},
            "not unix://",
        ),
        ({"min_replicas": -1}, "--redis-min-replicas must be 0 or more"),
        ({"wait_timeout": 0}, "--redis-wait-timeout must be more than 0"),
    ],
)
def test_bad_replica_settings_are_refused_by_name(options: dict[str, object], words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        RedisSettings.from_options(**options)  # type: ignore[arg-type]


def test_sentinels_default_to_their_port_and_travel_to_a_child() -> None:
    s = RedisSettings.from_options(
        sentinel="a:1,b", service="neardup", min_replicas=1, wait_timeout=0.25
    )
    assert s.sentinels == (("a", 1), ("b", 26379))
    assert "the primary of 'neardup' by Sentinels a:1,b:26379" in s.where()
    env = s.env()
    assert env["NEARDUP_REDIS_SENTINEL"] == "a:1,b:26379"
    assert env["NEARDUP_REDIS_SERVICE"] == "neardup"
    assert env["NEARDUP_REDIS_MIN_REPLICAS"] == "1"
    assert float(env["NEARDUP_REDIS_WAIT_TIMEOUT"]) == 0.25


def test_nothing_is_waited_for_without_replicas_asked() -> None:
    assert Replication().wait() is None
    assert Replication(2, 0.0004).wait() == (2, 1)  # WAIT's timeout is whole ms, never 0 (forever)
