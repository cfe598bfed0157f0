"""Code-mode fairness (issue 27, finding 6): one caller's runaway scripts cannot shut others out of the sandbox.

Over real HTTP (the serve stack with the mcp SDK client): forty endless scripts from one caller, then another
caller's script, which runs within its own time limit while the first caller's share of the workers is still
busy; the first caller's scripts over its share are refused at once with "busy ... retry after N s". Beside it,
the worker shares themselves (progressive_mcp.calls.fairness) and how each transport names its caller.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import ExitStack, asynccontextmanager
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from lambda_fn.handler import make_handler, request_from_event
from lambda_fn.local import LocalServer, build_event
from progressive_mcp.calls.fairness import SandboxBusy, WorkerShares, address_group, caller_id
from progressive_mcp.calls.sandbox import Sandbox, ScriptLimits, ScriptOutcome, ToolFunction
from progressive_mcp.calls.upstream import UpstreamClient
from progressive_mcp.offline.sample_upstream import SampleUpstream
from progressive_mcp.settings import Settings
from progressive_mcp.sources import load_catalog
from progressive_mcp.surfaces.endpoint import Endpoint, HttpRequest
from progressive_mcp.surfaces.surface import Surface

TOKEN_A = "tok-A-3E9B51C7A2D84F06b71"  # endpoint tokens have at least 24 characters
TOKEN_B = "tok-B-8C27F4D1E6A930B5c02"
KEY_A = "RunAway-Caller-A-1111"
KEY_B = "Patient-Caller-B-2222"
WALL_S = 8.0  # the server's script time limit here: runaway scripts hold a worker this long
RUNAWAY = "i = 0\nwhile True:\n    i += 1"
QUOTE = 'q = await GLOBAL_QUOTE(symbol="IBM")\nq["Global Quote"]["05. price"]'


@pytest.fixture
def served(upstream: SampleUpstream) -> Iterator[str]:
    """The serve stack in code mode, passthrough auth, with a sandbox of its own: closed at the end, so no
    runaway worker outlives the test."""
    catalog = load_catalog()
    sandbox = Sandbox()
    surface = Surface(
        catalog,
        mode="code",
        upstream=UpstreamClient(catalog.api, base_url=upstream.url, retries=0),
        sandbox=sandbox,
        script_limits=ScriptLimits(wall_s=WALL_S),
    )
    endpoint = Endpoint(surface, Settings.from_env({}, upstream_url=upstream.url, cache=False))
    try:
        with LocalServer(make_handler(endpoint), port=0) as server:
            yield server.url
    finally:
        sandbox.close()


@asynccontextmanager
async def caller(url: str, key: str) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers={"X-API-Key": key}, timeout=120) as http,
        Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
    ):
        yield client


def error_of(result: types.CallToolResult) -> dict[str, Any]:
    assert result.is_error and result.structured_content is not None, result
    error: dict[str, Any] = result.structured_content["error"]
    return error


@pytest.mark.anyio
@pytest.mark.timeout(120)
async def test_forty_runaway_scripts_of_one_caller_leave_room_for_another(served: str) -> None:
    async with caller(served, KEY_A) as a, caller(served, KEY_B) as b:
        runaway = [asyncio.create_task(a.call_tool("TOOL_EXECUTE", {"code": RUNAWAY})) for _ in range(40)]
        waited = time.monotonic()
        # The first answer to come is one over A's share (refused at once), so A's share is full from then on;
        # its two scripts keep their workers for WALL_S. (Before the fix none came: B was sent after WALL_S / 2.)
        while not any(task.done() for task in runaway) and time.monotonic() - waited < WALL_S / 2:
            await asyncio.sleep(0.02)
        answer = await b.call_tool("TOOL_EXECUTE", {"code": QUOTE})
        still_running = sum(not task.done() for task in runaway)
        results = await asyncio.gather(*runaway)

    assert not answer.is_error, answer.content
    assert answer.structured_content == {
        "result": "245.0000",
        "printed": "",
        "calls": [{"tool": "GLOBAL_QUOTE", "ms": answer.structured_content["calls"][0]["ms"], "cached": False}],
    }
    assert still_running >= 1, "the second caller's script must have run while the first caller's did"
    errors = [error_of(result) for result in results]
    ran = [e for e in errors if e["kind"] == "limit"]
    busy = [e for e in errors if e["kind"] == "busy"]
    assert len(ran) + len(busy) == 40, [e["message"] for e in errors]
    assert 1 <= len(ran) <= 2, "a caller holds at most its share (half of the 4 workers) at once"
    assert all(e["limit"] == "wall_s" for e in ran)
    for error in busy:
        assert error["message"].startswith("busy: "), error
        assert f"retry after {error['retry_after_s']} s" in error["message"], error
        assert 1 <= error["retry_after_s"] <= WALL_S + 1
        assert "not available" not in error["message"]


# --- the shares ----------------------------------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def holding(shares: WorkerShares, *holds: tuple[str | None, str | None, float]) -> ExitStack:
    """Hold a worker for each (caller, address, ends_at), released when the returned stack closes."""
    stack = ExitStack()
    for caller_, address, ends_at in holds:
        stack.enter_context(shares.hold(caller_, address, ends_at))
    return stack


def refusal(shares: WorkerShares, caller_: str, address: str | None, ends_at: float = 120.0) -> SandboxBusy:
    with pytest.raises(SandboxBusy) as refused, shares.hold(caller_, address, ends_at):
        pass
    return refused.value


def test_a_caller_over_its_share_is_refused_at_once_saying_when_to_retry() -> None:
    shares = WorkerShares(4, clock=FakeClock())
    with holding(shares, ("key:a", "198.51.100.1", 110.0), ("key:a", "198.51.100.1", 104.2)):
        busy = refusal(shares, "key:a", "198.51.100.1")
        assert busy.retry_after_s == 5  # when the sooner of its two scripts ends, rounded up
        assert str(busy).startswith("busy: you already run 2 scripts at once")
        assert "retry after 5 s" in str(busy)
        with shares.hold("key:b", "198.51.100.2", ends_at=120.0):  # another caller still gets a worker
            assert shares.held == 3
    assert shares.held == 0
    with shares.hold("key:a", "198.51.100.1", ends_at=120.0):  # its share is free again
        assert shares.held == 1


def test_callers_from_one_address_hold_all_but_one_worker_however_many_keys_they_invent() -> None:
    shares = WorkerShares(4, clock=FakeClock())
    address = "203.0.113.5"
    with holding(shares, ("key:1", address, 110.0), ("key:2", address, 111.0), ("key:3", address, 112.0)):
        busy = refusal(shares, "key:4", address)
        assert "network address" in str(busy) and busy.retry_after_s == 10
        with shares.hold("key:5", "192.0.2.9", 120.0):  # the last worker: for another address
            assert shares.held == 4


def test_an_ipv6_client_counts_as_its_slash_64() -> None:
    assert address_group("2001:db8:1:2::1") == address_group("2001:db8:1:2:ffff::9") == "2001:db8:1:2::/64"
    assert address_group("2001:db8:1:3::1") != address_group("2001:db8:1:2::1")
    assert address_group("::ffff:192.0.2.7") == address_group("192.0.2.7") == "192.0.2.7"
    assert address_group(None) is None and address_group("not an address") == "not an address"
    shares = WorkerShares(4, clock=FakeClock())
    with holding(
        shares, ("key:1", "2001:db8::1", 110.0), ("key:2", "2001:db8::2", 110.0), ("key:3", "2001:db8::3", 110.0)
    ):
        assert "network address" in str(refusal(shares, "key:4", "2001:db8::4"))


def test_the_only_caller_of_a_process_may_use_the_whole_pool() -> None:
    shares = WorkerShares(4, clock=FakeClock())
    with holding(shares, *[(None, None, 110.0)] * 4):
        assert shares.held == 4


def hold_in_thread(shares: WorkerShares, caller: str, ends_at: float) -> tuple[threading.Thread, list[Any]]:
    outcome: list[Any] = []

    def run() -> None:
        try:
            with shares.hold(caller, None, ends_at):
                outcome.append("ran")
        except SandboxBusy as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def test_a_script_waiting_for_a_full_pool_gets_the_first_worker_freed() -> None:
    shares = WorkerShares(1)
    release = threading.Event()
    holder = threading.Thread(target=lambda: _hold_until(shares, release))
    holder.start()
    while shares.held == 0:
        time.sleep(0.01)
    waiter, outcome = hold_in_thread(shares, "key:late", time.monotonic() + 30)
    time.sleep(0.2)
    assert outcome == []  # still waiting: the pool is full, and this caller is within its share
    release.set()
    waiter.join(timeout=30)
    holder.join(timeout=30)
    assert outcome == ["ran"]


def test_a_script_waiting_for_a_full_pool_never_waits_past_its_deadline() -> None:
    shares = WorkerShares(1)
    release = threading.Event()
    holder = threading.Thread(target=lambda: _hold_until(shares, release, ends_in=30))
    holder.start()
    while shares.held == 0:
        time.sleep(0.01)
    try:
        waiter, outcome = hold_in_thread(shares, "key:late", time.monotonic() + 0.3)
        waiter.join(timeout=30)
        [busy] = outcome
        assert isinstance(busy, SandboxBusy)
        assert str(busy).startswith("busy: all 1 of this server's sandbox workers")
        assert 1 <= busy.retry_after_s <= 31
    finally:
        release.set()
        holder.join(timeout=30)


def _hold_until(shares: WorkerShares, release: threading.Event, ends_in: float = 30) -> None:
    with shares.hold("key:first", None, time.monotonic() + ends_in):
        release.wait(timeout=30)


def test_a_caller_id_is_a_digest_never_the_secret() -> None:
    key = "sk-live-0123456789abcdef"
    ident = caller_id("key", key)
    assert ident.startswith("key:") and key not in ident and "0123456789abcdef" not in ident
    assert ident == caller_id("key", key) != caller_id("key", key + "x")
    assert caller_id("token", key) != ident  # a token and a key with the same text are different callers


# --- who the caller is, per transport ----------------------------------------------------------------------


class RecordingSandbox(Sandbox):
    """A sandbox that runs nothing and records who asked (a fake: the endpoint's choice is what is tested)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str | None, str | None]] = []

    def run(
        self,
        code: str,
        stubs: str,
        functions: Mapping[str, ToolFunction],
        limits: ScriptLimits,
        *,
        deadline: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        caller: str | None = None,
        address: str | None = None,
    ) -> ScriptOutcome:
        self.seen.append((caller, address))
        return ScriptOutcome(result=None, printed="")


def execute_over(endpoint: Endpoint, headers: dict[str, str], source_ip: str | None, query: str = "") -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "TOOL_EXECUTE", "arguments": {"code": "1"}},
    }
    request = HttpRequest.build(
        "POST", "/mcp", query=query, headers=headers, body=json.dumps(body), source_ip=source_ip
    )
    response = endpoint.handle(request)
    assert response.status == 200, response.body
    assert response.json()["result"]["isError"] is False, response.body


def endpoint_with(sandbox: Sandbox, **settings: Any) -> Endpoint:
    surface = Surface(load_catalog(), mode="code", sandbox=sandbox)
    return Endpoint(surface, Settings.from_env({}, cache=False, **settings))


def test_passthrough_callers_are_their_keys_or_else_their_address() -> None:
    sandbox = RecordingSandbox()
    endpoint = endpoint_with(sandbox)
    execute_over(endpoint, {"X-API-Key": KEY_A}, "198.51.100.7")
    execute_over(endpoint, {"Authorization": f"Bearer {KEY_A}"}, "198.51.100.8")
    execute_over(endpoint, {}, "198.51.100.7", query=f"apikey={KEY_B}")
    execute_over(endpoint, {}, "198.51.100.7")
    execute_over(endpoint, {}, None)
    key_a, key_a_again, key_b, no_key, unknown = sandbox.seen
    assert key_a[0] == key_a_again[0] == caller_id("key", KEY_A) and key_b[0] == caller_id("key", KEY_B)
    assert (key_a[1], key_a_again[1], key_b[1]) == ("198.51.100.7", "198.51.100.8", "198.51.100.7")
    assert no_key == ("address:198.51.100.7", "198.51.100.7")
    assert unknown == ("anonymous", None)
    assert not any(KEY_A in str(seen) or KEY_B in str(seen) for seen in sandbox.seen)


def test_server_key_callers_are_their_bearer_tokens() -> None:
    sandbox = RecordingSandbox()
    endpoint = endpoint_with(sandbox, auth_mode="server-key", endpoint_tokens=(TOKEN_A, TOKEN_B), api_key="srv-k")
    execute_over(endpoint, {"Authorization": f"Bearer {TOKEN_A}"}, "198.51.100.7")
    execute_over(endpoint, {"Authorization": f"Bearer {TOKEN_B}"}, "198.51.100.7")
    assert sandbox.seen == [
        (caller_id("token", TOKEN_A), "198.51.100.7"),
        (caller_id("token", TOKEN_B), "198.51.100.7"),
    ]


def test_the_lambda_event_gives_the_client_address() -> None:
    event = build_event("POST", "/mcp", [("host", "localhost")], b"{}", source_ip="203.0.113.77", request_id="r")
    assert request_from_event(event).source_ip == "203.0.113.77"
    del event["requestContext"]["http"]["sourceIp"]
    assert request_from_event(event).source_ip is None


def test_stdio_has_one_caller_with_the_whole_pool() -> None:
    surface = Surface(load_catalog(), mode="code", sandbox=RecordingSandbox())
    ctx = surface.default_context(Settings.from_env({}), environ={})
    assert (ctx.caller, ctx.address) == (None, None)
