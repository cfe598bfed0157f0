"""Embedding providers (progressive_mcp/search/providers.py): an OpenAI-compatible endpoint, played by a small
HTTP server on 127.0.0.1 that records each request, and Amazon Bedrock through botocore's Stubber. What a request
looks like, batching, caching by provider and content, and that a failing provider leaves search lexical."""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from progressive_mcp.catalog import Catalog
from progressive_mcp.errors import ConfigError, EmbeddingProviderError
from progressive_mcp.search import embedder, fusion, providers, vectors
from progressive_mcp.search.index import SearchIndex
from progressive_mcp.search.semantic import everyday_requests
from progressive_mcp.sources import compiled, load_catalog

ROOT = Path(__file__).resolve().parent.parent
LASTFM = ROOT / "tests" / "fixtures" / "lastfm" / "lastfm.yaml"
KEY = "sk-test-embeddings-0123456789abcdef"
WIDTH = 64


def word_vector(text: str, width: int = WIDTH) -> list[float]:
    """A bag of the text's words hashed into `width` buckets, not unit length (the provider normalises)."""
    out = [0.0] * width
    for word in re.findall(r"[a-z]+", text.lower()):
        out[int(hashlib.sha256(word.encode()).hexdigest(), 16) % width] += 1.0
    return out


@dataclass
class FakeEmbeddings:
    """An OpenAI-compatible /v1/embeddings on 127.0.0.1; `status`, `delay_s` and `width` change its answers."""

    port: int = 0
    requests: list[dict[str, Any]] = field(default_factory=list)
    status: int = 200
    delay_s: float = 0.0
    width: int = WIDTH

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


@contextmanager
def fake_embeddings() -> Iterator[FakeEmbeddings]:
    fake = FakeEmbeddings()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            fake.requests.append(
                {"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, **body}
            )
            if fake.delay_s:
                time.sleep(fake.delay_s)
            if fake.status != 200:
                answer = json.dumps({"error": {"message": f"Incorrect API key provided: {KEY}"}}).encode()
            else:
                data = [
                    {"object": "embedding", "index": i, "embedding": word_vector(text, fake.width)}
                    for i, text in enumerate(body["input"])
                ]
                data.reverse()  # some servers do not answer in order: `index` says where each belongs
                answer = json.dumps({"object": "list", "data": data, "model": body["model"]}).encode()
            self.send_response(fake.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    fake.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def fake() -> Iterator[FakeEmbeddings]:
    with fake_embeddings() as server:
        yield server


@pytest.fixture(scope="module")
def lastfm() -> Catalog:
    return load_catalog(LASTFM)


@pytest.fixture
def provider_in_use() -> Iterator[Any]:
    """Sets the process's provider for one test, and puts the previous one back."""
    previous = providers.use(None)
    yield providers.use
    providers.use(previous)


# --- the OpenAI-compatible endpoint ---------------------------------------------------------------------------


def test_a_request_carries_the_model_the_texts_and_the_key(fake: FakeEmbeddings) -> None:
    provider = providers.OpenAICompatible(url=fake.url, model="nomic-embed-text", key=KEY)
    rows = provider.embed(["list the albums of an artist", "send an SMS"])
    assert len(fake.requests) == 1
    request = fake.requests[0]
    assert request["path"] == "/v1/embeddings"
    assert request["model"] == "nomic-embed-text" and request["input"] == [
        "list the albums of an artist",
        "send an SMS",
    ]
    assert request["headers"]["authorization"] == f"Bearer {KEY}"
    assert request["headers"]["content-type"] == "application/json"
    # Rows in the texts' order (the server answered in reverse), unit length.
    assert rows.shape == (2, WIDTH) and rows.dtype == np.float32
    expected = np.array(word_vector("list the albums of an artist"), dtype=np.float32)
    assert rows[0] == pytest.approx(expected / np.linalg.norm(expected), abs=1e-6)
    assert np.linalg.norm(rows, axis=1) == pytest.approx([1.0, 1.0], abs=1e-6)


def test_a_url_ending_in_embeddings_is_used_as_it_is_and_no_key_sends_no_header(fake: FakeEmbeddings) -> None:
    provider = providers.OpenAICompatible(url=f"{fake.url}/embeddings", model="m")
    provider.embed(["one"])
    assert fake.requests[0]["path"] == "/v1/embeddings"
    assert "authorization" not in fake.requests[0]["headers"]


def test_documents_go_in_batches_and_a_repeated_query_is_asked_once(fake: FakeEmbeddings) -> None:
    provider = providers.OpenAICompatible(url=fake.url, model="m", key=KEY)
    texts = [f"tool number {i}" for i in range(150)]
    rows = provider.embed(texts)
    assert [len(r["input"]) for r in fake.requests] == [64, 64, 22]
    assert [text for r in fake.requests for text in r["input"]] == texts
    assert rows.shape == (150, WIDTH)
    first = provider.embed_query("albums by Radiohead")
    again = provider.embed_query("albums by Radiohead")
    assert len(fake.requests) == 4 and again is first and not first.flags.writeable


def test_openai_v3_models_are_asked_for_the_configured_dimensions(fake: FakeEmbeddings) -> None:
    fake.width = 32
    provider = providers.OpenAICompatible(url=fake.url, model="text-embedding-3-small", dimensions=32)
    assert provider.embed(["a"]).shape == (1, 32)
    assert fake.requests[0]["dimensions"] == 32 and fake.requests[0]["encoding_format"] == "float"
    assert provider.model_id == "openai:text-embedding-3-small@32"


@pytest.mark.parametrize(
    ("status", "reason"),
    [(401, "it refused the key (HTTP 401)"), (403, "it refused the key (HTTP 403)"), (500, "HTTP 500")],
)
def test_an_error_status_names_the_reason_and_never_the_key(fake: FakeEmbeddings, status: int, reason: str) -> None:
    fake.status = status
    provider = providers.OpenAICompatible(url=fake.url, model="m", key=KEY)
    with pytest.raises(EmbeddingProviderError) as raised:
        provider.embed(["one"])
    assert str(raised.value) == reason  # the body (which quotes the key) is not read into the message
    assert KEY not in repr(provider)


def test_a_timeout_an_unreachable_server_and_a_wrong_dimension_are_provider_errors(fake: FakeEmbeddings) -> None:
    fake.delay_s = 1.0
    slow = providers.OpenAICompatible(url=fake.url, model="m", timeout_s=0.2)
    with pytest.raises(EmbeddingProviderError, match=r"no answer within 0\.2 s"):
        slow.embed(["one"])
    fake.delay_s = 0.0
    closed = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    port = closed.server_address[1]
    closed.server_close()  # nothing listens there now
    with pytest.raises(EmbeddingProviderError, match=r"unreachable \(ConnectError\)"):
        providers.OpenAICompatible(url=f"http://127.0.0.1:{port}/v1", model="m").embed(["one"])
    configured = providers.OpenAICompatible(url=fake.url, model="m", dimensions=WIDTH * 2)
    with pytest.raises(EmbeddingProviderError, match=rf"vectors of \[{WIDTH}\] dimensions where {WIDTH * 2} were"):
        configured.embed(["one"])
    learned = providers.OpenAICompatible(url=fake.url, model="m")
    learned.embed(["one"])  # the width is learned from the first answer, then held to
    fake.width = WIDTH // 2
    with pytest.raises(EmbeddingProviderError, match="dimensions where 64 were expected"):
        learned.embed(["two"])


def test_configuration_comes_from_the_environment() -> None:
    bundled = providers.from_env({})
    assert isinstance(bundled, providers.Bundled) and bundled.model_id == embedder.MODEL_ID
    openai = providers.from_env(
        {
            "PMCP_EMBEDDINGS": "openai",
            "PMCP_EMBEDDINGS_URL": "http://127.0.0.1:11434/v1",
            "PMCP_EMBEDDINGS_MODEL": "nomic-embed-text",
            "PMCP_EMBEDDINGS_KEY": KEY,
            "PMCP_EMBEDDINGS_TIMEOUT_S": "2.5",
        }
    )
    assert isinstance(openai, providers.OpenAICompatible)
    assert (openai.url, openai.model_id, openai.timeout_s) == (
        "http://127.0.0.1:11434/v1/embeddings",
        "openai:nomic-embed-text",
        2.5,
    )
    assert KEY not in repr(openai)
    bedrock = providers.from_env({"PMCP_EMBEDDINGS": "bedrock", "PMCP_EMBEDDINGS_DIMENSIONS": "512"})
    assert bedrock.model_id == "bedrock:amazon.titan-embed-text-v2:0@512"
    with pytest.raises(ConfigError, match="PMCP_EMBEDDINGS must be one of bundled, openai, bedrock"):
        providers.from_env({"PMCP_EMBEDDINGS": "cohere"})
    with pytest.raises(ConfigError, match="PMCP_EMBEDDINGS_DIMENSIONS must be a positive number"):
        providers.from_env({"PMCP_EMBEDDINGS": "openai", "PMCP_EMBEDDINGS_DIMENSIONS": "-3"})
    with pytest.raises(ConfigError) as raised:
        providers.from_env({"PMCP_EMBEDDINGS": "openai", "PMCP_EMBEDDINGS_URL": f"ftp://user:{KEY}@host/v1"})
    assert KEY not in str(raised.value)


# --- vectors kept by provider, model and content ------------------------------------------------------------


def test_vectors_are_keyed_by_provider_and_an_unchanged_tool_is_embedded_once(
    fake: FakeEmbeddings, lastfm: Catalog, provider_in_use: Any
) -> None:
    tools = lastfm.tools[:10]
    bundled_keys = [vectors.key_of(tool) for tool in tools]
    assert all(key.startswith(embedder.MODEL_ID + ":") for key in bundled_keys)
    provider = providers.OpenAICompatible(url=fake.url, model="nomic-embed-text")
    provider_in_use(provider)
    keys = [vectors.key_of(tool) for tool in tools]
    assert all(key.startswith("openai:nomic-embed-text:") for key in keys)
    assert [k.rsplit(":", 1)[1] for k in keys] == [k.rsplit(":", 1)[1] for k in bundled_keys]  # same documents
    cache = vectors.VectorCache()
    rows, embedded = vectors.rows_for(tools, cache)
    assert embedded == 10 and len(rows) == 10 * WIDTH and len(fake.requests) == 1
    matrix = vectors.ToolVectors(tools, cache=cache).matrix()
    assert matrix.shape == (10, WIDTH) and len(fake.requests) == 1  # from the cache
    assert vectors.rows_for(lastfm.tools[:12], cache)[1] == 2  # the two new tools only
    assert fake.requests[-1]["input"] == [vectors.document(t) for t in lastfm.tools[10:12]]
    # Another model of the same provider is another space: nothing of the first is used.
    provider_in_use(providers.OpenAICompatible(url=fake.url, model="mxbai-embed-large"))
    assert vectors.rows_for(tools, cache)[1] == 10


def test_a_compiled_catalog_keeps_the_providers_vectors_and_loading_it_embeds_nothing(
    fake: FakeEmbeddings, lastfm: Catalog, provider_in_use: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider_in_use(providers.OpenAICompatible(url=fake.url, model="nomic-embed-text"))
    data = compiled.to_data(lastfm, vectors=True)
    stored = data["vectors"]
    assert stored["model"] == "openai:nomic-embed-text" and stored["dimension"] == WIDTH
    assert len(vectors.decode(stored["int8"], WIDTH)) == len(lastfm.tools) * WIDTH
    # Read back in a process whose cache is empty: the rows are offered, and a search embeds the query alone.
    fresh = vectors.VectorCache()
    monkeypatch.setattr(vectors.VectorCache, "_shared", fresh)
    provider_in_use(providers.OpenAICompatible(url=fake.url, model="nomic-embed-text"))
    fake.requests.clear()
    loaded = compiled.from_data(json.loads(json.dumps(data)))
    assert vectors.rows_for(loaded.tools)[1] == 0 and fake.requests == []
    # The everyday requests' vectors came with them: the first search asks the provider for its query alone.
    assert stored["everyday"]["texts"] == embedder.texts_digest(everyday_requests())
    monkeypatch.setattr(fusion, "_EVERYDAY", {})
    index = SearchIndex(loaded.tools, loaded.vocabulary, categories=loaded.categories, semantic=True)
    assert index.rank("similar artists to Radiohead").fused
    assert [r["input"] for r in fake.requests] == [["similar artists to Radiohead"]]
    # Another provider does not take them.
    provider_in_use(providers.OpenAICompatible(url=fake.url, model="other"))
    monkeypatch.setattr(vectors.VectorCache, "_shared", vectors.VectorCache())
    compiled.from_data(json.loads(json.dumps(data)))
    assert vectors.rows_for(loaded.tools)[1] == len(lastfm.tools)


# --- search with a provider, and without it -----------------------------------------------------------------


def test_search_fuses_the_providers_ranking_one_request_per_new_query(
    fake: FakeEmbeddings, lastfm: Catalog, provider_in_use: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vectors.VectorCache, "_shared", vectors.VectorCache())
    provider = providers.OpenAICompatible(url=fake.url, model="nomic-embed-text", key=KEY)
    provider_in_use(provider)
    index = SearchIndex(lastfm.tools, lastfm.vocabulary, categories=lastfm.categories, semantic=True)
    ranking = index.rank("similar artists to Radiohead")
    assert ranking.fused
    documents = [text for r in fake.requests for text in r["input"]]
    assert documents[: len(lastfm.tools)] == [vectors.document(t) for t in lastfm.tools]
    assert documents[-1] == "similar artists to Radiohead"
    asked = len(fake.requests)
    assert index.rank("similar artists to Radiohead").fused and len(fake.requests) == asked  # cached
    index.rank("top albums of an artist")
    assert len(fake.requests) == asked + 1 and fake.requests[-1]["input"] == ["top albums of an artist"]


def test_a_failing_provider_leaves_search_lexical_with_one_warning(
    fake: FakeEmbeddings, lastfm: Catalog, provider_in_use: Any, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    monkeypatch.setattr(vectors.VectorCache, "_shared", vectors.VectorCache())
    fake.status = 401
    provider_in_use(providers.OpenAICompatible(url=fake.url, model="nomic-embed-text", key=KEY))
    lexical = SearchIndex(lastfm.tools, lastfm.vocabulary, categories=lastfm.categories, semantic=True, fusion=False)
    index = SearchIndex(lastfm.tools, lastfm.vocabulary, categories=lastfm.categories, semantic=True)
    with caplog.at_level(logging.INFO):
        for query in ("similar artists to Radiohead", "top albums of an artist", "similar artists to Radiohead"):
            hits = [(h.name, h.score) for h in index.search(query, limit=5)]
            assert hits == [(h.name, h.score) for h in lexical.search(query, limit=5)]
            assert not index.rank(query).fused
    assert len(fake.requests) == 1  # then paused for RETRY_AFTER_S: no request per search
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert lines == [
        "embedding provider openai (model nomic-embed-text) failed: it refused the key (HTTP 401); searches use the "
        "lexical engine alone, retried after 60 s"
    ]
    assert all(KEY not in r.getMessage() and KEY not in str(r.args) for r in caplog.records)


def test_a_provider_that_answers_again_is_used_again(
    fake: FakeEmbeddings, lastfm: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.status = 500
    provider = providers.OpenAICompatible(url=fake.url, model="m")
    tools = lastfm.tools
    signal = fusion.SemanticFusion(
        tools, vectors=vectors.ToolVectors(tools, cache=vectors.VectorCache()), embed_query=provider.embed_query
    )
    monkeypatch.setattr(vectors.VectorCache, "_shared", vectors.VectorCache())
    monkeypatch.setattr(providers, "_active", provider)
    assert signal.fuse("similar artists", [(0, 1.0)]) is None
    fake.status = 200
    monkeypatch.setattr(provider, "_paused_until", 0.0)  # the pause has passed
    fused = signal.fuse("similar artists", [(0, 1.0)])
    assert fused is not None and len(fused) > 1


# --- Amazon Bedrock, through botocore's Stubber ----------------------------------------------------------------


def bedrock_client() -> Any:
    import boto3

    return boto3.client(
        "bedrock-runtime", region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
    )


def answer(payload: dict[str, Any]) -> dict[str, Any]:
    """An InvokeModel response whose body is `payload` as JSON."""
    from botocore.response import StreamingBody

    raw = json.dumps(payload).encode()
    return {"body": StreamingBody(io.BytesIO(raw), len(raw)), "contentType": "application/json"}


def test_bedrock_titan_is_asked_one_text_at_a_time() -> None:
    from botocore.stub import Stubber

    client = bedrock_client()
    provider = providers.Bedrock(model="amazon.titan-embed-text-v2:0", dimensions=256, client=client)
    with Stubber(client) as stub:
        for text in ("list the albums of an artist", "send an SMS"):
            stub.add_response(
                "invoke_model",
                answer({"embedding": word_vector(text, 256), "inputTextTokenCount": 6}),
                {
                    "modelId": "amazon.titan-embed-text-v2:0",
                    "body": json.dumps({"inputText": text, "normalize": True, "dimensions": 256}),
                    "contentType": "application/json",
                    "accept": "application/json",
                },
            )
        rows = provider.embed(["list the albums of an artist", "send an SMS"])
        stub.assert_no_pending_responses()
    assert rows.shape == (2, 256) and np.linalg.norm(rows, axis=1) == pytest.approx([1.0, 1.0], abs=1e-6)
    assert provider.model_id == "bedrock:amazon.titan-embed-text-v2:0@256"


def test_bedrock_cohere_is_asked_in_batches_with_its_input_type() -> None:
    from botocore.stub import Stubber

    client = bedrock_client()
    provider = providers.Bedrock(model="cohere.embed-english-v3", client=client)
    texts = [f"tool {i}" for i in range(100)]
    with Stubber(client) as stub:
        for chunk in (texts[:96], texts[96:]):
            stub.add_response(
                "invoke_model",
                answer({"id": "x", "embeddings": [word_vector(t) for t in chunk], "texts": chunk}),
                {
                    "modelId": "cohere.embed-english-v3",
                    "body": json.dumps({"texts": chunk, "input_type": "search_document", "truncate": "END"}),
                    "contentType": "application/json",
                    "accept": "application/json",
                },
            )
        # A newer answer's shape: embeddings by type.
        stub.add_response(
            "invoke_model",
            answer({"embeddings": {"float": [word_vector("albums")]}}),
            {
                "modelId": "cohere.embed-english-v3",
                "body": json.dumps({"texts": ["albums"], "input_type": "search_query", "truncate": "END"}),
                "contentType": "application/json",
                "accept": "application/json",
            },
        )
        assert provider.embed(texts).shape == (100, WIDTH)
        assert provider.embed_query("albums").shape == (WIDTH,)
        stub.assert_no_pending_responses()


def test_a_bedrock_error_is_named_by_its_code() -> None:
    from botocore.stub import Stubber

    client = bedrock_client()
    provider = providers.Bedrock(client=client)
    with Stubber(client) as stub:
        stub.add_client_error("invoke_model", "AccessDeniedException", "not allowed", http_status_code=403)
        with pytest.raises(EmbeddingProviderError, match=r"^AccessDeniedException \(HTTP 403\)$"):
            provider.embed(["one"])
    with Stubber(client) as stub:
        stub.add_response("invoke_model", answer({"message": "no embedding here"}))
        provider._paused_until = 0.0
        with pytest.raises(EmbeddingProviderError, match="not a Titan embeddings response"):
            provider.embed(["one"])


# --- the real server, configured by the environment -------------------------------------------------------------

SEARCH_SCRIPT = """
import json, sys
from progressive_mcp.search.index import SearchIndex
from progressive_mcp.sources import load_catalog
catalog = load_catalog(sys.argv[1])
index = SearchIndex(catalog.tools, catalog.vocabulary, categories=catalog.categories)
ranking = index.rank(sys.argv[2])
print(json.dumps({"fused": ranking.fused, "hits": [catalog.tools[i].name for i, _ in ranking.scores[:5]]}))
"""


@pytest.mark.slow  # starts processes (tests/conftest.py)
def test_the_environment_chooses_the_provider_and_a_refused_key_costs_one_log_line(fake: FakeEmbeddings) -> None:
    env = {
        **os.environ,
        "PMCP_EMBEDDINGS": "openai",
        "PMCP_EMBEDDINGS_URL": fake.url,
        "PMCP_EMBEDDINGS_MODEL": "nomic-embed-text",
        "PMCP_EMBEDDINGS_KEY": KEY,
    }
    query = "similar artists to Radiohead"
    done = subprocess.run(
        [sys.executable, "-c", SEARCH_SCRIPT, str(LASTFM), query], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["fused"] is True
    assert fake.requests[-1]["input"] == [query] and fake.requests[-1]["headers"]["authorization"] == f"Bearer {KEY}"
    fake.status = 401
    failed = subprocess.run(
        [sys.executable, "-c", SEARCH_SCRIPT, str(LASTFM), query], capture_output=True, text=True, env=env, timeout=120
    )
    assert failed.returncode == 0, failed.stderr
    answer = json.loads(failed.stdout)
    assert answer["fused"] is False and answer["hits"]
    warnings = [line for line in failed.stderr.splitlines() if "embedding provider" in line]
    assert len(warnings) == 1 and "openai" in warnings[0] and "HTTP 401" in warnings[0]
    assert KEY not in failed.stderr


# --- the gateway's sync --------------------------------------------------------------------------------------


def test_a_gateway_sync_stores_the_providers_vectors_once(
    fake: FakeEmbeddings, provider_in_use: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from progressive_mcp.gateway.config import ServerConfig
    from progressive_mcp.gateway.store import SqliteToolStore
    from progressive_mcp.gateway.sync import sync_server
    from progressive_mcp.gateway.tools import catalog_tool

    monkeypatch.setenv("PMCP_SEMANTIC", "on")
    provider_in_use(providers.OpenAICompatible(url=fake.url, model="nomic-embed-text"))
    store = SqliteToolStore(tmp_path / "index.sqlite3")
    server = ServerConfig(name="notes", transport="http", url="http://127.0.0.1:9/mcp", written="http://x/mcp")
    listing = [
        {"name": "add_note", "description": "Save a note for later.", "inputSchema": {"type": "object"}},
        {"name": "find_notes", "description": "Search the saved notes.", "inputSchema": {"type": "object"}},
    ]
    assert sync_server(server, store, lambda name: [dict(t) for t in listing]).error is None
    everyday = everyday_requests()
    # The two tools, then the everyday requests (as queries, in requests of 64), which set the closeness scale.
    assert [len(r["input"]) for r in fake.requests] == [2, 64, len(everyday) - 64]
    assert sync_server(server, store, lambda name: [dict(t) for t in listing]).error is None
    assert len(fake.requests) == 3  # unchanged tools: their stored vectors are kept; the everyday ones too
    tools = [catalog_tool(server, item) for item in store.tools("notes")]
    rows = store.vectors([vectors.key_of(tool) for tool in tools])
    assert len(rows) == 2 and all(k.startswith("openai:nomic-embed-text:") for k in rows)
    assert all(len(row) == WIDTH for row in rows.values())
    assert len(store.vectors([vectors.query_key(text) for text in everyday])) == len(everyday)
    # A process that serves the store (a cold start) asks the provider for its first search's query alone.
    monkeypatch.setattr(vectors.VectorCache, "_shared", vectors.VectorCache())
    monkeypatch.setattr(fusion, "_EVERYDAY", {})
    vectors.VectorCache.shared().offer_lookup(tools, store.vectors)
    fake.requests.clear()
    index = SearchIndex(tools, semantic=True)
    index.rank("jot down a note about the meeting")
    assert [r["input"] for r in fake.requests] == [["jot down a note about the meeting"]]


def test_the_providers_bench_counts_one_request_per_new_query(monkeypatch: pytest.MonkeyPatch) -> None:
    from bench_module import load_bench

    bench = load_bench("providers")
    monkeypatch.setattr(vectors.VectorCache, "_shared", vectors.VectorCache())
    previous = providers.use(None)
    try:
        run = bench.measure(0.0, 4)
    finally:
        providers.use(previous)
    # 57 documents in one request of 64, the 120 everyday requests in two (once per process and model: the scale of
    # `fusion.SemanticFusion.closeness`), then the query
    assert run["first_search_requests"] == 4
    assert 0 < run["distinct_query_requests"] <= run["distinct_queries"] == 4
    assert run["repeated_query_requests"] == 0


def test_the_key_is_masked_in_any_log_record_while_the_provider_lives(caplog: pytest.LogCaptureFixture) -> None:
    provider = providers.OpenAICompatible(url="http://127.0.0.1:9/v1", model="m", key=KEY)
    with caplog.at_level(logging.INFO, logger="some.library"):
        logging.getLogger("some.library").info("sending Authorization: Bearer %s", KEY)
    assert KEY not in caplog.text and "Bearer" in caplog.text
    assert provider.model_id == "openai:m"
