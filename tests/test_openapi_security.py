"""OpenAPI documents as an attacker writes them (issue 27): YAML aliases cannot expand a small file into gigabytes
in any command that reads one.

Run with: .venv/bin/python -m pytest tests/test_openapi_security.py -q
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from progressive_mcp.errors import SpecError
from progressive_mcp.sources import load_catalog
from progressive_mcp.sources.bounded_yaml import MAX_ALIAS_VALUES

ROOT = Path(__file__).resolve().parent.parent


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "progressive_mcp.cli", *args]
    return subprocess.run(command, capture_output=True, text=True, check=False, timeout=timeout, cwd=ROOT)


# --- finding 8: YAML alias bombs -------------------------------------------------------------------------------


def laughs(indent: str) -> str:
    """Nine levels of ten aliases each: 10**9 values from a few hundred bytes."""
    lines = [f"{indent}l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"{indent}l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 9)]
    return "\n".join(lines) + "\n"


BOMBS = {
    # in a response example (the 804-byte file: `spec check` ran 83 s and died of MemoryError at 4 GB)
    "example": (
        'openapi: 3.0.3\ninfo: {title: Laughs, version: "1"}\nx-laughs:\n' + laughs("  ") + "paths:\n  /x:\n"
        "    get:\n      operationId: x\n      responses:\n        '200':\n          description: ok\n"
        "          content:\n            application/json:\n              schema: {type: array}\n"
        "              example: *l8\n"
    ),
    # in a parameter's enum (the 649-byte file: 12 s, 650 MB)
    "enum": (
        'openapi: 3.0.3\ninfo: {title: Laughs, version: "1"}\nx-laughs:\n' + laughs("  ") + "paths:\n  /x:\n"
        "    get:\n      operationId: x\n      parameters:\n"
        "        - {name: q, in: query, schema: {type: string, enum: *l8}}\n"
        "      responses: {'200': {description: ok}}\n"
    ),
}
ALIAS_ERROR = f"YAML aliases expand to more than {MAX_ALIAS_VALUES:,} values"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("where", sorted(BOMBS))
def test_an_alias_bomb_document_is_refused_by_load_catalog(tmp_path: Path, where: str) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMBS[where])
    with pytest.raises(SpecError) as caught:
        load_catalog(path)
    assert "bomb.yaml" in str(caught.value) and ALIAS_ERROR in str(caught.value)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("where", sorted(BOMBS))
@pytest.mark.parametrize(
    "command",
    [
        ("spec", "check"),
        ("spec", "check", "--validate"),
        ("spec", "compile"),
        ("stdio", "--spec"),
        ("serve", "--port", "0", "--spec"),
    ],
    ids=["spec check", "spec check --validate", "spec compile", "stdio", "serve"],
)
def test_an_alias_bomb_document_fails_every_command_at_once(
    tmp_path: Path, where: str, command: tuple[str, ...]
) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMBS[where])
    done = cli(*command, str(path), timeout=200)
    assert done.returncode in (1, 2), done.stdout + done.stderr
    assert str(path) in done.stderr and ALIAS_ERROR in done.stderr, done.stderr
