"""Running an agent's script in the pydantic-monty sandbox, with catalog tools as its only way out.

The script is type-checked against the tools' stubs before anything runs, then executed by a Monty
worker process: no filesystem, network, environment or imports beyond Monty's own safe modules. Each
tool call suspends the script and comes to the host as a snapshot; the host runs it (on a thread, so
calls a script gathers run at once) through a function it was given, and hands back the data or an
exception. Limits: wall time, sandbox memory, tool calls and printed output. Example::

    sandbox = Sandbox()
    outcome = sandbox.run('q = await QUOTE(symbol="IBM")\\nq["price"]', stubs, {"QUOTE": quote}, ScriptLimits())
    outcome.result, outcome.printed, outcome.calls

The pydantic_monty module is imported on the first script, so a process that never runs one pays
nothing for it (the Lambda cold start).
"""

from __future__ import annotations

import atexit
import concurrent.futures
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from progressive_mcp.calls.boundary import ValueTooLarge, plain_copy
from progressive_mcp.calls.fairness import SandboxBusy, WorkerShares
from progressive_mcp.errors import ToolError

# The defaults of the limits (each configurable, see ScriptLimits).
DEFAULT_WALL_S = 20.0
DEFAULT_MEMORY_MB = 64
DEFAULT_MAX_CALLS = 50
DEFAULT_MAX_PRINTED_BYTES = 1024 * 1024  # collected; what comes back is also cut to the token budget
# One tool call's arguments as the host copies them out of the sandbox: what a TOOL_CALL request may carry (the
# default PMCP_MAX_BODY_BYTES), so a script's call is no bigger than a client's.
DEFAULT_MAX_ARGUMENT_BYTES = 1024 * 1024
MAX_CONCURRENT_CALLS = 8  # tool calls of one script in flight at once
POOL_WORKERS = 4  # Monty worker processes kept for scripts (each checkout takes one; see WorkerShares for who may)
MAX_RECURSION_DEPTH = 200  # ample for a script's own helpers; a runaway recursion stops early
MAX_MESSAGE_CHARS = 2_000  # an error message that quotes a huge value is cut (what comes back has a budget)

# (keyword arguments, deadline) -> (data, whether it came from the cache); raises ToolCallFailed.
ToolFunction = Callable[[dict[str, Any], float], tuple[Any, bool]]


@dataclass(frozen=True)
class ScriptLimits:
    """What one script may use. `wall_s` is cut further by the request's own deadline."""

    wall_s: float = DEFAULT_WALL_S
    memory_mb: int = DEFAULT_MEMORY_MB
    max_calls: int = DEFAULT_MAX_CALLS
    max_printed_bytes: int = DEFAULT_MAX_PRINTED_BYTES
    max_argument_bytes: int = DEFAULT_MAX_ARGUMENT_BYTES


@dataclass
class CallLog:
    """One tool call a script made: which, how long, whether from the cache, and the error type if it failed."""

    tool: str
    ms: float = 0.0
    cached: bool = False
    error: str | None = None

    def as_json(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"tool": self.tool, "ms": round(self.ms), "cached": self.cached}
        if self.error is not None:
            entry["error"] = self.error
        return entry


@dataclass
class ScriptOutcome:
    """What a script that ran to the end gave: its last expression's value, what it printed, its calls."""

    result: Any
    printed: str
    calls: list[CallLog] = field(default_factory=list)


class ScriptError(ToolError):
    """A script that could not run or did not finish: `kind` is syntax, type, runtime or limit, or busy (no worker
    for it now: `retry_after_s` says when to try again)."""

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        line: int | None = None,
        column: int | None = None,
        printed: str = "",
        calls: list[CallLog] | None = None,
        limit: str | None = None,
        retry_after_s: int | None = None,
    ) -> None:
        self.kind = kind
        self.line = line
        self.column = column
        self.printed = printed
        self.calls = calls or []
        self.limit = limit
        self.retry_after_s = retry_after_s
        super().__init__(message)

    def details(self) -> dict[str, Any]:
        fields: dict[str, Any] = {"kind": self.kind}
        if self.line is not None:
            fields["line"] = self.line
        if self.column is not None:
            fields["column"] = self.column
        if self.limit is not None:
            fields["limit"] = self.limit
        if self.retry_after_s is not None:
            fields["retry_after_s"] = self.retry_after_s
        if self.printed:
            fields["printed"] = self.printed[-4000:]
        if self.calls:
            fields["calls"] = [c.as_json() for c in self.calls]
        return fields


class ToolCallFailed(Exception):
    """Raised by a tool function to fail the script's call: the script gets `exc_type` (a builtin exception
    name, "RuntimeError") with the message; `error_type` (our error's class name) goes in the call log."""

    def __init__(self, exc_type: str, error_type: str, message: str) -> None:
        self.exc_type = exc_type
        self.error_type = error_type
        super().__init__(message)


class Sandbox:
    """A lazily started pool of Monty workers, shared by every script of this process (thread-safe); `shares`
    says which caller's script may have a worker now."""

    def __init__(self, *, workers: int = POOL_WORKERS, binary_path: str | None = None) -> None:
        self.workers = workers
        self.binary_path = binary_path
        self.shares = WorkerShares(workers)
        self._pool: Any = None
        self._lock = threading.Lock()

    def _monty(self) -> Any:
        if self._pool is None:
            with self._lock:
                if self._pool is None:
                    import pydantic_monty  # imported with the first script: a cold start that runs none skips it

                    pool = pydantic_monty.Monty(
                        binary_path=self.binary_path, min_processes=1, max_processes=self.workers, checkout_timeout=10
                    )
                    pool.__enter__()
                    atexit.register(pool.__exit__, None, None, None)
                    self._pool = pool
        return self._pool

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.__exit__(None, None, None)
                self._pool = None

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
        """Type-check and run `code`; `functions` maps the names the stubs declare to the host's tool calls.
        Raises ScriptError (syntax, type, runtime or limit) with the line and the message to fix it by, or
        of kind busy when `caller` (None: the process's only one) or its network `address` holds its share of
        the workers, or the pool stays full until the script's deadline (waiting for a worker counts in wall_s).

        The pool replaces a worker it finds dead, but one that died just before being checked out (killed by a
        signal, say) fails the first feed it is handed; the script then runs once more on a fresh worker, which
        is safe because it had made no tool call (nothing else of a script leaves the sandbox)."""
        ends_at = clock() + limits.wall_s
        if deadline is not None:
            ends_at = min(ends_at, deadline)
        try:
            with self.shares.hold(caller, address, ends_at):
                try:
                    return self._run(code, stubs, functions, limits, ends_at, clock, retry=True)
                except _WorkerGone:
                    return self._run(code, stubs, functions, limits, ends_at, clock, retry=False)
        except SandboxBusy as exc:
            raise ScriptError("busy", str(exc), retry_after_s=exc.retry_after_s) from None

    def _run(
        self,
        code: str,
        stubs: str,
        functions: Mapping[str, ToolFunction],
        limits: ScriptLimits,
        ends_at: float,
        clock: Callable[[], float],
        *,
        retry: bool,
    ) -> ScriptOutcome:
        import pydantic_monty as monty

        pool = self._monty()
        printed = monty.CollectString(max_bytes=limits.max_printed_bytes)
        calls: list[CallLog] = []
        run = _Run(functions, limits, calls, ends_at, clock)
        sandbox_limits = {
            "max_memory": limits.memory_mb * 1024 * 1024,
            # What is left of the script's time once it has a worker (a wait for one counts too).
            "max_feed_duration_secs": max(0.1, min(limits.wall_s, ends_at - clock())),
            "max_recursion_depth": MAX_RECURSION_DEPTH,
        }
        try:
            with pool.checkout(
                script_name="script.py",
                limits=sandbox_limits,
                type_check=True,
                type_check_stubs=stubs,
                type_check_format="concise",
                os_policy={"sleep": "zero", "process_time": "zero", "timezone": "utc"},
            ) as session:
                lookup = dict.fromkeys(functions, _unreachable)
                try:
                    try:
                        snapshot = session.feed_start(code, external_lookup=lookup, print_callback=printed)
                    except monty.MontyTypingError as exc:
                        if blocking_diagnostics(exc.display(), stubs):
                            raise
                        # Only the checker's quibbles with plain Python (e.g. max(d, key=d.get)): the type check is
                        # there to catch wrong tool calls and keys, and the sandbox is safe without it.
                        snapshot = session.feed_start(
                            code, external_lookup=lookup, print_callback=printed, skip_type_check=True
                        )
                    result = run.drive(snapshot, code)
                finally:
                    run.stop()
            value = _result_copy(result, limits, ends_at, clock)  # the worker is back in the pool by now
        except ScriptError as exc:
            exc.printed, exc.calls = exc.printed or _output(printed), calls
            run.mark_unsent()
            raise
        except monty.MontySyntaxError as exc:
            raise ScriptError("syntax", _first_lines(exc.display()), line=_line(exc), calls=calls) from None
        except monty.MontyTypingError as exc:
            unparsable = _syntax_error(exc.display(), calls)
            if unparsable is not None:
                raise unparsable from None
            message = _first_lines(exc.display(), 20)
            raise ScriptError("type", message, line=_typing_line(message), calls=calls) from None
        except monty.MontyRuntimeError as exc:
            raise _runtime_error(exc, _output(printed), calls, limits) from None
        except TimeoutError:  # the pool's own checkout_timeout: a worker not replaced in time
            message = "busy: no sandbox worker became free in time; retry after 5 s"
            raise ScriptError("busy", message, calls=calls, retry_after_s=5) from None
        except monty.MontyCrashedError as exc:
            if retry and not calls and not exc.timed_out:
                raise _WorkerGone from None
            limit = "wall_s" if exc.timed_out else None
            message = "The script's worker stopped" + (" at the time limit" if exc.timed_out else " unexpectedly")
            raise ScriptError("limit" if limit else "runtime", message, calls=calls, limit=limit) from None
        return ScriptOutcome(value, _output(printed), calls)


class _WorkerGone(Exception):
    """A script's worker crashed before the script made any tool call (see Sandbox.run)."""


@dataclass
class _Run:
    """Drives one feed: answers name lookups and tool calls, runs calls on threads, enforces the limits."""

    functions: Mapping[str, ToolFunction]
    limits: ScriptLimits
    calls: list[CallLog]
    ends_at: float
    clock: Callable[[], float]
    _executor: concurrent.futures.ThreadPoolExecutor | None = None
    _inflight: dict[int, concurrent.futures.Future[Any]] = field(default_factory=dict)
    # Calls made and not yet awaited: call id -> (function, arguments, log, tool name, line).
    _waiting: dict[int, tuple[ToolFunction, dict[str, Any], CallLog, str, int]] = field(default_factory=dict)

    def drive(self, snapshot: Any, code: str) -> Any:
        import pydantic_monty as monty

        while not isinstance(snapshot, monty.MontyComplete):
            self._check_time()
            if isinstance(snapshot, monty.NameLookupSnapshot):
                snapshot = snapshot.resume_auto()  # tool names resolve to host functions; others are NameError
            elif isinstance(snapshot, monty.FunctionSnapshot):
                snapshot = self._call(snapshot, code)
            elif isinstance(snapshot, monty.FutureSnapshot):
                snapshot = snapshot.resume(self._settle(snapshot.pending_call_ids))
            else:  # pragma: no cover - every snapshot kind of pydantic-monty 1.4 is handled above
                raise ScriptError("runtime", f"unexpected sandbox state {type(snapshot).__name__}")
        if self._waiting:  # calls the script made and never awaited: they were never sent
            name, line = next(iter(self._waiting.values()))[3:5]
            raise ScriptError(
                "runtime",
                f"line {line}: {name}(...) was never awaited, so it was not sent: write `await {name}(...)`, or "
                "gather several with `await asyncio.gather(...)`",
                line=line,
            )
        return snapshot.output

    def _call(self, snapshot: Any, code: str) -> Any:
        line = code.count("\n", 0, snapshot.position.start) + 1
        if snapshot.is_os_function:
            if snapshot.function_name in ("import", "import_stubs"):  # a module Monty does not have
                module = snapshot.args[0] if snapshot.args else "?"
                module = module[0] if isinstance(module, list | tuple) and module else module
                message = f"No module named {module!r} in the sandbox (line {line}); use Monty's own modules"
                return snapshot.resume({"exc_type": "ModuleNotFoundError", "message": message})
            # files, the environment...: a script has none of them
            message = f"{snapshot.function_name} is not available: scripts can only call the catalog's tools"
            return snapshot.resume({"exc_type": "PermissionError", "message": message})
        name = str(snapshot.function_name)
        function = self.functions.get(name)
        if function is None:
            return snapshot.resume({"exc_type": "NameError", "message": f"{name} is not a tool of this catalog"})
        if snapshot.args:
            message = f"{name} takes keyword arguments only, e.g. {name}(symbol=...)"
            return snapshot.resume({"exc_type": "TypeError", "message": message})
        if len(self.calls) >= self.limits.max_calls:
            raise ScriptError(
                "limit",
                f"The script tried more than {self.limits.max_calls} tool calls (the max_calls limit); make fewer "
                "calls, e.g. ask one tool for several items at once",
                line=line,
                limit="max_calls",
            )
        arguments = self._arguments(snapshot.kwargs, name, line)
        log = CallLog(name)
        self.calls.append(log)
        # Sent when the script awaits it (alone or gathered): a call never awaited is never sent.
        self._waiting[snapshot.call_id] = (function, arguments, log, name, line)
        return snapshot.resume({"future": ...})

    def _arguments(self, kwargs: Any, name: str, line: int) -> dict[str, Any]:
        """A call's keyword arguments copied out of the sandbox, within max_argument_bytes and the deadline."""
        budget = self.limits.max_argument_bytes
        try:
            copied: dict[str, Any] = plain_copy(kwargs, budget_bytes=budget, ends_at=self.ends_at, clock=self.clock)
        except ValueTooLarge as exc:
            if exc.reason == "time":
                self._check_time()  # past the deadline: raises the wall_s error
            raise ScriptError(
                "limit",
                f"line {line}: the arguments of {name}(...) take more than {budget:,} bytes once copied out of the "
                "sandbox (the max_argument_bytes limit; a part the script reuses, as in `[x] * 10`, counts each "
                "place it appears): pass smaller arguments",
                line=line,
                limit="max_argument_bytes",
            ) from None
        return copied

    def _timed(self, function: ToolFunction, arguments: dict[str, Any], log: CallLog) -> Any:
        started = time.perf_counter()
        try:
            data, log.cached = function(arguments, self.ends_at)
            return data
        except ToolCallFailed as exc:
            log.error = exc.error_type
            raise
        finally:
            log.ms = (time.perf_counter() - started) * 1000

    def _settle(self, pending: list[int]) -> dict[int, Any]:
        for call_id in pending:  # what the script now waits for is sent, all of it at once
            waiting = self._waiting.pop(call_id, None)
            if waiting is not None:
                if self._executor is None:
                    self._executor = concurrent.futures.ThreadPoolExecutor(MAX_CONCURRENT_CALLS, "script")
                function, arguments, log = waiting[:3]
                self._inflight[call_id] = self._executor.submit(self._timed, function, arguments, log)
        futures = [self._inflight[i] for i in pending if i in self._inflight]
        left = self.ends_at - self.clock()
        concurrent.futures.wait(futures, timeout=max(0.0, left), return_when=concurrent.futures.FIRST_COMPLETED)
        self._check_time()
        settled: dict[int, Any] = {}
        for call_id in pending:
            future = self._inflight.get(call_id)
            if future is None or not future.done():
                continue
            del self._inflight[call_id]
            failure = future.exception()
            if failure is None:
                settled[call_id] = {"return_value": future.result()}
            elif isinstance(failure, ToolCallFailed):
                settled[call_id] = {"exc_type": failure.exc_type, "message": str(failure)}
            else:  # a bug of ours in a tool function: the script sees a generic failure
                settled[call_id] = {"exc_type": "RuntimeError", "message": "The tool call failed inside the server"}
        return settled

    def _check_time(self) -> None:
        if self.clock() > self.ends_at:
            raise ScriptError(
                "limit",
                "The script ran out of time (the wall_s limit, or the request's own deadline); make fewer or "
                "smaller calls, and gather independent ones with asyncio.gather",
                limit="wall_s",
            )

    def mark_unsent(self) -> None:
        """In the call log, the calls the script made but never got to send (it stopped first)."""
        for waiting in self._waiting.values():
            waiting[2].error = "NotSent"

    def stop(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)


# Diagnostics that always stop a script: a name, key or argument that does not exist, a missing argument, a
# value of the wrong type for a tool, syntax, or using a coroutine (a tool call without `await`) as its result.
BLOCKING_RULES = frozenset(
    {
        "invalid-syntax",
        "unresolved-reference",
        "unresolved-import",
        "unresolved-attribute",
        "invalid-key",
        "missing-argument",
        "unknown-argument",
        "too-many-positional-arguments",
        "positional-only-parameter-as-kwarg",
        "not-subscriptable",
        "not-iterable",
        "invalid-await",
    }
)
_DIAGNOSTIC = re.compile(r"^[^:\n]+:\d+:\d+: (?:error|warning)\[([\w-]+)\] (.*)$", re.MULTILINE)
_DECLARED = re.compile(r"^(?:async def |class )?([A-Za-z_][A-Za-z0-9_]*)[ (=:]", re.MULTILINE)


def blocking_diagnostics(rendered: str, stubs: str) -> list[str]:
    """The type checker's diagnostics that must stop a script: those of BLOCKING_RULES, and any other that
    names a tool function or a type the stubs declare (a wrong argument type or enum value for a tool).
    The rest (the checker's quibbles with plain Python) are let through. Unparsable output blocks."""
    found = _DIAGNOSTIC.findall(rendered)
    if not found:
        return [rendered]
    declared = set(_DECLARED.findall(stubs)) - {"from"}
    return [
        f"{rule}: {message}"
        for rule, message in found
        if rule in BLOCKING_RULES or any(f"`{name}`" in message or f"{name}[" in message for name in declared)
    ]


def _unreachable(**_kwargs: Any) -> Any:  # pragma: no cover - calls are answered from snapshots, never run here
    raise RuntimeError("tool functions are answered by the host, not called in place")


def _runtime_error(exc: Any, printed: str, calls: list[CallLog], limits: ScriptLimits) -> ScriptError:
    text = exc.display("traceback")
    last = text.strip().splitlines()[-1] if text.strip() else ""
    frames = exc.traceback()
    line = frames[-1].line if frames else None
    if line is None:  # refused while the checker read the imports: the host put the line in its message
        said = re.search(r"\(line (\d+)\)", last)
        line = int(said.group(1)) if said else None
    over = re.search(r"> (\d+) bytes", last) if last.startswith("MemoryError") else None
    if over is not None and int(over.group(1)) == limits.max_printed_bytes:  # the print collector's cap
        message = f"The script printed more than {limits.max_printed_bytes:,} bytes (the max_printed_bytes limit)"
        return ScriptError("limit", message, line=line, printed=printed, calls=calls, limit="max_printed_bytes")
    if over is not None:
        message = f"The script used more than {limits.memory_mb} MB (the memory_mb limit): {last}"
        return ScriptError("limit", message, line=line, printed=printed, calls=calls, limit="memory_mb")
    if last.startswith("TimeoutError") and "time limit" in last:
        message = "The script ran out of time (the wall_s limit)"
        return ScriptError("limit", message, line=line, printed=printed, calls=calls, limit="wall_s")
    if last.startswith("RecursionError"):
        message = f"{last} (the recursion limit, {MAX_RECURSION_DEPTH} calls deep)"
        return ScriptError("limit", message, line=line, printed=printed, calls=calls, limit="max_recursion_depth")
    return ScriptError("runtime", _first_lines(text, 30), line=line, printed=printed, calls=calls)


def _output(collector: Any) -> str:
    try:
        return str(collector.output)
    except Exception:  # a collector that overflowed holds what fit
        return ""


def _line(exc: Any) -> int | None:
    try:
        frames = exc.traceback()
    except Exception:
        return None
    return frames[-1].line if frames else None


# A diagnostic of Monty's own parser, which runs before the checker: "script.py:2:1: error[invalid-syntax] ...".
_SYNTAX_DIAGNOSTIC = re.compile(r"^[^:\n]+:(\d+):(\d+): error\[invalid-syntax\] (.*)$", re.MULTILINE)


def _syntax_error(rendered: str, calls: list[CallLog]) -> ScriptError | None:
    """A script that does not parse, as one syntax error at its first parser diagnostic; None if it parses.

    The checker still type-checks what it could not parse, and its guesses ("too many positional arguments", "name
    used when not defined") are noise. The verdict is the sandbox's parser's, not the host's `ast`: Monty takes
    syntax newer than the host's Python (quotes reused inside an f-string)."""
    found = _SYNTAX_DIAGNOSTIC.search(rendered)
    if found is None:
        return None
    line, column = int(found.group(1)), int(found.group(2))
    message = f"line {line}, column {column}: {found.group(3)}"
    return ScriptError("syntax", _first_lines(message, 1), line=line, column=column, calls=calls)


def _typing_line(message: str) -> int | None:
    """The line of the first checker diagnostic ("script.py:3:5: error[...] ...")."""
    for part in message.split(":")[1:2]:
        if part.isdigit():
            return int(part)
    return None


def _first_lines(text: str, count: int = 12) -> str:
    """The start of a message: its first `count` lines, each and all cut to a readable length."""
    lines = [line if len(line) <= 500 else line[:499] + "…" for line in text.strip().splitlines()]
    shown = "\n".join(lines[:count] + (["…"] if len(lines) > count else []))
    return shown if len(shown) <= MAX_MESSAGE_CHARS else shown[: MAX_MESSAGE_CHARS - 1] + "…"


def _result_copy(result: Any, limits: ScriptLimits, ends_at: float, clock: Callable[[], float]) -> Any:
    """The script's value copied out of the sandbox as JSON data, within its memory limit and its deadline: a
    part the script shares is as big on the host as the places it appears (see progressive_mcp.calls.boundary)."""
    try:
        return plain_copy(result, budget_bytes=limits.memory_mb * 1024 * 1024, ends_at=ends_at, clock=clock)
    except ValueTooLarge as exc:
        if exc.reason == "time":
            message = (
                "The script ran out of time while its result was copied out of the sandbox (the wall_s limit); "
                "return less, e.g. aggregate in the script and return only the answer"
            )
            raise ScriptError("limit", message, limit="wall_s") from None
        message = (
            f"The script's result takes more than {limits.memory_mb} MB once copied out of the sandbox (the "
            "memory_mb limit; a part the script reuses, as in `[x] * 10`, counts each place it appears): return "
            "less, e.g. aggregate in the script and return only the answer"
        )
        raise ScriptError("limit", message, limit="memory_mb") from None
