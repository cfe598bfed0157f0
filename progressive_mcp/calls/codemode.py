"""Code mode's TOOL_EXECUTE: run an agent's script against the catalog's tools and answer with what it made.

A script is plain Python (Monty's subset) with top-level `await`: each catalog tool is an async function
declared by the stubs that `TOOL_GET {format: "python"}` shows. It is type-checked against those stubs,
then run in the sandbox; every tool call it makes goes through the same path as TOOL_CALL (argument
checks, response cache, upstream client, error classification), with the caller's key, which never
enters the sandbox. The answer is the value of the script's last expression, what it printed, and
the calls it made. Example::

    code_mode.execute({"code": 'q = await GLOBAL_QUOTE(symbol="IBM")\\nq["Global Quote"]["05. price"]'}, call)
    # {'result': '245.0000', 'printed': '', 'calls': [{'tool': 'GLOBAL_QUOTE', 'ms': 3.1, 'cached': False}]}
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from progressive_mcp.calls.sandbox import Sandbox, ScriptLimits, ToolCallFailed
from progressive_mcp.calls.shaping import shape_script_answer
from progressive_mcp.calls.stubs import clashing_names, python_names, tool_stubs
from progressive_mcp.catalog import CatalogTool
from progressive_mcp.errors import InvalidArguments, ToolError, UnknownTool, UpstreamTimeout
from progressive_mcp.redaction import Secrets

TOOL_EXECUTE = "TOOL_EXECUTE"
MAX_CODE_CHARS = 20_000  # a script that calls a few tools and computes an answer is a few hundred
MAX_STUB_SETS = 256  # stub modules kept, by the tools a script names
EXECUTE_HINT = (
    "Run a Python script that awaits tools as async functions (see TOOL_GET); returns its last value and prints."
)
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# (tool, keyword arguments, deadline) -> (data, from the cache?); raises ToolError like TOOL_CALL.
CallTool = Callable[[CatalogTool, dict[str, Any], float], tuple[Any, bool]]


def execute_definition() -> dict[str, Any]:
    """TOOL_EXECUTE's MCP definition (wire shape)."""
    return {
        "name": TOOL_EXECUTE,
        "title": "Run a script",
        "description": EXECUTE_HINT,
        "inputSchema": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
        "outputSchema": {"type": "object", "properties": {"result": {}, "printed": {"type": "string"}}},
    }


@dataclass
class CodeMode:
    """TOOL_EXECUTE over a set of tools: their stubs, the sandbox, the limits and the answer's token budget."""

    tools: tuple[CatalogTool, ...]
    sandbox: Sandbox
    limits: ScriptLimits
    budget_tokens: int
    # Tool name → function name (`python_names` over every tool a script may see; default: over `tools`), the
    # very names TOOL_GET's stubs show.
    names: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        self._names = dict(self.names) if self.names is not None else python_names(t.name for t in self.tools)
        self._by_python_name = {self._names[t.name]: t for t in self.tools}
        self._clashes = clashing_names({t.name: self._names[t.name] for t in self.tools})
        self._stubs: dict[tuple[str, ...], str] = {}

    def _stubs_for(self, tools: list[CatalogTool]) -> str:
        """The stub module a script is checked against: the tools it names (the others would only cost time)."""
        key = tuple(t.name for t in tools)
        stubs = self._stubs.get(key)
        if stubs is None:
            if len(self._stubs) >= MAX_STUB_SETS:
                self._stubs.clear()
            stubs = self._stubs[key] = tool_stubs(tools, self._names)
        return stubs

    def execute(
        self,
        args: dict[str, Any],
        call_tool: CallTool,
        deadline: float | None,
        *,
        caller: str | None = None,
        address: str | None = None,
        secrets: Secrets | None = None,
        withheld: Mapping[str, ToolError] | None = None,
    ) -> dict[str, Any]:
        """Run `args["code"]` for `caller` from `address` (their share of the sandbox: see Sandbox.run); raises
        ToolError (InvalidArguments, or ScriptError for a script that failed or found no worker). The answer has
        `secrets` masked before it is cut to the budget (a script may put pieces of one together). `withheld`:
        function name → the error a script that names that tool gets instead of running (a gateway tool withheld
        until approved: the script would otherwise meet a bare NameError)."""
        extra = sorted(set(args) - {"code"})
        code = args.get("code")
        if extra or not isinstance(code, str) or not code.strip():
            problem = f"unknown argument(s) {', '.join(extra)}" if extra else "code must be a non-empty Python script"
            raise InvalidArguments(TOOL_EXECUTE, [problem], execute_definition()["inputSchema"])
        if len(code) > MAX_CODE_CHARS:
            problem = f"the script is {len(code):,} characters; the limit is {MAX_CODE_CHARS:,}"
            raise InvalidArguments(TOOL_EXECUTE, [problem], execute_definition()["inputSchema"])
        identifiers = list(dict.fromkeys(_IDENTIFIER.findall(code)))
        clashes = [n for n in identifiers if n in self._clashes and n not in self._by_python_name]
        if clashes:  # refused before it runs: the name is several tools', and none of them has it
            problems = [
                f"{name} is the Python name of several tools, so none has it: "
                + ", ".join(f"{tool} is {self._names[tool]}()" for tool in self._clashes[name])
                for name in clashes
            ]
            raise InvalidArguments(TOOL_EXECUTE, problems, execute_definition()["inputSchema"])
        held = [n for n in identifiers if withheld and n in withheld and n not in self._by_python_name]
        if held:
            assert withheld is not None
            raise withheld[held[0]]
        used = [self._by_python_name[n] for n in identifiers if n in self._by_python_name]
        functions = {self._names[t.name]: _host_function(t, call_tool) for t in used}
        outcome = self.sandbox.run(
            code, self._stubs_for(used), functions, self.limits, deadline=deadline, caller=caller, address=address
        )
        answer = {"result": outcome.result, "printed": outcome.printed, "calls": [c.as_json() for c in outcome.calls]}
        if secrets:
            answer, _ = secrets.scrub(answer)
        return shape_script_answer(answer, self.budget_tokens)


def _host_function(tool: CatalogTool, call_tool: CallTool) -> Callable[[dict[str, Any], float], tuple[Any, bool]]:
    def call(arguments: dict[str, Any], deadline: float) -> tuple[Any, bool]:
        try:
            return call_tool(tool, arguments, deadline)
        except ToolError as exc:
            raise ToolCallFailed(_builtin_for(exc), type(exc).__name__, f"{type(exc).__name__}: {exc}") from None

    return call


def _builtin_for(exc: ToolError) -> str:
    """The builtin exception a script sees for one of our errors (its message names ours)."""
    if isinstance(exc, InvalidArguments):
        return "ValueError"
    if isinstance(exc, UnknownTool):
        return "NameError"
    if isinstance(exc, UpstreamTimeout):
        return "TimeoutError"
    return "RuntimeError"
