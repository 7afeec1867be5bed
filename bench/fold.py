#!/usr/bin/env python3
"""The fold (NFKC, then case folding) of the texts that need NFKC: the native kernels'
(native/src/nfkc.rs) against normalize.fold (unicodedata), microseconds a text.

    python bench/fold.py [--corpus PATH] [--records 3000] [--repeat 5]

The texts are the "text" fields of the corpus's first --records records (the dev stream by
default) that are not ASCII and not in NFKC already, as the engine would hand them over
before markup removal. Each side folds all of them, one batch, best of --repeat passes,
one thread. Figures only; it asserts nothing beyond the two agreeing.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import unicodedata

from _common import ROOT, read_records, resolve_corpus

sys.path.insert(0, str(ROOT))

from detector import kernels
from detector.features import Featurizer
from detector.normalize import fold


def best(run, repeat: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus")
    parser.add_argument("--records", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    corpus = resolve_corpus(args.corpus)
    records = [json.loads(r) for r in read_records(corpus)[: args.records]]
    texts = [t for r in records if isinstance(t := r.get("text"), str)]
    needing = [t for t in texts if not t.isascii() and not unicodedata.is_normalized("NFKC", t)]
    if not needing:
        sys.exit("no text of the corpus needs NFKC")
    native = kernels.make("native", Featurizer(), 5)
    assert native.fold(needing) == [fold(t) for t in needing], "the two folds differ"
    left = sum(f is None for f in native._kernels.fold(needing))

    python_s = best(lambda: [fold(t) for t in needing], args.repeat)
    native_s = best(lambda: native.fold(needing), args.repeat)
    n = len(needing)
    chars = sum(map(len, needing)) / n
    print(f"{corpus.name}: {n} of {len(texts)} texts need NFKC ({chars:,.0f} characters each)")
    print(f"  native fold left to unicodedata: {left}")
    print(f"  python normalize.fold: {1e6 * python_s / n:8.1f} us a text")
    print(f"  native kernels.fold:   {1e6 * native_s / n:8.1f} us a text")
    print(f"  python / native:       {python_s / native_s:8.1f}x")


if __name__ == "__main__":
    main()
