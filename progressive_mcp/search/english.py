"""Words spelled right: a query word that is an English word is never read as a misspelling of a catalog word.

The lexical engine reads a word no tool text has as the catalog word one edit away (`index.SearchIndex._correct`:
"unemploymnet" -> unemployment). That is right for a typo and wrong for a real word the catalog lacks: on Stripe,
"how do I center a div" read "center" as "enter" and "how many ounces in a pound" read "pound" as "found", and
both got tools instead of "nothing fits". A word in this list keeps its own meaning (the semantic signal may still
find catalog words near it, `semantic.SemanticRescue.similar_terms`).

The list is the whole-word part of the vendored MiniLM tokenizer's WordPiece vocabulary (``embedder.TOKENIZER``,
Apache-2.0): about 22,000 lower-case words of general English text, no catalog's words chosen by hand. It is read
on first use (~40 ms, once per process), and only for a query word that is unknown to the catalog and one edit from
a catalog word.
"""

from __future__ import annotations

import json
from functools import lru_cache


def is_word(lower: str) -> bool:
    """Whether a lower-case word is an English word as written (not a misspelling)."""
    return lower in _words()


@lru_cache(maxsize=1)
def _words() -> frozenset[str]:
    from progressive_mcp.search.embedder import TOKENIZER

    vocab = json.loads(TOKENIZER.read_text(encoding="utf-8"))["model"]["vocab"]
    return frozenset(word for word in vocab if word.isalpha() and word.islower())
