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
