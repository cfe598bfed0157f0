"""An optional dense (semantic) signal for TOOL_SEARCH: static word embeddings, offline, on the CPU.

WordLlama (the `semantic` extra, ``pip install 'progressive-mcp[semantic]'``) ships a 32,000-token x 256-dimension
static embedding table (16 MB of float16) and its Llama-2 tokenizer inside its wheel. A text's vector is the mean
of its tokens' vectors, so embedding is a table look-up and a sum: no model to run and nothing to download. Each
tool becomes one document (`tool_document`); a query is embedded the same way and scored by cosine similarity
against every tool. Example::

    if dense.available():
        index = dense.DenseIndex([dense.tool_document(tool) for tool in catalog.tools])
        index.rank("who sounds like Radiohead", limit=3)   # [(i, cosine), ...]: catalog.tools[i] best first

This module imports nothing heavy when imported (numpy and wordllama load on the first `DenseIndex`), so the
lexical engine can import it unconditionally; the model is loaded once per process and shared (`model`).

`WordLlama.load()` with its defaults is *not* offline: it looks for the tokenizer under ``wordllama/tokenizer/``
while the wheel puts it in ``wordllama/tokenizers/``, misses it, and downloads it from the model hub. `model`
therefore points the loader's cache directory at the package itself (where both ``weights/`` and ``tokenizers/``
are) and disables downloads, so a missing file is an error rather than a network call.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Hashable, Iterable, Sequence
from importlib.util import find_spec
from typing import TYPE_CHECKING, Any, Literal, TypeVar

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from progressive_mcp.catalog import CatalogTool

MODEL_CONFIG = "l2_supercat"  # the one configuration whose weights the wheel carries (l2_supercat_256.safetensors)
BUNDLED_DIM = 256
DIMENSIONS = (64, 128, 256)  # Matryoshka-trained: the first d columns are a usable d-dimension model
DEFAULT_DIM = 256
RRF_K = 60

_REQUIRED_MODULES = ("wordllama", "numpy", "tokenizers", "safetensors")
_models: dict[int, Any] = {}
_models_lock = threading.Lock()


def available() -> bool:
    """Whether the `semantic` extra is installed (wordllama and what it loads), without importing any of it."""
    try:
        return all(find_spec(name) is not None for name in _REQUIRED_MODULES)
    except (ImportError, ValueError):
        return False


def model(dim: int = DEFAULT_DIM) -> Any:
    """The process-wide WordLlama model truncated to `dim` dimensions (a `WordLlamaInference`), loaded on first use.

    Raises ImportError when the `semantic` extra is not installed, FileNotFoundError when its wheel lacks the
    bundled weights or tokenizer (it never falls back to a download).
    """
    if dim not in DIMENSIONS:
        raise ValueError(f"dim must be one of {', '.join(map(str, DIMENSIONS))}, not {dim}")
    with _models_lock:
        loaded = _models.get(dim)
        if loaded is None:
            loaded = _models[dim] = _load(dim)
        return loaded


def _load(dim: int) -> Any:
    import logging
    from pathlib import Path

    # Importing wordllama calls logging.basicConfig(level=INFO): it would add a stderr handler to the root logger
    # and let every library's INFO records through (httpx logs each request). Undone right after.
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        import wordllama
    finally:
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)
    package_dir = Path(wordllama.__file__).parent
    return wordllama.WordLlama.load(
        config=MODEL_CONFIG,
        cache_dir=package_dir,  # <package>/weights/ and <package>/tokenizers/: the files the wheel ships
        dim=BUNDLED_DIM,
        trunc_dim=None if dim == BUNDLED_DIM else dim,
        disable_download=True,
    )


class DenseIndex:
    """Unit-length embeddings of a list of documents (one per tool, in catalog order), searched by cosine.

    Immutable after construction; `scores` and `rank` are safe to call from several threads.
    """

    def __init__(self, documents: Sequence[str], *, dim: int = DEFAULT_DIM) -> None:
        self.dim = dim
        self._model = model(dim)
        self._matrix = self._embed(list(documents))
        self._matrix.setflags(write=False)

    @classmethod
    def for_tools(
        cls,
        tools: Iterable[CatalogTool],
        *,
        dim: int = DEFAULT_DIM,
        document: Callable[[CatalogTool], str] | None = None,
    ) -> DenseIndex:
        """An index of catalog tools, each embedded as `document(tool)` (default `tool_document`)."""
        make = document or tool_document
        return cls([make(tool) for tool in tools], dim=dim)

    def __len__(self) -> int:
        return int(self._matrix.shape[0])

    @property
    def matrix(self) -> NDArray[np.float32]:
        """The (documents x dim) float32 matrix of unit rows (read-only); an empty document's row is all zeros."""
        return self._matrix

    @property
    def nbytes(self) -> int:
        return int(self._matrix.nbytes)

    def embed(self, text: str) -> NDArray[np.float32]:
        """The unit-length vector of one text (all zeros when it has no tokens)."""
        return self._embed([text])[0]

    def embed_many(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """The unit-length vectors of several texts, one row each."""
        return self._embed(list(texts))

    def scores(self, query: str) -> NDArray[np.float32]:
        """The cosine similarity of the query to every document, in document order (-1..1; 0 for an empty query)."""
        import numpy as np

        # einsum, not @: BLAS threads cost more than they save on a matrix this size (see fusion.SemanticFusion).
        result: NDArray[np.float32] = np.einsum("ij,j->i", self._matrix, self.embed(query))
        return result

    def rank(self, query: str, limit: int) -> list[tuple[int, float]]:
        """The `limit` most similar documents as (index, cosine), best first; ties go to the lower index."""
        return self.best(self.scores(query), limit)

    @staticmethod
    def best(scores: NDArray[np.float32], limit: int) -> list[tuple[int, float]]:
        """The `limit` highest of some `scores` (one query's, from `scores`) as (index, score), best first; ties go
        to the lower index."""
        import numpy as np

        limit = min(max(limit, 0), len(scores))
        if limit == 0:
            return []
        top = np.argpartition(-scores, limit - 1)[:limit] if limit < len(scores) else np.arange(len(scores))
        order = sorted(top.tolist(), key=lambda i: (-float(scores[i]), i))
        return [(i, float(scores[i])) for i in order]

    def _embed(self, texts: list[str]) -> NDArray[np.float32]:
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        # WordLlama pads each batch of 64 texts to its longest: texts of like length batched together cost less
        # (5,000 tool documents: 0.54 s against 0.92 s in catalog order).
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        vectors = np.empty((len(texts), self.dim), dtype=np.float32)
        vectors[order] = self._model.embed([texts[i] for i in order], norm=False)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        # A text without tokens pools to zeros: it stays zeros (similar to nothing) rather than becoming NaN.
        return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)


# --- the text embedded for a tool ---------------------------------------------------------------------------------

DocumentVariant = Literal["short", "params", "full"]
DEFAULT_VARIANT: DocumentVariant = "full"  # the best on the dev split of Last.fm and Spotify (bench/dense_quality.py)
DESCRIPTION_CHARS = 240  # of the description kept by the "full" variant, cut at a sentence or word boundary

# Pattern strings, compiled (and cached by `re`) on first use: compiling them here would triple the import time.
_NAME_PARTS = r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+"
# OpenAPI sources start a description with the route ("GET /albums/{id}. "), some with "Deprecated. ".
_ROUTE_PREFIX = r"(?i)^\s*(?:deprecated\.\s*)?(?:(?:GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS)\s+\S+\.\s*)?"
# Code spans, URLs, paths and templated routes: identifiers, not words; and the HTTP how-to DigitalOcean repeats.
_CODE_OR_PATH = r"`[^`]*`|https?://\S+|(?<!\S)/\S*|\S*[{}]\S*|(?i:,?\s*send an? [A-Z]+ request to\b)"


def split_name(name: str) -> list[str]:
    """A tool or parameter name as lower-case words: camelCase, snake_case, kebab-case, dotted and ALL_CAPS.

    >>> split_name("track.getSimilar"), split_name("TIME_SERIES_INTRADAY"), split_name("get-an-album")
    (['track', 'get', 'similar'], ['time', 'series', 'intraday'], ['get', 'an', 'album'])
    """
    return [part.lower() for part in re.findall(_NAME_PARTS, name)]


def trim_description(description: str, limit: int = DESCRIPTION_CHARS) -> str:
    """The description without its route prefix, code spans or paths, cut to about `limit` characters."""
    text = re.sub(_CODE_OR_PATH, " ", re.sub(_ROUTE_PREFIX, "", description, count=1))
    text = re.sub(r"\s+(?=[.,:;)])", "", " ".join(text.split()))
    if len(text) <= limit:
        return text
    cut = text[:limit]
    sentence_end = cut.rfind(". ")
    if sentence_end >= limit // 2:
        return cut[: sentence_end + 1]
    return cut.rsplit(" ", 1)[0]


def tool_document(tool: CatalogTool, variant: DocumentVariant = DEFAULT_VARIANT) -> str:
    """The text embedded for one tool.

    "short": name words, title, summary, category words and the catalog's keywords; "params" adds the parameter
    names as words; "full" adds the start of the description too. Repeated parts (a title equal to the summary)
    are kept once, so a part's weight in the mean does not depend on how a source fills its fields.
    """
    parts = [" ".join(split_name(tool.name)), tool.title, tool.summary, " ".join(split_name(tool.category))]
    parts.extend(tool.keywords)
    if variant in ("params", "full"):
        names = dict.fromkeys(word for param in tool.params for word in split_name(param.name))
        parts.append(" ".join(names))
    if variant == "full":
        parts.append(trim_description(tool.description))
    elif variant not in ("short", "params"):
        raise ValueError(f"unknown document variant {variant!r}")
    return joined_once(parts)


def joined_once(parts: Iterable[str]) -> str:
    """Parts of a tool document joined as sentences, each once (case and spacing aside) and none empty."""
    seen: set[str] = set()
    kept = []
    for part in parts:
        key = " ".join(part.casefold().split())
        if key and key not in seen:
            seen.add(key)
            kept.append(part.strip().rstrip("."))
    return ". ".join(kept)


# --- fusion with a lexical ranking ---------------------------------------------------------------------------------

Item = TypeVar("Item", bound=Hashable)


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[Item]], *, weights: Sequence[float] | None = None, k: float = RRF_K
) -> list[Item]:
    """Items of several rankings (best first) ordered by sum(weight / (k + rank)), rank 1-based; ties keep the
    order of first appearance. An item missing from a ranking gets nothing from it."""
    weights = weights if weights is not None else [1.0] * len(rankings)
    if len(weights) != len(rankings):
        raise ValueError("one weight per ranking")
    fused: dict[Item, float] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        for rank, item in enumerate(ranking, 1):
            fused[item] = fused.get(item, 0.0) + weight / (k + rank)
    return sorted(fused, key=lambda item: -fused[item])
