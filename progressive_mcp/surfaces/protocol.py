"""The MCP protocol as the HTTP endpoint speaks it, without importing `mcp_types` at run time.

Versions, error codes and the shape of every request the endpoint serves come from `_mcp_snapshot.py`, which
`protocol_build.py` generates from `mcp_types` (the official SDK's wire types): request shapes are the JSON
Schemas of `mcp_types`' own request models, checked here with jsonschema-rs. Importing `mcp_types` instead costs
~250 ms of a cold start (its pydantic models for two protocol eras). What keeps this honest, in
`tests/test_protocol.py`: the snapshot equals what `protocol_build.build()` makes from the installed `mcp_types`;
`request_problem` agrees with `mcp_types.methods.validate_client_request` on a corpus of valid and invalid
requests for every served method and version; and every result the endpoint writes is already what
`mcp_types.methods.serialize_server_result` makes of it. Example::

    request_problem("tools/call", "2025-11-25", {"arguments": {}})    # 'name: required'
    request_problem("tools/call", "2025-11-25", {"name": "TOOL_LIST"})   # None
"""

from __future__ import annotations

import threading
from typing import Any

import jsonschema_rs

from progressive_mcp.surfaces import _mcp_snapshot as snapshot

KNOWN_PROTOCOL_VERSIONS: tuple[str, ...] = snapshot.KNOWN_PROTOCOL_VERSIONS
HANDSHAKE_PROTOCOL_VERSIONS: tuple[str, ...] = snapshot.HANDSHAKE_PROTOCOL_VERSIONS
MODERN_PROTOCOL_VERSIONS: tuple[str, ...] = snapshot.MODERN_PROTOCOL_VERSIONS
LATEST_HANDSHAKE_VERSION: str = snapshot.LATEST_HANDSHAKE_VERSION

PARSE_ERROR: int = snapshot.ERROR_CODES["PARSE_ERROR"]
INVALID_REQUEST: int = snapshot.ERROR_CODES["INVALID_REQUEST"]
METHOD_NOT_FOUND: int = snapshot.ERROR_CODES["METHOD_NOT_FOUND"]
INVALID_PARAMS: int = snapshot.ERROR_CODES["INVALID_PARAMS"]
INTERNAL_ERROR: int = snapshot.ERROR_CODES["INTERNAL_ERROR"]
HEADER_MISMATCH: int = snapshot.ERROR_CODES["HEADER_MISMATCH"]
MISSING_REQUIRED_CLIENT_CAPABILITY: int = snapshot.ERROR_CODES["MISSING_REQUIRED_CLIENT_CAPABILITY"]
UNSUPPORTED_PROTOCOL_VERSION: int = snapshot.ERROR_CODES["UNSUPPORTED_PROTOCOL_VERSION"]

# Each request shape is compiled on its first use (about a millisecond for the largest), then kept.
_validators: dict[int, Any] = {}
_lock = threading.Lock()
_MAX_SHOWN = 60  # characters of a schema value (a const, an enum) a message may quote


def request_problem(method: str, version: str, params: dict[str, Any] | None) -> str | None:
    """What is wrong with a request's params for `method` at protocol `version` ("name: required"), or None.

    Raises KeyError for a method the snapshot does not hold at that version (the caller answers those first).
    Messages name where the problem is and what the protocol wants there; they never quote the request's values
    (arguments may carry keys)."""
    index = snapshot.REQUESTS[method][version]
    validator = _validators.get(index)
    if validator is None:
        with _lock:
            validator = _validators.get(index)
            if validator is None:
                validator = jsonschema_rs.validator_for(snapshot.REQUEST_SCHEMAS[index])
                _validators[index] = validator
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": 0, "method": method}  # the envelope mcp_types validates too
    if params is not None:
        body["params"] = params
    try:
        return _problem(validator, body)
    except UnicodeEncodeError:  # a lone surrogate ("\ud800" in the JSON) has no UTF-8 form for jsonschema-rs
        return _problem(validator, _scrubbed(body))


def _problem(validator: Any, body: dict[str, Any]) -> str | None:
    if validator.is_valid(body):
        return None
    try:
        for error in validator.iter_errors(body):
            return _describe(error)
    except UnicodeEncodeError:
        raise
    except ValueError:  # jsonschema-rs cannot describe a wrong value nested hundreds of levels deep
        return "params: not what the protocol allows here (nested too deeply to say where)"
    return None  # pragma: no cover - is_valid and iter_errors agree


def _scrubbed(value: Any) -> Any:
    """`value` with each lone surrogate in its strings (keys too) replaced by U+FFFD: the same shape and types,
    so the same verdict (no request schema matches a string's content against a pattern)."""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    if isinstance(value, dict):
        return {_scrubbed(k): _scrubbed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrubbed(v) for v in value]
    return value


def _describe(error: Any) -> str:
    path = [str(part) for part in error.instance_path]
    if path[:1] == ["params"]:
        path = path[1:]
    kind = error.kind
    name = type(kind).__name__
    if name == "Required":
        return f"{'.'.join([*path, str(kind.property)])}: required"
    where = ".".join(path) or "params"
    if name == "Type":
        types = kind.types if isinstance(kind.types, list | tuple) else [kind.types]
        return f"{where}: must be {' or '.join(str(t) for t in types)}"
    if name == "Constant":
        return f"{where}: must be {_shown(kind.expected_value)}"
    if name == "Enum":
        return f"{where}: must be one of {_shown(kind.options)}"
    if name in ("AnyOf", "OneOfNotValid", "OneOfMultipleValid"):
        return f"{where}: matches none of the shapes the protocol allows here"
    if name == "AdditionalProperties":
        return f"{where}: has properties the protocol does not allow here"
    return f"{where}: breaks the protocol's {error.schema_path[-1] if error.schema_path else name!s} rule"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 1] + "…"
