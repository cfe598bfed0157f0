"""`progressive-mcp spec check` and `spec compile` as a user meets them (issue 28): `--validate` finishes on every
real document in ../shared/openapi/ (skipped only when that folder is absent), filters that match nothing say what
there is, a term that is no HTTP method is refused, and counts read as English.

Run with: .venv/bin/python -m pytest tests/test_spec_tooling.py -q
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from real_documents import REAL as REAL_DOCUMENTS
from real_documents import SHARED

from progressive_mcp.errors import SpecError
from progressive_mcp.sources import load_catalog
from progressive_mcp.sources.filters import Filter

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "openapi"
TASKS = FIXTURES / "tasks" / "openapi.yaml"
PAGERDUTY = FIXTURES / "pagerduty" / "openapi.yaml"
REAL = list(REAL_DOCUMENTS.values())


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "progressive_mcp", *args],
        capture_output=True,
        text=True,
        timeout=1200,
        cwd=ROOT,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"the real OpenAPI documents are not at {SHARED}")
@pytest.mark.timeout(1500)
@pytest.mark.slow  # starts a process (tests/conftest.py)
def test_validate_completes_on_every_real_document() -> None:
    done = cli("spec", "check", "--validate", *map(str, REAL))
    assert "Traceback" not in done.stderr and "Error:" not in done.stderr, done.stderr[-2000:]
    assert done.returncode == 0, done.stderr[-2000:]
    for path in REAL:
        assert f"{path}: OpenAPI " in done.stdout
    assert "the validator stopped early" not in done.stdout


@pytest.mark.slow  # starts a process (tests/conftest.py)
def test_a_tag_that_matches_nothing_names_the_tags_there_are() -> None:
    done = cli("spec", "check", str(TASKS), "--include", "tag:nonexistent")
    assert done.returncode == 1
    assert "'tag:nonexistent' matches no tag; the tags are: " in done.stderr
    assert "Projects" in done.stderr and "Tasks" in done.stderr


@pytest.mark.slow  # starts a process (tests/conftest.py)
def test_an_unknown_tag_beside_others_is_a_note() -> None:
    done = cli("spec", "check", str(TASKS), "--include", "tag:Projects,tag:nonexistent")
    assert done.returncode == 0, done.stderr
    assert "note: 'tag:nonexistent' matches no tag; the tags are: " in done.stdout


def test_a_spec_catalog_filter_that_matches_nothing_names_its_categories() -> None:
    with pytest.raises(SpecError) as caught:
        load_catalog(ROOT / "spec" / "alphavantage.yaml", include="tag:nonexistent")
    assert "'tag:nonexistent' matches no tag; the tags are: " in str(caught.value)


@pytest.mark.parametrize("term", ["method:FETCH", "method:get-ish"])
@pytest.mark.slow  # starts a process (tests/conftest.py)
def test_a_method_that_is_no_http_method_is_an_error(term: str) -> None:
    with pytest.raises(SpecError, match="is not an HTTP method"):
        Filter.parse(term)
    done = cli("spec", "check", str(TASKS), "--include", term)
    assert done.returncode == 1 and "is not an HTTP method" in done.stderr and "Traceback" not in done.stderr
    assert Filter.parse("method:patch").terms == ("method:patch",)


@pytest.mark.slow  # starts a process (tests/conftest.py)
def test_counts_of_one_are_singular() -> None:
    done = cli("spec", "check", str(PAGERDUTY), "--include", "getIncident")
    assert done.returncode == 0, done.stderr
    assert "1 operation" not in done.stdout  # the document has two
    assert "2 operations → 1 tool, 1 filtered out in 1 category" in done.stdout
    done = cli("spec", "check", str(PAGERDUTY))
    assert "2 operations → 2 tools in 1 category," in done.stdout
