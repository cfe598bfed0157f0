"""The token report behind `progressive-mcp tokens`: what each surface and meta-tool answer costs.

Counts use a real tokenizer (cl100k_base) over the compact JSON a client receives, and are set
against the budgets in DESIGN.md. Example::

    print(token_report())                # a table
    measure_tokens(Catalog.load())       # the same figures as a dict
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from progressive_mcp.catalog import Catalog
from progressive_mcp.surface import CallContext, Surface
from progressive_mcp.tokens import TOKENIZER_LABEL, count_tokens, dumps

BUDGETS = {
    "progressive_tools_list": 450,
    "tool_list_default": 2000,
    "tool_get_average": 300,
    "direct_tools_list": 30000,
}


def tools_list_tokens(surface: Surface) -> int:
    """Tokens of the `tools` array of a tools/list answer, as compact wire JSON."""
    wire = [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in surface.list_tools()]
    return count_tokens(dumps(wire))


def _answer_tokens(surface: Surface, tool: str, arguments: dict[str, Any]) -> int:
    result = surface.call_tool(tool, arguments, CallContext())
    assert not result.is_error, result.content
    return count_tokens(result.content[0].text)  # type: ignore[union-attr]


def measure_tokens(catalog: Catalog) -> dict[str, Any]:
    progressive = Surface(catalog, mode="progressive")
    direct = Surface(catalog, mode="direct")
    per_tool = {t.name: _answer_tokens(progressive, "TOOL_GET", {"tool_name": t.name}) for t in catalog.tools}
    heaviest = max(per_tool, key=lambda name: per_tool[name])
    return {
        "tokenizer": TOKENIZER_LABEL,
        "tools": len(catalog),
        "progressive_tools_list": tools_list_tokens(progressive),
        "tool_list_default": _answer_tokens(progressive, "TOOL_LIST", {}),
        "tool_list_summary": _answer_tokens(progressive, "TOOL_LIST", {"detail": "summary"}),
        "tool_search_example": _answer_tokens(progressive, "TOOL_SEARCH", {"query": "give me aapl price"}),
        "tool_get_average": round(statistics.mean(per_tool.values()), 1),
        "tool_get_median": statistics.median(per_tool.values()),
        "tool_get_max": per_tool[heaviest],
        "tool_get_max_tool": heaviest,
        "direct_tools_list": tools_list_tokens(direct),
        "hybrid_tools_list": tools_list_tokens(Surface(catalog, mode="hybrid")),
    }


def token_report(spec_path: Path | None = None, *, as_json: bool = False) -> str:
    figures = measure_tokens(Catalog.load(spec_path))
    if as_json:
        return json.dumps(figures, indent=2)
    rows = [
        ("progressive tools/list (4 meta-tools)", "progressive_tools_list"),
        ("TOOL_LIST default answer (whole catalog)", "tool_list_default"),
        ("TOOL_LIST detail=summary (whole catalog)", "tool_list_summary"),
        ("TOOL_SEARCH 'give me aapl price'", "tool_search_example"),
        ("TOOL_GET one tool, average", "tool_get_average"),
        ("TOOL_GET one tool, median", "tool_get_median"),
        (f"TOOL_GET one tool, maximum ({figures['tool_get_max_tool']})", "tool_get_max"),
        ("direct tools/list (whole catalog)", "direct_tools_list"),
        ("hybrid tools/list", "hybrid_tools_list"),
    ]
    lines = [f"Token counts, {figures['tokenizer']}, {figures['tools']} tools, compact JSON as sent:", ""]
    lines.append(f"{'what':<52} {'tokens':>8} {'budget':>8}  ")
    for label, key in rows:
        budget = BUDGETS.get(key)
        verdict = "" if budget is None else ("ok" if figures[key] <= budget else "OVER")
        lines.append(f"{label:<52} {figures[key]:>8} {budget if budget else '':>8}  {verdict}")
    return "\n".join(lines)
