"""How neardup connects to Redis: the connection settings (server, ACL user, TLS), the one
factory of clients, and the start-up check that tells a refused password or an untrusted
certificate (fix and rerun) from a server that is away (wait for it).

Every command that talks to Redis builds its client with `RedisSettings.client()`, so a
new way of connecting is added there once: one server (--redis-url), a Redis Cluster
(--redis-cluster: the client follows the slots and their failovers), or the primary that
Redis Sentinels name (--redis-sentinel, --redis-service: every new connection asks them,
so a consumer follows a promoted replica once its connections to the old primary break).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

import redis
from redis.cluster import RedisCluster
from redis.connection import parse_url
from redis.exceptions import (
    AuthenticationWrongNumberOfArgsError,
    ClusterError,
    InvalidResponse,
    NoPermissionError,
)

from ...access import (
    DEFAULT_REDIS_URL,
    Secret,
    addresses,
    as_variables,
    join_url,
    redact_url,
    redis_url_problem,
    resolve,
)
from ...errors import BackendUnavailable, ConfigError
from ...tls import check_tls_files, tls_refusal
from .replication import Replication

SENTINEL_PORT = 26379


@dataclass(frozen=True)
class RedisSettings:
    """A Redis server and how to log in to it. `url` carries no credentials (they are
    taken out of it by `from_options`); the password prints as '***'."""

    url: str = DEFAULT_REDIS_URL
    username: str | None = None  # an ACL user; None is the `default` user
    password: Secret | None = None
    ca_file: str | None = None  # rediss://: the CA that signed the server's certificate
    cert_file: str | None = None  # client certificate, for servers that want one
    key_file: str | None = None
    socket_timeout: float = 30.0
    connect_timeout: float = 5.0
    cluster: bool = False  # url is one node of a Redis Cluster; the client finds the rest
    # Sentinels (host, port) that name the primary of `service`; url then gives only the
    # scheme (TLS), the database and the credentials of that primary
    sentinels: tuple[tuple[str, int], ...] = ()
    service: str | None = None
    replication: Replication = field(default_factory=Replication)

    def __post_init__(self) -> None:
        if problem := redis_url_problem(self.url):
            raise ConfigError(f"--redis-url {problem}")
        if self.sentinels and self.cluster:
            raise ConfigError(
                "--redis-sentinel and --redis-cluster: a Cluster promotes its own replicas, "
                "Sentinels watch one primary; give one of them"
            )
        if self.sentinels and not self.service:
            raise ConfigError(
                "--redis-sentinel needs --redis-service, the name the Sentinels know the "
                "primary by (their `sentinel monitor NAME ...`)"
            )
        if self.service and not self.sentinels:
            raise ConfigError(
                "--redis-service names a primary for Sentinels: give --redis-sentinel"
            )
        if self.sentinels and urlsplit(self.url).scheme == "unix":
            raise ConfigError(
                "--redis-sentinel needs a redis:// or rediss:// --redis-url (its scheme, "
                "database and credentials are the primary's), not unix://"
            )
        if self.cluster and urlsplit(self.url).scheme == "unix":
            raise ConfigError("--redis-cluster needs a redis:// or rediss:// URL of one node")
        if not self.tls and (self.ca_file or self.cert_file or self.key_file):
            raise ConfigError(
                "--redis-ca-file, --redis-cert-file and --redis-key-file need a "
                f"rediss:// URL (TLS), not {self.where()}"
            )
        check_tls_files(self.ca_file, self.cert_file, self.key_file, "redis")
        if self.username and self.password is None:
            raise ConfigError(
                f"Redis user {self.username!r} needs a password (NEARDUP_REDIS_PASSWORD, "
                "--redis-password-file or --redis-password)"
            )

    @classmethod
    def from_options(
        cls,
        url: str = DEFAULT_REDIS_URL,
        username: str | None = None,
        password: Secret | None = None,
        ca_file: str | None = None,
        cert_file: str | None = None,
        key_file: str | None = None,
        cluster: bool = False,
        sentinel: str | None = None,
        service: str | None = None,
        min_replicas: int = 0,
        wait_timeout: float = 1.0,
    ) -> RedisSettings:
        """Settings from the command line. A user and password in the URL
        (`redis://user:pw@host`, or `?password=`) count as if given as options; the
        options win over them."""
        url, url_user, url_password = _split_credentials(url)
        if password is None and url_password:
            password = Secret(url_password)
        return cls(
            url=url,
            username=username or url_user,
            password=password,
            ca_file=ca_file,
            cert_file=cert_file,
            key_file=key_file,
            cluster=cluster,
            sentinels=tuple(addresses(sentinel, SENTINEL_PORT, "--redis-sentinel"))
            if sentinel
            else (),
            service=service or None,
            replication=Replication(min_replicas, wait_timeout),
        )

    @property
    def tls(self) -> bool:
        return urlsplit(self.url).scheme == "rediss"

    def where(self) -> str:
        """The server, fit to print."""
        if self.sentinels:
            return f"the primary of {self.service!r} by Sentinels {self.sentinel_list()}"
        return redact_url(self.url)

    def sentinel_list(self) -> str:
        return ",".join(f"{host}:{port}" for host, port in self.sentinels)

    def who(self) -> str:
        return f"user {self.username!r}" if self.username else "the default user"

    def client(self) -> redis.Redis | RedisCluster:
        """The one place a Redis client is made."""
        options: dict[str, Any] = {
            "socket_timeout": self.socket_timeout,
            "socket_connect_timeout": self.connect_timeout,
        }
        if self.username:
            options["username"] = self.username
        if self.password is not None:
            options["password"] = self.password.reveal()
        if self.tls:  # redis:// connections take no ssl_* options at all
            options["ssl_ca_certs"] = self.ca_file  # None: the system's CAs
            options["ssl_certfile"] = self.cert_file
            options["ssl_keyfile"] = self.key_file
            options["ssl_cert_reqs"] = "required"
            options["ssl_check_hostname"] = True
        try:
            if self.cluster:
                return self._cluster(options)
            if self.sentinels:
                return self._sentinel(options)
            return redis.Redis.from_url(self.url, **options)
        except ValueError as exc:  # a malformed URL; the message does not repeat it
            raise ConfigError(f"--redis-url {self.where()}: {exc}") from None

    def _cluster(self, options: dict[str, Any]) -> RedisCluster:
        """A cluster client from one node's URL. It asks that node for the slot map, so a
        cluster that is down (or no cluster) shows here: as BackendUnavailable, unless it
        refused us."""
        self.resolve()
        try:
            return RedisCluster.from_url(self.url, **options)
        except redis.RedisError as exc:
            if problem := refusal(exc, self):
                raise problem from None
            raise BackendUnavailable(f"Redis Cluster at {self.where()}: {exc}") from exc

    def _sentinel(self, options: dict[str, Any]) -> redis.Redis:
        """A client of the primary the Sentinels name. Its pool asks them at every new
        connection, and drops a connection that finds a replica where the primary was."""
        from redis.sentinel import Sentinel

        self.resolve()
        if self.tls:
            options["ssl"] = True  # the pool picks its TLS connection class by this
        reach = {k: options[k] for k in ("socket_timeout", "socket_connect_timeout")}
        sentinel = Sentinel(list(self.sentinels), sentinel_kwargs=reach, **options)
        url: Any = parse_url  # untyped in redis-py
        db = int(url(self.url).get("db") or 0)
        client: redis.Redis = sentinel.master_for(self.service or "", db=db)
        return client

    def resolve(self) -> None:
        """ConfigError for a host name that does not exist (redis-py would wait for it)."""
        if self.sentinels:
            for host, port in self.sentinels:
                resolve(host, port, f"Redis Sentinel at {host}:{port}")
            return
        parts = urlsplit(self.url)
        if parts.scheme != "unix" and parts.hostname:
            resolve(parts.hostname, parts.port or 6379, f"Redis at {self.where()}")

    def env(self) -> dict[str, str]:
        """These settings as NEARDUP_* variables, for a child `neardup` (as_variables)."""
        return as_variables(
            {
                "REDIS_URL": self.url,
                "REDIS_USERNAME": self.username,
                "REDIS_PASSWORD": self.password.reveal() if self.password else None,
                "REDIS_PASSWORD_FILE": None,  # read already: the value is in REDIS_PASSWORD
                "REDIS_CA_FILE": self.ca_file,
                "REDIS_CERT_FILE": self.cert_file,
                "REDIS_KEY_FILE": self.key_file,
                "REDIS_CLUSTER": "1" if self.cluster else None,
                "REDIS_SENTINEL": self.sentinel_list() or None,
                "REDIS_SERVICE": self.service,
                "REDIS_MIN_REPLICAS": str(self.replication.min_replicas),
                "REDIS_WAIT_TIMEOUT": repr(self.replication.timeout),
            }
        )


def _split_credentials(url: str) -> tuple[str, str | None, str | None]:
    """(the URL without credentials, user, password). A URL without any is kept as it
    is, character for character."""
    try:
        parts = urlsplit(url)
        query = parse_qsl(parts.query, keep_blank_values=True)
        user = unquote(parts.username) if parts.username else None
        password = unquote(parts.password) if parts.password else None
    except ValueError:
        return url, None, None  # __post_init__ or the client reports it
    from_query = {k: v for k, v in query if k in ("username", "password")}
    if "@" not in parts.netloc and not from_query:
        return url, None, None
    user = user or from_query.get("username") or None
    password = password or from_query.get("password") or None
    rest = urlencode([(k, v) for k, v in query if k not in from_query])
    bare = parts._replace(netloc=parts.netloc.rpartition("@")[2], query=rest)
    return join_url(bare), user, password


def refusal(exc: BaseException, settings: RedisSettings) -> ConfigError | None:
    """The ConfigError for a Redis failure that no retry cures (refused credentials, a
    missing ACL permission, an untrusted certificate), or None."""
    where = settings.where()
    if isinstance(exc, AuthenticationWrongNumberOfArgsError):
        return ConfigError(
            f"Redis at {where} has no ACL users (it is older than Redis 6): give it only "
            "a password, without --redis-username"
        )
    if isinstance(exc, redis.AuthenticationError) or _reply(exc, "WRONGPASS", "NOAUTH"):
        if settings.password is None:
            return ConfigError(
                f"Redis at {where} wants a password (NEARDUP_REDIS_PASSWORD, "
                "--redis-password-file or --redis-password)"
            )
        return ConfigError(f"Redis at {where} refused the credentials of {settings.who()}")
    if isinstance(exc, NoPermissionError) or _reply(exc, "NOPERM"):
        return ConfigError(
            f"Redis at {where} does not let {settings.who()} do what the index needs "
            f"({exc}); its ACL needs the keys ~nd:* and the read, write and scripting commands"
        )
    return tls_refusal(exc, f"Redis at {where}", "redis")


def _reply(exc: BaseException, *codes: str) -> bool:
    """An error reply with one of these codes that the client did not map to a class of
    its own (older redis-py versions)."""
    return isinstance(exc, redis.ResponseError) and str(exc).startswith(codes)


@contextmanager
def refusals(settings: RedisSettings) -> Iterator[None]:
    """Turn the Redis errors that no retry cures into ConfigError; the rest pass."""
    try:
        yield
    except redis.RedisError as exc:
        problem = refusal(exc, settings)
        if problem is None:
            raise
        raise problem from None


def check(client: redis.Redis | RedisCluster, settings: RedisSettings, attempts: int = 3) -> None:
    """Start-up: one PING. Refused credentials or an untrusted certificate raise
    ConfigError (fix and rerun); a server that does not answer, BackendUnavailable.

    So does a server that is not Redis: one that answers in another protocol (an HTTP
    port), or one that takes the connection and drops it at the first command, every time
    of `attempts` (a Kafka port, or a TLS port asked without rediss://). A Redis that is
    starting or stopping refuses connections instead, and is waited for."""
    where = settings.where()
    settings.resolve()
    with refusals(settings):
        for attempt in range(attempts):
            if attempt:
                time.sleep(0.2)
            try:
                client.ping()
                return
            except InvalidResponse as exc:
                raise ConfigError(
                    f"Redis at {where} does not answer in the Redis protocol ({exc}): is it "
                    "a Redis server's port? (a TLS port wants rediss://)"
                ) from None
            except (redis.ConnectionError, redis.TimeoutError, ClusterError) as exc:
                if refusal(exc, settings) is not None:
                    raise
                if not _dropped(exc):
                    raise BackendUnavailable(f"Redis at {where}: {exc}") from exc
        raise ConfigError(
            f"Redis at {where} takes the connection and drops it at the first command, "
            f"{attempts} times in a row: is it a Redis server's port? (a TLS port wants "
            "rediss://, a Kafka port is not Redis)"
        )


def _dropped(exc: BaseException) -> bool:
    """A connection that was made, then closed by the other end before any answer."""
    text = str(exc)
    return "Connection closed by server" in text or (
        text.startswith("Error while reading") and "Connection reset by peer" in text
    )


def check_replicas(client: redis.Redis | RedisCluster, settings: RedisSettings) -> None:
    """Start-up, with --redis-min-replicas N: a ConfigError if no commit could ever be
    confirmed (the Sentinels know fewer replicas of the primary, or a Cluster primary has
    fewer), BackendUnavailable while one server has fewer connected (they may be
    starting: waited for)."""
    wanted = settings.replication.min_replicas
    if not wanted:
        return
    c: Any = client  # redis-py's sentinel and cluster helpers are untyped
    if isinstance(client, RedisCluster):
        for primary, replicas in cluster_replicas(client).items():
            if replicas < wanted:
                raise ConfigError(
                    f"--redis-min-replicas {wanted}, but the Redis Cluster primary {primary} "
                    f"has {replicas} replica(s): no commit could ever be confirmed"
                )
        return
    if settings.sentinels:
        manager = c.connection_pool.sentinel_manager
        known = 0
        for sentinel in manager.sentinels:  # the first that answers
            with contextlib.suppress(redis.ConnectionError, redis.TimeoutError):
                known = len(sentinel.sentinel_slaves(settings.service))
                break
        if known < wanted:
            raise ConfigError(
                f"--redis-min-replicas {wanted}, but the Sentinels know {known} replica(s) "
                f"of {settings.service!r}: no commit could ever be confirmed"
            )
        up = manager.discover_slaves(settings.service)
        if len(up) < wanted:
            raise BackendUnavailable(
                f"--redis-min-replicas {wanted}: {len(up)} of the {known} replica(s) of "
                f"{settings.service!r} are up"
            )
        return
    info = c.info("replication")
    if info.get("role") != "master":
        raise ConfigError(
            f"Redis at {settings.where()} is a replica: give its primary (or --redis-sentinel)"
        )
    if int(info.get("connected_slaves", 0)) < wanted:
        raise BackendUnavailable(
            f"--redis-min-replicas {wanted}: Redis at {settings.where()} has "
            f"{info.get('connected_slaves', 0)} replica(s) connected"
        )


def cluster_replicas(client: RedisCluster) -> dict[str, int]:
    """Each primary that serves slots (host:port) -> the replicas CLUSTER NODES gives it,
    whether up or not."""
    c: Any = client
    nodes = c.cluster_nodes()  # {"host:port": {"node_id", "flags", "master_id", "slots"...}}
    primaries = {
        n["node_id"]: address
        for address, n in nodes.items()
        if "master" in n["flags"] and n.get("slots")
    }
    counts = dict.fromkeys(primaries.values(), 0)
    for n in nodes.values():
        if n.get("master_id") in primaries:
            counts[primaries[n["master_id"]]] += 1
    return counts
