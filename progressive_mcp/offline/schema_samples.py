"""Deterministic sample values for JSON Schemas: what the offline REST upstream answers for an operation whose
output schema carries no example.

The same schema and seed give the same value, so answers are byte-identical from run to run; a node budget
and a byte cap keep the value small however large the schema (OpenAI's answers hold hundreds of members).
Example::

    schema = {"type": "object", "required": ["id"], "properties": {"id": {"type": "string", "format": "uuid"}}}
    sample_value(schema, seed="getPet")     # {'id': '…'}: the same uuid on every run

What a value is made of, in order of preference: `const`, `examples[0]` (or OpenAPI 3.0's `example`),
`default`, the first `enum` value; otherwise one is generated: objects with all their required members and
optional ones while the budget lasts, arrays of one or two items (within minItems/maxItems), strings by
`format` (date-time, date, uuid, email, uri, ...) or a short text (a `pattern` is not followed), numbers within
their bounds, `oneOf`/`anyOf` as their first non-null option, `allOf` merged, a nullable type as its non-null
type. A `$ref` (a JSON pointer into the root schema: `#/$defs/...`, `#/components/schemas/...`) is followed
until it would recurse, or nest deeper than `max_ref_depth`, or the budget is spent: there the value is cut to
the smallest of its type (`{}`, `[]`, `""`, 0) and optional members and array items that would be cut are
left out. Once the budget is spent, required members too get the smallest value of their type, so a huge
schema's value breaks some `required` rather than the size cap.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
import random
import re
import uuid
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeGuard
from urllib.parse import unquote

MAX_NODES = 120  # values generated before only required members and minItems items are added
MAX_REF_DEPTH = 8  # $refs followed along one path (recursion is cut at its first repeat anyway)
MAX_OPTIONAL_MEMBERS = 12  # optional members of one object
MAX_MIN_ITEMS = 20  # minItems honoured up to this many items
MAX_UNIQUE_TRIES = 10  # draws that may repeat an item of a uniqueItems array before it is left shorter
MAX_BYTES = 16_000  # compact JSON size of a generated value; over it, generation starts again with half the budget
ANCHOR = dt.datetime(2026, 11, 20, 14, 30, tzinfo=dt.UTC)  # the newest date-time any value holds
_SPAN_S = 365 * 24 * 3600  # generated times fall within the year before ANCHOR
_WORD = re.compile(r"[^A-Za-z0-9]+")
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)


def sample_value(
    schema: Mapping[str, Any] | bool,
    seed: str,
    *,
    root: Mapping[str, Any] | None = None,
    max_nodes: int = MAX_NODES,
    max_ref_depth: int = MAX_REF_DEPTH,
    max_bytes: int = MAX_BYTES,
) -> Any:
    """A value `schema` describes, the same for the same `seed` (a tool's name) on every run; `$ref`s resolve
    against `root` (default: the schema itself). The schema's own example is returned as it is, whatever its size."""
    if isinstance(schema, Mapping) and "not" not in schema:
        example = _example(schema)
        if example is not _NONE:
            return example
    budget = max_nodes
    while True:
        generator = _Generator(seed, root if root is not None else schema, budget, max_ref_depth)
        value = generator.value(schema, "")
        if len(dumps(value)) <= max_bytes:
            return value
        if budget <= 1:  # even its required members alone are too many: the smallest value of its type
            return generator._smallest(schema)
        budget //= 2


def dumps(value: Any) -> str:
    """The compact JSON text of a value; anything JSON has no type for (a YAML loader's dates) as its text."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


_NONE = object()  # "no example": None is a value an example may have


def _example(schema: Mapping[str, Any]) -> Any:
    """The value a schema names for itself (const, examples[0], example, default, enum[0]), or _NONE.

    One whose JSON type the schema's `type` excludes is passed over: documents do say `default: null` of a
    non-nullable member, or give an object's example as a string of JSON."""
    if "const" in schema:
        return _plain(schema["const"])
    candidates: list[Any] = []
    examples = schema.get("examples")
    if _is_list(examples) and examples:
        candidates.append(examples[0])
    elif isinstance(examples, Mapping) and examples:  # OpenAPI's media-type form: {name: {value: ...}}
        first = next(iter(examples.values()))
        if isinstance(first, Mapping) and "value" in first:
            candidates.append(first["value"])
    candidates += [schema[key] for key in ("example", "default") if key in schema]
    enum = schema.get("enum")
    if _is_list(enum) and enum:
        candidates.append(next((v for v in enum if v is not None), enum[0]))
    allowed = _allowed_types(schema)
    for candidate in candidates:
        if (
            allowed is None
            or _json_type(candidate) in allowed
            or (_json_type(candidate) == "integer" and "number" in allowed)
        ):
            return _plain(candidate)
    return _NONE


def _allowed_types(schema: Mapping[str, Any]) -> set[str] | None:
    """The JSON types a schema's `type`, or else all its oneOf/anyOf options, allow; None when that cannot be told
    (no type said, or an option behind a $ref). A `default: null` beside options none of which is null is no value."""
    declared = schema.get("type")
    if _is_list(declared):
        return {t for t in declared if isinstance(t, str)}
    if isinstance(declared, str):
        return {declared}
    options = schema.get("oneOf") or schema.get("anyOf")
    if not _is_list(options) or not options:
        return None
    allowed: set[str] = set()
    for option in options:
        found = _allowed_types(option) if isinstance(option, Mapping) and "$ref" not in option else None
        if found is None:
            return None
        allowed |= found
    return allowed


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, Mapping):
        return "object"
    if _is_list(value):
        return "array"
    return "string"  # a string, or what a YAML loader made of one (a date)


def _plain(value: Any) -> Any:
    """A JSON-ready copy of (possibly frozen) schema data."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [_plain(v) for v in value]
    return value


def _is_list(value: Any) -> TypeGuard[Sequence[Any]]:
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def merge(first: Mapping[str, Any], second: Mapping[str, Any]) -> dict[str, Any]:
    """Two schemas as one (allOf's meaning, near enough for making a value): members and required names
    united, types intersected, any other keyword of `second` winning."""
    out = dict(first)
    for key, value in second.items():
        if key not in out:
            out[key] = value
        elif key == "properties" and isinstance(out[key], Mapping) and isinstance(value, Mapping):
            members = dict(out[key])
            for name, member in value.items():  # a member both describe must satisfy both
                members[name] = {"allOf": [members[name], member]} if name in members else member
            out[key] = members
        elif key == "required" and _is_list(out[key]) and _is_list(value):
            out[key] = list(dict.fromkeys([*out[key], *value]))
        elif key == "type":
            out[key] = _common_type(out[key], value)
        elif key == "allOf" and _is_list(out[key]) and _is_list(value):
            out[key] = [*out[key], *value]
        else:
            out[key] = value
    return out


def _common_type(first: Any, second: Any) -> Any:
    """The types both allow (an integer is a number too); the second's if they share none."""
    mine = list(first) if _is_list(first) else [first]
    theirs = list(second) if _is_list(second) else [second]
    common = [t for t in mine if t in theirs]
    common += ["integer"] * (not common and {"integer", "number"} <= {*mine, *theirs})
    if not common:
        return second
    return common[0] if len(common) == 1 else common


def _schema_type(schema: Mapping[str, Any]) -> str | None:
    """The one JSON type a value of `schema` gets: the first non-null of `type`, else what its keywords imply."""
    declared = schema.get("type")
    if isinstance(declared, str):
        return declared
    if _is_list(declared):
        types = [t for t in declared if isinstance(t, str)]
        return next((t for t in types if t != "null"), "null" if types else None)
    if any(k in schema for k in ("properties", "additionalProperties", "required", "patternProperties")):
        return "object"
    if any(k in schema for k in ("items", "prefixItems", "minItems", "maxItems")):
        return "array"
    if any(k in schema for k in ("format", "pattern", "minLength", "maxLength")):
        return "string"
    if any(k in schema for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")):
        return "number"
    return None


class _Generator:
    """One value's generation: the seeded random source, what is left of the budget, the $refs being followed."""

    def __init__(self, seed: str, root: Mapping[str, Any] | bool, max_nodes: int, max_ref_depth: int) -> None:
        # crc32, not hash(): hash() of str is salted per process, which would break byte-identical answers.
        self.rng = random.Random(zlib.crc32(seed.encode()))
        self.root = root
        self.nodes_left = max_nodes
        self.max_ref_depth = max_ref_depth
        self.refs: list[str] = []

    # -- $ref ------------------------------------------------------------------------------------

    def _target(self, ref: str) -> Any:
        """What a local JSON pointer points at in the root schema, or None (an external or broken reference)."""
        if not ref.startswith("#"):
            return None
        node: Any = self.root
        for part in ref[1:].split("/")[1:]:
            part = unquote(part).replace("~1", "/").replace("~0", "~")
            if isinstance(node, Mapping) and part in node:
                node = node[part]
            elif _is_list(node) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return None
        return node if isinstance(node, Mapping | bool) else None

    def _follows(self, ref: str) -> bool:
        """Whether a $ref may be followed here: not recursing, not too deep, budget left."""
        return ref not in self.refs and len(self.refs) < self.max_ref_depth and self.nodes_left > 0

    def _deref(self, schema: Any) -> tuple[Mapping[str, Any] | None, list[str]]:
        """`schema` with its $ref chain followed (siblings of a $ref merged over its target) and the refs
        followed; None if the chain is cut."""
        followed: list[str] = []
        while isinstance(schema, Mapping) and isinstance(schema.get("$ref"), str):
            ref = schema["$ref"]
            target = self._target(ref)
            if not self._follows(ref) or ref in followed or target is None:
                return None, followed
            followed.append(ref)
            siblings = {k: v for k, v in schema.items() if k != "$ref"}
            base = target if isinstance(target, Mapping) else {}  # `true`: anything
            schema = merge(base, siblings) if siblings else base
        if schema is True or schema is None:
            return {}, followed
        if not isinstance(schema, Mapping):
            return None, followed
        return schema, followed

    def _cut(self, schema: Any) -> bool:
        """Whether generating `schema` would be cut at once (a $ref that must not be followed here)."""
        return isinstance(schema, Mapping) and isinstance(schema.get("$ref"), str) and self._deref(schema)[0] is None

    def _smallest(self, schema: Any) -> Any:
        """The smallest value of a cut schema's type, looking one $ref deep for it: {} [] "" 0 false, or null."""
        if isinstance(schema, Mapping) and isinstance(schema.get("$ref"), str):
            target = self._target(schema["$ref"])
            schema = target if isinstance(target, Mapping) else {}
        if not isinstance(schema, Mapping):
            return None
        example = _example(schema)
        if example is not _NONE:
            return example
        declared = schema.get("type")
        if _is_list(declared) and "null" in declared:
            return None
        options = schema.get("oneOf") or schema.get("anyOf")
        kind = _schema_type(schema)
        if kind is None and _is_list(options) and options:
            first = options[0]
            kind = _schema_type(first) if isinstance(first, Mapping) and "$ref" not in first else "object"
        return {"object": {}, "array": [], "string": "", "integer": 0, "number": 0, "boolean": False}.get(
            kind or "object"
        )

    # -- values ----------------------------------------------------------------------------------

    def value(self, schema: Any, hint: str) -> Any:
        """A value of `schema` (one node of the budget; once it is spent, the smallest value of the schema's type);
        `hint` (the member's name) flavours generated text."""
        if self.nodes_left <= 0:
            return self._smallest(schema)
        self.nodes_left -= 1
        return self._expand(schema, hint)

    def _expand(self, schema: Any, hint: str) -> Any:
        resolved, followed = self._deref(schema)
        if resolved is None:
            return self._smallest(schema)
        self.refs.extend(followed)
        try:
            return self._resolved(resolved, hint)
        finally:
            del self.refs[len(self.refs) - len(followed) :]

    def _resolved(self, schema: Mapping[str, Any], hint: str) -> Any:
        value = self._unchecked(schema, hint)
        forbidden = schema.get("not")
        return self._outside(forbidden, schema, value) if isinstance(forbidden, Mapping) else value

    def _unchecked(self, schema: Mapping[str, Any], hint: str) -> Any:
        example = _example(schema)
        if example is not _NONE:
            return example
        parts = schema.get("allOf")
        if _is_list(parts) and parts:
            return self._all_of(schema, parts, hint)
        for keyword in ("oneOf", "anyOf"):
            options = schema.get(keyword)
            if _is_list(options) and options:
                base = {k: v for k, v in schema.items() if k not in ("oneOf", "anyOf")}
                chosen = self._first_option(options)
                merged = merge(base, chosen)
                value = self._expand(merged, hint)
                if keyword == "oneOf" and isinstance(value, dict):
                    # "exactly one of": the other options' required names, where the chosen one leaves them
                    # optional, are left out, so the value does not fit two options
                    for other in options:
                        if other is not chosen and isinstance(other, Mapping):
                            self._without_one_of(value, other.get("required"), merged)
                return value
        kind = _schema_type(schema)
        if kind == "object":
            return self._object(schema)
        if kind == "array":
            return self._array(schema, hint)
        if kind == "string":
            return self._string(schema, hint)
        if kind in ("integer", "number"):
            return self._number(schema, integer=kind == "integer")
        if kind == "boolean":
            return self.rng.random() < 0.5
        if kind == "null":
            return None
        return self._text(hint)  # a schema that says nothing of its type: any value would do

    def _outside(self, forbidden: Mapping[str, Any], schema: Mapping[str, Any], value: Any) -> Any:
        """`value` changed so that it escapes what `not` forbids, where that is a set of required names (one is
        left out), values (`const`, `enum`: another enum value or another text) or types (a value of another)."""
        if isinstance(value, dict):
            self._without_one_of(value, forbidden.get("required"), schema)
        values = [forbidden["const"]] if "const" in forbidden else forbidden.get("enum")
        if _is_list(values) and value in values:
            enum = schema.get("enum")
            others = [v for v in enum if v not in values] if _is_list(enum) else []
            if others:
                return _plain(others[0])
            if isinstance(value, str):
                return next(f"{value}-{n}" for n in range(len(values) + 1) if f"{value}-{n}" not in values)
            if isinstance(value, int | float) and not isinstance(value, bool):
                return next(value + n for n in range(1, len(values) + 2) if value + n not in values)
        kinds = _allowed_types(forbidden)
        if kinds is not None and set(forbidden) <= {"type", "description", "title"} and _json_type(value) in kinds:
            allowed = _allowed_types(schema) or {"string", "integer", "number", "boolean", "object", "array", "null"}
            simplest = {"string": "", "integer": 0, "number": 0.5, "boolean": False, "object": {}, "array": []}
            for kind, other in simplest.items():
                if kind in allowed and kind not in kinds and _json_type(other) not in kinds:
                    return other
        return value

    @staticmethod
    def _without_one_of(value: dict[str, Any], names: Any, schema: Mapping[str, Any]) -> None:
        """Leaves out of `value` one of `names` that `schema` does not require, if all of them are there, so that
        it misses a schema whose `required` they are."""
        if not _is_list(names) or not names or any(not isinstance(n, str) or n not in value for n in names):
            return
        required = schema.get("required")
        required = set(required) if _is_list(required) else set()
        for name in reversed(names):  # the last named is the least likely to be what the option is about
            if name not in required:
                del value[name]
                return

    def _first_option(self, options: Sequence[Any]) -> Mapping[str, Any]:
        """oneOf/anyOf's first option that is not just null (a nullable type is its non-null type)."""
        for option in options:
            if isinstance(option, Mapping) and _plain(option.get("type")) not in ("null", ["null"]):
                return option
        return {"type": "null"}

    def _all_of(self, schema: Mapping[str, Any], parts: Sequence[Any], hint: str) -> Any:
        merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
        followed: list[str] = []
        for part in parts:
            resolved, refs = self._deref(part)
            followed += refs
            if resolved is not None:  # a part cut for recursion adds nothing
                merged = merge(merged, resolved)
        self.refs.extend(followed)
        try:
            return self._expand(merged, hint)
        finally:
            del self.refs[len(self.refs) - len(followed) :]

    def _object(self, schema: Mapping[str, Any]) -> dict[str, Any]:
        properties = schema.get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        required = [name for name in schema.get("required") or () if isinstance(name, str)]
        extra = schema.get("additionalProperties")
        out: dict[str, Any] = {}
        optional = 0
        for name, member in properties.items():
            if name in required:
                out[name] = self.value(member, name)
            elif self.nodes_left > 0 and optional < MAX_OPTIONAL_MEMBERS and not self._skipped(member):
                out[name] = self.value(member, name)
                optional += 1
        for name in required:
            if name not in out:  # required but not described: additionalProperties says what it is, if anything
                out[name] = self.value(extra if isinstance(extra, Mapping) else {}, name)
        if not properties and isinstance(extra, Mapping) and extra and self.nodes_left > 0 and not self._cut(extra):
            out.setdefault("additionalProp1", self.value(extra, "value"))  # a map: one entry shows its shape
        return out

    def _skipped(self, member: Any) -> bool:
        """Optional members left out: write-only ones (never in an answer) and those cut for recursion."""
        return (isinstance(member, Mapping) and member.get("writeOnly") is True) or self._cut(member)

    def _array(self, schema: Mapping[str, Any], hint: str) -> list[Any]:
        min_items = _count(schema.get("minItems")) or 0
        max_items = _count(schema.get("maxItems"))
        items = schema.get("items")
        prefix = schema.get("prefixItems")
        out: list[Any] = []
        if _is_list(prefix):
            limit = len(prefix) if max_items is None else min(len(prefix), max_items)
            out = [self.value(item, hint) for item in prefix[:limit]]
            if items is False or not (isinstance(items, Mapping) or items is True):
                return out
        cut = self._cut(items)
        if cut or items is False:
            wanted = 0 if cut and min_items == 0 else min_items
        elif self.nodes_left > 0:
            wanted = max(self.rng.randint(1, 2), min_items)
        else:
            wanted = min_items
        if max_items is not None:
            wanted = min(wanted, max_items)
        wanted = min(wanted, max(MAX_MIN_ITEMS, len(out)))
        unique, repeats = schema.get("uniqueItems") is True, 0
        while len(out) < wanted and (len(out) < min_items or self.nodes_left > 0):
            # beyond minItems only while the budget lasts: a spent budget gives items their smallest value, which
            # may break their own `required`
            value = self.value(items if items is not None else {}, hint)
            if unique and value in out:  # PagerDuty's `include`: uniqueItems over a one-value enum
                repeats += 1
                if len(out) >= min_items or repeats > MAX_UNIQUE_TRIES:
                    break
                continue
            out.append(value)
        return out

    def _string(self, schema: Mapping[str, Any], hint: str) -> str:
        make = _FORMATS.get(str(schema.get("format", "")).lower())
        text = make(self.rng, _slug(hint)) if make is not None else self._text(hint)
        min_length = _count(schema.get("minLength")) or 0
        max_length = _count(schema.get("maxLength"))
        if len(text) < min_length:
            text += "x" * (min_length - len(text))
        if max_length is not None and len(text) > max_length:
            text = text[:max_length]
        return text

    def _text(self, hint: str) -> str:
        return f"{_slug(hint) or 'sample'}-{self.rng.randint(100, 999)}"

    def _number(self, schema: Mapping[str, Any], *, integer: bool) -> int | float:
        fmt = schema.get("format")
        low, high, open_low, open_high = _bounds(schema)
        if integer and fmt in ("unix-time", "timestamp") and low is None and high is None:
            return int(ANCHOR.timestamp()) - self.rng.randint(0, _SPAN_S)
        if low is None and high is None:
            low, high = 1, 100
        elif low is None:
            low = 1 if high is not None and high >= 1 else (high or 0) - 100
        elif high is None:
            high = low + 100
        assert low is not None and high is not None
        if fmt in ("int32", "int64"):  # the format's range bounds what the keywords leave open
            limits = _INT32 if fmt == "int32" else _INT64
            low, high = max(low, limits[0]), min(high, limits[1])
        step = schema.get("multipleOf")
        if isinstance(step, int | float) and not isinstance(step, bool) and step > 0:
            first = math.floor(low / step) + 1 if open_low else math.ceil(low / step)
            last = math.ceil(high / step) - 1 if open_high else math.floor(high / step)
            if first <= last:
                chosen = self.rng.randint(first, last) * step
                return int(chosen) if integer else round(chosen, 10)
        if integer:
            first = math.floor(low) + 1 if open_low else math.ceil(low)
            last = math.ceil(high) - 1 if open_high else math.floor(high)
            return self.rng.randint(first, last) if first <= last else first
        value = round(self.rng.uniform(low, high), 2)
        if value < low or value > high or (open_low and value == low) or (open_high and value == high):
            value = (low + high) / 2  # rounding stepped outside a narrow or open range
        return value


def _count(value: Any) -> int | None:
    """A keyword's count (minItems, maxLength...), or None if it is absent or not a count."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _bounds(schema: Mapping[str, Any]) -> tuple[float | None, float | None, bool, bool]:
    """(low, high, low excluded, high excluded): 2020-12's numeric exclusive bounds and OpenAPI 3.0's booleans."""

    def number(key: str) -> float | None:
        value = schema.get(key)
        return value if isinstance(value, int | float) and not isinstance(value, bool) else None

    low, high = number("minimum"), number("maximum")
    open_low = schema.get("exclusiveMinimum") is True
    open_high = schema.get("exclusiveMaximum") is True
    exclusive_low, exclusive_high = number("exclusiveMinimum"), number("exclusiveMaximum")
    if exclusive_low is not None and (low is None or exclusive_low >= low):
        low, open_low = exclusive_low, True
    if exclusive_high is not None and (high is None or exclusive_high <= high):
        high, open_high = exclusive_high, True
    return low, high, open_low, open_high


def _slug(hint: str) -> str:
    return _WORD.sub("-", hint).strip("-").lower()[:24]


def _moment(rng: random.Random) -> dt.datetime:
    return ANCHOR - dt.timedelta(seconds=rng.randint(0, _SPAN_S))


_FORMATS: dict[str, Callable[[random.Random, str], str]] = {
    "date-time": lambda rng, _: _moment(rng).strftime("%Y-%m-%dT%H:%M:%SZ"),
    "date": lambda rng, _: _moment(rng).date().isoformat(),
    "time": lambda rng, _: _moment(rng).strftime("%H:%M:%SZ"),
    "duration": lambda rng, _: f"PT{rng.randint(1, 59)}M",
    "uuid": lambda rng, _: str(uuid.UUID(int=rng.getrandbits(128), version=4)),
    "email": lambda rng, hint: f"{hint or 'user'}{rng.randint(1, 99)}@example.com",
    "idn-email": lambda rng, hint: f"{hint or 'user'}{rng.randint(1, 99)}@example.com",
    "uri": lambda rng, hint: f"https://example.com/{hint or 'item'}/{rng.randint(1, 999)}",
    "url": lambda rng, hint: f"https://example.com/{hint or 'item'}/{rng.randint(1, 999)}",
    "iri": lambda rng, hint: f"https://example.com/{hint or 'item'}/{rng.randint(1, 999)}",
    "uri-reference": lambda rng, hint: f"/{hint or 'item'}/{rng.randint(1, 999)}",
    "iri-reference": lambda rng, hint: f"/{hint or 'item'}/{rng.randint(1, 999)}",
    "uri-template": lambda rng, hint: f"https://example.com/{hint or 'item'}/{{id}}",
    "hostname": lambda rng, _: f"host{rng.randint(1, 99)}.example.com",
    "idn-hostname": lambda rng, _: f"host{rng.randint(1, 99)}.example.com",
    "ipv4": lambda rng, _: f"192.0.2.{rng.randint(1, 254)}",  # TEST-NET-1 (RFC 5737)
    "ipv6": lambda rng, _: f"2001:db8::{rng.randint(1, 0xFFFF):x}",  # the documentation prefix (RFC 3849)
    "byte": lambda rng, _: base64.b64encode(rng.randbytes(9)).decode("ascii"),
    "binary": lambda rng, _: "sample-bytes",
    "password": lambda rng, _: "********",
    "json-pointer": lambda rng, hint: f"/{hint or 'item'}/0",
    "relative-json-pointer": lambda rng, hint: f"0/{hint or 'item'}",
    "regex": lambda rng, _: "^[a-z]+$",
    "int32": lambda rng, _: str(rng.randint(1, 100)),  # numbers some APIs send as strings
    "int64": lambda rng, _: str(rng.randint(1, 10_000)),
    "decimal": lambda rng, _: f"{rng.randint(1, 999)}.{rng.randint(0, 99):02d}",
}
