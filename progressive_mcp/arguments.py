"""Tool arguments: accept what models send, check it against the tool's schema, fill in defaults.

Models send arguments as an object or as a JSON string, numbers as strings ("14") and enum
values in the wrong case ("Daily"). Unambiguous cases are repaired; anything else is reported,
every problem at once, in an InvalidArguments error that carries the input schema. Example::

    prepare_arguments(catalog, "RSI", '{"symbol": "IBM", "interval": "Daily", "time_period": "14",
                                        "series_type": "close"}')
    # {'symbol': 'IBM', 'interval': 'daily', 'time_period': 14, 'series_type': 'close', 'datatype': 'json'}
"""

from __future__ import annotations

import json
import math
from typing import Any

from progressive_mcp.catalog import Catalog, CatalogTool, _thaw
from progressive_mcp.errors import InvalidArguments
from progressive_mcp.spec import ResolvedParam


def parse_arguments(tool_name: str, raw: Any, input_schema: dict[str, Any]) -> dict[str, Any]:
    """Arguments as a dict, from an object, a JSON string, or nothing."""
    if raw is None or raw == "":
        return {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise InvalidArguments(
                tool_name,
                [f"arguments is a string but not valid JSON ({exc.msg} at position {exc.pos})"],
                input_schema,
            ) from None
    if not isinstance(raw, dict):
        raise InvalidArguments(tool_name, [f"arguments must be a JSON object, not {type(raw).__name__}"], input_schema)
    return raw


def prepare_arguments(catalog: Catalog, tool_name: str, raw: Any) -> dict[str, Any]:
    """Parsed, repaired, validated arguments with every default filled in."""
    tool = catalog.get(tool_name)
    schema = _thaw(tool.input_schema)
    arguments = {
        name: _repair(tool.param(name), value) for name, value in parse_arguments(tool.name, raw, schema).items()
    }
    problems = [
        _describe(tool, error)
        for error in catalog.validator(tool.name).iter_errors(arguments)
        if not (_kind(error) == "AnyOf" and not error.instance_path)  # reported below, by name
    ]
    for group in tool.require_any:
        if not any(name in arguments for name in group):
            problems.append(f"give at least one of: {', '.join(group)}")
    if problems:
        raise InvalidArguments(tool.name, sorted(set(problems)), schema)
    return with_defaults(tool, arguments)


def with_defaults(tool: CatalogTool, arguments: dict[str, Any]) -> dict[str, Any]:
    filled = dict(arguments)
    for p in tool.params:
        if p.name not in filled and p.default is not None:
            filled[p.name] = p.default
    return filled


def _repair(param: ResolvedParam | None, value: Any) -> Any:
    """Fix what is unambiguous: '14' for an integer, 'TRUE' for a boolean, 'Daily' for 'daily'."""
    if param is None or not isinstance(value, str):
        return value
    text = value.strip()
    if param.type == "integer":
        try:
            return int(text)
        except ValueError:
            return value
    if param.type == "number":
        try:
            number = float(text) if any(c in text for c in ".eE") else int(text)
        except ValueError:
            return value
        return number if math.isfinite(number) else value  # "1e999" is no JSON number
    if param.type == "boolean" and text.lower() in ("true", "false"):
        return text.lower() == "true"
    if param.type == "string" and param.enum is not None and text not in param.enum:
        matches = [v for v in param.enum if isinstance(v, str) and v.lower() == text.lower()]
        if len(matches) == 1:
            return matches[0]
    return value


def _kind(error: Any) -> str:
    return type(error.kind).__name__


def _describe(tool: CatalogTool, error: Any) -> str:
    """One readable line per schema violation, naming the argument."""
    path = "/".join(str(p) for p in error.instance_path)
    message: str = error.message
    if _kind(error) == "AdditionalProperties":
        allowed = ", ".join(p.name for p in tool.params) or "none"
        return f"{message}; allowed arguments: {allowed}"
    if _kind(error) == "Enum":  # jsonschema-rs names only the first two options ("or 6 other candidates")
        allowed = ", ".join(json.dumps(option) for option in error.kind.options)
        message = f"{json.dumps(error.instance)} is not one of the allowed values: {allowed}"
    return f"{path}: {message}" if path else message
