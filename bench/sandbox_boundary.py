"""Code mode: what a value crossing the sandbox boundary costs the host (issue 27, finding 1).

Scripts that build a small value in the sandbox whose parts are shared (`x = [x] * 10` over and over) and hand it
to the host as their result or as a tool call's arguments, run through TOOL_EXECUTE in process at the default
limits (64 MB, 20 s), against the offline sample upstream. For each: the outcome (a limit error, or the answer),
the time, and how far the host's peak RSS rose above what it held before the script (the kernel's high-water
mark, reset before each script where /proc/self/clear_refs allows it, else the process's running peak). The
host copies such values within the sandbox's own limits, so no script should raise the peak by more than 128 MB.

Run with: .venv/bin/python bench/sandbox_boundary.py [--only report,report-10^9] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import time
from pathlib import Path
from typing import Any

from progressive_mcp.calls.cache import LOCAL
from progressive_mcp.calls.sandbox import Sandbox, ScriptLimits
from progressive_mcp.calls.upstream import UpstreamClient
from progressive_mcp.offline.sample_upstream import SampleUpstream
from progressive_mcp.sources import load_catalog
from progressive_mcp.surfaces.surface import CallContext, Surface

PEAK_GROWTH_TARGET_MB = 128


def nested(levels: int) -> str:
    return f"x = 1\nfor i in range({levels}):\n    x = [x] * 10\n"


SCRIPTS = {
    "report": nested(8) + "x",  # the script of the report: 10**8 elements (148.8 s, 1.6 GB before)
    "report-10^9": nested(9) + "x",
    "arguments-10^7": nested(7) + 'await OVERVIEW(symbol=eval("x"))',  # 12.5 s, 1.27 GB before
    "arguments-10^9": nested(9) + 'await OVERVIEW(symbol=eval("x"))',
    "shared-string-10^10": 's = "a" * 10**7\n[s] * 1000',  # 10 GB of JSON text
    "shared-dict-10^9": 'x = {"k": 1}\nfor i in range(9):\n    x = {str(j): x for j in range(10)}\nx',
    "deep-10^5": "x = []\nfor i in range(100000):\n    x = [x]\nx",
    "plain-2x10^5-strings": "[str(i) for i in range(200000)]",  # nothing shared: a big answer, cut to the budget
}


def _status_mb(field: str) -> float | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def _reset_peak() -> bool:
    """Reset the kernel's high-water mark of this process's RSS (Linux 4.0+), so the next peak is this script's."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def _peak_mb() -> float:
    hwm = _status_mb("VmHWM")
    return hwm if hwm is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _rss_mb() -> float:
    rss = _status_mb("VmRSS")
    return rss if rss is not None else _peak_mb()


def run_script(surface: Surface, code: str) -> dict[str, Any]:
    exact = _reset_peak()
    before = _rss_mb() if exact else _peak_mb()
    started = time.perf_counter()
    answer = surface.call_tool_wire(
        "TOOL_EXECUTE", {"code": code}, CallContext(api_key="bench-key-1", entitlement=LOCAL)
    )
    seconds = time.perf_counter() - started
    # The kernel updates the high-water mark lazily (on some page-table events only), so on some kernels a peak
    # read right after a reset can sit a little below the RSS read before the run: that is no growth, not a
    # negative one.
    growth = max(0.0, _peak_mb() - before)
    row: dict[str, Any] = {"seconds": round(seconds, 2), "peak_growth_mb": round(growth, 1), "exact_peak": exact}
    if answer["isError"]:
        error = answer["structuredContent"]["error"]
        row["outcome"] = f"{error.get('kind', error['type'])} {error.get('limit', '')}".strip()
        row["message"] = error["message"][:160]
    else:
        row["outcome"] = "answered" + (" (cut to the budget)" if "truncated" in answer["structuredContent"] else "")
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help=f"comma-separated scripts to run, of: {', '.join(SCRIPTS)}")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    names = args.only.split(",") if args.only else list(SCRIPTS)
    unknown = [name for name in names if name not in SCRIPTS]
    if unknown:
        parser.error(f"unknown script(s) {', '.join(unknown)}; choose from {', '.join(SCRIPTS)}")
    catalog = load_catalog()
    limits = ScriptLimits()
    sandbox = Sandbox()
    rows: dict[str, dict[str, Any]] = {}
    try:
        with SampleUpstream() as upstream:
            client = UpstreamClient(catalog.api, base_url=upstream.url)
            surface = Surface(catalog, mode="code", upstream=client, sandbox=sandbox, script_limits=limits)
            # Not the scripts' cost: starting the pool, importing the client, loading the tokenizer (a cut answer).
            for warm_up in ("1 + 1", '"w" * 100000'):
                run_script(surface, warm_up)
            for name in names:
                rows[name] = run_script(surface, SCRIPTS[name])
    finally:
        sandbox.close()
    worst = max((row["peak_growth_mb"] for row in rows.values()), default=0.0)
    report = {
        "limits": {
            "wall_s": limits.wall_s,
            "memory_mb": limits.memory_mb,
            "max_argument_bytes": limits.max_argument_bytes,
        },
        "rows": rows,
        "worst_peak_growth_mb": worst,
        "target_mb": PEAK_GROWTH_TARGET_MB,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load_average": os.getloadavg()},
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(
        f"values leaving the sandbox, through TOOL_EXECUTE at {limits.memory_mb} MB / {limits.wall_s:g} s "
        f"(load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}, {os.cpu_count()} CPUs):"
    )
    print(f"  {'script':<22} {'outcome':<28} {'seconds':>8} {'peak RSS growth':>16}")
    for name, row in rows.items():
        print(f"  {name:<22} {row['outcome']:<28} {row['seconds']:8.2f} {row['peak_growth_mb']:13.1f} MB")
    exact = all(row["exact_peak"] for row in rows.values())
    print(
        f"  worst peak growth {worst:.1f} MB (target: at most {PEAK_GROWTH_TARGET_MB} MB)"
        + ("" if exact else "; /proc/self/clear_refs unavailable, so each figure is the growth of the running peak")
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
