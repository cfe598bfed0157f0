"""Settings from environment variables and command-line flags (flags win), validated once at start.

Example::

    settings = Settings.from_env(os.environ, mode="direct")
    settings.mode        # 'direct'
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from progressive_mcp.calls.sandbox import ScriptLimits
from progressive_mcp.errors import ConfigError
from progressive_mcp.policies import PolicySet, load_policies
from progressive_mcp.schema_compact import SCHEMA_VIEW_ENV, SCHEMA_VIEWS, schema_view
from progressive_mcp.search.semantic import semantic_enabled
from progressive_mcp.sources import default_spec_path
from progressive_mcp.surfaces.auto import (
    AUTO_DIRECT_TOKENS_ENV,
    AUTO_FALLBACK_ENV,
    AUTO_FALLBACKS,
    DEFAULT_AUTO_DIRECT_TOKENS,
    AutoFallback,
)
from progressive_mcp.upstream_auth import AUTH_ENV, KEY_FORMAT_ENV, check_key_format, parse_choice

# `auto` is direct or progressive (or code) by the cost of the tools a request may see (surfaces/auto.py).
Mode = Literal["progressive", "direct", "hybrid", "code", "auto"]
MODES: tuple[Mode, ...] = ("progressive", "direct", "hybrid", "code", "auto")
AuthMode = Literal["passthrough", "server-key", "oauth"]
AUTH_MODES: tuple[AuthMode, ...] = ("passthrough", "server-key", "oauth")
UPSTREAM_KEY_ENV = "PMCP_UPSTREAM_KEY"  # the upstream key of any catalog (its spec may name another variable too)
DEFAULT_MAX_RESULT_TOKENS = 8000
DEFAULT_MAX_BODY_BYTES = 1_048_576
DEFAULT_LIST_TTL_S = 3600
DEFAULT_DEADLINE_S = 25.0  # one tool call's whole upstream work; below the stack's 30 s Lambda timeout
DEFAULT_MAX_UPSTREAM_BYTES = 16 * 1024 * 1024
# An endpoint bearer token is the only thing between a caller and the server's upstream key: long enough to be
# out of guessing reach (24 random base64url characters are 144 bits). Tokens this server makes are longer:
# `serve --sample-upstream`'s 32, the CDK stack's generated secret 48.
MIN_ENDPOINT_TOKEN_CHARS = 24
MAX_AUTO_DIRECT_TOKENS = 1_000_000  # no model's context window holds more


@dataclass(frozen=True)
class Settings:
    """Everything configurable. `api_key` is never shown by repr()."""

    spec_path: Path = field(default_factory=default_spec_path)
    mode: Mode = "progressive"
    categories: frozenset[str] | None = None
    # `auto` mode: the most tokens a direct tools/list may cost, and the surface past it.
    auto_direct_tokens: int = DEFAULT_AUTO_DIRECT_TOKENS
    auto_fallback: AutoFallback = "progressive"
    # Which of the source's operations become tools (terms of progressive_mcp.sources.openapi.Filter).
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    vocabulary_path: Path | None = None  # a search vocabulary for the catalog, in place of any its spec names
    # The gateway: the mcpServers JSON whose servers' tools are the catalog, and the tool store's file.
    servers_path: Path | None = None
    index_path: Path | None = None  # None: under the user's cache directory, one per servers file
    # Whether the spec was named (PMCP_SPEC, --spec) rather than the default: with servers, only a named spec
    # joins them in the catalog.
    spec_chosen: bool = False
    upstream_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    # How the upstream key is sent (progressive_mcp.upstream_auth): which scheme, and the value made of the key.
    upstream_auth: str | None = None  # PMCP_UPSTREAM_AUTH: bearer, basic or apikey:NAME
    key_format: str | None = None  # PMCP_UPSTREAM_KEY_FORMAT, e.g. "Token token={key}"
    max_result_tokens: int = DEFAULT_MAX_RESULT_TOKENS
    upstream_timeout_s: float = 20.0
    upstream_retries: int = 2
    deadline_s: float = DEFAULT_DEADLINE_S  # all attempts, waits and body reading of one tool call
    max_upstream_bytes: int = DEFAULT_MAX_UPSTREAM_BYTES  # a larger upstream answer is refused unread
    allowed_origins: tuple[str, ...] = ()
    cache: bool = True  # keep upstream answers while fresh (in memory; Lambda: DynamoDB when configured)
    # The HTTP endpoint only:
    auth_mode: AuthMode = "passthrough"
    endpoint_tokens: tuple[str, ...] = field(default=(), repr=False)
    # oauth mode (progressive_mcp.oauth): who issues access tokens, the resource they must name (None: the URL
    # the request came to), and the scopes every token must carry.
    oauth_issuer: str | None = None
    oauth_audience: str | None = None
    oauth_scopes: tuple[str, ...] = ()
    # Per-identity policies (progressive_mcp.policies): PMCP_POLICIES_FILE or PMCP_POLICIES; None: all may use all.
    policies: PolicySet | None = field(default=None, repr=False)
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    list_ttl_s: int = DEFAULT_LIST_TTL_S
    conformance_fixtures: bool = False  # adds the conformance suite's diagnostic tools (never in production)
    # Code mode: what one TOOL_EXECUTE script may use.
    script_limits: ScriptLimits = field(default_factory=ScriptLimits)
    # TOOL_SEARCH's semantic second opinion (PMCP_SEMANTIC, resolved: auto is on when the extra is installed).
    semantic: bool | None = None  # None: read PMCP_SEMANTIC where a search index is built
    # How TOOL_GET and TOOL_SEARCH's `schemas` show a tool's arguments: JSON Schema or the compact lines
    # (PMCP_SCHEMA_VIEW, --schema-view; schema_compact.py).
    schema_view: str = "json"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Read PMCP_* variables (and the spec's key variable); non-None overrides take precedence."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        if env.get("PMCP_SPEC"):
            values["spec_path"] = Path(env["PMCP_SPEC"])
        if env.get("PMCP_MODE"):
            values["mode"] = env["PMCP_MODE"]
        if env.get("PMCP_CATEGORIES"):
            values["categories"] = env["PMCP_CATEGORIES"]
        if env.get(AUTO_DIRECT_TOKENS_ENV, "").strip():
            values["auto_direct_tokens"] = _int(AUTO_DIRECT_TOKENS_ENV, env[AUTO_DIRECT_TOKENS_ENV].strip())
        if env.get(AUTO_FALLBACK_ENV, "").strip():
            values["auto_fallback"] = env[AUTO_FALLBACK_ENV].strip().lower()
        if env.get("PMCP_INCLUDE"):
            values["include"] = split_list(env["PMCP_INCLUDE"])
        if env.get("PMCP_EXCLUDE"):
            values["exclude"] = split_list(env["PMCP_EXCLUDE"])
        if env.get("PMCP_VOCABULARY"):
            values["vocabulary_path"] = Path(env["PMCP_VOCABULARY"])
        if env.get("PMCP_SERVERS"):
            values["servers_path"] = Path(env["PMCP_SERVERS"])
        if env.get("PMCP_INDEX"):
            values["index_path"] = Path(env["PMCP_INDEX"])
        if env.get("PMCP_UPSTREAM_URL"):
            values["upstream_url"] = env["PMCP_UPSTREAM_URL"]
        if env.get(AUTH_ENV, "").strip():
            values["upstream_auth"] = env[AUTH_ENV]
        if env.get(KEY_FORMAT_ENV):
            values["key_format"] = env[KEY_FORMAT_ENV]
        if env.get("PMCP_MAX_RESULT_TOKENS"):
            values["max_result_tokens"] = _int("PMCP_MAX_RESULT_TOKENS", env["PMCP_MAX_RESULT_TOKENS"])
        if env.get("PMCP_UPSTREAM_TIMEOUT_S"):
            values["upstream_timeout_s"] = _float("PMCP_UPSTREAM_TIMEOUT_S", env["PMCP_UPSTREAM_TIMEOUT_S"])
        if env.get("PMCP_UPSTREAM_RETRIES"):
            values["upstream_retries"] = _int("PMCP_UPSTREAM_RETRIES", env["PMCP_UPSTREAM_RETRIES"])
        if env.get("PMCP_DEADLINE_S"):
            values["deadline_s"] = _float("PMCP_DEADLINE_S", env["PMCP_DEADLINE_S"])
        if env.get("PMCP_MAX_UPSTREAM_BYTES"):
            values["max_upstream_bytes"] = _int("PMCP_MAX_UPSTREAM_BYTES", env["PMCP_MAX_UPSTREAM_BYTES"])
        if env.get("PMCP_ALLOWED_ORIGINS"):
            values["allowed_origins"] = split_list(env["PMCP_ALLOWED_ORIGINS"])
        if env.get("PMCP_CACHE"):
            values["cache"] = _switch("PMCP_CACHE", env["PMCP_CACHE"])
        if env.get("PMCP_AUTH_MODE"):
            values["auth_mode"] = env["PMCP_AUTH_MODE"].strip()
        if env.get("PMCP_ENDPOINT_TOKENS"):
            values["endpoint_tokens"] = split_list(env["PMCP_ENDPOINT_TOKENS"])
        if env.get("PMCP_OAUTH_ISSUER", "").strip():
            values["oauth_issuer"] = env["PMCP_OAUTH_ISSUER"].strip()
        if env.get("PMCP_OAUTH_AUDIENCE", "").strip():
            values["oauth_audience"] = env["PMCP_OAUTH_AUDIENCE"].strip()
        if env.get("PMCP_OAUTH_SCOPES"):
            values["oauth_scopes"] = split_list(env["PMCP_OAUTH_SCOPES"])
        policies = load_policies(env)
        if policies is not None:
            values["policies"] = policies
        if env.get("PMCP_MAX_BODY_BYTES"):
            values["max_body_bytes"] = _int("PMCP_MAX_BODY_BYTES", env["PMCP_MAX_BODY_BYTES"])
        if env.get("PMCP_LIST_TTL_S"):
            values["list_ttl_s"] = _int("PMCP_LIST_TTL_S", env["PMCP_LIST_TTL_S"])
        limits: dict[str, Any] = {}
        if env.get("PMCP_SCRIPT_WALL_S"):
            limits["wall_s"] = _float("PMCP_SCRIPT_WALL_S", env["PMCP_SCRIPT_WALL_S"])
        if env.get("PMCP_SCRIPT_MEMORY_MB"):
            limits["memory_mb"] = _int("PMCP_SCRIPT_MEMORY_MB", env["PMCP_SCRIPT_MEMORY_MB"])
        if env.get("PMCP_SCRIPT_MAX_CALLS"):
            limits["max_calls"] = _int("PMCP_SCRIPT_MAX_CALLS", env["PMCP_SCRIPT_MAX_CALLS"])
        if limits:
            values["script_limits"] = ScriptLimits(**limits)
        if env.get("PMCP_CONFORMANCE_FIXTURES"):
            values["conformance_fixtures"] = env["PMCP_CONFORMANCE_FIXTURES"].strip().lower() in ("1", "true", "yes")
        values["semantic"] = semantic_enabled(env)  # raises ConfigError for a wrong value or `on` without the extra
        values["schema_view"] = schema_view(env)  # raises ConfigError for a wrong value
        values.update({k: v for k, v in overrides.items() if v is not None})
        values.setdefault("spec_chosen", "spec_path" in values)
        for name in ("spec_path", "vocabulary_path", "servers_path", "index_path"):
            if isinstance(values.get(name), str):
                values[name] = Path(values[name])
        for name in ("include", "exclude"):
            if isinstance(values.get(name), str):
                values[name] = split_list(values[name])
        if isinstance(values.get("categories"), str):
            values["categories"] = frozenset(split_list(values["categories"])) or None
        if isinstance(values.get("upstream_auth"), str):
            values["upstream_auth"] = parse_choice(values["upstream_auth"])  # "Bearer " is "bearer"
        settings = cls(**values)
        settings.check()
        return settings

    def with_api_key_from(self, environ: Mapping[str, str], env_name: str | None) -> Settings:
        """A copy holding the upstream key from `env_name` (named by the spec) or else PMCP_UPSTREAM_KEY (any
        catalog's), unless one is set. Nothing is read for an API without auth (env_name None)."""
        if self.api_key or not env_name:
            return self
        for name in (env_name, UPSTREAM_KEY_ENV):
            if environ.get(name):
                return replace(self, api_key=environ[name].strip())
        return self

    def check(self) -> None:
        if self.mode not in MODES:
            raise ConfigError(f"mode must be one of {', '.join(MODES)}, not {self.mode!r} (PMCP_MODE or --mode)")
        if not 0 <= self.auto_direct_tokens <= MAX_AUTO_DIRECT_TOKENS:
            raise ConfigError(
                f"{AUTO_DIRECT_TOKENS_ENV} must be a number of tokens from 0 to {MAX_AUTO_DIRECT_TOKENS:,}, not "
                f"{self.auto_direct_tokens} (the most a direct tools/list may cost before auto mode goes progressive)"
            )
        if self.auto_fallback not in AUTO_FALLBACKS:
            raise ConfigError(
                f"{AUTO_FALLBACK_ENV} must be one of {', '.join(AUTO_FALLBACKS)}, not {self.auto_fallback!r}"
            )
        if self.schema_view not in SCHEMA_VIEWS:
            raise ConfigError(
                f"schema view must be one of {', '.join(SCHEMA_VIEWS)}, not {self.schema_view!r} "
                f"({SCHEMA_VIEW_ENV} or --schema-view)"
            )
        if self.max_result_tokens < 500:
            raise ConfigError(f"PMCP_MAX_RESULT_TOKENS must be at least 500, not {self.max_result_tokens}")
        if not 0 < self.upstream_timeout_s <= 900:  # NaN fails this too
            raise ConfigError(
                f"PMCP_UPSTREAM_TIMEOUT_S must be above 0 and at most 900 seconds, not {self.upstream_timeout_s!r}"
            )
        if not 0 <= self.upstream_retries <= 5:
            raise ConfigError("PMCP_UPSTREAM_RETRIES must be between 0 and 5")
        if not 0 < self.deadline_s <= 900:  # NaN fails this too
            raise ConfigError(f"PMCP_DEADLINE_S must be above 0 and at most 900 seconds, not {self.deadline_s!r}")
        if self.max_upstream_bytes < 1024:
            raise ConfigError(f"PMCP_MAX_UPSTREAM_BYTES must be at least 1024, not {self.max_upstream_bytes}")
        if self.auth_mode not in AUTH_MODES:
            raise ConfigError(
                f"auth mode must be one of {', '.join(AUTH_MODES)}, not {self.auth_mode!r} (PMCP_AUTH_MODE)"
            )
        self._check_oauth()
        if self.max_body_bytes < 1024:
            raise ConfigError(f"PMCP_MAX_BODY_BYTES must be at least 1024, not {self.max_body_bytes}")
        if self.list_ttl_s < 0:
            raise ConfigError("PMCP_LIST_TTL_S must not be negative")
        limits = self.script_limits
        if not 0 < limits.wall_s <= 900:
            raise ConfigError(f"PMCP_SCRIPT_WALL_S must be above 0 and at most 900 seconds, not {limits.wall_s!r}")
        if not 8 <= limits.memory_mb <= 4096:
            raise ConfigError(f"PMCP_SCRIPT_MEMORY_MB must be from 8 to 4096, not {limits.memory_mb}")
        if not 1 <= limits.max_calls <= 1000:
            raise ConfigError(f"PMCP_SCRIPT_MAX_CALLS must be from 1 to 1000, not {limits.max_calls}")
        for number, token in enumerate(self.endpoint_tokens, start=1):
            if len(token) < MIN_ENDPOINT_TOKEN_CHARS:  # the message never holds the token, nor a part of it
                raise ConfigError(
                    f"PMCP_ENDPOINT_TOKENS: token {number} of {len(self.endpoint_tokens)} has {len(token)} characters; "
                    f"an endpoint token needs at least {MIN_ENDPOINT_TOKEN_CHARS} characters (make one with: python "
                    "-c 'import secrets; print(secrets.token_urlsafe(32))')"
                )
        if self.upstream_auth is not None:
            parse_choice(self.upstream_auth)
        if self.key_format is not None:
            check_key_format(self.key_format)
        if self.upstream_url is not None and not self.upstream_url.startswith(("http://", "https://")):
            raise ConfigError(f"the upstream URL must start with http:// or https://, not {self.upstream_url!r}")

    def _check_oauth(self) -> None:
        if self.auth_mode != "oauth" or not self.oauth_issuer:
            return  # read only by the HTTP endpoint in oauth mode, which requires the issuer (stdio ignores them)
        from progressive_mcp.oauth import check_audience, check_issuer, check_scopes

        check_issuer(self.oauth_issuer)
        if self.oauth_audience is not None:
            check_audience(self.oauth_audience)
        check_scopes(self.oauth_scopes)


def split_list(value: str) -> tuple[str, ...]:
    """The non-empty, stripped items of a comma-separated setting ("a, b,," → ("a", "b"))."""
    return tuple(item for item in (part.strip() for part in value.split(",")) if item)


def _switch(name: str, value: str) -> bool:
    word = value.strip().lower()
    if word in ("on", "true", "1", "yes"):
        return True
    if word in ("off", "false", "0", "no"):
        return False
    raise ConfigError(f"{name} must be on or off, not {value!r}")


def _int(name: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ConfigError(f"{name} must be a whole number, not {value!r}") from None


def _float(name: str, value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise ConfigError(f"{name} must be a number, not {value!r}") from None
    if not math.isfinite(number):
        raise ConfigError(f"{name} must be a finite number, not {value!r}")
    return number
