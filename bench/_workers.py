"""Measurements that must run in a fresh interpreter, driven by the benchmark scripts.

    python bench/_workers.py NAME '{"json": "arguments"}'   -> one JSON line on stdout

pipeline     the loop of `neardup detect`, timed in process (no start-up, no imports);
             the caller names the kernels among detect's arguments (--kernels K)
fingerprint  fingerprinting alone with one engine's kernels (native or numpy), pinned to
             one CPU (the caller sets the BLAS/OpenMP thread variables in the environment;
             the affinity is set here before numpy is imported): Engine.fingerprint, and
             normalize + engine.kernels.prints timed apart
memory       the MemoryIndex a Detector builds over the corpus, measured with tracemalloc
             and with a recursive sys.getsizeof of its internal structures

Not a public interface: the arguments are whatever the scripts in bench/ pass.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sys
import time
from typing import Any


def _settings(opts: dict[str, Any]):  # type: ignore[no-untyped-def]
    from detector.settings import EngineSettings

    return EngineSettings(**opts)


def pipeline(args: dict[str, Any]) -> dict[str, Any]:
    """`neardup detect` in process, `repeat` times: `detector.cli.main([...])` with
    `detector.pipeline.Loop.run` wrapped in a timer, so the figure is exactly the loop that the
    command calls, with the command's own arguments (reading the gzip input, parsing,
    fingerprinting, deciding, writing the decisions), and none of the interpreter start-up
    or the imports (done before the clock starts). Also timed: the whole main() call, which
    adds building the Detector (engine, block scheme, IDF table) and opening the files."""
    t0 = time.perf_counter()
    import detector.cli
    import detector.index.memory
    import detector.pipeline
    import detector.stream.files

    imports = time.perf_counter() - t0
    real_run = detector.pipeline.Loop.run
    timed: list[float] = []

    def timed_run(*a: Any, **kw: Any) -> Any:
        t = time.perf_counter()
        try:
            return real_run(*a, **kw)
        finally:
            timed.append(time.perf_counter() - t)

    detector.pipeline.Loop.run = timed_run  # type: ignore[method-assign]
    argv = ["detect", args["corpus"], "-o", args["out"], "--no-progress", *args.get("extra", [])]
    runs = []
    for _ in range(args.get("repeat", 1)):
        err = io.StringIO()  # the summary line, which names the kernels that ran
        t0 = time.perf_counter()
        with contextlib.redirect_stderr(err):
            rc = detector.cli.main(argv)
        whole = time.perf_counter() - t0
        sys.stderr.write(err.getvalue())
        if rc != 0:
            raise SystemExit(f"neardup detect (in process) exited {rc}")
        lines = err.getvalue().strip().splitlines()
        summary = lines[-1] if lines else ""
        m = re.search(r"; (\w+) kernels$", summary)
        runs.append(
            {
                "main_s": whole,
                "run_s": timed[-1],
                "load1": os.getloadavg()[0],
                "kernels": m[1] if m else None,
                "summary": summary,
            }
        )
    return {"imports_s": imports, "runs": runs}


def fingerprint(args: dict[str, Any]) -> dict[str, Any]:
    """Fingerprinting alone, batches of `batch_size`, `repeat` times with an
    Engine(kernels=args["kernels"]), fresh each run: Engine.fingerprint (normalize, the
    kernels, Print objects), and the "bare" path timed in two parts: normalize (markup off,
    then engine.kernels.fold: NFKC and case folding), then engine.kernels.prints(texts)
    (fingerprints, exact-copy digests, the literal pass's shingle sets)."""
    cpu = args["cpu"]
    os.sched_setaffinity(0, {cpu})  # before numpy starts any thread
    from detector.engine import Engine
    from detector.normalize import strip_markup
    from detector.records import parse_document
    from detector.stream.files import input_label, open_input, read_lines
    from detector.tokenize import char_classes

    kernels = args.get("kernels", "auto")
    with open_input(args["corpus"]) as stream:
        docs = []
        for raw, _ in read_lines(stream, input_label(args["corpus"])):
            try:
                docs.append(parse_document(raw))
            except Exception:
                continue
    size = args.get("batch_size", 512)
    batches = [docs[i : i + size] for i in range(0, len(docs), size)]
    text_bytes = sum(len(d.text.encode("utf-8")) for d in docs)
    t0 = time.perf_counter()
    char_classes()  # built once per process on the first non-ASCII text; not per batch
    char_table = time.perf_counter() - t0

    name = None
    engine_runs, bare_runs = [], []
    for _ in range(args.get("repeat", 3)):
        engine = Engine(kernels=kernels)  # fresh each run, as a stream starts
        name = engine.kernels.name
        t0 = time.perf_counter()
        for b in batches:
            engine.fingerprint(b)
        engine_runs.append(time.perf_counter() - t0)

        engine = Engine(kernels=kernels)
        prints = engine.kernels.prints
        stages = {"normalize": 0.0, "kernel": 0.0}
        for b in batches:
            t0 = time.perf_counter()
            texts = engine.kernels.fold([strip_markup(d.text) for d in b])
            t1 = time.perf_counter()
            prints(texts)
            t2 = time.perf_counter()
            stages["normalize"] += t1 - t0
            stages["kernel"] += t2 - t1
        bare_runs.append({"total": sum(stages.values()), **stages})
    return {
        "cpu": cpu,
        "affinity": sorted(os.sched_getaffinity(0)),
        "threads_env": {
            k: os.environ.get(k)
            for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
        },
        "kernels_asked": kernels,
        "kernels": name,
        "docs": len(docs),
        "text_mb": text_bytes / 1e6,
        "batches": len(batches),
        "char_table_s": char_table,
        "engine_runs_s": engine_runs,
        "bare_runs": bare_runs,
    }


def deep_sizeof(obj: object, seen: set[int]) -> int:
    """sys.getsizeof of obj and everything it holds, each object counted once in `seen`."""
    import numpy as np

    stack = [obj]
    total = 0
    while stack:
        o = stack.pop()
        if id(o) in seen or isinstance(o, type):
            continue
        seen.add(id(o))
        total += sys.getsizeof(o)  # a numpy array that owns its data includes it
        if isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, list | tuple | set | frozenset):
            stack.extend(o)
        elif isinstance(o, np.ndarray):
            if o.base is not None:
                stack.append(o.base)
        elif hasattr(o, "__dict__"):
            stack.append(o.__dict__)
    return total


def memory(args: dict[str, Any]) -> dict[str, Any]:
    """tracemalloc current after deciding the whole corpus, with only the MemoryIndex kept
    alive (the Detector, its engine and token table, and its literal-pass cache dropped,
    gc run), minus current before the index was made. The input is read and parsed
    before tracing starts; batches go through Detector.process as run() sends them."""
    import gc
    import tracemalloc

    from detector.decide import Detector
    from detector.index.memory import MemoryIndex
    from detector.records import parse_document
    from detector.stream.files import input_label, open_input, read_lines
    from detector.tokenize import char_classes

    settings = _settings(args.get("settings", {}))
    with open_input(args["corpus"]) as stream:
        docs = []
        for raw, _ in read_lines(stream, input_label(args["corpus"])):
            try:
                docs.append(parse_document(raw, settings.max_bytes))
            except Exception:
                continue
    size = args.get("batch_size", 512)
    batches = [docs[i : i + size] for i in range(0, len(docs), size)]
    scheme = settings.block_scheme()
    engine = settings.engine()  # loads the IDF table, if any, before tracing
    literal = settings.literal()
    char_classes()  # a process-wide cache, not the index's
    gc.collect()

    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    index = MemoryIndex(scheme, "default")
    detector = Detector(engine, index, scheme, literal, settings.max_candidates)
    t0 = time.perf_counter()
    for batch in batches:
        detector.process(batch)
    traced_run = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    del detector, engine, literal
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()

    seen: set[int] = {id(scheme)}
    parts = {}
    # Shared objects (ids, fingerprint ints) count in the first structure that holds them.
    for name, value in vars(index).items():
        if (
            name != "scheme"
            and not isinstance(value, type)
            and (isinstance(value, dict | list | tuple | set) or hasattr(value, "__dict__"))
        ):
            parts[name] = deep_sizeof(value, seen)
    return {
        "records": sum(len(b) for b in batches),
        "stats": index.stats(),
        "traced_bytes": after - before,
        "traced_peak_bytes": peak - before,
        "sizeof_bytes": parts,
        "traced_run_s": traced_run,
    }


def main() -> int:
    name, raw = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "{}"
    result = {"pipeline": pipeline, "fingerprint": fingerprint, "memory": memory}[name](
        json.loads(raw)
    )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
