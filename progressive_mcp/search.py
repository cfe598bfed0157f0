"""Lexical tool search: ranks catalog tools for a need written in plain words.

Each tool is a document of weighted fields (name parts, title, summary, keywords, example
questions, description, parameter names). A query is split into terms the same way, expanded
with domain synonyms, and scored BM25-style per field. Example::

    index = SearchIndex(catalog.tools)
    index.search("give me aapl price", limit=3)   # [Hit(name='GLOBAL_QUOTE', score=...), ...]
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from progressive_mcp.catalog import CatalogTool

FIELD_WEIGHTS: dict[str, float] = {
    "name": 3.0,
    "title": 2.5,
    "keywords": 2.5,
    "summary": 2.0,
    "examples": 1.5,
    "description": 1.0,
    "params": 0.5,
}
K1 = 1.2
STRONG_MATCH = (FIELD_WEIGHTS["name"] + FIELD_WEIGHTS["title"] + FIELD_WEIGHTS["keywords"]) * (K1 + 1)
# A query whose best tool reaches less than this share of the query's own weight is treated as
# matching nothing (off-topic); see `SearchIndex.search`.
MIN_RELATIVE_SCORE = 0.12
# Hits far below the best one are noise for the agent; keep those within this share of the best.
MIN_SHARE_OF_BEST = 0.4
# Between two tools that fit a need alike, the one a free key can call is the better answer.
PREMIUM_FACTOR = 0.85
ENTITY_WEIGHT = 0.2

STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "could",
        "do",
        "does",
        "for",
        "from",
        "get",
        "give",
        "how",
        "i",
        "in",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "please",
        "show",
        "tell",
        "that",
        "the",
        "this",
        "to",
        "was",
        "what",
        "whats",
        "when",
        "where",
        "which",
        "who",
        "will",
        "with",
        "would",
        "you",
        "your",
        "want",
        "need",
        "find",
        "look",
        "up",
        "list",
        "data",
        "info",
        "information",
        "latest",
        "current",
        "today",
        "now",
    ]
)

# Domain words people use, mapped to words the catalog uses. Both sides are lower case.
SYNONYMS: dict[str, tuple[str, ...]] = {
    "price": ("quote", "price"),
    "prices": ("quote", "price"),
    "stock": ("stock", "equity", "share"),
    "shares": ("stock", "share"),
    "ohlcv": ("ohlcv", "open", "high", "low", "close", "volume"),
    "ohlc": ("open", "high", "low", "close"),
    "candles": ("ohlcv", "bars"),
    "eps": ("eps", "earnings", "per", "share"),
    "pe": ("pe", "ratio", "valuation", "overview"),
    "fx": ("fx", "forex", "currency", "exchange"),
    "forex": ("fx", "forex", "currency", "exchange"),
    "gdp": ("gdp", "gross", "domestic", "product"),
    "cpi": ("cpi", "consumer", "price", "index"),
    "rsi": ("rsi", "relative", "strength"),
    "macd": ("macd", "moving", "average", "convergence", "divergence"),
    "sma": ("sma", "simple", "moving", "average"),
    "ema": ("ema", "exponential", "moving", "average"),
    "crypto": ("crypto", "cryptocurrency", "digital", "currency"),
    "bitcoin": ("bitcoin", "btc", "crypto", "digital"),
    "btc": ("bitcoin", "btc", "crypto", "digital"),
    "ethereum": ("ethereum", "eth", "crypto", "digital"),
    "oil": ("oil", "crude", "wti", "brent"),
    "crude": ("oil", "crude", "wti", "brent"),
    "rates": ("rate", "yield"),
    "interest": ("interest", "rate", "federal", "funds"),
    "jobs": ("employment", "payroll", "unemployment", "jobs"),
    "ticker": ("symbol", "ticker", "search"),
    "company": ("company", "overview", "profile"),
    "news": ("news", "sentiment", "articles"),
    "dividend": ("dividend", "dividends", "payout"),
    "earnings": ("earnings", "eps"),
}

_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_WORD = re.compile(r"[A-Za-z0-9]+(?:/[A-Za-z0-9]+)?")


def tokenize(text: str) -> list[str]:
    """Lower-case terms of a text; UPPER_SNAKE and camelCase names are split into their words."""
    terms: list[str] = []
    for raw in _WORD.findall(text.replace("_", " ")):
        for piece in raw.split("/"):
            parts = _CAMEL.findall(piece) or [piece]
            terms.extend(p.lower() for p in parts)
            if len(parts) > 1:
                terms.append(piece.lower())
    return [_stem(t) for t in terms]


def _stem(term: str) -> str:
    """A light plural/verb-ending strip, enough to match 'quotes' with 'quote'."""
    if len(term) > 4 and term.endswith("ies"):
        return term[:-3] + "y"
    if len(term) > 3 and term.endswith("s") and not term.endswith(("ss", "us", "is")):
        return term[:-1]
    return term


@dataclass(frozen=True, slots=True)
class Hit:
    name: str
    score: float
    summary: str
    category: str


class SearchIndex:
    """Per-field term statistics over a fixed set of tools; built once, read-only afterwards."""

    def __init__(self, tools: Iterable[CatalogTool]) -> None:
        self._tools = list(tools)
        self._fields: list[dict[str, Counter[str]]] = [self._document(t) for t in self._tools]
        self._lengths = [{f: sum(counts.values()) for f, counts in doc.items()} for doc in self._fields]
        self._avg_len = {
            f: (sum(sum(doc[f].values()) for doc in self._fields) / max(len(self._fields), 1)) or 1.0
            for f in FIELD_WEIGHTS
        }
        doc_freq: Counter[str] = Counter()
        for doc in self._fields:
            doc_freq.update({term for counts in doc.values() for term in counts})
        # Words found only in example questions are mostly entities (tickers, company names):
        # they may break ties but must not decide which kind of tool answers.
        described = {term for doc in self._fields for f, counts in doc.items() if f != "examples" for term in counts}
        self._example_only = {term for term in doc_freq if term not in described}
        n = max(len(self._tools), 1)
        self._idf = {term: math.log(1 + (n - df + 0.5) / (df + 0.5)) for term, df in doc_freq.items()}

    @staticmethod
    def _document(tool: CatalogTool) -> dict[str, Counter[str]]:
        return {
            "name": Counter(tokenize(tool.name)),
            "title": Counter(tokenize(tool.title)),
            "keywords": Counter(tokenize(" ".join(tool.keywords))),
            "summary": Counter(tokenize(tool.summary)),
            "examples": Counter(tokenize(" ".join(tool.examples))),
            "description": Counter(tokenize(tool.description)),
            "params": Counter(tokenize(" ".join(p.name for p in tool.params))),
        }

    def query_terms(self, query: str) -> dict[str, float]:
        """Query terms with weights: words as typed weigh 1, synonyms they bring in weigh less."""
        weights: dict[str, float] = {}
        for term in tokenize(query):
            if term in STOPWORDS:
                continue
            weights[term] = max(weights.get(term, 0.0), 1.0)
            for extra in SYNONYMS.get(term, ()):
                extra = _stem(extra)
                if extra != term:
                    weights[extra] = max(weights.get(extra, 0.0), 0.5)
        return weights

    def search(self, query: str, *, limit: int = 5, categories: frozenset[str] | None = None) -> list[Hit]:
        """The best `limit` tools for `query`, best first; empty when nothing is a good match."""
        terms = {
            t: w * (ENTITY_WEIGHT if t in self._example_only else 1.0)
            for t, w in self.query_terms(query).items()
            if t in self._idf
        }
        if not terms:
            return []
        # What a tool scores when every query term is a strong match in its three best fields:
        # scores are shown relative to it (0..1), and the no-match threshold is a share of it.
        ceiling = sum(w * self._idf[t] for t, w in terms.items()) * STRONG_MATCH
        scored: list[tuple[float, int]] = []
        for index, doc in enumerate(self._fields):
            tool = self._tools[index]
            if categories and tool.category not in categories:
                continue
            score = 0.0
            lengths = self._lengths[index]
            for term, weight in terms.items():
                term_score = 0.0
                for field_name, field_weight in FIELD_WEIGHTS.items():
                    tf = doc[field_name].get(term, 0)
                    if tf:
                        length = lengths[field_name]
                        norm = tf * (K1 + 1) / (tf + K1 * (0.25 + 0.75 * length / self._avg_len[field_name]))
                        term_score += field_weight * norm
                score += weight * self._idf[term] * term_score
            if score > 0:
                scored.append((score * (PREMIUM_FACTOR if tool.premium else 1.0), index))
        scored.sort(key=lambda item: (-item[0], self._tools[item[1]].name))
        hits = []
        best = scored[0][0] if scored else 0.0
        for score, index in scored[:limit]:
            relative = min(score / ceiling, 1.0) if ceiling else 0.0
            if relative < MIN_RELATIVE_SCORE or score < best * MIN_SHARE_OF_BEST:
                break
            tool = self._tools[index]
            hits.append(Hit(tool.name, round(relative, 3), tool.summary, tool.category))
        return hits
