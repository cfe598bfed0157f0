"""Code mode under runaway scripts: what another caller waits while one caller floods the sandbox (issue 27, 6).

Starts `progressive-mcp serve --sample-upstream` (code mode, passthrough auth, the script time limit given by
--wall) on a free port, sends --runaway endless scripts (`while True: i += 1`) at once as caller A (its own
X-API-Key), and once those over A's share have been answered, measures caller B (another key): a `ping`, a
TOOL_SEARCH and a script that fetches one quote, each timed from send to answer. Reports how A's scripts ended
(run to the time limit, or refused at once as busy) and B's figures. Over plain HTTP/1.1 with one connection per
request, as independent clients would send them.

Run with: .venv/bin/python bench/sandbox_fairness.py [--runaway 40] [--wall 10] [--json]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2

ROOT = Path(__file__).resolve().parent.parent
KEY_A = "bench-runaway-caller-A"
KEY_B = "bench-patient-caller-B"
RUNAWAY = "i = 0\nwhile True:\n    i += 1"
QUOTE = 'q = await GLOBAL_QUOTE(symbol="IBM")\nq["Global Quote"]["05. price"]'


def post(url: str, key: str, method: str, params: dict[str, Any] | None, timeout: float) -> tuple[float, Any]:
    """One JSON-RPC request on its own connection; (seconds to the answer, the result or error)."""
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": method}
    if params is not None:
        body["params"] = params
    started = time.perf_counter()
    response = httpx2.post(url, json=body, headers={"X-API-Key": key}, timeout=timeout)
    seconds = time.perf_counter() - started
    answer = response.json()
    return seconds, answer.get("result", answer.get("error"))


def execute(url: str, key: str, code: str, timeout: float) -> tuple[float, Any]:
    return post(url, key, "tools/call", {"name": "TOOL_EXECUTE", "arguments": {"code": code}}, timeout)


def outcome(result: dict[str, Any]) -> str:
    structured = result.get("structuredContent") or {}
    if not result.get("isError"):
        return "answered"
    error = structured.get("error", {})
    return f"{error.get('kind', error.get('type'))} {error.get('limit', '')}".strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runaway", type=int, default=40, help="endless scripts caller A sends at once")
    parser.add_argument("--wall", type=float, default=10.0, help="the server's script time limit (PMCP_SCRIPT_WALL_S)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    env = {**os.environ, "PMCP_SCRIPT_WALL_S": f"{args.wall:g}"}
    command = [sys.executable, "-m", "progressive_mcp", "serve", "--port", "0", "--sample-upstream", "--mode", "code"]
    with tempfile.TemporaryFile("w+") as log:
        server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=log, text=True)
        try:
            assert server.stdout is not None
            banner = server.stdout.readline()
            found = re.search(r"http://127\.0\.0\.1:\d+/mcp", banner)
            if not found:
                raise SystemExit(f"the server did not start: {banner!r}")
            url = found.group(0)
            execute(url, KEY_B, "1 + 1", 60)  # starts the pool: not part of what is measured
            report = measure(url, args.runaway, args.wall)
        finally:
            server.terminate()
            server.wait(timeout=30)
    report["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version(), "load_average": os.getloadavg()}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(
        f"{args.runaway} endless scripts from caller A at once, script limit {args.wall:g} s "
        f"(load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}, {os.cpu_count()} CPUs):"
    )
    print(f"  caller A's scripts: {', '.join(f'{n} {kind}' for kind, n in report['runaway'].items())}")
    print(f"  caller A's busy answers came back within {report['busy_answer_max_s']:.2f} s")
    for name, row in report["other_caller"].items():
        print(f"  caller B {name:<22} {row['seconds']:6.2f} s  {row['outcome']}")
    print(f"  caller A's scripts still running when B's script was answered: {report['runaway_still_running']}")
    return 0


def measure(url: str, runaway: int, wall_s: float) -> dict[str, Any]:
    with concurrent.futures.ThreadPoolExecutor(runaway) as pool:
        sent = time.perf_counter()
        flood = [pool.submit(execute, url, KEY_A, RUNAWAY, wall_s + 60) for _ in range(runaway)]
        # Wait for the answers that come at once (those over A's share), at most half the time limit.
        while sum(f.done() for f in flood) < runaway - 2 and time.perf_counter() - sent < wall_s / 2:
            time.sleep(0.02)
        busy_answer_max_s = time.perf_counter() - sent
        other: dict[str, dict[str, Any]] = {}
        seconds, result = post(url, KEY_B, "ping", None, wall_s + 60)
        other["ping"] = {"seconds": round(seconds, 3), "outcome": "answered" if result == {} else str(result)}
        search = {"name": "TOOL_SEARCH", "arguments": {"query": "stock quote"}}
        seconds, result = post(url, KEY_B, "tools/call", search, wall_s + 60)
        other["TOOL_SEARCH"] = {"seconds": round(seconds, 3), "outcome": outcome(result)}
        seconds, result = execute(url, KEY_B, QUOTE, wall_s + 60)
        other["TOOL_EXECUTE (one quote)"] = {"seconds": round(seconds, 3), "outcome": outcome(result)}
        still_running = sum(not f.done() for f in flood)
        endings: dict[str, int] = {}
        for future in flood:
            kind = outcome(future.result()[1])
            endings[kind] = endings.get(kind, 0) + 1
    return {
        "runaway": endings,
        "busy_answer_max_s": round(busy_answer_max_s, 3),
        "other_caller": other,
        "runaway_still_running": still_running,
        "wall_s": wall_s,
    }


if __name__ == "__main__":
    raise SystemExit(main())
