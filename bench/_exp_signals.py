"""Experiment (issue 29; none kept): three more signals for the ranking and the no-match rule, on the TUNING sets
only (Last.fm, Spotify `dev`, Stripe `dev`).

    .venv/bin/python bench/_exp_signals.py maxsim      # MiniLM's token vectors, late interaction, a third ranking
    .venv/bin/python bench/_exp_signals.py maxsim --idf
    .venv/bin/python bench/_exp_signals.py category    # the cluster hypothesis: a crowded category's tools gain
    .venv/bin/python bench/_exp_signals.py foreign     # a word foreign to the catalog counts more against a match
    .venv/bin/python bench/_exp_signals.py neighbours  # unknown words read as their MiniLM neighbours
    .venv/bin/python bench/_exp_signals.py neighbours --catalogs OUT.json   # that rule in `eval --catalogs`

- `maxsim`: each tool document's token vectors (MiniLM's last layer, float graph, special tokens left out, unit
  rows) and the query's; a tool scores the mean over query tokens of the closest document token (ColBERT's MaxSim,
  on a model never trained for it; `--idf`: query tokens weighted by their idf over the catalog's documents). That
  ranking alone, and merged by reciprocal rank as a third ranking beside the lexical one (weight 1) and MiniLM's
  pooled one (weight `s`), at weight `l`.
- `category`: after the shipped fusion, each tool's score times 1 + alpha x (its category's share of the first `t`
  fused scores, against the best category's).
- `foreign`: a query word that no tool text has, that is no misspelling of one, and that the semantic signal finds
  no catalog word near (`SemanticRescue.similar_terms` empty) counts against the match at `f` of a rare word's
  weight instead of the default 0.3; `en`: only words of the English word list (`search/english.py`).

- `neighbours`: an unknown query word (`SemanticRescue.similar_terms`, asked only for a word no tool text has and no
  misspelling of one) reads as its 3 nearest catalog words in MiniLM's space (query graph; each word of the
  catalog's texts embedded once) at cosine >= `theta`, each at `factor` x its cosine, instead of WordLlama's.
  `full`: for the whole engine, the no-match decision included; `rank`: the decision stays WordLlama's (the query
  is ranked once as shipped; an answered one is ranked again with MiniLM's neighbours). `--catalogs OUT.json` runs
  `progressive-mcp eval --catalogs --json` with the `rank` rule at 0.45 / 0.6 patched in and writes its JSON (for
  the held-out aggregates, read by the lead only as means and per-catalog rows).

Prints R@1 / R@5 / MRR per set and their mean (`foreign`, `neighbours` add no-match and false no-match). Never run
on held-out sets but through `--catalogs`.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _exp_rank_variants as variants

from progressive_mcp.search import english, fusion, index, semantic, vectors
from progressive_mcp.search.embedder import Embedder
from progressive_mcp.search.evaluation import engine_ranker, run_eval
from progressive_mcp.search.records import without_ids

SETS = ["lastfm", "spotify-dev", "stripe-dev"]
SPECIAL = frozenset({0, 101, 102})  # [PAD], [CLS], [SEP] of MiniLM's WordPiece vocabulary


# --- maxsim ----------------------------------------------------------------------------------------------------------


class Late:
    """Token vectors of every tool document of one fusion (made once) and of each query (kept)."""

    def __init__(self, idf: bool) -> None:
        self.embedder = Embedder.shared()
        self.idf = idf
        self.docs: dict[int, tuple[Any, Any, int, dict[int, int]]] = {}
        self.queries: dict[str, tuple[Any, list[int]]] = {}

    def token_rows(self, texts: Sequence[str]) -> list[tuple[Any, list[int]]]:
        import numpy as np

        e = self.embedder
        session = e._graph(products=False)
        out = []
        for start in range(0, len(texts), 32):
            chunk = list(texts[start : start + 32])
            ids, mask, hidden = e.token_states(session, chunk)
            for b in range(len(chunk)):
                keep = [t for t in range(ids.shape[1]) if mask[b, t] and int(ids[b, t]) not in SPECIAL] or [0]
                rows = hidden[b, keep]
                out.append(
                    (
                        (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32),
                        [int(ids[b, t]) for t in keep],
                    )
                )
        return out

    def scores(self, fused: fusion.SemanticFusion, query: str) -> Any:
        import numpy as np

        key = id(fused)
        if key not in self.docs:
            pairs = self.token_rows([vectors.document(tool) for tool in fused._vectors._tools])
            df: dict[int, int] = {}
            for _, ids in pairs:
                for token in set(ids):
                    df[token] = df.get(token, 0) + 1
            owner = np.concatenate([np.full(len(rows), i) for i, (rows, _) in enumerate(pairs)])
            self.docs[key] = (np.concatenate([rows for rows, _ in pairs]), owner, len(pairs), df)
        rows, owner, n, df = self.docs[key]
        if query not in self.queries:
            self.queries[query] = self.token_rows([query])[0]
        q, ids = self.queries[query]
        best = np.full((n, q.shape[0]), -1.0, dtype=np.float32)
        np.maximum.at(best, owner, rows @ q.T)
        if not self.idf:
            return best.mean(axis=1)
        weights = np.array([math.log(1 + (n - df.get(t, 0) + 0.5) / (df.get(t, 0) + 0.5)) for t in ids], np.float32)
        return best @ (weights / max(float(weights.sum()), 1e-6))

    def order(self, fused: fusion.SemanticFusion, query: str, leave_out: Any) -> list[int]:
        import numpy as np

        ranked = np.argsort(-self.scores(fused, query), kind="stable")
        return [int(i) for i in ranked if int(i) not in leave_out][: fusion.TAIL_DEPTH]


def merge(rankings: Sequence[tuple[Sequence[int], float]]) -> list[tuple[int, float]]:
    scores: dict[int, float] = {}
    for ranking, weight in rankings:
        for rank, doc in enumerate(list(ranking)[: fusion.DEPTH], 1):
            scores[doc] = scores.get(doc, 0.0) + weight / (fusion.K + rank)
    best = sum(weight for _, weight in rankings) / (fusion.K + 1)
    return [(doc, scores[doc] / best) for doc in sorted(scores, key=lambda doc: -scores[doc])]


def maxsim_variants(idf: bool) -> dict[str, variants.Fuse]:
    late = Late(idf)

    def alone(self, query, lexical, leave_out, ranking):  # type: ignore[no-untyped-def]
        return [(doc, 1.0 - i / 100) for i, doc in enumerate(late.order(self, without_ids(query), leave_out))]

    def third(s: float, lw: float) -> variants.Fuse:
        def fuse(self, query, lexical, leave_out, ranking):  # type: ignore[no-untyped-def]
            text = without_ids(query)
            pooled = variants.semantic_order(self, text, fusion.TAIL_DEPTH, leave_out)
            return merge([([doc for doc, _ in lexical], 1.0), (pooled, s), (late.order(self, text, leave_out), lw)])

        return fuse

    found: dict[str, variants.Fuse] = {"shipped": variants.shipped, "late-alone": alone}
    for s in (0.5, 0.25, 0.0):
        for lw in (0.25, 0.5, 1.0):
            found[f"s{s}-l{lw}"] = third(s, lw)
    return found


# --- category --------------------------------------------------------------------------------------------------------


def category_variants() -> dict[str, variants.Fuse]:
    def prior(alpha: float, top: int) -> variants.Fuse:
        def fuse(self, query, lexical, leave_out, ranking):  # type: ignore[no-untyped-def]
            fused = variants._shipped_fuse(self, query, lexical, leave_out)
            if not fused:
                return fused
            tools = self._vectors._tools
            mass: dict[str, float] = {}
            for doc, score in fused[:top]:
                mass[tools[doc].category] = mass.get(tools[doc].category, 0.0) + score
            best = max(mass.values())
            lifted = [(doc, score * (1 + alpha * mass.get(tools[doc].category, 0.0) / best)) for doc, score in fused]
            return sorted(lifted, key=lambda pair: -pair[1])

        return fuse

    found: dict[str, variants.Fuse] = {"shipped": variants.shipped}
    for alpha in (0.1, 0.2, 0.4):
        for top in (5, 10, 20):
            found[f"a{alpha}-t{top}"] = prior(alpha, top)
    return found


def run_fusions(found: dict[str, variants.Fuse], sets: list[Any]) -> None:
    for name, fuse in found.items():
        variants.install(fuse)
        rows = variants.measure(sets)
        mean = [sum(r[k] for r in rows.values()) / len(rows) for k in ("r1", "r5", "mrr")]
        cells = "".join(f"   {r['r1']:.3f} {r['r5']:.3f} {r['mrr']:.3f}" for r in rows.values())
        print(f"{name:<14}{cells}   " + " ".join(f"{v:.3f}" for v in mean), flush=True)


# --- foreign ---------------------------------------------------------------------------------------------------------


def foreign_word(weight: float, only_english: bool) -> Callable[..., Any]:
    shipped = index.SearchIndex._word

    def word(self, term, typed):  # type: ignore[no-untyped-def]
        concept = shipped(self, term, typed)
        unknown = not concept.terms and concept.label == term and self._semantic is not None
        if unknown and (not only_english or english.is_word(typed)):
            return self._unknown(term, weight)
        return concept

    return word


def print_decisions(setting: str, sets: list[Any]) -> None:
    """One line: R@1, R@5, MRR, no-match and false no-match of the engine as patched now, per set and their mean."""
    rows = []
    for _, catalog, meta, queries in sets:
        m = run_eval(catalog, queries, engine_ranker(catalog, meta=meta))["metrics"]
        rows.append([m["recall@1"], m["recall@5"], m["mrr"], m["no_match_rate"] or 0, m["false_no_match_rate"] or 0])
    mean = [sum(r[i] for r in rows) / len(rows) for i in range(5)]
    cells = "".join(" | " + " ".join(f"{v:.3f}" for v in r) for r in rows)
    print(f"{setting:<10}{cells} || " + " ".join(f"{v:.3f}" for v in mean), flush=True)


def run_foreign(sets: list[Any]) -> None:
    shipped = index.SearchIndex._word
    for setting in ("shipped", "0.5:en", "0.8:en", "0.5:all", "0.8:all"):
        if setting == "shipped":
            index.SearchIndex._word = shipped  # type: ignore[method-assign]
        else:
            weight, words = setting.split(":")
            index.SearchIndex._word = foreign_word(float(weight), words == "en")  # type: ignore[method-assign]
        print_decisions(setting, sets)
    index.SearchIndex._word = shipped  # type: ignore[method-assign]


# --- neighbours ------------------------------------------------------------------------------------------------------


_wordllama_terms = semantic.SemanticRescue.similar_terms
_shipped_rank = index.SearchIndex.rank


def minilm_terms(theta: float, factor: float) -> Callable[..., dict[str, float]]:
    tables: dict[int, tuple[list[str], Any]] = {}

    def similar_terms(self, word):  # type: ignore[no-untyped-def]
        import numpy as np

        if id(self) not in tables:
            words = dict(self._words())
            tables[id(self)] = (list(words.values()), Embedder.shared().embed(list(words), queries=True))
        terms, matrix = tables[id(self)]
        cosines = matrix @ Embedder.shared().embed([word], queries=True)[0]
        found: dict[str, float] = {}
        for i in np.argsort(-cosines)[:3]:
            if cosines[i] >= theta:
                found.setdefault(terms[i], factor * float(cosines[i]))
        return found

    return similar_terms


def rank_with(terms: Callable[..., dict[str, float]]) -> Callable[..., Any]:
    def rank(self, query, **options):  # type: ignore[no-untyped-def]
        first = _shipped_rank(self, query, **options)
        if first.off_topic:
            return first
        semantic.SemanticRescue.similar_terms = terms  # type: ignore[method-assign]
        try:
            second = _shipped_rank(self, query, **options)
        finally:
            semantic.SemanticRescue.similar_terms = _wordllama_terms  # type: ignore[method-assign]
        return first if second.off_topic else second

    return rank


def run_neighbours(sets: list[Any]) -> None:
    for setting in ("shipped", "full:0.45", "full:0.5", "full:0.55", "rank:0.4", "rank:0.45", "rank:0.5"):
        semantic.SemanticRescue.similar_terms = _wordllama_terms  # type: ignore[method-assign]
        index.SearchIndex.rank = _shipped_rank  # type: ignore[method-assign]
        if setting != "shipped":
            mode, theta = setting.split(":")
            terms = minilm_terms(float(theta), 0.6)
            if mode == "full":
                semantic.SemanticRescue.similar_terms = terms  # type: ignore[method-assign]
            else:
                index.SearchIndex.rank = rank_with(terms)  # type: ignore[method-assign]
        print_decisions(setting, sets)
    semantic.SemanticRescue.similar_terms = _wordllama_terms  # type: ignore[method-assign]
    index.SearchIndex.rank = _shipped_rank  # type: ignore[method-assign]


def eval_catalogs_with_neighbours(out: Path) -> None:
    index.SearchIndex.rank = rank_with(minilm_terms(0.45, 0.6))  # type: ignore[method-assign]
    variants.write_outcomes(out)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("experiment", choices=("maxsim", "category", "foreign", "neighbours"))
    parser.add_argument("--idf", action="store_true", help="maxsim: query tokens weighted by idf")
    parser.add_argument("--catalogs", type=Path, help="neighbours: eval --catalogs --json with the rank rule, to FILE")
    args = parser.parse_args()
    if args.catalogs:
        eval_catalogs_with_neighbours(args.catalogs)
        return
    sets = variants.load_sets(SETS)
    print("columns: " + ", ".join(SETS) + ", mean")
    if args.experiment == "maxsim":
        run_fusions(maxsim_variants(args.idf), sets)
    elif args.experiment == "category":
        run_fusions(category_variants(), sets)
    elif args.experiment == "foreign":
        run_foreign(sets)
    else:
        run_neighbours(sets)


if __name__ == "__main__":
    main()
