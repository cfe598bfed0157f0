"""The query graph: the bundled model's matrix products on its int8 weights (progressive_mcp.search.query_graph),
what the embedder runs a query through, against the float graph that embeds tool documents."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from progressive_mcp.search import embedder, vectors
from progressive_mcp.search.query_graph import int8_weights
from progressive_mcp.sources import load_catalog

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

ROOT = Path(__file__).resolve().parent.parent
LASTFM = ROOT / "tests" / "fixtures" / "lastfm" / "lastfm.yaml"
STRIPE = ROOT.parent / "shared" / "openapi" / "stripe" / "spec3.json"
# The rewrite of the pinned model (embedder.MODEL_SHA256) is byte for byte the same each time: a change to it is
# seen here, and the vectors of the agreement test below belong to exactly this graph.
REWRITTEN_SHA256 = "de9c648e091aa90aaa724908b4a5be35c37f1dd73aba6ee68522722a30fe4881"


@pytest.fixture(scope="module")
def model_bytes(minilm: embedder.Embedder) -> bytes:
    data = embedder.MODEL.read_bytes()
    assert hashlib.sha256(data).hexdigest() == embedder.MODEL_SHA256
    return data


def test_every_weight_of_the_pinned_model_is_read_as_int8(model_bytes: bytes) -> None:
    rewritten, count = int8_weights(model_bytes)
    assert count == 38  # 6 layers x (query, key, value, attention output, feed-forward in and out); 2 embedding tables
    assert hashlib.sha256(rewritten).hexdigest() == REWRITTEN_SHA256
    again, left = int8_weights(rewritten)
    assert left == 0 and again == rewritten  # no float copy of an int8 tensor is left to rewrite
    # Nothing but nodes (and five scalars) changed: the int8 tensors are the file's own (~28 KB of node records).
    assert 0 < len(rewritten) - len(model_bytes) < 40_000
    tables_only, count = int8_weights(model_bytes, products=False)
    assert count == 2 and int8_weights(tables_only, products=False)[1] == 0


def test_a_graph_without_the_pattern_comes_back_unchanged(model_bytes: bytes) -> None:
    assert int8_weights(b"") == (b"", 0)  # an empty model: no opset, nothing to rewrite
    with pytest.raises(ValueError, match=r"not a whole ONNX protobuf|past the end"):
        int8_weights(model_bytes[: len(model_bytes) // 2])


def test_a_query_runs_through_the_int8_graph(minilm: embedder.Embedder) -> None:
    import numpy as np

    query = "a query for the int8 graph (test_query_graph)"
    vector = embedder.embed_query(query)
    float_vector = minilm.embed([query])[0]
    assert not np.array_equal(vector, float_vector)  # another graph computed it
    assert minilm.query_int8_nodes == 38
    assert float(vector @ float_vector) > 0.98
    assert np.isclose(np.linalg.norm(vector), 1.0, atol=1e-5)


def test_tool_documents_get_the_float_graphs_vectors_exactly(minilm: embedder.Embedder, model_bytes: bytes) -> None:
    import numpy as np

    # Stored vectors (compiled catalogs, the gateway's store) were made by the file's graph as it is: the document
    # graph, which only gathers the embedding tables' rows in int8, must give the same vectors bit for bit.
    texts = [vectors.document(tool) for tool in load_catalog(str(LASTFM)).tools]
    as_published = minilm._session(model_bytes)
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    expected = np.zeros((len(texts), embedder.DIMENSION), dtype=np.float32)
    for start in range(0, len(order), embedder.BATCH):
        chunk = order[start : start + embedder.BATCH]
        expected[chunk] = minilm._batch(as_published, [texts[i] for i in chunk])
    assert np.array_equal(minilm.embed(texts), expected)


def tuning_queries() -> list[str]:
    """Every other query of the tuning splits (Last.fm, Spotify's and Stripe's dev), never held-out ones."""
    queries = []
    for name in ("lastfm", "spotify", "stripe"):
        for line in (ROOT / "eval" / f"{name}.jsonl").read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            if record.get("split") == "dev":
                queries.append(record["query"])
    return queries[::2]


def by_both_graphs(minilm: embedder.Embedder, texts: list[str]) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
    """`texts` embedded by the float graph (as tool documents are) and one by one by the int8 one (as queries are)."""
    import numpy as np

    query_graph = minilm._graph(products=True)
    return minilm.embed(texts), np.stack([minilm._batch(query_graph, [text])[0] for text in texts])


def assert_agree(by_float: NDArray[np.float32], by_int8: NDArray[np.float32]) -> None:
    import numpy as np

    cosines = np.einsum("ij,ij->i", by_float, by_int8)
    assert cosines.mean() >= 0.995 and cosines.min() >= 0.97, (cosines.mean(), cosines.min())


def test_query_vectors_agree_with_the_float_graph_on_real_tool_texts(minilm: embedder.Embedder) -> None:
    import numpy as np

    tools = by_both_graphs(minilm, [vectors.document(tool) for tool in load_catalog(str(LASTFM)).tools])
    queries = by_both_graphs(minilm, tuning_queries())
    assert_agree(*tools)
    assert_agree(*queries)
    # What a search does: a query from the int8 graph against stored tool vectors from the float graph. The
    # semantic ranking of Last.fm's tools barely moves.
    stored = tools[0]
    by_float, by_int8 = queries[0] @ stored.T, queries[1] @ stored.T
    first = (by_float.argmax(axis=1) == by_int8.argmax(axis=1)).mean()
    top5 = np.mean(
        [len(set(np.argsort(-f)[:5]) & set(np.argsort(-q)[:5])) / 5 for f, q in zip(by_float, by_int8, strict=True)]
    )
    assert first >= 0.9 and top5 >= 0.94, (first, top5)  # measured .93 / .96 over all 347 tuning queries


@pytest.mark.slow  # a scale check: every tool document of a large real catalog (Stripe's 417 load in ~12 s)
@pytest.mark.skipif(not STRIPE.is_file(), reason="../shared/openapi is absent")
def test_query_vectors_agree_on_every_stripe_tool_document(minilm: embedder.Embedder) -> None:
    assert_agree(*by_both_graphs(minilm, [vectors.document(tool) for tool in load_catalog(str(STRIPE)).tools]))
