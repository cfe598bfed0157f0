"""Catalog tools made by hand for tests: only what a test cares about is given, the rest filled in as a source
would (the input schema from the parameters, the content hash from the tool)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from progressive_mcp.catalog import CatalogTool, Operation, Param, input_schema


def make_tool(
    name: str,
    params: tuple[Param, ...] = (),
    *,
    category: str = "things",
    title: str | None = None,
    summary: str | None = None,
    description: str | None = None,
    output: Mapping[str, Any] | None = None,
    method: str = "GET",
    operation: Operation | None = None,
    fixed: Mapping[str, str] | None = None,
    cache_ttl_s: int = 0,
) -> CatalogTool:
    """A tool named `name`; title, summary and description default to the name (or to each other)."""
    summary = summary or description or name
    return CatalogTool(
        name=name,
        title=title or name,
        category=category,
        summary=summary,
        description=description or summary,
        params=params,
        input_schema=input_schema(params, []),
        keywords=(),
        examples=(),
        cache_ttl_s=cache_ttl_s,
        premium=False,
        output_schema=output,
        method=method,
        operation=operation,
        fixed=MappingProxyType(dict(fixed or {})),
    )
