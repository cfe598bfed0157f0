"""What an OpenAPI document's words become (issue 28): which parameter is taken for the credential, HTML in
summaries and descriptions, titles, and categories; on fixtures written here and on every real document in
../shared/openapi/ (skipped only when that folder is absent).

Run with: .venv/bin/python -m pytest tests/test_openapi_prose.py -q
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from progressive_mcp.catalog import Catalog
from progressive_mcp.sources import load_catalog

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "openapi"
SHARED = Path(os.environ.get("OPENAPI_DOCS_DIR", ROOT.parent / "shared" / "openapi"))
REAL = {
    "spotify": SHARED / "spotify" / "openapi.yaml",
    "slack": SHARED / "slack" / "swagger.json",
    "openai": SHARED / "openai" / "openapi.yaml",
    "digitalocean": SHARED / "digitalocean" / "specification" / "DigitalOcean-public.v2.yaml",
    "stripe": SHARED / "stripe" / "spec3.json",
    "twilio": SHARED / "twilio" / "twilio_api_v2010.json",
}
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason=f"the real OpenAPI documents are not at {SHARED}")


@pytest.fixture(scope="module")
def real() -> dict[str, Catalog]:
    if not SHARED.is_dir():
        pytest.skip(f"the real OpenAPI documents are not at {SHARED}")
    return {name: load_catalog(path) for name, path in REAL.items()}


def write(tmp_path: Path, document: dict[str, Any]) -> Path:
    path = tmp_path / "api.json"
    path.write_text(json.dumps(document))
    return path


# --- a parameter taken for a credential -------------------------------------------------------------------------


def test_a_token_parameter_the_security_never_names_is_an_argument() -> None:
    catalog = load_catalog(FIXTURES / "airflow" / "openapi.yaml")
    tool = catalog.get("get_log")
    assert {p.name for p in tool.params} >= {"token", "full_content", "dag_id"}
    assert "continue fetching logs" in next(p for p in tool.params if p.name == "token").description


def test_every_parameter_an_api_key_scheme_names_is_left_out(tmp_path: Path) -> None:
    document = {
        "openapi": "3.0.3",
        "info": {"title": "Two keys", "version": "1"},
        "servers": [{"url": "https://api.example.com"}],
        "components": {
            "securitySchemes": {
                "header_key": {"type": "apiKey", "in": "header", "name": "X-Key"},
                "query_key": {"type": "apiKey", "in": "query", "name": "api_key"},
            }
        },
        "security": [{"header_key": []}],
        "paths": {
            "/things": {
                "get": {
                    "operationId": "listThings",
                    "parameters": [
                        {"name": "X-Key", "in": "header", "schema": {"type": "string"}},
                        {"name": "api_key", "in": "query", "schema": {"type": "string"}},
                        {"name": "token", "in": "query", "description": "A page token.", "schema": {"type": "string"}},
                    ],
                    "responses": {"200": {"description": "ok"}},
                }
            }
        },
    }
    catalog = load_catalog(write(tmp_path, document))
    assert [p.upstream_name for p in catalog.get("listThings").params] == ["token"]
    assert catalog.api.auth is not None and catalog.api.auth.name == "X-Key"


@needs_shared
def test_slacks_token_is_still_the_credential(real: dict[str, Catalog]) -> None:
    # Slack declares only an OAuth scheme, and a `token` parameter on each operation that its description calls an
    # "Authentication token": the server sends the key itself (as a bearer token), so it is no argument.
    slack = real["slack"]
    assert not any(p.upstream_name == "token" for t in slack.tools for p in t.params)
