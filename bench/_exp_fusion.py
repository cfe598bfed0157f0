# ruff: noqa: B023  (an experiment: its closures run inside the loop that made them)
"""Experiment (issue 29): ways to fuse the lexical engine with MiniLM, on the TUNING sets only.

    .venv/bin/python bench/_exp_fusion.py lastfm,spotify,alphavantage

Last.fm (all), Spotify's dev split, Alpha Vantage's eval/tuning.jsonl. Never run on held-out sets.
"""

import sys
from pathlib import Path

import numpy as np

from progressive_mcp.search import dense, embedder
from progressive_mcp.search.catalogs_eval import load_manifest
from progressive_mcp.search.evaluation import load_queries, run_eval, select_split, summary
from progressive_mcp.search.semantic import everyday_requests
from progressive_mcp.sources import load_catalog
from progressive_mcp.surfaces.metatools import MetaTools

ROOT = Path(__file__).resolve().parent.parent
only = sys.argv[1].split(",")
splits = {"lastfm": "all", "spotify": "dev", "alphavantage": "all"}
for item in load_manifest(ROOT / "eval/catalogs.yaml"):
    name = item.entry.name
    if name not in only:
        continue
    catalog = load_catalog(item.spec) if item.spec else load_catalog(None)
    path = ROOT / "eval/tuning.jsonl" if name == "alphavantage" else item.queries
    queries = select_split(load_queries(path, catalog), splits[name])
    names = [t.name for t in catalog.tools]
    lex = MetaTools(catalog, semantic=False).index
    wl = MetaTools(catalog, semantic=True).index
    docs = embedder.embed([dense.tool_document(tool, "short") for tool in catalog.tools])
    bar = float((embedder.embed(list(everyday_requests())) @ docs.T).max())
    qv: dict[str, np.ndarray] = {}

    def cos(q: str) -> np.ndarray:
        if q not in qv:
            qv[q] = embedder.embed([q])[0]
        return docs @ qv[q]

    def plain(index):  # type: ignore[no-untyped-def]
        return lambda q, n: [h.name for h in index.search(q, limit=n)]

    def fused(index, w: float, k: float, depth: int, rescue: float | None, margin: float = 0.0):  # type: ignore[no-untyped-def]
        def rank(q: str, n: int) -> list[str]:
            ranking = index.rank(q, limit=depth)
            s = cos(q)
            dense_rank = [names[i] for i in np.argsort(-s)[:depth]]
            if ranking.off_topic:
                if rescue is None or s.max() + rescue * ranking.confidence < bar + margin:
                    return []
                lexical: list[str] = [names[i] for i, _ in ranking.scores[:depth]]
            else:
                lexical = [names[i] for i, _ in ranking.scores[:depth]]
            return dense.reciprocal_rank_fusion([lexical, dense_rank], weights=[1, w], k=k)[:n]

        return rank

    rankers = {"lexical": plain(lex), "wordllama": plain(wl)}
    for w in (0.5, 0.7, 1.0):
        for k in (10, 30, 60):
            rankers[f"wl+minilm w{w} k{k}"] = fused(wl, w, k, 20, None)
    rankers["wl+minilm w.7 k30 m.1 c.1"] = fused(wl, 0.7, 30, 20, 0.1, 0.1)
    rankers["wl+minilm w1 k60 m.1 c.1"] = fused(wl, 1.0, 60, 20, 0.1, 0.1)
    print(f"== {name} ({len(names)} tools, {len(queries)} queries, bar {bar:.3f})", flush=True)
    for label, ranker in rankers.items():
        metrics = summary(run_eval(catalog, queries, ranker))["metrics"]
        shown = {
            k: round(v, 3)
            for k, v in metrics.items()
            if k in ("recall@1", "recall@5", "mrr", "no_match_rate", "false_no_match_rate")
        }
        print(f"{label:32s}", shown, flush=True)
