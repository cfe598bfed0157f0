"""The gateway's scheduled sync function: reads the MCP servers of `PMCP_SERVERS` and brings the DynamoDB tool
store (`PMCP_INDEX_TABLE`) up to date, so that the serving function never waits on another server.

An EventBridge rule invokes it every few minutes (`sync_minutes` in the stack); each run syncs the servers never
synced or past their `ttl_s`, and drops the documents of servers no longer in the file. An event
`{"servers": ["NAME", ...]}` syncs those now; `{"all": true}` syncs every server;
`{"approve": ["SERVER.TOOL@HASH", ...]}` approves the pending definitions of withheld tools of pinned servers, each
named by the hash a sync reported (what `progressive-mcp sync --approve` does locally; another hash is refused), and
syncs nothing. It returns the sync report (`SyncReport.as_json()`: each server's created, updated and deleted
tools, or why it could not be read, and each withheld tool with its pending definition and diff) and logs one line
per server and per withheld tool. It migrates a tool store of an older schema first (`DynamoToolStore.upgrade`).
The file's `${VAR}` values come from the environment, or from `PMCP_SERVERS_SECRET`.

Handler setting: `lambda_fn.sync.handler`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools import Logger

from lambda_fn.aws import (
    ENV_INDEX_TABLE,
    ENV_SERVERS_SECRET,
    _client,
    _session,
    check_servers_references,
    fast_config,
    servers_environ,
    servers_variables,
)
from lambda_fn.toolstore import DynamoToolStore
from progressive_mcp.errors import ConfigError
from progressive_mcp.gateway import pins
from progressive_mcp.gateway.config import load_servers
from progressive_mcp.gateway.connections import ServerPool
from progressive_mcp.gateway.sync import SyncReport, due, sync_servers
from progressive_mcp.gateway.tools import gateway_catalog

logger = Logger(service="progressive-mcp-sync")


def run_sync(event: Mapping[str, Any], env: Mapping[str, str], *, session: Any = None) -> SyncReport:
    """One scheduled (or asked-for) sync of the servers file into the tool store, as the module describes."""
    servers_path, table = env.get("PMCP_SERVERS"), env.get(ENV_INDEX_TABLE)
    if not servers_path or not table:
        raise ConfigError(f"the sync function needs PMCP_SERVERS and {ENV_INDEX_TABLE}")
    session = session or _session(env)
    secret = env.get(ENV_SERVERS_SECRET)
    variables = servers_environ(env, secret, session) if secret else servers_variables(env)
    check_servers_references(servers_path, variables)
    config = load_servers(servers_path, variables)
    store = DynamoToolStore(table, client=_client(session, "dynamodb", fast_config()))
    if store.upgrade():
        logger.info("the tool store was migrated", extra={"table": table})
    approve = event.get("approve")
    if approve is not None:
        if not isinstance(approve, list) or not all(isinstance(n, str) for n in approve):
            raise ConfigError('the event\'s "approve" must be a list of SERVER.TOOL@HASH strings')
        refused = []
        for named in approve:
            try:
                pins.approve(store, named)
            except pins.ApprovalRefused as exc:
                refused.append(str(exc))
        if refused:
            raise pins.ApprovalRefused("; ".join(refused) + (" (the others were approved)" if len(approve) > 1 else ""))
        return SyncReport([])
    asked = event.get("servers")
    if asked is not None and (not isinstance(asked, list) or not all(isinstance(n, str) for n in asked)):
        raise ConfigError('the event\'s "servers" must be a list of server names')
    if asked:
        unknown = sorted(set(asked) - {s.name for s in config.enabled})
        if unknown:
            raise ConfigError(f"no enabled server named {', '.join(unknown)} in {config.source}")
    only = asked or (None if event.get("all") else due(config, store, time.time()))
    pool = ServerPool(config)
    try:
        report = sync_servers(config, store, pool.list_tools, only=only, prune=True)
    finally:
        pool.close()
    # The pinned servers' tools now withheld, each with its pending definition and diff: what to review before
    # approving (the invocation's answer, and its log).
    _, withheld = gateway_catalog(config, store.tools())
    report.withheld = [pins.review(store, entry) for entry in withheld]
    return report


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    report = run_sync(event or {}, os.environ)
    for server in report.servers:
        # "tools_created": `created` is a LogRecord attribute, which `extra` may not overwrite
        counts = {f"tools_{k}": len(getattr(server.diff, k)) for k in ("created", "updated", "deleted")}
        if server.error:
            logger.warning("sync failed", extra={"server": server.server, "error": server.error})
        else:
            logger.info("synced", extra={"server": server.server, "removed": server.removed, **counts})
    for entry in report.withheld:
        logger.warning("withheld", extra={k: entry[k] for k in ("name", "status", "hash", "diff")})
    return report.as_json()
