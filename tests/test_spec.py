"""Tests for the spec format: the bundled spec loads, the JSON Schema file is fresh, and every broken
spec gives a SpecError whose lines name the tool, the field and the line (never a traceback).

Run with: .venv/bin/python -m pytest tests/test_spec.py -q
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema_rs
import pytest
import yaml

from progressive_mcp.errors import SpecError
from progressive_mcp.sources import default_spec_path, load_catalog
from progressive_mcp.sources.bounded_yaml import MAX_ALIAS_CHARS, MAX_ALIAS_VALUES
from progressive_mcp.sources.spec import (
    build_catalog,
    load_spec,
    parse_spec,
    resolve_params,
    spec_json_schema,
    spec_json_schema_text,
)

REPO = Path(__file__).resolve().parent.parent
SCHEMA_FILE = REPO / "spec" / "spec.schema.json"
DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"

# A minimal valid spec; each broken case below changes exactly one fragment of it.
TEMPLATE = """\
spec_version: 1
api:
  name: demo
  title: Demo API
  base_url: https://example.com/query
  dispatch: {in: query, name: function}
  auth: {in: query, name: apikey, env: DEMO_API_KEY}
categories:
  stocks: Stock prices and quotes.
shared_params:
  symbol:
    type: string
    description: Ticker, e.g. IBM
tools:
  - name: MY_TOOL
    category: stocks
    summary: Latest price of one symbol.
    description: Use for the current price of a ticker.
    params:
      symbol: {use: symbol, required: true}
      interval:
        type: string
        enum: [daily, weekly]
        default: daily
      limit:
        type: integer
        minimum: 1
        maximum: 100
  - name: OTHER_TOOL
    category: stocks
    summary: Something else.
    description: Use for something else.
"""

MY_TOOL = "tools[0] (MY_TOOL)"


def edit(old: str, new: str, text: str = TEMPLATE) -> str:
    """The text with one fragment replaced; the fragment must occur exactly once, so no case is a no-op."""
    assert text.count(old) == 1, f"fragment {old!r} must occur once in the template"
    return text.replace(old, new)


def line_of(text: str, fragment: str, occurrence: int = 1) -> int:
    """1-based number of the line holding the n-th occurrence of a fragment."""
    found = [number for number, line in enumerate(text.splitlines(), start=1) if fragment in line]
    assert len(found) >= occurrence, f"{fragment!r} is not in the text {occurrence} time(s)"
    return found[occurrence - 1]


def spec_problems(tmp_path: Path, text: str | bytes) -> list[str]:
    """Write a spec file, load it, and return the SpecError's problem lines (the load must fail)."""
    path = tmp_path / "spec.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    error = info.value
    assert error.source == str(path)
    message = str(error)
    assert message.startswith(f"{path}: {len(error.problems)} problem")
    for problem in error.problems:
        assert f"\n  - {problem}" in message
        assert "\n" not in problem, "one line per problem"
    return error.problems


# --- the bundled spec and its JSON Schema ---------------------------------------------------------


def test_template_is_valid() -> None:
    spec = parse_spec(TEMPLATE)
    assert [tool.name for tool in spec.tools] == ["MY_TOOL", "OTHER_TOOL"]


def test_bundled_spec_loads() -> None:
    spec = load_spec(default_spec_path())
    assert len(spec.tools) == 128
    assert spec.api.dispatch.name == "function"
    assert spec.api.auth is not None
    assert (spec.api.auth.in_, spec.api.auth.name, spec.api.auth.env) == ("query", "apikey", "ALPHAVANTAGE_API_KEY")
    assert len({tool.name for tool in spec.tools}) == 128
    for tool in spec.tools:
        assert tool.category in spec.categories
        assert "\n" not in tool.summary.strip(), f"{tool.name}: the summary must be one line"
        assert len(tool.summary) <= 100, f"{tool.name}: summary longer than ~100 characters"


def test_schema_file_is_not_stale() -> None:
    assert SCHEMA_FILE.read_text(encoding="utf-8") == spec_json_schema_text(), (
        "spec/spec.schema.json is stale: run `make spec-schema` to regenerate it from the spec models"
    )


def test_spec_json_schema_is_valid_2020_12_and_accepts_the_bundled_spec() -> None:
    schema = spec_json_schema()
    assert schema["$schema"] == DRAFT_2020_12
    jsonschema_rs.meta.validate(schema)
    validator = jsonschema_rs.Draft202012Validator(schema)
    bundled = yaml.safe_load(default_spec_path().read_text(encoding="utf-8"))
    errors = [f"{list(e.instance_path)}: {e.message}" for e in validator.iter_errors(bundled)]
    assert errors == []
    # The schema is what editors check a spec with, so it must reject what the models reject.
    broken = yaml.safe_load(edit("{use: symbol, required: true}", "{use: symbol, requird: true}"))
    assert not validator.is_valid(broken)
    assert not validator.is_valid(yaml.safe_load(edit("type: string\n        enum", "type: strin\n        enum")))


def test_parse_spec_accepts_json_and_names_its_source() -> None:
    as_json = json.dumps(yaml.safe_load(TEMPLATE))
    assert len(parse_spec(as_json).tools) == 2
    with pytest.raises(SpecError) as info:
        parse_spec("[]")
    assert info.value.source == "<spec>"
    with pytest.raises(SpecError) as info:
        parse_spec("[]", source="mine.yaml")
    assert str(info.value).startswith("mine.yaml: 1 problem in the spec:")


def test_shared_parameter_is_merged_with_the_tools_overrides() -> None:
    spec = parse_spec(edit("{use: symbol, required: true}", "{use: symbol, required: true, examples: [IBM]}"))
    symbol = resolve_params(spec, spec.tools[0])[0]
    assert (symbol.name, symbol.type, symbol.required) == ("symbol", "string", True)
    assert symbol.description == "Ticker, e.g. IBM"
    assert symbol.examples == ("IBM",)


# --- broken specs: one problem each ----------------------------------------------------------------

# (id, old fragment, new fragment, fragment on the reported line, texts the problem must contain)
BROKEN_CASES: list[tuple[str, str, str, str, list[str]]] = [
    (
        "unknown-param-type",
        "type: string\n        enum",
        "type: strin\n        enum",
        "        type: strin",
        [f"{MY_TOOL}.params.interval.type:", "'strin'", "'string'", "'integer'"],
    ),
    (
        "missing-type",
        "        type: string\n        enum",
        "        enum",
        "interval:",
        [f"{MY_TOOL}.params.interval.type:", "missing type"],
    ),
    (
        "unknown-field-typo",
        "{use: symbol, required: true}",
        "{use: symbol, requird: true}",
        "requird",
        [f"{MY_TOOL}.params.symbol.requird:", "unknown field"],
    ),
    (
        "default-outside-enum",
        "default: daily",
        "default: monthly",
        "default: monthly",
        [f"{MY_TOOL}.params.interval.default:", "'monthly'", "'daily'", "'weekly'"],
    ),
    (
        "default-of-wrong-type",
        "default: daily",
        "default: 5",
        "default: 5",
        [f"{MY_TOOL}.params.interval.default:", "5 is not of type string"],
    ),
    (
        "enum-value-of-wrong-type",
        "enum: [daily, weekly]",
        "enum: [daily, 7]",
        "enum: [daily, 7]",
        [f"{MY_TOOL}.params.interval.enum:", "7", "string"],
    ),
    (
        "example-fails-its-pattern",
        "{use: symbol, required: true}",
        "{use: symbol, required: true, pattern: '^[A-Z]+$', examples: [IBM, ibm]}",
        "examples: [IBM, ibm]",
        [f"{MY_TOOL}.params.symbol.examples:", "'ibm'", "pattern"],
    ),
    (
        "premium-value-outside-the-enum",
        "default: daily",
        "default: daily\n        premium_values: [monthly]",
        "premium_values: [monthly]",
        [f"{MY_TOOL}.params.interval.premium_values:", "'monthly'"],
    ),
    (
        "minimum-above-maximum",
        "minimum: 1",
        "minimum: 500",
        "minimum: 500",
        [f"{MY_TOOL}.params.limit.minimum:", "500", "100"],
    ),
    (
        "invalid-regex",
        "{use: symbol, required: true}",
        "{use: symbol, required: true, pattern: '([A-Z'}",
        "pattern: '([A-Z'",
        [f"{MY_TOOL}.params.symbol.pattern:", "regular expression"],
    ),
    (
        "use-of-undefined-shared-param",
        "{use: symbol, required: true}",
        "{use: ticker, required: true}",
        "use: ticker",
        [f"{MY_TOOL}.params.symbol.use:", "undefined shared parameter 'ticker'", "symbol"],
    ),
    (
        "unknown-category",
        "    category: stocks\n    summary: Latest",
        "    category: stonks\n    summary: Latest",
        "category: stonks",
        [f"{MY_TOOL}.category:", "'stonks'", "stocks"],
    ),
    (
        "param-named-like-dispatch",
        "      limit:\n",
        "      function: {type: string}\n      limit:\n",
        "function: {type: string}",
        [f"{MY_TOOL}.params.function:", "'function'", "dispatch or auth"],
    ),
    (
        "param-named-like-auth",
        "      limit:\n",
        "      apikey: {type: string}\n      limit:\n",
        "apikey: {type: string}",
        [f"{MY_TOOL}.params.apikey:", "'apikey'", "dispatch or auth"],
    ),
    (
        "required-with-default",
        "default: daily",
        "default: daily\n        required: true",
        "default: daily",
        [f"{MY_TOOL}.params.interval.default:", "required"],
    ),
    (
        "require-any-names-a-non-parameter",
        "    params:",
        "    require_any: [[symbol, ticker]]\n    params:",
        "require_any:",
        [f"{MY_TOOL}.require_any[0]:", "'ticker'", "not a parameter"],
    ),
    (
        "summary-too-long",
        "summary: Latest price of one symbol.",
        "summary: " + "Latest price " * 12,
        "summary: Latest price",
        [f"{MY_TOOL}.summary:", "120 characters"],
    ),
    (
        "bad-tool-name",
        "name: MY_TOOL",
        "name: 'MY TOOL!'",
        "name: 'MY TOOL!'",
        ["tools[0] (MY TOOL!).name:", "pattern"],
    ),
    (
        "duplicate-tool-name",
        "name: OTHER_TOOL",
        "name: MY_TOOL",
        "- name: MY_TOOL",  # the second one: see the occurrence below
        ["tools[1] (MY_TOOL).name:", "duplicate tool name", "tools[0]"],
    ),
    (
        "duplicate-key-in-a-tool",
        "      limit:\n",
        "      interval: {type: integer}\n      limit:\n",
        "interval: {type: integer}",
        [f"{MY_TOOL}.params.interval:", "duplicate key"],
    ),
    (
        "duplicate-key-in-api",
        "  title: Demo API\n",
        "  title: Demo API\n  title: Other API\n",
        "title: Other API",
        ["api.title:", "duplicate key"],
    ),
    (
        "unquoted-date-default",
        "      limit:\n",
        "      day: {type: string, default: 2024-01-01}\n      limit:\n",
        "day: {type: string",
        [f"{MY_TOOL}.params.day.default:", "2024-01-01", "quote it"],
    ),
    (
        "shared-param-uses-another",
        "    description: Ticker, e.g. IBM\n",
        "    description: Ticker, e.g. IBM\n    use: other\n",
        "use: other",
        ["shared_params.symbol.use:", "cannot use another"],
    ),
    (
        "bad-base-url",
        "https://example.com/query",
        "ftp://example.com/query",
        "base_url:",
        ["api.base_url:", "pattern"],
    ),
]


@pytest.mark.parametrize(
    ("old", "new", "line_fragment", "expected"), [c[1:] for c in BROKEN_CASES], ids=[c[0] for c in BROKEN_CASES]
)
def test_broken_spec_names_tool_field_and_line(
    tmp_path: Path, old: str, new: str, line_fragment: str, expected: list[str]
) -> None:
    text = edit(old, new)
    problems = spec_problems(tmp_path, text)
    assert len(problems) == 1, problems
    occurrence = 2 if expected[0].startswith("tools[1] (MY_TOOL)") else 1
    assert problems[0].startswith(f"line {line_of(text, line_fragment, occurrence)}: "), problems[0]
    for part in expected:
        assert part in problems[0], f"{part!r} missing from {problems[0]!r}"


# --- broken files: YAML, shape, reading -------------------------------------------------------------


def test_bad_yaml_syntax_gives_line_and_column(tmp_path: Path) -> None:
    text = edit("  title: Demo API", "  title: Demo: API")
    problems = spec_problems(tmp_path, text)
    assert len(problems) == 1
    colon = text.splitlines()[3].index(": API") + 1  # 1-based column of the offending colon
    # libyaml marks the colon itself or the character after it, depending on the build.
    assert any(problems[0].startswith(f"line 4, column {c}: invalid YAML: ") for c in (colon, colon + 1)), problems[0]
    assert "mapping values are not allowed" in problems[0]


def test_bad_yaml_indentation_is_reported_not_raised(tmp_path: Path) -> None:
    text = edit("    category: stocks\n    summary: Latest", "\tcategory: stocks\n    summary: Latest")
    problems = spec_problems(tmp_path, text)
    assert len(problems) == 1
    assert "invalid YAML" in problems[0]
    tab_line = line_of(text, "\tcategory")
    assert problems[0].startswith(f"line {tab_line}, column ")


def test_unhashable_yaml_key_is_reported_not_raised(tmp_path: Path) -> None:
    problems = spec_problems(tmp_path, TEMPLATE + "? [a, b]\n: 1\n")
    assert len(problems) == 1
    assert "invalid YAML" in problems[0]
    assert "unhashable key" in problems[0]


def test_two_documents_are_one_problem(tmp_path: Path) -> None:
    problems = spec_problems(tmp_path, TEMPLATE + "---\nspec_version: 1\n")
    assert len(problems) == 1
    assert "single document" in problems[0]


@pytest.mark.parametrize("text", ["- api\n- tools\n", "just some words\n", "", "# only a comment\n", "42\n"])
def test_top_level_must_be_a_mapping(tmp_path: Path, text: str) -> None:
    assert spec_problems(tmp_path, text) == ["the top level must be a mapping with api, categories and tools"]


def test_missing_sections_are_named(tmp_path: Path) -> None:
    problems = spec_problems(tmp_path, "spec_version: 1\n")
    assert sorted(problems) == [
        "line 1: api: missing required field",
        "line 1: categories: missing required field",
        "line 1: tools: missing required field",
    ]


def test_same_looking_keys_of_different_types_are_not_duplicates(tmp_path: Path) -> None:
    text = edit("    summary: Latest", "    1: one\n    '1': two\n    summary: Latest")
    problems = spec_problems(tmp_path, text)
    assert problems, "the numeric and string keys are still unknown fields"
    assert not any("duplicate" in problem for problem in problems), problems


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert info.value.source == str(path)
    assert len(info.value.problems) == 1
    assert info.value.problems[0].startswith("cannot read the file: ")
    assert "No such file" in info.value.problems[0]


def test_directory_instead_of_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as info:
        load_spec(tmp_path)
    assert info.value.problems[0].startswith("cannot read the file: ")


def test_non_utf8_file(tmp_path: Path) -> None:
    raw = TEMPLATE.encode("utf-8").replace(b"Demo API", b"D\xe9mo API")
    problems = spec_problems(tmp_path, raw)
    assert len(problems) == 1
    assert problems[0].startswith("the file is not UTF-8 text: ")
    assert f"at byte {raw.index(bytes([0xE9]))}" in problems[0]


# --- several problems at once ---------------------------------------------------------------------


def test_several_cross_check_problems_are_reported_together(tmp_path: Path) -> None:
    text = edit("    category: stocks\n    summary: Latest", "    category: stonks\n    summary: Latest")
    text = edit("default: daily", "default: monthly", text)
    text = edit("{use: symbol, required: true}", "{use: ticker, required: true}", text)
    text = edit("  title: Demo API\n", "  title: Demo API\n  title: Again\n", text)
    problems = spec_problems(tmp_path, text)
    assert len(problems) == 4, problems
    joined = "\n".join(problems)
    assert f"line {line_of(text, 'category: stonks')}: {MY_TOOL}.category: unknown category" in joined
    assert f"line {line_of(text, 'default: monthly')}: {MY_TOOL}.params.interval.default: 'monthly'" in joined
    assert f"line {line_of(text, 'use: ticker')}: {MY_TOOL}.params.symbol.use: undefined" in joined
    assert f"line {line_of(text, 'title: Again')}: api.title: duplicate key" in joined
    assert str(spec_error(text)).startswith("<spec>: 4 problems in the spec:\n  - ")


def test_several_model_problems_are_reported_together(tmp_path: Path) -> None:
    text = edit("type: string\n        enum", "type: strin\n        enum")
    text = edit("{use: symbol, required: true}", "{use: symbol, requird: true}", text)
    text = edit("summary: Something else.", "summary: ''", text)
    problems = spec_problems(tmp_path, text)
    assert len(problems) == 3, problems
    joined = "\n".join(problems)
    assert f"{MY_TOOL}.params.interval.type: 'strin'" in joined
    assert f"{MY_TOOL}.params.symbol.requird: unknown field" in joined
    empty_summary_line = line_of(text, "summary: ''")
    assert f"line {empty_summary_line}: tools[1] (OTHER_TOOL).summary:" in joined


def spec_error(text: str) -> SpecError:
    with pytest.raises(SpecError) as info:
        parse_spec(text)
    return info.value


def test_a_compiled_json_spec_gives_the_same_catalog_as_the_yaml(tmp_path: Path) -> None:
    from progressive_mcp.cli import main
    from progressive_mcp.sources import default_spec_path

    out = tmp_path / "av.json"
    assert main(["spec", "compile", "-o", str(out)]) == 0
    assert out.read_text().startswith("{")
    from_json, from_yaml = load_catalog(out), load_catalog(default_spec_path())
    assert from_json.version == from_yaml.version
    assert [t.definition() for t in from_json.tools] == [t.definition() for t in from_yaml.tools]


def test_a_json_spec_with_a_duplicate_key_is_refused_with_its_path(tmp_path: Path) -> None:
    import json as _json

    from progressive_mcp.cli import main

    out = tmp_path / "av.json"
    assert main(["spec", "compile", "-o", str(out)]) == 0
    text = out.read_text()
    broken = text.replace('"title":', '"title":"First","title":', 1)
    assert _json.loads(broken)  # still JSON: only the duplicate is wrong
    path = tmp_path / "broken.json"
    path.write_text(broken)
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    assert "duplicate key" in str(caught.value)
    assert "api.title" in str(caught.value)


def test_spec_compile_refuses_a_broken_spec(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from progressive_mcp.cli import main

    path = tmp_path / "broken.yaml"
    path.write_text("spec_version: 1\napi: {}\n")
    assert main(["spec", "compile", str(path), "-o", str(tmp_path / "out.json")]) == 1
    assert not (tmp_path / "out.json").exists()
    assert "broken.yaml" in capsys.readouterr().err


def test_a_spec_without_tools_is_refused(tmp_path: Path) -> None:
    empty = TEMPLATE[: TEMPLATE.index("tools:")] + "tools: []\n"
    [problem] = spec_problems(tmp_path, empty)
    assert problem.startswith(f"line {line_of(empty, 'tools: []')}: tools: ")
    assert "at least 1 item" in problem


def test_error_message_field_and_hints_are_part_of_the_format() -> None:
    text = edit(
        "  auth: {in: query, name: apikey, env: DEMO_API_KEY}\n",
        "  auth: {in: query, name: apikey, env: DEMO_API_KEY}\n  error_fields: {error: invalid_request}\n"
        "  error_message_field: message\n  hints: {no_data: Check the name., invalid_request: See the docs.}\n",
    )
    api = parse_spec(text).api
    assert (api.error_message_field, api.hints.no_data, api.hints.invalid_request) == (
        "message",
        "Check the name.",
        "See the docs.",
    )


# --- hostile files: refused before they are built, in well under a second -------------------------------


@pytest.mark.timeout(20)
@pytest.mark.parametrize("where", ["top level", "examples"])
def test_a_billion_laughs_spec_is_refused(tmp_path: Path, where: str) -> None:
    bomb = "\n".join(
        ["laugh0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
        + [f"laugh{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 10)]
    )
    if where == "top level":
        text = TEMPLATE + "\n" + bomb + "\n"
    else:
        indented = bomb.replace("\n", "\n        ").replace(": &", "_x: &")
        text = edit(
            "    summary: Latest price of one symbol.\n",
            "    summary: Latest price of one symbol.\n    keywords: []\n    x_anchors:\n        " + indented + "\n"
            "    examples: *l9\n",
        )
    [problem] = spec_problems(tmp_path, text)
    assert "aliases expand to more than" in problem


def test_a_recursive_yaml_alias_is_refused(tmp_path: Path) -> None:
    text = edit("categories:\n", "loop: &loop [*loop]\ncategories:\n")
    problems = spec_problems(tmp_path, text)
    assert len(problems) == 1


@pytest.mark.timeout(20)
@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("[" * 20_000 + "]" * 20_000, "yaml"),
        ("a: " + "[" * 900 + "]" * 900, "yaml"),  # within libyaml's own limit of 1,000
        ('{"api": ' + "[" * 100_000 + "]" * 100_000 + "}", "json"),
    ],
    ids=["yaml 20000", "yaml 900", "json 100000"],
)
def test_deep_nesting_is_refused(tmp_path: Path, text: str, kind: str) -> None:
    [problem] = spec_problems(tmp_path, text)
    assert "nested more than" in problem or "invalid YAML" in problem, (kind, problem)


def test_moderately_deep_nesting_is_refused_too(tmp_path: Path) -> None:
    text = edit("categories:\n", "deep: " + "[" * 40 + "]" * 40 + "\ncategories:\n")
    [problem] = spec_problems(tmp_path, text)
    assert "nested more than 32 levels" in problem


@pytest.mark.timeout(20)
def test_a_huge_description_anchored_into_every_tool_is_refused(tmp_path: Path) -> None:
    tools = "\n".join(f"  - {{name: T{i}, category: stocks, summary: S., description: *big}}" for i in range(128))
    text = TEMPLATE[: TEMPLATE.index("tools:")] + "huge: &big " + "x" * 790_000 + "\ntools:\n" + tools + "\n"
    # 100 million characters once the aliases are expanded: refused as the file is read, before pydantic walks it
    [problem] = spec_problems(tmp_path, text)
    assert f"aliases expand to more than {MAX_ALIAS_CHARS:,} characters of text" in problem


def test_a_long_description_anchored_into_every_tool_still_loads(tmp_path: Path) -> None:
    first = "  - {name: T0, category: stocks, summary: S., description: &long " + "y" * 3_000 + "}\n"
    others = "".join(f"  - {{name: T{i}, category: stocks, summary: S., description: *long}}\n" for i in range(1, 128))
    path = tmp_path / "spec.yaml"
    path.write_text(TEMPLATE[: TEMPLATE.index("tools:")] + "tools:\n" + first + others)
    tools = load_spec(path).tools
    assert len(tools) == 128 and {t.description for t in tools} == {"y" * 3_000}


# A vocabulary of the right shape (lists of short words), so nothing but the aliases can refuse it: one list of
# 1,000 words written once, used by 1,500 synonyms. Every word is validated and indexed once per use.
ALIASED_VOCABULARY = (
    "filler: &words ["
    + ", ".join(f"w{i:04d}" for i in range(1_000))
    + "]\nsynonyms:\n"
    + "".join(f"  s{i}: *words\n" for i in range(1_500))
)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["named by the spec", "--vocabulary", "spec compile --vocabulary"])
@pytest.mark.slow  # starts a process (tests/conftest.py)
def test_a_vocabulary_whose_aliases_expand_too_far_is_refused_as_it_is_read(tmp_path: Path, how: str) -> None:
    vocabulary = tmp_path / "words.yaml"
    vocabulary.write_text(ALIASED_VOCABULARY)
    expected = f"YAML aliases expand to more than {MAX_ALIAS_VALUES:,} values"
    if how == "spec compile --vocabulary":
        import subprocess
        import sys

        command = [sys.executable, "-m", "progressive_mcp.cli", "spec", "compile", "--vocabulary", str(vocabulary)]
        done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=100, cwd=REPO)
        assert done.returncode == 1 and str(vocabulary) in done.stderr and expected in done.stderr, done.stderr
        return
    spec = tmp_path / "spec.yaml"
    spec.write_text(TEMPLATE + "search:\n  vocabulary: words.yaml\n")
    with pytest.raises(SpecError) as caught:
        if how == "--vocabulary":
            load_catalog(vocabulary=vocabulary)  # the bundled spec, with a vocabulary of the user's
        else:
            load_catalog(spec)
    assert caught.value.source == str(vocabulary) and expected in str(caught.value)


def test_a_file_over_the_size_limit_is_refused_unparsed(tmp_path: Path) -> None:
    [problem] = spec_problems(tmp_path, TEMPLATE + "#" + "x" * (10 * 1024 * 1024) + "\n")
    assert "a spec may have at most 10,485,760" in problem


# --- output descriptions -----------------------------------------------------------------------------------

OUTPUTS = """\
shared_outputs:
  bar:
    type: object
    properties: {"1. open": {type: string}, "5. volume": {type: string}}
    required: ["1. open"]
    additionalProperties: false
  series:
    type: object
    properties:
      Meta Data: {type: object, additionalProperties: {type: string}}
      Time Series (Daily): {type: object, additionalProperties: {use: bar}}
    required: [Meta Data]
"""


def test_outputs_are_checked_and_resolved_into_json_schema() -> None:

    text = edit("tools:\n", OUTPUTS + "tools:\n")
    text = edit("    summary: Something else.\n", "    summary: Something else.\n    output: {use: series}\n", text)
    catalog = build_catalog(parse_spec(text))
    schema = json.loads(json.dumps(catalog.get("OTHER_TOOL").output_schema, default=dict))
    assert schema["$ref"] == "#/$defs/series"
    assert set(schema["$defs"]) == {"series", "bar"}  # what series needs, through its own `use`
    series = schema["$defs"]["series"]["properties"]["Time Series (Daily)"]
    assert series["additionalProperties"] == {"$ref": "#/$defs/bar"}
    validator = jsonschema_rs.Draft202012Validator(schema)
    assert validator.is_valid(
        {"Meta Data": {"1. Information": "x"}, "Time Series (Daily)": {"2026-11-20": {"1. open": "1"}}}
    )
    assert not validator.is_valid({"Meta Data": {}, "Time Series (Daily)": {"2026-11-20": {"9. other": "1"}}})
    assert catalog.get("MY_TOOL").output_schema is None


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ("{use: nothing}", "undefined shared output 'nothing'"),
        ("{type: object, properties: {a: {type: strin}}}", "type must be one or a list of"),
        ("{type: object, pattern: x}", "unknown keyword(s) pattern"),
        ("{type: object, properties: {a: {type: string}}, required: [b]}", "must list names of `properties`"),
        ("{use: series, type: object}", "`use` stands alone"),
        ("[1, 2]", "input should be a valid dictionary"),
    ],
)
def test_bad_outputs_are_named(tmp_path: Path, output: str, message: str) -> None:
    text = edit("tools:\n", OUTPUTS + "tools:\n")
    text = edit("    summary: Something else.\n", f"    summary: Something else.\n    output: {output}\n", text)
    problems = spec_problems(tmp_path, text)
    assert any(message in p and "tools[1] (OTHER_TOOL).output" in p for p in problems), problems


def test_a_shared_output_cannot_use_itself(tmp_path: Path) -> None:
    loop = "shared_outputs:\n  a: {type: object, properties: {b: {use: b}}}\n  b: {type: array, items: {use: a}}\n"
    problems = spec_problems(tmp_path, edit("tools:\n", loop + "tools:\n"))
    assert sum("outputs cannot be recursive" in p for p in problems) == 2
