"""The semantic signal in every answer: the lexical ranking fused with MiniLM's, by reciprocal rank.

Where the lexical engine answers a query (or the semantic second opinion rescues one, `semantic.SemanticRescue`),
its best `DEPTH` tools and the `DEPTH` tools whose documents are closest to the query in MiniLM's space
(`vectors.ToolVectors`) are merged: each tool scores sum(weight / (K + rank)) over the two rankings, the lexical
one weighing 1 and the semantic one from MAX_WEIGHT (the lexical best tool answers none of the query) down to
MIN_WEIGHT (it answers all; `weight_for`). Whether a query gets an answer at all stays the engine's decision.

The weights (2026-11-29; docs/search.md): with the model fine-tuned on written requests (model/README.md), MiniLM
ranks as well as the words on its own, and weighs 1.5 (the words answer all of the query) to 3 (none) against the
words' 1, chosen on the tuning sets among 0.5-4 (`bench/_exp_model.py`, then `bench/paired_eval.py --roles tuning`).
Against the stock model at 0.25-1: tuning R@1 .537 -> .572, R@5 .760 -> .809; held out R@1 .460 -> .562, R@5
.734 -> .810, shown .940 -> .969. Before, with the stock model, the slope 0.25-1 had beaten a fixed 0.5 (2026-11-28).

Chosen on the tuning sets only (Last.fm, Spotify's dev split; bench/_exp_fusion.py): against the engine as
landed (lexical + WordLlama), weight 0.5 and K 10 lift the mean R@5 from .68 to .73 and keep R@1 (.43 -> .44);
weight 1 lifts R@5 as much but loses R@1 on Last.fm (.43 -> .39). The tool vectors come stored (compiled catalog,
gateway store) or are embedded on the first search; only the query is embedded per search, and repeated queries
not even that (`embedder.embed_query`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING

from progressive_mcp.errors import EmbeddingProviderError
from progressive_mcp.search import embedder, providers
from progressive_mcp.search.records import without_ids
from progressive_mcp.search.vectors import ToolVectors, dequantize, query_rows

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from progressive_mcp.catalog import CatalogTool

WEIGHT = 0.5  # the semantic ranking's weight against the lexical one's 1, when the lexical confidence is not given
# ... which it is in the engine: MiniLM weighs MAX_WEIGHT where the lexical best tool answers none of the query
# (`Ranking.relative` 0) down to MIN_WEIGHT where it answers all of it (`weight_for`).
MIN_WEIGHT, MAX_WEIGHT = 1.5, 3.0
K = 10  # reciprocal-rank constant: small, so the first places of each ranking count most
DEPTH = 20  # how many tools of each ranking are merged
# TOOL_SEARCH's tail lists up to 40 tools after its detailed hits (metatools.MAX_MORE), more than a merge of DEPTH
# each gives where the two rankings agree (Spotify: often 22 tools in all). Tools down to TAIL_DEPTH of either ranking
# follow the merged ones, in their own fused order and each below every merged tool even after the penalties of
# `SearchIndex._by_intent` and `_by_need` (TAIL_SHARE of the last merged score), so the merged order, the top ranks
# included, is what it was.
TAIL_DEPTH = 40
TAIL_SHARE = 0.5
# `near`'s bar: this quantile of the everyday requests' best cosines on the catalog's tools. The highest one (1.0)
# let a single request that happens to share a verb with a tool ("remove ... stain" against a remove-tag tool) set
# the bar for every query; 0.95 and 0.9 measured alike (tuning sets, shown; docs/search.md).
NEAR_QUANTILE = 0.95
# MiniLM's say on whether anything fits, in `SemanticFusion.closeness` (0: as close as the median everyday request
# comes to a tool, NEAR: `near`'s bar, the scale's unit by construction): an answered query below FAR reads as no
# confident match; one rejected for its words at CLOSE or above is answered.
NEAR = 1.0
FAR, CLOSE = 1.0, 1.8

log = logging.getLogger(__name__)
# The everyday requests' vectors by provider model (`SemanticFusion._everyday`): the same for every catalog.
_EVERYDAY: dict[str, NDArray[np.float32]] = {}
_EVERYDAY_LOCK = threading.Lock()


class SemanticFusion:
    """One set of tools' semantic ranking, fused with a lexical one; the model loads on the first `fuse`."""

    def __init__(
        self,
        tools: Sequence[CatalogTool],
        *,
        vectors: ToolVectors | None = None,
        embed_query: Callable[[str], NDArray[np.float32]] | None = None,
    ) -> None:
        self._vectors = vectors or ToolVectors(tools)
        provider = providers.active()
        self._embed_query = embed_query or provider.embed_query
        self._model_id = provider.model_id
        # `near`'s anchors stand for queries: read as queries are (the bundled model's int8 query graph, a remote
        # provider's query input), in one batch; an injected query embedder (tests) is asked text by text.
        self._embed_batch: Callable[[Sequence[str]], NDArray[np.float32]] | None = (
            provider.embed_queries if embed_query is None else None
        )
        self._broken = False
        self._lock = threading.Lock()
        self._scale: tuple[float, float] | None = None  # `closeness`'s zero and unit
        self._last: tuple[str, NDArray[np.float32], NDArray[np.float32]] | None = None  # `_cosines`'

    def ranking(self, query: str, depth: int, leave_out: Collection[int] = ()) -> list[int] | None:
        """The `depth` tools closest to the query, best first (ties to the lower index), none of `leave_out`;
        None when the model cannot be loaded (logged once; lexical search alone from then on)."""
        if self._broken:
            return None
        try:
            scores = self._cosines(query)
        except EmbeddingProviderError:  # a remote provider's outage (it logs it): lexical alone until it answers
            return None
        except (ImportError, OSError, ValueError, RuntimeError) as exc:
            self._give_up(exc)
            return None
        import numpy as np

        order = np.argsort(-scores, kind="stable")
        if not leave_out:
            return [int(i) for i in order[:depth]]
        kept: list[int] = []
        for i in order:
            if int(i) not in leave_out:
                kept.append(int(i))
                if len(kept) == depth:
                    break
        return kept

    def near(self, query: str) -> bool:
        """Whether the query's closest tool is closer than nearly every everyday request (`semantic.everyday_requests`:
        cooking, weather, homework ...) comes to any tool: `closeness` NEAR or more. A query the lexical engine rejects
        but that is still about this catalog."""
        close = self.closeness(query)
        return close is not None and close >= NEAR

    def closeness(self, query: str) -> float | None:
        """How close the query's closest tool is, on a scale set per catalog without labels by the everyday requests
        (`semantic.everyday_requests`) and their own closest tools: 0 as close as the median everyday request comes,
        1 as close as NEAR_QUANTILE of them (`near`'s bar); None without the model. The scale is computed once, on
        first use. The query is read without its ids, as `fuse` reads it: one embedding serves both."""
        if self._broken:
            return None
        import numpy as np

        try:
            matrix = self._vectors.matrix()
            if not len(matrix):
                return None
            with self._lock:
                if self._scale is None:
                    from progressive_mcp.search.semantic import everyday_requests

                    texts = everyday_requests()
                    anchors = (
                        self._everyday(texts)
                        if self._embed_batch is not None
                        else np.stack([self._embed_query(text) for text in texts])
                    )
                    best_of_each = np.einsum("ij,kj->ik", anchors, matrix).max(axis=1)
                    middle, bar = (float(v) for v in np.quantile(best_of_each, [0.5, NEAR_QUANTILE]))
                    self._scale = (middle, max(bar - middle, 1e-6))
                middle, unit = self._scale
            best = float(self._cosines(without_ids(query)).max())
        except EmbeddingProviderError:
            return None
        except (ImportError, OSError, ValueError, RuntimeError) as exc:
            self._give_up(exc)
            return None
        return (best - middle) / unit

    def _cosines(self, text: str) -> NDArray[np.float32]:
        """The text's cosine with every tool; the last text's are kept, since `closeness` and `ranking` read the same
        query one after the other."""
        import numpy as np

        matrix = self._vectors.matrix()
        last = self._last
        if last is not None and last[0] == text and last[1] is matrix:
            return last[2]
        # einsum, not `matrix @ query`: the BLAS behind @ splits a (5,000 x 384) product over threads, which on a
        # busy 2-core machine cost 36 ms where one thread takes 1 ms (bench/semantic_cost.py).
        scores = np.einsum("ij,j->i", matrix, self._embed_query(text))
        self._last = (text, matrix, scores)  # one tuple, replaced whole: safe to read from other threads
        return scores

    def _everyday(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """The everyday requests' vectors from the provider, once per process and model: the bundled model's are
        shipped (`embedder.stored_everyday`); a remote provider's come stored where its tool vectors are (a compiled
        catalog, the gateway's tool store: `vectors.query_rows`), else it is asked once, as int8 rows like those."""
        with _EVERYDAY_LOCK:
            anchors = _EVERYDAY.get(self._model_id)
            if anchors is None:
                if self._model_id == embedder.MODEL_ID:
                    anchors = embedder.stored_everyday(texts)
                if anchors is None:
                    assert self._embed_batch is not None
                    rows, _ = query_rows(texts, embed=self._embed_batch)
                    anchors = dequantize(rows, len(rows) // len(texts))
                _EVERYDAY[self._model_id] = anchors
            return anchors

    def _give_up(self, exc: Exception) -> None:
        """The model cannot be used: lexical search alone from now on (loading it again per query would cost a
        read of the file each time), said once."""
        with self._lock:
            if not self._broken:
                self._broken = True
                log.warning("the semantic ranking is off: its model could not be used (%s)", type(exc).__name__)

    def fuse(
        self,
        query: str,
        lexical: Sequence[tuple[int, float]],
        leave_out: Collection[int] = (),
        *,
        lexical_share: float | None = None,
    ) -> list[tuple[int, float]] | None:
        """The lexical ranking (tool index, score) merged with the semantic one, as (tool index, share of the best
        possible score: first in both) best first; None when the semantic ranking is unavailable. `lexical_share`:
        how much of the query the lexical best tool answers (`Ranking.relative`), which sets MiniLM's weight
        (`weight_for`; None: WEIGHT)."""
        # MiniLM reads the need, not the ids: their word pieces pull the vector toward tools with such pieces.
        semantic = self.ranking(without_ids(query), TAIL_DEPTH, leave_out)
        if semantic is None:
            return None
        weight = WEIGHT if lexical_share is None else weight_for(lexical_share)
        best = (1.0 + weight) / (K + 1)
        words = [doc for doc, _ in lexical]
        scores = _merge(words[:DEPTH], semantic[:DEPTH], weight)
        # sorted() is stable: a tie goes to the tool the lexical ranking placed first.
        fused = [(doc, scores[doc] / best) for doc in sorted(scores, key=lambda doc: -scores[doc])]
        deeper = _merge(words[:TAIL_DEPTH], semantic, weight)
        below = sorted((doc for doc in deeper if doc not in scores), key=lambda doc: -deeper[doc])
        if fused and below:
            scale = TAIL_SHARE * fused[-1][1] / deeper[below[0]]
            fused += [(doc, deeper[doc] * scale) for doc in below]
        return fused


def weight_for(lexical_share: float) -> float:
    """MiniLM's weight beside the lexical ranking's 1: MAX_WEIGHT where the lexical best tool answers none of the
    query, falling linearly to MIN_WEIGHT where it answers all of it. Where the words meet the query well, their
    ranking leads; where they barely do (another vocabulary, a paraphrase), MiniLM's counts as much."""
    share = min(max(lexical_share, 0.0), 1.0)
    return MAX_WEIGHT - (MAX_WEIGHT - MIN_WEIGHT) * share


def _merge(lexical: Sequence[int], semantic: Sequence[int], semantic_weight: float = WEIGHT) -> dict[int, float]:
    """Each tool's reciprocal-rank score over the two rankings (best first each), in first-seen order."""
    scores: dict[int, float] = {}
    for ranking, weight in ((lexical, 1.0), (semantic, semantic_weight)):
        for rank, doc in enumerate(ranking, 1):
            scores[doc] = scores.get(doc, 0.0) + weight / (K + rank)
    return scores
