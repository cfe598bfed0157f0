"""Typed Python stubs of catalog tools, for code mode: what a script is written and type-checked against.

Each tool becomes `async def NAME(*, arg: type = default, ...) -> ReturnType` with keyword-only
parameters, `Literal` enums, its defaults and a one-paragraph docstring; the return type is a
TypedDict made from the tool's output description (keys exactly as the API sends them, so a key
that is not an identifier, like "05. price", uses TypedDict's functional form). Example::

    print(tool_stubs([catalog.get("GLOBAL_QUOTE")]))
    # GlobalQuote = TypedDict("GlobalQuote", {"Global Quote": GlobalQuoteData})
    # async def GLOBAL_QUOTE(*, symbol: str, entitlement: Literal["delayed", "realtime"] | None = None) -> ...
"""

from __future__ import annotations

import hashlib
import json
import keyword
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from progressive_mcp.catalog import CatalogTool, Param, _thaw
from progressive_mcp.schema_excerpt import OUTPUT_VIEW_TOKENS
from progressive_mcp.tokens import fits_budget

PARAM_TYPES = {"string": "str", "integer": "int", "number": "float", "boolean": "bool"}
JSON_TYPES = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "null": "None"}
TYPING_NAMES = ("Any", "Literal", "NotRequired", "TypedDict")
CLASH_DIGITS = 8  # hex digits of a tool name's SHA-256 that tell apart tools whose Python names would be the same
DOC_CHARS = 160  # a docstring is one paragraph: the summary and the start of the description
# One tool's stub (its function and the types only it needs) fits in this many tokens, as JSON text (how TOOL_GET
# sends it), leaving room in a TOOL_GET answer's 2,500 for the rest; deeper parts collapse to `dict[str, Any]`
# until it fits.
STUB_TOKENS = 2_300
MAX_TITLE_NAME = 40  # a schema's title names its class when it makes a name this short (not a sentence)
DEPTHS = (0, 1, 2, 3, 4, 6, None)  # nesting of types tried, from the top level only to whole
# Code mode always asks for JSON (what the return types describe); a script never chooses CSV.
FORCED_JSON_PARAM = "datatype"


def python_name(tool_name: str) -> str:
    """A tool's name as a Python identifier: "artist.getInfo" → "artist_getInfo" (UPPER_SNAKE names stay)."""
    name = re.sub(r"\W", "_", tool_name)
    if name[0].isdigit() or keyword.iskeyword(name):
        name = f"_{name}"
    return name


def python_names(tool_names: Iterable[str]) -> dict[str, str]:
    """Each tool name → its function name in code mode, unique among `tool_names` (give all the tools a script
    may see, so a name does not depend on which of them one answer shows). It is `python_name`, unless several
    tools' would be the same ("aws.docs_search" and "aws-docs.search" both make `aws_docs_search`): then each of
    them ends in `_` and hex digits of its own name's SHA-256, so every function reaches the tool it names, and
    keeps its name from sync to sync while the clash lasts."""
    names = list(dict.fromkeys(tool_names))
    plain = {n: python_name(n) for n in names}
    counts: dict[str, int] = {}
    for name in plain.values():
        counts[name] = counts.get(name, 0) + 1
    taken = {p for p in plain.values() if counts[p] == 1}
    result = {}
    for name in names:
        if counts[plain[name]] == 1:
            result[name] = plain[name]
            continue
        digest = hashlib.sha256(name.encode()).hexdigest()
        width = CLASH_DIGITS
        while f"{plain[name]}_{digest[:width]}" in taken:  # a tool already named so: more digits
            width += 1
        result[name] = f"{plain[name]}_{digest[:width]}"
        taken.add(result[name])
    return result


def clashing_names(names: Mapping[str, str]) -> dict[str, list[str]]:
    """The `python_name`s that several tools share → those tools (by `python_names`' answer `names`): a script
    that calls one is told which names to use instead."""
    clashes: dict[str, list[str]] = {}
    for tool, function in names.items():
        if function != python_name(tool):
            clashes.setdefault(python_name(tool), []).append(tool)
    return clashes


def forced_json(tool: CatalogTool) -> bool:
    """Whether the tool has a `datatype` switch that code mode pins to json (so stubs leave it out)."""
    param = tool.param(FORCED_JSON_PARAM)
    return param is not None and param.enum is not None and "json" in param.enum


def tool_stubs(tools: Iterable[CatalogTool], names: Mapping[str, str] | None = None) -> str:
    """A stub module declaring `tools` and the return types they need (each type declared once); `names`: the
    function name of each tool (`python_names` over all the tools of the surface; default: over `tools`)."""
    tools = list(tools)
    names = names if names is not None else python_names(t.name for t in tools)
    writer = _StubWriter(functions={names.get(t.name) or python_name(t.name) for t in tools}, names=names)
    functions = [writer.bounded_function(tool) for tool in tools]
    body = "".join(f"\n{d}\n" for d in writer.declarations) + "".join(f"\n\n{f}" for f in functions)
    used = [name for name in TYPING_NAMES if re.search(rf"\b{name}\b", body)]  # import what is used, no more
    return (f"from typing import {', '.join(used)}\n" if used else "") + body


@dataclass
class _StubWriter:
    """Turns output schemas into TypedDict declarations (named after $defs, or after the tool and key path)."""

    declarations: list[str] = field(default_factory=list)
    functions: set[str] = field(default_factory=set)  # the module's function names: no type may take one
    names: Mapping[str, str] = field(default_factory=dict)  # tool name → its function name
    _declared: dict[str, str] = field(default_factory=dict)  # type name -> its declaration, to reuse and dedupe
    max_depth: int | None = None  # types nested deeper than this are `dict[str, Any]` / `list[Any]`

    def bounded_function(self, tool: CatalogTool) -> str:
        """The tool's function, its types nested only as deep as fits: the return type's declarations within what
        the JSON-schema view allows the same output schema (OUTPUT_VIEW_TOKENS, so a stub costs no more than the
        schema it replaces), then the whole stub, the types it adds included, within STUB_TOKENS."""
        start = len(self.declarations)
        output = _thaw(tool.output_schema) if tool.output_schema is not None else None
        returns = self._deepest(lambda: self._returns(output, tool), OUTPUT_VIEW_TOKENS, len(self.declarations))
        return self._deepest(lambda: self._signature(tool, returns), STUB_TOKENS, start)

    def _deepest(self, make: Callable[[], str], budget: int, since: int) -> str:
        """What `make` writes at the deepest nesting of DEPTHS whose text, after the declarations added since
        `since`, fits `budget` tokens as JSON text (how TOOL_GET sends it); the top level only if none does. Tried
        from the top level down, stopping at the first that does not fit (deeper only adds), so a large schema is
        never written whole only to be thrown away."""
        mark, declared = len(self.declarations), dict(self._declared)
        best: tuple[str, list[str], dict[str, str]] | None = None
        for depth in DEPTHS:
            self.max_depth = depth
            made = make()
            text = "\n".join([*self.declarations[since:], made])
            fits = fits_budget(json.dumps(text, ensure_ascii=False), budget)
            if best is None or fits:
                best = (made, self.declarations[mark:], dict(self._declared))
            del self.declarations[mark:]  # forget what this try declared; the best one is put back below
            self._declared = dict(declared)
            if not fits:
                break
        self.max_depth = None
        assert best is not None
        made, added, self._declared = best
        self.declarations.extend(added)
        return made

    def _returns(self, schema: Mapping[str, Any] | None, tool: CatalogTool) -> str:
        if schema is None:
            return "Any"
        return self._type(schema, _titled(schema, _camel(tool.name)), schema.get("$defs", {}))

    def _signature(self, tool: CatalogTool, returns: str) -> str:
        params = [p for p in tool.params if not (p.name == FORCED_JSON_PARAM and forced_json(tool))]
        ordered = [p for p in params if p.required] + [p for p in params if not p.required]
        arguments = ", ".join(self._parameter(p, tool) for p in ordered)
        function = self.names.get(tool.name) or python_name(tool.name)
        signature = (
            f"async def {function}(*, {arguments}) -> {returns}:"
            if arguments
            else (f"async def {function}() -> {returns}:")
        )
        quotes = "'" * 3  # not double quotes: stubs travel inside JSON strings, where each one costs an escape
        return f"{signature}\n    {quotes}{_docstring(tool)}{quotes}\n    ..."

    def _parameter(self, param: Param, tool: CatalogTool) -> str:
        """`name: type = default`: scalars from the parameter, anything else (arrays, objects, a request body)
        from its whole schema."""
        if param.enum is not None:
            kind = f"Literal[{', '.join(_literal(v) for v in param.enum)}]"
        elif param.type in PARAM_TYPES:
            kind = PARAM_TYPES[param.type]
        elif param.schema is not None:
            kind = self._type(_thaw(param.schema), _camel(f"{tool.name} {param.name}"), {}, 1)
        else:
            kind = "Any"
        return _parameter_line(param, kind)

    def _type(self, schema: Mapping[str, Any], hint: str, defs: Mapping[str, Any], depth: int = 0) -> str:
        """`depth`: how many object or array types enclose this one (past `max_depth`, they are not spelled)."""
        if "$ref" in schema:
            name = str(schema["$ref"]).rsplit("/", 1)[-1]
            return self._named(_camel(name), defs[name], defs)
        if "enum" in schema:
            return f"Literal[{', '.join(_literal(v) for v in schema['enum'])}]"
        parts = schema.get("allOf")
        if isinstance(parts, list) and len(parts) == 1 and isinstance(parts[0], Mapping):  # a $ref with a note
            return self._type(parts[0], _titled(parts[0], hint), defs, depth)
        for union in ("anyOf", "oneOf"):
            if isinstance(schema.get(union), list):
                members = schema[union]
                hints = _member_hints(members, hint)
                return _union(*(self._type(m, h, defs, depth) for m, h in zip(members, hints, strict=True)))
        kinds = schema.get("type")
        listed = kinds if isinstance(kinds, list) else [kinds]
        deep = self.max_depth is not None and depth > self.max_depth
        types = []
        for kind in listed:
            if kind == "object":
                types.append("dict[str, Any]" if deep else self._object(schema, hint, defs, depth=depth + 1))
            elif kind == "array":
                items = schema.get("items")
                item = "Any"
                if isinstance(items, dict) and (not deep or not _composite(items)):  # list[str] costs nothing
                    item = self._type(items, _titled(items, f"{hint}Item"), defs, depth + 1)
                types.append(f"list[{item}]")
            else:
                types.append(JSON_TYPES.get(str(kind), "Any"))
        return _union(*types)

    def _named(self, name: str, schema: Mapping[str, Any], defs: Mapping[str, Any]) -> str:
        """A shared output's type: a TypedDict under the shared name, or an alias of what it describes
        (the spec forbids a shared output that uses itself, so this cannot loop)."""
        name = self._not_a_function(name)
        if name in self._declared:
            return name
        if (
            schema.get("type") == "object"
            and schema.get("properties")
            and schema.get("additionalProperties")
            in (
                None,
                False,
            )
        ):
            return self._object(schema, name, defs, exact=True)
        target = self._type(schema, name, defs)
        if name not in self._declared:
            self._declare(name, f"{name} = {target}")
        return name

    def _object(
        self, schema: Mapping[str, Any], hint: str, defs: Mapping[str, Any], *, exact: bool = False, depth: int = 0
    ) -> str:
        properties: Mapping[str, Any] = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        if not properties:
            if isinstance(extra, dict):
                return f"dict[str, {self._type(extra, f'{hint}Value', defs, depth)}]"
            return "dict[str, Any]"
        if extra not in (None, False):  # fixed keys and others besides: no TypedDict can say that
            return "dict[str, Any]"
        required = set(schema.get("required") or ())
        fields = {}
        for key, member in properties.items():
            keyed_by_data = not member.get("properties") and isinstance(member.get("additionalProperties"), dict)
            # A map keyed by data (dates, symbols) names its entries after the parent ("SmaValue"), not the key.
            member_hint = hint if keyed_by_data else _titled(member, hint + _camel(key))
            member_type = self._type(member, member_hint, defs, depth)
            fields[key] = member_type if key in required else f"NotRequired[{member_type}]"
        hint = self._not_a_function(hint)
        if all(key.isidentifier() and not keyword.iskeyword(key) for key in fields):
            body = "\n".join(f"    {key}: {kind}" for key, kind in fields.items())
            declare = "class {name}(TypedDict):\n" + body.replace("{", "{{").replace("}", "}}")
        else:
            members = ", ".join(f"{_literal(key)}: {kind}" for key, kind in fields.items())
            declare = "{name} = TypedDict('{name}', {{" + members.replace("{", "{{").replace("}", "}}") + "}})"
        if not exact and self._declared.get(hint) == declare.format(name=hint):
            return hint  # the same schema met again (a Customer in two answers): one declaration
        name = hint if exact or hint not in self._declared else self._fresh(hint, declare)
        if name in self._declared and self._declared[name] == declare.format(name=name):
            return name
        self._declare(name, declare.format(name=name))
        return name

    def _declare(self, name: str, text: str) -> None:
        self._declared[name] = text
        self.declarations.append(text)

    def _not_a_function(self, name: str) -> str:
        """A type name that is not one of the module's functions ("T3", the indicator, returns `T3Data`)."""
        return f"{name}Data" if name in self.functions else name

    def _fresh(self, hint: str, declare: str = "") -> str:
        """`hint` and the first free number, or the numbered name already declared exactly so."""
        number = 2
        while f"{hint}{number}" in self._declared:
            if declare and self._declared[f"{hint}{number}"] == declare.format(name=f"{hint}{number}"):
                break
            number += 1
        return f"{hint}{number}"


def _parameter_line(param: Param, kind: str) -> str:
    if param.required:
        return f"{param.name}: {kind}"
    if param.default is not None:
        return f"{param.name}: {kind} = {_literal(param.default)}"
    return f"{param.name}: {kind} | None = None"


def _literal(value: Any) -> str:
    """A JSON scalar as Python source: 'a', 5, 1.5, True, None. Single quotes, because stubs travel inside JSON
    strings, where every double quote costs an escape (and tokens)."""
    return repr(value)


def _docstring(tool: CatalogTool) -> str:
    text = tool.summary if tool.description.startswith(tool.summary) else f"{tool.summary} {tool.description}"
    text = " ".join(text.split()).replace("\\", "\\\\").replace("'''", "\\'\\'\\'")
    return text if len(text) <= DOC_CHARS else text[: DOC_CHARS - 1].rsplit(" ", 1)[0] + " …"


def _camel(text: str) -> str:
    """ "Time Series (Daily)" → "TimeSeriesDaily"; "GLOBAL_QUOTE" → "GlobalQuote"; "05. price" → "Price"."""
    words = [w for w in re.split(r"[^A-Za-z0-9]+", text) if w and not w.isdigit()]
    name = "".join(w[:1].upper() + (w[1:].lower() if w.isupper() else w[1:]) for w in words)
    return name if name and name[0].isalpha() else f"T{name}"


def _member_hints(members: list[Any], hint: str) -> list[str]:
    """The type names of a union's members: each one's own `title` (the schema it came from, "Customer",
    "DeletedCustomer") when the members' titles are distinct, else the parent's name and the option's number."""
    titles = [m.get("title") if isinstance(m, Mapping) else None for m in members]
    named = [_camel(t) if isinstance(t, str) and len(_camel(t)) <= MAX_TITLE_NAME else None for t in titles]
    if all(named) and len(set(named)) == len(named):
        return [n for n in named if n]
    return [_titled(m, f"{hint}Option{i}") for i, m in enumerate(members)]


def _composite(schema: Mapping[str, Any]) -> bool:
    """Whether a schema's type would spell members (an object, an array, a union)."""
    kinds = schema.get("type")
    listed = kinds if isinstance(kinds, list) else [kinds]
    return "enum" not in schema and (any(k in ("object", "array", None) for k in listed) or "anyOf" in schema
                                     or "oneOf" in schema)  # fmt: skip


def _titled(schema: Any, fallback: str) -> str:
    title = schema.get("title") if isinstance(schema, Mapping) else None
    return _camel(title) if isinstance(title, str) and len(_camel(title)) <= MAX_TITLE_NAME else fallback


def _union(*types: str) -> str:
    unique = list(dict.fromkeys(t for t in types if t))
    return " | ".join(unique) if unique else "Any"
