"""detector.index.redis.lua: each script's typed pair, without a server. A builder puts
KEYS and ARGV where the script's header says (and as many as it names), a parser reads
each form of the reply. The integration tests run the pairs against Redis."""

from __future__ import annotations

import re

import numpy as np
import pytest

from detector.index import Commit, Entry
from detector.index.redis import lua
from detector.index.redis.keys import (
    LOG,
    Layout,
    Stored,
    digest_hash,
    pack_digest,
    record,
    record_body,
    record_head,
)
from detector.records import Decision

LAYOUT = Layout("pairs")


def header_argv(script: str) -> int:
    """The highest ARGV[n] the header of `script` describes."""
    return max(int(n) for n in re.findall(r"^-- +ARGV\[(\d+)\]", script, re.M))


# Scripts of a fixed number of arguments: a sample call of each builder.
FIXED = {
    "snapshot": lua.snapshot_args(LAYOUT, 60),
    "applied": lua.applied_args(LAYOUT, "1:2:3", 100),
    "sweep_ids": lua.sweep_ids_args(LAYOUT, 10, 1024),
    "count_ids": lua.count_ids_args(LAYOUT, 4096),
    "filter_bucket": lua.filter_bucket_args("b", 5, 7, 10),
    "sweep_buckets": lua.sweep_buckets_args(["b1", "b2"], 10, 10),
    "forget_digest": lua.forget_digest_args("dg", b"f", 7),
    "sweep_digests": lua.sweep_digests_args(["dg1", "dg2"], 10),
}


@pytest.mark.parametrize("name", sorted(FIXED))
def test_a_builder_gives_the_arguments_its_header_names(name: str) -> None:
    args = FIXED[name]
    assert len(args.argv) == header_argv(args.script)
    assert args.command() == ("EVAL", args.script, len(args.keys), *args.keys, *args.argv)


def test_the_coordinators_scripts_are_routed_by_seq_and_told_the_prefix() -> None:
    for args in (FIXED[n] for n in ("snapshot", "applied", "sweep_ids", "count_ids")):
        assert args.keys == (LAYOUT.seq,) and args.key == LAYOUT.seq
        assert args.argv[0] == LAYOUT.prefix
    assert lua.delete_args(LAYOUT, ["a", "b"]).argv == (LAYOUT.prefix, "a", "b")


def entry(doc_id: str = "d1", space: str = "t") -> Entry:
    return Entry(doc_id, space, 0x0123456789ABCDEF, "dig", "some text")


def test_a_commit_item_is_its_eight_arguments() -> None:
    d = Decision("d1", None, 0x0123456789ABCDEF, digest="dig")
    dh = digest_hash("dig")
    indexed = lua.CommitItem.of(Commit(d, entry()), entry(), dh)
    assert (indexed.id, indexed.name, indexed.kind) == ("d1", "d1", "e")
    assert indexed.mine == pack_digest("dig") == b"\x02dig"
    log = np.frombuffer(indexed.entry, LOG)  # the 32-byte LOG record the script appends
    assert len(log) == 1 and int(log["fp"][0]) == 0x0123456789ABCDEF
    assert bytes(log["dh"][0]) == dh and log["space"][0] == b"t"
    assert indexed.body == record_body(d) and b'"id"' not in indexed.body
    assert indexed.head == record_head(d, "t", dh) and indexed.head.endswith(b"\x01t" + dh)
    assert lua.CommitItem.of(Commit(d, None), None, b"").kind == "x"
    replay = lua.CommitItem.of(Commit(d, None, replay=True), None, b"")
    assert (replay.kind, replay.entry) == ("r", b"")
    revised = lua.CommitItem.of(
        Commit(d, None, previous=Decision("d1", None, 1, digest="0a1b")), None, b""
    )
    assert revised.prev == b"\x01\x0a\x1b"

    args = lua.commit_args(LAYOUT, 5, [indexed, replay], 0, 90, 1, keep_old=True)
    assert args.argv[:7] == (LAYOUT.prefix, 5, 2, 0, 90, 1, "1")
    assert args.argv[7:15] == (
        *("d1", "d1", "e", indexed.head, indexed.body, indexed.entry, b"", b"\x02dig"),
    )
    assert len(args.argv) == 7 + 8 * 2
    assert lua.commit_args(LAYOUT, 5, [], 0, 0, 1, keep_old=False).argv[6] == "0"


def test_every_form_of_the_commit_reply_is_read() -> None:
    raw_log = np.zeros(2, LOG).tobytes()
    stale = lua.CommitReply.parse([b"stale", 9, raw_log], ["a"])
    assert (stale.status, stale.seq, len(stale.log)) == ("stale", 9, 2)
    assert lua.CommitReply.parse([b"moved", 3], ["a"]) == lua.CommitReply("moved", moved=3)
    assert lua.CommitReply.parse([b"relookup"], ["a"]).status == "relookup"
    stored = record(Stored(Decision("a", None, 1, digest="x"), None))
    ok = lua.CommitReply.parse(
        [b"ok", [b"n12", b"s" + stored, b""], b"12:12:1700", [b"", b"", b""]], ["z", "a", "b"]
    )
    assert ok.status == "ok" and ok.member == "12:12:1700"
    assert ok.outcomes[0] == lua.Outcome(number=12)
    assert ok.outcomes[1].stored is not None and ok.outcomes[1].stored.decision.id == "a"
    assert ok.outcomes[2] == lua.Outcome()
    assert ok.replaced == (None, None, None)


def test_the_snapshot_and_a_shards_apply_are_read() -> None:
    log = np.zeros(3, LOG).tobytes()
    snap = lua.Snapshot.parse([7, 4, log, 2, b"5:7:1700", (1234).to_bytes(4, "little")])
    assert (snap.seq, snap.first, len(snap.log), snap.cutoff) == (7, 4, 3, 2)
    assert (snap.oldest_pending, snap.dictionary) == ("5:7:1700", 1234)
    assert lua.Snapshot.parse([0, 0, b"", 0, b"", b""]).dictionary == 0
    # the script answers the buckets cut back from 1; the parser, positions from 0
    assert lua.ApplyShardReply.parse([3, 1, 4]) == lua.ApplyShardReply(3, (0, 3))


def test_a_shards_apply_puts_buckets_then_digests_then_its_counter() -> None:
    args = lua.apply_shard_args(
        ["b1", "b2"],
        [3, 4],
        [b"e1", b"e2"],
        ["dg"],
        [(b"f", 9)],
        "evicted",
        "sp",
        10,
        300,
        200,
        60,
        5,
        ["t"],
    )
    assert args.keys == ("b1", "b2", "dg", "evicted", "sp") and args.key == "b1"
    assert args.argv == (2, 10, 300, 200, 60, 5, 1, 3, b"e1", 4, b"e2", "t", b"f", 9)
    digests_only = lua.apply_shard_args([], [], [], ["dg"], [(b"f", 9)], "ev", "sp", 10, 3, 2, 0)
    assert digests_only.key == "dg" and digests_only.argv[0] == 0


def test_the_pairs_of_the_variadic_scripts() -> None:
    repack = lua.repack_args(["t1", "t2"], [(b"a", b"A"), (b"b", b"B")])
    assert repack.keys == ("t1", "t2") and repack.argv == (b"a", b"A", b"b", b"B")
    learn = lua.learn_template_args("tp", "tc", 500, 3, 0, [(5, b"k5"), (6, b"k6")])
    assert learn.keys == ("tp", "tc") and learn.argv == (500, 3, 0, 5, b"k5", 6, b"k6")
    value = b'#{"n":0,"r":0}\n' + Decision("x", None, 1).to_json().encode()
    gone = lua.delete_reply([b"", value], ["w", "x"])
    assert gone[0] is None and gone[1] is not None and gone[1].decision.id == "x"
