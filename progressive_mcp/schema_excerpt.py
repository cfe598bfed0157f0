"""The part of an input schema an argument error quotes: the whole schema when it is small, else only the
arguments that failed (and the schema at a nested mistake's path), collapsed to fit. Example::

    quote_schema(post_charges_schema, ["shipping/address/line1"])
    # {"inputSchema": {"type": "object", "properties": {"shipping": {...}}, "required": [...]},
    #  "at": {"shipping/address/line1": {"type": "string", "maxLength": 5000}},
    #  "note": "Only the arguments in question; TOOL_GET gives the input schema."}

An error is read on every mistake, so it costs what it must (Stripe's PostCharges quoted its 5.7K-character
schema whole); the model still sees what was wrong, the property's schema and the required arguments.

Also the view TOOL_GET gives of a tool whose input schema alone would overrun DESIGN.md's 2,500 tokens for any one
TOOL_GET (`get_view`: OpenAI's `beta_Getinputtokencounts` was 11,111 tokens, DigitalOcean's `databases_patch_config`
10,954, Stripe's `PostIssuingCardholders` 6,674); TOOL_CALL still checks arguments against the whole schema.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from progressive_mcp.tokens import count_tokens, estimate_tokens, fits_budget

ERROR_TOKENS = 400  # what a whole argument error may cost (DESIGN.md's budget)
FRAME_TOKENS = 90  # its message's frame, the tool's name, the keys and the note
WHOLE_TOKENS = 250  # an input schema this small (compact JSON) is quoted whole, when the problems leave room
QUOTE_TOKENS = 180  # what the excerpt's schemas may take together when it is not
MIN_QUOTE_TOKENS = 40
MAX_QUOTED = 3  # failing arguments quoted at most; the problems list names them all
# An output schema in TOOL_GET's JSON-schema view: the breadth-first schema budget (issue 28) describes more of
# each answer than the depth-first one did (Slack's views +29%); this holds them below what they were before. The
# Python stubs give a tool's return types the same budget (calls/stubs.py), so neither view costs more than the other.
OUTPUT_VIEW_TOKENS = 600
NOTE = "Only the arguments in question; TOOL_GET gives the input schema."
_MEMBER_LISTS = ("anyOf", "oneOf", "allOf")
# TOOL_GET's entry for one tool within DESIGN.md's 2,500 tokens, its answer's frame (catalog_version, the "tools"
# list) and code mode's output view included; counted as the other views are (`fits_budget`: the tokenizer, or the
# Lambda's upper bound without it, ~1.1x on JSON).
GET_VIEW_TOKENS = 2_500
GET_FRAME_TOKENS = 30
SCHEMA_DESCRIPTION_CHARS = 200  # a description inside an input schema too large to send whole
OUTLINE_DESCRIPTION_CHARS = 60  # a top-level argument's, where only the arguments' names and types would fit
GET_NOTE = (
    "Shortened to fit TOOL_GET's budget: {how}. TOOL_CALL checks arguments against the whole schema; its error "
    "quotes the part in question."
)
# Schema keywords whose value maps names to schemas (a property called "description" is not the keyword), and
# those whose value is a schema or a list of schemas.
_NAMED_SCHEMAS = {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
_SUBSCHEMAS = {
    "items", "prefixItems", "additionalItems", "additionalProperties", "unevaluatedItems", "unevaluatedProperties",
    "contains", "propertyNames", "not", "if", "then", "else", "allOf", "anyOf", "oneOf",
}  # fmt: skip


def quote_schema(input_schema: dict[str, Any], paths: Sequence[str], problems: Sequence[str] = ()) -> dict[str, Any]:
    """The `inputSchema` (and `at`, `note`) an InvalidArguments error shows for mistakes at `paths`
    ("amount", "shipping/address/line1"; an empty path is the arguments object itself). The problems are shown
    twice (in the message and as a list), so what they take leaves less for the schema."""
    spare = ERROR_TOKENS - FRAME_TOKENS - 2 * _tokens(json.dumps(list(problems), ensure_ascii=False))
    if _fits(input_schema, min(WHOLE_TOKENS, spare)):
        return {"inputSchema": input_schema}
    properties = input_schema.get("properties") or {}
    names = list(dict.fromkeys(p.split("/", 1)[0] for p in paths if p.split("/", 1)[0] in properties))
    names = names[:MAX_QUOTED]
    nested = [p for p in dict.fromkeys(paths) if "/" in p and p.split("/", 1)[0] in names][:MAX_QUOTED]
    share = max(MIN_QUOTE_TOKENS, min(QUOTE_TOKENS, spare)) // max(1, len(names) + len(nested))
    excerpt: dict[str, Any] = {"type": "object", "properties": {n: shrink(properties[n], share) for n in names}}
    if input_schema.get("required"):
        excerpt["required"] = input_schema["required"]
    quoted: dict[str, Any] = {"inputSchema": excerpt}
    if nested:
        quoted["at"] = {path: shrink(at_path(input_schema, path), share) for path in nested}
    quoted["note"] = NOTE
    return quoted


def at_path(schema: dict[str, Any], path: str) -> dict[str, Any]:
    """The schema that describes the value at `path` (the deepest part that can be found: a path through an
    `anyOf` follows the member that has the next key)."""
    node = schema
    for key in path.split("/"):
        found = _child(node, key)
        if found is None:
            return node
        node = found
    return node


def _child(node: dict[str, Any], key: str) -> dict[str, Any] | None:
    candidates = [node, *(m for k in _MEMBER_LISTS for m in node.get(k) or [] if isinstance(m, dict))]
    for candidate in candidates:
        if key.isdigit() and isinstance(candidate.get("items"), dict):
            return dict(candidate["items"])
        properties = candidate.get("properties")
        if isinstance(properties, dict) and isinstance(properties.get(key), dict):
            return dict(properties[key])
    for candidate in candidates:
        if isinstance(candidate.get("additionalProperties"), dict):
            return dict(candidate["additionalProperties"])
    return None


def shrink(schema: dict[str, Any], limit: int, min_depth: int = 0) -> dict[str, Any]:
    """`schema` within `limit` tokens as compact JSON: descriptions go first, then the deepest levels collapse
    to their type, until it fits (at worst, its levels down to `min_depth` with their types, whatever their size)."""
    for depth in (8, 5, 4, 3, 2, 1):
        if depth < min_depth:
            break
        for descriptions in (True, False):
            candidate = _collapsed(schema, depth, descriptions)
            if _fits(candidate, limit):
                return candidate
    return _collapsed(schema, min_depth, False)


def output_view(schema: dict[str, Any]) -> dict[str, Any]:
    """An output schema as code mode's JSON-schema TOOL_GET shows it: within OUTPUT_VIEW_TOKENS, deep parts
    collapsed to their type (as the Python stubs collapse them to `dict[str, Any]`), every top-level field (of the
    object, of each union member, of an array's items) keeping its type whatever the size."""
    wrapped = any(k in schema for k in (*_MEMBER_LISTS, "items"))
    return shrink(schema, OUTPUT_VIEW_TOKENS, min_depth=2 if wrapped else 1)


def get_view(entry: dict[str, Any], reserve: int = 0) -> dict[str, Any]:
    """TOOL_GET's entry for a tool (its definition, category and hash) within GET_VIEW_TOKENS, `reserve` tokens left
    for what is added to it later (code mode's output view). Nearly every tool's entry fits and comes back as it is.
    Else its input schema is shortened in steps, each tried until one fits: descriptions in it cut, then kept only
    for the top-level arguments, then deeper levels shown by their type alone, then only the top-level arguments'
    names and types (`required` is kept at every level shown). The schema's own description then says which step
    (so the note travels with the schema, into TOOL_SEARCH's `schemas` too); where even the last step is over, the
    tool's description gives way."""
    budget = GET_VIEW_TOKENS - GET_FRAME_TOKENS - reserve
    schema = entry.get("inputSchema")
    if not isinstance(schema, dict) or _fits(entry, budget, bound_first=True):
        return entry
    said = str(schema.get("description") or "")
    shortened = entry
    for how, candidate in _input_views(schema):
        noted = {**candidate, "description": (said + "\n\n" if said else "") + GET_NOTE.format(how=how)}
        shortened = {**entry, "inputSchema": noted}
        if _fits(shortened, budget, bound_first=True):
            return shortened
    description = str(entry.get("description") or "")
    kept = len(description)
    while kept and not _fits({**shortened, "description": description[:kept] + "…"}, budget, bound_first=True):
        kept = max(kept - 100, 0)
    shortened["description"] = description[:kept] + "…" if kept else ""
    return shortened


def _input_views(schema: dict[str, Any]) -> Iterable[tuple[str, dict[str, Any]]]:
    """Ever smaller views of an input schema, each with what it left out, for `get_view`; made as tried."""
    yield (
        f"descriptions in it cut to {SCHEMA_DESCRIPTION_CHARS} characters",
        strip_descriptions(schema, SCHEMA_DESCRIPTION_CHARS),
    )
    top = _described(schema, strip_descriptions(schema, 0), SCHEMA_DESCRIPTION_CHARS)
    yield "descriptions kept for the top-level arguments only", top
    for depth in (6, 4, 3, 2):
        levels = "the top-level arguments" if depth == 2 else f"the first {depth - 1} levels of arguments"
        yield f"{levels} in full, what is inside them by its type only", _collapsed(top, depth, True)
    outline = _collapsed(schema, 1, False)
    cut = OUTLINE_DESCRIPTION_CHARS
    yield (
        f"only the top-level arguments' names, types and descriptions cut to {cut} characters",
        _described(schema, outline, cut),
    )
    yield "only the top-level arguments' names and types", outline


def _described(schema: dict[str, Any], view: dict[str, Any], cut: int) -> dict[str, Any]:
    """`view` with its top-level arguments' descriptions from `schema`, cut to `cut` characters."""
    properties, shown = schema.get("properties"), view.get("properties")
    if not isinstance(properties, dict) or not isinstance(shown, dict):
        return view
    described = dict(shown)
    for name, prop in properties.items():
        text = prop.get("description") if isinstance(prop, dict) else None
        if isinstance(text, str) and text and isinstance(shown.get(name), dict):
            described[name] = {**shown[name], "description": _cut(text, cut)}
    return {**view, "properties": described}


def _cut(text: str, cut: int) -> str:
    return text if len(text) <= cut else text[: cut - 1] + "…"


def strip_descriptions(schema: Any, cut: int) -> Any:
    """`schema` with each `description` keyword cut to `cut` characters (left out at 0, with `title`, `examples`,
    `$comment`), walking only where the JSON Schema keywords say subschemas are."""
    if not isinstance(schema, Mapping):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "description" and isinstance(value, str):
            if cut:
                out[key] = _cut(value, cut)
            continue
        if cut == 0 and key in ("title", "examples", "$comment"):
            continue
        if key in _NAMED_SCHEMAS and isinstance(value, Mapping):
            out[key] = {name: strip_descriptions(sub, cut) for name, sub in value.items()}
        elif key in _SUBSCHEMAS and isinstance(value, list):
            out[key] = [strip_descriptions(sub, cut) for sub in value]
        elif key in _SUBSCHEMAS:
            out[key] = strip_descriptions(value, cut)
        else:
            out[key] = value
    return out


def _collapsed(node: Any, depth: int, descriptions: bool) -> Any:
    if not isinstance(node, dict):
        return node
    if depth <= 0:
        kept = {k: node[k] for k in ("type", "format", "const") if k in node}
        if not kept and isinstance(node.get("enum"), list) and len(node["enum"]) <= 10:
            kept["enum"] = node["enum"]  # a type said by its values alone
        elif not kept and any(k in node for k in ("items", "prefixItems", "properties", "additionalProperties")):
            kept["type"] = "object" if "items" not in node and "prefixItems" not in node else "array"
        if not kept and any(k in node for k in _MEMBER_LISTS):
            kept = {"anyOf": [_collapsed(m, 0, False) for m in _members(node)][:8]}
        return kept
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("description", "title", "examples") and not descriptions:
            continue
        if key in ("properties", "patternProperties") and isinstance(value, dict):
            out[key] = {k: _collapsed(v, depth - 1, descriptions) for k, v in value.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            out[key] = _collapsed(value, depth - 1, descriptions)
        elif key in (*_MEMBER_LISTS, "prefixItems") and isinstance(value, list):
            out[key] = [_collapsed(v, depth - 1, descriptions) for v in value]
        else:
            out[key] = value
    return out


def _members(node: dict[str, Any]) -> Iterable[Any]:
    return (m for k in _MEMBER_LISTS for m in node.get(k) or [])


def _tokens(text: str) -> int:
    """Tokens of `text`: counted where the tokenizer is installed, else an upper bound."""
    try:
        return count_tokens(text)
    except ImportError:  # the Lambda asset leaves bpe-openai out
        return estimate_tokens(text)


def _fits(value: Any, tokens: int, *, bound_first: bool = False) -> bool:
    """Whether `value`'s compact JSON is within `tokens` (`fits_budget`; `bound_first` for TOOL_GET's entries, so a
    first TOOL_GET of an ordinary tool loads no vocabulary)."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    return fits_budget(text, tokens, bound_first=bound_first)


def mentioned(problems: Iterable[str], input_schema: dict[str, Any]) -> list[str]:
    """The arguments a list of problems is about, when the caller did not say: those a problem starts with."""
    names = list(input_schema.get("properties") or {})
    found = []
    for problem in problems:
        head = problem.split(":", 1)[0].split(" ", 1)[0].strip("'\"")
        if head.split("/", 1)[0] in names:
            found.append(head)
    return found
