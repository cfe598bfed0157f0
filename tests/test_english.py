"""A query word spelled right is not read as a misspelling of a catalog word (search/english.py)."""

from __future__ import annotations

import pytest
from factories import make_tool

from progressive_mcp.search import english
from progressive_mcp.search.index import SearchIndex

TOOLS = [
    make_tool("enter-order", summary="Enter an order into the ledger"),
    make_tool("find-payment", summary="Find a payment that was found by the bank"),
    make_tool("list-invoices", summary="List the invoices of a customer"),
]


@pytest.fixture
def index(monkeypatch: pytest.MonkeyPatch) -> SearchIndex:
    monkeypatch.setenv("PMCP_SEMANTIC", "off")  # the lexical reading alone: no model finds words near in meaning
    return SearchIndex(TOOLS)


@pytest.mark.parametrize("query", ["how do I center a div", "how many ounces in a pound"])
def test_an_english_word_the_catalog_lacks_is_not_read_as_a_typo(index: SearchIndex, query: str) -> None:
    """Read as one edit from "enter" and "found", "center" and "pound" gave these queries tools."""
    assert index.search(query) == []


@pytest.mark.parametrize(("query", "tool"), [("list the invoces", "list-invoices"), ("entr an order", "enter-order")])
def test_a_real_typo_is_still_corrected(index: SearchIndex, query: str, tool: str) -> None:
    assert [hit.name for hit in index.search(query)][:1] == [tool]


def test_the_word_list_is_general_english_without_word_pieces() -> None:
    assert english.is_word("center") and english.is_word("pound")
    assert not english.is_word("invoces") and not english.is_word("unemploymnet")
    assert not any(word.startswith("#") for word in english._words())
