"""Experiment (issue 29): the ranking on the TUNING sets only, with their misses, to find what ranks the right tool low.

    .venv/bin/python bench/_exp_rank.py                 # R@1, R@5, MRR, false no-match per tuning set
    .venv/bin/python bench/_exp_rank.py --misses 40     # and the positives whose grade-2 tool is not first

Last.fm (all), Spotify's and Stripe's dev splits, Alpha Vantage's eval/tuning.jsonl and queries.jsonl (the
reference). Never run on held-out sets: their figures come from `progressive-mcp eval --catalogs`, aggregate only.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from progressive_mcp.search.catalogs_eval import load_manifest
from progressive_mcp.search.evaluation import engine_ranker, load_queries, run_eval, search_surface, select_split
from progressive_mcp.sources import load_catalog

ROOT = Path(__file__).resolve().parent.parent
SETS = {  # name: (catalog, query file, split)
    "lastfm": ("lastfm", None, "all"),
    "spotify-dev": ("spotify", None, "dev"),
    "stripe-dev": ("stripe", None, "dev"),
    "av-tuning": ("alphavantage", ROOT / "eval/tuning.jsonl", "all"),
    "av-public": ("alphavantage", ROOT / "eval/queries.jsonl", "all"),
}


def load_sets(labels: Sequence[str]) -> list[tuple[str, Any, Any, Any]]:
    """(label, catalog, its search surface, the split's queries) per set; a catalog is loaded (and embedded) once."""
    items = {item.entry.name: item for item in load_manifest(ROOT / "eval/catalogs.yaml")}
    loaded: dict[str, tuple[Any, Any]] = {}
    out = []
    for label in labels:
        name, path, split = SETS[label]
        item = items[name]
        if name not in loaded:
            catalog = load_catalog(item.spec)
            loaded[name] = (catalog, search_surface(catalog))
        catalog, meta = loaded[name]
        out.append((label, catalog, meta, select_split(load_queries(path or item.queries, catalog), split)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--misses", type=int, default=0)
    parser.add_argument("--sets", default=",".join(SETS))
    args = parser.parse_args()
    for label, catalog, meta, queries in load_sets(args.sets.split(",")):
        run = run_eval(catalog, queries, engine_ranker(catalog, meta=meta))
        m = run["metrics"]
        print(
            f"{label:<12} R@1 {m['recall@1']:.3f}  R@5 {m['recall@5']:.3f}  MRR {m['mrr']:.3f}  "
            f"false-nm {m['false_no_match_rate']:.3f}  no-match {m['no_match_rate'] or 0:.3f}",
            flush=True,
        )
        if args.misses and label in ("lastfm", "spotify-dev", "stripe-dev"):
            shown = 0
            for record in run["per_query"]:
                if not record["relevant"] or shown >= args.misses:
                    continue
                ranked = record["results"]
                best = {t for t, g in record["relevant"].items() if g == 2}
                if ranked[:1] and ranked[0] in best:
                    continue
                shown += 1
                at = next((i + 1 for i, t in enumerate(ranked) if t in best), None)
                print(f"  [{at}] {record['query']!r} -> want {sorted(best)}; got {ranked[:5]}")


if __name__ == "__main__":
    main()
