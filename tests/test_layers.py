"""The package's layers, proved from its imports: the algorithm is pure, the adapters stay
behind their interfaces, and the command line loads only what a command needs."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import ROOT

PACKAGE = ROOT / "detector"
# The algorithm: values in, values out. It may use numpy and xxhash, the error tree and the
# record types, and itself; nothing of the index, the streams, metrics or configuration.
# (tables keeps the Unicode tables in a cache file: the one I/O, and it may fail.)
CORE = [
    *("normalize", "tokenize", "features", "hashing", "simhash", "blocks", "verify", "vectors"),
    *("tables", "kernels", "engine", "sketch"),
]
CORE_MAY_IMPORT = {*CORE, "errors", "records"}
THIRD_PARTY_CORE = {"numpy", "xxhash", "_native"}  # _native: the Rust kernels (native/)


def imports_of(path: Path) -> set[str]:
    """Modules a file imports, as dotted names relative to `detector` ("index.memory") for
    the package's own, and top-level names ("numpy") for the rest."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    here = path.relative_to(PACKAGE).with_suffix("").parts[:-1]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                out.add(_own(alias.name) or alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the file's own package, `level` steps up
                base = list(here[: len(here) - node.level + 1])
                parts = [*base, *(node.module.split(".") if node.module else [])]
                out.add(".".join(parts))
                if node.module is None:  # from . import x: x may be a module too
                    out.update(".".join([*base, a.name]) for a in node.names)
            elif node.module:
                out.add(_own(node.module) or node.module.split(".")[0])
    return {name for name in out if name and name != "__future__"}


def _own(name: str) -> str | None:
    return name.removeprefix("detector.") if name.startswith("detector.") else None


def own_modules() -> set[str]:
    return {
        ".".join(p.relative_to(PACKAGE).with_suffix("").parts).removesuffix(".__init__")
        for p in PACKAGE.rglob("*.py")
    }


@pytest.mark.parametrize("module", CORE)
def test_the_algorithm_imports_nothing_but_itself_numpy_and_xxhash(module: str) -> None:
    found = imports_of(PACKAGE / f"{module}.py")
    own = {m for m in found if m in own_modules() or m.split(".")[0] in own_modules()}
    stdlib = set(sys.stdlib_module_names)
    assert own <= CORE_MAY_IMPORT, f"{module} imports {sorted(own - CORE_MAY_IMPORT)}"
    foreign = found - own - stdlib
    assert foreign <= THIRD_PARTY_CORE, f"{module} imports {sorted(foreign - THIRD_PARTY_CORE)}"


def test_the_imports_are_read_right() -> None:
    """The checker itself: it sees relative, absolute and `from . import` forms."""
    assert {"hashing", "normalize"} <= imports_of(PACKAGE / "tokenize.py")
    assert "index" in imports_of(PACKAGE / "decide.py")
    assert "stream" in imports_of(PACKAGE / "stream" / "memory.py")
    assert "numpy" in imports_of(PACKAGE / "simhash.py")


def loaded_by(statement: str) -> set[str]:
    """Top-level and package modules present after `statement` in a fresh interpreter."""
    code = f"import sys; {statement}; print('\\n'.join(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return set(done.stdout.split())


def test_the_engine_loads_no_adapter_and_no_server_client() -> None:
    loaded = loaded_by("import detector.engine, detector.decide, detector.pipeline")
    for unwanted in ("redis", "kafka", "lz4", "prometheus_client", "detector.index.memory"):
        assert unwanted not in loaded, f"the engine pulls in {unwanted}"
    assert not {m for m in loaded if m.startswith(("detector.stream.", "detector.options"))} - {
        "detector.stream.memory"
    }


def test_the_kafka_adapter_needs_no_numpy() -> None:
    loaded = loaded_by("import detector.stream.kafka")
    assert "numpy" not in loaded
    assert "redis" not in loaded


# The Redis index from the bottom up: each of these imports only those before it (the
# package's docstring lists them so); the index never imports its maintenance.
REDIS = [
    "replication",
    "connect",
    "keys",
    "lua",
    "resp",
    "cluster",
    "footprint",
    "store",
    "templates",
    "index",
]
REDIS += ["maintenance", "bulk"]


def redis_imports() -> dict[str, set[str]]:
    """The index.redis modules each of its modules imports, the package itself left out
    (`from . import lua` names it, but it is loading already)."""
    folder = PACKAGE / "index" / "redis"
    return {
        path.stem: {
            name.removeprefix("index.redis.")
            for name in imports_of(path)
            if name.startswith("index.redis.")
        }
        for path in folder.glob("*.py")
        if path.stem != "__init__"
    }


def test_the_redis_index_imports_one_way() -> None:
    graph = redis_imports()
    for at, module in enumerate(REDIS):
        later = graph[module] - set(REDIS[:at])
        assert not later, f"index/redis/{module}.py imports {sorted(later)}, not below it"
    # and no circle among the package's other modules either
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, f"an import circle: {' -> '.join((*path, module))}"
        if module in done:
            return
        for name in graph.get(module, set()):
            visit(name, (*path, module))
        done.add(module)

    for module in graph:
        visit(module, ())
