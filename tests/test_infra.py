"""The CDK stack (infra/): resources, properties and grants in the synthesized template, cdk-nag, and the knobs.

Each configuration is synthesized once per module (with the real local bundler, whose built asset is cached in
.cache/lambda-asset/, so only the first synthesis of a session may run pip). Five configurations cover both
endpoint kinds and both auth modes; three more turn SnapStart on:

- `default`: StackConfig() as cdk.json has it: HTTP API, server-key, cache on, no alarm email;
- `url`: Function URL, passthrough, cache off, reserved concurrency, alarm email, every optional knob set;
- `url_imported`: Function URL, server-key with an imported upstream-key secret, no reserved concurrency;
- `http_passthrough`: HTTP API, passthrough, alarm email, code mode by default in 384 MB;
- `gateway`: the default stack with a servers file: its layer, the tool store and the scheduled sync function;
- `snap_http`, `snap_url`, `snap_gateway`: `snap_start` on with each endpoint kind, and with the gateway (whose sync
  function stays without it);
- `oauth`: oauth mode with an outside issuer; `cognito`, `cognito_url`: oauth mode with the stack's own Cognito user
  pool, by default and with every Cognito knob set (Function URL, scopes, callback URLs, domain prefix, audience).

Run with: .venv/bin/python -m pytest tests/test_infra.py -q
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, fields
from functools import cached_property
from pathlib import Path
from typing import Any, cast

import pytest
from aws_cdk import App
from aws_cdk.assertions import Annotations, Match, Template
from cdk_nag import AwsSolutionsChecks

from infra import config as config_module
from infra.app import build_app, cdk_json_context, parse_context_args
from infra.bundling import ASSET_INFO, MONTY_BINARY
from infra.config import CODE_MODE_MEMORY_MB, StackConfig
from infra.stack import RESULTS_PREFIX, UPSTREAM_KEY_PLACEHOLDER, ProgressiveMcpStack
from lambda_fn import aws

ROOT = Path(__file__).resolve().parent.parent
IMPORTED_ARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:alphavantage-key-AbC123"
SERVERS_ARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:mcp-servers-env-XyZ789"
OAUTH_ISSUER = "https://login.example.com/realms/mcp"
CONFIGS = {
    "default": StackConfig(),
    "url": StackConfig(
        endpoint="function-url",
        auth_mode="passthrough",
        cache=False,
        reserved_concurrency=5,
        alarm_email="ops@example.com",
        mode="hybrid",
        categories=("stocks", "forex"),
        allowed_origins=("https://app.example.com",),
        max_result_tokens=4000,
        log_level="DEBUG",
        log_retention_days=90,
        memory_mb=512,
        timeout_s=60,
        results_expiry_days=3,
        result_url_ttl_s=600,
        upstream_error_rate_threshold=0.5,
    ),
    "url_imported": StackConfig(endpoint="function-url", upstream_key_secret_arn=IMPORTED_ARN, secret_cache_s=60),
    "http_passthrough": StackConfig(
        auth_mode="passthrough",
        alarm_email="ops@example.com",
        throttle_rate=3,
        throttle_burst=7,
        timeout_s=12,
        mode="code",
        memory_mb=384,
    ),
    "gateway": StackConfig(
        servers="tests/fixtures/servers/remote_servers.json",
        servers_secret_arn=SERVERS_ARN,
        sync_minutes=10,
    ),
    "snap_http": StackConfig(snap_start=True),
    # secret_cache_s: an environment variable set after the version is first asked for (see the version tests).
    "snap_url": StackConfig(snap_start=True, endpoint="function-url", reserved_concurrency=5, secret_cache_s=60),
    "snap_gateway": StackConfig(snap_start=True, servers="tests/fixtures/servers/remote_servers.json"),
    "oauth": StackConfig(auth_mode="oauth", oauth_issuer=OAUTH_ISSUER, oauth_scopes=("mcp:tools", "mcp:read")),
    "cognito": StackConfig(auth_mode="oauth", oauth="cognito"),
    "cognito_url": StackConfig(
        auth_mode="oauth",
        oauth="cognito",
        endpoint="function-url",
        reserved_concurrency=5,
        oauth_scopes=("read", "call"),
        oauth_callback_urls=("https://claude.ai/api/mcp/auth_callback", "http://localhost:33418/callback"),
        cognito_domain_prefix="acme-mcp-tools",
        oauth_audience="https://mcp.acme.example/mcp",
    ),
}
SNAP_CONFIGS = ("snap_http", "snap_url", "snap_gateway")


@dataclass
class Synth:
    stack: ProgressiveMcpStack
    template: Template
    outdir: Path

    @cached_property
    def json(self) -> dict[str, Any]:
        return dict(self.template.to_json())

    def resources(self, kind: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.json["Resources"].items() if v["Type"] == kind}

    def one(self, kind: str) -> tuple[str, dict[str, Any]]:
        found = self.resources(kind)
        assert len(found) == 1, f"expected one {kind}, found {sorted(found)}"
        return next(iter(found.items()))

    def logical_id(self, construct: Any) -> str:
        return self.stack.get_logical_id(construct.node.default_child)

    def environment(self) -> dict[str, Any]:
        return self.one("AWS::Lambda::Function")[1]["Properties"]["Environment"]["Variables"]

    def statements(self) -> list[dict[str, Any]]:
        return [
            statement
            for policy in self.resources("AWS::IAM::Policy").values()
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        ]

    def statements_with(self, prefix: str) -> list[dict[str, Any]]:
        return [s for s in self.statements() if any(a.startswith(prefix) for a in _as_list(s["Action"]))]


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def synthesize(config: StackConfig, outdir: Path) -> Synth:
    app = App(outdir=str(outdir))
    stack = ProgressiveMcpStack(app, config, root=ROOT)
    return Synth(stack, Template.from_stack(stack), outdir)


@pytest.fixture(scope="module")
def synths(
    tmp_path_factory: pytest.TempPathFactory, shared_work: Callable[[], AbstractContextManager[None]]
) -> dict[str, Synth]:
    """CONFIGS by name, each synthesized on first use (on a cold asset cache the bundler runs pip: the module's
    work, whichever test asks first)."""

    class Synthesized(dict[str, Synth]):
        def __missing__(self, name: str) -> Synth:
            with shared_work():
                self[name] = synthesize(CONFIGS[name], tmp_path_factory.mktemp(f"cdk-{name}"))
            return self[name]

    return Synthesized()


@pytest.fixture(scope="module")
def default(synths: dict[str, Synth]) -> Synth:
    return synths["default"]


@pytest.fixture(scope="module")
def url(synths: dict[str, Synth]) -> Synth:
    return synths["url"]


# --- the function ---------------------------------------------------------------------------------------


def test_function_runs_the_handler_on_arm64_with_the_newest_python(default: Synth) -> None:
    default.template.has_resource_properties(
        "AWS::Lambda::Function",
        {
            "Runtime": "python3.13",
            "Architectures": ["arm64"],
            "Handler": "lambda_fn.handler.handler",
            "MemorySize": 1024,
            "Timeout": 30,
            "ReservedConcurrentExecutions": Match.absent(),
        },
    )


def test_memory_timeout_and_reserved_concurrency_are_knobs(url: Synth) -> None:
    url.template.has_resource_properties(
        "AWS::Lambda::Function", {"MemorySize": 512, "Timeout": 60, "ReservedConcurrentExecutions": 5}
    )


def test_default_environment(default: Synth) -> None:
    env = default.environment()
    stack = default.stack
    assert env == {
        "PMCP_SPEC": "/var/task/spec/alphavantage.json",
        "PMCP_MODE": "progressive",
        "PMCP_AUTH_MODE": "server-key",
        "PMCP_UPSTREAM_TIMEOUT_S": "20",
        "PMCP_DEADLINE_S": "25",
        "MONTY_BIN": "/var/task/bin/monty",
        "POWERTOOLS_SERVICE_NAME": "progressive-mcp",
        "POWERTOOLS_METRICS_NAMESPACE": "ProgressiveMCP",
        "POWERTOOLS_LOG_LEVEL": "INFO",
        "PMCP_UPSTREAM_KEY_SECRET": {"Ref": default.logical_id(stack.upstream_key_secret)},
        "PMCP_ENDPOINT_TOKENS_SECRET": {"Ref": default.logical_id(stack.endpoint_tokens_secret)},
        "PMCP_SECRET_CACHE_S": "300",
        "PMCP_CACHE_TABLE": {"Ref": default.logical_id(stack.cache_table)},
        "PMCP_RESULTS_BUCKET": {"Ref": default.logical_id(stack.results_bucket)},
        "PMCP_RESULT_URL_TTL_S": "900",
    }


def test_optional_settings_reach_the_environment(url: Synth) -> None:
    env = url.environment()
    assert env["PMCP_MODE"] == "hybrid"
    assert env["PMCP_AUTH_MODE"] == "passthrough"
    assert env["PMCP_CATEGORIES"] == "stocks,forex"
    assert env["PMCP_ALLOWED_ORIGINS"] == "https://app.example.com"
    assert env["PMCP_MAX_RESULT_TOKENS"] == "4000"
    assert env["POWERTOOLS_LOG_LEVEL"] == "DEBUG"
    assert env["PMCP_UPSTREAM_TIMEOUT_S"] == "20"  # min(20, 60 - 5)
    assert env["PMCP_RESULT_URL_TTL_S"] == "600"


def test_code_mode_can_be_the_default_and_a_small_function_is_warned_about_its_worker(
    default: Synth, synths: dict[str, Synth]
) -> None:
    small = synths["http_passthrough"]
    assert small.environment()["PMCP_MODE"] == "code"
    assert small.environment()["MONTY_BIN"] == f"/var/task/{MONTY_BINARY}"
    message = Match.string_like_regexp(f"memory_mb=384: code mode .* below {CODE_MODE_MEMORY_MB} MB")
    Annotations.from_stack(small.stack).has_warning("*", message)
    for synth in (default, synths["url"]):  # 1024 and 512 MB
        Annotations.from_stack(synth.stack).has_no_warning("*", Match.string_like_regexp("code mode"))


def test_upstream_timeout_leaves_the_function_time_to_answer(synths: dict[str, Synth]) -> None:
    assert synths["http_passthrough"].environment()["PMCP_UPSTREAM_TIMEOUT_S"] == "7"  # timeout_s=12
    assert synths["http_passthrough"].environment()["PMCP_DEADLINE_S"] == "7"  # the whole call, too


def test_deadline_stays_below_the_function_timeout() -> None:
    assert StackConfig(timeout_s=30).effective_deadline_s == 25
    assert StackConfig(timeout_s=30, deadline_s=29.5).effective_deadline_s == 29.5
    for deadline in (30, 31, 0):
        with pytest.raises(ValueError, match=f"deadline_s={deadline} must be positive and below timeout_s"):
            StackConfig(timeout_s=30, deadline_s=deadline)


def test_function_logs_to_its_own_log_group_with_retention_and_no_managed_policy(default: Synth) -> None:
    stack = default.stack
    log_group = default.logical_id(stack.function_log_group)
    default.template.has_resource_properties(
        "AWS::Lambda::Function", {"LoggingConfig": {"LogGroup": {"Ref": log_group}}}
    )
    assert default.json["Resources"][log_group]["Properties"]["RetentionInDays"] == 30
    role = default.one("AWS::IAM::Role")[1]["Properties"]
    assert "ManagedPolicyArns" not in role
    assert role["AssumeRolePolicyDocument"]["Statement"] == [
        {"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}}
    ]
    assert default.statements_with("logs:") == [
        {
            "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
            "Effect": "Allow",
            "Resource": {"Fn::GetAtt": [log_group, "Arn"]},
        }
    ]


def test_log_retention_is_a_knob(url: Synth) -> None:
    retention = {v["Properties"]["RetentionInDays"] for v in url.resources("AWS::Logs::LogGroup").values()}
    assert retention == {90}


def test_synthesized_asset_is_the_bundle(default: Synth) -> None:
    """The function's code asset in the cloud assembly is the bundler's output (handler, compiled spec)."""
    assets = [path for path in default.outdir.iterdir() if path.name.startswith("asset.") and path.is_dir()]
    assert len(assets) == 1
    asset = assets[0]
    assert (asset / "lambda_fn" / "handler.py").is_file()
    assert json.loads((asset / "spec" / "alphavantage.json").read_text())["tools"]
    assert json.loads((asset / ASSET_INFO).read_text())["python_version"] == "3.13"
    # Code mode's binary, executable by anyone: CDK zips each file with its mode.
    monty = asset / MONTY_BINARY
    assert [path.name for path in monty.parent.iterdir()] == ["monty"]
    assert monty.stat().st_mode & 0o777 == 0o755
    s3_key = default.one("AWS::Lambda::Function")[1]["Properties"]["Code"]["S3Key"]
    assert s3_key == f"{asset.name.removeprefix('asset.')}.zip"


# --- the endpoint ---------------------------------------------------------------------------------------


def test_http_api_routes_every_mcp_method_to_the_function(default: Synth) -> None:
    routes = default.resources("AWS::ApiGatewayV2::Route")
    assert sorted(r["Properties"]["RouteKey"] for r in routes.values()) == [
        "DELETE /mcp",
        "GET /mcp",
        "OPTIONS /mcp",
        "POST /mcp",
    ]
    integration_id, integration = default.one("AWS::ApiGatewayV2::Integration")
    for route in routes.values():
        assert route["Properties"]["Target"] == {"Fn::Join": ["", ["integrations/", {"Ref": integration_id}]]}
        assert route["Properties"].get("AuthorizationType", "NONE") == "NONE"  # the function authenticates
    function_id = default.logical_id(default.stack.function)
    assert integration["Properties"] == {
        "ApiId": {"Ref": default.logical_id(default.stack.http_api)},
        "IntegrationType": "AWS_PROXY",
        "IntegrationUri": {"Fn::GetAtt": [function_id, "Arn"]},
        "PayloadFormatVersion": "2.0",
    }
    permissions = default.resources("AWS::Lambda::Permission")
    assert len(permissions) == 4
    assert {p["Properties"]["Principal"] for p in permissions.values()} == {"apigateway.amazonaws.com"}


def test_default_stage_is_throttled_and_access_logged(default: Synth, synths: dict[str, Synth]) -> None:
    _, stage = default.one("AWS::ApiGatewayV2::Stage")
    props = stage["Properties"]
    assert props["StageName"] == "$default"
    assert props["AutoDeploy"] is True
    assert props["DefaultRouteSettings"] == {"ThrottlingBurstLimit": 20, "ThrottlingRateLimit": 10}
    access_logs = default.logical_id(default.stack.access_log_group)
    assert props["AccessLogSettings"]["DestinationArn"] == {"Fn::GetAtt": [access_logs, "Arn"]}
    assert default.json["Resources"][access_logs]["Properties"]["RetentionInDays"] == 30
    other = synths["http_passthrough"].one("AWS::ApiGatewayV2::Stage")[1]["Properties"]
    assert other["DefaultRouteSettings"] == {"ThrottlingBurstLimit": 7, "ThrottlingRateLimit": 3}


def test_access_log_format_is_json_without_query_strings_or_headers(default: Synth) -> None:
    _, stage = default.one("AWS::ApiGatewayV2::Stage")
    fields_ = json.loads(stage["Properties"]["AccessLogSettings"]["Format"])
    for wanted in ("requestId", "ip", "method", "path", "status", "latencyMs"):
        assert wanted in fields_
    assert fields_["requestId"] == "$context.requestId"
    for name, variable in fields_.items():
        assert re.fullmatch(r"\$context\.[A-Za-z.]+", variable), name
        lowered = variable.lower()
        assert not any(word in lowered for word in ("querystring", "header", "useragent", "authorizer")), name


def test_function_url_replaces_the_http_api(url: Synth) -> None:
    assert not [r for r in url.json["Resources"].values() if r["Type"].startswith("AWS::ApiGatewayV2::")]
    _, function_url = url.one("AWS::Lambda::Url")
    function_id = url.logical_id(url.stack.function)
    assert function_url["Properties"] == {"AuthType": "NONE", "TargetFunctionArn": {"Fn::GetAtt": [function_id, "Arn"]}}
    assert url.json["Outputs"]["EndpointUrl"]["Value"] == {
        "Fn::Join": ["", [{"Fn::GetAtt": [url.logical_id(url.stack.function_url), "FunctionUrl"]}, "mcp"]]
    }
    assert "AccessLogGroupName" not in url.json["Outputs"]


def test_unthrottled_function_url_is_warned_about(synths: dict[str, Synth]) -> None:
    message = Match.string_like_regexp("without reserved_concurrency")
    Annotations.from_stack(synths["url_imported"].stack).has_warning("*", message)
    Annotations.from_stack(synths["url"].stack).has_no_warning("*", message)


# --- secrets --------------------------------------------------------------------------------------------


def test_server_key_mode_creates_both_secrets(default: Synth) -> None:
    secrets = default.resources("AWS::SecretsManager::Secret")
    assert len(secrets) == 2
    upstream = secrets[default.logical_id(default.stack.upstream_key_secret)]["Properties"]
    assert upstream["SecretString"] == UPSTREAM_KEY_PLACEHOLDER
    assert aws.parse_upstream_key("test", UPSTREAM_KEY_PLACEHOLDER) is None  # the function sees "not set yet"
    tokens = secrets[default.logical_id(default.stack.endpoint_tokens_secret)]["Properties"]
    assert tokens["GenerateSecretString"] == {"ExcludePunctuation": True, "PasswordLength": 48}
    assert "SecretString" not in tokens


def test_secrets_are_readable_by_the_function_only_on_their_arns(default: Synth) -> None:
    stack = default.stack
    statements = default.statements_with("secretsmanager:")
    assert {json.dumps(s["Resource"]) for s in statements} == {
        json.dumps({"Ref": default.logical_id(stack.upstream_key_secret)}),
        json.dumps({"Ref": default.logical_id(stack.endpoint_tokens_secret)}),
    }
    for statement in statements:
        assert statement["Action"] == ["secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"]


def test_passthrough_mode_has_no_secrets(url: Synth, synths: dict[str, Synth]) -> None:
    for synth in (url, synths["http_passthrough"]):
        assert synth.resources("AWS::SecretsManager::Secret") == {}
        assert not synth.statements_with("secretsmanager:")
        env = synth.environment()
        assert not [name for name in env if "SECRET" in name]
        assert not [name for name in synth.json["Outputs"] if "Secret" in name or "Key" in name]


def test_an_existing_upstream_key_secret_can_be_used(synths: dict[str, Synth]) -> None:
    imported = synths["url_imported"]
    assert len(imported.resources("AWS::SecretsManager::Secret")) == 1  # only the endpoint tokens
    env = imported.environment()
    assert env["PMCP_UPSTREAM_KEY_SECRET"] == IMPORTED_ARN
    assert env["PMCP_SECRET_CACHE_S"] == "60"
    resources = [s["Resource"] for s in imported.statements_with("secretsmanager:")]
    assert IMPORTED_ARN in resources


def test_a_partial_secret_arn_is_granted_with_the_suffix_wildcard() -> None:
    partial = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:alphavantage/key"
    app = App(context={"aws:cdk:bundling-stacks": []})  # permissions only: no asset needed
    stack = ProgressiveMcpStack(app, StackConfig(upstream_key_secret_arn=partial), root=ROOT)
    statements = Template.from_stack(stack).to_json()["Resources"]
    resources = [
        statement["Resource"]
        for resource in statements.values()
        if resource["Type"] == "AWS::IAM::Policy"
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]
        if "secretsmanager:GetSecretValue" in statement["Action"]
    ]
    assert f"{partial}-??????" in resources


# --- state ----------------------------------------------------------------------------------------------


def test_response_cache_table(default: Synth) -> None:
    table_id, table = default.one("AWS::DynamoDB::Table")
    assert table["Properties"] == {
        "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
        "BillingMode": "PAY_PER_REQUEST",
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
        "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
        "SSESpecification": {"SSEEnabled": True},  # AWS managed key (no KMSMasterKeyId)
        "TimeToLiveSpecification": {"AttributeName": "expires_at", "Enabled": True},
    }
    assert table["DeletionPolicy"] == "Delete"
    assert default.statements_with("dynamodb:") == [
        {
            "Action": ["dynamodb:GetItem", "dynamodb:PutItem"],
            "Effect": "Allow",
            "Resource": [{"Fn::GetAtt": [table_id, "Arn"]}],
        }
    ]


def test_cache_off_means_no_table(url: Synth) -> None:
    assert url.resources("AWS::DynamoDB::Table") == {}
    assert not url.statements_with("dynamodb:")
    env = url.environment()
    assert env["PMCP_CACHE"] == "off"
    assert "PMCP_CACHE_TABLE" not in env
    assert "CacheTableName" not in url.json["Outputs"]


def test_results_bucket_is_private_encrypted_tls_only_and_expires_objects(default: Synth, url: Synth) -> None:
    bucket_id, bucket = default.one("AWS::S3::Bucket")
    props = bucket["Properties"]
    assert props["BucketEncryption"] == {
        "ServerSideEncryptionConfiguration": [{"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
    }
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    assert props["OwnershipControls"] == {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}
    assert props["LifecycleConfiguration"]["Rules"] == [
        {
            "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
            "ExpirationInDays": 1,
            "Id": "expire-results",
            "Status": "Enabled",
        }
    ]
    assert bucket["DeletionPolicy"] == "Retain"
    _, policy = default.one("AWS::S3::BucketPolicy")
    assert {
        "Action": "s3:*",
        "Condition": {"Bool": {"aws:SecureTransport": "false"}},
        "Effect": "Deny",
        "Principal": {"AWS": "*"},
        "Resource": [
            {"Fn::GetAtt": [bucket_id, "Arn"]},
            {"Fn::Join": ["", [{"Fn::GetAtt": [bucket_id, "Arn"]}, "/*"]]},
        ],
    } in policy["Properties"]["PolicyDocument"]["Statement"]
    assert url.one("AWS::S3::Bucket")[1]["Properties"]["LifecycleConfiguration"]["Rules"][0]["ExpirationInDays"] == 3


def test_function_may_only_put_and_get_result_objects(default: Synth) -> None:
    bucket_id = default.logical_id(default.stack.results_bucket)
    assert default.statements_with("s3:") == [
        {
            "Action": ["s3:PutObject", "s3:GetObject"],
            "Effect": "Allow",
            "Resource": {"Fn::Join": ["", [{"Fn::GetAtt": [bucket_id, "Arn"]}, "/results/*"]]},
        }
    ]
    assert RESULTS_PREFIX == aws.RESULTS_PREFIX  # the prefix the function writes under


# --- permissions overall --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_no_wildcard_actions_and_no_wildcard_resources(synths: dict[str, Synth], name: str) -> None:
    synth = synths[name]
    assert synth.resources("AWS::IAM::Policy"), "expected the function role's policy"
    for statement in synth.statements():
        assert statement["Effect"] == "Allow"
        for action in _as_list(statement["Action"]):
            assert "*" not in action, f"wildcard action {action}"
        assert statement["Resource"] != "*"
        assert "*" not in _as_list(statement["Resource"])
    # The only statements are the ones the tests above pin down: logs, secrets, dynamodb, s3; and for a gateway,
    # invoking its sync function once at deploy (test_a_deploy_starts_a_first_sync).
    prefixes = {a.split(":")[0] for s in synth.statements() for a in _as_list(s["Action"])}
    assert prefixes <= {"logs", "secretsmanager", "dynamodb", "s3"} | ({"lambda"} if "gateway" in name else set())


# --- alarms ---------------------------------------------------------------------------------------------


def _alarms(synth: Synth) -> dict[str, dict[str, Any]]:
    return {
        key.rstrip("0123456789ABCDEF"): value["Properties"]
        for key, value in synth.resources("AWS::CloudWatch::Alarm").items()
    }


def test_four_alarms_without_actions_by_default(default: Synth) -> None:
    alarms = _alarms(default)
    assert sorted(alarms) == [
        "Endpoint5xxAlarm",
        "FunctionErrorsAlarm",
        "FunctionThrottlesAlarm",
        "UpstreamErrorRateAlarm",
    ]
    function = {"Name": "FunctionName", "Value": {"Ref": default.logical_id(default.stack.function)}}
    expected = {
        "FunctionErrorsAlarm": ("AWS/Lambda", "Errors", function),
        "FunctionThrottlesAlarm": ("AWS/Lambda", "Throttles", function),
        "Endpoint5xxAlarm": (
            "AWS/ApiGateway",
            "5xx",
            {"Name": "ApiId", "Value": {"Ref": default.logical_id(default.stack.http_api)}},
        ),
    }
    for name, (namespace, metric, dimension) in expected.items():
        alarm = alarms[name]
        assert (alarm["Namespace"], alarm["MetricName"], alarm["Dimensions"]) == (namespace, metric, [dimension])
        assert (alarm["Statistic"], alarm["Period"], alarm["Threshold"]) == ("Sum", 300, 1)
        assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
        assert alarm["TreatMissingData"] == "notBreaching"
    for alarm in alarms.values():
        assert "AlarmActions" not in alarm
    assert default.resources("AWS::SNS::Topic") == {}


def test_upstream_error_rate_alarm_is_metric_math_on_the_handlers_emf_metrics(default: Synth, url: Synth) -> None:
    alarm = _alarms(default)["UpstreamErrorRateAlarm"]
    assert alarm["Threshold"] == 0.25
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert alarm["TreatMissingData"] == "notBreaching"
    by_id = {metric["Id"]: metric for metric in alarm["Metrics"]}
    expression = next(m for m in alarm["Metrics"] if "Expression" in m)
    assert expression["Expression"] == "IF(calls > 0, FILL(errors, 0) / calls, 0)"
    assert expression["ReturnData"] is True
    for metric_id, name in (("errors", "UpstreamErrors"), ("calls", "UpstreamCalls")):
        stat = by_id[metric_id]["MetricStat"]
        assert stat == {
            "Metric": {
                "Dimensions": [{"Name": "service", "Value": "progressive-mcp"}],
                "MetricName": name,
                "Namespace": "ProgressiveMCP",
            },
            "Period": 300,
            "Stat": "Sum",
        }
        assert by_id[metric_id]["ReturnData"] is False
    assert _alarms(url)["UpstreamErrorRateAlarm"]["Threshold"] == 0.5


def test_function_url_5xx_alarm_uses_lambdas_url_metric(url: Synth) -> None:
    alarm = _alarms(url)["Endpoint5xxAlarm"]
    assert (alarm["Namespace"], alarm["MetricName"]) == ("AWS/Lambda", "Url5xxCount")


def test_alarm_email_gets_an_encrypted_tls_only_topic_that_every_alarm_notifies(url: Synth) -> None:
    topic_id, topic = url.one("AWS::SNS::Topic")
    key_id, key = url.one("AWS::KMS::Key")
    assert topic["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    assert key["Properties"]["EnableKeyRotation"] is True
    assert {
        "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
        "Effect": "Allow",
        "Principal": {"Service": "cloudwatch.amazonaws.com"},
        "Resource": "*",
    } in key["Properties"]["KeyPolicy"]["Statement"]
    url.template.has_resource_properties(
        "AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "ops@example.com", "TopicArn": {"Ref": topic_id}}
    )
    url.template.has_resource_properties(
        "AWS::SNS::TopicPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Action": "sns:Publish",
                                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                                "Effect": "Deny",
                            }
                        )
                    ]
                )
            }
        },
    )
    alarms = _alarms(url)
    assert len(alarms) == 4
    for alarm in alarms.values():
        assert alarm["AlarmActions"] == [{"Ref": topic_id}]


# --- outputs --------------------------------------------------------------------------------------------


def test_outputs_name_every_resource_an_operator_needs(default: Synth) -> None:
    stack = default.stack
    outputs = {name: value["Value"] for name, value in default.json["Outputs"].items()}
    assert outputs["EndpointUrl"] == {
        "Fn::Join": ["", [{"Fn::GetAtt": [default.logical_id(stack.http_api), "ApiEndpoint"]}, "/mcp"]]
    }
    assert outputs["FunctionName"] == {"Ref": default.logical_id(stack.function)}
    assert outputs["FunctionLogGroupName"] == {"Ref": default.logical_id(stack.function_log_group)}
    assert outputs["AccessLogGroupName"] == {"Ref": default.logical_id(stack.access_log_group)}
    assert outputs["CacheTableName"] == {"Ref": default.logical_id(stack.cache_table)}
    assert outputs["ResultsBucketName"] == {"Ref": default.logical_id(stack.results_bucket)}
    upstream_ref = {"Ref": default.logical_id(stack.upstream_key_secret)}
    tokens_ref = {"Ref": default.logical_id(stack.endpoint_tokens_secret)}
    assert outputs["UpstreamApiKeySecretArn"] == upstream_ref  # the ARN, never the value
    assert outputs["EndpointTokensSecretArn"] == tokens_ref
    assert outputs["SetUpstreamKeyCommand"] == {
        "Fn::Join": [
            "",
            [
                "aws secretsmanager put-secret-value --secret-id ",
                upstream_ref,
                ' --secret-string "$ALPHAVANTAGE_API_KEY"',
            ],
        ]
    }
    assert "get-secret-value" in json.dumps(outputs["GetEndpointTokenCommand"])
    assert "resolve:secretsmanager" not in json.dumps(default.json["Outputs"])


# --- cdk-nag --------------------------------------------------------------------------------------------


def _nag(stack: ProgressiveMcpStack) -> list[tuple[str, str, str]]:
    """Unacknowledged AwsSolutions findings (errors and warnings alike) as (rule, construct path, description)."""
    report = AwsSolutionsChecks(verbose=True).validate_scope(stack)
    return [
        (v.rule_name, str(r.construct_path), v.description) for v in report.violations for r in v.violating_resources
    ]


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_cdk_nag_aws_solutions_has_no_unacknowledged_errors_or_warnings(synths: dict[str, Synth], name: str) -> None:
    assert _nag(synths[name].stack) == []


def test_every_acknowledgement_is_needed_and_explained(
    tmp_path_factory: pytest.TempPathFactory, default: Synth, url: Synth, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without acknowledgements, cdk-nag reports exactly the acknowledged findings (none stale, none missing)."""
    for acknowledgement in [*default.stack.acknowledgements, *url.stack.acknowledgements]:
        assert re.search(r"[a-z]{3,}.*\.$", acknowledgement.reason) and len(acknowledgement.reason) > 60
    monkeypatch.setattr(ProgressiveMcpStack, "_acknowledge", lambda self, construct, rule, reason: None)
    raw = synthesize(CONFIGS["default"], tmp_path_factory.mktemp("cdk-raw"))
    findings = {(rule, path) for rule, path, _description in _nag(raw.stack)}
    acknowledged: set[tuple[str, str]] = set()
    for ack in default.stack.acknowledgements:
        # Findings point at the CfnResource under the acknowledged construct (or its policy, for a role).
        paths = [f for rule, f in findings if rule == ack.rule and f.startswith(ack.path + "/")]
        assert paths, f"stale acknowledgement {ack.rule} on {ack.path}"
        acknowledged.update((ack.rule, path) for path in paths)
    assert findings == acknowledged


# --- configuration --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"auth_mode": "open"}, "auth_mode must be one of passthrough, server-key"),
        ({"mode": "flat"}, "mode must be one of progressive, direct, hybrid, code"),
        ({"endpoint": "alb"}, "endpoint must be one of http-api, function-url"),
        ({"timeout_s": 60}, "with endpoint=http-api at most 30"),
        ({"timeout_s": 20, "upstream_timeout_s": 18}, "upstream_timeout_s=18 must be positive and at most"),
        ({"timeout_s": 5}, "timeout_s must be between 6 and 900"),
        ({"memory_mb": 64}, "memory_mb must be between 128 and 10240"),
        ({"log_retention_days": 10}, "log_retention_days must be one of"),
        ({"throttle_rate": 0}, "throttle_rate must be positive"),
        ({"reserved_concurrency": 0}, "reserved_concurrency must be between 1"),
        ({"auth_mode": "passthrough", "upstream_key_secret_arn": IMPORTED_ARN}, "only used with auth_mode=server-key"),
        ({"auth_mode": "oauth"}, "auth_mode=oauth needs oauth_issuer"),
        ({"auth_mode": "oauth", "oauth_issuer": "http://login.example.com"}, "oauth_issuer, the https URL"),
        ({"auth_mode": "oauth", "oauth_issuer": "https://login.example.com?x=1"}, "oauth_issuer, the https URL"),
        ({"oauth_issuer": OAUTH_ISSUER}, "only used with auth_mode=oauth"),
        ({"auth_mode": "oauth", "oauth_issuer": OAUTH_ISSUER, "oauth_audience": "mcp.example/mcp"}, "oauth_audience"),
        ({"auth_mode": "oauth", "oauth_issuer": OAUTH_ISSUER, "oauth_scopes": ('a"b',)}, "oauth_scopes"),
        ({"oauth": "cognito"}, "only used with auth_mode=oauth"),
        ({"auth_mode": "oauth", "oauth": "okta"}, "oauth must be one of cognito, not 'okta'"),
        ({"auth_mode": "oauth", "oauth": "cognito", "oauth_issuer": OAUTH_ISSUER}, "leave oauth_issuer unset"),
        ({"auth_mode": "oauth", "oauth": "cognito", "oauth_scopes": ("a/b",)}, "not a Cognito scope name"),
        ({"auth_mode": "oauth", "oauth": "cognito", "oauth_callback_urls": ("http://app.example/cb",)}, "http only"),
        ({"auth_mode": "oauth", "oauth": "cognito", "oauth_callback_urls": ("https://a.example/cb#x",)}, "fragment"),
        ({"auth_mode": "oauth", "oauth": "cognito", "cognito_domain_prefix": "my-cognito-pool"}, "without 'aws'"),
        ({"auth_mode": "oauth", "oauth": "cognito", "cognito_domain_prefix": "Acme"}, "lower-case letters"),
        (
            {"auth_mode": "oauth", "oauth_issuer": OAUTH_ISSUER, "cognito_domain_prefix": "acme"},
            "only used with oauth=",
        ),
        ({"auth_mode": "oauth", "oauth": "cognito", "endpoint": "function-url"}, "needs oauth_audience"),
        ({"upstream_key_secret_arn": "arn:aws:s3:::bucket"}, "not a Secrets Manager ARN"),
        ({"alarm_email": "ops"}, "not an email address"),
        ({"upstream_error_rate_threshold": 1.5}, "upstream_error_rate_threshold must be in"),
        ({"allowed_origins": ("app.example.com",)}, "is not '\\*' or an origin"),
        ({"result_url_ttl_s": 7 * 86400}, "result_url_ttl_s must be between 60 and 43200"),
        ({"python_runtime": "3.11"}, "python_runtime must be one of 3.12, 3.13, 3.14"),
        ({"spec": "spec/alphavantage.txt"}, "spec must be a .yaml"),
        ({"max_result_tokens": 100}, "max_result_tokens must be between 500"),
    ],
)
def test_impossible_settings_are_refused(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        StackConfig(**overrides)


def test_missing_spec_is_refused_before_synthesis() -> None:
    with pytest.raises(ValueError, match="spec: no such file"):
        ProgressiveMcpStack(App(), StackConfig(spec="spec/missing.yaml"), root=ROOT)


def test_context_strings_are_converted() -> None:
    config = StackConfig.from_mapping(
        {
            "auth_mode": "passthrough",
            "memory_mb": "512",
            "throttle_rate": "2.5",
            "cache": "off",
            "categories": "stocks, forex,",
            "allowed_origins": "*",
            "reserved_concurrency": "3",
            "alarm_email": "",
            "upstream_key_secret_arn": None,
            "@aws-cdk/core:newStyleStackSynthesis": True,  # CDK's own keys are left alone
            "aws:cdk:bundling-stacks": ["**"],
        }
    )
    assert config == StackConfig(
        auth_mode="passthrough",
        memory_mb=512,
        throttle_rate=2.5,
        cache=False,
        categories=("stocks", "forex"),
        allowed_origins=("*",),
        reserved_concurrency=3,
    )


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"memroy_mb": "512"}, "unknown context key\\(s\\) memroy_mb"),
        ({"memory_mb": "lots"}, "context key memory_mb: 'lots' is not a valid int"),
        ({"memory_mb": 1.5}, "context key memory_mb: 1.5 is not a valid int"),
        ({"cache": "maybe"}, "context key cache: 'maybe' is not a valid bool"),
        ({"mode": "flat"}, "mode must be one of"),
    ],
)
def test_bad_context_is_refused(values: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        StackConfig.from_mapping(values)


def test_cdk_json_holds_every_knob_with_the_dataclass_defaults() -> None:
    context = cdk_json_context(ROOT)
    assert set(context) == {f.name for f in fields(StackConfig)}
    assert StackConfig.from_mapping(context) == StackConfig()
    cdk_json = json.loads((ROOT / "cdk.json").read_text())
    assert cdk_json["app"] == ".venv/bin/python -m infra.app"
    assert cdk_json["output"] == "cdk.out"


def test_app_takes_context_arguments_over_cdk_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CDK_OUTDIR", raising=False)
    monkeypatch.delenv("CDK_CONTEXT_JSON", raising=False)
    assert parse_context_args(["-c", "a=1", "--context", "b=x=y", "--context=c="]) == {"a": "1", "b": "x=y", "c": ""}
    with pytest.raises(SystemExit, match="key=value"):
        parse_context_args(["-c", "novalue"])
    _app, stack = build_app(["-c", "auth_mode=passthrough", "-c", "memory_mb=256"])
    assert (stack.config.auth_mode, stack.config.memory_mb) == ("passthrough", 256)
    assert stack.config.timeout_s == cdk_json_context(ROOT)["timeout_s"]
    with pytest.raises(SystemExit, match="infra: mode must be one of"):
        build_app(["-c", "mode=flat"])


def test_acknowledgements_are_listed_on_the_stack(default: Synth) -> None:
    rules = sorted({ack.rule for ack in default.stack.acknowledgements})
    assert rules == [
        "AwsSolutions-APIG4",
        "AwsSolutions-IAM5[Resource::<ResultsBucketA95A2103.Arn>/results/*]",
        "AwsSolutions-L1",  # the default runtime is 3.13, for bytecode in the asset
        "AwsSolutions-S1",
        "AwsSolutions-SMG4",
    ]


# --- the gateway ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gateway(synths: dict[str, Synth]) -> Synth:
    return synths["gateway"]


def test_the_gateway_adds_a_tool_store_a_servers_layer_and_a_scheduled_sync(gateway: Synth) -> None:
    stack = gateway.stack
    table = gateway.json["Resources"][gateway.logical_id(stack.tool_index_table)]["Properties"]
    assert table["KeySchema"] == [
        {"AttributeName": "pk", "KeyType": "HASH"},
        {"AttributeName": "sk", "KeyType": "RANGE"},
    ]
    assert table["BillingMode"] == "PAY_PER_REQUEST"
    functions = gateway.resources("AWS::Lambda::Function")
    serving = functions[gateway.logical_id(stack.function)]["Properties"]
    sync = functions[gateway.logical_id(stack.sync_function)]["Properties"]
    assert sync["Handler"] == "lambda_fn.sync.handler" and sync["ReservedConcurrentExecutions"] == 1
    assert sync["Code"] == serving["Code"]  # one asset for both
    layer = {"Ref": gateway.logical_id(stack.servers_layer)}
    assert serving["Layers"] == [layer] and sync["Layers"] == [layer]
    for env in (serving["Environment"]["Variables"], sync["Environment"]["Variables"]):
        assert env["PMCP_SERVERS"] == "/opt/progressive-mcp/servers.json"
        assert env["PMCP_INDEX_TABLE"] == {"Ref": gateway.logical_id(stack.tool_index_table)}
        assert env["PMCP_SERVERS_SECRET"] == SERVERS_ARN
    (rule,) = gateway.resources("AWS::Events::Rule").values()
    assert rule["Properties"]["ScheduleExpression"] == "rate(10 minutes)"
    assert rule["Properties"]["Targets"][0]["Arn"] == {"Fn::GetAtt": [gateway.logical_id(stack.sync_function), "Arn"]}
    # The layer holds exactly the servers file, byte for byte.
    (staged,) = gateway.outdir.glob("asset.*/progressive-mcp/servers.json")
    assert sorted(p.name for p in staged.parent.parent.rglob("*")) == ["progressive-mcp", "servers.json"]
    assert staged.read_bytes() == (ROOT / "tests/fixtures/servers/remote_servers.json").read_bytes()


def test_a_deploy_starts_a_first_sync(gateway: Synth, default: Synth) -> None:
    """The endpoint has its tools after `cdk deploy` without waiting for the schedule: a custom resource invokes the
    sync function with {"all": true}, asynchronously (an unreachable server neither fails nor holds up the deploy),
    on create and whenever the servers file changes."""
    stack = gateway.stack
    sync_id = gateway.logical_id(stack.sync_function)
    (first_id, first) = gateway.one("Custom::AWS")

    def call(which: str) -> dict[str, Any]:
        joined = first["Properties"][which]["Fn::Join"][1]
        text = "".join(p if isinstance(p, str) else f"<Ref {p['Ref']}>" for p in joined)
        return cast(dict[str, Any], json.loads(text))

    digest = hashlib.sha256((ROOT / CONFIGS["gateway"].servers).read_bytes()).hexdigest()[:16]  # type: ignore[operator]
    for which in ("Create", "Update"):
        assert call(which) == {
            "service": "Lambda",
            "action": "invoke",
            "parameters": {
                "FunctionName": f"<Ref {sync_id}>",
                "InvocationType": "Event",
                "Payload": json.dumps({"all": True}),
            },
            "physicalResourceId": {"id": f"first-sync-{digest}"},
        }
    assert sync_id in first["DependsOn"]
    # its provider may invoke the sync function and write its own log group, nothing else
    (role_id, _role) = next(
        (k, v) for k, v in gateway.resources("AWS::IAM::Role").items() if k.startswith("FirstSyncRole")
    )
    assert "ManagedPolicyArns" not in _role["Properties"]
    granted = [
        statement
        for policy in gateway.resources("AWS::IAM::Policy").values()
        if {"Ref": role_id} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]
    actions = {a for statement in granted for a in _as_list(statement["Action"])}
    assert actions == {"lambda:InvokeFunction", "logs:CreateLogStream", "logs:PutLogEvents"}
    invoke = next(st for st in granted if st["Action"] == "lambda:InvokeFunction")
    assert invoke["Resource"] == {"Fn::GetAtt": [sync_id, "Arn"]}
    assert first_id.startswith("FirstSync")
    assert not default.resources("Custom::AWS")


def test_the_serving_function_only_reads_the_tool_store_and_the_sync_function_writes_it(gateway: Synth) -> None:
    stack = gateway.stack
    table_arn = {"Fn::GetAtt": [gateway.logical_id(stack.tool_index_table), "Arn"]}
    by_role: dict[str, set[str]] = {}
    for policy in gateway.resources("AWS::IAM::Policy").values():
        for role in policy["Properties"]["Roles"]:
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                if table_arn in _as_list(statement["Resource"]):
                    by_role.setdefault(role["Ref"], set()).update(_as_list(statement["Action"]))
    assert by_role[gateway.logical_id(stack.role)] == {"dynamodb:GetItem", "dynamodb:Query"}
    assert by_role[gateway.logical_id(stack.sync_role)] == {
        "dynamodb:GetItem",
        "dynamodb:Query",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
        "dynamodb:BatchWriteItem",
        "dynamodb:ConditionCheckItem",
    }


def test_gateway_knobs_are_checked() -> None:
    with pytest.raises(ValueError, match=r"servers must be an mcpServers \.json file"):
        StackConfig(servers="servers.yaml")
    with pytest.raises(ValueError, match="servers_secret_arn is only used with servers"):
        StackConfig(servers_secret_arn=SERVERS_ARN)
    with pytest.raises(ValueError, match="sync_minutes must be between 1 and 1440"):
        StackConfig(servers="s.json", sync_minutes=0)
    assert StackConfig.from_mapping({"servers": "s.json", "sync_minutes": "30"}).sync_minutes == 30


def test_a_servers_file_with_commands_warns_that_lambda_has_no_npx(tmp_path: Path) -> None:
    servers = tmp_path / "servers.json"
    servers.write_text('{"mcpServers": {"memory": {"command": "npx", "args": ["-y", "x"]}}}')
    synth = synthesize(StackConfig(servers=str(servers)), tmp_path / "out")
    warnings = Annotations.from_stack(synth.stack).find_warning("*", Match.string_like_regexp("memory run a command"))
    assert warnings


# --- SnapStart ----------------------------------------------------------------------------------------------------


def _serving(synth: Synth) -> dict[str, Any]:
    return synth.json["Resources"][synth.logical_id(synth.stack.function)]


def _invocation_targets(synth: Synth) -> list[Any]:
    """Whatever names what the endpoint invokes: integration URIs, Function URL targets, invoke permissions."""
    targets = [r["Properties"]["IntegrationUri"] for r in synth.resources("AWS::ApiGatewayV2::Integration").values()]
    for url in synth.resources("AWS::Lambda::Url").values():
        targets.append((url["Properties"]["TargetFunctionArn"], url["Properties"].get("Qualifier")))
    for permission in synth.resources("AWS::Lambda::Permission").values():
        if permission["Properties"]["Principal"] != "events.amazonaws.com":  # the gateway's schedule → sync function
            targets.append(permission["Properties"]["FunctionName"])
    return targets


def _alarm_dimensions(synth: Synth) -> dict[str, list[dict[str, Any]]]:
    alarms = _alarms(synth).items()
    return {name: alarm["Dimensions"] for name, alarm in alarms if alarm.get("Namespace") == "AWS/Lambda"}


@pytest.mark.parametrize("name", sorted(set(CONFIGS) - set(SNAP_CONFIGS)))
def test_without_snap_start_the_function_itself_is_invoked_as_before(synths: dict[str, Synth], name: str) -> None:
    """The default (snap_start off) synthesizes what it did before SnapStart existed: no SnapStart setting, version
    or alias; the integration, the Function URL, the permissions and the alarms name the function."""
    synth = synths[name]
    assert synth.stack.invoked is synth.stack.function
    assert synth.resources("AWS::Lambda::Version") == {} and synth.resources("AWS::Lambda::Alias") == {}
    for function in synth.resources("AWS::Lambda::Function").values():
        assert "SnapStart" not in function["Properties"]
    function_arn = {"Fn::GetAtt": [synth.logical_id(synth.stack.function), "Arn"]}
    targets = _invocation_targets(synth)
    assert targets and all(target in (function_arn, (function_arn, None)) for target in targets)
    function_name = {"Name": "FunctionName", "Value": {"Ref": synth.logical_id(synth.stack.function)}}
    for dimensions in _alarm_dimensions(synth).values():
        assert dimensions == [function_name]
    assert "FunctionAliasArn" not in synth.json["Outputs"]


@pytest.mark.parametrize("name", SNAP_CONFIGS)
def test_snap_start_publishes_a_version_behind_the_live_alias(synths: dict[str, Synth], name: str) -> None:
    synth = synths[name]
    function_id = synth.logical_id(synth.stack.function)
    assert _serving(synth)["Properties"]["SnapStart"] == {"ApplyOn": "PublishedVersions"}
    (version_id, version), *others = synth.resources("AWS::Lambda::Version").items()
    assert others == []
    assert version["Properties"] == {"FunctionName": {"Ref": function_id}}
    assert version["DeletionPolicy"] == "Delete"  # replaced by the next deployment's, not kept (snapshots cost)
    alias_id, alias = synth.one("AWS::Lambda::Alias")
    assert alias_id == synth.logical_id(synth.stack.live_alias)
    assert alias["Properties"]["Name"] == "live"
    assert alias["Properties"]["FunctionName"] == {"Ref": function_id}
    assert alias["Properties"]["FunctionVersion"] == {"Fn::GetAtt": [version_id, "Version"]}
    assert synth.json["Outputs"]["FunctionAliasArn"]["Value"] == {"Ref": alias_id}
    # aws-cdk-lib's reminder that only published versions get snapshots is answered by the version above.
    Annotations.from_stack(synth.stack).has_no_warning("*", Match.string_like_regexp("SnapStart"))


@pytest.mark.parametrize("name", SNAP_CONFIGS)
def test_with_snap_start_every_caller_and_alarm_names_the_alias(synths: dict[str, Synth], name: str) -> None:
    synth = synths[name]
    alias = {"Ref": synth.logical_id(synth.stack.live_alias)}
    function_arn = {"Fn::GetAtt": [synth.logical_id(synth.stack.function), "Arn"]}
    targets = _invocation_targets(synth)
    if synth.stack.config.endpoint == "http-api":
        assert synth.one("AWS::ApiGatewayV2::Integration")[1]["Properties"]["IntegrationUri"] == alias
        assert len(targets) == 5  # the integration and the four routes' permissions
    else:
        # A Function URL on an alias: the function's ARN with the alias as qualifier.
        assert synth.one("AWS::Lambda::Url")[1]["Properties"] == {
            "AuthType": "NONE",
            "Qualifier": "live",
            "TargetFunctionArn": function_arn,
        }
        assert len(targets) == 3  # the URL, InvokeFunctionUrl and InvokeFunction (via the URL)
    assert all(target in (alias, (function_arn, "live")) for target in targets)
    function_name = {"Ref": synth.logical_id(synth.stack.function)}
    resource = {"Fn::Join": ["", [function_name, ":live"]]}
    dimensions = _alarm_dimensions(synth)
    expected = {"FunctionErrorsAlarm", "FunctionThrottlesAlarm"} | (
        {"Endpoint5xxAlarm"} if synth.stack.config.endpoint == "function-url" else set()
    )
    assert set(dimensions) == expected
    for alarm_dimensions in dimensions.values():
        assert alarm_dimensions == [
            {"Name": "FunctionName", "Value": function_name},
            {"Name": "Resource", "Value": resource},
        ]


def test_the_gateways_sync_function_stays_without_snap_start(synths: dict[str, Synth]) -> None:
    synth = synths["snap_gateway"]
    sync = synth.json["Resources"][synth.logical_id(synth.stack.sync_function)]["Properties"]
    assert "SnapStart" not in sync
    (rule,) = synth.resources("AWS::Events::Rule").values()
    sync_arn = {"Fn::GetAtt": [synth.logical_id(synth.stack.sync_function), "Arn"]}
    assert rule["Properties"]["Targets"][0]["Arn"] == sync_arn


def _version_id(synth: Synth) -> str:
    (version_id,) = synth.resources("AWS::Lambda::Version")
    return version_id


def test_a_changed_configuration_or_servers_file_publishes_a_new_version(
    synths: dict[str, Synth], tmp_path: Path
) -> None:
    # PMCP_SECRET_CACHE_S is added to the environment after the version is first asked for: the version's hash is
    # computed at synthesis, so it still sees it.
    http, url = synths["snap_http"], synths["snap_url"]
    assert http.environment()["PMCP_SECRET_CACHE_S"] != url.environment()["PMCP_SECRET_CACHE_S"]
    assert _version_id(http) != _version_id(url)
    # The servers layer's Ref does not change with the file: its digest moves the version instead.
    gateway = synths["snap_gateway"]
    fixture = ROOT / "tests/fixtures/servers/remote_servers.json"
    same, edited = tmp_path / "same.json", tmp_path / "edited.json"
    same.write_bytes(fixture.read_bytes())
    edited.write_text(fixture.read_text().replace('ttl_s": 900', 'ttl_s": 600'))
    assert edited.read_text() != fixture.read_text()
    for path, moves in ((same, False), (edited, True)):
        other = synthesize(StackConfig(snap_start=True, servers=str(path)), tmp_path / f"out-{path.stem}")
        assert (_version_id(other) != _version_id(gateway)) is moves, path.name


def test_snap_start_is_a_switch_that_needs_python_3_12(monkeypatch: pytest.MonkeyPatch) -> None:
    assert StackConfig().snap_start is False
    assert StackConfig.from_mapping({"snap_start": "on"}).snap_start is True
    assert StackConfig.from_mapping({"snap_start": False}).snap_start is False
    # Every runtime the stack offers has SnapStart; the check stands for an older one added to the list.
    monkeypatch.setattr(config_module, "PYTHON_RUNTIMES", ("3.11", *config_module.PYTHON_RUNTIMES))
    assert StackConfig(python_runtime="3.11").python_runtime == "3.11"
    with pytest.raises(ValueError, match=r"snap_start needs python_runtime 3\.12 or later"):
        StackConfig(snap_start=True, python_runtime="3.11")


# --- oauth mode -----------------------------------------------------------------------------------------


def test_oauth_mode_keeps_the_upstream_key_secret_and_no_endpoint_tokens(synths: dict[str, Synth]) -> None:
    oauth = synths["oauth"]
    secrets = oauth.resources("AWS::SecretsManager::Secret")
    secret_id = oauth.logical_id(oauth.stack.upstream_key_secret)
    policies_id = oauth.logical_id(oauth.stack.policies_secret)
    assert set(secrets) == {secret_id, policies_id}
    assert secrets[secret_id]["Properties"]["SecretString"] == UPSTREAM_KEY_PLACEHOLDER
    # The policies of OAuth identities: a secret of their own, a placeholder until the operator writes them.
    assert secrets[policies_id]["Properties"]["SecretString"].startswith("REPLACE_ME")
    env = oauth.environment()
    assert env["PMCP_AUTH_MODE"] == "oauth"
    assert env["PMCP_OAUTH_ISSUER"] == OAUTH_ISSUER
    assert env["PMCP_OAUTH_SCOPES"] == "mcp:tools,mcp:read"
    assert "PMCP_OAUTH_AUDIENCE" not in env  # each request's own URL, the API's
    assert env["PMCP_UPSTREAM_KEY_SECRET"] == {"Ref": secret_id}
    assert env["PMCP_POLICIES_SECRET"] == {"Ref": policies_id}
    assert "PMCP_ENDPOINT_TOKENS_SECRET" not in env
    granted = [s["Resource"] for s in oauth.statements_with("secretsmanager:")]
    assert sorted(granted, key=json.dumps) == sorted([{"Ref": secret_id}, {"Ref": policies_id}], key=json.dumps)
    assert "EndpointTokensSecretArn" not in oauth.json["Outputs"] and "PoliciesSecretArn" in oauth.json["Outputs"]
    assert "SetUpstreamKeyCommand" in oauth.json["Outputs"]


def test_oauth_mode_routes_the_resource_metadata_to_the_function(synths: dict[str, Synth]) -> None:
    oauth = synths["oauth"]
    routes = sorted(r["Properties"]["RouteKey"] for r in oauth.resources("AWS::ApiGatewayV2::Route").values())
    assert routes == [
        "DELETE /mcp",
        "GET /.well-known/oauth-protected-resource",
        "GET /.well-known/oauth-protected-resource/mcp",
        "GET /mcp",
        "OPTIONS /.well-known/oauth-protected-resource",
        "OPTIONS /.well-known/oauth-protected-resource/mcp",
        "OPTIONS /mcp",
        "POST /mcp",
    ]
    (integration_id, _integration) = oauth.one("AWS::ApiGatewayV2::Integration")
    for route in oauth.resources("AWS::ApiGatewayV2::Route").values():
        assert route["Properties"]["Target"] == {"Fn::Join": ["", ["integrations/", {"Ref": integration_id}]]}


def test_oauth_mode_puts_the_jose_library_in_the_asset_and_only_then(synths: dict[str, Synth], default: Synth) -> None:
    assert any(req.startswith("pyjwt[crypto]") for req in synths["oauth"].stack.asset_inputs.requirements())
    assert not any(req.lower().startswith("pyjwt") for req in default.stack.asset_inputs.requirements())
    asset = synths["oauth"].stack.asset_inputs
    built = (asset.cache_root / asset.fingerprint()).glob("**/jwt/api_jwt.py")
    assert next(built, None) is not None, "the built asset carries PyJWT"


# --- oauth=cognito: the stack's own authorization server ----------------------------------------------------------


def test_cognito_creates_a_user_pool_for_invited_users_with_mfa(synths: dict[str, Synth]) -> None:
    cognito = synths["cognito"]
    _pool_id, pool = cognito.one("AWS::Cognito::UserPool")
    properties = pool["Properties"]
    assert properties["AdminCreateUserConfig"] == {"AllowAdminCreateUserOnly": True}  # the operator invites
    assert properties["MfaConfiguration"] == "ON" and properties["EnabledMfas"] == ["SOFTWARE_TOKEN_MFA"]
    assert properties["UserPoolTier"] == "ESSENTIALS"  # managed login and resource indicators
    assert properties["Policies"]["PasswordPolicy"]["MinimumLength"] == 12
    assert pool["DeletionPolicy"] == "Retain"
    for name in ("default", "oauth"):
        assert not [t for t in synths[name].json["Resources"].values() if t["Type"].startswith("AWS::Cognito")]


def test_cognito_resource_server_is_the_endpoint_and_the_function_checks_its_tokens(synths: dict[str, Synth]) -> None:
    cognito = synths["cognito"]
    pool_id, _pool = cognito.one("AWS::Cognito::UserPool")
    endpoint = {"Fn::Join": ["", [{"Fn::GetAtt": [cognito.logical_id(cognito.stack.http_api), "ApiEndpoint"]}, "/mcp"]]}
    server_id, server = cognito.one("AWS::Cognito::UserPoolResourceServer")
    assert server["Properties"]["Identifier"] == endpoint
    assert [s["ScopeName"] for s in server["Properties"]["Scopes"]] == ["tools"]
    env = cognito.environment()
    assert env["PMCP_AUTH_MODE"] == "oauth"
    assert env["PMCP_OAUTH_ISSUER"] == {"Fn::GetAtt": [pool_id, "ProviderURL"]}
    assert env["PMCP_OAUTH_AUDIENCE"] == endpoint  # Cognito puts the `resource` a client asks for in `aud`
    assert env["PMCP_OAUTH_SCOPES"] == {"Fn::Join": ["/", [endpoint, "tools"]]}
    assert "PMCP_ENDPOINT_TOKENS_SECRET" not in env and "PMCP_UPSTREAM_KEY_SECRET" in env
    _domain_id, domain = cognito.one("AWS::Cognito::UserPoolDomain")
    assert domain["Properties"]["ManagedLoginVersion"] == 2
    assert domain["Properties"]["Domain"] == {"Fn::Join": ["-", ["progressivemcp", {"Ref": "AWS::AccountId"}]]}
    assert cognito.one("AWS::Cognito::ManagedLoginBranding")[1]["Properties"]["UseCognitoProvidedValues"] is True
    assert {"OAuthIssuer", "OAuthClientId", "OAuthClientSecretCommand", "AddUserCommand"} <= set(
        cognito.json["Outputs"]
    )
    assert server_id in json.dumps(cognito.one("AWS::Cognito::UserPoolClient")[1])


def test_cognito_app_client_is_for_hosted_connectors_with_the_code_flow(synths: dict[str, Synth]) -> None:
    cognito = synths["cognito"]
    _client_id, client = cognito.one("AWS::Cognito::UserPoolClient")
    properties = client["Properties"]
    assert properties["AllowedOAuthFlows"] == ["code"] and properties["AllowedOAuthFlowsUserPoolClient"] is True
    assert properties["GenerateSecret"] is True
    assert properties["CallbackURLs"] == list(config_module.DEFAULT_OAUTH_CALLBACK_URLS)
    assert "https://claude.ai/api/mcp/auth_callback" in properties["CallbackURLs"]
    assert "https://chatgpt.com/connector_platform_oauth_redirect" in properties["CallbackURLs"]
    assert properties["SupportedIdentityProviders"] == ["COGNITO"]
    assert properties["PreventUserExistenceErrors"] == "ENABLED" and properties["EnableTokenRevocation"] is True
    assert properties.get("ExplicitAuthFlows", []) == []  # no password sign-in over the API, hosted pages only
    # The secret is read with a command by whoever may (OAuthClientSecretCommand), never put in an output or setting.
    secret = json.dumps({"Fn::GetAtt": [_client_id, "ClientSecret"]})
    assert secret not in json.dumps(cognito.json["Outputs"]) and secret not in json.dumps(cognito.environment())


def test_cognito_knobs_reach_the_pool_client_and_function(synths: dict[str, Synth]) -> None:
    synth = synths["cognito_url"]
    _server_id, server = synth.one("AWS::Cognito::UserPoolResourceServer")
    assert [s["ScopeName"] for s in server["Properties"]["Scopes"]] == ["read", "call"]
    properties = synth.one("AWS::Cognito::UserPoolClient")[1]["Properties"]
    assert properties["CallbackURLs"] == ["https://claude.ai/api/mcp/auth_callback", "http://localhost:33418/callback"]
    assert len(properties["AllowedOAuthScopes"]) == 2
    assert synth.one("AWS::Cognito::UserPoolDomain")[1]["Properties"]["Domain"] == "acme-mcp-tools"
    assert server["Properties"]["Identifier"] == "https://mcp.acme.example/mcp"
    env = synth.environment()
    assert env["PMCP_OAUTH_AUDIENCE"] == "https://mcp.acme.example/mcp"
    assert env["PMCP_OAUTH_SCOPES"] == "https://mcp.acme.example/mcp/read,https://mcp.acme.example/mcp/call"
