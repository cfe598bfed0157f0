"""What counts as a query naming one record (progressive_mcp.search.records), the signal of the collection rule."""

from __future__ import annotations

import pytest

from progressive_mcp.search.records import names_record, without_ids


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("refund $25 of ch_3Kx9ZbL2eZvKYlo21aBcDeFg", True),
        ("what did cs_live_9z8y7x buy", True),
        ("droplet 3164444", True),
        ("order 4591", True),
        ("info about the 'workout' category", True),
        ("tell me about \u201cAbbey Road\u201d", True),
        ("coupons", False),
        ("list the invoices from 2024", False),  # a year is no record
        ("top 10 tracks of the last 30 days", False),
        ("send $500 to the seller", False),  # an amount is no record
        ("all of Kendrick Lamar's studio albums", False),  # an apostrophe opens no quote
        ("what's the bpm of the song that's on", False),
        ("ipv6 addresses of my droplets", False),
    ],
)
def test_a_query_names_a_record_by_an_id_a_number_or_a_quoted_value(query: str, named: bool) -> None:
    assert names_record(query) is named


def test_without_ids_keeps_the_words_and_quoted_values() -> None:
    assert without_ids("refund $25 of ch_3Kx9ZbL2eZvKYlo21 now") == "refund $25 of now"
    assert without_ids("droplet 3164444 'web-1' in 2024") == "droplet 'web-1' in 2024"
    assert without_ids("acct_1L2m3n4o") == "acct_1L2m3n4o"
