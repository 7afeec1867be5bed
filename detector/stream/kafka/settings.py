"""Where the Kafka brokers are and how to log in to them, and the start-up probe that tells
a broker that refuses us (fix and rerun) from one that is away (wait for it)."""

from __future__ import annotations

import logging
import ssl
import time
from dataclasses import dataclass
from typing import Any

from kafka.errors import (
    IllegalSaslStateError,
    InvalidReceiveError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    RequestTimedOutError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
    UnsupportedVersionError,
)

from ...access import (
    SASL_MECHANISMS,
    SECURITY_PROTOCOLS,
    Secret,
    as_variables,
    kafka_addresses,
    resolve,
)
from ...errors import BackendUnavailable, ConfigError, cause
from ...tls import check_tls_files, tls_refusal


@dataclass(frozen=True)
class KafkaSettings:
    """Where the brokers are and how to authenticate to them. Checked when made: a
    combination that cannot work is a ConfigError before any connection is tried."""

    bootstrap_servers: str
    client_id: str = "neardup"
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    username: str | None = None
    password: Secret | None = None  # prints as '***'
    ca_file: str | None = None
    cert_file: str | None = None  # client certificate, for brokers that want TLS client auth
    key_file: str | None = None

    def __post_init__(self) -> None:
        if self.security_protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(
                f"--kafka-security-protocol must be one of {', '.join(SECURITY_PROTOCOLS)}, "
                f"not {self.security_protocol!r}"
            )
        if self.sasl:
            if self.sasl_mechanism not in SASL_MECHANISMS:
                raise ConfigError(
                    f"{self.security_protocol} needs --kafka-sasl-mechanism, one of "
                    f"{', '.join(SASL_MECHANISMS)}"
                    + (f" (not {self.sasl_mechanism!r})" if self.sasl_mechanism else "")
                )
            if not self.username or self.password is None:
                raise ConfigError(
                    f"{self.security_protocol} needs --kafka-username and a password "
                    "(NEARDUP_KAFKA_PASSWORD, --kafka-password-file or --kafka-password)"
                )
        else:
            # Credentials without SASL would be silently unused: the consumer would run
            # unauthenticated against a listener that may take anyone.
            given = [
                o
                for o, v in (
                    ("--kafka-sasl-mechanism", self.sasl_mechanism),
                    ("--kafka-username", self.username),
                    ("--kafka-password", self.password),
                )
                if v
            ]
            if given:
                raise ConfigError(
                    f"{', '.join(given)}: only used with --kafka-security-protocol "
                    f"SASL_PLAINTEXT or SASL_SSL (it is {self.security_protocol})"
                )
        if not self.tls and (self.ca_file or self.cert_file or self.key_file):
            raise ConfigError(
                "--kafka-ca-file, --kafka-cert-file and --kafka-key-file need "
                f"--kafka-security-protocol SSL or SASL_SSL (it is {self.security_protocol})"
            )
        check_tls_files(self.ca_file, self.cert_file, self.key_file, "kafka")

    @property
    def sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    def common(self) -> dict[str, Any]:
        """The connection options of every kafka-python client. They hold the password
        in clear: never log them (kafka-python's own DEBUG log does, so serve keeps the
        `kafka` logger at ERROR)."""
        out: dict[str, Any] = {
            "bootstrap_servers": self.bootstrap_servers.split(","),
            "client_id": self.client_id,
            "security_protocol": self.security_protocol,
        }
        if self.sasl:
            assert self.password is not None  # __post_init__
            out["sasl_mechanism"] = self.sasl_mechanism
            out["sasl_plain_username"] = self.username
            out["sasl_plain_password"] = self.password.reveal()
        if self.tls:
            out["ssl_cafile"] = self.ca_file  # None: the system's CAs
            out["ssl_certfile"] = self.cert_file
            out["ssl_keyfile"] = self.key_file
            out["ssl_check_hostname"] = True
        return out

    def env(self) -> dict[str, str]:
        """These settings as NEARDUP_* variables, for a child `neardup` (as_variables)."""
        return as_variables(
            {
                "BOOTSTRAP_SERVERS": self.bootstrap_servers,
                "KAFKA_SECURITY_PROTOCOL": self.security_protocol,
                "KAFKA_SASL_MECHANISM": self.sasl_mechanism,
                "KAFKA_USERNAME": self.username,
                "KAFKA_PASSWORD": self.password.reveal() if self.password else None,
                "KAFKA_PASSWORD_FILE": None,  # read already: the value is in KAFKA_PASSWORD
                "KAFKA_CA_FILE": self.ca_file,
                "KAFKA_CERT_FILE": self.cert_file,
                "KAFKA_KEY_FILE": self.key_file,
            }
        )


def check(settings: KafkaSettings, timeout: float = 10.0, attempts: int = 3) -> None:
    """Start-up: connect to a bootstrap broker as far as one metadata request.

    kafka-python's clients retry a refused password or an untrusted certificate until
    their bootstrap times out, and then report only the timeout, so that a consumer with
    a wrong password would wait for the broker for ever. This probe opens one connection
    at a time (kafka-python's own connection layer, kafka.net) and reads its failure:
    ConfigError for what no retry cures, BackendUnavailable when no broker answers.

    The broker does not always send its answer to a refused password: often it only
    closes the connection, after a delay, right after the SASL exchange. A connection
    closed there, every time in `attempts` tries, counts as refused too.
    """
    last = "no bootstrap server"
    for host, port in kafka_addresses(settings.bootstrap_servers):
        resolve(host, port, f"Kafka at {host}:{port}")
    for broker in settings.bootstrap_servers.split(","):
        suspicions: set[str] = set()
        for attempt in range(attempts):
            if attempt:
                time.sleep(0.2)
            failure = _probe(settings, broker, timeout)
            if failure is None:
                return
            exc, stage = failure
            refused = _refused(settings, broker, exc, stage)
            if isinstance(refused, ConfigError):
                raise refused from None
            if refused is None:
                last = plain(exc, timeout)
                break  # this broker is away: try the next
            suspicions.add(refused)
            last = refused
        else:
            if len(suspicions) == 1:  # the same suspicious failure every time
                raise ConfigError(suspicions.pop())
    raise BackendUnavailable(f"no Kafka broker answers at {settings.bootstrap_servers} ({last})")


def plain(exc: BaseException, timeout: float | None = None) -> str:
    """Why a broker did not answer, in words: kafka-python's own are error codes."""
    text = str(exc)
    if "ECONNREFUSED" in text:
        return "connection refused: is Kafka running there?"
    if cause(exc, RequestTimedOutError) or cause(exc, KafkaTimeoutError):
        return "no answer" + (f" within {timeout:g} s" if timeout else "")
    return text


def _probe(settings: KafkaSettings, host_port: str, timeout: float) -> tuple[Exception, str] | None:
    """One connection to one broker: None if it answered a metadata request, else the
    failure and its stage: "connect" (TCP, TLS, ApiVersions), "sasl" or "metadata"."""
    from kafka.net.manager import KafkaConnectionManager
    from kafka.net.selector import NetworkSelector
    from kafka.protocol.metadata import MetadataRequest

    config = {
        **settings.common(),
        "bootstrap_servers": [host_port],
        "request_timeout_ms": int(timeout * 1000),
    }
    net = NetworkSelector(**config)
    manager = KafkaConnectionManager(net, **config)
    stage = "connect"
    conn: Any = None
    # The attempts are expected to fail sometimes; kafka-python would log each at ERROR.
    quiet = logging.getLogger("kafka")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)
    try:
        broker = manager.cluster.bootstrap_brokers()[0]
        conn = manager.get_connection(
            broker.node_id,
            timeout_ms=int(timeout * 1000),
            pop_on_close=False,
            refresh_metadata_on_err=False,
        )
        net.run(lambda: conn)  # TCP, TLS handshake, ApiVersions, then SASL
        stage = "metadata"
        net.run(lambda: conn.send_request(MetadataRequest(topics=[])))
        return None
    except Exception as exc:
        # ApiVersions was answered (so TCP and TLS held): it failed in the SASL exchange.
        if stage == "connect" and settings.sasl and conn is not None and conn.broker_version_data:
            stage = "sasl"
        return exc, stage
    finally:
        manager.close()
        net.close()
        quiet.setLevel(level)


def _refused(
    settings: KafkaSettings, where: str, exc: BaseException, stage: str
) -> ConfigError | str | None:
    """What one failed probe says: a ConfigError when the broker certainly refused us, a
    message when it probably did (confirmed by repeating), None when it is away."""
    who = f"user {settings.username!r} ({settings.sasl_mechanism})"
    if cause(exc, SaslAuthenticationFailedError):
        return ConfigError(f"Kafka at {where} refused the SASL credentials of {who}")
    if unsupported := cause(exc, UnsupportedSaslMechanismError):
        return ConfigError(f"Kafka at {where}: {unsupported}")
    if cause(exc, IllegalSaslStateError):
        return ConfigError(
            f"Kafka at {where} does not take SASL on this listener: check "
            f"--kafka-security-protocol (it is {settings.security_protocol})"
        )
    if cause(exc, UnsupportedVersionError):  # IncompatibleBrokerVersion is one
        return ConfigError(
            f"{where} is not a Kafka broker's client listener: it does not take Metadata "
            "requests (a KRaft controller's port?). Check --bootstrap-servers"
        )
    if cause(exc, InvalidReceiveError):
        return ConfigError(
            f"Kafka at {where} does not answer in plain Kafka protocol: a TLS listener? "
            f"Check --kafka-security-protocol (it is {settings.security_protocol})"
        )
    if refused := tls_refusal(exc, f"Kafka at {where}", "kafka"):
        return refused
    if tls := cause(
        exc, ssl.SSLError
    ):  # EOF in the handshake: a plaintext listener, or a broker leaving
        return (
            f"Kafka at {where} ends every TLS handshake ({type(tls).__name__}): is it a "
            f"TLS listener? Check --kafka-security-protocol (it is {settings.security_protocol})"
        )
    if isinstance(exc, KafkaConnectionError) and stage == "sasl":
        return f"Kafka at {where} refused the SASL credentials of {who}"
    if isinstance(exc, KafkaConnectionError) and stage == "metadata" and not settings.sasl:
        return (
            f"Kafka at {where} closes the connection at the first request: does this "
            f"listener want SASL? Check --kafka-security-protocol (it is "
            f"{settings.security_protocol})"
        )
    return None


def connect(factory: Any, what: str, **kwargs: Any) -> Any:
    """A kafka-python client (`what`: "consumer", "producer", "admin"), or
    BackendUnavailable in words when no broker answers it."""
    try:
        return factory(**kwargs)
    except KafkaError as exc:
        servers = ",".join(kwargs["bootstrap_servers"])
        raise BackendUnavailable(
            f"no Kafka broker answers at {servers} ({plain(exc)}): the {what} cannot start"
        ) from exc
