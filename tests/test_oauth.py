"""oauth auth mode: the endpoint as an OAuth 2.1 protected resource, over real HTTP on 127.0.0.1.

A tiny loopback issuer (tests/oauth_issuer.py) publishes its metadata and a JWKS of keys this test makes; the serve
stack (LocalServer → the Lambda handler → Endpoint) checks the tokens it mints or forges. Every refusal is a 401
with the challenge RFC 6750 and RFC 9728 describe (403 for a missing scope), and no answer holds the token.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from oauth_issuer import (
    LoopbackIssuer,
    b64url,
    ec_key,
    hmac_with_public_key,
    loopback_issuer,
    rsa_key,
    unsigned,
)

from lambda_fn.handler import make_handler
from lambda_fn.local import LocalServer
from progressive_mcp.errors import ConfigError
from progressive_mcp.offline.sample_upstream import SampleUpstream
from progressive_mcp.settings import Settings
from progressive_mcp.surfaces.endpoint import Endpoint
from progressive_mcp.surfaces.metatools import META_TOOL_NAMES

ROOT = Path(__file__).resolve().parent.parent
SERVER_KEY = "oauth-mode-server-upstream-key"
SCOPE = "mcp:tools"
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
SERVE_OAUTH = [sys.executable, "-m", "progressive_mcp.cli", "serve", "--auth-mode", "oauth"]


@pytest.fixture(scope="module")
def issuer() -> Iterator[LoopbackIssuer]:
    with loopback_issuer(rsa_key("rsa-1"), ec_key("ec-1")) as running:
        yield running


@contextmanager
def oauth_server(upstream: SampleUpstream, issuer_url: str, **settings: Any) -> Iterator[LocalServer]:
    """The serve stack in oauth mode for `issuer_url`, the server's upstream key set, scope SCOPE required."""
    options: dict[str, Any] = {"oauth_scopes": (SCOPE,), **settings}
    config = Settings.from_env(
        {},
        upstream_url=upstream.url,
        cache=False,
        auth_mode="oauth",
        oauth_issuer=issuer_url,
        api_key=SERVER_KEY,
        **options,
    )
    with LocalServer(make_handler(Endpoint.from_settings(config)), port=0) as server:
        yield server


@pytest.fixture(scope="module")
def server(upstream: SampleUpstream, issuer: LoopbackIssuer) -> Iterator[LocalServer]:
    with oauth_server(upstream, issuer.url) as running:
        yield running


def metadata_url(server: LocalServer) -> str:
    return f"http://127.0.0.1:{server.port}/.well-known/oauth-protected-resource/mcp"


def post(server: LocalServer, token: str | None = None, body: dict[str, Any] | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    return httpx.post(server.url, json=body or LIST, headers=headers, timeout=30)


def challenge(response: httpx.Response) -> dict[str, str]:
    """The parameters of a `Bearer a="b", c="d"` challenge."""
    value = response.headers["www-authenticate"]
    scheme, _, rest = value.partition(" ")
    assert scheme == "Bearer", value
    params: dict[str, str] = {}
    for part in rest.split('", '):
        name, _, quoted = part.partition("=")
        params[name.strip()] = quoted.strip().strip('"')
    return params


def assert_no_token(response: httpx.Response, token: str) -> None:
    """No part of a token (its signature or its payload) comes back in an answer."""
    seen = response.text + json.dumps(dict(response.headers))
    for part in token.split("."):
        if len(part) >= 8:
            assert part not in seen


# --- metadata and the challenge --------------------------------------------------------------------------------


def test_protected_resource_metadata_at_the_root_and_path_suffixed(server: LocalServer, issuer: LoopbackIssuer) -> None:
    for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
        response = httpx.get(f"http://127.0.0.1:{server.port}{path}", headers={"Origin": "https://claude.ai"})
        assert response.status_code == 200, path
        assert response.headers["access-control-allow-origin"] == "*"
        assert response.json() == {
            "resource": server.url,
            "authorization_servers": [issuer.url],
            "bearer_methods_supported": ["header"],
            "resource_name": response.json()["resource_name"],
            "scopes_supported": [SCOPE],
        }


def test_metadata_is_not_published_in_passthrough_mode(upstream: SampleUpstream) -> None:
    endpoint = Endpoint.from_settings(Settings.from_env({}, upstream_url=upstream.url))
    with LocalServer(make_handler(endpoint), port=0) as running:
        response = httpx.get(f"http://127.0.0.1:{running.port}/.well-known/oauth-protected-resource/mcp")
    assert response.status_code == 404


def test_no_token_is_a_401_naming_the_metadata_and_the_scope(server: LocalServer) -> None:
    response = post(server)
    assert response.status_code == 401
    assert challenge(response) == {"resource_metadata": metadata_url(server), "scope": SCOPE}
    assert response.json()["error"]["code"] == -32600


def test_the_metadata_the_challenge_names_is_the_resource_the_client_dialled(server: LocalServer) -> None:
    document = httpx.get(challenge(post(server))["resource_metadata"]).json()
    assert document["resource"] == server.url


# --- refused tokens --------------------------------------------------------------------------------------------


def b64decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@pytest.fixture(scope="module")
def refused(server: LocalServer, issuer: LoopbackIssuer) -> dict[str, str]:
    return refused_tokens(issuer, server.url)


def refused_tokens(issuer: LoopbackIssuer, resource: str) -> dict[str, str]:
    good = issuer.claims(resource)
    rsa = issuer.keys[0]
    valid = issuer.mint(resource)
    head, body, signature = valid.split(".")
    tampered_claims = {**good, "sub": "admin", "scope": f"{SCOPE} admin"}
    tampered = f"{head}.{b64url(json.dumps(tampered_claims).encode())}.{signature}"
    now = good["iat"]
    return {
        "another audience": issuer.mint("https://other.example/mcp"),
        "another audience on this host": issuer.mint(resource.replace("/mcp", "/other")),
        "another issuer": issuer.mint(resource, iss="https://other-issuer.example"),
        "expired": issuer.mint(resource, iat=now - 7200, exp=now - 3600),
        "not yet valid": issuer.mint(resource, nbf=now + 3600),
        "alg none": unsigned({"alg": "none", "typ": "JWT", "kid": rsa.kid}, good),
        "alg none, no kid": unsigned({"alg": "none"}, good),
        "HMAC with the public key": hmac_with_public_key(rsa, good),
        "RSA key named with an EC algorithm": unsigned(
            {"alg": "ES256", "typ": "at+jwt", "kid": rsa.kid}, good, signature=b64decode(signature)
        ),
        "unknown kid": issuer.mint(resource, key=rsa_key("not-published")),
        "a published kid, another key": issuer.mint(resource, key=rsa_key(rsa.kid)),
        "tampered payload": tampered,
        "no exp": issuer.mint(resource, exp=None),
        "not a JWT": "an-opaque-token-of-some-other-server-0123456789",
        "two parts": f"{head}.{body}",
    }


REFUSED = [
    "another audience",
    "another audience on this host",
    "another issuer",
    "expired",
    "not yet valid",
    "alg none",
    "alg none, no kid",
    "HMAC with the public key",
    "RSA key named with an EC algorithm",
    "unknown kid",
    "a published kid, another key",
    "tampered payload",
    "no exp",
    "not a JWT",
    "two parts",
]


@pytest.mark.parametrize("case", REFUSED)
def test_refused_token_is_a_401_with_the_invalid_token_challenge(
    server: LocalServer, refused: dict[str, str], case: str
) -> None:
    token = refused[case]
    response = post(server, token)
    assert response.status_code == 401, response.text
    params = challenge(response)
    assert params["error"] == "invalid_token"
    assert params["resource_metadata"] == metadata_url(server)
    assert params["scope"] == SCOPE
    assert_no_token(response, token)


def test_the_refused_cases_all_fail_for_their_own_reason(
    server: LocalServer, issuer: LoopbackIssuer, refused: dict[str, str]
) -> None:
    """Each forged token differs from a valid one in one way: the valid one passes, so the refusal is that way's."""
    assert post(server, issuer.mint(server.url)).status_code == 200
    descriptions = {case: challenge(post(server, token))["error_description"] for case, token in refused.items()}
    assert "expired" in descriptions["expired"]
    assert "not valid yet" in descriptions["not yet valid"]
    assert "another resource" in descriptions["another audience"]
    assert "another issuer" in descriptions["another issuer"]
    assert "algorithm" in descriptions["alg none"]
    assert "algorithm" in descriptions["HMAC with the public key"]
    assert "signature" in descriptions["tampered payload"]
    assert "key the issuer does not publish" in descriptions["unknown kid"]


def test_missing_scope_is_a_403_insufficient_scope(server: LocalServer, issuer: LoopbackIssuer) -> None:
    token = issuer.mint(server.url, scope="profile email")
    response = post(server, token)
    assert response.status_code == 403
    params = challenge(response)
    assert params["error"] == "insufficient_scope"
    assert params["scope"] == SCOPE
    assert params["resource_metadata"] == metadata_url(server)
    assert_no_token(response, token)


def test_scopes_may_come_as_an_scp_list(server: LocalServer, issuer: LoopbackIssuer) -> None:
    assert post(server, issuer.mint(server.url, scope=None, scp=["openid", SCOPE])).status_code == 200


def test_an_ec_key_of_the_jwks_signs_valid_tokens_too(server: LocalServer, issuer: LoopbackIssuer) -> None:
    assert post(server, issuer.mint(server.url, key=issuer.keys[1])).status_code == 200


# --- the JWKS: cached, refreshed on an unknown kid, refetched boundedly ----------------------------------------


def test_an_unknown_kid_refetches_the_keys_once_then_not_again(upstream: SampleUpstream) -> None:
    with loopback_issuer(rsa_key("rsa-1")) as own, oauth_server(upstream, own.url) as running:
        assert post(running, own.mint(running.url)).status_code == 200
        assert post(running, own.mint(running.url)).status_code == 200
        assert own.jwks_requests == 1  # cached
        assert post(running, own.mint(running.url, key=ec_key("made-up-1"))).status_code == 401
        assert own.jwks_requests == 2  # one refresh: the kid is still unknown after it
        for number in range(5):
            assert post(running, own.mint(running.url, key=ec_key(f"made-up-{number + 2}"))).status_code == 401
        assert own.jwks_requests == 2  # bounded: made-up kids cannot make the server hammer the issuer


def test_a_rotated_key_is_found_by_the_refresh(upstream: SampleUpstream) -> None:
    with loopback_issuer(rsa_key("old")) as own, oauth_server(upstream, own.url) as running:
        assert post(running, own.mint(running.url)).status_code == 200
        own.keys.append(rsa_key("new"))
        assert post(running, own.mint(running.url, key=own.keys[1])).status_code == 200
        assert own.jwks_requests == 2


def test_openid_configuration_is_found_when_there_is_no_oauth_metadata(upstream: SampleUpstream) -> None:
    with (
        loopback_issuer(rsa_key("k"), metadata_path="/.well-known/openid-configuration") as own,
        oauth_server(upstream, own.url) as running,
    ):
        assert post(running, own.mint(running.url)).status_code == 200


def test_an_unreachable_issuer_is_a_503_with_retry_after(upstream: SampleUpstream, issuer: LoopbackIssuer) -> None:
    with loopback_issuer() as gone:
        url = gone.url
        token = gone.mint("http://127.0.0.1/mcp")
    with oauth_server(upstream, url) as running:
        response = post(running, token)
    assert response.status_code == 503
    assert response.headers["retry-after"] == "5"
    assert_no_token(response, token)


# --- accepted tokens, over both protocol eras ------------------------------------------------------------------


@asynccontextmanager
async def client_with_token(url: str, token: str, protocol: str) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), mode=protocol) as client,
    ):
        yield client


@pytest.mark.anyio
@pytest.mark.parametrize("protocol", ["legacy", "2026-07-28"])
async def test_an_accepted_token_calls_tools_with_the_servers_key(
    server: LocalServer, issuer: LoopbackIssuer, upstream: SampleUpstream, protocol: str
) -> None:
    token = issuer.mint(server.url)
    before = len(upstream.requests_snapshot(unmasked=True))
    async with client_with_token(server.url, token, protocol) as client:
        assert [t.name for t in (await client.list_tools()).tools] == list(META_TOOL_NAMES)
        answer = await client.call_tool("TOOL_CALL", {"tool_name": "GLOBAL_QUOTE", "arguments": {"symbol": "IBM"}})
        assert answer.is_error is False
        assert answer.structured_content["data"]["Global Quote"]["01. symbol"] == "IBM"
    calls = upstream.requests_snapshot(unmasked=True)[before:]
    assert [r["apikey"] for r in calls] == [SERVER_KEY]  # the token never travels upstream


# --- settings, and the real CLI --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"PMCP_OAUTH_ISSUER": "http://issuer.example"}, "https"),
        ({"PMCP_OAUTH_ISSUER": "https://issuer.example?tenant=1"}, "no query"),
        ({"PMCP_OAUTH_ISSUER": "issuer.example"}, "https"),
        ({"PMCP_OAUTH_ISSUER": "https://i.example", "PMCP_OAUTH_AUDIENCE": "mcp.example/mcp"}, "AUDIENCE"),
        ({"PMCP_OAUTH_ISSUER": "https://i.example", "PMCP_OAUTH_AUDIENCE": "http://mcp.example/mcp"}, "https"),
        ({"PMCP_OAUTH_ISSUER": "https://i.example", "PMCP_OAUTH_AUDIENCE": "https://m.example/mcp#x"}, "fragment"),
        ({"PMCP_OAUTH_ISSUER": "https://i.example", "PMCP_OAUTH_SCOPES": 'mcp, a"b'}, "PMCP_OAUTH_SCOPES"),
    ],
)
def test_oauth_settings_are_checked_at_start(env: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        Settings.from_env({"PMCP_AUTH_MODE": "oauth", **env})


def test_oauth_mode_without_an_issuer_stops_the_endpoint_not_the_settings(
    upstream: SampleUpstream,
) -> None:
    settings = Settings.from_env({"PMCP_AUTH_MODE": "oauth"}, upstream_url=upstream.url)
    with pytest.raises(ConfigError, match="PMCP_OAUTH_ISSUER"):
        Endpoint.from_settings(settings)


def test_oauth_settings_accept_https_and_loopback_http() -> None:
    for issuer in ("https://login.example.com/realms/team", "http://127.0.0.1:9000", "http://localhost:9000/x"):
        settings = Settings.from_env(
            {"PMCP_AUTH_MODE": "oauth", "PMCP_OAUTH_ISSUER": issuer, "PMCP_OAUTH_SCOPES": "mcp:tools, mcp:read"}
        )
        assert (settings.oauth_issuer, settings.oauth_scopes) == (issuer, ("mcp:tools", "mcp:read"))


def _cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMCP_", "POWERTOOLS_"))}
    env.pop("ALPHAVANTAGE_API_KEY", None)
    return {**env, "PYTHONUNBUFFERED": "1", **extra}


@pytest.mark.slow  # a CLI process
def test_cli_serve_oauth_without_an_issuer_exits_2_naming_the_variable() -> None:
    done = subprocess.run(
        [*SERVE_OAUTH, "--port", "0"],
        cwd=ROOT,
        env=_cli_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "PMCP_OAUTH_ISSUER" in done.stderr


@pytest.mark.slow  # a CLI process with the sample upstream
def test_cli_serve_oauth_logs_a_digest_of_the_identity_never_the_token(issuer: LoopbackIssuer) -> None:
    """The real `progressive-mcp serve --auth-mode oauth --sample-upstream`: a call with a valid token runs with the
    server's (dummy) upstream key, and the handler's log line names the caller by a digest only."""
    proc = subprocess.Popen(
        [*SERVE_OAUTH, "--sample-upstream", "--port", "0"],
        cwd=ROOT,
        env=_cli_env(PMCP_OAUTH_ISSUER=issuer.url, PMCP_OAUTH_SCOPES=SCOPE),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        banner = proc.stdout.readline()
        url = banner.split("MCP endpoint at ", 1)[1].split()[0]
        assert "oauth mode" in banner and issuer.url in banner
        token = issuer.mint(url)
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call"}
        call["params"] = {
            "name": "TOOL_CALL",
            "arguments": {"tool_name": "GLOBAL_QUOTE", "arguments": {"symbol": "IBM"}},
        }
        answer = httpx.post(url, json=call, headers={"Authorization": f"Bearer {token}"}, timeout=30)
        assert answer.status_code == 200
        assert answer.json()["result"]["isError"] is False
        refused = httpx.post(url, json=LIST, headers={"Authorization": f"Bearer {token}x"}, timeout=30)
        assert refused.status_code == 401
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=30)
    entries = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    requests = [e for e in entries if e.get("message") == "request"]
    assert [e["status"] for e in requests] == [200, 401]
    assert requests[0]["identity"].startswith("oauth:") and len(requests[0]["identity"]) == len("oauth:") + 32
    assert requests[1].get("identity") is None  # refused: no identity
    for part in token.split("."):
        assert part not in out + err
