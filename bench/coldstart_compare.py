"""Our Lambda handler's cold import beside the official Alpha Vantage MCP server's; prints figures, never pass/fail.

Both sides run in the same CPython 3.13 (the official Lambda's runtime), each laid out as its Lambda's /var/task
with bytecode compiled by that interpreter (unchecked-hash, the favourable setting for both):

- ours: the host-platform build of our asset for 3.13 (infra.bundling, cached in .cache/lambda-asset/), and
  `import lambda_fn.handler` with PMCP_SPEC pointing at its compiled spec;
- official: a checkout of github.com/alphavantage/alpha_vantage_mcp (OFFICIAL_AV_DIR or --official-dir) laid out
  as its deploy workflow builds it: `pip install --target` of the closure uv.lock pins for marketdata-mcp-server,
  the mcp/ directory (the template's CodeUri) and api/src/av_api copied in, `/var/task/src` on the path; then
  `import lambda_function` (cached in .cache/official-av/<hash of uv.lock, mcp/, api/ and the Python>/).

Each run is a fresh `python3.13 -I -S -B -c SNIPPET` (no site-packages, no PYTHONPATH, no bytecode written, like
Lambda's read-only /var/task) with a minimal environment, the two sides alternating after one untimed warm-up
each. "Whole process" is timed from outside, spawn to exit; "import" is timed inside, around the import
statement alone; peak RSS comes from wait4. Medians (with min and max) over --runs runs, and ours / official.
The whole process also counts interpreter start (~10 ms) and teardown at exit (tens of ms, more with more modules),
which a Lambda init does not pay; the import alone is the closer figure for Lambda's init phase.

Run with `.venv/bin/python bench/coldstart_compare.py [--runs 15] [--official-dir DIR]`; without a checkout or a
CPython 3.13 it says what is missing and skips. The first run spends some seconds in pip.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from infra.bundling import (  # noqa: E402
    AssetInputs,
    BundleError,
    BundleTarget,
    compile_bytecode,
    ensure_built,
    find_bytecode_python,
    prune_cache,
)

RUNS = 15
PYTHON_VERSION = "3.13"  # the official template's Runtime: python3.13
SPEC = ROOT / "spec" / "alphavantage.yaml"
OFFICIAL_ENV = "OFFICIAL_AV_DIR"
OFFICIAL_REPO = "https://github.com/alphavantage/alpha_vantage_mcp"
OFFICIAL_PACKAGE = "marketdata-mcp-server"  # mcp/pyproject.toml: the Lambda's project in the uv workspace
CACHE = ROOT / ".cache" / "official-av"
CACHE_KEEP = 3  # official setups kept (each ~60 MB): the most recently used
SETUP_INFO = "setup-info.json"
LAYOUT = "task=deps+mcp/+av_api, compileall unchecked-hash, v1"  # change it to invalidate cached setups
WINDOWS_ONLY = re.compile(r"""^\s*(sys_platform\s*==\s*['"]win32['"]|platform_system\s*==\s*['"]Windows['"])\s*$""")
SKIPPED_IN_HASH = {"__pycache__", "node_modules"}

IMPORT_TIMER = """
import os, sys, time
sys.path[:0] = os.environ["IMPORT_PATH"].split(os.pathsep)
started = time.perf_counter()
import {module}
sys.stderr.write(f"\\n{{(time.perf_counter() - started) * 1000:.3f}}\\n")
"""


@dataclass(frozen=True)
class Side:
    """One server's cold import: what the fresh interpreter imports, from where, with which environment."""

    label: str
    module: str
    path: list[Path]
    env: dict[str, str]

    def command(self, python: str) -> list[str]:
        return [python, "-I", "-S", "-B", "-c", IMPORT_TIMER.format(module=self.module)]

    def environment(self) -> dict[str, str]:
        return {"PATH": "/usr/bin:/bin", "IMPORT_PATH": os.pathsep.join(map(str, self.path)), **self.env}


@dataclass
class Timings:
    whole_ms: list[float]
    import_ms: list[float]
    peak_rss_mb: list[float]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=RUNS, help=f"timed processes per side (default {RUNS})")
    parser.add_argument("--official-dir", type=Path, help=f"checkout of {OFFICIAL_REPO} (default ${OFFICIAL_ENV})")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")

    checkout = args.official_dir or (Path(os.environ[OFFICIAL_ENV]) if os.environ.get(OFFICIAL_ENV) else None)
    python, missing = _find_python()
    if checkout is None:
        clone = f"git clone {OFFICIAL_REPO}, then set {OFFICIAL_ENV} or pass --official-dir"
        missing.insert(0, f"no checkout of the official server: {clone}")
    elif not (checkout / "mcp" / "lambda_function.py").is_file() or not (checkout / "uv.lock").is_file():
        missing.insert(0, f"{checkout} is not a checkout of {OFFICIAL_REPO} (no mcp/lambda_function.py or uv.lock)")
    if missing or python is None or checkout is None:
        print(f"coldstart_compare: skipped: {'; '.join(missing)}")
        return 0
    checkout = checkout.resolve()
    python_full = _full_version(python)

    ours_asset = ensure_built(AssetInputs(ROOT, SPEC, BundleTarget.host(PYTHON_VERSION)))
    official_task = ensure_official(checkout, python, python_full)
    ours = Side(
        "ours",
        "lambda_fn.handler",
        [ours_asset],
        {"PMCP_SPEC": str(ours_asset / "spec" / "alphavantage.json"), "POWERTOOLS_LOG_LEVEL": "WARNING"},
    )
    official = Side("official", "lambda_function", [official_task, official_task / "src"], {})

    print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs, CPython {python_full} ({python})")
    print(f"ours:     {ours_asset}  (import {ours.module})")
    print(f"official: {official_task}  (import {official.module}; checkout {checkout})")
    timings = compare([ours, official], python, args.runs)
    report(timings["ours"], timings["official"], args.runs)
    return 0


def compare(sides: list[Side], python: str, runs: int) -> dict[str, Timings]:
    """Alternate fresh processes of each side, one untimed warm-up each first (page cache, not our code)."""
    timings = {side.label: Timings([], [], []) for side in sides}
    with tempfile.TemporaryFile() as stderr:
        for run in range(runs + 1):
            for side in sides:
                whole_ms, import_ms, peak_rss_mb = run_once(side, python, stderr)
                if run:
                    timings[side.label].whole_ms.append(whole_ms)
                    timings[side.label].import_ms.append(import_ms)
                    timings[side.label].peak_rss_mb.append(peak_rss_mb)
    return timings


def run_once(side: Side, python: str, stderr_file: IO[bytes]) -> tuple[float, float, float]:
    """(whole process ms, import ms, peak RSS MB) of one fresh interpreter importing `side`'s module."""
    stderr_file.seek(0)
    stderr_file.truncate()
    command, env = side.command(python), side.environment()
    started = time.perf_counter()
    process = subprocess.Popen(
        command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr_file
    )
    _pid, status, usage = os.wait4(process.pid, 0)  # Popen.wait() would not give the child's rusage
    whole_ms = (time.perf_counter() - started) * 1000
    process.returncode = os.waitstatus_to_exitcode(status)
    stderr_file.seek(0)
    stderr = stderr_file.read().decode(errors="replace")
    if process.returncode != 0:
        raise SystemExit(f"{side.label}: `import {side.module}` failed (exit {process.returncode}):\n{stderr[-3000:]}")
    import_ms = float(stderr.strip().splitlines()[-1])
    peak_rss_mb = usage.ru_maxrss / (1e6 if sys.platform == "darwin" else 1e3)  # bytes on macOS, KiB on Linux
    return whole_ms, import_ms, peak_rss_mb


def report(ours: Timings, official: Timings, runs: int) -> None:
    print(f"\n{runs} runs each, alternating, after one warm-up each:")
    print(f"  {'':<17}{'whole process (ms)':^24}  {'import alone (ms)':^24}  peak RSS")
    print(f"  {'':<17}{'median':>8}{'min':>8}{'max':>8}  {'median':>8}{'min':>8}{'max':>8}  {'median':>8}")
    for label, timings in (("ours", ours), ("official", official)):
        whole, imported = timings.whole_ms, timings.import_ms
        print(
            f"  {label:<17}{statistics.median(whole):8.1f}{min(whole):8.1f}{max(whole):8.1f}  "
            f"{statistics.median(imported):8.1f}{min(imported):8.1f}{max(imported):8.1f}  "
            f"{statistics.median(timings.peak_rss_mb):5.1f} MB"
        )
    ratios = [
        statistics.median(mine) / statistics.median(theirs)
        for mine, theirs in (
            (ours.whole_ms, official.whole_ms),
            (ours.import_ms, official.import_ms),
            (ours.peak_rss_mb, official.peak_rss_mb),
        )
    ]
    print(f"  {'ours / official':<17}{ratios[0]:8.2f}{'':16}  {ratios[1]:8.2f}{'':16}  {ratios[2]:8.2f}")


# --- the official server's setup --------------------------------------------------------------------------


def ensure_official(checkout: Path, python: str, python_full: str) -> Path:
    """The official Lambda's /var/task for this checkout and Python, set up first if needed (build, then rename)."""
    key = setup_key(checkout, python_full)
    final = CACHE / key
    if (final / SETUP_INFO).is_file():
        os.utime(final)  # mark as recently used, for pruning
        return final / "task"
    CACHE.mkdir(parents=True, exist_ok=True)
    partial = CACHE / f"{key}.partial-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    started = time.perf_counter()
    try:
        pins = pinned_closure(checkout / "uv.lock", OFFICIAL_PACKAGE)
        task = partial / "task"
        _log(f"installing the {len(pins)} packages uv.lock pins for {OFFICIAL_PACKAGE} into {task}")
        _pip_install(_pip_python(python), task, pins)
        # As .github/workflows/deploy.yml builds it: CodeUri mcp, with api/src/av_api copied beside it.
        shutil.copytree(checkout / "mcp", task, ignore=_ignore_caches, dirs_exist_ok=True)
        shutil.copytree(checkout / "api" / "src" / "av_api", task / "av_api", ignore=_ignore_caches, dirs_exist_ok=True)
        _log(f"copied mcp/ and api/src/av_api from {checkout}; compiling bytecode with CPython {python_full}")
        compile_bytecode(python, task, BundleTarget.host(PYTHON_VERSION), _log)
        info = {"checkout": str(checkout), "python": python_full, "layout": LAYOUT, "packages": pins}
        (partial / SETUP_INFO).write_text(json.dumps(info, indent=2))
        try:
            partial.rename(final)
        except OSError:  # set up concurrently by another process: theirs is as good as ours
            if not (final / SETUP_INFO).is_file():
                raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    _log(f"set up the official server in {time.perf_counter() - started:.1f} s: {final}")
    prune_cache(CACHE, CACHE_KEEP, marker=SETUP_INFO)
    return final / "task"


def setup_key(checkout: Path, python_full: str) -> str:
    """A short hash of what decides the setup: uv.lock, the mcp/ and api/ sources, the Python, the layout."""
    digest = hashlib.sha256()

    def add(label: str, data: bytes) -> None:
        digest.update(f"{label}\0{len(data)}\0".encode())
        digest.update(data)

    add("python", python_full.encode())
    add("layout", LAYOUT.encode())
    add("uv.lock", (checkout / "uv.lock").read_bytes())
    for top in ("mcp", "api"):
        for path in sorted((checkout / top).rglob("*")):
            relative = path.relative_to(checkout)
            if path.is_file() and not _is_cache(relative):
                add(relative.as_posix(), path.read_bytes())
    return digest.hexdigest()[:16]


def pinned_closure(lock: Path, root: str) -> list[str]:
    """`name==version` of every registry package `root` needs per uv.lock, less Windows-only ones and workspace ones."""
    packages: dict[str, list[dict[str, Any]]] = {}
    for package in tomllib.loads(lock.read_text(encoding="utf-8"))["package"]:
        packages.setdefault(package["name"], []).append(package)
    pins: set[str] = set()
    seen: set[tuple[str, str]] = set()
    pending: list[dict[str, Any]] = [{"name": root}]
    while pending:
        dependency = pending.pop()
        package = _locked(packages, dependency)
        name, version = str(package["name"]), str(package["version"])
        if (name, version) in seen:
            continue
        seen.add((name, version))
        if "registry" in package["source"]:
            pins.add(f"{name}=={version}")
        wanted = list(package.get("dependencies", []))
        optional = package.get("optional-dependencies", {})
        for extra in dependency.get("extra", []):
            wanted.extend(optional.get(extra, []))
        pending.extend(dep for dep in wanted if not WINDOWS_ONLY.match(dep.get("marker", "")))
    return sorted(pins)


def _locked(packages: dict[str, list[dict[str, Any]]], dependency: dict[str, Any]) -> dict[str, Any]:
    candidates = packages.get(str(dependency["name"]), [])
    if "version" in dependency:  # uv names the version when the lock holds several of one package
        candidates = [package for package in candidates if package["version"] == dependency["version"]]
    if len(candidates) != 1:
        raise SystemExit(f"uv.lock: cannot tell which {dependency['name']} is meant ({len(candidates)} candidates)")
    return candidates[0]


def _pip_python(python: str) -> str:
    """`python` if it has pip, else a venv of it in the cache (created once) that has."""
    if _has_pip(python):
        return python
    venv = CACHE / f"pip-venv-{PYTHON_VERSION}"
    venv_python = venv / "bin" / "python"
    if not _has_pip(str(venv_python)):
        _log(f"{python} has no pip: creating {venv}")
        shutil.rmtree(venv, ignore_errors=True)
        result = subprocess.run([python, "-m", "venv", str(venv)], capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise SystemExit(f"{python} has no pip and `-m venv` failed:\n{result.stderr[-2000:]}")
    return str(venv_python)


def _has_pip(python: str) -> bool:
    command = [python, "-m", "pip", "--version"]
    try:
        return subprocess.run(command, capture_output=True, check=False, stdin=subprocess.DEVNULL).returncode == 0
    except OSError:  # no such interpreter (a venv not created yet)
        return False


def _pip_install(python: str, target: Path, pins: list[str]) -> None:
    # --no-deps: the lock already names the whole closure, so pip installs exactly it; bytecode comes after.
    command = [python, "-m", "pip", "install", "--target", str(target), "--only-binary=:all:", "--no-deps"]
    command += ["--no-compile", "--disable-pip-version-check", "--quiet", *pins]
    result = subprocess.run(command, capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        errors = [line for line in result.stderr.splitlines() if not line.startswith("WARNING:")]
        raise SystemExit("pip could not install the official server's dependencies:\n" + "\n".join(errors[-30:]))


def _is_cache(relative: Path) -> bool:
    return any(part in SKIPPED_IN_HASH or part.startswith(".") for part in relative.parts) or relative.suffix == ".pyc"


def _ignore_caches(directory: str, names: list[str]) -> set[str]:
    return {name for name in names if _is_cache(Path(name))}


# --- helpers ----------------------------------------------------------------------------------------------


def _find_python() -> tuple[str | None, list[str]]:
    """The CPython 3.13 to run both sides with, and what is missing when there is none."""
    try:
        python = find_bytecode_python(PYTHON_VERSION)
    except BundleError as error:
        return None, [str(error)]
    if python is None:
        return None, [
            f"no CPython {PYTHON_VERSION} (install it with `pyenv install {PYTHON_VERSION}`, "
            f"or put python{PYTHON_VERSION} on PATH)"
        ]
    return python, []


def _full_version(python: str) -> str:
    command = [python, "-c", "import platform; print(platform.python_version())"]
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip()


def _log(message: str) -> None:
    print(f"coldstart_compare: {message}", file=sys.stderr)


if __name__ == "__main__":
    raise SystemExit(main())
