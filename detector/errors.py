"""The error tree.

DetectorError
 ├── ConfigError          bad options, files or settings: fix and rerun
 ├── BadRecord            one input record is unusable: dead-letter it, carry on
 └── BackendUnavailable   Redis or Kafka did not answer: back off and retry
      └── (permanent failures such as wrong credentials are ConfigError)
"""

from __future__ import annotations


class DetectorError(Exception):
    """Root of every error the detector raises on purpose."""


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
