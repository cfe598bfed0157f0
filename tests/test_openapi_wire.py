"""Requests on the wire as the OpenAPI documents say: each case of tests/data/openapi_wire/*.json (written from the
specification and docs/.. wire rules, not from our serialiser) is called through TOOL_CALL against a loopback
server on 127.0.0.1 that records the raw request, and the request is compared with the case's expected form.

Comparing (the rules' "Comparing" section): method and path exact; query and form bodies split on `&`, each piece's
bytes exact, order compared only among the pieces of one parameter or property; header and cookie parameters by
value; Content-Type exact (a `; charset=` ignored for text bodies, the boundary for multipart); multipart bodies as
parsed parts (name, filename or not, Content-Type, bytes); JSON bodies as parsed JSON. An expectation may give
`body_base64` for a binary body that is not text.
"""

from __future__ import annotations

import base64
import email.parser
import functools
import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from progressive_mcp.catalog import Catalog
from progressive_mcp.settings import Settings
from progressive_mcp.sources import load_catalog
from progressive_mcp.surfaces.surface import CallContext, Surface

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("OPENAPI_DOCS_DIR", ROOT.parent / "shared" / "openapi"))
CASES_DIR = ROOT / "tests" / "data" / "openapi_wire"
# A key for documents whose case gives none: with a colon, so that HTTP Basic (user:password) takes it too.
DEFAULT_KEY = "wire-test-key:secret"
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason="the OpenAPI documents (../shared/openapi) are absent")


def load_cases() -> list[Any]:
    cases = []
    for path in sorted(CASES_DIR.glob("*.json")):
        for i, case in enumerate(json.loads(path.read_text(encoding="utf-8"))):
            # one worker loads each document (`make test` runs with --dist loadgroup): Stripe's load alone is ~15 CPU-s
            group = pytest.mark.xdist_group(case["document"])
            cases.append(pytest.param(case, id=f"{path.stem}[{i}]-{case['tool']}", marks=group))
    return cases


@functools.cache
def catalog_of(document: str) -> Catalog:
    return load_catalog(SHARED / document)


# --- a loopback server that records raw requests -----------------------------------------------------------------


@dataclass
class Seen:
    method: str
    target: str
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)


@dataclass
class Recorder:
    port: int = 0
    requests: list[Seen] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@contextmanager
def recording_upstream() -> Iterator[Recorder]:
    """A server on 127.0.0.1 answering `{}` to everything and keeping each request as it came."""
    recorder = Recorder()

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            recorder.requests.append(Seen(self.command, self.path, list(self.headers.items()), body))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _answer

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    recorder.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield recorder
    finally:
        server.shutdown()
        server.server_close()


def call(case: dict[str, Any]) -> Seen:
    """The request one TOOL_CALL of the case makes, as the upstream received it."""
    document = SHARED / case["document"]
    catalog = catalog_of(case["document"])
    with recording_upstream() as upstream:
        settings = Settings.from_env({}, spec_path=document, upstream_url=upstream.url, cache=False)
        surface = Surface.from_settings(settings, catalog=catalog)
        answer = surface.call_tool_wire(
            "TOOL_CALL",
            {"tool_name": case["tool"], "arguments": case["arguments"]},
            CallContext(api_key=case.get("key") or DEFAULT_KEY),
        )
        assert len(upstream.requests) == 1, answer["content"][0]["text"][:1500]
        return upstream.requests[0]


# --- comparing ---------------------------------------------------------------------------------------------------


def grouped(text: str) -> dict[str, list[str]]:
    """`a=1&b[x]=2&a=3` as {"a": ["a=1", "a=3"], "b": ["b[x]=2"]}: the pieces of each parameter, in order."""
    groups: dict[str, list[str]] = {}
    for piece in text.split("&") if text else []:
        name = unquote(piece.split("=", 1)[0].split("[", 1)[0])
        groups.setdefault(name, []).append(piece)
    return groups


def cookies_of(request: Seen) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in (request.header("Cookie") or "").split(";"):
        name, eq, value = pair.strip().partition("=")
        if eq:
            out.setdefault(name, value)
    return out


def parts_of(content_type: str, body: bytes) -> list[tuple[str, bool, str | None, bytes]]:
    """A multipart body's parts as (name, has a filename, Content-Type as sent, bytes), read by the stdlib."""
    message = email.parser.BytesParser().parsebytes(b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + body)
    assert message.is_multipart(), body[:300]
    parts = []
    for part in message.get_payload():
        disposition = part.get("Content-Disposition", "")
        assert str(disposition).startswith("form-data"), disposition
        name = part.get_param("name", header="content-disposition")
        filename = part.get_param("filename", header="content-disposition")
        payload = part.get_payload(decode=True)
        parts.append((str(name), filename is not None, part.get("Content-Type"), payload))
    return parts


def media(content_type: str | None) -> str | None:
    return None if content_type is None else content_type.split(";", 1)[0].strip().lower()


def without_charset(content_type: str) -> str:
    """A Content-Type without its `charset` parameter (text bodies may say theirs or not)."""
    kept = [p.strip() for p in content_type.split(";") if not p.strip().lower().startswith("charset=")]
    return "; ".join(kept)


def by_name(parts: list[tuple[str, bool, str | None, bytes]]) -> list[tuple[str, bool, str | None, bytes]]:
    """Parts in the order of their names, each name's parts in the order sent (order only matters within one)."""
    return sorted(parts, key=lambda part: part[0])


def assert_request_is(request: Seen, expect: dict[str, Any]) -> None:
    path, _, query = request.target.partition("?")
    assert request.method == expect["method"]
    assert path == expect["path"]
    assert grouped(query) == grouped(expect.get("query", ""))
    for name, value in (expect.get("headers") or {}).items():
        assert request.header(name) == value, name
    sent_cookies = cookies_of(request)
    for name, value in (expect.get("cookies") or {}).items():
        assert sent_cookies.get(name) == value, name
    content_type = request.header("Content-Type")
    expected_type = expect.get("content_type")
    if expected_type is None:
        assert content_type is None
        assert request.body == b""
        return
    assert content_type is not None
    if media(expected_type) == "multipart/form-data":
        assert media(content_type) == "multipart/form-data" and "boundary=" in content_type
        expected_parts = [
            (p["name"], bool(p["filename"]), p["content_type"], base64.b64decode(p["body_base64"]))
            for p in expect["multipart"]
        ]
        sent = [
            (name, filename, media(type_) if media(type_) == "text/plain" else type_, content)
            for name, filename, type_, content in parts_of(content_type, request.body)
        ]
        assert by_name(sent) == by_name(expected_parts)
        return
    assert without_charset(content_type) == without_charset(expected_type)
    if "json" in expect:
        assert json.loads(request.body) == expect["json"]
    elif "body_base64" in expect:
        assert request.body == base64.b64decode(expect["body_base64"])
    elif media(expected_type) == "application/x-www-form-urlencoded":
        assert grouped(request.body.decode("ascii")) == grouped(expect["body"] or "")
    else:
        assert request.body.decode("utf-8") == expect["body"]


@needs_shared
@pytest.mark.parametrize("case", load_cases())
def test_the_request_is_what_the_document_says(case: dict[str, Any]) -> None:
    assert_request_is(call(case), case["expect"])
