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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from progressive_mcp.catalog import Auth, CatalogTool, Operation, Param, _thaw
from progressive_mcp.errors import InvalidArguments, ToolError, clip

# Headers an argument may never set: the credentials (whatever the API's own auth header is called, see
# `reserved_headers`), and the ones that frame the request, which httpx writes itself.
FRAMING_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "cookie",
        "host",
        "content-length",
        "content-type",
        "transfer-encoding",
        "connection",
    }
)
FORM = "application/x-www-form-urlencoded"
JSON_TYPE = "application/json"
MULTIPART = "multipart/form-data"
OCTETS = "application/octet-stream"
_PLACEHOLDER = re.compile(r"\{([^{}]+)\}")
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
    paths would otherwise fold it into its parent and reach another resource.
    """
    by_wire = {p.upstream_name: p for p in tool.params if p.location == "path"}
    segments = []
    for segment in operation.path.split("/"):
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
    """One path parameter's value, encoded: styles simple (the default), label (`.`) and matrix (`;`)."""
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
    default), spaceDelimited, pipeDelimited and deepObject. The name comes first so callers can drop a pair
    whose name is taken (an exploded object's member called like the key parameter)."""
    name = param.upstream_name
    style = param.style or "form"
    explode = param.explode if param.explode is not None else style == "form"
    if not isinstance(value, list | dict):
        return [(name, f"{_pct(name)}={_pct(_text(value))}")]
    if not value:
        return []  # an empty list or object is no value at all (RFC 6570): nothing is sent
    if isinstance(value, dict) and style == "deepObject":
        return [
            (f"{name}[{member}]", f"{_pct(name)}[{_pct(member)}]={_pct(_text(v))}")
            for member, v in value.items()
            if v is not None
        ]
    if isinstance(value, dict) and explode:
        return [(member, f"{_pct(member)}={_pct(_text(v))}") for member, v in value.items() if v is not None]
    if isinstance(value, list) and (explode or style == "deepObject"):
        return [(name, f"{_pct(name)}={item}") for item in _items(value)]
    delimiter = {"spaceDelimited": "%20", "pipeDelimited": "|"}.get(style, ",")
    items = _object_items(value, explode=False) if isinstance(value, dict) else _items(value)
    return [(name, f"{_pct(name)}=" + delimiter.join(items))]


def header_value(param: Param, value: Any) -> str:
    """A header parameter's value, style simple: `a,b` for a list, `k,v` (or `k=v` exploded) for an object."""
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
    of one object ("members", absent ones left out); (None, None) when there is none."""
    body_params = [p for p in tool.params if p.location == "body"]
    if operation.body == "whole":
        value = arguments.get(body_params[0].name) if body_params else None
        if value is None:
            return None, None
        if body_params and _base64(body_params[0]) and not operation.body_type.lower().startswith(("text/",)):
            return _decoded(tool, body_params[0], value), operation.body_type  # a raw binary body (an image)
    elif operation.body == "members":
        if operation.body_type.lower().startswith(MULTIPART):
            return multipart_body(tool, [(p, arguments[p.name]) for p in body_params if p.name in arguments])
        value = {p.upstream_name: arguments[p.name] for p in body_params if p.name in arguments}
    else:
        return None, None
    return encode_body(tool, operation.body_type, value)


def multipart_body(tool: CatalogTool, members: list[tuple[Param, Any]]) -> tuple[bytes, str]:
    """A multipart/form-data body: file members (base64 strings in the arguments) as file parts of their decoded
    bytes, the others as fields (lists repeated, nested values as JSON text). Encoded by httpx, the HTTP library
    the calls go through (a part without a filename is a plain field), so boundary and quoting are its own."""
    import httpx  # already imported by the first upstream call

    parts: list[tuple[str, tuple[str | None, str | bytes, str | None]]] = []
    for param, value in members:
        if _base64(param):
            parts.append((param.upstream_name, (param.upstream_name, _decoded(tool, param, value), OCTETS)))
        else:
            parts += [(name, (None, text, None)) for name, text in form_pairs({param.upstream_name: value})]
    request = httpx.Request("POST", "http://multipart.invalid/", files=parts)
    return request.read(), request.headers["content-type"]


def _base64(param: Param) -> bool:
    return param.schema is not None and param.schema.get("contentEncoding") == "base64"


def _decoded(tool: CatalogTool, param: Param, value: Any) -> bytes:
    if not isinstance(value, str):
        raise _invalid(tool, f"{param.name} is a file's content: give it as a base64 string")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise _invalid(tool, f"{param.name} is not valid base64 (a file's content, base64-encoded)") from None


def encode_body(tool: CatalogTool, body_type: str, value: Any) -> tuple[bytes, str]:
    """`value` as a body of `body_type`: compact JSON (any JSON media type), a urlencoded form (lists repeated,
    nested values as JSON text), or text; other types (multipart, binary) cannot be made from JSON arguments."""
    media = body_type.split(";")[0].strip().lower()
    if media == "application/json" or media.endswith("+json"):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8"), body_type
    if media == FORM:
        if not isinstance(value, dict):
            raise _invalid(tool, f"the body is sent as a form, so it must be an object, not {type(value).__name__}")
        return urlencode(list(form_pairs(value))).encode("ascii"), FORM
    if media.startswith("text/") or isinstance(value, str):  # XML, SDP, YAML…: the string as it is
        text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        content_type = body_type if "charset" in body_type.lower() else f"{body_type}; charset=utf-8"
        return text.encode("utf-8"), content_type
    raise ToolError(f"{tool.name} sends a {body_type} body, which this server cannot make from JSON arguments.")


def form_pairs(members: Mapping[str, Any]) -> Iterable[tuple[str, str]]:
    """An object as form fields: a list repeats its field, a nested object or list is sent as JSON text."""
    for name, value in members.items():
        for item in value if isinstance(value, list) else [value]:
            if item is not None:
                yield str(name), _text(item)


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
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


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
