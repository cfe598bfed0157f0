"""A normal install: the wheel built from this checkout, installed into a fresh venv, works on its own.

`pip wheel .` then `pip install` into a new virtual environment (dependencies from the package index or
pip's cache), run from a directory outside the checkout: `progressive-mcp spec check` finds the bundled
spec as package data, and `progressive-mcp stdio` serves it to the mcp SDK client. Takes ~15 s.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from progressive_mcp.offline.sample_upstream import SampleUpstream
from progressive_mcp.surfaces.metatools import META_TOOL_NAMES

ROOT = Path(__file__).resolve().parent.parent
KEY = "WhEeL-KEY-0042"
# Builds a wheel and installs it with its dependencies into a fresh venv: minutes on a busy machine.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The bin/ folder of a fresh venv holding only the wheel (and its dependencies)."""
    work = tmp_path_factory.mktemp("wheel")
    quiet = ["--quiet", "--disable-pip-version-check"]
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", *quiet, "--no-deps", "-w", str(work / "dist"), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    [wheel] = (work / "dist").glob("progressive_mcp-*.whl")
    venv.create(work / "venv", with_pip=True)
    bin_dir = work / "venv" / "bin"
    done = subprocess.run(
        [str(bin_dir / "python"), "-m", "pip", "install", *quiet, str(wheel)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    yield bin_dir


def site_packages(bin_dir: Path) -> Path:
    [found] = (bin_dir.parent / "lib").glob("python3*/site-packages")
    return found


def run_outside_the_checkout(bin_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory() as elsewhere:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PMCP_SPEC")}
        return subprocess.run(
            [str(bin_dir / "progressive-mcp"), *args],
            cwd=elsewhere,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )


def test_the_wheel_installs_only_its_own_package(installed: Path) -> None:
    top_level = {p.name for p in site_packages(installed).iterdir()}
    assert "progressive_mcp" in top_level
    assert not top_level & {"lambda_fn", "stdio_server", "infra", "spec", "tests", "bench"}
    assert (site_packages(installed) / "progressive_mcp" / "bundled" / "alphavantage.yaml").is_file()


def test_the_wheel_carries_the_mit_license(installed: Path) -> None:
    [dist_info] = site_packages(installed).glob("progressive_mcp-*.dist-info")
    license_text = (dist_info / "licenses" / "LICENSE").read_text()
    assert license_text == (ROOT / "LICENSE").read_text()
    assert license_text.startswith("MIT License") and "progressive-mcp contributors" in license_text
    metadata = (dist_info / "METADATA").read_text()
    assert "License-Expression: MIT" in metadata and "License-File: LICENSE" in metadata


def test_help_lists_only_the_commands_that_work_from_the_wheel(installed: Path) -> None:
    helped = run_outside_the_checkout(installed, "--help")
    assert helped.returncode == 0, helped.stderr
    commands = re.search(r"\{([a-z,-]+)\}", helped.stdout)
    assert commands, helped.stdout
    listed = commands.group(1).split(",")
    assert "serve" not in listed and "serve " not in helped.stdout, helped.stdout  # it needs a checkout's lambda_fn/
    assert {"spec", "stdio", "sync", "tokens"} <= set(listed)
    for command in listed:  # each one offered starts (its own --help parses and exits 0)
        shown = run_outside_the_checkout(installed, command, "--help")
        assert shown.returncode == 0 and "Traceback" not in shown.stderr, (command, shown.stderr)


def test_spec_check_finds_the_bundled_spec(installed: Path) -> None:
    checked = run_outside_the_checkout(installed, "spec", "check")
    assert checked.returncode == 0, checked.stderr
    assert "progressive_mcp/bundled/alphavantage.yaml: OK: 128 tools" in checked.stdout


def test_serve_says_it_needs_a_checkout(installed: Path) -> None:
    served = run_outside_the_checkout(installed, "serve", "--port", "0")
    assert served.returncode == 2
    assert "source checkout" in served.stderr and "Traceback" not in served.stderr


@pytest.mark.anyio
async def test_stdio_serves_the_bundled_catalog_to_the_sdk_client(installed: Path) -> None:
    with SampleUpstream() as upstream, tempfile.TemporaryDirectory() as elsewhere, tempfile.TemporaryFile("w+") as log:
        params = StdioServerParameters(
            command=str(installed / "progressive-mcp"),
            args=["stdio", "--upstream", upstream.url],
            env={"ALPHAVANTAGE_API_KEY": KEY},
            cwd=elsewhere,
        )
        async with Client(stdio_client(params, errlog=log), mode="legacy") as client:
            assert [t.name for t in (await client.list_tools()).tools] == list(META_TOOL_NAMES)
            found = await client.call_tool("TOOL_SEARCH", {"query": "latest apple stock price"})
            assert not found.is_error and found.structured_content["results"]
            quote = await client.call_tool("TOOL_CALL", {"tool_name": "GLOBAL_QUOTE", "arguments": {"symbol": "IBM"}})
            assert not quote.is_error
            assert quote.structured_content["data"]["Global Quote"]["01. symbol"] == "IBM"
        assert [r["function"] for r in upstream.requests_snapshot()] == ["GLOBAL_QUOTE"]
