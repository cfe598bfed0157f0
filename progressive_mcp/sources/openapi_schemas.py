"""OpenAPI schema objects made self-contained JSON Schema 2020-12 (`SchemaConverter`): references inlined, breadth
first and bounded (MAX_SCHEMA_NODES objects, MAX_DEPTH levels, recursion cut with a note), OpenAPI 3.0's `nullable`,
boolean `exclusiveMinimum`, `example` and Swagger's `x-nullable` translated, read-only members left out of requests
and write-only members out of answers; self-contradicting enums and defaults coerced to the declared type."""

from __future__ import annotations

import json
import re
from collections import deque
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import unquote

from progressive_mcp.sources.openapi_documents import Place, Problem, Resolver
from progressive_mcp.sources.openapi_prose import trim

MAX_INNER_DESCRIPTION = 200  # a property's description inside a schema
MAX_DEPTH = 8  # nesting of objects and arrays kept in a schema; deeper parts are cut with a note
# Schema objects kept for one tool's arguments, and for its answer; the rest are cut with a note. OpenAI's chat
# completion body inlines to ~30,000 tokens without it; with it, the largest tool definition is ~5,000.
MAX_SCHEMA_NODES = 300
CUT_NOTE = "(not expanded here: nested too deeply or too large)"
MAX_CUT_ENUM = 10  # a cut scalar keeps an enum this short: it may be what tells a union's options apart
JSON_KEYWORDS = frozenset(
    {
        "type", "enum", "const", "default", "format", "pattern", "minimum", "maximum", "exclusiveMinimum",
        "exclusiveMaximum", "multipleOf", "minLength", "maxLength", "minItems", "maxItems", "uniqueItems",
        "minProperties", "maxProperties", "required", "properties", "additionalProperties", "items", "prefixItems",
        "allOf", "oneOf", "anyOf", "not", "title", "description", "examples", "deprecated", "patternProperties",
        "contentMediaType", "contentEncoding",
    }
)  # fmt: skip
SCHEMA_LISTS = ("allOf", "oneOf", "anyOf", "prefixItems")


@dataclass(frozen=True, slots=True)
class _Pending:
    """A schema object waiting its turn in the breadth-first conversion, and the dict its output goes into."""

    node: Any
    at: Place
    depth: int
    stack: tuple[str, ...]  # the $refs being expanded above it (to cut recursion)
    out: dict[str, Any]


class SchemaConverter:
    """OpenAPI schema objects → self-contained JSON Schema 2020-12 (references inlined, bounded)."""

    def __init__(self, refs: Resolver, dialect: Literal["2.0", "3.0", "3.1"], notes: list[str]) -> None:
        self.refs = refs
        self.dialect = dialect
        self.notes = notes
        self.cut = 0
        self.operation = ""  # the operation being converted, for notes
        self.coerced: dict[str, str] = {}  # place → note, for enums and defaults read as their declared type
        # A schema converted with a budget of its own (an answer's), by where it is and what $ref led there: the
        # conversion is a function of these alone, so operations sharing an answer (DigitalOcean: 546 answers, 395
        # schemas) convert it once. With the parts it cut, which count again at every use.
        self._whole: dict[tuple[str, str, str | None, str], tuple[dict[str, Any], int]] = {}

    def convert(
        self, node: Any, at: Place, side: Literal["request", "response"], budget: list[int] | None = None
    ) -> dict[str, Any]:
        """`budget`: schema objects left for the tool (shared by all its arguments), counted down. The budget is
        spent breadth first: every member of the top object is described (with its type) before any member's
        members, so what a cut loses is the deepest parts, not the last fields. Without a budget, a fresh one:
        the result is converted once per place (`_whole`). The top object returned is the caller's to change;
        what it holds is shared and must not be changed."""
        if budget is not None:
            return self._convert(node, at, side, budget)
        try:
            _, place, target = self.refs.deref(node, at)
        except Problem:
            return self._convert(node, at, side, [MAX_SCHEMA_NODES])  # raises the same problem, where it is
        key = (place.uri, place.pointer, target, side)
        known = self._whole.get(key)
        if known is None:
            cut = self.cut
            converted = self._convert(node, at, side, [MAX_SCHEMA_NODES])
            known = self._whole[key] = (converted, self.cut - cut)
        else:
            # Its notes (`coerced`) were taken the first time, at the same places; a later use adds none.
            self.cut += known[1]
        return dict(known[0])

    def _convert(self, node: Any, at: Place, side: Literal["request", "response"], budget: list[int]) -> dict[str, Any]:
        self.dropped: dict[int, set[str]] = {}  # id() of an object → its members left out as read/write-only
        root: dict[str, Any] = {}
        pending: deque[_Pending] = deque([_Pending(node, at, 0, (), root)])
        filled: list[tuple[dict[str, Any], dict[str, Any], Place]] = []
        while pending:
            done = self._fill(pending.popleft(), side, budget, pending)
            if done is not None:
                filled.append(done)
        for raw, out, place in reversed(filled):  # members before the objects that hold them, as depth first would
            self._finish(raw, out, place)
        return root

    def _fill(
        self, task: _Pending, side: str, budget: list[int], pending: deque[_Pending]
    ) -> tuple[dict[str, Any], dict[str, Any], Place] | None:
        """Converts one schema object into `task.out`, queueing its subschemas (each an empty dict in place,
        filled when its turn comes); returns (the object, its output, its place) when it needs finishing."""
        node, at, target = self.refs.deref(task.node, task.at)
        depth, stack, out = task.depth, task.stack, task.out
        name = target.rsplit("/", 1)[-1] if target else None
        if target is not None and target in stack:
            self.cut += 1
            out.update({"type": "object", "description": f"A {name} (recursive; not expanded further)."})
            return None
        if node is True or node == {}:
            return None
        if node is False:
            out["not"] = {}
            return None
        if not isinstance(node, dict):
            raise Problem(f"a schema must be an object, not {type(node).__name__} ({at.where(self.refs.root_uri)})")
        budget[0] -= 1
        if depth > MAX_DEPTH or budget[0] < 0:
            self.cut += 1
            out.update(self._cut(node, at))
            return None
        stack = (*stack, target) if target else stack

        def later(sub: Any, sub_at: Place) -> dict[str, Any]:
            placeholder: dict[str, Any] = {}
            pending.append(_Pending(sub, sub_at, depth + 1, stack, placeholder))
            return placeholder

        for key, value in node.items():
            if key in ("properties", "patternProperties"):
                value, members_at, _ = self.refs.deref(value, at.child(key))  # a whole map may be a $ref
                if not isinstance(value, dict):
                    raise Problem(f"{key} must be an object ({members_at.where(self.refs.root_uri)})")
                props = {}
                for prop, sub in value.items():
                    resolved, _, _ = self.refs.deref(sub, members_at.child(prop))
                    if isinstance(resolved, dict) and resolved.get("readOnly" if side == "request" else "writeOnly"):
                        self.dropped.setdefault(id(out), set()).add(prop)
                        continue
                    props[prop] = later(sub, members_at.child(prop))
                out[key] = props
            elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
                out[key] = later(value, at.child(key))
            elif key == "items" and isinstance(value, list):  # Swagger/OpenAPI 3.0 never allow it; JSON Schema 4 did
                out["prefixItems"] = [later(v, at.child(key, i)) for i, v in enumerate(value)]
            elif key in SCHEMA_LISTS and isinstance(value, list):
                out[key] = [later(v, at.child(key, i)) for i, v in enumerate(value)]
            elif key == "description" and isinstance(value, str):
                out[key] = trim(value, MAX_INNER_DESCRIPTION)
            elif key == "required" and isinstance(value, list):
                out[key] = list(dict.fromkeys(v for v in value if isinstance(v, str)))
            elif key == "type" and isinstance(value, str | list):
                out[key] = "string" if value == "file" else value  # Swagger's file (a form upload)
            elif key in JSON_KEYWORDS and key not in ("examples", "exclusiveMinimum", "exclusiveMaximum"):
                out[key] = value
        if name and "title" not in out and ("properties" in out or out.get("type") == "object"):
            out["title"] = _component_name(name)  # what code-mode stubs name its class ("Customer")
        return node, out, at

    def _cut(self, node: dict[str, Any], at: Place) -> dict[str, Any]:
        """What stands for a part left out: its type (a union's member types), so a field keeps its type."""
        cut: dict[str, Any] = {"description": CUT_NOTE}
        kinds: list[str] = []
        for member in [node] if "type" in node else [m for k in ("anyOf", "oneOf") for m in node.get(k) or []]:
            try:
                resolved, _, _ = self.refs.deref(member, at)
            except Problem:
                return cut
            kind = resolved.get("type") if isinstance(resolved, dict) else None
            if kind is None:  # a member of unknown type: no type can be said for the whole
                return cut
            for one in kind if isinstance(kind, list) else [kind]:
                one = "string" if one == "file" else str(one)
                if one not in kinds:
                    kinds.append(one)
        if (node.get("nullable") is True or node.get("x-nullable") is True) and kinds and "null" not in kinds:
            kinds.append("null")
        if kinds:
            cut["type"] = kinds[0] if len(kinds) == 1 else kinds
        if kinds and not {"object", "array"} & set(kinds):  # a scalar loses nothing a caller must know: no note
            del cut["description"]
            if isinstance(node.get("format"), str):
                cut["format"] = node["format"]
            enum = node.get("enum")
            if "const" in node and _of_type(node["const"], kinds):
                cut["const"] = node["const"]
            elif isinstance(enum, list) and 0 < len(enum) <= MAX_CUT_ENUM and all(_of_type(v, kinds) for v in enum):
                cut["enum"] = enum
        return cut

    def _finish(self, node: dict[str, Any], out: dict[str, Any], at: Place) -> None:
        """What needs an object's members converted first: translations, merged `allOf`s, `required`."""
        self._coerce(out, at)
        self._translate(node, out)
        _merge_all_of(out)
        _close_over_parts(out)
        if "properties" in out and "required" in out:  # members dropped as read/write-only are not required
            dropped = self.dropped.get(id(out), set())
            others = out.get("additionalProperties", False) is not False  # a required name may come as another
            out["required"] = [r for r in out["required"] if r in out["properties"] or (others and r not in dropped)]
            if not out["required"]:
                del out["required"]

    def _coerce(self, out: dict[str, Any], at: Place) -> None:
        """An `enum` or `default` that contradicts the schema's own `type` (`type: integer` with `enum: ["1",
        "2"]`, a common slip that would make every value invalid) converted to that type when the conversion is
        exact, else dropped, and a length bound that the enum's own strings break dropped; either way a note names
        the operation and the place (once per place)."""
        kinds = out.get("type")
        kinds = [kinds] if isinstance(kinds, str) else kinds
        if not isinstance(kinds, list) or not kinds or ("enum" not in out and "default" not in out):
            return
        changes = []
        if isinstance(out.get("enum"), list) and any(not _of_type(v, kinds) for v in out["enum"] if v is not None):
            converted = [v if v is None else _as_type(v, kinds) for v in out["enum"]]
            if any(v is _INEXACT for v in converted):
                changes.append(f"enum {_short(out.pop('enum'))} dropped (not all {'/'.join(kinds)})")
            else:
                changes.append(f"enum {_short(out['enum'])} read as {_short(converted)}")
                out["enum"] = list(dict.fromkeys(converted))
        if "default" in out and out["default"] is not None and not _of_type(out["default"], kinds):
            converted_default = _as_type(out["default"], kinds)
            if converted_default is _INEXACT:
                changes.append(f"default {_short(out.pop('default'))} dropped (not {'/'.join(kinds)})")
            else:
                changes.append(f"default {_short(out['default'])} read as {_short(converted_default)}")
                out["default"] = converted_default
        if isinstance(out.get("enum"), list) and any(isinstance(v, str) and v != v.strip() for v in out["enum"]):
            # Ticketmaster's ["yes", " no"] (a list split at commas): the API takes "no", which the enum would refuse
            stripped = list(dict.fromkeys(v.strip() if isinstance(v, str) and v.strip() else v for v in out["enum"]))
            changes.append(f"enum {_short(out['enum'])} read as {_short(stripped)} (spaces around values)")
            out["enum"] = stripped
        texts = [v for v in out.get("enum") or () if isinstance(v, str)]
        for bound, broken in (
            ("maxLength", lambda n: max(map(len, texts)) > n),
            ("minLength", lambda n: min(map(len, texts)) < n),
        ):
            if texts and isinstance(out.get(bound), int) and broken(out[bound]):  # Adyen: "MALE" within maxLength 1
                changes.append(f"{bound} {out.pop(bound)} dropped (its own enum {_short(out['enum'])} breaks it)")
        where = at.where(self.refs.root_uri)
        if changes and where not in self.coerced:
            self.coerced[where] = f"{self.operation}: {where} is {'/'.join(kinds)}: {'; '.join(changes)}"

    def _translate(self, node: dict[str, Any], out: dict[str, Any]) -> None:
        """The OpenAPI 3.0 / Swagger keywords that JSON Schema 2020-12 spells differently."""
        for bound in ("Minimum", "Maximum"):
            exclusive = node.get(f"exclusive{bound}")
            if isinstance(exclusive, bool):  # 3.0/2.0: a flag on minimum/maximum
                value = node.get(bound.lower())
                if exclusive and isinstance(value, int | float):
                    out[f"exclusive{bound}"] = value
                    out.pop(bound.lower(), None)
            elif isinstance(exclusive, int | float):
                out[f"exclusive{bound}"] = exclusive
        if self.dialect == "3.1" and isinstance(node.get("examples"), list):
            pass  # examples are left out of schemas: they cost tokens on every TOOL_GET
        options = out.get("oneOf")
        if isinstance(options, list):
            # A document's oneOf is read as anyOf: "one of these shapes". JSON Schema's "exactly one option fits"
            # refuses a value the API takes wherever two options may fit it: where the discriminator is what
            # chooses (options that extend one another, as DigitalOcean's droplet_action and its snapshot form,
            # both fit every value), where a cut option is looser than the document's, and where the document's
            # options overlap (PagerDuty's custom field value: its Float and Integer forms both fit 3, its "by
            # name" and "by id" forms both fit a value with neither). Where the options cannot overlap, anyOf
            # accepts and refuses the same values. The upstream still judges what it is sent.
            del out["oneOf"]
            if "anyOf" in out:  # both: each must hold
                out["allOf"] = [*out.get("allOf", []), {"anyOf": options}]
            else:
                out["anyOf"] = options
        nullable = node.get("nullable") is True or node.get("x-nullable") is True
        if nullable and self.dialect != "3.1":
            kind = out.get("type")
            if isinstance(kind, str):
                out["type"] = [kind, "null"]
                if "enum" in out and None not in out["enum"]:
                    out["enum"] = [*out["enum"], None]
            elif kind is None:
                inner = dict(out)
                out.clear()
                out["anyOf"] = [inner, {"type": "null"}]


_INEXACT = object()  # a value with no exact equivalent in the declared type
_JSON_TYPES: dict[str, Any] = {"string": str, "integer": int, "number": int | float, "boolean": bool, "object": dict,
                               "array": list, "null": type(None)}  # fmt: skip
_INTEGER_TEXT = re.compile(r"^[+-]?\d+$")


def _component_name(ref_tail: str) -> str:
    """The name a `$ref` gives what it points at: "Customer" from `#/components/schemas/Customer`, "droplet"
    from `models/droplet.yml`."""
    return re.sub(r"\.(ya?ml|json)$", "", unquote(ref_tail), flags=re.IGNORECASE)


def _of_type(value: Any, kinds: list[str]) -> bool:
    if isinstance(value, bool):
        return "boolean" in kinds
    if isinstance(value, float) and value.is_integer() and "integer" in kinds:
        return False  # 2.0 for an integer: read as 2
    return any(kind in _JSON_TYPES and isinstance(value, _JSON_TYPES[kind]) for kind in kinds)


def _as_type(value: Any, kinds: list[str]) -> Any:
    """`value` as the first of `kinds` it converts to exactly ("4" → 4, 2.0 → 2, "true" → True, 7 → "7"), or
    _INEXACT."""
    for kind in kinds:
        if kind == "integer":
            if isinstance(value, str) and _INTEGER_TEXT.match(value.strip()):
                return int(value.strip())
            if isinstance(value, float) and value.is_integer():
                return int(value)
        elif kind == "number" and isinstance(value, str):
            try:
                number = float(value) if any(c in value for c in ".eE") else int(value)
            except ValueError:
                continue
            if isinstance(number, int) or (number == number and abs(number) != float("inf")):
                return number
        elif kind == "boolean" and isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        elif kind == "string" and isinstance(value, bool):
            return "true" if value else "false"
        elif kind == "string" and isinstance(value, int | float):
            return str(value)
    return _INEXACT


def _short(value: Any) -> str:
    return trim(json.dumps(value, default=str), 80)


def _close_over_parts(schema: dict[str, Any]) -> None:
    """`additionalProperties: false` counts only the object's own `properties`, so where its members come from
    parts (`anyOf`/`oneOf`/`allOf` members declaring them), it refuses every value: PeerTube's `importVideo` body is
    allOf [{additionalProperties: false, anyOf: [{targetUrl}, {magnetUri}, {torrentfile}]}, {name, channelId,
    ...}]. What such a document means is JSON Schema's `unevaluatedProperties: false`, which counts the members the
    parts declare: an object closed over its own parts becomes that, and a closed part of an `allOf` whose siblings
    declare other members opens, the closure moving to the whole."""
    own = set(schema.get("properties") or {})
    if schema.get("additionalProperties") is False and _part_names(schema) - own:
        del schema["additionalProperties"]
        schema["unevaluatedProperties"] = False
    parts = schema.get("allOf")
    if not isinstance(parts, list) or len(parts) < 2:
        return
    declared = [_declared(part) if isinstance(part, dict) else set() for part in parts]
    opened = False
    for i, part in enumerate(parts):
        if not isinstance(part, dict):
            continue
        closure = next(
            (key for key in ("additionalProperties", "unevaluatedProperties") if part.get(key) is False), None
        )
        others = set().union(*(names for j, names in enumerate(declared) if j != i))
        if closure is not None and others - declared[i]:
            del part[closure]
            opened = True
    if opened and "additionalProperties" not in schema:
        schema["unevaluatedProperties"] = False


def _part_names(schema: dict[str, Any]) -> set[str]:
    """The member names that an object's `anyOf`/`oneOf`/`allOf` members declare, at any depth of such members."""
    names: set[str] = set()
    for key in ("anyOf", "oneOf", "allOf"):
        for member in schema.get(key) or ():
            if isinstance(member, dict):
                names |= _declared(member)
    return names


def _declared(schema: dict[str, Any]) -> set[str]:
    """The member names an object declares: its own `properties` and its parts' (`_part_names`)."""
    return set(schema.get("properties") or {}) | _part_names(schema)


def _merge_all_of(schema: dict[str, Any]) -> None:
    """`allOf` of plain objects merged into one object (members, required), as most documents mean it and as
    models and typed stubs read best; left alone when members overlap or carry anything else."""
    parts = schema.get("allOf")
    if not isinstance(parts, list) or not parts or not all(isinstance(p, dict) for p in parts):
        return
    # A closed object (additionalProperties: false) built of parts, as Azure's documents build each resource, admits
    # no member a part adds: JSON Schema would refuse every value. Merged, the parts' members are its own.
    closed = schema.get("additionalProperties") is False or any(p.get("additionalProperties") is False for p in parts)
    allowed = {"type", "properties", "required", "description", "title"} | (
        {"additionalProperties"} if closed else set()
    )
    if not all(set(p) <= allowed and p.get("type", "object") == "object" for p in parts):
        return
    if closed and not all(isinstance(p.get("additionalProperties", False), bool) for p in [schema, *parts]):
        return
    own = schema.get("properties", {}) if closed else {}
    names = [*own, *(name for p in parts for name in p.get("properties", {}))]
    others = {"allOf", "description", "title", "type"} | (
        {"properties", "required", "additionalProperties"} if closed else set()
    )
    if len(names) != len(set(names)) or set(schema) - others:
        return
    del schema["allOf"]
    schema["type"] = "object"
    schema["properties"] = {**own, **{k: v for p in parts for k, v in p.get("properties", {}).items()}}
    required = [*schema.get("required", []), *(r for p in parts for r in p.get("required", []))]
    if required:
        schema["required"] = list(dict.fromkeys(required))
    if closed:  # closed as the whole says, or as its parts all say when it adds no member of its own
        shut = schema.get("additionalProperties") is False or (
            not own and all(p.get("additionalProperties") is False for p in parts)
        )
        schema.pop("additionalProperties", None)
        if shut:
            schema["additionalProperties"] = False
    for key in ("description", "title"):
        if key not in schema:
            found = next((p[key] for p in parts if key in p), None)
            if found is not None:
                schema[key] = found
