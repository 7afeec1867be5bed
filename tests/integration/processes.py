"""Child processes of the integration suite: `python -m detector ...` run to its end, the
`neardup serve` processes of a test (with the names it owns), and a Kafka tool."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from ..helpers import ROOT
from .admin import unique
from .endpoints import BOOTSTRAP, REDIS_URL
from .servers import SERVERS


def child_env() -> dict[str, str]:
    """The environment of a child `python -m detector`: the caller's, without any
    NEARDUP_* engine option (so serve and detect decide with the same defaults), plus
    the two endpoints."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEARDUP_")}
    env["NEARDUP_BOOTSTRAP_SERVERS"] = BOOTSTRAP
    env["NEARDUP_REDIS_URL"] = REDIS_URL
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def neardup(args: Sequence[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`python -m detector ARGS` run to its end, whatever its exit status."""
    return subprocess.run(
        [sys.executable, "-m", "detector", *args],
        cwd=ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_detector(args: Sequence[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`python -m detector ARGS`, checked."""
    done = neardup(args, timeout)
    assert done.returncode == 0, f"neardup {' '.join(args)} failed:\n{done.stderr[-3000:]}"
    return done


def produce_file(path: Path, topic: str, partitions: int) -> None:
    """The project's own producer: `neardup produce FILE --topic T --partitions N`."""
    run_detector(["produce", str(path), "--topic", topic, "--partitions", str(partitions)])


def produce_keyless_tombstone(topic: str, headers: Sequence[tuple[str, bytes]] = ()) -> None:
    """A record with neither a key nor a value, which kafka-python refuses to send (other
    clients do send them): Kafka's own console producer, from the broker's jars."""
    line = ",".join(f"{k}:{v.decode()}" for k, v in headers) + "\tNULL\n"
    done = SERVERS.kafka_tool(
        ["org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server", BOOTSTRAP,
         "--topic", topic, "--reader-property", "null.marker=NULL",
         "--reader-property", f"parse.headers={'true' if headers else 'false'}"],
        line if headers else "NULL\n",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]


# ------------------------------------------------------------------------- neardup serve


@dataclass
class Names:
    """Everything a test owns on the shared servers."""

    input: str = field(default_factory=lambda: unique("in"))
    output: str = field(default_factory=lambda: unique("out"))
    dead_letter: str = field(default_factory=lambda: unique("dlq"))
    group: str = field(default_factory=lambda: unique("group"))
    index: str = field(default_factory=lambda: unique("index"))

    def topics(self) -> list[str]:
        return [self.input, self.output, self.dead_letter]


def serve_args(names: Names, *extra: str) -> list[str]:
    """`serve` on a test's own topics, group and index, with no metrics port; `extra`
    comes last, so it may override any of them."""
    return [
        "serve",
        "--input-topic",
        names.input,
        "--output-topic",
        names.output,
        "--dead-letter-topic",
        names.dead_letter,
        "--group",
        names.group,
        "--index",
        names.index,
        "--metrics-port",
        "0",
        *extra,
    ]


class Serve:
    """One `neardup serve` child process; its log goes to a file. `env` adds to (or
    overrides) child_env(): how secrets reach it, as they never go on a command line."""

    def __init__(
        self,
        names: Names,
        log_path: Path,
        extra: Sequence[str] = (),
        env: dict[str, str] | None = None,
    ) -> None:
        self.names = names
        self.log_path = log_path
        self.env = dict(env or {})
        self.args = [
            sys.executable,
            "-m",
            "detector",
            *serve_args(names, "--batch-size", "64", *extra),
        ]
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def start(self) -> Serve:
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in wait()
        self.proc = subprocess.Popen(
            self.args,
            cwd=ROOT,
            env={**child_env(), **self.env},
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log(self, tail: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-tail:]
        except OSError:
            return ""

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM (finish the batch, commit, leave the group) and wait; the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"serve {self.pid} did not stop within {timeout}s of SIGTERM:\n{self.log()}"
            ) from None

    def kill(self) -> None:
        """SIGKILL: a crash, nothing finished or committed."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.kill()
        self.wait(30)

    def wait(self, timeout: float) -> int:
        assert self.proc is not None
        code = self.proc.wait(timeout)
        if self._log is not None:
            self._log.close()
            self._log = None
        return code


def logs(servers: Iterable[Serve]) -> str:
    return "\n".join(
        f"----- serve pid {s.pid} ({'alive' if s.alive() else 'exited'}) -----\n{s.log()}"
        for s in servers
        if s.proc is not None
    )
