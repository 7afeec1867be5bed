"""Every option of every command, declared once: its flag, type, default, help, the
commands that take it, and whether it is configurable. From this table come the argparse
options (detector/cli.py), the environment variables (NEARDUP_<OPTION>), the keys of the
--config file, the defaults (EngineSettings takes its own from here) and --help.

The rules, the same for every option:

- NEARDUP_<OPTION> is the option's long name upper-cased, dashes to underscores
  (--batch-size: NEARDUP_BATCH_SIZE); an empty variable counts as unset.
- The config file (TOML) has the same names as keys, with dashes or underscores
  (batch-size or batch_size), at its top level or in a [neardup] table.
- The command line wins over the environment, which wins over the file, which wins over
  the default here.
- Options that only make sense for one invocation (inputs, outputs, --progress...) are
  command-line only: in the environment or the file they are an error, as is any other
  NEARDUP_* variable or key that is not an option (NEARDUP_STACK_* excepted: it belongs to
  ops/ and the test tools, and the product never reads it), and a value of the wrong type.
- A row's `check` says which values of its kind it takes: every int and float row has a
  Range (ANY when every number will do); a string with a syntax has a function that says
  what is wrong with a value (detector.names, detector.access). The command line, the
  environment and the file refuse a value with the same words ("must be at least 1").

Light on purpose: it imports no numpy, kafka-python or redis-py, so that the command line
and tools can read it cheaply; the engine's modules never import it.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Literal

from .access import (
    DEFAULT_REDIS_URL,
    SASL_MECHANISMS,
    SECURITY_PROTOCOLS,
    redis_url_problem,
    servers_problem,
)
from .errors import ConfigError
from .index import DEFAULT_MAX_BUCKET
from .names import group_problem, index_name_problem, topic_problem
from .records import DEFAULT_MAX_BYTES, DEFAULT_MAX_TOKENS

Kind = Literal["int", "float", "str", "bool", "choice"]
Group = Literal["", "engine", "redis", "kafka"]  # "": the command's own options

PREFIX = "NEARDUP_"
CONFIG_VARIABLE = "NEARDUP_CONFIG"  # the config file, when --config is not given
IGNORED_PREFIX = "NEARDUP_STACK_"  # ops/stack.sh and the test tools: never read here

INDEX_ACTIONS = (
    "index stats",
    "index export",
    "index import",
    "index delete",
    "index sweep",
    "index migrate",
)
KAFKA_COMMANDS = ("serve", "produce", "tail", "bench")
REDIS_COMMANDS = ("serve", "bench", *INDEX_ACTIONS, "explain")
ENGINE_COMMANDS = ("detect", "serve", "extract", "explain", "review")

EXPECTED: dict[str, str] = {
    "int": "a whole number",
    "float": "a number",
    "str": "a string",
    "bool": "true or false",
}
TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off")

# What is wrong with a value of an option's kind ("must be at least 1"), or None. The
# words are the whole message's end whatever the source, so they never repeat the value:
# the caller shows it, or hides it (a secret, a URL that may hold a password).
Check = Callable[[Any], str | None]


@dataclass(frozen=True)
class Range:
    """The numbers an int or float option takes; a bound of None is no bound, an open
    one is itself refused."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def __call__(self, value: float) -> str | None:
        low, high = self.low, self.high
        if low is not None and (value <= low if self.low_open else value < low):
            return self.text
        if high is not None and (value >= high if self.high_open else value > high):
            return self.text
        return None

    @property
    def text(self) -> str:
        low, high = self.low, self.high
        if low is not None and high is not None and not (self.low_open or self.high_open):
            return f"must be between {low} and {high}"
        words = []
        if low is not None:
            words.append(f"more than {low}" if self.low_open else f"at least {low}")
        if high is not None:
            words.append(f"less than {high}" if self.high_open else f"at most {high}")
        return "must be " + " and ".join(words) if words else "must be a number"


ANY = Range()  # every number is valid: decided, not forgotten (a test tells them apart)


def at_least(low: int) -> Range:
    return Range(low)


def more_than(low: float) -> Range:
    return Range(low, low_open=True)


def between(low: float, high: float) -> Range:
    return Range(low, high)


PORT = between(0, 65535)
# Seconds of a TTL or a retention: a century is beyond any use, and far below the
# expiry Redis refuses as out of range.
SECONDS = between(0, 100 * 365 * 24 * 3600)


class Invalid(ValueError):
    """A value of an option's kind that its check refuses; str() is the check's words."""


@dataclass(frozen=True)
class Option:
    """One option of one or more commands. An option of the same name in several commands
    may be several rows (different defaults or help), but always of one kind."""

    name: str  # the long flag without its dashes, or a positional argument's name
    kind: Kind
    default: Any
    help: str | Callable[[], str]  # a callable for help that needs a heavy module
    commands: tuple[str, ...]
    configurable: bool = True  # read from NEARDUP_<OPTION> and the config file too
    group: Group = ""
    choices: tuple[str, ...] = ()
    metavar: str | None = None
    aliases: tuple[str, ...] = ()  # other flags: "-o", "--index-name"
    positional: bool = False
    nargs: str | None = None
    required: bool = False
    secret: bool = False  # its help shows no default (it may come from the environment)
    url: bool = False  # its help shows the default with the password redacted
    negatable: bool = True  # a bool: --x/--no-x; else a plain --x flag
    check: Check | None = None  # the values it takes beyond its kind (a Range for numbers)

    @property
    def dest(self) -> str:
        return self.name.replace("-", "_")

    @property
    def flags(self) -> tuple[str, ...]:
        if self.positional:
            return (self.name,)
        short = tuple(a for a in self.aliases if not a.startswith("--"))
        long = tuple(a for a in self.aliases if a.startswith("--"))
        return (*short, f"--{self.name}", *long)

    @property
    def variable(self) -> str:
        return PREFIX + self.dest.upper()

    @property
    def text(self) -> str:
        return self.help() if callable(self.help) else self.help

    def expected(self) -> str:
        if self.kind == "choice":
            return "one of " + ", ".join(self.choices)
        return EXPECTED[self.kind]

    def problem(self, value: Any) -> str | None:
        """What the row's check finds wrong with a value of its kind (each of a list's)."""
        if self.check is None or value is None:
            return None
        values = value if isinstance(value, (list, tuple)) else (value,)
        return next((p for v in values if (p := self.check(v)) is not None), None)

    def checked(self, value: Any) -> Any:
        if (problem := self.problem(value)) is not None:
            raise Invalid(problem)
        return value

    def from_env(self, raw: str) -> Any:
        """The value of NEARDUP_<OPTION>=raw; ValueError when it is not of this kind,
        Invalid when the row's check refuses it."""
        return self.checked(self._from_env(raw))

    def _from_env(self, raw: str) -> Any:
        text = raw.strip()
        if self.kind == "int":
            return int(text)
        if self.kind == "float":
            value = float(text)
            if not math.isfinite(value):
                raise ValueError(raw)
            return value
        if self.kind == "bool":
            if text.lower() in TRUE:
                return True
            if text.lower() in FALSE:
                return False
            raise ValueError(raw)
        if self.kind == "choice" and raw not in self.choices:
            raise ValueError(raw)
        return raw

    def from_file(self, value: Any) -> Any:
        """A TOML value as this option's; ValueError when it is not of this kind (TOML has
        types: 64 for an int, 0.8 or 1 for a float, true for a bool, "x" for a string),
        Invalid when the row's check refuses it."""
        return self.checked(self._from_file(value))

    def _from_file(self, value: Any) -> Any:
        if self.kind == "int" and type(value) is int:
            return value
        if self.kind == "float" and type(value) in (int, float) and math.isfinite(value):
            return float(value)
        if self.kind == "bool" and type(value) is bool:
            return value
        if self.kind == "str" and type(value) is str:
            return value
        if self.kind == "choice" and type(value) is str and value in self.choices:
            return value
        raise ValueError(value)


def _visible(name: str) -> str:
    var = PREFIX + name.upper().replace("-", "_")
    return (
        f"; on the command line it is visible to other local users (ps): prefer {var} "
        f"or --{name}-file"
    )


def _scheme_help() -> str:
    from .blocks import NAMED  # numpy: when a parser is made, not when this module is read

    names = ", ".join(f"{k} (={v})" for k, v in NAMED.items())
    return (
        "block tables: kK-bB = distance K, B blocks, one table per choice of B-K blocks; "
        f"kK-bBxC = two levels; or {names}"
    )


def _vector_scheme_help() -> str:
    from .vectors import vector_scheme  # numpy, as above

    cosine, recall = _ENGINE["cosine"].default, _ENGINE["vector-recall"].default
    chosen = ", ".join(
        f"cosine {c} -> {vector_scheme(c, recall).describe()}" for c in (cosine, 0.95, 0.98)
    )
    return (
        "block tables of records with an embedding: auto takes the Hamming radius k that "
        "finds --vector-recall of the pairs at exactly --cosine (the distance of 64 "
        f"hyperplane bits is binomial) and probes four 16-bit tables for it: {chosen} "
        f"(at --vector-recall {recall}); or a scheme as for --scheme"
    )


def _scheme(spec: str) -> str | None:
    from .blocks import BlockScheme  # numpy: when a scheme is checked, not when this is read

    try:
        BlockScheme.parse(spec)
    except ConfigError as exc:
        return str(exc)
    return None


def _vector_scheme(spec: str) -> str | None:
    return None if spec == "auto" else _scheme(spec)


def _bytes(text: str) -> str | None:
    from .plan import bytes_problem  # numpy, as above

    return bytes_problem(text)


def _group_by(value: str) -> str | None:
    if value in ("auto", "host") or (value.startswith("meta.") and len(value) > len("meta.")):
        return None
    return "must be auto, host or meta.FIELD (a field of the records' meta)"


def _engine(name: str, kind: Kind, default: Any, help: Any, **more: Any) -> Option:
    return Option(name, kind, default, help, ENGINE_COMMANDS, group="engine", **more)


def _redis(name: str, kind: Kind, default: Any, help: str, **more: Any) -> Option:
    return Option(name, kind, default, help, REDIS_COMMANDS, group="redis", **more)


def _kafka(name: str, kind: Kind, default: Any, help: str, **more: Any) -> Option:
    return Option(name, kind, default, help, KAFKA_COMMANDS, group="kafka", **more)


def _cli(name: str, kind: Kind, default: Any, help: str, *commands: str, **more: Any) -> Option:
    """A command-line-only option: per invocation, meaningless in a shared file."""
    return Option(name, kind, default, help, commands, configurable=False, **more)


# --------------------------------------------------------------------------- the engine
# Chosen by measurement on the dev stream (README, "Choosing the defaults").
ENGINE: tuple[Option, ...] = (
    _engine(
        "features",
        "choice",
        "words",
        "fingerprint features: words, or word shingles",
        choices=("words", "shingles"),
    ),
    # the sizes FeatureConfig takes (a test keeps them equal)
    _engine(
        "shingle-size",
        "int",
        2,
        "words per shingle with --features shingles",
        check=between(1, 8),
    ),
    _engine(
        "cjk-ngram",
        "int",
        2,
        "character n-gram size for scripts written without spaces",
        check=between(1, 4),
    ),
    _engine(
        "idf",
        "str",
        None,
        "IDF table made by `neardup fit-idf`; without it a built-in length weighting is used",
        metavar="FILE",
    ),
    _engine("scheme", "str", "k6-b8", _scheme_help, check=_scheme),
    _engine(
        "threshold",
        "float",
        0.8,
        "literal pass: word-shingle Jaccard needed to call a candidate a duplicate",
        check=between(0, 1),
    ),
    _engine(
        "literal-shingle", "int", 5, "words per shingle in the literal pass", check=at_least(1)
    ),
    _engine(
        "max-candidates",
        "int",
        32,
        "nearest candidates verified per document",
        check=at_least(1),  # 0 would verify none: near-duplicates silently never found
    ),
    _engine(
        "short-k",
        "int",
        10,
        "widest Hamming radius of a short text's lookup: a text of under 150 words is looked "
        "up to the distance of its one-word-changed copies (from the weight of its words), "
        "its tables read at one probe radius more; the scheme's k turns it off",
        check=between(0, 32),
    ),
    _engine(
        "vector-seed",
        "int",
        0,
        "seed of the random hyperplanes for records with an embedding",
        check=at_least(0),  # numpy's generators take no negative seed
    ),
    _engine(
        "cosine",
        "float",
        0.9,
        "records with an embedding: the exact cosine of the stored vectors needed to call a "
        "candidate a duplicate (their second pass)",
        check=Range(-1, 1, low_open=True, high_open=True),  # as vectors.hamming_radius
    ),
    _engine(
        "vector-recall",
        "float",
        0.75,
        "share of the pairs at exactly --cosine that the vector tables find; more similar "
        "pairs are found more often (at 0.75 and cosine 0.9: 0.98 of pairs at 0.95)",
        check=Range(0, 1, low_open=True, high_open=True),
    ),
    _engine("vector-scheme", "str", "auto", _vector_scheme_help, check=_vector_scheme),
    _engine(
        "vector-storage",
        "choice",
        "int8",
        "how indexed vectors are kept for the second pass: int8 (a byte a dimension and a "
        "scale) or float16",
        choices=("int8", "float16"),
    ),
    _engine(
        "html",
        "choice",
        "auto",
        "text of HTML pages: auto decides a page (a content type in meta, or markup) on its "
        "main content and plain text as it is; main treats every record as a page; text only "
        "strips tags",
        choices=("auto", "main", "text"),
    ),
    _engine(
        "template-urls",
        "int",
        3,
        "an HTML line seen on this many URLs of a host is its site's template (learned "
        "online, shared through the index)",
        check=at_least(1),
    ),
    _engine(
        "content-share",
        "float",
        0.9,
        "the main content is the smallest element holding this share of a page's words that "
        "are neither links nor template",
        check=Range(0, 1, low_open=True),
    ),
    _engine(
        "max-bytes",
        "int",
        DEFAULT_MAX_BYTES,
        "largest accepted record in bytes",
        check=at_least(1),
    ),
    _engine(
        "max-tokens",
        "int",
        DEFAULT_MAX_TOKENS,
        "most tokens in a record's normalized text; more is a too_many_tokens error",
        check=at_least(1),
    ),
    _engine(
        "keep-old-versions",
        "bool",
        False,
        "a re-fetched record's earlier version stays a candidate until retention, so a copy "
        "of the old text is still a duplicate; by default the new version replaces it in "
        "the index (every consumer of an index must use the same)",
    ),
    _engine(
        # = detector.verify.DEFAULT_CACHE_BYTES, LiteralCheck's own default (a test keeps
        # them equal: verify.py imports numpy, which this module must not)
        "literal-memory",
        "int",
        256 * 1024 * 1024,
        "bytes of shingle sets the literal pass keeps in this process; older ones are read "
        "from the index again when needed",
        metavar="BYTES",
        # a shingle set larger than the cache is dropped as it comes, so its document is
        # never found a duplicate of (settings.py wants room for one of --max-tokens)
        check=at_least(1024 * 1024),
    ),
    _engine(
        "text-window",
        "int",
        None,
        "the newest N indexed documents keep their texts for the literal pass, and the "
        "others a 135-byte shingle sketch (0 keeps no text; unset keeps every text, and no "
        "sketch). A text of at most 64 shingles is always kept: it weighs what a sketch does",
        metavar="N",
        check=at_least(0),
    ),
    _engine(
        "sketch-band",
        "choice",
        "estimate",
        "a candidate judged on its sketch whose estimate is within 3.72 standard deviations "
        "of --threshold (the band): a duplicate when the estimate reaches the threshold "
        "(estimate, the best F1 measured), when its fingerprint is within "
        "--sketch-band-distance (distance), always (duplicate) or never (unique)",
        choices=("estimate", "unique", "duplicate", "distance"),  # = detector.verify.BAND_RULES
    ),
    _engine(
        "sketch-band-distance",
        "int",
        3,
        "with --sketch-band distance: the fingerprint distance within which a banded "
        "candidate is a duplicate",
        check=at_least(0),
    ),
    _engine(
        "kernels",
        "choice",
        "auto",
        "the text kernels (tokens, hashes, SimHash, shingle sets): native (Rust, built by pip "
        "when a Rust toolchain is there; an error if it was not), numpy (the reference), or "
        "auto: native when built. Both give the same bits",
        choices=("auto", "native", "numpy"),  # = detector.kernels.CHOICES (a test keeps them)
    ),
)
_ENGINE = {o.name: o for o in ENGINE}


def _login(
    make: Callable[..., Option],
    prefix: str,
    password: str,
    whose: str,
    tls: str,
    signed: str,
    servers: str,
) -> tuple[Option, ...]:
    """The password and TLS files of one kind of server (Redis, Kafka): the same five
    options, in that server's words."""
    return (
        make(
            f"{prefix}-password",
            "str",
            None,
            password + _visible(f"{prefix}-password"),
            metavar="PASSWORD",
            secret=True,
        ),
        make(
            f"{prefix}-password-file",
            "str",
            None,
            f"read the {whose} password from this file",
            metavar="FILE",
        ),
        make(
            f"{prefix}-ca-file",
            "str",
            None,
            f"{tls}: CA certificates (PEM) that signed {signed}; default the system's",
            metavar="FILE",
        ),
        make(
            f"{prefix}-cert-file",
            "str",
            None,
            f"{tls}: client certificate (PEM), for {servers} that authenticate clients",
            metavar="FILE",
        ),
        make(
            f"{prefix}-key-file",
            "str",
            None,
            f"{tls}: private key of --{prefix}-cert-file (PEM)",
            metavar="FILE",
        ),
    )


# --------------------------------------------------------------------------- Redis
REDIS: tuple[Option, ...] = (
    _redis(
        "redis-url",
        "str",
        DEFAULT_REDIS_URL,
        "Redis server: redis://, rediss:// (TLS) or unix://; a user and password in it "
        "(redis://USER:PASSWORD@HOST) work too",
        url=True,
        check=redis_url_problem,
    ),
    _redis(
        "redis-cluster",
        "bool",
        False,
        "--redis-url is one node of a Redis Cluster; the index spreads over its primaries",
    ),
    _redis(
        "redis-sentinel",
        "str",
        None,
        "Redis Sentinels, host:port[,host:port]: the index is on the primary they name for "
        "--redis-service, followed when they promote a replica (--redis-url then gives only "
        "the scheme, database and credentials)",
        check=servers_problem,
        metavar="HOST:PORT,...",
    ),
    _redis(
        "redis-service",
        "str",
        None,
        "the primary's name for the Sentinels (their `sentinel monitor NAME ...`)",
        metavar="NAME",
    ),
    _redis(
        "redis-min-replicas",
        "int",
        0,
        "replicas each batch's writes must reach (WAIT) before its decisions are published; "
        "one not confirmed is retried, never published. 0: the primary's word; a failover "
        "can lose its newest commits (README, Running with replicas)",
        check=at_least(0),
        metavar="N",
    ),
    _redis(
        "redis-wait-timeout",
        "float",
        1.0,
        "seconds a WAIT for --redis-min-replicas waits before the batch is retried",
        check=more_than(0),
        metavar="SECONDS",
    ),
    _redis("redis-username", "str", None, "Redis ACL user", metavar="USER"),
    *_login(
        _redis,
        "redis",
        password="password of the ACL user (or of the default user)",
        whose="Redis",
        tls="rediss://",
        signed="the server's",
        servers="servers",
    ),
)

# --------------------------------------------------------------------------- Kafka
KAFKA: tuple[Option, ...] = (
    _kafka(
        "bootstrap-servers",
        "str",
        "127.0.0.1:9092",
        "Kafka brokers, host:port[,host:port]",
        check=servers_problem,
    ),
    _kafka(
        "kafka-security-protocol",
        "choice",
        "PLAINTEXT",
        "how to talk to the brokers: SSL is TLS, SASL_* log in with a user and password",
        choices=SECURITY_PROTOCOLS,
    ),
    _kafka(
        "kafka-sasl-mechanism",
        "choice",
        None,
        "SASL mechanism, needed with SASL_PLAINTEXT and SASL_SSL",
        choices=SASL_MECHANISMS,
    ),
    _kafka("kafka-username", "str", None, "SASL user", metavar="USER"),
    *_login(
        _kafka,
        "kafka",
        password="SASL password",
        whose="SASL",
        tls="SSL, SASL_SSL",
        signed="the brokers'",
        servers="brokers",
    ),
)

# --------------------------------------------------------------------------- commands
PROGRESS = "progress bar on stderr (default: when stderr is a terminal)"
NOT_INDEX_IMPORT = tuple(a for a in INDEX_ACTIONS if a != "index import")

INPUT_TOPIC = Option(
    "input-topic",
    "str",
    "documents",
    "topic of input documents",
    ("serve",),
    metavar="TOPIC",
    check=topic_problem,
)
OUTPUT_TOPIC = Option(
    "output-topic",
    "str",
    "decisions",
    "topic the decisions go to",
    ("serve",),
    metavar="TOPIC",
    check=topic_problem,
)
DEAD_LETTER_TOPIC = Option(
    "dead-letter-topic",
    "str",
    "documents.dead-letter",
    "topic for records that cannot be decided",
    ("serve",),
    metavar="TOPIC",
    check=topic_problem,
)

MAX_BUCKET = Option(
    "max-bucket",
    "int",
    DEFAULT_MAX_BUCKET,
    "newest entries a block-table bucket keeps and a lookup reads from it: a flood of "
    "variants into one bucket cannot slow every lookup",
    ("serve",),
    check=at_least(1),
)

EXACTLY_ONCE = Option(
    "exactly-once",
    "bool",
    False,
    "publish each batch's decisions and dead letters and commit its offsets in one "
    "Kafka transaction, so that a read_committed reader sees every decision once, even "
    "across crashes (default: at least once: a consumer killed between its flush and "
    "its commit publishes its batch again)",
    ("serve",),
)

OWN: tuple[Option, ...] = (
    # detect
    _cli(
        "input",
        "str",
        "-",
        "JSONL or JSONL.gz file; - for stdin",
        "detect",
        "produce",
        "extract",
        positional=True,
        nargs="?",
    ),
    _cli(
        "output",
        "str",
        None,
        "decisions file (.gz to compress); default stdout",
        "detect",
        aliases=("-o",),
    ),
    _cli("errors", "str", None, "error records file; default stderr", "detect"),
    Option(
        "batch-size",
        "int",
        512,
        "records fingerprinted together (extract, explain and review: give detect's, as "
        "the template model learns a batch at a time)",
        ("detect", "extract", "explain", "review"),
        check=at_least(1),
    ),
    Option(
        "index",
        "str",
        "default",
        "index namespace written into decisions",
        ("detect",),
        aliases=("--index-name",),
        metavar="NAME",
        check=index_name_problem,
    ),
    Option(
        "workers",
        "int",
        0,
        "processes that parse and fingerprint ahead of the decisions; 0 does everything in "
        "one process, which measured faster on two cores; more cores gain from 1 or 2",
        ("detect",),
        check=at_least(0),
    ),
    _cli(
        "profile",
        "bool",
        False,
        "at the end, print where each document's time went, by stage of the loop (wall "
        "microseconds a document; stderr)",
        "detect",
        "serve",
        negatable=False,
    ),
    _cli(
        "progress",
        "bool",
        None,
        PROGRESS,
        "detect",
        "produce",
        "review",
        "index export",
        "index import",
        "index stats",
    ),
    # fit-idf
    _cli(
        "corpus",
        "str",
        None,
        "JSONL or JSONL.gz with a `text` field per line",
        "fit-idf",
        positional=True,
    ),
    _cli(
        "output",
        "str",
        None,
        "table file to write (gzip JSON)",
        "fit-idf",
        aliases=("-o",),
        required=True,
    ),
    _cli("min-df", "int", 2, "drop tokens seen in fewer documents", "fit-idf", check=at_least(1)),
    # extract
    _cli(
        "id",
        "str",
        None,
        "show only the records of these ids (comma-separated); the model still learns "
        "from every page before them",
        "extract",
    ),
    # explain
    _cli(
        "input",
        "str",
        None,
        "a JSONL file (gzip too) with --ids or --decisions and --id; or two files of one "
        "record each (JSONL, or plain text: its name is its id), the first the earlier; "
        "or none: the Redis index --index, with --ids or --id",
        "explain",
        positional=True,
        nargs="*",
    ),
    _cli(
        "ids",
        "str",
        None,
        "two ids, comma-separated: explain that pair (the earlier one is the candidate); "
        "an id given twice in a file is its first record",
        "explain",
        metavar="A,B",
    ),
    _cli(
        "id",
        "str",
        None,
        "explain this record's decision (from --decisions, or the index's): against the "
        "record it duplicates, or, for a unique one, against the earlier record nearest by "
        "fingerprint (in an index: its nearest candidate within k)",
        "explain",
        metavar="ID",
    ),
    _cli(
        "decisions",
        "str",
        None,
        "the decisions of `neardup detect` on the input (JSONL), with --id",
        "explain",
        metavar="FILE",
    ),
    _cli("json", "bool", False, "print one JSON object (keys above)", "explain", negatable=False),
    _cli(
        "color",
        "bool",
        None,
        "color the diff (default: when stdout is a terminal and NO_COLOR is unset); "
        "--no-color marks it [-only in the earlier-] {+only in the later+}",
        "explain",
    ),
    # eval
    _cli(
        "decisions",
        "str",
        None,
        "decisions JSONL (from neardup detect)",
        "eval",
        "review",
        positional=True,
    ),
    _cli("truth", "str", None, "truth JSONL or JSONL.gz", "eval", positional=True),
    replace(
        _ENGINE["threshold"],
        default=None,
        help="a record is truly a duplicate when its truth measure is >= this (default: "
        "0.8 for max_jaccard_earlier, 0.9 for max_cosine_earlier)",
        commands=("eval",),
        configurable=False,
        group="",
        check=between(-1, 1),  # a Jaccard or a cosine; evaluate.py knows which
    ),
    _cli(
        "measure",
        "choice",
        "auto",
        "the truth's measure: jaccard (max_jaccard_earlier), cosine (max_cosine_earlier), "
        "or auto: cosine when the truth has it",
        "eval",
        choices=("auto", "jaccard", "cosine"),
    ),
    _cli(
        "order",
        "choice",
        "decided",
        "decided: score the decisions as they are; input: score what they joined, not "
        "which copy came first (serve on several partitions decides out of input order): "
        "records linked by duplicate_of are one cluster, its first record in the truth's "
        "order unique and the others duplicates. A cluster linked through a third record "
        "(A and C each near B, not each other) calls C a duplicate of A, a false alarm if "
        "nothing earlier is near C",
        "eval",
        choices=("decided", "input"),
    ),
    _cli("report", "str", None, "write a PNG report here", "eval"),
    _cli(
        "k",
        "int",
        None,
        "the Hamming radius the decisions were made with, marked on the report (default: "
        "the k that records with an embedding carry, when most do; else the default "
        "scheme's, or the farthest duplicate's distance if that is larger)",
        "eval",
        check=between(0, 64),
    ),
    _cli("json", "bool", False, "print the scores as one JSON line", "eval", negatable=False),
    # review
    _cli(
        "input",
        "str",
        None,
        "the records (JSONL or JSONL.gz) the decisions were made from; - for stdin",
        "review",
        positional=True,
    ),
    _cli(
        "truth",
        "str",
        None,
        "truth JSONL or JSONL.gz (as for eval): adds precision, recall and every false "
        "positive and negative with its reason",
        "review",
        metavar="TRUTH",
    ),
    _cli("output", "str", None, "the HTML page to write", "review", aliases=("-o",), required=True),
    _cli(
        "group-by",
        "str",
        "auto",
        "group the duplicate rates by the host of each record's url (host), by a field of "
        "its meta (meta.FIELD), or auto: the host, else the meta field source",
        "review",
        metavar="auto|host|meta.FIELD",
        check=_group_by,
    ),
    _cli(
        "top",
        "int",
        50,
        "pairs a list of the page shows at most (and groups, in the table of sources)",
        "review",
        check=between(1, 10_000),
    ),
    # plan
    _cli(
        "docs",
        "int",
        None,
        "documents the index is to hold (N)",
        "plan",
        metavar="N",
        required=True,
        check=at_least(1),
    ),
    _cli(
        "radius",
        "int",
        None,
        "the Hamming distance every layout must find all pairs within (default: the "
        "default scheme's k)",
        "plan",
        metavar="K",
        check=between(0, 63),
    ),
    _cli(
        "memory",
        "str",
        None,
        "keep the layouts whose N documents fit in this many bytes of Redis: 64G or 64GiB "
        "(2^30 each), 64GB (10^9), or bytes; also says how many Redis Cluster primaries of "
        "this size each needs",
        "plan",
        metavar="BYTES",
        check=_bytes,
    ),
    _cli(
        "sample",
        "str",
        None,
        "measure recall on the true pairs of this file: a stream with truth (in its records "
        "or as NAME-truth.jsonl.gz beside it) or a decisions file of `neardup detect`",
        "plan",
        metavar="FILE",
    ),
    _cli(
        "format",
        "choice",
        "table",
        "table: an aligned table; json: one JSON object, for machines",
        "plan",
        choices=("table", "json"),
    ),
    # serve, and the topics of produce and tail
    INPUT_TOPIC,
    OUTPUT_TOPIC,
    DEAD_LETTER_TOPIC,
    replace(DEAD_LETTER_TOPIC, help="the topic --dead-letters reads", commands=("tail",)),
    Option(
        "start-from",
        "choice",
        "earliest",
        "where a partition starts that the group has no committed offset for (a new group, "
        "or offsets the topic's retention deleted): its oldest record, or the next to arrive",
        ("serve",),
        choices=("earliest", "latest"),
    ),
    Option(
        "create-topics",
        "bool",
        True,
        "create the output and dead-letter topics when they do not exist (with "
        "--topic-partitions partitions); --no-create-topics requires them. The input topic "
        "is never created: serve waits for it (--startup-timeout)",
        ("serve",),
    ),
    Option(
        "topic-partitions",
        "int",
        None,
        "partitions of the output and dead-letter topics serve creates (default: as many as "
        "the input topic has)",
        ("serve",),
        check=at_least(1),
    ),
    Option(
        "runaway-share",
        "float",
        0.2,
        "warn when one cluster holds this share of a host's pages decided (over at least 50 "
        "of them): usually the site's template kept in its cut, or a threshold too low; "
        "0 turns the warning off",
        ("detect", "serve"),
        metavar="SHARE",
        check=between(0, 1),
    ),
    Option(
        "log-every",
        "float",
        30.0,
        "seconds between progress lines in the log (records, rate, decisions by kind, lag); "
        "0 turns them off",
        ("serve",),
        metavar="SECONDS",
        check=SECONDS,
    ),
    Option(
        "tombstones",
        "choice",
        "delete",
        "a record with a key and no value (a Kafka tombstone): delete forgets that id, as "
        "`neardup index delete` does, and forwards a tombstone of the same key to the "
        "output topic; ignore passes over it",
        ("serve",),
        choices=("delete", "ignore"),
    ),
    Option("group", "str", "neardup", "Kafka consumer group", ("serve",), check=group_problem),
    Option(
        "index",
        "str",
        "default",
        "index name: the Redis key namespace, so indexes can share a server",
        ("serve",),
        metavar="NAME",
        check=index_name_problem,
    ),
    Option(
        "batch-size",
        "int",
        256,
        "records per poll and per Redis round trip",
        ("serve",),
        check=at_least(1),
    ),
    Option(
        "text-ttl",
        "int",
        0,
        "seconds the literal texts are kept for the second pass; 0 keeps them",
        ("serve",),
        metavar="SECONDS",
        check=SECONDS,
    ),
    Option(
        "decision-ttl",
        "int",
        0,
        "seconds a decision is remembered for redeliveries; 0 keeps it",
        ("serve",),
        metavar="SECONDS",
        check=SECONDS,
    ),
    Option(
        "retention",
        "int",
        0,
        "age out documents indexed longer ago than this: they stop being candidates at once "
        "and their memory is swept back in the background; 0 keeps every document. Fixed "
        "when the index is made",
        ("serve",),
        metavar="SECONDS",
        check=SECONDS,
    ),
    MAX_BUCKET,
    replace(
        MAX_BUCKET,
        help="serve's --max-bucket: no layout whose buckets reach it below --docs is listed",
        commands=("plan",),
    ),
    replace(
        _ENGINE["text-window"],
        help="serve's --text-window: the texts of the newest N documents are counted in tx, "
        "a sketch for the others (default: every text)",
        commands=("plan",),
        configurable=False,
        group="",
    ),
    Option(
        "expected-docs",
        "int",
        None,
        "the documents the index is planned for, recorded in its meta when it is made "
        "(`index stats` says how far it is from the plan); a --scheme whose buckets reach "
        "--max-bucket below it is refused: choose one with `neardup plan --docs N`. "
        "Default: an index without a plan",
        ("serve",),
        metavar="N",
        check=at_least(1),
    ),
    EXACTLY_ONCE,
    Option(
        "prefetch",
        "bool",
        False,
        "parse and fingerprint the next batch in a thread while this one is in Redis and "
        "Kafka round trips (offsets are still committed in order; a batch polled before a "
        "rewind is dropped and read again). Off by default: on a 2-core machine that also "
        "runs Redis and Kafka it measured slower (1,440 against 1,690 docs/s), the threads "
        "taking turns at the interpreter lock; it may pay where Redis is far away",
        ("serve",),
    ),
    Option(
        "prefetch",
        "bool",
        True,
        "parse and fingerprint the next batch in a thread while this one is decided (the "
        "native kernels release the interpreter lock): on the 2-core dev machine 6,700 "
        "docs/s against 5,050 without it; --workers replaces it",
        ("detect",),
    ),
    Option(
        "metrics-port",
        "int",
        9464,
        "port of /metrics, /livez, /readyz and /healthz (= /readyz); 0 turns them off",
        ("serve",),
        metavar="PORT",
        check=PORT,
    ),
    Option(
        "metrics-port-count",
        "int",
        1,
        "how many ports, from --metrics-port on, serve may take the first free one of and log "
        "it: processes sharing a network (containers on the host's) each get their own",
        ("serve",),
        metavar="N",
        check=at_least(1),
    ),
    Option(
        "metrics-port-file",
        "str",
        "",
        "a file to write the metrics port taken into, as soon as it listens (for a health "
        "check of this process: a container's)",
        ("serve",),
        metavar="PATH",
    ),
    Option(
        "metrics-host",
        "str",
        "127.0.0.1",
        "address of the metrics endpoint",
        ("serve",),
        metavar="HOST",
    ),
    Option(
        "startup-timeout",
        "float",
        60.0,
        "seconds to wait at start for Redis, Kafka and the input topic (each wait is "
        "logged with what it waits for); then give up with status 1. A server that refuses "
        "us, an unknown host or a port that is not the server's fail at once",
        ("serve", "produce", "tail", "bench"),
        metavar="SECONDS",
        check=more_than(0),
    ),
    # produce: its --topic is serve's --input-topic
    replace(INPUT_TOPIC, help="topic to send to", commands=("produce",), aliases=("--topic",)),
    _cli(
        "partitions",
        "int",
        None,
        "create the topic with this many partitions if it does not exist (it takes records "
        "of up to --max-bytes); without it, the topic must exist",
        "produce",
        check=at_least(1),
    ),
    Option(
        "max-bytes",
        "int",
        DEFAULT_MAX_BYTES,
        "the largest record serve accepts (its --max-bytes): a topic produce creates takes "
        "records this large",
        ("produce",),
        check=at_least(1),
    ),
    # bench
    _cli("corpus", "str", None, "JSONL or JSONL.gz records to send", "bench", positional=True),
    _cli(
        "consumers",
        "int",
        (1, 2),
        "consumer counts to measure (default: 1 2)",
        "bench",
        nargs="+",
        check=at_least(1),
    ),
    _cli(
        "latency-seconds",
        "float",
        20.0,
        "how long to produce at half the measured rate",
        "bench",
        check=more_than(0),
    ),
    _cli(
        "latency-rate",
        "float",
        None,
        "docs/s of the latency run (default: half the 1-consumer rate), e.g. to compare "
        "two settings at the same load",
        "bench",
        check=more_than(0),
    ),
    _cli(
        "profile",
        "bool",
        False,
        "each consumer of the throughput runs prints where a document's time went, by "
        "stage (serve --profile)",
        "bench",
        negatable=False,
    ),
    _cli(
        "memory-docs",
        "int",
        1_000_000,
        "synthetic documents for the memory figure; 0 skips it",
        "bench",
        check=at_least(0),
    ),
    replace(
        _ENGINE["scheme"],
        help="block scheme of the serve processes",
        commands=("bench",),
        group="",
    ),
    Option("batch-size", "int", 256, "serve's batch size", ("bench",), check=at_least(1)),
    replace(
        EXACTLY_ONCE,
        help="the serve processes run with --exactly-once (their decisions are read "
        "read_committed either way)",
        commands=("bench",),
    ),
    # tail: its --topic is serve's --output-topic
    replace(OUTPUT_TOPIC, help="topic to read", commands=("tail",), aliases=("--topic",)),
    _cli("from-beginning", "bool", False, "start at the oldest record", "tail", negatable=False),
    _cli(
        "dead-letters",
        "bool",
        False,
        "read the dead-letter topic (--dead-letter-topic) instead",
        "tail",
        negatable=False,
    ),
    _cli(
        "format",
        "choice",
        "value",
        "value: each record's value, a line each (a tombstone as null); json: a JSON object "
        "a record with its topic, partition, offset, timestamp, key, headers and value",
        "tail",
        choices=("value", "json"),
    ),
    _cli(
        "read-committed",
        "bool",
        True,
        "only records of committed transactions: what serve --exactly-once published, once; "
        "--no-read-committed shows aborted ones too (topics written without transactions "
        "read the same either way)",
        "tail",
    ),
    _cli(
        "idle",
        "float",
        None,
        "stop after this long without a record (default: never)",
        "tail",
        metavar="SECONDS",
        check=more_than(0),
    ),
    # index
    _cli(
        "output",
        "str",
        None,
        "file to write (.gz to compress); default stdout",
        "index export",
        aliases=("-o",),
    ),
    _cli(
        "input",
        "str",
        None,
        "an export file (JSONL or .gz); - for stdin",
        "index import",
        positional=True,
    ),
    _cli(
        "memory",
        "choice",
        "sample",
        "the index's memory: sample estimates it from a bounded random sample of each "
        "primary's keys; exact weighs every key, a SCAN of the whole server (minutes on a "
        "large index)",
        "index stats",
        choices=("sample", "exact"),
    ),
    _cli("ids", "str", None, "ids to delete", "index delete", positional=True, nargs="*"),
    _cli("ids-file", "str", None, "a file of ids to delete, one a line", "index delete"),
    Option(
        "index",
        "str",
        "default",
        "index name, the Redis key namespace",
        (*NOT_INDEX_IMPORT, "explain"),
        metavar="NAME",
        check=index_name_problem,
    ),
    Option(
        "index",
        "str",
        None,
        "index name, the Redis key namespace (default: the name in the file)",
        ("index import",),
        metavar="NAME",
        check=index_name_problem,
    ),
)

OPTIONS: tuple[Option, ...] = (*OWN, *ENGINE, *REDIS, *KAFKA)


@dataclass(frozen=True)
class Command:
    name: str  # "detect", or "index stats" for an action of `index`
    help: str
    description: str | None = None


COMMANDS: tuple[Command, ...] = (
    Command(
        "detect",
        "decide every record of a JSONL file (no server needed)",
        'Read {"id", "text"} records (JSONL, optionally gzip) and write one decision per '
        "record, in input order: `duplicate_of` always names an earlier record. Bad lines "
        "become error records.",
    ),
    Command(
        "extract",
        "show what each HTML page of a JSONL file is decided on",
        "Read records as `neardup detect` does (learning each site's template from the "
        "pages in order) and write one JSON line per HTML page: the extraction (its path "
        "and the share of the page's words kept), the text kept, why the cut went there, "
        "the lines removed around the content, and the lines the template model called "
        "template.",
    ),
    Command(
        "explain",
        "show why two records are duplicates or not: fingerprints, tables, Jaccard, diff",
        "Explain a pair as the detector judges it: two ids of a JSONL file (--ids A,B), two "
        "files of one record each, a decision (--decisions FILE --id X: X against the "
        "record it duplicates, or a unique X against the earlier record nearest by "
        "fingerprint), or the same from a Redis index by id (no input file: --index, "
        "--redis-url; its block schemes and text window are the index's own). Pages are "
        "cut as `neardup detect` cuts them, the template model learning from the pages "
        "before, so give detect's engine options and --batch-size. Prints the fingerprints, "
        "their Hamming distance and the scheme's k, the block tables that hold both under "
        "one key (or why none does), the exact word-shingle Jaccard (a sketch's estimate "
        "where the index keeps only a sketch; the cosine for vectors), each page's cut, the "
        "verdict and its reason, and a word-level diff. With --json, one object with the "
        "keys a and b (id, where, space, fingerprint, extraction, why, text_kept), verdict "
        "(duplicate, reason, evidence, similarity, text), exact, distance, differing_bits "
        "(bit 0 the lowest), scheme (name, k, tables, probe_radius, description), "
        "shared_tables (table, bits, key_a, key_b, differing_key_bits), threshold, jaccard, "
        "shingles (a, b, shared), literal_shingle, sketch (estimate, sigma, bound, "
        "duplicate, banded, used), cosine (the detector's: the later vector against the "
        "earlier's stored form), cosine_exact, decision, agrees, note and diff "
        "(shared_words, words_a, words_b, spans of tag, a, b); a figure that does not "
        "apply is null. The reasons: exact_copy, above_threshold, below_threshold, "
        "beyond_k, no_shared_table, different_spaces, same_id, text_gone, "
        "nothing_to_compare.",
    ),
    Command(
        "review",
        "an HTML page of what a run decided, to choose its threshold and radius",
        "Read the decisions of `neardup detect` and the records they were made from (as "
        "detect reads them: give the same engine options) and write one self-contained "
        "HTML page: the distributions of Hamming distance and literal similarity with the "
        "threshold and k drawn, the pairs nearest the threshold on both sides with their "
        "word diffs, what raising or lowering each knob would change, the clusters and the "
        "duplicate rates by host; with --truth, precision and recall and every false "
        "positive and negative with why it went that way.",
    ),
    Command("fit-idf", "build a frozen, versioned IDF table from a corpus"),
    Command(
        "eval",
        "precision/recall of decisions against a truth file",
        "Score `duplicate` decisions against a truth file "
        '({"id", "max_jaccard_earlier", "most_similar_earlier"} per line) and draw a PNG '
        "report.",
    ),
    Command(
        "serve",
        "consume documents from Kafka, decide against Redis, publish decisions",
        "Run one member of a Kafka consumer group: documents from the input topic are decided "
        "against the Redis index and the decisions published to the output topic; bad records "
        "go to the dead-letter topic. Start more processes with the same --group to scale out.",
    ),
    Command("produce", "send a JSONL file to a Kafka topic, a record a line"),
    Command(
        "bench",
        "throughput, latency and Redis memory of serve, on a running Kafka and Redis "
        "(prints figures)",
    ),
    Command("tail", "print the records arriving on a topic"),
    Command(
        "plan",
        "the index layouts that fit N documents: bytes, lookups, CPU and recall of each",
        "Print the block-table layouts an index of --docs documents can be made with, best "
        "first: bytes a document by Redis key family, the entries a lookup reads, Redis "
        "commands and CPU a document (modelled), and the recall at --radius (the binomial "
        "model, or measured on --sample). Layouts whose buckets reach --max-bucket below N "
        "are never listed as fitting.",
    ),
    Command(
        "index",
        "maintain a Redis index: stats, export, import, delete, sweep, migrate",
        "Maintain the Redis index that `neardup serve` writes. Export writes every decision "
        "and every indexed document (with its text) as JSONL, a header line first; import "
        "writes such a file into a new index (on the same or another Redis, or a Redis "
        "Cluster), numbering the documents again in their order. Migrate rebuilds the block "
        "tables of an index of key layout 2 in place (offline: stop its consumers first; "
        "safe to run again after an interruption).",
    ),
    Command("index stats", "documents and memory of the index now, as JSON"),
    Command("index export", "write the index as JSONL (a backup, or to move it)"),
    Command("index import", "read an export into a new, empty index"),
    Command("index delete", "forget documents by id: no longer candidates, memory given back"),
    Command("index sweep", "give back now the memory of documents past the retention horizon"),
    Command(
        "index migrate",
        "rebuild an index of an older key layout in place (its consumers stopped)",
    ),
)


def of(command: str) -> list[Option]:
    """The options of a command (or an index action), in table order."""
    return [o for o in OPTIONS if command in o.commands]


def option(name: str, command: str) -> Option:
    """The row of option `name` (dashes or underscores) in `command`."""
    dest = name.replace("-", "_")
    for o in OPTIONS:
        if o.dest == dest and command in o.commands:
            return o
    raise KeyError(f"{command} has no option {name}")


def default(name: str, command: str = "detect") -> Any:
    """The table's default of an option in a command (the engine's are detect's)."""
    return option(name, command).default


def _by_dest(rows: Iterable[Option]) -> dict[str, Option]:
    return {o.dest: o for o in rows}


# One row per configurable name stands for all (a test checks that they agree in kind and
# choices): the environment and the file are checked against it, whatever the command.
CONFIGURABLE: Mapping[str, Option] = MappingProxyType(
    _by_dest(o for o in OPTIONS if o.configurable)
)
COMMAND_LINE_ONLY: Mapping[str, Option] = MappingProxyType(
    _by_dest(o for o in OPTIONS if not o.configurable and o.dest not in CONFIGURABLE)
)
# --topic and --index-name: flags only, never a variable or a key
ALIASES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        alias[2:].replace("-", "_"): tuple(sorted({r.dest for r in OPTIONS if alias in r.aliases}))
        for o in OPTIONS
        for alias in o.aliases
        if alias.startswith("--")
    }
)


# --------------------------------------------------------------------------- loading


def _label(row: Option) -> str:
    return f"the {row.name} argument" if row.positional else f"--{row.name}"


def _describe(value: Any) -> str:
    """What kind of TOML value this is, for a message."""
    kinds = {bool: "a boolean", int: "a whole number", float: "a float", str: "a string"}
    if isinstance(value, list):
        return "an array"
    return kinds.get(type(value), f"a {type(value).__name__}")


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)


def read_file(path: str) -> dict[str, Any]:
    """The options of a TOML config file, checked: {dest: value}."""
    import tomllib  # only when there is a file: a start without one does not pay for it

    where = f"config file {path}"
    try:
        with open(path, "rb") as f:
            body = tomllib.load(f)
    except OSError as exc:
        raise ConfigError(f"{where}: cannot be read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{where}: not valid TOML: {exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{where}: not valid TOML: not UTF-8 text") from None
    items: list[tuple[str, str, Any]] = []  # (key as written, "[neardup] " or "", value)
    for key, value in body.items():
        if key == "neardup" and isinstance(value, dict):
            items += [(k, "[neardup] ", v) for k, v in value.items()]
        else:
            items.append((key, "", value))
    values: dict[str, Any] = {}
    written: dict[str, str] = {}
    for key, table, value in items:
        dest = key.replace("-", "_")
        if isinstance(value, dict):
            name = f"neardup.{key}" if table else key
            raise ConfigError(
                f"{where}: unexpected table [{name}]: the options go at the top level or in "
                "a [neardup] table"
            )
        row = CONFIGURABLE.get(dest)
        if row is None:
            if dest == "config":
                problem = f"a config file cannot name another (--config or {CONFIG_VARIABLE} do)"
            elif dest in COMMAND_LINE_ONLY:
                label = _label(COMMAND_LINE_ONLY[dest])
                problem = f"{label} is given on the command line only, not in a config file"
            elif dest in ALIASES:
                keys = " or ".join(repr(d) for d in ALIASES[dest])
                problem = f"--{key} is a command-line alias only (did you mean {keys}?)"
            else:
                dashed = "-" in key
                names = [d.replace("_", "-") if dashed else d for d in CONFIGURABLE]
                close = difflib.get_close_matches(key, names, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ConfigError(f"{where}: unknown {table}key {key!r}{hint}")
            raise ConfigError(f"{where}: {table}key {key!r}: {problem}")
        if dest in written:
            raise ConfigError(f"{where}: {dest!r} is given twice, as {written[dest]} and {key}")
        written[dest] = key
        shown = "" if row.secret or row.url else f" = {_toml(value)}"  # never a password
        try:
            values[dest] = row.from_file(value)
        except Invalid as exc:
            raise ConfigError(f"{where}: {table}{key}{shown}: {exc}") from None
        except ValueError:
            raise ConfigError(
                f"{where}: {table}{key}{shown}: expected {row.expected()}, not {_describe(value)}"
            ) from None
    return values


def read_environ(environ: Mapping[str, str]) -> dict[str, Any]:
    """The options of the NEARDUP_* variables, checked: {dest: value}. An empty variable is
    unset; NEARDUP_CONFIG names the file; NEARDUP_STACK_* are not neardup's to read."""
    values: dict[str, Any] = {}
    known = sorted(o.variable for o in CONFIGURABLE.values())
    for name in sorted(environ):
        raw = environ[name]
        if not raw or not name.startswith(PREFIX) or name.startswith(IGNORED_PREFIX):
            continue
        if name == CONFIG_VARIABLE:
            continue
        dest = name[len(PREFIX) :].lower()
        row = CONFIGURABLE.get(dest) if name.isupper() else None
        if row is None:
            if dest in COMMAND_LINE_ONLY and name.isupper():
                label = _label(COMMAND_LINE_ONLY[dest])
                raise ConfigError(
                    f"environment: {name}: {label} is given on the command line only, not in "
                    "the environment"
                )
            if dest in ALIASES:
                close = [PREFIX + d.upper() for d in ALIASES[dest]]
            else:
                close = difflib.get_close_matches(name.upper(), known, n=1)
            hint = f" (did you mean {' or '.join(close)}?)" if close else ""
            raise ConfigError(f"environment: unknown variable {name}{hint}")
        shown = "" if row.secret or row.url else f"={raw!r}"  # never a password
        try:
            values[dest] = row.from_env(raw)
        except Invalid as exc:
            raise ConfigError(f"environment: {name}{shown}: {exc}") from None
        except ValueError:
            spelled = " (1/0, true/false, yes/no, on/off)" if row.kind == "bool" else ""
            raise ConfigError(
                f"environment: {name}{shown}: expected {row.expected()}{spelled}"
            ) from None
    return values


@dataclass(frozen=True)
class Config:
    """The configured values, {dest: value}: the environment's over the file's. The parser
    takes them as its defaults, so the command line overrides them."""

    values: Mapping[str, Any] = field(default_factory=dict)
    file: str | None = None

    @classmethod
    def load(cls, environ: Mapping[str, str], path: str | None = None) -> Config:
        """From the environment and the file `path`, else the one NEARDUP_CONFIG names
        (`path` "", as --config= gives it: no file)."""
        if path is None:
            path = environ.get(CONFIG_VARIABLE) or None
        values = read_file(path) if path else {}
        values.update(read_environ(environ))
        return cls(MappingProxyType(values), path)

    def default(self, row: Option) -> Any:
        """The default of an option's row: the configured value, else the table's."""
        if row.configurable and row.dest in self.values:
            return self.values[row.dest]
        return row.default

    def value(self, name: str, command: str) -> Any:
        """The configured value of an option in a command, else its default."""
        return self.default(option(name, command))
