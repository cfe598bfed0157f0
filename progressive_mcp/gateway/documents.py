"""Tool documents: one per tool a server lists, with its public name and content hash (the sync key).

The hash is a SHA-256 over the name, description, arguments (the input schema), output schema, title and
annotations (ScaleMCP's fields, and ours), each encoded as JSON: each of those changes what an agent is shown or may
do, so each is a change to re-index and, for a pinned server, to approve. Example::

    doc = ToolDocument.of("memory", {"name": "read_graph", "description": "...", "inputSchema": {...}})
    doc.public_name            # 'memory.read_graph'
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from progressive_mcp.gateway.limits import bound_definition
from progressive_mcp.search.hints import listed as listed_hints

MAX_TOOL_NAME = 128  # MCP's limit on a tool name
_NOT_NAME = re.compile(r"[^A-Za-z0-9_.-]+")
_HASHED_SUFFIX = 9  # "_" and 8 hex digits, added when a name had to be cut or would collide


def tool_hash(definition: Mapping[str, Any]) -> str:
    """The SHA-256 (hex) of a tool definition's name, description, input schema, output schema, title and
    annotations (and its search hints, `search.hints`, when it has them), as one sorted compact JSON array: each
    field is encoded on its own (a `|` in a description is a character, not a separator), so two different
    definitions never hash alike."""
    fields = [
        str(definition.get("name", "")),
        str(definition.get("description") or ""),
        definition.get("inputSchema") or {},
        definition.get("outputSchema"),
        str(definition.get("title") or ""),
        definition.get("annotations"),
    ]
    hints = listed_hints(definition)
    if hints is not None:  # a progressive-mcp server's search hints; absent, the hash is as it always was
        fields.append(hints)
    return hashlib.sha256(_canonical(fields).encode()).hexdigest()


def legacy_tool_hash(definition: Mapping[str, Any]) -> str:
    """The hash stores of schema 1 hold (the fields joined with an unescaped `|`): kept to migrate them."""
    parts = [
        str(definition.get("name", "")),
        str(definition.get("description") or ""),
        _canonical(definition.get("inputSchema") or {}),
        _canonical(definition.get("outputSchema")),
        str(definition.get("title") or ""),
        _canonical(definition.get("annotations")),
    ]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class ToolDocument:
    """A tool as one server lists it: `definition` is its wire JSON (tools/list) within the gateway's bounds
    (`limits`), `hash` the `tool_hash` of the definition as listed, before any cut."""

    server: str
    name: str  # the server's own name for it
    public_name: str  # the name agents see: SERVER.TOOL
    definition: Mapping[str, Any]
    hash: str
    notes: tuple[str, ...] = field(default=(), compare=False)  # what `limits` cut (not stored: made at each sync)

    @classmethod
    def of(cls, server: str, definition: Mapping[str, Any], public_name: str | None = None) -> ToolDocument:
        name = str(definition["name"])
        bounded, cuts = bound_definition(definition)  # hashed before the cut: a change past it is a change
        public = public_name or public_names(server, [name])[name]
        return cls(server, name, public, bounded, tool_hash(definition), tuple(cuts))


def documents(server: str, definitions: Iterable[Mapping[str, Any]]) -> list[ToolDocument]:
    """The documents of one server's tools, named by `public_names`."""
    listed = list(definitions)
    names = public_names(server, [str(d["name"]) for d in listed])
    return [ToolDocument.of(server, d, names[str(d["name"])]) for d in listed]


def public_names(server: str, names: Iterable[str]) -> dict[str, str]:
    """Each tool name → the name agents see: `SERVER.TOOL`, where TOOL keeps MCP's name characters (letters,
    digits, `_`, `-`, `.`) and any other run of characters becomes `_`. A name longer than MCP's 128 characters,
    or one that would equal another's after that, is cut and ends in `_` and 8 hex digits of its own SHA-256, so
    two servers' `search` tools are `a.search` and `b.search`, and names are stable from sync to sync."""
    names = list(dict.fromkeys(names))
    plain = {n: f"{server}.{_NOT_NAME.sub('_', n).strip('_') or '_'}" for n in names}
    taken: dict[str, int] = {}
    for public in plain.values():
        taken[public] = taken.get(public, 0) + 1
    result = {}
    for name, public in plain.items():
        if len(public) > MAX_TOOL_NAME or taken[public] > 1:
            digest = hashlib.sha256(name.encode()).hexdigest()[:8]
            public = f"{public[: MAX_TOOL_NAME - _HASHED_SUFFIX]}_{digest}"
        result[name] = public
    return result
