"""A compiled catalog: any catalog written as compact JSON by `progressive-mcp spec compile`, and read back
without the tooling of the source it came from (a Lambda serving an OpenAPI catalog never imports YAML
parsers, `$ref` resolvers or pydantic spec models). Example::

    text = dumps(load_catalog("DigitalOcean-public.v2.yaml"))   # progressive-mcp spec compile
    catalog = loads(text)                                        # what the Lambda does at a cold start

The format is this module's alone (versioned by FORMAT_VERSION); it is a build artefact, not something to
write by hand. Default field values are left out to keep the file small, and a schema part that repeats (a
`Customer` in forty answers) is written once, under `shared`, and referenced as `{"$pmcp_shared": N}` wherever it
occurs; loading makes every reference the same frozen object, so the repeats cost neither bytes nor memory.
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from dataclasses import MISSING, fields
from typing import Any

from progressive_mcp.catalog import (
    TOOL_ANNOTATIONS,
    Api,
    Auth,
    Catalog,
    CatalogTool,
    Dispatch,
    Hints,
    Operation,
    Param,
    _freeze,
    _thaw,
)
from progressive_mcp.errors import SpecError
from progressive_mcp.search.vocabulary import Vocabulary
from progressive_mcp.tokens import count_tokens, counts_exactly, remember_counts, text_digest
from progressive_mcp.tokens import dumps as dumps_text

FORMAT_KEY = "progressive_mcp_catalog"
FORMAT_VERSION = 2  # 2: shared schema parts; 1 (none) is still read
READABLE_VERSIONS = (1, 2)
SHARED_KEY = "$pmcp_shared"
MIN_SHARED_CHARS = 64  # a repeated part shorter than this (as JSON) is cheaper written out than referenced
VECTORS_KEY = "vectors"  # optional: the tool documents' MiniLM vectors (`to_data(vectors=True)`)
EVERYDAY_KEY = "everyday"  # in VECTORS_KEY, a remote provider's: the everyday requests' vectors, as queries
# optional: each tool's direct definition's cl100k count, by its text's digest (where `spec compile` could count), so
# `auto` decides exactly where the vocabulary is not (the Lambda asset; see progressive_mcp.surfaces.auto)
DEFINITION_TOKENS_KEY = "definition_tokens"
SCHEMA_FIELDS = ("input_schema", "output_schema")  # of a tool record; a parameter's `schema` too


def is_compiled(data: Any) -> bool:
    return isinstance(data, dict) and FORMAT_KEY in data


def to_data(catalog: Catalog, *, vectors: bool = False) -> dict[str, Any]:
    """The catalog as plain data; `vectors`: with each tool document's MiniLM vector (the semantic extra), so a
    search of the loaded catalog embeds only its queries."""
    tools = [_record(tool) for tool in catalog.tools]
    shared = _share(tools)
    return {
        FORMAT_KEY: FORMAT_VERSION,
        "version": catalog.version,
        "api": _record(catalog.api),
        "categories": dict(catalog.categories),
        "tools": tools,
        **({"shared": shared} if shared else {}),
        **({"vocabulary": dict(catalog.vocabulary.data)} if catalog.vocabulary.data else {}),
        **({VECTORS_KEY: _vectors(catalog)} if vectors and catalog.tools else {}),
        **({DEFINITION_TOKENS_KEY: _definition_tokens(catalog)} if counts_exactly() and catalog.tools else {}),
    }


def _vectors(catalog: Catalog) -> dict[str, Any]:
    from progressive_mcp.search import embedder, providers
    from progressive_mcp.search import vectors as tool_vectors
    from progressive_mcp.search.semantic import everyday_requests

    rows, _ = tool_vectors.rows_for(catalog.tools)
    # One int8 row per tool, in tool order, as base64: 512 characters a tool. Read back under each tool document's
    # content key, so a row whose document has changed since (another version of progressive-mcp) is not used.
    model, width = providers.active().model_id, len(rows) // len(catalog.tools)
    variant = tool_vectors.DOCUMENT_VARIANT
    data = {"model": model, "document": variant, "dimension": width, "int8": tool_vectors.encode(rows)}
    if model != embedder.MODEL_ID:
        # A remote provider's everyday requests (the closeness scale's anchors) too, so that a cold start's first
        # search asks it for the query alone; the bundled model's ship with it (models/minilm/everyday.json).
        texts = everyday_requests()
        anchors, _ = tool_vectors.query_rows(texts)
        data[EVERYDAY_KEY] = {"texts": embedder.texts_digest(texts), "int8": tool_vectors.encode(anchors)}
    return data


def _definition_tokens(catalog: Catalog) -> dict[str, int]:
    """Each tool's definition as tools/list sends it (no member without a value), counted: by its text's digest."""
    texts = (dumps_text({k: v for k, v in t.definition().items() if v is not None}) for t in catalog.tools)
    return {text_digest(text): count_tokens(text) for text in texts}


def _offer_vectors(data: Any, catalog: Catalog) -> None:
    """Hands a compiled catalog's vectors to the process's vector cache, unread until a search needs them."""
    from progressive_mcp.search import providers
    from progressive_mcp.search import vectors as tool_vectors

    model = providers.active().model_id
    if not isinstance(data, dict) or data.get("model") != model or not isinstance(data.get("int8"), str):
        return  # another model's vectors: the documents are embedded again, lazily, when first searched
    if data.get("document") != tool_vectors.DOCUMENT_VARIANT:
        return  # vectors of another tool document (an older release's): embedded again, lazily, likewise
    width = int(data.get("dimension", tool_vectors.ROW_BYTES))  # absent: MiniLM's, written before providers
    cache = tool_vectors.VectorCache.shared()
    cache.offer(catalog.tools, tool_vectors.decode(data["int8"], width), width)
    everyday = data.get(EVERYDAY_KEY)
    if isinstance(everyday, dict):
        cache.offer_store(functools.partial(_everyday_lookup, everyday, width))


def _everyday_lookup(stored: dict[str, Any], width: int, keys: list[str]) -> dict[str, bytes]:
    """A compiled catalog's everyday vectors (a remote provider's) under their `vectors.query_key`, among `keys`:
    read when a search first needs the closeness scale, not when the catalog loads."""
    from progressive_mcp.search import vectors as tool_vectors
    from progressive_mcp.search.embedder import everyday_rows
    from progressive_mcp.search.semantic import everyday_requests

    texts = everyday_requests()
    rows = everyday_rows(stored, texts, width)
    if rows is None:
        return {}  # made for other everyday requests (another release's): the provider is asked instead
    wanted = set(keys)
    by_key = ((tool_vectors.query_key(text), rows[i * width : (i + 1) * width]) for i, text in enumerate(texts))
    return {key: row for key, row in by_key if key in wanted}


def _schemas(tool: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    """The (record, key) places of a tool record's schemas."""
    places = [(tool, key) for key in SCHEMA_FIELDS if tool.get(key) is not None]
    return places + [(p, "schema") for p in tool.get("params", ()) if p.get("schema") is not None]


def _share(tools: list[dict[str, Any]]) -> list[Any]:
    """Replaces, in the tool records' schemas, each part that occurs more than once by a reference to one copy;
    returns the copies (which may reference others)."""
    # Each distinct part gets a number (equal parts the same one, found by hashing children's numbers, so no part
    # is serialised twice), with the length of its JSON.
    numbers: dict[Any, int] = {}
    sizes: list[int] = []
    counts: Counter[int] = Counter()
    number_of: dict[int, int] = {}  # id() of a part in the records → its number

    def number(node: Any) -> int:
        kind = type(node)
        if kind is dict:
            if SHARED_KEY in node:
                raise _Unshareable
            members = tuple((k, number(v)) for k, v in node.items())
            signature: Any = ("{", members)
            size = 2 + sum(len(k) + 3 + sizes[n] for k, n in members)
        elif kind is list:
            items = tuple(number(v) for v in node)
            signature, size = ("[", items), 2 + sum(sizes[n] + 1 for n in items)
        else:  # the type tells 1 from True and 1.0; the size is near enough to its JSON's
            signature, size = (kind, node), len(node) + 2 if kind is str else len(repr(node))
        found = numbers.get(signature)
        if found is None:
            found = numbers[signature] = len(sizes)
            sizes.append(size)
        if kind is dict or kind is list:
            number_of[id(node)] = found
            counts[found] += 1
        return found

    try:
        for tool in tools:
            for record, field_name in _schemas(tool):
                number(record[field_name])
    except _Unshareable:  # a schema uses the reference's own key: written out whole
        return []
    shared: list[Any] = []
    index: dict[int, int] = {}

    def replace(node: Any) -> Any:
        if type(node) is not dict and type(node) is not list:
            return node
        found = number_of[id(node)]
        if counts[found] < 2 or sizes[found] < MIN_SHARED_CHARS:
            return inner(node)
        if found not in index:
            index[found] = len(shared)
            shared.append(None)
            shared[index[found]] = inner(node)
        return {SHARED_KEY: index[found]}

    def inner(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: replace(v) for k, v in node.items()}
        return [replace(v) for v in node]

    for tool in tools:
        for record, field_name in _schemas(tool):
            record[field_name] = replace(record[field_name])
    return shared


class _Unshareable(Exception):
    pass


def _expanded(tools: list[Any], shared: list[Any]) -> None:
    """The references `_share` left in the tool records' schemas, each replaced by its copy, frozen once."""
    done: dict[int, Any] = {}

    def expand(node: Any) -> Any:
        if isinstance(node, dict):
            if len(node) == 1 and SHARED_KEY in node:
                number = node[SHARED_KEY]
                if number not in done:
                    done[number] = _freeze(expand(shared[number]))
                return done[number]
            return {k: expand(v) for k, v in node.items()}
        if isinstance(node, list):
            return [expand(v) for v in node]
        return node

    for tool in tools:
        for record, field_name in _schemas(tool):
            record[field_name] = expand(record[field_name])


def dumps(catalog: Catalog, *, vectors: bool = False) -> str:
    return json.dumps(to_data(catalog, vectors=vectors), separators=(",", ":"), ensure_ascii=False)


def loads(text: str, source: str = "<compiled catalog>") -> Catalog:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise SpecError(source, [f"not valid JSON: {exc}"]) from None
    return from_data(data, source)


def from_data(data: Any, source: str = "<compiled catalog>") -> Catalog:
    if not is_compiled(data):
        raise SpecError(source, [f"not a compiled catalog (no {FORMAT_KEY!r} field)"])
    if data[FORMAT_KEY] not in READABLE_VERSIONS:
        raise SpecError(
            source,
            [f"compiled by another version of progressive-mcp (format {data[FORMAT_KEY]!r}, this one reads "
             f"{FORMAT_VERSION}): compile it again with `progressive-mcp spec compile`"],
        )  # fmt: skip
    try:
        if data.get("shared"):
            _expanded(data["tools"], data["shared"])
        api = _api(data["api"])
        tools = tuple(_tool(t) for t in data["tools"])
        catalog = Catalog.build(api, data["categories"], tools, Vocabulary.from_data(data.get("vocabulary")))
    except (KeyError, TypeError, ValueError) as exc:
        raise SpecError(source, [f"a compiled catalog with a broken record ({type(exc).__name__}: {exc})"]) from None
    if data.get("version") not in (None, catalog.version):
        raise SpecError(source, ["its tools do not match the version it was compiled with: compile it again"])
    routes = [(t.name, t.operation.path) for t in catalog.tools if t.operation is not None]
    unrooted = [f"{name}: the path {path!r} does not start with /" for name, path in routes if path[:1] != "/"]
    if unrooted:  # as its source would have been (progressive_mcp.sources.openapi): it could name another host
        raise SpecError(source, unrooted)
    counts = data.get(DEFINITION_TOKENS_KEY)
    if isinstance(counts, dict):
        remember_counts({k: v for k, v in counts.items() if isinstance(k, str) and type(v) is int})
    if VECTORS_KEY in data:
        try:
            _offer_vectors(data[VECTORS_KEY], catalog)
        except ValueError as exc:
            raise SpecError(source, [f"a compiled catalog with broken vectors ({exc})"]) from None
    return catalog


def _record(value: Any) -> dict[str, Any]:
    """A dataclass as a dict of its non-default fields (nested dataclasses and frozen data made plain)."""
    out: dict[str, Any] = {}
    for f in fields(value):
        item = getattr(value, f.name)
        default = (
            f.default
            if f.default is not MISSING
            else f.default_factory()
            if f.default_factory is not MISSING
            else MISSING
        )
        if default is not MISSING and item == default:
            continue
        if hasattr(item, "__dataclass_fields__"):
            item = _record(item)
        elif isinstance(item, tuple) and item and hasattr(item[0], "__dataclass_fields__"):
            item = [_record(i) for i in item]
        else:
            item = _thaw(item)
        out[f.name] = item
    return out


def _tuple(value: Any) -> Any:
    return tuple(_tuple(v) for v in value) if isinstance(value, list) else value


def _api(data: dict[str, Any]) -> Api:
    values = dict(data)
    if values.get("dispatch") is not None:
        values["dispatch"] = Dispatch(**values["dispatch"])
    if values.get("auth") is not None:
        values["auth"] = Auth(**values["auth"])
    if "auth_options" in values:
        values["auth_options"] = tuple(Auth(**option) for option in values["auth_options"])
    if "hints" in values:
        values["hints"] = Hints(**values["hints"])
    if "error_fields" in values:
        values["error_fields"] = _freeze(values["error_fields"])
    return Api(**values)


def _param(data: dict[str, Any]) -> Param:
    values = dict(data)
    for key in ("enum", "examples", "premium_values"):
        if key in values and values[key] is not None:
            values[key] = tuple(values[key])
    for key in ("schema", "part_headers"):
        if values.get(key) is not None:
            values[key] = _freeze(values[key])
    return Param(**values)


def _tool(data: dict[str, Any]) -> CatalogTool:
    values = dict(data)
    values["params"] = tuple(_param(p) for p in values.get("params", ()))
    values["input_schema"] = _freeze(values["input_schema"])
    for key in ("keywords", "examples"):
        values[key] = tuple(values.get(key, ()))
    if "require_any" in values:
        values["require_any"] = _tuple(values["require_any"])
    if values.get("output_schema") is not None:
        values["output_schema"] = _freeze(values["output_schema"])
    if values.get("operation") is not None:
        values["operation"] = Operation(**values["operation"])
    if "fixed" in values:
        values["fixed"] = _freeze(values["fixed"])
    values["annotations"] = _freeze(values["annotations"]) if "annotations" in values else TOOL_ANNOTATIONS
    return CatalogTool(**values)
