"""AWS Lambda entry point: API Gateway HTTP API (payload 2.0) and Function URL events → the core endpoint.

The catalog and the default surface are built once, at import (the Lambda init phase); each
invocation is one stateless HTTP request. Logs are Powertools JSON lines (correlation id = the
request id, cold start, the JSON-RPC method and tool name, status, timings) and never contain
headers, query strings or bodies, which carry keys and tokens. Metrics are CloudWatch EMF:
`Requests`, `ProtocolErrors`, `ToolErrors` and `UpstreamLatency`, by method and tool; and, by service
alone (what alarms read): `UpstreamCalls`, `UpstreamErrors` (see `UPSTREAM_FAULTS`), `CacheHits`,
`CacheMisses` and `CacheErrors`.

Handler setting: `lambda_fn.handler.handler`. Configuration: the PMCP_* environment variables
(see the README; the AWS-backed ones in `lambda_fn.aws`); `progressive-mcp serve` runs this same
module behind a local HTTP server.
"""

from __future__ import annotations

import base64
import binascii
import os
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

from lambda_fn import snapstart
from lambda_fn.aws import endpoint_from_environment
from progressive_mcp.calls.codemode import TOOL_EXECUTE
from progressive_mcp.redaction import escape_controls
from progressive_mcp.surfaces.endpoint import Endpoint, Exchange, HttpRequest, HttpResponse
from progressive_mcp.surfaces.metatools import META_TOOL_NAMES

SERVICE = "progressive-mcp"
NAMESPACE = "ProgressiveMCP"
# Dimension values come from a fixed set, so a caller cannot create CloudWatch metrics at will.
KNOWN_METHODS = frozenset({"initialize", "ping", "server/discover", "tools/list", "tools/call"})
META_TOOLS = frozenset({*META_TOOL_NAMES, TOOL_EXECUTE})  # code mode's TOOL_EXECUTE too
# Tool errors that are the upstream's doing (down, slow, garbled, out of quota, or an unclassified notice), as
# opposed to the caller's (a bad symbol: UpstreamRejected; a paid feature: PremiumRequired; bad arguments;
# no or a wrong key of their own: MissingApiKey). `UpstreamErrors / UpstreamCalls` is the rate alarms watch.
UPSTREAM_FAULTS = frozenset(
    {"UpstreamUnavailable", "UpstreamTimeout", "UpstreamBadResponse", "RateLimited", "UpstreamError"}
)
# In server-key and oauth modes the key is the operator's: the upstream refusing it fails every caller, so it counts.
SERVER_KEY_FAULTS = UPSTREAM_FAULTS | {"MissingApiKey"}
CACHE_METRICS = {"hit": "CacheHits", "miss": "CacheMisses", "error": "CacheErrors"}
# Kept from the invocation's remaining time for answering after an upstream gives up: the error result,
# the log line and the metrics. Tool calls end by then even if PMCP_DEADLINE_S is set too high.
INVOCATION_MARGIN_S = 2.0

logger = Logger(service=SERVICE)

LambdaHandler = Callable[[dict[str, Any], Any], dict[str, Any]]


def request_from_event(event: dict[str, Any]) -> HttpRequest:
    """An HttpRequest from a payload-2.0 event (API Gateway HTTP API or Lambda Function URL)."""
    context = event.get("requestContext") or {}
    http = context.get("http") or {}
    path = event.get("rawPath") or http.get("path") or "/"
    stage = context.get("stage")
    if stage and stage != "$default" and path.startswith(f"/{stage}/"):
        path = path[len(stage) + 1 :]
    body = event.get("body") or ""
    if event.get("isBase64Encoded"):
        try:
            raw = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            raw = b"\xff"  # not base64 after all: the endpoint answers with a parse error
    else:
        raw = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else bytes(body)
    return HttpRequest.build(
        http.get("method") or "GET",
        path,
        query=event.get("rawQueryString") or "",
        headers=event.get("headers") or {},
        body=raw,
        source_ip=http.get("sourceIp") if isinstance(http.get("sourceIp"), str) else None,
    )


def result_from_response(response: HttpResponse) -> dict[str, Any]:
    """The Lambda proxy result (payload 2.0) for an endpoint response."""
    return {
        "statusCode": response.status,
        "headers": response.headers,
        "body": response.body.decode("utf-8"),
        "isBase64Encoded": False,
    }


def make_handler(endpoint: Endpoint) -> LambdaHandler:
    """A Lambda handler around `endpoint` (the module-level `handler` uses the one built from the environment).

    Log keys and metrics are per invocation (Powertools' thread-safe keys and EphemeralMetrics), so
    `progressive-mcp serve`, which may run several invocations at once on threads, never mixes them.
    """
    invoked: list[bool] = []
    lock = threading.Lock()

    def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
        started = time.perf_counter()
        with lock:  # exactly one invocation is the cold one, even with serve's threads
            cold_start = not invoked
            if cold_start:
                invoked.append(True)
        request_id = (event.get("requestContext") or {}).get("requestId") or getattr(context, "aws_request_id", None)
        logger.thread_safe_append_keys(
            correlation_id=request_id,
            cold_start=cold_start,
            function_name=getattr(context, "function_name", None),
            function_request_id=getattr(context, "aws_request_id", None),
        )
        try:
            request = request_from_event(event)
            deadline = invocation_deadline(context)
            if deadline is not None:
                request = replace(request, deadline=deadline)
            response = endpoint.handle(request)
            _observe(endpoint, response, (time.perf_counter() - started) * 1000, cold_start)
        finally:
            logger.thread_safe_clear_keys()
        return result_from_response(response)

    return handle


def invocation_deadline(context: Any) -> float | None:
    """The time.monotonic() by which tool calls must end for this invocation to answer, or None (no context)."""
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    if not callable(remaining):
        return None
    try:
        remaining_s = float(remaining()) / 1000
    except (TypeError, ValueError):
        return None
    return time.monotonic() + max(0.0, remaining_s - INVOCATION_MARGIN_S)


def _observe(endpoint: Endpoint, response: HttpResponse, duration_ms: float, cold_start: bool) -> None:
    exchange = response.exchange
    metrics = EphemeralMetrics(namespace=NAMESPACE, service=SERVICE)
    method = exchange.rpc_method or "none"
    method = method if method in KNOWN_METHODS or method == "none" else "other"
    tool = exchange.tool
    known_tool = tool is not None and (tool in META_TOOLS or tool in endpoint.surface.catalog)
    metrics.add_dimension(name="method", value=method)
    if method == "tools/call":
        metrics.add_dimension(name="tool", value=tool if known_tool and tool else "other")
    metrics.add_metric(name="Requests", unit=MetricUnit.Count, value=1)
    if exchange.error_code is not None:
        metrics.add_metric(name="ProtocolErrors", unit=MetricUnit.Count, value=1)
    if exchange.call.error is not None:
        metrics.add_metric(name="ToolErrors", unit=MetricUnit.Count, value=1)
    if exchange.call.upstream_ms is not None:
        metrics.add_metric(name="UpstreamLatency", unit=MetricUnit.Milliseconds, value=exchange.call.upstream_ms)
    if cold_start:
        metrics.add_metric(name="ColdStart", unit=MetricUnit.Count, value=1)
    metrics.flush_metrics()
    _observe_service(endpoint, exchange)
    logger.info(
        "request",
        extra={
            "status": response.status,
            "rpc_method": _loggable(exchange.rpc_method),
            "tool": tool if known_tool else None,
            "protocol_version": exchange.protocol_version,
            "mode": exchange.mode,
            "identity": exchange.identity,  # oauth: a digest of issuer and subject, never the token
            "error_code": exchange.error_code,
            "tool_error": exchange.call.error,
            "upstream_ms": None if exchange.call.upstream_ms is None else round(exchange.call.upstream_ms, 1),
            "cache": exchange.call.cache,
            "duration_ms": round(duration_ms, 2),
        },
    )


def _loggable(text: str | None) -> str | None:
    """Text a log stream can write: a lone surrogate (a "\\ud800" escape in the body) has no UTF-8 form, and a line
    holding one would be dropped, so it is logged as its escape; control and bidi characters (which the JSON of a
    log line keeps as they are, or a terminal obeys) are escaped too."""
    return None if text is None else escape_controls(text).encode("utf-8", "backslashreplace").decode("utf-8")


def _observe_service(endpoint: Endpoint, exchange: Exchange) -> None:
    """Counts by service alone (a metric math alarm needs both sides of a rate under the same dimensions)."""
    metrics = EphemeralMetrics(namespace=NAMESPACE, service=SERVICE)
    faults = UPSTREAM_FAULTS if endpoint.auth_mode == "passthrough" else SERVER_KEY_FAULTS
    for call in (exchange.call, *exchange.call.script_calls):  # a TOOL_EXECUTE: each of its script's calls
        if call.upstream_ms is not None:
            metrics.add_metric(name="UpstreamCalls", unit=MetricUnit.Count, value=1)
            metrics.add_metric(name="UpstreamErrors", unit=MetricUnit.Count, value=1 if call.error in faults else 0)
        if call.cache in CACHE_METRICS:
            metrics.add_metric(name=CACHE_METRICS[call.cache], unit=MetricUnit.Count, value=1)
    if metrics.metric_set:  # nothing to say for a tools/list: no empty EMF line, no warning
        metrics.flush_metrics()


if os.environ.get("AWS_LAMBDA_FUNCTION_NAME"):
    # On Lambda, the core's own log lines (a cache or store failure, an upstream retry) become
    # Powertools JSON lines with the request's correlation id, instead of bare text.
    from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers

    copy_config_to_registered_loggers(source_logger=logger, include={"progressive_mcp", "lambda_fn"})

ENDPOINT = endpoint_from_environment(os.environ)
handler: LambdaHandler = make_handler(ENDPOINT)
snapstart.register_hooks()  # SnapStart's runtime hooks (the stack's snap_start); nothing without it
