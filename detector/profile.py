"""Where a document's microseconds go: wall time by stage of the loop (`--profile`).

Off unless a command turns it on (`detect --profile`, `serve --profile`, `neardup bench
--profile`, `bench/detect_vs_peer.py --profile`); then every stage adds its wall time, a
batch at a time, so the profile itself costs a few microseconds a batch. Stages nest by
name ("decide/lookup" is part of "decide"), and the table gives each parent's time not
in a child as "(rest)". Stages on the prepare thread (serve and detect prepare the next
batch while this one is decided) overlap those on the loop's: the loop's own stages sum
to the wall time, with "wait-prepare" the time it waited for the thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

_OFF: AbstractContextManager[None] = nullcontext()
REST = "(rest)"


class Profile:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.threads: dict[str, str] = {}  # stage -> the thread it ran on (its first)
        self._lock = threading.Lock()
        self.docs = 0  # records of the batches decided
        self.first: float | None = None  # the first such batch's poll
        self.last = 0.0  # and the end of the last

    def poll(self, records: int, start: float, end: float) -> None:
        """A poll of the source (perf_counter times) that got `records`: the wall time
        the table divides starts at the first one that got any, so a consumer's start-up
        does not count, and an empty one is idle time."""
        self.add("poll" if records else "idle", end - start)
        if records and self.first is None:
            self.first = start

    def batch(self, records: int, done: float) -> None:
        """A batch of records was decided and committed (perf_counter time): the wall
        ends at the last one, so the idle polls after a backlog do not count."""
        if records:
            self.docs += records
            self.last = done

    @property
    def wall(self) -> float:
        return self.last - self.first if self.first is not None else 0.0

    def add(self, name: str, seconds: float) -> None:
        with self._lock:
            self.seconds[name] = self.seconds.get(name, 0.0) + seconds
            self.threads.setdefault(name, _thread_name())

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - start)

    def rows(self, docs: int) -> list[dict[str, Any]]:
        """Stages in tree order with their seconds and microseconds a document, and after
        the children of each parent its rest (its time in none of them)."""
        seconds = dict(self.seconds)
        threads = dict(self.threads)
        for name in self.seconds:
            children = [c for c in self.seconds if c.rpartition("/")[0] == name]
            if children:
                inside = sum(self.seconds[c] for c in children)
                seconds[f"{name}/{REST}"] = self.seconds[name] - inside
                threads[f"{name}/{REST}"] = self.threads[name]
        # in the loop's order: a stage is first timed when its first child ends
        seen: dict[str, int] = {}
        for name in (*self.seconds, *(n for n in seconds if n.endswith(REST))):
            parts = name.split("/")
            for i in range(len(parts)):  # a stage timed only inside another's gets a place
                seen.setdefault("/".join(parts[: i + 1]), len(seen))

        def place(name: str) -> list[int]:
            parts = name.split("/")
            return [seen["/".join(parts[: i + 1])] for i in range(len(parts))]

        order = sorted(seconds, key=place)
        return [
            {
                "stage": n,
                "thread": threads[n],
                "seconds": round(seconds[n], 6),
                "us_per_doc": round(seconds[n] / docs * 1e6, 1) if docs else None,
            }
            for n in order
        ]

    def table(self) -> str:
        docs, wall = self.docs, self.wall
        lines = [
            f"profile: {docs:,} documents in {wall:.2f} s wall "
            f"({wall / docs * 1e6 if docs else 0:.0f} us a document); stages by thread",
            f"  {'stage':<34} {'thread':<8} {'seconds':>9} {'us/doc':>8} {'of wall':>8}",
        ]
        for r in self.rows(docs):
            depth = r["stage"].count("/")
            label = "  " * depth + r["stage"].rsplit("/", 1)[-1]
            share = r["seconds"] / wall if wall else 0.0
            per = f"{r['us_per_doc']:.1f}" if r["us_per_doc"] is not None else "-"
            lines.append(
                f"  {label:<34} {r['thread']:<8} {r['seconds']:>9.3f} {per:>8} {share:>8.1%}"
            )
        return "\n".join(lines)


def _thread_name() -> str:
    return "loop" if threading.current_thread() is threading.main_thread() else "prepare"


_active: Profile | None = None


def start() -> Profile:
    """Turn profiling on for this process (a fresh profile)."""
    global _active
    _active = Profile()
    return _active


def stop() -> None:
    global _active
    _active = None


def stage(name: str) -> AbstractContextManager[None]:
    """Time a stage when profiling is on; a shared no-op otherwise."""
    return _active.stage(name) if _active is not None else _OFF


def active() -> Profile | None:
    return _active
