"""The four meta-tools of progressive discovery: TOOL_LIST, TOOL_SEARCH, TOOL_GET and TOOL_CALL.

Their names and argument names are a contract (clients cache them). Each returns a JSON object
that matches its declared `outputSchema`. Example::

    meta = MetaTools(catalog)
    meta.tool_search({"query": "apple stock price"})["results"][0]["name"]   # 'GLOBAL_QUOTE'
    meta.tool_search({"query": "apple stock price"})["more"]   # 'REALTIME_BULK_QUOTES: Live quotes for ...\n...'
    meta.tool_search({"query": "apple stock price", "schemas": True})  # the best 1-2 carry "inputSchema"

One TOOL_SEARCH answer shows the best `limit` hits in detail (`results`), then further candidates as compact
`name: summary` lines (`more`) while the answer stays within SEARCH_BUDGET_CHARS: the ranker's first choice is
often not the right one, and a name the agent reads is a name it can TOOL_GET. A query the engine finds no
confident match for gets no `results`; where its best tool still answers part of it (`Ranking.relative` at least
LOW_CONFIDENCE_SHARE) the closest tools come as low-confidence `candidates` lines, else the answer reads as nothing
fits. Both list the categories, as TOOL_LIST names them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from progressive_mcp.calls.codemode import execute_definition
from progressive_mcp.calls.stubs import python_names, tool_stubs
from progressive_mcp.catalog import TOOL_ANNOTATIONS, Catalog, CatalogTool, _thaw, closest_names
from progressive_mcp.errors import InvalidArguments, ToolError, UnknownTool, clip
from progressive_mcp.schema_compact import compact_entry, schema_view
from progressive_mcp.schema_excerpt import get_view, output_view
from progressive_mcp.search import providers
from progressive_mcp.search.index import FAR_FROM_TOOLS, Hit, SearchIndex
from progressive_mcp.search.semantic import semantic_enabled
from progressive_mcp.tokens import dumps, estimate_tokens

TOOL_LIST, TOOL_SEARCH, TOOL_GET, TOOL_CALL = "TOOL_LIST", "TOOL_SEARCH", "TOOL_GET", "TOOL_CALL"
META_TOOL_NAMES = (TOOL_LIST, TOOL_SEARCH, TOOL_GET, TOOL_CALL)
DETAIL_LEVELS = ("names", "summary")
GET_FORMATS = ("python", "schema")  # code mode's TOOL_GET: Python stubs (the default there) or JSON schemas
MAX_GET = 10
MAX_SEARCH_LIMIT = 20
DEFAULT_SEARCH_LIMIT = 2  # hits shown in detail unless `limit` says otherwise
# The answer's tail: further candidates as `name: summary` lines, added while the answer's JSON text (without
# schemas) stays within SEARCH_BUDGET_CHARS, at most MAX_MORE of them, each summary cut to MORE_SUMMARY_CHARS.
# Characters, not tokens: JSON's length adds up exactly, costs nothing to count and needs no vocabulary (loading
# cl100k's takes seconds, and the Lambda asset has none); the tokens that budget makes are measured instead
# (`progressive-mcp eval`, docs/search.md). Chosen with bench/answer_shape.py on the tuning sets only (Last.fm,
# Spotify dev, eval/tuning.jsonl): 1, 2, 3 and 5 detailed hits, 40-80 character summaries and budgets were tried.
# Re-measured after MiniLM's fusion (issue 29), with `progressive-mcp eval`'s `shown` on the same tuning sets only:
# two hits and 800 characters showed a grade-2 tool for 0.98 of Alpha Vantage's tuning queries at a median 196 tokens
# and 0.84 of the two others' at 188 (the fused ranking has the right tool among its first 20 far more often than
# among its first 10); 1,200 characters (about twenty short lines): 0.987 at 301 and 0.89 at 279;
# 1,600: 0.987 at 374 and 0.90 at 323. Past 1,200 the tail mostly runs out of right tools, not of characters.
# A catalog with a curated vocabulary (Alpha Vantage's) keeps 800: its engine is confident, so the longer tail
# showed a right tool for 0.7 points more of its tuning queries at 54% more tokens (196 -> 301), and a task's
# tokens rose from 851 to 959 (`progressive-mcp tokens`); uncurated catalogs gained 5 points (0.84 -> 0.89).
# Re-measured for issue 29's target (the right tool shown for 0.95 of answerable queries at a median <= 450 tokens),
# `bench/answer_shape.py --budgets 1500,1800,2000 --chars 30,40 --more 30,40 --closest 0,5,8`, tuning sets only: with
# 30 tail lines and the closest tools of a "nothing fits" answer (MAX_CLOSEST), 1,500 characters show a grade-2
# tool for 0.935 of Last.fm's positives at a median 354 tokens and 0.975 of Spotify dev's at 322 (before: 1,200, 20
# lines, no closest tools: 0.885 at 283, 0.975 at 278); 1,800 gains 1 point on Last.fm at 413; 40 lines, nothing.
# Then with Stripe's dev split, a fused list deep enough for the tail (fusion.TAIL_DEPTH) and 56-character lines
# (MORE_LINE_CHARS), `bench/answer_shape.py --limits 1,2 --budgets 1500,1700,1900 --more 40 --line 0,56`: 1,700 shows
# Last.fm 0.950, Spotify dev 0.988, Stripe dev 0.900 at median 400 / 404 / 367 tokens (p90 418 / 422 / 401); 1,500:
# 0.940 / 0.988 / 0.890 at 354 / 357 / 322; 1,900: 0.950 / 0.988 / 0.920 at 446 / 454 / 411, no margin left.
SEARCH_BUDGET_CHARS = 1700
CURATED_SEARCH_BUDGET_CHARS = 800
# Code mode keeps the tail's earlier budget: a script's searches name their tools, and at 1,000 characters and more
# the data-heavy 20-day SMA task's code-mode flow goes over DESIGN.md's 10% of the progressive flow's tokens
# (`progressive-mcp tokens`: 9.8% at 800, 10.2% at 1,000, 10.6% at 1,200).
CODE_SEARCH_BUDGET_CHARS = 800
MAX_MORE = 40  # 30 before MORE_LINE_CHARS: shorter lines fit ten more within the budget (see there)
MORE_SUMMARY_CHARS = 40
# An uncurated catalog's tail line, name and summary together: a long name gets a shorter summary, and none where
# less than MIN_SUMMARY_CHARS would be left (Stripe's PostTestHelpersTestClocksTestClockAdvance says what it does), so
# long names cost little more than short ones and the budget names more tools. Issue 29, bench/answer_shape.py on the
# tuning sets only (Last.fm, Spotify dev, Stripe dev), 2 hits, 40 lines: at 1,500 characters no cap shows a grade-2
# tool for 0.935 / 0.988 / 0.880 of their positives, 56 for 0.940 / 0.988 / 0.890 (64 and 72: as no cap); at 1,700,
# 0.940 / 0.988 / 0.890 and 0.950 / 0.988 / 0.900 at median 400 / 404 / 367 tokens. Shorter lines then fill 30
# before the budget; with 40 lines at 1,700 characters (`--budgets 1700 --more 30,40 --line 32,36,40`): 40 shows
# 0.950 / 0.988 / 0.950 at 418 / 421 / 375, 36: 0.950 / 0.988 / 0.970 at 418 / 408 / 374 (p90 427 / 428 / 406), 32:
# as 36 at fewer tokens but most summaries under a dozen characters. Curated catalogs keep whole lines.
MORE_LINE_CHARS = 36
MIN_SUMMARY_CHARS = 12
# Where the engine finds no confident match but its best tool still answers this share of the query on its own
# (`Ranking.relative`), up to MAX_CANDIDATES tools are shown, marked low-confidence; below it the query reads as
# off-topic. Chosen with bench/answer_shape.py on the tuning sets: at 0.3, 10 of the 31 positives without a confident
# match see their tool among the candidates and 26 of 89 such negatives get candidates; the no-match rule's own
# `Ranking.confidence` at 0.3 gives 11 and 45 (a broad catalog's common words cover off-topic questions together).
LOW_CONFIDENCE_SHARE = 0.3
# Also where MiniLM finds the query nearer the catalog than any everyday request (`Ranking.near`), and where the words
# answered it but MiniLM finds it as far from every tool as everyday requests come (`index.FAR_FROM_TOOLS`: the
# confidence is low, not nil); then the candidates are the lexical and MiniLM rankings fused.
# Issue 29, on the tuning sets only: Last.fm's 34 positives without a
# confident match see their grade-2 tool among the candidates 20 times (4 before: lexical, 8 lines, share alone), 14
# of its 31 such negatives get candidates (8 before); Spotify dev's 3 and 9 are unchanged (1 and 3).
# 30, not 20, since 2026-11-29 (`eval --catalogs`, `bench/paired_eval.py`): near queries of Last.fm had their tool at
# fused ranks 21-32; shown, tuning +3 / -0 (.967 -> .973), then held out +2 / -0 (.939 -> .940), nothing else moved,
# tokens p50 and p90 +1 at most. 40 showed one more Last.fm query but its p90 rose 427 -> 504 tokens: the lines fill
# the answer's budget, and the hint and the categories come on top.
MAX_CANDIDATES = 30
# Below both, the query reads as nothing fits, yet the answer still names its MAX_CLOSEST closest tools (`closest`;
# fused with MiniLM's where the index has it), and, as every answer without a confident match, the categories of the
# tools it names (at most CLOSEST_CATEGORIES) rather than all of them (issue 29: "nothing fits with the closest
# categories"; DigitalOcean has 55). A question the engine misreads ("tell me about Björk") is then not sent away
# empty, at five lines' cost to an off-topic one, and the answer still reads as no match. bench/answer_shape.py on
# the tuning sets only, at the shape above: 0 closest tools show 0.910 of Last.fm's positives, 5 show 0.935 and 8
# no more; Spotify dev 0.963, 0.975, 0.975; Alpha Vantage's tuning set 0.980, 0.987, 0.993.
MAX_CLOSEST = 5
CLOSEST_CATEGORIES = 5
NO_CONFIDENT_MATCH = "No confident match."
LOW_CONFIDENCE_HINT = (
    f"{NO_CONFIDENT_MATCH} The candidates are the closest tools, low-confidence: TOOL_GET one if it fits, "
    "else rephrase or browse a category with TOOL_LIST."
)
NOTHING_FITS_HINT = f"{NO_CONFIDENT_MATCH} Nothing fits: rephrase, or browse a category with TOOL_LIST."
CLOSEST_HINT = (
    f"{NO_CONFIDENT_MATCH} Nothing fits; the closest tools are listed, unlikely to fit: rephrase, or browse a "
    "category with TOOL_LIST."
)
MAX_QUERY_CHARS = 1000  # a need in words is a sentence or two; longer input only costs CPU to rank
# TOOL_SEARCH {schemas: true} gives the best hit its input schema, and the second one too when it
# scores within 10% of the best: where the ranking is unsure the agent still calls without TOOL_GET,
# and a clear winner costs one schema. (Chosen on the dev half of eval/queries.jsonl: the right tool
# is among the schemas for 98.5% of answerable queries, with 1.22 schemas on average; the top hit
# alone: 96%; 0.7 of the best and up to 3 hits: 99.5% with 1.68 schemas.)
SEARCH_SCHEMA_HITS = 2
SEARCH_SCHEMA_SHARE = 0.9
# A short prefix of each tool's SHA-256 is enough to notice change, at a fraction of the tokens.
HASH_CHARS = 16


# TOOL_LIST's `category` is an enum while the enum's JSON fits in this many characters, else a description that
# points at TOOL_LIST's answer (which names them). The four definitions cost 419 cl100k tokens without the enum
# and the budget is 450, so the enum may take about 31 tokens: 128 characters at ~4 characters a token. Alpha
# Vantage's 11 categories take 125; Spotify's 15 (152) and DigitalOcean's 55 tags are described instead.
MAX_CATEGORY_ENUM_CHARS = 128
MAX_CATEGORIES_NAMED = 12  # an unknown category's error lists every category up to this many, else their number


def _category_schema(categories: list[str]) -> dict[str, Any]:
    if len(json.dumps(categories, separators=(",", ":"))) <= MAX_CATEGORY_ENUM_CHARS:
        return {"type": "string", "enum": categories}
    return {"type": "string", "description": f"One of the {len(categories)} TOOL_LIST names"}


def meta_tool_definitions(catalog: Catalog, tools: tuple[CatalogTool, ...] | None = None) -> list[dict[str, Any]]:
    """MCP definitions (wire shape) of the four meta-tools over `tools` (default: the whole catalog).

    Kept terse: they are always in context. The tool count and the category enum describe the tools
    offered, so a surface narrowed to some categories never advertises the others. Output schemas name
    the fields a model needs; only TOOL_SEARCH's marks any as required (the contract's `name` and
    `score`), which keeps the four definitions within 450 tokens.
    """
    offered = catalog.tools if tools is None else tools
    present = {t.category for t in offered}
    categories = [c for c in catalog.categories if c in present]
    string = {"type": "string"}
    return [
        {
            "name": TOOL_LIST,
            "title": "List tools",
            "description": f"Browse the {len(offered)} {catalog.api.title} tools by category.",
            "inputSchema": _object(
                {
                    "category": _category_schema(categories),
                    "detail": {
                        "type": "string",
                        "enum": list(DETAIL_LEVELS),
                        "description": "Default: summary for a category, else names",
                    },
                }
            ),
            "outputSchema": _object({"categories": {"type": "array"}}),
        },
        {
            "name": TOOL_SEARCH,
            "title": "Search tools",
            # The tail's lines are tools too: the agent may TOOL_GET any (7 tokens over "Rank tools for a need in
            # plain words.", which keeps the definitions within 450 with a 128-character category enum).
            "description": "Rank tools for a need; more lists name: summary candidates to TOOL_GET.",
            "inputSchema": _object(
                {
                    "query": string,
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": MAX_SEARCH_LIMIT,
                        "default": DEFAULT_SEARCH_LIMIT,
                    },
                    "category": string,
                    "schemas": {
                        "type": "boolean",
                        "description": f"Best 1-{SEARCH_SCHEMA_HITS} results get their inputSchema",
                    },
                },
                ["query"],
            ),
            "outputSchema": _object(
                {
                    "results": {
                        "type": "array",
                        "items": _object({"name": string, "score": {"type": "number"}}, ["name", "score"]),
                    }
                },
                ["results"],
            ),
        },
        {
            "name": TOOL_GET,
            "title": "Get tool schemas",
            "description": f"Schemas of up to {MAX_GET} tools, by name.",
            "inputSchema": _object(
                {"tool_name": {"anyOf": [string, {"type": "array", "items": string}]}},
                ["tool_name"],
            ),
            "outputSchema": _object({"tools": {"type": "array"}}),
        },
        {
            "name": TOOL_CALL,
            "title": "Call a tool",
            "description": "Run a tool with arguments matching its schema.",
            "inputSchema": _object(
                {"tool_name": string, "arguments": {"anyOf": [{"type": "object"}, string]}},
                ["tool_name", "arguments"],
            ),
            "outputSchema": _object({"tool": string}),
        },
    ]


def code_tool_definitions(catalog: Catalog, tools: tuple[CatalogTool, ...] | None = None) -> list[dict[str, Any]]:
    """The code surface's meta-tools: TOOL_LIST and TOOL_SEARCH as in progressive mode (search's `schemas`
    attaching Python stubs), TOOL_GET with a `format` (Python stubs by default), and TOOL_EXECUTE instead of
    TOOL_CALL."""
    definitions = {d["name"]: d for d in meta_tool_definitions(catalog, tools)}
    search = definitions[TOOL_SEARCH]
    search["inputSchema"]["properties"]["schemas"]["description"] = (
        f"Best 1-{SEARCH_SCHEMA_HITS} results get their Python stub"
    )
    get = definitions[TOOL_GET]
    get["title"] = "Get tool stubs"
    get["description"] = f"Typed Python stubs (or JSON schemas) of up to {MAX_GET} tools, by name."
    get["inputSchema"]["properties"]["format"] = {"type": "string", "enum": list(GET_FORMATS)}
    get["outputSchema"] = _object({"stubs": {"type": "string"}})
    return [definitions[TOOL_LIST], search, get, execute_definition()]


def _object(properties: dict[str, Any], required: list[str] | None = None, *, closed: bool = False) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    if closed:
        schema["additionalProperties"] = False
    return schema


def _short(summary: str, most: int | None = None) -> str:
    """A summary's first sentence, cut at a word to at most `most` characters (MORE_SUMMARY_CHARS)."""
    most = MORE_SUMMARY_CHARS if most is None else most
    text = " ".join(summary.split())
    end = text.find(". ")
    if end > 0:
        text = text[:end]
    text = text.rstrip(".")
    if len(text) <= most:
        return text
    cut = text.rfind(" ", 0, most + 1)
    return text[: cut if cut > most // 2 else most].rstrip(" ,;:-(")


def _line(name: str, summary: str, line_chars: int = 0) -> str:
    """A tail line: `name: summary` (the summary cut to what `line_chars` leaves, 0: no cap), or the name alone."""
    most = MORE_SUMMARY_CHARS
    if line_chars:
        most = min(most, line_chars - len(name) - 2)
        if most < MIN_SUMMARY_CHARS:
            return name
    summary = _short(summary, most)
    return f"{name}: {summary}" if summary and summary.lower() != name.lower() else name


def _flag(value: Any) -> bool | None:
    """A boolean argument, also as the strings some clients send ("true", "False"); null is false;
    None if it is none of these."""
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return None


def _shared_index(catalog: Catalog, categories: frozenset[str] | None, semantic: bool | None) -> SearchIndex:
    """The catalog's index of the tools in `categories`, built by the first MetaTools that asks and shared by the
    rest: an index is read-only once built, and each Surface or Endpoint over a catalog built its own (~0.1 CPU-s
    for the bundled spec, more for a big document)."""
    on = semantic_enabled() if semantic is None else semantic
    # The embedding provider is an input too (PMCP_EMBEDDINGS, `providers.use`): its vectors fuse into the ranking.
    return catalog.derived(
        ("search index", categories, on, id(providers.active())),
        lambda: SearchIndex(
            catalog.in_categories(categories), catalog.vocabulary, categories=catalog.categories, semantic=on
        ),
    )


class MetaTools:
    """The meta-tools over one catalog (optionally narrowed to some categories)."""

    def __init__(
        self,
        catalog: Catalog,
        *,
        categories: frozenset[str] | None = None,
        base: MetaTools | None = None,
        semantic: bool | None = None,
        view: str | None = None,
    ) -> None:
        """`base`: meta-tools over a wider set of tools whose search index this one may share (filtering it to
        its own categories at query time), so a narrower surface costs no index build; `semantic`: whether search
        may ask the semantic signal (None: PMCP_SEMANTIC in the environment); `view`: how TOOL_GET and TOOL_SEARCH's
        `schemas` show a tool's arguments, `json` or `compact` (None: PMCP_SCHEMA_VIEW, see schema_compact.py)."""
        self.catalog = catalog
        self.view = schema_view() if view is None else view
        self.categories = categories
        self.tools = catalog.in_categories(categories)
        self._names = {t.name for t in self.tools}
        # The tools of each category this surface offers, in catalog order; fixed for its lifetime.
        self._by_category: dict[str, tuple[CatalogTool, ...]] = {
            c: grouped for c in catalog.categories if (grouped := tuple(t for t in self.tools if t.category == c))
        }
        self.index: SearchIndex
        self._scope: frozenset[str] | None = None  # the categories to filter a shared index to
        if base is not None and (base.categories is None or (categories is not None and categories <= base.categories)):
            self.index = base.index
            self._scope = categories if base.tools != self.tools else None
        else:
            self.index = _shared_index(catalog, categories, semantic)
        self._described: dict[str, dict[str, Any]] = {}
        self._output_views: dict[str, dict[str, Any]] = {}
        self._code_views: dict[str, dict[str, Any]] = {}  # code mode's JSON-schema TOOL_GET entries (`_code_view`)
        self._answer_costs: dict[str, tuple[tuple[str, int], int]] = {}  # see `_costs`
        # readOnlyHint alone: destructiveHint is moot for read-only tools and openWorldHint defaults to true.
        self.definitions = [
            dict(d, annotations={"readOnlyHint": True}) for d in meta_tool_definitions(catalog, self.tools)
        ]
        if self.view == "compact":  # say what the answers hold: argument lines, not JSON schemas
            by_name = {d["name"]: d for d in self.definitions}
            by_name[TOOL_GET]["description"] = f"Arguments of up to {MAX_GET} tools, by name, one line each."
            flag = by_name[TOOL_SEARCH]["inputSchema"]["properties"]["schemas"]
            flag["description"] = f"Best 1-{SEARCH_SCHEMA_HITS} results get their arguments"

        # TOOL_EXECUTE runs tools that may write: only the discovery tools are read-only.
        self.code_definitions = [
            dict(d, annotations={"readOnlyHint": True}) if d["name"] != "TOOL_EXECUTE" else d
            for d in code_tool_definitions(catalog, self.tools)
        ]
        self._folded_categories = {c.lower(): c for c in self._by_category}
        # Code mode's function names, unique over the whole catalog: a tool's name is the same in every surface.
        self.python_names = python_names(t.name for t in catalog.tools)

    def discovery_handlers(self, *, code: bool = False) -> dict[str, Callable[[dict[str, Any]], dict[str, Any]]]:
        """Handlers of the meta-tools answered from the catalog alone (TOOL_CALL and TOOL_EXECUTE need the
        upstream); `code` gives code mode's TOOL_SEARCH and TOOL_GET (Python stubs)."""
        if code:
            return {TOOL_LIST: self.tool_list, TOOL_SEARCH: self.tool_search_code, TOOL_GET: self.tool_get_code}
        return {TOOL_LIST: self.tool_list, TOOL_SEARCH: self.tool_search, TOOL_GET: self.tool_get}

    def lookup(self, name: str) -> CatalogTool:
        """A tool of this surface; raises UnknownTool with suggestions from this surface."""
        tool = self.catalog.find(name)  # suggestions once, from this surface's names, below
        if tool is None or tool.name not in self._names:
            raise UnknownTool(name, self.catalog.suggest(name, among=self._names)) from None
        return tool

    def tool_list(self, args: dict[str, Any]) -> dict[str, Any]:
        self._only(TOOL_LIST, args, {"category", "detail"})
        category = args.get("category")
        selected = self._category_names(category)
        detail = args.get("detail") or ("summary" if category else "names")
        if isinstance(detail, str):
            detail = detail.strip().lower()
        if detail not in DETAIL_LEVELS:
            raise self._bad(TOOL_LIST, f"detail must be one of {', '.join(DETAIL_LEVELS)}, not {detail!r}")
        groups = []
        for name in selected:
            tools = self._by_category[name]
            listed: list[Any] = (
                [t.name for t in tools]
                if detail == "names"
                else [{"name": t.name, "summary": t.summary} for t in tools]
            )
            groups.append({"name": name, "description": self.catalog.categories[name], "tools": listed})
        return {
            "catalog_version": self.catalog.version,
            "tool_count": sum(len(g["tools"]) for g in groups),
            "categories": groups,
        }

    def tool_search(self, args: dict[str, Any], *, budget: int | None = None) -> dict[str, Any]:
        """`budget`: the answer's characters, tail included (SEARCH_BUDGET_CHARS, CURATED_SEARCH_BUDGET_CHARS for a
        curated catalog; code mode's is CODE_SEARCH_BUDGET_CHARS)."""
        if budget is None:
            budget = CURATED_SEARCH_BUDGET_CHARS if self.index.curated else SEARCH_BUDGET_CHARS
        self._only(TOOL_SEARCH, args, {"query", "limit", "category", "schemas"})
        query = args.get("query")
        if not isinstance(query, str) or not query.strip():
            raise self._bad(TOOL_SEARCH, "query must be a non-empty string describing what you need")
        if len(query) > MAX_QUERY_CHARS:
            raise self._bad(
                TOOL_SEARCH, f"query is {len(query)} characters; describe the need in at most {MAX_QUERY_CHARS}"
            )
        limit = args.get("limit", DEFAULT_SEARCH_LIMIT)
        if isinstance(limit, str) and limit.strip().isdigit():
            limit = int(limit)
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_SEARCH_LIMIT:
            raise self._bad(TOOL_SEARCH, f"limit must be an integer from 1 to {MAX_SEARCH_LIMIT}")
        with_schemas = _flag(args.get("schemas"))
        if with_schemas is None:
            raise self._bad(TOOL_SEARCH, "schemas must be true or false")
        category = args.get("category")
        scope = frozenset(self._category_names(category, TOOL_SEARCH)) if category else self._scope
        # One ranking, deep enough for the tail: the detailed hits are what `SearchIndex.search` would give.
        ranking = self.index.rank(query, limit=limit + MAX_MORE, categories=scope)
        hits = [] if ranking.off_topic else self.index.hits(ranking, limit)
        results: list[dict[str, Any]] = [
            {"name": h.name, "score": h.score, "summary": h.summary, "category": h.category} for h in hits
        ]
        result: dict[str, Any] = {"query": query, "results": results}
        # The answer's length so far: its frame (the query, the field names) and each detailed entry.
        spent = len(dumps({"query": query, "results": [], "more": ""})) + sum(self._costs(h)[1] for h in hits)
        if hits:
            shown = {h.name for h in hits}
            tail = [h for h in self.index.hits(ranking, limit + MAX_MORE, cut=False) if h.name not in shown]
            more = self._lines(tail, budget - spent, MAX_MORE)
            if more:
                result["more"] = more
        else:
            low = ranking.relative >= LOW_CONFIDENCE_SHARE or ranking.near or ranking.off_topic == FAR_FROM_TOOLS
            most = MAX_CANDIDATES if low else MAX_CLOSEST
            closest = self.index.hits(ranking, most, cut=False)
            lines = self._lines(closest, budget - spent, most) if closest else ""
            if lines:
                result["hint"] = LOW_CONFIDENCE_HINT if low else CLOSEST_HINT
                result["candidates" if low else "closest"] = lines
            else:
                result["hint"] = NOTHING_FITS_HINT
            # The categories of the tools the lines name (the first ones: `_lines` stops at the budget), else all of
            # them while they are few: Slack's 55 with their descriptions cost about 1,500 tokens, and the hint
            # already points at TOOL_LIST, which names them.
            named = closest[: lines.count("\n") + 1] if lines else []
            near = list(dict.fromkeys(h.category for h in named))[:CLOSEST_CATEGORIES]
            if not near and len(self._by_category) <= MAX_CATEGORIES_NAMED:
                near = self._category_names(None)
            if near:
                result["categories"] = {n: self.catalog.categories[n] for n in near}
        if with_schemas and hits:
            # The very schema TOOL_GET gives (or its compact view's lines), so a call built from it passes
            # TOOL_CALL's validation.
            key = "arguments" if self.view == "compact" else "inputSchema"
            for hit, entry in zip(hits[:SEARCH_SCHEMA_HITS], results, strict=False):
                if hit.score >= SEARCH_SCHEMA_SHARE * hits[0].score:
                    entry[key] = self._describe(self.lookup(hit.name))[key]
        return result

    def _lines(self, hits: list[Hit], budget: int, most: int) -> str:
        """Up to `most` hits as `name: summary` lines (a short summary each) while their JSON text, line breaks
        included, stays within `budget` characters."""
        lines: list[str] = []
        for hit in hits[:most]:
            line, cost = self._costs(hit)[0]
            budget -= cost
            if budget < 0:
                break
            lines.append(line)
        return "\n".join(lines)

    def _costs(self, hit: Hit) -> tuple[tuple[str, int], int]:
        """A tool's tail line and its length in JSON with the escaped line break before it, and the length of its
        detailed entry with a comma (the score at its longest); made once per tool."""
        costs = self._answer_costs.get(hit.name)
        if costs is None:
            line = _line(hit.name, hit.summary, 0 if self.index.curated else MORE_LINE_CHARS)
            entry = {"name": hit.name, "score": 0.555, "summary": hit.summary, "category": hit.category}
            costs = (line, len(dumps(line))), len(dumps(entry)) + 1
            self._answer_costs[hit.name] = costs
        return costs

    def tool_search_code(self, args: dict[str, Any]) -> dict[str, Any]:
        """TOOL_SEARCH in code mode: `schemas: true` attaches Python stubs instead of input schemas."""
        result = self.tool_search(args, budget=CODE_SEARCH_BUDGET_CHARS)
        for entry in result["results"]:
            schema, lines = entry.pop("inputSchema", None), entry.pop("arguments", None)
            if schema is not None or lines is not None:
                entry["stub"] = tool_stubs([self.lookup(entry["name"])], self.python_names)
        return result

    def tool_get_code(self, args: dict[str, Any]) -> dict[str, Any]:
        """TOOL_GET in code mode: the tools' Python stubs (default), or their schemas with outputSchema."""
        self._only(TOOL_GET, args, {"tool_name", "format"}, self.code_definitions)
        chosen = args.get("format") or "python"
        if chosen not in GET_FORMATS:
            raise self._bad(TOOL_GET, f"format must be one of {', '.join(GET_FORMATS)}", self.code_definitions)
        result = self.tool_get({"tool_name": args.get("tool_name")})
        found = [self.lookup(entry["name"]) for entry in result["tools"]]
        if chosen == "python":  # the names are in the stubs
            del result["tools"]
            result["stubs"] = tool_stubs(found, self.python_names)
        else:
            result["tools"] = [self._code_view(tool) for tool in found]
        return result

    def tool_get(self, args: dict[str, Any]) -> dict[str, Any]:
        self._only(TOOL_GET, args, {"tool_name"})
        requested = args.get("tool_name")
        names = [requested] if isinstance(requested, str) else requested
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            raise self._bad(TOOL_GET, "tool_name must be a tool name or a list of tool names")
        if len(names) > MAX_GET:
            raise self._bad(TOOL_GET, f"ask for at most {MAX_GET} tools at once (got {len(names)})")
        found, missing = [], []
        for name in dict.fromkeys(names):
            try:
                found.append(self.lookup(name))
            except UnknownTool as exc:
                missing.append(exc)
        if not found:
            if len(missing) == 1:
                raise missing[0]
            raise ToolError(
                "Unknown tools: "
                + "; ".join(
                    f"{e.details()['tool_name']!r} (did you mean {', '.join(e.suggestions) or 'nothing close'})"
                    for e in missing
                )
                + ". Use TOOL_SEARCH to find tool names."
            )
        result: dict[str, Any] = {
            "catalog_version": self.catalog.version,
            "tools": [self._describe(t) for t in found],
        }
        if missing:
            result["not_found"] = [{"name": e.details()["tool_name"], "suggestions": e.suggestions} for e in missing]
        return result

    def resolve_call(self, args: dict[str, Any]) -> tuple[CatalogTool, Any]:
        """TOOL_CALL's target tool and its raw arguments, checked for shape (the surface runs it)."""
        self._only(TOOL_CALL, args, {"tool_name", "arguments"})
        name = args.get("tool_name")
        if not isinstance(name, str) or not name:
            raise self._bad(TOOL_CALL, "tool_name must be the name of a tool (see TOOL_SEARCH)")
        if name in META_TOOL_NAMES:
            raise self._bad(TOOL_CALL, f"{name} is a meta-tool: call it directly, not through TOOL_CALL")
        return self.lookup(name), args.get("arguments")

    def _output_view(self, tool: CatalogTool) -> dict[str, Any]:
        """A tool's output schema as the JSON-schema view shows it (capped, see schema_excerpt); built once."""
        view = self._output_views.get(tool.name)
        if view is None:
            assert tool.output_schema is not None
            view = self._output_views[tool.name] = output_view(_thaw(tool.output_schema))
        return view

    def _code_view(self, tool: CatalogTool) -> dict[str, Any]:
        """Code mode's JSON-schema TOOL_GET entry: the definition with the output schema's view, the input schema
        shortened where the two would overrun the budget (`schema_excerpt.get_view`); built once per tool."""
        view = self._code_views.get(tool.name)
        if view is None:
            if tool.output_schema is None:  # JSON asked for: the JSON view, whatever PMCP_SCHEMA_VIEW says
                view = self._describe(tool) if self.view == "json" else get_view(self._build_description(tool))
            else:
                output = self._output_view(tool)
                reserve = estimate_tokens(dumps({"outputSchema": output}))  # an upper bound: no count needed
                view = {**get_view(self._build_description(tool), reserve), "outputSchema": output}
            self._code_views[tool.name] = view
        return view

    def _describe(self, tool: CatalogTool) -> dict[str, Any]:
        """TOOL_GET's entry for a tool; built once per tool (results are read-only by convention)."""
        described = self._described.get(tool.name)
        if described is None:
            # Within DESIGN.md's 2,500 tokens for any one TOOL_GET (TOOL_SEARCH's `schemas` attach this view too): a
            # very large input schema is shortened and says so (`schema_excerpt.get_view`); TOOL_CALL validates
            # against the whole. Code mode's JSON view, with an output schema besides, has its own (`_code_view`).
            # The compact view (PMCP_SCHEMA_VIEW=compact) writes each argument on a line, within the same budget.
            definition = self._build_description(tool)
            described = compact_entry(definition) if self.view == "compact" else get_view(definition)
            self._described[tool.name] = described
        return described

    def _build_description(self, tool: CatalogTool) -> dict[str, Any]:
        definition = tool.definition()
        if tool.annotations == TOOL_ANNOTATIONS:  # a read-only tool, as most are: tools/list says so for all
            del definition["annotations"]  # (so a catalog of reads spends no tokens on them)
        # else kept: the model must see that a tool writes or deletes before it calls it through TOOL_CALL
        definition["category"] = tool.category
        definition["content_hash"] = tool.content_hash[:HASH_CHARS]
        return definition

    def _bad(self, tool_name: str, problem: str, definitions: list[dict[str, Any]] | None = None) -> InvalidArguments:
        schema = next(d["inputSchema"] for d in definitions or self.definitions if d["name"] == tool_name)
        return InvalidArguments(tool_name, [problem], schema)

    def _only(
        self, tool_name: str, args: dict[str, Any], allowed: set[str], definitions: list[dict[str, Any]] | None = None
    ) -> None:
        extra = sorted(set(args) - allowed)
        if extra:
            listing = ", ".join(sorted(allowed))
            raise self._bad(tool_name, f"unknown argument(s) {', '.join(extra)}; allowed: {listing}", definitions)

    def _category_names(self, category: Any, tool_name: str = TOOL_LIST) -> list[str]:
        """The offered categories, or the one `category` names (case-insensitively: "Forex" is forex)."""
        if category is None:
            return list(self._by_category)
        # A list or object is unhashable, so the type check comes first.
        found = self._folded_categories.get(category.strip().lower()) if isinstance(category, str) else None
        if found is None:
            raise self._bad(tool_name, self._unknown_category(category))
        return [found]

    def _unknown_category(self, category: Any) -> str:
        names = list(self._by_category)
        if not isinstance(category, str):
            return f"a category is named by a string, not a {type(category).__name__}; categories: {self._few(names)}"
        close = closest_names(category, names)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        return f"unknown category {clip(category)!r}{hint}; categories: {self._few(names)}"

    @staticmethod
    def _few(names: list[str]) -> str:
        if len(names) <= MAX_CATEGORIES_NAMED:
            return ", ".join(names)
        # DigitalOcean has 55: naming them all would cost the model ~300 tokens at every such mistake
        return f"{len(names)}, listed by {TOOL_LIST} without a category"
