"""`make demo` runs `python -m progressive_mcp.demo`: it must complete offline and show each step."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # end-to-end: the whole demo, an MCP session over stdio

ROOT = Path(__file__).resolve().parent.parent


def test_demo_runs_offline_end_to_end() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "progressive_mcp.demo"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for step in ("[1] tools/list", "[2] TOOL_SEARCH", "[3] TOOL_GET", "[4] TOOL_CALL", "[5] The same call again"):
        assert step in out
    assert re.search(r"cached_at: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", out)
    assert "upstream requests so far: 1 " in out  # the repeated call did not reach the upstream
    assert "demo-key-for-the-sample-upstream" not in out + done.stderr
    # The README and docs/measurements.md quote the demo's code-mode figures: they are the demo's, as it prints them.
    shown = re.search(r"code mode read ([\d,]+) tokens: ([\d.]+)% of the progressive flow's ([\d,]+)", out)
    assert shown, out
    code, share, progressive = shown.groups()
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert f"reads {code} tokens against {progressive} with five `TOOL_CALL`s (`make demo`" in readme
    measurements = " ".join((ROOT / "docs" / "measurements.md").read_text(encoding="utf-8").split())
    said = f"`make demo` shows the first one over stdio: {progressive} tokens the progressive way, {code} in code mode"
    assert f"{said} ({share}%)" in measurements
