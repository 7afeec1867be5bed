"""How neardup reaches and logs in to its servers, with no client library imported: the
default Redis endpoint, the Kafka security protocols and SASL mechanisms it offers, the
syntax of a Redis URL and of a list of Kafka brokers, secrets that never print, and URLs
fit to print.

Here rather than in the adapters, so that the command line can offer these without
importing kafka-python or redis-py (`neardup detect` needs neither).
"""

from __future__ import annotations

import re
import socket
from urllib.parse import SplitResult, parse_qsl, urlencode, urlsplit

from .errors import BackendUnavailable, ConfigError
from .tls import readable_file

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
REDIS_SCHEMES = ("redis", "rediss", "unix")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")  # RFC 3986
_REDIS_FORMS = (
    f"write redis://HOST:PORT/DB (e.g. {DEFAULT_REDIS_URL}), rediss:// for TLS, or unix:///PATH"
)
# host:port; an IPv6 address in brackets; kafka-python takes a host alone as port 9092
KAFKA_PORT = 9092
_SERVER = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[^\s:\[\],]+)(?::(\d{1,5}))?")


def redis_url_problem(url: str) -> str | None:
    """What keeps `url` from being a Redis URL, or None. The words never repeat the URL:
    it may hold a password, and one without `scheme://` cannot be redacted."""
    scheme, sep, _ = url.partition("://")
    if not sep or not _SCHEME.fullmatch(scheme):
        return f"has no scheme: {_REDIS_FORMS}"
    if scheme.lower() not in REDIS_SCHEMES:
        return f"must start with redis://, rediss:// (TLS) or unix://, not {scheme}://"
    try:
        urlsplit(url).port  # noqa: B018 - reading it checks it
    except ValueError:
        return f"has a host or port that cannot be read: {_REDIS_FORMS}"
    return None


def servers_problem(servers: str) -> str | None:
    """What keeps `servers` from being Kafka bootstrap servers, host:port[,host:port]."""
    for item in servers.split(","):
        m = _SERVER.fullmatch(item.strip())
        if m is None or (m[2] is not None and not 0 < int(m[2]) <= 65535):
            return (
                "must be host:port, or several separated by commas (an IPv6 address in "
                "[brackets]), with ports from 1 to 65535"
            )
    return None


class Secret:
    """A password or other credential: it prints as '***' (in reprs of settings, log
    lines, error messages), so only `reveal()` hands the value to a client library."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "'***'"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


def read_secret(value: str | None, file: str | None, what: str) -> Secret | None:
    """A secret given as a value (option, environment, config file) or as a file; the
    file's line end is dropped, so `echo pw > FILE` works."""
    if value and file:
        var = "NEARDUP_" + what.upper().replace("-", "_")
        raise ConfigError(
            f"the {what.replace('-', ' ')} is given twice, as --{what} (or {var}) and as "
            f"--{what}-file (or {var}_FILE): give one"
        )
    if file:
        readable_file(file, f"{what}-file")
        with open(file, encoding="utf-8") as f:
            value = f.read().rstrip("\r\n")
        if not value:
            raise ConfigError(f"--{what}-file {file} is empty")
    return Secret(value) if value else None


def redact_url(url: str) -> str:
    """A URL fit to print: the password of `user:password@` and a `password=` query
    parameter become ***."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if parts.password is not None:
            userinfo, _, host = netloc.rpartition("@")
            netloc = f"{userinfo.partition(':')[0]}:***@{host}"
        query = urlencode(
            [(k, "***" if k == "password" else v) for k, v in parse_qsl(parts.query, True)],
            safe="*",
        )
        return join_url(parts._replace(netloc=netloc, query=query))
    except ValueError:  # a URL this malformed is not shown at all
        return "(unparsable URL)"


def join_url(parts: SplitResult) -> str:
    """urlunsplit, but always with `//` after the scheme: `unix:///run/redis.sock`, not
    `unix:/run/redis.sock`, which redis-py refuses."""
    url = f"{parts.scheme}://{parts.netloc}{parts.path}"
    if parts.query:
        url += f"?{parts.query}"
    if parts.fragment:
        url += f"#{parts.fragment}"
    return url


def as_variables(values: dict[str, str | None]) -> dict[str, str]:
    """Connection settings as NEARDUP_* variables, for a child `neardup` (a password
    travels in the environment, not on its command line). Every variable is set, empty
    when unused, so that the parent's own NEARDUP_* cannot contradict them."""
    return {f"NEARDUP_{k}": v or "" for k, v in values.items()}


# getaddrinfo's answers for a name that does not exist: a typo, which no wait cures.
# EAI_AGAIN (the resolver is away for now) is waited for like a server.
_UNKNOWN_NAME = {socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)}


def resolve(host: str, port: int, what: str) -> None:
    """Start-up: ConfigError when `host` is a name no resolver knows, BackendUnavailable
    when the resolver cannot answer now. (The clients would retry an unknown name for
    ever, as if the server were only away.)"""
    try:
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        if exc.errno in _UNKNOWN_NAME:
            raise ConfigError(f"{what}: unknown host {host!r} ({exc.strerror})") from None
        raise BackendUnavailable(f"{what}: cannot resolve {host!r} now ({exc.strerror})") from exc
    except UnicodeError:  # a label longer than 63 characters, or an empty one
        raise ConfigError(f"{what}: {host!r} is not a host name") from None


def kafka_addresses(servers: str) -> list[tuple[str, int]]:
    """--bootstrap-servers as (host, port) pairs, checked (servers_problem)."""
    return addresses(servers, KAFKA_PORT, "--bootstrap-servers")


def addresses(servers: str, default_port: int, option: str) -> list[tuple[str, int]]:
    """host:port[,host:port] as (host, port) pairs, checked (servers_problem)."""
    if problem := servers_problem(servers):
        raise ConfigError(f"{option} {servers!r} {problem}")
    found = [_SERVER.fullmatch(item.strip()) for item in servers.split(",")]
    return [(m[1].strip("[]"), int(m[2] or default_port)) for m in found if m is not None]
