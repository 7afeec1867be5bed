"""`neardup eval`: scores of duplicate decisions against exact truth, and a PNG report."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from .errors import ConfigError
from .stream.files import open_input

MAX_PAIRWISE = 30_000  # brute-force nearest-earlier distances beyond this get too slow
MEASURES = {"jaccard": ("max_jaccard_earlier", 0.8), "cosine": ("max_cosine_earlier", 0.9)}


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
) -> dict[str, Any]:
    if truth and not all("id" in t and field in t for t in truth[:1]):
        raise ConfigError(
            f"the truth file needs id and {field} on every line "
            "(are the decisions and truth files the right way round?)"
        )
    if decisions and not all("id" in d and "decision" in d for d in decisions[:1]):
        raise ConfigError("the decisions file needs id and decision on every line")
    order = {t["id"]: i for i, t in enumerate(truth)}
    actual = {t["id"]: t[field] >= threshold for t in truth}
    said = {d["id"]: d for d in decisions}
    tp = fp = fn = late = 0
    for doc_id, is_dup in actual.items():
        d = said.get(doc_id)
        predicted = d is not None and d["decision"] == "duplicate"
        tp += predicted and is_dup
        fp += predicted and not is_dup
        fn += is_dup and not predicted
        if (
            d is not None
            and predicted
            and order.get(d["duplicate_of"], len(order)) >= order[doc_id]
        ):
            late += 1
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
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
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    bins = np.arange(0, 40) - 0.5
    for which, label in (
        (dup_pair, f"near-duplicate pairs ({measure} >= {threshold})"),
        (~dup_pair, "each other record and its most similar earlier one"),
    ):
        if which.any():  # a share of no pairs is no bar, not a division by zero
            left.hist(dist[which], bins=bins, alpha=0.6, density=True, label=label)
    left.set_xlabel("Hamming distance of the fingerprints")
    left.set_ylabel("share of pairs")
    left.set_title("Distance distribution")
    left.legend(fontsize=8)

    nearest = nearest_earlier(fps)
    ks = np.arange(0, 25 if measure == "cosine" else 17)  # vectors' radius is wider
    precision, recall = [], []
    for k in ks:
        said = nearest <= k
        tp = int((said & is_dup).sum())
        precision.append(tp / max(int(said.sum()), 1))
        recall.append(tp / max(int(is_dup.sum()), 1))
    run = evaluate(decisions, truth, threshold, field)
    right.plot(ks, precision, "o-", label="precision, fingerprint only")
    right.plot(ks, recall, "s-", label="recall, fingerprint only")
    right.axhline(
        run["precision"],
        color="C0",
        ls="--",
        label=f"this run's precision ({run['precision']:.3f})",
    )
    right.axhline(
        run["recall"], color="C1", ls="--", label=f"this run's recall ({run['recall']:.3f})"
    )
    right.set_xlabel("k (largest Hamming distance called a duplicate)")
    right.set_ylim(0, 1.02)
    right.set_title("Precision and recall as k varies")
    right.legend(fontsize=8, loc="lower right")
    fig.suptitle(f"neardup eval: {len(truth)} records, {int(is_dup.sum())} near-duplicates")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
