"""Benchmarks of the HTTP endpoint through the Lambda handler; prints figures, never pass/fail.

- cold: `import lambda_fn.handler` in fresh interpreters (that import builds the catalog and the default
  surface, as the Lambda init phase does), and the first request after it;
- warm: one request in process, event dict in → proxy result out, through `lambda_fn.handler.handler`
  with its Powertools log line and EMF metrics (written to /dev/null here, to CloudWatch in AWS), and
  through `Endpoint.handle` alone.

Run with `make bench` (or `.venv/bin/python bench/endpoint.py`).
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

COLD_SNIPPET = """
import json, sys, time
started = time.perf_counter()
import lambda_fn.handler as h
imported = time.perf_counter()
event = json.loads(sys.argv[1])
h.handler(event, None)
answered = time.perf_counter()
sys.stderr.write(f"{(imported - started) * 1000:.1f} {(answered - imported) * 1000:.1f}\\n")
"""

MODERN = "2026-07-28"


def event(body: dict[str, Any], headers: dict[str, str] | None = None, query: str = "") -> dict[str, Any]:
    return {
        "version": "2.0",
        "rawPath": "/mcp",
        "rawQueryString": query,
        "headers": {"content-type": "application/json", **(headers or {})},
        "requestContext": {"http": {"method": "POST", "path": "/mcp"}, "requestId": "bench", "stage": "$default"},
        "body": json.dumps(body),
        "isBase64Encoded": False,
    }


def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    params = {"name": name, "arguments": arguments}
    return event({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params})


def modern(method: str, params: dict[str, Any], name: str | None = None) -> dict[str, Any]:
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
    headers = {"mcp-protocol-version": MODERN, "mcp-method": method, **({"mcp-name": name} if name else {})}
    return event({"jsonrpc": "2.0", "id": 7, "method": method, "params": {**params, "_meta": meta}}, headers)


REQUESTS: dict[str, dict[str, Any]] = {
    "tools/list (progressive, 2025 era)": event({"jsonrpc": "2.0", "id": 7, "method": "tools/list"}),
    "tools/list (progressive, 2026-07-28)": modern("tools/list", {}),
    "tools/list (direct, 128 tools, 2025 era)": event(
        {"jsonrpc": "2.0", "id": 7, "method": "tools/list"}, query="mode=direct"
    ),
    "TOOL_LIST default": call("TOOL_LIST", {}),
    "TOOL_SEARCH 'give me aapl price'": call("TOOL_SEARCH", {"query": "give me aapl price"}),
    "TOOL_GET TIME_SERIES_INTRADAY": call("TOOL_GET", {"tool_name": "TIME_SERIES_INTRADAY"}),
    "TOOL_GET (2026-07-28)": modern("tools/call", {"name": "TOOL_GET", "arguments": {"tool_name": "RSI"}}, "TOOL_GET"),
}


def per_call_ms(fn: Callable[[], object], repeat: int) -> float:
    """The best of 5 rounds of `repeat` calls (the least disturbed by the rest of the machine), in ms per call."""
    fn()
    rounds = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(repeat):
            fn()
        rounds.append((time.perf_counter() - started) * 1000 / repeat)
    return min(rounds)


def cold(runs: int = 9, spec: str | None = None) -> tuple[float, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMCP_", "POWERTOOLS_"))}
    if spec is not None:
        env["PMCP_SPEC"] = spec
    # A deployed function imports compiled bytecode; let the first (untimed) run write it if it is missing.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    runs += 1
    first = json.dumps(REQUESTS["tools/list (progressive, 2025 era)"])
    imports, firsts = [], []
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", COLD_SNIPPET, first],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            check=True,
        )
        import_ms, first_ms = map(float, out.stderr.split()[-2:])
        imports.append(import_ms)
        firsts.append(first_ms)
    return statistics.median(imports[1:]), statistics.median(firsts[1:])


def warm() -> dict[str, list[float]]:
    """Runs in a child process whose stdout (Powertools' log and EMF lines) goes to /dev/null."""
    import lambda_fn.handler as h

    results: dict[str, list[float]] = {}
    for label, request in REQUESTS.items():
        repeat = 100 if "direct" in label else 2000
        parsed = h.request_from_event(request)
        assert h.handler(request, None)["statusCode"] == 200, label
        results[label] = [
            per_call_ms(lambda r=request: h.handler(r, None), repeat),  # type: ignore[misc]
            per_call_ms(lambda p=parsed: h.ENDPOINT.handle(p), repeat),  # type: ignore[misc]
        ]
    return results


def main() -> int:
    if "--worker" in sys.argv:
        sys.stderr.write(json.dumps(warm()) + "\n")
        return 0
    import_ms, first_ms = cold()
    with tempfile.TemporaryDirectory() as tmp:
        compiled = str(Path(tmp) / "spec.json")
        command = [sys.executable, "-m", "progressive_mcp.cli", "spec", "compile", "--catalog", "-o", compiled]
        subprocess.run(command, check=True)
        json_import_ms, _ = cold(spec=compiled)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMCP_", "POWERTOOLS_"))}
    worker = subprocess.run(
        [sys.executable, __file__, "--worker"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=True,
    )
    warm_figures: dict[str, list[float]] = json.loads(worker.stderr.strip().splitlines()[-1])
    print(
        f"progressive-mcp endpoint benchmarks: Python {platform.python_version()}, {platform.machine()}, "
        f"{os.cpu_count()} CPUs, {platform.system()} {platform.release()}"
    )
    print(f"  cold import of lambda_fn.handler (catalog and default surface built), median of 9: {import_ms:.0f} ms")
    print(f"  the same from the compiled catalog the asset ships (spec compile --catalog): {json_import_ms:.0f} ms")
    print(f"  first request after that import (tools/list), median of 9:                    {first_ms:.1f} ms")
    print("  warm, in process, per request (best of 5 rounds):")
    width = max(map(len, warm_figures))
    print(f"    {'request':<{width}}  {'Lambda handler':>14}  {'Endpoint.handle':>15}")
    for label, (handler_ms, endpoint_ms) in warm_figures.items():
        print(f"    {label:<{width}}  {handler_ms:>11.3f} ms  {endpoint_ms:>12.3f} ms")
    if "--json" in sys.argv:
        figures = {
            "cold_import_ms": import_ms,
            "cold_import_json_spec_ms": json_import_ms,
            "first_request_ms": first_ms,
        }
        print(json.dumps({**figures, "warm_ms": warm_figures}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
