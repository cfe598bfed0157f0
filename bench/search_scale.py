"""TOOL_SEARCH at scale: index build time, index memory and warm query latency at 128, 1,000 and 5,000 tools.

Prints figures, never pass/fail; a last line compares them with DESIGN.md's budgets (TOOL_SEARCH warm ≤ 0.3 ms at
130 tools, ≤ 5 ms at 5,000). Catalogs beyond the real 128 tools come from bench/synthetic_spec.py (invented
companies × 8 tools each, seeded). For each size:

- build: spec data → validated Catalog (once); `SearchIndex(tools)` and the whole `Surface` (MetaTools with its
  index, meta-tool definitions), median of 3;
- memory of the index, measured in a fresh interpreter so no earlier size's freed memory is reused: the RSS growth
  (VmRSS in /proc/self/status) per index while building 3 that are kept (memory freed by the catalog build is
  reused once, not per copy), and tracemalloc's current (what an index keeps) and peak (what building it needs at
  most) for one more;
- warm latency over a fixed list of 30 queries (company names and tickers, finance jargon, off-topic), each call
  timed alone: the bare `SearchIndex.search` and `Surface.call_tool_wire("TOOL_SEARCH", ...)` (what an agent gets:
  argument checks, the result object and its JSON text). Mean is the best of the rounds' means; p50/p99 are over
  every call of every round.

Run with `make bench` or `.venv/bin/python bench/search_scale.py [--sizes 128,1000,5000] [--rounds 5] [--json]`.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import textwrap
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.synthetic_spec import companies, real_tool_count, synthetic_spec  # noqa: E402
from progressive_mcp.catalog import Catalog  # noqa: E402
from progressive_mcp.search.index import SearchIndex  # noqa: E402
from progressive_mcp.sources.spec import build_catalog as catalog_of  # noqa: E402
from progressive_mcp.sources.spec import parse_spec  # noqa: E402
from progressive_mcp.surfaces.surface import CallContext, Surface  # noqa: E402

DEFAULT_SIZES = (128, 1000, 5000)
BUILD_RUNS = 3
ROUND_SECONDS = 0.25  # each round repeats the query list until it takes about this long

# Words people use for the real tools; then questions about invented companies (filled in per seed); then needs
# no tool meets, which should come back empty.
JARGON_QUERIES = (
    "give me aapl price",
    "apple stock price",
    "MSFT quarterly earnings",
    "tesla news sentiment",
    "5 minute candles for NVDA",
    "RSI for IBM",
    "macd crossover signal",
    "bollinger bands on daily closes",
    "EUR to USD exchange rate",
    "bitcoin price in euros",
    "WTI crude oil price history",
    "10 year treasury yield",
    "US CPI inflation",
    "unemployment rate",
    "dividend history for coca cola",
    "options chain with greeks for SPY",
    "earnings call transcript",
    "top gainers and losers today",
    "balance sheet",
    "congress members stock trades",
)
COMPANY_QUERIES = (
    "{short} share price",
    "{ticker} earnings per share",
    "latest news about {name}",
    "{short} dividend yield",
    "are {ticker} insiders selling",
    "analyst price target for {short}",
)
OFF_TOPIC_QUERIES = (
    "weather in paris tomorrow",
    "translate hello into spanish",
    "book a table for two tonight",
    "recipe for banana bread",
)
# DESIGN.md: TOOL_SEARCH warm ≤ 0.3 ms at 130 tools; ≤ 5 ms at 5,000.
SMALL_BUDGET = (130, 0.3)
LARGE_BUDGET = (5000, 5.0)


def queries(seed: int) -> list[str]:
    """The fixed query list: jargon, one question each about the first six invented companies, off-topic."""
    invented = companies(len(COMPANY_QUERIES), seed)
    about = [template.format(**asdict(c)) for template, c in zip(COMPANY_QUERIES, invented, strict=True)]
    return [*JARGON_QUERIES, *about, *OFF_TOPIC_QUERIES]


def budget_ms(size: int) -> float | None:
    if size <= SMALL_BUDGET[0]:
        return SMALL_BUDGET[1]
    return LARGE_BUDGET[1] if size == LARGE_BUDGET[0] else None


def label(size: int) -> str:
    return f"{size:,} (real)" if size == real_tool_count() else f"{size:,}"


# --- build and memory ----------------------------------------------------------------------------------------


def build_catalog(size: int, seed: int) -> Catalog:
    text = json.dumps(synthetic_spec(size, seed))
    return catalog_of(parse_spec(text, source=f"<synthetic {size}>"))


def median_ms(fn: Callable[[], object], runs: int = BUILD_RUNS) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def rss_kib() -> int:
    """This process's resident set size (VmRSS), from /proc; 0 where there is no /proc."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return 0
    return next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)


def memory_worker(size: int, seed: int, copies: int = 3) -> dict[str, float]:
    """Run in a fresh interpreter: RSS growth per index over `copies` kept indexes (memory the process freed
    while building the catalog is reused once, not for every copy), then tracemalloc current/peak of one more."""
    catalog = build_catalog(size, seed)
    tools = catalog.tools
    gc.collect()
    before = rss_kib()
    kept = [SearchIndex(tools) for _ in range(copies)]
    grown_kib = (rss_kib() - before) / copies
    del kept
    gc.collect()
    tracemalloc.start()
    index = SearchIndex(tools)
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del index
    return {"rss_delta_mb": grown_kib / 1024, "traced_current_mb": current / 2**20, "traced_peak_mb": peak / 2**20}


def index_memory(size: int, seed: int) -> dict[str, float]:
    worker = subprocess.run(
        [sys.executable, __file__, "--memory-worker", str(size), "--seed", str(seed)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    figures: dict[str, float] = json.loads(worker.stdout.strip().splitlines()[-1])
    return figures


# --- latency -------------------------------------------------------------------------------------------------


@dataclass
class Latency:
    mean_ms: float  # best of the rounds' means
    p50_ms: float
    p99_ms: float
    calls: int
    slowest_query: str  # the query with the highest median
    slowest_ms: float


def percentile(sorted_samples: list[float], share: float) -> float:
    return sorted_samples[min(len(sorted_samples) - 1, round(share * (len(sorted_samples) - 1)))]


def latencies(calls: dict[str, Callable[[str], object]], query_list: list[str], rounds: int) -> dict[str, Latency]:
    """Each call over every query, every call timed alone; the calls take turns within each round, so a busy
    spell on the machine hits them alike rather than one of them."""
    repeats = {}
    for name, call in calls.items():
        for query in query_list:  # warm: first-call costs (regex caches, lazy imports) are not what we measure
            call(query)
        started = time.perf_counter()
        for query in query_list:
            call(query)
        repeats[name] = max(1, round(ROUND_SECONDS / (time.perf_counter() - started)))
    clock = time.perf_counter_ns
    by_query: dict[str, dict[str, list[float]]] = {name: {q: [] for q in query_list} for name in calls}
    means: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            total_ns = 0
            samples = by_query[name]
            for _ in range(repeats[name]):
                for query in query_list:
                    started_ns = clock()
                    call(query)
                    elapsed_ns = clock() - started_ns
                    total_ns += elapsed_ns
                    samples[query].append(elapsed_ns / 1e6)
            means[name].append(total_ns / 1e6 / (repeats[name] * len(query_list)))
    result = {}
    for name in calls:
        per_query = by_query[name]
        everything = sorted(ms for samples in per_query.values() for ms in samples)
        slowest = max(per_query, key=lambda q: statistics.median(per_query[q]))
        result[name] = Latency(
            mean_ms=min(means[name]),
            p50_ms=percentile(everything, 0.50),
            p99_ms=percentile(everything, 0.99),
            calls=len(everything),
            slowest_query=slowest,
            slowest_ms=statistics.median(per_query[slowest]),
        )
    return result


# --- one size ------------------------------------------------------------------------------------------------


def measure(size: int, seed: int, rounds: int) -> dict[str, Any]:
    started = time.perf_counter()
    catalog = build_catalog(size, seed)
    catalog_ms = (time.perf_counter() - started) * 1000
    index_ms = median_ms(lambda: SearchIndex(catalog.tools))
    surface_ms = median_ms(lambda: Surface(catalog))
    memory = index_memory(size, seed)

    surface = Surface(catalog)
    index = surface.meta.index
    ctx = CallContext()
    query_list = queries(seed)

    def wire(query: str) -> dict[str, Any]:
        return surface.call_tool_wire("TOOL_SEARCH", {"query": query}, ctx)

    empty = sum(not wire(q)["structuredContent"]["results"] for q in query_list)
    timed = latencies({"search": index.search, "tool_search_wire": wire}, query_list, rounds)
    return {
        "tools": len(catalog),
        "catalog_build_ms": catalog_ms,
        "index_build_ms": index_ms,
        "surface_build_ms": surface_ms,
        **memory,
        "empty_answers": empty,
        "queries": len(query_list),
        **{name: asdict(figures) for name, figures in timed.items()},
    }


# --- report --------------------------------------------------------------------------------------------------


def load_average() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError, StopIteration):
        models = (line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name"))
        cpu = next(models).split(":", 1)[1].strip()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (
        f"{platform.platform()}, {cpu}, {os.cpu_count()} CPUs ({usable} usable), "
        f"{platform.python_implementation()} {platform.python_version()}, load average {load_average()}"
    )


def print_report(results: list[dict[str, Any]], query_list: list[str], rounds: int) -> None:
    print(f"\n  queries ({len(query_list)}): " + textwrap.fill("; ".join(query_list), 110, subsequent_indent=" " * 4))
    print("\n  build and index memory (build: median of 3; memory: fresh interpreter per size)")
    header = (
        f"    {'tools':>12}  {'spec→catalog':>12}  {'SearchIndex':>11}  {'Surface':>9}  "
        f"{'RSS Δ/index':>11}  {'traced kept':>11}  {'traced peak':>11}"
    )
    print(header)
    for r in results:
        print(
            f"    {label(r['tools']):>12}  {r['catalog_build_ms']:>9.0f} ms  {r['index_build_ms']:>8.1f} ms  "
            f"{r['surface_build_ms']:>6.1f} ms  {r['rss_delta_mb']:>8.1f} MB  {r['traced_current_mb']:>8.1f} MB  "
            f"{r['traced_peak_mb']:>8.1f} MB"
        )
    print(f"\n  warm latency, ms per query (mean: best of {rounds} rounds; p50/p99: every call of every round)")
    print(
        f"    {'tools':>12}  {'SearchIndex.search':^26}  {'TOOL_SEARCH via call_tool_wire':^26}  {'calls':>6}  "
        f"{'empty':>5}  slowest query (median ms, wire)"
    )
    print(f"    {'':>12}  {'mean':>8}{'p50':>9}{'p99':>9}  {'mean':>8}{'p50':>9}{'p99':>9}")
    for r in results:
        s, w = r["search"], r["tool_search_wire"]
        print(
            f"    {label(r['tools']):>12}  {s['mean_ms']:>8.3f}{s['p50_ms']:>9.3f}{s['p99_ms']:>9.3f}  "
            f"{w['mean_ms']:>8.3f}{w['p50_ms']:>9.3f}{w['p99_ms']:>9.3f}  {w['calls']:>6}  "
            f"{r['empty_answers']:>2}/{r['queries']}  {w['slowest_query']!r} ({w['slowest_ms']:.3f})"
        )
    print("\n  against DESIGN.md (printed, not asserted): TOOL_SEARCH warm ≤ 0.3 ms at 130 tools, ≤ 5 ms at 5,000")
    for r in results:
        budget = budget_ms(r["tools"])
        w = r["tool_search_wire"]
        if budget is None:
            print(f"    {label(r['tools']):>12}: no budget at this size (wire mean {w['mean_ms']:.3f} ms)")
            continue
        verdicts = [
            f"{name} {w[key]:.3f} ms {'within' if w[key] <= budget else 'OVER'}"
            for name, key in (("mean", "mean_ms"), ("p50", "p50_ms"), ("p99", "p99_ms"))
        ]
        print(f"    {label(r['tools']):>12}: budget {budget} ms; wire " + ", ".join(verdicts))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="TOOL_SEARCH build time, memory and warm latency at scale.")
    parser.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)), help="comma-separated tool counts")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="also print every figure as one JSON line")
    parser.add_argument("--memory-worker", type=int, metavar="SIZE", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_worker is not None:
        print(json.dumps(memory_worker(args.memory_worker, args.seed)))
        return 0
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    print(f"progressive-mcp search at scale: synthetic catalogs from bench/synthetic_spec.py, seed {args.seed}")
    print(f"  machine: {machine()}")
    results = [measure(size, args.seed, args.rounds) for size in sizes]
    print_report(results, queries(args.seed), args.rounds)
    print(f"\n  load average after: {load_average()}")
    if args.json:
        print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
