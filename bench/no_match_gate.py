"""The no-match decision against label-free gates built on MiniLM, on the tuning sets only (issue 29, item 2).

For each query of Last.fm (all) and Spotify's dev split (never a held-out set; Alpha Vantage's curated catalog has no
MiniLM fusion, so no gate applies to it) the script records the engine's decision as TOOL_SEARCH makes it (answered,
or off-topic for its words or for its shape), its lexical confidence (`Ranking.confidence`) and MiniLM's highest
cosine between the query and any tool. Then, per catalog, no-match (negatives without results) and false no-match
(positives without results) under each rule:

- ``engine``: the decision as it stands;
- ``engine AND cos >= bag q``: a cosine floor calibrated on random bags of the catalog's own words (200 bags of 3 or
  5 words drawn from its tool documents, seeded); the floor is the bags' q-quantile of their highest cosine;
- ``engine AND cos >= everyday bar``: the floor is `fusion.SemanticFusion.near`'s bar (the highest cosine any
  everyday request of search/everyday.txt reaches on any tool);
- ``linear c m``: no shape rule fired and cos - bar + c * (confidence - 0.5) >= m, replacing the engine's rule.

Run with `.venv/bin/python bench/no_match_gate.py [--json]` (needs the semantic extra; the Spotify document from
../shared/openapi or $OPENAPI_DOCS_DIR). Prints no query, only rates.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from progressive_mcp.search import vectors  # noqa: E402
from progressive_mcp.search.catalogs_eval import load_manifest  # noqa: E402
from progressive_mcp.search.evaluation import load_queries  # noqa: E402
from progressive_mcp.search.index import _LEXICAL_REASONS  # noqa: E402
from progressive_mcp.sources import load_catalog  # noqa: E402
from progressive_mcp.surfaces.metatools import MetaTools  # noqa: E402

TUNING = (("lastfm", "all"), ("spotify", "dev"))
BAGS, BAG_SIZES, SEED = 200, (3, 5), 7
QUANTILES = (0.05, 0.25, 0.5)
LINEAR = [(c, m) for c in (0.1, 0.2, 0.3) for m in (-0.04, -0.02, 0.0)]


def observe() -> dict[str, dict[str, Any]]:
    """Per tuning catalog: each query's decision, confidence and highest cosine, the everyday bar and bag floors."""
    seen: dict[str, dict[str, Any]] = {}
    for item in load_manifest(ROOT / "eval" / "catalogs.yaml"):
        for name, split in TUNING:
            if item.entry.name != name:
                continue
            if item.spec is not None and not item.spec.is_file():
                print(f"skipped {name}: {item.spec} absent", file=sys.stderr)
                continue
            catalog = load_catalog(item.spec)
            queries = [q for q in load_queries(item.queries, catalog) if split == "all" or q.split == split]
            index = MetaTools(catalog, semantic=True).index
            fusion = index._fusion
            if fusion is None:
                sys.exit("the semantic extra is not installed: no MiniLM to gate with")
            matrix = fusion._vectors.matrix()
            fusion.near("warm-up")  # computes the everyday bar

            def best(text: str) -> float:
                return float((matrix @ fusion._embed_query(text)).max())  # noqa: B023 (this catalog's)

            words = [w for t in index._tools for w in re.findall(r"[A-Za-z]{3,}", vectors.document(t))]
            rng = random.Random(SEED)
            floors = {}
            for size in BAG_SIZES:
                cosines = sorted(best(" ".join(rng.choice(words) for _ in range(size))) for _ in range(BAGS))
                floors.update({f"bag{size} q{q}": cosines[int(q * BAGS)] for q in QUANTILES})
            records = []
            for query in queries:
                ranking = index.rank(query.query, limit=5)
                records.append(
                    {
                        "positive": query.positive,
                        "answered": ranking.off_topic is None,
                        "shape": ranking.off_topic is not None and ranking.off_topic not in _LEXICAL_REASONS,
                        "confidence": ranking.confidence,
                        "cosine": best(query.query),
                    }
                )
            seen[name] = {"bar": sum(fusion._scale or (0.0, 0.0)), "floors": floors, "records": records}
    return seen


def rates(records: list[dict[str, Any]], answered: Any) -> dict[str, float]:
    positives = [r for r in records if r["positive"]]
    negatives = [r for r in records if not r["positive"]]
    return {
        "no_match": statistics.fmean(not answered(r) for r in negatives),
        "false_no_match": statistics.fmean(not answered(r) for r in positives),
    }


def evaluate(seen: dict[str, dict[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    table: dict[str, dict[str, dict[str, float]]] = {}
    for name, data in seen.items():
        bar, records = data["bar"], data["records"]
        rules: dict[str, Any] = {"engine": lambda r: r["answered"]}
        for label, floor in data["floors"].items():
            rules[f"engine AND cos >= {label}"] = lambda r, f=floor: r["answered"] and r["cosine"] >= f
        rules["engine AND cos >= everyday bar"] = lambda r, b=bar: r["answered"] and r["cosine"] >= b
        for c, m in LINEAR:
            rules[f"linear c={c} m={m}"] = lambda r, b=bar, c=c, m=m: (
                not r["shape"] and r["cosine"] - b + c * (r["confidence"] - 0.5) >= m
            )
        for rule, answered in rules.items():
            table.setdefault(rule, {})[name] = rates(records, answered)
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    seen = observe()
    table = evaluate(seen)
    if args.json:
        print(json.dumps({"bars": {n: d["bar"] for n, d in seen.items()}, "rules": table}, indent=1))
        return
    names = list(seen)
    print(
        "no-match / false no-match per tuning catalog, and their mean; floors: "
        + "; ".join(
            f"{n} bar {d['bar']:.3f}, " + ", ".join(f"{k} {v:.3f}" for k, v in d["floors"].items())
            for n, d in seen.items()
        )
    )
    for rule, per in table.items():
        cells = "  ".join(f"{n} {per[n]['no_match']:.3f}/{per[n]['false_no_match']:.3f}" for n in names)
        mean = [statistics.fmean(per[n][key] for n in names) for key in ("no_match", "false_no_match")]
        print(f"{rule:<34} {cells}  mean {mean[0]:.3f}/{mean[1]:.3f}")


if __name__ == "__main__":
    main()
