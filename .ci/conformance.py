"""Run the official MCP conformance suite against `progressive-mcp serve`, for both protocol eras.

Installs what it needs from npm into a cache directory (the suite needs Node 22 or newer; when the
system Node is older, Node itself comes from the `node-linux-<arch>` npm package), starts the local
HTTP endpoint against the offline sample upstream, runs each scenario, and exits non-zero if any
check fails. Usage (the venv's Python): `make conformance`, or

    .venv/bin/python .ci/conformance.py [--keep DIR]

Environment: PMCP_CONFORMANCE_CACHE (default .cache/conformance).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NODE_VERSION = "22.23.3"
# (suite version, extra CLI flags, scenarios). The 2026-07-28 checks only exist in the 0.2 alphas.
RUNS = [
    ("0.1.16", [], ["server-initialize", "ping", "tools-list", "dns-rebinding-protection"]),
    (
        "0.2.0-alpha.12",
        ["--spec-version", "2026-07-28"],
        ["server-stateless", "tools-list", "http-header-validation", "caching", "dns-rebinding-protection"],
    ),
]


def npm_install(cache: Path, folder: str, package: str, version: str) -> Path:
    """Install package@version under cache/folder (once) and return its package directory."""
    target = cache / folder
    installed = target / "node_modules" / package
    manifest = installed / "package.json"
    if manifest.exists() and json.loads(manifest.read_text()).get("version") == version:
        return installed
    target.mkdir(parents=True, exist_ok=True)
    (target / "package.json").write_text('{"private": true}\n')
    print(f"[conformance] npm install {package}@{version}", flush=True)
    subprocess.run(
        ["npm", "install", "--no-save", "--no-audit", "--no-fund", "--loglevel=error", f"{package}@{version}"],
        cwd=target,
        check=True,
    )
    return installed


def node22(cache: Path) -> str:
    """A Node binary of version 22 or newer: the system one if new enough, else one from npm."""
    system = shutil.which("node")
    if system:
        major = subprocess.run([system, "-p", "process.versions.node.split('.')[0]"], capture_output=True, text=True)
        if major.returncode == 0 and int(major.stdout.strip() or 0) >= 22:
            return system
    arch = "arm64" if platform.machine() in ("aarch64", "arm64") else "x64"
    package = npm_install(cache, "node22", f"node-linux-{arch}", NODE_VERSION)
    return str(package / "bin" / "node")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until_up(url: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(urllib.request.Request(url, data=b"{}", method="POST"), timeout=1)
            return
        except urllib.error.HTTPError:
            return  # it answered (a 400 for the empty message is fine)
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"[conformance] nothing answered at {url}")


def summarize(out: Path) -> tuple[int, int, list[str]]:
    passed, failed, lines = 0, 0, []
    for checks_file in sorted(out.rglob("checks.json")):
        for check in json.loads(checks_file.read_text()):
            if check["status"] == "SUCCESS":
                passed += 1
            elif check["status"] == "FAILURE":
                failed += 1
                lines.append(f"  FAIL {check['id']}: {(check.get('errorMessage') or '')[:300]}")
    return passed, failed, lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", help="directory for the suite's results (default: a temporary one)")
    args = parser.parse_args()
    cache = Path(os.environ.get("PMCP_CONFORMANCE_CACHE", ROOT / ".cache" / "conformance")).resolve()
    node = node22(cache)
    out_root = Path(args.keep or tempfile.mkdtemp(prefix="pmcp-conformance-"))
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    server_log = out_root / "serve.log"
    out_root.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "progressive_mcp.cli", "serve", "--port", str(port)]
    command += ["--sample-upstream", "--conformance-fixtures", "--log-level", "WARNING"]
    with server_log.open("w") as log:
        server = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    total_passed = total_failed = 0
    try:
        wait_until_up(url)
        for version, flags, scenarios in RUNS:
            suite = npm_install(cache, f"conformance-{version}", "@modelcontextprotocol/conformance", version)
            cli = str(suite / "dist" / "index.js")
            for scenario in scenarios:
                out = out_root / version / scenario
                run = subprocess.run(
                    [node, cli, "server", "--url", url, "--scenario", scenario, "-o", str(out), *flags],
                    capture_output=True,
                    text=True,
                    timeout=300,
                )
                passed, failed, lines = summarize(out)
                if passed + failed == 0:
                    failed = 1
                    lines.append(f"  no checks ran; the suite said: {(run.stdout + run.stderr)[-600:]}")
                total_passed += passed
                total_failed += failed
                print(f"{'FAIL' if failed else 'ok  '} {version} {scenario}: {passed} passed, {failed} failed")
                if lines:
                    print("\n".join(lines))
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
    print(f"conformance against {url}: {total_passed} passed, {total_failed} failed (results in {out_root})")
    return 1 if total_failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
