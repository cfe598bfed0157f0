"""A server that lists too much (issue 27, finding 13): one stdio server with many tools with long descriptions, and
one tool with a 2 MB description. Reports the sync's time and this process's peak RSS, the store's size, the
largest TOOL_LIST {category} answer, and the TOOL_GET answer and direct-mode tools/list definition of the big tool.

    python bench/gateway_bounds.py [--tools 20000] [--description-chars 5000] [--json]

The server is tests/fixtures/servers/toy_server.py (the mcp SDK over stdio). The gateway's bounds (limits.py) keep
1,000 tools a server and cut each definition to fit; the figures show what that costs and saves.
"""

from __future__ import annotations

import argparse
import json
import resource
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
BIG_DESCRIPTION_CHARS = 2_000_000


def tools(count: int, description_chars: int) -> list[dict[str, Any]]:
    words = "Lists the records of a kind, with filters, paging and sorting, for reports. "
    listed = [
        {
            "name": f"tool_{i:05}",
            "description": (f"Tool {i}. " + words * (description_chars // len(words) + 1))[:description_chars],
            "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}}},
        }
        for i in range(count)
    ]
    big = (words * (BIG_DESCRIPTION_CHARS // len(words) + 1))[:BIG_DESCRIPTION_CHARS]
    return [{"name": "big", "description": big, "inputSchema": {"type": "object"}}, *listed]


def run(count: int, description_chars: int) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="pmcp-bounds-bench-"))
    tools_file = work / "tools.json"
    tools_file.write_text(json.dumps({"tools": tools(count, description_chars)}))
    servers = work / "servers.json"
    entry = {"command": sys.executable, "args": [str(TOY), str(tools_file)], "timeout_s": 600}
    servers.write_text(json.dumps({"mcpServers": {"wide": entry}}))
    index = work / "index.sqlite3"
    gateway = Gateway.open(servers, index)
    try:
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        started = time.perf_counter()
        report = gateway.sync()
        seconds = time.perf_counter() - started
        rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        surface = GatewaySurfaces(gateway, Settings()).current()
        listing = surface.call_tool_wire("TOOL_LIST", {"category": "wide"}, CallContext())["structuredContent"]
        got = surface.call_tool_wire("TOOL_GET", {"tool_name": "wide.big"}, CallContext())["structuredContent"]
        direct = GatewaySurfaces(gateway, Settings(mode="direct")).current()
        definition = next(d for d in direct.tool_definitions() if d["name"] == "wide.big")
        (server,) = report.servers
        return {
            "tools_listed": count + 1,
            "description_chars": description_chars,
            "sync_s": round(seconds, 2),
            "peak_rss_mb": round(rss_after / 1024, 1),
            "peak_rss_growth_mb": round((rss_after - rss_before) / 1024, 1),
            "tools_stored": len(gateway.store.tools()),
            "notes": len(getattr(server, "notes", [])),
            "store_mb": round(sum(p.stat().st_size for p in work.glob("index.sqlite3*")) / 1e6, 1),
            "tool_list_category_bytes": len(dumps(listing).encode()),
            "tool_list_category_tokens": count_tokens(dumps(listing)),
            "tool_get_big_bytes": len(dumps(got).encode()),
            "tool_get_big_tokens": count_tokens(dumps(got)),
            "direct_definition_big_tokens": count_tokens(dumps(definition)),
        }
    finally:
        gateway.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=20_000)
    parser.add_argument("--description-chars", type=int, default=5_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.tools, args.description_chars)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print("gateway bounds: one server listing too much")
        for key, value in result.items():
            print(f"  {key}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
