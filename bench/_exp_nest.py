"""Experiment (issue 29, REST structure; neither rule kept): a nesting prior from the operation's path and a lean of
a query with no mood, on the TUNING sets only.

    .venv/bin/python bench/_exp_nest.py --counts                    # tools each document's paths nest, no query read
    .venv/bin/python bench/_exp_nest.py --priors 0,0.2,0.4,0.7,1.0  # the nesting prior scanned (0: the engine)
    .venv/bin/python bench/_exp_nest.py --variant any --priors 0.4  # every nested tool, twin at top level or not
    .venv/bin/python bench/_exp_nest.py --bare writes:0.1,destructive:0.2   # a query with no mood leans

The nesting prior: a tool whose REST path runs through a parent record (a static segment followed by a parameter
that is not the path's last: /v1/charges/{charge}/refunds) the query does not mention (a word of the segment as
the engine reads it, its synonym or a misspelling of it) scores 1 / (1 + prior) of its score, after the engine's
own priors, in the lexical and the fused ranking; a query naming a record (an id) or a thing (an entity) is left
alone; a segment that half the REST tools run through (Twilio's /Accounts/{AccountSid}/) counts for none; variant
`twin` (the default) touches only a tool whose own resource (its last static segment) some unnested path also
serves. The bare-noun lean: a query whose opening says no mood (`index._intent` None) treats the writes (or only the
destructive tools) as a question does, at its own prior. Prints R@1/R@5/MRR per set and the tuning mean (Last.fm,
Spotify `dev`, Stripe `dev`). Never run on held-out sets: their figures come from `progressive-mcp eval --catalogs`
on this script's rule committed into the engine (branch i34-nest, commits df9ddce and 53a04ee), aggregate only.
"""

from __future__ import annotations

import argparse
import itertools
import re
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from progressive_mcp.catalog import CatalogTool
from progressive_mcp.search import index
from progressive_mcp.search.catalogs_eval import load_manifest
from progressive_mcp.search.evaluation import engine_ranker, run_eval
from progressive_mcp.sources import load_catalog

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _exp_rank import ROOT, load_sets

COMMON_PARENT = 0.5  # a parent segment this share of the REST tools run through names nothing
_SUFFIX = re.compile(r"\.\w+$")  # Twilio's Calls.json
_shipped_by_intent = index.SearchIndex._by_intent
_shipped_by_need = index.SearchIndex._by_need
_rule: dict[str, Any] = {"prior": 0.0, "twin": True, "bare": None, "bare_prior": 0.0}
_parents_of: dict[int, list[tuple[frozenset[str], ...]]] = {}


def parents(tools: Sequence[CatalogTool], reading: index.Reading, *, twin: bool) -> list[tuple[frozenset[str], ...]]:
    """For each tool, the terms of each parent record its REST path runs through (see the module docstring)."""
    paths = [t.operation.path.strip("/").split("/") if t.operation is not None else [] for t in tools]
    through = [[s for s, after in itertools.pairwise(p[:-1]) if "{" not in s and after.startswith("{")] for p in paths]
    rest = sum(t.operation is not None for t in tools)
    counts = Counter(itertools.chain.from_iterable(set(segments) for segments in through))
    common = {s for s, n in counts.items() if n >= COMMON_PARENT * rest}

    def terms(segment: str) -> frozenset[str]:
        return frozenset(t for w in reading.lower_words(_SUFFIX.sub("", segment)) for t in reading.words[w])

    found = [tuple(t for t in (terms(s) for s in segments if s not in common) if t) for segments in through]
    if not twin:
        return found
    statics = [[terms(s) for s in path if "{" not in s] for path in paths]
    top = {t for f, segments in zip(found, statics, strict=True) if not f for t in segments}
    return [f if f and s[-1] and s[-1] in top else () for f, s in zip(found, statics, strict=True)]


def by_need(self: index.SearchIndex, ranked: list[tuple[int, float]], analysis: index.Analysis) -> Any:
    """The engine's collection-before-record rule, then the nesting prior (both rankings call `_by_need` last)."""
    ranked = _shipped_by_need(self, ranked, analysis)
    if not _rule["prior"] or not ranked or analysis.names_record or analysis.entities:
        return ranked
    key = id(self)
    if key not in _parents_of:
        _parents_of[key] = parents(self._tools, self._reading, twin=_rule["twin"])
    nested = _parents_of[key]
    said = set(analysis.terms).union(*(concept.terms for concept in analysis.concepts))
    factor = 1 / (1 + _rule["prior"])
    out = [(d, s * factor if any(said.isdisjoint(p) for p in nested[d]) else s) for d, s in ranked]
    return sorted(out, key=lambda item: -item[1])


def by_intent(self: index.SearchIndex, ranked: list[tuple[int, float]], intent: str | None) -> Any:
    """The engine's mood rule; then, for a query with no mood, the writes (or destructive tools) lose."""
    ranked = _shipped_by_intent(self, ranked, intent)
    if intent is not None or _rule["bare"] is None or not ranked:
        return ranked
    if _rule["bare"] == "destructive":
        lose = [t.annotations.get("destructiveHint") is True for t in self._tools]
    else:
        lose = [mood is False for mood in self._reads]
    factor = 1 / (1 + _rule["bare_prior"])
    return sorted(((d, s * factor if lose[d] else s) for d, s in ranked), key=lambda item: -item[1])


def counts() -> None:
    """Per catalog: its tools, how many run through a parent record, how many of those have a top-level twin."""
    for item in load_manifest(ROOT / "eval/catalogs.yaml"):
        if item.spec is not None and not item.spec.is_file():
            continue
        catalog = load_catalog(item.spec)
        reading = index.reading_for(catalog.vocabulary)
        every = sum(map(bool, parents(catalog.tools, reading, twin=False)))
        twins = parents(catalog.tools, reading, twin=True)
        common = Counter(" ".join(sorted(terms)) for found in twins for terms in found).most_common(5)
        print(f"{item.entry.name:<13} tools {len(twins):4}  nested {every:4}  with a top-level twin ", end="")
        print(f"{sum(map(bool, twins)):4}  {common}")


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
    parser.add_argument("--priors", default="", help="nesting priors to measure, e.g. 0,0.4")
    parser.add_argument("--variant", choices=("twin", "any"), default="twin")
    parser.add_argument("--bare", default="", help="kind:prior,... with kind writes or destructive (no nesting)")
    args = parser.parse_args()
    if args.counts:
        counts()
        return
    _rule["twin"] = args.variant == "twin"
    index.SearchIndex._by_need = by_need  # type: ignore[method-assign]
    index.SearchIndex._by_intent = by_intent  # type: ignore[method-assign]
    sets = load_sets(args.sets.split(","))
    for prior in [float(p) for p in args.priors.split(",") if p]:
        _rule["prior"] = prior
        measure(sets, f"nesting {args.variant} {prior}")
    _rule["prior"] = 0.0  # the bare-noun leans are measured on the engine as it is
    for spec in filter(None, args.bare.split(",")):
        kind, prior = spec.split(":")
        _rule.update(bare=kind, bare_prior=float(prior))
        measure(sets, f"bare {kind} {prior}")


if __name__ == "__main__":
    main()
