"""Ranking rules of the search engine that hold on any catalog (progressive_mcp.search.index), each on a small
catalog built here, lexical engine alone so that nothing but the rule decides.

Run with: .venv/bin/python -m pytest tests/test_ranking.py -q
"""

from __future__ import annotations

import dataclasses

import pytest
from factories import make_tool

from progressive_mcp.catalog import CatalogTool, Operation, Param, method_annotations
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


def rest(name: str, method: str, path: str, summary: str, *required: str) -> CatalogTool:
    """A REST tool routed by `path`, its `required` arguments strings."""
    params = tuple(Param(name=p, type="string", required=True) for p in required)
    made = make_tool(name, params, summary=summary, method=method, operation=Operation(method, path))
    return dataclasses.replace(made, annotations=method_annotations(method))


# The record's read says "coupon" more often than the collection's, so on words alone it wins a bare "coupons".
COUPONS = [
    rest("GetCoupons", "GET", "/v1/coupons", "List coupons"),
    rest(
        "GetCouponsCoupon", "GET", "/v1/coupons/{coupon}", "Retrieve a coupon: the coupon with the coupon id", "coupon"
    ),
    rest("PostCoupons", "POST", "/v1/coupons", "Create a new discount"),
    # Twilio's shape: the collection and the record under a parent, with a suffix.
    rest("ListCall", "GET", "/Accounts/{AccountSid}/Calls.json", "List calls", "AccountSid"),
    rest(
        "FetchCall",
        "GET",
        "/Accounts/{AccountSid}/Calls/{Sid}.json",
        "Fetch a call: one call of calls",
        "AccountSid",
        "Sid",
    ),
]


@pytest.mark.parametrize(
    ("query", "first"),
    [
        ("coupons", "GetCoupons"),
        ("show me our coupons", "GetCoupons"),
        ("calls", "ListCall"),
        # A query that names one record (an id, a number, a quoted value) keeps the record's read first.
        ("coupon co_25OFF2024", "GetCouponsCoupon"),
        ("coupon 4591", "GetCouponsCoupon"),
        ("coupon 'SPRING'", "GetCouponsCoupon"),
        ("call CA42a0b1c2d3", "FetchCall"),
    ],
)
def test_a_query_naming_no_record_finds_the_collection_before_one_record(query: str, first: str) -> None:
    index = SearchIndex(COUPONS, semantic=False)
    assert index.search(query, limit=2)[0].name == first


def test_a_record_read_without_a_listable_collection_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    # Spotify's shape: GET /artists takes the ids of the artists, so it lists nothing a query could browse.
    tools = [
        rest("get-multiple-artists", "GET", "/artists", "Get several artists", "ids"),
        rest("get-an-artist", "GET", "/artists/{id}", "Get an artist: the artist's profile", "id"),
    ]
    assert search_index._item_reads(tools) == [False, False]
    assert search_index._item_reads(COUPONS) == [False, True, False, False, True]
    assert SearchIndex(tools, semantic=False).search("artist", limit=1)[0].name == "get-an-artist"
    # Without the rule the record's read wins the bare plural too: the rule is what orders the coupons.
    monkeypatch.setattr(search_index, "ITEM_PRIOR", 0.0)
    assert SearchIndex(COUPONS, semantic=False).search("coupons", limit=1)[0].name == "GetCouponsCoupon"
