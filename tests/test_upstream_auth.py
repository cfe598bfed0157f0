"""The user's say over how the upstream key is sent (issue 28): PMCP_UPSTREAM_AUTH picks one of the document's
schemes, PMCP_UPSTREAM_KEY_FORMAT shapes the value, both checked at start and recorded by `spec compile`. Stripe's
real document with a bare key goes as a bearer token; a PagerDuty-like document sends `Token token=KEY`. Requests
go over real HTTP to a recording server on 127.0.0.1.

Run with: .venv/bin/python -m pytest tests/test_upstream_auth.py -q
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from loopback import Recorded, recording_server
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from real_documents import REAL, SHARED

from progressive_mcp.catalog import Catalog
from progressive_mcp.errors import ConfigError
from progressive_mcp.settings import Settings
from progressive_mcp.sources import load_catalog
from progressive_mcp.sources.compiled import loads
from progressive_mcp.surfaces.surface import CallContext, Surface

ROOT = Path(__file__).resolve().parent.parent
STRIPE = REAL["stripe"]
PAGERDUTY = ROOT / "tests" / "fixtures" / "openapi" / "pagerduty" / "openapi.yaml"
STRIPE_KEY = "sk_test_4eC39HqLyjWDarjtT1zdp7dc"
PD_KEY = "y_NbAkKc66ryYTWUXYEu"
needs_shared = pytest.mark.skipif(not STRIPE.is_file(), reason=f"the real OpenAPI documents are not at {SHARED}")


@pytest.fixture(scope="module")
def stripe() -> Catalog:
    if not STRIPE.is_file():
        pytest.skip(f"the real OpenAPI documents are not at {SHARED}")
    return load_catalog(STRIPE)


@pytest.fixture
def api() -> Iterator[Recorded]:
    with recording_server() as record:
        yield record


def call(
    spec: Path, catalog: Catalog | None, env: dict[str, str], upstream: Recorded, tool: str, arguments: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, str]]:
    """One TOOL_CALL through the real call path, with the key and choices from `env` as at a server's start;
    the answer, and the headers of the one request that reached the upstream."""
    settings = Settings.from_env(env, spec_path=spec, upstream_url=upstream.url, cache=False)
    surface = Surface.from_settings(settings, catalog=catalog)
    ctx = surface.default_context(settings, env)
    before = len(upstream.requests)
    answer = surface.call_tool_wire("TOOL_CALL", {"tool_name": tool, "arguments": arguments}, ctx)
    assert len(upstream.requests) == before + 1, answer
    return answer, upstream.requests[-1][2]


# --- Stripe: bearer beside basic ----------------------------------------------------------------------------------


@needs_shared
def test_stripe_with_a_bare_key_sends_it_as_a_bearer_token(stripe: Catalog, api: Recorded) -> None:
    answer, headers = call(STRIPE, stripe, {"PMCP_UPSTREAM_KEY": STRIPE_KEY}, api, "GetBalance", {})
    assert not answer.get("isError"), answer
    assert headers["authorization"] == f"Bearer {STRIPE_KEY}"
    assert api.requests[-1][1] == "/v1/balance"


@needs_shared
def test_stripe_with_a_user_password_key_sends_basic(stripe: Catalog, api: Recorded) -> None:
    answer, headers = call(STRIPE, stripe, {"PMCP_UPSTREAM_KEY": STRIPE_KEY + ":"}, api, "GetBalance", {})
    assert not answer.get("isError"), answer
    assert headers["authorization"] == "Basic " + base64.b64encode(f"{STRIPE_KEY}:".encode()).decode()


@needs_shared
def test_stripe_basic_chosen_with_a_key_format_for_the_user_name(stripe: Catalog, api: Recorded) -> None:
    env = {"PMCP_UPSTREAM_KEY": STRIPE_KEY, "PMCP_UPSTREAM_AUTH": "basic", "PMCP_UPSTREAM_KEY_FORMAT": "{key}:"}
    answer, headers = call(STRIPE, stripe, env, api, "GetBalance", {})
    assert not answer.get("isError"), answer
    assert headers["authorization"] == "Basic " + base64.b64encode(f"{STRIPE_KEY}:".encode()).decode()


@needs_shared
def test_stripe_basic_chosen_with_a_bare_key_says_how_to_send_it(stripe: Catalog, api: Recorded) -> None:
    settings = Settings.from_env({"PMCP_UPSTREAM_AUTH": "basic"}, spec_path=STRIPE, upstream_url=api.url)
    surface = Surface.from_settings(settings, catalog=stripe)
    answer = surface.call_tool_wire(
        "TOOL_CALL", {"tool_name": "GetBalance", "arguments": {}}, CallContext(api_key=STRIPE_KEY)
    )
    text = answer["content"][0]["text"]
    assert answer["isError"] and "user:password" in text and "PMCP_UPSTREAM_AUTH=bearer" in text
    assert STRIPE_KEY not in text and not api.requests


@needs_shared
@pytest.mark.anyio
@pytest.mark.slow  # starts a process (tests/conftest.py)
async def test_stripe_over_stdio_with_the_sdk_client_sends_bearer(api: Recorded) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "stdio_server", "--spec", str(STRIPE), "--upstream", api.url, "--no-cache"],
        env={"PMCP_UPSTREAM_KEY": STRIPE_KEY},
        cwd=str(ROOT),
    )
    with tempfile.TemporaryFile("w+") as log:
        async with Client(stdio_client(params, errlog=log)) as client:
            result = await client.call_tool("TOOL_CALL", {"tool_name": "GetBalance", "arguments": {}})
            log.seek(0)
            assert STRIPE_KEY not in log.read()
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    assert not result.is_error, block.text
    (request,) = api.requests
    assert request[2]["authorization"] == f"Bearer {STRIPE_KEY}"


# --- a PagerDuty-like document: a key format ---------------------------------------------------------------------


def test_a_key_format_sends_token_token_key(api: Recorded) -> None:
    env = {"PMCP_UPSTREAM_KEY": PD_KEY, "PMCP_UPSTREAM_KEY_FORMAT": "Token token={key}"}
    answer, headers = call(PAGERDUTY, None, env, api, "getIncident", {"id": "P123"})
    assert not answer.get("isError"), answer
    assert headers["authorization"] == f"Token token={PD_KEY}"
    assert api.requests[-1][1] == "/incidents/P123"


def test_without_a_key_format_the_bare_key_is_sent(api: Recorded) -> None:
    _, headers = call(PAGERDUTY, None, {"PMCP_UPSTREAM_KEY": PD_KEY}, api, "getIncident", {"id": "P1"})
    assert headers["authorization"] == PD_KEY


def test_a_key_with_spaces_is_still_refused_and_the_key_format_is_named() -> None:
    settings = Settings.from_env({}, spec_path=PAGERDUTY)
    surface = Surface.from_settings(settings)
    with pytest.raises(ConfigError) as caught:
        surface.default_context(settings, {"PMCP_UPSTREAM_KEY": f"Token token={PD_KEY}"})
    assert "PMCP_UPSTREAM_KEY_FORMAT" in str(caught.value) and PD_KEY not in str(caught.value)


def test_the_formatted_value_is_one_of_the_calls_secrets() -> None:
    settings = Settings.from_env({"PMCP_UPSTREAM_KEY_FORMAT": "Token token={key}"}, spec_path=PAGERDUTY)
    surface = Surface.from_settings(settings)
    secrets = surface.call_secrets(CallContext(api_key=PD_KEY))
    assert f"Token token={PD_KEY}" in secrets.values and PD_KEY in secrets.values


def test_an_upstream_echo_of_the_formatted_value_is_masked() -> None:
    echo = json.dumps({"error": {"message": f"Invalid credentials: Token token={PD_KEY}"}}).encode()
    with recording_server(echo) as upstream:
        env = {"PMCP_UPSTREAM_KEY": PD_KEY, "PMCP_UPSTREAM_KEY_FORMAT": "Token token={key}"}
        answer, _ = call(PAGERDUTY, None, env, upstream, "getIncident", {"id": "P1"})
    assert PD_KEY not in json.dumps(answer) and "Invalid credentials: ***" in json.dumps(answer)


# --- bad choices and formats: clear errors at start ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({"PMCP_UPSTREAM_AUTH": "digest"}, "must be bearer, basic or apikey:NAME"),
        ({"PMCP_UPSTREAM_AUTH": "apikey:"}, "must be bearer, basic or apikey:NAME"),
        ({"PMCP_UPSTREAM_KEY_FORMAT": "Token token="}, "exactly once"),
        ({"PMCP_UPSTREAM_KEY_FORMAT": "{key}{key}"}, "exactly once"),
        ({"PMCP_UPSTREAM_KEY_FORMAT": "Token {key}\r\nX-Evil: 1"}, "printable ASCII"),
        ({"PMCP_UPSTREAM_KEY_FORMAT": "Token\t{key}"}, "printable ASCII"),
        ({"PMCP_UPSTREAM_KEY_FORMAT": "Jeton é={key}"}, "printable ASCII"),
    ],
)
def test_bad_settings_are_refused_by_name(env: dict[str, str], said: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Settings.from_env(env, spec_path=PAGERDUTY)
    assert said in str(caught.value) and next(iter(env)) in str(caught.value)


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({"PMCP_UPSTREAM_AUTH": "bearer"}, "declares no such security scheme. It declares: api_key (api key, header"),
        ({"PMCP_UPSTREAM_AUTH": "apikey:token"}, "choose one of: apikey:api_key"),
    ],
)
def test_a_choice_the_document_lacks_names_what_it_declares(env: dict[str, str], said: str) -> None:
    settings = Settings.from_env(env, spec_path=PAGERDUTY)
    with pytest.raises(ConfigError) as caught:
        Surface.from_settings(settings)
    assert said in str(caught.value)


@needs_shared
def test_stripe_choices_name_its_schemes(stripe: Catalog) -> None:
    settings = Settings.from_env({"PMCP_UPSTREAM_AUTH": "apikey:secret"}, spec_path=STRIPE)
    with pytest.raises(ConfigError) as caught:
        Surface.from_settings(settings, catalog=stripe)
    assert "basicAuth (basic, Authorization header)" in str(caught.value)
    assert "choose one of: basic, bearer" in str(caught.value)
    spaced = Settings.from_env({"PMCP_UPSTREAM_KEY_FORMAT": "Token token={key}"}, spec_path=STRIPE)
    with pytest.raises(ConfigError, match="a bearer token holds no space"):
        Surface.from_settings(spaced, catalog=stripe)


@pytest.mark.slow  # starts a process (tests/conftest.py)
def test_the_cli_refuses_a_bad_choice_at_start() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "progressive_mcp", "stdio", "--spec", str(PAGERDUTY)],
        env={"PMCP_UPSTREAM_AUTH": "basic", "PMCP_UPSTREAM_KEY": PD_KEY, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2, done.stderr
    assert "PMCP_UPSTREAM_AUTH=basic: Incident Desk declares no such security scheme" in done.stderr
    assert "Traceback" not in done.stderr and PD_KEY not in done.stderr


# --- recorded by spec compile; the environment overrides at run time -----------------------------------------------


def compile_(*flags: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "progressive_mcp", "spec", "compile", *flags],
        env={"PATH": "/usr/bin:/bin", **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )


@pytest.mark.slow  # starts a process (tests/conftest.py)
def test_spec_compile_records_the_key_format_and_run_time_overrides_it(tmp_path: Path) -> None:
    out = tmp_path / "pd.json"
    done = compile_(str(PAGERDUTY), "-o", str(out), "--key-format", "Token token={key}")
    assert done.returncode == 0, done.stderr
    catalog = loads(out.read_text())
    assert catalog.api.auth is not None and catalog.api.auth.key_format == "Token token={key}"
    with recording_server() as upstream:
        _, headers = call(out, catalog, {"PMCP_UPSTREAM_KEY": PD_KEY}, upstream, "getIncident", {"id": "P1"})
        assert headers["authorization"] == f"Token token={PD_KEY}"
        env = {"PMCP_UPSTREAM_KEY": PD_KEY, "PMCP_UPSTREAM_KEY_FORMAT": "Token {key}"}
        _, headers = call(out, catalog, env, upstream, "getIncident", {"id": "P1"})
        assert headers["authorization"] == f"Token {PD_KEY}"


@pytest.mark.slow  # starts a process (tests/conftest.py)
def test_spec_compile_refuses_a_bad_flag(tmp_path: Path) -> None:
    done = compile_(str(PAGERDUTY), "-o", str(tmp_path / "x.json"), "--auth", "apikey:nope")
    assert done.returncode == 1 and "--auth=apikey:nope" in done.stderr and "apikey:api_key" in done.stderr
    done = compile_(str(PAGERDUTY), "-o", str(tmp_path / "x.json"), "--key-format", "Token")
    assert done.returncode == 1 and "--key-format must hold {key} exactly once" in done.stderr
    assert not (tmp_path / "x.json").exists()


@needs_shared
def test_a_compiled_stripe_catalog_keeps_its_choices_for_run_time(stripe: Catalog, api: Recorded) -> None:
    from progressive_mcp.sources.compiled import dumps

    compiled = loads(dumps(stripe))
    assert {o.scheme_name for o in compiled.api.auth_options} == {"basicAuth", "bearerAuth"}
    env = {"PMCP_UPSTREAM_KEY": STRIPE_KEY, "PMCP_UPSTREAM_AUTH": "basic", "PMCP_UPSTREAM_KEY_FORMAT": "{key}:"}
    _, headers = call(STRIPE, compiled, env, api, "GetBalance", {})
    assert headers["authorization"].startswith("Basic ")


# --- the Lambda: checked when the function starts, applied to each caller's key ----------------------------------


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({"PMCP_UPSTREAM_AUTH": "bearer"}, "PMCP_UPSTREAM_AUTH=bearer: Incident Desk declares no such security"),
        ({"PMCP_UPSTREAM_KEY_FORMAT": "Token\ntoken={key}"}, "PMCP_UPSTREAM_KEY_FORMAT may hold only printable"),
    ],
)
def test_the_lambda_refuses_a_bad_choice_when_it_starts(env: dict[str, str], said: str) -> None:
    from lambda_fn.aws import endpoint_from_environment

    with pytest.raises(ConfigError) as caught:
        endpoint_from_environment({"PMCP_SPEC": str(PAGERDUTY), **env})
    assert said in str(caught.value)


@pytest.mark.anyio
async def test_over_http_each_callers_key_is_shaped_by_the_key_format(api: Recorded) -> None:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    from lambda_fn.aws import endpoint_from_environment
    from lambda_fn.handler import make_handler
    from lambda_fn.local import LocalServer

    environ = {
        "PMCP_SPEC": str(PAGERDUTY),
        "PMCP_UPSTREAM_KEY_FORMAT": "Token token={key}",
        "PMCP_UPSTREAM_URL": api.url,
        "PMCP_CACHE": "off",
    }
    endpoint = endpoint_from_environment(environ)
    with LocalServer(make_handler(endpoint), port=0) as server:
        async with (
            httpx2.AsyncClient(headers={"X-API-Key": PD_KEY}, timeout=30) as client,
            Client(streamable_http_client(server.url, http_client=client)) as session,
        ):
            result = await session.call_tool("TOOL_CALL", {"tool_name": "getIncident", "arguments": {"id": "P9"}})
    assert not result.is_error, result.content
    (request,) = api.requests
    assert request[1] == "/incidents/P9" and request[2]["authorization"] == f"Token token={PD_KEY}"
