"""Smoke-test the server with the official MCP Python SDK client, over stdio and over HTTP, in every client mode.

For each transport (`progressive-mcp stdio` as a subprocess; `progressive-mcp serve --sample-upstream` on a
free port, as a subprocess) and each connect mode of `mcp.Client` (legacy = the initialize handshake,
auto = probe server/discover then fall back, 2026-07-28 = the stateless revision pinned), it connects,
lists the tools, searches for a need, fetches the top hit's schema, calls it against the offline sample
upstream and checks that an unknown tool is a clear error. Over HTTP it also lists the direct and hybrid
surfaces (`?mode=`). Prints one line per check and `N passed, M failed`; exits 1 on any failure.

    .venv/bin/python .ci/sdk_smoke.py          # or: make smoke
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TextIO, cast

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from progressive_mcp.offline.sample_upstream import SampleUpstream

ROOT = Path(__file__).resolve().parent.parent
KEY = "smoke-test-key"
CLIENT_MODES = ("legacy", "auto", "2026-07-28")
EXPECTED_VERSION = {"legacy": "2025-11-25", "auto": "2026-07-28", "2026-07-28": "2026-07-28"}
# The meta-tools and the arguments each requires: a contract clients cache (DESIGN.md).
META_TOOLS = {"TOOL_LIST": [], "TOOL_SEARCH": ["query"], "TOOL_GET": ["tool_name"], "TOOL_CALL": ["tool_name"]}
SERVER_INFO_META = "io.modelcontextprotocol/serverInfo"
NEED = "current price of a stock"  # what an agent would ask for; its top hit should be GLOBAL_QUOTE
SESSION_TIMEOUT_S = 60


@dataclass
class Report:
    passed: int = 0
    failed: int = 0
    lines: list[str] = field(default_factory=list)

    def record(self, label: str, ok: bool, detail: str) -> None:
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        print(f"{'ok  ' if ok else 'FAIL'} {label}: {detail}", flush=True)


Check = Callable[[Client], Awaitable[str]]


class CheckFailed(Exception):
    """A check's expectation did not hold; the message says which."""


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


def text_of(result: types.CallToolResult) -> str:
    block = result.content[0] if result.content else None
    return block.text if isinstance(block, types.TextContent) else ""


# --- the checks of one progressive session ---------------------------------------------------------


def check_connected(mode: str) -> Check:
    async def run(client: Client) -> str:
        version = client.protocol_version
        expect(version == EXPECTED_VERSION[mode], f"protocol {version}, expected {EXPECTED_VERSION[mode]}")
        if client.server_info is not None:
            name, release = client.server_info.name, client.server_info.version
        else:  # a pinned version skips server/discover; every 2026-07-28 result names the server in its _meta
            meta = (await client.list_tools()).meta or {}
            info = meta.get(SERVER_INFO_META) or {}
            name, release = str(info.get("name")), str(info.get("version"))
        expect(name == "progressive-mcp", f"server name {name!r}")
        return f"protocol {version}, server {name} {release}"

    return run


async def check_meta_tools(client: Client) -> str:
    tools = (await client.list_tools()).tools
    names = [tool.name for tool in tools]
    expect(names == list(META_TOOLS), f"tools {names}, expected {list(META_TOOLS)}")
    for tool in tools:
        schema = tool.input_schema
        expect(schema.get("type") == "object", f"{tool.name}: inputSchema is not an object schema")
        for argument in META_TOOLS[tool.name]:
            expect(argument in schema.get("properties", {}), f"{tool.name}: inputSchema lacks {argument!r}")
            expect(argument in schema.get("required", []), f"{tool.name}: {argument!r} is not required")
        expect(bool(tool.output_schema), f"{tool.name}: no outputSchema")
        expect(bool(tool.description), f"{tool.name}: no description")
    return "the four meta-tools, each with an input and an output schema"


async def call(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A successful tool result's structuredContent, checked against its JSON text."""
    result = await client.call_tool(name, arguments)
    expect(result.is_error is not True, f"{name} gave isError: {text_of(result)[:200]}")
    structured = result.structured_content
    expect(isinstance(structured, dict), f"{name} gave no structuredContent")
    assert isinstance(structured, dict)
    expect(json.loads(text_of(result) or "null") == structured, f"{name}: text and structuredContent differ")
    return structured


class Session:
    """The progressive flow: search, then fetch the top hit's schema, then call it."""

    def __init__(self) -> None:
        self.top_hit: str | None = None

    async def search(self, client: Client) -> str:
        found = await call(client, "TOOL_SEARCH", {"query": NEED})
        results = found.get("results") or []
        expect(bool(results), f"no results for {NEED!r}")
        expect({"name", "score"} <= set(results[0]), f"a result lacks name or score: {results[0]}")
        self.top_hit = results[0]["name"]
        expect(self.top_hit == "GLOBAL_QUOTE", f"top hit {self.top_hit}, expected GLOBAL_QUOTE")
        return f"{NEED!r} → {', '.join(r['name'] for r in results[:3])}"

    async def get(self, client: Client) -> str:
        expect(self.top_hit is not None, "no top hit to fetch (TOOL_SEARCH failed)")
        found = await call(client, "TOOL_GET", {"tool_name": self.top_hit})
        tool = (found.get("tools") or [{}])[0]
        expect(tool.get("name") == self.top_hit, f"TOOL_GET answered {tool.get('name')!r}")
        required = tool.get("inputSchema", {}).get("required")
        expect(required == ["symbol"], f"{self.top_hit} requires {required}, expected ['symbol']")
        return f"{self.top_hit} inputSchema requires {required}"

    async def call(self, client: Client) -> str:
        expect(self.top_hit is not None, "no top hit to call (TOOL_SEARCH failed)")
        answer = await call(client, "TOOL_CALL", {"tool_name": self.top_hit, "arguments": {"symbol": "IBM"}})
        quote = answer.get("data", {}).get("Global Quote", {})
        expect(quote.get("01. symbol") == "IBM", f"no IBM quote in {str(answer)[:200]}")
        source = "the response cache" if "cached_at" in answer else "the sample upstream"
        return f"{self.top_hit}(IBM) price {quote.get('05. price')} from {source}"


async def check_unknown_tool(client: Client) -> str:
    try:
        result = await client.call_tool("TOOL_SERACH", {"query": "x"})
    except MCPError as exc:
        expect(exc.code == types.INVALID_PARAMS, f"error code {exc.code}, expected {types.INVALID_PARAMS}")
        expect("TOOL_SEARCH" in exc.message, f"the error does not suggest TOOL_SEARCH: {exc.message[:200]}")
        return f"TOOL_SERACH → {exc.code}: {exc.message[:90]}"
    raise CheckFailed(f"an unknown tool answered a result: {text_of(result)[:200]}")


async def check_unknown_inner_tool(client: Client) -> str:
    result = await client.call_tool("TOOL_CALL", {"tool_name": "GLOBAL_QOUTE", "arguments": {"symbol": "IBM"}})
    expect(result.is_error is True, "TOOL_CALL of an unknown tool did not give isError")
    expect("GLOBAL_QUOTE" in text_of(result), f"no suggestion in {text_of(result)[:200]}")
    return "TOOL_CALL GLOBAL_QOUTE → isError suggesting GLOBAL_QUOTE"


def progressive_checks(mode: str) -> list[tuple[str, Check]]:
    session = Session()
    connect = {"legacy": "initialize", "auto": "server/discover"}.get(mode, "pinned version")
    return [
        (connect, check_connected(mode)),
        ("tools/list", check_meta_tools),
        ("TOOL_SEARCH", session.search),
        ("TOOL_GET", session.get),
        ("TOOL_CALL", session.call),
        ("unknown tool", check_unknown_tool),
        ("TOOL_CALL unknown tool", check_unknown_inner_tool),
    ]


# --- the direct and hybrid surfaces over HTTP ----------------------------------------------------


def check_surface(surface: str, catalog_size: int) -> Check:
    async def run(client: Client) -> str:
        names = [tool.name for tool in (await client.list_tools()).tools]
        metas = [name for name in names if name in META_TOOLS]
        if surface == "direct":
            expect(not metas, f"the direct surface lists meta-tools {metas}")
            expect(len(names) == catalog_size, f"{len(names)} tools, expected the catalog's {catalog_size}")
        else:
            expect(names[:4] == list(META_TOOLS), f"hybrid starts with {names[:4]}")
            expect(len(names) == catalog_size + 4, f"{len(names)} tools, expected {catalog_size} + 4")
        answer = await call(client, "CURRENCY_EXCHANGE_RATE", {"from_currency": "EUR", "to_currency": "USD"})
        expect("Realtime Currency Exchange Rate" in answer.get("data", {}), f"no exchange rate in {str(answer)[:200]}")
        return f"{len(names)} tools; CURRENCY_EXCHANGE_RATE called directly"

    return run


async def catalog_size(url: str) -> int:
    async with Client(f"{url}?apikey={KEY}", mode="legacy") as client:
        listing = await call(client, "TOOL_LIST", {})
    return int(listing["tool_count"])


# --- running sessions ----------------------------------------------------------------------------


async def run_session(report: Report, label: str, client: Client, checks: list[tuple[str, Check]]) -> None:
    """Connect, run each check in order; a failed connection fails the first check and skips the rest."""
    done = 0
    try:
        with anyio.fail_after(SESSION_TIMEOUT_S):
            async with client:
                for name, check in checks:
                    started = time.perf_counter()
                    try:
                        detail = await check(client)
                    except (CheckFailed, MCPError) as exc:
                        report.record(f"{label} {name}", False, str(exc))
                    else:
                        report.record(f"{label} {name}", True, f"{detail} ({_ms(started)})")
                    done += 1
    except Exception as exc:  # the connection or the transport broke: say how, once
        name = checks[done][0] if done < len(checks) else "close"
        report.record(f"{label} {name}", False, f"{type(exc).__name__}: {exc}"[:300])


def _ms(started: float) -> str:
    return f"{(time.perf_counter() - started) * 1000:.0f} ms"


def console_command() -> list[str]:
    """`progressive-mcp` from the same environment as this Python (the module if the script is absent)."""
    script = Path(sys.executable).parent / "progressive-mcp"
    return [str(script)] if script.exists() else [sys.executable, "-m", "progressive_mcp.cli"]


def clean_env() -> dict[str, str]:
    """This environment without settings that would change what the server answers."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PMCP_") and k != "ALPHAVANTAGE_API_KEY"}


async def over_stdio(report: Report, upstream_url: str, errlog: TextIO) -> None:
    command = console_command()
    params = StdioServerParameters(
        command=command[0],
        args=[*command[1:], "stdio", "--upstream", upstream_url],
        env={"ALPHAVANTAGE_API_KEY": KEY},
        cwd=str(ROOT),
    )
    for mode in CLIENT_MODES:
        client = Client(stdio_client(params, errlog=errlog), mode=mode)
        await run_session(report, f"stdio {mode:<10}", client, progressive_checks(mode))


async def over_http(report: Report, url: str) -> None:
    for mode in CLIENT_MODES:
        client = Client(f"{url}?apikey={KEY}", mode=mode)
        await run_session(report, f"http  {mode:<10}", client, progressive_checks(mode))
    size = await catalog_size(url)
    for surface in ("direct", "hybrid"):
        for mode in ("legacy", "2026-07-28"):
            client = Client(f"{url}?mode={surface}&apikey={KEY}", mode=mode)
            checks = [(f"?mode={surface} tools/list", check_surface(surface, size))]
            await run_session(report, f"http  {mode:<10}", client, checks)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_serve(log: IO[str]) -> tuple[subprocess.Popen[bytes], str]:
    """`progressive-mcp serve --sample-upstream` on a free port, once it accepts connections."""
    port = free_port()
    command = [*console_command(), "serve", "--sample-upstream", "--port", str(port), "--log-level", "WARNING"]
    process = subprocess.Popen(command, cwd=ROOT, env=clean_env(), stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log.seek(0)
            raise SystemExit(f"progressive-mcp serve exited with {process.returncode}:\n{log.read()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return process, f"http://127.0.0.1:{port}/mcp"
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit("progressive-mcp serve did not start listening within 30 s")


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)


async def main() -> int:
    report = Report()
    started = time.perf_counter()
    with (
        tempfile.TemporaryFile("w+") as stdio_log,
        tempfile.TemporaryFile("w+") as serve_log,
        SampleUpstream(port=0) as upstream,
    ):
        await over_stdio(report, upstream.url, cast(TextIO, stdio_log))
        server, url = start_serve(serve_log)
        try:
            await over_http(report, url)
        finally:
            stop(server)
        if report.failed:
            for name, log in (("stdio server", stdio_log), ("serve", serve_log)):
                log.seek(0)
                tail = log.read()[-2000:]
                if tail.strip():
                    print(f"--- {name} log (tail) ---\n{tail}")
    mcp_version = _version("mcp")
    print(f"Python SDK client (mcp {mcp_version}) smoke, stdio and HTTP, modes {', '.join(CLIENT_MODES)}:")
    print(f"{report.passed} passed, {report.failed} failed ({time.perf_counter() - started:.1f} s)")
    return 1 if report.failed else 0


def _version(distribution: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return "?"


if __name__ == "__main__":
    raise SystemExit(anyio.run(main))
