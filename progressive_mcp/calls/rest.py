"""A REST operation's request from its arguments: path, query string, headers, cookies and body, serialised the way
OpenAPI 3 says (`style`, `explode`) and encoded so that no value can change the request's shape.

A path value stays inside its segment (`../admin` is sent as `..%2Fadmin`, a whole `..` as `%2E%2E`, which no
server folds away), a query value inside its parameter, a header value on its line (CR/LF is refused), and no
argument can set the credentials, the framing headers or a fixed parameter. The key itself is added by the
upstream client. Example::

    parts = rest_parts(tool, {"id": "../admin", "tags": ["a", "b"]}, auth=None)  # GET /items/{id}?tags=...
    parts.path, parts.query     # ('/items/..%2Fadmin', ('tags=a', 'tags=b'))
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from progressive_mcp.catalog import FRAMING_HEADERS, Auth, CatalogTool, Operation, Param, _thaw
from progressive_mcp.errors import InvalidArguments, ToolError, clip

FORM = "application/x-www-form-urlencoded"
JSON_TYPE = "application/json"
MULTIPART = "multipart/form-data"
OCTETS = "application/octet-stream"
_PLACEHOLDER = re.compile(r"\{([^{}]+)\}")
# Swagger 2.0's collectionFormat: the delimiter between an array's items, as it goes in a query ("multi" repeats
# the parameter instead; in a path or header it is csv).
COLLECTION_DELIMITERS = {"csv": ",", "ssv": "%20", "tsv": "%09", "pipes": "|"}
# A cookie value may hold every visible ASCII character but `"` `,` `;` `\` (RFC 6265 cookie-octet); `%` is
# encoded too, so that the encoding can be undone.
COOKIE_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) not in '"%,;\\')


@dataclass(frozen=True, slots=True)
class RestParts:
    """The pieces of one REST request, every one already encoded for the wire (the key not yet added)."""

    path: str  # the operation's path template with each value percent-encoded into it
    query: tuple[str, ...]  # `name=value` pairs, percent-encoded, in order (style delimiters kept as they are)
    headers: tuple[tuple[str, str], ...]
    cookies: tuple[str, ...]  # `name=value` pairs for one Cookie header
    body: bytes | None
    content_type: str | None


def rest_parts(tool: CatalogTool, arguments: Mapping[str, Any], auth: Auth | None) -> RestParts:
    """The request a call of a REST tool makes, from validated arguments; raises InvalidArguments for a value
    that cannot be sent (a missing or empty path value, a line break in a header).

    Arguments the tool does not declare are not sent (validation has refused them already), nor are values that
    would land on the auth parameter, a fixed parameter or a framing header (`reserved_headers`).
    """
    operation = tool.operation
    if operation is None:
        raise ValueError(f"{tool.name} is not a REST operation")
    fixed = set(tool.fixed)
    query_reserved = fixed | ({auth.name} if auth is not None and auth.in_ == "query" else set())
    cookie_reserved = {auth.name} if auth is not None and auth.in_ == "cookie" else set()
    header_reserved = reserved_headers(auth)
    query: list[str] = []
    headers: list[tuple[str, str]] = []
    cookies: list[str] = []
    for param in tool.params:
        value = arguments.get(param.name)
        if value is None:
            continue
        if param.location == "query":
            query += [pair for name, pair in query_pairs(param, value) if name not in query_reserved]
        elif param.location == "header" and param.upstream_name.lower() not in header_reserved:
            headers.append((param.upstream_name, _header_line(tool, param, header_value(param, value))))
        elif param.location == "cookie":
            cookies += [pair for name, pair in cookie_pairs(param, value) if name not in cookie_reserved]
    query += [f"{_pct(name)}={_pct(value)}" for name, value in tool.fixed.items()]
    body, content_type = request_body(tool, operation, arguments)
    return RestParts(
        path=fill_path(tool, operation, arguments),
        query=tuple(query),
        headers=tuple(headers),
        cookies=tuple(cookies),
        body=body,
        content_type=content_type,
    )


def request_url(tool: CatalogTool, base_url: str, path: str) -> str:
    """The URL of a REST call: the base URL with the filled path after it. Raises ToolError, before anything is
    sent, when that URL would name another scheme, host or port than the base URL: a path that does not start
    with `/` continues the base URL's authority (`http://127.0.0.1:1810` + `2/v1` is port 18102, `@evil/x`
    makes the host userinfo), and the key would go with the call."""
    url = base_url.rstrip("/") + path
    if _authority(url) != _authority(base_url) or _authority(url) is None:
        template = tool.operation.path if tool.operation is not None else path
        raise ToolError(
            f"{tool.name} cannot be called: its request would go to another server than the API's; nothing was "
            f"sent (its path {clip(template)!r} does not start with /, so it can change the host; the catalog "
            "it came from must be fixed)."
        )
    return url


def _authority(url: str) -> tuple[str, str, str | None, int | None] | None:
    """(scheme, userinfo and host as written, host, port) of a URL; None when it has no valid authority."""
    try:
        parts = urlsplit(url)
        return parts.scheme.lower(), parts.netloc.lower(), parts.hostname, parts.port
    except ValueError:  # a port that is not a number, a broken IPv6 literal
        return None


def reserved_headers(auth: Auth | None) -> frozenset[str]:
    """Lower-case names of the headers no argument may set: the framing ones and the API's auth header."""
    if auth is not None and auth.in_ == "header":
        return FRAMING_HEADERS | {auth.name.lower()}
    return FRAMING_HEADERS


# --- the path ---------------------------------------------------------------------------------------------------


def fill_path(tool: CatalogTool, operation: Operation, arguments: Mapping[str, Any]) -> str:
    """The path template with each `{name}` replaced by its value, encoded so it stays in its segment.

    A segment that comes out as dots alone (`.`, `..`) has them sent as `%2E`: a server or proxy that normalises
    paths would otherwise fold it into its parent and reach another resource. A fragment in the template (APIs.guru
    tells apart Azure's overloads of one path so: `/apis/{apiId}#export=true`) is not part of the request: sent,
    it would swallow the query string after it.
    """
    by_wire = {p.upstream_name: p for p in tool.params if p.location == "path"}
    segments = []
    for segment in operation.path.split("#", 1)[0].split("/"):
        names = _PLACEHOLDER.findall(segment)
        if not names:
            segments.append(segment)
            continue
        filled = _PLACEHOLDER.sub(
            lambda m: _path_value(tool, operation, by_wire.get(m.group(1)), m.group(1), arguments), segment
        )
        if not filled:
            shown = ", ".join(names)
            raise _invalid(tool, f"{shown}: a path value cannot be empty (the URL would name another resource)")
        if not filled.strip("."):
            filled = filled.replace(".", "%2E")
        segments.append(filled)
    return "/".join(segments)


def _path_value(
    tool: CatalogTool, operation: Operation, param: Param | None, placeholder: str, arguments: Mapping[str, Any]
) -> str:
    if param is None:  # a catalog whose template names a parameter the tool lacks: not the caller's doing
        raise ToolError(f"{tool.name} cannot be called: its path has {{{placeholder}}}, which it defines no value for.")
    value = arguments.get(param.name)
    if value is None:
        raise _invalid(tool, f"{param.name} is required: it is part of the URL path ({operation.path})")
    return path_value(param, value)


def path_value(param: Param, value: Any) -> str:
    """One path parameter's value, encoded: styles simple (the default), label (`.`) and matrix (`;`), or a Swagger
    2.0 collectionFormat."""
    if param.collection_format is not None and isinstance(value, list):
        return COLLECTION_DELIMITERS.get(param.collection_format, ",").join(_items(value))
    style = param.style or "simple"
    explode = bool(param.explode)  # false unless the spec says otherwise, for every path style
    name = _pct(param.upstream_name)
    if style == "label":
        if isinstance(value, list | dict) and not value:
            return ""  # an empty list or object is no value at all (RFC 6570)
        items = _object_items(value, explode) if isinstance(value, dict) else _items(value)
        return "." + ("." if explode else ",").join(items)
    if style == "matrix":
        if isinstance(value, list | dict) and not value:
            return ""
        if isinstance(value, dict):
            if explode:
                return "".join(f";{item}" for item in _object_items(value, explode=True))
            return f";{name}=" + ",".join(_object_items(value, explode=False))
        if isinstance(value, list) and explode:
            return "".join(f";{name}={item}" for item in _items(value))
        joined = ",".join(_items(value))
        return f";{name}={joined}" if joined else f";{name}"  # an empty string is `;name` (RFC 6570)
    if isinstance(value, dict):
        return ",".join(_object_items(value, explode))
    return ",".join(_items(value))


# --- query, headers, cookies ------------------------------------------------------------------------------------


def query_pairs(param: Param, value: Any) -> list[tuple[str, str]]:
    """A query parameter as (name on the wire, encoded `name=value`) pairs: styles form (default, exploded by
    default), spaceDelimited, pipeDelimited and deepObject, or Swagger 2.0's collectionFormat. The name comes first
    so callers can drop a pair whose name is taken (an exploded object's member called like the key parameter)."""
    return styled_pairs(param.upstream_name, value, param.style, param.explode, param.collection_format)


def styled_pairs(
    name: str, value: Any, style: str | None, explode: bool | None, collection_format: str | None = None
) -> list[tuple[str, str]]:
    """One value as query (or form body) pairs, styled as OpenAPI's Style Values table says; see `query_pairs`."""
    if value is None:
        return []
    style = style or "form"
    explode = explode if explode is not None else style == "form"
    if collection_format is not None and isinstance(value, list):
        if collection_format == "multi":
            return [(name, f"{_pct(name)}={item}") for item in _items(value)]
        delimiter = COLLECTION_DELIMITERS.get(collection_format, ",")
        return [(name, f"{_pct(name)}=" + delimiter.join(_items(value)))] if _items(value) else []
    if not isinstance(value, list | dict):
        return [(name, f"{_pct(name)}={_pct(_text(value))}")]
    if not value:
        return []  # an empty list or object is no value at all (RFC 6570): nothing is sent
    if style == "deepObject":
        return deep_pairs(name, _pct(name), value)
    if isinstance(value, dict) and explode:
        return [(member, f"{_pct(member)}={_pct(_text(v))}") for member, v in value.items() if v is not None]
    if isinstance(value, list) and explode:
        return [(name, f"{_pct(name)}={item}") for item in _items(value)]
    delimiter = {"spaceDelimited": "%20", "pipeDelimited": "|"}.get(style, ",")
    items = _object_items(value, explode=False) if isinstance(value, dict) else _items(value)
    return [(name, f"{_pct(name)}=" + delimiter.join(items))] if items else []


def deep_pairs(wire: str, key: str, value: Any) -> list[tuple[str, str]]:
    """A value in deepObject style under the encoded key `key`: an object's members as `key[member]`, nested to any
    depth; an array of scalars as `key[]` each; an array holding objects or arrays indexed from 0, `key[0][...]`.
    Null members and items are left out (and the rest indexed as if they had never been there)."""
    if isinstance(value, dict):
        return [
            pair
            for member, item in value.items()
            if item is not None
            for pair in deep_pairs(f"{wire}[{member}]", f"{key}[{_pct(str(member))}]", item)
        ]
    if isinstance(value, list):
        items = [item for item in value if item is not None]
        if all(not isinstance(item, list | dict) for item in items):
            return [(f"{wire}[]", f"{key}[]={_pct(_text(item))}") for item in items]
        return [pair for i, item in enumerate(items) for pair in deep_pairs(f"{wire}[{i}]", f"{key}[{i}]", item)]
    return [(wire, f"{key}={_pct(_text(value))}")]


def header_value(param: Param, value: Any) -> str:
    """A header parameter's value, style simple: `a,b` for a list, `k,v` (or `k=v` exploded) for an object; a
    Swagger 2.0 collectionFormat's delimiter, as it is, for a list."""
    if param.collection_format is not None and isinstance(value, list):
        delimiter = unquote(COLLECTION_DELIMITERS.get(param.collection_format, ","))
        return delimiter.join(_text(item) for item in value if item is not None)
    if isinstance(value, dict):
        members = [(str(k), _text(v)) for k, v in value.items() if v is not None]
        if param.explode:
            return ",".join(f"{k}={v}" for k, v in members)
        return ",".join(part for member in members for part in member)
    if isinstance(value, list):
        return ",".join(_text(item) for item in value if item is not None)
    return _text(value)


def cookie_pairs(param: Param, value: Any) -> list[tuple[str, str]]:
    """A cookie parameter as (cookie name, `name=value`) pairs, style form: a list is repeated (exploded, the
    default) or comma-joined; an exploded object's members are cookies of their own."""
    name = param.upstream_name
    explode = param.explode if param.explode is not None else True
    if not isinstance(value, list | dict):
        return [(name, f"{_cookie(name)}={_cookie(_text(value))}")]
    if isinstance(value, dict):
        members = [(str(k), _text(v)) for k, v in value.items() if v is not None]
        if explode:
            return [(k, f"{_cookie(k)}={_cookie(v)}") for k, v in members]
        return [(name, f"{_cookie(name)}=" + ",".join(_cookie(part) for member in members for part in member))]
    items = [_cookie(_text(item)) for item in value if item is not None]
    if explode:
        return [(name, f"{_cookie(name)}={item}") for item in items]
    return [(name, f"{_cookie(name)}=" + ",".join(items))] if items else []


def bad_header_text(text: str) -> str | None:
    """Why `text` cannot be a header value (a line break would start a header of the caller's own), or None."""
    if any(c in text for c in "\r\n"):
        return "holds a line break (CR or LF), which would start another header"
    if any((ord(c) < 0x20 and c != "\t") or ord(c) == 0x7F for c in text):
        return "holds a control character"
    if not text.isascii():
        return "holds non-ASCII characters, which an HTTP header cannot carry"
    return None


def _header_line(tool: CatalogTool, param: Param, text: str) -> str:
    problem = bad_header_text(text)
    if problem:
        raise _invalid(tool, f"{param.name} is sent as the {param.upstream_name} header and {problem}")
    return text


# --- the body ---------------------------------------------------------------------------------------------------


def request_body(
    tool: CatalogTool, operation: Operation, arguments: Mapping[str, Any]
) -> tuple[bytes | None, str | None]:
    """The body and its content type: the `body` argument itself ("whole"), or the body arguments as the members
    of one object ("members", absent ones left out, a given null kept in JSON); (None, None) when there is none,
    including a members body none of whose members was given (so a request without a body carries no Content-Type
    either)."""
    body_params = [p for p in tool.params if p.location == "body"]
    media = operation.body_type.split(";")[0].strip().lower()
    if operation.body == "whole":
        value = arguments.get(body_params[0].name) if body_params else None
        if value is None:
            return None, None
        if body_params and is_binary(body_params[0].schema) and not media.startswith("text/"):
            content, given_type = decoded_file(tool, body_params[0], value)  # a raw binary body (an image)
            if "*" in media:  # the document allows any type (`image/*`): the data URL says which
                return content, given_type or OCTETS
            return content, operation.body_type
        if media == FORM and isinstance(value, dict):
            return form_body([(_form_member(str(name)), v) for name, v in value.items()])
        if media.startswith(MULTIPART) and isinstance(value, dict):
            return multipart_body(tool, [(_form_member(str(name)), v) for name, v in value.items()])
        return encode_body(tool, operation.body_type, value)
    if operation.body != "members":
        return None, None
    # A null the caller gave (its schema allows it, or validation would have refused it) is sent in a JSON body,
    # where it differs from an absent member (Vtex's `defaultSla`, required and nullable); a form has no null.
    nulls = not media.startswith(MULTIPART) and media != FORM
    members = [(p, arguments[p.name]) for p in body_params if p.name in arguments]
    members = [(p, value) for p, value in members if value is not None or nulls]
    if not members:
        return None, None
    if media.startswith(MULTIPART):
        return multipart_body(tool, members)
    if media == FORM:
        return form_body(members)
    return encode_body(tool, operation.body_type, {p.upstream_name: value for p, value in members})


def _form_member(name: str) -> Param:
    """A member of a form body the document describes no further (a whole form body's key): style form."""
    return Param(name=name, type="string", required=False, location="body")


def form_body(members: list[tuple[Param, Any]]) -> tuple[bytes, str]:
    """An application/x-www-form-urlencoded body: each member styled like a query parameter of its name, with its
    Encoding's style and explode (default form, exploded) or Swagger's collectionFormat, or as compact JSON text
    when its Encoding's contentType is JSON; in the order given, every value percent-encoded (space `%20`)."""
    pieces: list[str] = []
    for param, value in members:
        name = param.upstream_name
        if param.content_type is not None and _is_json(param.content_type):
            pieces.append(f"{_pct(name)}={_pct(_json(value))}")
        else:
            styled = styled_pairs(name, value, param.style, param.explode, param.collection_format)
            pieces += [pair for _, pair in styled]
    return "&".join(pieces).encode("ascii"), FORM


def multipart_body(tool: CatalogTool, members: list[tuple[Param, Any]]) -> tuple[bytes | None, str | None]:
    """A multipart/form-data body: a part per member, and a part per item of an array of scalars or of files.

    A file (binary) part carries the decoded bytes of a base64 string or data URL, with a filename; its type is
    the Encoding's contentType, else the data URL's, else application/octet-stream. Other parts: the Encoding's
    contentType (JSON ones get compact JSON), else text/plain for a scalar (its text) and application/json for an
    object or an array of objects. A member whose Encoding sets style or explode goes as a form body's pairs would,
    a text/plain part per pair (`meta[key]`). Encoding headers are added to the part. Encoded by httpx, the HTTP
    library the calls go through, so boundary and quoting are its own; no part at all is no body."""
    import httpx  # already imported by the first upstream call

    parts: list[tuple[str, tuple[str | None, bytes, str, dict[str, str]]]] = []
    for param, value in members:
        name = param.upstream_name
        values = value if isinstance(value, list) else [value]
        if is_binary(param.schema) or (isinstance(value, list) and is_binary(_items_schema(param.schema))):
            for item in values:
                if item is not None:
                    content, given_type = decoded_file(tool, param, item)
                    parts.append((name, (name, content, param.content_type or given_type or OCTETS, _headers(param))))
        elif param.style is not None or param.explode is not None:
            # An Encoding Object that sets style or explode serialises the member as a urlencoded body would, and
            # its contentType is then ignored (OpenAPI 3.1.1/3.2): one text part per pair, named like the pair
            # (Stripe's file_link_data[create]), holding the pair's text itself, not percent-encoded.
            for wire, pair in styled_pairs(name, value, param.style, param.explode, param.collection_format):
                text = unquote(pair.partition("=")[2])
                parts.append((wire, (None, text.encode("utf-8"), "text/plain", _headers(param))))
        elif isinstance(value, str) and param.content_type is None and _DATA_URL.fullmatch(value):
            # A document may declare a file as a plain string (Stripe's PostFiles `file` before it said `format:
            # binary`); a data URL is the agent saying "this is a file", so it goes as one, of the URL's type.
            content, given_type = decoded_file(tool, param, value)
            parts.append((name, (name, content, given_type or OCTETS, _headers(param))))
        elif param.content_type is not None and _is_json(param.content_type):
            parts.append((name, (None, _json(value).encode("utf-8"), param.content_type, _headers(param))))
        elif isinstance(value, dict) or any(isinstance(item, list | dict) for item in values):
            parts.append((name, (None, _json(value).encode("utf-8"), param.content_type or JSON_TYPE, _headers(param))))
        else:
            parts += [
                (name, (None, _text(item).encode("utf-8"), param.content_type or "text/plain", _headers(param)))
                for item in values
                if item is not None
            ]
    if not parts:
        return None, None
    request = httpx.Request("POST", "http://multipart.invalid/", files=parts)
    return request.read(), request.headers["content-type"]


def _headers(param: Param) -> dict[str, str]:
    """A part's own headers (a new dict each time: httpx adds the part's Content-Type to the one it is given)."""
    return dict(param.part_headers or {})


def is_binary(schema: Mapping[str, Any] | None) -> bool:
    """Whether an argument is a file's content (base64 or a data URL), as the importer marks it."""
    if schema is None:
        return False
    if schema.get("contentEncoding") == "base64":
        return True
    return any(is_binary(option) for key in ("anyOf", "oneOf") for option in schema.get(key) or ())


def _items_schema(schema: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    if schema is None:
        return None
    if isinstance(schema.get("items"), Mapping):
        return schema["items"]  # type: ignore[no-any-return]
    for key in ("anyOf", "oneOf"):
        for option in schema.get(key) or ():
            if option.get("type") == "array" and isinstance(option.get("items"), Mapping):
                return option["items"]  # type: ignore[no-any-return]
    return None


_DATA_URL = re.compile(r"data:([^,]*?);base64,(.*)", re.DOTALL | re.IGNORECASE)


def decoded_file(tool: CatalogTool, param: Param, value: Any) -> tuple[bytes, str | None]:
    """A file's bytes from base64 text or a data URL (`data:<type>;base64,<data>`), and the data URL's type."""
    if not isinstance(value, str):
        raise _invalid(tool, f"{param.name} is a file's content: give it as a base64 string or a data URL")
    given_type, data = None, value
    if value[:5].lower() == "data:":
        match = _DATA_URL.fullmatch(value)
        if match is None:
            raise _invalid(tool, f"{param.name} is a data URL without base64 data (data:<type>;base64,<data>)")
        given_type, data = match.group(1).strip() or None, match.group(2)
    try:
        return base64.b64decode("".join(data.split()), validate=True), given_type
    except (binascii.Error, ValueError):
        raise _invalid(
            tool, f"{param.name} is not valid base64 (a file's content: base64, or a data URL data:<type>;base64,...)"
        ) from None


# A media range a document gives as a body's type, and the type sent for a string and for any other value
_ANY_TYPE = {
    "*/*": ("text/plain; charset=utf-8", JSON_TYPE),
    "text/*": ("text/plain; charset=utf-8", "text/plain; charset=utf-8"),
    "application/*": ("application/octet-stream", JSON_TYPE),
}


def encode_body(tool: CatalogTool, body_type: str, value: Any) -> tuple[bytes, str]:
    """`value` as a body of `body_type`: compact JSON (any JSON media type), the urlencoded form a string holds
    (an object's is made by the caller), text, or under a media range (`*/*`) a string as text and anything else as
    JSON; other types (multipart, binary) cannot be made from JSON arguments."""
    media = body_type.split(";")[0].strip().lower()
    if media in _ANY_TYPE:  # a range (a proxy's `*/*`) is no Content-Type: a string as text, the rest as JSON
        given_text = isinstance(value, str)
        concrete = _ANY_TYPE[media][0 if given_text else 1]
        return (value if given_text else _json(value)).encode("utf-8"), concrete
    if _is_json(media):
        return _json(value).encode("utf-8"), body_type
    if media.startswith(MULTIPART):  # a part needs a name, and this document's body (a bare string) gives none
        raise ToolError(
            f"{tool.name} sends a {media} body whose parts its document does not name (its schema is not an "
            "object), so this server cannot make it from JSON arguments."
        )
    if media == FORM:
        if isinstance(value, str):  # a document whose form body is a string: the form as the caller encoded it
            return value.encode("utf-8"), body_type
        raise ToolError(  # the schema allowed it (validation comes first), so the document is what cannot be met
            f"{tool.name} sends a form body, which holds an object's members or an encoded form, and its document "
            f"lets it be a {type(value).__name__}: this server cannot make such a body."
        )
    if media.startswith("text/") or isinstance(value, str):  # XML, SDP, YAML…: the string as it is
        text = value if isinstance(value, str) else _json(value)
        content_type = body_type if "charset" in body_type.lower() else f"{body_type}; charset=utf-8"
        return text.encode("utf-8"), content_type
    raise ToolError(f"{tool.name} sends a {body_type} body, which this server cannot make from JSON arguments.")


def _is_json(media: str) -> bool:
    media = media.split(";")[0].strip().lower()
    return media == JSON_TYPE or media.endswith("+json")


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


# --- values -----------------------------------------------------------------------------------------------------


def _text(value: Any) -> str:
    """A value as the text the upstream reads: booleans as true/false, numbers as written, anything nested as
    compact JSON (no OpenAPI style says how to flatten a list inside a list)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return str(value)
    return _json(value)


def _pct(text: str) -> str:
    """Percent-encoded so that nothing but letters, digits and `-._~` is left: no `/`, `?`, `#`, `&`, `=`, `,`
    or `%` of a value can be read as structure."""
    return quote(text, safe="")


def _cookie(text: str) -> str:
    return quote(text, safe=COOKIE_SAFE)


def _items(value: Any) -> list[str]:
    """A list's items (or a lone value), each encoded, None left out."""
    values = value if isinstance(value, list) else [value]
    return [_pct(_text(item)) for item in values if item is not None]


def _object_items(value: Mapping[str, Any], explode: bool) -> list[str]:
    """An object's members, encoded: `k=v` each when exploded, else `k`, `v` in turn."""
    members = [(_pct(str(k)), _pct(_text(v))) for k, v in value.items() if v is not None]
    if explode:
        return [f"{k}={v}" for k, v in members]
    return [part for member in members for part in member]


def _invalid(tool: CatalogTool, problem: str) -> InvalidArguments:
    return InvalidArguments(tool.name, [problem], _thaw(tool.input_schema))
