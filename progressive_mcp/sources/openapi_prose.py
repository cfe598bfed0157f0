"""The prose of an OpenAPI document made fit for tools: HTML turned into Markdown (`markdownify`), texts cut at a
word (`trim`) and to their first sentence (`first_sentence`)."""

from __future__ import annotations

import functools
import re

_FIRST_SENTENCE = re.compile(r"^(.+?[.!?])(\s|$)", re.DOTALL)
_MARKDOWN_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")
# HTML elements that appear in API prose; any other `<word>` is text (a placeholder, Twilio's TwiML `<Dial>`).
_PROSE_ELEMENTS = (
    "a|abbr|b|big|blockquote|br|center|cite|code|dd|del|dfn|div|dl|dt|em|font|h[1-6]|hr|i|img|ins|kbd|li|mark|nobr|ol"
    "|p|pre|q|s|samp|small|span|strike|strong|sub|sup|table|tbody|td|tfoot|th|thead|tr|tt|u|ul|var|wbr"
)
_HTML_TAG = re.compile(rf"</?(?:{_PROSE_ELEMENTS})(?:\s[^<>]*)?/?>", re.IGNORECASE)
_OTHER_TAG = re.compile(rf"<(?!/?(?:{_PROSE_ELEMENTS})(?:\s[^<>]*)?/?>)", re.IGNORECASE)


# A document's shared components repeat their descriptions in every tool that inlines them (DigitalOcean: 19,090
# calls, 5,002 distinct texts).
@functools.lru_cache(maxsize=8192)
def trim(text: str, limit: int) -> str:
    """HTML made Markdown, whitespace collapsed, markdown links reduced to their text, cut at a word boundary with
    "…" (never inside a code span: an unpaired backtick left by the cut goes)."""
    text = " ".join(_MARKDOWN_LINK.sub(r"\1", html_to_markdown(text)).split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0].rstrip(",;:")
    if cut.count("`") % 2:
        cut = cut[::-1].replace("`", "", 1)[::-1].rstrip()
    return cut + "…"


def first_sentence(text: str, limit: int) -> str:
    text = " ".join(_MARKDOWN_LINK.sub(r"\1", html_to_markdown(text)).split()).lstrip("#* ")
    match = _FIRST_SENTENCE.match(text)
    return trim(match.group(1) if match else text, limit)


def html_to_markdown(text: str) -> str:
    """`text` with its HTML (Stripe's `<p>`, `<code>`, `<a href>`; Spotify's `<br/>`) as Markdown, by markdownify;
    text without HTML is returned as it is, and markdownify is imported only for a text that has some. A `<word>`
    that is no HTML element (Twilio's `<Dial>` verb, `<api_key>` placeholders) stays as written."""
    if _HTML_TAG.search(text) is None:
        return text
    return _converted(text)


@functools.lru_cache(maxsize=4096)  # a document repeats the same descriptions in every schema that inlines them
def _converted(text: str) -> str:
    from markdownify import markdownify

    kept = _OTHER_TAG.sub(lambda m: "&lt;" + m.group(0)[1:], text.replace("&", "&amp;"))
    kept = re.sub(r"&amp;(#?\w+;)", r"&\1", kept)  # entities the document wrote stay entities
    return str(
        markdownify(
            kept,
            heading_style="ATX",
            escape_underscores=False,
            escape_asterisks=False,
            escape_misc=False,
            strip=["img"],
        )
    )
