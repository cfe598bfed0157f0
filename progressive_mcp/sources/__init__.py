"""Where tools come from: each source turns a description of an API into the common catalog model.

Today one source, the project's own spec format (`progressive_mcp.sources.spec`). Example::

    catalog = load_catalog()                               # the bundled Alpha Vantage spec
    catalog = load_catalog("tests/fixtures/lastfm/lastfm.yaml")
"""

from __future__ import annotations

from pathlib import Path

from progressive_mcp.catalog import Catalog

BUNDLED_SPEC = "alphavantage.yaml"


def default_spec_path() -> Path:
    """The bundled Alpha Vantage spec: `spec/` in a source checkout, package data in an installed wheel."""
    package = Path(__file__).resolve().parent.parent
    checkout = package.parent / "spec" / BUNDLED_SPEC
    if checkout.is_file():
        return checkout
    return package / "bundled" / BUNDLED_SPEC


def load_catalog(path: str | Path | None = None) -> Catalog:
    """The catalog a file describes (default: the bundled spec); raises SpecError naming every problem."""
    from progressive_mcp.sources.spec import build_catalog, load_spec

    return build_catalog(load_spec(path or default_spec_path()))
