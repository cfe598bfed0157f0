"""Typed stubs say exactly what a script receives: for every one of the 128 tools, the sample upstream's answer,
written into a script as a literal of the tool's return type, passes Monty's type checker (ty) against the stubs;
and the checker bites (a wrong key or value type fails).

Long series and lists are cut to their first two entries first (a map keyed by dates is a `dict[str, Bar]`: two
entries check the same as two thousand); objects with fixed keys are kept whole.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pydantic_monty
import pytest
from test_sample_catalog import key_for, valid_arguments  # the sample-catalog tests' argument helpers

from progressive_mcp.calls.stubs import forced_json, python_name, tool_stubs
from progressive_mcp.calls.upstream import UpstreamClient
from progressive_mcp.offline.sample_upstream import SampleUpstream
from progressive_mcp.sources import load_catalog

CATALOG = load_catalog()
ALL_TOOLS = [t.name for t in CATALOG.tools]
SERIES_MIN_MEMBERS = 12  # as in progressive_mcp.calls.shaping: a dict this long whose values are containers is a series


@pytest.fixture(scope="module")
def answers() -> Iterator[dict[str, Any]]:
    with SampleUpstream() as sample:
        client = UpstreamClient(CATALOG.api, base_url=sample.url, retries=0)
        found = {}
        for tool in CATALOG.tools:
            arguments = valid_arguments(CATALOG, tool, typical=True)
            if forced_json(tool):
                arguments["datatype"] = "json"  # what a script's call sends
            found[tool.name] = client.call(tool, arguments, api_key=key_for(tool)).payload
        yield found


@pytest.fixture(scope="module")
def pool() -> Iterator[Any]:
    with pydantic_monty.Monty(min_processes=1, max_processes=2) as monty:
        yield monty


def trimmed(value: Any) -> Any:
    if isinstance(value, list):
        return [trimmed(v) for v in value[:2]]
    if isinstance(value, dict):
        items = list(value.items())
        if len(items) >= SERIES_MIN_MEMBERS and all(isinstance(v, dict | list) for _, v in items):
            items = items[:2]
        return {k: trimmed(v) for k, v in items}
    return value


def return_type(stubs: str, name: str) -> str:
    found = re.search(rf"async def {re.escape(python_name(name))}\(.*\) -> (.+):\n", stubs)
    assert found, stubs
    return found.group(1)


def type_check(pool: Any, stubs: str, code: str) -> str | None:
    """None when `code` passes the checker against `stubs`, else the checker's message."""
    with pool.checkout(type_check=True, type_check_stubs=stubs, type_check_format="concise") as session:
        try:
            session.feed_run(code)
        except pydantic_monty.MontyTypingError as exc:
            return str(exc.display())
    return None


@pytest.mark.parametrize("name", ALL_TOOLS)
def test_the_sample_answer_type_checks_as_the_stubs_return_type(name: str, answers: dict[str, Any], pool: Any) -> None:
    tool = CATALOG.get(name)
    stubs = tool_stubs([tool])
    returns = return_type(stubs, name)
    assert returns != "Any", "every tool has an output description"
    problem = type_check(pool, stubs, f"answer: {returns} = {trimmed(answers[name])!r}\n")
    assert problem is None, problem


@pytest.mark.parametrize(
    ("name", "break_it"),
    [
        ("GLOBAL_QUOTE", lambda a: a["Global Quote"].pop("05. price")),
        ("GLOBAL_QUOTE", lambda a: a["Global Quote"].update({"11. extra": "1"})),
        ("TIME_SERIES_DAILY", lambda a: next(iter(a["Time Series (Daily)"].values())).update({"4. close": 1.5})),
        ("RSI", lambda a: a["Meta Data"].update({"5: Time Period": "fourteen"})),
        ("OVERVIEW", lambda a: a.pop("Symbol")),
        ("NEWS_SENTIMENT", lambda a: a["feed"][0].pop("title")),
    ],
    ids=["missing key", "unknown key", "number for text", "text for a number", "overview symbol", "news title"],
)
def test_the_checker_refuses_an_answer_that_does_not_fit(
    name: str, break_it: Any, answers: dict[str, Any], pool: Any
) -> None:
    stubs = tool_stubs([CATALOG.get(name)])
    answer = trimmed(answers[name])
    break_it(answer)
    assert type_check(pool, stubs, f"answer: {return_type(stubs, name)} = {answer!r}\n") is not None


def test_one_stub_module_for_the_whole_catalog_type_checks(pool: Any) -> None:
    """Shared types are declared once even when many tools use them."""
    stubs = tool_stubs(CATALOG.tools)
    assert type_check(pool, stubs, "x = 1\n") is None
    declared = re.findall(r"^(\w+) = |^class (\w+)\(", stubs, re.MULTILINE)
    names = [a or b for a, b in declared]
    assert len(names) == len(set(names))
