"""The Lambda asset: its size as deployed and the handler's cold import from it; prints figures, never pass/fail.

- size: the asset `cdk synth` ships with the default config (Lambda arm64), unzipped and zipped with DEFLATE
  at zlib's default level (what the CDK CLI's zip writer uses), and its ten largest top-level entries;
- cold import: `import lambda_fn.handler` (which builds the catalog and the default surface, as the Lambda init
  phase does) in a clean interpreter (`-I -S -B`: no site-packages, no PYTHONPATH, no bytecode written, like
  Lambda's read-only /var/task) from a host-platform build of the same asset, with bytecode compiled by this
  Python (as deployed when an interpreter of the runtime's version is found) and without (every module compiled
  at import, as deployed when none is), median of 7 runs each.

Run with `.venv/bin/python bench/asset.py`. Builds come from the bundler's cache (.cache/lambda-asset/) when
their inputs are unchanged; the first run may spend a few seconds in pip.
"""

from __future__ import annotations

import io
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from infra.bundling import AssetInputs, BundleTarget, asset_files, copy_tree, ensure_built  # noqa: E402
from infra.config import StackConfig  # noqa: E402

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


def cold_import(asset: Path) -> tuple[float, float]:
    """Median ms of (import lambda_fn.handler, first tools/list) over RUNS fresh clean interpreters."""
    env = {
        "PATH": "/usr/bin:/bin",
        "ASSET": str(asset),
        "EVENT": str(EVENT),
        "PMCP_SPEC": str(asset / "spec" / "alphavantage.json"),
        "POWERTOOLS_LOG_LEVEL": "WARNING",
    }
    imports, requests = [], []
    for _ in range(RUNS):
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


def mb(size: int) -> str:
    return f"{size / 1e6:6.1f} MB"


def main() -> int:
    config = StackConfig()
    lambda_inputs = AssetInputs(ROOT, SPEC, BundleTarget.lambda_arm64(config.python_runtime))
    deployed = ensure_built(lambda_inputs)
    info = json.loads((deployed / "asset-info.json").read_text())
    print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    print(f"\nLambda asset ({info['target']}, bytecode: {'yes' if info['bytecode'] else 'no'}): {deployed}")
    unzipped = tree_bytes(deployed)
    print(f"  unzipped {mb(unzipped)} ({unzipped:,} bytes)")
    zipped = zipped_bytes(deployed)
    print(f"  zipped   {mb(zipped)} ({zipped:,} bytes, DEFLATE, zlib default level)")
    print("  largest top-level entries (unzipped):")
    entries = sorted(((tree_bytes(path), path.name) for path in deployed.iterdir()), reverse=True)
    for size, name in entries[:10]:
        print(f"    {mb(size)}  {name}")

    print(f"\ncold start from a host-platform build ({BundleTarget.host().describe()}), median of {RUNS}:")
    print("  bytecode                 import handler   first tools/list")
    for label, bytecode in (("compiled (unchecked-hash)", True), ("none (compiled at import)", False)):
        built = ensure_built(AssetInputs(ROOT, SPEC, BundleTarget.host(), bytecode=bytecode))
        with tempfile.TemporaryDirectory(prefix="pmcp-asset-") as scratch:
            asset = Path(scratch) / "task"
            copy_tree(built, asset)
            imported_ms, answered_ms = cold_import(asset)
        print(f"  {label:<25} {imported_ms:8.0f} ms      {answered_ms:8.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
