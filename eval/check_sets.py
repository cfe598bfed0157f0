"""Check query sets of eval/catalogs.yaml against their catalogs, and print their counts.

    python eval/check_sets.py                  # the sets named in DEFAULT (the newest ones)
    python eval/check_sets.py twilio slack     # sets by catalog name
    python eval/check_sets.py --all            # every set of the manifest

Beyond what `load_queries` checks (it is called too), a set must have: exactly the five fields on each line; ids
that run prefix001, prefix002 ... in file order; no query twice (ignoring case and spacing); `dev`/`test`
alternating within each kind in file order; a grade-2 tool on every positive, two on every `multi`; `{}` on every
negative; and no five-word run shared with any tool's title, summary or description, so that a query does not
echo the catalog's own prose. Exits 1 naming every problem, else 0.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from progressive_mcp.catalog import Catalog
from progressive_mcp.search.catalogs_eval import load_manifest
from progressive_mcp.search.evaluation import load_queries
from progressive_mcp.sources import load_catalog

HERE = Path(__file__).resolve().parent
DEFAULT = ("twilio", "stripe", "openai")
FIELDS = {"id", "query", "relevant", "kind", "split"}
KINDS = ("paraphrase", "entity", "jargon", "multi", "vague", "negative")
RUN = 5  # words: a longer run shared with the catalog's prose counts as copied


def words(text: str) -> list[str]:
    """Lower-case word tokens of a text, HTML tags and entities (Stripe's descriptions) removed."""
    return re.findall(r"[a-z0-9]+", html.unescape(re.sub(r"<[^>]+>", " ", text)).lower())


def runs(tokens: list[str], n: int = RUN) -> set[tuple[str, ...]]:
    return {tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


def catalog_runs(catalog: Catalog) -> set[tuple[str, ...]]:
    found: set[tuple[str, ...]] = set()
    for tool in catalog.tools:
        for text in (tool.title, tool.summary, tool.description):
            found |= runs(words(text))
    return found


def problems(path: Path, catalog: Catalog) -> list[str]:
    """Everything wrong with one query file, each naming its line."""
    found: list[str] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    prose = catalog_runs(catalog)
    seen_queries: dict[str, int] = {}
    per_kind: Counter[str] = Counter()
    prefix = None
    for number, line in enumerate(lines, 1):
        where = f"{path.name}:{number}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            found.append(f"{where}: not JSON ({error})")
            continue
        if not isinstance(row, dict) or set(row) != FIELDS:
            found.append(f"{where}: expected exactly the fields {sorted(FIELDS)}")
            continue
        ident, query, relevant, kind, split = (row[key] for key in ("id", "query", "relevant", "kind", "split"))
        match = re.fullmatch(r"([a-z]+)(\d{3})", str(ident))
        if not match or int(match.group(2)) != number or (prefix is not None and match.group(1) != prefix):
            found.append(f"{where}: id {ident!r} out of sequence")
        elif prefix is None:
            prefix = match.group(1)
        key = " ".join(str(query).lower().split())
        if key in seen_queries:
            found.append(f"{where}: query repeats line {seen_queries[key]}")
        seen_queries.setdefault(key, number)
        if kind not in KINDS:
            found.append(f"{where}: unknown kind {kind!r}")
        expected_split = "dev" if per_kind[kind] % 2 == 0 else "test"
        per_kind[kind] += 1
        if split != expected_split:
            found.append(f"{where}: split {split!r}, expected {expected_split!r} (alternating within {kind})")
        if not isinstance(relevant, dict):
            found.append(f"{where}: relevant is not an object")
            continue
        for name, grade in relevant.items():
            if name not in catalog:
                found.append(f"{where}: {name!r} is not a tool of the catalog")
            if grade not in (1, 2) or isinstance(grade, bool):
                found.append(f"{where}: grade {grade!r} of {name!r} is not 1 or 2")
        hits = sum(1 for grade in relevant.values() if grade == 2)
        if kind == "negative" and relevant:
            found.append(f"{where}: a negative is labelled {{}}")
        if kind != "negative" and hits < (2 if kind == "multi" else 1):
            found.append(f"{where}: {kind} needs {'two grade-2 tools' if kind == 'multi' else 'a grade-2 tool'}")
        shared = runs(words(str(query))) & prose
        if shared:
            found.append(f"{where}: shares {' '.join(sorted(shared)[0])!r} with a tool's prose")
    if not found:
        load_queries(path, catalog)  # raises on anything it rejects
    return found


def counts(path: Path, catalog: Catalog) -> str:
    """The counts a README section reports: per kind and split, coverage, grades."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    table = ["| kind | total | dev | test |", "|---|---:|---:|---:|"]
    for kind in (*KINDS, None):
        some = [row for row in rows if kind is None or row["kind"] == kind]
        dev = sum(row["split"] == "dev" for row in some)
        label = kind or "**all**"
        table.append(f"| {label} | {len(some)} | {dev} | {len(some) - dev} |")
    grade2 = {name for row in rows for name, grade in row["relevant"].items() if grade == 2}
    labelled = {name for row in rows for name in row["relevant"]}
    ones = sum(grade == 1 for row in rows for grade in row["relevant"].values())
    several = sum(sum(grade == 2 for grade in row["relevant"].values()) >= 2 for row in rows)
    table.append("")
    table.append(
        f"{len(grade2)} of {len(catalog)} tools are grade-2 targets; {len(labelled)} labelled at some grade; "
        f"{ones} grade-1 labels; {several} queries with two or more grade-2 tools."
    )
    return "\n".join(table)


def select(names: Iterable[str] | None) -> list[tuple[str, Path, Path | None]]:
    items = load_manifest(HERE / "catalogs.yaml")
    chosen = [item for item in items if names is None or item.entry.name in names]
    return [(item.entry.name, item.queries, item.spec) for item in chosen]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"catalog names of eval/catalogs.yaml (default: {' '.join(DEFAULT)})")
    parser.add_argument("--all", action="store_true", help="every set of the manifest")
    args = parser.parse_args(argv)
    chosen = select(None if args.all else (args.names or DEFAULT))
    failed = False
    for name, queries, spec in chosen:
        if spec is not None and not spec.is_file():
            print(f"{name}: skipped, {spec} is absent")
            continue
        catalog = load_catalog(spec)
        found = problems(queries, catalog)
        failed |= bool(found)
        print(f"{name}: {queries.name}, {len(catalog)} tools: {'ok' if not found else f'{len(found)} problems'}")
        for problem in found:
            print(f"  {problem}")
        if not found:
            print(counts(queries, catalog))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
