"""Experiment (issue 29, rank): fusion variants on the TUNING sets only, each catalog loaded and embedded once.

    .venv/bin/python bench/_exp_rank_variants.py --variants shipped,guard --sets lastfm,spotify-dev,stripe-dev
    .venv/bin/python bench/_exp_rank_variants.py --diagnose      # where the right tool sits: lexical, MiniLM, fused
    .venv/bin/python bench/_exp_rank_variants.py --variants shipped --catalogs OUT.json   # for bench/paired_eval.py

Variants other than `shipped` that merge with `rrf` use a fixed MiniLM weight (`fusion.WEIGHT`, the engine's before
2026-11-28, when the weight began to follow the lexical confidence: `fusion.weight_for`). Each variant replaces
`fusion.SemanticFusion.fuse` (it sees the query, the lexical ranking after the priors, the
tools left out and the lexical `Ranking` the engine built); the rest of TOOL_SEARCH is the real surface. Prints
bench/_exp_rank.py's metrics per set and the tuning mean. Never run on held-out sets: their figures come from
`progressive-mcp eval --catalogs`, aggregate only.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

from progressive_mcp.search import dense, fusion, index, vectors
from progressive_mcp.search.evaluation import engine_ranker, run_eval
from progressive_mcp.search.records import without_ids

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _exp_rank import load_sets

Lexical = Sequence[tuple[int, float]]
Fuse = Callable[[fusion.SemanticFusion, str, Lexical, Collection[int], Any], list[tuple[int, float]] | None]

_context: dict[str, Any] = {}
_query_vectors: dict[tuple[int, str], Any] = {}
_engine_fuse = fusion.SemanticFusion.fuse


def _shipped_fuse(self: fusion.SemanticFusion, query: str, lexical: Lexical, leave_out: Collection[int] = ()) -> Any:
    """The engine's fusion as it runs, MiniLM's weight from the lexical ranking being fused (`fusion.weight_for`)."""
    ranking = _context.get("ranking")
    share = None if ranking is None else ranking.relative
    return _engine_fuse(self, query, lexical, leave_out, lexical_share=share)


_shipped_fused = index.SearchIndex._fused


def cosines(self: fusion.SemanticFusion, text: str) -> Any:
    import numpy as np

    key = (id(self), text)
    if key not in _query_vectors:
        _query_vectors[key] = np.einsum("ij,j->i", self._vectors.matrix(), self._embed_query(text))
    return _query_vectors[key]


def semantic_order(self: fusion.SemanticFusion, text: str, depth: int, leave_out: Collection[int]) -> list[int]:
    import numpy as np

    order = np.argsort(-cosines(self, text), kind="stable")
    return [int(i) for i in order if int(i) not in leave_out][:depth]


def rrf(
    lexical: Lexical, semantic: Sequence[int], weight: float, k: float = fusion.K, depth: int = fusion.DEPTH
) -> list[tuple[int, float]]:
    """The shipped merge with its own weight (no deeper tail: the first 10 places are what is measured)."""
    scores: dict[int, float] = {}
    for ranking, w in (([doc for doc, _ in lexical][:depth], 1.0), (list(semantic)[:depth], weight)):
        for rank, doc in enumerate(ranking, 1):
            scores[doc] = scores.get(doc, 0.0) + w / (k + rank)
    best = (1.0 + weight) / (k + 1)
    return [(doc, scores[doc] / best) for doc in sorted(scores, key=lambda doc: -scores[doc])]


# --- variants ------------------------------------------------------------------------------------------------------


def shipped(self: fusion.SemanticFusion, query: str, lexical: Lexical, leave_out: Collection[int], ranking: Any):
    return _shipped_fuse(self, query, lexical, leave_out)


def plain(self, query, lexical, leave_out, ranking):  # type: ignore[no-untyped-def]
    return rrf(lexical, semantic_order(self, without_ids(query), fusion.TAIL_DEPTH, leave_out), fusion.WEIGHT)


def guard(gap: int, margin: float) -> Fuse:
    """The lexical first place stays first unless MiniLM ranks it below `gap` and MiniLM's own first tool is
    `margin` closer (cosine) to the query than it."""

    def fuse(self, query, lexical, leave_out, ranking):  # type: ignore[no-untyped-def]
        fused = _shipped_fuse(self, query, lexical, leave_out)
        if not fused or not lexical or ranking is None or ranking.off_topic:
            return fused
        top = lexical[0][0]
        if fused[0][0] == top:
            return fused
        text = without_ids(query)
        order = semantic_order(self, text, len(self._vectors.matrix()), leave_out)
        cos = cosines(self, text)
        at = order.index(top) + 1 if top in order else 10**6
        if at > gap and cos[order[0]] - cos[top] >= margin:
            return fused
        first = [item for item in fused if item[0] == top]
        if not first:
            return fused
        rest = [item for item in fused if item[0] != top]
        return [(top, max(fused[0][1], first[0][1])), *rest]

    return fuse


def by_confidence(low: float, high: float, source: str = "relative") -> Fuse:
    """MiniLM's weight from `low` (the lexical best tool answers the whole query) to `high` (it answers none)."""

    def fuse(self, query, lexical, leave_out, ranking):  # type: ignore[no-untyped-def]
        if ranking is None:
            return _shipped_fuse(self, query, lexical, leave_out)
        share = min(max(getattr(ranking, source), 0.0), 1.0)
        weight = high - (high - low) * share
        semantic = semantic_order(self, without_ids(query), fusion.TAIL_DEPTH, leave_out)
        return rrf(lexical, semantic, weight)

    return fuse


def tied_ranks(lexical: Lexical, tie: float) -> list[int]:
    """Each lexical tool's rank where a tool within `tie` of a better one's score shares its rank."""
    ranks: list[int] = []
    for position, (_, score) in enumerate(lexical):
        better = sum(1 for _, other in lexical[:position] if score < other * tie)
        ranks.append(better + 1)
    return ranks


def ties(tie: float, weight: float = fusion.WEIGHT, only_answered: bool = False) -> Fuse:
    """Reciprocal-rank fusion where near-equal lexical scores (within `tie`) share a rank: MiniLM breaks them."""

    def fuse(self, query, lexical, leave_out, ranking):  # type: ignore[no-untyped-def]
        if ranking is None or ranking.semantic or (only_answered and ranking.off_topic):
            return _shipped_fuse(self, query, lexical, leave_out)
        semantic = semantic_order(self, without_ids(query), fusion.TAIL_DEPTH, leave_out)
        part = list(lexical[: fusion.DEPTH])
        scores: dict[int, float] = {}
        for (doc, _), rank in zip(part, tied_ranks(part, tie), strict=True):
            scores[doc] = 1.0 / (fusion.K + rank)
        for rank, doc in enumerate(semantic[: fusion.DEPTH], 1):
            scores[doc] = scores.get(doc, 0.0) + weight / (fusion.K + rank)
        best = (1.0 + weight) / (fusion.K + 1)
        return [(doc, scores[doc] / best) for doc in sorted(scores, key=lambda doc: -scores[doc])]

    return fuse


def feedback(top: int, beta: float, seeds: str = "fused") -> Fuse:
    """Pseudo-relevance feedback in MiniLM's space (Rocchio): the query's vector moved toward the mean vector of the
    first `top` tools of the shipped fusion (or of the lexical ranking), MiniLM's order taken again with it, and
    merged with the lexical ranking as `plain` does."""

    def fuse(self, query, lexical, leave_out, ranking):  # type: ignore[no-untyped-def]
        import numpy as np

        fused = _shipped_fuse(self, query, lexical, leave_out)
        if not fused or ranking is None:
            return fused
        first = [doc for doc, _ in (fused if seeds == "fused" else lexical)[:top]]
        if not first:
            return fused
        matrix = self._vectors.matrix()
        moved = self._embed_query(without_ids(query)) + beta * matrix[first].mean(axis=0)
        moved = moved / np.linalg.norm(moved)
        order = np.argsort(-np.einsum("ij,j->i", matrix, moved), kind="stable")
        semantic = [int(i) for i in order if int(i) not in leave_out][: fusion.TAIL_DEPTH]
        return rrf(lexical, semantic, fusion.WEIGHT)

    return fuse


VARIANTS: dict[str, Fuse] = {
    **{
        f"fb-{s}-{t}-{b}": feedback(t, b, s)
        for s in ("fused", "lexical")
        for t in (1, 2, 3, 5)
        for b in (0.2, 0.3, 0.5, 0.7, 1.0)
    },
    **{f"ties-{t}": ties(t) for t in (0.8, 0.85, 0.9, 0.93, 0.95, 0.97, 0.98, 0.99, 0.995)},
    **{f"ties-{t}-w{w}": ties(t, w) for t in (0.9, 0.95, 0.98) for w in (0.35, 0.75, 1.0)},
    "shipped": shipped,
    "plain": plain,
    **{f"guard-{g}-{m}": guard(g, m) for g in (3, 5, 10) for m in (0.0, 0.05, 0.1)},
    **{
        f"conf-{src[:3]}-{lo}-{hi}": by_confidence(lo, hi, src)
        for src in ("relative", "coverage", "confidence")
        for lo, hi in (
            (0.25, 0.75),
            (0.25, 1.0),
            (0.0, 1.0),
            (0.5, 1.0),
            (0.35, 0.65),
            (0.1, 1.0),
            (0.35, 1.0),
            (0.25, 1.25),
            (0.25, 0.9),
            (0.15, 0.9),
            (0.35, 0.9),
            (0.5, 0.5),
            (0.25, 1.5),
            (0.5, 1.5),  # the grid of a fine-tuned model (bench/_exp_model.py, model/README.md)
            (0.75, 1.5),
            (1.0, 1.5),
            (1.0, 2.0),
            (1.0, 1.0),  # a model fine-tuned on written requests (model/README.md, third round)
            (1.5, 1.5),
            (2.0, 2.0),
            (1.0, 3.0),
            (1.5, 3.0),
            (2.0, 4.0),
        )
    },
}


def install(variant: Fuse) -> None:
    def fuse(self, query, lexical, leave_out=(), **options):  # type: ignore[no-untyped-def]
        return variant(self, query, lexical, leave_out, _context.get("ranking"))

    def fused(self, query, ranking, excluded, categories):  # type: ignore[no-untyped-def]
        _context["ranking"] = ranking
        try:
            return _shipped_fused(self, query, ranking, excluded, categories)
        finally:
            _context.pop("ranking", None)

    fusion.SemanticFusion.fuse = fuse  # type: ignore[method-assign]
    index.SearchIndex._fused = fused  # type: ignore[method-assign]


def measure(sets: list[tuple[str, Any, Any, Any]]) -> dict[str, dict[str, float]]:
    rows = {}
    for label, catalog, meta, queries in sets:
        run = run_eval(catalog, queries, engine_ranker(catalog, meta=meta))
        m = run["metrics"]
        rows[label] = {"r1": m["recall@1"], "r5": m["recall@5"], "mrr": m["mrr"], "nm": m["no_match_rate"] or 0.0}
    return rows


def diagnose(sets: list[tuple[str, Any, Any, Any]]) -> None:
    """Per tuning set: how often the right tool is first in the lexical ranking, in MiniLM's, in the fused one."""
    seen: dict[str, tuple[list[int], list[int], list[int]]] = {}

    def record(self, query, lexical, leave_out, ranking):  # type: ignore[no-untyped-def]
        fused = _shipped_fuse(self, query, lexical, leave_out)
        semantic = semantic_order(self, without_ids(query), 40, leave_out)
        if ranking is not None and not ranking.off_topic and fused:
            seen[query] = ([doc for doc, _ in lexical], semantic, [doc for doc, _ in fused])
        return fused

    install(record)
    for label, catalog, meta, queries in sets:
        seen.clear()
        run = run_eval(catalog, queries, engine_ranker(catalog, meta=meta))
        names = [tool.name for tool in catalog.tools]
        counts: dict[str, int] = {}
        for r in run["per_query"]:
            best = {t for t, g in r["relevant"].items() if g == 2}
            if not best or r["query"] not in seen:
                continue
            lex, sem, _ = seen[r["query"]]
            final = r["results"][:1]
            flags = [bool(order) and names[order[0]] in best for order in (lex, sem)]
            key = f"lex{flags[0]:d} sem{flags[1]:d} final{bool(final) and final[0] in best:d}"
            counts[key] = counts.get(key, 0) + 1
        print(label, dict(sorted(counts.items())))


def write_outcomes(out: Path) -> None:
    """`progressive-mcp eval --catalogs --json --outcomes` with the engine as patched now, written to `out` (for
    bench/paired_eval.py; held-out figures read there only as counts)."""
    import contextlib
    import io

    from progressive_mcp import cli

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        cli.main(["eval", "--catalogs", "--json", "--outcomes"])
    out.write_text(printed.getvalue(), encoding="utf-8")
    print(f"wrote {out}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--variants", default="shipped")
    parser.add_argument("--sets", default="lastfm,spotify-dev,stripe-dev")
    parser.add_argument("--document", default="", help="a vectors.document variant (see DOCUMENTS)")
    parser.add_argument("--diagnose", action="store_true")
    parser.add_argument(
        "--catalogs", type=Path, help="a variant in `eval --catalogs --json --outcomes`, to FILE (paired_eval)"
    )
    args = parser.parse_args()
    if args.document:
        vectors.document = DOCUMENTS[args.document]  # type: ignore[assignment]
    if args.catalogs:
        install(VARIANTS[args.variants])
        write_outcomes(args.catalogs)
        return
    sets = load_sets(args.sets.split(","))
    if args.diagnose:
        diagnose(sets)
        return
    names = list(VARIANTS) if args.variants == "all" else args.variants.split(",")
    print(f"{'variant':<24}" + "".join(f"{label:>24}" for label, *_ in sets) + f"{'mean':>24}")
    for name in names:
        install(VARIANTS[name])
        rows = measure(sets)
        mean = {key: sum(r[key] for r in rows.values()) / len(rows) for key in ("r1", "r5", "mrr")}
        cells = "".join(f"   {r['r1']:.3f} {r['r5']:.3f} {r['mrr']:.3f}" for r in rows.values())
        print(f"{name:<24}{cells}   {mean['r1']:.3f} {mean['r5']:.3f} {mean['mrr']:.3f}", flush=True)


def minilm(self, query, lexical, leave_out, ranking):  # type: ignore[no-untyped-def]
    """MiniLM's ranking alone (for comparing documents)."""
    semantic = semantic_order(self, without_ids(query), fusion.TAIL_DEPTH, leave_out)
    return [(doc, 1.0 - i / 100) for i, doc in enumerate(semantic)]


VARIANTS["minilm"] = minilm


def query_text(rewrite: Callable[[str], str]) -> Fuse:
    """The shipped fusion, MiniLM reading `rewrite(query without ids)`."""

    def fuse(self, query, lexical, leave_out, ranking):  # type: ignore[no-untyped-def]
        semantic = semantic_order(self, rewrite(without_ids(query)) or query, fusion.TAIL_DEPTH, leave_out)
        return rrf(lexical, semantic, fusion.WEIGHT)

    return fuse


_QUOTED = re.compile(r"(?<!\w)['\"`\u2018\u201c][^'\"`\u2019\u201d]{1,40}['\"`\u2019\u201d](?!\w)")
VARIANTS["q-noquotes"] = query_text(lambda q: " ".join(_QUOTED.sub(" ", q).split()))
VARIANTS["q-lower"] = query_text(str.lower)
VARIANTS["q-nopunct"] = query_text(lambda q: " ".join(re.sub(r"[?!,;:]+", " ", q).split()))

_second: dict[int, Any] = {}


def two_vectors(second: Callable[[Any], str], mix: str = "max") -> Fuse:
    """MiniLM's closeness as the better (or mean) of two documents per tool: the shipped one and `second`."""

    def fuse(self, query, lexical, leave_out, ranking):  # type: ignore[no-untyped-def]
        import numpy as np

        if id(self) not in _second:
            from progressive_mcp.search import embedder

            texts = [second(tool) or vectors.document(tool) for tool in self._vectors._tools]
            _second[id(self)] = embedder.Embedder.shared().embed(texts)
        text = without_ids(query)
        one = cosines(self, text)
        two = _second[id(self)] @ self._embed_query(text)
        both = np.maximum(one, two) if mix == "max" else (one + two) / 2
        order = [int(i) for i in np.argsort(-both, kind="stable") if int(i) not in leave_out][: fusion.TAIL_DEPTH]
        return rrf(lexical, order, fusion.WEIGHT)

    return fuse


def _lead(tool: Any) -> str:
    return dense.trim_description(tool.description).split(". ")[0]


VARIANTS["two-lead-max"] = two_vectors(_lead)
VARIANTS["two-lead-mean"] = two_vectors(_lead, "mean")
VARIANTS["two-summary-max"] = two_vectors(lambda t: t.summary)

_HTTP = {"get", "post", "put", "patch", "delete"}


def _clean(text: str) -> str:
    """A title or summary without routes, paths, code spans or markdown emphasis."""
    text = re.sub(dense._CODE_OR_PATH, " ", re.sub(dense._ROUTE_PREFIX, "", text, count=1))
    text = text.replace("**", "").replace("…", "")
    return " ".join(text.split()).strip(" .")


def _name_words(tool: Any, verbs: str) -> list[str]:
    words = dense.split_name(tool.name)
    if verbs == "keep" or tool.operation is None or not words or words[0] not in _HTTP:
        return words
    if words[0] != tool.operation.method.lower():
        return words
    if verbs == "drop":
        return words[1:]
    path = tool.operation.path.rstrip("/")
    on_record = path.endswith("}") or path.endswith("}.json")
    method = words[0]
    verb = {
        "get": "get" if on_record or verbs == "map-writes" else "list",
        "post": "update" if on_record else "create",
        "put": "update",
        "patch": "update",
        "delete": "delete",
    }[method]
    return [verb, *words[1:]]


def document_of(clean: bool, verbs: str, description: bool = False, dedup: bool = False) -> Callable[[Any], str]:
    def document(tool: Any) -> str:
        text = (lambda t: _clean(t)) if clean else (lambda t: t)
        parts = [" ".join(_name_words(tool, verbs)), text(tool.title), text(tool.summary)]
        parts.append(" ".join(dense.split_name(tool.category)))
        parts.extend(tool.keywords)
        if description:
            parts.append(dense.trim_description(tool.description).split(". ")[0])
        seen: set[str] = set()
        kept = []
        for part in parts:
            key = " ".join(part.casefold().split())
            if dedup:
                key = key.rstrip(".… ")
                if any(other.startswith(key) or key.startswith(other) for other in seen if len(other) > 20):
                    continue
            if key and key not in seen:
                seen.add(key)
                kept.append(part.strip().rstrip("."))
        return ". ".join(kept)

    return document


DOCUMENTS: dict[str, Callable[[Any], str]] = {
    "same": document_of(False, "keep"),
    "clean": document_of(True, "keep"),
    "drop": document_of(False, "drop"),
    "map": document_of(False, "map"),
    "clean-drop": document_of(True, "drop"),
    "clean-map": document_of(True, "map"),
    "clean-map-desc": document_of(True, "map", True),
    "map-writes": document_of(False, "map-writes"),
    "desc": document_of(False, "keep", True),
    "map-desc-dedup": document_of(False, "map", True, True),
    "map-dedup": document_of(False, "map", False, True),
    "map-desc": document_of(False, "map", True),
}


def entity_text(mode: str) -> Fuse:
    """The shipped fusion, MiniLM reading the query with the engine's entity words (`Analysis.entities`: a
    capitalised word the catalog does not know, an all-caps code) dropped or replaced."""

    def fuse(self, query, lexical, leave_out, ranking):  # type: ignore[no-untyped-def]
        text = without_ids(query)
        entities = set(ranking.analysis.entities) if ranking is not None else set()
        if entities:
            words = []
            for word in text.split():
                bare = word.strip("?!.,;:'\"()").removesuffix("'s")
                if bare in entities:
                    if mode == "drop":
                        continue
                    word = mode
                words.append(word)
            text = " ".join(words) or text
        semantic = semantic_order(self, text, fusion.TAIL_DEPTH, leave_out)
        return rrf(lexical, semantic, fusion.WEIGHT)

    return fuse


VARIANTS["ent-drop"] = entity_text("drop")
VARIANTS["ent-something"] = entity_text("something")
VARIANTS["ent-name"] = entity_text("name")


if __name__ == "__main__":
    main()
