"""Code mode: what a script costs, and what gathering its tool calls saves.

Against the offline sample upstream slowed to DELAY_S per answer, in process, no response cache:

- five quotes awaited one after another, and the same five gathered with `asyncio.gather`;
- the same script again once the sandbox is warm (the first script of a process also starts the pool);
- a script that calls no tool (type check plus run).

Run with: .venv/bin/python bench/code_mode.py [--delay 0.2] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

from progressive_mcp.calls.cache import LOCAL
from progressive_mcp.calls.upstream import UpstreamClient
from progressive_mcp.offline.sample_upstream import SampleUpstream
from progressive_mcp.sources import load_catalog
from progressive_mcp.surfaces.surface import CallContext, Surface

SYMBOLS = '["AAPL", "MSFT", "NVDA", "AMZN", "GOOGL"]'
SEQUENTIAL = f"""\
prices = []
for s in {SYMBOLS}:
    q = await GLOBAL_QUOTE(symbol=s)
    prices.append(q["Global Quote"]["05. price"])
prices
"""
GATHERED = f"""\
import asyncio
quotes = await asyncio.gather(*[GLOBAL_QUOTE(symbol=s) for s in {SYMBOLS}])
[q["Global Quote"]["05. price"] for q in quotes]
"""
NO_CALLS = "sum(i * i for i in range(1000))"


def timed(surface: Surface, code: str) -> float:
    started = time.perf_counter()
    result = surface.call_tool_wire(
        "TOOL_EXECUTE", {"code": code}, CallContext(api_key="bench-key-1", entitlement=LOCAL)
    )
    elapsed = (time.perf_counter() - started) * 1000
    if result["isError"]:
        raise SystemExit(f"the script failed: {result['content'][0]['text']}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay", type=float, default=0.2, help="seconds the sample upstream waits per answer")
    parser.add_argument("--rounds", type=int, default=5, help="runs of each script (the median is shown)")
    args = parser.parse_args()
    catalog = load_catalog()
    with SampleUpstream() as upstream:
        upstream.update_faults({"delay_s": args.delay})
        surface = Surface(catalog, mode="code", upstream=UpstreamClient(catalog.api, base_url=upstream.url))
        first = timed(surface, NO_CALLS)
        figures = {
            name: statistics.median(timed(surface, code) for _ in range(args.rounds))
            for name, code in (
                ("no tool call", NO_CALLS),
                ("5 calls, one by one", SEQUENTIAL),
                ("5 calls, gathered", GATHERED),
            )
        }
    print(f"code mode, sample upstream answering in {args.delay * 1000:.0f} ms, median of {args.rounds}:")
    print(f"  first script of the process (starts the sandbox pool): {first:.0f} ms")
    for name, ms in figures.items():
        print(f"  {name:<22} {ms:7.0f} ms")
    one_by_one, gathered = figures["5 calls, one by one"], figures["5 calls, gathered"]
    print(f"  gathering saves {one_by_one - gathered:.0f} ms ({one_by_one / gathered:.1f}x faster)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
