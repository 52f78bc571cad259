"""The operators ONNX Runtime 1.31.1 registers in ONNX's default domain that ONNX itself does not
define, with the schema ORT checks a node against: its inputs and outputs (`?` optional), its
attributes (`!` required) by name and type, and the opset at which ORT dropped it.

Exporters use them as if they were ONNX's own: every onnxruntime-genai builder model normalizes with
`SimplifiedLayerNormalization` in the default domain. `onnx.checker` refuses such a node ("No Op
registered"), so `load` and `infer` register these schemas with ONNX while they check and infer a
model (`check_nodes` first refuses what ORT refuses and ONNX's checker cannot see), and a node is
then held to the arity and attributes ORT holds it to. Read from the 1.31.1 CPU wheel's registry (`onnxruntime.capi.onnxruntime_pybind11_state.get_all_operator_schema`,
the default-domain entries `onnx.defs.has` does not know); `tests/model/test_ort_schemas.py`
compares this table with that registry.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OrtSchema:
    """One default-domain operator: its name; space-separated input, output and attribute specs
    (`name?` an optional input or output, `name:TYPE` an attribute, `!` after the type when it is
    required); the opset from which ORT no longer has it (its schema is deprecated there: "is not
    a registered function/op"), None when it never goes; whether ORT lets a node carry attributes
    its schema does not name (seen on ORT's CPU engine, `tests/model/test_ort_schemas.py`).
    Every one is registered from opset 1."""

    name: str
    inputs: str
    outputs: str
    attributes: str = ""
    removed_at: int | None = None
    unchecked_attributes: bool = False


_FEATURE_MAPS = "boxes feature_map_0 feature_map_1 feature_map_2 feature_map_3"

ORT_DEFAULT_DOMAIN_SCHEMAS: tuple[OrtSchema, ...] = (
    OrtSchema("Affine", "X", "Y", "alpha:FLOAT beta:FLOAT", removed_at=10, unchecked_attributes=True),
    OrtSchema("Crop", "input", "output", "border:INTS scale:INTS", removed_at=10, unchecked_attributes=True),
    OrtSchema("DisentangledAttention_TRT", "c2c_attention c2p_attention p2c_attention", "disentangled_attention",
              "factor:FLOAT! span:INT!"),
    OrtSchema("DynamicSlice", "data starts ends axes?", "output", removed_at=10, unchecked_attributes=True),
    OrtSchema("EfficientNMS_TRT", "boxes scores anchors?",
              "num_detections detection_boxes detection_scores detection_classes",
              "background_class:INT! box_coding:INT! iou_threshold:FLOAT! max_output_boxes:INT! "
              "plugin_version:STRING! score_activation:INT! score_threshold:FLOAT!"),
    OrtSchema("GRUUnit", "hidden_prev gates seq_lengths t", "hidden", "drop_states:INT", removed_at=10, unchecked_attributes=True),
    OrtSchema("GivenTensorFill", "shape?", "X", "extra_shape:INTS input_as_shape:INT shape:INTS values:FLOATS",
              removed_at=10, unchecked_attributes=True),
    OrtSchema("ImageScaler", "input", "output", "bias:FLOATS scale:FLOAT", removed_at=10, unchecked_attributes=True),
    OrtSchema("MemcpyFromHost", "X", "Y"),
    OrtSchema("MemcpyToHost", "X", "Y"),
    OrtSchema("MultilevelCropAndResize_TRT", _FEATURE_MAPS, "patches",
              "image_size:INTS! plugin_version:STRING! pooled_size:INT!"),
    OrtSchema("ParametricSoftplus", "X", "Y", "alpha:FLOAT beta:FLOAT", removed_at=10, unchecked_attributes=True),
    OrtSchema("PyramidROIAlign_TRT", _FEATURE_MAPS, "patches", "plugin_version:STRING! pooled_size:INT!"),
    OrtSchema("Scale", "input", "output", "scale:FLOAT", removed_at=10, unchecked_attributes=True),
    OrtSchema("ScaledTanh", "input", "output", "alpha:FLOAT beta:FLOAT", removed_at=10, unchecked_attributes=True),
    OrtSchema("SimplifiedLayerNormalization", "X scale", "Y inv_std_var?", "axis:INT epsilon:FLOAT stash_type:INT",
              unchecked_attributes=True),
)
ORT_DEFAULT_DOMAIN_OPS = {schema.name: schema for schema in ORT_DEFAULT_DOMAIN_SCHEMAS}


def parameters(spec: str) -> list[tuple[str, bool]]:
    """Return (name, optional) for each input or output of a spec string."""
    return [(item.rstrip("?"), item.endswith("?")) for item in spec.split()]


def attributes(spec: str) -> list[tuple[str, str, bool]]:
    """Return (name, ONNX attribute type name, required) for each attribute of a spec string."""
    found = []
    for item in spec.split():
        name, kind = item.split(":")
        found.append((name, kind.rstrip("!"), kind.endswith("!")))
    return found
