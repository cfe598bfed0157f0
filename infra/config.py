"""The stack's operator knobs: one frozen dataclass, validated on creation, readable from CDK context.

Every field is a context key of the same name (`cdk synth -c auth_mode=passthrough -c memory_mb=512`,
`make synth CDK_CONTEXT="-c cache=off"`); `cdk.json` holds the defaults. Values from the command line arrive
as strings and are converted here; an impossible value or combination raises ValueError naming the key.

Example::

    config = StackConfig(auth_mode="passthrough", endpoint="function-url", reserved_concurrency=5)
    config = StackConfig.from_context(app.node)
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

AUTH_MODES = ("passthrough", "server-key", "oauth")
OAUTH_PROVIDERS = ("cognito",)  # authorization servers the stack can create itself (else oauth_issuer names one)
# Where hosted connectors and local clients send the user back after sign-in, registered on the Cognito app client
# (exact matches: Cognito has no wildcards). Claude (claude.ai and claude.com), ChatGPT, VS Code's web redirect, and
# a fixed loopback port for clients that run on the user's machine (Claude Code with `--callback-port 8080`).
DEFAULT_OAUTH_CALLBACK_URLS = (
    "https://claude.ai/api/mcp/auth_callback",
    "https://claude.com/api/mcp/auth_callback",
    "https://chatgpt.com/connector_platform_oauth_redirect",
    "https://vscode.dev/redirect",
    "http://localhost:8080/callback",
)
DEFAULT_COGNITO_SCOPES = ("tools",)  # the resource server's scope, sent as <endpoint URL>/tools
SURFACE_MODES = ("progressive", "direct", "hybrid", "code", "auto")
ENDPOINTS = ("http-api", "function-url")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
PYTHON_RUNTIMES = ("3.12", "3.13", "3.14")
SNAP_START_MIN_PYTHON = (3, 12)  # Lambda SnapStart for Python exists from the python3.12 runtime on
# CloudWatch Logs accepts only these retention periods.
LOG_RETENTION_DAYS: tuple[int, ...] = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096)
LOG_RETENTION_DAYS += (1827, 2192, 2557, 2922, 3288, 3653)
HTTP_API_MAX_TIMEOUT_S = 30  # API Gateway HTTP APIs end an integration after 30 s, whatever the function's timeout
UPSTREAM_TIMEOUT_MARGIN_S = 5  # left to the function after an upstream timeout: error result, logs, metrics
DEFAULT_UPSTREAM_TIMEOUT_S = 20
# Code mode (any caller may ask for ?mode=code, whatever `mode` says) runs a Monty worker process beside the handler:
# measured, the handler peaks at ~100-140 MB and the worker at ~40 MB plus the script's heap (64 MB by default,
# PMCP_SCRIPT_MEMORY_MB), ~250 MB together. Below this, the stack warns that a script near its memory limit, with a
# large upstream answer in flight, can get the function killed for running out of memory.
CODE_MODE_MEMORY_MB = 512
SECRET_ARN = re.compile(r"^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[A-Za-z0-9/_+=.@-]+$")
EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
STACK_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,127}$")
_OUR_KEY = re.compile(r"^[a-z][a-z0-9_]*$")  # CDK's own context keys contain ':', '@' or '-'


class ContextNode(Protocol):
    def get_all_context(self, defaults: Mapping[str, Any] | None = None) -> Any: ...


@dataclass(frozen=True)
class StackConfig:
    """Every knob an operator may turn, with its default; the same names are CDK context keys."""

    stack_name: str = "ProgressiveMcp"
    # What the endpoint serves and who may call it.
    auth_mode: str = "server-key"  # server-key: the stack holds the upstream key, callers present bearer tokens
    # auth_mode=oauth: callers present access tokens of this issuer (any OpenID provider's https URL), issued for
    # oauth_audience (default: the endpoint's own URL, from each request) and carrying oauth_scopes.
    oauth_issuer: str | None = None
    oauth_audience: str | None = None
    oauth_scopes: tuple[str, ...] = ()
    # oauth=cognito (with auth_mode=oauth, instead of oauth_issuer): the stack creates the authorization server, a
    # Cognito user pool with its hosted sign-in domain, a resource server (the endpoint's URL, its scopes are
    # oauth_scopes, default "tools") and an app client for hosted connectors that sends users back to
    # oauth_callback_urls. cognito_domain_prefix: the sign-in domain's prefix (default <stack name>-<account id>).
    oauth: str | None = None
    oauth_callback_urls: tuple[str, ...] = DEFAULT_OAUTH_CALLBACK_URLS
    cognito_domain_prefix: str | None = None
    mode: str = "progressive"  # the default tool surface (callers may still pick one per URL with ?mode=)
    categories: tuple[str, ...] = ()  # expose only these spec categories (default: all)
    # Operations served (terms tag:NAME, method:GET, path:GLOB or a tool-name glob; default: all); PMCP_INCLUDE/EXCLUDE.
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()  # browser origins allowed to call (default: none, i.e. non-browser clients)
    spec: str = "spec/alphavantage.yaml"  # relative to the repository root; shipped compiled to JSON
    max_result_tokens: int | None = None  # larger tool answers become a preview (default: the server's 8000)
    # The function.
    # 3.13, not the newest (3.14): the asset then ships bytecode compiled by a local 3.13 interpreter when one is
    # found, and the handler's cold import drops from ~770 ms to ~500 ms (bench/asset.py). Lambda cannot write
    # .pyc files, so without bytecode every cold start compiles every module again. cdk-nag L1 is acknowledged.
    python_runtime: str = "3.13"
    # CPU is proportional to memory (1769 MB = 1 vCPU). The init phase (~0.4 CPU-s here) and the tokenizer's first
    # load (~0.55 CPU-s, RSS to ~140 MB) are CPU-bound: 1024 halves those waits against 512 at the same cost for
    # CPU work (twice the rate for half the time); time spent waiting on the upstream costs twice as much. Code
    # mode's worker needs ~110 MB more at its limit (see CODE_MODE_MEMORY_MB): well within 1024.
    memory_mb: int = 1024
    # 30: API Gateway's limit. A script's default wall time (PMCP_SCRIPT_WALL_S, 20 s) fits within the deadline
    # below (timeout_s - 5), so the function still answers when a script is stopped at its limit.
    timeout_s: int = 30
    upstream_timeout_s: float | None = None  # default: min(20, timeout_s - 5)
    deadline_s: float | None = None  # one tool call's whole upstream work, retries included; default: timeout_s - 5
    reserved_concurrency: int | None = None  # the throttle for endpoint=function-url (caps concurrent instances)
    # Lambda SnapStart: each deployment that changes the function publishes a version, which Lambda initializes
    # once and snapshots; new instances resume from the snapshot instead of importing the handler again. Callers
    # then invoke a "live" alias of that version ($LATEST never has a snapshot). Caching and restoring snapshots
    # are billed for Python. Needs python3.12+; Lambda refuses it with provisioned concurrency, EFS or more than
    # 512 MB of ephemeral storage, none of which this stack sets. See docs/deploy.md#snapstart.
    snap_start: bool = False
    log_level: str = "INFO"
    log_retention_days: int = 30
    # The endpoint in front of it.
    endpoint: str = "http-api"  # http-api (API Gateway HTTP API, throttled per stage) or function-url
    throttle_rate: float = 10  # HTTP API requests per second, steady state
    throttle_burst: int = 20  # HTTP API requests above the rate, briefly
    # State.
    cache: bool = True  # a DynamoDB table of upstream answers, shared by all instances
    results_expiry_days: int = 1  # large results offloaded to S3 are deleted after this
    result_url_ttl_s: int = 900  # lifetime of the presigned URL that points at an offloaded result
    secret_cache_s: int = 300  # how long an instance keeps a secret value before reading it again
    upstream_key_secret_arn: str | None = None  # an existing secret with the upstream key (default: create one)
    # The gateway: an mcpServers JSON file (relative to the repository root) whose servers' tools the endpoint
    # serves (beside the spec's); a scheduled function syncs them into a DynamoDB tool store every sync_minutes.
    servers: str | None = None
    servers_secret_arn: str | None = None  # an existing secret: JSON object of the servers file's ${VAR} values
    sync_minutes: int = 15
    # Alarms.
    alarm_email: str | None = None  # subscribe this address to every alarm (default: alarms without actions)
    upstream_error_rate_threshold: float = 0.25  # share of upstream calls failing in 5 minutes that alarms

    def __post_init__(self) -> None:
        self.validate()

    @property
    def effective_upstream_timeout_s(self) -> float:
        if self.upstream_timeout_s is not None:
            return self.upstream_timeout_s
        return float(min(DEFAULT_UPSTREAM_TIMEOUT_S, self.timeout_s - UPSTREAM_TIMEOUT_MARGIN_S))

    @property
    def effective_deadline_s(self) -> float:
        if self.deadline_s is not None:
            return self.deadline_s
        return float(self.timeout_s - UPSTREAM_TIMEOUT_MARGIN_S)

    @property
    def server_key(self) -> bool:
        return self.auth_mode == "server-key"

    @property
    def holds_upstream_key(self) -> bool:
        """Whether the stack keeps the upstream key in a secret (server-key and oauth modes)."""
        return self.auth_mode in ("server-key", "oauth")

    def validate(self) -> None:
        """Raise ValueError for a value out of range or a combination that cannot work."""
        _choice("auth_mode", self.auth_mode, AUTH_MODES)
        _choice("mode", self.mode, SURFACE_MODES)
        _choice("endpoint", self.endpoint, ENDPOINTS)
        _choice("log_level", self.log_level, LOG_LEVELS)
        _choice("python_runtime", self.python_runtime, PYTHON_RUNTIMES)
        if self.snap_start and _python_version(self.python_runtime) < SNAP_START_MIN_PYTHON:
            raise ValueError(
                f"snap_start needs python_runtime 3.12 or later (Lambda SnapStart for Python), not "
                f"{self.python_runtime}"
            )
        _choice("log_retention_days", self.log_retention_days, LOG_RETENTION_DAYS)
        if not STACK_NAME.match(self.stack_name):
            raise ValueError(
                f"stack_name must be letters, digits and hyphens, starting with a letter: {self.stack_name!r}"
            )
        _between("memory_mb", self.memory_mb, 128, 10240)
        _between("timeout_s", self.timeout_s, UPSTREAM_TIMEOUT_MARGIN_S + 1, 900)
        if self.endpoint == "http-api" and self.timeout_s > HTTP_API_MAX_TIMEOUT_S:
            raise ValueError(
                f"timeout_s={self.timeout_s}: with endpoint=http-api at most {HTTP_API_MAX_TIMEOUT_S} "
                "(API Gateway answers 503 after 30 s); use endpoint=function-url for longer calls"
            )
        upstream = self.effective_upstream_timeout_s
        if not 0 < upstream <= self.timeout_s - UPSTREAM_TIMEOUT_MARGIN_S:
            raise ValueError(
                f"upstream_timeout_s={upstream:g} must be positive and at most timeout_s - {UPSTREAM_TIMEOUT_MARGIN_S}"
                f" ({self.timeout_s - UPSTREAM_TIMEOUT_MARGIN_S}), so the function can still answer after a timeout"
            )
        deadline = self.effective_deadline_s
        if not 0 < deadline < self.timeout_s:
            raise ValueError(
                f"deadline_s={deadline:g} must be positive and below timeout_s ({self.timeout_s}), so a tool call "
                f"gives up before Lambda ends the invocation (default: timeout_s - {UPSTREAM_TIMEOUT_MARGIN_S})"
            )
        if self.throttle_rate <= 0:
            raise ValueError(f"throttle_rate must be positive, not {self.throttle_rate}")
        _between("throttle_burst", self.throttle_burst, 0, 5000)
        if self.reserved_concurrency is not None:
            _between("reserved_concurrency", self.reserved_concurrency, 1, 1000)
        _between("results_expiry_days", self.results_expiry_days, 1, 3650)
        # A presigned URL dies with the credentials that signed it; Lambda's role credentials last hours, not days.
        _between("result_url_ttl_s", self.result_url_ttl_s, 60, 43200)
        _between("secret_cache_s", self.secret_cache_s, 0, 86400)
        if self.max_result_tokens is not None:
            _between("max_result_tokens", self.max_result_tokens, 500, 1_000_000)
        if not 0 < self.upstream_error_rate_threshold <= 1:
            raise ValueError(
                f"upstream_error_rate_threshold must be in (0, 1], not {self.upstream_error_rate_threshold}"
            )
        self._validate_oauth()
        if self.upstream_key_secret_arn is not None:
            if not self.holds_upstream_key:
                raise ValueError("upstream_key_secret_arn is only used with auth_mode=server-key or oauth")
            if not SECRET_ARN.match(self.upstream_key_secret_arn):
                raise ValueError(
                    f"upstream_key_secret_arn is not a Secrets Manager ARN: {self.upstream_key_secret_arn!r}"
                )
        _between("sync_minutes", self.sync_minutes, 1, 1440)
        if self.servers is not None and Path(self.servers).suffix != ".json":
            raise ValueError(f"servers must be an mcpServers .json file, not {self.servers!r}")
        if self.servers_secret_arn is not None:
            if self.servers is None:
                raise ValueError("servers_secret_arn is only used with servers (an mcpServers file)")
            if not SECRET_ARN.match(self.servers_secret_arn):
                raise ValueError(f"servers_secret_arn is not a Secrets Manager ARN: {self.servers_secret_arn!r}")
        if self.alarm_email is not None and not EMAIL.match(self.alarm_email):
            raise ValueError(f"alarm_email is not an email address: {self.alarm_email!r}")
        for origin in self.allowed_origins:
            if origin != "*" and not re.match(r"^https?://[^/\s]+$", origin):
                raise ValueError(f"allowed_origins: {origin!r} is not '*' or an origin like https://app.example.com")
        for term in (*self.include, *self.exclude):
            if "," in term or not term.strip():
                raise ValueError(f"include/exclude: {term!r} is not one filter term (give a list of terms)")
        for category in self.categories:
            if not re.match(r"^[A-Za-z0-9_-]+$", category):
                raise ValueError(f"categories: {category!r} is not a category name")
        if Path(self.spec).suffix not in (".yaml", ".yml", ".json"):
            raise ValueError(f"spec must be a .yaml, .yml or .json file, not {self.spec!r}")

    @property
    def cognito(self) -> bool:
        return self.auth_mode == "oauth" and self.oauth == "cognito"

    def _validate_oauth(self) -> None:
        oauth = self.oauth_issuer is not None or self.oauth_audience is not None or bool(self.oauth_scopes)
        if self.auth_mode != "oauth":
            if oauth or self.oauth is not None:
                raise ValueError(
                    "oauth, oauth_issuer, oauth_audience and oauth_scopes are only used with auth_mode=oauth"
                )
            if self.cognito_domain_prefix is not None:
                raise ValueError("cognito_domain_prefix is only used with auth_mode=oauth and oauth=cognito")
            return
        if self.oauth is not None:
            self._validate_cognito()
        elif self.cognito_domain_prefix is not None:
            raise ValueError("cognito_domain_prefix is only used with oauth=cognito")
        elif self.oauth_issuer is None or not re.match(r"^https://[^/?#\s]+(/[^?#\s]*)?$", self.oauth_issuer):
            raise ValueError(
                f"auth_mode=oauth needs oauth_issuer, the https URL of the authorization server, not "
                f"{self.oauth_issuer!r}"
            )
        if self.oauth_audience is not None and not re.match(r"^https://[^/?#\s]+[^#\s]*$", self.oauth_audience):
            raise ValueError(f"oauth_audience must be an https URL without a fragment, not {self.oauth_audience!r}")
        for scope in self.oauth_scopes:
            if not re.match(r"^[!#-\[\]-~]+$", scope):
                raise ValueError(f"oauth_scopes: {scope!r} is not a scope (printable ASCII, no space, quote or \\)")

    def _validate_cognito(self) -> None:
        _choice("oauth", self.oauth, OAUTH_PROVIDERS)
        if self.oauth_issuer is not None:
            raise ValueError("oauth=cognito creates the issuer: leave oauth_issuer unset (or drop oauth=cognito)")
        for scope in self.oauth_scopes:  # a resource server's scope name (Cognito: no '/', space, quote or \\)
            if not re.match(r"^[!#-.0-\[\]-~]{1,256}$", scope):
                raise ValueError(
                    f"oauth_scopes: {scope!r} is not a Cognito scope name (printable ASCII, no space, /, quote or \\)"
                )
        if not self.oauth_callback_urls:
            raise ValueError("oauth=cognito needs at least one oauth_callback_urls entry")
        if self.endpoint == "function-url" and self.oauth_audience is None:
            raise ValueError(
                "oauth=cognito with endpoint=function-url needs oauth_audience, the endpoint's URL (a custom domain, "
                "or the function URL of a first deployment): the function's own settings cannot name its URL"
            )
        for url in self.oauth_callback_urls:  # Cognito takes https, and http only for localhost
            if not re.match(r"^(https://[^/?#\s]+|http://localhost(:\d{1,5})?)(/[^#\s]*)?$", url):
                raise ValueError(
                    f"oauth_callback_urls: {url!r} must be an https URL (http only for localhost), without a fragment"
                )
        prefix = self.cognito_domain_prefix
        if prefix is not None and (
            not re.match(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$", prefix) or re.search(r"aws|amazon|cognito", prefix)
        ):
            raise ValueError(
                f"cognito_domain_prefix: {prefix!r} must be lower-case letters, digits and hyphens (at most 63, not "
                "starting or ending with a hyphen) without 'aws', 'amazon' or 'cognito'"
            )
        if prefix is None and len(self.stack_name) > 50:  # <stack name>-<12-digit account> must fit in 63
            raise ValueError("with oauth=cognito and a stack_name over 50 characters, set cognito_domain_prefix")

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> StackConfig:
        """A config from context-like values: strings (from `-c key=value`) or JSON values (from cdk.json).

        An unset, null or empty value keeps the default. A key that looks like one of ours but is not (a typo)
        is an error; CDK's own keys (feature flags, `aws:cdk:...`) are ignored.
        """
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(key for key in values if _OUR_KEY.match(key) and key not in fields)
        if unknown:
            raise ValueError(f"unknown context key(s) {', '.join(unknown)}; known: {', '.join(sorted(fields))}")
        hints = typing.get_type_hints(cls)
        kwargs: dict[str, Any] = {}
        for name in fields:
            raw = values.get(name)
            if raw is None or raw == "" or raw == []:
                continue
            kwargs[name] = _convert(name, raw, hints[name])
        return cls(**kwargs)

    @classmethod
    def from_context(cls, node: ContextNode) -> StackConfig:
        return cls.from_mapping(dict(node.get_all_context()))

    def to_context(self) -> dict[str, Any]:
        """JSON-ready values (cdk.json's "context" holds `StackConfig().to_context()`, less the None ones)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = ",".join(value) if isinstance(value, tuple) else value
        return out


def _convert(name: str, raw: Any, hint: Any) -> Any:
    """`raw` as the field's type: int, float, bool, str, tuple[str, ...], or Optional of one of them."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        hint = next(arg for arg in typing.get_args(hint) if arg is not type(None))
    try:
        if hint is bool:
            return _switch(raw)
        if hint is int:
            if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
                raise ValueError
            return int(str(raw).strip()) if isinstance(raw, str) else int(raw)
        if hint is float:
            if isinstance(raw, bool):
                raise ValueError
            return float(raw)
        if typing.get_origin(hint) is tuple:
            items = raw if isinstance(raw, list) else str(raw).split(",")
            return tuple(item.strip() for item in map(str, items) if item.strip())
        return str(raw).strip()
    except ValueError:
        kind = getattr(hint, "__name__", str(hint))
        raise ValueError(f"context key {name}: {raw!r} is not a valid {kind}") from None


def _switch(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    word = str(raw).strip().lower()
    if word in ("on", "true", "1", "yes"):
        return True
    if word in ("off", "false", "0", "no"):
        return False
    raise ValueError


def _choice(name: str, value: Any, allowed: tuple[Any, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(map(str, allowed))}, not {value!r}")


def _python_version(runtime: str) -> tuple[int, ...]:
    return tuple(int(part) for part in runtime.split("."))


def _between(name: str, value: float, low: float, high: float) -> None:
    if isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"{name} must be between {low} and {high}, not {value!r}")
