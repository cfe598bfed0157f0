"""Alpha Vantage's public query set (eval/queries.jsonl) against a gateway's catalog of a nested progressive-mcp
server in direct mode, built from its tools/list with and without the search hints (search/hints.py), as a sync
stores it; no process is started. Prints R@1 and R@5 over the answerable queries.

    .venv/bin/python bench/gateway_hints.py on|off    # the semantic signal (PMCP_SEMANTIC)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from progressive_mcp.gateway.config import parse_servers  # noqa: E402
from progressive_mcp.gateway.documents import documents  # noqa: E402
from progressive_mcp.gateway.store import StoredTool  # noqa: E402
from progressive_mcp.gateway.tools import gateway_catalog  # noqa: E402
from progressive_mcp.search.index import SearchIndex  # noqa: E402
from progressive_mcp.settings import Settings  # noqa: E402
from progressive_mcp.surfaces.surface import Surface  # noqa: E402


def main() -> None:
    semantic = len(sys.argv) > 1 and sys.argv[1] == "on"
    surface = Surface.from_settings(Settings(mode="direct"))
    config = parse_servers({"mcpServers": {"av": {"command": "x"}}}, "servers.json", {})
    lines = (ROOT / "eval" / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    queries = [q for q in map(json.loads, lines) if q["relevant"]]
    for hints in (False, True):
        listed = [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in surface.list_tools(hints=hints)]
        catalog, _ = gateway_catalog(config, [StoredTool(doc, 1) for doc in documents("av", listed)])
        index = SearchIndex(catalog.tools, catalog.vocabulary, categories=catalog.categories, semantic=semantic)
        first = top5 = 0
        for query in queries:
            names = [hit.name.split(".", 1)[1] for hit in index.search(query["query"], limit=5)]
            first += bool(names) and names[0] in query["relevant"]
            top5 += any(name in query["relevant"] for name in names)
        n = len(queries)
        print(f"semantic {semantic}, hints {hints}: {n} answerable queries, R@1 {first / n:.3f}, R@5 {top5 / n:.3f}")


if __name__ == "__main__":
    main()
