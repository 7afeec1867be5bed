"""The command line: the table of detector/options.py -> argparse -> settings -> the
commands. Options, defaults, environment variables and config-file keys are declared there,
once; here they become a parser, and the parsed arguments become settings objects."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from . import __version__, options
from .access import read_secret, redact_url
from .errors import BackendUnavailable, ConfigError, DetectorError
from .options import CONFIG_VARIABLE, Config, Option

if TYPE_CHECKING:
    from .index.redis.connect import RedisSettings
    from .settings import EngineSettings
    from .stream.kafka import KafkaSettings

# With --retention, each serve process sweeps one shard's digests a second: all of them
# in about a minute, however large the index.
SWEEP_SHARDS = 1

GROUPS = {"engine": "engine", "redis": "Redis", "kafka": "Kafka"}
CONFIG_HELP = (
    "TOML file of options, anywhere on the command line: --config FILE or --config=FILE "
    f"(default: ${CONFIG_VARIABLE})"
)
EPILOG = (
    "An option marked [NEARDUP_<OPTION>] is also read from that environment variable (an "
    "empty one is unset) and from the key <option> (dashes or underscores) of the --config "
    "file, at its top level or in a [neardup] table. The command line wins over the "
    "environment, which wins over the file. A NEARDUP_* variable or a key that is not such "
    "an option, or a value of the wrong type, is an error."
)
TYPES: dict[str, Callable[[str], Any]] = {"int": int, "float": float, "str": str, "choice": str}


class _ConfigOption(argparse.Action):
    """--config is taken out of the arguments before they are parsed (`config_file`): one
    that reaches the parser is an abbreviation, which would otherwise be dropped unread."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        parser.error("write --config in full: --config FILE or --config=FILE")


def config_file(argv: Sequence[str]) -> tuple[str | None, list[str]]:
    """(the --config FILE or --config=FILE given anywhere, the other arguments)."""
    pre = argparse.ArgumentParser(prog="neardup", add_help=False, allow_abbrev=False)
    pre.add_argument("--config", metavar="FILE")
    known, rest = pre.parse_known_args(list(argv))
    return known.config, rest


class _Deferred:
    """A help text computed when help is printed: some (the block schemes a threshold
    chooses) need numpy, which `neardup --help` should not wait for. argparse asks a help
    text only for truth, strip() and % (its defaults)."""

    def __init__(self, row: Option, default: Any) -> None:
        self.row, self.default = row, default

    def __str__(self) -> str:
        return _help_text(self.row, self.default)

    def strip(self) -> str:
        return str(self).strip()

    def __mod__(self, params: dict[str, Any]) -> str:
        text: str = str(self) % params
        return text


def _help(row: Option, default: Any) -> str:
    if callable(row.help):
        return _Deferred(row, default)  # type: ignore[return-value]  # argparse wants a str
    return _help_text(row, default)


def _help_text(row: Option, default: Any) -> str:
    """The row's help, its default (none for a secret, whose default may come from the
    environment; a URL's without its password) and its variable."""
    text = row.text
    if row.url and default is not None:  # argparse would expand %(default)s unredacted
        text += f" (default: {redact_url(str(default)).replace('%', '%%')})"
    elif not (
        row.secret
        or row.positional
        or default is None
        or "(default:" in text
        or (row.kind == "bool" and not row.negatable)
    ):
        text += " (default: %(default)s)"
    if row.configurable:
        text += f" [{row.variable}]"
    return text


def _add(p: argparse.ArgumentParser | argparse._ArgumentGroup, row: Option, default: Any) -> None:
    more: dict[str, Any] = {"help": _help(row, default)}
    if isinstance(default, tuple):
        default = list(default)
    if row.nargs:
        more["nargs"] = row.nargs
    if row.positional:
        if default is not None:
            more["default"] = default
        p.add_argument(row.name, **more)
        return
    if row.kind == "bool":
        more["action"] = argparse.BooleanOptionalAction if row.negatable else "store_true"
    else:
        more["type"] = TYPES[row.kind]
        if row.choices:
            more["choices"] = row.choices
        if row.metavar:
            more["metavar"] = row.metavar
        if row.required:
            more["required"] = True
    p.add_argument(*row.flags, dest=row.dest, default=default, **more)


def _options(p: argparse.ArgumentParser, command: str, config: Config) -> None:
    """The table's options of `command`, their defaults from `config`; the engine's,
    Redis's and Kafka's in groups of their own."""
    p.add_argument("--config", metavar="FILE", action=_ConfigOption, help=CONFIG_HELP)
    groups: dict[str, argparse._ArgumentGroup] = {}
    for row in options.of(command):
        if row.group and row.group not in groups:
            groups[row.group] = p.add_argument_group(GROUPS[row.group])
        _add(groups[row.group] if row.group else p, row, config.default(row))


def parser(config: Config | None = None) -> argparse.ArgumentParser:
    """The whole command line. `config` gives the defaults: by default, the environment's
    (and the file NEARDUP_CONFIG names)."""
    config = Config.load(os.environ) if config is None else config
    p = argparse.ArgumentParser(
        prog="neardup",
        description="Streaming near-duplicate detection: SimHash fingerprints, Manku block "
        "tables and a literal second pass.",
        allow_abbrev=False,  # --conf must not pass for --config
    )
    p.add_argument("--version", action="version", version=f"neardup {__version__}")
    p.add_argument("--config", metavar="FILE", action=_ConfigOption, help=CONFIG_HELP)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    parents: dict[str, Any] = {}
    for command in options.COMMANDS:
        parent, _, action = command.name.rpartition(" ")
        made = (parents[parent] if parent else sub).add_parser(
            action,
            help=command.help,
            description=command.description,
            epilog=EPILOG if any(o.configurable for o in options.of(command.name)) else None,
        )
        if command.name == "index":
            made.add_argument("--config", metavar="FILE", action=_ConfigOption, help=CONFIG_HELP)
            parents["index"] = made.add_subparsers(dest="action", required=True, metavar="ACTION")
        else:
            _options(made, command.name, config)
    return p


def _redis_settings(args: argparse.Namespace) -> RedisSettings:
    from .index.redis.connect import RedisSettings

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
    """The engine's settings: its fields are the engine options' names."""
    from .settings import EngineSettings

    return EngineSettings(
        **{f.name: getattr(a, f.name) for f in dataclasses.fields(EngineSettings)}
    )


def main(argv: Sequence[str] | None = None) -> int:
    try:
        path, rest = config_file(sys.argv[1:] if argv is None else argv)
        cli = parser(Config.load(os.environ, path))
    except DetectorError as exc:
        print(f"neardup: error: {exc}", file=sys.stderr)
        return 2
    args = cli.parse_args(rest)
    try:
        return COMMANDS[args.command](args)
    except DetectorError as exc:
        print(f"neardup: error: {exc}", file=sys.stderr)
        return exc.exit_status
    except KeyboardInterrupt:
        return 130


def _detect(args: argparse.Namespace) -> int:
    from .index.memory import MemoryIndex
    from .pipeline import Limits, Loop
    from .stream.files import FileSource, JsonlSink, open_output

    settings = _settings(args)
    index = MemoryIndex(settings.block_scheme(), args.index, vectors=settings.vector_block_scheme())
    detector = settings.detector(index)
    source = FileSource(args.input, args.batch_size)
    sink = JsonlSink(open_output(args.output, sys.stdout), open_output(args.errors, sys.stderr))
    progress = _progress(args, smoothing=0.1)
    loop = Loop(
        detector,
        source,
        sink,
        Limits(settings.max_bytes, settings.max_tokens),
        observers=[_Progress(progress)] if progress is not None else [],
        workers=args.workers,
        start_method="fork",  # detect runs no threads
    )
    try:
        counts = loop.run()
    finally:
        if progress is not None:
            progress.close()
        sink.close()
        source.close()
    print(f"neardup: {counts.summary()}; {detector.engine.kernels.name} kernels", file=sys.stderr)
    if detector.vector_lookups:
        print(f"neardup: vectors: {_vector_summary(detector, index)}", file=sys.stderr)
    return 0


def _vector_summary(detector: Any, index: Any) -> str:
    """What the vector tables cost: bucket reads and candidates per lookup, bytes."""
    scheme = detector.vector_scheme
    lookups = detector.vector_lookups
    stats = index.stats()
    per = stats["vector_bytes"] / stats["vectors"] if stats["vectors"] else 0.0
    return (
        f"{lookups} lookups, {sum(len(f) for f in scheme.flips)} probes a lookup, "
        f"{detector.vector_candidates / lookups:.2f} candidates a lookup, "
        f"{per:.0f} bytes a vector (k={scheme.k}, {scheme.name})"
    )


class _Progress:
    """detect's observer of the loop: a progress bar of records."""

    def __init__(self, bar: Any) -> None:
        self.bar = bar

    def polled(self, records: int) -> None:
        pass

    def retrying(self, step: str, exc: Exception, wait: float) -> None:
        pass

    def done(self, batch: Any, decisions: Any, seconds: float) -> None:
        self.bar.update(batch.size)


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


def _extract(args: argparse.Namespace) -> int:
    from .errors import BadRecord
    from .index.memory import MemoryIndex
    from .records import parse_document
    from .stream.files import FileSource

    settings = _settings(args)
    extractor = settings.extractor(MemoryIndex(settings.block_scheme()))
    wanted = set(args.id.split(",")) if args.id else None
    source = FileSource(args.input, args.batch_size)
    try:
        for batch in source.batches():
            docs = []
            for raw, _ in batch.records:
                try:
                    docs.append(parse_document(raw, settings.max_bytes))
                except BadRecord:
                    continue  # detect makes it an error record; nothing to show here
            for doc, got in zip(docs, extractor.batch(docs), strict=True):
                if got is None or (wanted is not None and doc.id not in wanted):
                    continue
                shown: dict[str, object] = {"id": doc.id, "url": doc.url}
                shown |= {"extraction": got.extraction, "text": got.text}
                shown |= {"removed": got.removed, "template": got.template}
                print(json.dumps(shown, ensure_ascii=False))
    finally:
        source.close()
    return 0


def _eval(args: argparse.Namespace) -> int:
    from .evaluate import evaluate, load_jsonl, plot_report, truth_measure

    decisions = load_jsonl(args.decisions)
    truth = load_jsonl(args.truth)
    field, threshold = truth_measure(truth, args.measure, args.threshold)
    scores = evaluate(decisions, truth, threshold, field)
    if args.json:
        print(json.dumps(scores))
    else:
        for k, v in scores.items():
            print(f"{k:>22}: {v}")
    if args.report:
        plot_report(decisions, truth, threshold, args.report, field)
        print(f"neardup: report written to {args.report}", file=sys.stderr)
    return 0


def _serve(args: argparse.Namespace) -> int:
    import logging
    import os
    import socket

    from .index.redis import RedisIndex
    from .index.redis.connect import check as check_redis
    from .index.redis.connect import refusals
    from .metrics import KERNELS, REDIS_SECONDS, TRANSACTIONS, Health, serve_http
    from .pipeline import Limits, Loop
    from .retry import STARTUP
    from .service import Service
    from .stream.kafka import (
        KafkaSink,
        KafkaSource,
        TransactionalSink,
        TransactionalSource,
        ensure_topics,
        transactional_id,
    )
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
    client = STARTUP.call("redis", redis_at.client)
    STARTUP.call("redis", lambda: check_redis(client, redis_at))
    index = RedisIndex(
        client,
        scheme,
        args.index,
        args.text_ttl,
        args.decision_ttl,
        retention=args.retention,
        max_bucket=args.max_bucket,
        observe=REDIS_SECONDS.observe,
        vectors=settings.vector_block_scheme(),
    )
    detector = settings.detector(index, bind=False)
    KERNELS.labels(detector.engine.kernels.name).set(1)
    with refusals(redis_at):  # e.g. an ACL that lacks a key or a command
        STARTUP.call("redis", lambda: index.bind(detector.engine.version))
    STARTUP.call("kafka", lambda: check_kafka(kafka))
    topics = {args.output_topic: 1, args.dead_letter_topic: 1}
    STARTUP.call("kafka", lambda: ensure_topics(kafka, topics))
    sink: KafkaSink
    source: KafkaSource
    if args.exactly_once:
        txn = transactional_id(kafka, args.group)
        transactions = STARTUP.call(
            "kafka",
            lambda: TransactionalSink(
                kafka,
                args.output_topic,
                args.dead_letter_topic,
                txn,
                observe=lambda outcome: TRANSACTIONS.labels(outcome).inc(),
            ),
        )
        source = STARTUP.call(
            "kafka",
            lambda: TransactionalSource(
                kafka, args.input_topic, args.group, args.batch_size, transactions
            ),
        )
        sink = transactions
        delivery = f"exactly once, transactional id {txn}"
    else:
        sink = STARTUP.call(
            "kafka", lambda: KafkaSink(kafka, args.output_topic, args.dead_letter_topic)
        )
        source = STARTUP.call(
            "kafka", lambda: KafkaSource(kafka, args.input_topic, args.group, args.batch_size)
        )
        delivery = "at least once"
    logging.getLogger("neardup.serve").info(
        "serving %s -> %s (group %s, %s, index %s, %s, %s kernels; Redis%s at %s as %s, "
        "Kafka at %s over %s)",
        args.input_topic,
        args.output_topic,
        args.group,
        delivery,
        args.index,
        scheme.describe(),
        detector.engine.kernels.name,
        " Cluster" if redis_at.cluster else "",
        redis_at.where(),
        redis_at.who(),
        kafka.bootstrap_servers,
        kafka.security_protocol,
    )
    loop = Loop(detector, source, sink, Limits(settings.max_bytes, settings.max_tokens))
    loop.tombstones = args.tombstones
    loop.prefetch = args.prefetch
    if args.retention:  # a slice of the index's keys a second: memory comes back steadily
        loop.upkeep = lambda: index.sweep(shards=SWEEP_SHARDS)
    with refusals(redis_at):
        Service(loop, health).run()
    return 0


def _produce(args: argparse.Namespace) -> int:
    from .stream.files import input_label, open_input, read_lines
    from .stream.kafka import ensure_topics, produce

    kafka = _kafka_settings(args)
    _kafka_check(kafka)
    if args.partitions:
        ensure_topics(kafka, {args.input_topic: args.partitions})
    progress = _progress(args)
    sent = 0
    with open_input(args.input) as stream:
        for n in produce(kafka, args.input_topic, read_lines(stream, input_label(args.input))):
            sent += n
            if progress is not None:
                progress.update(n)
    if progress is not None:
        progress.close()
    print(f"neardup: {sent} records sent to {args.input_topic}", file=sys.stderr)
    return 0


def _tail(args: argparse.Namespace) -> int:
    from .stream.kafka import tail

    idle = None if args.idle is None else int(args.idle * 1000)
    kafka = _kafka_settings(args)
    _kafka_check(kafka)
    try:
        for value in tail(kafka, args.output_topic, args.from_beginning, idle, args.read_committed):
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
    from .index.redis import RedisIndex
    from .index.redis.connect import check, refusals

    redis_at = _redis_settings(args)
    with refusals(redis_at):
        client = redis_at.client()
        check(client, redis_at)
        if args.action == "import":
            return _index_import(args, client)
        index = RedisIndex.open(client, args.index)
        if args.action == "stats":
            _index_stats(args, index)
        elif args.action == "export":
            _index_export(args, index)
        elif args.action == "delete":
            ids = list(args.ids)
            if args.ids_file:
                with open(args.ids_file, encoding="utf-8") as f:
                    ids += [line.strip() for line in f if line.strip()]
            if not ids:
                raise ConfigError("index delete: give ids, or --ids-file")
            print(f"neardup: {delete_summary(ids, index.delete(ids))}", file=sys.stderr)
        else:
            removed = index.sweep()
            print(f"neardup: swept {removed} expired entries", file=sys.stderr)
    return 0


def _index_stats(args: argparse.Namespace, index: Any) -> None:
    stats = {"index": args.index, **index.meta(), **index.stats()}
    exact = args.memory == "exact"
    progress = _progress(args, unit=" keys") if exact else None
    try:
        memory = index.memory(exact, progress.update if progress is not None else None)
    finally:
        if progress is not None:
            progress.close()
    print(json.dumps({**stats, "memory": memory.to_dict()}))


NOT_FOUND_LISTED = 10  # ids not found that `index delete` names; beyond, the first ones


def delete_summary(ids: Sequence[str], gone: Sequence[str]) -> str:
    """What `index delete` did: how many of the ids it deleted, and which it did not
    find (JSON strings, so that any id reads unambiguously)."""
    asked = list(dict.fromkeys(ids))
    found = set(gone)
    missing = [i for i in asked if i not in found]
    out = f"deleted {len(gone)} of {len(asked)} ids"
    if not missing:
        return out
    shown = ", ".join(json.dumps(i, ensure_ascii=False) for i in missing[:NOT_FOUND_LISTED])
    if len(missing) <= NOT_FOUND_LISTED:
        return f"{out}; not found: {shown}"
    return f"{out}; {len(missing)} not found, the first {NOT_FOUND_LISTED}: {shown}"


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


def _progress(args: argparse.Namespace, smoothing: float = 0.3, unit: str = " records") -> Any:
    """A progress bar on stderr, or None: --progress/--no-progress, else when stderr is a
    terminal."""
    if not (sys.stderr.isatty() if args.progress is None else args.progress):
        return None
    from tqdm import tqdm

    return tqdm(unit=unit, file=sys.stderr, smoothing=smoothing)


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "detect": _detect,
    "fit-idf": _fit_idf,
    "eval": _eval,
    "extract": _extract,
    "serve": _serve,
    "produce": _produce,
    "index": _index,
    "tail": _tail,
    "bench": _bench,
}
