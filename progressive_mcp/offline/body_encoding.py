"""Reading a form or multipart request body the way the operation's document says it is encoded, for the offline
upstream: which members it holds, and what in it does not follow the document (its Encoding Object's style and
explode, its contentType, Swagger's collectionFormat), said the way a real server's 400 would say it.

Example (Stripe's refunds, whose `metadata` is `style: deepObject`)::

    members, problems = form_members(tool_params, b"metadata=%7B%22order%22%3A%2242%22%7D")
    problems   # ["metadata is sent as metadata[key]=value (style deepObject), not as 'metadata=%7B...'"]
"""

from __future__ import annotations

import dataclasses
import email.parser
import json
import re
from collections.abc import Mapping
from email.message import Message
from typing import Any
from urllib.parse import unquote_plus

from progressive_mcp.catalog import Param

SCALAR_TYPES = ("string", "integer", "number", "boolean")
_INTEGER = re.compile(r"-?\d+")
_NUMBER = re.compile(r"-?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?")
MAX_SHOWN = 60  # characters of a refused piece quoted back


def form_members(params: list[Param], body: bytes) -> tuple[set[str], list[str]]:
    """The member names an application/x-www-form-urlencoded body holds, and what in it does not follow the
    document: a deepObject member sent as one value (JSON text, say) or a plain member sent with brackets, an
    object member sent under its own name where the default style (form, exploded) sends its members, an array
    sent repeatedly where its style joins it in one value, a JSON-typed member that is not JSON."""
    by_name = {p.upstream_name: p for p in params}
    exploded_objects = any(_exploded_object(p) for p in params)
    present: set[str] = set()
    problems: list[str] = []
    counts: dict[str, int] = {}
    for piece in body.decode("utf-8", "replace").split("&"):
        if not piece:
            continue
        raw_name, _, raw_value = piece.partition("=")
        name, value = unquote_plus(raw_name), unquote_plus(raw_value)
        base, bracket = _member_name(name, by_name)
        param = by_name.get(base)
        if param is None:
            if not exploded_objects and base:
                present.add(base)  # a field the document does not name: left to the caller, as real servers do
            continue
        present.add(base)
        counts[base] = counts.get(base, 0) + 1
        problem = _piece_problem(param, bool(bracket), value, piece)
        if problem is not None:
            problems.append(problem)
    for name, count in counts.items():
        param = by_name[name]
        if count > 1 and _joined_array(param):
            style = param.collection_format or param.style or "form"
            problems.append(f"{name} is an array sent once, its items joined ({style}), not repeated {count} times")
    if exploded_objects:  # an exploded object's members arrive under their own names, which stand for it
        present |= {p.upstream_name for p in params if _exploded_object(p)}
    return present, problems


def _member_name(name: str, by_name: Mapping[str, Param]) -> tuple[str, str]:
    """(the member a field names, its bracketed rest): a member declared with brackets in its own name (Swagger
    form fields of Rails APIs: `vendor[name]`) is itself; otherwise `metadata[order]` is `metadata`'s."""
    if name in by_name:
        return name, ""
    base, bracket, rest = name.partition("[")
    return base, bracket + rest


def _piece_problem(param: Param, bracketed: bool, value: str, piece: str) -> str | None:
    name = param.upstream_name
    shown = piece if len(piece) <= MAX_SHOWN else piece[: MAX_SHOWN - 3] + "..."
    if param.content_type is not None and _is_json(param.content_type):
        if bracketed:
            return f"{name} is sent as JSON text ({param.content_type}), not in brackets: {shown!r}"
        try:
            json.loads(value)
        except ValueError:
            return f"{name} is sent as JSON text ({param.content_type}), and {shown!r} is not JSON"
        return None
    deep = param.style == "deepObject"
    if bracketed and not deep:
        style = param.collection_format or param.style or "form"
        return f"{name} is sent in style {style}, not with deepObject brackets: {shown!r}"
    if deep and not bracketed and not _scalar_fits(param.schema, value):
        return f"{name} is sent as {name}[key]=value (style deepObject), not as {shown!r}"
    if not deep and _exploded_object(param) and not _scalar_fits(param.schema, value):
        return f"{name} is an object, sent (style form, exploded) as its members' own fields, not as {shown!r}"
    return None


def multipart_members(params: list[Param], content_type: str, body: bytes) -> tuple[set[str], list[str]]:
    """The member names a multipart/form-data body holds (its parts' names, brackets left out), and what in it
    does not follow the document: a part that is not form-data, a JSON part (object members, JSON contentType)
    that is not JSON, a member whose Encoding sets style or explode not sent as that style's pairs (one part each,
    named like a form body's: Stripe's file_link_data[create])."""
    message = email.parser.BytesParser().parsebytes(
        b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + body
    )
    if not message.is_multipart() or message.defects:
        return set(), ["The body is not a multipart/form-data body its Content-Type's boundary can read"]
    by_name = {p.upstream_name: p for p in params}
    present: set[str] = set()
    problems: list[str] = []
    for part in message.get_payload():
        if not isinstance(part, Message):
            continue
        disposition = part.get("Content-Disposition", "")
        name = part.get_param("name", header="content-disposition")
        if not str(disposition).lower().startswith("form-data") or not isinstance(name, str):
            problems.append('A part without Content-Disposition: form-data; name="..."')
            continue
        base, bracket = _member_name(name, by_name)
        present.add(base)
        param = by_name.get(base)
        part_type = (part.get("Content-Type") or "text/plain").split(";")[0].strip().lower()
        if param is not None and (param.style is not None or param.explode is not None):
            # An Encoding that sets style or explode: its parts are a form body's pairs, contentType ignored
            payload = part.get_payload(decode=True)
            text = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else ""
            styled = dataclasses.replace(param, content_type=None)
            problem = _piece_problem(styled, bool(bracket), text, f"{name}={text}")
            if problem is not None:
                problems.append(problem)
        elif param is not None and not bracket and _is_json(part_type):
            payload = part.get_payload(decode=True)
            try:
                json.loads(payload if isinstance(payload, bytes) else b"")
            except ValueError:
                problems.append(f"The part {name} says {part_type} but is not JSON")
    return present, problems


# --- what a member's schema and encoding allow -------------------------------------------------------------------


def _exploded_object(param: Param) -> bool:
    """An object member styled form and exploded (the default): its members go as fields of their own."""
    return (
        param.style in (None, "form")
        and param.explode in (None, True)
        and param.content_type is None
        and param.collection_format is None
        and _kinds(param.schema) & {"object"} != set()
    )


def _joined_array(param: Param) -> bool:
    """An array member whose items are joined in one value (not exploded, not deepObject, not multi)."""
    if "array" not in _kinds(param.schema) and param.type != "array":
        return False
    if param.collection_format is not None:
        return param.collection_format != "multi"
    if param.style in ("spaceDelimited", "pipeDelimited"):
        return param.explode is not True
    return param.style in (None, "form") and param.explode is False


def _kinds(schema: Mapping[str, Any] | None) -> set[str]:
    """Every JSON type a schema (or one of its anyOf/oneOf options) allows."""
    if schema is None:
        return set()
    kinds: set[str] = set()
    declared = schema.get("type")
    if isinstance(declared, str):
        kinds.add(declared)
    elif isinstance(declared, list | tuple):
        kinds |= {k for k in declared if isinstance(k, str)}
    elif "properties" in schema or "additionalProperties" in schema:
        kinds.add("object")
    for key in ("anyOf", "oneOf", "allOf"):
        for option in schema.get(key) or ():
            if isinstance(option, Mapping):
                kinds |= _kinds(option)
    return kinds


def _scalar_options(schema: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """The parts of a schema a lone value can be (a scalar type, or an enum); none for an object or array only."""
    if schema is None:
        return [{}]
    options = [o for key in ("anyOf", "oneOf") for o in schema.get(key) or () if isinstance(o, Mapping)]
    if options:
        return [found for option in options for found in _scalar_options(option)]
    kinds = _kinds(schema)
    if not kinds:
        return [schema]  # no type said: anything goes
    return [schema] if kinds & set(SCALAR_TYPES) else []


def _scalar_fits(schema: Mapping[str, Any] | None, value: str) -> bool:
    """Whether a lone form value can be this member: a scalar its schema allows (its enum, if it has one)."""
    for option in _scalar_options(schema):
        enum = option.get("enum")
        if isinstance(enum, list | tuple):
            if value in {_text(e) for e in enum}:
                return True
            continue
        kinds = _kinds(option) or set(SCALAR_TYPES)
        if "string" in kinds and not (value[:1] in "{[" and _is_json_container(value)):
            return True
        if "integer" in kinds and _INTEGER.fullmatch(value):
            return True
        if "number" in kinds and _NUMBER.fullmatch(value):
            return True
        if "boolean" in kinds and value in ("true", "false"):
            return True
    return False


def _is_json_container(value: str) -> bool:
    """JSON text of an object or array: what a client sends when it ignores the document's style."""
    try:
        return isinstance(json.loads(value), dict | list)
    except ValueError:
        return False


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _is_json(media: str) -> bool:
    media = media.split(";")[0].strip().lower()
    return media == "application/json" or media.endswith("+json")
