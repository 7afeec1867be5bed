"""What `neardup serve`, `produce` and `tail` do at start against real servers that are
away, wrong or missing a topic: what fails at once (with a message), what is waited for
(bounded by --startup-timeout, and saying what it waits for), what /livez and /readyz say
meanwhile; the log of a running consumer (assignments, progress, the last line), its lag
per partition, and where a new group starts (--start-from)."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from ..helpers import free_port, until
from ..helpers import health as get
from .admin import admin, create_topics, delete_topics
from .endpoints import BOOTSTRAP, KAFKA_CONTROLLER
from .processes import Names, Serve, logs, neardup, serve_args
from .readers import DecisionReader, Producer


def timed(*args: str, timeout: float = 60) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = neardup(args, timeout=timeout)
    return done, time.monotonic() - started


# ----------------------------------------------------------------- what fails at once


def test_what_no_wait_cures_fails_at_once_with_words(names: Names) -> None:
    """An unknown host, Kafka's controller port, and a Redis URL that points at Kafka: a
    wait would never end, so serve stops within seconds, status 2, saying why."""
    create_topics({names.input: 1})
    cases = [
        (["--redis-url", "redis://no-such-host.invalid:6379/0"], "unknown host"),
        (["--bootstrap-servers", "no-such-host.invalid:9092"], "unknown host"),
        (
            ["--bootstrap-servers", KAFKA_CONTROLLER],
            "is not a Kafka broker's client listener",
        ),
        (
            ["--redis-url", f"redis://{BOOTSTRAP.split(',')[0]}/0"],
            "drops it at the first command",
        ),
    ]
    for extra, said in cases:
        done, seconds = timed(*serve_args(names, *extra, "--startup-timeout", "120"))
        assert done.returncode == 2, f"{extra}: {done.returncode}\n{done.stderr[-2000:]}"
        assert said in done.stderr, f"{extra}:\n{done.stderr[-2000:]}"
        assert "Traceback" not in done.stderr, done.stderr[-3000:]
        assert seconds < 30, f"{extra}: {seconds:.0f} s"


def test_a_server_that_is_away_is_waited_for_up_to_the_startup_timeout(names: Names) -> None:
    create_topics({names.input: 1})
    redis_away = f"redis://127.0.0.1:{free_port()}/0"
    done, seconds = timed(
        *serve_args(names, "--redis-url", redis_away, "--startup-timeout", "4"), timeout=60
    )
    assert done.returncode == 1, done.stderr[-2000:]
    assert "waiting for Redis at" in done.stderr, done.stderr[-2000:]
    assert "gave up waiting for Redis at" in done.stderr, done.stderr[-2000:]
    assert "--startup-timeout 4" in done.stderr
    assert 3 < seconds < 30, seconds

    kafka_away = f"127.0.0.1:{free_port()}"
    for command in (
        serve_args(names, "--bootstrap-servers", kafka_away, "--startup-timeout", "3"),
        ["produce", "-", "--topic", names.input, "--bootstrap-servers", kafka_away,
         "--startup-timeout", "3"],
        ["tail", "--topic", names.output, "--bootstrap-servers", kafka_away,
         "--startup-timeout", "3"],
    ):  # fmt: skip
        done, seconds = timed(*command)
        assert done.returncode == 1, f"{command[0]}: {done.stderr[-2000:]}"
        assert f"waiting for Kafka at {kafka_away}" in done.stderr, done.stderr[-2000:]
        assert "connection refused" in done.stderr, done.stderr[-2000:]
        assert "gave up waiting" in done.stderr, done.stderr[-2000:]
        assert seconds < 30, f"{command[0]}: {seconds:.0f} s"


def test_health_says_not_ready_until_the_consumer_has_its_partitions(
    names: Names, serve: Callable[..., Serve]
) -> None:
    """Redis is away at first (a port of our own, where a real Redis starts later, with
    the listpack limit the index checks, as ops/redis/redis.conf sets it): /livez answers
    200 (the process is waiting, as it says), /readyz and /healthz 503
    until the consumer joined its group."""
    create_topics({names.input: 2})
    redis_port = free_port()
    metrics = free_port()
    server = serve(
        ["--redis-url", f"redis://127.0.0.1:{redis_port}/0", "--metrics-port", str(metrics)]
    )
    until(lambda: get(metrics, "/livez")[0] == 200, 30, lambda: logs([server]))
    status, body = get(metrics, "/readyz")
    assert status == 503 and not body["ready"], body
    assert body["state"].startswith("waiting for Redis at"), body
    assert get(metrics, "/healthz")[0] == 503

    redis = subprocess.Popen(
        ["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--hash-max-listpack-value", "256"],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        until(lambda: get(metrics, "/readyz")[0] == 200, 60, lambda: logs([server]))
        _, body = get(metrics, "/healthz")
        assert body["ready"] and body["partitions"] == 2, body
        assert server.stop() == 0, logs([server])
    finally:
        redis.terminate()
        redis.wait(10)


# ----------------------------------------------------------------- topics


def test_a_mistyped_input_topic_is_waited_for_never_created(names: Names) -> None:
    create_topics({names.input: 1})
    typo = names.input[:-1] + ("x" if names.input[-1] != "x" else "y")
    done = neardup(serve_args(names, "--input-topic", typo, "--startup-timeout", "3"))
    assert done.returncode == 1, done.stderr[-2000:]
    assert f"the input topic {typo!r} does not exist (did you mean {names.input!r}?)" in (
        done.stderr
    ), done.stderr[-2000:]
    client = admin()
    try:
        assert typo not in client.list_topics(), "serve created the mistyped topic"
    finally:
        client.close()


def test_the_input_topic_may_come_later_and_outputs_are_made_with_its_partitions(
    names: Names, serve: Callable[..., Serve]
) -> None:
    """The output and dead-letter topics are made, with as many partitions as the input
    topic, once it exists; --no-create-topics requires them instead. (No reader of the
    output may start before serve made it: a kafka-python consumer with its defaults would
    have the broker create it, with one partition.)"""
    delete_topics([names.output, names.dead_letter])
    until(lambda: not {names.output, names.dead_letter} & set(_topics()), 30, str)
    done = neardup(serve_args(names, "--no-create-topics", "--startup-timeout", "2"))
    assert done.returncode == 1, done.stderr[-2000:]  # waited for the input topic in vain

    server = serve(["--startup-timeout", "60"])
    # a loaded machine can take seconds to start serve: wait for its line, well inside the
    # 60 s that serve waits for the topic
    until(lambda: "waiting for the input topic" in server.log(), 30, server.log)
    create_topics({names.input: 3})
    with Producer() as producer:
        producer.send_record(names.input, {"id": "later", "text": "a record after the wait"})
        producer.flush()
    until(lambda: f"created topic {names.dead_letter!r}" in server.log(), 60, server.log)
    assert f"created topic {names.output!r} with 3 partition(s)" in server.log()
    partitions = {t["name"]: len(t["partitions"]) for t in _describe([names.output])}
    assert partitions == {names.output: 3}, partitions
    decisions = DecisionReader(names.output, partitions=3)
    try:
        assert not decisions.wait_for(["later"], timeout=60), logs([server])
    finally:
        decisions.close()
    assert server.stop() == 0, logs([server])

    delete_topics([names.dead_letter])
    until(lambda: names.dead_letter not in _topics(), 30, str)
    done = neardup(serve_args(names, "--no-create-topics"))
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"the dead-letter topic {names.dead_letter!r} does not exist" in done.stderr


def _topics() -> list[str]:
    client = admin()
    try:
        return list(client.list_topics())
    finally:
        client.close()


def _describe(topics: list[str]) -> list[dict[str, Any]]:
    client = admin()
    try:
        return list(client.describe_topics(topics))
    finally:
        client.close()


# ----------------------------------------------------------------- the running consumer


def test_the_log_the_lag_and_where_a_new_group_starts(
    names: Names, serve: Callable[..., Serve], decisions: DecisionReader
) -> None:
    """--start-from latest skips what the topic held before the group existed; the log
    names the partitions assigned and revoked, says how it is going, and ends with a
    summary; /metrics has the lag of each partition."""
    create_topics({names.input: 2})
    with Producer() as producer:
        for n in range(10):
            producer.send_record(names.input, {"id": f"old-{n}", "text": f"before the group {n}"})
        producer.flush()
    metrics = free_port()
    server = serve(["--start-from", "latest", "--log-every", "1", "--metrics-port", str(metrics)])
    until(lambda: get(metrics, "/readyz")[0] == 200, 60, lambda: logs([server]))
    time.sleep(1)  # the positions are taken at the end of each partition
    fresh = [{"id": f"new-{n}", "text": f"after the group started, number {n}"} for n in range(6)]
    with Producer() as producer:
        for r in fresh:
            producer.send_record(names.input, r)
        producer.flush()
    assert not decisions.wait_for([r["id"] for r in fresh], timeout=60, idle=2), logs([server])
    assert {d["id"] for d in decisions.records} == {r["id"] for r in fresh}

    until(lambda: "progress: " in server.log(), 30, lambda: logs([server]))
    scrape = urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=5).read()
    lags = [line for line in scrape.decode().splitlines() if line.startswith("neardup_partition")]
    assert sorted(lags) == [
        f'neardup_partition_lag{{partition="{p}",topic="{names.input}"}} 0.0' for p in (0, 1)
    ], lags
    assert server.stop() == 0, logs([server])
    log = server.log(20000)
    assert f"assigned 2 partition(s): {names.input}-0, {names.input}-1" in log, log
    assert "progress: 6 records" in log or "progress: " in log, log
    assert "SIGTERM: stopping after the batch in flight" in log, log
    assert f"revoked 2 partition(s): {names.input}-0, {names.input}-1" in log, log
    assert "stopped: 6 records" in log and "6 unique" in log, log


# ----------------------------------------------------------------- tail


def test_tail_shows_where_each_record_is_and_reads_the_dead_letter_topic(names: Names) -> None:
    create_topics({names.input: 2})
    with Producer() as producer:
        producer.send(
            names.dead_letter,
            b'{"reason": "invalid_json"}',
            key=b"k1",
            headers=[("traceparent", b"00-ab-cd-01")],
        )
        producer.send(names.dead_letter, None, key=b"gone")  # a tombstone
        producer.send(names.dead_letter, b"not json", partition=0)
        producer.flush()
    tail = ["tail", "--dead-letters", "--dead-letter-topic", names.dead_letter,
            "--from-beginning", "--idle", "3"]  # fmt: skip
    shown = neardup([*tail, "--format", "json"])
    assert shown.returncode == 0, shown.stderr
    records = [json.loads(line) for line in shown.stdout.splitlines()]
    assert [(r["key"], r["value"]) for r in records] == [
        ("k1", {"reason": "invalid_json"}),
        ("gone", None),
        (None, "not json"),
    ], records
    assert records[0]["headers"] == {"traceparent": "00-ab-cd-01"}
    assert [(r["topic"], r["partition"], r["offset"]) for r in records] == [
        (names.dead_letter, 0, n) for n in range(3)
    ]
    assert all(isinstance(r["timestamp"], int) for r in records)

    values = neardup(tail)  # the values alone: a tombstone has none to show
    assert values.stdout.splitlines() == ['{"reason": "invalid_json"}', "not json"]

    missing = neardup(["tail", "--topic", names.input + "x", "--idle", "1"])
    assert missing.returncode == 2, missing.stderr
    assert "does not exist (did you mean" in missing.stderr and repr(names.input) in missing.stderr
