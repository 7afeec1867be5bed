"""RedisIndex: the index interface on a Redis server or a Redis Cluster, in the order a
batch goes through it: the index's plan (what it was made with: bind, open), the keys a
batch reads and writes, the lookup, the commit (texts first, then the coordinator's
COMMIT), the apply of a commit to the shards, and the repair of a range whose committer
left it unapplied; then what takes a version back out of the shards (a revision, delete)
and the counts (stats). The round trips are store.py's, the scripts' arguments and replies
lua.py's; the maintenance commands (sweep, export, import, drop, memory) are functions of
a RedisIndex in maintenance.py."""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import redis
from redis.cluster import RedisCluster

from ...blocks import BlockScheme
from ...errors import BackendUnavailable, ConfigError
from ...plan import planned_bucket
from ...profile import stage
from ...records import Decision
from ...vectors import default_vector_scheme, unpack
from .. import (
    DEFAULT_MAX_BUCKET,
    Candidate,
    Commit,
    Committed,
    Entry,
    Found,
    Query,
    by_lookup,
    lookup_scheme,
    record_of,
    scheme_for,
    text_kept,
)
from ..texts import Codec, Sample, join, split
from . import lua
from .keys import (
    FIELD_BITS,
    IDS_PER_HASH,
    LAYOUT,
    LOG,
    RECORD,
    SHARDS,
    TOMBSTONE,
    Layout,
    Version,
    digest_hash,
    entry_bytes,
    fields,
    pack_entries,
    parse_decision,
    parse_note,
    text_shard,
    unpack_entries,
    write_of,
)
from .lua import Snapshot
from .replication import Replication
from .store import Store
from .templates import RedisTemplates

__all__ = ["RedisIndex", "Snapshot"]

# The settings of the bucket hashes' listpack encoding and the least the index needs
# (ops/redis/redis.conf): the entries Redis's default, the value raised from 64 bytes,
# so that a small index's hashes stay listpacks with buckets of up to 21 entries.
LISTPACK = {"hash-max-listpack-entries": 512, "hash-max-listpack-value": 256}
MIGRATES_FROM = ("2", "3", "4")  # layouts `neardup index migrate` takes across
LOG_KEEP = 65_536  # log entries kept below the applied mark, for slow consumers' checks
# Writes whose records and notes stay in the coordinator (rd, rw) below the applied mark:
# a consumer whose batch takes longer than this many other writes reads again
RECENT_KEEP = 16_384
TRIM_CHUNK = 2_048  # recent writes an APPLIED trims at most: about 2 ms of the coordinator
CUTS_NAMED = 8  # buckets cut back that a log line names; the rest are counted
REPAIR_AFTER = 30.0  # seconds a committed range may stay unapplied before others apply it
COMMIT_ROUNDS = 50  # stale answers in a row before the batch is decided afresh
# A process trims the index's texts to the window every TRIM_EVERY texts it writes into it
# (or a sixteenth of a smaller window), TEXTS_TRIMMED a shard's script at most.
TRIM_EVERY, TEXTS_TRIMMED = 1024, 512
QUEUE = object()  # trim_texts: where each shard's queue goes in a command
# What `stats` reports of the counts (keys.py), in this order.
COUNTS = ("documents", "committed", "replaced", "deleted", "expired")

log = logging.getLogger("neardup.index")


@dataclass(frozen=True)
class _Write:
    """A committed write, as the shards get it (_apply): the id's record (or tombstone)
    and its TTL, the version it indexed (number, fingerprint, space, digest hash), and
    the other id-map changes: the versions it took out of the lookups (number, name,
    cause 'r' or 'd'), or the map of its own version when a later write of the same
    commit took that out ('m')."""

    id: str
    value: bytes
    ttl: int
    indexed: tuple[int, int, str, bytes] | None
    name: str
    gone: tuple[tuple[int, str, str], ...] = ()


def _by_space(spaces: Sequence[str]) -> dict[str, list[int]]:
    """Positions grouped by fingerprint space, in order within a group."""
    out: dict[str, list[int]] = {}
    for i, space in enumerate(spaces):
        out.setdefault(space, []).append(i)
    return out


def _by_shard(shards: np.ndarray) -> list[list[int]]:
    """Positions grouped by shard, in order within a group."""
    order = np.argsort(shards, kind="stable")
    cuts = np.flatnonzero(np.diff(shards[order])) + 1
    return [g.tolist() for g in np.split(order, cuts)] if len(order) else []


def window_words(window: str) -> str:
    """A meta's text_window, in words."""
    if not window:
        return "every text (no --text-window)"
    return f"the texts of its newest {int(window):,} documents (--text-window {window})"


def _layout_problem(namespace: str, layout: str) -> str:
    """Why an index of another key layout is refused, and the way across."""
    if layout in MIGRATES_FROM:
        return (
            f"index {namespace!r} is in key layout {layout}, not {LAYOUT}: stop its "
            f"consumers, then run `neardup index migrate --index {namespace}` (with the "
            "same Redis options) to bring it across in place"
        )
    return (
        f"index {namespace!r} is in key layout {layout}, not {LAYOUT}: index its documents "
        "again under a new --index name"
    )


def check_encodings(client: redis.Redis | RedisCluster) -> None:
    """The server settings the bucket hashes' compact encoding relies on (keys.py):
    refused if lower than LISTPACK, a warning where CONFIG is not permitted. (A cluster
    client asks one node: the nodes share their configuration file.)"""
    try:
        got: Any = client.config_get("hash-max-listpack-*")
    except redis.ResponseError as exc:  # an ACL without CONFIG, a managed service
        log.warning(
            "could not check the server's hash-max-listpack-entries and "
            "hash-max-listpack-value (CONFIG GET: %s); the index's bucket hashes need at "
            "least %s to stay compact",
            exc,
            " and ".join(f"{k} {v}" for k, v in LISTPACK.items()),
        )
        return
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise BackendUnavailable(f"Redis: {exc}") from exc
    for name, least in LISTPACK.items():
        value = got.get(name)
        if value is not None and int(value) < least:
            raise ConfigError(
                f"the Redis server has {name} {value}; the index needs at least {least} "
                "(its bucket hashes would lose their compact listpack encoding): set it "
                "in the server's configuration (ops/redis/redis.conf)"
            )


class RedisIndex:
    """The interface of the memory index, on a Redis 7 server or a Redis Cluster.

    `observe`, if given, is called with the seconds of every round trip (serve passes its
    Prometheus histogram's `observe`). `codec` packs the texts (index.texts; by default
    zstd with the index's dictionary)."""

    def __init__(
        self,
        client: redis.Redis | RedisCluster,
        scheme: BlockScheme,
        namespace: str = "default",
        text_ttl: int = 0,
        decision_ttl: int = 0,
        retention: int = 0,
        max_bucket: int = DEFAULT_MAX_BUCKET,
        observe: Callable[[float], None] | None = None,
        vectors: BlockScheme | None = None,
        codec: Codec | None = None,
        expected_docs: int | None = None,
        text_window: int | None = None,
        replication: Replication | None = None,
    ) -> None:
        self.layout = Layout(namespace)
        if text_window is not None and text_window < 0:
            raise ConfigError(f"--text-window must be 0 or more, not {text_window}")
        if text_window is not None and text_ttl:
            raise ConfigError(
                "--text-ttl and --text-window: a text's key holds its sketch too, which must "
                "stay as long as the document is indexed; with a window, texts leave by "
                "count (use --retention for both)"
            )
        if retention < 0 or text_ttl < 0 or decision_ttl < 0 or max_bucket < 1:
            raise ConfigError("retention and TTLs must be >= 0 and max_bucket >= 1")
        if expected_docs is not None:
            if expected_docs < 1:
                raise ConfigError(f"--expected-docs must be at least 1, not {expected_docs}")
            _, problem = planned_bucket(scheme, max_bucket, expected_docs)
            if problem:
                raise ConfigError(f"--expected-docs {expected_docs}: {problem}")
        # the documents the index is planned for: recorded in its meta when it is made,
        # never a field a consumer must match (an index without a plan stays valid)
        self.expected_docs = expected_docs
        self.store = Store(client, self.layout, observe)
        self.store.replication = replication or Replication()
        self.client = client
        self.scheme = scheme
        self.vector_scheme = vectors or default_vector_scheme()
        self.entry_bytes = entry_bytes(scheme, self.vector_scheme)  # keys.py
        self.namespace = namespace
        self.prefix = self.layout.prefix
        self.retention = retention
        # Commit times are kept per window of `granularity` seconds: a document ages out
        # between `retention` and `retention + granularity` seconds after its commit.
        self.granularity = max(1, retention // 100)
        keep = retention + self.granularity if retention else 0
        self.text_ttl = text_ttl or keep
        self.decision_ttl = decision_ttl
        self.keep = keep  # indexed documents' decisions live as long as their entries
        self.max_bucket = max_bucket
        self.mark = 0  # seq at the last lookup: a commit checks what came after it
        self.applied = 0  # the applied mark at the last lookup (_ids)
        # the records the last read of decisions found, and the applied mark it rests on:
        # what the batch's commit is checked against (COMMIT's old and seen)
        self._read: dict[str, bytes] = {}
        self._read_ids: set[str] = set()
        self.read_mark = 0
        self.recent_keep = RECENT_KEEP
        self.cutoff = 0  # the retention cutoff at the last lookup (the apply prunes by it)
        self.swept_to = 0  # the next shard whose digests a sweep filters (maintenance)
        # Entries this process pushed out of a bucket's reads, and the buckets it cut back
        # (serve's metrics; `stats` has the index's total, from every process)
        self.evicted = 0
        self.cuts = 0
        self.codec = codec or Codec()
        # The texts this process wrote before the index had a dictionary: the sample it
        # trains one on, and what it packs again once there is one (its own or another's).
        self._sample: Sample | None = Sample() if self.codec.with_dictionary else None
        self.made_dictionary = False  # this process's dictionary is the index's
        # The newest text_window texts with a sketch keep their text (None: every text,
        # and no sketch is written): this process trims the index's texts to the window
        # every `trim_every` texts it writes into it (trim_texts).
        self.text_window = text_window
        self.trim_every = min(TRIM_EVERY, max(1, (text_window or 0) // 16))
        self._windowed = 0  # texts written into the window since the last trim
        # A sketch whose text has gone lives in a field of a sketch hash (keys.py: sk),
        # unless documents expire: then in its tx key, which keeps the TTL
        self.sketch_hashes = text_window is not None and not self.keep
        self._sample_sketches: dict[str, bytes] = {}  # of the sampled texts, to repack
        self._sketches_read: dict[str, bytes] = {}  # by the last read of texts

    def templates(self, threshold: int) -> RedisTemplates:
        """The site-template model in this index's shards, shared by its consumers."""
        return RedisTemplates(self.store, self.keep, threshold)

    # ------------------------------------------------------------------ plan

    def bind(self, version: str) -> None:
        meta = self.layout.meta
        want = {
            "layout": LAYOUT,
            "version": version,
            "scheme": self.scheme.name,
            "vectors": self.vector_scheme.name,
            "retention": str(self.retention),
            # "" for none: every consumer must keep the same window (texts with sketches,
            # trimmed to N), and `index` commands open the index with it
            "text_window": "" if self.text_window is None else str(self.text_window),
        }
        have = self.meta()
        if have and "layout" not in have:
            raise ConfigError(
                f"index {self.namespace!r} was written in an older key layout; "
                "index its documents again under a new --index name"
            )
        if have and have["layout"] != LAYOUT:
            raise ConfigError(_layout_problem(self.namespace, have["layout"]))
        check_encodings(self.client)
        # HSETNX the fields another process left unwritten: one that is writing them now
        # (two consumers starting at once), or one from before they existed (vectors);
        # what was written first wins, and a consumer that wants otherwise is refused below
        if not have or any(name not in have for name in want):
            made = {**want}
            if not have and self.expected_docs is not None:
                made["expected_docs"] = str(self.expected_docs)
            for name, value in made.items():
                self.store.call(self.client.hsetnx, meta, name, value)
            have = self.meta()
        planned = have.get("expected_docs")
        if self.expected_docs is not None and planned != str(self.expected_docs):
            log.warning(
                "index %r is planned for %s, not the --expected-docs %d given here: the "
                "index keeps the plan it was made with",
                self.namespace,
                f"{planned} documents (its meta's expected_docs)"
                if planned
                else "nothing (it was made without --expected-docs)",
                self.expected_docs,
            )
        what = {
            "layout": "key layout",
            "version": "fingerprints of",
            "scheme": "block scheme",
            "vectors": "block scheme for vectors",
            "retention": "retention (seconds)",
        }
        if have.get("text_window") != want["text_window"]:
            raise ConfigError(
                f"index {self.namespace!r} keeps "
                + window_words(have.get("text_window", ""))
                + ", not "
                + window_words(want["text_window"])
                + ": every consumer of an index keeps the same window (to change it, stop "
                f"them and set it: HSET {meta} text_window N, or '' for every text)"
            )
        for name, value in want.items():
            if name != "text_window" and have.get(name) != value:
                raise ConfigError(
                    f"index {self.namespace!r} uses {what[name]} {have.get(name)}, not {value}"
                )

    def meta(self) -> dict[str, str]:
        """What the index was made with (layout, version, scheme, retention); empty for
        an index nobody has written."""
        got = self.store.call(self.client.hgetall, self.layout.meta)
        return {k.decode(): v.decode() for k, v in got.items()}

    @classmethod
    def stored_meta(cls, client: redis.Redis | RedisCluster, namespace: str) -> dict[str, str]:
        """The meta of an existing index; a ConfigError if there is none."""
        meta = cls(client, BlockScheme.parse("k3-b4"), namespace).meta()
        if not meta:
            raise ConfigError(
                f"there is no index {namespace!r} on this Redis (no nd:{{{namespace}}}:meta)"
            )
        return meta

    @classmethod
    def open(cls, client: redis.Redis | RedisCluster, namespace: str) -> RedisIndex:
        """An existing index with the block scheme and retention it was made with, for the
        commands that maintain it (export, delete, sweep)."""
        return cls.from_meta(client, namespace, cls.stored_meta(client, namespace))

    @classmethod
    def of_meta(
        cls,
        client: redis.Redis | RedisCluster,
        namespace: str,
        meta: dict[str, Any],
        max_bucket: int = DEFAULT_MAX_BUCKET,
    ) -> RedisIndex:
        """The index `meta` describes (block schemes, retention), neither checked for its
        layout nor bound: what from_meta and `index migrate` build on."""
        vectors = meta.get("vectors")
        window = meta.get("text_window")
        return cls(
            client,
            BlockScheme.parse(meta["scheme"]),
            namespace,
            retention=int(meta["retention"]),
            max_bucket=max_bucket,
            vectors=BlockScheme.parse(vectors) if vectors else None,
            text_window=int(window) if window else None,
        )

    @classmethod
    def from_meta(
        cls, client: redis.Redis | RedisCluster, namespace: str, meta: dict[str, Any]
    ) -> RedisIndex:
        """The index that `meta` describes (an index's meta hash, or an export's header):
        its layout, block scheme, retention and fingerprint version, bound."""
        if meta.get("layout") != LAYOUT:
            raise ConfigError(_layout_problem(namespace, meta.get("layout", "1")))
        planned = meta.get("expected_docs")
        index = cls.of_meta(client, namespace, meta)
        # the plan travels with an export; not checked against the cap again: the index
        # was made with it (and a consumer's --max-bucket is its own)
        index.expected_docs = int(planned) if planned else None
        index.bind(meta["version"])
        return index

    @classmethod
    def from_export(
        cls, client: redis.Redis | RedisCluster, namespace: str, header: dict[str, Any]
    ) -> RedisIndex:
        """The index an export's header describes, to import it into: an export of a
        layout that `index migrate` takes across imports into this layout, since its
        records (decisions, texts, digests) do not depend on the key layout."""
        if header.get("layout") in MIGRATES_FROM:
            header = {**header, "layout": LAYOUT}
        return cls.from_meta(client, namespace, header)

    # ------------------------------------------------------------------ keys

    def scheme_for(self, space: str) -> BlockScheme:
        return scheme_for(space, self.scheme, self.vector_scheme)

    def _probed_buckets(
        self, queries: Sequence[Query]
    ) -> tuple[list[int], list[str], np.ndarray, np.ndarray, np.ndarray]:
        """The buckets a lookup reads, query by query: where each query's buckets start
        (and a last entry where the last one's end), the spaces, and each bucket's space
        (a position in them), table and key."""
        groups = by_lookup(queries)
        names = list(dict.fromkeys(space for space, _ in groups))
        probed = {}  # (space, k) -> (tables, keys), one row per query of the group
        counts = np.zeros(len(queries), np.intp)
        for (space, k), rows in groups.items():
            scheme = lookup_scheme(self.scheme_for(space), k)
            tables, keys = scheme.probe_array([queries[i].fingerprint for i in rows])
            probed[space, k] = (np.broadcast_to(tables, keys.shape), keys)
            counts[rows] = keys.shape[1]
        starts = np.concatenate(([0], np.cumsum(counts)))
        all_tables = np.zeros(starts[-1], np.int64)
        all_keys = np.zeros(starts[-1], np.uint64)
        all_spaces = np.zeros(starts[-1], np.int64)
        for (space, k), (tables, keys) in probed.items():
            rows = groups[space, k]
            at = (starts[rows][:, None] + np.arange(keys.shape[1])[None, :]).ravel()
            all_tables[at], all_keys[at] = tables.ravel(), keys.ravel()
            all_spaces[at] = names.index(space)
        return starts.tolist(), names, all_spaces, all_tables, all_keys

    def _read_buckets(
        self, batch: Any, names: list[str], spaces: np.ndarray, tables: np.ndarray, keys: np.ndarray
    ) -> Callable[[list[Any]], tuple[np.ndarray, bytes]]:
        """Add to `batch` the reads of buckets (space, table, key), `spaces` positions in
        `names`: one HMGET a bucket hash with all the batch's fields of it (resp.py packs
        them natively: a vector lookup names 548). Gives the reader of the batch's replies
        (the first of them its own): the bucket of each entry read (a position in `keys`)
        and the entries, in that order."""
        groups = keys >> np.uint64(FIELD_BITS)
        # the bits of a key above its field (none for keys of FIELD_BITS or fewer)
        widths = [max(0, max(self.scheme_for(sp).key_bits()) - FIELD_BITS) for sp in names]
        table_bits = int(tables.max()).bit_length() if len(tables) else 0
        if max(widths) + table_bits + len(names).bit_length() <= 63:
            shift = np.uint64(max(widths))
            code = (spaces.astype(np.uint64) << np.uint64(table_bits)) | tables.astype(np.uint64)
            code = (code << shift) | groups
            _, firsts, hash_of = np.unique(code, return_index=True, return_inverse=True)
        else:  # keys too wide to pack with their table: sorted column by column
            order = np.lexsort((groups, tables, spaces))
            g, t, sp = groups[order], tables[order], spaces[order]
            head = np.ones(len(order), bool)
            head[1:] = (g[1:] != g[:-1]) | (t[1:] != t[:-1]) | (sp[1:] != sp[:-1])
            firsts = order[head]
            hash_of = np.empty(len(order), np.int64)
            hash_of[order] = np.cumsum(head) - 1
        hashes, shards = self.layout.buckets(
            [names[i] for i in spaces[firsts].tolist()], tables[firsts], keys[firsts]
        )
        # the hashes by shard (as a cluster's nodes answer), each one's fields in order
        rank = np.empty(len(firsts), np.int64)
        rank[np.argsort(shards, kind="stable")] = np.arange(len(firsts))
        small = np.uint16 if len(firsts) <= 1 << 16 else np.uint32  # a radix sort
        replied = np.argsort(rank[hash_of].astype(small), kind="stable")
        in_order = np.argsort(rank)  # the hashes, in reply order
        ends = np.searchsorted(rank[hash_of][replied], np.arange(len(firsts) + 1))
        read_fields = fields(keys[replied])
        for r, h in enumerate(in_order.tolist()):
            batch.add(hashes[h], "HMGET", hashes[h], *read_fields[ends[r] : ends[r + 1]])
        calls = len(in_order)
        tail = self.max_bucket * self.entry_bytes

        def read(replies: list[Any]) -> tuple[np.ndarray, bytes]:
            values = [v for reply in replies[:calls] for v in reply]
            lengths = np.array([len(v) if v else 0 for v in values], np.int64)
            if len(lengths) and lengths.max() > tail:  # the newest max_bucket entries
                for i in np.flatnonzero(lengths > tail).tolist():
                    values[i] = values[i][-tail:]
                lengths = np.minimum(lengths, tail)
            owner = np.repeat(replied, lengths // self.entry_bytes)
            return owner, b"".join(filter(None, values))

        return read

    def _entered_buckets(
        self, docs: Sequence[tuple[int, int, str, bytes]]
    ) -> tuple[list[Any], np.ndarray, list[int], list[str], np.ndarray, np.ndarray]:
        """The buckets committed documents (number, fingerprint, space, digest hash) enter:
        their names and shards, the document of each, and its space, table and key."""
        if not docs:
            none = np.zeros(0, np.int64)
            return [], none, [], [], none, none.astype(np.uint64)
        owners: list[int] = []
        tables: list[np.ndarray] = []
        keys: list[np.ndarray] = []
        spaces: list[str] = []
        for space, rows in _by_space([space for _, _, space, _ in docs]).items():
            array = self.scheme_for(space).key_array([docs[i][1] for i in rows])
            per = array.shape[1]
            owners += [i for i in rows for _ in range(per)]
            tables.append(np.tile(np.arange(per), len(rows)))
            keys.append(array.ravel())
            spaces += [space] * array.size
        all_tables, all_keys = np.concatenate(tables), np.concatenate(keys)
        names, shards = self.layout.buckets(spaces, all_tables, all_keys)
        return names, shards, owners, spaces, all_tables, all_keys

    # ------------------------------------------------------------------ lookup

    def lookup(self, queries: Sequence[Query]) -> list[Found]:
        if not queries:
            return []
        snap = self.store.snapshot(self.retention)
        self.mark, self.cutoff, self.applied = snap.seq, snap.cutoff, snap.first
        if self.codec.with_dictionary and snap.dictionary != self.codec.dictionary_id:
            self._see_dictionary(snap.dictionary)
        if snap.oldest_pending:
            self._repair(snap.oldest_pending)
        starts, names, spaces, tables, keys = self._probed_buckets(queries)
        dhs = [digest_hash(q.digest) for q in queries]
        batch = self.store.batch()
        read = self._read_buckets(batch, names, spaces, tables, keys)
        for dh in dhs:
            key = self.layout.digest(dh)
            batch.add(key, "HGET", key, dh[2:])
        replies = self.store.call(batch.execute)
        digests = replies[len(replies) - len(dhs) :]
        fps, nums, offsets = self._entries(*read(replies), starts, names, spaces, tables, keys)
        near, exact = self._filtered(queries, dhs, digests, snap, fps, nums, offsets)

        ids = self._ids({n for f in near for n in f} | {n for n in exact if n is not None})
        out = []
        for q, f, ex in zip(queries, near, exact, strict=True):
            cands = [
                Candidate(ids[n], fp, (fp ^ q.fingerprint).bit_count())
                for n, fp in f.items()
                if n in ids
            ]
            cands.sort(key=lambda c: (c.distance, c.id))
            out.append(Found(ids.get(ex) if ex is not None else None, cands))
        return out

    def _filtered(
        self,
        queries: Sequence[Query],
        dhs: list[bytes],
        digests: list[Any],
        snap: lua.Snapshot,
        fps: np.ndarray,
        nums: np.ndarray,
        offsets: list[int],
    ) -> tuple[list[dict[int, int]], list[int | None]]:
        """Per query, the entries within its k (number -> fingerprint) of its buckets and
        of the writes the snapshot's log holds, and the number of its exact copy, if any;
        none taken out of the lookups (cutoff). The whole batch at once: per query, numpy
        cost more in calls than in work."""
        cutoff = snap.cutoff
        qfps = np.array([q.fingerprint for q in queries], np.uint64)
        ks = np.array([q.k or self.scheme_for(q.space).k for q in queries], np.int64)
        owner = np.repeat(np.arange(len(queries)), np.diff(offsets))  # entries are by query
        keep = (np.bitwise_count(fps ^ qfps[owner]) <= ks[owner]) & (nums > cutoff)
        near: list[dict[int, int]] = [{} for _ in queries]
        for q, n, fp in zip(
            owner[keep].tolist(), nums[keep].tolist(), fps[keep].tolist(), strict=True
        ):
            near[q][n] = fp
        exact = [int(dg) if dg is not None else None for dg in digests]
        log = snap.log
        nums_of_log = np.arange(snap.first + 1, snap.seq + 1, dtype=np.int64)
        spaces = np.array([q.space.encode() for q in queries])
        dh = np.array([np.void(d) for d in dhs])
        rows = max(1, (1 << 20) // max(len(log), 1))  # queries x log entries at a time
        for top in range(0, len(queries) if len(log) else 0, rows):
            at = slice(top, top + rows)
            mine = spaces[at, None] == log["space"][None, :]
            close = mine & (np.bitwise_count(log["fp"][None, :] ^ qfps[at, None]) <= ks[at, None])
            close &= (nums_of_log > cutoff)[None, :]
            for q, j in zip(*np.nonzero(close), strict=True):
                near[top + q][int(nums_of_log[j])] = int(log["fp"][j])
            same = mine & (log["dh"][None, :] == dh[at, None])
            for q in np.flatnonzero(same.any(axis=1)).tolist():  # the log's first copy
                exact[top + q] = int(nums_of_log[np.argmax(same[q])])
        return near, [ex if ex is not None and ex > cutoff else None for ex in exact]

    def _entries(
        self,
        owner: np.ndarray,
        raw: bytes,
        starts: Sequence[int],
        names: list[str],
        spaces: np.ndarray,
        tables: np.ndarray,
        keys: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, list[int]]:
        """The fingerprints and numbers of entries read (`raw`, of the buckets `owner`:
        positions in `keys`), query by query in one array, and where each query's start
        (and a last entry where the last one's end). A fingerprint is its bucket's key and
        its entry's rest, composed table by table (keys.py)."""
        size = self.entry_bytes
        order = np.argsort(owner, kind="stable")  # by bucket, so by query
        owner = owner[order]
        offsets = np.searchsorted(owner, np.asarray(starts)).tolist()
        if not len(owner):
            return np.zeros(0, np.uint64), np.zeros(0, np.uint32), offsets
        rests, nums = unpack_entries(np.frombuffer(raw, np.uint8), size)
        rests, nums = rests[order], nums[order]
        fps = np.zeros(len(rests), np.uint64)
        e_tables, e_keys = tables[owner], keys[owner]
        e_spaces = spaces[owner] if len(names) > 1 else None
        for n, space in enumerate(names):
            scheme = self.scheme_for(space)
            mine = e_spaces == n if e_spaces is not None else None
            for t in range(len(scheme.tables)):
                at = e_tables == t if mine is None else mine & (e_tables == t)
                if at.any():
                    fps[at] = scheme.compose(t, e_keys[at], rests[at])
        return fps, nums, offsets

    def _ids(self, numbers: Iterable[int]) -> dict[int, str]:
        """Names of committed versions a lookup may return: from the shards' id map up to
        the lookup's applied mark, from the coordinator's recent writes above it (NAMES);
        a number taken out of the lookups (deleted, replaced) has none."""
        groups: dict[int, list[int]] = {}
        recent = []
        for n in numbers:
            if n > self.applied:
                recent.append(n)
            else:
                groups.setdefault(n // IDS_PER_HASH, []).append(n)
        if not groups and not recent:
            return {}
        batch = self.store.batch()
        for j, nums in groups.items():
            key = self.layout.ids(j)
            batch.add(key, "HMGET", key, *(n % IDS_PER_HASH for n in nums))
        if recent:
            args = lua.names_args(self.layout, recent)
            batch.add(args.key, *args.command())
        replies = self.store.call(batch.execute)
        out = {}
        for nums, got in zip(groups.values(), replies, strict=False):
            # '' and NUL: a version taken out (apply_shard.lua)
            out.update({n: r.decode() for n, r in zip(nums, got, strict=True) if r and r != b"\0"})
        if recent:
            out.update(lua.names_reply(replies[-1], recent))
        return out

    def texts(self, ids: Sequence[str]) -> dict[str, str]:
        packed = {}
        self._sketches_read = {}
        for i, value in self._per_version(ids, self.layout.text).items():
            sketch, text = split(value)
            if sketch is not None:
                self._sketches_read[i] = sketch
            if text is not None:
                packed[i] = text
        if self.codec.missing(packed.values()):  # written by a consumer with the dictionary
            self._load_dictionary()
        return {i: self.codec.unpack(v) for i, v in packed.items()}

    def sketches(self, ids: Sequence[str]) -> dict[str, bytes]:
        """The ids' sketches; those the last read of texts saw are not read again."""
        out = {i: self._sketches_read[i] for i in ids if i in self._sketches_read}
        rest = [i for i in dict.fromkeys(ids) if i not in out]
        for i, value in self._per_version(rest, self.layout.text).items():
            sketch, _ = split(value)
            if sketch is not None:
                out[i] = sketch
        rest = [i for i in rest if i not in out]
        if rest and self.sketch_hashes:
            by_hash: dict[str, list[str]] = {}
            for i in rest:
                by_hash.setdefault(self.layout.sketch(i), []).append(i)
            batch = self.store.batch()
            for key, names in by_hash.items():
                batch.add(key, "HMGET", key, *names)
            for names, got in zip(by_hash.values(), self.store.call(batch.execute), strict=True):
                out.update({i: bytes(v) for i, v in zip(names, got, strict=True) if v})
        return out

    def vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        return {i: unpack(v) for i, v in self.packed_vectors(ids).items()}

    def packed_vectors(self, ids: Sequence[str]) -> dict[str, bytes]:
        return self._per_version(ids, self.layout.vector)

    def _per_version(self, ids: Sequence[str], key: Callable[[str], str]) -> dict[str, bytes]:
        """The values of a family of per-version keys (texts, vectors) that exist, one
        MGET per shard."""
        if not ids:
            return {}
        by_shard: dict[int, list[str]] = {}
        for i in dict.fromkeys(ids):
            by_shard.setdefault(text_shard(i), []).append(i)
        batch = self.store.batch()
        for group in by_shard.values():
            keys = [key(i) for i in group]
            batch.add(keys[0], "MGET", *keys)
        out = {}
        for group, got in zip(by_shard.values(), self.store.call(batch.execute), strict=True):
            out.update({i: bytes(r) for i, r in zip(group, got, strict=True) if r})
        return out

    def decisions(self, ids: Sequence[str]) -> dict[str, Decision]:
        """The ids' decisions. What was read is what the batch's commit checks against
        (COMMIT's `old` and `seen`)."""
        self.read_mark, self._read = self.records(ids)
        self._read_ids = set(ids)
        return {i: parse_decision(v, i).decision for i, v in self._read.items()}

    def clusters(self, ids: Sequence[str]) -> dict[str, tuple[int, str]]:
        """The index interface's clusters: `records`, which `decisions` reads too, without
        what the commit checks against."""
        out = {}
        for i, v in self.records(ids)[1].items():
            d = parse_decision(v, i).decision
            out[i] = (d.revision, d.cluster)
        return out

    def records(self, ids: Sequence[str]) -> tuple[int, dict[str, bytes]]:
        """The applied mark the reads rest on, and the ids' current records: the
        coordinator's recent writes first (RECENT), then the shards' decision hashes and
        keys that expire (one DECISIONS script a shard); the newest write of the three
        wins, and a tombstone is none. Two round trips, in this order (keys.py: why)."""
        ids = list(dict.fromkeys(ids))
        if not ids:
            return self.applied, {}
        recent = lua.Recent.parse(self.store.eval(lua.recent_args(self.layout, ids)))
        by_shard: dict[int, tuple[list[int], list[tuple[str, str, bytes]]]] = {}
        for at, i in enumerate(ids):
            shard, hashed, key, name = self.layout.decisions(i)
            positions, read = by_shard.setdefault(shard, ([], []))
            positions.append(at)
            read.append((hashed, key, name))
        batch = self.store.batch()
        for _, read in by_shard.values():
            args = lua.decisions_args(read)
            batch.add(args.key, *args.command())
        got: list[tuple[bytes | None, bytes | None]] = [(None, None)] * len(ids)
        for (positions, _), raw in zip(
            by_shard.values(), self.store.call(batch.execute), strict=True
        ):
            for at, pair in zip(positions, lua.decisions_reply(raw), strict=True):
                got[at] = pair
        out = {}
        for at, i in enumerate(ids):
            mine = recent.values[at]
            if mine and write_of(mine) <= recent.applied:
                mine = None  # in the shards by now, or expired there
            found = [v for v in (mine, *got[at]) if v]
            if found:
                newest = max(found, key=write_of)
                if newest[:1] != TOMBSTONE:
                    out[i] = bytes(newest)
        return recent.applied, out

    # ------------------------------------------------------------------ commit

    def commit(
        self, items: Sequence[Commit], digest_hashes: Sequence[bytes] | None = None
    ) -> Committed:
        """The index interface's commit; `digest_hashes`, one per item (b'' for one not
        indexed), stand for the entries' digests where only their hashes are known (an
        import: maintenance.restore)."""
        if digest_hashes is None:
            digest_hashes = [digest_hash(i.entry.digest) if i.entry else b"" for i in items]
        if not items:
            return Committed(0, {})
        dhs = list(digest_hashes)
        indexing = [i.entry if not i.replay else None for i in items]
        for e in indexing:
            if e is not None and len(e.space.encode()) > 8:
                raise ConfigError(f"fingerprint space {e.space!r} is longer than 8 bytes")
        with stage("decide/index/texts"):
            written = self._write_texts(indexing)
        keep_old = any(i.keep_previous for i in items)
        if not {i.decision.id for i in items} <= self._read_ids:
            self.decisions([i.decision.id for i in items])  # a commit not after a read
        args_of = [
            lua.CommitItem.of(item, e, dh, self._read.get(item.decision.id, b""))
            for item, e, dh in zip(items, indexing, dhs, strict=True)
        ]
        seen = self.read_mark
        done, upto, reply = len(items), self.mark, None
        with stage("decide/index/script"):
            for _ in range(COMMIT_ROUNDS):
                args = lua.commit_args(
                    self.layout, upto, seen, args_of[:done], self.keep, self.granularity, keep_old
                )
                reply = lua.CommitReply.parse(
                    self.store.eval(args), [i.decision.id for i in items[:done]]
                )
                if reply.status == "moved":
                    done = reply.moved
                elif reply.status == "stale":
                    upto = reply.seq
                    done = min(done, self._first_conflict(indexing[:done], dhs, reply.log))
                else:
                    break
                if done == 0:
                    break
            else:
                done = 0
        if reply is None or reply.status != "ok" or done == 0:
            self._drop_raced([indexing[i].id for i in written])  # type: ignore[union-attr]
            return Committed(0, {})

        stored: dict[int, Decision] = {}
        writes: list[_Write] = []
        unindexed = []  # texts that must not stay: written by us, or an old orphan
        raced = []  # written by us for versions another consumer may have indexed since
        for i, (item, outcome) in enumerate(zip(items, reply.outcomes, strict=False)):
            e, a = indexing[i], args_of[i]
            if outcome.stored is not None:
                stored[i] = outcome.stored.decision
                if i in written and e is not None:
                    raced.append(e.id)
                continue
            if not outcome.write:
                continue  # a replay
            old = reply.replaced[i]
            gone = (
                ((old.current.num, old.current.name, "r"),)
                if old is not None and old.current
                else ()
            )
            value = (
                RECORD
                + struct.pack("<II", outcome.write, outcome.number)
                + a.head
                + outcome.kept
                + a.body
            )
            if outcome.indexed:
                assert e is not None
                at = (outcome.number, e.fingerprint, e.space, dhs[i])
                writes.append(_Write(a.id, value, self.keep, at, a.name, gone))
            else:
                writes.append(_Write(a.id, value, self.decision_ttl, None, a.name, gone))
                if not item.replay and item.previous is None:
                    unindexed.append(item.decision.id)
        raced += [indexing[i].id for i in written if i >= done]  # type: ignore[union-attr]
        # Versions that revisions replaced leave the shards before the new ones enter (a
        # revision back to an old content must find its digest field free); one numbered
        # and replaced in this very commit is not applied at all, only its text goes.
        gone_versions = [s.current for s in reply.replaced[:done] if s is not None and s.current]
        fresh = {w.indexed[0] for w in writes if w.indexed}
        self._forget_versions(
            [v for v in gone_versions if v.num not in fresh],
            [v.name for v in gone_versions if v.num in fresh],
        )
        # Its map still goes in with the take-out, so that the counts see it come and go.
        out = {v.num for v in gone_versions}
        writes = [
            w
            if not w.indexed or w.indexed[0] not in out
            else replace(w, indexed=None, gone=((w.indexed[0], w.name, "m"), *w.gone))
            for w in writes
        ]
        with stage("decide/index/apply"):
            self._apply(writes, reply.member)
            self._drop_texts(unindexed)
            self._drop_raced(raced)
        with stage("decide/index/confirm"):
            self.store.confirm()  # before any of these decisions is published
        return Committed(done, stored)

    def _drop_raced(self, names: Sequence[str]) -> None:
        """Drop texts this process wrote for versions its commit did not index, but not
        those another consumer indexed meanwhile (two consumers deciding one record at
        once, a rebalance): its SET NX met the text written here, and its document has
        that text (and sketch), of the same content. One read of the ids' decisions,
        only when a commit met another consumer's."""
        if not names:
            return
        _, records = self.records([record_of(n)[0] for n in names])
        indexed = set()
        for n in names:
            doc_id = record_of(n)[0]
            value = records.get(doc_id)
            if value and any(v.name == n for v in parse_decision(value, doc_id).versions):
                indexed.add(n)
        self._drop_texts([n for n in names if n not in indexed])

    def _first_conflict(
        self, indexing: Sequence[Entry | None], dhs: list[bytes], log: np.ndarray
    ) -> int:
        """Position of the first document to index that one committed meanwhile (`log`
        entries) makes stale: within k in the same space, or the same digest."""
        if not len(log):
            return len(indexing)
        for i, e in enumerate(indexing):
            if e is None:
                continue
            mine = log["space"] == e.space.encode()
            k = self.scheme_for(e.space).k
            close = np.bitwise_count(log["fp"] ^ np.uint64(e.fingerprint)) <= k
            if np.any(mine & (close | (log["dh"] == np.void(dhs[i])))):
                return i
        return len(indexing)

    def _write_texts(self, indexing: Sequence[Any]) -> set[int]:
        """Store the texts (and sketches) of the documents about to be indexed; positions
        actually written (a text already there belongs to an earlier decision of that id).
        With a window, a text with a sketch joins its shard's queue (tq), scored by the
        write number this process last read: trim_texts takes the oldest out."""
        at = [i for i, e in enumerate(indexing) if e is not None]
        if not at:
            return set()
        batch = self.store.batch()
        expiry = ("EX", self.text_ttl) if self.text_ttl else ()
        packs: list[bytes | None] = []
        queued: list[str] = []
        for i in at:
            e = indexing[i]
            packed = None
            if e.vector is not None:  # a vector is kept instead of its text
                key, value = self.layout.vector(e.id), e.vector
            else:
                key = self.layout.text(e.id)
                if text_kept(e, self.text_window):
                    packed = self.codec.pack(e.text)
                value = join(e.sketch, packed) if e.sketch else packed
                if e.sketch and packed is not None and self.text_window is not None:
                    queued.append(e.id)
            packs.append(packed)
            if e.vector is None and packed is None and self.sketch_hashes:
                key = self.layout.sketch(e.id)
                batch.add(key, "HSETNX", key, e.id, e.sketch)
            else:
                batch.add(key, "SET", key, value, "NX", *expiry)
        for name in queued:
            queue = self.layout.text_queue(text_shard(name))
            batch.add(queue, "ZADD", queue, self.read_mark, name)
        replies = self.store.call(batch.execute)
        written = {i for i, ok in zip(at, replies[: len(at)], strict=True) if ok}
        if self._sample is not None:
            for i, packed in zip(at, packs, strict=True):
                e = indexing[i]
                if i in written and packed is not None:
                    self._sample.add(e.id, e.text, packed)
                    if e.sketch:
                        self._sample_sketches[e.id] = e.sketch
            if self._sample.full:
                self._learn(self._sample)
        self._windowed += len(queued)
        if self._windowed >= self.trim_every:
            self.trim_texts()
        return written

    def trim_texts(self) -> int:
        """Keep the index to its window of texts: the oldest texts past the newest
        `text_window` of all the shards' queues keep only their sketches. Any consumer may
        trim, and two at once trim the same texts. Returns how many this call trimmed."""
        self._windowed = 0
        window = self.text_window
        if window is None:
            return 0
        queues = [self.layout.text_queue(s) for s in range(SHARDS)]

        def each(*command: Any) -> list[Any]:
            batch = self.store.batch()
            for q in queues:
                batch.add(q, *(q if c is QUEUE else c for c in command))
            return list(self.store.call(batch.execute))

        excess = sum(map(int, each("ZCARD", QUEUE))) - window
        if excess <= 0:
            return 0
        ends = [float(r[0][1]) for r in each("ZRANGE", QUEUE, 0, 0, "WITHSCORES") if r]
        ends += [float(r[0][1]) for r in each("ZRANGE", QUEUE, -1, -1, "WITHSCORES") if r]
        low, high = int(min(ends)), int(max(ends))
        while low < high:  # the least score with at least `excess` texts at or below it
            mid = (low + high) // 2
            if sum(map(int, each("ZCOUNT", QUEUE, "-inf", mid))) >= excess:
                high = mid
            else:
                low = mid + 1
        # all below that score, and of those at it (a batch's texts share a score) the
        # first by name, so that exactly `excess` leave the queue
        below = sum(map(int, each("ZCOUNT", QUEUE, "-inf", f"({low}")))
        trimmed = 0
        while True:
            names = each("ZRANGEBYSCORE", QUEUE, "-inf", f"({low}", "LIMIT", 0, TEXTS_TRIMMED)
            if not any(names):
                break
            trimmed += self._trim(dict(zip(queues, names, strict=True)))
        at = sorted(
            (n, q)
            for q, got in zip(queues, each("ZRANGEBYSCORE", QUEUE, low, low), strict=True)
            for n in got
        )[: max(excess - below, 0)]
        chosen: dict[str, list[bytes]] = {}
        for n, q in at:
            chosen.setdefault(q, []).append(n)
        return trimmed + (self._trim(chosen) if chosen else 0)

    def _trim(self, names: dict[str, list[bytes]]) -> int:
        """Trim these texts of each shard's queue to their sketches (TRIM_TEXTS)."""
        batch = self.store.batch()
        for q, got in names.items():
            if got:
                members = [n.decode("utf-8", "surrogatepass") for n in got]
                args = lua.trim_texts_args(
                    q,
                    [self.layout.text(n) for n in members],
                    [self.layout.sketch(n) for n in members] if self.sketch_hashes else [],
                    members,
                )
                batch.add(args.key, *args.command())
        return sum(map(lua.trim_texts_reply, self.store.call(batch.execute)))

    def _learn(self, sample: Sample) -> None:
        """Train the index's text dictionary on this process's sample and offer it: the
        first offer is the index's for good (SET NX), and every process packs with that."""
        data = sample.train(self.codec.level)
        if data is None:  # nothing to learn from: try the next texts
            self._sample = Sample()
            return
        key, offer = self.layout.txdict, data
        self.made_dictionary = bool(self.store.call(lambda: self.client.set(key, offer, nx=True)))
        self._load_dictionary(data if self.made_dictionary else None)

    def _see_dictionary(self, index_has: int) -> None:
        """The index's text dictionary (its id, 0: none) is not the one this process packs
        with: take the index's, or give it back the one it lost (a deleted key, a failover
        before the key reached the disk or a replica), which texts already name."""
        if index_has:
            self._load_dictionary()
        elif self.codec.dictionary is not None:
            key, ours = self.layout.txdict, self.codec.dictionary
            self.store.call(lambda: self.client.set(key, ours, nx=True))

    def _load_dictionary(self, data: bytes | None = None) -> None:
        """Pack with the index's text dictionary from now on (`data`, else read from the
        index), and pack again what this process wrote without it."""
        if data is None:
            data = self.store.call(self.client.get, self.layout.txdict)
        if data is None:
            return  # none: a text that names one will say which it misses
        self.codec.use(data)
        sample, self._sample = self._sample, None
        if sample is not None:
            self._repack(sample.repacked(self.codec))

    def _repack(self, texts: Sequence[tuple[str, bytes, bytes]]) -> None:
        """(name, form written, form with the dictionary) of texts: each replaced where
        its key still holds the form written, one script per shard."""
        by_shard: dict[int, list[tuple[str, bytes, bytes]]] = {}
        sketches, self._sample_sketches = self._sample_sketches, {}
        for name, first, again in texts:
            if name in sketches:  # written beside its sketch
                first, again = join(sketches[name], first), join(sketches[name], again)
            by_shard.setdefault(text_shard(name), []).append((name, first, again))
        batch = self.store.batch()
        for group in by_shard.values():
            args = lua.repack_args(
                [self.layout.text(name) for name, _, _ in group],
                [(first, again) for _, first, again in group],
            )
            batch.add(args.key, *args.command())
        if batch.commands:
            self.store.call(batch.execute)

    def _drop_texts(self, ids: Sequence[str]) -> None:
        if ids:
            batch = self.store.batch()
            for i in ids:
                self._drop_text(batch, i)
            self.store.call(batch.execute)

    def _drop_text(self, batch: Any, name: str) -> None:
        key = self.layout.text(name)
        batch.add(key, "DEL", key, self.layout.vector(name))
        if self.sketch_hashes:
            sketch = self.layout.sketch(name)
            batch.add(sketch, "HDEL", sketch, name)
        if self.text_window is not None:
            queue = self.layout.text_queue(text_shard(name))
            batch.add(queue, "ZREM", queue, name)

    # ------------------------------------------------------------------ apply

    def _apply(self, writes: Sequence[_Write], member: str) -> None:
        """Step 4: committed writes into the shards (entries and digests of the versions
        indexed, the id map, the decisions), then off the pending set."""
        if not member:
            return
        docs = [w.indexed for w in writes if w.indexed is not None]
        names, bucket_shards, owners, spaces, tables, keys = self._entered_buckets(docs)
        entries = self._packed(docs, owners, spaces, tables)
        entered = fields(keys)
        shards: dict[int, lua.ShardPart] = {}

        def part(shard: int) -> lua.ShardPart:
            return shards.setdefault(shard, lua.ShardPart())

        for group in _by_shard(bucket_shards):
            p = part(int(bucket_shards[group[0]]))
            p.bucket_positions += group
            p.buckets += [names[i] for i in group]
            p.bucket_fields += [entered[i] for i in group]
            p.entries += [entries[i] for i in group]
            p.spaces |= {spaces[i] for i in group}
        for num, _, _, dh in docs:
            p = part(dh[0] % SHARDS)
            p.digests.append(self.layout.digest(dh))
            p.digest_fields.append((dh[2:], num))
        for w in writes:
            changes = list(w.gone)
            if w.indexed is not None:
                changes.append((w.indexed[0], w.name, "m"))
            for n, name, op in changes:
                j = n // IDS_PER_HASH
                p = part(j % SHARDS)
                p.id_hashes.append(self.layout.ids(j))
                p.id_changes.append((n % IDS_PER_HASH, name, op))
            shard, hashed, key, field_ = self.layout.decisions(w.id)
            p = part(shard)
            p.decision_keys.append((hashed, key))
            p.decisions.append((field_, w.value, w.ttl))
        # A bucket is cut back to its newest max_bucket entries once it holds half as many
        # again: rewrites stay rare, and a lookup reads at most 1.5 x max_bucket entries.
        limit = self.max_bucket * self.entry_bytes * 3 // 2
        keep = self.max_bucket * self.entry_bytes
        # On a Cluster, the shards' writes reach their replicas before APPLIED lets the
        # coordinator trim its log: else a shard's failover could lose entries that no
        # log holds any more. (On one server, confirming APPLIED confirms them too.)
        batch = self.store.batch(confirmed=isinstance(self.client, RedisCluster))
        for shard, p in shards.items():
            args = lua.apply_shard_args(
                p,
                self.layout.evicted(shard),
                self.layout.spaces(shard),
                self.layout.shard_counts(shard),
                self.entry_bytes,
                limit,
                keep,
                self.keep,
                self.cutoff,
            )
            batch.add(args.key, *args.command())
        cut: list[int] = []  # positions in names of the buckets cut back
        for p, raw in zip(shards.values(), self.store.call(batch.execute), strict=True):
            reply = lua.ApplyShardReply.parse(raw)
            self.evicted += reply.evicted
            cut += [p.bucket_positions[c] for c in reply.cut]
        if cut:
            self.cuts += len(cut)
            log.warning(
                "%d bucket(s) reached --max-bucket %d and were cut back to their newest "
                "entries (%s): their older entries are no longer candidates through these "
                "tables (%d entries so far in this process; `neardup index stats`: evicted)",
                len(cut),
                self.max_bucket,
                ", ".join(
                    f"space {spaces[i]} table {int(tables[i])} key {int(keys[i]):#x}"
                    for i in cut[:CUTS_NAMED]
                )
                + (f" and {len(cut) - CUTS_NAMED} more" if len(cut) > CUTS_NAMED else ""),
                self.evicted,
            )
        self.store.eval(
            lua.applied_args(self.layout, member, LOG_KEEP, self.recent_keep, TRIM_CHUNK)
        )

    def _packed(
        self,
        docs: Sequence[tuple[int, int, str, bytes]],
        owners: list[int],
        spaces: list[str],
        tables: np.ndarray,
    ) -> list[bytes]:
        """The entry each bucket of _entered_buckets gets: its document's, in its table."""
        fps = np.array([docs[o][1] for o in owners], np.uint64)
        nums = np.array([docs[o][0] for o in owners], np.uint32)
        rows = np.empty((len(owners), self.entry_bytes), np.uint8)
        all_spaces = np.array(spaces, object)
        for space in dict.fromkeys(spaces):
            scheme = self.scheme_for(space)
            mine = all_spaces == space
            for t in range(len(scheme.tables)):
                at = mine & (tables == t)
                if at.any():
                    rows[at] = pack_entries(scheme, t, fps[at], nums[at], self.entry_bytes)
        return [r.tobytes() for r in rows]

    # ------------------------------------------------------------------ repair

    def _repair(self, member: str) -> None:
        """Apply a range whose committer went away between its commit and its apply: its
        writes' notes and the ids' latest records from the coordinator (a later write's
        record where there is one: the shards keep the newest)."""
        first, last, when = (int(x) for x in member.split(":"))
        if time.time() - when < REPAIR_AFTER:
            return
        claim = self.layout.repair(first)
        if not self.store.call(lambda: self.client.set(claim, 1, nx=True, ex=60)):
            return  # another consumer is on it
        numbers = list(range(first, last + 1))
        batch = self.store.batch()
        batch.add(self.layout.logbase, "GET", self.layout.logbase)
        batch.add(self.layout.log, "GET", self.layout.log)  # a repair is rare: all of it
        batch.add(self.layout.notes, "HMGET", self.layout.notes, *numbers)
        base_raw, log_raw, notes_raw = self.store.call(batch.execute)
        base = int(base_raw or 0)
        entries = np.frombuffer(log_raw or b"", LOG)[first - 1 - base : last - base]
        notes = [parse_note(n) if n else None for n in notes_raw]
        ids = list(dict.fromkeys(record_of(n.name)[0] for n in notes if n is not None))
        values = (
            dict(zip(ids, self.store.call(self.client.hmget, self.layout.recent, ids), strict=True))
            if ids
            else {}
        )
        writes = []
        for num, e, n in zip(numbers, entries, notes, strict=False):
            if n is None:
                continue
            doc_id = record_of(n.name)[0]
            value = values.get(doc_id)
            if not value:
                continue  # not possible while the range is pending: rd keeps it
            tomb = value[:1] == TOMBSTONE
            indexed = None
            if n.indexed:
                space = bytes(e["space"]).rstrip(b"\0").decode()
                indexed = (num, int(e["fp"]), space, bytes(e["dh"]))
            indexed_now = not tomb and parse_decision(value, doc_id).current is not None
            ttl = 0 if tomb else (self.keep if indexed_now else self.decision_ttl)
            writes.append(_Write(doc_id, value, ttl, indexed, n.name, n.gone))
        self._apply(writes, member)

    # ------------------------------------------------------------------ forget

    def delete(self, ids: Sequence[str]) -> list[str]:
        """Forget documents. The coordinator first (DELETE: each id's tombstone, and its
        versions out of the lookups), then the shards: the tombstone, the id map, and
        their entries, digests and texts, which give back the memory."""
        ids = list(dict.fromkeys(ids))
        if not ids:
            return []
        for _ in range(COMMIT_ROUNDS):
            mark, read = self.records(ids)
            args = lua.delete_args(self.layout, mark, ids, [read.get(i, b"") for i in ids])
            reply = lua.DeleteReply.parse(self.store.eval(args), ids)
            if reply.status == "ok":
                break
        else:
            raise BackendUnavailable("the index's recent writes moved on at every try of a delete")
        write = int(reply.member.split(":")[0]) if reply.member else 0
        writes, gone = [], []
        for i, stored in zip(ids, reply.deleted, strict=True):
            if stored is None:
                continue
            tomb = TOMBSTONE + struct.pack("<I", write)
            out = tuple((v.num, v.name, "d") for v in stored.versions)
            # the write it deletes was in the shards when read: nothing older can come
            ttl = -1 if stored.write <= mark else 0
            writes.append(_Write(i, tomb, ttl, None, i, out))
            gone.append((i, stored))
            write += 1
        self._apply(writes, reply.member)
        # the id's own text too: one written for a commit that never came (a crash)
        self._forget_versions([v for _, s in gone for v in s.versions], [i for i, _ in gone])
        self.store.confirm()  # before the tombstone is forwarded
        return [i for i, _ in gone]

    def _forget_versions(self, versions: Sequence[Version], texts: Sequence[str] = ()) -> None:
        """Versions that lookups no longer find (delete, or a revision that replaced
        them): their bucket entries, digests and texts out of the shards."""
        batch = self.store.batch()
        for name in dict.fromkeys([*texts, *(v.name for v in versions)]):
            self._drop_text(batch, name)
        for v in versions:
            for t, key in enumerate(self.scheme_for(v.space).keys([v.fingerprint])[0]):
                hashed, field = self.layout.bucket(v.space, t, key)
                bucket = lua.filter_bucket_args(hashed, field, v.num, self.entry_bytes)
                batch.add(bucket.key, *bucket.command())
            digest = lua.forget_digest_args(
                self.layout.digest(v.digest_hash), v.digest_hash[2:], v.num
            )
            batch.add(digest.key, *digest.command())
        if batch.commands:
            self.store.call(batch.execute)

    # ------------------------------------------------------------------ counts

    def stats(self) -> dict[str, int]:
        """What the index holds now and how it got there, from counts its scripts keep
        with every change (keys.py), so at any size in one round trip: `documents`, the
        versions a lookup can find (with --keep-old-versions, the earlier ones kept too);
        `committed`, every version ever numbered; `replaced`, `deleted` and `expired`,
        those gone by each cause since the counts began (at the index's first commit, or
        at the upgrade of an index made before them, which is counted here once);
        `evicted`, the bucket entries --max-bucket pushed out of the lookups' reads; the id
        of the text dictionary (index.texts; 0 before the index has one); `windowed_texts`,
        the texts of the window of texts kept (--text-window; 0 without one). And the
        server's memory (every primary of a cluster); the index's own is
        maintenance.memory()."""
        counts = self._counts()
        client: Any = self.client
        if isinstance(client, RedisCluster):  # one answer per primary
            info = self.store.call(
                lambda: client.info("memory", target_nodes=RedisCluster.PRIMARIES)
            )
            used = sum(int(v["used_memory"]) for v in info.values())
        else:
            used = int(self.store.call(client.info, "memory")["used_memory"])
        return {
            **{k: int(counts.get(k) or 0) for k in COUNTS},
            "evicted": self._evicted(),
            "text_dictionary": int(counts["text_dictionary"]),
            "windowed_texts": self._windowed_texts(),
            "server_used_memory": used,
        }

    def _windowed_texts(self) -> int:
        batch = self.store.batch()
        for shard in range(SHARDS):
            key = self.layout.text_queue(shard)
            batch.add(key, "ZCARD", key)
        return sum(map(int, self.store.call(batch.execute)))

    def _evicted(self) -> int:
        """Bucket entries pushed out of the lookups' reads by --max-bucket, every shard's."""
        batch = self.store.batch()
        for shard in range(SHARDS):
            key = self.layout.evicted(shard)
            batch.add(key, "GET", key)
        return sum(int(v or 0) for v in self.store.call(batch.execute))

    def _counts(self) -> dict[str, int]:
        """The counts: every shard's (documents, replaced, deleted, expired: their id
        maps'), the versions ever numbered (the coordinator's), and the id of the text
        dictionary (0: none yet)."""
        batch = self.store.batch()
        for shard in range(SHARDS):
            key = self.layout.shard_counts(shard)
            batch.add(key, "HGETALL", key)
        batch.add(self.layout.counts, "HGET", self.layout.counts, "numbered")
        batch.add(self.layout.txdict, "GETRANGE", self.layout.txdict, 4, 7)
        *shards, numbered, dictionary = self.store.call(batch.execute)
        out = {k: 0 for k in COUNTS}
        for got in shards:
            for k, v in got.items():
                out[k.decode()] = out.get(k.decode(), 0) + int(v)
        out["committed"] = int(numbered or 0)
        out["text_dictionary"] = int.from_bytes(dictionary, "little")
        return out
