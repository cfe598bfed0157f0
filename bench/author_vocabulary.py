"""What a spec author's search vocabulary is worth on a catalog nobody tuned: Last.fm with and without one.

`eval/lastfm.vocabulary.yaml` was written blind: its author read only the Last.fm spec (tests/fixtures/lastfm/
lastfm.yaml) and the list of vocabulary sections, never a query set or the ranking code. This script loads the
spec without it and with it (`load_catalog(..., vocabulary=...)`, what `--vocabulary` does) and runs
`eval/lastfm.jsonl` against both, lexical alone and with the semantic signal (when the extra is installed),
beside plain BM25. Prints figures, never pass/fail.

Run with `.venv/bin/python bench/author_vocabulary.py`.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from progressive_mcp.search import dense  # noqa: E402
from progressive_mcp.search.evaluation import BM25Baseline, engine_ranker, load_queries, run_eval  # noqa: E402
from progressive_mcp.sources import load_catalog  # noqa: E402

SPEC = ROOT / "tests" / "fixtures" / "lastfm" / "lastfm.yaml"
VOCABULARY = ROOT / "eval" / "lastfm.vocabulary.yaml"
QUERIES = ROOT / "eval" / "lastfm.jsonl"
METRICS = (
    ("recall@1", "R@1"),
    ("recall@5", "R@5"),
    ("mrr", "MRR"),
    ("false_no_match_rate", "false NM"),
    ("no_match_rate", "NM"),
)


def main() -> int:
    modes = [False, True] if dense.available() else [False]
    catalogs = {"without": load_catalog(SPEC), "with": load_catalog(SPEC, vocabulary=VOCABULARY)}
    queries = load_queries(QUERIES, catalogs["without"])
    print(f"Last.fm ({len(catalogs['without'])} tools), {len(queries)} queries of {QUERIES.name}")
    print(f"{'ranker':44s}" + "".join(f"{label:>10s}" for _, label in METRICS))
    rows = [("plain BM25", run_eval(catalogs["without"], queries, BM25Baseline(catalogs["without"].tools)))]
    for semantic in modes:
        for which, catalog in catalogs.items():
            label = f"engine, {which} the vocabulary, semantic {'on' if semantic else 'off'}"
            rows.append((label, run_eval(catalog, queries, engine_ranker(catalog, semantic=semantic))))
    for label, run in rows:
        metrics = run["metrics"]
        print(f"{label:44s}" + "".join(f"{metrics[key]:10.3f}" for key, _ in METRICS))
    if not dense.available():
        print("(the semantic extra is not installed: lexical rows only)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
