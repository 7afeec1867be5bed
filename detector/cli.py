"""The command line: arguments and environment -> adapters -> the pipeline."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from . import __version__
from .access import DEFAULT_REDIS_URL, SASL_MECHANISMS, SECURITY_PROTOCOLS, read_secret, redact_url
from .blocks import NAMED
from .config import env, env_bool, env_float, env_int, load_file
from .errors import BackendUnavailable, ConfigError, DetectorError
from .index import DEFAULT_MAX_BUCKET
from .records import DEFAULT_MAX_BYTES, DEFAULT_MAX_TOKENS
from .settings import DEFAULT_SCHEME, DEFAULT_THRESHOLD, EngineSettings
from .verify import DEFAULT_CACHE_BYTES

if TYPE_CHECKING:
    from .index.connect import RedisSettings
    from .stream.kafka import KafkaSettings

# With --retention, each serve process sweeps one shard's digests a second: all of them
# in about a minute, however large the index.
SWEEP_SHARDS = 1
VISIBLE = (
    "; on the command line it is visible to other local users (ps): prefer NEARDUP_{} or {}-file"
)


def _engine_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("engine (each also NEARDUP_<OPTION>, e.g. NEARDUP_SCHEME)")
    g.add_argument(
        "--features",
        choices=("words", "shingles"),
        default=env("features", "words"),
        help="fingerprint features: words, or word shingles (default: %(default)s)",
    )
    _option(
        g,
        "--shingle-size",
        int,
        2,
        help="words per shingle with --features shingles (default: %(default)s)",
    )
    _option(
        g,
        "--cjk-ngram",
        int,
        2,
        help="character n-gram size for scripts written without spaces (default: %(default)s)",
    )
    _option(
        g,
        "--idf",
        str,
        None,
        metavar="FILE",
        help="IDF table made by `neardup fit-idf`; without it a built-in length weighting is used",
    )
    names = ", ".join(f"{k} (={v})" for k, v in NAMED.items())
    _option(
        g,
        "--scheme",
        str,
        DEFAULT_SCHEME,
        help="block tables: kK-bB = distance K, B blocks, one table per choice of "
        f"B-K blocks; kK-bBxC = two levels; or {names} "
        "(default: %(default)s)",
    )
    _option(
        g,
        "--threshold",
        float,
        DEFAULT_THRESHOLD,
        help="literal pass: word-shingle Jaccard needed to call a candidate a "
        "duplicate (default: %(default)s)",
    )
    _option(
        g,
        "--literal-shingle",
        int,
        5,
        help="words per shingle in the literal pass (default: %(default)s)",
    )
    _option(
        g,
        "--max-candidates",
        int,
        32,
        help="nearest candidates verified per document (default: %(default)s)",
    )
    _option(
        g,
        "--vector-seed",
        int,
        0,
        help="seed of the random hyperplanes for records with an embedding (default: %(default)s)",
    )
    _option(
        g,
        "--max-bytes",
        int,
        DEFAULT_MAX_BYTES,
        help="largest accepted record in bytes (default: %(default)s)",
    )
    _option(
        g,
        "--max-tokens",
        int,
        DEFAULT_MAX_TOKENS,
        help="most tokens in a record's normalized text; more is a too_many_tokens error "
        "(default: %(default)s)",
    )
    _option(
        g,
        "--literal-memory",
        int,
        DEFAULT_CACHE_BYTES,
        metavar="BYTES",
        help="bytes of shingle sets the literal pass keeps in this process; older ones "
        "are read from the index again when needed (default: %(default)s)",
    )


def _option(
    p: argparse.ArgumentParser | argparse._ArgumentGroup,
    flag: str,
    kind: type,
    default: Any,
    help: str,
    url: bool = False,
    **more: Any,
) -> None:
    """An option whose default comes from NEARDUP_<OPTION>, else the config file.

    A secret's help must not show its default (it may come from the environment); a URL's
    (`url=True`) is shown with its password replaced."""
    name = flag[2:].replace("-", "_")
    if kind is int:
        default = env_int(name, default)
    elif kind is float:
        default = env_float(name, default)
    else:
        default = env(name, default)
    if url:  # argparse expands %(default)s itself: it would print the password
        help = help.replace("%(default)s", redact_url(str(default)).replace("%", "%%"))
    p.add_argument(flag, type=kind, default=default, help=help, **more)


def _redis_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group(
        "Redis (each also NEARDUP_<OPTION>, e.g. NEARDUP_REDIS_PASSWORD, or the config file)"
    )
    _option(
        g,
        "--redis-url",
        str,
        DEFAULT_REDIS_URL,
        url=True,
        help="Redis server: redis://, rediss:// (TLS) or unix://; a user and password in "
        "it (redis://USER:PASSWORD@HOST) work too (default: %(default)s)",
    )
    g.add_argument(
        "--redis-cluster",
        action=argparse.BooleanOptionalAction,
        default=env_bool("redis_cluster", False),
        help="--redis-url is one node of a Redis Cluster; the index spreads over its "
        "primaries (default: %(default)s)",
    )
    _option(g, "--redis-username", str, None, metavar="USER", help="Redis ACL user")
    _option(
        g,
        "--redis-password",
        str,
        None,
        metavar="PASSWORD",
        help="password of the ACL user (or of the default user)"
        + VISIBLE.format("REDIS_PASSWORD", "--redis-password"),
    )
    _option(
        g,
        "--redis-password-file",
        str,
        None,
        metavar="FILE",
        help="read the Redis password from this file",
    )
    _option(
        g,
        "--redis-ca-file",
        str,
        None,
        metavar="FILE",
        help="rediss://: CA certificates (PEM) that signed the server's; default the system's",
    )
    _option(
        g,
        "--redis-cert-file",
        str,
        None,
        metavar="FILE",
        help="rediss://: client certificate (PEM), for servers that authenticate clients",
    )
    _option(
        g,
        "--redis-key-file",
        str,
        None,
        metavar="FILE",
        help="rediss://: private key of --redis-cert-file (PEM)",
    )


def _redis_settings(args: argparse.Namespace) -> RedisSettings:
    from .index.connect import RedisSettings

    return RedisSettings.from_options(
        args.redis_url,
        username=args.redis_username or None,
        password=read_secret(args.redis_password, args.redis_password_file, "redis-password"),
        ca_file=args.redis_ca_file or None,
        cert_file=args.redis_cert_file or None,
        key_file=args.redis_key_file or None,
        cluster=args.redis_cluster,
    )


def _kafka_settings(args: argparse.Namespace, client_id: str = "neardup") -> KafkaSettings:
    from .stream.kafka import KafkaSettings

    return KafkaSettings(
        args.bootstrap_servers,
        client_id,
        security_protocol=args.kafka_security_protocol,
        sasl_mechanism=args.kafka_sasl_mechanism or None,
        username=args.kafka_username or None,
        password=read_secret(args.kafka_password, args.kafka_password_file, "kafka-password"),
        ca_file=args.kafka_ca_file or None,
        cert_file=args.kafka_cert_file or None,
        key_file=args.kafka_key_file or None,
    )


def _kafka_check(kafka: KafkaSettings) -> None:
    """Refused credentials or an untrusted certificate stop a command at once; brokers
    that are away are left to the clients, which wait for them as they always did."""
    from .stream.kafka import check

    with contextlib.suppress(BackendUnavailable):
        check(kafka)


def _settings(a: argparse.Namespace) -> EngineSettings:
    return EngineSettings(
        features=a.features,
        shingle_size=a.shingle_size,
        cjk_ngram=a.cjk_ngram,
        idf=a.idf,
        scheme=a.scheme,
        threshold=a.threshold,
        literal_shingle=a.literal_shingle,
        max_candidates=a.max_candidates,
        vector_seed=a.vector_seed,
        max_bytes=a.max_bytes,
        max_tokens=a.max_tokens,
        literal_memory=a.literal_memory,
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="neardup",
        description="Streaming near-duplicate detection: SimHash fingerprints, Manku block "
        "tables and a literal second pass.",
    )
    p.add_argument("--version", action="version", version=f"neardup {__version__}")
    p.add_argument(
        "--config",
        metavar="FILE",
        help="TOML file of option defaults (keys are option names); the "
        "environment (NEARDUP_*) and the command line override it",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    d = sub.add_parser(
        "detect",
        help="decide every record of a JSONL file (no server needed)",
        description='Read {"id", "text"} records (JSONL, optionally gzip) '
        "and write one decision per record, in input order: `duplicate_of` "
        "always names an earlier record. Bad lines become error records.",
    )
    d.add_argument("input", nargs="?", default="-", help="JSONL or JSONL.gz file; - for stdin")
    d.add_argument("-o", "--output", help="decisions file (.gz to compress); default stdout")
    d.add_argument("--errors", help="error records file; default stderr")
    _option(
        d,
        "--batch-size",
        int,
        512,
        help="records fingerprinted together (default: %(default)s)",
    )
    d.add_argument(
        "--index-name",
        default=env("index", "default"),
        help="index namespace written into decisions (default: %(default)s)",
    )
    _option(
        d,
        "--workers",
        int,
        0,
        help="processes that parse and fingerprint ahead of the decisions; 0 "
        "does everything in one process, which measured faster on two cores; more "
        "cores gain from 1 or 2 (default: %(default)s)",
    )
    d.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar on stderr (default: when stderr is a terminal)",
    )
    _engine_options(d)

    f = sub.add_parser("fit-idf", help="build a frozen, versioned IDF table from a corpus")
    f.add_argument("corpus", help="JSONL or JSONL.gz with a `text` field per line")
    f.add_argument("-o", "--output", required=True, help="table file to write (gzip JSON)")
    f.add_argument(
        "--min-df",
        type=int,
        default=2,
        help="drop tokens seen in fewer documents (default: %(default)s)",
    )

    e = sub.add_parser(
        "eval",
        help="precision/recall of decisions against a truth file",
        description="Score `duplicate` decisions against a truth file "
        '({"id", "max_jaccard_earlier", "most_similar_earlier"} per line) '
        "and draw a PNG report.",
    )
    e.add_argument("decisions", help="decisions JSONL (from neardup detect)")
    e.add_argument("truth", help="truth JSONL or JSONL.gz")
    e.add_argument(
        "--threshold",
        type=float,
        default=0.8,
        help="a record is truly a duplicate when max_jaccard_earlier >= this "
        "(default: %(default)s)",
    )
    e.add_argument("--report", help="write a PNG report here")
    e.add_argument("--json", action="store_true", help="print the scores as one JSON line")

    s = sub.add_parser(
        "serve",
        help="consume documents from Kafka, decide against Redis, publish decisions",
        description="Run one member of a Kafka consumer group: documents from the input topic "
        "are decided against the Redis index and the decisions published to the output topic; "
        "bad records go to the dead-letter topic. Start more processes with the same --group "
        "to scale out.",
    )
    _kafka_options(s)
    _redis_options(s)
    _option(
        s,
        "--input-topic",
        str,
        "documents",
        help="topic of input documents (default: %(default)s)",
    )
    _option(
        s,
        "--output-topic",
        str,
        "decisions",
        help="topic the decisions go to (default: %(default)s)",
    )
    _option(
        s,
        "--dead-letter-topic",
        str,
        "documents.dead-letter",
        help="topic for records that cannot be decided (default: %(default)s)",
    )
    _option(
        s,
        "--group",
        str,
        "neardup",
        help="Kafka consumer group (default: %(default)s)",
    )
    _option(
        s,
        "--index",
        str,
        "default",
        help="index name: the Redis key namespace, so indexes can share a server "
        "(default: %(default)s)",
    )
    _option(
        s,
        "--batch-size",
        int,
        256,
        help="records per poll and per Redis round trip (default: %(default)s)",
    )
    _option(
        s,
        "--text-ttl",
        int,
        0,
        help="seconds the literal texts are kept for the second pass; 0 keeps them "
        "(default: %(default)s)",
    )
    _option(
        s,
        "--decision-ttl",
        int,
        0,
        help="seconds a decision is remembered for redeliveries; 0 keeps it (default: %(default)s)",
    )
    _option(
        s,
        "--retention",
        int,
        0,
        metavar="SECONDS",
        help="age out documents indexed longer ago than this: they stop being candidates "
        "at once and their memory is swept back in the background; 0 keeps every document. "
        "Fixed when the index is made (default: %(default)s)",
    )
    _option(
        s,
        "--max-bucket",
        int,
        DEFAULT_MAX_BUCKET,
        help="newest entries a block-table bucket keeps and a lookup reads from it: a flood "
        "of variants into one bucket cannot slow every lookup (default: %(default)s)",
    )
    _option(
        s,
        "--metrics-port",
        int,
        9464,
        help="port of /metrics and /healthz; 0 turns them off (default: %(default)s)",
    )
    _option(
        s,
        "--metrics-host",
        str,
        "127.0.0.1",
        help="address of the metrics endpoint (default: %(default)s)",
    )
    _engine_options(s)

    pr = sub.add_parser("produce", help="send a JSONL file to a Kafka topic, a record a line")
    pr.add_argument("input", nargs="?", default="-", help="JSONL or JSONL.gz file; - for stdin")
    pr.add_argument(
        "--topic", default=env("input_topic", "documents"), help="(default: %(default)s)"
    )
    pr.add_argument(
        "--partitions",
        type=int,
        default=None,
        help="create the topic with this many partitions if it does not exist",
    )
    pr.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar on stderr (default: when stderr is a terminal)",
    )
    _kafka_options(pr)

    b = sub.add_parser(
        "bench",
        help="throughput, latency and Redis memory of serve, on a "
        "running Kafka and Redis (prints figures)",
    )
    b.add_argument("corpus", help="JSONL or JSONL.gz records to send")
    b.add_argument(
        "--consumers",
        type=int,
        nargs="+",
        default=[1, 2],
        help="consumer counts to measure (default: 1 2)",
    )
    b.add_argument(
        "--latency-seconds",
        type=float,
        default=20,
        help="how long to produce at half the measured rate (default: %(default)s)",
    )
    b.add_argument(
        "--memory-docs",
        type=int,
        default=1_000_000,
        help="synthetic documents for the memory figure; 0 skips it (default: %(default)s)",
    )
    _option(
        b,
        "--scheme",
        str,
        DEFAULT_SCHEME,
        help="block scheme of the serve processes (default: %(default)s)",
    )
    _option(
        b,
        "--batch-size",
        int,
        256,
        help="serve's batch size (default: %(default)s)",
    )
    _redis_options(b)
    _kafka_options(b)

    t = sub.add_parser("tail", help="print the records arriving on a topic")
    t.add_argument(
        "--topic", default=env("output_topic", "decisions"), help="(default: %(default)s)"
    )
    t.add_argument("--from-beginning", action="store_true", help="start at the oldest record")
    t.add_argument(
        "--idle",
        type=float,
        default=None,
        metavar="SECONDS",
        help="stop after this long without a record (default: never)",
    )
    _kafka_options(t)

    i = sub.add_parser(
        "index",
        help="maintain a Redis index: stats, export, import, delete, sweep",
        description="Maintain the Redis index that `neardup serve` writes. Export writes "
        "every decision and every indexed document (with its text) as JSONL, a header line "
        "first; import writes such a file into a new index (on the same or another Redis, "
        "or a Redis Cluster), numbering the documents again in their order.",
    )
    actions = i.add_subparsers(dest="action", required=True, metavar="ACTION")
    shown = [actions.add_parser("stats", help="documents and memory of the index, as JSON")]
    ex = actions.add_parser("export", help="write the index as JSONL (a backup, or to move it)")
    ex.add_argument("-o", "--output", help="file to write (.gz to compress); default stdout")
    im = actions.add_parser("import", help="read an export into a new, empty index")
    im.add_argument("input", help="an export file (JSONL or .gz); - for stdin")
    de = actions.add_parser(
        "delete", help="forget documents by id: no longer candidates, memory given back"
    )
    de.add_argument("ids", nargs="*", help="ids to delete")
    de.add_argument("--ids-file", help="a file of ids to delete, one a line")
    sw = actions.add_parser(
        "sweep", help="give back now the memory of documents past the retention horizon"
    )
    for a in (*shown, ex, im, de, sw):
        _option(
            a,
            "--index",
            str,
            "default",
            help="index name, the Redis key namespace (default: %(default)s); "
            "import takes it from the file unless given",
        )
        _redis_options(a)
    im.set_defaults(index=env("index"))  # None: the name in the file
    for a in (ex, im):
        a.add_argument(
            "--progress",
            action=argparse.BooleanOptionalAction,
            default=None,
            help="progress bar on stderr (default: when stderr is a terminal)",
        )
    return p


def _kafka_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group(
        "Kafka (each also NEARDUP_<OPTION>, e.g. NEARDUP_KAFKA_PASSWORD, or the config file)"
    )
    _option(
        g,
        "--bootstrap-servers",
        str,
        "127.0.0.1:9092",
        help="Kafka brokers, host:port[,host:port] (default: %(default)s)",
    )
    _option(
        g,
        "--kafka-security-protocol",
        str,
        "PLAINTEXT",
        choices=SECURITY_PROTOCOLS,
        help="how to talk to the brokers: SSL is TLS, SASL_* log in with a user and "
        "password (default: %(default)s)",
    )
    _option(
        g,
        "--kafka-sasl-mechanism",
        str,
        None,
        choices=SASL_MECHANISMS,
        help="SASL mechanism, needed with SASL_PLAINTEXT and SASL_SSL",
    )
    _option(g, "--kafka-username", str, None, metavar="USER", help="SASL user")
    _option(
        g,
        "--kafka-password",
        str,
        None,
        metavar="PASSWORD",
        help="SASL password" + VISIBLE.format("KAFKA_PASSWORD", "--kafka-password"),
    )
    _option(
        g,
        "--kafka-password-file",
        str,
        None,
        metavar="FILE",
        help="read the SASL password from this file",
    )
    _option(
        g,
        "--kafka-ca-file",
        str,
        None,
        metavar="FILE",
        help="SSL, SASL_SSL: CA certificates (PEM) that signed the brokers'; default the system's",
    )
    _option(
        g,
        "--kafka-cert-file",
        str,
        None,
        metavar="FILE",
        help="SSL, SASL_SSL: client certificate (PEM), for brokers that authenticate clients",
    )
    _option(
        g,
        "--kafka-key-file",
        str,
        None,
        metavar="FILE",
        help="SSL, SASL_SSL: private key of --kafka-cert-file (PEM)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        config = env("config")
        if "--config" in argv:  # read before the parser is built: it supplies defaults
            at = argv.index("--config")
            config = argv[at + 1] if at + 1 < len(argv) else None
            del argv[at : at + 2]
        if config:
            load_file(config)
        cli = parser()
    except DetectorError as exc:
        print(f"neardup: error: {exc}", file=sys.stderr)
        return 2
    args = cli.parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except DetectorError as exc:
        print(f"neardup: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _detect(args: argparse.Namespace) -> int:
    from .index.memory import MemoryIndex
    from .pipeline import Detector, run
    from .stream.files import (
        JsonlSink,
        input_label,
        open_input,
        open_output,
        read_lines,
    )

    settings = _settings(args)
    scheme = settings.block_scheme()
    detector = Detector(
        settings.engine(),
        MemoryIndex(scheme, args.index_name),
        scheme,
        settings.literal(),
        settings.max_candidates,
    )
    stream = open_input(args.input)
    out = open_output(args.output, sys.stdout)
    errors = open_output(args.errors, sys.stderr)
    progress = _progress(args, smoothing=0.1)
    try:
        counts = run(
            detector,
            read_lines(stream, input_label(args.input)),
            JsonlSink(out, errors),
            args.batch_size,
            settings.max_bytes,
            progress,
            args.workers,
            start_method="fork",
            max_tokens=settings.max_tokens,
        )
    finally:
        if progress is not None:
            progress.close()
        for f in (out, errors):
            if f not in (sys.stdout, sys.stderr):
                f.close()
        stream.close()
    print(f"neardup: {counts.summary()}", file=sys.stderr)
    return 0


def _fit_idf(args: argparse.Namespace) -> int:
    from .features import IdfTable
    from .records import parse_document
    from .stream.files import input_label, open_input, read_lines

    def texts() -> Iterator[str]:
        with open_input(args.corpus) as stream:
            for raw, _ in read_lines(stream, input_label(args.corpus)):
                try:
                    yield parse_document(raw).text
                except DetectorError:
                    continue  # fitting weights tolerates the lines detect would reject

    table = IdfTable.fit(texts(), min_df=args.min_df)
    table.save(args.output)
    print(
        f"neardup: {args.output}: {table.version}, {table.docs} documents, "
        f"{len(table.doc_freq)} tokens",
        file=sys.stderr,
    )
    return 0


def _eval(args: argparse.Namespace) -> int:
    from .evaluate import evaluate, load_jsonl, plot_report

    decisions = load_jsonl(args.decisions)
    truth = load_jsonl(args.truth)
    scores = evaluate(decisions, truth, args.threshold)
    if args.json:
        print(json.dumps(scores))
    else:
        for k, v in scores.items():
            print(f"{k:>22}: {v}")
    if args.report:
        plot_report(decisions, truth, args.threshold, args.report)
        print(f"neardup: report written to {args.report}", file=sys.stderr)
    return 0


def _serve(args: argparse.Namespace) -> int:
    import logging
    import os
    import socket

    from .index.connect import check as check_redis
    from .index.connect import refusals
    from .index.redis import RedisIndex
    from .metrics import Health, serve_http
    from .pipeline import Detector
    from .service import Service, wait_for
    from .stream.kafka import KafkaSink, KafkaSource, ensure_topics
    from .stream.kafka import check as check_kafka

    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    # kafka-python logs every reconnection attempt, and at DEBUG even the SASL password.
    logging.getLogger("kafka").setLevel(logging.ERROR)
    settings = _settings(args)
    scheme = settings.block_scheme()
    redis_at = _redis_settings(args)
    kafka = _kafka_settings(args, f"neardup-{socket.gethostname()}-{os.getpid()}")
    health = Health()
    if args.metrics_port:
        serve_http(args.metrics_host, args.metrics_port, health)
    # A refused password or an untrusted certificate is a ConfigError: it ends serve
    # (status 2) here instead of being waited out like a server that is away. (A cluster
    # client asks a node for the slot map as it is made, so it is made here too.)
    client = wait_for("redis", redis_at.client)
    wait_for("redis", lambda: check_redis(client, redis_at))
    index = RedisIndex(
        client,
        scheme,
        args.index,
        args.text_ttl,
        args.decision_ttl,
        retention=args.retention,
        max_bucket=args.max_bucket,
    )
    detector = Detector(
        settings.engine(), index, scheme, settings.literal(), settings.max_candidates, bind=False
    )
    with refusals(redis_at):  # e.g. an ACL that lacks a key or a command
        wait_for("redis", lambda: index.bind(detector.engine.version))
    wait_for("kafka", lambda: check_kafka(kafka))
    topics = {args.output_topic: 1, args.dead_letter_topic: 1}
    wait_for("kafka", lambda: ensure_topics(kafka, topics))
    source = wait_for(
        "kafka", lambda: KafkaSource(kafka, args.input_topic, args.group, args.batch_size)
    )
    sink = wait_for("kafka", lambda: KafkaSink(kafka, args.output_topic, args.dead_letter_topic))
    logging.getLogger("neardup.serve").info(
        "serving %s -> %s (group %s, index %s, %s; Redis%s at %s as %s, Kafka at %s over %s)",
        args.input_topic,
        args.output_topic,
        args.group,
        args.index,
        scheme.describe(),
        " Cluster" if redis_at.cluster else "",
        redis_at.where(),
        redis_at.who(),
        kafka.bootstrap_servers,
        kafka.security_protocol,
    )
    service = Service(detector, source, sink, settings.max_bytes, health, settings.max_tokens)
    if args.retention:  # a slice of the index's keys a second: memory comes back steadily
        service.upkeep = lambda: index.sweep(shards=SWEEP_SHARDS)
    with refusals(redis_at):
        service.run()
    return 0


def _produce(args: argparse.Namespace) -> int:
    from .stream.files import input_label, open_input, read_lines
    from .stream.kafka import ensure_topics, produce

    kafka = _kafka_settings(args)
    _kafka_check(kafka)
    if args.partitions:
        ensure_topics(kafka, {args.topic: args.partitions})
    progress = _progress(args)
    sent = 0
    with open_input(args.input) as stream:
        for n in produce(kafka, args.topic, read_lines(stream, input_label(args.input))):
            sent += n
            if progress is not None:
                progress.update(n)
    if progress is not None:
        progress.close()
    print(f"neardup: {sent} records sent to {args.topic}", file=sys.stderr)
    return 0


def _tail(args: argparse.Namespace) -> int:
    from .stream.kafka import tail

    idle = None if args.idle is None else int(args.idle * 1000)
    kafka = _kafka_settings(args)
    _kafka_check(kafka)
    try:
        for value in tail(kafka, args.topic, args.from_beginning, idle):
            sys.stdout.write(value.decode("utf-8", "replace") + "\n")
            sys.stdout.flush()
    except BrokenPipeError:
        pass
    return 0


def _bench(args: argparse.Namespace) -> int:
    from .bench import main

    args.kafka = _kafka_settings(args)
    args.redis = _redis_settings(args)
    _kafka_check(args.kafka)
    return main(args)


def _index(args: argparse.Namespace) -> int:
    """The maintenance commands; each opens the index with the settings it was made with."""
    from .index.connect import check, refusals
    from .index.redis import RedisIndex

    redis_at = _redis_settings(args)
    with refusals(redis_at):
        client = redis_at.client()
        check(client, redis_at)
        if args.action == "import":
            return _index_import(args, client)
        index = RedisIndex.open(client, args.index)
        if args.action == "stats":
            print(json.dumps({"index": args.index, **index.meta(), **index.stats()}))
        elif args.action == "export":
            _index_export(args, index)
        elif args.action == "delete":
            ids = list(args.ids)
            if args.ids_file:
                with open(args.ids_file, encoding="utf-8") as f:
                    ids += [line.strip() for line in f if line.strip()]
            if not ids:
                raise ConfigError("index delete: give ids, or --ids-file")
            gone = index.delete(ids)
            print(f"neardup: deleted {len(gone)} of {len(set(ids))} ids", file=sys.stderr)
        else:
            removed = index.sweep()
            print(f"neardup: swept {removed} expired entries", file=sys.stderr)
    return 0


EXPORT_FORMAT = 1


def _index_export(args: argparse.Namespace, index: Any) -> None:
    from .stream.files import open_output

    out = open_output(args.output, sys.stdout)
    progress = _progress(args)
    count = 0
    try:
        header = {"neardup_index_export": EXPORT_FORMAT, "name": args.index, **index.meta()}
        out.write(json.dumps(header) + "\n")
        for record in index.documents():
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
            count += 1
            if progress is not None:
                progress.update()
    finally:
        if progress is not None:
            progress.close()
        if out is not sys.stdout:
            out.close()
    print(f"neardup: exported {count} records of index {args.index!r}", file=sys.stderr)


def _index_import(args: argparse.Namespace, client: Any) -> int:
    from .index.redis import RedisIndex
    from .stream.files import input_label, open_input, read_lines

    stream = open_input(args.input)
    lines = read_lines(stream, input_label(args.input))
    try:
        first = next(lines, None)
        header = json.loads(first[0]) if first else {}
        if not isinstance(header, dict) or header.get("neardup_index_export") != EXPORT_FORMAT:
            raise ConfigError(f"{args.input}: not an export of `neardup index export`")
        name = args.index or header["name"]
        index = RedisIndex.from_meta(client, name, header)
        progress = _progress(args)

        def records() -> Iterator[dict[str, Any]]:
            for raw, where in lines:
                try:
                    yield json.loads(raw)
                except ValueError:
                    raise ConfigError(f"{args.input}: line {where['line']} is not JSON") from None
                if progress is not None:
                    progress.update()

        try:
            count = index.restore(records())
        finally:
            if progress is not None:
                progress.close()
    finally:
        stream.close()
    print(f"neardup: imported {count} records into index {name!r}", file=sys.stderr)
    return 0


def _progress(args: argparse.Namespace, smoothing: float = 0.3) -> Any:
    """A progress bar of records on stderr, or None: --progress/--no-progress, else when
    stderr is a terminal."""
    if not (sys.stderr.isatty() if args.progress is None else args.progress):
        return None
    from tqdm import tqdm

    return tqdm(unit=" records", file=sys.stderr, smoothing=smoothing)


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "detect": _detect,
    "fit-idf": _fit_idf,
    "eval": _eval,
    "serve": _serve,
    "produce": _produce,
    "index": _index,
    "tail": _tail,
    "bench": _bench,
}
