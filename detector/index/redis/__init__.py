"""The Redis index: the interface of the memory index, on a Redis 7 server or a Redis
Cluster. The key layout is in keys.py; the scripts that run on the server in scripts/.

A batch's commit, one consumer:
  0. read the batch's ids (redeliveries, re-fetches): RECENT on the coordinator (the
     applied mark, the recent writes of those ids), then each shard's decision hashes
     (DECISIONS); the newer write wins
  1. lookup: the coordinator's snapshot (seq, the log since the shards were last complete,
     the retention cutoff), then the shards' buckets and digests, then ids by number
  2. write the texts of the documents to index (a candidate must be verifiable the moment
     it is committed), packed with the index's text dictionary (index.texts): the process
     that fills its sample first trains it, and packs its sample again with it
  3. COMMIT script on the coordinator: if seq moved since the lookup, it answers with the
     log entries committed meanwhile; the consumer checks them against its batch (numpy),
     keeps the prefix before the first conflict and asks again. Once nothing new came in,
     the script numbers the writes, appends them to the log, keeps each id's new record
     and each write's note among the recent writes, atomically, and records the range as
     pending
  4. apply the range to the shards (bucket entries, digests, the id map and its counts,
     the decision records: APPLY_SHARD), then APPLIED on the coordinator takes it off
     pending and trims the log and the recent writes
  5. with --redis-min-replicas N, confirm: WAIT on each primary until N replicas have
     every write it took (replication.py); only then are the decisions published
A consumer that dies between 3 and 4 leaves its range pending: lookups keep reading those
entries from the log, and after REPAIR_AFTER seconds another consumer applies them.

So every document in a bucket was committed first, every committed document is visible to
a lookup (in the shards, or in the log above the oldest pending range), and the check in 3
sees every document committed after a lookup: two near-duplicates committed at once by two
consumers are never both unique, on a cluster as on one server.

The files, from the bottom up (each imports only files above it):
  replication.py  the replicas a batch's writes must reach before it is published
                  (--redis-min-replicas), and what a confirmation found
  connect.py      connection settings, the client factory (one server, a Cluster, the
                  primary Sentinels name), refused credentials, the replicas at start
  keys.py         the key layout: names, slots, the LOG and ENTRY records
  scripts/*.lua   the scripts, each with its KEYS, ARGV and reply
  lua.py          loads them, each with its typed pair: an `Args` builder of its KEYS and
                  ARGV, and a parser of its reply (COMMIT: commit_args, CommitReply)
  cluster.py      Batch: one round trip, one pipeline per node of a cluster
  footprint.py    what the index's keys weigh in memory, exactly or from a sample
  store.py        Store: the round trips (call, eval, batch, snapshot), timed, with their
                  failures sorted into the error tree; confirm, the WAIT before publishing
  templates.py    the site-template model in the shards, on a Store
  index.py        RedisIndex, in the order a batch goes through it: plan (bind, open),
                  keys, lookup, commit, apply, repair; then forget (revisions, delete)
                  and the counts (stats)
  maintenance.py  functions of a RedisIndex: sweep, export (documents) and import
                  (restore), keys, drop, memory
  bulk.py         load many documents into an empty index without the per-batch scripts,
                  leaving the keys the commits leave (bench/scale.py's 10^7)
  migrate.py      `index migrate`: an index of key layout 2 into layout 3, in place
"""

from .cluster import Batch
from .index import RedisIndex
from .keys import IDS_PER_HASH

__all__ = ["IDS_PER_HASH", "Batch", "RedisIndex"]
