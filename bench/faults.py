"""The upstream fault matrix: what each fault becomes, how many upstream attempts it costs, how long it takes.

Runs in process against the offline sample upstream: the core surface as the stdio server calls it
(`Surface.call_tool_wire`), and the serve stack (the Lambda handler behind real HTTP on 127.0.0.1), both
with the response cache on and a short deadline. For each fault it prints the error kind, `isError`, the
requests the upstream saw, the elapsed time, and whether the same call reached the upstream again once
the fault was cleared (it must: errors are never cached). A report, never pass/fail on time.

Run with `.venv/bin/python bench/faults.py [--json] [--deadline 2.5] [--transport core|http|both] [--cases A,B]`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# The serve stack's per-request log lines and EMF metrics would drown the table.
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")

import httpx  # noqa: E402

from lambda_fn.handler import make_handler  # noqa: E402
from lambda_fn.local import LocalServer  # noqa: E402
from progressive_mcp.offline.sample_upstream import SampleUpstream  # noqa: E402
from progressive_mcp.settings import Settings  # noqa: E402
from progressive_mcp.surfaces.endpoint import Endpoint  # noqa: E402
from progressive_mcp.surfaces.surface import CallContext, Surface  # noqa: E402

KEY = "bench-faults-key"
CURRENCIES = ("USD", "EUR", "GBP", "JPY", "BTC", "ETH")
REFUSE = "refuse"  # not a Faults field: the sample upstream stops listening
# fault name → (faults, tool); the tool is CURRENCY_EXCHANGE_RATE unless named
MATRIX: dict[str, tuple[dict[str, Any], str]] = {
    "connection refused": ({REFUSE: True}, "CURRENCY_EXCHANGE_RATE"),
    "connection dropped": ({"disconnect": True}, "CURRENCY_EXCHANGE_RATE"),
    "timeout (5 s delay)": ({"delay_s": 5.0}, "CURRENCY_EXCHANGE_RATE"),
    "trickling body": ({"trickle_s": 0.05}, "CURRENCY_EXCHANGE_RATE"),
    "http 500": ({"status": 500}, "CURRENCY_EXCHANGE_RATE"),
    "http 502": ({"status": 502}, "CURRENCY_EXCHANGE_RATE"),
    "http 503": ({"status": 503}, "CURRENCY_EXCHANGE_RATE"),
    "http 503 retry-after 30": ({"status": 503, "retry_after": 30}, "CURRENCY_EXCHANGE_RATE"),
    "http 429 retry-after 1": ({"status": 429, "retry_after": 1}, "CURRENCY_EXCHANGE_RATE"),
    "http 429 retry-after 30": ({"status": 429, "retry_after": 30}, "CURRENCY_EXCHANGE_RATE"),
    "rate-limit notice": ({"rate_limit": True}, "CURRENCY_EXCHANGE_RATE"),
    "premium notice": ({}, "TIME_SERIES_DAILY_ADJUSTED"),
    "invalid key": ({"invalid_key": True}, "CURRENCY_EXCHANGE_RATE"),
    "malformed json": ({"malformed": True}, "CURRENCY_EXCHANGE_RATE"),
    "empty body": ({"empty": True}, "CURRENCY_EXCHANGE_RATE"),
    "html error page": ({"html": True}, "CURRENCY_EXCHANGE_RATE"),
    "50 MB body": ({"body_mb": 50}, "CURRENCY_EXCHANGE_RATE"),
}

Caller = Callable[[str, dict[str, Any]], dict[str, Any]]


def arguments(index: int, tool: str) -> dict[str, Any]:
    """Arguments no other case uses, so no cache entry can answer them."""
    if tool != "CURRENCY_EXCHANGE_RATE":
        return {"symbol": "IBM"}
    pairs = [(a, b) for a in CURRENCIES for b in CURRENCIES if a != b]
    from_currency, to_currency = pairs[index % len(pairs)]
    return {"from_currency": from_currency, "to_currency": to_currency}


def core_caller(settings: Settings) -> Caller:
    surface = Surface.from_settings(settings)
    ctx = CallContext(api_key=KEY, entitlement="local")

    def call(tool: str, args: dict[str, Any]) -> dict[str, Any]:
        return surface.call_tool_wire("TOOL_CALL", {"tool_name": tool, "arguments": args}, ctx)

    return call


def http_caller(url: str, client: httpx.Client) -> Caller:
    def call(tool: str, args: dict[str, Any]) -> dict[str, Any]:
        params = {"name": "TOOL_CALL", "arguments": {"tool_name": tool, "arguments": args}}
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
        answer = client.post(url, params={"apikey": KEY}, json=body, headers={"Accept": "application/json"})
        result: dict[str, Any] = answer.json()["result"]
        return result

    return call


def run_case(upstream: SampleUpstream, call: Caller, index: int, name: str) -> dict[str, Any]:
    faults, tool = MATRIX[name]
    args = arguments(index, tool)
    upstream.reset()
    if faults.get(REFUSE):
        upstream.refuse_connections()
    else:
        upstream.update_faults(faults)
    started = time.perf_counter()
    try:
        result = call(tool, args)
    finally:
        elapsed_ms = (time.perf_counter() - started) * 1000
        if faults.get(REFUSE):
            upstream.accept_connections()
    attempts = len(upstream.requests_snapshot())
    upstream.reset()
    call(tool, args)  # the fault is gone: this must reach the upstream again
    error = (result.get("structuredContent") or {}).get("error") or {}
    return {
        "fault": name,
        "kind": error.get("kind", "-"),
        "is_error": result.get("isError"),
        "attempts": attempts,
        "elapsed_ms": round(elapsed_ms, 1),
        "retry_after_s": error.get("retry_after_s"),
        "cached": len(upstream.requests_snapshot()) == 0,
        "key_in_answer": KEY in json.dumps(result),
        "message": error.get("message", ""),
    }


def machine() -> dict[str, Any]:
    return {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--deadline", type=float, default=2.5, help="PMCP_DEADLINE_S of the servers (default 2.5)")
    parser.add_argument("--transport", choices=["core", "http", "both"], default="both")
    parser.add_argument("--cases", help="comma-separated fault names (default: all)")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.cases.split(",")] if args.cases else list(MATRIX)
    unknown = [n for n in names if n not in MATRIX]
    if unknown:
        parser.error(f"unknown cases {unknown}; known: {', '.join(MATRIX)}")

    rows: list[dict[str, Any]] = []
    with SampleUpstream() as upstream:
        environ = {"PMCP_DEADLINE_S": f"{args.deadline:g}", "PMCP_UPSTREAM_TIMEOUT_S": "20"}
        settings = Settings.from_env(environ, upstream_url=upstream.url)
        transports: list[str] = ["core", "http"] if args.transport == "both" else [args.transport]
        for transport in transports:
            if transport == "core":
                callers = [(transport, core_caller(settings), None)]
            else:
                server = LocalServer(make_handler(Endpoint.from_settings(settings)), port=0).start()
                callers = [(transport, http_caller(server.url, httpx.Client(timeout=60)), server)]
            for label, call, server in callers:
                call("GLOBAL_QUOTE", {"symbol": "IBM"})  # warm: imports and the first connection
                for name in names:
                    rows.append({"transport": label, **run_case(upstream, call, list(MATRIX).index(name), name)})
                if server is not None:
                    server.stop()

    report = {"deadline_s": args.deadline, "machine": machine(), "rows": rows}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    host = report["machine"]
    print(
        f"upstream fault matrix: deadline {args.deadline:g} s, 2 retries, backoff 0.5 s; machine: {host['platform']}, "
        f"{host['cpus']} CPUs, Python {host['python']}, load average {host['load_average']}"
    )
    header = f"{'transport':<9} {'fault':<25} {'kind':<17} {'isError':<7} {'attempts':>8} {'elapsed ms':>10}"
    print(header + "  retry_after_s  cached?")
    print("-" * (len(header) + 24))
    for row in rows:
        retry = "-" if row["retry_after_s"] is None else f"{row['retry_after_s']:g}"
        print(
            f"{row['transport']:<9} {row['fault']:<25} {row['kind']:<17} {row['is_error']!s:<7} {row['attempts']:>8} "
            f"{row['elapsed_ms']:>10.0f}  {retry:>13}  {'YES' if row['cached'] else 'no'}"
        )
    leaks = [row["fault"] for row in rows if row["key_in_answer"]]
    print(f"key in any answer: {'YES: ' + ', '.join(leaks) if leaks else 'no'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
