"""Reading an OpenAPI document's files and following its `$ref`s (`sources.openapi` builds the catalog from them).

`$ref`s are resolved with `referencing` (the library `jsonschema` resolves with), lazily: only what operations use
is read. References may only point at files inside the entry document's folder, and never at the network::

    entry = Path("spec/openapi.yaml").resolve()
    resolver = Resolver(Documents(entry.parent), entry.as_uri(), parse_text(entry.read_text(), entry.name))
    node, place, target = resolver.deref({"$ref": "#/components/schemas/Pet"}, resolver.start)
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Hashable
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

import yaml
from referencing import Registry, Resource, Specification
from referencing.exceptions import Unresolvable

from progressive_mcp.sources.bounded_yaml import AliasExpansionError, BoundedAliases
from progressive_mcp.sources.loaded import note_read

MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_REF_HOPS = 32


class Documents:
    """Parsed files by URI, read on first use, inside the entry document's folder only."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.files: dict[str, Any] = {}
        self._folders: dict[str, Path] = {}  # a folder as written in URIs -> its real path (symlinks followed)

    def read(self, uri: str) -> Any:
        if uri in self.files:
            return self.files[uri]
        parts = urlsplit(uri)
        if parts.scheme != "file":
            raise Problem(f"{uri} is not a local file (documents are read offline; remote $refs are not fetched)")
        path = self._real(unquote(parts.path))
        if not path.is_relative_to(self.root):
            raise Problem(f"{path} is outside the document's folder {self.root}")
        if not path.is_file():
            raise Problem(f"{path.relative_to(self.root)} does not exist")
        if path.stat().st_size > MAX_FILE_BYTES:
            raise Problem(f"{path.name} is larger than {MAX_FILE_BYTES // (1024 * 1024)} MB")
        text = path.read_text(encoding="utf-8")
        note_read(path, text, resolved=True)  # a catalog loaded from it is reused only while this text is unchanged
        data = parse_text(text, path.name)
        self.files[uri] = data
        return data

    def resource(self, uri: str) -> Resource[Any]:
        """A file as `referencing` retrieves it."""
        return Specification.OPAQUE.create_resource(self.read(uri))

    def _real(self, written: str) -> Path:
        """`Path(written).resolve()`, with each folder resolved once: a big document's files share a few folders,
        and resolving walks (lstat) every component of the path."""
        folder, name = os.path.split(written)
        if name in ("", ".", ".."):
            return Path(written).resolve()
        real_folder = self._folders.get(folder)
        if real_folder is None:
            real_folder = self._folders[folder] = Path(folder or ".").resolve()
        path = real_folder / name
        return path.resolve() if path.is_symlink() else path


def parse_text(text: str, source: str) -> Any:
    """YAML or JSON (JSON is YAML, but the JSON parser is ~20x faster on big documents)."""
    stripped = text.lstrip()
    try:
        if stripped.startswith(("{", "[")):
            try:
                return json.loads(text)
            except ValueError:
                pass  # YAML flow style, perhaps
        return yaml.load(text, Loader=Yaml12Loader)  # a safe loader, with YAML 1.2's scalars
    except AliasExpansionError as exc:
        raise Problem(f"{source}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise Problem(f"{source}: not valid YAML or JSON{where}: {getattr(exc, 'problem', None) or exc}") from None
    except RecursionError:
        raise Problem(f"{source}: nested too deeply to read") from None


_YAML11_ONLY = frozenset({"tag:yaml.org,2002:bool", "tag:yaml.org,2002:timestamp"})


class Yaml12Loader(BoundedAliases, getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """PyYAML's safe loader (alias expansion bounded) with YAML 1.2's booleans: OpenAPI documents are YAML 1.2,
    where `off`, `on`, `yes` and `no` are strings (DigitalOcean's droplet status enum has `off`; YAML 1.1 would
    make it `false`), and `2020-01-01` is a string too (JSON has no dates: a date object would break every answer
    that carries it)."""

    yaml_implicit_resolvers: ClassVar[dict[Any, list[Any]]] = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag not in _YAML11_ONLY]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def construct_document(self, node: yaml.Node) -> Any:
        """The data of a file without aliases (`anchored` False: its nodes form a tree), built in one pass:
        strings, mappings and sequences directly, any other node by PyYAML's own constructor. The same data as
        PyYAML's, which builds every node through a generator and a memo (~0.1 of DigitalOcean's 1.3 CPU-s); a
        file with anchors is left to it (an aliased node is built once and shared)."""
        if self.anchored:
            return super().construct_document(node)
        try:
            return self._tree(node)
        finally:  # what PyYAML's construct_document resets once a document is built
            self.constructed_objects: dict[Any, Any] = {}
            self.recursive_objects: dict[Any, Any] = {}
            self.deep_construct = False

    def _tree(self, node: yaml.Node) -> Any:
        kind = type(node)
        if kind is yaml.ScalarNode and node.tag == _STR_TAG:
            return node.value
        if kind is yaml.SequenceNode and node.tag == _SEQ_TAG:
            return [self._tree(child) for child in node.value]
        if kind is yaml.MappingNode and node.tag == _MAP_TAG and not any(k.tag in _MERGING for k, _ in node.value):
            mapping = {}
            for key_node, value_node in node.value:
                key = self._tree(key_node)
                if not isinstance(key, Hashable):
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping", node.start_mark, "found unhashable key", key_node.start_mark
                    )
                mapping[key] = self._tree(value_node)
            return mapping
        return self.construct_object(node, deep=True)


_STR_TAG, _SEQ_TAG, _MAP_TAG = "tag:yaml.org,2002:str", "tag:yaml.org,2002:seq", "tag:yaml.org,2002:map"
_MERGING = frozenset({"tag:yaml.org,2002:merge", "tag:yaml.org,2002:value"})  # keys PyYAML's mappings rewrite


Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


class Problem(Exception):
    """Why one part of a document cannot be used (the caller adds the operation and pointer)."""


class Place:
    """A place in the documents: the resolver (for relative $refs), the file's URI and the JSON pointer there.

    The conversion makes one for every member of every schema it reads (DigitalOcean: ~70,000), and only a
    message or a note reads the pointer: a child keeps its parent and keys, and writes its pointer when asked."""

    __slots__ = ("_keys", "_parent", "_pointer", "resolver", "uri")

    def __init__(
        self,
        resolver: Any,
        uri: str,
        pointer: str | None,
        parent: Place | None = None,
        keys: tuple[str | int, ...] = (),
    ) -> None:
        self.resolver = resolver
        self.uri = uri
        self._pointer = pointer
        self._parent = parent
        self._keys = keys

    @property
    def pointer(self) -> str:
        if self._pointer is None:
            assert self._parent is not None
            pointer = self._parent.pointer
            for key in self._keys:
                pointer += "/" + str(key).replace("~", "~0").replace("/", "~1")
            self._pointer = pointer
            self._parent = None
        return self._pointer

    def child(self, *keys: str | int) -> Place:
        return Place(self.resolver, self.uri, None, self, keys)

    def where(self, root_uri: str) -> str:
        name = "" if self.uri == root_uri else self.uri.rsplit("/", 1)[-1]
        return f"{name}#{self.pointer}"


class Resolver:
    def __init__(self, documents: Documents, root_uri: str, root: Any) -> None:
        self.documents = documents
        self.root_uri = root_uri
        documents.files[root_uri] = root
        # The registry reads files through `documents`, not through this resolver: a resolver the registry held
        # would be a cycle, and everything the load read (every parsed file) would wait for the cyclic collector.
        registry: Registry[Any] = Registry(retrieve=documents.resource).with_resource(  # type: ignore[call-arg]
            root_uri, Specification.OPAQUE.create_resource(root)
        )
        self.start = Place(registry.resolver(root_uri), root_uri, "")
        # (file, $ref) -> where it leads: a big document names the same components hundreds of thousands of times
        # (Stripe: ~500,000 lookups for ~70,000 distinct hops), and a lookup with its URL joins costs ~20 us.
        self._hops: dict[tuple[str, str], tuple[Any, Place, str]] = {}

    def deref(self, node: Any, at: Place) -> tuple[Any, Place, str | None]:
        """Follow `$ref`s from `node` to what they point at; returns it, its place, and the last ref's absolute
        URI (None when `node` was no reference)."""
        target: str | None = None
        hops = 0
        while isinstance(node, dict) and isinstance(node.get("$ref"), str):
            ref = node["$ref"]
            hops += 1
            if hops > MAX_REF_HOPS:
                raise Problem(f"$ref chain longer than {MAX_REF_HOPS} at {at.where(self.root_uri)}")
            hop = self._hops.get((at.uri, ref))
            if hop is not None:
                node, at, target = hop
                continue
            target = urljoin(at.uri, ref)
            try:
                resolved = at.resolver.lookup(ref)
            except Problem as exc:
                raise Problem(f"$ref {ref!r} at {at.where(self.root_uri)}: {exc}") from None
            except Unresolvable as exc:
                cause: BaseException | None = exc
                while cause is not None and not isinstance(cause, Problem):  # referencing wraps what retrieve raised
                    cause = cause.__cause__ or cause.__context__
                detail = str(cause) if cause else "cannot be resolved (no such place in the document)"
                raise Problem(f"$ref {ref!r} at {at.where(self.root_uri)}: {detail}") from None
            uri, fragment = urldefrag(target)
            place = Place(resolved.resolver, uri, fragment)
            self._hops[(at.uri, ref)] = (resolved.contents, place, target)
            node, at = resolved.contents, place
        return node, at, target
