"""The OpenAPI source: an OpenAPI 3.0/3.1 or Swagger 2.0 document (YAML or JSON, one file or many joined by
relative `$ref`s) becomes a catalog, one tool per operation. Example::

    catalog, report = load_openapi("DigitalOcean-public.v2.yaml")
    report.operations, len(catalog), report.skipped        # 659, 659, []

`$ref`s are resolved with `referencing` (the library `jsonschema` resolves with), lazily: only what operations
use is read, so DigitalOcean's ~2,900 files cost only the parts a tool needs (its code samples are never read).
References may only point at files inside the entry document's folder, and never at the network. The full
validation of a document against the OpenAPI specification (`openapi-spec-validator`) is slow (OpenAI's
document: ~3.6 s) and finds things no tool depends on, so it runs in `progressive-mcp spec check`, not at every
load; loading reports only what stops an operation becoming a tool, naming the operation and the JSON pointer.

The rules (docs/openapi.md says them for users):
- name: the operationId made a valid MCP tool name (letters, digits, `_`, `-`, `.`; at most 64 characters);
  `<method>_<path>` when there is none; a clash gets a short digest of method and path (stable across reloads).
- category: the first tag (its description is the category's) that no generator made from a version; other
  operations go under the first path segment after versions (`v2`, `api`, `2010-04-01`) and the document's scope
  (`path_scope`), and path-made categories of one tool are merged into `other`.
- title and summary: the summary, else the description's first sentence; HTML in any text becomes Markdown.
- arguments: path, query, header and cookie parameters (path-level ones apply, the operation's own override);
  the ones carrying credentials (named by an apiKey scheme, or called one by their description) are left out
  (the server adds the key itself). A JSON body whose schema is a
  plain object is flattened into arguments when none of its member names clash with a parameter; any other body
  is one `body` argument. Form bodies are always flattened. Multipart bodies (file uploads) are skipped.
- schemas: JSON Schema 2020-12 with `$ref`s inlined; recursion and nesting beyond MAX_DEPTH are cut with a note;
  OpenAPI 3.0's `nullable`, boolean `exclusiveMinimum`, `example` and Swagger's `x-nullable` are translated;
  read-only members leave request schemas and write-only members leave answers.
- annotations from the method; output schema from the first 2xx JSON answer.

Reading the files and following `$ref`s is `openapi_documents`, converting schemas `openapi_schemas`, and making
prose fit (HTML, cuts) `openapi_prose`; this module makes operations into tools and the document into a catalog.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal
from urllib.parse import parse_qsl

from progressive_mcp.catalog import (
    FRAMING_HEADERS,
    Api,
    Auth,
    Catalog,
    CatalogTool,
    Operation,
    Param,
    _freeze,
    input_schema,
    method_annotations,
)
from progressive_mcp.collector import collector_paused
from progressive_mcp.errors import SpecError
from progressive_mcp.sources.filters import Filter, keep, slug, unknown_tag_help
from progressive_mcp.sources.loaded import note_read
from progressive_mcp.sources.openapi_documents import MAX_FILE_BYTES, Documents, Place, Problem, Resolver, parse_text
from progressive_mcp.sources.openapi_prose import first_sentence, trim
from progressive_mcp.sources.openapi_schemas import MAX_DEPTH, MAX_INNER_DESCRIPTION, MAX_SCHEMA_NODES, SchemaConverter

UPSTREAM_KEY_ENV = "PMCP_UPSTREAM_KEY"
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
MAX_NAME = 64
MAX_SUMMARY = 120
MAX_TITLE = 200
MAX_DESCRIPTION = 1_000  # a tool's description: the first ~250 tokens of what the document says
MAX_CATEGORY_DESCRIPTION = 300
MAX_EXAMPLE_CHARS = 2_000  # an answer's example is kept (for the offline upstream) when it is this small
# Parameters that carry credentials when a document declares security but not as an apiKey scheme (Slack's
# `token`), when the parameter's description says so too: the server sends the key itself, so the model never sees
# or fills them.
_CREDENTIAL_WORDS = re.compile(r"\b(auth\w*|credentials?|api[ _-]?keys?|access[ _-]tokens?|bearer)\b", re.IGNORECASE)
CREDENTIAL_NAMES = frozenset({"authorization", "token", "access_token", "api_key", "apikey", "api-key", "x-api-key"})
# OpenAPI 3: header parameters with these names "SHALL be ignored" (the content type and auth say them).
IGNORED_HEADERS = frozenset({"accept", "content-type", "authorization"})
_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.-]+")
_ARG_CHARS = re.compile(r"[^A-Za-z0-9_]+")
_VERSION = re.compile(r"^v\d+(\.\d+)*$|^api$|^\d+([.-]\d+)*$", re.IGNORECASE)  # v2, api, 2010-04-01, 1.0
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
# A tag made by a generator from the API's version and a resource (Twilio's `Api20100401Call`): no category name.
_VERSIONED_TAG = re.compile(r"\d{4,}")
OTHER_CATEGORY = "other"


def is_openapi(data: Any) -> bool:
    return isinstance(data, dict) and ("openapi" in data or "swagger" in data)


def looks_like_openapi(text: str) -> bool:
    """Whether a YAML or JSON text is an OpenAPI/Swagger document, from its top-level `openapi`/`swagger` key
    (for YAML, a key at column 0; a JSON document is parsed by the caller)."""
    return re.search(r"^(openapi|swagger)\s*:", text, re.MULTILINE) is not None


@dataclass(frozen=True, slots=True)
class Skipped:
    operation: str  # "POST /files.upload (files_upload)"
    reason: str


@dataclass
class OpenApiReport:
    """What a load made of a document: counts, what was left out and why, and what was cut or translated."""

    source: str
    version: str  # "3.0.0", "2.0"
    operations: int = 0  # (path, method) pairs under `paths`
    filtered: int = 0  # left out by --include/--exclude
    skipped: list[Skipped] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def tools(self) -> int:
        return self.operations - self.filtered - len(self.skipped)

    def summary(self) -> str:
        text = f"{self.source}: OpenAPI {self.version}, {counted(self.operations, 'operation')} → "
        text += counted(self.tools, "tool")
        if self.filtered:
            text += f", {self.filtered} filtered out"
        if self.skipped:
            text += f", {len(self.skipped)} skipped"
        return text


def counted(number: int, word: str, plural: str | None = None) -> str:
    """ "1 tool", "2 tools", "1 category", "3 categories"."""
    if number == 1:
        return f"1 {word}"
    return f"{number} {plural or (word[:-1] + 'ies' if word.endswith('y') else word + 's')}"


# --- operations ------------------------------------------------------------------------------------------------


@dataclass
class _Built:
    params: list[Param]
    body: Literal["whole", "members"] | None = None
    body_type: str = "application/json"


class _Converter:
    def __init__(self, document: dict[str, Any], refs: Resolver, report: OpenApiReport) -> None:
        self.doc = document
        self.refs = refs
        self.report = report
        version = str(document.get("openapi") or document.get("swagger") or "")
        self.dialect: Literal["2.0", "3.0", "3.1"] = (
            "2.0" if version.startswith("2") else "3.1" if version.startswith("3.1") else "3.0"
        )
        self.schemas = SchemaConverter(refs, self.dialect, report.notes)
        self.auth, self.auth_options, self.auth_params = self._security()
        self.budget = [MAX_SCHEMA_NODES]  # what is left of the tool being built's argument schemas
        self.scope = path_scope([str(p) for p in _dict(document.get("paths"))])

    # the API ----------------------------------------------------------------------------------------------------

    def api(self, base_url: str | None) -> Api:
        info = _dict(self.doc.get("info"))
        title = trim(str(info.get("title") or "API"), MAX_TITLE)
        docs = self.doc.get("externalDocs")
        description = info.get("description")
        return Api(
            name=slug(title).replace("_", "-"),
            title=title,
            base_url=base_url or self.server_url(),
            description=trim(description, MAX_DESCRIPTION) if isinstance(description, str) else "",
            docs_url=docs.get("url") if isinstance(docs, dict) and isinstance(docs.get("url"), str) else None,
            dispatch=None,
            auth=self.auth,
            default_cache_ttl_s=0,
            auth_options=self.auth_options,
        )

    def server_url(self) -> str:
        if self.dialect == "2.0":
            host = self.doc.get("host")
            if not isinstance(host, str) or not host:
                return ""
            schemes = self.doc.get("schemes") or ["https"]
            scheme = "https" if "https" in schemes else str(schemes[0])
            return f"{scheme}://{host}{self.doc.get('basePath') or ''}".rstrip("/")
        servers = self.doc.get("servers")
        if not isinstance(servers, list) or not servers or not isinstance(servers[0], dict):
            return ""
        url = str(servers[0].get("url") or "")
        for name, variable in (servers[0].get("variables") or {}).items():
            if isinstance(variable, dict) and "default" in variable:
                url = url.replace("{" + name + "}", str(variable["default"]))
        return url.rstrip("/") if url.startswith(("http://", "https://")) else ""

    def _security(self) -> tuple[Auth | None, tuple[Auth, ...], frozenset[tuple[str, str]]]:
        """The document's schemes as our Auth: the default (the first requirement we can send; bearer that sends
        a user:password key as Basic when the document offers both, as Stripe does), every one we can send (for
        PMCP_UPSTREAM_AUTH), and the (in, folded name) of the parameters apiKey schemes occupy."""
        if self.dialect == "2.0":
            schemes = self.doc.get("securityDefinitions") or {}
        else:
            components = _dict(self.doc.get("components"))
            schemes = components.get("securitySchemes") or {}
        if not isinstance(schemes, dict) or not schemes:
            return None, (), frozenset()
        wanted: list[str] = []
        requirements = list(self.doc.get("security") or [])
        for path_item in (self.doc.get("paths") or {}).values():
            if isinstance(path_item, dict):
                for method in METHODS:
                    operation = path_item.get(method)
                    if isinstance(operation, dict) and isinstance(operation.get("security"), list):
                        requirements += operation["security"]
        for requirement in requirements:
            if isinstance(requirement, dict):
                wanted += [name for name in requirement if name not in wanted]
        wanted += [name for name in schemes if name not in wanted]
        at = self.refs.start.child("components", "securitySchemes")
        options: list[Auth] = []
        occupied: set[tuple[str, str]] = set()
        for name in wanted:
            try:
                scheme, _, _ = self.refs.deref(schemes.get(name), at.child(name))
            except Problem as exc:
                self.report.notes.append(f"security scheme {name}: {exc}")
                continue
            if not isinstance(scheme, dict):
                continue
            kind = scheme.get("type")
            if kind == "apiKey" and scheme.get("in") in ("query", "header", "cookie") and scheme.get("name"):
                where, key_name = scheme["in"], str(scheme["name"])
                options.append(Auth(where, key_name, UPSTREAM_KEY_ENV, scheme_name=name))
                occupied.add((where, key_name.casefold()))
            elif (kind == "http" and str(scheme.get("scheme", "")).lower() == "basic") or kind == "basic":
                options.append(Auth("header", "Authorization", UPSTREAM_KEY_ENV, scheme="basic", scheme_name=name))
            elif kind in ("http", "oauth2", "openIdConnect"):  # bearer, or an OAuth access token sent as one
                options.append(Auth("header", "Authorization", UPSTREAM_KEY_ENV, scheme="bearer", scheme_name=name))
        if not options:
            return None, (), frozenset(occupied)
        default = options[0]
        bearer = next((o for o in options if o.scheme == "bearer"), None)
        if default.scheme in ("basic", "bearer") and bearer is not None and any(o.scheme == "basic" for o in options):
            # A bare key (`sk_test_...`) goes as a bearer token; a key given as user:password as HTTP Basic.
            default = replace(bearer, pair_as_basic=True)
        return default, tuple(options), frozenset(occupied)

    def categories(self) -> dict[str, str]:
        out: dict[str, str] = {}
        at = self.refs.start.child("tags")
        for i, tag in enumerate(self.doc.get("tags") or []):
            if not isinstance(tag, dict) or not isinstance(tag.get("name"), str):
                continue
            description = tag.get("description")
            try:
                description, _, _ = self.refs.deref(description, at.child(i, "description"))
            except Problem:
                description = None
            text = tag["name"]
            if isinstance(description, str) and description.strip():
                text += ": " + first_sentence(description, MAX_CATEGORY_DESCRIPTION)
            out.setdefault(slug(tag["name"]), trim(text, MAX_CATEGORY_DESCRIPTION))
        return out

    # one operation --------------------------------------------------------------------------------------------

    def tool(
        self, name: str, method: str, path: str, operation: dict[str, Any], shared: tuple[Any, Place], at: Place
    ) -> tuple[CatalogTool, str]:
        """The tool for one operation, and its category (its tag, or the path's first segment). `shared`: the
        path item's parameters and their place. A path with a query (OpenAI's `/responses/{id}?beta=true`) is
        routed by its path, and the query's parameters are sent on every call (`fixed`)."""
        path, _, constant_query = path.partition("?")
        self.budget = [MAX_SCHEMA_NODES]
        operation_id = _text(operation, "operationId")
        self.schemas.operation = f"{method} {path}" + (f" ({operation_id})" if operation_id else "")
        built = self._params(path, operation, shared, at)
        op_id = _text(operation, "operationId") or None
        tags = category_tags(operation)
        category = slug(tags[0]) if tags else path_category(path, self.scope)
        summary_text = _text(operation, "summary")
        description_text = _text(operation, "description")
        summary = first_sentence(summary_text or description_text, MAX_SUMMARY) or f"{method} {path}"
        route = f"{method} {path}" + (f" (operationId {op_id})" if op_id and op_id != name else "")
        body = trim(description_text or summary_text, MAX_DESCRIPTION - len(route) - 2)
        description = f"{route}. {body}" if body else f"{route}."
        if operation.get("deprecated") is True:
            description = "Deprecated. " + description
        # The summary; else the description's first sentence (Stripe's "Initiate 3D Secure authentication.", not
        # "Post3d Secure"); else the operationId made words; else the route.
        title = trim(summary_text, MAX_TITLE) or first_sentence(description_text, MAX_TITLE)
        title = title or (humanize(op_id) if op_id else f"{method} {path}")
        params = tuple(built.params)
        schema = input_schema(params, [])
        output = self._output(operation, at)
        return (
            CatalogTool(
                name=name,
                title=title,
                category=category,
                summary=summary,
                description=description,
                params=params,
                input_schema=_freeze(schema),
                keywords=(),
                examples=(),
                cache_ttl_s=0,
                premium=False,
                output_schema=_freeze(output) if output is not None else None,
                method=method,
                operation=Operation(method, path, op_id, built.body, built.body_type),
                fixed=MappingProxyType(dict(parse_qsl(constant_query, keep_blank_values=True))),
                annotations=method_annotations("GET" if method in ("OPTIONS", "TRACE") else method),
            ),
            category,
        )

    def _params(self, path: str, operation: dict[str, Any], shared: tuple[Any, Place], at: Place) -> _Built:
        merged: dict[tuple[str, str], tuple[dict[str, Any], Place]] = {}
        body_param: tuple[dict[str, Any], Place] | None = None
        form_params: list[tuple[dict[str, Any], Place]] = []
        sources = [shared, (operation.get("parameters") or [], at.child("parameters"))]
        for items, base in sources:
            if not isinstance(items, list):
                raise Problem(f"parameters must be a list ({base.where(self.refs.root_uri)})")
            for i, raw in enumerate(items):
                param, param_at, _ = self.refs.deref(raw, base.child(i))
                if not isinstance(param, dict) or not isinstance(param.get("name"), str) or "in" not in param:
                    raise Problem(f"a parameter needs `name` and `in` ({param_at.where(self.refs.root_uri)})")
                where = param["in"]
                if where == "body":
                    body_param = (param, param_at)
                elif where == "formData":
                    form_params.append((param, param_at))
                elif where in ("query", "path", "header", "cookie"):
                    merged[(param["name"], where)] = (param, param_at)
                else:
                    raise Problem(f"parameter {param['name']!r} has an unknown location {where!r}")
        params: list[Param] = []
        taken: set[str] = set()
        for (wire, where), (param, param_at) in merged.items():
            if self._carries_auth(wire, where, param):
                continue
            params.append(self._param(wire, where, param, param_at, taken))
        placeholders = set(re.findall(r"{([^}]+)}", path))
        declared = {p.upstream_name for p in params if p.location == "path"}
        for missing in sorted(placeholders - declared):  # a template variable nobody declared: still an argument
            params.append(self._param(missing, "path", {"required": True, "schema": {"type": "string"}}, at, taken))
        built = _Built(params)
        if self.dialect == "2.0":
            self._swagger_body(operation, body_param, form_params, built, taken)
        else:
            self._request_body(operation, at, built, taken)
        return built

    def _carries_auth(self, wire: str, where: str, param: dict[str, Any]) -> bool:
        """Whether a parameter is the credential, which the server sends itself: the one an apiKey scheme names,
        or one with a credential's name that the document calls one (Slack's `token`, "Authentication token",
        beside an OAuth scheme). A name alone is not enough: Airflow's `token` continues a log."""
        folded = wire.casefold()
        if (where, folded) in self.auth_params:
            return True
        if where == "header" and (folded in IGNORED_HEADERS or folded in FRAMING_HEADERS):
            return True  # or one the call writes itself and no argument may set (Vtex's `Cookie`): no argument
        described = _CREDENTIAL_WORDS.search(_text(param, "description")) is not None
        return self.auth is not None and folded in CREDENTIAL_NAMES and described

    def _param(self, wire: str, where: str, param: dict[str, Any], at: Place, taken: set[str]) -> Param:
        collection_format: str | None = None
        if self.dialect == "2.0" or ("schema" not in param and "content" not in param):
            raw_schema: Any = swagger_schema(param)
            schema = self.schemas.convert(raw_schema, at, "request", self.budget)
            style, explode = swagger_style(param)
            if param.get("type") == "array":  # Swagger 2.0: the serialisation is the collectionFormat's (csv default)
                collection_format = str(param.get("collectionFormat") or "csv")
        else:
            raw_schema = param.get("schema")
            schema_at = at.child("schema")
            if raw_schema is None and isinstance(param.get("content"), dict) and param["content"]:
                media = next(iter(param["content"]))
                raw_schema = (param["content"][media] or {}).get("schema", {})
                schema_at = at.child("content", media, "schema")
            schema = self.schemas.convert(
                raw_schema if raw_schema is not None else {}, schema_at, "request", self.budget
            )
            style = _text(param, "style") or None
            explode = param.get("explode") if isinstance(param.get("explode"), bool) else None
        example = param.get("example")
        if example is not None and "examples" not in schema and _is_scalar(example):
            schema["examples"] = [example]
        name = argument_name(wire, where, taken)
        description = _text(param, "description")
        schema.pop("description", None)
        return _param_from_schema(
            name=name,
            wire=wire,
            where=where,
            schema=schema,
            required=where == "path" or param.get("required") is True,
            description=trim(description, MAX_INNER_DESCRIPTION) if description else "",
            deprecated=param.get("deprecated") is True,
            style=style,
            explode=explode,
            collection_format=collection_format,
        )

    def _request_body(self, operation: dict[str, Any], at: Place, built: _Built, taken: set[str]) -> None:
        raw = operation.get("requestBody")
        if raw is None:
            return
        body, body_at, _ = self.refs.deref(raw, at.child("requestBody"))
        if not isinstance(body, dict) or not isinstance(body.get("content"), dict):
            raise Problem(f"requestBody needs `content` ({body_at.where(self.refs.root_uri)})")
        content = body["content"]
        if not content:
            return
        media = next((m for m in content if is_json_media(m)), None)  # JSON first, then a form, else the first
        media = media or next((m for m in content if m.startswith((FORM_MEDIA, MULTIPART_MEDIA))), None)
        media = media or next(iter(content))
        entry = content[media] if isinstance(content[media], dict) else {}
        schema_raw = entry.get("schema", {} if is_json_media(media) or media.startswith(FORM_MEDIA) else None)
        if schema_raw is None:  # a raw body (an image, a file) has no schema, or just {type: string}
            schema: dict[str, Any] = {"type": "string"}
        else:
            schema = self.schemas.convert(schema_raw, body_at.child("content", media, "schema"), "request", self.budget)
        required = body.get("required") is True
        encoding = self._encoding(entry, body_at.child("content", media, "encoding"))
        self._body(schema, required, _text(body, "description"), media.split(";")[0].strip(), built, taken, encoding)

    def _encoding(self, entry: dict[str, Any], at: Place) -> dict[str, Param]:
        """A body's Encoding Object, per property, as the Param fields that carry it (style, explode, contentType and
        the headers of a multipart part). A part header is sent only when the document fixes its value (a `const`,
        a `default`, a single `enum` value or an example); Content-Type is the contentType's (OpenAPI says so)."""
        raw = entry.get("encoding")
        if not isinstance(raw, dict):
            return {}
        out: dict[str, Param] = {}
        for member, item in raw.items():
            encoding, encoding_at, _ = self.refs.deref(item, at.child(str(member)))
            if not isinstance(encoding, dict):
                continue
            headers: dict[str, str] = {}
            for name, header in _dict(encoding.get("headers")).items():
                try:
                    header, _, _ = self.refs.deref(header, encoding_at.child("headers", str(name)))
                except Problem:
                    continue
                value = fixed_header_value(_dict(header))
                if value is not None and str(name).lower() != "content-type":
                    headers[str(name)] = value
            out[str(member)] = Param(
                name=str(member),
                type="string",
                required=False,
                style=_text(encoding, "style") or None,
                explode=encoding.get("explode") if isinstance(encoding.get("explode"), bool) else None,
                content_type=_text(encoding, "contentType") or None,
                part_headers=_freeze(headers) if headers else None,
            )
        return out

    def _swagger_body(
        self,
        operation: dict[str, Any],
        body_param: tuple[dict[str, Any], Place] | None,
        form_params: list[tuple[dict[str, Any], Place]],
        built: _Built,
        taken: set[str],
    ) -> None:
        if body_param is not None:
            param, at = body_param
            schema = self.schemas.convert(param.get("schema", {}), at.child("schema"), "request", self.budget)
            description = _text(param, "description")
            self._body(schema, param.get("required") is True, description, "application/json", built, taken)
            return
        if not form_params:
            return
        consumes = [str(c) for c in operation.get("consumes") or self.doc.get("consumes") or []]
        urlencoded = not consumes or any(c.startswith(FORM_MEDIA) for c in consumes)
        files = any(p.get("type") == "file" for p, _ in form_params)
        multipart = files or not urlencoded  # a file goes in a multipart form; so does a form that is only that
        if multipart and consumes and not any(c.startswith(MULTIPART_MEDIA) for c in consumes) and not files:
            raise _Unsupported(f"its form is only sent as {', '.join(consumes)}, which this server cannot send")
        for param, at in form_params:
            wire = param["name"]
            if self._carries_auth(wire, "query", param):
                continue
            p = self._param(wire, "body", param, at, taken)
            if param.get("type") == "file":
                p = _as_file(p)
            built.params.append(p)
        built.body, built.body_type = "members", MULTIPART_MEDIA if multipart else FORM_MEDIA

    def _body(
        self,
        schema: dict[str, Any],
        required: bool,
        description: str,
        media: str,
        built: _Built,
        taken: set[str],
        encoding: Mapping[str, Param] | None = None,
    ) -> None:
        """A body as its members (a plain object whose member names are free; a form's always) or as one `body`
        argument (anything else; a raw body such as an image is a string, base64-encoded when it is binary). A
        member keeps its Encoding (`encoding`, by property name) for the request."""
        built.body_type = media
        form = media.startswith((FORM_MEDIA, MULTIPART_MEDIA))
        if not form and not is_json_media(media):
            schema = raw_body_schema(media, schema)
        members = schema.get("properties")
        flat = (
            isinstance(members, dict)
            and members
            and schema.get("type") in ("object", None)
            and not any(k in schema for k in ("allOf", "oneOf", "anyOf", "not", "patternProperties"))
            and schema.get("additionalProperties") in (None, False)
            and all(argument_name(m, "body", set()) == m and m not in taken and m != "body" for m in members)
            and len(members) <= 48
        )
        if flat or (form and isinstance(members, dict)):
            needed = set(schema.get("required") or ()) if required else set()
            for member, sub in (members or {}).items():
                sub = dict(sub)
                text = sub.pop("description", "")
                files = file_schema(sub) if media.startswith(MULTIPART_MEDIA) else None
                encoded = (encoding or {}).get(member)
                param = _param_from_schema(
                    name=argument_name(member, "body", taken),
                    wire=member,
                    where="body",
                    schema=sub if files is None else files,
                    required=member in needed,
                    description=_with_file_note(text if isinstance(text, str) else "", files is not None),
                    deprecated=sub.get("deprecated") is True,
                    style=encoded.style if encoded is not None else None,
                    explode=encoded.explode if encoded is not None else None,
                )
                if encoded is not None:
                    param = replace(param, content_type=encoded.content_type, part_headers=encoded.part_headers)
                built.params.append(param)
            built.body = "members"
            return
        text = description or schema.get("description") or "The request body."
        schema = dict(schema)
        schema.pop("description", None)
        built.params.append(
            _param_from_schema(
                name=argument_name("body", "body", taken),
                wire="body",
                where="body",
                schema=schema,
                required=required,
                description=trim(str(text), MAX_INNER_DESCRIPTION),
            )
        )
        built.body = "whole"

    def _output(self, operation: dict[str, Any], at: Place) -> dict[str, Any] | None:
        responses = operation.get("responses")
        if not isinstance(responses, dict):
            return None
        codes = sorted((str(c) for c in responses if str(c).startswith("2")), key=lambda c: (c != "200", c))
        for code in codes:
            response, response_at, _ = self.refs.deref(
                responses[code] if code in responses else responses[int(code)], at.child("responses", code)
            )
            if not isinstance(response, dict):
                continue
            if self.dialect == "2.0":
                if "schema" not in response:
                    continue
                schema = self.schemas.convert(response["schema"], response_at.child("schema"), "response")
                example = (response.get("examples") or {}).get("application/json")
            else:
                content = response.get("content")
                if not isinstance(content, dict):
                    continue
                media = next((m for m in content if is_json_media(m)), None)
                if media is None or not isinstance(content[media], dict) or "schema" not in content[media]:
                    continue
                entry = content[media]
                schema = self.schemas.convert(
                    entry["schema"], response_at.child("content", media, "schema"), "response"
                )
                example = self._example(entry, response_at.child("content", media))
            if example is not None and len(json.dumps(example, default=str)) <= MAX_EXAMPLE_CHARS:
                schema["examples"] = [json.loads(json.dumps(example, default=str))]
            return schema
        return None

    def _example(self, entry: dict[str, Any], at: Place) -> Any:
        if "example" in entry:
            return entry["example"]
        examples = entry.get("examples")
        if isinstance(examples, dict) and examples:
            first_name = next(iter(examples))
            try:
                example, _, _ = self.refs.deref(examples[first_name], at.child("examples", first_name))
            except Problem:
                return None
            if isinstance(example, dict) and "value" in example:
                return example["value"]
        return None


FORM_MEDIA = "application/x-www-form-urlencoded"
MULTIPART_MEDIA = "multipart/form-data"
BASE64_NOTE = "base64-encoded"


def is_file(schema: Mapping[str, Any]) -> bool:
    """A file's content in a form or body: OpenAPI 3.0's `format: binary`, 3.1's `contentMediaType`, Swagger's
    `file` type (read as a string by the converter, which keeps its `format` if any)."""
    return schema.get("format") == "binary" or ("contentMediaType" in schema and "contentEncoding" not in schema)


FILE_NOTE = "A file's content: base64, or a data URL (data:TYPE;base64,DATA)."


def _as_file(param: Param) -> Param:
    """A file argument: its content as a base64 string or data URL (MCP arguments are JSON), sent as a file part."""
    schema = {"type": "string", "contentEncoding": "base64"}
    description = _with_file_note(param.description, True)
    return replace(param, type="string", schema=_freeze(schema), description=description, format=None, enum=None)


def _with_file_note(description: str, file: bool) -> str:
    if not file:
        return description
    return f"{description} ({FILE_NOTE})" if description else FILE_NOTE


def file_schema(schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """The argument schema of a multipart member that holds a file, files (an array of them) or either (`anyOf`):
    each file a base64 string or data URL (`contentEncoding: base64`, which marks it for the request); None when
    the member holds no file."""
    if is_file(schema):
        return {"type": "string", "contentEncoding": "base64"}
    items = schema.get("items")
    if schema.get("type") == "array" and isinstance(items, Mapping) and is_file(items):
        kept = {k: schema[k] for k in ("minItems", "maxItems") if k in schema}
        return {"type": "array", "items": {"type": "string", "contentEncoding": "base64"}, **kept}
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list | tuple):
            converted = [file_schema(o) if isinstance(o, Mapping) else None for o in options]
            if any(c is not None for c in converted):
                return {key: [c if c is not None else dict(o) for c, o in zip(converted, options, strict=True)]}
    return None


def fixed_header_value(header: Mapping[str, Any]) -> str | None:
    """The value a Header Object fixes (its schema's const, default or single enum value, or its example)."""
    schema = _dict(header.get("schema"))
    enum = schema.get("enum")
    for value in (
        schema.get("const"),
        schema.get("default"),
        enum[0] if isinstance(enum, list) and len(enum) == 1 else None,
        header.get("example"),
        schema.get("example"),
    ):
        if _is_scalar(value):
            return str(value).lower() if isinstance(value, bool) else str(value)
    return None


def raw_body_schema(media: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    """The `body` argument of a raw body (an image, a file, XML, SDP): text as it is, anything else base64."""
    base = media.lower()
    text = base.startswith("text/") or base.endswith(("+xml", "/xml", "/sdp", "/yaml", "/x-yaml"))
    if text:
        return {"type": "string", "description": f"The request body ({media})."}
    return {
        "type": "string",
        "contentEncoding": "base64",
        "description": f"The request body ({media}): base64, or a data URL (data:TYPE;base64,DATA).",
    }


class _Unsupported(Problem):
    """An operation this server cannot call (a file upload), skipped rather than an error."""


def _param_from_schema(
    *,
    name: str,
    wire: str,
    where: str,
    schema: dict[str, Any],
    required: bool,
    description: str,
    deprecated: bool = False,
    style: str | None = None,
    explode: bool | None = None,
    collection_format: str | None = None,
) -> Param:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    scalar = kind if kind in ("string", "integer", "number", "boolean") else None
    enum = schema.get("enum")
    default = schema.get("default")
    return Param(
        name=name,
        type=scalar or (kind if isinstance(kind, str) else "object"),
        required=required,
        description=description,
        enum=tuple(v for v in enum if v is not None) if scalar and isinstance(enum, list) else None,
        default=default if scalar and _is_scalar(default) else None,
        format=schema.get("format") if scalar and isinstance(schema.get("format"), str) else None,
        location=where,  # type: ignore[arg-type]
        wire_name=wire if wire != name else None,
        style=style,
        explode=explode,
        collection_format=collection_format,
        schema=_freeze(schema),
        deprecated=deprecated,
    )


def _text(mapping: Mapping[str, Any], key: str) -> str:
    """A string field of a document object ("" when absent or not a string)."""
    value = mapping.get(key)
    return value if isinstance(value, str) else ""


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _is_scalar(value: Any) -> bool:
    return isinstance(value, str | int | float | bool)


def swagger_schema(param: dict[str, Any]) -> dict[str, Any]:
    """A Swagger 2.0 (or schema-less) parameter's own type fields as a schema object."""
    keys = ("type", "format", "items", "enum", "default", "minimum", "maximum", "exclusiveMinimum",
            "exclusiveMaximum", "minLength", "maxLength", "pattern", "minItems", "maxItems", "uniqueItems",
            "multipleOf", "x-nullable")  # fmt: skip
    schema = {k: param[k] for k in keys if k in param}
    if isinstance(schema.get("items"), dict):
        schema["items"] = {k: v for k, v in schema["items"].items() if k != "collectionFormat"}
    return schema or {"type": "string"}


def swagger_style(param: dict[str, Any]) -> tuple[str | None, bool | None]:
    """Swagger 2.0's collectionFormat as OpenAPI 3's style and explode."""
    fmt = param.get("collectionFormat")
    if param.get("type") != "array" or fmt in (None, "csv"):
        return (
            ("form", False)
            if param.get("type") == "array" and param.get("in") in ("query", "formData")
            else (None, None)
        )
    return {
        "multi": ("form", True),
        "ssv": ("spaceDelimited", False),
        "pipes": ("pipeDelimited", False),
        "tsv": ("form", False),  # no OpenAPI 3 equivalent: the request follows Param.collection_format instead
    }.get(str(fmt), (None, None))


def is_json_media(media: str) -> bool:
    base = media.split(";", 1)[0].strip().lower()
    return base == "application/json" or base.endswith("+json") or base == "*/*"


def argument_name(wire: str, where: str, taken: set[str]) -> str:
    """A tool argument name for a parameter: the upstream name when it is a plain identifier, else made one
    ("X-Request-Id" → "X_Request_Id", "filter[name]" → "filter_name"); a clash with an earlier argument gets the
    location ("id" in the body beside a path "id" → "id_body")."""
    name = _ARG_CHARS.sub("_", wire).strip("_") or "value"
    if name[0].isdigit():
        name = "p_" + name
    name = name[:60]
    if name in taken:
        name = f"{name[:54]}_{where}"
        number = 2
        while name in taken:
            name = f"{name[:54]}_{where}{number}"
            number += 1
    taken.add(name)
    return name


def tool_name(operation_id: str | None, method: str, path: str) -> str:
    """A valid MCP tool name for an operation (see the module docs)."""
    raw = operation_id or f"{method.lower()}_{path}"
    name = _NAME_CHARS.sub("_", raw).strip("_.-")
    name = re.sub(r"_{2,}", "_", name) or f"{method.lower()}_root"
    if not name[0].isalpha():
        name = "op_" + name
    if len(name) > MAX_NAME:
        name = name[: MAX_NAME - 9].rstrip("_.-") + "_" + _digest(raw)
    return name


def category_tags(operation: Mapping[str, Any]) -> list[str]:
    """The tags of an operation that can name its category (not a generator's versioned ones)."""
    tags = [t for t in operation.get("tags") or [] if isinstance(t, str)]
    return [t for t in tags if not _VERSIONED_TAG.search(t)]


def merge_lonely_categories(
    tools: list[CatalogTool], categories: dict[str, str], from_paths: set[str]
) -> list[CatalogTool]:
    """Tools alone in a category made from their path go together under `other` (when there are two or more): a
    category of one tool costs a line in every TOOL_LIST and helps nobody find it. A tag's category is kept."""
    counts = Counter(t.category for t in tools)
    lonely = sorted(c for c in from_paths if counts[c] == 1 and c != OTHER_CATEGORY)
    if len(lonely) < 2:
        return tools
    for category in lonely:
        categories.pop(category, None)
    kinds = ", ".join(c.replace("_", " ") for c in lonely)
    categories[OTHER_CATEGORY] = trim(f"Other operations, one of each kind: {kinds}", MAX_CATEGORY_DESCRIPTION)
    return [replace(t, category=OTHER_CATEGORY) if t.category in lonely else t for t in tools]


def path_category(path: str, scope: tuple[str, ...] = ()) -> str:
    """The category of an operation no (usable) tag names: the first path segment after version prefixes (`v2`,
    `api`, `2010-04-01`) and the document's `scope` (see `path_scope`), without its extension, camel case made
    words: `/2010-04-01/Accounts/{AccountSid}/IncomingPhoneNumbers.json` → `incoming_phone_numbers`."""
    segments = _unversioned(path)
    if scope and tuple(segments[: len(scope)]) == scope and len(segments) > len(scope):
        segments = segments[len(scope) :]
    for segment in segments:
        if not segment.startswith("{") and not _VERSION.match(segment):
            return slug(_CAMEL.sub("_", segment.split(".", 1)[0]))
    return OTHER_CATEGORY


def path_scope(paths: list[str]) -> tuple[str, ...]:
    """The segments (after version prefixes) that more than half of a document's paths start with, ending at a
    parameter, with more after them: Twilio's `Accounts/{AccountSid}`, under which its resources are. Its first
    segment would put nearly every operation in one category."""
    rests = [_unversioned(p) for p in paths]
    scope: tuple[str, ...] = ()
    for length in range(2, max((len(r) for r in rests), default=0)):
        prefixes = Counter(tuple(r[:length]) for r in rests if len(r) > length)
        if not prefixes:
            break
        prefix, count = prefixes.most_common(1)[0]
        if count * 2 <= len(paths):
            break
        if prefix[-1].startswith("{"):
            scope = prefix
    return scope


def _unversioned(path: str) -> list[str]:
    segments = [s for s in path.partition("?")[0].split("/") if s]
    while segments and _VERSION.match(segments[0]):
        segments = segments[1:]
    return segments


def humanize(name: str) -> str:
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name).replace("_", " ").replace("-", " ").replace(".", " ")
    text = " ".join(words.split())
    return text[:1].upper() + text[1:]


def _pointer(*keys: str) -> str:
    """A JSON pointer in the entry document (`#/paths/~1x`), for messages."""
    return "#" + "".join("/" + key.replace("~", "~0").replace("/", "~1") for key in keys)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def validation_findings(path: Path, limit: int = 50) -> list[str]:
    """What `openapi-spec-validator` finds wrong with a document against the OpenAPI specification (up to
    `limit`). Real documents often have findings that harm no tool (OpenAI's repeated `required` entries, Slack's
    3.0-style `nullable` in a 2.0 document), so these are warnings unless `spec check --strict` says otherwise.

    The validator reads the document and every file it `$ref`s through the loader's own reader (`Documents`):
    local files inside the document's folder only, never the network, YAML aliases bounded. Left to itself it
    would fetch `http://` references and read any file a `$ref` names, and quote what it found there."""
    from openapi_spec_validator.validation import (
        OpenAPIV2SpecValidator,
        OpenAPIV30SpecValidator,
        OpenAPIV31SpecValidator,
    )

    file = path.resolve()
    documents = Documents(file.parent)
    root_uri = file.as_uri()
    try:
        document = _plain_json(documents.read(root_uri))
    except Problem as exc:
        return [f"the validator could not read the document: {exc}"]
    if not isinstance(document, dict):
        return ["the document is not a mapping"]
    version = str(document.get("openapi") or document.get("swagger") or "")
    validator = (
        OpenAPIV2SpecValidator
        if version.startswith("2")
        else OpenAPIV31SpecValidator
        if version.startswith("3.1")
        else OpenAPIV30SpecValidator
    )

    class Confined(validator):  # type: ignore[valid-type,misc]
        resolver_handlers = _ReadersOf(documents)

    findings: list[str] = []
    try:
        for error in Confined(document, base_uri=root_uri).iter_errors():
            where = "/".join(str(p) for p in error.absolute_path)
            findings.append((f"#/{where}: " if where else "") + trim(error.message, 300))
            if len(findings) >= limit:
                findings.append(f"(stopped after {limit})")
                break
    except Exception as exc:  # the validator itself fails on some real documents (DigitalOcean's $ref'd tags)
        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, Problem):  # a $ref the reader refused, wrapped
            cause = cause.__cause__ or cause.__context__
        if cause is not None:
            findings.append(f"the validator stopped at a $ref it may not read: {cause}")
        else:
            findings.append(f"the validator stopped early ({type(exc).__name__}: {trim(str(exc), 200)})")
    return findings


class _ReadersOf(Mapping[str, Any]):
    """The validator's `$ref` readers by URI scheme (jsonschema-path's `resolver_handlers`): one for every scheme,
    because for a scheme it has no reader for, jsonschema-path falls back to `urlopen`."""

    def __init__(self, documents: Documents) -> None:
        self._documents = documents

    def __getitem__(self, scheme: str) -> Any:
        return self._read

    def __contains__(self, scheme: object) -> bool:
        return True

    def __iter__(self) -> Any:
        return iter(("file",))

    def __len__(self) -> int:
        return 1

    def _read(self, uri: str) -> Any:
        return _plain_json(self._documents.read(uri))


def _plain_json(data: Any) -> Any:
    """Parsed YAML as the JSON the validator expects (`200:` keys as strings); a fresh copy each time, as the
    validator's own readers give it. Alias expansion is bounded when the file is read, so copying is safe."""
    return json.loads(json.dumps(data, default=str))


# --- the whole document ----------------------------------------------------------------------------------------


# A load allocates ~10^6 containers that all stay alive until it ends (parsed files, schemas and their frozen
# copies): the collector's passes cost ~0.2 of DigitalOcean's 1.5 CPU-s and freed almost nothing.
@collector_paused()
def load_openapi(
    path: str | Path,
    *,
    include: Filter | None = None,
    exclude: Filter | None = None,
    base_url: str | None = None,
) -> tuple[Catalog, OpenApiReport]:
    """The catalog of an OpenAPI document's operations; raises SpecError when the document cannot be used at
    all (unreadable, no operations left), naming the problem and where."""
    file = Path(path).resolve()
    source = str(path)
    try:
        if file.stat().st_size > MAX_FILE_BYTES:
            raise SpecError(source, [f"the document is larger than {MAX_FILE_BYTES // (1024 * 1024)} MB"])
        text = file.read_text(encoding="utf-8")
        note_read(file, text)  # a catalog loaded from it is reused only while this text is unchanged
        document = parse_text(text, file.name)
    except OSError as exc:
        raise SpecError(source, [f"cannot read the document: {exc.strerror or exc}"]) from None
    except Problem as exc:
        raise SpecError(source, [str(exc)]) from None
    return build_openapi_catalog(document, file, include=include, exclude=exclude, base_url=base_url, source=source)


@collector_paused()
def build_openapi_catalog(
    document: Any,
    file: Path,
    *,
    include: Filter | None = None,
    exclude: Filter | None = None,
    base_url: str | None = None,
    source: str | None = None,
) -> tuple[Catalog, OpenApiReport]:
    source = source or str(file)
    if not is_openapi(document):
        raise SpecError(source, ["not an OpenAPI document: it has no top-level `openapi` or `swagger` field"])
    version = str(document.get("openapi") or document.get("swagger"))
    if not re.match(r"^(2\.0|3\.[01])(\.\d+)?$", version):
        raise SpecError(source, [f"OpenAPI version {version!r} is not supported (2.0, 3.0.x and 3.1.x are)"])
    paths = document.get("paths")
    if isinstance(paths, dict) and any(str(key).startswith("x-") for key in paths):
        # The Paths Object's extensions (`x-codegen-contextRoot`) are no paths
        paths = {key: item for key, item in paths.items() if not str(key).startswith("x-")}
        document = {**document, "paths": paths}
    if not isinstance(paths, dict) or not paths:
        webhooks = document.get("webhooks") or document.get("x-webhooks")
        only = (
            f"; it describes only webhooks ({len(webhooks)}), the requests the API sends, which are not tools to call"
            if isinstance(webhooks, dict) and webhooks
            else ""
        )
        raise SpecError(source, [f"#/paths: the document has no operations (`paths` is missing or empty){only}"])
    # A path is appended to the server URL: one that does not start with `/` could continue its host or port
    # (`http://127.0.0.1:1810` + `{shard}/x`) and send calls, with the key, to a server the caller chooses.
    unrooted = [str(p) for p in paths if not str(p).startswith("/")]
    if unrooted:
        raise SpecError(
            source,
            [f"{_pointer('paths', p)}: the path {p!r} does not start with / (a path is appended to the server "
             "URL, so without one it could name another host)" for p in unrooted],
        )  # fmt: skip
    report = OpenApiReport(source=source, version=version)
    refs = Resolver(Documents(file.parent.resolve()), file.resolve().as_uri(), document)
    converter = _Converter(document, refs, report)
    include, exclude = include or Filter(), exclude or Filter()
    tools: list[CatalogTool] = []
    used: set[str] = set()
    categories = converter.categories()
    seen_tags: dict[str, None] = {}  # every operation's tags (or path category), for --include tag:NAME's help
    from_paths: set[str] = set()  # categories made from paths, not tags
    for path_key, raw_item in paths.items():
        at = refs.start.child("paths", path_key)
        try:
            item, item_at, _ = refs.deref(raw_item, at)
        except Problem as exc:
            report.skipped.append(Skipped(f"{path_key} (every method)", str(exc)))
            continue
        if not isinstance(item, dict):
            continue
        for method in METHODS:
            if method not in item:
                continue
            report.operations += 1
            label = f"{method.upper()} {path_key}"
            try:
                operation, op_at, _ = refs.deref(item[method], item_at.child(method))
                if not isinstance(operation, dict):
                    raise Problem(f"the operation must be an object ({op_at.where(refs.root_uri)})")
                op_id = _text(operation, "operationId") or None
                label += f" ({op_id})" if op_id else ""
                tags = [t for t in operation.get("tags") or [] if isinstance(t, str)]
                if not category_tags(operation):  # its category is its path's: `tag:calls` finds Twilio's calls
                    tags.append(path_category(str(path_key), converter.scope))
                seen_tags.update(dict.fromkeys(tags))
                name = tool_name(op_id, method.upper(), str(path_key))
                facts = {"name": name, "operation_id": op_id, "method": method.upper(), "path": str(path_key)}
                if not keep(include, exclude, **facts, tags=tags):
                    report.filtered += 1
                    continue
                if name.casefold() in used:
                    name = f"{name[: MAX_NAME - 9]}_{_digest(method.upper() + ' ' + str(path_key))}"
                shared = (item.get("parameters") or [], item_at.child("parameters"))
                tool, category = converter.tool(name, method.upper(), str(path_key), operation, shared, op_at)
            except _Unsupported as exc:
                report.skipped.append(Skipped(label, str(exc)))
                continue
            except Problem as exc:
                report.skipped.append(Skipped(label, str(exc)))
                continue
            used.add(tool.name.casefold())
            tools.append(tool)
            if category not in categories:
                named = category_tags(operation)
                categories[category] = named[0] if named else category
            if not category_tags(operation):
                from_paths.add(category)
    report.notes += converter.schemas.coerced.values()
    if converter.schemas.cut:
        report.notes.append(f"{converter.schemas.cut} schema parts cut (recursive, deeper than {MAX_DEPTH} or over "
                            f"{MAX_SCHEMA_NODES} nodes)")  # fmt: skip
    tools = merge_lonely_categories(tools, categories, from_paths)
    unknown = unknown_tag_help(include, exclude, seen_tags)
    if not tools:
        reasons = [f"{s.operation}: {s.reason}" for s in report.skipped[:20]]
        if report.filtered:
            left_out = f"{counted(report.filtered, 'operation')} filtered out"
            reasons[:0] = [f"the --include/--exclude filters leave no tool ({left_out})", *unknown]
        raise SpecError(source, ["no operation could become a tool", *reasons])
    report.notes += unknown
    api = converter.api(base_url)
    used_categories = {t.category for t in tools}
    return Catalog.build(api, {k: v for k, v in categories.items() if k in used_categories}, tuple(tools)), report
