"""The gateway at scale: 20 stdio servers with 50 tools each (1,000 tools, synthetic descriptions) behind one
endpoint. Reports the first full sync, a sync with nothing changed, a one-tool re-sync, the store's size, and warm
TOOL_SEARCH p50/p99 over the 1,000 tools; then the tools/list tokens of the README's example (the npm memory server
and the Alpha Vantage catalog in direct mode) seen directly against behind the gateway.

    python bench/gateway.py [--servers 20] [--tools 50] [--no-example] [--json]

The servers are tests/fixtures/servers/toy_server.py processes (the mcp SDK over stdio); the example needs `npx`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from progressive_mcp.gateway.gateway import Gateway  # noqa: E402
from progressive_mcp.settings import Settings  # noqa: E402
from progressive_mcp.surfaces.surface import CallContext, GatewaySurfaces  # noqa: E402
from progressive_mcp.tokens import count_tokens, dumps  # noqa: E402

TOY = ROOT / "tests" / "fixtures" / "servers" / "toy_server.py"
VERBS = ["get", "list", "create", "update", "delete", "search", "export", "archive", "sync", "summarise"]
NOUNS = [
    "invoice", "customer", "ticket", "repository", "playlist", "calendar event", "shipment", "forecast", "document",
    "user", "order", "payment", "message", "channel", "build", "deployment", "dataset", "report", "contact", "task",
    "note", "alert", "metric", "file", "comment",
]  # fmt: skip


def synthetic_tools(server: int, count: int, rng: random.Random) -> list[dict[str, Any]]:
    tools = []
    for i in range(count):
        verb, noun = VERBS[i % len(VERBS)], NOUNS[(i // len(VERBS) + server) % len(NOUNS)]
        name = f"{verb}_{noun.replace(' ', '_')}_{i}"
        tools.append(
            {
                "name": name,
                "description": f"{verb.capitalize()} a {noun} in system {server}. "
                f"Works on {rng.choice(NOUNS)} records and returns the {noun} fields.",
                "inputSchema": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string", "description": f"the {noun}'s id"},
                        "limit": {"type": "integer", "description": "at most this many"},
                    },
                },
            }
        )
    return tools


def scale(servers: int, per_server: int) -> dict[str, Any]:
    rng = random.Random(17)
    work = Path(tempfile.mkdtemp(prefix="pmcp-gateway-bench-"))
    entries = {}
    files = []
    for s in range(servers):
        tools_file = work / f"server{s}.json"
        tools_file.write_text(json.dumps({"tools": synthetic_tools(s, per_server, rng)}))
        files.append(tools_file)
        entries[f"s{s:02d}"] = {"command": sys.executable, "args": [str(TOY), str(tools_file)], "timeout_s": 60}
    servers_file = work / "servers.json"
    servers_file.write_text(json.dumps({"mcpServers": entries}))
    index = work / "index.sqlite3"
    gateway = Gateway.open(servers_file, index)
    try:
        started = time.perf_counter()
        first = gateway.sync()
        full_s = time.perf_counter() - started
        started = time.perf_counter()
        gateway.sync()
        unchanged_s = time.perf_counter() - started
        # One tool of one server changes; that server's next run lists it, and only it is re-synced.
        data = json.loads(files[0].read_text())
        data["tools"][0]["description"] += " Now also archived records."
        files[0].write_text(json.dumps(data))
        gateway.pool.close()
        started = time.perf_counter()
        one = gateway.sync(["s00"])
        one_s = time.perf_counter() - started
        surface = GatewaySurfaces(gateway, Settings()).current()
        queries = [f"{rng.choice(VERBS)} a {rng.choice(NOUNS)}" for _ in range(300)]
        for query in queries[:20]:
            surface.call_tool_wire("TOOL_SEARCH", {"query": query}, CallContext())
        times = []
        for query in queries:
            t0 = time.perf_counter()
            surface.call_tool_wire("TOOL_SEARCH", {"query": query}, CallContext())
            times.append((time.perf_counter() - t0) * 1000)
        times.sort()
        return {
            "servers": servers,
            "tools": len(gateway.catalog),
            "created": first.counts["created"],
            "full_sync_s": round(full_s, 2),
            "unchanged_sync_s": round(unchanged_s, 2),
            "one_tool_resync_s": round(one_s, 3),
            "one_tool_resync_updated": one.counts["updated"],
            "index_bytes": _store_bytes(index),
            "search_p50_ms": round(statistics.median(times), 3),
            "search_p99_ms": round(times[int(len(times) * 0.99) - 1], 3),
        }
    finally:
        gateway.close()
        shutil.rmtree(work, ignore_errors=True)


def _store_bytes(index: Path) -> int:
    """The store's size once its write-ahead log is folded into the file (WAL mode keeps fresh writes beside it)."""
    with contextlib.closing(sqlite3.connect(index)) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return sum(p.stat().st_size for p in (index, index.with_name(index.name + "-wal")) if p.exists())


def readme_example() -> dict[str, Any] | None:
    if shutil.which("npx") is None:
        return None
    work = Path(tempfile.mkdtemp(prefix="pmcp-gateway-example-"))
    servers_file = work / "servers.json"
    servers_file.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "memory": {
                        "command": "npx",
                        "args": ["-y", "@modelcontextprotocol/server-memory@2025.11.25"],
                        "env": {"MEMORY_FILE_PATH": str(work / "memory.jsonl")},
                        "timeout_s": 120,
                    },
                    "alphavantage": {
                        "command": sys.executable,
                        "args": ["-m", "progressive_mcp", "stdio", "--mode", "direct"],
                        "timeout_s": 60,
                    },
                }
            }
        )
    )
    gateway = Gateway.open(servers_file, work / "index.sqlite3")
    try:
        gateway.sync()
        direct = {
            s.name: count_tokens(dumps({"tools": gateway.pool.list_tools(s.name)})) for s in gateway.config.enabled
        }
        surface = GatewaySurfaces(gateway, Settings()).current()
        listed = [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in surface.list_tools()]
        return {
            "tools": len(gateway.catalog),
            "direct_tokens": direct,
            "direct_total_tokens": sum(direct.values()),
            "gateway_tokens": count_tokens(dumps({"tools": listed})),
        }
    finally:
        gateway.close()
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=20)
    parser.add_argument("--tools", type=int, default=50, help="tools per server")
    parser.add_argument("--no-example", action="store_true", help="skip the README example (the npm memory server)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = {"scale": scale(args.servers, args.tools), "example": None if args.no_example else readme_example()}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    s = report["scale"]
    print(f"gateway: {s['servers']} servers, {s['tools']} tools")
    print(f"  first full sync      {s['full_sync_s']:.2f} s ({s['created']} created)")
    print(f"  sync, nothing new    {s['unchanged_sync_s']:.2f} s")
    updated = s["one_tool_resync_updated"]
    print(f"  one-tool re-sync     {s['one_tool_resync_s']:.3f} s ({updated} updated; server restarted)")
    print(f"  store                {s['index_bytes'] / 1024:.0f} KiB")
    print(f"  TOOL_SEARCH warm     p50 {s['search_p50_ms']:.3f} ms, p99 {s['search_p99_ms']:.3f} ms")
    example = report["example"]
    if example is None:
        print("README example: skipped (--no-example, or no npx)")
    else:
        parts = ", ".join(f"{k} {v:,}" for k, v in example["direct_tokens"].items())
        print(
            f"README example ({example['tools']} tools): tools/list {example['direct_total_tokens']:,} tokens "
            f"directly ({parts}) → {example['gateway_tokens']:,} behind the gateway (cl100k)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
