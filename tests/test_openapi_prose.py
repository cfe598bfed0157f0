"""What an OpenAPI document's words become (issue 28): which parameter is taken for the credential, HTML in
summaries and descriptions, titles, and categories; on fixtures written here and on every real document in
../shared/openapi/ (skipped only when that folder is absent).

Run with: .venv/bin/python -m pytest tests/test_openapi_prose.py -q
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from real_documents import REAL, SHARED

from progressive_mcp.catalog import Catalog, _thaw
from progressive_mcp.sources import load_catalog
from progressive_mcp.sources.openapi import first_sentence, path_category, path_scope, trim

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "openapi"
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason=f"the real OpenAPI documents are not at {SHARED}")


@pytest.fixture(scope="module")
def real() -> dict[str, Catalog]:
    if not SHARED.is_dir():
        pytest.skip(f"the real OpenAPI documents are not at {SHARED}")
    return {name: load_catalog(path) for name, path in REAL.items()}


def write(tmp_path: Path, document: dict[str, Any]) -> Path:
    path = tmp_path / "api.json"
    path.write_text(json.dumps(document))
    return path


# --- a parameter taken for a credential -------------------------------------------------------------------------


def test_a_token_parameter_the_security_never_names_is_an_argument() -> None:
    catalog = load_catalog(FIXTURES / "airflow" / "openapi.yaml")
    tool = catalog.get("get_log")
    assert {p.name for p in tool.params} >= {"token", "full_content", "dag_id"}
    assert "continue fetching logs" in next(p for p in tool.params if p.name == "token").description


def test_every_parameter_an_api_key_scheme_names_is_left_out(tmp_path: Path) -> None:
    document = {
        "openapi": "3.0.3",
        "info": {"title": "Two keys", "version": "1"},
        "servers": [{"url": "https://api.example.com"}],
        "components": {
            "securitySchemes": {
                "header_key": {"type": "apiKey", "in": "header", "name": "X-Key"},
                "query_key": {"type": "apiKey", "in": "query", "name": "api_key"},
            }
        },
        "security": [{"header_key": []}],
        "paths": {
            "/things": {
                "get": {
                    "operationId": "listThings",
                    "parameters": [
                        {"name": "X-Key", "in": "header", "schema": {"type": "string"}},
                        {"name": "api_key", "in": "query", "schema": {"type": "string"}},
                        {"name": "token", "in": "query", "description": "A page token.", "schema": {"type": "string"}},
                    ],
                    "responses": {"200": {"description": "ok"}},
                }
            }
        },
    }
    catalog = load_catalog(write(tmp_path, document))
    assert [p.upstream_name for p in catalog.get("listThings").params] == ["token"]
    assert catalog.api.auth is not None and catalog.api.auth.name == "X-Key"


@needs_shared
def test_slacks_token_is_still_the_credential(real: dict[str, Catalog]) -> None:
    # Slack declares only an OAuth scheme, and a `token` parameter on each operation that its description calls an
    # "Authentication token": the server sends the key itself (as a bearer token), so it is no argument.
    slack = real["slack"]
    assert not any(p.upstream_name == "token" for t in slack.tools for p in t.params)


# --- HTML in summaries and descriptions -------------------------------------------------------------------------

HTML_ELEMENTS = frozenset(
    " ".join(
        (
            "a abbr address area article aside audio b base bdi bdo big blockquote body br button canvas caption",
            "center cite code col colgroup data datalist dd del details dfn dialog div dl dt em embed fieldset",
            "figcaption figure font footer form h1 h2 h3 h4 h5 h6 head header hgroup hr html i iframe img input ins",
            "kbd label legend li link main map mark menu meta meter nav nobr noscript object ol optgroup option",
            "output p picture pre progress q rp rt ruby s samp script section select small source span strike",
            "strong style sub summary sup table tbody td template textarea tfoot th thead time title tr track tt u",
            "ul var video wbr",
        )
    ).split()
)
HTML_TAG = re.compile(rf"</?({'|'.join(sorted(HTML_ELEMENTS))})(\s[^<>]*)?/?>", re.IGNORECASE)


def texts_of(catalog: Catalog) -> Iterator[tuple[str, str]]:
    """(where, text) of every summary, title and description a catalog shows: the tools', their arguments', every
    description inside their input and output schemas, and the categories'."""
    for category, text in catalog.categories.items():
        yield f"category {category}", text
    for tool in catalog.tools:
        yield f"{tool.name} title", tool.title
        yield f"{tool.name} summary", tool.summary
        yield f"{tool.name} description", tool.description
        for param in tool.params:
            yield f"{tool.name}.{param.name}", param.description
        for schema in (tool.input_schema, tool.output_schema):
            stack: list[Any] = [_thaw(schema)] if schema is not None else []
            while stack:
                node = stack.pop()
                if isinstance(node, dict):
                    for key, value in node.items():
                        if key == "description" and isinstance(value, str):
                            yield f"{tool.name} schema", value
                        else:
                            stack.append(value)
                elif isinstance(node, list):
                    stack.extend(node)


@needs_shared
def test_no_html_tag_in_any_text_of_any_real_document(real: dict[str, Catalog]) -> None:
    found = [
        (name, where, text[:120])
        for name, catalog in real.items()
        for where, text in texts_of(catalog)
        if HTML_TAG.search(text)
    ]
    assert not found, found[:10]


@needs_shared
def test_html_becomes_markdown_and_placeholders_stay(real: dict[str, Catalog]) -> None:
    stripe, twilio = real["stripe"], real["twilio"]
    texts = [text for _, text in texts_of(stripe)]
    assert any("`" in text for text in texts)  # <code> became a code span, not nothing
    assert stripe.get("PostCustomers").summary.startswith("Creates a new customer object")
    # Twilio's TwiML verbs are written like tags but are no HTML: they stay as written.
    assert any("`<Dial>`" in text for _, text in texts_of(twilio))


@needs_shared
def test_cut_texts_leave_no_half_tag_or_broken_markdown(real: dict[str, Catalog]) -> None:
    broken = []
    for name, catalog in real.items():
        for where, text in texts_of(catalog):
            if not text.endswith("…"):
                continue
            half_tag = re.search(rf"</?({'|'.join(sorted(HTML_ELEMENTS))})\b[^<>]*…$", text, re.IGNORECASE)
            if text.count("`") % 2 or half_tag or re.search(r"\]\([^)]*…$", text):  # no half code span, tag or link
                broken.append((name, where, text[-80:]))
    assert not broken, broken[:10]


def test_trim_converts_before_it_cuts() -> None:
    text = "<p>Returns a <code>Customer</code>; see <a href='https://x.example/docs'>the guide</a> for more.</p>"
    assert trim(text, 200) == "Returns a `Customer`; see the guide for more."
    assert trim(text, 16) == "Returns a…"  # a cut inside the code span does not leave its backtick
    assert trim("Basic <api_key> or <b>bold</b>", 100) == "Basic <api_key> or **bold**"
    assert first_sentence("<p>Initiate 3D Secure authentication.</p><p>More.</p>", 120) == (
        "Initiate 3D Secure authentication."
    )


# --- titles -----------------------------------------------------------------------------------------------------


@needs_shared
def test_a_tool_without_summary_is_titled_by_its_descriptions_first_sentence(
    real: dict[str, Catalog],
) -> None:
    tool = real["stripe"].get("Post3dSecure")
    assert tool.title == "Initiate 3D Secure authentication."


def test_title_fallbacks(tmp_path: Path) -> None:
    operations = {
        "get": {"operationId": "listThings", "description": "Lists the things. Paged.", "responses": {}},
        "post": {"operationId": "makeThing", "responses": {}},
        "delete": {"responses": {}},
    }
    document = {"openapi": "3.0.3", "info": {"title": "T", "version": "1"}, "paths": {"/things": operations}}
    catalog = load_catalog(write(tmp_path, document))
    assert catalog.get("listThings").title == "Lists the things."
    assert catalog.get("makeThing").title == "Make Thing"
    assert catalog.get("delete_things").title == "DELETE /things"


# --- categories -------------------------------------------------------------------------------------------------

READABLE = re.compile(r"^[a-z]+(_[a-z]+)*$")


@needs_shared
def test_twilios_categories_are_readable_words(real: dict[str, Catalog]) -> None:
    twilio = real["twilio"]
    by_category: dict[str, list[str]] = {}
    for tool in twilio.tools:
        assert tool.operation is not None
        by_category.setdefault(tool.category, []).append(f"{tool.name} {tool.operation.path}".lower())
    for category, tools in by_category.items():
        assert READABLE.match(category), category
        if category != "other":  # each word is one the category's own tool names or paths use
            assert all(any(word in t for t in tools) for word in category.split("_")), (category, tools[:3])
    assert {"calls", "messages", "recordings", "incoming_phone_numbers"} <= set(by_category)
    assert len(by_category) <= 30


@needs_shared
def test_no_one_tool_category_made_from_paths(real: dict[str, Catalog]) -> None:
    for name in ("twilio", "stripe"):
        counts = Counter(t.category for t in real[name].tools)
        assert not [c for c, n in counts.items() if n == 1], name
    assert "balance" in real["twilio"].categories["other"]


@needs_shared
def test_tagged_documents_keep_their_categories(real: dict[str, Catalog]) -> None:
    # Measured before this change: tags win, so these documents keep every category they had.
    counts = {name: len(real[name].categories) for name in ("spotify", "slack", "openai", "digitalocean")}
    assert counts == {"spotify": 15, "slack": 55, "openai": 40, "digitalocean": 55}


def test_path_categories_skip_versions_scopes_and_extensions() -> None:
    scope = ("Accounts", "{AccountSid}")
    assert path_category("/2010-04-01/Accounts/{AccountSid}/Calls/{CallSid}.json", scope) == "calls"
    assert path_category("/2010-04-01/Accounts/{AccountSid}/IncomingPhoneNumbers.json", scope) == (
        "incoming_phone_numbers"
    )
    assert path_category("/2010-04-01/Accounts.json", scope) == "accounts"
    assert path_category("/v2/api/droplets/{id}") == "droplets"
    assert path_category("/chat.postMessage") == "chat"
    assert path_category("/1.0/users") == "users"
    paths = ["/2010-04-01/Accounts.json", *(f"/2010-04-01/Accounts/{{AccountSid}}/R{i}.json" for i in range(5))]
    assert path_scope(paths) == scope
    assert path_scope(["/v1/customers/{id}", "/v1/charges", "/v1/customers"]) == ()


@needs_shared
def test_a_path_made_category_is_a_tag_for_filters() -> None:
    calls = load_catalog(REAL["twilio"], include="tag:calls")
    assert set(calls.categories) == {"calls"} and len(calls) == 24
