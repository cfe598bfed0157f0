"""Per-identity policies on AWS under moto: policies beside the tokens in their secret (rotating with them), the
request rate counted in the cache table (DynamoDB, shared by instances), malformed policies refused (503, logged
with the entry's digest and field, never a token), through the Lambda handler."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from test_aws import (  # the moto fixture and the event helpers of the AWS suite
    OLD_TOKEN,
    TABLE,
    TOKEN,
    UPSTREAM_KEY,
    Clock,
    api_event,
    aws,
    bearer,
    client,
    create_bucket,
    create_secret,
    create_table,
    lambda_ctx,
    put_secret,
    rpc,
    server_key_env,
    session,
    structured,
    upstream,
)

from lambda_fn.aws import DynamoRateLimiter, endpoint_from_environment
from lambda_fn.handler import make_handler
from progressive_mcp.offline.sample_upstream import SampleUpstream

__all__ = ["aws", "upstream"]  # fixtures, used by name


def digest(token: str) -> str:
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()[:16]


def listed(handle: Any, token: str) -> dict[str, Any]:
    body = rpc("tools/call", {"name": "TOOL_LIST", "arguments": {}})
    return handle(api_event(body, bearer(token)), lambda_ctx())  # type: ignore[no-any-return]


def categories(result: dict[str, Any]) -> list[str]:
    return [g["name"] for g in structured(result)["categories"]]


def test_policies_beside_the_tokens_in_their_secret_rotate_with_them(aws: None, upstream: SampleUpstream) -> None:
    create_table()
    create_bucket()
    create_secret("pmcp/upstream-key", json.dumps({"api_key": UPSTREAM_KEY}))
    secret = {
        "tokens": [OLD_TOKEN, TOKEN],
        "policies": {
            "identities": [
                {"token": digest(OLD_TOKEN), "categories": ["forex"]},
                {"token": digest(TOKEN), "categories": ["crypto"], "rate": 2},
            ]
        },
    }
    create_secret("pmcp/tokens", json.dumps(secret))
    env = server_key_env(upstream, PMCP_SECRET_CACHE_S="0")
    handle = make_handler(endpoint_from_environment(env, session=session()))
    assert categories(listed(handle, OLD_TOKEN)) == ["forex"]
    assert categories(listed(handle, TOKEN)) == ["crypto"]
    # The rate is counted in the cache table: the third request of the minute is refused.
    third = listed(handle, TOKEN)
    if third["statusCode"] == 200:  # the minute turned between the requests: one more fills the new window
        listed(handle, TOKEN)
        third = listed(handle, TOKEN)
    assert third["statusCode"] == 429 and 1 <= int(third["headers"]["Retry-After"]) <= 60
    items = client("dynamodb").scan(TableName=TABLE)["Items"]
    counters = [i for i in items if i["pk"]["S"].startswith("rate#")]
    assert counters and all("expires_at" in i for i in counters)
    assert not any(TOKEN in json.dumps(i) for i in counters)
    # Rotation: the old token goes, a new policy for the current one comes, in one write of the secret.
    rotated = {
        "tokens": [TOKEN],
        "policies": {"identities": [{"token": digest(TOKEN), "categories": ["forex", "crypto"]}]},
    }
    put_secret("pmcp/tokens", json.dumps(rotated))
    assert sorted(categories(listed(handle, TOKEN))) == ["crypto", "forex"]
    assert listed(handle, OLD_TOKEN)["statusCode"] == 401


def test_malformed_policies_in_the_secret_are_a_503_logged_with_the_digest_and_field(
    aws: None, upstream: SampleUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    create_table()
    create_bucket()
    create_secret("pmcp/upstream-key", json.dumps({"api_key": UPSTREAM_KEY}))
    bad = {"tokens": [TOKEN], "policies": {"identities": [{"token": digest(TOKEN), "read_only": "yes"}]}}
    create_secret("pmcp/tokens", json.dumps(bad))
    handle = make_handler(endpoint_from_environment(server_key_env(upstream), session=session()))
    answer = listed(handle, TOKEN)
    assert answer["statusCode"] == 503
    assert digest(TOKEN) in caplog.text and "read_only" in caplog.text
    assert TOKEN not in caplog.text + answer["body"]


def test_the_dynamodb_counter_is_shared_by_instances(aws: None) -> None:
    create_table()
    clock = Clock(1_800_000_015.0)
    first = DynamoRateLimiter(TABLE, client=client("dynamodb"), clock=clock)
    second = DynamoRateLimiter(TABLE, client=client("dynamodb"), clock=clock)
    assert [first.hit("token:abc", 3), second.hit("token:abc", 3), first.hit("token:abc", 3)] == [None] * 3
    assert second.hit("token:abc", 3) == 45.0
    assert first.hit("token:other", 3) is None
    clock.now += 45  # the next minute: a new window
    assert second.hit("token:abc", 3) is None


def test_oauth_policies_come_from_their_own_secret_and_rotate(aws: None, upstream: SampleUpstream) -> None:
    """oauth mode has no tokens secret: PMCP_POLICIES_SECRET holds the policies (as the stack's oauth mode makes
    it); the placeholder means none yet (the environment's, here none: every subject may use every tool), a written
    document applies within the secret cache time (0 here), a malformed one is a 503 logged with the field."""
    from oauth_issuer import loopback_issuer

    create_table()
    create_bucket()
    create_secret("pmcp/upstream-key", json.dumps({"api_key": UPSTREAM_KEY}))
    create_secret("pmcp/policies", "REPLACE_ME: aws secretsmanager put-secret-value --secret-id <this secret> ...")
    resource = "https://r2d2c3po9x.execute-api.us-east-1.amazonaws.com/mcp"
    with loopback_issuer() as issuer:
        env = {
            **server_key_env(upstream, PMCP_SECRET_CACHE_S="0", PMCP_POLICIES_SECRET="pmcp/policies"),
            "PMCP_AUTH_MODE": "oauth",
            "PMCP_OAUTH_ISSUER": issuer.url,
        }
        handle = make_handler(endpoint_from_environment(env, session=session()))
        desk = issuer.mint(resource, sub="fx-desk-user")
        other = issuer.mint(resource, sub="someone-else")
        assert len(categories(listed(handle, desk))) > 2  # the placeholder: no policies yet
        put_secret(
            "pmcp/policies",
            json.dumps({"identities": [{"subject": "fx-desk-user", "categories": ["forex"], "rate": 2}]}),
        )
        assert categories(listed(handle, desk)) == ["forex"]
        assert listed(handle, other)["statusCode"] == 403  # default deny: no entry, no tools
        third = listed(handle, desk)
        if third["statusCode"] == 200:  # the minute turned between the requests
            listed(handle, desk)
            third = listed(handle, desk)
        assert third["statusCode"] == 429 and "Retry-After" in third["headers"]
        # Rotation in one write, in the {"policies": ...} form too.
        put_secret("pmcp/policies", json.dumps({"policies": {"default": {"categories": ["crypto"]}}}))
        assert categories(listed(handle, other)) == ["crypto"]
        put_secret("pmcp/policies", json.dumps({"identities": [{"subject": "x", "rate": "fast"}]}))
        assert listed(handle, other)["statusCode"] == 503
