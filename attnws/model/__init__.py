"""attnws.model: Level-1 and Level-2 workspace for the attention nodes of ONNX models.

Imports `attnws.spec` and the `onnx` package (the specification itself never imports onnx).
`load_model` reads and checks a file, `analyze_model` infers the maximum shapes at the user's
bounds, and at what the model determines from them (`derive.resolve`: B + 1, T <= B * S, the
graph's own equalities; what is still missing is named), and estimates every attention node a
reader of `registry` reads (PackedAttention, PackedMultiHeadAttention, MultiHeadAttention,
GroupQueryAttention: each by its reader's hooks), subgraphs and every call of a model-local
function included (`functions`); `node_target` turns a sized node into the target the solver
quantifies over; `reserve` says what to reserve (peak and sum, ORT's bound, the proven maxima and
each memory pattern's).
"""

from .bounds import ShapeBounds, parse_dims, parse_max_shape_override, shape_bounds
from .derive import Derived, Missing, resolve
from .errors import BadModel, ModelTooLarge
from .infer import infer_max_shapes
from .load import DEFAULT_MAX_MODEL_BYTES, DEFAULT_MAX_MODEL_NODES, load_model, parse_model
from .report import ModelReport, NodeReport, analyze_model, node_report, node_target

__all__ = [
    "BadModel", "DEFAULT_MAX_MODEL_BYTES", "DEFAULT_MAX_MODEL_NODES", "Derived", "Missing", "ModelReport", "ModelTooLarge",
    "NodeReport", "ShapeBounds", "analyze_model", "resolve", "infer_max_shapes", "load_model", "node_report", "node_target", "parse_dims",
    "parse_max_shape_override", "parse_model", "shape_bounds",
]
