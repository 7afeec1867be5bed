"""detector.options: the one table of every command's options (its invariants, and that
the parser made from it has every option the hand-written parser had, with the same
default), and how the config file and the environment are read, checked and ranked."""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from detector import options, records, vectors, verify
from detector.cli import config_file, parser
from detector.errors import ConfigError
from detector.features import FeatureConfig
from detector.index import DEFAULT_MAX_BUCKET
from detector.index.redis.connect import RedisSettings
from detector.options import (
    CONFIGURABLE,
    OPTIONS,
    Config,
    Option,
    Range,
    read_environ,
    read_file,
)
from detector.settings import DEFAULT_SCHEME, DEFAULT_THRESHOLD, EngineSettings

from .helpers import ROOT, run_module

PASSWORD = "s3cret-Pa55-9f2c"  # distinctive, so a leak cannot hide among other words

# The options of the hand-written parser that the table replaced, extracted from it (no
# NEARDUP_* set) before the change: (command, flags, default, type, nargs, choices).
OLD_OPTIONS: list[tuple[str, tuple[str, ...], Any, str, Any, Any]] = [
    ("detect", ("input",), "-", "str", "?", None),
    ("detect", ("-o", "--output"), None, "str", None, None),
    ("detect", ("--errors",), None, "str", None, None),
    ("detect", ("--batch-size",), 512, "int", None, None),
    ("detect", ("--index-name",), "default", "str", None, None),
    ("detect", ("--workers",), 0, "int", None, None),
    ("detect", ("--progress", "--no-progress"), None, "bool", 0, None),
    ("detect", ("--features",), "words", "str", None, ("words", "shingles")),
    ("detect", ("--shingle-size",), 2, "int", None, None),
    ("detect", ("--cjk-ngram",), 2, "int", None, None),
    ("detect", ("--idf",), None, "str", None, None),
    ("detect", ("--scheme",), "k6-b8", "str", None, None),
    ("detect", ("--threshold",), 0.8, "float", None, None),
    ("detect", ("--literal-shingle",), 5, "int", None, None),
    ("detect", ("--max-candidates",), 32, "int", None, None),
    ("detect", ("--vector-seed",), 0, "int", None, None),
    ("detect", ("--max-bytes",), 4194304, "int", None, None),
    ("detect", ("--max-tokens",), 200000, "int", None, None),
    ("detect", ("--literal-memory",), 268435456, "int", None, None),
    ("fit-idf", ("corpus",), None, "str", None, None),
    ("fit-idf", ("-o", "--output"), None, "str", None, None),
    ("fit-idf", ("--min-df",), 2, "int", None, None),
    ("eval", ("decisions",), None, "str", None, None),
    ("eval", ("truth",), None, "str", None, None),
    ("eval", ("--threshold",), None, "float", None, None),
    ("eval", ("--report",), None, "str", None, None),
    ("eval", ("--json",), False, "bool", 0, None),
    ("serve", ("--bootstrap-servers",), "127.0.0.1:9092", "str", None, None),
    (
        "serve",
        ("--kafka-security-protocol",),
        "PLAINTEXT",
        "str",
        None,
        ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"),
    ),
    (
        "serve",
        ("--kafka-sasl-mechanism",),
        None,
        "str",
        None,
        ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
    ),
    ("serve", ("--kafka-username",), None, "str", None, None),
    ("serve", ("--kafka-password",), None, "str", None, None),
    ("serve", ("--kafka-password-file",), None, "str", None, None),
    ("serve", ("--kafka-ca-file",), None, "str", None, None),
    ("serve", ("--kafka-cert-file",), None, "str", None, None),
    ("serve", ("--kafka-key-file",), None, "str", None, None),
    ("serve", ("--redis-url",), "redis://127.0.0.1:6379/0", "str", None, None),
    ("serve", ("--redis-cluster", "--no-redis-cluster"), False, "bool", 0, None),
    ("serve", ("--redis-username",), None, "str", None, None),
    ("serve", ("--redis-password",), None, "str", None, None),
    ("serve", ("--redis-password-file",), None, "str", None, None),
    ("serve", ("--redis-ca-file",), None, "str", None, None),
    ("serve", ("--redis-cert-file",), None, "str", None, None),
    ("serve", ("--redis-key-file",), None, "str", None, None),
    ("serve", ("--input-topic",), "documents", "str", None, None),
    ("serve", ("--output-topic",), "decisions", "str", None, None),
    ("serve", ("--dead-letter-topic",), "documents.dead-letter", "str", None, None),
    ("serve", ("--group",), "neardup", "str", None, None),
    ("serve", ("--index",), "default", "str", None, None),
    ("serve", ("--batch-size",), 256, "int", None, None),
    ("serve", ("--text-ttl",), 0, "int", None, None),
    ("serve", ("--decision-ttl",), 0, "int", None, None),
    ("serve", ("--retention",), 0, "int", None, None),
    ("serve", ("--max-bucket",), 1024, "int", None, None),
    ("serve", ("--metrics-port",), 9464, "int", None, None),
    ("serve", ("--metrics-host",), "127.0.0.1", "str", None, None),
    ("serve", ("--features",), "words", "str", None, ("words", "shingles")),
    ("serve", ("--shingle-size",), 2, "int", None, None),
    ("serve", ("--cjk-ngram",), 2, "int", None, None),
    ("serve", ("--idf",), None, "str", None, None),
    ("serve", ("--scheme",), "k6-b8", "str", None, None),
    ("serve", ("--threshold",), 0.8, "float", None, None),
    ("serve", ("--literal-shingle",), 5, "int", None, None),
    ("serve", ("--max-candidates",), 32, "int", None, None),
    ("serve", ("--vector-seed",), 0, "int", None, None),
    ("serve", ("--max-bytes",), 4194304, "int", None, None),
    ("serve", ("--max-tokens",), 200000, "int", None, None),
    ("serve", ("--literal-memory",), 268435456, "int", None, None),
    ("produce", ("input",), "-", "str", "?", None),
    ("produce", ("--topic",), "documents", "str", None, None),
    ("produce", ("--partitions",), None, "int", None, None),
    ("produce", ("--progress", "--no-progress"), None, "bool", 0, None),
    ("produce", ("--bootstrap-servers",), "127.0.0.1:9092", "str", None, None),
    (
        "produce",
        ("--kafka-security-protocol",),
        "PLAINTEXT",
        "str",
        None,
        ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"),
    ),
    (
        "produce",
        ("--kafka-sasl-mechanism",),
        None,
        "str",
        None,
        ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
    ),
    ("produce", ("--kafka-username",), None, "str", None, None),
    ("produce", ("--kafka-password",), None, "str", None, None),
    ("produce", ("--kafka-password-file",), None, "str", None, None),
    ("produce", ("--kafka-ca-file",), None, "str", None, None),
    ("produce", ("--kafka-cert-file",), None, "str", None, None),
    ("produce", ("--kafka-key-file",), None, "str", None, None),
    ("bench", ("corpus",), None, "str", None, None),
    ("bench", ("--consumers",), [1, 2], "int", "+", None),
    ("bench", ("--latency-seconds",), 20, "float", None, None),
    ("bench", ("--memory-docs",), 1000000, "int", None, None),
    ("bench", ("--scheme",), "k6-b8", "str", None, None),
    ("bench", ("--batch-size",), 256, "int", None, None),
    ("bench", ("--redis-url",), "redis://127.0.0.1:6379/0", "str", None, None),
    ("bench", ("--redis-cluster", "--no-redis-cluster"), False, "bool", 0, None),
    ("bench", ("--redis-username",), None, "str", None, None),
    ("bench", ("--redis-password",), None, "str", None, None),
    ("bench", ("--redis-password-file",), None, "str", None, None),
    ("bench", ("--redis-ca-file",), None, "str", None, None),
    ("bench", ("--redis-cert-file",), None, "str", None, None),
    ("bench", ("--redis-key-file",), None, "str", None, None),
    ("bench", ("--bootstrap-servers",), "127.0.0.1:9092", "str", None, None),
    (
        "bench",
        ("--kafka-security-protocol",),
        "PLAINTEXT",
        "str",
        None,
        ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"),
    ),
    (
        "bench",
        ("--kafka-sasl-mechanism",),
        None,
        "str",
        None,
        ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
    ),
    ("bench", ("--kafka-username",), None, "str", None, None),
    ("bench", ("--kafka-password",), None, "str", None, None),
    ("bench", ("--kafka-password-file",), None, "str", None, None),
    ("bench", ("--kafka-ca-file",), None, "str", None, None),
    ("bench", ("--kafka-cert-file",), None, "str", None, None),
    ("bench", ("--kafka-key-file",), None, "str", None, None),
    ("tail", ("--topic",), "decisions", "str", None, None),
    ("tail", ("--from-beginning",), False, "bool", 0, None),
    ("tail", ("--idle",), None, "float", None, None),
    ("tail", ("--bootstrap-servers",), "127.0.0.1:9092", "str", None, None),
    (
        "tail",
        ("--kafka-security-protocol",),
        "PLAINTEXT",
        "str",
        None,
        ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"),
    ),
    (
        "tail",
        ("--kafka-sasl-mechanism",),
        None,
        "str",
        None,
        ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
    ),
    ("tail", ("--kafka-username",), None, "str", None, None),
    ("tail", ("--kafka-password",), None, "str", None, None),
    ("tail", ("--kafka-password-file",), None, "str", None, None),
    ("tail", ("--kafka-ca-file",), None, "str", None, None),
    ("tail", ("--kafka-cert-file",), None, "str", None, None),
    ("tail", ("--kafka-key-file",), None, "str", None, None),
    ("index stats", ("--index",), "default", "str", None, None),
    ("index stats", ("--redis-url",), "redis://127.0.0.1:6379/0", "str", None, None),
    ("index stats", ("--redis-cluster", "--no-redis-cluster"), False, "bool", 0, None),
    ("index stats", ("--redis-username",), None, "str", None, None),
    ("index stats", ("--redis-password",), None, "str", None, None),
    ("index stats", ("--redis-password-file",), None, "str", None, None),
    ("index stats", ("--redis-ca-file",), None, "str", None, None),
    ("index stats", ("--redis-cert-file",), None, "str", None, None),
    ("index stats", ("--redis-key-file",), None, "str", None, None),
    ("index stats", ("--progress", "--no-progress"), None, "bool", 0, None),
    ("index stats", ("--memory",), "sample", "str", None, ("sample", "exact")),
    ("index export", ("-o", "--output"), None, "str", None, None),
    ("index export", ("--index",), "default", "str", None, None),
    ("index export", ("--redis-url",), "redis://127.0.0.1:6379/0", "str", None, None),
    ("index export", ("--redis-cluster", "--no-redis-cluster"), False, "bool", 0, None),
    ("index export", ("--redis-username",), None, "str", None, None),
    ("index export", ("--redis-password",), None, "str", None, None),
    ("index export", ("--redis-password-file",), None, "str", None, None),
    ("index export", ("--redis-ca-file",), None, "str", None, None),
    ("index export", ("--redis-cert-file",), None, "str", None, None),
    ("index export", ("--redis-key-file",), None, "str", None, None),
    ("index export", ("--progress", "--no-progress"), None, "bool", 0, None),
    ("index import", ("input",), None, "str", None, None),
    ("index import", ("--index",), None, "str", None, None),
    ("index import", ("--redis-url",), "redis://127.0.0.1:6379/0", "str", None, None),
    ("index import", ("--redis-cluster", "--no-redis-cluster"), False, "bool", 0, None),
    ("index import", ("--redis-username",), None, "str", None, None),
    ("index import", ("--redis-password",), None, "str", None, None),
    ("index import", ("--redis-password-file",), None, "str", None, None),
    ("index import", ("--redis-ca-file",), None, "str", None, None),
    ("index import", ("--redis-cert-file",), None, "str", None, None),
    ("index import", ("--redis-key-file",), None, "str", None, None),
    ("index import", ("--progress", "--no-progress"), None, "bool", 0, None),
    ("index delete", ("ids",), None, "str", "*", None),
    ("index delete", ("--ids-file",), None, "str", None, None),
    ("index delete", ("--index",), "default", "str", None, None),
    ("index delete", ("--redis-url",), "redis://127.0.0.1:6379/0", "str", None, None),
    ("index delete", ("--redis-cluster", "--no-redis-cluster"), False, "bool", 0, None),
    ("index delete", ("--redis-username",), None, "str", None, None),
    ("index delete", ("--redis-password",), None, "str", None, None),
    ("index delete", ("--redis-password-file",), None, "str", None, None),
    ("index delete", ("--redis-ca-file",), None, "str", None, None),
    ("index delete", ("--redis-cert-file",), None, "str", None, None),
    ("index delete", ("--redis-key-file",), None, "str", None, None),
    ("index sweep", ("--index",), "default", "str", None, None),
    ("index sweep", ("--redis-url",), "redis://127.0.0.1:6379/0", "str", None, None),
    ("index sweep", ("--redis-cluster", "--no-redis-cluster"), False, "bool", 0, None),
    ("index sweep", ("--redis-username",), None, "str", None, None),
    ("index sweep", ("--redis-password",), None, "str", None, None),
    ("index sweep", ("--redis-password-file",), None, "str", None, None),
    ("index sweep", ("--redis-ca-file",), None, "str", None, None),
    ("index sweep", ("--redis-cert-file",), None, "str", None, None),
    ("index sweep", ("--redis-key-file",), None, "str", None, None),
]

# flags the table renamed: the old flag is an alias, the value goes by the new name
RENAMED = {
    ("detect", "--index-name"): "index",
    ("produce", "--topic"): "input_topic",
    ("tail", "--topic"): "output_topic",
}
TYPES: dict[str, tuple[Any, ...]] = {"str": (None, str), "int": (int,), "float": (float,)}


def subparser(command: str, config: Config | None = None) -> argparse.ArgumentParser:
    p = parser(Config() if config is None else config)
    for word in command.split():
        sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
        p = sub.choices[word]
    return p


# --------------------------------------------------------------------------- the table


def test_every_option_of_the_old_parser_is_there_with_its_default() -> None:
    for command, flags, default, kind, nargs, choices in OLD_OPTIONS:
        where = (command, flags)
        positional = not flags[0].startswith("-")
        found = [
            a
            for a in subparser(command)._actions
            if (a.dest == flags[0] if positional else set(flags) <= set(a.option_strings))
        ]
        assert len(found) == 1, where
        action = found[0]
        if (command, flags[-1]) in RENAMED:
            assert action.dest == RENAMED[(command, flags[-1])], where
        elif not positional:
            long = next(f for f in flags if f.startswith("--"))
            assert action.dest == long[2:].replace("-", "_"), where
        assert action.default == default, (where, action.default)
        if kind == "bool":
            assert action.nargs == 0, where
        else:
            assert action.type in TYPES[kind] and action.nargs == nargs, where
        assert (tuple(action.choices) if action.choices else None) == choices, where


def test_an_option_name_has_one_kind_and_one_set_of_choices() -> None:
    """One NEARDUP_<OPTION>, one file key: every row of a name agrees on what it takes.
    Command-line-only rows have neither, so one may differ from another of its name (plan's
    --memory is bytes, index stats' a choice), never from a configurable row."""
    by_name: dict[str, set[tuple[str, tuple[str, ...]]]] = {}
    for row in OPTIONS:
        if row.configurable:
            by_name.setdefault(row.dest, set()).add((row.kind, row.choices))
    for row in OPTIONS:
        if not row.configurable and row.dest in by_name:
            by_name[row.dest].add((row.kind, row.choices))
    assert {name: kinds for name, kinds in by_name.items() if len(kinds) > 1} == {}


def test_names_are_regular() -> None:
    for row in OPTIONS:
        assert row.variable == "NEARDUP_" + row.name.upper().replace("-", "_")
        assert row.name == row.name.lower() and "_" not in row.name
        assert row.commands and all(c in {c.name for c in options.COMMANDS} for c in row.commands)
        if row.positional:
            assert not row.configurable and not row.aliases
    for command in {c for row in OPTIONS for c in row.commands}:
        flags = [f for row in options.of(command) for f in row.flags]
        assert len(flags) == len(set(flags)), command
        dests = [row.dest for row in options.of(command)]
        assert len(dests) == len(set(dests)), command
    # an alias is a flag only: no option, variable or key of that name
    assert not set(options.ALIASES) & {row.dest for row in OPTIONS}
    assert dict(options.ALIASES) == {
        "index_name": ("index",),
        "topic": ("input_topic", "output_topic"),
    }


def test_per_invocation_options_are_command_line_only() -> None:
    only = {row.dest for row in OPTIONS if not row.configurable}
    assert only == {
        *("input", "output", "errors", "progress", "corpus", "decisions", "truth", "ids"),
        *("partitions", "from_beginning", "read_committed", "idle", "consumers"),
        *("latency_seconds", "latency_rate", "memory_docs", "min_df", "threshold", "report"),
        *("json", "ids_file", "id", "measure", "order", "k", "dead_letters", "format"),
        *("memory", "docs", "radius", "sample", "text_window", "profile", "color"),
        *("group_by", "top"),
    }
    # threshold: eval's is its own (the truth's cut), not the engine's; text_window: plan's
    # is the window it models, not one it keeps
    assert [
        row.commands for row in OPTIONS if row.dest == "threshold" and not row.configurable
    ] == [("eval",)]
    assert [
        row.commands for row in OPTIONS if row.dest == "text_window" and not row.configurable
    ] == [("plan",)]


def test_defaults_are_of_their_kind() -> None:
    for row in OPTIONS:
        value = row.default
        values = value if isinstance(value, tuple) else (value,)
        for v in values:
            if v is None:
                continue
            if row.kind == "int":
                assert type(v) is int, row.name
            elif row.kind == "float":
                assert type(v) is float, row.name
            elif row.kind == "bool":
                assert type(v) is bool, row.name
            elif row.kind == "choice":
                assert v in row.choices, row.name
            else:
                assert type(v) is str, row.name


def test_options_with_several_rows_differ_only_per_command() -> None:
    assert options.default("batch-size", "detect") == 512
    assert options.default("batch-size", "serve") == options.default("batch-size", "bench") == 256
    assert options.default("index", "index import") is None  # the name in the export file
    config = Config.load({"NEARDUP_BATCH_SIZE": "9", "NEARDUP_INDEX": "ix"})
    for command in ("detect", "serve", "bench"):
        assert config.value("batch-size", command) == 9
    for command in ("detect", "serve", *options.INDEX_ACTIONS):
        assert config.value("index", command) == "ix"


def test_engine_settings_take_their_defaults_from_the_table() -> None:
    engine = [row for row in OPTIONS if row.group == "engine"]
    assert [f.name for f in dataclasses.fields(EngineSettings)] == [r.dest for r in engine]
    assert dataclasses.asdict(EngineSettings()) == {r.dest: r.default for r in engine}
    assert (DEFAULT_SCHEME, DEFAULT_THRESHOLD) == ("k6-b8", 0.8)
    assert options.default("scheme", "bench") == DEFAULT_SCHEME
    # the limits the engine's own modules define and use
    assert options.default("literal-memory") == verify.DEFAULT_CACHE_BYTES
    assert options.default("max-bytes") == records.DEFAULT_MAX_BYTES
    assert options.default("max-tokens") == records.DEFAULT_MAX_TOKENS
    assert options.default("max-bucket", "serve") == DEFAULT_MAX_BUCKET
    assert options.default("cosine") == vectors.DEFAULT_COSINE
    assert options.default("vector-recall") == vectors.DEFAULT_RECALL


def test_detect_args_make_the_default_engine_settings() -> None:
    from detector.cli import _settings

    assert _settings(parser(Config()).parse_args(["detect"])) == EngineSettings()


def test_the_options_module_imports_nothing_heavy() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, detector.options; "
            "print(sorted({'numpy', 'kafka', 'redis', 'xxhash'} & set(sys.modules)))",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# --------------------------------------------------------------------------- --help


def test_help_names_each_configurable_options_variable() -> None:
    for command in {c for row in OPTIONS for c in row.commands}:
        text = " ".join(subparser(command).format_help().split())
        for row in options.of(command):
            assert row.flags[-1 if row.positional else 0] in text, (command, row.name)
            assert (f"[{row.variable}]" in text) is row.configurable, (command, row.name)


def test_the_help_of_a_secret_shows_no_default() -> None:
    secrets = [row for row in OPTIONS if row.secret]
    assert {row.dest for row in secrets} == {"redis_password", "kafka_password"}
    config = Config(
        {
            **{row.dest: PASSWORD for row in secrets},
            "redis_url": f"redis://neardup:{PASSWORD}@h:6379/0",
        }
    )
    for command in ("serve", "bench", "tail", "produce", "index stats"):
        text = subparser(command, config).format_help()
        assert PASSWORD not in text, command
        if "--redis-url" in text:
            assert "redis://neardup:***@h:6379/0" in " ".join(text.split())


# --------------------------------------------------------------------------- --config


@pytest.mark.parametrize(
    ("argv", "path", "rest"),
    [
        (["--config", "f.toml", "detect", "x"], "f.toml", ["detect", "x"]),
        (["--config=f.toml", "detect", "x"], "f.toml", ["detect", "x"]),
        (["detect", "x", "--config", "f.toml", "-o", "y"], "f.toml", ["detect", "x", "-o", "y"]),
        (["detect", "--config=f.toml", "x"], "f.toml", ["detect", "x"]),
        (["index", "stats", "--config", "f.toml"], "f.toml", ["index", "stats"]),
        (["detect", "x"], None, ["detect", "x"]),
        (["detect", "--", "--config", "f"], None, ["detect", "--", "--config", "f"]),
        (["detect", "--conf", "f"], None, ["detect", "--conf", "f"]),  # the parser refuses it
        (["--config=", "detect"], "", ["detect"]),  # no file, even with NEARDUP_CONFIG
    ],
)
def test_config_is_taken_from_anywhere_in_both_forms(
    argv: list[str], path: str | None, rest: list[str]
) -> None:
    assert config_file(argv) == (path, rest)


def test_an_empty_config_option_turns_the_variable_off(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text("threshold = 0.5\n")
    environ = {"NEARDUP_CONFIG": str(config)}
    assert Config.load(environ).values == {"threshold": 0.5}
    assert Config.load(environ, "").values == {}
    other = tmp_path / "other.toml"
    other.write_text("threshold = 0.6\n")
    assert Config.load(environ, str(other)).values == {"threshold": 0.6}  # --config wins


# --------------------------------------------------------------------------- precedence


def test_command_line_over_environment_over_file_over_default(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('threshold = 0.5\nbatch-size = 7\n[neardup]\nscheme = "k7-b4-m1"\n')
    both = Config.load({"NEARDUP_THRESHOLD": "0.6"}, str(config))
    args = parser(both).parse_args(["detect"])
    assert (args.threshold, args.batch_size, args.scheme, args.workers) == (0.6, 7, "k7-b4-m1", 0)
    args = parser(both).parse_args(["detect", "--threshold", "0.7", "--batch-size", "3"])
    assert (args.threshold, args.batch_size) == (0.7, 3)
    assert parser(Config.load({}, str(config))).parse_args(["detect"]).threshold == 0.5
    assert parser(Config.load({})).parse_args(["detect"]).threshold == 0.8
    # a bool: the file's true, the environment's no, the command line's --redis-cluster
    config.write_text("redis_cluster = true\n")
    assert parser(Config.load({}, str(config))).parse_args(["serve"]).redis_cluster is True
    off = Config.load({"NEARDUP_REDIS_CLUSTER": "no"}, str(config))
    assert parser(off).parse_args(["serve"]).redis_cluster is False
    assert parser(off).parse_args(["serve", "--redis-cluster"]).redis_cluster is True


def test_eval_threshold_is_not_the_engines(tmp_path: Path) -> None:
    config = Config.load({"NEARDUP_THRESHOLD": "0.9"})
    assert parser(config).parse_args(["eval", "d", "t"]).threshold is None  # the measure's
    assert parser(config).parse_args(["detect"]).threshold == 0.9


# --------------------------------------------------------------------------- the environment


@pytest.mark.parametrize(
    ("variable", "raw", "value"),
    [
        ("NEARDUP_REDIS_CLUSTER", "1", True),
        ("NEARDUP_REDIS_CLUSTER", " Yes ", True),
        ("NEARDUP_REDIS_CLUSTER", "ON", True),
        ("NEARDUP_REDIS_CLUSTER", "true", True),
        ("NEARDUP_REDIS_CLUSTER", "0", False),
        ("NEARDUP_REDIS_CLUSTER", "no", False),
        ("NEARDUP_REDIS_CLUSTER", "Off", False),
        ("NEARDUP_REDIS_CLUSTER", "FALSE", False),
        ("NEARDUP_BATCH_SIZE", " 64 ", 64),
        ("NEARDUP_VECTOR_SEED", "+3", 3),
        ("NEARDUP_THRESHOLD", "1", 1.0),
        ("NEARDUP_THRESHOLD", "0.85", 0.85),
        ("NEARDUP_KAFKA_SECURITY_PROTOCOL", "SASL_SSL", "SASL_SSL"),
        ("NEARDUP_BOOTSTRAP_SERVERS", "a:1,b:2", "a:1,b:2"),
    ],
)
def test_environment_values_are_parsed_by_type(variable: str, raw: str, value: Any) -> None:
    dest = variable.removeprefix("NEARDUP_").lower()
    assert read_environ({variable: raw}) == {dest: value}
    assert type(read_environ({variable: raw})[dest]) is type(value)


def test_empty_variables_are_unset_and_others_are_not_neardups() -> None:
    """RedisSettings.env() and KafkaSettings.env() set every variable, empty when unused."""
    environ = {
        "NEARDUP_REDIS_URL": "",
        "NEARDUP_BATCH_SIZE": "",
        "NEARDUP_REDIS_CLUSTER": "",
        "NEARDUP_TRESHOLD": "",
        "NEARDUP_STACK_REDIS_PASSWORD": PASSWORD,
        "NEARDUP_STACK_ANYTHING": "x",
        "NEARDUP_CONFIG": "",
        "PATH": "/bin",
        "neardup_threshold": "x",
    }
    assert read_environ(environ) == {}
    args = parser(Config.load(environ)).parse_args(["serve"])
    assert (args.redis_url, args.batch_size, args.redis_cluster) == (
        "redis://127.0.0.1:6379/0",
        256,
        False,
    )


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"NEARDUP_TRESHOLD": "1"}, "variable NEARDUP_TRESHOLD (did you mean NEARDUP_THRESHOLD?)"),
        ({"NEARDUP_REDIS_URI": "redis://h"}, "(did you mean NEARDUP_REDIS_URL?)"),
        ({"NEARDUP_WHATEVER": "1"}, "unknown variable NEARDUP_WHATEVER"),
        ({"NEARDUP_MIN_DF": "3"}, "NEARDUP_MIN_DF: --min-df is given on the command line only"),
        ({"NEARDUP_INPUT": "x"}, "NEARDUP_INPUT: the input argument is given on the command line"),
        ({"NEARDUP_METRICS_PORT": "http"}, "NEARDUP_METRICS_PORT='http': expected a whole number"),
        ({"NEARDUP_THRESHOLD": "nan"}, "NEARDUP_THRESHOLD='nan': expected a number"),
        ({"NEARDUP_KAFKA_SECURITY_PROTOCOL": "ssl"}, "expected one of PLAINTEXT, SSL"),
    ],
)  # fmt: skip
def test_bad_variables(environ: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        read_environ(environ)
    assert str(caught.value).startswith("environment: ")
    assert message in str(caught.value)


# --------------------------------------------------------------------------- the file


def test_file_values_are_checked_by_type(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text(
        'scheme = "manku-4"\nthreshold = 1\nmax-candidates = 8\nredis-cluster = false\n'
        'kafka_security_protocol = "SSL"\nredis_password = ""\n'
        "[neardup]\nliteral_shingle = 4\n"
    )
    assert read_file(str(config)) == {
        "scheme": "manku-4",
        "threshold": 1.0,
        "max_candidates": 8,
        "redis_cluster": False,
        "kafka_security_protocol": "SSL",
        "redis_password": "",
        "literal_shingle": 4,
    }
    assert type(read_file(str(config))["threshold"]) is float


@pytest.mark.parametrize(
    "body",
    [
        f'redis_password = ["{PASSWORD}"]\n',
        f'kafka-password = {{ value = "{PASSWORD}" }}\n',
        f'redis_url = ["redis://u:{PASSWORD}@h/0"]\n',
    ],
)
def test_a_bad_secret_in_the_file_is_not_shown(tmp_path: Path, body: str) -> None:
    config = tmp_path / "c.toml"
    config.write_text(body)
    with pytest.raises(ConfigError) as caught:
        read_file(str(config))
    assert str(config) in str(caught.value)
    assert PASSWORD not in str(caught.value)


def test_the_same_key_at_the_top_and_in_neardup_is_given_twice(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('scheme = "k6-b8"\n[neardup]\nscheme = "k7-b4-m1"\n')
    with pytest.raises(ConfigError, match="'scheme' is given twice"):
        read_file(str(config))


def test_every_configurable_option_is_a_key_and_a_variable(tmp_path: Path) -> None:
    """Each configurable option round-trips through the file and the environment."""
    samples = {"int": (3, "3"), "float": (0.5, "0.5"), "bool": (True, "yes"), "str": ("x", "x")}
    lines, environ, expected = [], {}, {}
    for dest, row in CONFIGURABLE.items():
        if row.kind == "choice":
            value, raw = row.choices[-1], row.choices[-1]
        else:
            value, raw = samples[row.kind]
        if row.problem(value) is not None:  # outside its range or syntax: its default
            value, raw = row.default, str(row.default)
        toml = {True: "true"}.get(value, f'"{value}"' if isinstance(value, str) else str(value))
        lines.append(f"{row.name} = {toml}")
        environ[row.variable] = raw
        expected[dest] = value
    config = tmp_path / "c.toml"
    config.write_text("\n".join(lines) + "\n")
    assert read_file(str(config)) == expected
    assert read_environ(environ) == expected


# --------------------------------------------------------------------------- values checked

NUMBERS = [row for row in OPTIONS if row.kind in ("int", "float")]
# Each string row with a check, with a value it refuses and the check's words
BAD_STRINGS: dict[str, tuple[str, str]] = {
    "scheme": ("k9", "unknown block scheme 'k9': use manku-4"),
    "vector_scheme": ("k3-b3", "block scheme 'k3-b3': need 0 <= k < blocks <= 64"),
    "redis_url": ("127.0.0.1:6379", "has no scheme: write redis://HOST:PORT/DB"),
    "bootstrap_servers": ("h:1,,h:2", "must be host:port, or several separated by commas"),
    "redis_sentinel": ("h:26379,h:0", "must be host:port, or several separated by commas"),
    "input_topic": ("a/b", "must be 1 to 249 of the characters a-z, A-Z, 0-9"),
    "output_topic": ("..", "must be 1 to 249 of the characters a-z, A-Z, 0-9"),
    "dead_letter_topic": ("", "must be 1 to 249 of the characters a-z, A-Z, 0-9"),
    "group": ("my group", "must not be empty, and hold no spaces or control characters"),
    "index": ("a:b", "must be non-empty, without {}:/ or spaces"),
}
# the arguments a command cannot run without, so that its parser gets as far as the option
NEEDED = {
    "fit-idf": ["corpus", "-o", "out"],
    "eval": ["decisions", "truth"],
    "bench": ["corpus"],
    "index import": ["file"],
    "plan": ["--docs", "1"],
    "review": ["decisions", "input", "-o", "page.html"],
}


def _parse(command: str, flag: str, text: str) -> Any:
    """The arguments of `command ... FLAG=TEXT` (with = a value may start with a dash);
    argparse's error as ArgumentError."""
    p = subparser(command)
    p.exit_on_error = False
    return p.parse_args([*NEEDED.get(command, []), f"{flag}={text}"])


def _steps(row: Option) -> list[tuple[float, bool]]:
    """(value, taken) at each bound of a row's range: a closed bound taken and one step
    outside refused; an open bound refused and one step inside taken."""
    assert isinstance(row.check, Range)
    out = []
    for bound, is_open, inward in (
        (row.check.low, row.check.low_open, 1),
        (row.check.high, row.check.high_open, -1),
    ):
        if bound is None:
            continue
        if row.kind == "int":
            step = (int(bound) + inward, int(bound) - inward)
        else:
            step = (
                math.nextafter(bound, inward * math.inf),
                math.nextafter(bound, -inward * math.inf),
            )
        inside, outside = step
        out += [(bound, False), (inside, True)] if is_open else [(bound, True), (outside, False)]
    return out


def test_every_number_has_a_declared_range_and_every_default_is_in_it() -> None:
    """A number without a Range was forgotten: ANY (Range()) is the decision to take all."""
    assert [row.name for row in NUMBERS if not isinstance(row.check, Range)] == []
    for row in OPTIONS:
        assert row.problem(row.default) is None, row.name
    # the configurable strings with a syntax, each tested below (plan's --memory, command
    # line only, in tests/test_plan.py)
    checked = {
        row.dest
        for row in OPTIONS
        if row.kind == "str" and row.check is not None and row.configurable
    }
    assert checked == set(BAD_STRINGS)


def test_the_rows_of_one_configurable_name_share_their_check() -> None:
    """The environment and the file check a name against one row (CONFIGURABLE): every
    command's row of it must take the same values."""
    for row in OPTIONS:
        if row.configurable:
            assert row.check == CONFIGURABLE[row.dest].check, row


def test_the_words_of_a_range() -> None:
    assert options.between(0, 1).text == "must be between 0 and 1"
    assert options.at_least(1).text == "must be at least 1"
    assert options.more_than(0).text == "must be more than 0"
    assert Range(0, 1, low_open=True).text == "must be more than 0 and at most 1"
    assert Range(-1, 1, True, True).text == "must be more than -1 and less than 1"
    assert options.ANY(-math.inf) is None and options.ANY(10**30) is None


@pytest.mark.parametrize("row", NUMBERS, ids=[f"{row.commands[0]} --{row.name}" for row in NUMBERS])
def test_each_bound_is_taken_at_the_bound_and_refused_a_step_outside(
    row: Option, tmp_path: Path
) -> None:
    """Through the command line (every command of the row), the environment and the file,
    each refusal in the same words, naming the flag, the variable, or the file and key."""
    assert isinstance(row.check, Range)
    words = row.check.text
    for value, taken in _steps(row):
        text = repr(value) if isinstance(value, float) else str(value)
        for command in row.commands:
            flag = f"--{row.name}"
            if taken:
                got = getattr(_parse(command, flag, text), row.dest)
                assert got == ([value] if row.nargs else value), (command, text)
            else:
                with pytest.raises(argparse.ArgumentError) as caught:
                    _parse(command, flag, text)
                named = "/".join(row.flags)  # argparse names every flag of the option
                assert str(caught.value) == f"argument {named}: {words}", (command, text)
        if not row.configurable:
            continue
        config = tmp_path / "c.toml"
        config.write_text(f"{row.name} = {text}\n")
        if taken:
            assert read_environ({row.variable: text}) == {row.dest: value}
            assert read_file(str(config)) == {row.dest: value}
            continue
        with pytest.raises(ConfigError) as caught:
            read_environ({row.variable: text})
        assert str(caught.value) == f"environment: {row.variable}={text!r}: {words}"
        with pytest.raises(ConfigError) as caught:
            read_file(str(config))
        assert str(caught.value) == f"config file {config}: {row.name} = {text}: {words}"


@pytest.mark.parametrize("dest", sorted(BAD_STRINGS))
def test_a_string_with_a_syntax_is_checked_from_every_source(dest: str, tmp_path: Path) -> None:
    bad, words = BAD_STRINGS[dest]
    rows = [row for row in OPTIONS if row.dest == dest]
    for row in rows:
        for command in row.commands:
            with pytest.raises(argparse.ArgumentError) as caught:
                _parse(command, f"--{row.name}", bad)
            assert str(caught.value).startswith(f"argument {'/'.join(row.flags)}: {words}")
    row = CONFIGURABLE[dest]
    if bad:  # an empty variable is unset; the file can give the empty value
        shown = "" if row.url else f"={bad!r}"  # a URL may hold a password: never shown
        with pytest.raises(ConfigError) as caught:
            read_environ({row.variable: bad})
        assert str(caught.value).startswith(f"environment: {row.variable}{shown}: {words}")
    config = tmp_path / "c.toml"
    config.write_text(f"[neardup]\n{row.dest} = {options._toml(bad)}\n")
    shown = "" if row.url else f" = {options._toml(bad)}"
    with pytest.raises(ConfigError) as caught:
        read_file(str(config))
    assert str(caught.value).startswith(f"config file {config}: [neardup] {dest}{shown}: {words}")


@pytest.mark.parametrize(
    ("dest", "good"),
    [
        ("redis_url", "unix:///run/redis.sock"),
        ("redis_url", f"rediss://neardup:{PASSWORD}@h:6380/1"),
        ("redis_url", "REDIS://[::1]:6379"),
        ("bootstrap_servers", "a:1, b:65535,[::1]:9092,kafka"),
        ("input_topic", "a.b_c-D9" + "x" * 241),
        ("group", "team/neardup-2"),
        ("index", "café-2"),
        ("scheme", "manku-16"),
        ("vector_scheme", "auto"),
        ("vector_scheme", "k7-b4-m1"),
    ],
)
def test_strings_of_the_right_syntax_are_taken(dest: str, good: str) -> None:
    assert read_environ({CONFIGURABLE[dest].variable: good}) == {dest: good}


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("127.0.0.1:6379", "has no scheme: write redis://HOST:PORT/DB (e.g. redis://127"),
        ("localhost:6379/0", "has no scheme"),
        (f"neardup:{PASSWORD}@h:6379", "has no scheme"),
        (f"http://u:{PASSWORD}@h/", "must start with redis://, rediss:// (TLS) or unix://"),
        (f"redis://u:{PASSWORD}@h:port/0", "has a host or port that cannot be read"),
        (f"redis://u:{PASSWORD}@h:70000/0", "has a host or port that cannot be read"),
    ],
)
def test_a_bad_redis_url_is_told_in_plain_words_without_its_password(
    url: str, words: str, tmp_path: Path
) -> None:
    """From all three sources, and from RedisSettings (what the adapters build)."""
    with pytest.raises(argparse.ArgumentError) as caught:
        _parse("serve", "--redis-url", url)
    messages = [str(caught.value)]
    with pytest.raises(ConfigError) as caught_env:
        read_environ({"NEARDUP_REDIS_URL": url})
    config = tmp_path / "c.toml"
    config.write_text(f'redis-url = "{url}"\n')
    with pytest.raises(ConfigError) as caught_file:
        read_file(str(config))
    with pytest.raises(ConfigError) as caught_settings:
        RedisSettings.from_options(url)
    messages += [str(c.value) for c in (caught_env, caught_file, caught_settings)]
    for message in messages:
        assert words in message and PASSWORD not in message and "'://" not in message
    assert messages[0].startswith("argument --redis-url: ")
    assert messages[1].startswith("environment: NEARDUP_REDIS_URL: ")
    assert messages[2].startswith(f"config file {config}: redis-url: ")
    assert messages[3].startswith("--redis-url ")


def test_the_feature_sizes_are_the_ones_the_engine_takes() -> None:
    for name, field in (("shingle-size", "n"), ("cjk-ngram", "cjk_n")):
        check = options.option(name, "detect").check
        assert isinstance(check, Range) and check.low == 1 and check.high is not None
        FeatureConfig(**{field: int(check.high)})
        with pytest.raises(ConfigError):
            FeatureConfig(**{field: int(check.high) + 1})


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["detect", "--threshold", "1.5"], "argument --threshold: must be between 0 and 1"),
        (["detect", "--threshold", "-3"], "argument --threshold: must be between 0 and 1"),
        (["detect", "--max-candidates", "0"], "argument --max-candidates: must be at least 1"),
        (["detect", "--batch-size", "0"], "argument --batch-size: must be at least 1"),
        (["serve", "--redis-url", "127.0.0.1:6379"], "argument --redis-url: has no scheme"),
    ],
)
def test_the_issues_values_stop_the_process(argv: list[str], message: str) -> None:
    done = run_module(argv, stdin=b'{"id": "a", "text": "b"}\n')
    stderr = done.stderr.decode()
    assert done.returncode == 2, stderr
    assert f"neardup {argv[0]}: error: {message}" in stderr
    assert "Traceback" not in stderr and done.stdout == b""


def test_a_bad_value_in_the_environment_or_the_file_stops_the_process(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEARDUP_")}
    env.update(PYTHONPATH=str(ROOT), NEARDUP_MAX_CANDIDATES="0")
    done = subprocess.run(
        [sys.executable, "-m", "detector", "detect"],
        input="",
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=60,
    )
    assert done.returncode == 2
    assert "neardup: error: environment: NEARDUP_MAX_CANDIDATES='0': must be at least 1" in (
        done.stderr
    )
    config = tmp_path / "c.toml"
    config.write_text("threshold = 1.5\n")
    done = run_module(["detect", "--config", str(config)], stdin=b"")
    assert done.returncode == 2
    message = f"neardup: error: config file {config}: threshold = 1.5: must be between 0 and 1"
    assert message in done.stderr.decode()
