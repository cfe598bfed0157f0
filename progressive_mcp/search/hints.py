"""Search hints that travel with a tool from one progressive-mcp server to another's gateway, in the tool's `_meta`.

A catalog's tools carry search aids an MCP tool definition has no field for: keywords and example questions (Alpha
Vantage's spec writes them for every function). A gateway in front of a progressive-mcp server would lose them, and
rank `TIME_SERIES_DAILY` above `GLOBAL_QUOTE` for "stock price of apple". So a client that asks for them (its
`tools/list` request's `_meta` has `HINTS_KEY`: true) gets each catalog tool with them under `_meta[HINTS_KEY]`;
the gateway's sync asks every server, keeps what it finds within bounds (`bounded`), hashes it with the tool, and
indexes it as that tool's keywords and examples. A client that does not ask pays nothing (`tools/list` of the
direct mode stays within its token budget).

The catalog's vocabulary (synonyms, hints, a scope) does not travel: it is written for one catalog's words, and in
a gateway one index ranks every server's tools on one scale, where a curated vocabulary would turn the semantic
signal off for all of them. Example::

    with_hints(tool.definition(), tool)["_meta"]   # {"io.progressive-mcp/search": {"keywords": [...], ...}}
    bounded(definition)                            # {"keywords": (...), "examples": (...)} from a listed definition
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from progressive_mcp.catalog import CatalogTool

HINTS_KEY = "io.progressive-mcp/search"
# Bounds on what a server may hint (untrusted input, like its descriptions): Alpha Vantage's largest are 33 keywords
# (of at most 37 characters) and 5 examples (of at most 64).
MAX_KEYWORDS = 40
MAX_KEYWORD_CHARS = 80
MAX_EXAMPLES = 12
MAX_EXAMPLE_CHARS = 200


def asked(meta: Mapping[str, Any] | None) -> bool:
    """Whether a `tools/list` request's `_meta` asks for search hints."""
    return isinstance(meta, Mapping) and meta.get(HINTS_KEY) is True


def hints_of(tool: CatalogTool) -> dict[str, list[str]]:
    """A catalog tool's hints (empty when it has none)."""
    hints = {"keywords": list(tool.keywords), "examples": list(tool.examples)}
    return {kind: words for kind, words in hints.items() if words}


def with_hints(definition: Mapping[str, Any], tool: CatalogTool) -> dict[str, Any]:
    """A wire definition with the tool's hints in its `_meta` (unchanged when it has none)."""
    hints = hints_of(tool)
    if not hints:
        return dict(definition)
    meta = dict(definition.get("_meta") or {})
    meta[HINTS_KEY] = hints
    return {**definition, "_meta": meta}


def listed(definition: Mapping[str, Any]) -> Any:
    """The hints member of a listed definition as it came (None when absent), for the tool's hash."""
    meta = definition.get("_meta")
    return meta.get(HINTS_KEY) if isinstance(meta, Mapping) else None


def bounded(definition: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """The hints of a listed definition within bounds: strings only, whitespace folded, cut to length and count."""
    raw = listed(definition)
    if not isinstance(raw, Mapping):
        return {}
    kept: dict[str, tuple[str, ...]] = {}
    for kind, count, chars in (
        ("keywords", MAX_KEYWORDS, MAX_KEYWORD_CHARS),
        ("examples", MAX_EXAMPLES, MAX_EXAMPLE_CHARS),
    ):
        values = raw.get(kind)
        if not isinstance(values, list):
            continue
        texts = [" ".join(v.split())[:chars] for v in values if isinstance(v, str)]
        texts = list(dict.fromkeys(t for t in texts if t))[:count]
        if texts:
            kept[kind] = tuple(texts)
    return kept
