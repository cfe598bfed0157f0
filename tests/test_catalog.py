"""Tests for the catalog: every reference function with its parameters, valid JSON Schema 2020-12,
content hashes and version, immutability, lookups with suggestions, and cached validators.

Run with: .venv/bin/python -m pytest tests/test_catalog.py -q
"""

from __future__ import annotations

import dataclasses
import json
import re
import threading
import time
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest

from progressive_mcp.catalog import Catalog, Operation, catalog_version, content_hash, input_schema
from progressive_mcp.errors import UnknownTool
from progressive_mcp.sources import default_spec_path, load_catalog
from progressive_mcp.sources.spec import AnnotationsSpec, Param, Spec, build_catalog, load_spec, parse_spec

REFERENCE = Path("/work/shared/reference/alphavantage_functions.json")
DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"


@pytest.fixture(scope="module")
def spec() -> Spec:
    return load_spec(default_spec_path())


@pytest.fixture(scope="module")
def catalog(spec: Spec) -> Catalog:
    return build_catalog(spec)


def reference_functions() -> dict[str, list[dict[str, Any]]]:
    """Function name → documented params, from the shared reference checklist (skip when absent)."""
    if not REFERENCE.is_file():
        pytest.skip(f"the reference checklist {REFERENCE} is not on this machine")
    data = json.loads(REFERENCE.read_text(encoding="utf-8"))
    return {fn["function"]: fn["params"] for fns in data["categories"].values() for fn in fns}


def as_type(value: Any, type_name: str) -> Any:
    """A reference value in the parameter's own type (the checklist writes some integers as "12")."""
    if type_name == "integer":
        return int(value)
    if type_name == "number":
        return float(value)
    if type_name == "boolean" and isinstance(value, str):
        return value.lower() == "true"
    return value


def validation_errors(validator: Any, instance: Any) -> list[str]:
    return [error.message for error in validator.iter_errors(instance)]


# --- coverage of the reference ----------------------------------------------------------------------


def test_catalog_has_128_distinct_tools(catalog: Catalog) -> None:
    assert len(catalog) == 128
    assert len({tool.name for tool in catalog.tools}) == 128


def test_every_reference_function_is_a_tool(catalog: Catalog) -> None:
    reference = reference_functions()
    assert len(reference) == 128
    assert sorted(set(reference) - {t.name for t in catalog.tools}) == []
    assert sorted({t.name for t in catalog.tools} - set(reference)) == []


def test_every_reference_parameter_has_its_type_required_enum_and_default(catalog: Catalog) -> None:
    mismatches: list[str] = []
    for name, params in reference_functions().items():
        schema = catalog.get(name).input_schema
        properties = schema["properties"]
        if set(properties) != {p["name"] for p in params}:
            mismatches.append(f"{name}: params {sorted(properties)} != {sorted(p['name'] for p in params)}")
            continue
        for param in params:
            prop, kind = properties[param["name"]], param["type"]
            where = f"{name}.{param['name']}"
            if prop["type"] != kind:
                mismatches.append(f"{where}: type {prop['type']} != {kind}")
            if (param["name"] in schema.get("required", ())) != param["required"]:
                mismatches.append(f"{where}: required should be {param['required']}")
            expected_enum = [as_type(v, kind) for v in param["allowed_values"]] if "allowed_values" in param else None
            actual_enum = list(prop["enum"]) if "enum" in prop else None
            if actual_enum != expected_enum:
                mismatches.append(f"{where}: enum {actual_enum} != {expected_enum}")
            expected_default = as_type(param["default"], kind) if "default" in param else None
            actual_default = prop.get("default")
            # Same value and, but for int/float in a number, the same JSON type ("12" is not 12, true is not 1).
            same_type = kind == "number" or type(actual_default) is type(expected_default)
            if actual_default != expected_default or not same_type:
                mismatches.append(f"{where}: default {prop.get('default')!r} != {expected_default!r}")
    assert mismatches == []


# --- the MCP definitions ------------------------------------------------------------------------------


def test_every_input_schema_is_valid_json_schema_2020_12(catalog: Catalog) -> None:
    # The metaschema check must be able to fail, or this test proves nothing.
    assert not jsonschema_rs.meta.is_valid({"$schema": DRAFT_2020_12, "type": "object", "additionalProperties": 1})
    for tool in catalog.tools:
        schema = tool.definition()["inputSchema"]
        assert "$schema" not in schema  # MCP's default dialect is 2020-12; we check against it explicitly
        jsonschema_rs.meta.validate({"$schema": DRAFT_2020_12, **schema})
        assert schema["type"] == "object"
        assert schema["additionalProperties"] is False, tool.name
        assert set(schema.get("required", [])) <= set(schema["properties"]), tool.name


def test_every_default_and_example_is_allowed_by_its_own_property_schema(catalog: Catalog) -> None:
    checked = 0
    for tool in catalog.tools:
        required = set(tool.input_schema.get("required", ()))
        for name, prop in tool.definition()["inputSchema"]["properties"].items():
            validator = jsonschema_rs.Draft202012Validator(prop)
            values = ([prop["default"]] if "default" in prop else []) + prop.get("examples", [])
            for value in values:
                assert validation_errors(validator, value) == [], f"{tool.name}.{name}: {value!r}"
                checked += 1
            if "default" in prop:
                assert name not in required, f"{tool.name}.{name}: required and defaulted"
    assert checked > 100, "the loop above must actually check the defaults"


def test_annotations_say_read_only_and_open_world(catalog: Catalog) -> None:
    for tool in catalog.tools:
        definition = tool.definition()
        assert definition["annotations"] == {"readOnlyHint": True, "destructiveHint": False, "openWorldHint": True}
        assert definition["name"] == tool.name
        assert definition["title"]
        assert definition["description"] == tool.description
        json.dumps(definition)  # plain JSON data, no mapping proxies or tuples


def test_datatype_defaults_to_json_wherever_it_appears(catalog: Catalog) -> None:
    with_datatype = [t for t in catalog.tools if "datatype" in t.input_schema["properties"]]
    assert len(with_datatype) > 50
    for tool in with_datatype:
        prop = tool.input_schema["properties"]["datatype"]
        assert prop["default"] == "json", tool.name
        assert "json" in prop["enum"] and "csv" in prop["enum"], tool.name


def test_congress_trades_needs_a_symbol_or_a_bioguide_id(catalog: Catalog) -> None:
    validator = catalog.validator("CONGRESS_TRADES")
    assert not validator.is_valid({})
    assert not validator.is_valid({"datatype": "json"})
    assert validator.is_valid({"symbol": "AAPL"})
    assert validator.is_valid({"bioguide_id": "P000197"})
    assert validator.is_valid({"symbol": "AAPL", "bioguide_id": "P000197", "datatype": "csv"})


def test_input_schema_with_two_require_any_groups_needs_one_of_each() -> None:
    params = tuple(Param(name, "string", False, "", None, None, None, None, None, None, None) for name in "abcd")
    validator = jsonschema_rs.Draft202012Validator(input_schema(params, [["a", "b"], ["c", "d"]]))
    assert validator.is_valid({"a": "1", "d": "2"})
    assert not validator.is_valid({"a": "1", "b": "2"})
    assert not validator.is_valid({"c": "1"})
    assert not validator.is_valid({"a": "1", "c": "2", "e": "3"})


def test_tool_built_from_a_small_spec() -> None:
    text = """\
api:
  name: demo
  title: Demo
  base_url: https://example.com/query
  dispatch: {name: function}
  default_cache_ttl_s: 60
categories: {stocks: Stocks.}
shared_params:
  symbol: {type: string, description: Ticker, pattern: '^[A-Z]+$'}
tools:
  - name: QUOTE
    category: stocks
    summary: A quote.
    description: |
      Use for a quote.
      Second   line.
    premium: true
    params:
      symbol: {use: symbol, required: true, description: The ticker to quote}
      limit: {type: integer, minimum: 1, maximum: 10, default: 5}
"""
    tool = build_catalog(parse_spec(text)).get("QUOTE")
    assert tool.title == "QUOTE"
    assert tool.cache_ttl_s == 60
    assert tool.description.startswith("Use for a quote. Second line.")
    assert "Premium" in tool.description
    assert tool.definition()["inputSchema"] == {
        "type": "object",
        "properties": {
            "symbol": {"type": "string", "description": "The ticker to quote", "pattern": "^[A-Z]+$"},
            "limit": {"type": "integer", "default": 5, "minimum": 1, "maximum": 10},
        },
        "required": ["symbol"],
        "additionalProperties": False,
    }


# --- hashes and version -----------------------------------------------------------------------------


def test_content_hashes_are_sha256_and_stable_across_loads(catalog: Catalog) -> None:
    again = load_catalog()
    for tool in catalog.tools:
        assert re.fullmatch(r"[0-9a-f]{64}", tool.content_hash), tool.name
        assert again.get(tool.name).content_hash == tool.content_hash
        assert tool.content_hash == content_hash(tool)
    assert again.version == catalog.version
    assert re.fullmatch(r"[0-9a-f]{16,64}", catalog.version)
    assert catalog_version(tuple(reversed(catalog.tools))) == catalog.version


def _with_tool_changed(spec: Spec, index: int, **update: Any) -> Catalog:
    tools = list(spec.tools)
    tools[index] = tools[index].model_copy(update=update)
    return build_catalog(spec.model_copy(update={"tools": tools}))


def test_changing_one_description_changes_that_hash_and_the_version_only(spec: Spec, catalog: Catalog) -> None:
    index = next(i for i, t in enumerate(spec.tools) if t.name == "GLOBAL_QUOTE")
    changed = _with_tool_changed(spec, index, description=spec.tools[index].description + " Now with more.")
    assert changed.get("GLOBAL_QUOTE").content_hash != catalog.get("GLOBAL_QUOTE").content_hash
    assert changed.version != catalog.version
    for tool in catalog.tools:
        if tool.name != "GLOBAL_QUOTE":
            assert changed.get(tool.name).content_hash == tool.content_hash, tool.name


def test_changing_a_parameter_changes_the_hash(spec: Spec, catalog: Catalog) -> None:
    index = next(i for i, t in enumerate(spec.tools) if t.name == "NEWS_SENTIMENT")
    tool_spec = spec.tools[index]
    params = dict(tool_spec.params)
    params["limit"] = params["limit"].model_copy(update={"default": 20})
    changed = _with_tool_changed(spec, index, params=params)
    assert changed.get("NEWS_SENTIMENT").input_schema["properties"]["limit"]["default"] == 20
    assert changed.get("NEWS_SENTIMENT").content_hash != catalog.get("NEWS_SENTIMENT").content_hash
    assert changed.version != catalog.version


@pytest.mark.parametrize(
    "update",
    [
        {"method": "POST"},  # the same schema, but the call now writes: annotations and request change
        {"title": "Quote, now"},
        {"summary": "Latest price and volume of a ticker."},
        {"category": "fundamentals"},
        {"fixed": {"datatype": "json"}},
        {"annotations": {"idempotentHint": True}},
    ],
    ids=lambda update: next(iter(update)),
)
def test_what_an_agent_sees_or_a_call_does_changes_the_hash(
    spec: Spec, catalog: Catalog, update: dict[str, Any]
) -> None:
    index = next(i for i, t in enumerate(spec.tools) if t.name == "GLOBAL_QUOTE")
    if "annotations" in update:
        update = {"annotations": AnnotationsSpec(**update["annotations"])}
    changed = _with_tool_changed(spec, index, **update)
    assert changed.get("GLOBAL_QUOTE").content_hash != catalog.get("GLOBAL_QUOTE").content_hash
    assert changed.version != catalog.version


def test_search_aids_and_cache_lifetimes_leave_the_hash(spec: Spec, catalog: Catalog) -> None:
    index = next(i for i, t in enumerate(spec.tools) if t.name == "GLOBAL_QUOTE")
    changed = _with_tool_changed(spec, index, keywords=["ticker price"], examples=["price of IBM"], cache_ttl_s=5)
    assert changed.get("GLOBAL_QUOTE").keywords == ("ticker price",)
    assert changed.get("GLOBAL_QUOTE").content_hash == catalog.get("GLOBAL_QUOTE").content_hash
    assert changed.version == catalog.version


@pytest.mark.parametrize(
    "update",
    [
        {"operation": Operation("GET", "/v2/quote/{symbol}")},
        {"params": ()},  # an argument's place in the request is part of the call
    ],
    ids=["route", "params"],
)
def test_a_rest_route_and_where_arguments_go_change_the_hash(catalog: Catalog, update: dict[str, Any]) -> None:
    tool = catalog.get("GLOBAL_QUOTE")
    base = dataclasses.replace(tool, content_hash="", operation=Operation("GET", "/quote/{symbol}"))
    if "params" in update:
        symbol = base.param("symbol")
        assert symbol is not None
        moved = dataclasses.replace(symbol, location="path")
        update = {"params": tuple(moved if p.name == "symbol" else p for p in base.params)}
    changed = dataclasses.replace(base, content_hash="", **update)
    assert base.content_hash == content_hash(base)
    assert changed.content_hash != base.content_hash
    # a hash given (a gateway tool brings its server definition's) is kept as given
    assert dataclasses.replace(tool, content_hash="abc").content_hash == "abc"


# --- immutability -------------------------------------------------------------------------------------


def test_catalog_data_cannot_be_changed(catalog: Catalog) -> None:
    tool = catalog.get("GLOBAL_QUOTE")
    with pytest.raises(TypeError):
        tool.input_schema["additionalProperties"] = True  # type: ignore[index]
    with pytest.raises(TypeError):
        tool.input_schema["properties"]["symbol"]["type"] = "integer"
    with pytest.raises(AttributeError):
        tool.input_schema["required"].append("datatype")
    with pytest.raises(dataclasses.FrozenInstanceError):
        tool.description = "changed"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        catalog.version = "changed"  # type: ignore[misc]
    with pytest.raises(TypeError):
        catalog.categories["new"] = "x"  # type: ignore[index]
    assert isinstance(catalog.tools, tuple)
    assert tool.input_schema["additionalProperties"] is False
    assert tool.input_schema["properties"]["symbol"]["type"] == "string"


def test_definition_is_a_fresh_copy_each_call(catalog: Catalog) -> None:
    tool = catalog.get("TIME_SERIES_DAILY")
    first = tool.definition()
    pristine = json.dumps(first, sort_keys=True)
    first["inputSchema"]["properties"]["symbol"]["type"] = "integer"
    first["inputSchema"]["required"].append("outputsize")
    first["inputSchema"]["properties"]["outputsize"]["enum"].append("huge")
    first["annotations"]["readOnlyHint"] = False
    first["description"] = "changed"
    assert json.dumps(tool.definition(), sort_keys=True) == pristine
    assert tool.definition() is not tool.definition()


# --- lookups -------------------------------------------------------------------------------------------


def test_get_is_exact_and_accepts_lower_case(catalog: Catalog) -> None:
    tool = catalog.get("GLOBAL_QUOTE")
    assert tool.name == "GLOBAL_QUOTE"
    assert catalog.get("global_quote") is tool
    assert catalog.get(" Global_Quote ") is tool
    assert "GLOBAL_QUOTE" in catalog
    assert "NOT_A_TOOL" not in catalog


@pytest.mark.parametrize(
    ("wrong", "first"),
    [("GLOBAL_QOUTE", "GLOBAL_QUOTE"), ("TIME_SERIES_DAILYY", "TIME_SERIES_DAILY"), ("symbol-search", "SYMBOL_SEARCH")],
)
def test_unknown_name_raises_with_the_closest_tools_first(catalog: Catalog, wrong: str, first: str) -> None:
    with pytest.raises(UnknownTool) as info:
        catalog.get(wrong)
    assert info.value.name == wrong
    assert info.value.suggestions[0] == first
    assert 1 <= len(info.value.suggestions) <= 3
    assert all(name in catalog for name in info.value.suggestions)
    assert first in str(info.value)


def test_unknown_name_with_nothing_close_has_no_suggestions(catalog: Catalog) -> None:
    with pytest.raises(UnknownTool) as info:
        catalog.get("XYZZY")
    assert info.value.suggestions == []
    assert "Did you mean" not in str(info.value)


# --- validators ----------------------------------------------------------------------------------------


def test_validator_is_compiled_once_per_tool(spec: Spec) -> None:
    fresh = build_catalog(spec)
    validator = fresh.validator("GLOBAL_QUOTE")
    assert fresh.validator("GLOBAL_QUOTE") is validator
    assert fresh.validator("global_quote") is validator
    assert fresh.validator("TIME_SERIES_DAILY") is not validator
    with pytest.raises(UnknownTool):
        fresh.validator("GLOBAL_QOUTE")


def test_validator_accepts_and_rejects_arguments(catalog: Catalog) -> None:
    quote = catalog.validator("GLOBAL_QUOTE")
    assert quote.is_valid({"symbol": "IBM"})
    assert quote.is_valid({"symbol": "IBM", "datatype": "csv"})
    assert not quote.is_valid({})
    assert not quote.is_valid({"symbol": "IBM", "datatype": "xml"})
    assert not quote.is_valid({"symbol": 42})
    assert not quote.is_valid({"symbol": "IBM", "apikey": "stolen"})
    assert not quote.is_valid({"symbol": "IBM", "function": "TIME_SERIES_DAILY"})
    rsi = catalog.validator("RSI")
    good = {"symbol": "IBM", "interval": "daily", "time_period": 14, "series_type": "close"}
    assert rsi.is_valid(good)
    assert not rsi.is_valid({**good, "time_period": 0})
    assert not rsi.is_valid({**good, "time_period": "14"})
    assert not rsi.is_valid({**good, "interval": "2min"})
    assert len(validation_errors(rsi, {"interval": "2min", "time_period": 0, "series_type": "close"})) >= 3


def test_validators_and_lookups_are_thread_safe(spec: Spec, monkeypatch: pytest.MonkeyPatch) -> None:
    compiled: list[str] = []
    real_validator = jsonschema_rs.Draft202012Validator

    def slow_validator(schema: dict[str, Any]) -> Any:
        # Sleeping releases the GIL mid-build, so without the lock several threads would each build one.
        compiled.append(json.dumps(schema, sort_keys=True))
        time.sleep(0.0005)
        return real_validator(schema)

    monkeypatch.setattr(jsonschema_rs, "Draft202012Validator", slow_validator)
    fresh = build_catalog(spec)
    names = [tool.name for tool in fresh.tools]
    threads_count = 8
    barrier = threading.Barrier(threads_count)
    seen: list[dict[str, Any]] = [{} for _ in range(threads_count)]
    errors: list[BaseException] = []

    def work(slot: int) -> None:
        try:
            barrier.wait()
            for name in names:  # the same order in every thread: they all race for each validator
                asked = name.lower() if slot % 2 else name
                assert fresh.get(asked).name == name
                seen[slot][name] = fresh.validator(asked)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(slot,)) for slot in range(threads_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert errors == []
    assert len(compiled) == len(names), "one validator is built per tool, however many threads ask"
    for name in names:
        assert len({id(validators[name]) for validators in seen}) == 1, f"{name}: threads got different validators"
        assert fresh.validator(name) is seen[0][name]
