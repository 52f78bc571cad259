"""The node readers by ONNX op type: the one place that names them.

`FAMILY_READERS` maps each spec family's name (`attnws.spec.families.FAMILIES`) to its reader
module (`attnws.model.readers.<family>`); `READERS` lists every operator's `NodeReader` by ONNX
op type, families in the spec's order. The shared modules of the model layer look a node's reader
up here (`reader_of`, `reader_for`) instead of naming operators. Adding a family is a reader module
and one line below.

`IN_PROGRESS_READERS` declares the families whose readers are in progress: not `NodeReader`s,
read by `attnws.model.in_progress` only (`in_progress_reader`), not through the shared pipeline.
Every spec family (`attnws.spec.families.FAMILIES`) is in exactly one of the two; an in-progress
reader may also be of a spec family still under construction (`attnws.spec.families.IN_PROGRESS`).

Today `IN_PROGRESS_READERS` holds `gqa`: the spec registers the family, but the shared pipeline
cannot size its nodes. `report.node_report` estimates a node from num_heads and its positional
shapes (`attnws.spec.estimate.estimate_from_hints`), which declares nothing for
GroupQueryAttention, whose kv_num_heads, window, rotary and quantization are attributes
(`problem_from_hints` of `attnws.spec.gqa.inputs`); ORT's estimator also reads the session option
--max-total-seq and whether the head sink is a constant (prepacked). And `prove` runs the shared
theorems (`solver.theorems`, `solver.tight`), while the family's proofs are its own
(`attnws.solver.gqa_proofs`, decode and prefill proved for every node). Its line moves to
`FAMILY_READERS` when both take its nodes.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from ..spec.problem import Op
from .reader import NodeReader
from .readers import gqa, mha, packed

FAMILY_READERS: dict[str, ModuleType] = {"packed": packed, "mha": mha}
READERS: dict[str, NodeReader] = {r.op_type: r for module in FAMILY_READERS.values() for r in module.READERS}
IN_PROGRESS_READERS: dict[str, ModuleType] = {"gqa": gqa}
_IN_PROGRESS: dict[str, Any] = {r.op_type: r for module in IN_PROGRESS_READERS.values() for r in module.READERS}


def in_progress_reader(op_type: str) -> Any:
    """Return the reader of an in-progress family's ONNX op type, None for any other op type."""
    return _IN_PROGRESS.get(op_type)


def reader_of(op_type: str) -> NodeReader:
    """Return the reader of an attention node's ONNX op type (one of `READERS`)."""
    return READERS[op_type]


def reader_for(op: Op) -> NodeReader:
    """Return the reader of a spec operator."""
    return READERS[op.onnx_name]


def op_types_text(conjunction: str, *, own_estimate: bool = False) -> str:
    """Return the op types read, "A, B or C" (`conjunction` "or"); with `own_estimate` only those
    ORT has no Level-1 estimator for (attnws's own applies)."""
    return _joined([t for t, r in READERS.items() if not (own_estimate and r.ort_estimator)], conjunction)


def in_progress_op_types_text(conjunction: str) -> str:
    """Return the op types the in-progress readers read, "A, B or C" (`conjunction` "or")."""
    return _joined(list(_IN_PROGRESS), conjunction)


def _joined(names: list[str], conjunction: str) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} {conjunction} {names[-1]}"
