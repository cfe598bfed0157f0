"""Token counting with real tokenizers (OpenAI cl100k_base and o200k_base through bpe-openai, offline).

The server counts with cl100k_base; the token report can also count with o200k_base. Each vocabulary
is loaded on its first count, so importing this module (the Lambda handler does) loads none. Example::

    count_tokens('{"symbol": "IBM"}')                 # 6
    count_tokens('{"symbol": "IBM"}', "o200k_base")   # the same text with GPT-4o's vocabulary
    fits_budget(text, 8000)                           # True without tokenizing when the text is short
    estimate_tokens(text)                             # at least cl100k's count, without any vocabulary

Where bpe-openai is not installed (the Lambda asset leaves out its 77 MB of vocabularies), `fits_budget` checks
budgets with `estimate_tokens`, an upper bound on the cl100k count: results are cut a little earlier than an
exact count would cut them (about 1.4x the real count on the sample answers, median), never later on them.
"""

from __future__ import annotations

import functools
import json
import math
import re
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

# The bound `estimate_tokens` uses where bpe-openai is absent. cl100k's pre-tokenizer cuts every run of digits
# into groups of at most three, and each such group (all 1,110 of "0"…"999", leading zeros too) is one token; a
# token is at least one byte, so any other byte costs at most one token: those two parts are proven (and
# tests/test_token_bound.py checks the digit groups against the vocabulary). ASCII letters are counted at
# LETTER_BYTES_PER_TOKEN bytes a token: calibrated, not proven. Over 923 texts (every Alpha Vantage function's
# sample answer as JSON and CSV, the shaped results the server sends, and this project's prose), the letters
# left after the proven parts never came to fewer than 3.16 bytes a token; 2.5 keeps a margin.
LETTER_BYTES_PER_TOKEN = 2.5
_ASCII_LETTERS = bytes(range(0x41, 0x5B)) + bytes(range(0x61, 0x7B))
_ASCII_DIGITS = b"0123456789"
_DIGIT_RUNS = re.compile(rb"[0-9]+")
# Letters next to a digit ("c382faa5", an id or a hash) are short runs, often a token each: counted one a byte.
_LETTERS_BY_DIGITS = re.compile(rb"[A-Za-z]+(?=[0-9])|(?<=[0-9])[A-Za-z]+")
# Whether counts are exact: None until first asked (bpe-openai importable or not); tests may set it.
exact_counts: bool | None = None


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
    so a text of at most `budget` UTF-8 bytes fits without being tokenized. Without bpe-openai, whether
    `estimate_tokens` (never below the real count) is within the budget."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= budget:
        return True
    if not _exact():
        return _estimate(data) <= budget
    total = 0
    for count in _chunk_counts(text):  # a long text over budget stops early
        total += count
        if total > budget:
            return False
    return True


def estimate_tokens(text: str) -> int:
    """At least the number of cl100k_base tokens in `text` on the texts it was calibrated on, without a vocabulary
    (see LETTER_BYTES_PER_TOKEN): one token per group of up to three digits, per other byte, per letter next to a
    digit, and per 2.5 bytes of the other ASCII letters."""
    return _estimate(text.encode("utf-8", "surrogatepass"))


def _estimate(data: bytes) -> int:
    letters = len(data) - len(data.translate(None, _ASCII_LETTERS))
    digits = len(data) - len(data.translate(None, _ASCII_DIGITS))
    groups = sum((len(run) + 2) // 3 for run in _DIGIT_RUNS.findall(data))
    by_digits = sum(map(len, _LETTERS_BY_DIGITS.findall(data)))
    other = len(data) - letters - digits
    return groups + other + by_digits + math.ceil((letters - by_digits) / LETTER_BYTES_PER_TOKEN)


def _exact() -> bool:
    global exact_counts
    if exact_counts is None:
        try:
            import bpe_openai  # noqa: F401
        except ImportError:
            exact_counts = False
        else:
            exact_counts = True
    return exact_counts


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
