"""Every operation of every real document in ../shared/openapi, called once through TOOL_CALL with arguments made
from its input schema, against the offline sample upstream of that document on 127.0.0.1: no call may end in an
internal error or a traceback, no valid arguments may be refused, and the sample upstream, which checks a request
against the document (its encoding included), must accept each request.

The whole sweep (about 1,800 operations) is in the slow suite (`-m slow`); one document runs in the normal one.
"""

from __future__ import annotations

import base64
import functools
import os
import re._parser as re_parser
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from progressive_mcp.calls.rest import is_binary
from progressive_mcp.catalog import Catalog, CatalogTool, _thaw
from progressive_mcp.offline.rest_upstream import RestUpstream
from progressive_mcp.offline.schema_samples import sample_value
from progressive_mcp.settings import Settings
from progressive_mcp.sources import load_catalog
from progressive_mcp.surfaces.surface import CallContext, Surface

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("OPENAPI_DOCS_DIR", ROOT.parent / "shared" / "openapi"))
DOCUMENTS = {
    "slack": "slack/swagger.json",
    "spotify": "spotify/openapi.yaml",
    "stripe": "stripe/spec3.json",
    "twilio": "twilio/twilio_api_v2010.json",
    "openai": "openai/openapi.yaml",
    "digitalocean": "digitalocean/specification/DigitalOcean-public.v2.yaml",
}
IN_THE_NORMAL_SUITE = "twilio"  # form bodies with arrays, Basic auth, path parameters: quick to load
KEY = "sweep-user:sweep-secret"  # takes Basic (user:password) as well as bearer and api keys
# Stripe offers bearer beside basic: a user:password key would go as Basic, which its sample upstream (bearer,
# the default it takes) refuses; a bare key goes as the bearer token a real Stripe key is.
BEARER_KEY = "sk_test_sweep_bearer_key"
FILE = base64.b64encode(b"\x89PNG\r\n\x1a\n sample file").decode()
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason="the OpenAPI documents (../shared/openapi) are absent")


def sample_arguments(tool: CatalogTool) -> dict[str, Any]:
    """Arguments made from the tool's input schema (required members and some optional ones); a file's content
    is base64 (a made-up string is not), and a path value is never empty (an empty one names another URL)."""
    arguments = sample_value(_thaw(tool.input_schema), seed=tool.name)
    assert isinstance(arguments, dict)
    for param in tool.params:
        value = arguments.get(param.name)
        if value is None:
            continue
        if is_binary(param.schema) and isinstance(value, str):
            arguments[param.name] = FILE
        elif isinstance(value, list) and param.schema is not None and is_binary(param.schema.get("items")):
            arguments[param.name] = [FILE for _ in value]
        elif param.location == "path" and value == "":
            arguments[param.name] = "x"
    return arguments


def valid_arguments(catalog: Catalog, tool: CatalogTool) -> dict[str, Any]:
    """`sample_arguments`, with each string that misses its schema's `pattern` replaced by the simplest string
    that matches it (the sample generator does not read patterns; Twilio's SIDs have them)."""
    return with_patterns(catalog, tool, sample_arguments(tool))


def with_patterns(catalog: Catalog, tool: CatalogTool, arguments: dict[str, Any]) -> dict[str, Any]:
    for _ in range(20):
        patterns = [
            e for e in catalog.validator(tool.name).iter_errors(arguments) if type(e.kind).__name__ == "Pattern"
        ]
        if not patterns:
            break
        for error in patterns:
            *parents, last = error.instance_path
            holder: Any = arguments
            for key in parents:
                holder = holder[key]
            holder[last] = matching(error.kind.pattern)
    return arguments


@functools.cache
def matching(pattern: str) -> str:
    """The simplest string a regular expression matches: each repeat its minimum (at least once when it may be
    more), each choice its first branch, each class its first member; read from Python's own regex parse tree."""
    return _simplest(re_parser.parse(pattern))


def _simplest(tree: Any) -> str:
    out = []
    for op, arg in tree:
        name = str(op)
        if name == "LITERAL":
            out.append(chr(arg))
        elif name == "ANY":
            out.append("a")
        elif name == "NOT_LITERAL":
            out.append("a" if arg != ord("a") else "b")
        elif name == "IN":
            out.append(_member(arg))
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            low, _high, item = arg
            out.append(_simplest(item) * max(low, 1 if _high else 0))
        elif name == "SUBPATTERN":
            out.append(_simplest(arg[-1]))
        elif name == "BRANCH":
            out.append(_simplest(arg[1][0]))
        elif name == "CATEGORY":
            out.append(_member([(op, arg)]))
        # AT (anchors), ASSERT and the like add no characters
    return "".join(out)


def _member(items: Any) -> str:
    """A character of a class: the first literal or range start, a digit or letter for \\d and \\w."""
    if items and str(items[0][0]) == "NEGATE":
        return "~"
    for op, arg in items:
        name = str(op)
        if name == "LITERAL":
            return chr(arg)
        if name == "RANGE":
            return chr(arg[0])
        if name == "CATEGORY":
            return {"CATEGORY_DIGIT": "0", "CATEGORY_SPACE": " "}.get(str(arg), "a")
    return "a"


def sweep(document: str) -> tuple[list[str], Counter[str]]:
    """(what went wrong, outcome counts) of calling every operation of one document once."""
    catalog: Catalog = load_catalog(SHARED / document)
    problems: list[str] = []
    outcomes: Counter[str] = Counter()
    with RestUpstream(catalog) as upstream:
        settings = Settings.from_env({}, spec_path=SHARED / document, upstream_url=upstream.url, cache=False)
        surface = Surface.from_settings(settings, catalog=catalog)
        bearer_default = catalog.api.auth is not None and catalog.api.auth.pair_as_basic
        context = CallContext(api_key=BEARER_KEY if bearer_default else KEY)
        for tool in catalog.tools:
            arguments = valid_arguments(catalog, tool)
            if not catalog.validator(tool.name).is_valid(arguments):
                outcomes["sample arguments invalid (not called)"] += 1
                continue
            upstream.clear_requests()
            answer = surface.call_tool_wire("TOOL_CALL", {"tool_name": tool.name, "arguments": arguments}, context)
            text = answer["content"][0]["text"]
            if "Internal error" in text or "Traceback" in text:
                problems.append(f"{tool.name}: {text[:300]}")
            elif answer.get("isError") and "InvalidArguments" in text:
                problems.append(f"{tool.name}: valid arguments refused: {text[:300]}")
            elif len(upstream.requests) != 1:
                problems.append(f"{tool.name}: {len(upstream.requests)} requests reached the upstream: {text[:300]}")
            elif upstream.requests[0].status not in (200, 204):
                status = upstream.requests[0].status
                problems.append(f"{tool.name}: the sample upstream answered {status}: {text[:300]}")
            else:
                outcomes["called"] += 1
    return problems, outcomes


def check(name: str) -> None:
    problems, outcomes = sweep(DOCUMENTS[name])
    print(f"\n{name}: {dict(outcomes)}")
    assert not problems, "\n".join(problems[:40]) + f"\n({len(problems)} in all)"
    # Every operation is called: none is skipped for arguments its own schema refuses.
    assert outcomes["sample arguments invalid (not called)"] == 0, outcomes
    assert outcomes["called"] > 0, outcomes


@needs_shared
def test_every_operation_of_one_document_is_called_without_an_internal_error() -> None:
    check(IN_THE_NORMAL_SUITE)


@needs_shared
@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("name", sorted(set(DOCUMENTS) - {IN_THE_NORMAL_SUITE}))
def test_every_operation_of_every_document_is_called_without_an_internal_error(name: str) -> None:
    check(name)
