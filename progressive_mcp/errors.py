"""The one exception hierarchy of progressive-mcp; `ProgressiveMCPError` is its root.

Each class says what went wrong. They are turned into MCP `isError` results or protocol errors
in exactly one place (`progressive_mcp.surfaces.surface`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from progressive_mcp.schema_excerpt import mentioned, quote_schema


class ProgressiveMCPError(Exception):
    """Root of every error this package raises on purpose."""


class InputFileError(ProgressiveMCPError):
    """An input file is unreadable or invalid; `problems` holds one line per problem. Subclasses say what kind of
    file (`kind`) and may list only the first `max_listed` problems."""

    kind = "the file"
    max_listed: int | None = None

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        shown = problems if self.max_listed is None else problems[: self.max_listed]
        listing = "\n".join(f"  - {p}" for p in shown)
        if len(problems) > len(shown):
            listing += f"\n  ... and {len(problems) - len(shown)} more"
        noun = "problem" if len(problems) == 1 else "problems"
        super().__init__(f"{source}: {len(problems)} {noun} in {self.kind}:\n{listing}")


class SpecError(InputFileError):
    """A spec file (or a vocabulary or OpenAPI document it is built from) is unreadable or invalid."""

    kind = "the spec"


class ConfigError(ProgressiveMCPError):
    """A setting (environment variable or command-line flag) has a value we cannot use."""


class EmbeddingProviderError(ProgressiveMCPError):
    """A configured embedding provider could not give vectors (unreachable, refused, wrong size); search goes on
    without them. The message names the reason, never the key."""


class ToolError(ProgressiveMCPError):
    """An error that becomes an `isError` tool result the model can act on."""

    def details(self) -> dict[str, Any]:
        """Structured fields for the error result, beside the message."""
        return {}


class UnknownTool(ToolError):
    """A tool name that is not in the catalog (or not in the current surface)."""

    FIND_WITH_META_TOOLS = "Use TOOL_SEARCH or TOOL_LIST to find tool names."

    def __init__(self, name: str, suggestions: list[str], *, how_to_find: str = FIND_WITH_META_TOOLS) -> None:
        """`how_to_find` tells the model where the real names are, in terms of the tools it has."""
        self.name = name
        self.suggestions = suggestions
        hint = f" Did you mean: {', '.join(suggestions)}?" if suggestions else ""
        super().__init__(f"Unknown tool {clip(name)!r}.{hint} {how_to_find}")

    def details(self) -> dict[str, Any]:
        return {"tool_name": clip(self.name), "suggestions": self.suggestions}


class ToolWithheld(UnknownTool):
    """A tool of a pinned server behind the gateway, withheld until its operator approves its definition: not
    offered, so unknown to this surface, but the message says why and how it gets approved."""

    def __init__(self, name: str, reason: str, pending_hash: str) -> None:
        self.name = name
        self.suggestions = []
        self.pending_hash = pending_hash
        ToolError.__init__(self, f"Tool {name!r} is withheld until its operator approves it: {reason}.")

    def details(self) -> dict[str, Any]:
        return {"tool_name": self.name, "kind": "withheld", "pending_hash": self.pending_hash}


def clip(text: str, limit: int = 80) -> str:
    """Echoed input cut to a readable length (a megabyte of tool name must not come back whole)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


class InvalidArguments(ToolError):
    """Arguments that do not satisfy a tool's input schema; every problem is listed. The details quote the
    schema of the arguments at `paths` ("shipping/address/line1"; by default those the problems start with), or
    the whole input schema when it is small (`schema_excerpt.quote_schema`)."""

    def __init__(
        self, tool_name: str, problems: list[str], input_schema: dict[str, Any], *, paths: Sequence[str] = ()
    ) -> None:
        self.tool_name = tool_name
        self.problems = problems
        self.input_schema = input_schema
        self.quoted = quote_schema(input_schema, list(paths) or mentioned(problems, input_schema), problems)
        listing = "; ".join(problems)
        super().__init__(
            f"Invalid arguments for {tool_name}: {listing}. Fix the arguments to match inputSchema and call again."
        )

    def details(self) -> dict[str, Any]:
        return {"tool_name": self.tool_name, "problems": self.problems, **self.quoted}


class UpstreamError(ToolError):
    """The upstream API could not give an answer; `kind` names the reason for the model."""

    kind = "upstream_error"

    def __init__(self, message: str, *, status: int | None = None, retry_after_s: float | None = None) -> None:
        self.status = status
        self.retry_after_s = retry_after_s
        super().__init__(message)

    def details(self) -> dict[str, Any]:
        fields: dict[str, Any] = {"kind": self.kind}
        if self.status is not None:
            fields["upstream_status"] = self.status
        if self.retry_after_s is not None:
            fields["retry_after_s"] = self.retry_after_s
        return fields


class UpstreamRejected(UpstreamError):
    """The upstream said the request itself is wrong (bad symbol, bad parameter value)."""

    kind = "invalid_request"


class RateLimited(UpstreamError):
    """The upstream's request quota is used up for now."""

    kind = "rate_limited"


class PremiumRequired(UpstreamError):
    """The endpoint or option needs a paid upstream plan."""

    kind = "premium_required"


class MissingApiKey(UpstreamError):
    """No upstream key is configured, or the upstream refused the one we sent."""

    kind = "auth"


class UpstreamTimeout(UpstreamError):
    """The upstream did not answer within the attempt's time or the call's deadline (a timeout is not retried)."""

    kind = "timeout"


class UpstreamUnavailable(UpstreamError):
    """The upstream could not be reached or answered with a server error, even after retries."""

    kind = "unavailable"


class UpstreamBadResponse(UpstreamError):
    """The upstream answered with something we could not parse."""

    kind = "bad_response"
