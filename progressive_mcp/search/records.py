"""Whether a query names one record (an id, a number, a quoted value), and the query without its ids.

A REST catalog has two reads of most things: the collection (GET /coupons) and one record by its id
(GET /coupons/{coupon}). A query that names no record wants the first (`index.SearchIndex._by_need`); one that
holds an id may want the second. The id itself says nothing of the need, so MiniLM reads the query without it
(`fusion.SemanticFusion.fuse`)::

    names_record("refund $25 of ch_3Kx9ZbL2eZvKYlo21")  # True
    names_record("list the coupons from 2024")          # False: a year is no record
    without_ids("refund $25 of ch_3Kx9ZbL2eZvKYlo21")   # "refund $25 of"
"""

from __future__ import annotations

import re

# Five or more letters and digits mixed (cus_Kp1q2r3s, ch_3Kx9, i-0abc12), or a number of three digits or more that
# is not a year (an order, a droplet: 3164444, a ticket).
ID_TOKEN = re.compile(
    r"(?<![\w-])(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[\w-]{5,}(?![\w-])"
    r"|(?<![\w.,$])(?!(?:19|20)\d\d(?![\w.,%]))\d{3,}(?![\w.,%])"
)
# A quoted value ('workout', "legacy", “Abbey Road”); an apostrophe inside a word (Lamar's) opens none.
QUOTED = re.compile(r"(?<!\w)['\"`\u2018\u201c][^'\"`\u2019\u201d]{1,40}['\"`\u2019\u201d](?!\w)")


def names_record(query: str) -> bool:
    """Whether the query holds an id, a long number or a quoted value: it names one record."""
    return ID_TOKEN.search(query) is not None or QUOTED.search(query) is not None


def without_ids(query: str) -> str:
    """The query with its ids and long numbers cut out (quoted values stay: they are words); the query itself when
    nothing else is left."""
    quoted = [m.span() for m in QUOTED.finditer(query)]

    def cut(match: re.Match[str]) -> str:
        inside = any(start <= match.start() < end for start, end in quoted)
        return match.group(0) if inside else " "

    return " ".join(ID_TOKEN.sub(cut, query).split()) or query
