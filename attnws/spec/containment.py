"""Containment validation: every view of a recipe lies inside its allocation.

`validate_recipe` is ONNX Runtime's ValidatePackedAttentionWorkspaceRecipe (the layout fields are
consistent and each view's end, computed with checked addition, is <= the allocation).
`overlapping_views` and `misaligned_views` are the stronger properties attnws adds: live views
are pairwise disjoint, and the unfused scratch regions and PA's attention root are 256-aligned.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

from .errors import InvalidArgument
from .layout import ATTENTION, PROJECTION, Recipe, View, views
from .limits import WORKSPACE_ALIGNMENT
from .problem import Op, QkvLayout


def _zero(*values: Any) -> list[Any]:
    return [v == 0 for v in values]


def validate_range(d: Any, r: Recipe, offset: Any, nbytes: Any, name: str) -> None:
    """Check offset + nbytes (checked) <= attention_workspace_bytes."""
    end = d.add(offset, nbytes, what=f"end of view {name}")
    d.require(
        end <= r.attention_workspace_bytes,
        lambda: InvalidArgument(
            f"view {name} [{offset}, {end}) exceeds its allocation of {r.attention_workspace_bytes} bytes"
        ),
    )


def validate_recipe(d: Any, r: Recipe) -> None:
    """Raise InvalidArgument unless the recipe's layout fields agree and every view is contained
    (a MultiHeadAttention recipe: `attnws.spec.mha.recipe.validate_views`)."""
    if r.op is Op.MHA:
        from .mha.recipe import validate_views

        validate_views(d, r)
        return
    d.require(
        r.qkv_capacity_bytes <= r.attention_workspace_bytes,
        lambda: InvalidArgument(
            f"QKV capacity {r.qkv_capacity_bytes} exceeds the attention allocation {r.attention_workspace_bytes}"
        ),
    )
    planar = (r.q_offset_bytes, r.q_bytes, r.k_offset_bytes, r.k_bytes, r.v_offset_bytes, r.v_bytes)
    interleaved = (r.interleaved_qkv_offset_bytes, r.interleaved_qkv_bytes)
    if r.qkv_layout is QkvLayout.NONE:
        if not r.no_qkv_workspace:
            raise InvalidArgument("a recipe without QKV layout must be a no-QKV-workspace recipe")
        d.require(d.all_(*_zero(*planar, *interleaved)),
                  lambda: InvalidArgument("a no-QKV-workspace recipe exposes QKV workspace views"))
    elif r.qkv_layout is QkvLayout.PLANAR:
        if r.no_qkv_workspace:
            raise InvalidArgument("a planar QKV recipe is marked no-QKV-workspace")
        d.require(d.all_(*_zero(*interleaved)),
                  lambda: InvalidArgument("a planar QKV recipe has interleaved view fields"))
        validate_range(d, r, r.q_offset_bytes, r.q_bytes, "q")
        validate_range(d, r, r.k_offset_bytes, r.k_bytes, "k")
        validate_range(d, r, r.v_offset_bytes, r.v_bytes, "v")
    elif r.qkv_layout is QkvLayout.INTERLEAVED:
        if r.no_qkv_workspace:
            raise InvalidArgument("an interleaved QKV recipe is marked no-QKV-workspace")
        d.require(d.all_(*_zero(*planar)),
                  lambda: InvalidArgument("an interleaved QKV recipe exposes planar Q/K/V views"))
        validate_range(d, r, r.interleaved_qkv_offset_bytes, r.interleaved_qkv_bytes, "qkv_interleaved")
    else:
        raise InvalidArgument(f"QKV workspace layout {r.qkv_layout!r} is invalid")
    validate_range(d, r, r.backend_workspace_offset_bytes, r.backend_workspace_bytes, "backend workspace")
    if r.has_second_scratch:
        validate_range(d, r, r.second_scratch_offset_bytes, r.backend_workspace_bytes, "second scratch")
    else:
        d.require(
            r.second_scratch_offset_bytes == 0,
            lambda: InvalidArgument(
                f"a recipe without a second scratch region has second-scratch offset {r.second_scratch_offset_bytes}"
            ),
        )


def disjoint(d: Any, a: View, b: View) -> Any:
    """Return the condition that views a and b share no byte (empty views share none)."""
    if a.allocation != b.allocation:
        return True
    return d.any_(a.nbytes == 0, b.nbytes == 0, a.end <= b.offset, b.end <= a.offset)


def view_pairs(r: Recipe) -> list[tuple[View, View]]:
    """Return every pair of views live at the same time (all of a recipe's views are)."""
    return list(combinations(views(r), 2))


def overlapping_views(r: Recipe) -> list[tuple[str, str]]:
    """Return the names of concretely overlapping view pairs (empty when the layout is sound)."""
    from .domain import CONCRETE

    return [(a.name, b.name) for a, b in view_pairs(r) if not disjoint(CONCRETE, a, b)]


def aligned_quantities(r: Recipe) -> list[tuple[str, Any]]:
    """Return (name, bytes) of each quantity that must be a multiple of 256: the unfused scratch
    region size (its offsets follow C, which ORT does not align); for MultiHeadAttention every
    scratch region ORT sizes with AlignSize (the unfused regions, the TRT sequence offsets)."""
    if r.op is Op.MHA:
        aligned = ("scores", "probabilities", "sequence_offsets", "q_sequence_offsets", "kv_sequence_offsets")
        return [(f"{v.name} region", v.nbytes) for v in views(r) if v.name in aligned]
    if not r.has_second_scratch:
        return []
    return [("unfused scratch region", r.backend_workspace_bytes)]


def misaligned(r: Recipe) -> list[tuple[str, Any]]:
    """Return the aligned_quantities entries that are not multiples of 256 (concrete recipes)."""
    return [(name, value) for name, value in aligned_quantities(r) if value % WORKSPACE_ALIGNMENT]


__all__ = [
    "ATTENTION", "PROJECTION", "aligned_quantities", "disjoint", "misaligned", "overlapping_views",
    "validate_range", "validate_recipe", "view_pairs",
]
