"""Tool document vectors from the active embedding provider (`providers`: the bundled MiniLM model by default),
each computed once and kept by content key.

A tool's document (`document`: its name words, title, summary, category and keywords) is embedded once; the vector
is kept under `key_of` (the provider's model id and the document's digest), so an unchanged tool is never embedded
again, whoever asks. Vectors come from three places: a compiled catalog (`spec compile` stores them;
`sources.compiled`), the gateway's tool store (its sync stores them), or the model itself, lazily, for the
documents nobody stored. Example::

    vectors = ToolVectors(catalog.tools)      # nothing is embedded or imported yet
    vectors.matrix()                          # (tools x 384) unit rows: from the cache, embedding what it lacks

Stored, a vector is 384 int8 values (MiniLM's width; a provider's model has its own) (`quantize`): each row scaled
so its largest component is 127. Its length is lost and does not matter, since a row is made unit length again
when read (`dequantize`); cosine rankings of the int8 rows match the float ones (tests/test_vectors.py). This
module imports neither numpy nor the model until a matrix or a vector is asked for.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from progressive_mcp.search import dense, embedder, providers

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from progressive_mcp.catalog import CatalogTool

ROW_BYTES = embedder.DIMENSION  # one int8 per dimension
# What `document` is made of, stored beside a compiled catalog's vectors: rows made from another document are not
# used (`sources.compiled`), and the gateway store's keys hold the document's digest.
DOCUMENT_VARIANT = "short+verb"
# An operationId's HTTP verb (PostCustomers, GetCustomersCustomer) as the action it stands for: MiniLM reads "post"
# as publishing and cannot tell a list from a record's read. A POST, GET or the like on a path ending in a record's
# id ({customer}) changes or reads that record; on a collection it creates one or lists them.
_VERBS = {"get": ("list", "get"), "post": ("create", "update"), "put": ("update", "update"),
          "patch": ("update", "update"), "delete": ("delete", "delete")}  # fmt: skip

Embed = Callable[[Sequence[str]], "NDArray[np.float32]"]
Lookup = Callable[[list[str]], Mapping[str, bytes]]  # keys -> the rows a store holds for some of them
log = logging.getLogger(__name__)


def document(tool: CatalogTool) -> str:
    """The text embedded for a tool: its name as words (`name_words`), title, summary, category words and keywords,
    each part once."""
    parts = [" ".join(name_words(tool)), tool.title, tool.summary, " ".join(dense.split_name(tool.category))]
    return dense.joined_once([*parts, *tool.keywords])


def name_words(tool: CatalogTool) -> list[str]:
    """A tool's name as words, an opening HTTP verb that is its REST operation's method read as its action:
    PostCustomers -> create customers, PostCustomersCustomer -> update customers customer, GetCharges -> list
    charges, get-an-album (GET /albums/{id}) -> get an album."""
    words = dense.split_name(tool.name)
    route = tool.operation
    if route is None or not words or words[0] != route.method.lower() or words[0] not in _VERBS:
        return words
    on_record = re.search(r"\}(\.\w+)?/?$", route.path) is not None
    return [_VERBS[words[0]][on_record], *words[1:]]


def key_of(tool: CatalogTool) -> str:
    """The key a tool's vector is kept under: the active provider's model and the document's digest (for the
    bundled model, `embedder.content_key`)."""
    return _key(document(tool))


def query_key(text: str) -> str:
    """The key a text embedded as a query is kept under (the everyday requests that set each catalog's closeness
    scale, `fusion.SemanticFusion.closeness`): the active provider's model, "query" and the text's digest. Never a
    tool's key: a provider may embed a query and a document of the same text differently."""
    return _key(text, "query:")


def _key(text: str, kind: str = "") -> str:
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]
    return f"{providers.active().model_id}:{kind}{digest}"


def quantize(vectors: NDArray[np.float32]) -> bytes:
    """Rows as int8, each scaled so its largest component is +-127 (an all-zero row stays zeros)."""
    import numpy as np

    peaks = np.abs(vectors).max(axis=1, keepdims=True) if len(vectors) else np.ones((0, 1), np.float32)
    scaled = np.divide(vectors * 127.0, peaks, out=np.zeros_like(vectors), where=peaks > 0)
    return bytes(np.rint(scaled).astype(np.int8).tobytes())


def dequantize(data: bytes, width: int = ROW_BYTES) -> NDArray[np.float32]:
    """int8 rows (`quantize`) of `width` dimensions as unit-length float32 rows."""
    import numpy as np

    rows = np.frombuffer(data, dtype=np.int8).reshape(-1, width).astype(np.float32)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return np.divide(rows, norms, out=np.zeros_like(rows), where=norms > 0)


def encode(rows: bytes) -> str:
    """int8 rows as text for a JSON file."""
    return base64.b64encode(rows).decode("ascii")


def decode(text: str, width: int = ROW_BYTES) -> bytes:
    data = base64.b64decode(text.encode("ascii"), validate=True)
    if width < 1 or len(data) % width:
        raise ValueError(f"vector data of {len(data)} bytes is not a whole number of {width}-byte rows")
    return data


class VectorCache:
    """int8 rows of tool documents by content key; thread-safe. `shared` is the process's.

    A compiled catalog hands its rows over unread (`offer`): they are matched to their keys only when a search
    first needs vectors, so loading a catalog costs nothing for them.
    """

    _shared: VectorCache | None = None
    _shared_lock = threading.Lock()

    def __init__(self) -> None:
        self._rows: dict[str, bytes] = {}
        self._offered: list[tuple[Sequence[CatalogTool], bytes, int]] = []
        self._lookups: list[tuple[Sequence[CatalogTool], Lookup]] = []
        self._stores: list[Lookup] = []  # every lookup offered, for the keys of no tool (`find`)
        self._lock = threading.Lock()

    @classmethod
    def shared(cls) -> VectorCache:
        with cls._shared_lock:
            if cls._shared is None:
                cls._shared = cls()
            return cls._shared

    def __len__(self) -> int:
        with self._lock:
            self._settle()
            return len(self._rows)

    def offer(self, tools: Sequence[CatalogTool], rows: bytes, width: int = ROW_BYTES) -> None:
        """The rows stored with `tools` (one each, in order, `width` bytes each), read when first needed."""
        if width < 1 or len(rows) != len(tools) * width:
            raise ValueError(f"{len(rows) // max(width, 1)} vectors for {len(tools)} tools")
        with self._lock:
            self._offered.append((tools, rows, width))

    def offer_lookup(self, tools: Sequence[CatalogTool], lookup: Lookup) -> None:
        """A place holding some of `tools`' rows (the gateway's tool store), asked once, when first needed."""
        with self._lock:
            self._lookups.append((tools, lookup))
        self.offer_store(lookup)

    def offer_store(self, lookup: Lookup) -> None:
        """A place that may hold rows of no tool (`query_key`), asked by `find` for the keys the cache lacks."""
        with self._lock:
            if not any(store is lookup for store in self._stores):
                self._stores.append(lookup)

    def put(self, items: Iterable[tuple[str, bytes]]) -> None:
        with self._lock:
            self._rows.update(items)

    def get(self, keys: Sequence[str]) -> list[bytes | None]:
        with self._lock:
            self._settle()
            return [self._rows.get(key) for key in keys]

    def find(self, keys: Sequence[str]) -> list[bytes | None]:
        """`get`, asking the stores offered (`offer_store`, `offer_lookup`) for the keys the cache lacks: rows kept for
        no tool (`query_key`)."""
        with self._lock:
            self._settle()
            stores = list(self._stores)
        for store in stores:
            with self._lock:
                missing = [key for key in keys if key not in self._rows]
            if not missing:
                break
            try:
                found = store(missing)
            except Exception as exc:  # a store that cannot be read: the texts are embedded instead
                log.warning("stored vectors cannot be read (%s)", type(exc).__name__)
                continue
            self.put((key, row) for key, row in found.items() if row)
        return self.get(keys)

    def _settle(self) -> None:
        for tools, rows, width in self._offered:
            for i, tool in enumerate(tools):
                self._rows.setdefault(key_of(tool), rows[i * width : (i + 1) * width])
        self._offered.clear()
        for tools, lookup in self._lookups:
            keys = [key for key in map(key_of, tools) if key not in self._rows]
            try:
                found = lookup(keys) if keys else {}
            except Exception as exc:  # a store that cannot be read: the documents are embedded instead
                log.warning("stored tool vectors cannot be read (%s)", type(exc).__name__)
                continue
            self._rows.update((key, row) for key, row in found.items() if row)
        self._lookups.clear()


def rows_for(
    tools: Sequence[CatalogTool], cache: VectorCache | None = None, embed: Embed | None = None
) -> tuple[bytes, int]:
    """The int8 rows of `tools` in order, from the cache, embedding (and caching) those it lacks; and how many
    documents were embedded."""
    cache = cache if cache is not None else VectorCache.shared()
    documents = [document(tool) for tool in tools]
    keys = [_key(text) for text in documents]
    return _rows(keys, documents, cache.get(keys), cache, embed or providers.active().embed)


def query_rows(texts: Sequence[str], cache: VectorCache | None = None, embed: Embed | None = None) -> tuple[bytes, int]:
    """The int8 rows of `texts` embedded as queries (`query_key`), in order: from the cache or a store offered to
    it (a compiled catalog, the gateway's tool store), embedding (and caching) the rest; and how many were embedded."""
    cache = cache if cache is not None else VectorCache.shared()
    keys = [query_key(text) for text in texts]
    return _rows(keys, list(texts), cache.find(keys), cache, embed or providers.active().embed_queries)


def _rows(
    keys: list[str], texts: list[str], found: list[bytes | None], cache: VectorCache, embed: Embed
) -> tuple[bytes, int]:
    missing = [i for i, row in enumerate(found) if row is None]
    if missing:
        made = quantize(embed([texts[i] for i in missing]))
        width = len(made) // len(missing)
        if any(row is not None and len(row) != width for row in found):
            # Stored rows of another size: the model behind the name changed (a new Ollama tag). Embed them all.
            missing = list(range(len(texts)))
            made = quantize(embed(texts))
            width = len(made) // len(texts)
        new = [(keys[i], made[n * width : (n + 1) * width]) for n, i in enumerate(missing)]
        cache.put(new)
        for i, (_, row) in zip(missing, new, strict=True):
            found[i] = row
    return b"".join(row for row in found if row is not None), len(missing)


class ToolVectors:
    """One set of tools' vectors as a (tools x 384) matrix of unit rows, assembled on first use (thread-safe)."""

    def __init__(
        self, tools: Sequence[CatalogTool], *, cache: VectorCache | None = None, embed: Embed | None = None
    ) -> None:
        self._tools = tools
        self._cache = cache
        self._embed = embed
        self._matrix: NDArray[np.float32] | None = None
        self._lock = threading.Lock()
        self.embedded = 0  # documents this instance had to embed (the rest came stored)

    def matrix(self) -> NDArray[np.float32]:
        with self._lock:
            if self._matrix is None:
                rows, self.embedded = rows_for(self._tools, self._cache, self._embed)
                matrix = dequantize(rows, len(rows) // max(len(self._tools), 1) or ROW_BYTES)
                matrix.setflags(write=False)
                self._matrix = matrix
            return self._matrix
