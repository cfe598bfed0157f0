"""Tests for catalog search vocabularies: the engine knows only English and tool structure, and what a domain
adds (synonyms, names, phrases, scope, subjects it lacks) is data the spec names under `search.vocabulary`.

The bundled Alpha Vantage catalog carries its vocabulary as `spec/alphavantage.vocabulary.yaml`, through
`spec compile` too; a catalog without one is searched with English alone; a broken vocabulary file is a
SpecError naming the file and the line.

Run with: .venv/bin/python -m pytest tests/test_vocabulary.py -q
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from factories import make_tool
from test_spec import TEMPLATE, edit

from progressive_mcp.catalog import CatalogTool, Param
from progressive_mcp.errors import SpecError
from progressive_mcp.search.index import SearchIndex, reading_for
from progressive_mcp.search.vocabulary import EMPTY, Vocabulary
from progressive_mcp.sources import default_spec_path, load_catalog
from progressive_mcp.sources.spec import build_catalog, parse_spec

ROOT = Path(__file__).resolve().parent.parent
LASTFM = ROOT / "tests" / "fixtures" / "lastfm" / "lastfm.yaml"
TOOLS_LINE = "tools:\n"


def with_search(search: str, text: str = TEMPLATE) -> str:
    return edit(TOOLS_LINE, f"search:\n{search}{TOOLS_LINE}", text)


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


# --- where a vocabulary comes from ---------------------------------------------------------------------------------


def test_the_bundled_catalog_carries_its_finance_vocabulary() -> None:
    vocabulary = load_catalog().vocabulary
    assert "eps" in vocabulary.synonyms and "aapl" in vocabulary.entity_codes
    assert vocabulary.pairs is not None and "usd" in vocabulary.pairs.codes
    assert vocabulary.scope is not None and "canada" in vocabulary.scope.outside


def test_catalogs_without_a_vocabulary_are_searched_with_english_alone() -> None:
    assert load_catalog(LASTFM).vocabulary is EMPTY
    assert build_catalog(parse_spec(TEMPLATE)).vocabulary is EMPTY


def test_the_finance_words_left_the_engine() -> None:
    """English alone knows no ticker, synonym or currency: the same words read plainly."""
    english = reading_for(EMPTY)
    finance = reading_for(load_catalog().vocabulary)
    assert [t.term for t in english.tokenize("after hours")] == ["after", "hour"]
    assert [t.term for t in finance.tokenize("after hours")] == ["afterhours"]
    assert english.stem("mkt") == "mkt" and finance.stem("mkt") == "market"


def test_a_vocabulary_file_beside_the_spec_and_one_inline_read_the_same(tmp_path: Path) -> None:
    vocabulary = "synonyms:\n  cost: [price]\nout_of_scope: [platinum]\n"
    write(tmp_path, "words.yaml", vocabulary)
    from_file = load_catalog(write(tmp_path, "spec.yaml", with_search("  vocabulary: words.yaml\n")))
    inline = build_catalog(parse_spec(with_search("  vocabulary:\n    synonyms: {cost: [price]}\n")))
    assert from_file.vocabulary.synonyms == inline.vocabulary.synonyms == {"cost": ("price",)}
    assert from_file.vocabulary.out_of_scope == ("platinum",)


def test_a_synonym_from_the_vocabulary_finds_a_tool_its_words_do_not_name() -> None:
    plain = build_catalog(parse_spec(TEMPLATE))
    taught = build_catalog(parse_spec(with_search("  vocabulary:\n    synonyms: {worth: [price]}\n")))
    # The words alone (MiniLM, with the semantic extra, reads "worth" near "price" without being taught)
    assert SearchIndex(plain.tools, plain.vocabulary, semantic=False).search("what is MSFT worth") == []
    hits = SearchIndex(taught.tools, taught.vocabulary, semantic=False).search("what is MSFT worth")
    assert hits and hits[0].name == "MY_TOOL"


@pytest.mark.slow  # starts a process (tests/conftest.py)
def test_spec_compile_carries_the_vocabulary_inside_its_json(tmp_path: Path) -> None:
    out = tmp_path / "compiled.json"
    subprocess.run(
        [sys.executable, "-m", "progressive_mcp.cli", "spec", "compile", str(default_spec_path()), "-o", str(out)],
        check=True,
        capture_output=True,
    )
    assert isinstance(json.loads(out.read_text())["search"]["vocabulary"], dict)
    elsewhere = tmp_path / "moved" / "alphavantage.json"  # read without the folder it came from
    elsewhere.parent.mkdir()
    out.rename(elsewhere)
    compiled, yaml_catalog = load_catalog(elsewhere), load_catalog()
    assert compiled.vocabulary.data == yaml_catalog.vocabulary.data
    for query in ("EUR to JPY", "UK inflation rate", "aapl after hours price", "buy 10 shares of TSLA"):
        a = SearchIndex(compiled.tools, compiled.vocabulary).search(query)
        b = SearchIndex(yaml_catalog.tools, yaml_catalog.vocabulary).search(query)
        assert a == b


def test_a_compiled_catalog_keeps_its_vocabulary(tmp_path: Path) -> None:
    from progressive_mcp.sources.compiled import dumps, loads

    catalog = load_catalog()
    again = loads(dumps(catalog))
    assert again.vocabulary.data == catalog.vocabulary.data
    assert Vocabulary.from_data(None) is EMPTY


# --- mistakes ------------------------------------------------------------------------------------------------------


def test_a_missing_vocabulary_file_is_named(tmp_path: Path) -> None:
    spec = write(tmp_path, "spec.yaml", with_search("  vocabulary: nowhere.yaml\n"))
    with pytest.raises(SpecError) as error:
        load_catalog(spec)
    assert "nowhere.yaml" in str(error.value) and "cannot read the vocabulary file" in str(error.value)


def test_a_broken_vocabulary_names_the_file_the_field_and_the_line(tmp_path: Path) -> None:
    write(tmp_path, "words.yaml", "synonyms:\n  cost: [price]\nsynonymz: {}\nscope:\n  tools: '('\n")
    spec = write(tmp_path, "spec.yaml", with_search("  vocabulary: words.yaml\n"))
    with pytest.raises(SpecError) as error:
        load_catalog(spec)
    text = str(error.value)
    assert "words.yaml" in text and "synonymz" in text and "line 3" in text
    assert "not a regular expression" in text


def test_an_inline_vocabulary_is_checked_with_the_spec() -> None:
    with pytest.raises(SpecError) as error:
        parse_spec(with_search("  vocabulary:\n    synonyms: {cost: price}\n"))
    assert "search.vocabulary" in str(error.value)


# --- English alone, on any catalog -----------------------------------------------------------------------------------


def test_identifiers_split_into_their_words() -> None:
    reading = reading_for(EMPTY)
    terms = [t.term for t in reading.tokenize("artist.getSimilar getTopTracks list-droplets HTTPServer iPhone")]
    assert terms[:6] == ["artist.get", "similar", "get", "top", "track", "list"]
    assert "server" in terms and "http" in terms and "iphon" in terms  # iPhone stays one word


def test_a_dotted_name_of_catalog_words_is_read_as_those_words() -> None:
    catalog = load_catalog(LASTFM)
    index = SearchIndex(catalog.tools, catalog.vocabulary)
    analysis = index.analyse("how do I call track.love")
    assert {"track", "lov"} <= analysis.terms and not analysis.entities


def test_a_request_to_act_is_off_topic_only_for_a_catalog_that_only_reads() -> None:
    """Alpha Vantage only reads: "send ..." asks for something no tool does. Last.fm's tools write too."""
    av = load_catalog()
    assert SearchIndex(av.tools, av.vocabulary).rank("send the report to my boss").off_topic
    lastfm = load_catalog(LASTFM)
    ranking = SearchIndex(lastfm.tools, lastfm.vocabulary).rank("love this track for me")
    assert ranking.off_topic != "a request to act, not to look something up"
    assert not ranking.analysis.action


# --- what a tool's own definition adds to its text ------------------------------------------------------------


def _plain_tool(
    name: str, summary: str, params: tuple[Param, ...] = (), output: dict[str, Any] | None = None
) -> CatalogTool:
    return make_tool(name, params, title=summary, summary=summary, output=output)


def test_word_enum_values_and_output_field_names_are_searchable() -> None:
    """An enum's words ("compilation") and a result's top-level fields ("followers") find their tool."""
    tools = [
        _plain_tool(
            "list_releases",
            "Releases of a performer.",
            (Param("kind", "string", False, "What to include.", enum=("album", "single", "compilation")),),
        ),
        _plain_tool("get_performer", "One performer.", output={"type": "object", "properties": {"followers": {}}}),
        _plain_tool("get_venue", "One venue.", (Param("size", "integer", False, "Seats.", enum=(1, 2)),)),
    ]
    index = SearchIndex(tools, semantic=False)
    assert [hit.name for hit in index.search("compilation releases")][:1] == ["list_releases"]
    assert [hit.name for hit in index.search("performer followers")][:1] == ["get_performer"]
    assert index.search("compilation")[0].name == "list_releases"
    # Numbers in an enum are not words: nothing to index.
    assert "1" not in index._vocabulary and "2" not in index._vocabulary
    # A category's description, given with the tools, is part of each of its tools' text (lightly weighted).
    described = SearchIndex(tools, categories={"things": "Concert halls and their stages."}, semantic=False)
    stage = described._reading.stem("stage")
    assert stage in described._vocabulary and stage not in index._vocabulary
    assert {hit.name for hit in described.search("stages")} == {t.name for t in tools}


# --- a vocabulary given beside any catalog (--vocabulary, PMCP_VOCABULARY) -------------------------------------

TASKS = Path(__file__).parent / "fixtures" / "openapi" / "tasks" / "openapi.yaml"


def test_a_vocabulary_file_goes_with_an_openapi_document(tmp_path: Path) -> None:
    vocabulary = tmp_path / "tasks.vocabulary.yaml"
    vocabulary.write_text("synonyms:\n  initiative: [project]\nout_of_scope: [payroll]\n", encoding="utf-8")
    plain = load_catalog(TASKS)
    given = load_catalog(TASKS, vocabulary=vocabulary)
    assert plain.vocabulary == EMPTY and given.vocabulary.synonyms["initiative"] == ("project",)
    assert given.tools == plain.tools and given.version == plain.version  # the tools are the same
    with_words = SearchIndex(given.tools, given.vocabulary, semantic=False)
    without = SearchIndex(plain.tools, plain.vocabulary, semantic=False)
    assert without.search("initiatives") == []  # no tool says "initiative"
    assert "project" in with_words.search("initiatives")[0].name
    assert with_words.rank("delete an initiative").confidence > without.rank("delete an initiative").confidence


def test_a_broken_vocabulary_file_is_named_with_its_line(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("synonyms:\n  initiative: 5\n", encoding="utf-8")
    with pytest.raises(SpecError) as raised:
        load_catalog(TASKS, vocabulary=broken)
    assert str(broken) in str(raised.value) and "line 2: synonyms.initiative" in str(raised.value)
    with pytest.raises(SpecError, match="cannot read the vocabulary file"):
        load_catalog(TASKS, vocabulary=tmp_path / "absent.yaml")


def given(vocabulary: Path, out: Path) -> list[str]:
    return ["--vocabulary", str(vocabulary), "-o", str(out)]


@pytest.mark.slow  # starts a process (tests/conftest.py)
def test_spec_compile_carries_a_given_vocabulary(tmp_path: Path) -> None:
    vocabulary = tmp_path / "v.yaml"
    vocabulary.write_text("synonyms:\n  initiative: [project]\n", encoding="utf-8")
    for source in (TASKS, Path(__file__).parent / "fixtures" / "lastfm" / "lastfm.yaml"):
        out = tmp_path / f"{source.stem}.json"
        done = subprocess.run(
            [sys.executable, "-m", "progressive_mcp.cli", "spec", "compile", str(source), *given(vocabulary, out)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert load_catalog(out).vocabulary.synonyms["initiative"] == ("project",)


def test_settings_and_the_surface_take_the_vocabulary(tmp_path: Path) -> None:
    from progressive_mcp.settings import Settings
    from progressive_mcp.surfaces.surface import Surface

    vocabulary = tmp_path / "v.yaml"
    vocabulary.write_text("synonyms:\n  initiative: [project]\n", encoding="utf-8")
    settings = Settings.from_env({"PMCP_SPEC": str(TASKS), "PMCP_VOCABULARY": str(vocabulary), "PMCP_SEMANTIC": "off"})
    assert settings.vocabulary_path == vocabulary
    surface = Surface.from_settings(settings)
    assert surface.catalog.vocabulary.synonyms["initiative"] == ("project",)
    found = surface.meta.tool_search({"query": "delete an initiative"})["results"]
    assert found and found[0]["name"] == "projects_delete"
