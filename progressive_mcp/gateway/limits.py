"""Bounds on what a server behind the gateway may make us store and show: tools per server, and each tool's name,
title, description, schemas and annotations, applied at sync before anything is stored.

A server is untrusted input: one 2 MB description would otherwise be stored, indexed and sent whole in every
TOOL_GET and direct-mode tools/list. What is past a bound is cut, and a note naming what was cut goes into the
tool's description (so the agent knows) and into the sync report (so the operator does). The tool's hash is taken
before the cut (`documents.ToolDocument.of`), so a change past the cut is still a change, and pinning sees it.

The bounds are set well above what real servers list (measured: the MCP reference servers from npm, and GitHub's
MCP server's 117 tool snapshots): the longest description is 2,781 characters (server-sequential-thinking; GitHub's
longest is 1,115), the largest input schema 7,012 characters (GitHub's projects_write), the largest output schema
952 (server-memory), the largest definition 1,545 tokens as kept here (GitHub's projects_write; with their icons,
which are not kept, one reaches 1,732), and the most tools GitHub's ~100 with every toolset on. Each tool's
definition must also fit `MAX_DEFINITION_TOKENS`, so any one TOOL_GET stays within DESIGN.md's
2,500 tokens (counted with the tokenizer where it is installed, else with its upper bound, which may cut a little
more). Example::

    definition, notes = bound_definition(server_definition)
    listed, notes = bound_listing("memory", server_tools)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from progressive_mcp.schema_excerpt import strip_descriptions
from progressive_mcp.search import hints as search_hints
from progressive_mcp.tokens import dumps, fits_budget

MAX_TOOLS_PER_SERVER = 1_000  # 10x GitHub's server with every toolset on (~100)
MAX_TOOL_NAME_CHARS = 256  # MCP asks for at most 128 (public names are cut to 128); the longest real one is 43
MAX_TITLE_CHARS = 200  # the longest real one is 87
MAX_DESCRIPTION_CHARS = 4_000  # 1.4x the longest real one (2,781)
MAX_SCHEMA_CHARS = 16_000  # each of the input and output schemas, as compact JSON: 2.3x the largest real one
MAX_DEFINITION_TOKENS = 2_400  # a TOOL_GET adds its category, hash and catalog version: ~50 tokens
SCHEMA_DESCRIPTION_CHARS = 200  # a description inside a schema, when the schema is over its bound
MIN_DESCRIPTION_CHARS = 1_000  # kept before the input schema loses its structure to the token budget
ANNOTATIONS = {
    "title": str,
    "readOnlyHint": bool,
    "destructiveHint": bool,
    "idempotentHint": bool,
    "openWorldHint": bool,
}
_KEPT = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")


def bound_listing(server: str, definitions: Iterable[Mapping[str, Any]]) -> tuple[list[Mapping[str, Any]], list[str]]:
    """A server's tools/list within bounds: the first `MAX_TOOLS_PER_SERVER` tools in its order, each name once
    (the first definition of a name listed twice) and none over `MAX_TOOL_NAME_CHARS` (a cut name could not be
    called); with a note for each thing left out."""
    kept: dict[str, Mapping[str, Any]] = {}
    notes: list[str] = []
    long_names = repeated = 0
    over = False
    nameless = 0
    for definition in definitions:
        name = definition.get("name")
        if not isinstance(name, str) or not name:
            nameless += 1
        elif len(name) > MAX_TOOL_NAME_CHARS:
            long_names += 1
        elif name in kept:
            repeated += 1
        elif len(kept) == MAX_TOOLS_PER_SERVER:
            over = True
            break
        else:
            kept[name] = definition
    if over:
        notes.append(
            f"{server}: lists more than {MAX_TOOLS_PER_SERVER:,} tools; the first {MAX_TOOLS_PER_SERVER:,} are kept"
        )
    if long_names:
        notes.append(f"{server}: {long_names} tool(s) left out: a name over {MAX_TOOL_NAME_CHARS} characters")
    if nameless:
        notes.append(f"{server}: {nameless} tool(s) without a name left out")
    if repeated:
        notes.append(f"{server}: {repeated} tool name(s) listed twice; the first definition of each is kept")
    return list(kept.values()), notes


def bound_definition(definition: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A tool definition within bounds, and what was cut (empty, and the definition's known members unchanged,
    when nothing was). Members other than the name, title, description, schemas and annotations are left out
    (icons, _meta: nothing here uses them); annotations keep MCP's own keys."""
    bounded = {key: definition[key] for key in _KEPT if key in definition}
    hints = search_hints.bounded(definition)  # a progressive-mcp server's keywords and examples, when it sent them
    if hints:
        bounded["_meta"] = {search_hints.HINTS_KEY: {kind: list(texts) for kind, texts in hints.items()}}
    cuts: list[str] = []
    title = bounded.get("title")
    if title is not None and (not isinstance(title, str) or len(title) > MAX_TITLE_CHARS):
        bounded["title"] = str(title)[:MAX_TITLE_CHARS]
        cuts.append(f"title {len(str(title)):,} → {MAX_TITLE_CHARS} characters")
    description = str(bounded.get("description") or "")
    if len(description) > MAX_DESCRIPTION_CHARS:
        cuts.append(f"description {len(description):,} → {MAX_DESCRIPTION_CHARS:,} characters")
        description = description[:MAX_DESCRIPTION_CHARS]
    annotations = bounded.get("annotations")
    if annotations is not None:
        kept: dict[str, Any] = (
            {k: v for k, v in annotations.items() if isinstance(v, ANNOTATIONS.get(k, ()))}
            if isinstance(annotations, Mapping)
            else {}
        )
        if kept.get("title") and len(kept["title"]) > MAX_TITLE_CHARS:
            kept["title"] = kept["title"][:MAX_TITLE_CHARS]
        if kept != annotations:
            bounded["annotations"] = kept
    schema = bounded.get("inputSchema")
    if not isinstance(schema, Mapping):
        bounded["inputSchema"] = schema = {"type": "object"}
        cuts.append("input schema: not an object; none kept")
    output = bounded.get("outputSchema")
    if output is not None and (not isinstance(output, Mapping) or _size(output) > MAX_SCHEMA_CHARS):
        del bounded["outputSchema"]
        cuts.append(f"output schema ({_size(output):,} characters) left out")
    original_schema, schema_cut = schema, ""

    def fits(text: str) -> bool:
        """Whether the definition, with description `text` and the notes, fits the token budget."""
        notes = cuts + ([schema_cut] if schema_cut else [])
        return _fits(dumps({**bounded, "description": text + _note(notes)}))

    def shorten(minimum: int) -> None:
        """Cut the description to what fits, keeping at least `minimum` characters (or all of it, if shorter)."""
        nonlocal description
        whole = len(str(definition.get("description") or ""))
        cuts[:] = [c for c in cuts if not c.startswith("description ")]
        cuts.insert(0, f"description {whole:,} → {whole:,} characters")  # as long as the final note can be
        floor = min(minimum, len(description))
        length = max(floor, _longest(description, lambda n: fits(description[:n])))
        cuts[0] = f"description {whole:,} → {length:,} characters"
        description = description[:length]

    # The input schema is first held to its own bound; then, while the whole is over the token budget (dense text,
    # many parts), the output schema goes, then detail in the input schema, then description text, in this order.
    step = 0

    def smaller_schema() -> None:
        nonlocal step, schema_cut
        how, make = _SCHEMA_STEPS[step]
        step += 1
        bounded["inputSchema"] = _smaller(original_schema, make)
        schema_cut = f"input schema {_size(original_schema):,} → {_size(bounded['inputSchema']):,} characters ({how})"

    while _size(bounded["inputSchema"]) > MAX_SCHEMA_CHARS:  # the last step's schema always fits
        smaller_schema()
    if not fits(description) and "outputSchema" in bounded:
        cuts.append(f"output schema ({_size(bounded.pop('outputSchema')):,} characters) left out")
    while not fits(description) and step < len(_SCHEMA_STEPS):
        if _SCHEMA_STEPS[step][1] is _outline:  # before the arguments' structure goes, the description gives
            shorten(MIN_DESCRIPTION_CHARS)  # up what it can
            if fits(description):
                break
        smaller_schema()
    if not fits(description):
        shorten(0)
    cuts += [schema_cut] if schema_cut else []
    if cuts:
        bounded["description"] = description + _note(cuts)
    return bounded, cuts


def _fits(text: str) -> bool:
    """Whether `text` is within `MAX_DEFINITION_TOKENS`: by the tokenizer's upper bound first, which is cheap and
    loads no vocabulary, then by the tokenizer (`fits_budget`)."""
    return fits_budget(text, MAX_DEFINITION_TOKENS, bound_first=True)


def _note(cuts: list[str]) -> str:
    return f"\n\n[Cut by the gateway: {'; '.join(cuts)}.]" if cuts else ""


def _smaller(schema: Mapping[str, Any], step: Callable[[Mapping[str, Any]], Mapping[str, Any]]) -> Mapping[str, Any]:
    try:
        return step(schema)
    except RecursionError:  # nested deeper than Python recurses: nothing of it can be kept
        return {"type": "object"}


def _any_object(_schema: Mapping[str, Any]) -> Mapping[str, Any]:
    return {"type": "object"}


def _outline(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The top-level properties' names and types (and `required`), nothing nested."""
    properties = schema.get("properties")
    outline: dict[str, Any] = {"type": "object"}
    if isinstance(properties, Mapping):
        outline["properties"] = {
            str(name): {"type": prop["type"]} if isinstance(prop, Mapping) and _is_type(prop.get("type")) else {}
            for name, prop in properties.items()
        }
    if isinstance(schema.get("required"), list):
        outline["required"] = [r for r in schema["required"] if isinstance(r, str)]
    return outline


# Ever smaller forms of an input schema, tried in order: descriptions inside it shortened, then left out (with
# titles and examples), then only its top-level properties' names and types, then any object.
_SCHEMA_STEPS: list[tuple[str, Callable[[Mapping[str, Any]], Mapping[str, Any]]]] = [
    ("descriptions in it shortened", lambda s: strip_descriptions(s, SCHEMA_DESCRIPTION_CHARS)),
    ("descriptions, titles and examples in it left out", lambda s: strip_descriptions(s, 0)),
    ("only its top-level properties' names and types kept", _outline),
    ("none kept: the server checks the arguments itself", _any_object),
]


def _is_type(kind: Any) -> bool:
    return isinstance(kind, str) or (isinstance(kind, list) and all(isinstance(k, str) for k in kind))


def _size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str))


def _longest(text: str, fits: Callable[[int], bool]) -> int:
    """The largest n ≤ len(text) for which `fits(n)` (0 if none): a binary search, as fitting shrinks with n."""
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low
