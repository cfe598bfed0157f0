"""Quality of the dense signal (progressive_mcp.search.dense) beside plain BM25, and whether it can say "no match".

For each labelled query set: Recall@1, Recall@5 and MRR@10 of (i) `BM25Baseline`, (ii) dense alone, (iii)
reciprocal-rank fusion of the two (k = 60, equal weights) and (iv) the fusion with the dense ranking weighted; per
split (dev, test) and over all queries. Then the best dense cosine of positive and of off-topic queries
(``relevant == {}``), and what label-free no-match thresholds make of them.

Tuning discipline: `--tune` runs the grids (dimension x document variant x fusion weight, and the threshold rules)
on the *dev* split of Last.fm and Spotify only and prints nothing else; the settings chosen from it are the
constants under "chosen" below, and the default run reports every catalog once with them.

Label-free thresholds, per catalog, from the catalog and fixed text alone (no query file is read for them):

- ``vocab-pXX``: the XXth percentile of the best cosine reached by 500 random bags of 2-6 English words (whole
  words of the model's tokenizer vocabulary, seeded): what a query about nothing in particular scores here;
- ``generic-max``: the highest best cosine of the fixed everyday requests in GENERIC_REQUESTS below (written for
  this study without reading any query file): "weather in Paris", "a recipe for pancakes";
- ``catalog-pXX``: the XXth percentile of the best cosine of 500 bags of 2-6 words drawn from the catalog's own
  documents, shuffled across tools (on-vocabulary nonsense).

Run with `.venv/bin/python bench/dense_quality.py [--tune] [--only lastfm,spotify] [--json]`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from progressive_mcp.catalog import Catalog  # noqa: E402
from progressive_mcp.search import dense  # noqa: E402
from progressive_mcp.search.evaluation import (  # noqa: E402
    BM25Baseline,
    EvalQuery,
    Ranker,
    engine_ranker,
    load_queries,
    percentile,
    run_eval,
    select_split,
)
from progressive_mcp.sources import load_catalog  # noqa: E402

OPENAPI_DOCS = Path(os.environ.get("OPENAPI_DOCS_DIR") or ROOT.parent / "shared" / "openapi")


def first_existing(*paths: str | Path) -> str:
    """The first of the paths that exists (the query sets are moving to eval/), else the first."""
    return str(next((Path(p) for p in paths if Path(p).exists()), Path(paths[0])))


def _query_file(name: str, *elsewhere: str) -> str:
    return first_existing(ROOT / "eval" / f"{name}.jsonl", *elsewhere, f"/work/main/eval/{name}.jsonl")


# name: (queries, catalog); None is the bundled Alpha Vantage catalog. Override with --set NAME=QUERIES,CATALOG.
SETS: dict[str, tuple[str, str | None]] = {
    "lastfm": (
        _query_file("lastfm", str(ROOT / "tests" / "fixtures" / "lastfm" / "queries.jsonl")),
        str(ROOT / "tests" / "fixtures" / "lastfm" / "lastfm.yaml"),
    ),
    "spotify": (
        _query_file("spotify", "/work/eval-drafts/spotify.jsonl"),
        str(OPENAPI_DOCS / "spotify" / "openapi.yaml"),
    ),
    "slack": (_query_file("slack", "/work/eval-drafts/slack.jsonl"), str(OPENAPI_DOCS / "slack" / "swagger.json")),
    "digitalocean": (
        _query_file("digitalocean", "/work/eval-drafts/digitalocean.jsonl"),
        str(OPENAPI_DOCS / "digitalocean" / "specification" / "DigitalOcean-public.v2.yaml"),
    ),
    "alphavantage": (str(ROOT / "eval" / "queries.jsonl"), None),
}
TUNING_SETS = ("lastfm", "spotify")  # dev split only
TUNING_SPLIT = "dev"

# --- chosen (by `--tune` on the dev split of Last.fm and Spotify) --------------------------------------------------
# The best mean dev MRR of the fusion at k = 60 (0.518; dense alone 0.505 at the same dim and variant, BM25 0.410):
# 256 dimensions with the "full" document, the dense ranking weighted 4 (every dimension was worse at 64 and 128).
# The threshold rule: the most no-match on negatives among the rules losing at most 10% of positives (mean of the two
# sets: 8.4% false no-match, 45% no-match); the best (no-match - false no-match), vocab-p99, loses 30% of positives.
CHOSEN_DIM = 256
CHOSEN_VARIANT: dense.DocumentVariant = "full"
CHOSEN_WEIGHT = 4.0  # of the dense ranking in the weighted fusion (BM25's is 1)
CHOSEN_THRESHOLD = "catalog-p10"
RRF_K = dense.RRF_K

# Grids of `--tune`.
DIMS = dense.DIMENSIONS
VARIANTS: tuple[dense.DocumentVariant, ...] = ("short", "params", "full")
WEIGHTS = (0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 10.0)
RRF_KS = (10, 30, RRF_K)
PSEUDO_QUERIES = 500
MAX_FALSE_NO_MATCH = 0.10  # a threshold may lose at most this share of positives (mean of the tuning sets)
SEED = 20240917

GENERIC_REQUESTS = (
    "what's the weather like in Paris tomorrow",
    "give me a recipe for pancakes",
    "how many calories are in a banana",
    "translate good morning into Japanese",
    "book a table for two at an Italian restaurant tonight",
    "what time does the pharmacy close",
    "how do I change a flat tire",
    "tell me a joke about cats",
    "find me a flight from Berlin to Lisbon in May",
    "what is the capital of Australia",
    "how long should I boil an egg",
    "remind me to water the plants on Sunday",
    "who won the football match last night",
    "how tall is Mount Everest",
    "suggest a name for my new puppy",
    "what are the symptoms of the flu",
    "convert 5 miles to kilometres",
    "write a poem about the sea",
    "how do I remove a red wine stain from a carpet",
    "when is the next full moon",
    "what should I pack for a camping trip",
    "explain photosynthesis to a child",
    "how do I knit a scarf",
    "which train goes to the airport",
    "is it safe to eat raw cookie dough",
    "how many players are on a rugby team",
    "what is the best way to learn to swim",
    "order a large pepperoni pizza",
    "how do I fix a leaking kitchen tap",
    "what year did the Titanic sink",
)


# --- rankers -------------------------------------------------------------------------------------------------------


def dense_ranker(catalog: Catalog, index: dense.DenseIndex) -> Ranker:
    names = [tool.name for tool in catalog.tools]

    def rank(query: str, limit: int) -> list[str]:
        return [names[i] for i, _ in index.rank(query, limit)]

    return rank


def fused_ranker(
    catalog: Catalog,
    lexical_ranker: Ranker,
    index: dense.DenseIndex,
    weight: float,
    *,
    k: float = RRF_K,
    depth: int = 100,
    lexical_depth: int = 100,
) -> Ranker:
    """RRF of a lexical ranking (BM25's: the tools sharing a term with the query) and dense's top `depth`."""
    names = [tool.name for tool in catalog.tools]

    def rank(query: str, limit: int) -> list[str]:
        lexical = lexical_ranker(query, lexical_depth)
        semantic = [names[i] for i, _ in index.rank(query, depth)]
        return dense.reciprocal_rank_fusion([lexical, semantic], weights=[1.0, weight], k=k)[:limit]

    return rank


def fallback_ranker(first: Ranker, then: Ranker) -> Ranker:
    """`first`'s tools, or `then`'s when `first` finds none (the dense ranking only where the engine says no match)."""

    def rank(query: str, limit: int) -> list[str]:
        return first(query, limit) or then(query, limit)

    return rank


# --- one query set -------------------------------------------------------------------------------------------------


@dataclass
class QuerySet:
    name: str
    catalog: Catalog
    queries: list[EvalQuery]
    bm25: BM25Baseline
    indexes: dict[tuple[int, str], dense.DenseIndex] = field(default_factory=dict)

    @classmethod
    def load(cls, name: str) -> QuerySet:
        queries_path, catalog_path = SETS[name]
        catalog = load_catalog(catalog_path)
        return cls(name, catalog, load_queries(queries_path, catalog), BM25Baseline(catalog.tools))

    def index(self, dim: int, variant: dense.DocumentVariant) -> dense.DenseIndex:
        key = (dim, variant)
        if key not in self.indexes:
            self.indexes[key] = dense.DenseIndex(
                [dense.tool_document(tool, variant) for tool in self.catalog.tools], dim=dim
            )
        return self.indexes[key]


def metrics(run: dict[str, Any], split: str) -> dict[str, float]:
    part = run if split == "all" else run["by_split"][split]
    figures = part["metrics"]
    return {"r1": figures["recall@1"], "r5": figures["recall@5"], "mrr": figures["mrr"]}


def best_scores(index: dense.DenseIndex, queries: Sequence[EvalQuery]) -> tuple[list[float], list[float]]:
    """The best cosine of each positive query, and of each negative one."""
    positives, negatives = [], []
    for query in queries:
        best = float(index.scores(query.query).max())
        (positives if query.positive else negatives).append(best)
    return positives, negatives


# --- label-free thresholds -----------------------------------------------------------------------------------------

_WORD = re.compile(r"[a-z]{3,}")


def vocabulary_words(dim: int) -> list[str]:
    """Whole English-looking words of the model's tokenizer (SentencePiece pieces "▁word", 4+ letters)."""
    vocab = dense.model(dim).tokenizer.get_vocab()
    return sorted(
        {piece[1:].lower() for piece in vocab if piece.startswith("▁") and piece[1:].isalpha() and len(piece) >= 5}
    )


def word_bags(words: Sequence[str], count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.sample(words, rng.randint(2, 6))) for _ in range(count)]


def pseudo_scores(index: dense.DenseIndex, texts: Sequence[str]) -> list[float]:
    return [float(index.scores(text).max()) for text in texts]


def thresholds(qs: QuerySet, index: dense.DenseIndex, variant: dense.DocumentVariant) -> dict[str, float]:
    """Every label-free threshold rule's value for one catalog."""
    vocab = pseudo_scores(index, word_bags(vocabulary_words(index.dim), PSEUDO_QUERIES, SEED))
    catalog_words = sorted(
        {w for tool in qs.catalog.tools for w in _WORD.findall(dense.tool_document(tool, variant).lower())}
    )
    own = pseudo_scores(index, word_bags(catalog_words, PSEUDO_QUERIES, SEED + 1))
    generic = pseudo_scores(index, GENERIC_REQUESTS)
    rules = {f"vocab-p{p}": percentile(vocab, p / 100) for p in (90, 95, 99)}
    rules["vocab-max"] = max(vocab)
    rules["generic-max"] = max(generic)
    rules["generic-p90"] = percentile(generic, 0.90)
    rules.update({f"catalog-p{p}": percentile(own, p / 100) for p in (5, 10, 25)})
    return rules


def no_match_figures(positives: Sequence[float], negatives: Sequence[float], threshold: float) -> dict[str, float]:
    """Share of positives below the threshold (false no-match) and of negatives below it (no-match)."""
    return {
        "false_no_match": sum(s < threshold for s in positives) / len(positives) if positives else float("nan"),
        "no_match": sum(s < threshold for s in negatives) / len(negatives) if negatives else float("nan"),
    }


# --- tuning (dev of Last.fm and Spotify only) ----------------------------------------------------------------------


def tune() -> dict[str, Any]:
    """The grids on the dev split of the tuning sets; picks by the mean of the two sets' figures (printed)."""
    sets = [QuerySet.load(name) for name in TUNING_SETS]
    dev = {qs.name: select_split(qs.queries, TUNING_SPLIT) for qs in sets}
    out: dict[str, Any] = {"bm25": {}, "dense": [], "fused": [], "thresholds": []}
    sizes = ", ".join(f"{name} {len(queries)}" for name, queries in dev.items())
    print(f"tuning on split {TUNING_SPLIT!r} of {', '.join(TUNING_SETS)} ({sizes} queries)")
    for qs in sets:
        out["bm25"][qs.name] = metrics(run_eval(qs.catalog, dev[qs.name], qs.bm25), "all")
    print("BM25 (reference): " + "  ".join(_fmt(name, m) for name, m in out["bm25"].items()))
    print(f"\n{'dim':>4} {'variant':<7} | dense alone: " + "  ".join(f"{qs.name:<27}" for qs in sets) + "  mean MRR")
    for dim in DIMS:
        for variant in VARIANTS:
            alone = {
                qs.name: metrics(
                    run_eval(qs.catalog, dev[qs.name], dense_ranker(qs.catalog, qs.index(dim, variant))), "all"
                )
                for qs in sets
            }
            mean = statistics.fmean(m["mrr"] for m in alone.values())
            out["dense"].append({"dim": dim, "variant": variant, "mean_mrr": mean, **alone})
            print(
                f"{dim:>4} {variant:<7} | {'':<13}"
                + "  ".join(f"{_short(alone[qs.name]):<27}" for qs in sets)
                + f"  {mean:.3f}"
            )
    print(
        "\nfusion, mean dev MRR of the two sets; rows dim/variant/k, columns the dense ranking's weight (BM25's is 1)"
    )
    print(f"{'dim':>4} {'variant':<7} {'k':>3} | " + " ".join(f"{w:>5g}" for w in WEIGHTS))
    for dim in DIMS:
        for variant in VARIANTS:
            for k in RRF_KS:
                row = []
                for weight in WEIGHTS:
                    per = {
                        qs.name: metrics(
                            run_eval(
                                qs.catalog,
                                dev[qs.name],
                                fused_ranker(qs.catalog, qs.bm25, qs.index(dim, variant), weight, k=k),
                            ),
                            "all",
                        )
                        for qs in sets
                    }
                    mean = statistics.fmean(m["mrr"] for m in per.values())
                    row.append(mean)
                    out["fused"].append(
                        {"dim": dim, "variant": variant, "k": k, "weight": weight, "mean_mrr": mean, **per}
                    )
                print(f"{dim:>4} {variant:<7} {k:>3} | " + " ".join(f"{m:5.3f}" for m in row))
    best = max(out["fused"], key=lambda r: r["mean_mrr"])
    best_k60 = max((r for r in out["fused"] if r["k"] == RRF_K), key=lambda r: r["mean_mrr"])
    print(
        f"\nbest fusion: dim {best['dim']}, {best['variant']!r}, k {best['k']}, weight {best['weight']:g}: "
        f"mean MRR {best['mean_mrr']:.3f}"
    )
    print(
        f"best fusion at k={RRF_K}: dim {best_k60['dim']}, {best_k60['variant']!r}, weight {best_k60['weight']:g}: "
        f"mean MRR {best_k60['mean_mrr']:.3f}"
    )
    dim, variant = best_k60["dim"], best_k60["variant"]
    print(
        f"\nlabel-free thresholds at dim {dim}, {variant!r}: value, false no-match on positives / no-match on negatives"
    )
    per_rule: dict[str, list[float]] = {}
    for qs in sets:
        index = qs.index(dim, variant)
        positives, negatives = best_scores(index, dev[qs.name])
        for rule, value in thresholds(qs, index, variant).items():
            fig = no_match_figures(positives, negatives, value)
            per_rule.setdefault(rule, []).append(fig["no_match"] - fig["false_no_match"])
            out["thresholds"].append(
                {"dim": dim, "variant": variant, "set": qs.name, "rule": rule, "value": value, **fig}
            )
            print(f"  {qs.name:<8} {rule:<12} {value:.3f}  {_pct(fig['false_no_match'])} / {_pct(fig['no_match'])}")
    ranked = sorted(per_rule, key=lambda rule: -statistics.fmean(per_rule[rule]))
    print(
        "rules by mean (no-match - false no-match): "
        + ", ".join(f"{r} {statistics.fmean(per_rule[r]):+.2f}" for r in ranked)
    )
    rows = [r for r in out["thresholds"] if r["dim"] == dim and r["variant"] == variant]
    mean_of = {
        rule: {
            key: statistics.fmean(r[key] for r in rows if r["rule"] == rule) for key in ("false_no_match", "no_match")
        }
        for rule in per_rule
    }
    allowed = [rule for rule in mean_of if mean_of[rule]["false_no_match"] <= MAX_FALSE_NO_MATCH]
    if allowed:
        pick = max(allowed, key=lambda rule: mean_of[rule]["no_match"])
        print(
            f"rule with the most no-match on negatives while false no-match <= {MAX_FALSE_NO_MATCH:.0%} (means): "
            f"{pick} ({mean_of[pick]['false_no_match']:.1%} / {mean_of[pick]['no_match']:.1%})"
        )
    return out


def _short(m: dict[str, float]) -> str:
    return f"R@1 {m['r1']:.3f} R@5 {m['r5']:.3f} MRR {m['mrr']:.3f}"


def _fmt(name: str, m: dict[str, float]) -> str:
    return f"{name}: {_short(m)}"


# --- the report (every catalog, chosen settings) -------------------------------------------------------------------


def report(names: Sequence[str]) -> dict[str, Any]:
    print(
        f"settings (chosen on the dev split of {', '.join(TUNING_SETS)}): dim {CHOSEN_DIM}, document "
        f"{CHOSEN_VARIANT!r}, RRF k={RRF_K} (rrf: equal weights; rrf-w: dense weight {CHOSEN_WEIGHT:g}), "
        f"no-match threshold rule {CHOSEN_THRESHOLD}. For reference, not used for choosing: engine (TOOL_SEARCH), "
        "engine+dense (the same weighted fusion) and engine|dense (dense only when the engine finds nothing)."
    )
    results: dict[str, Any] = {}
    for name in names:
        started = time.perf_counter()
        qs = QuerySet.load(name)
        index = qs.index(CHOSEN_DIM, CHOSEN_VARIANT)
        engine = engine_ranker(qs.catalog)
        rankers: dict[str, Ranker] = {
            "bm25": qs.bm25,
            "dense": dense_ranker(qs.catalog, index),
            "rrf": fused_ranker(qs.catalog, qs.bm25, index, 1.0),
            f"rrf-w{CHOSEN_WEIGHT:g}": fused_ranker(qs.catalog, qs.bm25, index, CHOSEN_WEIGHT),
            "engine": engine,
            # TOOL_SEARCH returns at most 20 tools.
            "engine+dense": fused_ranker(qs.catalog, engine, index, CHOSEN_WEIGHT, lexical_depth=20),
            "engine|dense": fallback_ranker(engine, dense_ranker(qs.catalog, index)),
        }
        runs = {label: run_eval(qs.catalog, qs.queries, ranker) for label, ranker in rankers.items()}
        splits = [s for s in ("dev", "test") if any(q.split == s for q in qs.queries)] + ["all"]
        counts = {s: sum(1 for q in select_split(qs.queries, s) if q.positive) for s in splits}
        tuned = " (its dev split was used for tuning)" if name in TUNING_SETS else ""
        negatives_n = sum(1 for q in qs.queries if not q.positive)
        print(f"\n== {name}: {len(qs.catalog)} tools, {len(qs.queries)} queries ({negatives_n} off-topic){tuned}")
        print(f"{'ranker':<13} " + " ".join(f"{s + ' (n=' + str(counts[s]) + ')':<31}" for s in splits))
        table: dict[str, Any] = {}
        for label, run in runs.items():
            table[label] = {s: metrics(run, s) for s in splits}
            print(f"{label:<13} " + " ".join(f"{_short(table[label][s]):<31}" for s in splits))

        bests = [float(index.scores(q.query).max()) for q in qs.queries]
        positives = [b for b, q in zip(bests, qs.queries, strict=True) if q.positive]
        negatives = [b for b, q in zip(bests, qs.queries, strict=True) if not q.positive]
        print("best dense cosine, percentiles p10 / p25 / p50 / p75 / p90:")
        dist = {}
        for label, values in (("positive", positives), ("negative", negatives)):
            if values:
                dist[label] = [percentile(values, p / 100) for p in (10, 25, 50, 75, 90)]
                print(f"  {label:<9}(n={len(values):>3}) " + " / ".join(f"{v:.3f}" for v in dist[label]))
        rules = thresholds(qs, index, CHOSEN_VARIANT)
        print("label-free thresholds (all queries): value, false no-match on positives, no-match on negatives")
        threshold_rows = {}
        for rule, value in rules.items():
            fig = no_match_figures(positives, negatives, value)
            threshold_rows[rule] = {"value": value, **fig}
            mark = "  <- chosen" if rule == CHOSEN_THRESHOLD else ""
            print(f"  {rule:<12} {value:.3f}  {_pct(fig['false_no_match'])}  {_pct(fig['no_match'])}{mark}")
        tau = rules[CHOSEN_THRESHOLD]
        empty = {label: [not r["results"] for r in runs[label]["per_query"]] for label in ("bm25", "engine")}
        below = [b < tau for b in bests]
        deciders = {
            "dense < t": below,
            "bm25 empty": empty["bm25"],
            "bm25 empty and dense < t": [a and b for a, b in zip(empty["bm25"], below, strict=True)],
            "engine empty": empty["engine"],
            "engine empty and dense < t": [a and b for a, b in zip(empty["engine"], below, strict=True)],
            "engine empty or dense < t": [a or b for a, b in zip(empty["engine"], below, strict=True)],
        }
        print(f"no-match deciders with t = {CHOSEN_THRESHOLD} = {tau:.3f}: false no-match / no-match, per split")
        no_match_rows: dict[str, Any] = {}
        for label, says_none in deciders.items():
            cells, row = [], {}
            for split in splits:
                chosen = [(q, none) for q, none in zip(qs.queries, says_none, strict=True) if split in ("all", q.split)]
                pos = [none for q, none in chosen if q.positive]
                neg = [none for q, none in chosen if not q.positive]
                fnm = sum(pos) / len(pos) if pos else float("nan")
                nm = sum(neg) / len(neg) if neg else float("nan")
                row[split] = {"false_no_match": fnm, "no_match": nm}
                cells.append(f"{split} {_pct(fnm)} / {_pct(nm)}")
            no_match_rows[label] = row
            print(f"  {label:<28} " + "   ".join(cells))
        results[name] = {
            "tools": len(qs.catalog),
            "counts": counts,
            "metrics": table,
            "best_cosine_percentiles": dist,
            "thresholds": threshold_rows,
            "no_match": no_match_rows,
            "seconds": time.perf_counter() - started,
        }
    return results


def _pct(value: float | None) -> str:
    return "  n/a" if value is None or value != value else f"{value * 100:4.0f}%"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tune", action="store_true", help="the grids, on the dev split of Last.fm and Spotify only")
    parser.add_argument("--only", help="comma-separated query sets (default: all)", default=",".join(SETS))
    parser.add_argument(
        "--set", action="append", default=[], metavar="NAME=QUERIES[,CATALOG]", help="add or override a query set"
    )
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    for item in args.set:
        name, _, paths = item.partition("=")
        queries, _, catalog = paths.partition(",")
        SETS[name] = (queries, catalog or None)
    if not dense.available():
        print("wordllama is not installed: pip install 'progressive-mcp[semantic]'", file=sys.stderr)
        return 2
    figures = tune() if args.tune else report(args.only.split(","))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
