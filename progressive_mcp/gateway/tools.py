"""The gateway's catalog: the stored tool documents of the configured servers as catalog tools.

Each server is a category (described by its `description`), and each of the server's own categories (the
servers file's `categories`: name → tool-name globs) a category `SERVER/NAME` under it. A tool keeps its input
schema, output schema, title and annotations as the server lists them. A tool of a pinned server whose
definition is not the approved one is withheld (left out, and listed as withheld) until it is approved (`pins`).
A spec's catalog (`base`) may sit beside the servers: its tools and categories come first, and its API (title,
auth, base URL) is the catalog's, so its tools are called upstream as without a gateway. Example::

    catalog, withheld = gateway_catalog(config, store.tools())
    catalog, withheld = gateway_catalog(config, store.tools(), base=load_catalog("spec/alphavantage.yaml"))
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

from progressive_mcp.catalog import ANNOTATION_NAMES, Api, Catalog, CatalogTool, Param, _freeze
from progressive_mcp.gateway.config import GatewayConfig, ServerConfig, ServersFileError
from progressive_mcp.gateway.pins import withheld_entry
from progressive_mcp.gateway.store import StoredTool
from progressive_mcp.search import hints as search_hints

GATEWAY_API = Api(
    name="gateway", title="MCP server", base_url="", description="Tools of the MCP servers in a servers file."
)
MAX_SUMMARY_CHARS = 200
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")
_JSON_TYPES = ("string", "integer", "number", "boolean", "array", "object")


def gateway_catalog(
    config: GatewayConfig, stored: Iterable[StoredTool], *, base: Catalog | None = None
) -> tuple[Catalog, list[dict[str, str]]]:
    """The catalog of the enabled servers' stored tools (after `base`'s, if given), and the tools withheld
    (`pins.withheld_entry`: name, server, status, hash, reason)."""
    if base is not None:
        check_beside(config, base)
    by_server: dict[str, list[StoredTool]] = {}
    for item in stored:
        by_server.setdefault(item.document.server, []).append(item)
    categories: dict[str, str] = {}
    tools: list[CatalogTool] = []
    withheld: list[dict[str, str]] = []
    for server in config.enabled:
        categories[server.name] = server.description or f"Tools of the MCP server {server.name}."
        for name in server.categories:
            categories[f"{server.name}/{name}"] = f"{categories[server.name].rstrip('.')}: {name}."
        for item in by_server.get(server.name, []):
            if (server.pin or config.pin) and not item.approved:
                withheld.append(withheld_entry(item))
                continue
            tools.append(catalog_tool(server, item))
    used = {t.category for t in tools}
    # A server's own categories are listed only when some tool is in them; the server itself always is.
    categories = {k: v for k, v in categories.items() if "/" not in k or k in used}
    if base is None:
        return Catalog.build(GATEWAY_API, categories, tuple(tools)), withheld
    merged = Catalog.build(
        base.api, {**base.categories, **categories}, (*base.tools, *tools), vocabulary=base.vocabulary
    )
    return merged, withheld


def check_beside(config: GatewayConfig, base: Catalog) -> None:
    """Refuse a servers file whose server names would be confused with the spec's categories or tools."""
    folded = {c.casefold() for c in base.categories}
    clashes = [s.name for s in config.servers if s.name.casefold() in folded]
    if clashes:
        raise ServersFileError(
            config.source,
            [
                f"server {name!r} has the name of a category of {base.api.title}: rename the server so TOOL_LIST "
                "can tell them apart"
                for name in clashes
            ],
        )


def catalog_tool(server: ServerConfig, item: StoredTool) -> CatalogTool:
    doc = item.document
    definition = doc.definition
    description = " ".join(str(definition.get("description") or "").split())
    schema = definition.get("inputSchema") or {"type": "object"}
    annotations = definition.get("annotations") or {}
    hints = {k: annotations[k] for k in ANNOTATION_NAMES if isinstance(annotations.get(k), bool)}
    title = definition.get("title") or annotations.get("title") or doc.name
    searched = search_hints.bounded(definition)  # a progressive-mcp server's keywords and examples (bounded at sync)
    return CatalogTool(
        name=doc.public_name,
        title=str(title),
        category=_category(server, doc.name),
        summary=_summary(description) or str(title),
        description=description,
        params=_params(schema),
        input_schema=_freeze(dict(schema)),
        keywords=searched.get("keywords", ()),
        examples=searched.get("examples", ()),
        cache_ttl_s=0,  # a server's tool may act or change: never answered from a cache
        premium=False,
        content_hash=doc.hash,
        output_schema=_freeze(dict(definition["outputSchema"])) if definition.get("outputSchema") else None,
        method="POST",
        annotations=MappingProxyType(hints),
        server=server.name,
        server_tool=doc.name,
    )


def _category(server: ServerConfig, tool_name: str) -> str:
    for name, globs in server.categories.items():
        if any(fnmatch.fnmatchcase(tool_name, glob) for glob in globs):
            return f"{server.name}/{name}"
    return server.name


def _summary(description: str) -> str:
    first = _SENTENCE_END.split(description, maxsplit=1)[0]
    return first if len(first) <= MAX_SUMMARY_CHARS else first[: MAX_SUMMARY_CHARS - 1].rstrip() + "…"


def _params(schema: Mapping[str, Any]) -> tuple[Param, ...]:
    """The top-level properties as Params, for search and code mode's stubs (the schema itself is kept whole)."""
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return ()
    required = set(schema.get("required") or ())
    params = []
    for name, prop in properties.items():
        prop = prop if isinstance(prop, Mapping) else {}
        kind = prop.get("type")
        enum = prop.get("enum")
        scalar_enum = (
            tuple(enum)
            if isinstance(enum, list) and all(isinstance(v, str | int | float | bool) for v in enum)
            else None
        )
        params.append(
            Param(
                name=str(name),
                type=kind if isinstance(kind, str) and kind in _JSON_TYPES else "string",
                required=name in required,
                description=" ".join(str(prop.get("description") or "").split()),
                enum=scalar_enum,
                schema=_freeze(dict(prop)),
            )
        )
    return tuple(params)
