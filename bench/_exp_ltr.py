"""Experiment (issue 29): a LEARNED linear fusion of the ranking signals against the shipped reciprocal-rank fusion.

    .venv/bin/python bench/_exp_ltr.py          # leave-one-catalog-out tables and the weights fitted on all three
    .venv/bin/python bench/_exp_ltr.py --features rr_lex,rr_sem,cos --form lin --loss list --l2 0.1,1
    .venv/bin/python bench/_exp_ltr.py --search --form lin --loss pair   # every subset of up to 4 --features

Where `fusion.SemanticFusion.fuse` runs on an answered query of an uncurated catalog, the candidates are the union
of the lexical top `fusion.DEPTH` and MiniLM's top `DEPTH` (what the shipped merge sees). Each (query, candidate)
gets features that name no catalog, tool or word (`FEATURES`). A candidate's score is w . x (`--form lin`, the
shipped merge's own form: it is w = (1, 0.5) on rr_lex, rr_sem) or exp(w . x) (`--form log`); the engine's mood and
item priors (`SearchIndex._by_intent`, `_by_need`) multiply it after the fusion, as they multiply the shipped score,
so the fit sees them as fixed factors (lin) or offsets log(factor) (log). The weights are fitted by pairwise
logistic regression (`--loss pair`: every grade-2 tool above every tool not relevant) or a softmax over the
candidates (`--loss list`), each query weighing one, L2 toward 0 (or toward the shipped weights, `--anchor`), on
two of the three tuning sets and scored on the third (leave-one-catalog-out), beside the shipped fusion on the same
queries; then fitted on all three. The scoring is a replay, checked against the engine: a recorded query's final
ranking is its candidates in the order of their scores after the priors, and every other query (off-topic,
rescued to nothing, curated) keeps the engine's own answer.

Tuning sets only (Last.fm all, Spotify's and Stripe's dev splits); never run on held-out sets. Result (docs/
search.md, "Not kept"): no fit beats the shipped fusion on R@1 without a tuning set losing several queries.

    .venv/bin/python bench/_exp_ltr.py --nested --form lin --loss pair,list,lambda --l2 0.01,0.03,0.1,0.3 \
        --features rr_lex,rr_sem,lex_first,sem_first,lex_margin,sem_margin     # the closest: the margins
"""

from __future__ import annotations

import argparse
import itertools
import math
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from progressive_mcp.search import dense, fusion, index
from progressive_mcp.search.evaluation import K, engine_ranker, first_hit_rank, run_eval
from progressive_mcp.search.records import without_ids

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _exp_rank import load_sets

TUNING = ("lastfm", "spotify-dev", "stripe-dev")
_shipped_fuse = fusion.SemanticFusion.fuse
_shipped_fused = index.SearchIndex._fused
_context: dict[str, Any] = {}


@dataclass
class Query:
    """One fused query of a tuning set: its candidates, their features, their prior factors and the labels."""

    text: str
    candidates: list[int]
    features: dict[str, np.ndarray]  # name -> one value per candidate
    log_prior: np.ndarray  # log of the mood and item priors `_fused` applies after the fusion
    grades: np.ndarray  # per candidate: 2 (right tool), 1 (partly), 0
    answered: bool  # not off-topic: the queries the fit and the table are about


def _words(text: str) -> set[str]:
    return {w[:-1] if len(w) > 3 and w.endswith("s") else w for w in re.findall(r"[a-z0-9]+", text.lower())}


def features_of(
    query: str,
    lexical: Sequence[tuple[int, float]],
    semantic: Sequence[int],
    cos: np.ndarray,
    ranking: Any,
    engine: Any,
    tools: Sequence[Any],
) -> tuple[list[int], dict[str, np.ndarray]]:
    """The candidates of one fused query and every feature considered, one array each."""
    depth = fusion.DEPTH
    lex = [doc for doc, _ in lexical[:depth]]
    sem = list(semantic[:depth])
    candidates = list(dict.fromkeys([*lex, *sem]))
    lex_rank = {doc: r for r, doc in enumerate(lex, 1)}
    sem_rank = {doc: r for r, doc in enumerate(sem, 1)}
    lex_score = dict(lexical)
    best_lex = max((s for _, s in lexical[:depth]), default=1.0) or 1.0
    analysis = ranking.analysis if ranking is not None else None
    relative = min(max(ranking.relative, 0.0), 1.0) if ranking is not None and not ranking.semantic else 0.0
    query_words = _words(without_ids(query))
    # How decisive each ranking's first place is: the lexical second's score short of the first's (as a share), and
    # MiniLM's second cosine short of its first.
    lex_scores = [score for _, score in lexical[:2]]
    lex_margin = 1.0 - lex_scores[1] / lex_scores[0] if len(lex_scores) == 2 and lex_scores[0] > 0 else 1.0
    sem_margin = float(cos[sem[0]] - cos[sem[1]]) if len(sem) >= 2 else 0.0
    k = fusion.K
    f: dict[str, list[float]] = {name: [] for name in FEATURES}
    for doc in candidates:
        rl = (k + 1) / (k + lex_rank[doc]) if doc in lex_rank else 0.0
        rs = (k + 1) / (k + sem_rank[doc]) if doc in sem_rank else 0.0
        f["rr_lex"].append(rl)
        f["rr_sem"].append(rs)
        f["lex_share"].append(lex_score.get(doc, 0.0) / best_lex if doc in lex_rank else 0.0)
        f["cos"].append(float(cos[doc]))
        f["lex_first"].append(1.0 if lex_rank.get(doc) == 1 else 0.0)
        f["sem_first"].append(1.0 if sem_rank.get(doc) == 1 else 0.0)
        f["lex_margin"].append(lex_margin if lex_rank.get(doc) == 1 else 0.0)
        f["sem_margin"].append(sem_margin if sem_rank.get(doc) == 1 else 0.0)
        f["rel_x_lex"].append(relative * rl)
        f["rel_x_sem"].append(relative * rs)
        mood = engine._reads[doc]
        intent = analysis.intent if analysis is not None else None
        f["mood_off"].append(
            1.0 if intent is not None and mood is not None and mood is (intent != index._READ) else 0.0
        )
        f["item_read"].append(
            1.0 if analysis is not None and not analysis.names_record and engine._item_reads[doc] else 0.0
        )
        names = [w for w in dense.split_name(tools[doc].name) if len(w) > 2]
        covered = _words(" ".join(names)) & query_words
        f["name_cover"].append(len(covered) / max(len(_words(" ".join(names))), 1))
    return candidates, {name: np.asarray(values) for name, values in f.items()}


# Every feature considered, per (query, candidate). A query-wide value (the lexical confidence) changes no order
# alone, so it enters as a product with a rank feature; the cosine's gap to the query's best cosine orders the
# candidates exactly as the cosine does, so it is left out.
FEATURES = (
    "rr_lex",  # (K + 1) / (K + lexical rank), 0 outside the lexical top DEPTH
    "rr_sem",  # (K + 1) / (K + MiniLM rank), 0 outside MiniLM's top DEPTH
    "lex_share",  # the lexical score as a share of the query's best (after the priors), 0 outside the top DEPTH
    "cos",  # the MiniLM cosine of the tool's document and the query
    "lex_first",  # 1 for the lexical first place
    "sem_first",  # 1 for MiniLM's first place
    "lex_margin",  # for the lexical first place: 1 - the second's score / its own (0 elsewhere)
    "sem_margin",  # for MiniLM's first place: its cosine less the second's (0 elsewhere)
    "rel_x_lex",  # the lexical confidence (`Ranking.relative`, 0 for a rescued query) times rr_lex
    "rel_x_sem",  # the same times rr_sem
    "mood_off",  # 1 where the tool's mood is the other than the query's (`index._intent`)
    "item_read",  # 1 for a read of one record by its id, the query naming no record
    "name_cover",  # the share of the tool's name words (3 letters and more) the query says
)
# The default set (10): item_read is left out, its weight stays near 0 in every fit (`_by_need` already applies it);
# the two margins were tried after (see docs/search.md).
DEFAULT = ",".join(name for name in FEATURES if name not in ("item_read", "lex_margin", "sem_margin"))


def _cosines(self: fusion.SemanticFusion, text: str) -> np.ndarray:
    key = ("cos", id(self), text)
    if key not in _context:
        _context[key] = np.einsum("ij,j->i", self._vectors.matrix(), self._embed_query(text))
    return _context[key]  # type: ignore[no-any-return]


def record(sets: Sequence[tuple[str, Any, Any, Any]]) -> dict[str, tuple[list[Query], dict[str, Any]]]:
    """Per set: its fused queries (features, priors, labels) and the engine's own run of the set."""
    seen: dict[str, Any] = {}
    gated: dict[str, bool] = {}

    def fuse(self, query, lexical, leave_out=(), **options):  # type: ignore[no-untyped-def]
        shipped = _shipped_fuse(self, query, lexical, leave_out, **options)
        if shipped is not None:
            text = without_ids(query)
            cos = _cosines(self, text)
            order = [int(i) for i in np.argsort(-cos, kind="stable") if int(i) not in leave_out][: fusion.DEPTH]
            seen[query] = (list(lexical), order, cos, _context.get("ranking"), _context.get("engine"))
        return shipped

    def fused(self, query, ranking, excluded, categories):  # type: ignore[no-untyped-def]
        _context["ranking"], _context["engine"] = ranking, self
        try:
            out = _shipped_fused(self, query, ranking, excluded, categories)
            gated[query] = out.off_topic is not None  # MiniLM's closeness can turn an answer away (or rescue one)
            return out
        finally:
            _context.pop("ranking", None)
            _context.pop("engine", None)

    fusion.SemanticFusion.fuse = fuse  # type: ignore[method-assign]
    index.SearchIndex._fused = fused  # type: ignore[method-assign]
    out = {}
    try:
        for label, catalog, meta, queries in sets:
            seen.clear()
            run = run_eval(catalog, queries, engine_ranker(catalog, meta=meta))
            names = {tool.name: i for i, tool in enumerate(catalog.tools)}
            recorded = []
            for r in run["per_query"]:
                if r["query"] not in seen:
                    continue
                lexical, semantic, cos, ranking, engine = seen[r["query"]]
                candidates, feats = features_of(r["query"], lexical, semantic, cos, ranking, engine, catalog.tools)
                ones = [(doc, 1.0) for doc in candidates]
                analysis = ranking.analysis
                factors = dict(engine._by_need(engine._by_intent(ones, analysis.intent), analysis))
                grades = {names[n]: g for n, g in r["relevant"].items()}
                recorded.append(
                    Query(
                        r["query"],
                        candidates,
                        feats,
                        np.log([factors[doc] for doc in candidates]),
                        np.asarray([grades.get(doc, 0) for doc in candidates]),
                        not gated.get(r["query"], ranking.off_topic is not None),
                    )
                )
            out[label] = (recorded, run)
    finally:
        fusion.SemanticFusion.fuse = _shipped_fuse  # type: ignore[method-assign]
        index.SearchIndex._fused = _shipped_fused  # type: ignore[method-assign]
    return out


def matrix(query: Query, names: Sequence[str]) -> np.ndarray:
    return np.stack([query.features[name] for name in names], axis=1)


# The configuration of the fits (set by `main`): the score's form, the loss, and whether L2 pulls toward the
# shipped weights.
FORM = {"value": "lin"}  # "lin": score w . x, the priors a factor; "log": score exp(w . x), the priors an offset
# "pair": pairwise logistic; "list": softmax over each query's candidates; "lambda": pairwise, each pair weighted by
# what it changes of the reciprocal rank
LOSS = {"value": "pair"}
LAMBDA_ROUNDS = 8


def design(query: Query, names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """A query's candidates as (rows, offsets) with utility rows @ w + offsets, after the priors."""
    x = matrix(query, names)
    if FORM["value"] == "lin":
        return x * np.exp(query.log_prior)[:, None], np.zeros(len(x))
    return x, query.log_prior


ANCHOR: dict[str, Any] = {"value": False}  # L2 toward the shipped weights (rr_lex 1, rr_sem 0.5, scaled), not 0


def _loss(w: np.ndarray, groups: list[tuple[np.ndarray, np.ndarray, np.ndarray]], l2: float, w0=None):  # type: ignore[no-untyped-def]
    """Mean loss over queries with L2 (toward `w0`, default 0), its gradient and Hessian."""
    n = len(w)
    w0 = np.zeros(n) if w0 is None else w0
    total, grad, hess = 0.0, np.zeros(n), np.zeros((n, n))
    for x, o, g, *pair_weights in groups:
        u = x @ w + o
        pos, neg = g >= 2, g == 0
        if LOSS["value"] == "list":
            keep = pos | neg
            xs, us, ps = x[keep], u[keep], pos[keep]
            for mask, sign in ((np.ones(len(us), bool), 1.0), (ps, -1.0)):
                top = us[mask].max()
                e = np.exp(us[mask] - top)
                p = e / e.sum()
                xm = xs[mask]
                total += sign * (top + math.log(e.sum()))
                mean = p @ xm
                grad += sign * mean
                hess += sign * ((xm * p[:, None]).T @ xm - np.outer(mean, mean))
        else:
            a, b = np.nonzero(pos[:, None] & neg[None, :])
            if not len(a):
                continue
            d = x[a] - x[b]
            m = u[a] - u[b]
            q = 1.0 / (1.0 + np.exp(m))
            # Each query weighs one; or (lambda) each pair what swapping the two would change of its reciprocal rank.
            weight = pair_weights[0][a, b] if pair_weights else 1.0 / len(a)
            total += float((weight * np.logaddexp(0.0, -m)).sum())
            grad -= (d * (weight * q)[:, None]).sum(axis=0)
            hess += (d * (weight * q * (1 - q))[:, None]).T @ d
    k = len(groups)
    return (
        total / k + l2 / 2 * float((w - w0) @ (w - w0)),
        grad / k + l2 * (w - w0),
        hess / k + l2 * np.eye(n),
    )


def fit(queries: Sequence[Query], names: Sequence[str], l2: float) -> np.ndarray:
    """The weights minimising the loss over the answered queries that have a right tool and a wrong one among their
    candidates (each query weighing one); damped Newton."""
    groups = []
    for q in queries:
        if q.answered and (q.grades >= 2).any() and (q.grades == 0).any():
            x, o = design(q, names)
            groups.append((x, o, q.grades))
    w0 = np.zeros(len(names))
    if ANCHOR["value"]:
        shipped = np.array([{"rr_lex": 1.0, "rr_sem": fusion.WEIGHT}.get(n, 0.0) for n in names])
        scale = _newton([(x @ shipped[:, None], o, g) for x, o, g in groups], np.zeros(1), 0.0)
        w0 = shipped * scale[0]
    w = _newton(groups, w0, l2)
    if LOSS["value"] != "lambda":
        return w
    # LambdaRank's idea on a linear model: pairs weighted by |1/rank(a) - 1/rank(b)| under the current weights, so
    # the fit spends itself on the first places (MRR, R@1); refitted a few times from the pairwise solution.
    for _ in range(LAMBDA_ROUNDS):
        weighted = []
        for x, o, g in groups:
            ranks = np.empty(len(g))
            ranks[np.argsort(-(x @ w + o), kind="stable")] = np.arange(1, len(g) + 1)
            weighted.append((x, o, g, np.abs(1.0 / ranks[:, None] - 1.0 / ranks[None, :])))
        w = _newton(weighted, w0, l2, start=w)
    return w


def _newton(groups, w0, l2, start=None):  # type: ignore[no-untyped-def]
    """The weights minimising the loss with L2 toward `w0`, from `start` (default `w0`): damped Newton."""
    w = (w0 if start is None else start).copy()
    loss, grad, hess = _loss(w, groups, l2, w0)
    for _ in range(100):
        try:
            step = np.linalg.solve(hess, grad)
        except np.linalg.LinAlgError:
            step = grad
        if grad @ step <= 0:  # not a descent direction (the listwise Hessian need not be positive): the gradient
            step = grad
        t = 1.0
        while t > 1e-6:
            trial = w - t * step
            new = _loss(trial, groups, l2, w0)
            if new[0] <= loss - 1e-4 * t * float(grad @ step):
                break
            t /= 2
        w = trial
        previous, (loss, grad, hess) = loss, new
        if abs(previous - loss) < 1e-10:
            break
    return w


def order(query: Query, names: Sequence[str], w: np.ndarray) -> list[int]:
    x, o = design(query, names)
    before = matrix(query, names) @ w
    return _sorted(query, x @ w + o, before)


def _sorted(query: Query, after: np.ndarray, before: np.ndarray) -> list[int]:
    """The candidates best first as the engine orders them: by the score after the priors, a tie to the better
    score before them (the priors' sort is stable), then to the earlier candidate (lexical first)."""
    ranked = np.lexsort((np.arange(len(after)), -np.round(before, 9), -np.round(after, 9)))
    return [query.candidates[i] for i in ranked]


def metrics(
    recorded: Sequence[Query], run: dict[str, Any], catalog: Any, reorder: Callable[[Query], list[int]] | None
) -> dict[str, float]:
    """R@1, R@5, MRR over the set's positives, each recorded answered query ranked by `reorder` (None: shipped)."""
    by_text = {q.text: q for q in recorded if q.answered}
    tools = catalog.tools
    r1 = r5 = rr = 0.0
    positives = [r for r in run["per_query"] if r["relevant"]]
    for r in positives:
        ranked = r["results"]
        q = by_text.get(r["query"])
        if q is not None and reorder is not None:
            ranked = [tools[doc].name for doc in reorder(q)][:K]
        at = first_hit_rank(ranked, r["relevant"], K)
        r1 += at == 1
        r5 += at is not None and at <= 5
        rr += 1.0 / at if at else 0.0
    n = len(positives)
    return {"r1": r1 / n, "r5": r5 / n, "mrr": rr / n}


def shipped_check(recorded: Sequence[Query], run: dict[str, Any], catalog: Any) -> int:
    """How many recorded answered queries' engine answers differ from their shipped fused order after the priors
    (none: the recording reproduces the engine)."""
    differ = 0
    by_text = {r["query"]: r for r in run["per_query"]}
    tools = catalog.tools
    for q in recorded:
        if not q.answered:
            continue
        got = by_text[q.text]["results"][:5]
        want = [tools[doc].name for doc in _shipped_after_priors(q)][:5]
        differ += got != want
    return differ


def _shipped_after_priors(q: Query) -> list[int]:
    # MiniLM's weight as the engine sets it (`fusion.weight_for`): MAX_WEIGHT less the slope times the lexical share
    slope = fusion.MAX_WEIGHT - fusion.MIN_WEIGHT
    f = q.features
    fused = (f["rr_lex"] + fusion.MAX_WEIGHT * f["rr_sem"] - slope * f["rel_x_sem"]) / (fusion.K + 1)
    return _sorted(q, fused * np.exp(q.log_prior), fused)


def oracle(data: dict[str, tuple[list[Query], dict[str, Any]]]) -> None:
    """How many answered positives have a right tool among their candidates, and first in which ranking: what any
    reordering of the candidates can reach, and where the first place has to come from."""
    for label in TUNING:
        recorded, run = data[label]
        positives = sum(1 for r in run["per_query"] if r["relevant"])
        right = [q for q in recorded if q.answered and (q.grades >= 2).any()]
        first = [
            {name for name in ("lex_first", "sem_first") if q.grades[int(np.argmax(q.features[name]))] >= 2}
            for q in right
        ]
        lexical, semantic = (sum(name in f for f in first) for name in ("lex_first", "sem_first"))
        print(
            f"{label}: {positives} positives; {len(right)} answered with a right tool among the candidates, first "
            f"lexically {lexical}, first in MiniLM {semantic}, in neither {sum(not f for f in first)}"
        )


def loco(data, catalogs, names, l2):  # type: ignore[no-untyped-def]
    """Per tuning set: (shipped metrics, learned metrics fitted on the other two, those weights)."""
    out = {}
    for label in TUNING:
        train = [q for other in TUNING if other != label for q in data[other][0]]
        w = fit(train, names, l2)
        recorded, run = data[label]
        before = metrics(recorded, run, catalogs[label], None)
        after = metrics(recorded, run, catalogs[label], lambda q, w=w: order(q, names, w))
        out[label] = (before, after, w)
    return out


def nested(data, catalogs, names, l2s) -> None:  # type: ignore[no-untyped-def]
    """Leave-one-catalog-out with L2 chosen inside: for each held-out set, the L2 whose fit on one of the other two
    sets scores the other best (R@1, then MRR, mean of both ways) is fitted on both and scored on the held-out set."""
    print(f"features: {', '.join(names)}   L2 chosen by the inner folds among {', '.join(map(str, l2s))}")
    sums = np.zeros(6)
    for label in TUNING:
        train = [other for other in TUNING if other != label]

        def inner(l2: float, train: list[str] = train) -> tuple[float, float]:
            scores = []
            for fit_on, score_on in (train, train[::-1]):
                w = fit(data[fit_on][0], names, l2)
                m = metrics(*data[score_on], catalogs[score_on], lambda one, w=w: order(one, names, w))
                scores.append((m["r1"], m["mrr"]))
            return (sum(r for r, _ in scores) / 2, sum(m for _, m in scores) / 2)

        l2 = max(l2s, key=inner)
        w = fit([q for other in train for q in data[other][0]], names, l2)
        before = metrics(*data[label], catalogs[label], None)
        after = metrics(*data[label], catalogs[label], lambda q, w=w: order(q, names, w))
        sums += [before["r1"], before["r5"], before["mrr"], after["r1"], after["r5"], after["mrr"]]
        print(
            f"{label:<14}    {before['r1']:.3f} {before['r5']:.3f} {before['mrr']:.3f}"
            f"      {after['r1']:.3f} {after['r5']:.3f} {after['mrr']:.3f}   L2 {l2}"
        )
    m = sums / len(TUNING)
    print(f"{'mean':<14}    {m[0]:.3f} {m[1]:.3f} {m[2]:.3f}      {m[3]:.3f} {m[4]:.3f} {m[5]:.3f}")


def brief(data, catalogs, names, l2) -> None:  # type: ignore[no-untyped-def]
    """One line: the leave-one-catalog-out mean and each set's R@1."""
    rows = loco(data, catalogs, names, l2)
    mean = [sum(after[key] for _, after, _ in rows.values()) / 3 for key in ("r1", "r5", "mrr")]
    each = " ".join(f"{after['r1']:.3f}" for _, after, _ in rows.values())
    print(f"{mean[0]:.3f} {mean[1]:.3f} {mean[2]:.3f}   R@1 per set {each}   {','.join(names)}", flush=True)


def table(data, catalogs, names, l2) -> None:  # type: ignore[no-untyped-def]
    """Leave-one-catalog-out beside the shipped fusion, then the weights fitted on all three sets."""
    print(f"features: {', '.join(names)}   L2 {l2}")
    header = f"{'held-out set':<14}{'shipped R@1 R@5 MRR':>24}{'learned R@1 R@5 MRR':>26}"
    print(f"{header}   weights (fitted on the other two)")
    rows = loco(data, catalogs, names, l2)
    for label, (before, after, w) in rows.items():
        cells = "  ".join(f"{v:+.2f}" for v in w)
        print(
            f"{label:<14}    {before['r1']:.3f} {before['r5']:.3f} {before['mrr']:.3f}"
            f"      {after['r1']:.3f} {after['r5']:.3f} {after['mrr']:.3f}   {cells}"
        )
    mean = {
        side: [sum(row[side][key] for row in rows.values()) / len(rows) for key in ("r1", "r5", "mrr")]
        for side in (0, 1)
    }
    (s1, s5, sm), (l1, l5, lm) = mean[0], mean[1]
    print(f"{'mean':<14}    {s1:.3f} {s5:.3f} {sm:.3f}      {l1:.3f} {l5:.3f} {lm:.3f}")
    w = fit([q for label in TUNING for q in data[label][0]], names, l2)
    print("fitted on all three: " + ", ".join(f"{n} {v:+.4f}" for n, v in zip(names, w, strict=True)))
    inside = [metrics(*data[label], catalogs[label], lambda q: order(q, names, w)) for label in TUNING]
    r1, r5, mrr = (sum(m[key] for m in inside) / len(inside) for key in ("r1", "r5", "mrr"))
    print(f"  those weights on the same three sets (in-sample, not evidence): {r1:.3f} {r5:.3f} {mrr:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--features", default=DEFAULT, help=f"comma-separated, of {', '.join(FEATURES)}")
    parser.add_argument("--l2", default="0.1", help="comma-separated")
    parser.add_argument("--search", action="store_true", help="every subset of --features (up to 4), one L2")
    parser.add_argument("--nested", action="store_true", help="L2 chosen among --l2 inside each fold")
    parser.add_argument("--anchor", action="store_true", help="L2 toward the shipped weights, not toward 0")
    parser.add_argument("--form", default="lin,log", help="lin, log or both, comma-separated")
    parser.add_argument("--loss", default="pair,list", help="pair, list, lambda, comma-separated")
    args = parser.parse_args()
    sets = load_sets(list(TUNING))
    catalogs = {label: catalog for label, catalog, _, _ in sets}
    data = record(sets)
    for label in TUNING:
        recorded, run = data[label]
        answered = sum(q.answered for q in recorded)
        differ = shipped_check(recorded, run, catalogs[label])
        print(
            f"{label}: {len(recorded)} fused queries, {answered} answered; replay differs from the engine on {differ}"
        )
    oracle(data)
    ANCHOR["value"] = args.anchor
    names = args.features.split(",")
    unknown = set(names) - set(FEATURES)
    if unknown:
        parser.error(f"unknown features: {', '.join(sorted(unknown))}")
    if not args.search:
        FORM["value"], LOSS["value"] = "lin", "pair"
        table(data, catalogs, ["rr_lex", "rr_sem"], 0.1)  # the shipped merge's own two features, weights fitted
    if args.nested:
        for form, loss in itertools.product(args.form.split(","), args.loss.split(",")):
            FORM["value"], LOSS["value"] = form, loss
            print(f"--- form {form}, loss {loss}")
            nested(data, catalogs, names, [float(v) for v in args.l2.split(",")])
        return
    for form, loss, l2 in itertools.product(args.form.split(","), args.loss.split(","), map(float, args.l2.split(","))):
        FORM["value"], LOSS["value"] = form, loss
        print(f"--- form {form}, loss {loss}")
        if not args.search:
            table(data, catalogs, names, l2)
            continue
        for size in range(1, min(4, len(names)) + 1):
            for subset in itertools.combinations(names, size):
                brief(data, catalogs, list(subset), l2)


if __name__ == "__main__":
    main()
