"""The Lambda asset the bundler builds (infra/bundling.py): what it holds, and that the handler runs from it alone.

A host-platform asset (this machine, this Python, no --platform) is copied into a temporary directory and the
handler is imported and invoked from it in a clean interpreter (`-I -S`: no site-packages, no PYTHONPATH), so
anything the asset lacks fails the import; code mode's scripts run there on the asset's own pydantic_monty client
and monty binary, over several invocations of one instance (frozen and thawed, its workers killed). The real asset
(Lambda aarch64, the runtime's Python) is checked for what it must and must not contain. Both come from the
bundler's cache when their inputs are unchanged.

Run with: .venv/bin/python -m pytest tests/test_bundle.py -q
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from infra import bundling
from infra.bundling import (
    ASSET_INFO,
    LOCAL_ONLY_FILES,
    MONTY_BINARY,
    AssetInputs,
    BundleError,
    BundleTarget,
    asset_files,
    copy_tree,
    ensure_built,
    find_bytecode_python,
    runtime_requirements,
)
from infra.config import StackConfig
from progressive_mcp.offline.sample_upstream import SampleUpstream
from progressive_mcp.surfaces.metatools import META_TOOL_NAMES

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "spec" / "alphavantage.yaml"
EVENT = ROOT / "tests" / "fixtures" / "events" / "apigw_http_v2.json"
# Top-level entries that must never ship: the SDK's server stack, the runtime's boto3, CDK, test tools.
FORBIDDEN: tuple[str, ...] = (
    "mcp",
    "boto3",
    "botocore",
    "s3transfer",
    "aws_cdk",
    "cdk_nag",
    "jsii",
    "constructs",
    "pytest",
)
FORBIDDEN += ("_pytest", "moto")
AARCH64 = 0xB7  # ELF e_machine of AArch64
X86_64 = 0x3E
# The Lambda Python 3.13 runtime is Amazon Linux 2023: glibc 2.34. A manylinux_2_X wheel needs glibc >= 2.X.
LAMBDA_GLIBC = (2, 34)

INVOKE = """
import json, os, sys
sys.path.insert(0, os.environ["ASSET"])
import lambda_fn.handler as h
event = json.load(open(os.environ["EVENT"]))
result = h.handler(event, None)
try:
    import boto3
    boto3_importable = True
except ImportError:
    boto3_importable = False
print(json.dumps({"result": result, "boto3": boto3_importable, "handler_file": h.__file__,
                  "monty": sorted(m for m in sys.modules if m.split(".")[0] == "pydantic_monty")}))
"""
# A Lambda execution environment in miniature: the handler imported once from the asset, then one event per line
# of stdin, each answered with a line "ANSWER <json>" on stdout (Powertools' log and EMF lines go there too),
# saying which pydantic_monty was imported and which programs this process's children (the workers) run.
SERVE = """
import json, os, sys
sys.path.insert(0, os.environ["ASSET"])
import lambda_fn.handler as h

def children():
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as stat:
                ppid = int(stat.read().rpartition(")")[2].split()[1])
            if ppid == os.getpid():
                found[pid] = os.path.realpath(f"/proc/{pid}/exe")
        except OSError:
            pass
    return found

def answer(result):
    monty = sys.modules.get("pydantic_monty")
    state = {"result": result, "monty": monty and monty.__file__, "workers": children()}
    print("ANSWER " + json.dumps(state), flush=True)

answer(None)
for line in sys.stdin:
    answer(h.handler(json.loads(line), None))
"""


@pytest.fixture(scope="module")
def host_asset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    built = ensure_built(AssetInputs(root=ROOT, spec=SPEC, target=BundleTarget.host()))
    asset = tmp_path_factory.mktemp("host-asset")
    copy_tree(built, asset)
    return asset


@pytest.fixture(scope="module")
def lambda_asset() -> Path:
    """The asset `cdk synth` ships with the default config (Lambda arm64, the configured Python)."""
    target = BundleTarget.lambda_arm64(StackConfig().python_runtime)
    return ensure_built(AssetInputs(root=ROOT, spec=SPEC, target=target))


def _top_level(asset: Path) -> set[str]:
    return {path.name for path in asset.iterdir()}


def _elf_machine(path: Path) -> int:
    header = path.read_bytes()[:20]
    assert header[:4] == b"\x7fELF", path
    return int.from_bytes(header[18:20], "little")


@pytest.mark.slow  # builds the Lambda asset (pip installs its dependencies)
def test_handler_answers_tools_list_from_the_asset_alone(host_asset: Path) -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "ASSET": str(host_asset),
        "EVENT": str(EVENT),
        "PMCP_SPEC": str(host_asset / "spec" / "alphavantage.json"),
        "POWERTOOLS_LOG_LEVEL": "WARNING",
    }
    completed = subprocess.run(
        [sys.executable, "-I", "-S", "-c", INVOKE], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert completed.returncode == 0, completed.stderr
    answer = json.loads(completed.stdout.strip().splitlines()[-1])
    assert answer["handler_file"].startswith(str(host_asset))
    result = answer["result"]
    assert result["statusCode"] == 200
    tools = json.loads(result["body"])["result"]["tools"]
    assert [tool["name"] for tool in tools] == list(META_TOOL_NAMES)
    assert len(tools) == 4
    # Without AWS settings the handler never needs boto3, and the asset does not carry it.
    assert answer["boto3"] is False
    # Code mode's sandbox is imported with the first script, never at a cold start.
    assert answer["monty"] == []


def _code_event(body: dict[str, Any], *, query: str = "mode=code") -> dict[str, Any]:
    """The fixture event with a JSON-RPC body, ?mode=code and a caller's key (passthrough, the default)."""
    event = json.loads(EVENT.read_text())
    event["body"] = json.dumps(body)
    event["headers"]["content-length"] = str(len(event["body"].encode()))
    event["headers"]["x-api-key"] = "demo-key-1234"
    event["rawQueryString"] = query
    return event


def _execute(code: str) -> dict[str, Any]:
    arguments = {"name": "TOOL_EXECUTE", "arguments": {"code": code}}
    return _code_event({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": arguments})


class _Instance:
    """The SERVE loop in a clean interpreter from the asset, in a session of its own (so it can be frozen whole)."""

    def __init__(self, asset: Path, upstream: SampleUpstream) -> None:
        self.upstream = upstream
        env = {
            "PATH": "/usr/bin:/bin",
            "ASSET": str(asset),
            "PMCP_SPEC": str(asset / "spec" / "alphavantage.json"),
            "PMCP_UPSTREAM_URL": upstream.url,
            "MONTY_BIN": str(asset / MONTY_BINARY),  # as the stack sets it: /var/task/bin/monty
            "POWERTOOLS_LOG_LEVEL": "WARNING",
        }
        self.lines: list[str] = []  # what else the handler printed: its EMF metrics
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", SERVE],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

    def _pipe(self, pipe: IO[str] | None) -> IO[str]:
        assert pipe is not None
        return pipe

    def read(self) -> dict[str, Any]:
        for line in self._pipe(self.process.stdout):
            if line.startswith("ANSWER "):
                answer: dict[str, Any] = json.loads(line.removeprefix("ANSWER "))
                return answer
            self.lines.append(line)
        raise AssertionError(f"the handler stopped: {self._pipe(self.process.stderr).read()[-3000:]}")

    def send(self, event: dict[str, Any]) -> None:
        stdin = self._pipe(self.process.stdin)
        stdin.write(json.dumps(event) + "\n")
        stdin.flush()

    def invoke(self, event: dict[str, Any]) -> dict[str, Any]:
        self.send(event)
        return self.read()

    def close(self) -> None:
        self._pipe(self.process.stdin).close()
        try:
            self.process.wait(timeout=20)
        finally:
            if self.process.poll() is None:
                self.process.kill()


@pytest.fixture
def instance(host_asset: Path) -> Iterator[_Instance]:
    with SampleUpstream() as upstream:
        running = _Instance(host_asset, upstream)
        try:
            yield running
        finally:
            running.close()


def _script_answer(state: dict[str, Any]) -> dict[str, Any]:
    result = state["result"]
    assert result["statusCode"] == 200, result
    answer: dict[str, Any] = json.loads(result["body"])["result"]
    assert answer["isError"] is False, answer
    return dict(answer["structuredContent"])


@pytest.mark.slow
def test_code_mode_runs_from_the_asset_alone_and_survives_freezes_and_dead_workers(
    host_asset: Path, instance: _Instance
) -> None:
    """TOOL_EXECUTE through the handler with the asset's own client and monty binary (MONTY_BIN as the stack sets
    it), imported only by the first script; then as Lambda may go on: the whole instance frozen and thawed between
    invocations, and a worker gone (killed) just before the next script."""
    started = instance.read()
    assert started["monty"] is None  # the cold start does not import the sandbox
    listed = instance.invoke(_code_event({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
    assert "TOOL_EXECUTE" in [tool["name"] for tool in json.loads(listed["result"]["body"])["result"]["tools"]]
    assert listed["monty"] is None  # nor does building the code-mode surface

    script = (
        "import asyncio\n"
        'quotes = await asyncio.gather(*[GLOBAL_QUOTE(symbol=s) for s in ["IBM", "AAPL"]])\n'
        "print(len(quotes))\n"
        '[q["Global Quote"]["01. symbol"] for q in quotes]'
    )
    first = instance.invoke(_execute(script))
    answer = _script_answer(first)
    assert answer["result"] == ["IBM", "AAPL"] and answer["printed"] == "2\n"
    assert [call["cached"] for call in answer["calls"]] == [False, False]
    assert first["monty"].startswith(str(host_asset) + os.sep)  # the client: the asset's
    workers = first["workers"]
    assert workers and set(workers.values()) == {str((host_asset / MONTY_BINARY).resolve())}  # the binary: too
    requests = [json.loads(line) for line in instance.lines if line.startswith('{"_aws"') and '"Requests"' in line]
    assert requests[-1]["tool"] == "TOOL_EXECUTE"  # a metric dimension of its own, not "other"

    # Frozen whole between invocations (handler and workers alike), as Lambda does, then thawed.
    os.killpg(instance.process.pid, signal.SIGSTOP)
    time.sleep(0.5)
    os.killpg(instance.process.pid, signal.SIGCONT)
    thawed = instance.invoke(_execute(script))
    assert _script_answer(thawed)["result"] == ["IBM", "AAPL"]
    assert thawed["workers"] == workers  # the same workers go on serving

    # Workers gone just before a script (killed, say): the pool replaces them; a script handed a dead one before
    # the pool noticed runs again on a fresh one (it had made no tool call yet).
    for pid in workers:
        os.kill(int(pid), signal.SIGKILL)
    again = instance.invoke(_execute(script))
    assert _script_answer(again)["result"] == ["IBM", "AAPL"]
    assert again["workers"] and not set(again["workers"]) & set(workers)


@pytest.mark.slow
def test_a_script_whose_worker_dies_after_a_tool_call_fails_and_is_not_run_again(instance: _Instance) -> None:
    """Once a script has called a tool, a second run could repeat the call: its worker's death is its error."""
    instance.read()
    instance.upstream.faults.delay_s = 1.0
    instance.send(_execute('q = await GLOBAL_QUOTE(symbol="MSFT")\nq["Global Quote"]["01. symbol"]'))
    instance.upstream.wait_for_requests(within_s=20)  # the script waits on its call
    workers = [int(pid) for pid in _children(instance.process.pid)]
    assert workers
    for pid in workers:
        os.kill(pid, signal.SIGKILL)
    state = instance.read()
    assert state["result"]["statusCode"] == 200
    answer = json.loads(state["result"]["body"])["result"]
    assert answer["isError"] is True, answer
    assert answer["structuredContent"]["error"]["kind"] == "runtime", answer
    assert len(instance.upstream.requests) == 1  # not repeated
    instance.upstream.faults.delay_s = 0.0
    after = instance.invoke(_execute('q = await GLOBAL_QUOTE(symbol="MSFT")\nq["Global Quote"]["01. symbol"]'))
    assert _script_answer(after)["result"] == "MSFT"  # the pool has a new worker


def _children(parent: int) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if int(stat.rpartition(")")[2].split()[1]) == parent:
            found.append(pid)
    return found


@pytest.mark.slow  # builds the Lambda asset (pip installs its dependencies)
def test_asset_holds_the_handler_code_and_runtime_dependencies_only(host_asset: Path) -> None:
    top = _top_level(host_asset)
    for forbidden in FORBIDDEN:
        assert forbidden not in top, forbidden
    assert not [name for name in top if name.lower().startswith(("boto3-", "botocore-", "mcp-2", "aws_cdk"))]
    for wanted in ("progressive_mcp", "lambda_fn", "aws_lambda_powertools", "jsonschema_rs", "pydantic_monty", "httpx"):
        assert wanted in top, wanted
    # What the Lambda never imports (issue 18): the SDK and its types (the endpoint speaks MCP from a snapshot of
    # them), pydantic (the catalog ships compiled), YAML, the 77 MB of BPE vocabularies (a bound checks budgets).
    for left_out in ("mcp", "mcp_types", "pydantic", "pydantic_core", "yaml", "bpe_openai"):
        assert left_out not in top, left_out
    for pruned in bundling.PRUNED_PATHS:
        assert not (host_asset / pruned).exists(), pruned
    assert (host_asset / "aws_lambda_powertools" / "utilities" / "parameters").is_dir()  # secrets: kept
    assert not list(host_asset.glob("*.dist-info/sboms"))
    for local_only in LOCAL_ONLY_FILES:
        assert not (host_asset / local_only).exists(), local_only
    assert not list(host_asset.rglob("*.onnx"))  # the search model (22 MB) stays out: no onnxruntime to run it
    assert [path.name for path in (host_asset / "bin").iterdir()] == ["monty"]  # no console scripts but monty
    assert not list(host_asset.rglob("tests"))
    compiled = json.loads((host_asset / "spec" / "alphavantage.json").read_text())
    assert compiled["tools"] and "progressive_mcp_catalog" in compiled  # a compiled catalog, not the spec


@pytest.mark.slow  # builds the Lambda asset (pip installs its dependencies)
def test_host_asset_has_bytecode_of_this_python_only(host_asset: Path) -> None:
    assert json.loads((host_asset / ASSET_INFO).read_text())["bytecode"] is True
    tag = sys.implementation.cache_tag
    pycs = [path for path in asset_files(host_asset) if path.suffix == ".pyc"]
    assert (host_asset / "lambda_fn" / "__pycache__" / f"handler.{tag}.pyc").is_file()
    assert pycs and all(f".{tag}." in path.name for path in pycs)


@pytest.mark.slow  # builds the Lambda asset (pip installs its dependencies)
def test_lambda_asset_is_aarch64_for_the_runtime_python(lambda_asset: Path) -> None:
    info = json.loads((lambda_asset / ASSET_INFO).read_text())
    version = StackConfig().python_runtime
    assert info["python_version"] == version
    shared = [path for path in asset_files(lambda_asset) if ".so" in path.suffixes]
    assert shared
    assert {_elf_machine(path) for path in shared} == {AARCH64}
    cpython_tag = f"cpython-{version.replace('.', '')}-aarch64-linux-gnu"
    assert list((lambda_asset / "pydantic_monty").glob(f"_monty.{cpython_tag}.so"))
    assert not [path for path in shared if "x86_64" in path.name]
    spec = json.loads((lambda_asset / "spec" / "alphavantage.json").read_text())
    assert len(spec["tools"]) > 100
    for forbidden in FORBIDDEN:
        assert forbidden not in _top_level(lambda_asset), forbidden


@pytest.mark.slow  # builds the Lambda asset (pip installs its dependencies)
def test_lambda_asset_carries_code_modes_aarch64_client_and_monty_binary(lambda_asset: Path) -> None:
    tag = f"cpython-{StackConfig().python_runtime.replace('.', '')}-aarch64-linux-gnu"
    [client] = (lambda_asset / "pydantic_monty").glob(f"_monty.{tag}.so")
    assert _elf_machine(client) == AARCH64
    binary = lambda_asset / MONTY_BINARY
    assert [path.name for path in binary.parent.iterdir()] == ["monty"]
    assert _elf_machine(binary) == AARCH64
    assert binary.stat().st_mode & 0o777 == 0o755  # CDK's zip keeps the mode; Lambda's user is not the owner
    # The binary's wheel says which glibc it needs at least; the runtime's must be as new.
    [wheel] = lambda_asset.glob("pydantic_monty_runtime-*.dist-info/WHEEL")
    [platform] = [line.split("-")[-1] for line in wheel.read_text().splitlines() if line.startswith("Tag:")]
    glibc = re.fullmatch(r"manylinux_(\d+)_(\d+)_aarch64", platform.replace("manylinux2014", "manylinux_2_17"))
    assert glibc and (int(glibc[1]), int(glibc[2])) <= LAMBDA_GLIBC, platform
    # The client's optional telemetry (opentelemetry-api) is not pulled in; typing_extensions is (pydantic's too).
    top = _top_level(lambda_asset)
    assert "opentelemetry" not in top
    assert "typing_extensions.py" in top


@pytest.mark.slow  # builds the Lambda asset (pip installs its dependencies)
def test_lambda_asset_bytecode_is_for_the_runtime_or_absent(lambda_asset: Path) -> None:
    info = json.loads((lambda_asset / ASSET_INFO).read_text())
    pycs = [path for path in asset_files(lambda_asset) if path.suffix == ".pyc"]
    tag = f"cpython-{info['python_version'].replace('.', '')}"
    if info["bytecode"]:
        assert (lambda_asset / "lambda_fn" / "__pycache__" / f"handler.{tag}.pyc").is_file()
        assert all(f".{tag}." in path.name for path in pycs)
    else:  # no interpreter of that version here: none at all, never another version's
        assert pycs == []
        assert find_bytecode_python(info["python_version"]) is None


def test_runtime_requirements_drop_the_sdk_and_add_powertools() -> None:
    requirements = runtime_requirements(ROOT / "pyproject.toml")
    names = [bundling._requirement_name(req) for req in requirements]
    assert not {"mcp", "mcp-types", "pydantic", "pyyaml"} & set(names)
    assert {"aws-lambda-powertools", "jsonschema-rs", "pydantic-monty", "httpx"} <= set(names)
    assert not {"boto3", "botocore"} & set(names)
    gateway = [bundling._requirement_name(req) for req in runtime_requirements(ROOT / "pyproject.toml", gateway=True)]
    assert set(gateway) == {*names, "mcp"}  # the SDK's client, which brings mcp-types and pydantic along


def test_runtime_requirements_leave_out_the_semantic_extra() -> None:
    # The dense search signal (wordllama, and numpy and tokenizers through it) is an optional extra: the asset
    # carries only [project].dependencies and Powertools, so neither the requirements nor their pins name it.
    requirements = runtime_requirements(ROOT / "pyproject.toml")
    names = {bundling._requirement_name(req) for req in requirements}
    pinned = {pin.partition("==")[0] for pin in bundling.pinned_constraints(requirements)}
    assert not {"wordllama", "numpy", "tokenizers", "safetensors"} & (names | pinned)


def test_runtime_requirements_refuse_boto3(tmp_path: Path) -> None:
    pyproject = (ROOT / "pyproject.toml").read_text().replace('"httpx>=0.28,<0.29",', '"httpx>=0.28,<0.29", "boto3",')
    assert '"boto3",' in pyproject
    (tmp_path / "pyproject.toml").write_text(pyproject)
    with pytest.raises(BundleError, match="provided by the Lambda runtime"):
        runtime_requirements(tmp_path / "pyproject.toml")


def test_fingerprint_follows_sources_spec_and_target_but_not_caches(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    for package in bundling.PACKAGES:
        shutil.copytree(ROOT / package, root / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    shutil.copytree(ROOT / "spec", root / "spec")
    target = BundleTarget.lambda_arm64("3.14")

    def fingerprint(**changes: object) -> str:
        inputs = AssetInputs(root=root, spec=root / "spec" / "alphavantage.yaml", target=target, bytecode=False)
        return AssetInputs(**{**inputs.__dict__, **changes}).fingerprint()  # type: ignore[arg-type]

    first = fingerprint()
    (root / "lambda_fn" / "__pycache__").mkdir()
    (root / "lambda_fn" / "__pycache__" / "handler.cpython-311.pyc").write_bytes(b"stale")
    (root / "lambda_fn" / "local.py").write_text("# local only, not shipped\n")
    assert fingerprint() == first
    assert fingerprint(target=BundleTarget.lambda_arm64("3.13")) != first
    assert fingerprint(target=BundleTarget.host()) != first
    (root / "progressive_mcp" / "errors.py").write_text("# changed\n", encoding="utf-8")
    second = fingerprint()
    assert second != first
    (root / "spec" / "alphavantage.yaml").write_text("changed: true\n")
    assert fingerprint() != second


def test_spec_files_follow_references_into_nested_folders(tmp_path: Path) -> None:
    """A split OpenAPI document (DigitalOcean's spans ~2,900 files in nested folders) and a vocabulary kept in a
    subfolder: a change to any file the spec reaches rebuilds the asset; files it never names do not."""
    api = tmp_path / "api"
    (api / "resources" / "things" / "models").mkdir(parents=True)
    (api / "search").mkdir()
    (api / "unrelated").mkdir()
    (api / "openapi.yaml").write_text(
        "paths:\n  /things:\n    $ref: 'resources/things/things.yml'\n"
        'x-more: {"$ref": "resources/things/list%20view.json#/get"}\n'
        "remote:\n  $ref: https://example.com/other.yaml\n"
    )
    (api / "resources" / "things" / "things.yml").write_text("get:\n  $ref: models/thing.yml#/Thing\n")
    (api / "resources" / "things" / "list view.json").write_text('{"get": {"$ref": "../../openapi.yaml#/paths"}}')
    (api / "resources" / "things" / "models" / "thing.yml").write_text("Thing: {type: object}\n")
    (api / "search" / "words.yaml").write_text("synonyms: {}\n")
    (api / "unrelated" / "notes.yml").write_text("not: named\n")
    (tmp_path / "common.yaml").write_text("Shared: {type: object}\n")  # outside the spec's folder
    (api / "openapi.yaml").write_text(
        (api / "openapi.yaml").read_text()
        + "search:\n  vocabulary: search/words.yaml\nshared:\n  $ref: ../common.yaml#/Shared\n"
    )
    found = [os.path.relpath(path, api.resolve()) for path in bundling.spec_files(api / "openapi.yaml")]
    assert found == [  # sorted by absolute path
        "resources/things/list view.json",
        "resources/things/models/thing.yml",
        "resources/things/things.yml",
        "search/words.yaml",
        "../common.yaml",
    ]
    root = tmp_path / "repo"
    for package in bundling.PACKAGES:
        shutil.copytree(ROOT / package, root / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    inputs = AssetInputs(root=root, spec=api / "openapi.yaml", target=BundleTarget.host(), bytecode=False)
    first = inputs.fingerprint()
    (api / "unrelated" / "notes.yml").write_text("still: not named\n")
    assert inputs.fingerprint() == first
    (api / "resources" / "things" / "models" / "thing.yml").write_text("Thing: {type: string}\n")
    second = inputs.fingerprint()
    assert second != first
    (api / "search" / "words.yaml").write_text("synonyms: {band: [artist]}\n")
    third = inputs.fingerprint()
    assert third != second
    (tmp_path / "common.yaml").write_text("Shared: {type: string}\n")
    assert inputs.fingerprint() != third


@pytest.mark.spawns
def test_bytecode_interpreter_lookup(monkeypatch: pytest.MonkeyPatch) -> None:
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    monkeypatch.delenv(bundling.BUNDLE_PYTHON_ENV, raising=False)
    assert find_bytecode_python(here) == sys.executable
    assert find_bytecode_python("3.99") is None
    monkeypatch.setenv(bundling.BUNDLE_PYTHON_ENV, sys.executable)
    assert find_bytecode_python(here) == sys.executable
    with pytest.raises(BundleError, match=f"is {here}, not 3.99"):
        find_bytecode_python("3.99")


def test_host_target_for_another_python_asks_pip_for_that_pythons_wheels() -> None:
    """bench/coldstart_compare.py builds the asset for this machine and CPython 3.13 from a 3.11 venv."""
    assert BundleTarget.host().pip_args() == ["--only-binary=:all:"]
    args = BundleTarget.host("3.99").pip_args()
    assert "--python-version=3.99" in args and "--implementation=cp" in args
    assert f"--platform=manylinux2014_{os.uname().machine}" in args
    assert BundleTarget.host("3.99").describe().endswith("CPython 3.99")


@pytest.mark.slow
def test_without_a_package_index_the_build_says_so_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`make synth` on a machine without a package index: one line that says why, not pip's whole output."""
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")  # nothing listens on the discard port
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "2")
    inputs = AssetInputs(root=ROOT, spec=SPEC, target=BundleTarget.lambda_arm64("3.13"), cache_dir=tmp_path)
    with pytest.raises(BundleError) as raised:
        ensure_built(inputs)
    message = str(raised.value)
    assert message.startswith(bundling.NEEDS_INDEX)
    assert "\n" not in message and len(message) < 500


def test_synth_turns_the_wrapped_bundling_error_into_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from infra import app

    wrapped = f"Failed to bundle asset X: @jsii/kernel.RuntimeError: {bundling.NEEDS_INDEX} (target); pip said: E"

    def build_app(_argv: object) -> None:
        raise RuntimeError(wrapped + "\n    at jsii kernel frames ...")

    monkeypatch.setattr(app, "build_app", build_app)
    assert app.main([]) == 1
    assert f"\ninfra: {bundling.NEEDS_INDEX} (target); pip said: E\n" in "\n" + capsys.readouterr().err
    # (jsii, imported by infra.app, may print its own Node end-of-life banner first)


GATEWAY_INVOKE = """
import json, os, sys
sys.path.insert(0, os.environ["ASSET"])
import lambda_fn.handler as h
event = json.load(open(os.environ["EVENT"]))
event["body"] = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                            "params": {"name": "TOOL_CALL", "arguments": {"tool_name": "toy.add",
                                                                         "arguments": {"a": 2, "b": 3}}}})
print(json.dumps(h.handler(event, None)))
"""


@pytest.mark.slow
def test_a_gateway_asset_carries_the_sdk_client_and_reaches_a_server(tmp_path: Path) -> None:
    """With `-c servers=FILE` the stack builds the asset with gateway=True: the SDK's client comes along (the
    default asset leaves it out), and the handler, from the asset alone, syncs and calls a real MCP server."""
    from test_gateway import TOY_TOOLS, toy_entry, write_tools

    built = ensure_built(AssetInputs(root=ROOT, spec=SPEC, target=BundleTarget.host(), gateway=True))
    assert (built / "mcp").is_dir()
    tools_file = tmp_path / "toy.json"
    write_tools(tools_file, TOY_TOOLS)
    entry = toy_entry(tools_file)
    entry["env"] = {"PYTHONPATH": str(built)}  # the toy server is an SDK server too: it runs from the asset
    servers = tmp_path / "servers.json"
    servers.write_text(json.dumps({"mcpServers": {"toy": entry}}))
    env = {
        "PATH": "/usr/bin:/bin",
        "ASSET": str(built),
        "EVENT": str(EVENT),
        "PMCP_SERVERS": str(servers),
        "PMCP_INDEX": str(tmp_path / "index.sqlite3"),
        "POWERTOOLS_LOG_LEVEL": "WARNING",
    }
    completed = subprocess.run(
        [sys.executable, "-I", "-S", "-c", GATEWAY_INVOKE], env=env, capture_output=True, text=True, timeout=120
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    result = json.loads(json.loads(completed.stdout.strip().splitlines()[-1])["body"])["result"]
    assert result["isError"] is False, result
    assert result["structuredContent"] == {"tool": "toy.add", "data": {"sum": 5}}, result


@pytest.mark.slow  # builds the Lambda asset (pip installs its dependencies)
def test_the_default_asset_leaves_the_sdk_out(host_asset: Path) -> None:
    assert not (host_asset / "mcp").exists()
    requirements = AssetInputs(root=ROOT, spec=SPEC, target=BundleTarget.host()).requirements()
    assert not [r for r in requirements if r.startswith("mcp=")]


@pytest.mark.spawns  # compiles the spec as the bundler does, in a process of its own
def test_the_assets_catalog_carries_no_vectors_it_could_not_use(tmp_path: Path) -> None:
    """The asset has no semantic extra (no MiniLM to embed a query), so stored tool vectors would be dead weight,
    and embedding them cost every asset build ~8 CPU-seconds."""
    destination = tmp_path / "spec" / "alphavantage.json"
    bundling._compile_spec(AssetInputs(root=ROOT, spec=SPEC, target=BundleTarget.host()), destination)
    compiled = json.loads(destination.read_text(encoding="utf-8"))
    assert compiled["progressive_mcp_catalog"] and len(compiled["tools"]) == 128
    assert "vectors" not in compiled
