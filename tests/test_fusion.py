"""The MiniLM signal in TOOL_SEARCH: the bundled embedder, its stored vectors, and their fusion with the lexical
ranking (progressive_mcp.search.embedder, .vectors, .fusion)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import subprocess
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from factories import make_tool
from real_documents import REAL

from progressive_mcp.catalog import Catalog, CatalogTool, Operation
from progressive_mcp.cli import main
from progressive_mcp.search import dense, embedder, fusion, vectors
from progressive_mcp.search.index import INTENT_PRIOR, ITEM_PRIOR, SURE_CONFIDENCE, SearchIndex
from progressive_mcp.search.semantic import everyday_requests
from progressive_mcp.sources import load_catalog

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

LASTFM = Path(__file__).parent / "fixtures" / "lastfm" / "lastfm.yaml"
needs_minilm = pytest.mark.skipif(not embedder.available(), reason="the semantic extra is not installed")


@pytest.fixture(scope="module")
def lastfm() -> Catalog:
    return load_catalog(str(LASTFM))


# --- the embedder ------------------------------------------------------------------------------------------------


def test_the_package_holds_the_model_it_was_chosen_for(minilm: embedder.Embedder) -> None:
    assert hashlib.sha256(embedder.MODEL.read_bytes()).hexdigest() == embedder.MODEL_SHA256
    assert embedder.MODEL.stat().st_size > 20_000_000  # the weights themselves, not a pointer to them


def test_vectors_are_unit_length_384_wide_and_deterministic(minilm: embedder.Embedder) -> None:
    import numpy as np

    texts = ["list the albums of an artist", "send an SMS", ""]
    first, again = minilm.embed(texts), minilm.embed(list(reversed(texts)))[::-1]
    assert first.shape == (3, embedder.DIMENSION) and first.dtype == np.float32
    assert np.allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-5)
    assert np.allclose(first, again, atol=1e-5)  # batch order and padding change nothing
    assert float(first[0] @ minilm.embed(["an artist's albums"])[0]) > float(first[0] @ first[1])


def test_a_repeated_query_is_embedded_once(minilm: embedder.Embedder) -> None:
    query = "a query asked twice (test_fusion)"
    before = minilm.texts_embedded
    first = embedder.embed_query(query)
    assert embedder.embed_query(query) is first
    assert minilm.texts_embedded == before + 1
    assert not first.flags.writeable


def test_int8_rows_rank_as_the_float_ones(minilm: embedder.Embedder, lastfm: Catalog) -> None:
    import numpy as np

    floats = minilm.embed([vectors.document(tool) for tool in lastfm.tools])
    stored = vectors.dequantize(vectors.quantize(floats))
    assert stored.shape == floats.shape
    assert np.allclose(np.linalg.norm(stored, axis=1), 1.0, atol=1e-5)
    queries = minilm.embed(["similar artists", "top tracks of a country", "love a song", "album details"])
    for query in queries:
        assert list(np.argsort(-(floats @ query))[:5]) == list(np.argsort(-(stored @ query))[:5])


# --- fusion ---------------------------------------------------------------------------------------------------


class LetterModel:
    """A stand-in model: a text's vector counts its letters (a-z), so similar spellings are close. Counts calls."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        import numpy as np

        self.texts.extend(texts)
        out = np.zeros((len(texts), embedder.DIMENSION), dtype=np.float32)
        for row, text in enumerate(texts):
            for char in text.lower():
                if "a" <= char <= "z":
                    out[row, ord(char) - ord("a")] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return np.divide(out, norms, out=np.zeros_like(out), where=norms > 0)

    def query(self, text: str) -> NDArray[np.float32]:
        return self.embed([text])[0]


def letter_fusion(tools: Sequence[CatalogTool]) -> tuple[LetterModel, fusion.SemanticFusion]:
    """The fusion over `tools` with the letter model standing in for MiniLM (tool documents and queries), and the
    model, whose `texts` list what was embedded."""
    model = LetterModel()
    signal = fusion.SemanticFusion(
        tools,
        vectors=vectors.ToolVectors(tools, cache=vectors.VectorCache(), embed=model.embed),
        embed_query=model.query,
    )
    return model, signal


def test_fusion_merges_the_two_rankings_by_reciprocal_rank(lastfm: Catalog) -> None:
    model, signal = letter_fusion(lastfm.tools)
    tools = lastfm.tools
    semantic = signal.ranking("zzz", fusion.DEPTH)
    assert semantic is not None and len(semantic) == fusion.DEPTH
    lexical = [(i, 1.0 - i / 100) for i in range(40, 40 + fusion.DEPTH)]  # tools the semantic ranking has not
    fused = signal.fuse("zzz", lexical)
    assert fused is not None
    # Each tool scores 1/(K + its lexical rank) + WEIGHT/(K + its semantic rank), shown as a share of the best possible
    # score (first in both rankings).
    best = (1 + fusion.WEIGHT) / (fusion.K + 1)
    expected: dict[int, float] = {}
    for rank, (doc, _) in enumerate(lexical, 1):
        expected[doc] = 1 / (fusion.K + rank)
    for rank, doc in enumerate(semantic, 1):
        expected[doc] = expected.get(doc, 0.0) + fusion.WEIGHT / (fusion.K + rank)
    head = fused[: len(expected)]
    assert [doc for doc, _ in head] == sorted(expected, key=lambda doc: -expected[doc])
    assert [share for _, share in head] == pytest.approx([expected[doc] / best for doc, _ in head])
    assert fused[0] == (40, pytest.approx(1 / (fusion.K + 1) / best))
    left_out = signal.ranking("zzz", fusion.DEPTH, leave_out={semantic[0]})
    assert left_out is not None and semantic[0] not in left_out and left_out[0] == semantic[1]
    # The tool documents were embedded once, at the first ranking, then the query, once: its cosines are kept while
    # the same text is asked about again (`closeness`, then `ranking`).
    assert len(model.texts) == len(tools) + 1
    signal.ranking("yyy", fusion.DEPTH)
    assert model.texts[-1] == "yyy" and len(model.texts) == len(tools) + 2


def test_minilm_weighs_more_where_the_words_answer_less(lastfm: Catalog) -> None:
    assert fusion.weight_for(0.0) == fusion.MAX_WEIGHT and fusion.weight_for(1.0) == fusion.MIN_WEIGHT
    assert fusion.weight_for(-1.0) == fusion.MAX_WEIGHT and fusion.weight_for(3.0) == fusion.MIN_WEIGHT
    assert fusion.weight_for(0.5) == pytest.approx((fusion.MAX_WEIGHT + fusion.MIN_WEIGHT) / 2)
    _, signal = letter_fusion(lastfm.tools)
    semantic = signal.ranking("zzz", fusion.DEPTH)
    assert semantic is not None
    lexical = [(doc, 1.0) for doc in range(len(lastfm.tools)) if doc != semantic[0]][: fusion.DEPTH]
    # MiniLM's first tool, which the lexical ranking lacks, against the lexical first (which MiniLM ranks low or
    # not at all): the words lead where they answer the query, MiniLM where they do not.
    sure = signal.fuse("zzz", lexical, lexical_share=1.0)
    unsure = signal.fuse("zzz", lexical, lexical_share=0.0)
    assert sure is not None and unsure is not None
    assert sure[0][0] == lexical[0][0] != semantic[0]
    assert [doc for doc, _ in unsure].index(semantic[0]) < [doc for doc, _ in sure].index(semantic[0])
    assert max(share for _, share in sure) <= 1.0 and max(share for _, share in unsure) <= 1.0


def test_minilm_reads_the_query_without_its_ids(lastfm: Catalog) -> None:
    model, signal = letter_fusion(lastfm.tools)
    signal.fuse("refund $25 of ch_3Kx9ZbL2eZvKYlo21 for order 55123 'spring'", [(0, 1.0)])
    assert model.texts[-1] == "refund $25 of for order 'spring'"


def test_near_reads_the_query_as_the_ranking_does(lastfm: Catalog) -> None:
    """`near` judges the text the fused ranking embeds (no ids), so a query with ids is embedded once, not twice."""
    model, signal = letter_fusion(lastfm.tools)
    query = "refund ch_3Kx9ZbL2eZvKYlo21 for order 55123"
    signal.near(query)
    judged = model.texts[-1]
    signal.fuse(query, [(0, 1.0)])
    assert judged == model.texts[-1] == "refund for order"
    signal.fuse("cus_Kp1q2r3s", [(0, 1.0)])  # nothing but an id: the id is all there is to read
    assert model.texts[-1] == "cus_Kp1q2r3s"


def test_tools_below_the_merge_follow_it_for_the_tail_without_moving_it(lastfm: Catalog) -> None:
    _, signal = letter_fusion(lastfm.tools)
    semantic = signal.ranking("zzz", fusion.TAIL_DEPTH)
    assert semantic is not None
    # The two rankings agree on their first DEPTH tools: the merge alone has DEPTH tools, too few for a 30-line tail.
    lexical = [(doc, 1.0 - rank / 100) for rank, doc in enumerate(semantic)]
    fused = signal.fuse("zzz", lexical)
    assert fused is not None
    docs = [doc for doc, _ in fused]
    assert docs[: fusion.DEPTH] == semantic[: fusion.DEPTH]  # the merged order, unchanged
    assert docs[fusion.DEPTH :] == semantic[fusion.DEPTH :]  # then the deeper tools, in their fused order
    assert len(docs) == len(set(docs)) == fusion.TAIL_DEPTH
    last_merged = fused[fusion.DEPTH - 1][1]
    # Below every merged tool even after the mood's penalty (SearchIndex._by_intent) lowers one ...
    assert all(share <= fusion.TAIL_SHARE * last_merged for _, share in fused[fusion.DEPTH :])
    assert fusion.TAIL_SHARE < 1 / (1 + INTENT_PRIOR)
    # ... and the collection rule's (SearchIndex._by_need), which can fall on the same tool.
    assert fusion.TAIL_SHARE < 1 / ((1 + INTENT_PRIOR) * (1 + ITEM_PRIOR))


def test_a_tool_the_words_miss_but_the_meaning_finds_moves_up(minilm: embedder.Embedder, lastfm: Catalog) -> None:
    # Last.fm, a tuning catalog: the lexical engine (with WordLlama) puts track.scrobble first and leaves
    # track.getInfo out of its answer; MiniLM reads "how long is this song" as the track's details.
    index = SearchIndex(lastfm.tools, lastfm.vocabulary, categories=lastfm.categories, semantic=True)
    names = [hit.name for hit in index.search("how long is this song and which record is it from", limit=5)]
    assert "track.getInfo" in names[:2]
    assert index.rank("how long is this song and which record is it from").fused


def test_a_curated_catalog_is_not_fused() -> None:
    catalog = load_catalog()  # Alpha Vantage: its vocabulary decides what an unknown word means
    index = SearchIndex(catalog.tools, catalog.vocabulary, categories=catalog.categories, semantic=True)
    assert not index.rank("stock price of apple").fused
    assert [hit.name for hit in index.search("stock price of apple", limit=1)] == ["GLOBAL_QUOTE"]


def test_a_model_that_cannot_load_leaves_the_lexical_ranking(lastfm: Catalog, caplog: pytest.LogCaptureFixture) -> None:
    def broken(texts: Sequence[str]) -> NDArray[np.float32]:
        raise FileNotFoundError("/somewhere/model.onnx")

    signal = fusion.SemanticFusion(
        lastfm.tools, vectors=vectors.ToolVectors(lastfm.tools, cache=vectors.VectorCache(), embed=broken)
    )
    with caplog.at_level(logging.WARNING, logger="progressive_mcp.search.fusion"):
        assert signal.fuse("similar artists", [(0, 1.0)]) is None
        assert signal.fuse("top albums", [(0, 1.0)]) is None
    warnings = [r.getMessage() for r in caplog.records if "semantic ranking is off" in r.getMessage()]
    assert warnings == ["the semantic ranking is off: its model could not be used (FileNotFoundError)"]


def test_a_model_file_onnxruntime_refuses_leaves_the_lexical_ranking(
    lastfm: Catalog, minilm: embedder.Embedder, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A model file cut short (a broken install, a full disk): onnxruntime refuses it with exceptions of its own
    (InvalidArgument, Fail, InvalidProtobuf: none an OSError or RuntimeError), and a search must still answer,
    lexically, and say why once."""
    damaged = tmp_path / "model.onnx"
    damaged.write_bytes(b"\x08\x07")  # a ModelProto with its IR version and no graph
    model = embedder.Embedder()
    model._path = damaged
    signal = fusion.SemanticFusion(
        lastfm.tools,
        vectors=vectors.ToolVectors(lastfm.tools, cache=vectors.VectorCache(), embed=model.embed),
        embed_query=model.embed_query,
    )
    with caplog.at_level(logging.WARNING, logger="progressive_mcp.search.fusion"):
        assert signal.near("weather in paris") is False  # the first to need the model, here
        assert signal.fuse("similar artists", [(0, 1.0)]) is None
        assert signal.ranking("top albums", 5) is None
    warnings = [r.getMessage() for r in caplog.records if "semantic ranking is off" in r.getMessage()]
    assert warnings == ["the semantic ranking is off: its model could not be used (RuntimeError)"]


# --- vectors computed once ------------------------------------------------------------------------------------

COUNT_EMBEDDED = """
import json, sys
from progressive_mcp.search import embedder
from progressive_mcp.search.index import SearchIndex
from progressive_mcp.sources import load_catalog

catalog = load_catalog(sys.argv[1])
index = SearchIndex(catalog.tools, catalog.vocabulary, categories=catalog.categories, semantic=True)
loaded = "onnxruntime" in sys.modules
hits = [hit.name for hit in index.search(sys.argv[2], limit=5)]
print(json.dumps({"loaded_before_search": loaded, "embedded": embedder.Embedder.shared().texts_embedded,
                  "hits": hits, "graphs": sorted(embedder.Embedder.shared()._graphs)}))
"""


def count_embedded(source: str | Path, query: str) -> dict[str, Any]:
    """What one fresh process embeds to load a catalog and answer one search."""
    done = subprocess.run(
        [sys.executable, "-c", COUNT_EMBEDDED, str(source), query],
        capture_output=True, text=True, timeout=300, env={**os.environ, "PMCP_SEMANTIC": "on"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.mark.slow  # starts a process (tests/conftest.py)
def test_a_compiled_catalog_carries_its_vectors_and_a_search_embeds_only_the_query(
    minilm: embedder.Embedder, lastfm: Catalog, tmp_path: Path
) -> None:
    compiled = tmp_path / "lastfm.json"
    assert main(["spec", "compile", "--catalog", str(LASTFM), "-o", str(compiled)]) == 0
    data = json.loads(compiled.read_text(encoding="utf-8"))
    stored = data["vectors"]
    assert stored["model"] == embedder.MODEL_ID and stored["document"] == vectors.DOCUMENT_VARIANT
    rows = vectors.decode(stored["int8"])
    assert len(rows) == len(lastfm.tools) * embedder.DIMENSION  # one int8 per dimension, per tool
    assert len(stored["int8"]) <= 4 * (len(rows) + 2) // 3  # base64: 512 characters a tool

    query = "how long is this song and which record is it from"
    from_file = count_embedded(compiled, query)
    assert from_file["embedded"] == 1  # the query: every tool's vector came with the catalog
    assert not from_file["loaded_before_search"]
    from_yaml = count_embedded(LASTFM, query)
    assert from_yaml["embedded"] == len(lastfm.tools) + 1  # embedded lazily, at the first search, then the query
    assert not from_yaml["loaded_before_search"]
    assert from_file["hits"] == from_yaml["hits"] and "track.getInfo" in from_file["hits"][:2]


@pytest.mark.slow  # starts a process (tests/conftest.py)
def test_a_process_that_only_answers_queries_never_loads_the_document_graph(
    minilm: embedder.Embedder, tmp_path: Path
) -> None:
    """With the tools' vectors stored, an off-topic query (judged by `near` against everyday requests, which stand
    for queries and are read as queries) runs on the int8 query graph alone: the float graph for tool documents,
    ~90 MB of weights, is never made."""
    compiled = tmp_path / "lastfm.json"
    assert main(["spec", "compile", "--catalog", str(LASTFM), "-o", str(compiled)]) == 0
    off_topic = count_embedded(compiled, "how long do I boil an egg")
    assert off_topic["hits"] == []
    assert off_topic["graphs"] == [True]  # products on int8 weights: the query graph only
    assert off_topic["embedded"] == 1  # the query: the everyday requests' vectors ship with the model


@pytest.mark.parametrize(
    ("name", "method", "path", "words"),
    [
        ("PostCustomers", "POST", "/v1/customers", ["create", "customers"]),
        ("PostCustomersCustomer", "POST", "/v1/customers/{customer}", ["update", "customers", "customer"]),
        ("GetCharges", "GET", "/v1/charges", ["list", "charges"]),
        ("GetChargesCharge", "GET", "/v1/charges/{charge}", ["get", "charges", "charge"]),
        ("DeleteCall", "DELETE", "/Accounts/{AccountSid}/Calls/{Sid}.json", ["delete", "call"]),
        (
            "ListCallRecording",
            "GET",
            "/Accounts/{AccountSid}/Calls/{CallSid}/Recordings.json",
            ["list", "call", "recording"],
        ),
        ("PostCustomers", "GET", "/v1/customers", ["post", "customers"]),  # the verb is not the tool's method
    ],
)
def test_an_http_verb_opening_a_name_reads_as_its_action(name: str, method: str, path: str, words: list[str]) -> None:
    tool = make_tool(name, method=method, operation=Operation(method, path))
    assert vectors.name_words(tool) == words
    assert vectors.document(tool).startswith(" ".join(words))
    assert vectors.name_words(make_tool(name)) == dense.split_name(name)  # no REST operation: the name's own words


@pytest.mark.slow  # loads three real documents (~15 s)
def test_a_tool_document_reads_an_operations_http_verb_as_its_action() -> None:
    if not REAL["stripe"].exists():
        pytest.skip("the real OpenAPI documents (../shared/openapi) are absent")
    tools = {tool.name: tool for tool in load_catalog(str(REAL["stripe"])).tools}
    # MiniLM reads "post" as publishing and "get" alike for a list and one record: the verb says which action.
    assert vectors.name_words(tools["PostCustomers"]) == ["create", "customers"]  # POST /v1/customers
    assert vectors.name_words(tools["PostCustomersCustomer"]) == ["update", "customers", "customer"]  # /{customer}
    assert vectors.name_words(tools["GetCharges"]) == ["list", "charges"]
    assert vectors.name_words(tools["GetChargesCharge"]) == ["get", "charges", "charge"]
    assert vectors.name_words(tools["DeleteCouponsCoupon"]) == ["delete", "coupons", "coupon"]
    assert vectors.document(tools["PostCustomers"]).startswith("create customers. ")
    twilio = {tool.name: tool for tool in load_catalog(str(REAL["twilio"])).tools}
    assert vectors.name_words(twilio["DeleteCall"])[0] == "delete"  # DELETE .../Calls/{Sid}.json
    assert vectors.name_words(twilio["ListCallRecording"])[0] == "list"  # no HTTP verb: the name as it is
    spotify = {tool.name: tool for tool in load_catalog(str(REAL["spotify"])).tools}
    assert vectors.name_words(spotify["get-several-tracks"]) == ["list", "several", "tracks"]  # GET /tracks
    assert vectors.name_words(spotify["get-track"]) == ["get", "track"]  # GET /tracks/{id}
    lastfm = load_catalog(str(LASTFM)).tools[0]  # a tool of no REST operation keeps its name's words
    assert vectors.name_words(lastfm) == dense.split_name(lastfm.name)


def test_a_compiled_catalogs_vectors_of_another_tool_document_are_not_used(lastfm: Catalog) -> None:
    from progressive_mcp.search import providers
    from progressive_mcp.sources import compiled

    def loaded(document: str) -> tuple[Catalog, int]:
        data = compiled.to_data(lastfm)
        data.pop("version", None)
        marker = uuid.uuid4().hex  # tools no other test (nor call) has embedded
        for tool in data["tools"]:
            tool["summary"] = f"{tool.get('summary', '')} ({marker})"
        rows = b"\x01" * (len(data["tools"]) * vectors.ROW_BYTES)
        model = providers.active().model_id
        data["vectors"] = {"model": model, "document": document, "dimension": vectors.ROW_BYTES}
        data["vectors"]["int8"] = vectors.encode(rows)
        catalog = compiled.from_data(data)
        _, embedded = vectors.rows_for(catalog.tools, vectors.VectorCache.shared(), LetterModel().embed)
        return catalog, embedded

    catalog, embedded = loaded(vectors.DOCUMENT_VARIANT)
    assert embedded == 0  # vectors of this document: used as stored
    catalog, embedded = loaded("short")  # an older release's document (name, title, summary, category, keywords)
    assert embedded == len(catalog.tools)  # stale: every tool is embedded again


def test_vectors_of_other_documents_are_not_used(lastfm: Catalog) -> None:
    cache = vectors.VectorCache()
    fake = LetterModel()
    cache.offer(lastfm.tools[:2], b"\x01" * (2 * vectors.ROW_BYTES))
    rows, embedded = vectors.rows_for(lastfm.tools[:3], cache, fake.embed)
    assert embedded == 1 and fake.texts == [vectors.document(lastfm.tools[2])]
    assert rows[: 2 * vectors.ROW_BYTES] == b"\x01" * (2 * vectors.ROW_BYTES)
    changed = dataclasses.replace(lastfm.tools[0], summary="Something else entirely")
    rows, embedded = vectors.rows_for([changed], cache, fake.embed)
    assert embedded == 1  # a changed tool document has another key: embedded again
    with pytest.raises(ValueError, match="2 vectors for 3 tools"):
        cache.offer(lastfm.tools[:3], b"\x01" * (2 * vectors.ROW_BYTES))


# --- no network at run time -----------------------------------------------------------------------------------

OFFLINE_SEARCH = """
import json, sys
from progressive_mcp.search import embedder
from progressive_mcp.search.index import SearchIndex
from progressive_mcp.sources import load_catalog

catalog = load_catalog(sys.argv[1])
index = SearchIndex(catalog.tools, catalog.vocabulary, categories=catalog.categories, semantic=True)
ranking = index.rank(sys.argv[2])
print(json.dumps({"fused": ranking.fused, "hits": [hit.name for hit in index.search(sys.argv[2], limit=5)],
                  "embedded": embedder.Embedder.shared().texts_embedded}))
"""


@pytest.mark.slow  # starts a process (tests/conftest.py)
def test_the_semantic_signal_needs_no_network_and_no_home(minilm: embedder.Embedder, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    unreachable = "http://127.0.0.1:9"  # the discard port: nothing listens, a download would fail
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.upper().endswith("_PROXY") and not key.startswith(("HF_", "XDG_"))
    }
    env.update(
        HOME=str(home), PMCP_SEMANTIC="on", HTTP_PROXY=unreachable, HTTPS_PROXY=unreachable,
        http_proxy=unreachable, https_proxy=unreachable, ALL_PROXY=unreachable, NO_PROXY="",
    )  # fmt: skip
    query = "how long is this song and which record is it from"
    done = subprocess.run(
        [sys.executable, "-c", OFFLINE_SEARCH, str(LASTFM), query],
        capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["fused"] and "track.getInfo" in result["hits"][:2]
    assert result["embedded"] > 1  # the model really ran: the tool documents, then the query
    assert list(home.iterdir()) == []  # nothing cached or downloaded under HOME


# --- the Lambda's cold start ----------------------------------------------------------------------------------

HEAVY = ("onnxruntime", "tokenizers", "numpy", "wordllama")


@pytest.mark.slow  # starts a process (tests/conftest.py)
def test_the_handlers_cold_import_loads_no_model(tmp_path: Path) -> None:
    # With the extra installed and the signal on: the model waits for the first search that needs it.
    repo = Path(__file__).resolve().parent.parent
    code = (
        "import json, sys; import lambda_fn.handler; from progressive_mcp.search import vectors; "
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    )
    env = {**os.environ, "PMCP_SEMANTIC": "auto"}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=repo, capture_output=True, text=True, timeout=300, env=env
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_near_bar_is_a_quantile_of_the_everyday_requests_best_cosines(lastfm: Catalog) -> None:
    """Not the single highest: one everyday request that shares a verb with a tool would set the bar for all."""
    import numpy as np

    from progressive_mcp.search.semantic import everyday_requests

    model, signal = letter_fusion(lastfm.tools)
    matrix = signal._vectors.matrix()
    best = np.array([float((matrix @ model.query(text)).max()) for text in everyday_requests()])
    bar = float(np.quantile(best, fusion.NEAR_QUANTILE))
    assert bar < best.max()  # else this test could not tell the quantile from the maximum
    closest = next(text for text, cosine in zip(everyday_requests(), best, strict=True) if cosine == best.max())
    assert signal.near(closest)  # the first call computes the bar (the closest request is near at either bar)
    assert signal._scale is not None and sum(signal._scale) == pytest.approx(bar)  # zero + unit: closeness 1


def test_near_means_closer_to_a_tool_than_nearly_every_everyday_request_comes(lastfm: Catalog) -> None:
    """The bar is computed once; a query is near when its closest tool is at least that close (the letter model
    stands in for MiniLM)."""
    from progressive_mcp.search.semantic import everyday_requests

    model, signal = letter_fusion(lastfm.tools)
    tools = lastfm.tools
    assert signal.near(vectors.document(tools[3]))  # a tool's own document: cosine 1
    assert not signal.near("zzzz qqqq xxxx")
    assert len(model.texts) == len(tools) + len(everyday_requests()) + 2  # the bar's requests embedded once


def test_closeness_is_zero_at_the_median_everyday_request_and_one_at_the_near_bar(lastfm: Catalog) -> None:
    """`closeness` puts a query's closest cosine on the catalog's own scale: the everyday requests' best cosines, their
    median at 0 and NEAR_QUANTILE at 1; `near` is closeness 1 or more."""
    import numpy as np

    model, signal = letter_fusion(lastfm.tools)
    matrix = signal._vectors.matrix()
    best = np.array([float((matrix @ model.query(text)).max()) for text in everyday_requests()])
    middle, bar = np.quantile(best, [0.5, fusion.NEAR_QUANTILE])
    own = vectors.document(lastfm.tools[3])  # the tool's own document: cosine 1
    assert signal.closeness(own) == pytest.approx((1 - middle) / (bar - middle), abs=1e-3)
    at_median = min(everyday_requests(), key=lambda text: abs(float((matrix @ model.query(text)).max()) - middle))
    assert signal.closeness(at_median) == pytest.approx(0.0, abs=0.2)
    assert signal.near(own) and not signal.near(at_median)


def with_closeness(lastfm: Catalog, value: float | None) -> SearchIndex:
    """Last.fm's index fused with the letter model, whose closeness says `value` for every query: what the engine
    does with MiniLM's judgment, apart from the model."""
    index = SearchIndex(lastfm.tools, semantic=False)
    _, signal = letter_fusion(lastfm.tools)
    signal.closeness = lambda query: value  # type: ignore[method-assign]
    index._fusion = signal
    return index


def test_an_answer_minilm_finds_as_far_as_everyday_requests_reads_as_no_confident_match(lastfm: Catalog) -> None:
    """Issue 29, item 3: the words find a tool, though not surely (confidence under SURE_CONFIDENCE), and MiniLM puts
    the query no closer to any tool than everyday requests come (closeness below fusion.FAR): no confident match,
    its fused ranking kept for the answer's candidates. A query the words answer surely keeps its answer."""
    query = "album tour dates for Radiohead"
    alone = SearchIndex(lastfm.tools, semantic=False).rank(query)
    assert alone.off_topic is None and alone.confidence < SURE_CONFIDENCE  # the words alone answer it, unsurely
    far = with_closeness(lastfm, fusion.FAR - 0.01).rank(query)
    assert far.off_topic and far.fused and far.scores and not far.near
    kept = with_closeness(lastfm, fusion.FAR).rank(query)
    assert kept.off_topic is None and kept.fused
    assert [doc for doc, _ in far.scores] == [doc for doc, _ in kept.scores]
    sure = "similar artists to Radiohead"
    assert SearchIndex(lastfm.tools, semantic=False).rank(sure).confidence >= SURE_CONFIDENCE
    assert with_closeness(lastfm, -5.0).rank(sure).off_topic is None


def test_a_query_rejected_for_its_words_that_minilm_finds_close_is_answered(lastfm: Catalog) -> None:
    """Issue 29, item 3: no tool shares enough of the query's words, but MiniLM finds a tool far closer to it than
    everyday requests come (closeness fusion.CLOSE or more): answered, from the fused ranking. Below CLOSE it stays
    rejected (near, so TOOL_SEARCH shows candidates); a query rejected for its shape (asking for an explanation) is
    never answered so."""
    query = "musicians akin to Bjork"
    lexical = SearchIndex(lastfm.tools, semantic=False).rank(query)
    assert lexical.off_topic is not None
    close = with_closeness(lastfm, fusion.CLOSE).rank(query)
    assert close.off_topic is None and close.fused and close.scores
    short = with_closeness(lastfm, fusion.CLOSE - 0.01).rank(query)
    assert short.off_topic == lexical.off_topic and short.near
    explain = "explain what scrobbling means"
    assert SearchIndex(lastfm.tools, semantic=False).rank(explain).off_topic
    assert with_closeness(lastfm, 5.0).rank(explain).off_topic


def test_without_minilms_judgment_the_words_decide(lastfm: Catalog) -> None:
    """A model that cannot answer (closeness None) changes no decision."""
    for query in ("similar artists to Radiohead", "musicians akin to Bjork"):
        alone = SearchIndex(lastfm.tools, semantic=False).rank(query)
        assert with_closeness(lastfm, None).rank(query).off_topic == alone.off_topic


def test_the_shipped_everyday_vectors_are_the_models_own(minilm: embedder.Embedder) -> None:
    """models/minilm/everyday.json holds what the shipped model makes of today's everyday requests (read as queries),
    so a process's first search embeds only its query; after a new model or new requests, `python -m
    progressive_mcp.search.embedder` writes it again (model/README.md), else this fails."""

    stored = embedder.stored_everyday(everyday_requests())
    assert stored is not None, "everyday.json is missing or made by another model or for other requests"
    fresh = embedder.embed_queries(everyday_requests())
    assert float((stored * fresh).sum(axis=1).min()) > 0.999  # int8 rows of the same vectors
    assert embedder.stored_everyday(everyday_requests()[:-1]) is None  # other requests: embedded at run time
