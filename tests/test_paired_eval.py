"""bench/paired_eval.py: two runs of `eval --catalogs --json --outcomes` compared query by query, with a sign test
over the queries that flipped."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest
from bench_module import load_bench


@pytest.fixture(scope="module")
def paired() -> ModuleType:
    return load_bench("paired_eval")


def outcome(qid: str, rank: int | None, *, split: str = "dev", positive: bool = True, shown: bool = True) -> dict:
    return {"id": qid, "split": split, "positive": positive, "rank": rank, "no_match": rank is None, "shown": shown}


def run(*catalogs: tuple[str, Any, list[dict[str, Any]]]) -> dict[str, Any]:
    return {"catalogs": [{"name": name, "role": role, "outcomes": outcomes} for name, role, outcomes in catalogs]}


def test_the_sign_test_is_the_exact_binomial(paired: ModuleType) -> None:
    assert paired.sign_test(0, 0) == 1.0
    assert paired.sign_test(3, 3) == 1.0
    assert paired.sign_test(5, 0) == pytest.approx(2 / 32)
    assert paired.sign_test(0, 5) == pytest.approx(2 / 32)
    assert paired.sign_test(7, 1) == pytest.approx(2 * 9 / 256)
    assert paired.sign_test(13, 5) == pytest.approx(0.0963, abs=1e-4)


def test_flips_count_each_figure_both_ways(paired: ModuleType) -> None:
    pairs = [
        (outcome("a", 2), outcome("a", 1)),  # R@1 won
        (outcome("b", 1), outcome("b", 7)),  # R@1 and R@5 lost
        (outcome("c", None), outcome("c", 3)),  # R@5 won, false no-match won
        (outcome("d", 4, shown=False), outcome("d", 4)),  # shown won
        (outcome("n", None, positive=False), outcome("n", 1, positive=False)),  # an off-topic query now answered
    ]
    pairs[4][1]["no_match"] = False
    assert paired.flips(pairs) == {
        "R@1": (1, 1),
        "R@5": (1, 1),
        "shown": (1, 0),
        "no-match": (0, 1),
        "false no-match": (1, 0),
    }


def test_rows_follow_the_roles_by_split_and_pool_them(paired: ModuleType) -> None:
    mixed = {"dev": "tuning", "test": "held-out"}
    before = run(
        ("music", mixed, [outcome("m1", 2), outcome("m2", 1, split="test")]),
        ("shop", "held-out", [outcome("s1", 1), outcome("s2", 3)]),
        ("finance", "reference", [outcome("f1", 1)]),
    )
    after = run(
        ("music", mixed, [outcome("m1", 1), outcome("m2", 2, split="test")]),
        ("shop", "held-out", [outcome("s2", 1), outcome("s1", 1)]),  # matched by id, not by position
        ("finance", "reference", [outcome("f1", 1)]),
    )
    rows = paired.groups(before, after)
    assert sorted(rows) == [
        "finance (reference)",
        "music [dev] (tuning)",
        "music [test] (held-out)",
        "pooled held-out",
        "pooled tuning",
        "shop (held-out)",
    ]
    assert paired.flips(rows["pooled held-out"])["R@1"] == (1, 1)
    assert paired.flips(rows["pooled tuning"])["R@1"] == (1, 0)
    text = paired.report(before, after)
    assert text.splitlines()[-2].startswith("pooled tuning") and "+1/-0 (1.00)" in text.splitlines()[-2]
    tuning_only = [line.split("  ")[0] for line in paired.report(before, after, frozenset({"tuning"})).splitlines()]
    assert tuning_only[1:-1] == ["music [dev] (tuning)", "pooled tuning"]


def test_files_without_outcomes_are_refused(paired: ModuleType) -> None:
    with pytest.raises(SystemExit, match="--outcomes"):
        paired.report({"catalogs": [{"name": "x", "role": "tuning"}]}, {"catalogs": []})
