"""What a search costs with a remote embedding provider (progressive_mcp.search.providers). Prints figures, never
pass/fail, with the load average beside them (the machine may be shared).

The provider is an OpenAI-compatible endpoint played by a small HTTP server on 127.0.0.1 (hashed bags of words
for vectors), answering after `--latency-ms` to stand for a remote API. Over Last.fm (57 tools): the first search
(every tool document embedded, in requests of 64, the 120 everyday requests that set the catalog's closeness
scale, once per process, then the query), searches of distinct queries (one request
each), repeated queries (no request: the provider's query cache), the lexical engine alone, and the first search
of a cold start on the catalog compiled with the provider (`spec compile`: tool and everyday vectors stored, so
one request, the query). The bundled
model's figures are bench/semantic_cost.py's.

    .venv/bin/python bench/providers.py [--latency-ms 0,50] [--queries 30]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import statistics
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from progressive_mcp.search import fusion, providers, vectors  # noqa: E402
from progressive_mcp.search.index import SearchIndex  # noqa: E402
from progressive_mcp.sources import compiled, load_catalog  # noqa: E402

LASTFM = ROOT / "tests" / "fixtures" / "lastfm" / "lastfm.yaml"
WIDTH = 256
WORDS = [
    "similar",
    "artists",
    "top",
    "albums",
    "tracks",
    "tags",
    "charts",
    "events",
    "venues",
    "users",
    "friends",
    "loved",
    "recent",
    "played",
]


def vector(text: str) -> list[float]:
    out = [0.0] * WIDTH
    for word in re.findall(r"[a-z]+", text.lower()):
        out[int(hashlib.sha256(word.encode()).hexdigest(), 16) % WIDTH] += 1.0
    return out


def serve(latency_s: float) -> tuple[ThreadingHTTPServer, list[int]]:
    requests: list[int] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            requests.append(len(body["input"]))
            time.sleep(latency_s)
            data = [{"index": i, "embedding": vector(t)} for i, t in enumerate(body["input"])]
            answer = json.dumps({"data": data, "model": body["model"]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server, requests


def p50_ms(index: SearchIndex, queries: list[str]) -> float:
    times = []
    for query in queries:
        start = time.perf_counter()
        index.search(query, limit=5)
        times.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(times), 2)


def cold_start(data: dict[str, Any], url: str, requests: list[int]) -> tuple[float, int]:
    """A new process's first search on a compiled catalog (nothing cached, a new provider): ms and requests."""
    vectors.VectorCache._shared = vectors.VectorCache()
    fusion._EVERYDAY.clear()
    providers.use(providers.OpenAICompatible(url=url, model="bench"))  # its query cache empty too
    loaded = compiled.from_data(data)
    index = SearchIndex(loaded.tools, loaded.vocabulary, categories=loaded.categories, semantic=True)
    before = len(requests)
    start = time.perf_counter()
    index.search("similar artists to radiohead", limit=5)
    return (time.perf_counter() - start) * 1000, len(requests) - before


def measure(latency_ms: float, count: int) -> dict[str, Any]:
    catalog = load_catalog(LASTFM)
    server, requests = serve(latency_ms / 1000)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        providers.use(providers.OpenAICompatible(url=url, model="bench"))
        vectors.VectorCache._shared = vectors.VectorCache()  # nothing stored: the first search embeds every tool
        index = SearchIndex(catalog.tools, catalog.vocabulary, categories=catalog.categories, semantic=True)
        lexical = SearchIndex(
            catalog.tools, catalog.vocabulary, categories=catalog.categories, semantic=True, fusion=False
        )
        queries = [f"{a} {b} {i}" for i, (a, b) in enumerate(zip(WORDS * 10, WORDS[3:] * 10, strict=False))][:count]
        start = time.perf_counter()
        index.search("similar artists to radiohead", limit=5)
        first_ms = (time.perf_counter() - start) * 1000
        first_requests = len(requests)
        distinct = p50_ms(index, queries)
        distinct_requests = len(requests) - first_requests
        repeated = p50_ms(index, queries)
        repeated_requests = len(requests) - first_requests - distinct_requests
        # A cold start on a catalog compiled with this provider (`spec compile`): its tool vectors and the everyday
        # requests' come with it, so the first search asks for the query alone.
        data = json.loads(compiled.dumps(catalog, vectors=True))
        compiled_ms, compiled_requests = cold_start(data, url, requests)
        del data["vectors"]["everyday"]  # as compiled before 2026-11-29: the tool vectors alone
        tools_only_ms, tools_only_requests = cold_start(data, url, requests)
        return {
            "latency_ms": latency_ms,
            "tools": len(catalog.tools),
            "first_search_ms": round(first_ms, 1),
            "first_search_requests": first_requests,
            "compiled_first_search_ms": round(compiled_ms, 1),
            "compiled_first_search_requests": compiled_requests,
            "compiled_tool_vectors_only_first_search_ms": round(tools_only_ms, 1),
            "compiled_tool_vectors_only_first_search_requests": tools_only_requests,
            "distinct_query_p50_ms": distinct,
            "distinct_queries": len(queries),
            "distinct_query_requests": distinct_requests,
            "repeated_query_p50_ms": repeated,
            "repeated_query_requests": repeated_requests,
            "lexical_alone_p50_ms": p50_ms(lexical, queries),
        }
    finally:
        providers.use(None)
        server.shutdown()
        server.server_close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency-ms", default="0,50", help="the fake provider's delay per request, comma-separated")
    parser.add_argument("--queries", type=int, default=30)
    args = parser.parse_args()
    runs = [measure(float(ms), args.queries) for ms in args.latency_ms.split(",")]
    print(json.dumps({"load_average": os.getloadavg(), "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
