"""OpenAPI documents as an attacker writes them (issue 27, findings 7 and 8): the full validator reads nothing the
loader refuses (no network, no file outside the document's folder), and YAML aliases cannot expand a small file
into gigabytes in any command that reads one.

Run with: .venv/bin/python -m pytest tests/test_openapi_security.py -q
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from loopback import recording_server

from progressive_mcp.errors import SpecError
from progressive_mcp.sources import load_catalog
from progressive_mcp.sources.bounded_yaml import MAX_ALIAS_VALUES

ROOT = Path(__file__).resolve().parent.parent
MARKER = "MARKER-7f3a91c2"  # in a file outside the document's folder: must never be printed
REMOTE_MARKER = "REMOTE-5d20be17"  # in what the loopback server would serve


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "progressive_mcp.cli", *args]
    return subprocess.run(command, capture_output=True, text=True, check=False, timeout=timeout, cwd=ROOT)


# --- finding 7: the validator reads only what the loader would ---------------------------------------------------


def _document_with(ref: str) -> str:
    """One usable operation, and one whose parameter and answer schema are `ref` (the loader skips it)."""
    return f"""\
openapi: 3.0.3
info: {{title: Refs, version: "1"}}
paths:
  /ok:
    get:
      operationId: ok
      responses: {{"200": {{description: ok}}}}
  /x:
    get:
      operationId: x
      parameters:
        - $ref: "{ref}#/param"
      responses:
        "200":
          description: ok
          content:
            application/json:
              schema: {{$ref: "{ref}#/schema"}}
components:
  schemas:
    Elsewhere: {{$ref: "{ref}#/schema"}}
"""


def _referenced(marker: str) -> str:
    """What the reference points at: values of the wrong type, which the validator would quote back."""
    return (
        f"param: {{name: q, in: query, schema: {{type: integer, default: {marker}}}}}\n"
        f"schema: {{type: object, properties: {{a: {{type: integer, default: {marker}}}}}}}\n"
    )


@pytest.mark.parametrize("flag", ["--validate", "--strict"])
@pytest.mark.parametrize("kind", ["http", "outside (relative)", "outside (file URI)"])
def test_the_validator_reads_no_network_and_no_file_outside_the_folder(tmp_path: Path, flag: str, kind: str) -> None:
    secret = tmp_path / "secret.yaml"
    secret.write_text(_referenced(MARKER))
    folder = tmp_path / "api"
    folder.mkdir()
    with recording_server(_referenced(REMOTE_MARKER).encode(), "application/yaml") as remote:
        ref = {
            "http": f"{remote.url}/evil.yaml",
            "outside (relative)": "../secret.yaml",
            "outside (file URI)": secret.as_uri(),
        }[kind]
        document = folder / "openapi.yaml"
        document.write_text(_document_with(ref))
        done = cli("spec", "check", flag, str(document))
    output = done.stdout + done.stderr
    assert remote.requests == [], "the validator fetched a remote $ref"
    assert MARKER not in output and REMOTE_MARKER not in output
    assert "1 skipped" in done.stdout, output  # the loader's own refusal, as before
    refusal = "not a local file" if kind == "http" else "outside the document's folder"
    said = [line for line in done.stdout.splitlines() if "(openapi-spec-validator)" in line]
    assert any(refusal in line for line in said), output  # the validator says what it did not read
    assert done.returncode == (1 if flag == "--strict" else 0), output


def test_the_validator_still_follows_refs_inside_the_folder(tmp_path: Path) -> None:
    (tmp_path / "parts.yaml").write_text(_referenced("not-a-number"))
    document = tmp_path / "openapi.yaml"
    document.write_text(_document_with("parts.yaml").replace("/x:", "/y:"))
    done = cli("spec", "check", "--validate", str(document))
    assert done.returncode == 0, done.stderr
    assert "warning (openapi-spec-validator): 'not-a-number' is not of type 'integer'" in done.stdout


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
