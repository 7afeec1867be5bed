"""The DESIGN invariants, checked on what `neardup serve` published."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..helpers import verdict


def when(decision: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(decision["decided_at"])


def check_invariants(
    records: list[dict[str, Any]],
    published: dict[str, list[dict[str, Any]]],
    reference: list[dict[str, Any]],
    threshold: float = 0.8,
) -> dict[str, dict[str, Any]]:
    """The DESIGN invariants on what serve published; returns one decision per id."""
    ids = [r["id"] for r in records]
    missing = [i for i in ids if i not in published]
    assert not missing, f"{len(missing)} records got no decision, e.g. {missing[:5]}"
    strangers = set(published) - set(ids)
    assert not strangers, f"decisions for ids never sent: {sorted(strangers)[:5]}"

    # A record delivered (or decided) more than once got the same decision each time.
    for i, ds in published.items():
        assert len({verdict(d) for d in ds}) == 1, f"{i} got different decisions: {ds}"
    final = {i: ds[0] for i, ds in published.items()}

    for i, d in final.items():
        assert d["decision"] in ("unique", "duplicate"), d
        assert (d["decision"] == "duplicate") == (d["duplicate_of"] is not None), d
        assert len(d["fingerprint"]) == 16 and int(d["fingerprint"], 16) >= 0, d
        assert d["_key"] == i.encode(), f"decision of {i} keyed {d['_key']!r}, not by its id"

    # No two records the detector itself judges near-duplicates are both unique: `detect`
    # on the same file names the pairs (id, duplicate_of) with their literal similarity.
    both_unique = [
        (r["id"], r["duplicate_of"], r["similarity"])
        for r in reference
        if r["duplicate_of"] is not None
        and r["similarity"] >= threshold
        and final[r["id"]]["decision"] == "unique"
        and final[r["duplicate_of"]]["decision"] == "unique"
    ]
    assert not both_unique, f"near-duplicate pairs both published as unique: {both_unique[:10]}"

    # Every duplicate_of names a record that was indexed before it: a record of the input,
    # itself indexed (exact copies are not), decided no later, and no cycle.
    for i, d in final.items():
        target = d["duplicate_of"]
        if target is None:
            continue
        assert target != i, d
        assert target in final, f"{i} is a duplicate of {target!r}, which is not an input record"
        assert not final[target]["exact"], (
            f"{i} is a duplicate of {target}, an exact copy that was never indexed"
        )
        assert when(final[target]) <= when(d), (
            f"{i} ({d['decided_at']}) names {target}, decided later ({final[target]['decided_at']})"
        )
    # Each is in its partner's cluster, and a unique is the first of its own.
    strays = [
        (i, d["cluster"], d["duplicate_of"], final[d["duplicate_of"] or i]["cluster"])
        for i, d in final.items()
        if d["cluster"] != (final[d["duplicate_of"]]["cluster"] if d["duplicate_of"] else i)
    ]
    assert not strays, f"decisions outside their partner's cluster: {strays[:5]}"
    for start in final:
        seen = [start]
        at = final[start]["duplicate_of"]
        while at is not None:
            assert at not in seen, f"duplicate_of cycle: {[*seen, at]}"
            seen.append(at)
            at = final[at]["duplicate_of"]
    return final
