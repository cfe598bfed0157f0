"""Keeping secrets out of everything we say (answers, messages, logs), in every form an echo may give them.

A `Secrets` value holds what must never be shown: the caller's API key (and, for a key given as user:password as
HTTP Basic takes it, each of its two sides, which APIs echo alone: Stripe its user part, Twilio its password) and
the secrets of the servers behind a gateway. It finds each secret in a text, plainly or transformed, and masks it:

- in another case, percent-encoded (also twice: `%2541`), as HTML entities (with or without their `;`), as JSON
  or Python escapes (`\\u0041`, `\\x41`), all mixed freely; with invisible (zero-width, bidi) characters
  anywhere between its characters, or spaced out (1 to 4 spaces or punctuation between every two of them);
- reversed, in ROT13, in hex (also spaced), in base32 or base64 at any alignment (the whole encoded run is
  masked, so no tail such as `***k=` is left);
- as a JSON number, for a secret made of digits;
- for a secret of 16 characters or more that looks generated (letters and digits, no space): any stretch of at
  least half of it, so a secret echoed in two halves is masked too.

A secret shorter than 8 characters is masked only as a whole token, plainly or encoded ("demo" leaves
"demonstration" alone); one shorter than 4 cannot be told apart from text, so it is refused where it comes in.
Every text we produce from foreign text goes through `clean` (mask, then escape control characters, then cut),
never a cut first: a secret cut in half is no longer found. `protect_logs` applies the same step to every log
record. Example::

    secrets = Secrets.of("sk_test_4eC39HqLyjWDarjtT1zdp7dc:")  # the key, and its user part
    secrets.clean("Invalid API Key provided: sk_test_4eC39HqLyjWDarjtT1zdp7dc", limit=40)
    # 'Invalid API Key provided: ***'
    secrets.scrub({"echo": "key cd7pdz1TtjraDWjyLqH93Ce4_tset_ks", "n": 5})  # ({'echo': 'key ***', 'n': 5}, True)
"""

from __future__ import annotations

import base64
import codecs
import contextlib
import contextvars
import functools
import html
import json
import logging
import re
import string
import threading
import traceback
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

MASK = "***"
# Shorter than this, a "key" cannot be told apart from ordinary text, so it could be neither kept out
# of messages nor used as a secret: it is refused where it comes in.
MIN_KEY_CHARS = 4
# From this length on, a secret is masked even inside a longer run of letters and digits (no word holds it), and in
# its transformed forms (reversed, spaced, hex...), which a shorter one would find in ordinary text.
GLUED_KEY_CHARS = 8
# From this length on, a secret that looks generated is also found by any stretch of half its length.
FRAGMENT_KEY_CHARS = 16
# Past this length (no real key is that long; a caller may send one), a secret is looked for in its literal forms
# only: its halves and per-character expressions would cost time and memory in proportion to its square.
MAX_PATTERN_CHARS = 256
# A string that holds a secret in a form that cannot be cut out precisely is replaced whole.
MASKED_VALUE = "[removed: this text held a secret]"
# `key=value` pairs in a text (a URL an exception quotes), masked whatever the key.
_KEY_IN_URL = re.compile(r"(?i)(?<![a-z0-9])(apikey|api_key|api-key|key|token|access_token)=[^&\s\"']+")
# Characters that show nothing: an echo may slip them between a secret's characters anywhere.
_INVISIBLE = "[\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]{0,4}+"
_BASE64 = frozenset(string.ascii_letters + string.digits + "+/-_")
_BASE32 = frozenset(string.ascii_letters + "234567")
_HEX = frozenset(string.hexdigits)
# Terminal control characters, and characters that hide or reorder text (zero-width, bidi, line separators): a
# message or a log line shows them escaped. Tab and newline are kept (a script's error spans lines).
_CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069"
    "\ufeff\ufff9-\ufffb]"
)


def key_problem(key: str) -> str | None:
    """Why a key cannot be used (too short to be a secret, or not printable ASCII), or None."""
    if len(key) < MIN_KEY_CHARS:
        return f"is {len(key)} characters long; a real API key has at least {MIN_KEY_CHARS}"
    if not (key.isascii() and key.isprintable()) or " " in key:
        return "holds spaces, control characters or non-ASCII characters, which no API key has"
    return None


def escape_controls(text: str) -> str:
    """`text` with control, zero-width and bidi characters written as escapes (`\\x1b`, `\\u202e`)."""
    return _CONTROL.sub(_escaped, text)


def clip(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, an ellipsis saying so. Only for text already masked (see `Secrets.clean`)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Secrets:
    """Secret values, and how to find and mask each in every form of the module docstring. Immutable; make one with
    `Secrets.of` (cached: the forms of a set of secrets are worked out once)."""

    __slots__ = (
        "_anchors",
        "_base64",
        "_encoded",
        "_fragments",
        "_hidden",
        "_mask",
        "_needles",
        "_runs",
        "_spaced",
        "_tokens",
        "_triggers",
        "_words",
        "values",
    )

    def __init__(self, values: tuple[str, ...] = ()) -> None:
        """`values`: the secrets themselves, longest first (use `Secrets.of`, which also adds a key's Basic parts)."""
        self.values = values
        forms = [_forms(value) for value in values]
        self._needles = tuple(dict.fromkeys(n for f in forms for n in f.needles))  # lower case, in lower-cased text
        self._base64 = tuple(dict.fromkeys(c for f in forms for c in f.base64))  # case matters
        self._fragments = tuple((f.lowered, w) for f in forms for w in f.fragments)
        self._anchors = tuple(dict.fromkeys(a for f in forms for a in f.anchors))
        self._triggers = tuple(dict.fromkeys(t for f in forms for t in f.triggers))
        self._words = tuple(f.lowered for f in forms if not f.glued)  # short secrets: whole tokens only
        self._runs = tuple((n, alphabet, case) for f in forms for n, alphabet, case in f.runs)
        # One expression per secret to look for: one that starts with a plain character is scanned for it at C
        # speed, which an alternation of several is not (x10 on a MB).
        # Each secret's expressions are compiled once, with its forms (see `_Forms`), and only when a text needs
        # them: a set of secrets made by adding one to others compiles nothing, and most texts need one at most.
        self._tokens = tuple(f for f in forms if f.plain and not f.glued)
        self._spaced = tuple(f for f in forms if f.spaced)
        self._hidden = tuple(f for f in forms if f.plain and f.glued)
        self._encoded = tuple(f for f in forms if f.encoded_find)
        self._mask = tuple(f for f in forms if f.encoded or f.spaced)  # used on the rare texts found

    @staticmethod
    def of(*values: str | None, basic_parts: bool = True) -> Secrets:
        """The secrets among `values` (empty ones left out); with `basic_parts`, a value holding a colon adds its two
        sides (HTTP Basic's user and password, which an API may echo alone) when each is a key's length."""
        return _secrets(tuple(v for v in values if v), basic_parts)

    def __add__(self, other: Secrets) -> Secrets:
        if not other.values:
            return self
        if not self.values:
            return other
        return _secrets((*self.values, *other.values), False)

    def __bool__(self) -> bool:
        return bool(self.values)

    def __repr__(self) -> str:
        return f"Secrets({len(self.values)} values)"  # never the values

    def found_in(self, text: str) -> bool:
        """Whether `text` holds any of the secrets in any form we know."""
        if not self.values or not text:
            return False
        lowered = text.lower()
        if any(n in lowered for n in self._needles) or any(c in text for c in self._base64):
            return True
        if any(a in lowered for a in self._anchors) and any(w in lowered for _, w in self._fragments):
            return True
        if any(w in lowered for w in self._words) and _any_search((f.plain_pattern for f in self._tokens), lowered):
            return True
        if _any_search((f.spaced_pattern for f in self._spaced), lowered):
            return True
        # Invisible characters are never in ASCII text, and most texts hold no encoding of a secret's characters:
        # those forms are only looked for in the texts that could hold them.
        if not text.isascii() and _any_search((f.plain_pattern for f in self._hidden), lowered):
            return True
        if not any(_holds(lowered, t) for t in self._triggers):
            return False
        return _any_search((pattern for f in self._encoded for pattern in f.find_patterns), lowered)

    def mask(self, text: str, *, pairs: bool = True) -> str:
        """`text` with every secret masked and, with `pairs`, any key=value pair (a URL an exception quotes may carry
        some other key; a script's own text keeps its `key=` arguments). Text that still holds a secret once masked
        (a form that cannot be cut out precisely) is replaced whole."""
        if self.found_in(text):
            text = self._masked(text)
            if self.found_in(text):
                return MASKED_VALUE
        return _KEY_IN_URL.sub(lambda m: f"{m.group(1)}={MASK}", text) if pairs else text

    def clean(self, text: str, limit: int | None = None, *, pairs: bool = True) -> str:
        """A foreign text as we may show it (in a message or a log line): secrets masked, then control characters
        escaped, then cut to `limit`, in that order."""
        text = escape_controls(self.mask(text, pairs=pairs))
        return text if limit is None else clip(text, limit)

    def scrub(self, value: Any) -> tuple[Any, bool]:
        """`value` (parsed JSON or text) with the secrets masked wherever they appear (object keys and numbers too),
        and whether any appeared. A string holding one in a form that cannot be cut out is replaced whole."""
        if not self.values:
            return value, False
        if not isinstance(value, str) and not self.found_in(json.dumps(value, ensure_ascii=False, default=str)):
            return value, False  # one look at the whole answer: most hold no secret, and need no walk
        found = False

        def clean(item: Any) -> Any:
            nonlocal found
            if isinstance(item, str):
                if not self.found_in(item):
                    return item
                found = True
                return self.mask(item, pairs=False)
            if isinstance(item, dict):
                return {clean(k): clean(v) for k, v in item.items()}
            if isinstance(item, list):
                return [clean(v) for v in item]
            if isinstance(item, int | float) and not isinstance(item, bool) and self.found_in(json.dumps(item)):
                found = True  # a numeric secret, sent back as a JSON number
                return MASK
            return item

        cleaned = clean(value)  # recursive: upstream answers and server results are bounded in depth before this
        return cleaned, found

    @contextlib.contextmanager
    def in_logs(self) -> Iterator[None]:
        """Mask these secrets too in the log records made in this context (this thread, and what it hands work to
        with its context, as anyio's worker threads get it); see `protect_logs`."""
        token = _CALL_SECRETS.set((_CALL_SECRETS.get() or _NO_SECRETS) + self)
        try:
            yield
        finally:
            _CALL_SECRETS.reset(token)

    def _masked(self, text: str) -> str:
        spans = [m.span() for f in self._mask for m in f.mask_pattern.finditer(text) if m.end() > m.start()]
        lowered = text.lower()
        for needle, alphabet, case in self._runs:
            for start in _occurrences(text, lowered, needle, case=case):
                spans.append(_run(text, start, start + len(needle), alphabet))
        for secret, window in self._fragments:
            for start in _occurrences(text, lowered, window, case=False):
                spans.append(_stretch(text, start, start + len(window), secret, secret.find(window)))
        pieces, at = [], 0
        for start, end in sorted(spans):
            if start >= at:
                pieces += [text[at:start], MASK]
                at = end
            elif end > at:  # overlaps the span masked last: that mask covers it
                at = end
        pieces.append(text[at:])
        return "".join(pieces)


def redact(text: str, secret: str | None, *, pairs: bool = True) -> str:
    """`text` with `secret` (and each side of a user:password) masked; see `Secrets.mask`."""
    return Secrets.of(secret).mask(text, pairs=pairs)


def contains(text: str, secret: str) -> bool:
    """Whether `text` holds the secret in any form we know (see the module docstring)."""
    return Secrets.of(secret).found_in(text)


def scrub(value: Any, secret: str | None) -> tuple[Any, bool]:
    """`value` with `secret` masked wherever it appears, and whether it appeared; see `Secrets.scrub`."""
    return Secrets.of(secret).scrub(value)


# --- the forms of one secret --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Forms:
    """How one secret may appear; the regular expressions' sources are joined for a set of secrets."""

    lowered: str
    glued: bool
    needles: tuple[str, ...]  # literal forms, lower case, looked for in lower-cased text
    base64: tuple[str, ...]  # base64 cores, case as encoded
    runs: tuple[tuple[str, frozenset[str], bool], ...]  # (a literal form, its encoded run's alphabet, case matters)
    fragments: tuple[str, ...]  # stretches of half the secret (lower case)
    anchors: tuple[str, ...]  # stretches of a quarter: every stretch of half holds one (a cheap first look)
    triggers: tuple[str, ...]  # what every encoded form holds one of (lower case)
    plain: str  # the secret in lower case (invisible characters between its own when glued; a whole token when not)
    spaced: str  # the same with 1-4 separators between each two characters (glued only)
    encoded: str  # as `plain`, with each character in any of its encodings
    # `encoded` to look for, split in two by how it starts (plainly, or encoded: with `%`, `&` or a backslash), so
    # that each starts with a character the regular expression engine can skip to at C speed.
    encoded_find: tuple[str, ...]

    # The expressions compiled, each once per secret (the forms are cached by secret).
    @functools.cached_property
    def plain_pattern(self) -> re.Pattern[str]:
        return re.compile(self.plain)

    @functools.cached_property
    def spaced_pattern(self) -> re.Pattern[str]:
        return re.compile(self.spaced)

    @functools.cached_property
    def find_patterns(self) -> tuple[re.Pattern[str], ...]:
        return tuple(re.compile(source) for source in self.encoded_find)

    @functools.cached_property
    def mask_pattern(self) -> re.Pattern[str]:
        return re.compile("|".join(source for source in (self.encoded, self.spaced) if source), re.IGNORECASE)


def _secrets(values: tuple[str, ...], basic_parts: bool) -> Secrets:
    # Only sets of secrets of a real key's length are kept: a caller may send a megabyte of "key".
    if all(len(v) <= MAX_PATTERN_CHARS for v in values):
        return _cached_secrets(values, basic_parts)
    return _secrets_of(values, basic_parts)


def _secrets_of(values: tuple[str, ...], basic_parts: bool) -> Secrets:
    kept: list[str] = []
    for value in values:
        parts = value.split(":", 1) if basic_parts and ":" in value else []
        if parts and all(len(p) >= GLUED_KEY_CHARS for p in parts):
            whole = []  # every form of the whole holds a form of each part (base64 at any alignment too)
        else:
            whole = [value]
            parts = [p for p in parts if len(p) >= MIN_KEY_CHARS]  # a shorter part is no secret of its own
        kept += [p for p in (*whole, *parts) if p not in kept]
    # Longest first: a longer secret is masked before a part of it.
    return Secrets(tuple(sorted(kept, key=len, reverse=True)))


_cached_secrets = functools.lru_cache(maxsize=512)(_secrets_of)


def _forms(secret: str) -> _Forms:
    if len(secret) > MAX_PATTERN_CHARS:  # no key is this long: its literal forms only, and not kept
        lowered = secret.lower()
        cores = _base64_cores(secret.encode("utf-8", "surrogatepass"))
        runs = ((lowered, frozenset[str](), False), *((core, _BASE64, True) for core in cores))
        return _Forms(lowered, True, (lowered,), tuple(cores), runs, (), (), (), "", "", "", ())
    return _cached_forms(secret)


@functools.lru_cache(maxsize=512)
def _cached_forms(secret: str) -> _Forms:
    lowered = secret.lower()
    raw = secret.encode("utf-8", "surrogatepass")
    base64_cores = _base64_cores(raw)
    runs = [(core, _BASE64, True) for core in base64_cores]
    needles: list[str] = []
    fragments: list[str] = []
    anchors: list[str] = []
    plain = [re.escape(c) for c in lowered]
    encoded = [f"(?:{'|'.join(_character(c))})" for c in secret]
    glued = len(secret) >= GLUED_KEY_CHARS
    if glued:  # a shorter secret's transformed forms would be found in ordinary text
        octets = [f"{b:02x}" for b in raw]
        literal = [lowered[::-1], codecs.encode(lowered, "rot13"), json.dumps(secret)[1:-1].lower()]
        literal.append(" ".join(octets))
        runs += [(form, frozenset(), False) for form in literal]
        runs += [(raw.hex(), _HEX, False), *((core, _BASE32, False) for core in _base32_cores(raw))]
        needles = [lowered, *literal, *(form.lower() for form, alphabet, _ in runs if alphabet is not _BASE64)]
        if _looks_generated(secret):
            half = max(GLUED_KEY_CHARS, len(secret) // 2)
            windows = (lowered[i : i + half] for i in range(len(secret) - half + 1))
            fragments = list(dict.fromkeys(w for w in windows if _has_letter_and_digit(w)))
            quarter = half // 2
            anchors = [lowered[i : i + quarter] for i in range(0, len(secret) - quarter + 1, quarter)]
        plain_source, encoded_source = _INVISIBLE.join(plain), _INVISIBLE.join(encoded)
        rest = _INVISIBLE + _INVISIBLE.join(encoded[1:])
        first = _character(secret[0])
        encoded_find: tuple[str, ...] = (first[0] + rest, f"(?:{'|'.join(first[1:])}){rest}")
        spaced_source = "".join(p + _separator(n) for p, n in zip(plain, [*secret[1:], ""], strict=True))
    else:
        plain_source, encoded_source = _whole_token("".join(plain)), _whole_token("".join(encoded))
        spaced_source = ""
        encoded_find = (encoded_source,)
    return _Forms(
        lowered=lowered,
        glued=glued,
        needles=tuple(dict.fromkeys(needles)),
        base64=tuple(base64_cores),
        runs=tuple(runs),
        fragments=tuple(fragments),
        anchors=tuple(dict.fromkeys(anchors)) if fragments else (),
        triggers=tuple(_triggers(secret)),
        plain=plain_source,
        spaced=spaced_source,
        encoded=encoded_source,
        encoded_find=encoded_find,
    )


def _triggers(secret: str) -> list[str]:
    """What every encoded form of `secret` holds at least one of: `%`, `&#`, `\\u` or `\\x`, or the named entity
    or JSON escape of one of its characters (a plain `&` between URL parameters is none of them)."""
    found = ["%", "&#", "\\u", "\\x"]
    for char in dict.fromkeys(secret):
        named = html.escape(char)
        if named != char:
            found.append(named[:-1].lower())
        if char in '"\\/':
            found.append("\\" + char)
    return found


def _separator(following: str) -> str:
    """What stands between two characters of a spaced-out secret (nothing after its last): 1 to 4 spaces,
    punctuation or invisible characters, taken possessively (no backtracking), never the character that follows,
    which must match as itself. At least one in every gap: a secret made of words ("ratelimited") must not be found
    in "rate_limited"."""
    if not following:
        return ""
    not_it = f"(?!{re.escape(following.lower())})" if not following.isalnum() else ""
    return f"(?:{not_it}[\\W_]){{1,4}}+"


def _character(char: str) -> list[str]:
    """A character's forms as regular expressions in lower case: itself, percent-encoded (each UTF-8 byte, also
    encoded twice), as HTML entities (the `;` optional, as browsers read them), as JSON and Python escapes."""
    code = ord(char)
    forms = [re.escape(char.lower())]
    forms.append("".join(f"%(?:25)*{b:02x}" for b in char.encode("utf-8", "surrogatepass")))
    forms += [f"&#0*{code};?", f"&#x0*{code:x};?", rf"\\u{code:04x}"]
    if code < 0x100:
        forms.append(rf"\\x{code:02x}")
    named = html.escape(char)
    if named != char:
        forms.append(re.escape(named[:-1]) + ";?")
    if char in '"\\/':
        forms.append(re.escape("\\" + char))  # JSON's short escapes
    if char == " ":
        forms.append(r"\+")  # form encoding
    return forms


def _whole_token(source: str) -> str:
    return rf"(?<![a-z0-9])(?:{source})(?![a-z0-9])"


def _holds(text: str, needle: str) -> bool:
    """`needle in text`, faster for a needle that starts with a rare character (a one-character look is C's
    memchr; a longer needle's is not)."""
    return needle[0] in text and needle in text


def _any_search(patterns: Iterable[re.Pattern[str]], text: str) -> bool:
    return any(pattern.search(text) for pattern in patterns)


def _looks_generated(secret: str) -> bool:
    return len(secret) >= FRAGMENT_KEY_CHARS and not any(c.isspace() for c in secret) and _has_letter_and_digit(secret)


def _has_letter_and_digit(text: str) -> bool:
    return any(c.isalpha() for c in text) and any(c.isdigit() for c in text)


def _base64_cores(raw: bytes) -> list[str]:
    """The characters of base64 (standard and URL-safe) that only the secret's bytes decide, at each of
    the three alignments it can have inside a longer encoded text."""
    forms: set[str] = set()
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + raw).decode("ascii")
        start = (offset * 4 + 2) // 3  # characters that also depend on the bytes before
        end = ((offset + len(raw)) * 4) // 3  # characters past this also depend on the bytes after
        core = encoded[start:end]
        if len(core) >= 6:
            forms |= {core, core.replace("+", "-").replace("/", "_")}
    return sorted(forms, key=len, reverse=True)


def _base32_cores(raw: bytes) -> list[str]:
    """As `_base64_cores`, for base32 (5 bytes make 8 characters, so 5 alignments)."""
    forms: set[str] = set()
    for offset in range(5):
        encoded = base64.b32encode(b"\0" * offset + raw).decode("ascii")
        start = -(-offset * 8 // 5)
        end = ((offset + len(raw)) * 8) // 5
        core = encoded[start:end]
        if len(core) >= 8:
            forms.add(core)
    return sorted(forms, key=len, reverse=True)


def _occurrences(text: str, lowered: str, needle: str, *, case: bool) -> Iterator[int]:
    """Where `needle` starts in `text` (in any case unless `case`)."""
    if not case and len(lowered) != len(text):  # a character whose lower case is longer: offsets differ
        yield from (m.start() for m in re.finditer(re.escape(needle), text, re.IGNORECASE))
        return
    haystack, needle = (text, needle) if case else (lowered, needle.lower())
    at = haystack.find(needle)
    while at >= 0:
        yield at
        at = haystack.find(needle, at + 1)


def _run(text: str, start: int, end: int, alphabet: frozenset[str]) -> tuple[int, int]:
    """The span of the encoded run around text[start:end]: the run's other characters encode the secret's
    neighbours and its own last bits (a base64 tail such as `k=`), so the whole run goes."""
    if not alphabet:
        return start, end
    while start > 0 and text[start - 1] in alphabet:
        start -= 1
    while end < len(text) and text[end] in alphabet:
        end += 1
    while end < len(text) and text[end] == "=":
        end += 1
    return start, end


def _stretch(text: str, start: int, end: int, secret: str, at: int) -> tuple[int, int]:
    """The span of the secret's stretch around text[start:end], which matched the secret from index `at`."""
    before, after = at, at + (end - start)
    while start > 0 and before > 0 and text[start - 1].lower() == secret[before - 1]:
        start, before = start - 1, before - 1
    while end < len(text) and after < len(secret) and text[end].lower() == secret[after]:
        end, after = end + 1, after + 1
    return start, end


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


# --- logs ---------------------------------------------------------------------------------------------------------

_NO_SECRETS = Secrets()
_CALL_SECRETS: contextvars.ContextVar[Secrets | None] = contextvars.ContextVar("call_secrets", default=None)
_logs_lock = threading.Lock()
_installed: list[Callable[..., logging.LogRecord]] = []  # the record factory we wrapped, once installed
# The secrets each live object that may log them has registered (a surface: its key and its servers'), so a secret
# is looked for while something that holds it lives, and a process that makes many surfaces does not gather theirs.
_holders: weakref.WeakKeyDictionary[Any, Secrets] = weakref.WeakKeyDictionary()
_held: Secrets | None = None  # the union of `_holders`' secrets, made again after a holder came or went


def protect_logs(secrets: Secrets, holder: Any) -> None:
    """While `holder` lives, mask `secrets` (with those of other holders, and the current call's:
    `Secrets.in_logs`) in every log record this process makes, whoever logs it, and escape control characters
    in every record."""
    global _held
    with _logs_lock:
        if secrets:
            previous = _holders.get(holder)
            if previous is None:
                weakref.finalize(holder, _holder_gone)
            _holders[holder] = secrets if previous is None else previous + secrets
            _held = None
        if not _installed:
            _installed.append(logging.getLogRecordFactory())
            logging.setLogRecordFactory(_protected_record)


def _holder_gone() -> None:
    global _held
    _held = None  # a plain store, safe from a finalizer run on any thread


def _logged_secrets() -> Secrets:
    global _held
    held = _held
    if held is None:
        with _logs_lock:
            held = _NO_SECRETS
            for secrets in list(_holders.values()):
                held = held + secrets
            _held = held
    return held


def _protected_record(*args: Any, **kwargs: Any) -> logging.LogRecord:
    record = _installed[0](*args, **kwargs)
    secrets = _logged_secrets() + (_CALL_SECRETS.get() or _NO_SECRETS)
    if not isinstance(record.msg, str):  # a structured record (a dict): its fields are ours
        return record
    try:
        text = record.getMessage()
    except Exception:  # a bad format string: logging reports it when the record is emitted
        return record
    if record.exc_info and record.exc_info[1] is not None:
        # A traceback quotes exception texts: masked here, with the message, since a formatter prints it later.
        text += "\n" + "".join(traceback.format_exception(record.exc_info[1])).rstrip()
        record.exc_info, record.exc_text = None, None
    cleaned = secrets.clean(text)
    if cleaned != record.msg or record.args:
        record.msg, record.args = cleaned, None
    return record
