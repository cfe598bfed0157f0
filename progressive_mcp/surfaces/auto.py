"""The `auto` surface: direct when the tools a request may see are cheap to list, else progressive (or code).

The choice is a function of those tools' wire definitions alone, so whatever narrows them first (`?categories=`,
an identity's policy) feeds it; a surface makes it once, when it is built. Example::

    choice = choose_mode(definitions, threshold=DEFAULT_AUTO_DIRECT_TOKENS)
    choice.mode, choice.direct_tokens       # ('direct', 1021) for Alpha Vantage's forex tools
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from progressive_mcp.tokens import count_tokens, counts_exactly, dumps, estimate_tokens, known_count, text_digest

AUTO = "auto"
AutoFallback = Literal["progressive", "code"]
AUTO_FALLBACKS: tuple[AutoFallback, ...] = ("progressive", "code")
# 4,000 cl100k tokens is 2% of a 200k-token context window (3% of 128k): the "few percent" the MCP documentation
# suggests tool definitions keep to. Measured (docs/measurements.md#the-auto-surface): it takes 10 of Alpha
# Vantage's 11 categories direct (all but the 53 technicals, 15,260) and most categories of the OpenAPI catalogs,
# never a whole catalog (15,780 to 230,389); a progressive task reads ~900 tokens of discovery, so a list this
# size is paid back within a few tasks.
DEFAULT_AUTO_DIRECT_TOKENS = 4000
AUTO_DIRECT_TOKENS_ENV = "PMCP_AUTO_DIRECT_TOKENS"
AUTO_FALLBACK_ENV = "PMCP_AUTO_FALLBACK"
# A direct tools/list's `[` + definitions joined by `,` + `]` counts its definitions' tokens and two more (cl100k
# has `},{`): tests/test_auto.py holds it on real documents.
LIST_BRACKET_TOKENS = 2
# Where initialize, server/discover and tools/list report the choice (`_meta`).
AUTO_META = "progressive-mcp/auto"


@dataclass(frozen=True)
class AutoChoice:
    """What `auto` picked for one set of tools, and the figures it picked on."""

    mode: Literal["direct", "progressive", "code"]
    direct_tokens: int  # the tools' direct tools/list, cl100k (an upper bound where bpe-openai is absent)
    threshold: int
    fallback: AutoFallback
    tools: int

    def as_meta(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "directTokens": self.direct_tokens,
            "threshold": self.threshold,
            "fallback": self.fallback,
            "tools": self.tools,
        }


def direct_list_tokens(definitions: Sequence[Mapping[str, Any]]) -> int:
    """Tokens of these definitions as a direct tools/list's `tools` array, counted as `progressive-mcp tokens`
    counts it: cl100k over the compact JSON. Without bpe-openai (the Lambda), the sum of each definition's count
    as `spec compile` made it, plus the array's brackets (`[{`, `}]`; `},{` is one token): the same figure. Only
    a definition nobody counted falls back to `estimate_tokens`, an upper bound (about 2x on definitions)."""
    texts = [dumps(d) for d in definitions]
    if counts_exactly():
        return count_tokens("[" + ",".join(texts) + "]")
    known = [known_count(text) for text in texts]
    if all(count is not None for count in known):
        return sum(count for count in known if count is not None) + (LIST_BRACKET_TOKENS if texts else 1)
    return estimate_tokens("[" + ",".join(texts) + "]")


def definition_counts(definitions: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Each definition's cl100k count by its text's digest (what a compiled catalog carries, see `known_count`)."""
    return {text_digest(text): count_tokens(text) for text in (dumps(d) for d in definitions)}


def choose_mode(
    definitions: Sequence[Mapping[str, Any]],
    *,
    threshold: int = DEFAULT_AUTO_DIRECT_TOKENS,
    fallback: AutoFallback = "progressive",
) -> AutoChoice:
    """Direct when listing `definitions` (the tools a request may see) costs at most `threshold` tokens, else
    `fallback`."""
    tokens = direct_list_tokens(definitions)
    mode: Literal["direct", "progressive", "code"] = "direct" if definitions and tokens <= threshold else fallback
    return AutoChoice(mode, tokens, threshold, fallback, len(definitions))
