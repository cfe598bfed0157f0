"""A server's tool result as the gateway sends it on: whole when it fits the token budget, else previewed.

The budget counts what a model reads as text: text items, embedded resources and `structuredContent` (images and
audio pass as they are). The server's own secrets (see `ServerConfig.secrets`) and the caller's are masked wherever
they appear, before anything is cut, whether the result goes to a caller or into a code-mode script. Example::

    server_result(tool, {"q": "x"}, result, Secrets.of(*config.secrets), budget_tokens=8000, via_call=True)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from progressive_mcp.calls.shaping import shape_result
from progressive_mcp.catalog import CatalogTool
from progressive_mcp.errors import UpstreamError
from progressive_mcp.redaction import Secrets
from progressive_mcp.tokens import dumps, fits_budget

_READ_AS_TEXT = ("text", "resource")


def server_result(
    tool: CatalogTool,
    arguments: dict[str, Any],
    result: dict[str, Any],
    secrets: Secrets,
    *,
    budget_tokens: int,
    via_call: bool,
    offload: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The wire result for a call that reached the tool's server. `via_call`: it came through TOOL_CALL, whose
    structured result is `{"tool", "data"}`; `offload` stores the whole result when it is cut, and returns the
    fields saying where it is."""
    content, _ = secrets.scrub([item for item in result.get("content") or [] if isinstance(item, dict)])
    structured, _ = secrets.scrub(result.get("structuredContent"))
    is_error = bool(result.get("isError"))
    read = [item for item in content if item.get("type") in _READ_AS_TEXT]
    if fits_budget(dumps({"content": read, "structuredContent": structured}), budget_tokens):
        out: dict[str, Any] = {"content": content, "isError": is_error}
        if via_call:
            out["structuredContent"] = {"tool": tool.name, **({"data": structured} if structured is not None else {})}
        elif structured is not None:
            out["structuredContent"] = structured
        return out
    whole = {"content": content, "structuredContent": structured, "isError": is_error}
    text = "\n".join(_text_of(item) for item in read) or dumps(structured)
    envelope = shape_result(
        tool,
        arguments,
        text,
        "text",
        budget_tokens=budget_tokens,
        when_cut=(lambda: offload(whole)) if offload is not None else None,
    )
    kept = [item for item in content if item.get("type") not in _READ_AS_TEXT]  # images, audio, resource links
    return {
        "content": [{"type": "text", "text": dumps(envelope)}, *kept],
        "structuredContent": envelope,
        "isError": is_error,
    }


def script_value(tool: CatalogTool, result: dict[str, Any], secrets: Secrets) -> Any:
    """What a code-mode script gets from a server's tool, `secrets` masked: its structured content, else its text
    (parsed when it is JSON; a list when there are several). An `isError` result raises, with the server's message
    (masked, then cut)."""
    content = [item for item in result.get("content") or [] if isinstance(item, dict)]
    texts = [_text_of(item) for item in content if item.get("type") in _READ_AS_TEXT]
    if result.get("isError"):
        said = secrets.clean(" ".join(texts), 500) or "the server gave no reason"
        raise UpstreamError(f"{tool.name} failed: {said}")
    if result.get("structuredContent") is not None:
        structured, _ = secrets.scrub(result["structuredContent"])
        return structured
    values = [secrets.scrub(_parsed(text))[0] for text in texts]
    if not values:
        return None
    return values[0] if len(values) == 1 else values


def _text_of(item: dict[str, Any]) -> str:
    if item.get("type") == "text":
        return str(item.get("text", ""))
    resource = item.get("resource") or {}
    return str(resource.get("text", "")) if isinstance(resource, dict) else ""


def _parsed(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text
