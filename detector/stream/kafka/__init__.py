"""Kafka adapters, one module a job:

  settings.py  where the brokers are, how to log in, the start-up probe
  topics.py    which topics exist, what a record may weigh on each, creating the missing
  source.py    the consumer-group member the loop polls (step 1) and commits (step 7)
  sink.py      decisions and dead letters to their topics (steps 5 and 6)
  commit.py    where offsets are committed (step 7), in both modes, by one Committer
  tools.py     `neardup produce` and `neardup tail`

At least once (the default): KafkaSink flushes, then KafkaSource's committer commits the
offsets with the consumer. A consumer killed between the two publishes its batch again.
Exactly once (`serve --exactly-once`, KafkaSource given the sink as its `transaction`):
TransactionalSink sends a batch's decisions and dead letters in one Kafka transaction and
the committer hands the batch's offsets to it, so records, offsets and the commit are one
unit that a read_committed reader sees once. Either way the committer commits only the
partitions the member still holds (commit.py's docstring says what a rebalance does).
"""

from .commit import Committer, ConsumerCommits, Offsets
from .settings import KafkaSettings, check
from .sink import (
    TRANSACTION_TIMEOUT_MS,
    KafkaSink,
    TransactionalSink,
    producer_options,
    transactional_id,
)
from .source import MAX_FETCH_FRAME, KafkaSource, consumer_options
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
    "Committer",
    "ConsumerCommits",
    "KafkaSettings",
    "KafkaSink",
    "KafkaSource",
    "Offsets",
    "Producer",
    "Refused",
    "TopicLimits",
    "Topics",
    "TransactionalSink",
    "as_json",
    "check",
    "consumer_options",
    "ensure_topics",
    "producer_options",
    "remove",
    "tail",
    "transactional_id",
]
