"""Re-derives `_PUNCT_PAIRS` of progressive_mcp/tokens.py: the half tokens a punctuation byte costs after another one.

Needs scipy (its MILP solver, HiGHS). scipy is a dev-only tool for this script, not a project dependency: install it
outside the project, e.g. `pip install --target /tmp/scipy-lib scipy`, and run

    PYTHONPATH=/tmp/scipy-lib .venv/bin/python bench/fit_token_pairs.py [--json]

The method (the comment above `_PUNCT_PAIRS` says it): `estimate_tokens` charges a run of punctuation bytes (classes
`_QUOTE` to `_BREAK`) one token, plus `_PUNCT_PAIRS[previous][byte]` half tokens for each byte after the first. An
integer program picks every cost in 0..4 half tokens so that each such run ("piece") costs at least its cl100k_base
tokens, over

- the pieces of the sample answers (every catalog function, JSON and CSV where offered: as served, as JSON, escaped
  in a result; tests/test_token_bound.py's helpers gather them) and of the project's Markdown (README.md, docs/*.md,
  raw and escaped as a JSON string), those seen `--min-count` times or more;
- every piece of `--documents` JSON documents made by this script's generator (seeded), escaped once and twice;

and minimises the cost of all those pieces, each counted as often as it occurs. Then it checks the table on the
pieces of other documents (tests/test_token_bound.py's `random_json`, with `--check-seed`, not the seed the test
uses), adds those it undercounts to the program and solves again, until none is undercounted (this is how `::`
was raised). It prints the table in tokens.py's layout, where it differs from the committed one, and how often
`estimate_tokens` undercounts the texts of tests/test_token_bound.py with each table.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import itertools
import json
import random
import re
import string
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

try:
    import numpy as np
    from scipy.optimize import Bounds, LinearConstraint, milp
except ImportError:
    sys.exit(
        "bench/fit_token_pairs.py needs scipy (a dev-only tool, not a project dependency): "
        "pip install --target /tmp/scipy-lib scipy, then run it with PYTHONPATH=/tmp/scipy-lib"
    )

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # the corpus is the tests' (tests/ is a folder, not a package)

from test_token_bound import hard_texts, random_json, sent_texts, upstream_answers  # noqa: E402

from progressive_mcp import tokens  # noqa: E402
from progressive_mcp.offline.sample_upstream import SampleUpstream  # noqa: E402
from progressive_mcp.tokens import count_tokens, dumps, estimate_tokens  # noqa: E402

CLASSES = len(tokens._PUNCTUATION)
NAMES = ('"', ":", ",", "{ [", "} ]", "\\", "any other punctuation or control character", "tab, line break")
_RUN = re.compile(rb"[%b-%b]+" % (bytes([tokens._QUOTE]), bytes([tokens._BREAK])))
Table = tuple[tuple[int, ...], ...]

# -- the pieces -------------------------------------------------------------------------------------------------


def pieces(text: str) -> Iterator[bytes]:
    """The runs of punctuation bytes of `text`, as `estimate_tokens` sees them."""
    data = text.encode("utf-8", "surrogatepass")
    for match in _RUN.finditer(data.translate(tokens._CLASSES)):
        yield data[match.start() : match.end()]


def count_pieces(texts: Iterable[str]) -> collections.Counter[bytes]:
    counted: collections.Counter[bytes] = collections.Counter()
    for text in texts:
        counted.update(pieces(text))
    return counted


def sample_texts() -> Iterator[str]:
    """Every sample answer as served, as JSON and escaped in a result; the project's Markdown, raw and escaped."""
    with SampleUpstream(port=0) as upstream:
        answers = upstream_answers(upstream.url)
    for answer in answers:
        for _, text in sent_texts(answer):
            yield text
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        markdown = path.read_text(encoding="utf-8")
        yield markdown
        yield dumps(markdown)


# Strings of the generated documents: what APIs answer (dates, prices, URLs, paths, Markdown, quotes), with the
# punctuation inside JSON strings that sample answers rarely have. Unlike the tests' `random_json`, no string of
# punctuation alone ("," ":" "." ...): those are what the bound leaves outside its guarantee.
FRAGMENTS = (
    "IBM",
    "Daily Prices",
    "Société Générale",
    "12.5%",
    "-0.35",
    "$1,234.56",
    "2024-01-05",
    "2024-01-05 16:00:00",
    "2024-01-05T16:00:00.000Z",
    "https://api.example.com/v1/items?id=7&sort=-date#top",
    "C:\\Users\\me\\file.txt",
    'say "hi"',
    "it's",
    "a, b; c",
    "(x)",
    "[1, 2]",
    "{id}",
    "<b>x</b>",
    "N/A",
    "a::b",
    "x=1&y=2",
    "@me #tag",
    "**bold**",
    "[link](https://x.io/a)",
    "`code`",
    "| a | b |\n|---|---|",
    "line\nline",
    "tab\tted",
    "dos\r\n",
    "~/.config/app.yaml",
    "50/50",
    "x <= 1; y > 0",
    "a && b || !c",
    "see: #/components/schemas/Pet",
    "e.g. ...",
    "— “quoted” …",
    "€12",
    "",
)
KEYS = ("id", "1. open", "Meta Data", "$ref", "@type", "x-rate-limit", "a.b", "_links", "", "Time Series (5min)")


def generated_json(rng: random.Random, depth: int = 0) -> Any:
    """A JSON value: objects and lists up to six deep, numbers, literals, empty containers, strings of fragments."""
    roll = rng.random()
    if depth >= 6 or roll < 0.4:
        kind = rng.randrange(7)
        if kind == 0:
            return rng.randint(-(10**7), 10**7)
        if kind == 1:
            return round(rng.uniform(-1e4, 1e4), rng.randint(0, 6))
        if kind == 2:
            return rng.choice([True, False, None, 1e-05, -2.5e10])
        if kind == 3:
            return rng.choice([{}, [], [[]], [{}], {"": ""}, [None], {"a": []}])
        if kind == 4:
            return "".join(rng.choices(string.ascii_letters, k=rng.randint(1, 8)))
        return " ".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(1, 3)))
    if roll < 0.7:
        return [generated_json(rng, depth + 1) for _ in range(rng.randint(0, 5))]
    return {f"{rng.choice(KEYS)}{i}": generated_json(rng, depth + 1) for i in range(rng.randint(0, 5))}


def documents(make: Any, seed: int, count: int) -> Iterator[str]:
    """`count` documents from `make(rng)`, each as compact JSON, escaped once and escaped twice."""
    rng = random.Random(seed)
    for _ in range(count):
        text = dumps(make(rng))
        yield from (text, dumps(text), dumps(dumps(text)))


# -- the integer program ----------------------------------------------------------------------------------------


def pair_counts(piece: bytes) -> np.ndarray:
    """How often each (previous, byte) pair of punctuation classes occurs in `piece`, as a row of CLASSES²."""
    classes = [c - tokens._QUOTE for c in piece.translate(tokens._CLASSES)]
    row = np.zeros(CLASSES * CLASSES)
    for previous, current in itertools.pairwise(classes):
        row[previous * CLASSES + current] += 1
    return row


def fit(weights: dict[bytes, int], real: dict[bytes, int]) -> Table:
    """The costs (0..4 half tokens) of least total over `weights` (piece: occurrences) with every piece at least its
    `real` tokens: one token for its first byte plus its pairs' halves."""
    order = sorted(weights)  # a fixed order: the same program, so the same answer, on every run
    rows = np.array([pair_counts(piece) for piece in order])
    needed = np.array([2 * (real[piece] - 1) for piece in order])
    total = (rows * np.array([weights[piece] for piece in order])[:, None]).sum(axis=0)
    # Ties (a cost no piece needs, or two tables of equal total) go to the smaller costs.
    result = milp(
        total + 1e-6,
        constraints=LinearConstraint(rows, needed, np.inf),
        integrality=np.ones(CLASSES * CLASSES),
        bounds=Bounds(0, 4),
    )
    if not result.success:
        raise RuntimeError(f"the integer program failed: {result.message}")
    costs = np.rint(result.x).astype(int).reshape(CLASSES, CLASSES)
    return tuple(tuple(int(cost) for cost in row) for row in costs)


def cost(table: Table, piece: bytes) -> float:
    """Tokens `estimate_tokens` charges `piece` with `table`."""
    return 1 + float(pair_counts(piece) @ np.array(table).reshape(-1)) / 2


# -- checks -----------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def using(table: Table) -> Iterator[None]:
    """`estimate_tokens` with `table` for `_PUNCT_PAIRS` (tokens.py's derived tables rebuilt, then restored)."""
    saved = tokens._PUNCT_PAIRS, tokens._PAIR_COSTS, tokens._COSTS

    def install(pairs: Table) -> None:
        tokens._PUNCT_PAIRS = pairs  # type: ignore[assignment]  # any 8 x 8 table
        tokens._PAIR_COSTS = bytes(tokens._pair_cost(pair >> 4, pair & 15) for pair in range(256))
        tokens._COSTS = tuple(sorted(set(tokens._PAIR_COSTS) - {0}))

    install(table)
    try:
        yield
    finally:
        tokens._PUNCT_PAIRS, tokens._PAIR_COSTS, tokens._COSTS = saved


def undercounted(table: Table, texts: Sequence[tuple[str, str]]) -> list[tuple[str, int, int]]:
    with using(table):
        found = [(label, estimate_tokens(text), count_tokens(text)) for label, text in texts]
    return [(label, estimate, real) for label, estimate, real in found if estimate < real]


def layout(table: Table) -> str:
    """`table` as tokens.py writes it."""
    lines = ["_PUNCT_PAIRS = (", '    # "  :  ,  {[ }] \\  .  \\n']
    lines += [f"    ({', '.join(map(str, row))}),  # {name}" for row, name in zip(table, NAMES, strict=True)]
    return "\n".join([*lines, ")"])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--min-count", type=int, default=50, help="least occurrences of a sample answers' piece")
    parser.add_argument("--documents", type=int, default=3000, help="generated JSON documents to fit on")
    parser.add_argument("--seed", type=int, default=2024, help="seed of the generated documents")
    parser.add_argument("--check-documents", type=int, default=1000, help="other documents to check the table on")
    parser.add_argument("--check-seed", type=int, default=4, help="their seed (the test uses 99)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    args = parser.parse_args(argv)

    sampled = count_pieces(sample_texts())
    weights = {piece: seen for piece, seen in sampled.items() if seen >= args.min_count}
    for piece, seen in count_pieces(documents(generated_json, args.seed, args.documents)).items():
        weights[piece] = weights.get(piece, 0) + seen
    real = {piece: count_tokens(piece.decode("ascii")) for piece in weights}
    table = fit(weights, real)

    checked = count_pieces(documents(random_json, args.check_seed, args.check_documents))
    real.update({piece: count_tokens(piece.decode("ascii")) for piece in checked if piece not in real})
    raised: list[str] = []
    while missed := sorted(piece for piece in checked if cost(table, piece) < real[piece]):
        raised += [piece.decode("ascii") for piece in missed]
        weights.update({piece: checked[piece] for piece in missed})
        table = fit(weights, real)

    committed: Table = tokens._PUNCT_PAIRS
    texts = [
        *hard_texts(),
        *((f"test document {i}", text) for i, text in enumerate(documents(random_json, 99, 1000))),
    ]
    report = {
        "sample_pieces": len(sampled),
        "sample_pieces_fitted": sum(seen >= args.min_count for seen in sampled.values()),
        "pieces_fitted": len(weights),
        "raised_by_check": raised,
        "table": table,
        "committed": committed,
        "differences": [
            {"after": NAMES[row], "byte": NAMES[column], "fitted": table[row][column], "committed": was}
            for row, costs in enumerate(committed)
            for column, was in enumerate(costs)
            if table[row][column] != was
        ],
        "fitted_total_tokens": sum(weight * cost(table, piece) for piece, weight in weights.items()),
        "committed_total_tokens": sum(weight * cost(committed, piece) for piece, weight in weights.items()),
        "undercounted_tests_texts": {
            "fitted": undercounted(table, texts),
            "tokens.py": undercounted(committed, texts),
        },
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(
        f"pieces: {report['sample_pieces']} distinct in the sample answers and Markdown, "
        f"{report['sample_pieces_fitted']} seen {args.min_count} times or more; {report['pieces_fitted']} fitted in "
        f"all (with {args.documents} generated documents, seed {args.seed}, escaped once and twice)"
    )
    examples = ", ".join(repr(piece) for piece in sorted(raised, key=len)[:6])
    print(
        f"raised after the check on {args.check_documents} other documents: "
        + (f"{len(raised)} pieces undercounted, added and solved again (shortest: {examples})" if raised else "nothing")
    )
    print(layout(table))
    if table == committed:
        print("the same as tokens.py's table")
    else:
        print("differs from tokens.py's table at:")
        for row in report["differences"]:
            print(f"  {row['byte']!r} after {row['after']!r}: {row['fitted']} (tokens.py {row['committed']})")
    print(
        "cost of the fitted pieces in tokens (each as often as it occurs): "
        f"{report['fitted_total_tokens']:,.0f} with this table, {report['committed_total_tokens']:,.0f} "
        "with tokens.py's"
    )
    for name, found in report["undercounted_tests_texts"].items():
        shown = ", ".join(f"{label} ({estimate} for {real})" for label, estimate, real in found[:5])
        print(
            f"the tests' hard texts and 1,000 documents undercounted with the {name} table: {len(found)}"
            + (f": {shown}" if found else "")
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
