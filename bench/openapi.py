"""OpenAPI catalogs: load time and memory for each document in ../shared/openapi/, from the document and from
the compiled catalog, up to a served `tools/list` and a first TOOL_SEARCH.

Each measurement runs in a fresh interpreter (so imports count, as at a cold start), `--runs` times (median).
For each document:

- from the document: importing the server's core and `load_catalog(document)` (read, resolve `$ref`s, convert),
  then the progressive `Surface` (search index and meta-tools), its `tools/list` as the HTTP endpoint and the
  Lambda serve it (`tool_definitions`; the stdio server's SDK models import `mcp_types`, ~0.9 s more), and a
  first TOOL_SEARCH;
- from the compiled catalog (`progressive-mcp spec compile`, written to a temporary folder first): the same
  steps, and whether any OpenAPI tooling (`referencing`, `openapi_spec_validator`, the OpenAPI source) or a YAML
  parse was needed (it must not be);
- memory: the resident set's growth over the interpreter with the core's imports alone (what the catalog, index
  and surface keep: VmRSS), and the process's peak (VmHWM).

Budgets (issue 15, for DigitalOcean's 659 operations): ≤ 3 s to build from YAML, ≤ 300 ms from the compiled
JSON. Prints figures and a budget line, never pass/fail. Skips documents that are not there.

`--semantic off` (the default) runs the children with `PMCP_SEMANTIC=off`, as the Lambda runs (its asset has no
semantic extra), which is what the budgets are about; `--semantic on` adds what the extra costs the first search
(loading MiniLM and WordLlama, and from a document embedding every tool once).

Run with `make bench` or `.venv/bin/python bench/openapi.py [--runs 3] [--json] [DOCUMENT ...]`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the real documents' paths: one map, tests/real_documents.py
from real_documents import REAL  # noqa: E402

DOCUMENTS = {name: REAL[name] for name in ("spotify", "slack", "openai", "digitalocean", "stripe", "twilio")}
BUDGET_YAML_S = 3.0
BUDGET_COMPILED_S = 0.3

CHILD = textwrap.dedent(
    """
    import json, os, sys, time
    def rss_mb(field="VmRSS"):
        for line in open("/proc/self/status"):
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
        return 0.0
    started = time.perf_counter()
    from progressive_mcp.settings import Settings
    from progressive_mcp.surfaces.surface import CallContext, Surface
    from progressive_mcp.sources import load_catalog
    imported = time.perf_counter()
    base_rss = rss_mb()
    catalog = load_catalog(sys.argv[1])
    loaded = time.perf_counter()
    semantic = {"PMCP_SEMANTIC": os.environ["PMCP_SEMANTIC"]}
    surface = Surface.from_settings(Settings.from_env(semantic, spec_path=sys.argv[1], cache=False), catalog=catalog)
    listed = surface.tool_definitions()  # what the HTTP endpoint and the Lambda serve (no SDK models)
    served = time.perf_counter()
    answer = surface.call_tool_wire("TOOL_SEARCH", {"query": "list everything"}, CallContext(api_key=None))
    searched = time.perf_counter()
    assert not answer.get("isError"), answer
    tooling = sorted(m for m in ("referencing", "openapi_spec_validator", "progressive_mcp.sources.openapi")
                     if m in sys.modules)
    print(json.dumps({
        "tools": len(catalog), "categories": len(catalog.categories), "meta_tools": len(listed),
        "import_s": imported - started, "load_s": loaded - imported, "surface_s": served - loaded,
        "search_s": searched - served, "total_s": searched - imported,
        "peak_rss_mb": rss_mb("VmHWM"),
        "growth_mb": rss_mb() - base_rss,
        "openapi_tooling": tooling,
    }))
    """
)


def measure(path: Path, runs: int, semantic: str = "off") -> dict[str, Any]:
    samples = []
    env = {**os.environ, "PMCP_SEMANTIC": semantic}
    for _ in range(runs):
        result = subprocess.run(
            [sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, cwd=ROOT, check=False, env=env
        )
        if result.returncode != 0:
            raise SystemExit(f"{path}: {result.stderr.strip()[-2000:]}")
        samples.append(json.loads(result.stdout.strip().splitlines()[-1]))
    out = dict(samples[0])
    for key in ("import_s", "load_s", "surface_s", "search_s", "total_s", "peak_rss_mb", "growth_mb"):
        out[key] = statistics.median(s[key] for s in samples)
    return out


def compile_to(document: Path, folder: Path) -> Path:
    target = folder / (document.stem + ".catalog.json")
    subprocess.run(
        [sys.executable, "-m", "progressive_mcp.cli", "spec", "compile", str(document), "-o", str(target)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    return target


def report(documents: dict[str, Path], runs: int, semantic: str = "off") -> list[dict[str, Any]]:
    from progressive_mcp.sources import load_catalog_with_report

    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for name, path in documents.items():
            if not path.is_file():
                print(f"{name}: {path} not found; skipped", file=sys.stderr)
                continue
            _, loaded = load_catalog_with_report(path)
            assert loaded is not None
            compiled = compile_to(path, Path(folder))
            rows.append(
                {
                    "document": name,
                    "operations": loaded.operations,
                    "skipped": len(loaded.skipped),
                    "compiled_kb": compiled.stat().st_size // 1024,
                    "from_document": measure(path, runs, semantic),
                    "from_compiled": measure(compiled, runs, semantic),
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("documents", nargs="*", help="OpenAPI documents (default: those in ../shared/openapi/)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--semantic", choices=("off", "on"), default="off", help="PMCP_SEMANTIC for the children")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    # A document given by path keeps its short name when it is one of the shared ones (the budget line is
    # DigitalOcean's: `DigitalOcean-public.v2.yaml` is "digitalocean").
    known = {path.resolve(): name for name, path in DOCUMENTS.items()}
    documents = (
        {known.get(Path(d).resolve(), Path(d).stem): Path(d) for d in args.documents} if args.documents else DOCUMENTS
    )
    rows = report(documents, args.runs, args.semantic)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(
        f"OpenAPI catalogs (median of {args.runs} fresh interpreters; seconds after the core's imports; "
        f"PMCP_SEMANTIC={args.semantic})"
    )
    print(
        f"{'document':<13} {'ops':>4} {'tools':>5} {'skip':>4} | {'load':>6} {'+index':>6} {'total':>6} "
        f"{'RSS+MB':>6} {'peak':>5}"
        f" | compiled {'KB':>5} {'load':>6} {'total':>6} {'RSS+MB':>6} {'peak':>5} tooling"
    )
    for row in rows:
        doc, comp = row["from_document"], row["from_compiled"]
        print(
            f"{row['document']:<13} {row['operations']:>4} {doc['tools']:>5} {row['skipped']:>4} | "
            f"{doc['load_s']:>6.3f} {doc['surface_s'] + doc['search_s']:>6.3f} {doc['total_s']:>6.3f} "
            f"{doc['growth_mb']:>6.1f} {doc['peak_rss_mb']:>5.0f} | {'':8} {row['compiled_kb']:>5} "
            f"{comp['load_s']:>6.3f} "
            f"{comp['total_s']:>6.3f} {comp['growth_mb']:>6.1f} {comp['peak_rss_mb']:>5.0f} "
            f"{','.join(comp['openapi_tooling']) or 'none'}"
        )
    for row in rows:
        if row["document"] == "digitalocean":
            doc, comp = row["from_document"], row["from_compiled"]
            print(
                f"budget (DigitalOcean): from YAML {doc['total_s']:.2f} s (≤ {BUDGET_YAML_S:g} s), "
                f"compiled {comp['total_s'] * 1000:.0f} ms (≤ {BUDGET_COMPILED_S * 1000:.0f} ms)"
            )


if __name__ == "__main__":
    main()
