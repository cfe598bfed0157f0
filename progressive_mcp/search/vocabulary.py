"""What tool search knows of words: English in this module, and what one catalog adds in a `Vocabulary`.

The engine (`progressive_mcp.search.index`) knows only English and the structure of tool documents. Everything a
domain needs beyond that (finance synonyms, tickers and currencies, the places a catalog does not cover, subjects it
lacks) is data that travels with its catalog: a vocabulary file named by the spec's `search.vocabulary` (for Alpha
Vantage, `spec/alphavantage.vocabulary.yaml`), read into a `Vocabulary` and handed to the index. A catalog without
one gets `Vocabulary()`, which adds nothing. Words are written as people type them, lower case. Example::

    Vocabulary.from_data({"synonyms": {"sounds": ["similar"]}}).synonyms["sounds"]   # ("similar",)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Function words and filler that say nothing about which tool is wanted. Words that do (today, daily, history,
# intraday, list, put, most) are not here: "today's movers", "put/call", "most active" need them.
STOPWORDS = _words(
    """
    a about above across after again against ago all almost also am an and any anything are around as at away back
    be been before being below between both but by can care could did do does doing done dont during each either
    else entire etc even ever every few for from get gets getting give given go going got had has have having he
    her here hers him his how however i if in into is it its itself just kind kinds know let lets like look looking
    make many me might mine more much must my myself near nearby need needs no nor not of off on once one only or
    other our ours out over own please pull really same see shall she should show so some something such tell than
    thank thanks that the their theirs them then there these they thing things this those through thru to too u
    under until up upon versus very via vs want wanted was way we well were what whats when where whether which
    while who whom whose why will wish with within without whole would yes yet you your yours yourself im ive id
    youre hows wheres theres thats pls plz kindly fetch find gimme grab info information data details detail number
    numbers figure figures stuff moment possible able maybe using use used called named
    """
)
# Spellings, short forms and irregular verbs, mapped to one form before stemming (in tool texts and queries alike).
WORD_FORMS: dict[str, str] = {
    "indices": "index",
    "indexes": "index",
    "avg": "average",
    "qtr": "quarter",
    "qtrly": "quarterly",
    "yr": "year",
    "yrs": "year",
    "min": "minute",
    "mins": "minute",
    "hr": "hour",
    "hrs": "hour",
    "wk": "week",
    "wks": "week",
    "mo": "month",
    "mos": "month",
    "calender": "calendar",
    "annually": "annual",
    "yearly": "annual",
    "sold": "sell",
    "bought": "buy",
    "paid": "pay",
    "pays": "pay",
    "spent": "spend",
    "rose": "rise",
    "risen": "rise",
    "fell": "fall",
    "fallen": "fall",
    "grew": "grow",
    "grown": "grow",
    "held": "hold",
    "holds": "hold",
    "lost": "lose",
    "beaten": "beat",
    "sank": "sink",
    "sunk": "sink",
    "shrank": "shrink",
    "shrunk": "shrink",
}

# Time-unit words as they follow a number ("5min", "10y", "60d") or a "per"/"each"/"by" ("day by day").
UNIT_WORDS: dict[str, str] = {
    "m": "minute",
    "min": "minute",
    "mins": "minute",
    "minute": "minute",
    "minutes": "minute",
    "h": "hour",
    "hr": "hour",
    "hrs": "hour",
    "hour": "hour",
    "hours": "hour",
    "d": "day",
    "day": "day",
    "days": "day",
    "w": "week",
    "wk": "week",
    "week": "week",
    "weeks": "week",
    "mo": "month",
    "month": "month",
    "months": "month",
    "q": "quarter",
    "quarter": "quarter",
    "quarters": "quarter",
    "y": "year",
    "yr": "year",
    "yrs": "year",
    "year": "year",
    "years": "year",
}
# Phrases that make a query an explanation rather than a look-up (see search._asks_for_other).
EXPLAIN_PHRASES = ("difference between", "definition of", "meaning of", "how does it work")
# Phrases of a chat with the assistant itself.
CHAT_PHRASES = (
    "how are you",
    "who are you",
    "are you a",
    "are you an",
    "your name",
    "good night",
    "good morning",
    "thank you",
    "thanks",
    "what time is it",
    "today date",
    "days until",
)

# A request to act rather than to look something up: these verbs opening a query, followed by what they act on
# ("buy 10 shares", "sell all my", "open an account", "book me a flight", "write a letter").
ACTION_VERBS = _words("buy sell short place open book write translate transfer send pay cancel execute draft compose")
ACTION_OBJECTS = _words("a an the my me all some this these that our")


# --- what a catalog adds -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Hint:
    """Query words that lean towards some tools without naming them ("right now" towards live quotes): each such
    word brings in `terms` (term -> factor) as one concept of `weight` (< 1: a hint never decides alone)."""

    words: frozenset[str]
    weight: float
    terms: Mapping[str, float]
    label: str = ""
    years: bool = False  # a year (1900-2099) counts as one of the words


@dataclass(frozen=True, slots=True)
class Pairs:
    """Named things of one kind that, two in a query, ask for a relation between them ("EUR to USD": an exchange
    rate). One alone is a light hint (`one`); two or more, or one beside a `stands_for` word, the full concept
    (`two`), which also counts as saying the words of `says`."""

    words: frozenset[str]
    weak: frozenset[str]  # count only beside another of the kind ("pound" is also a weight)
    codes: frozenset[str]  # short codes, also recognised two at a time in one word when `joined` (EURUSD)
    joined: bool
    terms: Mapping[str, float]
    one: Hint
    two: Hint
    says: frozenset[str]


@dataclass(frozen=True, slots=True)
class Scope:
    """Tools whose summary matches `tools` (a regex) cover one place only; a query naming a place `outside` it is
    not answered by them, and `inside` words are a light hint towards them."""

    tools: str
    term: str
    weight: float
    inside: frozenset[str]
    outside: frozenset[str]
    message: str


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """What one catalog adds to English for search; every part is optional (see spec/alphavantage.vocabulary.yaml
    and docs/search.md)."""

    filler: frozenset[str] = frozenset()  # words dropped like stopwords
    word_forms: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    phrases: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))  # "after hours" -> afterhours
    abbreviations: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))  # "m&a" -> words
    signed_words: frozenset[str] = frozenset()  # "+DI": a sign before these reads as "plus"/"minus"
    spacing: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))  # day -> daily ("each day")
    synonyms: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: MappingProxyType({}))
    entity_words: frozenset[str] = frozenset()  # names of things to look up (companies)
    entity_codes: frozenset[str] = frozenset()  # their short codes (tickers)
    entity_hint: Hint | None = None
    now: Hint | None = None
    past: Hint | None = None
    # A word of tool names -> +1 (live data) or -1 (past data): a faint lean when a query names no time.
    tense: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    pairs: Pairs | None = None
    stands_for: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))  # bitcoin -> crypto
    scope: Scope | None = None
    out_of_scope: tuple[str, ...] = ()
    unknown_weight: float | None = None  # None: the engine's default (`index.UNKNOWN_WEIGHT`)
    data: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}), compare=False, repr=False)

    @classmethod
    def from_data(cls, data: Mapping[str, Any] | None) -> Vocabulary:
        """A vocabulary from its file's data (validated by the spec loader, or read back from a compiled catalog)."""
        if not data:
            return EMPTY
        entities = data.get("entities") or {}
        time = data.get("time") or {}
        pairs = data.get("pairs")
        scope = data.get("scope")
        return cls(
            filler=_lower(data.get("filler", ())),
            word_forms=_proxy({k.lower(): v.lower() for k, v in (data.get("word_forms") or {}).items()}),
            phrases=_proxy({" ".join(k.lower().split()): v.lower() for k, v in (data.get("phrases") or {}).items()}),
            abbreviations=_proxy({k.lower(): v.lower() for k, v in (data.get("abbreviations") or {}).items()}),
            signed_words=_lower(data.get("signed_words", ())),
            spacing=_proxy({k.lower(): v.lower() for k, v in (data.get("spacing") or {}).items()}),
            synonyms=_proxy({k.lower(): tuple(w.lower() for w in v) for k, v in (data.get("synonyms") or {}).items()}),
            entity_words=_lower(entities.get("words", ())),
            entity_codes=_lower(entities.get("codes", ())),
            entity_hint=_hint(entities, "entity") if entities.get("terms") else None,
            now=_hint(time["now"], "now") if time.get("now") else None,
            past=_hint(time["past"], "past") if time.get("past") else None,
            tense=_proxy({k.lower(): int(v) for k, v in (time.get("tense") or {}).items()}),
            pairs=_pairs(pairs) if pairs else None,
            stands_for=_proxy(
                {word.lower(): term.lower() for term, words in (data.get("stands_for") or {}).items() for word in words}
            ),
            scope=_scope(scope) if scope else None,
            out_of_scope=tuple(p.lower() for p in data.get("out_of_scope", ())),
            unknown_weight=data.get("unknown_weight"),
            data=_proxy(dict(data)),
        )


def _lower(words: Any) -> frozenset[str]:
    return frozenset(w.lower() for w in words)


def _proxy(mapping: dict[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(mapping)


def _hint(data: Mapping[str, Any], label: str) -> Hint:
    return Hint(
        words=_lower(data.get("words", ())),
        weight=float(data["weight"]),
        terms=_proxy({k.lower(): float(v) for k, v in data["terms"].items()}),
        label=str(data.get("label", label)),
        years=bool(data.get("years", False)),
    )


def _pairs(data: Mapping[str, Any]) -> Pairs:
    terms = {k.lower(): float(v) for k, v in data["terms"].items()}
    one, two = dict(data["one"], terms=terms), dict(data["two"], terms=terms)
    return Pairs(
        words=_lower(data.get("words", ())),
        weak=_lower(data.get("weak", ())),
        codes=_lower(data.get("codes", ())),
        joined=bool(data.get("joined", False)),
        terms=_proxy(terms),
        one=_hint(one, "one"),
        two=_hint(two, "two"),
        says=_lower(data["two"].get("says", ())),
    )


def _scope(data: Mapping[str, Any]) -> Scope:
    return Scope(
        tools=str(data["tools"]),
        term=str(data["term"]).lower(),
        weight=float(data["weight"]),
        inside=_lower(data.get("inside", ())),
        outside=_lower(data.get("outside", ())),
        message=str(data["message"]),
    )


EMPTY = Vocabulary()
