"""TOOL_SEARCH against FastMCP's BM25 search on the same documents and eval queries: what one search answer shows,
what it costs, how fast it comes.

FastMCP (`FastMCP.from_openapi` with `BM25SearchTransform`, its defaults: 5 tools per search, each with its whole
JSON definition) is the Python peer a user would pick instead. For every catalog of eval/catalogs.yaml that is an
OpenAPI document FastMCP loads, every query of its eval set (both splits: nothing here is tuned) goes to FastMCP's
`search_tools` through its own in-memory client, and to this server's `TOOL_SEARCH` through the real surface
(`surface_answerer`, semantic signal on as `make venv` installs it). Per catalog it prints:

- R@1 and R@5 of the tools each answer lists first (FastMCP's answer holds 5 tools, so its R@5 is what it shows);
- shown: a grade-2 tool named anywhere in the answer (this server's tail and candidates count, as in `eval`);
- no-match on the off-topic queries (an answer with no tool; FastMCP's BM25 answers whenever a word matches);
- the answer's cl100k tokens (median) and a warm search's latency (median, in each server's own process).

FastMCP is not a dependency: give a Python that has it (`python -m venv /tmp/fm && /tmp/fm/bin/pip install
fastmcp`). Its tool names are its slugs of the operationIds, matched to this server's names by their letters and
digits alone; a label that matches no FastMCP tool is counted (`unmatched`) and scored as a miss for FastMCP.

    .venv/bin/python bench/fastmcp_search.py --fastmcp-python /tmp/fm/bin/python [--json] [NAME ...]
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from progressive_mcp.search.catalogs_eval import load_manifest  # noqa: E402
from progressive_mcp.search.evaluation import (  # noqa: E402
    HIT_GRADE,
    engine_ranker,
    load_queries,
    names_shown,
    search_surface,
    surface_answerer,
)
from progressive_mcp.sources import load_catalog  # noqa: E402
from progressive_mcp.tokens import count_tokens  # noqa: E402

MANIFEST = ROOT / "eval" / "catalogs.yaml"

# Runs in FastMCP's interpreter: every query through search_tools, answers and timings as JSON on stdout.
FASTMCP_SCRIPT = """
import asyncio, json, sys, time
import yaml
from fastmcp import Client, FastMCP
from fastmcp.server.transforms.search import (
    BM25SearchTransform, serialize_tools_for_output_json, serialize_tools_for_output_markdown)
path, queries = sys.argv[1], json.load(sys.stdin)
text = open(path, encoding="utf-8").read()
spec = json.loads(text) if path.endswith(".json") else yaml.safe_load(text)
async def main():
    started = time.perf_counter()
    server = FastMCP.from_openapi(spec)
    tools = {tool.name: tool for tool in await server.list_tools()}
    server.add_transform(BM25SearchTransform())
    out = {"names": list(tools), "answers": [], "tools": {}}
    async with Client(server) as client:
        await client.call_tool("search_tools", {"query": "warm up"})
        out["first_search_s"] = time.perf_counter() - started
        for query in queries:
            t0 = time.perf_counter()
            result = await client.call_tool("search_tools", {"query": query})
            ms = (time.perf_counter() - t0) * 1000
            text = "".join(getattr(part, "text", "") for part in result.content)
            listed = [tool["name"] for tool in json.loads(text)] if text.strip() else []
            out["answers"].append({"listed": listed, "ms": ms, "chars": len(text)})
            for name in listed:
                if name not in out["tools"]:
                    one = tools[name]
                    out["tools"][name] = [
                        json.dumps(serialize_tools_for_output_json([one]), separators=(",", ":"), ensure_ascii=False),
                        serialize_tools_for_output_markdown([one]),
                    ]
    return out
print(json.dumps(asyncio.run(main())))
"""


def letters(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def fastmcp_run(path: Path, queries: list[str], python: str, timeout_s: float = 3600) -> dict[str, Any]:
    try:
        done = subprocess.run(
            [python, "-c", FASTMCP_SCRIPT, str(path)],
            input=json.dumps(queries),
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"no answer to {len(queries)} searches within {timeout_s:.0f} s"}
    if done.returncode != 0:
        return {"error": ((done.stderr.strip().splitlines() or ["no output"])[-1])[:200]}
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def ours_run(path: Path, queries: list[str]) -> dict[str, Any]:
    catalog = load_catalog(path)
    meta = search_surface(catalog)
    answer, rank = surface_answerer(catalog, meta=meta), engine_ranker(catalog, meta=meta)
    answer("warm up")
    answers = []
    for query in queries:
        t0 = time.perf_counter()
        text = answer(query)
        ms = (time.perf_counter() - t0) * 1000
        answers.append({"text": text, "listed": rank(query, 10), "ms": ms})
    return {"names": [tool.name for tool in catalog.tools], "answers": answers}


def figures(run: dict[str, Any], queries: list[Any], to_theirs: dict[str, str] | None) -> dict[str, Any]:
    """R@1, R@5, shown, no-match and the answer's tokens and latency for one server's answers to `queries`.

    This server's answers carry their text (shown: a grade-2 name anywhere in it, tail and candidates included).
    FastMCP's carry the tools they list, whose definitions are counted once each: its answer is the JSON list of
    those definitions (tokens: their sum), or with its markdown serializer their markdown; shown is then R@5."""
    r1 = r5 = shown = positives = negatives = empty = 0
    for query, got in zip(queries, run["answers"], strict=True):
        listed = got["listed"] or []
        if not query.positive:
            negatives += 1
            empty += not listed
            continue
        positives += 1
        right = [name for name, grade in query.relevant.items() if grade >= HIT_GRADE]
        if to_theirs is not None:
            right = [to_theirs[name] for name in right if name in to_theirs]
        ranks = [i for i, name in enumerate(listed[:5]) if name in right]
        r1 += bool(ranks) and ranks[0] == 0
        r5 += bool(ranks)
        shown += bool(names_shown(got["text"], right)) if "text" in got else bool(ranks)
    found = {
        "R@1": r1 / positives,
        "R@5": r5 / positives,
        "shown": shown / positives,
        "no_match": empty / negatives if negatives else None,
        "search_ms_p50": statistics.median(got["ms"] for got in run["answers"]),
    }
    if "tools" not in run:
        return found | {"tokens_p50": statistics.median(count_tokens(got["text"]) for got in run["answers"])}
    each = {name: [count_tokens(text) for text in texts] for name, texts in run["tools"].items()}
    json_tokens = [sum(each[name][0] for name in got["listed"]) for got in run["answers"]]
    markdown_tokens = [sum(each[name][1] for name in got["listed"]) for got in run["answers"]]
    return found | {
        "tokens_p50": statistics.median(json_tokens),
        "markdown_tokens_p50": statistics.median(markdown_tokens),
    }


def compare(name: str, python: str, manifest: Path = MANIFEST) -> dict[str, Any] | None:
    item = next((i for i in load_manifest(manifest) if i.entry.name == name), None)
    if item is None or item.spec is None or not item.external or not item.spec.is_file():
        return None
    catalog = load_catalog(item.spec)
    queries = load_queries(item.queries, catalog)
    texts = [q.query for q in queries]
    theirs = fastmcp_run(item.spec, texts, python)
    if "error" in theirs:
        return {"catalog": name, "fastmcp_error": theirs["error"]}
    by_letters = {letters(n): n for n in theirs["names"]}
    to_theirs = {t.name: by_letters[letters(t.name)] for t in catalog.tools if letters(t.name) in by_letters}
    labelled = {n for q in queries for n, g in q.relevant.items() if g >= HIT_GRADE}
    mine = ours_run(item.spec, texts)
    return {
        "catalog": name,
        "tools": len(catalog.tools),
        "positives": sum(q.positive for q in queries),
        "negatives": sum(not q.positive for q in queries),
        "unmatched": len(labelled - set(to_theirs)),
        "ours": figures(mine, queries, None),
        "fastmcp": figures(theirs, queries, to_theirs) | {"first_search_s": theirs["first_search_s"]},
    }


def _pair(a: dict[str, Any], b: dict[str, Any], key: str, spec: str = ".3f") -> str:
    left = "-" if a[key] is None else format(a[key], spec)
    right = "-" if b[key] is None else format(b[key], spec)
    return f"{left} / {right}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="catalogs of eval/catalogs.yaml (default: every OpenAPI one)")
    parser.add_argument("--fastmcp-python", required=True, help="a Python interpreter that has fastmcp installed")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    names = args.names or [i.entry.name for i in load_manifest(MANIFEST) if i.external]
    rows = [row for row in (compare(name, args.fastmcp_python) for name in names) if row]
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print("one search answer per eval query; ours / FastMCP (BM25SearchTransform, 5 tools per answer)")
    print(f"{'catalog':13} {'R@1':>13} {'R@5':>13} {'shown':>13} {'no-match':>13} {'tokens p50':>14} {'ms p50':>13}")
    for row in rows:
        if "fastmcp_error" in row:
            print(f"{row['catalog']:13} FastMCP cannot load it: {row['fastmcp_error']}")
            continue
        a, b = row["ours"], row["fastmcp"]
        pair = functools.partial(_pair, a, b)
        print(
            f"{row['catalog']:13} {pair('R@1'):>13} {pair('R@5'):>13} {pair('shown'):>13} {pair('no_match'):>13} "
            f"{pair('tokens_p50', ',.0f'):>14} {pair('search_ms_p50', '.2f'):>13}"
            + f"  (FastMCP markdown: {b['markdown_tokens_p50']:,.0f} tokens)"
            + (f"  ({row['unmatched']} labelled tools not matched)" if row["unmatched"] else "")
        )


if __name__ == "__main__":
    main()
