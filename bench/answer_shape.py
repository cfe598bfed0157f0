"""TOOL_SEARCH's answer shape, tuned by measurement: what one answer shows against what it costs.

For each tuning catalog (Last.fm, Spotify's and Stripe's dev splits, Alpha Vantage's eval/tuning.jsonl: never the
held-out ones), every answerable query is sent to TOOL_SEARCH with the query alone, as an agent sends it, under each
setting of the answer's knobs (detailed hits, the answer's budget in characters, the tail's summary length and line
length); its text gives
`shown` (a grade-2 tool named in it) and its cl100k tokens (median, p90). A second table, for the low-confidence
floor: of the queries the engine finds no confident match for, the positives whose tool the candidates would show
and the negatives that would get candidates instead of "nothing fits", at each floor.

Run with `.venv/bin/python bench/answer_shape.py [--json]` (the OpenAPI documents from ../shared/openapi or
$OPENAPI_DOCS_DIR; a catalog whose document is absent is skipped).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from progressive_mcp.search.catalogs_eval import load_manifest  # noqa: E402
from progressive_mcp.search.evaluation import HIT_GRADE, load_queries, names_shown, percentile  # noqa: E402
from progressive_mcp.sources import load_catalog  # noqa: E402
from progressive_mcp.surfaces import metatools  # noqa: E402
from progressive_mcp.tokens import count_tokens, dumps  # noqa: E402

# (catalog of eval/catalogs.yaml, query file or None for the manifest's, split)
TUNING = (
    ("lastfm", None, "all"),
    ("spotify", None, "dev"),
    ("stripe", None, "dev"),
    ("alphavantage", ROOT / "eval" / "tuning.jsonl", "all"),
)
LIMITS = (1, 2, 3, 5)
BUDGETS = (700, 850, 1000, 1200, 1500)  # characters of the answer's JSON text
SUMMARY_CHARS = (40, 60)
MORES = (20,)  # the tail's most lines (MAX_MORE)
CLOSESTS = (5,)  # the closest tools a "nothing fits" answer names (MAX_CLOSEST)
LINES = (0,)  # a tail line's most characters, name and summary (MORE_LINE_CHARS; 0: no cap)
FLOORS = (0.0, 0.2, 0.25, 0.3, 0.33, 0.35, 0.4, 0.45)
SIGNALS = ("confidence", "relative")  # Ranking's: the no-match rule's mean of two shares, or the best tool's share


def tuning_sets() -> list[tuple[str, Any, list[Any]]]:
    sets = []
    for item in load_manifest(ROOT / "eval" / "catalogs.yaml"):
        for name, queries_path, split in TUNING:
            if item.entry.name != name:
                continue
            if item.spec is not None and not item.spec.is_file():
                print(f"skipped {name}: {item.spec} absent", file=sys.stderr)
                continue
            catalog = load_catalog(item.spec)
            queries = load_queries(queries_path or item.queries, catalog)
            sets.append((name, catalog, [q for q in queries if split == "all" or q.split == split]))
    return sets


def sweep(
    sets: list[tuple[str, Any, list[Any]]],
    limits: list[int],
    budgets: list[int],
    chars_: list[int],
    mores: list[int],
    closests: list[int],
    lines: list[int],
) -> list[dict[str, Any]]:
    rows = []
    metas = {name: metatools.MetaTools(catalog) for name, catalog, _ in sets}
    for limit, budget, chars, most, closest, line in itertools.product(limits, budgets, chars_, mores, closests, lines):
        metatools.SEARCH_BUDGET_CHARS, metatools.MORE_SUMMARY_CHARS, metatools.MORE_LINE_CHARS = budget, chars, line
        metatools.MAX_MORE, metatools.MAX_CLOSEST = most, closest
        row: dict[str, Any] = {
            "limit": limit,
            "budget": budget,
            "summary_chars": chars,
            "more": most,
            "closest": closest,
            "line": line,
        }
        for name, _, queries in sets:
            meta = metas[name]
            meta._answer_costs.clear()  # the lines depend on the summary length
            shown, counts = [], []
            for query in (q for q in queries if q.relevant):
                text = dumps(meta.tool_search({"query": query.query, "limit": limit}))
                wanted = [n for n, g in query.relevant.items() if g >= HIT_GRADE]
                shown.append(bool(names_shown(text, wanted)))
                counts.append(count_tokens(text))
            row[name] = {
                "shown": statistics.fmean(shown),
                "p50": percentile(counts, 0.5),
                "p90": percentile(counts, 0.9),
            }
        row["mean_non_finance"] = {
            key: statistics.fmean(row[n][key] for n, _, _ in sets if n != "alphavantage") for key in ("shown", "p50")
        }
        rows.append(row)
    return rows


def floors(sets: list[tuple[str, Any, list[Any]]]) -> list[dict[str, Any]]:
    """At each low-confidence floor on each signal: positives without a confident match whose tool the candidates
    show, and negatives without one that get candidates."""
    seen: list[tuple[bool, dict[str, float], bool]] = []  # (positive, signals, tool among the candidates)
    for _, catalog, queries in sets:
        meta = metatools.MetaTools(catalog)
        for query in queries:
            ranking = meta.index.rank(query.query, limit=metatools.MAX_CANDIDATES)
            if not ranking.off_topic:
                continue
            names = [h.name for h in meta.index.hits(ranking, metatools.MAX_CANDIDATES, cut=False)]
            wanted = {n for n, g in query.relevant.items() if g >= HIT_GRADE}
            if names:
                signals = {signal: getattr(ranking, signal) for signal in SIGNALS}
                seen.append((query.positive, signals, bool(wanted & set(names))))
    out = []
    positives = [s for s in seen if s[0]]
    negatives = [s for s in seen if not s[0]]
    for signal, floor in itertools.product(SIGNALS, FLOORS):
        out.append(
            {
                "signal": signal,
                "floor": floor,
                "positives_no_match": len(positives),
                "positives_shown": sum(1 for _, c, hit in positives if c[signal] >= floor and hit),
                "negatives_no_match": len(negatives),
                "negatives_with_candidates": sum(1 for _, c, _ in negatives if c[signal] >= floor),
            }
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--floors-only", action="store_true")
    parser.add_argument("--limits", default=",".join(map(str, LIMITS)), help="detailed hits to try")
    parser.add_argument("--budgets", default=",".join(map(str, BUDGETS)), help="answer budgets (characters) to try")
    parser.add_argument("--chars", default=",".join(map(str, SUMMARY_CHARS)), help="tail summary lengths to try")
    parser.add_argument("--more", default=",".join(map(str, MORES)), help="most tail lines (MAX_MORE) to try")
    parser.add_argument("--closest", default=",".join(map(str, CLOSESTS)), help="MAX_CLOSEST values to try")
    parser.add_argument("--line", default=",".join(map(str, LINES)), help="MORE_LINE_CHARS values to try")
    args = parser.parse_args()
    sets = tuning_sets()
    figures = {"sets": [(n, len(q)) for n, _, q in sets], "floors": floors(sets)}
    if not args.floors_only:
        grid = [
            [int(v) for v in text.split(",")]
            for text in (args.limits, args.budgets, args.chars, args.more, args.closest, args.line)
        ]
        figures["sweep"] = sweep(sets, *grid)
    if args.json:
        print(json.dumps(figures, indent=1))
        return
    print("low-confidence floor: positives shown / positives without a confident match; negatives given candidates")
    for f in figures["floors"]:
        print(
            f"  {f['signal']} {f['floor']:.2f}: {f['positives_shown']}/{f['positives_no_match']}  "
            f"{f['negatives_with_candidates']}/{f['negatives_no_match']}"
        )
    for row in figures.get("sweep", []):
        cells = "  ".join(f"{n} {row[n]['shown']:.3f} {row[n]['p50']:.0f}/{row[n]['p90']:.0f}" for n, _, _ in sets)
        mean = row["mean_non_finance"]
        print(
            f"limit {row['limit']} budget {row['budget']} chars {row['summary_chars']} more {row['more']} "
            f"closest {row['closest']} line {row['line']}: {cells}  "
            f"mean(non-finance) {mean['shown']:.3f} {mean['p50']:.0f}"
        )


if __name__ == "__main__":
    main()
