"""The response cache and the large-result store: the interfaces the core calls, and the in-memory cache.

Alpha Vantage's free plan allows 25 requests a day, so an identical call is answered from a cache
while the answer is fresh. What is cached is the upstream's successful answer (payload and format) to
a read (GET or HEAD: a write must reach the upstream every time), never an error, a rate-limit
notice or a premium notice. The key is a hash of the tool, the
normalised arguments and the caller's *entitlement*, never the caller's key itself. Where one key
serves everyone (server-key mode) or the process has one user (stdio), callers asking the same
question share one upstream request; on a shared endpoint where each caller brings a key, each key
has its own partition (`caller_entitlement`), so no caller is ever answered with data that another
caller's key fetched (see `cache_key`).

Implementations: `MemoryCache` (a TTL LRU in this process: stdio and `serve`) here; the DynamoDB
cache and the S3 result store live in `lambda_fn.aws` (the core never imports boto3). Example::

    cache = MemoryCache(max_entries=256)
    key = cache_key("GLOBAL_QUOTE", {"symbol": "IBM"}, "public")
    cache.put(key, CachedAnswer(payload={...}, format="json", cached_at=now, expires_at=now + 60))
    cache.get(key)   # the answer until it expires, then None
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

# Entitlements: who may see an answer. A tool that needs a paid plan (or an `entitlement`
# argument, Alpha Vantage's real-time switch) answered with a caller's own key must not be served
# to another caller whose plan may not include it, so such calls are cached only where one key
# serves everyone (server-key mode) or the process has one user (stdio).
PUBLIC = "public"  # free-plan answers where one key or one user is behind every call
SERVER = "server"  # the endpoint's own key (server-key mode): everyone shares its plan
LOCAL = "local"  # a single-user process (stdio): the user's own plan
# Only reads are answered from the cache: a POST, PUT, PATCH or DELETE asks the upstream to do something, every time.
CACHEABLE_METHODS = frozenset({"GET", "HEAD"})


def caller_entitlement(api_key: str) -> str:
    """The partition of one caller's own key: a digest, so the key itself is never stored or logged."""
    digest = hashlib.sha256(b"progressive-mcp/cache-partition\0" + api_key.encode()).hexdigest()
    return f"caller:{digest[:32]}"


@dataclass(frozen=True)
class CachedAnswer:
    """One stored upstream answer. Times are seconds since the epoch."""

    payload: Any  # the parsed JSON value, or CSV or other text
    format: str  # "json", "csv" or "text"
    cached_at: float
    expires_at: float
    size: int = 0  # bytes of the upstream body (recorded by the DynamoDB cache)


class ResponseCache(Protocol):
    """Where answers are kept. Implementations may raise on failure; the caller degrades to a direct call."""

    def get(self, key: str) -> CachedAnswer | None:
        """The fresh answer under `key`, or None (absent or expired)."""
        ...

    def put(self, key: str, answer: CachedAnswer) -> None:
        """Keep `answer` under `key` until `answer.expires_at`."""
        ...


@dataclass(frozen=True)
class StoredResult:
    """Where a full result can be downloaded, and until when (seconds since the epoch)."""

    url: str
    expires_at: float


class ResultStore(Protocol):
    """Where full results too large for the model's context go (S3 on Lambda; none on stdio)."""

    def put(self, name: str, body: bytes, content_type: str) -> StoredResult:
        """Store `body` under `name` and hand out a short-lived URL to it."""
        ...


def cache_key(tool: str, arguments: Mapping[str, Any], entitlement: str) -> str:
    """A stable hash of (tool, normalised arguments, entitlement); the caller's key is never part of it.

    `arguments` are the validated, normalised arguments (what the upstream will be sent, without
    the key); their order does not matter.
    """
    canonical = json.dumps([tool, dict(arguments), entitlement], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class MemoryCache:
    """A thread-safe TTL LRU: at most `max_entries` answers and `max_bytes` of memory.

    An answer is kept as its compact JSON text (CSV as it is) and parsed again when it is read, so what an
    entry costs is known exactly: the text's size (a parsed answer would take several times its body's size,
    and measuring that walks every object). `weigh` replaces that weight (tests). The least recently used
    answers go first; an answer heavier than `max_bytes / 4` is not kept (one 20-year series must not evict
    everything else).
    """

    def __init__(
        self,
        max_entries: int = 256,
        *,
        max_bytes: int = 64 * 1024 * 1024,
        clock: Callable[[], float] = time.time,
        weigh: Callable[[CachedAnswer], int] | None = None,
    ) -> None:
        if max_entries < 1 or max_bytes < 1:
            raise ValueError("max_entries and max_bytes must be at least 1")
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._clock = clock
        self._weigh = weigh
        # key -> (the answer without its payload, the payload as text, whether that text is JSON, weight)
        self._entries: OrderedDict[str, tuple[CachedAnswer, str, bool, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: str) -> CachedAnswer | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if entry[0].expires_at <= self._clock():
                self._drop(key)
                return None
            self._entries.move_to_end(key)
        answer, text, is_json = entry[:3]
        return replace(answer, payload=json.loads(text) if is_json else text)  # a fresh copy each time

    def put(self, key: str, answer: CachedAnswer) -> None:
        is_json = not isinstance(answer.payload, str)
        text = json.dumps(answer.payload, separators=(",", ":"), ensure_ascii=False) if is_json else answer.payload
        weight = self._weigh(answer) if self._weigh is not None else sys.getsizeof(text)
        if weight > self.max_bytes // 4:
            return
        with self._lock:
            self._drop(key)
            self._entries[key] = (replace(answer, payload=None), text, is_json, weight)
            self._bytes += weight
            while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
                self._drop(next(iter(self._entries)))

    @property
    def bytes(self) -> int:
        """What the entries weigh now."""
        return self._bytes

    def _drop(self, key: str) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._bytes -= entry[3]

    def __len__(self) -> int:
        return len(self._entries)
