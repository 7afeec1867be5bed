"""Fixtures of the integration suite: the real Kafka and Redis, from the source servers.py
chose, must answer (a missing server fails the suite, it is never skipped), and every test
gets its own topics, consumer group and index name, removed again at the end."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
import redis
from redis.cluster import RedisCluster

# kafka-python 3 loads its protocol schemas with a deprecated importlib call, at import time
for _message in ("read_text is deprecated", "open_text is deprecated"):
    warnings.filterwarnings("ignore", _message, DeprecationWarning)

from .admin import create_topics, delete_groups, delete_topics, drop_index  # noqa: E402
from .endpoints import (  # noqa: E402
    BOOTSTRAP,
    REDIS_CLUSTER_URL,
    REDIS_URL,
    cluster_client,
    redis_client,
)
from .processes import Names, Serve  # noqa: E402
from .readers import DecisionReader, TopicReader  # noqa: E402
from .servers import (  # noqa: E402
    SERVERS,
    Servers,
    ServersError,
    kafka_answers,
    turn,
    when_ready,
)

STARTUP_WAIT = 60.0  # seconds the servers get to answer (CI may have just started them)
HERE = Path(__file__).resolve().parent
# Quick tests first, the slow fault tests (which restart the servers) last.
ORDER = [
    "test_redis_index",
    "test_dead_letters",
    "test_security",
    "test_concurrency",
    "test_serve_e2e",
    "test_exactly_once",
]


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test of this directory `integration` (so that `pytest -m "not
    integration"` runs the unit suite alone, with no server), and reorder them among
    themselves (the others keep their places)."""
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.integration)
    slots = [n for n, item in enumerate(items) if item.path.parent == HERE]

    def rank(item: pytest.Item) -> int:
        return ORDER.index(item.path.stem) if item.path.stem in ORDER else len(ORDER)

    ordered = sorted((items[n] for n in slots), key=rank)
    for n, item in zip(slots, ordered, strict=True):
        items[n] = item


def pytest_configure(config: pytest.Config) -> None:
    # kafka-python 3 loads its protocol schemas with a deprecated importlib call
    for message in ("read_text is deprecated", "open_text is deprecated"):
        config.addinivalue_line("filterwarnings", f"ignore:{message}:DeprecationWarning")


def pytest_report_header() -> str:
    return f"servers: {SERVERS.describe()} (NEARDUP_STACK_SERVERS: urls, containers, ops)"


@pytest.fixture(scope="session", autouse=True)
def servers_answer() -> Iterator[None]:
    """The servers of the chosen source, started if it starts them; the session fails (never
    skips) when Kafka or Redis does not answer."""
    try:
        SERVERS.start()
        when_ready(lambda: redis_client().ping(), f"Redis at {REDIS_URL}", STARTUP_WAIT)
        when_ready(lambda: kafka_answers(BOOTSTRAP), f"Kafka at {BOOTSTRAP}", STARTUP_WAIT)
    except ServersError as exc:
        why = f"{exc}\n{SERVERS.diagnose()}"
        pytest.fail(f"the integration tests need Kafka and Redis: {why}", pytrace=False)
    yield
    SERVERS.stop()


@pytest.fixture(autouse=True)
def one_at_a_time_where_needed(request: pytest.FixtureRequest) -> Iterator[None]:
    """Tests run side by side under pytest-xdist (`-n`), but one marked `exclusive` runs
    alone, or alone among those marked `exclusive(NAME)` (servers.turn); set up before the
    test's other fixtures, and ended after them."""
    mark = request.node.get_closest_marker("exclusive")
    alone_on = mark.args if mark else ()
    with turn(SERVERS.settings.state, mark is not None and not alone_on, alone_on):
        yield


@pytest.fixture(scope="session")
def servers() -> Servers:
    """The servers, for the tests that restart or pause them."""
    return SERVERS


@pytest.fixture
def rclient() -> Iterator[redis.Redis]:
    client = redis_client()
    yield client
    client.close()


@pytest.fixture(params=["server", "cluster"])
def backend(request: pytest.FixtureRequest) -> Iterator[redis.Redis | RedisCluster]:
    """The single Redis server, then the Redis Cluster: the index must hold on both."""
    client = redis_client() if request.param == "server" else cluster_client()
    yield client
    client.close()


@pytest.fixture
def names(rclient: redis.Redis) -> Iterator[Names]:
    """Unique names; the output and dead-letter topics exist (one partition each). At the
    end: the index's Redis keys and the topics are deleted."""
    n = Names()
    try:
        create_topics({n.output: 1, n.dead_letter: 1})
        yield n
    finally:
        try:
            drop_index(rclient, n.index)
        except redis.RedisError:  # a fault test may leave Redis restarting: try once more
            time.sleep(2)
            drop_index(redis_client(), n.index)
        delete_topics(n.topics())
        delete_groups([n.group])


@pytest.fixture(params=["server", "cluster"])
def index_at(request: pytest.FixtureRequest, names: Names) -> Iterator[dict[str, str]]:
    """Where serve keeps its index, as environment for `serve(env=...)`: the Redis server,
    then the Redis Cluster (whose keys of the test's index are deleted at the end)."""
    if request.param == "server":
        yield {}
        return
    client = cluster_client()
    try:
        yield {"NEARDUP_REDIS_URL": REDIS_CLUSTER_URL, "NEARDUP_REDIS_CLUSTER": "1"}
    finally:
        drop_index(client, names.index)
        client.close()


@pytest.fixture
def serve(names: Names, tmp_path: Path) -> Iterator[Callable[..., Serve]]:
    """Factory of started `neardup serve` processes of this test's names; whatever still
    runs at the end gets SIGTERM (then SIGKILL)."""
    started: list[Serve] = []

    def start(extra: Sequence[str] = (), env: dict[str, str] | None = None) -> Serve:
        s = Serve(names, tmp_path / f"serve-{len(started)}.log", extra, env).start()
        started.append(s)
        return s

    yield start
    for s in started:
        if s.proc is not None and s.alive():
            s.proc.terminate()
    for s in started:
        try:
            s.wait(60)
        except Exception:
            s.kill()


@pytest.fixture
def decisions(names: Names) -> Iterator[DecisionReader]:
    reader = DecisionReader(names.output)
    yield reader
    reader.close()


@pytest.fixture
def dead_letters(names: Names) -> Iterator[TopicReader]:
    reader = TopicReader(names.dead_letter)
    yield reader
    reader.close()
