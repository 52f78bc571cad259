"""Where PackedAttention's and PackedMultiHeadAttention's routes fail at run time once ORT picked
them. They check their shapes before any kernel runs (`packed_attention_workspace.cc`: the
builders' and recipes' InvalidArgument), so only the TRT runner's missing kernel, which
`attnws.spec.runtime_failures` checks for every family, applies to them; errors that depend on
input values (PMHA's unfused route checks every token_offset lies in [0, B * S)) are not run-time
failures of a shape.
"""

from __future__ import annotations

from typing import Any

from ..gates import Failure
from ..options import RuntimeConfig
from ..problem import Backend
from ..problem import Op
from .problem import Problem, QkvFormat


# The run-time failure kinds of this family's routes, and their examples for `attnws ort-failures`: none.
KINDS: tuple[str, ...] = ()
EXAMPLES: tuple = ()
# The forms the TRT fused runner serves, swept for a missing kernel (`attnws ort-failures`): a name,
# the operator, and its `Geometry` fields at S (a packed batch of one full sequence: T = S).
TRT_FORMS = (
    ("PackedAttention", Op.PA, lambda seq: {"tokens": seq}),
    ("PackedMultiHeadAttention, packed QKV", Op.PMHA, lambda seq: {"tokens": seq, "pmha_format": QkvFormat.PACKED}),
    ("PackedMultiHeadAttention, separate Q/K/V", Op.PMHA,
     lambda seq: {"tokens": seq, "pmha_format": QkvFormat.SEPARATE}),
)

def route_failures(d: Any, p: Problem, config: RuntimeConfig, backend: Backend) -> list[Failure]:
    """Return the family's own run-time errors on the route at problem p: none."""
    return []
