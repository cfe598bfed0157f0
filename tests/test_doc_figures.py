"""Figures and lists the README and docs/ quote that a command or the code can produce, checked against it, so
they cannot go stale: token counts (`make tokens`; `make demo`'s in tests/test_demo.py), the sample universe,
the minimum key, flag counts and usage lines, `make bench`'s scripts and `make test`'s extras.

Token figures are checked as the command rounds them, exactly: the tokenizer's version is pinned (bpe-openai in
pyproject.toml), and a change that moves a count (a tokenizer, a meta-tool's text) should move the quoted figure."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def text(path: Path) -> str:
    """A page with its lines joined, so a phrase is found across a line break."""
    return " ".join(path.read_text(encoding="utf-8").split())


def number(figure: str) -> float:
    return float(figure.replace(",", ""))


def close(quoted: float, actual: float) -> bool:
    """A quoted count is the counted one as the report rounds it (a mean of 237.8 is quoted 238)."""
    return quoted == round(actual)


def subcommands() -> dict[str, argparse.ArgumentParser]:
    from progressive_mcp.cli import build_parser

    action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def long_flags(parser: argparse.ArgumentParser) -> list[str]:
    return [o for a in parser._actions for o in a.option_strings if o.startswith("--") and o != "--help"]


@pytest.fixture(scope="module")
def token_figures() -> dict[str, Any]:
    from progressive_mcp.report import token_report

    return dict(json.loads(token_report(None, as_json=True, encodings=("cl100k",))))


def test_the_readme_token_table_is_what_make_tokens_counts(token_figures: dict[str, Any]) -> None:
    rows = {
        line.split("|")[1].strip(): line.split("|")[2].strip()
        for line in README.read_text(encoding="utf-8").splitlines()
        if line.startswith("| ") and line.count("|") >= 4
    }

    def quoted(row: str) -> float:
        figure = re.match(r"[\d,.]+", rows[row])
        assert figure, (row, rows[row])
        return number(figure.group(0))

    f = token_figures
    expected = {
        "`tools/list`": f["tools_list"]["progressive"]["tokens"]["cl100k"],
        "the whole catalog as MCP tools (`--mode direct`)": f["tools_list"]["direct"]["tokens"]["cl100k"],
        "`TOOL_LIST`, whole catalog": f["tool_list"]["catalog"]["names"]["tokens"]["cl100k"],
        "`TOOL_GET`, one tool, mean": f["tool_get"]["mean"]["tokens"]["cl100k"],
        "one task (mean of three), all but the tool's answer": f["flows"]["search_schemas_call"][
            "mean_without_call_answer"
        ]["tokens"]["cl100k"],
    }
    wrong = {row: (quoted(row), actual) for row, actual in expected.items() if not close(quoted(row), actual)}
    assert not wrong, f"README figures (quoted, counted) that are not what `make tokens` counts: {wrong}"


def test_the_readme_auto_figures_are_what_make_tokens_counts(token_figures: dict[str, Any]) -> None:
    text = " ".join(README.read_text(encoding="utf-8").split())
    auto = token_figures["auto"]
    forex, whole = auto["by_category"]["forex"], auto["catalog"]
    assert (forex["picks"], whole["picks"]) == ("direct", "progressive")
    said = re.search(
        r"`PMCP_AUTO_DIRECT_TOKENS` \(([\d,]+) tokens.*?`\?categories=forex` \((\d+) tools, ([\d,]+) tokens\) "
        r"goes direct, the whole catalog \(([\d,]+)\) does not",
        text,
    )
    assert said, "the README no longer states the auto rule with its figures"
    quoted = [number(g) for g in said.groups()]
    assert quoted == [
        auto["threshold"],
        forex["tools"],
        forex["direct"]["tokens"]["cl100k"],
        whole["direct"]["tokens"]["cl100k"],
    ]


def test_the_minimum_sample_key_the_docs_quote_is_the_codes() -> None:
    from progressive_mcp.redaction import MIN_KEY_CHARS

    said = [
        (page.name, int(found))
        for page in [README, *sorted(DOCS.glob("*.md"))]
        for found in re.findall(r"key of (\d+)(?:\+| or more) characters", text(page))
    ]
    assert len(said) >= 3, said  # README, configuration.md, development.md, http.md say it
    assert all(count == MIN_KEY_CHARS for _, count in said), (said, MIN_KEY_CHARS)


def test_the_sample_universe_in_the_docs_is_the_sample_upstreams() -> None:
    from progressive_mcp.offline.sample_upstream import COMPANIES

    found = re.search(r"a small made-up universe: ([A-Z, ]+?) and ([A-Z]+) \(", text(DOCS / "configuration.md"))
    assert found, "docs/configuration.md no longer lists the sample universe"
    listed = [*found.group(1).split(", "), found.group(2)]
    assert sorted(listed) == sorted(COMPANIES), (listed, sorted(COMPANIES))


def test_serve_flags_in_the_docs_are_serves() -> None:
    commands = subcommands()
    stdio, serve = long_flags(commands["stdio"]), long_flags(commands["serve"])
    own = [flag for flag in serve if flag not in stdio]
    stdio_only = {"--policy"}  # the local user's policy: over HTTP each caller's token picks it
    assert set(stdio) - stdio_only <= set(serve)
    shared = len(set(stdio) - stdio_only)
    configuration = text(DOCS / "configuration.md")
    assert (
        f"The same {shared} flags as `stdio` (all but `--policy`), plus the {len(own)} after `--log-level` below."
        in configuration
    )
    section = (DOCS / "configuration.md").read_text(encoding="utf-8").split("## `progressive-mcp serve`")[1]
    table = section.split("\n\n")[2]  # after the sentence above: the flags' table
    assert re.findall(r"^\| `(--[a-z-]+)", table, re.M) == serve
    usage = re.search(r"```sh\n(progressive-mcp serve .*?)```", (DOCS / "http.md").read_text(), re.S)
    assert usage, "docs/http.md no longer shows serve's usage"
    assert sorted(set(re.findall(r"--[a-z-]+", usage.group(1)))) == sorted(serve)


def test_the_bench_scripts_and_test_extras_in_development_md_are_the_makefiles() -> None:
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^bench:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert recipe
    scripts = re.findall(r"bench/[\w.]+\.py", recipe.group(1))
    development = text(DOCS / "development.md")
    said = re.search(
        r"`make bench` runs its (\d+) scripts in this order, each printing its figures: (.*?)\. ", development
    )
    assert said, "docs/development.md no longer lists make bench's scripts"
    assert int(said.group(1)) == len(scripts)
    assert re.findall(r"bench/[\w.]+\.py", said.group(2)) == scripts
    extras = re.search(r"^EXTRAS := \.\[([\w,]+)\]$", makefile, re.M)
    assert extras and "$(call INSTALL,-e '$(EXTRAS)')" in makefile
    names = extras.group(1).split(",")
    listed = ", ".join(f"`{n}`" for n in names[:-1]) + f" and `{names[-1]}`"
    assert f"`make test` installs the {listed} extras." in development
    assert f"`make test` installs the {listed} extras" in text(DOCS / "configuration.md")


README_EVAL_MARK = "<!-- progressive-mcp eval --catalogs --markdown -->"


@pytest.mark.slow  # every catalog of eval/catalogs.yaml through the engine and BM25: ~80 CPU-seconds
def test_the_readme_search_table_is_what_eval_catalogs_measures() -> None:
    from real_documents import SHARED

    from progressive_mcp.search.catalogs_eval import markdown_catalogs, run_catalogs

    if not SHARED.is_dir():
        pytest.skip(f"the real OpenAPI documents are not at {SHARED}; the table needs every catalog")
    lines = README.read_text(encoding="utf-8").splitlines()
    assert README_EVAL_MARK in lines, "the README's search table lost its marker"
    start = lines.index(README_EVAL_MARK) + 1
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    quoted = "\n".join(lines[start:end])
    measured = markdown_catalogs(run_catalogs(ROOT / "eval" / "catalogs.yaml"))
    stale = table_differences(quoted, measured)
    assert not stale, (
        f"README's table is stale ({'; '.join(stale)}); paste what `progressive-mcp eval --catalogs --markdown` "
        f"prints:\n{measured}"
    )


# The engine's figures move with the CPU: the same commit gave cells up to two queries apart on two machines of this
# workplace (2026-11-28: Last.fm R@1 .455 and .445, Slack .450 and .438) with the same onnxruntime, most likely its
# kernels (int8 and float) chosen by CPU, the second having AVX-512 VNNI. So an engine figure may be within two
# queries of the smallest set's 160 positives, and a median of tokens within 3%; BM25's figures (pure Python), the
# rows and their labels are exact.
ENGINE_SLACK = 2 / 160 + 1e-9
TOKENS_SLACK = 0.03


def table_differences(quoted: str, measured: str) -> list[str]:
    """How the README's copy of the search table differs from a fresh one beyond what the CPU explains. Columns:
    catalog, role, tools (exact); R@1, R@5, MRR as engine / BM25; shown (tokens); no-match / false no-match (both
    the engine's)."""
    old_rows, new_rows = quoted.splitlines(), measured.splitlines()
    if len(old_rows) != len(new_rows):
        return [f"{len(old_rows)} rows quoted, {len(new_rows)} measured"]
    found = []
    for old_row, new_row in zip(old_rows, new_rows, strict=True):
        old_cells = [cell.strip() for cell in old_row.strip("|").split("|")]
        new_cells = [cell.strip() for cell in new_row.strip("|").split("|")]
        if old_row == new_row or old_row.startswith("|---") or old_cells[0] == "catalog":
            if old_row != new_row:
                found.append(f"header {old_row!r} is {new_row!r}")
            continue
        if len(old_cells) != 8 or len(new_cells) != 8 or old_cells[:3] != new_cells[:3]:
            found.append(f"row {old_row!r} is {new_row!r}")
            continue
        for column, (old, new) in enumerate(zip(old_cells[3:], new_cells[3:], strict=True)):
            if old != new and not _within_slack(column, old, new):
                found.append(f"{old_cells[0]}: {old} quoted, {new} measured")
    return found


def _within_slack(column: int, old: str, new: str) -> bool:
    if column == 3:  # shown (median tokens)
        a, b = re.fullmatch(r"(\S+) \((\d+)\)", old), re.fullmatch(r"(\S+) \((\d+)\)", new)
        return bool(a and b) and _close(a[1], b[1]) and abs(int(a[2]) - int(b[2])) <= TOKENS_SLACK * int(a[2])
    a_parts, b_parts = old.split(" / "), new.split(" / ")
    if len(a_parts) != 2 or len(b_parts) != 2:
        return False
    if column == 4:  # no-match / false no-match: both the engine's
        return _close(a_parts[0], b_parts[0]) and _close(a_parts[1], b_parts[1])
    return _close(a_parts[0], b_parts[0]) and a_parts[1] == b_parts[1]  # engine / BM25: BM25 exact


def _close(a: str, b: str) -> bool:
    if "n/a" in (a, b):
        return a == b
    try:
        return abs(float(a) - float(b)) <= ENGINE_SLACK
    except ValueError:
        return False


def test_the_search_table_comparison_allows_the_cpu_and_nothing_more() -> None:
    head = (
        "| catalog | role | tools | R@1 | R@5 | MRR | shown (tokens) | no-match / false |\n"
        + "|---|---|--:|---|---|---|---|---|"
    )
    row = "| slack | held-out | 174 | {r1} / .356 | .688 / {bm25} | .551 / .450 | {shown} ({tokens}) | .375 / {false} |"
    quoted = head + "\n" + row.format(r1=".450", bm25=".581", shown=".912", tokens=373, false=".075")

    def measured(
        r1: str = ".450", bm25: str = ".581", shown: str = ".912", tokens: int = 373, false: str = ".075"
    ) -> str:
        return head + "\n" + row.format(r1=r1, bm25=bm25, shown=shown, tokens=tokens, false=false)

    assert table_differences(quoted, measured()) == []
    assert table_differences(quoted, measured(r1=".438", shown=".924", tokens=380, false=".087")) == []  # two queries
    assert table_differences(quoted, measured(r1=".431")) == ["slack: .450 / .356 quoted, .431 / .356 measured"]
    assert table_differences(quoted, measured(bm25=".588")) != []  # BM25 is pure Python: exact
    assert table_differences(quoted, measured(tokens=390)) != []
    assert table_differences(quoted, measured(false=".100")) != []
    assert table_differences(quoted, quoted.replace("slack", "slack2")) != []
    assert table_differences(quoted, quoted + "\n" + row) != []
