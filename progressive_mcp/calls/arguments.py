"""Tool arguments: accept what models send, check it against the tool's schema, fill in defaults.

Models send arguments as an object or as a JSON string, numbers as strings ("14") and enum
values in the wrong case ("Daily"). Unambiguous cases are repaired; anything else is reported,
every problem at once, in an InvalidArguments error that quotes the schema of what failed. Example::

    prepare_arguments(catalog, "RSI", '{"symbol": "IBM", "interval": "Daily", "time_period": "14",
                                        "series_type": "close"}')
    # {'symbol': 'IBM', 'interval': 'daily', 'time_period': 14, 'series_type': 'close', 'datatype': 'json'}
"""

from __future__ import annotations

import json
import math
from typing import Any

from progressive_mcp.catalog import Catalog, CatalogTool, Param, _thaw
from progressive_mcp.errors import InvalidArguments

# Bounds on one call's arguments. No tool takes more than a dozen arguments and no real value (a ticker
# list, a search phrase) comes near these; larger input is a mistake or an attack that must neither reach
# the upstream URL nor be echoed back in full in the error. MAX_VALUE_CHARS bounds what goes in a URL or a header;
# a string sent in a body is bounded by the request that carries it (`_oversized`).
MAX_ARGUMENTS = 64
MAX_VALUE_CHARS = 2048
MAX_NESTING = 16
MAX_PROBLEM_CHARS = 300
MAX_LISTED_VALUES = 12  # of an enum, in a problem line


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
        except RecursionError:
            raise InvalidArguments(tool_name, ["arguments is nested too deeply"], input_schema) from None
    if not isinstance(raw, dict):
        raise InvalidArguments(tool_name, [f"arguments must be a JSON object, not {type(raw).__name__}"], input_schema)
    if len(raw) > MAX_ARGUMENTS:
        raise InvalidArguments(
            tool_name, [f"{len(raw)} arguments given; a tool takes at most {MAX_ARGUMENTS}"], input_schema
        )
    return raw


def prepare_arguments(catalog: Catalog, tool_name: str, raw: Any) -> dict[str, Any]:
    """Parsed, repaired, validated arguments with every default filled in."""
    tool = catalog.get(tool_name)
    schema = _thaw(tool.input_schema)
    arguments = {
        name: _repair(tool.param(name), value) for name, value in parse_arguments(tool.name, raw, schema).items()
    }
    oversized = [_oversized(str(name), value, _outside_url(tool, str(name))) for name, value in arguments.items()]
    if any(oversized):  # before the schema check, whose messages would echo the value
        raise InvalidArguments(tool.name, [problem for problem in oversized if problem], schema)
    if not _is_text(arguments):  # a "\ud800" escape: the validator and the upstream URL need UTF-8, which it lacks
        problem = "an argument holds a lone surrogate (\\ud800-\\udfff), which is not text"
        raise InvalidArguments(tool.name, [problem], schema)
    errors = [
        error
        for error in catalog.validator(tool.name).iter_errors(arguments)
        if not (_kind(error) == "AnyOf" and not error.instance_path)  # reported below, by name
    ]
    problems = [_describe(tool, error) for error in errors]
    for group in tool.require_any:
        if not any(name in arguments for name in group):
            problems.append(f"give at least one of: {', '.join(group)}")
    if problems:
        paths = [_failing_path(error) for error in errors]
        raise InvalidArguments(tool.name, sorted(set(problems)), schema, paths=[p for p in paths if p])
    return with_defaults(tool, arguments)


def with_defaults(tool: CatalogTool, arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments with each absent one's default; not for a REST operation, whose document's defaults say what
    the server assumes when a parameter is not sent (and an absent argument sends nothing)."""
    if tool.operation is not None:
        return arguments
    filled = dict(arguments)
    for p in tool.params:
        if p.name not in filled and p.default is not None:
            filled[p.name] = p.default
    return filled


def _repair(param: Param | None, value: Any) -> Any:
    """Fix what is unambiguous: '14' or 14.0 for an integer, 'TRUE' for a boolean, 'Daily' for 'daily'."""
    if param is not None and param.type == "integer" and isinstance(value, float) and value.is_integer():
        return int(value)  # JSON Schema counts 14.0 as an integer; the upstream wants "14", not "14.0"
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


def _outside_url(tool: CatalogTool, name: str) -> bool:
    """Whether an argument travels in a request body: a REST body member, or any argument of an MCP server's tool
    behind the gateway (its call is JSON). Not an argument the tool lacks, which is refused anyway."""
    param = tool.param(name)
    return param is not None and (tool.server is not None or param.location == "body")


def _oversized(name: str, value: Any, outside_url: bool = False) -> str | None:
    """Why an argument is too large to check or send (None when it is not). A string sent in a body (a message's
    text, a file's content for a gateway's filesystem server, Vtex's embedded invoice) may be longer than one that
    goes in the URL or a header: the request that carries it is bounded as a whole (the endpoint's body limit), as
    strings nested in an argument already were."""
    shown = repr(name[:40] + ("…" if len(name) > 40 else ""))
    if len(name) > MAX_VALUE_CHARS:
        return f"an argument name is {len(name)} characters; the limit is {MAX_VALUE_CHARS}"
    if isinstance(value, str) and len(value) > MAX_VALUE_CHARS and not outside_url:
        return f"{shown} is {len(value)} characters long; the limit is {MAX_VALUE_CHARS}"
    level, depth = [value], 0
    while level:  # breadth-first, so a deeply nested value costs no recursion
        if depth > MAX_NESTING:
            return f"{shown} is nested more than {MAX_NESTING} levels deep"
        level = [
            child
            for item in level
            if isinstance(item, dict | list)
            for child in (item.values() if isinstance(item, dict) else item)
        ]
        depth += 1
    return None


def _is_text(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False, default=repr).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _kind(error: Any) -> str:
    return type(error.kind).__name__


def _failing_path(error: Any) -> str:
    """Where a schema violation is ("shipping/address/line1"; a missing required argument's name), so the error
    quotes the schema there."""
    if _kind(error) == "Required" and not error.instance_path:
        return str(error.kind.property)
    return "/".join(str(p) for p in error.instance_path)


def _describe(tool: CatalogTool, error: Any) -> str:
    """One readable line per schema violation, naming the argument."""
    path = "/".join(str(p) for p in error.instance_path)
    message: str = error.message
    quoted = json.dumps(error.instance, separators=(",", ":"), ensure_ascii=False)
    if len(quoted) > 80 and message.startswith(quoted):  # keep what is wrong, not the whole value
        message = _clip(quoted, 80) + message[len(quoted) :]
    if _kind(error) == "AdditionalProperties":
        allowed = ", ".join(p.name for p in tool.params) or "none"
        return f"{_clip(message)}; allowed arguments: {allowed}"
    if _kind(error) == "Enum":  # jsonschema-rs names only the first two options ("or 6 other candidates")
        options = list(error.kind.options)
        allowed = ", ".join(json.dumps(option) for option in options[:MAX_LISTED_VALUES])
        if len(options) > MAX_LISTED_VALUES:  # the quoted schema has them all; the error names them twice besides
            allowed += f", … ({len(options)} in all: see inputSchema)"
        given = _clip(json.dumps(error.instance), 80)
        message = f"{given} is not one of the allowed values: {allowed}"
        return f"{path}: {message}" if path else message
    return _clip(f"{path}: {message}" if path else message)


def _clip(line: str, limit: int = MAX_PROBLEM_CHARS) -> str:
    """A problem line short enough to read (a schema message quotes the offending value in full)."""
    return line if len(line) <= limit else line[: limit - 1] + "…"
