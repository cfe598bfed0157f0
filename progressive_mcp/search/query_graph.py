"""The bundled model's graph rewritten for queries: its matrix products run on the int8 weights the file stores.

The model file (`embedder`) keeps each weight matrix as int8 values and one float scale per output column, joined
by a Cast and a Mul; onnxruntime folds those into float32 matrices when it loads the graph, so embedding a query of
a few tokens reads ~42 MB of weights. `int8_matmuls` replaces each such MatMul with what onnxruntime's dynamic
quantisation produces: the activations quantised per call (DynamicQuantizeLinear), an integer product with the
stored int8 matrix (MatMulInteger), and both scales applied to its int32 result. Same weights, a quarter of the
bytes read; the activations' rounding moves a vector a little (tests/test_query_graph.py says how little). Example::

    rewritten, count = int8_matmuls(Path(model_path).read_bytes())  # (model bytes, 36) for all-MiniLM-L6-v2
    session = onnxruntime.InferenceSession(rewritten, options)

The rewrite edits the ONNX protobuf's wire format itself: the `onnx` package would add 31 MB installed and ~0.5 s of
import to the model's load for it. No weight is copied or changed: only nodes are replaced, tensors keep their
bytes. A graph without the pattern comes back unchanged (count 0).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

# Field numbers of onnx.proto (ModelProto, GraphProto, NodeProto, AttributeProto, TensorProto, OperatorSetIdProto).
_MODEL_GRAPH, _MODEL_OPSET = 7, 8
_GRAPH_NODE, _GRAPH_INITIALIZER = 1, 5
_NODE_INPUT, _NODE_OUTPUT, _NODE_NAME, _NODE_OP_TYPE, _NODE_ATTRIBUTE, _NODE_DOMAIN = 1, 2, 3, 4, 5, 7
_ATTR_NAME, _ATTR_I, _ATTR_TYPE = 1, 3, 20
_ATTR_INT = 2
_TENSOR_DIMS, _TENSOR_TYPE, _TENSOR_NAME = 1, 2, 8
_OPSET_DOMAIN, _OPSET_VERSION = 1, 2
_FLOAT, _INT8 = 1, 3  # TensorProto.DataType
_VARINT, _FIXED64, _BYTES, _FIXED32 = 0, 1, 2, 5
_MIN_OPSET = 11  # DynamicQuantizeLinear's first version (MatMulInteger's is 10)


@dataclass
class _Node:
    raw: bytes
    op_type: str = ""
    domain: str = ""
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    cast_to: int | None = None


def _read_varint(data: memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _fields(data: memoryview) -> Iterator[tuple[int, int, int | memoryview, memoryview]]:
    """Each field of one message: (number, wire type, value, the field's own bytes); a value is an int for a varint,
    else the payload's bytes (unread)."""
    pos = 0
    while pos < len(data):
        start = pos
        key, pos = _read_varint(data, pos)
        number, wire = key >> 3, key & 7
        value: int | memoryview
        if wire == _VARINT:
            value, pos = _read_varint(data, pos)
        elif wire == _BYTES:
            size, pos = _read_varint(data, pos)
            value, pos = data[pos : pos + size], pos + size
        elif wire in (_FIXED64, _FIXED32):
            width = 8 if wire == _FIXED64 else 4
            value, pos = data[pos : pos + width], pos + width
        else:
            raise ValueError(f"protobuf wire type {wire} is not read here")
        if pos > len(data):
            raise ValueError("a protobuf field runs past the end of its message")
        yield number, wire, value, data[start:pos]


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _key(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _payload(number: int, payload: bytes) -> bytes:
    return _key(number, _BYTES) + _varint(len(payload)) + payload


def _text(value: int | memoryview) -> str:
    return bytes(value).decode("utf-8") if isinstance(value, memoryview) else ""


def _read_node(raw: memoryview) -> _Node:
    node = _Node(bytes(raw))
    for number, _, value, _ in _fields(raw):
        if number == _NODE_OP_TYPE:
            node.op_type = _text(value)
        elif number == _NODE_DOMAIN:
            node.domain = _text(value)
        elif number == _NODE_INPUT:
            node.inputs.append(_text(value))
        elif number == _NODE_OUTPUT:
            node.outputs.append(_text(value))
        elif number == _NODE_ATTRIBUTE and isinstance(value, memoryview):
            attribute = {n: v for n, _, v, _ in _fields(value)}
            if _text(attribute.get(_ATTR_NAME, 0)) == "to" and isinstance(attribute.get(_ATTR_I), int):
                node.cast_to = int(attribute[_ATTR_I])
    return node


def _read_tensor_header(raw: memoryview) -> tuple[str, int, list[int]]:
    """A tensor's name, element type and shape (its data is not read)."""
    name, dtype, dims = "", 0, []
    for number, _, value, _ in _fields(raw):
        if number == _TENSOR_NAME:
            name = _text(value)
        elif number == _TENSOR_TYPE and isinstance(value, int):
            dtype = value
        elif number == _TENSOR_DIMS:
            if isinstance(value, int):
                dims.append(value)
            else:  # packed
                pos = 0
                while pos < len(value):
                    dim, pos = _read_varint(value, pos)
                    dims.append(dim)
    return name, dtype, dims


def _new_node(op_type: str, inputs: list[str], outputs: list[str], name: str, cast_to: int | None = None) -> bytes:
    parts = [_payload(_NODE_INPUT, i.encode()) for i in inputs] + [_payload(_NODE_OUTPUT, o.encode()) for o in outputs]
    parts += [_payload(_NODE_NAME, name.encode()), _payload(_NODE_OP_TYPE, op_type.encode())]
    if cast_to is not None:
        attribute = _payload(_ATTR_NAME, b"to") + _key(_ATTR_I, _VARINT) + _varint(cast_to)
        attribute += _key(_ATTR_TYPE, _VARINT) + _varint(_ATTR_INT)
        parts.append(_payload(_NODE_ATTRIBUTE, attribute))
    return b"".join(parts)


def _int8_product(matmul: _Node, weights: str, scale: str) -> list[bytes]:
    """The nodes that compute `matmul` on its int8 weights: y = (quantised x @ int8 W) * x_scale * column scales."""
    x, y = matmul.inputs[0], matmul.outputs[0]
    stem = f"{y}/int8"
    return [
        _new_node("DynamicQuantizeLinear", [x], [f"{stem}/x", f"{stem}/x_scale", f"{stem}/x_zero"], f"{stem}/quantize"),
        # No zero point for the weights: the file's int8 values are symmetric (zero is 0).
        _new_node("MatMulInteger", [f"{stem}/x", weights, f"{stem}/x_zero"], [f"{stem}/int32"], f"{stem}/matmul"),
        _new_node("Cast", [f"{stem}/int32"], [f"{stem}/float"], f"{stem}/cast", cast_to=_FLOAT),
        _new_node("Mul", [f"{stem}/x_scale", scale], [f"{stem}/scale"], f"{stem}/scales"),
        _new_node("Mul", [f"{stem}/float", f"{stem}/scale"], [y], f"{stem}/rescale"),
    ]


def _rewrite_graph(graph: memoryview) -> tuple[bytes, int]:
    nodes: list[_Node] = []
    tensors: dict[str, tuple[int, list[int]]] = {}
    for number, _, value, _ in _fields(graph):
        if number == _GRAPH_NODE and isinstance(value, memoryview):
            nodes.append(_read_node(value))
        elif number == _GRAPH_INITIALIZER and isinstance(value, memoryview):
            name, dtype, dims = _read_tensor_header(value)
            tensors[name] = (dtype, dims)
    producer = {output: node for node in nodes for output in node.outputs}
    consumers: dict[str, list[_Node]] = {}
    for node in nodes:
        for name in node.inputs:
            consumers.setdefault(name, []).append(node)

    replaced: dict[int, list[bytes]] = {}  # id(MatMul node) -> its int8 nodes
    dropped: set[int] = set()  # the Cast and Mul that made a float matrix nobody reads any more
    for node in nodes:
        if node.op_type != "MatMul" or node.domain or len(node.inputs) != 2:
            continue
        mul = producer.get(node.inputs[1])
        if mul is None or mul.op_type != "Mul" or mul.domain or len(mul.inputs) != 2:
            continue
        cast = next((producer[i] for i in mul.inputs if i in producer), None)
        scale = next((i for i in mul.inputs if i in tensors), None)
        if cast is None or scale is None or cast.op_type != "Cast" or cast.cast_to != _FLOAT:
            continue
        weights = cast.inputs[0]
        weight_type, weight_dims = tensors.get(weights, (0, []))
        scale_type, scale_dims = tensors[scale]
        # Only a scale per output column (or one for all) commutes with the product; a per-row scale would not.
        columns = weight_dims[-1:] if len(weight_dims) == 2 else None
        if (
            weight_type != _INT8
            or columns is None
            or scale_type != _FLOAT
            or scale_dims not in ([], [1], columns, [1, *columns])
        ):
            continue
        replaced[id(node)] = _int8_product(node, weights, scale)
        readers = consumers[mul.outputs[0]]
        if all(id(reader) in replaced for reader in readers):
            dropped.add(id(mul))
            if consumers[cast.outputs[0]] == [mul]:
                dropped.add(id(cast))

    if not replaced:
        return bytes(graph), 0
    new_nodes = [
        _payload(_GRAPH_NODE, payload)
        for node in nodes
        if id(node) not in dropped
        for payload in replaced.get(id(node), [node.raw])
    ]
    parts: list[bytes | memoryview] = []
    for number, _, _, raw in _fields(graph):
        if number != _GRAPH_NODE:
            parts.append(raw)
        elif new_nodes:  # the nodes go where the first one was (a graph's nodes are one run, in order)
            parts.extend(new_nodes)
            new_nodes = []
    return b"".join(parts), len(replaced)


def _opset(model: memoryview) -> int:
    """The version of the default ONNX operator set the model imports (0 if none)."""
    for number, _, value, _ in _fields(model):
        if number == _MODEL_OPSET and isinstance(value, memoryview):
            entry = {n: v for n, _, v, _ in _fields(value)}
            version = entry.get(_OPSET_VERSION, 0)
            if _text(entry.get(_OPSET_DOMAIN, 0)) in ("", "ai.onnx") and isinstance(version, int):
                return version
    return 0


def int8_matmuls(model: bytes) -> tuple[bytes, int]:
    """The ONNX model with each MatMul on a Cast(int8) x column-scale matrix computed in int8, and how many were;
    ValueError if `model` is not a whole protobuf."""
    data = memoryview(model)
    try:
        if _opset(data) < _MIN_OPSET:
            return model, 0
        parts: list[bytes | memoryview] = []
        count = 0
        for number, _, value, raw in _fields(data):
            if number == _MODEL_GRAPH and isinstance(value, memoryview):
                graph, count = _rewrite_graph(value)
                parts.append(_payload(_MODEL_GRAPH, graph))
            else:
                parts.append(raw)
    except IndexError:  # a varint cut off by the end of the data
        raise ValueError("the model file is not a whole ONNX protobuf") from None
    return (b"".join(parts), count) if count else (model, 0)
