"""Tests for tool arguments: parsing, unambiguous repairs, validation listing every problem, defaults.

Run with: .venv/bin/python -m pytest tests/test_arguments.py -q
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from progressive_mcp.calls.arguments import prepare_arguments
from progressive_mcp.catalog import Catalog
from progressive_mcp.errors import InvalidArguments, UnknownTool
from progressive_mcp.sources import load_catalog
from progressive_mcp.sources.spec import build_catalog, parse_spec

RSI_OK = {"symbol": "IBM", "interval": "daily", "time_period": 14, "series_type": "close"}
INDICATOR_INTERVALS = ["1min", "5min", "15min", "30min", "60min", "daily", "weekly", "monthly"]


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


def invalid(catalog: Catalog, tool_name: str, raw: Any) -> InvalidArguments:
    with pytest.raises(InvalidArguments) as caught:
        prepare_arguments(catalog, tool_name, raw)
    return caught.value


def problem_about(error: InvalidArguments, *needles: str) -> str:
    """The one problem line that mentions every needle."""
    matches = [p for p in error.problems if all(n in p for n in needles)]
    assert len(matches) == 1, f"no single problem mentions {needles}: {error.problems}"
    return matches[0]


# --- accepted shapes ----------------------------------------------------------------------------


def test_object_and_json_string_give_the_same_arguments(catalog: Catalog) -> None:
    from_object = prepare_arguments(catalog, "RSI", dict(RSI_OK))
    from_string = prepare_arguments(catalog, "RSI", json.dumps(RSI_OK))

    assert from_object == from_string == {**RSI_OK, "datatype": "json"}


def test_the_callers_dict_is_not_changed(catalog: Catalog) -> None:
    raw = {"symbol": "IBM", "interval": "Daily", "time_period": "14", "series_type": "close"}
    before = dict(raw)

    prepare_arguments(catalog, "RSI", raw)

    assert raw == before


@pytest.mark.parametrize("nothing", [None, "", {}])
def test_no_arguments_at_all_reports_the_required_ones(catalog: Catalog, nothing: Any) -> None:
    error = invalid(catalog, "GLOBAL_QUOTE", nothing)

    assert error.problems == ['"symbol" is a required property']


def test_tool_names_are_checked_first(catalog: Catalog) -> None:
    with pytest.raises(UnknownTool, match="GLOBAL_QUOTE"):
        prepare_arguments(catalog, "GLOBAL_QOUTE", {"symbol": "IBM"})


# --- arguments that are not an object -----------------------------------------------------------


def test_invalid_json_string_names_the_json_error(catalog: Catalog) -> None:
    error = invalid(catalog, "GLOBAL_QUOTE", '{"symbol": "IBM",}')

    assert len(error.problems) == 1
    problem = error.problems[0]
    assert "not valid JSON" in problem
    assert "Expecting property name enclosed in double quotes" in problem
    assert "position 17" in problem
    assert error.details()["inputSchema"] == catalog.get("GLOBAL_QUOTE").definition()["inputSchema"]


@pytest.mark.parametrize(("raw", "kind"), [(["IBM"], "list"), ('["IBM"]', "list"), (42, "int"), ('"IBM"', "str")])
def test_arguments_that_are_not_an_object_are_rejected(catalog: Catalog, raw: Any, kind: str) -> None:
    error = invalid(catalog, "GLOBAL_QUOTE", raw)

    assert error.problems == [f"arguments must be a JSON object, not {kind}"]


# --- every problem at once ----------------------------------------------------------------------


def test_every_problem_is_listed_at_once(catalog: Catalog) -> None:
    raw = {"interval": "2min", "time_period": "fourteen", "month": "2024-1", "bogus": 1}

    error = invalid(catalog, "RSI", raw)

    assert error.tool_name == "RSI"
    assert len(error.problems) == 6
    problem_about(error, '"symbol"', "required")
    problem_about(error, '"series_type"', "required")
    enum_problem = problem_about(error, "interval", '"2min"')
    assert all(f'"{value}"' in enum_problem for value in INDICATOR_INTERVALS)  # every allowed value, named
    problem_about(error, "time_period", '"fourteen"', "integer")
    unknown = problem_about(error, "'bogus'")
    assert "allowed arguments: symbol, interval, time_period, series_type, month, datatype, entitlement" in unknown
    problem_about(error, "month", '"2024-1"', "does not match")
    message = str(error)
    assert all(problem in message for problem in error.problems)


def test_error_details_carry_the_problems_and_the_input_schema(catalog: Catalog) -> None:
    error = invalid(catalog, "RSI", {"symbol": "IBM", "interval": "yearly"})

    details = error.details()
    assert details["tool_name"] == "RSI"
    assert details["problems"] == error.problems
    schema = details["inputSchema"]  # the failing argument's schema and the required list (issue 28: not the whole)
    whole = catalog.get("RSI").definition()["inputSchema"]
    assert schema["properties"]["interval"] == whole["properties"]["interval"]
    assert schema["properties"]["interval"]["enum"] == INDICATOR_INTERVALS
    assert schema["required"] == whole["required"]
    json.dumps(details)  # plain JSON data, ready for an isError result


def test_out_of_range_numbers_are_reported(catalog: Catalog) -> None:
    error = invalid(catalog, "RSI", {**RSI_OK, "time_period": 0})

    problem_about(error, "time_period", "0")


# --- repairs ------------------------------------------------------------------------------------


def test_unambiguous_values_are_repaired(catalog: Catalog) -> None:
    raw = '{"symbol": "IBM", "interval": "Daily", "time_period": " 14 ", "series_type": "CLOSE"}'

    assert prepare_arguments(catalog, "RSI", raw) == {**RSI_OK, "datatype": "json"}


@pytest.mark.parametrize(("given", "expected"), [("TRUE", True), ("true", True), ("False", False), (" false ", False)])
def test_boolean_words_are_repaired(catalog: Catalog, given: str, expected: bool) -> None:
    arguments = prepare_arguments(
        catalog, "TIME_SERIES_INTRADAY", {"symbol": "IBM", "interval": "5min", "extended_hours": given}
    )

    assert arguments["extended_hours"] is expected


def test_number_strings_are_repaired(catalog: Catalog) -> None:
    arguments = prepare_arguments(
        catalog, "SAR", {"symbol": "IBM", "interval": "daily", "acceleration": "0.02", "maximum": "1"}
    )

    assert arguments["acceleration"] == 0.02
    assert arguments["maximum"] == 1


@pytest.mark.parametrize(
    ("tool_name", "arguments", "argument", "given"),
    [
        ("RSI", RSI_OK, "time_period", "14.5"),  # an integer cannot take a fraction
        ("RSI", RSI_OK, "time_period", "fourteen"),
        ("RSI", RSI_OK, "interval", "day"),  # a guess, not a case slip
        ("TIME_SERIES_INTRADAY", {"symbol": "IBM", "interval": "5min"}, "extended_hours", "yes"),
        ("TIME_SERIES_INTRADAY", {"symbol": "IBM", "interval": "5min"}, "extended_hours", "1"),
        ("SAR", {"symbol": "IBM", "interval": "daily"}, "acceleration", "1e999"),  # no JSON number
        ("SAR", {"symbol": "IBM", "interval": "daily"}, "acceleration", "nan"),
    ],
)
def test_ambiguous_values_are_not_repaired(
    catalog: Catalog, tool_name: str, arguments: dict[str, Any], argument: str, given: str
) -> None:
    error = invalid(catalog, tool_name, {**arguments, argument: given})

    problem_about(error, argument, json.dumps(given))  # reported as the caller wrote it


def test_case_only_repair_needs_a_single_match() -> None:
    spec = parse_spec(
        """
        api: {name: demo, title: Demo, base_url: "https://example.test/query", dispatch: {name: function}}
        categories: {misc: Miscellaneous}
        tools:
          - name: PICK
            category: misc
            summary: Pick a mode.
            description: A tool whose enum has two values that differ only in case.
            params:
              mode: {type: string, enum: [Close, close, open], required: true}
        """
    )
    catalog = build_catalog(spec)

    assert prepare_arguments(catalog, "PICK", {"mode": "OPEN"}) == {"mode": "open"}
    assert prepare_arguments(catalog, "PICK", {"mode": "Close"}) == {"mode": "Close"}
    error = invalid(catalog, "PICK", {"mode": "CLOSE"})  # Close or close? Not ours to guess
    problem_about(error, "mode", '"CLOSE"', '"Close", "close", "open"')


# --- defaults and require_any -------------------------------------------------------------------


def test_defaults_are_filled_in(catalog: Catalog) -> None:
    assert prepare_arguments(catalog, "GLOBAL_QUOTE", {"symbol": "IBM"}) == {"symbol": "IBM", "datatype": "json"}
    assert prepare_arguments(catalog, "TIME_SERIES_DAILY", {"symbol": "IBM"}) == {
        "symbol": "IBM",
        "outputsize": "compact",
        "datatype": "json",
    }


def test_a_rest_operations_document_defaults_are_not_filled_in() -> None:
    """An OpenAPI default says what the server assumes without the parameter: an absent argument sends nothing."""
    tasks = load_catalog(Path(__file__).parent / "fixtures" / "openapi" / "tasks" / "openapi.yaml")
    tool = next(t for t in tasks.tools if t.param("limit") is not None and t.param("limit").default == 20)
    required = {p.name: "p1" for p in tool.params if p.required and p.type == "string"}
    assert "limit" not in prepare_arguments(tasks, tool.name, required)


def test_given_values_win_over_defaults(catalog: Catalog) -> None:
    arguments = prepare_arguments(
        catalog, "TIME_SERIES_DAILY", {"symbol": "IBM", "outputsize": "full", "datatype": "csv"}
    )

    assert arguments == {"symbol": "IBM", "outputsize": "full", "datatype": "csv"}


def test_congress_trades_needs_a_symbol_or_a_politician(catalog: Catalog) -> None:
    error = invalid(catalog, "CONGRESS_TRADES", {})

    problem = problem_about(error, "symbol", "bioguide_id")
    assert "at least one" in problem
    assert prepare_arguments(catalog, "CONGRESS_TRADES", {"symbol": "AAPL"})["symbol"] == "AAPL"
    assert prepare_arguments(catalog, "CONGRESS_TRADES", {"bioguide_id": "P000197"})["bioguide_id"] == "P000197"


def test_congress_trades_lists_its_other_problems_too(catalog: Catalog) -> None:
    error = invalid(catalog, "CONGRESS_TRADES", {"datatype": "xml", "bioguide": "P000197"})

    assert len(error.problems) == 3
    problem_about(error, "symbol", "bioguide_id", "at least one")
    problem_about(error, "datatype", '"xml"', '"json", "csv"')
    problem_about(error, "'bioguide'", "allowed arguments")


@pytest.mark.parametrize(
    "raw",
    [{"symbol": "IBM\ud800"}, {"\udfff": 1, "symbol": "IBM"}, '{"symbol": "\\ud800"}'],
    ids=["in-a-value", "in-a-name", "in-a-json-string"],
)
def test_lone_surrogates_are_invalid_arguments(catalog: Catalog, raw: Any) -> None:
    """The validator reads UTF-8, which a lone surrogate lacks (was an unexpected UnicodeEncodeError)."""
    error = invalid(catalog, "GLOBAL_QUOTE", raw)
    problem_about(error, "lone surrogate")


def test_an_integral_float_for_an_integer_goes_upstream_as_an_integer(catalog: Catalog) -> None:
    arguments = prepare_arguments(
        catalog, "RSI", {"symbol": "IBM", "interval": "daily", "time_period": 14.0, "series_type": "close"}
    )
    assert arguments["time_period"] == 14 and isinstance(arguments["time_period"], int)
