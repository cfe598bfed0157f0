"""TOOL_GET's views against FastMCP's (issue: the compact schema view): for each OpenAPI document in
../shared/openapi/, one tool's entry in tokens (mean / median / max over every tool) in this server's JSON view and
compact view (`--schema-view compact`), beside FastMCP's two serializers of search results for the same document
(`FastMCP.from_openapi`, then `serialize_tools_for_output_json` and `serialize_tools_for_output_markdown`).

FastMCP is not a dependency: give a Python that has it (`python -m venv /tmp/fm && /tmp/fm/bin/pip install
fastmcp`); it runs in that interpreter, one process per document, and only its texts come back. Entries are counted
alone (no answer frame), cl100k_base, with the project's counter. A document FastMCP cannot load is reported with
the first line of its error. Prints a table, or JSON with `--json`; never pass/fail.

Run with `.venv/bin/python bench/fastmcp_schema_view.py --fastmcp-python /tmp/fm/bin/python [NAME ...]`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the real documents' paths: one map, tests/real_documents.py

from real_documents import REAL  # noqa: E402

from progressive_mcp.sources import load_catalog  # noqa: E402
from progressive_mcp.surfaces.metatools import MetaTools  # noqa: E402
from progressive_mcp.tokens import count_tokens, dumps  # noqa: E402

# Runs in FastMCP's interpreter: the document's tools through both serializers, as JSON on stdout.
FASTMCP_SCRIPT = """
import asyncio, json, sys
import yaml
from fastmcp import FastMCP
from fastmcp.server.transforms.search import serialize_tools_for_output_json, serialize_tools_for_output_markdown
text = open(sys.argv[1], encoding="utf-8").read()
spec = json.loads(text) if sys.argv[1].endswith(".json") else yaml.safe_load(text)
async def main():
    tools = await FastMCP.from_openapi(spec).list_tools()
    return {
        t.name: [
            json.dumps(serialize_tools_for_output_json([t]), separators=(",", ":"), ensure_ascii=False),
            serialize_tools_for_output_markdown([t]),
        ]
        for t in tools
    }
print(json.dumps(asyncio.run(main())))
"""


def summary(counts: list[int]) -> dict[str, float]:
    return {"mean": statistics.mean(counts), "median": statistics.median(counts), "max": max(counts)}


def ours(path: Path) -> dict[str, Any]:
    catalog = load_catalog(path)
    views = {view: MetaTools(catalog, view=view) for view in ("json", "compact")}
    return {
        view: summary([count_tokens(dumps(meta.tool_get({"tool_name": t.name})["tools"][0])) for t in catalog.tools])
        for view, meta in views.items()
    } | {"tools": len(catalog.tools)}


def theirs(path: Path, python: str) -> dict[str, Any]:
    done = subprocess.run([python, "-c", FASTMCP_SCRIPT, str(path)], capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": last[:200]}
    texts: dict[str, list[str]] = json.loads(done.stdout)
    return {
        "tools": len(texts),
        "json": summary([count_tokens(pair[0]) for pair in texts.values()]),
        "markdown": summary([count_tokens(pair[1]) for pair in texts.values()]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help=f"documents (default all: {', '.join(REAL)})")
    parser.add_argument("--fastmcp-python", required=True, help="a Python interpreter that has fastmcp installed")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = {}
    for name in args.names or list(REAL):
        path = REAL[name]
        if path.is_file():
            rows[name] = {"ours": ours(path), "fastmcp": theirs(path, args.fastmcp_python)}
    if args.json:
        print(json.dumps(rows, indent=2))
        return

    def cell(figure: dict[str, float]) -> str:
        return f"{figure['mean']:,.0f} / {figure['median']:,.0f} / {figure['max']:,}"

    print("TOOL_GET, one tool's entry, cl100k tokens, mean / median / max")
    print(f"{'document':<13} {'ours: JSON':>22} {'ours: compact':>22} {'FastMCP: JSON':>26} {'FastMCP: markdown':>22}")
    for name, row in rows.items():
        mine, fm = row["ours"], row["fastmcp"]
        if "error" in fm:
            theirs_cells = f"  FastMCP cannot load it: {fm['error']}"
        else:
            theirs_cells = f"{cell(fm['json']):>26} {cell(fm['markdown']):>22}"
        print(f"{name:<13} {cell(mine['json']):>22} {cell(mine['compact']):>22} {theirs_cells}")


if __name__ == "__main__":
    main()
