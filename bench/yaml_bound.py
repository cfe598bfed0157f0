"""What bounding YAML alias expansion costs (`progressive_mcp.sources.bounded_yaml`), and what it saves.

Prints figures, never pass/fail:

- load time of real YAML files with PyYAML's safe loader (libyaml) and with the bounded loader (the same loader
  plus the measuring of the node graph), and the measuring alone, fastest of `--runs`: OpenAI's and Spotify's
  OpenAPI documents (from ../shared/openapi, or $OPENAPI_DOCS_DIR, when there), DigitalOcean's entry document,
  the bundled spec and its vocabulary;
- the issue's two alias bombs (a response `example`, a parameter `enum`: 9 levels of 10 aliases) through
  `load_catalog`: time until refused, and the process's peak RSS before and after.

Run with `.venv/bin/python bench/yaml_bound.py [--runs N] [--json]`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from progressive_mcp.errors import SpecError  # noqa: E402
from progressive_mcp.sources import load_catalog  # noqa: E402
from progressive_mcp.sources.bounded_yaml import BoundedSafeLoader, alias_problem  # noqa: E402
from progressive_mcp.sources.openapi import load_openapi  # noqa: E402, F401 (imported before the bombs are timed)

DOCS = Path(os.environ.get("OPENAPI_DOCS_DIR", ROOT.parent / "shared" / "openapi"))
FILES = {
    "OpenAI openapi.yaml": DOCS / "openai" / "openapi.yaml",
    "Spotify openapi.yaml": DOCS / "spotify" / "openapi.yaml",
    "DigitalOcean entry document": DOCS / "digitalocean" / "specification" / "DigitalOcean-public.v2.yaml",
    "bundled spec": ROOT / "spec" / "alphavantage.yaml",
    "bundled vocabulary": ROOT / "spec" / "alphavantage.vocabulary.yaml",
}
PLAIN = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def laughs() -> str:
    lines = ["  l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"  l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 9)]
    return 'openapi: 3.0.3\ninfo: {title: Laughs, version: "1"}\nx-laughs:\n' + "\n".join(lines) + "\n"


BOMBS = {
    "example": laughs() + "paths:\n  /x:\n    get:\n      operationId: x\n      responses:\n        '200':\n"
    "          description: ok\n          content:\n            application/json:\n"
    "              schema: {type: array}\n              example: *l8\n",
    "enum": laughs() + "paths:\n  /x:\n    get:\n      operationId: x\n      parameters:\n"
    "        - {name: q, in: query, schema: {type: string, enum: *l8}}\n      responses: {'200': {description: ok}}\n",
}


def best_s(work: Any, runs: int) -> float:
    """The fastest of `runs` runs: the least disturbed by whatever else the machine is doing."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return min(times)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kilobytes on Linux


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    loads: list[dict[str, Any]] = []
    for name, path in FILES.items():
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        node = yaml.compose(text, Loader=PLAIN)
        plain = best_s(lambda text=text: yaml.load(text, Loader=PLAIN), args.runs)
        bounded = best_s(lambda text=text: yaml.load(text, Loader=BoundedSafeLoader), args.runs)
        measuring = best_s(lambda node=node: alias_problem(node), args.runs)
        loads.append(
            {
                "file": name,
                "bytes": len(text.encode()),
                "plain_ms": plain * 1000,
                "bounded_ms": bounded * 1000,
                "measuring_ms": measuring * 1000,
            }
        )
    bombs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as folder:
        for where, text in BOMBS.items():
            path = Path(folder) / f"{where}.yaml"
            path.write_text(text)
            before = peak_rss_mb()
            started = time.perf_counter()
            try:
                load_catalog(path)
                outcome = "loaded"
            except SpecError as exc:
                outcome = exc.problems[0]
            bombs.append(
                {
                    "bomb": where,
                    "bytes": len(text.encode()),
                    "refused_ms": (time.perf_counter() - started) * 1000,
                    "peak_rss_mb_before": before,
                    "peak_rss_mb_after": peak_rss_mb(),
                    "outcome": outcome,
                }
            )
    if args.json:
        print(json.dumps({"loads": loads, "bombs": bombs}, indent=2))
        return 0
    print(f"YAML load, fastest of {args.runs} (ms): safe loader (libyaml), bounded loader, the measuring alone")
    for row in loads:
        share = row["measuring_ms"] / row["plain_ms"] * 100
        print(
            f"  {row['file']:<28} {row['bytes']:>10,} B  {row['plain_ms']:9.1f}  {row['bounded_ms']:9.1f}  "
            f"{row['measuring_ms']:7.1f} ({share:.0f}% of a load)"
        )
    print("alias bombs through load_catalog")
    for row in bombs:
        print(
            f"  {row['bomb']:<8} {row['bytes']} B: refused in {row['refused_ms']:.1f} ms, peak RSS "
            f"{row['peak_rss_mb_before']:.0f} -> {row['peak_rss_mb_after']:.0f} MB: {row['outcome']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
