"""The tool store: the synced tool documents of every server, kept between runs (SQLite here, DynamoDB on AWS).

The store is the gateway's index: a server's tools are answered from it, so no server has to be contacted to
list or search them. Each document keeps the hash it was written with and the number of the sync that last wrote it
(`indexed_seq`), so what a sync re-indexed can be told from what it left alone. Beside the documents, the store
keeps each tool's approved definition by server and tool name (`approval`): the hash, and the definition, that a
pinned server's tool must have to be served (see `pins`); it outlives the tool's document, so a tool dropped and
listed again is compared with what was approved, not taken as new. Example::

    store = SqliteToolStore(default_index_path("servers.json"))
    store.apply("memory", created=docs, updated=[], deleted=[], synced_at=time.time(), fingerprint="npx ...")
    [t.document.public_name for t in store.tools()]
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from progressive_mcp.errors import ConfigError
from progressive_mcp.gateway.documents import ToolDocument, tool_hash

SCHEMA_VERSION = 2  # 1: `pinned_hash` on each document, hashes joined with `|`, fingerprints with secrets
LEGACY_APPROVAL = "legacy:"  # an approval migrated from schema 1 whose definition was not kept: matches no hash
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class StoredTool:
    """A document as the store holds it, with the hash approved for its server and name (None: none yet)."""

    document: ToolDocument
    indexed_seq: int  # the sync that last wrote this document
    approved_hash: str | None = None

    @property
    def approved(self) -> bool:
        """Whether this very definition is the approved one (what a pinned server's tool needs to be served)."""
        return self.document.hash == self.approved_hash


@dataclass(frozen=True)
class Approval:
    """The approved definition of one server's tool: its hash, and the definition itself when it was kept."""

    hash: str
    definition: Mapping[str, Any] | None


@dataclass(frozen=True)
class ServerState:
    """What the store knows of a server's last sync."""

    server: str
    synced_at: float
    fingerprint: str  # its command line or URL as written (no secrets): a changed one means another server


class ToolStore(Protocol):
    """Where synced tool documents live. Implementations: `SqliteToolStore`, `lambda_fn.toolstore.DynamoToolStore`."""

    def tools(self, server: str | None = None) -> list[StoredTool]:
        """Every stored document (of one server), by server then name, with its approved hash."""
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
        approved: Iterable[ToolDocument] = (),
    ) -> int:
        """Write one server's sync in one transaction: new and changed documents (stamped with a new sync number,
        which is returned), deleted ones (by the server's tool name), the definitions to take as approved (a first
        sync, a server that is not pinned) and the server's state."""
        ...

    def forget(self, server: str) -> int:
        """Drop a server, its documents and its approvals (it left the servers file, or is another server now);
        how many documents went."""
        ...

    def approve(self, public_name: str, hash: str) -> StoredTool | None:
        """Approve a tool's current definition if its hash is `hash` (checked and written in one step); None if no
        stored tool has that name and hash."""
        ...

    def approval(self, server: str, name: str) -> Approval | None:
        """The approved definition of a server's tool (by the server's name for it), if any."""
        ...

    def generation(self) -> int:
        """A number that moves whenever the stored documents or approvals change (a cheap read: other processes
        that serve from the same store poll it to know when to reload)."""
        ...

    def vectors(self, keys: Iterable[str]) -> dict[str, bytes]:
        """The stored tool vectors among `keys` (`search.vectors.key_of`: the model and the tool document's
        digest), each an int8 row."""
        ...

    def put_vectors(self, rows: Mapping[str, bytes]) -> None:
        """Keep tool vectors by key; a sync writes those of the tools it embedded."""
        ...


def legacy_digest(fingerprint: str) -> str:
    """What a schema-1 fingerprint (a command line with `${VAR}` expanded: it may hold a secret) becomes when its
    store is migrated: comparable with the server's old form, and no longer the secret."""
    return "sha256:" + hashlib.sha256(fingerprint.encode()).hexdigest()


def default_index_path(servers_file: str | Path, environ: dict[str, str] | None = None) -> Path:
    """The store of a servers file: `$XDG_CACHE_HOME/progressive-mcp/` (else `~/.cache/progressive-mcp/`), one
    file per servers file, named for its absolute path."""
    env = os.environ if environ is None else environ
    cache = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    resolved = str(Path(servers_file).expanduser().resolve())
    digest = hashlib.sha256(resolved.encode()).hexdigest()[:16]
    return cache / "progressive-mcp" / f"{Path(resolved).stem}-{digest}.sqlite3"


class SqliteToolStore:
    """A `ToolStore` in one SQLite file (stdlib sqlite3; safe to share between threads). A store of schema 1 is
    migrated when it is opened."""

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
        migrated = False
        with self._lock, _transaction(self._db) as db:
            db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            # Tool vectors by content key (the model and the tool document's digest): an unchanged tool keeps its
            # key and is never embedded again. Added beside schema 2 without a migration: older readers ignore it.
            db.execute(_VECTORS)
            row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            version = int(row[0]) if row else None
            if version is None:
                db.execute(_TOOLS)
                db.execute(_APPROVALS)
                db.execute(_SERVERS)
                db.execute(
                    "INSERT INTO meta VALUES ('schema_version', ?), ('seq', '0'), ('generation', '0')",
                    (str(SCHEMA_VERSION),),
                )
            elif version == 1:
                _migrate_from_1(db)
                migrated = True
            elif version > SCHEMA_VERSION:
                raise ConfigError(
                    f"the tool store {path} was written by a newer progressive-mcp (schema {version}; this one "
                    f"reads {SCHEMA_VERSION}): upgrade, or give another --index"
                )
        if migrated:  # an old store was written without secure_delete: rewrite it whole, so no old page is left
            with self._lock:
                self._db.execute("VACUUM")
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        self._db.close()

    def tools(self, server: str | None = None) -> list[StoredTool]:
        query = (
            "SELECT t.server, t.name, t.public_name, t.hash, t.definition, t.indexed_seq, a.hash FROM tools t "
            "LEFT JOIN approvals a ON a.server = t.server AND a.name = t.name"
        )
        params: tuple[str, ...] = ()
        if server is not None:
            query += " WHERE t.server = ?"
            params = (server,)
        with self._lock:
            rows = self._db.execute(query + " ORDER BY t.server, t.name", params).fetchall()
        return [
            StoredTool(ToolDocument(s, n, p, json.loads(d), h), seq, approved) for s, n, p, h, d, seq, approved in rows
        ]

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
        approved: Iterable[ToolDocument] = (),
    ) -> int:
        with self._lock, _transaction(self._db) as db:
            seq = int(db.execute("SELECT value FROM meta WHERE key = 'seq'").fetchone()[0]) + 1
            db.execute("UPDATE meta SET value = ? WHERE key = 'seq'", (str(seq),))
            for doc in created:
                db.execute(
                    "INSERT OR REPLACE INTO tools VALUES (?, ?, ?, ?, ?, ?)",
                    (server, doc.name, doc.public_name, doc.hash, _json(doc.definition), seq),
                )
            for doc in updated:
                db.execute(
                    "UPDATE tools SET public_name = ?, hash = ?, definition = ?, indexed_seq = ? "
                    "WHERE server = ? AND name = ?",
                    (doc.public_name, doc.hash, _json(doc.definition), seq, server, doc.name),
                )
            db.executemany("DELETE FROM tools WHERE server = ? AND name = ?", [(server, n) for n in deleted])
            db.executemany(
                "INSERT OR REPLACE INTO approvals VALUES (?, ?, ?, ?)",
                [(server, doc.name, doc.hash, _json(doc.definition)) for doc in approved],
            )
            db.execute("INSERT OR REPLACE INTO servers VALUES (?, ?, ?)", (server, synced_at, fingerprint))
            _bump(db)
        return seq

    def forget(self, server: str) -> int:
        with self._lock, _transaction(self._db) as db:
            gone = db.execute("DELETE FROM tools WHERE server = ?", (server,)).rowcount
            db.execute("DELETE FROM approvals WHERE server = ?", (server,))
            db.execute("DELETE FROM servers WHERE server = ?", (server,))
            _bump(db)
        return int(gone)

    def approve(self, public_name: str, hash: str) -> StoredTool | None:
        with self._lock, _transaction(self._db) as db:
            row = db.execute(
                "SELECT server, name, definition, indexed_seq FROM tools WHERE public_name = ? AND hash = ?",
                (public_name, hash),
            ).fetchone()
            if row is None:
                return None
            server, name, definition, seq = row
            db.execute("INSERT OR REPLACE INTO approvals VALUES (?, ?, ?, ?)", (server, name, hash, definition))
            _bump(db)
        return StoredTool(ToolDocument(server, name, public_name, json.loads(definition), hash), seq, hash)

    def approval(self, server: str, name: str) -> Approval | None:
        with self._lock:
            row = self._db.execute(
                "SELECT hash, definition FROM approvals WHERE server = ? AND name = ?", (server, name)
            ).fetchone()
        if row is None:
            return None
        return Approval(row[0], json.loads(row[1]) if row[1] is not None else None)

    def generation(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()[0])

    def vectors(self, keys: Iterable[str]) -> dict[str, bytes]:
        wanted = list(dict.fromkeys(keys))
        found: dict[str, bytes] = {}
        with self._lock:
            for start in range(0, len(wanted), 500):  # under SQLite's limit of bound parameters
                chunk = wanted[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = self._db.execute(f"SELECT key, row FROM vectors WHERE key IN ({marks})", chunk).fetchall()
                found.update((key, bytes(row)) for key, row in rows)
        return found

    def put_vectors(self, rows: Mapping[str, bytes]) -> None:
        # Not a change of the documents: the generation stays, no reader reloads for it.
        with self._lock, _transaction(self._db) as db:
            db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?)", list(rows.items()))


_TOOLS = """CREATE TABLE tools (
    server TEXT NOT NULL, name TEXT NOT NULL, public_name TEXT NOT NULL, hash TEXT NOT NULL,
    definition TEXT NOT NULL, indexed_seq INTEGER NOT NULL, PRIMARY KEY (server, name))"""
_APPROVALS = """CREATE TABLE approvals (
    server TEXT NOT NULL, name TEXT NOT NULL, hash TEXT NOT NULL, definition TEXT, PRIMARY KEY (server, name))"""
_VECTORS = "CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, row BLOB NOT NULL)"
_SERVERS = "CREATE TABLE servers (server TEXT PRIMARY KEY, synced_at REAL NOT NULL, fingerprint TEXT NOT NULL)"


def _migrate_from_1(db: sqlite3.Connection) -> None:
    """Schema 1 → 2, in the caller's transaction: each document's hash recomputed (fields encoded as JSON, not
    joined with `|`), its `pinned_hash` moved to an approval (the definition kept when it was the approved one; a
    tool withheld then stays withheld), and fingerprints, which held `${VAR}` values, replaced by their digest."""
    rows = db.execute("SELECT server, name, hash, definition, pinned_hash FROM tools").fetchall()
    db.execute(_APPROVALS)
    for server, name, old_hash, definition, pinned_hash in rows:
        new_hash = tool_hash(json.loads(definition))
        db.execute("UPDATE tools SET hash = ? WHERE server = ? AND name = ?", (new_hash, server, name))
        if pinned_hash == old_hash:
            approval = (server, name, new_hash, definition)
        else:
            approval = (server, name, LEGACY_APPROVAL + pinned_hash, None)
        db.execute("INSERT INTO approvals VALUES (?, ?, ?, ?)", approval)
    db.execute("ALTER TABLE tools DROP COLUMN pinned_hash")
    for server, fingerprint in db.execute("SELECT server, fingerprint FROM servers").fetchall():
        db.execute("UPDATE servers SET fingerprint = ? WHERE server = ?", (legacy_digest(fingerprint), server))
    db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
    _bump(db)
    logger.info("the tool store was migrated to schema %d", SCHEMA_VERSION)


@contextlib.contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """`BEGIN IMMEDIATE` … `COMMIT` (`ROLLBACK` on any error) on a connection in autocommit mode."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


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


def _json(definition: Mapping[str, Any]) -> str:
    return json.dumps(definition, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
