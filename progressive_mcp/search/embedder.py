"""Sentence embeddings from a small transformer that ships inside this package: MiniLM-L6, int8, on ONNX Runtime.

The model is all-MiniLM-L6-v2 fine-tuned by this project on requests written the way people ask for API operations
(``models/minilm/model.onnx``, 22 MB, int8 weights; Apache-2.0 like the model it comes from; how it is made and what
it changed: model/README.md). The `semantic` extra (``pip install 'progressive-mcp[semantic]'``) brings what runs
it: ``onnxruntime`` (on the CPU) and ``tokenizers`` (the WordPiece tokenizer, whose definition is vendored beside the
model, ``models/minilm/tokenizer.json``; see the NOTICE there). Nothing is downloaded, ever: a missing file is an
error.

A text's vector is the mean of its token vectors (attention-masked), L2-normalised, as the model was trained to be
used; cosine similarity is then a dot product. Example::

    if embedder.available():
        vectors = embedder.embed(["list the albums of an artist", "send an SMS"])  # (2, 384) float32
        embedder.embed_query("albums by Radiohead")  # one (384,) row, kept for repeats (QUERY_CACHE)

Nothing heavy is imported with this module: onnxruntime, tokenizers and numpy load on the first `embed`, once per
process (`Embedder.shared`), so the Lambda's cold start does not pay for a model it may never use (its asset leaves
the model file out: infra/bundling.py).
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Mapping, Sequence
from functools import lru_cache
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

# Stored vectors (compiled catalogs, the gateway's tool store) are keyed by this: a vector of another model, such as
# the stock all-MiniLM-L6-v2 ("all-MiniLM-L6-v2-int8", before 2026-11-29), is never mixed with this one's.
MODEL_ID = "minilm-l6-requests-int8-2"
DIMENSION = 384
MAX_TOKENS = 128  # the model's training length; a longer tool document is cut (its first words say the most)
BATCH = 32
QUERY_CACHE = 512  # queries whose vectors are kept: an agent often asks the same thing again
TOKENIZER = Path(__file__).with_name("models") / "minilm" / "tokenizer.json"
MODEL = TOKENIZER.with_name("model.onnx")
# The model file's digest (model/README.md): vectors from any other file would not match stored ones.
MODEL_SHA256 = "0560c0efa5a7ee3e68df09a1de6915b08b7f2734d2bcc47b009c7f27172967ad"

# The everyday requests' vectors (`semantic.everyday_requests`, read as queries), made by this model once and shipped
# (`write_everyday`): TOOL_SEARCH's closeness scale (`fusion.SemanticFusion.closeness`) needs them for every catalog,
# and embedding ~120 requests on a process's first search would cost about 0.3 s.
EVERYDAY = MODEL.with_name("everyday.json")

_REQUIRED_MODULES = ("onnxruntime", "tokenizers", "numpy")


def available() -> bool:
    """Whether the `semantic` extra's model is installed, without importing any of it."""
    try:
        modules = all(find_spec(name) is not None for name in _REQUIRED_MODULES)
        return modules and TOKENIZER.is_file() and MODEL.is_file()
    except (ImportError, ValueError):
        return False


class Embedder:
    """The model and its tokenizer, loaded once; `embed` is safe to call from several threads."""

    _shared: Embedder | None = None
    _shared_lock = threading.Lock()

    def __init__(self, *, threads: int = 1) -> None:
        # onnxruntime's Linux wheels (1.32) start a telemetry client on import that writes a device id under
        # ~/.cache and may upload events: a search must touch neither the network nor HOME (read-only on Lambda).
        os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
        from tokenizers import Tokenizer

        path = MODEL
        if not path.is_file():
            raise FileNotFoundError(f"the embedding model is missing from the package: {path}")
        self._path = path
        self._threads = threads
        # Two graphs of the same file (query_graph), each made on first use. Tool documents (embedded once, stored)
        # run the file's float32 products, exactly as before; a query runs them on the int8 weights, ~1.7x faster
        # for a few tokens, its vector within a cosine of ~.997 of the float one (tests/test_query_graph.py). So
        # stored vectors never change with this, and a process that only answers queries never loads the float
        # graph (`fusion.near`'s everyday requests stand for queries: `embed(..., queries=True)`).
        self._graphs: dict[bool, Any] = {}  # products in int8 (queries) or not (documents) -> its session
        self._token_types = False
        self.query_int8_nodes = 0  # nodes of the query graph that read int8 weights (38 for the pinned model)
        tokenizer = Tokenizer.from_file(str(TOKENIZER))
        tokenizer.enable_truncation(max_length=MAX_TOKENS)
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        self._tokenizer = tokenizer
        self._lock = threading.Lock()
        self._session_lock = threading.Lock()
        self.texts_embedded = 0  # over this embedder's life: what tests count to prove stored vectors are used

    def _session(self, model: str | bytes) -> Any:
        import onnxruntime

        options = onnxruntime.SessionOptions()
        # One thread: a Lambda has one vCPU at 1,769 MB and less below; a server answers many searches at once.
        options.intra_op_num_threads = self._threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        try:
            session = onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime's own types (InvalidArgument, Fail, ...) derive from Exception only
            raise RuntimeError(f"onnxruntime refused the embedding model {self._path.name}: {exc}") from exc
        self._token_types = "token_type_ids" in {node.name for node in session.get_inputs()}  # both graphs' inputs
        return session

    def _graph(self, products: bool) -> Any:
        """The session of the query graph (`products` on int8 weights) or of the document graph, made on first use."""
        with self._session_lock:
            if products not in self._graphs:
                from progressive_mcp.search.query_graph import int8_weights

                model, count = int8_weights(self._path.read_bytes(), products=products)
                if products:
                    self.query_int8_nodes = count
                self._graphs[products] = self._session(model)
            return self._graphs[products]

    @classmethod
    def shared(cls) -> Embedder:
        """The process's embedder, made on first use."""
        with cls._shared_lock:
            if cls._shared is None:
                cls._shared = cls()
            return cls._shared

    def embed(self, texts: Sequence[str], *, queries: bool = False) -> NDArray[np.float32]:
        """Unit vectors of `texts`, one row each, in batches of `BATCH` (sorted by length, so padding stays short);
        `queries`: through the query graph, as `embed_query` reads one (texts that stand for queries)."""
        import numpy as np

        out = np.zeros((len(texts), DIMENSION), dtype=np.float32)
        self.texts_embedded += len(texts)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        session = self._graph(products=queries)
        for start in range(0, len(order), BATCH):
            chunk = order[start : start + BATCH]
            out[chunk] = self._batch(session, [texts[i] for i in chunk])
        return out

    def embed_query(self, text: str) -> NDArray[np.float32]:
        """The unit vector of one query, from the int8 query graph (uncached: `embed_query` below keeps repeats)."""
        self.texts_embedded += 1
        vector: NDArray[np.float32] = self._batch(self._graph(products=True), [text])[0]
        return vector

    def _batch(self, session: Any, texts: list[str]) -> Any:
        import numpy as np

        _, mask, hidden = self.token_states(session, texts)
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1.0)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.maximum(norms, 1e-12)

    def token_states(self, session: Any, texts: list[str]) -> tuple[Any, Any, Any]:
        """The texts' word-piece ids and attention mask (batch x tokens, padded) and the model's token vectors
        (batch x tokens x 384) from `session`, before pooling."""
        import numpy as np

        with self._lock:  # the tokenizer's padding settings are shared state
            encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if self._token_types:
            feeds["token_type_ids"] = np.zeros_like(ids)
        return ids, mask, session.run(None, feeds)[0]


def embed(texts: Sequence[str]) -> NDArray[np.float32]:
    """Unit vectors of `texts` from the shared embedder."""
    return Embedder.shared().embed(texts)


def embed_queries(texts: Sequence[str]) -> NDArray[np.float32]:
    """Unit vectors of query-like texts from the shared embedder's query graph, in batches, uncached."""
    return Embedder.shared().embed(texts, queries=True)


@lru_cache(maxsize=QUERY_CACHE)
def embed_query(text: str) -> NDArray[np.float32]:
    """The unit vector of one query (read-only), kept for the next `QUERY_CACHE` distinct queries."""
    vector = Embedder.shared().embed_query(text)
    vector.setflags(write=False)
    return vector


def content_key(text: str) -> str:
    """The key a stored vector is kept under: the model and the text's digest, so a changed text or model misses."""
    return f"{MODEL_ID}:{hashlib.sha256(text.encode('utf-8')).hexdigest()[:32]}"


def texts_digest(texts: Sequence[str]) -> str:
    """One digest of a list of texts, in order: what stored everyday vectors were made for."""
    return hashlib.sha256("\n".join(texts).encode("utf-8")).hexdigest()


def stored_everyday(texts: Sequence[str]) -> NDArray[np.float32] | None:
    """The shipped vectors of these everyday requests (EVERYDAY) as unit rows, or None where the file is missing or
    was made by another model or for other texts (then they are embedded at run time)."""
    import json

    from progressive_mcp.search import vectors  # it imports this module

    try:
        stored = json.loads(EVERYDAY.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(stored, dict) or stored.get("model") != MODEL_ID:
        return None
    rows = everyday_rows(stored, texts)
    return None if rows is None else vectors.dequantize(rows)


def everyday_rows(stored: Mapping[str, Any], texts: Sequence[str], width: int = DIMENSION) -> bytes | None:
    """The int8 rows of a block of stored everyday vectors (`{"texts": texts_digest, "int8": base64}`: EVERYDAY's,
    a compiled catalog's for a remote provider), or None where they were made for other texts or are not whole."""
    from progressive_mcp.search import vectors

    data = stored.get("int8")
    if stored.get("texts") != texts_digest(texts) or not isinstance(data, str):
        return None
    try:
        rows = vectors.decode(data, width)
    except ValueError:
        return None
    return rows if len(rows) == len(texts) * width else None


def write_everyday(texts: Sequence[str]) -> None:
    """Embed the everyday requests with this model, as queries, and store them as int8 rows (`vectors.quantize`) in
    EVERYDAY (after a new model: model/README.md)."""
    import json

    from progressive_mcp.search import vectors

    rows = vectors.encode(vectors.quantize(embed_queries(texts)))
    stored = {"model": MODEL_ID, "texts": texts_digest(texts), "int8": rows}
    EVERYDAY.write_text(json.dumps(stored) + "\n", encoding="utf-8")


if __name__ == "__main__":  # python -m progressive_mcp.search.embedder: write EVERYDAY for the shipped model
    from progressive_mcp.search.semantic import everyday_requests

    write_everyday(everyday_requests())
    print(f"wrote {EVERYDAY}")
