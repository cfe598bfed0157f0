"""`make demo` runs `python -m progressive_mcp.demo`: it must complete offline and show each step."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

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
