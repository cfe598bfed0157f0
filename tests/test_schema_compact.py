"""TOOL_GET's compact view (PMCP_SCHEMA_VIEW=compact, progressive_mcp/schema_compact.py): each argument on one
line, every argument named with its type and whether it is required, within TOOL_GET's budget, on the real
documents; chosen by the environment or the flag, refused when misspelt; code mode's JSON view left alone."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from progressive_mcp.errors import ConfigError
from progressive_mcp.schema_compact import SHORTENED, arguments, compact_entry, first_sentences, schema_view
from progressive_mcp.schema_excerpt import GET_VIEW_TOKENS
from progressive_mcp.settings import Settings
from progressive_mcp.sources import load_catalog
from progressive_mcp.surfaces.metatools import MetaTools
from progressive_mcp.surfaces.surface import CallContext, Surface
from progressive_mcp.tokens import dumps, fits_budget
from tests.real_documents import REAL

FIXTURES = Path(__file__).parent / "fixtures"

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "To": {"type": "string", "description": "The phone number to call.   It may be a SIP address."},
        "Method": {"type": "string", "enum": ["GET", "POST"], "default": "POST"},
        "limit": {"type": "integer", "minimum": 1, "maximum": 50},
        "amount": {"type": "number", "exclusiveMinimum": 0},
        "since": {"type": "string", "format": "date-time", "deprecated": True},
        "address": {"$ref": "#/$defs/Address"},
        "tags": {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
        "metadata": {"type": "object", "additionalProperties": {"type": "string"}},
        "tree": {"$ref": "#/$defs/Node"},
        "mode": {"const": "fast"},
        "both": {"allOf": [{"$ref": "#/$defs/Address"}, {"properties": {"zip": {"type": "string"}}}]},
    },
    "required": ["To", "address"],
    "$defs": {
        "Address": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        "Node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/Node"}}},
    },
}


def test_each_argument_is_one_line_with_its_type_requiredness_default_and_description() -> None:
    assert arguments(SCHEMA).splitlines() == [
        "To: string — The phone number to call. It may be a SIP address.",
        'Method?: "GET"|"POST" = "POST"',
        "limit?: integer 1..50",
        "amount?: number >0",
        "since?: string(date-time) (deprecated)",
        "address: {city: string}",
        "tags?: (string | null)[]",
        "metadata?: {string: string}",
        "tree?: {child?: Node}",  # a recursive definition is named, not written again
        'mode?: "fast"',
        "both?: {city: string, zip?: string}",
    ]


def test_a_schema_nested_past_reason_is_cut_not_a_crash() -> None:
    deep: dict[str, Any] = {"type": "string"}
    for i in range(3000):
        deep = {"anyOf": [deep, {"type": "null"}]} if i % 2 else {"type": "array", "items": deep}
    line = arguments({"type": "object", "properties": {"x": deep}})
    assert line.startswith("x?: ") and "…" in line


def test_no_arguments_and_a_schema_without_properties() -> None:
    assert arguments({"type": "object"}) == "(no arguments)"
    assert arguments({"type": "object", "properties": {}}) == "(no arguments)"
    assert arguments({"anyOf": [{"type": "string"}, {"type": "integer"}]}) == "arguments: string | integer"


def test_long_enums_and_descriptions_are_cut_and_say_so() -> None:
    many = {"type": "object", "properties": {"code": {"enum": [f"v{i}" for i in range(40)]}}}
    assert arguments(many).endswith('"v29"|… (10 more)')
    text = "First sentence here. Then " + "word " * 60
    assert first_sentences(text, 120) == "First sentence here."
    assert first_sentences("x" * 10 + " " + "y" * 200, 50).endswith("…")
    assert len(first_sentences("word " * 100, 50)) <= 50


def test_the_entry_keeps_the_tools_name_category_hash_and_annotations() -> None:
    entry = compact_entry(
        {
            "name": "CreateCall",
            "title": "Create a call",
            "description": "Dials a number. " * 40,
            "inputSchema": SCHEMA,
            "category": "calls",
            "content_hash": "0123456789abcdef",
            "annotations": {"readOnlyHint": False},
        }
    )
    assert set(entry) == {"name", "title", "description", "category", "content_hash", "annotations", "arguments"}
    assert len(entry["description"]) <= 400 and entry["description"].endswith("Dials a number.")
    assert entry["arguments"] == arguments(SCHEMA)


def test_an_entry_over_budget_is_shortened_step_by_step_and_says_so() -> None:
    properties = {
        f"field_{i}": {
            "type": "object",
            "description": "A long explanation of this field. " * 6,
            "properties": {f"inner_{j}": {"enum": [f"value_{k}" for k in range(30)]} for j in range(4)},
        }
        for i in range(40)
    }
    entry = compact_entry({"name": "big", "inputSchema": {"type": "object", "properties": properties}})
    assert fits_budget(dumps(entry), GET_VIEW_TOKENS)
    lines = entry["arguments"].splitlines()
    assert [line.split(":", 1)[0] for line in lines[:-1]] == [f"field_{i}?" for i in range(40)]
    assert lines[-1].startswith(SHORTENED.split("{how}")[0])


def test_the_view_comes_from_the_environment_and_a_wrong_value_is_refused() -> None:
    assert schema_view({}) == "json"
    assert schema_view({"PMCP_SCHEMA_VIEW": " Compact "}) == "compact"
    with pytest.raises(ConfigError, match=r"PMCP_SCHEMA_VIEW must be one of json, compact, not 'yaml'"):
        schema_view({"PMCP_SCHEMA_VIEW": "yaml"})
    assert Settings.from_env({"PMCP_SCHEMA_VIEW": "compact"}).schema_view == "compact"
    assert Settings.from_env({}, schema_view="compact").schema_view == "compact"  # the flag
    with pytest.raises(ConfigError, match="PMCP_SCHEMA_VIEW"):
        Settings.from_env({"PMCP_SCHEMA_VIEW": "tiny"})


def _call(surface: Surface, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = surface.call_tool_wire(tool, args, CallContext(api_key="demo-key"))
    assert not result["isError"], result
    answer: dict[str, Any] = result["structuredContent"]
    assert json.loads(result["content"][0]["text"]) == answer
    return answer


def test_tool_get_and_search_schemas_give_the_compact_view_and_code_mode_keeps_json() -> None:
    catalog = load_catalog()
    surface = Surface.from_settings(Settings.from_env({"PMCP_SCHEMA_VIEW": "compact"}), catalog=catalog)
    (entry,) = _call(surface, "TOOL_GET", {"tool_name": "GLOBAL_QUOTE"})["tools"]
    assert "inputSchema" not in entry
    assert entry["arguments"].splitlines()[0] == "symbol: string — Ticker, e.g. IBM or TSCO.LON"
    found = _call(surface, "TOOL_SEARCH", {"query": "apple stock price", "schemas": True})["results"][0]
    assert found["name"] == "GLOBAL_QUOTE" and found["arguments"] == entry["arguments"]
    # Variants (?mode=, narrower policies) keep the view; code mode's `format: schema` stays JSON Schema.
    code = surface.variant("code", None)
    (schema,) = _call(code, "TOOL_GET", {"tool_name": "GLOBAL_QUOTE", "format": "schema"})["tools"]
    assert schema["inputSchema"]["required"] == ["symbol"]
    searched = _call(code, "TOOL_SEARCH", {"query": "apple stock price", "schemas": True})["results"][0]
    assert "arguments" not in searched and "async def GLOBAL_QUOTE" in searched["stub"]
    assert surface.variant("hybrid", None).meta.view == "compact"
    # Its tools/list says so: TOOL_GET's description and TOOL_SEARCH's `schemas` name the argument lines.
    definitions = {d["name"]: d for d in surface.meta.definitions}
    assert definitions["TOOL_GET"]["description"] == "Arguments of up to 10 tools, by name, one line each."
    assert definitions["TOOL_SEARCH"]["inputSchema"]["properties"]["schemas"]["description"].endswith("arguments")
    json_view = Surface.from_settings(Settings.from_env({}), catalog=catalog)
    assert (
        "inputSchema"
        in {d["name"]: d for d in json_view.meta.definitions}["TOOL_SEARCH"]["inputSchema"]["properties"]["schemas"][
            "description"
        ]
    )
    assert "inputSchema" in _call(json_view, "TOOL_GET", {"tool_name": "GLOBAL_QUOTE"})["tools"][0]


def _top_level_enum(schema: Any) -> list[Any] | None:
    if isinstance(schema, dict) and isinstance(schema.get("enum"), list) and len(schema["enum"]) <= 30:
        return list(schema["enum"])
    return None


@pytest.mark.parametrize(
    "source",
    [None, FIXTURES / "lastfm" / "lastfm.yaml", *REAL.values()],
    ids=["alphavantage", "lastfm", *REAL],
)
def test_every_tool_of_real_documents_names_every_argument_within_budget(source: Path | None) -> None:
    if source is not None and not source.is_file():
        pytest.skip(f"{source} is not here (../shared/openapi)")
    catalog = load_catalog(source)
    meta = MetaTools(catalog, view="compact")
    for tool in catalog.tools:
        answer = meta.tool_get({"tool_name": tool.name})
        assert fits_budget(dumps(answer), GET_VIEW_TOKENS), tool.name
        (entry,) = answer["tools"]
        schema = json.loads(dumps(tool.definition()["inputSchema"]))
        properties = schema.get("properties") or {}
        lines = entry["arguments"].splitlines()
        if not properties:
            assert lines == ["(no arguments)"] or lines[0].startswith("arguments: "), tool.name
            continue
        required = set(schema.get("required") or ())
        heads = [re.match(r"(.*?)(\??): ", line) for line in lines[: len(properties)]]
        assert [(m.group(1), m.group(2) == "") for m in heads if m] == [(n, n in required) for n in properties]
        cut_enums = "long enums cut" in entry["arguments"]
        for line, (name, sub) in zip(lines, properties.items(), strict=False):
            values = _top_level_enum(sub)
            if values and not cut_enums:
                for value in values:
                    assert json.dumps(value, ensure_ascii=False) in line, (tool.name, name, value)
