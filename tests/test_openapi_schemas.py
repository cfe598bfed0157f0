"""Schemas of real OpenAPI documents kept honest and affordable (issue 28): self-contradicting enums and defaults
coerced at import, output fields that keep their types, stubs named after their schemas and capped in size,
argument errors that quote only what failed, and compiled catalogs no larger than their documents."""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from progressive_mcp.catalog import Catalog, _thaw
from progressive_mcp.sources import load_catalog_with_report
from progressive_mcp.surfaces.surface import CallContext, Surface
from progressive_mcp.tokens import count_tokens

SHARED = Path(os.environ.get("OPENAPI_DOCS_DIR", Path(__file__).resolve().parents[2] / "shared" / "openapi"))
REAL = {
    "spotify": SHARED / "spotify" / "openapi.yaml",
    "slack": SHARED / "slack" / "swagger.json",
    "openai": SHARED / "openai" / "openapi.yaml",
    "digitalocean": SHARED / "digitalocean" / "specification" / "DigitalOcean-public.v2.yaml",
    "stripe": SHARED / "stripe" / "spec3.json",
    "twilio": SHARED / "twilio" / "twilio_api_v2010.json",
}
MAX_ERROR_TOKENS = 400
CONTEXT = CallContext(api_key="sk_test_schemas")

needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason=f"the real OpenAPI documents are not at {SHARED}")


@cache
def real(name: str) -> tuple[Catalog, Any]:
    return load_catalog_with_report(REAL[name])


def call_error(catalog: Catalog, tool: str, arguments: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The text and the error object of a TOOL_CALL that fails on its arguments."""
    answer = Surface(catalog, mode="progressive").call_tool_wire(
        "TOOL_CALL", {"tool_name": tool, "arguments": arguments}, CONTEXT
    )
    assert answer["isError"], answer
    error = answer["structuredContent"]["error"]
    assert error["type"] == "InvalidArguments", error
    return answer["content"][0]["text"], error


# --- argument errors quote what failed -------------------------------------------------------------------------


@needs_shared
def test_a_wrong_value_for_stripe_post_charges_quotes_that_property_within_400_tokens() -> None:
    catalog, _ = real("stripe")
    text, error = call_error(catalog, "PostCharges", {"amount": 500, "shipping": "to the moon"})
    assert count_tokens(text) <= MAX_ERROR_TOKENS, count_tokens(text)
    assert any(p.startswith("shipping") for p in error["problems"]), error["problems"]
    quoted = error["inputSchema"]["properties"]
    assert list(quoted) == ["shipping"]  # the failing property, not the 20-odd others
    assert quoted["shipping"]["type"] == "object"  # with its schema, so the model can fix the call
    assert {"address", "name"} <= set(quoted["shipping"]["properties"])
    assert "TOOL_GET" in error["note"]


@needs_shared
def test_a_nested_mistake_quotes_the_schema_at_its_path() -> None:
    catalog, _ = real("stripe")
    text, error = call_error(catalog, "PostCharges", {"amount": 500, "shipping": {"address": {"line1": 5}}})
    assert count_tokens(text) <= MAX_ERROR_TOKENS, count_tokens(text)
    assert error["at"]["shipping/address/line1"]["type"] == "string", error


@needs_shared
def test_a_missing_required_argument_names_the_required_list() -> None:
    catalog, _ = real("stripe")
    text, error = call_error(catalog, "PostRefunds", {"amount": "lots"})
    assert count_tokens(text) <= MAX_ERROR_TOKENS
    text, error = call_error(catalog, "PostCustomersCustomerSources", {"source": "tok_1"})
    assert count_tokens(text) <= MAX_ERROR_TOKENS
    assert "customer" in error["inputSchema"]["required"]
    assert "customer" in error["inputSchema"]["properties"]


@needs_shared
@pytest.mark.parametrize("name", ["stripe", "openai", "twilio", "slack"])
def test_a_wrong_value_costs_at_most_400_tokens_on_the_heaviest_tools(name: str) -> None:
    catalog, _ = real(name)
    heaviest = sorted(catalog.tools, key=lambda t: len(json.dumps(_thaw(t.input_schema))))[-5:]
    for tool in heaviest:
        param = next((p for p in tool.params if p.required), tool.params[0])
        wrong: Any = {"x": 1} if param.type in ("string", "integer", "number", "boolean") else 12345
        text, error = call_error(catalog, tool.name, {param.name: wrong})
        assert count_tokens(text) <= MAX_ERROR_TOKENS, (tool.name, count_tokens(text))
        assert param.name in error["inputSchema"]["properties"] or param.name in json.dumps(error["at"]), tool.name
