"""The semantic second opinion (progressive_mcp.search.semantic): when it may speak, what it changes, what it leaves."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from progressive_mcp.catalog import Catalog
from progressive_mcp.errors import ConfigError
from progressive_mcp.search import dense, semantic
from progressive_mcp.search.index import MIN_CONFIDENCE, SearchIndex
from progressive_mcp.settings import Settings
from progressive_mcp.sources import load_catalog

LASTFM = Path(__file__).parent / "fixtures" / "lastfm" / "lastfm.yaml"
needs_wordllama = pytest.mark.skipif(not dense.available(), reason="the semantic extra is not installed")


@pytest.fixture(scope="module")
def lastfm() -> Catalog:
    return load_catalog(str(LASTFM))


@pytest.fixture(scope="module")
def alphavantage() -> Catalog:
    return load_catalog()


# --- the switch ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "installed", "expected"), [
    (None, True, True), ("auto", True, True), (" AUTO ", True, True), ("", True, True), ("on", True, True),
    ("off", True, False), ("auto", False, False), ("off", False, False),
])  # fmt: skip
def test_semantic_enabled_reads_pmcp_semantic(
    monkeypatch: pytest.MonkeyPatch, value: str | None, installed: bool, expected: bool
) -> None:
    monkeypatch.setattr(dense, "available", lambda: installed)
    environ = {} if value is None else {semantic.SEMANTIC_ENV: value}
    assert semantic.semantic_enabled(environ) is expected


def test_on_without_the_extra_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dense, "available", lambda: False)
    with pytest.raises(ConfigError, match=r"pip install 'progressive-mcp\[semantic\]'.*PMCP_SEMANTIC=off"):
        semantic.semantic_enabled({"PMCP_SEMANTIC": "on"})


def test_a_wrong_value_fails_at_start() -> None:
    with pytest.raises(ConfigError, match="PMCP_SEMANTIC must be one of auto, on, off, not 'maybe'"):
        Settings.from_env({"PMCP_SEMANTIC": "maybe"})


def test_the_everyday_requests_ship_with_the_package() -> None:
    requests = semantic.everyday_requests()
    assert len(requests) >= 100
    assert len(set(requests)) == len(requests)
    assert not any(line.startswith("#") or not line.strip() for line in requests)


# --- where it may speak -----------------------------------------------------------------------------------------


def test_off_means_no_dense_index(lastfm: Catalog) -> None:
    assert SearchIndex(lastfm.tools, lastfm.vocabulary, semantic=False)._semantic is None


def test_a_curated_vocabulary_keeps_its_own_no_match(alphavantage: Catalog) -> None:
    """Alpha Vantage's vocabulary sets unknown_weight: the semantic signal never overrules it."""
    assert alphavantage.vocabulary.unknown_weight is not None
    index = SearchIndex(alphavantage.tools, alphavantage.vocabulary, semantic=True)
    assert index._semantic is None
    assert index.search("what's the weather in Seattle tomorrow") == []


def test_the_lexical_default_for_uncurated_catalogs_is_lower_than_alpha_vantages(lastfm: Catalog) -> None:
    """An uncurated catalog's unknown words weigh less: a question half in the catalog's words is answered."""
    index = SearchIndex(lastfm.tools, lastfm.vocabulary, semantic=False)
    assert lastfm.vocabulary.unknown_weight is None
    assert index._unknown_weight < 0.8
    strict = SearchIndex(lastfm.tools, lastfm.vocabulary, semantic=False)
    strict._unknown_weight = 0.8  # Alpha Vantage's, whose texts were written with searchers' words
    query = "the personal labels a listener uses"  # "labels": no Last.fm tool says it ("tags")
    assert strict.rank(query).off_topic is not None
    assert index.rank(query).off_topic is None
    assert "user.getPersonalTags" in [hit.name for hit in index.search(query)]


@needs_wordllama
def test_the_bar_is_the_closest_an_everyday_request_comes(lastfm: Catalog) -> None:
    index = SearchIndex(lastfm.tools, lastfm.vocabulary, semantic=True)
    rescue = index._semantic
    assert rescue is not None
    dense_index = rescue._ready()
    assert dense_index is not None
    closest = max(float(dense_index.scores(text).max()) for text in semantic.everyday_requests())
    assert rescue.bar == pytest.approx(closest, abs=1e-5)
    assert 0 < rescue.bar < 1


# --- what it changes -------------------------------------------------------------------------------------------


def lexically_rejected(index: SearchIndex, queries: list[str]) -> list[str]:
    return [q for q in queries if index.rank(q).confidence < MIN_CONFIDENCE]


@needs_wordllama
def test_everyday_requests_stay_unanswered(lastfm: Catalog) -> None:
    index = SearchIndex(lastfm.tools, lastfm.vocabulary, semantic=True)
    answered = [q for q in semantic.everyday_requests() if index.search(q)]
    # The semantic bar is the closest any of them comes; the lexical rule alone lets a few through (their words
    # are the catalog's: "day", "friend"), 4 of 120 when this was written.
    assert len(answered) <= len(semantic.everyday_requests()) // 20, answered


@needs_wordllama
def test_a_rescued_query_gets_tools_with_their_cosines(lastfm: Catalog) -> None:
    on = SearchIndex(lastfm.tools, lastfm.vocabulary, semantic=True, fusion=False)  # MiniLM's: tests/test_fusion.py
    off = SearchIndex(lastfm.tools, lastfm.vocabulary, semantic=False)
    rescue = on._semantic
    assert rescue is not None
    # A query of the catalog's subject the lexical engine rejects and the dense signal accepts.
    query = "labels someone stuck on a record"
    assert off.search(query) == []
    ranking = on.rank(query)
    assert ranking.semantic and ranking.off_topic is None
    hits = on.search(query, limit=3)
    assert len(hits) == 3
    assert all("Tag" in hit.name for hit in hits), hits  # the catalog's word for a label is "tag"
    dense_index = rescue._ready()
    assert dense_index is not None
    cosines = dense_index.scores(query)
    for hit in hits:
        position = next(i for i, tool in enumerate(lastfm.tools) if tool.name == hit.name)
        assert hit.score == pytest.approx(max(float(cosines[position]), 0.0), abs=1e-3)


@needs_wordllama
def test_a_confident_lexical_answer_is_left_alone(lastfm: Catalog) -> None:
    on = SearchIndex(lastfm.tools, lastfm.vocabulary, semantic=True, fusion=False)
    off = SearchIndex(lastfm.tools, lastfm.vocabulary, semantic=False)
    for query in ("artists similar to Radiohead", "top tracks of a tag", "scrobble a track"):
        assert on.rank(query).confidence >= MIN_CONFIDENCE
        assert not on.rank(query).semantic
        assert on.search(query) == off.search(query)


@needs_wordllama
def test_requests_to_act_or_to_explain_are_not_rescued(lastfm: Catalog) -> None:
    index = SearchIndex(lastfm.tools, lastfm.vocabulary, semantic=True)
    assert index.search("hi") == []
    assert index.search("explain what a music genre is") == []


@needs_wordllama
def test_rescued_tools_respect_the_categories(lastfm: Catalog) -> None:
    index = SearchIndex(lastfm.tools, lastfm.vocabulary, semantic=True)
    query = "labels someone stuck on a record"
    categories = frozenset({"album"})
    ranking = index.rank(query, categories=categories)
    assert ranking.semantic
    hits = index.search(query, categories=categories)
    assert hits and {hit.category for hit in hits} == {"album"}


def test_a_model_that_cannot_load_leaves_lexical_search(
    lastfm: Catalog, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*args: object, **kwargs: object) -> dense.DenseIndex:
        raise FileNotFoundError("l2_supercat_256.safetensors")

    monkeypatch.setattr(dense.DenseIndex, "for_tools", broken)
    on = SearchIndex(lastfm.tools, lastfm.vocabulary, semantic=True, fusion=False)
    off = SearchIndex(lastfm.tools, lastfm.vocabulary, semantic=False)
    query = "labels someone stuck on a record"
    with caplog.at_level(logging.WARNING, logger="progressive_mcp.search.semantic"):
        assert on.search(query) == off.search(query)
        assert on.search("who sounds like Radiohead") == off.search("who sounds like Radiohead")
    warnings = [r for r in caplog.records if "semantic search is off" in r.getMessage()]
    assert len(warnings) == 1
    assert "safetensors" not in warnings[0].getMessage()  # the kind of failure, not paths of the machine


@needs_wordllama
def test_an_unknown_word_reads_as_the_nearest_catalog_words(lastfm: Catalog) -> None:
    index = SearchIndex(lastfm.tools, lastfm.vocabulary, semantic=True)
    rescue = index._semantic
    assert rescue is not None
    similar = rescue.similar_terms("bio")
    assert similar and max(similar, key=lambda term: similar[term]) == index._reading.stem("biography")
    assert all(semantic.WORD_SIMILARITY * semantic.WORD_FACTOR <= f <= semantic.WORD_FACTOR for f in similar.values())
    assert rescue.similar_terms("faucet") == {}  # nothing in a music catalog is that close
    concept = next(c for c in index.analyse("kendrick bio").concepts if c.label == "bio")
    assert concept.terms == similar
    off = SearchIndex(lastfm.tools, lastfm.vocabulary, semantic=False)
    assert not next(c for c in off.analyse("kendrick bio").concepts if c.label == "bio").terms


def test_settings_carry_the_switch_to_the_search_index(lastfm: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    """PMCP_SEMANTIC is read once, by Settings.from_env, and reaches the index through the surface."""
    from progressive_mcp.surfaces.surface import Surface

    monkeypatch.setattr(dense, "available", lambda: True)
    monkeypatch.delenv("PMCP_SEMANTIC", raising=False)
    off = Settings.from_env({"PMCP_SEMANTIC": "off"})
    on = Settings.from_env({})
    assert (off.semantic, on.semantic) == (False, True)
    assert Surface.from_settings(off, catalog=lastfm).meta.index._semantic is None
    assert Surface.from_settings(on, catalog=lastfm).meta.index._semantic is not None
    monkeypatch.setenv("PMCP_SEMANTIC", "off")  # settings made elsewhere win over the process environment
    assert Surface.from_settings(on, catalog=lastfm).meta.index._semantic is not None
