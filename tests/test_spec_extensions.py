"""Tests for what the spec format says beyond a GET with a query key: each tool's HTTP `method`, constant `fixed`
query parameters, MCP `annotations` (implied by the method, replaced one by one), and bearer, basic and cookie
auth. Each reaches the catalog; each mistake is a SpecError naming the tool, the field and the line; and the
bundled Alpha Vantage catalog, which uses none of them, is exactly what it was.

Run with: .venv/bin/python -m pytest tests/test_spec_extensions.py -q
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest
import yaml
from test_spec import MY_TOOL, TEMPLATE, edit, line_of, spec_problems  # the spec tests' template and helpers

from progressive_mcp.calls.upstream import UpstreamClient
from progressive_mcp.catalog import METHOD_ANNOTATIONS, TOOL_ANNOTATIONS, Auth, Catalog, method_annotations
from progressive_mcp.errors import SpecError
from progressive_mcp.sources import default_spec_path, load_catalog
from progressive_mcp.sources.spec import build_catalog, parse_spec, spec_json_schema
from progressive_mcp.surfaces.surface import Surface

LASTFM = Path(__file__).resolve().parent / "fixtures" / "lastfm" / "lastfm.yaml"
AUTH_LINE = "  auth: {in: query, name: apikey, env: DEMO_API_KEY}\n"
MY_TOOL_CATEGORY = "    category: stocks\n    summary: Latest"  # a place to add fields to MY_TOOL
OTHER_TOOL_CATEGORY = "    category: stocks\n    summary: Something else."

POST = {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False, "openWorldHint": True}
PUT = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True, "openWorldHint": True}
PATCH = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False, "openWorldHint": True}
DELETE = PUT


def catalog_of(text: str) -> Catalog:
    return build_catalog(parse_spec(text))


def with_tool_fields(fields: str, text: str = TEMPLATE) -> str:
    """The template with YAML lines (indented for a tool) added to MY_TOOL."""
    return edit(MY_TOOL_CATEGORY, "    category: stocks\n" + fields + "    summary: Latest", text)


def with_api_fields(fields: str, text: str = TEMPLATE) -> str:
    """The template with YAML lines (indented for `api`) added after its auth line."""
    return edit(AUTH_LINE, AUTH_LINE + fields, text)


def with_auth(auth: str, text: str = TEMPLATE) -> str:
    return edit(AUTH_LINE, f"  auth: {auth}\n", text)


# --- what reaches the catalog -------------------------------------------------------------------------------------


def test_a_spec_that_says_nothing_new_gets_todays_catalog() -> None:
    catalog = catalog_of(TEMPLATE)
    for tool in catalog.tools:
        assert tool.method == "GET"
        assert tool.fixed == {}
        assert tool.annotations is TOOL_ANNOTATIONS
        assert tool.definition()["annotations"] == {
            "readOnlyHint": True,
            "destructiveHint": False,
            "openWorldHint": True,
        }
    assert catalog.api.auth == Auth("query", "apikey", "DEMO_API_KEY", "", "api_key")


@pytest.mark.parametrize(
    ("method", "hints"),
    [("GET", dict(TOOL_ANNOTATIONS)), ("POST", POST), ("PUT", PUT), ("PATCH", PATCH), ("DELETE", DELETE)],
)
def test_the_method_reaches_the_tool_and_implies_its_annotations(method: str, hints: dict[str, bool]) -> None:
    tool = catalog_of(with_tool_fields(f"    method: {method}\n")).get("MY_TOOL")
    assert tool.method == method
    assert dict(tool.annotations) == hints
    # In MCP's order, so a definition reads the same whatever the method.
    assert list(tool.annotations) == [
        n for n in ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint") if n in hints
    ]
    assert catalog_of(with_tool_fields(f"    method: {method}\n")).get("OTHER_TOOL").method == "GET"


def test_every_write_says_its_destructive_and_idempotent_hints_outright() -> None:
    # MCP reads a missing destructiveHint as true: a POST that adds must say false, not leave it out.
    for method, hints in METHOD_ANNOTATIONS.items():
        if not hints["readOnlyHint"]:
            assert {"destructiveHint", "idempotentHint", "openWorldHint"} <= set(hints), method
        else:
            assert hints is TOOL_ANNOTATIONS, method


def test_api_default_method_applies_to_tools_that_name_none() -> None:
    text = with_tool_fields("    method: GET\n", with_api_fields("  default_method: POST\n"))
    catalog = catalog_of(text)
    assert catalog.get("MY_TOOL").method == "GET" and catalog.get("MY_TOOL").annotations is TOOL_ANNOTATIONS
    assert catalog.get("OTHER_TOOL").method == "POST" and dict(catalog.get("OTHER_TOOL").annotations) == POST


@pytest.mark.parametrize(
    ("fields", "hints"),
    [
        # a POST that removes something
        ("    method: POST\n    annotations: {destructiveHint: true}\n", {**POST, "destructiveHint": True}),
        # a POST that repeats harmlessly (loving a track twice)
        ("    method: POST\n    annotations: {idempotentHint: true}\n", {**POST, "idempotentHint": True}),
        # a search sent as POST: read-only after all
        ("    method: POST\n    annotations: {readOnlyHint: true}\n", {**POST, "readOnlyHint": True}),
        # a GET with a side effect
        ("    annotations: {readOnlyHint: false}\n", {**TOOL_ANNOTATIONS, "readOnlyHint": False}),
        # a closed world, whatever the method
        ("    method: DELETE\n    annotations: {openWorldHint: false}\n", {**DELETE, "openWorldHint": False}),
    ],
    ids=["post-destructive", "post-idempotent", "post-read-only", "get-not-read-only", "closed-world"],
)
def test_annotations_given_replace_the_implied_ones_one_by_one(fields: str, hints: dict[str, bool]) -> None:
    tool = catalog_of(with_tool_fields(fields)).get("MY_TOOL")
    assert dict(tool.annotations) == hints
    assert tool.definition()["annotations"] == hints


def test_annotations_that_say_what_the_method_implies_change_nothing() -> None:
    text = with_tool_fields("    annotations: {readOnlyHint: true, destructiveHint: false, openWorldHint: true}\n")
    assert catalog_of(text).get("MY_TOOL").annotations is TOOL_ANNOTATIONS
    assert method_annotations("get", {}) is TOOL_ANNOTATIONS
    assert method_annotations("OPTIONS") == POST  # an unknown method is taken to write


def test_fixed_parameters_merge_api_and_tool_with_the_tool_winning() -> None:
    text = with_tool_fields(
        "    fixed: {format: xml, v: '2'}\n", with_api_fields("  fixed: {format: json, api-version: '2024-01'}\n")
    )
    catalog = catalog_of(text)
    assert dict(catalog.get("MY_TOOL").fixed) == {"format": "xml", "api-version": "2024-01", "v": "2"}
    assert dict(catalog.get("OTHER_TOOL").fixed) == {"format": "json", "api-version": "2024-01"}
    for tool in catalog.tools:  # never an argument: the model neither sees nor sends them
        assert not set(tool.fixed) & set(tool.input_schema["properties"])
    with pytest.raises(TypeError):
        catalog.get("MY_TOOL").fixed["format"] = "csv"  # type: ignore[index]


@pytest.mark.parametrize(
    ("auth", "expected"),
    [
        ("{scheme: bearer, env: DEMO_TOKEN}", Auth("header", "Authorization", "DEMO_TOKEN", "", "bearer")),
        ("{scheme: basic, env: DEMO_LOGIN}", Auth("header", "Authorization", "DEMO_LOGIN", "", "basic")),
        # saying what the scheme implies is allowed, in any case
        (
            "{scheme: bearer, in: header, name: authorization, env: DEMO_TOKEN}",
            Auth("header", "Authorization", "DEMO_TOKEN", "", "bearer"),
        ),
        ("{in: cookie, name: session, env: DEMO_COOKIE}", Auth("cookie", "session", "DEMO_COOKIE", "", "api_key")),
        (
            "{scheme: api_key, in: header, name: X-Api-Key, prefix: 'Token ', env: DEMO_KEY}",
            Auth("header", "X-Api-Key", "DEMO_KEY", "Token ", "api_key"),
        ),
        ("{name: key, env: DEMO_KEY}", Auth("query", "key", "DEMO_KEY", "", "api_key")),  # `in` defaults to query
    ],
    ids=["bearer", "basic", "bearer-said-in-full", "cookie", "header-with-prefix", "query-by-default"],
)
def test_auth_schemes_reach_the_catalog(auth: str, expected: Auth) -> None:
    assert catalog_of(with_auth(auth)).api.auth == expected


def test_bearer_auth_reserves_the_authorization_name() -> None:
    text = with_auth(
        "{scheme: bearer, env: DEMO_TOKEN}",
        edit("      limit:\n", "      Authorization: {type: string}\n      limit:\n"),
    )
    [problem] = parse_problems(text)
    assert f"{MY_TOOL}.params.Authorization:" in problem and "dispatch or auth" in problem


def test_direct_tools_list_carries_each_tools_annotations() -> None:
    text = with_tool_fields("    method: POST\n    annotations: {idempotentHint: true}\n")
    catalog = catalog_of(text)
    tools = {t.name: t for t in Surface(catalog, mode="direct", upstream=UpstreamClient(catalog.api)).list_tools()}
    written = tools["MY_TOOL"].model_dump(by_alias=True, exclude_none=True)["annotations"]
    assert written == {**POST, "idempotentHint": True}
    read = tools["OTHER_TOOL"].model_dump(by_alias=True, exclude_none=True)["annotations"]
    assert read == dict(TOOL_ANNOTATIONS)


def test_the_json_schema_knows_the_new_fields() -> None:
    validator = jsonschema_rs.Draft202012Validator(spec_json_schema())
    full = with_auth(
        "{scheme: bearer, env: DEMO_TOKEN}",
        with_tool_fields(
            "    method: POST\n    fixed: {v: '2'}\n    annotations: {destructiveHint: true}\n",
            with_api_fields("  default_method: GET\n  fixed: {format: json}\n"),
        ),
    )
    assert validator.is_valid(yaml.safe_load(full))
    parse_spec(full)
    # What editors catch as you type, like the models do.
    assert not validator.is_valid(yaml.safe_load(with_tool_fields("    method: FETCH\n")))
    assert not validator.is_valid(yaml.safe_load(with_tool_fields("    annotations: {title: Love}\n")))
    assert not validator.is_valid(yaml.safe_load(with_api_fields("  fixed: {format: 1}\n")))
    assert not validator.is_valid(yaml.safe_load(with_auth("{env: DEMO_KEY}")))  # an api_key names where it goes
    assert not validator.is_valid(yaml.safe_load(with_auth("{scheme: basic, in: query, env: DEMO_LOGIN}")))
    assert not validator.is_valid(yaml.safe_load(with_auth("{scheme: bearer, prefix: 'Bearer ', env: DEMO_TOKEN}")))


# --- mistakes: one problem each, naming tool, field and line ------------------------------------------------------

# (id, text, fragment on the reported line, texts the problem must contain)
BROKEN: list[tuple[str, str, str, list[str]]] = [
    (
        "unknown-method",
        with_tool_fields("    method: FETCH\n"),
        "method: FETCH",
        [f"{MY_TOOL}.method:", "'FETCH' is not allowed", "'POST'", "'DELETE'"],
    ),
    (
        "lower-case-method",
        with_tool_fields("    method: post\n"),
        "method: post",
        [f"{MY_TOOL}.method:", "'post' is not allowed", "'POST'"],
    ),
    (
        "unknown-default-method",
        with_api_fields("  default_method: HEAD\n"),
        "default_method: HEAD",
        ["api.default_method:", "'HEAD' is not allowed"],
    ),
    (
        "fixed-is-also-a-parameter",
        with_tool_fields("    fixed: {limit: '10'}\n"),
        "fixed: {limit",
        [f"{MY_TOOL}.fixed.limit:", "'limit' is also a parameter of this tool", "drop one"],
    ),
    (
        "api-fixed-is-a-tools-parameter",
        with_api_fields("  fixed: {interval: daily}\n"),
        "      interval:",
        [f"{MY_TOOL}.params.interval:", "'interval' is fixed by api.fixed", "'daily'", "cannot be a parameter"],
    ),
    (
        "api-fixed-names-the-dispatch-parameter",
        with_api_fields("  fixed: {function: QUOTE}\n"),
        "fixed: {function",
        ["api.fixed.function:", "'function' is set by the server (dispatch or auth)", "cannot be fixed"],
    ),
    (
        "tool-fixed-names-the-key-parameter",
        with_tool_fields("    fixed: {apikey: demo}\n"),
        "fixed: {apikey",
        [f"{MY_TOOL}.fixed.apikey:", "'apikey' is set by the server", "cannot be fixed"],
    ),
    (
        "fixed-number",
        with_api_fields("  fixed: {v: 2}\n"),
        "fixed: {v: 2}",
        ["api.fixed.v:", "2 is a number", "quote it ('2')"],
    ),
    (
        "fixed-boolean",
        with_tool_fields("    fixed: {raw: true}\n"),
        "fixed: {raw: true}",
        [f"{MY_TOOL}.fixed.raw:", "true is a boolean", "quote it ('true')"],
    ),
    (
        "fixed-name-with-a-space",
        with_api_fields("  fixed: {'a b': x}\n"),
        "fixed: {'a b'",
        ["api.fixed.a b", "pattern"],
    ),
    (
        "annotation-title",
        with_tool_fields("    annotations: {title: Love}\n"),
        "annotations: {title",
        [f"{MY_TOOL}.annotations.title:", "unknown field"],
    ),
    (
        "annotation-snake-case",
        with_tool_fields("    annotations: {read_only_hint: true}\n"),
        "annotations: {read_only_hint",
        [f"{MY_TOOL}.annotations.read_only_hint:", "unknown field"],
    ),
    (
        "annotation-not-a-boolean",
        with_tool_fields("    annotations: {destructiveHint: maybe}\n"),
        "annotations: {destructiveHint",
        [f"{MY_TOOL}.annotations.destructiveHint:", "boolean"],
    ),
    (
        "read-only-and-destructive",
        with_tool_fields("    method: POST\n    annotations: {readOnlyHint: true, destructiveHint: true}\n"),
        "annotations: {readOnlyHint",
        [f"{MY_TOOL}.annotations.destructiveHint:", "a read-only tool cannot be destructive"],
    ),
    (
        "read-only-delete",
        with_tool_fields("    method: DELETE\n    annotations: {readOnlyHint: true}\n"),
        "annotations: {readOnlyHint",
        [
            f"{MY_TOOL}.annotations.readOnlyHint:",
            "method DELETE implies destructiveHint: true",
            "destructiveHint: false",
        ],
    ),
    (
        "destructive-get",
        with_tool_fields("    annotations: {destructiveHint: true}\n"),
        "annotations: {destructiveHint",
        [f"{MY_TOOL}.annotations.destructiveHint:", "method GET implies readOnlyHint: true", "readOnlyHint: false"],
    ),
    (
        "bearer-in-the-query",
        with_auth("{scheme: bearer, in: query, env: DEMO_TOKEN}"),
        "auth: {scheme: bearer",
        ["api.auth.in:", "a bearer key is sent in the Authorization header, not 'query'", "drop `in`", "api_key"],
    ),
    (
        "basic-in-a-cookie",
        with_auth("{scheme: basic, in: cookie, env: DEMO_LOGIN}"),
        "auth: {scheme: basic",
        ["api.auth.in:", "a basic key is sent in the Authorization header, not 'cookie'"],
    ),
    (
        "bearer-in-another-header",
        with_auth("{scheme: bearer, in: header, name: X-Token, env: DEMO_TOKEN}"),
        "auth: {scheme: bearer",
        ["api.auth.name:", "not 'X-Token'", "drop `name`"],
    ),
    (
        "bearer-with-its-own-prefix",
        with_auth("{scheme: bearer, prefix: 'Bearer ', env: DEMO_TOKEN}"),
        "auth: {scheme: bearer",
        ["api.auth.prefix:", "writes 'Bearer' before the key itself", "drop `prefix`"],
    ),
    (
        "api-key-without-a-name",
        with_auth("{in: header, env: DEMO_KEY}"),
        "auth: {in: header",
        ["api.auth.name:", "missing required field", "query parameter, header or cookie"],
    ),
    (
        "unknown-scheme",
        with_auth("{scheme: oauth2, env: DEMO_KEY}"),
        "auth: {scheme: oauth2",
        ["api.auth.scheme:", "'oauth2' is not allowed", "'bearer'", "'basic'"],
    ),
    (
        "auth-in-somewhere-else",
        with_auth("{in: body, name: key, env: DEMO_KEY}"),
        "auth: {in: body",
        ["api.auth.in:", "'body' is not allowed", "'cookie'"],
    ),
]


def parse_problems(text: str) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_spec(text)
    return info.value.problems


@pytest.mark.parametrize(("text", "line_fragment", "expected"), [c[1:] for c in BROKEN], ids=[c[0] for c in BROKEN])
def test_mistakes_name_tool_field_and_line(tmp_path: Path, text: str, line_fragment: str, expected: list[str]) -> None:
    problems = spec_problems(tmp_path, text)
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"line {line_of(text, line_fragment)}: "), problems[0]
    for part in expected:
        assert part in problems[0], f"{part!r} missing from {problems[0]!r}"


def test_an_api_fixed_value_that_clashes_is_named_at_every_parameter_it_clashes_with(tmp_path: Path) -> None:
    text = with_api_fields(
        "  fixed: {symbol: IBM}\n",
        edit(
            "    description: Use for something else.\n",
            "    description: Use for something else.\n    params:\n      symbol: {use: symbol}\n",
        ),
    )
    problems = spec_problems(tmp_path, text)
    assert [p.split(": ", 2)[1] for p in problems] == [
        f"{MY_TOOL}.params.symbol",
        "tools[1] (OTHER_TOOL).params.symbol",
    ]


def test_a_tool_that_fixes_an_api_fixed_name_may_not_also_take_it(tmp_path: Path) -> None:
    text = with_tool_fields("    fixed: {interval: weekly}\n", with_api_fields("  fixed: {interval: daily}\n"))
    problems = spec_problems(tmp_path, text)
    assert len(problems) == 1 and f"{MY_TOOL}.fixed.interval:" in problems[0] and "also a parameter" in problems[0]


# --- Alpha Vantage is what it was ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def alphavantage() -> Catalog:
    return load_catalog(default_spec_path())


def test_alpha_vantage_tools_keep_exactly_todays_annotations(alphavantage: Catalog) -> None:
    for tool in alphavantage.tools:
        assert tool.method == "GET" and tool.fixed == {} and tool.operation is None
        assert tool.annotations == TOOL_ANNOTATIONS, tool.name
        # No idempotentHint: a definition, and so every token figure, is as long as before.
        assert tool.definition()["annotations"] == {
            "readOnlyHint": True,
            "destructiveHint": False,
            "openWorldHint": True,
        }
    assert alphavantage.api.auth == Auth("query", "apikey", "ALPHAVANTAGE_API_KEY", "", "api_key")


def test_the_new_fields_do_not_move_a_catalog_that_does_not_use_them() -> None:
    # Saying the defaults out loud gives the same tools and the same version as saying nothing.
    said = with_tool_fields(
        "    method: GET\n    fixed: {}\n    annotations: {readOnlyHint: true}\n",
        with_auth(
            "{scheme: api_key, in: query, name: apikey, env: DEMO_API_KEY}",
            with_api_fields("  default_method: GET\n  fixed: {}\n", TEMPLATE),
        ),
    )
    plain, explicit = catalog_of(TEMPLATE), catalog_of(said)
    assert explicit.version == plain.version
    assert explicit.tools == plain.tools and explicit.api == plain.api


# --- the Last.fm fixture says what the real API needs -------------------------------------------------------------

LASTFM_WRITES = {
    "album.addTags",
    "album.removeTag",
    "artist.addTags",
    "artist.removeTag",
    "track.addTags",
    "track.removeTag",
    "track.love",
    "track.unlove",
    "track.scrobble",
    "track.updateNowPlaying",
}
LASTFM_REMOVALS = {"album.removeTag", "artist.removeTag", "track.removeTag", "track.unlove"}


@pytest.fixture(scope="module")
def lastfm() -> Catalog:
    return load_catalog(LASTFM)


def test_lastfm_asks_for_json_on_every_call_without_a_format_argument(lastfm: Catalog) -> None:
    for tool in lastfm.tools:
        assert dict(tool.fixed) == {"format": "json"}, tool.name
        assert "format" not in tool.input_schema["properties"], tool.name


def test_lastfm_writes_are_posted_and_not_read_only(lastfm: Catalog) -> None:
    posted = {tool.name for tool in lastfm.tools if tool.method == "POST"}
    assert posted == LASTFM_WRITES | {"auth.getMobileSession"}
    for tool in lastfm.tools:
        hints: dict[str, Any] = dict(tool.annotations)
        if tool.name in LASTFM_WRITES:
            assert hints["readOnlyHint"] is False and hints["openWorldHint"] is True, tool.name
            assert hints["destructiveHint"] is (tool.name in LASTFM_REMOVALS), tool.name
            assert hints["idempotentHint"] is (tool.name not in {"track.scrobble"}), tool.name
        elif tool.method == "GET":
            assert tool.annotations is TOOL_ANNOTATIONS, tool.name
