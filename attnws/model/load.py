"""Reading a model file: size and node limits, parse, contents, opsets, external-data references,
attention nodes, ONNX checker.

Everything a file can do wrong becomes a `BadModel` naming the file and the node or tensor; no
exception from protobuf or ONNX escapes. The file is read through `spec.documents` (a regular file,
the size limit enforced while reading). External data is never read (sizing needs shapes, not
weights) and never opened: each reference must name, relative to the model's folder, a file that
stays inside the folder once symbolic links are followed; where that file is present (it need not
be: a 16 GB weights file is not needed to read shapes), a regular file holding the bytes it claims.
Nothing outside the folder is examined (`documents.resolve_inside`), and the ONNX checker only
ever sees a copy without external references, so it cannot look for files either.
"""

from __future__ import annotations

import os
import re
import stat
from typing import Any, Iterator

import onnx
from google.protobuf.message import DecodeError

from ..spec.ort_version import ORT_VERSION
from ..spec.documents import (
    STDIN,
    DocumentError,
    DocumentTooLarge,
    display_path,
    is_readable,
    read_user_bytes,
    resolve_inside,
    short,
)
from .bounds import DEFAULT_MAX_MODEL_BYTES, DEFAULT_MAX_MODEL_NODES
from .errors import BadModel, ModelTooLarge
from .functions import attention_sites, inline_functions
from .graph import all_graphs, model_tensors, node_count, walk
from .infer import ort_default_domain_schemas, registered, shape_only_copy
from .ort_schemas import ORT_DEFAULT_DOMAIN_OPS, attributes
from .translate import MS_DOMAIN, read_node

MS_OPSET_VERSION = 1  # the only com.microsoft opset version ONNX Runtime registers

_DATA_TYPES = frozenset(onnx.TensorProto.DataType.values()) - {onnx.TensorProto.UNDEFINED}
# Bits per element of each fixed-size type ONNX Runtime can hold as external data (names this
# onnx version does not define are skipped). Sub-byte types are packed, rounded up to a byte.
_BITS = {name: bits for names, bits in (
    (("BOOL", "UINT8", "INT8", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "FLOAT8E8M0"), 8),
    (("UINT16", "INT16", "FLOAT16", "BFLOAT16"), 16), (("FLOAT", "INT32", "UINT32"), 32),
    (("DOUBLE", "INT64", "UINT64", "COMPLEX64"), 64), (("COMPLEX128",), 128), (("UINT4", "INT4", "FLOAT4E2M1"), 4),
    (("UINT2", "INT2"), 2),
) for name in names}
ELEMENT_BITS = {getattr(onnx.TensorProto, name): bits for name, bits in _BITS.items() if hasattr(onnx.TensorProto, name)}
# The keys ONNX Runtime's ExternalDataInfo::Create accepts (any other key fails the load).
EXTERNAL_KEYS = ("location", "offset", "length", "checksum")
EXTERNAL_PREFIXED_KEY = "prepacked"
_COUNT = re.compile(r"[0-9]{1,19}")


def _type_name(data_type: int) -> str:
    try:
        return onnx.TensorProto.DataType.Name(data_type)
    except ValueError:
        return str(data_type)


def tensor_nbytes(tensor: onnx.TensorProto) -> int | None:
    """Return the bytes a tensor's data takes (packed sub-byte types rounded up), None for a type
    without a fixed size."""
    bits = ELEMENT_BITS.get(tensor.data_type)
    if bits is None:
        return None
    count = 1
    for d in tensor.dims:
        count *= d
    return (count * bits + 7) // 8


# -- contents ----------------------------------------------------------------------------------

_STRING = onnx.AttributeProto.DESCRIPTOR.fields_by_name["name"].type
_MESSAGE = onnx.AttributeProto.DESCRIPTOR.fields_by_name["t"].type


def _repeated(field: Any) -> bool:
    flag = getattr(field, "is_repeated", None)  # protobuf >= 5.29; `label` before (removed in 7)
    return bool(flag) if flag is not None else field.label == field.LABEL_REPEATED


_TENSOR = onnx.TensorProto.DESCRIPTOR
_TENSOR_SKIPPED = frozenset({"raw_data", "float_data", "int32_data", "int64_data", "double_data", "uint64_data",
                             "string_data"})


def _fields(message: Any) -> list[tuple[Any, Any]]:
    if message.DESCRIPTOR is _TENSOR:  # never copy a tensor's data to look at it
        return [(f, getattr(message, f.name)) for f in _TENSOR.fields
                if f.name not in _TENSOR_SKIPPED and (_repeated(f) or message.HasField(f.name))]
    return message.ListFields()


def _check_values(message: Any, where: str) -> None:
    name = message.DESCRIPTOR.name
    if name == "TensorProto":
        if message.data_type not in _DATA_TYPES:
            raise BadModel(f"{where}: tensor {message.name!r} has data_type {message.data_type}, which ONNX does not define")
        if any(d < 0 for d in message.dims):
            raise BadModel(f"{where}: tensor {message.name!r} has a negative dimension {list(message.dims)}")
    elif name == "SparseTensorProto" and any(d < 0 for d in message.dims):
        raise BadModel(f"{where}: sparse tensor {message.values.name!r} has a negative dimension {list(message.dims)}")
    elif name in ("Tensor", "SparseTensor") and message.DESCRIPTOR.containing_type is not None:
        if message.elem_type != 0 and message.elem_type not in _DATA_TYPES:
            raise BadModel(f"{where}: a tensor type has elem_type {message.elem_type}, which ONNX does not define")
    elif name == "Dimension" and message.HasField("dim_value") and message.dim_value < 0:
        raise BadModel(f"{where}: a tensor shape has the negative dimension {message.dim_value}")


def check_contents(model: onnx.ModelProto, name: str) -> None:
    """Check every message of the model (tensor data aside): strings are UTF-8, element and data
    types are ones ONNX defines, dimensions are non-negative."""
    stack: list[tuple[Any, str]] = [(model, name)]
    while stack:
        message, where = stack.pop()
        _check_values(message, where)
        if message.DESCRIPTOR.name in ("NodeProto", "GraphProto", "FunctionProto"):
            where = f"{name}: {message.DESCRIPTOR.name[:-5].lower()} {message.name!r}"
        for field, value in _fields(message):
            values = value if _repeated(field) else (value,)
            if field.type == _STRING:
                for item in values:
                    if not isinstance(item, str):
                        raise BadModel(f"{where}: field {field.name} holds {short(item)}, which is not UTF-8 text")
            elif field.type == _MESSAGE:
                stack.extend((item, where) for item in values)


# -- external data -----------------------------------------------------------------------------

def _quoted(text: str, limit: int = 60) -> str:
    return repr(text) if len(text) <= limit else repr(text[:limit]) + "..."


def _count(info: dict[str, str], key: str, default: int | None, where: str) -> int | None:
    if key not in info:
        return default
    if not _COUNT.fullmatch(info[key]):
        raise BadModel(f"{where} {key} {_quoted(info[key])} must be a non-negative integer")
    return int(info[key])


def check_external_data(model: onnx.ModelProto, folder: str | None) -> None:
    """Check every external-data reference, in every graph, subgraph, function, sparse tensor and
    attribute: the keys ONNX Runtime accepts, a relative location that stays inside `folder` once
    symbolic links are followed, a non-negative offset and a length equal to the tensor's size,
    and where the file is present, a regular file there that holds those bytes (a model copied
    without its weights file is read: sizing needs shapes only). `folder` None (a model on
    standard input) allows none."""
    for tensor, kind in model_tensors(model):
        if tensor.data_location != onnx.TensorProto.EXTERNAL:  # a closed enum: DEFAULT otherwise
            continue
        where = f"{kind} {tensor.name!r}: external data"
        if folder is None:
            raise BadModel(f"{where}: a model read from standard input has no folder to hold external data")
        info = {entry.key: entry.value for entry in tensor.external_data}
        for key, value in info.items():
            if key not in EXTERNAL_KEYS and not key.startswith(EXTERNAL_PREFIXED_KEY):
                raise BadModel(f"{where} key {_quoted(key)} is not one ONNX Runtime reads ({', '.join(EXTERNAL_KEYS)})")
            if not value:
                raise BadModel(f"{where} key {key!r} has an empty value")
        if "location" not in info:
            raise BadModel(f"{where} has no location")
        expected = tensor_nbytes(tensor)
        if expected is None and tensor.data_type == onnx.TensorProto.STRING:
            raise BadModel(f"{where}: a STRING tensor cannot be stored externally")
        offset = _count(info, "offset", 0, where)
        length = _count(info, "length", expected, where)
        if length is None:
            raise BadModel(f"{where}: data_type {_type_name(tensor.data_type)} needs an explicit length")
        if expected is not None and length != expected:
            raise BadModel(f"{where} length {length} differs from the {expected} bytes of its "
                           f"{_type_name(tensor.data_type)} {list(tensor.dims)} tensor")
        location = info["location"]
        if location.rsplit("/", 1)[-1] in ("", "."):
            raise BadModel(f"{where} location {_quoted(location)} ends in '/' or '.': it names a folder, not a file, "
                           "and ONNX Runtime cannot open it")
        try:
            path, status = resolve_inside(folder, location, f"{where} location", missing_ok=True)
        except DocumentError as error:
            raise BadModel(str(error)) from None
        if status is None:
            continue  # the weights are not needed to read shapes: a model may come without them
        if not stat.S_ISREG(status.st_mode):
            raise BadModel(f"{where} location {location!r} is not a regular file in the model's folder")
        if offset + length > status.st_size:
            raise BadModel(f"{where} needs bytes [{offset}, {offset + length}) of {location!r}, "
                           f"which has {status.st_size}")
        if not is_readable(path):
            raise BadModel(f"{where} location {location!r} cannot be read (permission denied)")


# -- structure ---------------------------------------------------------------------------------

def check_opsets(model: onnx.ModelProto) -> None:
    """Check that a com.microsoft opset import, if any (the model's or a function's), is a version
    ONNX Runtime registers."""
    imports = [("", opset) for opset in model.opset_import]
    imports += [(f" of function {f.domain}.{f.name}", opset) for f in model.functions for opset in f.opset_import]
    for owner, opset in imports:
        if opset.domain == MS_DOMAIN and opset.version != MS_OPSET_VERSION:
            raise BadModel(f"opset import{owner} {MS_DOMAIN} version {opset.version}; ONNX Runtime registers version "
                           f"{MS_OPSET_VERSION}")


def check_references(model: onnx.ModelProto) -> None:
    """Check that no node of the main graph or its subgraphs has an attribute that refers to a
    function's attribute (`ref_attr_name`): ONNX allows that only inside a function body."""
    for site in walk(model.graph):
        for attr in site.node.attribute:
            if attr.ref_attr_name:
                raise BadModel(f"{site.where}: attribute {attr.name!r} refers to the attribute {attr.ref_attr_name!r} "
                               "of a calling function (ref_attr_name), which only a function body may do")


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


def check_attention_nodes(model: onnx.ModelProto, max_nodes: int = DEFAULT_MAX_MODEL_NODES) -> None:
    """Check each attention node ONNX Runtime would run, those of the model-local functions each
    call reaches included (the functions inlined, at most `max_nodes` nodes): its domain,
    attributes, required inputs and input types (clearer than the checker's messages, so this runs
    first)."""
    for site in attention_sites(inline_functions(shape_only_copy(model), max_nodes).graph):
        read_node(site)


def _drop_external_data(model: onnx.ModelProto) -> None:
    """Replace every external tensor by an empty one of the same name and type (in place): the
    checker stats external files relative to the current directory, which must never happen."""
    for tensor, _ in model_tensors(model):
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            tensor.data_location = onnx.TensorProto.DEFAULT
            del tensor.external_data[:]
            del tensor.dims[:]
            tensor.dims.append(0)


def _ort_default_domain_nodes(model: onnx.ModelProto) -> Iterator[tuple[onnx.NodeProto, int, str]]:
    """Yield each node of ONNX Runtime's own default-domain operators (`ort_schemas`) with the
    default-domain opset it is read at and where it is: the main graph's and its subgraphs', and
    each model-local function's body at the function's import."""
    def version(imports: Any) -> int:
        return max((o.version for o in imports if o.domain in ("", "ai.onnx")), default=0)

    owners = [(all_graphs(model.graph), version(model.opset_import), "")]
    owners += [([f], version(f.opset_import) or version(model.opset_import), f" of function {f.domain}.{f.name}")
               for f in model.functions]
    for graphs, opset, owner in owners:
        for graph in graphs:
            for node in graph.node:
                if node.domain in ("", "ai.onnx") and node.op_type in ORT_DEFAULT_DOMAIN_OPS:
                    yield node, opset, f"node {node.name!r} ({node.op_type}){owner}"


def check_ort_default_domain_nodes(model: onnx.ModelProto) -> None:
    """Refuse a node of an operator ONNX Runtime dropped at the model's default-domain opset
    (ORT: "is not a registered function/op"), which ONNX's checker cannot tell."""
    for node, opset, where in _ort_default_domain_nodes(model):
        removed_at = ORT_DEFAULT_DOMAIN_OPS[node.op_type].removed_at
        if removed_at is not None and opset >= removed_at:
            raise BadModel(f"{where}: ONNX Runtime {ORT_VERSION} has no {node.op_type} from default-domain opset "
                           f"{removed_at} on (the model imports opset {opset})")


def _drop_unchecked_attributes(model: onnx.ModelProto) -> None:
    """Remove, in place, the attributes ONNX Runtime lets a node of its own operators carry
    although their schema does not name them (`unchecked_attributes`): it ignores them."""
    for node, _, _ in _ort_default_domain_nodes(model):
        schema = ORT_DEFAULT_DOMAIN_OPS[node.op_type]
        if schema.unchecked_attributes:
            named = {name for name, _, _ in attributes(schema.attributes)}
            kept = [a for a in node.attribute if a.name in named]
            del node.attribute[:]
            node.attribute.extend(kept)


def check_structure(model: onnx.ModelProto, name: str) -> None:
    """Run ONNX's checker (topological order, defined inputs, opset imports) on a shape-only copy
    without external references, with the default-domain operators ONNX Runtime adds registered
    (`ort_schemas`: ORT runs them, so they are let through, held to ORT's schema)."""
    copy = shape_only_copy(model)
    _drop_external_data(copy)
    _drop_unchecked_attributes(copy)
    for info in (*copy.graph.input, *copy.graph.output):
        # The checker requires a shape on graph inputs and outputs; ONNX Runtime does not.
        if info.type.WhichOneof("value") == "tensor_type":
            info.type.tensor_type.shape.SetInParent()
    try:
        with registered(ort_default_domain_schemas([])):
            onnx.checker.check_model(copy)
    except onnx.checker.ValidationError as error:
        raise BadModel(f"{name}: {str(error).strip()}") from None
    except Exception as error:  # noqa: BLE001 - the checker's C++ raises other types on malformed input
        raise BadModel(f"{name}: the ONNX checker failed: {type(error).__name__}: {error}") from None


def load_model(path: str | os.PathLike, max_bytes: int = DEFAULT_MAX_MODEL_BYTES,
               max_nodes: int = DEFAULT_MAX_MODEL_NODES) -> onnx.ModelProto:
    """Return the checked model in `path` ('-': standard input, which allows no external data)
    without its external data. A file over max_bytes is refused while it is read, a model over
    max_nodes nodes right after parsing; each check is linear in the model's size."""
    if not isinstance(max_nodes, int) or max_nodes < 0:
        raise BadModel(f"max_nodes = {max_nodes!r} must be a non-negative integer")
    stdin = isinstance(path, str) and path == STDIN
    name = "model on standard input" if stdin else f"model {display_path(path)}"
    try:
        data = read_user_bytes(path, "model", max_bytes, " (--max-bytes)")
    except DocumentTooLarge as error:
        raise ModelTooLarge(str(error)) from None
    except DocumentError as error:
        raise BadModel(str(error)) from None
    model = parse_model(data, name)
    count = node_count(model)
    if count > max_nodes:
        raise ModelTooLarge(f"{name} has {count:,} nodes, over the limit of {max_nodes:,} (--max-nodes)")
    check_contents(model, name)
    check_opsets(model)
    check_external_data(model, None if stdin else os.path.dirname(os.path.abspath(path)))
    check_references(model)
    check_ort_default_domain_nodes(model)
    check_attention_nodes(model, max_nodes)
    check_structure(model, name)
    return model
