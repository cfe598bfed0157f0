"""Rules the test suite keeps: no test asserts a duration (benchmarks in bench/ measure speed; a test checks
behaviour, and a timing limit fails on a busy machine however generous it is)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
CLOCKS = {"perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "time", "time_ns", "process_time"}


def _is_clock(node: ast.AST, clock_names: set[str]) -> bool:
    """A clock reading (`time.monotonic()`, `perf_counter()`) or a name that holds one."""
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in CLOCKS and isinstance(func.value, ast.Name):
            return func.value.id == "time"
        return isinstance(func, ast.Name) and func.id in CLOCKS - {"time"}
    return isinstance(node, ast.Name) and node.id in clock_names


def _is_duration(node: ast.AST, clock_names: set[str], duration_names: set[str]) -> bool:
    """The difference of two clock readings, or a name that holds one."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub):
        return _is_clock(node.left, clock_names) or _is_clock(node.right, clock_names)
    return isinstance(node, ast.Name) and node.id in duration_names


def duration_assertions(source: str) -> list[int]:
    """The lines of `assert`s that compare a duration measured with a clock."""
    tree = ast.parse(source)
    clock_names: set[str] = set()
    duration_names: set[str] = set()
    for node in ast.walk(tree):  # names are gathered module-wide: a rough scope, enough for tests
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and _is_clock(node.value, set()):
                    clock_names.add(target.id)
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and _is_duration(node.value, clock_names, set()):
            duration_names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert):
            parts = [n for n in ast.walk(node.test) if isinstance(n, ast.Compare)]
            if any(
                _is_duration(operand, clock_names, duration_names)
                for compare in parts
                for operand in [compare.left, *compare.comparators]
            ):
                found.append(node.lineno)
    return found


def test_the_scan_finds_duration_assertions_and_leaves_waits_alone() -> None:
    flagged = """
import time
from time import perf_counter
started = time.monotonic()
assert time.monotonic() - started < 10
elapsed = perf_counter() - started
assert elapsed < 1.0, elapsed
assert 0.3 <= time.perf_counter() - started
"""
    assert duration_assertions(flagged) == [5, 7, 8]
    waits = """
import time
deadline = time.monotonic() + 20
while time.monotonic() < deadline and not done():
    time.sleep(0.05)
assert time.monotonic() < deadline, "no answer within 20 s"
assert len(items) < 10
"""
    assert duration_assertions(waits) == []


def test_no_test_asserts_a_duration() -> None:
    found = {
        f"{path.name}:{line}" for path in sorted(TESTS.rglob("*.py")) for line in duration_assertions(path.read_text())
    }
    assert not found, f"tests that assert a duration (measure speed in bench/ instead): {sorted(found)}"


def test_make_test_leaves_out_the_slow_tests_and_ci_runs_them_too() -> None:
    import re
    import tomllib

    root = TESTS.parent
    markers = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]
    assert any(marker.startswith("slow:") for marker in markers)
    makefile = (root / "Makefile").read_text()
    recipes = dict(re.findall(r"^([\w-]+):.*\n((?:\t.*\n)+)", makefile, re.M))
    assert '-m "not slow"' in recipes["test"] and "-m slow" in recipes["test-slow"]
    ci = [line.strip() for line in (root / ".ci" / "run").read_text().splitlines() if not line.startswith("#")]
    assert "make test" in ci and "make test-slow" in ci  # CI runs every test it ran before


def test_make_builds_the_venv_with_uv_and_keeps_every_check() -> None:
    """A fresh clone's first `make test` builds .venv: uv (pinned as the dev extra pins it, installed by pip so
    nothing is needed by hand) installs it, bytecode is written once and kept, and the test recipe still runs ruff,
    ruff format, mypy and pytest, stopping on any failure (docs/development.md#what-make-test-runs)."""
    import re
    import tomllib

    root = TESTS.parent
    makefile = (root / "Makefile").read_text()
    recipes = dict(re.findall(r"^([$()\w.-]+):.*\n((?:\t.*\n)+)", makefile, re.M))
    installs = recipes["$(BASE_STAMP)"] + recipes["$(STAMP)"]
    [install] = re.findall(r"^INSTALL = (.+)$", makefile, re.M)
    uv_first, pip_after = install.split("||", 1)  # uv, and pip only when uv could not
    assert "$(UV) pip install" in uv_first and "$(PY) -m pip install" in pip_after
    assert [line for line in installs.splitlines() if "$(UV) pip install" in line or "-m pip install" in line] == [
        "\t@test -x $(UV) || $(PY) -m pip install --quiet --disable-pip-version-check '$(UV_REQUIREMENT)'"
        ' || echo "make: no uv; pip installs" >&2'
    ]
    assert installs.count("$(call INSTALL,") == 3  # pip's upgrade, the package, the extras
    [pinned] = re.findall(r"^UV_REQUIREMENT := (.+)$", makefile, re.M)
    dev = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]["dev"]
    assert pinned in dev
    assert re.search(r"^unexport PYTHONDONTWRITEBYTECODE$", makefile, re.M)
    test = recipes["test"]
    for check in ("ruff check .", "ruff format --check .", "/mypy", '-m pytest -q -m "not slow" -n $(TEST_WORKERS)'):
        assert check in test, check
    assert "wait $$mypy" in test  # a mypy beside the warm-up collection still fails make test


@pytest.mark.spawns  # runs a small suite in a pytest process of its own, which then starts processes
def test_a_test_that_starts_a_process_must_be_marked_slow_or_spawns(pytester: pytest.Pytester) -> None:
    pytester.makeconftest((TESTS / "conftest.py").read_text())
    pytester.makepyfile(
        test_processes="""
import subprocess, sys
import pytest

def start():
    subprocess.run([sys.executable, "-c", "pass"], check=True)

def test_unmarked():
    start()

@pytest.mark.slow
def test_slow():
    start()

@pytest.mark.spawns
def test_kept():
    start()

def test_in_process():
    assert sum([1, 2]) == 3

@pytest.fixture(scope="module")
def lazily_built(shared_work):
    class Built(dict):
        def __missing__(self, key):
            with shared_work():  # the module's work, whichever test asks first
                start()
            self[key] = key
            return key
    return Built()

def test_lazy_module_work(lazily_built):
    assert lazily_built["a"] == "a"
"""
    )
    result = pytester.runpytest_subprocess("-p", "no:xdist", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=5, errors=1)
    result.stdout.fnmatch_lines(["*test_unmarked started 1 process(es) (subprocess.Popen*mark it `slow`*"])


def test_a_sweep_keeps_the_first_case_of_each_kind_in_make_test() -> None:
    from sweeps import one_per_kind

    params = one_per_kind(["SMA", "EMA", "GLOBAL_QUOTE", "RSI", "OVERVIEW"], {"GLOBAL_QUOTE": "stocks"}.get)
    kept = [p for p in params if not hasattr(p, "marks")]
    assert kept == ["SMA", "GLOBAL_QUOTE"]  # the first of "no kind" (None) and the first of "stocks"
    marked = [(p.values[0], [m.name for m in p.marks]) for p in params if hasattr(p, "marks")]
    assert marked == [("EMA", ["slow"]), ("RSI", ["slow"]), ("OVERVIEW", ["slow"])]


def test_the_tests_of_a_module_fixture_run_on_one_worker(pytester: pytest.Pytester) -> None:
    """A module-scoped fixture is made once per worker that runs one of its tests: those tests share a group."""
    pytester.makeconftest((TESTS / "conftest.py").read_text())
    pytester.makepyfile(
        test_shared="""
import pytest

@pytest.fixture(scope="module")
def server():
    return "one server for the module"

@pytest.fixture
def plain():
    return 1

def test_one(server): pass

def test_two(server, plain): pass

def test_alone(plain): pass

@pytest.mark.xdist_group("a document")
def test_own_group(server): pass
"""
    )
    items, _ = pytester.inline_genitems("-p", "no:cacheprovider")
    groups = {item.name: [m.args[0] for m in item.iter_markers("xdist_group")] for item in items}
    assert groups == {
        "test_one": ["test_shared.py"],
        "test_two": ["test_shared.py"],
        "test_alone": [],
        "test_own_group": ["a document"],
    }


@pytest.mark.spawns  # two xdist workers: the grouping happens only in a real distributed run
def test_make_tests_xdist_groups_each_run_on_one_worker(pytester: pytest.Pytester) -> None:
    """`--dist loadgroup` keeps a group on one worker (rules 3 and 4 depend on it): a module fixture's tests and an
    explicit group each see a single worker."""
    pytester.makeconftest((TESTS / "conftest.py").read_text())
    pytester.makepyfile(
        test_grouped="""
import os
import pytest

@pytest.fixture(scope="module")
def server():
    with open("module.log", "a") as log:
        log.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")

@pytest.mark.parametrize("case", range(8))
def test_module_fixture(server, case):
    pass

@pytest.mark.xdist_group("a document")
@pytest.mark.parametrize("case", range(8))
def test_explicit_group(case):
    with open("explicit.log", "a") as log:
        log.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
"""
    )
    result = pytester.runpytest_subprocess("-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=16)
    assert len((pytester.path / "module.log").read_text().split()) == 1  # the fixture was made once
    assert len(set((pytester.path / "explicit.log").read_text().split())) == 1
