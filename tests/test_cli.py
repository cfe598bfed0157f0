"""Tests for the `progressive-mcp spec` commands, run as the installed console script in subprocesses.

Run with: .venv/bin/python -m pytest tests/test_cli.py -q
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from progressive_mcp.sources.spec import spec_json_schema_text

REPO = Path(__file__).resolve().parent.parent
BUNDLED = REPO / "spec" / "alphavantage.yaml"

SMALL_SPEC = """\
api:
  name: demo
  title: Demo
  base_url: https://example.com/query
  dispatch: {name: function}
  auth: {name: apikey, env: DEMO_KEY}
categories: {stocks: Stocks.}
tools:
  - name: QUOTE
    category: stocks
    summary: A quote.
    description: Use for a quote.
    params:
      interval: {type: string, enum: [daily, weekly], default: daily}
"""


@dataclass(frozen=True)
class Run:
    returncode: int
    stdout: str
    stderr: str


def command() -> list[str]:
    """The console script next to this interpreter, or the module when it is not installed."""
    script = Path(sys.executable).with_name("progressive-mcp")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "progressive_mcp.cli"]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("specs")
    broken = SMALL_SPEC.replace("category: stocks", "category: stonks").replace("default: daily", "default: hourly")
    texts = {"good": SMALL_SPEC, "broken": broken, "bad_yaml": SMALL_SPEC.replace("title: Demo", "title: [Demo")}
    paths = {name: folder / f"{name}.yaml" for name in texts}
    for name, text in texts.items():
        paths[name].write_text(text, encoding="utf-8")
    paths["missing"] = folder / "missing.yaml"
    return paths


@pytest.fixture(scope="module")
def runs(files: dict[str, Path]) -> dict[str, Run]:
    """Every command of this module, started together so their interpreter start-ups overlap."""
    argv = {
        "check_bundled": ["spec", "check", str(BUNDLED)],
        "check_mixed": ["spec", "check", *(str(files[n]) for n in ("broken", "bad_yaml", "missing", "good"))],
        "schema": ["spec", "schema"],
    }
    processes = {
        name: subprocess.Popen([*command(), *args], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for name, args in argv.items()
    }
    results = {}
    for name, process in processes.items():
        stdout, stderr = process.communicate(timeout=60)
        results[name] = Run(process.returncode, stdout, stderr)
    return results


@pytest.mark.slow
def test_spec_check_of_the_bundled_spec_is_ok(runs: dict[str, Run]) -> None:
    run = runs["check_bundled"]
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith(f"{BUNDLED}: OK: 128 tools in ")
    assert "Traceback" not in run.stderr


def test_spec_check_reports_every_problem_of_every_file_on_stderr(runs: dict[str, Run], files: dict[str, Path]) -> None:
    run = runs["check_mixed"]
    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    assert "Traceback" not in run.stdout
    # The good file is still checked after the broken ones, and only it is reported on stdout.
    [ok_line] = run.stdout.splitlines()
    assert ok_line.startswith(f"{files['good']}: OK: 1 tool in 1 category, version ")
    errors = run.stderr
    assert f"{files['broken']}: 2 problems in the spec:" in errors
    category_line = SMALL_SPEC.splitlines().index("    category: stocks") + 1
    assert f"  - line {category_line}: tools[0] (QUOTE).category: unknown category 'stonks'" in errors
    assert "tools[0] (QUOTE).params.interval.default: 'hourly' is not one of the allowed values" in errors
    assert f"{files['bad_yaml']}: 1 problem in the spec:" in errors
    assert "invalid YAML" in errors
    assert f"{files['missing']}: 1 problem in the spec:\n  - cannot read the file:" in errors
    assert str(files["good"]) not in errors


def test_spec_schema_prints_the_committed_schema(runs: dict[str, Run]) -> None:
    run = runs["schema"]
    assert run.returncode == 0, run.stderr
    assert run.stdout == spec_json_schema_text()
    assert json.loads(run.stdout) == json.loads((REPO / "spec" / "spec.schema.json").read_text(encoding="utf-8"))


@pytest.mark.slow
def test_sample_upstream_command_takes_its_own_flags() -> None:
    """`progressive-mcp sample-upstream --port N` (as documented), not only `python -m ... --port N`."""
    import urllib.request

    process = subprocess.Popen(
        [*command(), "sample-upstream", "--port", "0", "--host", "127.0.0.1"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        banner = process.stderr.readline()
        assert "listening on http://127.0.0.1:" in banner, banner
        url = banner.rsplit(" ", 1)[-1].strip()
        with urllib.request.urlopen(f"{url}?function=GLOBAL_QUOTE&symbol=IBM&apikey=k", timeout=10) as reply:
            assert json.loads(reply.read())["Global Quote"]["01. symbol"] == "IBM"
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.mark.spawns
def test_stdio_server_and_serve_start_from_any_directory(tmp_path: Path) -> None:
    """Desktop clients start `.venv/bin/python -m stdio_server` (or `progressive-mcp serve`) from anywhere: the
    make-built venv puts the clone on sys.path, so the checkout-only entry points still resolve."""
    for argv in ([sys.executable, "-m", "stdio_server", "--help"], [*command(), "serve", "--help"]):
        run = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, run.stderr
        assert run.stdout.startswith("usage: ")


def _parsers(parser: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{path} {name}")


def test_every_flag_a_help_text_names_is_a_flag_of_that_command() -> None:
    from progressive_mcp.cli import build_parser

    commands = dict(_parsers(build_parser(), "progressive-mcp"))
    assert {"progressive-mcp sync", "progressive-mcp serve", "progressive-mcp stdio"} <= set(commands)
    from stdio_server.server import build_parser as stdio_server_parser

    commands["python -m stdio_server"] = stdio_server_parser()
    assert "python -m stdio_server" in commands
    wrong = {}
    for path, parser in commands.items():
        flags = {option for action in parser._actions for option in action.option_strings}
        named = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", parser.format_help()))
        if named - flags:
            wrong[path] = sorted(named - flags)
    assert not wrong, f"help texts name flags their command does not have: {wrong}"
