"""The Lambda asset: its size as deployed and the handler's cold import from it; prints figures, never pass/fail.

- size: the asset `cdk synth` ships with the default config (Lambda arm64), unzipped and zipped with DEFLATE
  at zlib's default level (what the CDK CLI's zip writer uses), and its ten largest top-level entries;
- cold import: `import lambda_fn.handler` (which builds the catalog and the default surface, as the Lambda init
  phase does) in a clean interpreter (`-I -S -B`: no site-packages, no PYTHONPATH, no bytecode written, like
  Lambda's read-only /var/task) from a host-platform build of the same asset, with bytecode compiled by this
  Python (as deployed when an interpreter of the runtime's version is found) and without (every module compiled
  at import, as deployed when none is), median of 7 runs each;
- code mode: in the same kind of fresh interpreter (compiled bytecode, MONTY_BIN pointing at the asset's binary as
  the stack does, the offline sample upstream), the first TOOL_EXECUTE (imports pydantic_monty, starts the worker
  pool, type-checks and runs the script) against the later ones, medians over 7 processes; the script's one tool
  call is answered from the response cache (a TOOL_CALL put it there), so no upstream time is counted. Then where
  the first one's time goes, in a process that imported the handler: `import pydantic_monty`, starting the pool, a
  worker's first and second type-checked feeds of a trivial script (against one-line stubs).

- oauth: the asset of an oauth stack (the `oauth` extra: PyJWT and its crypto backend) against the default one:
  both totals against the 60 MB budget, every top-level entry only the oauth asset has (its bytecode included),
  and what the native libraries among them would weigh stripped of symbols (`llvm-strip --strip-unneeded`, on
  copies: measured, not applied).

Run with `.venv/bin/python bench/asset.py` (`--only code`, `--only cold`, `--only size` or `--only oauth` for one
part, the first three by default; `--runs N`).
Builds come from the bundler's cache (.cache/lambda-asset/) when their inputs are unchanged; the first run may
spend a few seconds in pip.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from infra.bundling import MONTY_BINARY, AssetInputs, BundleTarget, asset_files, copy_tree, ensure_built  # noqa: E402
from infra.config import StackConfig  # noqa: E402
from progressive_mcp.offline.sample_upstream import SampleUpstream  # noqa: E402

RUNS = 7
SPEC = ROOT / "spec" / "alphavantage.yaml"
EVENT = ROOT / "tests" / "fixtures" / "events" / "apigw_http_v2.json"
COLD_SNIPPET = """
import json, os, sys, time
sys.path.insert(0, os.environ["ASSET"])
started = time.perf_counter()
import lambda_fn.handler as h
imported = time.perf_counter()
result = h.handler(json.load(open(os.environ["EVENT"])), None)
answered = time.perf_counter()
assert result["statusCode"] == 200, result
sys.stderr.write(f"{(imported - started) * 1000:.1f} {(answered - imported) * 1000:.1f}\\n")
"""
SCRIPTS = 6  # TOOL_EXECUTEs per process: the first, then the later ones
SCRIPT = 'q = await GLOBAL_QUOTE(symbol="IBM")\nprint(q["Global Quote"]["01. symbol"])\nq["Global Quote"]["05. price"]'
CODE_SNIPPET = """
import json, os, sys, time
sys.path.insert(0, os.environ["ASSET"])
import lambda_fn.handler as h
assert "pydantic_monty" not in sys.modules
events = json.load(open(os.environ["EVENTS"]))
h.handler(events["warm"], None)  # a TOOL_CALL: the quote is then in the response cache
times = []
for event in events["scripts"]:
    started = time.perf_counter()
    result = h.handler(event, None)
    times.append((time.perf_counter() - started) * 1000)
    answer = json.loads(result["body"])["result"]["structuredContent"]
    assert answer["calls"][0]["cached"] is True, answer
sys.stderr.write(json.dumps(times) + "\\n")
"""
MONTY_SNIPPET = """
import os, sys, time
sys.path.insert(0, os.environ["ASSET"])
import lambda_fn.handler  # what is imported by then is not pydantic_monty's cost
marks = [time.perf_counter()]
import pydantic_monty
marks.append(time.perf_counter())
from progressive_mcp.calls.sandbox import POOL_WORKERS
pool = pydantic_monty.Monty(min_processes=1, max_processes=POOL_WORKERS, checkout_timeout=10)  # as Sandbox does
pool.__enter__()
marks.append(time.perf_counter())
for _ in range(2):
    with pool.checkout(type_check=True, type_check_stubs="async def F(*, a: int) -> int: ...") as session:
        session.feed_run("x = [i * i for i in range(100)]\\nsum(x)")
    marks.append(time.perf_counter())
sys.stderr.write(" ".join(f"{(b - a) * 1000:.1f}" for a, b in zip(marks, marks[1:])) + "\\n")
"""


def tree_bytes(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(file.stat().st_size for file in asset_files(path))


def zipped_bytes(asset: Path) -> int:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for file in sorted(asset_files(asset)):
            archive.write(file, file.relative_to(asset).as_posix())
    return buffer.getbuffer().nbytes


def cold_import(asset: Path, runs: int = RUNS) -> tuple[float, float]:
    """Median ms of (import lambda_fn.handler, first tools/list) over `runs` fresh clean interpreters."""
    env = {
        "PATH": "/usr/bin:/bin",
        "ASSET": str(asset),
        "EVENT": str(EVENT),
        "PMCP_SPEC": str(asset / "spec" / "alphavantage.json"),
        "POWERTOOLS_LOG_LEVEL": "WARNING",
    }
    imports, requests = [], []
    for _ in range(runs):
        completed = subprocess.run(
            [sys.executable, "-I", "-S", "-B", "-c", COLD_SNIPPET],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            stdin=subprocess.DEVNULL,
        )
        imported_ms, answered_ms = map(float, completed.stderr.strip().splitlines()[-1].split())
        imports.append(imported_ms)
        requests.append(answered_ms)
    return statistics.median(imports), statistics.median(requests)


def _clean_env(asset: Path, **extra: str) -> dict[str, str]:
    return {
        "PATH": "/usr/bin:/bin",
        "ASSET": str(asset),
        "PMCP_SPEC": str(asset / "spec" / "alphavantage.json"),
        "MONTY_BIN": str(asset / MONTY_BINARY),  # as the stack sets it (/var/task/bin/monty)
        "POWERTOOLS_LOG_LEVEL": "WARNING",
        "POWERTOOLS_METRICS_DISABLED": "true",
        **extra,
    }


def _run_clean(snippet: str, env: dict[str, str]) -> str:
    """The last line a fresh `-I -S -B` interpreter wrote on stderr."""
    completed = subprocess.run(
        [sys.executable, "-I", "-S", "-B", "-c", snippet],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    if completed.returncode != 0:
        raise SystemExit(f"the snippet failed:\n{completed.stderr[-3000:]}")
    return completed.stderr.strip().splitlines()[-1]


def _event(body: dict[str, object], query: str) -> dict[str, object]:
    event = json.loads(EVENT.read_text())
    event["body"] = json.dumps(body)
    event["headers"]["content-length"] = str(len(event["body"].encode()))
    event["headers"]["x-api-key"] = "bench-key-1234"
    event["rawQueryString"] = query
    return event


def _tools_call(name: str, arguments: dict[str, object], query: str = "") -> dict[str, object]:
    return _event(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}, query
    )


def code_mode(asset: Path, runs: int) -> tuple[float, float, list[float]]:
    """Medians over `runs` fresh processes: the first TOOL_EXECUTE, the later ones; and the first one's parts."""
    firsts, laters = [], []
    with SampleUpstream() as upstream, tempfile.TemporaryDirectory(prefix="pmcp-events-") as scratch:
        events = Path(scratch) / "events.json"
        warm = _tools_call("TOOL_CALL", {"tool_name": "GLOBAL_QUOTE", "arguments": {"symbol": "IBM"}})
        scripts = [_tools_call("TOOL_EXECUTE", {"code": SCRIPT}, "mode=code")] * SCRIPTS
        events.write_text(json.dumps({"warm": warm, "scripts": scripts}))
        env = _clean_env(asset, PMCP_UPSTREAM_URL=upstream.url, EVENTS=str(events))
        for _ in range(runs):
            times = json.loads(_run_clean(CODE_SNIPPET, env))
            firsts.append(times[0])
            laters.extend(times[1:])
    parts = [[float(x) for x in _run_clean(MONTY_SNIPPET, _clean_env(asset)).split()] for _ in range(runs)]
    return (
        statistics.median(firsts),
        statistics.median(laters),
        [statistics.median(p) for p in zip(*parts, strict=True)],
    )


def mb(size: int) -> str:
    return f"{size / 1e6:6.1f} MB"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=("size", "cold", "code", "oauth"), help="one part of the benchmark")
    parser.add_argument("--runs", type=int, default=RUNS, help=f"fresh processes per figure (default {RUNS})")
    args = parser.parse_args(argv)
    parts = {args.only} if args.only else {"size", "cold", "code"}
    print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    if "size" in parts:
        asset_size()
    if "oauth" in parts:
        oauth_size()
    if "cold" in parts:
        print(f"\ncold start from a host-platform build ({BundleTarget.host().describe()}), median of {args.runs}:")
        print("  bytecode                 import handler   first tools/list")
        for label, bytecode in (("compiled (unchecked-hash)", True), ("none (compiled at import)", False)):
            with _host_asset(bytecode) as asset:
                imported_ms, answered_ms = cold_import(asset, args.runs)
            print(f"  {label:<25} {imported_ms:8.0f} ms      {answered_ms:8.1f} ms")
    if "code" in parts:
        with _host_asset(True) as asset:
            first, later, (imported, started, first_feed, later_feed) = code_mode(asset, args.runs)
        print(f"\ncode mode from the host-platform build (compiled), medians over {args.runs} fresh processes:")
        print(f"  first TOOL_EXECUTE {first:8.1f} ms   (after import and a TOOL_CALL; its tool call cached)")
        print(f"  later TOOL_EXECUTE {later:8.1f} ms   (the next {SCRIPTS - 1} in each process)")
        print(f"  parts: import pydantic_monty {imported:.1f} ms (after the handler's), pool start {started:.1f} ms,")
        print(f"  a worker's first type-checked feed {first_feed:.1f} ms, its second {later_feed:.1f} ms")
    return 0


def asset_size() -> None:
    config = StackConfig()
    lambda_inputs = AssetInputs(ROOT, SPEC, BundleTarget.lambda_arm64(config.python_runtime))
    deployed = ensure_built(lambda_inputs)
    info = json.loads((deployed / "asset-info.json").read_text())
    print(f"\nLambda asset ({info['target']}, bytecode: {'yes' if info['bytecode'] else 'no'}): {deployed}")
    unzipped = tree_bytes(deployed)
    print(f"  unzipped {mb(unzipped)} ({unzipped:,} bytes)")
    zipped = zipped_bytes(deployed)
    print(f"  zipped   {mb(zipped)} ({zipped:,} bytes, DEFLATE, zlib default level)")
    print("  largest top-level entries (unzipped):")
    entries = sorted(((tree_bytes(path), path.name) for path in deployed.iterdir()), reverse=True)
    for size, name in entries[:10]:
        print(f"    {mb(size)}  {name}")


BUDGET_MB = 60  # DESIGN.md: the Lambda asset, unzipped, by default


def oauth_size() -> None:
    """What the `oauth` extra adds to the Lambda asset, entry by entry."""
    import shutil

    config = StackConfig()
    target = BundleTarget.lambda_arm64(config.python_runtime)
    default = ensure_built(AssetInputs(ROOT, SPEC, target))
    oauth = ensure_built(AssetInputs(ROOT, SPEC, target, oauth=True))
    totals = {name: tree_bytes(path) for name, path in (("default", default), ("oauth", oauth))}
    target_name = json.loads((oauth / "asset-info.json").read_text())["target"]
    print(f"\noauth asset against the default one ({target_name}):")
    for name, size in totals.items():
        over = size / 1e6 - BUDGET_MB
        print(f"  {name:<8} unzipped {mb(size)} ({size:,} bytes), {over:+.1f} MB against the {BUDGET_MB} MB budget")
    print(f"  the oauth extra adds {mb(totals['oauth'] - totals['default'])}; entries only the oauth asset has:")
    present = {path.name for path in default.iterdir()}
    added = sorted(((tree_bytes(p), p) for p in oauth.iterdir() if p.name not in present), reverse=True)
    for size, path in added:
        print(f"    {mb(size)}  {path.name}")
    strip = shutil.which("llvm-strip")  # reads any ELF, aarch64 included; a host `strip` may not
    files = [file for _, path in added for file in ([path] if path.is_file() else asset_files(path))]
    libraries = [file for file in files if ".so" in file.name]
    if strip is None or not libraries:
        print("  (no llvm-strip here: the stripped sizes are not measured)")
        return
    with tempfile.TemporaryDirectory(prefix="pmcp-strip-") as scratch:
        for library in libraries:
            copy = Path(scratch) / library.name
            subprocess.run([strip, "--strip-unneeded", str(library), "-o", str(copy)], check=True)
            before, after = library.stat().st_size, copy.stat().st_size
            print(f"  {library.relative_to(oauth)}: {mb(before)}, stripped {mb(after)} ({mb(before - after)} less)")


@contextlib.contextmanager
def _host_asset(bytecode: bool) -> Iterator[Path]:
    built = ensure_built(AssetInputs(ROOT, SPEC, BundleTarget.host(), bytecode=bytecode))
    with tempfile.TemporaryDirectory(prefix="pmcp-asset-") as scratch:
        asset = Path(scratch) / "task"
        copy_tree(built, asset)
        yield asset


if __name__ == "__main__":
    raise SystemExit(main())
