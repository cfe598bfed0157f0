"""The semantic second opinion: where a query's words leave it unanswered, ask the dense signal before saying no.

The lexical engine (`index.SearchIndex`) judges a query off-topic when the best tools leave too much of it
unanswered (`Ranking.confidence` below `index.MIN_CONFIDENCE`). On a catalog nobody curated, that judgment is
often wrong: "who sounds like Radiohead" shares no word with `artist.getSimilar`. When the `semantic` extra is
installed (`dense.available()`), such a query is embedded and compared with every tool (`dense.DenseIndex`):

- the catalog's bar is the highest cosine any of ~120 everyday requests (``everyday.txt``: cooking, weather,
  homework, ...) reaches on any of its tools, computed once per catalog when the signal is first needed. A query
  whose best tool is closer than every everyday request came is about this catalog;
- the query's lexical confidence lowers the bar a little (`CONFIDENCE_CREDIT`): a half-answered question needs
  less semantic evidence than one sharing no word with the catalog;
- a rescued query's tools are the lexical and the dense rankings fused by reciprocal rank (`DENSE_WEIGHT`).

It also reads a query word no tool text has (and that is no misspelling of one) as the catalog words nearest to
it in the embedding space (`similar_terms`: "bio" -> biography), before the lexical engine judges the query.

A query the lexical engine answers confidently is never touched, nor one it rejects for its shape (a request to
act, to explain, to chat), nor any query of a catalog whose vocabulary is curated (one that sets
`unknown_weight`: there an unknown word already means what its author decided). The constants were chosen on
the tuning sets only (Last.fm, Spotify's dev split; eval/README.md).

`PMCP_SEMANTIC` turns it on or off: ``auto`` (the default: on when the extra is installed, or when
``PMCP_EMBEDDINGS`` names a remote provider, whose fusion needs no extra: `providers`), ``on`` (an error without
either) or ``off``. Servers read it once, in `Settings.from_env`, and pass it down (`Surface`,
`MetaTools`, `SearchIndex(semantic=...)`); an index built without it reads the environment itself.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from progressive_mcp.errors import ConfigError
from progressive_mcp.search import dense, providers

if TYPE_CHECKING:
    from progressive_mcp.catalog import CatalogTool

SEMANTIC_ENV = "PMCP_SEMANTIC"
SEMANTIC_VALUES = ("auto", "on", "off")
CONFIDENCE_CREDIT = 0.1  # each unit of lexical confidence lowers the cosine a query needs by this much
DENSE_WEIGHT = 2.0  # the dense ranking's weight against the lexical one's 1 in a rescued query's fusion
DEPTH = 10  # how many tools of each ranking the fusion considers
# A query word no tool text has, and no misspelling of one, reads as the catalog words closest to it in the
# embedding space ("bio" -> biography, "playcount" -> play, count), each counting this share of its cosine:
WORD_SIMILARITY = 0.45  # the least cosine between the word and a catalog word
WORD_FACTOR = 0.6
WORD_NEIGHBOURS = 3  # at most this many catalog words per query word

log = logging.getLogger(__name__)


def semantic_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Whether TOOL_SEARCH may ask the dense signal, from PMCP_SEMANTIC (auto, on, off; default auto).

    Raises ConfigError for any other value, or for ``on`` without the `semantic` extra.
    """
    value = (os.environ if environ is None else environ).get(SEMANTIC_ENV, "auto").strip().lower() or "auto"
    if value not in SEMANTIC_VALUES:
        raise ConfigError(f"{SEMANTIC_ENV} must be one of {', '.join(SEMANTIC_VALUES)}, not {value!r}")
    if value == "off":
        return False
    if dense.available() or providers.configured(environ):  # a remote provider needs no extra (`providers`)
        return True
    if value == "on":
        raise ConfigError(
            f"{SEMANTIC_ENV}=on needs the semantic extra: pip install 'progressive-mcp[semantic]' "
            f"(or set {SEMANTIC_ENV}=off)"
        )
    return False


def describe(enabled: bool) -> str:
    """What the semantic signal is in this installation, for reports (the eval's)."""
    if not enabled:
        return "off (lexical engine alone)"
    from progressive_mcp.search import embedder

    parts = "WordLlama's second opinion on queries judged off-topic"
    if embedder.available():
        parts += ", MiniLM's ranking fused into every answer (uncurated catalogs; search/fusion.py)"
    return f"on (the semantic extra is installed: {parts}; PMCP_SEMANTIC=off for the lexical engine alone)"


@lru_cache(maxsize=1)
def everyday_requests() -> tuple[str, ...]:
    """The everyday requests that set each catalog's bar (``everyday.txt``, comments and blank lines left out)."""
    text = Path(__file__).with_name("everyday.txt").read_text(encoding="utf-8")
    return tuple(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))


class SemanticRescue:
    """The dense index of one catalog's tools and its bar, built on first use (thread-safe)."""

    def __init__(self, tools: Sequence[CatalogTool], words: Callable[[], Mapping[str, str]] | None = None) -> None:
        """`words`: the catalog's words as written -> their indexed terms, asked for on first use."""
        self._tools = tools
        self._words = words
        self._lock = threading.Lock()
        self._index: dense.DenseIndex | None = None
        self._word_index: tuple[dense.DenseIndex, list[str]] | None = None
        self._broken = False
        self._bar = 1.0

    @property
    def bar(self) -> float:
        """The highest cosine an everyday request reaches on any tool (builds the index if needed)."""
        self._ready()
        return self._bar

    def _ready(self) -> dense.DenseIndex | None:
        """The dense index, built on first call; None (and lexical search alone from then on) when the extra's
        model cannot be loaded, which is logged once."""
        with self._lock:
            if self._index is None and not self._broken and not dense.available():
                self._broken = True  # on for a remote provider's fusion alone (`providers`): nothing to say
            if self._index is None and not self._broken:
                try:
                    index = dense.DenseIndex.for_tools(self._tools)
                    if len(index):
                        anchors = index.embed_many(everyday_requests())
                        self._bar = float((anchors @ index.matrix.T).max())
                except (ImportError, OSError, ValueError) as exc:
                    self._broken = True
                    log.warning("semantic search is off: its model could not be loaded (%s)", type(exc).__name__)
                    return None
                self._index = index
            return self._index

    def similar_terms(self, word: str) -> dict[str, float]:
        """The indexed terms of the catalog words nearest to `word` (a query word no tool text has), each with
        its factor (WORD_FACTOR x cosine); empty when none is close enough."""
        table = self._word_table()
        if table is None:
            return {}
        index, terms = table
        similar: dict[str, float] = {}
        for position, cosine in index.rank(word, WORD_NEIGHBOURS):
            if cosine >= WORD_SIMILARITY:
                similar.setdefault(terms[position], WORD_FACTOR * cosine)
        return similar

    def _word_table(self) -> tuple[dense.DenseIndex, list[str]] | None:
        if self._ready() is None or self._words is None:
            return None
        with self._lock:
            if self._word_index is None:
                words = dict(self._words())
                self._word_index = (dense.DenseIndex(list(words)), list(words.values()))
            return self._word_index

    def rescue(
        self, query: str, lexical: Sequence[tuple[int, float]], confidence: float
    ) -> list[tuple[int, float]] | None:
        """The tools for a query the lexical engine left unanswered, as (tool index, cosine) best first, or None
        when the query is no closer to the catalog than everyday requests come."""
        index = self._ready()
        if index is None or not len(index):
            return None
        scores = index.scores(query)  # the query is embedded once: for its best tools and for every fused one
        ranked = index.best(scores, DEPTH)
        if not ranked or ranked[0][1] + CONFIDENCE_CREDIT * confidence < self._bar:
            return None
        fused = dense.reciprocal_rank_fusion(
            [[doc for doc, _ in lexical[:DEPTH]], [doc for doc, _ in ranked]], weights=[1.0, DENSE_WEIGHT]
        )
        return [(doc, float(scores[doc])) for doc in fused]
