"""The node readers by ONNX op type: the one place that names them.

`FAMILY_READERS` maps each spec family's name (`attnws.spec.families.FAMILIES`) to its reader
module (`attnws.model.readers.<family>`); `READERS` lists every operator's `NodeReader` by ONNX
op type, families in the spec's order. The shared modules of the model layer look a node's reader
up here (`reader_of`, `reader_for`) instead of naming operators, and call its hooks. Adding a
family is a reader module and one line below.
"""

from __future__ import annotations

from types import ModuleType

from ..spec.problem import Op
from .reader import NodeReader
from .readers import gqa, mha, packed, paged

FAMILY_READERS: dict[str, ModuleType] = {"packed": packed, "mha": mha, "gqa": gqa, "paged": paged}
READERS: dict[str, NodeReader] = {r.op_type: r for module in FAMILY_READERS.values() for r in module.READERS}


def reader_of(op_type: str) -> NodeReader:
    """Return the reader of an attention node's ONNX op type (one of `READERS`)."""
    return READERS[op_type]


def reader_for(op: Op) -> NodeReader:
    """Return the reader of a spec operator."""
    return READERS[op.onnx_name]


def op_types_text(conjunction: str, *, own_estimate: bool | None = None, option: str = "") -> str:
    """Return the op types read, "A, B or C" (`conjunction` "or"); with `own_estimate` True only
    those ORT has no Level-1 estimator for (attnws's own applies), False only those it has; with
    `option` only those whose estimate reads that `Session` field."""
    names = [t for t, r in READERS.items()
             if (own_estimate is None or r.ort_estimator is not own_estimate)
             and (not option or option in r.session_options)]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} {conjunction} {names[-1]}"
