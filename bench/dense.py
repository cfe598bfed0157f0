"""What the dense search signal (progressive_mcp.search.dense) costs: cold start, index build, query latency, memory.

Prints figures, never pass/fail:

- cold start, in fresh interpreters (median of 3 runs each): the time to import wordllama (with numpy, tokenizers,
  safetensors) and to load the bundled model at each dimension, and the process's RSS before and after (VmRSS, and
  the peak VmHWM). The interpreter has already imported progressive_mcp.search.dense, so the figures are the
  extra's own cost;
- index build with the model loaded: `tool_document` for every tool and `DenseIndex` (embedding them), median of 3,
  for the real catalogs (Alpha Vantage 128 tools, DigitalOcean 659, and the others when their files are there) and
  for 1,000 and 5,000 documents made by cycling the real catalogs' documents with one word dropped per copy;
- warm query latency: `DenseIndex.rank(query, 10)` for every query of the labelled query sets, each call timed
  alone, 3 rounds; p50 and p99 over all calls;
- memory: the index matrix (documents x dim float32) and the model's embedding table (32,000 tokens x dim).

Run with `.venv/bin/python bench/dense.py [--dims 64,128,256] [--rounds 3] [--sizes 1000,5000] [--json FILE]`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.dense_quality import SETS  # noqa: E402
from progressive_mcp.search import dense  # noqa: E402
from progressive_mcp.search.evaluation import percentile  # noqa: E402
from progressive_mcp.sources import load_catalog  # noqa: E402

# The catalogs and query sets of bench/dense_quality.py (the same paths, --set there overrides them).
CATALOGS: dict[str, str | None] = {name: catalog for name, (_, catalog) in SETS.items()}
QUERY_FILES = tuple(queries for queries, _ in SETS.values())
SYNTHETIC_SIZES = (1000, 5000)

COLD_SCRIPT = """
import json, sys, time
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) / 1024
from progressive_mcp.search import dense
before = status("VmRSS:")
start = time.perf_counter()
import wordllama  # numpy, tokenizers, safetensors, requests...
imported = time.perf_counter()
model = dense.model(int(sys.argv[1]))
loaded = time.perf_counter()
model.embed(["warm up"])
print(json.dumps({
    "import_s": imported - start, "load_s": loaded - imported, "rss_before_mb": before,
    "rss_after_mb": status("VmRSS:"), "peak_mb": status("VmHWM:"), "table_mb": model.embedding.nbytes / 2**20,
}))
"""


def cold_start(dim: int, runs: int) -> dict[str, float]:
    results = []
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-c", COLD_SCRIPT, str(dim)], cwd=ROOT, capture_output=True, text=True, check=True
        )
        results.append(json.loads(done.stdout))
    return {key: statistics.median(r[key] for r in results) for key in results[0]}


def real_documents() -> dict[str, list[str]]:
    documents = {}
    for name, path in CATALOGS.items():
        if path is not None and not Path(path).exists():
            continue
        documents[name] = [dense.tool_document(tool) for tool in load_catalog(path).tools]
    return documents


def synthetic_documents(pool: Sequence[str], size: int, seed: int = 7) -> list[str]:
    """`size` documents cycling through `pool`; every copy after the first drops one random word."""
    rng = random.Random(seed)
    out = []
    for i in range(size):
        text = pool[i % len(pool)]
        if i >= len(pool):
            words = text.split()
            if len(words) > 1:
                del words[rng.randrange(len(words))]
            text = " ".join(words)
        out.append(text)
    return out


def queries() -> list[str]:
    texts = []
    for path in QUERY_FILES:
        if Path(path).exists():
            texts.extend(json.loads(line)["query"] for line in Path(path).read_text().splitlines() if line.strip())
    return texts


def build_time(documents: list[str], dim: int, rounds: int) -> tuple[float, dense.DenseIndex]:
    times = []
    index = None
    for _ in range(rounds):
        start = time.perf_counter()
        index = dense.DenseIndex(documents, dim=dim)
        times.append(time.perf_counter() - start)
    assert index is not None
    return statistics.median(times), index


def latency(index: dense.DenseIndex, texts: Sequence[str], rounds: int) -> dict[str, float]:
    for text in texts[:50]:
        index.rank(text, 10)
    calls = []
    for _ in range(rounds):
        for text in texts:
            start = time.perf_counter()
            index.rank(text, 10)
            calls.append((time.perf_counter() - start) * 1000)
    return {"p50_ms": percentile(calls, 0.50), "p99_ms": percentile(calls, 0.99), "mean_ms": statistics.fmean(calls)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", default="64,128,256", help="comma-separated dimensions (default: 64,128,256)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sizes", default=",".join(map(str, SYNTHETIC_SIZES)), help="synthetic index sizes")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    if not dense.available():
        print("wordllama is not installed: pip install 'progressive-mcp[semantic]'", file=sys.stderr)
        return 2
    dims = [int(d) for d in args.dims.split(",")]
    load = os.getloadavg()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    figures: dict[str, Any] = {"cold": {}, "build": {}}

    print(f"\ncold start in a fresh interpreter (median of {args.rounds}): import wordllama, load the model")
    print(
        f"{'dim':>4} {'import s':>9} {'load s':>7} {'RSS before MB':>14} {'RSS after MB':>13} {'peak MB':>8} "
        f"{'table MB':>9}"
    )
    for dim in dims:
        cold = figures["cold"][dim] = cold_start(dim, args.rounds)
        print(
            f"{dim:>4} {cold['import_s']:>9.3f} {cold['load_s']:>7.3f} {cold['rss_before_mb']:>14.1f} "
            f"{cold['rss_after_mb']:>13.1f} {cold['peak_mb']:>8.1f} {cold['table_mb']:>9.1f}"
        )

    start = time.perf_counter()
    real = real_documents()
    documents_s = time.perf_counter() - start
    total_tools = sum(len(docs) for docs in real.values())
    print(
        f"\ntool_document for {total_tools} tools of {len(real)} catalogs: {documents_s * 1000:.1f} ms (incl. loading)"
    )
    pool = [doc for docs in real.values() for doc in docs]
    sets: dict[str, list[str]] = dict(sorted(real.items(), key=lambda item: len(item[1])))
    for size in (int(n) for n in args.sizes.split(",") if n):
        sets[f"synthetic {size}"] = synthetic_documents(pool, size)
    texts = queries()
    print(
        f"\nbuild (embed every document; median of {args.rounds}) and warm rank(query, 10) over {len(texts)} queries "
        f"x {args.rounds} rounds"
    )
    print(
        f"{'documents':<22} {'dim':>4} {'build ms':>9} {'per doc us':>11} {'p50 ms':>7} {'p99 ms':>7} {'matrix KB':>10}"
    )
    for name, documents in sets.items():
        for dim in dims:
            seconds, index = build_time(documents, dim, args.rounds)
            lat = latency(index, texts, args.rounds)
            row = {"documents": len(documents), "build_s": seconds, **lat, "matrix_bytes": index.nbytes}
            figures["build"][f"{name}/{dim}"] = row
            print(
                f"{name + ' (' + str(len(documents)) + ')':<22} {dim:>4} {seconds * 1000:>9.1f} "
                f"{seconds / len(documents) * 1e6:>11.1f} {lat['p50_ms']:>7.3f} {lat['p99_ms']:>7.3f} "
                f"{index.nbytes / 1024:>10.1f}"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
