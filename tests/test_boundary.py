"""Copying values out of the sandbox (progressive_mcp.calls.boundary): JSON data, shared parts counted every place
they appear, no recursion, and a stop at the budget or the deadline. The same through TOOL_EXECUTE is in
tests/test_code_mode_security.py (the amplification section)."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import math
from typing import Any

import pytest

from progressive_mcp.calls.boundary import DEEPLY_NESTED, ValueTooLarge, plain_copy

MB = 1024 * 1024


def amplified(levels: int, leaf: Any = 1) -> Any:
    """`x = [x] * 10`, `levels` times: 10**levels leaves in a few hundred bytes."""
    value = leaf
    for _ in range(levels):
        value = [value] * 10
    return value


def test_plain_data_is_copied_as_json_data() -> None:
    value = {
        "text": "é",
        1: (1, 2.5, None, True),
        None: {3, 1, 2},
        "nan": float("nan"),
        "inf": [float("inf")],
        "bytes": b"ab",
        "when": dt.date(2024, 1, 2),
        "frozen": frozenset({"b", "a"}),
    }
    copied = plain_copy(value, budget_bytes=MB)
    assert copied == {
        "text": "é",
        "1": [1, 2.5, None, True],
        "None": [1, 2, 3],
        "nan": None,
        "inf": [None],
        "bytes": "b'ab'",
        "when": "datetime.date(2024, 1, 2)",
        "frozen": ["a", "b"],
    }
    json.dumps(copied, allow_nan=False)  # JSON as it is: no tuple, set, NaN or object left


def test_the_copy_is_new_containers_not_the_sandbox_s() -> None:
    inner = [1, 2]
    value = [inner, inner]
    copied = plain_copy(value, budget_bytes=MB)
    assert copied == value and copied[0] is not inner and copied[0] is not copied[1]


def test_a_shared_part_costs_what_the_same_value_unshared_costs() -> None:
    shared = amplified(3)
    unshared = json.loads(json.dumps(shared))  # equal, nothing shared
    for budget in (1_000, 10_000, 20_000, 30_000, 100_000):
        outcomes = []
        for value in (shared, unshared):
            try:
                plain_copy(value, budget_bytes=budget)
                outcomes.append("copied")
            except ValueTooLarge:
                outcomes.append("refused")
        assert outcomes[0] == outcomes[1], budget
    assert plain_copy(shared, budget_bytes=100_000) == unshared


@pytest.mark.parametrize("levels", [6, 9, 12])
def test_an_amplified_value_stops_at_the_budget_not_after_copying_it(levels: int) -> None:
    with pytest.raises(ValueTooLarge) as raised:
        plain_copy(amplified(levels), budget_bytes=MB)
    assert raised.value.reason == "size"
    assert MB < raised.value.copied_bytes < MB + 1_000  # it stopped as soon as it passed the budget


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(["a" * 100_000] * 20, id="shared-string"),
        pytest.param(["\x00" * 100_000] * 2, id="text-json-escapes-six-fold"),
        pytest.param([10**4000] * 1_000, id="shared-big-int"),
        pytest.param(((1, 2, 3),) * 10**5, id="shared-tuple"),
        pytest.param([{"k": "v" * 1_000}] * 1_000, id="shared-dict"),
    ],
)
def test_each_kind_of_shared_part_counts_every_place_it_appears(value: Any) -> None:
    with pytest.raises(ValueTooLarge):
        plain_copy(value, budget_bytes=MB)


def test_a_tuple_key_is_copied_and_counted_like_a_value() -> None:
    key = (1,)
    for _ in range(6):
        key = (key,) * 10
    with pytest.raises(ValueTooLarge):
        plain_copy({key: 1}, budget_bytes=MB)
    assert plain_copy({(1, (2, 3)): "v"}, budget_bytes=MB) == {"[1, [2, 3]]": "v"}


def test_nesting_deeper_than_max_depth_is_cut_without_recursion() -> None:
    value: Any = []
    for _ in range(100_000):  # far past Python's recursion limit
        value = [value]
    copied = plain_copy(value, budget_bytes=64 * MB, max_depth=50)
    depth = 0
    while isinstance(copied, list):
        copied, depth = copied[0], depth + 1
    assert (copied, depth) == (DEEPLY_NESTED, 50)


def test_a_deadline_stops_the_copy() -> None:
    ticks = itertools.count()
    with pytest.raises(ValueTooLarge) as raised:
        plain_copy(amplified(7), budget_bytes=10**12, ends_at=5.0, clock=lambda: float(next(ticks)))
    assert raised.value.reason == "time"


class Holder:
    def __repr__(self) -> str:  # what a repr of something holding an amplified value would cost
        raise AssertionError("the copy must not repr an object it does not know")


def test_objects_without_a_json_form_become_short_text_without_their_repr() -> None:
    big = amplified(9)
    copied = plain_copy([Holder(), ValueError(big), ValueError("bad"), KeyError(), math.pi], budget_bytes=MB)
    assert copied == ["<Holder>", "ValueError(…)", "ValueError('bad')", "KeyError()", math.pi]


def test_an_int_too_long_to_write_as_a_number_becomes_text() -> None:
    copied = plain_copy([10**5000, 10**4000], budget_bytes=MB)
    assert copied[0] == "<an integer of about 5,000 digits>" and copied[1] == 10**4000
    json.dumps(copied)
