"""The gateway: the servers of a servers file behind one catalog, answered from the tool store and kept in sync.

At start the catalog comes from the store, so no server is contacted to list or search tools; servers never
synced are synced first, the others in the background once their `ttl_s` has passed. A server that says its
tools changed (`notifications/tools/list_changed`, or a 2026-07-28 listen event) is re-synced at once. Calls go to
the tool's server through the connection pool. Example::

    gateway = Gateway.open("servers.json")
    gateway.start()
    gateway.catalog.get("memory.read_graph")
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from progressive_mcp.catalog import Catalog, CatalogTool
from progressive_mcp.gateway.config import GatewayConfig, load_servers
from progressive_mcp.gateway.connections import ServerPool
from progressive_mcp.gateway.store import SqliteToolStore, StoredTool, ToolStore, default_index_path
from progressive_mcp.gateway.sync import SyncReport, due, sync_servers
from progressive_mcp.gateway.tools import gateway_catalog
from progressive_mcp.settings import Settings

logger = logging.getLogger(__name__)

RESYNC_DELAY_S = 0.1  # change notifications that arrive together make one re-sync
# A server whose sync failed is tried again this long after, when someone next looks at the servers (TOOL_LIST):
# an agent sees it as unavailable, why, and when it is retried; a server that stays down costs a sync a minute.
RETRY_FAILED_S = 60.0


@dataclass(frozen=True)
class ServerDown:
    """A server this process could not sync: why, when, and when it is tried again."""

    server: str
    reason: str
    failed_at: float
    retry_at: float

    def as_json(self) -> dict[str, Any]:
        return {
            "server": self.server,
            "reason": self.reason,
            "failed_at": _iso(self.failed_at),
            "retry_at": _iso(self.retry_at),
        }


class Gateway:
    """A servers file's servers as one catalog; thread-safe."""

    def __init__(
        self,
        config: GatewayConfig,
        store: ToolStore,
        *,
        pool: ServerPool | None = None,
        clock: Callable[[], float] = time.time,
        base: Catalog | None = None,
        poll_s: float | None = None,
    ) -> None:
        """`base`: a spec's catalog served beside the servers' tools (see `gateway_catalog`). `poll_s`: how often to
        look whether another process (a scheduled sync) changed the store, and reload it if so (None: never)."""
        self.config = config
        self.store = store
        self.base = base
        self.poll_s = poll_s
        self._next_poll = time.monotonic() + (poll_s or 0)
        self._poll_lock = threading.Lock()
        self.pool = pool if pool is not None else ServerPool(config, on_tools_changed=self.tools_changed)
        self._clock = clock
        self._lock = threading.Lock()
        self._sync_lock = threading.Lock()
        self._pending: set[str] = set()
        self._listeners: list[Callable[[Catalog], None]] = []
        self._generation, stored = self._read_store()
        self._catalog, self.withheld = gateway_catalog(config, stored, base=base)
        self._offer_vectors(self._catalog)
        self.last_report: SyncReport | None = None
        self._down: dict[str, ServerDown] = {}  # the servers whose last sync here failed
        self._retrying: set[str] = set()

    @classmethod
    def open(
        cls,
        servers_file: str | Path,
        index: str | Path | None = None,
        *,
        store: ToolStore | None = None,
        base: Catalog | None = None,
        poll_s: float | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> Gateway:
        """The gateway of a servers file, with its store: `store`, or else a SQLite file at `index` (default:
        under the user's cache directory). `environ` gives the file's `${VAR}` values (default: os.environ)."""
        config = load_servers(servers_file, environ)
        if store is None:
            store = SqliteToolStore(index or default_index_path(servers_file))
        return cls(config, store, base=base, poll_s=poll_s)

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        store: ToolStore | None = None,
        poll_s: float | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> Gateway:
        """The gateway `settings.servers_path` configures, with the named spec's catalog beside it if one was named
        (`settings.spec_chosen`); `store` replaces the SQLite store at `settings.index_path`."""
        assert settings.servers_path is not None
        base = None
        if settings.spec_chosen:
            from progressive_mcp.sources import load_catalog

            base = load_catalog(
                settings.spec_path,
                include=settings.include,
                exclude=settings.exclude,
                vocabulary=settings.vocabulary_path,
            )
        return cls.open(
            settings.servers_path, settings.index_path, store=store, base=base, poll_s=poll_s, environ=environ
        )

    @property
    def catalog(self) -> Catalog:
        if self.poll_s is not None and time.monotonic() >= self._next_poll:
            self._poll()
        return self._catalog

    def _read_store(self) -> tuple[int, list[StoredTool]]:
        """The store's generation and documents; a store that cannot be read counts as empty, generation -1, so
        the next poll tries again (the servers' tools are missing meanwhile, the spec's are served)."""
        try:
            generation = self.store.generation()  # first: a write after it moves it again
            return generation, self.store.tools()
        except Exception as exc:
            logger.warning("the tool store cannot be read", extra={"error": type(exc).__name__})
            return -1, []

    def _poll(self) -> None:
        if not self._poll_lock.acquire(blocking=False):
            return  # another request is looking; this one answers from the catalog as it is
        try:
            if time.monotonic() < self._next_poll:
                return
            self._next_poll = time.monotonic() + (self.poll_s or 0)
            try:
                generation = self.store.generation()
            except Exception as exc:
                logger.warning("the tool store cannot be read", extra={"error": type(exc).__name__})
                return
            if generation != self._generation:
                self.refresh()
        finally:
            self._poll_lock.release()

    def on_change(self, listener: Callable[[Catalog], None]) -> None:
        """Call `listener(catalog)` whenever a sync changes the catalog."""
        self._listeners.append(listener)

    def start(self, *, background: bool = True) -> SyncReport | None:
        """Sync the servers never synced (waiting for them), then, in a background thread, those whose TTL has
        passed. Returns the first sync's report (None if every server was in the store)."""
        synced = {s.server for s in self.store.servers()}
        first = [s.name for s in self.config.enabled if s.name not in synced]
        report = self.sync(first) if first else None
        stale = [name for name in due(self.config, self.store, self._clock()) if name not in first]
        if stale:
            if background:
                threading.Thread(target=self._sync_quietly, args=(stale,), name="pmcp-sync", daemon=True).start()
            else:
                self.sync(stale)
        return report

    def sync(self, only: Iterable[str] | None = None) -> SyncReport:
        """Sync the servers (or `only` these, and then no server is removed) and rebuild the catalog if it changed."""
        with self._sync_lock:
            report = sync_servers(self.config, self.store, self.pool.list_tools, only=only, clock=self._clock)
            self.last_report = report
            self._note_failures(report)
            if report.changed:  # the catalog derives from the stored documents alone: unchanged, it stands
                self.refresh()
        for server in report.servers:
            if server.error:
                logger.warning("sync of %s failed: %s", server.server, server.error, extra={"server": server.server})
            elif server.diff.changed:
                # "tools_created": `created` is a LogRecord attribute, which `extra` may not overwrite
                counts = {f"tools_{k}": len(v) for k, v in _parts(server)}
                logger.info("synced %s: %s", server.server, counts, extra={"server": server.server, **counts})
                if server.notes:  # what the bounds cut (`progressive-mcp sync` lists each)
                    logger.warning(
                        "%s: %d note(s) on what the gateway's bounds cut, the first: %s",
                        server.server,
                        len(server.notes),
                        server.notes[0],
                        extra={"server": server.server},
                    )
        return report

    def _note_failures(self, report: SyncReport) -> None:
        now = self._clock()
        with self._lock:
            for server in report.servers:
                if server.error is not None:
                    self._down[server.server] = ServerDown(server.server, server.error, now, now + RETRY_FAILED_S)
                else:
                    self._down.pop(server.server, None)

    def unavailable(self) -> list[ServerDown]:
        """The servers whose last sync in this process failed; those whose retry time has come are synced again
        in the background (the answer stays as it is until that sync ends)."""
        now = self._clock()
        with self._lock:
            down = sorted(self._down.values(), key=lambda d: d.server)
            due_now = [d.server for d in down if now >= d.retry_at and d.server not in self._retrying]
            self._retrying.update(due_now)
        if due_now:

            def retry() -> None:
                try:
                    self._sync_quietly(due_now)
                finally:
                    with self._lock:
                        self._retrying.difference_update(due_now)

            threading.Thread(target=retry, name="pmcp-retry", daemon=True).start()
        return down

    def refresh(self) -> bool:
        """Rebuild the catalog from the store; True (and listeners told) if its version or withheld tools changed."""
        generation, stored = self._read_store()
        catalog, withheld = gateway_catalog(self.config, stored, base=self.base)
        with self._lock:
            self._generation = generation
            if catalog.version == self._catalog.version and withheld == self.withheld:
                return False
            self._catalog, self.withheld = catalog, withheld
        self._offer_vectors(catalog)
        for listener in self._listeners:
            listener(catalog)
        return True

    def _offer_vectors(self, catalog: Catalog) -> None:
        """Lets the first semantic search take the servers' tool vectors from the store (its sync embedded them)."""
        served = [tool for tool in catalog.tools if tool.server is not None]
        if served:
            from progressive_mcp.search.vectors import VectorCache

            VectorCache.shared().offer_lookup(served, self.store.vectors)

    def tools_changed(self, server: str) -> None:
        """A server said its tools changed: re-sync it soon (notifications arriving together make one sync)."""
        with self._lock:
            if server in self._pending:
                return
            self._pending.add(server)

        def resync() -> None:
            time.sleep(RESYNC_DELAY_S)
            with self._lock:
                self._pending.discard(server)
            self._sync_quietly([server])

        threading.Thread(target=resync, name=f"pmcp-resync-{server}", daemon=True).start()

    def call(self, tool: CatalogTool, arguments: dict[str, Any], timeout_s: float | None = None) -> dict[str, Any]:
        """The tool's server's CallToolResult (wire JSON) for validated arguments; raises ServerUnavailable."""
        assert tool.server is not None and tool.server_tool is not None
        return self.pool.call_tool(tool.server, tool.server_tool, arguments, timeout_s)

    def close(self) -> None:
        self.pool.close()

    def _sync_quietly(self, only: list[str]) -> None:
        try:
            self.sync(only)
        except Exception as exc:  # a background sync must not kill its thread silently
            logger.warning("background sync failed", extra={"error": type(exc).__name__})


def _parts(server: Any) -> list[tuple[str, Any]]:
    return [("created", server.diff.created), ("updated", server.diff.updated), ("deleted", server.diff.deleted)]


def _iso(epoch_s: float) -> str:
    return dt.datetime.fromtimestamp(epoch_s, dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
