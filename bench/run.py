"""Benchmarks that print figures (never pass/fail): cold start, catalog build, warm meta-tool calls.

Run with `make bench` (or `.venv/bin/python bench/run.py`). Each figure says what it measured.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

COLD_SNIPPET = """
import time
started = time.perf_counter()
from progressive_mcp.sources import load_catalog
from progressive_mcp.surfaces.surface import Surface
imported = time.perf_counter()
surface = Surface(load_catalog())
built = time.perf_counter()
print(f"{(imported - started) * 1000:.1f} {(built - imported) * 1000:.1f}")
"""


def cold_start(runs: int = 7) -> tuple[float, float]:
    """Median import time and catalog+surface build time in fresh interpreters."""
    imports, builds = [], []
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # bytecode, as when deployed
    subprocess.run([sys.executable, "-c", COLD_SNIPPET], capture_output=True, cwd=ROOT, env=env, check=True)
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", COLD_SNIPPET], capture_output=True, text=True, cwd=ROOT, env=env, check=True
        )
        imported_ms, built_ms = map(float, out.stdout.split())
        imports.append(imported_ms)
        builds.append(built_ms)
    return statistics.median(imports), statistics.median(builds)


def per_call_ms(fn: Callable[[], object], repeat: int = 2000) -> float:
    fn()
    samples = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(repeat):
            fn()
        samples.append((time.perf_counter() - started) * 1000 / repeat)
    return min(samples)


def main() -> int:
    from progressive_mcp.sources import load_catalog
    from progressive_mcp.surfaces.surface import CallContext, Surface

    import_ms, build_ms = cold_start()
    catalog = load_catalog()
    surface = Surface(catalog)
    direct = Surface(catalog, mode="direct")
    ctx = CallContext()

    def wire(value: object) -> str:
        """The JSON text a transport sends: every figure below includes producing it."""
        return json.dumps(value.model_dump(by_alias=True, exclude_none=True, mode="json"))  # type: ignore[attr-defined]

    def tools_list(s: Surface) -> str:
        return json.dumps([t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in s.list_tools()])

    figures = {
        "cold import of the core surface, median of 7 fresh interpreters (ms)": round(import_ms, 1),
        "spec load + catalog + surface build, cold (ms)": round(build_ms, 1),
        "warm tools/list to wire JSON, progressive (ms/call)": per_call_ms(lambda: tools_list(surface), 500),
        "warm tools/list to wire JSON, direct, 128 tools (ms/call)": per_call_ms(lambda: tools_list(direct), 50),
        "warm TOOL_LIST default, to wire JSON (ms/call)": per_call_ms(
            lambda: wire(surface.call_tool("TOOL_LIST", {}, ctx)), 500
        ),
        "warm TOOL_GET one tool, to wire JSON (ms/call)": per_call_ms(
            lambda: wire(surface.call_tool("TOOL_GET", {"tool_name": "TIME_SERIES_INTRADAY"}, ctx)), 500
        ),
        "warm TOOL_SEARCH, to wire JSON (ms/call)": per_call_ms(
            lambda: wire(surface.call_tool("TOOL_SEARCH", {"query": "give me aapl price"}, ctx)), 500
        ),
        "search index only, one query (ms)": per_call_ms(lambda: surface.meta.index.search("give me aapl price"), 500),
    }
    width = max(map(len, figures))
    print(f"progressive-mcp benchmarks, Python {sys.version.split()[0]}, {len(catalog)} tools")
    for label, value in figures.items():
        print(f"  {label:<{width}}  {value:.4g}")
    if "--json" in sys.argv:
        print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
