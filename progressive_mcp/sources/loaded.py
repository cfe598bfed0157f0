"""Catalogs already loaded in this process, reused while every file their load read is unchanged.

Parsing a document is most of what a load costs (the bundled spec's YAML ~0.3 CPU-s, Stripe's 4 MB ~15), and a
process may load the same file more than once: each `Surface.from_settings` or `Endpoint` without a catalog, a
gateway's base spec, a test suite's fixtures. A catalog is immutable (`Catalog`), so one load can serve them all.
The readers of `sources` note each file they read (`note_read`); a later load of the same file with the same
filters is a hit only when each noted file still has the same content (read and hashed again: far cheaper than
parsing), so an edited spec, vocabulary file or `$ref`'d file is loaded anew however quickly it was rewritten.
Example::

    catalog, report = LOADED.get(key) or LOADED.put(key, *load(path))   # see sources.load_catalog_with_report
"""

from __future__ import annotations

import copy
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from progressive_mcp.catalog import Catalog
    from progressive_mcp.sources.openapi import OpenApiReport

MAX_CATALOGS = 8  # a process serves one or two; a test worker goes through documents one group at a time

# The files the load under way has read, each with its content's digest; None outside a recorded load.
_reads: ContextVar[dict[Path, str] | None] = ContextVar("progressive_mcp_source_reads", default=None)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def note_read(path: Path, text: str, *, resolved: bool = False) -> None:
    """Called by each reader of a source file: the load under way depends on `path` having this `text`
    (`resolved`: `path` is resolved already)."""
    reads = _reads.get()
    if reads is not None:
        reads[path if resolved else path.resolve()] = _digest(text)


@contextmanager
def recording() -> Iterator[dict[Path, str]]:
    """The files read inside the block, with their digests (`note_read`)."""
    reads: dict[Path, str] = {}
    token = _reads.set(reads)
    try:
        yield reads
    finally:
        _reads.reset(token)


def _unchanged(reads: dict[Path, str]) -> bool:
    for path, digest in reads.items():
        try:
            if _digest(path.read_text(encoding="utf-8")) != digest:
                return False
        except (OSError, UnicodeDecodeError):
            return False
    return True


class LoadedCatalogs:
    """The last `MAX_CATALOGS` loads by key (the file and the filters), each with the files it read; thread-safe."""

    def __init__(self, size: int = MAX_CATALOGS) -> None:
        self._size = size
        self._entries: OrderedDict[Hashable, tuple[Catalog, OpenApiReport | None, dict[Path, str]]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> tuple[Catalog, OpenApiReport | None] | None:
        """The catalog loaded under `key`, if every file it read is unchanged (its report a copy: a report is
        mutable); else None."""
        with self._lock:
            entry = self._entries.get(key)
        if entry is None:
            return None
        catalog, report, reads = entry
        if not _unchanged(reads):
            with self._lock:
                if self._entries.get(key) is entry:
                    del self._entries[key]
            return None
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
        return catalog, copy.deepcopy(report)

    def put(
        self, key: Hashable, catalog: Catalog, report: OpenApiReport | None, reads: dict[Path, str]
    ) -> tuple[Catalog, OpenApiReport | None]:
        """Keep a load that read `reads` (none: nothing to check, so nothing is kept); returns it."""
        if reads:
            with self._lock:
                self._entries[key] = (catalog, copy.deepcopy(report), dict(reads))
                self._entries.move_to_end(key)
                while len(self._entries) > self._size:
                    self._entries.popitem(last=False)
        return catalog, report

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


LOADED = LoadedCatalogs()
