"""The rule that keeps `make test` short (docs/development.md#what-make-test-runs): a test that starts a process (a
server, the CLI, a gateway's child, a wheel build) is marked `slow`, or `spawns` when it is the one test of its path
that `make test` keeps. A test marked neither that starts one fails, naming what it started; the rule counts
processes, never time, so it holds the same on a busy machine. Processes a module- or session-scoped fixture starts
(one server for a module) are allowed; so are those a native library starts itself (Monty's sandbox workers), which
Python's audit events do not see."""

from __future__ import annotations

import sys
from collections.abc import Callable, Generator, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from progressive_mcp.offline.sample_upstream import SampleUpstream
    from progressive_mcp.search.embedder import Embedder

pytest_plugins = ["pytester"]  # tests/test_suite_rules.py runs the rule on a small suite of its own

# Python's audit events for a new process: subprocess (and asyncio's, anyio's) raise the first; the others are
# the lower-level ways in.
_PROCESS_EVENTS = frozenset({"subprocess.Popen", "os.posix_spawn", "os.fork", "os.forkpty", "os.system"})
_started: list[str] = []


# aws_cdk's jsii kernel: one node process per Python process, started by whichever test first builds a stack, so
# it is shared like a session fixture (which test pays for it depends on how xdist deals the tests); likewise the
# bundler's question to each candidate Lambda interpreter, asked once per process (infra/bundling.py
# _python_version is cached).
_SHARED_PER_PROCESS = ("jsii-runtime.js", "print(sys.implementation.name")


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event in _PROCESS_EVENTS:
        what = str(args[1] if event == "subprocess.Popen" and len(args) > 1 else args)
        if not any(name in what for name in _SHARED_PER_PROCESS):
            _started.append(f"{event} {what[:160]}")


sys.addaudithook(_audit)  # an audit hook cannot be removed: it only appends to a list


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "spawns: starts a process, yet stays in `make test` as the one test of its path (see conftest.py)"
    )


@pytest.fixture(scope="session")
def minilm() -> Embedder:
    """The process's MiniLM embedder: the model loads once per worker; skips where the semantic extra is absent."""
    from progressive_mcp.search import embedder

    if not embedder.available():
        pytest.skip("the semantic extra is not installed")
    return embedder.Embedder.shared()


@pytest.fixture
def anyio_backend() -> str:
    """The SDK client's async tests run on asyncio (a test module may still choose otherwise)."""
    return "asyncio"


@pytest.fixture(scope="module")
def upstream() -> Iterator[SampleUpstream]:
    """The offline sample upstream on a free port, one per module that asks for it (a module may define its own)."""
    from progressive_mcp.offline.sample_upstream import SampleUpstream

    with SampleUpstream() as server:
        yield server


@pytest.fixture(scope="module")
def shared_upstream() -> Iterator[SampleUpstream]:
    """The same, for a module whose own `upstream` fixture resets it before each test (its request log, faults)."""
    from progressive_mcp.offline.sample_upstream import SampleUpstream

    with SampleUpstream() as server:
        yield server


@contextmanager
def _shared() -> Iterator[None]:
    before = len(_started)
    try:
        yield
    finally:
        del _started[before:]


@pytest.fixture(scope="session")
def shared_work() -> Callable[[], AbstractContextManager[None]]:
    """For a module- or session-scoped fixture that builds what it holds lazily, inside whichever test first asks
    (tests/test_infra.py's synthesized stacks, whose bundler runs pip on a cold cache): processes started within
    `with shared_work():` are the fixture's, as if its setup had started them."""
    return _shared


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    _started.clear()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(
    fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest
) -> Generator[None, Any, Any]:
    before = len(_started)
    try:
        return (yield)
    finally:
        if fixturedef.scope != "function":  # one server for a whole module is the remedy, not the offence
            del _started[before:]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    yield
    started = list(_started)
    if started and item.get_closest_marker("slow") is None and item.get_closest_marker("spawns") is None:
        pytest.fail(
            f"{item.nodeid} started {len(started)} process(es) ({started[0]}): mark it `slow` (make test-slow), "
            "or `spawns` if it is the one test of its path that make test keeps (docs/development.md)",
            pytrace=False,
        )


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook turns the groups into node ids (--dist loadgroup)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tests of a module that use one of its module-scoped fixtures (a server, synthesized stacks, a built
    Lambda asset) run on one worker: split over two, each would make the fixture, paying for it twice. A test with
    an `xdist_group` of its own (one real document's cases) keeps it; the rest are dealt out one by one."""
    if not config.pluginmanager.hasplugin("xdist"):  # `-p no:xdist`: one process, and no such mark
        return
    for item in items:
        if item.get_closest_marker("xdist_group") is None and _uses_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))


def _uses_module_fixture(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(defs and defs[-1].scope == "module" for defs in info.name2fixturedefs.values())
