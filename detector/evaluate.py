"""`neardup eval`: scores of duplicate decisions against exact truth, and a PNG report."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .blocks import BlockScheme
from .errors import ConfigError
from .options import default
from .stream.files import open_input

if TYPE_CHECKING:
    from matplotlib.figure import Figure

MAX_PAIRWISE = 30_000  # brute-force nearest-earlier distances beyond this get too slow
MEASURES = {"jaccard": ("max_jaccard_earlier", 0.8), "cosine": ("max_cosine_earlier", 0.9)}
ORDERS = ("decided", "input")


def truth_measure(
    truth: list[dict[str, Any]], measure: str = "auto", threshold: float | None = None
) -> tuple[str, float]:
    """The truth field a run is scored on, and its threshold: cosine when the truth has
    max_cosine_earlier (an embedding stream's), else the shingle Jaccard."""
    if measure == "auto":
        measure = "cosine" if truth and "max_cosine_earlier" in truth[0] else "jaccard"
    if measure not in MEASURES:
        raise ConfigError(f"measure must be one of {', '.join(MEASURES)}, not {measure!r}")
    field, default = MEASURES[measure]
    if measure == "jaccard" and threshold is not None and threshold < 0:  # a cosine's may be
        raise ConfigError(f"--threshold of a Jaccard must be between 0 and 1, not {threshold}")
    return field, default if threshold is None else threshold


def load_jsonl(path: str) -> list[dict[str, Any]]:
    out = []
    with open_input(path) as f:
        for number, line in enumerate(f, start=1):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except ValueError as exc:
                    raise ConfigError(f"{path}:{number}: not JSON: {exc}") from exc
    return out


def evaluate(
    decisions: list[dict[str, Any]],
    truth: list[dict[str, Any]],
    threshold: float = 0.8,
    field: str = "max_jaccard_earlier",
    order: str = "decided",
) -> dict[str, Any]:
    """Precision, recall and F1 of the `duplicate` decisions. order="input" scores the
    decisions' clusters rather than their direction (`in_input_order`)."""
    if truth and not all("id" in t and field in t for t in truth[:1]):
        raise ConfigError(
            f"the truth file needs id and {field} on every line "
            "(are the decisions and truth files the right way round?)"
        )
    if decisions and not all("id" in d and "decision" in d for d in decisions[:1]):
        raise ConfigError("the decisions file needs id and decision on every line")
    if order not in ORDERS:
        raise ConfigError(f"order must be one of {', '.join(ORDERS)}, not {order!r}")
    position = {t["id"]: i for i, t in enumerate(truth)}
    actual = {t["id"]: t[field] >= threshold for t in truth}
    said = {d["id"]: d for d in decisions}  # a decision published twice counts once
    # Of the decisions as they are, whatever is scored: relabelling makes every one earlier.
    late = sum(
        1
        for doc_id, d in said.items()
        if doc_id in position
        and d["decision"] == "duplicate"
        and position.get(d["duplicate_of"], len(position)) >= position[doc_id]
    )
    relabelled = None
    if order == "input":
        said, relabelled = in_input_order(said, truth)
    tps, fps, fns = _outcomes(said, actual)
    tp, fp, fn = len(tps), len(fps), len(fns)
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    scores: dict[str, Any] = {
        "truth": f"{field} >= {threshold}",
        "records": len(truth),
        "decided": sum(1 for i in actual if i in said),
        "true_duplicates": tp + fn,
        "said_duplicate": tp + fp,
        "precision": round(precision, 4),
        "recall": round(recall, 4),
        "f1": round(f1, 4),
        "duplicate_of_not_earlier": late,
    }
    if relabelled is not None:
        scores |= {"order": "input", "relabelled": relabelled}
    return scores


def outcomes(
    decisions: Sequence[dict[str, Any]],
    truth: Sequence[dict[str, Any]],
    threshold: float = 0.8,
    field: str = "max_jaccard_earlier",
) -> tuple[list[str], list[str], list[str]]:
    """The ids evaluate() counts (order "decided"): true positives, false positives and
    false negatives, in the truth's order."""
    said = {d["id"]: d for d in decisions}
    return _outcomes(said, {t["id"]: t[field] >= threshold for t in truth})


def _outcomes(
    said: dict[str, dict[str, Any]], actual: dict[str, bool]
) -> tuple[list[str], list[str], list[str]]:
    tps: list[str] = []
    fps: list[str] = []
    fns: list[str] = []
    for doc_id, is_dup in actual.items():
        d = said.get(doc_id)
        predicted = d is not None and d["decision"] == "duplicate"
        if predicted:
            (tps if is_dup else fps).append(doc_id)
        elif is_dup:
            fns.append(doc_id)
    return tps, fps, fns


def in_input_order(
    said: dict[str, dict[str, Any]], truth: list[dict[str, Any]]
) -> tuple[dict[str, dict[str, Any]], int]:
    """The decisions (by id) with each cluster decided again in the truth's order, and how
    many of them that turned from unique to duplicate or back.

    Consumers of several partitions decide records in an order that is not the input's:
    of two near-copies, the later may come first and the earlier be called its duplicate,
    which the truth (in input order) scores as a false alarm and a miss. A cluster is
    what `duplicate_of` joined, whatever its direction; in each, the record first in the
    truth is unique and the others are duplicates of it. Clusters join through chains (A
    and C each near B, not near each other, are one cluster), so a record can be called a
    duplicate of one it is not near, a false alarm when nothing earlier is near it. An id
    the truth does not list (named from an index older than this stream) counts as
    earlier than all of the truth's records."""
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]  # halve the path, so chains stay short
            x = parent[x]
        return x

    for doc_id, d in said.items():
        if d["decision"] == "duplicate" and d.get("duplicate_of") is not None:
            parent[root(doc_id)] = root(d["duplicate_of"])
    position = {t["id"]: i for i, t in enumerate(truth)}
    first: dict[str, str] = {}
    for x in sorted(parent, key=lambda x: (position.get(x, -1), x)):
        first.setdefault(root(x), x)
    out, changed = {}, 0
    for doc_id, d in said.items():
        head = first[root(doc_id)] if doc_id in parent else doc_id
        decision = "unique" if head == doc_id else "duplicate"
        changed += decision != d["decision"]
        out[doc_id] = {**d, "decision": decision, "duplicate_of": None if head == doc_id else head}
    return out, changed


def radius(decisions: list[dict[str, Any]], given: int | None = None) -> tuple[int, str]:
    """The Hamming radius k the decisions were made with, and where that came from.

    Records with an embedding carry their k; text decisions carry no scheme, so theirs
    is the default scheme's unless a duplicate lies farther than it (then k is at least
    that far)."""
    if given is not None:
        return given, "--k"
    carried = Counter(d["k"] for d in decisions if d.get("k") is not None)
    # The report's fingerprints are mostly hyperplane ones when most records had a vector.
    if sum(carried.values()) * 2 > len(decisions):
        return carried.most_common(1)[0][0], "carried by the decisions"
    scheme = default("scheme")
    k = BlockScheme.parse(scheme).k
    farthest = max(
        (d.get("distance") or 0 for d in decisions if d.get("k") is None),
        default=0,
    )
    if farthest > k:
        return farthest, "at least: the farthest duplicate; give --k"
    return k, f"the default scheme {scheme}; else --k"


def _fingerprints(decisions: list[dict[str, Any]], truth: list[dict[str, Any]]) -> np.ndarray:
    fp = {d["id"]: int(d["fingerprint"], 16) for d in decisions}
    missing = [t["id"] for t in truth if t["id"] not in fp]
    if missing:
        raise ConfigError(f"{len(missing)} truth records have no decision, e.g. {missing[0]}")
    return np.array([fp[t["id"]] for t in truth], np.uint64)


def nearest_earlier(fps: np.ndarray) -> np.ndarray:
    """Hamming distance of each fingerprint to the nearest earlier one (65 for the first)."""
    out = np.full(len(fps), 65)
    for i in range(1, len(fps)):
        out[i] = int(np.bitwise_count(fps[:i] ^ fps[i]).min())
    return out


def plot_report(
    decisions: list[dict[str, Any]],
    truth: list[dict[str, Any]],
    threshold: float,
    path: str,
    field: str = "max_jaccard_earlier",
    order: str = "decided",
    k: int | None = None,
) -> None:
    report_figure(decisions, truth, threshold, field, order, k).savefig(path, dpi=110)


def report_figure(
    decisions: list[dict[str, Any]],
    truth: list[dict[str, Any]],
    threshold: float,
    field: str = "max_jaccard_earlier",
    order: str = "decided",
    k: int | None = None,
) -> Figure:
    """The distance distribution of the near-duplicate pairs against the rest, and the
    fingerprint's precision and recall as k varies, each with the run's k marked
    (`radius`: given, else found from the decisions)."""
    from matplotlib.figure import Figure  # no pyplot: no backend or global figure to close

    # Scored on the whole truth, as printed: a cluster's first record may lie beyond the cut.
    run = evaluate(decisions, truth, threshold, field, order)
    k, source = radius(decisions, k)
    truth = truth[:MAX_PAIRWISE]
    fps = _fingerprints(decisions, truth)
    index = {t["id"]: i for i, t in enumerate(truth)}
    is_dup = np.array([t[field] >= threshold for t in truth])
    measure = "cosine" if field == "max_cosine_earlier" else "Jaccard"
    pairs = [
        (i, index[t["most_similar_earlier"]])
        for i, t in enumerate(truth)
        if t.get("most_similar_earlier") in index
    ]
    dist = np.array([int(np.bitwise_count(fps[i] ^ fps[j])) for i, j in pairs])
    dup_pair = np.array([is_dup[i] for i, _ in pairs], bool)

    # Every legend sits below its axes, where it hides no curve however the curves fall.
    fig = Figure(figsize=(12, 5.6), layout="constrained")
    left, right = fig.subplots(1, 2)
    below = {"loc": "upper center", "bbox_to_anchor": (0.5, -0.16), "fontsize": 8}
    marker = {"color": "0.25", "ls": ":", "lw": 1.5}
    bins = np.arange(0, 40) - 0.5
    for which, label in (
        (dup_pair, f"near-duplicate pairs ({measure} >= {threshold})"),
        (~dup_pair, "each other record and its most similar earlier one"),
    ):
        if which.any():  # a share of no pairs is no bar, not a division by zero
            left.hist(dist[which], bins=bins, alpha=0.6, density=True, label=label)
    # Between the bars of k and k + 1: pairs to the right are never candidates.
    left.axvline(k + 0.5, **marker, label=f"k = {k}: farther pairs are never compared")
    left.secondary_xaxis("top").set_xticks([k + 0.5], [f"k = {k}"])
    left.set_xlabel("Hamming distance of the fingerprints")
    left.set_ylabel("share of pairs")
    left.set_title("Distance distribution")
    left.legend(**below)

    nearest = nearest_earlier(fps)
    widest = 24 if measure == "cosine" else 16  # vectors' radius is wider
    ks = np.arange(0, max(widest, k + 2) + 1)
    precision, recall = [], []
    for cut in ks:
        said = nearest <= cut
        tp = int((said & is_dup).sum())
        precision.append(tp / max(int(said.sum()), 1))
        recall.append(tp / max(int(is_dup.sum()), 1))
    scored = " in input order" if order == "input" else ""
    right.plot(ks, precision, "o-", label="precision, fingerprint only")
    right.plot(ks, recall, "s-", label="recall, fingerprint only")
    right.axhline(
        run["precision"],
        color="C0",
        ls="--",
        label=f"this run's precision{scored} ({run['precision']:.3f})",
    )
    right.axhline(
        run["recall"],
        color="C1",
        ls="--",
        label=f"this run's recall{scored} ({run['recall']:.3f})",
    )
    right.axvline(k, **marker, label=f"k = {k}, this run's ({source})")
    right.secondary_xaxis("top").set_xticks([k], [f"k = {k}"])
    right.set_xlabel("k (largest Hamming distance called a duplicate)")
    right.set_ylim(0, 1.02)
    right.set_title("Precision and recall as k varies")
    right.legend(ncols=2, **below)
    fig.suptitle(f"neardup eval: {len(truth)} records, {int(is_dup.sum())} near-duplicates")
    return fig
