"""The AWS-backed pieces (lambda_fn.aws) under moto: secrets, the DynamoDB cache, the S3 result store, and the
Lambda handler wired from environment variables, end to end against the offline sample upstream.

moto patches botocore in this process; the sample upstream is real HTTP on 127.0.0.1 (httpx, which moto leaves
alone). Powertools' secret cache reads `datetime.now()`; `clock` moves it forward instead of sleeping.
"""

from __future__ import annotations

import base64
import datetime as dt
import functools
import json
import os
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import boto3
import httpx
import pytest
from aws_lambda_powertools.utilities import parameters
from aws_lambda_powertools.utilities.parameters import base as parameters_base
from botocore.exceptions import ReadTimeoutError
from moto import mock_aws

from lambda_fn import handler as handler_module
from lambda_fn.aws import (
    SECRET_PLACEHOLDER,
    CacheUnavailable,
    DynamoDBCache,
    S3ResultStore,
    endpoint_from_environment,
    parse_endpoint_tokens,
    parse_upstream_key,
    s3_config,
    secret_provider,
    tokens_provider,
)
from lambda_fn.handler import make_handler
from lambda_fn.local import LocalContext
from progressive_mcp.calls.cache import CachedAnswer, MemoryCache
from progressive_mcp.errors import ConfigError
from progressive_mcp.offline.sample_upstream import SampleUpstream
from progressive_mcp.settings import Settings
from progressive_mcp.surfaces.endpoint import Endpoint, HttpRequest
from progressive_mcp.surfaces.surface import CallContext, CallRecord, Surface
from progressive_mcp.tokens import count_tokens, dumps

ROOT = Path(__file__).resolve().parent.parent
EVENTS = Path(__file__).resolve().parent / "fixtures" / "events"
REGION = "us-east-1"
TABLE = "pmcp-test-cache"
BUCKET = "pmcp-test-results"
# Distinctive values that must never reach a response body or a log line.
UPSTREAM_KEY = "UpStReAm-KeY-9f3c1a"
TOKEN = "EnDpOiNt-ToKeN-7d2e4b-aws-0001"
OLD_TOKEN = "OlD-ToKeN-11aa-rotated-aws-0002"


# --- fixtures and helpers ----------------------------------------------------------------------------


@functools.cache
def session() -> boto3.session.Session:
    """One session for every test: it loads each service model once (a new session takes ~80 ms a client)."""
    return boto3.session.Session(region_name=REGION)


def client(service: str) -> Any:
    return session().client(service)


class Clock:
    """A settable epoch clock (seconds)."""

    def __init__(self, now: float = 1_795_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("AWS_PROFILE", "AWS_REGION", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    parameters.clear_caches()
    with mock_aws():
        yield
    parameters.clear_caches()


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dt.timedelta]]:
    """Powertools' parameter cache clock: append a timedelta to move time forward."""
    offsets: list[dt.timedelta] = []
    start = dt.datetime.now()

    class MovableDatetime(dt.datetime):
        @classmethod
        def now(cls, tz: dt.tzinfo | None = None) -> MovableDatetime:
            moved = start + sum(offsets, dt.timedelta())
            return cls.fromtimestamp(moved.timestamp(), tz)

    monkeypatch.setattr(parameters_base, "datetime", MovableDatetime)
    yield offsets


@pytest.fixture
def upstream() -> Iterator[SampleUpstream]:
    with SampleUpstream() as up:
        yield up


def create_table(name: str = TABLE) -> None:
    """The table as the stack creates it: `pk` string hash key, on demand, TTL on `expires_at`."""
    dynamodb = client("dynamodb")
    dynamodb.create_table(
        TableName=name,
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )
    dynamodb.update_time_to_live(
        TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires_at"}
    )


def create_bucket(name: str = BUCKET) -> None:
    client("s3").create_bucket(Bucket=name)


def create_secret(name: str, value: str) -> str:
    return str(client("secretsmanager").create_secret(Name=name, SecretString=value)["ARN"])


def put_secret(name: str, value: str) -> None:
    client("secretsmanager").put_secret_value(SecretId=name, SecretString=value)


def counting_secrets() -> tuple[parameters.SecretsProvider, list[str]]:
    """A Powertools SecretsProvider whose client records every GetSecretValue it sends."""
    secrets_client = client("secretsmanager")
    sent: list[str] = []
    secrets_client.meta.events.register(
        "provide-client-params.secrets-manager.GetSecretValue", lambda params, **_: sent.append(params["SecretId"])
    )
    return parameters.SecretsProvider(boto3_client=secrets_client), sent


def fresh_secrets() -> parameters.SecretsProvider:
    """A Powertools secrets provider with an empty cache, on the shared session."""
    return parameters.SecretsProvider(boto3_client=client("secretsmanager"))


def rpc(method: str, params: dict[str, Any] | None = None, request_id: Any = 1) -> str:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message)


def tool_call(tool: str, arguments: dict[str, Any], request_id: Any = 1) -> str:
    return rpc(
        "tools/call", {"name": "TOOL_CALL", "arguments": {"tool_name": tool, "arguments": arguments}}, request_id
    )


def api_event(body: str, headers: dict[str, str] | None = None, query: str = "") -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS / "apigw_http_v2.json").read_text())
    event["body"] = body
    event["headers"]["content-length"] = str(len(body.encode()))
    event["headers"].update({k.lower(): v for k, v in (headers or {}).items()})
    event["rawQueryString"] = query
    return event


def structured(result: dict[str, Any]) -> dict[str, Any]:
    answer = json.loads(result["body"])
    assert "result" in answer, answer
    content: dict[str, Any] = answer["result"]["structuredContent"]
    return content


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip().startswith("{")]


def service_emf(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The EMF lines whose only dimension is `service`."""
    return [
        line for line in lines if "_aws" in line and line["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["service"]]
    ]


def metrics_of(emf: dict[str, Any]) -> dict[str, float]:
    names = [m["Name"] for m in emf["_aws"]["CloudWatchMetrics"][0]["Metrics"]]
    return {name: sum(emf[name]) if isinstance(emf[name], list) else emf[name] for name in names}


class CurrentStdout:
    """Writes to whatever sys.stdout is now (capsys swaps it), for the Powertools Logger bound at import."""

    def write(self, text: str) -> int:
        return sys.stdout.write(text)

    def flush(self) -> None:
        sys.stdout.flush()


@pytest.fixture
def stdout_logs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    monkeypatch.delenv("POWERTOOLS_DEV", raising=False)
    monkeypatch.setattr(handler_module.logger.registered_handler, "stream", CurrentStdout())


def lambda_env(upstream: SampleUpstream, **extra: str) -> dict[str, str]:
    env = {
        "PMCP_UPSTREAM_URL": upstream.url,
        "PMCP_UPSTREAM_RETRIES": "0",
        "PMCP_CACHE_TABLE": TABLE,
        "PMCP_RESULTS_BUCKET": BUCKET,
        "AWS_REGION": REGION,
    }
    env.update(extra)
    return env


def surface_with(upstream: SampleUpstream, **pieces: Any) -> Surface:
    settings = Settings.from_env({}, upstream_url=upstream.url, upstream_retries=0, **pieces.pop("settings", {}))
    return Surface.from_settings(settings, **pieces)


def call(surface: Surface, tool: str, arguments: dict[str, Any], api_key: str = "key-one-1") -> tuple[Any, CallRecord]:
    record = CallRecord()
    ctx = CallContext(api_key=api_key, record=record)
    return surface.call_tool_wire("TOOL_CALL", {"tool_name": tool, "arguments": arguments}, ctx), record


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def lambda_ctx(request_id: str = "aws-req-1") -> LocalContext:
    return LocalContext(aws_request_id=request_id)


# --- secrets -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stored", "expected"),
    [
        (f"  {UPSTREAM_KEY}\n", UPSTREAM_KEY),
        (json.dumps({"api_key": f" {UPSTREAM_KEY} "}), UPSTREAM_KEY),
        (json.dumps({"api_key": UPSTREAM_KEY, "note": "rotated 2026-11"}), UPSTREAM_KEY),
    ],
)
def test_upstream_key_from_secret(aws: None, stored: str, expected: str) -> None:
    arn = create_secret("pmcp/upstream-key", stored)
    assert secret_provider("pmcp/upstream-key", 300, secrets=fresh_secrets())() == expected
    assert secret_provider(arn, 300, secrets=fresh_secrets())() == expected  # by ARN too, as the stack passes it


@pytest.mark.parametrize(
    ("stored", "expected"),
    [
        (TOKEN, (TOKEN,)),
        (f" {TOKEN} ,{OLD_TOKEN},, ", (TOKEN, OLD_TOKEN)),
        (f"{TOKEN}\n{OLD_TOKEN}\n", (TOKEN, OLD_TOKEN)),
        (json.dumps([TOKEN, OLD_TOKEN, TOKEN]), (TOKEN, OLD_TOKEN)),
        (json.dumps({"tokens": [OLD_TOKEN, TOKEN]}), (OLD_TOKEN, TOKEN)),
        (json.dumps({"tokens": []}), ()),
        (f"{TOKEN},{SECRET_PLACEHOLDER}", (TOKEN,)),
    ],
)
def test_endpoint_tokens_from_secret(aws: None, stored: str, expected: tuple[str, ...]) -> None:
    create_secret("pmcp/tokens", stored)
    assert tokens_provider("pmcp/tokens", 300, secrets=fresh_secrets())() == expected


def test_secret_is_read_once_per_max_age(aws: None, clock: list[dt.timedelta]) -> None:
    create_secret("pmcp/upstream-key", "first-key")
    secrets, sent = counting_secrets()
    provider = secret_provider("pmcp/upstream-key", 300, secrets=secrets)
    assert provider() == "first-key"
    put_secret("pmcp/upstream-key", "second-key")
    clock.append(dt.timedelta(seconds=299))
    assert [provider() for _ in range(5)] == ["first-key"] * 5  # cached: Secrets Manager is not asked again
    assert len(sent) == 1
    clock.append(dt.timedelta(seconds=2))
    assert provider() == "second-key"  # past max_age: read again
    assert len(sent) == 2


def test_secret_with_max_age_zero_is_read_every_time(aws: None) -> None:
    create_secret("pmcp/tokens", OLD_TOKEN)
    secrets, sent = counting_secrets()
    provider = tokens_provider("pmcp/tokens", 0, secrets=secrets)
    assert provider() == (OLD_TOKEN,)
    put_secret("pmcp/tokens", f"{OLD_TOKEN},{TOKEN}")  # rotation: add the new token first
    assert provider() == (OLD_TOKEN, TOKEN)
    put_secret("pmcp/tokens", TOKEN)  # then remove the old one
    assert provider() == (TOKEN,)
    assert len(sent) == 3


def test_default_powertools_provider_caches_too(aws: None, clock: list[dt.timedelta]) -> None:
    create_secret("pmcp/upstream-key", "first-key")
    provider = secret_provider("pmcp/upstream-key", 60)  # parameters.get_secret and its default provider
    assert provider() == "first-key"
    put_secret("pmcp/upstream-key", "second-key")
    assert provider() == "first-key"
    clock.append(dt.timedelta(seconds=61))
    assert provider() == "second-key"


@pytest.mark.parametrize(
    "stored",
    [
        " ",
        SECRET_PLACEHOLDER,
        f"{SECRET_PLACEHOLDER}: put the Alpha Vantage key here",
        json.dumps({"api_key": SECRET_PLACEHOLDER}),
        json.dumps({"api_key": ""}),
        json.dumps({"key": UPSTREAM_KEY}),  # the wrong field: never guessed at
        "{" + UPSTREAM_KEY,  # broken JSON
    ],
)
def test_unconfigured_upstream_key_is_none_and_logged_once_without_the_value(
    aws: None, stored: str, caplog: pytest.LogCaptureFixture
) -> None:
    create_secret("pmcp/upstream-key", stored)
    provider = secret_provider("pmcp/upstream-key", 300, secrets=fresh_secrets())
    assert [provider(), provider(), provider()] == [None, None, None]
    warnings = [r for r in caplog.records if r.name == "lambda_fn.aws"]
    assert len(warnings) == 1 and warnings[0].levelname == "WARNING"
    assert UPSTREAM_KEY not in caplog.text


def test_tokens_shorter_than_the_minimum_are_left_out_and_logged_without_them(caplog: pytest.LogCaptureFixture) -> None:
    assert parse_endpoint_tokens("pmcp/tokens", f"{TOKEN},letmein,{OLD_TOKEN[:23]}") == (TOKEN,)
    (warning,) = [r for r in caplog.records if r.name == "lambda_fn.aws"]
    assert warning.levelname == "WARNING" and "2 tokens shorter than 24 characters" in warning.getMessage()
    assert "letmein" not in caplog.text and OLD_TOKEN[:23] not in caplog.text and TOKEN not in caplog.text


def test_unconfigured_tokens_are_empty(caplog: pytest.LogCaptureFixture) -> None:
    for stored in ("", "  ", SECRET_PLACEHOLDER, "[1, 2]", '{"tokens": "abc"}', "[" + TOKEN):
        caplog.clear()
        assert parse_endpoint_tokens("pmcp/tokens", stored) == ()
        (warning,) = [r for r in caplog.records if r.name == "lambda_fn.aws"]  # one line says it all
        assert warning.levelname == "WARNING" and "401" in warning.getMessage()
        assert TOKEN not in caplog.text
    assert parse_upstream_key("pmcp/upstream-key", "") is None


def server_key_env(upstream: SampleUpstream, **extra: str) -> dict[str, str]:
    return lambda_env(
        upstream,
        PMCP_AUTH_MODE="server-key",
        PMCP_UPSTREAM_KEY_SECRET="pmcp/upstream-key",
        PMCP_ENDPOINT_TOKENS_SECRET="pmcp/tokens",
        **extra,
    )


@pytest.mark.parametrize("missing", ["pmcp/upstream-key", "pmcp/tokens"])
def test_unreadable_secret_is_a_503_that_names_nothing(
    aws: None, upstream: SampleUpstream, missing: str, caplog: pytest.LogCaptureFixture
) -> None:
    create_table()
    create_bucket()
    for name, value in (("pmcp/upstream-key", UPSTREAM_KEY), ("pmcp/tokens", TOKEN)):
        if name != missing:
            create_secret(name, value)
    with pytest.raises(parameters.GetParameterError):
        secret_provider(missing, 300, secrets=fresh_secrets())()
    endpoint = endpoint_from_environment(server_key_env(upstream), session=session())
    result = make_handler(endpoint)(
        api_event(tool_call("GLOBAL_QUOTE", {"symbol": "IBM"}), bearer(TOKEN)), lambda_ctx()
    )
    assert result["statusCode"] == 503
    assert result["headers"]["Retry-After"] == "5"
    assert missing not in result["body"] and "arn:" not in result["body"] and UPSTREAM_KEY not in result["body"]
    assert upstream.requests_snapshot() == []
    assert UPSTREAM_KEY not in caplog.text and TOKEN not in caplog.text


def test_placeholder_key_tells_the_caller_the_operator_must_configure_one(aws: None, upstream: SampleUpstream) -> None:
    create_table()
    create_secret("pmcp/upstream-key", SECRET_PLACEHOLDER)
    create_secret("pmcp/tokens", TOKEN)
    endpoint = endpoint_from_environment(server_key_env(upstream), session=session())
    result = make_handler(endpoint)(
        api_event(tool_call("GLOBAL_QUOTE", {"symbol": "IBM"}), bearer(TOKEN)), lambda_ctx()
    )
    assert result["statusCode"] == 200
    error = structured(result)["error"]
    assert error["type"] == "MissingApiKey" and "operator" in error["message"]
    assert upstream.requests_snapshot() == []


def test_no_tokens_means_401_for_everyone(aws: None, upstream: SampleUpstream) -> None:
    create_secret("pmcp/upstream-key", UPSTREAM_KEY)
    create_secret("pmcp/tokens", SECRET_PLACEHOLDER)
    endpoint = endpoint_from_environment(
        server_key_env(upstream, PMCP_CACHE_TABLE="", PMCP_RESULTS_BUCKET=""), session=session()
    )
    for presented in (SECRET_PLACEHOLDER, TOKEN, ""):
        result = make_handler(endpoint)(api_event(rpc("tools/list"), bearer(presented)), lambda_ctx())
        assert result["statusCode"] == 401


# --- the DynamoDB cache ------------------------------------------------------------------------------


def test_cache_round_trip_json_and_csv(aws: None) -> None:
    create_table()
    cache = DynamoDBCache(TABLE, client=client("dynamodb"), clock=Clock(1_795_000_001.0))
    quote = {"Global Quote": {"01. symbol": "IBM", "05. price": "245.0000", "note": "café ✓"}}
    table = "timestamp,open\r\n2026-11-20,245.0\r\n"
    json_answer = CachedAnswer(quote, "json", 1_795_000_000.25, 1_795_000_060, size=321)
    csv_answer = CachedAnswer(table, "csv", 1_795_000_000.5, 1_795_003_600, size=len(table))
    cache.put("k-json", json_answer)
    cache.put("k-csv", csv_answer)
    assert cache.get("k-json") == json_answer
    assert cache.get("k-csv") == csv_answer
    assert cache.get("k-absent") is None

    item = client("dynamodb").get_item(TableName=TABLE, Key={"pk": {"S": "k-csv"}})["Item"]
    assert set(item) == {"pk", "expires_at", "cached_at", "format", "size", "body"}
    assert item["expires_at"] == {"N": "1795003600"}  # whole epoch seconds: the table's TTL attribute
    assert zlib.decompress(item["body"]["B"]).decode() == table  # CSV stored as its text, compressed


def test_cache_round_trip_of_a_text_answer_and_a_json_string(aws: None) -> None:
    """A REST answer in text/plain or XML is kept as its text; a JSON answer that is one string stays JSON."""
    create_table()
    cache = DynamoDBCache(TABLE, client=client("dynamodb"), clock=Clock(1_795_000_001.0))
    text_answer = CachedAnswer("<thing id='1'>café</thing>", "text", 1_795_000_000.5, 1_795_003_600, size=30)
    json_string = CachedAnswer("pong", "json", 1_795_000_000.5, 1_795_003_600, size=6)
    cache.put("k-text", text_answer)
    cache.put("k-json-string", json_string)
    assert cache.get("k-text") == text_answer
    assert cache.get("k-json-string") == json_string
    item = client("dynamodb").get_item(TableName=TABLE, Key={"pk": {"S": "k-text"}})["Item"]
    assert zlib.decompress(item["body"]["B"]).decode() == text_answer.payload


def test_cache_expiry_is_checked_on_read(aws: None) -> None:
    create_table()
    clock = Clock()
    cache = DynamoDBCache(TABLE, client=client("dynamodb"), clock=clock)
    cache.put("k", CachedAnswer({"a": 1}, "json", clock.now, clock.now + 60))
    clock.now += 59.5
    assert cache.get("k") is not None
    clock.now += 0.5
    assert cache.get("k") is None  # expired, though DynamoDB's TTL sweep has not deleted it yet
    assert "Item" in client("dynamodb").get_item(TableName=TABLE, Key={"pk": {"S": "k"}})


def test_expires_at_rounds_up_never_down(aws: None) -> None:
    create_table()
    clock = Clock(1000.0)
    cache = DynamoDBCache(TABLE, client=client("dynamodb"), clock=clock)
    cache.put("k", CachedAnswer([1], "json", 1000.0, 1000.4))
    answer = cache.get("k")
    assert answer is not None and answer.expires_at == 1001.0


def test_too_large_answer_is_skipped_not_raised(aws: None, caplog: pytest.LogCaptureFixture) -> None:
    create_table()
    cache = DynamoDBCache(TABLE, client=client("dynamodb"))
    incompressible = base64.b64encode(os.urandom(450_000)).decode()  # ~600 KB that zlib cannot shrink to 400 KB
    cache.put("big", CachedAnswer({"blob": incompressible}, "json", 1.0, 4e9))
    assert cache.get("big") is None
    roomy = base64.b64encode(os.urandom(250_000)).decode()  # ~330 KB: one item holds it
    cache.put("fits", CachedAnswer({"blob": roomy}, "json", 1.0, 4e9))
    assert cache.get("fits") is not None
    # Far beyond the limit: skipped before compressing.
    tiny = DynamoDBCache(TABLE, client=client("dynamodb"), max_item_bytes=1000)
    tiny.put("huge", CachedAnswer("x" * 50_000, "csv", 1.0, 4e9))
    assert tiny.get("huge") is None
    assert incompressible[:40] not in caplog.text and "xxxxxxxx" not in caplog.text


def test_cache_errors_propagate_to_the_caller(aws: None) -> None:
    cache = DynamoDBCache("no-such-table", client=client("dynamodb"))
    with pytest.raises(Exception, match="ResourceNotFound"):
        cache.get("k")
    with pytest.raises(Exception, match="ResourceNotFound"):
        cache.put("k", CachedAnswer({}, "json", 1.0, 4e9))


class TimingOutClient:
    """A DynamoDB client that always times out (fakes over mocks)."""

    def __init__(self) -> None:
        self.calls = 0

    def get_item(self, **_: Any) -> dict[str, Any]:
        self.calls += 1
        raise ReadTimeoutError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com")

    put_item = get_item


def test_a_timing_out_cache_is_skipped_for_a_cooldown() -> None:
    client, clock = TimingOutClient(), Clock()
    cache = DynamoDBCache(TABLE, client=client, clock=clock, cooldown_s=15)
    with pytest.raises(ReadTimeoutError):
        cache.get("k")
    with pytest.raises(CacheUnavailable):
        cache.put("k", CachedAnswer({}, "json", 1.0, 4e9))  # no second timeout to wait for
    assert client.calls == 1
    clock.now += 15
    with pytest.raises(ReadTimeoutError):
        cache.get("k")
    assert client.calls == 2


@pytest.mark.parametrize("failure", ["no-such-table", "deleted-table"])
def test_failing_table_degrades_to_a_direct_call(aws: None, upstream: SampleUpstream, failure: str) -> None:
    create_table()
    cache = DynamoDBCache(TABLE if failure == "deleted-table" else "no-such-table", client=client("dynamodb"))
    if failure == "deleted-table":
        client("dynamodb").delete_table(TableName=TABLE)
    surface = surface_with(upstream, cache=cache)
    for _ in range(2):
        result, record = call(surface, "GLOBAL_QUOTE", {"symbol": "IBM"})
        assert result["isError"] is False, result
        assert result["structuredContent"]["data"]["Global Quote"]["01. symbol"] == "IBM"
        assert record.cache == "error"
        assert "cached_at" not in result["structuredContent"]
    assert len(upstream.requests_snapshot()) == 2


def test_surface_with_the_table_answers_the_second_call_from_it(aws: None, upstream: SampleUpstream) -> None:
    create_table()
    surface = surface_with(upstream, cache=DynamoDBCache(TABLE, client=client("dynamodb")))
    first, first_record = call(surface, "TIME_SERIES_DAILY", {"symbol": "IBM", "datatype": "csv"})
    second, second_record = call(surface, "TIME_SERIES_DAILY", {"symbol": "IBM", "datatype": "csv"})
    assert (first_record.cache, second_record.cache) == ("miss", "hit")
    assert second_record.upstream_ms is None
    assert second["structuredContent"]["data"] == first["structuredContent"]["data"]
    assert "cached_at" in second["structuredContent"]
    assert len(upstream.requests_snapshot()) == 1


# --- the S3 result store -----------------------------------------------------------------------------


def _object_key(url: str) -> str:
    parts = urlsplit(url)
    key = unquote(parts.path.lstrip("/"))
    return key.removeprefix(f"{BUCKET}/")  # path-style URLs carry the bucket in the path


@pytest.mark.parametrize("datatype", ["json", "csv"])
def test_large_result_is_offloaded_to_s3(aws: None, upstream: SampleUpstream, datatype: str) -> None:
    create_bucket()
    store = S3ResultStore(BUCKET, client=session().client("s3", config=s3_config()))
    surface = surface_with(upstream, results=store, settings={"max_result_tokens": 500})
    arguments = {"symbol": "IBM", "datatype": datatype}
    result, _ = call(surface, "TIME_SERIES_DAILY", arguments)
    assert result["isError"] is False
    envelope = result["structuredContent"]
    assert "truncated" in envelope
    assert "full_result.url" in envelope["truncated"]["note"]
    full = envelope["full_result"]
    assert full["format"] == datatype
    query = parse_qs(urlsplit(full["url"]).query)
    assert "X-Amz-Signature" in query and query["X-Amz-Expires"] == ["900"]
    assert query["X-Amz-Algorithm"] == ["AWS4-HMAC-SHA256"]
    expires = dt.datetime.fromisoformat(full["expires_at"].replace("Z", "+00:00"))
    assert 880 <= (expires - dt.datetime.now(dt.UTC)).total_seconds() <= 901
    assert count_tokens(dumps(envelope)) <= 500
    assert count_tokens(result["content"][0]["text"]) <= 500

    stored = client("s3").get_object(Bucket=BUCKET, Key=_object_key(full["url"]))
    body = stored["Body"].read()
    assert full["bytes"] == len(body)
    direct = httpx.get(upstream.url, params={"function": "TIME_SERIES_DAILY", "apikey": "key-one-1", **arguments}).text
    if datatype == "csv":
        assert stored["ContentType"].startswith("text/csv")
        assert body.decode() == direct  # byte for byte what the upstream sent
    else:
        assert stored["ContentType"] == "application/json"
        assert json.loads(body) == json.loads(direct)


def test_presigned_url_uses_the_regional_endpoint(aws: None) -> None:
    create_bucket()
    store = S3ResultStore(BUCKET, client=session().client("s3", config=s3_config()), url_ttl_s=120, clock=Clock(1000.0))
    stored = store.put("X/abc.json", b"{}", "application/json")
    assert stored.expires_at == 1120.0
    parts = urlsplit(stored.url)
    assert parts.scheme == "https" and parts.hostname == f"{BUCKET}.s3.{REGION}.amazonaws.com"
    assert parse_qs(parts.query)["X-Amz-Expires"] == ["120"]
    assert _object_key(stored.url) == "results/X/abc.json"


def test_handler_offloads_through_the_bucket_from_the_environment(aws: None, upstream: SampleUpstream) -> None:
    create_bucket()
    env = lambda_env(upstream, PMCP_CACHE_TABLE="", PMCP_MAX_RESULT_TOKENS="500")
    handle = make_handler(endpoint_from_environment(env, session=session()))
    result = handle(
        api_event(tool_call("TIME_SERIES_DAILY", {"symbol": "IBM"}), {"x-api-key": "key-one-1"}), lambda_ctx()
    )
    full = structured(result)["full_result"]
    assert "X-Amz-Signature=" in full["url"] and "X-Amz-Expires=900" in full["url"]
    stored = client("s3").get_object(Bucket=BUCKET, Key=_object_key(full["url"]))
    assert len(stored["Body"].read()) == full["bytes"]


def test_without_a_store_the_preview_stays(aws: None, upstream: SampleUpstream) -> None:
    surface = surface_with(upstream, settings={"max_result_tokens": 500})
    result, _ = call(surface, "TIME_SERIES_DAILY", {"symbol": "IBM"})
    envelope = result["structuredContent"]
    assert "truncated" in envelope and "full_result" not in envelope
    assert count_tokens(dumps(envelope)) <= 500


def test_a_failing_store_leaves_the_preview(aws: None, upstream: SampleUpstream) -> None:
    store = S3ResultStore("no-such-bucket", client=client("s3"))
    surface = surface_with(upstream, results=store, settings={"max_result_tokens": 500})
    result, _ = call(surface, "TIME_SERIES_DAILY", {"symbol": "IBM"})
    assert result["isError"] is False
    assert "truncated" in result["structuredContent"] and "full_result" not in result["structuredContent"]


# --- wiring from the environment ----------------------------------------------------------------------


def test_environment_wires_the_aws_pieces(aws: None, upstream: SampleUpstream) -> None:
    endpoint = endpoint_from_environment(lambda_env(upstream, PMCP_RESULT_URL_TTL_S="600"), session=session())
    assert isinstance(endpoint.surface.cache, DynamoDBCache) and endpoint.surface.cache.table_name == TABLE
    assert isinstance(endpoint.surface.results, S3ResultStore) and endpoint.surface.results.url_ttl_s == 600
    assert endpoint.surface.results._client is None  # made on the first offload, not at cold start

    plain = endpoint_from_environment({"PMCP_UPSTREAM_URL": upstream.url}, session=session())
    assert isinstance(plain.surface.cache, MemoryCache) and plain.surface.results is None

    off = endpoint_from_environment(lambda_env(upstream, PMCP_CACHE="off"), session=session())
    assert off.surface.cache is None and isinstance(off.surface.results, S3ResultStore)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("PMCP_RESULT_URL_TTL_S", "15m"),
        ("PMCP_RESULT_URL_TTL_S", "0"),
        ("PMCP_RESULT_URL_TTL_S", "604801"),
        ("PMCP_SECRET_CACHE_S", "-1"),
        ("PMCP_SECRET_CACHE_S", "five"),
    ],
)
def test_invalid_values_name_the_variable(aws: None, upstream: SampleUpstream, name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=name):
        endpoint_from_environment(lambda_env(upstream, **{name: value}), session=session())


def test_server_key_mode_with_the_secrets_end_to_end(
    aws: None, upstream: SampleUpstream, stdout_logs: None, capsys: pytest.CaptureFixture[str], caplog: Any
) -> None:
    create_table()
    create_bucket()
    create_secret("pmcp/upstream-key", json.dumps({"api_key": UPSTREAM_KEY}))
    create_secret("pmcp/tokens", json.dumps({"tokens": [OLD_TOKEN, TOKEN]}))
    handle = make_handler(endpoint_from_environment(server_key_env(upstream), session=session()))
    event = api_event(tool_call("GLOBAL_QUOTE", {"symbol": "IBM"}), bearer(TOKEN))

    first, second = handle(event, lambda_ctx("aws-1")), handle(event, lambda_ctx("aws-2"))
    assert (first["statusCode"], second["statusCode"]) == (200, 200)
    assert "cached_at" not in structured(first) and "cached_at" in structured(second)
    assert structured(second)["data"] == structured(first)["data"]
    (sent,) = upstream.requests_snapshot(unmasked=True)  # one upstream request for the two calls
    assert sent["apikey"] == UPSTREAM_KEY and sent["function"] == "GLOBAL_QUOTE"

    wrong = handle(api_event(tool_call("GLOBAL_QUOTE", {"symbol": "IBM"}), bearer("not-a-token")), lambda_ctx("aws-3"))
    missing = handle(api_event(rpc("tools/list")), lambda_ctx("aws-4"))
    assert (wrong["statusCode"], missing["statusCode"]) == (401, 401)
    assert len(upstream.requests_snapshot()) == 1

    out = capsys.readouterr().out
    lines = json_lines(out)
    requests = [line for line in lines if line.get("message") == "request"]
    assert [line.get("cache") for line in requests] == ["miss", "hit", None, None]
    assert [line["status"] for line in requests] == [200, 200, 401, 401]
    by_service = service_emf(lines)
    assert len(by_service) == 2  # the 401s made no upstream call and touched no cache
    assert metrics_of(by_service[0]) == {"UpstreamCalls": 1, "UpstreamErrors": 0, "CacheMisses": 1}
    assert metrics_of(by_service[1]) == {"CacheHits": 1}
    assert all(line["service"] == "progressive-mcp" for line in by_service)
    everything = "\n".join([out, caplog.text, *(r["body"] for r in (first, second, wrong, missing))])
    for secret in (UPSTREAM_KEY, TOKEN, OLD_TOKEN):
        assert secret not in everything, f"{secret} leaked"


def test_upstream_failures_count_as_upstream_errors(
    aws: None, upstream: SampleUpstream, stdout_logs: None, capsys: pytest.CaptureFixture[str]
) -> None:
    create_table()
    handle = make_handler(endpoint_from_environment(lambda_env(upstream, PMCP_RESULTS_BUCKET=""), session=session()))
    keyed = {"x-api-key": "key-one-1"}
    upstream.faults.status = 503
    handle(api_event(tool_call("GLOBAL_QUOTE", {"symbol": "IBM"}), keyed), lambda_ctx())  # the upstream's fault
    upstream.reset()
    handle(
        api_event(tool_call("GLOBAL_QUOTE", {"symbol": "NOPE"}), keyed), lambda_ctx()
    )  # the caller's: unknown symbol
    handle(api_event(tool_call("GLOBAL_QUOTE", {"symbol": "IBM"}), {"x-api-key": "invalid-key"}), lambda_ctx())
    lines = json_lines(capsys.readouterr().out)
    errors = [line.get("tool_error") for line in lines if line.get("message") == "request"]
    assert errors == ["UpstreamUnavailable", "UpstreamRejected", "MissingApiKey"]
    counts = [metrics_of(line) for line in service_emf(lines)]
    assert [(c["UpstreamCalls"], c["UpstreamErrors"]) for c in counts] == [(1, 1), (1, 0), (1, 0)]


def test_passthrough_keeps_each_callers_answers_apart(aws: None, upstream: SampleUpstream) -> None:
    create_table()
    handle = make_handler(endpoint_from_environment(lambda_env(upstream), session=session()))

    def ask(arguments: dict[str, Any], key: str) -> dict[str, Any]:
        result = handle(api_event(tool_call("GLOBAL_QUOTE", arguments), {"x-api-key": key}), lambda_ctx())
        return structured(result)

    for arguments in ({"symbol": "IBM"}, {"symbol": "IBM", "entitlement": "delayed"}):
        upstream.reset()
        answers = [ask(arguments, key) for key in ("caller-one", "caller-two", "caller-one")]
        assert ["cached_at" in answer for answer in answers] == [False, False, True]
        assert [r["apikey"] for r in upstream.requests_snapshot(unmasked=True)] == ["caller-one", "caller-two"]


def test_server_key_mode_caches_paid_answers(aws: None, upstream: SampleUpstream) -> None:
    create_table()
    create_secret("pmcp/upstream-key", UPSTREAM_KEY)
    create_secret("pmcp/tokens", f"{TOKEN},{OLD_TOKEN}")
    handle = make_handler(
        endpoint_from_environment(server_key_env(upstream, PMCP_RESULTS_BUCKET=""), session=session())
    )
    body = tool_call("GLOBAL_QUOTE", {"symbol": "IBM", "entitlement": "delayed"})
    answers = [structured(handle(api_event(body, bearer(token)), lambda_ctx())) for token in (TOKEN, OLD_TOKEN)]
    assert "cached_at" in answers[1]
    assert len(upstream.requests_snapshot()) == 1


def test_endpoint_handles_requests_without_the_lambda_wrapper(aws: None, upstream: SampleUpstream) -> None:
    create_table()
    endpoint = endpoint_from_environment(lambda_env(upstream), session=session())
    assert isinstance(endpoint, Endpoint)
    request = HttpRequest.build(
        "POST", "/mcp", headers={"content-type": "application/json", "x-api-key": "key-one-1"}, body=rpc("ping")
    )
    assert endpoint.handle(request).status == 200


# --- the module as Lambda loads it --------------------------------------------------------------------


def _fresh_import(env: dict[str, str], code: str) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PMCP_", "AWS_"))}
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**clean, "POWERTOOLS_METRICS_DISABLED": "true", **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.slow
def test_handler_module_imports_boto3_only_when_asked() -> None:
    code = (
        "import sys, json, lambda_fn.handler as h; "
        "print(json.dumps([type(h.ENDPOINT.surface.cache).__name__, type(h.ENDPOINT.surface.results).__name__, "
        "'boto3' in sys.modules]))"
    )
    assert json.loads(_fresh_import({}, code)) == ["MemoryCache", "NoneType", False]
    aws_env = {
        "PMCP_CACHE_TABLE": "some-table",
        "PMCP_RESULTS_BUCKET": "some-bucket",
        "AWS_REGION": "eu-west-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }
    # The clients are made at import and send nothing until used (no network here, no moto in that process).
    assert json.loads(_fresh_import(aws_env, code)) == ["DynamoDBCache", "S3ResultStore", True]


def test_oauth_mode_reads_the_upstream_key_secret_and_checks_access_tokens(
    aws: None, upstream: SampleUpstream, stdout_logs: None, capsys: pytest.CaptureFixture[str], caplog: Any
) -> None:
    """On Lambda, oauth mode keeps the upstream key in its secret (the endpoint tokens secret, never created here,
    is not read) and the resource is the API's own https URL, from the event's Host and X-Forwarded-Proto."""
    from oauth_issuer import loopback_issuer

    create_table()
    create_bucket()
    create_secret("pmcp/upstream-key", json.dumps({"api_key": UPSTREAM_KEY}))
    resource = "https://r2d2c3po9x.execute-api.us-east-1.amazonaws.com/mcp"
    with loopback_issuer() as issuer:
        env = {**server_key_env(upstream), "PMCP_AUTH_MODE": "oauth", "PMCP_OAUTH_ISSUER": issuer.url}
        handle = make_handler(endpoint_from_environment(env, session=session()))
        token = issuer.mint(resource)
        answer = handle(api_event(tool_call("GLOBAL_QUOTE", {"symbol": "IBM"}), bearer(token)), lambda_ctx("o-1"))
        refused = handle(api_event(rpc("tools/list"), bearer(issuer.mint(resource.replace("r2d2", "c3po")))), None)
        missing = handle(api_event(rpc("tools/list")), lambda_ctx("o-3"))
    assert answer["statusCode"] == 200 and structured(answer)["data"]["Global Quote"]["01. symbol"] == "IBM"
    (sent,) = upstream.requests_snapshot(unmasked=True)
    assert sent["apikey"] == UPSTREAM_KEY
    metadata = "https://r2d2c3po9x.execute-api.us-east-1.amazonaws.com/.well-known/oauth-protected-resource/mcp"
    assert missing["statusCode"] == 401
    assert missing["headers"]["WWW-Authenticate"] == f'Bearer resource_metadata="{metadata}"'
    assert refused["statusCode"] == 401 and 'error="invalid_token"' in refused["headers"]["WWW-Authenticate"]
    out = capsys.readouterr().out
    requests = [line for line in json_lines(out) if line.get("message") == "request"]
    assert requests[0]["identity"].startswith("oauth:")
    for part in token.split("."):
        assert part not in out + caplog.text
    assert UPSTREAM_KEY not in out + caplog.text
