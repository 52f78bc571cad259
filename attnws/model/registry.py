"""The node readers by ONNX op type: the one place that names them.

`FAMILY_READERS` maps each spec family's name (`attnws.spec.families.FAMILIES`) to its reader
module (`attnws.model.readers.<family>`); `READERS` lists every operator's `NodeReader` by ONNX
op type, families in the spec's order. The shared modules of the model layer look a node's reader
up here (`reader_of`, `reader_for`) instead of naming operators. Adding a family is a reader module
and one line below.

`IN_PROGRESS_READERS` lists the readers of the spec's in-progress families
(`attnws.spec.families.IN_PROGRESS`: no `Op` yet, so not `NodeReader`s), read by
`attnws.model.in_progress` only (`in_progress_reader`); a family that registers moves its line to
`FAMILY_READERS`.
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
    names = [t for t, r in READERS.items() if not (own_estimate and r.ort_estimator)]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} {conjunction} {names[-1]}"
