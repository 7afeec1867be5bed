"""Kafka adapters, one module a job:

  settings.py  where the brokers are, how to log in, the start-up probe
  topics.py    which topics exist, what a record may weigh on each, creating the missing
  source.py    the consumer-group member the loop polls and commits (step 1, step 7)
  sink.py      decisions and dead letters to their topics (steps 5 and 6)
  tools.py     `neardup produce` and `neardup tail`

At least once (the default): KafkaSink flushes, then KafkaSource commits the offsets with
the consumer. A consumer killed between the two publishes its batch again. Exactly once
(`serve --exactly-once`): TransactionalSink sends a batch's decisions and dead letters in
one Kafka transaction and TransactionalSource.commit hands the batch's offsets to it, so
records, offsets and the commit are one unit that a read_committed reader sees once.
"""

from .settings import KafkaSettings, check
from .sink import (
    TRANSACTION_TIMEOUT_MS,
    KafkaSink,
    TransactionalSink,
    producer_options,
    transactional_id,
)
from .source import (
    MAX_FETCH_FRAME,
    KafkaSource,
    Offsets,
    TransactionalSource,
    consumer_options,
)
from .tools import Producer, Refused, as_json, tail
from .topics import (
    BROKER_DEFAULT_MAX_MESSAGE,
    RECORD_OVERHEAD,
    TopicLimits,
    Topics,
    ensure_topics,
    remove,
)

__all__ = [
    "BROKER_DEFAULT_MAX_MESSAGE",
    "MAX_FETCH_FRAME",
    "RECORD_OVERHEAD",
    "TRANSACTION_TIMEOUT_MS",
    "KafkaSettings",
    "KafkaSink",
    "KafkaSource",
    "Offsets",
    "Producer",
    "Refused",
    "TopicLimits",
    "Topics",
    "TransactionalSink",
    "TransactionalSource",
    "as_json",
    "check",
    "consumer_options",
    "ensure_topics",
    "producer_options",
    "remove",
    "tail",
    "transactional_id",
]
