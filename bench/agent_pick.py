"""What an agent does with one TOOL_SEARCH answer: does it call the right tool, or rightly say none fits?

`progressive-mcp eval --catalogs` scores the ranking (R@1, R@5) and whether the answer shows a right tool
(`shown`). The agent, not the ranker, makes the last choice, so this measures that choice: a reader (a helper agent,
a person) gets each eval query with the text of `TOOL_SEARCH {query}` as the real surface answers it, may not search
again, and writes which tool it would fetch and call, or "none". A second view, `--view catalog`, gives the reader
the whole catalog (every tool's name, summary and the start of its description) instead of one answer: what a
careful reader of everything scores against the labels, a ceiling for any search.

    .venv/bin/python bench/agent_pick.py dump OUT [--roles tuning] [--view answer|catalog]
    # a reader writes OUT/<row>_picks*.jsonl as OUT/PROMPT.md says, then:
    .venv/bin/python bench/agent_pick.py score OUT [--json]

`dump` writes, per catalog row of eval/catalogs.yaml (a split of its own where the splits' roles differ):
`<row>_items.jsonl` (`{"id", "query", "answer"}`; catalog view: `{"id", "query"}` and `<row>_tools.txt`), the
queries in a seeded shuffled order under ids that name no eval query, and `<row>_key.json` mapping those ids back.
No label is written. `score` reads the picks (`{"id", "none", "pick": [best, alt, alt]}`) and prints per row and
pooled by role: picked right (the first pick is a grade-2 tool), right among its picks, shown (answer view: a
grade-2 tool named in the answer), "none" on the off-topic queries and on the answerable ones. It prints no query.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from progressive_mcp.search.catalogs_eval import load_manifest  # noqa: E402
from progressive_mcp.search.evaluation import (  # noqa: E402
    HIT_GRADE,
    load_queries,
    names_shown,
    search_surface,
    select_split,
    surface_answerer,
)
from progressive_mcp.sources import load_catalog  # noqa: E402

MANIFEST = ROOT / "eval" / "catalogs.yaml"
SEED = 11
DESCRIPTION_CHARS = 220

ANSWER_PROMPT = """\
You are acting as an AI agent that serves user requests through an MCP server exposing a large API through
meta-tools. For each user request, the agent has already called `TOOL_SEARCH` once with the request as its query,
and received the answer shown. The agent may NOT search again and sees nothing else of the API but this answer.
This is a measurement of what a careful agent does with one search answer: work by reading and judging yourself,
NOT by writing a program or script to choose (no keyword matching code, no embeddings). Do not read any file on
this machine other than this prompt and the input file you are given.

How to read an answer (JSON text):
- `results`: the best hits in detail (name, summary, ...). Empty when the server found no confident match.
- `more`: further candidates, one `name: summary` line each (summaries are cut short).
- `candidates` (only when there is no confident match): the closest tools, low-confidence.
- `closest`: (only when nothing fits) tools that are unlikely to fit.
- `hint`: what the server says about the answer.

For EVERY item decide what the agent does next:
- pick the ONE tool it would fetch with TOOL_GET and then call to serve the request (a name exactly as written
  in the answer), and up to 2 alternatives, best first; or
- "none": the agent would tell the user this API cannot do that (the request is off-topic for this API or asks
  for something none of the shown tools can do).

Write one JSON object per line, in the input's order, to the output file you are given:
{"id": "<id>", "none": false, "pick": ["tool", "alt1", "alt2"]}   or   {"id": "<id>", "none": true, "pick": []}

Work in chunks (e.g. 20 items at a time), appending to the output as you go. At the end, check (a small script for
this check only is fine) that there is exactly one line per input id and that every picked name appears in that
item's answer text. Report back only the number of lines written and how many were "none".
"""

CATALOG_PROMPT = """\
You are acting as an AI agent choosing which API tool to call for user requests. This is a measurement of how well
a careful reader does: work by reading and judging yourself, NOT by writing a program or script to rank tools (no
keyword matching code, no embeddings). Do not read any file on this machine other than this prompt and the two
input files you are given: a tool list (`name — summary | description excerpt`, one tool per line) and the
requests (`{"id", "query"}` per line).

For EVERY request decide:
1. Can some tool in the list serve it (fully, or as the main call an agent would make first)? If none can (the
   request is off-topic for this API, or asks for something it cannot do), set "none": true.
2. Rank up to 5 tool names from the list, best first: the tool you would call first is first. If "none" is true,
   you may still list the closest tools.

Write one JSON object per line, in the requests' order, to the output file you are given, with exact tool names:
{"id": "<id>", "none": false, "pick": ["tool1", "tool2", ...]}

Work in chunks (e.g. 20 at a time), appending as you go. At the end, check (a small script for this format and name
check only is fine) that there is one line per request id and every name is in the tool list. Report back only the
number of answers written and how many were marked none.
"""


def rows(manifest: Path, roles: set[str]) -> Iterator[tuple[str, str, Any, str]]:
    """(row name, role, manifest catalog, split) for each row of the manifest whose role is wanted, as `eval
    --catalogs` makes its rows: a catalog whose splits have different roles gives a row per split."""
    for item in load_manifest(manifest):
        by_split = item.entry.roles("all")
        if len(set(by_split.values())) == 1:
            role = next(iter(by_split.values()))
            if role in roles:
                yield item.entry.name, role, item, "all"
            continue
        for split, role in by_split.items():
            if role in roles:
                yield f"{item.entry.name}-{split}", role, item, split


def tool_line(tool: Any) -> str:
    summary = " ".join((tool.summary or "").split())
    description = " ".join((tool.description or "").split())
    text = summary
    if description and description[:60] != summary[:60]:
        text = f"{text} | {description[:DESCRIPTION_CHARS]}" if text else description[:DESCRIPTION_CHARS]
    return f"{tool.name} — {text}"


def dump(out: Path, roles: set[str], view: str, manifest: Path) -> list[str]:
    """The reader's inputs and the keys, per row; returns the rows written."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "PROMPT.md").write_text(ANSWER_PROMPT if view == "answer" else CATALOG_PROMPT, encoding="utf-8")
    written = []
    for row, role, item, split in rows(manifest, roles):
        if item.external and item.spec is not None and not item.spec.is_file():
            print(f"{row}: skipped, document absent: {item.spec}", file=sys.stderr)
            continue
        catalog = load_catalog(item.spec)
        queries = select_split(load_queries(item.queries, catalog), split)
        random.Random(SEED).shuffle(queries)
        ids = {f"{row[:2]}{i:03d}": query for i, query in enumerate(queries)}
        if view == "answer":
            answer = surface_answerer(catalog, meta=search_surface(catalog))
            items = [{"id": key, "query": q.query, "answer": answer(q.query)} for key, q in ids.items()]
        else:
            items = [{"id": key, "query": q.query} for key, q in ids.items()]
            lines = [tool_line(tool) for tool in catalog.tools]
            (out / f"{row}_tools.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
        with open(out / f"{row}_items.jsonl", "w", encoding="utf-8") as f:
            for entry in items:
                f.write(json.dumps(entry, ensure_ascii=False) + "\n")
        key = {"catalog": item.entry.name, "role": role, "split": split, "view": view}
        key["ids"] = {k: q.id for k, q in ids.items()}
        (out / f"{row}_key.json").write_text(json.dumps(key, indent=1) + "\n", encoding="utf-8")
        written.append(row)
        print(f"{row} ({role}): {len(items)} items", file=sys.stderr)
    return written


def _picks(out: Path, row: str) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(out.glob(f"{row}_picks*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                pick = json.loads(line)
                found[pick["id"]] = pick
    return found


def score_row(out: Path, row: str, manifest: Path) -> dict[str, Any] | None:
    """One row's figures, or None when it has no picks yet."""
    key = json.loads((out / f"{row}_key.json").read_text(encoding="utf-8"))
    picks = _picks(out, row)
    if not picks:
        return None
    item = next(i for i in load_manifest(manifest) if i.entry.name == key["catalog"])
    catalog = load_catalog(item.spec)
    labels = {q.id: q for q in load_queries(item.queries, catalog)}
    answers: dict[str, str] = {}
    items = out / f"{row}_items.jsonl"
    if key["view"] == "answer" and items.is_file():  # kept results may hold the picks and keys alone
        for line in items.read_text(encoding="utf-8").splitlines():
            entry = json.loads(line)
            answers[entry["id"]] = entry["answer"]
    counts = {"positives": 0, "negatives": 0, "right": 0, "among": 0, "shown": 0, "none_neg": 0, "none_pos": 0}
    missing = sorted(set(key["ids"]) - set(picks))
    for anon, query_id in key["ids"].items():
        if anon not in picks:
            continue
        query, pick = labels[query_id], picks[anon]
        chosen = [] if pick.get("none") else list(pick.get("pick") or [])
        if not query.positive:
            counts["negatives"] += 1
            counts["none_neg"] += bool(pick.get("none"))
            continue
        right = {name for name, grade in query.relevant.items() if grade >= HIT_GRADE}
        counts["positives"] += 1
        counts["none_pos"] += bool(pick.get("none"))
        counts["right"] += bool(chosen) and chosen[0] in right
        counts["among"] += bool(right.intersection(chosen))
        if answers:
            counts["shown"] += bool(names_shown(answers[anon], sorted(right)))
    return {
        "row": row,
        "role": key["role"],
        "view": key["view"],
        "answers": bool(answers),
        "missing": len(missing),
        **counts,
    }


def rates(counts: dict[str, Any]) -> dict[str, float | None]:
    pos, neg = counts["positives"], counts["negatives"]

    def share(n: int, d: int) -> float | None:
        return round(n / d, 3) if d else None

    return {
        "picked_right": share(counts["right"], pos),
        "right_among_picks": share(counts["among"], pos),
        "shown": share(counts["shown"], pos) if counts.get("answers") else None,
        "none_on_off_topic": share(counts["none_neg"], neg),
        "none_on_answerable": share(counts["none_pos"], pos),
    }


def score(out: Path, manifest: Path) -> dict[str, Any]:
    keys = [path.name.removesuffix("_key.json") for path in sorted(out.glob("*_key.json"))]
    found = [row for row in (score_row(out, name, manifest) for name in keys) if row]
    figures = ("positives", "negatives", "right", "among", "shown", "none_neg", "none_pos")
    pooled: dict[str, dict[str, Any]] = {}
    for row in found:
        group = pooled.setdefault(row["role"], {"view": row["view"], "answers": True, **dict.fromkeys(figures, 0)})
        group["answers"] = group["answers"] and row["answers"]
        for name in figures:
            group[name] += row[name]
    return {
        "rows": [{**row, **rates(row)} for row in found],
        "pooled": {role: {**group, **rates(group)} for role, group in pooled.items()},
    }


def _print(report: dict[str, Any]) -> None:
    print(f"{'row':18} {'role':9} {'view':8} {'pos':>4} {'neg':>4}  picked right  among picks  shown  ", end="")
    print("none: off-topic / answerable")

    def line(name: str, r: dict[str, Any]) -> None:
        def f(v: float | None) -> str:
            return "  -  " if v is None else f"{v:.3f}"

        print(
            f"{name:18} {r.get('role', ''):9} {r['view']:8} {r['positives']:4} {r['negatives']:4}  "
            f"{f(r['picked_right']):>12}  {f(r['right_among_picks']):>11}  {f(r['shown']):>5}  "
            f"{f(r['none_on_off_topic'])} / {f(r['none_on_answerable'])}"
            + (f"  ({r['missing']} without a pick)" if r.get("missing") else "")
        )

    for row in report["rows"]:
        line(row["row"], row)
    for role, group in report["pooled"].items():
        line(f"pooled {role}", {**group, "role": role})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump", help="write the reader's inputs and the keys")
    d.add_argument("out", type=Path)
    d.add_argument("--roles", default="tuning", help="comma-separated: tuning, held-out (default: tuning)")
    d.add_argument("--view", choices=("answer", "catalog"), default="answer")
    d.add_argument("--manifest", type=Path, default=MANIFEST)
    s = sub.add_parser("score", help="score the picks against the labels")
    s.add_argument("out", type=Path)
    s.add_argument("--manifest", type=Path, default=MANIFEST)
    s.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "dump":
        roles = {r.strip() for r in args.roles.split(",") if r.strip()}
        unknown = roles - {"tuning", "held-out", "reference"}
        if unknown:
            parser.error(f"unknown role(s): {', '.join(sorted(unknown))}")
        dump(args.out, roles, args.view, args.manifest)
        return 0
    report = score(args.out, args.manifest)
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        _print(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
