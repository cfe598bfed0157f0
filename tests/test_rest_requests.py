"""Calling REST operations: how each argument goes on the wire (path, query, header, cookie, body, per OpenAPI 3
style and explode), where the key goes (query, header, cookie, bearer, basic; the server's key or the caller's),
path values that try to escape their segment, what an answer means (404, 204, text, an empty list), which
methods are retried, and which calls are cached.

Most tests record the `UpstreamRequest`s a fake transport is given; the last ones send real HTTP with
`HttpxTransport` to a small stdlib server on 127.0.0.1 that keeps the raw request line, headers and body, to
prove the encoding survives httpx.

Run with: .venv/bin/python -m pytest tests/test_rest_requests.py -q
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Literal

import pytest
from factories import make_tool

from progressive_mcp.calls.cache import SERVER, MemoryCache, cache_key, caller_entitlement
from progressive_mcp.calls.upstream import (
    HttpxTransport,
    TransportError,
    UpstreamClient,
    UpstreamRequest,
    UpstreamResponse,
)
from progressive_mcp.catalog import (
    Api,
    Auth,
    Catalog,
    CatalogTool,
    Dispatch,
    Operation,
    Param,
)
from progressive_mcp.errors import (
    InvalidArguments,
    MissingApiKey,
    RateLimited,
    ToolError,
    UpstreamBadResponse,
    UpstreamError,
    UpstreamRejected,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from progressive_mcp.surfaces.surface import CallContext, Surface

KEY = "ReSt-SeRvEr-KEY-7731"
CALLER_KEY = "CaLLeR-own-KEY-0042"
BASE = "https://things.example/v1/"
FORM_TYPE = "application/x-www-form-urlencoded"
COLORS = ["blue", "black", "brown"]
RGB = {"R": 100, "G": 200, "B": 150}


# --- building catalogs by hand ----------------------------------------------------------------------------------


def param(name: str, location: str = "query", *, required: bool = False, **fields: Any) -> Param:
    kind = fields.pop("type", "string")
    return Param(name=name, type=kind, required=required, location=location, **fields)


def array_param(name: str, location: str = "query", **fields: Any) -> Param:
    return param(name, location, type="array", schema={"type": "array", "items": {"type": "string"}}, **fields)


def object_param(name: str, location: str = "query", **fields: Any) -> Param:
    return param(name, location, type="object", schema={"type": "object"}, **fields)


def rest_tool(
    name: str,
    method: str,
    path: str,
    params: list[Param],
    *,
    body: Literal["whole", "members"] | None = None,
    body_type: str = "application/json",
    fixed: dict[str, str] | None = None,
    cache_ttl_s: int = 0,
) -> CatalogTool:
    operation = Operation(method, path, operation_id=name, body=body, body_type=body_type)
    return tool_of(name, tuple(params), method=method, operation=operation, fixed=fixed, cache_ttl_s=cache_ttl_s)


def tool_of(
    name: str,
    params: tuple[Param, ...],
    *,
    method: str = "GET",
    operation: Operation | None = None,
    fixed: dict[str, str] | None = None,
    cache_ttl_s: int = 0,
) -> CatalogTool:
    description = f"{name}, a tool made by hand for these tests."
    return make_tool(
        name, params, description=description, method=method, operation=operation, fixed=fixed, cache_ttl_s=cache_ttl_s
    )


def rest_api(auth: Auth | None = None, base_url: str = BASE) -> Api:
    return Api(name="things", title="Things API", base_url=base_url, auth=auth)


def catalog_of(api: Api, *tools: CatalogTool) -> Catalog:
    return Catalog.build(api, {"things": "Things and their parts."}, tools)


QUERY_AUTH = Auth(in_="query", name="api_key", env="THINGS_KEY")
HEADER_AUTH = Auth(in_="header", name="X-API-Key", env="THINGS_KEY")


# --- a fake transport -------------------------------------------------------------------------------------------


def answer(payload: Any = None, status: int = 200, content_type: str = "application/json") -> UpstreamResponse:
    body = b"" if payload is None else payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return UpstreamResponse(status, {"content-type": content_type} if content_type else {}, body)


class RecordingTransport:
    """Records every request; answers with the scripted responses in turn (then `{"ok": true}`)."""

    def __init__(self, *script: UpstreamResponse | TransportError) -> None:
        self.script = list(script)
        self.sent: list[UpstreamRequest] = []

    def send(self, request: UpstreamRequest) -> UpstreamResponse:
        self.sent.append(request)
        step = self.script.pop(0) if self.script else answer({"ok": True})
        if isinstance(step, TransportError):
            raise step
        return step


def client_for(api: Api, transport: Any, retries: int = 2) -> UpstreamClient:
    return UpstreamClient(api, transport=transport, retries=retries, backoff_s=0.0, sleep=lambda _s: None)


def sent(
    tool: CatalogTool, arguments: dict[str, Any], auth: Auth | None = None, key: str | None = KEY
) -> UpstreamRequest:
    """The one request a call makes (built and sent through a recording transport)."""
    transport = RecordingTransport()
    client_for(rest_api(auth), transport).call(tool, arguments, key)
    (request,) = transport.sent
    return request


def headers_of(request: UpstreamRequest) -> dict[str, str]:
    return {name.lower(): value for name, value in request.headers}


# --- the path ---------------------------------------------------------------------------------------------------

ITEM = rest_tool("getItem", "GET", "/items/{id}", [param("id", "path", required=True)])


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ("plain-id_1.2~", "/items/plain-id_1.2~"),
        ("../admin", "/items/..%2Fadmin"),
        ("a/b", "/items/a%2Fb"),
        ("..", "/items/%2E%2E"),
        (".", "/items/%2E"),
        ("...", "/items/%2E%2E%2E"),
        ("%2e%2e", "/items/%252e%252e"),
        ("%2F", "/items/%252F"),
        ("?x=1", "/items/%3Fx%3D1"),
        ("#top", "/items/%23top"),
        ("a;b=c", "/items/a%3Bb%3Dc"),
        ("a b+c", "/items/a%20b%2Bc"),
        ("\r\nHost: evil", "/items/%0D%0AHost%3A%20evil"),
        ("café/日本", "/items/caf%C3%A9%2F%E6%97%A5%E6%9C%AC"),
        ("x" * 2000, "/items/" + "x" * 2000),
        (42, "/items/42"),
        (True, "/items/true"),
    ],
)
def test_a_path_value_stays_inside_its_segment(value: Any, path: str) -> None:
    request = sent(ITEM, {"id": value})
    assert request.url == "https://things.example/v1" + path
    assert request.query == "" and request.method == "GET" and request.body is None


def test_several_path_values_and_the_base_url_slash() -> None:
    tool = rest_tool(
        "getRepo",
        "GET",
        "/repos/{owner}/{repo}/contents/{file}",
        [param("owner", "path", required=True), param("repo", "path", required=True), param("file", "path")],
    )
    request = sent(tool, {"owner": "..", "repo": "x/../y", "file": "a.txt"})
    assert request.url == "https://things.example/v1/repos/%2E%2E/x%2F..%2Fy/contents/a.txt"


def test_a_fragment_in_the_path_template_is_not_sent() -> None:
    """APIs.guru's keys for overloads of one path (`/apis/{apiId}#export=true`): the request's path leaves the
    fragment out, so the query that follows it is read by the server (it was swallowed by the fragment)."""
    tool = rest_tool(
        "ApiExport_Get",
        "GET",
        "/apis/{apiId}#export=true",
        [param("apiId", "path", required=True), param("export", required=True), param("api-version", required=True)],
    )
    request = sent(tool, {"apiId": "a1", "export": "true", "api-version": "2019-01-01"})
    assert request.url == "https://things.example/v1/apis/a1"
    assert request.query == "export=true&api-version=2019-01-01"


def test_a_missing_or_empty_path_value_is_an_argument_error_and_nothing_is_sent() -> None:
    transport = RecordingTransport()
    client = client_for(rest_api(), transport)
    with pytest.raises(InvalidArguments, match=r"id is required: it is part of the URL path \(/items/\{id\}\)"):
        client.call(ITEM, {}, KEY)
    with pytest.raises(InvalidArguments, match="a path value cannot be empty"):
        client.call(ITEM, {"id": ""}, KEY)
    assert transport.sent == []


def test_a_path_template_naming_no_parameter_is_the_catalogs_fault() -> None:
    tool = rest_tool("broken", "GET", "/items/{nothing}", [])
    with pytest.raises(ToolError, match=r"its path has \{nothing\}") as raised:
        sent(tool, {})
    assert not isinstance(raised.value, InvalidArguments)


@pytest.mark.parametrize(
    ("style", "explode", "value", "segment"),
    [
        # OpenAPI 3's style examples (label without explode as corrected in 3.0.4/3.1.1, after RFC 6570)
        (None, None, "blue", "blue"),
        (None, None, COLORS, "blue,black,brown"),
        (None, None, RGB, "R,100,G,200,B,150"),
        ("simple", True, COLORS, "blue,black,brown"),
        ("simple", True, RGB, "R=100,G=200,B=150"),
        ("label", False, "blue", ".blue"),
        ("label", False, COLORS, ".blue,black,brown"),
        ("label", False, RGB, ".R,100,G,200,B,150"),
        ("label", True, COLORS, ".blue.black.brown"),
        ("label", True, RGB, ".R=100.G=200.B=150"),
        ("matrix", False, "blue", ";color=blue"),
        ("matrix", False, COLORS, ";color=blue,black,brown"),
        ("matrix", False, RGB, ";color=R,100,G,200,B,150"),
        ("matrix", True, COLORS, ";color=blue;color=black;color=brown"),
        ("matrix", True, RGB, ";R=100;G=200;B=150"),
        # delimiters inside a value are encoded, so they cannot pass for the style's own
        (None, None, ["a,b", "c/d"], "a%2Cb,c%2Fd"),
        ("matrix", True, {"k;x": "v=1"}, ";k%3Bx=v%3D1"),
    ],
)
def test_path_styles(style: str | None, explode: bool | None, value: Any, segment: str) -> None:
    color = param("color", "path", required=True, style=style, explode=explode, type="array", schema={})
    tool = rest_tool("paint", "GET", "/paint/{color}", [color])
    assert sent(tool, {"color": value}).url == "https://things.example/v1/paint/" + segment


def test_a_path_segment_that_is_dots_alone_after_a_label_is_encoded_too() -> None:
    tool = rest_tool("paint", "GET", "/paint/{color}", [param("color", "path", required=True, style="label")])
    assert sent(tool, {"color": "."}).url.endswith("/paint/%2E%2E")  # "." + "." would be `..`


# --- the query string -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("style", "explode", "value", "query"),
    [
        (None, None, "blue", "color=blue"),
        (None, None, "", "color="),
        (None, None, True, "color=true"),
        (None, None, 2.5, "color=2.5"),
        (None, None, "a b&c=d#e", "color=a%20b%26c%3Dd%23e"),
        (None, None, COLORS, "color=blue&color=black&color=brown"),
        ("form", False, COLORS, "color=blue,black,brown"),
        ("form", False, ["a,b", "c"], "color=a%2Cb,c"),
        ("spaceDelimited", None, COLORS, "color=blue%20black%20brown"),
        ("pipeDelimited", None, COLORS, "color=blue|black|brown"),
        ("pipeDelimited", None, ["a|b", "c"], "color=a%7Cb|c"),
        (None, None, RGB, "R=100&G=200&B=150"),
        ("form", False, RGB, "color=R,100,G,200,B,150"),
        ("spaceDelimited", False, RGB, "color=R%20100%20G%20200%20B%20150"),
        ("pipeDelimited", False, RGB, "color=R|100|G|200|B|150"),
        ("deepObject", True, RGB, "color[R]=100&color[G]=200&color[B]=150"),
        ("deepObject", True, {"a b": "c&d", "n": None}, "color[a%20b]=c%26d"),
        (None, None, [], ""),
        (None, None, {}, ""),
        (None, None, [True, None, {"x": [1]}], "color=true&color=%7B%22x%22%3A%5B1%5D%7D"),
        # deepObject beyond one level (the wire rules): nested objects, arrays of scalars, arrays of objects
        ("deepObject", True, ["charge", "customer"], "color[]=charge&color[]=customer"),
        ("deepObject", True, {"a": {"b": {"c": "v w"}}}, "color[a][b][c]=v%20w"),
        ("deepObject", True, {"tags": ["x", None, "y"]}, "color[tags][]=x&color[tags][]=y"),
        (
            "deepObject",
            True,
            [{"price": "p1", "quantity": 2}, None, {"price": "p2", "tiers": [[1, 2]]}],
            "color[0][price]=p1&color[0][quantity]=2&color[1][price]=p2&color[1][tiers][0][]=1&color[1][tiers][0][]=2",
        ),
        ("deepObject", True, "", "color="),
        ("form", True, {"a": {"b": 1}, "c": [1, 2]}, "a=%7B%22b%22%3A1%7D&c=%5B1%2C2%5D"),
        ("form", False, [[1, 2], "x y"], "color=%5B1%2C2%5D,x%20y"),
    ],
)
def test_query_styles(style: str | None, explode: bool | None, value: Any, query: str) -> None:
    color = param("color", style=style, explode=explode, type="array", schema={})
    tool = rest_tool("paint", "GET", "/paint", [color])
    request = sent(tool, {"color": value})
    assert request.query == query
    assert request.params == () and request.url == "https://things.example/v1/paint"


@pytest.mark.parametrize(
    ("collection_format", "query", "path", "header"),
    [
        ("csv", "tags=a%20b,c", "a%20b,c", "a b,c"),
        ("ssv", "tags=a%20b%20c", "a%20b%20c", "a b c"),
        ("tsv", "tags=a%20b%09c", "a%20b%09c", "a b\tc"),
        ("pipes", "tags=a%20b|c", "a%20b|c", "a b|c"),
        ("multi", "tags=a%20b&tags=c", "a%20b,c", "a b,c"),
    ],
)
def test_swagger_collection_formats(collection_format: str, query: str, path: str, header: str) -> None:
    fields = {"collection_format": collection_format}
    tool = rest_tool(
        "tagged",
        "GET",
        "/things/{ids}",
        [
            array_param("tags", **fields),
            array_param("ids", "path", required=True, **fields),
            array_param("X-Tags", "header", **fields),
        ],
    )
    request = sent(tool, {"tags": ["a b", "c"], "ids": ["a b", "c"], "X-Tags": ["a b", "c"]})
    assert request.query == query
    assert request.url == "https://things.example/v1/things/" + path
    assert headers_of(request)["x-tags"] == header


def test_query_parameters_keep_their_order_use_the_wire_name_and_leave_out_none() -> None:
    tool = rest_tool(
        "search",
        "GET",
        "/search",
        [param("q"), param("page_size", type="integer", wire_name="page[size]"), param("cursor"), param("flag")],
    )
    request = sent(tool, {"q": "café", "page_size": 10, "cursor": None, "flag": False})
    assert request.query == "q=caf%C3%A9&page%5Bsize%5D=10&flag=false"


def test_fixed_parameters_follow_the_arguments_and_cannot_be_replaced() -> None:
    tool = rest_tool("search", "GET", "/search", [param("q"), param("format")], fixed={"format": "json", "v": "2"})
    request = sent(tool, {"q": "x", "format": "xml"}, auth=QUERY_AUTH)
    assert request.query == f"q=x&format=json&v=2&api_key={KEY}"


# --- headers and cookies ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("explode", "value", "header"),
    [
        (None, "abc", "abc"),
        (None, 12, "12"),
        (None, COLORS, "blue,black,brown"),
        (False, RGB, "R,100,G,200,B,150"),
        (True, RGB, "R=100,G=200,B=150"),
    ],
)
def test_header_parameters_are_style_simple(explode: bool | None, value: Any, header: str) -> None:
    tool = rest_tool("get", "GET", "/things", [param("trace", "header", wire_name="X-Trace", explode=explode)])
    assert headers_of(sent(tool, {"trace": value}))["x-trace"] == header


@pytest.mark.parametrize("value", ["a\r\nX-Evil: 1", "a\nb", "a\rb", "a\x00b", ["ok", "b\r\n"], "é"])
def test_a_header_value_that_could_start_another_header_is_refused(value: Any) -> None:
    transport = RecordingTransport()
    tool = rest_tool("get", "GET", "/things", [param("trace", "header", wire_name="X-Trace")])
    with pytest.raises(InvalidArguments, match="trace is sent as the X-Trace header and holds") as raised:
        client_for(rest_api(), transport).call(tool, {"trace": value}, KEY)
    assert transport.sent == []
    assert "\r" not in str(raised.value) and "\n" not in str(raised.value)


def test_cookies_go_in_one_header_with_the_key_cookie_last() -> None:
    tool = rest_tool(
        "get",
        "GET",
        "/things",
        [param("session", "cookie"), param("theme", "cookie"), array_param("tags", "cookie", explode=False)],
    )
    auth = Auth(in_="cookie", name="sid", env="THINGS_KEY")
    request = sent(tool, {"session": "a;b c", "theme": "dark", "tags": ["x", "y"]}, auth=auth)
    assert headers_of(request)["cookie"] == f"session=a%3Bb%20c; theme=dark; tags=x,y; sid={KEY}"


@pytest.mark.parametrize(
    ("auth", "where"),
    [
        (QUERY_AUTH, "query"),
        (HEADER_AUTH, "header"),
        (Auth(in_="cookie", name="api_key", env="THINGS_KEY"), "cookie"),
        (Auth(in_="header", name="Authorization", env="THINGS_KEY", scheme="bearer"), "bearer"),
    ],
)
def test_no_argument_can_replace_the_key_or_the_framing_headers(auth: Auth, where: str) -> None:
    tool = rest_tool(
        "get",
        "GET",
        "/things",
        [
            param("api_key"),
            object_param("filters"),  # exploded: each member is a parameter of its own
            param("auth", "header", wire_name="Authorization"),
            param("key_header", "header", wire_name="x-api-key"),
            param("cookie", "header", wire_name="Cookie"),
            param("host", "header", wire_name="Host"),
            param("length", "header", wire_name="Content-Length"),
            param("api_key_cookie", "cookie", wire_name="api_key"),
        ],
    )
    stolen = "STOLEN-KEY-99"
    arguments = {
        "api_key": stolen,
        "filters": {"api_key": stolen, "color": "red"},
        "auth": f"Bearer {stolen}",
        "key_header": stolen,
        "cookie": f"api_key={stolen}",
        "host": "evil.example",
        "length": "0",
        "api_key_cookie": stolen,
    }
    request = sent(tool, arguments, auth=auth)
    headers = headers_of(request)
    assert {"host", "content-length"}.isdisjoint(headers)
    assert [n for n, _ in request.headers].count("Cookie") <= 1  # ours alone: the argument's never goes
    assert stolen not in headers.get("authorization", "")
    if where == "query":  # neither the parameter nor an exploded object's member of that name
        assert request.query == f"color=red&api_key={KEY}"
        assert "authorization" not in headers and headers["cookie"] == f"api_key={stolen}"
    if where == "header":
        assert [v for n, v in request.headers if n.lower() == "x-api-key"] == [KEY]
    if where == "cookie":
        assert headers["cookie"] == f"api_key={KEY}"
    if where == "bearer":
        assert [v for n, v in request.headers if n.lower() == "authorization"] == [f"Bearer {KEY}"]


# --- where the key goes, with the server's key and with a caller's own ------------------------------------------

SCHEMES: list[tuple[Auth, str]] = [
    (QUERY_AUTH, "query"),
    (Auth(in_="query", name="token", env="THINGS_KEY", prefix="tok:"), "query-prefix"),
    (HEADER_AUTH, "header"),
    (Auth(in_="header", name="Authorization", env="THINGS_KEY", prefix="Token "), "header-prefix"),
    (Auth(in_="cookie", name="sid", env="THINGS_KEY"), "cookie"),
    (Auth(in_="header", name="Authorization", env="THINGS_KEY", scheme="bearer"), "bearer"),
]


def expected_key_placement(where: str, key: str) -> tuple[str, dict[str, str]]:
    """(the query string, the headers that carry the key) for a call of LIST_THINGS with {"q": "x"}."""
    return {
        "query": (f"q=x&api_key={key}", {}),
        "query-prefix": (f"q=x&token=tok%3A{key}", {}),
        "header": ("q=x", {"x-api-key": key}),
        "header-prefix": ("q=x", {"authorization": f"Token {key}"}),
        "cookie": ("q=x", {"cookie": f"sid={key}"}),
        "bearer": ("q=x", {"authorization": f"Bearer {key}"}),
    }[where]


LIST_THINGS = rest_tool("listThings", "GET", "/things", [param("q")])


@pytest.mark.parametrize(("auth", "where"), SCHEMES, ids=[w for _, w in SCHEMES])
@pytest.mark.parametrize("mode", ["server-key", "passthrough"])
def test_the_key_goes_where_the_auth_scheme_says_in_both_auth_modes(auth: Auth, where: str, mode: str) -> None:
    transport = RecordingTransport()
    catalog = catalog_of(rest_api(auth), LIST_THINGS)
    surface = Surface(catalog, mode="direct", upstream=client_for(catalog.api, transport))
    if mode == "server-key":
        key, ctx = KEY, CallContext(api_key=KEY, entitlement=SERVER)
    else:  # the caller's own key, as the HTTP endpoint passes it in passthrough mode
        key, ctx = CALLER_KEY, CallContext(api_key=CALLER_KEY, missing_key_help="Pass your key as ?apikey=.")
    result = surface.call_tool("listThings", {"q": "x"}, ctx)
    assert not result.is_error, result
    (request,) = transport.sent
    query, key_headers = expected_key_placement(where, key)
    assert request.query == query
    assert {k: v for k, v in headers_of(request).items() if k in key_headers} == key_headers
    assert KEY not in repr(request) and CALLER_KEY not in repr(request)


@pytest.mark.parametrize("mode", ["server-key", "passthrough"])
def test_basic_auth_takes_the_key_as_user_and_password(mode: str) -> None:
    auth = Auth(in_="header", name="Authorization", env="THINGS_CREDENTIALS", scheme="basic")
    transport = RecordingTransport()
    catalog = catalog_of(rest_api(auth), LIST_THINGS)
    surface = Surface(catalog, mode="direct", upstream=client_for(catalog.api, transport))
    key = "alice:s3cret-pass" if mode == "server-key" else "bob:0ther:pass"
    result = surface.call_tool("listThings", {"q": "x"}, CallContext(api_key=key))
    assert not result.is_error
    expected = "Basic YWxpY2U6czNjcmV0LXBhc3M=" if mode == "server-key" else "Basic Ym9iOjB0aGVyOnBhc3M="
    assert headers_of(transport.sent[0])["authorization"] == expected


@pytest.mark.parametrize("mode", ["server-key", "passthrough"])
def test_basic_auth_without_a_colon_says_what_is_expected_and_never_shows_the_key(mode: str) -> None:
    auth = Auth(in_="header", name="Authorization", env="THINGS_CREDENTIALS", scheme="basic")
    transport = RecordingTransport()
    catalog = catalog_of(rest_api(auth), LIST_THINGS)
    surface = Surface(catalog, mode="direct", upstream=client_for(catalog.api, transport))
    ctx = CallContext(api_key=KEY, entitlement=SERVER if mode == "server-key" else "public")
    result = surface.call_tool("listThings", {"q": "x"}, ctx)
    assert result.is_error and transport.sent == []
    error = result.structured_content["error"]
    assert error["type"] == "MissingApiKey" and error["kind"] == "auth"
    assert "user:password" in error["message"] and "THINGS_CREDENTIALS" in error["message"]
    assert KEY not in json.dumps(result.structured_content)


def test_no_key_is_a_missing_key_error_and_a_key_with_a_line_break_is_refused_unshown() -> None:
    transport = RecordingTransport()
    client = client_for(rest_api(HEADER_AUTH), transport)
    with pytest.raises(MissingApiKey, match="THINGS_KEY"):
        client.call(LIST_THINGS, {}, None)
    bad = "KEY-with\r\nX-Evil: 1"
    with pytest.raises(MissingApiKey, match="characters an HTTP header cannot carry") as raised:
        client.call(LIST_THINGS, {}, bad)
    assert "KEY-with" not in str(raised.value)
    assert transport.sent == []


def test_repr_of_a_request_shows_neither_key_nor_query_headers_or_body() -> None:
    tool = rest_tool("create", "POST", "/things", [param("body", "body", type="object", schema={})], body="whole")
    request = sent(tool, {"body": {"secret": "s3cr3t-body"}}, auth=QUERY_AUTH)
    shown = repr(request)
    assert KEY not in shown and "s3cr3t-body" not in shown and "api_key" not in shown
    assert "https://things.example/v1/things" in shown and "POST" in shown


# --- bodies -----------------------------------------------------------------------------------------------------

BODY_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}}


def test_a_whole_json_body_is_compact_utf8_json() -> None:
    tool = rest_tool(
        "create",
        "POST",
        "/things",
        [param("body", "body", required=True, type="object", schema=BODY_SCHEMA)],
        body="whole",
    )
    request = sent(tool, {"body": {"name": "café", "tags": ["a", "b"], "n": None, "ok": True}})
    assert request.method == "POST"
    assert request.body == '{"name":"café","tags":["a","b"],"n":null,"ok":true}'.encode()
    assert headers_of(request)["content-type"] == "application/json"
    assert request.query == ""


def test_a_whole_body_that_is_a_list_or_a_merge_patch() -> None:
    tool = rest_tool(
        "patch",
        "PATCH",
        "/things/{id}",
        [param("id", "path", required=True), param("body", "body", type="array", schema={"type": "array"})],
        body="whole",
        body_type="application/merge-patch+json",
    )
    request = sent(tool, {"id": "7", "body": [1, 2]})
    assert (request.method, request.url, request.body) == ("PATCH", "https://things.example/v1/things/7", b"[1,2]")
    assert headers_of(request)["content-type"] == "application/merge-patch+json"


def test_an_absent_optional_body_sends_no_body() -> None:
    tool = rest_tool("poke", "POST", "/things/poke", [param("body", "body", type="object", schema={})], body="whole")
    request = sent(tool, {})
    assert request.body is None and "content-type" not in headers_of(request)


def test_body_members_make_one_object_by_wire_name_absent_ones_left_out() -> None:
    tool = rest_tool(
        "create",
        "POST",
        "/things",
        [
            param("name", "body", required=True),
            param("display_name", "body", wire_name="displayName"),
            param("count", "body", type="integer"),
            param("tags", "body", type="array", schema={"type": "array"}),
            param("dry_run", "query", type="boolean"),
        ],
        body="members",
    )
    request = sent(tool, {"name": "x", "display_name": "X", "tags": [], "dry_run": True})
    assert request.body == b'{"name":"x","displayName":"X","tags":[]}'
    assert request.query == "dry_run=true"
    # a null given is sent (Vtex's `defaultSla`: required, nullable); only an absent member is left out
    assert sent(tool, {"name": "x", "display_name": None}).body == b'{"name":"x","displayName":null}'
    form = rest_tool("create", "POST", "/things", [param("name", "body"), param("note", "body")], body="members",
                     body_type=FORM_TYPE)  # fmt: skip
    assert sent(form, {"name": "x", "note": None}).body == b"name=x"  # a form has no null


def test_a_whole_form_body_styles_each_member_as_an_exploded_form_parameter() -> None:
    tool = rest_tool(
        "create",
        "POST",
        "/things",
        [param("body", "body", type="object", schema={})],
        body="whole",
        body_type=FORM_TYPE,
    )
    value = {"name": "a b&c", "tags": ["x", "y"], "meta": {"k": 1, "deep": [1]}, "flag": True, "none": None, "n": 3}
    request = sent(tool, {"body": value})
    assert request.body == b"name=a%20b%26c&tags=x&tags=y&k=1&deep=%5B1%5D&flag=true&n=3"
    assert headers_of(request)["content-type"] == "application/x-www-form-urlencoded"


def test_form_members() -> None:
    tool = rest_tool(
        "create",
        "PUT",
        "/things/{id}",
        [param("id", "path", required=True), param("title", "body"), param("note", "body")],
        body="members",
        body_type=FORM_TYPE,
    )
    request = sent(tool, {"id": "1", "title": "Hello, world ~[x]"})
    assert (request.method, request.body) == ("PUT", b"title=Hello%2C%20world%20~%5Bx%5D")


def test_form_members_follow_their_encoding() -> None:
    """Each member styled as its Encoding Object says (deepObject, form without explode, pipeDelimited), as JSON
    text when its contentType is JSON, and exploded form when it has no Encoding entry; in the declared order."""
    tool = rest_tool(
        "refund",
        "POST",
        "/refunds",
        [
            param("amount", "body", type="integer"),
            array_param("expand", "body", style="deepObject", explode=True),
            object_param("metadata", "body", style="deepObject", explode=True),
            array_param("ids", "body", style="form", explode=False),
            array_param("piped", "body", style="pipeDelimited", explode=False),
            object_param("options", "body", content_type="application/json"),
            object_param("flat", "body"),
            array_param("repeat", "body"),
        ],
        body="members",
        body_type=FORM_TYPE,
    )
    arguments = {
        "repeat": ["r1", "r2"],
        "amount": 500,
        "metadata": {"order": "42", "note": "a b", "gone": None},
        "expand": ["charge"],
        "ids": ["1", "2,3"],
        "piped": ["x", "y"],
        "options": {"a": [1, "é"]},
        "flat": {"k": "v"},
    }
    request = sent(tool, arguments)
    assert request.body == (
        b"amount=500&expand[]=charge&metadata[order]=42&metadata[note]=a%20b&ids=1,2%2C3&piped=x|y"
        b"&options=%7B%22a%22%3A%5B1%2C%22%C3%A9%22%5D%7D&k=v&repeat=r1&repeat=r2"
    )
    assert headers_of(request)["content-type"] == FORM_TYPE


@pytest.mark.parametrize("body_type", [FORM_TYPE, "application/json", "multipart/form-data"])
def test_a_members_body_with_no_member_given_is_no_body_and_no_content_type(body_type: str) -> None:
    tool = rest_tool(
        "poke", "POST", "/things/poke", [param("note", "body"), param("q")], body="members", body_type=body_type
    )
    request = sent(tool, {"q": "x"})
    assert request.body is None and "content-type" not in headers_of(request)
    get = rest_tool("list", "GET", "/things", [param("note", "body")], body="members", body_type=FORM_TYPE)
    request = sent(get, {})
    assert request.body is None and "content-type" not in headers_of(request)


def parts(request: UpstreamRequest) -> list[tuple[str | None, str | None, str | None, bytes, dict[str, str]]]:
    """(name, filename, Content-Type, bytes, other headers) of each part of a multipart request, read by the stdlib."""
    import email.parser

    content_type = headers_of(request)["content-type"]
    assert content_type.startswith("multipart/form-data; boundary=")
    message = email.parser.BytesParser().parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + (request.body or b"")
    )
    out = []
    for part in message.get_payload():
        others = {k: str(v) for k, v in part.items() if k.lower() not in ("content-disposition", "content-type")}
        out.append(
            (
                part.get_param("name", header="content-disposition"),
                part.get_param("filename", header="content-disposition"),
                part.get("Content-Type"),
                part.get_payload(decode=True),
                others,
            )
        )
    return out


FILE_SCHEMA = {"type": "string", "contentEncoding": "base64"}


def test_multipart_parts_follow_the_rules_and_the_encoding() -> None:
    tool = rest_tool(
        "upload",
        "POST",
        "/files",
        [
            param("file", "body", schema=FILE_SCHEMA),
            param("photos", "body", type="array", schema={"type": "array", "items": FILE_SCHEMA}),
            param("purpose", "body"),
            array_param("expand", "body", style="deepObject", explode=True),
            object_param("link", "body"),
            param("rows", "body", type="array", schema={"type": "array"}),
            param("sdp", "body", content_type="application/sdp", part_headers={"X-Part": "1"}),
            param("count", "body", type="integer"),
            param("note", "body"),
        ],
        body="members",
        body_type="multipart/form-data",
    )
    arguments = {
        "file": "data:image/png;base64,iVBORw0K",
        "photos": ["AAEC", "data:text/plain;charset=utf-8;base64,aMOp"],
        "purpose": "dispute evidence",
        "expand": ["a", "b"],
        "link": {"create": True, "n": None},
        "rows": [{"x": 1}],
        "sdp": "v=0\r\n",
        "count": 3,
    }
    assert parts(sent(tool, arguments)) == [
        ("file", "file", "image/png", b"\x89PNG\r\n", {}),
        ("photos", "photos", "application/octet-stream", b"\x00\x01\x02", {}),
        ("photos", "photos", "text/plain;charset=utf-8", "hé".encode(), {}),
        ("purpose", None, "text/plain", b"dispute evidence", {}),
        ("expand[]", None, "text/plain", b"a", {}),
        ("expand[]", None, "text/plain", b"b", {}),
        ("link", None, "application/json", b'{"create":true,"n":null}', {}),
        ("rows", None, "application/json", b'[{"x":1}]', {}),
        ("sdp", None, "application/sdp", b"v=0\r\n", {"X-Part": "1"}),
        ("count", None, "text/plain", b"3", {}),
    ]


def test_a_multipart_body_of_empty_or_file_less_members_does_not_crash() -> None:
    """httpx builds no multipart header from no parts (the KeyError of issue 28): no part is no body; a body of
    text parts alone is a multipart body all the same."""
    tool = rest_tool(
        "icon",
        "POST",
        "/groups/{id}/icon",
        [
            param("id", "path", required=True),
            param("photos", "body", type="array", schema={"type": "array", "items": FILE_SCHEMA}),
            array_param("tags", "body"),
            param("note", "body"),
        ],
        body="members",
        body_type="multipart/form-data",
    )
    empty = sent(tool, {"id": "1", "photos": [], "tags": []})
    assert empty.body is None and "content-type" not in headers_of(empty)
    text_only = sent(tool, {"id": "1", "photos": [], "note": ""})
    assert parts(text_only) == [("note", None, "text/plain", b"", {})]


@pytest.mark.parametrize("value", ["not base64!", "data:image/png,rawbytes", "data:;base64,@@", 7])
def test_a_file_that_is_neither_base64_nor_a_data_url_is_an_argument_error(value: Any) -> None:
    tool = rest_tool(
        "upload",
        "POST",
        "/files",
        [param("file", "body", schema=FILE_SCHEMA)],
        body="members",
        body_type="multipart/form-data",
    )
    with pytest.raises(InvalidArguments, match="file"):
        sent(tool, {"file": value})


@pytest.mark.parametrize(
    ("body_type", "value", "content_type"),
    [
        ("image/png", "iVBORw0K", "image/png"),
        ("image/png", "data:image/gif;base64,iVBORw0K", "image/png"),  # the document's type wins
        ("image/*", "data:image/gif;base64,iVBORw0K", "image/gif"),  # unless it leaves the type open
        ("application/octet-stream", "data:;base64,iVBORw0K", "application/octet-stream"),
    ],
)
def test_a_whole_binary_body_takes_base64_or_a_data_url(body_type: str, value: str, content_type: str) -> None:
    tool = rest_tool(
        "put", "PUT", "/image", [param("body", "body", schema=FILE_SCHEMA)], body="whole", body_type=body_type
    )
    request = sent(tool, {"body": value})
    assert request.body == b"\x89PNG\r\n" and headers_of(request)["content-type"] == content_type


def test_a_form_body_is_an_object_or_the_form_already_encoded() -> None:
    form = rest_tool(
        "create", "POST", "/things", [param("body", "body", type="array", schema={})], body="whole", body_type=FORM_TYPE
    )
    with pytest.raises(ToolError, match="sends a form body, which holds an object's members or an encoded form"):
        sent(form, {"body": [1]})  # PeerTube's studio edit: a form body typed as an array, which no form holds
    # LibreTranslate's document (APIs.guru) gives its form body as a string: the form as the caller encoded it
    encoded = sent(form, {"body": "q=hello%20world&source=en"})
    assert encoded.body == b"q=hello%20world&source=en" and headers_of(encoded)["content-type"] == FORM_TYPE
    # Codat's attachment upload: a multipart body that is a bare binary string names no part; nothing malformed is sent
    parts = rest_tool(
        "upload", "POST", "/files", [param("body", "body", schema={"type": "string"})], body="whole",
        body_type="multipart/form-data",
    )  # fmt: skip
    with pytest.raises(ToolError, match="body whose parts its document does not name"):
        sent(parts, {"body": "bytes"})


@pytest.mark.parametrize(
    ("body_type", "value", "body", "content_type"),
    [
        ("*/*", {"url": "https://x.example"}, b'{"url":"https://x.example"}', "application/json"),
        ("*/*", "plain words", b"plain words", "text/plain; charset=utf-8"),
        ("application/*", [1, 2], b"[1,2]", "application/json"),
        ("text/*", {"a": 1}, b'{"a":1}', "text/plain; charset=utf-8"),
    ],
)
def test_a_body_under_a_media_range_is_sent_with_a_real_type(
    body_type: str, value: Any, body: bytes, content_type: str
) -> None:
    # Apideck's proxy takes `*/*`: no Content-Type may say that, so a string goes as text and the rest as JSON
    tool = rest_tool(
        "proxy", "PUT", "/proxy", [param("body", "body", type="object", schema={})], body="whole", body_type=body_type
    )
    request = sent(tool, {"body": value})
    assert request.body == body and headers_of(request)["content-type"] == content_type
    other = rest_tool(
        "create",
        "POST",
        "/things",
        [param("body", "body", type="array", schema={})],
        body="whole",
        body_type="image/png",
    )
    with pytest.raises(ToolError, match="image/png body"):
        sent(other, {"body": [1]})


# --- a query-dispatched API: POST writes, fixed parameters ------------------------------------------------------

LASTFM = Api(
    name="lastfm",
    title="Last.fm",
    base_url="https://ws.audioscrobbler.com/2.0/",
    dispatch=Dispatch("method"),
    auth=Auth(in_="query", name="api_key", env="LASTFM_API_KEY"),
)
LOVE = tool_of("track.love", (param("artist", required=True), param("track")), method="POST", fixed={"format": "json"})
INFO = tool_of("artist.getInfo", (param("artist", required=True), param("format")), fixed={"format": "json"})


def test_a_dispatch_apis_post_sends_its_parameters_as_a_form_body() -> None:
    transport = RecordingTransport()
    client_for(LASTFM, transport).call(LOVE, {"artist": "Cher", "track": "Believe & more"}, KEY)
    (request,) = transport.sent
    assert (request.method, request.url, request.params, request.query) == ("POST", LASTFM.base_url, (), "")
    assert request.body == f"method=track.love&artist=Cher&track=Believe+%26+more&format=json&api_key={KEY}".encode()
    assert headers_of(request)["content-type"] == "application/x-www-form-urlencoded"


def test_a_dispatch_apis_get_gets_its_fixed_parameters_before_the_key() -> None:
    transport = RecordingTransport()
    client_for(LASTFM, transport).call(INFO, {"artist": "Cher", "format": "xml"}, KEY)
    (request,) = transport.sent
    assert request.method == "GET" and request.body is None
    assert request.params == (("method", "artist.getInfo"), ("artist", "Cher"), ("format", "json"), ("api_key", KEY))


# --- what an answer means ---------------------------------------------------------------------------------------

REPO = rest_tool(
    "getRepo",
    "GET",
    "/repos/{owner}/{repo}",
    [param("owner", "path", required=True), param("repo", "path", required=True)],
)


def call_with(tool: CatalogTool, response: UpstreamResponse, arguments: dict[str, Any] | None = None) -> Any:
    client = client_for(rest_api(QUERY_AUTH), RecordingTransport(response), retries=0)
    return client.call(tool, arguments or {"owner": "octocat", "repo": "x" * 100}, KEY)


def test_a_404_is_the_callers_identifier_not_the_servers_address() -> None:
    body = json.dumps({"message": f"Not Found (key {KEY})"}).encode()
    with pytest.raises(UpstreamRejected) as raised:
        call_with(REPO, UpstreamResponse(404, {"content-type": "application/json"}, body))
    message = str(raised.value)
    assert raised.value.kind == "invalid_request" and raised.value.status == 404
    assert "no such resource (HTTP 404 Not Found): Not Found (key ***)" in message
    assert f"(owner=octocat, repo={'x' * 39}…)" in message
    assert "misconfigured" not in message and KEY not in message


@pytest.mark.parametrize(
    ("status", "kind", "words"),
    [
        (410, UpstreamRejected, "410 Gone"),
        (409, UpstreamRejected, "conflicts with the resource's current state"),
        (405, UpstreamError, "does not accept GET at this address"),
        (422, UpstreamRejected, "refused the request (HTTP 422): name is too long"),
        (400, UpstreamRejected, "refused the request (HTTP 400): name is too long"),
        (401, MissingApiKey, "refused the API key (HTTP 401)"),
        (403, MissingApiKey, "refused the API key (HTTP 403)"),
        (429, RateLimited, "rate limiting"),
        (500, UpstreamUnavailable, "having trouble (HTTP 500"),
    ],
)
def test_error_statuses_keep_their_kinds(status: int, kind: type[UpstreamError], words: str) -> None:
    body = json.dumps({"error": {"message": "name is too long"}, "message": "name is too long"}).encode()
    with pytest.raises(kind, match=words.replace("(", r"\(").replace(")", r"\)")) as raised:
        call_with(REPO, UpstreamResponse(status, {"content-type": "application/json"}, body))
    assert type(raised.value) is kind


@pytest.mark.parametrize("status", [200, 201, 202, 204])
def test_success_without_a_body_is_done(status: int) -> None:
    result = call_with(REPO, UpstreamResponse(status, {}, b""))
    assert (result.payload, result.format, result.status) == ({"status": status}, "json", status)


@pytest.mark.parametrize("payload", [[], {}, {"items": []}, "ok", 0, None])
def test_empty_json_is_data_for_a_rest_api(payload: Any) -> None:
    result = call_with(REPO, UpstreamResponse(200, {"content-type": "application/json"}, json.dumps(payload).encode()))
    assert (result.payload, result.format) == (payload, "json")


@pytest.mark.parametrize(
    ("content_type", "body", "fmt"),
    [
        ("text/plain; charset=utf-8", "pong", "text"),
        ("text/csv", "a,b\n", "csv"),
        ("application/xml", "<thing id='1'/>", "text"),
        ("text/plain", "{not json, only text", "text"),
        ("", "hello", "text"),
        ("application/yaml", "a: 1\n", "text"),
    ],
)
def test_text_answers_come_back_as_text(content_type: str, body: str, fmt: str) -> None:
    result = call_with(REPO, answer(body.encode(), content_type=content_type))
    assert (result.payload, result.format) == (body, fmt)


def test_json_sent_as_text_plain_is_still_json() -> None:
    result = call_with(REPO, answer(b'{"a": 1}', content_type="text/plain"))
    assert (result.payload, result.format) == ({"a": 1}, "json")


@pytest.mark.parametrize(
    ("content_type", "body", "words"),
    [
        ("text/html", b"<p>maintenance</p>", "HTML page"),
        ("", b"<!DOCTYPE html><html></html>", "HTML page"),
        ("image/png", b"\x89PNG\r\n\x1a\n\x00", "image/png content"),
        ("", b"\xff\xfe\x00\x01", "binary content"),
        ("application/json", b'{"broken": ', "broken JSON"),
    ],
)
def test_html_binary_and_broken_json_are_errors(content_type: str, body: bytes, words: str) -> None:
    with pytest.raises(UpstreamBadResponse, match=words):
        call_with(REPO, answer(body, content_type=content_type))


def test_a_text_answer_that_echoes_the_key_is_masked_and_not_kept() -> None:
    result = call_with(REPO, answer(f"your key is {KEY}".encode(), content_type="text/plain"))
    assert result.payload == "your key is ***" and result.held_key


# --- retries ----------------------------------------------------------------------------------------------------

CREATE = rest_tool("create", "POST", "/things", [param("name", "body")], body="members")


def retried(
    tool: CatalogTool, arguments: dict[str, Any], *script: UpstreamResponse | TransportError
) -> tuple[RecordingTransport, Any]:
    """The requests a call sent (two retries allowed) and what came of it: a result or an UpstreamError."""
    transport = RecordingTransport(*script)
    try:
        outcome: Any = client_for(rest_api(), transport, retries=2).call(tool, arguments, KEY)
    except UpstreamError as exc:
        outcome = exc
    return transport, outcome


@pytest.mark.parametrize("method", ["POST", "PATCH"])
@pytest.mark.parametrize("status", [500, 502, 503, 504, 429])
def test_a_non_idempotent_call_is_not_repeated_after_an_answer(method: str, status: int) -> None:
    tool = rest_tool("write", method, "/things", [param("name", "body")], body="members")
    transport, outcome = retried(tool, {"name": "x"}, answer({"message": "busy"}, status=status), answer({"id": 1}))
    assert len(transport.sent) == 1
    assert isinstance(outcome, RateLimited if status == 429 else UpstreamUnavailable)
    if status != 429:
        assert f"It was not sent again: a {method} may have taken effect" in str(outcome)


def test_a_post_is_not_repeated_after_a_dropped_connection_or_a_timeout() -> None:
    transport, outcome = retried(
        CREATE, {"name": "x"}, TransportError("connect", "RemoteProtocolError"), answer({"id": 1})
    )
    assert len(transport.sent) == 1 and isinstance(outcome, UpstreamUnavailable)
    assert "broke once the request was sent" in str(outcome) and "may have taken effect" in str(outcome)
    transport, outcome = retried(
        CREATE, {"name": "x"}, TransportError("timeout", "no answer in time"), answer({"id": 1})
    )
    assert len(transport.sent) == 1 and isinstance(outcome, UpstreamTimeout)
    assert "may have taken effect" in str(outcome)


def test_a_post_whose_connection_was_never_made_is_tried_again() -> None:
    transport, outcome = retried(
        CREATE, {"name": "x"}, TransportError("connect", "ConnectError", sent=False), answer({"id": 1})
    )
    assert len(transport.sent) == 2 and outcome.payload == {"id": 1}


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "HEAD", "OPTIONS"])
def test_idempotent_methods_keep_todays_retries(method: str) -> None:
    tool = rest_tool("op", method, "/things/{id}", [param("id", "path", required=True)])
    script = (answer(status=503), TransportError("connect", "ReadError"), answer({"ok": 1}))
    transport, outcome = retried(tool, {"id": "1"}, *script)
    assert len(transport.sent) == 3 and outcome.payload == {"ok": 1}


def test_a_dispatch_apis_post_is_not_repeated_either() -> None:
    transport = RecordingTransport(answer(status=503), answer({"ok": 1}))
    with pytest.raises(UpstreamUnavailable, match="not sent again"):
        client_for(LASTFM, transport).call(LOVE, {"artist": "Cher"}, KEY)
    assert len(transport.sent) == 1


# --- caching: reads only ----------------------------------------------------------------------------------------


@dataclass
class Counted:
    transport: RecordingTransport = field(default_factory=RecordingTransport)
    cache: MemoryCache = field(default_factory=MemoryCache)

    def surface(self, api: Api, *tools: CatalogTool) -> Surface:
        catalog = catalog_of(api, *tools)
        return Surface(catalog, mode="direct", upstream=client_for(api, self.transport), cache=self.cache)


def test_only_get_calls_are_cached() -> None:
    read = rest_tool("listThings", "GET", "/things", [param("q")], cache_ttl_s=300)
    write = rest_tool("create", "POST", "/things", [param("name", "body")], body="members", cache_ttl_s=300)
    counted = Counted()
    surface = counted.surface(rest_api(), read, write)
    ctx = CallContext(api_key=KEY, entitlement=SERVER)
    for _ in range(2):
        assert not surface.call_tool("listThings", {"q": "x"}, ctx).is_error
        assert not surface.call_tool("create", {"name": "x"}, ctx).is_error
    assert [r.method for r in counted.transport.sent] == ["GET", "POST", "POST"]
    assert len(counted.cache) == 1


def test_a_dispatch_apis_post_is_not_cached() -> None:
    counted = Counted()
    surface = counted.surface(LASTFM, tool_of(LOVE.name, LOVE.params, method="POST", cache_ttl_s=300))
    for _ in range(2):
        assert not surface.call_tool("track.love", {"artist": "Cher"}, CallContext(api_key=KEY)).is_error
    assert len(counted.transport.sent) == 2 and len(counted.cache) == 0


def test_a_text_answer_is_cached_and_shaped_as_text() -> None:
    tool = rest_tool("readme", "GET", "/readme", [], cache_ttl_s=300)
    counted = Counted(RecordingTransport(answer(b"line\n" * 20000, content_type="text/plain")))
    surface = counted.surface(rest_api(), tool)
    first = surface.call_tool("readme", {}, CallContext(api_key=KEY)).structured_content
    second = surface.call_tool("readme", {}, CallContext(api_key=KEY)).structured_content
    assert len(counted.transport.sent) == 1
    for envelope in (first, second):
        assert envelope["format"] == "text" and envelope["data"] is None
        assert envelope["excerpt"].startswith("line\nline\n") and "truncated" in envelope
    kept = counted.cache.get(cache_key("readme", {}, caller_entitlement(KEY)))
    assert kept is not None and (kept.payload, kept.format) == ("line\n" * 20000, "text")


# --- over real HTTP ---------------------------------------------------------------------------------------------


class RecordingServer(BaseHTTPRequestHandler):
    """Keeps each raw request line, its headers and body; answers by path: /missing → 404, /empty → 204,
    /text → text/plain, /busy → 503, anything else → JSON echoing the method."""

    seen: ClassVar[list[dict[str, Any]]] = []

    def handle_any(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        RecordingServer.seen.append({"line": self.requestline, "headers": dict(self.headers.items()), "body": body})
        path = self.path.split("?")[0]
        if path.endswith("/missing"):
            self.reply(404, b'{"message": "Not Found"}', "application/json")
        elif path.endswith("/empty"):
            self.reply(204, b"", None)
        elif path.endswith("/text"):
            self.reply(200, b"plain words", "text/plain; charset=utf-8")
        elif path.endswith("/busy"):
            self.reply(503, b'{"message": "busy"}', "application/json")
        else:
            self.reply(200, json.dumps({"method": self.command}).encode(), "application/json")

    def reply(self, status: int, body: bytes, content_type: str | None) -> None:
        self.send_response(status)
        if content_type:
            self.send_header("Content-Type", content_type)
        if status != 204:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_any

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), RecordingServer)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1/"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture(scope="module")
def transport() -> Iterator[HttpxTransport]:
    transport = HttpxTransport()
    yield transport
    transport.close()


@pytest.fixture
def seen() -> list[dict[str, Any]]:
    RecordingServer.seen.clear()
    return RecordingServer.seen


def http_client(server: str, transport: HttpxTransport, auth: Auth | None = None) -> UpstreamClient:
    return client_for(rest_api(auth, base_url=server), transport)


@pytest.mark.parametrize(
    ("value", "target"),
    [
        ("..", "/v1/items/%2E%2E"),
        (".", "/v1/items/%2E"),
        ("../admin", "/v1/items/..%2Fadmin"),
        ("%2e%2e", "/v1/items/%252e%252e"),
        ("?x=1#y", "/v1/items/%3Fx%3D1%23y"),
        ("日本", "/v1/items/%E6%97%A5%E6%9C%AC"),
    ],
)
def test_over_http_a_path_value_arrives_as_encoded(
    server: str, transport: HttpxTransport, seen: list[dict[str, Any]], value: str, target: str
) -> None:
    http_client(server, transport).call(ITEM, {"id": value}, None)
    assert [s["line"] for s in seen] == [f"GET {target} HTTP/1.1"]


def test_over_http_query_styles_and_the_key_arrive_as_built(
    server: str, transport: HttpxTransport, seen: list[dict[str, Any]]
) -> None:
    tool = rest_tool(
        "paint",
        "GET",
        "/paint",
        [
            array_param("pipes", style="pipeDelimited"),
            array_param("spaces", style="spaceDelimited"),
            array_param("csv", explode=False),
            object_param("filter", style="deepObject", explode=True),
            param("q"),
        ],
        fixed={"v": "2"},
    )
    arguments = {"pipes": COLORS, "spaces": ["a", "b"], "csv": ["x,y", "z"], "filter": {"R": 1}, "q": "a b&c"}
    http_client(server, transport, QUERY_AUTH).call(tool, arguments, KEY)
    assert [s["line"] for s in seen] == [
        "GET /v1/paint?pipes=blue|black|brown&spaces=a%20b&csv=x%2Cy,z&filter[R]=1&q=a%20b%26c&v=2"
        f"&api_key={KEY} HTTP/1.1"
    ]


def test_over_http_a_post_carries_its_json_body_headers_and_cookies(
    server: str, transport: HttpxTransport, seen: list[dict[str, Any]]
) -> None:
    tool = rest_tool(
        "create",
        "POST",
        "/things/{id}",
        [
            param("id", "path", required=True),
            param("trace", "header", wire_name="X-Trace"),
            param("theme", "cookie"),
            param("name", "body"),
            param("tags", "body", type="array", schema={"type": "array"}),
        ],
        body="members",
    )
    bearer = Auth(in_="header", name="Authorization", env="THINGS_KEY", scheme="bearer")
    result = http_client(server, transport, bearer).call(
        tool, {"id": "a/b", "trace": "t-1", "theme": "dark", "name": "café", "tags": ["x"]}, KEY
    )
    assert result.payload == {"method": "POST"}
    (request,) = seen
    assert request["line"] == "POST /v1/things/a%2Fb HTTP/1.1"
    assert request["body"] == '{"name":"café","tags":["x"]}'.encode()
    headers = {k.lower(): v for k, v in request["headers"].items()}
    assert headers["content-type"] == "application/json"
    assert headers["authorization"] == f"Bearer {KEY}"
    assert headers["x-trace"] == "t-1" and headers["cookie"] == "theme=dark"


def test_over_http_a_dispatch_post_sends_a_form(
    server: str, transport: HttpxTransport, seen: list[dict[str, Any]]
) -> None:
    api = Api(name="lastfm", title="Last.fm", base_url=server + "2.0/", dispatch=Dispatch("method"), auth=LASTFM.auth)
    client_for(api, transport).call(LOVE, {"artist": "Cher", "track": "Believe"}, KEY)
    (request,) = seen
    assert request["line"] == "POST /v1/2.0/ HTTP/1.1"
    assert request["body"] == f"method=track.love&artist=Cher&track=Believe&format=json&api_key={KEY}".encode()
    assert request["headers"]["Content-Type"] == "application/x-www-form-urlencoded"


def test_over_http_404_204_and_text(server: str, transport: HttpxTransport, seen: list[dict[str, Any]]) -> None:
    client = http_client(server, transport)
    routes = {
        name: rest_tool(
            name, "GET" if name != "empty" else "DELETE", f"/things/{{id}}/{name}", [param("id", "path", required=True)]
        )
        for name in ("missing", "empty", "text")
    }
    with pytest.raises(UpstreamRejected, match=r"no such resource \(HTTP 404 Not Found\): Not Found\. .*\(id=42\)"):
        client.call(routes["missing"], {"id": "42"}, None)
    done = client.call(routes["empty"], {"id": "42"}, None)
    assert (done.payload, done.status) == ({"status": 204}, 204)
    text = client.call(routes["text"], {"id": "42"}, None)
    assert (text.payload, text.format) == ("plain words", "text")
    assert [s["line"].split()[0] for s in seen] == ["GET", "DELETE", "GET"]


def test_over_http_a_post_is_sent_once_to_a_busy_server(
    server: str, transport: HttpxTransport, seen: list[dict[str, Any]]
) -> None:
    client = http_client(server, transport)
    write = rest_tool("busyWrite", "POST", "/busy", [param("name", "body")], body="members")
    read = rest_tool("busyRead", "GET", "/busy", [])
    with pytest.raises(UpstreamUnavailable, match="not sent again"):
        client.call(write, {"name": "x"}, None)
    assert len(seen) == 1
    with pytest.raises(UpstreamUnavailable, match="Try again later"):
        client.call(read, {}, None)
    assert len(seen) == 1 + 3  # a GET: the first try and two retries
