"""The error tree.

DetectorError
 ├── ConfigError          bad options, files or settings: fix and rerun
 ├── BadRecord            one input record is unusable: dead-letter it, carry on
 ├── BackendUnavailable   Redis or Kafka did not answer: back off and retry (exit status 1)
 │    ├── GaveUp          ... for longer than a start-up may wait
 │    └── (permanent failures such as wrong credentials are ConfigError)
 ├── Contention           another consumer committed a conflicting document first:
 │                        decide the rest of the batch again (not an outage)
 └── Fenced               serve --exactly-once: the broker fenced this process's
                          transactional producer; it must stop (exit status 3)

detector/retry.py names the classes a retry cures (BackendUnavailable, Contention) once.

A refused password, a missing ACL permission or an untrusted TLS certificate is a
ConfigError even when the client library reports it as a connection failure: retrying
cannot cure it, so `neardup serve` exits (status 2) instead of waiting for ever.
"""

from __future__ import annotations

from typing import TypeVar


class DetectorError(Exception):
    """Root of every error the detector raises on purpose."""

    exit_status = 2  # of a command that it stops


class ConfigError(DetectorError):
    """A setting, option or file the user supplied cannot be used."""


class BadRecord(DetectorError):
    """An input record that cannot be decided; carries a short machine reason."""

    def __init__(self, reason: str, detail: str = "") -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason}: {detail}" if detail else reason)


class BackendUnavailable(DetectorError):
    """A server the detector depends on is temporarily unreachable."""

    exit_status = 1  # nothing to fix in the command: it may simply be run again


class GaveUp(BackendUnavailable):
    """A server (or a topic) that did not come within the time a start-up may wait
    (--startup-timeout). Nothing is wrong with the command line: a supervisor may simply
    start the command again."""


class Contention(DetectorError):
    """A commit met documents another consumer indexed since the lookup: the servers are
    fine, the batch (from the conflict on) must be decided again against a new lookup."""


class Fenced(DetectorError):
    """The broker refuses this process's transactions: another producer took its
    transactional id, or its transaction outlasted the transaction timeout. Retrying would
    take the id back and fence the other in turn, so the process stops; the consumer group
    gives its partitions, and their uncommitted records, to the other members."""

    exit_status = 3  # not 2: nothing to fix in the command line; a supervisor restarts it


E = TypeVar("E", bound=BaseException)


def cause(exc: BaseException, kind: type[E]) -> E | None:
    """The first exception of a kind in exc's chain (itself, then what it was raised
    from or while handling): client libraries wrap an ssl or auth error in their own."""
    seen: set[int] = set()
    at: BaseException | None = exc
    while at is not None and id(at) not in seen:
        if isinstance(at, kind):
            return at
        seen.add(id(at))
        at = at.__cause__ or at.__context__
    return None
