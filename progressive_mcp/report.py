"""The token report behind `progressive-mcp tokens`: what each surface, meta-tool answer and flow costs.

Counts use real tokenizers (cl100k_base and o200k_base, offline) over the compact JSON a client
receives, and are set against the project's token budgets and, for the bundled Alpha Vantage catalog,
the official Alpha Vantage MCP server's measured figures (docs/measurements.md).
Tool calls go to the offline sample upstream, started in-process (Alpha Vantage only). Example::

    print(token_report())                          # tables
    print(token_report(as_json=True))              # the same figures as JSON
    measure_tokens(load_catalog())["tool_get_average"]   # the budgeted figures alone (cl100k, no upstream)
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from progressive_mcp.calls.upstream import UpstreamClient
from progressive_mcp.catalog import Catalog
from progressive_mcp.offline.sample_upstream import SampleUpstream
from progressive_mcp.sources import load_catalog
from progressive_mcp.surfaces.auto import DEFAULT_AUTO_DIRECT_TOKENS
from progressive_mcp.surfaces.metatools import (
    DETAIL_LEVELS,
    SEARCH_SCHEMA_HITS,
    SEARCH_SCHEMA_SHARE,
    TOOL_CALL,
    TOOL_GET,
    TOOL_LIST,
    TOOL_SEARCH,
)
from progressive_mcp.surfaces.surface import CallContext, Surface
from progressive_mcp.tokens import ENCODINGS, count_tokens, dumps

# The project's token budgets, in cl100k tokens; keys name the report's figures (see `budget_figures`).
BUDGETS = {
    "progressive_tools_list": 450,
    "progressive_tools_list_compact": 450,  # the same, with `--schema-view compact`'s descriptions
    "code_tools_list": 600,
    "tool_list_default": 2000,
    "tool_get_average": 300,
    "direct_tools_list": 30000,
}
# The official Alpha Vantage MCP server, measured on the same basis (cl100k); shown for that catalog only.
OFFICIAL = {
    "progressive_tools_list": "410 for 3 meta-tools",
    "tool_list_default": "4,155-4,672",
    "tool_get_average": "~977, no enums or defaults",
    "direct_tools_list": "29,286, without enums or defaults",
    "tool_search": "no search",
    # What it reads before calling, from the figures above (its tools/list, TOOL_LIST, one TOOL_GET).
    "list_get_call": "5,542-6,059 (tools/list + TOOL_LIST + TOOL_GET)",
    "direct": "29,286 (tools/list)",
}
ENCODING_LABELS = {
    "cl100k": "cl100k_base (GPT-4, GPT-3.5)",
    "o200k": "o200k_base (GPT-4o and later)",
}
SEARCH_QUERIES = (
    "give me aapl price",
    "daily closing prices for tesla",
    "RSI of NVDA",
    "EUR to USD exchange rate",
    "US inflation CPI",
)
# Category combinations whose `auto` choice the report shows for the bundled catalog (each a URL's ?categories=);
# another catalog shows its first two and first three categories together.
AUTO_COMBINATIONS = (("forex", "crypto"), ("stocks", "fundamentals", "intelligence"), ("stocks", "technicals"))
# Any key works with the sample upstream; it never leaves the process.
SAMPLE_KEY = "token-report-key"

Counts = dict[str, float]  # tokens per tokenizer (short name: cl100k, o200k)


@dataclass(frozen=True)
class Task:
    """A typical request, the tool that answers it and the arguments a model would pass."""

    name: str
    query: str
    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)


TASKS = (
    Task("latest price of AAPL", "give me aapl price", "GLOBAL_QUOTE", {"symbol": "AAPL"}),
    Task(
        "TSLA daily closes, last 100 days",
        "daily closing prices for tesla",
        "TIME_SERIES_DAILY",
        {"symbol": "TSLA", "outputsize": "compact"},
    ),
    Task(
        "EUR to USD rate",
        "EUR to USD exchange rate",
        "CURRENCY_EXCHANGE_RATE",
        {"from_currency": "EUR", "to_currency": "USD"},
    ),
)
FLOWS = {
    "list_get_call": "TOOL_LIST -> TOOL_GET -> TOOL_CALL",
    "search_get_call": "TOOL_SEARCH -> TOOL_GET -> TOOL_CALL",
    "search_call": "TOOL_SEARCH -> TOOL_CALL (no schema seen)",
    "search_schemas_call": "TOOL_SEARCH {schemas: true} -> TOOL_CALL",
    "direct": "direct: tools/list -> the tool",
}


class _Counter:
    """Counts a text with each tokenizer of the report."""

    def __init__(self, encodings: Sequence[str]) -> None:
        unknown = [e for e in encodings if e not in ENCODINGS]
        if unknown or not encodings:
            raise ValueError(f"tokenizers must be among {', '.join(ENCODINGS)}, not {', '.join(unknown) or 'none'}")
        self.encodings = tuple(encodings)

    def __call__(self, text: str) -> Counts:
        return {e: count_tokens(text, ENCODINGS[e]) for e in self.encodings}


def _combine(counts: Sequence[Counts], how: Callable[[list[float]], float]) -> Counts:
    return {e: _round(how([c[e] for c in counts])) for e in counts[0]}


def _round(value: float) -> float:
    return int(value) if float(value).is_integer() else round(value, 1)


def _total(counts: Iterable[Counts]) -> Counts:
    return _combine(list(counts), sum)


def _figure(counts: Counts, key: str | None = None, **extra: Any) -> dict[str, Any]:
    """A figure of the JSON report: counts per tokenizer, with the budget and official figure of `key`."""
    figure: dict[str, Any] = {"tokens": counts, **extra}
    if key in BUDGETS:
        figure["budget"] = BUDGETS[key]
    if key in OFFICIAL:
        figure["official"] = OFFICIAL[key]
    return figure


def tools_list_text(surface: Surface) -> str:
    """The `tools` array of a tools/list answer, as the compact wire JSON a client receives."""
    return dumps(list(surface.tool_definitions()))


def tools_list_tokens(surface: Surface) -> int:
    """Tokens (cl100k) of the `tools` array of a tools/list answer."""
    return count_tokens(tools_list_text(surface))


def _answer(surface: Surface, tool: str, arguments: dict[str, Any]) -> str:
    """The text of a successful tools/call answer (what the model reads)."""
    result = surface.call_tool_wire(tool, arguments, CallContext(api_key=SAMPLE_KEY))
    text: str = result["content"][0]["text"]
    if result["isError"]:
        raise RuntimeError(f"{tool} {dumps(arguments)} failed while measuring tokens: {text}")
    return text


def build_report(
    catalog: Catalog, encodings: Sequence[str] = tuple(ENCODINGS), *, upstream_url: str | None = None
) -> dict[str, Any]:
    """Every figure of the report as JSON data. Without `upstream_url` (the sample upstream's
    address) the sections that need tool calls, `tasks` and `flows`, are left out."""
    count = _Counter(encodings)
    upstream = UpstreamClient(catalog.api, base_url=upstream_url, retries=0) if upstream_url else None
    # The JSON view (the default) is what the budgets and the flows measure; the compact view beside it.
    progressive = Surface(catalog, mode="progressive", upstream=upstream, schema_view="json")
    compact = Surface(catalog, mode="progressive", schema_view="compact")
    direct = Surface(catalog, mode="direct", upstream=upstream, meta=progressive.meta)
    hybrid = Surface(catalog, mode="hybrid", meta=progressive.meta)
    code = Surface(catalog, mode="code", upstream=upstream, meta=progressive.meta)

    def answer(tool: str, arguments: dict[str, Any]) -> Counts:
        return count(_answer(progressive, tool, arguments))

    tool_get = {t.name: answer(TOOL_GET, {"tool_name": t.name}) for t in catalog.tools}
    heaviest = {e: max(tool_get, key=lambda name: tool_get[name][e]) for e in count.encodings}
    compact_get = {t.name: count(_answer(compact, TOOL_GET, {"tool_name": t.name})) for t in catalog.tools}
    compact_heaviest = {e: max(compact_get, key=lambda name: compact_get[name][e]) for e in count.encodings}
    report: dict[str, Any] = {
        "tokenizers": {e: ENCODING_LABELS[e] for e in count.encodings},
        "counted_on": "the compact JSON text a client receives; budgets apply to cl100k",
        "catalog": {"tools": len(catalog), "categories": len(catalog.categories), "version": catalog.version},
        "tools_list": {
            "progressive": _figure(count(tools_list_text(progressive)), "progressive_tools_list"),
            "progressive_compact": _figure(count(tools_list_text(compact)), "progressive_tools_list_compact"),
            "direct": _figure(count(tools_list_text(direct)), "direct_tools_list"),
            "hybrid": _figure(count(tools_list_text(hybrid))),
            "code": _figure(count(tools_list_text(code)), "code_tools_list"),
        },
        "tool_list": {
            "default_detail": {"catalog": "names", "category": "summary"},
            "catalog": {
                detail: _figure(
                    answer(TOOL_LIST, {"detail": detail}), "tool_list_default" if detail == "names" else None
                )
                for detail in DETAIL_LEVELS
            },
            "by_category": {
                category: {
                    "tools": size,
                    **{
                        detail: _figure(answer(TOOL_LIST, {"category": category, "detail": detail}))
                        for detail in DETAIL_LEVELS
                    },
                }
                for category in catalog.categories
                if (size := sum(t.category == category for t in catalog.tools))
            },
        },
        "tool_search": _search_section(progressive, count, compact),
        "auto": _auto_section(progressive, count),
        "tool_get": {
            "mean": _figure(_combine(list(tool_get.values()), statistics.mean), "tool_get_average"),
            "median": _figure(_combine(list(tool_get.values()), statistics.median)),
            "max": _figure({e: tool_get[heaviest[e]][e] for e in count.encodings}, tool=heaviest),
            "total": _figure(_total(tool_get.values()), calls=len(tool_get)),
        },
        "tool_get_compact": {  # PMCP_SCHEMA_VIEW=compact (schema_compact.py)
            "mean": _figure(_combine(list(compact_get.values()), statistics.mean)),
            "median": _figure(_combine(list(compact_get.values()), statistics.median)),
            "max": _figure({e: compact_get[compact_heaviest[e]][e] for e in count.encodings}, tool=compact_heaviest),
        },
    }
    skipped = flows_skipped(catalog)
    if skipped:
        report["flows_skipped"] = skipped
        _drop_official(report)  # the official server's figures are Alpha Vantage's: no comparison here
    elif upstream_url:
        report.update(_flows_section(progressive, direct, count, report["tools_list"]))
        report["multi_step"] = _multi_step_section(progressive, direct, code, count, report["tools_list"])
    report["budgets"] = _budget_checks(report)
    return report


def _auto_section(progressive: Surface, count: _Counter, threshold: int = DEFAULT_AUTO_DIRECT_TOKENS) -> dict[str, Any]:
    """What `auto` picks (at the default threshold) for each category, a few combinations and the whole catalog,
    beside the direct tools/list it decides on."""
    catalog = progressive.catalog
    names = list(catalog.categories)
    combinations: list[tuple[str, ...]] = [c for c in AUTO_COMBINATIONS if set(c) <= set(names)]
    if not combinations:
        combinations = [tuple(names[:size]) for size in (2, 3) if len(names) > size]

    def row(categories: tuple[str, ...] | None) -> dict[str, Any]:
        chosen = frozenset(categories) if categories else None
        surface = Surface(catalog, mode="auto", categories=chosen, meta=progressive.meta, auto_direct_tokens=threshold)
        assert surface.auto is not None
        direct = Surface(catalog, mode="direct", categories=chosen, meta=progressive.meta)
        return {"tools": surface.auto.tools, "direct": _figure(count(tools_list_text(direct))), "picks": surface.mode}

    return {
        "threshold": threshold,
        "by_category": {c: row((c,)) for c in catalog.categories},
        "combinations": {",".join(c): row(c) for c in combinations},
        "catalog": row(None),
    }


def search_queries(catalog: Catalog) -> tuple[str, ...]:
    """Queries to measure TOOL_SEARCH answers with: the fixed Alpha Vantage ones on the bundled catalog; on
    another, the first example question (else the title) of one tool in each of up to five categories."""
    if all(task.tool in catalog for task in TASKS):
        return SEARCH_QUERIES
    picked: list[str] = []
    for category in catalog.categories:
        tool = next((t for t in catalog.tools if t.category == category), None)
        if tool is not None:
            picked.append(tool.examples[0] if tool.examples else tool.title)
        if len(picked) == len(SEARCH_QUERIES):
            break
    return tuple(picked)


def flows_skipped(catalog: Catalog) -> str | None:
    """Why the tasks and flows cannot be measured on this catalog (None when they can)."""
    missing = [task.tool for task in TASKS if task.tool not in catalog]
    if not missing:
        return None
    return (
        "tasks and flows skipped: they call Alpha Vantage tools (" + ", ".join(missing) + ") through the offline "
        "sample upstream, which answers only the bundled Alpha Vantage spec"
    )


def _drop_official(value: Any) -> None:
    if isinstance(value, dict):
        value.pop("official", None)
        for member in value.values():
            _drop_official(member)


def _search_section(surface: Surface, count: _Counter, compact: Surface) -> dict[str, Any]:
    """TOOL_SEARCH's answers to the typical queries, plain and with `schemas` (JSON Schema, and `compact`'s
    argument lines)."""
    queries: list[dict[str, Any]] = []
    for query in search_queries(surface.catalog):
        plain = _answer(surface, TOOL_SEARCH, {"query": query})
        with_schemas = _answer(surface, TOOL_SEARCH, {"query": query, "schemas": True})
        with_lines = _answer(compact, TOOL_SEARCH, {"query": query, "schemas": True})
        queries.append(
            {
                "query": query,
                "results": [hit["name"] for hit in json.loads(plain)["results"]],
                "plain": count(plain),
                "schemas": count(with_schemas),
                "schemas_compact": count(with_lines),
            }
        )
    plain_counts = [q["plain"] for q in queries]
    schema_counts = [q["schemas"] for q in queries]
    compact_counts = [q["schemas_compact"] for q in queries]
    return {
        "queries": queries,
        "mean": _figure(_combine(plain_counts, statistics.mean), "tool_search"),
        "max": _figure(_combine(plain_counts, max)),
        "schemas_rule": f"the best hit and up to {SEARCH_SCHEMA_HITS - 1} more scoring at least "
        f"{SEARCH_SCHEMA_SHARE:.0%} of it carry their inputSchema",
        "schemas_mean": _figure(_combine(schema_counts, statistics.mean)),
        "schemas_max": _figure(_combine(schema_counts, max)),
        "schemas_compact_mean": _figure(_combine(compact_counts, statistics.mean)),
        "schemas_compact_max": _figure(_combine(compact_counts, max)),
    }


def _flows_section(
    progressive: Surface, direct: Surface, count: _Counter, tools_list: dict[str, Any]
) -> dict[str, Any]:
    """`tasks` (each task's call answer and search rank) and `flows` (what the model reads per flow)."""
    listed = {"progressive": tools_list["progressive"]["tokens"], "direct": tools_list["direct"]["tokens"]}
    tasks: list[dict[str, Any]] = []
    per_flow: dict[str, list[dict[str, Any]]] = {flow: [] for flow in FLOWS}
    for task in TASKS:
        steps: dict[str, tuple[Counts, Counts]] = {}  # step -> (its arguments, its answer)

        def step(surface: Surface, tool: str, arguments: dict[str, Any], label: str | None = None) -> str:
            text = _answer(surface, tool, arguments)
            steps[label or tool] = (count(dumps(arguments)), count(text))  # noqa: B023 (called in this iteration only)
            return text

        searched = json.loads(step(progressive, TOOL_SEARCH, {"query": task.query}))
        # Where the answer names the tool: its detailed hits, then its tail of `name: summary` lines.
        tail = searched.get("more", "")
        names = [hit["name"] for hit in searched["results"]] + [
            line.split(": ", 1)[0] for line in tail.split("\n") if line
        ]
        rank = names.index(task.tool) + 1 if task.tool in names else None
        with_schemas = step(progressive, TOOL_SEARCH, {"query": task.query, "schemas": True}, "TOOL_SEARCH {schemas}")
        schema_shown = any(h["name"] == task.tool and "inputSchema" in h for h in json.loads(with_schemas)["results"])
        step(progressive, TOOL_LIST, {})
        step(progressive, TOOL_GET, {"tool_name": task.tool})
        call = step(progressive, TOOL_CALL, {"tool_name": task.tool, "arguments": task.arguments})
        direct_call = step(direct, task.tool, task.arguments, "direct call")
        if call != direct_call:  # the flows below assume one answer for every flow
            raise RuntimeError(f"{task.tool}: TOOL_CALL and the direct call answered differently")
        call_answer = steps[TOOL_CALL][1]
        tasks.append(
            {
                "task": task.name,
                "tool": task.tool,
                "arguments": task.arguments,
                "search_query": task.query,
                "search_rank": rank,
                "schema_in_search": schema_shown,
                "call_answer": count(call),
            }
        )
        sequences = {
            "list_get_call": (TOOL_LIST, TOOL_GET, TOOL_CALL),
            "search_get_call": (TOOL_SEARCH, TOOL_GET, TOOL_CALL),
            "search_call": (TOOL_SEARCH, TOOL_CALL),
            "search_schemas_call": ("TOOL_SEARCH {schemas}", TOOL_CALL),
            "direct": ("direct call",),
        }
        # Whether the flow can work: search must show the tool (first, for a call made without its
        # schema; with its schema, for the schemas flow).
        reached = {
            "list_get_call": True,
            "search_get_call": rank is not None,
            "search_call": rank == 1,
            "search_schemas_call": schema_shown,
            "direct": True,
        }
        for flow, sequence in sequences.items():
            surface_list = listed["direct" if flow == "direct" else "progressive"]
            parts = [surface_list] + [c for name in sequence for c in steps[name]]
            total = _total(parts)
            per_flow[flow].append(
                {
                    "task": task.name,
                    "reached": reached[flow],
                    "total": total,
                    "without_call_answer": {e: _round(total[e] - call_answer[e]) for e in total},
                    "steps": [{"step": "tools/list", "answer": surface_list}]
                    + [{"step": name, "arguments": steps[name][0], "answer": steps[name][1]} for name in sequence],
                }
            )
    flows = {
        flow: {
            "label": FLOWS[flow],
            "mean": _figure(_combine([t["total"] for t in runs], statistics.mean)),
            "mean_without_call_answer": _figure(
                _combine([t["without_call_answer"] for t in runs], statistics.mean), flow
            ),
            "tasks": runs,
        }
        for flow, runs in per_flow.items()
    }
    return {
        "tasks": {
            "upstream": "the offline sample upstream (synthetic, deterministic answers)",
            "items": tasks,
            "call_answer_mean": _figure(_combine([t["call_answer"] for t in tasks], statistics.mean)),
        },
        "flows": flows,
    }


# On a data-heavy task, what the model reads in code mode is at most this share of the progressive flow's.
CODE_MODE_MAX_SHARE = 0.10


@dataclass(frozen=True)
class MultiStepTask:
    """A question that needs several calls: the progressive flow's steps (search, schemas, one TOOL_CALL per
    call) and direct calls, against one code-mode script; `data_heavy` when its answers are long series."""

    name: str
    query: str
    tools: tuple[str, ...]
    calls: tuple[tuple[str, dict[str, Any]], ...]
    script: str
    data_heavy: bool


FIVE_TICKER_SCRIPT = """\
import asyncio
symbols = ["AAPL", "MSFT", "NVDA", "AMZN", "GOOGL"]
series = await asyncio.gather(*[TIME_SERIES_DAILY(symbol=s) for s in symbols])
gains = {}
for symbol, data in zip(symbols, series):
    bars = data["Time Series (Daily)"]
    days = sorted(bars)
    gains[symbol] = float(bars[days[-1]]["4. close"]) / float(bars[days[0]]["4. close"]) - 1
best = max(gains, key=lambda s: gains[s])
{"best": best, "gain_pct": round(gains[best] * 100, 2)}
"""
SMA_CROSS_SCRIPT = """\
import asyncio
prices, sma = await asyncio.gather(
    TIME_SERIES_DAILY(symbol="AAPL"),
    SMA(symbol="AAPL", interval="daily", time_period=20, series_type="close"),
)
bars, averages = prices["Time Series (Daily)"], sma["Technical Analysis: SMA"]
days = sorted(d for d in bars if d in averages)[-6:]
above = [float(bars[d]["4. close"]) > float(averages[d]["SMA"]) for d in days]
{"above_sma_now": above[-1], "crossed_in_last_5_days": any(a != b for a, b in zip(above, above[1:]))}
"""
CURRENCY_CHAIN_SCRIPT = """\
import asyncio
to_usd, to_jpy = await asyncio.gather(
    CURRENCY_EXCHANGE_RATE(from_currency="EUR", to_currency="USD"),
    CURRENCY_EXCHANGE_RATE(from_currency="USD", to_currency="JPY"),
)
rate = lambda answer: float(answer["Realtime Currency Exchange Rate"]["5. Exchange Rate"])
{"eur_1000_in_jpy": round(1000 * rate(to_usd) * rate(to_jpy), 2)}
"""
MULTI_STEP_TASKS = (
    MultiStepTask(
        "five-ticker comparison",
        "daily closing prices of a stock",
        ("TIME_SERIES_DAILY",),
        tuple(("TIME_SERIES_DAILY", {"symbol": s}) for s in ("AAPL", "MSFT", "NVDA", "AMZN", "GOOGL")),
        FIVE_TICKER_SCRIPT,
        data_heavy=True,
    ),
    MultiStepTask(
        "20-day SMA crossover",
        "20 day simple moving average of apple",
        ("SMA", "TIME_SERIES_DAILY"),
        (
            ("TIME_SERIES_DAILY", {"symbol": "AAPL"}),
            ("SMA", {"symbol": "AAPL", "interval": "daily", "time_period": 20, "series_type": "close"}),
        ),
        SMA_CROSS_SCRIPT,
        data_heavy=True,
    ),
    MultiStepTask(
        "currency conversion chain",
        "currency exchange rate",
        ("CURRENCY_EXCHANGE_RATE",),
        (
            ("CURRENCY_EXCHANGE_RATE", {"from_currency": "EUR", "to_currency": "USD"}),
            ("CURRENCY_EXCHANGE_RATE", {"from_currency": "USD", "to_currency": "JPY"}),
        ),
        CURRENCY_CHAIN_SCRIPT,
        data_heavy=False,
    ),
)


def _multi_step_section(
    progressive: Surface, direct: Surface, code: Surface, count: _Counter, tools_list: dict[str, Any]
) -> dict[str, Any]:
    """What the model reads for each multi-step task: tools/list, then each call's arguments and answer."""
    tasks = []
    for task in MULTI_STEP_TASKS:
        flows: dict[str, list[tuple[str, str, str]]] = {
            "progressive": [
                ("TOOL_SEARCH", dumps({"query": task.query}), _answer(progressive, TOOL_SEARCH, {"query": task.query})),
                (
                    "TOOL_GET",
                    dumps({"tool_name": list(task.tools)}),
                    _answer(progressive, TOOL_GET, {"tool_name": list(task.tools)}),
                ),
                *[
                    (
                        TOOL_CALL,
                        dumps(call := {"tool_name": tool, "arguments": args}),
                        _answer(progressive, TOOL_CALL, call),
                    )
                    for tool, args in task.calls
                ],
            ],
            "direct": [(tool, dumps(args), _answer(direct, tool, args)) for tool, args in task.calls],
            "code": [
                ("TOOL_SEARCH", dumps({"query": task.query}), _answer(code, TOOL_SEARCH, {"query": task.query})),
                (
                    "TOOL_GET",
                    dumps({"tool_name": list(task.tools)}),
                    _answer(code, TOOL_GET, {"tool_name": list(task.tools)}),
                ),
                ("TOOL_EXECUTE", dumps({"code": task.script}), _answer(code, "TOOL_EXECUTE", {"code": task.script})),
            ],
        }
        entry: dict[str, Any] = {"task": task.name, "data_heavy": task.data_heavy, "calls": len(task.calls)}
        for flow, steps in flows.items():
            listed = tools_list[flow]["tokens"]
            parts = [listed] + [count(text) for _step, arguments, answer in steps for text in (arguments, answer)]
            entry[flow] = {
                "total": _total(parts),
                "steps": [{"step": "tools/list", "answer": listed}]
                + [
                    {"step": step, "arguments": count(arguments), "answer": count(answer)}
                    for step, arguments, answer in steps
                ],
            }
        entry["code_answer"] = json.loads(flows["code"][-1][2])["result"]
        tasks.append(entry)
    return {
        "label": "what the model reads: tools/list + each call's arguments + each answer (code: the script is the "
        "arguments of TOOL_EXECUTE)",
        "tasks": tasks,
    }


def _budget_checks(report: dict[str, Any]) -> list[dict[str, Any]]:
    figures = {
        "progressive_tools_list": report["tools_list"]["progressive"],
        "progressive_tools_list_compact": report["tools_list"]["progressive_compact"],
        "code_tools_list": report["tools_list"]["code"],
        "tool_list_default": report["tool_list"]["catalog"]["names"],
        "tool_get_average": report["tool_get"]["mean"],
        "direct_tools_list": report["tools_list"]["direct"],
    }
    checks = [
        {"what": key, "tokens": figure["tokens"]["cl100k"], "budget": figure["budget"]}
        | {"ok": figure["tokens"]["cl100k"] <= figure["budget"]}
        for key, figure in figures.items()
        if "cl100k" in figure["tokens"]
    ]
    for task in report.get("multi_step", {}).get("tasks", []):
        if task["data_heavy"] and "cl100k" in task["code"]["total"]:
            ratio = task["code"]["total"]["cl100k"] / task["progressive"]["total"]["cl100k"]
            checks.append(
                {"what": f"code mode / progressive, {task['task']}", "ratio": round(ratio, 3)}
                | {"budget": CODE_MODE_MAX_SHARE, "ok": ratio <= CODE_MODE_MAX_SHARE}
            )
    return checks


def budget_figures(report: dict[str, Any]) -> dict[str, float]:
    """The budgeted figures of a report (cl100k), keyed like BUDGETS."""
    return {check["what"]: check["tokens"] for check in report["budgets"] if "tokens" in check}


def measure_tokens(catalog: Catalog) -> dict[str, float]:
    """The budgeted figures alone, cl100k, without tool calls (fast enough for tests)."""
    return budget_figures(build_report(catalog, ("cl100k",)))


def token_report(spec_path: Path | None = None, *, as_json: bool = False, encodings: Sequence[str] = ()) -> str:
    """The whole report (tool calls answered by the offline sample upstream), as tables or JSON."""
    catalog = load_catalog(spec_path)
    if flows_skipped(catalog):
        report = build_report(catalog, encodings or tuple(ENCODINGS))
    else:
        with SampleUpstream() as sample:
            report = build_report(catalog, encodings or tuple(ENCODINGS), upstream_url=sample.url)
    return json.dumps(report, indent=2, ensure_ascii=False) if as_json else render(report)


# -- text ---------------------------------------------------------------------------------------


def render(report: dict[str, Any]) -> str:
    """The report as plain-text tables (ASCII only, so any terminal shows it)."""
    encodings = list(report["tokenizers"])
    catalog = report["catalog"]
    lines = [
        f"Token counts: {catalog['tools']} tools in {catalog['categories']} categories, "
        "compact JSON as a client receives it.",
        "Tokenizers (bpe-openai, offline): " + "; ".join(f"{e} = {label}" for e, label in report["tokenizers"].items()),
        "Budgets are the project's, in cl100k"
        + ("." if "flows_skipped" in report else "; 'official': the official Alpha Vantage MCP server, measured."),
    ]

    def numbers(counts: Counts) -> list[str]:
        return [_number(counts[e]) for e in encodings]

    def row(label: str, figure: dict[str, Any]) -> list[str]:
        budget = figure.get("budget")
        verdict = ""
        if budget is not None and "cl100k" in figure["tokens"]:
            verdict = "ok" if figure["tokens"]["cl100k"] <= budget else "OVER"
        budget_text = f"<= {budget:,}" if budget is not None else ""
        return [label, *numbers(figure["tokens"]), budget_text, verdict, figure.get("official", "")]

    tools_list, tool_list, search, get, compact_view = (
        report["tools_list"],
        report["tool_list"],
        report["tool_search"],
        report["tool_get"],
        report["tool_get_compact"],
    )
    rows = [
        row("progressive tools/list (4 meta-tools)", tools_list["progressive"]),
        row("progressive tools/list, compact schema view", tools_list["progressive_compact"]),
        row("direct tools/list (whole catalog)", tools_list["direct"]),
        row("hybrid tools/list", tools_list["hybrid"]),
        row("code tools/list (TOOL_LIST, TOOL_SEARCH, TOOL_GET, TOOL_EXECUTE)", tools_list["code"]),
        row("TOOL_LIST detail=names, whole catalog (default)", tool_list["catalog"]["names"]),
        row("TOOL_LIST detail=summary, whole catalog", tool_list["catalog"]["summary"]),
        row(f"TOOL_SEARCH, mean of {len(search['queries'])} queries", search["mean"]),
        row(f"TOOL_SEARCH, max of {len(search['queries'])} queries", search["max"]),
        row(f"TOOL_SEARCH schemas=true, mean (best 1-{SEARCH_SCHEMA_HITS} hits with schema)", search["schemas_mean"]),
        row("TOOL_SEARCH schemas=true, max", search["schemas_max"]),
        row("TOOL_SEARCH schemas=true, mean, compact view", search["schemas_compact_mean"]),
        row("TOOL_SEARCH schemas=true, max, compact view", search["schemas_compact_max"]),
        row("TOOL_GET one tool, mean", get["mean"]),
        row("TOOL_GET one tool, median", get["median"]),
        row(
            "TOOL_GET one tool, max (" + "/".join(dict.fromkeys(get["max"]["tool"].values())) + ")",
            get["max"],
        ),
        row(f"TOOL_GET every tool, one at a time (sum of {get['total']['calls']})", get["total"]),
        row("TOOL_GET one tool, mean, compact view (PMCP_SCHEMA_VIEW)", compact_view["mean"]),
        row("TOOL_GET one tool, median, compact view", compact_view["median"]),
        row(
            "TOOL_GET one tool, max, compact view ("
            + "/".join(dict.fromkeys(compact_view["max"]["tool"].values()))
            + ")",
            compact_view["max"],
        ),
    ]
    official_header = "" if "flows_skipped" in report else "official"
    lines += ["", *_table(["what", *encodings, "cl100k budget", "", official_header], rows)]

    detail_columns = [f"{detail} {e}" for detail in DETAIL_LEVELS for e in encodings]
    category_rows = [
        [name, str(entry["tools"]), *(_number(entry[d]["tokens"][e]) for d in DETAIL_LEVELS for e in encodings)]
        for name, entry in tool_list["by_category"].items()
    ]
    lines += ["", "TOOL_LIST per category (default there: summary)"]
    lines += _table(["category", "tools", *detail_columns], category_rows)

    auto = report["auto"]
    auto_rows = [
        [label, str(entry["tools"]), *numbers(entry["direct"]["tokens"]), entry["picks"]]
        for label, entry in [
            *auto["by_category"].items(),
            *auto["combinations"].items(),
            ("(whole catalog)", auto["catalog"]),
        ]
    ]
    lines += [
        "",
        f"auto: direct when a direct tools/list costs at most {auto['threshold']:,} cl100k tokens (the default; "
        "PMCP_AUTO_DIRECT_TOKENS sets another), else progressive",
    ]
    lines += _table(["?categories=", "tools", *(f"direct {e}" for e in encodings), "auto picks"], auto_rows)

    query_rows = [
        [repr(q["query"]), ", ".join(q["results"][:2]) or "-", *numbers(q["plain"]), *numbers(q["schemas"])]
        for q in search["queries"]
    ]
    lines += ["", "TOOL_SEARCH per query"]
    lines += _table(["query", "top hits", *encodings, *(f"schemas {e}" for e in encodings)], query_rows)

    if "flows" in report:
        tasks = report["tasks"]
        task_rows = [
            [
                t["task"],
                f"{t['tool']} {dumps(t['arguments'])}",
                str(t["search_rank"] or "-"),
                *numbers(t["call_answer"]),
            ]
            for t in tasks["items"]
        ]
        task_rows.append(["mean", "", "", *numbers(tasks["call_answer_mean"]["tokens"])])
        lines += ["", f"Tasks: tool calls answered by {tasks['upstream']}"]
        lines += _table(["task", "call", "search rank", *(f"answer {e}" for e in encodings)], task_rows)

        task_names = [t["task"] for t in tasks["items"]]
        lines += [
            "",
            "Flows: what the model reads for a task (tools/list + each call's arguments + each answer),"
            f" mean of {len(task_names)} tasks;",
            "'without answer' leaves out the tool's own answer, the same in every flow.",
        ]
        flow_rows = []
        for entry in report["flows"].values():
            missed = [t["task"] for t in entry["tasks"] if not t["reached"]]
            label = entry["label"] + (f" [misses: {', '.join(missed)}]" if missed else "")
            flow_rows.append(
                [
                    label,
                    *numbers(entry["mean"]["tokens"]),
                    *numbers(entry["mean_without_call_answer"]["tokens"]),
                    entry["mean_without_call_answer"].get("official", ""),
                ]
            )
        lines += _table(
            ["flow", *(f"total {e}" for e in encodings), *(f"without answer {e}" for e in encodings), "official"],
            flow_rows,
        )
        for e in encodings:
            per_task_rows = [
                [entry["label"], *(_number(t["total"][e]) for t in entry["tasks"])]
                for entry in report["flows"].values()
            ]
            lines += ["", f"Flows per task, total, {e}"]
            lines += _table(["flow", *task_names], per_task_rows)

    if "multi_step" in report:
        lines += ["", "Multi-step tasks: " + report["multi_step"]["label"]]
        step_rows = []
        for task in report["multi_step"]["tasks"]:
            for flow in ("progressive", "direct", "code"):
                share = ""
                if flow == "code":
                    ratio = task["code"]["total"][encodings[0]] / task["progressive"]["total"][encodings[0]]
                    share = f"{ratio:.1%} of progressive"
                step_rows.append(
                    [task["task"] if flow == "progressive" else "", flow, *numbers(task[flow]["total"]), share]
                )
        lines += _table(["task", "flow", *(f"total {e}" for e in encodings), ""], step_rows)
    if "flows_skipped" in report:
        lines += ["", f"Note: {report['flows_skipped']}."]
    checks = report["budgets"]
    if checks:
        failed = [c["what"] for c in checks if not c["ok"]]
        lines += ["", "Budgets (cl100k): " + ("all hold" if not failed else "OVER: " + ", ".join(failed))]
        lines += [
            f"  {c['what']}: {c['ratio']:.1%} (<= {c['budget']:.0%}) {'ok' if c['ok'] else 'OVER'}"
            for c in checks
            if "ratio" in c
        ]
    return "\n".join(lines)


def _number(value: float) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:,.1f}"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Aligned columns: numbers (and their headers) to the right, text to the left."""
    columns = list(zip(headers, *rows, strict=True))
    widths = [max(len(cell) for cell in column) for column in columns]
    numeric = [all(_numeric(cell) or not cell for cell in column[1:]) for column in columns]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            cell.rjust(width) if right else cell.ljust(width)
            for cell, width, right in zip(cells, widths, numeric, strict=True)
        ).rstrip()

    return [line(headers), *(line(r) for r in rows)]


def _numeric(cell: str) -> bool:
    return cell.replace(",", "").replace(".", "").isdigit()
