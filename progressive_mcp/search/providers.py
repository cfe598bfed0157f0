"""Where tool and query vectors come from: the bundled MiniLM model (default) or a provider the operator configures.

`PMCP_EMBEDDINGS` picks one, once per process (`active`):

- ``bundled`` (the default): all-MiniLM-L6-v2 int8 on the CPU (`embedder`, the `semantic` extra); nothing leaves
  the machine.
- ``openai``: any OpenAI-compatible ``/embeddings`` endpoint (OpenAI, Ollama, vLLM, LM Studio):
  ``PMCP_EMBEDDINGS_URL`` (default ``https://api.openai.com/v1``; ``/embeddings`` is added unless the path ends in
  it), ``PMCP_EMBEDDINGS_MODEL`` (default ``text-embedding-3-small``), ``PMCP_EMBEDDINGS_KEY`` (sent as a Bearer
  token; none for a local server), ``PMCP_EMBEDDINGS_DIMENSIONS`` (optional: asked of the model, and checked).
- ``bedrock``: Amazon Bedrock's ``InvokeModel`` with ``PMCP_EMBEDDINGS_MODEL`` (default
  ``amazon.titan-embed-text-v2:0``; Cohere's ``cohere.embed-*`` too), in ``PMCP_EMBEDDINGS_REGION`` or boto3's
  own region; credentials are boto3's (the Lambda's role). boto3 (the `aws` extra) is imported on first use.

Each provider names its vectors by `model_id` (provider, model and dimensions), the prefix of every stored
vector's key (`vectors.key_of`), so switching provider or model re-embeds and an unchanged tool document is
never embedded twice by the same one. A remote provider that fails (unreachable, refused, a server error, a
timeout, a vector of the wrong size) raises `EmbeddingProviderError`: the search that asked answers from the
lexical engine alone, one warning line names the provider and the reason (never the key), and the provider is
not asked again for `RETRY_AFTER_S`. Example::

    provider = OpenAICompatible(url="http://127.0.0.1:11434/v1", model="nomic-embed-text")
    provider.embed(["list the albums of an artist"])    # (1, d) float32 unit rows, one request
    provider.embed_query("albums by Radiohead")          # kept for repeats: one request per distinct query
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from progressive_mcp.errors import ConfigError, EmbeddingProviderError
from progressive_mcp.search import embedder

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

EMBEDDINGS_ENV = "PMCP_EMBEDDINGS"
PROVIDERS = ("bundled", "openai", "bedrock")
OPENAI_URL = "https://api.openai.com/v1"
OPENAI_MODEL = "text-embedding-3-small"
BEDROCK_MODEL = "amazon.titan-embed-text-v2:0"
TIMEOUT_S = 10.0  # one request; PMCP_EMBEDDINGS_TIMEOUT_S
OPENAI_BATCH = 64  # texts a request: well under OpenAI's 2,048, and a sync's 100 tools in two requests
COHERE_BATCH = 96  # Cohere's limit of texts per InvokeModel
RETRY_AFTER_S = 60.0  # after a failure, searches stay lexical this long before the provider is asked again
QUERY_CACHE = embedder.QUERY_CACHE

log = logging.getLogger(__name__)


class EmbeddingProvider(Protocol):
    """What search needs of a source of vectors."""

    name: str  # for logs: "bundled", "openai", "bedrock"
    model_id: str  # the prefix of stored vectors' keys

    def available(self) -> bool:
        """Whether it can be used in this installation (its packages are there), without calling it."""
        ...

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Unit rows of tool documents, one per text."""
        ...

    def embed_query(self, text: str) -> NDArray[np.float32]:
        """The unit vector of one query (read-only), kept for repeats."""
        ...

    def embed_queries(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Unit rows of texts read as queries are (`fusion.near`'s everyday requests), uncached."""
        ...


class Bundled:
    """The bundled MiniLM model (`embedder`): the semantic extra's, on the CPU."""

    name = "bundled"
    model_id = embedder.MODEL_ID

    def available(self) -> bool:
        return embedder.available()

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        return embedder.embed(texts)

    def embed_query(self, text: str) -> NDArray[np.float32]:
        return embedder.embed_query(text)

    def embed_queries(self, texts: Sequence[str]) -> NDArray[np.float32]:
        return embedder.embed_queries(texts)


class _Remote:
    """What the remote providers share: unit rows of one width, a query cache, and a pause after a failure."""

    name = "remote"

    def __init__(self, model: str, dimensions: int | None) -> None:
        self.model = model
        self.dimensions = dimensions  # None: learned from the first answer, then held to
        self.model_id = f"{self.name}:{model}" + (f"@{dimensions}" if dimensions else "")
        self.requests = 0  # made over this provider's life: what tests count to prove caching
        self._queries: OrderedDict[str, NDArray[np.float32]] = OrderedDict()
        self._lock = threading.Lock()
        self._paused_until = 0.0
        self._failing = False

    def available(self) -> bool:
        return True

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        return self._guarded(lambda: self._rows(self._fetch(list(texts), query=False), len(texts)))

    def embed_queries(self, texts: Sequence[str]) -> NDArray[np.float32]:
        return self._guarded(lambda: self._rows(self._fetch(list(texts), query=True), len(texts)))

    def embed_query(self, text: str) -> NDArray[np.float32]:
        with self._lock:
            cached = self._queries.get(text)
            if cached is not None:
                self._queries.move_to_end(text)
                return cached
        vector = self._guarded(lambda: self._rows(self._fetch([text], query=True), 1))[0]
        vector.setflags(write=False)
        with self._lock:
            self._queries[text] = vector
            if len(self._queries) > QUERY_CACHE:
                self._queries.popitem(last=False)
        return vector

    def _fetch(self, texts: list[str], *, query: bool) -> list[list[float]]:
        raise NotImplementedError

    def _guarded(self, call: Callable[[], NDArray[np.float32]]) -> NDArray[np.float32]:
        """`call`, unless the provider failed less than RETRY_AFTER_S ago; a failure is logged once per outage."""
        if time.monotonic() < self._paused_until:
            raise EmbeddingProviderError(f"embedding provider {self.name} is paused after a failure")
        try:
            result = call()
        except EmbeddingProviderError as exc:
            with self._lock:
                self._paused_until = time.monotonic() + RETRY_AFTER_S
                first = not self._failing
                self._failing = True
            if first:
                log.warning(
                    "embedding provider %s (model %s) failed: %s; searches use the lexical engine alone, retried "
                    "after %d s",
                    self.name,
                    self.model,
                    exc,
                    RETRY_AFTER_S,
                )
            raise
        if self._failing:
            self._failing = False
            log.warning("embedding provider %s (model %s) answers again", self.name, self.model)
        return result

    def _rows(self, vectors: list[list[float]], expected: int) -> NDArray[np.float32]:
        """The answer's vectors as unit float32 rows, checked: one per text, all of the model's width, finite."""
        import numpy as np

        if len(vectors) != expected:
            raise EmbeddingProviderError(f"it returned {len(vectors)} vectors for {expected} texts")
        widths = {len(v) for v in vectors}
        width = next(iter(widths)) if len(widths) == 1 else 0
        wanted = self.dimensions or width
        if not width or width != wanted:
            raise EmbeddingProviderError(
                f"it returned vectors of {sorted(widths)} dimensions where {wanted or 'one size'} were expected"
            )
        try:
            rows = np.asarray(vectors, dtype=np.float32)
        except (TypeError, ValueError):
            raise EmbeddingProviderError("it returned vectors that are not lists of numbers") from None
        if not np.isfinite(rows).all():
            raise EmbeddingProviderError("it returned vectors that are not finite")
        self.dimensions = width  # held to from now on: a model that changes size mid-life would mix spaces
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        result: NDArray[np.float32] = np.divide(rows, norms, out=np.zeros_like(rows), where=norms > 0)
        return result


class OpenAICompatible(_Remote):
    """An OpenAI-compatible ``POST /embeddings`` endpoint; `transport` is for tests (httpx's MockTransport)."""

    name = "openai"

    def __init__(
        self,
        *,
        url: str = OPENAI_URL,
        model: str = OPENAI_MODEL,
        key: str | None = None,
        dimensions: int | None = None,
        timeout_s: float = TIMEOUT_S,
        batch: int = OPENAI_BATCH,
        transport: Any = None,
    ) -> None:
        super().__init__(model, dimensions)
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"PMCP_EMBEDDINGS_URL must be an http(s) URL, not {_safe_url(url)!r}")
        path = parts.path.rstrip("/")
        self.url = url if path.endswith("/embeddings") else url.rstrip("/") + "/embeddings"
        self._key = key
        if key:  # whoever logs (httpx, a handler's error), the key is masked in every record while this provider lives
            from progressive_mcp.redaction import Secrets, protect_logs

            protect_logs(Secrets.of(key, basic_parts=False), self)
        self.timeout_s = timeout_s
        self.batch = max(1, batch)
        self._transport = transport
        self._client: Any = None

    def __repr__(self) -> str:  # never the key
        return f"OpenAICompatible(url={_safe_url(self.url)!r}, model={self.model!r})"

    def _http(self) -> Any:
        import httpx

        with self._lock:
            if self._client is None:
                headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
                self._client = httpx.Client(
                    headers=headers, timeout=self.timeout_s, transport=self._transport, follow_redirects=False
                )
            return self._client

    def _fetch(self, texts: list[str], *, query: bool) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch):
            vectors.extend(self._request(texts[start : start + self.batch]))
        return vectors

    def _request(self, texts: list[str]) -> list[list[float]]:
        import httpx

        body: dict[str, Any] = {"model": self.model, "input": texts, "encoding_format": "float"}
        if self.dimensions and self.model.startswith("text-embedding-3"):
            body["dimensions"] = self.dimensions  # only OpenAI's v3 models take it; others would refuse the field
        self.requests += 1
        try:
            response = self._http().post(self.url, json=body)
        except httpx.TimeoutException:
            raise EmbeddingProviderError(f"no answer within {self.timeout_s:g} s") from None
        except httpx.HTTPError as exc:
            raise EmbeddingProviderError(f"unreachable ({type(exc).__name__})") from None
        if response.status_code in (401, 403):
            raise EmbeddingProviderError(f"it refused the key (HTTP {response.status_code})")
        if response.status_code != 200:
            raise EmbeddingProviderError(f"HTTP {response.status_code}")
        try:
            data = response.json()["data"]
            ordered = sorted(data, key=lambda item: int(item.get("index", 0)))
            return [list(item["embedding"]) for item in ordered]
        except (ValueError, KeyError, TypeError, AttributeError):
            raise EmbeddingProviderError("its answer is not an embeddings response") from None


class Bedrock(_Remote):
    """Amazon Bedrock's InvokeModel: Titan Text Embeddings (one text a request) or Cohere Embed (96 a request);
    `client` is a boto3 ``bedrock-runtime`` client (tests pass one with botocore's Stubber), else made on first use."""

    name = "bedrock"

    def __init__(
        self,
        *,
        model: str = BEDROCK_MODEL,
        region: str | None = None,
        dimensions: int | None = None,
        timeout_s: float = TIMEOUT_S,
        client: Any = None,
    ) -> None:
        super().__init__(model, dimensions)
        self.region = region
        self.timeout_s = timeout_s
        self._client = client
        self._cohere = "cohere." in model  # "cohere.embed-english-v3", or an inference profile "us.cohere..."

    def available(self) -> bool:
        from importlib.util import find_spec

        return self._client is not None or find_spec("boto3") is not None

    def _bedrock(self) -> Any:
        with self._lock:
            if self._client is None:
                import boto3
                from botocore.config import Config

                config = Config(
                    connect_timeout=self.timeout_s, read_timeout=self.timeout_s, retries={"max_attempts": 2}
                )
                self._client = boto3.client("bedrock-runtime", region_name=self.region, config=config)
            return self._client

    def _fetch(self, texts: list[str], *, query: bool) -> list[list[float]]:
        if self._cohere:
            vectors: list[list[float]] = []
            for start in range(0, len(texts), COHERE_BATCH):
                body = {
                    "texts": texts[start : start + COHERE_BATCH],
                    "input_type": "search_query" if query else "search_document",
                    "truncate": "END",
                }
                embeddings = self._invoke(body).get("embeddings")
                if isinstance(embeddings, Mapping):  # asked with embedding_types, or a newer model's default
                    embeddings = embeddings.get("float")
                if not isinstance(embeddings, list):
                    raise EmbeddingProviderError("its answer is not a Cohere embeddings response")
                vectors.extend(embeddings)
            return vectors
        titan: dict[str, Any] = {"normalize": True}
        if self.dimensions:
            titan["dimensions"] = self.dimensions
        answers = [self._invoke({"inputText": text, **titan}).get("embedding") for text in texts]
        if not all(isinstance(vector, list) for vector in answers):
            raise EmbeddingProviderError("its answer is not a Titan embeddings response")
        return [vector for vector in answers if isinstance(vector, list)]

    def _invoke(self, body: Mapping[str, Any]) -> dict[str, Any]:
        from botocore.exceptions import BotoCoreError, ClientError

        self.requests += 1
        try:
            response = self._bedrock().invoke_model(
                modelId=self.model, body=json.dumps(body), contentType="application/json", accept="application/json"
            )
            payload = json.loads(response["body"].read())
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "error")
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            raise EmbeddingProviderError(f"{code}" + (f" (HTTP {status})" if status else "")) from None
        except BotoCoreError as exc:
            raise EmbeddingProviderError(f"unreachable ({type(exc).__name__})") from None
        except (ValueError, KeyError, TypeError):
            raise EmbeddingProviderError("its answer is not JSON") from None
        if not isinstance(payload, dict):
            raise EmbeddingProviderError("its answer is not a JSON object")
        return payload


def from_env(environ: Mapping[str, str] | None = None) -> EmbeddingProvider:
    """The provider PMCP_EMBEDDINGS and its companions name (see the module docstring); ConfigError for a value
    that cannot be used."""
    env = os.environ if environ is None else environ
    kind = (env.get(EMBEDDINGS_ENV) or "bundled").strip().lower()
    if kind not in PROVIDERS:
        raise ConfigError(f"{EMBEDDINGS_ENV} must be one of {', '.join(PROVIDERS)}, not {kind!r}")
    if kind == "bundled":
        return Bundled()
    model = (env.get("PMCP_EMBEDDINGS_MODEL") or "").strip()
    dimensions = _positive("PMCP_EMBEDDINGS_DIMENSIONS", env.get("PMCP_EMBEDDINGS_DIMENSIONS"))
    timeout = _positive("PMCP_EMBEDDINGS_TIMEOUT_S", env.get("PMCP_EMBEDDINGS_TIMEOUT_S"), number=float)
    timeout_s = float(timeout) if timeout else TIMEOUT_S
    if kind == "openai":
        return OpenAICompatible(
            url=(env.get("PMCP_EMBEDDINGS_URL") or OPENAI_URL).strip(),
            model=model or OPENAI_MODEL,
            key=env.get("PMCP_EMBEDDINGS_KEY") or None,
            dimensions=int(dimensions) if dimensions else None,
            timeout_s=timeout_s,
        )
    return Bedrock(
        model=model or BEDROCK_MODEL,
        region=(env.get("PMCP_EMBEDDINGS_REGION") or "").strip() or None,
        dimensions=int(dimensions) if dimensions else None,
        timeout_s=timeout_s,
    )


def configured(environ: Mapping[str, str] | None = None) -> bool:
    """Whether PMCP_EMBEDDINGS names a remote provider (one that needs no `semantic` extra)."""
    env = os.environ if environ is None else environ
    return (env.get(EMBEDDINGS_ENV) or "bundled").strip().lower() not in ("", "bundled")


_active: EmbeddingProvider | None = None
_active_lock = threading.Lock()


def active() -> EmbeddingProvider:
    """The process's provider, made from the environment on first use (`use` sets another)."""
    global _active
    with _active_lock:
        if _active is None:
            _active = from_env()
        return _active


def use(provider: EmbeddingProvider | None) -> EmbeddingProvider | None:
    """Make `provider` the process's (None: read the environment again on next use); returns the previous one."""
    global _active
    with _active_lock:
        previous, _active = _active, provider
        return previous


def _positive(name: str, value: str | None, number: Callable[[str], float] = int) -> float | None:
    if value is None or not value.strip():
        return None
    try:
        parsed = number(value.strip())
    except ValueError:
        raise ConfigError(f"{name} must be a positive number, not {value!r}") from None
    if not parsed > 0 or not math.isfinite(parsed):
        raise ConfigError(f"{name} must be a positive number, not {value!r}")
    return parsed


def _safe_url(url: str) -> str:
    """A URL without its user:password and query, for messages (either may hold a key)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"
