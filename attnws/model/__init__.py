"""attnws.model: Level-1 and Level-2 workspace for the attention nodes of ONNX models.

Imports `attnws.spec` and the `onnx` package (the specification itself never imports onnx).
`load_model` reads and checks a file, `analyze_model` infers the maximum shapes at the user's
bounds, and at what the model determines from them (`derive.resolve`: B + 1, T <= B * S, the
graph's own equalities; what is still missing is named), and estimates every attention node a
reader of `registry` reads (PackedAttention, PackedMultiHeadAttention, MultiHeadAttention,
GroupQueryAttention: each by its reader's hooks), subgraphs and every call of a model-local
function included (`functions`); `node_target` turns a sized node into the target the solver
quantifies over; `reserve` says what to reserve (peak and sum, ORT's bound, the proven maxima and
each memory pattern's). The public names load on first use: importing the package loads no onnx.
"""

import importlib
from typing import Any

EXPORTS = {
    "ShapeBounds": "bounds", "parse_dims": "bounds", "parse_max_shape_override": "bounds", "shape_bounds": "bounds",
    "DEFAULT_MAX_MODEL_BYTES": "bounds", "DEFAULT_MAX_MODEL_NODES": "bounds", "Derived": "derive", "Missing": "derive",
    "resolve": "derive", "BadModel": "errors", "ModelTooLarge": "errors", "infer_max_shapes": "infer",
    "load_model": "load", "parse_model": "load", "ModelReport": "report", "NodeReport": "report",
    "analyze_model": "report", "node_report": "report", "node_target": "report",
}
__all__ = sorted(EXPORTS)


def __getattr__(name: str) -> Any:
    if name in EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
