"""Settings from the environment: every bad value is one clear ConfigError naming the variable."""

from __future__ import annotations

import pytest

from progressive_mcp.errors import ConfigError
from progressive_mcp.settings import Settings


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "0", "-1", "901", "soon"])
def test_upstream_timeout_must_be_a_sensible_number_of_seconds(value: str) -> None:
    with pytest.raises(ConfigError, match="PMCP_UPSTREAM_TIMEOUT_S"):
        Settings.from_env({"PMCP_UPSTREAM_TIMEOUT_S": value})


@pytest.mark.parametrize("value", ["nan", "inf", "0"])
def test_deadline_must_be_a_sensible_number_of_seconds(value: str) -> None:
    with pytest.raises(ConfigError, match="PMCP_DEADLINE_S"):
        Settings.from_env({"PMCP_DEADLINE_S": value})


def test_good_numbers_are_taken() -> None:
    settings = Settings.from_env({"PMCP_UPSTREAM_TIMEOUT_S": "7.5", "PMCP_DEADLINE_S": "12"})
    assert (settings.upstream_timeout_s, settings.deadline_s) == (7.5, 12.0)


GOOD_TOKEN = "x8Qm2vT0r-Lk5nW7pZa3Yc1E"  # 24 characters: the shortest endpoint token taken


@pytest.mark.parametrize(
    ("tokens", "which"),
    [("short-token-1", "token 1 of 1"), (f"{GOOD_TOKEN},tok-B", "token 2 of 2"), (GOOD_TOKEN[:-1], "token 1 of 1")],
)
def test_endpoint_tokens_shorter_than_the_minimum_are_refused_without_being_shown(tokens: str, which: str) -> None:
    for mode in ("server-key", "passthrough"):  # a token set is meant to be used, whatever the mode today
        with pytest.raises(ConfigError) as caught:
            Settings.from_env({"PMCP_ENDPOINT_TOKENS": tokens, "PMCP_AUTH_MODE": mode})
        message = str(caught.value)
        assert "PMCP_ENDPOINT_TOKENS" in message and which in message and "at least 24 characters" in message
        assert not any(token in message for token in tokens.split(","))


def test_endpoint_tokens_of_the_minimum_length_are_taken() -> None:
    settings = Settings.from_env(
        {"PMCP_ENDPOINT_TOKENS": f"{GOOD_TOKEN}, {GOOD_TOKEN}-next", "PMCP_AUTH_MODE": "server-key"}
    )
    assert settings.endpoint_tokens == (GOOD_TOKEN, f"{GOOD_TOKEN}-next")
