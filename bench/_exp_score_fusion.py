"""Experiment (issue 29), not adopted: score fusion in place of MiniLM's reciprocal-rank fusion, on the TUNING sets.

    .venv/bin/python bench/_exp_score_fusion.py --share 0.85 --sets lastfm,spotify-dev

Each tool scores share x its lexical score as a part of the sum over the lexical top `fusion.DEPTH` (`--all`: over
every lexical score) + (1 - share) x how far its cosine stands above the catalog's mean, as a part of the closest
offered tool's; `--coverage C` fuses by score only for queries whose lexical coverage is at least C (else the
reciprocal-rank fusion as shipped). Prints bench/_exp_rank.py's tuning metrics. Held-out figures only through
`progressive-mcp eval --catalogs`, aggregate only.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Collection, Sequence
from pathlib import Path

from progressive_mcp.search import fusion, index

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _exp_rank


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--share", type=float, default=0.85)
    parser.add_argument("--coverage", type=float, default=0.0)
    parser.add_argument("--all", action="store_true")
    args, rest = parser.parse_known_args()
    shipped = fusion.SemanticFusion.fuse
    coverage_of: dict[int, float] = {}

    def fuse(
        self: fusion.SemanticFusion,
        query: str,
        lexical: Sequence[tuple[int, float]],
        leave_out: Collection[int] = (),
    ) -> list[tuple[int, float]] | None:
        if coverage_of.get(id(lexical), 0.0) < args.coverage or not lexical:
            return shipped(self, query, lexical, leave_out)
        import numpy as np

        matrix = self._vectors.matrix()
        cosines = np.einsum("ij,j->i", matrix, self._embed_query(query))
        kept = [i for i in range(len(cosines)) if i not in leave_out]
        if not kept:
            return []
        mean = float(cosines.mean())
        top = max(float(cosines[i]) for i in kept) - mean
        top = top if top > 0 else 1.0
        part = lexical if args.all else lexical[: fusion.DEPTH]
        total = sum(score for _, score in part) or 1.0
        scores = {i: (1 - args.share) * max(float(cosines[i]) - mean, 0.0) / top for i in kept}
        for doc, score in part:
            if doc in scores:
                scores[doc] += args.share * score / total
        order = sorted(scores, key=lambda doc: -scores[doc])[: 2 * fusion.DEPTH]
        return [(doc, scores[doc]) for doc in order]

    shipped_fused = index.SearchIndex._fused

    def fused(self: index.SearchIndex, query, ranking, excluded, categories):  # type: ignore[no-untyped-def]
        coverage_of[id(ranking.scores)] = ranking.coverage  # the lexical side's coverage, for --coverage
        return shipped_fused(self, query, ranking, excluded, categories)

    fusion.SemanticFusion.fuse = fuse  # type: ignore[method-assign]
    index.SearchIndex._fused = fused  # type: ignore[method-assign]
    sys.argv = [sys.argv[0], *rest]
    _exp_rank.main()


if __name__ == "__main__":
    main()
