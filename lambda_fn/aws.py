"""The AWS-backed pieces of the Lambda function: DynamoDB response cache, S3 result store, secret providers.

Each implements an interface of the core (`ResponseCache`, `ResultStore`, a zero-argument secret provider), so
the core never imports boto3. `endpoint_from_environment` wires them from environment variables; boto3, botocore
and Powertools Parameters are imported only when one of those variables is set, so a function without them
starts as fast as the core alone. Example::

    endpoint = endpoint_from_environment(os.environ)   # PMCP_CACHE_TABLE, PMCP_RESULTS_BUCKET, ... (see below)

| variable | default | meaning |
|---|---|---|
| `PMCP_CACHE_TABLE` | none: in-memory per instance | DynamoDB table of upstream answers, shared by instances |
| `PMCP_RESULTS_BUCKET` | none: previews only | S3 bucket for full results too large for the token budget |
| `PMCP_RESULT_URL_TTL_S` | `900` | lifetime of the presigned URL to an offloaded result, seconds |
| `PMCP_UPSTREAM_KEY_SECRET` | none: `ALPHAVANTAGE_API_KEY` | server-key, oauth: secret (name or ARN): upstream key |
| `PMCP_ENDPOINT_TOKENS_SECRET` | none: `PMCP_ENDPOINT_TOKENS` | server-key: secret (name or ARN): tokens, policies |
| `PMCP_POLICIES_SECRET` | none: the tokens secret's | server-key, oauth: secret (name or ARN): policies |
| `PMCP_SECRET_CACHE_S` | `300` | how long an instance keeps a secret value before reading it again |
| `PMCP_INDEX_TABLE` | none: SQLite in /tmp, synced at cold start | the gateway's tool store (with `PMCP_SERVERS`) |
| `PMCP_INDEX_POLL_S` | `60` | how often an instance looks whether the scheduled sync changed the tool store |
| `PMCP_SERVERS_SECRET` | none | secret (name or ARN): a JSON object of the servers file's `${VAR}` values |

Secret formats. The upstream key: the key as plain text, or JSON `{"api_key": "..."}`. The endpoint tokens: one
token, several separated by commas or whitespace, a JSON list, or JSON `{"tokens": [...]}`; to rotate, add the new
token, move callers over, then remove the old one. A secret that is empty or still holds `SECRET_PLACEHOLDER`
counts as not configured: tool calls then say the operator must set a key, or every request gets 401. The tokens
secret's JSON form may carry the per-identity policies beside them, `{"tokens": [...], "policies": {...}}` (see
progressive_mcp.policies), so they rotate together; malformed policies there make every request a 503 (logged
with the entry's digest and field) until fixed. In oauth mode (no tokens secret) the policies have a secret of their
own, `PMCP_POLICIES_SECRET`: the policies document as JSON, or `{"policies": {...}}`; when set in server-key mode it
replaces the tokens secret's. Request rates are counted in the cache table when there is one.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import threading
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from progressive_mcp.calls.cache import CachedAnswer, StoredResult
from progressive_mcp.errors import ConfigError
from progressive_mcp.policies import PolicySet, parse_policies, retry_after
from progressive_mcp.settings import MIN_ENDPOINT_TOKEN_CHARS, Settings
from progressive_mcp.surfaces.endpoint import Endpoint
from progressive_mcp.tokens import dumps

if TYPE_CHECKING:
    import boto3
    from aws_lambda_powertools.utilities.parameters import SecretsProvider
    from botocore.config import Config

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

# What a stack stores in a secret the operator has yet to fill in; a value starting with it is "not configured".
SECRET_PLACEHOLDER = "REPLACE_ME"
# DynamoDB's item size limit counts attribute names and values; the margin covers the small attributes.
DYNAMODB_MAX_ITEM_BYTES = 400 * 1024
ITEM_OVERHEAD_BYTES = 256
# Market-data JSON and CSV compress 3-6x with zlib; a body more than this many times the item limit cannot fit,
# so it is skipped without spending CPU on compressing it.
MAX_COMPRESSION_RATIO = 20
# A cache or store that times out is skipped for this long, so an outage costs one timeout, not one per request.
FAILURE_COOLDOWN_S = 15.0
# AWS calls must fail fast: the cache is an optimisation, and the function's timeout is shared with the upstream
# call. One retry (two attempts in all); worst case 2 × (1 s + 2 s) before the caller degrades to a direct call.
CONNECT_TIMEOUT_S = 1.0
READ_TIMEOUT_S = 2.0
TOTAL_ATTEMPTS = 2
S3_READ_TIMEOUT_S = 5.0  # an upload of several MB needs longer than a small DynamoDB item
MAX_PRESIGNED_URL_TTL_S = 7 * 24 * 3600  # SigV4's limit
DEFAULT_RESULT_URL_TTL_S = 900
DEFAULT_SECRET_CACHE_S = 300
RESULTS_PREFIX = "results/"

ENV_CACHE_TABLE = "PMCP_CACHE_TABLE"
ENV_RESULTS_BUCKET = "PMCP_RESULTS_BUCKET"
ENV_RESULT_URL_TTL_S = "PMCP_RESULT_URL_TTL_S"
ENV_UPSTREAM_KEY_SECRET = "PMCP_UPSTREAM_KEY_SECRET"
ENV_ENDPOINT_TOKENS_SECRET = "PMCP_ENDPOINT_TOKENS_SECRET"
ENV_POLICIES_SECRET = "PMCP_POLICIES_SECRET"
ENV_SECRET_CACHE_S = "PMCP_SECRET_CACHE_S"
ENV_INDEX_TABLE = "PMCP_INDEX_TABLE"
ENV_INDEX_POLL_S = "PMCP_INDEX_POLL_S"
ENV_SERVERS_SECRET = "PMCP_SERVERS_SECRET"
DEFAULT_INDEX_POLL_S = 60
LAMBDA_INDEX = "/tmp/progressive-mcp/index.sqlite3"  # the only writable place on Lambda


class CacheUnavailable(Exception):
    """The cache or store timed out recently and is skipped until its cooldown ends."""


def fast_config(*, read_timeout_s: float = READ_TIMEOUT_S, **extra: Any) -> Config:
    """The botocore client config of every AWS call here: short timeouts, one retry."""
    from botocore.config import Config

    return Config(
        connect_timeout=CONNECT_TIMEOUT_S,
        read_timeout=read_timeout_s,
        retries={"total_max_attempts": TOTAL_ATTEMPTS, "mode": "standard"},
        **extra,
    )


class _Breaker:
    """Skips a dependency for `cooldown_s` after it timed out or could not be reached (not after a quick error)."""

    def __init__(self, cooldown_s: float, clock: Callable[[], float]) -> None:
        self.cooldown_s = cooldown_s
        self._clock = clock
        self._open_until = 0.0

    def call(self, action: Callable[[], _T]) -> _T:
        if self._clock() < self._open_until:
            raise CacheUnavailable("skipped after a recent timeout")
        from botocore.exceptions import ConnectionError as BotoConnectionError
        from botocore.exceptions import HTTPClientError

        try:
            return action()
        except (BotoConnectionError, HTTPClientError):
            self._open_until = self._clock() + self.cooldown_s
            raise


class DynamoRateLimiter:
    """A `RateLimiter` (progressive_mcp.policies) in the cache table, shared by all instances: one item per caller
    and minute (`pk` "rate#<caller digest>#<minute>"), its count raised atomically, gone by TTL. A counter that
    cannot be reached lets the request through (the endpoint logs it): the rate is fairness, not access."""

    def __init__(self, table_name: str, *, client: Any, clock: Callable[[], float] = time.time) -> None:
        self.table_name = table_name
        self.client = client
        self._clock = clock
        self._breaker = _Breaker(FAILURE_COOLDOWN_S, clock)

    def hit(self, caller: str, per_minute: int) -> float | None:
        now = self._clock()
        window = int(now // 60)
        answer = self._breaker.call(
            lambda: self.client.update_item(
                TableName=self.table_name,
                Key={"pk": {"S": f"rate#{caller}#{window}"}},
                UpdateExpression="ADD requests :one SET expires_at = if_not_exists(expires_at, :expires)",
                ExpressionAttributeValues={":one": {"N": "1"}, ":expires": {"N": str((window + 2) * 60)}},
                ReturnValues="UPDATED_NEW",
            )
        )
        count = int(answer["Attributes"]["requests"]["N"])
        return None if count <= per_minute else retry_after(now)


class DynamoDBCache:
    """A `ResponseCache` in a DynamoDB table (hash key `pk`, TTL attribute `expires_at`), shared by all instances.

    Item: `pk` (S, the cache key), `expires_at` (N, epoch seconds; the table's TTL attribute), `cached_at` (N),
    `format` (S), `size` (N, bytes of the upstream body) and `body` (B: zlib of the compact JSON payload, or of the
    CSV text). DynamoDB deletes expired items up to a day or two late, so `get` checks `expires_at` itself. AWS
    errors propagate (the surface degrades to a direct call); an answer too large for one item is not kept.
    """

    def __init__(
        self,
        table_name: str,
        *,
        client: Any = None,
        clock: Callable[[], float] = time.time,
        max_item_bytes: int = DYNAMODB_MAX_ITEM_BYTES,
        cooldown_s: float = FAILURE_COOLDOWN_S,
    ) -> None:
        if client is None:
            import boto3

            client = boto3.client("dynamodb", config=fast_config())
        self.table_name = table_name
        self.client = client
        self.max_item_bytes = max_item_bytes
        self._clock = clock
        self._breaker = _Breaker(cooldown_s, clock)

    def get(self, key: str) -> CachedAnswer | None:
        response = self._breaker.call(
            lambda: self.client.get_item(TableName=self.table_name, Key={"pk": {"S": key}}, ConsistentRead=False)
        )
        item = response.get("Item")
        if item is None:
            return None
        expires_at = float(item["expires_at"]["N"])
        if expires_at <= self._clock():
            return None
        fmt = item["format"]["S"]
        text = zlib.decompress(item["body"]["B"]).decode("utf-8")
        return CachedAnswer(
            payload=json.loads(text) if fmt == "json" else text,  # CSV and other text as they are
            format=fmt,
            cached_at=float(item["cached_at"]["N"]),
            expires_at=expires_at,
            size=int(item["size"]["N"]) if "size" in item else 0,
        )

    def put(self, key: str, answer: CachedAnswer) -> None:
        text = answer.payload if answer.format != "json" and isinstance(answer.payload, str) else dumps(answer.payload)
        raw = text.encode("utf-8")
        if len(raw) > self.max_item_bytes * MAX_COMPRESSION_RATIO:
            logger.info("answer not cached: too large for one item", extra={"bytes": len(raw)})
            return
        body = zlib.compress(raw)
        if len(body) + len(key) + ITEM_OVERHEAD_BYTES > self.max_item_bytes:
            logger.info("answer not cached: too large for one item", extra={"bytes": len(raw), "stored": len(body)})
            return
        item = {
            "pk": {"S": key},
            # DynamoDB's TTL reads whole epoch seconds; rounding up never serves an answer early.
            "expires_at": {"N": str(math.ceil(answer.expires_at))},
            "cached_at": {"N": repr(float(answer.cached_at))},
            "format": {"S": answer.format},
            "size": {"N": str(int(answer.size))},
            "body": {"B": body},
        }
        self._breaker.call(lambda: self.client.put_item(TableName=self.table_name, Item=item))


class S3ResultStore:
    """A `ResultStore` in an S3 bucket: the object under `results/<name>`, handed out as a presigned GET URL.

    Encryption is the bucket's default; the bucket's lifecycle rule deletes old results. A presigned URL lives
    at most as long as the credentials that signed it (on Lambda, the role's session: hours). Without `client`,
    one is made from `session` on the first upload: S3's model takes ~85 ms to load, and most instances never
    offload a result, so a cold start does not pay for it.
    """

    def __init__(
        self,
        bucket: str,
        *,
        client: Any = None,
        session: boto3.session.Session | None = None,
        url_ttl_s: int = DEFAULT_RESULT_URL_TTL_S,
        clock: Callable[[], float] = time.time,
        cooldown_s: float = FAILURE_COOLDOWN_S,
    ) -> None:
        if not 1 <= url_ttl_s <= MAX_PRESIGNED_URL_TTL_S:
            raise ConfigError(
                f"{ENV_RESULT_URL_TTL_S} must be between 1 and {MAX_PRESIGNED_URL_TTL_S}, not {url_ttl_s}"
            )
        self.bucket = bucket
        self.url_ttl_s = url_ttl_s
        self._client = client
        self._session = session
        self._lock = threading.Lock()
        self._clock = clock
        self._breaker = _Breaker(cooldown_s, clock)

    @property
    def client(self) -> Any:
        """The S3 client (made once, on first use, when none was given)."""
        if self._client is None:
            with self._lock:
                if self._client is None:
                    import boto3

                    self._client = _client(self._session or boto3.session.Session(), "s3", s3_config())
        return self._client

    def put(self, name: str, body: bytes, content_type: str) -> StoredResult:
        key = RESULTS_PREFIX + name
        client = self.client
        self._breaker.call(lambda: client.put_object(Bucket=self.bucket, Key=key, Body=body, ContentType=content_type))
        now = self._clock()
        url = client.generate_presigned_url(
            "get_object", Params={"Bucket": self.bucket, "Key": key}, ExpiresIn=self.url_ttl_s
        )
        return StoredResult(url=url, expires_at=now + self.url_ttl_s)


def s3_config() -> Config:
    """SigV4 presigned URLs on the bucket's regional virtual-host endpoint (no redirect from the global one)."""
    return fast_config(
        read_timeout_s=S3_READ_TIMEOUT_S,
        signature_version="s3v4",
        s3={"addressing_style": "virtual", "us_east_1_regional_endpoint": "regional"},
    )


# --- secrets ---------------------------------------------------------------------------------------


class _Parsed(Generic[_T]):
    """A secret's parsed value, parsed (and warned about) once per distinct raw value, not once per request."""

    def __init__(self, parse: Callable[[str], _T]) -> None:
        self._parse = parse
        self._last: tuple[str, _T] | None = None
        self._lock = threading.Lock()

    def __call__(self, raw: object) -> _T:
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else "" if raw is None else str(raw)
        with self._lock:
            last = self._last
            if last is None or last[0] != text:
                last = (text, self._parse(text))
                self._last = last
            return last[1]


def secret_provider(
    secret_id: str, max_age_s: int, *, secrets: SecretsProvider | None = None
) -> Callable[[], str | None]:
    """A provider of the upstream key held in `secret_id`, read through Powertools' cache (`max_age_s` seconds).

    The secret is the key as plain text or JSON `{"api_key": "..."}`. Empty, malformed or still the placeholder:
    None (tool calls then tell the caller the operator must configure a key). Failure to read it raises (→ 503).
    """
    fetch = _fetcher(secret_id, max_age_s, secrets)
    parse = _Parsed(lambda text: parse_upstream_key(secret_id, text))
    return lambda: parse(fetch())


def tokens_provider(
    secret_id: str, max_age_s: int, *, secrets: SecretsProvider | None = None
) -> Callable[[], tuple[str, ...]]:
    """A provider of the endpoint's bearer tokens held in `secret_id` (formats: see `parse_endpoint_tokens`)."""
    fetch = _fetcher(secret_id, max_age_s, secrets)
    parse = _Parsed(lambda text: parse_endpoint_tokens(secret_id, text))
    return lambda: parse(fetch())


def policies_provider(
    secret_id: str, max_age_s: int, fallback: PolicySet | None, *, secrets: SecretsProvider | None = None
) -> Callable[[], PolicySet | None]:
    """A provider of the per-identity policies in the tokens secret's `policies` member (`fallback`, the
    environment's, when it has none), read with the tokens so that both rotate together."""
    fetch = _fetcher(secret_id, max_age_s, secrets)
    parse = _Parsed(lambda text: parse_secret_policies(secret_id, text, fallback))
    return lambda: parse(fetch())


def named_policies_provider(
    secret_id: str, max_age_s: int, fallback: PolicySet | None, *, secrets: SecretsProvider | None = None
) -> Callable[[], PolicySet | None]:
    """A provider of the per-identity policies held in a secret of their own (PMCP_POLICIES_SECRET; `fallback`, the
    environment's, while it is empty or the placeholder): how oauth mode, which has no tokens secret, rotates them."""
    fetch = _fetcher(secret_id, max_age_s, secrets)
    parse = _Parsed(lambda text: parse_named_policies(secret_id, text, fallback))
    return lambda: parse(fetch())


def parse_named_policies(secret_id: str, text: str, fallback: PolicySet | None) -> PolicySet | None:
    """The policies in a policies secret: the document as JSON, or `{"policies": {...}}`; ConfigError (logged) when
    malformed, `fallback` when not configured."""
    text = text.strip()
    if not text or _is_placeholder(text):
        return fallback
    data = _json_or_none(text)
    try:
        if not isinstance(data, dict):
            raise ConfigError("policies: the policies secret must hold a JSON object (the policies document)")
        return parse_policies(data["policies"] if set(data) == {"policies"} else data)
    except ConfigError as exc:
        logger.error("the policies secret's policies are refused: %s", exc, extra={"secret_id": secret_id})
        raise


def parse_secret_policies(secret_id: str, text: str, fallback: PolicySet | None) -> PolicySet | None:
    """The policies in a tokens secret's JSON object; ConfigError (logged, never holding a token) when malformed."""
    data = _json_or_none(text.strip()) if text.strip().startswith("{") else None
    if not isinstance(data, dict) or "policies" not in data:
        return fallback
    try:
        policies = parse_policies(data["policies"])
        tokens = data.get("tokens")
        if isinstance(tokens, list) and tokens:
            policies.check_tokens([t for t in tokens if isinstance(t, str)])
    except ConfigError as exc:
        logger.error("the tokens secret's policies are refused: %s", exc, extra={"secret_id": secret_id})
        raise
    return policies


def _fetcher(secret_id: str, max_age_s: int, secrets: SecretsProvider | None) -> Callable[[], object]:
    if secrets is not None:
        return lambda: secrets.get(secret_id, max_age=max_age_s)
    from aws_lambda_powertools.utilities import parameters

    return lambda: parameters.get_secret(secret_id, max_age=max_age_s)


def parse_upstream_key(secret_id: str, text: str) -> str | None:
    """The key in a secret's text: plain, or JSON {"api_key": "..."}; None when not configured (logged, never shown)."""
    key = text.strip()
    if key.startswith("{"):
        data = _json_or_none(key)
        field = data.get("api_key") if isinstance(data, dict) else None
        if not isinstance(field, str):
            logger.warning(
                "the upstream key secret is JSON without an api_key string; treated as unset",
                extra={"secret_id": secret_id},
            )
            return None
        key = field.strip()
    if not key or _is_placeholder(key):
        logger.warning(
            "the upstream key secret is empty or still the placeholder: tool calls will fail until it is set",
            extra={"secret_id": secret_id},
        )
        return None
    return key


def parse_endpoint_tokens(secret_id: str, text: str) -> tuple[str, ...]:
    """The tokens in a secret's text, in order, without repeats or placeholders.

    Accepted: `tok`, `tok1,tok2` (commas or whitespace), `["tok1", "tok2"]`, `{"tokens": ["tok1", "tok2"]}`.
    """
    stripped = text.strip()
    items: list[str] = []
    if stripped.startswith(("[", "{")):
        data = _json_or_none(stripped)
        if isinstance(data, dict):
            data = data.get("tokens")
        if isinstance(data, list) and all(isinstance(item, str) for item in data):
            items = data
    else:
        items = re.split(r"[,\s]+", stripped)
    tokens = tuple(dict.fromkeys(t.strip() for t in items if t.strip() and not _is_placeholder(t.strip())))
    short = [t for t in tokens if len(t) < MIN_ENDPOINT_TOKEN_CHARS]
    if short:  # as Settings refuses them in PMCP_ENDPOINT_TOKENS; a secret is read after start, so they are left out
        logger.warning(
            f"the endpoint tokens secret holds {len(short)} token{'s' if len(short) > 1 else ''} shorter than "
            f"{MIN_ENDPOINT_TOKEN_CHARS} characters: left out (callers presenting them get 401); replace them",
            extra={"secret_id": secret_id},
        )
        tokens = tuple(t for t in tokens if len(t) >= MIN_ENDPOINT_TOKEN_CHARS)
    if not tokens:
        logger.warning(
            "the endpoint tokens secret holds no token (empty, the placeholder, or JSON that is neither a list of "
            'strings nor {"tokens": [...]}): every request will get 401 until one is added',
            extra={"secret_id": secret_id},
        )
    return tokens


def _json_or_none(text: str) -> object:
    # Never chain the decode error: its `doc` attribute is the whole secret.
    try:
        return json.loads(text)
    except ValueError:
        return None


def _is_placeholder(value: str) -> bool:
    return value.upper().startswith(SECRET_PLACEHOLDER)


# --- wiring ----------------------------------------------------------------------------------------


def endpoint_from_environment(
    environ: Mapping[str, str] | None = None, *, session: boto3.session.Session | None = None, **endpoint_options: Any
) -> Endpoint:
    """The Endpoint the Lambda handler serves: the core settings plus the AWS pieces the variables ask for.

    Clients are created here, once per execution environment (they make no network call until used), from
    `session` (default: a new one in AWS_REGION); the S3 client on the first offload. `endpoint_options` go to
    `Endpoint.from_settings`.
    """
    env = os.environ if environ is None else environ
    settings = Settings.from_env(env)
    table = _text(env, ENV_CACHE_TABLE)
    bucket = _text(env, ENV_RESULTS_BUCKET)
    url_ttl_s = _int(env, ENV_RESULT_URL_TTL_S, DEFAULT_RESULT_URL_TTL_S, 1, MAX_PRESIGNED_URL_TTL_S)
    key_secret = _text(env, ENV_UPSTREAM_KEY_SECRET)
    tokens_secret = _text(env, ENV_ENDPOINT_TOKENS_SECRET)
    named_policies = _text(env, ENV_POLICIES_SECRET)
    secret_cache_s = _int(env, ENV_SECRET_CACHE_S, DEFAULT_SECRET_CACHE_S, 0, 86400)
    if settings.auth_mode == "passthrough" and (key_secret or tokens_secret):
        logger.warning(
            "secrets are only read in server-key and oauth auth modes; ignored", extra={"auth_mode": settings.auth_mode}
        )
        key_secret = tokens_secret = named_policies = None
    if settings.auth_mode == "oauth" and tokens_secret:  # access tokens replace the static endpoint tokens
        logger.warning("the endpoint tokens secret is not read in oauth auth mode; ignored")
        tokens_secret = None
    # The policies live beside the tokens, or in a secret of their own (oauth mode's, which has no tokens secret).
    policies_secret = named_policies or tokens_secret
    if not settings.cache:
        table = None
    index_table = _text(env, ENV_INDEX_TABLE) if settings.servers_path else None
    servers_secret = _text(env, ENV_SERVERS_SECRET) if settings.servers_path else None
    if settings.servers_path:
        # The file's ${VAR}s read these variables (on Lambda, not the function's credentials: servers_variables).
        endpoint_options = {"servers_environ": servers_variables(env), **endpoint_options}
        if not index_table and not settings.index_path and _text(env, "AWS_LAMBDA_FUNCTION_NAME"):
            settings = replace(settings, index_path=Path(LAMBDA_INDEX))  # home is read-only on Lambda
    if not (table or bucket or key_secret or policies_secret or index_table or servers_secret):
        _checked(settings, endpoint_options)
        return Endpoint.from_settings(settings, **endpoint_options)

    session = session or _session(env)
    if index_table or servers_secret:
        endpoint_options = {**endpoint_options, **gateway_options(env, session, index_table, servers_secret)}
    _checked(settings, endpoint_options)
    cache = DynamoDBCache(table, client=_client(session, "dynamodb", fast_config())) if table else None
    results = S3ResultStore(bucket, session=session, url_ttl_s=url_ttl_s) if bucket else None
    secrets: SecretsProvider | None = None
    if key_secret or policies_secret:
        from aws_lambda_powertools.utilities.parameters import SecretsProvider

        secrets = SecretsProvider(boto3_client=_client(session, "secretsmanager", fast_config()))
    server_key = secret_provider(key_secret, secret_cache_s, secrets=secrets) if key_secret else None
    endpoint_tokens: Callable[[], Sequence[str]] | None = (
        tokens_provider(tokens_secret, secret_cache_s, secrets=secrets) if tokens_secret else None
    )
    if policies_secret:
        provider = named_policies_provider if named_policies else policies_provider
        endpoint_options = {
            "policies": provider(policies_secret, secret_cache_s, settings.policies, secrets=secrets),
            **endpoint_options,
        }
    if table:
        rates = DynamoRateLimiter(table, client=_client(session, "dynamodb", fast_config()))
        endpoint_options = {"rate_limiter": rates, **endpoint_options}
    return Endpoint.from_settings(
        settings,
        cache=cache,
        results=results,
        server_key=server_key,
        endpoint_tokens=endpoint_tokens,
        **endpoint_options,
    )


def gateway_options(
    env: Mapping[str, str], session: boto3.session.Session, index_table: str | None, servers_secret: str | None
) -> dict[str, Any]:
    """`Endpoint.from_settings` options of a gateway on AWS: the DynamoDB tool store, which the serving function
    only reads (the scheduled sync function writes it) and re-reads when it changed; the servers file's `${VAR}`
    values from a secret."""
    options: dict[str, Any] = {}
    if index_table:
        from lambda_fn.toolstore import DynamoToolStore

        options["tool_store"] = DynamoToolStore(index_table, client=_client(session, "dynamodb", fast_config()))
        options["sync"] = False
        options["poll_s"] = float(_int(env, ENV_INDEX_POLL_S, DEFAULT_INDEX_POLL_S, 0, 86400))  # 0: every request
    if servers_secret:
        options["servers_environ"] = servers_environ(env, servers_secret, session)
    return options


def _checked(settings: Settings, options: Mapping[str, Any]) -> None:
    if settings.servers_path and "servers_environ" in options:
        check_servers_references(settings.servers_path, options["servers_environ"])


# What a servers file's `${VAR}` may not read from a Lambda function's environment: the function's own
# credentials and the runtime's other AWS_* variables (the region excepted), and this project's own secrets, which
# are for the upstream API and the endpoint's callers, not for another server. A value a server needs goes in the
# PMCP_SERVERS_SECRET secret, whose names are all allowed (an AWS key for another account, say).
SERVERS_FILE_ALLOWED_AWS = frozenset({"AWS_REGION", "AWS_DEFAULT_REGION"})
SERVERS_FILE_REFUSED = frozenset({"PMCP_UPSTREAM_KEY", "PMCP_ENDPOINT_TOKENS", "ALPHAVANTAGE_API_KEY"})


def servers_variables(env: Mapping[str, str], secret_values: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables a servers file's `${VAR}` references read: on Lambda (`AWS_LAMBDA_FUNCTION_NAME` set), the
    environment without the variables it may not use (`SERVERS_FILE_REFUSED`, and `AWS_*` but the region);
    elsewhere (`progressive-mcp serve`) the environment as it is; the secret's values over either."""
    allowed = dict(env)
    if _text(env, "AWS_LAMBDA_FUNCTION_NAME"):
        allowed = {name: value for name, value in env.items() if not _refused_on_lambda(name)}
    return {**allowed, **(secret_values or {})}


def check_servers_references(servers_path: str | Path, variables: Mapping[str, str]) -> None:
    """Refuse, with a message saying why and what to do instead, a servers file that references a variable
    `servers_variables` held back (rather than the file's own "is not set")."""
    try:
        text = Path(servers_path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return  # load_servers says what is wrong with the file
    held_back = sorted(
        {name for name in _SERVERS_REFERENCE.findall(text) if name not in variables and _refused_on_lambda(name)}
    )
    if held_back:
        names = ", ".join("${" + name + "}" for name in held_back)
        raise ConfigError(
            f"{servers_path}: {names} may not be used in a servers file on AWS Lambda: the function's own "
            "credentials and AWS_* variables (other than AWS_REGION and AWS_DEFAULT_REGION) and progressive-mcp's "
            f"own secrets stay with the function; put the values a server needs in the {ENV_SERVERS_SECRET} secret"
        )


def _refused_on_lambda(name: str) -> bool:
    return name in SERVERS_FILE_REFUSED or (name.startswith("AWS_") and name not in SERVERS_FILE_ALLOWED_AWS)


_SERVERS_REFERENCE = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)\}")  # as gateway.config reads them


def servers_environ(env: Mapping[str, str], secret_id: str, session: boto3.session.Session) -> dict[str, str]:
    """The environment a servers file's `${VAR}` references read: `servers_variables(env)`, with the secret's
    JSON object of variable → value over it. Raises ConfigError (naming the secret, never a value) for any other
    content."""
    from aws_lambda_powertools.utilities.parameters import SecretsProvider

    text = SecretsProvider(boto3_client=_client(session, "secretsmanager", fast_config())).get(secret_id)
    data = _json_or_none(str(text))
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        raise ConfigError(
            f"the secret {secret_id} ({ENV_SERVERS_SECRET}) must hold a JSON object of variable name → string value, "
            "the values of the servers file's ${VAR} references"
        )
    return servers_variables(env, data)


def _session(env: Mapping[str, str]) -> boto3.session.Session:
    import boto3

    region = _text(env, "AWS_REGION") or _text(env, "AWS_DEFAULT_REGION")
    return boto3.session.Session(region_name=region)


def _client(session: boto3.session.Session, service: str, config: Config) -> Any:
    from botocore.exceptions import NoRegionError

    try:
        return session.client(service, config=config)
    except NoRegionError:
        raise ConfigError(f"{service} needs an AWS region: set AWS_REGION (Lambda sets it)") from None


def _text(env: Mapping[str, str], name: str) -> str | None:
    return env.get(name, "").strip() or None


def _int(env: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    raw = _text(env, name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a whole number, not {raw!r}") from None
    if not low <= value <= high:
        raise ConfigError(f"{name} must be between {low} and {high}, not {value}")
    return value
