"""The deployment: one stack with the Lambda function, its HTTPS front door, secrets, cache, result bucket, alarms.

Read top to bottom: function (code, role, logs, environment; with `snap_start`, its published version and "live"
alias, which every caller then invokes) → endpoint (HTTP API or Function URL) → secrets (server-key mode) →
response cache table → result bucket → alarms → outputs. Every knob is a `StackConfig` field (see
infra/config.py); permissions are grants on single resources, never wildcard actions. The cdk-nag AwsSolutions
findings that remain are acknowledged where they arise, each with its reason, and collected in
`ProgressiveMcpStack.acknowledgements`.

Example::

    app = App()
    ProgressiveMcpStack(app, StackConfig(auth_mode="passthrough"), root=Path("."))
    app.synth()
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import (
    Acknowledgment,
    Annotations,
    AssetHashType,
    Aws,
    BundlingOptions,
    CfnOutput,
    DockerImage,
    Duration,
    Fn,
    RemovalPolicy,
    SecretValue,
    Stack,
    Validations,
)
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_cognito as cognito
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import custom_resources as cr
from constructs import Construct, IConstruct

from infra.bundling import MONTY_BINARY, TASK_ROOT, AssetInputs, BundleTarget, local_bundler
from infra.config import CODE_MODE_MEMORY_MB, DEFAULT_COGNITO_SCOPES, StackConfig

SERVICE = "progressive-mcp"
METRICS_NAMESPACE = "ProgressiveMCP"  # the handler's EMF namespace (lambda_fn.handler.NAMESPACE)
HANDLER = "lambda_fn.handler.handler"
SYNC_HANDLER = "lambda_fn.sync.handler"
SERVERS_PATH = "/opt/progressive-mcp/servers.json"  # where the servers layer puts the file
LIVE_ALIAS = "live"  # with snap_start, the alias every caller invokes: the version this deployment published
# aws-cdk-lib warns on every SnapStart function that only published versions get snapshots; this stack publishes one.
SNAP_START_PUBLISH_WARNING = "@aws-cdk/aws-lambda:snapStartRequirePublish"
MCP_PATH = "/mcp"
# oauth mode: the endpoint's Protected Resource Metadata (RFC 9728), at the root and path-suffixed.
RESOURCE_METADATA_PATHS = ("/.well-known/oauth-protected-resource", f"/.well-known/oauth-protected-resource{MCP_PATH}")
# The secret starts with this value; the operator replaces it. The function treats a value starting with
# REPLACE_ME as unset (lambda_fn.aws.SECRET_PLACEHOLDER). Never change the string: CloudFormation would then
# write it again over the real key on the next deployment.
UPSTREAM_KEY_PLACEHOLDER = (
    "REPLACE_ME: aws secretsmanager put-secret-value --secret-id <this secret> --secret-string <key>"
)
# oauth mode's policies secret starts with this (none yet: every signed-in subject may use every tool).
POLICIES_PLACEHOLDER = (
    "REPLACE_ME: aws secretsmanager put-secret-value --secret-id <this secret> --secret-string "
    "'<the policies as JSON, docs/http.md#policies>'"
)
RESULTS_PREFIX = "results/"  # where the function writes offloaded results (lambda_fn.aws.RESULTS_PREFIX)
ENDPOINT_TOKEN_LENGTH = 48
ALARM_PERIOD = Duration.minutes(5)
RUNTIMES = {
    "3.12": lambda_.Runtime.PYTHON_3_12,
    "3.13": lambda_.Runtime.PYTHON_3_13,
    "3.14": lambda_.Runtime.PYTHON_3_14,
}
LATEST_RUNTIME = "3.14"  # what cdk-nag's AwsSolutions-L1 asks for with aws-cdk-lib 2.275
RETENTION = {
    1: logs.RetentionDays.ONE_DAY,
    3: logs.RetentionDays.THREE_DAYS,
    5: logs.RetentionDays.FIVE_DAYS,
    7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS,
    30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS,
    90: logs.RetentionDays.THREE_MONTHS,
    120: logs.RetentionDays.FOUR_MONTHS,
    150: logs.RetentionDays.FIVE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
    400: logs.RetentionDays.THIRTEEN_MONTHS,
    545: logs.RetentionDays.EIGHTEEN_MONTHS,
    731: logs.RetentionDays.TWO_YEARS,
    1096: logs.RetentionDays.THREE_YEARS,
    1827: logs.RetentionDays.FIVE_YEARS,
    2192: logs.RetentionDays.SIX_YEARS,
    2557: logs.RetentionDays.SEVEN_YEARS,
    2922: logs.RetentionDays.EIGHT_YEARS,
    3288: logs.RetentionDays.NINE_YEARS,
    3653: logs.RetentionDays.TEN_YEARS,
}
# API Gateway access log fields: who, what, how it went. Never the query string or headers: they carry API keys
# (?apikey=, X-API-Key, Authorization).
ACCESS_LOG_FIELDS = {
    "requestId": "$context.requestId",
    "ip": "$context.identity.sourceIp",
    "requestTime": "$context.requestTime",
    "method": "$context.httpMethod",
    "path": "$context.path",
    "routeKey": "$context.routeKey",
    "protocol": "$context.protocol",
    "status": "$context.status",
    "responseLength": "$context.responseLength",
    "latencyMs": "$context.responseLatency",
    "integrationLatencyMs": "$context.integrationLatency",
    "integrationStatus": "$context.integrationStatus",
    "integrationError": "$context.integrationErrorMessage",
    "error": "$context.error.message",
}


@dataclass(frozen=True)
class Acknowledged:
    """One acknowledged cdk-nag finding: where, which rule (and finding), why."""

    path: str
    rule: str
    reason: str


@jsii.implements(apigwv2.IAccessLogSettings)
class _AccessLogSettings:
    """apigatewayv2's access log settings are an interface with no implementing class."""

    def __init__(self, log_group: logs.ILogGroup) -> None:
        self._destination = apigwv2.LogGroupLogDestination(log_group)
        self._format = apigw.AccessLogFormat.custom(json.dumps(ACCESS_LOG_FIELDS, separators=(",", ":")))

    @property
    def destination(self) -> apigwv2.IAccessLogDestination:
        return self._destination

    @property
    def format(self) -> apigw.AccessLogFormat:
        return self._format


class ProgressiveMcpStack(Stack):
    """The MCP endpoint on Lambda (arm64, Python 3.13 by default) behind an HTTP API or a Function URL."""

    def __init__(
        self, scope: Construct, config: StackConfig, *, root: Path, asset_inputs: AssetInputs | None = None
    ) -> None:
        super().__init__(
            scope,
            config.stack_name,
            description="progressive-mcp: a progressive-discovery MCP server for the Alpha Vantage API",
        )
        self.config = config
        self.acknowledgements: list[Acknowledged] = []
        self.asset_inputs = (
            asset_inputs
            or AssetInputs(
                root=root,
                spec=Path(config.spec),
                target=BundleTarget.lambda_arm64(config.python_runtime),
                gateway=config.servers is not None,  # the gateway's client (the mcp SDK) comes along
                oauth=config.auth_mode == "oauth",  # PyJWT and cryptography come along
            )
        ).resolve()
        if not self.asset_inputs.spec.is_file():
            raise ValueError(f"spec: no such file {self.asset_inputs.spec}")

        self.function = self._function()
        # What the endpoint, its permissions and the alarms name: the function, or with snap_start its live alias
        # (SnapStart restores only published versions; $LATEST would initialize from scratch every time).
        self.invoked: lambda_.IFunction = self._live_alias() if config.snap_start else self.function
        self.endpoint_url = self._http_api() if config.endpoint == "http-api" else self._function_url()
        if config.cognito:
            self._cognito()
        if config.holds_upstream_key:
            self._secrets()
        if config.cache:
            self._response_cache()
        else:
            self.function.add_environment("PMCP_CACHE", "off")
        self._results_bucket()
        if config.servers:
            self._gateway()
        self._alarms()
        CfnOutput(self, "EndpointUrl", value=self.endpoint_url, description="The MCP endpoint (Streamable HTTP)")

    # --- the function -------------------------------------------------------------------------------------

    def _function(self) -> lambda_.Function:
        config = self.config
        self.function_log_group = logs.LogGroup(
            self, "FunctionLogGroup", retention=RETENTION[config.log_retention_days]
        )
        # An explicit role instead of the default one with AWSLambdaBasicExecutionRole (logs:* on every log group).
        self.role = iam.Role(
            self,
            "FunctionRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="progressive-mcp function: its own log group, secrets, cache table and result bucket only",
        )
        self.function_log_group.grant_write(self.role)

        inputs = self.asset_inputs
        self.code = lambda_.Code.from_asset(
            # The asset is built from the whole repository by the bundler and identified by a hash of exactly
            # its inputs; this small directory only satisfies from_asset and is never fingerprinted.
            str(inputs.root / "lambda_fn"),
            asset_hash=inputs.fingerprint(),
            asset_hash_type=AssetHashType.CUSTOM,
            bundling=BundlingOptions(
                image=DockerImage.from_registry("local-bundling-only"),  # never pulled: local bundling succeeds
                local=local_bundler(inputs),
            ),
        )
        environment = {
            "PMCP_SPEC": f"{TASK_ROOT}/spec/{inputs.spec_json_name}",
            "PMCP_MODE": config.mode,
            "PMCP_AUTH_MODE": config.auth_mode,
            "PMCP_UPSTREAM_TIMEOUT_S": f"{config.effective_upstream_timeout_s:g}",
            "PMCP_DEADLINE_S": f"{config.effective_deadline_s:g}",
            # Code mode's sandbox workers (whatever the default mode: callers may ask for ?mode=code). pydantic_monty
            # looks in the interpreter's scripts directory, which on Lambda is the runtime's, not the asset's bin/.
            "MONTY_BIN": f"{TASK_ROOT}/{MONTY_BINARY}",
            "POWERTOOLS_SERVICE_NAME": SERVICE,
            "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
            "POWERTOOLS_LOG_LEVEL": config.log_level,
        }
        if config.categories:
            environment["PMCP_CATEGORIES"] = ",".join(config.categories)
        if config.include:
            environment["PMCP_INCLUDE"] = ",".join(config.include)
        if config.exclude:
            environment["PMCP_EXCLUDE"] = ",".join(config.exclude)
        if config.allowed_origins:
            environment["PMCP_ALLOWED_ORIGINS"] = ",".join(config.allowed_origins)
        if config.max_result_tokens is not None:
            environment["PMCP_MAX_RESULT_TOKENS"] = str(config.max_result_tokens)
        if config.oauth_issuer is not None:
            environment["PMCP_OAUTH_ISSUER"] = config.oauth_issuer
        if config.oauth_audience is not None:
            environment["PMCP_OAUTH_AUDIENCE"] = config.oauth_audience
        if config.oauth_scopes and not config.cognito:  # with cognito, <endpoint URL>/<scope> (see _cognito)
            environment["PMCP_OAUTH_SCOPES"] = ",".join(config.oauth_scopes)

        function = lambda_.Function(
            self,
            "Function",
            description=f"progressive-mcp MCP endpoint ({config.mode} surface, {config.auth_mode} auth)",
            runtime=RUNTIMES[config.python_runtime],
            architecture=lambda_.Architecture.ARM_64,
            handler=HANDLER,
            code=self.code,
            memory_size=config.memory_mb,
            timeout=Duration.seconds(config.timeout_s),
            reserved_concurrent_executions=config.reserved_concurrency,
            role=self.role,
            log_group=self.function_log_group,
            environment=environment,
            snap_start=lambda_.SnapStartConf.ON_PUBLISHED_VERSIONS if config.snap_start else None,
            # A version replaced by the next deployment's is deleted, not kept: with SnapStart each version's
            # snapshot is billed while the version exists, and nothing invokes an old one.
            current_version_options=(
                lambda_.VersionOptions(removal_policy=RemovalPolicy.DESTROY) if config.snap_start else None
            ),
        )
        if config.python_runtime != LATEST_RUNTIME:
            self._acknowledge(
                function,
                "AwsSolutions-L1",
                f"python_runtime={config.python_runtime} rather than 3.14, so that the asset ships bytecode compiled "
                "by a local interpreter of that version: Lambda cannot write .pyc files, so without it every cold "
                "start compiles every module (cold import ~770 ms against ~500 ms with bytecode, bench/asset.py). "
                "The runtime is supported by AWS; move to 3.14 once the build machine has a 3.14 interpreter.",
            )
        if config.memory_mb < CODE_MODE_MEMORY_MB:
            Annotations.of(function).add_warning_v2(
                "progressive-mcp:code-mode-memory",
                f"memory_mb={config.memory_mb}: code mode (any caller can ask for ?mode=code) runs a sandbox worker "
                f"beside the handler, ~250 MB together at a script's memory limit; a script near it can get the "
                f"function killed below {CODE_MODE_MEMORY_MB} MB",
            )
        if config.endpoint == "function-url" and config.reserved_concurrency is None:
            Annotations.of(function).add_warning_v2(
                "progressive-mcp:unthrottled",
                "endpoint=function-url without reserved_concurrency: nothing limits how many instances callers "
                "can start (set -c reserved_concurrency=N)",
            )
        CfnOutput(self, "FunctionName", value=function.function_name)
        CfnOutput(self, "FunctionLogGroupName", value=self.function_log_group.log_group_name)
        return function

    def _live_alias(self) -> lambda_.Alias:
        """The version this deployment publishes (a new one whenever the function's code or configuration changes,
        which Lambda then initializes and snapshots), behind the alias callers invoke."""
        Annotations.of(self.function).acknowledge_warning(
            SNAP_START_PUBLISH_WARNING, "the stack publishes a version (current_version) and serves it through an alias"
        )
        self.live_alias = lambda_.Alias(
            self,
            "FunctionLiveAlias",
            alias_name=LIVE_ALIAS,
            version=self.function.current_version,
            description="progressive-mcp: the published version the endpoint invokes (SnapStart)",
        )
        CfnOutput(self, "FunctionAliasArn", value=self.live_alias.function_arn)
        return self.live_alias

    # --- the endpoint -------------------------------------------------------------------------------------

    def _http_api(self) -> str:
        config = self.config
        self.access_log_group = logs.LogGroup(self, "AccessLogGroup", retention=RETENTION[config.log_retention_days])
        self.http_api = apigwv2.HttpApi(
            self,
            "HttpApi",
            api_name=config.stack_name,
            description="progressive-mcp: MCP Streamable HTTP at /mcp",
            create_default_stage=False,  # the stage below carries throttling and access logs
        )
        self.stage = apigwv2.HttpStage(
            self,
            "DefaultStage",
            http_api=self.http_api,
            stage_name="$default",
            auto_deploy=True,
            throttle=apigwv2.ThrottleSettings(rate_limit=config.throttle_rate, burst_limit=config.throttle_burst),
            access_log_settings=_AccessLogSettings(self.access_log_group),
        )
        integration = integrations.HttpLambdaIntegration(
            "FunctionIntegration",
            self.invoked,
            payload_format_version=apigwv2.PayloadFormatVersion.VERSION_2_0,
        )
        routes = self.http_api.add_routes(
            path=MCP_PATH,
            # The handler answers all four: POST carries MCP; GET/DELETE get 405 with Allow: POST; OPTIONS is the
            # CORS preflight, which the handler answers from PMCP_ALLOWED_ORIGINS (so no CORS config here).
            methods=[
                apigwv2.HttpMethod.POST,
                apigwv2.HttpMethod.GET,
                apigwv2.HttpMethod.DELETE,
                apigwv2.HttpMethod.OPTIONS,
            ],
            integration=integration,
        )
        for route in routes:
            self._acknowledge(
                route,
                "AwsSolutions-APIG4",
                "MCP clients authenticate with a bearer token or their own upstream key, which the function checks "
                "(server-key: endpoint tokens compared in constant time, 401 otherwise; passthrough: each caller's "
                "own Alpha Vantage key; oauth: JWT access tokens checked against the issuer's keys); MCP clients "
                "cannot sign requests with SigV4.",
            )
        if config.auth_mode == "oauth":
            for path in RESOURCE_METADATA_PATHS:
                for route in self.http_api.add_routes(
                    path=path, methods=[apigwv2.HttpMethod.GET, apigwv2.HttpMethod.OPTIONS], integration=integration
                ):
                    self._acknowledge(
                        route,
                        "AwsSolutions-APIG4",
                        "The Protected Resource Metadata (RFC 9728) is public by design: MCP clients read it before "
                        "they have a token, to learn which authorization server issues one.",
                    )
        CfnOutput(self, "AccessLogGroupName", value=self.access_log_group.log_group_name)
        return f"{self.http_api.api_endpoint}{MCP_PATH}"

    def _function_url(self) -> str:
        # AuthType NONE: the function authenticates every request itself (bearer tokens in server-key mode, the
        # caller's own upstream key in passthrough mode); reserved_concurrency is the throttle.
        self.function_url = self.invoked.add_function_url(auth_type=lambda_.FunctionUrlAuthType.NONE)
        return Fn.join("", [self.function_url.url, MCP_PATH.lstrip("/")])

    # --- the authorization server (oauth=cognito) --------------------------------------------------------

    def _cognito(self) -> None:
        """A Cognito user pool as the endpoint's authorization server: its hosted sign-in (managed login) domain, a
        resource server named by the endpoint's URL with its scopes, and an app client for hosted connectors
        (authorization code with PKCE, a client secret, the configured callback URLs). The function then checks
        tokens of this issuer, for this resource, with these scopes. Users are added by the operator."""
        config = self.config
        self.user_pool = cognito.UserPool(
            self,
            "OAuthUserPool",
            user_pool_name=f"{config.stack_name}-mcp-users",
            # Essentials: managed login, and resource indicators (RFC 8707: the `resource` an MCP client sends
            # becomes the access token's `aud`, which the function checks).
            feature_plan=cognito.FeaturePlan.ESSENTIALS,
            self_sign_up_enabled=False,  # whoever signs in uses the operator's upstream key: the operator invites
            sign_in_aliases=cognito.SignInAliases(email=True),
            auto_verify=cognito.AutoVerifiedAttrs(email=True),
            account_recovery=cognito.AccountRecovery.EMAIL_ONLY,
            mfa=cognito.Mfa.REQUIRED,
            mfa_second_factor=cognito.MfaSecondFactor(otp=True, sms=False),
            password_policy=cognito.PasswordPolicy(
                min_length=12,
                require_lowercase=True,
                require_uppercase=True,
                require_digits=True,
                require_symbols=True,
                temp_password_validity=Duration.days(3),
            ),
            deletion_protection=True,
            removal_policy=RemovalPolicy.RETAIN,  # users and their MFA survive `cdk destroy`
        )
        self._acknowledge(
            self.user_pool,
            "AwsSolutions-COG8",
            "The Plus feature plan (threat protection) is billed per monthly active user at several times the "
            "Essentials rate; the pool has the Essentials plan (managed login, resource indicators), no self sign-up "
            "(the operator adds each user) and MFA required, which cover what a team's tool endpoint needs.",
        )
        prefix = config.cognito_domain_prefix or Fn.join("-", [config.stack_name.lower(), Aws.ACCOUNT_ID])
        self.user_pool_domain = self.user_pool.add_domain(
            "OAuthDomain",
            cognito_domain=cognito.CognitoDomainOptions(domain_prefix=prefix),
            managed_login_version=cognito.ManagedLoginVersion.NEWER_MANAGED_LOGIN,
        )
        # The resource server is the endpoint itself: its identifier is the URL clients send as `resource` (the
        # endpoint's canonical URL: oauth_audience, else the HTTP API's), and its scopes are <URL>/<scope> in tokens.
        scopes = config.oauth_scopes or DEFAULT_COGNITO_SCOPES
        resource = config.oauth_audience or self.endpoint_url
        self.resource_server = self.user_pool.add_resource_server(
            "McpResourceServer",
            identifier=resource,
            user_pool_resource_server_name=f"{config.stack_name} MCP endpoint",
            scopes=[cognito.ResourceServerScope(scope_name=s, scope_description=f"MCP endpoint: {s}") for s in scopes],
        )
        self.connector_client = self.user_pool.add_client(
            "HostedConnectorClient",
            user_pool_client_name="hosted-connectors",
            generate_secret=True,  # hosted connectors are confidential clients; Cognito also takes PKCE with it
            auth_flows=cognito.AuthFlow(),  # sign-in only through the hosted pages, never passwords over the API
            o_auth=cognito.OAuthSettings(
                flows=cognito.OAuthFlows(authorization_code_grant=True),
                scopes=[
                    cognito.OAuthScope.resource_server(
                        self.resource_server, cognito.ResourceServerScope(scope_name=s, scope_description=s)
                    )
                    for s in scopes
                ],
                callback_urls=list(config.oauth_callback_urls),
            ),
            supported_identity_providers=[cognito.UserPoolClientIdentityProvider.COGNITO],
            prevent_user_existence_errors=True,
            enable_token_revocation=True,
            access_token_validity=Duration.hours(1),
            id_token_validity=Duration.hours(1),
            refresh_token_validity=Duration.days(30),
        )
        cognito.CfnManagedLoginBranding(
            self,
            "OAuthLoginBranding",
            user_pool_id=self.user_pool.user_pool_id,
            client_id=self.connector_client.user_pool_client_id,
            use_cognito_provided_values=True,
        )
        issuer = self.user_pool.user_pool_provider_url
        self.function.add_environment("PMCP_OAUTH_ISSUER", issuer)
        if config.oauth_audience is None:  # the resource server's identifier, which Cognito puts in `aud`
            self.function.add_environment("PMCP_OAUTH_AUDIENCE", resource)
        self.function.add_environment("PMCP_OAUTH_SCOPES", Fn.join(",", [Fn.join("/", [resource, s]) for s in scopes]))
        CfnOutput(self, "OAuthIssuer", value=issuer, description="The authorization server (Cognito user pool)")
        CfnOutput(self, "OAuthClientId", value=self.connector_client.user_pool_client_id)
        CfnOutput(
            self,
            "OAuthClientSecretCommand",
            description="Print the app client's secret, for a client without dynamic registration",
            value=Fn.join(
                "",
                [
                    "aws cognito-idp describe-user-pool-client --user-pool-id ",
                    self.user_pool.user_pool_id,
                    " --client-id ",
                    self.connector_client.user_pool_client_id,
                    " --query UserPoolClient.ClientSecret --output text",
                ],
            ),
        )
        CfnOutput(
            self,
            "AddUserCommand",
            description="Invite a user (an email with a temporary password; MFA is set up at first sign-in)",
            value=Fn.join(
                "",
                [
                    "aws cognito-idp admin-create-user --user-pool-id ",
                    self.user_pool.user_pool_id,
                    " --username someone@example.com --user-attributes Name=email,Value=someone@example.com",
                    " Name=email_verified,Value=true",
                ],
            ),
        )
        CfnOutput(self, "OAuthSignInDomain", value=self.user_pool_domain.base_url())

    # --- secrets (server-key mode) ------------------------------------------------------------------------

    def _secrets(self) -> None:
        config = self.config
        arn = config.upstream_key_secret_arn
        if arn:
            # A complete ARN ends with the 6 characters Secrets Manager appends to the name; a partial one does not,
            # and its grant then covers `<arn>-??????`.
            complete = re.search(r"-[A-Za-z0-9]{6}$", arn) is not None
            importer = (
                secretsmanager.Secret.from_secret_complete_arn
                if complete
                else secretsmanager.Secret.from_secret_partial_arn
            )
            upstream_key: secretsmanager.ISecret = importer(self, "UpstreamApiKeySecret", arn)
        else:
            upstream_key = self._unrotated_secret(
                "UpstreamApiKeySecret",
                "progressive-mcp: the Alpha Vantage API key the endpoint calls with (replace the value)",
                "An Alpha Vantage key is issued by Alpha Vantage and cannot be rotated by a Lambda function; the "
                "operator replaces it with put-secret-value, and instances pick it up within secret_cache_s.",
                secret_string_value=SecretValue.unsafe_plain_text(UPSTREAM_KEY_PLACEHOLDER),
            )
        upstream_key.grant_read(self.role)
        self.function.add_environment("PMCP_UPSTREAM_KEY_SECRET", upstream_key.secret_arn)
        self.function.add_environment("PMCP_SECRET_CACHE_S", str(config.secret_cache_s))
        self.upstream_key_secret = upstream_key
        CfnOutput(self, "UpstreamApiKeySecretArn", value=upstream_key.secret_arn)
        CfnOutput(
            self,
            "SetUpstreamKeyCommand",
            description="Store the Alpha Vantage key the endpoint uses (read from $ALPHAVANTAGE_API_KEY)",
            value=Fn.join(
                "",
                [
                    "aws secretsmanager put-secret-value --secret-id ",
                    upstream_key.secret_arn,
                    ' --secret-string "$ALPHAVANTAGE_API_KEY"',
                ],
            ),
        )
        if config.server_key:  # oauth mode: callers present access tokens, not endpoint tokens
            self._endpoint_tokens()
        else:  # oauth mode's policies, which have no tokens secret to live beside
            self._policies_secret()

    def _unrotated_secret(
        self, construct_id: str, description: str, why_not_rotated: str, **value: Any
    ) -> secretsmanager.Secret:
        """A secret the operator sets and changes by hand (no rotation Lambda), with cdk-nag's SMG4 acknowledged
        for the reason given; `value` is the Secret's initial value argument."""
        secret = secretsmanager.Secret(self, construct_id, description=description, **value)
        self._acknowledge(secret, "AwsSolutions-SMG4", why_not_rotated)
        return secret

    def _policies_secret(self) -> None:
        policies = self._unrotated_secret(
            "PoliciesSecret",
            "progressive-mcp: per-identity policies of OAuth subjects, groups and scopes (JSON)",
            "The policies are the operator's configuration, not a credential: they change when the operator edits "
            "them (put-secret-value), and instances pick them up within secret_cache_s.",
            secret_string_value=SecretValue.unsafe_plain_text(POLICIES_PLACEHOLDER),
        )
        policies.grant_read(self.role)
        self.function.add_environment("PMCP_POLICIES_SECRET", policies.secret_arn)
        self.policies_secret = policies
        CfnOutput(self, "PoliciesSecretArn", value=policies.secret_arn)

    def _endpoint_tokens(self) -> None:
        tokens = self._unrotated_secret(
            "EndpointTokensSecret",
            "progressive-mcp: bearer tokens callers present (comma-separated, to rotate with overlap)",
            "Endpoint tokens are held by MCP clients, so an automatic rotation would lock them out; operators "
            "rotate by adding a new token next to the old one (the value is a comma-separated list), moving "
            "clients, then removing the old token.",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                exclude_punctuation=True, password_length=ENDPOINT_TOKEN_LENGTH
            ),
        )
        tokens.grant_read(self.role)
        self.function.add_environment("PMCP_ENDPOINT_TOKENS_SECRET", tokens.secret_arn)
        self.endpoint_tokens_secret = tokens
        CfnOutput(self, "EndpointTokensSecretArn", value=tokens.secret_arn)
        CfnOutput(
            self,
            "GetEndpointTokenCommand",
            description="Print the bearer token MCP clients send as Authorization: Bearer <token>",
            value=Fn.join(
                "",
                [
                    "aws secretsmanager get-secret-value --secret-id ",
                    tokens.secret_arn,
                    " --query SecretString --output text",
                ],
            ),
        )

    # --- state --------------------------------------------------------------------------------------------

    def _response_cache(self) -> None:
        self.cache_table = dynamodb.Table(
            self,
            "ResponseCacheTable",
            partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            time_to_live_attribute="expires_at",
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            # A cache: everything in it can be fetched again from the upstream, so deleting it with the stack
            # loses nothing, and keeping it would only leave an orphan table behind.
            removal_policy=RemovalPolicy.DESTROY,
        )
        self.cache_table.grant(self.role, "dynamodb:GetItem", "dynamodb:PutItem")
        self.function.add_environment("PMCP_CACHE_TABLE", self.cache_table.table_name)
        CfnOutput(self, "CacheTableName", value=self.cache_table.table_name)

    def _results_bucket(self) -> None:
        config = self.config
        self.results_bucket = s3.Bucket(
            self,
            "ResultsBucket",
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="expire-results",
                    expiration=Duration.days(config.results_expiry_days),
                    abort_incomplete_multipart_upload_after=Duration.days(1),
                )
            ],
            # Kept when the stack is deleted (CloudFormation cannot delete a bucket with objects in it, and
            # auto-deleting them needs a custom-resource Lambda); the lifecycle rule empties it within
            # results_expiry_days, after which `aws s3 rb` removes it.
            removal_policy=RemovalPolicy.RETAIN,
        )
        self._acknowledge(
            self.results_bucket,
            "AwsSolutions-S1",
            "The bucket holds only short-lived copies of large tool results, written by the function and read "
            "through presigned URLs it issues in answer to requests it logs (request id, tool); a log bucket would "
            "add a second bucket and its cost without a trail those logs lack (CloudTrail data events can be "
            "enabled if object-level auditing is required).",
        )
        # PutObject to offload a result, GetObject because presigned GET URLs act with the signer's permissions.
        iam.Grant.add_to_principal(
            grantee=self.role,
            actions=["s3:PutObject", "s3:GetObject"],
            resource_arns=[self.results_bucket.arn_for_objects(f"{RESULTS_PREFIX}*")],
        )
        self._acknowledge(
            self.role,
            f"AwsSolutions-IAM5[Resource::<{self._logical_id(self.results_bucket)}.Arn>/{RESULTS_PREFIX}*]",
            "Each offloaded result is a new object with a generated name, so the permission must cover the "
            f"{RESULTS_PREFIX} prefix of this one bucket; it allows only s3:PutObject and s3:GetObject there.",
        )
        self.function.add_environment("PMCP_RESULTS_BUCKET", self.results_bucket.bucket_name)
        self.function.add_environment("PMCP_RESULT_URL_TTL_S", str(config.result_url_ttl_s))
        CfnOutput(self, "ResultsBucketName", value=self.results_bucket.bucket_name)

    # --- the gateway: MCP servers behind the endpoint -------------------------------------------------------

    def _gateway(self) -> None:
        """The servers file in a layer (so the code asset, and its cache, stay as they are), the DynamoDB tool
        store, and the scheduled sync function that fills it: the serving function only reads the store."""
        config = self.config
        assert config.servers is not None
        source = Path(config.servers)
        source = source if source.is_absolute() else self.asset_inputs.root / source
        if not source.is_file():
            raise ValueError(f"servers: no such file {source}")
        text = source.read_text(encoding="utf-8")
        try:
            servers = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"servers: {source} is not valid JSON (line {exc.lineno}: {exc.msg})") from None
        entries = servers.get("mcpServers", servers.get("servers")) if isinstance(servers, dict) else None
        if not isinstance(entries, dict) or not entries:
            raise ValueError(f"servers: {source} has no `mcpServers` object naming at least one server")
        local = sorted(name for name, entry in entries.items() if isinstance(entry, dict) and "command" in entry)
        if local:
            Annotations.of(self).add_warning_v2(
                "progressive-mcp:stdio-servers",
                f"servers {', '.join(local)} run a command: on Lambda that command must be in the function's "
                "asset or a layer (the Python runtime has no npx or uvx); Streamable HTTP servers (`url`) need nothing",
            )
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
        staged = self.asset_inputs.cache_root.parent / "servers-layer" / digest
        (staged / "progressive-mcp").mkdir(parents=True, exist_ok=True)
        (staged / "progressive-mcp" / "servers.json").write_text(text, encoding="utf-8")
        self.servers_layer = lambda_.LayerVersion(
            self,
            "ServersLayer",
            code=lambda_.Code.from_asset(str(staged)),
            description="progressive-mcp: the gateway's servers file, at /opt/progressive-mcp/servers.json",
        )
        self.tool_index_table = dynamodb.Table(
            self,
            "ToolIndexTable",
            partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name="sk", type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            # An index of what the servers list: the next sync writes it again, so it goes with the stack. (Approvals
            # made with `sync --approve` go with it; a pinned server's tools are then trusted afresh at its first sync.)
            removal_policy=RemovalPolicy.DESTROY,
        )
        gateway_env = {"PMCP_SERVERS": SERVERS_PATH, "PMCP_INDEX_TABLE": self.tool_index_table.table_name}
        if config.servers_secret_arn:
            gateway_env["PMCP_SERVERS_SECRET"] = config.servers_secret_arn
        self.function.add_layers(self.servers_layer)
        if config.snap_start:
            # The function's Layers property names the layer by a Ref that stays the same when the file changes, so
            # the version's hash would not move: the file's digest makes a new servers file publish a new version.
            self.function.invalidate_version_based_on(digest)
        for name, value in gateway_env.items():
            self.function.add_environment(name, value)
        self.tool_index_table.grant(self.role, "dynamodb:GetItem", "dynamodb:Query")

        self.sync_log_group = logs.LogGroup(self, "SyncLogGroup", retention=RETENTION[config.log_retention_days])
        self.sync_role = iam.Role(
            self,
            "SyncRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="progressive-mcp sync function: its own log group and the tool store only",
        )
        self.sync_log_group.grant_write(self.sync_role)
        self.tool_index_table.grant(
            self.sync_role,
            "dynamodb:GetItem",
            "dynamodb:Query",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:DeleteItem",
            "dynamodb:BatchWriteItem",
            # `sync --approve`'s transaction: the approval is written only if the tool still has the approved hash
            "dynamodb:ConditionCheckItem",
        )
        if config.servers_secret_arn:
            secret = secretsmanager.Secret.from_secret_complete_arn(self, "ServersSecret", config.servers_secret_arn)
            secret.grant_read(self.role)
            secret.grant_read(self.sync_role)
        self.sync_function = lambda_.Function(
            self,
            "SyncFunction",
            description="progressive-mcp: syncs the MCP servers' tools into the tool store",
            runtime=RUNTIMES[config.python_runtime],
            architecture=lambda_.Architecture.ARM_64,
            handler=SYNC_HANDLER,
            code=self.code,
            layers=[self.servers_layer],
            memory_size=512,
            timeout=Duration.minutes(5),  # servers are read in parallel, each within its own timeout_s
            reserved_concurrent_executions=1,  # one sync at a time writes the store
            role=self.sync_role,
            log_group=self.sync_log_group,
            environment={
                **gateway_env,
                "POWERTOOLS_SERVICE_NAME": f"{SERVICE}-sync",
                "POWERTOOLS_LOG_LEVEL": config.log_level,
            },
        )
        if config.python_runtime != LATEST_RUNTIME:
            self._acknowledge(
                self.sync_function,
                "AwsSolutions-L1",
                f"python_runtime={config.python_runtime}: the same asset as the endpoint function, which ships "
                "bytecode compiled by a local interpreter of that version (see the endpoint function).",
            )
        self.sync_rule = events.Rule(
            self,
            "SyncSchedule",
            description="progressive-mcp: sync the MCP servers' tools into the tool store",
            schedule=events.Schedule.rate(Duration.minutes(config.sync_minutes)),
            targets=[targets.LambdaFunction(self.sync_function, retry_attempts=0)],
        )
        self._first_sync(digest)
        CfnOutput(self, "SyncFunctionName", value=self.sync_function.function_name)
        CfnOutput(self, "ToolIndexTableName", value=self.tool_index_table.table_name)

    def _first_sync(self, servers_digest: str) -> None:
        """Start a sync of every server when the stack is deployed, and again when a deploy brings a new servers file,
        so the endpoint has its tools without waiting for the schedule. Asynchronous (`Event`): a server that cannot
        be reached then does not fail or hold up the deploy; the sync logs it and the schedule tries again."""
        invoke = cr.AwsSdkCall(
            service="Lambda",
            action="invoke",
            parameters={
                "FunctionName": self.sync_function.function_name,
                "InvocationType": "Event",
                "Payload": json.dumps({"all": True}),
            },
            # a new servers file is a new id: CloudFormation updates the resource, which invokes again
            physical_resource_id=cr.PhysicalResourceId.of(f"first-sync-{servers_digest}"),
        )
        # CDK's provider function runs the call; its own role and log group, not the managed basic-execution policy
        log_group = logs.LogGroup(self, "FirstSyncLogGroup", retention=RETENTION[self.config.log_retention_days])
        role = iam.Role(
            self,
            "FirstSyncRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="progressive-mcp first sync at deploy: its own log group and invoking the sync function only",
        )
        log_group.grant_write(role)
        self.first_sync = cr.AwsCustomResource(
            self,
            "FirstSync",
            on_create=invoke,
            on_update=invoke,
            role=role,
            log_group=log_group,
            policy=cr.AwsCustomResourcePolicy.from_statements(
                [iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[self.sync_function.function_arn])]
            ),
            install_latest_aws_sdk=False,  # the runtime's SDK: no download from npm during the deploy
        )
        # after the sync function can write the store (its role's policy is attached with the function)
        self.first_sync.node.add_dependency(self.sync_function)

    # --- alarms -------------------------------------------------------------------------------------------

    def _alarms(self) -> None:
        config = self.config
        if config.endpoint == "http-api":
            server_errors = self.http_api.metric_server_error(period=ALARM_PERIOD, statistic="Sum")
        else:
            server_errors = self.invoked.metric("Url5xxCount", period=ALARM_PERIOD, statistic="Sum")
        alarms = [
            self._any_alarm(
                "FunctionErrorsAlarm",
                "The function failed (an unhandled exception or a timeout) in the last 5 minutes.",
                self.invoked.metric_errors(period=ALARM_PERIOD, statistic="Sum"),
            ),
            self._any_alarm(
                "FunctionThrottlesAlarm",
                "Lambda refused invocations (concurrency limit) in the last 5 minutes.",
                self.invoked.metric_throttles(period=ALARM_PERIOD, statistic="Sum"),
            ),
            self._any_alarm(
                "Endpoint5xxAlarm",
                "The endpoint answered 5xx (function errors, timeouts, throttling) in the last 5 minutes.",
                server_errors,
            ),
            cloudwatch.Alarm(
                self,
                "UpstreamErrorRateAlarm",
                alarm_description=(
                    f"More than {config.upstream_error_rate_threshold:.0%} of upstream calls failed in 5 minutes "
                    "(the upstream API is down, rate-limiting, or rejecting the key)."
                ),
                # IF guards the division: no calls (or no data) is no error rate, not a division by zero.
                metric=cloudwatch.MathExpression(
                    expression="IF(calls > 0, FILL(errors, 0) / calls, 0)",
                    using_metrics={
                        "errors": _service_metric("UpstreamErrors"),
                        "calls": _service_metric("UpstreamCalls"),
                    },
                    label="Upstream error rate",
                    period=ALARM_PERIOD,
                ),
                threshold=config.upstream_error_rate_threshold,
                evaluation_periods=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            ),
        ]
        self.alarms = alarms
        if config.alarm_email:
            topic = self._alarm_topic(config.alarm_email)
            for alarm in alarms:
                alarm.add_alarm_action(cloudwatch_actions.SnsAction(topic))

    def _alarm_topic(self, email: str) -> sns.Topic:
        # A customer managed key, not alias/aws/sns: CloudWatch alarms cannot publish to a topic encrypted with
        # the AWS managed key, whose key policy cannot grant cloudwatch.amazonaws.com.
        key = kms.Key(
            self,
            "AlarmTopicKey",
            description="progressive-mcp: encrypts the alarm topic",
            enable_key_rotation=True,
            removal_policy=RemovalPolicy.DESTROY,
            pending_window=Duration.days(7),
        )
        key.grant(iam.ServicePrincipal("cloudwatch.amazonaws.com"), "kms:Decrypt", "kms:GenerateDataKey")
        self.alarm_topic = sns.Topic(
            self, "AlarmTopic", display_name="progressive-mcp alarms", master_key=key, enforce_ssl=True
        )
        self.alarm_topic.add_subscription(subscriptions.EmailSubscription(email))
        CfnOutput(self, "AlarmTopicArn", value=self.alarm_topic.topic_arn)
        return self.alarm_topic

    # --- helpers ------------------------------------------------------------------------------------------

    def _any_alarm(self, construct_id: str, description: str, metric: cloudwatch.IMetric) -> cloudwatch.Alarm:
        """An alarm on a count: one or more in a period is an alarm, no data is not."""
        return cloudwatch.Alarm(
            self,
            construct_id,
            alarm_description=description,
            metric=metric,
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )

    def _acknowledge(self, construct: IConstruct, rule: str, reason: str) -> None:
        Validations.of(construct).acknowledge(Acknowledgment(id=rule, reason=reason))
        self.acknowledgements.append(Acknowledged(construct.node.path, rule, reason))

    def _logical_id(self, construct: Any) -> str:
        return self.get_logical_id(construct.node.default_child)


def _service_metric(name: str) -> cloudwatch.Metric:
    """One of the handler's EMF counts by service alone (lambda_fn.handler emits UpstreamCalls/UpstreamErrors so)."""
    return cloudwatch.Metric(
        namespace=METRICS_NAMESPACE,
        metric_name=name,
        dimensions_map={"service": SERVICE},
        statistic="Sum",
        period=ALARM_PERIOD,
    )
