"""Ranking rules of the search engine that hold on any catalog (progressive_mcp.search.index), each on a small
catalog built here, lexical engine alone so that nothing but the rule decides.

Run with: .venv/bin/python -m pytest tests/test_ranking.py -q
"""

from __future__ import annotations

import dataclasses

import pytest
from factories import make_tool

from progressive_mcp.catalog import CatalogTool, method_annotations
from progressive_mcp.search import index as search_index
from progressive_mcp.search.index import SearchIndex


def tool(name: str, method: str, summary: str) -> CatalogTool:
    """A tool with the MCP hints its HTTP method gives (a GET reads only), as the OpenAPI source sets them."""
    return dataclasses.replace(make_tool(name, summary=summary, method=method), annotations=method_annotations(method))


# Each pair says the same words, so only the query's mood can tell which tool it wants. Without it, the tool that
# reads wins here (it says the words more often) ...
READS_AHEAD = [
    tool("love-track", "POST", "Love a track"),
    tool("get-loved-tracks", "GET", "Get the loved tracks of a user: every track the user loved"),
    tool("follow-artist", "PUT", "Follow an artist"),
    tool("get-followed-artists", "GET", "Get the followed artists of a user: every artist the user follows"),
]
# ... and here the tool that writes.
WRITES_AHEAD = [
    tool("love-track", "POST", "Love a track: the user loves the track"),
    tool("get-loved-tracks", "GET", "Get loved tracks"),
    tool("follow-artist", "PUT", "Follow an artist: the user follows the artist"),
    tool("get-followed-artists", "GET", "Get followed artists"),
]


@pytest.mark.parametrize(
    ("query", "first"),
    [
        ("love this track", "love-track"),
        ("please follow the artist", "follow-artist"),
        ("can you follow this artist for me", "follow-artist"),
    ],
)
def test_a_command_finds_the_tool_that_writes(query: str, first: str) -> None:
    index = SearchIndex(READS_AHEAD, semantic=False)
    assert index.search(query, limit=2)[0].name == first


@pytest.mark.parametrize(
    ("query", "first"),
    [
        ("which tracks have I loved", "get-loved-tracks"),
        ("show the artists I follow", "get-followed-artists"),
        ("is Radiohead among the artists I follow?", "get-followed-artists"),
    ],
)
def test_a_question_finds_the_tool_that_reads(query: str, first: str) -> None:
    index = SearchIndex(WRITES_AHEAD, semantic=False)
    assert index.search(query, limit=2)[0].name == first


def test_the_mood_orders_tools_but_never_decides_whether_a_query_is_answered(monkeypatch: pytest.MonkeyPatch) -> None:
    queries = ("love this track", "which tracks have I loved", "follow the artist and tell me the weather")
    with_mood = [SearchIndex(READS_AHEAD, semantic=False).rank(query) for query in queries]
    monkeypatch.setattr(search_index, "INTENT_PRIOR", 0.0)
    without = [SearchIndex(READS_AHEAD, semantic=False).rank(query) for query in queries]
    for a, b in zip(with_mood, without, strict=True):
        assert (a.off_topic, a.confidence, a.coverage, a.relative) == (
            b.off_topic,
            b.confidence,
            b.coverage,
            b.relative,
        )
        assert {doc for doc, _ in a.scores} == {doc for doc, _ in b.scores}
    assert [doc for doc, _ in with_mood[0].scores] != [doc for doc, _ in without[0].scores]
    # Every tool of one mood (a read-only catalog): nothing changes.
    reads = [t for t in READS_AHEAD if t.method == "GET"]
    assert [h.name for h in SearchIndex(reads, semantic=False).search("follow this artist", limit=2)] == [
        "get-followed-artists"
    ]


@pytest.mark.parametrize(
    ("query", "mood"),
    [
        ("which tracks have I loved", "read"),
        ("give me the top charts", "read"),
        ("please give us the playlists", "read"),
        ("can you follow this artist for me", "write"),
        ("unfollow them", "write"),
        # "give" asks to see only with a receiver: giving a playlist a title changes it.
        ("give my playlist a different title", None),
        ("loved tracks", None),
    ],
)
def test_how_a_query_opens_says_its_mood(query: str, mood: str | None) -> None:
    assert SearchIndex(READS_AHEAD, semantic=False).analyse(query).intent == mood
