"""What TOOL_SEARCH's semantic second opinion (progressive_mcp.search.semantic) costs, per catalog.

Prints figures, never pass/fail. For each catalog of bench/dense_quality.py's sets whose files are present:

- the lexical index build (`SearchIndex`, which builds nothing semantic);
- the first use, in this process: the model load (first catalog only: it is shared), the tools' embeddings and
  the bar (the everyday requests against every tool), then the catalog's word table (every word of its tool
  texts embedded, for reading unknown query words);
- warm `SearchIndex.search(query)` latency over the catalog's labelled queries, with the signal and without
  (p50 and p99 of single calls, `--rounds` rounds), and how many queries it rescued.

Run with `.venv/bin/python bench/semantic.py [--only NAME] [--rounds 3]` (needs the `semantic` extra).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.dense_quality import SETS  # noqa: E402
from progressive_mcp.search import dense  # noqa: E402
from progressive_mcp.search.evaluation import percentile  # noqa: E402
from progressive_mcp.search.index import SearchIndex  # noqa: E402
from progressive_mcp.sources import load_catalog  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="one catalog of the sets")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if not dense.available():
        print("skipped: the semantic extra is not installed (pip install 'progressive-mcp[semantic]')")
        return 0
    print(f"{'catalog':14s} {'tools':>5s} {'build':>8s} {'first use':>10s} {'words':>12s} "
          f"{'p50 on/off':>14s} {'p99 on/off':>14s} {'rescued':>8s}")  # fmt: skip
    for name, (queries_file, spec) in SETS.items():
        if args.only and name != args.only:
            continue
        absent = [f for f in (spec, queries_file) if f is not None and not Path(f).is_file()]
        if absent:
            print(f"{name:14s} skipped: {absent[0]} is absent")
            continue
        catalog = load_catalog(spec)  # None: the bundled Alpha Vantage spec
        queries = [json.loads(line)["query"] for line in Path(queries_file).read_text().splitlines() if line.strip()]
        start = time.perf_counter()
        on = SearchIndex(catalog.tools, catalog.vocabulary, semantic=True)
        build = time.perf_counter() - start
        off = SearchIndex(catalog.tools, catalog.vocabulary, semantic=False)
        rescue = on._semantic
        if rescue is None:
            print(f"{name:14s} skipped: its vocabulary is curated (unknown_weight), so the signal never speaks")
            continue
        start = time.perf_counter()
        rescue.bar  # noqa: B018  # the model, the tools' embeddings and the bar
        first = time.perf_counter() - start
        words = len(on._words())
        start = time.perf_counter()
        rescue.similar_terms("example")
        table = time.perf_counter() - start
        timings: dict[str, list[float]] = {"on": [], "off": []}
        for _ in range(args.rounds):
            for label, index in (("on", on), ("off", off)):
                for query in queries:
                    start = time.perf_counter()
                    index.search(query)
                    timings[label].append((time.perf_counter() - start) * 1000)
        rescued = sum(on.rank(query).semantic for query in queries)
        print(
            f"{name:14s} {len(catalog):5d} {build * 1000:6.0f}ms {first * 1000:8.0f}ms "
            f"{words:5d} {table * 1000:4.0f}ms "
            f"{percentile(timings['on'], 0.5):6.2f}/{percentile(timings['off'], 0.5):.2f}ms "
            f"{percentile(timings['on'], 0.99):6.2f}/{percentile(timings['off'], 0.99):.2f}ms "
            f"{rescued:4d}/{len(queries)}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
