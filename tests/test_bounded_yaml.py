"""YAML alias expansion is bounded while a file is read (progressive_mcp.sources.bounded_yaml), for every YAML the
project takes from a user: the node graph is measured before any value is built, so a few hundred bytes of
"billion laughs" are refused at once instead of costing gigabytes in whatever walks the data afterwards.

Run with: .venv/bin/python -m pytest tests/test_bounded_yaml.py -q
"""

from __future__ import annotations

import json

import pytest
import yaml

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
