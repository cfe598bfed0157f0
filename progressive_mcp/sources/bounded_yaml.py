"""YAML loading with alias expansion bounded while the file is read, for every YAML the project takes from a
user (spec files, vocabularies, OpenAPI documents, eval manifests). Example::

    data = safe_load("a: &x [1, 2]\\nb: *x\\n")          # {'a': [1, 2], 'b': [1, 2]}
    safe_load(billion_laughs)                            # raises AliasExpansionError

PyYAML builds an aliased node once and shares it, so a few hundred bytes of `&a [*b, *b, ...]` ("billion laughs")
load quickly and cheaply; the cost comes later, in whatever walks or copies the data once per reference (a
`json.dumps`, a deep copy, a schema converter). So the composed node graph is measured before any Python value is
built: its size once every alias is expanded (values, and characters of text), memoised per node so the
measuring costs what the file holds, not what it expands to. Aliases may add at most `MAX_ALIAS_VALUES` values
and `MAX_ALIAS_CHARS` characters to what the file writes out, and may not refer to a node that contains them.
JSON needs no such bound: it has no aliases, so what it parses to is never larger than its text.
"""

from __future__ import annotations

from typing import Any

import yaml

# Values (scalars, lists, mappings, keys included) and characters of scalar text that aliases may add to what a
# file writes out: far beyond any real use (an anchored description in every tool of a large spec is ~10^5
# characters), far below what takes a process down (the 804-byte file expands to 10^9 values).
MAX_ALIAS_VALUES = 1_000_000
MAX_ALIAS_CHARS = 10_000_000
_SATURATED = 1 << 62  # sizes stop growing here: only "over the limit" matters, and huge integers cost time

_Base: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class AliasExpansionError(yaml.YAMLError):
    """A YAML file whose aliases expand too far, or refer to a node that contains them. The message says which
    limit was passed and where; the caller names the file."""


class BoundedAliases:
    """A loader mixin: the document's node graph is measured (`alias_problem`) before it is constructed."""

    def get_single_data(self) -> Any:
        node = self.get_single_node()  # type: ignore[attr-defined]
        if node is None:
            return None
        problem = alias_problem(node)
        if problem is not None:
            raise AliasExpansionError(problem)
        return self.construct_document(node)  # type: ignore[attr-defined]


class BoundedSafeLoader(BoundedAliases, _Base):  # type: ignore[misc,valid-type]
    """PyYAML's safe loader (libyaml's when installed) with alias expansion bounded."""


def safe_load(text: str) -> Any:
    """`yaml.safe_load` with alias expansion bounded (raises AliasExpansionError, a yaml.YAMLError)."""
    return yaml.load(text, Loader=BoundedSafeLoader)


def alias_problem(root: yaml.Node) -> str | None:
    """Why a composed YAML document is unsafe to build: a node that contains itself, or aliases that add more
    than the limits to what is written. None when it is fine. Iterative, and linear in the nodes written."""
    sizes: dict[int, tuple[int, int]] = {}  # id(node) -> (values, characters) with every alias expanded
    finished: list[yaml.Node] = []  # collections in the order their sizes were known (children first)
    on_path: set[int] = set()
    written_values = written_chars = 0
    if isinstance(root, yaml.ScalarNode):
        return None
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            on_path.discard(key)
            values, chars = 1, 0
            for child in _children(node):
                child_values, child_chars = sizes[id(child)]
                values += child_values
                chars += child_chars
            sizes[key] = (min(values, _SATURATED), min(chars, _SATURATED))
            finished.append(node)
            continue
        if key in sizes:  # an alias of a node measured already: its size counts again, its nodes do not
            continue
        if key in on_path:
            line = node.start_mark.line + 1
            return f"line {line}: a YAML alias refers to a node that contains it (a recursive structure)"
        written_values += 1
        on_path.add(key)
        stack.append((node, True))
        for child in _children(node):
            child_key = id(child)
            if child_key in sizes:
                continue
            if type(child) is yaml.ScalarNode:  # measured here: most nodes are scalars, and they have no children
                length = len(child.value)
                sizes[child_key] = (1, length)
                written_values += 1
                written_chars += length
            else:
                stack.append((child, False))
    values, chars = sizes[id(root)]
    if values - written_values > MAX_ALIAS_VALUES:
        where = _first_over(finished, sizes, 0, written_values + MAX_ALIAS_VALUES)
        return (
            f"{where}YAML aliases expand to more than {MAX_ALIAS_VALUES:,} values beyond the {written_values:,} the "
            "file writes out; write the values out instead"
        )
    if chars - written_chars > MAX_ALIAS_CHARS:
        where = _first_over(finished, sizes, 1, written_chars + MAX_ALIAS_CHARS)
        return (
            f"{where}YAML aliases expand to more than {MAX_ALIAS_CHARS:,} characters of text beyond the "
            f"{written_chars:,} the file writes out; write the values out instead"
        )
    return None


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _first_over(finished: list[yaml.Node], sizes: dict[int, tuple[int, int]], measure: int, limit: int) -> str:
    """`line N: ` of the innermost collection that alone expands past `limit` (where the blow-up is)."""
    for node in finished:
        if sizes[id(node)][measure] > limit:
            return f"line {node.start_mark.line + 1}: "
    return ""
