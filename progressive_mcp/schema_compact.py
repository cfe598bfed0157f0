"""The compact view of a tool that TOOL_GET (and TOOL_SEARCH's `schemas`) give when a server is started with
`PMCP_SCHEMA_VIEW=compact`: each argument on one line, its type written the short way, in place of the JSON input
schema. Example::

    compact_entry({"name": "CreateCall", "description": "...", "inputSchema": {...}, "category": "calls"})
    # {"name": "CreateCall", "description": "...", "category": "calls", "arguments":
    #  "To: string — The phone number, SIP address, or client identifier to call.\\n"
    #  "Method?: \\"GET\\"|\\"POST\\" — The HTTP method we should use when calling the url.\\n..."}

A line is `name: type`, `name?: type` when the argument may be left out, then ` = default` and ` — ` its
description's first sentences (up to 120 characters). Types: `string`, `string(date-time)`, `integer 1..100`,
`"a"|"b"` for an enum, `T[]` for an array, `{key: T, other?: T}` for an object, `A | B` for anyOf / oneOf,
`{string: T}` for a map; `$ref`s to the schema's own `$defs` are read in place. Every argument keeps its name,
type and whether it is required; an entry that would overrun TOOL_GET's 2,500 tokens loses, in turn, the
descriptions' length, the descriptions, the nesting and long enums' values, and says so. TOOL_CALL still checks
arguments against the whole schema, and its errors quote the part in question (`schema_excerpt.quote_schema`).
Measured against the JSON view: `progressive-mcp tokens` (its TOOL_GET rows).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from progressive_mcp.errors import ConfigError
from progressive_mcp.schema_excerpt import GET_FRAME_TOKENS, GET_VIEW_TOKENS
from progressive_mcp.tokens import dumps, fits_budget

SCHEMA_VIEW_ENV = "PMCP_SCHEMA_VIEW"
SCHEMA_VIEWS = ("json", "compact")
DESCRIPTION_CHARS = 400  # the tool's description: its first sentences up to this many characters
NO_ARGUMENTS = "(no arguments)"
MAX_NESTING = 32  # types within types written (arrays, unions, objects) before the rest is `…`
# An entry's top-level keys kept as they are; the input schema becomes `arguments`.
_KEPT = ("name", "title", "description", "category", "content_hash", "annotations")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9`\"'(\[])")


@dataclass(frozen=True)
class _Style:
    """How much one rendering keeps: the tried steps of `compact_entry`, each smaller than the one before."""

    description_chars: int  # an argument's description, cut to this (0: none)
    depth: int  # levels of objects written out below the arguments (0: an argument's object is `object`)
    enum_values: int  # an enum's values written; the rest counted
    note: str = ""  # what this step left out, said in the entry


_STEPS = (
    _Style(120, 3, 30),
    _Style(60, 3, 30, "argument descriptions cut to 60 characters"),
    _Style(0, 3, 30, "argument descriptions left out"),
    _Style(0, 0, 30, "argument descriptions left out, nested objects shown as object"),
    _Style(0, 0, 8, "argument descriptions left out, nested objects shown as object, long enums cut to 8 values"),
)
SHORTENED = "Shortened to fit TOOL_GET's budget: {how}. TOOL_CALL checks arguments against the whole schema."


def schema_view(environ: Mapping[str, str] | None = None) -> str:
    """The view TOOL_GET gives, from PMCP_SCHEMA_VIEW: `json` (the default: JSON Schema, as tools/list has it) or
    `compact`. Raises ConfigError for any other value."""
    value = (os.environ if environ is None else environ).get(SCHEMA_VIEW_ENV, "json").strip().lower() or "json"
    if value not in SCHEMA_VIEWS:
        raise ConfigError(f"{SCHEMA_VIEW_ENV} must be one of {', '.join(SCHEMA_VIEWS)}, not {value!r}")
    return value


def compact_entry(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A TOOL_GET entry (a tool's definition with its category and hash) in the compact view, within TOOL_GET's
    budget for one tool."""
    kept = {key: entry[key] for key in _KEPT if key in entry}
    if isinstance(kept.get("description"), str):
        kept["description"] = first_sentences(kept["description"], DESCRIPTION_CHARS)
    schema = entry.get("inputSchema")
    schema = schema if isinstance(schema, Mapping) else {}
    budget = GET_VIEW_TOKENS - GET_FRAME_TOKENS
    candidate: dict[str, Any] = kept
    for style in _STEPS:
        text = arguments(schema, style)
        if style.note:
            text += "\n" + SHORTENED.format(how=style.note)
        candidate = {**kept, "arguments": text}
        if fits_budget(dumps(candidate), budget, bound_first=True):
            return candidate
    return candidate  # the smallest step: every argument's name and type, whatever the size


def arguments(schema: Mapping[str, Any], style: _Style = _STEPS[0]) -> str:
    """An input schema's arguments, one line each (`NO_ARGUMENTS` for none)."""
    writer = _Writer(schema, style)
    properties = schema.get("properties")
    if not isinstance(properties, Mapping) or not properties:
        extra = schema.get("additionalProperties")
        shaped = any(k in schema for k in ("anyOf", "oneOf", "allOf", "$ref", "enum", "const", "items"))
        if shaped or (isinstance(extra, Mapping) and extra) or schema.get("type") not in (None, "object"):
            return f"arguments: {writer.type_of(schema, 0)}"
        return NO_ARGUMENTS
    required = set(schema.get("required") or ())
    return "\n".join(writer.line(name, sub, name in required) for name, sub in properties.items())


def first_sentences(text: str, most: int) -> str:
    """`text` on one line, cut after the last sentence that ends within `most` characters (else at a word, with
    an ellipsis)."""
    flat = " ".join(text.split())
    if len(flat) <= most:
        return flat
    kept = ""
    for sentence in _SENTENCE.split(flat):
        joined = f"{kept} {sentence}".strip()
        if len(joined) > most:
            break
        kept = joined
    if kept:
        return kept
    return flat[: most - 1].rsplit(" ", 1)[0].rstrip(",;:") + "…"


class _Writer:
    """Types of one schema's parts, `$ref`s to its own definitions read in place (once per path: a recursive
    definition is named, not written again)."""

    def __init__(self, root: Mapping[str, Any], style: _Style) -> None:
        self._defs: dict[str, Any] = {}
        for key in ("definitions", "$defs"):
            found = root.get(key)
            if isinstance(found, Mapping):
                self._defs.update({f"#/{key}/{name}": value for name, value in found.items()})
        self._style = style
        self._open: list[str] = []  # the $refs being written, outermost first
        self._nesting = 0  # `type_of` calls under way

    def line(self, name: str, schema: Any, required: bool) -> str:
        text = f"{name}{'' if required else '?'}: {self.type_of(schema, 0)}"
        if isinstance(schema, Mapping):
            if "default" in schema:
                text += f" = {_value(schema['default'])}"
            if schema.get("deprecated") is True:
                text += " (deprecated)"
            said = schema.get("description") or schema.get("title")
            if isinstance(said, str) and said.strip() and self._style.description_chars:
                text += " — " + first_sentences(said, self._style.description_chars)
        return text

    def type_of(self, schema: Any, depth: int) -> str:
        # Arrays of arrays, unions of unions: no schema a person wrote goes this deep, but a gateway server's may.
        if self._nesting >= MAX_NESTING:
            return "…"
        self._nesting += 1
        try:
            return self._type_of(schema, depth)
        finally:
            self._nesting -= 1

    def _type_of(self, schema: Any, depth: int) -> str:
        if schema is True or not isinstance(schema, Mapping):
            return "never" if schema is False else "any"
        ref = schema.get("$ref")
        if isinstance(ref, str):
            return self._reference(ref, depth)
        if "const" in schema:
            return _value(schema["const"])
        enum = schema.get("enum")
        if isinstance(enum, list) and enum:
            shown = [_value(v) for v in enum[: self._style.enum_values]]
            rest = len(enum) - len(shown)
            return "|".join(shown) + (f"|… ({rest} more)" if rest else "")
        for key in ("anyOf", "oneOf"):
            members = schema.get(key)
            if isinstance(members, list) and members:
                return " | ".join(dict.fromkeys(self.type_of(m, depth) for m in members))
        members = schema.get("allOf")
        if isinstance(members, list) and members:
            return self._all_of(schema, members, depth)
        kind = schema.get("type")
        if isinstance(kind, list):
            return "|".join(self.type_of({**schema, "type": k}, depth) for k in kind if isinstance(k, str)) or "any"
        if kind == "array" or "items" in schema:
            inner = self.type_of(schema.get("items", True), depth + 1)
            return f"({inner})[]" if " " in inner or "|" in inner else f"{inner}[]"
        if kind == "object" or "properties" in schema:
            return self._object(schema, depth)
        return _scalar(schema, kind if isinstance(kind, str) else "any")

    def _reference(self, ref: str, depth: int) -> str:
        target = self._defs.get(ref)
        name = ref.rsplit("/", 1)[-1]
        if target is None or ref in self._open:
            return name or "any"
        self._open.append(ref)
        try:
            return self.type_of(target, depth)
        finally:
            self._open.pop()

    def _all_of(self, schema: Mapping[str, Any], members: list[Any], depth: int) -> str:
        """allOf: the members' properties as one object when they are objects, else the members joined by &."""
        merged: dict[str, Any] = {}
        required: list[str] = []
        parts = [self._defs.get(m["$ref"], m) if isinstance(m, Mapping) and "$ref" in m else m for m in members]
        if all(isinstance(p, Mapping) and (p.get("type") == "object" or "properties" in p) for p in parts):
            for part in parts:
                merged.update(part.get("properties") or {})
                required += list(part.get("required") or ())
            own = {k: v for k, v in schema.items() if k != "allOf"}
            merged.update(own.get("properties") or {})
            required += list(own.get("required") or ())
            return self._object({"type": "object", "properties": merged, "required": required}, depth)
        return " & ".join(dict.fromkeys(self.type_of(m, depth) for m in members))

    def _object(self, schema: Mapping[str, Any], depth: int) -> str:
        properties = schema.get("properties")
        extra = schema.get("additionalProperties")
        if isinstance(properties, Mapping) and properties:
            if depth >= self._style.depth:
                return "object"
            required = set(schema.get("required") or ())
            fields = (f"{k}{'' if k in required else '?'}: {self.type_of(v, depth + 1)}" for k, v in properties.items())
            return "{" + ", ".join(fields) + "}"
        if isinstance(extra, Mapping) and extra and depth < self._style.depth:
            return "{string: " + self.type_of(extra, depth + 1) + "}"
        return "object"


def _scalar(schema: Mapping[str, Any], kind: str) -> str:
    """A scalar type with its format and range: `string(date)`, `integer 1..100`, `number >=0`, `number >0`."""
    text = kind
    if isinstance(schema.get("format"), str):
        text += f"({schema['format']})"
    low, high = _bound(schema, "minimum"), _bound(schema, "maximum")
    low_open, high_open = _bound(schema, "exclusiveMinimum"), _bound(schema, "exclusiveMaximum")
    if low is not None and high is not None:
        return f"{text} {_value(low)}..{_value(high)}"
    said = [f">={_value(low)}" if low is not None else "", f">{_value(low_open)}" if low_open is not None else ""]
    said += [f"<={_value(high)}" if high is not None else "", f"<{_value(high_open)}" if high_open is not None else ""]
    return " ".join([text, *(s for s in said if s)])


def _bound(schema: Mapping[str, Any], key: str) -> int | float | None:
    value = schema.get(key)
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _value(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
