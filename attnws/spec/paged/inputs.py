"""PagedAttention's inputs: its seventeen positional inputs (ORT 1.31.1's com.microsoft schema,
`docs/research/paged-attention.md` §1) and the builder's call for a `Geometry`.

Shapes are element counts. The step's lengths S and L are values (the attention_metadata bounds,
or the lengths ORT copies back): a geometry's `seq` and `kv_len`.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..domain import CONCRETE
from ..errors import InternalError, InvalidArgument
from ..hints import MISSING, Geometry, Hint, hint_at, shape_of
from ..problem import Op
from .builder import build_paged_problem
from .problem import CACHE_TYPES, PagedFormat, PagedProblem, metadata_kind

PAGED_INPUTS = ("query", "key", "value", "key_cache", "value_cache", "cumulative_sequence_length", "past_seqlens",
                "block_table", "cos_cache", "sin_cache", "slot_mapping", "head_sink", "q_norm_weight",
                "k_norm_weight", "k_scale", "v_scale", "attention_metadata")


def input_names(op: Op) -> tuple[str, ...]:
    """Return PagedAttention's positional input names."""
    return PAGED_INPUTS


def node_hints(**shapes: Any) -> list[Hint]:
    """Return the positional hints of inputs given by schema name (each a shape; the others MISSING)."""
    unknown = set(shapes) - set(PAGED_INPUTS)
    if unknown:
        raise InternalError(f"PagedAttention has no input {sorted(unknown)}")
    return [shapes.get(name, MISSING) for name in PAGED_INPUTS]


def named_shapes(hints: Sequence[Hint]) -> dict[str, list[Any] | None]:
    """Return each input's shape by schema name (None where absent or of unknown shape)."""
    return {name: shape_of(hint_at(hints, i)) for i, name in enumerate(PAGED_INPUTS)}


def _shapes(g: Geometry) -> dict[str, Any]:
    """The geometry's positional inputs by name: the packed query (with key and value, or packed
    QKV; the latent layout's key [T, H] and no value), the caches of B * M blocks, the length
    vectors, the block table [B, M], and the optional inputs its flags name."""
    b, t, n, nk, h = g.batch, g.t, g.heads, g.kv_heads, g.head_size
    bits = CACHE_TYPES[g.kv_quant][2] if g.kv_quant not in (None, "none") else 1
    blocks = b * g.max_blocks
    cache = [blocks, g.block_size, nk, (h + 1) // 2 if bits == 2 else h]
    shapes: dict[str, Any] = dict(key_cache=cache, cumulative_sequence_length=[b + 1], past_seqlens=[b],
                                  block_table=[b, g.max_blocks])
    if g.latent:
        shapes.update(query=[t, n * h], key=[t, nk * h])
    elif g.paged_format is PagedFormat.PACKED_QKV:
        shapes.update(query=[t, (n + 2 * nk) * h], value_cache=cache)
    else:
        shapes.update(query=[t, n * h], key=[t, nk * h], value=[t, nk * h], value_cache=cache)
    if g.rotary:
        rotary = [g.max_blocks * g.block_size, h // 2]
        shapes.update(cos_cache=rotary, sin_cache=rotary)
    if g.head_sink:
        shapes.update(head_sink=[n])
    if g.qk_norm:
        shapes.update(q_norm_weight=[h], k_norm_weight=[h])
    if g.kv_quant not in (None, "none"):
        scale = [1] if (g.kv_scale or "per_tensor") == "per_tensor" else [nk, 1, h]
        shapes.update(k_scale=scale, **({} if g.latent else {"v_scale": scale}))
    if metadata_kind(g.metadata) == "bounds":
        shapes.update(attention_metadata=[3])
    return shapes


def geometry_hints(g: Geometry) -> list[Hint]:
    """Return PagedAttention's seventeen positional input shapes for the geometry."""
    return node_hints(**_shapes(g))


def attributes(g: Geometry) -> dict[str, Any]:
    """The builder's attribute keywords for the geometry's flags."""
    quantized = g.kv_quant not in (None, "none")
    quant = "PER_CHANNEL" if (g.kv_scale or "per_tensor") == "per_channel" else "PER_TENSOR"
    latent_hv = g.v_head_size not in (None, g.head_size)
    return dict(num_heads=g.heads, kv_num_heads=g.kv_heads, local_window_size=-1 if g.window is None else g.window,
                is_causal=0 if g.non_causal else 1, do_rotary=int(g.rotary), softcap=g.softcap or 0.0,
                kv_cache_layout="LATENT" if g.latent else "SEPARATE",
                v_head_size=(g.v_head_size or 0) if g.latent else 0, scale=1.0 if latent_hv else None,
                cache_type=g.kv_quant if quantized else None, k_quant_type=quant if quantized else "NONE",
                v_quant_type=quant if quantized and not g.latent else "NONE", is_bf16=g.bf16)


def runtime_problem(g: Geometry, d: Any = CONCRETE) -> PagedProblem:
    """Return the validated problem for the geometry taken as one step: its positional shapes
    through the builder, S = `seq` and L = `kv_len` the step's lengths (with metadata, its bounds;
    the lower bound on the key length is L itself)."""
    if g.v_head_size not in (None, g.head_size) and not g.latent:
        raise InvalidArgument(f"v_head_size = {g.v_head_size}: PagedAttention has one head size but under the latent "
                              "layout")
    return build_paged_problem(**_shapes(g), **attributes(g), max_query_len=g.seq, max_kv_len=g.kv_len,
                               kv_lower_bound=g.kv_len, d=d)


def problem_from_hints(op: Op, element_size: int, num_heads: int, hints: Sequence[Hint],
                       qkv_hidden_sizes: Sequence[int] | None = None, *, has_present: bool = False,
                       unidirectional: bool = False) -> tuple[PagedProblem | None, str]:
    """Return (None, why): positional shapes do not give a PagedAttention step's lengths or its
    attributes."""
    return None, ("PagedAttention's shapes do not give its kv_num_heads, its cache layout or a step's lengths: "
                  "describe the node with its flags (--kv-heads, --kv-len, --block-size, --max-blocks, ...)")


def attribute_problem(op: Op, num_heads: int, qkv_hidden_sizes: Sequence[int]) -> str:
    """Return what the node's attributes get wrong, or '': PagedAttention has no qkv_hidden_sizes."""
    sizes = list(qkv_hidden_sizes)
    return f"PagedAttention has no qkv_hidden_sizes attribute, got {sizes}" if sizes else ""


def nonzero_dims(index: int, shape: list[Any]) -> list[Any]:
    """Return the dimensions of input `index` a hint may not give as 0: all of them."""
    return shape
