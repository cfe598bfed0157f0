"""Check the wire cases' arguments against what an agent sees: each tool's input schema from TOOL_GET.

Runs the real `progressive-mcp stdio --spec DOCUMENT` under the official `mcp` SDK client, asks TOOL_GET for
every tool the cases name, and validates each case's arguments with the `jsonschema` package. Also checks that
each case has the fields the format asks for. Run: `python tests/data/openapi_wire/check_cases.py`
(exit status 1 and one line per problem when a case is wrong).
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import anyio
import jsonschema
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
SHARED = ROOT.parent / "shared" / "openapi"
CASE_FILES = ("stripe.json", "twilio.json", "slack.json")
EXPECT_KEYS = {"method", "path", "query", "content_type"}
OPTIONAL_KEYS = {"headers", "cookies", "body", "json", "multipart"}


def load_cases(names: Iterable[str] = CASE_FILES) -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = []
    for name in names:
        cases += json.loads((HERE / name).read_text(encoding="utf-8"))
    return cases


async def input_schemas(document: Path, tools: list[str]) -> dict[str, dict[str, Any]]:
    """Each tool's inputSchema as TOOL_GET shows it (at most 10 tools a request)."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "progressive_mcp.cli", "stdio", "--spec", str(document), "--upstream", "http://127.0.0.1:9"],
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
        cwd=str(ROOT),
    )
    schemas: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryFile("w+") as log:
        async with Client(stdio_client(params, errlog=log), mode="legacy") as client:
            for start in range(0, len(tools), 10):
                result = await client.call_tool("TOOL_GET", {"tool_name": tools[start : start + 10]})
                if result.is_error:
                    raise RuntimeError(f"TOOL_GET failed for {tools[start : start + 10]}: {result.content}")
                for tool in result.structured_content["tools"]:
                    schemas[tool["name"]] = tool["inputSchema"]
    return schemas


def shape_problems(case: dict[str, Any]) -> list[str]:
    problems = []
    for key in ("document", "tool", "arguments", "expect", "rule"):
        if key not in case:
            problems.append(f"missing {key}")
    expect = case.get("expect", {})
    missing = EXPECT_KEYS - set(expect)
    unknown = set(expect) - EXPECT_KEYS - OPTIONAL_KEYS
    if missing or unknown:
        problems.append(f"expect keys: missing {sorted(missing)}, unknown {sorted(unknown)}")
    if expect.get("content_type") is None and (expect.get("body") is not None or "multipart" in expect):
        problems.append("a body without a content type")
    return problems


def check(cases: list[dict[str, Any]]) -> list[str]:
    """Every problem found, one line each (an empty list when all cases hold)."""
    problems: list[str] = []
    by_document: dict[str, list[dict[str, Any]]] = {}
    for case in cases:
        by_document.setdefault(case["document"], []).append(case)
    for document, group in by_document.items():
        tools = sorted({case["tool"] for case in group})
        schemas = anyio.run(input_schemas, SHARED / document, tools)
        for index, case in enumerate(group):
            label = f"{document} #{index} {case['tool']}"
            problems += [f"{label}: {p}" for p in shape_problems(case)]
            schema = schemas.get(case["tool"])
            if schema is None:
                problems.append(f"{label}: no such tool")
                continue
            validator_class = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
            for error in validator_class(schema).iter_errors(case["arguments"]):
                problems.append(f"{label}: {'/'.join(map(str, error.absolute_path))}: {error.message[:200]}")
    return problems


def main() -> int:
    if not SHARED.is_dir():
        print(f"{SHARED} is absent: nothing to check")
        return 0
    cases = load_cases()
    problems = check(cases)
    for problem in problems:
        print(problem)
    print(f"{len(cases)} cases, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
