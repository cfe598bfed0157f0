"""Code mode under attack: scripts that try to escape the sandbox, read the key, or exhaust the server.

Every attack runs through `Surface.call_tool_wire("TOOL_EXECUTE", ...)`, the path a client's request takes,
against the offline sample upstream. Each must fail with a clear error (`kind` syntax, type, runtime or limit,
and `limit` naming the limit that was hit), send no upstream request unless the test is about calls, and
leave the API key out of the whole answer and the logs. A few probes are not refused because what they
reach is harmless (`locals()`, `type(1)`, `repr(GLOBAL_QUOTE)`, zero-length sleeps): their tests check that
nothing escapes instead. Tests only: nothing here changes the product.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from progressive_mcp.calls.cache import MemoryCache
from progressive_mcp.calls.sandbox import DEFAULT_WALL_S, Sandbox, ScriptLimits
from progressive_mcp.calls.upstream import UpstreamClient
from progressive_mcp.catalog import Catalog
from progressive_mcp.offline.sample_upstream import SampleUpstream
from progressive_mcp.sources import load_catalog
from progressive_mcp.surfaces.surface import CallContext, Surface
from progressive_mcp.tokens import count_tokens

KEY = "SeCuRiTy-KeY-8675309"
BUDGET = 8000  # the surface's default max_result_tokens

pytestmark = pytest.mark.timeout(60)


# --------------------------------------------------------------------------------------------------
# Fixtures and helpers
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


@pytest.fixture
def upstream(shared_upstream: SampleUpstream) -> Iterator[SampleUpstream]:
    shared_upstream.reset()
    yield shared_upstream
    shared_upstream.reset()


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    """One worker pool for the whole file (as a server has one per process); the last test checks it still works."""
    pool = Sandbox()
    yield pool
    pool.close()


@pytest.fixture(autouse=True)
def no_key_in_logs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.DEBUG)
    yield
    assert not holds_key(caplog.text), "the API key reached a log record"


def make_surface(catalog: Catalog, upstream: SampleUpstream, sandbox: Sandbox, **limits: Any) -> Surface:
    client = UpstreamClient(catalog.api, base_url=upstream.url, retries=0)
    return Surface(
        catalog,
        mode="code",
        upstream=client,
        cache=MemoryCache(),
        sandbox=sandbox,
        script_limits=ScriptLimits(**{"wall_s": 3, **limits}),
    )


@pytest.fixture
def surface(catalog: Catalog, upstream: SampleUpstream, sandbox: Sandbox) -> Surface:
    return make_surface(catalog, upstream, sandbox)


@pytest.fixture
def unhurried_surface(catalog: Catalog, upstream: SampleUpstream, sandbox: Sandbox) -> Surface:
    """A surface with the server's default wall limit, for tests of what an answer is cut to, not of time limits:
    their scripts take ~2 s on a busy machine, which may stretch past the 3 s the other tests allow."""
    return make_surface(catalog, upstream, sandbox, wall_s=DEFAULT_WALL_S)


def holds_key(text: str, key: str = KEY) -> bool:
    folded = text.casefold()
    return any(form.casefold() in folded for form in (key, urllib.parse.quote(key), json.dumps(key)[1:-1]))


def execute(surface: Surface, code: str, key: str = KEY) -> dict[str, Any]:
    """Run a script as a client would; check the wire shape and that the key is nowhere in the answer."""
    answer = surface.call_tool_wire("TOOL_EXECUTE", {"code": code}, CallContext(api_key=key))
    assert set(answer) == {"content", "structuredContent", "isError"}
    [content] = answer["content"]
    assert json.loads(content["text"]) == answer["structuredContent"], "text and structuredContent must agree"
    assert not holds_key(json.dumps(answer), key), f"the API key is in the answer: {answer}"
    return answer


def refused(answer: dict[str, Any], kind: str, *phrases: str, limit: str | None = None) -> dict[str, Any]:
    """Assert the script failed with this kind (and limit), its message naming each phrase; return the error."""
    assert answer["isError"] is True, f"the attack was not refused: {answer['structuredContent']}"
    error = answer["structuredContent"]["error"]
    assert error["type"] == "ScriptError", error
    assert error["kind"] == kind, error
    if kind == "limit":
        assert error.get("limit"), f"a limit error must name the limit that was hit: {error}"
    if limit is not None:
        assert error.get("limit") == limit, error
    for phrase in phrases:
        assert phrase in error["message"], f"{phrase!r} not in {error['message']!r}"
    return error


def requests_after_settling(upstream: SampleUpstream, wait_s: float = 0.3) -> list[dict[str, str]]:
    """The upstream's request log once calls left running in the background (if any) have had time to land."""
    time.sleep(wait_s)
    return upstream.requests_snapshot(unmasked=True)


def assert_within_budget(answer: dict[str, Any]) -> None:
    text = answer["content"][0]["text"]
    tokens = count_tokens(text)
    assert tokens <= BUDGET, f"the answer is {tokens} tokens ({len(text):,} characters); the budget is {BUDGET}"


# --------------------------------------------------------------------------------------------------
# Escapes: imports, builtins that reach the host, introspection
# --------------------------------------------------------------------------------------------------


# (script, kind, phrases the message must hold: what was refused)
ESCAPES = [
    pytest.param("import os\nos.environ", "runtime", ["os.environ", "PermissionError"], id="os.environ"),
    pytest.param("import os\nos.listdir('/')", "runtime", ["PermissionError"], id="os.listdir"),
    pytest.param("import os\nos.system('touch /tmp/pwned')", "type", ["system"], id="os.system"),
    pytest.param("import sys\nsys.modules", "type", ["sys", "modules"], id="sys.modules"),
    pytest.param("import sys\nsys.exit(1)", "type", ["sys", "exit"], id="sys.exit"),
    pytest.param("import builtins\nbuiltins.open", "type", ["builtins", "open"], id="import-builtins"),
    pytest.param(
        "import pathlib\npathlib.Path('/etc/passwd').read_text()",
        "runtime",
        ["Path.read_text", "PermissionError"],
        id="pathlib-read",
    ),
    pytest.param("open('/etc/passwd').read()", "type", ["open"], id="open"),
    pytest.param("eval(\"open('/etc/passwd')\")", "runtime", ["open", "PermissionError"], id="eval-open"),
    pytest.param("eval(\"__import__('os')\")", "runtime", ["__import__"], id="eval-__import__"),
    pytest.param("exec('import os\\nx = os.environ')", "runtime", ["os.environ", "PermissionError"], id="exec-os"),
    pytest.param("eval('globals()')", "runtime", ["globals"], id="eval-globals"),
    pytest.param("eval('vars()')", "runtime", ["vars"], id="eval-vars"),
    pytest.param("eval('breakpoint()')", "runtime", ["breakpoint"], id="eval-breakpoint"),
    pytest.param("eval(\"compile('1', 'x', 'eval')\")", "runtime", ["compile"], id="eval-compile"),
    pytest.param("compile('import os', 'x', 'exec')", "type", ["compile"], id="compile"),
    pytest.param("__import__('os')", "type", ["__import__"], id="__import__"),
    pytest.param("globals()", "type", ["globals"], id="globals"),
    pytest.param("vars()", "type", ["vars"], id="vars"),
    pytest.param("getattr(1, '__class__')", "type", ["getattr"], id="getattr"),
    pytest.param("locals()['__builtins__']", "runtime", ["__builtins__"], id="locals-builtins"),
    pytest.param("__builtins__", "runtime", ["__builtins__"], id="__builtins__"),
    pytest.param("().__class__.__mro__[1].__subclasses__()", "runtime", ["__class__"], id="mro-walk"),
    pytest.param("type(()).__mro__[1].__subclasses__()", "runtime", ["__mro__"], id="type-mro-walk"),
    pytest.param("type(1).__subclasses__()", "runtime", ["__subclasses__"], id="type-subclasses"),
    pytest.param("type('X', (object,), {})", "runtime", ["type()"], id="type-3-args"),
    pytest.param("def f():\n    pass\nf.__globals__", "runtime", ["__globals__"], id="f.__globals__"),
    pytest.param("def f():\n    pass\nf.__code__", "runtime", ["__code__"], id="f.__code__"),
    pytest.param("(lambda: 0).__globals__", "runtime", ["__globals__"], id="lambda.__globals__"),
    pytest.param("type(GLOBAL_QUOTE).__globals__", "runtime", ["__globals__"], id="type-of-tool-walk"),
    pytest.param("breakpoint()", "type", ["breakpoint"], id="breakpoint"),
    pytest.param("input()", "type", ["input"], id="input"),
]


@pytest.mark.parametrize(("code", "kind", "phrases"), ESCAPES)
def test_escape_attempts_are_refused(
    surface: Surface, upstream: SampleUpstream, code: str, kind: str, phrases: list[str]
) -> None:
    refused(execute(surface, code), kind, *phrases)
    assert upstream.requests_snapshot() == []


@pytest.mark.parametrize(
    ("code", "module"),
    [
        ("import subprocess", "subprocess"),
        ("import socket", "socket"),
        ("import ctypes", "ctypes"),
        ("import importlib", "importlib"),
        ("from subprocess import run", "subprocess"),
        ("import os\nimport socket", "socket"),
    ],
)
def test_importing_a_module_monty_lacks_is_refused_naming_the_module(
    surface: Surface, upstream: SampleUpstream, code: str, module: str
) -> None:
    """The refusal must say which import was refused, and where (today: "import_stubs is not available", no line)."""
    error = refused(execute(surface, code), "runtime", module)
    assert error.get("line") == code.count("\n") + 1, error
    assert upstream.requests_snapshot() == []


@pytest.mark.parametrize(
    "code",
    [
        pytest.param("locals()", id="locals"),
        pytest.param("x = 1\nlocals()", id="locals-with-a-variable"),
        pytest.param("type(1)", id="type"),
        pytest.param("type(type(1))", id="type-of-type"),
        pytest.param("x = type(1)\nx('5')", id="type-as-constructor"),
        pytest.param("repr(GLOBAL_QUOTE)", id="repr-tool"),
        pytest.param("print(GLOBAL_QUOTE)\nGLOBAL_QUOTE", id="print-tool"),
        pytest.param("type(GLOBAL_QUOTE)", id="type-of-tool"),
        pytest.param("import sys\nsys.version", id="sys.version"),
        pytest.param("import os\nos.getcwd()", id="os.getcwd"),
    ],
)
def test_introspection_that_monty_allows_reveals_nothing_of_the_host(
    surface: Surface, upstream: SampleUpstream, code: str
) -> None:
    """Not refused, but harmless: no builtins, tool internals, host objects, paths or secrets come back."""
    answer = execute(surface, code)
    text = answer["content"][0]["text"]
    if not answer["isError"]:
        for leak in ("__builtins__", "__globals__", "_host_function", "call_tool", "progressive_mcp", "0x7f"):
            assert leak not in text, f"{leak!r} leaked: {text}"
        assert os.getcwd() not in text or os.getcwd() == "/", f"the host's working directory leaked: {text}"
    assert upstream.requests_snapshot() == []


# --------------------------------------------------------------------------------------------------
# The API key and the environment
# --------------------------------------------------------------------------------------------------


KEY_HUNTS = [
    pytest.param("import os\nos.getenv('ALPHAVANTAGE_API_KEY')", "runtime", ["os.getenv"], id="os.getenv"),
    pytest.param("import os\nos.environ['ALPHAVANTAGE_API_KEY']", "runtime", ["os.environ"], id="os.environ-key"),
    pytest.param("import os\ndict(os.environ)", "runtime", ["os.environ"], id="os.environ-all"),
    pytest.param(
        "import pathlib\npathlib.Path('/proc/self/environ').read_bytes()",
        "runtime",
        ["Path.read_bytes"],
        id="proc-self-environ",
    ),
    pytest.param("eval(\"open('/proc/self/environ')\")", "runtime", ["open"], id="eval-open-environ"),
    pytest.param(
        "exec(\"import os\\nprint(os.getenv('ALPHAVANTAGE_API_KEY'))\")", "runtime", ["os.getenv"], id="exec-getenv"
    ),
    pytest.param("GLOBAL_QUOTE.__closure__", "runtime", ["__closure__"], id="tool.__closure__"),
    pytest.param("GLOBAL_QUOTE.__defaults__", "runtime", ["__defaults__"], id="tool.__defaults__"),
    pytest.param("GLOBAL_QUOTE.__kwdefaults__", "runtime", ["__kwdefaults__"], id="tool.__kwdefaults__"),
    pytest.param("GLOBAL_QUOTE.__dict__", "runtime", ["__dict__"], id="tool.__dict__"),
    pytest.param("GLOBAL_QUOTE.__wrapped__", "type", ["__wrapped__"], id="tool.__wrapped__"),
]


@pytest.mark.parametrize(("code", "kind", "phrases"), KEY_HUNTS)
def test_the_key_and_environment_cannot_be_read(
    surface: Surface,
    upstream: SampleUpstream,
    monkeypatch: pytest.MonkeyPatch,
    code: str,
    kind: str,
    phrases: list[str],
) -> None:
    monkeypatch.setenv("ALPHAVANTAGE_API_KEY", KEY)  # as on a stdio server: the key is in the host's environment
    refused(execute(surface, code), kind, *phrases)
    assert upstream.requests_snapshot() == []


def test_sandbox_workers_do_not_inherit_the_hosts_environment(
    catalog: Catalog, upstream: SampleUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defence in depth: even a worker escape would not find the key in its environment (Linux: /proc)."""
    if not Path("/proc/self/environ").exists():
        pytest.skip("needs /proc")
    monkeypatch.setenv("ALPHAVANTAGE_API_KEY", KEY)
    pool = Sandbox()  # started now, with the key in the environment
    try:
        answer = execute(make_surface(catalog, upstream, pool), "1 + 1")
        assert answer["structuredContent"]["result"] == 2
        me, checked = os.getpid(), 0
        for entry in Path("/proc").iterdir():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                if parent != me:
                    continue
                environ = (entry / "environ").read_bytes()
            except (OSError, ValueError, IndexError):
                continue
            checked += 1
            assert KEY.encode() not in environ, f"worker {entry.name} holds the key in its environment"
        assert checked >= 1, "found no sandbox worker process to inspect"
    finally:
        pool.close()


@pytest.mark.parametrize(
    "code",
    [
        pytest.param('q = await GLOBAL_QUOTE(symbol="IBM")\nprint(q)\nq', id="uncaught"),
        pytest.param(
            'try:\n    q = await GLOBAL_QUOTE(symbol="IBM")\n'
            "except RuntimeError as e:\n    print(e)\n    q = str(e)\nq",
            id="caught-printed-returned",
        ),
        pytest.param(
            'try:\n    await GLOBAL_QUOTE(symbol="IBM")\nexcept RuntimeError as e:\n    raise ValueError(repr(e))',
            id="re-raised",
        ),
        pytest.param(
            'try:\n    await GLOBAL_QUOTE(symbol="IBM")\nexcept RuntimeError as e:\n'
            "    m = str(e)\n    [m.upper(), m.lower(), m[::-1], list(m)]",
            id="transformed",
        ),
    ],
)
def test_a_tool_answer_that_echoes_the_key_never_shows_it(
    surface: Surface, upstream: SampleUpstream, code: str
) -> None:
    """The rate-limit notice echoes the key: whatever the script does with it, the key stays out of the answer."""
    upstream.update_faults({"rate_limit": True})
    answer = execute(surface, code)
    text = answer["content"][0]["text"]
    assert "RateLimited" in text
    requests = upstream.requests_snapshot(unmasked=True)
    assert len(requests) == 1 and requests[0]["apikey"] == KEY  # the key went upstream, and only there
    reversed_key = KEY[::-1]
    assert reversed_key.casefold() not in text.casefold()


@pytest.mark.parametrize(
    "fault",
    [
        pytest.param({"invalid_key": True}, id="invalid-key"),
        pytest.param({"status": 500}, id="http-500"),
        pytest.param({"html": True}, id="html-page"),
        pytest.param({"malformed": True}, id="malformed-json"),
        pytest.param({"disconnect": True}, id="disconnect"),
        pytest.param({"empty": True}, id="empty-body"),
    ],
)
def test_upstream_failures_reach_the_script_without_the_key(
    surface: Surface, upstream: SampleUpstream, fault: dict[str, Any]
) -> None:
    upstream.update_faults(fault)
    code = (
        'try:\n    await GLOBAL_QUOTE(symbol="IBM")\n    r = "ok"\n'
        "except Exception as e:\n    print(repr(e))\n    r = str(e)\nr"
    )
    caught = execute(surface, code)  # the key check is in execute
    assert not caught["isError"] and caught["structuredContent"]["result"] != "ok"
    execute(surface, 'await GLOBAL_QUOTE(symbol="AAPL")')  # uncaught: the error answer


def test_a_refused_connection_does_not_leak_the_request_url(surface: Surface, upstream: SampleUpstream) -> None:
    upstream.refuse_connections()
    try:
        code = 'try:\n    await GLOBAL_QUOTE(symbol="IBM")\nexcept Exception as e:\n    r = repr(e)\nr'
        answer = execute(surface, code)
        assert "apikey=" not in answer["content"][0]["text"].replace("apikey=***", "")
        refused(execute(surface, 'await GLOBAL_QUOTE(symbol="IBM")'), "runtime", "RuntimeError")
    finally:
        upstream.accept_connections()


@pytest.mark.parametrize(
    "code",
    [
        pytest.param('await GLOBAL_QUOTE(symbol="I" * 100000)', id="huge-string"),
        pytest.param(
            'import json\nd = json.loads(\'{"symbol": "\' + "A" * 1000000 + \'"}\')\nawait GLOBAL_QUOTE(**d)',
            id="huge-string-untyped",
        ),
        pytest.param(
            'import json\nd = json.loads(\'{"symbol": ["IBM", "AAPL"]}\')\nawait GLOBAL_QUOTE(**d)',
            id="list-for-string",
        ),
        pytest.param(
            'import json\nd = json.loads(\'{"symbol": {"a": {"b": [1, 2, null]}}}\')\nawait GLOBAL_QUOTE(**d)',
            id="object-for-string",
        ),
        pytest.param(
            'import json\nd = json.loads(\'{"symbol": "IBM", "apikey": "stolen"}\')\nawait GLOBAL_QUOTE(**d)',
            id="apikey-argument",
        ),
        pytest.param(
            'import json\nd = json.loads(\'{"symbol": "IBM", "function": "OVERVIEW"}\')\nawait GLOBAL_QUOTE(**d)',
            id="function-argument",
        ),
        pytest.param(
            'import json\nd = json.loads(\'{"symbol": "IBM", "entitlement": "everything"}\')\nawait GLOBAL_QUOTE(**d)',
            id="bad-enum-untyped",
        ),
    ],
)
def test_weird_arguments_are_refused_by_the_host_before_any_request(
    surface: Surface, upstream: SampleUpstream, code: str
) -> None:
    """Arguments the type checker cannot see (built at run time) are refused by TOOL_CALL's checks: a
    ValueError naming InvalidArguments, no request, no key and no huge echo of the argument."""
    error = refused(execute(surface, code), "runtime", "ValueError", "InvalidArguments")
    assert len(error["message"]) < 2000, "the refusal echoes the whole argument"
    assert error["calls"][0]["error"] == "InvalidArguments"
    assert upstream.requests_snapshot() == []


def test_parameter_smuggling_in_a_value_stays_inside_that_value(surface: Surface, upstream: SampleUpstream) -> None:
    """A value holding `&apikey=...&function=...` is sent encoded: the upstream sees our key and one function."""
    code = 'await GLOBAL_QUOTE(symbol="IBM&apikey=stolen&function=OVERVIEW")'
    refused(execute(surface, code), "runtime", "UpstreamRejected")
    [request] = upstream.requests_snapshot(unmasked=True)
    assert request["function"] == "GLOBAL_QUOTE"
    assert request["apikey"] == KEY
    assert request["symbol"] == "IBM&apikey=stolen&function=OVERVIEW"


# --------------------------------------------------------------------------------------------------
# Exhaustion: time, memory, recursion, output
# --------------------------------------------------------------------------------------------------


@pytest.mark.timeout(20)
@pytest.mark.parametrize(
    "code",
    [
        pytest.param("while True:\n    pass", id="while-true"),
        pytest.param("x = 0\nwhile True:\n    x += 1", id="counting"),
        pytest.param("import time\nwhile True:\n    time.sleep(1)", id="sleep-loop"),
        pytest.param("import asyncio\nwhile True:\n    await asyncio.sleep(1)", id="async-sleep-loop"),
        pytest.param(
            "while True:\n    try:\n        while True:\n            pass\n    except Exception:\n        pass",
            id="catching-the-timeout",
        ),
    ],
)
def test_endless_scripts_stop_at_the_wall_time_limit(
    catalog: Catalog, upstream: SampleUpstream, sandbox: Sandbox, code: str
) -> None:
    surface = make_surface(catalog, upstream, sandbox, wall_s=1)
    refused(execute(surface, code), "limit", "wall_s", limit="wall_s")
    assert upstream.requests_snapshot() == []


@pytest.mark.timeout(20)
@pytest.mark.parametrize(
    "code",
    [
        pytest.param("import time\ntime.sleep(100)\n'woke'", id="time.sleep"),
        pytest.param("import asyncio\nawait asyncio.sleep(100)\n'woke'", id="asyncio.sleep"),
        pytest.param(
            "import asyncio\nawait asyncio.gather(*[asyncio.sleep(100) for _ in range(50)])\n'woke'", id="gather"
        ),
    ],
)
def test_a_long_sleep_cannot_hold_a_worker(
    catalog: Catalog, upstream: SampleUpstream, sandbox: Sandbox, code: str
) -> None:
    """Sleeps are zero-length in the sandbox (os_policy sleep="zero"): the script either ends at once or at the
    wall-time limit, never after 100 seconds (the timeout mark is the hang guard)."""
    surface = make_surface(catalog, upstream, sandbox, wall_s=1)
    answer = execute(surface, code)
    if answer["isError"]:
        refused(answer, "limit", limit="wall_s")
    else:
        assert answer["structuredContent"]["result"] == "woke"
    assert upstream.requests_snapshot() == []


@pytest.mark.parametrize(
    "code",
    [
        pytest.param('"x" * 10**10', id="string-multiply"),
        pytest.param("x = [0] * (10**9)", id="list-multiply"),
        pytest.param('x = ["a"]\nwhile True:\n    x = x + x', id="list-doubling"),
        pytest.param('s = "ab"\nwhile True:\n    s = s + s', id="string-doubling"),
        pytest.param("x = []\nwhile True:\n    x.append(list(range(1000)))", id="append-forever"),
        pytest.param("d = {}\ni = 0\nwhile True:\n    d[i] = str(i) * 100\n    i += 1", id="dict-growth"),
        pytest.param("2 ** 10**9", id="big-int"),
        pytest.param('"a".join(["b"] * 10**8)', id="join"),
    ],
)
def test_memory_bombs_stop_at_the_memory_limit(surface: Surface, upstream: SampleUpstream, code: str) -> None:
    refused(execute(surface, code), "limit", "memory_mb", limit="memory_mb")
    assert upstream.requests_snapshot() == []


@pytest.mark.parametrize(
    "code",
    [
        pytest.param("def f(n):\n    return f(n + 1)\nf(0)", id="direct"),
        pytest.param("def a(n):\n    return b(n)\ndef b(n):\n    return a(n + 1)\na(0)", id="mutual"),
        pytest.param("f = lambda n: f(n + 1)\nf(0)", id="lambda"),
    ],
)
def test_recursion_bombs_stop_at_the_recursion_limit(surface: Surface, upstream: SampleUpstream, code: str) -> None:
    """kind "limit", so `limit` must name it (today the error has kind limit and no `limit` field)."""
    refused(execute(surface, code), "limit", "RecursionError", "recursion")
    assert upstream.requests_snapshot() == []


@pytest.mark.parametrize(
    "code",
    [
        pytest.param("import json\njson.loads('[' * 100000 + ']' * 100000)", id="json-nesting"),
        pytest.param("eval('(' * 5000 + '1' + ')' * 5000)", id="eval-nesting"),
        pytest.param("x = " + "(" * 5000 + "1" + ")" * 5000, id="parser-nesting"),
        pytest.param("x = " + "-" * 15000 + "1", id="unary-chain"),
    ],
)
def test_nesting_bombs_are_refused_without_crashing_a_worker(
    surface: Surface, upstream: SampleUpstream, code: str
) -> None:
    answer = execute(surface, code)
    assert answer["isError"] is True
    assert answer["structuredContent"]["error"]["kind"] in ("syntax", "runtime")
    assert upstream.requests_snapshot() == []


@pytest.mark.timeout(20)
@pytest.mark.parametrize(
    "code",
    [
        pytest.param('for i in range(100000):\n    print("x" * 100)', id="bounded"),
        pytest.param('while True:\n    print("flood " * 100)', id="endless"),
    ],
)
def test_a_print_flood_stops_at_the_output_limit(surface: Surface, upstream: SampleUpstream, code: str) -> None:
    error = refused(execute(surface, code), "limit", "max_printed_bytes", limit="max_printed_bytes")
    assert len(error.get("printed", "")) <= 4000
    assert upstream.requests_snapshot() == []


def test_a_print_flood_makes_no_tool_call_after_the_limit(surface: Surface, upstream: SampleUpstream) -> None:
    code = (
        'for i in range(20000):\n    print("x" * 100)\n'
        'for s in ["IBM", "AAPL", "MSFT"]:\n    await GLOBAL_QUOTE(symbol=s)'
    )
    answer = execute(surface, code)
    requests = requests_after_settling(upstream)
    refused(answer, "limit", limit="max_printed_bytes")
    assert requests == []


@pytest.mark.parametrize(
    "code",
    [
        pytest.param("list(range(200000))", id="long-list-of-ints"),
        pytest.param("[str(i) for i in range(50000)]", id="long-list-of-strings"),
        pytest.param("[[i, i] for i in range(50000)]", id="list-of-pairs"),
        pytest.param('{str(i): "v" * 50 for i in range(100000)}', id="big-dict"),
        pytest.param('"z" * 1000000', id="long-string"),
        pytest.param('for i in range(5000):\n    print("y" * 100)', id="printed-under-the-limit"),
        pytest.param('print("p" * 500000)\n["r" * 100] * 5000', id="printed-and-result"),
    ],
)
def test_a_huge_answer_is_cut_to_the_token_budget(
    unhurried_surface: Surface, upstream: SampleUpstream, code: str
) -> None:
    answer = execute(unhurried_surface, code)
    assert answer["isError"] is False
    structured = answer["structuredContent"]
    assert "truncated" in structured and "budget" in structured["truncated"]["note"], structured.get("truncated")
    assert_within_budget(answer)


@pytest.mark.parametrize(
    "code",
    [
        pytest.param('raise ValueError("x" * 1000000)', id="raise"),
        pytest.param('assert False, "z" * 1000000', id="assert"),
        pytest.param('x = ["a"] * 100000\nraise ValueError(str(x))', id="raise-repr"),
        pytest.param('d = {"k": 1}\nd["k" * 300000]', id="key-error"),
    ],
)
def test_a_huge_error_message_is_cut_to_the_token_budget(
    unhurried_surface: Surface, upstream: SampleUpstream, code: str
) -> None:
    """An uncaught exception's message is the script's to choose: it must not blow the answer's budget."""
    answer = execute(unhurried_surface, code)
    assert answer["isError"] is True
    assert "limit" not in answer["structuredContent"]["error"], answer["structuredContent"]["error"]  # the script's
    assert_within_budget(answer)


@pytest.mark.parametrize(
    "code",
    [
        pytest.param("x = []\nfor i in range(5000):\n    x = [x]\nx", id="lists"),
        pytest.param('x = {}\nfor i in range(100000):\n    x = {"a": x}\nx', id="dicts"),
        pytest.param('x = ()\nfor i in range(10000):\n    x = (x, "t")\nx', id="tuples"),
        pytest.param('x = []\nfor i in range(3000):\n    x = [x]\nprint(x)\n"done"', id="printed"),
    ],
)
def test_a_deeply_nested_result_comes_back_as_bounded_json(
    unhurried_surface: Surface, upstream: SampleUpstream, code: str
) -> None:
    answer = execute(unhurried_surface, code)  # parses the text: the nesting was cut to something JSON can carry
    assert answer["isError"] is False
    assert_within_budget(answer)


# --------------------------------------------------------------------------------------------------
# Amplification: a value the sandbox holds small (its parts shared) that the host would copy in full
# --------------------------------------------------------------------------------------------------


def nested(levels: int, leaf: str = "1") -> str:
    """A script line building `[...[leaf]*10...]*10`: 10**levels leaves, a few hundred bytes in the sandbox."""
    return f"x = {leaf}\nfor i in range({levels}):\n    x = [x] * 10\n"


# Each is small in the sandbox (8 MB here) and many times that once every shared part is copied out.
SHARED_RESULTS = [
    pytest.param(nested(6) + "x", id="nested-lists"),
    pytest.param('s = "a" * 1000000\n[s] * 20', id="shared-string"),
    pytest.param("n = 10 ** 4000\n[n] * 3000", id="shared-big-int"),
    pytest.param(
        'x = {"k": "v" * 1000}\nfor i in range(4):\n    x = {str(j): x for j in range(10)}\nx', id="shared-dicts"
    ),
    pytest.param("t = (1,)\nfor i in range(6):\n    t = (t,) * 10\n{t: 1}", id="shared-tuple-key"),
    pytest.param(
        "from dataclasses import dataclass\n@dataclass\nclass P:\n    a: list\n" + nested(6) + "P(a=x)",
        id="dataclass-field",
    ),
    pytest.param(nested(6) + "{'a': x, 'b': x}", id="two-names"),
]


@pytest.mark.parametrize("code", SHARED_RESULTS)
def test_a_result_larger_than_the_memory_limit_once_copied_is_refused(
    catalog: Catalog, upstream: SampleUpstream, sandbox: Sandbox, code: str
) -> None:
    """Issue 27, finding 1: the host counts every place a shared part appears, against the sandbox's own limit."""
    surface = make_surface(catalog, upstream, sandbox, memory_mb=8)
    error = refused(execute(surface, code), "limit", "8 MB", "memory_mb", "copied", limit="memory_mb")
    assert "return less" in error["message"]
    assert upstream.requests_snapshot() == []


@pytest.mark.timeout(60)
@pytest.mark.parametrize("levels", [8, 9])
def test_the_reported_amplification_scripts_fail_with_the_default_limits(
    catalog: Catalog, upstream: SampleUpstream, sandbox: Sandbox, levels: int
) -> None:
    """The script of the report (10**8 elements) and a 10**9 variant, at the default 64 MB: refused, not copied."""
    surface = make_surface(catalog, upstream, sandbox, memory_mb=64, wall_s=20)
    refused(execute(surface, nested(levels) + "x"), "limit", "64 MB", "memory_mb", limit="memory_mb")


def test_an_integer_too_long_for_json_comes_back_as_text(surface: Surface, upstream: SampleUpstream) -> None:
    """Python writes no int of over 4,300 digits as text: such a result is described, not a server failure."""
    answer = execute(surface, "[10 ** 5000, 10 ** 40]")
    assert answer["isError"] is False, answer["structuredContent"]
    assert answer["structuredContent"]["result"] == ["<an integer of about 5,000 digits>", 10**40]


@pytest.mark.parametrize(
    "code",
    [
        pytest.param(nested(6) + 'await OVERVIEW(symbol=eval("x"))', id="eval-side-steps-the-checker"),
        pytest.param(nested(9) + 'await OVERVIEW(symbol=eval("x"))', id="10**9-elements"),
        pytest.param(nested(6) + 'args = {"symbol": x}\nawait GLOBAL_QUOTE(**eval("args"))', id="double-star"),
        pytest.param(
            's = "a" * 1000000\nawait GLOBAL_QUOTE(symbol="IBM", **eval(\'{"x" + str(i): s for i in range(4)}\'))',
            id="shared-string-arguments",
        ),
    ],
)
def test_tool_arguments_larger_than_their_limit_once_copied_are_refused(
    surface: Surface, upstream: SampleUpstream, code: str
) -> None:
    """The same through a tool call's keyword arguments: refused before any check or request."""
    error = refused(execute(surface, code), "limit", "max_argument_bytes", limit="max_argument_bytes")
    assert error["line"] == code.count("\n") + 1
    assert requests_after_settling(upstream, 0.05) == []


# --------------------------------------------------------------------------------------------------
# Tool calls: names, arguments, await, the call limit and the wall time with calls
# --------------------------------------------------------------------------------------------------


CALL_MISTAKES = [
    pytest.param('await NOT_A_TOOL(symbol="IBM")', ["NOT_A_TOOL"], id="unknown-name"),
    pytest.param('await TOOL_CALL(tool_name="GLOBAL_QUOTE")', ["TOOL_CALL"], id="meta-tool-name"),
    pytest.param('await GLOBAL_QUOTE("IBM")', ["GLOBAL_QUOTE", "positional"], id="positional"),
    pytest.param('await GLOBAL_QUOTE(symbol="IBM", colour="red")', ["colour"], id="unknown-argument"),
    pytest.param('await GLOBAL_QUOTE(symbol="IBM", apikey="stolen")', ["apikey"], id="apikey-argument"),
    pytest.param("await GLOBAL_QUOTE()", ["symbol"], id="missing-argument"),
    pytest.param("await GLOBAL_QUOTE(symbol=123)", ["GLOBAL_QUOTE", "str", "123"], id="wrong-type"),
    pytest.param("await GLOBAL_QUOTE(symbol=None)", ["str"], id="none-for-string"),
    pytest.param(
        'q = await GLOBAL_QUOTE(symbol="IBM")\nq["Global Quote"]["99. secret"]', ["99. secret"], id="wrong-answer-key"
    ),
    pytest.param(
        'await TIME_SERIES_DAILY(symbol="IBM", outputsize="everything")', ["compact", "everything"], id="wrong-enum"
    ),
]


@pytest.mark.parametrize(("code", "phrases"), CALL_MISTAKES)
def test_wrong_tool_calls_are_refused_by_the_type_checker_before_running(
    surface: Surface, upstream: SampleUpstream, code: str, phrases: list[str]
) -> None:
    error = refused(execute(surface, code), "type", *phrases)
    assert error.get("line") == code.count("\n") + 1
    assert requests_after_settling(upstream, 0.05) == []


@pytest.mark.parametrize(
    ("code", "phrases"),
    [
        pytest.param(
            'import json\na = json.loads(\'["IBM"]\')\nawait GLOBAL_QUOTE(*a, symbol="IBM")',
            ["TypeError", "keyword arguments only"],
            id="positional-untyped",
        ),
        pytest.param('await eval("NOT_" + "A_TOOL")(symbol="IBM")', ["NameError", "NOT_A_TOOL"], id="dynamic-name"),
        pytest.param('await eval("OVER" + "VIEW")(symbol="IBM")', ["NameError", "OVERVIEW"], id="dynamic-tool-name"),
    ],
)
def test_calls_the_checker_cannot_see_are_refused_at_run_time(
    surface: Surface, upstream: SampleUpstream, code: str, phrases: list[str]
) -> None:
    refused(execute(surface, code), "runtime", *phrases)
    assert requests_after_settling(upstream, 0.05) == []


@pytest.mark.parametrize(
    "code",
    [
        pytest.param('q = GLOBAL_QUOTE(symbol="IBM")\nq["Global Quote"]', id="subscripted"),
        pytest.param('GLOBAL_QUOTE(symbol="IBM")', id="as-the-result"),
        pytest.param('GLOBAL_QUOTE(symbol="IBM")\n"done"', id="as-a-statement"),
        pytest.param('q = GLOBAL_QUOTE(symbol="IBM")\nprint(q)', id="printed"),
        pytest.param(
            'for s in ["IBM", "AAPL", "MSFT"]:\n    GLOBAL_QUOTE(symbol=s)\n"fired"', id="fire-and-forget-loop"
        ),
    ],
)
def test_a_tool_call_without_await_is_refused_before_running(
    surface: Surface, upstream: SampleUpstream, code: str
) -> None:
    """A tool call without `await` costs no upstream request and is refused with its line: by the checker when the
    coroutine is used as data, otherwise when the script ends (a call is sent only when it is awaited)."""
    answer = execute(surface, code)
    requests = requests_after_settling(upstream)  # first: a call left running must not land in the next test
    assert answer["isError"] is True, answer["structuredContent"]
    error = answer["structuredContent"]["error"]
    assert error["kind"] in ("type", "runtime"), error
    assert error.get("line") is not None
    assert "await" in error["message"].lower() or "coroutine" in error["message"].lower(), error
    assert requests == []


@pytest.mark.parametrize(
    "code",
    [
        pytest.param(
            'for s in ["IBM", "AAPL", "MSFT", "NVDA", "TSLA", "SPY", "AMZN", "GOOGL", "IBM", "AAPL"]:\n'
            "    await GLOBAL_QUOTE(symbol=s)",
            id="sequential",
        ),
        pytest.param(
            "import asyncio\n"
            "await asyncio.gather(*[GLOBAL_QUOTE(symbol=s) for s in "
            '["IBM", "AAPL", "MSFT", "NVDA", "TSLA", "SPY", "AMZN", "GOOGL", "IBM", "AAPL"]])',
            id="gathered",
        ),
        pytest.param(
            'n = 0\nwhile True:\n    try:\n        await GLOBAL_QUOTE(symbol="IBM")\n'
            "    except Exception:\n        pass\n    n += 1",
            id="catching-the-limit",
        ),
    ],
)
def test_more_calls_than_the_limit_stop_at_max_calls(
    catalog: Catalog, upstream: SampleUpstream, sandbox: Sandbox, code: str
) -> None:
    surface = make_surface(catalog, upstream, sandbox, max_calls=3)
    answer = execute(surface, code)
    requests = requests_after_settling(upstream)
    error = refused(answer, "limit", "max_calls", limit="max_calls")
    assert len(error["calls"]) == 3
    # Sequential calls were sent; gathered ones are sent when awaited, and the script stopped before that.
    sent = [c for c in error["calls"] if c.get("error") != "NotSent" and not c["cached"]]
    assert len(requests) == len(sent) <= 3


@pytest.mark.timeout(20)
@pytest.mark.parametrize(
    "code",
    [
        pytest.param('await GLOBAL_QUOTE(symbol="IBM")', id="one-call"),
        pytest.param(
            'try:\n    q = await GLOBAL_QUOTE(symbol="IBM")\nexcept Exception as e:\n    q = str(e)\nq', id="caught"
        ),
        pytest.param(
            'import asyncio\nawait asyncio.gather(GLOBAL_QUOTE(symbol="IBM"), GLOBAL_QUOTE(symbol="AAPL"))',
            id="gathered",
        ),
        pytest.param(
            'while True:\n    try:\n        await GLOBAL_QUOTE(symbol="IBM")\n    except Exception:\n        pass',
            id="retrying",
        ),
    ],
)
def test_the_wall_time_limit_counts_tool_calls(
    catalog: Catalog, upstream: SampleUpstream, sandbox: Sandbox, code: str
) -> None:
    upstream.update_faults({"delay_s": 5})
    surface = make_surface(catalog, upstream, sandbox, wall_s=1)
    refused(execute(surface, code), "limit", "wall_s", limit="wall_s")


# --------------------------------------------------------------------------------------------------
# Passthrough: concurrent callers with their own keys
# --------------------------------------------------------------------------------------------------

FREE_KEY = "FreeCaller-A-5521"
PREMIUM_KEY = "premiumCaller-B-7734"  # the sample upstream grants premium functions to keys starting "premium"

CALLER_SCRIPT = """import asyncio
quotes = await asyncio.gather({calls})
try:
    adjusted = await TIME_SERIES_DAILY_ADJUSTED(symbol="MSFT")
    premium = "data" if len(adjusted) > 0 else "empty"
except RuntimeError as e:
    premium = "refused: " + str(e)
{{"prices": [q["Global Quote"]["05. price"] for q in quotes], "premium": premium}}
"""


@pytest.mark.timeout(40)
def test_concurrent_callers_each_use_only_their_own_key_and_cache(surface: Surface, upstream: SampleUpstream) -> None:
    upstream.update_faults({"delay_s": 0.3})  # so the two callers' scripts overlap
    scripts = {
        FREE_KEY: CALLER_SCRIPT.format(calls=", ".join(f'GLOBAL_QUOTE(symbol="{s}")' for s in ("IBM", "AAPL", "SPY"))),
        PREMIUM_KEY: CALLER_SCRIPT.format(
            calls=", ".join(f'GLOBAL_QUOTE(symbol="{s}")' for s in ("NVDA", "TSLA", "SPY"))
        ),
    }
    answers: dict[tuple[int, str], dict[str, Any]] = {}
    failures: list[BaseException] = []
    for round_ in (1, 2):
        barrier = threading.Barrier(2)

        def caller(key: str, round_: int = round_, barrier: threading.Barrier = barrier) -> None:
            try:
                barrier.wait(timeout=10)
                answers[round_, key] = execute(surface, scripts[key], key=key)
            except BaseException as exc:  # reported below, on the test's thread
                failures.append(exc)

        threads = [threading.Thread(target=caller, args=(key,)) for key in scripts]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert not failures, failures

    for (_, key), answer in answers.items():
        other = PREMIUM_KEY if key == FREE_KEY else FREE_KEY
        assert not holds_key(json.dumps(answer), other), "a caller saw the other caller's key"
        assert answer["isError"] is False, answer
    for round_ in (1, 2):
        free, premium = (
            answers[round_, FREE_KEY]["structuredContent"],
            answers[round_, PREMIUM_KEY]["structuredContent"],
        )
        assert premium["result"]["premium"] == "data"
        # The premium caller's answer (cached after round 1) is never served to the free caller.
        assert free["result"]["premium"].startswith("refused: PremiumRequired"), free["result"]
        assert free["result"]["prices"] != premium["result"]["prices"]

    requests = upstream.requests_snapshot(unmasked=True)
    owner = {"IBM": FREE_KEY, "AAPL": FREE_KEY, "NVDA": PREMIUM_KEY, "TSLA": PREMIUM_KEY}
    for request in requests:
        assert request["apikey"] in (FREE_KEY, PREMIUM_KEY)
        if request.get("symbol") in owner:
            assert request["apikey"] == owner[request["symbol"]], request
    spy = sorted(r["apikey"] for r in requests if r.get("symbol") == "SPY")
    assert spy == sorted([FREE_KEY, PREMIUM_KEY]), "each caller fetches SPY once, into its own cache partition"
    adjusted = [r["apikey"] for r in requests if r["function"] == "TIME_SERIES_DAILY_ADJUSTED"]
    assert adjusted.count(PREMIUM_KEY) == 1  # round 2 from the premium caller's own cache entry
    assert adjusted.count(FREE_KEY) == 2  # the free caller asks again: no one else's entry serves it
    assert sum(1 for r in requests if r.get("symbol") == "IBM") == 1


# --------------------------------------------------------------------------------------------------
# The host: no writes, environment and working directory unchanged
# --------------------------------------------------------------------------------------------------


def test_scripts_cannot_change_the_host(surface: Surface, upstream: SampleUpstream, tmp_path: Path) -> None:
    target = tmp_path / "pwned.txt"
    environ_before, cwd_before = dict(os.environ), os.getcwd()
    attacks = [
        (f"import pathlib\npathlib.Path({str(target)!r}).write_text('x')", "Path.write_text"),
        (f"import pathlib\npathlib.Path({str(target)!r}).write_bytes(b'x')", "Path.write_bytes"),
        (f"import pathlib\npathlib.Path({str(tmp_path / 'dir')!r}).mkdir()", "Path.mkdir"),
        (f"import pathlib\npathlib.Path({str(tmp_path)!r}).rmdir()", "Path.rmdir"),
        (f"eval(\"open({str(target)!r}, 'w')\")", "open"),
        (f"exec(\"import pathlib\\npathlib.Path({str(target)!r}).write_text('x')\")", "Path.write_text"),
        ("import os\nos.environ['SCRIPT_PWNED'] = '1'", "os.environ"),
        ("import os\nos.chdir('/tmp')", "PermissionError"),
    ]
    for code, phrase in attacks:
        refused(execute(surface, code), "runtime", phrase)
    assert list(tmp_path.iterdir()) == []
    assert dict(os.environ) == environ_before
    assert os.getcwd() == cwd_before
    assert upstream.requests_snapshot() == []


# --------------------------------------------------------------------------------------------------
# Recovery: the pool still serves normal scripts
# --------------------------------------------------------------------------------------------------


@pytest.mark.timeout(40)
def test_more_endless_scripts_than_workers_all_stop_and_the_pool_recovers(
    catalog: Catalog, upstream: SampleUpstream, sandbox: Sandbox
) -> None:
    surface = make_surface(catalog, upstream, sandbox, wall_s=1)
    answers: list[dict[str, Any]] = []
    threads = [
        threading.Thread(target=lambda: answers.append(execute(surface, "while True:\n    pass"))) for _ in range(6)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=35)
    assert len(answers) == 6
    # One caller with the whole pool (no caller id: a single-user process): four run to their limit; the two left
    # waiting for a worker are refused as busy once their own deadline passes, never later.
    kinds = sorted(answer["structuredContent"]["error"]["kind"] for answer in answers)
    assert kinds.count("limit") >= 4 and set(kinds) <= {"limit", "busy"}, kinds
    for answer in answers:
        error = answer["structuredContent"]["error"]
        if error["kind"] == "busy":
            assert error["message"].startswith("busy: ") and error["retry_after_s"] >= 1
        else:
            refused(answer, "limit", limit="wall_s")
    normal = execute(surface, 'q = await GLOBAL_QUOTE(symbol="IBM")\nq["Global Quote"]["05. price"]')
    assert normal["isError"] is False and normal["structuredContent"]["result"] == "245.0000"


@pytest.mark.timeout(30)
def test_after_every_attack_a_normal_script_still_works(surface: Surface, upstream: SampleUpstream) -> None:
    """Runs last in this file, on the pool every attack above used; its own attacks make it stand alone too."""
    for attack in ('"x" * 10**10', "def f(n):\n    return f(n + 1)\nf(0)", "import subprocess"):
        assert execute(surface, attack)["isError"] is True
    code = (
        "import asyncio\n"
        'symbols = ["IBM", "AAPL", "MSFT"]\n'
        "quotes = await asyncio.gather(*[GLOBAL_QUOTE(symbol=s) for s in symbols])\n"
        'print("fetched", len(quotes))\n'
        '{s: q["Global Quote"]["05. price"] for s, q in zip(symbols, quotes)}'
    )
    answer = execute(surface, code)
    assert answer["isError"] is False, answer
    structured = answer["structuredContent"]
    assert structured["result"]["IBM"] == "245.0000"
    assert structured["printed"] == "fetched 3\n"
    assert [c["tool"] for c in structured["calls"]] == ["GLOBAL_QUOTE"] * 3
    assert len(upstream.requests_snapshot()) == 3
