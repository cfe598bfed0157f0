"""Token counting with real tokenizers (OpenAI cl100k_base and o200k_base through bpe-openai, offline), and an
upper bound on the cl100k_base count for where bpe-openai is not installed.

The server counts with cl100k_base; the token report can also count with o200k_base. Each vocabulary
is loaded on its first count, so importing this module (the Lambda handler does) loads none. Example::

    count_tokens('{"symbol": "IBM"}')                 # 6
    count_tokens('{"symbol": "IBM"}', "o200k_base")   # the same text with GPT-4o's vocabulary
    fits_budget(text, 8000)                           # True without tokenizing when the text is short
    estimate_tokens('{"symbol": "IBM"}')              # 10: never fewer than cl100k's count, with no vocabulary

Where bpe-openai is not installed (the Lambda asset leaves out its 77 MB of vocabularies), `fits_budget` checks
budgets with `estimate_tokens`: a few passes over the text's bytes at C speed (about 6 ms a megabyte), exact for
digits, calibrated for letters and punctuation (`_pair_cost` says which part is which). On the texts the server
bounds while it shapes answers it comes to 1.1x the real count (median), never less; previews come out about 0.9 of
what an exact count keeps. bench/token_bound.py measures it, tests/test_token_bound.py holds it to the tokenizer.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from collections.abc import Iterator, Mapping
from typing import Any

TOKENIZER = "cl100k_base"
TOKENIZER_LABEL = "cl100k_base (OpenAI BPE, via bpe-openai)"
# Short names (as the CLI spells them) of the encodings the report can count with.
ENCODINGS = {"cl100k": "cl100k_base", "o200k": "o200k_base"}

# bpe-openai refuses an input of 1,000,000 characters or one that makes more than 200,000 tokens.
# A character is at most 4 UTF-8 bytes and a token at least one byte, so this many characters
# always stays under both limits.
CHUNK_CHARS = 50_000

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


def counts_exactly() -> bool:
    """Whether `count_tokens` can count here (bpe-openai is installed; the Lambda asset leaves it out)."""
    return _exact()


# cl100k counts of texts made where the vocabulary was, by `text_digest`: a compiled catalog carries its tools'
# definitions' counts (made at `spec compile`), so a process without bpe-openai still knows them exactly.
_KNOWN_COUNTS: dict[str, int] = {}


def text_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:20]


def remember_counts(counts: Mapping[str, int]) -> None:
    """Keep cl100k counts made elsewhere, keyed by `text_digest` of their texts."""
    _KNOWN_COUNTS.update(counts)


def known_count(text: str) -> int | None:
    """The cl100k count of `text` if it was counted here or remembered (`remember_counts`), else None."""
    if _exact():
        return count_tokens(text)
    return _KNOWN_COUNTS.get(text_digest(text))


def fits_budget(text: str, budget: int, *, bound_first: bool = False) -> bool:
    """Whether `text` is at most `budget` tokens; a byte-level BPE token covers at least one byte,
    so a text of at most `budget` UTF-8 bytes fits without being tokenized. Without bpe-openai, whether
    `estimate_tokens` (never below the real count) is within the budget. `bound_first`: a text whose estimate is
    within the budget fits without being tokenized either, so a first call does not load the vocabulary (~0.5 s)
    for a text well within it (a TOOL_GET entry, a gateway tool's definition)."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= budget or (bound_first and _estimate(data) <= budget):
        return True
    if not _exact():
        # A prefix's estimate exceeds the whole text's by a token at most (a space at its end), so a prefix over the
        # budget by more settles it without reading the rest of a long text.
        prefix = text[: budget * PREFIX_CHARS_PER_TOKEN]
        if len(prefix) < len(text) and estimate_tokens(prefix) > budget + 1:
            return False
        return _estimate(data) <= budget
    total = 0
    for count in _chunk_counts(text):  # a long text over budget stops early
        total += count
        if total > budget:
            return False
    return True


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


# -- the bound ------------------------------------------------------------------------------------------------

# `fits_budget` first bounds a prefix of this many characters per budget token: texts estimate at about a token per
# two to four characters, so a prefix this long of a text over budget is nearly always over budget too.
PREFIX_CHARS_PER_TOKEN = 8

# Byte classes, four bits each, so that a byte's class and the class of the byte before it make one byte.
(_START, _CONSONANT, _VOWEL, _UPPER, _DIGIT, _DIGITS3, _SPACE, _HIGH) = range(8)
(_QUOTE, _COLON, _COMMA, _OPEN, _CLOSE, _BACKSLASH, _PUNCT, _BREAK) = _PUNCTUATION = tuple(range(8, 16))
_LETTERS, _LOWERCASE = (_CONSONANT, _VOWEL, _UPPER), (_CONSONANT, _VOWEL)
_UNIT = 50  # costs are in fiftieths of a token, so that a pair's fits in a byte
# Half tokens a punctuation byte costs after another one (rows: the byte before; columns: the byte), classes in
# _PUNCTUATION's order; zero where cl100k_base's JSON tokens join the pair (`":"`, `","`, `":{"`, `"},"`, `{"`,
# `"}`, `":[`, `],"` ...). Calibrated, not proven. These values came from a first fit whose script was not kept: an
# integer program making every punctuation piece of the sample answers and of generated JSON cost at least its
# tokens. bench/fit_token_pairs.py does that again, reproducibly (it needs scipy), and its table differs in 34 of
# 64 cells: a little cheaper on the pieces it fits, but looser on the texts `fits_budget` sees (median 1.15x against
# 1.10x) and under the real count on two texts of tests/test_token_bound.py. So these values stay; the tests hold
# them to the tokenizer.
_PUNCT_PAIRS = (
    # "  :  ,  {[ }] \  .  \n
    (4, 0, 0, 2, 0, 2, 2, 0),  # "
    (0, 4, 2, 0, 2, 0, 0, 0),  # :
    (0, 2, 2, 2, 2, 0, 2, 0),  # ,
    (0, 2, 2, 2, 4, 0, 0, 0),  # { [
    (2, 2, 0, 2, 2, 0, 0, 0),  # } ]
    (2, 2, 2, 2, 2, 1, 2, 2),  # \
    (2, 0, 0, 0, 2, 0, 2, 0),  # any other punctuation or control character
    (2, 2, 2, 2, 2, 2, 2, 0),  # tab, line break
)
_LONG_LETTERS = 16  # letters of one word (digits do not part them) past which a text looks random...
_LONG_LETTERS_COST = 80  # ... each 16 of them 1.6 tokens more


def _byte_class(byte: int) -> int:
    char = chr(byte)
    if byte >= 0x80:  # a byte of a non-ASCII character
        return _HIGH
    if char in "aeiouy":
        return _VOWEL
    if "a" <= char <= "z":
        return _CONSONANT
    if "A" <= char <= "Z":
        return _UPPER
    if "0" <= char <= "9":
        return _DIGIT
    if char == " ":
        return _SPACE
    if char in "\t\n\r\v\f":
        return _BREAK
    named = {'"': _QUOTE, ":": _COLON, ",": _COMMA, "{": _OPEN, "[": _OPEN, "}": _CLOSE, "]": _CLOSE, "\\": _BACKSLASH}
    return named.get(char, _PUNCT)


def _pair_cost(previous: int, current: int) -> int:
    """What a byte of class `current` after one of class `previous` adds to the bound, in `_UNIT`s.

    cl100k_base splits a text into pieces (up to three digits; a run of letters with a space or punctuation mark
    before it; a run of punctuation with a space before it; spaces) and merges bytes within a piece only. Proven from
    that and the vocabulary: each group of one to three ASCII digits is one token (all 1,110 are in the vocabulary)
    and a run of digits is grouped from its start, so digits are counted exactly; a space before a digit is a piece,
    so a token, of its own; a token is at least one byte, so a non-ASCII byte costs at most one, and two more per run
    of them cover the groups a non-ASCII numeral (², ４) shifts. Calibrated (bench/token_bound.py measures it; held-out
    answers and adversarial texts check it): a run of punctuation costs a token, plus `_PUNCT_PAIRS`; a run of letters
    a token, plus: a capital after a small letter a token (657 of the 676 such pairs are not in the vocabulary), after
    a capital two thirds (BPE cannot leave two one-byte tokens side by side where each pair is in the vocabulary), a
    small letter after one of its kind (consonant after consonant, vowel after vowel) 0.7 and after any other letter
    0.4 (enough for rare words, random ids, and vowel-rich languages such as Hawaiian or Yoruba written in ASCII);
    a space before a letter or punctuation nothing (it joins that piece), a space after a space a token.
    """
    if current == _DIGITS3 or (current == _DIGIT and previous != _DIGIT):  # a new group of up to three digits
        return 2 * _UNIT if previous == _SPACE else _UNIT
    if current == _HIGH:
        return _UNIT if previous == _HIGH else 3 * _UNIT
    if current in _PUNCTUATION:
        if previous in _PUNCTUATION:
            return _PUNCT_PAIRS[previous - _QUOTE][current - _QUOTE] * _UNIT // 2
        return _UNIT
    if current in (_SPACE, _START):  # _START after the last byte: a space there is a piece of its own
        return _UNIT if previous == _SPACE else 0
    if current == _UPPER:
        return 34 if previous == _UPPER else _UNIT  # 34: two thirds, rounded up
    if current in _LOWERCASE and previous in _LETTERS:
        return 35 if previous == current else 20
    if current in _LOWERCASE:
        return _UNIT
    return 0  # a digit of a group already counted


_CLASSES = bytes(_byte_class(byte) for byte in range(256))
_PAIR_COSTS = bytes(_pair_cost(pair >> 4, pair & 15) for pair in range(256))
_COSTS = tuple(sorted(set(_PAIR_COSTS) - {0}))
_THREE_DIGITS, _DIGIT_GROUP = bytes([_DIGIT] * 3), bytes([_DIGITS3])
_LETTER_OR_GAP = bytes(0x61 if chr(byte).isalpha() and byte < 0x80 else 0x20 for byte in range(256))


def estimate_tokens(text: str) -> int:
    """An upper bound on `count_tokens(text)` (cl100k_base) that needs no vocabulary: a few passes over the text's
    bytes at C speed. Exact for digits; see `_pair_cost` for the rest. It undercounts raw control characters, runs of
    raw line breaks (`"x\r\r\r\r"` 500 times: 1,000 for 2,500) and short texts of JSON punctuation in odd orders
    (`{"k":","}`: 3 for 5); what `fits_budget` bounds is JSON it made (control characters and line breaks escaped)
    longer in bytes than the budget (hundreds at least), where such strings are diluted. Known to come up to ~10%
    under on JSON lists of made-up words in strictly alternating case (`"KtRqBmKbZw"`) or capitalised
    (`"Kipufozuqo"`), which no API answer of ours holds."""
    return _estimate(text.encode("utf-8", "surrogatepass"))


def _estimate(data: bytes) -> int:
    # A run of digits becomes its groups of three (and the one or two digits left), so pairs see whole groups.
    classes = data.translate(_CLASSES).replace(_THREE_DIGITS, _DIGIT_GROUP)
    number = int.from_bytes(classes, "little")
    # Byte i of `pairs` holds the class of byte i and, in its high half, the class of byte i - 1 (_START for none);
    # the byte past the end holds the last class and _START, so a trailing space is counted.
    pairs = (number | (number << 12)).to_bytes(len(classes) + 2, "little").translate(_PAIR_COSTS)
    units = sum(cost * pairs.count(cost) for cost in _COSTS)
    long_letters = data.translate(_LETTER_OR_GAP, b"0123456789").count(b"a" * _LONG_LETTERS)
    return math.ceil((units + _LONG_LETTERS_COST * long_letters) / _UNIT)
