"""Per-identity policies on a local stdio server (issue 30): the local user is the policies entry `--policy NAME`
picks (else their default); the official mcp SDK client, launching the real `progressive-mcp stdio`, finds no tool
outside it in tools/list (every mode), TOOL_LIST, TOOL_SEARCH (its tail and candidates), TOOL_GET, code-mode stubs
or scripts; a call of a hidden tool answers as one that does not exist; the entry's rate is counted in memory."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from progressive_mcp.calls.stubs import python_name
from progressive_mcp.errors import ConfigError
from progressive_mcp.offline.sample_upstream import SampleUpstream
from progressive_mcp.policies import IDENTIFIER_SHAPED, narrow_catalog, parse_policies
from progressive_mcp.settings import Settings
from progressive_mcp.sources import load_catalog

ROOT = Path(__file__).resolve().parent.parent
KEY = "stdio-policy-upstream-key-77"
DOCUMENT: dict[str, Any] = {
    "identities": [
        {"name": "fx-desk", "categories": ["forex"], "deny": ["FX_MONTHLY"]},
        {"name": "limited", "categories": ["crypto"], "rate": 3},
        {"subject": "someone-over-http", "name": "remote", "categories": ["stocks"]},
    ],
    "default": "deny",
}


@pytest.fixture(scope="module")
def policies_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("stdio-policies") / "policies.json"
    path.write_text(json.dumps(DOCUMENT))
    return path


def fx_desk_visible() -> set[str]:
    policy = parse_policies(DOCUMENT).named("fx-desk")
    return {t.name for t in narrow_catalog(load_catalog(None), policy).tools}


@asynccontextmanager
async def connect(upstream: SampleUpstream, policies: Path, *flags: str) -> AsyncIterator[Client]:
    """The SDK client over stdio, launching `progressive-mcp stdio` as a desktop client would."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "progressive_mcp", "stdio", "--upstream", upstream.url, *flags],
        env={"ALPHAVANTAGE_API_KEY": KEY, "PMCP_POLICIES_FILE": str(policies)},
        cwd=str(ROOT),
    )
    with tempfile.TemporaryFile("w+") as log:
        async with Client(stdio_client(params, errlog=log)) as client:
            yield client


def hidden_pattern(visible: set[str]) -> re.Pattern[str]:
    names = [t.name for t in load_catalog(None).tools if t.name not in visible and IDENTIFIER_SHAPED.fullmatch(t.name)]
    names += [python_name(n) for n in names]
    alternatives = "|".join(map(re.escape, sorted(set(names), key=len, reverse=True)))
    return re.compile(rf"(?<![\w-])({alternatives})(?![\w-])")


def dumped(result: types.CallToolResult) -> str:
    return json.dumps(result.model_dump(mode="json", by_alias=True, exclude_none=True))


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["progressive", "code", "direct", "hybrid"])
async def test_stdio_serves_only_the_policy_tools(upstream: SampleUpstream, policies_file: Path, mode: str) -> None:
    visible = fx_desk_visible()
    assert "FX_DAILY" in visible and "FX_MONTHLY" not in visible and "TIME_SERIES_DAILY" not in visible
    hidden = hidden_pattern(visible)
    async with connect(upstream, policies_file, "--policy", "fx-desk", "--mode", mode) as client:
        listed = await client.list_tools()
        names = {t.name for t in listed.tools}
        assert not hidden.findall(json.dumps([t.model_dump(mode="json") for t in listed.tools]))
        if mode == "direct":
            assert names == visible
            with pytest.raises(MCPError) as unknown:
                await client.call_tool("FX_MONTHLY", {"from_symbol": "EUR", "to_symbol": "USD"})
            error = unknown.value.error
            told = set(hidden.findall(json.dumps([error.message, error.data]))) - {"FX_MONTHLY"}
            assert not told and error.message.startswith("Unknown tool 'FX_MONTHLY'"), error
            answers = []
        else:
            answers = [
                await client.call_tool("TOOL_LIST", {}),
                await client.call_tool("TOOL_LIST", {"category": "stocks"}),
                await client.call_tool("TOOL_SEARCH", {"query": "monthly foreign exchange rates", "limit": 20}),
                await client.call_tool("TOOL_SEARCH", {"query": "daily stock prices of IBM", "schemas": True}),
                await client.call_tool("TOOL_GET", {"tool_name": ["FX_MONTHLY", "FX_DAILY"]}),
            ]
            assert answers[0].structured_content is not None
            categories = answers[0].structured_content["categories"]
            listed_tools = {t if isinstance(t, str) else t["name"] for c in categories for t in c.get("tools", [])}
            assert listed_tools and listed_tools <= visible, categories
            if mode == "code":
                answers.append(await client.call_tool("TOOL_GET", {"tool_name": sorted(visible), "format": "python"}))
                script = await client.call_tool("TOOL_EXECUTE", {"code": "await FX_MONTHLY()"})
                assert script.is_error and "FX_MONTHLY" in dumped(script), dumped(script)  # checked, refused
                answers.append(script)
            else:
                answers.append(await client.call_tool("TOOL_CALL", {"tool_name": "FX_MONTHLY", "arguments": {}}))
        for answer in answers:
            # A hidden name only where the request said it (TOOL_GET's not_found, an unknown tool's name).
            told = set(hidden.findall(dumped(answer))) - {"FX_MONTHLY", "fx_monthly"}
            assert not told, dumped(answer)
        if mode != "direct":
            got = answers[4].structured_content
            assert [m["name"] for m in got["not_found"]] == ["FX_MONTHLY"] and "FX_MONTHLY" not in json.dumps(
                got["not_found"][0]["suggestions"]
            )
        # A visible tool runs, with the local key.
        ran = await client.call_tool(
            "FX_DAILY" if mode == "direct" else ("TOOL_CALL" if mode != "code" else "TOOL_EXECUTE"),
            {"from_symbol": "EUR", "to_symbol": "USD"}
            if mode == "direct"
            else (
                {"tool_name": "FX_DAILY", "arguments": {"from_symbol": "EUR", "to_symbol": "USD"}}
                if mode != "code"
                else {"code": "len(await FX_DAILY(from_symbol='EUR', to_symbol='USD'))"}
            ),
        )
        assert not ran.is_error, dumped(ran)


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_hidden_tool_answers_on_stdio_as_one_that_does_not_exist(
    upstream: SampleUpstream, policies_file: Path
) -> None:
    """FX_MONTHLY (hidden) and FX_MONTHLZ (made up), through every way to reach a tool: the same answer, byte for
    byte once the name is blanked (error type, message, suggestions)."""
    async with connect(upstream, policies_file, "--policy", "fx-desk", "--mode", "hybrid") as client:

        async def answers(name: str) -> list[str]:
            said = []
            for tool, arguments in [
                ("TOOL_CALL", {"tool_name": name, "arguments": {}}),
                ("TOOL_GET", {"tool_name": name}),
                ("TOOL_GET", {"tool_name": [name, "FX_DAILY"]}),
            ]:
                said.append(dumped(await client.call_tool(tool, arguments)).replace(name, "NAME"))
            with pytest.raises(MCPError) as refused:
                await client.call_tool(name, {})
            error = refused.value.error
            said.append(json.dumps([error.code, error.message, error.data]).replace(name, "NAME"))
            return said

        assert await answers("FX_MONTHLY") == await answers("FX_MONTHLZ")
    async with connect(upstream, policies_file, "--policy", "fx-desk", "--mode", "code") as client:
        said = []
        for name in ("FX_MONTHLY", "FX_MONTHLZ"):
            script = await client.call_tool("TOOL_EXECUTE", {"code": f"await {name}(from_symbol='EUR')"})
            stubs = await client.call_tool("TOOL_GET", {"tool_name": name, "format": "python"})
            said.append([dumped(script).replace(name, "NAME"), dumped(stubs).replace(name, "NAME")])
        assert said[0] == said[1]


@pytest.mark.slow
@pytest.mark.anyio
async def test_past_its_rate_the_local_user_is_told_when_to_retry(
    upstream: SampleUpstream, policies_file: Path
) -> None:
    """rate 3: of eight requests, some are refused (a minute may turn once between them, so one window holds at
    least four), with a JSON-RPC error that says when to try again."""
    refused: list[MCPError] = []
    async with connect(upstream, policies_file, "--policy", "limited") as client:
        for _ in range(8):
            try:
                await client.call_tool("TOOL_LIST", {})
            except MCPError as exc:
                refused.append(exc)
    assert refused, "no request was refused past the rate"
    error = refused[0].error
    assert "Too many requests" in error.message and 1 <= error.data["retry_after_s"] <= 60, error


@pytest.mark.slow
@pytest.mark.parametrize(
    ("flags", "says"),
    [
        ((), "default is deny"),
        (("--policy", "nobody"), "no entry is named 'nobody'"),
    ],
)
def test_stdio_refuses_to_start_without_a_policy_for_its_user(
    policies_file: Path, flags: tuple[str, ...], says: str
) -> None:
    ran = subprocess.run(
        [sys.executable, "-m", "progressive_mcp", "stdio", *flags],
        cwd=ROOT,
        env={**os.environ, "PMCP_POLICIES_FILE": str(policies_file)},
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert ran.returncode == 2 and says in ran.stderr and "Traceback" not in ran.stderr, ran.stderr


def test_the_local_policy_is_the_named_entry_or_the_default() -> None:
    from progressive_mcp.surfaces.stdio import local_policy

    document = json.dumps(DOCUMENT)
    settings = Settings.from_env({"PMCP_POLICIES": document})
    assert local_policy(settings, "fx-desk") == parse_policies(DOCUMENT).named("fx-desk")
    assert local_policy(settings, "remote").categories == frozenset({"stocks"})  # an HTTP entry may be named too
    with pytest.raises(ConfigError, match="default is deny"):
        local_policy(settings, None)
    with_default = Settings.from_env({"PMCP_POLICIES": json.dumps({**DOCUMENT, "default": {"categories": ["forex"]}})})
    assert local_policy(with_default, None).categories == frozenset({"forex"})  # type: ignore[union-attr]
    assert local_policy(Settings.from_env({}), None) is None
    with pytest.raises(ConfigError, match="PMCP_POLICIES_FILE"):
        local_policy(Settings.from_env({}), "fx-desk")
    # A name-only entry never matches a caller over HTTP: it is for --policy alone.
    from progressive_mcp.policies import Caller

    assert parse_policies(DOCUMENT).match(Caller(subject="fx-desk")) is None
