"""Token counting with real tokenizers (OpenAI cl100k_base and o200k_base through bpe-openai, offline).

The server counts with cl100k_base; the token report can also count with o200k_base. Each vocabulary
is loaded on its first count, so importing this module (the Lambda handler does) loads none. Example::

    count_tokens('{"symbol": "IBM"}')                 # 6
    count_tokens('{"symbol": "IBM"}', "o200k_base")   # the same text with GPT-4o's vocabulary
    fits_budget(text, 8000)                           # True without tokenizing when the text is short
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from typing import Any

TOKENIZER = "cl100k_base"
TOKENIZER_LABEL = "cl100k_base (OpenAI BPE, via bpe-openai)"
# Short names (as the CLI spells them) of the encodings the report can count with.
ENCODINGS = {"cl100k": "cl100k_base", "o200k": "o200k_base"}

# bpe-openai refuses an input of 1,000,000 characters or one that makes more than 200,000 tokens.
# A character is at most 4 UTF-8 bytes and a token at least one byte, so this many characters
# always stays under both limits.
CHUNK_CHARS = 50_000


@functools.cache
def _encoding(name: str = TOKENIZER) -> Any:
    import bpe_openai  # loaded on first count: discovery answers never need it

    return bpe_openai.get_encoding(name)


def count_tokens(text: str, encoding: str = TOKENIZER) -> int:
    """Tokens in `text` with `encoding` (default cl100k_base); text that looks like a special token
    (`<|endoftext|>`) counts as plain text."""
    return sum(_chunk_counts(text, encoding))


def fits_budget(text: str, budget: int) -> bool:
    """Whether `text` is at most `budget` tokens; a byte-level BPE token covers at least one byte,
    so a text of at most `budget` UTF-8 bytes fits without being tokenized."""
    if len(text.encode()) <= budget:
        return True
    total = 0
    for count in _chunk_counts(text):  # a long text over budget stops early
        total += count
        if total > budget:
            return False
    return True


def _chunk_counts(text: str, encoding: str = TOKENIZER) -> Iterator[int]:
    tokenizer = _encoding(encoding)
    for piece in _pieces(text):
        yield len(tokenizer.encode_ordinary(piece))


def _pieces(text: str) -> Iterator[str]:
    """`text` in chunks the tokenizer accepts, cut where the count stays exact.

    cl100k and o200k pre-tokenize before merging and a digit only ever belongs to a run of digits, so just
    after an ASCII digit followed by any other ASCII character no token can span the cut. Numeric
    JSON and CSV are full of such places; a text without one is cut anyway (off by a token or so).
    """
    start = 0
    while len(text) - start > CHUNK_CHARS:
        end = start + CHUNK_CHARS
        cut = end
        for position in range(end, start + CHUNK_CHARS // 2, -1):
            before, after = text[position - 1], text[position]
            if "0" <= before <= "9" and after < "\x80" and not ("0" <= after <= "9"):
                cut = position
                break
        yield text[start:cut]
        start = cut
    yield text[start:]


def dumps(value: Any) -> str:
    """The JSON text we send to models: compact separators (fewer tokens), real Unicode."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
