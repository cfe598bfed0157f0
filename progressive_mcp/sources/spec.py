"""The spec file format: pydantic models that both validate a spec and generate its JSON Schema.

A spec describes one HTTP API: how to reach it, its categories, shared parameter definitions
and its tools. Example::

    spec = load_spec("spec/alphavantage.yaml")   # raises SpecError naming tool, field and line
    print(len(spec.tools))
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import date
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, Literal, cast

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from progressive_mcp.catalog import (
    PREMIUM_NOTE,
    Api,
    Auth,
    Catalog,
    CatalogTool,
    Dispatch,
    Hints,
    Param,
    _freeze,
    _thaw,
    input_schema,
    method_annotations,
)
from progressive_mcp.errors import SpecError
from progressive_mcp.search.vocabulary import EMPTY, Vocabulary
from progressive_mcp.sources.bounded_yaml import AliasExpansionError, BoundedAliases
from progressive_mcp.sources.loaded import note_read

ParamType = Literal["string", "integer", "number", "boolean"]
HttpMethod = Literal["GET", "POST", "PUT", "PATCH", "DELETE"]
Scalar = str | int | float | bool
TOOL_NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$"
# Sizes no real spec comes near (the bundled one's largest: a 345-character description, 12 parameters, 33
# keywords, 9 enum values): they bound what a hostile or broken file can make the server hold and send.
MAX_SPEC_CHARS = 10 * 1024 * 1024
MAX_NESTING = 32  # the format itself needs 6 levels
MAX_EXPANDED_VALUES = 1_000_000  # values once YAML aliases are expanded (the bundled spec: ~16,000)
MAX_TOOLS = 10_000
MAX_PARAMS = 64  # what one call may pass (progressive_mcp.calls.arguments.MAX_ARGUMENTS)
MAX_DESCRIPTION = 4_000
MAX_SHORT_TEXT = 200
MAX_LIST = 1_000
OUTPUT_NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_]{0,63}$"
# The JSON Schema keywords an output description may use: enough to describe API answers precisely, few enough
# that each maps to a Python type (code mode's stubs). `use` names a shared output.
OUTPUT_KEYWORDS = frozenset(
    {"type", "properties", "required", "additionalProperties", "items", "enum", "anyOf", "description", "title", "use"}
)
OUTPUT_TYPES = frozenset({"object", "array", "string", "number", "integer", "boolean", "null"})
PARAM_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"
# A fixed query parameter is never an argument, so its name may be any plain query name (`v`, `api-version`, `x.y`).
FIXED_NAME_PATTERN = r"^[A-Za-z0-9_.\[\]-]{1,64}$"
FixedParams = dict[Annotated[str, Field(pattern=FIXED_NAME_PATTERN)], Annotated[str, Field(max_length=MAX_SHORT_TEXT)]]
AUTHORIZATION = "Authorization"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class ParamSpec(_Model):
    """One parameter: either defined inline, or `use:` a shared definition and override some fields."""

    use: str | None = Field(None, description="Name of a shared parameter to start from (see shared_params).")
    type: ParamType | None = Field(None, description="JSON type of the value.")
    required: bool | None = Field(None, description="Whether the caller must give it (default false).")
    description: str | None = Field(
        None, max_length=MAX_DESCRIPTION, description="What the value means, for the model."
    )
    enum: list[Annotated[str, Field(max_length=MAX_SHORT_TEXT)] | int | float | bool] | None = Field(
        None, max_length=MAX_LIST, description="The only values allowed."
    )
    default: Scalar | None = Field(None, description="The value the upstream assumes when it is omitted.")
    pattern: str | None = Field(
        None, max_length=MAX_SHORT_TEXT, description="Regular expression a string value must match."
    )
    format: str | None = Field(None, description="JSON Schema format hint, e.g. date or date-time.")
    minimum: int | float | None = None
    maximum: int | float | None = None
    examples: list[Scalar] | None = Field(None, max_length=20, description="Typical values, shown to the model.")
    premium_values: list[Scalar] | None = Field(
        None, description="Values that need a paid upstream plan (answers to them are never shared between callers)."
    )


class DispatchSpec(_Model):
    """How the operation is chosen upstream: the tool name goes in a query parameter."""

    in_: Literal["query"] = Field("query", alias="in")
    name: str = Field(description="Query parameter that carries the tool (function) name.")


class AuthSpec(_Model):
    """How the upstream key is passed, and which environment variable holds it."""

    # What _auth_problems checks, for editors too: an api_key names where it goes; bearer and basic use a header.
    model_config = ConfigDict(
        json_schema_extra={
            "if": {"properties": {"scheme": {"const": "api_key"}}},
            "then": {"required": ["name"]},
            "else": {"properties": {"in": {"const": "header"}, "prefix": {"const": ""}}},
        }
    )

    scheme: Literal["api_key", "bearer", "basic"] = Field(
        "api_key",
        description="api_key: the key as it is (after `prefix`) in the query parameter, header or cookie `name`; "
        "bearer: an `Authorization: Bearer <key>` header; basic: the key is `user:password`, sent as an "
        "`Authorization: Basic` header. bearer and basic need no `in`, `name` or `prefix`.",
    )
    in_: Literal["query", "header", "cookie"] | None = Field(
        None, alias="in", description="Where an api_key goes (default query); bearer and basic use a header."
    )
    name: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_SHORT_TEXT,
        description="Query parameter, header or cookie carrying an api_key (required for it); "
        "bearer and basic use Authorization.",
    )
    env: str = Field(description="Environment variable the key is read from.")
    prefix: str = Field("", description="Text put before an api_key (e.g. 'Token ' in a header).")


class HintsSpec(_Model):
    """Advice added to upstream errors, in this API's terms (without it, the advice is generic)."""

    no_data: str | None = Field(
        None,
        max_length=1_000,
        description="Added when the upstream answers with no data, e.g. how to find a valid identifier.",
    )
    invalid_request: str | None = Field(
        None,
        max_length=1_000,
        description="Added when the upstream rejects a request's arguments (an error_fields error).",
    )


class ApiSpec(_Model):
    """The upstream API: identity, address, dispatch, auth and how it reports errors."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_-]*$")
    title: str = Field(max_length=MAX_SHORT_TEXT)
    description: str = Field("", max_length=MAX_DESCRIPTION)
    base_url: str = Field(pattern=r"^https?://\S+$", max_length=2_000)
    docs_url: str | None = None
    dispatch: DispatchSpec
    auth: AuthSpec | None = None
    default_cache_ttl_s: int = Field(0, ge=0)
    error_fields: dict[str, Literal["invalid_request", "notice"]] = Field(
        default_factory=dict,
        description="Keys of an HTTP-200 JSON body whose presence means the call failed (whatever the value), "
        "and what kind of failure.",
    )
    error_message_field: str | None = Field(
        None,
        description="Key of an error body that holds the message, e.g. 'message' for "
        '{"error": 6, "message": "The artist you supplied could not be found"} (default: the error field\'s value).',
    )
    hints: HintsSpec = Field(default_factory=lambda: HintsSpec.model_validate({}))
    default_method: HttpMethod = Field("GET", description="The HTTP method of tools that name none.")
    fixed: FixedParams = Field(
        default_factory=dict,
        max_length=MAX_PARAMS,
        description="Query parameters sent with every call, with constant values that are not arguments "
        "(e.g. format: json); a tool's `fixed` adds to them or replaces a value.",
    )


class AnnotationsSpec(BaseModel):
    """MCP tool annotations: hints to clients about what a call does, under MCP's own names. Each one given
    replaces the value the tool's method implies."""

    # MCP's names only (no snake_case alias): a spec says exactly what a client will read.
    model_config = ConfigDict(extra="forbid", frozen=True)

    readOnlyHint: bool | None = Field(None, description="The call changes nothing upstream.")
    destructiveHint: bool | None = Field(
        None, description="The call may remove or overwrite data, not only add (when not read-only)."
    )
    idempotentHint: bool | None = Field(
        None, description="Repeating the call with the same arguments changes nothing more (when not read-only)."
    )
    openWorldHint: bool | None = Field(
        None, description="The call reaches beyond a closed set of data (an upstream API: true)."
    )

    def given(self) -> dict[str, bool]:
        """The hints the spec states, by MCP name."""
        return self.model_dump(exclude_none=True)


class ToolSpec(_Model):
    """One upstream operation, exposed as one MCP tool."""

    name: str = Field(pattern=TOOL_NAME_PATTERN, description="The upstream function name.")
    title: str | None = Field(None, max_length=MAX_SHORT_TEXT, description="Short human-readable name.")
    category: str
    summary: str = Field(min_length=1, max_length=120, description="One line: what the tool returns.")
    description: str = Field(
        min_length=1, max_length=MAX_DESCRIPTION, description="When to use it, what comes back, what to watch for."
    )
    params: dict[Annotated[str, Field(pattern=PARAM_NAME_PATTERN)], ParamSpec] = Field(
        default_factory=dict, max_length=MAX_PARAMS
    )
    require_any: list[list[str]] = Field(
        default_factory=list, description="Groups of parameters of which at least one must be given."
    )
    keywords: list[Annotated[str, Field(max_length=MAX_SHORT_TEXT)]] = Field(
        default_factory=list, max_length=MAX_LIST, description="Extra search terms."
    )
    examples: list[Annotated[str, Field(max_length=500)]] = Field(
        default_factory=list, max_length=100, description="Questions a user might ask (for search)."
    )
    cache_ttl_s: int | None = Field(None, ge=0, description="How long an answer stays fresh, in seconds.")
    premium: bool = Field(False, description="Needs a paid upstream plan.")
    method: HttpMethod | None = Field(
        None,
        description="HTTP method of the upstream call (default: api.default_method, GET). It implies the "
        "tool's MCP annotations: GET read-only; POST adds; PUT and DELETE replace or remove, idempotently; "
        "PATCH changes.",
    )
    fixed: FixedParams = Field(
        default_factory=dict,
        max_length=MAX_PARAMS,
        description="Constant query parameters of this tool's calls, added to api.fixed (a name in both: this value).",
    )
    annotations: AnnotationsSpec | None = Field(
        None, description="MCP annotations that replace those the method implies, one by one."
    )
    output: dict[str, Any] | None = Field(
        None,
        description="JSON Schema of the data a call returns (JSON answers), or {use: <a shared_outputs name>}; "
        "the subset of keywords in OUTPUT_KEYWORDS. Code mode's typed stubs are made from it.",
    )


# --- the search vocabulary (a file the spec names under `search.vocabulary`) ------------------------------------
Word = Annotated[str, Field(min_length=1, max_length=MAX_SHORT_TEXT)]
Words = Annotated[list[Word], Field(max_length=10 * MAX_LIST)]
Factor = Annotated[float, Field(gt=0, le=1)]


class HintSpec(_Model):
    """Query words that lean towards some tools without naming them: each brings in `terms` at `weight`."""

    words: Words = Field(default_factory=list)
    weight: Factor
    terms: dict[Word, Factor] = Field(description="Catalog words (term -> factor) the hint looks for.")
    label: Word | None = None
    years: bool = Field(default=False, description="A year (1900-2099) counts as one of the words.")


class EntitiesSpec(_Model):
    """Names of things to look up (companies, and their codes such as tickers): a light concept of `weight`."""

    weight: Factor = 0.2
    terms: dict[Word, Factor] = Field(default_factory=dict, description="What a bare name most often wants.")
    words: Words = Field(default_factory=list)
    codes: Words = Field(default_factory=list, description="Short codes (tickers); all-caps in a query.")


class TimeSpec(_Model):
    now: HintSpec | None = None
    past: HintSpec | None = None
    tense: dict[Word, Literal[1, -1]] = Field(
        default_factory=dict, description="Words of tool names for live (1) or past (-1) data."
    )


class PairSideSpec(_Model):
    weight: Factor
    label: Word | None = None
    says: Words = Field(default_factory=list, description="Words a query naming two of the kind means.")


class PairsSpec(_Model):
    """Named things of one kind (currencies) that, two in a query, ask for the relation between them."""

    one: PairSideSpec
    two: PairSideSpec
    terms: dict[Word, Factor]
    joined: bool = Field(default=False, description="Two 3-letter codes written as one word (EURUSD).")
    codes: Words = Field(default_factory=list)
    words: Words = Field(default_factory=list)
    weak: Words = Field(default_factory=list, description="Count only beside another of the kind.")


class ScopeSpec(_Model):
    """Tools whose summary matches `tools` cover one place only; `outside` places are not answered by them."""

    tools: str = Field(max_length=MAX_SHORT_TEXT, description="A regular expression over tool summaries.")
    term: Word
    weight: Factor
    message: str = Field(max_length=MAX_SHORT_TEXT)
    inside: Words = Field(default_factory=list)
    outside: Words = Field(default_factory=list)

    @field_validator("tools")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a regular expression: {exc}") from None
        return value


class VocabularySpec(_Model):
    """What a catalog adds to English for TOOL_SEARCH; every part is optional (docs/search.md)."""

    filler: Words = Field(default_factory=list, description="Words dropped like stopwords.")
    word_forms: dict[Word, Word] = Field(default_factory=dict, description="Spellings read as one form.")
    phrases: dict[Word, Word] = Field(default_factory=dict, description="Phrases of 2-4 words read as one term.")
    abbreviations: dict[Word, Word] = Field(default_factory=dict, description="Spelled out before words are split.")
    signed_words: Words = Field(default_factory=list, description="'+DI': a sign before these reads as plus/minus.")
    spacing: dict[Word, Word] = Field(default_factory=dict, description="day -> daily, for 'each day', 'day by day'.")
    synonyms: dict[Word, Words] = Field(default_factory=dict)
    entities: EntitiesSpec | None = None
    time: TimeSpec | None = None
    pairs: PairsSpec | None = None
    stands_for: dict[Word, Words] = Field(default_factory=dict, description="term -> words that stand for it.")
    scope: ScopeSpec | None = None
    out_of_scope: Words = Field(default_factory=list, description="Subjects the catalog lacks.")
    unknown_weight: float | None = Field(
        None,
        ge=0,
        le=2,
        description="How much a query word no tool knows counts against a match, as a share of a rare word's "
        "weight (the engine's default suits catalogs whose texts were not written with searchers' words in mind).",
    )


class SearchSpec(_Model):
    vocabulary: str | VocabularySpec = Field(
        description="A vocabulary file (YAML or JSON, relative to the spec) or the vocabulary itself."
    )


class Spec(_Model):
    """A whole spec file."""

    spec_version: Literal[1] = 1
    api: ApiSpec
    categories: dict[
        Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,63}$")], Annotated[str, Field(max_length=1_000)]
    ] = Field(max_length=MAX_LIST)
    shared_params: dict[Annotated[str, Field(pattern=PARAM_NAME_PATTERN)], ParamSpec] = Field(
        default_factory=dict, max_length=MAX_LIST
    )
    shared_outputs: dict[Annotated[str, Field(pattern=OUTPUT_NAME_PATTERN)], dict[str, Any]] = Field(
        default_factory=dict,
        max_length=MAX_LIST,
        description="Output schemas (or parts of them) that tools' `output` reuse with {use: name}.",
    )
    tools: list[ToolSpec] = Field(
        min_length=1, max_length=MAX_TOOLS, description="The operations; a catalog needs at least one."
    )
    search: SearchSpec | None = Field(default=None, description="What TOOL_SEARCH should know of this API's words.")


def spec_json_schema() -> dict[str, Any]:
    """The JSON Schema of the spec format, as written to spec/spec.schema.json."""
    schema = Spec.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "progressive-mcp spec"
    return schema


def spec_json_schema_text() -> str:
    return json.dumps(spec_json_schema(), indent=2, sort_keys=True) + "\n"


# --- loading -------------------------------------------------------------------------------------


def load_spec(path: str | Path) -> Spec:
    """Read, parse and validate a spec file; every problem is reported at once in a SpecError."""
    path = Path(path)
    return parse_spec(_read_text(path, "the file"), source=str(path), folder=path.parent)


def _read_text(path: Path, what: str) -> str:
    """A file's UTF-8 text; a SpecError says why it cannot be read (`what`: how the message names the file)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(str(path), [f"cannot read {what}: {exc.strerror or exc}"]) from None
    except UnicodeDecodeError as exc:
        raise SpecError(str(path), [f"the file is not UTF-8 text: {exc.reason} at byte {exc.start}"]) from None
    note_read(path, text)  # a catalog loaded from it is reused only while this text is unchanged
    return text


def parse_spec(text: str, *, source: str = "<spec>", folder: Path | None = None) -> Spec:
    """Parse spec text (YAML or JSON) and validate it; see `load_spec`.

    JSON text takes a fast path (~1 ms instead of ~45 ms of YAML parsing for the bundled spec), which
    is what `progressive-mcp spec compile` output is for: a quicker cold start in Lambda. A file too
    large, nested too deeply, or whose YAML aliases expand too far is refused before it is built.
    """
    if len(text) > MAX_SPEC_CHARS:
        raise SpecError(source, [f"the file is {len(text):,} characters; a spec may have at most {MAX_SPEC_CHARS:,}"])
    try:
        data, duplicate_keys = _parse_json(text) if text.lstrip().startswith("{") else (None, [])
        if data is None:
            data, duplicate_keys = _parse_yaml(text, source)
            # JSON has no aliases, and its parser stops deep nesting itself (RecursionError, below).
            problem = _shape_problem(data) if isinstance(data, dict | list) else None
            if problem:
                raise SpecError(source, [problem])
    except RecursionError:
        raise SpecError(source, [f"the document is nested more than {MAX_NESTING} levels deep"]) from None
    if not isinstance(data, dict):
        raise SpecError(source, ["the top level must be a mapping with api, categories and tools"])
    try:
        spec = Spec.model_validate(data)
        problems = _cross_check(spec)
    except ValidationError as exc:
        problems = _pydantic_problems(exc)
    if problems or duplicate_keys:
        lines, duplicates = _line_index(text)
        rendered = [_render(path, msg, data, lines) for path, msg in problems]
        repeated = "duplicate key (YAML would keep only the last)"
        rendered += [_render(path, repeated, data, {path: line}) for path, line in duplicates]
        if duplicate_keys and not duplicates:  # only if the two parsers disagree: keep the bare lines
            rendered += [f"line {line}: duplicate key {key!r}" for line, key in duplicate_keys]
        raise SpecError(source, rendered)
    if spec.search and isinstance(spec.search.vocabulary, str):
        vocabulary = _load_vocabulary((folder or Path.cwd()) / spec.search.vocabulary)
        spec = spec.model_copy(update={"search": SearchSpec(vocabulary=vocabulary)})
    return spec


def read_vocabulary(path: str | Path) -> Vocabulary:
    """A search vocabulary file given on its own (`--vocabulary`, PMCP_VOCABULARY), for any catalog: validated
    like one a spec names; a SpecError names the file and the line of each problem."""
    return Vocabulary.from_data(_load_vocabulary(Path(path)).model_dump(exclude_none=True))


def _load_vocabulary(path: Path) -> VocabularySpec:
    """The vocabulary file a spec names, validated; a SpecError names the file, and the line of each problem."""
    text = _read_text(path, "the vocabulary file")
    data, _ = _parse_yaml(text, str(path))
    if not isinstance(data, dict):
        raise SpecError(str(path), ["a vocabulary file is a mapping (synonyms, phrases, entities, ...)"])
    try:
        return VocabularySpec.model_validate(data)
    except ValidationError as exc:
        lines, _ = _line_index(text)
        raise SpecError(
            str(path), [_render(where, msg, data, lines) for where, msg in _pydantic_problems(exc)]
        ) from None


def _parse_yaml(text: str, source: str) -> tuple[Any, list[tuple[int, str]]]:
    """YAML text as data, with its repeated keys (an alias is built once and shared, however often used)."""
    loader = _SpecLoader(text)
    try:
        return loader.get_single_data(), loader.duplicate_keys
    except yaml.YAMLError as exc:
        raise SpecError(source, [_yaml_problem(exc)]) from None
    finally:
        loader.dispose()


def _shape_problem(data: Any) -> str | None:
    """Why parsed data is unsafe to walk: nesting too deep, a structure that contains itself, or YAML aliases
    that expand to too many values ("billion laughs": each alias is a shared reference, built once, but
    everything that walks the data walks it once per reference). None when it is fine. Iterative."""
    size: dict[int, int] = {}  # id(container) -> values in it once shared parts are counted per reference
    on_path: set[int] = set()
    stack: list[tuple[Any, int, bool]] = [(data, 1, False)]
    while stack:
        item, depth, children_done = stack.pop()
        key = id(item)
        members = list(item.values()) if isinstance(item, dict) else item
        if children_done:
            on_path.discard(key)
            size[key] = 1 + sum(size[id(m)] if isinstance(m, dict | list) else 1 for m in members)
            if size[key] > MAX_EXPANDED_VALUES:
                return f"YAML aliases expand to more than {MAX_EXPANDED_VALUES:,} values; write the values out instead"
            continue
        if key in size:
            continue
        if depth > MAX_NESTING:
            return f"the document is nested more than {MAX_NESTING} levels deep"
        if key in on_path:
            return "a YAML alias refers to a node that contains it (a recursive structure)"
        on_path.add(key)
        stack.append((item, depth, True))
        stack.extend((m, depth + 1, False) for m in members if isinstance(m, dict | list) and id(m) not in size)
    return None


def _parse_json(text: str) -> tuple[Any, list[tuple[int, str]]]:
    """Strict JSON with duplicate keys noted; (None, []) if the text is not JSON (then YAML reads it)."""
    duplicates: list[tuple[int, str]] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        for key, value in items:
            if key in seen:
                duplicates.append((0, key))  # JSON's parser keeps no positions; the path walk finds the line
            seen[key] = value
        return seen

    try:
        return json.loads(text, object_pairs_hook=pairs), duplicates
    except ValueError:
        return None, []


_BaseLoader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _SpecLoader(BoundedAliases, _BaseLoader):  # type: ignore[misc,valid-type]
    """A safe YAML loader (libyaml when available), alias expansion bounded, that notes duplicate mapping keys."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.duplicate_keys: list[tuple[int, str]] = []

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[tuple[str, str]] = set()
        for key_node, _ in node.value:
            # Only scalar keys can repeat meaningfully; a sequence or mapping key is unhashable and
            # the constructor below reports it as a YAML error. The tag keeps `1` and `"1"` apart.
            if not isinstance(key_node, yaml.ScalarNode):
                continue
            key = (key_node.tag, key_node.value)
            if key in seen:
                self.duplicate_keys.append((key_node.start_mark.line + 1, str(key_node.value)))
            seen.add(key)
        return super().construct_mapping(node, deep=deep)  # type: ignore[no-any-return]


def resolve_params(spec: Spec, tool: ToolSpec) -> list[Param]:
    """Merge each of a tool's parameters with the shared definition it uses."""
    resolved = []
    for name, param in tool.params.items():
        merged: dict[str, Any] = {}
        if param.use is not None:
            shared = spec.shared_params[param.use]
            merged.update({k: getattr(shared, k) for k in shared.model_fields_set})
        merged.update({k: getattr(param, k) for k in param.model_fields_set if k != "use"})
        resolved.append(
            Param(
                name=name,
                type=merged["type"],
                required=bool(merged.get("required", False)),
                description=merged.get("description") or "",
                enum=tuple(merged["enum"]) if merged.get("enum") is not None else None,
                default=merged.get("default"),
                pattern=merged.get("pattern"),
                format=merged.get("format"),
                minimum=merged.get("minimum"),
                maximum=merged.get("maximum"),
                examples=tuple(merged["examples"]) if merged.get("examples") is not None else None,
                premium_values=tuple(merged.get("premium_values") or ()),
            )
        )
    return resolved


Path_ = tuple[str | int, ...]


def _cross_check(spec: Spec) -> list[tuple[Path_, str]]:
    """Rules no single field can check: references, duplicates, defaults against their own schema, names the
    server sets (dispatch, auth, fixed) reused as parameters, auth and annotations that contradict themselves."""
    problems: list[tuple[Path_, str]] = []
    auth_name = _auth_name(spec.api.auth)
    reserved = {spec.api.dispatch.name} | ({auth_name} if auth_name else set())
    if spec.api.auth is not None:
        problems += _auth_problems(spec.api.auth)
    for fname in spec.api.fixed:
        if fname in reserved:
            problems.append(
                (("api", "fixed", fname), f"{fname!r} is set by the server (dispatch or auth) and cannot be fixed")
            )
    for name, shared in spec.shared_params.items():
        where: Path_ = ("shared_params", name)
        if shared.use is not None:
            problems.append(((*where, "use"), "a shared parameter cannot use another one"))
        problems += _check_param(where, shared.model_dump(exclude_none=True), allow_untyped=False)
    for name, output in spec.shared_outputs.items():
        problems += output_schema_problems(("shared_outputs", name), output, spec.shared_outputs)
    problems += _output_cycles(spec.shared_outputs)
    seen: dict[str, int] = {}
    for index, tool in enumerate(spec.tools):
        where = ("tools", index)
        if tool.name in seen:
            problems.append(((*where, "name"), f"duplicate tool name (first defined at tools[{seen[tool.name]}])"))
        seen.setdefault(tool.name, index)
        if tool.category not in spec.categories:
            known = ", ".join(sorted(spec.categories))
            problems.append(((*where, "category"), f"unknown category {tool.category!r} (defined: {known})"))
        for fname in tool.fixed:
            if fname in reserved:
                problems.append(
                    ((*where, "fixed", fname), f"{fname!r} is set by the server (dispatch or auth) and cannot be fixed")
                )
            elif fname in tool.params:
                problems.append(
                    (
                        (*where, "fixed", fname),
                        f"{fname!r} is also a parameter of this tool: a fixed value is never an "
                        "argument, so drop one of the two",
                    )
                )
        for pname, param in tool.params.items():
            pwhere = (*where, "params", pname)
            if pname in reserved:
                problems.append(
                    (pwhere, f"{pname!r} is set by the server (dispatch or auth) and cannot be a parameter")
                )
            elif pname in spec.api.fixed and pname not in tool.fixed:
                problems.append(
                    (
                        pwhere,
                        f"{pname!r} is fixed by api.fixed (always sent as {spec.api.fixed[pname]!r}), so it "
                        "cannot be a parameter: drop it here or there",
                    )
                )
            merged: dict[str, Any] = {}
            if param.use is not None:
                if param.use not in spec.shared_params:
                    defined = ", ".join(sorted(spec.shared_params)) or "none"
                    problems.append(
                        ((*pwhere, "use"), f"undefined shared parameter {param.use!r} (defined: {defined})")
                    )
                    continue
                merged.update(spec.shared_params[param.use].model_dump(exclude_none=True))
            merged.update(param.model_dump(exclude_none=True, exclude={"use"}))
            problems += _check_param(pwhere, merged, allow_untyped=False)
        if tool.output is not None:
            problems += output_schema_problems((*where, "output"), tool.output, spec.shared_outputs)
        for gindex, group in enumerate(tool.require_any):
            for member in group:
                if member not in tool.params:
                    problems.append(((*where, "require_any", gindex), f"{member!r} is not a parameter of this tool"))
        problems += _annotation_problems(where, tool, spec.api.default_method)
    return problems


def _auth_name(auth: AuthSpec | None) -> str | None:
    """The query parameter, header or cookie the key travels in (bearer and basic: the Authorization header)."""
    if auth is None:
        return None
    return auth.name if auth.scheme == "api_key" else AUTHORIZATION


def _auth_problems(auth: AuthSpec) -> list[tuple[Path_, str]]:
    """An api_key needs to know where it goes; bearer and basic always go in the Authorization header, so any
    other place, or a prefix of its own, contradicts the scheme."""
    where: Path_ = ("api", "auth")
    if auth.scheme == "api_key":
        if auth.name is None:
            return [
                ((*where, "name"), "missing required field: the query parameter, header or cookie that carries the key")
            ]
        return []
    problems: list[tuple[Path_, str]] = []
    instead = "(scheme: api_key sends the key as it is, wherever `in` and `name` say)"
    if auth.in_ not in (None, "header"):
        problems.append(
            (
                (*where, "in"),
                f"a {auth.scheme} key is sent in the Authorization header, not {auth.in_!r}: drop `in` " + instead,
            )
        )
    if auth.name is not None and auth.name.casefold() != AUTHORIZATION.casefold():
        problems.append(
            (
                (*where, "name"),
                f"a {auth.scheme} key is sent in the Authorization header, not {auth.name!r}: drop `name` {instead}",
            )
        )
    if auth.prefix:
        scheme_word = "Bearer" if auth.scheme == "bearer" else "Basic"
        problems.append(
            (
                (*where, "prefix"),
                f"the {auth.scheme} scheme writes {scheme_word!r} before the key itself: drop `prefix`",
            )
        )
    return problems


def _annotation_problems(where: Path_, tool: ToolSpec, default_method: str) -> list[tuple[Path_, str]]:
    """A read-only tool cannot also be destructive, whether each hint is stated or implied by the method."""
    if tool.annotations is None:
        return []
    given = tool.annotations.given()
    method = tool.method or default_method
    hints = method_annotations(method, given)
    if not (hints.get("readOnlyHint") and hints.get("destructiveHint")):
        return []
    at: Path_ = (*where, "annotations")
    if "readOnlyHint" in given and "destructiveHint" in given:
        return [((*at, "destructiveHint"), "a read-only tool cannot be destructive: readOnlyHint is true too")]
    if "readOnlyHint" in given:
        return [
            (
                (*at, "readOnlyHint"),
                f"a read-only tool cannot be destructive, and method {method} implies destructiveHint: true: "
                "set destructiveHint: false too, or drop readOnlyHint",
            )
        ]
    return [
        (
            (*at, "destructiveHint"),
            f"method {method} implies readOnlyHint: true, and a read-only tool cannot be destructive: "
            "set readOnlyHint: false too, or give the tool its real method",
        )
    ]


def output_schema_problems(where: Path_, schema: Any, shared: dict[str, dict[str, Any]]) -> list[tuple[Path_, str]]:
    """Problems of an output description: unknown keywords or types, `use` of an undefined shared output,
    `required` names without a property, ill-formed members. Iterative over the schema's nodes."""
    problems: list[tuple[Path_, str]] = []
    stack: list[tuple[Path_, Any]] = [(where, schema)]
    while stack:
        path, node = stack.pop()
        if not isinstance(node, dict):
            problems.append((path, "must be a schema object"))
            continue
        unknown = sorted(set(node) - OUTPUT_KEYWORDS)
        if unknown:
            allowed = ", ".join(sorted(OUTPUT_KEYWORDS))
            problems.append((path, f"unknown keyword(s) {', '.join(unknown)}; an output schema uses {allowed}"))
        if "use" in node:
            if set(node) - {"use", "description", "title"}:
                problems.append((path, "`use` stands alone (a description or title may sit beside it)"))
            if node["use"] not in shared:
                defined = ", ".join(sorted(shared)) or "none"
                problems.append(((*path, "use"), f"undefined shared output {node['use']!r} (defined: {defined})"))
            continue
        kinds = node.get("type")
        listed = kinds if isinstance(kinds, list) else [kinds] if kinds is not None else []
        if any(k not in OUTPUT_TYPES for k in listed) or (kinds is None and "anyOf" not in node and "enum" not in node):
            problems.append(((*path, "type"), f"type must be one or a list of {', '.join(sorted(OUTPUT_TYPES))}"))
        properties = node.get("properties", {})
        if not isinstance(properties, dict):
            problems.append(((*path, "properties"), "must map names to schemas"))
            properties = {}
        required = node.get("required", [])
        if not isinstance(required, list) or not all(isinstance(r, str) and r in properties for r in required):
            problems.append(((*path, "required"), "must list names of `properties`"))
        extra = node.get("additionalProperties")
        if extra is not None and not isinstance(extra, bool | dict):
            problems.append(((*path, "additionalProperties"), "must be true, false or a schema"))
        enum = node.get("enum")
        if enum is not None and (not isinstance(enum, list) or not enum):
            problems.append(((*path, "enum"), "must be a non-empty list"))
        any_of = node.get("anyOf")
        if any_of is not None and (not isinstance(any_of, list) or not any_of):
            problems.append(((*path, "anyOf"), "must be a non-empty list of schemas"))
        stack += [((*path, "properties", name), member) for name, member in properties.items()]
        if isinstance(extra, dict):
            stack.append(((*path, "additionalProperties"), extra))
        if "items" in node:
            stack.append(((*path, "items"), node["items"]))
        if isinstance(any_of, list):
            stack += [((*path, "anyOf", i), member) for i, member in enumerate(any_of)]
    return problems


def used_outputs(schema: Any) -> set[str]:
    """The shared outputs a schema names with `use` (directly, not through them)."""
    found: set[str] = set()
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("use"), str):
                found.add(node["use"])
            stack += [v for k, v in node.items() if k not in ("enum", "description", "title", "required")]
        elif isinstance(node, list):
            stack += node
    return found


def _output_cycles(shared: dict[str, dict[str, Any]]) -> list[tuple[Path_, str]]:
    """A shared output that uses itself, through any chain, could never become a finite type."""
    uses = {name: used_outputs(schema) & set(shared) for name, schema in shared.items()}
    problems: list[tuple[Path_, str]] = []
    for start in shared:
        seen, frontier = set(), set(uses[start])
        while frontier:
            if start in frontier:
                problems.append((("shared_outputs", start), "uses itself (through `use`): outputs cannot be recursive"))
                break
            seen |= frontier
            frontier = {n for f in frontier for n in uses[f]} - seen
    return problems


_PY_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}


def _type_ok(value: Any, type_name: str) -> bool:
    if isinstance(value, bool) and type_name != "boolean":
        return False
    return isinstance(value, _PY_TYPES[type_name])


def _check_param(where: Path_, p: dict[str, Any], *, allow_untyped: bool) -> list[tuple[Path_, str]]:
    problems: list[tuple[Path_, str]] = []
    type_name = p.get("type")
    if type_name is None:
        if not allow_untyped:
            problems.append(((*where, "type"), "missing type (one of string, integer, number, boolean)"))
        return problems
    enum = p.get("enum")
    if enum is not None:
        if not enum:
            problems.append(((*where, "enum"), "an enum needs at least one value"))
        for value in enum:
            if not _type_ok(value, type_name):
                problems.append(((*where, "enum"), f"value {value!r} is not of type {type_name}"))
        if len(set(map(repr, enum))) != len(enum):
            problems.append(((*where, "enum"), "repeated value"))
    pattern = p.get("pattern")
    if pattern is not None:
        if type_name != "string":
            problems.append(((*where, "pattern"), "a pattern only applies to string parameters"))
        try:
            re.compile(pattern)
        except re.error as exc:
            problems.append(((*where, "pattern"), f"not a valid regular expression: {exc}"))
            pattern = None
    lo, hi = p.get("minimum"), p.get("maximum")
    if (lo is not None or hi is not None) and type_name not in ("integer", "number"):
        problems.append(((*where, "minimum" if lo is not None else "maximum"), "bounds only apply to numbers"))
    if lo is not None and hi is not None and lo > hi:
        problems.append(((*where, "minimum"), f"minimum {lo} is greater than maximum {hi}"))
    for field in ("default", "examples", "premium_values"):
        values = p.get(field)
        if values is None:
            continue
        for value in values if field != "default" else [values]:
            problems += [((*where, field), msg) for msg in _value_problems(value, type_name, enum, pattern, lo, hi)]
    if p.get("required") and p.get("default") is not None:
        problems.append(((*where, "default"), "a required parameter cannot have a default"))
    return problems


def _value_problems(
    value: Any, type_name: str, enum: list[Any] | None, pattern: str | None, lo: Any, hi: Any
) -> list[str]:
    if not _type_ok(value, type_name):
        return [f"{value!r} is not of type {type_name}"]
    problems = []
    if enum is not None and value not in enum:
        problems.append(f"{value!r} is not one of the allowed values {enum}")
    if pattern is not None and isinstance(value, str) and not re.search(pattern, value):
        problems.append(f"{value!r} does not match the pattern {pattern!r}")
    if lo is not None and value < lo:
        problems.append(f"{value!r} is below the minimum {lo}")
    if hi is not None and value > hi:
        problems.append(f"{value!r} is above the maximum {hi}")
    return problems


_UNION_MEMBERS = {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}
_SCALAR_FIELDS = {"default", "minimum", "maximum", "enum", "examples"}


def _pydantic_problems(exc: ValidationError) -> list[tuple[Path_, str]]:
    """One problem per pydantic error, except that a value failing every member of a scalar union
    (`default: 2024-01-01`, which YAML reads as a date) is one problem, not one per member."""
    problems: list[tuple[Path_, str]] = []
    unions: dict[Path_, tuple[Any, list[str]]] = {}
    for err in exc.errors():
        loc: Path_ = tuple(err["loc"])
        if len(loc) >= 2 and loc[-2] == "fixed" and err["type"] == "string_type":
            problems.append((loc, _fixed_value_message(err["input"])))
            continue
        if not _is_scalar_union_member(loc):
            problems.append((loc, _pydantic_message(err)))
            continue
        where = loc[:-1]
        if where not in unions:
            unions[where] = (err["input"], [])
            problems.append((where, ""))  # the message is written once every member is known
        unions[where][1].append(_UNION_MEMBERS[str(loc[-1])])
    return [(loc, message or _union_message(*unions[loc])) for loc, message in problems]


def _is_scalar_union_member(loc: Path_) -> bool:
    """`(..., "default", "str")` or `(..., "enum", 0, "str")`: one member of a scalar union failed."""
    if len(loc) < 3 or loc[-1] not in _UNION_MEMBERS:
        return False
    field = loc[-3] if isinstance(loc[-2], int) else loc[-2]
    return field in _SCALAR_FIELDS


def _union_message(value: Any, kinds: list[str]) -> str:
    allowed = kinds[0] if len(kinds) == 1 else ", ".join(kinds[:-1]) + f" or {kinds[-1]}"
    if isinstance(value, date):
        return f"{value.isoformat()} is not a valid {allowed}: YAML reads it as a date, so quote it"
    return f"{value!r} is not a valid {allowed}"


def _fixed_value_message(value: Any) -> str:
    """YAML reads `v: 2` or `raw: true` as a number or a boolean; a fixed value is sent as text, so say how to
    write the text that was meant."""
    if isinstance(value, bool):
        kind, text = "a boolean", "true" if value else "false"
    elif isinstance(value, date):
        kind, text = "a date", value.isoformat()
    elif isinstance(value, int | float):
        kind, text = "a number", str(value)
    else:
        return f"{value!r} is not text: a fixed value is one string, sent as it is written"
    return f"{text} is {kind}, but a fixed value is sent as text: quote it ('{text}')"


def _pydantic_message(err: Any) -> str:
    kind = err["type"]
    if kind == "extra_forbidden":
        return "unknown field"
    if kind == "missing":
        return "missing required field"
    if kind == "literal_error":
        return f"{err['input']!r} is not allowed: {err['msg'].removeprefix('Input should be ')}"
    message: str = err["msg"]
    return message[0].lower() + message[1:]


def _yaml_problem(exc: yaml.YAMLError) -> str:
    if isinstance(exc, AliasExpansionError):
        return str(exc)
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    context = getattr(exc, "context", None)
    text = f"{context}, {problem}" if context else problem
    if mark is not None:
        return f"line {mark.line + 1}, column {mark.column + 1}: invalid YAML: {text}"
    return f"invalid YAML: {text}"


def _render(path: Path_, message: str, data: Any, lines: dict[Path_, int]) -> str:
    """`line 12: tools[3] (GLOBAL_QUOTE).params.symbol.type: message`."""
    parts: list[str] = []
    node = data
    for step in path:
        if isinstance(step, int):
            label = f"[{step}]"
            if isinstance(node, list) and step < len(node):
                node = node[step]
                name = node.get("name") if isinstance(node, dict) else None
                if isinstance(name, str):
                    label += f" ({name})"
            parts.append(label)
        else:
            parts.append(("." if parts else "") + str(step))
            node = node.get(step) if isinstance(node, dict) else None
    dotted = "".join(parts) or "(top level)"
    line = None
    for cut in range(len(path), -1, -1):
        line = lines.get(tuple(path[:cut]))
        if line is not None:
            break
    prefix = f"line {line}: " if line is not None else ""
    return f"{prefix}{dotted}: {message}"


def _line_index(text: str) -> tuple[dict[Path_, int], list[tuple[Path_, int]]]:
    """Map each path in the YAML document to the 1-based line where its value starts; also list
    each repeated mapping key as (path, line of the repeat)."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except (yaml.YAMLError, RecursionError):
        return {}, []
    index: dict[Path_, int] = {}
    duplicates: list[tuple[Path_, int]] = []

    walked: set[int] = set()

    def walk(node: yaml.Node, path: Path_) -> None:
        index.setdefault(path, node.start_mark.line + 1)
        if id(node) in walked:  # an alias: its lines are where the anchor is, already indexed
            return
        walked.add(id(node))
        if isinstance(node, yaml.MappingNode):
            seen: set[tuple[str, str]] = set()
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    continue
                key = key_node.value
                line = key_node.start_mark.line + 1
                if (key_node.tag, key) in seen:
                    duplicates.append(((*path, key), line))
                seen.add((key_node.tag, key))
                index[(*path, key)] = line
                walk(value_node, (*path, key))
                index[(*path, key)] = line
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                walk(item, (*path, i))

    if root is not None:
        walk(root, ())
    return index, duplicates


# --- the catalog ---------------------------------------------------------------------------------


def build_catalog(spec: Spec) -> Catalog:
    """The catalog a valid spec describes."""
    outputs = _Outputs(spec)
    tools = tuple(_build_tool(spec, tool, outputs) for tool in spec.tools)
    return Catalog.build(_api(spec.api), spec.categories, tools, _vocabulary(spec))


def _vocabulary(spec: Spec) -> Vocabulary:
    """The search vocabulary of a spec (already read by `parse_spec` when it named a file)."""
    if spec.search is None or not isinstance(spec.search.vocabulary, VocabularySpec):
        return EMPTY
    return Vocabulary.from_data(spec.search.vocabulary.model_dump(exclude_none=True))


def _api(api: ApiSpec) -> Api:
    return Api(
        name=api.name,
        title=api.title,
        base_url=api.base_url,
        description=api.description,
        docs_url=api.docs_url,
        dispatch=Dispatch(api.dispatch.name),
        auth=_auth(api.auth),
        default_cache_ttl_s=api.default_cache_ttl_s,
        error_fields=MappingProxyType(dict(api.error_fields)),
        error_message_field=api.error_message_field,
        hints=Hints(api.hints.no_data, api.hints.invalid_request),
    )


def _auth(auth: AuthSpec | None) -> Auth | None:
    if auth is None:
        return None
    if auth.scheme == "api_key":
        return Auth(auth.in_ or "query", auth.name or "", auth.env, auth.prefix)  # a name: _cross_check saw to it
    return Auth("header", AUTHORIZATION, auth.env, scheme=auth.scheme)


def _build_tool(spec: Spec, tool: ToolSpec, outputs: _Outputs) -> CatalogTool:
    params = tuple(resolve_params(spec, tool))
    description = " ".join(tool.description.split())
    if tool.premium:
        description += PREMIUM_NOTE
    schema = input_schema(params, tool.require_any)
    output = outputs.resolve(tool.output) if tool.output is not None else None
    method = tool.method or spec.api.default_method
    return CatalogTool(
        name=tool.name,
        title=tool.title or tool.name,
        category=tool.category,
        summary=tool.summary,
        description=description,
        params=params,
        input_schema=_freeze(schema),
        keywords=tuple(tool.keywords),
        examples=tuple(tool.examples),
        cache_ttl_s=tool.cache_ttl_s if tool.cache_ttl_s is not None else spec.api.default_cache_ttl_s,
        premium=tool.premium,
        require_any=tuple(tuple(group) for group in tool.require_any),
        output_schema=output,
        method=method,
        fixed=MappingProxyType({**spec.api.fixed, **tool.fixed}),
        annotations=method_annotations(method, tool.annotations.given() if tool.annotations else None),
    )


def output_schema(spec: Spec, output: dict[str, Any]) -> dict[str, Any]:
    """A tool's output description as plain JSON Schema: each `{use: name}` becomes a `$ref` to `$defs/name`,
    with every shared output it needs (directly or through others) under `$defs`."""
    return cast(dict[str, Any], _thaw(_Outputs(spec).resolve(output)))


class _Outputs:
    """Resolves tools' output descriptions for one catalog build: each shared output is rewritten and frozen once,
    and every tool that needs it shares that one frozen copy (the 53 indicators share a few metas)."""

    def __init__(self, spec: Spec) -> None:
        self.shared = spec.shared_outputs
        self._frozen: dict[str, Any] = {}
        self._needs: dict[str, frozenset[str]] = {}

    def resolve(self, output: dict[str, Any]) -> Mapping[str, Any]:
        needed: set[str] = set()
        for name in used_outputs(output):
            needed |= self._closure(name)
        schema = _with_refs(output)
        if needed:
            schema["$defs"] = MappingProxyType({name: self._frozen_def(name) for name in sorted(needed)})
        return cast(Mapping[str, Any], _freeze(schema))

    def _closure(self, name: str) -> frozenset[str]:
        """`name` and every shared output it uses, directly or through others (the spec forbids cycles)."""
        found = self._needs.get(name)
        if found is None:
            members = {name}
            for used in used_outputs(self.shared[name]):
                members |= self._closure(used)
            found = self._needs[name] = frozenset(members)
        return found

    def _frozen_def(self, name: str) -> Any:
        frozen = self._frozen.get(name)
        if frozen is None:
            frozen = self._frozen[name] = _freeze(_with_refs(self.shared[name]))
        return frozen


def _with_refs(node: Any) -> Any:
    """A copy of an output description with `use` written as JSON Schema's `$ref` (enum values kept as they are)."""
    if isinstance(node, dict):
        if "use" in node:
            ref: dict[str, Any] = {"$ref": f"#/$defs/{node['use']}"}
            ref.update({k: v for k, v in node.items() if k in ("description", "title")})
            return ref
        return {k: (v if k == "enum" else _with_refs(v)) for k, v in node.items()}
    if isinstance(node, list):
        return [_with_refs(v) for v in node]
    return node
