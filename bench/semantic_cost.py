"""What the MiniLM signal (progressive_mcp.search.embedder, .fusion) costs on this machine. Prints figures, never
pass/fail, each with the load average beside it (the machine may be shared).

- model load, in a fresh process: the import of onnxruntime, then `Embedder()` (the tokenizer) with the query graph
  (int8, what a search loads: embedder.Embedder.embed_query), then the document graph (float32, what compile and
  sync load);
- embedding tool documents: seconds per 100, over a real catalog's documents (Stripe when ../shared/openapi is
  there, else Last.fm), one thread, as `spec compile` and the gateway's sync do it;
- the first search of a fresh process on a compiled catalog (vectors stored): load + the search, and what a
  second, different search then costs;
- warm TOOL_SEARCH (MetaTools.tool_search, what an agent's call runs) at 1,000 and 5,000 synthetic tools
  (bench/synthetic_spec.py, vocabulary dropped so the catalog counts as uncurated and the signal is on), p50 and
  p99 over distinct queries (each embedded: no query cache hit) and over repeated ones (cache hits), beside the
  lexical engine alone. The tool vectors there are random unit rows handed to the vector cache: a search's cost
  does not depend on their values, and embedding 5,000 documents would take minutes.

    .venv/bin/python bench/semantic_cost.py [--sizes 1000,5000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.synthetic_spec import synthetic_catalog  # noqa: E402
from progressive_mcp.catalog import Catalog  # noqa: E402
from progressive_mcp.search import embedder, vectors  # noqa: E402
from progressive_mcp.sources import load_catalog  # noqa: E402
from progressive_mcp.surfaces.metatools import MetaTools  # noqa: E402

STRIPE = ROOT.parent / "shared" / "openapi" / "stripe" / "spec3.json"
LASTFM = ROOT / "tests" / "fixtures" / "lastfm" / "lastfm.yaml"
QUERIES = [
    "quarterly earnings of a company", "latest price of a stock", "news about a company", "insider trading",
    "dividends paid last year", "company overview and sector", "balance sheet", "cash flow statement",
    "analyst estimates", "shares outstanding", "options chain", "income statement for last quarter",
    "earnings call transcript", "top gainers today", "intraday prices every 5 minutes", "weekly candles",
    "book me a flight", "weather in paris", "how do I bake bread", "what is the exchange rate",
]  # fmt: skip


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def fresh(code: str, *args: str) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=True, cwd=ROOT, timeout=900
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


MODEL_LOAD = """
import json, time
t0 = time.perf_counter()
import onnxruntime, tokenizers, numpy
t1 = time.perf_counter()
from progressive_mcp.search import embedder
e = embedder.Embedder()
e.embed_query("warm up")
t2 = time.perf_counter()
e.embed(["warm up"])
t3 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "session_s": t2 - t1, "documents_session_s": t3 - t2}))
"""

FIRST_SEARCH = """
import json, sys, time
t0 = time.perf_counter()
from progressive_mcp.sources import load_catalog
from progressive_mcp.surfaces.metatools import MetaTools
catalog = load_catalog(sys.argv[1])
meta = MetaTools(catalog, semantic=True)
t1 = time.perf_counter()
meta.tool_search({"query": "refund a payment to a customer", "limit": 5})
t2 = time.perf_counter()
meta.tool_search({"query": "list the invoices of a subscription", "limit": 5})
t3 = time.perf_counter()
from progressive_mcp.search import embedder
print(json.dumps({"load_s": t1 - t0, "first_search_s": t2 - t1, "second_search_s": t3 - t2,
                  "embedded": embedder.Embedder.shared().texts_embedded}))
"""


def percentile(samples: list[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def _letters(number: int) -> str:
    """A word of letters that differs for each number: it makes a query new (no cache hit) without an id or a number,
    which the fusion cuts out of what MiniLM reads (search/records.py), so the query would not be new at all."""
    word = ""
    while True:
        number, digit = divmod(number, 26)
        word += chr(ord("a") + digit)
        if not number:
            return word


def warm(size: int, rounds: int) -> dict[str, float]:
    import numpy as np

    built = synthetic_catalog(size)
    catalog = Catalog.build(built.api, built.categories, built.tools)  # no vocabulary: uncurated, signal on
    rng = np.random.default_rng(0)
    rows = rng.standard_normal((len(catalog.tools), embedder.DIMENSION)).astype(np.float32)
    vectors.VectorCache.shared().offer(catalog.tools, vectors.quantize(rows))
    on, off = MetaTools(catalog, semantic=True), MetaTools(catalog, semantic=False)
    on.tool_search({"query": "warm up", "limit": 5})  # model load, matrix assembled
    out: dict[str, float] = {}
    for label, meta, distinct in (("semantic_new", on, True), ("semantic_repeat", on, False), ("lexical", off, False)):
        samples, cpu = [], []
        for round_number in range(rounds):
            for query in QUERIES:
                text = f"{query} {_letters(round_number * 100_000 + size)}" if distinct else query
                start, start_cpu = time.perf_counter(), time.thread_time()
                meta.tool_search({"query": text, "limit": 5})
                samples.append((time.perf_counter() - start) * 1000)
                cpu.append((time.thread_time() - start_cpu) * 1000)  # onnxruntime runs in this thread (1 thread)
        out[f"{label}_p50_ms"] = statistics.median(samples)
        out[f"{label}_p99_ms"] = percentile(samples, 0.99)
        out[f"{label}_cpu_p50_ms"] = statistics.median(cpu)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,5000")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    if not embedder.available():
        print("the semantic extra is not installed")
        return 1
    figures = fresh(MODEL_LOAD)
    print(f"model: import onnxruntime+tokenizers+numpy {figures['import_s']:.2f} s, tokenizer+query graph (int8) "
          f"{figures['session_s']:.2f} s, then the document graph (float) {figures['documents_session_s']:.2f} s "
          f"({load()})")  # fmt: skip

    source = STRIPE if STRIPE.is_file() else LASTFM
    catalog = load_catalog(source)
    documents = [vectors.document(tool) for tool in catalog.tools]
    model = embedder.Embedder.shared()
    model.embed(documents[:8])
    start, start_cpu = time.perf_counter(), time.thread_time()
    model.embed(documents)
    per_100 = (time.perf_counter() - start) / len(documents) * 100
    cpu_100 = (time.thread_time() - start_cpu) / len(documents) * 100
    print(f"embedding {len(documents)} tool documents of {source.name}: {per_100:.2f} s per 100 "
          f"(CPU time {cpu_100:.2f} s) ({load()})")  # fmt: skip

    with tempfile.TemporaryDirectory() as folder:
        compiled = Path(folder) / "catalog.json"
        subprocess.run(
            [sys.executable, "-m", "progressive_mcp", "spec", "compile", "--catalog", str(source), "-o", str(compiled)],
            check=True, capture_output=True, cwd=ROOT, timeout=900,
        )  # fmt: skip
        figures = fresh(FIRST_SEARCH, str(compiled))
        print(f"fresh process, compiled {source.name} with vectors: load {figures['load_s']:.2f} s, first search "
              f"{figures['first_search_s']:.2f} s, second {figures['second_search_s'] * 1000:.1f} ms, texts embedded "
              f"{figures['embedded']:.0f} ({load()})")  # fmt: skip

    for size in (int(s) for s in args.sizes.split(",")):
        figures = warm(size, args.rounds)
        print(f"{size:,} tools, warm TOOL_SEARCH: semantic p50 {figures['semantic_new_p50_ms']:.2f} ms (p99 "
              f"{figures['semantic_new_p99_ms']:.2f}) for new queries, {figures['semantic_repeat_p50_ms']:.2f} ms "
              f"repeated; lexical p50 {figures['lexical_p50_ms']:.2f} ms; CPU time p50: new "
              f"{figures['semantic_new_cpu_p50_ms']:.2f} ms, repeated {figures['semantic_repeat_cpu_p50_ms']:.2f} ms, "
              f"lexical {figures['lexical_cpu_p50_ms']:.2f} ms ({load()})")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
