"""The dense search signal (progressive_mcp.search.dense) with the real WordLlama model: no mocks.

The model tests skip, saying why, when the `semantic` extra is not installed (`make venv` installs it).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from factories import make_tool

from progressive_mcp.catalog import CatalogTool, Param
from progressive_mcp.search import dense

REPO = Path(__file__).resolve().parent.parent
needs_wordllama = pytest.mark.skipif(
    not dense.available(), reason="wordllama is not installed: pip install 'progressive-mcp[semantic]'"
)


def tool(name: str, title: str, summary: str, description: str, category: str, params: tuple[str, ...]) -> CatalogTool:
    parameters = tuple(Param(param, "string", False) for param in params)
    return make_tool(name, parameters, category=category, title=title, summary=summary, description=description)


# Four kinds of API at once, with names in four styles; the queries below share no content word with their tool.
TOOLS = (
    tool(
        "artist.getSimilar",
        "Similar artists",
        "Artists whose fans also listen to a given artist.",
        "Returns related musicians ranked by how much their audiences overlap.",
        "artist",
        ("artist", "limit"),
    ),
    tool(
        "track.scrobble",
        "Record a play",
        "Adds a track to the user's listening history.",
        "Saves that a song was played, with a timestamp.",
        "track",
        ("artist", "track", "timestamp"),
    ),
    tool(
        "geo.getTopTracks",
        "Top tracks by country",
        "The most played songs in one country.",
        "Ranks the songs people in a country listen to most this week.",
        "geo",
        ("country", "limit"),
    ),
    tool(
        "album.getInfo",
        "Album info",
        "Album metadata and tracklist.",
        "Looks up one album by artist and album name: tracks, release date and cover art.",
        "album",
        ("artist", "album"),
    ),
    tool(
        "weather_forecast",
        "Weather forecast",
        "Hourly temperature, rain and wind for a city, up to ten days ahead.",
        "GET /forecast/{city}. Forecast for a location: temperature, precipitation, wind speed.",
        "weather",
        ("city", "days"),
    ),
    tool(
        "payments-refund",
        "Refund a payment",
        "Returns money to a customer's card for a charge.",
        "Reverses all or part of a charge; the amount is credited to the card.",
        "payments",
        ("charge_id", "amount"),
    ),
    tool(
        "calendarCreateEvent",
        "Create an event",
        "Adds a meeting to a calendar with attendees and a start time.",
        "Creates a calendar entry and invites the attendees by email.",
        "calendar",
        ("title", "start", "attendees"),
    ),
    tool(
        "translate.text",
        "Translate text",
        "Converts text from one language into another.",
        "Machine translation between 100 languages.",
        "language",
        ("text", "target_language"),
    ),
)
_STOPWORD_TEXT = "a an the in on of to by for with and or is it be that what does i my their"
STOPWORDS = frozenset(_STOPWORD_TEXT.split())

# (query, the tool it means, the rank it must reach at worst)
PARAPHRASES = [
    ("will it be sunny in Oslo tomorrow", "weather_forecast", 1),
    ("give a client their cash back", "payments-refund", 1),
    ("what does bonjour mean in German", "translate.text", 1),
    ("chart hits in Brazil", "geo.getTopTracks", 1),
    ("log that I just heard Yesterday by the Beatles", "track.scrobble", 1),
    ("book a slot with my colleagues on Thursday", "calendarCreateEvent", 2),
]


def content_words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower())) - STOPWORDS


@pytest.fixture(scope="module")
def index() -> dense.DenseIndex:
    if not dense.available():
        pytest.skip("wordllama is not installed: pip install 'progressive-mcp[semantic]'")
    return dense.DenseIndex.for_tools(TOOLS)


# --- without the model ----------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_importing_the_module_loads_neither_numpy_nor_wordllama() -> None:
    code = (
        "import json, sys; import progressive_mcp.search.dense as d; d.available(); "
        "print(json.dumps(sorted(m for m in ('numpy', 'wordllama', 'tokenizers', 'safetensors') if m in sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == []


def test_available_is_false_when_a_required_module_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dense, "_REQUIRED_MODULES", ("wordllama", "no_such_module_for_dense_tests"))
    assert dense.available() is False


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("artist.getSimilar", ["artist", "get", "similar"]),
        ("TIME_SERIES_INTRADAY", ["time", "series", "intraday"]),
        ("get-an-albums-tracks", ["get", "an", "albums", "tracks"]),
        ("oneClicks_install_kubernetes", ["one", "clicks", "install", "kubernetes"]),
        ("getHTTPStatus", ["get", "http", "status"]),
        ("conversations.history", ["conversations", "history"]),
        ("v2Droplets", ["v", "2", "droplets"]),
    ],
)
def test_split_name_reads_every_naming_style(name: str, words: list[str]) -> None:
    assert dense.split_name(name) == words


def test_trim_description_drops_routes_paths_and_code() -> None:
    text = (
        "GET /v2/droplets/{droplet_id}. To show a Droplet, send a GET request to `/v2/droplets/$ID`. "
        "See https://docs.example.com/droplets for more."
    )
    assert dense.trim_description(text) == "To show a Droplet. See for more."
    assert dense.trim_description("Deprecated. POST /albums. Save albums.") == "Save albums."
    long = "First sentence is here. " + "word " * 100
    assert dense.trim_description(long, limit=40) == "First sentence is here."
    assert len(dense.trim_description("x" * 10 + " " + "y" * 300, limit=40)) <= 40


def test_tool_document_variants() -> None:
    weather = TOOLS[4]
    short = dense.tool_document(weather, "short")
    # The title repeats the name's words: kept once; the summary's full stop is not doubled.
    assert short == "weather forecast. Hourly temperature, rain and wind for a city, up to ten days ahead. weather"
    params = dense.tool_document(weather, "params")
    assert params == short + ". city days"
    full = dense.tool_document(weather, "full")
    assert full == params + ". Forecast for a location: temperature, precipitation, wind speed"
    assert dense.tool_document(weather) == full  # the default
    with pytest.raises(ValueError, match="unknown document variant"):
        dense.tool_document(weather, "everything")  # type: ignore[arg-type]


def test_reciprocal_rank_fusion() -> None:
    assert dense.reciprocal_rank_fusion([["a", "b", "c"], ["b", "c"]]) == ["b", "c", "a"]
    assert dense.reciprocal_rank_fusion([["a", "b"], ["b", "a"]], weights=[1, 3], k=60) == ["b", "a"]
    assert dense.reciprocal_rank_fusion([[], ["x"]]) == ["x"]
    with pytest.raises(ValueError, match="one weight per ranking"):
        dense.reciprocal_rank_fusion([["a"]], weights=[1, 2])


def test_model_refuses_an_untrained_dimension() -> None:
    with pytest.raises(ValueError, match="dim must be one of 64, 128, 256"):
        dense.model(100)


# --- with the model -------------------------------------------------------------------------------------------------


@needs_wordllama
def test_available_when_the_extra_is_installed() -> None:
    assert dense.available() is True


@needs_wordllama
@pytest.mark.parametrize(("query", "wanted", "worst_rank"), PARAPHRASES)
def test_a_paraphrase_finds_its_tool_without_a_shared_word(
    index: dense.DenseIndex, query: str, wanted: str, worst_rank: int
) -> None:
    position = next(i for i, t in enumerate(TOOLS) if t.name == wanted)
    assert not content_words(query) & content_words(dense.tool_document(TOOLS[position]))  # the premise
    ranked = [i for i, _ in index.rank(query, len(TOOLS))]
    assert ranked.index(position) + 1 <= worst_rank, [TOOLS[i].name for i in ranked]


@needs_wordllama
def test_scores_are_cosines_and_rank_orders_them(index: dense.DenseIndex) -> None:
    import numpy as np

    assert len(index) == len(TOOLS)
    assert index.matrix.shape == (len(TOOLS), dense.DEFAULT_DIM) and index.matrix.dtype == np.float32
    assert np.allclose(np.linalg.norm(index.matrix, axis=1), 1.0, atol=1e-5)
    assert not index.matrix.flags.writeable
    assert index.nbytes == len(TOOLS) * dense.DEFAULT_DIM * 4

    scores = index.scores("refund the customer")
    assert scores.shape == (len(TOOLS),) and float(scores.max()) <= 1.0 + 1e-6
    ranked = index.rank("refund the customer", 3)
    assert [i for i, _ in ranked] == sorted(range(len(TOOLS)), key=lambda i: -float(scores[i]))[:3]
    assert [s for _, s in ranked] == sorted((s for _, s in ranked), reverse=True)
    assert index.rank("refund the customer", 0) == []
    assert len(index.rank("refund the customer", 100)) == len(TOOLS)
    # A document's own text is its nearest neighbour.
    assert index.rank(dense.tool_document(TOOLS[6]), 1)[0][0] == 6


@needs_wordllama
def test_empty_texts_score_zero_not_nan() -> None:
    import numpy as np

    index = dense.DenseIndex(["weather forecast", ""], dim=64)
    assert index.matrix.shape == (2, 64)
    assert not index.matrix[1].any()
    assert np.array_equal(index.scores(""), np.zeros(2, dtype=np.float32))
    assert float(index.scores("rain tomorrow")[1]) == 0.0
    assert len(dense.DenseIndex([])) == 0


@needs_wordllama
def test_truncated_dimensions_are_prefixes_of_the_full_vectors() -> None:
    full = dense.DenseIndex(["similar artists"], dim=256).matrix[0]
    small = dense.DenseIndex(["similar artists"], dim=64).matrix[0]
    import numpy as np

    assert np.allclose(small, full[:64] / np.linalg.norm(full[:64]), atol=1e-5)


@needs_wordllama
def test_the_model_is_loaded_once_per_dimension() -> None:
    assert dense.model(128) is dense.model(128)
    assert dense.model(128) is not dense.model(256)


@pytest.mark.slow
@needs_wordllama
def test_loading_reads_only_the_wheel_and_leaves_logging_alone(tmp_path: Path) -> None:
    # A fresh interpreter with no network namespace trick: HF_HUB_OFFLINE and an unreachable proxy make any download
    # attempt fail loudly; HOME is empty so no earlier download in ~/.cache/wordllama can be found instead.
    code = (
        "import logging, sys; root = logging.getLogger(); before = (list(root.handlers), root.level); "
        "from progressive_mcp.search import dense; index = dense.DenseIndex(['weather forecast']); "
        "assert (list(root.handlers), root.level) == before, (root.handlers, root.level); "
        "print(index.rank('rain tomorrow', 1))"
    )
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "HF_HUB_OFFLINE": "1",
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "HTTP_PROXY": "http://127.0.0.1:9",
    }
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("[(0, ")
    assert not (tmp_path / ".cache").exists()
