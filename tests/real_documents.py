"""The real OpenAPI documents tests read at test time (../shared/openapi beside the repository, or
$OPENAPI_DOCS_DIR), by short name; never copied into the repository."""

from __future__ import annotations

import os
from pathlib import Path

SHARED = Path(os.environ.get("OPENAPI_DOCS_DIR", Path(__file__).resolve().parents[2] / "shared" / "openapi"))
REAL = {
    "spotify": SHARED / "spotify" / "openapi.yaml",
    "slack": SHARED / "slack" / "swagger.json",
    "openai": SHARED / "openai" / "openapi.yaml",
    "digitalocean": SHARED / "digitalocean" / "specification" / "DigitalOcean-public.v2.yaml",
    "stripe": SHARED / "stripe" / "spec3.json",
    "twilio": SHARED / "twilio" / "twilio_api_v2010.json",
}
