"""YAML alias expansion is bounded while a file is read (progressive_mcp.sources.bounded_yaml), for every YAML the
project takes from a user: the node graph is measured before any value is built, so a few hundred bytes of
"billion laughs" are refused at once instead of costing gigabytes in whatever walks the data afterwards.

Run with: .venv/bin/python -m pytest tests/test_bounded_yaml.py -q
"""

from __future__ import annotations

import json
import random

import pytest
import yaml

from progressive_mcp.sources import bounded_yaml
from progressive_mcp.sources.bounded_yaml import (
    MAX_ALIAS_CHARS,
    MAX_ALIAS_VALUES,
    AliasExpansionError,
    safe_load,
)


def laughs(levels: int = 9, fan_out: int = 10, indent: str = "") -> str:
    """`levels` anchored lists, each holding `fan_out` aliases of the one before: fan_out**levels values."""
    lines = [f"{indent}l0: &l0 [{', '.join(['lol'] * fan_out)}]"]
    lines += [f"{indent}l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * fan_out)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def test_ordinary_aliases_load_as_before() -> None:
    text = "base: &base {retries: 2, timeout: 5}\nfast: *base\nslow: {<<: *base, timeout: 60}\nwords: [&w a, *w]\n"
    assert safe_load(text) == yaml.safe_load(text)


@pytest.mark.timeout(60)
def test_a_billion_laughs_is_refused_before_it_is_built() -> None:
    with pytest.raises(AliasExpansionError) as caught:
        safe_load(laughs())
    message = str(caught.value)
    assert f"YAML aliases expand to more than {MAX_ALIAS_VALUES:,} values" in message
    assert message.startswith("line ")  # where the expansion passes the limit


@pytest.mark.timeout(60)
def test_a_long_text_aliased_many_times_is_refused() -> None:
    text = "big: &big " + "x" * 100_000 + "\nall: [" + ", ".join(["*big"] * 200) + "]\n"
    with pytest.raises(AliasExpansionError, match=f"more than {MAX_ALIAS_CHARS:,} characters of text"):
        safe_load(text)


def test_expansion_within_the_limits_is_allowed() -> None:
    data = safe_load(laughs(levels=5))  # 10**5 values
    assert len(json.dumps(data["l4"])) > 100_000


def test_a_node_that_contains_itself_is_refused() -> None:
    with pytest.raises(AliasExpansionError, match="refers to a node that contains it"):
        safe_load("a: &loop {b: [1, *loop]}\n")


def test_it_is_a_yaml_error_so_every_reader_reports_it() -> None:
    assert issubclass(AliasExpansionError, yaml.YAMLError)


def test_the_root_aliased_inside_itself_is_refused() -> None:
    with pytest.raises(AliasExpansionError, match="refers to a node that contains it"):
        safe_load("&root [1, *root]\n")


def _expanded(node: yaml.Node) -> tuple[int, int]:
    """(values, characters) of a node with every alias expanded, by walking every path (small graphs only)."""
    if isinstance(node, yaml.ScalarNode):
        return 1, len(node.value)
    children = [part for pair in node.value for part in pair] if isinstance(node, yaml.MappingNode) else node.value
    sizes = [_expanded(child) for child in children]
    return 1 + sum(v for v, _ in sizes), sum(c for _, c in sizes)


def _random_document(rng: random.Random, depth: int, anchors: list[str]) -> str:
    if depth > 3 or rng.random() < 0.3:
        return "*" + rng.choice(anchors) if anchors and rng.random() < 0.4 else f"s{rng.randint(0, 999)}"
    anchor = f"a{len(anchors)}_{depth}_{rng.randint(0, 10**6)}" if rng.random() < 0.4 else None
    members = [_random_document(rng, depth + 1, anchors) for _ in range(rng.randint(0, 4))]
    text = (
        "[" + ", ".join(members) + "]"
        if rng.random() < 0.5
        else "{" + ", ".join(f"k{i}: {m}" for i, m in enumerate(members)) + "}"
    )
    if anchor is None:
        return text
    anchors.append(anchor)
    return f"&{anchor} {text}"


def test_what_aliases_add_is_counted_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    """The measuring refuses exactly when the expanded document exceeds what is written by more than a limit
    (random documents with anchors and aliases, against a walk of every path)."""
    aliased = 0
    for seed in range(400):
        text = _random_document(random.Random(seed), 0, [])
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        if not isinstance(node, yaml.CollectionNode):
            continue
        written, expanded = _unique(node), _expanded(node)
        added = (expanded[0] - written[0], expanded[1] - written[1])
        aliased += added[0] > 0
        monkeypatch.setattr(bounded_yaml, "MAX_ALIAS_VALUES", added[0])
        monkeypatch.setattr(bounded_yaml, "MAX_ALIAS_CHARS", added[1])
        assert bounded_yaml.alias_problem(node) is None, text
        if added[0] > 0:
            monkeypatch.setattr(bounded_yaml, "MAX_ALIAS_VALUES", added[0] - 1)
            assert "values" in (bounded_yaml.alias_problem(node) or ""), text
            monkeypatch.setattr(bounded_yaml, "MAX_ALIAS_VALUES", added[0])
        if added[1] > 0:
            monkeypatch.setattr(bounded_yaml, "MAX_ALIAS_CHARS", added[1] - 1)
            assert "characters" in (bounded_yaml.alias_problem(node) or ""), text
    assert aliased > 50  # the documents do repeat nodes


def _unique(root: yaml.Node) -> tuple[int, int]:
    """(values, characters) a document writes out: each node once, however often it is referenced."""
    seen: dict[int, yaml.Node] = {}
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen[id(node)] = node
        if isinstance(node, yaml.MappingNode):
            stack += [part for pair in node.value for part in pair]
        elif isinstance(node, yaml.SequenceNode):
            stack += node.value
    scalars = [n for n in seen.values() if isinstance(n, yaml.ScalarNode)]
    return len(seen), sum(len(n.value) for n in scalars)
