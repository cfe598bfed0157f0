"""Sweeps over a whole catalog or document set: `make test` keeps the first case of each kind (one per distinct
path through the code), `make test-slow` runs all of them (docs/development.md#what-make-test-runs)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Any

import pytest


def one_per_kind(cases: Iterable[Any], kind: Callable[[Any], Hashable]) -> list[Any]:
    """`cases` as pytest params, each after the first of its `kind` marked `slow`."""
    seen: set[Hashable] = set()
    params = []
    for case in cases:
        first = kind(case) not in seen
        seen.add(kind(case))
        params.append(case if first else pytest.param(case, marks=pytest.mark.slow))
    return params
