"""Keeping an API key out of what we say: messages, logs and upstream answers, in every form it may take.

An upstream may echo the key it was sent: in an error text, in an object or a list, in a data body
quoting the request URL, in CSV; plainly or transformed (another case, percent-encoded, base64, HTML
entities, JSON `\\u` escapes, or a mix). `redact` masks a key in a message (a short key only as a whole
token, so it never corrupts the words around it); `scrub` walks an upstream answer and says whether the
key was in it (an answer that held the key is never cached). Example::

    redact("Invalid API key: OPERATORKEY77.", "OPERATORKEY77")        # 'Invalid API key: ***.'
    scrub({"Information": {"text": "key operatorkey77"}}, "OPERATORKEY77")  # ({... 'key ***'}, True)
"""

from __future__ import annotations

import base64
import html
import re
from typing import Any

MASK = "***"
# Shorter than this, a "key" cannot be told apart from ordinary text, so it could be neither kept out
# of messages nor used as a secret: it is refused where it comes in.
MIN_KEY_CHARS = 4
# From this length on, a key is masked even inside a longer run of letters and digits: no word holds it.
GLUED_KEY_CHARS = 8
# A string of an upstream answer that holds the key in a form that cannot be cut out precisely.
MASKED_VALUE = "[removed: this text held the API key]"
# `key=value` pairs in a text (a URL an exception quotes), masked whatever the key.
_KEY_IN_URL = re.compile(r"(?i)(?<![a-z0-9])(apikey|api_key|api-key|key|token|access_token)=[^&\s\"']+")


def key_problem(key: str) -> str | None:
    """Why a key cannot be used (too short to be a secret, or not printable ASCII), or None."""
    if len(key) < MIN_KEY_CHARS:
        return f"is {len(key)} characters long; a real API key has at least {MIN_KEY_CHARS}"
    if not (key.isascii() and key.isprintable()) or " " in key:
        return "holds spaces, control characters or non-ASCII characters, which no API key has"
    return None


def redact(text: str, secret: str | None, *, pairs: bool = True) -> str:
    """`text` with the secret masked (in each of its encodings) and, with `pairs`, any key=value pair (a URL an
    exception quotes may carry some other key). A script's own text (code mode) is left its `key=` arguments."""
    if secret:
        text = _mask(text, secret)
    return _KEY_IN_URL.sub(lambda m: f"{m.group(1)}={MASK}", text) if pairs else text


def contains(text: str, secret: str) -> bool:
    """Whether `text` holds the secret in any form we know (see the module docstring)."""
    return _Finder(secret).found_in(text)


def scrub(value: Any, secret: str | None) -> tuple[Any, bool]:
    """`value` (parsed JSON or text) with the secret masked wherever it appears (object keys too), and
    whether it appeared at all. A string holding it in a form that cannot be cut out is replaced whole."""
    if not secret:
        return value, False
    finder = _Finder(secret)
    found = False

    def clean(item: Any) -> Any:
        nonlocal found
        if isinstance(item, str):
            if not finder.found_in(item):
                return item
            found = True
            masked = _mask(item, secret)
            return masked if not finder.found_in(masked) else MASKED_VALUE
        if isinstance(item, dict):
            return {clean(k): clean(v) for k, v in item.items()}
        if isinstance(item, list):
            return [clean(v) for v in item]
        return item

    cleaned = clean(value)  # recursive: the upstream client refuses answers nested deeper than a limit
    return cleaned, found


class _Finder:
    """Looks for one secret in texts; the forms are worked out once."""

    def __init__(self, secret: str) -> None:
        # A short key is only looked for as a whole token, as it is masked (see `_mask`): "demo" in
        # "demonstration" is no echo of the key "demo".
        self.glued = len(secret) >= GLUED_KEY_CHARS
        self.lowered = secret.lower()
        self.pattern = _key_pattern(secret, glued=self.glued)
        self.base64 = _base64_forms(secret)

    def found_in(self, text: str) -> bool:
        if not self.glued:
            return self.pattern.search(text) is not None or any(form in text for form in self.base64)
        if self.lowered in text.lower():
            return True
        # Every encoded form needs one of these characters; most answers (numbers, dates, words) have none.
        if ("%" in text or "&" in text or "\\u" in text) and self.pattern.search(text):
            return True
        return any(form in text for form in self.base64)


def _mask(text: str, secret: str) -> str:
    # A short key only as a whole token ("demo" leaves "demonstration" alone); a key of a real key's length
    # also where it is glued to other text.
    text = _key_pattern(secret, glued=len(secret) >= GLUED_KEY_CHARS).sub(MASK, text)
    for form in _base64_forms(secret):
        text = text.replace(form, MASK)
    return text


def _key_pattern(secret: str, *, glued: bool) -> re.Pattern[str]:
    """The secret with each character in either case and in any encoding an echo may use for it: percent
    (%4f), HTML entities (&#79; &#x4f; &amp;), JSON escapes (a backslash, u, 004f), mixed freely."""
    parts = []
    for char in secret:
        code = ord(char)
        forms = [re.escape(char), f"%{code:02x}", f"&#0*{code};", f"&#x0*{code:x};", rf"\\u{code:04x}"]
        named = html.escape(char)
        if named != char:
            forms.append(re.escape(named))
        if char == " ":
            forms.append(r"\+")  # form encoding
        parts.append("(?:" + "|".join(forms) + ")")
    body = "".join(parts)
    if not glued:
        body = r"(?<![A-Za-z0-9])" + body + r"(?![A-Za-z0-9])"
    return re.compile(body, re.IGNORECASE)


def _base64_forms(secret: str) -> list[str]:
    """The characters of base64 (standard and URL-safe) that only the secret's bytes decide, at each of
    the three alignments it can have inside a longer encoded text."""
    raw = secret.encode("utf-8", "surrogatepass")
    forms: set[str] = set()
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + raw).decode("ascii")
        start = (offset * 4 + 2) // 3  # characters that also depend on the bytes before
        end = ((offset + len(raw)) * 4) // 3  # characters past this also depend on the bytes after
        core = encoded[start:end]
        if len(core) >= 6:
            forms |= {core, core.replace("+", "-").replace("/", "_")}
    return sorted(forms, key=len, reverse=True)
