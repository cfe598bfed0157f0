"""Token counting with a real tokenizer (OpenAI cl100k_base through bpe-openai, offline).

Example::

    count_tokens('{"symbol": "IBM"}')     # 6
    fits_budget(text, 8000)               # True without tokenizing when the text is short
"""

from __future__ import annotations

import functools
import json
from typing import Any

TOKENIZER = "cl100k_base"
TOKENIZER_LABEL = "cl100k_base (OpenAI BPE, via bpe-openai)"


@functools.cache
def _encoding() -> Any:
    import bpe_openai  # loaded on first count: discovery answers never need it

    return bpe_openai.get_encoding(TOKENIZER)


def count_tokens(text: str) -> int:
    return len(_encoding().encode(text))


def fits_budget(text: str, budget: int) -> bool:
    """Whether `text` is at most `budget` tokens; a byte-level BPE token covers at least one byte,
    so a text of at most `budget` UTF-8 bytes fits without being tokenized."""
    if len(text.encode()) <= budget:
        return True
    return count_tokens(text) <= budget


def dumps(value: Any) -> str:
    """The JSON text we send to models: compact separators (fewer tokens), real Unicode."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
