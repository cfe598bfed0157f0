"""Experiment (issue 29, REST structure): the nesting prior and the bare-noun lean on the TUNING sets only.

    .venv/bin/python bench/_exp_nest.py --counts                    # tools each document's paths nest, no query read
    .venv/bin/python bench/_exp_nest.py --priors 0,0.2,0.4,0.7,1.0  # index.NEST_PRIOR scanned
    .venv/bin/python bench/_exp_nest.py --variant any               # every nested tool, twin at top level or not
    .venv/bin/python bench/_exp_nest.py --bare writes:0.1,destructive:0.2   # a query with no mood leans (not kept)

Prints bench/_exp_rank.py's R@1/R@5/MRR per tuning set and their mean. Never run on held-out sets: their figures
come from `progressive-mcp eval --catalogs`, aggregate only.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from progressive_mcp.search import index
from progressive_mcp.search.catalogs_eval import load_manifest
from progressive_mcp.search.evaluation import engine_ranker, run_eval
from progressive_mcp.sources import load_catalog

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _exp_rank import ROOT, load_sets

_shipped_parents = index._parents
_shipped_by_intent = index.SearchIndex._by_intent
_bare: dict[str, Any] = {"kind": None, "prior": 0.0}


def counts() -> None:
    """Per catalog: its tools, how many run through a parent record, and the parents most run through."""
    for item in load_manifest(ROOT / "eval/catalogs.yaml"):
        if item.spec is not None and not item.spec.is_file():
            continue
        catalog = load_catalog(item.spec)
        parents = index._parents(catalog.tools, index.reading_for(catalog.vocabulary))
        common = Counter(" ".join(sorted(terms)) for found in parents for terms in found).most_common(5)
        every = sum(map(bool, any_parents(catalog.tools, index.reading_for(catalog.vocabulary))))
        twins = sum(map(bool, parents))
        print(
            f"{item.entry.name:<13} tools {len(parents):4}  nested {every:4}  with a top-level twin {twins:4}  {common}"
        )


def any_parents(tools: Sequence[Any], reading: index.Reading) -> list[tuple[frozenset[str], ...]]:
    """`index._parents` without its twin check: every tool under a parent record counts (the first version)."""
    paths = [t.operation.path.strip("/").split("/") if t.operation is not None else [] for t in tools]
    through = [[s for s, after in itertools.pairwise(p[:-1]) if "{" not in s and after.startswith("{")] for p in paths]
    rest = sum(t.operation is not None for t in tools)
    counts = Counter(itertools.chain.from_iterable(set(segments) for segments in through))
    common = {s for s, n in counts.items() if n >= index.COMMON_PARENT * rest}

    def terms(segment: str) -> frozenset[str]:
        return frozenset(t for w in reading.lower_words(segment) for t in reading.words[w])

    return [tuple(t for t in (terms(s) for s in segments if s not in common) if t) for segments in through]


def bare_by_intent(self: index.SearchIndex, ranked: list[tuple[int, float]], intent: str | None) -> Any:
    """The shipped mood rule; then, for a query with no mood, writes (or destructive tools) lose `_bare`'s prior."""
    ranked = _shipped_by_intent(self, ranked, intent)
    if intent is not None or _bare["kind"] is None or not ranked:
        return ranked
    if _bare["kind"] == "destructive":
        lose = [t.annotations.get("destructiveHint") is True for t in self._tools]
    else:
        lose = [mood is False for mood in self._reads]
    factor = 1 / (1 + _bare["prior"])
    return sorted(((d, s * factor if lose[d] else s) for d, s in ranked), key=lambda item: -item[1])


def measure(sets: list[tuple[str, Any, Any, Any]], label: str) -> None:
    figures = []
    for name, catalog, meta, queries in sets:
        m = run_eval(catalog, queries, engine_ranker(catalog, meta=meta))["metrics"]
        figures.append((name, m["recall@1"], m["recall@5"], m["mrr"]))
    tuning = [f for f in figures if not f[0].startswith("av-")]
    mean = [sum(f[i] for f in tuning) / len(tuning) for i in (1, 2, 3)] if tuning else [0.0] * 3
    cells = "  ".join(f"{n} {r1:.3f}/{r5:.3f}/{mrr:.3f}" for n, r1, r5, mrr in figures)
    print(f"{label}: {cells}  | tuning mean {mean[0]:.3f}/{mean[1]:.3f}/{mean[2]:.3f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--counts", action="store_true")
    parser.add_argument("--sets", default="lastfm,spotify-dev,stripe-dev,av-tuning,av-public")
    parser.add_argument("--priors", default="", help="NEST_PRIOR values; none given: the shipped one")
    parser.add_argument("--variant", choices=("shipped", "any"), default="shipped")
    parser.add_argument("--bare", default="", help="kind:prior,... with kind writes or destructive")
    args = parser.parse_args()
    if args.counts:
        counts()
        return
    if args.variant == "any":
        index._parents = any_parents  # before the indexes are built
    index.SearchIndex._by_intent = bare_by_intent  # type: ignore[method-assign]
    sets = load_sets(args.sets.split(","))
    shipped_prior = index.NEST_PRIOR
    for prior in [float(p) for p in args.priors.split(",") if p] or [shipped_prior]:
        index.NEST_PRIOR = prior
        measure(sets, f"{args.variant} NEST_PRIOR {prior}")
    index.NEST_PRIOR = shipped_prior  # the bare-noun leans are measured on top of the shipped engine
    for spec in filter(None, args.bare.split(",")):
        kind, prior = spec.split(":")
        _bare.update(kind=kind, prior=float(prior))
        measure(sets, f"bare {kind} {prior}")


if __name__ == "__main__":
    main()
