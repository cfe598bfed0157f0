"""The documentation says what the code does: every CLI flag and PMCP_* variable documented, nothing
documented that does not exist, links that resolve, make targets that exist, and a README that fits."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from progressive_mcp.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
CONFIGURATION = ROOT / "docs" / "configuration.md"
DOCS = [README, *sorted((ROOT / "docs").glob("*.md"))]
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)(?![\w-])")
# Lines that show one of our commands: their flags must be ours.
OUR_COMMAND = re.compile(r"progressive-mcp (?:stdio|serve|spec|tokens|eval|sample-upstream)|python -m stdio_server")
# Code outside the core that reads PMCP_* variables (the Lambda side, the CDK app, the tests' knobs).
VARIABLE_SOURCES = [ROOT / "progressive_mcp", ROOT / "lambda_fn", ROOT / "infra", ROOT / ".ci", ROOT / "tests"]


def cli_flags() -> set[str]:
    """Every option string of every (sub)command of `progressive-mcp`, help flags aside."""
    flags: set[str] = set()

    def walk(parser: argparse.ArgumentParser) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    walk(sub)
            elif not isinstance(action, argparse._HelpAction):
                flags.update(action.option_strings)

    walk(build_parser())
    return flags


def long_flags() -> set[str]:
    return {flag for flag in cli_flags() if flag.startswith("--")}


def test_every_cli_flag_is_in_the_configuration_reference_and_nothing_else() -> None:
    text = CONFIGURATION.read_text(encoding="utf-8")
    documented = set(FLAG.findall(text)) - {"--help"}
    defined = long_flags()
    assert defined - documented == set(), "flags the CLI defines but docs/configuration.md does not mention"
    assert documented - defined == set(), "flags docs/configuration.md mentions but the CLI does not define"
    short = {flag for flag in cli_flags() if not flag.startswith("--")}
    assert all(f"`{flag}" in text for flag in short), "short flags (e.g. -o) are documented too"


def test_commands_shown_anywhere_in_the_docs_use_real_flags() -> None:
    defined = long_flags() | {"--help"}
    wrong = []
    for page in DOCS:
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
            command = OUR_COMMAND.search(line)
            if command:  # the flags after our command's name (`uvx --from . progressive-mcp stdio`: not --from)
                tail = line[command.start() :]
                wrong += [f"{page.name}:{number}: {flag}" for flag in FLAG.findall(tail) if flag not in defined]
    assert wrong == []


def test_every_pmcp_variable_is_documented_and_every_documented_one_is_read() -> None:
    read = set()
    for folder in VARIABLE_SOURCES:
        for source in folder.rglob("*.py"):
            read |= set(re.findall(r"PMCP_[A-Z_]*[A-Z]", source.read_text(encoding="utf-8")))
    for source in (ROOT / "Makefile", ROOT / ".ci" / "run"):
        read |= set(re.findall(r"PMCP_[A-Z_]*[A-Z]", source.read_text(encoding="utf-8")))
    documented = set(re.findall(r"PMCP_[A-Z_]*[A-Z]", CONFIGURATION.read_text(encoding="utf-8")))
    assert read - documented == set(), "variables the code reads but docs/configuration.md does not list"
    assert documented - read == set(), "variables docs/configuration.md lists but no code reads"


def test_make_targets_in_the_docs_exist() -> None:
    targets = set(re.findall(r"^([a-z][a-z-]*):", (ROOT / "Makefile").read_text(encoding="utf-8"), re.MULTILINE))
    said = r"(?:^|`|\$ |&& )make ([a-z][a-z-]*)\b"  # a command, not the verb in a sentence
    mentioned = {m for page in DOCS for m in re.findall(said, page.read_text(encoding="utf-8"), re.MULTILINE)}
    assert mentioned - targets == set()


def test_relative_links_resolve() -> None:
    broken = []
    for page in [*DOCS, ROOT / "eval" / "README.md", ROOT / "infra" / "README.md"]:
        for target in re.findall(r"\]\(([^)#:\s]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert broken == []


def test_the_readme_fits_on_a_few_screens() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200
    assert not re.search(r"DESIGN\.md|\bissue \d", README.read_text(encoding="utf-8"))


SECURITY = ROOT / "docs" / "security.md"
TEST_REFERENCE = re.compile(r"`(tests/test_\w+\.py)::(test_\w+)`")


def test_every_promise_in_the_security_model_names_tests_that_exist() -> None:
    """Each row of docs/security.md's promise tables (`| Promise | Held by |`) names at least one test, and each
    test it names exists (a renamed or deleted test would leave a promise that nothing holds)."""
    text = SECURITY.read_text(encoding="utf-8")
    promises: list[str] = []
    in_promises = False
    for line in text.splitlines():
        if not line.startswith("|"):
            in_promises = False
        elif line.startswith("| Promise | Held by |"):
            in_promises = True
        elif in_promises and not line.startswith("|---"):
            promises.append(line)
    assert len(promises) >= 40
    assert [row for row in promises if not TEST_REFERENCE.search(row.rsplit(" | ", 1)[-1])] == []
    missing = []
    for path, name in TEST_REFERENCE.findall(text):
        source = (ROOT / path).read_text(encoding="utf-8") if (ROOT / path).exists() else ""
        if not re.search(rf"^(?:async )?def {name}\(", source, re.MULTILINE):
            missing.append(f"{path}::{name}")
    assert missing == []
