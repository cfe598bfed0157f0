"""Per-identity policies: which tools a caller of the HTTP endpoint may see and call, and how often it may ask.

A policy narrows the catalog itself (`narrow_catalog`): a hidden tool is not in the narrowed catalog, so every
discovery answer, code-mode stub and call of that caller's surface behaves as if it did not exist. Policies are
written by the operator beside the endpoint tokens (PMCP_POLICIES_FILE, PMCP_POLICIES, or the tokens secret on
AWS) and checked at start. Example::

    policies = parse_policies({"identities": [{"token": "sha256:3f2a9c1d0b7e4a55", "categories": ["forex"]}]})
    policy = policies.match(Caller(token_digest=token_digest(token)))   # the first entry that matches, or default
    narrow_catalog(catalog, policy).tools                              # the forex tools only
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import math
import re
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from progressive_mcp.catalog import Catalog, CatalogTool, Param, _freeze, _thaw, input_schema
from progressive_mcp.errors import ConfigError

POLICIES_FILE_ENV = "PMCP_POLICIES_FILE"
POLICIES_ENV = "PMCP_POLICIES"
# An entry names a static token by a prefix of its SHA-256 (hex): never the token itself, so the file can be
# reviewed and kept in version control. 16 hex characters (64 bits) tell any two real tokens apart.
MIN_DIGEST_CHARS = 16
TOKEN_DIGEST = re.compile(r"sha256:([0-9a-f]{16,64})")
MATCH_FIELDS = ("token", "subject", "group", "scope")
POLICY_FIELDS = ("categories", "tools", "deny", "read_only", "premium", "rate")
ENTRY_FIELDS = frozenset({*MATCH_FIELDS, *POLICY_FIELDS, "name"})
TOP_FIELDS = frozenset({"default", "identities", "groups_claim"})
MAX_RATE_PER_MINUTE = 100_000
DEFAULT_GROUPS_CLAIM = "groups"
# A tool name shaped as an identifier (a separator, or a lower-case letter before a capital: TIME_SERIES_DAILY,
# chat.postMessage, get-an-album, listCharges): only these are looked for in other tools' prose. A one-word name
# (MACD, search) is also the domain's word for a thing, and prose naming the thing says nothing about a tool.
IDENTIFIER_SHAPED = re.compile(r".*(?:[._/\-]|[a-z][A-Z]).*")


def token_digest(token: str) -> str:
    """The full SHA-256 (hex) of a static bearer token, which an entry's `token: sha256:<prefix>` is matched with."""
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class Policy:
    """What one identity may use. Empty `tools` allows every name; `categories` None allows every category."""

    label: str = "default"  # for errors and logs: the entry's digest, subject, group or scope, never a token
    categories: frozenset[str] | None = None
    tools: tuple[str, ...] = ()  # fnmatch patterns (case-insensitive) a tool's name must match one of
    deny: tuple[str, ...] = ()  # fnmatch patterns that hide a tool even when allowed
    read_only: bool = False  # only tools whose annotations say readOnlyHint
    premium: bool = True  # False: no premium tool, no premium argument value
    rate: int | None = None  # requests per minute; None: unlimited

    @property
    def key(self) -> tuple[Any, ...]:
        """What decides the visible tools (not the label or rate): surfaces are cached per key."""
        return (self.categories, self.tools, self.deny, self.read_only, self.premium)

    @property
    def unrestricted(self) -> bool:
        return self.key == Policy().key

    def allows(self, tool: CatalogTool) -> bool:
        """Whether the tool is visible to this policy (before its premium argument values are stripped)."""
        read_only = bool(tool.annotations.get("readOnlyHint", False))
        return self.allows_named(tool.name, tool.category, read_only=read_only, premium=tool.premium)

    def allows_named(self, name: str, category: str, *, read_only: bool = False, premium: bool = False) -> bool:
        """Whether a tool of this name and category (read-only, premium as said) is visible to this policy."""
        if self.categories is not None and category not in self.categories:
            return False
        name = name.casefold()
        if self.tools and not any(fnmatch.fnmatchcase(name, p.casefold()) for p in self.tools):
            return False
        if any(fnmatch.fnmatchcase(name, p.casefold()) for p in self.deny):
            return False
        if self.read_only and not read_only:
            return False
        return self.premium or not premium


ALLOW_ALL = Policy(label="allow-all")


@dataclass(frozen=True)
class Caller:
    """Who a request speaks for, as policies match it: a static token's digest, or an OAuth token's claims."""

    id: str = ""  # a digest naming the caller (never a token): what its request rate is counted under
    token_digest: str | None = None
    subject: str | None = None
    groups: frozenset[str] = frozenset()
    scopes: frozenset[str] = frozenset()


@dataclass(frozen=True)
class _Entry:
    kind: str  # one of MATCH_FIELDS
    values: tuple[str, ...]  # token digest prefixes, or the one subject / group / scope
    policy: Policy
    name: str | None = None  # the operator's name for the entry (what `--policy NAME` picks on stdio)

    def matches(self, caller: Caller) -> bool:
        if self.kind == "name":  # an entry only a one-user process picks by name (`--policy NAME`)
            return False
        if self.kind == "token":
            return caller.token_digest is not None and any(caller.token_digest.startswith(v) for v in self.values)
        if self.kind == "subject":
            return caller.subject is not None and caller.subject in self.values
        if self.kind == "group":
            return bool(caller.groups.intersection(self.values))
        return bool(caller.scopes.intersection(self.values))


@dataclass(frozen=True)
class PolicySet:
    """The operator's policies: entries matched in order (the first that matches wins), then the default (None:
    deny, an identity without an entry is refused)."""

    entries: tuple[_Entry, ...] = ()
    default: Policy | None = None
    groups_claim: str = DEFAULT_GROUPS_CLAIM
    token_digests: tuple[str, ...] = field(default=(), repr=False)

    def match(self, caller: Caller) -> Policy | None:
        for entry in self.entries:
            if entry.matches(caller):
                return entry.policy
        return self.default

    def named(self, name: str) -> Policy:
        """The policy of the entry called `name`, or the default for "default": how a one-user process (stdio), whose
        caller no token or access token names, picks its policy. ConfigError for a name no entry has."""
        if name == "default":
            if self.default is None:
                raise ConfigError("policies: the default is deny, so `--policy default` would hide every tool")
            return self.default
        for entry in self.entries:
            if entry.name == name:
                return entry.policy
        names = sorted({e.name for e in self.entries if e.name} | ({"default"} if self.default else set()))
        raise ConfigError(
            f"policies: no entry is named {name[:60]!r} (the entries' `name` field); named: "
            f"{', '.join(names) or 'none'}"
        )

    def policies(self) -> Iterable[Policy]:
        yield from (e.policy for e in self.entries)
        if self.default is not None:
            yield self.default

    def check_tokens(self, tokens: Collection[str]) -> None:
        """Every `token:` digest must belong to a configured endpoint token (else it is a typo or a stale entry)."""
        digests = [token_digest(t) for t in tokens]
        for prefix in self.token_digests:
            if not any(d.startswith(prefix) for d in digests):
                raise ConfigError(
                    f"policies: the identity sha256:{prefix} (field token) matches none of the endpoint tokens; "
                    'write the sha256 of a configured token (python -c "import hashlib,sys; '
                    'print(hashlib.sha256(sys.argv[1].encode()).hexdigest()[:16])" TOKEN)'
                )

    def check_catalog(self, categories: Collection[str]) -> None:
        """Every category a policy names must be one of the catalog's."""
        for policy in self.policies():
            unknown = sorted((policy.categories or frozenset()) - set(categories))
            if unknown:
                raise ConfigError(
                    f"policies: {policy.label} (field categories): unknown categories {', '.join(unknown)}; the "
                    f"catalog has {', '.join(categories)}"
                )


def parse_policies(data: Any) -> PolicySet:
    """A PolicySet from the operator's document (parsed JSON or YAML); ConfigError names the identity and field."""
    if not isinstance(data, Mapping):
        raise ConfigError("policies: the document must be an object with `identities` (a list) and `default`")
    extra = sorted(set(data) - TOP_FIELDS)
    if extra:
        raise ConfigError(f"policies: unknown field(s) {', '.join(map(str, extra))}; allowed: {_listing(TOP_FIELDS)}")
    raw_entries = data.get("identities", [])
    if not isinstance(raw_entries, list):
        raise ConfigError("policies: `identities` must be a list of entries")
    groups_claim = data.get("groups_claim", DEFAULT_GROUPS_CLAIM)
    if not isinstance(groups_claim, str) or not groups_claim.strip():
        raise ConfigError("policies: `groups_claim` must be the name of the access token's claim listing its groups")
    entries = tuple(_entry(index, raw) for index, raw in enumerate(raw_entries))
    default_raw = data.get("default", "deny")
    if default_raw == "deny":
        default = None
    elif default_raw == "allow":
        default = ALLOW_ALL
    elif isinstance(default_raw, Mapping):
        default = _policy("default", default_raw)
    else:
        raise ConfigError("policies: `default` must be deny, allow, or a policy object (categories, tools, ...)")
    digests = tuple(v for e in entries if e.kind == "token" for v in e.values)
    return PolicySet(entries, default, groups_claim.strip(), digests)


def _entry(index: int, raw: Any) -> _Entry:
    where = f"identities[{index}]"
    if not isinstance(raw, Mapping):
        raise ConfigError(f"policies: {where} must be an object naming one of {', '.join(MATCH_FIELDS)}")
    kinds = [k for k in MATCH_FIELDS if k in raw]
    if len(kinds) > 1 or (not kinds and not isinstance(raw.get("name"), str)):
        raise ConfigError(
            f"policies: {where} must name exactly one of {', '.join(MATCH_FIELDS)} (it names {kinds}), or only a "
            "`name` (an entry for stdio's --policy NAME)"
        )
    kind = kinds[0] if kinds else "name"
    value = raw.get(kind)
    if kind == "name":
        values: tuple[str, ...] = ()
        label = where  # `_policy` adds the name
    elif kind == "token":
        items = value if isinstance(value, list) else [value]
        prefixes = []
        for item in items:
            found = TOKEN_DIGEST.fullmatch(item.strip().lower()) if isinstance(item, str) else None
            if found is None:  # never echo the value: an operator may have pasted the token itself
                raise ConfigError(
                    f"policies: {where} (field token) must be sha256:<the first {MIN_DIGEST_CHARS} to 64 hex "
                    "characters of the token's SHA-256>, not the token itself"
                )
            prefixes.append(found.group(1))
        values = tuple(prefixes)
        label = f"{where} (token sha256:{values[0]})"
    else:
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"policies: {where} (field {kind}) must be a non-empty string")
        values = (value.strip(),)
        label = f"{where} ({kind} {value.strip()[:60]!r})"
    extra = sorted(set(raw) - ENTRY_FIELDS)
    if extra:
        raise ConfigError(
            f"policies: {label}: unknown field(s) {', '.join(map(str, extra))}; allowed: {_listing(ENTRY_FIELDS)}"
        )
    name = raw.get("name")
    if name is not None and not isinstance(name, str):
        raise ConfigError(f"policies: {label} (field name) must be a string")
    return _Entry(kind, values, _policy(label, raw), name.strip() if name else None)


def _policy(label: str, raw: Mapping[str, Any]) -> Policy:
    extra = sorted(set(raw) - (ENTRY_FIELDS if label != "default" else frozenset(POLICY_FIELDS)))
    if extra:
        raise ConfigError(f"policies: {label}: unknown field(s) {', '.join(map(str, extra))}")
    categories = raw.get("categories")
    if categories is not None:
        categories = frozenset(_strings(label, "categories", categories))
    tools = _strings(label, "tools", raw.get("tools", []))
    deny = _strings(label, "deny", raw.get("deny", []))
    for field_name in ("read_only", "premium"):
        if field_name in raw and not isinstance(raw[field_name], bool):
            raise ConfigError(f"policies: {label} (field {field_name}) must be true or false")
    rate = raw.get("rate")
    if rate is not None and (
        isinstance(rate, bool) or not isinstance(rate, int) or not 1 <= rate <= MAX_RATE_PER_MINUTE
    ):
        raise ConfigError(f"policies: {label} (field rate) must be requests per minute, 1 to {MAX_RATE_PER_MINUTE}")
    return Policy(
        label=label if raw.get("name") is None else f"{label} {raw['name'][:60]!r}",
        categories=categories,
        tools=tools,
        deny=deny,
        read_only=raw.get("read_only", False),
        premium=raw.get("premium", True),
        rate=rate,
    )


def _strings(label: str, field_name: str, value: Any) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(i, str) and i.strip() for i in items):
        raise ConfigError(f"policies: {label} (field {field_name}) must be a list of non-empty strings")
    return tuple(i.strip() for i in items)


def _listing(names: Iterable[str]) -> str:
    return ", ".join(sorted(names))


def load_policies(environ: Mapping[str, str]) -> PolicySet | None:
    """The policies PMCP_POLICIES_FILE (YAML or JSON) or PMCP_POLICIES (JSON) hold; None when neither is set."""
    path = environ.get(POLICIES_FILE_ENV, "").strip()
    text = environ.get(POLICIES_ENV, "").strip()
    if path and text:
        raise ConfigError(f"set {POLICIES_FILE_ENV} or {POLICIES_ENV}, not both")
    if path:
        try:
            raw = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"{POLICIES_FILE_ENV}: cannot read {path}: {exc.strerror}") from None
        from progressive_mcp.sources.bounded_yaml import safe_load

        try:
            data = safe_load(raw)  # YAML is a superset of JSON: either works
        except Exception as exc:
            raise ConfigError(f"{POLICIES_FILE_ENV}: {path} is not YAML or JSON ({type(exc).__name__})") from None
        return parse_policies(data)
    if text:
        try:
            data = json.loads(text)
        except ValueError:
            raise ConfigError(f"{POLICIES_ENV} is not JSON") from None
        return parse_policies(data)
    return None


# --- the tools a policy leaves -----------------------------------------------------------------------------------


def narrow_catalog(catalog: Catalog, policy: Policy) -> Catalog:
    """The catalog as `policy` sees it: only the tools it allows, only the categories that keep a tool, and without
    premium argument values when `premium` is false. The catalog itself when the policy hides nothing."""
    if policy.unrestricted:
        return catalog
    tools = []
    for tool in catalog.tools:
        if not policy.allows(tool):
            continue
        if not policy.premium and any(p.premium_values for p in tool.params):
            stripped = _without_premium_values(tool)
            if stripped is None:
                continue
            tool = stripped
        tools.append(tool)
    hidden = {t.name for t in catalog.tools if IDENTIFIER_SHAPED.fullmatch(t.name)} - {t.name for t in tools}
    if hidden:  # descriptions point at other tools ("for adjusted closes use X"): a hidden one is never named
        names = "|".join(re.escape(n) for n in sorted(hidden, key=len, reverse=True))
        mention = re.compile(rf"(?<![\w-])(?:{names})(?![\w-])")
        tools = [_unmentioned(t, mention) for t in tools]
    present = {t.category for t in tools}
    categories = {name: text for name, text in catalog.categories.items() if name in present}
    return Catalog.build(catalog.api, categories, tuple(tools), catalog.vocabulary)


def shows_withheld(policy: Policy, name: str, categories: Collection[str]) -> bool:
    """Whether a gateway's withheld tool (pinned, awaiting approval) may be named to a caller of `policy`. Only its
    name and server are known (its definition is untrusted and unread), so it is named only when the policy shows a
    tool of that name in each of its server's `categories` whatever the definition says: not read-only (gateway
    tools are never premium)."""
    return policy.unrestricted or all(policy.allows_named(name, c) for c in categories)


def shows_unknown_server(policy: Policy, categories: Collection[str]) -> bool:
    """Whether a server behind the gateway none of whose tools is known (down since before its first sync) may be
    named to a caller of `policy`: only when the policy gives one of its `categories` by name and hides nothing
    else by name or annotation (a server with known tools is named when one of them is visible)."""
    if policy.unrestricted:
        return True
    named = policy.categories is not None and bool(policy.categories.intersection(categories))
    return named and not policy.tools and not policy.deny and not policy.read_only


def _unmentioned(tool: CatalogTool, mention: re.Pattern[str]) -> CatalogTool:
    """The tool with every sentence that names a hidden tool left out of its summary, description and argument
    descriptions."""
    changes: dict[str, Any] = {}
    for name in ("summary", "description"):
        text = getattr(tool, name)
        if mention.search(text):
            changes[name] = _drop_sentences(text, mention)
    properties = tool.input_schema.get("properties") or {}
    named = [
        k for k, v in properties.items() if isinstance(v, Mapping) and mention.search(str(v.get("description", "")))
    ]
    if named:
        schema = _thaw(tool.input_schema)
        for key in named:
            schema["properties"][key]["description"] = _drop_sentences(
                schema["properties"][key]["description"], mention
            )
        changes["input_schema"] = _freeze(schema)
        changes["params"] = tuple(
            replace(p, description=_drop_sentences(p.description, mention)) if p.name in named else p
            for p in tool.params
        )
    if not changes:
        return tool
    return replace(tool, **changes, content_hash="" if tool.server is None else tool.content_hash)


def _drop_sentences(text: str, mention: re.Pattern[str]) -> str:
    sentences = re.split(r"(?<=[.;!?])\s+", text)
    return " ".join(s for s in sentences if not mention.search(s)).strip()


def _without_premium_values(tool: CatalogTool) -> CatalogTool | None:
    """The tool with its premium argument values gone from enums and defaults (an argument left with no value goes;
    None when a required one would), its schema rebuilt so that validation refuses them too."""
    params: list[Param] = []
    for param in tool.params:
        if not param.premium_values:
            params.append(param)
            continue
        premium = set(param.premium_values)
        if param.enum is None:  # free values: the schema forbids the premium ones
            params.append(param)
            continue
        enum = tuple(v for v in param.enum if v not in premium)
        if not enum:
            if param.required:
                return None
            continue
        default = None if param.default in premium else param.default
        examples = tuple(v for v in param.examples or () if v not in premium) or None
        params.append(replace(param, enum=enum, default=default, examples=examples, premium_values=()))
    kept = {p.name for p in params}
    require_any = [list(g) for g in tool.require_any if all(n in kept for n in g)]
    schema = input_schema(tuple(params), require_any)
    for param in params:
        if param.premium_values and param.enum is None:
            schema["properties"][param.name]["not"] = {"enum": list(param.premium_values)}
    return replace(
        tool,
        params=tuple(params),
        input_schema=_freeze(schema),
        require_any=tuple(tuple(g) for g in require_any),
        content_hash="" if tool.server is None else tool.content_hash,
    )


# --- request rates ------------------------------------------------------------------------------------------------


class RateLimiter(Protocol):
    """Counts a caller's requests per minute; one interface, in memory (stdio, serve) or DynamoDB (AWS)."""

    def hit(self, caller: str, per_minute: int) -> float | None:
        """Count one request; None when it is within the rate, else the seconds until the next window opens."""
        ...


class MemoryRateLimiter:
    """Fixed one-minute windows in this process's memory (thread-safe; at most `max_callers` callers kept)."""

    def __init__(self, *, clock: Callable[[], float] = time.time, max_callers: int = 100_000) -> None:
        self._clock = clock
        self._max_callers = max_callers
        self._counts: dict[str, tuple[int, int]] = {}  # caller → (window number, requests in it)
        self._lock = threading.Lock()

    def hit(self, caller: str, per_minute: int) -> float | None:
        now = self._clock()
        window = int(now // 60)
        with self._lock:
            seen_window, count = self._counts.get(caller, (window, 0))
            count = count + 1 if seen_window == window else 1
            if len(self._counts) >= self._max_callers and caller not in self._counts:
                self._counts = {c: v for c, v in self._counts.items() if v[0] == window}
            self._counts[caller] = (window, count)
        return None if count <= per_minute else retry_after(now)


def retry_after(now: float) -> float:
    """Seconds from `now` until the next one-minute window opens."""
    return (math.floor(now / 60) + 1) * 60 - now
