"""The recipe record and its views: what lies where inside each allocation.

`Recipe` mirrors ORT's PackedAttentionWorkspaceRecipe field for field (all *_bytes are bytes).
`views(recipe)` lists the byte ranges a backend touches, so that containment checks, the solver's
containment theorem and the kernels' carving all read the same description.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from .errors import InvalidArgument
from .problem import Backend, Op, QkvLayout

PROJECTION = "projection"
ATTENTION = "attention"


@dataclass(frozen=True)
class Recipe:
    """One route's workspace, under ONNX Runtime's field names. Every *_bytes field is bytes."""

    op: Op
    backend: Backend
    projection_bytes: Any = 0
    attention_workspace_bytes: Any = 0
    projection_m: Any = 0
    projection_n: Any = 0
    projection_k: Any = 0
    no_qkv_workspace: bool = False
    qkv_capacity_bytes: Any = 0
    qkv_layout: QkvLayout = QkvLayout.NONE
    q_offset_bytes: Any = 0
    q_bytes: Any = 0
    k_offset_bytes: Any = 0
    k_bytes: Any = 0
    v_offset_bytes: Any = 0
    v_bytes: Any = 0
    interleaved_qkv_offset_bytes: Any = 0
    interleaved_qkv_bytes: Any = 0
    backend_workspace_offset_bytes: Any = 0
    backend_workspace_bytes: Any = 0
    has_second_scratch: bool = False
    second_scratch_offset_bytes: Any = 0

    def as_dict(self) -> dict[str, Any]:
        """Return the fields under ORT's names, enums as their string values."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = value.value if isinstance(value, (Op, Backend, QkvLayout)) else value
        return out

    def allocations(self) -> list[tuple[str, Any]]:
        """Return the (purpose, bytes) of each runtime allocation in order: PA's projection then
        attention (both live until the kernel returns); PMHA's single attention allocation."""
        if self.op is Op.PA:
            return [(PROJECTION, self.projection_bytes), (ATTENTION, self.attention_workspace_bytes)]
        return [(ATTENTION, self.attention_workspace_bytes)]

    def route_text(self) -> str:
        """What the route does beyond its backend's name, in words ('': nothing)."""
        return ""

    def views(self) -> list["View"]:
        """Return every view the backend reads or writes; all are live together."""
        out: list[View] = []
        if self.op is Op.PA:
            out.append(View("projection", PROJECTION, 0, self.projection_bytes))
        if self.qkv_layout is QkvLayout.PLANAR:
            out += [
                View("q", ATTENTION, self.q_offset_bytes, self.q_bytes),
                View("k", ATTENTION, self.k_offset_bytes, self.k_bytes),
                View("v", ATTENTION, self.v_offset_bytes, self.v_bytes),
            ]
        elif self.qkv_layout is QkvLayout.INTERLEAVED:
            out.append(View("qkv_interleaved", ATTENTION, self.interleaved_qkv_offset_bytes,
                            self.interleaved_qkv_bytes))
        if self.backend is not Backend.TRT:
            first = {Backend.FLASH: "softmax_lse", Backend.MEA: "mea_accumulator", Backend.UNFUSED: "scores"}
            out.append(View(first[self.backend], ATTENTION, self.backend_workspace_offset_bytes,
                            self.backend_workspace_bytes))
        if self.has_second_scratch:
            out.append(View("probabilities", ATTENTION, self.second_scratch_offset_bytes,
                            self.backend_workspace_bytes))
        return out


@dataclass(frozen=True)
class View:
    """A byte range [offset, offset + nbytes) inside the allocation named `allocation`."""

    name: str
    allocation: str
    offset: Any
    nbytes: Any

    @property
    def end(self) -> Any:
        return self.offset + self.nbytes


def views(r: Any) -> list[View]:
    """Return every view of the recipe (any family's) that the backend reads or writes; all are
    live together."""
    return r.views()


def require_views_within(d: Any, shown: list[View], total: Any) -> None:
    """Containment of a one-allocation recipe: raise InvalidArgument (in the solver's domain,
    record the obligation) unless every view's end, computed with checked addition, lies within
    the `total` bytes of the workspace."""
    for v in shown:
        end = d.add(v.offset, v.nbytes, what=f"end of view {v.name}")
        d.require(end <= total, lambda v=v, end=end: InvalidArgument(
            f"view {v.name} [{v.offset}, {end}) exceeds the workspace of {total} bytes"))
