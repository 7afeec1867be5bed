"""The command line: the table of detector/options.py -> argparse -> settings -> the
commands. Options, defaults, environment variables and config-file keys are declared there,
once; here they become a parser, and the parsed arguments become settings objects."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

from . import __version__, options, profile
from .access import read_secret, redact_url
from .errors import BackendUnavailable, ConfigError, DetectorError
from .options import CONFIG_VARIABLE, Config, Option

if TYPE_CHECKING:
    from .index.redis.connect import RedisSettings
    from .retry import Startup
    from .settings import EngineSettings
    from .stream.kafka import KafkaSettings, TopicLimits

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
    "an option, or a value of the wrong type or out of its range, is an error."
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


class _Checked(argparse.Action):
    """Stores the value if its row's check takes it. Else argparse's error names the flag
    (status 2), in the words the environment and the config file use."""

    def __init__(self, option_strings: Sequence[str], dest: str, row: Option, **more: Any):
        super().__init__(option_strings, dest, **more)
        self.row = row

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        for value in values if isinstance(values, list) else [values]:
            if isinstance(value, float) and not math.isfinite(value):  # float() takes "nan"
                raise argparse.ArgumentError(self, f"expected a number, not {value}")
        if (problem := self.row.problem(values)) is not None:
            raise argparse.ArgumentError(self, problem)
        setattr(namespace, self.dest, values)


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
        if row.check is not None:
            more |= {"action": _Checked, "row": row}
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
        sentinel=args.redis_sentinel or None,
        service=args.redis_service or None,
        min_replicas=args.redis_min_replicas,
        wait_timeout=args.redis_wait_timeout,
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


def _kafka_start(args: argparse.Namespace, kafka: KafkaSettings) -> Startup:
    """A Kafka command's start: brokers that are away are waited for, saying so, up to
    --startup-timeout; refused credentials, an untrusted certificate, an unknown host or a
    port that is not a broker's stop the command at once."""
    from .retry import Startup
    from .stream.kafka import check

    start = Startup(args.startup_timeout)
    start.wait(f"Kafka at {kafka.bootstrap_servers}", lambda: check(kafka))
    return start


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


def _waiting_on_a_terminal(args: argparse.Namespace) -> None:
    """A command reading stdin from a terminal would otherwise wait in silence, as if
    hung: say what it waits for, and how to end it."""
    if args.input == "-" and sys.stdin is not None and sys.stdin.isatty():
        print(
            f"neardup: reading records from stdin, one JSON object a line; end with Ctrl-D, "
            f"or give a file: neardup {args.command} FILE",
            file=sys.stderr,
        )


def _detect(args: argparse.Namespace) -> int:
    from .clusters import ClusterWatch
    from .index.memory import MemoryIndex
    from .pipeline import Limits, Loop
    from .records import LINE_RAW_KEPT
    from .stream.files import FileSource, JsonlSink, open_output

    settings = _settings(args)
    index = MemoryIndex(
        settings.block_scheme(),
        args.index,
        vectors=settings.vector_block_scheme(),
        text_window=settings.text_window,
    )
    detector = settings.detector(index)
    source = FileSource(args.input, args.batch_size, settings.max_bytes, LINE_RAW_KEPT)
    sink = JsonlSink(open_output(args.output, sys.stdout), open_output(args.errors, sys.stderr))
    _waiting_on_a_terminal(args)
    progress = _progress(args, smoothing=0.1)
    clusters = ClusterWatch(args.runaway_share)
    loop = Loop(
        detector,
        source,
        sink,
        Limits(settings.max_bytes, settings.max_tokens, LINE_RAW_KEPT),
        observers=[clusters, *([_Progress(progress)] if progress is not None else [])],
        workers=args.workers,
        start_method="fork",  # with workers, detect runs no thread (no prefetch)
        prefetch=args.prefetch,
    )
    profiled = profile.start() if args.profile else None
    try:
        counts = loop.run()
    finally:
        if progress is not None:
            progress.close()
        sink.close()
        source.close()
    if profiled is not None:
        print(profiled.table(), file=sys.stderr)
    failed = "; every record was an error (exit status 1)" if counts.failed else ""
    kernels = detector.engine.kernels.name
    print(f"neardup: {counts.summary()}; {kernels} kernels{failed}", file=sys.stderr)
    if detector.vector_lookups:
        print(f"neardup: vectors: {_vector_summary(detector, index)}", file=sys.stderr)
    for runaway in clusters.runaways:
        print(f"neardup: warning: {runaway}", file=sys.stderr)
    if index.evicted:  # hot buckets: their oldest entries are no longer candidates there
        print(
            f"neardup: {index.evicted:,} block-table entries are past the newest "
            f"{index.max_bucket:,} of their bucket and no longer read (hot buckets)",
            file=sys.stderr,
        )
    return 1 if counts.failed else 0


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
    from .records import CUT, DEFAULT_MAX_BYTES, parse_document
    from .stream.files import input_label, open_input, read_lines

    def texts() -> Iterator[str]:
        with open_input(args.corpus) as stream:
            for raw, where in read_lines(stream, input_label(args.corpus), DEFAULT_MAX_BYTES):
                if CUT in where:
                    continue  # too large for detect, and only its first bytes were kept
                try:
                    text = parse_document(raw).text
                except DetectorError:
                    continue  # fitting weights tolerates the lines detect would reject
                if text:  # a record with only an embedding has no words to count
                    yield text

    table = IdfTable.fit(texts(), min_df=args.min_df)
    table.save(args.output)
    print(
        f"neardup: {args.output}: {table.version}, {table.docs} documents, "
        f"{len(table.doc_freq)} tokens",
        file=sys.stderr,
    )
    return 0


def _extract(args: argparse.Namespace) -> int:
    from .extract import in_order
    from .index.memory import MemoryIndex
    from .stream.files import FileSource

    settings = _settings(args)
    extractor = settings.extractor(MemoryIndex(settings.block_scheme()))
    wanted = set(args.id.split(",")) if args.id else None
    source = FileSource(args.input, args.batch_size, settings.max_bytes)
    _waiting_on_a_terminal(args)
    try:
        # a line detect makes an error record has nothing to show here
        batches = (batch.records for batch in source.batches())
        for cuts in in_order(batches, extractor, settings.max_bytes):
            for cut in cuts:
                doc, got = cut.doc, cut.extracted
                if got is None or (wanted is not None and doc.id not in wanted):
                    continue
                shown: dict[str, object] = {"id": doc.id, "url": doc.url}
                shown |= {"extraction": got.extraction, "text": got.text}
                shown |= {"why": got.why, "removed": got.removed, "template": got.template}
                print(json.dumps(shown, ensure_ascii=False))
    finally:
        source.close()
    return 0


def _explain(args: argparse.Namespace) -> int:
    import shutil

    from .explain import render

    inputs = list(args.input or [])
    got = _explain_index(args) if not inputs else _explain_files(args, inputs)
    if args.json:
        print(json.dumps(got.to_dict(), ensure_ascii=False))
        return 0
    tty = sys.stdout.isatty()
    color = args.color if args.color is not None else tty and not os.environ.get("NO_COLOR")
    width = shutil.get_terminal_size().columns if tty else 100
    sys.stdout.write(render(got, color, max(width, 40)))
    return 0


def _explain_ids(args: argparse.Namespace) -> list[str]:
    """--ids A,B as two ids, or --id X as one."""
    if args.ids is None:
        return [args.id]
    ids = [i.strip() for i in args.ids.split(",")]
    if len(ids) != 2 or not all(ids) or ids[0] == ids[1]:
        raise ConfigError(f"--ids {args.ids!r}: give two different ids, A,B")
    return ids


def _explain_files(args: argparse.Namespace, inputs: list[str]) -> Any:
    from .explain import Rules, Stream, explain, in_file
    from .index.memory import MemoryIndex

    settings = _settings(args)
    engine = settings.engine()
    pairs = len(inputs) == 2
    if len(inputs) > 2 or (pairs and (args.ids or args.id or args.decisions)):
        raise ConfigError(
            "explain: give one JSONL file with --ids A,B (or --decisions FILE --id X), two "
            "files of one record each, or no file and --ids or --id for the Redis index"
        )
    if not pairs and (args.ids is None) == (args.id is None or args.decisions is None):
        raise ConfigError(
            f"explain {inputs[0]}: give --ids A,B, or --decisions FILE with --id X"
            + (" (not both)" if args.ids is not None else "")
        )
    limits = (settings.max_bytes, settings.max_tokens)

    def extractor() -> Any:
        return settings.extractor(MemoryIndex(settings.block_scheme()))

    a: Any
    if pairs:
        raw = [_one_record(path, settings.max_bytes) for path in inputs]
        if raw[0][1]["source"] == raw[1][1]["source"]:
            for (_, where), path in zip(raw, inputs, strict=True):
                where["source"] = path
        stream = Stream("", lambda: [raw], engine, extractor, limits)  # one batch, as detect
        scanned = list(stream.records())
        for where, why in stream.refused:
            raise ConfigError(f"{where['source']}: not a record detect decides ({why})")
        a, b = (s.record(str(s.where["source"])) for s in scanned)
        a.where, b.where = (str(s.where["source"]) for s in scanned)
    else:
        stream = Stream(
            _label(inputs[0]),
            _batches(inputs[0], args.batch_size, settings),
            engine,
            extractor,
            limits,
        )
        decision = _decision_of(args.decisions, args.id) if args.id is not None else None
        a, b = in_file(stream, _explain_ids(args), decision, settings.text_window)
    rules = Rules(
        settings.block_scheme(),
        settings.vector_block_scheme(),
        settings.literal(engine.kernels),
        engine.kernels,
        settings.short_k,
        engine.featurizer.weights,
    )
    return explain(a, b, rules)


def _label(path: str) -> str:
    from .stream.files import input_label

    return input_label(path)


def _batches(path: str, size: int, settings: EngineSettings) -> Callable[[], Iterator[Any]]:
    """The file's batches as detect reads them, the file opened again for each pass."""
    from .stream.files import FileSource

    def batches() -> Iterator[Any]:
        source = FileSource(path, size, settings.max_bytes)
        try:
            for batch in source.batches():
                yield batch.records
        finally:
            source.close()

    return batches


def _one_record(path: str, max_bytes: int) -> tuple[bytes, dict[str, object]]:
    """A file of one record: a JSON object (a .json or .jsonl file, or a file that is one
    JSON object), else plain text whose id is the file's name."""
    from pathlib import Path

    from .records import parse_document
    from .stream.files import input_label, open_input

    name = input_label(path)
    with open_input(path) as stream:
        try:
            body = stream.read(max_bytes + 1)
        except OSError as exc:
            raise ConfigError(f"cannot read {path}: {exc}") from exc
    lines = [line for line in body.splitlines() if line.strip()]
    stem = Path(path.removesuffix(".gz")).suffix
    record = stem in (".json", ".jsonl") or (len(lines) == 1 and lines[0].lstrip()[:1] == b"{")
    if record and len(lines) != 1:
        raise ConfigError(
            f"{path}: {len(lines)} lines, not one record (for two ids of one file: --ids A,B)"
        )
    if record:
        try:
            parse_document(lines[0], max_bytes)
        except DetectorError as bad:
            if stem in (".json", ".jsonl"):
                raise ConfigError(f"{path}: not a record: {bad}") from None
            record = False  # a text that looks like JSON, and is not a record
    if record:
        return lines[0], {"source": name, "line": 1}
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: neither a JSON record nor UTF-8 text ({exc})") from None
    raw = json.dumps({"id": name, "text": text}, ensure_ascii=False).encode()
    return raw, {"source": name, "line": 1}


def _decision_of(path: str, doc_id: str) -> Any:
    """The first decision of an id in a decisions file of `neardup detect`."""
    from .records import Decision
    from .stream.files import input_label, open_input, read_lines

    with open_input(path) as stream:
        for raw, where in read_lines(stream, input_label(path)):
            try:
                d = json.loads(raw)
                if isinstance(d, dict) and d.get("id") == doc_id:
                    return Decision.from_dict(d)
            except (ValueError, KeyError, TypeError) as exc:
                raise ConfigError(
                    f"{path}: line {where['line']} is not a decision of neardup detect ({exc})"
                ) from None
    raise ConfigError(f"{path}: no decision of id {doc_id!r}")


def _explain_index(args: argparse.Namespace) -> Any:
    from .explain import ALONE_IN_INDEX, Rules, explain, in_index
    from .index.redis import RedisIndex
    from .index.redis.connect import check, refusals

    if (args.ids is None) == (args.id is None) or args.decisions is not None:
        raise ConfigError(
            "explain without an input file reads the Redis index --index: give --ids A,B or "
            "--id X (its decision is the index's: no --decisions)"
        )
    ids = _explain_ids(args)
    settings = _settings(args)
    redis_at = _redis_settings(args)
    with refusals(redis_at):
        client = redis_at.client()
        check(client, redis_at)
        index = RedisIndex.open(client, args.index)
        # the index's own window of texts: whether it judges on sketches
        settings = dataclasses.replace(settings, text_window=index.text_window)
        engine = settings.engine()
        a, b = in_index(index, engine, args.index, ids)
        rules = Rules(
            index.scheme,
            index.vector_scheme,
            settings.literal(engine.kernels),
            engine.kernels,
            settings.short_k,
            engine.featurizer.weights,
        )
        return explain(a, b, rules, ALONE_IN_INDEX)


def _eval(args: argparse.Namespace) -> int:
    from .evaluate import evaluate, load_jsonl, plot_report, truth_measure

    decisions = load_jsonl(args.decisions)
    truth = load_jsonl(args.truth)
    field, threshold = truth_measure(truth, args.measure, args.threshold)
    scores = evaluate(decisions, truth, threshold, field, args.order)
    if args.json:
        print(json.dumps(scores))
    else:
        width = max(map(len, scores))
        for k, v in scores.items():
            print(f"{k:>{width}}: {v}")
    if args.report:
        plot_report(decisions, truth, threshold, args.report, field, args.order, args.k)
        print(f"neardup: report written to {args.report}", file=sys.stderr)
    return 0


def _review(args: argparse.Namespace) -> int:
    import time

    from .review import review
    from .review_page import render

    started = time.monotonic()
    stages = _Stages(args)
    try:
        made = review(
            args.decisions,
            args.input,
            _settings(args),
            args.truth,
            args.group_by,
            args.top,
            args.batch_size,
            stages,
        )
    finally:
        stages.close()
    made.seconds = time.monotonic() - started
    page = render(made)
    try:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(page)
    except OSError as exc:
        raise ConfigError(f"{args.output}: cannot be written: {exc.strerror or exc}") from None
    print(
        f"neardup: {args.output}: {len(made.reading.records):,} records, "
        f"{len(page.encode()):,} bytes, in {time.monotonic() - started:.1f} s",
        file=sys.stderr,
    )
    return 0


class _Stages:
    """review's progress: a bar on stderr for each stage of its work, one after another."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.bar: Any = None

    def __call__(self, stage: str, total: int | None) -> Callable[[int], None]:
        self.close()
        self.bar = _progress(self.args, desc=stage, total=total)
        return self.bar.update if self.bar is not None else lambda done: None

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def _serve(args: argparse.Namespace) -> int:
    import logging
    import os
    import socket
    from pathlib import Path

    from .index.redis import RedisIndex, maintenance
    from .index.redis.connect import check as check_redis
    from .index.redis.connect import check_replicas, refusals
    from .metrics import KERNELS, REDIS_SECONDS, TRANSACTIONS, Health, serve_http
    from .pipeline import Limits, Loop
    from .retry import Startup
    from .service import Service
    from .stream.kafka import KafkaSink, KafkaSource, TransactionalSink, transactional_id
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
        http = serve_http(args.metrics_host, args.metrics_port, health, args.metrics_port_count)
        taken = http.server_address[1]
        logging.getLogger("neardup.serve").info(
            "/metrics, /livez and /readyz on http://%s:%d", args.metrics_host, taken
        )
        if args.metrics_port_file:
            try:
                Path(args.metrics_port_file).write_text(f"{taken}\n")
            except OSError as exc:
                raise ConfigError(f"--metrics-port-file {args.metrics_port_file}: {exc}") from None
    # Servers that are away are waited for, up to --startup-timeout in all; a refused
    # password, an untrusted certificate, an unknown host or a port that is not the
    # server's is a ConfigError, which ends serve (status 2) at once. (A cluster client
    # asks a node for the slot map as it is made, so it is made here too.)
    start = Startup(args.startup_timeout, on_wait=lambda what: health.beat(f"waiting for {what}"))
    redis_name = f"Redis{' Cluster' if redis_at.cluster else ''} at {redis_at.where()}"
    client = start.wait(redis_name, redis_at.client)
    start.wait(redis_name, lambda: check_redis(client, redis_at))
    start.wait(f"the replicas of {redis_name}", lambda: check_replicas(client, redis_at))
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
        expected_docs=args.expected_docs,
        text_window=settings.text_window,
        replication=redis_at.replication,
    )
    _watch_replicas(index.store)
    detector = settings.detector(index, bind=False)
    KERNELS.labels(detector.engine.kernels.name).set(1)
    with refusals(redis_at):  # e.g. an ACL that lacks a key or a command
        start.wait(redis_name, lambda: index.bind(detector.engine.version))
    kafka_name = f"Kafka at {kafka.bootstrap_servers}"
    start.wait(kafka_name, lambda: check_kafka(kafka))
    limits = _serve_topics(args, kafka, start)
    # Exactly once, the sink's transaction takes the offsets: the source commits through it.
    transaction: TransactionalSink | None = None
    delivery = "at least once"
    if args.exactly_once:
        txn = transactional_id(kafka, args.group)
        transaction = start.wait(
            kafka_name,
            lambda: TransactionalSink(
                kafka,
                args.output_topic,
                args.dead_letter_topic,
                txn,
                observe=lambda outcome: TRANSACTIONS.labels(outcome).inc(),
                limits=limits,
            ),
        )
        delivery = f"exactly once, transactional id {txn}"
    sink = transaction or start.wait(
        kafka_name,
        lambda: KafkaSink(kafka, args.output_topic, args.dead_letter_topic, limits=limits),
    )
    source = start.wait(
        kafka_name,
        lambda: KafkaSource(
            kafka, args.input_topic, args.group, args.batch_size, args.start_from, transaction
        ),
    )
    health.beat("joining the group")
    logging.getLogger("neardup.serve").info(
        "serving %s -> %s (group %s, %s, index %s, %s, %s kernels; Redis%s at %s as %s, "
        "Kafka at %s over %s); joining the group",
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
    if args.retention or settings.text_window is not None:

        def upkeep() -> None:
            # a slice of the index's keys a second: memory comes back steadily
            if args.retention:
                maintenance.sweep(index, shards=SWEEP_SHARDS)
            index.trim_texts()  # the window also holds when this consumer writes little

        loop.upkeep = upkeep
    profiled = profile.start() if args.profile else None
    with refusals(redis_at):
        Service(loop, health, log_every=args.log_every, runaway_share=args.runaway_share).run()
    if profiled is not None:
        print(profiled.table(), file=sys.stderr, flush=True)
    return 0


def _watch_replicas(store: Any) -> None:
    """The replicas' confirmations into serve's metrics."""
    from .metrics import MIN_REPLICAS, REPLICAS_CONFIRMED, UNCONFIRMED, WAIT_SECONDS

    wanted = store.replication.min_replicas
    MIN_REPLICAS.set(wanted)

    def waited(w: Any) -> None:
        if w is None:  # no reply at all: an outage, counted by the loop's retries
            return
        REPLICAS_CONFIRMED.set(w.confirmed)
        WAIT_SECONDS.observe(w.seconds)
        if w.confirmed < wanted:
            UNCONFIRMED.inc()

    store.on_wait = waited


def _serve_topics(args: argparse.Namespace, kafka: KafkaSettings, start: Startup) -> TopicLimits:
    """serve's topics: wait for the input topic (never made here: a typo must not become a
    topic), make the output and dead-letter topics when asked, and learn the largest
    record each takes (the sink fits its records to them)."""
    import logging

    from .stream.kafka import TopicLimits, Topics

    log = logging.getLogger("neardup.serve")
    name = args.input_topic

    def input_topic() -> Any:
        with Topics(kafka) as topics:
            found = topics.describe([name])
            if name not in found:
                raise BackendUnavailable(
                    topics.missing(name, "input topic")
                    + ": create it (e.g. `neardup produce FILE --partitions N`)"
                )
            return found[name]

    source = start.wait(f"the input topic {name!r}", input_topic)
    if source.max_message_bytes is not None and source.max_message_bytes < args.max_bytes:
        log.warning(
            "the input topic %r takes records of at most %s bytes (its max.message.bytes), "
            "less than --max-bytes %s: larger records cannot reach serve (raise the topic's "
            "max.message.bytes, or give produce --max-bytes when it creates the topic)",
            name,
            f"{source.max_message_bytes:,}",
            f"{args.max_bytes:,}",
        )
    outputs = {"output topic": args.output_topic, "dead-letter topic": args.dead_letter_topic}
    partitions = args.topic_partitions or source.partitions

    def output_topics() -> TopicLimits:
        with Topics(kafka) as topics:
            found = topics.describe(outputs.values())
            missing = {role: t for role, t in outputs.items() if t not in found}
            if missing and not args.create_topics:
                raise ConfigError(
                    "; ".join(topics.missing(t, role) for role, t in missing.items())
                    + " (--no-create-topics: create them, or let serve do it)"
                )
            for topic in topics.create({t: partitions for t in missing.values()}):
                log.info(
                    "created topic %r with %d partition(s)%s",
                    topic,
                    partitions,
                    "" if args.topic_partitions else " (as many as the input topic)",
                )
            return TopicLimits(kafka, outputs.values())

    return start.wait(f"Kafka at {kafka.bootstrap_servers}", output_topics)


def _produce(args: argparse.Namespace) -> int:
    from .records import CUT
    from .stream.files import input_label, open_input, read_lines
    from .stream.kafka import BROKER_DEFAULT_MAX_MESSAGE, Producer, Topics

    kafka = _kafka_settings(args)
    start = _kafka_start(args, kafka)
    topic = args.input_topic

    def find_or_create() -> int:
        """The topic's max.message.bytes, once it exists."""
        with Topics(kafka) as topics:
            found = topics.describe([topic])
            if topic not in found:
                if not args.partitions:
                    raise ConfigError(
                        topics.missing(topic, "topic") + ": give --partitions N to create it"
                    )
                # room for a record of --max-bytes with its key and headers
                limit = args.max_bytes + 64 * 1024
                topics.create({topic: args.partitions}, {"max.message.bytes": str(limit)})
                print(
                    f"neardup: created topic {topic!r} with {args.partitions} partition(s), "
                    f"taking records of up to {limit:,} bytes",
                    file=sys.stderr,
                )
                found = topics.describe([topic])
            elif args.partitions and found[topic].partitions != args.partitions:
                print(
                    f"neardup: topic {topic!r} exists with {found[topic].partitions} "
                    "partition(s): --partitions only shapes a new topic",
                    file=sys.stderr,
                )
            return found[topic].max_message_bytes or BROKER_DEFAULT_MAX_MESSAGE

    limit = start.wait(f"Kafka at {kafka.bootstrap_servers}", find_or_create)
    producer = Producer(kafka, topic, limit)
    _waiting_on_a_terminal(args)
    progress = _progress(args)
    lines = 0
    try:
        with open_input(args.input) as stream:
            # a line longer than the topic takes is not read whole only to be refused
            for raw, where in read_lines(stream, input_label(args.input), limit):
                if CUT in where:
                    producer.refuse(where, cast(int, where[CUT]))
                else:
                    producer.send(raw, where)
                lines += 1
                if progress is not None:
                    progress.update()
    finally:
        if progress is not None:
            progress.close()
        producer.close()
    refused = sorted(producer.refused, key=lambda r: str(r.line).zfill(12))
    if not refused:
        print(f"neardup: {producer.sent} records sent to {topic}", file=sys.stderr)
        return 0
    print(
        f"neardup: {producer.sent} of {lines} records sent to {topic}; {len(refused)} not sent:",
        file=sys.stderr,
    )
    for r in refused[:SHOWN]:
        print(f"  {r}", file=sys.stderr)
    if len(refused) > SHOWN:
        print(f"  ... and {len(refused) - SHOWN} more", file=sys.stderr)
    return 1


SHOWN = 20  # refused records named one by one; the rest are counted


def _tail(args: argparse.Namespace) -> int:
    from .stream.kafka import Topics, as_json, tail

    idle = None if args.idle is None else int(args.idle * 1000)
    kafka = _kafka_settings(args)
    start = _kafka_start(args, kafka)
    topic = args.dead_letter_topic if args.dead_letters else args.output_topic

    def exists() -> None:
        with Topics(kafka) as topics:
            if topic not in topics.describe([topic]):
                raise ConfigError(topics.missing(topic, "topic"))

    start.wait(f"Kafka at {kafka.bootstrap_servers}", exists)
    try:
        for record in tail(kafka, topic, args.from_beginning, idle, args.read_committed):
            if args.format == "json":
                sys.stdout.write(json.dumps(as_json(record), ensure_ascii=False) + "\n")
            elif record.value is not None:  # a tombstone has no value to show
                sys.stdout.write(record.value.decode("utf-8", "replace") + "\n")
            sys.stdout.flush()
    except BrokenPipeError:
        pass
    return 0


def _bench(args: argparse.Namespace) -> int:
    from .bench import main

    args.kafka = _kafka_settings(args)
    args.redis = _redis_settings(args)
    _kafka_start(args, args.kafka)
    return main(args)


def _plan(args: argparse.Namespace) -> int:
    import time

    from . import plan
    from .blocks import BlockScheme
    from .settings import DEFAULT_SCHEME

    radius = BlockScheme.parse(DEFAULT_SCHEME).k if args.radius is None else args.radius
    memory = None if args.memory is None else plan.parse_bytes(args.memory)
    pairs, sample = None, None
    if args.sample is not None:
        started = time.monotonic()
        bar: Any = None

        def progress(records: int) -> None:  # a bar once the sample takes over a second
            nonlocal bar
            if bar is None and time.monotonic() - started > 1:
                from tqdm import tqdm

                bar = tqdm(unit=" records", file=sys.stderr, desc="fingerprinting --sample")
            if bar is not None:
                bar.update(records)

        try:
            pairs, sample = plan.read_sample(args.sample, progress)
        finally:
            if bar is not None:
                bar.close()
    made = plan.plan(
        args.docs, radius, args.max_bucket, memory, DEFAULT_SCHEME, pairs, window=args.text_window
    )
    made.sample = sample
    if args.format == "json":
        print(json.dumps(made.to_dict()))
    else:
        sys.stdout.write(plan.render(made))
    return 0


def _index(args: argparse.Namespace) -> int:
    """The maintenance commands; each opens the index with the settings it was made with."""
    from .index.redis import RedisIndex, maintenance
    from .index.redis.connect import check, refusals

    redis_at = _redis_settings(args)
    with refusals(redis_at):
        client = redis_at.client()
        check(client, redis_at)
        if args.action == "import":
            return _index_import(args, client)
        if args.action == "migrate":
            from .index.redis.migrate import migrate

            migrate(client, args.index)
            return 0
        index = RedisIndex.open(client, args.index)
        index.store.replication = redis_at.replication
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
            removed = maintenance.sweep(index)
            print(f"neardup: swept {removed} expired entries", file=sys.stderr)
    return 0


def _index_stats(args: argparse.Namespace, index: Any) -> None:
    from .index import DEFAULT_MAX_BUCKET
    from .index.redis import maintenance
    from .plan import plan_lines

    meta = index.meta()
    stats = {"index": args.index, **meta, **index.stats()}
    if planned := plan_lines(meta, stats, DEFAULT_MAX_BUCKET):
        stats["plan"] = planned
    exact = args.memory == "exact"
    progress = _progress(args, unit=" keys") if exact else None
    try:
        memory = maintenance.memory(index, exact, progress.update if progress is not None else None)
    finally:
        if progress is not None:
            progress.close()
    replication = index.store.replicas()
    print(json.dumps({**stats, "memory": memory.to_dict(), "replication": replication}))


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
    from .index.redis import maintenance
    from .stream.files import open_output

    out = open_output(args.output, sys.stdout)
    progress = _progress(args)
    count = 0
    try:
        header = {"neardup_index_export": EXPORT_FORMAT, "name": args.index, **index.meta()}
        out.write(json.dumps(header) + "\n")
        for record in maintenance.documents(index):
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
    from .index.redis import RedisIndex, maintenance
    from .stream.files import input_label, open_input, read_lines

    stream = open_input(args.input)
    # unbounded: an export's lines are the index's own records, none of which may be lost
    lines = read_lines(stream, input_label(args.input))
    try:
        first = next(lines, None)
        header = json.loads(first[0]) if first else {}
        if not isinstance(header, dict) or header.get("neardup_index_export") != EXPORT_FORMAT:
            raise ConfigError(f"{args.input}: not an export of `neardup index export`")
        name = args.index or header["name"]
        index = RedisIndex.from_export(client, name, header)
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
            count = maintenance.restore(index, records())
        finally:
            if progress is not None:
                progress.close()
    finally:
        stream.close()
    print(f"neardup: imported {count} records into index {name!r}", file=sys.stderr)
    return 0


def _progress(
    args: argparse.Namespace,
    smoothing: float = 0.3,
    unit: str = " records",
    desc: str | None = None,
    total: int | None = None,
) -> Any:
    """A progress bar on stderr, or None: --progress/--no-progress, else when stderr is a
    terminal."""
    if not (sys.stderr.isatty() if args.progress is None else args.progress):
        return None
    from tqdm import tqdm

    return tqdm(unit=unit, file=sys.stderr, smoothing=smoothing, desc=desc, total=total)


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "detect": _detect,
    "fit-idf": _fit_idf,
    "eval": _eval,
    "review": _review,
    "extract": _extract,
    "explain": _explain,
    "serve": _serve,
    "produce": _produce,
    "index": _index,
    "tail": _tail,
    "bench": _bench,
    "plan": _plan,
}
