"""The tool store: the synced tool documents of every server, kept between runs (SQLite here, DynamoDB on AWS).

The store is the gateway's index: a server's tools are answered from it, so no server has to be contacted to
list or search them. Each document keeps the hash it was written with, the hash first seen or last approved
(`pinned_hash`, for pinned servers) and the number of the sync that last wrote it (`indexed_seq`), so what a sync
re-indexed can be told from what it left alone. Example::

    store = SqliteToolStore(default_index_path("servers.json"))
    store.apply("memory", created=docs, updated=[], deleted=[], synced_at=time.time(), fingerprint="npx ...")
    [t.public_name for t in store.tools()]
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from progressive_mcp.gateway.documents import ToolDocument

SCHEMA_VERSION = 1
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class StoredTool:
    """A document as the store holds it."""

    document: ToolDocument
    pinned_hash: str  # the hash first seen, or the last one approved
    indexed_seq: int  # the sync that last wrote this document

    @property
    def changed_since_pinned(self) -> bool:
        return self.document.hash != self.pinned_hash


@dataclass(frozen=True)
class ServerState:
    """What the store knows of a server's last sync."""

    server: str
    synced_at: float
    fingerprint: str  # its command line or URL (no secrets): a changed one means another server, synced afresh


class ToolStore(Protocol):
    """Where synced tool documents live. Implementations: `SqliteToolStore`, `lambda_fn.aws.DynamoToolStore`."""

    def tools(self, server: str | None = None) -> list[StoredTool]:
        """Every stored document (of one server), by server then name."""
        ...

    def servers(self) -> list[ServerState]: ...

    def apply(
        self,
        server: str,
        *,
        created: Iterable[ToolDocument],
        updated: Iterable[ToolDocument],
        deleted: Iterable[str],
        synced_at: float,
        fingerprint: str,
    ) -> int:
        """Write one server's sync in one transaction: new and changed documents (stamped with a new sync number,
        which is returned), deleted ones (by the server's tool name), and the server's state."""
        ...

    def forget(self, server: str) -> int:
        """Drop a server and its documents (it left the servers file); how many documents went."""
        ...

    def approve(self, public_name: str) -> StoredTool | None:
        """Accept a tool's current definition as pinned; None if no such tool is stored."""
        ...

    def generation(self) -> int:
        """A number that moves whenever the stored documents or pins change (a cheap read: other processes that
        serve from the same store poll it to know when to reload)."""
        ...


def default_index_path(servers_file: str | Path, environ: dict[str, str] | None = None) -> Path:
    """The store of a servers file: `$XDG_CACHE_HOME/progressive-mcp/` (else `~/.cache/progressive-mcp/`), one
    file per servers file, named for its absolute path."""
    env = os.environ if environ is None else environ
    cache = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    resolved = str(Path(servers_file).expanduser().resolve())
    digest = hashlib.sha256(resolved.encode()).hexdigest()[:16]
    return cache / "progressive-mcp" / f"{Path(resolved).stem}-{digest}.sqlite3"


class SqliteToolStore:
    """A `ToolStore` in one SQLite file (stdlib sqlite3; safe to share between threads)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        private = str(path) != ":memory:"
        if private:
            _private_file(self.path)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        # What a sync overwrites or deletes (an older store's fingerprints, old definitions) is zeroed, not left in
        # free pages.
        self._db.execute("PRAGMA secure_delete=ON")
        if private:
            _private_file(self.path)  # SQLite made -wal and -shm with the database file's mode: 0600
        self._db.execute("PRAGMA busy_timeout=5000")  # a `sync` in another process waits for this one
        with self._lock:
            self._db.executescript(
                """
                CREATE TABLE IF NOT EXISTS tools (
                    server TEXT NOT NULL, name TEXT NOT NULL, public_name TEXT NOT NULL, hash TEXT NOT NULL,
                    definition TEXT NOT NULL, pinned_hash TEXT NOT NULL, indexed_seq INTEGER NOT NULL,
                    PRIMARY KEY (server, name));
                CREATE TABLE IF NOT EXISTS servers (
                    server TEXT PRIMARY KEY, synced_at REAL NOT NULL, fingerprint TEXT NOT NULL);
                CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
                """
            )
            self._db.execute(
                "INSERT OR IGNORE INTO meta VALUES ('schema_version', ?), ('seq', '0'), ('generation', '0')",
                (str(SCHEMA_VERSION),),
            )

    def close(self) -> None:
        self._db.close()

    def tools(self, server: str | None = None) -> list[StoredTool]:
        query = "SELECT server, name, public_name, hash, definition, pinned_hash, indexed_seq FROM tools"
        params: tuple[str, ...] = ()
        if server is not None:
            query += " WHERE server = ?"
            params = (server,)
        with self._lock:
            rows = self._db.execute(query + " ORDER BY server, name", params).fetchall()
        return [StoredTool(ToolDocument(s, n, p, json.loads(d), h), pinned, seq) for s, n, p, h, d, pinned, seq in rows]

    def servers(self) -> list[ServerState]:
        with self._lock:
            rows = self._db.execute("SELECT server, synced_at, fingerprint FROM servers ORDER BY server").fetchall()
        return [ServerState(*row) for row in rows]

    def apply(
        self,
        server: str,
        *,
        created: Iterable[ToolDocument],
        updated: Iterable[ToolDocument],
        deleted: Iterable[str],
        synced_at: float,
        fingerprint: str,
    ) -> int:
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                seq = int(db.execute("SELECT value FROM meta WHERE key = 'seq'").fetchone()[0]) + 1
                db.execute("UPDATE meta SET value = ? WHERE key = 'seq'", (str(seq),))
                for doc in created:  # first seen: this hash is the pinned one
                    db.execute(
                        "INSERT OR REPLACE INTO tools VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (server, doc.name, doc.public_name, doc.hash, _json(doc), doc.hash, seq),
                    )
                for doc in updated:  # the pinned hash stays until `sync --approve`
                    db.execute(
                        "UPDATE tools SET public_name = ?, hash = ?, definition = ?, indexed_seq = ? "
                        "WHERE server = ? AND name = ?",
                        (doc.public_name, doc.hash, _json(doc), seq, server, doc.name),
                    )
                db.executemany("DELETE FROM tools WHERE server = ? AND name = ?", [(server, n) for n in deleted])
                db.execute("INSERT OR REPLACE INTO servers VALUES (?, ?, ?)", (server, synced_at, fingerprint))
                _bump(db)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        return seq

    def forget(self, server: str) -> int:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            gone = self._db.execute("DELETE FROM tools WHERE server = ?", (server,)).rowcount
            self._db.execute("DELETE FROM servers WHERE server = ?", (server,))
            _bump(self._db)
            self._db.execute("COMMIT")
        return int(gone)

    def approve(self, public_name: str) -> StoredTool | None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute("UPDATE tools SET pinned_hash = hash WHERE public_name = ?", (public_name,))
            _bump(self._db)
            self._db.execute("COMMIT")
        return next((t for t in self.tools() if t.document.public_name == public_name), None)

    def generation(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()[0])


STORE_FOLDER = "progressive-mcp"  # the folder of the default stores: the cache folder's, and /tmp's on Lambda


def _private_file(path: Path) -> None:
    """Make the store readable by its user alone: the file and its -wal and -shm files 0600 (created so, when new),
    in a 0700 folder. A missing folder is made 0700; an existing one is tightened only when it is one of ours
    (`STORE_FOLDER`), as older versions made it 0755: a folder the user chose keeps its mode."""
    folder = path.parent
    if not folder.exists():
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o700)
    elif folder.name == STORE_FOLDER:
        _tighten(folder, 0o700)
    if not path.exists():
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))  # SQLite gives -wal and -shm this mode too
    for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        if file.exists():
            _tighten(file, 0o600)


def _tighten(path: Path, mode: int) -> None:
    """chmod a path of ours that others may read; one of another user's is left (and said) as it is."""
    status = path.stat()
    if not status.st_mode & 0o077:
        return
    try:
        path.chmod(mode)
    except OSError as exc:
        logger.warning("the tool store %s is readable by other users and cannot be made private: %s", path, exc)


def _bump(db: sqlite3.Connection) -> None:
    db.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'")


def _json(doc: ToolDocument) -> str:
    return json.dumps(doc.definition, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
