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
from .problem import Problem


def route_failures(d: Any, p: Problem, config: RuntimeConfig, backend: Backend) -> list[Failure]:
    """Return the family's own run-time errors on the route at problem p: none."""
    return []
