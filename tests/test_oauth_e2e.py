"""End to end: the official MCP Python SDK client's OAuth support against `serve` in oauth mode, with a real OpenID
provider (npm's certified `oidc-provider`, an exact version installed into a cache folder at first use) on 127.0.0.1.

The client starts with nothing: the 401's challenge leads it to the endpoint's Protected Resource Metadata, that to
the provider's metadata; it registers itself (dynamic registration), sends the user to the authorization endpoint
with PKCE and the `resource` parameter, and this test plays the user (login and consent through the provider's
interaction endpoints, tests/fixtures/oidc/provider.mjs). The code becomes a JWT access token for the endpoint,
which then serves tool calls over both protocol eras; a short-lived token is refreshed with the refresh token.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx
import httpx2
import jwt
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from lambda_fn.handler import make_handler
from lambda_fn.local import LocalServer
from progressive_mcp.offline.sample_upstream import SampleUpstream
from progressive_mcp.settings import Settings
from progressive_mcp.surfaces.endpoint import Endpoint
from progressive_mcp.surfaces.metatools import META_TOOL_NAMES

OIDC_PROVIDER = "oidc-provider@9.13.3"  # pinned: the provider's behaviour is part of what is tested
SCRIPT = Path(__file__).resolve().parent / "fixtures" / "oidc" / "provider.mjs"
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "progressive-mcp-tests"
SCOPE = "mcp:tools"
SERVER_KEY = "oauth-e2e-server-upstream-key"
REDIRECT_URI = "http://127.0.0.1:1/callback"  # never reached: the test reads the code from the redirect itself

pytestmark = [
    pytest.mark.slow,  # installs and starts a Node provider, and runs whole sign-ins
    pytest.mark.skipif(shutil.which("node") is None or shutil.which("npm") is None, reason="Node and npm are needed"),
]


def provider_folder() -> Path:
    """A folder with the pinned oidc-provider in its node_modules and the provider script beside it."""
    folder = CACHE / OIDC_PROVIDER.replace("@", "-")
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # pytest-xdist workers install once between them
        if not (folder / "node_modules" / "oidc-provider" / "package.json").is_file():
            (folder / "package.json").write_text('{"private": true}\n')
            subprocess.run(
                ["npm", "install", "--no-audit", "--no-fund", "--ignore-scripts", "--save-exact", OIDC_PROVIDER],
                cwd=folder,
                check=True,
                capture_output=True,
                timeout=300,
            )
        shutil.copyfile(SCRIPT, folder / SCRIPT.name)
    return folder


@contextlib.contextmanager
def oidc_provider(access_token_ttl_s: int = 300) -> Iterator[str]:
    """The provider on a free port; yields its issuer URL."""
    folder = provider_folder()
    env = {**os.environ, "ACCESS_TOKEN_TTL_S": str(access_token_ttl_s), "MCP_SCOPE": SCOPE}
    proc = subprocess.Popen(
        ["node", SCRIPT.name], cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line, "the provider exited before it listened"
        yield json.loads(line)["issuer"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@contextlib.contextmanager
def oauth_serve(upstream: SampleUpstream, issuer: str) -> Iterator[LocalServer]:
    settings = Settings.from_env(
        {},
        upstream_url=upstream.url,
        cache=False,
        auth_mode="oauth",
        oauth_issuer=issuer,
        oauth_scopes=(SCOPE,),
        api_key=SERVER_KEY,
    )
    with LocalServer(make_handler(Endpoint.from_settings(settings)), port=0) as server:
        yield server


class MemoryStorage:
    """The SDK's TokenStorage in memory; keeps every token set it was given."""

    def __init__(self) -> None:
        self.tokens: list[OAuthToken] = []
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens[-1] if self.tokens else None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens.append(tokens)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class User:
    """The person at the browser: signs in and consents through the provider's interaction endpoints."""

    def __init__(self, login: str = "alice") -> None:
        self.login = login
        self.authorization_urls: list[str] = []
        self.prompts: list[str] = []
        self._result: AuthorizationCodeResult | None = None

    async def redirect(self, authorization_url: str) -> None:
        """The SDK's redirect handler: follow the authorization URL as a browser would, up to the redirect URI."""
        self.authorization_urls.append(authorization_url)
        async with httpx.AsyncClient(timeout=30) as browser:  # its cookie jar holds the provider's session
            response = await browser.get(authorization_url)
            for _ in range(12):
                assert response.status_code in (302, 303), response.text
                location = urljoin(str(response.url), response.headers["location"])
                if location.startswith(REDIRECT_URI):
                    query = parse_qs(urlsplit(location).query)
                    assert "error" not in query, query
                    self._result = AuthorizationCodeResult(
                        code=query["code"][0], state=query.get("state", [None])[0], iss=query.get("iss", [None])[0]
                    )
                    return
                if "/interaction/" in location:
                    prompt = (await browser.get(location)).json()["prompt"]
                    self.prompts.append(prompt)
                    if prompt == "login":
                        response = await browser.post(f"{location}/login", json={"login": self.login})
                    else:
                        response = await browser.post(f"{location}/confirm")
                else:
                    response = await browser.get(location)
        raise AssertionError("the authorization flow did not reach the redirect URI")

    async def callback(self) -> AuthorizationCodeResult:
        assert self._result is not None
        result, self._result = self._result, None
        return result


def sdk_auth(server_url: str, storage: MemoryStorage, user: User) -> OAuthClientProvider:
    metadata = OAuthClientMetadata(
        client_name="progressive-mcp e2e",
        redirect_uris=[REDIRECT_URI],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
    )
    return OAuthClientProvider(server_url, metadata, storage, user.redirect, user.callback)


async def call_quote(client: Client) -> dict[str, Any]:
    answer = await client.call_tool("TOOL_CALL", {"tool_name": "GLOBAL_QUOTE", "arguments": {"symbol": "IBM"}})
    assert answer.is_error is False
    return answer.structured_content


@pytest.mark.anyio
async def test_the_sdk_client_signs_in_with_a_real_provider_and_calls_tools_over_both_eras(
    upstream: SampleUpstream,
) -> None:
    with oidc_provider() as issuer, oauth_serve(upstream, issuer) as server:
        resource = server.url
        storage, user = MemoryStorage(), User()
        auth = sdk_auth(server.url, storage, user)
        before = len(upstream.requests_snapshot(unmasked=True))
        async with httpx2.AsyncClient(auth=auth, timeout=30) as http:
            for protocol in ("legacy", "2026-07-28"):
                async with Client(streamable_http_client(server.url, http_client=http), mode=protocol) as client:
                    assert [t.name for t in (await client.list_tools()).tools] == list(META_TOOL_NAMES)
                    quote = await call_quote(client)
                    assert quote["data"]["Global Quote"]["01. symbol"] == "IBM"

    # One sign-in served both eras: registration, then the authorization code flow with PKCE and the resource.
    assert storage.client is not None and storage.client.client_id
    assert len(user.authorization_urls) == 1 and user.prompts == ["login", "consent"]
    query = parse_qs(urlsplit(user.authorization_urls[0]).query)
    assert query["code_challenge_method"] == ["S256"] and query["code_challenge"]
    assert query["resource"] == [resource]
    assert SCOPE in query["scope"][0].split()
    # The access token is the provider's JWT for this endpoint, and it never went upstream.
    token = storage.tokens[-1].access_token
    claims = jwt.decode(token, options={"verify_signature": False})
    assert (claims["iss"], claims["aud"], claims["sub"]) == (issuer, resource, "alice")
    assert SCOPE in claims["scope"].split()
    calls = upstream.requests_snapshot(unmasked=True)[before:]
    assert [r["apikey"] for r in calls] == [SERVER_KEY, SERVER_KEY]


@pytest.mark.anyio
async def test_an_expired_access_token_is_refreshed_without_a_new_sign_in(upstream: SampleUpstream) -> None:
    with oidc_provider(access_token_ttl_s=2) as issuer, oauth_serve(upstream, issuer) as server:
        resource = server.url
        storage, user = MemoryStorage(), User()
        async with (
            httpx2.AsyncClient(auth=sdk_auth(server.url, storage, user), timeout=30) as http,
            Client(streamable_http_client(server.url, http_client=http), mode="2026-07-28") as client,
        ):
            await call_quote(client)
            first = storage.tokens[0]
            assert first.refresh_token
            await asyncio.sleep(3)  # past the token's lifetime: the client must refresh before its next request
            await call_quote(client)
        assert len(user.authorization_urls) == 1  # no second sign-in
        assert len(storage.tokens) >= 2 and storage.tokens[-1].access_token != first.access_token
        claims = jwt.decode(storage.tokens[-1].access_token, options={"verify_signature": False})
        assert claims["aud"] == resource
