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
    "applied": lua.applied_args(LAYOUT, "1:2:3", 100, 50, 10),
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
    coordinators = (
        FIXED["snapshot"],
        FIXED["applied"],
        lua.recent_args(LAYOUT, ["a"]),
        lua.names_args(LAYOUT, [3, 4]),
        lua.delete_args(LAYOUT, 7, ["a", "b"], [b"", b"r"]),
    )
    for args in coordinators:
        assert args.keys == (LAYOUT.seq,) and args.key == LAYOUT.seq
        assert args.argv[0] == LAYOUT.prefix
    assert coordinators[4].argv == (LAYOUT.prefix, 7, "a", b"", "b", b"r")
    assert coordinators[3].argv == (LAYOUT.prefix, 3, 4)


def entry(doc_id: str = "d1", space: str = "t") -> Entry:
    return Entry(doc_id, space, 0x0123456789ABCDEF, "dig", "some text")


def test_a_commit_item_is_its_nine_arguments() -> None:
    d = Decision("d1", None, 0x0123456789ABCDEF, digest="dig")
    dh = digest_hash("dig")
    indexed = lua.CommitItem.of(Commit(d, entry()), entry(), dh, b"")
    assert (indexed.id, indexed.name, indexed.kind) == ("d1", "d1", "e")
    assert indexed.mine == pack_digest("dig") == b"\x02dig"
    log = np.frombuffer(indexed.entry, LOG)  # the 32-byte LOG record the script appends
    assert len(log) == 1 and int(log["fp"][0]) == 0x0123456789ABCDEF
    assert bytes(log["dh"][0]) == dh and log["space"][0] == b"t"
    assert indexed.body == record_body(d) and b'"id"' not in indexed.body
    assert indexed.head == record_head(d, "t", dh) and indexed.head.endswith(b"\x01t" + dh)
    assert lua.CommitItem.of(Commit(d, None), None, b"", b"").kind == "x"
    replay = lua.CommitItem.of(Commit(d, None, replay=True), None, b"", b"")
    assert (replay.kind, replay.entry) == ("r", b"")
    revised = lua.CommitItem.of(
        Commit(d, None, previous=Decision("d1", None, 1, digest="0a1b")), None, b"", b"old"
    )
    assert (revised.prev, revised.old) == (b"\x01\x0a\x1b", b"old")

    args = lua.commit_args(LAYOUT, 5, 4, [indexed, replay], 90, 1, keep_old=True)
    assert args.argv[:7] == (LAYOUT.prefix, 5, 4, 2, 90, 1, "1")
    assert args.argv[7:16] == (
        *("d1", "d1", "e", indexed.head, indexed.body, indexed.entry, b"", b"\x02dig", b""),
    )
    assert len(args.argv) == 7 + 9 * 2
    assert lua.commit_args(LAYOUT, 5, 5, [], 0, 1, keep_old=False).argv[6] == "0"


def test_every_form_of_the_commit_reply_is_read() -> None:
    raw_log = np.zeros(2, LOG).tobytes()
    stale = lua.CommitReply.parse([b"stale", 9, raw_log], ["a"])
    assert (stale.status, stale.seq, len(stale.log)) == ("stale", 9, 2)
    assert lua.CommitReply.parse([b"moved", 3], ["a"]) == lua.CommitReply("moved", moved=3)
    assert lua.CommitReply.parse([b"relookup"], ["a"]).status == "relookup"
    stored = record(Stored(Decision("a", None, 1, digest="x"), None))
    ok = lua.CommitReply.parse(
        [
            b"ok",
            [[b"n", 12, b"\0\0"], [b"s", stored], [b""], [b"x", 13, b"\0\0"]],
            b"12:13:1700",
            [b"", b"", b"", b""],
        ],
        ["z", "a", "b", "c"],
    )
    assert ok.status == "ok" and ok.member == "12:13:1700"
    assert ok.outcomes[0] == lua.Outcome(write=12, indexed=True, kept=b"\0\0")
    assert ok.outcomes[0].number == 12 and ok.outcomes[3].number == 0
    assert ok.outcomes[1].stored is not None and ok.outcomes[1].stored.decision.id == "a"
    assert ok.outcomes[2] == lua.Outcome()
    assert ok.replaced == (None, None, None, None)


def test_the_snapshot_and_a_shards_apply_are_read() -> None:
    log = np.zeros(3, LOG).tobytes()
    snap = lua.Snapshot.parse([7, 4, log, 2, b"5:7:1700", (1234).to_bytes(4, "little")])
    assert (snap.seq, snap.first, len(snap.log), snap.cutoff) == (7, 4, 3, 2)
    assert (snap.oldest_pending, snap.dictionary) == ("5:7:1700", 1234)
    assert lua.Snapshot.parse([0, 0, b"", 0, b"", b""]).dictionary == 0
    # the script answers the buckets cut back from 1; the parser, positions from 0
    assert lua.ApplyShardReply.parse([3, 1, 4]) == lua.ApplyShardReply(3, (0, 3))


def test_a_shards_apply_puts_buckets_digests_ids_decisions_then_its_counters() -> None:
    part = lua.ShardPart(
        [0, 1],
        ["b1", "b2"],
        [3, 4],
        [b"e1", b"e2"],
        {"t"},
        ["dg"],
        [(b"f", 9)],
        ["id1"],
        [(9, "d9", "m")],
        [("dc", "dk")],
        [(b"d9", b"rec", 0)],
    )
    args = lua.apply_shard_args(part, "evicted", "sp", "ct", 10, 300, 200, 60, 5)
    assert args.keys == ("b1", "b2", "dg", "id1", "dc", "dk", "evicted", "sp", "ct")
    assert args.key == "b1"
    assert args.argv == (
        *(2, 1, 1, 1, 10, 300, 200, 60, 5, 1),
        *(3, b"e1", 4, b"e2", "t", b"f", 9, 9, "d9", "m", b"d9", b"rec", 0),
    )
    assert header_argv(lua.APPLY_SHARD) == 10
    ids_only = lua.ShardPart(id_hashes=["id1"], id_changes=[(1, "x", "d")])
    args = lua.apply_shard_args(ids_only, "ev", "sp", "ct", 10, 3, 2, 0)
    assert args.key == "id1" and args.argv[:4] == (0, 0, 1, 0)
    sweep = lua.sweep_ids_args(["id1", "id2"], [128, 256], "ct", 300)
    assert sweep.keys == ("id1", "id2", "ct") and sweep.argv == (300, 128, 256)


def test_the_pairs_of_the_variadic_scripts() -> None:
    repack = lua.repack_args(["t1", "t2"], [(b"a", b"A"), (b"b", b"B")])
    assert repack.keys == ("t1", "t2") and repack.argv == (b"a", b"A", b"b", b"B")
    learn = lua.learn_template_args("tp", "tc", 500, 3, 0, [(5, b"k5"), (6, b"k6")])
    assert learn.keys == ("tp", "tc") and learn.argv == (500, 3, 0, 5, b"k5", 6, b"k6")
    value = record(Stored(Decision("x", None, 1), None, write=4))
    gone = lua.DeleteReply.parse([b"ok", b"5:5:1700", [b"", value]], ["w", "x"])
    assert gone.status == "ok" and gone.member == "5:5:1700" and gone.values == (b"", value)
    assert gone.deleted[0] is None and gone.deleted[1] is not None
    assert gone.deleted[1].decision.id == "x" and gone.deleted[1].write == 4
    assert lua.DeleteReply.parse([b"relookup"], ["w"]).status == "relookup"
    recent = lua.Recent.parse([7, [None, value]])
    assert recent == lua.Recent(7, (None, value))
    assert lua.names_reply([b"", b"a\x001"], [3, 4]) == {4: "a\x001"}
    read = lua.decisions_args([("h1", "k1", b"a"), ("h2", "k2", b"b")])
    assert read.key == "h1" and read.keys == ("h1", "k1", "h2", "k2") and read.argv == (b"a", b"b")
    assert lua.decisions_reply([value, None, None, b"k"]) == [(value, None), (None, b"k")]
