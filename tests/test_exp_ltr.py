"""bench/_exp_ltr.py's fit and replay on synthetic queries: the learned fusion it compares with the shipped one can
find weights that exist, and orders candidates as the engine would after its priors (issue 29)."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest
from bench_module import load_bench

np = pytest.importorskip("numpy")


@pytest.fixture(scope="module")
def ltr() -> ModuleType:
    return load_bench("_exp_ltr")


def synthetic(ltr: ModuleType, weights: dict[str, float], n_queries: int = 60, seed: int = 7) -> list[Any]:
    """Queries of 8 candidates with random features, the right tool the one these weights score best."""
    rng = np.random.default_rng(seed)
    queries = []
    for i in range(n_queries):
        features = {name: rng.random(8) for name in weights}
        score = sum(w * features[name] for name, w in weights.items())
        grades = np.zeros(8, dtype=int)
        grades[int(np.argmax(score))] = 2
        queries.append(ltr.Query(f"q{i}", list(range(8)), features, np.zeros(8), grades, True))
    return queries


@pytest.mark.parametrize("form", ["lin", "log"])
@pytest.mark.parametrize("loss", ["pair", "list", "lambda"])
def test_the_fit_finds_weights_that_put_the_right_tool_first(
    ltr: ModuleType, monkeypatch: pytest.MonkeyPatch, form: str, loss: str
) -> None:
    monkeypatch.setitem(ltr.FORM, "value", form)
    monkeypatch.setitem(ltr.LOSS, "value", loss)
    names = ["rr_lex", "rr_sem", "cos"]
    train = synthetic(ltr, {"rr_lex": 1.0, "rr_sem": 0.5, "cos": -0.5})
    w = ltr.fit(train, names, 0.001)
    assert w[0] > w[1] > 0 > w[2]  # the planted signs and order of the weights
    test = synthetic(ltr, {"rr_lex": 1.0, "rr_sem": 0.5, "cos": -0.5}, seed=8)
    first = sum(ltr.order(q, names, w)[0] == int(np.argmax(q.grades)) for q in test)
    assert first >= 0.8 * len(test)


@pytest.mark.parametrize("form", ["lin", "log"])
def test_the_priors_act_as_the_engine_applies_them_after_the_fusion(
    ltr: ModuleType, monkeypatch: pytest.MonkeyPatch, form: str
) -> None:
    monkeypatch.setitem(ltr.FORM, "value", form)
    features = {"rr_lex": np.array([1.0, 0.9, 0.2]), "rr_sem": np.array([0.5, 0.5, 0.1])}
    # The first candidate is the other mood: 1 / 1.4 of its score (lin), log(1 / 1.4) added (log).
    prior = np.log(np.array([1 / 1.4, 1.0, 1.0]))
    query = ltr.Query("q", [10, 11, 12], features, prior, np.array([0, 2, 0]), True)
    assert ltr.order(query, ["rr_lex", "rr_sem"], np.array([1.0, 0.5])) == [11, 10, 12]
    without = ltr.Query("q", [10, 11, 12], features, np.zeros(3), np.array([0, 2, 0]), True)
    assert ltr.order(without, ["rr_lex", "rr_sem"], np.array([1.0, 0.5])) == [10, 11, 12]
