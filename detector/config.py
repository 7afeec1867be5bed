"""Typed settings, and the one place that turns them into engine parts.

Every option has a NEARDUP_* environment variable (the option's long name, upper case,
dashes as underscores), so containers and the command line configure the same things.
"""

from __future__ import annotations

import os
import ssl
import tomllib
from dataclasses import dataclass
from urllib.parse import SplitResult, parse_qsl, urlencode, urlsplit

from .blocks import BlockScheme
from .engine import Engine
from .errors import ConfigError, cause
from .features import FeatureConfig, Featurizer, IdfTable
from .records import DEFAULT_MAX_BYTES, DEFAULT_MAX_TOKENS
from .verify import DEFAULT_CACHE_BYTES, LiteralCheck

# Chosen by measurement on the dev stream (README, "Choosing the defaults").
DEFAULT_SCHEME = "k6-b8"
DEFAULT_THRESHOLD = 0.8

# Connections. Here rather than in the adapters, so that the command line can offer them
# without importing kafka-python or redis-py (`neardup detect` needs neither).
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


_file_settings: dict[str, str] = {}


def load_file(path: str) -> None:
    """Settings from a TOML file (keys are option names); the environment and the
    command line override them."""
    try:
        with open(path, "rb") as f:
            body = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from exc
    section = body.get("neardup", body)
    _file_settings.clear()
    _file_settings.update(
        {k.replace("-", "_"): str(v) for k, v in section.items() if not isinstance(v, dict)}
    )


def env(name: str, default: str | None = None) -> str | None:
    """An option's default: NEARDUP_<NAME> in the environment, else the config file."""
    key = name.replace("-", "_")
    return os.environ.get(f"NEARDUP_{key.upper()}", _file_settings.get(key, default))


def env_int(name: str, default: int) -> int:
    value = env(name, str(default))
    try:
        return int(value or default)
    except ValueError:
        raise ConfigError(f"{name} must be a whole number, not {value!r}") from None


def env_bool(name: str, default: bool) -> bool:
    value = (env(name) or "").strip().lower()
    if not value:
        return default
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name} must be true or false (1/0, yes/no, on/off), not {value!r}")


def env_float(name: str, default: float) -> float:
    value = env(name, str(default))
    try:
        return float(value or default)
    except ValueError:
        raise ConfigError(f"{name} must be a number, not {value!r}") from None


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


def readable_file(path: str, option: str) -> str:
    """A file an option names (a CA, a certificate, a key, a password): it must exist and
    be readable now, so that a typo fails at start-up and not at the first reconnect."""
    if not os.path.isfile(path):
        raise ConfigError(f"--{option} {path}: no such file")
    if not os.access(path, os.R_OK):
        raise ConfigError(f"--{option} {path}: not readable by this user")
    return path


def check_tls_files(ca: str | None, cert: str | None, key: str | None, prefix: str) -> None:
    """Load the PEM files (--PREFIX-ca-file, -cert-file, -key-file) as the client will,
    now: a missing file, one that holds no certificate, or a key that is encrypted or not
    the certificate's, fails at start-up under its option's name rather than as a TLS
    error at every connection attempt."""
    if key and not cert:
        raise ConfigError(f"--{prefix}-key-file needs --{prefix}-cert-file (the certificate)")
    for name, path in (("ca", ca), ("cert", cert), ("key", key)):
        if path:
            readable_file(path, f"{prefix}-{name}-file")
    context = ssl.create_default_context()
    if ca:
        try:
            context.load_verify_locations(cafile=ca)
        except ssl.SSLError as exc:
            raise ConfigError(
                f"--{prefix}-ca-file {ca}: no PEM CA certificate in it ({exc.reason or exc})"
            ) from None
    if cert:
        try:  # the password callback keeps OpenSSL from prompting on the terminal
            context.load_cert_chain(cert, key, password=lambda: "")
        except ssl.SSLError as exc:
            files = f"--{prefix}-cert-file {cert}" + (
                f" with --{prefix}-key-file {key}" if key else ""
            )
            why = exc.reason or "not a PEM certificate with its private key, unencrypted"
            raise ConfigError(f"{files}: cannot be loaded ({why})") from None


def tls_refusal(exc: BaseException, where: str, prefix: str) -> ConfigError | None:
    """The ConfigError for a TLS failure that no retry cures: the server's certificate is
    not trusted, or the server refused the handshake (our client certificate)."""
    if cert := cause(exc, ssl.SSLCertVerificationError):
        return ConfigError(
            f"{where}: its TLS certificate is not trusted ({cert.verify_message}); "
            f"give the CA that signed it with --{prefix}-ca-file"
        )
    tls = cause(exc, ssl.SSLError)
    if tls is not None and "ALERT" in (getattr(tls, "reason", None) or ""):
        return ConfigError(
            f"{where} refused the TLS handshake ({tls.reason}): check "
            f"--{prefix}-cert-file and --{prefix}-key-file"
        )
    return None


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


@dataclass(frozen=True)
class EngineSettings:
    features: str = "words"
    shingle_size: int = 2
    cjk_ngram: int = 2
    idf: str | None = None
    scheme: str = DEFAULT_SCHEME
    threshold: float = DEFAULT_THRESHOLD
    literal_shingle: int = 5
    max_candidates: int = 32
    vector_seed: int = 0
    max_bytes: int = DEFAULT_MAX_BYTES
    max_tokens: int = DEFAULT_MAX_TOKENS
    literal_memory: int = DEFAULT_CACHE_BYTES

    def engine(self) -> Engine:
        weights = IdfTable.load(self.idf) if self.idf else None
        config = FeatureConfig(self.features, self.shingle_size, self.cjk_ngram)
        return Engine(Featurizer(config, weights), self.vector_seed, self.literal_shingle)

    def block_scheme(self) -> BlockScheme:
        return BlockScheme.parse(self.scheme)

    def literal(self) -> LiteralCheck:
        return LiteralCheck(self.threshold, self.literal_shingle, cache_bytes=self.literal_memory)
