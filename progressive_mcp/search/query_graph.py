"""The bundled model's graph rewritten at load so that it reads the int8 weights the file stores as int8.

The model file (`embedder`) keeps each weight matrix as int8 values and a float scale per row or column, joined by a
Cast and a Mul; onnxruntime folds those into float32 tensors when it loads the graph: 47 MB for the word-piece table
and 42 MB of matrices that embedding a query of a few tokens reads in full. `int8_weights` rewrites two patterns:

- a MatMul on such a matrix becomes an integer product: the activations quantised per call, each token's row to
  uint8 with its own step, multiplied by the stored int8 matrix (MatMulInteger), then both scales applied to the
  int32 result. A quarter of the bytes read, ~1.7x faster per query; the activations' rounding moves a vector a
  little (tests/test_query_graph.py says how little), so only queries run it (`products=True`);
- a Gather from such a table (the word-piece and position embeddings) gathers the int8 rows and makes only those
  float: the same values, no float copy of the table, a session that loads in a third of the time.

Example::

    rewritten, count = int8_weights(Path(model_path).read_bytes())  # (model bytes, 38) for all-MiniLM-L6-v2
    session = onnxruntime.InferenceSession(rewritten, options)

The rewrite edits the ONNX protobuf's wire format itself: the `onnx` package would add 31 MB installed and ~0.5 s of
import to the model's load for it. No weight is copied or changed: nodes are replaced and five scalars added, the
file's tensors keep their bytes. A graph without the patterns comes back unchanged (count 0). The pinned model's graph
(ONNX opset 17) is tested. The opset-18 form of ReduceMax (axes as an input) was checked once, by hand (2026-11-29):
the pinned model converted to opset 18 by onnx 1.23.2's version converter, rewritten (38 nodes), gave outputs
identical to the opset-17 rewrite's, bit for bit. The suite does not repeat it, since it would need `onnx`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

# Field numbers of onnx.proto (ModelProto, GraphProto, NodeProto, AttributeProto, TensorProto, OperatorSetIdProto).
_MODEL_GRAPH, _MODEL_OPSET = 7, 8
_GRAPH_NODE, _GRAPH_INITIALIZER = 1, 5
_NODE_INPUT, _NODE_OUTPUT, _NODE_NAME, _NODE_OP_TYPE, _NODE_ATTRIBUTE, _NODE_DOMAIN = 1, 2, 3, 4, 5, 7
_ATTR_NAME, _ATTR_I, _ATTR_INTS, _ATTR_TYPE = 1, 3, 8, 20
_ATTR_INT, _ATTR_INTS_TYPE = 2, 7
_TENSOR_DIMS, _TENSOR_TYPE, _TENSOR_NAME, _TENSOR_RAW = 1, 2, 8, 9
_OPSET_DOMAIN, _OPSET_VERSION = 1, 2
_FLOAT, _UINT8, _INT8, _INT64 = 1, 2, 3, 7  # TensorProto.DataType
_VARINT, _FIXED64, _BYTES, _FIXED32 = 0, 1, 2, 5
_MIN_OPSET = 11  # Round's first version (MatMulInteger's is 10)
_AXES_INPUT_OPSET = 18  # from here ReduceMax takes its axes as an input, not an attribute
# The scalars the int8 products share (initializers the rewrite adds): a row's peak maps to 127, an all-zero row
# divides by a tiny step instead of zero, and the activations are stored as uint8 around a zero point of 128.
_PEAK, _TINY, _MIDDLE, _ZERO_POINT, _LAST_AXIS = (
    "int8/127",
    "int8/tiny",
    "int8/128",
    "int8/zero_point",
    "int8/last_axis",
)


@dataclass
class _Node:
    raw: bytes
    op_type: str = ""
    domain: str = ""
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    ints: dict[str, int] = field(default_factory=dict)  # the node's integer attributes (Cast's `to`, Gather's `axis`)


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
            if isinstance(attribute.get(_ATTR_I), int):
                node.ints[_text(attribute.get(_ATTR_NAME, 0))] = int(attribute[_ATTR_I])
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


def _new_node(
    op_type: str, inputs: list[str], outputs: list[str], name: str, cast_to: int | None = None, axes: int | None = None
) -> bytes:
    """A NodeProto of the default domain (a Cast's target type in `cast_to`, a reduction's one axis in `axes`)."""
    parts = [_payload(_NODE_INPUT, i.encode()) for i in inputs] + [_payload(_NODE_OUTPUT, o.encode()) for o in outputs]
    parts += [_payload(_NODE_NAME, name.encode()), _payload(_NODE_OP_TYPE, op_type.encode())]
    if cast_to is not None:
        attribute = _payload(_ATTR_NAME, b"to") + _key(_ATTR_I, _VARINT) + _varint(cast_to)
        attribute += _key(_ATTR_TYPE, _VARINT) + _varint(_ATTR_INT)
        parts.append(_payload(_NODE_ATTRIBUTE, attribute))
    if axes is not None:
        attribute = _payload(_ATTR_NAME, b"axes") + _key(_ATTR_INTS, _VARINT) + _varint(axes & (2**64 - 1))
        attribute += _key(_ATTR_TYPE, _VARINT) + _varint(_ATTR_INTS_TYPE)
        parts.append(_payload(_NODE_ATTRIBUTE, attribute))
    return b"".join(parts)


def _scalar(name: str, dtype: int, raw: bytes, dims: tuple[int, ...] = ()) -> bytes:
    """A TensorProto holding `raw` (little-endian) of type `dtype`."""
    shape = b"".join(_key(_TENSOR_DIMS, _VARINT) + _varint(dim) for dim in dims)
    return (
        shape
        + _key(_TENSOR_TYPE, _VARINT)
        + _varint(dtype)
        + _payload(_TENSOR_NAME, name.encode())
        + _payload(_TENSOR_RAW, raw)
    )


def _shared_scalars(opset: int) -> list[bytes]:
    scalars = [
        _scalar(_PEAK, _FLOAT, struct.pack("<f", 127.0)),
        _scalar(_TINY, _FLOAT, struct.pack("<f", 1e-12)),
        _scalar(_MIDDLE, _FLOAT, struct.pack("<f", 128.0)),
        _scalar(_ZERO_POINT, _UINT8, bytes([128])),
    ]
    if opset >= _AXES_INPUT_OPSET:
        scalars.append(_scalar(_LAST_AXIS, _INT64, struct.pack("<q", -1), dims=(1,)))
    return scalars


def _int8_product(matmul: _Node, weights: str, scale: str, opset: int) -> list[bytes]:
    """The nodes that compute `matmul` on its int8 weights: y = (x quantised per row @ int8 W) * row steps * column
    scales. Each row (a token) gets its own step, its peak mapped to 127: one step for the whole tensor (what
    DynamicQuantizeLinear does) lets the few tokens with huge activations ([CLS], [SEP]) coarsen all the others, which
    measured twice the error (cosine to the float vector .993 mean, .948 worst, against .997 and .978)."""
    x, y = matmul.inputs[0], matmul.outputs[0]
    stem = f"{y}/int8"
    if opset >= _AXES_INPUT_OPSET:
        peak = _new_node("ReduceMax", [f"{stem}/abs", _LAST_AXIS], [f"{stem}/peak"], f"{stem}/peak")
    else:
        peak = _new_node("ReduceMax", [f"{stem}/abs"], [f"{stem}/peak"], f"{stem}/peak", axes=-1)
    return [
        _new_node("Abs", [x], [f"{stem}/abs"], f"{stem}/abs"),
        peak,
        _new_node("Div", [f"{stem}/peak", _PEAK], [f"{stem}/step0"], f"{stem}/step0"),
        _new_node("Max", [f"{stem}/step0", _TINY], [f"{stem}/step"], f"{stem}/step"),
        _new_node("Div", [x, f"{stem}/step"], [f"{stem}/scaled"], f"{stem}/scaled"),
        _new_node("Round", [f"{stem}/scaled"], [f"{stem}/rounded"], f"{stem}/rounded"),
        # uint8 around 128 (onnxruntime's fast kernels multiply uint8 activations by int8 weights).
        _new_node("Add", [f"{stem}/rounded", _MIDDLE], [f"{stem}/shifted"], f"{stem}/shifted"),
        _new_node("Cast", [f"{stem}/shifted"], [f"{stem}/x"], f"{stem}/x", cast_to=_UINT8),
        # No zero point for the weights: the file's int8 values are symmetric (zero is 0).
        _new_node("MatMulInteger", [f"{stem}/x", weights, _ZERO_POINT], [f"{stem}/int32"], f"{stem}/matmul"),
        _new_node("Cast", [f"{stem}/int32"], [f"{stem}/float"], f"{stem}/cast", cast_to=_FLOAT),
        _new_node("Mul", [f"{stem}/float", f"{stem}/step"], [f"{stem}/rows"], f"{stem}/rows"),
        _new_node("Mul", [f"{stem}/rows", scale], [y], f"{stem}/rescale"),
    ]


def _int8_rows(gather: _Node, weights: str, scale: str, per_row: bool) -> list[bytes]:
    """The nodes that read `gather`'s rows from the int8 table and make only those float: the same values, without a
    float copy of the whole table (MiniLM's word pieces: 47 MB, folded at load)."""
    indices, y = gather.inputs[1], gather.outputs[0]
    stem = f"{y}/int8"
    rows = [
        _new_node("Gather", [weights, indices], [f"{stem}/rows"], f"{stem}/gather"),
        _new_node("Cast", [f"{stem}/rows"], [f"{stem}/float"], f"{stem}/cast", cast_to=_FLOAT),
    ]
    if not per_row:
        return [*rows, _new_node("Mul", [f"{stem}/float", scale], [y], f"{stem}/rescale")]
    return [
        *rows,
        _new_node("Gather", [scale, indices], [f"{stem}/scale"], f"{stem}/gather_scale"),
        _new_node("Mul", [f"{stem}/float", f"{stem}/scale"], [y], f"{stem}/rescale"),
    ]


def _rewrite_graph(graph: memoryview, products: bool, opset: int) -> tuple[bytes, int]:
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

    def dequantized(name: str) -> tuple[_Node, _Node, str, str, list[int], list[int]] | None:
        """The Cast and Mul that make `name` from a 2-D int8 tensor and a float scale, the two tensors' names and
        shapes; None if `name` is made otherwise."""
        mul = producer.get(name)
        if mul is None or mul.op_type != "Mul" or mul.domain or len(mul.inputs) != 2:
            return None
        cast = next((producer[i] for i in mul.inputs if i in producer), None)
        scale = next((i for i in mul.inputs if i in tensors), None)
        if cast is None or scale is None or cast.op_type != "Cast" or cast.ints.get("to") != _FLOAT:
            return None
        weight_type, weight_dims = tensors.get(cast.inputs[0], (0, []))
        scale_type, scale_dims = tensors[scale]
        if weight_type != _INT8 or len(weight_dims) != 2 or scale_type != _FLOAT:
            return None
        return cast, mul, cast.inputs[0], scale, weight_dims, scale_dims

    replaced: dict[int, list[bytes]] = {}  # id(node) -> the nodes that do its work on int8 weights
    found: list[tuple[_Node, _Node]] = []
    for node in nodes:
        if node.domain or len(node.inputs) != 2:
            continue
        if node.op_type == "MatMul" and products and (pattern := dequantized(node.inputs[1])):
            cast, mul, weights, scale, (_, columns), scale_dims = pattern
            # Only a scale per output column (or one for all) commutes with the product; a per-row one would not.
            if scale_dims in ([], [1], [columns], [1, columns]):
                replaced[id(node)] = _int8_product(node, weights, scale, opset)
                found.append((cast, mul))
        elif node.op_type == "Gather" and node.ints.get("axis", 0) == 0 and (pattern := dequantized(node.inputs[0])):
            cast, mul, weights, scale, (rows, columns), scale_dims = pattern
            if scale_dims in ([], [1], [columns], [1, columns], [rows, 1]):
                replaced[id(node)] = _int8_rows(node, weights, scale, per_row=scale_dims == [rows, 1])
                found.append((cast, mul))
    dropped: set[int] = set()  # the Casts and Muls that made a float matrix nobody reads any more
    for cast, mul in found:
        if all(id(reader) in replaced for reader in consumers[mul.outputs[0]]):
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
    if any(node.op_type == "MatMul" for node in nodes if id(node) in replaced):
        parts.extend(_payload(_GRAPH_INITIALIZER, tensor) for tensor in _shared_scalars(opset))
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


def int8_weights(model: bytes, *, products: bool = True) -> tuple[bytes, int]:
    """The ONNX model with its int8 weights read as int8, and how many nodes now read them: each MatMul on a
    Cast(int8) x column-scale matrix computed in int8 (`products`; this changes a vector a little), each Gather from
    such a table made float only for the rows it reads (exact). ValueError if `model` is not a whole protobuf."""
    data = memoryview(model)
    try:
        opset = _opset(data)
        if opset < _MIN_OPSET:
            return model, 0
        parts: list[bytes | memoryview] = []
        count = 0
        for number, _, value, raw in _fields(data):
            if number == _MODEL_GRAPH and isinstance(value, memoryview):
                graph, count = _rewrite_graph(value, products, opset)
                parts.append(_payload(_MODEL_GRAPH, graph))
            else:
                parts.append(raw)
    except IndexError:  # a varint cut off by the end of the data
        raise ValueError("the model file is not a whole ONNX protobuf") from None
    return (b"".join(parts), count) if count else (model, 0)
