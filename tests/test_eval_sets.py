"""eval/check_sets.py: the checks a query set must pass beyond load_queries, on the sets it guards and on bad lines."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from progressive_mcp.sources import load_catalog

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT.parent / "shared" / "openapi"


def _checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_sets", ROOT / "eval" / "check_sets.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check_sets = _checker()


@pytest.mark.parametrize(
    ("name", "document", "tools"),
    [
        ("twilio", "twilio/twilio_api_v2010.json", 197),
        ("openai", "openai/openapi.yaml", 288),
        # the same checks on a document twice the size (its load alone is ~15 CPU-s): make test-slow
        pytest.param("stripe", "stripe/spec3.json", 417, marks=pytest.mark.slow),
    ],
)
def test_the_held_out_sets_pass_every_check(name: str, document: str, tools: int) -> None:
    if not (DOCS / document).is_file():
        pytest.skip(f"{DOCS / document} is absent")
    catalog = load_catalog(DOCS / document)
    assert len(catalog) == tools
    path = ROOT / "eval" / f"{name}.jsonl"
    assert check_sets.problems(path, catalog) == []
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    kinds = {kind: sum(row["kind"] == kind for row in rows) for kind in check_sets.KINDS}
    assert kinds == {"paraphrase": 70, "entity": 50, "jargon": 20, "multi": 20, "vague": 40, "negative": 50}


def row(number: int, query: str, relevant: dict[str, Any], kind: str = "paraphrase", split: str = "dev") -> str:
    return json.dumps({"id": f"x{number:03d}", "query": query, "relevant": relevant, "kind": kind, "split": split})


def test_the_checker_names_each_bad_line(tmp_path: Path) -> None:
    catalog = load_catalog(None)  # the bundled Alpha Vantage catalog: always present
    tool = catalog.tools[0]
    copied = " ".join(check_sets.words(tool.description)[:6])
    assert len(copied.split()) == 6, tool.description
    lines = [
        row(1, "price of apple", {tool.name: 2}),
        row(2, "Price of  APPLE", {tool.name: 2}, split="test"),  # the same query, case and spacing aside
        row(3, "a tool that is not there", {"NO_SUCH_TOOL": 2}),
        row(4, "two needs, one hit", {tool.name: 2, catalog.tools[1].name: 1}, kind="multi"),
        row(5, "weather", {tool.name: 1}, kind="negative"),
        row(6, "partial only", {tool.name: 1}, split="dev"),  # paraphrase: dev, test, dev, test ... so test here
        row(8, "id skips a number", {tool.name: 2}),
        row(8, copied, {tool.name: 2}, split="test"),
        '{"id": "x009", "query": "extra field", "relevant": {}, "kind": "negative", "split": "test", "x": 1}',
        "not json",
    ]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    found = check_sets.problems(path, catalog)
    expected = [
        "bad.jsonl:2: query repeats line 1",
        "bad.jsonl:3: 'NO_SUCH_TOOL' is not a tool of the catalog",
        "bad.jsonl:4: multi needs two grade-2 tools",
        "bad.jsonl:5: a negative is labelled {}",
        "bad.jsonl:6: split 'dev', expected 'test' (alternating within paraphrase)",
        "bad.jsonl:6: paraphrase needs a grade-2 tool",
        "bad.jsonl:7: id 'x008' out of sequence",
        "bad.jsonl:8: shares",
        "bad.jsonl:9: expected exactly the fields",
        "bad.jsonl:10: not JSON",
    ]
    for wanted in expected:
        assert any(problem.startswith(wanted) for problem in found), (wanted, found)
    assert len(found) == len(expected), found


def test_a_clean_file_passes_and_reaches_load_queries(tmp_path: Path) -> None:
    catalog = load_catalog(None)
    first, second = catalog.tools[0].name, catalog.tools[1].name
    path = tmp_path / "good.jsonl"
    path.write_text(
        "\n".join(
            [
                row(1, "zzq one", {first: 2}),
                row(2, "zzq two and three", {first: 2, second: 2}, kind="multi"),
                row(3, "zzq hello", {}, kind="negative"),
                row(4, "zzq four", {second: 2, first: 1}, split="test"),
            ]
        )
        + "\n"
    )
    assert check_sets.problems(path, catalog) == []
