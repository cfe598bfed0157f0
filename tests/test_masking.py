"""Secrets echoed in every form reach no surface (issue 27, findings 2, 4, 10, 12 and 14), end to end.

Two leaky sources, each behind the real transports:

- MCP servers behind the gateway (the toy server, a real stdio MCP server written with the mcp SDK) that give
  their own secrets away: an `env` value and a `${VAR}` in their `args`, in every form of `echo_forms`, as an
  answer, an isError answer, a protocol error, their stderr when they crash or fail to start;
- an upstream REST API with HTTP Basic auth that echoes the caller's key (the whole key, its user part as Stripe
  does, its password part as Twilio does) in answers and in error bodies.

Every surface is read: TOOL_CALL answers and errors, TOOL_EXECUTE results, errors and `printed` (served over HTTP
by `LocalServer` and the Lambda handler, read with the mcp SDK client), the log records, and the `sync` command's
output. Padding moves each cut (300 characters of an error body or protocol error, 200 of a stderr line, 500 of a
code-mode error) into the middle of the echo, so a secret masked after the cut would show its start.
"""

from __future__ import annotations

import base64
import json
import re
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from factories import make_tool
from fixtures.servers.echo_forms import ALL_FORMS, SPLIT, START_LINE, echo, leaks
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from lambda_fn.handler import make_handler
from lambda_fn.local import LocalServer
from progressive_mcp.calls.cache import MemoryCache
from progressive_mcp.calls.upstream import UpstreamClient, UpstreamRequest, UpstreamResponse
from progressive_mcp.catalog import Api, Auth, Catalog, Operation, Param
from progressive_mcp.cli import main as cli_main
from progressive_mcp.gateway.connections import STDERR_TAIL_CHARS, _last_line
from progressive_mcp.gateway.gateway import Gateway
from progressive_mcp.settings import Settings
from progressive_mcp.surfaces.endpoint import Endpoint
from progressive_mcp.surfaces.surface import CallContext, GatewaySurfaces, Surface

ROOT = Path(__file__).resolve().parent.parent
TOY = ROOT / "tests" / "fixtures" / "servers" / "toy_server.py"
BROKEN = ROOT / "tests" / "fixtures" / "servers" / "broken_server.py"
ENV_SECRET = "gw7Sx2KqP9vLm4TzR8nW"  # a server's env value
ARG_SECRET = "ArG5ecr3t-Tq81zLw6Vd"  # a server's `${ARG_SECRET}` argument
NUMERIC_SECRET = "90210773412"
# Terminal control and bidi characters a server may write (finding 14): not one may reach a message or a log.
CONTROL = "\x1b[2K\x1b[1G\x1b[32mINFO: all servers healthy\u202e"
RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


@dataclass
class Seen:
    """Every text one scenario made visible, by where it was seen."""

    texts: dict[str, str] = field(default_factory=dict)

    def add(self, where: str, result: Any) -> None:
        """A tool result (the SDK's model or wire JSON): its text blocks and every string of its structured
        content, as they are (JSON would escape the control characters)."""
        if not isinstance(result, dict):
            result = result.model_dump(by_alias=True, exclude_none=True)
        parts = [block.get("text", "") for block in result.get("content", [])]
        parts += strings_in(result.get("structuredContent"))
        self.texts[where] = "\n".join(parts)

    def leaks(self, secret: str, form: str) -> dict[str, list[str]]:
        found = {where: leaks(text, secret, form) for where, text in self.texts.items()}
        return {where: pieces for where, pieces in found.items() if pieces}


def strings_in(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (k, *strings_in(v))]
    if isinstance(value, list):
        return [s for v in value for s in strings_in(v)]
    return [json.dumps(value)]


def control_characters(texts: dict[str, str]) -> dict[str, str]:
    return {where: repr(match.group()) for where, text in texts.items() if (match := RAW_CONTROL.search(text))}


def scripts(call: str, failing: str) -> dict[str, str]:
    """TOOL_EXECUTE scripts that return a tool's answer, let its error through, and print it."""
    return {
        "result": call,
        "error": failing,
        "printed": f"try:\n    {failing}\nexcept Exception as e:\n    print(e)\n'done'",
        "printed then error": f"try:\n    {failing}\nexcept Exception as e:\n    print(e)\n1 / 0",
    }


def python_call(function: str, arguments: dict[str, Any]) -> str:
    return f"await {function}({', '.join(f'{k}={v!r}' for k, v in arguments.items())})"


async def session(url: str, headers: dict[str, str] | None = None) -> Client:
    http = httpx2.AsyncClient(headers=headers or {}, timeout=120)
    return Client(streamable_http_client(url, http_client=http))


# --- MCP servers behind the gateway ------------------------------------------------------------------------------


LEAK_ARGUMENTS = {
    "name": {"type": "string"},
    "form": {"type": "string"},
    "pad": {"type": "integer"},
    "error": {"type": "boolean"},
    "number": {"type": "boolean"},
    "text": {"type": "string"},
}


def toy_tool(name: str, behaviour: str) -> dict[str, Any]:
    schema = {"type": "object", "properties": LEAK_ARGUMENTS, "required": ["name"]}
    return {"name": name, "description": f"The toy server's {name}.", "inputSchema": schema, "behaviour": behaviour}


def server_entry(script: Path, *args: str) -> dict[str, Any]:
    """A stdio server holding ENV_SECRET (and NUMERIC_SECRET) in its env and ARG_SECRET in its args."""
    return {
        "command": sys.executable,
        "args": [str(script), *args, "--token=${ARG_SECRET}"],
        "env": {"EVIL_SECRET": ENV_SECRET, "NUMERIC_SECRET": NUMERIC_SECRET},
        "timeout_s": 60,
    }


def leaky_servers(folder: Path, start_echo: tuple[str, str] | None = None) -> Path:
    """A servers file with `toy`, which gives its secrets away when asked, and with `start_echo` (NAME, FORM) also
    `broken`, which writes NAME's value in FORM to stderr at start-up and exits."""
    tools = folder / "toy.json"
    listed = [toy_tool("reveal", "reveal"), toy_tool("refuse", "refuse"), toy_tool("crash", "stderr_crash")]
    tools.write_text(json.dumps({"tools": listed}))
    servers = {"toy": server_entry(TOY, str(tools))}
    if start_echo is not None:
        pad = str(200 - len(START_LINE) - len("<<") - 15)  # a stderr line is cut at 200 characters
        servers["broken"] = server_entry(BROKEN, *start_echo, pad)
    path = folder / "servers.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def serve_gateway(servers: Path, index: Path) -> Iterator[tuple[str, Endpoint]]:
    """`serve --servers` in process: the URL of the Lambda handler behind LocalServer, and its endpoint."""
    endpoint = Endpoint.from_settings(Settings.from_env({}, servers_path=servers, index_path=index))
    try:
        with LocalServer(make_handler(endpoint), port=0) as server:
            yield server.url, endpoint
    finally:
        if endpoint.gateway is not None:
            endpoint.gateway.close()


@pytest.fixture(scope="module")
def leaky_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`serve --servers` over the toy server; the servers file's ${ARG_SECRET} is set while it is read."""
    folder = tmp_path_factory.mktemp("leaky")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ARG_SECRET", ARG_SECRET)
        served = serve_gateway(leaky_servers(folder), folder / "index.sqlite3")
        url, _ = next(served)
    yield url
    served.close()


async def server_calls(url: str, name: str, form: str, seen: Seen) -> None:
    """Every surface over HTTP while `toy` leaks `name` in `form`."""
    reveal = {"name": name, "form": form}
    failed = {**reveal, "error": True, "pad": 500 - len("<<") - 15}  # a server's error is cut at 500 in a script
    refused = {**reveal, "pad": 300 - len("<<") - 15}  # a protocol error is cut at 300 characters
    async with await session(url) as client:
        for where, tool, arguments in (
            ("TOOL_CALL answer", "toy.reveal", reveal),
            ("TOOL_CALL isError", "toy.reveal", failed),
            ("protocol error", "toy.refuse", refused),
        ):
            seen.add(where, await client.call_tool("TOOL_CALL", {"tool_name": tool, "arguments": arguments}))
    async with await session(url + "?mode=code") as client:
        for what, code in scripts(python_call("toy_reveal", reveal), python_call("toy_reveal", failed)).items():
            seen.add(f"TOOL_EXECUTE {what}", await client.call_tool("TOOL_EXECUTE", {"code": code}))


def failing_servers(
    tmp_path: Path, name: str, form: str, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> Seen:
    """`sync` (the CLI) with `broken` failing at start-up, then `toy` crashing in a call, both writing `name`'s
    value in `form` (and control characters) to stderr."""
    seen = Seen()
    servers = leaky_servers(tmp_path, (name, form))
    index = tmp_path / "index.sqlite3"
    cli_main(["sync", "--servers", str(servers), "--index", str(index)])
    out = capsys.readouterr()
    seen.texts["sync output"] = out.out + out.err
    gateway = Gateway.open(servers, index)
    try:
        crashed = {"name": name, "form": form, "text": CONTROL, "pad": 200 - len(CONTROL) - len("<<") - 15}
        surface = GatewaySurfaces(gateway, Settings()).current()
        result = surface.call_tool_wire("TOOL_CALL", {"tool_name": "toy.crash", "arguments": crashed}, CallContext())
        seen.add("crash", result)
    finally:
        gateway.close()
    seen.texts["logs"] = caplog.text
    return seen


# Every form of an env value; a few forms show that what an argument's ${VAR} stands for counts as a secret too.
SERVER_CASES = [*(("EVIL_SECRET", form) for form in ALL_FORMS), *(("--token", f) for f in ("plain", "reversed", SPLIT))]


@pytest.mark.parametrize(("name", "form"), SERVER_CASES)
def test_a_servers_secret_in_any_form_reaches_no_answer_error_or_printed(
    leaky_gateway: str, name: str, form: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Findings 2, 4, 10 and 12 over HTTP: an env value, and a `${VAR}` in the args, in every echo form."""
    seen = Seen()
    with caplog.at_level("INFO"):
        anyio.run(server_calls, leaky_gateway, name, form, seen)
    seen.texts["logs"] = caplog.text
    assert "<<" in seen.texts["TOOL_CALL answer"] or "[removed" in seen.texts["TOOL_CALL answer"]
    assert "toy.reveal failed" in seen.texts["TOOL_EXECUTE error"]
    assert seen.leaks(ENV_SECRET if name == "EVIL_SECRET" else ARG_SECRET, form) == {}


# Each case starts the toy server (~4 CPU-s): make test keeps the plain form, make test-slow runs every form.
STDERR_CASES = [
    pytest.param(*case, marks=pytest.mark.spawns if case == ("EVIL_SECRET", "plain") else pytest.mark.slow)
    for case in SERVER_CASES
]


@pytest.mark.parametrize(("name", "form"), STDERR_CASES)
def test_a_servers_secret_on_its_stderr_reaches_no_message_log_or_sync_output(
    tmp_path: Path,
    name: str,
    form: str,
    servers_environ: None,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Findings 4, 10, 12 and 14: a server's stderr (cut at 200 characters) in the caller's message, the
    operator's log and `sync`'s output."""
    with caplog.at_level("INFO"):
        seen = failing_servers(tmp_path, name, form, caplog, capsys)
    assert "broken" in seen.texts["sync output"] and "MCP server 'toy' is unavailable" in seen.texts["crash"]
    assert seen.leaks(ENV_SECRET if name == "EVIL_SECRET" else ARG_SECRET, form) == {}
    assert control_characters(seen.texts) == {}
    assert "\\x1b[2K" in seen.texts["crash"] and "\\u202e" in seen.texts["crash"]
    assert "\\x1b[31m" in seen.texts["logs"] and "\\x1b[31m" in seen.texts["sync output"]


@pytest.fixture
def servers_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARG_SECRET", ARG_SECRET)  # the servers file's ${ARG_SECRET}


def test_a_servers_numeric_secret_as_a_json_number_is_masked(
    leaky_gateway: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Finding 12: a secret made of digits, answered as a JSON number (TOOL_CALL and a script)."""
    seen = Seen()

    async def calls() -> None:
        reveal = {"name": "NUMERIC_SECRET", "number": True}
        async with await session(leaky_gateway) as client:
            answer = await client.call_tool("TOOL_CALL", {"tool_name": "toy.reveal", "arguments": reveal})
            seen.add("TOOL_CALL answer", answer)
        async with await session(leaky_gateway + "?mode=code") as client:
            answer = await client.call_tool("TOOL_EXECUTE", {"code": python_call("toy_reveal", reveal)})
            seen.add("TOOL_EXECUTE result", answer)

    anyio.run(calls)
    seen.texts["logs"] = caplog.text
    assert "value" in seen.texts["TOOL_CALL answer"]
    assert {where: text for where, text in seen.texts.items() if NUMERIC_SECRET in text} == {}


# --- an upstream with HTTP Basic auth that echoes the caller's key -----------------------------------------------

BASIC = Auth(in_="header", name="Authorization", env="THINGS_CREDENTIALS", scheme="basic")
TWILIO_KEY = "AC5f2b8c9d0e1a4b7c3d6e9f0a1b2c3d4e:9f8e7d6c5b4a39281706f5e4d3c2b1a0"  # user: account SID, password: token
STRIPE_KEY = "sk_test_4eC39HqLyjWDarjtT1zdp7dc:"  # the whole secret is the user part
NUMERIC_KEY = "me:90210773412"


def q_param() -> Param:
    return Param(name="q", type="string", required=False)


def things_catalog() -> Catalog:
    tools = [
        make_tool(name, (q_param(),), operation=Operation("GET", f"/{name}", operation_id=name), cache_ttl_s=60)
        for name in ("data", "refused", "denied")
    ]
    return Catalog.build(
        Api(name="things", title="Things API", base_url="https://things.example/v1", auth=BASIC),
        {"things": "Things."},
        tools,
    )


class EchoingUpstream:
    """An API that echoes the key it was sent (one `piece` of it, in one `form`): in its data (`/data`), in a 400
    error body after the `q` argument (`/refused`), in a 401 body as Stripe words it (`/denied`)."""

    def __init__(self, piece: str, form: str) -> None:
        self.piece, self.form = piece, form
        self.sent: list[UpstreamRequest] = []

    def send(self, request: UpstreamRequest) -> UpstreamResponse:
        self.sent.append(request)
        authorization = dict(request.headers)["Authorization"]
        key = base64.b64decode(authorization.split(" ", 1)[1]).decode()
        user, _, password = key.partition(":")
        secret = {"whole": key, "user": user, "password": password}[self.piece]
        q = dict(part.split("=", 1) for part in request.query.split("&") if "=" in part).get("q", "")
        if request.url.endswith("/data"):
            data = int(secret) if self.form == "number" else echo(secret, self.form)
            return self.json(
                200, {"data": data, "auth": f"Basic {echo(key, 'base64')}" if self.form == "base64" else ""}
            )
        if request.url.endswith("/refused"):
            return self.json(400, {"message": f"{CONTROL} Bad value {q} for {echo(secret, self.form)}"})
        return self.json(401, {"error": {"message": f"Invalid API Key provided: {echo(secret, self.form)}"}})

    @staticmethod
    def json(status: int, payload: Any) -> UpstreamResponse:
        return UpstreamResponse(status, {"content-type": "application/json"}, json.dumps(payload).encode())


@dataclass(frozen=True)
class KeyCase:
    key: str
    piece: str
    form: str

    @property
    def secret(self) -> str:
        user, _, password = self.key.partition(":")
        return {"whole": self.key, "user": user, "password": password}[self.piece]


KEY_CASES = [
    KeyCase(STRIPE_KEY, "user", "plain"),
    KeyCase(TWILIO_KEY, "whole", "base64"),
    *(KeyCase(TWILIO_KEY, "password", form) for form in ALL_FORMS),
]


@pytest.fixture(scope="module")
def things() -> Iterator[tuple[str, dict[str, EchoingUpstream]]]:
    """The serve stack over the Things API: a switchable echoing upstream, one cache."""
    upstream = {"now": EchoingUpstream("whole", "plain")}

    class Switch:
        def send(self, request: UpstreamRequest) -> UpstreamResponse:
            return upstream["now"].send(request)

    catalog = things_catalog()
    settings = Settings.from_env({})
    surface = Surface(catalog, upstream=UpstreamClient(catalog.api, transport=Switch(), retries=0), cache=MemoryCache())
    with LocalServer(make_handler(Endpoint(surface, settings)), port=0) as server:
        yield server.url, upstream


@pytest.mark.parametrize("case", KEY_CASES, ids=lambda c: f"{c.piece}-{c.form}")
def test_the_callers_key_in_any_form_reaches_no_surface(
    things: tuple[str, dict[str, EchoingUpstream]], case: KeyCase, caplog: pytest.LogCaptureFixture
) -> None:
    """Findings 4, 12 and 14: the key, its Basic user or password part, in every echo form, in answers and in
    error bodies cut at 300 characters 15 characters into the echo."""
    url, upstream = things
    upstream["now"] = EchoingUpstream(case.piece, case.form)
    seen = Seen()
    q = "x" * (299 - len(f"{CONTROL} Bad value ") - len(" for <<") - 15)

    async def calls() -> None:
        headers = {"X-API-Key": case.key}
        async with await session(url, headers) as client:
            for tool in ("data", "refused", "denied"):
                arguments = {"tool_name": tool, "arguments": {"q": q}}
                seen.add(f"TOOL_CALL {tool}", await client.call_tool("TOOL_CALL", arguments))
        async with await session(url + "?mode=code", headers) as client:
            ok, failing = python_call("data", {"q": q}), python_call("refused", {"q": q})
            for what, code in scripts(ok, failing).items():
                seen.add(f"TOOL_EXECUTE {what}", await client.call_tool("TOOL_EXECUTE", {"code": code}))

    with caplog.at_level("INFO"):
        anyio.run(calls)
    seen.texts["logs"] = caplog.text
    assert "Bad value" in seen.texts["TOOL_CALL refused"] and "data" in seen.texts["TOOL_CALL data"]
    assert seen.leaks(case.secret, case.form) == {}
    messages = {
        where: text for where, text in seen.texts.items() if where not in ("TOOL_CALL data", "TOOL_EXECUTE result")
    }
    assert control_characters(messages) == {}


def test_an_answer_that_held_the_key_as_a_json_number_is_masked_and_never_cached(
    things: tuple[str, dict[str, EchoingUpstream]],
) -> None:
    url, upstream = things
    upstream["now"] = echoing = EchoingUpstream("password", "number")
    seen = Seen()

    async def calls() -> None:
        async with await session(url, {"X-API-Key": NUMERIC_KEY}) as client:
            for attempt in range(2):
                arguments = {"tool_name": "data", "arguments": {"q": "n"}}
                seen.add(f"TOOL_CALL {attempt}", await client.call_tool("TOOL_CALL", arguments))

    anyio.run(calls)
    secret = NUMERIC_KEY.split(":")[1]
    assert all(secret not in text for text in seen.texts.values()), seen.texts
    assert len(echoing.sent) == 2, "an answer that held the key must never be served from the cache"
    assert all("cached_at" not in text for text in seen.texts.values())


def test_a_stderr_line_begun_before_the_part_read_is_not_shown_cut() -> None:
    """Finding 4: the stderr tail is read from the end; a line that starts before it would show a secret's end."""
    with tempfile.TemporaryFile("w+", encoding="utf-8") as stderr:
        stderr.write("x" * 100 + ENV_SECRET + "y" * (STDERR_TAIL_CHARS - 11) + "\n")  # read from its 11th character
        assert ENV_SECRET[-8:] not in _last_line(stderr) and "longer than" in _last_line(stderr)
        stderr.write(f"the last line quotes {ENV_SECRET}\n")
        assert _last_line(stderr) == f"the last line quotes {ENV_SECRET}"  # whole: masked before it is cut
