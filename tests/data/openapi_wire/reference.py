"""A reference encoder for the expected side of the wire cases, written from the OpenAPI Specification.

Written from the OpenAPI Specification 3.0.3 / 3.1 (Parameter Object `style`/`explode`, the Style Values table
and Style Examples, the Encoding Object), the Swagger 2.0 Parameter Object (`in: formData`, `collectionFormat`)
and the lead's wire rules for issue 28 (prompts/r28/wire_rules.md), which fix what the specification leaves open.
It never imports or reads progressive_mcp's serializer: its only job is to say what a correct request looks like,
so the serializer can be compared with an independent statement of the rules.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


def pct(text: str) -> str:
    """Every UTF-8 byte outside the unreserved set as %XX with upper-case hex (space is %20, never +)."""
    return "".join(chr(b) if b in UNRESERVED else f"%{b:02X}" for b in text.encode("utf-8"))


def compact_json(value: Any) -> str:
    """JSON text as the rules want it: no spaces, non-ASCII kept."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def is_scalar(value: Any) -> bool:
    return isinstance(value, str | bool | int | float)


def text_of(value: Any) -> str:
    """A scalar as text: strings as they are, booleans true/false, numbers as JSON writes them.

    A value no style defines at this depth (a list or an object) becomes compact JSON text.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return json.dumps(value)
    return compact_json(value)


def drop_nulls(value: Any) -> Any:
    """`null` members of objects and `null` items of arrays are left out (wire rules, General)."""
    if isinstance(value, Mapping):
        return {k: v for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [v for v in value if v is not None]
    return value


# --- OpenAPI 3.x parameters (Style Values table) --------------------------------------------------------------


def deep_pieces(prefix: str, value: Any) -> list[str]:
    """deepObject: `a[b][c]=v`; arrays of scalars `a[]=x`; arrays holding objects or arrays indexed from 0."""
    value = drop_nulls(value)
    if isinstance(value, Mapping):
        out: list[str] = []
        for key, member in value.items():
            out += deep_pieces(f"{prefix}[{pct(key)}]", member)
        return out
    if isinstance(value, list):
        if all(is_scalar(item) for item in value):
            return [f"{prefix}[]={pct(text_of(item))}" for item in value]
        out = []
        for index, item in enumerate(value):
            out += deep_pieces(f"{prefix}[{index}]", item)
        return out
    return [f"{prefix}={pct(text_of(value))}"]


def query_pieces(name: str, value: Any, style: str, explode: bool) -> list[str]:
    """One query parameter (or form-body property) as `&`-separated pieces, already percent-encoded."""
    if value is None:
        return []
    value = drop_nulls(value)
    key = pct(name)
    if style == "deepObject":
        return deep_pieces(key, value)
    delimiter = {"form": ",", "spaceDelimited": "%20", "pipeDelimited": "|"}[style]
    if isinstance(value, list):
        if explode:
            return [f"{key}={pct(text_of(item))}" for item in value]
        return [f"{key}=" + delimiter.join(pct(text_of(item)) for item in value)]
    if isinstance(value, Mapping):
        if explode:
            return [f"{pct(k)}={pct(text_of(v))}" for k, v in value.items()]
        flat = [pct(part) for k, v in value.items() for part in (k, text_of(v))]
        return [f"{key}=" + delimiter.join(flat)]
    return [f"{key}={pct(text_of(value))}"]


def simple_text(value: Any, explode: bool, encode: bool) -> str:
    """style simple (path, header): `3,4,5`; object `R,100,G,200`, exploded `R=100,G=200`."""
    enc = pct if encode else (lambda text: text)
    value = drop_nulls(value)
    if isinstance(value, list):
        return ",".join(enc(text_of(item)) for item in value)
    if isinstance(value, Mapping):
        if explode:
            return ",".join(f"{enc(k)}={enc(text_of(v))}" for k, v in value.items())
        return ",".join(enc(part) for k, v in value.items() for part in (k, text_of(v)))
    return enc(text_of(value))


def path_text(name: str, value: Any, style: str, explode: bool) -> str:
    """A path parameter's value as it goes into the template: simple, label or matrix."""
    value = drop_nulls(value)
    if style == "simple":
        return simple_text(value, explode, encode=True)
    if style == "label":
        if isinstance(value, list | Mapping) and explode:
            parts = simple_text(value, True, encode=True).split(",")
            return "".join("." + part for part in parts)
        return "." + simple_text(value, False, encode=True)
    if style == "matrix":
        key = pct(name)
        if isinstance(value, list):
            if explode:
                return "".join(f";{key}={pct(text_of(item))}" for item in value)
            return f";{key}=" + ",".join(pct(text_of(item)) for item in value)
        if isinstance(value, Mapping):
            if explode:
                return "".join(f";{pct(k)}={pct(text_of(v))}" for k, v in value.items())
            return f";{key}=" + simple_text(value, False, encode=True)
        return f";{key}={pct(text_of(value))}"
    raise ValueError(f"style {style} is not a path style")


# --- Swagger 2.0 (collectionFormat) ---------------------------------------------------------------------------

COLLECTION_DELIMITERS = {"csv": ",", "ssv": "%20", "tsv": "%09", "pipes": "|"}


def swagger_pieces(name: str, value: Any, collection_format: str) -> list[str]:
    if value is None:
        return []
    key = pct(name)
    if isinstance(value, list):
        items = [pct(text_of(item)) for item in drop_nulls(value)]
        if collection_format == "multi":
            return [f"{key}={item}" for item in items]
        return [f"{key}=" + COLLECTION_DELIMITERS[collection_format].join(items)]
    return [f"{key}={pct(text_of(value))}"]


# --- the document ---------------------------------------------------------------------------------------------


def resolve(document: Mapping[str, Any], node: Any) -> Any:
    """Follow a local `$ref` (one or more hops)."""
    while isinstance(node, Mapping) and isinstance(node.get("$ref"), str) and node["$ref"].startswith("#/"):
        for part in node["$ref"][2:].split("/"):
            document = document[part.replace("~1", "/").replace("~0", "~")]  # type: ignore[assignment]
        node = document
    return node


def find_operation(document: Mapping[str, Any], operation_id: str) -> tuple[str, str, dict[str, Any], dict[str, Any]]:
    for path, item in document["paths"].items():
        for method in HTTP_METHODS:
            operation = item.get(method)
            if operation and operation.get("operationId") == operation_id:
                return method.upper(), path, operation, item
    raise KeyError(operation_id)


def parameters_of(document: Mapping[str, Any], operation: Mapping[str, Any], item: Mapping[str, Any]) -> list[dict]:
    """Path-item parameters overridden by the operation's own (same name and location)."""
    merged: dict[tuple[str, str], dict] = {}
    for raw in list(item.get("parameters", [])) + list(operation.get("parameters", [])):
        parameter = resolve(document, raw)
        merged[(parameter["name"], parameter["in"])] = parameter
    return list(merged.values())


def is_binary(schema: Mapping[str, Any]) -> bool:
    return (
        schema.get("format") == "binary"
        or schema.get("type") == "file"
        or schema.get("contentEncoding") in ("base64", "binary")
        or (schema.get("contentMediaType") is not None and schema.get("type") != "object")
    )


def decode_file(value: str) -> tuple[bytes, str | None]:
    """A binary argument: base64, or a data URL `data:<type>;base64,<data>` whose type is returned."""
    if value.startswith("data:"):
        header, _, data = value.partition(",")
        media_type = header[len("data:") :].split(";")[0] or None
        return base64.b64decode(data), media_type
    return base64.b64decode(value), None


def multipart_parts(
    document: Mapping[str, Any],
    schema: Mapping[str, Any],
    encoding: Mapping[str, Any],
    arguments: Mapping[str, Any],
    files: frozenset[str],
) -> list[dict[str, Any]]:
    """multipart/form-data: one part per property, one per item for arrays of scalars or files.

    OpenAPI 3.1.1 and 3.2 (Encoding Object) allow `style` and `explode` for multipart/form-data too: "If a value
    is explicitly defined, then the value of `contentType` (implicit or explicit) SHALL be ignored". A property
    whose entry sets either is serialised as the urlencoded body would (query_pieces), one text/plain part per
    name=value pair, named like the pair (`file_link_data[create]`), its value the pair's decoded text (the
    percent-encoding belongs to urlencoded bodies; a part carries its bytes as they are)."""
    parts: list[dict[str, Any]] = []
    for name, raw_schema in schema.get("properties", {}).items():
        if name not in arguments or arguments[name] is None:
            continue
        prop = resolve(document, raw_schema)
        value = drop_nulls(arguments[name])
        entry = encoding.get(name, {})
        if "style" in entry or "explode" in entry:
            style = entry.get("style", "form")
            for piece in query_pieces(name, value, style, entry.get("explode", style == "form")):
                key, _, text = piece.partition("=")
                parts.append(
                    {
                        "name": unquote(key),
                        "filename": False,
                        "content_type": "text/plain",
                        "body": unquote(text).encode(),
                    }
                )
            continue
        given_type = entry.get("contentType")
        item_schema = resolve(document, prop.get("items", {})) if isinstance(value, list) else prop
        # The lead's amendment to wire_rules: in a multipart body, a data URL given for a property the document
        # declares as a plain string is a file part too (the agent's way of saying "a file"), of the URL's type.
        data_url = isinstance(value, str) and value.startswith("data:") and ";base64," in value
        binary = name in files or is_binary(item_schema) or (data_url and given_type is None)
        # Arrays of scalars or of files make one part per item; anything else is one part.
        one_per_item = isinstance(value, list) and (binary or all(is_scalar(v) for v in value))
        values = value if one_per_item else [value]
        for one in values:
            if binary:
                data, data_type = decode_file(one)
                content_type = given_type or data_type or "application/octet-stream"
                parts.append({"name": name, "filename": True, "content_type": content_type, "body": data})
            elif is_scalar(one):
                parts.append(
                    {
                        "name": name,
                        "filename": False,
                        "content_type": given_type or "text/plain",
                        "body": text_of(one).encode("utf-8"),
                    }
                )
            else:
                parts.append(
                    {
                        "name": name,
                        "filename": False,
                        "content_type": given_type or "application/json",
                        "body": compact_json(one).encode("utf-8"),
                    }
                )
    return parts


def expected_request(
    document: Mapping[str, Any],
    operation_id: str,
    arguments: Mapping[str, Any],
    aliases: Mapping[str, str] | None = None,
    files: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """The request an operation's call must make, as the `expect` object of a case.

    `aliases` maps an argument name the tool schema uses for a clash (e.g. `StartTime_query`) to the
    document's parameter name (`StartTime<`); `files` names multipart properties to send as files although
    the document does not mark them binary (Stripe's `file`).
    """
    aliases = dict(aliases or {})
    args = {aliases.get(k, k): v for k, v in arguments.items()}
    method, template, operation, item = find_operation(document, operation_id)
    swagger = "swagger" in document
    query: list[str] = []
    headers: dict[str, str] = {}
    cookies: dict[str, str] = {}
    form: list[str] = []
    path = template
    used: set[str] = set()
    for parameter in parameters_of(document, operation, item):
        name, where = parameter["name"], parameter["in"]
        if where == "body" or name not in args or args[name] is None:
            continue
        used.add(name)
        value = args[name]
        if swagger:
            fmt = parameter.get("collectionFormat", "csv")
            if where == "path":
                path = path.replace("{" + name + "}", swagger_pieces(name, value, fmt)[0].split("=", 1)[1])
            elif where == "query":
                query += swagger_pieces(name, value, fmt)
            elif where == "formData":
                form += swagger_pieces(name, value, fmt)
            elif where == "header":
                headers[name] = (
                    simple_text(value, False, encode=False)
                    if not isinstance(value, list)
                    else ({"csv": ",", "ssv": " ", "tsv": "\t", "pipes": "|"}[fmt].join(text_of(v) for v in value))
                )
            continue
        default_style = {"query": "form", "cookie": "form", "path": "simple", "header": "simple"}[where]
        style = parameter.get("style", default_style)
        explode = parameter.get("explode", style == "form")
        if where == "path":
            path = path.replace("{" + name + "}", path_text(name, value, style, explode))
        elif where == "query":
            query += query_pieces(name, value, style, explode)
        elif where == "header":
            headers[name] = simple_text(value, explode, encode=False)
        elif where == "cookie":
            cookies[name] = ",".join(p.split("=", 1)[1] for p in query_pieces(name, value, "form", False))
    expect: dict[str, Any] = {"method": method, "path": path, "query": "&".join(query)}
    if headers:
        expect["headers"] = headers
    if cookies:
        expect["cookies"] = cookies
    if swagger:
        if form:
            expect["content_type"] = "application/x-www-form-urlencoded"
            expect["body"] = "&".join(form)
        else:
            expect["content_type"] = None
            expect["body"] = None
        return expect
    body = resolve(document, operation.get("requestBody", {}))
    content = body.get("content", {})
    rest = {k: v for k, v in args.items() if k not in used}
    if "application/x-www-form-urlencoded" in content:
        media = content["application/x-www-form-urlencoded"]
        schema = resolve(document, media.get("schema", {}))
        encoding = media.get("encoding", {})
        for name in schema.get("properties", {}):
            if name not in rest:
                continue
            entry = encoding.get(name, {})
            if entry.get("contentType", "").startswith("application/json"):
                form.append(f"{pct(name)}={pct(compact_json(drop_nulls(rest[name])))}")
                continue
            style = entry.get("style", "form")
            form += query_pieces(name, rest[name], style, entry.get("explode", style == "form"))
        if form:
            expect["content_type"] = "application/x-www-form-urlencoded"
            expect["body"] = "&".join(form)
            return expect
    elif "multipart/form-data" in content and rest:
        media = content["multipart/form-data"]
        schema = resolve(document, media.get("schema", {}))
        parts = multipart_parts(document, schema, media.get("encoding", {}), rest, files)
        expect["content_type"] = "multipart/form-data"
        expect["multipart"] = [
            {
                "name": part["name"],
                "filename": part["filename"],
                "content_type": part["content_type"],
                "body_base64": base64.b64encode(part["body"]).decode("ascii"),
            }
            for part in parts
        ]
        return expect
    elif any(t == "application/json" or t.endswith("+json") for t in content) and rest:
        media_type = next(t for t in content if t == "application/json" or t.endswith("+json"))
        expect["content_type"] = media_type
        expect["body"] = compact_json(rest)
        expect["json"] = rest
        return expect
    expect["content_type"] = None
    expect["body"] = None
    return expect
