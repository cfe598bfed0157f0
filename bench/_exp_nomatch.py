"""Experiment (issue 29): can label-free signals move more tuning negatives to "nothing fits" without losing positives?

On the TUNING sets only (Last.fm, Spotify's and Stripe's dev splits), each query is ranked as TOOL_SEARCH ranks it and
three signals are read: the lexical confidence (`Ranking.confidence`), and MiniLM's cosine between the query (without
ids) and the answer's first tool, and with its closest tool, each as z = (cosine - m) / (bar - m), where bar is
`fusion.SemanticFusion.near`'s (the highest cosine an everyday request reaches on any tool) and m the median of the
everyday requests' best cosines (z 0: as close as a typical everyday request; 1: as close as the closest one).

Two tables, counts over the three sets:
- reject: of the ANSWERED queries, the negatives a gate "confidence < c and z(first tool) < t" would turn into no
  match, against the positives it would lose;
- rescue: of the queries rejected for their words, the positives a gate "z(closest) >= t and confidence >= c" would
  answer, against the negatives it would answer.

    .venv/bin/python bench/_exp_nomatch.py

Needs the semantic extra and ../shared/openapi (or $OPENAPI_DOCS_DIR). Prints counts only.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import numpy as np

from progressive_mcp.search.index import _LEXICAL_REASONS
from progressive_mcp.search.records import without_ids
from progressive_mcp.search.semantic import everyday_requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _exp_rank import load_sets


def signals() -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for _, _, meta, queries in load_sets(["lastfm", "spotify-dev", "stripe-dev"]):
        index = meta.index
        fusion = index._fusion
        assert fusion is not None, "needs the semantic extra"
        matrix = fusion._vectors.matrix()
        everyday = np.stack([fusion._embed_query(text) for text in everyday_requests()]) @ matrix.T
        bests = everyday.max(axis=1)
        bar, middle = float(bests.max()), float(statistics.median(bests.tolist()))
        for query in queries:
            ranking = index.rank(query.query, limit=10)
            cosines = matrix @ fusion._embed_query(without_ids(query.query))
            first = float(cosines[ranking.scores[0][0]]) if ranking.scores else float(cosines.max())
            rows.append(
                {
                    "positive": bool(query.relevant),
                    "answered": ranking.off_topic is None,
                    "lexical": ranking.off_topic in _LEXICAL_REASONS,  # off-topic for its words, not its shape
                    "confidence": ranking.confidence,
                    "z_first": (first - middle) / (bar - middle),
                    "z_best": (float(cosines.max()) - middle) / (bar - middle),
                }
            )
    return rows


def main() -> None:
    rows = signals()
    answered = [r for r in rows if r["answered"]]
    rejected = [r for r in rows if r["lexical"]]
    count = sum
    print(f"answered: {count(r['positive'] for r in answered)} positives, {len(answered)} in all")
    print("reject if confidence < c and z(first) < t: negatives caught / positives lost")
    for c in (0.6, 0.7, 0.8, 1.01):
        cells = []
        for t in (0.0, 0.25, 0.5, 0.75, 1.0):
            hit = [r for r in answered if r["confidence"] < c and r["z_first"] < t]  # type: ignore[operator]
            cells.append(
                f"t {t:.2f}: {count(not r['positive'] for r in hit):2d}/{count(r['positive'] for r in hit):3d}"
            )
        print(f"  c {c:.2f}  " + "  ".join(cells))
    print(f"rejected for words: {count(r['positive'] for r in rejected)} positives, {len(rejected)} in all")
    print("answer if z(best) >= t and confidence >= c: positives answered / negatives answered")
    for c in (0.0, 0.2, 0.3):
        cells = []
        for t in (1.0, 1.25, 1.5, 1.75, 2.0):
            hit = [r for r in rejected if r["z_best"] >= t and r["confidence"] >= c]  # type: ignore[operator]
            cells.append(
                f"t {t:.2f}: {count(r['positive'] for r in hit):2d}/{count(not r['positive'] for r in hit):2d}"
            )
        print(f"  c {c:.2f}  " + "  ".join(cells))


if __name__ == "__main__":
    main()
