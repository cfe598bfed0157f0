"""Two `progressive-mcp eval --catalogs --json --outcomes` runs compared query by query: how many queries each
change won and lost, and whether that is more than chance.

    .venv/bin/progressive-mcp eval --catalogs --json --outcomes > before.json
    # ... change the engine ...
    .venv/bin/progressive-mcp eval --catalogs --json --outcomes > after.json
    .venv/bin/python bench/paired_eval.py before.json after.json
    .venv/bin/python bench/paired_eval.py before.json after.json --roles tuning   # decide before reading held-out

A mean that moves by .005 is one query in two hundred: the two runs agree on nearly every query, so what decides is
how many flipped each way. For each catalog row (a split of its own when its splits have different roles) and for
the tuning and held-out queries pooled, it prints the queries whose first grade-2 tool entered or left the first
place (R@1) and the top 5 (R@5), whose answer started or stopped showing a grade-2 tool (shown), and, for the
off-topic ones, that started or stopped getting no result (no-match), with a two-sided exact sign test over the
flips (p: the chance of a split at least this uneven if each flip went either way at random). Queries are matched
by id; their text is not in the files and nothing here prints it (held-out queries stay unread).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

Outcome = Mapping[str, Any]


def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact binomial test of wins against losses at p = 1/2 (1.0 when nothing flipped)."""
    n = wins + losses
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(wins, losses) + 1)) / 2**n
    return min(1.0, 2 * tail)


def flips(pairs: Iterable[tuple[Outcome, Outcome]]) -> dict[str, tuple[int, int]]:
    """(won, lost) per figure over the paired outcomes (before, after)."""

    def at(outcome: Outcome, k: int) -> bool:
        return outcome["rank"] is not None and outcome["rank"] <= k

    counts = {"R@1": [0, 0], "R@5": [0, 0], "shown": [0, 0], "no-match": [0, 0], "false no-match": [0, 0]}

    def count(figure: str, before: bool, after: bool, good: bool = True) -> None:
        if before != after:
            counts[figure][0 if after == good else 1] += 1

    for before, after in pairs:
        if before["positive"]:
            count("R@1", at(before, 1), at(after, 1))
            count("R@5", at(before, 5), at(after, 5))
            if before.get("shown") is not None and after.get("shown") is not None:
                count("shown", before["shown"], after["shown"])
            count("false no-match", before["no_match"], after["no_match"], good=False)
        else:
            count("no-match", before["no_match"], after["no_match"])
    return {figure: (won, lost) for figure, (won, lost) in counts.items()}


def _role(role: str | Mapping[str, str], split: str) -> str:
    return role if isinstance(role, str) else role.get(split, "?")


def groups(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, list[tuple[Outcome, Outcome]]]:
    """The paired outcomes per catalog row, then pooled by role (tuning, held-out; the reference catalog apart)."""
    found: dict[str, list[tuple[Outcome, Outcome]]] = {}
    later = {c["name"]: c for c in after["catalogs"]}
    for catalog in before["catalogs"]:
        other = later.get(catalog["name"])
        if "outcomes" not in catalog or other is None or "outcomes" not in other:
            continue
        by_id = {o["id"]: o for o in other["outcomes"]}
        role = catalog["role"]
        for outcome in catalog["outcomes"]:
            if outcome["id"] not in by_id:
                continue
            pair = (outcome, by_id[outcome["id"]])
            split_role = _role(role, outcome["split"])
            row = catalog["name"] if isinstance(role, str) else f"{catalog['name']} [{outcome['split']}]"
            found.setdefault(f"{row} ({split_role})", []).append(pair)
            if split_role != "reference":
                found.setdefault(f"pooled {split_role}", []).append(pair)
    return found


def report(before: Mapping[str, Any], after: Mapping[str, Any], roles: frozenset[str] | None = None) -> str:
    """The table; `roles`: only the rows of these roles (`tuning`: decide on the tuning sets before reading the
    held-out rows)."""
    figures = ("R@1", "R@5", "shown", "no-match", "false no-match")
    rows = groups(before, after)
    if roles is not None:
        rows = {
            label: pairs
            for label, pairs in rows.items()
            if label.rstrip(")").rsplit("(", 1)[-1] in roles or label.removeprefix("pooled ") in roles
        }
    if not rows:
        raise SystemExit("no catalog has outcomes in both files: run `eval --catalogs --json --outcomes`")
    width = max(len(label) for label in rows)
    lines = [f"{'row':<{width}}  " + "".join(f"{f + ' +/- (p)':>24}" for f in figures)]
    ordered = sorted(rows, key=lambda label: (label.startswith("pooled"), label))
    for label in ordered:
        counted = flips(rows[label])
        cells = []
        for figure in figures:
            won, lost = counted[figure]
            cells.append(f"{f'+{won}/-{lost} ({sign_test(won, lost):.2f})':>24}")
        lines.append(f"{label:<{width}}  " + "".join(cells))
    lines.append("a cell: queries won / lost by the second run, and the sign test's p over them")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--roles", help="only rows of these roles, comma-separated (tuning, held-out, reference)")
    args = parser.parse_args(argv)
    before, after = (json.loads(path.read_text(encoding="utf-8")) for path in (args.before, args.after))
    print(report(before, after, frozenset(args.roles.split(",")) if args.roles else None))
    return 0


if __name__ == "__main__":
    sys.exit(main())
