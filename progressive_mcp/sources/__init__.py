"""Where tools come from: each source turns a description of an API into the common catalog model.

Sources: the project's own spec format (`progressive_mcp.sources.spec`), OpenAPI 3.0/3.1 and Swagger 2.0
documents (`progressive_mcp.sources.openapi`), and compiled catalogs (`progressive_mcp.sources.compiled`, any
catalog written as JSON by `progressive-mcp spec compile`). `load_catalog` tells them apart by content. Example::

    catalog = load_catalog()                               # the bundled Alpha Vantage spec
    catalog = load_catalog("tests/fixtures/lastfm/lastfm.yaml")
    catalog = load_catalog("openapi.yaml", include="method:GET")   # the read-only part of an API
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from progressive_mcp.catalog import Catalog
from progressive_mcp.errors import SpecError
from progressive_mcp.sources.loaded import LOADED, note_read, recording

if TYPE_CHECKING:
    from progressive_mcp.sources.openapi import OpenApiReport

BUNDLED_SPEC = "alphavantage.yaml"
Terms = str | Iterable[str] | None


def default_spec_path() -> Path:
    """The bundled Alpha Vantage spec: `spec/` in a source checkout, package data in an installed wheel."""
    package = Path(__file__).resolve().parent.parent
    checkout = package.parent / "spec" / BUNDLED_SPEC
    if checkout.is_file():
        return checkout
    return package / "bundled" / BUNDLED_SPEC


def load_catalog(
    path: str | Path | None = None,
    *,
    include: Terms = None,
    exclude: Terms = None,
    vocabulary: str | Path | None = None,
) -> Catalog:
    """The catalog a file describes (default: the bundled spec); raises SpecError naming every problem.

    `include`/`exclude`: filter terms (`tag:NAME`, `method:GET`, `path:/v2/*`, or a tool-name glob; see
    `progressive_mcp.sources.openapi.Filter`), comma-separated or as a list. `vocabulary`: a search vocabulary
    file for the catalog, in place of any its spec names (the way to give one to an OpenAPI document).
    """
    return load_catalog_with_report(path, include=include, exclude=exclude, vocabulary=vocabulary)[0]


def load_catalog_with_report(
    path: str | Path | None = None,
    *,
    include: Terms = None,
    exclude: Terms = None,
    vocabulary: str | Path | None = None,
) -> tuple[Catalog, OpenApiReport | None]:
    """`load_catalog`, and for an OpenAPI document what the load made of it (operations, skipped, notes).

    A file loaded before in this process, with the same filters, is not parsed again while every file that load
    read is unchanged (`sources.loaded`): the catalog is shared (it is immutable), the report is a copy."""
    path = Path(path or default_spec_path())
    include, exclude = _terms(include), _terms(exclude)
    key = (str(path), path.resolve(), include, exclude, None if vocabulary is None else Path(vocabulary).resolve())
    hit = LOADED.get(key)
    if hit is not None:
        return hit
    with recording() as reads:
        catalog, report, kind = _load(path, include, exclude)
        if vocabulary is not None:
            from progressive_mcp.sources.spec import read_vocabulary

            catalog = Catalog.build(catalog.api, catalog.categories, catalog.tools, read_vocabulary(vocabulary))
    # A compiled catalog is not kept: it loads quickly, and each load offers its stored vectors (sources.compiled).
    return LOADED.put(key, catalog, report, reads if kind != "compiled" else {})


def _terms(terms: Terms) -> str | tuple[str, ...] | None:
    """Filter terms in a form that can key the loaded catalogs (an iterable is read once, here)."""
    return terms if terms is None or isinstance(terms, str) else tuple(terms)


def _load(path: Path, include: Terms, exclude: Terms) -> tuple[Catalog, OpenApiReport | None, str]:
    kind, data = _sniff(path)
    if kind == "openapi":
        from progressive_mcp.sources.filters import Filter
        from progressive_mcp.sources.openapi import build_openapi_catalog

        incl, excl = Filter.parse(include), Filter.parse(exclude)
        if data is not None:
            catalog, report = build_openapi_catalog(data, path.resolve(), include=incl, exclude=excl, source=str(path))
            return catalog, report, kind
        from progressive_mcp.sources.openapi import load_openapi

        return *load_openapi(path, include=incl, exclude=excl), kind
    if kind == "compiled":
        from progressive_mcp.sources.compiled import from_data

        catalog = from_data(data, str(path))
    else:
        from progressive_mcp.sources.spec import build_catalog, load_spec

        catalog = build_catalog(load_spec(path))
    return filter_catalog(catalog, include, exclude, source=str(path)), None, kind


def _sniff(path: Path) -> tuple[str, object]:
    """Which source reads this file: "openapi", "compiled" or "spec", and the parsed JSON when it was parsed
    to find out. Cheap for the common cases (a cold start pays for it): a compiled catalog starts with its
    format key, a spec is parsed only by its own loader, and a JSON text is parsed here only when it has an
    `openapi`/`swagger` key somewhere (a JSON document's keys can come in any order)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return "spec", None  # the spec loader says what is wrong with it
    note_read(path, text)
    stripped = text.lstrip()
    if not stripped.startswith("{"):
        return ("openapi" if _YAML_OPENAPI.search(text) else "spec"), None
    if stripped.startswith('{"progressive_mcp_catalog"') or _JSON_OPENAPI.search(text):
        try:
            data = json.loads(text)
        except ValueError:
            return "spec", None
        if isinstance(data, dict) and "progressive_mcp_catalog" in data:
            return "compiled", data
        if isinstance(data, dict) and ("openapi" in data or "swagger" in data):
            return "openapi", data
    return "spec", None


# An OpenAPI document's top-level `openapi:`/`swagger:` key (YAML: at column 0), or such a key anywhere in JSON.
_YAML_OPENAPI = re.compile(r"^(openapi|swagger)\s*:", re.MULTILINE)
_JSON_OPENAPI = re.compile(r'"(openapi|swagger)"\s*:')


def filter_catalog(catalog: Catalog, include: Terms, exclude: Terms, *, source: str = "--include/--exclude") -> Catalog:
    """The catalog without the tools the filters leave out (any source: a spec tool's tag is its category)."""
    if not include and not exclude:
        return catalog
    from progressive_mcp.sources.filters import Filter, keep, unknown_tag_help

    incl, excl = Filter.parse(include), Filter.parse(exclude)
    tools = tuple(
        t
        for t in catalog.tools
        if keep(
            incl,
            excl,
            name=t.name,
            operation_id=t.operation.operation_id if t.operation else None,
            method=t.method,
            path=t.operation.path if t.operation else None,
            tags=[t.category],
        )
    )
    unknown = unknown_tag_help(incl, excl, [t.category for t in catalog.tools])
    if not tools:
        raise SpecError(source, ["the --include/--exclude filters leave no tool", *unknown])
    categories = {k: v for k, v in catalog.categories.items() if any(t.category == k for t in tools)}
    return Catalog.build(catalog.api, categories, tools, catalog.vocabulary)
