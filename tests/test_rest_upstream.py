"""Tests for the offline REST upstream: routing, answers, light checks, authentication, the request record and
its masking, faults, concurrency and the CLI, over real HTTP on 127.0.0.1 (httpx, and http.client or a raw
socket where the exact bytes sent matter).

Run with: .venv/bin/python -m pytest tests/test_rest_upstream.py -q
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from factories import make_tool

from infra.bundling import LOCAL_ONLY_FILES
from progressive_mcp.catalog import Api, Auth, Catalog, CatalogTool, Operation, Param
from progressive_mcp.cli import build_parser
from progressive_mcp.offline import serving
from progressive_mcp.offline.rest_upstream import (
    REQUESTS_PATH,
    Incoming,
    RestFaults,
    RestUpstream,
    Router,
    has_operations,
    serve_rest_upstream,
    upstream_from_args,
)
from progressive_mcp.offline.schema_samples import dumps, sample_value
from progressive_mcp.sources import load_catalog

ROOT = Path(__file__).resolve().parent.parent
KEY = "SeCrEt-KEY-123"
BASE_URL = "https://api.example.com/v1"
PET: dict[str, Any] = {
    "type": "object",
    "required": ["id", "name"],
    "properties": {
        "id": {"type": "integer", "minimum": 1},
        "name": {"type": "string"},
        "born": {"type": "string", "format": "date"},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
}


def tool(
    name: str,
    method: str,
    path: str,
    params: tuple[Param, ...] = (),
    output: dict[str, Any] | None = None,
    *,
    body: str | None = None,
    body_type: str = "application/json",
    fixed: dict[str, str] | None = None,
) -> CatalogTool:
    """A REST tool as a source would build it (only what the upstream reads is filled in with care)."""
    operation = Operation(method, path, name, body, body_type)  # type: ignore[arg-type]
    return make_tool(name, params, category="pets", output=output, method=method, operation=operation, fixed=fixed)


def path_param(name: str) -> Param:
    return Param(name, "string", True, location="path")


def catalog_of(*tools: CatalogTool, auth: Auth | None = None, base_url: str = BASE_URL) -> Catalog:
    return Catalog.build(Api("pets", "Pet Store", base_url, auth=auth), {"pets": "Pets"}, tools)


PETS = catalog_of(
    tool("getPet", "GET", "/pets/{petId}", (path_param("petId"),), PET),
    tool("getMyPets", "GET", "/pets/mine", (), {"type": "array", "items": PET}),
    tool("deletePet", "DELETE", "/pets/{petId}", (path_param("petId"),)),
    tool("updatePet", "PUT", "/pets/{petId}", (path_param("petId"),), {"type": "object", "examples": [{"done": 1}]}),
    tool(
        "listPets",
        "GET",
        "/pets",
        (
            Param("limit", "integer", True),
            Param("X-Request-Id", "string", True, location="header", wire_name="X-Request-Id"),
        ),
        {"type": "array", "items": PET},
    ),
    tool(
        "createPet",
        "POST",
        "/pets",
        (Param("name", "string", True, location="body"), Param("tag", "string", False, location="body")),
        PET,
        body="members",
    ),
    tool("getPhoto", "GET", "/photos/{name}.{ext}", (path_param("name"), path_param("ext")), {"example": "photo"}),
    tool("getOwner", "GET", "/{kind}/owner", (path_param("kind"),), {"const": "templated first"}),
    tool("getPetsOwner", "GET", "/pets/{petId}/owner", (path_param("petId"),), {"const": "literal first"}),
    tool("noAnswer", "GET", "/ping", ()),
    auth=Auth("header", "Authorization", "PETS_KEY", scheme="bearer"),
)
BEARER = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture(scope="module")
def shared() -> Iterator[RestUpstream]:
    with serve_rest_upstream(PETS) as upstream:
        yield upstream


@pytest.fixture
def upstream(shared: RestUpstream) -> RestUpstream:
    """One server for the module; each test starts with no faults and an empty record."""
    shared.reset()
    return shared


@pytest.fixture
def client(upstream: RestUpstream) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=upstream.url, headers=BEARER, timeout=10) as http:
        yield http


def raw_get(upstream: RestUpstream, target: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """GET a request target exactly as written (http.client sends it untouched)."""
    connection = http.client.HTTPConnection(upstream.host, upstream.port, timeout=10)
    try:
        connection.request("GET", target, headers={**BEARER, **(headers or {})})
        reply = connection.getresponse()
        return reply.status, reply.read()
    finally:
        connection.close()


# --- routing ----------------------------------------------------------------------------------------


def test_url_keeps_the_base_path_of_the_apis_base_url(upstream: RestUpstream) -> None:
    assert upstream.url == f"http://127.0.0.1:{upstream.port}/v1"


def test_a_literal_segment_wins_over_a_template_whatever_the_catalogs_order(
    upstream: RestUpstream, client: httpx.Client
) -> None:
    assert client.get("/pets/mine").status_code == 200
    assert client.get("/pets/42").status_code == 200
    assert [(r.tool, dict(r.path_params)) for r in upstream.requests] == [
        ("getMyPets", {}),
        ("getPet", {"petId": "42"}),
    ]
    # getOwner (/{kind}/owner) comes first in the catalog, but /pets/{petId}/owner has a literal earlier.
    assert client.get("/pets/7/owner").json() == "literal first"
    assert client.get("/cats/owner").json() == "templated first"


def test_the_router_alone_ranks_literal_then_partial_then_templated_segments() -> None:
    router = Router(
        catalog_of(
            tool("templated", "GET", "/files/{name}", (path_param("name"),)),
            tool("partial", "GET", "/files/{name}.json", (path_param("name"),)),
            tool("literal", "GET", "/files/index.json"),
        ),
        "",
    )

    def matched(path: str) -> str | None:
        route = router.route("GET", path, []).route
        return route.tool.name if route is not None else None

    assert matched("/files/index.json") == "literal"
    assert matched("/files/report.json") == "partial"
    assert router.route("GET", "/files/report.json", []).path_params == {"name": "report"}
    assert matched("/files/report.csv") == "templated"


def test_an_encoded_slash_stays_inside_its_segment(upstream: RestUpstream) -> None:
    status, _ = raw_get(upstream, "/v1/pets/a%2Fb")
    assert status == 200
    record = upstream.requests[-1]
    assert record.tool == "getPet" and record.path_params == {"petId": "a/b"}
    assert record.raw_path == "/v1/pets/a%2Fb" and record.path == "/v1/pets/a/b"
    status, body = raw_get(upstream, "/v1/pets/a/b")  # a real slash: three segments, no such route
    assert status == 404 and json.loads(body)["error"]["status"] == 404


def test_segments_are_percent_decoded_after_splitting(upstream: RestUpstream) -> None:
    assert raw_get(upstream, "/v1/p%65ts/mine")[0] == 200  # an encoded literal is still the literal
    assert upstream.requests[-1].tool == "getMyPets"
    assert raw_get(upstream, "/v1/pets/caf%C3%A9%20au%20lait")[0] == 200
    assert upstream.requests[-1].path_params == {"petId": "café au lait"}
    assert raw_get(upstream, "/v1/photos/cat.png")[0] == 200
    assert upstream.requests[-1].path_params == {"name": "cat", "ext": "png"}


def test_unknown_paths_are_404_with_a_json_error(upstream: RestUpstream, client: httpx.Client) -> None:
    for path in ("/nothing", "/pets/", "/pets/1/2/3"):
        reply = client.get(path)
        assert reply.status_code == 404, path
        assert reply.headers["content-type"] == "application/json"
        assert reply.json() == {"error": {"status": 404, "message": f"No operation matches GET /v1{path}"}}
    outside = httpx.get(f"http://127.0.0.1:{upstream.port}/pets/mine", headers=BEARER)  # without the base path
    assert outside.status_code == 404 and "the base path is /v1" in outside.json()["error"]["message"]
    assert [r.tool for r in upstream.requests] == [None] * 4


def test_a_known_path_with_another_method_is_405_with_allow(client: httpx.Client) -> None:
    reply = client.patch("/pets/1")
    assert reply.status_code == 405
    assert reply.headers["allow"] == "GET, DELETE, PUT"
    assert reply.json()["error"]["message"] == "PATCH is not allowed on /v1/pets/1"
    assert client.delete("/pets/mine").status_code == 204  # a literal path without DELETE: the template's DELETE


def test_head_is_answered_as_get_without_a_body(client: httpx.Client) -> None:
    reply = client.head("/pets/mine")
    assert reply.status_code == 200 and reply.content == b""
    assert int(reply.headers["content-length"]) == len(client.get("/pets/mine").content)


def test_fixed_query_parameters_choose_between_operations_on_one_path() -> None:
    catalog = catalog_of(
        tool("chatPost", "POST", "/api", (), {"const": "posted"}, fixed={"method": "chat.postMessage"}),
        tool("chatDelete", "POST", "/api", (), {"const": "deleted"}, fixed={"method": "chat.delete"}),
        base_url="https://slack.example.com",
    )
    with serve_rest_upstream(catalog) as upstream, httpx.Client(base_url=upstream.url) as http:
        assert http.post("/api?method=chat.delete").json() == "deleted"
        assert http.post("/api", params={"method": "chat.postMessage"}).json() == "posted"
        wrong = http.post("/api?method=chat.update")
        assert wrong.status_code == 400 and "method=chat.postMessage" in wrong.json()["error"]["message"]


def test_a_fragment_in_the_path_and_the_bodys_media_type_choose_between_operations_on_one_path() -> None:
    """Azure's overloads (`/persistedfaces#overload=stream`): the client sends the path without its fragment, and
    the body's media type says which operation it is; a request without a body keeps the document's order."""
    catalog = catalog_of(
        tool("addFromUrl", "POST", "/faces", (Param("url", "string", True, location="body"),), None, body="members"),
        tool(
            "addFromStream",
            "POST",
            "/faces#overload=stream",
            (Param("body", "string", True, location="body"),),
            {"const": "from a stream"},
            body="whole",
            body_type="application/octet-stream",
        ),
    )
    stream = {"Content-Type": "application/octet-stream"}
    with serve_rest_upstream(catalog) as upstream, httpx.Client(base_url=upstream.url) as http:
        assert http.post("/faces", content=b"\x89PNG", headers=stream).json() == "from a stream"
        assert http.post("/faces", json={"url": "https://example.com/a.png"}).json() == {"ok": True}
        assert [r.tool for r in upstream.requests] == ["addFromStream", "addFromUrl"]
        assert http.post("/faces").json()["error"]["missing"] == [{"name": "url", "in": "body"}]
    router = Router(catalog, "/v1")
    assert router.route("POST", "/v1/faces#overload=stream", []).status == 404  # a sent fragment is no path
    # A fragment of query pairs (`#export=true`) picks the operation whose request carries them.
    exports = catalog_of(
        tool("getApi", "GET", "/apis/{id}", (path_param("id"),)),
        tool("exportApi", "GET", "/apis/{id}#export=true", (path_param("id"), Param("export", "string", True))),
    )
    chosen = Router(exports, "")
    exported, plain = chosen.route("GET", "/apis/a1", [("export", "true")]), chosen.route("GET", "/apis/a1", [])
    assert exported.route is not None and exported.route.tool.name == "exportApi"
    assert plain.route is not None and plain.route.tool.name == "getApi"


def test_a_base_path_may_be_given_and_a_catalog_without_operations_is_refused() -> None:
    with serve_rest_upstream(PETS, base_path="", api_key=KEY) as upstream:
        assert upstream.url == f"http://127.0.0.1:{upstream.port}"
        assert httpx.get(upstream.url + "/pets/mine", headers=BEARER).status_code == 200
    spec_catalog = load_catalog()
    assert not has_operations(spec_catalog) and has_operations(PETS)
    with pytest.raises(ValueError, match="no REST operations"):
        RestUpstream(spec_catalog)


# --- answers ----------------------------------------------------------------------------------------


def test_answers_are_the_output_schemas_sample_seeded_by_the_tools_name(client: httpx.Client) -> None:
    reply = client.get("/pets/1")
    assert reply.status_code == 200 and reply.headers["x-sample-data"] == "synthetic"
    assert reply.content == dumps(sample_value(PET, "getPet")).encode()
    assert set(reply.json()) >= {"id", "name"}
    assert client.get("/pets/2").content == reply.content  # every call to a tool: the same answer


@pytest.mark.slow
def test_the_same_bytes_from_another_server_and_another_process(upstream: RestUpstream, client: httpx.Client) -> None:
    with serve_rest_upstream(PETS) as other:
        assert httpx.get(other.url + "/pets/mine", headers=BEARER).content == client.get("/pets/mine").content
    script = (
        "import sys; sys.path.insert(0, 'tests'); from test_rest_upstream import PETS; "
        "from progressive_mcp.offline.rest_upstream import RestUpstream; "
        "u = RestUpstream(PETS); sys.stdout.write(u.answer(PETS.get('getMyPets')).decode()); u.stop()"
    )
    run = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60
    )
    assert run.stdout.encode() == client.get("/pets/mine").content


def test_the_schemas_example_is_preferred(client: httpx.Client) -> None:
    assert client.put("/pets/1").json() == {"done": 1}  # examples[0]
    assert client.get("/photos/a.jpg").json() == "photo"  # OpenAPI 3.0's example


def test_no_output_schema_answers_ok_or_204_to_delete(client: httpx.Client) -> None:
    assert client.get("/ping").json() == {"ok": True}
    deleted = client.delete("/pets/1")
    assert deleted.status_code == 204 and deleted.content == b"" and "content-length" not in deleted.headers


# --- light checks -----------------------------------------------------------------------------------


def test_a_missing_required_query_or_header_parameter_is_400_naming_it(client: httpx.Client) -> None:
    reply = client.get("/pets")
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert error["message"] == "Missing required query parameter 'limit', header parameter 'X-Request-Id'"
    assert error["missing"] == [{"name": "limit", "in": "query"}, {"name": "X-Request-Id", "in": "header"}]
    assert client.get("/pets?limit=", headers={"x-request-id": "r1"}).status_code == 200  # present, even empty


def test_query_objects_are_checked_as_they_are_serialised() -> None:
    object_schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    catalog = catalog_of(
        tool(
            "search",
            "GET",
            "/search",
            (
                Param("filter", "object", True, schema=object_schema, style="deepObject", explode=True),
                Param("where", "object", True, schema=object_schema),  # form, exploded: its members are sent
            ),
            {"const": 1},
        )
    )
    with serve_rest_upstream(catalog) as upstream:
        assert httpx.get(upstream.url + "/search?filter[a]=1&a=2").status_code == 200
        reply = httpx.get(upstream.url + "/search?a=2")
        assert reply.status_code == 400 and reply.json()["error"]["missing"] == [{"name": "filter", "in": "query"}]


def test_bodies_are_checked_for_media_type_syntax_and_required_members(client: httpx.Client) -> None:
    assert client.post("/pets", json={"name": "Rex"}).status_code == 200
    missing = client.post("/pets", json={"tag": "dog"})
    assert missing.status_code == 400 and missing.json()["error"]["missing"] == [{"name": "name", "in": "body"}]
    assert client.post("/pets").json()["error"]["missing"] == [{"name": "name", "in": "body"}]
    broken = client.post("/pets", content=b"{nope", headers={"Content-Type": "application/json"})
    assert broken.status_code == 400 and "not valid JSON" in broken.json()["error"]["message"]
    assert client.post("/pets", json=["Rex"]).status_code == 400
    form = client.post("/pets", data={"name": "Rex"})
    assert form.status_code == 415 and "expected application/json" in form.json()["error"]["message"]


def test_form_and_whole_bodies() -> None:
    catalog = catalog_of(
        tool(
            "post",
            "POST",
            "/chat",
            (Param("text", "string", True, location="body"),),
            None,
            body="members",
            body_type="application/x-www-form-urlencoded",
        ),
        tool("put", "PUT", "/doc", (Param("body", "object", True, location="body"),), None, body="whole"),
    )
    with serve_rest_upstream(catalog) as upstream, httpx.Client(base_url=upstream.url) as http:
        assert http.post("/chat", data={"text": "hi"}).json() == {"ok": True}
        assert http.post("/chat", data={"other": "hi"}).json()["error"]["missing"] == [{"name": "text", "in": "body"}]
        assert http.put("/doc", json={"any": "thing"}).status_code == 200
        assert http.put("/doc").json()["error"]["missing"] == [{"name": "body", "in": "body"}]


FORM = "application/x-www-form-urlencoded"
OBJECT: dict[str, Any] = {"type": "object", "additionalProperties": {"type": "string"}}
METADATA: dict[str, Any] = {"anyOf": [OBJECT, {"type": "string", "enum": [""]}]}  # Stripe's, "" unsets it all
STRINGS: dict[str, Any] = {"type": "array", "items": {"type": "string"}}


def body_param(name: str, schema: dict[str, Any], **fields: Any) -> Param:
    kind = schema.get("type", "object")
    return Param(name, kind, fields.pop("required", False), location="body", schema=schema, **fields)


ENCODED = catalog_of(
    tool(
        "refund",
        "POST",
        "/refunds",
        (
            body_param("charge", {"type": "string"}, required=True),
            body_param("amount", {"type": "integer"}),
            body_param("metadata", METADATA, style="deepObject", explode=True),
            body_param("expand", STRINGS, style="deepObject", explode=True),
            body_param("ids", STRINGS, style="form", explode=False),
            body_param("tags", STRINGS, collection_format="pipes"),
            body_param("options", {"type": "object"}, content_type="application/json"),
            body_param("shipping", {"type": "object", "properties": {"city": {"type": "string"}}}),
            body_param("repeat", STRINGS),
        ),
        None,
        body="members",
        body_type=FORM,
    ),
    tool(
        "upload",
        "POST",
        "/files",
        (
            body_param("file", {"type": "string", "contentEncoding": "base64"}, required=True),
            body_param("link", {"type": "object"}),
        ),
        None,
        body="members",
        body_type="multipart/form-data",
    ),
)


@pytest.mark.parametrize(
    "body",
    [
        "charge=ch_1&amount=500&metadata[order]=42&metadata[note]=a%20b&expand[]=charge&expand[]=customer",
        "charge=ch_1&metadata=&ids=a,b&tags=a|b&options=%7B%22a%22%3A1%7D&city=Paris&repeat=x&repeat=y",
        "charge=ch+1&amount=-3&metadata[a][b]=nested&expand[0][x]=indexed",
    ],
)
def test_a_form_body_that_follows_the_documents_encoding_is_accepted(body: str) -> None:
    with serve_rest_upstream(ENCODED) as upstream, httpx.Client(base_url=upstream.url) as http:
        answer = http.post("/refunds", content=body.encode(), headers={"Content-Type": FORM})
        assert (answer.status_code, answer.json()) == (200, {"ok": True})


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ("charge=ch_1&metadata=%7B%22order%22%3A%2242%22%7D", "metadata is sent as metadata[key]=value"),
        ("charge=ch_1&metadata=42", "metadata is sent as metadata[key]=value (style deepObject)"),
        ("charge=ch_1&expand=charge", "expand is sent as expand[key]=value"),
        ("charge=ch_1&amount[x]=1", "amount is sent in style form, not with deepObject brackets"),
        ("charge=ch_1&ids=a&ids=b", "ids is an array sent once, its items joined (form)"),
        ("charge=ch_1&tags=a&tags=b", "joined (pipes)"),
        ("charge=ch_1&options=%7Bnope", "options is sent as JSON text (application/json)"),
        ("charge=ch_1&shipping=%7B%22city%22%3A%22P%22%7D", "shipping is an object, sent (style form, exploded)"),
    ],
)
def test_a_form_body_that_does_not_follow_the_documents_encoding_is_400(body: str, words: str) -> None:
    with serve_rest_upstream(ENCODED) as upstream, httpx.Client(base_url=upstream.url) as http:
        answer = http.post("/refunds", content=body.encode(), headers={"Content-Type": FORM})
        message = answer.json()["error"]["message"]
        assert answer.status_code == 400 and message.startswith("The body does not follow the document's encoding")
        assert words in message


def test_form_members_named_with_brackets_are_themselves() -> None:
    # Cambase's Swagger form fields (a Rails API): the member's own name is `vendor[name]`, not a member of `vendor`
    vendors = catalog_of(
        tool(
            "create",
            "POST",
            "/vendors",
            (
                body_param("vendor_name", {"type": "string"}, required=True, wire_name="vendor[name]"),
                body_param("vendor_url", {"type": "string"}, wire_name="vendor[url]"),
            ),
            None,
            body="members",
            body_type=FORM,
        ),
    )
    with serve_rest_upstream(vendors) as upstream, httpx.Client(base_url=upstream.url) as http:
        good = http.post("/vendors", content=b"vendor%5Bname%5D=Acme&vendor%5Burl%5D=x", headers={"Content-Type": FORM})
        assert (good.status_code, good.json()) == (200, {"ok": True})
        missing = http.post("/vendors", content=b"vendor%5Burl%5D=x", headers={"Content-Type": FORM})
        assert missing.json()["error"]["missing"] == [{"name": "vendor[name]", "in": "body"}]
        parts = http.post("/vendors", files={"vendor[name]": (None, b"Acme")})
        assert parts.status_code == 415  # a form body, not multipart


def test_a_body_under_a_media_range_takes_any_type_in_that_range() -> None:
    ranges = catalog_of(
        tool("any", "PUT", "/any", (Param("body", "object", True, location="body"),), None, body="whole",
             body_type="*/*"),
        tool("text", "PUT", "/text", (Param("body", "string", True, location="body"),), None, body="whole",
             body_type="text/*"),
    )  # fmt: skip
    with serve_rest_upstream(ranges) as upstream, httpx.Client(base_url=upstream.url) as http:
        assert http.put("/any", json={"a": 1}).status_code == 200
        assert http.put("/any", content=b"x", headers={"Content-Type": "text/plain"}).status_code == 200
        assert http.put("/text", content=b"x", headers={"Content-Type": "text/csv"}).status_code == 200
        assert http.put("/text", json={"a": 1}).status_code == 415


def test_multipart_bodies_are_read_for_their_members_and_json_parts() -> None:
    with serve_rest_upstream(ENCODED) as upstream, httpx.Client(base_url=upstream.url) as http:
        good = http.post("/files", files={"file": ("f", b"\x00\x01"), "link": (None, b'{"a":1}', "application/json")})
        assert good.status_code == 200
        missing = http.post("/files", files={"link": (None, b'{"a":1}', "application/json")})
        assert missing.status_code == 400 and missing.json()["error"]["missing"] == [{"name": "file", "in": "body"}]
        broken = http.post("/files", files={"file": ("f", b"x"), "link": (None, b"{nope", "application/json")})
        assert broken.status_code == 400 and "link says application/json but is not JSON" in broken.text
        garbled = http.post("/files", content=b"no parts", headers={"Content-Type": "multipart/form-data; boundary=x"})
        assert garbled.status_code == 400


@pytest.fixture(scope="module")
def stripe() -> Catalog:
    """Stripe's catalog, loaded once for the module's three tests (its 4 MB document takes seconds to load)."""
    return load_catalog(ROOT.parent / "shared" / "openapi" / "stripe" / "spec3.json")


@pytest.mark.skipif(not (ROOT.parent / "shared" / "openapi").is_dir(), reason="../shared/openapi is absent")
def test_stripe_refunds_metadata_as_json_text_is_refused_and_as_deep_object_accepted(stripe: Catalog) -> None:
    catalog = stripe
    with serve_rest_upstream(catalog) as upstream, httpx.Client(base_url=upstream.url) as http:
        auth = catalog.api.auth
        assert auth is not None  # Basic or bearer, whichever the server picks of the two Stripe declares
        token = base64.b64encode(b"sk_test_123:").decode() if auth.scheme == "basic" else "sk_test_123"
        headers = {"Content-Type": FORM, "Authorization": f"{auth.scheme.capitalize()} {token}"}
        wrong = http.post("/v1/refunds", content=b"charge=ch_1&metadata=%7B%22order%22%3A%2242%22%7D", headers=headers)
        assert wrong.status_code == 400
        assert "metadata is sent as metadata[key]=value (style deepObject)" in wrong.json()["error"]["message"]
        right = http.post("/v1/refunds", content=b"charge=ch_1&metadata[order]=42&expand[]=charge", headers=headers)
        assert right.status_code == 200 and "error" not in right.json()


@pytest.mark.skipif(not (ROOT.parent / "shared" / "openapi").is_dir(), reason="../shared/openapi is absent")
def test_stripe_files_multipart_deep_object_parts_are_accepted_and_one_json_part_refused(stripe: Catalog) -> None:
    # PostFiles' Encoding Object sets style deepObject for file_link_data and expand: OpenAPI 3.1.1/3.2 apply it to
    # multipart/form-data too, so Stripe expects file_link_data[create] parts, not one JSON part.
    catalog = stripe
    with serve_rest_upstream(catalog) as upstream, httpx.Client(base_url=upstream.url) as http:
        headers = {"Authorization": "Bearer sk_test_123"}
        file = ("a.csv", b"a,b\n", "text/csv")
        right = http.post(
            "/v1/files",
            files=[("file", file), ("purpose", (None, b"dispute_evidence")), ("expand[]", (None, b"links")),
                   ("file_link_data[create]", (None, b"true")), ("file_link_data[metadata][order]", (None, b"42"))],
            headers=headers,
        )  # fmt: skip
        assert right.status_code == 200 and "error" not in right.json(), right.text
        for wrong_parts, words in [
            ([("file_link_data", (None, b'{"create":true}', "application/json"))], "file_link_data is sent as"),
            ([("expand", (None, b"links"))], "expand is sent as expand[key]=value"),
        ]:
            parts = [("file", file), ("purpose", (None, b"dispute_evidence")), *wrong_parts]
            wrong = http.post("/v1/files", files=parts, headers=headers)
            assert wrong.status_code == 400, (wrong_parts, wrong.text)
            assert words in wrong.json()["error"]["message"], wrong.text


# --- authentication ---------------------------------------------------------------------------------

AUTHS = {
    "query": Auth("query", "api_key", "K"),
    "header": Auth("header", "X-Api-Token", "K", prefix="Token "),
    "cookie": Auth("cookie", "session", "K"),
    "bearer": Auth("header", "Authorization", "K", scheme="bearer"),
    "basic": Auth("header", "Authorization", "K", scheme="basic"),
}


def credentials(scheme: str, key: str = KEY) -> dict[str, Any]:
    """The httpx arguments that send `key` as the scheme wants it."""
    if scheme == "query":
        return {"params": {"api_key": key}}
    if scheme == "header":
        return {"headers": {"X-Api-Token": f"Token {key}"}}
    if scheme == "cookie":
        return {"headers": {"Cookie": f"theme=dark; session={key}"}}
    if scheme == "bearer":
        return {"headers": {"Authorization": f"Bearer {key}"}}
    return {"headers": {"Authorization": "Basic " + base64.b64encode(f"me:{key}".encode()).decode()}}


WRONG = {
    "query": [{"params": {"apikey": KEY}}, {"params": {"api_key": ""}}],
    "header": [{"headers": {"X-Api-Token": KEY}}, {"headers": {"X-Api-Token": f"token {KEY}"}}],
    "cookie": [{"headers": {"Cookie": f"sessions={KEY}"}}, {"params": {"session": KEY}}],
    "bearer": [
        {"headers": {"Authorization": KEY}},
        {"headers": {"Authorization": "Basic abc"}},
        {"params": {"access_token": KEY}},
    ],
    "basic": [
        {"headers": {"Authorization": "Basic !!!"}},
        {"headers": {"Authorization": "Basic " + base64.b64encode(KEY.encode()).decode()}},  # no colon
        {"headers": {"Authorization": f"Bearer {KEY}"}},
    ],
}


def also(right: dict[str, Any], **more: dict[str, str]) -> dict[str, Any]:
    """httpx arguments: the right credentials, with more parameters or headers."""
    return {key: {**right.get(key, {}), **more.get(key, {})} for key in {*right, *more}}


def served(auth: Auth, **options: Any) -> Any:
    return serve_rest_upstream(
        catalog_of(tool("getPet", "GET", "/pets/{petId}", (path_param("petId"),), PET), auth=auth), **options
    )


def test_every_scheme_the_document_offers_is_accepted_and_no_other() -> None:
    # A document whose security offers several alternatives (Stripe: basicAuth or bearerAuth) is called with any
    # of them; the server's default is only the one this project sends unless told otherwise.
    api = Api("pets", "Pet Store", BASE_URL, auth=AUTHS["bearer"], auth_options=(AUTHS["basic"], AUTHS["bearer"],
              AUTHS["header"]))  # fmt: skip
    catalog = Catalog.build(
        api, {"pets": "Pets"}, (tool("getPet", "GET", "/pets/{petId}", (path_param("petId"),), PET),)
    )
    with serve_rest_upstream(catalog) as upstream, httpx.Client(base_url=upstream.url) as http:
        for scheme in ("bearer", "basic", "header"):
            assert http.get("/pets/1", **credentials(scheme)).status_code == 200, scheme
        for wrong in [{}, *WRONG["basic"][:2], credentials("query"), credentials("cookie")]:
            assert http.get("/pets/1", **wrong).status_code == 401, wrong


@pytest.mark.skipif(not (ROOT.parent / "shared" / "openapi").is_dir(), reason="../shared/openapi is absent")
def test_stripe_sample_upstream_takes_basic_beside_bearer(stripe: Catalog) -> None:
    catalog = stripe
    with serve_rest_upstream(catalog) as upstream, httpx.Client(base_url=upstream.url) as http:
        basic = "Basic " + base64.b64encode(b"sk_test_123:").decode()
        for header in ("Bearer sk_test_123", basic):
            assert http.get("/v1/balance", headers={"Authorization": header}).status_code == 200, header
        for header in ("Token token=sk_test_123", "sk_test_123", "Basic sk_test_123"):
            assert http.get("/v1/balance", headers={"Authorization": header}).status_code == 401, header
        assert http.get("/v1/balance", params={"api_key": "sk_test_123"}).status_code == 401


@pytest.mark.parametrize("scheme", sorted(AUTHS))
def test_each_auth_scheme_accepts_its_credentials_and_refuses_others_with_401(scheme: str) -> None:
    with served(AUTHS[scheme]) as upstream, httpx.Client(base_url=upstream.url) as http:
        assert http.get("/pets/1", **credentials(scheme)).status_code == 200
        for wrong in [{}, *WRONG[scheme]]:
            reply = http.get("/pets/1", **wrong)
            assert reply.status_code == 401, wrong
            assert reply.json()["error"]["status"] == 401
            if scheme in ("bearer", "basic"):
                assert reply.headers["www-authenticate"] == f'{scheme.capitalize()} realm="sample upstream"'


@pytest.mark.parametrize("scheme", sorted(AUTHS))
def test_with_an_api_key_given_only_that_key_passes(scheme: str) -> None:
    accepted = f"me:{KEY}" if scheme == "basic" else KEY
    with served(AUTHS[scheme], api_key=accepted) as upstream, httpx.Client(base_url=upstream.url) as http:
        assert http.get("/pets/1", **credentials(scheme)).status_code == 200
        reply = http.get("/pets/1", **credentials(scheme, "other-key-456"))
        assert reply.status_code == 401 and reply.json()["error"]["message"].startswith("Invalid")


def test_authentication_comes_before_parameter_checks(client: httpx.Client) -> None:
    assert client.get("/pets", headers={"Authorization": ""}).status_code == 401
    assert client.get("/nothing", headers={"Authorization": ""}).status_code == 404  # routing comes first


# --- the record -------------------------------------------------------------------------------------


def test_the_raw_target_query_headers_and_body_are_recorded_as_received(upstream: RestUpstream) -> None:
    connection = http.client.HTTPConnection(upstream.host, upstream.port, timeout=10)
    body = b"\x00\xffnot utf-8"
    connection.putrequest("POST", "/v1/pets/%7Bx%7D/../mine?b=1+2&a=%26&b=&flag", skip_accept_encoding=True)
    for name, value in (("Authorization", f"Bearer {KEY}"), ("X-Twice", "one"), ("x-twice", "two")):
        connection.putheader(name, value)
    connection.putheader("Content-Type", "application/octet-stream")
    connection.putheader("Content-Length", str(len(body)))
    connection.endheaders(body)
    assert connection.getresponse().status == 404  # "/../" is not resolved: no such route
    connection.close()
    record = upstream.requests[-1]
    assert record.method == "POST"
    assert record.raw_path == "/v1/pets/%7Bx%7D/../mine?b=1+2&a=%26&b=&flag"
    assert record.path == "/v1/pets/{x}/../mine"
    assert record.query_string == "b=1+2&a=%26&b=&flag"
    assert record.query == (("b", "1 2"), ("a", "&"), ("b", ""), ("flag", ""))
    assert [(k, v) for k, v in record.headers if k.lower() == "x-twice"] == [("X-Twice", "one"), ("x-twice", "two")]
    assert record.header("AUTHORIZATION") == "Bearer ***"
    assert record.body == body and record.tool is None and record.status == 404
    data = record.to_json()
    assert data["body"] is None and base64.b64decode(data["body_base64"]) == body


def test_a_leading_double_slash_is_recorded_as_it_came(upstream: RestUpstream) -> None:
    with socket.create_connection((upstream.host, upstream.port), timeout=10) as raw:
        raw.sendall(f"GET //v1/pets/mine HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n\r\n".encode())
        assert raw.recv(100).startswith(b"HTTP/1.1 404")
    assert upstream.requests[-1].raw_path == "//v1/pets/mine"


def test_get_requests_returns_the_record_as_json_and_delete_clears_it(
    upstream: RestUpstream, client: httpx.Client
) -> None:
    client.post("/pets", json={"name": "Rex"}, params={"x": "1"})
    control = f"http://127.0.0.1:{upstream.port}{REQUESTS_PATH}"
    data = httpx.get(control).json()
    assert data["count"] == 1  # the control paths themselves are never recorded
    (request,) = data["requests"]
    assert request["method"] == "POST" and request["tool"] == "createPet" and request["status"] == 200
    assert request["raw_path"] == "/v1/pets?x=1" and request["query"] == [["x", "1"]]
    assert json.loads(request["body"]) == {"name": "Rex"}
    assert ["Authorization", "Bearer ***"] in request["headers"]
    assert httpx.delete(control).json() == {"cleared": True}
    assert upstream.requests == [] and httpx.get(control).json() == {"count": 0, "requests": []}
    client.get("/pets/mine")
    upstream.clear_requests()
    assert upstream.requests == []


@pytest.mark.parametrize("scheme", sorted(AUTHS))
def test_the_key_never_appears_in_the_record_in_any_form(scheme: str, capfd: pytest.CaptureFixture[str]) -> None:
    right = credentials(scheme)
    echo = {"note": f"my key is {KEY}", "encoded": KEY.lower()}
    with served(AUTHS[scheme]) as upstream, httpx.Client(base_url=upstream.url) as http:
        http.get("/pets/1", **right)
        http.post("/pets/1", json=echo, **right)  # 405, recorded all the same
        http.get(f"/pets/{KEY}", **right)  # the key in the path too
        http.get("/pets/1", **also(right, params={"token": KEY, "api_key": KEY, "q": f"x{KEY}y"}))
        http.get("/pets/1", **also(right, headers={"X-Api-Key": KEY, "Proxy-Authorization": f"Basic {KEY}"}))
        texts = [json.dumps(r.to_json()) + repr(r) for r in upstream.requests]
        texts.append(httpx.get(f"http://127.0.0.1:{upstream.port}{REQUESTS_PATH}").text)
    encoded = base64.b64encode(f"me:{KEY}".encode()).decode()
    for text in texts:
        for form in (KEY, KEY.lower(), "SeCrEt-KEY", encoded, "SeCrEt%2DKEY"):
            assert form not in text, (form, text[:400])
    assert "***" in texts[-1]
    captured = capfd.readouterr()
    assert KEY not in captured.out + captured.err


def test_the_key_is_masked_where_it_came_and_kept_everywhere_else() -> None:
    with served(AUTHS["query"]) as upstream, httpx.Client(base_url=upstream.url) as http:
        http.get("/pets/1", params={"api_key": KEY, "limit": "5"})
    record = upstream.requests[-1]
    assert record.raw_path == "/v1/pets/1?api_key=***&limit=5"
    assert record.query_string == "api_key=***&limit=5"
    assert record.query == (("api_key", "***"), ("limit", "5"))


# --- faults -----------------------------------------------------------------------------------------


def test_faults_in_process_and_over_http(upstream: RestUpstream, client: httpx.Client) -> None:
    upstream.faults.status = 503
    upstream.faults.retry_after = 7
    reply = client.get("/pets/mine")
    assert reply.status_code == 503 and reply.headers["retry-after"] == "7"
    assert reply.json()["error"]["status"] == 503
    control = f"http://127.0.0.1:{upstream.port}/__faults"
    assert httpx.post(control, json={"status": None, "retry_after": None, "empty": True}).json()["empty"] is True
    assert client.get("/pets/mine").content == b""
    upstream.update_faults({"empty": False, "html": True})
    assert client.get("/pets/mine").headers["content-type"] == "text/html"
    upstream.update_faults({"html": False, "malformed": True})
    with pytest.raises(ValueError):
        client.get("/pets/mine").json()
    upstream.update_faults({"malformed": False, "disconnect": True})
    with pytest.raises(httpx.RemoteProtocolError):
        client.get("/pets/mine")
    assert upstream.requests[-1].status is None
    upstream.update_faults({"disconnect": False, "delay_s": 0.3})
    with pytest.raises(httpx.ReadTimeout):
        client.get("/pets/mine", timeout=0.1)
    assert upstream.requests[-1].tool == "getMyPets"  # recorded on arrival, before the delay
    time.sleep(0.4)  # let the delayed answer go, so it cannot touch the next test's record
    bad = httpx.post(control, json={"status": 42, "nope": 1})
    assert bad.status_code == 400 and "nope" in bad.json()["error"]["message"]
    assert httpx.post(control, json={"status": 42}).status_code == 400
    upstream.reset()
    assert upstream.faults == RestFaults() and client.get("/pets/mine").status_code == 200


# --- concurrency ------------------------------------------------------------------------------------


def test_many_threads_at_once_each_get_their_answer_and_their_record(upstream: RestUpstream) -> None:
    threads, calls = 24, 15
    expected = dumps(sample_value(PET, "getPet")).encode()
    failures: list[str] = []
    start = threading.Barrier(threads)

    def work(worker: int) -> None:
        with httpx.Client(base_url=upstream.url, headers=BEARER, timeout=20) as http:
            start.wait()
            for call in range(calls):
                reply = http.get(f"/pets/{worker}-{call}")
                if reply.status_code != 200 or reply.content != expected:
                    failures.append(f"{worker}-{call}: {reply.status_code}")

    pool = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join(timeout=60)
    assert failures == []
    ids = sorted(r.path_params["petId"] for r in upstream.requests)
    assert ids == sorted(f"{w}-{c}" for w in range(threads) for c in range(calls))


# --- the command line -------------------------------------------------------------------------------


def sample_args(*flags: str) -> tuple[argparse.Namespace, argparse.ArgumentParser]:
    args = build_parser().parse_args(["sample-upstream", "--port", "0", *flags])
    return args, args.parser


def test_the_sample_upstreams_fault_flags_map_onto_rest_faults() -> None:
    args, parser = sample_args("--status", "429", "--retry-after", "3", "--delay", "0.5", "--malformed")
    upstream = upstream_from_args(PETS, args, parser)
    try:
        assert upstream.faults == RestFaults(delay_s=0.5, status=429, retry_after=3.0, malformed=True)
    finally:
        upstream.stop()
    for flag in ("--huge", "--rate-limit", "--invalid-key", "--trickle=1", "--body-mb=2"):
        args, parser = sample_args(flag)
        with pytest.raises(SystemExit):
            upstream_from_args(PETS, args, parser)


@pytest.mark.slow
def test_run_serves_a_catalog_and_prints_the_url_for_upstream() -> None:
    # load_catalog reads only the spec format today, whose tools have no operations: the catalog is built here,
    # and run() is what `sample-upstream --spec` calls once a catalog has them.
    script = (
        "import sys; sys.path.insert(0, 'tests'); from test_rest_upstream import PETS; "
        "from progressive_mcp.cli import build_parser; from progressive_mcp.offline import rest_upstream; "
        "args = build_parser().parse_args(['sample-upstream', '--port', '0', '--spec', 'unused']); "
        "sys.exit(rest_upstream.run(PETS, args, args.parser))"
    )
    process = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        banner = process.stderr.readline()
        assert "REST sample upstream for Pet Store (10 operations" in banner, banner
        hint = process.stderr.readline()
        url = hint.rsplit(" ", 1)[-1].strip()
        assert hint.startswith("use it with: --upstream http://127.0.0.1:") and url.endswith("/v1")
        assert httpx.get(url + "/pets/mine", headers=BEARER, timeout=10).status_code == 200
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.mark.slow
def test_sample_upstream_spec_without_operations_serves_alpha_vantage_and_a_bad_file_fails(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "progressive_mcp", "sample-upstream", "--port", "0"]
    missing = subprocess.run([*command, "--spec", str(tmp_path / "none.yaml")], capture_output=True, text=True)
    assert missing.returncode == 1 and "cannot read the file" in missing.stderr
    spec = ROOT / "tests" / "fixtures" / "lastfm" / "lastfm.yaml"
    process = subprocess.Popen([*command, "--spec", str(spec)], cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        assert "has no REST operations; serving the Alpha Vantage sample" in process.stderr.readline()
        assert "listening on http://127.0.0.1:" in process.stderr.readline()
    finally:
        process.terminate()
        process.wait(timeout=10)


# --- the Lambda asset -------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_offline_modules_stay_out_of_the_lambda_asset_and_off_its_import_path() -> None:
    offline = {p.relative_to(ROOT).as_posix() for p in (ROOT / "progressive_mcp" / "offline").glob("*.py")}
    assert offline <= LOCAL_ONLY_FILES
    probe = "import sys, lambda_fn.handler; print([m for m in sys.modules if m.startswith('progressive_mcp.offline')])"
    run = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


def test_respond_works_without_the_http_layer(upstream: RestUpstream) -> None:
    reply = upstream.respond(Incoming("GET", "/v1/pets/mine", tuple(BEARER.items())))
    assert reply.status == 200 and json.loads(reply.body)
    assert upstream.requests[-1].tool == "getMyPets"


def test_the_record_keeps_the_newest_requests_up_to_its_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """A long-running upstream must not grow without bound (`serve --sample-upstream` under load kept every
    request): the record holds the newest `serving.RECORD_LIMIT`, oldest first, and /__requests says so."""
    monkeypatch.setattr(serving, "RECORD_LIMIT", 3)
    with serve_rest_upstream(PETS) as upstream:
        for pet in ("a", "b", "c", "d", "e"):
            assert raw_get(upstream, f"/v1/pets/{pet}", BEARER)[0] == 200
        assert [r.path_params["petId"] for r in upstream.requests] == ["c", "d", "e"]
        status, body = raw_get(upstream, "/__requests")
        assert status == 200 and json.loads(body)["count"] == 3
