"""What masking secrets costs (progressive_mcp.redaction); prints figures, never pass/fail.

- the first look at an answer that holds no secret (`Secrets.found_in`, the path nearly every answer takes), in ms
  per MB, on the offline sample upstream's full daily history of IBM as JSON (Alpha Vantage's largest kind of
  answer) and on a REST-like answer full of URLs and percent-encoded text, for: no secret, one Alpha Vantage-like
  key, a `user:password` key (both of its sides are looked for), and five servers' secrets behind a gateway;
- the same look at a short message, in µs;
- working out the forms of a set of secrets the first time (later calls find them cached);
- a whole call in process (`Surface.call_tool_wire`), with and without a key: TOOL_GET (a catalog answer: only the
  gateway's secrets are looked for, none here) and TOOL_CALL answered from the shaped-answer cache, where the
  last masking pass is most of what is left.

Run with `.venv/bin/python bench/masking.py [--json]`.
"""

from __future__ import annotations

import json
import platform
import random
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from progressive_mcp.calls.cache import MemoryCache  # noqa: E402
from progressive_mcp.calls.upstream import UpstreamClient  # noqa: E402
from progressive_mcp.offline.sample_upstream import SampleUpstream  # noqa: E402
from progressive_mcp.redaction import Secrets, _cached_forms, _cached_secrets  # noqa: E402
from progressive_mcp.sources import load_catalog  # noqa: E402
from progressive_mcp.surfaces.surface import CallContext, Surface  # noqa: E402

SECRET_SETS: dict[str, tuple[str, ...]] = {
    "no secret": (),
    "one key (16 characters)": ("Q7K2M9X4P1L8Z3V6",),
    "user:password key": ("AC5f2b8c9d0e1a4b7c3d6e9f0a1b2c3d4e:9f8e7d6c5b4a39281706f5e4d3c2b1a0",),
    "5 servers' secrets": (
        "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
        "xoxb-2410-99213-Xn4Tq8Lw2",
        "Bearer tok-5678-abcdefgh",
        "/home/user/.local/memory.jsonl",
        "sk-proj-7Hq2LmT9xV4pK8wZ3",
    ),
}


def best_ms(fn: Callable[[], object], repeat: int = 1, rounds: int = 5) -> float:
    """The best of `rounds` rounds of `repeat` calls (the least disturbed by the rest of the machine), per call."""
    fn()
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(repeat):
            fn()
        times.append((time.perf_counter() - started) * 1000 / repeat)
    return min(times)


def daily_history(upstream: SampleUpstream) -> str:
    url = f"{upstream.url}?function=TIME_SERIES_DAILY&symbol=IBM&outputsize=full&apikey=demo"
    with urllib.request.urlopen(url, timeout=30) as answer:
        return str(answer.read().decode("utf-8"))


def rest_like(size_bytes: int) -> str:
    rng = random.Random(7)
    rows: list[dict[str, Any]] = []
    size = 0
    while size < size_bytes:
        n = rng.randrange(10**6)
        row = {
            "id": f"item_{n}",
            "name": f"Item {n} – café ünïcode",
            "url": f"https://api.example.com/v1/items/{n}?expand=owner&page={n % 7}",
            "query": f"name%3D{n}%26sort%3Ddesc",
            "price": round(rng.random() * 1000, 2),
        }
        rows.append(row)
        size += len(json.dumps(row, ensure_ascii=False).encode()) + 2
    return json.dumps(rows, ensure_ascii=False)


def calls(surface: Surface) -> dict[str, float]:
    figures = {}
    tool_get = {"tool_name": "TIME_SERIES_INTRADAY"}
    quote = {"tool_name": "GLOBAL_QUOTE", "arguments": {"symbol": "IBM"}}
    for label, key in (("key 'demo'", "demo"), ("a 16-character key", "Q7K2M9X4P1L8Z3V6")):
        ctx = CallContext(api_key=key)
        figures[f"TOOL_GET, {label}"] = best_ms(lambda c=ctx: surface.call_tool_wire("TOOL_GET", tool_get, c), 300)
        result = surface.call_tool_wire("TOOL_CALL", quote, ctx)  # shaped once, then answered from the cache
        figures[f"TOOL_CALL from the cache, {label}"] = best_ms(
            lambda c=ctx: surface.call_tool_wire("TOOL_CALL", quote, c), 300
        )
        secrets = surface.call_secrets(ctx)
        figures[f"  of which the last pass, {label}"] = best_ms(lambda s=secrets, r=result: s.scrub(r), 300)
    return figures


def main() -> int:
    with SampleUpstream() as upstream:
        texts = {"daily history, JSON": daily_history(upstream), "REST-like, 1 MB": rest_like(1_000_000)}
        catalog = load_catalog()
        surface = Surface(catalog, upstream=UpstreamClient(catalog.api, base_url=upstream.url), cache=MemoryCache())
        call_figures = calls(surface)
    message = "Invalid API call. Please retry or visit the documentation (https://www.alphavantage.co/documentation/)."
    scan: dict[str, dict[str, float]] = {}
    build: dict[str, float] = {}
    for label, values in SECRET_SETS.items():
        secrets = Secrets.of(*values)
        scan[label] = {}
        for name, text in texts.items():
            megabytes = len(text.encode()) / 1e6
            assert not secrets.found_in(text), (label, name)
            scan[label][name] = best_ms(lambda s=secrets, t=text: s.found_in(t)) / megabytes
        scan[label]["message (µs)"] = best_ms(lambda s=secrets: s.found_in(message), 2000) * 1000

        def fresh(v: tuple[str, ...] = values) -> None:
            _cached_secrets.cache_clear()
            _cached_forms.cache_clear()
            Secrets.of(*v)

        build[label] = best_ms(fresh, 20)
    sizes = ", ".join(f"{name} {len(text.encode()) / 1e6:.2f} MB" for name, text in texts.items())
    print(f"masking benchmarks: Python {platform.python_version()}, {platform.machine()} ({sizes})")
    print("  first look at an answer holding no secret (ms per MB), and at a 110-character message (µs):")
    columns = list(next(iter(scan.values())))
    width = max(map(len, scan))
    print(f"    {'secrets':<{width}}  " + "  ".join(f"{c:>20}" for c in columns) + f"  {'forms built (ms)':>17}")
    for label, row in scan.items():
        cells = "  ".join(f"{row[c]:>20.2f}" for c in columns)
        print(f"    {label:<{width}}  {cells}  {build[label]:>17.3f}")
    print("  a whole call in process, per call (best of 5 rounds of 300):")
    for label, ms in call_figures.items():
        print(f"    {label:<45} {ms:.3f} ms")
    if "--json" in sys.argv:
        print(json.dumps({"scan_ms_per_mb": scan, "build_ms": build, "calls_ms": call_figures}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
