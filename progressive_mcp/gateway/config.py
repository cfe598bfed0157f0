"""The servers file: the `mcpServers` JSON that Claude Desktop, Cursor and VS Code use, read into server configs.

Each entry is a stdio server (`command`, `args`, `env`, `cwd`) or a Streamable HTTP server (`url`, `headers`),
with optional gateway settings: `description`, `categories`, `ttl_s`, `enabled` (or `disabled`), `pin`,
`timeout_s` and `idle_s`. VS Code's `servers` key and `type` field are read too. `${VAR}` and `${env:VAR}` in
`args`, `env`, `url` and `headers` take the value of an environment variable; each such value is a secret, as are
`env` and `headers` values and a URL's user and password. Example::

    config = load_servers("~/.config/Claude/claude_desktop_config.json")
    [s.name for s in config.servers]            # ['memory', 'github']
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

from progressive_mcp.errors import InputFileError
from progressive_mcp.redaction import GLUED_KEY_CHARS

DEFAULT_TTL_S = 3600  # a server's tools are re-read at most this long after its last sync
DEFAULT_TIMEOUT_S = 30.0  # one request to a server (start-up, a page of tools/list, a call)
DEFAULT_IDLE_S = 300.0  # a stdio server nobody called for this long is stopped (started again on the next call)
MAX_SERVER_NAME = 40  # a tool's public name is SERVER.TOOL, within MCP's 128 characters
SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
_REFERENCE = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)\}")
_GATEWAY_KEYS = {"description", "categories", "ttl_s", "enabled", "disabled", "pin", "timeout_s", "idle_s", "type"}
_STDIO_KEYS = {"command", "args", "env", "cwd", "envFile"}
_HTTP_KEYS = {"url", "headers"}


class ServersFileError(InputFileError):
    """A servers file is unreadable or invalid."""

    kind = "the servers file"


@dataclass(frozen=True)
class ServerConfig:
    """One server of the servers file. `env`, `headers` and `expanded` hold secrets, `args` and `url` may: repr()
    never shows them."""

    name: str
    transport: Literal["stdio", "http"]
    command: str | None = None
    args: tuple[str, ...] = field(default=(), repr=False)
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    cwd: str | None = None
    url: str | None = field(default=None, repr=False)
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    description: str = ""
    # Category name → tool-name globs (fnmatch): the server's own grouping of its tools, under the server.
    categories: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    ttl_s: int = DEFAULT_TTL_S
    enabled: bool = True
    pin: bool = False
    timeout_s: float = DEFAULT_TIMEOUT_S
    idle_s: float = DEFAULT_IDLE_S
    # The command line or URL as the servers file writes it: `${VAR}` references unexpanded, so no secret.
    written: str = ""
    # What each `${VAR}` of the entry stood for (in `command`, `args` and `url` too): secrets like env values.
    expanded: tuple[str, ...] = field(default=(), repr=False)

    @property
    def secrets(self) -> tuple[str, ...]:
        """Values that must never appear in an answer, a log line or the index: env and header values, what a
        `${VAR}` stood for anywhere in the entry, and the URL's user and password. A value shorter than a glued
        key (8 characters) is configuration, not a credential (`true`, `info`, `8080`): masked everywhere, it
        would take those words and numbers out of every answer (and break the JSON text that holds them)."""
        values = (*self.env.values(), *self.headers.values(), *self.expanded, *_userinfo(self.url))
        return tuple(dict.fromkeys(v for v in values if len(v) >= GLUED_KEY_CHARS))

    @property
    def fingerprint(self) -> str:
        """What identifies the server's process or endpoint, without its secrets (for logs and the store): its
        command line or URL as the servers file writes it, `${VAR}` unexpanded and a URL's user:password left out.
        Another command, argument or URL in the file is another server; a new value of a variable (a rotated token)
        is not."""
        return self.written or _identity(self.transport, self.command, self.args, self.url)

    @property
    def legacy_fingerprint(self) -> str:
        """The fingerprint stores of schema 1 hold: the command line with `${VAR}` expanded (so it may hold a
        secret: compared, never stored or shown)."""
        return _identity(self.transport, self.command, self.args, self.url)


@dataclass(frozen=True)
class GatewayConfig:
    """Every server of a servers file, in file order (disabled ones included, marked)."""

    source: str
    servers: tuple[ServerConfig, ...]
    pin: bool = False  # the file's `progressive-mcp.pin`: pin every server's tools

    @property
    def enabled(self) -> tuple[ServerConfig, ...]:
        return tuple(s for s in self.servers if s.enabled)

    def server(self, name: str) -> ServerConfig:
        return next(s for s in self.servers if s.name == name)

    @property
    def secrets(self) -> tuple[str, ...]:
        return tuple(secret for server in self.servers for secret in server.secrets)


def load_servers(path: str | Path, environ: Mapping[str, str] | None = None) -> GatewayConfig:
    """The servers a file configures; raises ServersFileError naming every problem (never a secret's value)."""
    source = str(path)
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ServersFileError(source, ["no such file"]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ServersFileError(source, [f"cannot be read: {type(exc).__name__}"]) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ServersFileError(source, [f"line {exc.lineno}, column {exc.colno}: not valid JSON: {exc.msg}"]) from None
    return parse_servers(data, source, os.environ if environ is None else environ)


def parse_servers(data: Any, source: str, environ: Mapping[str, str]) -> GatewayConfig:
    """`load_servers` for JSON already parsed."""
    problems: list[str] = []
    if not isinstance(data, dict):
        raise ServersFileError(source, ["the file must hold a JSON object with an `mcpServers` object"])
    key = "mcpServers" if "mcpServers" in data else "servers" if "servers" in data else None
    if key is None:
        raise ServersFileError(
            source, ["no `mcpServers` object (the Claude Desktop / Cursor format) or `servers` (VS Code's)"]
        )
    entries = data[key]
    if not isinstance(entries, dict):
        raise ServersFileError(source, [f"`{key}` must be an object of server name → server"])
    options = data.get("progressive-mcp", {})
    pin_all = False
    if not isinstance(options, dict) or not set(options) <= {"pin"} or not isinstance(options.get("pin", False), bool):
        problems.append("`progressive-mcp` must be an object whose only member is `pin` (true or false)")
    else:
        pin_all = bool(options.get("pin", False))
    servers: list[ServerConfig] = []
    folded: dict[str, str] = {}
    for name, entry in entries.items():
        where = f"{key}.{name}"
        server = _server(name, entry, where, environ, problems)
        if server is None:
            continue
        other = folded.setdefault(name.casefold(), name)
        if other != name:
            problems.append(f"{where}: the name differs from {other!r} only in case; tool names would collide")
            continue
        servers.append(server)
    if not entries:
        problems.append(f"`{key}` names no server")
    if problems:
        raise ServersFileError(source, problems)
    return GatewayConfig(source=source, servers=tuple(servers), pin=pin_all)


def _server(name: str, entry: Any, where: str, environ: Mapping[str, str], problems: list[str]) -> ServerConfig | None:
    count = len(problems)
    if not SERVER_NAME.match(name) or len(name) > MAX_SERVER_NAME:
        problems.append(
            f"{where}: a server name must be 1-{MAX_SERVER_NAME} letters, digits, `_` or `-` (it prefixes the "
            "names of its tools, as SERVER.TOOL)"
        )
    if not isinstance(entry, dict):
        problems.append(f"{where}: must be an object with `command` (a stdio server) or `url` (an HTTP server)")
        return None
    unknown = sorted(set(entry) - _GATEWAY_KEYS - _STDIO_KEYS - _HTTP_KEYS)
    if unknown:
        problems.append(f"{where}: unknown member(s) {', '.join(unknown)}")
    kind = entry.get("type")
    if kind not in (None, "stdio", "http", "streamable-http", "streamableHttp", "sse"):
        problems.append(f"{where}.type: must be stdio or http, not {kind!r}")
    if kind == "sse":
        problems.append(f"{where}.type: the old SSE transport is not supported; use the server's Streamable HTTP URL")
    has_command, has_url = "command" in entry, "url" in entry
    if has_command == has_url:
        problems.append(f"{where}: give either `command` (a stdio server) or `url` (a Streamable HTTP server)")
        return None
    if "envFile" in entry:
        problems.append(f"{where}.envFile: not supported; put the variables in `env` or in the environment")
    expand = _Expander(where, environ, problems)
    common = _gateway_settings(entry, where, problems)
    if has_command:
        command = entry["command"]
        args = entry.get("args", [])
        env = entry.get("env", {})
        cwd = entry.get("cwd")
        if not isinstance(command, str) or not command.strip():
            problems.append(f"{where}.command: must be a non-empty string")
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            problems.append(f"{where}.args: must be a list of strings")
            args = []
        env = _string_map(env, f"{where}.env", problems)
        if cwd is not None and not isinstance(cwd, str):
            problems.append(f"{where}.cwd: must be a string")
            cwd = None
        if len(problems) > count:
            return None
        return ServerConfig(
            name=name,
            transport="stdio",
            command=expand(command, "command"),
            args=tuple(expand(a, "args") for a in args),
            env={k: expand(v, f"env.{k}") for k, v in env.items()},
            cwd=str(Path(cwd).expanduser()) if cwd else None,
            written=_identity("stdio", command, tuple(args), None),
            expanded=tuple(expand.values),
            **common,
        )
    url = entry["url"]
    headers = entry.get("headers", {})
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        problems.append(f"{where}.url: must be an http:// or https:// URL")
    headers = _string_map(headers, f"{where}.headers", problems)
    if len(problems) > count:
        return None
    return ServerConfig(
        name=name,
        transport="http",
        url=expand(url, "url"),
        headers={k: expand(v, f"headers.{k}") for k, v in headers.items()},
        written=_identity("http", None, (), url),
        expanded=tuple(expand.values),
        **common,
    )


def _string_map(value: Any, where: str, problems: list[str]) -> dict[str, str]:
    """`env` or `headers`: an object of string values ({} and a problem otherwise)."""
    if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
        return value
    problems.append(f"{where}: must be an object of string values")
    return {}


def _gateway_settings(entry: dict[str, Any], where: str, problems: list[str]) -> dict[str, Any]:
    settings: dict[str, Any] = {}
    description = entry.get("description", "")
    if not isinstance(description, str):
        problems.append(f"{where}.description: must be a string")
    else:
        settings["description"] = " ".join(description.split())
    categories = entry.get("categories", {})
    if not isinstance(categories, dict) or not all(
        isinstance(k, str) and SERVER_NAME.match(k) and isinstance(v, list) and all(isinstance(g, str) for g in v)
        for k, v in categories.items()
    ):
        problems.append(
            f"{where}.categories: must map category names (letters, digits, `_`, `-`) to lists of tool-name globs, "
            'e.g. {"issues": ["*issue*"]}'
        )
    else:
        settings["categories"] = {k: tuple(v) for k, v in categories.items()}
    for name, low in (("ttl_s", 0), ("timeout_s", 0.1), ("idle_s", 0)):
        if name in entry:
            value = entry[name]
            if isinstance(value, bool) or not isinstance(value, int | float) or value < low:
                problems.append(f"{where}.{name}: must be a number of seconds ≥ {low}")
            else:
                settings[name] = int(value) if name == "ttl_s" else float(value)
    for name in ("enabled", "disabled", "pin"):
        if name in entry and not isinstance(entry[name], bool):
            problems.append(f"{where}.{name}: must be true or false")
    settings["enabled"] = entry.get("enabled", True) is True and entry.get("disabled", False) is not True
    settings["pin"] = entry.get("pin", False) is True
    return settings


class _Expander:
    """`${VAR}` / `${env:VAR}` → the variable's value; a missing variable is a problem naming it."""

    def __init__(self, where: str, environ: Mapping[str, str], problems: list[str]) -> None:
        self.where, self.environ, self.problems = where, environ, problems
        self.values: list[str] = []  # what the references stood for

    def __call__(self, value: str, member: str) -> str:
        def substitute(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in self.environ:
                self.problems.append(f"{self.where}.{member}: environment variable {name} is not set")
                return ""
            self.values.append(self.environ[name])
            return self.environ[name]

        return _REFERENCE.sub(substitute, value)


def _identity(transport: str, command: str | None, args: tuple[str, ...], url: str | None) -> str:
    if transport == "http":
        return _without_userinfo(url or "")
    return " ".join([command or "", *args])


def _userinfo(url: str | None) -> tuple[str, ...]:
    """A URL's user and password (`https://user:token@host/`), as sent and decoded."""
    if not url:
        return ()
    try:
        parts = urlsplit(url)
        found = (parts.username, parts.password)
    except ValueError:
        return ()
    return tuple(v for value in found if value for v in {value, unquote(value)})


def _without_userinfo(url: str) -> str:
    return re.sub(r"//[^/@]*@", "//", url)
