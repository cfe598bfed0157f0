"""An offline stand-in for any REST API a catalog describes: it routes each request to the tool whose operation
matches, checks it lightly as the real server would, answers a deterministic sample of the tool's output schema,
and records what it received.

Inside a test::

    with serve_rest_upstream(catalog) as upstream:
        httpx.get(upstream.url + "/pets/42", headers={"Authorization": "Bearer k3y!"})
        upstream.requests[-1].tool            # 'getPet'

or from the command line, for a catalog whose tools have operations::

    progressive-mcp sample-upstream --spec petstore.yaml --port 8766

`upstream.url` is the catalog's `api.base_url` with its scheme and host replaced: the same base path, so a
client sends the paths the real API would receive. What it does, in order, for each request:

- **routes** it: the method and path (after the base path) against every tool's `operation`. The path is split
  on `/` first and each segment percent-decoded after, so `%2F` stays inside its segment; a `{name}` matches one
  non-empty segment; where several templates match, the one with a literal segment earliest wins
  (`/pets/mine` over `/pets/{id}`), then the one whose fixed query parameters the request carries. No template
  matches: 404. Templates match but none for this method: 405 with `Allow`. HEAD is answered as GET.
- **authenticates** it per `api.auth`: the key in its query parameter, header or cookie (after its prefix), or
  `Authorization: Bearer <key>`, or `Authorization: Basic <base64 user:password>`; missing or malformed: 401.
  Any key is accepted unless `api_key=` names the one to accept.
- **checks** it: required query, header, cookie and body parameters present, the body's media type the
  operation's, a JSON body parseable, a form or multipart body following the document's encoding
  (`progressive_mcp.offline.body_encoding`); else 400 (415 for the media type) naming what is wrong.
- **answers**: the output schema's own example if it has one, else a value generated from it
  (`progressive_mcp.offline.schema_samples`, seeded by the tool's name, so every run answers the same bytes),
  with status 200. An operation without an output schema answers `{"ok": true}`, or 204 and no body to DELETE.
  Errors are JSON: `{"error": {"status": 404, "message": "..."}}`.

Every request (but those to `/__requests` and `/__faults`) is recorded with its raw request target, the decoded
path, the raw and parsed query, headers, body and the tool it matched; the key is masked as `***` in all of them
wherever it appears, so no recorder ever holds it. `GET /__requests` returns the record as JSON,
`DELETE /__requests` clears it. `RestFaults` switch on misbehaviour (in process through `upstream.faults`, out of
process with `POST /__faults` and a JSON object of fields).
"""

from __future__ import annotations

import argparse
import base64
import binascii
import contextlib
import dataclasses
import json
import math
import re
import sys
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, cast
from urllib.parse import parse_qsl, quote, quote_plus, unquote, urlsplit

from progressive_mcp.catalog import Auth, Catalog, CatalogTool, Param
from progressive_mcp.offline.body_encoding import form_members, multipart_members
from progressive_mcp.offline.schema_samples import dumps, sample_value
from progressive_mcp.offline.serving import LoopbackServer, ServedUpstream, TrackedHandler, record
from progressive_mcp.redaction import MASK, MIN_KEY_CHARS, redact

REQUESTS_PATH = "/__requests"
FAULTS_PATH = "/__faults"
MAX_BODY_BYTES = 10 * 1024 * 1024  # a larger request body is refused with 413
JSON_TYPE = "application/json"
FORM_TYPE = "application/x-www-form-urlencoded"
MULTIPART_TYPE = "multipart/form-data"
# Masked in the record whatever the API's auth says: a client may send a key where the API does not want it.
CREDENTIAL_QUERY_NAMES = frozenset({"apikey", "api_key", "api-key", "key", "token", "access_token"})
CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "x-api-key", "api-key"})
_AUTHORIZATION = frozenset({"authorization", "proxy-authorization"})
_PLACEHOLDER = re.compile(r"\{([^{}/]+)\}")
LITERAL, PARTIAL, TEMPLATED = 0, 1, 2  # segment kinds, most specific first


def split_target(target: str) -> tuple[str, str]:
    """A request target's raw path and raw query. Not urlsplit: it reads `//pets` as a host named pets."""
    path, _, query = target.split("#", 1)[0].partition("?")
    return path or "/", query


def has_operations(catalog: Catalog) -> bool:
    """Whether any tool of the catalog is a REST operation (what this upstream can serve)."""
    return any(tool.operation is not None for tool in catalog.tools)


# --------------------------------------------------------------------------------------------------
# Requests and replies
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    """What is sent back: a status, headers, a body (None: drop the connection instead)."""

    status: int
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    disconnect: bool = False


def error_reply(status: int, message: str, **extra: Any) -> Reply:
    """A JSON error, shaped as many REST APIs shape theirs (Spotify's exactly)."""
    body = dumps({"error": {"status": status, "message": message, **extra}}).encode()
    return Reply(status, (("Content-Type", JSON_TYPE),), body)


def json_reply(payload: Any, status: int = 200) -> Reply:
    return Reply(status, (("Content-Type", JSON_TYPE),), dumps(payload).encode())


@dataclass(frozen=True)
class Incoming:
    """A request as the HTTP layer read it: the method, the raw request target, the headers in order, the body."""

    method: str
    target: str
    headers: tuple[tuple[str, str], ...]
    body: bytes = b""

    def header(self, name: str) -> str | None:
        return next((value for key, value in self.headers if key.lower() == name.lower()), None)

    def media_type(self) -> str:
        """The Content-Type's media type, lower case, without its parameters ("" when there is none)."""
        return (self.header("Content-Type") or "").split(";", 1)[0].strip().lower()

    def cookies(self) -> dict[str, str]:
        found: dict[str, str] = {}
        for key, value in self.headers:
            if key.lower() == "cookie":
                for part in value.split(";"):
                    name, _, val = part.strip().partition("=")
                    if name:
                        found.setdefault(name, val)
        return found


# --------------------------------------------------------------------------------------------------
# Routing
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Route:
    """One operation's method and path template, compiled for matching decoded path segments."""

    method: str
    template: str
    tool: CatalogTool
    kinds: tuple[int, ...]  # LITERAL, PARTIAL or TEMPLATED for each segment
    segments: tuple[str | re.Pattern[str], ...]  # a literal, or a pattern whose groups are the placeholders
    names: tuple[tuple[str, ...], ...]  # the placeholder names of each segment, in order
    # The `name=value` pairs of the template's fragment (`#export=true`), which a request for this operation
    # carries in its query: they pick it over another operation on the same path.
    hints: tuple[tuple[str, str], ...] = ()

    @classmethod
    def compile(cls, tool: CatalogTool) -> Route:
        assert tool.operation is not None
        # A fragment tells apart operations on one path (Azure's `/persistedfaces#overload=stream`); a client never
        # sends it, so the route matches the path without it and the request's media type picks among them.
        path, _, fragment = tool.operation.path.partition("#")
        template = path if path.startswith("/") else "/" + path
        kinds: list[int] = []
        segments: list[str | re.Pattern[str]] = []
        names: list[tuple[str, ...]] = []
        for segment in template.split("/"):
            found = _PLACEHOLDER.findall(segment)
            if not found:
                kinds.append(LITERAL)
                segments.append(segment)
            else:
                whole = _PLACEHOLDER.fullmatch(segment) is not None
                kinds.append(TEMPLATED if whole else PARTIAL)
                pieces = _PLACEHOLDER.split(segment)  # literal, name, literal, name, ..., literal
                pattern = "".join(re.escape(p) if i % 2 == 0 else "(.+?)" for i, p in enumerate(pieces))
                segments.append(re.compile(pattern, re.DOTALL))
            names.append(tuple(found))
        hints = tuple(parse_qsl(fragment))
        method = tool.operation.method.upper()
        return cls(method, template, tool, tuple(kinds), tuple(segments), tuple(names), hints)

    def match(self, segments: list[str]) -> dict[str, str] | None:
        """The path parameters, if these decoded segments fit the template."""
        if len(segments) != len(self.segments):
            return None
        values: dict[str, str] = {}
        for given, wanted, names in zip(segments, self.segments, self.names, strict=True):
            if isinstance(wanted, str):
                if given != wanted:
                    return None
                continue
            found = wanted.fullmatch(given)
            if found is None:
                return None
            values.update(zip(names, found.groups(), strict=True))
        return values


@dataclass(frozen=True)
class RouteMatch:
    """The outcome of routing: a tool and its path parameters, or the status (404, 405) and why."""

    route: Route | None = None
    path_params: Mapping[str, str] = field(default_factory=dict)
    status: int = 200
    message: str = ""
    allow: tuple[str, ...] = ()


class Router:
    """Every REST operation of a catalog, found by method and decoded path segments."""

    def __init__(self, catalog: Catalog, base_path: str) -> None:
        self.base = base_path.rstrip("/").split("/")  # "" → [""], "/v1" → ["", "v1"]
        self.routes = tuple(Route.compile(tool) for tool in catalog.tools if tool.operation is not None)

    def route(self, method: str, raw_path: str, query: list[tuple[str, str]], media: str | None = None) -> RouteMatch:
        """The operation a request reaches; `media`: its Content-Type's media type (None without one), which picks
        among operations on the same path and method that take different bodies."""
        # Split before decoding: a %2F inside a value stays part of its segment.
        segments = [unquote(segment) for segment in raw_path.split("/")]
        shown = f"{method} {unquote(raw_path)}"
        if segments[: len(self.base)] != self.base:
            return RouteMatch(status=404, message=f"No operation matches {shown} (the base path is {self._base()})")
        segments = ["", *segments[len(self.base) :]]
        fitting = [(route, values) for route in self.routes if (values := route.match(segments)) is not None]
        if not fitting:
            return RouteMatch(status=404, message=f"No operation matches {shown}")
        wanted = "GET" if method == "HEAD" and not any(r.method == "HEAD" for r, _ in fitting) else method
        allowed = [(route, values) for route, values in fitting if route.method == wanted]
        if not allowed:
            methods = tuple(dict.fromkeys(route.method for route, _ in fitting))
            return RouteMatch(status=405, message=f"{method} is not allowed on {shown.split(' ', 1)[1]}", allow=methods)
        pairs = set(query)

        def specificity(candidate: tuple[Route, dict[str, str]]) -> tuple[Any, ...]:
            fixed = candidate[0].tool.fixed
            carried = sum((name, value) in pairs for name, value in fixed.items())
            operation = candidate[0].tool.operation
            assert operation is not None
            other_body = media is not None and operation.body is not None and not media_fits(media, operation.body_type)
            hinted = sum(pair in pairs for pair in candidate[0].hints)
            return (carried < len(fixed), candidate[0].kinds, other_body, -hinted, -carried)

        route, values = min(allowed, key=specificity)  # min is stable: the catalog's order breaks ties
        if any((name, value) not in pairs for name, value in route.tool.fixed.items()):
            wrong = ", ".join(f"{n}={v}" for n, v in route.tool.fixed.items())
            return RouteMatch(route, values, 400, f"{route.method} {route.template} needs the query parameters {wrong}")
        return RouteMatch(route, values)

    def _base(self) -> str:
        return "/".join(self.base) or "/"


# --------------------------------------------------------------------------------------------------
# Recording
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordedRequest:
    """One request as it came, the API key masked everywhere: the raw request target (not normalised), the
    decoded path, the raw and parsed query, the headers in order, the body, and what it was matched to."""

    method: str
    raw_path: str  # the request target as received: path and query, percent-encoding untouched
    path: str  # percent-decoded, for reading (a decoded %2F looks like a separator here; see path_params)
    query_string: str
    query: tuple[tuple[str, str], ...]
    headers: tuple[tuple[str, str], ...]
    body: bytes
    tool: str | None  # the matched tool's name, None if no operation matched
    path_params: Mapping[str, str] = field(default_factory=dict)
    status: int | None = None  # the status answered; None until then, and if the connection was dropped (a fault)

    def header(self, name: str) -> str | None:
        """The first header of that name, any case."""
        return next((value for key, value in self.headers if key.lower() == name.lower()), None)

    def to_json(self) -> dict[str, Any]:
        """The record as JSON data: the body as text if it is UTF-8 (else null), and always as base64."""
        try:
            text: str | None = self.body.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        return {
            "method": self.method,
            "raw_path": self.raw_path,
            "path": self.path,
            "query_string": self.query_string,
            "query": [list(pair) for pair in self.query],
            "headers": [list(pair) for pair in self.headers],
            "body": text,
            "body_base64": base64.b64encode(self.body).decode("ascii"),
            "tool": self.tool,
            "path_params": dict(self.path_params),
            "status": self.status,
        }


class _Masker:
    """Masks one request's credentials: where the API's auth puts the key, in any Authorization header and in
    query parameters and headers named like credentials (`token`, `api_key`, `X-Api-Key`...), then every value
    found there (and the accepted key) wherever else it appears, in any encoding `progressive_mcp.redaction`
    knows."""

    def __init__(self, auth: Auth | None, request: Incoming, query: list[tuple[str, str]], api_key: str | None):
        self.auth = auth
        self.query_names = set(CREDENTIAL_QUERY_NAMES)
        self.header_names = set(CREDENTIAL_HEADERS)
        self.cookie_name: str | None = None
        if auth is not None:
            if auth.in_ == "query" and auth.scheme == "api_key":
                self.query_names.add(auth.name.lower())
            elif auth.in_ == "cookie" and auth.scheme == "api_key":
                self.cookie_name = auth.name
            else:
                self.header_names.add(auth.name.lower())
        found = [value for name, value in query if name.lower() in self.query_names]
        found += [value for name, value in request.headers if name.lower() in self.header_names]
        if self.cookie_name is not None:
            found += [value for name, value in request.cookies().items() if name == self.cookie_name]
        secrets = [api_key] if api_key else []
        for value in found:
            secrets += _credential_forms(value, auth.prefix if auth is not None else "")
        # A value shorter than a key's minimum cannot be told apart from ordinary text: it is masked only where
        # it was found. Longest first, so a longer form is masked before a part of it.
        self.secrets = sorted({s for s in secrets if len(s) >= MIN_KEY_CHARS}, key=len, reverse=True)

    def text(self, text: str) -> str:
        for secret in self.secrets:
            text = redact(text, secret, pairs=False)
        return text

    def bytes(self, data: bytes) -> bytes:
        if not self.secrets:
            return data
        return self.text(data.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")

    def raw_query(self, query_string: str) -> str:
        pieces = []
        for piece in query_string.split("&"):
            name = piece.split("=", 1)[0]
            pieces.append(f"{name}={MASK}" if _form_decoded(name).lower() in self.query_names else piece)
        return self.text("&".join(pieces))

    def query(self, pairs: list[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
        return tuple((name, MASK if name.lower() in self.query_names else self.text(value)) for name, value in pairs)

    def headers(self, pairs: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
        auth = self.auth
        out = []
        for name, value in pairs:
            lowered = name.lower()
            if lowered in self.header_names:
                prefix = auth.prefix if auth is not None and lowered == auth.name.lower() else ""
                scheme = value.strip().split(" ", 1)[0] if lowered in _AUTHORIZATION and " " in value.strip() else ""
                kept = prefix if prefix and value.startswith(prefix) else f"{scheme} " if scheme else ""
                value = kept + MASK  # "Bearer ***": the scheme (or the API's prefix) is no secret
            elif lowered == "cookie" and self.cookie_name is not None:
                parts = (part.strip().partition("=") for part in value.split(";") if part.strip())
                value = "; ".join(
                    f"{key}={MASK}" if key == self.cookie_name else key + sep + val for key, sep, val in parts
                )
            out.append((name, self.text(value)))
        return tuple(out)


def _credential_forms(value: str, prefix: str) -> list[str]:
    """A credential as sent and as it may be echoed: the token after its prefix or scheme word, encoded, and
    for Basic the user:password (and each half) it encodes."""
    forms = [value]
    word, _, rest = value.strip().partition(" ")
    token = rest.strip() if rest else word
    if prefix and value.startswith(prefix):
        token = value[len(prefix) :]
    forms += [token, quote(token, safe=""), quote_plus(token)]
    if word.lower() == "basic" and rest:
        with contextlib.suppress(binascii.Error, ValueError):
            decoded = base64.b64decode(token, validate=True).decode("utf-8")
            forms += [decoded, *decoded.split(":", 1)]
    return forms


def _form_decoded(text: str) -> str:
    """Form-decoding of a query name or value (`+` is a space), as parse_qsl does it."""
    return unquote(text.replace("+", " "))


# --------------------------------------------------------------------------------------------------
# Faults
# --------------------------------------------------------------------------------------------------


@dataclass
class RestFaults:
    """Misbehaviour switches, all off by default, for every request but the control paths; applied in the order
    delay, disconnect, status (with retry_after), empty, html, and malformed (which cuts whatever is answered)."""

    delay_s: float = 0.0  # sleep before answering (a timeout)
    disconnect: bool = False  # close the connection without answering
    status: int | None = None  # answer this HTTP status with a small JSON error
    retry_after: float | None = None  # add Retry-After (seconds) to every answer
    empty: bool = False  # answer 200 with an empty body
    html: bool = False  # answer 200 with an HTML error page (a proxy's)
    malformed: bool = False  # answer JSON cut in half


def _check_fault(name: str, value: object) -> None:
    def number(v: object) -> bool:
        return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v >= 0

    if name == "delay_s":
        if not number(value):
            raise ValueError("delay_s must be a number >= 0")
    elif name == "retry_after":
        if value is not None and not number(value):
            raise ValueError("retry_after must be null or a number of seconds >= 0")
    elif name == "status":
        if value is not None and not (isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599):
            raise ValueError("status must be null or an HTTP status code (100-599)")
    elif not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false")


# --------------------------------------------------------------------------------------------------
# The upstream
# --------------------------------------------------------------------------------------------------


class RestUpstream(ServedUpstream):
    """The offline REST upstream for one catalog. Binds on construction, so `url` is known before `start()`.

    `api_key`: the only key accepted (default: any non-empty key). `base_path`: where the API is served (default:
    the path of the catalog's `api.base_url`).
    """

    def __init__(
        self,
        catalog: Catalog,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        api_key: str | None = None,
        base_path: str | None = None,
        faults: RestFaults | None = None,
    ) -> None:
        if not has_operations(catalog):
            raise ValueError(f"the {catalog.api.title} catalog has no REST operations to serve")
        self.catalog = catalog
        self.api_key = api_key
        self.faults = faults if faults is not None else RestFaults()
        self.base_path = (urlsplit(catalog.api.base_url).path if base_path is None else base_path).rstrip("/")
        self.router = Router(catalog, self.base_path)
        self._answers: dict[str, bytes] = {}
        self._records: deque[RecordedRequest] = record()  # the newest RECORD_LIMIT
        super().__init__(host, port, _Handler, "rest-upstream")
        self.url = f"http://{host}:{self.port}{self.base_path}"

    # -- the record and the faults ---------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        """The requests so far (control paths aside; the newest `serving.RECORD_LIMIT`), oldest first: a copy, the
        key masked."""
        with self._lock:
            return list(self._records)

    def clear_requests(self) -> None:
        with self._lock:
            self._records.clear()

    def update_faults(self, update: object) -> RestFaults:
        """Apply a partial update (field → value) to `faults`; ValueError names any bad field."""
        if not isinstance(update, dict):
            raise ValueError("expected a JSON object of RestFaults fields")
        known = {f.name for f in dataclasses.fields(RestFaults)}
        unknown = sorted(set(update) - known)
        if unknown:
            raise ValueError(f"unknown RestFaults field(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        for name, value in update.items():
            _check_fault(name, value)
        with self._lock:
            for name, value in update.items():
                number = name in ("delay_s", "retry_after") and value is not None
                setattr(self.faults, name, float(value) if number else value)
            return dataclasses.replace(self.faults)

    def reset(self) -> None:
        """Clear the faults and the record, in place (tests may hold a reference to `faults`)."""
        with self._lock:
            for f in dataclasses.fields(RestFaults):
                setattr(self.faults, f.name, f.default)
            self._records.clear()

    # -- answering -------------------------------------------------------------------------------

    def respond(self, request: Incoming) -> Reply:
        """Answer one request and record it: the whole behaviour without the HTTP layer (the handler calls it)."""
        raw_path, query_string = split_target(request.target)
        query = parse_qsl(query_string, keep_blank_values=True)
        with self._lock:
            faults = dataclasses.replace(self.faults)  # one consistent view for this request
        routed = self.router.route(request.method, raw_path, query, request.media_type() or None)
        # Recorded on arrival, so a client that gave up (a delay fault) finds its request there; the status follows.
        record = self._record(request, raw_path, query_string, query, routed)
        reply = self._answer(request, routed, query, faults)
        if not reply.disconnect:
            with self._lock:
                for i in range(len(self._records) - 1, -1, -1):  # the newest first: it is nearly always the last
                    if self._records[i] is record:
                        self._records[i] = dataclasses.replace(record, status=reply.status)
                        break
        return reply

    def _answer(self, request: Incoming, routed: RouteMatch, query: list[tuple[str, str]], faults: RestFaults) -> Reply:
        if faults.delay_s > 0:
            time.sleep(faults.delay_s)
        if faults.disconnect:
            return Reply(0, disconnect=True)
        reply = self._faulted(faults) or self._checked(request, routed, query) or self._success(request, routed)
        if faults.malformed and reply.body:
            reply = dataclasses.replace(reply, body=reply.body[: max(1, len(reply.body) // 2)])
        if faults.retry_after is not None:
            reply = dataclasses.replace(reply, headers=(*reply.headers, ("Retry-After", f"{faults.retry_after:g}")))
        return reply

    def _faulted(self, faults: RestFaults) -> Reply | None:
        if faults.status is not None:
            return error_reply(faults.status, f"sample upstream fault: HTTP {faults.status}")
        if faults.empty:
            return Reply(200, (("Content-Type", JSON_TYPE),), b"")
        if faults.html:
            page = b"<html><head><title>502 Bad Gateway</title></head><body><h1>Bad Gateway</h1></body></html>\n"
            return Reply(200, (("Content-Type", "text/html"),), page)
        return None

    def _checked(self, request: Incoming, routed: RouteMatch, query: list[tuple[str, str]]) -> Reply | None:
        """The error a real server would answer (404, 405, 401, 400, 415), or None if the request is fine."""
        if routed.route is None:
            if routed.status == 405:
                reply = error_reply(405, routed.message)
                return dataclasses.replace(reply, headers=(*reply.headers, ("Allow", ", ".join(routed.allow))))
            return error_reply(routed.status, routed.message)
        unauthorised = self._unauthorised(request, query)
        if unauthorised is not None:
            return unauthorised
        if routed.status != 200:
            return error_reply(routed.status, routed.message)
        return _invalid(routed.route.tool, request, query)

    def _unauthorised(self, request: Incoming, query: list[tuple[str, str]]) -> Reply | None:
        auth = self.catalog.api.auth
        if auth is None:
            return None
        problem = auth_problem(auth, request, query, self.api_key)
        if problem is None:
            return None
        # Any alternative the document's security offers will do (Stripe: basicAuth or bearerAuth), as the real
        # API takes each; the answer names what the default expects.
        for alternative in self.catalog.api.auth_options:
            if auth_problem(alternative, request, query, self.api_key) is None:
                return None
        reply = error_reply(401, problem)
        if auth.scheme in ("bearer", "basic"):
            challenge = f'{auth.scheme.capitalize()} realm="sample upstream"'
            reply = dataclasses.replace(reply, headers=(*reply.headers, ("WWW-Authenticate", challenge)))
        return reply

    def _success(self, request: Incoming, routed: RouteMatch) -> Reply:
        assert routed.route is not None
        tool = routed.route.tool
        if tool.output_schema is None:
            if routed.route.method == "DELETE":
                return Reply(204)
            return json_reply({"ok": True})
        return Reply(200, (("Content-Type", JSON_TYPE),), self.answer(tool))

    def answer(self, tool: CatalogTool) -> bytes:
        """The JSON body a tool's operation answers: made once, then the same bytes every time."""
        with self._lock:
            body = self._answers.get(tool.name)
        if body is None:
            schema = tool.output_schema if tool.output_schema is not None else {}
            body = dumps(sample_value(schema, seed=tool.name)).encode()
            with self._lock:
                body = self._answers.setdefault(tool.name, body)
        return body

    def _record(
        self,
        request: Incoming,
        raw_path: str,
        query_string: str,
        query: list[tuple[str, str]],
        routed: RouteMatch,
    ) -> RecordedRequest:
        masker = _Masker(self.catalog.api.auth, request, query, self.api_key)
        masked_query = masker.raw_query(query_string)
        target = request.target
        if query_string:  # the raw target with the query masked: the rest of it as it came
            head, _, rest = target.partition("?")
            target = head + "?" + masked_query + rest[len(query_string) :]
        route = routed.route
        record = RecordedRequest(
            method=request.method,
            raw_path=masker.text(target),
            path=masker.text(unquote(raw_path)),
            query_string=masked_query,
            query=masker.query(query),
            headers=masker.headers(request.headers),
            body=masker.bytes(request.body),
            tool=route.tool.name if route is not None else None,
            path_params={k: masker.text(v) for k, v in routed.path_params.items()},
        )
        with self._lock:
            self._records.append(record)
        return record


def auth_problem(auth: Auth, request: Incoming, query: list[tuple[str, str]], api_key: str | None) -> str | None:
    """Why a request is not authenticated as `auth` says (None: it is)."""
    if auth.scheme in ("bearer", "basic"):
        header = auth.name if auth.in_ == "header" else "Authorization"
        value = request.header(header)
        scheme = auth.scheme.capitalize()
        if value is None:
            return f"No credentials: expected the {header} header with the {scheme} scheme"
        word, _, token = value.strip().partition(" ")
        token = token.strip()
        if word.lower() != auth.scheme or not token:
            return f"Malformed {header} header: expected '{scheme} <credentials>'"
        if auth.scheme == "basic":
            try:
                token = base64.b64decode(token, validate=True).decode("utf-8")
            except (binascii.Error, ValueError):
                return "Malformed Basic credentials: not base64 of user:password"
            if ":" not in token:
                return "Malformed Basic credentials: expected user:password"
        return None if api_key is None or token == api_key else "Invalid credentials"
    where = {"query": "query parameter", "header": "header", "cookie": "cookie"}[auth.in_]
    if auth.in_ == "query":
        found = next((value for name, value in query if name == auth.name), None)
    elif auth.in_ == "header":
        found = request.header(auth.name)
    else:
        found = request.cookies().get(auth.name)
    if found is None:
        return f"No API key: expected the {where} '{auth.name}'"
    if not found.startswith(auth.prefix) or not found[len(auth.prefix) :].strip():
        return f"Malformed API key in the {where} '{auth.name}'" + (
            f": expected '{auth.prefix}<key>'" if auth.prefix else ""
        )
    return None if api_key is None or found[len(auth.prefix) :] == api_key else "Invalid API key"


def _invalid(tool: CatalogTool, request: Incoming, query: list[tuple[str, str]]) -> Reply | None:
    """400 (or 415) if a required parameter is missing or the body cannot be read as the operation says."""
    operation = tool.operation
    assert operation is not None
    names = {name for name, _ in query}
    cookies = request.cookies()
    missing: list[dict[str, str]] = []
    for param in tool.params:
        if not param.required:
            continue
        wire = param.upstream_name
        if param.location == "query":
            kind = param.schema.get("type") if param.schema is not None else param.type
            if kind == "object" and param.style in (None, "form") and param.explode in (None, True):
                continue  # an exploded object sends its members, not its name
            if wire not in names and not any(n.startswith(wire + "[") for n in names):
                missing.append({"name": wire, "in": "query"})
        elif param.location == "header" and request.header(wire) is None:
            missing.append({"name": wire, "in": "header"})
        elif param.location == "cookie" and wire not in cookies:
            missing.append({"name": wire, "in": "cookie"})
    body_params = [p for p in tool.params if p.location == "body"]
    if body_params and operation.body is not None:
        problem = _body_problem(operation.body, operation.body_type, request, body_params, missing)
        if problem is not None:
            return problem
    if not missing:
        return None
    said = ", ".join(f"{m['in']} parameter '{m['name']}'" for m in missing)
    return error_reply(400, f"Missing required {said}", missing=missing)


def media_fits(media: str, body_type: str) -> bool:
    """Whether a body of media type `media` (lower case, no parameters) is what an operation taking `body_type`
    reads: the same type, or within its range (`text/*`, `*/*`)."""
    expected = body_type.lower()
    return media == expected or expected == "*/*" or (expected.endswith("/*") and media.startswith(expected[:-1]))


def _body_problem(
    mode: str, body_type: str, request: Incoming, body_params: list[Param], missing: list[dict[str, str]]
) -> Reply | None:
    """Checks the body: its media type, that it parses, and (members mode) its required members; adds what is
    missing to `missing` and returns a reply for a body that cannot be read at all."""
    required = [p for p in body_params if p.required]
    if not request.body:
        if mode == "members":
            missing += [{"name": p.upstream_name, "in": "body"} for p in required]
        elif required:
            missing.append({"name": "body", "in": "body"})
        return None
    media = request.media_type()
    if not media_fits(media, body_type):
        return error_reply(415, f"Unsupported Content-Type '{media or 'none'}': expected {body_type}")
    if body_type == JSON_TYPE:
        try:
            parsed = json.loads(request.body)
        except ValueError as exc:
            return error_reply(400, f"The body is not valid JSON: {exc}")
    elif body_type in (FORM_TYPE, MULTIPART_TYPE):
        # Read as the document's encoding says; a body that does not follow it is refused, as the real API would.
        if body_type == FORM_TYPE:
            present, problems = form_members(body_params, request.body)
        else:
            present, problems = multipart_members(body_params, request.header("Content-Type") or "", request.body)
        if problems:
            return error_reply(400, "The body does not follow the document's encoding: " + "; ".join(problems[:5]))
        parsed = dict.fromkeys(present, "")
    else:
        return None  # other types: taken as they come
    if mode == "members":
        if not isinstance(parsed, dict):
            return error_reply(400, "The body must be an object of members")
        missing += [{"name": p.upstream_name, "in": "body"} for p in required if p.upstream_name not in parsed]
    return None


# --------------------------------------------------------------------------------------------------
# HTTP plumbing
# --------------------------------------------------------------------------------------------------


class _Handler(TrackedHandler):
    server_version = "RestSampleUpstream/1"

    @property
    def upstream(self) -> RestUpstream:
        return cast(RestUpstream, cast(LoopbackServer, self.server).upstream)

    def _target(self) -> str:
        """The request target exactly as sent (`self.path` may have been normalised: a leading `//` is folded)."""
        words = self.requestline.split()
        target = words[1] if len(words) >= 3 else self.path
        if target.startswith(("http://", "https://")):  # absolute form (a proxy's request): its path and query
            split = urlsplit(target)
            target = split.path + ("?" + split.query if split.query else "")
        return target

    def _body(self) -> bytes | None:
        """The request body (Content-Length or chunked); None if it is too large to take."""
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks: list[bytes] = []
            size = 0
            while True:
                length = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                if length == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(chunks)
                size += length
                if size > MAX_BODY_BYTES:
                    return None
                chunks.append(self.rfile.read(length))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            return None
        return self.rfile.read(length) if length > 0 else b""

    def _handle(self) -> None:
        body = self._body()  # always drained first, so a kept-alive connection stays in step
        if body is None:
            self.close_connection = True
            self._send(error_reply(413, f"The body is larger than {MAX_BODY_BYTES} bytes"))
            return
        target = self._target()
        path = split_target(target)[0]
        if path == REQUESTS_PATH:
            self._send(self._requests())
            return
        if path == FAULTS_PATH and self.command == "POST":
            self._send(self._faults(body))
            return
        request = Incoming(self.command, target, tuple(self.headers.items()), body)
        self._send(self.upstream.respond(request))

    def _requests(self) -> Reply:
        if self.command == "DELETE":
            self.upstream.clear_requests()
            return json_reply({"cleared": True})
        if self.command not in ("GET", "HEAD"):
            return error_reply(405, f"{self.command} is not allowed on {REQUESTS_PATH}")
        records = [record.to_json() for record in self.upstream.requests]
        return json_reply({"count": len(records), "requests": records})

    def _faults(self, body: bytes) -> Reply:
        try:
            faults = self.upstream.update_faults(json.loads(body or b"{}"))
        except ValueError as exc:
            return error_reply(400, str(exc))
        return json_reply(dataclasses.asdict(faults))

    def _send(self, reply: Reply) -> None:
        if reply.disconnect:
            self.close_connection = True
            return
        self.send_response(reply.status)
        for name, value in reply.headers:
            self.send_header(name, value)
        self.send_header("X-Sample-Data", "synthetic")
        if reply.status not in (204, 304) and not 100 <= reply.status < 200:
            self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        if self.command != "HEAD" and reply.status not in (204, 304):
            self.wfile.write(reply.body)

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_TRACE = _handle


@contextlib.contextmanager
def serve_rest_upstream(
    catalog: Catalog,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    api_key: str | None = None,
    base_path: str | None = None,
    faults: RestFaults | None = None,
) -> Iterator[RestUpstream]:
    """A started `RestUpstream` for the block, stopped after it (the arguments are the constructor's)."""
    with RestUpstream(catalog, host, port, api_key=api_key, base_path=base_path, faults=faults) as upstream:
        yield upstream


# --------------------------------------------------------------------------------------------------
# Command line (`progressive-mcp sample-upstream --spec FILE`)
# --------------------------------------------------------------------------------------------------

# The sample upstream's fault flags that have a REST meaning, by the RestFaults field each sets.
_FLAGS = {"delay": "delay_s", "disconnect": "disconnect", "status": "status", "retry_after": "retry_after"}
_FLAGS |= {"empty": "empty", "html": "html", "malformed": "malformed"}
# Those that are Alpha Vantage's only, with the value that means "off".
_ALPHA_VANTAGE_ONLY = {"huge": False, "rate_limit": False, "invalid_key": False, "trickle": 0.0, "body_mb": 0.0}


def upstream_from_args(catalog: Catalog, args: argparse.Namespace, parser: argparse.ArgumentParser) -> RestUpstream:
    """The REST upstream the sample upstream's flags (`sample_upstream.add_arguments`) describe, unstarted."""
    for name, off in _ALPHA_VANTAGE_ONLY.items():
        if getattr(args, name, off) != off:
            parser.error(f"--{name.replace('_', '-')} applies to the Alpha Vantage sample only, not to a REST API")
    faults = RestFaults()
    for flag, name in _FLAGS.items():
        value = getattr(args, flag, None)
        if value is not None:
            try:
                _check_fault(name, value)
            except ValueError as exc:
                parser.error(str(exc))
            setattr(faults, name, value)
    return RestUpstream(catalog, args.host, args.port, faults=faults)


def run(catalog: Catalog, args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Serve a catalog's REST operations as `args` say, until Ctrl-C."""
    try:
        upstream = upstream_from_args(catalog, args, parser)
    except OSError as exc:
        print(f"sample upstream: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    count = len(upstream.router.routes)
    print(
        f"REST sample upstream for {catalog.api.title} ({count} operations, synthetic answers) "
        f"listening on {upstream.url}\nuse it with: --upstream {upstream.url}",
        file=sys.stderr,
        flush=True,
    )
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is the normal way to stop
        upstream.serve_forever()
    return 0
