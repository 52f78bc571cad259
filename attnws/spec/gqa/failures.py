"""Where GroupQueryAttention's routes fail at run time once ORT picked them (ORT 1.31.1): none is
modelled. Its builder refuses the shapes ORT's CheckInputs refuses and the recipes raise ORT's
own sizing errors ("GQA ... workspace sizing failed: ...", `attnws.spec.gqa.recipe`); when no
backend runs the problem, the dispatch says ORT's error (`dispatch.no_route`). What the 1.31.1
sources would add here is not stored (XQA's grid limits, #32696's separate past buffer:
docs/research/gqa-inputs-dispatch.md).
"""

from __future__ import annotations

from typing import Any

from ..gates import Failure
from ..options import RuntimeConfig
from ..problem import Backend


# The run-time failure kinds of this family's routes, and their examples for `attnws ort-failures`: none.
KINDS: tuple[str, ...] = ()
# Where no backend runs a shape (the shared kind `no_route`), beside a running neighbour, on sm75:
# (kind, where, fails when, failing geometry fields, running ones, sm).
EXAMPLES = (
    ("no_route", "GroupQueryAttention, when every route of its cascade passes the shape over",
     "bf16 before sm80 (XQA, Flash and MEA need sm80 for it) with smooth softmax or a head sink, which the unfused "
     "route does not run",
     {"bf16": True, "smooth_softmax": True, "kv_heads": 1, "total_seq": 16, "past": 16},
     {"smooth_softmax": True, "kv_heads": 1, "total_seq": 16, "past": 16}, 75),
)
TRT_FORMS: tuple = ()  # GroupQueryAttention has no TRT fused runner

def route_failures(d: Any, p: Any, config: RuntimeConfig, backend: Backend) -> list[Failure]:
    """Return the run-time errors the route can hit at problem p once dispatch picked it: none."""
    return []
