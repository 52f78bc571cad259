"""Reading a model file: size limit, parse, opsets, external-data references, attention nodes,
ONNX checker.

Everything a file can do wrong becomes a `BadModel` naming the file and the node or tensor. The
size limit is checked on the file before a byte is parsed. External data is never read (sizing
needs shapes, not weights) but every reference must point at a readable regular file inside the
model's folder that holds the bytes it claims.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import onnx
from google.protobuf.message import DecodeError

from .errors import BadModel, ModelTooLarge
from .graph import all_graphs, walk
from .infer import shape_only_copy
from .translate import MS_DOMAIN, is_attention, read_node

DEFAULT_MAX_MODEL_BYTES = 2**31 - 1  # protobuf's message limit: larger models keep weights externally
MS_OPSET_VERSION = 1  # the only com.microsoft opset version ONNX Runtime registers


def _external_tensors(model: onnx.ModelProto) -> Iterator[onnx.TensorProto]:
    for graph in all_graphs(model.graph):
        yield from graph.initializer
        for node in graph.node:
            for attr in node.attribute:
                yield from ([attr.t] if attr.HasField("t") else [])
                yield from attr.tensors


def _tensor_bytes(tensor: onnx.TensorProto) -> int | None:
    if tensor.data_type in (onnx.TensorProto.STRING, onnx.TensorProto.UNDEFINED):
        return None
    count = 1
    for d in tensor.dims:
        count *= d
    return count * onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize


def check_external_data(model: onnx.ModelProto, base_dir: Path) -> None:
    """Check that every external-data reference names a readable file below base_dir that holds
    [offset, offset + length) bytes (length defaults to the tensor's size in bytes)."""
    for tensor in _external_tensors(model):
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        info = {entry.key: entry.value for entry in tensor.external_data}
        where = f"tensor {tensor.name!r}: external data"
        location = info.get("location", "")
        if not location or Path(location).is_absolute() or ".." in Path(location).parts:
            raise BadModel(f"{where} location {location!r} must be a relative path inside the model's folder")
        path = base_dir / location
        try:
            offset = int(info.get("offset", "0"))
            length = int(info["length"]) if "length" in info else _tensor_bytes(tensor)
        except ValueError:
            raise BadModel(f"{where} offset {info.get('offset')!r} / length {info.get('length')!r} are not integers") from None
        if not path.is_file() or not os.access(path, os.R_OK):
            raise BadModel(f"{where} file {str(path)!r} cannot be read")
        if length is not None and offset + length > path.stat().st_size:
            raise BadModel(f"{where} needs bytes [{offset}, {offset + length}) of {str(path)!r}, "
                           f"which has {path.stat().st_size}")


def check_opsets(model: onnx.ModelProto) -> None:
    """Check that a com.microsoft opset import, if any, is a version ONNX Runtime registers."""
    for opset in model.opset_import:
        if opset.domain == MS_DOMAIN and opset.version != MS_OPSET_VERSION:
            raise BadModel(f"opset import {MS_DOMAIN} version {opset.version}; ONNX Runtime registers version "
                           f"{MS_OPSET_VERSION}")


def parse_model(data: bytes, name: str) -> onnx.ModelProto:
    """Return the ModelProto in `data`, or raise BadModel when it is not a (whole) ONNX model."""
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except DecodeError as error:
        raise BadModel(f"{name} is not an ONNX model, or is truncated: {error}") from None
    if model.ir_version == 0 or not model.HasField("graph"):
        raise BadModel(f"{name} is not an ONNX model: no IR version or no graph")
    return model


def check_attention_nodes(model: onnx.ModelProto) -> None:
    """Check each attention node's domain, attributes and required inputs (clearer than the
    checker's messages, so this runs first)."""
    for site in walk(model.graph):
        if is_attention(site):
            read_node(site)


def check_structure(model: onnx.ModelProto, name: str) -> None:
    """Run ONNX's checker (topological order, defined inputs, opset imports) on a shape-only copy."""
    copy = shape_only_copy(model)
    for info in (*copy.graph.input, *copy.graph.output):
        # The checker requires a shape on graph inputs and outputs; ONNX Runtime does not.
        if info.type.WhichOneof("value") == "tensor_type":
            info.type.tensor_type.shape.SetInParent()
    try:
        onnx.checker.check_model(copy)
    except onnx.checker.ValidationError as error:
        raise BadModel(f"{name}: {str(error).strip()}") from None


def load_model(path: str | Path, max_bytes: int = DEFAULT_MAX_MODEL_BYTES) -> onnx.ModelProto:
    """Return the checked model in `path` without its external data; refuse a file over max_bytes
    before parsing it."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise ModelTooLarge(f"{path} is {size} bytes, over the limit of {max_bytes} bytes (--max-bytes)")
        data = path.read_bytes()
    except OSError as error:
        raise BadModel(f"cannot read {path}: {error.strerror or error}") from None
    model = parse_model(data, str(path))
    check_opsets(model)
    check_external_data(model, path.parent)
    check_attention_nodes(model)
    check_structure(model, str(path))
    return model
