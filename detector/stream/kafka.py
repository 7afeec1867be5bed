"""Kafka adapters: the consumer-group source, the decision and dead-letter sink, and the
small producer and tail used to try things by hand."""

from __future__ import annotations

import contextlib
import json
import logging
import ssl
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import (
    CommitFailedError,
    IllegalSaslStateError,
    InvalidReceiveError,
    KafkaConnectionError,
    KafkaError,
    SaslAuthenticationFailedError,
    TopicAlreadyExistsError,
    UnsupportedSaslMechanismError,
)
from kafka.structs import OffsetAndMetadata

from ..access import SASL_MECHANISMS, SECURITY_PROTOCOLS, Secret, as_variables
from ..errors import BackendUnavailable, ConfigError, cause
from ..records import Decision, RawRecord, Tombstone
from ..tls import check_tls_files, tls_refusal
from . import Batch, Headers


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
    for host_port in settings.bootstrap_servers.split(","):
        suspicions: set[str] = set()
        for attempt in range(attempts):
            if attempt:
                time.sleep(0.2)
            failure = _probe(settings, host_port, timeout)
            if failure is None:
                return
            exc, stage = failure
            refused = _refused(settings, host_port, exc, stage)
            if isinstance(refused, ConfigError):
                raise refused from None
            if refused is None:
                last = str(exc)
                break  # this broker is away: try the next
            suspicions.add(refused)
            last = refused
        else:
            if len(suspicions) == 1:  # the same suspicious failure every time
                raise ConfigError(suspicions.pop())
    raise BackendUnavailable(f"no Kafka broker answers at {settings.bootstrap_servers}: {last}")


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


def _connect(factory: Any, what: str, **kwargs: Any) -> Any:
    try:
        return factory(**kwargs)
    except KafkaError as exc:
        raise BackendUnavailable(
            f"no Kafka broker answers at {kwargs['bootstrap_servers']}: {what}"
        ) from exc


def ensure_topics(settings: KafkaSettings, topics: dict[str, int]) -> None:
    """Create the topics that do not exist yet (name -> partitions)."""
    admin = _connect(KafkaAdminClient, "admin", **settings.common())
    try:
        existing = set(admin.list_topics())
        new = [NewTopic(t, n, 1) for t, n in topics.items() if t not in existing]
        if new:
            with contextlib.suppress(TopicAlreadyExistsError):  # another got there first
                admin.create_topics(new)
    finally:
        admin.close()


log = logging.getLogger("neardup.kafka")

# The largest fetch response frame a consumer accepts. A topic whose max.message.bytes
# (1 MiB by default) lets a larger record batch in stalls its partition: keep it below.
MAX_FETCH_FRAME = 256 * 1024 * 1024


class KafkaSource:
    """A consumer-group member that hands out batches and commits only what it is told."""

    def __init__(self, settings: KafkaSettings, topic: str, group: str, batch_size: int) -> None:
        self.topic = topic
        self.batch_size = batch_size
        self.consumer = _connect(
            KafkaConsumer,
            "consumer",
            **settings.common(),
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_poll_records=batch_size,
            max_partition_fetch_bytes=8 * 1024 * 1024,
            # The broker sends a record batch larger than the fetch sizes anyway (KIP-74),
            # but kafka-python drops a frame over this limit and fetches it again, for ever:
            # the partition would stall behind one huge batch. Above it, it still does.
            receive_message_max_bytes=MAX_FETCH_FRAME,
            # A dead consumer's partitions move after 10 s, not the client default of 45.
            session_timeout_ms=10_000,
            heartbeat_interval_ms=3_000,
        )
        self.consumer.subscribe([topic])

    def batches(self) -> Iterator[Batch]:
        """Polls for ever (the loop stops taking them); an empty batch after a quiet poll."""
        while True:
            records, offsets = self.poll()
            yield Batch(records, offsets)

    def poll(self, timeout_ms: int = 500) -> tuple[list[RawRecord], dict[TopicPartition, int]]:
        """A batch of records with where they came from, and the offsets that commit it."""
        polled = self.consumer.poll(timeout_ms=timeout_ms, max_records=self.batch_size)
        batch: list[RawRecord] = []
        offsets: dict[TopicPartition, int] = {}
        for tp, records in polled.items():
            for r in records:
                where: dict[str, object] = {
                    "topic": r.topic,
                    "partition": r.partition,
                    "offset": r.offset,
                    "key": r.key,
                    "headers": list(r.headers) or None,
                }
                if r.value is None:  # a tombstone: "this key is gone"
                    where["tombstone"] = True
                batch.append((r.value if r.value is not None else b"", where))
                offsets[tp] = r.offset + 1
        return batch, offsets

    def commit(self, position: object) -> None:
        """Commit the offsets of a batch (`Batch.position`: partition -> next offset)."""
        offsets = cast(dict[TopicPartition, int], position or {})
        if not offsets:
            return
        try:
            self.consumer.commit({tp: OffsetAndMetadata(o, "", -1) for tp, o in offsets.items()})
        except CommitFailedError:
            # The group rebalanced: these partitions belong to another member now, which
            # gets the records again and, by id, the same decisions. Nothing to retry.
            log.warning("offsets not committed: the group rebalanced")
        except KafkaError as exc:
            raise BackendUnavailable(f"Kafka did not take the offsets: {exc}") from exc

    def lag(self) -> int:
        """Records on the assigned partitions not yet consumed."""
        assigned = list(self.consumer.assignment())
        if not assigned:
            return 0
        ends = self.consumer.end_offsets(assigned)
        return sum(max(0, ends[tp] - self.consumer.position(tp)) for tp in assigned)

    def close(self) -> None:
        self.consumer.close()  # leaves the group, so the partitions move at once


class KafkaSink:
    """Decisions keyed by id to the output topic; bad records to the dead-letter topic.

    flush() checks the outcome of every send: kafka-python's own flush returns even when
    sends failed, and its idempotent producer refuses all later batches after a fatal
    error. So a failed send raises (nothing gets committed) and the producer is rebuilt.
    """

    def __init__(self, settings: KafkaSettings, output_topic: str, dead_letter_topic: str) -> None:
        self.settings = settings
        self.output_topic = output_topic
        self.dead_letter_topic = dead_letter_topic
        self.producer: Any = self._producer()
        self._sent: list[Any] = []

    def _producer(self) -> Any:
        return _connect(
            KafkaProducer,
            "producer",
            **self.settings.common(),
            acks="all",
            linger_ms=5,
            retries=5,
            max_request_size=16 * 1024 * 1024,
        )

    def decisions(self, decisions: list[Decision], headers: Sequence[Headers] = ()) -> None:
        for d, h in zip(decisions, headers or [None] * len(decisions), strict=True):
            self._send(self.output_topic, d.id.encode(), d.to_json().encode(), h)

    def error(self, record: dict[str, object], headers: Headers = None) -> None:
        self._send(self.dead_letter_topic, None, json.dumps(record).encode(), headers)

    def tombstone(self, dead: Tombstone, headers: Headers = None) -> None:
        """Forwarded with the same key, so a compacted decisions topic forgets it too."""
        self._send(self.output_topic, dead.id.encode(), None, headers)

    def _send(
        self, topic: str, key: bytes | None, value: bytes | None, headers: Headers = None
    ) -> None:
        try:
            if self.producer is None:  # rebuilt lazily: the broker may still be away
                self.producer = self._producer()
            self._sent.append(self.producer.send(topic, key=key, value=value, headers=headers))
        except KafkaError as exc:
            self._rebuild()
            raise BackendUnavailable(f"Kafka did not take a record: {exc}") from exc

    def flush(self, timeout: float = 30.0) -> None:
        """Return only when the broker has acknowledged everything sent since the last
        flush; otherwise raise, and everything must be sent again."""
        sent, self._sent = self._sent, []
        if self.producer is None:
            return
        try:
            self.producer.flush(timeout=timeout)
        except KafkaError as exc:
            self._rebuild()
            raise BackendUnavailable(f"Kafka did not acknowledge the decisions: {exc}") from exc
        failed = [f for f in sent if not f.is_done or f.failed()]
        if failed:
            reason = failed[0].exception if failed[0].is_done else "no answer"
            self._rebuild()
            raise BackendUnavailable(
                f"{len(failed)} of {len(sent)} records were not acknowledged: {reason}"
            )

    def _rebuild(self) -> None:
        self._sent = []
        with contextlib.suppress(Exception):
            self.producer.close(timeout=0)
        self.producer = None

    def close(self) -> None:
        if self.producer is not None:
            self.producer.close()


def produce(settings: KafkaSettings, topic: str, lines: Iterator[RawRecord]) -> Iterator[int]:
    """Send each line as a record keyed by its id (when it has one); yields a count."""
    producer = _connect(
        KafkaProducer,
        "producer",
        **settings.common(),
        acks="all",
        linger_ms=20,
        max_request_size=64 * 1024 * 1024,
    )
    try:
        for raw, _ in lines:
            key = None
            try:
                body = json.loads(raw)
                if isinstance(body, dict) and isinstance(body.get("id"), str):
                    key = body["id"].encode()
            except ValueError:
                pass  # bad lines are sent as they are: the detector dead-letters them
            producer.send(topic, key=key, value=raw)
            yield 1
        producer.flush()
    finally:
        producer.close()


def tail(
    settings: KafkaSettings, topic: str, from_beginning: bool, idle_ms: int | None
) -> Iterator[bytes]:
    """Values arriving on a topic (no group: nothing is committed)."""
    consumer = _connect(
        KafkaConsumer,
        "consumer",
        **settings.common(),
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest" if from_beginning else "latest",
        consumer_timeout_ms=idle_ms if idle_ms is not None else float("inf"),
    )
    consumer.subscribe([topic])
    try:
        for message in consumer:
            yield message.value
    finally:
        consumer.close()


def check_topic_name(name: str) -> str:
    if not name or len(name) > 249 or not all(c.isalnum() or c in "._-" for c in name):
        raise ConfigError(f"{name!r} is not a valid Kafka topic name")
    return name
