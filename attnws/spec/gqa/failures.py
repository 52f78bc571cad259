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


def route_failures(d: Any, p: Any, config: RuntimeConfig, backend: Backend) -> list[Failure]:
    """Return the run-time errors the route can hit at problem p once dispatch picked it: none."""
    return []
