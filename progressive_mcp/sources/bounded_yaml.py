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

from collections import Counter
from collections.abc import Iterable
from itertools import chain
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
    """A loader mixin: the document's node graph is measured (`alias_problem`) before it is constructed.

    An alias names an anchor (`&name`) written before it (else the composer refuses it), so a text without `&`
    has no alias and its nodes form a tree: nothing to measure (most files of a big document)."""

    def __init__(self, stream: Any) -> None:
        self.anchored = not isinstance(stream, str) or "&" in stream
        super().__init__(stream)  # type: ignore[call-arg]

    def get_single_data(self) -> Any:
        node = self.get_single_node()  # type: ignore[attr-defined]
        if node is None:
            return None
        problem = alias_problem(node) if self.anchored else None
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
    than the limits to what is written. None when it is fine. Linear in the nodes written.

    Most documents use no alias, or a few: every node is counted once (by its references, at C speed where it
    can be), and only the nodes under a node referenced twice are measured one by one. What aliases add is
    then each such node's expanded size once per reference from outside them, less what they write."""
    if not isinstance(root, yaml.CollectionNode):
        return None
    references, nodes = _references(root)
    shared = [key for key, count in references.items() if count > 1]
    if not shared:
        return None
    measured = _Measured()
    problem = measured.walk([nodes[key] for key in shared])
    if problem is not None:
        return problem
    added = [0, 0]  # values, characters
    largest: tuple[int, yaml.Node] | None = None  # the node whose repeats add the most values
    for key in shared:
        outside = references[key] - measured.within[key]  # references from nodes no alias repeats
        for measure in (0, 1):
            added[measure] += outside * measured.sizes[key][measure]
        if largest is None or outside * measured.sizes[key][0] > largest[0]:
            largest = (outside * measured.sizes[key][0], nodes[key])
    added[0] -= measured.written[0]
    added[1] -= measured.written[1]
    for measure, limit, what in ((0, MAX_ALIAS_VALUES, "values"), (1, MAX_ALIAS_CHARS, "characters of text")):
        if added[measure] > limit:
            written = _written(nodes.values(), measure)
            where = measured.first_over(measure, written + limit)
            if not where and largest is not None:
                where = f"line {largest[1].start_mark.line + 1}: "
            return (
                f"{where}YAML aliases expand to more than {limit:,} {what} beyond the {written:,} the file writes "
                "out; write the values out instead"
            )
    return None


def _references(root: yaml.Node) -> tuple[Counter[int], dict[int, yaml.Node]]:
    """How often each node is referenced (the root once), and every node by id: breadth first, each node's
    children listed once however often it is referenced."""
    references: Counter[int] = Counter({id(root): 1})
    nodes: dict[int, yaml.Node] = {id(root): root}
    level = [root]
    while level:
        pairs = [node.value for node in level if type(node) is yaml.MappingNode]
        items = [node.value for node in level if type(node) is yaml.SequenceNode]
        children = [*chain.from_iterable(chain.from_iterable(pairs)), *chain.from_iterable(items)]
        keys = [*map(id, children)]
        references.update(keys)
        fresh = {key: child for key, child in zip(keys, children, strict=True) if key not in nodes}
        nodes.update(fresh)
        level = [child for child in fresh.values() if type(child) is not yaml.ScalarNode]
    return references, nodes


class _Measured:
    """Expanded sizes (values, characters) of the nodes under some starting nodes, memoised per node."""

    def __init__(self) -> None:
        self.sizes: dict[int, tuple[int, int]] = {}
        self.within: Counter[int] = Counter()  # references to a node from the nodes measured
        self.written = [0, 0]  # values and characters the measured nodes write out
        self.finished: list[yaml.Node] = []  # collections in the order their sizes were known (children first)

    def walk(self, starts: list[yaml.Node]) -> str | None:
        """Measure everything under `starts`; the problem if a node contains itself. Iterative."""
        sizes, on_path = self.sizes, set()
        stack: list[tuple[yaml.Node, bool]] = [(node, False) for node in starts]
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
                self.finished.append(node)
                continue
            if key in sizes:  # an alias of a node measured already: its size counts again, its nodes do not
                continue
            if key in on_path:
                line = node.start_mark.line + 1
                return f"line {line}: a YAML alias refers to a node that contains it (a recursive structure)"
            if type(node) is yaml.ScalarNode:  # a start may be a scalar (an aliased string)
                self._scalar(node)
                continue
            self.written[0] += 1
            on_path.add(key)
            stack.append((node, True))
            for child in _children(node):
                child_key = id(child)
                self.within[child_key] += 1
                if child_key in sizes:
                    continue
                if type(child) is yaml.ScalarNode:  # measured here: most nodes are scalars, without children
                    self._scalar(child)
                else:
                    stack.append((child, False))
        return None

    def _scalar(self, node: yaml.Node) -> None:
        length = len(node.value)
        self.sizes[id(node)] = (1, length)
        self.written[0] += 1
        self.written[1] += length

    def first_over(self, measure: int, limit: int) -> str:
        """`line N: ` of the innermost collection that alone expands past `limit` (where the blow-up is)."""
        for node in self.finished:
            if self.sizes[id(node)][measure] > limit:
                return f"line {node.start_mark.line + 1}: "
        return ""


def _written(nodes: Iterable[yaml.Node], measure: int) -> int:
    """Values (0) or characters (1) a document writes out, each node once."""
    if measure == 0:
        return sum(1 for _ in nodes)
    return sum(len(node.value) for node in nodes if type(node) is yaml.ScalarNode)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if type(node) is yaml.MappingNode:
        return [part for pair in node.value for part in pair]
    if type(node) is yaml.SequenceNode:
        return list(node.value)
    return []
