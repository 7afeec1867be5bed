"""Kafka adapters: the consumer-group source, the decision and dead-letter sink, and the
small producer and tail used to try things by hand.

At least once (the default): KafkaSink flushes, then KafkaSource commits the offsets with
the consumer. A consumer killed between the two publishes its batch again. Exactly once
(`serve --exactly-once`): TransactionalSink sends a batch's decisions and dead letters in
one Kafka transaction and TransactionalSource.commit hands the batch's offsets to it, so
records, offsets and the commit are one unit that a read_committed reader sees once.
"""

from __future__ import annotations

import contextlib
import json
import logging
import ssl
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import (
    AuthorizationError,
    CommitFailedError,
    IllegalSaslStateError,
    InvalidReceiveError,
    KafkaConnectionError,
    KafkaError,
    ProducerFencedError,
    SaslAuthenticationFailedError,
    TopicAlreadyExistsError,
    UnsupportedSaslMechanismError,
)
from kafka.structs import OffsetAndMetadata

from ..access import SASL_MECHANISMS, SECURITY_PROTOCOLS, Secret, as_variables
from ..errors import BackendUnavailable, ConfigError, Fenced, cause
from ..names import topic_problem
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


def remove(settings: KafkaSettings, topics: list[str], groups: list[str]) -> None:
    """Delete topics and consumer groups that nothing uses any more (a bench run's own),
    as far as the broker lets: what is left is only clutter."""
    admin = _connect(KafkaAdminClient, "admin", **settings.common())
    try:
        for delete, names in ((admin.delete_topics, topics), (admin.delete_groups, groups)):
            with contextlib.suppress(KafkaError):
                delete(names)
    finally:
        admin.close()


log = logging.getLogger("neardup.kafka")

# The largest fetch response frame a consumer accepts. A topic whose max.message.bytes
# (1 MiB by default) lets a larger record batch in stalls its partition: keep it below.
MAX_FETCH_FRAME = 256 * 1024 * 1024


@dataclass
class Offsets:
    """A Kafka batch's position: on each partition, its first offset and the next one."""

    first: dict[TopicPartition, int] = field(default_factory=dict)
    next: dict[TopicPartition, int] = field(default_factory=dict)

    def to_commit(self) -> dict[TopicPartition, OffsetAndMetadata]:
        return {tp: OffsetAndMetadata(o, "", -1) for tp, o in self.next.items()}


class KafkaSource:
    """A consumer-group member that hands out batches and commits only what it is told."""

    isolation_level = "read_uncommitted"

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
            isolation_level=self.isolation_level,
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

    rewinds = 0

    def batches(self) -> Iterator[Batch]:
        """Polls for ever (the loop stops taking them); an empty batch after a quiet poll."""
        while True:
            records, offsets = self.poll()
            yield Batch(records, offsets)

    def poll(self, timeout_ms: int = 500) -> tuple[list[RawRecord], Offsets]:
        """A batch of records with where they came from, and its offsets."""
        polled = self.consumer.poll(timeout_ms=timeout_ms, max_records=self.batch_size)
        batch: list[RawRecord] = []
        offsets = Offsets()
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
                offsets.first.setdefault(tp, r.offset)
                offsets.next[tp] = r.offset + 1
        return batch, offsets

    def commit(self, position: object) -> None:
        """Commit the offsets of a batch (`Batch.position`, its Offsets)."""
        offsets = cast(Offsets, position)
        if not offsets.next:
            return
        try:
            self.consumer.commit(offsets.to_commit())
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


def _abandon(producer: Any) -> None:
    """Close a producer without waiting for what it still has in flight. kafka-python's
    close flushes first and raises when that does not finish in time, before it stops the
    sender thread, which would go on sending: so the sender is stopped first."""
    with contextlib.suppress(Exception):
        producer._sender.force_close()
        producer._sender.join(5)
    with contextlib.suppress(Exception):
        producer.close(timeout=0)


class KafkaSink:
    """Decisions keyed by id to the output topic; bad records to the dead-letter topic.

    flush() checks the outcome of every send: kafka-python's own flush returns even when
    sends failed, and its idempotent producer refuses all later batches after a fatal
    error. So a failed send raises (nothing gets committed) and the producer is rebuilt.
    """

    flush_timeout = 30.0  # seconds

    def __init__(self, settings: KafkaSettings, output_topic: str, dead_letter_topic: str) -> None:
        self.settings = settings
        self.output_topic = output_topic
        self.dead_letter_topic = dead_letter_topic
        self._sent: list[Any] = []
        self.producer: Any = self._producer()

    def _options(self) -> dict[str, Any]:
        return {
            **self.settings.common(),
            "acks": "all",
            "linger_ms": 5,
            "retries": 5,
            "max_request_size": 16 * 1024 * 1024,
        }

    def _producer(self) -> Any:
        return _connect(KafkaProducer, "producer", **self._options())

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

    def flush(self) -> None:
        """Return only when the broker has acknowledged everything sent since the last
        flush; otherwise raise, and everything must be sent again."""
        sent, self._sent = self._sent, []
        if self.producer is None:
            return
        try:
            self.producer.flush(timeout=self.flush_timeout)
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
        if self.producer is not None:
            _abandon(self.producer)
        self.producer = None

    def close(self) -> None:
        if self.producer is not None:
            self.producer.close()


# A transaction spans one batch's publish, flush and commit, well under a second. The
# broker aborts one left open longer, and only that releases the output to read_committed
# readers (and the input offsets to the group) after a consumer died in the middle of one.
# 10 s is Kafka Streams' choice for exactly-once, and our consumers' session timeout: a
# dead consumer's partitions and its open transaction are let go after about as long.
TRANSACTION_TIMEOUT_MS = 10_000


def transactional_id(settings: KafkaSettings, group: str) -> str:
    """A new transactional id for one serve process. Unique, so no two processes ever fence
    each other: a zombie consumer is fenced by its group's generation instead, which the
    broker checks when a transaction commits offsets (KIP-447)."""
    return f"{settings.client_id}-{group}-{uuid.uuid4().hex[:12]}"


class TransactionalSink(KafkaSink):
    """KafkaSink whose sends of one batch, and that batch's input offsets, are one Kafka
    transaction (`serve --exactly-once`).

    The transaction begins at the batch's first send (step 5) and commit() (step 7, from
    TransactionalSource) adds the offsets and commits it. A failure aborts it and raises,
    and the step the loop retries finds no transaction open: a publish step sends
    everything again in a new one; a commit, which the loop retries alone, first sends
    again the records this sink kept of the batch, in a new one.

    Aborting abandons the producer and makes a new one of the same transactional id, whose
    init_transactions aborts what the old one left open. kafka-python's abort_transaction
    would wait for ever for a broker that is away, and once the broker has timed the
    transaction out, it would get this producer fenced.
    """

    # A flush inside a transaction must give up well within the transaction's timeout.
    flush_timeout = TRANSACTION_TIMEOUT_MS / 2000

    def __init__(
        self,
        settings: KafkaSettings,
        output_topic: str,
        dead_letter_topic: str,
        transactional_id: str,
        observe: Callable[[str], object] = lambda outcome: None,
    ) -> None:
        self.transactional_id = transactional_id
        self.observe = observe  # "committed" or "aborted", once per transaction
        self._batch: list[tuple[str, bytes | None, bytes | None, Headers]] = []
        self._open = False
        super().__init__(settings, output_topic, dead_letter_topic)

    def _options(self) -> dict[str, Any]:
        return {
            **super()._options(),
            "transactional_id": self.transactional_id,
            "transaction_timeout_ms": TRANSACTION_TIMEOUT_MS,
            # init_transactions and sends wait this long for a broker that is away, not
            # 60 s: then the loop's retry takes over, and beats the health endpoint.
            "max_block_ms": TRANSACTION_TIMEOUT_MS,
            # A batch's first AddPartitionsToTxn is often refused while the broker still
            # writes the previous transaction's markers, and kafka-python waits
            # retry_backoff_ms (100 by default) before asking again, not the 20 ms Java
            # waits there: a transaction of 64 records took 115 ms at its p99, 35 at 20.
            "retry_backoff_ms": 20,
            # Sends retry until the flush gives up (flush_timeout): then the transaction
            # is aborted, which a failed send would cause anyway.
            "retries": float("inf"),
        }

    def _producer(self) -> Any:
        producer = super()._producer()
        try:
            producer.init_transactions()
        except KafkaError as exc:
            _abandon(producer)
            raise self._refusal(exc, producer) from exc
        return producer

    def _send(
        self, topic: str, key: bytes | None, value: bytes | None, headers: Headers = None
    ) -> None:
        if not self._open:
            self._begin()
            self._batch = []  # a new batch, or its publish step again after an abort
        self._batch.append((topic, key, value, headers))
        super()._send(topic, key, value, headers)

    def _begin(self) -> None:
        if self.producer is None:
            self.producer = self._producer()
        try:
            self.producer.begin_transaction()
        except KafkaError as exc:
            raise self._failed(exc) from exc
        self._open = True

    def commit(self, offsets: dict[TopicPartition, OffsetAndMetadata], group: Any) -> bool:
        """Commit the batch with its input offsets, for the consumer of group metadata
        `group`. False when the broker refused the offsets because the group has a newer
        generation (KIP-447): the transaction is aborted, and the batch's records go to
        whoever owns their partitions now."""
        if not self._open:  # aborted after its flush: the batch again, in a new transaction
            self._begin()
            for record in self._batch:
                super()._send(*record)
            self.flush()
        try:
            if offsets:
                self.producer.send_offsets_to_transaction(offsets, group)
            self.producer.commit_transaction()
        except CommitFailedError:
            self.abort()
            return False
        except KafkaError as exc:
            raise self._failed(exc) from exc
        self._open, self._batch = False, []
        self.observe("committed")
        return True

    def abort(self) -> None:
        """Abort the open transaction, if any, and forget the batch."""
        self._rebuild()
        self._batch = []

    def _rebuild(self) -> None:
        """Abort by abandoning the producer; a new one, made at once, aborts the transaction
        at the broker, which until then holds back the output's read_committed readers."""
        fenced = self.producer is not None and _fenced(self.producer)
        super()._rebuild()
        if self._open:
            self.observe("aborted")
        self._open = False
        if fenced:
            raise self._fenced_error()
        with contextlib.suppress(BackendUnavailable):
            self.producer = self._producer()

    def _failed(self, exc: KafkaError) -> Exception:
        """Abort after a failed transactional call; what to raise for it."""
        refusal = self._refusal(exc, self.producer)
        self._rebuild()
        return refusal

    def _refusal(self, exc: KafkaError, producer: Any) -> Exception:
        """What a failed transactional call means: Fenced (stop), ConfigError (a missing
        ACL permission: no retry cures it) or BackendUnavailable (retry)."""
        if cause(exc, ProducerFencedError) or _fenced(producer):
            return self._fenced_error()
        refused = cause(exc, AuthorizationError) or _last_error(producer, AuthorizationError)
        if refused:
            return ConfigError(
                f"Kafka refused transactional id {self.transactional_id!r}: {refused}"
            )
        return BackendUnavailable(f"Kafka transaction of {self.transactional_id}: {exc}")

    def _fenced_error(self) -> Fenced:
        return Fenced(
            f"Kafka fenced transactional id {self.transactional_id!r}: another producer "
            f"took it, or a transaction outlasted {TRANSACTION_TIMEOUT_MS // 1000} s; "
            "stopping, so that the group gives this consumer's records to the others"
        )

    def close(self) -> None:
        if self._open and self.producer is not None:
            with contextlib.suppress(KafkaError):
                self.producer.abort_transaction()
        super().close()


def _last_error(producer: Any, kind: type[BaseException]) -> BaseException | None:
    """The error that put a transactional producer in its failed state, if of `kind`:
    kafka-python raises it once, then only a KafkaError that names it in its message."""
    error = getattr(getattr(producer, "_transaction_manager", None), "last_error", None)
    return error if isinstance(error, kind) else None


def _fenced(producer: Any) -> bool:
    return _last_error(producer, ProducerFencedError) is not None


class TransactionalSource(KafkaSource):
    """A KafkaSource whose commit hands the batch's offsets to the sink's transaction.

    It reads read_committed, for two reasons: a member that takes over partitions then
    starts from their committed offsets only once a transaction still committing offsets
    of them is over (KIP-447: kafka-python asks for stable offsets in that mode), and input
    written by transactions is decided only once they commit.
    """

    isolation_level = "read_committed"

    def __init__(
        self,
        settings: KafkaSettings,
        topic: str,
        group: str,
        batch_size: int,
        sink: TransactionalSink,
    ) -> None:
        self.sink = sink
        super().__init__(settings, topic, group, batch_size)

    def commit(self, position: object) -> None:
        offsets = cast(Offsets, position)
        group = self.consumer.group_metadata()
        # The broker refuses offsets of an old generation, but takes offsets sent without
        # one (generation -1) from anyone: never send those for partitions this member
        # may no longer own.
        member = group.generation_id >= 0 and bool(group.member_id)
        if member and offsets.next.keys() <= self.consumer.assignment():
            if self.sink.commit(offsets.to_commit(), group):
                return
        else:
            self.sink.abort()
        # kafka-python keeps the position of a partition that stays with this member
        # through a rebalance: without a rewind, the aborted records would be skipped.
        assigned = self.consumer.assignment()
        for tp, offset in offsets.first.items():
            if tp in assigned:
                self.consumer.seek(tp, offset)
        self.rewinds += 1
        log.warning("transaction aborted: the group rebalanced; its records go again")


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
    settings: KafkaSettings,
    topic: str,
    from_beginning: bool,
    idle_ms: int | None,
    read_committed: bool = True,
) -> Iterator[bytes]:
    """Values arriving on a topic (no group: nothing is committed). read_committed: only
    records of committed transactions (and every record written without one)."""
    consumer = _connect(
        KafkaConsumer,
        "consumer",
        **settings.common(),
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest" if from_beginning else "latest",
        isolation_level="read_committed" if read_committed else "read_uncommitted",
        consumer_timeout_ms=idle_ms if idle_ms is not None else float("inf"),
    )
    consumer.subscribe([topic])
    try:
        for message in consumer:
            yield message.value
    finally:
        consumer.close()


def check_topic_name(name: str) -> str:
    if problem := topic_problem(name):
        raise ConfigError(f"Kafka topic name {name!r} {problem}")
    return name
