"""Keys kept out of messages and answers (progressive_mcp.redaction), and what the surface does with an
answer that echoed one: mask it and never cache it."""

from __future__ import annotations

import base64
import html
import json
import logging
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from fixtures.servers.echo_forms import ALL_FORMS, SPLIT, echo, leaks

from progressive_mcp.calls.cache import SERVER, MemoryCache
from progressive_mcp.calls.upstream import UpstreamClient, UpstreamRequest, UpstreamResponse, error_text
from progressive_mcp.redaction import (
    MASK,
    Secrets,
    contains,
    escape_controls,
    key_problem,
    protect_logs,
    redact,
    scrub,
)
from progressive_mcp.sources import load_catalog
from progressive_mcp.surfaces.surface import CallContext, Surface

OPERATOR_KEY = "OPERATORKEY77"
LASTFM_SPEC = Path(__file__).resolve().parent / "fixtures" / "lastfm" / "lastfm.yaml"


def every_form(key: str) -> list[str]:
    """The key as an echo may carry it: plain, lower case, percent-encoded (both cases), base64, HTML entities."""
    raw = key.encode()
    return [
        key,
        key.lower(),
        quote(key, safe=""),
        "".join(f"%{b:02x}" for b in raw),
        "".join(f"%{b:02X}" for b in raw),
        base64.b64encode(raw).decode(),
        base64.b64encode(b"apikey=" + raw).decode(),
        "".join(f"&#{ord(c)};" for c in key),
        "".join(f"&#x{ord(c):x};" for c in key),
    ]


# --- messages ------------------------------------------------------------------------------------


def test_a_short_key_is_masked_as_a_whole_token_only() -> None:
    assert redact("Unknown tool 'TOOL_LIST'.", "k") == "Unknown tool 'TOOL_LIST'."
    assert redact("your key k is wrong", "k") == f"your key {MASK} is wrong"
    assert redact("a demonstration of the demo key", "demo") == f"a demonstration of the {MASK} key"


def test_a_real_key_is_masked_even_glued_to_other_text() -> None:
    assert OPERATOR_KEY not in redact(f"token=abc;x{OPERATOR_KEY}y", OPERATOR_KEY)


def test_key_value_pairs_are_masked_but_words_ending_in_key_are_not() -> None:
    assert redact("GET /q?function=X&apikey=abcdef1234&s=1", None) == f"GET /q?function=X&apikey={MASK}&s=1"
    assert redact("monkey=3", None) == "monkey=3"


@pytest.mark.parametrize("form", range(9))
def test_every_form_of_the_key_is_found_and_masked_in_a_message(form: int) -> None:
    text = f"Invalid API key: {every_form(OPERATOR_KEY)[form]}."
    assert contains(text, OPERATOR_KEY)
    assert not contains(redact(text, OPERATOR_KEY), OPERATOR_KEY)


def test_keys_too_short_or_not_ascii_are_refused() -> None:
    assert key_problem("k") is not None and "at least" in str(key_problem("k"))
    assert key_problem("good-key-1234") is None
    assert key_problem("demo") is None
    assert key_problem("bad\x00key1") is not None
    assert key_problem("\ud800abcdef") is not None
    assert key_problem("has space1") is not None


def test_redact_survives_a_lone_surrogate_in_the_key() -> None:
    assert "\ud800" not in redact("key \ud800abcdefgh here", "\ud800abcdefgh")


# --- the forms of issue 27 (finding 12) -----------------------------------------------------------

GENERATED_KEY = "9f8e7d6c5b4a39281706f5e4d3c2b1a0"  # a Twilio auth token's shape


@pytest.mark.parametrize("form", ALL_FORMS)
def test_every_echo_form_of_a_generated_key_is_found_and_masked(form: str) -> None:
    text = f"Invalid credentials {echo(GENERATED_KEY, form, 3)} (request 42)."
    assert contains(text, GENERATED_KEY)
    masked = redact(text, GENERATED_KEY)
    assert leaks(masked, GENERATED_KEY, form) == [], masked
    assert masked.endswith("(request 42).") and masked.startswith("Invalid credentials xxx")


@pytest.mark.parametrize("form", [f for f in ALL_FORMS if f != SPLIT])
def test_every_echo_form_of_a_word_like_key_is_found_and_masked(form: str) -> None:
    """A key that does not look generated has every form but the halves (which would be words)."""
    masked = redact(f"key: {echo(OPERATOR_KEY, form)}.", OPERATOR_KEY)
    assert leaks(masked, OPERATOR_KEY, form) == [], masked


def test_each_side_of_a_basic_key_is_masked_alone() -> None:
    stripe = "sk_test_4eC39HqLyjWDarjtT1zdp7dc:"  # the user part is the secret
    twilio = "AC5f2b8c9d0e1a4b7c3d6e9f0a1b2c3d4e:" + GENERATED_KEY
    assert redact("Invalid API Key provided: sk_test_4eC39HqLyjWDarjtT1zdp7dc", stripe).endswith(f": {MASK}")
    assert redact(f"token {GENERATED_KEY} expired", twilio) == f"token {MASK} expired"
    assert redact("account AC5f2b8c9d0e1a4b7c3d6e9f0a1b2c3d4e", twilio) == f"account {MASK}"
    # A side shorter than a key is no secret of its own ("me"), the other side is.
    assert redact("user me, password 90210773412", "me:90210773412") == f"user me, password {MASK}"


def test_a_base64_echo_is_masked_with_its_whole_run_and_no_tail() -> None:
    key = "AC5f2b8c9d0e1a4b7c3d6e9f0a1b2c3d4e:" + GENERATED_KEY
    for header in (base64.b64encode(key.encode()).decode(), base64.urlsafe_b64encode(b"x" + key.encode()).decode()):
        assert redact(f"Authorization: Basic {header}; retry", key) == f"Authorization: Basic {MASK}; retry"


def test_a_numeric_key_echoed_as_a_json_number_is_masked_and_reported() -> None:
    cleaned, found = scrub({"account": 90210773412, "count": 3, "ratio": 0.5}, "90210773412")
    assert found and cleaned == {"account": MASK, "count": 3, "ratio": 0.5}
    assert scrub({"count": 902107734}, "90210773412") == ({"count": 902107734}, False)


def test_short_keys_keep_their_whole_token_guarantee_in_every_new_form() -> None:
    text = "a demonstration: omed, d e m o, 64656d6f, qrzb"  # the transformed forms of a short key are words
    assert redact(text, "demo") == text
    assert redact("key &#100&#101&#109&#111 and %2564emo", "demo") == f"key {MASK} and {MASK}"


def test_a_text_is_masked_before_it_is_cut() -> None:
    text = "x" * 280 + " " + GENERATED_KEY + " tail"
    for limit in range(270, 320, 3):
        shown = Secrets.of(GENERATED_KEY).clean(text, limit)
        assert len(shown) <= limit and not any(GENERATED_KEY[:n] in shown for n in range(6, 33)), shown
    body = json.dumps({"message": "Bad value " + "x" * 280 + " for " + GENERATED_KEY + " " + "y" * 50}).encode()
    said = error_text(body, secrets=Secrets.of(GENERATED_KEY))  # cut at 300 characters, 15 into the key
    assert f" for {MASK}" in said and said.endswith("…") and GENERATED_KEY[:6] not in said


def test_control_and_bidi_characters_are_escaped() -> None:
    line = "\x1b[2K\x1b[1G\x1b[32mINFO: all servers healthy\u202e\u200b\r\x00"
    assert escape_controls(line) == "\\x1b[2K\\x1b[1G\\x1b[32mINFO: all servers healthy\\u202e\\u200b\\x0d\\x00"
    assert escape_controls("two\nlines\tand a tab, café ✓") == "two\nlines\tand a tab, café ✓"


def test_every_log_record_is_masked_and_escaped(caplog: pytest.LogCaptureFixture) -> None:
    process_secret, call_secret = "pr0cess-S3cret-77aa", "ca11er-S3cret-88bb"
    holder = type("Holder", (), {})()  # what holds the secret: a surface, a server pool
    protect_logs(Secrets.of(process_secret), holder)
    log = logging.getLogger("some.library")
    with caplog.at_level(logging.INFO):
        log.info("process %s", process_secret[::-1])
        with Secrets.of(call_secret).in_logs():
            log.warning("call %s \x1b[31m", call_secret.upper())
            try:
                raise ValueError(f"failed with {call_secret}")
            except ValueError:
                log.exception("it failed")
        log.info("after the call %s", call_secret)  # no longer this call's: not masked
    assert process_secret[::-1] not in caplog.text and call_secret.upper() not in caplog.text
    assert "failed with" in caplog.text and f"failed with {call_secret}" not in caplog.text
    assert "\x1b" not in caplog.text and "\\x1b[31m" in caplog.text
    assert f"after the call {call_secret}" in caplog.text
    caplog.clear()
    del holder  # its secrets go with it: a process that makes many surfaces does not keep every one's
    with caplog.at_level(logging.INFO):
        log.info("gone %s", process_secret)
    assert f"gone {process_secret}" in caplog.text


# --- answers -------------------------------------------------------------------------------------


def test_scrub_masks_the_key_in_every_shape_of_an_answer() -> None:
    forms = every_form(OPERATOR_KEY)
    answer = {
        "Information": {"text": f"key {forms[1]} is over its limit"},
        "Error Message": [f"bad key {forms[0]}"],
        forms[0]: "as an object key",
        "nested": [{"deep": [forms[5], forms[7]]}],
        "request": f"https://example.com/query?function=X&apikey={forms[3]}",
        "n": 5,
    }
    cleaned, found = scrub(answer, OPERATOR_KEY)
    assert found
    assert not contains(json.dumps(cleaned), OPERATOR_KEY)
    assert cleaned["n"] == 5
    assert scrub({"price": "12.5"}, OPERATOR_KEY) == ({"price": "12.5"}, False)
    csv_text = f"timestamp,open\n2026-11-20,{OPERATOR_KEY}\n"
    cleaned_csv, found_csv = scrub(csv_text, OPERATOR_KEY)
    assert found_csv and OPERATOR_KEY not in cleaned_csv


# --- the surface: masked, never cached, never shared ---------------------------------------------


class EchoTransport:
    """An upstream that answers every request with one fixed body (which may echo the key)."""

    def __init__(self, body: bytes, content_type: str = "application/json") -> None:
        self.body = body
        self.content_type = content_type
        self.sent: list[UpstreamRequest] = []

    def send(self, request: UpstreamRequest) -> UpstreamResponse:
        self.sent.append(request)
        return UpstreamResponse(200, {"content-type": self.content_type}, self.body)


ECHOES: dict[str, tuple[str, str]] = {
    "notice object": (json.dumps({"Information": {"text": f"limit for {OPERATOR_KEY}"}}), "application/json"),
    "error list": (json.dumps({"Error Message": [f"apikey {OPERATOR_KEY} invalid"]}), "application/json"),
    "message": (json.dumps({"message": f"Invalid API key {OPERATOR_KEY.lower()}"}), "application/json"),
    "data quoting the URL": (
        json.dumps({"Global Quote": {"01. symbol": "IBM", "url": f"/query?symbol=IBM&apikey={OPERATOR_KEY}"}}),
        "application/json",
    ),
    "csv": (f"symbol,note\nIBM,{base64.b64encode(OPERATOR_KEY.encode()).decode()}\n", "text/csv"),
    "html entities": (json.dumps({"Global Quote": {"x": html.escape(f"k&{OPERATOR_KEY}")}}), "application/json"),
    "json escapes": (
        '{"Global Quote": {"x": "' + "".join(f"\\u{ord(c):04x}" for c in OPERATOR_KEY) + '"}}',
        "application/json",
    ),
}


@pytest.mark.parametrize("case", list(ECHOES))
def test_an_answer_echoing_the_operator_key_is_masked_and_never_cached(case: str) -> None:
    body, content_type = ECHOES[case]
    catalog = load_catalog()
    transport = EchoTransport(body.encode(), content_type)
    surface = Surface(
        catalog,
        upstream=UpstreamClient(catalog.api, transport=transport, retries=0),
        cache=MemoryCache(),
    )
    ctx = CallContext(api_key=OPERATOR_KEY, entitlement=SERVER)  # server-key mode: one key behind every caller
    arguments: dict[str, Any] = {"symbol": "IBM"}
    if content_type == "text/csv":
        arguments["datatype"] = "csv"
    for _ in range(2):
        result = surface.call_tool_wire("TOOL_CALL", {"tool_name": "GLOBAL_QUOTE", "arguments": arguments}, ctx)
        wire = json.dumps(result)
        assert not contains(wire, OPERATOR_KEY), wire
        assert not contains(result["content"][0]["text"], OPERATOR_KEY)
        assert "cached_at" not in result["structuredContent"]
    assert len(transport.sent) == 2, "an answer that held the key must not be served from the cache"


def test_an_error_answer_with_a_numeric_code_is_an_error_and_never_cached() -> None:
    catalog = load_catalog(LASTFM_SPEC)
    body = json.dumps({"error": 6, "message": "The artist you supplied could not be found"}).encode()
    transport = EchoTransport(body)
    surface = Surface(
        catalog, upstream=UpstreamClient(catalog.api, transport=transport, retries=0), cache=MemoryCache()
    )
    call = {"tool_name": "artist.getInfo", "arguments": {"artist": "Nobody At All"}}
    for _ in range(2):
        result = surface.call_tool_wire("TOOL_CALL", call, CallContext(api_key="lastfm-key-123"))
        assert result["isError"] is True
        assert "could not be found" in result["structuredContent"]["error"]["message"]
        assert "cached_at" not in json.dumps(result)
    assert len(transport.sent) == 2
