"""The token bound the Lambda checks budgets with (`progressive_mcp.tokens.estimate_tokens`) against cl100k_base.

Prints figures, never pass/fail, on the texts tests/test_token_bound.py holds the bound to:

- UTF-8 bytes per cl100k_base token (min, p1, p5, median) of every sample answer (each function of the catalog with
  typical arguments, JSON and CSV where offered) as served, as the JSON a result carries and escaped in a result's
  text; of every text `fits_budget` sees while the server shapes those answers for an 8,000-token budget, and of the
  results it sends; of the offline REST upstream's answers for the OpenAPI documents (../shared/openapi, when there);
- the bound over the real count on the same texts (min, p5, median, p95, max), on texts chosen to be hard, and on
  the two kinds of text it undercounts (which `fits_budget` never meets);
- previews: the tokens a cut answer keeps when shaped with the bound, over what it keeps with an exact count;
- speed: `estimate_tokens` on 100 KB and 1 MB of a daily series as JSON, `fits_budget` on the 1 MB with the bound,
  and the exact count on the same text.

Run with `.venv/bin/python bench/token_bound.py [--json]`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # the corpus is the tests' (tests/ is a folder, not a package)

from test_token_bound import (  # noqa: E402
    OPENAPI_DOCUMENTS,
    Answer,
    hard_texts,
    openapi_texts,
    outside_the_guarantee,
    sent_texts,
    shape,
    shaping_texts,
    upstream_answers,
)

from progressive_mcp import tokens  # noqa: E402
from progressive_mcp.calls.shaping import was_cut  # noqa: E402
from progressive_mcp.offline.sample_upstream import SampleUpstream  # noqa: E402
from progressive_mcp.tokens import count_tokens, dumps, estimate_tokens  # noqa: E402

Texts = list[tuple[str, str]]


def quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def corpus(answers: list[Answer]) -> dict[str, Texts]:
    groups: dict[str, Texts] = {"answers as served": [], "answers as JSON": [], "answers escaped in a result": []}
    for answer in answers:
        for (label, text), group in zip(sent_texts(answer), groups, strict=True):
            groups[group].append((label, text))
    shaped = [text for answer in answers for text in shaping_texts(answer)]
    groups["texts shaping bounds (8,000 tokens)"] = [(label, text) for label, text in shaped if "candidate" in label]
    groups["results sent"] = [(label, text) for label, text in shaped if label.endswith(" sent")]
    groups["OpenAPI answers and results"] = [
        (f"{document}: {label}", text)
        for document, path in OPENAPI_DOCUMENTS.items()
        if path.exists()
        for label, text in openapi_texts(path)
    ]
    return groups


def distributions(groups: dict[str, Texts]) -> dict[str, dict[str, float]]:
    figures = {}
    for group, texts in groups.items():
        counted = [(len(text.encode()), count_tokens(text), estimate_tokens(text)) for _, text in texts]
        counted = [row for row in counted if row[1] > 0]
        per_token = [size / real for size, real, _ in counted]
        ratios = [estimate / real for _, real, estimate in counted]
        figures[group] = {
            "texts": len(counted),
            "bytes_per_token_min": min(per_token),
            "bytes_per_token_p1": quantile(per_token, 0.01),
            "bytes_per_token_p5": quantile(per_token, 0.05),
            "bytes_per_token_median": statistics.median(per_token),
            "bound_over_real_min": min(ratios),
            "bound_over_real_p5": quantile(ratios, 0.05),
            "bound_over_real_median": statistics.median(ratios),
            "bound_over_real_p95": quantile(ratios, 0.95),
            "bound_over_real_max": max(ratios),
        }
    return figures


def adversarial() -> dict[str, dict[str, float]]:
    figures = {}
    for label, text in [*hard_texts(), *outside_the_guarantee()]:
        real = count_tokens(text)
        figures[label] = {
            "bytes_per_token": len(text.encode()) / real,
            "bound_over_real": estimate_tokens(text) / real,
        }
    return figures


def previews(answers: list[Answer], budget: int = 8000) -> dict[str, Any]:
    """What a cut answer keeps, in real tokens, shaped with the bound over shaped with an exact count."""
    ratios = []
    for answer in answers:
        tokens.exact_counts = True
        exact = shape(answer, budget)
        if not was_cut(exact):
            continue
        tokens.exact_counts = False
        bounded = shape(answer, budget)
        ratios.append((count_tokens(dumps(bounded)) / count_tokens(dumps(exact)), answer.label))
    tokens.exact_counts = None
    ratios.sort()
    return {
        "cut_answers": len(ratios),
        "median": statistics.median(ratio for ratio, _ in ratios),
        "p10": quantile([ratio for ratio, _ in ratios], 0.10),
        "worst": [{"answer": label, "ratio": ratio} for ratio, label in ratios[:5]],
    }


def best_ms(action: Callable[[], object], rounds: int = 7) -> float:
    timings = []
    for _ in range(rounds):
        started = time.perf_counter()
        action()
        timings.append((time.perf_counter() - started) * 1000)
    return min(timings)


def speed() -> dict[str, float]:
    query = "function=TIME_SERIES_DAILY&symbol=IBM&outputsize=full&apikey=k"
    with SampleUpstream(port=0) as upstream, urllib.request.urlopen(f"{upstream.url}?{query}", timeout=60) as answer:
        series = dumps(json.loads(answer.read()))
    text = (series * (1 + 1_000_000 // len(series)))[:1_000_000]
    count_tokens(text[:1000])  # load the vocabulary first
    tokens.exact_counts = False
    figures = {
        "estimate_100KB_ms": best_ms(lambda: estimate_tokens(text[:100_000])),
        "estimate_1MB_ms": best_ms(lambda: estimate_tokens(text)),
        "fits_budget_1MB_bound_ms": best_ms(lambda: tokens.fits_budget(text, 8000)),
    }
    tokens.exact_counts = None
    figures["count_tokens_100KB_ms"] = best_ms(lambda: count_tokens(text[:100_000]), rounds=3)
    figures["count_tokens_1MB_ms"] = best_ms(lambda: count_tokens(text), rounds=3)
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    args = parser.parse_args(argv)
    with SampleUpstream(port=0) as upstream:
        answers = upstream_answers(upstream.url)
    report = {
        "corpus": distributions(corpus(answers)),
        "adversarial": adversarial(),
        "previews": previews(answers),
        "speed": speed(),
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print("UTF-8 bytes per cl100k_base token, and estimate_tokens over the real count")
    print(f"  {'':40s}  texts    min    p1    p5   p50   bound/real: min    p5   p50   p95   max")
    for group, row in report["corpus"].items():
        print(
            f"  {group:40s} {row['texts']:6d}  {row['bytes_per_token_min']:5.2f} {row['bytes_per_token_p1']:5.2f} "
            f"{row['bytes_per_token_p5']:5.2f} {row['bytes_per_token_median']:5.2f}   "
            f"{row['bound_over_real_min']:15.2f} {row['bound_over_real_p5']:5.2f} {row['bound_over_real_median']:5.2f} "
            f"{row['bound_over_real_p95']:5.2f} {row['bound_over_real_max']:5.2f}"
        )
    print("texts chosen to be hard (bytes per token, bound/real; below 1.00 the bound undercounts)")
    for label, row in report["adversarial"].items():
        flag = "" if row["bound_over_real"] >= 1 else "   <- undercounts (outside the guarantee)"
        print(f"  {label:28s} {row['bytes_per_token']:5.2f} {row['bound_over_real']:6.2f}{flag}")
    shown = report["previews"]
    print(
        f"previews of the {shown['cut_answers']} answers cut at 8,000 tokens: tokens kept with the bound over kept "
        f"with an exact count, median {shown['median']:.2f}, p10 {shown['p10']:.2f}, worst "
        + ", ".join(f"{row['answer']} {row['ratio']:.2f}" for row in shown["worst"])
    )
    timing = report["speed"]
    print(
        f"speed (daily series JSON, best of 7): estimate_tokens 100 KB {timing['estimate_100KB_ms']:.2f} ms, "
        f"1 MB {timing['estimate_1MB_ms']:.1f} ms; fits_budget(1 MB, 8000) with the bound "
        f"{timing['fits_budget_1MB_bound_ms']:.2f} ms; exact count_tokens 100 KB "
        f"{timing['count_tokens_100KB_ms']:.1f} ms, 1 MB {timing['count_tokens_1MB_ms']:.1f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
