"""The catalog: the common model every source builds, every tool as an MCP tool definition, with content hashes
and a version, and how to reach the API behind them.

A source (`progressive_mcp.sources`) builds it once per process and it never changes afterwards, so one
instance can be shared by all threads and requests. It imports no source. Example::

    catalog = load_catalog("spec/alphavantage.yaml")       # progressive_mcp.sources.load_catalog
    catalog.get("GLOBAL_QUOTE").input_schema["required"]   # ['symbol']
"""

from __future__ import annotations

import difflib
import hashlib
import json
import logging
import re
import threading
from collections.abc import Callable, Collection, Hashable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, TypeVar, cast

from progressive_mcp.errors import UnknownTool
from progressive_mcp.search.vocabulary import EMPTY, Vocabulary

T = TypeVar("T")
_log = logging.getLogger(__name__)

TOOL_ANNOTATIONS: Mapping[str, bool] = MappingProxyType(
    {"readOnlyHint": True, "destructiveHint": False, "openWorldHint": True}
)
ANNOTATION_NAMES = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")  # MCP's order


def _write_hints(*, destructive: bool, idempotent: bool) -> Mapping[str, bool]:
    # Both hints said outright: MCP reads a missing destructiveHint as true, which would make every POST look
    # like a delete to a client that asks before destructive calls.
    return MappingProxyType(
        {"readOnlyHint": False, "destructiveHint": destructive, "idempotentHint": idempotent, "openWorldHint": True}
    )


# What an upstream call's HTTP method says about it. MCP reads destructiveHint and idempotentHint only when
# readOnlyHint is false, so the safe methods keep TOOL_ANNOTATIONS as they are (no idempotentHint): the
# definitions, and so the token figures, of a GET-only catalog do not change. POST is taken to add (a new
# scrobble, a new tag), PUT and DELETE to replace or remove what is there, which repeating does not change.
METHOD_ANNOTATIONS: Mapping[str, Mapping[str, bool]] = MappingProxyType(
    {
        "GET": TOOL_ANNOTATIONS,
        "HEAD": TOOL_ANNOTATIONS,
        "POST": _write_hints(destructive=False, idempotent=False),
        "PUT": _write_hints(destructive=True, idempotent=True),
        "PATCH": _write_hints(destructive=True, idempotent=False),
        "DELETE": _write_hints(destructive=True, idempotent=True),
    }
)


def method_annotations(method: str, given: Mapping[str, bool] | None = None) -> Mapping[str, bool]:
    """A tool's MCP annotations: those its HTTP method implies (METHOD_ANNOTATIONS; an unknown method counts as
    POST), each replaced by a value the source `given` explicitly. In MCP's order."""
    implied = METHOD_ANNOTATIONS.get(method.upper(), METHOD_ANNOTATIONS["POST"])
    if not given:
        return implied
    merged = {**implied, **given}
    if merged == dict(TOOL_ANNOTATIONS):
        return TOOL_ANNOTATIONS
    return MappingProxyType({name: merged[name] for name in ANNOTATION_NAMES if name in merged})


PREMIUM_NOTE = " Premium: needs a paid upstream plan."


Scalar = str | int | float | bool


@dataclass(frozen=True, slots=True)
class Dispatch:
    """A query-dispatched API (Alpha Vantage's `?function=`): the query parameter that carries the tool's name."""

    name: str
    in_: Literal["query"] = "query"


@dataclass(frozen=True, slots=True)
class Auth:
    """How the upstream key is sent, and the environment variable a single-user server reads it from.

    `scheme`: "api_key" sends the key as it is (with `prefix`) in the query parameter, header or cookie `name`;
    "bearer" sends `Authorization: Bearer <key>`; "basic" takes the key as `user:password` and sends
    `Authorization: Basic <base64>`. `key_format` (PMCP_UPSTREAM_KEY_FORMAT, see progressive_mcp.upstream_auth)
    shapes the key before the scheme sends it: `Token token={key}` sends `Token token=<key>`.
    """

    in_: Literal["query", "header", "cookie"]
    name: str  # the query parameter, header or cookie carrying it
    env: str
    prefix: str = ""  # put before the key, e.g. "Bearer " in an Authorization header
    scheme: Literal["api_key", "bearer", "basic"] = "api_key"
    key_format: str | None = None  # the value sent, `{key}` replaced by the key (in place of `prefix` + key)
    scheme_name: str | None = None  # the OpenAPI document's securityScheme this comes from
    # A bearer scheme of a document that offers HTTP Basic too (Stripe): a key given as user:password goes as Basic.
    pair_as_basic: bool = False


@dataclass(frozen=True, slots=True)
class Hints:
    """Advice added to upstream errors, in the API's own terms (None: generic advice)."""

    no_data: str | None = None
    invalid_request: str | None = None


@dataclass(frozen=True, slots=True)
class Api:
    """The API behind a catalog: its name, where it is, how calls are routed and authenticated, and how it
    reports errors in an HTTP-200 body."""

    name: str
    title: str
    base_url: str
    description: str = ""
    docs_url: str | None = None
    dispatch: Dispatch | None = None
    auth: Auth | None = None
    default_cache_ttl_s: int = 0
    # Every scheme the document declares that can be sent, for PMCP_UPSTREAM_AUTH to choose from at run time.
    auth_options: tuple[Auth, ...] = ()
    error_fields: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    error_message_field: str | None = None
    hints: Hints = field(default_factory=Hints)


# Headers an argument may never set: the credentials (whatever the API's own auth header is called, see
# `calls.rest.reserved_headers`), and the ones that frame the request, which httpx writes itself. A source offers
# no argument for them (an OpenAPI header parameter named so), and a REST call drops any that would land there.
FRAMING_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "cookie",
        "host",
        "content-length",
        "content-type",
        "transfer-encoding",
        "connection",
    }
)


@dataclass(frozen=True, slots=True)
class Param:
    """One argument of a tool: what becomes its JSON Schema property, and what the upstream call needs."""

    name: str
    type: str  # JSON type: string, integer, number or boolean
    required: bool
    description: str = ""
    enum: tuple[Scalar, ...] | None = None
    default: Scalar | None = None
    pattern: str | None = None
    format: str | None = None
    minimum: int | float | None = None
    maximum: int | float | None = None
    examples: tuple[Scalar, ...] | None = None
    premium_values: tuple[Scalar, ...] = ()
    # Where the value goes in the upstream request: a query parameter, a path segment, a header, a cookie, or
    # the JSON body (the whole body when the argument is the body, else one of its members).
    location: Literal["query", "path", "header", "cookie", "body"] = "query"
    wire_name: str | None = None  # the upstream's name, when the argument's differs (a header "X-Id" → "X_Id")
    style: str | None = None  # OpenAPI serialisation of arrays and objects (form, spaceDelimited, deepObject...)
    explode: bool | None = None
    schema: Mapping[str, Any] | None = None  # the whole JSON Schema, for values that are not plain scalars
    deprecated: bool = False
    # A body member's Encoding Object (form and multipart bodies): the part's or value's media type, and the
    # headers a multipart part carries (their fixed values). Swagger 2.0's collectionFormat (csv, ssv, tsv, pipes,
    # multi) of an array, which then decides its serialisation instead of style and explode.
    content_type: str | None = None
    part_headers: Mapping[str, str] | None = None
    collection_format: str | None = None

    @property
    def upstream_name(self) -> str:
        return self.wire_name or self.name


@dataclass(frozen=True, slots=True)
class Operation:
    """A REST operation: the method and path template an upstream call is routed by (None for a query-dispatched
    API, whose calls name the tool in a query parameter), and how the body is sent."""

    method: str
    path: str  # with {name} placeholders for the path parameters
    operation_id: str | None = None
    body: Literal["whole", "members"] | None = None  # the `body` argument is the body, or arguments are its members
    body_type: str = "application/json"  # or application/x-www-form-urlencoded


@dataclass(frozen=True, slots=True)
class CatalogTool:
    """One tool: what the spec says, and its MCP definition (`input_schema`, `content_hash`)."""

    name: str
    title: str
    category: str
    summary: str
    description: str
    params: tuple[Param, ...]
    input_schema: Mapping[str, Any]
    keywords: tuple[str, ...]
    examples: tuple[str, ...]
    cache_ttl_s: int
    premium: bool
    content_hash: str = ""  # "": computed from the tool (`content_hash`); a gateway tool brings its server's
    require_any: tuple[tuple[str, ...], ...] = ()
    # JSON Schema 2020-12 of the data a JSON answer holds (shared parts under $defs), or None if the spec has none.
    output_schema: Mapping[str, Any] | None = None
    method: str = "GET"  # of the upstream call (query-dispatched APIs may POST their writes)
    operation: Operation | None = None  # a REST operation's route (None: the API's dispatch parameter names the tool)
    fixed: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))  # constant query parameters
    # MCP hints: read-only, destructive, idempotent, open-world
    annotations: Mapping[str, bool] = field(default_factory=lambda: TOOL_ANNOTATIONS)
    # A tool of an MCP server behind the gateway: the server's name in the servers file, and its name for the tool.
    server: str | None = None
    server_tool: str | None = None

    def __post_init__(self) -> None:
        if not self.content_hash:
            object.__setattr__(self, "content_hash", content_hash(self))

    def definition(self) -> dict[str, Any]:
        """The MCP tool definition (wire shape, camelCase) as plain JSON data."""
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "inputSchema": _thaw(self.input_schema),
            "annotations": dict(self.annotations),
        }

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)


@dataclass(frozen=True)
class Catalog:
    """All tools of one API; immutable after construction and safe to share across threads."""

    api: Api
    categories: Mapping[str, str]
    tools: tuple[CatalogTool, ...]
    version: str
    _by_name: Mapping[str, CatalogTool] = field(repr=False)
    # What the catalog adds to English for search (a spec's `search.vocabulary`); empty for most catalogs.
    vocabulary: Vocabulary = field(default=EMPTY, repr=False, compare=False)
    # Case-folded name → tool, for names no other tool shares once case is ignored.
    _by_folded_name: Mapping[str, CatalogTool] = field(default_factory=dict, repr=False, compare=False)
    _validators: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    _validators_lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    _derived: dict[Hashable, Any] = field(default_factory=dict, repr=False, compare=False)  # see `derived`

    @classmethod
    def build(
        cls,
        api: Api,
        categories: Mapping[str, str],
        tools: tuple[CatalogTool, ...],
        vocabulary: Vocabulary = EMPTY,
    ) -> Catalog:
        """A catalog of `tools` (what a source has made), with its lookups and version."""
        folded: dict[str, list[CatalogTool]] = {}
        for tool in tools:
            folded.setdefault(tool.name.casefold(), []).append(tool)
        return cls(
            api=api,
            categories=MappingProxyType(dict(categories)),
            tools=tools,
            version=catalog_version(tools),
            _by_name=MappingProxyType({t.name: t for t in tools}),
            _by_folded_name=MappingProxyType({k: v[0] for k, v in folded.items() if len(v) == 1}),
            vocabulary=vocabulary,
        )

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __len__(self) -> int:
        return len(self.tools)

    def get(self, name: str) -> CatalogTool:
        """The tool called `name`, ignoring case ("global_quote", "artist.getinfo"); raises UnknownTool
        naming the closest real tools."""
        tool = self.find(name)
        if tool is None:
            raise UnknownTool(name, self.suggest(name))
        return tool

    def find(self, name: str) -> CatalogTool | None:
        """The tool called `name`, ignoring case, or None (no suggestions computed: `get` and callers with their
        own set of names make those)."""
        tool = self._by_name.get(name)
        return tool if tool is not None else self._by_folded_name.get(name.strip().casefold())

    def suggest(self, name: str, limit: int = 3, among: Collection[str] | None = None) -> list[str]:
        """Real tool names closest to a wrong one (spelling first, then shared words), `among` some names
        (default: the catalog's). Case and the separators `.` `_` `-` `/` and space do not count."""
        return closest_names(name, list(self._by_name) if among is None else list(among), limit)

    def in_categories(self, categories: frozenset[str] | None) -> tuple[CatalogTool, ...]:
        if not categories:
            return self.tools
        return tuple(t for t in self.tools if t.category in categories)

    def validator(self, name: str) -> Any:
        """The compiled jsonschema-rs validator for a tool, built on first use and kept."""
        validator = self._validators.get(name)
        if validator is None:
            tool = self.get(name)  # keyed by the real name, so "global_quote" shares GLOBAL_QUOTE's validator
            with self._validators_lock:
                validator = self._validators.get(tool.name)
                if validator is None:
                    validator = readable_validator(tool.name, _thaw(tool.input_schema))
                    self._validators[tool.name] = validator
        return validator

    def derived(self, key: Hashable, make: Callable[[], T]) -> T:
        """What `make` builds from this catalog alone (a search index), built by the first caller of `key` and kept
        for the others: the catalog never changes, so neither does anything made of it alone."""
        try:
            return cast(T, self._derived[key])
        except KeyError:
            made = make()
            with self._validators_lock:
                return cast(T, self._derived.setdefault(key, made))


MAX_UNREADABLE = 50  # keywords of one schema left out of validation before the whole schema is


def readable_validator(name: str, schema: Any) -> Any:
    """The jsonschema-rs validator of a tool's input schema (imported on first call: discovery alone never needs
    it). A keyword the validator cannot read (a `pattern` in a regex dialect it lacks, as Linode's `\\A...\\Z`, or
    a `minimum` written as text) would make every call of the tool an internal error; it is left out of
    validation instead, with a warning, and the upstream judges that part. The schema the agent reads keeps it."""
    import jsonschema_rs

    for _ in range(MAX_UNREADABLE):
        try:
            return jsonschema_rs.Draft202012Validator(schema)
        except jsonschema_rs.ValidationError as error:
            path = list(error.instance_path)
            if not path:
                break
            *parents, keyword = path
            holder = schema
            for step in parents:
                holder = holder[step]
            if not isinstance(holder, dict) or keyword not in holder:
                break
            del holder[keyword]
            where = ".".join(str(step) for step in parents) or "its root"
            _log.warning(
                "%s: %s at %s of its input schema is left out of validation: %s", name, keyword, where, error.message
            )
    _log.warning("%s: the validator cannot read its input schema; its arguments are sent unchecked", name)
    return jsonschema_rs.Draft202012Validator({})


SPELLING_CUTOFF = 0.6  # difflib's own default for get_close_matches
SPELLING_MARGIN = 0.12  # "TOOL_SERACH": TOOL_SEARCH (0.91) alone, not TOOL_GET (0.63) too
CLEAR_TYPO = 0.9  # a name this close is the one meant: nothing else is suggested beside it
_SEPARATORS = re.compile(r"[\s._/-]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _name_key(name: str) -> str:
    """A tool name with case and separators ignored: "artist.getInfo", "ARTIST_GETINFO" → "artist_getinfo"."""
    return _SEPARATORS.sub("_", name.strip()).strip("_").casefold()


def _name_words(name: str) -> set[str]:
    """The words of a tool name: "artist.getTopTracks" → {artist, get, top, tracks}; "TIME_SERIES" → {time, series}."""
    return {w for w in _SEPARATORS.sub("_", _CAMEL.sub("_", name.strip())).casefold().split("_") if len(w) > 2}


def closest_names(wanted: str, names: list[str], limit: int = 3) -> list[str]:
    """The names closest to a wrong one: the same name but for case and separators first, then close
    spellings (those nearly as close as the closest), then, unless one name is plainly meant, the names
    sharing the most words."""
    keys: dict[str, list[str]] = {}
    for name in names:
        keys.setdefault(_name_key(name), []).append(name)
    key = _name_key(wanted)
    close = list(keys.get(key, []))
    if not close:
        matcher = difflib.SequenceMatcher(b=key)
        ratios: dict[str, float] = {}
        for candidate in keys:
            matcher.set_seq1(candidate)
            if matcher.real_quick_ratio() >= SPELLING_CUTOFF and matcher.quick_ratio() >= SPELLING_CUTOFF:
                ratio = matcher.ratio()
                if ratio >= SPELLING_CUTOFF:
                    ratios[candidate] = ratio
        best = max(ratios.values(), default=0.0)
        for candidate in sorted(ratios, key=lambda c: -ratios[c]):
            if ratios[candidate] >= best - SPELLING_MARGIN:
                close += keys[candidate]
        if best < CLEAR_TYPO:  # not plainly a typo of one name: names sharing its words may be meant too
            words = _name_words(wanted)
            overlap = {n: len(words & _name_words(n)) for n in names if n not in close}
            close += sorted((n for n, shared in overlap.items() if shared), key=lambda n: (-overlap[n], len(n)))
    return close[:limit]


def less_data_options(tool: CatalogTool) -> list[str]:
    """Arguments of this tool that ask for less data (a smaller page, a compact size, a coarser interval)."""
    ways = []
    for param in tool.params:
        values = [v for v in param.enum or () if isinstance(v, str)]
        if "compact" in values:
            ways.append(f"{param.name}=compact")
        elif param.name in ("limit", "page_size", "per_page", "count") and param.type == "integer":
            ways.append(f"a smaller {param.name}")
        elif param.name == "interval" and values:
            ways.append("a coarser interval")
    return ways


def catalog_version(tools: tuple[CatalogTool, ...]) -> str:
    """A short digest over every tool's content hash: changes when any tool changes."""
    digest = hashlib.sha256()
    for tool in sorted(tools, key=lambda t: t.name):
        digest.update(f"{tool.name}:{tool.content_hash}\n".encode())
    return digest.hexdigest()[:16]


def content_hash(tool: CatalogTool) -> str:
    """The SHA-256 (hex) of everything an agent is shown of a tool and everything a call to it does.

    Shown: name, title, category, summary, description, input and output schemas (code mode's typed stubs follow
    the output schema) and annotations. Done: the upstream method, the REST route, the fixed parameters and where
    each argument goes. Any of these changing is a change a client holding the tool's schema should notice, so
    the hash moves, and with it the catalog version. Search aids (keywords, examples) and cache lifetimes are left
    out: they change no definition and no call.
    """
    operation = tool.operation
    record = {
        "name": tool.name,
        "title": tool.title,
        "category": tool.category,
        "summary": tool.summary,
        "description": tool.description,
        "inputSchema": tool.input_schema,
        "outputSchema": tool.output_schema,
        "annotations": tool.annotations,
        "method": tool.method,
        "route": None
        if operation is None
        else [operation.method, operation.path, operation.operation_id, operation.body, operation.body_type],
        "fixed": tool.fixed,
        "wire": [_wire(p) for p in tool.params],
    }
    return hashlib.sha256(_canonical(record).encode()).hexdigest()


def _wire(param: Param) -> list[Any]:
    """Where and how an argument is sent; the encoding fields only when set, so tools without them keep their hash."""
    wire: list[Any] = [param.name, param.location, param.wire_name, param.style, param.explode]
    if param.content_type is not None or param.part_headers or param.collection_format is not None:
        wire += [param.content_type, param.part_headers, param.collection_format]
    return wire


def _canonical(value: Any) -> str:
    """Sorted, compact JSON of plain or frozen catalog data (a frozen mapping is written as the dict it was)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=dict)


def input_schema(params: tuple[Param, ...], require_any: list[list[str]]) -> dict[str, Any]:
    """JSON Schema 2020-12 (the MCP default dialect) for a tool's arguments."""
    properties: dict[str, Any] = {}
    prop: dict[str, Any]
    for p in params:
        if p.schema is not None:  # a full schema (arrays, objects, a request body): taken as it is
            prop = _thaw(p.schema)
            if p.description and "description" not in prop:
                prop["description"] = " ".join(p.description.split())
            if p.deprecated:
                prop["deprecated"] = True
            properties[p.name] = prop
            continue
        prop = {"type": p.type}
        if p.description:
            prop["description"] = " ".join(p.description.split())
        if p.enum is not None:
            prop["enum"] = list(p.enum)
        if p.default is not None:
            prop["default"] = p.default
        if p.pattern is not None:
            prop["pattern"] = p.pattern
        if p.format is not None:
            prop["format"] = p.format
        if p.minimum is not None:
            prop["minimum"] = p.minimum
        if p.maximum is not None:
            prop["maximum"] = p.maximum
        if p.examples is not None:
            prop["examples"] = list(p.examples)
        if p.deprecated:
            prop["deprecated"] = True
        properties[p.name] = prop
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    required = [p.name for p in params if p.required]
    if required:
        schema["required"] = required
    if require_any:
        groups = [{"anyOf": [{"required": [name]} for name in group]} for group in require_any]
        if len(groups) == 1:
            schema.update(groups[0])
        else:
            schema["allOf"] = groups
    schema["additionalProperties"] = False
    return schema


def _freeze(value: Any) -> Any:
    if isinstance(value, MappingProxyType):  # already frozen (a shared output's)
        return value
    if isinstance(value, dict):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    """A plain, JSON-ready copy of frozen catalog data (callers may change it freely)."""
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value
