"""What `auto` would pick, per category, at a few thresholds: the direct `tools/list` cost (cl100k, counted as
`progressive-mcp tokens` counts it) of each category of the bundled catalog and of each document in
../shared/openapi/, and how many categories go direct at each threshold (the whole catalog beside them).

The figures behind PMCP_AUTO_DIRECT_TOKENS's default (docs/measurements.md#the-auto-surface). Prints figures, never
pass/fail; skips documents that are not there. Loading all six documents takes a few minutes.

Run with `.venv/bin/python bench/auto_threshold.py [--json] [--thresholds 2000,4000,8000] [NAME ...]`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from progressive_mcp.catalog import Catalog
from progressive_mcp.sources import load_catalog
from progressive_mcp.surfaces.auto import DEFAULT_AUTO_DIRECT_TOKENS
from progressive_mcp.surfaces.surface import Surface

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the real documents' paths: one map, tests/real_documents.py

from real_documents import REAL  # noqa: E402

DOCUMENTS: dict[str, Path | None] = {"alphavantage": None, **REAL}  # None: the bundled spec


def measure(catalog: Catalog, thresholds: list[int]) -> dict[str, Any]:
    """Each category's direct cost and the whole catalog's, and the categories at most each threshold."""
    whole = Surface(catalog, mode="auto")
    assert whole.auto is not None
    costs: dict[str, int] = {}
    for category in catalog.categories:
        surface = Surface(catalog, mode="auto", categories=frozenset({category}), meta=whole.meta)
        assert surface.auto is not None
        costs[category] = surface.auto.direct_tokens
    ordered = sorted(costs.values())
    return {
        "tools": len(catalog),
        "whole_catalog": whole.auto.direct_tokens,
        "categories": costs,
        "median": statistics.median(ordered),
        "p75": ordered[(3 * len(ordered)) // 4],
        "max": ordered[-1],
        "direct_at": {str(t): sum(c <= t for c in ordered) for t in thresholds},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help=f"catalogs to measure (default all: {', '.join(DOCUMENTS)})")
    parser.add_argument("--thresholds", default=f"2000,{DEFAULT_AUTO_DIRECT_TOKENS},8000")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    thresholds = [int(t) for t in args.thresholds.split(",")]
    results: dict[str, Any] = {}
    for name in args.names or DOCUMENTS:
        path = DOCUMENTS[name]
        if path is not None and not path.is_file():
            print(f"{name}: {path} is absent, skipped")
            continue
        results[name] = measure(load_catalog(path), thresholds)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for name, r in results.items():
        at = ", ".join(f"<= {int(t):,}: {n}" for t, n in r["direct_at"].items())
        print(
            f"{name}: {r['tools']} tools, {len(r['categories'])} categories; whole catalog {r['whole_catalog']:,}; "
            f"per category median {r['median']:,.0f}, p75 {r['p75']:,}, max {r['max']:,}; categories direct {at}"
        )
    total = sum(len(r["categories"]) for r in results.values())
    for t in thresholds:
        direct = sum(r["direct_at"][str(t)] for r in results.values())
        print(
            f"at {t:,}: {direct} of {total} categories direct; whole catalogs direct: "
            f"{sum(r['whole_catalog'] <= t for r in results.values())} of {len(results)}"
        )


if __name__ == "__main__":
    main()
