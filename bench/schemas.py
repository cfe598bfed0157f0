"""Schemas, stubs and argument errors of the OpenAPI catalogs in ../shared/openapi/ (issue 28): for each
document, TOOL_GET's tokens in Python (stubs) and in JSON-schema format (mean and max over every tool, and how
many tools' stubs cost more than their schema view) and in progressive mode (with how many tools' input schemas were
shortened to fit its 2,500 tokens), the top-level output fields that lost their type, the tokens
of an `InvalidArguments` answer for a wrong call of each tool (mean and max), and the compiled catalog's size
beside the document's.

Counts are cl100k_base tokens from the project's own counter (progressive_mcp/tokens.py). Prints a table, or
JSON with `--json`; never pass/fail. Skips documents that are not there.

Run with `.venv/bin/python bench/schemas.py [--json] [NAME ...]` (names: spotify, slack, openai, digitalocean,
stripe, twilio).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the real documents' paths: one map, tests/real_documents.py

from real_documents import REAL  # noqa: E402

from progressive_mcp.catalog import _thaw  # noqa: E402
from progressive_mcp.sources import load_catalog  # noqa: E402
from progressive_mcp.sources.compiled import dumps  # noqa: E402
from progressive_mcp.surfaces.surface import CallContext, Surface  # noqa: E402
from progressive_mcp.tokens import count_tokens  # noqa: E402

DOCUMENTS = REAL
KEY = "sk_test_bench"


def document_bytes(path: Path) -> int:
    """A document's size: its file, or for a multi-file document (DigitalOcean) every YAML/JSON file beside it."""
    if path.parent.name == "specification":
        return sum(p.stat().st_size for p in path.parent.rglob("*") if p.suffix in (".yaml", ".yml", ".json"))
    return path.stat().st_size


def untyped_top_fields(schema: Any) -> tuple[int, int]:
    """(top-level output fields, those without a type): the members of the output object, or of each object
    among its anyOf/oneOf alternatives."""
    fields = untyped = 0
    for member in _top_objects(schema):
        for sub in (member.get("properties") or {}).values():
            fields += 1
            untyped += not _typed(sub)
    return fields, untyped


def _top_objects(schema: Any) -> list[dict[str, Any]]:
    if not isinstance(schema, dict):
        return []
    found = [schema] if "properties" in schema else []
    for key in ("anyOf", "oneOf", "allOf"):
        for member in schema.get(key) or []:
            found += _top_objects(member)
    return found


def _typed(schema: Any) -> bool:
    if not isinstance(schema, dict):
        return False
    if "type" in schema or "enum" in schema or "const" in schema:
        return True
    members = [m for key in ("anyOf", "oneOf", "allOf") for m in schema.get(key) or []]
    return bool(members) and all(_typed(m) for m in members)


def wrong_arguments(tool: Any) -> dict[str, Any]:
    """A call with one wrong value: the first argument given a value of the wrong type (an object for a scalar,
    a number for anything else), so the error quotes that argument."""
    if not tool.params:
        return {"not_an_argument": 1}
    param = next((p for p in tool.params if p.required), tool.params[0])
    return {param.name: {"x": 1} if param.type in ("string", "integer", "number", "boolean") else 12345}


def measure(name: str, path: Path) -> dict[str, Any]:
    catalog = load_catalog(path)
    code = Surface(catalog, mode="code")
    progressive = Surface(catalog, mode="progressive", meta=code.meta)
    context = CallContext(api_key=KEY)
    python, schema, plain, errors = [], [], [], []
    fields = untyped = with_untyped = shortened = 0
    for tool in catalog.tools:
        for fmt, into in (("python", python), ("schema", schema)):
            answer = code.call_tool_wire("TOOL_GET", {"tool_name": tool.name, "format": fmt}, context)
            into.append((count_tokens(answer["content"][0]["text"]), tool.name))
        answer = progressive.call_tool_wire("TOOL_GET", {"tool_name": tool.name}, context)
        plain.append((count_tokens(answer["content"][0]["text"]), tool.name))
        shown = answer["structuredContent"]["tools"][0]["inputSchema"]
        shortened += shown != _thaw(tool.input_schema)  # over the budget: shortened (schema_excerpt.get_view)
        error = progressive.call_tool_wire(
            "TOOL_CALL", {"tool_name": tool.name, "arguments": wrong_arguments(tool)}, context
        )
        errors.append((count_tokens(error["content"][0]["text"]), tool.name))
        if tool.output_schema is not None:
            n, bad = untyped_top_fields(_thaw(tool.output_schema))
            fields += n
            untyped += bad
            with_untyped += bad > 0
    compiled = len(dumps(catalog).encode())

    def figures(values: list[tuple[int, str]]) -> dict[str, Any]:
        top = max(values)
        return {"mean": round(statistics.mean(v for v, _ in values)), "max": top[0], "max_tool": top[1]}

    return {
        "document": name,
        "tools": len(catalog.tools),
        "tool_get_python": figures(python),
        "tool_get_schema": figures(schema),
        "tool_get_progressive": figures(plain),
        "progressive_shortened": shortened,
        # the tools whose stubs cost more than their JSON-schema view (a stub should not cost more than the schema)
        "python_above_schema": sum(p > j for (p, _), (j, _) in zip(python, schema, strict=True)),
        "invalid_arguments": figures(errors),
        "output_fields": fields,
        "untyped_output_fields": untyped,
        "tools_with_untyped_output_fields": with_untyped,
        "document_bytes": document_bytes(path),
        "compiled_bytes": compiled,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="documents to measure (default: all that are there)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = [measure(n, p) for n, p in DOCUMENTS.items() if (not args.names or n in args.names) and p.is_file()]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    head = ("document", "tools", "GET py mean/max", "GET schema mean/max", "py > schema", "GET progressive mean/max",
            "shortened", "InvalidArgs mean/max", "untyped out", "doc bytes", "compiled bytes")  # fmt: skip
    print(" | ".join(head))
    for r in rows:
        print(" | ".join(str(x) for x in (
            r["document"], r["tools"],
            f"{r['tool_get_python']['mean']}/{r['tool_get_python']['max']} ({r['tool_get_python']['max_tool']})",
            f"{r['tool_get_schema']['mean']}/{r['tool_get_schema']['max']} ({r['tool_get_schema']['max_tool']})",
            f"{r['python_above_schema']} tools",
            f"{r['tool_get_progressive']['mean']}/{r['tool_get_progressive']['max']}",
            f"{r['progressive_shortened']} tools",
            f"{r['invalid_arguments']['mean']}/{r['invalid_arguments']['max']} ({r['invalid_arguments']['max_tool']})",
            f"{r['untyped_output_fields']} of {r['output_fields']} in {r['tools_with_untyped_output_fields']} tools",
            r["document_bytes"], r["compiled_bytes"],
        )))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
