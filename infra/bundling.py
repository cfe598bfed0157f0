"""Builds the Lambda code asset on this machine, without Docker, and caches it by a hash of its inputs.

The asset is what `/var/task` holds in Lambda: the handler's runtime dependencies as wheels for the target
(Linux aarch64, CPython 3.X) with code mode's `monty` binary in bin/, the `progressive_mcp` and `lambda_fn`
packages, the spec compiled to JSON, and bytecode compiled by an interpreter of the runtime's exact version when
one is found (Lambda's file system is read-only, so without it every cold start compiles the modules it imports).

Example::

    inputs = AssetInputs(root=Path("."), spec=Path("spec/alphavantage.yaml"), target=BundleTarget.lambda_arm64("3.14"))
    build_dir = ensure_built(inputs)       # .cache/lambda-asset/<hash>/, built once per distinct input
    copy_tree(build_dir, Path("out"))      # what LocalBundler.try_bundle does into CDK's bundling dir

The module imports nothing outside the standard library except, in `local_bundler`, jsii and aws-cdk-lib, so
tests and benchmarks build a host-platform asset through the same code without synthesizing a stack.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote

# The handler's code: copied whole, less the modules that only serve local use.
PACKAGES = ("progressive_mcp", "lambda_fn")
LOCAL_ONLY_FILES = frozenset(
    {
        "lambda_fn/local.py",  # `progressive-mcp serve`: a local HTTP server around the handler
        "progressive_mcp/offline/__init__.py",  # the offline stand-ins of upstream APIs (tests and demos):
        "progressive_mcp/offline/sample_upstream.py",  # the synthetic Alpha Vantage
        "progressive_mcp/offline/sample_data.py",  # and its arithmetic
        "progressive_mcp/offline/rest_upstream.py",  # any catalog's REST operations
        "progressive_mcp/offline/body_encoding.py",  # reading its form and multipart bodies by their encoding
        "progressive_mcp/offline/schema_samples.py",  # sample values of JSON Schemas (the REST upstream's answers)
        "progressive_mcp/offline/serving.py",  # the loopback HTTP server both upstreams run on
        "progressive_mcp/demo.py",  # `make demo`
        "progressive_mcp/surfaces/stdio.py",  # the stdio server (the mcp SDK, which the asset leaves out)
        "progressive_mcp/__main__.py",  # `python -m progressive_mcp`
        "progressive_mcp/sources/openapi.py",  # OpenAPI documents are compiled at build time (sources/compiled.py)
        "progressive_mcp/surfaces/protocol_build.py",  # writes _mcp_snapshot.py from mcp_types (development)
        # The search model (22 MB) and its tokenizer: the asset has no semantic extra to run them (runtime_requirements)
        "progressive_mcp/search/models/minilm/model.onnx",
        "progressive_mcp/search/models/minilm/tokenizer.json",
    }
)
# Dependencies the Lambda never imports, so the asset leaves them out (issue 18: the asset ≤ 60 MB unzipped):
# - `mcp` (the SDK) serves stdio, and is the gateway's client: a gateway's asset keeps it (GATEWAY_DEPENDENCIES),
#   and with it `mcp-types` and `pydantic`;
# - `mcp-types` and `pydantic`: the endpoint speaks MCP from a snapshot of mcp-types (surfaces/protocol.py), and
#   the catalog ships compiled (`spec compile --catalog`), so no pydantic spec model is built at a cold start;
# - `pyyaml`: specs ship compiled to JSON; `bpe-openai` (77 MB of vocabularies): token budgets are checked with
#   tokens.py's conservative bound where it is absent;
# - the OpenAPI tooling (and markdownify, its HTML reader) runs when the asset is built (`spec compile` writes the
#   catalog the Lambda loads).
EXCLUDED_DEPENDENCIES = frozenset(
    {"mcp", "mcp-types", "pydantic", "pyyaml", "bpe-openai", "openapi-spec-validator", "referencing", "markdownify"}
)
GATEWAY_DEPENDENCIES = frozenset({"mcp"})
# Parts of dependencies no code path of the handler imports, removed after pip: Powertools' REST router and the
# utilities other than parameters (secrets), typing and jmespath (Logger); the SBOMs pip copies into dist-info.
PRUNED_PATHS = (
    "aws_lambda_powertools/event_handler",
    *(
        f"aws_lambda_powertools/utilities/{name}"
        for name in (
            "auth_alpha",
            "batch",
            "circuit_breaker",
            "data_classes",
            "data_masking",
            "feature_flags",
            "idempotency",
            "kafka",
            "parser",
            "streaming",
            "validation",
        )
    ),
)
# boto3 and botocore come with every Lambda Python runtime (kept up to date by AWS); bundling them would add
# ~25 MB to the asset. lambda_fn.aws imports them only when an AWS-backed setting (PMCP_CACHE_TABLE, ...) is set.
PROVIDED_BY_RUNTIME = frozenset({"boto3", "botocore", "s3transfer"})
EXTRA_DEPENDENCIES = ("aws-lambda-powertools",)  # from the `aws` extra, with its version bounds
TASK_ROOT = "/var/task"
# The one program the asset keeps from pip's scripts directory (bin/): code mode's sandbox workers run it as
# subprocesses. pydantic-monty-runtime installs it there; the Lambda runtime's own scripts directory is elsewhere
# (/var/lang/bin), so the stack points pydantic_monty at it with MONTY_BIN=/var/task/bin/monty.
MONTY_BINARY = "bin/monty"
ASSET_INFO = "asset-info.json"
CACHE_DIR = Path(".cache") / "lambda-asset"
CACHE_KEEP = 6  # built assets kept in the cache (each ~100 MB): the most recently used; the test suite builds up to
# five kinds at once on its workers (default, gateway, oauth, ...), and pruning one a worker still reads breaks it
BUNDLE_PYTHON_ENV = "PMCP_BUNDLE_PYTHON"


NEEDS_INDEX = "building the Lambda asset needs a package index (PyPI or a mirror) to fetch the arm64 wheels"


class BundleError(RuntimeError):
    """The asset could not be built (pip, the spec compiler, or an explicitly named interpreter failed)."""


@dataclass(frozen=True)
class BundleTarget:
    """What the asset runs on: Lambda's Linux aarch64 CPython, or this machine (for tests and benchmarks)."""

    python_version: str  # "3.14"
    platform: Literal["lambda-arm64", "host"]

    @classmethod
    def lambda_arm64(cls, python_version: str) -> BundleTarget:
        return cls(python_version, "lambda-arm64")

    @classmethod
    def host(cls, python_version: str | None = None) -> BundleTarget:
        """This machine, for this interpreter's Python or another CPython `python_version` (e.g. "3.13")."""
        return cls(python_version or f"{sys.version_info.major}.{sys.version_info.minor}", "host")

    def pip_args(self) -> list[str]:
        """pip's wheel-selection flags: manylinux aarch64 wheels for the runtime's CPython, or this machine's."""
        if self.platform == "host":
            if self.python_version == BundleTarget.host().python_version:
                return ["--only-binary=:all:"]
            if sys.platform != "linux":
                raise BundleError(f"a host bundle for another Python ({self.python_version}) needs Linux")
            machine = os.uname().machine
            return [
                "--only-binary=:all:",
                *(f"--platform={tag}_{machine}" for tag in ("manylinux2014", "manylinux_2_28", "manylinux_2_34")),
                "--implementation=cp",
                f"--python-version={self.python_version}",
            ]
        return [
            "--only-binary=:all:",
            "--platform=manylinux2014_aarch64",
            "--platform=manylinux_2_28_aarch64",
            "--implementation=cp",
            f"--python-version={self.python_version}",
        ]

    def describe(self) -> str:
        if self.platform == "host":
            return f"host ({sys.platform}, {os.uname().machine}) CPython {self.python_version}"
        return f"Lambda arm64 (manylinux aarch64) CPython {self.python_version}"


@dataclass(frozen=True)
class AssetInputs:
    """Everything that decides the asset's content; `fingerprint()` hashes exactly these."""

    root: Path  # the repository: pyproject.toml, progressive_mcp/, lambda_fn/
    spec: Path
    target: BundleTarget
    bytecode: bool = True  # compile .pyc when an interpreter of the target's version is found
    cache_dir: Path | None = None  # default: <root>/.cache/lambda-asset
    # A gateway (the stack's `servers`) talks to MCP servers with the SDK's client: the asset then carries `mcp`.
    gateway: bool = False
    # oauth auth mode checks JWT access tokens: the asset then carries the `oauth` extra (PyJWT, cryptography).
    oauth: bool = False
    bytecode_python: str | None = field(default=None, compare=False)  # set by `resolve()`
    resolved: bool = field(default=False, compare=False, repr=False)

    def resolve(self) -> AssetInputs:
        """A copy with absolute paths and the bytecode interpreter looked up (None when absent or not wanted)."""
        if self.resolved:
            return self
        root = self.root.resolve()
        spec = self.spec if self.spec.is_absolute() else root / self.spec
        python = find_bytecode_python(self.target.python_version) if self.bytecode else None
        return AssetInputs(
            root,
            spec.resolve(),
            self.target,
            self.bytecode,
            self.cache_dir,
            self.gateway,
            self.oauth,
            python,
            resolved=True,
        )

    @property
    def cache_root(self) -> Path:
        return self.cache_dir or self.root / CACHE_DIR

    def requirements(self) -> list[str]:
        return runtime_requirements(self.root / "pyproject.toml", gateway=self.gateway, oauth=self.oauth)

    def source_files(self) -> list[Path]:
        """The package files the asset carries, relative to root, sorted."""
        files: list[Path] = []
        for package in PACKAGES:
            for path in sorted((self.root / package).rglob("*")):
                relative = path.relative_to(self.root)
                if path.is_file() and _is_source(relative):
                    files.append(relative)
        return files

    def fingerprint(self) -> str:
        """A hash of every input: requirements and their pinned versions, sources, spec, target, this module."""
        digest = hashlib.sha256()

        def add(label: str, data: bytes) -> None:
            digest.update(f"{label}\0{len(data)}\0".encode())
            digest.update(data)

        add("bundler", Path(__file__).read_bytes())
        add("target", self.target.describe().encode())
        add("bytecode", ("compiled" if self.bytecode_python else "none").encode())
        requirements = self.requirements()
        add("requirements", "\n".join(requirements).encode())
        add("constraints", "\n".join(pinned_constraints(requirements)).encode())
        for relative in self.source_files():
            add(relative.as_posix(), (self.root / relative).read_bytes())
        add(f"spec {self.spec.name}", self.spec.read_bytes())
        for path in spec_files(self.spec):
            # relpath: a `$ref` may lead out of the spec's folder (`../common.yaml`)
            add(f"spec part {Path(os.path.relpath(path, self.spec.parent)).as_posix()}", path.read_bytes())
        return digest.hexdigest()

    @property
    def spec_json_name(self) -> str:
        return f"{self.spec.stem}.json"


# A `$ref` to another file (an OpenAPI document split over many, in JSON or YAML, quoted or not) and a spec's
# `vocabulary: FILE`; the part after '#' is a place inside the file.
_FILE_REFERENCE = re.compile(
    r"""["']?(?:\$ref|vocabulary)["']?\s*:\s*["']?(?![a-z][a-z0-9+.-]*://)([^"'#\s,}{]+\.(?:ya?ml|json))"""
)
SPEC_FILES_LIMIT = 20_000


def spec_files(spec: Path) -> list[Path]:
    """The files a spec may read besides itself, sorted: those beside it (YAML or JSON) and, followed from file to
    file, those its `$ref`s and `vocabulary` name, wherever they are (DigitalOcean's document spans ~2,900 files
    in nested folders). Only paths are read, not structure: a file named but not used still counts, so a change to
    it rebuilds the asset, which is the safe side."""
    spec = spec.resolve()
    siblings = sorted(path.resolve() for path in spec.parent.iterdir() if path.suffix in (".yaml", ".yml", ".json"))
    queue, seen = [spec, *siblings], set[Path]()
    while queue and len(seen) < SPEC_FILES_LIMIT:
        path = queue.pop()
        if path in seen or not path.is_file():
            continue
        seen.add(path)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue  # still hashed as bytes; it names nothing we can read
        queue.extend((path.parent / unquote(m.group(1))).resolve() for m in _FILE_REFERENCE.finditer(text))
    return sorted(seen - {spec})


def runtime_requirements(pyproject: Path, *, gateway: bool = False, oauth: bool = False) -> list[str]:
    """The handler's dependencies: [project].dependencies less the SDK (a gateway's asset keeps it: its client
    talks to the MCP servers) and the build-time tooling, plus Powertools from `aws`, and with `oauth` the
    `oauth` extra (JWT validation; cryptography alone is ~16 MB, so only oauth stacks carry it)."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    excluded = EXCLUDED_DEPENDENCIES - GATEWAY_DEPENDENCIES if gateway else EXCLUDED_DEPENDENCIES
    requirements = [req for req in project["dependencies"] if _requirement_name(req) not in excluded]
    extras = project.get("optional-dependencies", {}).get("aws", [])
    for wanted in EXTRA_DEPENDENCIES:
        matches = [req for req in extras if _requirement_name(req) == wanted]
        if not matches:
            raise BundleError(f"{pyproject}: the `aws` extra does not list {wanted}")
        requirements.extend(matches)
    if oauth:
        requirements.extend(project.get("optional-dependencies", {}).get("oauth", []))
    bundled = [req for req in requirements if _requirement_name(req) in PROVIDED_BY_RUNTIME]
    if bundled:
        raise BundleError(f"{', '.join(bundled)}: provided by the Lambda runtime, must not be bundled")
    return requirements


def pinned_constraints(requirements: list[str]) -> list[str]:
    """`name==version` of this environment's copy of every package the requirements can pull in.

    So the asset gets the versions the tests ran with (`make` keeps .venv in step with pyproject.toml), and the
    asset's hash changes when they change. The closure follows Requires-Dist whatever its environment markers
    say (a superset is harmless: pip applies a constraint only to what it installs) and skips extras' needs.
    """
    installed = {_normalise(dist.metadata["Name"]): dist for dist in metadata.distributions() if dist.metadata["Name"]}
    pending = [_requirement_name(req) for req in requirements]
    closure: set[str] = set()
    while pending:
        name = pending.pop()
        if name in closure or name not in installed:
            continue
        closure.add(name)
        for requirement in installed[name].requires or []:
            if not re.search(r"\bextra\s*==", requirement.partition(";")[2]):
                pending.append(_requirement_name(requirement))
    return [f"{name}=={installed[name].version}" for name in sorted(closure) if not _is_editable(installed[name])]


def find_bytecode_python(version: str) -> str | None:
    """An interpreter of exactly CPython `version` (e.g. "3.14"), or None.

    Looked up in order: $PMCP_BUNDLE_PYTHON (which must be that version), this interpreter, `pythonX.Y` on PATH,
    pyenv's and uv's installed versions. Each candidate is run once to check, because a pyenv shim on PATH
    exists whether or not the version is installed.
    """
    override = os.environ.get(BUNDLE_PYTHON_ENV)
    if override:
        found = _python_version(override)
        if found != version:
            raise BundleError(f"{BUNDLE_PYTHON_ENV}={override} is {found or 'not a working CPython'}, not {version}")
        return override
    if f"{sys.version_info.major}.{sys.version_info.minor}" == version and sys.implementation.name == "cpython":
        return sys.executable
    for candidate in _interpreter_candidates(version):
        if _python_version(candidate) == version:
            return candidate
    return None


Log = Callable[[str], None]


def ensure_built(inputs: AssetInputs, log: Log | None = None) -> Path:
    """The built asset for `inputs` in the cache, building it first if needed (atomically: build, then rename)."""
    log = log or _log
    resolved = inputs.resolve()
    fingerprint = resolved.fingerprint()
    final = resolved.cache_root / fingerprint
    if (final / ASSET_INFO).is_file():
        os.utime(final)  # mark as recently used, for pruning
        return final
    resolved.cache_root.mkdir(parents=True, exist_ok=True)
    partial = resolved.cache_root / f"{fingerprint}.partial-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    started = time.perf_counter()
    try:
        build_asset(resolved, partial, log)
        try:
            partial.rename(final)
        except OSError:  # built concurrently by another process: theirs is as good as ours
            if not (final / ASSET_INFO).is_file():
                raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    log(f"built the Lambda asset for {resolved.target.describe()} in {time.perf_counter() - started:.1f} s: {final}")
    prune_cache(resolved.cache_root, keep=CACHE_KEEP)
    return final


def build_asset(inputs: AssetInputs, out: Path, log: Log | None = None) -> None:
    """Build the asset for resolved `inputs` into the empty or missing directory `out`."""
    log = log or _log
    out.mkdir(parents=True, exist_ok=True)
    _pip_install(inputs, out)
    _prune_dependencies(out)
    for relative in inputs.source_files():
        destination = out / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(inputs.root / relative, destination)
    _compile_spec(inputs, out / "spec" / inputs.spec_json_name)
    if inputs.bytecode_python:
        compile_bytecode(inputs.bytecode_python, out, inputs.target, log)
    elif inputs.bytecode:
        log(
            f"WARNING: no Python {inputs.target.python_version} interpreter found (set {BUNDLE_PYTHON_ENV} or put "
            f"python{inputs.target.python_version} on PATH): the asset ships without bytecode, so Lambda compiles "
            "what it imports at every cold start"
        )
    info = {
        "target": inputs.target.describe(),
        "python_version": inputs.target.python_version,
        "bytecode": inputs.bytecode_python is not None,
        "requirements": inputs.requirements(),
        "spec": f"spec/{inputs.spec_json_name}",
    }
    (out / ASSET_INFO).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")


def copy_tree(source: Path, destination: Path) -> None:
    """Copy a built asset into `destination` (which may exist), hard-linking files when the file system allows."""

    def link_or_copy(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(source, destination, copy_function=link_or_copy, dirs_exist_ok=True)


def asset_files(asset: Path) -> Iterator[Path]:
    """Every file under a built asset."""
    return (path for path in asset.rglob("*") if path.is_file())


# --- the CDK side -----------------------------------------------------------------------------------------


def local_bundler(inputs: AssetInputs) -> Any:
    """An `aws_cdk.ILocalBundling` that copies the cached asset for `inputs` into CDK's bundling directory."""
    import jsii
    from aws_cdk import ILocalBundling

    @jsii.implements(ILocalBundling)
    class LocalBundler:
        def try_bundle(self, output_dir: str, options: Any) -> bool:
            copy_tree(ensure_built(inputs), Path(output_dir))
            return True

    return LocalBundler()


# --- steps ------------------------------------------------------------------------------------------------


def _pip_install(inputs: AssetInputs, out: Path) -> None:
    constraints = out.parent / f"{out.name}.constraints.txt"
    requirements = inputs.requirements()
    constraints.write_text("\n".join(pinned_constraints(requirements)) + "\n", encoding="utf-8")
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-input",
        "--no-compile",  # bytecode comes from an interpreter of the target's version, or not at all
        "--target",
        str(out),
        *inputs.target.pip_args(),
        "--constraint",
        str(constraints),
        *requirements,
    ]
    try:
        result = subprocess.run(command, capture_output=True, text=True, check=False)
    finally:
        constraints.unlink(missing_ok=True)
    if result.returncode != 0:
        raise BundleError(pip_failure(inputs.target.describe(), result.stderr))


# What pip says when it cannot reach a package index, or the index lacks a wheel for the target.
_UNREACHABLE = (
    "No matching distribution",
    "Could not find a version",
    "ResolutionImpossible",
    "Failed to establish a new connection",
    "Name or service not known",
    "Temporary failure in name resolution",
    "Network is unreachable",
    "Connection refused",
)


def pip_failure(target: str, stderr: str) -> str:
    """The BundleError message for a failed pip install: one line when no index could give the wheels."""
    if any(sign in stderr for sign in _UNREACHABLE):
        return f"{NEEDS_INDEX} ({target}); pip said: " + (stderr.strip().splitlines() or ["nothing"])[-1].strip()[:200]
    return f"pip install for {target} failed:\n{stderr.strip()}"


def _prune_dependencies(out: Path) -> None:
    """Drop what Lambda never uses: console scripts (all but the monty binary), bytecode of another Python,
    dependencies' test suites, PRUNED_PATHS and dist-info SBOMs."""
    _keep_only_monty(out)
    for relative in PRUNED_PATHS:
        shutil.rmtree(out / relative, ignore_errors=True)
    for sboms in out.glob("*.dist-info/sboms"):
        shutil.rmtree(sboms)
    for path in sorted(out.rglob("*"), reverse=True):  # deepest first, so removed directories are not revisited
        if not path.exists():
            continue
        if path.is_dir() and (path.name == "__pycache__" or _is_dependency_tests(path, out)):
            shutil.rmtree(path)
        elif path.suffix == ".pyc":
            path.unlink()


def _keep_only_monty(out: Path) -> None:
    """bin/ keeps the monty binary alone, readable and executable by anyone (Lambda runs the function as another
    user than the one who unzips it, and CDK's zip keeps each file's mode); pip's Python entry points go."""
    scripts = out / "bin"
    monty = out / MONTY_BINARY
    if not monty.is_file():
        if (out / "pydantic_monty").is_dir():
            raise BundleError(f"pip installed pydantic_monty but no {MONTY_BINARY} (pydantic-monty-runtime)")
        shutil.rmtree(scripts, ignore_errors=True)
        return
    for path in scripts.iterdir():
        if path == monty:
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    monty.chmod(0o755)


def _is_dependency_tests(path: Path, out: Path) -> bool:
    """A `tests` package directly inside a dependency's top-level package (never imported by the library)."""
    relative = path.relative_to(out)
    return len(relative.parts) == 2 and relative.name in ("tests", "test") and not relative.parts[0].endswith("-info")


def _compile_spec(inputs: AssetInputs, destination: Path) -> None:
    # In a subprocess: infra/ imports nothing of the core (see DESIGN.md), and the CLI validates the spec first.
    destination.parent.mkdir(parents=True, exist_ok=True)
    # --catalog: the Lambda loads a compiled catalog without the source's tooling (pydantic spec models, YAML and
    # OpenAPI parsers): ~60 ms less of a cold start than validating the spec again there.
    command = [sys.executable, "-m", "progressive_mcp.cli", "spec", "compile", "--catalog", str(inputs.spec)]
    command += ["-o", str(destination)]
    # No tool vectors: the asset has no semantic extra (runtime_requirements), so nothing there could embed a query
    # to compare them with; storing them cost each build ~8 CPU-s of MiniLM where the builder has the extra.
    environ = {**os.environ, "PMCP_SEMANTIC": "off"}
    result = subprocess.run(command, cwd=inputs.root, env=environ, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise BundleError(f"compiling the spec {inputs.spec} failed:\n{result.stderr.strip()}")


def compile_bytecode(python: str, out: Path, target: BundleTarget, log: Log) -> None:
    """Compile every module under `out` with `python` (bench/coldstart_compare.py compiles the official server's
    layout the same way)."""
    # unchecked-hash: CDK zips files with a fixed timestamp, so timestamp-checked .pyc would all look stale.
    command = [python, "-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "unchecked-hash"]
    if target.platform == "lambda-arm64":
        command += ["-s", str(out), "-p", TASK_ROOT]  # tracebacks name /var/task/..., not this machine's cache
    result = subprocess.run([*command, str(out)], capture_output=True, text=True, check=False)
    if result.returncode != 0:  # a file that does not compile is never imported; say so and keep the rest
        failures = [line for line in result.stdout.splitlines() if line.startswith("***")]
        log(f"WARNING: compileall could not compile {len(failures)} file(s): {'; '.join(failures[:3])}")


def prune_cache(cache_root: Path, keep: int, marker: str = ASSET_INFO) -> None:
    """Keep the `keep` most recently used builds (directories holding `marker`); drop partial builds an
    interrupted run left behind."""
    for partial in cache_root.glob("*.partial-*"):
        with contextlib.suppress(OSError):
            if time.time() - partial.stat().st_mtime > 3600:
                shutil.rmtree(partial, ignore_errors=True)
    built = sorted(
        (path for path in cache_root.iterdir() if path.is_dir() and (path / marker).is_file()),
        key=lambda path: path.stat().st_mtime,
        reverse=True,
    )
    for stale in built[keep:]:
        shutil.rmtree(stale, ignore_errors=True)


# --- helpers ----------------------------------------------------------------------------------------------


def _is_source(relative: Path) -> bool:
    return (
        "__pycache__" not in relative.parts
        and relative.suffix != ".pyc"
        and relative.as_posix() not in LOCAL_ONLY_FILES
        and relative.suffix in (".py", ".typed")
    )


def _requirement_name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    if not match:
        raise BundleError(f"cannot read the requirement {requirement!r}")
    return _normalise(match.group(1))


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _is_editable(dist: metadata.Distribution) -> bool:
    direct_url = dist.read_text("direct_url.json")
    return bool(direct_url and json.loads(direct_url).get("dir_info", {}).get("editable"))


def _interpreter_candidates(version: str) -> Iterable[str]:
    on_path = shutil.which(f"python{version}")
    if on_path:
        yield on_path
    exact = re.compile(rf"^(?:cpython-)?{re.escape(version)}\.(\d+)(?:-linux-[a-z0-9_]+-gnu)?$")
    roots = [
        Path(os.environ.get("PYENV_ROOT", "~/.pyenv")).expanduser() / "versions",
        Path(os.environ.get("UV_PYTHON_INSTALL_DIR", "~/.local/share/uv/python")).expanduser(),
    ]
    for root in roots:
        with contextlib.suppress(OSError):
            installs = [(int(m.group(1)), path) for path in root.iterdir() if (m := exact.match(path.name))]
            for _patch, install in sorted(installs, reverse=True):  # newest patch release first
                yield str(install / "bin" / f"python{version}")


@functools.lru_cache(maxsize=64)  # one question per interpreter and process: a synth asks it for every stack
def _python_version(executable: str) -> str | None:
    code = "import sys; print(sys.implementation.name, '%d.%d' % sys.version_info[:2])"
    try:
        result = subprocess.run([executable, "-c", code], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    implementation, _, version = result.stdout.strip().partition(" ")
    return version if result.returncode == 0 and implementation == "cpython" else None


def _log(message: str) -> None:
    print(f"progressive-mcp bundle: {message}", file=sys.stderr)
