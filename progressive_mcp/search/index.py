"""Lexical tool search: ranks catalog tools for a need written in plain words, or says that none fits.

Each tool is a document of weighted fields (name parts, title, summary, keywords, example questions, description,
parameter names and descriptions), scored BM25F-style. A query is read into *concepts*: each content word with the
domain synonyms it brings in; entities (tickers, company names, coins, currency pairs, dates) as light hints; and
words the catalog does not know, or subjects it is known to lack, which count against every match. A tool's score
is the share of the query's weight it answers (0..1, shown to the agent); a query that the best tools leave mostly
unanswered gets no result. Example::

    index = SearchIndex(catalog.tools)
    index.search("give me aapl price", limit=3)   # [Hit(name='GLOBAL_QUOTE', score=...), ...]
    index.search("UK inflation rate")             # []: the inflation series are US-only

Per query, the cost grows with the postings of the query's terms, not with the number of tools: every term's weight
for every tool is computed once, when the index is built. The words it understands are in
`progressive_mcp.search.vocabulary`.
"""

from __future__ import annotations

import heapq
import itertools
import math
import re
import threading
from array import array
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from operator import itemgetter
from types import MappingProxyType
from typing import NamedTuple

from progressive_mcp.catalog import CatalogTool
from progressive_mcp.collector import collector_paused
from progressive_mcp.search import english, providers, records
from progressive_mcp.search import vocabulary as vocab
from progressive_mcp.search.fusion import CLOSE as ANSWER_CLOSENESS
from progressive_mcp.search.fusion import DEPTH as FUSION_DEPTH
from progressive_mcp.search.fusion import FAR as FAR_CLOSENESS
from progressive_mcp.search.fusion import NEAR as NEAR_CLOSENESS
from progressive_mcp.search.fusion import SemanticFusion
from progressive_mcp.search.semantic import SemanticRescue, semantic_enabled
from progressive_mcp.search.vocabulary import EMPTY, Hint, Vocabulary

# --- how tools are indexed (BM25F) ---------------------------------------------------------------------------------
# Where a word is found says how much the tool is about it.
FIELD_WEIGHTS: dict[str, float] = {
    "name": 3.0,
    "title": 2.0,
    "keywords": 2.5,
    "summary": 2.0,
    "examples": 1.0,
    "description": 1.0,
    "param_names": 0.5,
    "param_text": 0.3,
    "output_names": 0.5,
    "category_text": 0.15,
}
# Length normalisation per field: a long keyword list or many example questions do not make a tool less about each
# of them; a long description does dilute a passing mention.
FIELD_B: dict[str, float] = {
    "name": 0.3,
    "title": 0.3,
    "keywords": 0.2,
    "summary": 0.5,
    "examples": 0.3,
    "description": 0.6,
    "param_names": 0.3,
    "param_text": 0.5,
    "output_names": 0.3,
    "category_text": 0.5,
}
K1 = 1.2  # term-frequency saturation
_NO_CATEGORIES: Mapping[str, str] = MappingProxyType({})
MAX_ENUM_WORDS = 30  # a parameter's enum values are indexed as words when it has at most this many

# --- how a query is read -----------------------------------------------------------------------------------------
SYNONYM_FACTOR = 0.7  # a synonym counts this much of the word the user typed
FUZZY_FACTOR = 0.8  # a misspelt word, read as the catalog word one edit away
ENTITY_WEIGHT = 0.2  # a name (a ticker, a company, a capitalised word no tool knows) says what, barely which tool
UNKNOWN_WEIGHT = 0.3  # a content word no tool knows counts against the match this much (of a rare word's weight)
OUT_OF_SCOPE_WEIGHT = 1.5  # the same for a subject the catalog is known to lack (`Vocabulary.out_of_scope`)

# --- how tools are ranked ----------------------------------------------------------------------------------------
BIGRAM_WEIGHT = 0.5  # two query words found side by side in a tool text: a bonus on top of the words themselves
NAME_BONUS = 0.1  # a tool whose whole name the query says scores up to this much more (MACD, not MACDEXT)
PRESENT_PRIOR = 0.05  # no date, no "now": a faint lean to live tools and away from their past twins (`tense`)
PREMIUM_FACTOR = 0.9  # between two tools that fit alike, the one a free key can call is the better answer
LIGHT_TAIL = 0.3  # a light concept (weight < 1) skips tools it fits at less than this share of its best fit
MIN_SHARE_OF_BEST = 0.3  # hits far below the best one are noise for the agent
# A query's mood against a tool's: a question or a look-up ("which songs have I loved") leans to the tools that only
# read, a command to change something ("heart this track", "unfollow this band") to the tools that write.
INTENT_PRIOR = 0.4
# A query that names no record (no id such as cus_123 or 4591) and a REST catalog with both kinds of read: the tools
# that fetch one record by its id (a path ending in a parameter: GET /coupons/{coupon}) score 1 / (1 + ITEM_PRIOR)
# of theirs, so "coupons" or "list the payouts" find the collection's read (GET /coupons) first. Writes keep theirs.
ITEM_PRIOR = 0.4

# --- when nothing fits (calibrated on the dev half of eval/queries.jsonl) --------------------------------------------
# A query is off-topic when its confidence, the mean of two shares of its weight, stays below MIN_CONFIDENCE:
# coverage, what the best COVERAGE_DEPTH tools answer between them (a query may need two tools), and the relative
# score, what the best tool answers alone.
MIN_CONFIDENCE = 0.5
# ... and an answered query whose confidence reaches SURE_CONFIDENCE keeps its answer, however far MiniLM finds it
# (`SearchIndex._fused`): the words name what it asks for.
SURE_CONFIDENCE = 0.85
COVERAGE_DEPTH = 5
MATCH_QUALITY = 0.5  # for coverage, a word found once in a description already counts as answered


@dataclass(frozen=True, slots=True)
class Hit:
    name: str
    score: float
    summary: str
    category: str


class Token(NamedTuple):
    """A word of a text as typed (`raw`), lower-cased, and as indexed (`term`)."""

    raw: str
    lower: str
    term: str


@dataclass(slots=True)
class Concept:
    """One idea of a query: the terms that may answer it (each with a factor), its weight, and its mass, what a
    perfect match scores (an unknown word has mass and no terms: it can only count against)."""

    label: str
    weight: float
    terms: dict[str, float] = field(default_factory=dict)
    mass: float = 0.0


@dataclass(slots=True)
class Analysis:
    """How a query was read (`SearchIndex.analyse`): its concepts, word pairs, and the rules it triggered."""

    concepts: list[Concept] = field(default_factory=list)
    bigrams: list[str] = field(default_factory=list)
    terms: frozenset[str] = frozenset()  # its content words as indexed, without synonyms
    entities: list[str] = field(default_factory=list)
    foreign: bool = False  # names a place outside the US: US-only tools do not answer it
    # What the query's opening says it wants: to read ("what", "show", "is ...") or to change ("add", "unfollow");
    # None when it opens with neither (a bare noun phrase).
    intent: str | None = None
    action: bool = False  # asks to act (buy, sell, book, write ...), not to look something up
    asks_other: str | None = None  # asks for something no data tool gives: an explanation, advice, a chat
    present: bool = False  # no date and no "now": taken to be about the present
    names_record: bool = False  # holds an id, a long number or a quoted value (`records.names_record`)

    @property
    def mass(self) -> float:
        return sum(c.mass for c in self.concepts)


@dataclass(frozen=True, slots=True)
class Ranking:
    """What `SearchIndex.rank` found: (tool index, score) best first, the two shares behind the no-match rule, and
    why the query counts as off-topic (None when it does not)."""

    analysis: Analysis
    scores: list[tuple[int, float]]
    coverage: float
    relative: float
    confidence: float
    off_topic: str | None
    semantic: bool = False  # the lexical engine left it unanswered; `scores` are the semantic rescue's cosines
    fused: bool = False  # `scores` are the lexical and MiniLM rankings fused (`fusion.SemanticFusion`): shares
    # Judged off-topic for its words, yet MiniLM puts a tool closer to it than any everyday request comes
    # (`fusion.SemanticFusion.near`): its closest tools are worth showing as low-confidence candidates.
    near: bool = False


# --- text to terms ---------------------------------------------------------------------------------------------


class Reading:
    """How texts become terms for one vocabulary: English rules plus what the catalog's `Vocabulary` adds (word
    forms, phrases, abbreviations, filler words). Each word is read once per reading (cached); one reading per
    vocabulary is shared (`reading_for`)."""

    def __init__(self, vocabulary: Vocabulary = EMPTY) -> None:
        self.vocabulary = vocabulary
        self.word_forms = {**vocab.WORD_FORMS, **vocabulary.word_forms}
        self.stop_terms = vocab.STOPWORDS | vocabulary.filler
        self.spacing = vocabulary.spacing
        self.phrases: dict[tuple[str, ...], str] = {tuple(k.split()): v for k, v in vocabulary.phrases.items()}
        self._phrase_sizes = sorted({len(k) for k in self.phrases}, reverse=True)
        spacing_starts = {"each", "every", "per", *vocab.UNIT_WORDS} if self.spacing else set()
        # The words a phrase can start with; and the words every phrase holds one of ('by' for 'day by day').
        self._phrase_words = frozenset({k[0] for k in self.phrases} | spacing_starts)
        self._phrase_markers = frozenset(
            {k[0] for k in self.phrases} | ({"each", "every", "per", "by"} if self.spacing else set())
        )
        self._abbreviations = {k: f" {v} " for k, v in vocabulary.abbreviations.items()}
        self._spelled_out = (
            re.compile(
                r"(?<![a-z0-9])(?:" + "|".join(map(re.escape, self._abbreviations)) + r")(?![a-z0-9])", re.IGNORECASE
            )
            if self._abbreviations
            else None
        )
        signed = sorted(w for w in vocabulary.signed_words if len(w) <= 3)
        self._signed = vocabulary.signed_words
        self._signed_direction = (
            re.compile(r"(?<![a-z0-9])([+-])(" + "|".join(map(re.escape, signed)) + r")\b", re.IGNORECASE)
            if signed
            else None
        )
        self._stems: dict[str, str] = {}
        self._terms: dict[str, tuple[str, ...]] = {}
        self.words = _WordTerms(self)

    def tokenize(self, text: str) -> list[Token]:
        """The words of a text with their indexed forms: UPPER_SNAKE names split, 'P/E' and 'S&P' kept whole,
        '5min' read as 'minute', the vocabulary's phrases as one term. Stopwords are kept (callers drop them)."""
        raws = _TOKEN.findall(self.normalise(text))
        lowers = [raw.lower() for raw in raws]
        tokens: list[Token] = []
        done = 0
        for start, size, term, fixed in self.phrases_of(lowers):
            tokens += self._tokens(raws[done:start], lowers[done:start])
            lower = " ".join(lowers[start : start + size])
            # A fixed phrase ('after hours') keeps the words as typed; the others read them lower-cased.
            raw = " ".join(raws[start : start + size]) if fixed else lower
            tokens.append(Token(raw, lower, term))
            done = start + size
        tokens += self._tokens(raws[done:], lowers[done:])
        return tokens

    def _tokens(self, raws: list[str], lowers: list[str]) -> list[Token]:
        terms_of = self.terms_of
        return [Token(raw, lower, term) for raw, lower in zip(raws, lowers, strict=True) for term in terms_of(lower)]

    def normalise(self, text: str) -> str:
        """The rewrites before words are split; each regex runs only on a text holding the characters it needs."""
        text = text.replace("_", " ").replace("’", "'")
        if not text.islower():
            text = _CAMEL.sub(" ", text)  # getTopTracks, listRepositoriesV2, HTTPServer: words of their own
        if ".s" in text or ".S" in text:
            text = _US_DOTTED.sub(" US ", text)
        if self._signed_direction and ("-" in text or "+" in text):
            text = self._signed_direction.sub(
                lambda m: (" plus " if m.group(1) == "+" else " minus ") + m.group(2), text
            )
        if self._spelled_out and "&" in text:
            text = self._spelled_out.sub(lambda m: self._abbreviations[m.group(0).lower()], text)
        if "&" in text or "/" in text:
            text = _ABBREVIATION_JOIN.sub(r"\1\2", text)
        if "'" in text:
            text = _APOSTROPHE.sub("", text) if "'s" in text else text.replace("'", "")
        return text

    def lower_words(self, text: str, *, apart: bool = False) -> list[str]:
        """The lower-case words of a text, as `tokenize` reads them (without the per-word tokens); with `apart`,
        each `_APART` in the text is a word too."""
        text = self.normalise(text)
        words = _TOKEN_OR_APART if apart else _TOKEN
        if not text.isascii():
            return [raw.lower() for raw in words.findall(text)]
        text = text.lower()  # lower-casing ASCII changes no word boundary (a few other letters grow when lowered)
        if apart and "%" not in text and not _DOT_LETTER.search(text):
            return text.translate(_PLAIN_WORDS).split()  # no dotted ticker, no '%': words are runs of letters/digits
        return words.findall(text)

    def terms_of(self, lower: str) -> tuple[str, ...]:
        """The indexed form(s) of one lower-case word: '5min' -> minute, 'q3' -> quarter, 'fy2025' -> fiscal year."""
        found = self._terms.get(lower)
        if found is None:
            found = self._terms[lower] = self._read_word(lower)
        return found

    def _read_word(self, lower: str) -> tuple[str, ...]:
        if lower.isalpha():
            if lower == "fy":
                return ("fiscal", "year")
            if len(lower) == 2 and lower[0] == "q" and lower[1] in "1234":
                return ("quarter",)
            return (self.stem(lower),)
        if lower == "%":
            return ("percent",)
        if "." in lower:
            return (lower,)  # a dotted word (BRK.B, TSCO.LON); tool texts split it (`content_of`)
        unit = _NUMBER_UNIT.match(lower)
        if unit and unit.group(2) in vocab.UNIT_WORDS:
            return (vocab.UNIT_WORDS[unit.group(2)],)
        if _QUARTER.match(lower):
            return ("quarter",)
        if _FISCAL.match(lower):
            return ("fiscal", "year")
        return (lower,)

    def stem(self, word: str) -> str:
        found = self._stems.get(word)
        if found is None:
            found = self._stems[word] = _stem(self.word_forms.get(word, word))
        return found

    def phrases_of(self, lowers: list[str]) -> list[tuple[int, int, str, bool]]:
        """The phrases of a text, given its lower-case words: (first word, number of words, term, whether it is one
        of the vocabulary's fixed phrases) for each, in order."""
        if self._phrase_markers.isdisjoint(lowers):
            return []
        found: list[tuple[int, int, str, bool]] = []
        done = 0
        for i, word in enumerate(lowers):
            if i >= done and word in self._phrase_words and (phrase := self._phrase_at(lowers, i)):
                found.append((i, *phrase))
                done = i + phrase[0]
        return found

    def _phrase_at(self, lowers: list[str], i: int) -> tuple[int, str, bool] | None:
        """The phrase starting at word `i`, as (its length in words, its term, fixed): a vocabulary phrase ('after
        hours' -> 'afterhours'); 'day by day', 'each week', 'per month' -> the vocabulary's spacing adjective."""
        n = len(lowers)
        if i + 1 >= n:
            return None
        for size in self._phrase_sizes:
            term = self.phrases.get(tuple(lowers[i : i + size])) if i + size <= n else None
            if term:
                return size, term, True
        if not self.spacing:
            return None
        word, nxt = lowers[i], lowers[i + 1]
        after = lowers[i + 2] if i + 2 < n else ""
        unit = vocab.UNIT_WORDS.get(word)
        if unit is not None and unit in self.spacing and nxt == "by" and vocab.UNIT_WORDS.get(after) == unit:
            return 3, self.stem(self.spacing[unit]), False
        if word in ("each", "every", "per") and len(nxt) > 1:
            unit = vocab.UNIT_WORDS.get(nxt)
            if unit is not None and unit in self.spacing:
                return 2, self.stem(self.spacing[unit]), False
        return None

    def content_of(self, lower: str, term: str) -> tuple[str, ...]:
        """What one token adds to a tool text's terms: nothing for a stopword or a bare number, a dotted word's
        parts."""
        if lower in self.stop_terms or term.isdigit():
            return ()
        if "." in term:
            return tuple(self.stem(part) for part in term.split(".") if part and not part.isdigit())
        return (term,)


_READINGS: dict[int, Reading] = {}
_READINGS_LOCK = threading.Lock()


def reading_for(vocabulary: Vocabulary = EMPTY) -> Reading:
    """The one `Reading` of a vocabulary (vocabularies live as long as their catalogs, which stay loaded)."""
    found = _READINGS.get(id(vocabulary))
    if found is None or found.vocabulary is not vocabulary:
        with _READINGS_LOCK:
            found = _READINGS[id(vocabulary)] = Reading(vocabulary)
    return found


def tokenize(text: str, vocabulary: Vocabulary = EMPTY) -> list[Token]:
    """`Reading.tokenize` with a vocabulary's reading (default: English alone)."""
    return reading_for(vocabulary).tokenize(text)


def stem(word: str) -> str:
    """A word's stem in English alone (`Reading.stem` adds a vocabulary's word forms)."""
    return reading_for(EMPTY).stem(word)


@lru_cache(maxsize=16384)
def _stem(word: str) -> str:
    """A light suffix strip (plurals, -ing, -ed, final e) so 'trading', 'traded' and 'trades' meet at 'trad'."""
    if len(word) <= 3 or not word.isalpha() or word in _UNSTEMMED:
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("sses"):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    stripped = False
    if word.endswith("ing") and _SYLLABLE.search(word[:-3]):
        word, stripped = word[:-3], True
    elif word.endswith("ed") and _SYLLABLE.search(word[:-2]):
        word, stripped = word[:-2], True
    if stripped and len(word) > 3 and word[-1] == word[-2] and word[-1] not in "lsz":
        word = word[:-1]  # "shopping" -> "shop"
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    return word


class _WordTerms(dict[str, tuple[str, ...]]):
    """A lower-case word -> what it adds to a tool text's terms; each word is read once (words repeat far more than
    texts do)."""

    def __init__(self, reading: Reading) -> None:
        super().__init__()
        self._reading = reading

    def __missing__(self, lower: str) -> tuple[str, ...]:
        reading = self._reading
        terms = reading.terms_of(lower)
        if len(terms) == 1:
            content = reading.content_of(lower, terms[0])
        else:
            content = tuple(t for term in terms for t in reading.content_of(lower, term))
        self[lower] = content
        return content


class _ToolTexts:
    """The indexed terms of tool texts (stopwords and bare numbers dropped, dotted words split into their parts), as
    `tokenize` reads them, and their word pairs. A field's texts are read as one, joined by a character that keeps
    them apart (no word, phrase or pair spans two texts): a keyword list is one text to read, not fifteen."""

    def __init__(self, reading: Reading | None = None) -> None:
        self._reading = reading or reading_for(EMPTY)
        self._read: dict[tuple[str, ...], tuple[list[str], list[str]]] = {}

    def __call__(self, texts: tuple[str, ...]) -> tuple[list[str], list[str]]:
        """The terms of `texts` and their word pairs; each distinct tuple of texts is read once."""
        found = self._read.get(texts)
        if found is None:
            found = self._read[texts] = self._terms_and_pairs(texts)
        return found

    def _terms_and_pairs(self, texts: tuple[str, ...]) -> tuple[list[str], list[str]]:
        lower_words = self._reading.lower_words
        joined = f" {_APART} ".join(texts)
        if joined.count(_APART) != len(texts) - 1:  # a text holds the separator: read them one by one
            terms: list[str] = []
            pairs: list[str] = []
            for text in texts:
                text_terms = self._terms(lower_words(text))
                terms += text_terms
                pairs += _bigrams(text_terms)
            return terms, pairs
        stream = self._terms(lower_words(joined, apart=True))
        pairs = [f"{a} {b}" for a, b in itertools.pairwise(stream) if a != b and a != _APART and b != _APART]
        return ([t for t in stream if t != _APART] if len(texts) > 1 else stream), pairs

    def _terms(self, lowers: list[str]) -> list[str]:
        reading = self._reading
        words = reading.words.__getitem__
        terms: list[str] = []
        done = 0
        for start, size, term, _ in reading.phrases_of(lowers):
            terms += itertools.chain.from_iterable(map(words, lowers[done:start]))
            terms += reading.content_of(" ".join(lowers[start : start + size]), term)
            done = start + size
        terms += itertools.chain.from_iterable(map(words, lowers[done:] if done else lowers))
        return terms


def _bigrams(terms: list[str]) -> list[str]:
    return [f"{a} {b}" for a, b in itertools.pairwise(terms) if a and b and a != b]


def _deletes(word: str) -> list[str]:
    return [word[:i] + word[i + 1 :] for i in range(len(word))]


_APOSTROPHE = re.compile(r"'s\b|'")
# Inside an identifier: two lower-case letters then a capital (not iPhone, eBay), or a capital that starts a word
# after others (HTTPServer).
_CAMEL = re.compile(r"(?<=[a-z]{2})(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z]{2})")
_US_DOTTED = re.compile(r"\bu\.s\.(?:a\.)?|\bu\.s\b", re.IGNORECASE)
_ABBREVIATION_JOIN = re.compile(r"(?<![a-z0-9])([a-z0-9]{1,2})[&/]([a-z0-9]{1,2})(?![a-z0-9])", re.IGNORECASE)
_TOKEN = re.compile(r"[A-Za-z0-9]+(?:\.[A-Za-z]{1,4}\b(?!\.))?|%")
# Between the texts of a field read as one: a word of its own (its own term, too), which no phrase or pair crosses.
_APART = "\x00"
_TOKEN_OR_APART = re.compile(_TOKEN.pattern + "|" + _APART)
_DOT_LETTER = re.compile(r"\.[a-z]")
# Lower-case ASCII text without '%' or a dotted word: all but letters, digits and `_APART` separate words.
_PLAIN_WORDS = str.maketrans({c: " " for c in map(chr, range(128)) if not c.isalnum() and c != _APART})
_NUMBER_UNIT = re.compile(r"^(\d+)([a-z]+)$")
_QUARTER = re.compile(r"^(?:\d{2,4})?q[1-4](?:\d{2,4})?$")
_FISCAL = re.compile(r"^fy\d{0,4}$")
# What is left after "-ing"/"-ed" must still hold a vowel followed by a consonant: "boeing" is not "boe" + ing.
_SYLLABLE = re.compile(r"[aeiou][^aeiou]")
_UNSTEMMED = frozenset({"news", "series", "gas", "plus", "minus", "status", "bias", "analysis", "basis", "us", "sales"})


# --- the index -----------------------------------------------------------------------------------------------------


class SearchIndex:
    """Per-term postings over a fixed set of tools; built once, read-only afterwards (safe to share)."""

    def __init__(
        self,
        tools: Iterable[CatalogTool],
        vocabulary: Vocabulary = EMPTY,
        *,
        categories: Mapping[str, str] | None = None,
        semantic: bool | None = None,
        fusion: bool = True,
    ) -> None:
        """`vocabulary`: what the tools' catalog adds to English (its `Catalog.vocabulary`); `categories`: its
        category descriptions (`Catalog.categories`); `semantic`: the semantic signal (None: PMCP_SEMANTIC);
        `fusion`: whether, with the semantic signal, MiniLM's ranking is fused into every answer."""
        self._tools = list(tools)
        self._category_texts: Mapping[str, str] = categories or _NO_CATEGORIES
        n = len(self._tools)
        self.vocabulary = vocabulary
        self._reading = reading = reading_for(vocabulary)
        # Cyclic garbage collection is paused: the build makes and drops tens of thousands of lists, tuples and
        # dicts, none in a cycle, and the full collections they set off walk every object of the process (catalog,
        # schemas, modules): 10-25 ms of a cold build at 128 tools, ~300 ms at 5,000.
        with collector_paused():
            quality, about, curated, names = _weigh(self._tools, reading, self._category_texts)
            # Each posting holds idf x quality, a term's contribution to a tool, ready to add.
            idfs = [math.log(1 + (n - df + 0.5) / (df + 0.5)) if df else 0.0 for df in range(n + 1)]
            words = {term: docs for term, docs in quality.items() if " " not in term}
            pairs = {term: docs for term, docs in quality.items() if " " in term}
            del quality
            self._postings = _ordered_postings(words, about, idfs)
            # Word pairs, most of the terms but only looked up (for a bonus), keep their postings in flat arrays:
            # pair number i has the tools and values from _pair_bounds[i] to _pair_bounds[i + 1].
            self._pairs = dict(zip(pairs, itertools.count()))
            self._pair_bounds, self._pair_tools, self._pair_values = _flat_postings(pairs, about, idfs)
            self._name_terms: dict[str, list[tuple[int, float]]] = defaultdict(list)
            for index, name_terms in enumerate(names):
                own = set(name_terms)
                for term in own:
                    self._name_terms[term].append((index, 1 / len(own)))
            del words, pairs, names
        # The most a term scores for any tool is a concept's mass: a word that only turns up in passing ("add", "big"
        # in one description) weighs less than one some tool is about, so leaving it unanswered costs less.
        self._peak = {term: next(iter(docs.values())) for term, docs in self._postings.items()}
        self._rare = math.log(1 + (n - 0.5) / 1.5) if n else 1.0  # the idf of a word only one tool has
        self._vocabulary = self._postings.keys()
        self._curated = frozenset(curated)
        scope = vocabulary.scope
        # Tools whose summary names their scope (Alpha Vantage: "Monthly US unemployment rate") answer nothing about
        # places outside it.
        pattern = re.compile(scope.tools) if scope else None
        self._scoped = frozenset(i for i, tool in enumerate(self._tools) if pattern and pattern.search(tool.summary))
        self._premium = [PREMIUM_FACTOR if tool.premium else 1.0 for tool in self._tools]
        self._premium_tools = sum(tool.premium for tool in self._tools)
        self._synonyms = _synonyms_by_word(vocabulary, reading)
        # Tools named for live or for past data (REALTIME_OPTIONS, HISTORICAL_OPTIONS): +1 / -1.
        tense = {reading.stem(word): sign for word, sign in vocabulary.tense.items()}
        self._tense = [(doc, sign) for term, sign in tense.items() for doc, _ in self._name_terms.get(term, ())]
        self._out_of_scope = frozenset(tuple(t.term for t in reading.tokenize(p)) for p in vocabulary.out_of_scope)
        self._unknown_weight = UNKNOWN_WEIGHT if vocabulary.unknown_weight is None else vocabulary.unknown_weight
        # The semantic second opinion (PMCP_SEMANTIC; None: from the environment), for catalogs whose vocabulary
        # leaves unknown words to the engine's default: a curated vocabulary's no-match stands.
        if semantic is None:
            semantic = semantic_enabled()
        uncurated = vocabulary.unknown_weight is None
        self.curated = not uncurated  # a vocabulary that decides unknown words itself (Alpha Vantage's)
        self._semantic = SemanticRescue(self._tools, self._words) if semantic and uncurated and self._tools else None
        # MiniLM's ranking, fused into every answer, under the same conditions; built (not loaded) here.
        self._fusion = (
            SemanticFusion(self._tools) if fusion and self._semantic and providers.active().available() else None
        )
        # A request to act ("book me a flight") is off-topic only for a catalog whose every tool just reads.
        self._read_only = all(tool.annotations.get("readOnlyHint") is True for tool in self._tools)
        # Each tool's mood: True reads only, False writes, None unsaid (a gateway tool without hints).
        self._reads: list[bool | None] = [
            None if "readOnlyHint" not in tool.annotations else tool.annotations["readOnlyHint"] is True
            for tool in self._tools
        ]
        self._mixed_moods = {True, False} <= set(self._reads)
        # The REST reads of one record by its id whose collection the catalog also lists (`_item_reads`).
        self._item_reads = _item_reads(self._tools)
        self._mixed_reads = any(self._item_reads)
        self._hints = {
            name: {reading.stem(t): f for t, f in hint.terms.items()}
            for name, hint in (
                ("entity", vocabulary.entity_hint),
                ("now", vocabulary.now),
                ("past", vocabulary.past),
                ("pair", vocabulary.pairs.one if vocabulary.pairs else None),
                ("scope", Hint(frozenset(), 0.0, {vocabulary.scope.term: 1.0}) if vocabulary.scope else None),
            )
            if hint is not None
        }
        self._entity_words = vocabulary.entity_words | vocabulary.entity_codes

    @cached_property
    def _deletions(self) -> dict[str, list[str]]:
        """Every catalog word of 5+ letters under each of its one-letter deletions, for misspellings; made when a
        query first needs it (most never do), not with the index."""
        deletions: dict[str, list[str]] = defaultdict(list)
        for term in self._postings:
            if len(term) >= 5 and term.isalpha():
                for variant in _deletes(term):
                    deletions[variant].append(term)
        return deletions

    @cached_property
    def _longest_word(self) -> int:
        return max(map(len, self._postings), default=0)

    # --- searching --------------------------------------------------------------------------------------------

    def search(self, query: str, *, limit: int = 5, categories: frozenset[str] | None = None) -> list[Hit]:
        """The best `limit` tools for `query`, best first; empty when nothing is a good match (`Ranking.off_topic`)."""
        ranking = self.rank(query, limit=limit, categories=categories)
        if ranking.off_topic:
            return []
        return self.hits(ranking, limit)

    def hits(self, ranking: Ranking, limit: int, *, cut: bool = True) -> list[Hit]:
        """The best `limit` tools of a ranking as hits, also where it counts its query off-topic; `cut`: stop at a
        tool far below the best (`search`). TOOL_SEARCH's tail and low-confidence candidates take them uncut."""
        tools = self._tools
        if not ranking.scores:
            return []
        if ranking.fused:  # scores are shares of the best fused score; the semantic ranking fills the list
            return [
                Hit(tools[i].name, round(score, 3), tools[i].summary, tools[i].category)
                for i, score in ranking.scores[:limit]
            ]
        if ranking.semantic:  # scores are cosines
            return [
                Hit(tools[i].name, round(max(score, 0.0), 3), tools[i].summary, tools[i].category)
                for i, score in ranking.scores[:limit]
            ]
        total = ranking.analysis.mass
        best = ranking.scores[0][1]
        hits = []
        for index, score in ranking.scores[:limit]:
            if cut and score < best * MIN_SHARE_OF_BEST:
                break
            tool = tools[index]
            hits.append(Hit(tool.name, round(min(score / total, 1.0), 3), tool.summary, tool.category))
        return hits

    def rank(self, query: str, *, limit: int = 5, categories: frozenset[str] | None = None) -> Ranking:
        """Score the tools sharing a term with the query (keeping the best `limit`, at least COVERAGE_DEPTH) and
        judge whether the query is answerable at all. `search` turns this into hits; it also explains a result."""
        analysis = self.analyse(query)
        total = analysis.mass
        if analysis.action:
            return Ranking(analysis, [], 0.0, 0.0, 0.0, "a request to act, not to look something up")
        if analysis.asks_other:
            return Ranking(analysis, [], 0.0, 0.0, 0.0, analysis.asks_other)
        if total <= 0:
            return Ranking(analysis, [], 0.0, 0.0, 0.0, "no content words")
        scores: dict[int, float] = defaultdict(float)
        for concept in analysis.concepts:
            weight = concept.weight
            # A light concept (an entity, a hint) only needs the tools it fits best; a weak tail changes no ranking.
            floor = 0.0 if weight >= 1.0 else concept.mass / weight * LIGHT_TAIL
            if len(concept.terms) == 1:
                ((term, factor),) = concept.terms.items()
                for doc, value in self._postings[term].items():
                    if value * factor < floor:
                        break
                    scores[doc] += weight * factor * value
                continue
            # A tool matching a word and its synonym counts once, for the better of the two.
            best: dict[int, float] = {}
            for term, factor in concept.terms.items():
                for doc, value in self._postings[term].items():
                    value *= factor
                    if value < floor:
                        break
                    if value > best.get(doc, 0.0):
                        best[doc] = value
            for doc, value in best.items():
                scores[doc] += weight * value
        for pair in analysis.bigrams:
            number = self._pairs[pair]
            start, end = self._pair_bounds[number], self._pair_bounds[number + 1]
            for doc, value in zip(self._pair_tools[start:end], self._pair_values[start:end], strict=True):
                scores[doc] += BIGRAM_WEIGHT * value
        # Tie-breakers outside the query's weight: the tool whose own name the query says (MACD, not MACDEXT; ADX,
        # not ADXR), and for a question without a date the live tool over its historical twin.
        named: dict[int, float] = defaultdict(float)
        for term in analysis.terms:
            for doc, share in self._name_terms.get(term, ()):
                named[doc] += share
        for doc, share in named.items():
            if doc in scores:
                scores[doc] *= 1 + NAME_BONUS * share
        if analysis.present:
            for doc, sign in self._tense:
                if doc in scores:
                    scores[doc] *= 1 + sign * PRESENT_PRIOR
        premium = self._premium
        keep = max(limit, COVERAGE_DEPTH, FUSION_DEPTH if self._fusion else 0)
        excluded = self._scoped if analysis.foreign else frozenset()
        if excluded:
            # A place outside the scope, where the best fit is a tool of that scope (Alpha Vantage: a German bund
            # yield, where the yields are US-only): the catalog has the idea but not for that place, and the next
            # best tool would be a wrong answer.
            leader = max(scores, key=lambda doc: (scores[doc] * premium[doc], -doc), default=None)
            if leader is not None and leader in excluded:
                assert self.vocabulary.scope is not None  # `foreign` is only set by a scope
                return Ranking(analysis, [], 0.0, 0.0, 0.0, self.vocabulary.scope.message)
        if excluded or categories:
            candidates = [
                (score * premium[doc], -doc)
                for doc, score in scores.items()
                if self._offered(doc, excluded, categories)
            ]
        elif len(scores) > _FEW_CANDIDATES * (keep + self._premium_tools):
            # A premium tool only loses (PREMIUM_FACTOR < 1), so a tool scoring below the (keep + premium tools)-th
            # best score has at least `keep` free tools strictly above it, and cannot be among the best `keep`.
            least = heapq.nlargest(keep + self._premium_tools, scores.values())[-1]
            candidates = [(score * premium[doc], -doc) for doc, score in scores.items() if score >= least]
        else:
            candidates = [(score * premium[doc], -doc) for doc, score in scores.items()]
        top = [(-doc, score) for score, doc in heapq.nlargest(keep, candidates)]
        if not top:
            return self._fused(
                query,
                self._second_opinion(
                    query, Ranking(analysis, [], 0.0, 0.0, 0.0, _NO_SHARED_WORD), excluded, categories
                ),
                excluded,
                categories,
            )
        depth = [doc for doc, _ in top[:COVERAGE_DEPTH]]
        relative = top[0][1] / total  # judged before the intent prior: the mood orders tools, never admits a query
        covered = 0.0
        for concept in analysis.concepts:
            if concept.terms:
                reached = concept.weight * max(
                    factor * self._postings[term].get(doc, 0.0)
                    for term, factor in concept.terms.items()
                    for doc in depth
                )
                covered += min(reached / (concept.mass * MATCH_QUALITY), 1.0) * concept.mass
        coverage = covered / total
        confidence = (coverage + min(relative, 1.0)) / 2
        reason = _UNANSWERED if confidence < MIN_CONFIDENCE else None
        top = self._by_need(self._by_intent(top, analysis.intent), analysis)
        ranking = Ranking(analysis, top, coverage, relative, confidence, reason)
        if reason:
            ranking = self._second_opinion(query, ranking, excluded, categories)
        return self._fused(query, ranking, excluded, categories)

    def _by_intent(self, ranked: list[tuple[int, float]], intent: str | None) -> list[tuple[int, float]]:
        """A ranking (tool index, score) where the tools of the other mood than the query's (`Analysis.intent`) score
        1 / (1 + INTENT_PRIOR) of theirs, best first again; unchanged when the mood is unknown or every tool is of
        one kind. A tool whose mood is unsaid keeps its score."""
        if intent is None or not self._mixed_moods or not ranked:
            return ranked
        other = intent != _READ  # the mood that loses: reads for a command, writes for a question
        moods, factor = self._reads, 1 / (1 + INTENT_PRIOR)
        ordered = [(doc, score * factor if moods[doc] is other else score) for doc, score in ranked]
        ordered.sort(key=lambda item: -item[1])  # stable: ties keep their order
        return ordered

    def _by_need(self, ranked: list[tuple[int, float]], analysis: Analysis) -> list[tuple[int, float]]:
        """A ranking where, for a query naming no record (`Analysis.names_record`), the reads of one record by its
        id score 1 / (1 + ITEM_PRIOR) of theirs, best first again; unchanged otherwise or where a catalog has not
        both kinds of read."""
        if analysis.names_record or not self._mixed_reads or not ranked:
            return ranked
        items, factor = self._item_reads, 1 / (1 + ITEM_PRIOR)
        ordered = [(doc, score * factor if items[doc] else score) for doc, score in ranked]
        ordered.sort(key=lambda item: -item[1])  # stable: ties keep their order
        return ordered

    def _offered(self, doc: int, excluded: frozenset[int], categories: frozenset[str] | None) -> bool:
        """Whether a tool may be among a query's hits: not left out by the scope, and in the categories asked."""
        return doc not in excluded and (not categories or self._tools[doc].category in categories)

    def _second_opinion(
        self, query: str, ranking: Ranking, excluded: frozenset[int], categories: frozenset[str] | None
    ) -> Ranking:
        """A ranking the lexical engine would call off-topic, rescued by the semantic signal when it says the query
        is about this catalog after all (`semantic.SemanticRescue`); else the ranking unchanged."""
        if self._semantic is None:
            return ranking
        rescued = self._semantic.rescue(query, ranking.scores, ranking.confidence)
        if rescued is None:
            return ranking
        kept = [(doc, score) for doc, score in rescued if self._offered(doc, excluded, categories)]
        if not kept:
            return ranking
        return Ranking(ranking.analysis, kept, ranking.coverage, ranking.relative, ranking.confidence, None, True)

    def _fused(
        self, query: str, ranking: Ranking, excluded: frozenset[int], categories: frozenset[str] | None
    ) -> Ranking:
        """A ranking merged with MiniLM's (`fusion.SemanticFusion`): an answered one, and one judged off-topic for
        its words (not its shape), which stays off-topic, `Ranking.near` saying whether MiniLM finds it near the
        catalog; else the ranking unchanged."""
        if self._fusion is None:
            return ranking
        off_topic = ranking.off_topic
        if off_topic is not None and off_topic not in _LEXICAL_REASONS:
            return ranking
        # MiniLM's say on whether anything fits (`fusion.SemanticFusion.closeness`): an answer the words give unsurely
        # (under SURE_CONFIDENCE) whose closest tool is no closer than nearly every everyday request comes reads as no
        # confident match; a query rejected for its words whose closest tool is far closer than that is answered.
        # Rejected and fused even when not near: TOOL_SEARCH's "nothing fits" still names the few closest tools, and
        # MiniLM finds a bare entity's tool ("tell me about Björk") where no word is shared (issue 29).
        close = self._fusion.closeness(query)
        near = close is not None and close >= NEAR_CLOSENESS
        if close is not None:
            if off_topic is None and close < FAR_CLOSENESS and ranking.confidence < SURE_CONFIDENCE:
                off_topic = FAR_FROM_TOOLS
            elif off_topic is not None and close >= ANSWER_CLOSENESS:
                off_topic = None
        leave_out: frozenset[int] | set[int] = excluded
        if categories:
            leave_out = set(excluded) | {i for i, tool in enumerate(self._tools) if tool.category not in categories}
        fused = self._fusion.fuse(query, ranking.scores, leave_out, lexical_share=ranking.relative)
        if not fused:
            return ranking
        fused = self._by_need(self._by_intent(fused, ranking.analysis.intent), ranking.analysis)
        a = ranking
        return Ranking(a.analysis, fused, a.coverage, a.relative, a.confidence, off_topic, a.semantic, True, near)

    # --- reading a query ------------------------------------------------------------------------------------

    def analyse(self, query: str) -> Analysis:
        """Read a query into weighted concepts (see the module docstring); `rank` scores tools against them."""
        vocabulary = self.vocabulary
        tokens = self._reading.tokenize(query)
        analysis = Analysis(
            action=self._read_only and _asks_to_act(tokens),
            asks_other=_asks_for_other(tokens),
            intent=_intent(tokens),
            names_record=records.names_record(query),
        )
        consumed = [False] * len(tokens)
        if self._out_of_scope:
            for i in range(len(tokens)):
                for size in (2, 1):
                    phrase = tuple(t.term for t in tokens[i : i + size])
                    if len(phrase) == size and not any(consumed[i : i + size]) and phrase in self._out_of_scope:
                        analysis.concepts.append(self._unknown(" ".join(phrase), OUT_OF_SCOPE_WEIGHT))
                        consumed[i : i + size] = [True] * size
        words: dict[str, Concept] = {}
        content: list[str] = []  # indexed terms in order ("" between phrases), for word pairs
        said: set[str] = set()  # words the query means without typing them
        paired: list[str] = []  # words of `Vocabulary.pairs` (currencies)
        weak: list[str] = []
        standing: list[str] = []  # words of `Vocabulary.stands_for` (coins, which stand for "crypto")
        now = past = False
        now_words = vocabulary.now.words if vocabulary.now else frozenset()
        past_hint = vocabulary.past
        pairs, scope, stop_terms = vocabulary.pairs, vocabulary.scope, self._reading.stop_terms
        for i, (raw, lower, term) in enumerate(tokens):
            if consumed[i]:
                content.append("")
            elif lower in now_words:
                now = True
            elif past_hint and (
                lower in past_hint.words
                or (past_hint.years and len(term) == 4 and term.isdigit() and term[:2] in ("19", "20"))
            ):
                past = True
            elif lower in ("plus", "minus") and (
                i + 1 == len(tokens) or tokens[i + 1].lower not in vocabulary.signed_words
            ):
                continue  # "news plus quote": a conjunction, not +DI or -DM
            elif lower in stop_terms or (not term.isalpha() and term not in self._vocabulary and "." not in term):
                continue  # stopwords, numbers, dates
            elif "." in term:
                parts = [self._reading.stem(part) for part in term.split(".") if part]
                if parts and all(part in self._vocabulary for part in parts):
                    for part in parts:  # a dotted name of the catalog's words (track.love, chat.postMessage)
                        content.append(part)
                        words.setdefault(part, self._word(part, part))
                    continue
                if _DOTTED_TICKER.match(raw) and lower not in _NOT_TICKERS:
                    analysis.entities.append(raw)  # BRK.B, TSCO.LON
                content.append("")
            elif scope and lower in scope.outside:
                analysis.foreign = True
                content.append("")
            elif scope and (lower in scope.inside or raw == "US"):
                words.setdefault(scope.term, self._concept(scope.term, scope.weight, self._hints["scope"]))
                content.append("")
            elif pairs and (lower in pairs.codes or lower in pairs.words):
                paired.append(lower)
                content.append("")
            elif pairs and pairs.joined and len(lower) == 6 and lower[:3] in pairs.codes and lower[3:] in pairs.codes:
                paired += [lower[:3], lower[3:]]  # EURUSD
                content.append("")
            elif pairs and lower in pairs.weak:
                weak.append(lower)
                content.append("")
            elif lower in vocabulary.stands_for:
                standing.append(lower)
                content.append(vocabulary.stands_for[lower])
            elif self._is_entity(raw, lower, term, position=i):
                analysis.entities.append(raw)
                content.append("")
            else:
                content.append(term)
                if term not in words:
                    words[term] = self._word(term, lower)
        # Two of a pair's kind (or one beside a word that stands for another, a coin) ask for the relation between
        # them (what one currency is worth in another); one alone is a light hint.
        if pairs and paired:
            if len(paired) + len(set(standing)) + len(weak) >= 2:
                two = pairs.two
                words.setdefault("(pair)", self._concept(two.label, two.weight, self._hints["pair"]))
                said.update(pairs.says)  # a pair names its tools as surely as the word would
            elif not standing:
                one = pairs.one
                words.setdefault("(pair)", self._concept(one.label, one.weight, self._hints["pair"]))
        for lower in dict.fromkeys(standing):
            target = self._reading.stem(vocabulary.stands_for[lower])
            words.setdefault(target, self._word(target, vocabulary.stands_for[lower]))
        if now and vocabulary.now:
            words.setdefault("(now)", self._concept("now", vocabulary.now.weight, self._hints["now"]))
        if past and past_hint:
            words.setdefault("(past)", self._concept("past", past_hint.weight, self._hints["past"]))
        if analysis.entities:
            hint = vocabulary.entity_hint
            analysis.concepts.append(
                self._concept(
                    "entity: " + ", ".join(analysis.entities),
                    hint.weight if hint else ENTITY_WEIGHT,
                    self._hints.get("entity", {}),
                )
            )
        analysis.concepts.extend(words.values())
        analysis.present = not now and not past
        if analysis.asks_other == _EXPLANATION and analysis.entities:
            analysis.asks_other = None  # "why did TSLA drop in August 2020": about a company's data, not a lesson
        analysis.terms = frozenset(t for t in content if t) | said
        found = dict.fromkeys(_bigrams(content))
        analysis.bigrams = [pair for pair in found if pair in self._pairs]
        return analysis

    def _is_entity(self, raw: str, lower: str, term: str, *, position: int) -> bool:
        """A name: all-caps and not a catalog word (AAPL, not GDP), a name the vocabulary knows (a ticker, a
        company), or a capitalised word the catalog does not know (Rivian, Radiohead)."""
        if lower in self.vocabulary.synonyms:
            return False
        codes = self.vocabulary.entity_codes
        if term in self._curated:
            return lower in codes and len(raw) > 3 and _TICKER_SHAPE.match(raw) is not None  # META
        if _TICKER_SHAPE.match(raw) or lower in self._entity_words:
            return True
        return raw[:1].isupper() and term not in self._vocabulary and position > 0

    def _word(self, term: str, typed: str) -> Concept:
        """A content word with its synonyms; a misspelling read as the nearest catalog word; else an unknown word."""
        expansions: dict[str, float] = {}
        if term in self._vocabulary:
            expansions[term] = 1.0
        for synonym in self._synonyms.get(typed) or self._synonyms.get(term, ()):
            expansions.setdefault(synonym, SYNONYM_FACTOR)
        if not any(t in self._vocabulary for t in expansions):
            fixed = self._correct(term)
            if fixed is not None and english.is_word(typed):
                fixed = None  # a word spelled right is no typo of a catalog word ("center" is not "enter")
            if fixed is None:
                similar = self._semantic.similar_terms(typed) if self._semantic and len(typed) > 2 else None
                if similar:  # the catalog words nearest in meaning ("bio" -> biography)
                    return self._concept(term, 1.0, similar)
                return self._unknown(term, self._unknown_weight)
            expansions = {fixed: FUZZY_FACTOR}
            for synonym in self._synonyms.get(fixed, ()):
                expansions.setdefault(synonym, FUZZY_FACTOR * SYNONYM_FACTOR)
        return self._concept(term, 1.0, expansions)

    def _concept(self, label: str, weight: float, terms: dict[str, float]) -> Concept:
        known = {t: f for t, f in terms.items() if t in self._postings}
        best = max((f * self._peak[t] for t, f in known.items()), default=0.0)
        return Concept(label, weight, known, weight * best)

    def _unknown(self, label: str, share: float) -> Concept:
        return Concept(label, 1.0, {}, share * self._rare)

    def _words(self) -> dict[str, str]:
        """Every word of the tools' texts as written (lower case, letters only) -> its indexed term: what the
        semantic signal compares an unknown query word with. Made on demand, never at build."""
        reading, postings, words = self._reading, self._postings, {}
        for tool in self._tools:
            for texts in _field_texts(tool, self._category_texts):
                for text in texts:
                    for lower in reading.lower_words(text):
                        if lower not in words and lower.isalpha() and len(lower) > 2:
                            term = reading.stem(lower)
                            if term in postings and lower not in reading.stop_terms:
                                words[lower] = term
        return words

    def _correct(self, term: str) -> str | None:
        """The catalog word one edit (or one swap) away from an unknown word of 5+ letters; the most common wins."""
        if len(term) < 5 or len(term) > self._longest_word + 1 or not term.isalpha():
            return None  # too long to be one edit from a catalog word (and its deletions would cost O(n²))
        found: set[str] = set(self._deletions.get(term, ()))
        for variant in _deletes(term):
            if variant in self._vocabulary:
                found.add(variant)
            found.update(self._deletions.get(variant, ()))
        if not found:
            return None
        return max(found, key=lambda t: (t[0] == term[0], len(self._postings[t]), t))


def _weigh(
    tools: list[CatalogTool], reading: Reading, categories: Mapping[str, str]
) -> tuple[dict[str, dict[int, float]], Counter[str], set[str], list[list[str]]]:
    """BM25F over the tools' fields: for each term (word or word pair), the quality of each tool that has it (how much
    the tool is about the term, 0..1); how many tools each term is about (its document frequency); the terms of the
    curated fields; and the terms of each tool's name."""
    texts = _ToolTexts(reading)
    fields = [_field_texts(tool, categories) for tool in tools]
    curated = set().union(*(texts(texts_of[i])[0] for texts_of in fields for i in _CURATED_FIELDS))
    # Example questions name tickers and companies; those words must not make a tool about them.
    vocabulary = reading.vocabulary
    names_of_things = frozenset(map(reading.stem, vocabulary.entity_words | vocabulary.entity_codes))
    entity_terms = (names_of_things - curated) - frozenset(map(reading.stem, vocabulary.synonyms))

    # Each field of each tool as its length in terms and how often it says each term and word pair; fields with the
    # same texts (shared parameters) are counted once.
    counted: dict[tuple[bool, tuple[str, ...]], tuple[int, Counter[str]]] = {}
    docs: list[list[tuple[int, Counter[str]]]] = []
    for texts_of in fields:
        doc = []
        for i, key in enumerate(texts_of):
            examples = i == _EXAMPLES
            stats = counted.get((examples, key))
            if stats is None:
                terms, pairs = texts(key)
                if examples and not entity_terms.isdisjoint(terms):
                    terms = [t for t in terms if t not in entity_terms]
                    pairs = [p for p in pairs if entity_terms.isdisjoint(p.split())]
                stats = counted[examples, key] = (len(terms), Counter(terms + pairs))
            doc.append(stats)
        docs.append(doc)
    names = [texts((tool.name,))[0] for tool in tools]
    del counted, fields, texts  # the terms of every text, no longer needed
    avg_len = [(sum(doc[i][0] for doc in docs) / max(len(docs), 1)) or 1.0 for i in range(len(FIELD_WEIGHTS))]
    # Document frequency counts the fields that say what a tool is about: a shared parameter's description
    # ("0 SMA, 1 EMA, ...") repeated on forty tools must not make "ema" a common word, nor "daily" the many
    # example questions that ask for an indicator "on the daily chart".
    about = Counter(itertools.chain.from_iterable(set().union(*(doc[i][1] for i in _ABOUT_FIELDS)) for doc in docs))
    quality: dict[str, dict[int, float]] = defaultdict(dict)
    for index in range(len(docs)):
        doc, docs[index] = docs[index], []  # its counts go as soon as no other tool shares them
        weighted: dict[str, float] = {}  # field-weighted, length-normalised counts
        for (length, counts), (weight, b), avg in zip(doc, _FIELD_WEIGHT_B, avg_len, strict=True):
            norm = weight / (1 - b + b * length / avg)
            for term, count in counts.items():
                weighted[term] = weighted.get(term, 0.0) + count * norm
        for term, tf in weighted.items():
            quality[term][index] = tf / (tf + K1)  # saturated
    return quality, about, curated, names


def _ordered_postings(
    quality: dict[str, dict[int, float]], about: Counter[str], idfs: list[float]
) -> dict[str, dict[int, float]]:
    """Each term's postings, best tool first (a light concept stops early)."""
    postings: dict[str, dict[int, float]] = {}
    for term, docs in quality.items():
        idf = idfs[about.get(term) or len(docs)]
        if len(docs) == 1:
            ((doc, q),) = docs.items()
            postings[term] = {doc: idf * q}
        else:
            postings[term] = dict(sorted([(doc, idf * q) for doc, q in docs.items()], key=itemgetter(1), reverse=True))
    return postings


def _flat_postings(
    quality: dict[str, dict[int, float]], about: Counter[str], idfs: list[float]
) -> tuple[array[int], array[int], array[float]]:
    """Every term's postings in three flat arrays, in the order of `quality`: where each term's postings start, their
    tools, their values (a few bytes a posting, and no object for each)."""
    idf_of = [idfs[about.get(term) or len(docs)] for term, docs in quality.items()]
    bounds = array("I", itertools.accumulate(map(len, quality.values()), initial=0))
    tools = array("I", itertools.chain.from_iterable(quality.values()))
    values = array("d", [idf * q for idf, docs in zip(idf_of, quality.values(), strict=True) for q in docs.values()])
    return bounds, tools, values


def _field_texts(tool: CatalogTool, categories: Mapping[str, str] = _NO_CATEGORIES) -> tuple[tuple[str, ...], ...]:
    """The texts of each field of a tool, in FIELD_WEIGHTS order; a list field pairs words within an item only."""
    texts = {
        "name": (tool.name,),
        "title": (tool.title,),
        "keywords": tool.keywords,
        "summary": (tool.summary,),
        "examples": tool.examples,
        "description": (tool.description,),
        "param_names": tuple(p.name for p in tool.params),
        # A parameter's description, and the values it takes when they are words ("album single compilation").
        "param_text": tuple(p.description for p in tool.params if p.description)
        + tuple(
            " ".join(p.enum)  # type: ignore[arg-type]  # all str, checked
            for p in tool.params
            if p.enum and len(p.enum) <= MAX_ENUM_WORDS and all(isinstance(v, str) for v in p.enum)
        ),
        # The top-level fields of what the tool returns ("followers", "genres", "popularity").
        "output_names": tuple((tool.output_schema or {}).get("properties") or ()),
        # What the tool's category is about, as its catalog describes it ("Album metadata, tracklists, tags").
        "category_text": (categories.get(tool.category, ""),),
    }
    return tuple(texts[name] for name in FIELD_WEIGHTS)


def _synonyms_by_word(vocabulary: Vocabulary, reading: Reading) -> dict[str, tuple[str, ...]]:
    """Synonyms by the word as typed first ("closed" -> market hours), then by its stem ("closes" -> "close")."""
    stem = reading.stem
    synonyms: dict[str, tuple[str, ...]] = {}
    for word, words in vocabulary.synonyms.items():
        stems = tuple(dict.fromkeys(stem(s) for s in words if stem(s) != stem(word)))
        synonyms[word] = stems
        synonyms.setdefault(stem(word), stems)
    return synonyms


def _asks_to_act(tokens: list[Token]) -> bool:
    """'buy 10 shares ...', 'sell all my ...', 'please book me a ...', 'help me write a ...': an order, not a need."""
    words = [t.lower for t in tokens[:6]]
    while words and words[0] in _POLITE:
        words.pop(0)
    return (
        len(words) > 1 and words[0] in vocab.ACTION_VERBS and (words[1] in vocab.ACTION_OBJECTS or words[1].isdigit())
    )


def _asks_for_other(tokens: list[Token]) -> str | None:
    """Why a query asks for something a data catalog cannot give, whatever words it shares with it, or None.

    An explanation ("explain what a recession is", "what is a bond", "how does inflation work"), advice or a
    forecast ("should I buy ...", "will rates go down ..."), a person's life ("how old is ...", "who was ..."), or
    a chat with the assistant ("how are you", "what's your name"). Only the opening words and a few fixed phrases
    count: "what is the P/E of IBM" and "when will Apple report" stay look-ups.
    """
    words = [t.lower for t in tokens]
    while words and words[0] in _POLITE_OPENERS:
        words.pop(0)
    if not words:
        return None
    text = " " + " ".join(words) + " "
    if any(f" {phrase} " in text for phrase in vocab.CHAT_PHRASES):
        return "a conversation with the assistant, not a request for data"
    first, rest = words[0], words[1:]
    explains = (
        first in ("explain", "define")
        or any(f" {phrase} " in text for phrase in vocab.EXPLAIN_PHRASES)
        or (first == "what" and (rest[:1] in (["a"], ["an"]) or rest[:2] in (["is", "a"], ["is", "an"])))
        or (first == "how" and rest[:1] in (["does"], ["do"]) and ("work" in rest or "works" in rest))
        or (first == "why" and rest[:1] in (["do"], ["does"]))
    )
    if explains:
        return _EXPLANATION
    if first == "will" or (first == "should" and rest[:1] in (["i"], ["we"])) or (first == "which" and "will" in rest):
        return "asks for advice or a forecast, which no data tool gives"
    if (first in ("how", "who") and rest[:1] in (["old"], ["was"], ["won"])) or {"invented", "founded"} & set(rest):
        return "asks about a person or a story, which no data tool gives"
    return None


def _item_reads(tools: Sequence[CatalogTool]) -> list[bool]:
    """For each tool, whether it reads one record by its id while the catalog also lists that record's collection:
    a GET whose path ends in a parameter (/coupons/{coupon}, /Calls/{Sid}.json) beside a GET of the parent path
    (/coupons, /Calls.json) that needs no argument the record's read does not. Where no such list exists (Spotify's
    /artists takes a list of ids), the record's read is the only way to it and is left alone."""
    gets = [t.operation if t.operation is not None and t.operation.method.upper() == "GET" else None for t in tools]
    needs = [frozenset(p.name for p in tool.params if p.required) for tool in tools]  # each tool's required arguments
    reads: dict[str, frozenset[str]] = {}
    for route, need in zip(gets, needs, strict=True):
        if route is not None:
            reads.setdefault(route.path.rstrip("/"), need)
    found = []
    for route, need in zip(gets, needs, strict=True):
        listed = False
        if route is not None:
            parent, _, last = route.path.rstrip("/").rpartition("/")
            match = re.fullmatch(r"\{[^{}]+\}(\.\w+)?", last)
            if match and parent:
                collection = reads.get(parent + (match.group(1) or ""))
                listed = collection is not None and collection <= need
        found.append(listed)
    return found


def _intent(tokens: list[Token]) -> str | None:
    """Whether a query opens as a question or look-up (`_READ`: "which songs have I loved", "show my playlists")
    or as a command to change something (`_WRITE`: "heart this track", "make a new playlist"); None otherwise."""
    words = [t.lower for t in tokens[:8]]
    while words and words[0] in _INTENT_OPENERS:
        words.pop(0)
    if not words:
        return None
    if words[0] == "give" and words[1:2] not in (["me"], ["us"]):
        return None  # "give me the charts" asks to see; "give my playlist a new title" asks to change
    if words[0] in _READ_OPENERS:
        return _READ
    if words[0] in _WRITE_VERBS:
        return _WRITE
    return None


_READ, _WRITE = "read", "write"
# Said before the verb: politeness and who asks ("please", "can you", "I want to", "let's").
_INTENT_OPENERS = frozenset(
    {"please", "pls", "plz", "kindly", "hey", "hi", "ok", "okay", "so", "now", "just", "can", "could", "would",
     "will", "you", "u", "i", "id", "want", "wanna", "to", "need", "help", "me", "lets", "let", "us", "go", "ahead",
     "and", "then", "also", "quickly", "quick"}
)  # fmt: skip
# A question word, or a verb that asks to see something.
_READ_OPENERS = frozenset(
    {"what", "whats", "which", "who", "whos", "whose", "whom", "how", "hows", "when", "where", "wheres", "why", "is",
     "are", "am", "was", "were", "do", "does", "did", "has", "have", "had", "show", "list", "get", "find", "fetch",
     "look", "lookup", "search", "give", "gimme", "tell", "display", "view", "see", "check", "count", "browse",
     "read", "pull", "retrieve", "return", "any", "describe", "download", "export", "inspect", "verify", "query"}
)  # fmt: skip
# A verb that asks to change something: to make, alter, send, start or stop it, or take it away.
_WRITE_VERBS = frozenset(
    {"add", "create", "make", "save", "follow", "unfollow", "like", "unlike", "love", "unlove", "heart", "unheart",
     "tag", "untag", "label", "upload", "set", "change", "rename", "update", "edit", "modify", "move", "put",
     "throw", "mark", "start", "play", "resume", "pause", "stop", "skip", "send", "post", "submit", "scrobble",
     "delete", "remove", "cancel", "clear", "wipe", "erase", "drop", "take", "transfer", "invite", "reorder",
     "replace", "swap", "turn", "shuffle", "repeat", "seek", "queue", "block", "unblock", "archive", "unarchive",
     "kick", "pin", "unpin", "star", "unstar", "mute", "unmute", "publish", "revoke", "rotate", "reset", "enable",
     "disable", "attach", "detach", "assign", "unassign", "buy", "purchase", "refund", "register", "open", "close",
     "share", "write", "configure", "restart", "reboot", "resize", "scale", "destroy", "provision", "deploy",
     "rollback", "install", "uninstall", "schedule", "book", "pay", "charge", "capture", "void", "approve",
     "decline", "reject", "accept", "join", "leave", "kill", "hang", "text", "dial", "forward", "redirect",
     "suspend", "activate", "deactivate", "increase", "decrease", "raise", "lower", "bump", "unlink", "connect",
     "disconnect", "undo", "restore", "subscribe", "unsubscribe", "insert", "append", "reply", "react", "flag",
     "apply", "generate", "renew", "extend", "finalize", "finalise", "retry", "resend", "power", "shutdown",
     "migrate", "upgrade", "downgrade"}
)  # fmt: skip


_EXPLANATION = "asks for an explanation, which no data tool gives"
# Why a query is off-topic for its words alone, as opposed to its shape (a request to act, to explain, to chat).
_NO_SHARED_WORD = "no tool shares a word with it"
_UNANSWERED = "the best tools leave too much of it unanswered"
_LEXICAL_REASONS = frozenset({_NO_SHARED_WORD, _UNANSWERED})
# Answered for its words, but MiniLM puts every tool as far from it as everyday requests come (`fusion.FAR`): the
# words' confidence is low, not nil, so TOOL_SEARCH answers its candidates.
FAR_FROM_TOOLS = "its meaning is as far from every tool as everyday requests are"
_POLITE_OPENERS = frozenset({"please", "hey", "hi", "hello", "so", "ok", "okay", "um"})
_FEW_CANDIDATES = 4  # below this many times the tools a ranking keeps, scoring them all is as quick as skipping some
_POLITE = frozenset({"please", "help", "me", "can", "could", "would", "you", "kindly", "i", "want", "to", "need"})
_TICKER_SHAPE = re.compile(r"^[A-Z]{1,5}$")
_DOTTED_TICKER = re.compile(r"^[A-Za-z]{1,10}\.[A-Za-z]{1,4}$")
_NOT_TICKERS = frozenset({"e.g", "i.e", "vs.", "etc"})
# Fields by their place in FIELD_WEIGHTS (and in `_field_texts`).
_CURATED_FIELDS = tuple(list(FIELD_WEIGHTS).index(name) for name in ("name", "title", "summary", "keywords"))
_ABOUT_FIELDS = tuple(
    list(FIELD_WEIGHTS).index(name) for name in ("name", "title", "summary", "keywords", "description")
)
_EXAMPLES = list(FIELD_WEIGHTS).index("examples")
_FIELD_WEIGHT_B = [(weight, FIELD_B[name]) for name, weight in FIELD_WEIGHTS.items()]
