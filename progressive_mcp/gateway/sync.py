"""Sync: the servers are the truth, the store follows them by content hash.

For each server, its current tools are compared with the stored documents: a name not stored is created, a
stored name with another hash is updated, a stored name the server no longer lists is deleted; only those
documents are written (re-indexed). A server that cannot be reached keeps its stored documents, and the report
says why. A server no longer in the servers file (or disabled) has its documents deleted. Example::

    report = sync_servers(config, store, pool)
    print(report.text())        # memory: 1 created, 0 updated, 0 deleted, 8 unchanged ...
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from progressive_mcp.gateway.config import GatewayConfig, ServerConfig
from progressive_mcp.gateway.connections import ServerRefused, ServerUnavailable
from progressive_mcp.gateway.documents import ToolDocument, documents
from progressive_mcp.gateway.limits import bound_listing
from progressive_mcp.gateway.pins import approved_by_sync
from progressive_mcp.gateway.store import StoredTool, ToolStore, legacy_digest
from progressive_mcp.gateway.tools import catalog_tool

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Diff:
    """What one server's sync changes."""

    created: tuple[ToolDocument, ...] = ()
    updated: tuple[ToolDocument, ...] = ()
    deleted: tuple[str, ...] = ()  # the server's names of the tools it no longer lists
    unchanged: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.created or self.updated or self.deleted)


def diff(current: Iterable[ToolDocument], stored: Mapping[str, StoredTool]) -> Diff:
    """Create / update / delete from a server's current documents to its stored ones (keyed by tool name)."""
    created, updated = [], []
    seen = set()
    unchanged = 0
    for doc in current:
        seen.add(doc.name)
        before = stored.get(doc.name)
        if before is None:
            created.append(doc)
        elif (
            before.document.hash != doc.hash
            or before.document.public_name != doc.public_name
            or before.document.definition != doc.definition  # the same tool, cut otherwise (an older version's)
        ):
            updated.append(doc)
        else:
            unchanged += 1
    deleted = tuple(sorted(name for name in stored if name not in seen))
    return Diff(tuple(created), tuple(updated), deleted, unchanged)


@dataclass
class ServerSync:
    """One server's part of a sync: its diff, or why it could not be read."""

    server: str
    diff: Diff = field(default_factory=Diff)
    error: str | None = None
    seq: int | None = None  # the store's sync number, when documents were written
    removed: bool = False  # the server left the servers file: its documents were deleted
    notes: list[str] = field(default_factory=list)  # what the gateway's bounds cut or left out (`limits`)
    kept: int = 0  # a server not synced: how many of its tools the store keeps from before


@dataclass
class SyncReport:
    servers: list[ServerSync]
    seconds: float = 0.0
    withheld: list[dict[str, Any]] = field(default_factory=list)  # `pins.review`s, when the caller adds them

    @property
    def counts(self) -> dict[str, int]:
        return {
            "created": sum(len(s.diff.created) for s in self.servers),
            "updated": sum(len(s.diff.updated) for s in self.servers),
            "deleted": sum(len(s.diff.deleted) for s in self.servers),
            "unchanged": sum(s.diff.unchanged for s in self.servers),
            "failed": sum(s.error is not None for s in self.servers),
        }

    @property
    def changed(self) -> bool:
        return any(s.diff.changed for s in self.servers)

    def as_json(self) -> dict[str, Any]:
        return {
            "counts": self.counts,
            "seconds": round(self.seconds, 3),
            "servers": [
                {
                    "server": s.server,
                    "created": [d.public_name for d in s.diff.created],
                    "updated": [d.public_name for d in s.diff.updated],
                    "deleted": [f"{s.server}.{name}" for name in s.diff.deleted],
                    "unchanged": s.diff.unchanged,
                    **({"error": s.error, "kept": s.kept} if s.error else {}),
                    **({"notes": s.notes} if s.notes else {}),
                    **({"removed": True} if s.removed else {}),
                }
                for s in self.servers
            ],
            **({"withheld": self.withheld} if self.withheld else {}),
        }

    def text(self) -> str:
        """One line per server and one per created, updated or deleted tool."""
        lines = []
        for s in self.servers:
            if s.error is not None:
                kept = f" (its {s.kept} stored tool{'s are' if s.kept != 1 else ' is'} kept)" if s.kept else ""
                lines.append(f"{s.server}: not synced: {s.error}{kept}")
                continue
            d = s.diff
            note = " (no longer in the servers file)" if s.removed else ""
            lines.append(
                f"{s.server}: {len(d.created)} created, {len(d.updated)} updated, {len(d.deleted)} deleted, "
                f"{d.unchanged} unchanged{note}"
            )
            lines += [f"  + {doc.public_name}" for doc in d.created]
            lines += [f"  ~ {doc.public_name}" for doc in d.updated]
            lines += [f"  - {s.server}.{name}" for name in d.deleted]
            lines += [f"  ! {note}" for note in s.notes[:MAX_NOTES_SHOWN]]
            if len(s.notes) > MAX_NOTES_SHOWN:
                lines.append(f"  ! … and {len(s.notes) - MAX_NOTES_SHOWN} more (--json lists them all)")
        c = self.counts
        lines.append(
            f"total: {c['created']} created, {c['updated']} updated, {c['deleted']} deleted, {c['unchanged']} "
            f"unchanged, {c['failed']} server(s) failed, in {self.seconds:.2f} s"
        )
        return "\n".join(lines)


READERS = 8  # servers read at once
MAX_NOTES_SHOWN = 20  # of one server's notes, in the text report
ListTools = Callable[[str], list[dict[str, Any]]]


class _Unread:
    """Why a server's tools could not be read (or stored): that server's error in the report, never the sync's."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


def sync_server(
    server: ServerConfig,
    store: ToolStore,
    list_tools: ListTools,
    *,
    clock: Callable[[], float] = time.time,
    listed: list[dict[str, Any]] | _Unread | None = None,
    pinned: bool = False,
) -> ServerSync:
    """Sync one server: read its tools (unless `listed` already holds them, or why they could not be read), diff
    them with the store, write what changed and what is taken as approved (`pins.approved_by_sync`; `pinned`: the
    server's tools are pinned). Whatever goes wrong is this server's error in its ServerSync."""
    if listed is None:
        listed = _read(server, list_tools)
    if isinstance(listed, _Unread):
        try:
            kept = len(store.tools(server.name))
        except Exception:  # a store that cannot be read keeps nothing we can count
            kept = 0
        return ServerSync(server.name, error=listed.reason, kept=kept)
    try:
        return _store(server, store, listed, clock, pinned=pinned)
    except Exception as exc:  # a listing we cannot store (a bug of ours, a store error) costs this server alone
        logger.warning("storing the tools of %s failed", server.name, extra={"error": type(exc).__name__})
        return ServerSync(server.name, error=f"its tools could not be stored ({type(exc).__name__})")


def _store(
    server: ServerConfig, store: ToolStore, listed: list[dict[str, Any]], clock: Callable[[], float], *, pinned: bool
) -> ServerSync:
    bounded, notes = bound_listing(server.name, listed)
    current = documents(server.name, bounded)
    notes += [f"{doc.public_name}: {'; '.join(doc.notes)}" for doc in current if doc.notes]
    state = next((s for s in store.servers() if s.server == server.name), None)
    if state is not None and not same_server(state.fingerprint, server):
        store.forget(server.name)  # another command or URL under the old name: a new server, pins and all
        state = None
    stored = {t.document.name: t for t in store.tools(server.name)}
    change = diff(current, stored)
    seq = store.apply(
        server.name,
        created=change.created,
        updated=change.updated,
        deleted=change.deleted,
        synced_at=clock(),
        fingerprint=server.fingerprint,
        approved=approved_by_sync(current, stored, pinned=pinned, first_sync=state is None),
    )
    _store_vectors(server, store, current)
    return ServerSync(server.name, change, seq=seq if change.changed else None, notes=notes)


def _store_vectors(server: ServerConfig, store: ToolStore, current: list[ToolDocument]) -> None:
    """Embeds the server's tools the store has no vector for (an unchanged tool keeps its key: never embedded
    again), with the active embedding provider (`search.providers`), unless PMCP_SEMANTIC=off. A failure costs the
    vectors alone: a search embeds what is missing."""
    from progressive_mcp.search import providers
    from progressive_mcp.search.semantic import semantic_enabled

    if not current or not providers.active().available() or not semantic_enabled():
        return
    from progressive_mcp.search import vectors

    try:
        tools = [catalog_tool(server, StoredTool(doc, 0)) for doc in current]
        keys = [vectors.key_of(tool) for tool in tools]
        have = store.vectors(keys)
        missing = [tool for tool, key in zip(tools, keys, strict=True) if key not in have]
        if missing:
            cache = vectors.VectorCache()  # this sync's own: rows_for embeds all of `missing`
            rows, _ = vectors.rows_for(missing, cache)
            step = len(rows) // len(missing)  # the provider's width (`providers`)
            store.put_vectors({vectors.key_of(t): rows[i * step : (i + 1) * step] for i, t in enumerate(missing)})
        _store_everyday(store)
    except Exception as exc:
        logger.warning("the tool vectors of %s were not stored", server.name, extra={"error": type(exc).__name__})


def _store_everyday(store: ToolStore) -> None:
    """A remote provider's vectors of the everyday requests, which set each catalog's closeness scale (the bundled
    model's ship with it): stored once per model, so that a process's first search asks the provider for the query
    alone."""
    from progressive_mcp.search import embedder, providers, vectors
    from progressive_mcp.search.semantic import everyday_requests

    if providers.active().model_id == embedder.MODEL_ID:
        return
    texts = everyday_requests()
    cache = vectors.VectorCache()  # this sync's own, reading the store first: only what it lacks is embedded
    cache.offer_store(store.vectors)
    rows, embedded = vectors.query_rows(texts, cache)
    if embedded:
        step = len(rows) // len(texts)
        keys = [vectors.query_key(text) for text in texts]
        store.put_vectors({key: rows[i * step : (i + 1) * step] for i, key in enumerate(keys)})


def _read(server: ServerConfig, list_tools: ListTools) -> list[dict[str, Any]] | _Unread:
    """The server's tools, or why they could not be read: unreachable, refused (a protocol error or an answer that
    is not valid MCP), or anything else (named by its type only: its text may quote a secret)."""
    try:
        return list_tools(server.name)
    except ServerUnavailable as exc:
        return _Unread(exc.reason)
    except ServerRefused as exc:
        return _Unread(str(exc))
    except Exception as exc:
        logger.warning("reading the tools of %s failed", server.name, extra={"error": type(exc).__name__})
        return _Unread(f"reading its tools failed ({type(exc).__name__})")


def sync_servers(
    config: GatewayConfig,
    store: ToolStore,
    list_tools: ListTools,
    *,
    only: Iterable[str] | None = None,
    clock: Callable[[], float] = time.time,
    prune: bool | None = None,
) -> SyncReport:
    """Sync the enabled servers (or `only` these), and drop the stored documents of servers no longer
    configured or enabled (`prune`; by default only when all servers are synced). Servers are read in parallel
    (each start-up is mostly waiting), written one by one."""
    started = time.perf_counter()
    wanted = set(only) if only is not None else None
    chosen = [s for s in config.enabled if wanted is None or s.name in wanted]
    with ThreadPoolExecutor(max_workers=max(1, min(READERS, len(chosen)))) as readers:
        listings = list(readers.map(lambda server: _read(server, list_tools), chosen))
    results = [
        sync_server(server, store, list_tools, clock=clock, listed=listed, pinned=server.pin or config.pin)
        for server, listed in zip(chosen, listings, strict=True)
    ]
    if prune if prune is not None else wanted is None:
        enabled = {s.name for s in config.enabled}
        for state in store.servers():
            if state.server not in enabled:
                names = tuple(sorted(t.document.name for t in store.tools(state.server)))
                store.forget(state.server)
                results.append(ServerSync(state.server, Diff(deleted=names), removed=True))
    return SyncReport(results, time.perf_counter() - started)


def same_server(fingerprint: str, server: ServerConfig) -> bool:
    """Whether a stored fingerprint is `server`'s: today's form, or the one stores of schema 1 wrote (the command
    line with `${VAR}` expanded), as they hold it or as their migration left it (its digest), so upgrading does not
    make every server a new one (which would trust its tools afresh); the sync then stores today's form."""
    if fingerprint == server.fingerprint:
        return True
    legacy = server.legacy_fingerprint
    return fingerprint in (legacy, legacy_digest(legacy))


def due(config: GatewayConfig, store: ToolStore, now: float) -> list[str]:
    """The enabled servers never synced, or synced longer than their `ttl_s` ago."""
    synced = {s.server: s for s in store.servers()}
    return [
        s.name
        for s in config.enabled
        if s.name not in synced
        or synced[s.name].fingerprint != s.fingerprint  # an old store's form is rewritten by the sync this asks for
        or now - synced[s.name].synced_at >= s.ttl_s
    ]
