"""End to end: `neardup produce` -> a 6-partition topic -> three `neardup serve` processes
in one group -> the decisions topic, compared with `neardup detect` on the same file.

The 2,000-record stream (tests/data/stream-2k.jsonl.gz, the head of the dev stream) has
171 true near-duplicates, so a point of precision or recall is about two records; the
400-record sample (10 duplicates) could not tell 0.01 apart.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer

from detector.index.redis import RedisIndex
from detector.service import CLUSTERS_EVERY

from ..helpers import (
    SAMPLE,
    STREAM_2K,
    STREAM_2K_TRUTH,
    free_port,
    read_jsonl,
    template_site,
    verdict,
    write_jsonl,
)
from .admin import create_topics
from .endpoints import BOOTSTRAP, redis_client
from .invariants import check_invariants
from .processes import Names, Serve, logs, produce_file, run_detector
from .readers import DecisionReader, without_notes

PARTITIONS = 6
CONSUMERS = 3
DECIDE_TIMEOUT = 150.0


def produce_by_page(records: list[dict[str, Any]], topic: str) -> None:
    """Key each record by its source page, as a crawler keys by canonical URL: the versions
    of one page share a partition and keep their order; different pages, near-identical
    or not, still race each other across the six partitions."""
    pages = {t["id"]: t["name"] for t in read_jsonl(STREAM_2K_TRUTH)}
    producer = KafkaProducer(bootstrap_servers=BOOTSTRAP.split(","), linger_ms=20)
    try:
        for r in records:
            producer.send(topic, key=pages[r["id"]].encode(), value=json.dumps(r).encode())
        producer.flush()
    finally:
        producer.close()


def scores(decided: list[dict[str, Any]], truth: Path, tmp: Path, name: str) -> dict[str, Any]:
    path = write_jsonl(tmp / f"{name}.jsonl", without_notes(decided))
    out = run_detector(["eval", str(path), str(truth), "--json"])
    scored: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return scored


def in_stream_order(decided: dict[str, dict[str, Any]], ids: list[str]) -> list[dict[str, Any]]:
    """The decisions as if the records had been decided in file order.

    Kafka keeps order within a partition only: across the 6 partitions a repost is often
    decided before its original, so serve says "original duplicate_of repost" where the
    truth file (whose "earlier" is file order) expects the reverse; scored raw, each such
    inversion costs a false positive and a false negative although serve found the pair.
    Here every group of records linked by duplicate_of is relabelled the file-order way:
    its earliest record unique, the others duplicates of it. Groups, not arrival order,
    are what serve and detect must agree on."""
    position = {i: n for n, i in enumerate(ids)}
    parent = {i: i for i in ids}

    def root(i: str) -> str:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, d in decided.items():
        if d["duplicate_of"] is not None:
            a, b = root(i), root(d["duplicate_of"])
            if a != b:
                parent[max(a, b, key=position.__getitem__)] = min(a, b, key=position.__getitem__)
    out = []
    for i in ids:
        first = root(i)
        out.append(
            {
                **decided[i],
                "decision": "unique" if first == i else "duplicate",
                "duplicate_of": None if first == i else first,
            }
        )
    return out


def test_three_consumers_decide_like_detect_and_again_on_redelivery(
    names: Names,
    index_at: dict[str, str],
    serve: Callable[..., Serve],
    decisions: DecisionReader,
    tmp_path: Path,
) -> None:
    records = read_jsonl(STREAM_2K)
    ids = [r["id"] for r in records]
    assert len(ids) == len(set(ids)) == 2000

    create_topics({names.input: PARTITIONS})
    servers = [serve(env=index_at) for _ in range(CONSUMERS)]
    produce_by_page(records, names.input)

    missing = decisions.wait_for(ids, DECIDE_TIMEOUT, idle=2.0)
    assert not missing, (
        f"{len(missing)} of {len(ids)} records undecided, e.g. {missing[:5]}\n{logs(servers)}"
    )
    assert all(s.alive() for s in servers), logs(servers)
    first_round = len(decisions.records)

    run_detector(["detect", str(STREAM_2K), "-o", str(tmp_path / "detect.jsonl")])
    reference = read_jsonl(tmp_path / "detect.jsonl")
    assert [r["id"] for r in reference] == ids
    final = check_invariants(records, decisions.by_id(), reference)

    raw = scores([final[i] for i in ids], STREAM_2K_TRUTH, tmp_path, "serve-raw")
    got = scores(in_stream_order(final, ids), STREAM_2K_TRUTH, tmp_path, "serve")
    want = scores(reference, STREAM_2K_TRUTH, tmp_path, "detect")
    assert want["duplicate_of_not_earlier"] == 0, want
    assert got["decided"] == want["decided"] == len(ids)
    assert abs(got["precision"] - want["precision"]) <= 0.01, (got, want, raw)
    assert abs(got["recall"] - want["recall"]) <= 0.01, (got, want, raw)

    # The same records once more: each gets the decision it got the first time.
    produce_by_page(records, names.input)
    again = DecisionReader(names.output)
    try:
        again.consumer.seek(again.partitions[0], first_round)
        missing = again.wait_for(ids, DECIDE_TIMEOUT, idle=2.0)
        assert not missing, (
            f"{len(missing)} redelivered records undecided, e.g. {missing[:5]}\n{logs(servers)}"
        )
        second = again.by_id()
    finally:
        again.close()
    changed = [
        (i, verdict(final[i]), verdict(d))
        for i in ids
        for d in second[i]
        if (d["decision"], d["duplicate_of"]) != (final[i]["decision"], final[i]["duplicate_of"])
    ]
    assert not changed, f"{len(changed)} records decided differently the second time: {changed[:5]}"
    details = [(i, d) for i in ids for d in second[i] if verdict(d) != verdict(final[i])]
    assert not details, f"redelivered records got different decision details: {details[:5]}"

    for s in servers:
        assert s.stop() == 0, logs(servers)


# small-cache: the literal pass keeps few shingle sets, so most candidates' texts are read
# back from Redis (the most the cache holds of the stream's longest record and a few more)
SMALL_CACHE = ["--literal-memory", "1700000"]
# sketches: no text kept but the shortest, every other candidate judged on its sketch
SKETCHES = ["--text-window", "0"]


@pytest.mark.parametrize(
    "extra",
    [[], ["--prefetch"], SMALL_CACHE, SKETCHES],
    ids=["inline", "prefetch", "small-cache", "sketches"],
)
def test_one_consumer_on_one_partition_decides_exactly_like_detect(
    names: Names,
    serve: Callable[..., Serve],
    decisions: DecisionReader,
    tmp_path: Path,
    extra: list[str],
) -> None:
    """In file order (one partition) serve against Redis and detect against memory are
    the same algorithm: the same decision for every record, and the same scores; with
    the next batch prepared in a thread too (--prefetch), and with the candidates' texts
    read back from Redis, most of them packed with the index's text dictionary (made
    once serve had written index.texts.SAMPLE_TEXTS texts); and with no text kept, where
    the candidates are judged on the sketches read from Redis, with the evidence said."""
    records = read_jsonl(STREAM_2K)
    ids = [r["id"] for r in records]
    create_topics({names.input: 1})
    metrics = free_port()
    server = serve([*extra, "--metrics-port", str(metrics)])
    produce_file(STREAM_2K, names.input, 1)
    missing = decisions.wait_for(ids, DECIDE_TIMEOUT, idle=1.0)
    assert not missing, f"{len(missing)} records undecided, e.g. {missing[:5]}\n{logs([server])}"
    scrape = urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=5)
    counted = {
        line.split('"')[1]: float(line.split()[-1])
        for line in scrape.read().decode().splitlines()
        if line.startswith("neardup_evidence_total{")
    }
    window = extra if extra == SKETCHES else []
    run_detector(["detect", str(STREAM_2K), "-o", str(tmp_path / "detect.jsonl"), *window])
    reference = read_jsonl(tmp_path / "detect.jsonl")
    final = check_invariants(records, decisions.by_id(), reference)
    differ = [
        (r["id"], verdict(r), r["evidence"], verdict(final[r["id"]]), final[r["id"]]["evidence"])
        for r in reference
        if (verdict(r), r["evidence"]) != (verdict(final[r["id"]]), final[r["id"]]["evidence"])
    ]
    assert not differ, f"{len(differ)} records decided differently by serve: {differ[:5]}"
    got = scores([final[i] for i in ids], STREAM_2K_TRUTH, tmp_path, "serve")
    want = scores(reference, STREAM_2K_TRUTH, tmp_path, "detect")
    assert got == want
    assert server.stop() == 0, logs([server])
    evidence = {final[i]["evidence"] for i in ids}
    assert sum(counted.values()) == len(ids)  # the metrics count every decision's evidence
    assert {k for k, v in counted.items() if v} == evidence
    if extra == SKETCHES:
        assert {"sketch", "digest", "fingerprint"} <= evidence
    else:
        assert "sketch" not in evidence
        assert RedisIndex.open(redis_client(), names.index).stats()["text_dictionary"]


def test_hot_buckets_are_counted_logged_and_in_index_stats(
    names: Names, serve: Callable[..., Serve], decisions: DecisionReader
) -> None:
    """Nothing is dropped in silence: with 8-bit table keys and --max-bucket 1, the
    sample's 390 unique records overflow their buckets; serve counts every entry pushed
    out of the reads (/metrics), logs each bucket it cuts back with its table and key,
    and `index stats` has the same total."""
    produce_file(SAMPLE, names.input, 1)
    metrics = free_port()
    server = serve(["--scheme", "k7-b8", "--max-bucket", "1", "--metrics-port", str(metrics)])
    ids = [r["id"] for r in read_jsonl(SAMPLE)]
    assert not decisions.wait_for(ids, timeout=DECIDE_TIMEOUT), logs([server])
    scrape = urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=5)
    values = {
        line.split(" ")[0]: float(line.split(" ")[1])
        for line in scrape.read().decode().splitlines()
        if line.startswith(("neardup_bucket_evictions_total", "neardup_bucket_cuts_total"))
    }
    evicted = values["neardup_bucket_evictions_total"]
    assert evicted > 100 and values["neardup_bucket_cuts_total"] > 10, values
    assert "reached --max-bucket 1 and were cut back" in server.log(100_000)
    assert " table " in server.log(100_000) and " key 0x" in server.log(100_000)
    stats = json.loads(run_detector(["index", "stats", "--index", names.index]).stdout)
    assert stats["evicted"] == evicted, stats
    assert server.stop() == 0, logs([server])


def test_a_host_taken_in_by_one_cluster_is_logged_and_in_the_metrics(
    names: Names, serve: Callable[..., Serve], decisions: DecisionReader, tmp_path: Path
) -> None:
    """A site cut to its template (--html text): every page joins the first one's cluster,
    and serve logs it once, counts it and shows the host's share and the cluster's size."""
    records = template_site()
    produce_file(write_jsonl(tmp_path / "site.jsonl", records), names.input, 1)
    metrics = free_port()
    server = serve(["--html", "text", "--metrics-port", str(metrics)])
    ids = [r["id"] for r in records]
    assert not decisions.wait_for(ids, timeout=DECIDE_TIMEOUT), logs([server])
    final = {i: ds[0] for i, ds in decisions.by_id().items()}
    assert {d["cluster"] for d in final.values()} == {"p0"}
    time.sleep(CLUSTERS_EVERY)  # the gauges are ranked at most this often: one batch more
    late = [{"id": "late", "text": "a record of other words after the site's pages"}]
    produce_file(write_jsonl(tmp_path / "late.jsonl", late), names.input, 1)
    assert not decisions.wait_for(["late"], timeout=DECIDE_TIMEOUT), logs([server])
    scrape = urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=5).read()
    values = {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in scrape.decode().splitlines()
        if line.startswith("neardup_") and "cluster" in line
    }
    assert values["neardup_runaway_clusters_total"] == 1, values
    assert values["neardup_largest_cluster_size"] == 60, values
    assert values['neardup_host_cluster_share{host="site.example"}'] == 1.0, values
    warned = "holds 100% of the 50 pages of site.example decided here"
    assert server.log(100_000).count(warned) == 1, server.log()
    assert server.stop() == 0, logs([server])
