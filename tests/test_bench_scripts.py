"""Smoke tests of the benchmark scripts (bench/): they run and produce what they claim; no timing is asserted.

Run with: .venv/bin/python -m pytest tests/test_bench_scripts.py -q
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from bench_module import load_bench

from progressive_mcp.sources import load_catalog

pytestmark = pytest.mark.slow  # each test runs a benchmark script end to end: scale, not behaviour of one unit

REPO = Path(__file__).resolve().parent.parent


def run_bench(script: str, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """A bench script run from the repository as `make bench` runs it, its output captured."""
    return subprocess.run(
        [sys.executable, str(REPO / "bench" / script), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture(scope="module")
def generator() -> ModuleType:
    return load_bench("synthetic_spec")


@pytest.fixture(scope="module")
def real_names() -> list[str]:
    return [tool.name for tool in load_catalog().tools]


@pytest.mark.parametrize("n_tools", [50, 1000])
def test_synthetic_spec_gives_exactly_n_valid_tools(generator: ModuleType, real_names: list[str], n_tools: int) -> None:
    catalog = generator.synthetic_catalog(n_tools)  # validated by progressive_mcp.sources.spec.parse_spec

    assert len(catalog) == n_tools
    names = [tool.name for tool in catalog.tools]
    assert len(set(names)) == n_tools
    if n_tools <= len(real_names):
        assert set(names) <= set(real_names)
    else:
        assert names[: len(real_names)] == real_names  # the real catalog keeps all its tools, first
        invented = catalog.tools[len(real_names) :]
        assert {tool.category for tool in invented} <= set(catalog.categories)
        for tool in invented:
            assert tool.summary and tool.description and tool.keywords and tool.params
            assert len(tool.examples) >= 3


def test_synthetic_spec_is_deterministic_for_a_seed(generator: ModuleType) -> None:
    assert generator.synthetic_spec(1000, seed=3) == generator.synthetic_spec(1000, seed=3)
    assert generator.synthetic_spec(1000, seed=3) != generator.synthetic_spec(1000, seed=4)
    assert generator.synthetic_spec(50, seed=3) == generator.synthetic_spec(50, seed=3)


def test_search_scale_runs_end_to_end() -> None:
    done = run_bench("search_scale.py", "--sizes", "200", "--rounds", "1", timeout=60)

    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "machine:" in out and "load average" in out
    assert "SearchIndex.search" in out and "TOOL_SEARCH via call_tool_wire" in out
    rows = [line.split() for line in out.splitlines() if line.strip().startswith("200 ")]
    assert len(rows) == 2  # one row in the build/memory table, one in the latency table
    assert "against DESIGN.md" in out


def test_the_yaml_bound_bench_measures_loads_and_refuses_both_bombs() -> None:
    done = run_bench("yaml_bound.py", "--runs", "1", "--json", timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert {"bundled spec", "bundled vocabulary"} <= {row["file"] for row in report["loads"]}
    assert all(row["measuring_ms"] >= 0 and row["bounded_ms"] > 0 for row in report["loads"])
    assert [row["bomb"] for row in report["bombs"]] == ["example", "enum"]
    assert all("YAML aliases expand to more than" in row["outcome"] for row in report["bombs"])


def test_load_runs_clients_against_a_server_it_starts() -> None:
    done = run_bench("load.py", "--duration", "2", "--clients", "2", "--json", timeout=120)

    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["errors"] == 0 and report["errors_by_kind"] == {}
    assert report["requests"] > 0 and report["throughput_per_s"] > 0
    assert set(report["latency"]) == {"count", "per_s", "p50_ms", "p90_ms", "p99_ms", "max_ms"}
    # both protocol eras and every meta-tool were exercised (one client each era)
    kinds = set(report["latency_by_kind"])
    assert {"initialize", "server/discover", "tools/list", "TOOL_LIST", "TOOL_SEARCH", "TOOL_GET"} <= kinds
    assert sum(report["tool_call_sources"].values()) > 0
    for state in (report["server_before"], report["server_after"]):
        assert state["vm_rss_mb"] > 0 and state["vm_hwm_mb"] > 0
    assert report["machine"]["cpus"] >= 1 and report["machine"]["python"]
    assert len(report["load_average_before"]) == 3


def test_faults_bench_runs_a_few_cases_as_json() -> None:
    cases = "empty body,http 429 retry-after 30,premium notice"
    done = run_bench("faults.py", "--transport", "http", "--cases", cases, "--json", timeout=60)

    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    rows = {row["fault"]: row for row in report["rows"]}
    assert list(rows) == cases.split(",")
    assert [rows[name]["kind"] for name in rows] == ["bad_response", "rate_limited", "premium_required"]
    assert all(row["is_error"] and not row["cached"] and not row["key_in_answer"] for row in rows.values())
    assert rows["http 429 retry-after 30"]["attempts"] == 1 and rows["http 429 retry-after 30"]["retry_after_s"] == 30
    assert report["machine"]["cpus"]


def test_code_mode_bench_runs_its_three_scripts() -> None:
    done = run_bench("code_mode.py", "--delay", "0.05", "--rounds", "1", timeout=120)
    assert done.returncode == 0, done.stderr
    for line in ("first script of the process", "no tool call", "5 calls, one by one", "5 calls, gathered"):
        assert line in done.stdout


def test_sandbox_boundary_bench_runs_amplification_scripts_as_json() -> None:
    done = run_bench("sandbox_boundary.py", "--only", "report,arguments-10^9,deep-10^5", "--json", timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    rows = report["rows"]
    assert list(rows) == ["report", "arguments-10^9", "deep-10^5"]
    assert rows["report"]["outcome"] == "limit memory_mb"
    assert rows["arguments-10^9"]["outcome"] == "limit max_argument_bytes"
    assert rows["deep-10^5"]["outcome"].startswith("answered")
    assert all(isinstance(row["peak_growth_mb"], float) and row["seconds"] >= 0 for row in rows.values())
    assert report["target_mb"] == 128 and report["limits"]["memory_mb"] == 64


def test_sandbox_fairness_bench_floods_a_server_it_starts_as_json() -> None:
    done = run_bench("sandbox_fairness.py", "--runaway", "6", "--wall", "3", "--json", timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert sum(report["runaway"].values()) == 6
    assert report["runaway"].get("busy", 0) >= 4  # over the caller's share: refused at once
    assert set(report["other_caller"]) == {"ping", "TOOL_SEARCH", "TOOL_EXECUTE (one quote)"}
    assert all(row["outcome"] == "answered" for row in report["other_caller"].values()), report


def test_the_gateway_bench_syncs_real_servers_and_resyncs_one_tool() -> None:
    done = run_bench("gateway.py", "--servers", "2", "--tools", "5", "--no-example", "--json", timeout=120)
    assert done.returncode == 0, done.stderr
    scale = json.loads(done.stdout)["scale"]
    assert scale["tools"] == scale["created"] == 10
    assert scale["one_tool_resync_updated"] == 1 and scale["index_bytes"] > 0


def test_the_gateway_bounds_bench_syncs_a_server_listing_too_much() -> None:
    done = run_bench("gateway_bounds.py", "--tools", "30", "--description-chars", "5000", "--json", timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["tools_listed"] == 31 and result["tools_stored"] == 31
    assert result["notes"] == 31  # every description over 4,000 characters, the 2 MB one among them
    assert result["tool_get_big_tokens"] <= 2500 and result["direct_definition_big_tokens"] <= 2500


def test_the_masking_bench_measures_every_set_of_secrets() -> None:
    done = run_bench("masking.py", "--json", timeout=110)
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(figures["scan_ms_per_mb"]) == {
        "no secret",
        "one key (16 characters)",
        "user:password key",
        "5 servers' secrets",
    }
    assert "TOOL_GET, key 'demo'" in figures["calls_ms"]


def test_the_author_vocabulary_benchmark_runs_end_to_end() -> None:
    done = run_bench("author_vocabulary.py", timeout=110)

    assert done.returncode == 0, done.stderr
    assert "Last.fm (57 tools), 240 queries" in done.stdout
    for row in (
        "plain BM25",
        "engine, without the vocabulary, semantic off",
        "engine, with the vocabulary, semantic off",
    ):
        assert row in done.stdout


@pytest.mark.skipif(
    importlib.util.find_spec("wordllama") is None, reason="wordllama is not installed (the `semantic` extra)"
)
@pytest.mark.parametrize(
    ("script", "args", "expected"),
    [
        ("dense.py", ["--dims", "64", "--rounds", "1", "--sizes", "1000"], ["cold start", "synthetic 1000 (1000)"]),
        ("dense_quality.py", ["--only", "lastfm"], ["== lastfm: 57 tools", "engine|dense", "label-free thresholds"]),
        ("semantic.py", ["--only", "lastfm", "--rounds", "1"], ["p50 on/off", "lastfm            57"]),
        ("semantic.py", ["--only", "alphavantage", "--rounds", "1"], ["alphavantage   skipped: its vocabulary is"]),
    ],
)
def test_dense_benchmarks_run_end_to_end(script: str, args: list[str], expected: list[str]) -> None:
    done = run_bench(script, *args, timeout=110)

    assert done.returncode == 0, done.stderr
    for text in expected:
        assert text in done.stdout


def test_policies_benchmark_runs() -> None:
    done = run_bench("policies.py", "--repeat", "2", "--only", "alphavantage", "--timing-rounds", "3", timeout=100)

    assert done.returncode == 0, done.stderr
    assert "alphavantage     128     127" in done.stdout  # read_only keeps all 128 reads; the deny hides one
    # The timing class of a hidden tool's call against a made-up name's, both distributions, over HTTP.
    assert "a call outside the policy vs a name that does not exist, over HTTP, 3 calls of each" in done.stdout
    for route in ("TOOL_CALL", "direct"):
        assert re.search(rf"^alphavantage +{route} +hidden +[\d.]+ ", done.stdout, re.M), done.stdout
    for series in ("absent", "made-up"):  # the same name where it never was, and another name
        found = re.findall(rf"^ +{series} +[\d.]+ .*p50 hidden - {series} [+-][\d.]+ ms$", done.stdout, re.M)
        assert len(found) == 2, done.stdout


def test_the_asset_benchmark_says_what_the_oauth_extra_weighs() -> None:
    done = run_bench("asset.py", "--only", "oauth", timeout=900)

    assert done.returncode == 0, done.stderr
    assert re.search(
        r"^  oauth +unzipped +[\d.]+ MB \([\d,]+ bytes\), [+-][\d.]+ MB against the 60 MB budget$", done.stdout, re.M
    )
    assert re.search(r"^ +[\d.]+ MB  cryptography$", done.stdout, re.M), done.stdout  # the weight is named
    assert re.search(r"^ +[\d.]+ MB  jwt$", done.stdout, re.M), done.stdout


def test_the_model_experiment_ranks_with_the_file_it_is_given(tmp_path: Path) -> None:
    # bench/_exp_model.py swaps in a model file (model/README.md): a copy of the shipped one gives the engine's own
    # figures, a file that is no model gives others (the ranking falls back to words alone), so the file is read.
    from progressive_mcp.search import embedder

    pinned, broken = tmp_path / "pinned.onnx", tmp_path / "broken.onnx"
    pinned.write_bytes(embedder.MODEL.read_bytes())
    broken.write_bytes(b"not an ONNX model")
    args = ["--variants", "shipped", "--sets", "lastfm"]
    engine = run_bench("_exp_rank_variants.py", *args, timeout=300)
    same = run_bench("_exp_model.py", str(pinned), *args, timeout=300)
    other = run_bench("_exp_model.py", str(broken), *args, timeout=300)
    for done in (engine, same, other):
        assert done.returncode == 0, done.stderr

    def figures(done: subprocess.CompletedProcess[str]) -> str:
        [line] = [line for line in done.stdout.splitlines() if line.startswith("shipped")]
        return line

    assert figures(same) == figures(engine)
    assert figures(other) != figures(engine)
    usage = run_bench("_exp_model.py", str(tmp_path / "absent.onnx"), timeout=60)
    assert usage.returncode != 0 and "usage" in usage.stderr


def test_the_fastmcp_comparison_counts_our_views_and_reports_a_fastmcp_that_cannot_run() -> None:
    """bench/fastmcp_schema_view.py: our two TOOL_GET views of a small document, and, given an interpreter without
    fastmcp (this one), the first line of its error instead of FastMCP's figures."""
    bench = load_bench("fastmcp_schema_view")
    spec = Path(__file__).parent / "fixtures" / "openapi" / "pagerduty" / "openapi.yaml"
    mine = bench.ours(spec)
    assert mine["tools"] > 0 and set(mine) == {"json", "compact", "tools"}
    assert 0 < mine["compact"]["mean"] < mine["json"]["mean"]
    assert "ModuleNotFoundError" in bench.theirs(spec, sys.executable)["error"]


def test_agent_pick_dumps_unlabelled_items_and_scores_the_picks_written_for_them(tmp_path: Path) -> None:
    """bench/agent_pick.py: `dump` writes each query with its real TOOL_SEARCH answer (or the catalog's tool list)
    under ids that name no eval query and no label; `score` maps the picks back through the key and counts them."""
    bench = load_bench("agent_pick")
    lines = [
        {"id": "q1", "query": "who is lizzzy friends with on last.fm", "relevant": {"user.getFriends": 2}},
        {"id": "q2", "query": "total scrobble count on my profile", "relevant": {"user.getInfo": 2}},
        {"id": "q3", "query": "tracks like Blinding Lights", "relevant": {"track.getSimilar": 2, "track.search": 1}},
        {"id": "q4", "query": "play Blinding Lights by The Weeknd", "relevant": {}, "kind": "negative"},
    ]
    queries = tmp_path / "q.jsonl"
    queries.write_text("".join(json.dumps({"kind": "paraphrase", "split": "dev", **q}) + "\n" for q in lines))
    manifest = tmp_path / "catalogs.yaml"
    spec = REPO / "tests" / "fixtures" / "lastfm" / "lastfm.yaml"
    manifest.write_text(f"catalogs:\n  - name: lastfm\n    queries: q.jsonl\n    spec: {spec}\n    role: tuning\n")
    out = tmp_path / "answer"
    assert bench.dump(out, {"tuning"}, "answer", manifest) == ["lastfm"]
    assert bench.dump(tmp_path / "none", {"held-out"}, "answer", manifest) == []
    items = [json.loads(line) for line in (out / "lastfm_items.jsonl").read_text().splitlines()]
    key = json.loads((out / "lastfm_key.json").read_text())
    assert sorted(key["ids"].values()) == ["q1", "q2", "q3", "q4"] and set(key["ids"]) == {i["id"] for i in items}
    text = (out / "lastfm_items.jsonl").read_text()
    assert "relevant" not in text and not re.search(r'"q[1-4]"', text)
    by_query = {key["ids"][i["id"]]: i for i in items}
    assert json.loads(by_query["q1"]["answer"])["query"] == lines[0]["query"]  # the surface's own answer
    assert "TOOL_SEARCH" in (out / "PROMPT.md").read_text()
    picks = [  # right first; right but second; a wrong "none"; the off-topic one rightly "none"
        {"id": by_query["q1"]["id"], "none": False, "pick": ["user.getFriends"]},
        {"id": by_query["q2"]["id"], "none": False, "pick": ["user.getRecentTracks", "user.getInfo"]},
        {"id": by_query["q3"]["id"], "none": True, "pick": []},
        {"id": by_query["q4"]["id"], "none": True, "pick": []},
    ]
    (out / "lastfm_picks_a.jsonl").write_text("".join(json.dumps(p) + "\n" for p in picks[:2]))
    (out / "lastfm_picks_b.jsonl").write_text("".join(json.dumps(p) + "\n" for p in picks[2:]))
    [row] = bench.score(out, manifest)["rows"]
    assert (row["positives"], row["negatives"], row["missing"]) == (3, 1, 0)
    assert (row["picked_right"], row["right_among_picks"]) == (round(1 / 3, 3), round(2 / 3, 3))
    assert (row["none_on_off_topic"], row["none_on_answerable"]) == (1.0, round(1 / 3, 3))
    assert row["shown"] is not None
    catalog_view = tmp_path / "catalog"
    bench.dump(catalog_view, {"tuning"}, "catalog", manifest)
    tools = (catalog_view / "lastfm_tools.txt").read_text().splitlines()
    assert len(tools) == len(load_catalog(spec)) and any(t.startswith("user.getFriends — ") for t in tools)
    assert "answer" not in (catalog_view / "lastfm_items.jsonl").read_text()
    done = run_bench("agent_pick.py", "score", str(out), "--manifest", str(manifest), timeout=120)
    assert done.returncode == 0, done.stderr
    assert "lastfm" in done.stdout and not any(q["query"] in done.stdout for q in lines)


def test_the_kept_agent_picks_score_to_the_figures_the_docs_quote() -> None:
    """eval/agent_picks holds the picks and keys of the measurement docs/search.md reports (the readers' inputs are
    made again by `dump` at the commit its README names); scoring them again gives the same figures."""
    bench = load_bench("agent_pick")
    kept = REPO / "eval" / "agent_picks"
    answer = bench.score(kept / "answer-2026-11-29", bench.MANIFEST)["pooled"]
    catalog = bench.score(kept / "catalog-2026-11-29", bench.MANIFEST)["pooled"]
    assert answer["tuning"]["picked_right"] == 0.958 and answer["tuning"]["none_on_off_topic"] == 1.0
    assert catalog["tuning"]["picked_right"] == 0.995


def test_the_fastmcp_search_comparison_scores_both_servers_answers_alike(tmp_path: Path) -> None:
    """bench/fastmcp_search.py: this server's answers are scored from their text, FastMCP's from the tools they
    list (tokens: those tools' definitions); names are matched by letters and digits; an interpreter without
    fastmcp (this one) gives the first line of its error, not figures."""
    bench = load_bench("fastmcp_search")
    docs = REPO / "tests" / "fixtures" / "openapi"
    lines = [
        {"id": "t1", "query": "delete a project", "relevant": {"projects_delete": 2}},
        {"id": "t2", "query": "list all projects", "relevant": {"projects_list": 2}},
        {"id": "t3", "query": "book a table for two tonight", "relevant": {}, "kind": "negative"},
    ]
    (tmp_path / "q.jsonl").write_text(
        "".join(json.dumps({"kind": "paraphrase", "split": "dev", **q}) + "\n" for q in lines)
    )
    manifest = tmp_path / "catalogs.yaml"
    manifest.write_text(
        f"openapi_docs: {docs}\ncatalogs:\n  - name: tasks\n    queries: q.jsonl\n"
        '    spec: "{openapi_docs}/tasks/openapi.yaml"\n    role: held-out\n'
    )
    refused = bench.compare("tasks", sys.executable, manifest)
    assert refused == {"catalog": "tasks", "fastmcp_error": "ModuleNotFoundError: No module named 'fastmcp'"}
    catalog = load_catalog(docs / "tasks" / "openapi.yaml")
    from progressive_mcp.search.evaluation import load_queries

    queries = load_queries(tmp_path / "q.jsonl", catalog)
    mine = bench.figures(bench.ours_run(docs / "tasks" / "openapi.yaml", [q.query for q in queries]), queries, None)
    assert mine["R@1"] == 1.0 and mine["shown"] == 1.0 and mine["tokens_p50"] > 0
    theirs = {  # FastMCP's slugs; the second answer lists the right tool second; the off-topic one gets a tool
        "answers": [
            {"listed": ["projects_delete", "projects_get"], "ms": 2.0},
            {"listed": ["projects_create", "projects_list"], "ms": 4.0},
            {"listed": ["projects_create"], "ms": 3.0},
        ],
        "tools": {
            name: ['{"name":"' + name + '"}', f"### {name}"]
            for name in ("projects_delete", "projects_get", "projects_list", "projects_create")
        },
    }
    to_theirs = {"projects_delete": "projects_delete", "projects_list": "projects_list"}
    got = bench.figures(theirs, queries, to_theirs)
    assert (got["R@1"], got["R@5"], got["shown"], got["no_match"]) == (0.5, 1.0, 1.0, 0.0)
    assert got["search_ms_p50"] == 3.0 and got["tokens_p50"] > got["markdown_tokens_p50"] > 0
    assert bench.letters("projects.get") == bench.letters("projects_get")
